#!/bin/sh
# recoverdest_test.sh BUILD_DIR SOURCE_DIR - `recover` loses nothing at its snapshot's path.  A
# process that wrote a snapshot on SIGUSR1 and was then killed leaves both that snapshot and its
# flight record at one path; `recover FLIGHT` replaced the snapshot without a word, PyTorch's part
# (which only a dump takes) and all.  Now: a snapshot the recovery holds whole is replaced, and
# said; one that holds what the flight record lacks, another process's .cmh (another pid, host or
# start time), a pickle or another file is kept (the recovery goes to NAME.recovered.cmh, or -o's
# path is refused, exit 1, unless --force).
TEST=recoverdest . "$(dirname "$0")/testlib.sh"
D=$B/tests/dies
entries() { "$CMH" trace --json "$1" 2>/dev/null | py -c "import json,sys; print(sum(len(d['entries']) for d in json.load(sys.stdin)))"; }
ending() { "$CMH" summary --json "$1" 2>/dev/null | py -c "import json,sys; d=json.load(sys.stdin); print(d.get('ending') or d.get('process', {}).get('ending', ''))"; }
# killed NAME: a plain preload run that dumps NAME.cmh on SIGUSR1 and is then SIGKILLed, leaving
# NAME.cmh.flight; its pid in NAME.pid
killed() {
    rm -f "$1".cmh*
    env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT="$1.cmh" "$D" until never >"$1.out" 2>/dev/null &
    _p=$!
    echo $_p >"$1.pid"
    wait_until 60 "grep -q ready $1.out 2>/dev/null" || bad "$1: the program never got ready"
    kill -USR1 $_p
    wait_until 60 "[ -s $1.cmh ]" || bad "$1: no snapshot on SIGUSR1"
    kill -KILL $_p
    wait $_p 2>/dev/null
    [ -e "$1.cmh.flight" ] || bad "$1: no flight record left"
}

# the SIGUSR1 snapshot, whose history the recovery holds whole: replaced, and said
killed a
"$CMH" recover a.cmh.flight 2>a.err
check "recover over the process's own SIGUSR1 snapshot that it holds whole: replaced, and said ($(cat a.err))" \
    "grep -q 'snapshot a.cmh (replacing its own earlier snapshot there (150 entries): this one holds all of it' a.err && [ \"\$(entries a.cmh)\" = 150 ] && [ ! -e a.recovered.cmh ] && [ ! -e a.cmh.flight ]"

# the SIGUSR1 snapshot with PyTorch's part (merged in, as co-recording takes it at a dump): kept,
# the recovery beside it
killed b
"$CMH" merge --force -o m.cmh b.cmh "$F/h200/torch_exp.pickle" 2>/dev/null && mv m.cmh b.cmh || bad "merge"
cp b.cmh b.before
"$CMH" recover b.cmh.flight 2>b.err
check "recover beside a SIGUSR1 snapshot with PyTorch's part: kept, the recovery in b.recovered.cmh, said ($(cat b.err))" \
    "cmp -s b.cmh b.before && [ \"\$(entries b.recovered.cmh)\" = 150 ] && grep -q \"snapshot b.recovered.cmh (b.cmh holds pid \$(cat b.pid)'s own snapshot (written on SIGUSR1) with PyTorch's part, which a flight record lacks: kept)\" b.err"

# ... and at a path -o names: refused, the flight record kept
killed c
"$CMH" merge --force -o m.cmh c.cmh "$F/h200/torch_exp.pickle" 2>/dev/null && mv m.cmh c.cmh || bad "merge"
cp c.cmh c.before
"$CMH" recover -o c.cmh c.cmh.flight 2>c.err
rc=$?
check "recover -o onto a snapshot with PyTorch's part: refused, status 1, nothing removed ($rc: $(cat c.err))" \
    "[ $rc -eq 1 ] && cmp -s c.cmh c.before && [ -e c.cmh.flight ] && grep -q 'not replaced (name another file, or --force to replace it)' c.err"

# a pickle at the path (an export the user made there): kept
killed d
cp "$F/h200/torch_exp.pickle" d.cmh
"$CMH" recover d.cmh.flight 2>d.err
check "recover where a pickle lies: kept, the recovery in d.recovered.cmh ($(cat d.err))" \
    "cmp -s d.cmh '$F/h200/torch_exp.pickle' && [ \"\$(entries d.recovered.cmh)\" = 150 ] && grep -q 'd.cmh holds a pickle' d.err"

# another process's snapshot at the path (an earlier run's, another pid): its record, which this
# flight record does not supersede: kept, the recovery beside it (it was replaced: "(replacing pid
# N's snapshot that was there)", exit 0)
killed e
other=$(cat a.pid)
cp a.cmh e.cmh
"$CMH" recover --keep e.cmh.flight 2>e.err
check "recover over another process's snapshot: kept, the recovery in e.recovered.cmh ($(cat e.err))" \
    "cmp -s e.cmh a.cmh && [ \"\$(entries e.recovered.cmh)\" = 150 ] && grep -q \"e.cmh holds pid $other's snapshot, another process's record\" e.err"
# ... and at a path -o names: refused, exit 1, --force said; with --force replaced, and said
"$CMH" recover --keep -o e.cmh e.cmh.flight 2>e2.err
rc=$?
check "recover -o onto another process's snapshot: refused, status 1 ($rc: $(cat e2.err))" \
    "[ $rc -eq 1 ] && cmp -s e.cmh a.cmh && [ -e e.cmh.flight ] && grep -q \"e.cmh: holds pid $other's snapshot, another process's record.*--force\" e2.err"
"$CMH" recover --force -o e.cmh e.cmh.flight 2>e3.err
rc=$?
check "recover --force -o onto another process's snapshot: replaced, and said ($rc: $(cat e3.err))" \
    "[ $rc -eq 0 ] && ! cmp -s e.cmh a.cmh && [ \"\$(entries e.cmh)\" = 150 ] && grep -q 'replacing what was there (--force)' e3.err"

"$CMH" recover --help >help.txt 2>&1
check "recover --help says what it does with a file at the path" "grep -q 'NAME.recovered.cmh' help.txt"
finish
