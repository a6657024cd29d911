#!/bin/sh
# oomrule_test.sh BUILD_DIR SOURCE_DIR - which out-of-memory errors the program saw and which an
# allocator above the driver caught and retried (memory_summary's "cudaMalloc retries"), in
# driver-API records, as every output counts them.  A driver call's error goes back to its
# caller: a program that frees a buffer of its own (tests/retry2.c) or trims a pool
# (tests/pooloom.c) and asks again from another line saw the OOM, though `oom` and summary once
# called it "the allocator's retry" ("freed 6.0 GiB of its cached segments", "CUDA OOMs: 0").  A
# caching layer that gives its cache back and asks again from the same call
# (tests/sameretry.c) is still a retry.  oom, summary, frag, owners, report, plot, top and the
# exporter must agree.
TEST=oomrule . "$(dirname "$0")/testlib.sh"
export FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=8G

# record PROG [ARGS]: PROG.cmh, its output in PROG.out
record() {
    _p=$1
    shift
    "$CMH" record -q -o "$_p.cmh" -- "$B/tests/$_p" "$@" >"$_p.out" 2>&1
}
record retry2 && grep -q "4 GiB: error 2, then after freeing 6 GiB: error 0" retry2.out &&
    ok "retry2: the program saw error 2, freed its buffer, asked again: success" || bad "retry2 did not run as designed: $(cat retry2.out)"
record pooloom && grep -q "4 GiB: error 2, then after the trim: error 0" pooloom.out &&
    ok "pooloom: the program saw error 2, trimmed the pool, asked again: success" || bad "pooloom did not run as designed: $(cat pooloom.out)"
record sameretry && grep -q "4 GiB: error 0 (after a retry), 8 GiB: error 2" sameretry.out &&
    ok "sameretry: the layer's retry succeeded once, then failed (error 2)" || bad "sameretry did not run as designed: $(cat sameretry.out)"
record sameretry once && mv sameretry.cmh once.cmh && record sameretry ||
    bad "sameretry once: $(cat sameretry.out)"
record waitretry && grep -q "waitretry: 4 GiB failed 3 times, nothing freed between" waitretry.out &&
    ok "waitretry: the program's own loop asked 3 times from one line, freeing nothing: 3 failures" ||
    bad "waitretry did not run as designed: $(cat waitretry.out)"

# every offline output of each record: (OOMs the program saw, retries), and OOM #1's entry
for want in "retry2 1 0" "pooloom 1 0" "sameretry 2 1" "once 0 1" "waitretry 3 0"; do
    set -- $want
    rec=$1.cmh
    "$CMH" summary --json "$rec" >sum.json 2>&1
    "$CMH" oom --json "$rec" >oom.json 2>&1
    "$CMH" oom --all "$rec" >oom.txt 2>&1 # (each error its own section: errors alike are one without --all)
    "$CMH" frag --json "$rec" >frag.json 2>&1
    "$CMH" frag "$rec" >frag.txt 2>&1
    "$CMH" owners "$rec" >owners.txt 2>&1
    "$CMH" report "$rec" -o rep.html >/dev/null 2>&1
    "$CMH" plot "$rec" -o plot.svg >/dev/null 2>&1
    out=$(py - "$2" "$3" <<'PY'
import json, re, sys
n, r = int(sys.argv[1]), int(sys.argv[2])
s = json.load(open("sum.json"))[0]
o = json.load(open("oom.json"))[0]
f = json.load(open("frag.json"))[0]
txt, frag, owners = open("oom.txt").read(), open("frag.txt").read(), open("owners.txt").read()
page, svg = open("rep.html").read(), open("plot.svg").read()
got = {"summary": (s["num_ooms"], s["num_alloc_retries"]), "oom": (o["num_ooms"], o["num_alloc_retries"]),
       "oom events": (sum(1 for x in o["ooms"] if x["number"]), sum(1 for x in o["ooms"] if x["retried"])),
       "oom text": (len(re.findall(r"out of memory #\d+ on", txt)), len(re.findall(r"retried: not counted as an OOM", txt))),
       "owners": (len(re.findall(r"out of memory #\d+ \(entry", owners)), len(re.findall(r"out of memory, retried \(entry", owners))),
       "report": (len(re.findall(r"Out of memory #\d+</b>", page)), len(re.findall(r"Out of memory, retried</b>", page))),
       "plot": (len(re.findall(r">OOM #\d+<", svg)), len(re.findall(r">OOM, retried<", svg)))}
bad = {k: v for k, v in got.items() if v != (n, r)}
last = o["ooms"][-1]
lo = f["last_oom"]
if (lo["number"], bool(lo["retried"])) != (last["number"], last["retried"]):
    bad["frag last_oom"] = (lo["number"], lo["retried"], last["number"], last["retried"])
# a driver-only record has no cache to speak of: no "cached segments", whatever was freed
if "cached segments" in txt or "of its cache" in page or "freed its cache" in txt:
    bad["words"] = [l for l in txt.splitlines() + page.splitlines() if "cache" in l and "retr" in l]
for x in o["ooms"]:
    if x["retried"] and x.get("retry_by") != "same stack":
        bad["retry_by"] = x
print("bad %s" % bad if bad else "same")
PY
)
    check "$rec: every output counts $2 OOM(s) the program saw, $3 retried: $out" '[ "$out" = same ]'
done

# the words of each: the program's own OOM says no retry; a same-stack retry says what was freed
"$CMH" oom retry2.cmh 2>&1 | grep -q "^retry2.cmh: out of memory #1 on device 0 at entry 1," &&
    ok "oom: retry2's failure is out of memory #1" || bad "oom on retry2: $("$CMH" oom retry2.cmh 2>&1 | grep 'out of memory')"
{ "$CMH" oom retry2.cmh; "$CMH" oom pooloom.cmh; } >rp.txt 2>&1
check "oom: no retry, no cached segments in retry2 and pooloom" \
    '[ "$(grep -c "out of memory #1 on" rp.txt)" = 2 ] && ! grep -q "retried\|retry of\|cached segments" rp.txt'
{ "$CMH" summary retry2.cmh; "$CMH" summary pooloom.cmh; } 2>&1 | grep -c "CUDA OOMs: 1  *|  *cudaMalloc retries: 0 " >n.txt
check "summary: CUDA OOMs 1, cudaMalloc retries 0 for retry2 and pooloom" '[ "$(cat n.txt)" = 2 ]'
"$CMH" oom --all sameretry.cmh >sr.txt 2>&1 # (#1 and #2 are alike: one section without --all)
grep -q "the same call stack asked for as much again after 4.0 GiB was freed" sr.txt &&
    ! grep -q "after nothing was freed\|retry of" sr.txt && grep -q "^sameretry.cmh: out of memory #1 on device 0 at entry 7," sr.txt &&
    grep -q "^sameretry.cmh: out of memory #2 on device 0 at entry 8," sr.txt &&
    ok "oom: sameretry's retry says the same call stack asked again after 4.0 GiB was freed; its 8 GiB, asked again with nothing freed, is #1 and #2" ||
    bad "sameretry's words: $(grep -i 'retr\|out of memory' sr.txt)"
"$CMH" frag once.cmh 2>&1 | grep -q "retried: not counted as an OOM (a cudaMalloc retry: the same call stack asked again at entry 6, and that succeeded)" &&
    ok "frag: a same-stack retry says so" || bad "frag on once.cmh: $("$CMH" frag once.cmh 2>&1 | grep -i retr)"

# ranks names the first OOM as oom does: oom's #1, at the same entry and time (ranks once said
# "at +118.3 ms", the third failure, while oom put #1 at entry 1, +205 µs), and where an
# allocator's failed retries led to it, the entry where its request first failed
"$CMH" oom waitretry.cmh 2>&1 | sed -n 's/^waitretry.cmh: out of memory #1 on device 0 at \(entry [0-9]*, [^ ]* [^ ]*\)$/\1/p' >w1.txt
"$CMH" ranks waitretry.cmh >wr.txt 2>&1
printf "device 0, at %s (oom's out of memory #1): 4.0 GiB requested" "$(cat w1.txt)" >want.txt
check "ranks: waitretry's first OOM is oom's #1 at $(cat w1.txt) ($(grep '^first OOM' wr.txt))" \
    '[ -s w1.txt ] && grep -qF -f want.txt wr.txt'
FAKECUDA_CAPACITY=100M FAKECUDA_DEVICES=1 "$CMH" record -q -o rto.cmh -- "$B/tests/retry_then_oom" >rto.out 2>&1
"$CMH" oom rto.cmh >rto.txt 2>&1
"$CMH" ranks rto.cmh >rtor.txt 2>&1
n1=$(sed -n 's/^rto.cmh: out of memory #1 on device 0 at \(entry [0-9]*, [^ ]* [^ ]*\)$/\1/p' rto.txt)
f1=$(sed -n 's/^  retry of  *the request that failed at entry \([0-9]*\), asked again.*/\1/p' rto.txt | head -1)
printf "device 0, at %s (oom's out of memory #1; its request first failed at entry %s, " "$n1" "$f1" >want.txt
"$CMH" ranks --json rto.cmh 2>/dev/null | py -c "import json,sys; f=json.load(sys.stdin)['first_oom']; print(f.get('entry'), f.get('first_failed_entry'))" >rtoj.txt 2>&1
check "ranks: retry_then_oom's first OOM is oom's #1 at $n1, its request first failed at entry $f1 ($(grep '^first OOM' rtor.txt); --json $(cat rtoj.txt))" \
    '[ -n "$n1" ] && [ -n "$f1" ] && grep -qF -f want.txt rtor.txt && [ "entry $(cat rtoj.txt | cut -d" " -f1), " = "${n1%%+*}" ] && [ "$(cut -d" " -f2 rtoj.txt)" = "$f1" ]'

# without stacks (--context none) and without blocks nothing shows an allocator asking again:
# each failed call is an OOM the program saw, and oom says why
"$CMH" record -q --context none -o none.cmh -- "$B/tests/sameretry" >none.out 2>&1
"$CMH" summary none.cmh 2>&1 | grep -q "CUDA OOMs: 3  *|  *cudaMalloc retries: 0 " &&
    "$CMH" oom none.cmh 2>&1 | grep -q "note: no call stack at its out-of-memory errors (--context none or state) and no allocator" &&
    ! "$CMH" oom sameretry.cmh 2>&1 | grep -q "note: no call stack" &&
    ok "--context none: 3 OOMs the program saw, 0 retries, and oom says why" || bad "--context none: $("$CMH" summary none.cmh | grep OOMs; "$CMH" oom none.cmh | head -5)"

# --- live: top and the exporter count as oom --json of the dump the process leaves ---
for want in "retry2 1 0" "pooloom 1 0" "sameretry 2 1"; do
    set -- $want
    prog=$1 n=$2 r=$3 # (wait_until's own $1, $2 are not these)
    rm -f go
    "$CMH" record -q -o "live_$prog.cmh" -- "$B/tests/$prog" "$T/go" >"live_$prog.out" 2>&1 &
    rec_pid=$!
    wait_until 60 'grep -q "error" "live_$prog.out"'
    pid=$(grep -l "live_$prog.cmh.flight" "$XDG_RUNTIME_DIR"/cumemhist/*.proc 2>/dev/null | xargs sed -n 's/^pid //p')
    # (an OOM whose retry is not decided yet is counted once CMH_LIVE_OOM_GRACE_MS old)
    wait_until 30 '"$CMH" top --json $pid 2>/dev/null >top.json; grep -q "\"ooms\": $n," top.json'
    rm -rf prom && mkdir prom && "$CMH" exporter --once --textfile prom $pid >/dev/null 2>&1
    touch go
    wait $rec_pid
    "$CMH" oom --json "live_$prog.cmh" >live_oom.json 2>/dev/null
    out=$(py - "$pid" "$n" "$r" <<'PY'
import json, re, sys
pid, n, r = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
try:
    o = json.load(open("live_oom.json"))[0]
    d = [p for p in json.load(open("top.json"))["processes"] if p["pid"] == pid][0]["devices"][0]
except (ValueError, IndexError, KeyError) as x:
    sys.exit(print("no dump or no top row: %r" % x))
prom = open("prom/cumemhist.prom").read()
m = re.search(r'^cumemhist_ooms_total\{pid="%d"[^}]*\} (\d+)$' % pid, prom, re.M)
q = re.search(r'^cumemhist_oom_retries_total\{pid="%d"[^}]*\} (\d+)$' % pid, prom, re.M)
want = (o["num_ooms"], o["num_alloc_retries"])
got = [(d["ooms"], d["oom_retries"]), (int(m.group(1)) if m else None, int(q.group(1)) if q else None)]
print("same" if want == (n, r) and all(g == want for g in got) else "oom %s, top and exporter %s" % (want, got))
PY
)
    check "$prog live: top --json and the exporter count $n OOM(s), $r retries, as oom --json of the dump: $out" '[ "$out" = same ]'
done

# --- OOMs the ring dropped still count: 4 OOMs, 3 of them out of a 20-entry ring.  summary, oom,
# owners' and the report's numbers, ranks, top, the exporter and `snapshot PID` once said 1 here
# and top/exporter 4; every output says 4, and oom numbers the one kept #4. ---
rm -f go
FAKECUDA_CAPACITY=512M FAKECUDA_DEVICES=1 "$CMH" record -q --max-entries 20 -o ring.cmh -- "$B/tests/ringoom" "$T/go" >ring.out 2>&1 &
rec_pid=$!
wait_until 60 'grep -q "^oom" ring.out'
pid=$(grep -l "ring.cmh.flight" "$XDG_RUNTIME_DIR"/cumemhist/*.proc 2>/dev/null | xargs sed -n 's/^pid //p')
wait_until 30 '"$CMH" top --json $pid 2>/dev/null >rtop.json; grep -q "\"ooms\": 4," rtop.json'
rm -rf prom && mkdir prom && "$CMH" exporter --once --textfile prom $pid >/dev/null 2>&1
"$CMH" snapshot $pid -o ringsnap.cmh >/dev/null 2>&1
touch go
wait $rec_pid
grep -q "^oom 4$" ring.out && ok "ringoom: the program saw 4 OOMs" || bad "ringoom did not run as designed: $(cat ring.out)"
for rec in ring.cmh ringsnap.cmh; do
    "$CMH" summary --json "$rec" >sum.json 2>&1
    "$CMH" oom --json "$rec" >oom.json 2>&1
    "$CMH" ranks --json "$rec" >ranks.json 2>&1
    "$CMH" report "$rec" -o rep.html >/dev/null 2>&1
    rm -f ring.db ring.trace.json
    "$CMH" export "$rec" -o ring.db >/dev/null 2>&1
    "$CMH" export "$rec" -o ring.trace.json >/dev/null 2>&1
    out=$(py - "$pid" <<'PY'
import json, re, sqlite3, sys
pid = int(sys.argv[1])
s = json.load(open("sum.json"))[0]
o = json.load(open("oom.json"))[0]
rk = json.load(open("ranks.json"))
rows = rk["processes"]
d = [p for p in json.load(open("rtop.json"))["processes"] if p["pid"] == pid][0]["devices"][0]
prom = open("prom/cumemhist.prom").read()
m = re.search(r'^cumemhist_ooms_total\{pid="%d"[^}]*\} (\d+)$' % pid, prom, re.M)
page = open("rep.html").read()
got = {"summary": s["num_ooms"], "oom": o["num_ooms"], "dropped": (s.get("dropped_ooms"), o["dropped_ooms"]), "oom numbers": [x["number"] for x in o["ooms"]],
       "ranks": [r["ooms"] for r in rows], "top": d["ooms"], "exporter": int(m.group(1)) if m else None,
       "report": len(re.findall(r"Out of memory #4</b>", page)),
       # (the SQLite export had no count: its one oom event row, the OOMs the ring dropped lost)
       "sqlite": sqlite3.connect("ring.db").execute("SELECT ooms, oom_retries, dropped_ooms FROM devices").fetchall(),
       # (Chrome: an instant per OOM kept, and one for those the ring dropped; it had the kept one only)
       "chrome": sum(e.get("args", {}).get("dropped_ooms", 1) for e in json.load(open("ring.trace.json"))["traceEvents"]
                     if e["ph"] == "i" and ("out-of-memory" in e["name"] or e["name"].startswith("out of memory")))}
want = {"summary": 4, "oom": 4, "dropped": (3, 3), "oom numbers": [4], "ranks": [4], "top": 4, "exporter": 4, "report": 1,
        "sqlite": [(s["num_ooms"], s["num_alloc_retries"], 3)], "chrome": 4}
print("same" if got == want else "got %s" % got)
PY
)
    check "$rec: summary, oom, ranks, report, top, exporter, the SQLite and Chrome exports all count the 4 OOMs (3 dropped by the ring, summary --json and oom --json dropped_ooms 3): $out" '[ "$out" = same ]'
done
"$CMH" oom ring.cmh 2>&1 | grep -q "^ring.cmh: out of memory #4 on device 0 at entry [0-9]*, .*(#1 to #3 fell out of the 20-entry history)$" &&
    ok "oom: the OOM kept is #4, and #1 to #3 fell out of the history" || bad "oom on ring.cmh: $("$CMH" oom ring.cmh 2>&1 | grep 'out of memory')"
# one name for a site however its snapshot was made: `snapshot PID` (from the flight record) once
# named a frame's module by its full path, "main (/.../ringoom)", the exit dump by its base name,
# "main (ringoom)": diff of the same state listed every site as removed and added
"$CMH" diff ringsnap.cmh ring.cmh >rdiff.txt 2>&1
check "diff of snapshot PID and the exit dump of the same state: no site changed ($(grep -c '(/' rdiff.txt) full paths)" \
    'grep -q "no site.s live bytes changed" rdiff.txt && ! grep -q "(/" rdiff.txt'
# diff counts the errors as summary does: the program's (a retry is none of them), the dropped ones too
# (it said nothing of OOMs: a change that made a run fail read as a change in bytes only)
"$CMH" diff once.cmh ring.cmh >odiff.txt 2>&1
"$CMH" diff --json sameretry.cmh ring.cmh 2>/dev/null | py -c "import json, sys; d = json.load(sys.stdin)[0]['ooms']; print(d['before'], d['after'], d['delta'])" >odiff.json 2>&1
check "diff's out-of-memory errors are summary's: 0 (a retry) -> 4 (3 dropped), and 2 (1 retry) -> 4 in --json ($(grep out-of-memory odiff.txt | tr -s ' '); $(cat odiff.json))" \
    "grep -Eq '^out-of-memory errors +0 +4 +\+4 +new\$' odiff.txt && grep -qx '2 4 2' odiff.json"
"$CMH" leaks ringsnap.cmh 2>&1 | grep -q " main (ringoom) " &&
    ok "snapshot PID names a site by its module's base name: main (ringoom)" || bad "leaks of snapshot PID: $("$CMH" leaks ringsnap.cmh 2>&1 | grep main)"
"$CMH" owners ring.cmh 2>&1 | grep -q "out of memory #4 (entry" &&
    ok "owners: the OOM kept is #4" || bad "owners on ring.cmh: $("$CMH" owners ring.cmh 2>&1 | grep 'out of memory')"
# the memory_viz pickle carries the count beside `dropped`: read back, it says 4 too
"$CMH" export -f memviz ring.cmh -o ring.pickle >/dev/null 2>&1
"$CMH" summary ring.pickle 2>&1 | grep -q "CUDA OOMs: 4  *|" && "$CMH" oom ring.pickle 2>&1 | grep -q "out of memory #4 on" &&
    ok "the memviz export read back: CUDA OOMs 4, out of memory #4" || bad "ring.pickle: $("$CMH" summary ring.pickle 2>&1 | grep 'OOMs')"
# a retry whose OOM entry the ring dropped: the dump counts it as the program's (no entry is left to
# show the retry), and so do top and the exporter once it leaves their window (they said 1 OOM,
# 2 retries where the dump said 2 and 1).  sameretry's 8 GiB, asked again with nothing freed, is
# two OOMs of the program's: 3 in all, 1 of them dropped, no retry
rm -f go
"$CMH" record -q --max-entries 3 -o sr3.cmh -- "$B/tests/sameretry" "$T/go" >sr3.out 2>&1 &
rec_pid=$!
wait_until 60 'grep -q "error" sr3.out'
pid=$(grep -l "sr3.cmh.flight" "$XDG_RUNTIME_DIR"/cumemhist/*.proc 2>/dev/null | xargs sed -n 's/^pid //p')
wait_until 30 '"$CMH" top --json $pid 2>/dev/null >srtop.json; grep -q "\"ooms\": 3," srtop.json'
touch go
wait $rec_pid
"$CMH" oom --json sr3.cmh >sr3.json 2>&1
out=$(py - "$pid" <<'PY'
import json, sys
pid = int(sys.argv[1])
o = json.load(open("sr3.json"))[0]
d = [p for p in json.load(open("srtop.json"))["processes"] if p["pid"] == pid][0]["devices"][0]
got = ((o["num_ooms"], o["num_alloc_retries"], o["dropped_ooms"]), (d["ooms"], d["oom_retries"]))
print("same" if got == ((3, 0, 1), (3, 0)) else "dump (ooms, retries, dropped) and top: %s" % (got,))
PY
)
check "--max-entries 3, a retried OOM dropped: the dump and top both count 3 OOMs, no retry: $out" '[ "$out" = same ]'
# an allocator's retry known only by a block alloc that the ring dropped: the dump's trace shows
# no allocator above, so its OOM is the program's there; top said 1 OOM, 2 retries (it had seen the
# block), the dump 2 and 1.  Both count as a snapshot of the window does (tests/retry_then_oom.c)
rm -f go
FAKECUDA_CAPACITY=100M FAKECUDA_DEVICES=1 "$CMH" record -q --max-entries 6 -o rt6.cmh -- "$B/tests/retry_then_oom" "$T/go" >rt6.out 2>&1 &
rec_pid=$!
wait_until 60 'grep -q "40 MiB" rt6.out'
pid=$(grep -l "rt6.cmh.flight" "$XDG_RUNTIME_DIR"/cumemhist/*.proc 2>/dev/null | xargs sed -n 's/^pid //p')
wait_until 30 '"$CMH" top --json $pid 2>/dev/null >rttop.json; grep -q "\"oom_retries\": 1," rttop.json && grep -q "\"ooms\": 2," rttop.json'
touch go
wait $rec_pid
"$CMH" oom --json rt6.cmh >rt6.json 2>&1
out=$(py - "$pid" <<'PY'
import json, sys
pid = int(sys.argv[1] or 0)
o = json.load(open("rt6.json"))[0]
try:
    d = [p for p in json.load(open("rttop.json"))["processes"] if p["pid"] == pid][0]["devices"][0]
except (ValueError, IndexError, KeyError) as x:
    sys.exit(print("no top row: %r" % x))
got = ((o["num_ooms"], o["num_alloc_retries"]), (d["ooms"], d["oom_retries"]))
print("same" if got[0] == got[1] == (2, 1) else "dump (ooms, retries) and top: %s" % (got,))
PY
)
check "--max-entries 6, a retry's block evidence dropped: the dump and top both count 2 OOMs, 1 retry: $out" '[ "$out" = same ]'
# whatif's recorded row numbers as oom does: the first OOM kept after one the ring dropped is #2
touch go
FAKECUDA_CAPACITY=100M FAKECUDA_DEVICES=1 "$CMH" record -q --max-entries 3 -o rt3.cmh -- "$B/tests/retry_then_oom" "$T/go" >rt3.out 2>&1
"$CMH" whatif rt3.cmh >wi3.txt 2>&1
"$CMH" oom rt3.cmh 2>&1 | grep -q "^rt3.cmh: out of memory #2 on device 0 at entry 2, .*(#1 fell out of the 3-entry history)$" &&
    grep -q "^recorded (its own allocator) .* OOM #2 at entry 2 (40.0 MiB requested; not counted: 1 retry)$" wi3.txt &&
    ok "whatif's recorded row and oom: OOM #2 at entry 2, #1 dropped" || bad "rt3.cmh: $("$CMH" oom rt3.cmh 2>&1 | grep 'out of memory'; grep -E '^recorded' wi3.txt)"
"$CMH" summary ring.cmh 2>&1 | grep -q "CUDA OOMs: 4  *|" &&
    ok "summary: CUDA OOMs 4" || bad "summary on ring.cmh: $("$CMH" summary ring.cmh 2>&1 | grep 'OOMs')"
# a stream-ordered pool's own request (tests/asyncpool.c: 4 x 100 MiB by cuMemAllocAsync, 2 freed
# back into the default pool, then 300 MiB from it fails): the record has the pool's cache as a
# byte total, not its pieces.  `oom` once said "largest free gap 0 B ... verdict: fragmentation,
# not demand: ... no free gap was large enough" of 200 MiB it cannot see into; oom, frag and the
# report now say the gap inside the cache is not known, and the verdict claims no gap either way
FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=512M "$CMH" record -q -o ap.cmh -- "$B/tests/asyncpool" once >ap.out 2>&1 &&
    grep -q "300 MiB: error 2" ap.out || bad "asyncpool did not run as designed: $(cat ap.out)"
"$CMH" oom ap.cmh >apo.txt 2>&1
"$CMH" oom --json ap.cmh >apo.json 2>&1
"$CMH" frag ap.cmh >apf.txt 2>&1
"$CMH" frag --json ap.cmh >apf.json 2>&1
"$CMH" summary --json ap.cmh >aps.json 2>&1
"$CMH" report ap.cmh -o ap.html >/dev/null 2>&1
check "oom on asyncpool: the gap inside the pool's cache is not known, 0 B outside it" \
    'grep -q "^  largest free gap: not known inside a pool.s cache of 200.0 MiB; outside it 0 B" apo.txt'
check "oom on asyncpool: no claim that no free gap was large enough" '! grep -q "no free gap was large enough" apo.txt apf.txt ap.html'
out=$(py - <<'PY'
import json
o = json.load(open("apo.json"))[0]["ooms"][0]
f = json.load(open("apf.json"))[0]
s = json.load(open("aps.json"))[0]
lo = f["last_oom"]
bad = {}
want = {"verdict": "a pool's cache, pieces not known", "largest_gap": 0, "largest_gap_unknown_in": 200 << 20, "usable": 200 << 20,
        "free_in_segments": 200 << 20, "pool_cache": 200 << 20}
for k, v in want.items():
    if o.get(k) != v: bad["oom " + k] = o.get(k)
    if k in lo and lo[k] != v: bad["frag last_oom " + k] = lo[k]
if o["free_in_segments"] != o["reserved"] - o["allocated"]: bad["oom free != reserved - allocated"] = o
if f["free_in_segments"] != f["reserved"] - f["allocated"]: bad["frag free != reserved - allocated"] = f["free_in_segments"]
if s["num_ooms"] != 1: bad["summary ooms"] = s["num_ooms"]
print("bad %s" % bad if bad else "same")
PY
)
check "asyncpool: oom --json, frag --json and summary agree (largest_gap_unknown_in 200 MiB, verdict not fragmentation): $out" '[ "$out" = same ]'
check "frag on asyncpool: the last OOM's gap not known inside the cache" \
    'grep -q "largest free gap: not known inside a pool.s cache of 200.0 MiB; 0 B is the largest outside it" apf.txt'
check "report on asyncpool: the gap not known inside the cache" 'grep -q "largest free gap is not known inside a pool.s cache of 200.0 MiB" ap.html'
finish
