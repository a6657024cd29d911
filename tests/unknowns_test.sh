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

# an OOM entry without device_free (a PyTorch snapshot that lacks it): device free not known, not 0
py - nofree.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
def fr(l): return [{"filename": "train.py", "line": l, "name": "step"}]
base = 0x7f0000000000
tr = [{"action": "segment_alloc", "addr": base, "size": 20 * MIB, "stream": 0, "time_us": 1000, "frames": fr(10)},
      {"action": "alloc", "addr": base, "size": 8 * MIB, "stream": 0, "time_us": 1001, "frames": fr(11)},
      {"action": "oom", "size": 64 * MIB, "stream": 0, "time_us": 1002, "frames": fr(12)}]
segs = [{"device": 0, "address": base, "total_size": 20 * MIB, "allocated_size": 8 * MIB, "active_size": 8 * MIB, "requested_size": 8 * MIB,
         "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr(10),
         "blocks": [{"address": base, "size": 8 * MIB, "requested_size": 8 * MIB, "state": "active_allocated", "frames": fr(11)},
                    {"address": base + 8 * MIB, "size": 12 * MIB, "requested_size": 0, "state": "inactive", "frames": []}]}]
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}}, open(sys.argv[1], "wb"), protocol=4)
EOF
"$CMH" oom nofree.pickle >nofree_oom.txt 2>&1
check "oom: device free not known, not 0 B" "grep -q '^  device free (driver) *not known' nofree_oom.txt && ! grep -q 'device free (driver) *0 B' nofree_oom.txt"
"$CMH" oom --json nofree.pickle >nofree_oom.json 2>&1
"$CMH" frag --json nofree.pickle >nofree_frag.json 2>&1
"$CMH" ranks --json nofree.pickle nofree.pickle >nofree_ranks.json 2>/dev/null
"$CMH" export -o nofree_back.pickle nofree.pickle >/dev/null 2>&1
py - nofree_oom.json nofree_frag.json nofree_ranks.json nofree_back.pickle <<'EOF'
import json, pickle, sys
o, f, r = (json.load(open(p)) for p in sys.argv[1:4])
e = o[0]["ooms"][0]
assert e["device_free"] is None, e
assert f[0]["last_oom"]["device_free"] is None, f[0]["last_oom"]
assert all(p["first_oom_device_free"] is None for p in r["processes"]), r["processes"]
# free in segments = reserved - allocated holds with the unknown beside it
assert e["free_in_segments"] == e["reserved"] - e["allocated"], e
# the export leaves the key out, as the snapshot had it, rather than writing 0 (or 2^64 - 1)
back = [x for x in pickle.load(open(sys.argv[4], "rb"))["device_traces"][0] if x["action"] == "oom"]
assert len(back) == 1 and "device_free" not in back[0], back
EOF
check "oom/frag/ranks --json: device_free null; export keeps it absent" "[ $? -eq 0 ]"
# its verdict: 12 MiB free inside the segments for 64 MiB, the device's free not said: the rest
# may have been free there (fragmentation) or in use (demand); oom and frag say it cannot be told,
# in text and --json (both read 'demand: the memory was genuinely in use')
"$CMH" frag nofree.pickle >nofree_frag.txt 2>&1
check "oom, frag: the verdict is not known without the device's free bytes, not demand" \
    "grep -q '^  verdict: not known: the record does not say how much the device had free' nofree_oom.txt &&
     grep -q '^  verdict: not known: ' nofree_frag.txt && ! grep -q 'verdict: demand' nofree_oom.txt nofree_frag.txt &&
     grep -q '\"verdict\": *\"not known\"' nofree_oom.json && grep -q '\"verdict\": *\"not known\"' nofree_frag.json"
"$CMH" ranks nofree.pickle nofree.pickle >nofree_ranks.txt 2>/dev/null
check "ranks: device free not known" "grep -q 'device free not known' nofree_ranks.txt"
"$CMH" whatif nofree.pickle >nofree_wi.txt 2>&1
check "whatif: the capacity says the OOM reported no free memory" "grep -q 'it reported no free memory (not known)' nofree_wi.txt"
# the same snapshot with device_free 0: a figure, said as one
py - zero.pickle <<'EOF'
import pickle, sys
d = pickle.load(open("nofree.pickle", "rb"))
d["device_traces"][0][-1]["device_free"] = 0
pickle.dump(d, open(sys.argv[1], "wb"), protocol=4)
EOF
"$CMH" trace nofree.pickle >nofree_trace.txt 2>&1
"$CMH" plot -o nofree.svg nofree.pickle >/dev/null 2>&1
"$CMH" export --format chrome -o nofree_chrome.json nofree.pickle >/dev/null 2>&1
check "trace, plot, chrome: device free not known, not 0" \
    "grep -q '64.0MiB requested, device free not known' nofree_trace.txt && grep -q 'asked 64.0 MiB, device free not known' nofree.svg &&
     grep -q '67108864 bytes requested, device free not known' nofree_chrome.json"
"$CMH" oom --json zero.pickle >zero.json 2>&1
check "oom --json: a device_free of 0 stays 0" "py -c \"import json; assert json.load(open('zero.json'))[0]['ooms'][0]['device_free'] == 0\""

# trace's text counts memory_viz's entries of a recorder record (a driver allocation is two of
# them): it says so, and how they map to the record's numbering that peak, summary, leaks and
# trace --json give, the same mapping export states
"$CMH" record -q -o leaky.cmh -- "$B/samples/leaky" 5 >/dev/null 2>&1 || bad "record leaky"
"$CMH" trace leaky.cmh >leaky_trace.txt 2>leaky_trace.err
"$CMH" trace --json leaky.cmh >leaky_trace.json 2>/dev/null
"$CMH" peak leaky.cmh >leaky_peak.txt 2>&1
"$CMH" export -o leaky_back.pickle leaky.cmh 2>leaky_export.err >/dev/null
py - <<'EOF'
import json, re
txt, err = open("leaky_trace.txt").read(), open("leaky_trace.err").read()
peak, exp = open("leaky_peak.txt").read(), open("leaky_export.err").read()
shown = int(re.search(r"^(\d+) entries$", txt, re.M).group(1))
ours = int(re.search(r"device 0: (\d+) trace entries", peak).group(1))
at = int(re.search(r"^peak allocated: .* at entry (\d+),", peak, re.M).group(1))
assert shown != ours, (shown, ours)  # the case that needs the note
# one short line each (it was a ~400-character paragraph on every run), the why in docs/CLI.md
m = re.search(r"^cumemhist: trace: device 0: the text counts the pickle's (\d+) entries for the record's (\d+) "
              r"\(the allocated peak, entry (\d+), is its (\d+)\); docs/CLI.md \"Entry numbers\"$", err, re.M)
assert m and (int(m.group(1)), int(m.group(2)), int(m.group(3))) == (shown, ours, at), (err, shown, ours, at)
# export maps the same entries, and names the page's rows (which fold each free's two entries)
assert f"device 0: {m.group(2)} entries are the pickle's {m.group(1)}, memory_viz's " in exp, exp
assert re.search(rf"the allocated peak, entry {m.group(3)}, is the row `alloc b[0-9a-f]+_\d+` \(ctrl-f\)", exp), exp
assert all(len(l) <= 200 for l in (err + exp).splitlines()), (err, exp)
assert len(json.load(open("leaky_trace.json"))[0]["entries"]) == ours
EOF
check "trace: says its text counts memory_viz's entries and maps them to the record's, as export does" "[ $? -eq 0 ]"
"$CMH" trace -q leaky.cmh >/dev/null 2>leaky_trace_q.err
"$CMH" export -q -o leaky_back_q.pickle leaky.cmh >/dev/null 2>leaky_export_q.err
check "trace -q and export -q: no note on entry numbering, no 'wrote' line ($(cat leaky_trace_q.err leaky_export_q.err | head -c 300))" \
    "[ ! -s leaky_trace_q.err ] && [ ! -s leaky_export_q.err ] && [ -s leaky_back_q.pickle ]"
"$CMH" trace short.pickle >/dev/null 2>short_trace.err
# (no note on entry numbers: the same entries; device 1's missing trace is said, as every report says it)
check "trace: no numbering note for a PyTorch pickle (the same entries), device 1's missing trace said ($(cat short_trace.err))" \
    "! grep -qv '^cumemhist: trace: short.pickle, device 1: nothing to print (the snapshot has no trace for this device)' short_trace.err && [ -s short_trace.err ]"

finish
