#!/bin/sh
# vmm_halves_test.sh BUILD_DIR SOURCE_DIR - a cuMemCreate mapping given back in pieces
# (tests/vmm_halves.c, beside a 100 MiB context of the fake driver's): after the last unmap and
# the handle's release nothing is live, in every reading of the record and of its memory_viz
# pickle.  Before, a 4 MiB map unmapped in two halves replayed a 2 MiB block live from the trace's
# start: the first unmap freed the whole 4 MiB block at its address, the second found no block at
# its own, and the backward pass took it for a block made before the trace (peak allocated 6.0 MiB
# for 4, 'the trace begins mid-run: 2.0 MiB allocated'; 7.0 MiB for four 1 MiB pieces; 12.0 MiB for
# one handle mapped twice, 8 mapped).  The pickle's implied entries freed the 4 MiB block at the
# first half too, so memory_viz drew the second half live from the start, outside every segment.
TEST=vmm_halves . "$(dirname "$0")/testlib.sh"
M=1048576

rec() { # rec NAME [ARGS]: vmm_halves ARGS (NAME) recorded as NAME.cmh, exported as NAME.pickle, readings in NAME.*
    m=$1
    shift
    FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o "$m.cmh" -- "$B/tests/vmm_halves" ${*:-$m} >"$m.out" 2>"$m.err"
    check "vmm_halves ${*:-$m} ran whole ($(cat "$m.err"))" "[ ! -s $m.err ] && grep -q '^end ' $m.out"
    "$CMH" export -f memviz -o "$m.pickle" "$m.cmh" >/dev/null 2>&1
    for f in cmh pickle; do
        for c in summary peak leaks owners; do
            "$CMH" $c --json "$m.$f" >"$m.$f.$c.json" 2>/dev/null
            "$CMH" $c "$m.$f" 2>&1 | sed "s#$m\.$f#FILE#g" >"$m.$f.$c.txt"
        done
    done
}

# empty MODE MAPPED: nothing live at the end nor before the first entry, the allocated peak the
# bytes mapped at once, owners' rows the driver's used memory at the peak and the end; the same
# from the record and from its pickle
empty() {
    py - "$1" "$2" <<'PY'
import json, sys
m, mapped = sys.argv[1], int(sys.argv[2]) * 2**20
drv = dict(l.split() for l in open(m + ".out"))
bad = []
for f in ("cmh", "pickle"):
    j = lambda c: json.load(open(f"{m}.{f}.{c}.json"))[0]
    s, p, l, o = j("summary"), j("peak"), j("leaks"), j("owners")
    st = s["stats"]
    if st["allocated_bytes.all"]["current"] or st["allocation.all"]["current"]:
        bad.append(f"{f}: summary's allocated at the end {st['allocated_bytes.all']['current']}")
    if st["allocated_bytes.all"]["peak"] != mapped or st["allocated_bytes.all"]["allocated"] != mapped:
        bad.append(f"{f}: summary's allocated peak/total {st['allocated_bytes.all']['peak']}/{st['allocated_bytes.all']['allocated']}, not {mapped}")
    if s["before_first_entry"]["allocated"]:
        bad.append(f"{f}: summary's before the first entry {s['before_first_entry']}")
    if p["peak_allocated"]["bytes"] != mapped or p["end"]["allocated"]:
        bad.append(f"{f}: peak allocated {p['peak_allocated']['bytes']}, at the end {p['end']['allocated']}")
    if l["live_bytes"] or l["live_before_trace_bytes"]:
        bad.append(f"{f}: leaks live {l['live_bytes']}, before the trace {l['live_before_trace_bytes']}")
    ms = {x["moment"]: x for x in o["moments"]}
    for x in o["moments"]:
        if x["used"] is None or x["used"] != sum(r["bytes"] for r in x["rows"]):
            bad.append(f"{f}: owners' rows do not sum to used at {x['moment']}")
    if ms["end"]["used"] != int(drv["end"]) or ms["end"]["recorded"]:
        bad.append(f"{f}: owners at the end {ms['end']['used']} used, {ms['end']['recorded']} recorded; the driver {drv['end']}")
print("; ".join(bad[:4]) if bad else "empty")
sys.exit(1 if bad else 0)
PY
}

# counted MODE MAPS [LIVE]: the allocation counts are the program's cuMemMap calls (MAPS made, as
# many at once at the peak, LIVE of them live at the end), in summary, leaks and owners at the
# end, in the record and its pickle.  An unmap inside a map cut its block in two, counted as one
# more allocation: 8 MiB mapped and unmapped in its middle first read 'Allocations 2 2 2 2'
# (current, peak, total, freed) for one cuMemMap, the two pieces kept '4.0 MiB in 2 blocks'
counted() {
    py - "$1" "$2" "${3:-0}" <<'PY'
import json, sys
m, maps, live = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = []
for f in ("cmh", "pickle"):
    j = lambda c: json.load(open(f"{m}.{f}.{c}.json"))[0]
    a = j("summary")["stats"]["allocation.all"]
    if (a["allocated"], a["peak"], a["freed"], a["current"]) != (maps, maps, maps - live, live):
        bad.append(f"{f}: summary's allocations {a}, the program's {maps} maps, {live} live")
    l = j("leaks")
    if l["live_blocks"] != live or sum(s["blocks"] for s in l["sites"]) != live:
        bad.append(f"{f}: leaks' live blocks {l['live_blocks']}, the program's {live}")
    end = [x for x in j("owners")["moments"] if x["moment"] == "end"][0]
    if sum(r["allocations"] or 0 for r in end["rows"] if r["kind"] == "program") != live:
        bad.append(f"{f}: owners' allocations at the end {[(r['kind'], r['allocations']) for r in end['rows']]}")
print("; ".join(bad[:4]) if bad else "counted")
sys.exit(1 if bad else 0)
PY
}

for m in halves quarters reversed twice middle several; do
    rec $m
    mapped=4
    [ $m = twice ] || [ $m = middle ] && mapped=8
    [ $m = several ] && mapped=6
    maps=1
    [ $m = twice ] && maps=2
    [ $m = several ] && maps=3
    check "$m: the allocations are the program's $maps cuMemMap calls ($(counted $m $maps 2>&1 | tail -1))" "counted $m $maps"
    check "$m: nothing live after the last unmap, allocated peaked at the $mapped MiB mapped, in the record and its pickle ($(empty $m $mapped 2>&1 | tail -1))" "empty $m $mapped"
    for c in summary peak leaks owners; do
        check "$m: $c of the pickle reads as $c of the record" "cmp -s $m.cmh.$c.txt $m.pickle.$c.txt"
    done
    # memory_viz replays the pickle backwards: every block must lie in a mapped range (before, the
    # second half's implied free made it a block from the start, mapped nowhere before the map)
    check "$m: the pickle is one memory_viz replays ($(py "$SRC/tests/check_memviz.py" --ours $m.pickle 2>&1 | head -1))" \
        "py '$SRC/tests/check_memviz.py' --ours $m.pickle >/dev/null"
done
check "halves: no note of blocks before the first entry" "! grep -q 'trace begins mid-run' halves.cmh.summary.txt"
# the two pieces of 'middle' kept mapped to the end: one allocation live, one block ('4.0 MiB in 2
# blocks' before), the same from the pickle
rec midkept middle kept
check "middle kept: one cuMemMap, one allocation live at the end ($(counted midkept 1 1 2>&1 | tail -1))" "counted midkept 1 1"
check "middle kept: leaks of the pickle reads as leaks of the record" "cmp -s midkept.cmh.leaks.txt midkept.pickle.leaks.txt"

# A handle made before the device's first cuMemGetInfo sample (a cuMemAlloc's) and mapped after
# it: the sample's used bytes had it, and no row did, so the sample's 'not recorded' held it, and
# the peak, taking that figure as steady, counted it a second time once mapped (owners said the
# device had 142 MiB in use at the peak, the driver 126).  Now it is a row of its own where it is
# made and not mapped yet.  'early kept': the handle unmapped and held to the end (the record's
# vmm_unmapped): a moment that takes its figure from the end's sample got the end's unmapped
# handles back in 'not recorded', the one mapped there too (142 again).
# owned NAME: owners' rows sum to used at every moment, the peak's and the end's are the driver's
owned() {
    py - "$1" <<'PY'
import json, sys
m = sys.argv[1]
drv = dict(l.split() for l in open(m + ".out"))
bad = []
for f in ("cmh", "pickle"):
    o = json.load(open(f"{m}.{f}.owners.json"))[0]
    ms = {x["moment"]: x for x in o["moments"]}
    for x in o["moments"]:
        if x["used"] is None or x["used"] != sum(r["bytes"] for r in x["rows"]):
            bad.append(f"{f}: rows do not sum to used at {x['moment']}")
    for k in ("peak", "end"):
        if ms[k]["used"] != int(drv[k]):
            bad.append(f"{f}: {k} used {ms[k]['used'] / 2**20} MiB, the driver {int(drv[k]) / 2**20}")
print("; ".join(bad[:4]) if bad else "owned")
sys.exit(1 if bad else 0)
PY
}
rec early
check "early: owners' used is the driver's at the peak and the end, in the record and its pickle ($(owned early 2>&1 | tail -1))" 'owned early'
check "early: owners of the pickle reads as owners of the record" "cmp -s early.cmh.owners.txt early.pickle.owners.txt"
rec kept early kept
check "early kept: owners' used is the driver's at the peak and the end ($(owned kept 2>&1 | tail -1))" 'owned kept'
check "early kept: the end has the held handle's row" "grep -q '16.0 MiB .* 1  physical memory made with cuMemCreate, not mapped' kept.cmh.owners.txt"
finish
