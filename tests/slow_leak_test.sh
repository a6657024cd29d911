#!/bin/sh
# slow_leak_test.sh BUILD_DIR SOURCE_DIR - leaks that the steps found from the allocation pattern
# (no marks) must not hide (tests/slow_leak.c), each the same verdict on every run:
#  - a burst of one allocation after the loop is no steps of the loop (an 8-step leak followed by
#    63 buffers made and freed read 'steps: 50 (period 3)', 'grew in 7 steps, then stopped', exit 0);
#  - a slow leak, linear over the whole run, is growing even where its last measured steps fall
#    between two of its blocks (it read 'grew in 1393 steps, then stopped (flat for the last 7)',
#    exit 0), and a count names its unit ('grew in 1393 steps' counted 199 stretches of 7 steps);
#  - a loop of one allocation repeated is no loop of 2 ('+2.0 MiB per step' for 1 MiB each);
#  - the steps line says the record's steps and the threads' in two sentences, a record of one
#    entry has a history, and no time reads -0.000s.
TEST=slow_leak . "$(dirname "$0")/testlib.sh"
P=$B/tests/slow_leak

# runs NAME N CMD...: N recordings of CMD, each one's `leaks --fail-on-leak` exit status, steps
# line and the line under each site's row (or its --json words), counted (NAME.u: 'COUNT LINE')
runs() {
    name=$1 n=$2
    shift 2
    i=0
    : >"$name.all"
    while [ "$i" -lt "$n" ]; do
        "$CMH" record -q -o "$name$i.cmh" -- "$@" >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak "$name$i.cmh" >"$name.txt" 2>&1
        echo "rc $?" >>"$name.all"
        # (what a run's clock says is left out: the words around it are the verdict)
        grep -E '^steps|^        (growing|stopped|state|held|rose|after)|^(no site|growth|[0-9]+ site)' "$name.txt" |
            sed -e 's/ made within [^,;]*/ made within T/' -e 's/ was made \(over the\|in bursts\).*/ was made over the run: R/' >>"$name.all"
        i=$((i + 1))
    done
    sort "$name.all" | uniq -c >"$name.u"
}
# same NAME N: every line came N times (the same verdict on every run)
same() { ! awk -v n="$2" '$1 != n { bad = 1 } END { exit !bad }' "$1.u"; }
has() { grep -q "^ *$2 $3\$" "$1.u"; }

# --- a burst after the loop (F6): the loop's 8 steps, the leak growing, exit 3 ---
runs burst 10 "$P" burst 8 63
check "a burst of 63 buffers after an 8-step leak: 8 steps, growing +1.0 MiB per step, exit 3, in 10 of 10 runs ($(tr -s ' ' <burst.u | tr '\n' '|'))" \
    "same burst 10 && has burst 10 'rc 3' && has burst 10 'steps: 8 detected from the allocation pattern (period 3 entries)' &&
     has burst 10 '        growing: +1.0 MiB per step over the last 7 steps'"
# the repository's own sample, as its header says to run it (a 16 GiB fake device: 63 kv buffers)
runs mg 3 "$B/samples/multigpu" 8
check "samples/multigpu 8 on a 16 GiB device: 8 steps, cache_activations growing +4.0 MiB per step, exit 3 ($(tr -s ' ' <mg.u | tr '\n' '|'))" \
    "same mg 3 && has mg 3 'rc 3' && has mg 3 'steps: 8 detected from the allocation pattern (period 3 entries)' &&
     has mg 3 '        growing: +4.0 MiB per step over the last 7 steps'"

# --- a slow leak inside busy churn (F6b): growing over the whole run, at its rate ---
runs slow 10 "$P" slow 200000 1000
check "a 64 KiB block kept every 1000 of 200000 busy iterations: growing +4.1 KiB per step, exit 3, in 10 of 10 runs ($(tr -s ' ' <slow.u | tr '\n' '|'))" \
    "same slow 10 && has slow 10 'rc 3' && has slow 10 'steps: 3122 detected from the allocation pattern (period 128 entries), measured every 7 steps' &&
     grep -q '^ *10         growing: +4.1 KiB per step over the last 31[0-9][0-9] steps\$' slow.u"
runs slower 5 "$P" slow 200000 3000
check "one every 3000 iterations: growing +1.4 KiB per step, exit 3, in 5 of 5 runs ($(tr -s ' ' <slower.u | tr '\n' '|'))" \
    "same slower 5 && has slower 5 'rc 3' && grep -q '^ *5         growing: +1.4 KiB per step over the last [23][0-9][0-9][0-9] steps\$' slower.u"
# its twin that stops halfway is not growing now: a leak that stopped (exit 6); the rises counted
# in the stretches measured, the steps it grew over and was flat for in steps
runs stops 5 "$P" slow 200000 1000 100000
check "the same leak stopping halfway: stopped, 'grew in 100 of the 222 stretches of 7 steps over steps 15-15xx', exit 6, in 5 of 5 runs ($(tr -s ' ' <stops.u | tr '\n' '|'))" \
    "same stops 5 && has stops 5 'rc 6' && has stops 5 'no site grows from step to step now; 1 site grew over several steps, then stopped, and still holds 6.2 MiB: a likely leak that stopped' &&
     grep -q '^ *5         stopped: grew in 100 of the 2[0-9][0-9] stretches of 7 steps over steps [0-9]*-15[0-9][0-9], +4.1 KiB per step on average, then flat for the last 15[0-9][0-9] steps; 6.2 MiB still held at the end, never freed\$' stops.u"
"$CMH" leaks --json stops0.cmh | py -c '
import json, sys
x = [s for s in json.load(sys.stdin)[0]["sites"] if s["site"]["function"] == "keep_small"][0]
assert x["verdict"] == "stopped" and x["rises"] == 100 and x["stride"] == 7 and x["flat_steps"] > 1000, x
assert x["growth_last_step"] + x["flat_steps"] == x["steps"] and x["growth_last_step"] - x["growth_first_step"] + 1 == x["growth_steps"], x
' && ok "--json: rises counts the stretches that rose, stride their steps; the steps it grew over and those since add up" || bad "--json rises and stride"

# --- one allocation repeated (F9): no loop of 2, no rate; the steps line in two sentences ---
runs keep 10 "$P" keep 40
check "40 allocations of one kind in a row: no steps found, no '+2.0 MiB per step', exit 5, in 10 of 10 runs ($(tr -s ' ' <keep.u | tr '\n' '|'))" \
    "same keep 10 && has keep 10 'rc 5' && ! grep -q 'per step' keep.u &&
     has keep 10 'steps: unknown (no step marks or annotations, and no repeating allocation pattern). The thread holding memory has no loop of its own (4 steps or more)' &&
     has keep 10 'growth cannot be judged: the steps are unknown; 40.0 MiB still live (40 blocks) was made over the run: R'"
# (nothing tells that loop from weights made in a loop once at start-up: no steps are inferred from
# it; leaks says how to give them instead, where it said only 'the steps are unknown', and doing
# as it says judges the leak: growing, exit 3)
HINT='note: to judge growth, give the steps: mark each iteration of the loop, cumemhist.mark("step") in Python (import cumemhist), CMH_MARK("step") in C or C++ (#include <cumemhist/blocks.h>, nothing to link), or kill -USR2 PID at each step; then record again (one mark is one step; 4 steps at least)'
"$CMH" leaks --json keep0.cmh | py -c 'import json, sys; print(json.load(sys.stdin)[0]["steps_hint"])' >keep.hint 2>&1
check "steps unknown: the note after the outcome says how to give the steps, --json steps_hint too ($(tail -1 keep.txt | cut -c1-80))" \
    "[ \"\$(tail -1 keep.txt)\" = '$HINT' ] && [ \"note: \$(cat keep.hint)\" = '$HINT' ]"
# (the HTML report says the same note, from the same function: the page gave the outcome without it)
"$CMH" report -o keep.html keep0.cmh >/dev/null 2>&1
py - keep.html >keep.page 2>&1 <<'PY'
import html, re, sys
m = re.findall(r'<p class="r-steps-hint" data-device="0">(.*?)</p>', open(sys.argv[1], encoding="utf-8").read())
print(html.unescape(m[0]) if len(m) == 1 else "notes found: %d" % len(m))
PY
check "report: the page carries the same note ($(cut -c1-60 keep.page))" "[ \"\$(cat keep.page)\" = '$HINT' ]"
runs keepm 3 "$P" keep 40 1
"$CMH" report -o keepm.html keepm0.cmh >/dev/null 2>&1
check "report: no note where the marks gave the steps" "[ -s keepm.html ] && ! grep -q 'r-steps-hint' keepm.html"
check "the same loop marked as the note says: 40 steps, growing +1.0 MiB per step, exit 3, no note, in 3 of 3 runs ($(tr -s ' ' <keepm.u | tr '\n' '|'))" \
    "has keepm 3 'rc 3' && has keepm 3 'steps: 40 from the program.s marks (\"step\").*' &&
     [ \$(grep -c '^        growing: +1.0 MiB per step over the last 39 steps' keepm.all) -eq 3 ] && ! grep -q '^note: to judge' keepm.txt"

# --- a record of one entry has a history; times never read -0.000s ---
"$CMH" record -q -o one.cmh -- "$P" one >/dev/null 2>&1
"$CMH" leaks --fail-on-leak one.cmh >one.txt 2>&1
rc=$?
check "one entry: 'the record has 1 trace entry', the steps unknown, not 'no allocation history', exit 5 ($(grep -E '^steps|^growth' one.txt | tr '\n' '|'))" \
    "[ $rc -eq 5 ] && grep -q '^steps: unknown (the record has 1 trace entry: no loop to find)\$' one.txt &&
     grep -q '^growth cannot be judged: the steps are unknown\$' one.txt && ! grep -q 'no allocation history' one.txt"
"$CMH" record -q --max-entries 5 -o ring.cmh -- "$P" burst 8 4 >/dev/null 2>&1
"$CMH" leaks ring.cmh >ring.txt 2>&1
# (its blocks made before the window read '-69 µs': the one time format keeps them apart, where
# '%+.3fs' made them all '+0.000s')
check "a ring that dropped entries: leaks prints no negative zero ($(grep -m1 'MiB ' ring.txt | tr -s ' '))" \
    "grep -q 'ring dropped' ring.txt && grep -q ' [-+][0-9.]* \(µs\|ms\|ns\) ' ring.txt && ! grep -q -- '-0\(\.0*\)\? *\(s\|ms\|µs\|ns\) ' ring.txt"
finish
