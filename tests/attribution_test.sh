#!/bin/sh
# attribution_test.sh BUILD_DIR SOURCE_DIR - what the reports name, on recordings made here and
# on the H200 fixtures: the user's own line, file:line from DWARF, demangled names, owners, the
# failing request of an OOM, the groupings, and a binary that is not the one recorded.
TEST=attr . "$(dirname "$0")/testlib.sh"

# --- one function, two callers: one site, two stacks, file:line from DWARF ---
"$CMH" record -q -o two.cmh -- "$B/tests/two_sites" >/dev/null
"$CMH" leaks --json two.cmh >site.json
"$CMH" leaks --json --group-by stack two.cmh >stack.json
py - site.json stack.json <<'PY' && ok "one allocating function from two lines: one row by site, two by stack (two_sites.c:LINE); an inlined call is a frame" || bad "groupings of two_sites"
import json, sys
site = json.load(open(sys.argv[1]))[0]["sites"]   # one object per device
stack = json.load(open(sys.argv[2]))[0]["sites"]
inl = [x for x in site if x["site"]["function"] == "inlined_buffer"]
assert len(inl) == 1, [x["site"] for x in site]
fr = [(f["function"], f["line"]) for f in inl[0]["frames"]]
assert fr[0][0] == "inlined_buffer" and fr[1][0] == "main" and fr[0][1] != fr[1][1], fr
site = [x for x in site if x is not inl[0]]
stack = [x for x in stack if x["site"]["function"] != "inlined_buffer"]
assert len(site) == 1, site
s = site[0]["site"]
assert s["function"] == "buffer" and s["file"].endswith("two_sites.c") and s["line"] > 0, s
assert site[0]["owner"] == "two_sites" and site[0]["blocks"] == 2, site[0]
assert len(stack) == 2, stack
mains = sorted(f["line"] for st in stack for f in st["frames"] if f["function"] == "main")
assert len(mains) == 2 and mains[0] != mains[1] and mains[0] > 0, mains
assert all(st["site"]["line"] == s["line"] for st in stack)
for x in site + stack:
    assert set(x["site"]) == {"function", "file", "line", "module"}, x["site"]
    assert all(set(f) == {"function", "file", "line", "module"} for f in x["frames"])
PY
"$CMH" leaks --skip '^buffer$' two.cmh >skip.txt
grep -q 'main (.*two_sites.c:[0-9]*)' skip.txt && [ "$(grep -c 'two_sites.c:' skip.txt)" -ge 2 ] &&
    ok "--skip makes the caller the site" || bad "--skip: $(cat skip.txt)"
"$CMH" leaks --skip '(' two.cmh >/dev/null 2>skiperr.txt
[ $? -eq 2 ] && grep -q "skip '('" skiperr.txt && ok "a --skip that does not compile is refused" || bad "bad --skip"

# --- a helper from two lines: its bytes split by caller, in text and JSON, peak / leaks / oom ---
FAKECUDA_CAPACITY=4M "$CMH" record -q -o twooom.cmh -- "$B/tests/two_sites" >/dev/null 2>&1
for r in peak leaks oom; do
    f=two.cmh
    [ $r = oom ] && f=twooom.cmh
    "$CMH" $r $f >split.txt 2>/dev/null
    grep -q 'by caller: 2.0 MiB main (.*two_sites.c:[0-9]*), 1.0 MiB main (.*two_sites.c:[0-9]*)$' split.txt ||
        { bad "$r: no split by caller: $(grep -A2 'buffer (' split.txt | head -3)"; continue; }
    "$CMH" $r --json $f 2>/dev/null | py -c "
import json, sys
d = json.load(sys.stdin)[0]
sites = d.get('sites_at_peak') or d.get('sites') or d['ooms'][0]['sites']
x = [x for x in sites if x['site'] and x['site']['function'] == 'buffer'][0]
c = x['callers']
assert [k['bytes'] for k in c] == [2 << 20, 1 << 20], c
assert all(k['caller']['function'] == 'main' and k['caller']['line'] > 0 for k in c), c
assert c[0]['caller']['line'] != c[1]['caller']['line'] and sum(k['bytes'] for k in c) == x['bytes'], c
inl = [x for x in sites if x['site'] and x['site']['function'] == 'inlined_buffer']
assert all(len(y['callers']) <= 1 for y in inl)
" && ok "$r: one helper's bytes by the two lines that called it (text and JSON)" || bad "$r --json callers"
done

# --- one shared wrapper (a ctypes helper): the stack shown under its site is the one holding the
# most bytes, not the first seen.  Before, peak printed the two 1 MiB blocks' stack (train.py:20)
# under alloc (lib.py:17) while the 100 MiB one at train.py:34 made the peak.
py - wrap.pickle <<'PY' || bad "writing wrap.pickle failed"
import pickle, sys
MiB = 1 << 20
def fr(line): return [{'name': 'alloc', 'filename': '/home/u/lib.py', 'line': 17}, {'name': 'main', 'filename': '/home/u/train.py', 'line': line}]
b, t, tr, blocks, off = 1 << 40, 1000, [], [], 0
tr.append({'action': 'segment_alloc', 'addr': b, 'size': 1024 * MiB, 'stream': 0, 'time_us': t, 'frames': fr(20)})
for i, (size, line) in enumerate([(1, 20), (1, 20), (100, 34), (2, 41)]):
    tr.append({'action': 'alloc', 'addr': b + off, 'size': size * MiB, 'stream': 0, 'time_us': t + 10 * (i + 1), 'frames': fr(line)})
    blocks.append({'address': b + off, 'size': size * MiB, 'requested_size': size * MiB, 'state': 'active_allocated', 'frames': fr(line)})
    off += size * MiB
blocks.append({'address': b + off, 'size': 1024 * MiB - off, 'requested_size': 0, 'state': 'inactive', 'frames': []})
seg = {'device': 0, 'address': b, 'total_size': 1024 * MiB, 'allocated_size': off, 'active_size': off, 'requested_size': off,
       'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': fr(20), 'blocks': blocks}
pickle.dump({'segments': [seg], 'device_traces': [tr]}, open(sys.argv[1], 'wb'))
PY
for r in peak leaks; do
    "$CMH" $r wrap.pickle >wrap.txt 2>&1
    check "$r: under a shared wrapper the stack shown is the biggest caller's, train.py:34 ($(grep -m1 'at main' wrap.txt))" \
        "grep -q 'by caller: 100.0 MiB main (/home/u/train.py:34)' wrap.txt && grep -A1 '^ *at alloc (/home/u/lib.py:17)' wrap.txt | grep -q 'at main (/home/u/train.py:34)'"
done

# --- a -g sample shows its own file:line; the OOM names who asked ---
"$CMH" record -q -o leak.cmh -- "$B/samples/leaky" 4 >/dev/null
"$CMH" leaks leak.cmh >leak.txt
grep -q 'load_batch (.*leaky.c:[0-9][0-9]*)' leak.txt && ok "leaky's own frames read file:line" || bad "leaky lines: $(head -8 leak.txt)"
FAKECUDA_CAPACITY=1G "$CMH" record -q -o oom.cmh -- "$B/samples/oom_demo" >/dev/null
"$CMH" oom oom.cmh >oom.txt
grep -q 'requested by  *grow_model (.*oom_demo.c:[0-9]*)' oom.txt && ok "oom names the function whose request failed" ||
    bad "oom requested by: $(grep -A2 requested oom.txt)"
"$CMH" oom --json oom.cmh | py -c "import json,sys; d=json.load(sys.stdin)[0]; assert d['ooms'][0]['requested_by']['site']['function']=='grow_model'" &&
    ok "oom --json: requested_by" || bad "oom --json requested_by"

# --- a binary that is not the one recorded is not used, and said so once ---
cp "$B/tests/two_sites" prog && "$CMH" record -q -o prog.cmh -- ./prog >/dev/null
cp "$B/samples/leaky" prog
"$CMH" leaks prog.cmh >mm.txt 2>mm.err
[ "$(grep -c 'is not the binary recorded' mm.err)" -eq 1 ] && ! grep -q 'two_sites.c:' mm.txt &&
    ok "a changed binary's lines are not used, and the report says so once" || bad "build id mismatch: $(cat mm.err)"
# ... but the recorder's own library, rebuilt since (a recovered record lists every module loaded),
# is not named: its frames are machinery the reports hide
mkdir ours && cp "$B/libcumemhist.so.0.1.0" ours/
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$T/ours/libcumemhist.so.0.1.0" CUMEMHIST_OUTPUT=k.cmh "$B/tests/dies" kill >/dev/null 2>&1
"$CMH" recover k.cmh.flight >/dev/null 2>&1
cp "$B/tests/libprobe_a.so" ours/libcumemhist.so.0.1.0 # another build id at the recorded path
"$CMH" peak k.cmh >/dev/null 2>ours.err
check "a rebuilt recorder library is not reported as a changed binary ($(cat ours.err))" \
    "[ -s k.cmh ] && ! grep -q 'libcumemhist.*is not the binary recorded' ours.err"

# --- symbolize bakes the lines in ---
cp "$B/tests/two_sites" prog2 && "$CMH" record -q -o p2.cmh -- ./prog2 >/dev/null
"$CMH" symbolize p2.cmh -o p2.sym.cmh >/dev/null
rm prog2
"$CMH" leaks p2.sym.cmh 2>/dev/null | grep -q 'buffer (.*two_sites.c:[0-9]*)' &&
    ok "symbolize: lines survive the binary's removal" || bad "symbolize"

# --- the H200 fixtures ---
"$CMH" peak --json "$F/h200/torch_exp.pickle" | py -c "
import json, sys
d = json.load(sys.stdin)[0]
sites = d['sites_at_peak']
named = [x for x in sites if x['site']]
assert named and named[0]['site']['file'].endswith('samples/torch_train.py'), named[0]
assert not [x for x in named if '/torch/' in x['site']['file'] or x['site']['file'].startswith('torch/')], 'a torch/ site'
" && ok "peak of torch_exp.pickle: samples/torch_train.py lines, no site under torch/" || bad "torch_exp sites"
for c in peak leaks oom frag; do "$CMH" $c "$F/h200/torch_plain.cmh"; "$CMH" $c --json "$F/h200/torch_plain.cmh"; done >plain.txt 2>/dev/null
"$CMH" diff "$F/h200/torch_plain.cmh" "$F/h200/torch_exp.cmh" >>plain.txt 2>/dev/null
! grep -q '_Z[A-Z0-9]' plain.txt && ok "no report of torch_plain.cmh prints a mangled name" || bad "mangled: $(grep -o '_Z[A-Za-z0-9]*' plain.txt | head -3)"
"$CMH" leaks --json "$F/h200/cudart.cmh" 2>/dev/null | py -c "
import json, sys
s = json.load(sys.stdin)[0]['sites'][0]
assert s['site']['function'].startswith('make_buffer'), s['site']
assert s['owner'] == 'cudart_demo', s['owner']
" && ok "cudart.cmh: the site is make_buffer, not cudaMalloc" || bad "cudart site"
"$CMH" peak --json --group-by module "$F/h200/torch_plain.cmh" 2>/dev/null | py -c "
import json, sys
sites = json.load(sys.stdin)[0]['sites_at_peak']
owners = {x['owner']: x['bytes'] for x in sites}
assert any(o.startswith('libcublas') for o in owners), owners
assert 'libc10_cuda.so' in owners, owners
" && ok "torch_plain.cmh: the cuBLAS workspace is libcublas's, PyTorch's segments libc10_cuda's" || bad "owners"


# --- a PC past the end of a CU's code has no line: tests/dies is -O2 -g, its main in .text.startup
# just before crt1's _start, which libdw answers with dies.c's last line unless the CU is checked ---
"$CMH" record -q -o dies.cmh -- "$B/tests/dies" exit >/dev/null
"$CMH" leaks --json --group-by stack dies.cmh | py -c "
import json, sys
fr = [f for x in json.load(sys.stdin)[0]['sites'] for f in x['frames']]
st = [f for f in fr if f['function'] == '_start']
assert st, [f['function'] for f in fr]
assert all(f['line'] == 0 and not f['file'].endswith('dies.c') for f in st), st
assert any(f['function'] == 'main' and f['file'].endswith('dies.c') and f['line'] > 0 for f in fr), fr
" && ok "_start, outside every CU, gets no file:line (not dies.c's last line)" || bad "_start given a line"

# --- a library closed before the exit dump: its frames keep their names and their owner ---
"$CMH" record -q -o dlc.cmh -- "$B/tests/dlclose_prog" "$B/tests/libdlclose_lib.so" >/dev/null 2>err.txt
"$CMH" leaks --json dlc.cmh 2>/dev/null | py -c "
import json, sys
sites = json.load(sys.stdin)[0]['sites']
lib = [x for x in sites if x['bytes'] == 1 << 20]
assert len(lib) == 1, sites
assert lib[0]['site']['function'] == 'dl_alloc' and lib[0]['owner'] == 'libdlclose_lib.so', lib[0]
assert lib[0]['site']['module'].endswith('libdlclose_lib.so'), lib[0]['site']
" && ok "a library closed by dlclose before the exit dump: dl_alloc and libdlclose_lib.so still named" ||
    bad "dlclose'd library: $("$CMH" leaks dlc.cmh 2>&1 | grep -A1 '1.0 MiB'); $(cat err.txt)"

# --- a segment without a stack of its own: frag names its blocks' site ---
# PyTorch 2.0 kept stacks on blocks only (per-block history), and newer snapshots give a segment
# allocated before recording began no frames: every row of frag read "allocated by -" while leaks
# named the blocks' site (flexgen's OOM snapshot: allocate (.../pytorch_backend.py:190)).
py - <<'PY' || bad "writing segsite.pickle failed"
import pickle
M, S = 1 << 20, 0x7F0000000000
fa = [{"name": "load", "filename": "/proj/a.py", "line": 7}]
fb = [{"name": "cache", "filename": "/proj/b.py", "line": 9}]
def blk(a, n, st, fr): return {"address": a, "size": n * M, "requested_size": n * M if st != "inactive" else 0, "state": st, "frames": fr}
seg1 = {"device": 0, "address": S, "total_size": 20 * M, "allocated_size": 18 * M, "active_size": 18 * M, "requested_size": 18 * M,
        "stream": 0, "segment_type": "large", "frames": [],
        "blocks": [blk(S, 4, "active_allocated", fb), blk(S + 4 * M, 2, "inactive", []), blk(S + 6 * M, 14, "active_allocated", fa)]}
seg2 = {"device": 0, "address": S + 32 * M, "total_size": 20 * M, "allocated_size": 8 * M, "active_size": 8 * M, "requested_size": 8 * M,
        "stream": 0, "segment_type": "large", "frames": [],
        "blocks": [blk(S + 32 * M, 8, "active_allocated", fb), blk(S + 40 * M, 12, "inactive", [])]}
seg3 = {"device": 0, "address": S + 64 * M, "total_size": 20 * M, "allocated_size": 0, "active_size": 0, "requested_size": 0,
        "stream": 0, "segment_type": "large", "frames": [], "blocks": [blk(S + 64 * M, 20, "inactive", [])]}
pickle.dump({"segments": [seg1, seg2, seg3], "device_traces": [[]]}, open("segsite.pickle", "wb"))
PY
"$CMH" frag segsite.pickle >segsite.txt 2>&1
check "frag: a segment without a stack names its blocks' site, marked '(its blocks)', the most bytes' of two" \
    "grep -q '^  0x7f0000000000 .*  load (/proj/a.py:7) (its blocks: the most bytes of 2 sites)\$' segsite.txt &&
     grep -q '^  0x7f0002000000 .*  cache (/proj/b.py:9) (its blocks)\$' segsite.txt &&
     grep -q '^  0x7f0004000000 .*%  -\$' segsite.txt && grep -q '^  (its blocks): the segment has no stack of its own' segsite.txt ||
     { cat segsite.txt; false; }"
"$CMH" frag --json segsite.pickle >segsite.json 2>/dev/null
check "frag --json: site from the blocks, site_from 'blocks', block_sites; a segment no stack names: null" "py - <<'PY'
import json
g = {x['address']: x for x in json.load(open('segsite.json'))[0]['segments']}
S = 0x7F0000000000
a, b, c = g[S], g[S + (32 << 20)], g[S + (64 << 20)]
print(a['site'], a['site_from'], a.get('block_sites'), c['site'], c['site_from'])
assert (a['site']['function'], a['site_from'], a['block_sites']) == ('load', 'blocks', 2)
assert (b['site']['function'], b['site_from'], b['block_sites']) == ('cache', 'blocks', 1)
assert c['site'] is None and c['site_from'] is None and 'block_sites' not in c
PY"
FLEX=$SRC/../shared/fixtures/pytorch/flexgen_torch20_oom_observer_block_history.pickle
if [ -f "$FLEX" ]; then
    "$CMH" frag --top 200 "$FLEX" >flex.txt 2>/dev/null
    check "frag on PyTorch 2.0's snapshot: all 176 segments name allocate (pytorch_backend.py:190) from their blocks, none '-'" \
        "[ \$(grep -c ' allocate (/home/dingyiran/FlexGen/flexgen/pytorch_backend.py:190) (its blocks)\$' flex.txt) = 176 ] &&
         ! grep -q '%  -\$' flex.txt"
else
    echo "skipped: frag on PyTorch 2.0's snapshot (no ../shared/fixtures/pytorch)"
fi

# --- a helper called once for the weights and in every step for a leak: one growing row by site,
# most of its bytes the weights'; leaks says which caller's blocks grow (text and JSON) ---
"$CMH" record -q -o wrap.cmh -- "$B/tests/wrapper_leak" >/dev/null 2>&1
"$CMH" leaks wrap.cmh >wrap.txt 2>&1
"$CMH" leaks --json wrap.cmh >wrap.json 2>&1
check "a growing helper of two callers: the growing one marked, and its share said ($(grep -E 'by caller|growth comes' wrap.txt | tr -s ' ' | tr '\n' '|'))" \
    "grep -q 'by caller: 64.0 MiB main (.*wrapper_leak.c:[0-9]*), 10.0 MiB main (.*wrapper_leak.c:[0-9]*) (growing)\$' wrap.txt &&
     grep -q 'the growth comes from one caller, main (.*wrapper_leak.c:[0-9]*): 10.0 MiB of the row.s 74.0 MiB (its other callers. blocks do not grow); the stack shown is this caller.s' wrap.txt &&
     [ \"\$(sed -n 's/.*the growth comes from one caller, main (\\(.*wrapper_leak.c:[0-9]*\\)).*/\\1/p' wrap.txt)\" = \"\$(grep -m1 '^ *at main (' wrap.txt | sed 's/.*(\\(.*\\))\$/\\1/')\" ] &&
     py -c \"
import json
x = json.load(open('wrap.json'))[0]['sites'][0]
grow = [y for y in x['callers'] if y['growing']][0]
assert any(f['function'] == 'main' and f['line'] == grow['caller']['line'] for f in x['frames']), (grow, x['frames'])
c = {(y['bytes'] >> 20): (y['growing'], y['rate_bytes_per_step']) for y in x['callers']}
assert x['verdict'] == 'growing' and c == {64: (False, 0), 10: (True, 1 << 20)}, (x['verdict'], c)\""
# the growing caller the smallest of five: listed (marked) all the same, not folded into 'other
# callers', and the row's stack is its, not the 64 MiB weights' (a stranger's trial: a Python
# helper's 1 GiB row showed the optimizer's line, the leak's caller only in the growth line)
"$CMH" record -q -o wrapm.cmh -- "$B/tests/wrapper_leak" many >/dev/null 2>&1
"$CMH" leaks wrapm.cmh >wrapm.txt 2>&1
check "the smallest of five callers grows: 'by caller' marks it, the stack shown is its ($(grep -E 'by caller|growth comes|^ *at main' wrapm.txt | tr -s ' ' | tr '\n' '|'))" \
    "grep -q 'by caller: 64.0 MiB main (.*wrapper_leak.c:[0-9]*), 32.0 MiB .*, 5.0 MiB main (.*wrapper_leak.c:[0-9]*) (growing), 8.0 MiB from other callers\$' wrapm.txt &&
     L=\$(sed -n 's/.*the growth comes from one caller, main (\\(.*wrapper_leak.c:[0-9]*\\)).*/\\1/p' wrapm.txt) && [ -n \"\$L\" ] &&
     [ \"\$L\" = \"\$(grep -m1 '^ *at main (' wrapm.txt | sed 's/.*(\\(.*\\))\$/\\1/')\" ]"
# ... and the HTML report says it too, in the same words: its leak table had no split by caller
# (the helper read as a growing leak of all of its bytes), nor its peak table (two_sites' helper)
"$CMH" report -o wrap.html wrap.cmh >/dev/null 2>&1
"$CMH" report -o two.html two.cmh >/dev/null 2>&1
"$CMH" peak two.cmh >twopeak.txt 2>&1
check "report: the leak and peak tables carry leaks' and peak's 'by caller' lines and whose blocks grow, word for word" "py - <<'PY'
import html, re
def lines(path, cls, row):
    rows = ''.join(re.findall(r'<tr class=\"%s\".*?</tr>' % row, open(path).read(), re.S))
    return [html.unescape(m) for m in re.findall(r'<div class=\"%s[^\"]*\">([^<]*)</div>' % cls, rows)]
def text(path, start):
    return [l.strip() for l in open(path) if l.strip().startswith(start)]
w = lines('wrap.html', 'r-callers r-muted', 'end-site'), lines('wrap.html', 'r-callers-growth', 'end-site')
assert w[0] == text('wrap.txt', 'by caller:') and len(w[0]) == 1, (w, text('wrap.txt', 'by caller:'))
assert w[1] == text('wrap.txt', 'the growth comes from') and len(w[1]) == 1, w
t = lines('two.html', 'r-callers r-muted', 'peak-site')
assert set(t) == set(text('twopeak.txt', 'by caller:')) and t, (t, text('twopeak.txt', 'by caller:'))
PY"
# a block allocated before a bounded ring's first kept entry, found by its free: with frees' own
# stacks (context all) its free's line is not its allocation site (leaky's cuMemFree lines 40 and
# 30 were named the sites of 74 MiB; a newcomer's trial): no stack, said why
"$CMH" record -q --max-entries 5 -o lk5.cmh -- "$B/samples/leaky" >/dev/null 2>&1
"$CMH" peak lk5.cmh >lk5.txt 2>/dev/null
free_lines=$(grep -n 'cuMemFree' "$SRC/samples/leaky.c" | cut -d: -f1 | paste -sd'|')
check "a --max-entries record names no free's line as an allocation site ($(grep -c 'leaky.c:' lk5.txt) site lines)" \
    "grep -q '74.0 MiB .* 5  <no stack: allocated before the first kept entry, or its stack could not be read>' lk5.txt &&
     ! grep -Eq 'leaky.c:($free_lines)\)' lk5.txt"
# --- a user's script in a folder named torch or c10 is the user's (tests/torchdir_pickle.py): any
# directory named torch was PyTorch's, so main (train.py:358, 256 MiB) and get_input (:206, 128 MiB)
# were machinery and both went to one site, jsonargparse's _run_component (_cli.py:227) ---
for user in /home/me/code/torch/train.py /home/me/c10/train.py 'C:\Users\me\torch\train.py' /home/me/code/nn/train.py; do
    shown=$(printf '%s' "$user" | tr '\\' '|') # (dash's echo reads \t in C:\Users\me\torch as a tab)
    py "$SRC/tests/torchdir_pickle.py" td.pickle "$user" || bad "writing td.pickle ($shown)"
    "$CMH" peak --json td.pickle 2>/dev/null | py -c "
import json, sys
s = [(x['site']['function'], x['site']['file'], x['site']['line'], x['bytes'] >> 20) for x in json.load(sys.stdin)[0]['sites_at_peak']]
assert s == [('main', sys.argv[1], 358, 256), ('get_input', sys.argv[1], 206, 128)], s
" "$user" && ok "a script at $shown: its own lines are the sites (256 + 128 MiB)" || bad "sites of a script at $shown"
done
# ... and a source checkout's torch/ is PyTorch's where its C++ (torch/csrc/) says so: the site is
# still the user's line under it, not the checkout's torch/nn
py "$SRC/tests/torchdir_pickle.py" tdc.pickle /home/me/code/torch/train.py /src/pytorch || bad "writing tdc.pickle"
"$CMH" peak --json tdc.pickle 2>/dev/null | py -c "
import json, sys
s = [(x['site']['function'], x['site']['line']) for x in json.load(sys.stdin)[0]['sites_at_peak']]
assert s == [('main', 358), ('get_input', 206)], s
" && ok "a checkout's torch/nn/ beside its torch/csrc/ is PyTorch's; the user's torch/train.py the site" || bad "sites under a checkout's torch/"
finish
