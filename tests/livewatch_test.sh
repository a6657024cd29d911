#!/bin/sh
# livewatch_test.sh BUILD_DIR SOURCE_DIR - the live tools (top, exporter, snapshot PID) as a
# scheduler's jobs meet them (a stranger's trial 14: F16, F1, F11, F4, F6):
#  - a job started with its own TMPDIR and no XDG_RUNTIME_DIR is seen by a watcher with others
#    (the registry is not where the environment says), and `top PID` / `snapshot PID` find a
#    job registered elsewhere through the process itself, saying where;
#  - the exporter exports jobs that end between two refreshes (an OOM at start-up), ended;
#  - top says a job SIGKILLed under `record` was killed (record recovered it first), not that it
#    stopped;
#  - top's panels say when the analysis under the row is behind it;
#  - a SIGUSR1 snapshot says it was taken while the process ran, and leaks words it so.
# Every wait is for an event (a file, a line on the screen), bounded, never a guessed sleep.
TEST=livewatch . "$(dirname "$0")/testlib.sh"
P=$B/tests/live_prog
REG=$CUMEMHIST_REGISTRY
stop_all() { for p in $jobs; do kill -TERM "$p" 2>/dev/null; done; }
jobs=""
trap 'stop_all; rm -rf "$T"' EXIT

# --- F16: a job with its own TMPDIR and no XDG_RUNTIME_DIR, watched with other ones ---
mkdir -m 700 jobtmp w_xdg w_tmp
env -u XDG_RUNTIME_DIR TMPDIR=$T/jobtmp LIVE_DONE=$T/j1.done "$CMH" record -q -o j1.cmh -- "$P" steady 2 10 >/dev/null 2>&1 &
jobs="$jobs $!"
wait_until 60 '[ -e j1.done ]' || bad "the job did not make its steps"
j1=$(sed -n 's/^pid //p' "$REG"/*.proc 2>/dev/null | head -1)
check "the job registered in CUMEMHIST_REGISTRY, whatever its TMPDIR ($(ls "$REG" jobtmp 2>&1 | tr '\n' ' '))" '[ -n "$j1" ]'
XDG_RUNTIME_DIR=$T/w_xdg TMPDIR=$T/w_tmp "$CMH" top --once "$j1" >f16_top.txt 2>&1
check "top PID from a shell with another XDG_RUNTIME_DIR and TMPDIR finds it: $(head -3 f16_top.txt | tr '\n' '|')" \
    'grep -q "^ *$j1 .*live_prog steady" f16_top.txt'
XDG_RUNTIME_DIR=$T/w_xdg TMPDIR=$T/w_tmp "$CMH" exporter --once >f16_exp.txt 2>&1
check "the exporter from another XDG_RUNTIME_DIR and TMPDIR exports it" 'grep -q "^cumemhist_allocated_bytes{pid=\"$j1\"" f16_exp.txt'
# a watcher told another registry still finds the pid, through the process, and says where it is
mkdir -m 700 elsewhere
CUMEMHIST_REGISTRY=$T/elsewhere "$CMH" snapshot "$j1" -o f16_snap.cmh >f16_snap.out 2>&1
check "snapshot PID with another registry: found in the process, and said ($(head -1 f16_snap.out))" \
    '[ -s f16_snap.cmh ] && grep -q "note: pid $j1 runs the recorder but is not in the registry $T/elsewhere: it registered in its CUMEMHIST_REGISTRY, $REG; its flight record, found in the process (/proc/$j1/maps), is read: $T/j1.cmh.flight" f16_snap.out'
CUMEMHIST_REGISTRY=$T/elsewhere "$CMH" top --once "$j1" >f16_top2.txt 2>&1
check "top PID with another registry shows it" 'grep -q "^ *$j1 .*live_prog steady" f16_top2.txt'
# a pid that is not the recorder's: `cumemhist record` itself names its child
rec=$(ps -o ppid= -p "$j1" | tr -d ' ')
"$CMH" top --once "$rec" >f16_rec.txt 2>&1
check "top of record's own pid names the child: $(cat f16_rec.txt)" 'grep -q "pid $rec is not the recorded program; its child pid $j1 is" f16_rec.txt'
# with no CUMEMHIST_REGISTRY at all: the fixed per-user place, whatever TMPDIR says
env -u XDG_RUNTIME_DIR -u CUMEMHIST_REGISTRY TMPDIR=$T/jobtmp LIVE_DONE=$T/j2.done "$CMH" record -q -o j2.cmh -- "$P" steady 2 10 >/dev/null 2>&1 &
jobs="$jobs $!"
wait_until 60 '[ -e j2.done ]' || bad "the second job did not make its steps"
j2=$(grep -l "$T/j2.cmh.flight" /tmp/cumemhist-$(id -u)/*.proc 2>/dev/null | head -1 | sed 's|.*/||; s|\.proc$||')
check "without CUMEMHIST_REGISTRY the job registers in /tmp/cumemhist-$(id -u), not its TMPDIR ($j2)" '[ -n "$j2" ] && ! ls jobtmp | grep -q .'
env -u CUMEMHIST_REGISTRY XDG_RUNTIME_DIR=$T/w_xdg TMPDIR=$T/w_tmp "$CMH" top --once "$j2" >f16_top3.txt 2>&1
check "and a watcher with other XDG_RUNTIME_DIR and TMPDIR finds it there" '[ -n "$j2" ] && grep -q "^ *$j2 .*live_prog steady" f16_top3.txt'
stop_all
jobs=""

# --- F1: jobs that end between two refreshes are exported, ended, with their OOM ---
# Each job (live_prog oomexit) waits for its LIVE_GO file before its OOM and exit, so that no
# step of this test depends on how long a job lives or how fast the watcher is: the test waits
# for the exporter to hold the job's flight record open, then lets it go.
# holds EP FLIGHT: process EP has FLIGHT open
holds() { ls -l /proc/$1/fd 2>/dev/null | grep -q " -> $2\( (deleted)\)\?\$"; }
# (1) a job is opened as it registers, not at the next refresh: with an hour between refreshes,
# only the exporter's registry watcher can open it (without the watcher this waits out its bound)
mkdir prom0
"$CMH" exporter --textfile prom0 --interval 3600000 2>f1_exp0.err &
ep=$!
wait_until 60 '[ -e prom0/cumemhist.prom ]' || bad "the exporter wrote nothing"
LIVE_GO=$T/go0 "$CMH" record -q -o oq0.cmh -- "$P" oomexit 1 1 >/dev/null 2>&1 &
j=$!
wait_until 60 'holds $ep "$T/oq0.cmh.flight"'
check "the exporter opened a job's flight record as it registered, an hour before its next refresh" 'holds $ep "$T/oq0.cmh.flight"'
touch go0
wait $j
kill -TERM $ep 2>/dev/null
wait $ep
# (2) jobs that end while the exporter is stopped (no refresh can see them end: their flight
# records are gone when it looks again) are exported, ended, each with its record's OOM
mkdir prom
"$CMH" exporter --textfile prom --interval 1000 2>f1_exp.err &
ep=$!
wait_until 60 '[ -e prom/cumemhist.prom ]' || bad "the exporter wrote nothing"
for i in 1 2 3 4 5; do
    LIVE_GO=$T/go$i "$CMH" record -q -o oq$i.cmh -- "$P" oomexit 1 1 >/dev/null 2>&1 &
    j=$!
    wait_until 60 'holds $ep "$T/oq$i.cmh.flight"' || bad "the exporter did not open job $i's flight record"
    kill -STOP $ep
    wait_until 30 '[ "$(sed "s/.*) //" /proc/$ep/stat | cut -c1)" = T ]'
    touch go$i
    wait $j
    kill -CONT $ep
done
n_ooms() { grep -c '^cumemhist_ooms_total{.*live_prog oomexit 1 1"} 1$' prom/cumemhist.prom; }
wait_until 60 '[ "$(n_ooms)" = 5 ]'
got=$(n_ooms)
want=0
for i in 1 2 3 4 5; do
    pid=$("$CMH" summary oq$i.cmh 2>/dev/null | sed -n '1s/^oq[0-9].cmh: pid \([0-9]*\) .*/\1/p')
    "$CMH" oom oq$i.cmh 2>/dev/null | grep -q "out of memory #1" &&
        grep -q "^cumemhist_process_ended{pid=\"$pid\",.*} 1$" prom/cumemhist.prom && want=$((want + 1))
done
check "5 jobs that OOM'd and ended while the exporter was stopped: $got ooms_total series of 1, $want of them marked ended, each with its record's OOM" \
    '[ "$got" = 5 ] && [ "$want" = 5 ]'
kill -TERM $ep 2>/dev/null
wait $ep

# --- F4: the full screen ---
if command -v tmux >/dev/null 2>&1; then
    S=cmhlw$$
    tm() { env -u LD_PRELOAD tmux -L $S "$@"; }
    pane() { tm capture-pane -p -t $S >"$1"; }
    LIVE_READY=$T/k4.ready "$CMH" record -q -o k4.cmh -- "$P" leak 0 30 >/dev/null 2>&1 &
    k4rec=$!
    wait_until 60 '[ -e k4.ready ]' || bad "the growing job did not start"
    k9=$(sed -n 's/^pid //p' "$REG"/*.proc 2>/dev/null | head -1)
    tm new-session -d -s $S -x 220 -y 50 "exec env LD_LIBRARY_PATH=$LD_LIBRARY_PATH CUMEMHIST_REGISTRY=$CUMEMHIST_REGISTRY TERM=xterm LD_PRELOAD=${LD_PRELOAD:-} $CMH top --interval 200 --analysis-interval 3600000"
    wait_until 30 'pane f4_1.txt; grep -q "^ *$k9 .*live_prog leak" f4_1.txt && grep -q "sites holding memory" f4_1.txt'
    # F4: the analysis is an hour apart; the leaking job's row moves on, the panels say how old they are
    wait_until 60 'pane f4_2.txt; grep -q "pid $k9, device 0: sites holding memory as of [0-9.]* s ago, at [0-9.]* [KMG]iB allocated (the row above is newer" f4_2.txt && grep -q "owners of device 0 as of" f4_2.txt'
    check "top's sites and owners panels behind the row say when they are from: $(grep "sites holding" f4_2.txt)" \
        'grep -q "sites holding memory as of" f4_2.txt && grep -q "owners of device 0 as of" f4_2.txt'
    tm kill-server 2>/dev/null
    kill -TERM "$k9"
    wait $k4rec
else
    echo "skip: no tmux (F4)"
fi

# --- F11: a job SIGKILLed under record, record's snapshot made before the watcher looks again ---
# (top and the exporter tell an end the same way, live.c; the exporter, unlike top in tmux, which
# resumes a stopped pane, can be held still while the job dies and record recovers it)
LIVE_READY=$T/k9.ready "$CMH" record -q -o k9.cmh -- "$P" leak 0 30 >/dev/null 2>&1 &
k9rec=$!
wait_until 60 '[ -e k9.ready ]' || bad "the job to kill did not start"
k9=$(sed -n 's/^pid //p' "$REG"/*.proc 2>/dev/null | head -1)
mkdir prom9
"$CMH" exporter --textfile prom9 --interval 200 "$k9" 2>f11.err &
ep=$!
wait_until 60 '[ -e prom9/cumemhist.prom ]' || bad "the exporter of the job wrote nothing"
kill -STOP $ep
wait_until 30 '[ "$(sed "s/.*) //" /proc/$ep/stat | cut -c1)" = T ]' # stopped, not in the middle of a look
kill -KILL "$k9"
wait $k9rec
check "record recovered the killed job: $("$CMH" summary k9.cmh 2>&1 | sed -n 2p)" '[ ! -e k9.cmh.flight ] && "$CMH" summary k9.cmh 2>/dev/null | grep -q "killed by SIGKILL"'
kill -CONT $ep
wait_until 30 'grep -q "pid $k9 ended" f11.err'
check "the watcher says the job run under record was killed: $(cat f11.err)" \
    'grep -q "^cumemhist: pid $k9 ended (it was killed by SIGKILL after [0-9,]* entries (recovered from its flight record); its snapshot $T/k9.cmh written and its flight record removed)" f11.err'
kill -TERM $ep
wait $ep

# --- F6: a SIGUSR1 snapshot says the process was running ---
# (steps without end: the signal cuts one step's sleep short, not the job)
LIVE_READY=$T/u.ready "$CMH" record -q -o u.cmh -- "$P" leak 0 30 >/dev/null 2>&1 &
urec=$!
wait_until 60 '[ -e u.ready ]' || bad "the SIGUSR1 job did not start"
u=$(sed -n 's/^pid //p' "$REG"/*.proc 2>/dev/null | head -1)
kill -USR1 "$u"
wait_until 60 '[ -s u.cmh ] && "$CMH" summary u.cmh >/dev/null 2>&1'
cp u.cmh u_mid.cmh
"$CMH" leaks u_mid.cmh >f6.txt 2>&1
check "the SIGUSR1 snapshot says the process ran: $(sed -n 2p f6.txt)" \
    'grep -q "^u_mid.cmh: the process was still running when this snapshot was written on SIGUSR1 ([0-9]* entries so far)$" f6.txt'
check "leaks words its blocks as at the snapshot: $(sed -n 3p f6.txt)" 'grep -q "still live at the snapshot, the process still running, from" f6.txt'
"$CMH" report -o f6.html u_mid.cmh >/dev/null 2>&1
check "the HTML report too" 'grep -q "Still live at the snapshot, the process still running" f6.html'
kill -TERM "$u"
wait $urec
"$CMH" leaks u.cmh >f6_end.txt 2>&1
check "the end's snapshot is at the end again: $(sed -n 3p f6_end.txt)" 'grep -q "still live at the end" f6_end.txt'

finish
