#!/bin/sh
# lifecycle_test.sh BUILD_DIR SOURCE_DIR - ends of a process the recorder must not change, and
# what it must not lose on the way (tests/lifecycle.c):
#  - main() ending by pthread_exit(): the process ends (status 0) when its last thread does, here
#    main itself or a worker, with its exit dump written: the recorder's helper thread was the
#    last thread and kept the process alive for good (and SIGTERM pending);
#  - a program that closes every descriptor it did not open (a daemon) and reuses their numbers:
#    its files untouched, its exit dump kept (never replaced by a recovery), no flight record left;
#  - -o run.%r.cmh and a rank that forks CUDA-using children: each child its own NAME.PID file;
#  - --enabled state: a device that ran out of memory is listed, with its OOM count.
TEST=lifecycle . "$(dirname "$0")/testlib.sh"
L=$B/tests/lifecycle
entries() { "$CMH" trace --json "$1" 2>/dev/null | py -c "import json,sys; print(sum(len(d['entries']) for d in json.load(sys.stdin)))"; }

# --- pthread_exit() from main: alone, and with a worker thread that is the last to end ---
# (under ASan, LeakSanitizer counts what the ended main thread's libc left (its thread memory,
# freed by no one once exit() runs from another thread) and makes the status 1: the status is
# what these checks are about, so it is not asked to)
asan_was=${ASAN_OPTIONS-}
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
for how in mainexit lastworker; do
    rm -f m.cmh m.cmh.*
    timeout -s KILL 60 "$CMH" record -o m.cmh -- "$L" $how >/dev/null 2>err.txt
    rc=$?
    want=1 && [ $how = lastworker ] && want=21
    n=$(entries m.cmh)
    check "record, main ends by pthread_exit() ($how): exit 0, the exit dump written with $want entries, nothing recovered (rc $rc, $n entries: $(cat err.txt))" \
        "[ $rc -eq 0 ] && [ '$n' = $want ] && grep -q '^cumemhist: wrote .*m.cmh' err.txt && ! grep -q 'without its exit dump\|recover\|killed' err.txt && [ ! -e m.cmh.flight ]"
    rm -f p.cmh p.cmh.*
    CUMEMHIST_OUTPUT=$T/p.cmh LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" timeout -s KILL 60 "$L" $how >/dev/null 2>err.txt
    rc=$?
    check "plain preload, main ends by pthread_exit() ($how): exit 0, p.cmh written, no flight record left (rc $rc: $(cat err.txt))" \
        "[ $rc -eq 0 ] && [ -s p.cmh ] && [ ! -e p.cmh.flight ]"
done
if [ -n "$asan_was" ]; then ASAN_OPTIONS=$asan_was; else unset ASAN_OPTIONS; fi

# --- a program that closes its inherited descriptors and opens its own in their place ---
rm -f c.cmh c.cmh.* out.txt
CUMEMHIST_FLIGHT=1 "$CMH" record -o c.cmh -- "$L" closefds 100000 >/dev/null 2>err.txt
rc=$?
n=$(entries c.cmh)
check "closefds under record: exit 0, its own file intact ('$(head -c 40 out.txt | tr '\n' ' ')')" \
    "[ $rc -eq 0 ] && [ \"\$(cat out.txt)\" = \"\$(printf 'hello\nworld')\" ]"
check "closefds under record: the exit dump kept, 150001 entries, no recovery, no _exit() said ($n entries: $(cat err.txt))" \
    "[ '$n' = 150001 ] && ! grep -q 'without its exit dump\|_exit\|recover' err.txt && ! \"$CMH\" peak c.cmh 2>/dev/null | grep -q 'recovered\|_exit' && [ ! -e c.cmh.flight ]"
rm -f p.cmh p.cmh.* out.txt
CUMEMHIST_FLIGHT=1 CUMEMHIST_OUTPUT=$T/p.cmh LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" "$L" closefds 100000 >/dev/null 2>err.txt
check "closefds, plain preload: p.cmh written, its own file intact, no flight record left behind ($(ls p.cmh* | tr '\n' ' '))" \
    "[ -s p.cmh ] && [ ! -e p.cmh.flight ] && [ \"\$(cat out.txt)\" = \"\$(printf 'hello\nworld')\" ]"

# --- the rank pattern and a rank's forked children ---
rm -f run.*
RANK=0 WORLD_SIZE=2 "$CMH" record -o run.%r.cmh -- "$L" forks 3 >/dev/null 2>err.txt
rc=$?
check "record -o run.%r.cmh, 3 forked children: exit 0, run.0.cmh and one run.0.PID.cmh per child, nothing lost ($(ls run.* | tr '\n' ' '): $(cat err.txt))" \
    "[ $rc -eq 0 ] && [ -s run.0.cmh ] && [ \$(ls run.0.*.cmh | wc -l) -eq 3 ] && ! grep -q 'lost\|no flight record' err.txt"
check "run.0.cmh is the rank's own (1 MiB), each child's its 2 MiB" \
    "\"$CMH\" peak run.0.cmh | grep -q 'peak allocated: 1.0 MiB' && for f in run.0.*.cmh; do \"$CMH\" peak \$f | grep -q 'peak allocated: 2.0 MiB' || exit 1; done"
rm -f run.*
RANK=3 CUMEMHIST_OUTPUT=$T/run.%r.cmh LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" "$L" forks 2 >/dev/null 2>err.txt
check "plain preload, RANK=3, run.%r.cmh: run.3.cmh and each child's run.3.PID flight record, no refusal ($(ls run.* | tr '\n' ' '): $(cat err.txt))" \
    "[ -s run.3.cmh ] && [ \$(ls run.3.*.cmh.flight | wc -l) -eq 2 ] && ! grep -q 'no flight record' err.txt"

# --- --enabled state: the device that ran out of memory, and its count ---
rm -f st.cmh
FAKECUDA_DEVICES=3 FAKECUDA_CAPACITY=64M "$CMH" record -q --enabled state -o st.cmh -- "$L" oom >/dev/null 2>&1
"$CMH" oom st.cmh >oom.txt 2>&1
check "--enabled state, oom: device 2's 2 out-of-memory errors ($(cat oom.txt))" \
    "grep -q 'device 2: 2 out-of-memory errors; no history to explain them (recorded with enabled=state)' oom.txt && grep -q 'device 0: no out-of-memory error (counted without history' oom.txt"
"$CMH" summary st.cmh >sum.txt 2>&1
check "--enabled state, summary: device ID 2 with CUDA OOMs: 2, device 0 with 0" \
    "grep -A3 'device ID 2' sum.txt | grep -q 'CUDA OOMs: 2 ' && grep -A3 'device ID 0' sum.txt | grep -q 'CUDA OOMs: 0 '"
j=$("$CMH" summary --json st.cmh 2>/dev/null | py -c "import json,sys; print(sorted((d['device'], d['stats'].get('num_ooms', d.get('num_ooms'))) for d in json.load(sys.stdin)))" 2>&1)
j2=$("$CMH" oom --json st.cmh 2>/dev/null | py -c "import json,sys; print(sorted((d['device'], d.get('num_ooms')) for d in json.load(sys.stdin)))" 2>&1)
check "--enabled state, summary --json and oom --json agree: $j / $j2" "[ \"$j\" = '[(0, 0), (2, 2)]' ] && [ \"$j2\" = \"$j\" ]"
"$CMH" owners st.cmh >own.txt 2>&1
"$CMH" report st.cmh -o st.html >/dev/null 2>&1
check "--enabled state, owners and report list device 2; report says its 2 errors" \
    "grep -q 'st.cmh, device 2' own.txt && grep -q 'data-oom-device=\"2\" data-ooms=\"2\"' st.html"
finish
