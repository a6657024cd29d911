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
    grep '^steps: ' lk$i.txt >hdr$i.txt # (after the process's lines, how it ended among them)
    # the rows without their times and tids (those are the run's own)
    # (a time is one word or two: +5.788s, +117.8 ms, +176 µs)
    grep -E '^ +[0-9.]+ [KMG]?i?B +[0-9]+ ' lk$i.txt | sed -E 's/ [-+][0-9.]+( ms| µs|s)( |$)/ /g' | awk '{print $1, $2, $3, $4, $5}' >rows$i.txt
    "$CMH" leaks --json th$i.cmh | py -c "import json,sys; d=json.load(sys.stdin)[0]; print(d['steps']['count'], d['judged'])" >js$i.txt
done
check "the header: the threads' own steps ($(cat hdr1.txt))" \
    "grep -q '^steps: each recording thread.s own (threads with loops of their own: a pattern across their entries would be the scheduler.s): 4 threads repeat 40 steps each (16 to 17 of their own entries a step)' hdr1.txt"
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

# thleak_prog as recorded in 1 run of 8 (the fixture): the 4 threads' turns came round in order,
# A B C D A B ..., one step each, so that each of the 160 steps found across them was one
# thread's; taken for 160 threads' whole lives (only two in a row were compared), they did not
# race, and the header read 'steps: 160 detected from the allocation pattern (period 16
# entries)' (the clean-clone CI's leakheader, stop 52).  Each thread repeats 40 steps of its own.
"$CMH" leaks "$F/leaks/round_robin_threads.cmh" 2>&1 | grep '^steps: ' >rr.txt
check "threads taking turns in order: each recording thread's own steps ($(cut -c1-90 rr.txt))" \
    "grep -q '^steps: each recording thread.s own (threads with loops of their own: a pattern across their entries would be the scheduler.s): 4 threads repeat 40 steps each' rr.txt"

# Main marks the 40 steps (thleak_prog marks) and holds its model, made once before them; thread
# 2 keeps 2 MiB a step.  Main repeats no step: before, 'Each of the 2 recording threads holding
# memory repeats 4 or more steps of its own' (--json threads 2, threads_judged 2).
FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=8G "$CMH" record -q -o thm.cmh -- "$B/tests/thleak_prog" marks >/dev/null 2>&1
"$CMH" leaks thm.cmh >thm.txt 2>&1
"$CMH" leaks --json thm.cmh 2>/dev/null | py -c "import json,sys; d=json.load(sys.stdin)[0]; print(d['steps']['threads'], d['steps']['threads_judged'], d['judged'])" >thm.js
check "main marking the steps, its model made once, repeats none: '$(grep '^steps' thm.txt)' ($(cat thm.js))" \
    "grep -q '^steps: 40 from the program.s marks (\"step\"). Of the 2 threads holding memory, 1 has a loop of its own (4 steps or more); its sites are also judged by that loop.s steps\$' thm.txt &&
     grep -q '^2 1 True\$' thm.js && grep -q '80.0 MiB  *40 .* growing' thm.txt"

# One step mark is one step (two_dev_steps 1 1 marks: one cmh_mark).  Before, 'steps: unknown (no
# step marks or annotations, ...)' where two marks read 'steps: 2 from the program's marks'.
FAKECUDA_DEVICES=2 "$CMH" record -q -o one.cmh -- "$B/tests/two_dev_steps" 1 1 marks >/dev/null 2>&1
"$CMH" leaks --fail-on-leak --device 0 one.cmh >one.txt 2>&1
rc=$?
"$CMH" leaks --json one.cmh 2>/dev/null | py -c "import json,sys; print(' '.join('%s:%s:%s' % (d['steps']['count'], d['steps']['source'], d['judged']) for d in json.load(sys.stdin)))" >one.js
"$CMH" report -o one.html one.cmh 2>/dev/null
check "one mark: 'steps: 1', growth not judged from it (exit $rc; $(grep '^steps' one.txt); $(cat one.js))" \
    "[ $rc -eq 5 ] && grep -q '^steps: 1 from the program.s marks (\"step\"); growth needs 4 steps (one to warm up, three to rise across)\$' one.txt &&
     grep -q '^1:marks:False 1:marks:False\$' one.js && grep -q 'steps: 1 from the program&apos;s marks' one.html && ! grep -q 'steps: unknown' one.html"
# a PyTorch snapshot with one annotated step ('step' START and END, external_annotations)
py - one.pickle <<'PY' || bad "writing one.pickle failed"
import pickle, sys
MiB, fr = 1 << 20, [{'name': 'train_step', 'filename': '/home/u/train.py', 'line': 9}]
b, t = 1 << 40, 1000
tr = [{'action': 'segment_alloc', 'addr': b, 'size': 1024 * MiB, 'stream': 0, 'time_us': t, 'frames': fr},
      {'action': 'alloc', 'addr': b, 'size': 8 * MiB, 'stream': 0, 'time_us': t + 10, 'frames': fr},
      {'action': 'alloc', 'addr': b + 8 * MiB, 'size': 4 * MiB, 'stream': 0, 'time_us': t + 30, 'frames': fr},
      {'action': 'free_requested', 'addr': b + 8 * MiB, 'size': 4 * MiB, 'stream': 0, 'time_us': t + 40, 'frames': fr},
      {'action': 'free_completed', 'addr': b + 8 * MiB, 'size': 4 * MiB, 'stream': 0, 'time_us': t + 40, 'frames': fr}]
ann = [{'name': 'step', 'stage': 'START', 'device': 0, 'time_us': t + 20}, {'name': 'step', 'stage': 'END', 'device': 0, 'time_us': t + 50}]
seg = {'device': 0, 'address': b, 'total_size': 1024 * MiB, 'allocated_size': 8 * MiB, 'active_size': 8 * MiB, 'requested_size': 8 * MiB,
       'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': fr,
       'blocks': [{'address': b, 'size': 8 * MiB, 'requested_size': 8 * MiB, 'state': 'active_allocated', 'frames': fr}]}
pickle.dump({'segments': [seg], 'device_traces': [tr], 'external_annotations': ann}, open(sys.argv[1], 'wb'))
PY
"$CMH" leaks one.pickle >onep.txt 2>&1
check "one annotated step: '$(grep '^steps' onep.txt)'" \
    "grep -q '^steps: 1 from step annotations; growth needs 4 steps (one to warm up, three to rise across)\$' onep.txt"
finish
