#!/bin/sh
# poolsegs_test.sh BUILD_DIR SOURCE_DIR - summary's GPU reserved segments for a private
# stream-ordered pool (tests/poolsegs.c), as PyTorch defines the row (memory_stats' `segment`:
# the reserved segments, counted while their memory is reserved, freed when it goes back to the
# driver: it moves with GPU reserved memory, docs/DEFINITIONS.md).  A pool with its release
# threshold at the most keeps the 12 MiB freed and serves the next three allocations from it:
# reserved 12 MiB made once, 0 B freed, so 3 segments made, 0 freed; summary read 3 current,
# 6 allocated, 3 freed (each pooled call a segment made or freed, beside 0 B of reserved freed).
# A pool with threshold 0 gives the 12 MiB back at the synchronize and makes it again: 6 made,
# 3 freed, 24 / 12 MiB.  The same from the record and from its memory_viz pickle, text and --json.
TEST=poolsegs . "$(dirname "$0")/testlib.sh"
export FAKECUDA_CAPACITY=1G
for m in keep trim; do
    "$CMH" record -q -o $m.cmh -- "$B/tests/poolsegs" $m >$m.out 2>&1
    check "poolsegs $m ran ($(cat $m.out))" "grep -q 'poolsegs: ran' $m.out"
    "$CMH" export -f memviz -o $m.pickle $m.cmh >/dev/null 2>&1
    for f in cmh pickle; do
        "$CMH" summary --json $m.$f >$m.$f.json 2>&1
        "$CMH" summary $m.$f 2>&1 | sed "s#$m\.$f#FILE#g" >$m.$f.txt
    done
done
# rows M: (reserved MiB, segments) as (current, peak, allocated, freed), from the record and the pickle
rows() {
    py - "$1" <<'PY'
import json, sys
for f in ("cmh", "pickle"):
    st = json.load(open(f"{sys.argv[1]}.{f}.json"))[0]["stats"]
    r, g = st["reserved_bytes.all"], st["segment.all"]
    print(f, tuple(r[k] >> 20 for k in ("current", "peak", "allocated", "freed")), tuple(g[k] for k in ("current", "peak", "allocated", "freed")))
PY
}
check "keep: 12 MiB reserved once and 3 segments made once, none freed ($(rows keep 2>&1 | tr '\n' ' '))" \
    '[ "$(rows keep)" = "cmh (12, 12, 12, 0) (3, 3, 3, 0)
pickle (12, 12, 12, 0) (3, 3, 3, 0)" ]'
check "trim: 12 MiB given back and made again, 3 segments freed and 6 made ($(rows trim 2>&1 | tr '\n' ' '))" \
    '[ "$(rows trim)" = "cmh (12, 12, 24, 12) (3, 3, 6, 3)
pickle (12, 12, 24, 12) (3, 3, 6, 3)" ]'
for m in keep trim; do
    check "$m: summary of the pickle reads as summary of the record" "cmp -s $m.cmh.txt $m.pickle.txt"
done
finish
