#!/bin/sh
# time_leak_test.sh BUILD_DIR SOURCE_DIR - a leak paced by time on the main thread, no steps, no
# marks (tests/time_leak.c: 1 MiB kept every 10 ms): `leaks` read 'steps: unknown', 'held, steps
# not found' and 'growth cannot be judged' (exit 5 under --fail-on-leak, a leak never said); now
# allocated is judged over the run's time in the step verdicts' words:
#  - kept every 10 ms to the end: growing, a rate per second, --fail-on-leak exits 3;
#  - kept every 10 ms for 60, then held 1.5 s: stopped, exit 6;
#  - a warm-up: 40 made back to back, then held 4 s (a plateau): state, exit 0;
#  - a one-step training trace (the H200 torch_plain.cmh: 20 blocks, weights and optimizer
#    state made in bursts) stays not judged, exit 5: too few allocations to judge by time.
TEST=time_leak . "$(dirname "$0")/testlib.sh"
P=$B/tests/time_leak

# judge NAME ARGS...: record time_leak ARGS, then leaks --fail-on-leak (NAME.txt, NAME.rc) and --json's growth_over_time (NAME.js)
judge() {
    name=$1
    shift
    "$CMH" record -q -o $name.cmh -- "$P" "$@" >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak $name.cmh >$name.txt 2>&1
    echo $? >$name.rc
    "$CMH" leaks --json $name.cmh 2>/dev/null | py -c '
import json, sys
d = json.load(sys.stdin)[0]; g = d.get("growth_over_time") or {}
print(d["steps"].get("count") or 0, g.get("judged"), g.get("verdict"), g.get("allocations"), int(g.get("rate_bytes_per_second") or 0) >> 20)' >$name.js 2>&1
}
judge grow 150 10000
check "1 MiB kept every 10 ms, no steps: growing over time, exit 3 (rc $(cat grow.rc); $(grep '^growth' grow.txt); $(cat grow.js))" \
    "[ \$(cat grow.rc) -eq 3 ] && grep -q '^steps: unknown' grow.txt &&
     grep -q '^growth over time (no steps: 20 stretches of the .* run): growing: allocated +[0-9.]* MiB per second over the last .*; 150.0 MiB allocated at the end: a likely leak\$' grow.txt &&
     grep -q '^allocated grows over time (no steps to judge sites by): a likely leak\$' grow.txt && grep -q '^0 True growing 150 ' grow.js"
# a rate, per second (its figure is the clock's: not held to one)
r=$(cut -d' ' -f5 grow.js)
check "a rate per second, positive ($r MiB/s)" "[ '$r' -gt 0 ]"

judge stop 60 10000 1048576 1500
check "60 kept every 10 ms, then held 1.5 s: stopped, exit 6 (rc $(cat stop.rc); $(grep '^growth' stop.txt))" \
    "[ \$(cat stop.rc) -eq 6 ] && grep -q '^growth over time .*: stopped: allocated grew +[0-9.]* MiB per second over stretches 1-[0-9]*, then flat for the last .*; 60.0 MiB still allocated\$' stop.txt &&
     grep -q '^0 True stopped 60 ' stop.js"

judge warm 40 0 1048576 4000
check "a warm-up of 40 blocks made back to back, then 4 s flat: state, no leak, exit 0 (rc $(cat warm.rc); $(grep '^growth' warm.txt))" \
    "[ \$(cat warm.rc) -eq 0 ] && grep -q '^growth over time .*: state: allocated grew in the run.s first quarter only' warm.txt &&
     grep -q '^allocated does not grow over time' warm.txt && ! grep -q 'likely leak' warm.txt && grep -q '^0 True state 40 ' warm.js"

# a one-step training trace: its weights and optimizer state are no leak, and too few to judge by time
"$CMH" leaks --fail-on-leak "$F/h200/torch_plain.cmh" >tp.txt 2>/dev/null
rc=$?
check "a one-step training trace: growth over time not judged (20 allocations), exit 5, no leak said (rc $rc; $(grep '^growth' tp.txt | tr '\n' '|'))" \
    "[ $rc -eq 5 ] && grep -q '^growth over time: not judged (too few allocations to judge growth over time; 20 allocations, 40 needed)' tp.txt && ! grep -q 'likely leak' tp.txt"
finish
