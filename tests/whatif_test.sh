#!/bin/sh
# whatif_test.sh BUILD_DIR SOURCE_DIR [PYTORCH_FIXTURES] - the allocator model against what
# PyTorch really did:
#   - the same workload recorded on an H200 under both settings (tests/fixtures/h200c): each
#     replayed under its own settings makes exactly its recorded segment events, and each
#     replayed under the other's predicts the other's measured peak reserved;
#   - every PyTorch snapshot at hand replayed under its own settings: the segment events
#     reproduced, or the difference explained;
#   - a generated fragmentation OOM: gone with expandable segments, back at a smaller capacity;
#   - the command's options and its JSON.
TEST=whatif . "$(dirname "$0")/testlib.sh"
PT=${3:-}
C=$F/h200c

"$CMH" whatif --json --set expandable_segments=True "$C/torch_var_plain.pickle" >plain.json 2>err.txt || bad "whatif plain: $(cat err.txt)"
"$CMH" whatif --json --set expandable_segments=False "$C/torch_var_expandable.pickle" >exp.json 2>err.txt || bad "whatif expandable: $(cat err.txt)"
py - plain.json exp.json <<'EOF' || fail=$((fail + 1))
import json, sys
p, e = (json.load(open(f))["settings"] for f in sys.argv[1:3])
for rows, name in ((p, "plain"), (e, "expandable")):
    r = rows[0]
    assert r["recorded"] and r["self_replay_mismatches"] == 0, (name, r)
    for k in ("setting", "peak_reserved", "peak_allocated", "segment_allocs", "segment_frees", "segment_maps", "ooms"):
        assert k in r, (name, k)
assert p[0]["segment_allocs"] == 16 and p[0]["segment_maps"] == 0 and p[0]["peak_reserved"] == 517996544, p[0]
assert e[0]["segment_maps"] == 18 and e[0]["segment_allocs"] == 0 and e[0]["peak_reserved"] == 593494016, e[0]
MiB2 = 2 << 20
pe, ep = p[1]["peak_reserved"], e[1]["peak_reserved"]
assert p[1]["setting"] == "expandable_segments:True" and abs(pe - 593494016) <= MiB2, p[1]
assert e[1]["setting"] == "" and abs(ep - 517996544) <= MiB2, e[1]
print(f"ok: H200 pair: each self-replay makes its recorded 16 segment_allocs / 18 segment_maps exactly; plain -> expandable "
      f"predicts {pe} B (measured 593494016), expandable -> plain {ep} B (measured 517996544)")
EOF

# every PyTorch snapshot at hand, under its own settings
set -- "$F"/h200/*.pickle "$C"/*.pickle
[ -n "$PT" ] && [ -d "$PT" ] && set -- "$@" "$PT"/*.pickle
for f in "$@"; do
    "$CMH" whatif --json "$f" >one.json 2>one.err
    rc=$?
    py - one.json "$f" "$rc" one.err <<'EOF' || fail=$((fail + 1))
import json, sys
name, rc = sys.argv[2].split("/")[-1], int(sys.argv[3])
if rc != 0:
    err = open(sys.argv[4]).read()
    assert rc == 5 and "no block-level trace" in err, (name, rc, err)
    print(f"ok: {name}: nothing to replay (no allocation events), said so")
    sys.exit(0)
d = json.load(open(sys.argv[1]))
r = d["settings"][0]
n, mm = r["recorded_segment_events"], r["self_replay_mismatches"]
if "npu" in name:  # torch_npu's allocator (Ascend): its own page and segment sizes
    assert mm > 0, r
    print(f"ok: {name}: {mm} of {n} segment events differ, explained: torch_npu's allocator maps other page sizes ({r['first_mismatch']})")
else:
    assert mm == 0, (name, r)
    print(f"ok: {name}: self-replay makes the trace's {n} segment events exactly"
          + (f" ({r['empty_cache_calls']} empty_cache bursts replayed)" if r["empty_cache_calls"] else ""))
EOF
done

# a fragmentation OOM of our own: 20 blocks of 7 MiB fill 10 segments of 20 MiB (2 each, 6 MiB
# left over in each), then 40 MiB does not fit: 200 MiB reserved, 30 MiB free on the device
py - frag.pickle <<'EOF'
import pickle, sys
MiB = 1 << 20
trace, segs, t = [], [], 1_000_000
for k in range(20):
    if k % 2 == 0:
        base = 0x7F0000000000 + (k // 2) * 64 * MiB
        trace.append({"action": "segment_alloc", "addr": base, "size": 20 * MiB, "stream": 0, "time_us": t, "frames": []})
        segs.append(base)
    trace.append({"action": "alloc", "addr": segs[-1] + (k % 2) * 7 * MiB, "size": 7 * MiB, "stream": 0, "time_us": t + 1, "frames": []})
    t += 10
trace.append({"action": "oom", "device_free": 30 * MiB, "size": 40 * MiB, "stream": 0, "time_us": t, "frames": []})
def block(a, s, st): return {"address": a, "size": s, "requested_size": s if st != "inactive" else 0, "state": st, "frames": []}
segments = [{"device": 0, "address": b, "total_size": 20 * MiB, "allocated_size": 14 * MiB, "active_size": 14 * MiB,
             "requested_size": 14 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
             "frames": [], "blocks": [block(b, 7 * MiB, "active_allocated"), block(b + 7 * MiB, 7 * MiB, "active_allocated"),
                                      block(b + 14 * MiB, 6 * MiB, "inactive")]} for b in segs]
settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0, "expandable_segments": False}
pickle.dump({"segments": segments, "device_traces": [trace], "allocator_settings": settings}, open(sys.argv[1], "wb"), protocol=4)
EOF
"$CMH" oom frag.pickle 2>/dev/null | grep -qi "fragmentation" && ok "the generated OOM is one of fragmentation (cumemhist oom says so)" ||
    bad "cumemhist oom on the generated trace: $("$CMH" oom frag.pickle 2>&1 | head -5)"
"$CMH" whatif --json --conf expandable_segments:True frag.pickle >frag.json 2>err.txt || bad "whatif frag: $(cat err.txt)"
"$CMH" whatif --json --conf expandable_segments:True --capacity 170M frag.pickle >small.json 2>err.txt || bad "whatif --capacity: $(cat err.txt)"
# every row's free share at the allocated peak (140 MiB of 200 reserved: 30%), not at its reserved
# peak's first moment (the 10th segment's entry, 126 MiB allocated then: 37%), so the rows compare
"$CMH" whatif frag.pickle 2>/dev/null | grep -q "^recorded .* 140.0 MiB   30.0%" && ok "whatif's free share is taken at the allocated peak" ||
    bad "whatif free share: $("$CMH" whatif frag.pickle 2>&1 | grep '^recorded')"
# the recorded row at a capacity below what the record reserved says so, not the recorded OOM or "no OOM"
"$CMH" whatif --capacity 170M frag.pickle 2>/dev/null | grep -q "^recorded .*over it (reserved 200.0 MiB)$" &&
    ok "whatif --capacity below the recorded reserved: the recorded row is 'over it'" ||
    bad "whatif recorded row at 170M: $("$CMH" whatif --capacity 170M frag.pickle 2>&1 | grep '^recorded')"
py - frag.json small.json <<'EOF' || fail=$((fail + 1))
import json, sys
d, s = (json.load(open(f)) for f in sys.argv[1:3])
MiB = 1 << 20
assert d["capacity"] == 230 * MiB and d["capacity_from"] == "oom", d["capacity"]
rec, exp = d["settings"]
assert rec["ooms"] == 1 and rec["self_replay_mismatches"] == 0 and rec["segment_allocs"] == 10, rec
assert exp["setting"] == "expandable_segments:True" and exp["ooms"] == 0 and exp["peak_reserved"] == 180 * MiB, exp
assert s["capacity"] == 170 * MiB and s["settings"][1]["ooms"] == 1, s["settings"][1]
print(f"ok: generated fragmentation OOM at 230 MiB: persists as recorded, gone with expandable segments (peak reserved "
      f"{exp['peak_reserved'] // MiB} MiB), back at 170 MiB")
EOF

# a recording of another allocator above the driver (samples/caching_allocator: blocks reported
# through blocks.h), out of memory by fragmentation: its requests replayed as PyTorch would serve them
FAKECUDA_CAPACITY=256M "$CMH" record -q -o fo.cmh -- "$B/samples/frag_oom" >/dev/null 2>&1
"$CMH" whatif --json --conf expandable_segments:True fo.cmh >fo.json 2>err.txt || bad "whatif of a recording: $(cat err.txt)"
py - fo.json <<'EOF' || fail=$((fail + 1))
import json, sys
d = json.load(open(sys.argv[1]))
rec, exp = d["settings"]
assert rec["ooms"] >= 1 and rec["self_replay_mismatches"] == 0, rec
assert exp["ooms"] == 0, exp
# the capacity is the device's (FAKECUDA_CAPACITY, cuMemGetInfo's total), never below what the record
# reserved: it was the allocator's 220 MiB + 8 MiB free, the program's own 28 MiB cuMemAlloc left out
# (frag_oom on a 16 GiB device read 'capacity 648.0 MiB')
MiB = 1 << 20
k = d["capacity_at_oom"]
assert d["capacity_from"] == "device_total" and d["capacity"] == 256 * MiB and d["capacity"] >= d["record"]["peak_reserved"], d
assert k == {"plain_driver": 28 * MiB, "allocator": 220 * MiB, "free": 8 * MiB, "not_recorded": 0, "model_reserved": 220 * MiB,
             "model_over_capacity": False}, k
print(f"ok: a recorded caching allocator's fragmentation OOM: {rec['recorded_segment_events']} segment events reproduced "
      f"(the program's own driver allocation left aside); expandable segments would have avoided it; capacity the device's 256 MiB")
EOF
"$CMH" whatif fo.cmh >fo.txt 2>&1
"$CMH" export -o fo.pickle fo.cmh 2>/dev/null
"$CMH" whatif fo.pickle >fop.txt 2>&1
# a pickle of PyTorch's own knows no total: the same pickle without our cumemhist dict's samples
py -c "
import pickle
d = pickle.load(open('fo.pickle', 'rb'))
del d['cumemhist']['meminfo']
pickle.dump(d, open('fon.pickle', 'wb'), protocol=4)"
"$CMH" whatif fon.pickle >fon.txt 2>&1
check "whatif's capacity of a record with plain driver allocations: the device's, said whole ($(sed -n 2p fo.txt | cut -c1-160))" \
    "grep -q '^fo.cmh, device 0: 22 requests replayed; capacity 256.0 MiB\$' fo.txt &&
     grep -qF '  (the device'\''s total memory, as the record'\''s cuMemGetInfo says; at the trace'\''s OOM #1, as \`oom\` numbers it: reserved 248.0 MiB (28.0 MiB of it plain driver allocations, which the model leaves in place, 220.0 MiB its allocator'\''s), 8.0 MiB free)' fo.txt &&
     grep -q '^recorded (its own allocator) .*OOM #1 at entry' fo.txt"
# its pickle keeps the record's cuMemGetInfo samples: the same capacity, said the same way
check "... and of its pickle: the same capacity in the same words ($(diff fo.txt fop.txt | head -3 | tr '\n' '|'))" \
    "[ \"\$(sed 1d fo.txt)\" = \"\$(sed 1d fop.txt)\" ] && grep -q '^fo.pickle, device 0: 22 requests replayed; capacity 256.0 MiB\$' fop.txt"
# without them (PyTorch's own pickle) the capacity is what the device held at the OOM, plain allocations too
check "... and without cuMemGetInfo: what the device held at the OOM, not the allocator's share alone" \
    "grep -q '^fon.pickle, device 0: 22 requests replayed; capacity 256.0 MiB\$' fon.txt &&
     grep -qF 'reserved then (28.0 MiB of it plain driver allocations, which the model leaves in place, 220.0 MiB its allocator'\''s) plus the free memory it reported)' fon.txt"

# options: PYTORCH_CUDA_ALLOC_CONF syntax, a sweep, refusals
"$CMH" whatif --json --sweep max_split_size_mb=64,128 --conf "expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:8]" \
    "$C/torch_var_plain.pickle" >sweep.json 2>err.txt || bad "whatif --sweep/--conf: $(cat err.txt)"
py - sweep.json <<'EOF' || fail=$((fail + 1))
import json, sys
names = [r["setting"] for r in json.load(open(sys.argv[1]))["settings"]]
assert names[0] == "" and names[1].startswith("expandable_segments:True,roundup_power2_divisions:[") and \
       names[2:] == ["max_split_size_mb:64", "max_split_size_mb:128"], names
print(f"ok: --conf in PYTORCH_CUDA_ALLOC_CONF's syntax and --sweep: {len(names)} settings, the recorded first")
EOF
# the "recorded" row is the record's own figures, `peak`'s, on every snapshot at hand; the model of
# the recorded settings is a row of its own, and a line says so when its peaks are not the record's
set -- "$F"/h200/*.pickle "$C"/*.pickle
[ -n "$PT" ] && [ -d "$PT" ] && set -- "$@" "$PT"/*.pickle
agree=0 differ=0
for f in "$@"; do
    "$CMH" whatif --json "$f" >rec.json 2>/dev/null || continue
    dev=$(py -c "import json; print(json.load(open('rec.json'))['device'])")
    "$CMH" peak --json --device "$dev" "$f" >peak.json 2>/dev/null
    "$CMH" whatif --device "$dev" "$f" >rec.txt 2>/dev/null
    "$CMH" peak --device "$dev" "$f" >peak.txt 2>/dev/null
    out=$(py - rec.json peak.json rec.txt peak.txt <<'PYEOF'
import json, re, sys
w, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))[0]
txt = open(sys.argv[3]).read()
pk = dict(re.findall(r"^peak (reserved|allocated): +(\S+ \S+) \(", open(sys.argv[4]).read(), re.M))
rec, model = w["record"], w["settings"][0]
probs = []
if (rec["peak_reserved"], rec["peak_allocated"]) != (p["peak_reserved"]["bytes"], p["peak_allocated"]["bytes"]):
    probs.append(f"record {rec['peak_reserved']}/{rec['peak_allocated']} != peak {p['peak_reserved']['bytes']}/{p['peak_allocated']['bytes']}")
row = next((l for l in txt.splitlines() if l.startswith("recorded ")), "")
cells = re.findall(r"\d+\.\d \S+|\d+ B", row)[:2]
if cells != [pk.get("reserved"), pk.get("allocated")]:
    probs.append(f"text row {cells} != peak's {pk}")
if not row or not model["recorded"] or not any(l.startswith("model of the recorded: ") for l in txt.splitlines()):
    probs.append("no 'recorded' row and 'model of the recorded' row")
same = (model["peak_reserved"], model["peak_allocated"]) == (rec["peak_reserved"], rec["peak_allocated"])
said = "the model of the recorded settings peaks at" in txt
if same == said or rec["model_peaks_match"] != same:
    probs.append(f"model {model['peak_reserved']}/{model['peak_allocated']}, same={same}, line said={said}")
print("FAIL: " + "; ".join(probs) if probs else ("same" if same else "differ"))
PYEOF
)
    case $out in same) agree=$((agree + 1)) ;; differ) differ=$((differ + 1)) ;; *) bad "$(basename "$f"): $out" ;; esac
done
[ $((agree + differ)) -ge 3 ] && ok "the recorded row is peak's figures on $((agree + differ)) snapshots ($agree the model matches, $differ it does not, said)" ||
    bad "recorded row: only $((agree + differ)) snapshots checked"

# a record with block events on several devices and no OOM: whatif replays the lowest and says so
# on stderr, as it does for an OOM's device (it said nothing of torch_npu's device 1); one device: no note
NPU=$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle
if [ -n "$PT" ] && [ -f "$NPU" ]; then
    "$CMH" whatif "$NPU" >/dev/null 2>err.txt
    grep -q "^cumemhist: whatif: device 0, the lowest of the 2 devices with a block-level trace (--device N for another)$" err.txt &&
        ok "two devices with blocks, no OOM: the device replayed is said on stderr" || bad "two devices: stderr '$(cat err.txt)'"
    "$CMH" whatif --device 1 "$NPU" >/dev/null 2>err.txt
    [ ! -s err.txt ] && ok "--device 1 asked: no note" || bad "--device 1: stderr '$(cat err.txt)'"
else
    echo "skipped: two devices' note (no PyTorch fixtures)"
fi
"$CMH" whatif "$C/torch_var_plain.pickle" >/dev/null 2>err.txt
[ ! -s err.txt ] && ok "one device: no note on stderr" || bad "one device: stderr '$(cat err.txt)'"

"$CMH" whatif --set no_such_thing=1 "$C/torch_var_plain.pickle" >/dev/null 2>err.txt
[ $? -eq 2 ] && grep -q "not a setting the model follows" err.txt && ok "an unknown setting is refused (exit 2)" || bad "unknown setting: $(cat err.txt)"
"$CMH" whatif --set max_split_size_mb=10 "$C/torch_var_plain.pickle" >/dev/null 2>err.txt
[ $? -eq 2 ] && grep -q "more than 20" err.txt && ok "max_split_size_mb at or below 20 is refused, as PyTorch does" || bad "small max_split: $(cat err.txt)"
"$CMH" record -q -o drv.cmh -- "$B/samples/leaky" 2 >/dev/null 2>&1
"$CMH" whatif drv.cmh >/dev/null 2>err.txt
[ $? -eq 5 ] && grep -q "no block-level trace" err.txt && ok "a recording of the driver alone: nothing to replay, said so" || bad "driver-only record: $(cat err.txt)"
# ... and why, where the OOM's device was taken (it read 'device 0 has no block-level trace to replay')
"$CMH" record -q -o drv_oom.cmh -- "$B/samples/oom_demo" >/dev/null 2>&1
"$CMH" whatif drv_oom.cmh >/dev/null 2>err.txt
[ $? -eq 5 ] && grep -q "device 0 has no block-level trace to replay (no 'alloc' events: a recording of the driver alone" err.txt &&
    ok "a driver-level record's OOM: nothing to replay, and why" || bad "driver-only OOM record: $(cat err.txt)"
"$CMH" whatif "$C/torch_var_plain.pickle" >text.txt 2>&1 && grep -q "^self-replay of the recorded settings: the model made the trace's 16 segment events, in order" text.txt &&
    grep -q "^expandable_segments:True " text.txt && ok "text: the recorded run and the default panel of settings" || bad "whatif text: $(cat text.txt)"
# A private pool's (a CUDA graph's) requests: the model serves them from the pool's own segments,
# and says how many there were (it once had the default pool alone and said nothing of the pool).
py - <<'PY'
import pickle
M, F, G = 1 << 20, [{"name": "big", "filename": "/proj/a.py", "line": 3}], [{"name": "capture", "filename": "/proj/graph.py", "line": 7}]
def seg(addr, blocks, pool):
    bl, a = [], addr
    for size, state, fr in blocks:
        bl.append({"address": a, "size": size, "requested_size": size if state != "inactive" else 0, "state": state, "frames": fr})
        a += size
    act = sum(b["size"] for b in bl if b["state"] != "inactive")
    return {"device": 0, "address": addr, "total_size": a - addr, "allocated_size": act, "active_size": act, "requested_size": act, "stream": 0,
            "segment_type": "large", "segment_pool_id": pool, "is_expandable": False, "frames": [], "blocks": bl}
def ent(action, addr, size, t, fr):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1_700_000_000_000_000 + t, "frames": fr}
P0, P1 = 0x7F3000000000, 0x7F3100000000
segs = [seg(P0, [(4 * M, "active_allocated", F), (4 * M, "inactive", [])], (0, 0)), seg(P1, [(6 * M, "active_allocated", G), (2 * M, "inactive", [])], (1, 3))]
tr = [ent("segment_alloc", P0, 8 * M, 0, F), ent("alloc", P0, 4 * M, 1, F), ent("segment_alloc", P1, 8 * M, 2, G), ent("alloc", P1, 6 * M, 3, G),
      ent("alloc", P1 + 6 * M, 2 * M, 4, G), ent("free_requested", P1 + 6 * M, 2 * M, 5, G), ent("free_completed", P1 + 6 * M, 2 * M, 5, G)]
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}, "external_annotations": []}, open("pools.pickle", "wb"))
PY
"$CMH" whatif pools.pickle >pools.txt 2>&1
"$CMH" whatif --json pools.pickle >pools.json 2>/dev/null
check "a private pool's requests: whatif says the model serves them from the default pool (text and json)" \
    "grep -q '^2 of the 3 requests (8.0 MiB) were served in a private pool' pools.txt &&
     py -c 'import json; assert json.load(open(\"pools.json\"))[\"record\"][\"private_pool_requests\"] == 2'"
"$CMH" whatif "$C/torch_var_plain.pickle" >text.txt 2>&1
check "no private pool, no word of one" "! grep -q 'private pool' text.txt"

# A private pool's cached block is never the default pool's: a graph pool (1, 0) caches a whole
# 18 MiB segment, then a default-pool request of 18 MiB fails at 28 MiB (18 reserved, 10 free).
# The model reproduces that OOM only when it keeps the pools apart; it knows the pool from the
# entries' pool_id (newer PyTorch), or from the final segment's segment_pool_id, and from
# neither when the pool's segment was freed before the end and the entries do not say.
py - <<'PY'
import pickle
M, P = 1 << 20, 0x7F4000000000
def ent(action, addr, size, t, pool, oom=False):
    e = {"action": action, "device_free" if oom else "addr": addr, "size": size, "stream": 0, "time_us": 1_700_000_000_000_000 + t, "frames": []}
    if pool is not None:
        e["pool_id"] = pool
    return e
def trace(g, d, end_free):
    tr = [ent("segment_alloc", P, 18 * M, 0, g), ent("alloc", P, 18 * M, 1, g), ent("free_requested", P, 18 * M, 2, g),
          ent("free_completed", P, 18 * M, 2, g), ent("oom", 10 * M, 18 * M, 3, d, oom=True)]
    return tr + [ent("segment_free", P, 18 * M, 4, g)] if end_free else tr
seg = {"device": 0, "address": P, "total_size": 18 * M, "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0,
       "segment_type": "large", "segment_pool_id": (1, 0), "is_expandable": False, "frames": [],
       "blocks": [{"address": P, "size": 18 * M, "requested_size": 0, "state": "inactive", "frames": []}]}
def dump(name, segs, tr):
    pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}, "external_annotations": []}, open(name, "wb"))
dump("gp_entries.pickle", [], trace((1, 0), (0, 0), True))  # the entries say; the segment is gone
dump("gp_segment.pickle", [seg], trace(None, None, False))  # the final segment says
dump("gp_neither.pickle", [], trace(None, None, True))      # nothing says: one pool, as before
PY
for f in gp_entries gp_segment gp_neither; do
    "$CMH" whatif --json $f.pickle >$f.json 2>err.txt || bad "whatif $f: $(cat err.txt)"
    "$CMH" whatif $f.pickle >$f.txt 2>&1
done
py - gp_entries.json gp_segment.json gp_neither.json <<'EOF' || fail=$((fail + 1))
import json, sys
MiB = 1 << 20
e, g, n = (json.load(open(f)) for f in sys.argv[1:4])
for d in (e, g, n):
    assert d["capacity"] == 28 * MiB and d["capacity_from"] == "oom", d["capacity"]
    assert d["record"]["ooms"] == 1, d["record"]
assert e["settings"][0]["ooms"] == 1 and g["settings"][0]["ooms"] == 1, (e["settings"][0], g["settings"][0])
assert e["record"]["private_pool_requests"] == 1 and g["record"]["private_pool_requests"] == 1
assert n["settings"][0]["ooms"] == 0 and n["record"]["private_pool_requests"] == 0, n["settings"][0]
print("ok: a graph pool's cached 18 MiB is not the default pool's: the recorded OOM replays (1 OOM) from the entries' pool_id "
      "or the final segment's, and not (0 OOMs) when neither says")
EOF
check "whatif text: the private pool's request, counted from the entries' pool_id" \
    "grep -q '^1 of the 1 requests (18.0 MiB) were served in a private pool' gp_entries.txt"
# and the OOM's own verdict: the graph pool's free 18 MiB, known from its segment_alloc's pool_id
# though the segment is gone at the end, is the pool's alone
"$CMH" oom gp_entries.pickle >gp_oom_e.txt 2>&1
"$CMH" oom gp_neither.pickle >gp_oom_n.txt 2>&1
check "oom: held by a private pool known from the entries' pool_id; a free gap when nothing says" \
    "grep -q 'verdict: held by a private pool' gp_oom_e.txt && grep -q 'in private pools          18.0 MiB' gp_oom_e.txt &&
     grep -q 'verdict: a free gap inside the reserved segments was large enough' gp_oom_n.txt"
# The capacity a PyTorch trace's OOM says is what the trace had reserved then plus the free memory
# reported: a trace whose segments the model does not reproduce (a 20 MiB segment for a 10 MiB
# request; older allocators, other rounding) read "capacity 15.0 MiB" (the model's 10 MiB + 5),
# and its own recorded row then ran "over it (reserved 20.0 MiB)".
py - <<'PY' || bad "writing odd_seg.pickle failed"
import pickle
MiB, a = 1 << 20, 1 << 40
fr = [{'name': 'fwd', 'filename': '/home/u/m.py', 'line': 3}]
seg = {'device': 0, 'address': a, 'total_size': 20 * MiB, 'allocated_size': 10 * MiB, 'active_size': 10 * MiB,
       'requested_size': 10 * MiB, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False,
       'frames': fr, 'blocks': [{'address': a, 'size': 10 * MiB, 'requested_size': 10 * MiB, 'state': 'active_allocated', 'frames': fr},
                                {'address': a + 10 * MiB, 'size': 10 * MiB, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}
tr = [{'action': 'segment_alloc', 'addr': a, 'size': 20 * MiB, 'stream': 0, 'time_us': 1, 'frames': fr},
      {'action': 'alloc', 'addr': a, 'size': 10 * MiB, 'stream': 0, 'time_us': 2, 'frames': fr},
      {'action': 'oom', 'device_free': 5 * MiB, 'size': 40 * MiB, 'stream': 0, 'time_us': 3, 'frames': fr}]
pickle.dump({'segments': [seg], 'device_traces': [tr]}, open('odd_seg.pickle', 'wb'))
PY
check "whatif: a PyTorch trace's capacity is its reserve at the OOM plus the free reported, its recorded row not 'over it'" \
    "'$CMH' whatif --json odd_seg.pickle 2>/dev/null | py -c '
import json, sys
d = json.load(sys.stdin)
d = d[0] if isinstance(d, list) else d
print(d[\"capacity\"])
sys.exit(d[\"capacity\"] != 25 << 20)' && ! '$CMH' whatif odd_seg.pickle 2>/dev/null | grep -q '^recorded .*over it'"
# PyTorch's malloc frees its cache and asks once more (a retry, counted) before every OOM it gives
# up on: memory_summary() of that process says retries >= OOMs, and so does the pickle's summary
check "summary of a PyTorch pickle with an OOM: 'CUDA OOMs: 1 | cudaMalloc retries: 1', as PyTorch counts its retry" \
    "'$CMH' summary odd_seg.pickle 2>/dev/null | grep -q '^|            CUDA OOMs: 1  *|        cudaMalloc retries: 1  *|\$'"
finish
