#!/bin/sh
# plateau_test.sh BUILD_DIR SOURCE_DIR - loops without marks or annotations whose leak has a shape
# (tests/plateau_leak.c), each recorded 5 times: the steps found from the allocation pattern and
# the verdict, the same on every run.
#  - a cache that fills for 10 iterations of 20 and then stops (3 driver calls an iteration, then
#    2: the loop stopped making one allocation) read 'steps: unknown (no step marks or
#    annotations, and no repeating allocation pattern)' and 'held, steps not found' (exit 5 for
#    --fail-on-leak); now 20 steps and a leak that stopped: stopped, grew +1.0 MiB per step over
#    steps 1-10, then flat (it read 'state' with those words after it, exit 0; now exit 6);
#  - the same with 2 blocks an iteration (4 calls, then 2): 'steps: unknown' too; now the same
#    verdict, and the steps line says the loop changed shape (its anchor's steps in two phases
#    of other lengths: it read '(period 4 entries)', where a loop whose shapes are found one by
#    one says the change);
#  - a stranger's trial: 8 MiB kept in each of the first 10 steps of 20 (80 MiB never freed) read
#    'state: 80.0 MiB held across steps, not growing: grew in 9 steps after its first (...), then
#    stopped (...)', 'no site grows from step to step', exit 0, and was dismissed; now stopped, the
#    outcome says so, exit 6;
#  - a cache filled in the first 1, 2 or 3 steps (a warm-up: optimizer state, a KV cache made in
#    step 1) stays state, exit 0; over the first 4 it is stopped (3 rises after the first, as a
#    leak's growth needs);
#  - a leak that begins halfway (2 calls an iteration, then 3) read 'steps: unknown' too; now
#    growing from where it began;
#  - a block kept in the first iteration only (a warm-up) read 'steps: unknown', 'held'; now
#    state, not a leak;
#  - 3 threads each with its own loop, each filling a cache of its own that stops: stopped, whether
#    the loops overlap (each thread's own steps) or the threads run one after another (the
#    record's 60 steps, a staircase, read 'growing: +521.6 KiB per step over the last 40 steps',
#    exit 3, where each thread's own steps say each cache stopped);
#  - a leak every 2nd iteration, a leak of sizes that grow, two sites of which one leaks (weights
#    made once: state): the verdicts they had, still the same every run.
TEST=plateau . "$(dirname "$0")/testlib.sh"
P=$B/tests/plateau_leak

# runs NAME CMD...: 5 recordings of CMD; for each, `leaks --fail-on-leak`'s exit status, its steps
# line and each site's function, verdict and words (--json), one line each, counted (NAME.u)
runs() {
    name=$1
    shift
    i=0
    : >"$name.all"
    while [ "$i" -lt 5 ]; do
        "$CMH" record -q -o "$name$i.cmh" -- "$@" >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak "$name$i.cmh" >"$name.txt" 2>&1
        echo "rc $?" >>"$name.all"
        "$CMH" leaks --json "$name$i.cmh" >"$name$i.json" 2>&1
        i=$((i + 1))
    done
    # the 5 runs' --json, read by one Python (a file that does not read says so, a line of its own)
    py - "$name"[0-4].json >>"$name.all" <<'PY'
import json, sys
for f in sys.argv[1:]:
    try:
        ds = json.load(open(f))
    except Exception as e:
        print("%s: %r" % (f, e))
        continue
    for d in ds:
        print(d["steps"]["text"])
        for s in d["sites"]:
            print("%s %s: %s | rises %s flat %s%s" % (s["site"]["function"], s["verdict"], s["says"], s.get("rises"), s.get("flat_steps"),
                                                    " apart" if s.get("threads_apart") else ""))
PY
    sort "$name.all" | uniq -c >"$name.u"
}
# same NAME: every line came 5 times (the same verdict on every run)
same() { ! awk '$1 != 5 { bad = 1 } END { exit !bad }' "$1.u"; }
has() { grep -qF "5 $2" "$1.u"; }
says() { tr -s ' ' <"$1.u" | tr '\n' '|'; }

runs plateau "$P" plateau 20 10
check "a cache filled in 10 of 20 iterations (3 driver calls, then 2): 20 steps, stopped over steps 1-10, exit 6, 5 of 5 runs ($(says plateau))" \
    "same plateau && has plateau 'rc 6' && has plateau 'steps: 20 detected from the allocation pattern (period 3 entries)' &&
     has plateau 'loop_grab stopped: stopped: grew +1.0 MiB per step over steps 1-10, then flat for the last 10 steps; 10.0 MiB still held at the end, never freed | rises 9 flat 10'"

# the stranger's trial: 8 MiB a step for 10 steps of 20, then none; 80 MiB never freed
runs stops8 "$P" plateau 20 10 8
check "8 MiB kept in each of the first 10 of 20 steps: stopped, the outcome says so, exit 6, 5 of 5 runs ($(says stops8))" \
    "same stops8 && has stops8 'rc 6' && has stops8 'steps: 20 detected from the allocation pattern (period 3 entries)' &&
     has stops8 'loop_grab stopped: stopped: grew +8.0 MiB per step over steps 1-10, then flat for the last 10 steps; 80.0 MiB still held at the end, never freed | rises 9 flat 10' &&
     grep -q '^no site grows from step to step now; 1 site grew over several steps, then stopped, and still holds 80.0 MiB: a likely leak that stopped\$' stops8.txt"
"$CMH" leaks --json stops80.cmh | py -c '
import json, sys
d = json.load(sys.stdin)[0]
assert d["leaking_sites"] == 0 and d["stopped_sites"] == 1 and d["stopped_bytes"] == 80 << 20 and d["outcome"].startswith("no site grows from step to step now; 1 site grew"), d
x = d["sites"][0]
assert x["verdict"] == "stopped" and not x["growing"] and x["rate_bytes_per_step"] == 8 << 20 and x["growth_first_step"] == 1 and x["growth_last_step"] == 10, x
assert x["flat_steps"] == 10 and x["held_bytes"] == 80 << 20 and x["held_when_stopped_bytes"] == 80 << 20 and x["warmup_grew_bytes"] == 0, x
' 2>stops8.err
check "leaks --json: verdict stopped, its rate, its steps 1-10, stopped_sites and stopped_bytes ($(tail -1 stops8.err))" "[ ! -s stops8.err ]"
"$CMH" report -o stops8.html stops80.cmh 2>/dev/null
check "the HTML report: the site's verdict stopped and the outcome as leaks says them" \
    "grep -q 'data-verdict=\"stopped\" data-says=\"stopped: grew +8.0 MiB per step over steps 1-10' stops8.html &&
     grep -q '<span class=\"r-leak\">no site grows from step to step now; 1 site grew over several steps' stops8.html"

# a warm-up: a cache (optimizer state, a KV cache) filled in the first 1, 2 or 3 steps is state and
# passes the gate; filled over 4, it grew over 3 steps after the first, as a leak's growth must
for k in 1 2 3 4; do
    "$CMH" record -q -o warm$k.cmh -- "$P" plateau 20 $k 8 >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak warm$k.cmh >warm$k.txt 2>&1
    echo "$? $(grep -c '^      *[0-9.]* MiB *[0-9]* .* stopped  loop_grab' warm$k.txt) $(grep -c ' state  *loop_grab' warm$k.txt)" >warm$k.rc
done
check "8 MiB kept in the first 1, 2, 3 steps: state, exit 0; in the first 4: stopped, exit 6 ($(cat warm1.rc warm2.rc warm3.rc warm4.rc | tr '\n' '|'))" \
    "[ \"\$(cat warm1.rc warm2.rc warm3.rc warm4.rc | tr '\n' '|')\" = '0 0 1|0 0 1|0 0 1|6 1 0|' ] &&
     grep -q '^        stopped: grew +8.0 MiB per step over steps 1-4, then flat for the last 16 steps; 32.0 MiB still held at the end, never freed\$' warm4.txt"

runs cache2 "$P" cache2 20 10
check "a cache of 2 blocks an iteration filled in 10 of 20 iterations (4 driver calls, then 2): 20 steps, stopped over steps 1-10, exit 6, 5 of 5 runs ($(says cache2))" \
    "same cache2 && has cache2 'rc 6' && has cache2 'steps: 20 detected from the allocation pattern (period 2 entries as it ended; the loop changed shape once)' &&
     has cache2 'loop_grab stopped: stopped: grew +2.0 MiB per step over steps 1-10, then flat for the last 10 steps; 20.0 MiB still held at the end, never freed | rises 9 flat 10'"

runs late "$P" late 20 10
check "a leak that begins at iteration 10 of 20 (2 driver calls, then 3): 20 steps, growing over the last 10, exit 3, 5 of 5 runs ($(says late))" \
    "same late && has late 'rc 3' && has late 'steps: 20 detected from the allocation pattern (period 2 entries)' &&
     has late 'loop_grab growing: growing: +1.0 MiB per step over the last 10 steps'"

runs warmup "$P" warmup 20
check "a block kept in the first iteration only: 20 steps, state (a warm-up, not a leak), exit 0, 5 of 5 runs ($(says warmup))" \
    "same warmup && has warmup 'rc 0' && has warmup 'steps: 20 detected from the allocation pattern (period 2 entries)' &&
     has warmup 'loop_grab state: state: 1.0 MiB held across steps, not growing'"

runs every2 "$P" every2 20
check "a block kept every 2nd iteration: growing, exit 3, 5 of 5 runs ($(says every2))" \
    "same every2 && has every2 'rc 3' && has every2 'steps: 10 detected from the allocation pattern (period 5 entries)' &&
     has every2 'loop_grab growing: growing: +1.0 MiB per step over the last 9 steps'"

runs sizes "$P" sizes 20
check "a block kept every iteration, 64 KiB larger each time: growing, exit 3, 5 of 5 runs ($(says sizes))" \
    "same sizes && has sizes 'rc 3' && has sizes 'steps: 20 detected from the allocation pattern (period 3 entries)' &&
     has sizes 'loop_grab growing: growing: +672.0 KiB per step over the last 19 steps'"

runs twosites "$P" twosites 20
check "weights made once beside a block kept every iteration: weights state, the other growing, exit 3, 5 of 5 runs ($(says twosites))" \
    "same twosites && has twosites 'rc 3' && has twosites 'steps: 20 detected from the allocation pattern (period 5 entries)' &&
     has twosites 'loop_grab growing: growing: +1.0 MiB per step over the last 19 steps' &&
     has twosites 'weights state: state: 8.0 MiB held across steps, not growing'"

runs threads "$P" threads 20 3
check "3 threads each filling a cache in 10 of its 20 iterations: each thread's own 20 steps, stopped, exit 6, 5 of 5 runs ($(says threads))" \
    "same threads && has threads 'rc 6' && grep -q '5 steps: each recording thread.s own .*: 3 threads repeat 20 steps each' threads.u &&
     has threads 'loop_grab stopped: stopped: recording threads 1, 2, 3 each grew +1.0 MiB per step over steps 1-10 of its own, then flat for the last 10 steps; 30.0 MiB still held at the end, never freed; judged thread by thread: each by its own steps'"

runs serial "$P" serial 20 3
# (one after another, the threads read as where they overlap: whether two threads' runs overlap is
# the scheduler's, and the same program's threads ran one after another in some runs and together in
# others; the words once said which, 'steps: 60 detected from the allocation pattern (period 3
# entries)' and 'one thread after another' here)
check "the same 3 threads one after another: each thread's own 20 steps, stopped, the same words as where they overlap, exit 6, 5 of 5 runs ($(says serial))" \
    "same serial && has serial 'rc 6' && grep -q '5 steps: each recording thread.s own .*: 3 threads repeat 20 steps each' serial.u &&
     has serial 'loop_grab stopped: stopped: recording threads 1, 2, 3 each grew +1.0 MiB per step over steps 1-10 of its own, then flat for the last 10 steps; 30.0 MiB still held at the end, never freed; judged thread by thread: each by its own steps | rises 9 flat 10'"

finish
