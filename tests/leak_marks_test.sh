#!/bin/sh
# leak_marks_test.sh BUILD_DIR SOURCE_DIR - leaks that marks, threads and stream work must not
# hide or blur (tests/leak_marks.c), each recorded 5 times: the same words on every run.
#  - one "step 0" (or "iter 0") mark before a loop keeping 1 MiB an iteration switched the
#    allocation pattern's 12 steps off: 'steps: 1 from the program's marks ("step"); growth needs
#    4 steps', the leak 'steady', exit 5 for --fail-on-leak; a mark every 10th of 25 iterations
#    (3 steps) read 'rising', exit 5.  Marks too few to judge by give way to the pattern (said in
#    the steps line); marks that give enough still win.  So does one PyTorch annotate entry;
#  - a site with fewer steps than growth needs, back to nothing at its one boundary, read
#    'steady' (a judgment the steps cannot give); now 'held, too few steps ...; growth not judged';
#  - one thread keeping 256 KiB an iteration through a helper the other threads use for their
#    temporaries (and main for its weights) read '+243.3 KiB per step over the last 18 steps',
#    then '+298.7 KiB ... 17', '+237.4 KiB ... 10' (the record's steps, one racing thread's,
#    with the others' temporaries where the scheduler put them); now that thread's own, every run;
#  - main's 64 MiB weights, made once through that helper before the threads started, 'grew in
#    5 (3, 6, 4) steps, then stopped' by the same temporaries; now 'not growing', every run;
#  - a leak rising in 30 steps of 40, then flat for the last 10, read 'growing: +871.6 KiB per
#    step over the last 39 steps' (exit 3): flat for longer than twice its longest pause between
#    rises (and 3 steps) it stopped: 'stopped: grew +1.0 MiB per step over steps 1-30, ...' (exit
#    6; it read 'state', exit 0, before the verdict of its own);
#  - a block freed with stream work pending: '8.0 MiB in 1 block still live' in the header,
#    '12.0 MiB still live (2 blocks)' in the outcome; now one figure.
TEST=leak_marks . "$(dirname "$0")/testlib.sh"
P=$B/tests/leak_marks

# runs NAME CMD...: 5 recordings of CMD; for each, `leaks --fail-on-leak`'s exit status, its steps
# line and each site's function, verdict and words (--json, tids left out), one line each, counted (NAME.u)
runs() {
    name=$1
    shift
    i=0
    : >"$name.all"
    while [ "$i" -lt 5 ]; do
        "$CMH" record -q -o "$name$i.cmh" -- "$@" >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak "$name$i.cmh" >"$name$i.txt" 2>&1
        echo "rc $?" >>"$name.all"
        "$CMH" leaks --json "$name$i.cmh" >"$name.json" 2>&1
        py - "$name.json" >>"$name.all" <<'PY'
import json, re, sys
for d in json.load(open(sys.argv[1])):
    print(d["steps"]["text"])
    for s in d["sites"]:
        print("%s %s: %s" % (s["site"]["function"], s["verdict"], re.sub(r" \(tid \d+, '[^']*'\)", "", s["says"])))
PY
        i=$((i + 1))
    done
    sort "$name.all" | uniq -c >"$name.u"
}
same() { ! awk '$1 != 5 { bad = 1 } END { exit !bad }' "$1.u"; }
has() { grep -qF "5 $2" "$1.u"; }
says() { tr -s ' ' <"$1.u" | tr '\n' '|'; }

runs nomark "$P" marks 12
check "12 iterations keeping 1 MiB each, no mark: the pattern's 12 steps, growing, exit 3 ($(says nomark))" \
    "same nomark && has nomark 'rc 3' && has nomark 'steps: 12 detected from the allocation pattern (period 3 entries)' &&
     has nomark 'keep growing: growing: +1.0 MiB per step over the last 11 steps'"

runs onemark "$P" marks 12 "step 0"
check "the same with one 'step 0' mark before the loop: the pattern's 12 steps (the mark's 1 too few), growing, exit 3, 5 of 5 runs ($(says onemark))" \
    "same onemark && has onemark 'rc 3' &&
     has onemark 'steps: 12 detected from the allocation pattern (period 3 entries), not the 1 from the program'\''s marks (\"step\") (fewer than the 4 growth needs)' &&
     has onemark 'keep growing: growing: +1.0 MiB per step over the last 11 steps'"

runs iter "$P" marks 12 "iter 0"
check "one 'iter 0' mark: the same, exit 3 ($(says iter))" \
    "same iter && has iter 'rc 3' && has iter 'keep growing: growing: +1.0 MiB per step over the last 11 steps'"

runs sparse "$P" sparse 25
check "a mark every 10th of 25 iterations (3 steps): the pattern's 25, growing, exit 3, 5 of 5 runs ($(says sparse))" \
    "same sparse && has sparse 'rc 3' &&
     has sparse 'steps: 25 detected from the allocation pattern (period 3 entries), not the 3 from the program'\''s marks (\"step\") (fewer than the 4 growth needs)' &&
     has sparse 'keep growing: growing: +1.0 MiB per step over the last 24 steps'"

"$CMH" record -q -o few.cmh -- "$P" marks 3 "step 0" >/dev/null 2>&1
"$CMH" leaks --fail-on-leak few.cmh >few.txt 2>&1
rc=$?
check "one mark before 3 iterations (no pattern of 4 steps): the mark's 1 step, the row held, not steady, growth not judged, exit 5 ($(tr '\n' '|' <few.txt))" \
    "[ $rc = 5 ] && grep -q 'steps: 1 from the program.s marks (\"step\"); growth needs 4 steps' few.txt &&
     grep -q ' held  *keep ' few.txt && ! grep -q steady few.txt &&
     grep -qF 'held, too few steps (1 of the 4 needed); growth not judged' few.txt"

# marks that give enough steps still win over the pattern
"$CMH" record -q -o many.cmh -- "$P" sparse 60 >/dev/null 2>&1
"$CMH" leaks many.cmh >many.txt 2>&1
check "a mark every 10th of 60 iterations (6 steps): the marks' steps still ($(grep steps: many.txt))" \
    "grep -q 'steps: 6 from the program.s marks (\"step\")' many.txt && grep -q ' growing  *keep ' many.txt"

# a PyTorch snapshot: one annotate entry ("step 1") in a loop of 6 iterations keeping 512 KiB each
py - <<'PY'
import pickle
M, K, P = 1 << 20, 1 << 10, 0x7F0000000000
LIN = [{"name": "forward", "filename": "/w/model.py", "line": 42}, {"name": "<module>", "filename": "/w/train.py", "line": 9}]
LEAK = [{"name": "forward", "filename": "/w/model.py", "line": 77}, {"name": "<module>", "filename": "/w/train.py", "line": 9}]
t = [1_790_000_000_000_000]
def ent(a, addr, size, fr):
    t[0] += 100
    return {"action": a, "addr": addr, "size": size, "stream": 0, "time_us": t[0], "frames": fr}
tr = [ent("segment_alloc", P, 20 * M, LIN)]
tr.append({"action": "annotate", "addr": 0, "size": 0, "stream": 0, "time_us": t[0] + 50, "user_metadata": "step 1"})
for i in range(6):
    tr.append(ent("alloc", P + i * 512 * K, 512 * K, LEAK))
    tr += [ent("alloc", P + 8 * M, 2 * M, LIN), ent("free_requested", P + 8 * M, 2 * M, LIN), ent("free_completed", P + 8 * M, 2 * M, LIN)]
blk = lambda a, s, st, fr: {"address": a, "size": s, "requested_size": s if st != "inactive" else 0, "state": st, "frames": fr}
blocks = [blk(P + i * 512 * K, 512 * K, "active_allocated", LEAK) for i in range(6)] + [blk(P + 3 * M, 17 * M, "inactive", [])]
seg = {"device": 0, "address": P, "total_size": 20 * M, "allocated_size": 3 * M, "active_size": 3 * M, "requested_size": 3 * M,
       "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": LIN, "blocks": blocks}
pickle.dump({"segments": [seg], "device_traces": [tr], "allocator_settings": {}, "external_annotations": []}, open("ann.pickle", "wb"))
PY
"$CMH" leaks --fail-on-leak ann.pickle >ann.txt 2>&1
rc=$?
check "a PyTorch snapshot with one 'step 1' annotate entry: the pattern's steps, growing, exit 3 ($(tr '\n' '|' <ann.txt))" \
    "[ $rc = 3 ] && grep -q 'detected from the allocation pattern.*, not the 1 from' ann.txt && grep -q ' growing  *forward (/w/model.py:77)' ann.txt"

# threads: a leak through a helper the other threads use for temporaries
runs shared "$P" shared
check "thread 2 keeping 256 KiB an iteration through the helper the others use: its own rate and steps, growing, exit 3, 5 of 5 runs ($(says shared))" \
    "same shared && has shared 'rc 3' &&
     grep -q '5 work_buf growing: growing: +256.0 KiB per step over the last 19 steps of recording thread [0-9]*\$' shared.u"
for i in 0 1 2 3 4; do grep -h 'by caller' "shared$i.txt"; done | sort | uniq -c >callers.u
check "its callers: main's weights apart, the worker's blocks growing, 5 of 5 runs ($(tr -s ' ' <callers.u))" \
    "grep -qF '5         by caller: 64.0 MiB main (' callers.u && grep -q 'worker (.*) (growing)\$' callers.u && [ \$(wc -l <callers.u) = 1 ]"

runs own "$P" own
check "main's weights made once through the helper before the threads: not growing, no growth told, every run; the leak elsewhere growing ($(says own))" \
    "same own && has own 'rc 3' && has own 'work_buf state: state: 64.0 MiB held across steps, not growing' &&
     grep -q '5 cache_entry growing: growing: +256.0 KiB per step over the last 19 steps of recording thread [0-9]*\$' own.u"

# a leak that grew in 30 steps of 40 and stopped: not growing now, a leak that stopped (stops_leak.c)
runs stops "$B/tests/stops_leak" 40 30 marks
check "a leak rising in 30 of 40 steps, then flat for 10: stopped, exit 6, 5 of 5 runs ($(says stops))" \
    "same stops && has stops 'rc 6' && has stops 'loop_grab stopped: stopped: grew +1.0 MiB per step over steps 1-30, then flat for the last 10 steps; 38.0 MiB still held at the end, never freed'"

# stream work pending: one figure for what is still live
"$CMH" record -q -o pend.cmh -- "$B/tests/pending_free" >/dev/null 2>&1 || bad "pending_free did not run"
"$CMH" leaks pend.cmh >pend.txt 2>&1
"$CMH" leaks --json pend.cmh >pend.json 2>&1
check "a block freed with stream work pending: the header and the outcome say the same 4.0 MiB in 1 block ($(grep -E 'still live' pend.txt | tr '\n' '|'))" \
    "grep -q '4.0 MiB in 1 block still live at the end' pend.txt && grep -q 'growth cannot be judged: .*; 4.0 MiB still live (1 block)' pend.txt &&
     py -c 'import json,sys; d=json.load(open(\"pend.json\"))[0]; sys.exit(not (d[\"live_bytes\"] == 4 << 20 and \"4.0 MiB still live (1 block)\" in d[\"outcome\"]))'"

finish
