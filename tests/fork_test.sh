#!/bin/sh
# fork_test.sh BUILD_DIR SOURCE_DIR - fork() without exec, as multiprocessing workers do: a
# parent allocates, then children allocate and end by SIGKILL, SIGSEGV, _exit(0) and exit(0),
# from a single-threaded parent and from one whose other thread allocates through every fork
# (tests/forker.c).  Under `cumemhist record` and under a plain LD_PRELOAD then `cumemhist
# recover`: every snapshot loads in summary, peak --json and leaks, holds exactly what its own
# process allocated (its live blocks, bytes, trace entries and sites), the parent's included,
# and a child's names the pid it was forked from.
TEST=fork . "$(dirname "$0")/testlib.sh"
FK=$B/tests/forker
preload="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so"

faults="segv"
case "${LD_PRELOAD:-}" in *asan* | *ubsan*) faults= ;; esac # (a sanitizer takes the fault and exits 1)
# (LeakSanitizer in a child forked from a threaded parent cannot stop the parent's other threads,
# "false leaks are possible", and ends the child with its own status before the exit handlers
# that write the child's snapshot: the records are what this test is about)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
hows="kill $faults _exit exit kill _exit"

# what a snapshot holds: "LIVE_BLOCKS LIVE_BYTES ENTRIES SITE:BLOCKS... [forked_from=PID]", or
# the error of the first report that refuses it
holds() {
    "$CMH" summary "$1" >/dev/null 2>e.txt && "$CMH" leaks "$1" >/dev/null 2>>e.txt &&
        "$CMH" peak --json "$1" 2>>e.txt >p.json && "$CMH" leaks --json "$1" 2>>e.txt >l.json ||
        { echo "unreadable: $(head -1 e.txt)"; return; }
    py -c "
import json
p, l = json.load(open('p.json')), json.load(open('l.json'))
sites = sorted('%s:%d' % (x['site']['function'], x['blocks']) for d in l for x in d['sites'])
fork = sorted(set('forked_from=%d' % d['process']['forked_from'] for d in p if d['process'].get('forked_from')))
print(sum(d['live_blocks'] for d in l), sum(d['live_bytes'] for d in l), sum(d['trace_entries'] for d in p), *sites, *fork)"
}

# check_run NAME DIR: each line of DIR/out.txt against the snapshot of its pid
check_run() {
    name=$1 dir=$2 n=0 good=0
    ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' "$dir/out.txt")
    while read -r who pid a b c; do
        case $who in
        child) how=$a want="$b $c $b child_alloc:$b forked_from=$ppid" file=$dir/x.$pid.cmh ;;
        parent)
            how=parent want="$a $b $((a + 2 * rounds)) parent_alloc:3" file=$dir/x.cmh
            [ "$a" -gt 3 ] && want="$want thread_alloc:$((a - 3))" ;;
        parent_frees) continue ;;
        esac
        n=$((n + 1))
        got=$(holds "$file")
        if [ "$got" = "$want" ]; then good=$((good + 1)); else bad "$name: $how pid $pid: $file holds '$got', want '$want' (blocks bytes entries sites parent)"; fi
    done <"$dir/out.txt"
    [ "$n" -gt 1 ] && [ "$good" = "$n" ] && ok "$name: $n snapshots, each loads and holds exactly its own process's allocations"
    total=$((total + n)) loaded=$((loaded + good))
}

total=0 loaded=0
# the children touch CUDA first: the first to die leaves the flight record at the path, which the
# parent's first allocation moves aside; record finds it there (it once said 'pid N used CUDA
# but left no snapshot and no flight record', exit 1, beside the moved record)
d=rec-late
mkdir $d
(cd $d && "$CMH" record -o x.cmh -- "$FK" late kill _exit >out.txt 2>err.txt)
rc=$? rounds=0
[ $rc -eq 0 ] && ok "record, children first: exit 0" || bad "record, children first: exit $rc: $(cat $d/err.txt)"
check_run "record, children first" $d
left=$(ls $d | grep -c 'flight\|claim\|tmp')
[ "$left" = 0 ] && ok "record, children first: no flight record, claim or temporary file left" || bad "record, children first: left $(ls $d)"

# -o NAME is the launched process's, whoever touches CUDA first: a child that allocates and ends
# with its snapshot (exit) before the parent's first allocation (late) once took NAME, the
# parent's record landing as NAME.PID (and `summary NAME` read the child's); the parent first
# too, and a shell wrapper that never uses CUDA: NAME goes to its nearest CUDA process (forker,
# not forker's child, which touched first)
holder() { "$CMH" summary "$1" 2>/dev/null | head -1 | sed -n 's/^[^ ]*: pid \([0-9]*\) .*/\1/p'; }
for order in late "" "sh late" "sh"; do
    for run in 1 2 3; do
        d=name-$run-$(echo "$order" | tr ' ' _)
        mkdir $d
        case $order in
        sh*) (cd $d && "$CMH" record -o x.cmh -- sh -c "'$FK' ${order#sh} exit exit; true" >out.txt 2>err.txt) ;;
        *) (cd $d && "$CMH" record -o x.cmh -- "$FK" $order exit exit >out.txt 2>err.txt) ;;
        esac
        ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' $d/out.txt)
        got=$(holder $d/x.cmh) kids=0
        for c in $(sed -n 's/^child \([0-9]*\) .*/\1/p' $d/out.txt); do [ "$(holder $d/x.$c.cmh)" = "$c" ] && kids=$((kids + 1)); done
        if [ -n "$ppid" ] && [ "$got" = "$ppid" ] && [ "$kids" = 2 ] && [ ! -e $d/x.$ppid.cmh ]; then
            good=1
            case $order in sh*) grep -q "^cumemhist: x.cmh holds pid $ppid, the CUDA process nearest pid [0-9]* (the program started, which used no CUDA); 2 other processes wrote x.PID.cmh$" $d/err.txt || good=0 ;;
            *) grep -q "^cumemhist: x.cmh holds pid $ppid, the program started; 2 other processes wrote x.PID.cmh$" $d/err.txt || good=0 ;;
            esac
            [ $good = 1 ] && ok "record -o x.cmh, ${order:-parent first} (run $run): x.cmh is the launched process's (pid $ppid), each child's x.PID.cmh, and record says so" ||
                bad "record -o x.cmh, ${order:-parent first} (run $run): no line saying who holds x.cmh: $(cat $d/err.txt)"
        else
            bad "record -o x.cmh, ${order:-parent first} (run $run): x.cmh holds pid '$got', want the parent '$ppid' ($kids of 2 children at x.PID.cmh): $(ls $d)"
        fi
    done
done

for mode in plain threaded; do
    arg=; [ $mode = threaded ] && arg=threaded

    # under record: it recovers what each dead child left
    d=rec-$mode
    mkdir $d
    (cd $d && "$CMH" record -o x.cmh -- "$FK" $arg $hows >out.txt 2>err.txt)
    rc=$?
    rounds=$(sed -n 's/^parent_frees //p' $d/out.txt)
    [ $rc -eq 0 ] && ok "record, $mode: exit 0" || bad "record, $mode: exit $rc: $(cat $d/err.txt)"
    check_run "record, $mode" $d
    left=$(ls $d | grep -c 'flight\|claim\|tmp')
    [ "$left" = 0 ] && ok "record, $mode: no flight record, claim or temporary file left" || bad "record, $mode: left $(ls $d)"
    left=
    for pid in $(sed -n 's/^\(child\|parent\) \([0-9]*\) .*/\2/p' $d/out.txt); do
        [ -e "$XDG_RUNTIME_DIR/cumemhist/$pid.proc" ] || [ -e "$XDG_RUNTIME_DIR/cumemhist/$pid.gone" ] && left="$left $pid"
    done
    [ -z "$left" ] && ok "record, $mode: no registry entry left of any process, recovered ones included" ||
        bad "record, $mode: registry entries left for pids$left"
    grep -q "pid [0-9]* killed, with no chance to mark its end (SIGKILL" $d/err.txt && grep -q "pid [0-9]* ended by _exit(0), the usual end of a forked worker" $d/err.txt &&
        ok "record, $mode: the SIGKILLed child is said to be killed, the _exit() one to end as workers do" ||
        bad "record, $mode: ends said: $(cat $d/err.txt)"

    # a plain LD_PRELOAD: the dead children's flight records, then recover on each
    d=pre-$mode
    mkdir $d
    (cd $d && timeout 300 env LD_PRELOAD="$preload" CUMEMHIST_OUTPUT=x.cmh "$FK" $arg $hows >out.txt 2>err.txt)
    rounds=$(sed -n 's/^parent_frees //p' $d/out.txt)
    nrec=0 nfail=0
    for f in $d/*.flight; do
        [ -e "$f" ] || continue
        nrec=$((nrec + 1))
        "$CMH" recover "$f" 2>>$d/recover.txt || nfail=$((nfail + 1))
    done
    # one record for each child that did not run its exit handlers
    want=$(grep -c '^child .* \(kill\|segv\|_exit\) ' $d/out.txt)
    [ "$nrec" = "$want" ] && [ "$nfail" = 0 ] && ok "LD_PRELOAD, $mode: $nrec flight records, each recovered" ||
        bad "LD_PRELOAD, $mode: $nrec flight records (want $want), $nfail refused: $(cat $d/recover.txt)"
    check_run "LD_PRELOAD + recover, $mode" $d
    # a dead child's status went to its parent, not to recover: said so, with the parent's pid
    ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' $d/out.txt)
    n=$(grep -c "its exit status went to its parent, pid $ppid" $d/recover.txt)
    [ "$n" = "$(grep -c '^child .* \(kill\|_exit\) ' $d/out.txt)" ] && ok "LD_PRELOAD, $mode: each unmarked end names the parent its status went to" ||
        bad "LD_PRELOAD, $mode: unmarked ends: $(cat $d/recover.txt)"
    # a forked child that called _exit() ended as workers do: said as the usual end, not as an
    # alarm; one SIGKILLed is said to be killed (it read as 'the usual end of a forked worker
    # (_exit()...)' too, the record unable to tell the two apart before _exit() marked it)
    nq=$(grep -c '^child .* _exit ' $d/out.txt) nk=$(grep -c '^child .* kill ' $d/out.txt)
    [ "$(grep -c 'ended by _exit(0), the usual end of a forked worker' $d/recover.txt)" = "$nq" ] &&
        [ "$(grep -c 'killed, with no chance to mark its end (SIGKILL, the OOM killer' $d/recover.txt)" = "$nk" ] &&
        ! grep -q 'left no mark\|a SIGKILL would look the same' $d/recover.txt &&
        ok "LD_PRELOAD, $mode: a forked child's _exit() reads as a worker's usual end, a SIGKILL as a kill" ||
        bad "LD_PRELOAD, $mode: forked children's ends: $(cat $d/recover.txt)"
    # a recovered record's registry entry goes with it (top, the exporter and recover found
    # stale PID.proc entries of every recovered child before)
    left=
    for pid in $(sed -n 's/^child \([0-9]*\) .*/\1/p' $d/out.txt); do
        [ -e "$XDG_RUNTIME_DIR/cumemhist/$pid.proc" ] || [ -e "$XDG_RUNTIME_DIR/cumemhist/$pid.gone" ] && left="$left $pid"
    done
    [ -z "$left" ] && ok "LD_PRELOAD + recover, $mode: no registry entry of a recovered child is left" ||
        bad "LD_PRELOAD + recover, $mode: registry entries left for pids$left: $(ls "$XDG_RUNTIME_DIR/cumemhist")"
done
# the same fault without a fork: a bounded ring whose oldest entries are gone leaves the
# recorder's stack numbers and the snapshot's apart; the live blocks keep their own stack
"$CMH" record -q -o m.cmh --max-entries 10 --context all -- "$B/tests/dies" kill >/dev/null 2>&1
site=$("$CMH" leaks --json m.cmh 2>&1 | py -c "
import json, sys
print(*sorted('%s:%d:%d' % (x['site']['function'], x['site']['line'], x['blocks']) for d in json.load(sys.stdin) for x in d['sites']))")
line=$(grep -n 'cuMemAlloc(&p' "$SRC/tests/dies.c" | cut -d: -f1)
[ "$site" = "work:$line:50" ] && ok "max-entries 10, SIGKILL: the 50 live blocks are cuMemAlloc's (dies.c:$line), not the free's" ||
    bad "max-entries 10, SIGKILL: live blocks attributed to '$site', want work:$line:50"

echo "fork matrix: $total snapshots, $loaded load and hold what their process allocated"

finish
