#!/bin/sh
# torch_strings_test.sh BUILD_DIR - frame strings as PyTorch writes them: a NUL inside a name
# (PyTorch pickles any str; a demangled C++ name can carry one) is read, kept on re-export, shown
# escaped in text and as \u0000 in JSON, and the trace prints it as Python's repr would.  And a
# snapshot made on Windows (FIXTURES_DIR's, their Python paths rewritten C:\Users\...\x.py,
# ...\Lib\site-packages\torch\...): peak, leaks, owners and diff name the same user lines as for
# the Linux original, the paths only changed.
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR [FIXTURES_DIR]}" && pwd)
F=${2:-}
T=$(mktemp -d /tmp/cmh-tstr-XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
CMH=$B/cumemhist
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
env -u LD_PRELOAD python3 - nul.pickle <<'PY'
import pickle, sys
M, S = 1 << 20, 0x7F5000000000
fr = [{"name": "myext::empty\x00tail", "filename": "/home/u/ext/kernel.cpp", "line": 5},
      {"name": "step", "filename": "/home/u/train.py", "line": 12}]
tr = [{"action": "segment_alloc", "addr": S, "size": 2 * M, "stream": 0, "time_us": 1, "frames": fr},
      {"action": "alloc", "addr": S, "size": M, "stream": 0, "time_us": 2, "frames": fr},
      {"action": "segment_map", "addr": S, "size": 2 * M, "stream": 0, "time_us": 3, "frames": fr}]
blocks = [{"address": S, "size": M, "requested_size": M, "state": "active_allocated", "frames": fr},
          {"address": S + M, "size": M, "requested_size": 0, "state": "inactive", "frames": []}]
seg = {"device": 0, "address": S, "total_size": 2 * M, "allocated_size": M, "active_size": M, "requested_size": M, "stream": 0,
       "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr, "blocks": blocks}
pickle.dump({"segments": [seg], "device_traces": [tr]}, open(sys.argv[1], "wb"), protocol=4)
open("map.repr", "w").write(repr(tr[2]) + "\n")
PY
"$CMH" stats nul.pickle >stats.txt 2>err && ok || bad "a NUL in a frame's name refused: $(cat err)"
# kept on re-export: the memory_viz pickle holds the same str
"$CMH" export nul.pickle -o back.pickle 2>err && env -u LD_PRELOAD python3 -c "
import pickle, sys
a, b = (pickle.load(open(p, 'rb')) for p in sys.argv[1:3])
names = lambda d: sorted({f['name'] for t in d['device_traces'] for e in t for f in e.get('frames', [])})
assert names(a) == names(b), (names(a), names(b))
assert b['segments'][0]['blocks'][0]['frames'][0]['name'] == 'myext::empty\x00tail'
" nul.pickle back.pickle && ok || bad "re-export lost the NUL: $(cat err)"
# JSON: \u0000, which json reads back as the NUL
"$CMH" export -f json nul.pickle -o nul.json 2>err && env -u LD_PRELOAD python3 -c "
import json, sys
t = open(sys.argv[1], encoding='utf-8').read()
assert 'empty\\\\u0000tail' in t
" nul.json && ok || bad "JSON export does not write the NUL as \\u0000: $(cat err)"
# text: escaped, never the raw byte (nor the model's C0 80)
"$CMH" peak nul.pickle >peak.txt 2>&1
if grep -q 'myext::empty\\x00tail' peak.txt && ! LC_ALL=C grep -q "$(printf '\300')" peak.txt && tr -d '\000' <peak.txt | cmp -s - peak.txt; then ok; else bad "peak: the NUL not shown as \\x00"; LC_ALL=C cat -v peak.txt | grep empty | head -3; fi
# trace: the entry it prints whole is Python's repr of it
"$CMH" trace nul.pickle 2>/dev/null | grep "^{'action': 'segment_map'" >map.got
cmp -s map.got map.repr && ok || { bad "trace: not Python's repr"; diff map.got map.repr | head -4; }
# Windows paths: the same report, but for the paths themselves
if [ -n "$F" ] && [ -d "$F" ]; then
    for n in transformer_nuggets_mini_snapshot octree_nca_cpp_frames_snapshot_action cs336_kk_2.7b_forward_compile_annotations_cppframes; do
        [ -f "$F/$n.pickle" ] || continue
        env -u LD_PRELOAD python3 - "$F/$n.pickle" win.pickle names.json <<'PY'
import json, pickle, re, sys
def win(f):
    if "/site-packages/" in f:
        return "C:\\Users\\u\\venv\\Lib\\site-packages\\" + f.split("site-packages/", 1)[1].replace("/", "\\")
    m = re.match(r"/usr/lib/python3\.\d+/(.*)", f)
    if m:
        return "C:\\Python312\\Lib\\" + m.group(1).replace("/", "\\")
    if f.startswith("/home/") and f.endswith(".py"):
        return "C:\\Users\\" + f[6:].replace("/", "\\")
    if f.startswith("/tmp/") and f.endswith(".py"):
        return "C:\\Users\\u\\AppData\\Local\\Temp\\" + f[5:].replace("/", "\\")
    return f
d, names = pickle.load(open(sys.argv[1], "rb")), {}
def walk(o):
    if isinstance(o, dict):
        if isinstance(o.get("filename"), str) and "line" in o:
            w = win(o["filename"])
            if w != o["filename"]:
                names[o["filename"]] = w
            o["filename"] = w
        for v in o.values():
            walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(d)
assert names, "no path rewritten"
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
json.dump(names, open(sys.argv[3], "w"))
PY
        for c in peak leaks owners diff; do
            if [ $c = diff ]; then "$CMH" diff "$F/$n.pickle" "$F/$n.pickle" >lin.txt 2>&1; "$CMH" diff win.pickle win.pickle >win.txt 2>&1
            else "$CMH" $c "$F/$n.pickle" >lin.txt 2>&1; "$CMH" $c win.pickle >win.txt 2>&1; fi
            env -u LD_PRELOAD python3 - lin.txt win.txt names.json "$F/$n.pickle" win.pickle <<'PY' && ok || bad "$n: $c of the Windows snapshot is not the Linux one's"
import difflib, json, sys
lin, win, names = open(sys.argv[1]).read(), open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
lin = lin.replace(sys.argv[4], sys.argv[5])
for k in sorted(names, key=len, reverse=True):
    lin = lin.replace(k, names[k])
if lin != win:
    sys.stdout.writelines(list(difflib.unified_diff(lin.splitlines(True), win.splitlines(True)))[:12])
    sys.exit(1)
PY
        done
        # the user's own line, not torch's
        if [ $n = transformer_nuggets_mini_snapshot ]; then
            "$CMH" peak win.pickle 2>/dev/null | grep -q 'main (C:\\Users\\drisspg\\meta\\.*\\attention\.py:358)' && ok || bad "$n: peak does not name attention.py:358"
        fi
    done
else
    echo "note: no PyTorch fixtures: the Windows snapshots skipped"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
