#!/bin/sh
# pystack_test.sh BUILD_DIR SOURCE_DIR - Python frames with every allocation (recorder/pystack.c),
# with the system Python: a ctypes program (tests/python/pyalloc.py) allocating from known lines
# (marked "# L:name") in the main thread, worker threads, a recursion, a generator, a CFUNCTYPE
# callback called by C, and C called from Python.  Each stack carries exactly the Python frames
# of its line, innermost first, where the interpreter's frames are; the reports' site is the
# user's line, not ffi_call; every export carries them; a killed program's flight record keeps
# them; --context none records none; a thread that released the GIL has its frames read without
# it (the same frames as the C API's), under --python-stacks held too, and a Python without a known
# layout, or a wrong one, refuses (and counts) the walk.
TEST=pystack . "$(dirname "$0")/testlib.sh"
case "${LD_PRELOAD:-}" in *asan* | *ubsan* | *tsan*) echo "skipped: python under a sanitizer runtime"; exit 77 ;; esac
PY=/usr/bin/python3
[ -x $PY ] || { echo "skipped: no /usr/bin/python3"; exit 77; }
PROG=$SRC/tests/python/pyalloc.py
LIB=$B/tests/libpycallback.so
export PROG
pyq() { env -u LD_PRELOAD $PY "$@"; }

"$CMH" record -q -o t.cmh -- $PY "$PROG" "$LIB" >out.txt 2>err.txt
check "the ctypes program runs under record, quietly ($(head -c 200 err.txt))" '[ -s t.cmh ] && [ ! -s err.txt ]'
for f in t.pickle t.json t.trace.json t.pb.gz t.db; do "$CMH" export -o $f t.cmh 2>>err.txt || bad "export $f"; done

# The Python frames of each allocation, by its size (1..6 MiB), from the JSON export.
pyq - <<'PY' && ok "each stack holds its line's Python frames, innermost first, after ctypes' native frames" || bad "Python frames"
import json, os, re
L = {}
for n, line in enumerate(open(os.environ["PROG"]), 1):
    m = re.search(r"# L:(\S+)", line)
    if m: L[m.group(1)] = n
d = json.load(open("t.json"))
fr, st = d["frames"], d["stacks"]
def py(stack):
    return [(fr[i]["name"], fr[i]["line"]) for i in st[stack] if fr[i]["filename"].endswith("pyalloc.py")]
by = {}
for s in d["segments"]:
    for b in s["blocks"]:
        by.setdefault(b["size"] >> 20, []).append(b["stack"])
M = "<module>", None
want = {
    1: [("grab", L["grab"]), ("main", L["main"])],
    2: [("grab", L["grab"]), ("deep", L["deep-bottom"])] + [("deep", L["deep-rec"])] * 5 + [("main", L["main-deep"])],
    3: [("grab", L["grab"]), ("gen", L["gen"]), ("main", L["main-gen"])],
    4: [("grab", L["grab"]), ("in_callback", L["callback"]), ("main", L["main-cb"])],
    5: [("main", L["main-c"])],
    6: [("grab", L["grab"]), ("worker", L["worker"])],
}
counts = {1: 1, 2: 1, 3: 3, 4: 1, 5: 1, 6: 4}
for size, frames in want.items():
    assert len(by.get(size, [])) == counts[size], (size, by.get(size))
    for stack in by[size]:
        got = py(stack)
        if size == 6:
            assert got[:2] == frames and got[2][0] == "<lambda>", (size, got)
        else:
            assert got[:-1] == frames and got[-1][0] == "<module>", (size, got, frames)
        names = [fr[i]["name"] for i in st[stack]]
        first_py = next(k for k, i in enumerate(st[stack]) if fr[i]["filename"].endswith(".py"))
        # native frames inner to the Python ones: ctypes' glue (and our C for size 5), no interpreter
        assert "ffi_call" in names[:first_py], (size, names[:first_py + 1])
        assert not any("EvalFrame" in n for n in names[:first_py]), (size, names)
        if size == 5:
            assert names[0] == "pycb_alloc", names[:3]
        if size == 4:  # the callback's C caller is further out: Python, C, Python
            assert "pycb_run" in names[first_py:], names
    if size == 6:
        thr = [fr[i]["filename"] for i in st[by[6][0]] if fr[i]["filename"].endswith("threading.py")]
        assert thr, "the worker's threading.py frames"
PY

G=$(grep -n "# L:grab" "$PROG" | cut -d: -f1)
"$CMH" leaks t.cmh >leaks.txt 2>&1
"$CMH" peak t.cmh >peak.txt 2>&1
"$CMH" owners t.cmh >owners.txt 2>&1
check "leaks: the site is the user's line pyalloc.py:$G, not ffi_call (libffi.so.8)" \
    'grep -q "held     grab (.*pyalloc.py:$G)" leaks.txt && ! grep -q "held     ffi_call" leaks.txt'
check "leaks: the C function called from Python is its own site, with its Python caller" \
    'grep -q "pycb_alloc (.*pycallback.c:[0-9]*)" leaks.txt && grep -q "at main (.*pyalloc.py:$(grep -n "# L:main-c" "$PROG" | cut -d: -f1))" leaks.txt'
check "peak: by site, callers worker, gen and in_callback named by line" \
    'grep -q "grab (.*pyalloc.py:$G)" peak.txt && grep -q "worker (.*pyalloc.py:$(grep -n "# L:worker" "$PROG" | cut -d: -f1))" peak.txt && grep -q "in_callback (.*pyalloc.py:" peak.txt'
check "owners: ctypes' allocations belong to the script, not libffi" 'grep -q "program (pyalloc.py)" owners.txt && ! grep -q libffi owners.txt'
"$CMH" leaks --json t.cmh >leaks.json 2>&1
check "leaks --json: the site's function, file and line" 'grep -q "\"site\": {\"function\": \"grab\", \"file\": \"[^\"]*pyalloc.py\", \"line\": $G" leaks.json'
"$CMH" flamegraph --folded t.cmh >folded.txt 2>&1
"$CMH" flamegraph -o fg.svg t.cmh 2>&1
"$CMH" report -o r.html t.cmh >/dev/null 2>&1
check "flamegraph (folded and SVG) and the HTML report name the Python lines" \
    'grep -q "gen (.*pyalloc.py:[0-9]*);grab (.*pyalloc.py:$G)" folded.txt && grep -q "pyalloc.py:$G" fg.svg && grep -q "pyalloc.py:$G" r.html'

pyq - "$G" <<'PY' && ok "memviz pickle, JSON, Chrome, SQLite and pprof carry the Python frames" || bad "exports without Python frames"
import gzip, json, pickle, sqlite3, sys
g = int(sys.argv[1])
d = pickle.load(open("t.pickle", "rb"))
fr = [f for seg in d["segments"] for b in seg["blocks"] for f in b.get("frames", [])]
assert any(f["filename"].endswith("pyalloc.py") and f["name"] == "grab" and f["line"] == g for f in fr), fr[:8]
assert any(f["name"] == "in_callback" for f in fr)
j = json.load(open("t.json"))
assert any(f["filename"].endswith("pyalloc.py") and f["line"] == g for f in j["frames"])
c = json.load(open("t.trace.json"))
ev = c["traceEvents"] if isinstance(c, dict) else c
assert "pyalloc.py:%d" % g in json.dumps(ev)
db = sqlite3.connect("t.db")
rows = db.execute("select name, line from frames where filename like '%pyalloc.py'").fetchall()
assert ("grab", g) in rows and any(r[0] == "in_callback" for r in rows), rows
pb = gzip.open("t.pb.gz").read()
assert b"pyalloc.py" in pb and b"in_callback" in pb and b"worker" in pb
PY

"$CMH" record -q --context none -o n.cmh -- $PY "$PROG" "$LIB" >/dev/null 2>&1
"$CMH" export -o n.json n.cmh
check "--context none: no stacks, no Python frames, nothing read" \
    'pyq -c "import json; d=json.load(open(\"n.json\")); assert not [f for f in d[\"frames\"] if f[\"filename\"].endswith(\".py\")]; assert \"python_stacks\" not in json.dumps(d[\"allocator_settings\"])"'

# A thread that released the GIL (ctypes.CDLL) has its frames read without it, by the
# interpreter's layout (pystack.c), in both modes: under --python-stacks held (PyTorch's) too.
# Before, held gave no Python frame there (the site was ffi_call). They must be the frames the C
# API gives with the GIL taken back: CUMEMHIST_TEST_PYLAYOUT=none makes this Python one without a
# known layout, so that `wait` takes the GIL back and walks through the C API.
"$CMH" record -q --python-stacks held -o h.cmh -- $PY "$PROG" "$LIB" >/dev/null 2>&1
"$CMH" export -o h.json h.cmh
CUMEMHIST_TEST_PYLAYOUT=none "$CMH" record -q -o x.cmh -- $PY "$PROG" "$LIB" >/dev/null 2>&1
"$CMH" export -o x.json x.cmh
cp "$SRC/tests/python/pyframes.py" .  # frames(): shared with gpu-check.sh's section 10
check "--python-stacks held: ctypes.CDLL released the GIL, and its Python frames were read without it, the same as the C API's with the GIL taken back" \
    'pyq -c "
import sys; sys.path.insert(0, \".\")
from pyframes import frames
h, hs = frames(\"h.json\")
x, xs = frames(\"x.json\")
assert h == x, [(k, h.get(k), x.get(k)) for k in x if h.get(k) != x.get(k)][:2]
assert all(all(f for f in v) for v in h.values()), h
assert hs[\"python_stacks_read_without_gil\"] >= 9 and hs[\"python_stacks_refused_nogil\"] == 0 and hs[\"python_stacks_refused_layout\"] == 0, hs
assert xs[\"python_stacks_read_without_gil\"] == 0 and xs[\"python_stacks\"] == hs[\"python_stacks\"], (xs, hs)
"'
# The location table decoded without the GIL against PyCode_Addr2Line's: code shapes that need
# its other forms (long, no-column, negative deltas), and names outside ASCII.
# Read by plain loads (past the first 64 stacks), then by system calls throughout.
"$CMH" record -q --python-stacks held -o lh.cmh -- $PY "$SRC/tests/python/pylines.py" >/dev/null 2>&1
"$CMH" export -o lh.json lh.cmh
CUMEMHIST_TEST_PYSYSCALLS=1 "$CMH" record -q --python-stacks held -o ls.cmh -- $PY "$SRC/tests/python/pylines.py" >/dev/null 2>&1
"$CMH" export -o ls.json ls.cmh
CUMEMHIST_TEST_PYLAYOUT=none "$CMH" record -q -o lx.cmh -- $PY "$SRC/tests/python/pylines.py" >/dev/null 2>&1
"$CMH" export -o lx.json lx.cmh
check "lines of 14 code shapes read without the GIL (plain loads, system calls): the C API's, frame for frame" \
    'pyq -c "
import sys; sys.path.insert(0, \".\")
from pyframes import frames
x, xs = frames(\"lx.json\")
assert len(x) == 14 and all(v[0] for v in x.values()), x
assert xs[\"python_stacks_read_without_gil\"] == 0, xs
for f in \"lh.json\", \"ls.json\":
    h, hs = frames(f)
    assert h == x, (f, [(k >> 20, h.get(k), x.get(k)) for k in x if h.get(k) != x.get(k)][:2])
    assert hs[\"python_stacks_read_without_gil\"] >= 84 and hs[\"python_stacks_refused_layout\"] == 0, (f, hs)
    assert {f[1] for v in h.values() for f in v[0]} >= {\"größe\", \"数据\", \"𠀋\", \"<listcomp>\", \"Body\", \"coroutine\", \"nested\", \"inner\"}, h
"'
# A call site read without the GIL is looked up by its code object's address but trusted only
# where the names and the location table are still those that gave it: code objects made and
# dropped in turn reuse addresses (trusted by its address alone, a site read as the third
# function took the first's file and line: gen0.py:2 for gen2.py:2, then gen1.py:3 for gen0.py:3).
"$CMH" record -q --python-stacks held -o ru.cmh -- $PY "$SRC/tests/python/pylines.py" reuse >ru.out 2>&1
"$CMH" export -o ru.json ru.cmh
check "100 functions made and dropped in turn ($(cat ru.out)): each allocation's frame its own file and line" \
    'pyq -c "
import sys; sys.path.insert(0, \".\")
from pyframes import frames
h, hs = frames(\"ru.json\")
bad = [(i, g) for i in range(100) for g in [[f for f in h[4096 * (i + 1)][0] if f[0].startswith(\"gen\")]] if g != [(\"gen%d.py\" % (i % 3), \"f\", 2 + i % 2)]]
assert not bad, bad[:3]
" && [ "$(sed -n "s/^code addresses //p" ru.out)" -lt 100 ]'
CUMEMHIST_TEST_PYLAYOUT=none "$CMH" record -q --python-stacks held -o hn.cmh -- $PY "$PROG" "$LIB" >/dev/null 2>&1
"$CMH" export -o hn.json hn.cmh
check "a Python without a known layout, under held: the walk refused and counted, as before (no Python frame with ctypes.CDLL)" \
    'pyq -c "
import sys; sys.path.insert(0, \".\")
from pyframes import frames
h, hs = frames(\"hn.json\")
assert not h[1 << 20][0] and not h[6 << 20][0], h
assert hs[\"python_stacks_refused_nogil\"] >= 9 and hs[\"python_stacks_read_without_gil\"] == 0, hs
"'
CUMEMHIST_TEST_PYLAYOUT=wrong "$CMH" record -q --python-stacks held -o hw.cmh -- $PY "$PROG" "$LIB" >hw.out 2>&1
rc=$?
"$CMH" export -o hw.json hw.cmh
check "a layout with a wrong offset (the frame's code 8 bytes off): rc $rc, the read refused and counted, no crash, no wrong frame" \
    '[ $rc -eq 0 ] && pyq -c "
import sys; sys.path.insert(0, \".\")
from pyframes import frames
h, hs = frames(\"hw.json\")
assert not h[1 << 20][0] and not h[6 << 20][0], h
assert hs[\"python_stacks_refused_layout\"] >= 9 and hs[\"python_stacks_read_without_gil\"] == 0, hs
"'
"$CMH" record -q --python-stacks off -o o.cmh -- $PY "$PROG" "$LIB" >/dev/null 2>&1
"$CMH" export -o o.json o.cmh
check "--python-stacks off: native frames only, nothing counted" \
    'pyq -c "import json; d=json.load(open(\"o.json\")); assert d[\"frames\"] and not [f for f in d[\"frames\"] if f[\"filename\"].endswith(\".py\")]; assert \"python_stacks\" not in json.dumps(d[\"allocator_settings\"])"'
CUMEMHIST_TEST_PYLAYOUT=none "$CMH" record -q -o c.cmh -- $PY "$PROG" "$LIB" c10 >/dev/null 2>err.txt
"$CMH" export -o c.json c.cmh
check "PyTorch's CUDA allocator loaded (libc10_cuda), no GIL-free read: no more waiting for the GIL, said once ($(cat err.txt))" \
    'pyq -c "
import json
d = json.load(open(\"c.json\"))
fr, st = d[\"frames\"], d[\"stacks\"]
by = {b[\"size\"] >> 20: st[b[\"stack\"]] for s in d[\"segments\"] for b in s[\"blocks\"]}
assert any(fr[i][\"filename\"].endswith(\"pyalloc.py\") for i in by[1]), \"before\"
assert not any(fr[i][\"filename\"].endswith(\".py\") for i in by[2]), \"after\"
assert d[\"allocator_settings\"][\"python_stacks_refused_nogil\"] >= 1, d[\"allocator_settings\"]
" && [ "$(grep -c "PyTorch.s CUDA allocator is loaded" err.txt)" = 1 ]'
"$CMH" record -q -o c2.cmh -- $PY "$PROG" "$LIB" c10 >/dev/null 2>err.txt
"$CMH" export -o c2.json c2.cmh
check "PyTorch's CUDA allocator loaded, with the GIL-free read: the line after it has its Python frames, nothing waited for or refused" \
    'pyq -c "
import json
d = json.load(open(\"c2.json\"))
fr, st = d[\"frames\"], d[\"stacks\"]
by = {b[\"size\"] >> 20: st[b[\"stack\"]] for s in d[\"segments\"] for b in s[\"blocks\"]}
assert any(fr[i][\"filename\"].endswith(\"pyalloc.py\") and fr[i][\"name\"] == \"main\" for i in by[2]), \"after\"
assert d[\"allocator_settings\"][\"python_stacks_refused_nogil\"] == 0, d[\"allocator_settings\"]
" && ! grep -q "PyTorch.s CUDA allocator is loaded" err.txt'
"$CMH" record -q -o t2.cmh -- $PY "$PROG" "$LIB" die >/dev/null 2>&1
"$CMH" export -o t2.json t2.cmh 2>/dev/null
check "a program killed by SIGKILL: its recovered record keeps the Python line" \
    'pyq -c "import json; d=json.load(open(\"t2.json\")); assert any(f[\"filename\"].endswith(\"pyalloc.py\") and f[\"line\"] == $(grep -n "# L:die" "$PROG" | cut -d: -f1) for f in d[\"frames\"])"'
# The standard library's plumbing (threading.py's run/_bootstrap_inner/_bootstrap) is left out of
# the lines printed under a row, as the interpreter's frames are: before, it took 3 of the 6.
"$CMH" leaks --group-by stack t.cmh >thr.txt 2>&1
check "a thread's row: the user's frames, not threading.py's ($(grep -A3 'at worker (' thr.txt | tr -s ' ' | tr '\n' '|'))" \
    'grep -A1 "at worker (.*pyalloc.py" thr.txt | grep -q "at <lambda> (.*pyalloc.py" && ! grep -q "at .*(.*threading.py:" thr.txt'

# A Python stack deeper than --max-frames keeps both ends, the middle cut with a marker frame:
# before, the 32 innermost were kept and nothing said so; the entry point and <module> were lost,
# the flamegraph rooted at a mid-stack frame.
cat >deep.py <<'PY'
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx, p = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
def level(n):
    if n == 0:
        return cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))  # deep.py:8
    return level(n - 1)  # deep.py:9
def entry_point():
    return level(40)  # deep.py:11
entry_point()  # deep.py:12
PY
"$CMH" record -q -o deep.cmh -- $PY deep.py >/dev/null 2>&1
"$CMH" flamegraph --folded deep.cmh >deep.txt 2>&1
check "a stack deeper than --max-frames: outer frames kept, the cut marked ($(cut -c1-120 deep.txt | head -1))" \
    'grep -q "^<module> (.*deep.py:12);entry_point (.*deep.py:11);level (.*deep.py:9);.*\.\.\. [0-9]* frames cut by --max-frames \.\.\..*;level (.*deep.py:8)" deep.txt'
finish
