#!/bin/sh
# unknowns_test.sh BUILD_DIR SOURCE_DIR - a line says what the record knows and no more: a device
# that has segments but no trace in the snapshot (device_traces shorter than the devices) is said
# to have none, not guessed to be enabled=state; an OOM entry without device_free has that figure
# not known (text and --json null), and no verdict reads it as 0; long site names stay whole.
TEST=unknowns . "$(dirname "$0")/testlib.sh"

# two devices hold segments, device_traces lists one: device 1's trace is missing from the snapshot
py - short.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
def fr(l): return [{"filename": "train.py", "line": l, "name": "step"}]
segs, traces = [], []
for dev in range(2):
    base = 0x7f0000000000 + dev * (1 << 36)
    traces.append([{"action": "segment_alloc", "addr": base, "size": 20 * MIB, "stream": 0, "time_us": 1000, "frames": fr(10)},
                   {"action": "alloc", "addr": base, "size": 8 * MIB, "stream": 0, "time_us": 1001, "frames": fr(11)}])
    segs.append({"device": dev, "address": base, "total_size": 20 * MIB, "allocated_size": 8 * MIB, "active_size": 8 * MIB,
                 "requested_size": 8 * MIB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
                 "frames": fr(10), "blocks": [{"address": base, "size": 8 * MIB, "requested_size": 8 * MIB, "state": "active_allocated", "frames": fr(11)},
                                              {"address": base + 8 * MIB, "size": 12 * MIB, "requested_size": 0, "state": "inactive", "frames": []}]})
pickle.dump({"segments": segs, "device_traces": traces[:1], "allocator_settings": {}}, open(sys.argv[1], "wb"), protocol=4)
EOF
for c in peak summary frag oom leaks; do
    "$CMH" $c --device 1 short.pickle >short_$c.txt 2>&1
    grep -q "no history.*(the snapshot has no trace for this device)" short_$c.txt && ! grep -q "enabled=state" short_$c.txt &&
        ok "$c: a device without a trace in the snapshot is said to have none, no cause guessed" ||
        bad "$c: $(grep -i history short_$c.txt)"
done
"$CMH" report -o short.html --device 1 short.pickle >/dev/null 2>&1
check "report: the missing trace said as it is" "grep -q 'No history on this device (the snapshot has no trace for this device)' short.html"
"$CMH" peak --device 0 short.pickle >short_peak0.txt 2>&1
check "peak: device 0's trace is there" "grep -q '^peak allocated: 8.0 MiB' short_peak0.txt"

# ranks keeps a long site name whole (it cut names at 199 bytes), in its table and in --json
py - long.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
name = "::".join("detail_namespace_%02d" % i for i in range(16)) + "::elementwise_kernel_launcher_for_float_tensors"
assert len(name) > 300
def fr(): return [{"filename": "/src/aten/Loops.cuh", "line": 42, "name": name}]
base = 0x7f0000000000
tr = [{"action": "segment_alloc", "addr": base, "size": 20 * MIB, "stream": 0, "time_us": 1000, "frames": fr()}]
for k in range(4):
    tr.append({"action": "alloc", "addr": base + k * 2 * MIB, "size": 2 * MIB, "stream": 0, "time_us": 1001 + k, "frames": fr()})
blocks = [{"address": base + k * 2 * MIB, "size": 2 * MIB, "requested_size": 2 * MIB, "state": "active_allocated", "frames": fr()} for k in range(4)]
blocks.append({"address": base + 8 * MIB, "size": 12 * MIB, "requested_size": 0, "state": "inactive", "frames": []})
segs = [{"device": 0, "address": base, "total_size": 20 * MIB, "allocated_size": 8 * MIB, "active_size": 8 * MIB, "requested_size": 8 * MIB,
         "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr(), "blocks": blocks}]
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}}, open(sys.argv[1], "wb"), protocol=4)
open("long.name", "w").write(name + " (/src/aten/Loops.cuh:42)")
EOF
cp long.pickle long2.pickle
"$CMH" ranks long.pickle long2.pickle >long.txt 2>&1
"$CMH" ranks --json long.pickle long2.pickle >long.json 2>/dev/null
check "ranks: the table shows a long site name whole" "[ \$(grep -cF \"\$(cat long.name), 8.0 MiB\" long.txt) -eq 2 ]"
py - long.json long.name <<'EOF'
import json, sys
d, name = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
got = [p["top_site_at_peak"] for p in d["processes"]]
assert got == [name, name], (got, name)
EOF
check "ranks --json: top_site_at_peak whole" "[ $? -eq 0 ]"

finish
