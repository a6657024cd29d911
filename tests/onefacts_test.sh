#!/bin/sh
# onefacts_test.sh BUILD_DIR SOURCE_DIR [PYTORCH_FIXTURES] - one set of facts in every output:
#  1. expandable segments: PyTorch's memory_summary() counts them in neither GPU reserved segments
#     nor Non-releasable memory, so summary's table reads 0 where frag lists segments and trapped
#     bytes; each says the other's figures (they read 0 / 0 B beside 3 segments, 78.2 MiB trapped
#     on the NPU fixture, unsaid);
#  2. export --format pickle says the entries the file holds, its implied ones among them (it said
#     the record's 50 of a pickle holding 98);
#  3. a snapshot written mid-run (cmh_dump_snapshot): summary says its figures are that moment's
#     (it printed 'CUDA OOMs: 0' as if of the whole run), and its ending's "N entries so far" is
#     what the reports count, device by device, also once merged with PyTorch's part (211 so far
#     beside peak's 'device 0: 216 trace entries');
#     PyTorch's entries keep, merged, the keys this reader does not know (an export of the merged
#     record to a pickle dropped them: merge copied the entries without, the .cmh had no place);
#  4. every command says one count of a record's entries: the mid-run ending's "N entries so far"
#     word for word in summary, owners, peak, leaks, oom, frag and report, and each device's trace
#     entries the same in their --json; summary, reading a co-recorded record's PyTorch part, says
#     whose its own count is (owners.mid.cmh from an H200: summary said 18 so far, owners 211,
#     the others 220: PyTorch's part, the recorder's, the merged timeline's); and one process, the
#     record's, in every --json (summary's of that part said "process": null: no pid, no count);
#  5. one entry numbering: a co-recorded record's out-of-memory moments in owners (which reads the
#     parts, cmh_merged_position) are the entries oom names on the merged timeline (owners_job.cmh
#     from an H200: owners said 'out of memory #1 (entry 216' of the snapshot entry before the
#     error, oom and frag 217, PyTorch's own oom entry).
TEST=onefacts . "$(dirname "$0")/testlib.sh"
PT=${3:-}
MIB=1048576

# ---- 1. expandable segments: one large-pool segment, 12 MiB live, 8 MiB free (short of a 20 MiB page)
py - exp.pickle <<'PY'
import pickle, sys
MIB = 1 << 20
fr = [{"filename": "train.py", "line": 5, "name": "step"}]
base = 0x7f0000000000
tr = [{"action": "segment_map", "addr": base, "size": 20 * MIB, "stream": 0, "time_us": 1000, "frames": fr},
      {"action": "alloc", "addr": base, "size": 12 * MIB, "stream": 0, "time_us": 1001, "frames": fr}]
segs = [{"device": 0, "address": base, "total_size": 20 * MIB, "allocated_size": 12 * MIB, "active_size": 12 * MIB,
         "requested_size": 12 * MIB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": True,
         "frames": [], "blocks": [{"address": base, "size": 12 * MIB, "requested_size": 12 * MIB, "state": "active_allocated", "frames": fr},
                                  {"address": base + 12 * MIB, "size": 8 * MIB, "requested_size": 0, "state": "inactive", "frames": []}]}]
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {"expandable_segments": True}}, open(sys.argv[1], "wb"), protocol=4)
PY
"$CMH" summary exp.pickle >exp_summary.txt 2>exp_summary.err
"$CMH" summary --json exp.pickle >exp_summary.json 2>&1
"$CMH" frag exp.pickle >exp_frag.txt 2>&1
check "summary keeps PyTorch's rows: GPU reserved segments 0, Non-releasable memory 0 B" \
    "grep -q '^| GPU reserved segments |       0    |' exp_summary.txt && grep -q '^| Non-releasable memory |      0 B   |' exp_summary.txt"
check "summary says the expandable segment and its trapped bytes, which its rows leave out, on stderr: $(grep -A1 'at the end' exp_summary.err | tr -s ' ')" \
    "grep -q 'not in GPU reserved segments' exp_summary.err && grep -q 'at the end 1 expandable segment (mapped ranges) holds 8.0 MiB free, 8.0 MiB of it' exp_summary.err"
# (its standard output PyTorch's text alone: a run with expandable segments is memory_summary() to the byte)
check "summary's standard output: the table and nothing else" "! grep -qv '^|' exp_summary.txt"
check "frag says summary's 0 is PyTorch's definition: $(grep -A2 '^note: .cumemhist summary' exp_frag.txt | tr -s ' ')" \
    "grep -q '^note: .cumemhist summary., as PyTorch.s memory_summary(), counts the 1 expandable segment neither in GPU reserved' exp_frag.txt &&
     grep -q 'their 8.0 MiB free, 8.0 MiB of it trapped' exp_frag.txt && grep -q '^    trapped  *8.0 MiB' exp_frag.txt"
py - exp_summary.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))[0]
assert d["expandable_at_end"] == {"segments": 1, "free": 8 << 20, "trapped": 8 << 20}, d["expandable_at_end"]
assert d["stats"]["segment.all"]["current"] == 0 and d["stats"]["inactive_split_bytes.all"]["current"] == 0, d["stats"]
PY
check "summary --json: expandable_at_end beside PyTorch's zeros" "[ $? -eq 0 ]"
NPU=$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle
if [ -n "$PT" ] && [ -e "$NPU" ]; then
    "$CMH" summary "$NPU" >/dev/null 2>npu_summary.txt
    "$CMH" frag "$NPU" >npu_frag.txt 2>&1
    check "the NPU fixture: summary's note and frag's figures agree (3 segments, 78.2 MiB trapped)" \
        "grep -q 'at the end 3 expandable segments (mapped ranges) hold 78.2 MiB free, 78.2 MiB of it' npu_summary.txt &&
         grep -q 'device 0: 3 segments at the end' npu_frag.txt && grep -q '^    trapped  *78.2 MiB' npu_frag.txt &&
         grep -q 'counts the 3 expandable segments neither' npu_frag.txt"
fi

# ---- 2. export: the count said is the count written
said_written() { # said_written INPUT NAME: export INPUT as a memviz pickle; the count said, and the file's
    "$CMH" export --format pickle -o "$2.pickle" "$1" 2>"$2.err" >/dev/null
    said=$(sed -n 's/^cumemhist: wrote .*: 1 record, \([0-9]*\) trace entr.*/\1/p' "$2.err")
    held=$(py -c "import pickle, sys; print(sum(len(t) for t in pickle.load(open(sys.argv[1], 'rb'))['device_traces']))" "$2.pickle")
    check "export $(basename "$1"): said ${said:-nothing}, the file holds $held: $(grep wrote "$2.err")" "[ -n \"$said\" ] && [ \"$said\" = \"$held\" ]"
}
said_written "$F/h200d/torch_async.cmh" async
grep -q "([0-9]* implied for memory_viz, dropped when read back)" async.err && ok "export says its implied entries" || bad "export's implied entries unsaid: $(cat async.err)"
TN=$PT/transformer_nuggets_mini_snapshot.pickle
[ -n "$PT" ] && [ -e "$TN" ] && said_written "$TN" nuggets

# ---- 3. a snapshot written mid-run
"$CMH" record -q -o end.cmh -- "$B/tests/midrun_dump" mid.cmh >/dev/null 2>mid.err
check "midrun_dump ran ($(cat mid.err))" "[ -s mid.cmh ] && [ -s end.cmh ] && [ ! -s mid.err ]"
"$CMH" summary mid.cmh >mid_summary.txt 2>mid_summary.err # (apart: stderr's note would cut a line at the buffer's end)
"$CMH" summary end.cmh >end_summary.txt 2>&1
check "summary of the mid-run snapshot: its figures are that moment's, the table as ever" \
    "grep -q '^note: the process was still running when this snapshot was written on request' mid_summary.txt &&
     grep -q 'every figure is as of that moment, not the run.s end' mid_summary.txt && grep -q '^|        Metric         | Cur Usage  |' mid_summary.txt"
check "summary of the exit's snapshot: no such note" "! grep -q 'as of that moment' end_summary.txt"
"$CMH" summary --json mid.cmh | grep -q '"as_of_snapshot": *true' && "$CMH" summary --json end.cmh | grep -q '"as_of_snapshot": *false' &&
    ok "summary --json: as_of_snapshot" || bad "summary --json: as_of_snapshot"

# the ending's count, device by device, is what the reports count (trace --json's entries)
so_far() { # so_far FILE: the ending's counts against trace --json's, each device's and the total
    "$CMH" peak "$1" >"$1.peak.txt" 2>&1
    "$CMH" trace --json "$1" >"$1.trace.json" 2>/dev/null
    py - "$1.peak.txt" "$1.trace.json" <<'PY'
import json, re, sys
line = next(l for l in open(sys.argv[1]) if "so far" in l)
m = re.search(r"\((\d+) entr(?:y|ies) so far(?:: (.*))?\)$", line.strip())
assert m, line
devs = {}
for d in json.load(open(sys.argv[2])):
    devs[d["device"]] = len(d["entries"])
assert int(m.group(1)) == sum(devs.values()), (line, devs)
said = {}
for part in (m.group(2) or "").split(", "):
    if not part: continue
    n, where = part.split(" ", 1)
    said[-1 if where == "of pinned host memory" else int(where.split()[-1])] = int(n)
assert len(devs) < 2 or said == {k: v for k, v in devs.items() if v}, (line, devs)
print(line.strip())
PY
}
so_far mid.cmh >mid_sofar.txt 2>&1
check "the ending counts what the reports count: $(tail -1 mid_sofar.txt)" "[ $? -eq 0 ]"
# PyTorch's part of the same moment, merged in: its entries join the traces, and the count follows
py - t.pickle <<'PY'
import pickle, sys
MIB = 1 << 20
fr = [{"filename": "train.py", "line": 7, "name": "step"}]
base = 0x7e0000000000
tr = [{"action": "segment_alloc", "addr": base, "size": 20 * MIB, "stream": 0, "time_us": 1000, "frames": fr},
      {"action": "alloc", "addr": base, "size": 8 * MIB, "stream": 0, "time_us": 1001, "frames": fr, "later_key": [1, "x"]},
      {"action": "alloc", "addr": base + 8 * MIB, "size": 4 * MIB, "stream": 0, "time_us": 1002, "frames": fr}]
segs = [{"device": 0, "address": base, "total_size": 20 * MIB, "allocated_size": 12 * MIB, "active_size": 12 * MIB,
         "requested_size": 12 * MIB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr,
         "blocks": [{"address": base, "size": 8 * MIB, "requested_size": 8 * MIB, "state": "active_allocated", "frames": fr},
                    {"address": base + 8 * MIB, "size": 4 * MIB, "requested_size": 4 * MIB, "state": "active_allocated", "frames": fr},
                    {"address": base + 12 * MIB, "size": 8 * MIB, "requested_size": 0, "state": "inactive", "frames": []}]}]
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}}, open(sys.argv[1], "wb"), protocol=4)
PY
"$CMH" merge --force -o merged.cmh mid.cmh t.pickle >/dev/null 2>&1
# an entry key this reader does not know (a later PyTorch's) is the entry's through the merge and
# the .cmh: exported back to a pickle, the merged record says it as the pickle did
"$CMH" export -f memviz -o merged_x.pickle merged.cmh >/dev/null 2>&1
py - merged_x.pickle <<'PY' >merged_x.txt 2>&1
import pickle, sys
got = [e for t in pickle.load(open(sys.argv[1], "rb"))["device_traces"] for e in t if "later_key" in e]
assert len(got) == 1 and got[0]["later_key"] == [1, "x"] and got[0]["action"] == "alloc", got
PY
check "merged and exported, PyTorch's entry keeps its unknown key: $(tail -1 merged_x.txt)" "[ $? -eq 0 ]"
so_far merged.cmh >merged_sofar.txt 2>&1
check "merged with PyTorch's part, the ending counts its entries too: $(tail -1 merged_sofar.txt)" "[ $? -eq 0 ]"
# summary reads PyTorch's part alone: of the same moment, and said so
"$CMH" summary merged.cmh >merged_summary.txt 2>merged_summary.err
check "summary of the merged mid-run record (PyTorch's part): as of the snapshot, the record's count, its own 3 entries said as PyTorch's" \
    "grep -q '^|                  PyTorch CUDA memory summary' merged_summary.txt && grep -q '^note: the process was still running .*(6 entries so far: 5 on device 0, 1 of pinned host memory);' merged_summary.txt &&
     grep -q \"^      this table is PyTorch's own snapshot's: its 3 entries are among device 0's;\" merged_summary.txt"

# ---- 4. one count in every command
all_say() { # all_say FILE NAME: every command's "so far" and its --json trace entries, one count
    for c in summary owners peak leaks oom frag report; do
        "$CMH" "$c" "$1" >"$2.$c.txt" 2>"$2.$c.err"
        [ "$c" = report ] || "$CMH" "$c" --json "$1" >"$2.$c.json" 2>/dev/null
    done
    py - "$2" <<'PY2'
import json, re, sys
name = sys.argv[1]
cmds = ("summary", "owners", "peak", "leaks", "oom", "frag", "report")
said = {}
for c in cmds:
    found = set(re.findall(r"\((\d+ entr(?:y|ies) so far[^)]*)\)", open(f"{name}.{c}.txt").read()))
    assert len(found) < 2, (c, found)
    said[c] = found.pop() if found else None
assert len(set(said.values())) == 1, said
counts, part, procs = {}, None, {}
for c in cmds[:-1]:
    for d in json.load(open(f"{name}.{c}.json")):
        p = d["process"] # the record's process, its count in its ending, PyTorch's part's too
        procs[c] = p and (p["pid"], p["cmdline"], p.get("ending"))
        if c == "summary" and d.get("pytorch_part"):
            part = (d["device"], d["trace_entries"])
            continue
        counts.setdefault(d["device"], {})[c] = d["trace_entries"]
for dev, by in counts.items():
    assert len(set(by.values())) == 1, (dev, by)
assert len(set(procs.values())) == 1, procs
if part: # summary's own count: PyTorch's, said so
    n = part[1]
    want = f"its {n} {'entry is' if n == 1 else 'entries are'} among device {part[0]}'s"
    assert want in open(f"{name}.summary.txt").read(), want
print(said["peak"] or "no count in the ending", {d: v.popitem()[1] for d, v in counts.items()}, "summary's PyTorch part:", part)
PY2
}
all_say mid.cmh mid_all >mid_all.txt 2>&1
check "every command says the mid-run snapshot's count: $(tail -1 mid_all.txt)" "[ $? -eq 0 ]"
all_say merged.cmh merged_all >merged_all.txt 2>&1
check "every command says the co-recorded record's count, summary whose its own is: $(tail -1 merged_all.txt)" "[ $? -eq 0 ]"
FAKECUDA_DEVICES=2 "$CMH" record -q -o end2.cmh -- "$B/tests/midrun_dump" mid2.cmh 2 >/dev/null 2>mid2.err
check "midrun_dump on two devices ran ($(cat mid2.err))" "[ -s mid2.cmh ] && [ ! -s mid2.err ]"
all_say mid2.cmh mid2_all >mid2_all.txt 2>&1
check "every command says the two-device snapshot's count: $(tail -1 mid2_all.txt)" "[ $? -eq 0 ] && grep -q 'on device 1' mid2_all.txt"
TWO=$PT/layoutediting_two_devices.pickle
if [ -n "$PT" ] && [ -e "$TWO" ]; then
    all_say "$TWO" two_all >two_all.txt 2>&1
    check "every command counts PyTorch's two-device pickle alike: $(tail -1 two_all.txt)" "[ $? -eq 0 ]"
fi

# ---- 5. one entry numbering: the OOMs of a co-recorded record
# A program's allocator (libc10_cuda by name, tests/pycallback.c) asks the driver for more than it
# has twice, the first refusal retried; PyTorch's part records the error once, after the second.
# The merged timeline keeps PyTorch's oom entry and drops our two refusals.
C10=$B/tests/libc10_cuda.so
case "${LD_PRELOAD:-}" in *asan* | *ubsan*) C10= ;; esac # (python under a sanitizer runtime)
if [ -n "$C10" ] && [ -e "$C10" ]; then
    cat >c10oom.py <<'PY'
import ctypes, sys
cuda, lib = ctypes.CDLL("libcuda.so.1"), ctypes.CDLL(sys.argv[1])
lib.pycb_alloc.restype, lib.pycb_alloc.argtypes = ctypes.c_ulonglong, [ctypes.c_size_t]
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cuda.cuCtxSetCurrent(ctx) == 0
assert lib.pycb_alloc(20 << 20)
for _ in range(2): # (one call site: the second refusal is the first's retry)
    assert not lib.pycb_alloc(1 << 40)
PY
    "$CMH" record -q -o c10.cmh -- python3 c10oom.py "$C10" >/dev/null 2>c10.err
    "$CMH" trace --json c10.cmh >c10_trace.json 2>/dev/null
    py - c10_trace.json c10.pickle <<'PY'
import json, pickle, sys
d = [x for x in json.load(open(sys.argv[1])) if x["device"] == 0][0]["entries"]
seg = [e for e in d if e["action"] == "segment_alloc"][0]
oom = [e for e in d if e["action"] == "oom"][-1]
fr = [{"filename": "train.py", "line": 9, "name": "step"}]
a, n, t = seg["addr"], seg["size"], seg["time_ns"] // 1000
tr = [{"action": "segment_alloc", "addr": a, "size": n, "stream": 0, "time_us": t, "frames": fr},
      {"action": "alloc", "addr": a, "size": n, "stream": 0, "time_us": t + 1, "frames": fr},
      {"action": "oom", "addr": oom["addr"], "size": oom["size"], "stream": 0, "time_us": oom["time_ns"] // 1000 + 2, "frames": fr}]
segs = [{"device": 0, "address": a, "total_size": n, "allocated_size": n, "active_size": n, "requested_size": n, "stream": 0,
         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr,
         "blocks": [{"address": a, "size": n, "requested_size": n, "state": "active_allocated", "frames": fr}]}]
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}}, open(sys.argv[2], "wb"), protocol=4)
PY
    "$CMH" merge --force -o c10m.cmh c10.cmh c10.pickle >/dev/null 2>&1
    "$CMH" owners --json c10m.cmh >c10m_owners.json 2>/dev/null
    "$CMH" oom --json c10m.cmh >c10m_oom.json 2>/dev/null
    "$CMH" trace --json c10m.cmh >c10m_trace.json 2>/dev/null
    py - c10m_owners.json c10m_oom.json c10m_trace.json >c10m.txt 2>&1 <<'PY'
import json, sys
mo = [m for m in json.load(open(sys.argv[1]))[0]["moments"] if m["moment"].startswith("out of memory")]
ooms = {o["number"]: o["index"] for o in json.load(open(sys.argv[2]))[0]["ooms"] if o["number"]}
ents = [x for x in json.load(open(sys.argv[3])) if x["device"] == 0][0]["entries"]
said = {m["moment"]: m["index"] for m in mo}
assert set(said) == {"out of memory, retried", "out of memory #1"} and ooms.keys() == {1}, (said, ooms)
assert said["out of memory #1"] == ooms[1] and ents[ooms[1]]["action"] == "oom", (said, ooms)
# the retried refusal has no entry of its own: the one before PyTorch's error, another number
assert said["out of memory, retried"] == ooms[1] - 1, (said, ooms)
print(said, "oom:", ooms)
PY
    check "owners names a co-recorded record's OOMs as oom does: $(tail -1 c10m.txt)" "[ $? -eq 0 ]"
fi

finish
