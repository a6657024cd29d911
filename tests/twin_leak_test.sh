#!/bin/sh
# twin_leak_test.sh BUILD_DIR SOURCE_DIR - workers running one loop of one allocation a step, one
# keeping its blocks (tests/twin_leak.c; a stranger's three ctypes workers allocating 1 MiB at one
# line, w1 keeping its 30): the keeper's loop is one allocation repeated, no pattern of its own,
# and was found only where the race spread its allocations over half the record's time (by_pace):
# 'growing: +1.0 MiB per step over the last 29 steps of recording thread 2' in 1 run of 9, 'held,
# steps not found', exit 5, in the others.  Its steps are its allocations, the call the other
# workers' loops make once a step, whatever order the threads ran in: the same verdict in each.
# The conservative side: the keeper's 30 blocks from another call (a cache made back to back, of
# the loop's size, before its own loop) are no loop's: state, never growing.  (Where the keeper
# does nothing else its verdict still follows the timing: below, not checked.)
TEST=twin_leak . "$(dirname "$0")/testlib.sh"
P=$B/tests/twin_leak

# verdicts NAME N MODE: N recordings of MODE, each one's --fail-on-leak status and the line under
# the site's row, counted (NAME.u: 'COUNT LINE')
verdicts() {
    : >"$1.all"
    i=0
    while [ "$i" -lt "$2" ]; do
        "$CMH" record -q -o "$1$i.cmh" -- "$P" "$3" >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak "$1$i.cmh" >"$1.txt" 2>&1
        echo "rc $?" >>"$1.all"
        grep -E '^        (growing|stopped|state|held|rose|unjudged)' "$1.txt" | sed 's/(tid [0-9]*,/(tid N,/; s/ made within [^,;]*/ made within T/' >>"$1.all"
        i=$((i + 1))
    done
    sort "$1.all" | uniq -c >"$1.u"
}
GROW="growing: +1.0 MiB per step over the last 29 steps of recording thread [0-9] (tid N, 'w1')"
for mode in seq turns free; do
    verdicts $mode 3 $mode
    check "$mode: the keeper grows 1 MiB a step over its 30, exit 3, in 3 of 3 runs ($(tr -s ' ' <$mode.u | tr '\n' '|'))" \
        "[ \$(wc -l <$mode.u) -eq 2 ] && grep -q '^ *3 rc 3\$' $mode.u && grep -q \"^ *3         $GROW\\\$\" $mode.u"
done

verdicts cache 3 cache
check "the keeper's blocks from another call, back to back before its loop: state, exit 0, in 3 of 3 runs ($(tr -s ' ' <cache.u | tr '\n' '|'))" \
    "grep -q '^ *3 rc 0\$' cache.u && ! grep -q 'growing\|per step' cache.u && grep -q ' state  *fill_cache' cache.txt"
# Not checked here: the keeper ONLY filling that cache (`twin_leak only`) is an open defect. Its
# verdict follows the threads' timing: in an ASan build, 6 runs gave "unjudged ... they race" 4,
# "held, steps not found" 1 and "growing: +1.0 MiB per step over the last 10 steps" 1 (a false
# leak; "stopped", exit 6, in 1 of 3 in the clean-clone CI), where it should be growth not judged,
# exit 5, every run.  verdict6's rule does not apply to it (the cache's call is not the loop's):
# the judge of a thread with no loop of its own against the others' steps depends on whether the
# runs overlapped (leaks_raced()).  Reproduce: cumemhist record -o o.cmh -- tests/twin_leak only
finish
