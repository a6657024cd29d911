#!/bin/sh
# fullfs_test.sh - `cumemhist record` when the snapshot's directory is full: nothing is lost that
# could be kept, and nothing is claimed that is not there.  A parent that allocates and forks a
# child that allocates too (tests/forker.c), and a program that waits while its directory fills
# (tests/dies.c until).
#   - RLIMIT_FSIZE (unprivileged: EFBIG, the process's own limit, the same in every directory):
#     every snapshot is lost; record says so, exit 1, and its closing line names no file that
#     is not there (it once said "rec.cmh holds pid N ...; 1 other process wrote rec.PID.cmh").
#   - a full tmpfs (needs mount: skipped, said, without it): full from the start, each process's
#     flight record goes to the runtime directory, its snapshot is recovered there and named;
#     filled while the program runs, the snapshot the directory cannot take is recovered into
#     the runtime directory; exit 1 and one line naming where, for every process of the run.
TEST=fullfs . "$(dirname "$0")/testlib.sh"
RT=$XDG_RUNTIME_DIR/cumemhist

# every "wrote X" line names a file that is there, and no line says a path holds anything
# unless it does: $1 the stderr to check, $2 the fixed -o path
claims_true() {
    for f in $(sed -n 's/^cumemhist: wrote \(.*\) ([0-9]* bytes).*/\1/p' "$1"); do [ -f "$f" ] || return 1; done
    if grep -q "^cumemhist: $2 holds pid" "$1"; then [ -f "$2" ] || return 1; fi
    if grep -q "other process[es]* wrote" "$1"; then ls "${2%.cmh}".[0-9]*.cmh >/dev/null 2>&1 || return 1; fi
    return 0
}

# --- RLIMIT_FSIZE: nothing can be written, anywhere; all of it said, nothing claimed ---
mkdir u && cd u
# (stderr through a pipe: a file would be under the limit too)
sh -c "trap '' XFSZ; ulimit -f 1; exec '$CMH' record -o rec.cmh -- '$B/tests/forker' exit" 2>&1 >out.txt | cat >err.txt
rc=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' out.txt)
pp=$rc
{ [ -n "$pp" ] && ! ls rec*.cmh >/dev/null 2>&1 && claims_true err.txt rec.cmh && ! grep -q 'holds pid' err.txt &&
    grep -q "^cumemhist: rec.cmh was not written: pid $pp's snapshot (the program started) was lost; 1 other process's snapshot was lost$" err.txt &&
    grep -q "^cumemhist: exit status 1: 2 snapshots lost (the program itself exited 0)$" err.txt; } &&
    ok "RLIMIT_FSIZE, a parent and its forked child: both lost, said; the closing line claims no file" ||
    bad "RLIMIT_FSIZE: files $(ls), $(cat err.txt)"
cd "$T"

# --- a full tmpfs ---
mkdir full mid
if ! mount -t tmpfs -o size=1M tmpfs full 2>mount.err || ! mount -t tmpfs -o size=8M tmpfs mid 2>>mount.err; then
    umount full 2>/dev/null
    echo "SKIP: a full directory (tmpfs): cannot mount one here ($(head -1 mount.err)); only the RLIMIT_FSIZE case ran"
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ] && exit 77
    exit 1
fi
trap 'umount "$T/full" "$T/mid" 2>/dev/null; rm -rf "$T"' EXIT
dd if=/dev/zero of=full/fill bs=4k 2>/dev/null

# full from the start: the flight records go to the runtime directory, and both snapshots
# are recovered there, named
"$CMH" record -o "$T/full/rec.cmh" -- "$B/tests/forker" exit >out.txt 2>err.txt
rc=$?
pp=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' out.txt)
cp=$(sed -n 's/^child \([0-9]*\) .*/\1/p' out.txt)
{ [ $rc -eq 1 ] && [ -n "$pp" ] && [ -n "$cp" ] && [ "$(ls -A full)" = fill ] &&
    "$CMH" summary "$RT/rec.$pp.cmh" >/dev/null 2>&1 && "$CMH" summary "$RT/rec.$cp.cmh" >/dev/null 2>&1 &&
    [ "$("$CMH" peak --json "$RT/rec.$pp.cmh" | py -c "import json,sys; print(json.load(sys.stdin)[0]['end']['allocated'])")" = 3145728 ] &&
    [ "$("$CMH" peak --json "$RT/rec.$cp.cmh" | py -c "import json,sys; print(json.load(sys.stdin)[0]['end']['allocated'])")" = 131072 ] &&
    ! ls "$RT"/*.flight >/dev/null 2>&1 && claims_true err.txt "$T/full/rec.cmh" &&
    grep -q "^cumemhist: $T/full/rec.cmh was not written: pid $pp's snapshot (the program started) is in $RT/rec.$pp.cmh; pid $cp's snapshot could not be written there and is in $RT/rec.$cp.cmh$" err.txt &&
    grep -q "^cumemhist: exit status 1: 2 processes could not write their snapshots to $T/full/rec.cmh (their exit dumps failed); pid $pp's is in $RT/rec.$pp.cmh, the others' beside it (the program itself exited 0)$" err.txt; } &&
    ok "a full directory from the start, parent and forked child: both recovered into the runtime directory, named; exit 1" ||
    bad "full from the start: exit $rc, there: $(ls -A full), runtime dir: $(ls -A "$RT"), $(cat err.txt)"
rm -f "$RT"/rec.*

# ... and a process that exec()s: both programs' records kept there, both snapshots recovered
"$CMH" record -o "$T/full/e.cmh" -- "$B/tests/dies" exec >/dev/null 2>err.txt
rc=$?
before=$(ls "$RT"/e.*.exec1.cmh 2>/dev/null)
pid=${before##*/e.}
pid=${pid%.exec1.cmh}
{ [ $rc -eq 1 ] && [ -n "$before" ] && [ -s "$RT/e.$pid.cmh" ] && [ "$(ls -A full)" = fill ] &&
    "$CMH" peak "$before" 2>/dev/null | grep -q 'replaced its program by exec()' && "$CMH" summary "$RT/e.$pid.cmh" >/dev/null 2>&1 &&
    grep -q "^cumemhist: exit status 1: pid $pid could not write its snapshot to $T/full/e.cmh (its exit dump failed); it is in $RT/e.$pid.cmh (the program itself exited 0)$" err.txt; } &&
    ok "a full directory and exec(): both programs' snapshots in the runtime directory; exit 1" ||
    bad "full directory, exec(): exit $rc, runtime dir: $(ls -A "$RT"), $(cat err.txt)"
rm -f "$RT"/e.*

# filled while the program runs (its flight record beside the path): the recovered snapshot the
# directory cannot take goes to the runtime directory; the launched process, then one under a
# shell that uses no CUDA (the path handed on to it)
for how in direct shell; do
    rm -f go
    if [ $how = direct ]; then
        "$CMH" record -o "$T/mid/m.cmh" -- "$B/tests/dies" until "$T/go" >out.txt 2>err.txt &
    else
        "$CMH" record -o "$T/mid/m.cmh" -- sh -c "'$B/tests/dies' until '$T/go'; true" >out.txt 2>err.txt &
    fi
    rp=$!
    wait_until 60 'grep -q ready out.txt && ls mid/*.flight >/dev/null 2>&1'
    dd if=/dev/zero of=mid/fill bs=4k 2>/dev/null
    touch go
    wait $rp
    rc=$?
    saved=$(ls "$RT"/m.*.cmh 2>/dev/null)
    pid=${saved##*/m.}
    pid=${pid%.cmh}
    { [ $rc -eq 1 ] && [ -n "$saved" ] && [ "$(ls -A mid)" = fill ] && "$CMH" summary "$saved" >/dev/null 2>&1 &&
        claims_true err.txt "$T/mid/m.cmh" && ! grep -q 'holds pid' err.txt && grep -q "; snapshot $saved (in the runtime directory: .*No space left on device)$" err.txt &&
        grep -q "^cumemhist: exit status 1: pid $pid could not write its snapshot to $T/mid/m.cmh (its exit dump failed); it is in $saved (the program itself exited 0)$" err.txt; } &&
        { [ $how = direct ] || grep -q "^cumemhist: $T/mid/m.cmh was not written: pid $pid's snapshot (the CUDA process nearest pid [0-9]*, the program started, which used no CUDA) is in $saved$" err.txt; } &&
        ok "filled while it ran ($how): the snapshot recovered into the runtime directory, named; exit 1" ||
        bad "filled while it ran ($how): exit $rc, there: $(ls -A mid), saved '$saved', $(cat err.txt)"
    rm -f mid/fill "$RT"/m.*
done

finish
