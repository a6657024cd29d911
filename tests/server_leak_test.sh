#!/bin/sh
# server_leak_test.sh BUILD_DIR SOURCE_DIR - growth without steps (docs/DEFINITIONS.md "Growth
# without steps"): a program with no step structure read 'steps: unknown', 'held, steps not
# found' and 'growth cannot be judged' (exit 5 under --fail-on-leak), whether it grew or not.
# Now a site the steps cannot judge is judged over the record cut in 10 equal slices of time, by
# what it held through each slice, in words of what was observed (no rate):
#  - a server's 4 threads at irregular times keeping one buffer in ten (tests/server_leak.c
#    server), and time_leak's 1 MiB every 10 ms: growing over time, exit 3;
#  - the same server whose kept buffers go into a cache of 20 that fills, then holds its level:
#    level, no leak, exit 0;
#  - two bursts 1.2 s apart: not judged (bursts), exit 5;
#  - the server over ~0.1 s: not judged (too short), exit 5;
#  - an OOM after the server's leak: `oom` says "driven by a leak" over the same slices, with
#    the leaks report's own words, and --json says it was judged over time.
# Each program is run twice (its times are the scheduler's): the same verdict both times.
TEST=server_leak . "$(dirname "$0")/testlib.sh"
P=$B/tests/server_leak

# judge NAME PROGRAM ARGS...: record, then leaks --fail-on-leak (NAME.txt, NAME.rc) and the site's
# over_time from --json (NAME.js: verdict, over_time verdict, busy slices, held through each slice)
judge() {
    name=$1
    shift
    "$CMH" record -q -o $name.cmh -- "$@" >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak $name.cmh >$name.txt 2>&1
    echo $? >$name.rc
    "$CMH" leaks --json $name.cmh 2>/dev/null | py -c '
import json, sys
d = json.load(sys.stdin)[0]
x = max(d["sites"], key=lambda s: s["bytes"])
o = x["over_time"] or {}
print(x["verdict"], o.get("verdict", "-").replace(" ", "_"), o.get("busy_slices", "-"), ",".join(str(v >> 20) for v in o.get("held_bytes_by_slice", [])),
      "rate" if x["rate_bytes_per_step"] is not None else "norate")' >$name.js 2>&1
}

for i in 1 2; do
    judge server$i "$P" server
    check "server, run $i: 4 threads, irregular times, one buffer in ten kept: growing over time, exit 3 (rc $(cat server$i.rc); $(cat server$i.js); $(grep 'over time' server$i.txt | tr '\n' '|'))" \
        "[ \$(cat server$i.rc) -eq 3 ] && grep -q '^steps: unknown' server$i.txt &&
         grep -q '^ *64.0 MiB  *64 .* growing  serve (.*server_leak.c:[0-9]*)' server$i.txt &&
         grep -q '^        growing over time (steps not found): held [0-9.]* [KMi]*B through slice [1-5] and [0-9.]* MiB through the last, growing over the last [0-9]* of the 10 equal slices of the record (.* of .*), more through [0-9]* of the [0-9]* after its lowest; 640 allocations, in 10 of the slices\$' server$i.txt &&
         grep -q '^1 site grows over the record.s time (steps not found: judged over its 10 equal slices): a likely leak\$' server$i.txt &&
         ! grep -q 'per second\|/s ' server$i.txt && grep -q '^growing growing 10 [0-9,]* norate\$' server$i.js"
    # what it held through each slice never fell: kept buffers, never freed
    check "server, run $i: held through each slice never less than through the one before ($(cut -d' ' -f4 server$i.js))" \
        "cut -d' ' -f4 server$i.js | tr ',' '\n' | awk 'NR > 1 && \$1 < prev { bad = 1 } { prev = \$1 } END { exit bad || NR != 10 }'"

    judge cache$i "$P" cache
    check "cache, run $i: the kept buffers in a cache of 20 that fills then holds: level, no leak, exit 0 (rc $(cat cache$i.rc); $(cat cache$i.js); $(grep '^no site\|over time' cache$i.txt | tr '\n' '|'))" \
        "[ \$(cat cache$i.rc) -eq 0 ] && grep -q '^ *20.0 MiB  *20 .* level    serve (' cache$i.txt &&
         grep -q '^        level over time (steps not found): held [0-9.]* MiB through the last of the 10 equal slices of the .* record, no more than through slice [0-9] ([0-9.]* MiB, its most before), give or take [0-9.]* [KMi]*B (the most it held less through one slice than through the one before); 640 allocations, in 10 of the slices\$' cache$i.txt &&
         grep -q '^no site grows over the record.s time (steps not found: 1 site judged over its 10 equal slices, level)\$' cache$i.txt &&
         ! grep -q 'growing\|likely leak' cache$i.txt && grep -q '^level level 10 ' cache$i.js"
done

# time_leak: 1 MiB every 10 ms on the main thread, one site, never freed (problem 4's program)
judge tl "$B/tests/time_leak" 150 10000
check "time_leak, 1 MiB every 10 ms: growing over time, exit 3 (rc $(cat tl.rc); $(cat tl.js))" \
    "[ \$(cat tl.rc) -eq 3 ] && grep -q '^        growing over time (steps not found): held 1.0 MiB through slice 1 and 1[0-9][0-9].0 MiB through the last, growing over the last 10 of the 10 equal slices' tl.txt &&
     grep -q '^growing growing 10 ' tl.js"

# two bursts of 40 kept buffers 1.2 s apart: two slices hold its allocations, no trend to see
judge bursts "$P" bursts
check "two bursts 1.2 s apart: not judged over time (bursts), exit 5, never growing (rc $(cat bursts.rc); $(cat bursts.js); $(tail -1 bursts.txt))" \
    "[ \$(cat bursts.rc) -eq 5 ] && grep -q '^unjudged bursts 2  norate\$' bursts.js && ! grep -q 'growing\|level' bursts.txt &&
     grep -q '^growth cannot be judged: the steps are unknown; 80.0 MiB still live (80 blocks) was made in bursts, within 2 of the 10 equal parts' bursts.txt"

# the server over a record of ~0.1 s: too short to judge over time
judge short "$P" short
check "the server over ~0.1 s: not judged over time (too short), exit 5, never growing (rc $(cat short.rc); $(cat short.js); $(tail -1 short.txt))" \
    "[ \$(cat short.rc) -eq 5 ] && grep -q '^unjudged too_short ' short.js && ! grep -q 'growing\|level' short.txt &&
     grep -q '^growth cannot be judged: the steps are unknown' short.txt"

# an OOM after the server's leak: oom names the site leaks calls growing, over the same slices
FAKECUDA_CAPACITY=128M "$CMH" record -q -o oom.cmh -- "$P" oom >oom.out 2>&1
"$CMH" oom oom.cmh >oom.txt 2>&1
"$CMH" leaks oom.cmh >oomleaks.txt 2>&1
says=$(grep '^        growing over time' oomleaks.txt | sed 's/^ *//')
check "oom after a leak without steps: driven by a leak, over the slices leaks judged, in leaks' own words ($(grep -A1 'driven by a leak' oom.txt | tr -s ' ' | tr '\n' '|'))" \
    "grep -q '^  driven by a leak: allocated grew by [0-9.]* MiB over the last [0-9]* of the 10 equal slices of the record (.*) at serve (.*server_leak.c:[0-9]*), which held 64.0 MiB at the error\$' oom.txt &&
     [ -n \"\$says\" ] && grep -qF \"(cumemhist leaks: \$says);\" oom.txt && ! grep -q 'over [0-9]* steps' oom.txt"
"$CMH" oom --json oom.cmh 2>/dev/null | py -c '
import json, sys
def find(o):
    if isinstance(o, dict):
        if o.get("driven_by_leak"): yield o["driven_by_leak"]
        for v in o.values(): yield from find(v)
    elif isinstance(o, list):
        for v in o: yield from find(v)
d = list(find(json.load(sys.stdin)))
assert len(d) == 1, d
x = d[0]
o = x["leak"]["over_time"]
assert x["judged_over"] == "time" and x["leak"]["verdict"] == "growing" and o["verdict"] == "growing", x
assert x["grown_bytes"] == o["last_held_bytes"] - o["low_held_bytes"] > 0, x
assert x["held_at_error"] == 64 << 20, x
' && ok "oom --json: driven_by_leak judged over time, grown_bytes the held bytes' rise leaks gives" || bad "oom --json: driven_by_leak over time"
# every fixture record: none grows over time (a training record without steps: too few
# allocations, or in bursts), and torch_plain.cmh's sites say why they are not judged over time
: >fix.txt
find "$F" -type f \( -name '*.cmh' -o -name '*.pickle' \) | sort | while read -r f; do
    "$CMH" leaks --json "$f" 2>/dev/null | py -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit()
for dev in d:
    for s in dev.get("sites", []):
        print(sys.argv[1], (s.get("over_time") or {}).get("verdict", "steps").replace(" ", "_"))' "$f" >>fix.txt
done
check "fixtures: no site of any record in tests/fixtures grows over time ($(cut -d' ' -f2 fix.txt | sort | uniq -c | tr -s ' ' | tr '\n' '|'))" \
    "[ -s fix.txt ] && ! grep -q ' growing\$' fix.txt"
check "torch_plain.cmh (no steps, 20 blocks): each site not judged over time, too few allocations ($(grep 'h200/torch_plain.cmh' fix.txt | cut -d' ' -f2 | sort | uniq -c | tr -s ' '))" \
    "grep -q 'h200/torch_plain.cmh too_few_allocations\$' fix.txt && ! grep 'h200/torch_plain.cmh' fix.txt | grep -vq 'too_few_allocations\$'"
finish
