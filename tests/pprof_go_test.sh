#!/bin/sh
# pprof_go_test.sh BUILD_DIR SOURCE_DIR - Go's own pprof reads our profiles as the reports read
# the record: file and line of the program's frames, names as written ("<module>", "(anonymous
# namespace)" kept: pprof must not demangle them again), one mapping per module, the
# program first ("File:"), every device labelled; the figures those of leaks and peak.  Skipped (77)
# without `go` (Debian golang-go; scripts/deps.sh installs it).
TEST=pprof_go . "$(dirname "$0")/testlib.sh"
command -v go >/dev/null 2>&1 || { echo "skip: go is not installed (apt-get install golang-go)"; exit 77; }
export GOCACHE="$T/gocache" GOPATH="$T/go" HOME="$T"

"$CMH" record -q -o l.cmh -- "$B/samples/leaky" 4 >/dev/null
"$CMH" export -o l.pb.gz l.cmh
go tool pprof -top -lines l.pb.gz >top.txt 2>err.txt
go tool pprof -traces l.pb.gz >traces.txt 2>&1
# a C program's stacks, as leaks prints them: from the site out to main, libc's start left out
grep -q '^File: leaky$' top.txt && grep -q '^ *main$' traces.txt && ! grep -qE '_start|__libc_start' traces.txt &&
    ok "a C record: File: leaky; its stacks end at main, no _start" || bad "C record: $(head -3 top.txt; head -12 traces.txt)"
grep -q 'load_batch .*leaky\.c:[0-9][0-9]*$' top.txt && grep -q 'main .*leaky\.c:[0-9][0-9]*$' top.txt &&
    ok "go tool pprof -top -lines: leaky.c:LINE" || bad "pprof lines: $(cat top.txt err.txt | head -12)"
go tool pprof -raw l.pb.gz >raw.txt 2>&1
sed -n '/^Mappings/,$p' raw.txt | grep '^[0-9]*:' >maps.txt
n=$(wc -l <maps.txt) u=$(awk '{print $2}' maps.txt | sort -u | wc -l)
[ "$n" -ge 1 ] && [ "$n" -eq "$u" ] && grep -q '/leaky ' maps.txt && ! grep -v '\[FN\]\[FL\]\[LN\]' maps.txt | grep -q . &&
    ok "one mapping per module ($n), the program's among them, already symbolized" || bad "mappings: $(cat raw.txt | tail -8)"

# --- every device, each labelled (it held one, device 1 of two, with a note on stderr only);
# the figures those of leaks and peak, device by device ---
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G "$CMH" record -q -o mg.cmh -- "$B/samples/multigpu" 4 >/dev/null 2>&1
"$CMH" export -o mg.pb.gz mg.cmh 2>mg.err
"$CMH" leaks --json mg.cmh >mg.leaks.json
"$CMH" peak --json mg.cmh >mg.peak.json
go tool pprof -tags -unit=B mg.pb.gz >mg.tags 2>&1
for d in 0 1; do
    go tool pprof -top -unit=B -tagfocus=device=$d mg.pb.gz >mg.end$d 2>&1
    go tool pprof -top -unit=B -sample_index=peak_space -tagfocus=device=$d mg.pb.gz >mg.peak$d 2>&1
done
py - <<'PY' && ok "two devices: -tags splits the live bytes as leaks does; -tagfocus=device=N gives leaks' and peak's figures of N ($(tr '\n' ' ' <mg.tags))" || bad "two devices: $(cat mg.err mg.tags mg.end1 | head -30)"
import json, re
leaks = {d["device"]: d["live_bytes"] for d in json.load(open("mg.leaks.json"))}
peaks = {d["device"]: d["peak_allocated"]["bytes"] for d in json.load(open("mg.peak.json"))}
assert sorted(leaks) == [0, 1] and all(leaks.values()), leaks
# (with -unit=B pprof prints the label 1 as "1B": -unit reaches numeric labels too)
tags = dict((int(d), int(b)) for b, d in re.findall(r"^\s+(\d+)(?:\.0)?B \(\s*[\d.]+%\): (-?\d+)B?$", open("mg.tags").read(), re.M))
assert tags == leaks, (tags, leaks)
def total(path):
    m = re.search(r"^Showing nodes accounting for (\d+)B, [\d.]+% of (\d+)B total", open(path).read(), re.M)
    assert m, open(path).read()
    return int(m.group(1))
for d in (0, 1):
    assert total("mg.end%d" % d) == leaks[d], (d, total("mg.end%d" % d), leaks[d])
    assert total("mg.peak%d" % d) == peaks[d], (d, total("mg.peak%d" % d), peaks[d])
PY
check "export says which devices the profile holds and how to see one ($(cat mg.err))" \
    "grep -qx 'cumemhist: wrote mg.pb.gz: 1 record, [0-9]* trace entries of devices 0, 1 (label device: -tagfocus=device=N for one)' mg.err &&
     grep -qx 'cumemhist: every device, each sample labelled (-tagfocus=device=N for one); peak_space is each device.s own allocated peak, each at its own moment: unfiltered, it adds them, what the devices held at their peaks together, not one moment.s total; device 0, live at the end (entry [0-9]*) and at the allocated peak (entry [0-9]*), no out-of-memory error (oom_space 0); device 1, live at the end (entry [0-9]*) and at the allocated peak (entry [0-9]*), oom_space at out of memory #1 (entry [0-9]*, as .cumemhist oom. shows it)' mg.end0"
# the device label reads as a device's number (it read 'device:[0 count]' in -raw, a count of
# none), and unfiltered peak_space is what the comment says: the devices' own peaks added
go tool pprof -raw mg.pb.gz >mg.raw 2>&1
go tool pprof -top -unit=B -sample_index=peak_space mg.pb.gz >mg.peakall 2>&1
check "-raw: device:[0 index] and device:[1 index], no count ($(grep -o 'device:\[[^]]*\]' mg.raw | sort -u | tr '\n' ' '))" \
    "[ \"\$(grep -o 'device:\[[^]]*\]' mg.raw | sort -u | tr '\n' ' ')\" = 'device:[0 index] device:[1 index] ' ]"
py - <<'PY' && ok "unfiltered peak_space: device 0's peak plus device 1's, as the comment says" || bad "unfiltered peak_space: $(head -8 mg.peakall)"
import json, re
peaks = [d["peak_allocated"]["bytes"] for d in json.load(open("mg.peak.json"))]
t = open("mg.peakall").read()
m = re.search(r"^Showing nodes accounting for (\d+)B, [\d.]+% of (\d+)B total", t, re.M)
assert m and int(m.group(2)) == sum(peaks), (m and m.group(2), peaks)
assert "peak_space is each device's own allocated peak, each at its own moment: unfiltered, it adds them" in t, t[:600]
PY
"$CMH" export --device 1 -o mg1.pb.gz mg.cmh 2>/dev/null
go tool pprof -tags mg1.pb.gz >mg1.tags 2>&1
check "--device 1: that device alone ($(tr '\n' ' ' <mg1.tags))" "grep -qE '\): 1\$' mg1.tags && ! grep -qE '\): 0\$' mg1.tags"

# --- a Python program (ctypes calling the driver): pprof names the script, not the interpreter
# (it said "File: libpython3.11.so.1.0"), and its stacks end at the outermost Python frame, as
# leaks and the flamegraph show them (they kept Py_BytesMain, _start, PyRun_* outward) ---
PY3=/usr/bin/python3
case "${LD_PRELOAD:-}" in *asan* | *ubsan* | *tsan*) PY3= ;; esac # (python under a sanitizer runtime)
if [ -n "$PY3" ] && [ -x "$PY3" ]; then
    mkdir -p proj/mylib
    cp "$SRC/tests/python/pylib_job.py" proj/job.py
    cp "$SRC/tests/python/pylib_gpu.py" proj/mylib/gpu.py
    A=$(grep -n '# L:alloc$' proj/mylib/gpu.py | cut -d: -f1) W=$(grep -n '# L:weights$' proj/job.py | cut -d: -f1)
    "$CMH" record -q -o py.cmh -- $PY3 proj/job.py own >/dev/null 2>py.err
    "$CMH" export -o py.pb.gz py.cmh 2>/dev/null
    go tool pprof -top py.pb.gz >py.top 2>&1
    go tool pprof -traces py.pb.gz >py.traces 2>&1
    go tool pprof -list build_model py.pb.gz >py.list 2>&1
    go tool pprof -top -lines -unit=B py.pb.gz >py.lines 2>&1
    "$CMH" leaks --json py.cmh >py.leaks.json
    check "a Python record: File: job.py, not the interpreter ($(head -1 py.top))" "grep -qx 'File: job.py' py.top"
    check "its stacks end at <module>: no interpreter frame outward of it ($(grep -E '_start|Py|0x' py.traces | sort -u | head -4 | tr -s ' ' | tr '\n' '|'))" \
        "! grep -qE '_start|__libc|Py_BytesMain|Py_RunMain|PyRun|PyEval|_PyObject|0x[0-9a-f]' py.traces &&
         [ \$(grep -c '^             <module>\$' py.traces) -ge 2 ] && ! grep -A1 '^             <module>\$' py.traces | grep -v '<module>' | grep -q '^             [^-]'"
    check "-list build_model: job.py's line $W holds the 64MB ($(grep -m1 64MB py.list | tr -s ' '))" "grep -qE '^ +\. +64MB +$W:' py.list"
    check "-top -lines: the flat bytes are leaks' sites' (device_alloc gpu.py:$A), the total leaks' ($(grep -m1 device_alloc py.lines | tr -s ' '))" \
        "py - <<'PY'
import json, re
t = open('py.lines').read()
total = int(re.search(r'accounting for (\d+)B', t).group(1))
leaks = json.load(open('py.leaks.json'))[0]
assert total == leaks['live_bytes'], (total, leaks['live_bytes'])
assert re.search(r'^ +%dB +100%% .* device_alloc .*mylib/gpu\.py:$A\$' % total, t, re.M), t
PY"
    "$CMH" flamegraph --folded --at end py.cmh >py.folded 2>/dev/null
    check "the flamegraph's folded stacks agree: they start at <module> ($(head -c 120 py.folded))" \
        "[ \$(grep -c '^<module> (.*proj/job.py:[0-9]*);' py.folded) -eq \$(wc -l <py.folded) ] && [ -s py.folded ]"
    # an interpreter whose CPython is libpython3.11.so (pyenv's, conda's; Debian's python3 links it
    # in statically): Py_BytesMain over the shared library, as Programs/python.c is
    PC=$(command -v python3.11-config || command -v python3-config || true)
    printf '#include <Python.h>\nint main(int argc, char **argv) { return Py_BytesMain(argc, argv); }\n' >embed.c
    if [ -n "$PC" ] && cc -o embedpy embed.c $($PC --includes) $($PC --ldflags --embed) 2>/dev/null && ldd ./embedpy | grep -q 'libpython3[.0-9]*\.so'; then
        "$CMH" record -q -o emb.cmh -- ./embedpy proj/job.py own >/dev/null 2>&1
        "$CMH" export -o emb.pb.gz emb.cmh 2>/dev/null
        go tool pprof -top emb.pb.gz >emb.top 2>&1
        go tool pprof -traces emb.pb.gz >emb.traces 2>&1
        check "libpython3.11.so's interpreter: File: job.py, not libpython3.11.so.1.0; no interpreter frame ($(head -1 emb.top))" \
            "grep -qx 'File: job.py' emb.top && grep -q '<module>' emb.traces && ! grep -qE '_start|Py_BytesMain|PyRun|PyEval|libpython' emb.traces"
    else
        echo "skip: no interpreter over libpython3.X.so to build (python3-dev)"
    fi
    "$CMH" export --no-default-skip -o pyraw.pb.gz py.cmh 2>/dev/null
    go tool pprof -traces pyraw.pb.gz >pyraw.traces 2>&1
    check "--no-default-skip keeps every frame as recorded (the interpreter's start among them)" "grep -q Py_BytesMain pyraw.traces && grep -q '<module>' pyraw.traces"
else
    echo "skip: the Python record ($PY3 absent, or a sanitizer runtime preloaded)"
fi

"$CMH" export -o t.pb.gz "$F/h200/torch_exp.pickle" 2>/dev/null
go tool pprof -top -lines -nodecount=1000 t.pb.gz >t.txt 2>&1
grep -q '<module> .*torch_train\.py:[0-9]' t.txt && ! grep -q '<unknown>' t.txt &&
    ok "Python's <module> keeps its name" || bad "pprof names: $(grep -E 'unknown|module' t.txt | head -3)"
"$CMH" export -o c.pb.gz "$F/h200/torch_exp.cmh" 2>/dev/null
# a record of a Python program without Python frames (native stacks only, all machinery): named
# by the script its command line ran (python3 samples/torch_train.py ...), not "python3.12"
go tool pprof -top -nodecount=1 c.pb.gz >c.top 2>&1
check "a native-only record of python3 samples/torch_train.py: File: torch_train.py ($(head -1 c.top))" "grep -qx 'File: torch_train.py' c.top"
# 8 of its rows name one (from each stack's site outward); pprof's demangler, given them as
# system names, leaves none
go tool pprof -top -nodecount=1000 c.pb.gz 2>/dev/null | grep -c '(anonymous namespace)' >got.txt
[ "$(cat got.txt)" -ge 8 ] && ok "C++ names keep (anonymous namespace) ($(cat got.txt) rows)" || bad "anonymous namespace: $(cat got.txt)"

# pprof's "flat" bytes are a stack's leaf's: each stack starts at its site, the machinery inside
# it (PyTorch's stack walker torch::unwind::unwind(), its caching allocator, tensor factories,
# dispatcher; the driver, the runtime) left out, so the largest flat row is the largest site of
# `leaks` with the same bytes, and the folded stacks end at the sites too.  Outward of the site
# the user's frames stay (<module>), the interpreter's start does not.
PT=$SRC/../shared/fixtures/pytorch
for f in octree_nca_cpp_frames_snapshot_action cs336_kk_2.7b_forward_compile_annotations_cppframes; do
    [ -f "$PT/$f.pickle" ] || { echo "skip: $PT/$f.pickle is absent"; continue; }
    "$CMH" export -o "$f.pb.gz" "$PT/$f.pickle" 2>/dev/null
    go tool pprof -top -nodecount=100000 -nodefraction=0 -unit=B "$f.pb.gz" 2>/dev/null | awk '$1 ~ /^[0-9]+B$/ && $1 != "0B"' >"$f.flat"
    "$CMH" leaks --json --top 100000 "$PT/$f.pickle" >"$f.json"
    py - "$f.flat" "$f.json" <<'PY' && ok "$f: pprof's flat bytes on the sites leaks names ($(head -1 "$f.flat" | awk '{print $1, $NF}'))" || bad "$f: flat: $(head -4 "$f.flat")"
import json, sys
rows = [l.split(None, 5) for l in open(sys.argv[1])]
flat = {}
for r in rows:  # a stackless sample's frame gives the reason ("<no stack: ...>", every report's words)
    k = "<no stack>" if r[5].startswith("<no stack: ") else r[5].strip()
    flat[k] = flat.get(k, 0) + int(r[0][:-1])
sites = {}
for d in json.load(open(sys.argv[2])):
    for x in d["sites"]:
        fn = (x.get("site") or {}).get("function") or "<no stack>"
        sites[fn] = sites.get(fn, 0) + x["bytes"]
bad = [n for n in flat if n.startswith(("torch::", "c10::", "at::", "_Py", "Py"))]
if bad:
    sys.exit("machinery with flat bytes: %s" % bad[:3])
if flat != sites:
    sys.exit("flat %s != sites %s" % (sorted(flat.items())[:4], sorted(sites.items())[:4]))
PY
    "$CMH" flamegraph --folded --at end -o "$f.folded" "$PT/$f.pickle"
    if awk '{sub(/ [0-9]+$/, ""); n = split($0, a, ";"); print a[n]}' "$f.folded" | grep -qE '^(torch::|c10::|at::|_?Py)'; then
        bad "$f: folded stacks end in machinery: $(awk '{sub(/ [0-9]+$/, ""); n = split($0, a, ";"); print a[n]}' "$f.folded" | sort | uniq -c | sort -rn | head -3)"
    else
        grep -q '<module>.*;forward' "$f.folded" && ok "$f: folded stacks end at the sites, the outer frames kept" ||
            bad "$f: folded: $(head -c 600 "$f.folded")"
    fi
done
finish
