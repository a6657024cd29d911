#!/bin/sh
# vmm_phys_test.sh BUILD_DIR SOURCE_DIR - owners' total is the driver's used memory, and peak's
# physical figure the driver's, where the ranges a record shows are not the memory in use
# (tests/vmm_phys.c, beside a 100 MiB context of the fake driver's):
#  - one 8 MiB cuMemCreate handle mapped at two addresses: owners said the device had 16 MiB
#    more in use than the context, peak 'peak allocated: 16.0 MiB' and nothing else; the driver
#    said 8. Now owners counts the handle once and peak says 'peak physical' 8 MiB (its
#    reserved, the ranges, stays 16 MiB).
#  - a 32 MiB handle of which 4 MiB is mapped: owners called the other 28 MiB 'not recorded
#    (CUDA context, other processes)'; now they are the program's, its cuMemCreate's.
#  - four 2 MiB handles mapped, one unmapped and kept, then a 3 MiB cuMemAlloc (a stranger's
#    vmm.c): at the peak owners called the kept 2 MiB 'not recorded (CUDA context, other
#    processes)', at the end the same 2 MiB its own; peak --json had peak_physical null for the
#    11 MiB the driver charged at the peak (reserved 9).  Now every moment has the row (text,
#    --json, report) and the physical peak counts it.
#  - a 64 MiB handle made, 16 MiB of cuMemAlloc, then the handle mapped (32 MiB of it): the
#    driver charged 80 MiB at the cuMemAlloc, peak's physical peak said 64 MiB at the map (it
#    counted a handle from its first map, owners from its making).  Now 80, in peak (text and
#    --json), summary and frag.
#  - a 16 MiB handle mapped, 4 MiB of cuMemAlloc (the peak), the handle unmapped and kept, then
#    SIGKILL: the record recovered from the flight record had no vmm_maps rows (the journal kept
#    none), so the held handle counted from its making and its map's range too: peak physical
#    36 MiB where the exit dump of the same program says 20, owners' peak 16 MiB of 'physical
#    memory made with cuMemCreate, not mapped' beside the mapped 16.  Now the journal keeps the
#    rows and the recovered record reads as the exit dump (peak, owners).
#  - 64 MiB of managed memory off the device (FAKECUDA_MANAGED_OFFDEVICE=1) beside 8 MiB: owners
#    said 'the device had 72.0 MiB ... in use', total = the device's used memory, where the driver
#    said 8 MiB (+ the context); now managed memory is its own row, of what the sample leaves.
TEST=vmm_phys . "$(dirname "$0")/testlib.sh"
M=1048576
CTX=100M

rec() { # rec NAME "MODE..." [ENV...]: record vmm_phys MODE as NAME.cmh, its output in NAME.out
    n=$1 m=$2
    shift 2
    env FAKECUDA_CONTEXT=$CTX FAKECUDA_CAPACITY=1G "$@" "$CMH" record -q -o "$n.cmh" -- "$B/tests/vmm_phys" $m >"$n.out" 2>"$n.err"
    check "vmm_phys $m ran whole ($(cat "$n.err"))" "[ ! -s $n.err ] && grep -q '^end ' $n.out"
    "$CMH" owners --json "$n.cmh" >"$n.owners.json" 2>&1
    "$CMH" owners "$n.cmh" >"$n.owners.txt" 2>&1
    "$CMH" peak --json "$n.cmh" >"$n.peak.json" 2>&1
}

# owners' every moment: the rows sum to used; the peak's and the end's used are the driver's
totals() { # totals NAME
    py - "$1" <<'PY'
import json, sys
n = sys.argv[1]
drv = dict(l.split() for l in open(n + ".out"))
o = json.load(open(n + ".owners.json"))[0]
ms = {m["moment"]: m for m in o["moments"]}
for m in o["moments"]:
    assert m["used"] is not None and m["used"] == sum(r["bytes"] for r in m["rows"]), m
assert ms["end"]["used"] == int(drv["end"]), (ms["end"], drv)
assert ms["peak"]["used"] == int(drv["peak"]), (ms["peak"], drv)
PY
}

rows() { # rows NAME MOMENT KIND...: the bytes of each kind's rows at the moment, in MiB
    n=$1 m=$2
    shift 2
    py - "$n" "$m" "$@" <<'PY'
import json, sys
o = json.load(open(sys.argv[1] + ".owners.json"))[0]
m = [x for x in o["moments"] if x["moment"] == sys.argv[2]][0]
print(" ".join(str(sum(r["bytes"] for r in m["rows"] if r["kind"] == k) // 2**20) for k in sys.argv[3:]))
PY
}

rec alias alias
check "alias: owners' totals are the driver's used memory at the peak and the end ($(totals alias 2>&1 | tail -1))" 'totals alias'
check "alias: at the peak the program holds 8 MiB (one handle), the context 100 MiB ($(rows alias peak program unexplained))" \
    '[ "$(rows alias peak program unexplained)" = "8 100" ]'
check "alias: peak's physical peak is 8 MiB, its reserved (the ranges) 16 MiB" 'py - <<PY
import json
p = json.load(open("alias.peak.json"))[0]
assert p["peak_physical"]["bytes"] == 8 * $M and p["peak_reserved"]["bytes"] == 16 * $M, p
assert p["end"]["physical"] == 8 * $M, p["end"]
PY'
"$CMH" peak alias.cmh >alias.peak.txt 2>&1
# owners' heading gave 'allocated peaked here too, at 16.0 MiB' under '8.0 MiB recorded' with no word of why
check "alias: owners' peak says why allocated (16 MiB) is above its rows ($(grep -o 'allocated peaked[^)]*' alias.owners.txt | head -1))" \
    "grep -q 'allocated peaked here too, at 16.0 MiB, counting each mapping of a cuMemCreate handle' alias.owners.txt"
check "alias: peak's text says 'peak physical:  8.0 MiB'" "grep -q '^peak physical:  8.0 MiB' alias.peak.txt"

rec part part
check "part: owners' totals are the driver's used memory at the peak and the end ($(totals part 2>&1 | tail -1))" 'totals part'
check "part: the whole 32 MiB handle is the program's, the context alone not recorded ($(rows part end program unexplained))" \
    '[ "$(rows part end program unexplained)" = "32 100" ] && [ "$(rows part peak program unexplained)" = "32 100" ]'
"$CMH" summary --json part.cmh >part.summary.json 2>&1
"$CMH" frag --json part.cmh >part.frag.json 2>&1
"$CMH" frag part.cmh >part.frag.txt 2>&1
check "part: peak, summary and frag say 32 MiB physical (4 MiB reserved)" 'py - <<PY
import json
p = json.load(open("part.peak.json"))[0]
assert p["peak_physical"]["bytes"] == 32 * $M and p["peak_reserved"]["bytes"] == 4 * $M, p
for f in ("part.summary.json", "part.frag.json"):
    d = json.load(open(f))[0]
    assert d["physical"] == {"end": 32 * $M, "peak": 32 * $M}, (f, d.get("physical"))
PY' && grep -q "note: device memory as the driver charges it, each cuMemCreate handle whole and once: 32.0 MiB at the end" part.frag.txt

rec kept kept
check "kept: owners' totals are the driver's used memory at the peak and the end ($(totals kept 2>&1 | tail -1))" 'totals kept'
check "kept: the kept 2 MiB is the held handles' row at the peak as at the end, the context alone not recorded ($(rows kept peak program vmm_unmapped unexplained); $(rows kept end program vmm_unmapped unexplained))" \
    '[ "$(rows kept peak program vmm_unmapped unexplained)" = "9 2 100" ] && [ "$(rows kept end program vmm_unmapped unexplained)" = "6 2 100" ]'
check "kept: owners' text and the report's table say it at the peak" "py - <<'PY'
import re
t = open('kept.owners.txt').read().split('at the end (')[0]
assert re.search(r'2\.0 MiB +[0-9.]+% +1  physical memory made with cuMemCreate, not mapped', t), t
assert re.search(r'100\.0 MiB +[0-9.]+% +-  not recorded', t), t
PY
'$CMH' report --static -o kept.html kept.cmh 2>/dev/null && py - <<'PY'
import re
h = open('kept.html').read()
p = h[h.index('Who held the memory at the reserved peak'):]
p = re.sub(r'<[^>]+>', '|', p[:p.index('</table>')])
assert re.search(r'physical memory made with cuMemCreate, not mapped\|+2\.0 MiB', p), p
assert re.search(r'not recorded \(CUDA context, other processes\) \|+\([^)]*\)\|+100\.0 MiB', p), p
PY"
"$CMH" peak kept.cmh >kept.peak.txt 2>&1
check "kept: peak's physical peak is the driver's 11 MiB at the cuMemAlloc, 8 MiB at the end (reserved 9 and 6), text and --json ($(grep '^peak physical' kept.peak.txt))" 'py - <<PY
import json
p = json.load(open("kept.peak.json"))[0]
assert p["peak_physical"] is not None and p["peak_physical"]["bytes"] == 11 * $M and p["peak_reserved"]["bytes"] == 9 * $M, p
assert p["peak_physical"]["index"] == p["peak_reserved"]["index"], p
assert p["end"]["physical"] == 8 * $M and p["end"]["reserved"] == 6 * $M, p["end"]
PY' && grep -q '^peak physical:  11.0 MiB' kept.peak.txt && grep -q '^at the end: .*, physical 8.0 MiB$' kept.peak.txt

rec notyet notyet
"$CMH" peak notyet.cmh >notyet.peak.txt 2>&1
"$CMH" summary --json notyet.cmh >notyet.summary.json 2>&1
"$CMH" frag --json notyet.cmh >notyet.frag.json 2>&1
check "notyet: the physical peak is the driver's 80 MiB, the handle made and not mapped yet beside the cuMemAlloc, in peak, summary and frag ($(grep '^peak physical' notyet.peak.txt))" "py - <<PY
import json
peak = int(dict(l.split() for l in open('notyet.out'))['peak']) - 100 * $M
assert peak == 80 * $M, peak
p = json.load(open('notyet.peak.json'))[0]
assert p['peak_physical'] is not None and p['peak_physical']['bytes'] == peak and p['peak_physical']['index'] == 0, p['peak_physical']
assert p['peak_reserved']['bytes'] == 32 * $M and p['end']['physical'] == 0, p
for f in ('notyet.summary.json', 'notyet.frag.json'):
    d = json.load(open(f))[0]
    assert d['physical'] == {'end': 0, 'peak': peak}, (f, d.get('physical'))
o = json.load(open('notyet.owners.json'))[0]
for m in o['moments']:
    assert m['used'] == sum(r['bytes'] for r in m['rows']), m
PY
grep -q '^peak physical:  80.0 MiB' notyet.peak.txt"

rec held held
env FAKECUDA_CONTEXT=$CTX FAKECUDA_CAPACITY=1G "$CMH" record -q -o heldk.cmh -- "$B/tests/vmm_phys" held kill >heldk.out 2>heldk.err
check "held kill: the program was killed and its record recovered ($(grep -o 'killed by SIGKILL[^(]*(recovered[^)]*)' heldk.err | head -1))" \
    "grep -q 'recovered from its flight record' heldk.err 2>/dev/null || '$CMH' peak heldk.cmh 2>&1 | grep -q 'recovered from its flight record'"
"$CMH" owners --json heldk.cmh >heldk.owners.json 2>&1
"$CMH" peak --json heldk.cmh >heldk.peak.json 2>&1
check "held kill: the recovered record's physical peak and owners' rows are the exit dump's (20 MiB; 16 MiB held at the end)" "py - <<PY
import json
def figs(n):
    p = json.load(open(n + '.peak.json'))[0]
    o = json.load(open(n + '.owners.json'))[0]
    rows = {m['moment']: sorted((r['kind'], r['bytes']) for r in m['rows']) for m in o['moments']}
    return p['peak_physical'] and p['peak_physical']['bytes'], p['end']['physical'], rows
a, b = figs('held'), figs('heldk')
assert a == b, (a, b)
assert a[0] == 20 * $M and a[1] == 16 * $M, a
PY"

rec off managed FAKECUDA_MANAGED_OFFDEVICE=1
check "managed off the device: owners' totals are the driver's used memory ($(totals off 2>&1 | tail -1))" 'totals off'
check "managed off the device: its row holds none of it, the program 8 MiB, the context 100 MiB ($(rows off end managed program unexplained))" \
    '[ "$(rows off end managed program unexplained)" = "0 8 100" ] &&
     py -c "import json; m = json.load(open(\"off.owners.json\"))[0][\"moments\"]; assert all(x[\"managed_made\"] == 64 * $M for x in m), m"'
# the stranger's case: no context at all, 64 MiB managed off the device first, then 8 MiB (owners
# said 'the device had 72.0 MiB ... in use', total = the device's used memory, the driver 8 MiB)
rec off0 managed FAKECUDA_MANAGED_OFFDEVICE=1 FAKECUDA_CONTEXT=0
check "managed off the device, no context: owners' totals are the driver's 8 MiB ($(totals off0 2>&1 | tail -1); $(rows off0 end managed program unexplained))" \
    'totals off0 && [ "$(rows off0 end managed program unexplained)" = "0 8 0" ]'
check "managed off the device: the text labels the row and says it may be off the device" \
    "grep -q 'managed memory (cuMemAllocManaged; may be off the device: as far as the used figure shows)' off.owners.txt &&
     grep -q '64.0 MiB made with cuMemAllocManaged; the driver counts its pages as used only where they are on the device, so 0 B of it at most here' off.owners.txt &&
     ! grep -q 'the device had 172.0 MiB' off.owners.txt"
# the fake driver counts managed memory at once where it is on the device: the device's first
# sample (at the first allocation, the 8 MiB) has the context alone, the end's 64 MiB more, which
# is managed memory's row; the managed memory first, its sample has it, and it is taken for the
# context's (cuMemAllocManaged populates no page on a GPU): the totals hold either way
rec on "managed second"
check "managed on the device: owners' totals are the driver's ($(totals on 2>&1 | tail -1)), its row all 64 MiB ($(rows on end managed program unexplained))" \
    'totals on && [ "$(rows on end managed program unexplained)" = "64 8 100" ]'
rec onfirst managed
check "managed on the device, made first: owners' totals are the driver's ($(totals onfirst 2>&1 | tail -1))" 'totals onfirst'

# trace of a record reads as trace of its memory_viz export, its segment_map entries' frames too:
# they printed as recorded ('filename': 'vmm_phys', 'line': 0) where the export's said vmm_phys.c
"$CMH" trace alias.cmh >trace.cmh.txt 2>/dev/null
"$CMH" export -f memviz -o alias.pickle alias.cmh 2>/dev/null
"$CMH" trace alias.pickle >trace.pickle.txt 2>/dev/null
check "trace of the record is trace of its export ($(diff trace.cmh.txt trace.pickle.txt | head -3 | cut -c1-200))" \
    'grep -q "vmm_phys.c" trace.cmh.txt && cmp -s trace.cmh.txt trace.pickle.txt'
# --raw-frames: as recorded, the text of export --raw-frames's pickle
"$CMH" trace --raw-frames alias.cmh >raw.cmh.txt 2>/dev/null
"$CMH" export --raw-frames -f memviz -o raw.pickle alias.cmh 2>/dev/null
"$CMH" trace raw.pickle >raw.pickle.txt 2>/dev/null
check "trace --raw-frames is trace of export --raw-frames ($(diff raw.cmh.txt raw.pickle.txt | head -3 | cut -c1-200))" \
    '! grep -q "vmm_phys.c" raw.cmh.txt && cmp -s raw.cmh.txt raw.pickle.txt'
# libdw is loaded where there are frames to give lines (this record's binary is here), and not
# for --raw-frames, nor for a record whose frames all have lines already (lazylibs_test: not at startup)
"$CMH" symbolize -o sym.cmh alias.cmh 2>/dev/null
LD_DEBUG=libs "$CMH" trace alias.cmh 2>ld.txt >/dev/null
check "trace of a record with frames to resolve loads libdw" "grep 'calling init' ld.txt | grep -q libdw"
LD_DEBUG=libs "$CMH" trace --raw-frames alias.cmh 2>ld.txt >/dev/null
check "trace --raw-frames loads no libdw" "! grep 'calling init' ld.txt | grep -q libdw"
LD_DEBUG=libs "$CMH" trace sym.cmh 2>ld.txt >sym.txt
check "trace of a symbolized record loads no libdw, and prints its lines" "! grep 'calling init' ld.txt | grep -q libdw && grep -q vmm_phys.c sym.txt"
finish
