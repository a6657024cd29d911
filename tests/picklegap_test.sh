#!/bin/sh
# picklegap_test.sh BUILD_DIR SOURCE_DIR - a PyTorch snapshot whose segment's total_size is more
# than its blocks cover (6 MiB, blocks tiling 4 MiB: PyTorch's own segsum asserts they tile it)
# is read, said on stderr (which segment, how many bytes no block covers), and every output keeps
# free = reserved - allocated, the uncovered bytes counted as a free gap.  It was read silently:
# stats said total_reserved 6.0MiB, total_allocated 2.0MiB, total_free 2.0MiB.
TEST=picklegap . "$(dirname "$0")/testlib.sh"
py <<'PY'
import pickle
MiB = 1 << 20
seg = {"device": 0, "address": 0x1000000, "total_size": 6 * MiB, "allocated_size": 2 * MiB, "active_size": 2 * MiB,
       "requested_size": 2 * MiB - 5, "stream": 0, "segment_type": "large",
       "blocks": [{"address": 0x1000000, "size": 2 * MiB, "requested_size": 2 * MiB - 5, "state": "active_allocated", "frames": []},
                  {"address": 0x1200000, "size": 2 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]}
ok = dict(seg, total_size=4 * MiB)
pickle.dump({"segments": [seg], "device_traces": [[]]}, open("bad.pickle", "wb"))
pickle.dump({"segments": [ok], "device_traces": [[]]}, open("good.pickle", "wb"))
PY
"$CMH" stats bad.pickle >stats.txt 2>stats.err
check "stats: said on stderr, segment 0x1000000, 2097152 bytes uncovered ($(cat stats.err))" \
    'grep -q "segment 0x1000000 on device 0 has total_size 6291456 bytes, its 2 blocks cover 4194304: 2097152 bytes uncovered" stats.err'
check "stats: total_free 4.0MiB = 6.0MiB reserved - 2.0MiB allocated ($(grep total_ stats.txt | tr '\n' ' '))" \
    'grep -q "^total_reserved: 6.0MiB" stats.txt && grep -q "^total_allocated: 2.0MiB" stats.txt && grep -q "^total_free: 4.0MiB" stats.txt'
"$CMH" stats good.pickle >good.txt 2>good.err
check "a snapshot whose blocks tile their segment: nothing said ($(cat good.err))" '[ ! -s good.err ]'
"$CMH" frag --json bad.pickle >frag.json 2>/dev/null
"$CMH" summary --json bad.pickle >sum.json 2>/dev/null
out=$(py <<'PY'
import json
f = json.load(open("frag.json"))[0]
s = json.load(open("sum.json"))[0]
bad = []
if f["free_in_segments"] != f["reserved"] - f["allocated"]: bad.append("frag free %d" % f["free_in_segments"])
g = f["segments"][0]
if g["free"] != g["reserved"] - g["allocated"] or g["releasable"] + g["trapped"] != g["free"]: bad.append("segment %s" % g)
print("; ".join(bad) or "same")
PY
)
check "frag --json: free = reserved - allocated, releasable + trapped = free: $out" '[ "$out" = same ]'
finish
