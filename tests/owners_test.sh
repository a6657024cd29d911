#!/bin/sh
# owners_test.sh BUILD_DIR SOURCE_DIR - one record from two (merge), and who holds every byte
# (owners): on the real H200 pair (torch_exp.cmh + torch_exp.pickle, taken at the same instant
# in one process) PyTorch's rows equal the pickle's own figures, the rest are named by owner,
# the rows sum; summary of the merged record is the pickle's; on the fake driver with a
# context of its own, the unexplained row is that context and the rows sum to the used bytes.
TEST=owners . "$(dirname "$0")/testlib.sh"
H=$F/h200

"$CMH" merge -o m.cmh "$H/torch_exp.cmh" "$H/torch_exp.pickle" 2>err.txt
check "merge: written, the clocks aligned on PyTorch's segment events ($(cat err.txt))" \
    '[ -s m.cmh ] && grep -q "clocks aligned on [1-9][0-9]* segment events" err.txt'
check "merge: the offset's sign is the operator ('PyTorch's - 0.091 ms', not '+ -0.091')" \
    "grep -q \"(ours = PyTorch's [-+] [0-9][0-9.]* ms, spread\" err.txt"
check "the merged record is mode 0600" 'ls -l m.cmh | grep -q "^-rw-------"'
"$CMH" summary m.cmh >m.txt && "$CMH" summary "$H/torch_exp.pickle" >p.txt
check "summary of the merged record = summary of PyTorch's pickle = its memory_summary()" \
    'cmp -s m.txt p.txt && cmp -s m.txt "$H/torch_exp_summary.txt"'
"$CMH" summary --json "$H/torch_exp.pickle" >pj.json
"$CMH" owners --json m.cmh >o.json
check "owners at the end: PyTorch's rows are the pickle's allocated and reserved - allocated; cuBLAS named; the rows sum" 'py - <<PY
import json
o = json.load(open("o.json"))[0]; st = json.load(open("pj.json"))[0]["stats"]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
rows = {r["owner"]: r for r in end["rows"]}
alloc = st["allocated_bytes.all"]["current"]; res = st["reserved_bytes.all"]["current"]
assert rows["PyTorch allocated"]["bytes"] == alloc, (rows, alloc)
assert rows["PyTorch reserved but free (cached)"]["bytes"] == res - alloc
assert rows["cuBLAS"]["bytes"] > 0 and rows["cuBLAS"]["allocations"] == 6, rows
assert sum(r["bytes"] for r in end["rows"]) == end["recorded"]
assert o["pytorch_part"] and o["pytorch_mismatch"] == 0
for m in o["moments"]:
    assert sum(r["bytes"] for r in m["rows"]) == m["recorded"], m
PY'
"$CMH" owners "$H/torch_exp.cmh" >d.txt 2>/dev/null
check "owners without PyTorch's part: PyTorch's segments in one row, cuBLAS apart" \
    'grep -q "544.0 MiB .*PyTorch (caching allocator, reserved)" d.txt && grep -q "128.3 MiB .*cuBLAS" d.txt'
"$CMH" owners --json "$H/torch_exp.pickle" >po.json
check "owners of PyTorch's pickle alone: its allocated and cached" 'py - <<PY
import json
o = json.load(open("po.json"))[0]; st = json.load(open("pj.json"))[0]["stats"]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
assert [r["bytes"] for r in end["rows"]] == [st["allocated_bytes.all"]["current"], st["reserved_bytes.all"]["current"] - st["allocated_bytes.all"]["current"]], end
PY'
"$CMH" merge -o bad.cmh "$H/torch_exp.pickle" "$H/torch_exp.cmh" 2>err.txt
check "merge refuses the two the wrong way round ($(cat err.txt))" '[ $? -ne 0 ] && [ ! -e bad.cmh ] && grep -q "is PyTorch" err.txt'
"$CMH" merge -o again.cmh m.cmh "$H/torch_exp.pickle" 2>err.txt
check "merge refuses a record that has its PyTorch part" '[ ! -e again.cmh ] && grep -q "already holds" err.txt'

# the fake driver with 300 MiB of its own (a context): cuMemGetInfo's used = recorded + 300 MiB
FAKECUDA_CONTEXT=300M FAKECUDA_CAPACITY=2G "$CMH" record -q -o l.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
"$CMH" owners --json l.cmh >l.json
check "owners on a recording: every moment sums to cuMemGetInfo's used, the context is the unexplained row" 'py - <<PY
import json
o = json.load(open("l.json"))[0]
assert [m["moment"] for m in o["moments"]] == ["peak", "end"], o["moments"]
for m in o["moments"]:
    rows = {r["kind"]: r for r in m["rows"]}
    assert m["used"] == sum(r["bytes"] for r in m["rows"]) == m["recorded"] + 300 * 2**20, m
    assert rows["unexplained"]["bytes"] == 300 * 2**20 and m["total"] == 2 * 2**30
    assert rows["program"]["owner"] == "program (leaky)"
PY'
"$CMH" owners l.cmh >l.txt
check "owners text: the total is the device's used memory" 'grep -q "total = the device.s used memory" l.txt && grep -q "not recorded (CUDA context, other processes)" l.txt'
# a record with no history (enabled=state): no peak moment, as `peak` says it is not known, and
# no entry to name where the device has no trace entry (it read 'at the end (entry -1)')
"$CMH" record -q --enabled state -o st.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
"$CMH" owners st.cmh >st.txt 2>&1
check "owners, enabled=state and no trace entry: the end alone, named without an entry number" \
    'grep -q "^st.cmh, device 0, at the end (no trace entries): 12.0 MiB recorded" st.txt && ! grep -q "entry -1\|, peak (" st.txt'
"$CMH" owners --json st.cmh >st.json 2>/dev/null
check "owners --json, no trace entry: the moment's index is null, not -1" \
    'py -c "import json,sys; m=json.load(open(sys.argv[1]))[0][\"moments\"]; assert [x[\"index\"] for x in m]==[None], m" st.json'
PT=${3:-}
FLEX=$PT/flexgen_torch20_oom_observer_block_history.pickle
if [ -n "$PT" ] && [ -f "$FLEX" ]; then
    "$CMH" peak "$FLEX" 2>/dev/null | grep -q "^peak: not known" || bad "peak on PyTorch 2.0's state-only snapshot: a peak told"
    "$CMH" owners "$FLEX" >flex.txt 2>/dev/null
    check "owners on a snapshot with no history (one snapshot entry): no 'peak (entry 0)', the end only" \
        '! grep -q ", peak (" flex.txt && grep -q "device 0, at the end (entry 0): 11.0 GiB recorded" flex.txt'
else
    echo "skipped: owners on PyTorch 2.0's state-only snapshot (no PyTorch fixtures)"
fi
# A trace of only frees: its peak (16 MiB allocated and reserved) is before the first entry, and
# owners names that moment as `peak` does (it said 'peak (entry 0)' with 8 MiB allocated).
py - <<'PY'
import pickle
M, F, S = 1 << 20, [{"name": "big", "filename": "/proj/a.py", "line": 3}], 0x7F0000000000
blocks = [{"address": S, "size": 8 * M, "requested_size": 8 * M, "state": "active_allocated", "frames": F},
          {"address": S + 8 * M, "size": 8 * M, "requested_size": 0, "state": "inactive", "frames": []}]
seg = {"device": 0, "address": S, "total_size": 16 * M, "allocated_size": 8 * M, "active_size": 8 * M, "requested_size": 8 * M, "stream": 0,
       "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
tr = [{"action": a, "addr": S + 8 * M, "size": 8 * M, "stream": 0, "time_us": 1_700_000_000_000_001, "frames": F} for a in ("free_requested", "free_completed")]
pickle.dump({"segments": [seg], "device_traces": [tr], "allocator_settings": {}, "external_annotations": []}, open("frees.pickle", "wb"))
PY
"$CMH" peak frees.pickle >frees.peak.txt
"$CMH" owners frees.pickle >frees.txt
"$CMH" owners --json frees.pickle >frees.json
check "owners of a trace of only frees: the peak before the first entry, 16 MiB allocated, as peak says it" \
    "grep -q '^peak reserved:  16.0 MiB (16777216 bytes) before the first entry' frees.peak.txt &&
     grep -q 'device 0, peak (before the first entry): 16.0 MiB recorded' frees.txt &&
     grep -q '^ *16.0 MiB  100.0%  *-  PyTorch allocated' frees.txt &&
     py -c 'import json; m = json.load(open(\"frees.json\"))[0][\"moments\"][0]; assert (m[\"moment\"], m[\"index\"]) == (\"peak\", -1), m'"
finish
