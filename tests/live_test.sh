#!/bin/sh
# live_test.sh BUILD_DIR SOURCE_DIR - the live side against real recorded processes: the
# registry (entries made and removed, stale ones said and cleaned, another user's never shown),
# `snapshot PID` (the same state as `recover --live`, the independent one-shot reader), `top
# --once --json` of 4 processes equal to their snapshots' figures, the full-screen top driven
# in tmux (keys sent, the pane captured), the exporter's refusal of a non-loopback address, a
# scrape that follows a churning process (the published exposition moves on), and
# hostile copies of a flight record that must not crash the live reader.
TEST=live . "$(dirname "$0")/testlib.sh"
P=$B/tests/live_prog
export XDG_RUNTIME_DIR=$T/run
export CUMEMHIST_REGISTRY=$T/run/cumemhist
mkdir -m 700 run
REG=$T/run/cumemhist

# --- four recorded processes: two leaking, two steady; each waits after its steps ---
pids=""
for i in 1 2 3 4; do
    kind=steady; [ $((i % 2)) = 1 ] && kind=leak
    LIVE_DONE=$T/done$i "$CMH" record -q -o p$i.cmh -- "$P" $kind 6 20 >/dev/null 2>&1 &
done
wait_until 60 '[ "$(ls done? 2>/dev/null | wc -l)" = 4 ]' # all their steps made: they hold still
n=$(ls "$REG"/*.proc 2>/dev/null | wc -l)
check "4 recorded processes registered ($n entries)" '[ "$n" = 4 ]'
check "the registry is private (0700)" '[ "$(stat -c %a "$REG")" = 700 ]'
pids=$(cd "$REG" && ls *.proc | sed 's/\.proc$//' | sort -n | tr '\n' ' ')

# --- top --once --json equals each process's snapshot ---
"$CMH" top --json >top.json 2>top.err
for p in $pids; do "$CMH" snapshot -q "$p" -o s$p.cmh; "$CMH" peak --json s$p.cmh >peak$p.json; "$CMH" leaks --json s$p.cmh >leaks$p.json; done
out=$(py - $pids <<'PY'
import json, sys
top = json.load(open("top.json"))
procs = {p["pid"]: p for p in top["processes"]}
bad = []
for pid in map(int, sys.argv[1:]):
    if pid not in procs: bad.append("pid %d missing from top" % pid); continue
    d = procs[pid]["devices"][0]
    peak = json.load(open("peak%d.json" % pid))[0]
    leaks = json.load(open("leaks%d.json" % pid))[0]
    want = (peak["end"]["allocated"], peak["end"]["reserved"], peak["peak_allocated"]["bytes"], peak["peak_reserved"]["bytes"], peak["trace_entries"])
    got = (d["allocated"], d["reserved"], d["peak_allocated"], d["peak_reserved"], d["entries"])
    if want != got: bad.append("pid %d: top %s, snapshot %s" % (pid, got, want))
    ts = [(s["site"].split(" ")[0], s["bytes"], s["verdict"]) for s in d["sites"]]
    ls = [(s["site"]["function"], s["bytes"], s["verdict"]) for s in leaks["sites"]][:len(ts)]
    if ts != ls: bad.append("pid %d sites: top %s, leaks %s" % (pid, ts, ls))
    if d["driver_used"] is None: bad.append("pid %d: no cuMemGetInfo sample" % pid)
print("; ".join(bad) if bad else "same")
PY
)
check "top --once --json of 4 processes = their snapshots (allocated, reserved, peaks, entries, sites, verdicts): $out" '[ "$out" = same ]'
leaker=$(py -c "import json; print(min(p['pid'] for p in json.load(open('top.json'))['processes'] if any(s['verdict'] == 'growing' for s in p['devices'][0]['sites'])))" 2>/dev/null)
grep -q '"verdict": "growing"' top.json && ok "top sees a growing site" || bad "no growing site in top: $(head -c 600 top.json)"

# --- the incremental reader agrees with the one-shot one (recover --live) ---
for p in $pids; do
    f=$(sed -n 's/^flight //p' "$REG/$p.proc")
    "$CMH" recover --live -o r$p.cmh "$f" 2>/dev/null
    a=$("$CMH" peak --json s$p.cmh | py -c "import json,sys; d=json.load(sys.stdin)[0]; print(d['end'], d['peak_allocated']['bytes'], d['trace_entries'])")
    b=$("$CMH" peak --json r$p.cmh | py -c "import json,sys; d=json.load(sys.stdin)[0]; print(d['end'], d['peak_allocated']['bytes'], d['trace_entries'])")
    [ "$a" = "$b" ] && [ -n "$a" ] && ok "pid $p: snapshot = recover --live ($a)" || bad "pid $p: snapshot $a, recover --live $b"
done
check "snapshot left the flight record and the process alone" '[ "$(ls "$REG"/*.proc | wc -l)" = 4 ]'
"$CMH" leaks s$leaker.cmh | grep -q 'growing' && ok "leaks reads a live snapshot: the leak is growing" || bad "leaks on a live snapshot: $("$CMH" leaks s$leaker.cmh 2>&1 | head -5)"

# --- another user's process is never shown ---
some=$(echo $pids | cut -d' ' -f1)
f=$(sed -n 's/^flight //p' "$REG/$some.proc")
cp "$f" other.flight
sed "s#^flight .*#flight $T/other.flight#" "$REG/$some.proc" >"$REG/other.proc"
if chown nobody other.flight "$REG/other.proc" 2>/dev/null; then
    "$CMH" top --json >top2.json 2>/dev/null
    n2=$(py -c "import json; print(len(json.load(open('top2.json'))['processes']))")
    check "an entry of another user in the registry is not shown ($n2 processes)" '[ "$n2" = 4 ]'
    "$CMH" snapshot other.flight -o o.cmh >/dev/null 2>err.txt
    check "snapshot refuses another user's flight record: $(cat err.txt)" '[ $? -ne 0 ] && grep -q "another user" err.txt && [ ! -e o.cmh ]'
else
    echo "skip: cannot chown (not root): another user's entries"
fi
rm -f "$REG/other.proc"

# --- the full screen, in a real terminal ---
if command -v tmux >/dev/null 2>&1; then
    S=cmhtop$$
    tm() { env -u LD_PRELOAD tmux -L $S "$@"; }
    tm new-session -d -s $S -x 200 -y 50 "env LD_LIBRARY_PATH=$LD_LIBRARY_PATH XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR CUMEMHIST_REGISTRY=$CUMEMHIST_REGISTRY TERM=xterm LD_PRELOAD=${LD_PRELOAD:-} $CMH top --interval 200"
    # each screen waited for until it shows what is asked of it (top takes keys in the order sent)
    pane() { tm capture-pane -p -t $S >"$1"; }
    wait_until 30 'pane pane1.txt; grep -q "cumemhist top" pane1.txt && grep -q "sorted by allocated" pane1.txt && [ "$(grep -c live_prog pane1.txt)" -ge 4 ]' &&
        ok "top draws every process" || bad "top's screen: $(head -12 pane1.txt)"
    tm send-keys -t $S s
    wait_until 30 'pane pane2.txt; grep -q "sorted by reserved" pane2.txt' && ok "key s changes the order" || bad "after s: $(head -3 pane2.txt)"
    # select the first leaking process's row, then ask for its top site's stack
    row=$(grep -n "^ *$leaker " pane2.txt | head -1 | cut -d: -f1)
    first=$(grep -n "^ *[0-9][0-9]* " pane2.txt | head -1 | cut -d: -f1)
    k=$((row - first)); while [ $k -gt 0 ]; do tm send-keys -t $S j; k=$((k - 1)); done
    tm send-keys -t $S Enter
    wait_until 30 'pane pane3.txt; grep -q "pid $leaker, device 0: sites holding memory now" pane3.txt && grep -q "stack of site 1:" pane3.txt && grep -q "#0 keep_cache" pane3.txt' &&
        ok "j selects, Enter shows the top site's stack" || bad "the stack view: $(sed -n '1,40p' pane3.txt)"
    tm send-keys -t $S q
    wait_until 30 '! tm has-session -t $S 2>/dev/null' && ok "q quits" || { bad "q did not quit"; tm kill-server; }
else
    echo "skip: no tmux"
fi

# --- the exporter listens on loopback only, unless asked ---
"$CMH" exporter --listen 0.0.0.0:19464 >/dev/null 2>err.txt
check "exporter refuses 0.0.0.0 without --allow-remote: $(cat err.txt)" '[ $? = 2 ] && grep -q "not a loopback address" err.txt'
"$CMH" exporter --listen 192.0.2.1:19464 >/dev/null 2>err.txt
check "exporter refuses another address without --allow-remote" '[ $? = 2 ]'
"$CMH" exporter --once --textfile "$T" >/dev/null 2>&1
# node_exporter reads the file, often as its own user: a new file is 0666 less the umask (0644)
umask 022
rm -f cumemhist.prom
"$CMH" exporter --once --textfile "$T" >/dev/null 2>&1
check "exporter --once --textfile writes DIR/cumemhist.prom, mode 0644 under umask 022 (node_exporter's user reads it)" 'grep -q "^cumemhist_allocated_bytes{pid=\"$leaker\"" cumemhist.prom && [ "$(stat -c %a cumemhist.prom)" = 644 ]'
# the driver's used memory is a cuMemGetInfo sample, taken earlier than allocated holds for: each
# driver_used series has its sample's age beside it (it had none: the lag went unsaid), a gauge
# in seconds, never negative, accepted by promtool
py - cumemhist.prom <<'PY' 2>age.err
import re, sys
used, age = {}, {}
for l in open(sys.argv[1]):
    m = re.match(r'^(cumemhist_driver_used_bytes|cumemhist_driver_sample_age_seconds)(\{[^}]*\}) (\S+)$', l)
    if m: (used if m.group(1).endswith("bytes") else age)[m.group(2)] = float(m.group(3))
assert used, "no driver_used series"
assert set(age) == set(used), (sorted(used), sorted(age))
assert all(v >= 0 for v in age.values()), age
assert "# TYPE cumemhist_driver_sample_age_seconds gauge" in open(sys.argv[1]).read()
PY
check "exporter: every driver_used series has cumemhist_driver_sample_age_seconds beside it ($(tail -1 age.err))" "[ ! -s age.err ]"
if command -v promtool >/dev/null 2>&1; then
    env -u LD_PRELOAD promtool check metrics <cumemhist.prom >pt.txt 2>&1
    check "promtool check metrics accepts the exposition with the sample's age ($(head -3 pt.txt | tr '\n' ' '))" "! grep -qi 'error' pt.txt"
fi

# --- what a scrape gets follows the process: a churning one's entries grow from one scrape
# to a later one (each scrape gets the latest exposition the refreshing thread published) ---
LIVE_READY=$T/ready_churn "$CMH" record -q -o churn.cmh -- "$P" churn 100000 50 >/dev/null 2>&1 &
wait_until 60 '[ -e ready_churn ]'
churn_pid=$(grep -l "churn.cmh.flight" "$REG"/*.proc | xargs sed -n 's/^pid //p')
port=$(py -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$CMH" exporter --listen 127.0.0.1:$port --interval 100 $churn_pid 2>/dev/null &
exp_pid=$!
out=$(py - $port $churn_pid <<'PY'
import re, sys, time, urllib.request
def entries():
    try: text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
    except OSError: return None
    m = re.search(r'^cumemhist_entries_total\{pid="%s",[^}]*\} (\d+)$' % sys.argv[2], text, re.M)
    return int(m.group(1)) if m else None
first = None
for i in range(200): # the first exposition (the port opens after it), then one that moved on
    n = entries()
    if first is None: first = n
    elif n is not None and n > first: print("grew %d -> %d" % (first, n)); break
    time.sleep(0.1)
else: print("stuck at %s" % first)
PY
)
check "a later scrape gets a later exposition: entries $out" 'echo "$out" | grep -q "^grew"'
kill -TERM $exp_pid $churn_pid 2>/dev/null
wait $exp_pid 2>/dev/null
wait_until 60 '[ ! -e "$REG/$churn_pid.proc" ]'

# --- a death: the entry goes stale, is said once and cleaned up; the record stays ---
f=$(sed -n 's/^flight //p' "$REG/$leaker.proc")
cp "$f" h.flight # (a real record, mutated below)
kill -KILL $leaker
# record, its parent, makes its snapshot from the flight record and removes that: nothing is left
# to recover, so nothing is said (before: "its flight record … is for 'cumemhist recover'", a file
# no longer there)
wait_until 60 '[ ! -e "$f" ]'
"$CMH" top --json >top3.json 2>err.txt
n3=$(py -c "import json; print(len(json.load(open('top3.json'))['processes']))")
check "a killed process is not shown ($n3 left), and, its record recovered, not said: $(cat err.txt)" '[ "$n3" = 3 ] && [ ! -e "$f" ] && ! grep -q "pid $leaker" err.txt'
check "its stale entry is removed, not kept aside" '[ ! -e "$REG/$leaker.proc" ] && [ ! -e "$REG/$leaker.gone" ]'
"$CMH" snapshot $leaker -o x.cmh >/dev/null 2>err.txt
check "snapshot of a gone pid says so" '[ $? = 1 ] && grep -q "no such process\|no longer running" err.txt'
# the flight record of a process already dead: not read as if it still ran ('pid N: 3 entries so
# far'): it is said not to run, and recover is named
"$CMH" snapshot h.flight -o hs.cmh >/dev/null 2>err.txt
check "snapshot of a dead process's flight record: 'is not running', recover named ($(cat err.txt))" \
    "[ -s hs.cmh ] && grep -q \"pid $leaker is not running: its [0-9]* entries are in hs.cmh; 'cumemhist recover h.flight'\" err.txt && ! grep -q 'so far' err.txt"
# a snapshot where a flight record goes: named as one, and the commands that read it
"$CMH" top --once hs.cmh >/dev/null 2>err.txt
rc=$?
check "top --once of a snapshot: 'a snapshot, not a flight record', summary named ($(cat err.txt))" \
    "[ $rc = 1 ] && grep -q '^cumemhist: hs.cmh: a snapshot, not a flight record: .*summary' err.txt"
# recover of a snapshot says the same (it said 'not a flight record (no magic at byte 0)'), and a
# directory is named one (snapshot /tmp said 'not a flight record (36864 bytes)') (trial5 #11)
"$CMH" recover hs.cmh >/dev/null 2>err.txt
rc=$?
check "recover of a snapshot: 'a snapshot, not a flight record', summary named ($(cat err.txt))" \
    "[ $rc = 1 ] && grep -q '^cumemhist: hs.cmh: a snapshot, not a flight record: recover reads .*summary' err.txt && [ -s hs.cmh ]"
mkdir -p adir
"$CMH" snapshot adir >/dev/null 2>err.txt
rc=$?
"$CMH" recover adir >/dev/null 2>>err.txt
check "snapshot and recover of a directory: 'a directory, not a flight record' ($(cat err.txt | tr '\n' '|'))" \
    "[ $rc = 1 ] && [ \$(grep -c '^cumemhist: adir: a directory, not a flight record\$' err.txt) = 2 ]"

# --- many gone at once (a shared machine's killed benchmarks): one line, not one each; those
# whose flight record went too are not mentioned; top --gone lists the others, later runs are quiet
for k in 1 2 3 4 5 6 7; do
    : >gone$k.flight
    [ $k = 7 ] && rm gone$k.flight # its record is gone too: nothing to recover
    printf 'cumemhist-proc 1\npid %s\nstart 5\nboot another-boot\nexe 1 2\nflight %s\n' $((4000000 + k)) "$T/gone$k.flight" >"$REG/$((4000000 + k)).proc"
done
"$CMH" top --once >gone_top.txt 2>gone_err.txt; rc=$?
check "6 gone processes: one line on stderr, naming their count and top --gone ($(cat gone_err.txt))" \
    '[ $rc = 0 ] && [ "$(wc -l <gone_err.txt)" = 1 ] && grep -q "note: 6 recorded processes are gone (pids 4000001, 4000002, 4000003, 4000004, 4000005 and more); .*top --gone" gone_err.txt && ! grep -q 4000007 gone_err.txt'
"$CMH" top --once >gone_top2.txt 2>gone_err2.txt
check "the next look says nothing of them" '[ ! -s gone_err2.txt ] && ! grep -q "gone" gone_top2.txt'
"$CMH" top --gone >gone_list.txt 2>&1
"$CMH" top --gone --json >gone_list.json 2>&1
check "top --gone lists the 6 with their flight records, not the one without ($(head -1 gone_list.txt))" \
    'grep -q "^6 recorded processes ended without a clean exit" gone_list.txt && [ "$(grep -c "^  pid 400000[1-6] .*gone[1-6].flight" gone_list.txt)" = 6 ] && ! grep -q 4000007 gone_list.txt &&
     py -c "import json; d=json.load(open(\"gone_list.json\")); assert sorted(g[\"pid\"] for g in d[\"gone\"]) == list(range(4000001, 4000007)), d"'
"$CMH" snapshot 4000002 -o x.cmh >/dev/null 2>gone_snap.txt; rc=$?
check "snapshot of a pid said gone earlier names its flight record ($(cat gone_snap.txt))" \
    "[ $rc = 1 ] && grep -q 'pid 4000002 is no longer running; its flight record $T/gone2.flight is for' gone_snap.txt"
# a plain preload killed (SIGKILL): no record parent turns its flight record into a snapshot, so
# the record stays.  The exporter and top given its pid serve its final state, ended, as they do
# given the record's path (before: the pid form exited 1 pointing to recover, the path form served
# it: a monitor named by pid stopped when the job it watched died); snapshot PID still names recover
LIVE_DONE=$T/kdone env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=$T/k.cmh "$P" leak 3 20 >/dev/null 2>&1 &
kpid=$!
wait_until 60 '[ -e kdone ]'
kf=$(sed -n 's/^flight //p' "$REG/$kpid.proc")
kill -KILL $kpid
wait $kpid 2>/dev/null
for form in pid path; do
    a=$kpid; [ $form = path ] && a=$kf
    "$CMH" exporter --once "$a" >kexp_$form.txt 2>kexp_$form.err; echo $? >kexp_$form.rc
    "$CMH" top --once "$a" >ktop_$form.txt 2>ktop_$form.err; echo $? >ktop_$form.rc
done
check "exporter --once PID of a killed process = exporter --once FLIGHT: its final state, process_ended 1 ($(cat kexp_pid.err))" \
    "[ -n \"$kf\" ] && [ \"\$(cat kexp_pid.rc)\" = 0 ] && [ \"\$(cat kexp_path.rc)\" = 0 ] && cmp -s kexp_pid.txt kexp_path.txt &&
     grep -q '^cumemhist_process_ended{pid=\"$kpid\",.*} 1\$' kexp_pid.txt && grep -q '^cumemhist_allocated_bytes{pid=\"$kpid\",.*} [1-9]' kexp_pid.txt"
check "top --once PID of a killed process = top --once FLIGHT: ended, killed, recover named ($(cat ktop_pid.err))" \
    "[ \"\$(cat ktop_pid.rc)\" = 0 ] && cmp -s ktop_pid.txt ktop_path.txt && grep -q '^ *$kpid .* ended ' ktop_pid.txt &&
     grep -q 'pid $kpid is not running: it was killed' ktop_pid.txt"
"$CMH" top --once >/dev/null 2>&1 # (its entry is said and set aside as gone: the pid still resolves)
"$CMH" exporter --once $kpid >kexp_gone.txt 2>/dev/null
check "exporter --once PID of a killed process once top set it aside as gone: the same series" '[ $? = 0 ] && cmp -s kexp_gone.txt kexp_path.txt'
"$CMH" snapshot $kpid -o k2.cmh >/dev/null 2>ksnap.err
check "snapshot PID of the killed process still names recover ($(cat ksnap.err))" \
    "[ \$? = 1 ] && grep -q 'pid $kpid is no longer running; its flight record $kf is for .cumemhist recover' ksnap.err && [ ! -e k2.cmh ]"
rm -f "$kf" "$REG/$kpid.gone" "$REG/$kpid.proc"
rm gone1.flight
"$CMH" top --gone >gone_list2.txt 2>&1
check "a gone process whose flight record was since removed leaves the list" 'grep -q "^5 recorded processes" gone_list2.txt && ! grep -q 4000001 gone_list2.txt'

# --- hostile copies of a flight record: the live reader refuses or reads, never crashes ---
# (one python makes the 40 copies, seed by seed, where it was started once a copy)
py - h.flight 40 <<'PY'
import random, sys
orig = open(sys.argv[1], "rb").read()
for seed in range(1, int(sys.argv[2]) + 1):
    d = bytearray(orig); r = random.Random(seed)
    end = 12288 + 65536 if len(d) > 12288 + 65536 else len(d)
    for _ in range(r.randint(1, 40)):
        at = r.randrange(0, end) if r.random() < 0.7 else r.randrange(0, 12288)
        d[at] = r.randrange(256)
    if r.random() < 0.2: d = d[: r.randrange(12288, len(d))]
    open("m%d.flight" % seed, "wb").write(d)
PY
crashes=0 made=0
for seed in $(seq 1 40); do
    [ -e m$seed.flight ] && made=$((made + 1))
    "$CMH" snapshot -q m$seed.flight -o m.cmh >/dev/null 2>&1
    rc=$?
    [ $rc -le 4 ] || crashes=$((crashes + 1))
done
check "40 mutated flight records: no crash ($crashes of $made)" '[ $made = 40 ] && [ $crashes = 0 ]'

# --- an exec into a program that records nothing: the pid and start time stay, the entry is stale ---
"$CMH" record -q -o pe.cmh -- "$P" exec 1 20 >/dev/null 2>&1 &
rec=$!; epid="" # record's child, once it runs sleep
runs_sleep() {
    epid=$(cat /proc/$rec/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1)
    [ -n "$epid" ] && grep -q sleep /proc/$epid/cmdline 2>/dev/null
}
wait_until 60 runs_sleep
"$CMH" top --json >top4.json 2>err.txt
check "a process that exec'd another program ($epid) is not shown as running, and said: $(cat err.txt)" \
    '[ -n "$epid" ] && ! grep -q "\"pid\": *$epid," top4.json && grep -q "pid $epid is gone" err.txt && [ ! -e "$REG/$epid.proc" ]'
kill $epid 2>/dev/null

# --- OOMs counted as oom and summary count them: a retry that succeeded is not one ---
# (tests/retry_then_oom.c: a caching allocator's retried OOM that then succeeded, then one the
# program saw, whose retry failed too: 1 OOM, 2 retries); top and the exporter while it waits,
# `oom --json` of the dump it leaves
FAKECUDA_CAPACITY=100M "$CMH" record -q -o rto.cmh -- "$B/tests/retry_then_oom" "$T/rto_go" >rto.out 2>&1 &
rto_rec=$!
wait_until 60 'grep -q "40 MiB: CUDA_ERROR_OUT_OF_MEMORY" rto.out'
rto_pid=$(grep -l "rto.cmh.flight" "$REG"/*.proc 2>/dev/null | xargs sed -n 's/^pid //p')
# (its last OOM's retry is not decided while it waits: counted once CMH_LIVE_OOM_GRACE_MS old)
wait_until 30 '"$CMH" top --json $rto_pid 2>/dev/null >rto_top.json; grep -q "\"ooms\": 1," rto_top.json'
mkdir rto_prom && "$CMH" exporter --once --textfile rto_prom $rto_pid >/dev/null 2>&1
touch rto_go
wait $rto_rec
"$CMH" oom --json rto.cmh >rto_oom.json 2>/dev/null
out=$(py - "$rto_pid" <<'PY'
import json, re, sys
pid = int(sys.argv[1])
o = json.load(open("rto_oom.json"))[0]
d = [p for p in json.load(open("rto_top.json"))["processes"] if p["pid"] == pid][0]["devices"][0]
m = re.search(r'^cumemhist_ooms_total\{pid="%d"[^}]*\} (\d+)$' % pid, open("rto_prom/cumemhist.prom").read(), re.M)
r = re.search(r'^cumemhist_oom_retries_total\{pid="%d"[^}]*\} (\d+)$' % pid, open("rto_prom/cumemhist.prom").read(), re.M)
want = (o["num_ooms"], o["num_alloc_retries"])
got = [(d["ooms"], d["oom_retries"]), (int(m.group(1)) if m else None, int(r.group(1)) if r else None)]
print("same %s" % (want,) if want == (1, 2) and all(g == want for g in got) else "oom %s, top and exporter %s" % (want, got))
PY
)
check "top --json and the exporter count OOMs and retries as oom --json of the dump: $out" 'case "$out" in same*) true ;; *) false ;; esac'

# --- the change per minute of a young process: a rate only over a span that makes one ---
# (as leaks gives a rate: a second at least, and a change spread over CMH_LEAK_MIN_STEPS of its
# stretches); a burst of 12 MiB in its first 0.2 s, then nothing, read '+360 MiB/min' two seconds
# on; it has no figure ('-', null, no sample) until its minute is up.  A process that grows step
# after step over seconds has one.  The ramp grows until it is killed: one that stopped after
# 5 s had its steps in ever fewer of its life's stretches while a loaded machine ran top and the
# exporter seconds apart, and the exporter, later, had no figure for it.
LIVE_DONE=$T/burst_done "$CMH" record -q -o burst.cmh -- "$P" leak 6 20 >/dev/null 2>&1 &
LIVE_READY=$T/ramp_ready "$CMH" record -q -o ramp.cmh -- "$P" leak 0 300 >/dev/null 2>&1 &
wait_until 60 '[ -e burst_done ] && [ -e ramp_ready ]'
sleep 6 # (at least: the burst's span past a second; the ramp's steps in enough of its seconds, a point a second)
burst_pid=$(grep -l "burst.cmh.flight" "$REG"/*.proc | xargs sed -n 's/^pid //p')
ramp_pid=$(grep -l "ramp.cmh.flight" "$REG"/*.proc | xargs sed -n 's/^pid //p')
"$CMH" top --json $burst_pid $ramp_pid >rate.json 2>/dev/null
"$CMH" top --once $burst_pid >rate.txt 2>/dev/null
mkdir rate_prom && "$CMH" exporter --once --textfile rate_prom $burst_pid $ramp_pid >/dev/null 2>&1
out=$(py - $burst_pid $ramp_pid <<'PY'
import json, re, sys
b, r = map(int, sys.argv[1:])
d = {p["pid"]: p["devices"][0] for p in json.load(open("rate.json"))["processes"]}
prom = open("rate_prom/cumemhist.prom").read()
series = lambda pid: re.search(r'^cumemhist_allocated_change_bytes_per_minute\{pid="%d"' % pid, prom, re.M) is not None
bad = []
if d[b]["change_per_min"] is not None: bad.append("burst: %s" % d[b]["change_per_min"])
if series(b): bad.append("burst: a sample in the exporter")
if not isinstance(d[r]["change_per_min"], int) or d[r]["change_per_min"] <= 0: bad.append("ramp: %s" % d[r]["change_per_min"])
if not series(r): bad.append("ramp: no sample in the exporter")
print("; ".join(bad) if bad else "ok")
PY
)
check "a burst has no change per minute (null, no sample), a ramp over seconds has one: $out" '[ "$out" = ok ]'
check "top's text says '-' for the burst's change ($(sed -n 2p rate.txt | cut -c57-70))" '[ "$(sed -n 2p rate.txt | cut -c57-70 | tr -d " ")" = - ]'
kill -TERM $burst_pid $ramp_pid 2>/dev/null

# --- driver used is a sample: one older than the process's reserved bytes is marked, not shown as now ---
# (CUMEMHIST_MEMINFO=0: no sample a second, only the first allocation's, so the 20 MiB kept after it
# are reserved and not in the sample; top showed 'DRIVER USED 1.0 MiB' beside 'RESERVED 21.0 MiB')
CUMEMHIST_MEMINFO=0 LIVE_DONE=$T/stale_done "$CMH" record -q -o stale.cmh -- "$P" leak 10 20 >/dev/null 2>&1 &
wait_until 60 '[ -e stale_done ]'
stale_pid=$(grep -l "stale.cmh.flight" "$REG"/*.proc | xargs sed -n 's/^pid //p')
"$CMH" top --once $stale_pid >stale.txt 2>/dev/null
check "top marks a driver-used sample below the process's reserved bytes ($(sed -n 2p stale.txt | cut -c31-54))" \
    'sed -n 2p stale.txt | grep -q "MiB\*" && grep -q "^\* driver used is cuMemGetInfo.s latest sample" stale.txt'
steady=$(for p in $pids; do [ "$p" = "$leaker" ] || { echo $p; break; }; done) # still running, sampled each second
"$CMH" top --once $steady >fresh.txt 2>/dev/null
check "and not one that is current ($(sed -n 2p fresh.txt | cut -c31-54))" 'grep -q "^ *$steady .*live_prog" fresh.txt && ! grep -q "\*" fresh.txt'
kill -TERM $stale_pid 2>/dev/null

# --- a job that dies of its OOM: the OOM is exported after its end (trial5 findings 2, 3) ---
# (live_prog oomexit: 1 TiB asked for, exit 1 at once.)  The OOM counts once its process ended,
# and its series vanished with the process: `increase(cumemhist_ooms_total[5m]) > 0` never
# fired; `exporter PID` exited 1 ('pid N is not a process of yours ...'), the target down.  Now
# the final series stay, marked cumemhist_process_ended 1, for --keep-ended; the named exporter
# says the end once and goes on.  Three exporters (all processes over HTTP, the pid over HTTP,
# all processes as a textfile kept 5 s) and the full-screen top of the pid, from before the OOM
# to after the end.
LIVE_DONE=$T/oe_done LIVE_GO=$T/oe_go "$CMH" record -q -o oe.cmh -- "$P" oomexit 2 20 >/dev/null 2>&1 &
oe_rec=$!
wait_until 60 '[ -e oe_done ]'
oe_pid=$(grep -l "oe.cmh.flight" "$REG"/*.proc | xargs sed -n 's/^pid //p')
pa=$(py -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
pp=$(py -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$CMH" exporter --listen 127.0.0.1:$pa --interval 100 2>oe_all.err &
oe_ea=$!
"$CMH" exporter --listen 127.0.0.1:$pp --interval 100 $oe_pid 2>oe_pid.err &
oe_ep=$!
mkdir oe_tf
"$CMH" exporter --textfile oe_tf --interval 100 --keep-ended 5000 2>oe_tf.err &
oe_et=$!
# oe_wait WANT SECONDS: the pid's "ooms_total/process_ended" in each output ("-" where it has
# no series), polled in one python until they are WANT or SECONDS passed; prints the last seen
oe_wait() { py - "$oe_pid" "$pa" "$pp" "$1" "$2" <<'PY'
import re, sys, time, urllib.request
pid, want, until = sys.argv[1], sys.argv[4], time.monotonic() + float(sys.argv[5])
def text(src):
    try:
        if src == "tf": return open("oe_tf/cumemhist.prom").read()
        return urllib.request.urlopen("http://127.0.0.1:%s/metrics" % src, timeout=5).read().decode()
    except OSError: return ""
def get():
    out = []
    for src in (sys.argv[2], sys.argv[3], "tf"):
        t = text(src)
        v = [re.search(r'^cumemhist_%s\{pid="%s",[^}]*\} (\d+)$' % (m, pid), t, re.M) for m in ("ooms_total", "process_ended")]
        out.append("/".join(x.group(1) if x else "-" for x in v))
    return " ".join(out)
while True:
    got = get()
    if got == want or time.monotonic() > until: break
    time.sleep(0.1)
print(got)
PY
}
got=$(oe_wait "0/0 0/0 0/0" 60)
check "before the OOM: ooms_total 0, process_ended 0 in the three exporters ($got)" '[ "$got" = "0/0 0/0 0/0" ]'
tmx=""
if command -v tmux >/dev/null 2>&1; then
    S=cmhoe$$
    tmx() { env -u LD_PRELOAD tmux -L $S "$@"; }
    tmx new-session -d -s $S -x 200 -y 50 "env LD_LIBRARY_PATH=$LD_LIBRARY_PATH XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR CUMEMHIST_REGISTRY=$CUMEMHIST_REGISTRY TERM=xterm LD_PRELOAD=${LD_PRELOAD:-} $CMH top --interval 200 $oe_pid"
    tmx=1
    wait_until 30 'tmx capture-pane -p -t $S >oe_top1.txt 2>/dev/null; grep -q "^ *$oe_pid .*live_prog" oe_top1.txt'
fi
touch oe_go
wait $oe_rec
oe_rc=$?
got=$(oe_wait "1/1 1/1 1/1" 60)
"$CMH" summary oe.cmh >oe_summary.txt 2>&1
"$CMH" oom --json oe.cmh >oe_oom.json 2>/dev/null
want=$(py -c "import json; print(json.load(open('oe_oom.json'))[0]['num_ooms'])")
check "after the job died of its OOM (rc $oe_rc): ooms_total 1, process_ended 1 in the three exporters ($got), as its record's oom ($want) and summary count it" \
    '[ $oe_rc = 1 ] && [ "$got" = "1/1 1/1 1/1" ] && [ "$want" = 1 ] && grep -q "CUDA OOMs: 1 " oe_summary.txt'
# its last figures with it: allocated at the end as the record's peak --json says
want=$("$CMH" peak --json oe.cmh | py -c "import json,sys; print(json.load(sys.stdin)[0]['end']['allocated'])")
got=$(py - "$oe_pid" "$pp" <<'PY'
import re, sys, urllib.request
try: t = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[2], timeout=5).read().decode()
except OSError: t = ""
m = re.search(r'^cumemhist_allocated_bytes\{pid="%s",[^}]*\} (\d+)$' % sys.argv[1], t, re.M)
print(m.group(1) if m else "-")
PY
)
check "its final allocated bytes served: $got, the record's end $want" '[ "$got" = "$want" ]'
check "exporter PID runs on after the process ended" 'kill -0 $oe_ep 2>/dev/null'
check "and says it once: $(grep "pid $oe_pid" oe_pid.err)" '[ "$(grep -c "^cumemhist: pid $oe_pid ended (it .*--keep-ended" oe_pid.err)" = 1 ]'
check "the all-processes exporters say nothing on stderr of it" '! grep -q "pid $oe_pid" oe_all.err oe_tf.err'
if [ -n "$tmx" ]; then
    wait_until 30 'tmx capture-pane -p -t $S >oe_top2.txt 2>/dev/null; grep -q "^ *$oe_pid .* ended  *1 .*live_prog" oe_top2.txt'
    check "top PID runs on after the process ended, its row 'ended' with its OOM ($(grep "^ *$oe_pid " oe_top2.txt))" \
        'grep -q "^ *$oe_pid .* ended  *1 .*live_prog" oe_top2.txt && grep -q "pid $oe_pid is not running: it exited with status 1; its snapshot .*oe.cmh written and its flight record removed" oe_top2.txt && tmx has-session -t $S 2>/dev/null'
    tmx send-keys -t $S q
    wait_until 30 '! tmx has-session -t $S 2>/dev/null' || tmx kill-server 2>/dev/null
fi
# kept for --keep-ended (5 s for the textfile), then gone; the others keep it (5 minutes)
got=$(oe_wait "1/1 1/1 -/-" 120)
check "after --keep-ended the textfile's series of it are gone, the others' kept ($got)" '[ "$got" = "1/1 1/1 -/-" ]'
kill -TERM $oe_ep $oe_ea $oe_et 2>/dev/null
wait $oe_ep
oe_rc=$?
check "exporter PID stopped by SIGTERM exits 0 ($oe_rc)" '[ $oe_rc = 0 ]'
wait $oe_ea $oe_et 2>/dev/null

# --- a clean end removes the entry ---
for p in $pids; do [ "$p" = "$leaker" ] || kill -TERM $p 2>/dev/null; done
wait_until 60 '[ -z "$(ls "$REG"/*.proc 2>/dev/null)" ]'
check "the entries go when their processes end cleanly" '[ -z "$(ls "$REG"/*.proc 2>/dev/null)" ]'
wait
finish
