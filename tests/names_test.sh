#!/bin/sh
# names_test.sh BUILD_DIR SOURCE_DIR - the names every output gives owners, packages and threads
# (docs/ATTRIBUTION.md, "Grouping"; docs/RECORDER.md, the flight record):
# - grouped by package, the program's own row is named as the owner tag names the program's code,
#   by what the user ran ("program (names_prog)", "program (attention.py)"), never "the program";
# - a library is one name everywhere: owners' row, the [owner] tag of leaks, peak and oom, the
#   rows grouped by module, the HTML report and --json's owner_name ("cuBLASLt (libcublasLt.so.12)");
# - peak's and oom's rows grouped by module, file or package list their sites ("of it, by site:"),
#   as leaks' do, and --json's by_site.
TEST=names . "$(dirname "$0")/testlib.sh"
P=$B/tests/names_prog
L() { grep -n "L:$1" "$SRC/tests/names_prog.c" | cut -d: -f1; }
W=$(L weights) U=$(L buffer)

FAKECUDA_CAPACITY=1G "$CMH" record -q -o s.cmh -- "$P" sites >/dev/null 2>err.txt
check "names_prog sites: recorded, its OOM too ($(head -c 200 err.txt))" '[ -s s.cmh ]'

# --- 1. grouped by package, the program's row by the program's name, in every command taking it ---
for c in leaks peak oom; do
    "$CMH" $c --group-by package s.cmh >pkg_$c.txt 2>&1
    check "$c --group-by package: the program's row is 'program (names_prog)', as its owner tag ($(grep -m1 'program' pkg_$c.txt | tr -s ' '))" \
        "grep -qE '^ +112.0 MiB .*  program \\(names_prog\\)  \\[program \\(names_prog\\)\\]\$' pkg_$c.txt && ! grep -q 'the program' pkg_$c.txt"
done
"$CMH" report --group-by package -o pkg.html s.cmh >/dev/null 2>&1
check "report --group-by package: its rows are the packages, the program's 'program (names_prog)', not one stack's site" \
    "grep -qE '<tr class=\"peak-site\"[^>]*><td class=\"site\">program \\(names_prog\\)</td>' pkg.html &&
     grep -qE '<tr class=\"end-site\"[^>]*><td class=\"site\">program \\(names_prog\\)</td>' pkg.html && ! grep -q 'the program<' pkg.html"
PT=$SRC/../shared/fixtures/pytorch/transformer_nuggets_mini_snapshot.pickle
if [ -f "$PT" ]; then
    "$CMH" peak --group-by package "$PT" >pt.txt 2>&1
    check "a PyTorch snapshot (no command line): the program's row is its script's name ($(grep -m1 'program' pt.txt | tr -s ' '))" \
        "grep -q '  program (attention.py)  \\[PyTorch\\]' pt.txt && ! grep -q 'the program' pt.txt"
else
    echo "skipped: a PyTorch snapshot's program row (no ../shared/fixtures/pytorch)"
fi

# --- 2. a library: one name in owners, the tags, grouped rows, the report and --json ---
"$CMH" owners s.cmh >owners.txt 2>&1
"$CMH" owners --json s.cmh >owners.json 2>&1
check "owners: the workspace's row is 'cuBLASLt (libcublasLt.so.12)' ($(grep -m1 cuBLAS owners.txt | tr -s ' '))" \
    "grep -qE '32.0 MiB .*  cuBLASLt \\(libcublasLt.so.12\\)\$' owners.txt && grep -qE '80.0 MiB .*  program \\(names_prog\\)\$' owners.txt"
for c in leaks peak oom; do
    "$CMH" $c s.cmh >tag_$c.txt 2>&1
    "$CMH" $c --group-by module s.cmh >mod_$c.txt 2>&1
    check "$c: the workspace's owner tag and its row grouped by module are owners' name ($(grep -m1 cublas tag_$c.txt | tr -s ' '))" \
        "grep -q '  \\[cuBLASLt (libcublasLt.so.12)\\]\$' tag_$c.txt && ! grep -q '\\[libcublasLt' tag_$c.txt &&
         grep -q '  cuBLASLt (libcublasLt.so.12)  \\[cuBLASLt (libcublasLt.so.12)\\]\$' mod_$c.txt"
done
"$CMH" report -o r.html s.cmh >/dev/null 2>&1
check "report: the peak table's owner column is owners' name" \
    "grep -q '<td class=\"nw\">cuBLASLt (libcublasLt.so.12)</td>' r.html && grep -q '<td class=\"nw\">program (names_prog)</td>' r.html"
"$CMH" peak --json s.cmh >peak.json 2>&1
"$CMH" leaks --json s.cmh >leaks.json 2>&1
"$CMH" oom --json s.cmh >oom.json 2>&1
check "--json: each site's owner_name is owners' row (owner stays the module)" "py - <<'PY'
import json
rows = {r['owner'] for d in json.load(open('owners.json')) for m in d['moments'] for r in m['rows']}
names = set()
for d in json.load(open('peak.json')): names |= {(x['owner'], x['owner_name']) for x in d['sites_at_peak']}
for d in json.load(open('leaks.json')): names |= {(x['owner'], x['owner_name']) for x in d['sites']}
for d in json.load(open('oom.json')):
    for o in d['ooms']: names |= {(x['owner'], x['owner_name']) for x in o['sites']}
assert names == {('libcublasLt.so.12', 'cuBLASLt (libcublasLt.so.12)'), ('names_prog', 'program (names_prog)')}, names
assert {n for _, n in names} <= rows, (names, rows)
PY"
"$CMH" peak "$F/h200/torch_exp.cmh" >h200.txt 2>&1
"$CMH" owners "$F/h200/torch_exp.cmh" >h200_owners.txt 2>&1
# (a record of a Python job made without Python stacks: no row has a frame of the user's, and its
# site says so, docs/ATTRIBUTION.md)
check "the H200 record: cuBLAS's workspace is 'cuBLAS (libcublas.so.13)' in peak's tag and owners' row" \
    "grep -q '(no user frame: cublasCreate_v2 (libcublas.so.13))  \\[cuBLAS (libcublas.so.13)\\]' h200.txt && grep -qE '128.3 MiB .*  cuBLAS \\(libcublas.so.13\\)\$' h200_owners.txt"

"$CMH" export -q -f json -o s.json s.cmh >/dev/null 2>&1
"$CMH" export -q -f sqlite -o s.db s.cmh >/dev/null 2>&1
"$CMH" export -q -f pprof -o s.pb.gz s.cmh >/dev/null 2>&1
check "export json (stack_owners), sqlite (sites.owner) and pprof (label owner): owners' names, bytes as owners counts them" "py - <<'PY'
import gzip, json, sqlite3
d = json.load(open('s.json'))
assert sorted(set(d['cumemhist']['stack_owners'])) == ['', 'cuBLASLt (libcublasLt.so.12)', 'program (names_prog)'], d['cumemhist']['stack_owners']
db = sqlite3.connect('s.db')
got = dict(db.execute('SELECT s.owner, SUM(bl.size) FROM blocks bl JOIN sites s ON s.process_id = bl.process_id AND s.stack_id = bl.stack_id GROUP BY s.owner'))
assert got == {'cuBLASLt (libcublasLt.so.12)': 32 << 20, 'program (names_prog)': 80 << 20}, got
b = gzip.open('s.pb.gz').read()
assert b'cuBLASLt (libcublasLt.so.12)' in b and b'program (names_prog)' in b and b'owner' in b
PY"
if command -v go >/dev/null 2>&1 && go tool pprof -h >/dev/null 2>&1; then
    go tool pprof -tags s.pb.gz >tags.txt 2>&1
    check "go tool pprof -tags: the live bytes by owner, owners' figures ($(tr -s ' ' <tags.txt | tr '\n' '|'))" \
        "grep -qE '80.0MB .*: program \\(names_prog\\)' tags.txt && grep -qE '32.0MB .*: cuBLASLt \\(libcublasLt.so.12\\)' tags.txt"
fi

# --- 3. peak's and oom's grouped rows list their sites, as leaks' do ---
for c in peak oom; do
    "$CMH" $c --group-by module s.cmh >split_${c}_module.txt 2>&1
    "$CMH" $c --group-by file s.cmh >split_${c}_file.txt 2>&1
    check "$c --group-by module: the program's row lists its sites ($(grep -m1 'of it' split_${c}_module.txt | tr -s ' '))" \
        "grep -qE '^ +of it, by site: 64.0 MiB weights \\(.*names_prog.c:$W\\), 16.0 MiB buffer \\(.*names_prog.c:$U\\)\$' split_${c}_module.txt"
    check "$c --group-by file: the file's row lists its three sites, the workspace's line among them ($(grep -m1 'of it' split_${c}_file.txt | tr -s ' '))" \
        "grep -qE '^ +of it, by site: 64.0 MiB weights \\(.*names_prog.c:$W\\), 32.0 MiB main \\(.*names_prog.c:[0-9]+\\), 16.0 MiB buffer \\(.*names_prog.c:$U\\)\$' split_${c}_file.txt"
done
"$CMH" peak --json --group-by module s.cmh >split_peak.json 2>&1
"$CMH" oom --json --group-by module s.cmh >split_oom.json 2>&1
check "peak and oom --json --group-by module: a row's by_site lists its sites' bytes" "py - <<'PY'
import json
p = json.load(open('split_peak.json'))[0]['sites_at_peak'][0]
o = json.load(open('split_oom.json'))[0]['ooms'][0]['sites'][0]
for r in (p, o):
    assert r['owner_name'] == 'program (names_prog)', r
    assert [(x['site']['function'], x['bytes'], x['blocks']) for x in r['by_site']] == [('weights', 64 << 20, 1), ('buffer', 16 << 20, 2)], r['by_site']
PY"
# --- 4. the names of threads whose records were in the extents a checkpoint let go ---
# a bounded ring (1,000 entries) with 1 MiB first extents: 3 x 150,000 pairs cross a generation
# (16 MiB), so the helper writes a checkpoint and drops the first generation, where the three
# loader threads were named; SIGKILLed after, recovered: the names come from the checkpoint
CUMEMHIST_FLIGHT=1 CUMEMHIST_MAX_ENTRIES=1000 CUMEMHIST_OUTPUT=$T/th.cmh LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" "$P" threads 150000 2>/dev/null
check "threads: a checkpoint was written before the SIGKILL" 'ls th.cmh.flight.ckpt*.cmh >/dev/null 2>&1'
"$CMH" recover th.cmh.flight >rec.txt 2>&1
"$CMH" export -q -o th.pickle th.cmh >/dev/null 2>&1
check "recover: every thread keeps its name, the loaders named only in the dropped generation too ($(tail -c 300 rec.txt))" "py - <<'PY'
import pickle
c = pickle.load(open('th.pickle', 'rb'))['cumemhist']
names = sorted(n for _, _, n in c['thread_ids'])
assert names == ['loader-0', 'loader-1', 'loader-2', 'names_prog'], c['thread_ids']
PY"
# --- 5. a pickle with a class reference (GLOBAL, STACK_GLOBAL): what it holds, what a snapshot may ---
py - <<'PY'
import collections, pickle
d = {'segments': [], 'device_traces': [[]], 'user_metadata': collections.OrderedDict(run=1)}
for proto in (2, 4):
    open('od%d.pickle' % proto, 'wb').write(pickle.dumps(d, protocol=proto))
PY
for proto in 2 4; do
    "$CMH" summary od$proto.pickle >od.out 2>od.err
    rc=$?
    check "a protocol $proto pickle holding an OrderedDict: refused, naming the class and what a snapshot holds ($(cat od.err))" \
        "[ $rc -ne 0 ] && grep -q 'od$proto.pickle: it holds a Python object, collections.OrderedDict (pickle opcode 0x[0-9a-f]* [A-Z_]*GLOBAL at byte [0-9]*; never imported nor run): a memory snapshot (torch.cuda.memory._dump_snapshot()) holds only dicts, lists, tuples, strings, numbers, booleans and None' od.err"
done
# --- 6. a process still running when record returns, whose flight record is in the runtime
# directory (its snapshot streamed through a device; its directory with no room for the record):
# named with the path the process writes, not the record's name in the runtime directory ---
O=$B/tests/outpath_prog
bg() { # bg OUTPUT TAG: record a background process that waits for TAG.go; its pid
    rm -f "$T/$2.ready"
    "$CMH" record -o "$1" -- sh -c "\"$O\" -r \"$T/$2.ready\" -w \"$T/$2.go\" & while [ ! -s \"$T/$2.ready\" ]; do sleep 0.05; done" >$2.out 2>&1
    cat "$T/$2.ready"
}
BP=$(bg /dev/null dn)
check "a background process writing through /dev/null is named with it, not its record's name in the runtime directory ($(cat dn.out))" \
    "grep -qF 'cumemhist: pid $BP is still running; it writes its snapshot through /dev/null when it ends (a character device: nothing of it is kept there; a copy now: cumemhist recover --live $XDG_RUNTIME_DIR/cumemhist/null.$BP.cmh.flight)' dn.out"
touch dn.go
mkdir full
if mount -t tmpfs -o size=64k tmpfs full 2>mount.err; then
    trap 'umount "$T/full" 2>/dev/null; rm -rf "$T"' EXIT
    dd if=/dev/zero of=full/fill bs=4k count=64 2>/dev/null
    BP=$(bg "$T/full/bg.cmh" fb)
    check "a background process whose directory had no room for its flight record is named with its snapshot's path there ($(tail -1 fb.out))" \
        "grep -qF 'cumemhist: pid $BP is still running; it writes $T/full/bg.$BP.cmh when it ends (a copy now: cumemhist recover --live $XDG_RUNTIME_DIR/cumemhist/bg.$BP.cmh.flight)' fb.out"
    rm -f full/fill
    touch fb.go
    wait_until 30 "[ -f full/bg.$BP.cmh ]" && ok "and it writes it there (room made meanwhile)" || bad "full/bg.$BP.cmh was not written"
    umount full 2>/dev/null
else
    echo "skipped: a full directory (tmpfs): cannot mount one here ($(head -1 mount.err))"
fi
finish
