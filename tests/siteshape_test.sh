#!/bin/sh
# siteshape_test.sh BUILD_DIR SOURCE_DIR - how a site and its stack read in the text outputs:
# a site with no code of the user's (PyTorch's C++ alone: an autograd engine thread) says so in
# leaks, peak, the flamegraph, the HTML report and the "by site" lines; a recursive function's repeated frame is
# one line with its count in text ("rec (...) (x12 recursive)") while the JSON keeps every frame;
# top's stack (Enter, --json) is the reports' (from the site outward, ctypes' glue and CPython
# left out, recursion folded) and its sites carry their split by caller.
TEST=siteshape . "$(dirname "$0")/testlib.sh"

# --- a PyTorch snapshot: a Python site, an autograd engine thread's (C++ frames only), a recursion ---
py - nopy.pickle <<'PY' || bad "writing nopy.pickle failed"
import pickle, sys
M = 1 << 20
pyf = [{'name': 'forward', 'filename': '/home/u/train.py', 'line': 12}, {'name': '<module>', 'filename': '/home/u/train.py', 'line': 30}]
eng = [{'name': 'c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)', 'filename': '??', 'line': 0},
       {'name': 'at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)', 'filename': '??', 'line': 0},
       {'name': 'at::_ops::mm::call(at::Tensor const&, at::Tensor const&)', 'filename': '??', 'line': 0},
       {'name': 'torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)', 'filename': '??', 'line': 0},
       {'name': 'torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)', 'filename': '??', 'line': 0},
       {'name': 'start_thread', 'filename': '??', 'line': 0}]
rec = [{'name': 'leaf', 'filename': '/home/u/r.py', 'line': 3}, {'name': 'rec', 'filename': '/home/u/r.py', 'line': 8}] + \
      [{'name': 'rec', 'filename': '/home/u/r.py', 'line': 10}] * 12 + [{'name': '<module>', 'filename': '/home/u/r.py', 'line': 20}]
b, tr, blocks, off, t = 1 << 40, [], [], 0, 1000
tr.append({'action': 'segment_alloc', 'addr': b, 'size': 64 * M, 'stream': 0, 'time_us': t, 'frames': pyf})
for i, (size, fr) in enumerate([(8, pyf), (4, eng), (2, rec)]):
    tr.append({'action': 'alloc', 'addr': b + off, 'size': size * M, 'stream': 0, 'time_us': t + 10 * (i + 1), 'frames': fr})
    blocks.append({'address': b + off, 'size': size * M, 'requested_size': size * M, 'state': 'active_allocated', 'frames': fr})
    off += size * M
blocks.append({'address': b + off, 'size': 64 * M - off, 'requested_size': 0, 'state': 'inactive', 'frames': []})
seg = {'device': 0, 'address': b, 'total_size': 64 * M, 'allocated_size': off, 'active_size': off, 'requested_size': off,
       'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': pyf, 'blocks': blocks}
pickle.dump({'segments': [seg], 'device_traces': [tr]}, open(sys.argv[1], 'wb'))
PY
NOPY='(no Python frame: at::_ops::mm::call(at::Tensor const&, at::Tensor const&))'
"$CMH" leaks nopy.pickle >leaks.txt 2>&1
"$CMH" peak nopy.pickle >peak.txt 2>&1
"$CMH" flamegraph -o flame.svg nopy.pickle >/dev/null 2>&1
for f in leaks.txt peak.txt; do
    check "$f: the autograd thread's site says it has no Python frame, the Python site does not ($(grep -m2 'at::_ops::mm::call' $f | tr -s ' ' | tr '\n' '|'))" \
        "grep -qF '  $NOPY  [PyTorch]' $f && grep -qE '  forward \\(/home/u/train.py:12\\)  \\[PyTorch\\]\$' $f && [ \$(grep -c 'no Python frame' $f) -eq 1 ]"
done
check "flamegraph: the site's box says it ($(grep -o '<title>[^<]*mm::call[^<]*</title>' flame.svg))" \
    "grep -qF '<title>(no Python frame: at::_ops::mm::call(at::Tensor const&amp;, at::Tensor const&amp;)) ' flame.svg &&
     [ \$(grep -c 'no Python frame' flame.svg) -eq 1 ]"
"$CMH" report -o report.html nopy.pickle >/dev/null 2>&1
check "report (HTML): the site's rows say it ($(grep -o '[^>]*no Python frame[^<]*' report.html | head -1))" \
    "grep -qF '(no Python frame: at::_ops::mm::call(at::Tensor const&amp;, at::Tensor const&amp;))' report.html &&
     ! grep -q 'no Python frame: forward' report.html"
check "leaks, peak: twelve rec frames in a row are one line with their count ($(grep -m1 'recursive' leaks.txt | tr -s ' '))" \
    "(for f in leaks.txt peak.txt; do grep -A4 '  leaf (/home/u/r.py:3)' \$f | grep -qx '        at rec (/home/u/r.py:10) (x12 recursive)' &&
        [ \$(grep -c 'at rec (/home/u/r.py:10)' \$f) -eq 1 ] || exit 1; done)"
"$CMH" leaks --json --group-by stack nopy.pickle >leaks.json 2>&1
check "leaks --json keeps every frame of the recursion (12 rec:10 frames, not folded)" "py - <<'PY'
import json
sites = json.load(open('leaks.json'))[0]['sites']
fr = [f for x in sites if x['site']['function'] == 'leaf' for f in x['frames']]
assert sum(1 for f in fr if f['function'] == 'rec' and f['line'] == 10) == 12, fr
PY"

# --- top on a live Python job over ctypes: its stack as the reports print it, its split by caller ---
case "${LD_PRELOAD:-}" in *asan* | *ubsan* | *tsan*) echo "skipped (top part): python under a sanitizer runtime"; finish; exit ;; esac
PYB=/usr/bin/python3
[ -x $PYB ] || { echo "skipped (top part): no /usr/bin/python3"; finish; exit; }
cp "$SRC/tests/python/siteshape_prog.py" job.py
L() { grep -n "# L:$1\$" job.py | cut -d: -f1; }
"$CMH" record -q -o live.cmh -- $PYB job.py ready stop >out.txt 2>err.txt &
wait_until 60 '[ -e ready ]' || bad "the job did not start ($(head -c 300 err.txt))"
"$CMH" top --json >top.json 2>top.err
"$CMH" top --once >top.txt 2>&1
touch stop
wait
check "top --json: the site's stack from the site outward, no ctypes or CPython frame, the recursion one line ($(head -c 600 top.json))" "py - $(L alloc) $(L build) $(L bottom) $(L recurse) <<'PY'
import json, sys
a, b, bottom, r = sys.argv[1:]
d = json.load(open('top.json'))
sites = [s for p in d['processes'] for x in p['devices'] for s in x['sites']]
assert len(sites) == 1, sites
s = sites[0]
assert s['site'].startswith('alloc (') and s['site'].endswith('job.py:%s)' % a), s
st = s['stack']
assert st[0] == s['site'], st
assert not any(k in f for f in st for k in ('ffi_call', 'libffi', '_ctypes', 'PyObject_', '_PyEval', 'Py_BytesMain', '_start')), st
assert st[1].endswith('job.py:%s)' % b) and st[2].startswith('<module> ('), st
PY"
check "top --json: by caller, the two lines that called the helper" \
    "grep -qE '\"by_caller\": \"by caller: 8.0 MiB build \\([^)]*job.py:$(L build)\\), 2.0 MiB deep \\([^)]*job.py:$(L bottom)\\)\"' top.json"
check "top --once: the site's split by caller under its row ($(grep 'by caller' top.txt | tr -s ' '))" \
    "grep -qE '^ +by caller: 8.0 MiB build \\([^)]*job.py:$(L build)\\), 2.0 MiB deep \\([^)]*job.py:$(L bottom)\\)\$' top.txt"
finish
