#!/bin/sh
# leak_refused_test.sh BUILD_DIR SOURCE_DIR - verdicts that once hung on the held bytes alone
# (tests/leak_refused.c, after a stranger's leakoom.c and dyn.c), each recorded 5 times: one verdict.
#  - a leak of 16 MiB a step that runs into the device's limit (1 GiB) at step 46 and keeps going:
#    its requests refused each step are growth it asked for.  It read 'stopped: grew +16.0 MiB per
#    step over steps 1-45, then flat for the last 55 steps', exit 6, and oom 'verdict: demand' 55
#    times, none 'driven by a leak', where the same program ending at its first refusal read growing.
#  - a workspace freed and made anew, larger, where a step needs more (one block live at a time):
#    a high-water mark, 'state', whatever sizes the seed drew (seed 1 read 'stopped: grew in 5 of
#    steps 3-39 ..., then flat for the last 1 step', exit 6; seeds 2 and 3 'state', exit 0; seed 5
#    'stopped: grew in 3 of steps 4-13 ..., then flat for the last 26 steps', exit 6; seed 9 'growing:
#    +238.8 KiB per step over the last 39 steps', exit 3).
#  - the same high-water mark kept in pieces (the growth kept beside the old): no 'stopped' said on
#    one flat step at the end (seed 1 read 'stopped ... then flat for the last 1 step', exit 6).
TEST=leak_refused . "$(dirname "$0")/testlib.sh"
P=$B/tests/leak_refused

# verdicts NAME ARGS...: a recording's `leaks --fail-on-leak` exit status and the line under its
# verdict, as one line appended to NAME.all
verdicts() {
    name=$1
    shift
    "$CMH" record -q -o "$name.cmh" -- "$P" "$@" >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak "$name.cmh" >"$name.txt" 2>&1
    rc=$?
    echo "rc $rc | $(grep -E '^        (growing|stopped|state)' "$name.txt")" >>"$name.all"
}

: >oom.all
for i in 1 2 3 4 5; do FAKECUDA_CAPACITY=1G verdicts oom oom; done
sort oom.all | uniq -c >oom.u
check "a leak kept going past its first refusal, 5 runs: growing +16.0 MiB per step over the last 99 steps counting 55 refused requests, exit 3 ($(tr -s ' ' <oom.u | tr '\n' '|'))" \
    "[ \$(wc -l <oom.u) -eq 1 ] && grep -q '^ *5 rc 3 |         growing: +16.0 MiB per step over the last 99 steps, counting 55 requests the driver refused (880.0 MiB, out of memory)\$' oom.u"
"$CMH" oom --all oom.cmh >oom.oom 2>&1  # (--all: each OOM its own section, not grouped as alike)
check "oom: each of the 55 OOMs driven by the leak ($(grep -c 'driven by a leak' oom.oom) of $(grep -c '^  verdict' oom.oom))" \
    "[ \$(grep -c '^  verdict: demand' oom.oom) -eq 55 ] && [ \$(grep -c '^  driven by a leak: allocated grew by 704.0 MiB over 99 steps at [a-z_]* (.*leak_refused.c:[0-9]*), which held 720.0 MiB at the error' oom.oom) -eq 55 ]"
"$CMH" leaks --json oom.cmh >oom.json 2>&1
check "leaks --json: the refused requests and their bytes" \
    "grep -q '\"refused_requests\": 55, \"refused_bytes\": 922746880' oom.json"
# the same program ending at its first refusal: growing, as it was
FAKECUDA_CAPACITY=1G verdicts exit exit
check "a leak ending at its first refusal: growing +16.0 MiB per step over the last 45 steps, exit 3 ($(cat exit.all))" \
    "grep -q '^rc 3 |         growing: +16.0 MiB per step over the last 45 steps\$' exit.all"

for run in workspace:1 workspace:2 workspace:3 workspace:5 workspace:9 highwater:1 highwater:2 highwater:3; do
    mode=${run%:*} seed=${run#*:}
    : >"$mode$seed.all"
    for i in 1 2 3 4 5; do verdicts "$mode$seed" "$mode" "$seed"; done
    sort "$mode$seed.all" | uniq -c >"$mode$seed.u"
    check "$mode seed $seed, 5 runs: state, exit 0 ($(tr -s ' ' <"$mode$seed.u" | tr '\n' '|'))" \
        "[ \$(wc -l <$mode$seed.u) -eq 1 ] && grep -q '^ *5 rc 0 | \$' $mode$seed.u"
done
finish
