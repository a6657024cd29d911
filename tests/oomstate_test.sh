#!/bin/sh
# oomstate_test.sh BUILD_DIR SOURCE_DIR - one answer about each out-of-memory error, whichever
# command is asked: `oom`, `frag`, `report` and `whatif` on every OOM record we have (a
# fragmentation OOM and a demand OOM of the caching allocator sample, the two-device OOM
# fixture, a generated PyTorch trace whose OOM is on device 1 of 3, one whose free memory is a
# CUDA graph's private pool, three whose failing request is a private pool's own, a plain
# allocation's beside a stream-ordered pool's cache) state the same
# moment, the same figures and the same verdict; the figures keep the invariants (free inside =
# reserved - allocated = releasable + trapped + private pools + own pool + pending free = usable +
# unusable); a command about one event defaults to the device where it happened.
TEST=oomstate . "$(dirname "$0")/testlib.sh"

"$CMH" record -q -o frag.cmh -- "$B/samples/frag_oom" >/dev/null 2>&1
"$CMH" record -q -o demand.cmh -- "$B/samples/oom_demo" >/dev/null 2>&1
cp "$F/memviz/two_devices_oom.cmh" two.cmh
# a plain cuMemAlloc fails beside the default pool's cache of 32 MiB on a 64 MiB device (tests/pool_oom.c)
FAKECUDA_CAPACITY=64M "$CMH" record -q -o pool_oom.cmh -- "$B/tests/pool_oom" >pool_oom.out 2>&1 || bad "pool_oom: $(cat pool_oom.out)"

# PyTorch's shape: three devices, expandable segments, the OOM on device 1 (which holds far more
# than the others, as DataParallel makes it), after the step's activations were freed
py - three.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
def frames(line): return [{"filename": "train.py", "line": line, "name": "step"}]
segs, traces = [], []
for dev, (n, size) in enumerate([(3, 20), (30, 64), (6, 20)]):
    tr, t = [], 1000
    base = 0x7f0000000000 + dev * (1 << 36)
    blocks = []
    for k in range(n):
        a = base + k * size * MIB
        tr.append({"action": "segment_alloc", "addr": a, "size": size * MIB, "stream": 0, "time_us": t, "frames": frames(10)}); t += 1
        tr.append({"action": "alloc", "addr": a, "size": size * MIB, "stream": 0, "time_us": t, "frames": frames(11)}); t += 1
        blocks.append({"address": a, "size": size * MIB, "requested_size": size * MIB, "state": "active_allocated", "frames": frames(11)})
    if dev == 1:
        # (device_free, as PyTorch names it: an 'addr' key left the device's free bytes unsaid)
        tr.append({"action": "oom", "device_free": 8 * MIB, "size": 512 * MIB, "stream": 0, "time_us": t, "frames": frames(12)}); t += 1
        # the exception unwinds: the last activations go, their segment stays cached
        a = base + (n - 1) * size * MIB
        tr.append({"action": "free_requested", "addr": a, "size": size * MIB, "stream": 0, "time_us": t, "frames": frames(11)}); t += 1
        tr.append({"action": "free_completed", "addr": a, "size": size * MIB, "stream": 0, "time_us": t, "frames": frames(11)}); t += 1
        blocks[-1]["state"] = "inactive"
    traces.append(tr)
    for k in range(n):
        a = base + k * size * MIB
        segs.append({"device": dev, "address": a, "total_size": size * MIB, "allocated_size": blocks[k]["size"] if blocks[k]["state"] != "inactive" else 0,
                     "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                     "is_expandable": True, "frames": frames(10), "blocks": [blocks[k]]})
pickle.dump({"segments": segs, "device_traces": traces, "allocator_settings": {"expandable_segments": True}}, open(sys.argv[1], "wb"), protocol=4)
EOF

# a CUDA graph's private pool (segment_pool_id (1, 3)) keeps 70 MiB free in its segments, one of
# them empty, when a 30 MiB request of the default pool fails: that memory is the pool's own,
# usable by no other request and not given back by empty_cache() while the graph lives
py - pool.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
def fr(name, line): return [{"filename": "/proj/%s.py" % name, "line": line, "name": name}]
def seg(addr, blocks, pool):
    out, a = [], addr
    for size, state in blocks:
        out.append({"address": a, "size": size * MIB, "requested_size": size * MIB if state != "inactive" else 0,
                    "state": state, "frames": fr("capture" if pool != (0, 0) else "big", 7) if state != "inactive" else []})
        a += size * MIB
    live = sum(b["size"] for b in out if b["state"] != "inactive")
    return {"device": 0, "address": addr, "total_size": a - addr, "allocated_size": live, "active_size": live,
            "requested_size": live, "stream": 0, "segment_type": "large", "segment_pool_id": pool, "is_expandable": False,
            "frames": [], "blocks": out}
D, G1, G2 = 0x7f3000000000, 0x7f3100000000, 0x7f3140000000
segs = [seg(D, [(40, "active_allocated")], (0, 0)), seg(G1, [(10, "active_allocated"), (50, "inactive")], (1, 3)),
        seg(G2, [(20, "inactive")], (1, 3))]
tr, t = [], 1000
def ev(action, addr, size, who):
    global t
    tr.append({"action": action, "addr": addr, "size": size * MIB, "stream": 0, "time_us": t, "frames": fr(who, 7)}); t += 1
ev("segment_alloc", D, 40, "big"); ev("alloc", D, 40, "big")
ev("segment_alloc", G1, 60, "capture"); ev("alloc", G1, 10, "capture"); ev("alloc", G1 + 10 * MIB, 50, "capture")
ev("free_requested", G1 + 10 * MIB, 50, "capture"); ev("free_completed", G1 + 10 * MIB, 50, "capture")
ev("segment_alloc", G2, 20, "capture"); ev("alloc", G2, 20, "capture")
ev("free_requested", G2, 20, "capture"); ev("free_completed", G2, 20, "capture")
tr.append({"action": "oom", "device_free": 2 * MIB, "size": 30 * MIB, "stream": 0, "time_us": t, "frames": fr("big", 9)})
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}}, open(sys.argv[1], "wb"), protocol=4)
EOF

# A private pool's own request fails (the entries' pool_id, newer PyTorch): the free runs of its
# own pool are its to use, other pools' are not, nor the default pool's gaps (the allocator serves
# a private pool from its own blocks and new segments).  Pool (1, 0) has 14 MiB free in runs of
# 6, 6 and 2 MiB, the default pool a 4 MiB gap between live blocks, the device 2 MiB:
#   own_frag: 8 MiB of (1, 0): no run fits, its own 14 MiB would do: fragmentation;
#   own_fit: 6 MiB of (1, 0): a run of its own fits (the model serves it: whatif sees no OOM);
#   others: 26 MiB of (1, 0), pool (2, 0) with 18 MiB free: enough only with other pools' memory.
py - <<'EOF'
import pickle
M = 1 << 20
S, D, Q = 0x7F5000000000, 0x7F6000000000, 0x7F7000000000
def build(req, other):
    t, tr = [0], []
    def ent(action, addr, size, pool, oom=False):
        t[0] += 1
        tr.append({"action": action, "device_free" if oom else "addr": addr, "size": size, "stream": 0,
                   "time_us": 1_700_000_000_000_000 + t[0], "frames": [], "pool_id": pool})
    def free(addr, size, pool):
        ent("free_requested", addr, size, pool), ent("free_completed", addr, size, pool)
    P1, P2, D0 = (1, 0), (2, 0), (0, 0)
    ent("segment_alloc", D, 20 * M, D0)
    for i in range(5): ent("alloc", D + 4 * i * M, 4 * M, D0)
    free(D + 4 * M, 4 * M, D0)
    ent("segment_alloc", S, 20 * M, P1)
    for a, n in ((0, 2), (2, 6), (8, 2), (10, 6), (16, 2)): ent("alloc", S + a * M, n * M, P1)
    free(S + 2 * M, 6 * M, P1), free(S + 10 * M, 6 * M, P1)
    if other: ent("segment_alloc", Q, 20 * M, P2), ent("alloc", Q, 2 * M, P2)
    ent("oom", 2 * M, req, P1, oom=True)
    segs, live = {}, {}  # the final segments, as the trace leaves them
    for e in tr:
        if e["action"] == "segment_alloc": segs[e["addr"]] = (e["size"], e["pool_id"])
        elif e["action"] == "alloc": live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed": del live[e["addr"]]
    out = []
    for base, (size, pool) in sorted(segs.items()):
        bl, at = [], base
        for a in sorted(x for x in live if base <= x < base + size):
            if a > at: bl.append({"address": at, "size": a - at, "requested_size": 0, "state": "inactive", "frames": []})
            bl.append({"address": a, "size": live[a], "requested_size": live[a], "state": "active_allocated", "frames": []})
            at = a + live[a]
        if at < base + size: bl.append({"address": at, "size": base + size - at, "requested_size": 0, "state": "inactive", "frames": []})
        act = sum(b["size"] for b in bl if b["state"] != "inactive")
        out.append({"device": 0, "address": base, "total_size": size, "allocated_size": act, "active_size": act,
                    "requested_size": act, "stream": 0, "segment_type": "large", "segment_pool_id": pool,
                    "is_expandable": False, "frames": [], "blocks": bl})
    return {"segments": out, "device_traces": [tr], "allocator_settings": {}, "external_annotations": []}
for name, req, other in (("own_frag", 8 * M, False), ("own_fit", 6 * M, False), ("others", 26 * M, True)):
    pickle.dump(build(req, other), open(name + ".pickle", "wb"))
EOF

# each record's outputs made first (K.*, K its place in the list), then read by one Python: a
# Python start is slow
RECS="frag.cmh demand.cmh two.cmh three.pickle pool.pickle own_frag.pickle own_fit.pickle others.pickle pool_oom.cmh"
tab=$(printf '\t')
: >agree.tsv
k=0
for rec in $RECS; do
    k=$((k + 1))
    "$CMH" oom --json "$rec" >$k.oom.json 2>/dev/null || { bad "$rec: oom --json failed"; continue; }
    "$CMH" frag --json "$rec" >$k.frag.json 2>/dev/null || { bad "$rec: frag --json failed"; continue; }
    "$CMH" report "$rec" -o $k.report.html 2>/dev/null || { bad "$rec: report failed"; continue; }
    "$CMH" whatif --json "$rec" >$k.whatif.json 2>$k.whatif.err
    wrc=$?
    "$CMH" flamegraph --at oom --folded "$rec" >$k.flame.txt 2>$k.flame.err
    frc=$?
    echo "$k$tab$rec$tab$k.oom.json$tab$k.frag.json$tab$k.report.html$tab$k.whatif.json$tab$wrc$tab$k.whatif.err$tab$frc$tab$k.flame.err" >>agree.tsv
done
py - agree.tsv <<'EOF'
import html, json, re, sys


def one(rec, oom, frag, page, wi, wrc, wierr, frc, flerr):
    oom = json.load(open(oom)); frag = json.load(open(frag)); page = html.unescape(open(page).read())
    probs = []
    events = [(d["device"], e) for d in oom for e in d["ooms"]]
    if not events: probs.append("no OOM found")
    for dev, e in events:
        if e["free_in_segments"] != e["reserved"] - e["allocated"]:
            probs.append(f"device {dev} entry {e['index']}: free inside {e['free_in_segments']} != reserved - allocated")
        if e["releasable"] + e["trapped"] + e["private_pools"] + e["own_pool"] + e["pending_free"] != e["free_in_segments"]:
            probs.append(f"device {dev} entry {e['index']}: releasable + trapped + private pools + own pool + pending != free inside")
        if e["usable"] + e["unusable"] != e["free_in_segments"]:
            probs.append(f"device {dev} entry {e['index']}: usable {e['usable']} + unusable {e['unusable']} != free inside")
        m = re.search(r"Out of memory(?: #\d+|, retried)</b> at entry %d: asked for .*?Verdict:</b> ([^<]*)" % e["index"], page, re.S)
        if not m: probs.append(f"device {dev}: the report has no OOM at entry {e['index']}")
    # frag's word on the last OOM of each device is oom's
    for d in oom:
        if not d["ooms"]: continue
        last = d["ooms"][-1]
        f = [x for x in frag if x["device"] == d["device"]][0]
        lo = f.get("last_oom")
        if not lo: probs.append(f"device {d['device']}: frag does not mention the OOM"); continue
        for k in ("index", "request", "free_in_segments", "largest_gap", "verdict", "trapped", "releasable", "private_pools",
                  "own_pool", "usable", "unusable", "request_pool"):
            if lo[k] != last[k]: probs.append(f"device {d['device']}: frag's {k} {lo[k]} != oom's {last[k]}")
    # whatif and flamegraph --at oom: the first OOM's device by default
    first = min(events, key=lambda x: (x[1]["time_ns"] or 0, x[0]))[0]
    if int(wrc) == 0:
        w = json.load(open(wi))
        if w["device"] != first: probs.append(f"whatif replayed device {w['device']}, the OOM is on device {first}")
        d = [x for x in oom if x["device"] == first][0]
        avoided = sorted(s["setting"] for s in w["settings"] if not s["recorded"] and s["ooms"] == 0)
        said = d.get("whatif")
        if said is None: probs.append("oom gives no what-if line where whatif replays")
        elif said["reproduced"] and sorted(said["avoided_by"]) != avoided:
            probs.append(f"oom says {said['avoided_by']} avoid it, whatif {avoided}")
        rec_row = [s for s in w["settings"] if s["recorded"]][0]
        one = ([e for e in d["ooms"] if e["number"] == 1] or d["ooms"])[0]  # the OOM oom calls #1 (a retry is not one)
        if said and said["reproduced"] and (rec_row.get("first_oom_index"), rec_row.get("first_oom_number")) != (one["index"], one["number"]):
            probs.append(f"whatif's OOM at entry {rec_row.get('first_oom_index')} (#{rec_row.get('first_oom_number')}), "
                         f"oom's #1 at {one['index']}")
        if one["number"] == 1 and w["record"].get("first_oom_verdict") != one["verdict"]:
            probs.append(f"whatif says oom's verdict on #1 is {w['record'].get('first_oom_verdict')}, oom {one['verdict']}")
    elif "no block-level trace" not in open(wierr).read():
        probs.append(f"whatif exit {wrc}: {open(wierr).read()}")
    if int(frc) != 0: probs.append(f"flamegraph --at oom: exit {frc}: {open(flerr).read()}")
    elif len({d for d, _ in events} | {x["device"] for x in oom}) > 1 and f"device {first}" not in open(flerr).read():
        probs.append(f"flamegraph --at oom does not say it drew device {first}: {open(flerr).read()!r}")
    if probs:
        return 1, rec + ": " + "; ".join(probs)
    return 0, f"{rec}: {len(events)} OOM(s): oom, frag, report, whatif and flamegraph agree on the moment, the figures and the verdict"


# one line of the list a record: K, then its files and exit statuses; K.msg and K.rc its answer
for line in open(sys.argv[1]):
    k, *args = line.rstrip("\n").split("\t")
    try:
        rc, msg = one(*args)
    except Exception as e:  # a file that does not read, as a lone run's traceback would fail it
        rc, msg = 1, "%s: %r" % (args[0], e)
    open(k + ".msg", "w").write(msg + "\n")
    open(k + ".rc", "w").write("%d\n" % rc)
EOF
k=0
for rec in $RECS; do
    k=$((k + 1))
    [ -e $k.rc ] || continue # (said above: one of its commands failed)
    cat $k.msg
    check "$rec: one answer about each OOM" "[ \"\$(cat $k.rc)\" = 0 ]"
done

# the verdicts themselves
"$CMH" oom frag.cmh | grep -q "verdict: fragmentation" && ok "frag_oom: fragmentation" || bad "frag_oom: $("$CMH" oom frag.cmh | grep verdict)"
"$CMH" oom demand.cmh | grep -q "verdict: demand" && ok "oom_demo: demand" || bad "oom_demo: $("$CMH" oom demand.cmh | grep verdict)"
# at the OOM of three.pickle, device 1 carries far more than the others: said; and frag judges
# that OOM at its moment (demand), not at the end, when the freed activations leave a gap
"$CMH" oom three.pickle >three.txt 2>&1
grep -q "uneven load: device 1 held" three.txt && grep -q "DistributedDataParallel rather than" three.txt && ok "a multi-device OOM: the uneven load is said" || bad "uneven load not said: $(cat three.txt)"
"$CMH" frag --device 1 three.pickle >f1.txt 2>&1
grep -q "verdict: demand" f1.txt && ! grep -q "large enough" f1.txt && ok "frag judges the OOM at its moment, as oom does" ||
    bad "frag at the OOM: $(tail -4 f1.txt)"
# a private pool's free memory is neither releasable nor trapped, and the OOM is the pool's doing
py - <<EOF
import json, subprocess
run = lambda *a: json.loads(subprocess.run(["$CMH", *a, "pool.pickle"], capture_output=True, text=True).stdout)[0]
o, f = run("oom", "--json")["ooms"][0], run("frag", "--json")
assert o["verdict"] == "private pool" and o["private_pools"] == 70 << 20 and o["releasable"] == 0 and o["trapped"] == 0, o
assert o["largest_gap"] == 0 and not o["fits_in_gap"], o
assert f["private_pools"] == 70 << 20 and f["releasable"] == 0 and f["trapped"] == 0 and f["fragmentation"] == 0, f
assert f["releasable"] + f["trapped"] + f["private_pools"] + f["pending_free"] == f["free_in_segments"], f
assert sorted(tuple(g["pool_id"]) for g in f["segments"]) == [(0, 0), (1, 3), (1, 3)], f["segments"]
EOF
check "a CUDA graph's private pool: its free memory is the pool's, the OOM verdict says so" "[ $? -eq 0 ]"
"$CMH" oom pool.pickle | grep -q "in private pools *70.0 MiB" && ok "oom names the private pools' free memory" ||
    bad "oom on a private pool: $("$CMH" oom pool.pickle)"
# which pool, and its size, in oom and in whatif (the verdict a user can act on: free that graph)
"$CMH" oom pool.pickle | grep -q "^      of it pool (1, 3) 70.0 MiB" &&
    "$CMH" whatif pool.pickle 2>/dev/null | grep -q "^OOM #1, as .oom. judges it: held by a private pool: 70.0 MiB free in pool (1, 3)" &&
    ok "oom and whatif name the private pool holding the memory, and its size" ||
    bad "the private pool not named: $("$CMH" oom pool.pickle | grep 'pool (')$("$CMH" whatif pool.pickle 2>&1 | grep 'OOM #1, as')"

# a private pool's own request: its pool's free is usable, other pools' and the default pool's
# gaps are not; the verdict follows, and whatif's model agrees on what the request could use (it
# reproduces the OOM exactly where no run of the pool's own fits)
py - <<EOF
import json, subprocess
M = 1 << 20
run = lambda cmd, f: json.loads(subprocess.run(["$CMH", cmd, "--json", f], capture_output=True, text=True).stdout)
want = {"own_frag": ("fragmentation", 14 * M, 0, 4 * M, 6 * M, 1),
        "own_fit": ("fit in a free gap", 14 * M, 0, 4 * M, 6 * M, 0),
        "others": ("private pool", 14 * M, 18 * M, 22 * M, 6 * M, 1)}
for name, (verdict, own, other, unusable, gap, model_ooms) in want.items():
    o = run("oom", name + ".pickle")[0]["ooms"][0]
    got = (o["verdict"], o["own_pool"], o["private_pools"], o["unusable"], o["largest_gap"])
    assert got == (verdict, own, other, unusable, gap), (name, got)
    assert o["request_pool"] == [1, 0] and o["trapped"] == 4 * M and o["usable"] == own, (name, o)
    assert o["usable"] + o["unusable"] == o["free_in_segments"] == o["reserved"] - o["allocated"], (name, o)
    w = run("whatif", name + ".pickle")
    assert w["settings"][0]["recorded"] and w["settings"][0]["ooms"] == model_ooms, (name, w["settings"][0])
    assert (o["verdict"] == "fit in a free gap") == (model_ooms == 0), (name, o["verdict"], model_ooms)
print("ok: private pool (1, 0)'s own request: own pool 14 MiB usable, default gaps 4 MiB and pool (2, 0)'s 18 MiB not; "
      "fragmentation / fit in a free gap / private pool, and whatif reproduces the OOM where no run of its own fits")
EOF
check "a private pool's own OOM: its own free usable, other pools' not; the verdicts; whatif agrees" "[ $? -eq 0 ]"
"$CMH" oom own_frag.pickle >own.txt 2>&1
grep -q "in its own pool           14.0 MiB" own.txt && grep -q "the request could use     14.0 MiB   of it; 4.0 MiB not" own.txt &&
    grep -q "largest free gap             6.0 MiB   (in its own pool)" own.txt && ok "oom text: the request's own pool and what it could use" ||
    bad "oom text on a private pool's own OOM: $(cat own.txt)"

# a stream-ordered pool keeps what was freed into it reserved, as the driver's pools do: at the
# plain allocation's OOM the device has nothing free and the pool's cache is what a trim gives
# back (the fake driver once gave the freed ranges back to the device while the pool still
# reported them reserved: 'device free 32.0 MiB' beside 64 MiB reserved on a 64 MiB device,
# 'refused with room'); after the trim the same allocation succeeds (pool_oom exits 0)
py - <<EOF
import json, subprocess
M = 1 << 20
d = json.loads(subprocess.run(["$CMH", "oom", "--json", "pool_oom.cmh"], capture_output=True, text=True).stdout)[0]
o = d["ooms"][-1]
# the filling loop's stream-ordered OOM is the program's; the plain cuMemAlloc of the same size on
# no stream is another request, not its retry (it once read 0 OOMs and 2 retries); and the plain
# call's error went back to the program, which trimmed the pool and asked again from another
# line: its own handling, an OOM it saw, not an allocator's retry (it once read 1 OOM, 1 retry)
assert (d["num_ooms"], d["num_alloc_retries"]) == (2, 0), (d["num_ooms"], d["num_alloc_retries"])
assert [(x["number"], x["retried"]) for x in d["ooms"]] == [(1, False), (2, False)], d["ooms"]
assert o["request"] == 4 * M and o["device_free"] == 0, o
assert o["reserved"] == 64 * M and o["allocated"] == 32 * M and o["pool_cache"] == 32 * M and o["releasable"] == 32 * M, o
assert o["verdict"] != "refused with room", o
# the plain cuMemAlloc could not use the pool's cache: neither fragmentation (no gap could have
# served it) nor demand; the verdict names the cache, its size and the pool, the same every run
assert o["verdict"] == "a pool's cache" and o["pool_cache_unusable"] == 32 * M and o["usable"] == 0 and o["unusable"] == 32 * M, o
assert o["cache_pool"]["bytes"] == 32 * M and o["cache_pool"]["handle"] != 0, o
assert d["ooms"][0]["verdict"] == "demand" and d["ooms"][0]["pool_cache_unusable"] == 0, d["ooms"][0]
f = json.loads(subprocess.run(["$CMH", "frag", "--json", "pool_oom.cmh"], capture_output=True, text=True).stdout)[0]
assert f["last_oom"]["verdict"] == o["verdict"], f["last_oom"]
EOF
check "an OOM beside a pool's cache: the device has nothing free, the cache is releasable by a trim, the verdict names it" "[ $? -eq 0 ]"
"$CMH" oom pool_oom.cmh | grep -q "^      kept by the default pool of device 0 32.0 MiB: not for this request" &&
    "$CMH" oom pool_oom.cmh | grep -q "verdict: held in a stream-ordered pool's cache: .*cuMemPoolTrimTo" &&
    ok "oom names the pool that keeps the cache, and what to do" || bad "oom's pool cache verdict: $("$CMH" oom pool_oom.cmh | grep 'kept by\|verdict')"
v=""
for i in 1 2 3; do
    FAKECUDA_CAPACITY=64M "$CMH" record -q -o pool_oom$i.cmh -- "$B/tests/pool_oom" >/dev/null 2>&1
    v="$v$("$CMH" oom --json pool_oom$i.cmh | py -c "import json,sys; print(','.join(o['verdict'] for o in json.load(sys.stdin)[0]['ooms']))");"
done
check "pool_oom three times: the same verdicts ($v)" "[ \"$v\" = \"demand,a pool's cache;demand,a pool's cache;demand,a pool's cache;\" ]"
"$CMH" oom pool_oom.cmh | grep -q "of it a pool's cache    32.0 MiB   (freed to a stream-ordered pool, kept: cuMemPoolTrimTo gives it back)" &&
    ok "oom names the pool's cache and the trim" || bad "oom beside a pool's cache: $("$CMH" oom pool_oom.cmh)"
# the pool's cache is of the releasable bytes: its lines hang under "releasable", never under
# "trapped 0 B" (it read "trapped 0 B" / "of it a pool's cache 32.0 MiB": 32 MiB of 0 B)
"$CMH" oom pool_oom.cmh | awk '/^    [a-z]/ { parent = $1 } /^      (of it a pool|kept by (pool|the default pool))/ { n++; if (parent != "releasable") bad = 1 } END { exit !(n == 2 && !bad) }' &&
    ok "oom: the pool's cache lines stand under releasable" || bad "oom's free-inside breakdown: $("$CMH" oom pool_oom.cmh | grep -A6 'free inside')"

# a request larger than the device had free and the process held together (the wrong shape, a
# batch too large for the device): too large, not "the memory was genuinely in use", and no
# empty list of holders; without a free figure the same request is not known (nothing free inside
# the segments, and how much the device had is not said: it read demand)
py - huge.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
fr = [{"filename": "/proj/train.py", "line": 30, "name": "attention"}]
tr = [{"action": "oom", "addr": 0, "device_free": 512 * MIB, "size": 900 * MIB, "stream": 0, "time_us": 1000, "frames": fr}]
pickle.dump({"segments": [], "device_traces": [tr]}, open(sys.argv[1], "wb"), protocol=4)
del tr[0]["device_free"]
pickle.dump({"segments": [], "device_traces": [tr]}, open("huge_nofree.pickle", "wb"), protocol=4)
EOF
"$CMH" oom huge.pickle >huge.txt 2>&1
grep -q "verdict: too large" huge.txt && grep -q "holding memory then: nothing" huge.txt && ok "a request larger than all the device could give: too large" ||
    bad "too large: $(cat huge.txt)"
"$CMH" oom --json huge.pickle | grep -q '"verdict": *"too large"' && "$CMH" oom huge_nofree.pickle | grep -q "verdict: not known" &&
    ok "too large in JSON; not without a free figure" || bad "too large JSON / no free figure: $("$CMH" oom --json huge.pickle; "$CMH" oom huge_nofree.pickle)"

# cached memory is not fragmentation: one empty (cached) expandable segment is releasable
py - <<EOF
import json, subprocess
d = json.loads(subprocess.run(["$CMH", "frag", "--json", "--device", "1", "three.pickle"], capture_output=True, text=True).stdout)[0]
assert d["releasable"] == 64 << 20 and d["trapped"] == 0 and d["fragmentation"] == 0, d
EOF
check "an empty cached segment is releasable, not fragmentation" "[ $? -eq 0 ]"

# One record, one count of its OOMs: an allocator's OOM that it retried after freeing its cache,
# and that then succeeded, is memory_summary's cudaMalloc retry and no OOM the program saw;
# every writer counts and numbers the OOMs as summary does (the fatal one is #1, never "#2")
FAKECUDA_CAPACITY=100M "$CMH" record -q -o retry.cmh -- "$B/tests/oom_retry" >retry.out 2>&1
[ $? -eq 1 ] && grep -q "64 MiB: CUDA_ERROR_OUT_OF_MEMORY" retry.out && ok "oom_retry: a retry that succeeded, then a fatal OOM" ||
    bad "oom_retry did not run as designed: $(cat retry.out)"
"$CMH" summary retry.cmh | grep -q "CUDA OOMs: 1 .*cudaMalloc retries: 1 " && ok "summary: 1 OOM, 1 retry" ||
    bad "summary's counts: $("$CMH" summary retry.cmh | grep 'CUDA OOMs')"
"$CMH" oom retry.cmh >retry.txt 2>&1
grep -q "out of memory #1 on device 0 at entry 10" retry.txt && ! grep -q "out of memory #2" retry.txt &&
    grep -q "out of memory on device 0 at entry 6, .*retried: not counted as an OOM" retry.txt &&
    grep -q "(entry 9): it succeeded: not a failure the program saw" retry.txt &&
    grep -q "device 0: 1 out-of-memory error the program saw, and 1 more that the allocator retried" retry.txt &&
    ok "oom: the retry that succeeded is not numbered, the fatal one is #1" || bad "oom on a retry: $(grep -i 'memory\|retr' retry.txt)"
py - <<EOF
import json, subprocess
d = json.loads(subprocess.run(["$CMH", "oom", "--json", "retry.cmh"], capture_output=True, text=True).stdout)[0]
assert d["num_ooms"] == 1 and d["num_alloc_retries"] == 1, d
o = [(x["index"], x["number"], x["retried"], x.get("retry_index"), x.get("retry_succeeded"), x["retry_of"]) for x in d["ooms"]]
assert o == [(6, None, True, 9, True, None), (10, 1, False, None, None, None)], o
EOF
check "oom --json: numbers and counts as summary" "[ $? -eq 0 ]"
"$CMH" owners retry.cmh >ro.txt 2>&1
grep -q "out of memory, retried (entry 6" ro.txt && grep -q "out of memory #1 (entry 10" ro.txt && ! grep -q "out of memory #2" ro.txt &&
    ok "owners numbers the OOMs as oom" || bad "owners' OOM moments: $(grep 'out of memory' ro.txt)"
"$CMH" report retry.cmh -o retry.html >/dev/null 2>&1
grep -q "Out of memory, retried</b> at entry 6" retry.html && grep -q "Out of memory #1</b> at entry 10" retry.html &&
    ! grep -q "Out of memory #2" retry.html && ok "report numbers the OOMs as oom" || bad "report's OOMs: $(grep -o 'Out of memory[^<]*' retry.html)"
# frag_oom's retry failed too: the retry is the fatal #1, and the first says so
"$CMH" oom frag.cmh >fr.txt 2>&1
grep -q "it failed too: out of memory #1" fr.txt && grep -q "retry of  *the request that failed at entry" fr.txt && ! grep -q "out of memory #2" fr.txt &&
    ok "oom: a retry that failed is the OOM the program saw" || bad "oom on frag_oom's retry: $(grep -i 'memory #\|retr' fr.txt)"

# whatif asks about the OOM oom calls #1: a caching allocator's OOM whose retry succeeded, then
# one it retried in vain (tests/retry_then_oom.c); whatif's recorded row, its capacity and every
# model row name the fatal request by oom's entry and number, never the first retry's
FAKECUDA_CAPACITY=100M "$CMH" record -q -o rto.cmh -- "$B/tests/retry_then_oom" >rto.out 2>&1
[ $? -eq 1 ] && grep -q "24 MiB allocated after a retry; 40 MiB: CUDA_ERROR_OUT_OF_MEMORY" rto.out &&
    ok "retry_then_oom: a retry that succeeded, then a fatal OOM" || bad "retry_then_oom did not run as designed: $(cat rto.out)"
"$CMH" oom --json rto.cmh >rto_oom.json 2>&1
"$CMH" whatif --json rto.cmh >rto_wi.json 2>&1
"$CMH" whatif rto.cmh >rto_wi.txt 2>&1
"$CMH" oom rto.cmh >rto_oom.txt 2>&1
py - rto_oom.json rto_wi.json <<'EOF'
import json, sys
o, w = json.load(open(sys.argv[1]))[0], json.load(open(sys.argv[2]))
one = [x for x in o["ooms"] if x["number"] == 1]
assert len(one) == 1 and o["num_ooms"] == 1 and o["num_alloc_retries"] == 2, o
first = [x for x in o["ooms"] if x["retried"]][0]["index"]
assert first < one[0]["index"], (first, one)
r = w["record"]
assert (r["first_oom_index"], r["first_oom_number"], r["ooms"], r["oom_retries"]) == (one[0]["index"], 1, 1, 2), r
assert w["capacity"] == 100 << 20, w["capacity"]
for s in w["settings"]:
    assert s["ooms"] == 1 and s["first_oom_index"] == one[0]["index"] and s["first_oom_number"] == 1, s
print(f"whatif: OOM #1 at entry {one[0]['index']} as oom says (the retried one at entry {first} passed over)")
EOF
check "whatif --json names oom's #1 by its entry and number" "[ $? -eq 0 ]"
n1=$(py -c "import json; print([x['index'] for x in json.load(open('rto_oom.json'))[0]['ooms'] if x['number'] == 1][0])")
grep -q "^recorded (its own allocator) .* OOM #1 at entry $n1 (40.0 MiB requested; not counted: 2 retries)" rto_wi.txt &&
    grep -q "out of memory #1 on device 0 at entry $n1" rto_oom.txt && grep -q "the trace's OOM #1, as .oom. numbers it" rto_wi.txt &&
    ok "whatif's text says OOM #1 at oom's entry" || bad "whatif's recorded row: $(grep 'OOM' rto_wi.txt)"
# flamegraph --at oom draws oom's #1 (the state at its entry), not the retry before it
"$CMH" flamegraph --at oom --folded rto.cmh >rto_f1.txt 2>/dev/null
"$CMH" flamegraph --at "$n1" --folded rto.cmh >rto_fn.txt 2>/dev/null
"$CMH" flamegraph --at 12 --folded rto.cmh >rto_f12.txt 2>/dev/null
check "flamegraph --at oom is the state at oom's #1 (entry $n1)" 'cmp -s rto_f1.txt rto_fn.txt && ! cmp -s rto_f1.txt rto_f12.txt'
# oom's what-if line goes with #1, not with the retry before it
sed -n '/out of memory #1/,$p' rto_oom.txt | grep -q "allocator settings:" && ! sed -n '1,/out of memory #1/p' rto_oom.txt | grep -q "allocator settings:" &&
    ok "oom: the what-if line under OOM #1" || bad "oom: the what-if line under a retry: $(grep -n 'out of memory\|allocator settings' rto_oom.txt)"
# a driver-API program with its own allocator has no PYTORCH_CUDA_ALLOC_CONF to set (a stranger's
# trial): the what-if line says what PyTorch's allocator would do with the same requests
"$CMH" oom frag.cmh >frag_oom.txt 2>&1
grep -q "allocator settings: PyTorch's allocator, serving these requests, avoids it with" frag_oom.txt && ! grep -q PYTORCH_CUDA_ALLOC_CONF frag_oom.txt &&
    ok "oom: a C program's what-if line names no PyTorch setting to set" || bad "oom's what-if line for a C program: $(grep -A2 'allocator settings' frag_oom.txt)"

# frag's last OOM is oom's last event, numbered as oom numbers it: a retried one says so and has
# no number (rto's first OOM is a cudaMalloc retry that succeeded), a fatal one its #N
for rec in pool_oom.cmh rto.cmh frag.cmh; do
    "$CMH" oom --json "$rec" >lo_oom.json 2>&1
    "$CMH" frag --json "$rec" >lo_frag.json 2>&1
    "$CMH" frag "$rec" >lo_frag.txt 2>&1
    py - lo_oom.json lo_frag.json lo_frag.txt <<'EOF'
import json, sys
o, f = json.load(open(sys.argv[1]))[0], json.load(open(sys.argv[2]))[0]
txt = open(sys.argv[3]).read()
last, lo = o["ooms"][-1], f["last_oom"]
assert (lo["index"], lo["number"], lo["retried"]) == (last["index"], last["number"], last["retried"]), (lo, last)
head = [l for l in txt.splitlines() if "out-of-memory error" in l and "asked for" in l][0]
if last["number"]:
    assert f"error #{last['number']} (entry {last['index']}," in head and "retried" not in txt, head
else:
    assert "#" not in head and f"(entry {last['index']}," in head, head
    assert f"retried: not counted as an OOM (a cudaMalloc retry: the allocator asked again at entry {last['retry_index']}," in txt, txt
EOF
    check "frag: $rec's last OOM numbered as oom numbers it, a retry named one" "[ $? -eq 0 ]"
done
# the releasable line names what gives the memory back: a stream-ordered pool's cache goes back
# with cuMemPoolTrimTo, not empty_cache(); a caching allocator's empty segments with empty_cache()
for c in oom frag; do
    "$CMH" $c pool_oom.cmh | grep "^ *releasable  " >rel_pool.txt
    "$CMH" $c frag.cmh | grep "^ *releasable  " >rel_frag.txt
    grep -q "a stream-ordered pool's cache: cuMemPoolTrimTo gives it back, not empty_cache()" rel_pool.txt &&
        ! grep -q "empty_cache() gives it back" rel_pool.txt && grep -q " 0 B   (nothing empty_cache() or a pool trim could give back)" rel_frag.txt &&
        ok "$c: releasable names cuMemPoolTrimTo for a pool's cache, and nothing where there is nothing (frag_oom's end)" ||
        bad "$c: releasable label: $(cat rel_pool.txt rel_frag.txt)"
done
# an expandable segment unmaps the free pages of a segment still in use: releasable says that, not
# "empty segments" beside "0 empty" (a stranger's trial); with an empty segment too, it says both.
# PyTorch's large pool maps in pages of 20 MiB (kLargeBuffer), from the segment's start: of 60 MiB
# with 4 MiB live at 24 MiB, the pages [0, 20) and [40, 60) go back (40 MiB), not every free
# 2 MiB (56 MiB: the figure whatif's model could not give back)
py - <<'EOF'
import pickle
M, A = 1 << 20, 0x7f0000000000
fr = [{"filename": "/proj/train.py", "line": 9, "name": "step"}]
def seg(addr, size, blocks, exp):
    return {"device": 0, "address": addr, "total_size": size, "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
            "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"), "requested_size": 0, "stream": 0,
            "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": exp, "frames": [], "blocks": blocks}
blocks = [{"address": A, "size": 24 * M, "requested_size": 0, "state": "inactive", "frames": []},
          {"address": A + 24 * M, "size": 4 * M, "requested_size": 4 * M, "state": "active_allocated", "frames": fr},
          {"address": A + 28 * M, "size": 32 * M, "requested_size": 0, "state": "inactive", "frames": []}]
tr = [{"action": "segment_map", "addr": A, "size": 60 * M, "stream": 0, "time_us": 1, "frames": fr},
      {"action": "alloc", "addr": A + 24 * M, "size": 4 * M, "stream": 0, "time_us": 2, "frames": fr},
      {"action": "oom", "addr": 0, "device_free": 0, "size": 64 * M, "stream": 0, "time_us": 3, "frames": fr}]
pickle.dump({"segments": [seg(A, 60 * M, blocks, True)], "device_traces": [tr]}, open("exp_pages.pickle", "wb"), protocol=4)
empty = seg(A + 64 * M, 2 * M, [{"address": A + 64 * M, "size": 2 * M, "requested_size": 0, "state": "inactive", "frames": []}], False)
pickle.dump({"segments": [seg(A, 60 * M, blocks, True), empty], "device_traces": [[]]}, open("exp_pages2.pickle", "wb"), protocol=4)
EOF
"$CMH" frag exp_pages.pickle | grep "^ *releasable  " >rel_exp.txt
"$CMH" oom exp_pages.pickle | grep "^ *releasable  " >>rel_exp.txt
"$CMH" frag exp_pages2.pickle | grep "^ *releasable  " >>rel_exp.txt
[ "$(grep -c "40.0 MiB   (expandable segments' free pages: empty_cache() unmaps them)" rel_exp.txt)" = 2 ] &&
    grep -q "42.0 MiB   (empty segments and expandable segments' free pages: empty_cache() gives it back)" rel_exp.txt &&
    ok "frag and oom: an expandable segment's whole 20 MiB pages, named as such, beside an empty segment's" ||
    bad "releasable of expandable pages: $(cat rel_exp.txt)"

# The memviz export of a retried OOM: PyTorch writes an 'oom' entry only once the allocation
# finally fails, so its trace has the fatal OOM alone (MemoryViz.js drew an OOM the program never
# had); the retried one travels aside and reads back: oom, trace and the export's note agree.
"$CMH" export retry.cmh -o retry.pickle 2>retry.err || bad "export of retry.cmh failed: $(cat retry.err)"
check "export: the pickle's trace holds only the fatal OOM, the retried one aside" "py - <<'PY'
import pickle, sys
p = pickle.load(open('retry.pickle', 'rb'))
acts = [e['action'] for e in p['device_traces'][0]]
aside = p['cumemhist'].get('retried_ooms', [])
print(acts.count('oom'), 'oom entries,', len(aside), 'aside', [(a[0], a[1], a[3]) for a in aside])
sys.exit(not (acts.count('oom') == 1 and acts[-1] == 'oom' and len(aside) == 1 and aside[0][3] == 32 << 20))
PY"
"$CMH" oom retry.pickle >retry.pk.txt 2>&1
check "oom on the export reads the retry back: same counts, same entry numbers" \
    "grep -q 'device 0: 1 out-of-memory error the program saw, and 1 more that the allocator retried' retry.pk.txt && grep -q 'out of memory #1 on device 0 at entry 10' retry.pk.txt && grep -q 'out of memory on device 0 at entry 6, .*retried' retry.pk.txt"
check "trace prints memory_viz's one OOM for the record and for its export" \
    "[ \"\$('$CMH' trace retry.cmh 2>/dev/null | grep -c OutOfMemoryError)\" = 1 ] && [ \"\$('$CMH' trace retry.pickle 2>/dev/null | grep -c OutOfMemoryError)\" = 1 ]"
check "export's note counts the pickle's entries without the retried OOM (21)" "grep -q \"are the pickle's 21\" retry.err"

finish
