#!/bin/sh
# dyn_steps_test.sh BUILD_DIR SOURCE_DIR - a training loop of dynamic shapes (tests/dyn_steps.c,
# after a stranger's dyn.c: 50 steps of 1-8 activations of random size, 1 MiB kept a step, no
# marks): its steps are never a count the loop does not have.  Either the true count (50, the
# kept block +1.0 MiB a step) or 'steps: unknown' and the over-time judgement; never an op that
# recurred by chance every few steps taken for the steps (dyn.c read 'steps: 5 ... (period 77
# entries)' and 'growing: +6.3 MiB per step over the last 4 steps').  The same verdict on every run.
TEST=dyn_steps . "$(dirname "$0")/testlib.sh"
P=$B/tests/dyn_steps

# verdicts NAME SEED WHERE [STEPS US]: a recording's `leaks --fail-on-leak` exit status, steps line
# and the line under its site's row, as one line appended to NAME.all
verdicts() {
    name=$1
    shift
    "$CMH" record -q -o "$name.cmh" -- "$P" "$@" >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak "$name.cmh" >"$name.txt" 2>&1
    rc=$?
    # (the time a site's blocks were made within is the clock's, not the verdict)
    echo "rc $rc | $(grep '^steps' "$name.txt" | sed 's/(period [0-9]* entries)/(period N entries)/') | $(grep -E '^        (growing|stopped|state|held)' "$name.txt" |
        sed -e 's/ made within [^,;]*/ made within T/' -e 's/ equal slices of the record ([^)]*)/ equal slices of the record (T)/')" >>"$name.all"
}

# --- the kept block made once a step, at its end (dyn.c: seed 0), first, or amid the activations ---
for where in end first mid; do
    : >"$where.all"
    for seed in 0 1 2 3 4 5; do verdicts "$where" $seed $where; done
    sort "$where.all" | uniq -c >"$where.u"
    check "kept $where of each step, 6 seeds: 'steps: 50', growing +1.0 MiB per step over the last 49 steps, exit 3, in 6 of 6 ($(tr -s ' ' <"$where.u" | tr '\n' '|'))" \
        "[ \$(wc -l <$where.u) -eq 1 ] && grep -q '^ *6 rc 3 | steps: 50 detected from the allocation pattern (period N entries) |         growing: +1.0 MiB per step over the last 49 steps\$' $where.u"
done
# dyn.c itself (seed 0, kept at the end) five times: the same verdict every run, in words and figures
: >again.all
for i in 1 2 3 4 5; do verdicts again 0 end; done
sort again.all | uniq -c >again.u
"$CMH" leaks --json again.cmh >again.json 2>&1
check "dyn.c five times: one verdict, 'steps: 50' ($(tr -s ' ' <again.u | tr '\n' '|'))" \
    "[ \$(wc -l <again.u) -eq 1 ] && grep -q '^ *5 rc 3 | steps: 50 ' again.u"
check "leaks --json: steps count 50, the site's rate 1048576 bytes a step over 49 steps" \
    "grep -q '\"steps\": {\"count\": 50, \"source\": \"pattern\"' again.json && grep -q '\"rate_bytes_per_step\": 1048576, ' again.json &&
     grep -q '\"growth_steps\": 49, ' again.json"

# --- a kept block of 1-4 MiB (no op of one size once a step): steps not found, never a count ---
: >anysize.all
for seed in 0 1 2 3 4 5 6 7; do verdicts anysize $seed anysize; done
sort anysize.all | uniq -c >anysize.u
check "kept 1-4 MiB a step, 8 seeds: 'steps: unknown', held (steps not found; 0.1 s is too short to judge over time), in 8 of 8 ($(tr -s ' ' <anysize.u | tr '\n' '|'))" \
    "[ \$(wc -l <anysize.u) -eq 1 ] && grep -q '^ *8 rc [0-9]* | steps: unknown (no step marks or annotations, and no repeating allocation pattern) |         held, steps not found: ' anysize.u"
# over 1.25 s: judged over time instead (docs/DEFINITIONS.md, Growth without steps)
: >slowany.all
verdicts slowany 3 anysize 50 25000
check "the same over 1.25 s: 'steps: unknown', growing over time (steps not found), exit 3 ($(cat slowany.all))" \
    "grep -q '^rc 3 | steps: unknown (no step marks or annotations, and no repeating allocation pattern) |         growing over time (steps not found): ' slowany.all"

# --- never an invented count: every recording above says 50 steps or none ---
check "no recording says a step count other than 50" \
    "! cat ./*.all | grep -v -e '| steps: 50 detected ' -e '| steps: unknown (' | grep -q ."
finish
