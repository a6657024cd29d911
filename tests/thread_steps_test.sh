#!/bin/sh
# thread_steps_test.sh BUILD_DIR SOURCE_DIR - the leak verdict of threads that race, with no step
# marks (tests/each_leaks.c: 3 threads each keeping 256 KiB a step): the same words on every run,
# however the threads interleave, naming every leaking thread and its own rate; its steady twin
# cleared every run; and what `leaks` says when no step can be found at all.
TEST=thread_steps . "$(dirname "$0")/testlib.sh"

# Before, the record's steps were cut from the 3 threads' allocations interleaved, and changed
# with the race: '+768.0 KiB per step over the last 9 steps', '... over the last 6 steps', or,
# where no loop showed, '+256.0 KiB per step over the last 9 steps of recording thread 1' (the
# other two threads' leak forgotten).  Each thread's own steps do not change.
for mode in lock free; do
    i=0
    : >says.txt
    while [ $i -lt 10 ]; do
        "$CMH" record -q -o e$i.cmh -- "$B/tests/each_leaks" 10 $mode leak >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak e$i.cmh >e.txt 2>&1
        echo "rc $?" >>says.txt
        "$CMH" leaks --json e$i.cmh >e$i.json
        # the text says it too, under its site
        grep -q '^        growing: +768.0 KiB per step of recording threads' e.txt || echo "text: $(grep -A1 ' loop_grab ' e.txt | tail -1)" >>says.txt
        i=$((i + 1))
    done
    # each run's --json, read by one Python for the 10 (a run whose JSON does not read says so, a line of its own)
    py - e[0-9].json >>says.txt 2>&1 <<'EOF2'
import json, sys
for f in sys.argv[1:]:
    try:
        d = json.load(open(f))[0]
        x = [s for s in d["sites"] if s["site"]["function"] == "loop_grab"][0]
    except Exception as e:
        print("%s: %r" % (f, e))
        continue
    print(x["verdict"], x["rate_bytes_per_step"], x.get("threads"), x.get("threads_holding"), x["growth_steps"])
    print(x["says"])
    print(d["outcome"])
EOF2
    sort says.txt | uniq -c >u.txt
    check "3 racing threads leaking 256 KiB a step each ($mode): the same verdict in 10 of 10 runs, every thread named ($(sort -rn u.txt | head -4 | tr -s ' ' | tr '\n' '|'))" \
        "[ \$(wc -l <u.txt) -eq 4 ] && grep -q '^ *10 rc 3\$' u.txt &&
         grep -q '^ *10 growing 786432 \[1, 2, 3\] 3 9\$' u.txt &&
         grep -q '^ *10 growing: +768.0 KiB per step of recording threads 1, 2, 3 together (+256.0 KiB each), over the last 9 steps of each; judged thread by thread: each by its own steps\$' u.txt &&
         grep -q '^ *10 1 site grows from step to step: a likely leak\$' u.txt"
done

# the steady twin: each thread keeps its first 3 blocks (a warm-up cache) and then no more
i=0
: >says.txt
while [ $i -lt 10 ]; do
    "$CMH" record -q -o s$i.cmh -- "$B/tests/each_leaks" 10 lock steady >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak s$i.cmh >/dev/null 2>&1
    echo "rc $?" >>says.txt
    "$CMH" leaks --json s$i.cmh >s$i.json
    i=$((i + 1))
done
py - s[0-9].json >>says.txt 2>&1 <<'EOF2'
import json, sys
for f in sys.argv[1:]:
    try:
        d = json.load(open(f))[0]
        x = [s for s in d["sites"] if s["site"]["function"] == "loop_grab"][0]
    except Exception as e:
        print("%s: %r" % (f, e))
        continue
    print(x["verdict"], x.get("threads"), x["says"])
EOF2
sort says.txt | uniq -c >u.txt
check "its steady twin: held by each thread, growing in none, the gate passes, in 10 of 10 runs ($(tr -s ' ' <u.txt | tr '\n' '|'))" \
    "[ \$(wc -l <u.txt) -eq 2 ] && grep -q '^ *10 rc 0\$' u.txt &&
     grep -q '^ *10 state \[1, 2, 3\] state: 2.2 MiB held across steps by recording threads 1, 2, 3, growing in none' u.txt"

# Threads of different periods (a stranger's Python job, tests/fixtures/leaks/prefetch_py*.cmh):
# main makes and frees 32 MiB a step every 0.2 s, a prefetch thread keeps 2 MiB every 0.25 s (20
# allocations, a leak).  The prefetch thread's loop is one allocation an iteration, no pattern
# of two events, so it had no steps of its own, and the site was judged over the record's steps,
# a super-period of both threads' entries that the scheduler decides: 11 records of 12 read
# 'steps: 4 ... (period 14 entries)', '+8.0 MiB per step over the last 3 steps' (exit 3), the
# 12th 'steps: 2 ... (period 28 entries)' and 'rising' (exit 5), a live snapshot at 2.8 s '+1.8
# MiB per step over the last 13 steps'.  Its own steps are its 20 allocations, +2 MiB each.
HDR="steps: each recording thread's own (threads with loops of their own: a pattern across their entries would be the scheduler's): 2 threads repeat 20 steps each (1 to 2 of their own entries a step). Each of the 2 threads holding memory has a loop of its own (4 steps or more); each one's sites are also judged by its loop's steps"
# prefetch_says FILE: its leaks text and exit status say the prefetch thread's own steps
prefetch_says() {
    grep -qxF "$HDR" "$1" && grep -q '^rc 3$' "$1" &&
        grep -q "^        growing: +2.0 MiB per step over the last 19 steps of recording thread 2 (tid [0-9]*, 'python3')\$" "$1" &&
        grep -q '^        by caller: 64.0 MiB build_model (.*job.py:7), 40.0 MiB prefetch (.*job.py:11) (growing)$' "$1"
}
for f in prefetch_py prefetch_py_odd; do
    "$CMH" leaks --fail-on-leak "$F/leaks/$f.cmh" >$f.txt 2>&1
    echo "rc $?" >>$f.txt
done
check "a thread keeping 2 MiB every 0.25 s beside a 0.2 s loop: its own 20 steps, +2.0 MiB per step, exit 3, in the typical record and the odd one ($(sed -n 3p prefetch_py_odd.txt | cut -c1-60)|$(sed -n 7p prefetch_py_odd.txt))" \
    "prefetch_says prefetch_py.txt && prefetch_says prefetch_py_odd.txt"
"$CMH" leaks --json "$F/leaks/prefetch_py_odd.cmh" | py -c '
import json, sys
d = json.load(sys.stdin)[0]
x = d["sites"][0]
assert d["steps"]["thread_steps"] == {"threads": 2, "min": 20, "max": 20, "period_entries_min": 1, "period_entries_max": 2}, d["steps"]
assert (x["verdict"], x["rate_bytes_per_step"], x["growth_steps"], x["thread"]) == ("growing", 2 << 20, 19, 2), x
' && ok "--json of the odd record: the threads' 20 steps, thread 2 growing 2 MiB per step over 19" || bad "--json of the odd record"
# the live snapshot of the odd one's process at 2.8 s: its prefix, the same verdict over fewer steps
"$CMH" leaks --fail-on-leak "$F/leaks/prefetch_py_live.cmh" >live.txt 2>&1
rc=$?
check "its live snapshot at 2.8 s: the same verdict, +2.0 MiB per step, exit 3 ($rc: $(grep '^        growing' live.txt))" \
    "[ $rc -eq 3 ] && grep -q '^        growing: +2.0 MiB per step over the last 11 steps of recording thread 2' live.txt"

# The timeline's step marks (report, view) are the steps leaks judges by.  They were drawn from
# the record's steps as found before leaks put each thread's own in their place: the typical
# record's page drew 5 marks of a pattern across both threads ('steps': [7, 35, 61] for the
# trial's py3.cmh) where leaks said 'steps: each recording thread's own ...: 2 threads repeat 20
# steps each'.  Where threads race the page draws each thread's own and says leaks' sentence; a
# record judged by its own steps draws those alone (cache_burst: no steps of its own)
for f in prefetch_py prefetch_py_odd prefetch_py_live race_warmups cache_burst; do
    "$CMH" leaks --json "$F/leaks/$f.cmh" >$f.json 2>/dev/null
    "$CMH" report -o $f.report.html "$F/leaks/$f.cmh" >/dev/null 2>&1
    "$CMH" view -o $f.view.html "$F/leaks/$f.cmh" >/dev/null 2>&1
    py "$SRC/tests/check_step_marks.py" $f.json $f.report.html $f.view.html >marks.txt 2>&1
    check "$f: the report's and view's step marks are the steps leaks judges by ($(head -c 300 marks.txt))" "[ ! -s marks.txt ]"
done

# the same job as threads of C (tests/paced_leak.c), 20 runs: one verdict, whatever the race
i=0
: >says.txt
while [ $i -lt 20 ]; do
    "$CMH" record -q -o pl$i.cmh -- "$B/tests/paced_leak" >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak pl$i.cmh >pl.txt 2>&1
    echo "rc $?" >>says.txt
    grep -E '^steps|^        (growing|stopped|state|held|rose|by caller)' pl.txt | sed -e 's/(tid [0-9]*,/(tid N,/' -e 's/ ([^ ]*paced_leak.c:[0-9]*)//g' >>says.txt
    i=$((i + 1))
done
sort says.txt | uniq -c >u.txt
check "a prefetch thread keeping 2 MiB every 25 ms beside a 20 ms loop: the same verdict in 20 of 20 runs ($(sort -rn u.txt | tr -s ' ' | cut -c1-160 | tr '\n' '|'))" \
    "[ \$(wc -l <u.txt) -eq 4 ] && grep -q '^ *20 rc 3\$' u.txt && grep -qxF \"     20 \$HDR\" u.txt &&
     grep -q \"^ *20         growing: +2.0 MiB per step over the last 19 steps of recording thread 2 (tid N, 'prefetch')\$\" u.txt &&
     grep -q '^ *20         by caller: 64.0 MiB build_model, 40.0 MiB cache_one (growing)\$' u.txt"
# a live `snapshot PID` of a longer run (60 steps of 50 ms, a buffer kept every 62.5 ms), taken
# once 30 entries are in: its prefix says the same verdict as the final record, over fewer steps,
# and names the thread as the exit dump does (its tid and name, from the flight record's thread
# records: the live snapshot read 'of recording thread 2' alone before)
REG=$XDG_RUNTIME_DIR/cumemhist
"$CMH" record -q -o lv.cmh -- "$B/tests/paced_leak" 60 50000 60 62500 >/dev/null 2>&1 &
rp=$!
wait_until 30 'ls "$REG"/*.proc >/dev/null 2>&1'
pid=$(cd "$REG" 2>/dev/null && ls *.proc 2>/dev/null | sed -n 's/\.proc$//p' | head -1)
wait_until 30 '"$CMH" snapshot "${pid:-0}" -o ls.cmh >/dev/null 2>ls.err && grep -q ": [3-9][0-9] entries so far\|: [0-9]\{3,\} entries so far" ls.err'
wait $rp
"$CMH" leaks --fail-on-leak ls.cmh >ls.txt 2>&1
rcl=$?
"$CMH" leaks --fail-on-leak lv.cmh >lv.txt 2>&1
rcf=$?
check "a live snapshot ($(cat ls.err)) and the final record: the same verdict, +2.0 MiB per step of recording thread 2, exit 3 ($rcl: $(grep '^        growing' ls.txt) | $rcf: $(grep '^        growing' lv.txt))" \
    "[ $rcl -eq 3 ] && [ $rcf -eq 3 ] && grep -q \"^        growing: +2.0 MiB per step over the last [0-9]* steps of recording thread 2 (tid [0-9]*, 'prefetch')\$\" ls.txt &&
     grep -q \"^        growing: +2.0 MiB per step over the last 59 steps of recording thread 2 (tid [0-9]*, 'prefetch')\$\" lv.txt"

# its twin filling the same 20 buffers back to back (a cache made in one go): no steps of one
# allocation, not growing, the same in each run
i=0
: >says.txt
while [ $i -lt 5 ]; do
    "$CMH" record -q -o pb$i.cmh -- "$B/tests/paced_leak" 20 20000 20 0 >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak pb$i.cmh >pb.txt 2>&1
    echo "rc $?" >>says.txt
    grep -E '^steps|^        (growing|stopped|state|held|rose)' pb.txt | sed 's/ made within [^,]*,/ made within T,/' >>says.txt
    i=$((i + 1))
done
sort says.txt | uniq -c >u.txt
check "its twin making the 20 buffers back to back: not growing, the same in 5 of 5 runs ($(tr -s ' ' <u.txt | cut -c1-120 | tr '\n' '|'))" \
    "! awk '\$1 != 5 { bad = 1 } END { exit !bad }' u.txt && ! grep -q 'growing\|per step' u.txt && ! grep -q 'rc 3' u.txt"

# one of those runs (tests/fixtures/leaks/cache_burst.cmh): the site of main's model and the
# cache, main's steps found, the cache thread's not.  Judged by main's steps as the thread that
# "made its blocks" when main came first in the hash table of blocks (the addresses' order):
# 'state' in 1 run of 12, 'held, steps not found' in the rest
"$CMH" leaks "$F/leaks/cache_burst.cmh" >cb.txt 2>&1
check "a site of two threads' blocks, one thread without steps: held, steps not found, whatever the addresses ($(grep -E '^ +104' cb.txt | tr -s ' '))" \
    "grep -q '^     104.0 MiB      21 .*  held     loop_grab' cb.txt && grep -q '^        held, steps not found: its 21 still-live blocks were made within 54 ms' cb.txt"

# the text report says how it was judged
"$CMH" leaks e0.cmh >e0.txt
check "a thread-by-thread verdict names the threads in the text report too" "grep -q 'judged thread by thread' e0.txt"

# no step at all (a driver-level PyTorch record with no loop to see): growth is not judged, and
# leaks says what it can honestly say instead: when each site's still-live blocks were made, and
# how much still-live memory the run made, and in what bursts (the file's times, fixed)
"$CMH" leaks --fail-on-leak "$F/h200/torch_plain.cmh" >lk.txt 2>/dev/null
rc=$?
check "no steps: exit 5, growth over the run told ($(tail -1 lk.txt))" \
    "[ $rc -eq 5 ] && grep -q '^growth cannot be judged: the steps are unknown; 600.3 MiB still live (20 blocks) was made in bursts, within 2 of the 10 equal parts of the 6.96 s its entries span, of a 12.38 s run: no steady rate\$' lk.txt"
check "no steps: each held site says when its still-live blocks came, and that growth is not judged" \
    "grep -q '^        held, steps not found: its 6 still-live blocks were made within 271 ms, first to last; growth not judged\$' lk.txt"
"$CMH" leaks --json "$F/h200/torch_plain.cmh" 2>/dev/null | py -c '
import json, sys
d = json.load(sys.stdin)[0]
assert d["outcome"].startswith("growth cannot be judged: the steps are unknown; 600.3 MiB still live"), d["outcome"]
assert all(s["verdict"] == "unjudged" and s["says"].startswith("held, steps not found: ") for s in d["sites"]), [s["says"] for s in d["sites"]]
' && ok "no steps, --json: the same words" || bad "no steps, --json"
# a rate is a trend and needs as many observations as a trend: per second, a run of 1 s at least
# whose still-live memory came in 4 of its 10 stretches at least; else what is known (bytes,
# blocks, the run) without a rate.  Before, 40 blocks made in 49 ms read '16.5 GiB/s on average'
py - steady.pickle short.pickle bursts.pickle burst1.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
def make(path, times, passing=()):  # blocks of distinct sizes kept, made at the times given (us): no loop to find
    segs, tr = [], []
    for k, t in enumerate(times):
        size, a = (k + 1) * MIB + k * 4096, 0x7f5000000000 + k * (1 << 30)
        fr = [{"filename": "/proj/run.py", "line": 10 + k % 3, "name": "grow%d" % (k % 3)}]
        tr.append({"action": "segment_alloc", "addr": a, "size": size, "stream": 0, "time_us": t, "frames": fr})
        tr.append({"action": "alloc", "addr": a, "size": size, "stream": 0, "time_us": t + 1, "frames": fr})
        segs.append({"device": 0, "address": a, "total_size": size, "allocated_size": size, "active_size": size, "requested_size": size,
                     "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr,
                     "blocks": [{"address": a, "size": size, "requested_size": size, "state": "active_allocated", "frames": fr}]})
    for t in passing:  # a block made and freed: the run goes on, no still-live memory comes of it
        a, fr = 0x7f0000000000, [{"filename": "/proj/run.py", "line": 30, "name": "passing"}]
        for act in ("segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"):
            tr.append({"action": act, "addr": a, "size": MIB, "stream": 0, "time_us": t, "frames": fr})
    pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}}, open(path, "wb"), protocol=4)
T0 = 1_000_000_000
make(sys.argv[1], [T0 + k * 250_000 + (k * 7919) % 1000 for k in range(40)])  # one every 250 ms through 10 s
make(sys.argv[2], [T0 + k * 1250 for k in range(40)])  # the same 40 within 50 ms
make(sys.argv[3], [T0 + k * 500 for k in range(20)] + [T0 + 10_000_000 + k * 500 for k in range(20)])  # two bursts 10 s apart
make(sys.argv[4], [T0 + k * 500 for k in range(20)], [T0 + 10_000_000])  # one burst, then a block made and freed 10 s later
EOF
"$CMH" leaks steady.pickle >r1.txt 2>&1
"$CMH" leaks short.pickle >r2.txt 2>&1
"$CMH" leaks bursts.pickle >r3.txt 2>&1
"$CMH" leaks burst1.pickle >r4.txt 2>&1
check "no steps, 40 blocks through 10 s: an average rate ($(grep "^growth" r1.txt))" \
    "grep -q '^growth cannot be judged: the steps are unknown; 823.0 MiB still live (40 blocks) was made over the 9.75 s run: 84.4 MiB/s on average\$' r1.txt"
check "no steps, 40 blocks in 49 ms: no rate per second ($(grep "^growth" r2.txt))" \
    "grep -q '^growth cannot be judged: the steps are unknown; 823.0 MiB still live (40 blocks) was made over the 49 ms run, too short a run for a rate per second\$' r2.txt && ! grep -q '/s' r2.txt"
check "no steps, two bursts 10 s apart: no rate ($(grep "^growth" r3.txt))" \
    "grep -q '^growth cannot be judged: the steps are unknown; 823.0 MiB still live (40 blocks) was made in bursts, within 2 of the 10 equal parts of the 10.01 s run: no steady rate\$' r3.txt && ! grep -q '/s' r3.txt"
# one burst reads as one ('in 1 of the 36.19 s run's 10 stretches' before)
check "no steps, one burst and a block made and freed 10 s later: one burst ($(grep "^growth" r4.txt))" \
    "grep -q '^growth cannot be judged: the steps are unknown; 210.7 MiB still live (20 blocks) was made in one burst, within one tenth of the 10.00 s run: no steady rate\$' r4.txt"

# The span `leaks` gives is its entries', and says so when the process ran longer: a program that
# allocates, then holds still until told to end, read "was made over the 9 ms run" for a process
# that ran half a second or more (tests/ringoom.c waits for its go file; the pause only makes the
# run longer than the allocations, no time is asserted)
rm -f go
( sleep 0.5; touch go ) &
FAKECUDA_CAPACITY=512M FAKECUDA_DEVICES=1 "$CMH" record -q -o held.cmh -- "$B/tests/ringoom" "$T/go" >held.out 2>&1
wait
"$CMH" leaks held.cmh >held.txt 2>&1
check "no steps, allocations then a pause: the entries' span, of the process's longer run ($(grep "^growth" held.txt))" \
    "grep -q '^growth cannot be judged: the steps are unknown; 10.0 MiB still live (1 block) was made over the [0-9.]* [mu]*s its entries span, of a [0-9.]* m*s run, too short a span for a rate per second\$' held.txt"
finish
