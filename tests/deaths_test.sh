#!/bin/sh
# deaths_test.sh BUILD_DIR SOURCE_DIR - the record survives every way a program ends: each
# fatal signal, SIGINT and SIGTERM to the program, SIGTERM to `record`, SIGKILL; the snapshot
# holds every allocation made before the death (150 entries) and says how the process ended.
# Then the output path checked before the program starts, a lost snapshot's exit status, mode
# 0600, planted symlinks, no claim file left, a background child named, a SIGUSR1 storm giving
# only whole snapshots, a full disk leaving the previous snapshot intact, `recover`.
TEST=deaths . "$(dirname "$0")/testlib.sh"
D=$B/tests/dies

entries() { "$CMH" trace --json "$1" 2>/dev/null | py -c "import json,sys; print(sum(len(d['entries']) for d in json.load(sys.stdin)))"; }
# the entries a live flight record holds so far (a copy taken with recover --live, then removed)
entries_flight() { "$CMH" recover --live -o ef.cmh "$1" 2>/dev/null && entries ef.cmh; rm -f ef.cmh; }

# --- each death: the snapshot exists, holds the 150 entries, and says how the process ended ---
# (a sanitizer runtime takes the hardware faults for itself and exits 1: those are checked in
# the plain build)
faults="segv fpe bus"
case "${LD_PRELOAD:-}" in *asan* | *ubsan*) faults= ;; esac
for how in exit $faults abrt ill kill int term; do
    rm -f x.cmh x.cmh.*
    "$CMH" record -q -o x.cmh -- "$D" $how >/dev/null 2>err.txt
    rc=$?
    n=$(entries x.cmh)
    case $how in
    exit) want_rc=0 said='' ;;
    segv) want_rc=139 said='was killed by SIGSEGV after 150 entries' ;;
    abrt) want_rc=134 said='was killed by SIGABRT after 150 entries' ;;
    fpe) want_rc=136 said='was killed by SIGFPE after 150 entries' ;;
    ill) want_rc=132 said='was killed by SIGILL after 150 entries' ;;
    bus) want_rc=135 said='was killed by SIGBUS after 150 entries' ;;
    kill) want_rc=137 said='was killed by SIGKILL after 150 entries' ;;
    int) want_rc=130 said='was ended by SIGINT; this snapshot was written on the way' ;;
    term) want_rc=143 said='was ended by SIGTERM; this snapshot was written on the way' ;;
    esac
    ok_said=1
    [ -n "$said" ] && ! "$CMH" peak x.cmh 2>/dev/null | grep -q "the process $said" && ok_said=0
    if [ "$n" = 150 ] && [ $rc -eq $want_rc ] && [ $ok_said = 1 ] && [ ! -e x.cmh.flight ]; then ok "$how: exit $rc, 150 entries${said:+, \"$said\"}"
    else bad "$how: exit $rc (want $want_rc), $n entries, said: $("$CMH" peak x.cmh 2>&1 | sed -n 2p) $(cat err.txt)"; fi
done

# a crash passed on as record's own status, never as a core of cumemhist: with core dumps on
# (ulimit -c unlimited, core_pattern "core"), its core would replace the program's in the same
# directory.  record's status says it died by SIGSEGV, without "core dumped".
mkdir cores
py - "$CMH" "$D" "${LD_PRELOAD:-}" <<'PY' && ok "record of a program killed by SIGABRT: status SIGABRT, no core of its own" || bad "record dumped a core of its own"
import os, resource, sys
cmh, d, pre = sys.argv[1], sys.argv[2], sys.argv[3]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    if pre:  # (a sanitizer build's runtime, which py() leaves out of python itself)
        os.environ["LD_PRELOAD"] = pre
    os.chdir("cores")
    os.execv(cmh, [cmh, "record", "-q", "-o", "x.cmh", "--", d, "abrt"])
_, st = os.waitpid(pid, 0)
assert os.WIFSIGNALED(st) and os.WTERMSIG(st) == 6, st
assert not os.WCOREDUMP(st), "record's own core dumped"
PY
rm -rf cores

# a killed rank is still a rank: the flight record keeps who the process was
rm -f r.cmh*
RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 FAKECUDA_DEVICES=2 CUDA_VISIBLE_DEVICES=1 "$CMH" record -q -o r.cmh -- "$D" kill >/dev/null 2>&1
who=$("$CMH" peak --json r.cmh 2>/dev/null | py -c "import json,sys; p=json.load(sys.stdin)[0]['process']; print(p.get('rank'), p.get('local_rank'), p.get('world_size'), p.get('producer'))")
[ "$who" = "3 1 4 cumemhist 0.1.0" ] && ok "SIGKILL'ed rank 3 of 4: the recovered record says so" || bad "recovered identity: $who"
# and which GPU its device 0 was (CUDA_VISIBLE_DEVICES=1: the machine's second, PCI bus 28)
gpu=$("$CMH" ranks --json r.cmh 2>/dev/null | py -c "import json,sys; r=json.load(sys.stdin)['processes'][0]; print(r['device'], r.get('gpu_pci_bus'), r.get('gpu_uuid'))")
[ "$gpu" = "0 0000:28:00.0 GPU-fa6ec0da-1d3a-4b70-8000-000000000001" ] && ok "SIGKILL'ed, its device 0 is still the GPU it was: $gpu" ||
    bad "recovered GPU: $gpu"

# -o /dev/null: a clean end says it went through the device (not 'wrote /dev/null (0 bytes)', the
# node's size); a SIGKILL's recovery goes through it too, as -o asked, and says so
"$CMH" record -o /dev/null -- "$D" exit >/dev/null 2>null.err
check "record -o /dev/null: 'through /dev/null (a character device', not its 0 bytes ($(cat null.err))" \
    "grep -q '^cumemhist: wrote the snapshot through /dev/null (a character device' null.err && ! grep -q '(0 bytes)' null.err"
"$CMH" record -o /dev/null -- "$D" kill >/dev/null 2>null.err
check "record -o /dev/null of a SIGKILLed process: its recovery through /dev/null, nothing kept, said ($(cat null.err))" \
    "grep -q 'snapshot /dev/null (written through it: a character device, nothing of it is kept there, as -o asked)' null.err && [ -z \"\$(ls -A '$XDG_RUNTIME_DIR/cumemhist' 2>/dev/null | grep '\\.cmh')\" ]"
# ... and its forked children killed (SIGKILL, abort) while it exits 0: discarded like it, said,
# status 0 (their recoveries went to the runtime directory, null.PID.cmh, status 0, against the
# help's "1 when a snapshot could not be written where -o said"); through /dev/full, which takes
# nothing, they and the parent's exit dump are in the runtime directory and the status is 1
"$CMH" record -o /dev/null -- "$B/tests/forker" kill abort >/dev/null 2>null.err
rc=$?
check "record -o /dev/null, children killed: discarded like the parent, said, status 0 ($rc: $(cat null.err))" \
    "[ $rc -eq 0 ] && [ \$(grep -c 'snapshot /dev/null (written through it: a character device, nothing of it is kept there, as -o asked)' null.err) -eq 2 ] && [ -z \"\$(ls -A '$XDG_RUNTIME_DIR/cumemhist' 2>/dev/null | grep '\\.cmh')\" ] && ! grep -q 'null.PID' null.err"
"$CMH" record -o /dev/full -- "$B/tests/forker" kill abort >/dev/null 2>full.err
rc=$?
check "record -o /dev/full, children killed: their recoveries in the runtime directory, status 1 ($rc: $(cat full.err))" \
    "[ $rc -eq 1 ] && [ \$(ls '$XDG_RUNTIME_DIR/cumemhist' | grep -c '^full\\.[0-9]*\\.cmh\$') -eq 3 ]"
rm -f "$XDG_RUNTIME_DIR"/cumemhist/full.*.cmh

# what record was given reaches the program: an ignored SIGHUP (nohup) stays ignored
ign=$( (trap '' HUP; "$CMH" record -q -o h.cmh -- sh -c 'sed -n "s/^SigIgn:[[:space:]]*//p" /proc/self/status') 2>/dev/null)
[ $(( 0x$ign & 1 )) -eq 1 ] && ok "an ignored SIGHUP stays ignored in the program (SigIgn $ign)" || bad "SIGHUP not ignored in the program: SigIgn $ign"

# SIGTERM to record itself (a scheduler's preemption): passed on, the program's snapshot written
rm -f y.cmh*
# (waited for by the program's "ready": the flight record's file appears before the record is
# whole, and a signal then found a record no reader knew of yet, under load)
"$CMH" record -q -o y.cmh -- "$D" sleep 20 >y.out 2>&1 &
rp=$!
wait_until 60 "grep -q ready y.out 2>/dev/null"
kill -TERM $rp
wait $rp
rc=$?
[ $rc -eq 143 ] && [ "$(entries y.cmh)" = 150 ] && "$CMH" peak y.cmh | grep -q 'ended by SIGTERM' &&
    ok "SIGTERM to record: passed on, exit 143, the snapshot holds the 150 entries" || bad "SIGTERM to record: exit $rc, $(entries y.cmh) entries"

# SIGKILL of the program from outside
rm -f z.cmh*
"$CMH" record -o z.cmh -- "$D" sleep 20 >z.out 2>err.txt &
rp=$!
wait_until 60 "grep -q ready z.out 2>/dev/null"
pid=$(py -c "import struct; print(struct.unpack_from('<q', open('z.cmh.flight','rb').read(32), 16)[0])")
ls -l z.cmh.flight | grep -q '^-rw-------' && ok "the flight record is mode 0600" || bad "flight record mode: $(ls -l z.cmh.flight)"
kill -KILL "$pid"
wait $rp
rc=$?
[ $rc -eq 137 ] && [ "$(entries z.cmh)" = 150 ] && grep -q "pid $pid killed by SIGKILL after 150 entries; snapshot" err.txt && [ ! -e z.cmh.flight ] &&
    ok "kill -9 of the program: exit 137, recovered: 'pid $pid killed by SIGKILL after 150 entries'" || bad "kill -9: exit $rc, $(cat err.txt)"
ls -l z.cmh | grep -q '^-rw-------' && ok "snapshots are mode 0600" || bad "snapshot mode: $(ls -l z.cmh)"

# recover, for a plain LD_PRELOAD run
rm -f p.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=p.cmh "$D" kill 2>/dev/null
"$CMH" recover p.cmh.flight 2>err.txt && [ "$(entries p.cmh)" = 150 ] && [ ! -e p.cmh.flight ] &&
    ok "recover after a plain LD_PRELOAD run killed by SIGKILL: 150 entries" || bad "recover: $(cat err.txt)"
[ ! -e p.cmh.claim ] && ok "recover removes the claim the killed process left on p.cmh" || bad "p.cmh.claim left: $(cat p.cmh.claim)"
# top on the flight record of a process killed while recording: it says the process ended, and
# how, as recover does; while it ran, it said it runs (the record alone reads the same either way)
rm -f q.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=q.cmh "$D" sleep 20 >q.out 2>/dev/null &
qp=$!
wait_until 60 "grep -q ready q.out 2>/dev/null"
"$CMH" top --json q.cmh.flight >q1.json 2>q1.err
"$CMH" top --once q.cmh.flight >q1.txt 2>&1
kill -KILL $qp
wait $qp 2>/dev/null
"$CMH" top --json q.cmh.flight >q2.json 2>q2.err
"$CMH" top --once q.cmh.flight >q2.txt 2>&1
py - q1.json q2.json <<'EOF2'
import json, sys
a, b = (json.load(open(f))["processes"][0] for f in sys.argv[1:])
# (its change per minute: null while it runs too, its 50 MiB came in a burst: no rate, live_test)
assert a["running"] is True and a["ended"] is None and "change_per_min" in a["devices"][0], a
assert b["running"] is False and "killed, with no chance to mark its end (SIGKILL" in b["ended"] and b["devices"][0]["change_per_min"] is None, b
EOF2
check "top --json: running while it ran, ended (and how) once killed with SIGKILL" "[ $? -eq 0 ]"
check "top --once: a killed process is not shown as running ($(grep -c 'not running' q2.txt) lines say so)" \
    "! grep -q 'not running\|ended' q1.txt && grep -q '^ *$qp .* ended ' q2.txt && grep -q 'sites holding memory at its end' q2.txt &&
     grep -q \"^pid $qp is not running: it was killed, with no chance to mark its end (SIGKILL.*'cumemhist recover .*q.cmh.flight' writes its snapshot\" q2.txt"
"$CMH" recover q.cmh.flight 2>/dev/null >/dev/null
# ranks says how each process ended, whole (it cut the sentence at 159 bytes, --json too)
"$CMH" ranks --json q.cmh 2>/dev/null >qr.json
"$CMH" peak q.cmh 2>/dev/null >qp.txt
check "ranks --json: how the process ended, the whole sentence peak says" "py - qr.json qp.txt <<'EOF2'
import json, sys
end = json.load(open(sys.argv[1]))['processes'][0]['ending']
said = [l for l in open(sys.argv[2]) if ': the process ' in l][0].split(': the process ', 1)[1].strip()
print(len(end), len(said))
sys.exit(end != said)
EOF2"
# a record damaged after it was written (a byte of one entry's body flipped on disk): recover
# drops that record alone, says so, and keeps the other 149
rm -f p.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=p.cmh "$D" kill 2>/dev/null
py - p.cmh.flight <<'EOF2'
import struct, sys
f = open(sys.argv[1], 'r+b')
m = bytearray(f.read())
off, size, cursor = struct.unpack_from('<QQQ', m, 112)  # area[0] (snapshot/flight_format.h)
at, n = off, 0
while at < off + min(size, cursor):
    ln, commit = struct.unpack_from('<II', m, at)
    if not ln:
        break
    # a compact head (version 4): {length | type << 24 | 1 << 31, sum ^ ...}; a whole one: {length, commit | type, sum, 0};
    # a tiny entry's (version 6, types 13 and 14) has fields for its length: 32 and 24 bytes
    head, kind = (8, ln >> 24 & 0x7f) if ln >> 31 else (16, commit & 0xff)
    if ln >> 31 and kind in (13, 14):
        ln = (ln & ~0xffffff) | (32 if kind == 13 else 24)
    if kind in (1, 9, 11, 13, 14):  # an entry: whole, short, a short free, tiny, a tiny free
        n += 1
        if n == 100:  # well past the ring's backfill at start: the only copy of its entry
            m[at + head + 8] ^= 0x01  # its time
            break
    at += ln & 0xffffff
f.seek(0)
f.write(m)
EOF2
"$CMH" recover p.cmh.flight 2>err.txt && [ "$(entries p.cmh)" = 149 ] && grep -q "after 149 entries; snapshot p.cmh (1 damaged record dropped: it does not match its checksum)" err.txt &&
    ok "recover drops a record whose body does not match its checksum, and counts it: 149 entries" || bad "damaged record: $(entries p.cmh) entries, $(cat err.txt)"
# a copy of a record cut short (an interrupted copy, a full disk): what is left is recovered and
# the loss said, and the file is kept; one cut inside its header says so, not "no magic"
rm -f p.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=p.cmh "$D" kill 2>/dev/null
cut=$(py - p.cmh.flight <<'EOF2'
import struct, sys
m = open(sys.argv[1], 'rb').read()
off, size, cursor = struct.unpack_from('<QQQ', m, 112)  # area[0] (snapshot/flight_format.h)
print(off + cursor // 2 + 3)  # half its records, and a few bytes of the next
EOF2
)
cp p.cmh.flight whole.flight
head -c "$cut" whole.flight >p.cmh.flight
"$CMH" recover p.cmh.flight 2>err.txt; rc=$?
n=$(entries p.cmh)
[ $rc = 0 ] && [ "$n" -gt 10 ] && [ "$n" -lt 150 ] && grep -q "the file is cut short: .* bytes of records past its end are lost; p.cmh.flight is kept" err.txt &&
    [ -e p.cmh.flight ] && ok "recover on a cut copy: $n of 150 entries, the loss said, the file kept" || bad "cut copy: exit $rc, $n entries, $(cat err.txt)"
head -c 4000 whole.flight >p.cmh.flight
"$CMH" recover p.cmh.flight 2>err.txt; rc=$?
[ $rc = 1 ] && grep -q "p.cmh.flight: a truncated flight record (4000 bytes, shorter than its 12288-byte header): nothing can be read" err.txt &&
    ok "recover on a copy cut inside its header: says so (exit 1)" || bad "cut header: exit $rc, $(cat err.txt)"
rm -f whole.flight p.cmh*
# the same session's next run after a kill -9 writes the same path (the dead owner's claim is stale)
rm -f p.cmh* p.*.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=p.cmh CUMEMHIST_SESSION=77 "$D" kill 2>/dev/null
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=p.cmh CUMEMHIST_SESSION=77 "$D" exit 2>/dev/null
[ "$(entries p.cmh)" = 150 ] && [ "$(ls p.*.cmh.flight | wc -l)" = 1 ] &&
    ok "after a kill -9, the same session's next run writes p.cmh itself (not p.PID.cmh)" || bad "same session rerun: $(ls p.*)"
# a killed run's record is never lost to the next run at the same path (a new session: the
# path is the new run's): kept as p.PID.cmh.flight, and recover writes p.PID.cmh
rm -f p.cmh* p.*.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=p.cmh "$D" kill 2>/dev/null
kpid=$(py -c "import struct; print(struct.unpack_from('<q', open('p.cmh.flight','rb').read(32), 16)[0])")
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=p.cmh CUMEMHIST_SESSION=999 "$D" exit 2>err.txt
[ -e p.$kpid.cmh.flight ] && [ "$(entries p.cmh)" = 150 ] && grep -q "pid $kpid, which died before writing its snapshot, is now $T/p.$kpid.cmh.flight" err.txt &&
    "$CMH" recover p.$kpid.cmh.flight 2>/dev/null && [ "$(entries p.$kpid.cmh)" = 150 ] && [ "$(entries p.cmh)" = 150 ] &&
    ok "the next run keeps a killed run's record aside (p.$kpid.cmh.flight); recover writes p.$kpid.cmh" ||
    bad "leftover record: $(ls p.*) $(cat err.txt)"

# --- _exit(0): no exit dump; the recorder's _exit marks the record with the status (a
# grandchild's or a plain preload's read 'left no mark (SIGKILL, the OOM killer or _exit()...'
# before: the same words as a SIGKILL) ---
rm -f e.cmh*
"$CMH" record -o e.cmh -- "$D" _exit >/dev/null 2>err.txt
rc=$?
[ $rc -eq 0 ] && [ "$(entries e.cmh)" = 150 ] && grep -q "exited with status 0 without its exit dump" err.txt &&
    "$CMH" peak e.cmh | grep -q "the process exited with status 0 without its exit dump (no exit handler ran: _exit()) after 150 entries" &&
    ok "_exit(0) under record: exit 0, 150 entries, 'exited with status 0 without its exit dump'" || bad "_exit(0) under record: exit $rc, $(cat err.txt)"
rm -f e.cmh*
"$CMH" record -o e.cmh -- sh -c "\"$D\" _exit; true" >/dev/null 2>err.txt
grep -q "pid [0-9]* ended by _exit(0), without its exit dump (no exit handler runs) after 150 entries" err.txt &&
    ok "_exit(0) of a grandchild: record says it ended by _exit(0)" || bad "_exit(0) grandchild: $(cat err.txt)"
rm -f e.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=e.cmh "$D" _exit 2>/dev/null
"$CMH" recover e.cmh.flight 2>err.txt && [ "$(entries e.cmh)" = 150 ] && grep -q "ended by _exit(0), without its exit dump (no exit handler runs)" err.txt &&
    ! grep -q "without a word\|SIGKILL" err.txt && ok "_exit(0), plain LD_PRELOAD: recover says it ended by _exit(0), not 'SIGKILL?'" || bad "_exit(0) recover: $(cat err.txt)"

# --- recover and a process that still runs: refused, or copied with --live; a reused pid ---
rm -f v.cmh* v.*.cmh* w.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=v.cmh "$D" sleep 60 2>/dev/null &
vp=$!
i=0; while [ $i -lt 50 ] && [ "$(entries_flight v.cmh.flight 2>/dev/null)" != 150 ]; do sleep 0.1; i=$((i + 1)); done
"$CMH" recover v.cmh.flight 2>err.txt
rc=$?
[ $rc -eq 2 ] && [ -e v.cmh.flight ] && [ ! -e v.cmh ] && grep -q "pid $vp is still running" err.txt && grep -q -- "--live" err.txt &&
    ok "recover on a live process's record: exit 2, nothing written or removed, --live suggested" || bad "recover live: exit $rc, $(cat err.txt)"
"$CMH" recover --live v.cmh.flight 2>err.txt
rc=$?
[ $rc -eq 0 ] && [ -e v.cmh.flight ] && [ "$(entries v.live.cmh)" = 150 ] && [ ! -e v.cmh ] && grep -q "is left as it is" err.txt &&
    "$CMH" peak v.live.cmh | grep -q "the process was still running when this copy was taken" &&
    ok "recover --live: a copy (v.live.cmh, 150 entries), the record left in place" || bad "recover --live: exit $rc, $(cat err.txt)"
# a record older than start times whose pid runs: refused too (it cannot tell a reused pid)
st=$(sed 's/.*) //' /proc/$vp/stat | cut -d' ' -f20)
cp v.cmh.flight w.cmh.flight
py - w.cmh.flight "$st" <<'EOF2'
import struct, sys
path, st = sys.argv[1], int(sys.argv[2])
b = bytearray(open(path, 'rb').read())
at = b.find(struct.pack('<Q', st), 0, 12288)
assert at > 0
b[at:at + 8] = bytes(8)
open(path, 'wb').write(b)
EOF2
"$CMH" recover w.cmh.flight 2>err.txt
rc=$?
[ $rc -eq 2 ] && grep -q "older than start times" err.txt && [ -e w.cmh.flight ] &&
    ok "an older record (no start time) whose pid runs: refused, the doubt said" || bad "old record, live pid: exit $rc, $(cat err.txt)"
# (it lives 60 s: at load 10 the 6 it had ran out before the checks of it were done)
kill $vp 2>/dev/null; wait $vp 2>/dev/null
# the pid alive with another start time is another process: the record's is dead
rm -f w.cmh*
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=w.cmh "$D" kill 2>/dev/null
# start times count in clock ticks (10 ms): the other process must start in a later one (on a
# quiet machine the two came in the same tick and the record's pid read as still running)
sleep 0.1
sleep 30 &
other=$!
py - w.cmh.flight "$other" <<'EOF2'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
struct.pack_into('<q', b, 16, int(sys.argv[2]))
open(sys.argv[1], 'wb').write(b)
EOF2
"$CMH" recover w.cmh.flight 2>err.txt
rc=$?
kill $other
[ $rc -eq 0 ] && [ "$(entries w.cmh)" = 150 ] && [ ! -e w.cmh.flight ] && grep -q "pid $other now belongs to a later process" err.txt &&
    ok "a record whose pid now names another process (other start time): recovered as dead, said" || bad "reused pid: exit $rc, $(cat err.txt)"
rm -f v.cmh* v.live.cmh w.cmh*

# --- the output path, before the program runs ---
for o in nodir/x.cmh "$D/x.cmh" "$T"; do
    rm -f ran
    "$CMH" record -o "$o" -- sh -c 'touch ran' 2>err.txt
    rc=$?
    [ $rc -eq 1 ] && [ ! -e ran ] && ok "-o $o: refused before the program ran ($(head -c 80 err.txt))" || bad "-o $o: exit $rc, ran=$([ -e ran ] && echo yes)"
done

# a lost snapshot: the program exits 0, but its snapshot cannot be written
rm -rf lost.cmh*
"$CMH" record -q -o lost.cmh -- "$D" block lost.cmh >/dev/null 2>err.txt
rc=$?
[ $rc -ne 0 ] && grep -q 'lost' err.txt && ok "a lost snapshot after exit 0: exit $rc, said" || bad "lost snapshot: exit $rc, $(cat err.txt)"
rm -rf lost.cmh*

# planted symlinks are replaced, never followed
echo victim >victim
ln -sf victim s.cmh
ln -sf victim s.cmh.flight
"$CMH" record -q -o s.cmh -- "$D" exit >/dev/null 2>&1
[ "$(cat victim)" = victim ] && [ ! -L s.cmh ] && [ "$(entries s.cmh)" = 150 ] &&
    ok "symlinks at the snapshot and flight paths: replaced, the file they named untouched" || bad "symlink: victim now $(head -c 20 victim)"

# no claim file outlives the run; a background child still running is named
rm -f b.cmh* b.*.cmh*
"$CMH" record -o b.cmh -- sh -c "\"$D\" sleep 4 >/dev/null & sleep 1; \"$D\" exit" 2>err.txt
ls b.cmh.claim >/dev/null 2>&1 && bad "a claim file outlived the run" || ok "no claim file outlives the run"
grep -q 'is still running; it writes' err.txt && ok "a background child still running is named" || bad "background child: $(cat err.txt)"
# (the background child ends: its flight record, named on the way out, goes with its exit dump;
# 3.5 s were slept before)
bfl=$(sed -n 's/.* is still running; .*recover --live \(.*\))$/\1/p' err.txt | head -1)
wait_until 20 '[ -n "$bfl" ] && [ ! -e "$bfl" ]' || bad "the background child's flight record ${bfl:-?} stayed"

# a SIGUSR1 storm: every snapshot that appears is whole
rm -f u.cmh*
"$CMH" record -q -o u.cmh -- "$D" sleep 6 >/dev/null 2>&1 &
rp=$!
i=0; while [ $i -lt 50 ] && [ ! -e u.cmh.flight ]; do sleep 0.1; i=$((i + 1)); done
pid=$(py -c "import struct; print(struct.unpack_from('<q', open('u.cmh.flight','rb').read(32), 16)[0])")
torn=0 loads=0
for k in $(seq 1 100); do
    kill -USR1 "$pid" 2>/dev/null
    sleep 0.01
    if [ -e u.cmh ]; then loads=$((loads + 1)); "$CMH" summary u.cmh >/dev/null 2>&1 || torn=$((torn + 1)); fi
done
kill "$pid" 2>/dev/null; wait $rp # (the storm is over: not the rest of its 6 s)
[ $torn -eq 0 ] && [ $loads -gt 50 ] && ok "100 SIGUSR1 in a row: $loads loads while they came, all whole" || bad "SIGUSR1 storm: $torn of $loads loads failed"

# a full disk (RLIMIT_FSIZE): the error is said and the previous snapshot stays intact
"$CMH" record -q -o f.cmh -- "$D" exit >/dev/null 2>&1
before=$(cksum <f.cmh)
sh -c "trap '' XFSZ; ulimit -f 4; exec \"$CMH\" record -q -o f.cmh -- \"$D\" exit" >/dev/null 2>err.txt
rc=$?
[ "$(cksum <f.cmh)" = "$before" ] && [ $rc -ne 0 ] && grep -q 'File too large\|lost' err.txt &&
    ok "a dump past RLIMIT_FSIZE: exit $rc, said, the previous snapshot intact" || bad "full disk: exit $rc, $(head -3 err.txt)"

# a program that destroys its context before it ends: the exit dump leaves the dead context alone
"$CMH" record -q -o cd.cmh -- "$B/tests/ctx_destroy" >/dev/null 2>err.txt
rc=$?
# (the 1 MiB it never freed went with the context: the snapshot's end holds nothing, its peak 1 MiB)
[ $rc -eq 0 ] && "$CMH" peak --json cd.cmh 2>/dev/null | py -c "import json,sys; d = json.load(sys.stdin)[0]; assert d['end']['allocated'] == 0 and d['peak_allocated']['bytes'] == 1 << 20, d" &&
    ok "cuCtxDestroy before exit: exit 0, the 1 MiB left ended with the context" || bad "cuCtxDestroy before exit: exit $rc, $(cat err.txt)"


# --- exec(): the program before it has a snapshot of its own, beside the new program's ---
rm -f e.cmh e.*.cmh e.cmh.* e.*.flight
"$CMH" record -o e.cmh -- "$D" exec >/dev/null 2>err.txt
rc=$?
before=$(ls e.*.exec1.cmh 2>/dev/null)
[ $rc -eq 0 ] && [ "$(entries e.cmh)" = 150 ] && [ -n "$before" ] && [ "$(entries "$before")" = 150 ] &&
    "$CMH" peak "$before" 2>/dev/null | grep -q 'the process replaced its program by exec() (the new program.s record is its own) after 150 entries' &&
    "$CMH" peak e.cmh 2>/dev/null | grep -q 'dies exit' && "$CMH" peak "$before" 2>/dev/null | grep -q 'dies exec' &&
    grep -q "snapshot .*$before" err.txt && ! ls e.*flight >/dev/null 2>&1 &&
    ok "exec(): 150 entries before it in $before, said so; 150 after it in e.cmh; exit 0" ||
    bad "exec(): exit $rc, before: '$before' ($(entries "$before") entries), after: $(entries e.cmh); $(cat err.txt)"


# --- a `record` killed outright (SIGKILL) leaves its manifest in /tmp: the next `record` (and
# `recover`) removes it, and never a live run's; its program, still running, makes none again ---
rm -f mk.* ml.* mn.*
"$CMH" record -q -o mk.cmh -- "$D" until "$T/mk.go" >mk.out 2>/dev/null &
killed=$!
"$CMH" record -q -o ml.cmh -- "$D" until "$T/ml.go" >ml.out 2>/dev/null &
live=$!
wait_until 60 'grep -q ready mk.out && grep -q ready ml.out'
dead=$(ls /tmp/cumemhist-manifest-$killed-* 2>/dev/null)
kill -KILL $killed
wait $killed
"$CMH" record -q -o mn.cmh -- "$D" exit >/dev/null 2>&1
gone=$([ -n "$dead" ] && [ ! -e "$dead" ] && echo yes)
touch mk.go # its program ends on its own after that, its record gone: its snapshot is noted nowhere
wait_until 60 '[ -e mk.cmh ]'
alive=$(ls /tmp/cumemhist-manifest-$live-* 2>/dev/null)
touch ml.go
wait $live
rc=$?
{ [ -n "$gone" ] && [ ! -e "$dead" ] && [ -n "$alive" ] && [ $rc -eq 0 ] && [ ! -e "$alive" ] && [ -s ml.cmh ] && [ -s mn.cmh ] &&
    ! ls /tmp/cumemhist-manifest-$killed-* >/dev/null 2>&1; } &&
    ok "a SIGKILLed record's manifest: removed by the next record, the live run's kept (and its end as usual)" ||
    bad "manifests: killed record's '$dead' ($(ls $dead 2>&1)), live run's '$alive', live exit $rc, now: $(ls /tmp/cumemhist-manifest-$killed-* /tmp/cumemhist-manifest-$live-* 2>&1)"
# recover does it too (whatever it is then asked)
rm -f mk.cmh
"$CMH" record -q -o mk.cmh -- "$D" until "$T/mk2.go" >mk2.out 2>/dev/null &
killed=$!
wait_until 60 'grep -q ready mk2.out'
dead=$(ls /tmp/cumemhist-manifest-$killed-* 2>/dev/null)
kill -KILL $killed
wait $killed
touch mk2.go
wait_until 60 '[ -e mk.cmh ]'
"$CMH" recover no-such.cmh.flight >/dev/null 2>&1
{ [ -n "$dead" ] && [ ! -e "$dead" ]; } && ok "recover removes a SIGKILLed record's manifest too" || bad "recover, manifest '$dead': $(ls $dead 2>&1)"

finish
