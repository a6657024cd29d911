#!/bin/sh
# torch_strings_test.sh BUILD_DIR - frame strings as PyTorch writes them: a NUL inside a name
# (PyTorch pickles any str; a demangled C++ name can carry one) is read, kept on re-export, shown
# escaped in text and as \u0000 in JSON, and the trace prints it as Python's repr would.
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
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
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
