#!/bin/sh
# vmm_kind_test.sh BUILD_DIR SOURCE_DIR - cuMemCreate memory that is not PyTorch's
# (tests/vmm_kind.c, beside a 100 MiB context of the fake driver's):
#  - a library's own VMM allocator (as NCCL's ncclCuMemAlloc: 194 maps, 388 MiB, on an H200):
#    frag called its ranges "expandable segments" that memory_summary() leaves out of its rows.
#    Now they are other callers' cuMemMap ranges, by owner as owners names them, in text and
#    --json, and the expandable-segment note is not printed for them.
#  - a 64 MiB handle made, 16 MiB of cuMemAlloc, then 32 MiB of the handle mapped: owners' peak
#    was reserved's (the map: 64 MiB recorded, 164 in use) where the driver charged 180 MiB at
#    the cuMemAlloc (its physical peak, which `peak` gives).  Now owners' peak is the physical
#    one where the two differ, and says so and where reserved peaked (text, --json peak_of).
#  - an 8 MiB handle mapped, unmapped, 16 MiB of cuMemAlloc, then released; and one made, 16 MiB
#    of cuMemAlloc, released never mapped: the record held no cuMemRelease, so the first counted
#    until its unmap and the second not at all: peak physical 16 MiB where the driver charged 24.
#    Now the record keeps each release (.cmh vmm_released, the flight record's type 18, the
#    memviz pickle's cumemhist.vmm_released) and a handle counts from its making to its release,
#    in peak, owners, and the same from the exit dump, a recovered record and the pickle.
#  - a handle made, mapped and unmapped each marked step, never released (a forgotten
#    cuMemRelease): leaks listed '80.0 MiB in 10 handles ... no site grows' and --fail-on-leak
#    exited 0; diff of 10 against 30 steps read 0 B / +0.0% on every row and
#    --fail-if-peak-grows passed (80 MiB held against 240).  Now leaks judges the held handles
#    by site over the steps as blocks (growing, +8.0 MiB per step, exit 3), the same steps with
#    each handle released are no leak, and diff has physical rows that the gate judges.
TEST=vmm_kind . "$(dirname "$0")/testlib.sh"
M=1048576

rec() { # rec NAME MODE: record vmm_kind MODE as NAME.cmh, its output in NAME.out
    env FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o "$1.cmh" -- "$B/tests/vmm_kind" $2 >"$1.out" 2>"$1.err"
    check "vmm_kind $2 ran whole ($(cat "$1.err"))" "[ ! -s $1.err ] && grep -q '^end ' $1.out"
}

rec lib lib
"$CMH" frag lib.cmh >lib.frag.txt 2>&1
"$CMH" frag --json lib.cmh >lib.frag.json 2>&1
check "lib: frag names the 3 ranges another caller's cuMemMap, by owner, not expandable segments: $(grep -A2 'cuMemMap ranges' lib.frag.txt | tr -s ' ')" \
    "grep -q '^note: 3 segments are other callers. cuMemMap ranges, not PyTorch.s expandable segments' lib.frag.txt &&
     grep -q '^ *6.0 MiB  program (vmm_kind) (3 ranges)' lib.frag.txt && ! grep -q 'expandable segments neither' lib.frag.txt &&
     [ \$(grep -c '(cuMemMap: program (vmm_kind))' lib.frag.txt) = 3 ]"
py - lib.frag.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))[0]
v = d["vmm_ranges"]
assert v == {"segments": 3, "reserved": 6 << 20, "free": 0, "owners": [{"owner": "program (vmm_kind)", "segments": 3, "reserved": 6 << 20}]}, v
assert d["expandable_segments"] == 0, d["expandable_segments"]
segs = [s for s in d["segments"] if s["vmm_owner"]]
assert len(segs) == 3 and not any(s["expandable"] for s in d["segments"]), d["segments"]
PY
check "lib: frag --json: vmm_ranges by owner, no expandable segment" "[ $? -eq 0 ]"
"$CMH" owners --json lib.cmh >lib.owners.json 2>&1
py - lib.owners.json <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
assert [r["bytes"] for r in end["rows"] if r["owner"] == "program (vmm_kind)"] == [10 << 20], end["rows"]
PY
check "lib: owners' end: the program's 10 MiB (the 3 ranges and the cuMemAlloc), frag's owner name" "[ $? -eq 0 ]"
rm -f lib.html
"$CMH" report lib.cmh -o lib.html >/dev/null 2>&1
check "lib: the report's segment table tags them as frag does, none expandable" \
    "[ \$(grep -o '(cuMemMap: program (vmm_kind))' lib.html | wc -l) = 3 ] && ! grep -q '(expandable)' lib.html"

rec phys phys
"$CMH" owners phys.cmh >phys.owners.txt 2>&1
"$CMH" owners --json phys.cmh >phys.owners.json 2>&1
"$CMH" peak --json phys.cmh >phys.peak.json 2>&1
py - phys <<'PY'
import json, sys
n = sys.argv[1]
drv = dict(l.split() for l in open(n + ".out"))
o = json.load(open(n + ".owners.json"))[0]
p = json.load(open(n + ".peak.json"))[0]
pk = [m for m in o["moments"] if m["moment"] == "peak"][0]
assert pk["used"] == int(drv["peak"]), (pk["used"], drv)
assert pk["peak_of"] == "physical" and pk["index"] == p["peak_physical"]["index"], (pk, p["peak_physical"])
assert pk["reserved_peak"]["index"] == p["peak_reserved"]["index"] and pk["reserved_peak"]["bytes"] == 32 << 20, pk["reserved_peak"]
assert [r["bytes"] >> 20 for r in pk["rows"] if r["kind"] == "vmm_unmapped"] == [64], pk["rows"]
PY
check "phys: owners' peak is the physical peak, the driver's used memory then ($(grep -m1 'peak' phys.owners.txt | cut -d' ' -f3-))" \
    "[ $? -eq 0 ] && grep -q 'device 0, peak physical (entry 0' phys.owners.txt && grep -q 'reserved (the mapped ranges) peaked at entry 2' phys.owners.txt"

for m in late unmapped; do
    rec $m $m
    env FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o ${m}k.cmh -- "$B/tests/vmm_kind" $m kill >${m}k.out 2>${m}k.err
    "$CMH" export $m.cmh -o $m.pickle >/dev/null 2>&1
    for f in $m.cmh ${m}k.cmh $m.pickle; do
        n=${f%.cmh}
        "$CMH" owners --json $f >$n.owners.json 2>&1
        "$CMH" peak --json $f >$n.peak.json 2>&1
    done
    py - $m $M <<'PY'
import json, sys
m, M = sys.argv[1], int(sys.argv[2])
drv = dict(l.split() for l in open(m + ".out"))
def figs(n):
    p = json.load(open(n + ".peak.json"))[0]
    o = json.load(open(n + ".owners.json"))[0]
    pk = [x for x in o["moments"] if x["moment"] == "peak"][0]
    held = sum(r["bytes"] for r in pk["rows"] if r["kind"] == "vmm_unmapped")
    return p["peak_physical"] and p["peak_physical"]["bytes"], pk["used"], held
a = figs(m)
assert a == (24 * M, int(drv["peak"]), 8 * M), (a, drv)
assert figs(m + "k") == a, ("recovered", figs(m + "k"), a)
assert figs(m + ".pickle") == a, ("pickle", figs(m + ".pickle"), a)
PY
    check "$m: the handle counts until its cuMemRelease: physical peak 24 MiB, owners' peak the driver's used memory, the same recovered and from the pickle" "[ $? -eq 0 ]"
done

# a handle leak over marked steps (cuMemRelease forgotten): growing, as a block leak is
rec leak leak
rec leak30 leak30
rec release release
"$CMH" leaks leak.cmh --fail-on-leak >leak.leaks.txt 2>&1
rc=$?
check "leak: the held handles' site grows, +8.0 MiB per step, and --fail-on-leak exits 3 (exit $rc: $(grep -A2 'cuMemCreate site' leak.leaks.txt | tail -1 | tr -s ' '); $(tail -1 leak.leaks.txt))" \
    "[ $rc -eq 3 ] && grep -q '^ *80.0 MiB  *10  make_handle (.*vmm_prog.h:' leak.leaks.txt &&
     grep -q '^ *growing: +8.0 MiB per step over the last 9 steps' leak.leaks.txt && grep -q '^1 site grows from step to step' leak.leaks.txt"
"$CMH" leaks --json leak.cmh >leak.leaks.json 2>&1
py - leak.leaks.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))[0]
v = d["vmm_unmapped"]["sites"]
assert d["leaking_sites"] == 1 and len(v) == 1 and v[0]["verdict"] == "growing" and v[0]["rate_per_step"] == 8 << 20, (d["leaking_sites"], v)
PY
check "leak: --json gives the handles' site growing at 8 MiB a step, one leaking site" "[ $? -eq 0 ]"
"$CMH" leaks release.cmh --fail-on-leak >release.leaks.txt 2>&1
rc=$?
check "release: each handle released after its unmap is no leak, exit 0 (exit $rc: $(tail -1 release.leaks.txt))" \
    "[ $rc -eq 0 ] && ! grep -q 'grows from step' release.leaks.txt && ! grep -q 'cuMemCreate site' release.leaks.txt"
"$CMH" diff leak.cmh leak30.cmh --fail-if-peak-grows 5 >leak.diff.txt 2>&1
rc=$?
check "diff 10 against 30 steps: physical rows 80 -> 240 MiB, the gate fails on the physical peak (exit $rc: $(grep physical leak.diff.txt | tr -s ' ' | tr '\n' ';'))" \
    "[ $rc -eq 3 ] && grep -q '^peak physical  *80.0 MiB  *240.0 MiB  *+160.0 MiB  *+200.0%' leak.diff.txt &&
     grep -q '^physical at the end  *80.0 MiB  *240.0 MiB' leak.diff.txt && grep -q '^peak physical grew by 200.0% (limit 5.0%' leak.diff.txt"
finish
