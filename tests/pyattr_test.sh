#!/bin/sh
# pyattr_test.sh BUILD_DIR SOURCE_DIR - attribution of a Python program over ctypes (the system
# Python, the fake driver): one helper (tests/python/pylib_gpu.py) installed as the user's own
# module (proj/mylib/gpu.py) and as a third-party package under a venv's site-packages
# (env/lib/python3.11/site-packages/gpulib/__init__.py), called by tests/python/pylib_job.py once
# for weights and in each step for a kept buffer.  The HTML report splits the helper's bytes by
# caller as leaks does; --group-by stack shows the user's lines, not libffi's and _ctypes';
# ctypes' glue is never a package nor an owner; an installed package owns its memory by its
# name; its allocating function stays in the pprof profile and the flamegraph.
TEST=pyattr . "$(dirname "$0")/testlib.sh"
case "${LD_PRELOAD:-}" in *asan* | *ubsan* | *tsan*) echo "skipped: python under a sanitizer runtime"; exit 77 ;; esac
PY=/usr/bin/python3
[ -x $PY ] || { echo "skipped: no /usr/bin/python3"; exit 77; }
SP=$T/env/lib/python3.11/site-packages
mkdir -p proj/mylib "$SP/gpulib"
cp "$SRC/tests/python/pylib_job.py" proj/job.py
cp "$SRC/tests/python/pylib_gpu.py" proj/mylib/gpu.py
cp "$SRC/tests/python/pylib_gpu.py" "$SP/gpulib/__init__.py"
L() { grep -n "# L:$2\$" "$1" | cut -d: -f1; }
A=$(L proj/mylib/gpu.py alloc) W=$(L proj/job.py weights) K=$(L proj/job.py keep)

"$CMH" record -q -o own.cmh -- $PY proj/job.py own >out.txt 2>err.txt
check "the job runs under record, its helper the user's own ($(head -c 200 err.txt))" '[ -s own.cmh ] && [ ! -s err.txt ]'
PYTHONPATH=$SP "$CMH" record -q -o pkg.cmh -- $PY proj/job.py pkg >out.txt 2>err.txt
check "the job runs under record, its helper an installed package ($(head -c 200 err.txt))" '[ -s pkg.cmh ] && [ ! -s err.txt ]'

# --- the report's tables split the helper's bytes by caller, as leaks and peak do ---
"$CMH" leaks own.cmh >leaks.txt 2>&1
"$CMH" peak own.cmh >peak.txt 2>&1
"$CMH" report -o own.html own.cmh >/dev/null 2>&1
check "leaks: one growing helper row, split by caller, the growth the keeping line's ($(grep -E 'by caller|growth' leaks.txt | tr -s ' ' | tr '\n' '|'))" \
    "grep -q 'growing  device_alloc (.*proj/mylib/gpu.py:$A)' leaks.txt &&
     grep -q 'by caller: 64.0 MiB build_model (.*proj/job.py:$W), 10.0 MiB step (.*proj/job.py:$K) (growing)\$' leaks.txt &&
     grep -q 'the growth comes from one caller, step (.*proj/job.py:$K): 10.0 MiB of the row.s 74.0 MiB' leaks.txt"
check "report: the leak row and the peak row carry the same 'by caller' and growth lines, word for word" "py - <<'PY'
import html, re
page = open('own.html').read()
def lines(row, cls):
    rows = ''.join(re.findall(r'<tr class=\"%s\".*?</tr>' % row, page, re.S))
    return [html.unescape(m) for m in re.findall(r'<div class=\"%s\">([^<]*)</div>' % cls, rows)]
def text(path, start):
    return [l.strip() for l in open(path) if l.strip().startswith(start)]
assert lines('end-site', 'r-callers r-muted') == text('leaks.txt', 'by caller:'), (lines('end-site', 'r-callers r-muted'), text('leaks.txt', 'by caller:'))
assert lines('end-site', 'r-callers-growth r-leak') == text('leaks.txt', 'the growth comes') != []
assert lines('peak-site', 'r-callers r-muted') == text('peak.txt', 'by caller:') != []
PY"

# --- --group-by stack: each row from its site outward, the rows told apart by their callers ---
for r in leaks peak; do
    "$CMH" $r --group-by stack own.cmh >stack.txt 2>&1
    check "$r --group-by stack: the user's lines from the site outward, no ctypes or CPython frame, what is left out counted ($(grep -m3 '  at ' stack.txt | tr -s ' ' | tr '\n' '|'))" \
        "! grep -qiE 'at .*(libffi|ffi_call|_ctypes|PyCFuncPtr|_PyEval|PyObject_)' stack.txt &&
         [ \$(grep -c '^        at device_alloc (.*proj/mylib/gpu.py:$A)\$' stack.txt) -ge 2 ] &&
         grep -q '^        at build_model (.*proj/job.py:$W)\$' stack.txt && grep -q '^        at step (.*proj/job.py:$K)\$' stack.txt &&
         grep -qE '^        \\([0-9]+ frames of machinery left out; --json lists them all\\)\$' stack.txt"
done

# --- packages and owners: ctypes' glue is neither; an installed package is named, the user's helper is the program's ---
"$CMH" leaks --group-by package own.cmh >pkg_own.txt 2>&1
"$CMH" leaks --group-by package pkg.cmh >pkg_pkg.txt 2>&1
"$CMH" leaks --group-by module pkg.cmh >mod_pkg.txt 2>&1
"$CMH" owners pkg.cmh >owners_pkg.txt 2>&1
"$CMH" owners own.cmh >owners_own.txt 2>&1
check "--group-by package: the user's helper is the program's, named by the script run ('program (job.py)'), never libffi ($(grep -m1 MiB pkg_own.txt | tr -s ' '))" \
    "grep -q 'growing  program (job.py)  \[program (gpu.py)\]' pkg_own.txt && ! grep -qE 'libffi|the program' pkg_own.txt"
check "an installed package: owners, --group-by module and package name gpulib, not 'program (__init__.py)' nor libffi ($(grep -m1 MiB owners_pkg.txt | tr -s ' '))" \
    "grep -qE '^ +78.0 MiB +100.0% +[0-9]+  gpulib\$' owners_pkg.txt && ! grep -qE '__init__|libffi|program' owners_pkg.txt &&
     grep -q '  gpulib  \[gpulib\]' mod_pkg.txt && grep -q '  gpulib  \[gpulib\]' pkg_pkg.txt && ! grep -qE 'libffi|__init__' mod_pkg.txt pkg_pkg.txt &&
     grep -q 'program (gpu.py)' owners_own.txt"
# --- a grouped row is a union of sites: its sites' own verdicts when they differ, and how much grows ---
"$CMH" leaks --group-by file pkg.cmh >file_pkg.txt 2>&1
for f in pkg_pkg.txt file_pkg.txt mod_pkg.txt; do
    check "$f: the grouped row splits into the weights (state) and the kept buffers (growing), 10.0 MiB of its 74.0 MiB growing ($(grep -E 'of it|growth comes' $f | tr -s ' ' | tr '\n' '|'))" \
        "grep -q '^        of it, by site: 64.0 MiB state build_model (.*proj/job.py:$W), 10.0 MiB growing step (.*proj/job.py:$K)\$' $f &&
         grep -q '^        the growth comes from one of its 2 sites, step (.*proj/job.py:$K): 10.0 MiB of the row.s 74.0 MiB' $f"
done
check "--group-by package, the user's helper: the row (one site) keeps its split by caller ($(grep -E 'by caller|growth comes' pkg_own.txt | tr -s ' ' | tr '\n' '|'))" \
    "grep -q 'by caller: 64.0 MiB build_model (.*proj/job.py:$W), 10.0 MiB step (.*proj/job.py:$K) (growing)\$' pkg_own.txt &&
     grep -q 'the growth comes from one caller, step (.*proj/job.py:$K): 10.0 MiB of the row.s 74.0 MiB' pkg_own.txt"
"$CMH" leaks --json --group-by package pkg.cmh >pkg_pkg.json 2>&1
check "leaks --json --group-by package: the row's growing_bytes are its growing site's 10 MiB, not its 74 MiB; by_site lists both" "py - <<'PY'
import json
r = json.load(open('pkg_pkg.json'))[0]['sites'][0]
assert r['bytes'] == 74 << 20 and r['growing_bytes'] == 10 << 20, r
assert [(x['bytes'], x['verdict'], x['growing_bytes']) for x in r['by_site']] == [(64 << 20, 'state', 0), (10 << 20, 'growing', 10 << 20)], r['by_site']
PY"
"$CMH" owners --json pkg.cmh >owners_pkg.json 2>&1
check "owners --json: the package's row is a library's, named gpulib" "py - <<'PY'
import json
rows = [r for d in json.load(open('owners_pkg.json')) for m in d['moments'] for r in m['rows']]
g = [r for r in rows if r['owner'] == 'gpulib']
assert g and all(r['kind'] == 'library' for r in g), rows
PY"

# --- the package's allocating function stays in the profile and the flamegraph ---
"$CMH" flamegraph --folded pkg.cmh >pkg.folded 2>&1
"$CMH" flamegraph -o pkg.svg pkg.cmh >/dev/null 2>&1
"$CMH" export -f pprof -o pkg.pb.gz pkg.cmh >/dev/null 2>&1
check "flamegraph: the user's line, then the package's device_alloc below it; no ctypes frame ($(head -c 300 pkg.folded))" \
    "grep -q 'build_model (.*proj/job.py:$W);device_alloc (.*site-packages/gpulib/__init__.py:$A) 67108864\$' pkg.folded &&
     grep -q 'step (.*proj/job.py:$K);device_alloc (.*site-packages/gpulib/__init__.py:$A) 10485760\$' pkg.folded &&
     ! grep -qE 'ffi_call|_ctypes|PyCFuncPtr' pkg.folded && grep -q 'gpulib/__init__.py:$A' pkg.svg"
if command -v go >/dev/null 2>&1 && go tool pprof -h >/dev/null 2>&1; then
    go tool pprof -raw pkg.pb.gz >pkg.raw 2>&1
    go tool pprof -top pkg.pb.gz >pkg.top 2>&1
    check "go tool pprof: the package's device_alloc is a location, holding the flat bytes; no libffi frame ($(grep -m1 device_alloc pkg.top | tr -s ' '))" \
        "grep -q 'device_alloc .*site-packages/gpulib/__init__.py:$A' pkg.raw && ! grep -qE 'ffi_call|libffi' pkg.raw &&
         grep -qE '^ +74MB +100% +100% +74MB +100% +device_alloc\$' pkg.top"
else
    echo "skipped: go tool pprof is not installed (the profile's device_alloc checked by its strings only)"
    check "the pprof profile names the package's device_alloc" \
        "py -c \"import gzip; b = gzip.open('pkg.pb.gz').read(); assert b'gpulib/__init__.py' in b and b'device_alloc' in b\""
fi

# --- a Python thread's name: threading's, not the OS's 'python3' (the start-up hook gives each
# threading.Thread's name to the recorder as it starts); in the exit dump, and in a record
# recovered after SIGKILL (the flight record's thread record) ---
cat >thr.py <<'PYEOF'
import ctypes, os, sys, threading
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
kept = []
def work(n):
    cu.cuCtxSetCurrent(ctx)
    for _ in range(n):
        p = ctypes.c_uint64()
        assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
        kept.append(p.value)
ts = [threading.Thread(target=work, args=(2,), name="kv-prefetch"), threading.Thread(target=work, args=(3,), name="leaker")]
for t in ts: t.start()
for t in ts: t.join()
if sys.argv[1:] == ["kill"]:
    os.kill(os.getpid(), 9)
PYEOF
"$CMH" record -q -o thr.cmh -- $PY thr.py >/dev/null 2>&1
"$CMH" record -q -o thrk.cmh -- $PY thr.py kill >/dev/null 2>&1
"$CMH" export -q -f sqlite -o thr.db thr.cmh >/dev/null 2>&1
"$CMH" export -q -f sqlite -o thrk.db thrk.cmh >/dev/null 2>&1
check "Python threads carry their threading names, exit dump and recovered record alike" "py - <<'PY'
import sqlite3
for db in ('thr.db', 'thrk.db'):
    names = {r[0] for r in sqlite3.connect(db).execute('SELECT name FROM threads')}
    assert {'kv-prefetch', 'leaker'} <= names, (db, names)
PY"
finish
