#!/bin/sh
# outpath_test.sh BUILD_DIR SOURCE_DIR - where `record -o NAME` (and CUMEMHIST_OUTPUT) put the
# snapshots, and that none is lost or replaced:
#  1. two runs given the same -o in one directory: the path (its claim, its flight record) stays
#     the first run's while its process runs; the second run's program writes NAME.PID.cmh, and
#     `record` says whose NAME is; nothing is left beside them once both are over;
#  2. a relative -o (or CUMEMHIST_OUTPUT) is resolved where it was given: a shell wrapper that
#     changes directory, or a program that chdir()s, still writes NAME there;
#  3. SIGTERM / SIGHUP to `record` running a shell wrapper reach the CUDA process too: `record`
#     waits for its snapshot and gives it NAME, as at a normal end; a process still running when
#     `record` returns is named with the file it will write.
# Every wait is for an event (a file, a process's end), never for a time.
TEST=outpath . "$(dirname "$0")/testlib.sh"
P=$B/tests/outpath_prog
PRE="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so"
leftovers() { ls -a "$1" | grep -E '\.claim|\.flight$'; }

# ---- 1. two runs, one path ----
mkdir same && cd same || exit 1
"$CMH" record -o same.cmh -- "$P" -r "$T/a.ready" -w "$T/a.go" >a.out 2>&1 &
RA=$!
wait_until 60 '[ -s "$T/a.ready" ]' || bad "the first run's program did not start"
APID=$(cat "$T/a.ready")
check "the first run's program holds same.cmh (its claim and flight record)" '[ -f same.cmh.claim ] && [ -f same.cmh.flight ]'
"$CMH" record -o same.cmh -- "$P" -m 3 -r "$T/b.ready" >b.out 2>&1
rb=$?
BPID=$(cat "$T/b.ready" 2>/dev/null)
check "the second run exits 0 (rc $rb)" '[ $rb -eq 0 ]'
check "the second run's program wrote same.$BPID.cmh" '[ -n "$BPID" ] && [ -f same.$BPID.cmh ]'
check "the second run does not call the first run's process dead" '! grep -q "died before writing" b.out'
check "the second run says whose same.cmh is" \
    'grep -qxF "cumemhist: same.cmh is being written by pid $APID (another run, still running); this run'"'"'s snapshot is same.$BPID.cmh (pid $BPID, the program started)" b.out'
check "the first run's flight record and claim are left where they are" '[ -f same.cmh.flight ] && [ -f same.cmh.claim ] && ! ls same.*.cmh.flight >/dev/null 2>&1'
check "nothing is at same.cmh while the first run's program runs" '[ ! -e same.cmh ]'
# the same with a shell wrapper: the CUDA process nearest it does not take the path either
"$CMH" record -o same.cmh -- sh -c "\"$P\" -m 5 -r \"$T/c.ready\"; true" >c.out 2>&1
CPID=$(cat "$T/c.ready" 2>/dev/null)
check "a wrapped second run keeps same.$CPID.cmh, not same.cmh" '[ -f same.$CPID.cmh ] && [ ! -e same.cmh ]'
check "and says whose same.cmh is" 'grep -qF "cumemhist: same.cmh is being written by pid $APID (another run, still running); this run'"'"'s snapshot is same.$CPID.cmh (pid $CPID, the CUDA process nearest pid" c.out'
touch "$T/a.go"
wait $RA
ra=$?
check "the first run exits 0 (rc $ra)" '[ $ra -eq 0 ]'
check "the first run wrote same.cmh, its own" 'grep -qx "cumemhist: wrote $T/same/same.cmh ([0-9]* bytes)" a.out && [ -f same.cmh ]'
check "three distinct snapshots" '! cmp -s same.cmh same.$BPID.cmh && ! cmp -s same.cmh same.$CPID.cmh'
"$CMH" summary same.$BPID.cmh >b.sum 2>&1
"$CMH" summary same.cmh >a.sum 2>&1
check "each snapshot is its run's (7 MiB and 6 MiB peaks)" 'grep -q "Allocated memory *| *7168 KiB" b.sum && grep -q "Allocated memory *| *6144 KiB" a.sum'
check "no claim or flight record is left" '[ -z "$(leftovers .)" ]'
cd "$T" || exit 1

# ---- 2. a relative path, resolved where it was given ----
mkdir rel rel/sub && cd rel || exit 1
"$CMH" record -o job.cmh -- sh -c "cd sub && \"$P\"" >job.out 2>&1
check "a wrapper's cd: job.cmh where record ran" '[ -f job.cmh ] && [ ! -e sub/job.cmh ]'
"$CMH" record -o proc.cmh -- sh -c "cd /proc && \"$P\"" >proc.out 2>&1
rp=$?
check "a wrapper's cd into /proc: proc.cmh written, status 0 (rc $rp)" '[ $rp -eq 0 ] && [ -f proc.cmh ] && ! grep -q "cannot create" proc.out'
"$CMH" record -o cd.cmh -- "$P" -c sub >cd.out 2>&1
check "a program that chdir()s: one cd.cmh, where record ran" '[ -f cd.cmh ] && [ ! -e sub/cd.cmh ]'
check "and no false 'without its exit dump'" '! grep -q "without its exit dump" cd.out'
env LD_PRELOAD="$PRE" CUMEMHIST_OUTPUT=cd3.cmh "$P" -c sub >cd3.out 2>&1
check "plain LD_PRELOAD: cd3.cmh in the start directory, its flight record removed" \
    '[ -f cd3.cmh ] && [ ! -e sub/cd3.cmh ] && [ ! -e cd3.cmh.flight ] && [ -z "$(leftovers sub)" ]'
mkdir 'pct%p' && cd 'pct%p' || exit 1
"$CMH" record -o x.cmh -- "$P" -c .. >x.out 2>&1
check "a '%' in the directory's name is not a pattern" '[ -f x.cmh ] && [ -z "$(leftovers .)" ]'
cd "$T" || exit 1

# ---- 3. an ending signal to record, through a shell wrapper ----
mkdir sig && cd sig || exit 1
# (not SIGINT: a job started in the background by a shell script ignores it, and so do the
# programs it runs: the recorder leaves an ignored signal ignored)
gone() { ! kill -0 "$1" 2>/dev/null || [ "$(awk '{print $3}' /proc/"$1"/stat 2>/dev/null)" = Z ]; }
for sn in TERM:15 HUP:1; do
    s=${sn%:*} n=${sn#*:}
    rm -f "$T/$s.ready"
    "$CMH" record -o $s.cmh -- sh -c "\"$P\" -r \"$T/$s.ready\" -w \"$T/never\"; true" >$s.out 2>&1 &
    R=$!
    wait_until 60 '[ -s "$T/$s.ready" ]' || bad "SIG$s: the program did not start"
    PP=$(cat "$T/$s.ready")
    kill -$s $R
    wait $R
    rc=$?
    check "SIG$s: record ends as the program did (rc $rc)" '[ $rc -eq $((128 + n)) ]'
    check "SIG$s: the CUDA process has ended when record returns" 'gone $PP'
    check "SIG$s: its snapshot is $s.cmh, none is $s.PID.cmh" '[ -f $s.cmh ] && ! ls $s.*.cmh >/dev/null 2>&1'
    check "SIG$s: record says which file holds what" 'grep -qF "cumemhist: $s.cmh holds pid $PP, the CUDA process nearest pid" $s.out'
    check "SIG$s: the snapshot says how it ended" '"$CMH" summary $s.cmh 2>&1 | grep -q "SIG$s"'
    check "SIG$s: no claim or flight record is left" '[ -z "$(leftovers .)" ]'
done
# a background process still running when record returns is named with the path it writes
"$CMH" record -o bg.cmh -- sh -c "\"$P\" -r \"$T/bg.ready\" -w \"$T/bg.go\" & while [ ! -s \"$T/bg.ready\" ]; do sleep 0.05; done" >bg.out 2>&1
PP=$(cat "$T/bg.ready")
check "a process still running is named with the file it will write" \
    'grep -qF "cumemhist: pid $PP is still running; it writes $T/sig/bg.$PP.cmh when it ends" bg.out'
touch "$T/bg.go"
wait_until 60 "[ -f bg.$PP.cmh ]" || true
check "and writes it" '[ -f bg.$PP.cmh ]'
cd "$T" || exit 1
# ---- 4. an output never replaces what the user has ----
cd "$T" && mkdir keep && cd keep || exit 1
"$CMH" record -q -o rec.cmh -- "$B/samples/leaky" >/dev/null 2>&1 || bad "record rec.cmh"
cp rec.cmh keep.cmh
sum0=$(cksum <rec.cmh)
"$CMH" report rec.cmh -o rec.cmh >/dev/null 2>err.txt
rc=$?
check "report rec.cmh -o rec.cmh: refused (rc $rc: $(cat err.txt)), the record kept" \
    "[ $rc -ne 0 ] && grep -q 'is what this command reads' err.txt && [ \"\$(cksum <rec.cmh)\" = \"$sum0\" ]"
"$CMH" plot rec.cmh -o keep.cmh >/dev/null 2>err.txt
rc=$?
check "plot onto another recording (keep.cmh): refused (rc $rc: $(cat err.txt)), kept" \
    "[ $rc -ne 0 ] && grep -q 'holds a cumemhist snapshot' err.txt && cmp -s keep.cmh rec.cmh"
"$CMH" export rec.cmh -o rec.pickle >/dev/null 2>&1 && "$CMH" flamegraph rec.cmh -o rec.pickle >/dev/null 2>err.txt
rc=$?
check "a picture onto a pickle: refused (rc $rc: $(cat err.txt))" "[ $rc -ne 0 ] && grep -q 'holds a pickle' err.txt && head -c1 rec.pickle | od -An -tx1 | grep -q 80"
"$CMH" export rec.pickle -o rec.pickle >/dev/null 2>err.txt
rc=$?
check "export rec.pickle -o rec.pickle: refused (rc $rc), the pickle kept" "[ $rc -ne 0 ] && grep -q 'is what this command reads' err.txt"
printf 'int main(void) { return 0; }\n' >train.c
"$CMH" record -q -o train.c -- "$B/samples/leaky" >/dev/null 2>err.txt
rc=$?
check "record -o train.c (a source file): refused before the run (rc $rc: $(cat err.txt)), the file kept" \
    "[ $rc -ne 0 ] && grep -q 'holds something other than a recording' err.txt && grep -q 'int main' train.c && ! ls .train.c* >/dev/null 2>&1"
# a flight record not yet recovered, or a pickle, at record's -o: kept (record writes a .cmh)
cp "$SRC/tests/fixtures/flight/killed-150.flight" k.flight
cp rec.pickle keep.pickle
"$CMH" record -q -o k.flight -- "$B/samples/leaky" >/dev/null 2>err.txt
rc=$?
"$CMH" record -q -o keep.pickle -- "$B/samples/leaky" >/dev/null 2>>err.txt
rc2=$?
check "record -o onto a flight record or a pickle: refused before the run, both kept ($(cat err.txt | tr '\n' ' '))" \
    "[ $rc -ne 0 ] && [ $rc2 -ne 0 ] && cmp -s k.flight '$SRC/tests/fixtures/flight/killed-150.flight' && cmp -s keep.pickle rec.pickle &&
     grep -q 'k.flight: holds a flight record' err.txt && grep -q 'keep.pickle: holds a pickle' err.txt"
# a report, a picture or an export over a source file: refused
printf 'int main(void) { return 0; }\n' >gs.c
"$CMH" flamegraph rec.cmh -o gs.c >/dev/null 2>err.txt
rc=$?
check "flamegraph -o gs.c (a source file): refused (rc $rc: $(cat err.txt)), kept" "[ $rc -ne 0 ] && grep -q 'int main' gs.c"
"$CMH" report rec.cmh -o page.html >/dev/null 2>&1 && "$CMH" report rec.cmh -o page.html >/dev/null 2>&1 &&
    ok "a report replaces an earlier report" || bad "report over an earlier report"
"$CMH" record -q -o rec.cmh -- "$B/samples/leaky" >/dev/null 2>&1 && ok "record -o onto an earlier record replaces it" || bad "record over a record"
finish
