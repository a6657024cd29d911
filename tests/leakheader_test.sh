#!/bin/sh
# leakheader_test.sh BUILD_DIR SOURCE_DIR - leaks on a multi-threaded program reads the same
# every run: thleak_prog's 4 threads race through 40 steps each (thread 2 keeping 2 MiB a step)
# after main's 256 MiB model.  The pattern across their interleaved entries is the scheduler's
# (one run read 'steps: 39 detected ... (period 65 entries)', another 'steps: 160 ... (period 16
# entries)'); the header says the threads' own steps, the same in each of 3 runs, and so do the
# verdicts and --json's step count.
TEST=leakheader . "$(dirname "$0")/testlib.sh"
for i in 1 2 3; do
    FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=8G "$CMH" record -q -o th$i.cmh -- "$B/tests/thleak_prog" >/dev/null 2>&1
    "$CMH" leaks th$i.cmh >lk$i.txt 2>&1
    sed -n 3p lk$i.txt >hdr$i.txt
    # the rows without their times and tids (those are the run's own)
    grep -E '^ +[0-9.]+ [KMG]?i?B +[0-9]+ ' lk$i.txt | awk '{print $1, $2, $3, $6, $7}' >rows$i.txt
    "$CMH" leaks --json th$i.cmh | py -c "import json,sys; d=json.load(sys.stdin)[0]; print(d['steps']['count'], d['judged'])" >js$i.txt
done
check "the header: the threads' own steps ($(cat hdr1.txt))" \
    "grep -q '^steps: each recording thread.s own (their entries interleave as they race, so a pattern across them is the scheduler.s): 4 threads repeat 40 steps each (16 to 17 of their own entries a step)' hdr1.txt"
check "the header is the same in 3 runs" "cmp -s hdr1.txt hdr2.txt && cmp -s hdr1.txt hdr3.txt"
check "the verdicts are the same in 3 runs ($(tr '\n' ';' <rows1.txt))" \
    "[ -s rows1.txt ] && cmp -s rows1.txt rows2.txt && cmp -s rows1.txt rows3.txt && grep -q '256.0 MiB 1 state' rows1.txt && grep -q '80.0 MiB 40 growing' rows1.txt"
check "--json's step count and judged are the same in 3 runs ($(cat js1.txt))" "cmp -s js1.txt js2.txt && cmp -s js1.txt js3.txt && grep -q '^40 True' js1.txt"

# tests/threaded_leak steady 300 free as recorded in 1 CI run of 40 (the fixture): 4 threads each
# keep their first 5 buffers, then allocate and free one a turn; the second thread started 75
# of the first's turns in, the last two after the first two were done.  The record's steps are
# the first thread's, and judged by them the others' warm-ups read 'growing: +1.1 KiB per step
# over the last 223 steps'; each thread's own steps say that none grows
"$CMH" leaks --fail-on-leak "$F/leaks/race_warmups.cmh" >rw.txt 2>&1
rc=$?
check "threads racing, each warming up its cache then steady: no site grows, exit 0 ($rc: $(sed -n 6,7p rw.txt | tr -s ' ' | tr '\n' '|'))" \
    "[ $rc -eq 0 ] && grep -q ' state .*step_buffer' rw.txt && grep -q 'growing in none' rw.txt"
finish
