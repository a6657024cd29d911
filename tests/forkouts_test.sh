#!/bin/sh
# forkouts_test.sh BUILD_DIR SOURCE_DIR - a parent that forks three workers, one ending by exit(0),
# one SIGKILLed, one by _exit(0) (no exit dump, as multiprocessing's workers end), and every
# output naming the same children with the same endings (tests/forker.c), from a stranger's trial:
#  - `cumemhist snapshot PID` of the running parent named no child: the user who forks
#    DataLoader-style workers learnt nothing of them (nor of a fourth, still running, which
#    `cumemhist snapshot CHILD` takes) until the parent ended;
#  - a child's ending had two wordings: the parent's reports said "was killed, with no chance to
#    mark its end (SIGKILL, ...)" and a recovery read through the library "left no mark of its
#    end (killed by a signal no code of it saw ...)";
#  - export -f sqlite and -f chrome took in only the children with a snapshot: the killed one and
#    the _exit() one (each left its flight record only) were in no table and on no track, and no
#    track said how its process ended.
# Under a plain LD_PRELOAD (the flight records left, then `recover`) and under `cumemhist record`.
TEST=forkouts . "$(dirname "$0")/testlib.sh"
FK=$B/tests/forker
preload="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # (as fork_test.sh: the children's ends are what is read)

# every output against the parent's summary: "P: forked child C: ...; it ENDING" for each child;
# the database's processes with parent_pid P and the trace's tracks the same pids, each ending
# the summary's (a recovery's adds " after N entries (recovered ...)")
cat >"$T/same.py" <<'PY'
import json, re, sqlite3, sys
summ, db, trace, ppid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
want = sorted(int(a) for a in sys.argv[5:])
said = {}
for l in open(summ):
    m = re.match(r"[^:]*: forked child (\d+): (.*)$", l.rstrip("\n"))
    if m: said[int(m.group(1))] = m.group(2).split("; it ", 1)[1] if "; it " in m.group(2) else None
assert sorted(said) == want, ("summary names", sorted(said), "want", want)
def same(what, pid, ending):
    s = said[pid]
    assert s and ending and (ending == s or ending.startswith(s + " after ")), (what, pid, "says", ending, "summary says", s)
c = sqlite3.connect(db)
rows = dict(c.execute("SELECT pid, ending FROM processes WHERE parent_pid = ?", (ppid,)).fetchall())
assert sorted(rows) == want, ("sqlite processes forked from", ppid, sorted(rows))
for p, e in rows.items(): same("sqlite", p, e)
ev = json.load(open(trace))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
labels = {e["pid"]: e["args"]["labels"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_labels"}
kids = {}
for t, n in names.items():
    m = re.match(r"pid (\d+)", n)
    l = labels.get(t, "")
    if m and l.startswith("forked from pid %d; the process " % ppid): kids[int(m.group(1))] = l.split("; the process ", 1)[1]
assert sorted(kids) == want, ("chrome tracks forked from", ppid, sorted(kids), names, labels)
for p, e in kids.items(): same("chrome", p, e)
PY

# --- a plain LD_PRELOAD, the parent held running once its children have ended ---
mkdir run && cd run || exit 1
env LD_PRELOAD="$preload" CUMEMHIST_OUTPUT=x.cmh FORKER_HOLD="$T/run/go" "$FK" exit kill _exit hold >out.txt 2>err.txt &
fk=$!
wait_until 120 "grep -q '^holding' out.txt"
ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' out.txt)
ex=$(sed -n 's/^child \([0-9]*\) exit .*/\1/p' out.txt)
ki=$(sed -n 's/^child \([0-9]*\) kill .*/\1/p' out.txt)
qu=$(sed -n 's/^child \([0-9]*\) _exit .*/\1/p' out.txt)
ho=$(sed -n 's/^child \([0-9]*\) hold .*/\1/p' out.txt)
"$CMH" snapshot "$ppid" -o now.cmh >/dev/null 2>snap.txt
rc=$?
check "snapshot PID of the running parent (rc $rc) names its 4 children ($(grep -c 'forked child' snap.txt) lines)" \
    "[ $rc -eq 0 ] && [ -n '$ex' ] && [ -n '$ki' ] && [ -n '$qu' ] && [ -n '$ho' ] && [ \$(grep -c \"^cumemhist: pid $ppid: forked child \\($ex\\|$ki\\|$qu\\|$ho\\): \" snap.txt) -eq 4 ]"
check "... the exited one's record ($(grep "child $ex" snap.txt | cut -c1-110))" \
    "grep -q \"^cumemhist: pid $ppid: forked child $ex: its record x.$ex.cmh; it \" snap.txt"
check "... the killed one's flight record, how it ended, the recover that reads it ($(grep "child $ki" snap.txt | cut -c1-140))" \
    "grep -q \"^cumemhist: pid $ppid: forked child $ki: no snapshot, its flight record x.$ki.cmh.flight (.cumemhist recover x.$ki.cmh.flight. writes it); it was killed, with no chance to mark its end\" snap.txt"
check "... the _exit() one's ($(grep "child $qu" snap.txt | cut -c1-140))" \
    "grep -q \"^cumemhist: pid $ppid: forked child $qu: no snapshot, its flight record x.$qu.cmh.flight (.cumemhist recover x.$qu.cmh.flight. writes it); it ended by _exit(0)\" snap.txt"
check "... the one still running, and the snapshot that takes it ($(grep "child $ho" snap.txt | cut -c1-140))" \
    "grep -q \"^cumemhist: pid $ppid: forked child $ho: still runs, its flight record x.$ho.cmh.flight (.cumemhist snapshot $ho. takes its snapshot now\" snap.txt"
"$CMH" snapshot "$ho" -o held.cmh >/dev/null 2>hs.txt
rc=$?
"$CMH" summary held.cmh >hsum.txt 2>&1
check "snapshot of the running child (rc $rc): its own record, forked from the parent ($(sed -n 1p hsum.txt | cut -c1-80))" \
    "[ $rc -eq 0 ] && sed -n 1p hsum.txt | grep -q \"^held.cmh: pid $ho (forked from pid $ppid)\""
"$CMH" summary now.cmh >sn.txt 2>&1
check "the running parent's snapshot names them as snapshot said ($(grep -c 'forked child' sn.txt) lines)" \
    "[ \$(grep -c '^now.cmh: forked child' sn.txt) -eq 4 ] && [ \"\$(sed -n 's/^now.cmh: \\(forked child .*\\)/\\1/p' sn.txt)\" = \"\$(sed -n 's/^cumemhist: pid $ppid: \\(forked child .*\\)/\\1/p' snap.txt)\" ]"
touch go
wait $fk
wait_until 60 "[ -f x.$ho.cmh ]" # (the held child's exit dump, which its parent does not wait for)

"$CMH" summary x.cmh >s.txt 2>&1
"$CMH" export -f sqlite x.cmh -o a.db >/dev/null 2>ea.txt
"$CMH" export -f chrome x.cmh -o a.json >/dev/null 2>ec.txt
py "$T/same.py" s.txt a.db a.json "$ppid" "$ex" "$ki" "$qu" "$ho" 2>same.err
check "before any recover: summary, sqlite and chrome name the 4 children, each with summary's ending ($(tail -1 same.err | cut -c1-300))" "[ ! -s same.err ]"
# a format that holds one process (pprof, the memviz pickle) says each child it leaves out: it said
# "wrote a.pb.gz: 1 record" and nothing of the children beside it (a stranger's trial, stop 52)
"$CMH" export -f pprof x.cmh -o a.pb.gz >/dev/null 2>ep.txt
"$CMH" export -f memviz x.cmh -o a.pickle >/dev/null 2>em.txt
check "pprof and memviz exports name each child they leave out ($(grep -c 'is not in this export' ep.txt) and $(grep -c 'is not in this export' em.txt) of 3 with records)" \
    "(for c in $ex $ki $qu; do grep -q \"forked child \$c's .* is not in this export\" ep.txt && grep -q \"forked child \$c's .* is not in this export\" em.txt || exit 1; done)"
"$CMH" recover "x.$ki.cmh.flight" >/dev/null 2>rk.txt && "$CMH" recover "x.$qu.cmh.flight" >/dev/null 2>rq.txt
check "recover says each ending as summary said it ($(cat rk.txt rq.txt | cut -c1-100))" \
    "grep -qF \"pid $ki \$(sed -n \"s/^x.cmh: forked child $ki: .*; it was //p\" s.txt) after \" rk.txt &&
     grep -qF \"pid $qu \$(sed -n \"s/^x.cmh: forked child $qu: .*; it //p\" s.txt) after \" rq.txt"
"$CMH" summary x.cmh >s2.txt 2>&1
"$CMH" export -f sqlite x.cmh -o b.db >/dev/null 2>&1
"$CMH" export -f chrome x.cmh -o b.json >/dev/null 2>&1
py "$T/same.py" s2.txt b.db b.json "$ppid" "$ex" "$ki" "$qu" "$ho" 2>same2.err
py - s.txt s2.txt "$ki" "$qu" <<'PY' 2>>same2.err
import sys
a, b = open(sys.argv[1]).read(), open(sys.argv[2]).read()
for c in sys.argv[3:]:
    e1 = [l.split("; it ", 1)[1].rstrip("\n") for l in a.splitlines(True) if ": forked child %s: " % c in l][0]
    e2 = [l.split("; it ", 1)[1].rstrip("\n") for l in b.splitlines(True) if ": forked child %s: " % c in l][0]
    assert e2.startswith(e1 + " after "), (c, e1, e2)
PY
check "after recover: the same children and endings in summary, sqlite and chrome ($(tail -1 same2.err | cut -c1-300))" "[ ! -s same2.err ]"
cd "$T" || exit 1

# --- under `cumemhist record`, which recovers each dead child's record itself ---
mkdir rec && cd rec || exit 1
"$CMH" record -o y.cmh -- "$FK" exit kill _exit >out.txt 2>err.txt
rc=$?
ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' out.txt)
ex=$(sed -n 's/^child \([0-9]*\) exit .*/\1/p' out.txt)
ki=$(sed -n 's/^child \([0-9]*\) kill .*/\1/p' out.txt)
qu=$(sed -n 's/^child \([0-9]*\) _exit .*/\1/p' out.txt)
"$CMH" summary y.cmh >s.txt 2>&1
"$CMH" export -f sqlite y.cmh -o a.db >/dev/null 2>&1
"$CMH" export -f chrome y.cmh -o a.json >/dev/null 2>&1
py "$T/same.py" s.txt a.db a.json "$ppid" "$ex" "$ki" "$qu" 2>same.err
check "record (rc $rc): summary, sqlite and chrome name the 3 children, each with summary's ending ($(tail -1 same.err | cut -c1-300))" \
    "[ $rc -eq 0 ] && [ ! -s same.err ]"
"$CMH" report y.cmh -o r.html 2>/dev/null
miss=
for c in $ex $ki $qu; do
    w=$(grep "^y.cmh: forked child $c:" s.txt | sed 's/^y.cmh: //; s/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g')
    [ -n "$w" ] && grep -qF "data-pid=\"$c\">$w</span>" r.html || miss="$miss $c"
done
check "report: the 3 children, each as summary says it (missing:${miss:- none})" "[ -z '$miss' ]"
cd "$T" || exit 1

finish
