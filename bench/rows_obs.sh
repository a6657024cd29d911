#!/bin/sh
# rows_obs.sh [BUILD_DIR] - the live side's figures (issue 28), called by rows.sh at its end:
# 8 recorded processes each making ~10,000 events/s (tests/live_prog churn: 1000 alloc/free
# pairs per 200 ms step), watched by `cumemhist top` (full screen, in tmux, 1 s refresh) and
# `cumemhist exporter` (1 s refresh, 60 s analysis: its first falls after the window, so the
# exporter's figure is its refresh; docs/OBSERVABILITY.md "Cost") together for 30 s: their CPU
# time as a share of one core (from /proc/PID/stat), the bytes the readers read, and the latency
# of 200 scrapes of /metrics meanwhile (one each 0.14 s: p50, p95, p99 and the worst), beside how
# late the client itself wakes from its sleeps (a control: what any process waits for a CPU
# then).  Goals: <= 2% of one core, a scrape <= 50 ms.  TOP_ARGS and EXPORTER_ARGS add options
# to each (--analysis-interval 3600000 both: the incremental refresh alone, without the
# periodic analysis).
set -eu
B=$(cd "${1:-build-rel}" && pwd)
CMH=$B/cumemhist
T=$(mktemp -d /tmp/cmh-rows-obs-XXXXXX)
S=cmhbench$$
cleanup() {
    tmux -L $S kill-server 2>/dev/null || true
    for p in $(cat "$T/pids" 2>/dev/null); do kill -TERM "$p" 2>/dev/null || true; done
    [ -n "${EXP:-}" ] && kill "$EXP" 2>/dev/null || true
    i=0; while [ $i -lt 100 ] && [ -n "$(ls "$T"/run/cumemhist/*.proc 2>/dev/null)" ]; do sleep 0.1; i=$((i + 1)); done
    sleep 0.5 # record writes each snapshot, then ends
    rm -rf "$T"
}
trap cleanup EXIT
row() { printf '%-58s %s\n' "$1" "$2"; }
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDG_RUNTIME_DIR=$T/run
mkdir -m 700 "$T/run"
cd "$T"
: >pids
for i in 1 2 3 4 5 6 7 8; do
    CUMEMHIST_MAX_ENTRIES=200000 LIVE_READY=$T/ready$i "$CMH" record -q -o p$i.cmh -- "$B/tests/live_prog" churn 0 200 >/dev/null 2>&1 &
done
i=0; while [ $i -lt 100 ] && [ "$(ls ready? 2>/dev/null | wc -l)" -lt 8 ]; do sleep 0.1; i=$((i + 1)); done
ls run/cumemhist/*.proc | sed 's#.*/##; s/\.proc$//' >pids
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$CMH" exporter --listen 127.0.0.1:$port ${EXPORTER_ARGS:-} 2>/dev/null &
EXP=$!
tmux -L $S new-session -d -s $S -x 200 -y 50 "env LD_LIBRARY_PATH=$LD_LIBRARY_PATH XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR TERM=xterm $CMH top ${TOP_ARGS:-}"
i=0; while [ $i -lt 300 ] && ! curl -sf -o /dev/null http://127.0.0.1:$port/metrics; do sleep 0.1; i=$((i + 1)); done
sleep 3 # both have read the history so far: what follows is the steady state
TOP=$(tmux -L $S list-panes -t $S -F '#{pane_pid}')
t0=$(date +%s.%N); a0=$(ticks $TOP); b0=$(ticks $EXP)
n0=$(curl -s http://127.0.0.1:$port/metrics | awk '/^cumemhist_entries_total/ {s += $NF} END {print s}')
python3 - "$port" >lat.txt <<'PY'
import sys, time, urllib.request
lat, late = [], []
for i in range(200):
    t = time.perf_counter()
    urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read()
    lat.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    time.sleep(0.14)
    late.append((time.perf_counter() - t - 0.14) * 1000) # the client's own wait for a CPU: the control
q = lambda v, f: sorted(v)[min(len(v) - 1, int(len(v) * f))]
print("%.2f %.2f %.2f %.2f %.2f %.2f" % (q(lat, 0.5), q(lat, 0.95), q(lat, 0.99), max(lat), q(late, 0.99), max(late)))
PY
t1=$(date +%s.%N); a1=$(ticks $TOP); b1=$(ticks $EXP)
n1=$(curl -s http://127.0.0.1:$port/metrics | awk '/^cumemhist_entries_total/ {s += $NF} END {print s}')
wall=$(awk "BEGIN{print $t1 - $t0}")
rate=$(awk "BEGIN{printf \"%.0f\", ($n1 - $n0) / $wall}")
row "live: events/s recorded by the 8 processes, all together" "$rate (target 8 x 10,000)"
row "live: top (full screen, 1 s) CPU, share of one core" "$(awk "BEGIN{printf \"%.2f%%\", 100 * ($a1 - $a0) / $hz / $wall}")"
row "live: exporter (1 s refresh, 60 s analysis) CPU, one core" "$(awk "BEGIN{printf \"%.2f%%\", 100 * ($b1 - $b0) / $hz / $wall}")"
row "live: top + exporter together, share of one core" "$(awk "BEGIN{printf \"%.2f%%\", 100 * ($a1 - $a0 + $b1 - $b0) / $hz / $wall}") (target <= 2%)"
read -r med p95 p99 max late99 latemax <lat.txt
row "live: 200 scrapes of /metrics, 8 processes (p50/p95/p99/max)" "$med / $p95 / $p99 / $max ms (target <= 50 ms)"
row "live: control, the client's own lateness waking from a sleep (p99/max)" "$late99 / $latemax ms (the machine's wait for a CPU)"
