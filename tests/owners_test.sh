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
assert rows["cuBLAS (libcublas.so.13)"]["bytes"] > 0 and rows["cuBLAS (libcublas.so.13)"]["allocations"] == 6, rows
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
# a slip (another rank's or another day's pickle): refused, with why, unless --force; the real
# pair above, from one process, joins as before
py - <<'PY'
import pickle, time
M, A = 1 << 20, 0x7a0000000000
fr = [{"filename": "/proj/train.py", "line": 5, "name": "step"}]
seg = {"device": 0, "address": A, "total_size": 2 * M, "allocated_size": 2 * M, "active_size": 2 * M, "requested_size": 2 * M,
       "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr,
       "blocks": [{"address": A, "size": 2 * M, "requested_size": 2 * M, "state": "active_allocated", "frames": fr}]}
old = int((time.time() - 73 * 86400) * 1e6)
tr = [{"action": "segment_alloc", "addr": A, "size": 2 * M, "stream": 0, "time_us": old, "frames": fr},
      {"action": "alloc", "addr": A, "size": 2 * M, "stream": 0, "time_us": old + 1, "frames": fr}]
pickle.dump({"segments": [seg], "device_traces": [tr]}, open("old.pickle", "wb"), protocol=4)
for e in tr: del e["time_us"]
pickle.dump({"segments": [seg], "device_traces": [tr]}, open("elsewhere.pickle", "wb"), protocol=4)
PY
"$CMH" merge -o slip.cmh l.cmh old.pickle 2>err.txt
check "merge refuses a pickle whose trace ends 73 days before the recording ($(cat err.txt))" \
    '[ $? -eq 1 ] && [ ! -e slip.cmh ] && grep -q "do not look like one process.s: PyTorch.s trace ends 7[23].[0-9] days before the recording.s (--force" err.txt'
"$CMH" merge -o slip.cmh l.cmh elsewhere.pickle 2>err.txt
check "merge refuses a pickle none of whose memory the recording saw allocated ($(cat err.txt))" \
    '[ $? -eq 1 ] && [ ! -e slip.cmh ] && grep -q "none of PyTorch.s 1 address range is memory the recording saw allocated" err.txt'
"$CMH" merge --force -o slip.cmh l.cmh elsewhere.pickle 2>err.txt
check "merge --force joins them anyway" '[ $? -eq 0 ] && [ -s slip.cmh ]'
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
# memory taken by no hooked call after the peak (tests/unhooked.c: 600 MiB through the fake
# driver's own path, beside a 100 MiB context): owners' rows still sum to the device's used
# memory, its recorded bytes are peak's reserved, and both commands say in one same line why
# owners' total is so far above peak's figures (before, peak said 8 MiB reserved at the end and
# nothing more, owners 708 MiB in use)
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o u.cmh -- "$B/tests/unhooked" 600 >/dev/null 2>&1
"$CMH" peak u.cmh >u.peak.txt 2>&1
"$CMH" owners u.cmh >u.own.txt 2>&1
"$CMH" peak --json u.cmh >u.peak.json 2>&1
"$CMH" owners --json u.cmh >u.own.json 2>&1
grep '^not recorded: ' u.peak.txt >u.line.txt
check "peak and owners: the same one line on what no recorded call made ($(cat u.line.txt))" \
    "[ \$(wc -l <u.line.txt) -eq 1 ] && grep -qxF -f u.line.txt u.own.txt &&
     grep -q '^not recorded: the latest cuMemGetInfo (.*) had 708.0 MiB of 1.0 GiB in use, 700.0 MiB more than the 8.0 MiB the record held then: ' u.line.txt"
check "peak --json and owners --json: the same figures, summing to the device's used memory" 'py - <<PY
import json
p = json.load(open("u.peak.json"))[0]; o = json.load(open("u.own.json"))[0]
assert p["not_recorded"] == o["not_recorded"], (p["not_recorded"], o["not_recorded"])
n = p["not_recorded"]
assert n["used"] == 708 * 2**20 and n["recorded"] == p["end"]["reserved"] == 8 * 2**20 and n["bytes"] == 700 * 2**20, n
end = [m for m in o["moments"] if m["moment"] == "end"][0]
assert sum(r["bytes"] for r in end["rows"]) == end["used"] == n["used"], end
assert end["recorded"] == p["end"]["reserved"]
assert [r["bytes"] for r in end["rows"] if r["kind"] == "unexplained"] == [n["bytes"]], end
pk = [m for m in o["moments"] if m["moment"] == "peak"][0]
assert pk["recorded"] == p["peak_reserved"]["bytes"] == 64 * 2**20, (pk, p["peak_reserved"])
for m in o["moments"]:
    assert sum(r["bytes"] for r in m["rows"]) == m["used"] <= m["total"], m
PY'
# the CUDA context's own memory (there before the first allocation, and no more since) is on
# every GPU's record: peak and owners say it plainly in one short line, not as memory to hunt;
# before, peak printed the whole 'the latest cuMemGetInfo had ... a path not hooked' sentence
"$CMH" peak l.cmh >l.peak.txt 2>&1
grep '^not recorded: ' l.peak.txt >l.line.txt
check "context only: one plain line, the same in owners ($(cat l.line.txt))" \
    "[ \$(wc -l <l.line.txt) -eq 1 ] && grep -qxF -f l.line.txt l.txt &&
     grep -qx \"not recorded: 300.0 MiB in use that no recorded call made, as at the first allocation: the CUDA context's own and other processes' memory, not this program's (owners counts it, peak does not)\" l.line.txt"
check "context only, --json: all of it there at the first allocation, none since" '"$CMH" peak --json l.cmh | py -c "
import json, sys
n = json.load(sys.stdin)[0][\"not_recorded\"]
assert n[\"bytes\"] == n[\"at_first_allocation\"] == 300 * 2**20 and n[\"since\"] == 0 and n[\"grew\"] is False, n"'
# memory taken since, outside the record, is what matters: said apart from the context's
check "memory taken since the first allocation is told apart from the context's ($(cat u.line.txt))" \
    "grep -q ': 100.0 MiB was there at the first allocation (the CUDA context, other processes), 600.0 MiB came since, which no recorded call made (the driver'\\''s own as kernels load lazily' u.line.txt"
check "... and in --json" 'py -c "
import json
n = json.load(open(\"u.peak.json\"))[0][\"not_recorded\"]
assert n[\"at_first_allocation\"] == 100 * 2**20 and n[\"since\"] == 600 * 2**20 and n[\"grew\"] is True, n"'
# nothing taken outside the record: nothing to say, in either
FAKECUDA_CAPACITY=1G "$CMH" record -q -o u0.cmh -- "$B/tests/unhooked" 0 >/dev/null 2>&1
check "nothing but recorded memory in use: neither says 'not recorded:'" \
    "! \"\$CMH\" peak u0.cmh | grep -q '^not recorded:' && ! \"\$CMH\" owners u0.cmh | grep -q '^not recorded:' &&
     \"\$CMH\" peak --json u0.cmh | py -c 'import json,sys; assert json.load(sys.stdin)[0][\"not_recorded\"] is None'"

# the reconciliation with the final segments raising reserved above every entry's (a segment
# the final state holds that the trace freed and no entry made again: entries lost): peak names
# the final state its reserved peak (80 MiB); owners' peak moment said 48 MiB at entry 0, below
# its own end.  Now both take the final state, and say why in one same line.
py - <<'PY'
import pickle
M, F = 1 << 20, [{"name": "big", "filename": "/proj/a.py", "line": 3}]
S, S3, S4, T = 0x7F0000000000, 0x7F0020000000, 0x7F0040000000, 1_700_000_000_000_000
def seg(addr, size, blocks):
    al = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": 0, "address": addr, "total_size": size, "allocated_size": al, "active_size": al, "requested_size": al, "stream": 0,
            "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
free = lambda a, n: [{"address": a, "size": n, "requested_size": 0, "state": "inactive", "frames": []}]
b1 = [{"address": S, "size": 8 * M, "requested_size": 8 * M, "state": "active_allocated", "frames": F}] + free(S + 8 * M, 8 * M)
ev = lambda a, addr, t: {"action": a, "addr": addr, "size": 32 * M, "stream": 0, "time_us": T + t, "frames": F}
tr = [ev("segment_alloc", S3, 1), ev("segment_free", S3, 2), ev("segment_alloc", S4, 3)]
pickle.dump({"segments": [seg(S, 16 * M, b1), seg(S3, 32 * M, free(S3, 32 * M)), seg(S4, 32 * M, free(S4, 32 * M))], "device_traces": [tr],
             "allocator_settings": {}, "external_annotations": []}, open("recon.pickle", "wb"))
PY
"$CMH" peak recon.pickle >r.peak.txt 2>&1
"$CMH" owners recon.pickle >r.own.txt 2>&1
grep '^reconciled: ' r.peak.txt >r.line.txt
check "a reserved peak the reconciliation made: peak and owners say so in one same line ($(cat r.line.txt))" \
    "grep -q '^peak reserved:  80.0 MiB (83886080 bytes) at the end (the final state)' r.peak.txt && [ \$(wc -l <r.line.txt) -eq 1 ] &&
     grep -qxF -f r.line.txt r.own.txt &&
     grep -q '^reconciled: the final segments hold 32.0 MiB more than any entry left (reserved 80.0 MiB at the end, 48.0 MiB at most after an entry)' r.line.txt"
"$CMH" owners --json recon.pickle >r.own.json 2>&1
"$CMH" peak --json recon.pickle >r.peak.json 2>&1
check "owners' peak moment is peak's reserved peak, never below its own end" 'py - <<PY
import json
o = json.load(open("r.own.json"))[0]; p = json.load(open("r.peak.json"))[0]
m = {x["moment"]: x for x in o["moments"]}
assert m["peak"]["recorded"] == p["peak_reserved"]["bytes"] == m["end"]["recorded"] == 80 * 2**20, (m, p["peak_reserved"])
assert o["reconciled"] == p["reconciled"] and p["reconciled"]["trace_peak_reserved"] == 48 * 2**20, (o["reconciled"], p["reconciled"])
assert [x["moment"] for x in o["moments"]] == ["peak", "end"]
PY'
check "no reconciliation above the entries: neither says 'reconciled:'" \
    "! grep -q '^reconciled:' u.peak.txt && ! grep -q '^reconciled:' u.own.txt && grep -q '\"reconciled\": null' u.peak.json"

# allocations in flight at the first cuMemGetInfo sample (tests/inflight.c: other threads held
# inside the driver, their memory taken and their calls not yet logged, while one more allocates
# and the recorder samples): they are not 'not recorded' (it said 8 MiB of 3 x 4 MiB at once:
# trial F1); memory really taken outside the record (a context, fakecuda_take) still is, to the byte
FAKECUDA_CAPACITY=1G "$CMH" record -q -o if.cmh -- "$B/tests/inflight" 3 4 >/dev/null 2>&1
"$CMH" owners if.cmh >if.txt 2>&1
"$CMH" owners --json if.cmh >if.json 2>&1
# (the peak comes after the held calls are logged, its rows hold their 8 MiB: nothing is in flight
# at it, its figure is the end's exact sample's, assumed steady; it said '8.0 MiB more in use then')
check "owners, 3 threads allocating 4 MiB at once: the device had 12.0 MiB in use at the peak, none of it not recorded" \
    'grep -q "device 0, peak reserved (.*): 12.0 MiB recorded; the device had 12.0 MiB of 1.0 GiB in use" if.txt &&
     grep -q "^ *0 B .*not recorded (CUDA context, other processes)  (cuMemGetInfo at +[0-9.]*[^,]*s, assumed steady)\$" if.txt &&
     ! grep -q "more in use then" if.txt &&
     ! "$CMH" peak if.cmh | grep -q "^not recorded:"'
check "owners --json: nothing in flight at the peak, no moment with unexplained bytes" 'py - <<PY
import json
o = json.load(open("if.json"))[0]
assert o["not_recorded"] is None and o["impossible_samples"] == 0, o
pk = [m for m in o["moments"] if m["moment"] == "peak"][0]
assert pk["recorded"] == pk["used"] == 12 * 2**20 and pk["in_flight"] == 0 and not pk["sample_exact"], pk
for m in o["moments"]:
    assert [r["bytes"] for r in m["rows"] if r["kind"] == "unexplained"] == [0], m
PY'
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o ifc.cmh -- "$B/tests/inflight" 4 4 50 >/dev/null 2>&1
"$CMH" owners --json ifc.cmh >ifc.json 2>&1
check "owners, 4 threads at once beside a 100 MiB context and 50 MiB taken unhooked: 150 MiB not recorded at every moment" 'py - <<PY
import json
o = json.load(open("ifc.json"))[0]
assert [m["moment"] for m in o["moments"]] == ["peak", "end"], o["moments"]
for m in o["moments"]:
    assert [r["bytes"] for r in m["rows"] if r["kind"] == "unexplained"] == [150 * 2**20], m
    assert m["used"] == m["recorded"] + 150 * 2**20, m
assert o["moments"][0]["recorded"] == 16 * 2**20 and o["moments"][0]["in_flight"] == 0, o["moments"][0]
PY'
# the trial's record: a phase of 3 threads at once (the device's first sample taken with 8 MiB of
# theirs in the driver), then one thread alone frees theirs and reaches the peak; owners said at
# that peak '(and 1.0 MiB more in use then: other threads' allocations in the driver, logged just
# after)' with sample_exact true, of a sample taken entries before, and the report left it out.
# Now each moment's note speaks of calls in flight at that moment alone (an out-of-memory error
# the main thread hit while the others were held), in text, --json and the report alike.
FAKECUDA_CAPACITY=1G "$CMH" record -q -o ip.cmh -- "$B/tests/inflight" 3 4 0 20 1 >ip.out 2>&1
"$CMH" owners ip.cmh >ip.txt 2>&1
"$CMH" owners --json ip.cmh >ip.json 2>&1
"$CMH" report --static -o ip.html ip.cmh 2>/dev/null
check "threads then one alone: ran ($(cat ip.out))" 'grep -q "20 MiB peak alone, an out-of-memory error among them" ip.out'
check "owners at the single-threaded peak: 24 MiB, no calls in flight said, its figure assumed steady from the end's sample" \
    'grep -A4 "device 0, peak reserved (" ip.txt | grep -q "^ *0 B .*not recorded (CUDA context, other processes)  (cuMemGetInfo at +[0-9.]*[^,]*s, assumed steady)\$" &&
     grep -q "device 0, peak reserved (.*): 24.0 MiB recorded; the device had 24.0 MiB of 1.0 GiB in use" ip.txt'
check "owners at the OOM the main thread hit while 2 x 4 MiB were in the driver: that note, at that moment only" \
    'grep -A3 "device 0, out of memory #1 (" ip.txt | grep -q "not recorded .*  (cuMemGetInfo at +[0-9.]*[^,]*s, assumed steady)  (and 8.0 MiB more in use then: other threads. allocations in the driver, logged just after)\$" &&
     [ "$(grep -c "more in use then" ip.txt)" = 1 ]'
check "owners --json: in_flight, sample_exact and the note agree at every moment; the rows sum to the used memory" 'py - <<PY
import json
o = json.load(open("ip.json"))[0]
m = {x["moment"]: x for x in o["moments"]}
assert list(m) == ["out of memory #1", "peak", "end"], list(m)
assert m["peak"]["in_flight"] == 0 and not m["peak"]["sample_exact"] and m["peak"]["note"].endswith("assumed steady)"), m["peak"]
assert m["out of memory #1"]["in_flight"] == 8 * 2**20 and not m["out of memory #1"]["sample_exact"], m["out of memory #1"]
assert m["end"]["sample_exact"] and m["end"]["in_flight"] == 0 and m["end"]["note"] == "", m["end"]
for x in o["moments"]:
    assert not (x["sample_exact"] and x["in_flight"]), x
    assert ("more in use then" in x["note"]) == (x["in_flight"] > 0), x
    assert ("assumed steady" in x["note"]) == (not x["sample_exact"]), x
    assert sum(r["bytes"] for r in x["rows"]) == x["used"], x
PY'
check "report: the owners tables carry the notes owners prints (the peak's: assumed steady, none in flight)" \
    "grep -q 'r-owners-note\">(cuMemGetInfo at +[0-9.]*[^,]*s, assumed steady)</span>' ip.html && ! grep -q 'more in use then' ip.html"
# a device that cannot be past its capacity less its context (FAKECUDA_CONTEXT was not enforced:
# frag fitted 256 MiB on 400 MiB with 300 MiB of context, and owners said '556.0 MiB of 400.0 MiB')
FAKECUDA_CONTEXT=350M FAKECUDA_CAPACITY=400M "$CMH" record -q -o ctx.cmh -- "$B/tests/unhooked" 0 >ctx.out 2>&1
check "the fake driver refuses 64 MiB on 400 MiB with 350 MiB of context" 'grep -q "cuMemAlloc failed" ctx.out'
"$CMH" owners ctx.cmh >ctx.txt 2>&1
check "owners at that out-of-memory error: 350 MiB of 400 MiB in use, all of it not recorded, nothing impossible" \
    'grep -q "out of memory #1 (.*): 0 B recorded; the device had 350.0 MiB of 400.0 MiB in use" ctx.txt && ! grep -q "cannot be\|more than the device has" ctx.txt'

# a record with no history (enabled=state): no peak moment, as `peak` says it is not known, and
# no entry to name where the device has no trace entry (it read 'at the end (entry -1)')
"$CMH" record -q --enabled state -o st.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
"$CMH" owners st.cmh >st.txt 2>&1
check "owners, enabled=state and no trace entry: the end alone, named without an entry number" \
    'grep -q "^st.cmh, device 0, at the end (no trace entries): 12.0 MiB recorded" st.txt && ! grep -q "entry -1\|, peak (\|, peak reserved (" st.txt'
"$CMH" owners --json st.cmh >st.json 2>/dev/null
check "owners --json, no trace entry: the moment's index is null, not -1" \
    'py -c "import json,sys; m=json.load(open(sys.argv[1]))[0][\"moments\"]; assert [x[\"index\"] for x in m]==[None], m" st.json'
# the end stands at the dump, a second after the last entry here (leaky's idle second): "(entry
# N, +T)" is entry N's time, as everywhere, the dump's said apart (trial5 #10: it said the dump's
# time beside the last entry's number)
"$CMH" record -q -o idle.cmh -- "$B/samples/leaky" 3 1 >/dev/null 2>&1
"$CMH" owners idle.cmh >idle.txt 2>&1
"$CMH" owners --json idle.cmh >idle.json 2>/dev/null
"$CMH" trace --json idle.cmh >idle.trace.json 2>/dev/null
check "owners at the end: entry N's time, the dump's apart (text and --json)" 'py - <<PY
import json, re
last = json.load(open("idle.trace.json"))[0]["entries"][-1]["time_ns"]
m = [m for m in json.load(open("idle.json"))[0]["moments"] if m["moment"] == "end"][0]
assert m["time_ns"] == last and m["dump_time_ns"] >= last + 900000000, (m, last)
t = open("idle.txt", encoding="utf-8").read()
u = {"s": 1, "ms": 1e-3, "\u00b5s": 1e-6, "ns": 1e-9}  # (each time in the unit its scale needs)
x = re.search(r"device 0, at the end \(entry %d, \+([0-9.]+) ?(s|ms|\u00b5s|ns); dumped at \+([0-9.]+) ?(s|ms|\u00b5s|ns)\)" % m["index"], t)
assert x and abs(float(x.group(1)) * u[x.group(2)] - m["seconds"]) < 0.001 and float(x.group(3)) * u[x.group(4)] >= 0.9, t
PY'
PT=${3:-}
FLEX=$PT/flexgen_torch20_oom_observer_block_history.pickle
if [ -n "$PT" ] && [ -f "$FLEX" ]; then
    "$CMH" peak "$FLEX" 2>/dev/null | grep -q "^peak: not known" || bad "peak on PyTorch 2.0's state-only snapshot: a peak told"
    "$CMH" owners "$FLEX" >flex.txt 2>/dev/null
    check "owners on a snapshot with no history (one snapshot entry): no 'peak (entry 0)', the end only" \
        '! grep -q ", peak (\|, peak reserved (" flex.txt && grep -q "device 0, at the end (entry 0): 11.0 GiB recorded" flex.txt'
else
    echo "skipped: owners on PyTorch 2.0's state-only snapshot (no PyTorch fixtures)"
fi
# owners' peak is the reserved peak, `peak`'s allocated one can be another entry (octree_nca:
# owners said 'peak (entry 846, ...)' where `peak` says the peak, allocated, is entry 847, and
# did not say which peak it meant): it names its peak and where allocated peaked, in text,
# --json and the report, with peak's own figures
OCT=$PT/octree_nca_cpp_frames_snapshot_action.pickle
if [ -n "$PT" ] && [ -f "$OCT" ]; then
    "$CMH" peak --json "$OCT" >oct.peak.json 2>/dev/null
    "$CMH" owners "$OCT" >oct.txt 2>/dev/null
    "$CMH" owners --json "$OCT" >oct.json 2>/dev/null
    "$CMH" report --static -o oct.html "$OCT" 2>/dev/null
    check "owners on octree_nca: 'peak reserved (entry 846, ...)', allocated peaked at entry 847 (peak's), in text, --json and the report" \
        'grep -q "device 0, peak reserved (entry 846, +36.192s): 8.6 GiB recorded" oct.txt &&
         grep -q "^(the reserved peak; allocated peaked at entry 847, +36.192s, at 5.3 GiB: see .cumemhist peak.)\$" oct.txt &&
         grep -q "Who held the memory at the reserved peak (entry 846)</h3><p class=\"r-muted r-owners-peak\">the reserved peak; allocated peaked at entry 847, +36.192s, at 5.3 GiB: see .cumemhist peak.</p>" oct.html &&
         py - <<PY
import json
o = json.load(open("oct.json"))[0]; p = json.load(open("oct.peak.json"))[0]
pk = [m for m in o["moments"] if m["moment"] == "peak"][0]
assert pk["peak_of"] == "reserved" and pk["index"] == p["peak_reserved"]["index"] == 846, (pk, p["peak_reserved"])
assert pk["recorded"] == p["peak_reserved"]["bytes"], (pk["recorded"], p["peak_reserved"])
a = pk["allocated_peak"]
assert (a["index"], a["bytes"], a["time_ns"]) == (p["peak_allocated"]["index"], p["peak_allocated"]["bytes"], p["peak_allocated"]["time_ns"]) and a["index"] == 847, (a, p["peak_allocated"])
PY'
else
    echo "skipped: owners' peak named on octree_nca (no PyTorch fixtures)"
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
     grep -q 'device 0, peak reserved (before the first entry): 16.0 MiB recorded' frees.txt &&
     grep -q '^ *16.0 MiB  100.0%  *-  PyTorch allocated' frees.txt &&
     py -c 'import json; m = json.load(open(\"frees.json\"))[0][\"moments\"][0]; assert (m[\"moment\"], m[\"index\"]) == (\"peak\", -1), m'"
# Blocks freed with stream work pending are neither in use nor cached: peak and leaks count
# them as not live, frag as pending free; owners gives them a row of their own (it called
# PyTorch's 'reserved but free (cached)', and an allocator's above the driver the program's),
# and its rows still sum to what was recorded (tests/pending_free.c; a PyTorch snapshot)
py - <<'EOF'
import pickle
M, P = 1 << 20, 0x7F0000000000
ent = lambda a, addr, size, t: {"action": a, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": []}
tr = [ent("segment_alloc", P, 20 * M, 1000), ent("alloc", P, 4 * M, 1001), ent("alloc", P + 4 * M, 6 * M, 1002),
      ent("free_requested", P + 4 * M, 6 * M, 1003)]
blk = lambda a, s, st: {"address": a, "size": s, "requested_size": s if st != "inactive" else 0, "state": st, "frames": []}
seg = {"device": 0, "address": P, "total_size": 20 * M, "allocated_size": 4 * M, "active_size": 10 * M, "requested_size": 10 * M,
       "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
       "blocks": [blk(P, 4 * M, "active_allocated"), blk(P + 4 * M, 6 * M, "active_pending_free"), blk(P + 10 * M, 10 * M, "inactive")]}
pickle.dump({"segments": [seg], "device_traces": [tr], "allocator_settings": {}, "external_annotations": []}, open("pend.pickle", "wb"))
EOF
"$CMH" record -q -o pend.cmh -- "$B/tests/pending_free" >/dev/null 2>&1 || bad "pending_free did not run"
for f in pend.pickle pend.cmh; do
    "$CMH" owners --json $f >pend.json 2>/dev/null
    "$CMH" frag --json $f >pend_frag.json 2>/dev/null
    "$CMH" owners $f >pend.txt 2>/dev/null
    out=$(py - $f <<'EOF'
import json, sys
o, fr = json.load(open("pend.json"))[0], json.load(open("pend_frag.json"))[0]
m = [x for x in o["moments"] if x["moment"] == "end"][0]
rows = {r["kind"]: r["bytes"] for r in m["rows"]}
bad = []
if rows.get("pending_free") != fr["pending_free"] or fr["pending_free"] != 6 << 20: bad.append("pending %s, frag %s" % (rows.get("pending_free"), fr["pending_free"]))
if sum(r["bytes"] for r in m["rows"]) != (m["used"] if m["used"] is not None else m["recorded"]): bad.append("rows do not sum")
if m["recorded"] != fr["reserved"]: bad.append("recorded %s, reserved %s" % (m["recorded"], fr["reserved"]))
if sys.argv[1].endswith(".pickle"):
    if (rows.get("torch_allocated"), rows.get("torch_cached")) != (fr["allocated"], fr["free_in_segments"] - fr["pending_free"]):
        bad.append("pytorch rows %s" % rows)
elif rows.get("program") != fr["allocated"]: bad.append("the program's row %s, allocated %s" % (rows.get("program"), fr["allocated"]))
print("; ".join(bad) if bad else "ok")
EOF
)
    check "$f: owners' pending row is frag's pending free, cached and in use without it, the rows sum: $out" '[ "$out" = ok ]'
done
check "owners' text names the pending row" "grep -q '^ *6.0 MiB .*freed, stream work pending (an allocator above the driver)' pend.txt"

# VMM physical memory held and mapped nowhere (tests/vmm_held.c: 20 MiB made and never mapped,
# 8 MiB mapped, unmapped and never released; 4 MiB kept mapped, 6 MiB released, 2 MiB released
# while mapped whose handle value a mapped 2 MiB gets again, beside a 100 MiB context): before, owners put the 28 MiB under 'not recorded (... a path not hooked ...)' and
# leaks said nothing of it; now owners' end has a row of its own, the rows still summing to the
# device's used memory, and leaks lists the two handles by their cuMemCreate sites
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o vh.cmh -- "$B/tests/vmm_held" >/dev/null 2>vh.err
check "vmm_held ran whole ($(cat vh.err))" '[ ! -s vh.err ]'
"$CMH" owners --json vh.cmh >vh.json 2>&1
"$CMH" owners vh.cmh >vh.txt 2>&1
check "owners: cuMemCreate memory held and mapped nowhere is its own row at the end (28 MiB, 2 handles), out of 'not recorded'" 'py - <<PY
import json
o = json.load(open("vh.json"))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
rows = {r["kind"]: r for r in end["rows"]}
M = 2**20
assert rows["vmm_unmapped"]["bytes"] == 28 * M and rows["vmm_unmapped"]["allocations"] == 2, end
assert rows["program"]["bytes"] == 6 * M, end
assert rows["unexplained"]["bytes"] == 100 * M, end
assert end["used"] == 134 * M == sum(r["bytes"] for r in end["rows"]) and end["recorded"] == 34 * M, end
for m in o["moments"]:
    assert m["used"] == sum(r["bytes"] for r in m["rows"]), m
PY' && grep -q "28.0 MiB .* 2  physical memory made with cuMemCreate, not mapped" vh.txt
"$CMH" leaks vh.cmh >vhl.txt 2>&1
"$CMH" leaks --json vh.cmh >vhl.json 2>&1
check "leaks: the held, unmapped handles by their cuMemCreate site (20 MiB never_mapped, 8 MiB unmapped_later)" \
    "grep -q '^physical memory made with cuMemCreate, held and mapped nowhere at the end (no block shows it): 28.0 MiB in 2 handles, from 2 sites' vhl.txt &&
     grep -q '^ *20.0 MiB  *1  never_mapped (.*vmm_held.c:' vhl.txt && grep -q '^ *8.0 MiB  *1  unmapped_later (.*vmm_held.c:' vhl.txt &&
     py -c 'import json; v = json.load(open(\"vhl.json\"))[0][\"vmm_unmapped\"]; M = 2**20
assert (v[\"bytes\"], v[\"handles\"]) == (28 * M, 2), v
assert [(x[\"bytes\"], x[\"handles\"], x[\"site\"][\"function\"]) for x in v[\"sites\"]] == [(20 * M, 1, \"never_mapped\"), (8 * M, 1, \"unmapped_later\")], v'"
# the same program killed by SIGKILL (no exit dump): the record recovered from its flight record
# (by record, and by recover after a plain preload) holds the same held, unmapped handles, by the
# same sites, as the exit dump's; before, the flight record kept no handle and the row was gone
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o vk.cmh -- "$B/tests/vmm_held" kill >/dev/null 2>&1
rm -f vp.cmh*
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=vp.cmh \
    "$B/tests/vmm_held" kill >/dev/null 2>&1
"$CMH" recover vp.cmh.flight >/dev/null 2>&1
# and past a checkpoint (a bounded ring: the handles' first records are in a generation the
# checkpoint replaced, so each new generation writes every held handle again)
rm -f vc.cmh*
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=vc.cmh \
    CUMEMHIST_FLIGHT=1 CUMEMHIST_MAX_ENTRIES=1000 "$B/tests/vmm_held" ckpt >/dev/null 2>&1
check "vmm_held ckpt: a checkpoint was written before the SIGKILL" 'ls vc.cmh.flight.ckpt*.cmh >/dev/null 2>&1'
"$CMH" recover vc.cmh.flight >/dev/null 2>&1
# vmm_as_exit_dump X: X.json (owners --json) and Xl.json (leaks --json) have the exit dump's
# (vh) row of handles held mapped nowhere, 28 MiB in 2, and its leaks' cuMemCreate sites
vmm_as_exit_dump() {
    py - "$1.json" "${1}l.json" <<'PY'
import json, sys
def row(f):
    end = [m for m in json.load(open(f))[0]['moments'] if m['moment'] == 'end'][0]
    return [(r['bytes'], r['allocations']) for r in end['rows'] if r['kind'] == 'vmm_unmapped']
def sites(f):
    v = json.load(open(f))[0]['vmm_unmapped']
    return (v['bytes'], v['handles'], [(x['bytes'], x['handles'], x['site']['function']) for x in v['sites']])
o, l = sys.argv[1], sys.argv[2]
assert row(o) == row('vh.json') == [(28 * 2**20, 2)], (row(o), row('vh.json'))
assert sites(l) == sites('vhl.json'), (sites(l), sites('vhl.json'))
PY
}
for f in vk vp vc; do
    "$CMH" owners --json $f.cmh >$f.json 2>&1
    "$CMH" leaks --json $f.cmh >${f}l.json 2>&1
    check "SIGKILL ($f): the recovered record's owners row and leaks' sites are the exit dump's (28 MiB, 2 handles: never_mapped, unmapped_later)" "vmm_as_exit_dump $f"
done
# and a running process's snapshot (`snapshot PID`, the live reader of its flight record): the
# handles it holds mapped nowhere now, as its exit dump lists them
rm -f vs.cmh* vs.ready
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=vs.cmh \
    VMM_READY=$T/vs.ready "$B/tests/vmm_held" hold >/dev/null 2>&1 &
vs_pid=$!
wait_until 60 '[ -e vs.ready ]'
"$CMH" snapshot -q $vs_pid -o vsnow.cmh >/dev/null 2>&1
kill -9 $vs_pid 2>/dev/null
wait $vs_pid 2>/dev/null
"$CMH" owners --json vsnow.cmh >vsnow.json 2>&1
"$CMH" leaks --json vsnow.cmh >vsnowl.json 2>&1
check "snapshot PID of a running process: its held, unmapped handles are the exit dump's (owners' row and leaks' sites)" "vmm_as_exit_dump vsnow"
# and the physical peak: the recovered records and the running process's snapshot had no vmm_maps
# rows (the flight record journaled none), so the 8 MiB handle unmapped and kept counted from its
# making and, while mapped, by its range too (44 MiB where the exit dump says 36); now they have them.
# The peak is 38 MiB, the driver's at the first map (never_mapped 20, unmapped_later 8, kept_mapped 4
# and released 6, made and released without a map): the record kept no cuMemRelease, so 'released'
# was never seen and every one of them said 36; each release is now kept (.cmh vmm_released, the
# flight record's type 18, read by recover and snapshot PID) and counts to its release
for f in vh vk vp vsnow; do "$CMH" peak --json $f.cmh >$f.peak.json 2>&1; done
check "SIGKILL and snapshot PID: the physical peak and end are the exit dump's ($(py -c 'import json; print([json.load(open(f + ".peak.json"))[0]["peak_physical"]["bytes"] >> 20 for f in ("vh", "vk", "vp", "vsnow")])' 2>&1 | tail -1) MiB)" \
    "py - <<'PY'
import json
f = lambda n: (lambda d: (d['peak_physical']['bytes'], d['end']['physical']))(json.load(open(n + '.peak.json'))[0])
assert f('vh') == f('vk') == f('vp') == f('vsnow') == (38 * 2**20, 34 * 2**20), [f(n) for n in ('vh', 'vk', 'vp', 'vsnow')]
PY"
# a process whose only allocation is a handle it never maps is recorded (before, no snapshot at all)
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o vo.cmh -- "$B/tests/vmm_held" only >/dev/null 2>&1
"$CMH" owners --json vo.cmh >vo.json 2>&1
check "a process that only made a handle: recorded, owners' end row holds its 20 MiB" 'py - <<PY
import json
end = [m for m in json.load(open("vo.json"))[0]["moments"] if m["moment"] == "end"][0]
rows = {r["kind"]: r for r in end["rows"]}
assert rows["vmm_unmapped"]["bytes"] == 20 * 2**20 and rows["vmm_unmapped"]["allocations"] == 1, end
assert sum(r["bytes"] for r in end["rows"]) == (end["used"] if end.get("used") is not None else end["recorded"]), end
PY'
# a forked child's record holds the handles it made, not those it inherited (the parent's record)
rm -f vf*.cmh
FAKECUDA_CAPACITY=1G "$CMH" record -q -o vf.cmh -- "$B/tests/vmm_held" fork >vf.pid 2>/dev/null
"$CMH" owners --json vf.cmh >vf.json 2>&1
"$CMH" owners --json "vf.$(cat vf.pid).cmh" >vfc.json 2>&1
check "fork: the parent's record holds its 20 MiB handle, the child's its own 2 MiB only" 'py - <<PY
import json
def held(f):
    end = [m for m in json.load(open(f))[0]["moments"] if m["moment"] == "end"][0]
    return [(r["bytes"], r["allocations"]) for r in end["rows"] if r["kind"] == "vmm_unmapped"]
assert held("vf.json") == [(20 * 2**20, 1)], held("vf.json")
assert held("vfc.json") == [(2 * 2**20, 1)], held("vfc.json")
PY'

# memory freed after the last cuMemGetInfo sample, out of a small ring (tests/ringfree.c: 100 MiB
# buffers until the device runs out, sampled there, then each freed; the ring keeps the last 5
# frees): the kept window begins with 500 MiB live, after the sample, and the context holds 0.
# owners and the report said '500.0 MiB not recorded (CUDA context, other processes)' at the peak
# (trial8 F17): the sample, of another moment, was replayed to 'before the first entry'.  A sample
# the kept entries cannot place is left out (said), and no row of it comes to the table.
FAKECUDA_CAPACITY=1G "$CMH" record -q --max-entries 5 -o rf.cmh -- "$B/tests/ringfree" >rf.out 2>&1
"$CMH" owners rf.cmh >rf.txt 2>&1
"$CMH" owners --json rf.cmh >rf.json 2>&1
"$CMH" report rf.cmh -o rf.html >/dev/null 2>&1
check "owners with a truncated ring: the program's since-freed memory is not 'not recorded'; samples before the window left out, said" 'grep -q "^held 10\$" rf.out &&
    grep -q "device 0, peak reserved (before the first entry): 500.0 MiB recorded; the device had 500.0 MiB of 1.0 GiB in use" rf.txt &&
    grep -q "^note: [0-9]* cuMemGetInfo samples* of this device (the first at .*) w[a-z]* taken before the first entry the ring kept, and the ring dropped entries" rf.txt && py - <<PY
import json, re
o = json.load(open("rf.json"))[0]
assert o["dropped_entries"] > 0 and o["samples_before_kept_entries"] >= 1, o
assert [m["moment"] for m in o["moments"]] == ["peak", "end"], o["moments"]
for m in o["moments"]:
    assert [r["bytes"] for r in m["rows"] if r["kind"] == "unexplained"] == [0], m
    assert m["used"] == m["recorded"], m
assert o["moments"][0]["recorded"] == 500 * 2**20 and not o["moments"][0]["sample_exact"], o["moments"][0]
page = open("rf.html").read()
rows = re.findall(r"not recorded \\(CUDA context, other processes\\).*?</td><td class=\"n\">([^<]*)</td>", page)
assert rows == ["0 B", "0 B"], rows
PY'
# the same program ending by SIGKILL (no exit dump: no sample at the end either): no sample the
# kept entries place, so no moment claims the device's used memory, and none has a 'not recorded'
# row (it took the error's sample: 1000 MiB used against 500 and 0 MiB recorded)
FAKECUDA_CAPACITY=1G "$CMH" record -q --max-entries 5 -o rfk.cmh -- "$B/tests/ringfree" die >rfk.out 2>&1
"$CMH" owners rfk.cmh >rfk.txt 2>&1
"$CMH" owners --json rfk.cmh >rfk.json 2>&1
check "owners with a truncated ring and no sample after it: no used-memory total, said" 'grep -q "^held 10\$" rfk.out &&
    [ "$(grep -c "total recorded (no cuMemGetInfo sample the kept entries place: the device.s used memory is not known)\$" rfk.txt)" = 2 ] &&
    ! grep -q "not recorded (CUDA context" rfk.txt && py - <<PY
import json
o = json.load(open("rfk.json"))[0]
assert o["samples_before_kept_entries"] >= 1 and [m["moment"] for m in o["moments"]] == ["peak", "end"], o
for m in o["moments"]:
    assert m["used"] is None and not [r for r in m["rows"] if r["kind"] == "unexplained"], m
PY'
# the same 28 MiB where the figures are given: peak, frag and summary say it beside theirs (they
# read 'at the end: allocated 6.0 MiB, reserved 6.0 MiB' and nothing of the 28 MiB the device held)
for c in peak frag summary; do
    "$CMH" $c vh.cmh >vh_$c.txt 2>&1
    "$CMH" $c --json vh.cmh >vh_$c.json 2>&1
done
check "peak, frag, summary: the 28 MiB of cuMemCreate memory mapped nowhere said beside their figures (text and --json)" '
    r=0; for c in peak frag summary; do
        grep -q "^note: the process also held 28.0 MiB of physical memory made with cuMemCreate and mapped nowhere at the end" vh_$c.txt &&
        grep -q "^      (2 handles): in no segment, so outside these figures" vh_$c.txt &&
        py -c "import json,sys; d = json.load(open(sys.argv[1])); d = d[0] if isinstance(d, list) else d; assert d[\"vmm_unmapped\"] == {\"bytes\": 28 << 20, \"handles\": 2}, d" vh_$c.json || r=1
    done; [ $r = 0 ]'

# A device's first cuMemGetInfo sample counts the allocation it follows (tests/first_sample.c:
# 64 MiB, freed, a pause): it was stamped on another clock than the entries and placed before
# that allocation or after its free in most recordings, and owners counted the 64 MiB twice
# ('the device had 128.0 MiB in use', half 'not recorded (CUDA context, other processes)', assumed
# steady); for VMM it was taken between cuMemCreate and cuMemMap.  The same program, the same
# owners in every recording: 4 of each.
for mode in plain async vmm alias; do
    for i in 1 2 3 4; do
        "$CMH" record -q -o fs_$mode$i.cmh -- "$B/tests/first_sample" $mode >/dev/null 2>&1
        "$CMH" owners --json fs_$mode$i.cmh >fs_$mode$i.json 2>&1
        "$CMH" trace --json fs_$mode$i.cmh >fs_${mode}_trace$i.json 2>/dev/null
        "$CMH" export -o fs_$mode$i.pickle fs_$mode$i.cmh 2>/dev/null
    done
    check "first_sample $mode: 4 recordings, each peak's used memory is the program's own, nothing 'not recorded'" "py - <<PY
import json
for i in (1, 2, 3, 4):
    o = json.load(open('fs_$mode%d.json' % i))[0]
    for m in o['moments']:
        assert [r['bytes'] for r in m['rows'] if r['kind'] == 'unexplained'] == [0], (i, m)
        assert m['used'] == sum(r['bytes'] for r in m['rows']), (i, m)
    pk = [m for m in o['moments'] if m['moment'] == 'peak'][0]
    assert pk['used'] == 64 * 2**20 or '$mode' == 'alias', (i, pk)
PY"
    # the record itself, before owners reads it (owners moves a sample stamped early after its
    # sampler's first entry, and hid a recorder that stamped it on another clock): the first
    # sample, taken by the allocating thread, counts the 64 MiB, and its stamp lies between the
    # entry of the allocation (the map for VMM) and the entry of its free (unmap)
    case $mode in plain | async) made=segment_alloc gone=segment_free ;; *) made=segment_map gone=segment_unmap ;; esac
    check "first_sample $mode: 4 recordings, each first sample stamped after the entry it counts and before its free" "py - <<PY
import json, pickle
for i in (1, 2, 3, 4):
    t = json.load(open('fs_${mode}_trace%d.json' % i))
    t = t[0] if isinstance(t, list) else t
    e = t['entries']
    a = [x['time_ns'] for x in e if x['action'] == '$made'][0]
    f = [x['time_ns'] for x in e if x['action'] == '$gone'][0]
    m = [x for x in pickle.load(open('fs_$mode%d.pickle' % i, 'rb'))['cumemhist']['meminfo'] if x[0] == 0 and x[4]][0]
    assert m[3] - m[2] >= 64 * 2**20, (i, m)
    assert a <= m[1] <= f, (i, 'sample %d ns after the allocation, %d ns before its free' % (m[1] - a, f - m[1]), e, m)
PY"
done
# the fake driver keeps a handle released while mapped until its last unmap, as the real one
check "fakecuda: a handle released while mapped twice still holds its 64 MiB" \
    '"$B/tests/first_sample" alias | grep -q "^after release, mapped twice: 64 MiB used$"'

# An OOM where most of the device is held outside the program (a 700 MiB context of 1 GiB, the
# program's 320 MiB): oom said 'demand: the memory was genuinely in use' and listed the 320 MiB
# only; now its verdict is the device's, owners' split beside it, and frag says the same
FAKECUDA_CAPACITY=1G FAKECUDA_CONTEXT=700M "$CMH" record -q -o fso.cmh -- "$B/tests/first_sample" oom >/dev/null 2>&1
"$CMH" oom fso.cmh >fso.txt 2>&1
"$CMH" oom --json fso.cmh >fso.json 2>&1
"$CMH" frag fso.cmh >fsf.txt 2>&1
check "oom with 700 MiB of 1 GiB held outside the program: 'held outside the program', owners' split" 'grep -q "^  verdict: held outside the program: most of the device" fso.txt &&
    grep -q "^  the device then  *1020.0 MiB in use of 1.0 GiB: not recorded (CUDA context, other processes) 700.0 MiB (68.6%)," fso.txt &&
    grep -q "this program.s record 320.0 MiB (owners)" fso.txt && grep -q "^  verdict: held outside the program" fsf.txt && py - <<PY
import json
e = json.load(open("fso.json"))[0]["ooms"][0]
M = 2**20
assert e["verdict"] == "held outside the program" and e["not_recorded"] == 700 * M and e["device_used"] == 1020 * M, e
assert e["reserved"] == 320 * M, e
PY'

finish
