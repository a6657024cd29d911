#!/bin/sh
# roundtrip_test.sh BUILD_DIR SOURCE_DIR [PYTORCH_FIXTURES] - a snapshot exported for memory_viz
# reads back as the snapshot it came from: every report (summary, peak, leaks, frag, owners, oom)
# prints the same on the export as on the original, and the export's times never run backwards.
# Before: a PyTorch pickle whose trace leaves blocks live that its final segments show freed
# (transformer_nuggets' mini snapshot: 48 such) gained an invented free_requested/free_completed
# per block after the last entry, timed as its alloc (+1.132 s back to +0.000002 s); reading the
# export back kept them, so Non-releasable memory read 24576 KiB for 26558 KiB, peak counted 98
# entries for 50 and owners' end moved to "entry 97, +0.000s".
# Records (.cmh) too: the export lost the cuMemGetInfo samples and the dump's time, so owners of
# the pickle said "total recorded (no cuMemGetInfo sample: nothing says what the record misses)"
# where the record's said "0 B ... not recorded (CUDA context, other processes)" and "total = the
# device's used memory", and its end moved (+5.788s for +5.823s).
TEST=roundtrip . "$(dirname "$0")/testlib.sh"
PT=${3:-}
# fresh records on the fake driver: an OOM (samples at the first allocation and at the OOM), a leak
"$CMH" record -q -o oom.cmh -- "$B/samples/oom_demo" >/dev/null 2>&1
"$CMH" record -q -o leaky.cmh -- "$B/samples/leaky" 5 >/dev/null 2>&1
check "the fresh records were written, with cuMemGetInfo samples" \
    "'$CMH' owners oom.cmh 2>/dev/null | grep -q 'the device had .* in use' && [ -s leaky.cmh ]"
# ... and a record's cuMemCreate handles (tests/vmm_phys.c): the export lost which handle each map
# mapped and the handles held mapped nowhere, so owners of the pickle counted a handle mapped
# twice twice (alias: 8 MiB more in use than the driver said) and the part of a handle mapped
# nowhere 'not recorded' (part), and peak lost its 'peak physical'.  (vmm_phys spare is
# vmm_pickle_test's: its peak shows a site's stack by the lowest id among stacks of equal bytes,
# which the pickle numbers otherwise, so its 'at' lines may differ)
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o vmmalias.cmh -- "$B/tests/vmm_phys" alias >/dev/null 2>&1
FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o vmmpart.cmh -- "$B/tests/vmm_phys" part >/dev/null 2>&1
check "the VMM records were written, with their handles" \
    "'$CMH' peak vmmalias.cmh 2>/dev/null | grep -q '^peak physical' && '$CMH' peak vmmpart.cmh 2>/dev/null | grep -q '^peak physical: *32.0 MiB'"
# ... and every report's first lines: a rank's record ("pid 28318 (rank 2 of 4)" read back as
# "pid 28318") and how a killed process ended ("the process ended without its exit dump ...", gone)
cp "$F/flight/killed-150.flight" killed.flight # (recover removes the flight record it read)
"$CMH" recover -o killed.cmh killed.flight >/dev/null 2>&1
check "the recovered record says how the process ended" "'$CMH' summary killed.cmh 2>/dev/null | grep -q '^killed.cmh: the process ended'"
set -- "$F"/h200/*.pickle "$F"/h200b/*.pickle "$F"/h200c/*.pickle "$F"/h200/*.cmh "$F"/memviz/*.cmh "$T/oom.cmh" "$T/leaky.cmh" \
    "$T/killed.cmh" "$F/fuzz/process-rank.cmh" "$T/vmmalias.cmh" "$T/vmmpart.cmh"
if [ -n "$PT" ] && [ -d "$PT" ]; then
    set -- "$PT"/*.pickle "$@"
else
    echo "note: no ../shared/fixtures/pytorch: only the H200 pickles are exported"
fi
for f in "$@"; do
    n=$(basename "$f")
    if ! "$CMH" export "$f" -o "$n.rt.pickle" 2>err; then
        bad "$n: export failed: $(cat err)"
        continue
    fi
    for c in summary peak leaks frag owners oom; do
        "$CMH" $c "$f" 2>/dev/null | sed "s#$f#FILE#g" >a.txt
        "$CMH" $c "$n.rt.pickle" 2>/dev/null | sed "s#$n.rt.pickle#FILE#g" >b.txt
        check "$n: $c of the export reads as $c of the original" "cmp -s a.txt b.txt || { diff a.txt b.txt | head -8; false; }"
    done
    case $f in *.cmh) continue ;; esac
    check "$n: the export's times never run backwards where the original's do not" "py - '$f' '$n.rt.pickle' <<'PY'
import pickle, sys
a, b = (pickle.load(open(p, 'rb')) for p in sys.argv[1:3])
bad = 0
for d, (ta, tb) in enumerate(zip(a.get('device_traces', []), b.get('device_traces', []))):
    def back(t):
        ts = [e['time_us'] for e in t if 'time_us' in e]
        return [i for i in range(len(ts) - 1) if ts[i + 1] < ts[i]]
    if not back(ta) and back(tb):
        print('device', d, 'time runs backwards after entry', back(tb)[0], 'of', len(tb))
        bad = 1
sys.exit(bad)
PY"
done
finish
