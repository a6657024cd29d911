#!/bin/sh
# kin_test.sh BUILD_DIR SOURCE_DIR - a parent whose two threads each run the same loop on a
# device of their own, and a forked child that uses the GPU and is killed (tests/kin_prog.c; a
# stranger's trial):
#  - device 1's loop of one allocation and its free read 'steps: unknown' where device 0's same
#    loop, keeping a block each step, read 'steps: 20': a device whose every entry one thread
#    made is cut as that thread's loop is;
#  - leaks' first/last read '+0.000s +0.000s' where plot said '+176.4 µs': one time format;
#  - leaks --json said thread 0, threads_holding 0 of a site one worker thread made, and no text
#    said which thread: made_by, and 'made by recording thread 1 (tid N, 'worker')';
#  - the parent's views said nothing of the child's record.
TEST=kin . "$(dirname "$0")/testlib.sh"
export FAKECUDA_DEVICES=2
P=$B/tests/kin_prog

"$CMH" record -q -o app.cmh -- "$P" 20 0 >out.txt 2>err.txt
rc=$?
child=$(sed -n 's/^child \([0-9]*\)$/\1/p' out.txt)
check "record: exit 0, the child's record beside the parent's (rc $rc, $(ls | tr '\n' ' '))" "[ $rc -eq 0 ] && [ -n '$child' ] && [ -f app.cmh ] && [ -f app.$child.cmh ]"
"$CMH" leaks app.cmh >l.txt 2>&1
"$CMH" leaks --json app.cmh >l.json 2>&1

# --- one step finder for both devices ---
check "device 1's loop of one allocation and its free has its 20 steps as device 0's has ($(grep '^steps' l.txt | tr '\n' '|'))" \
    "[ \$(grep -c '^steps: 20 detected from the allocation pattern' l.txt) -eq 2 ] && ! grep -q 'steps: unknown' l.txt"
py -c '
import json, sys
d = {x["device"]: x["steps"] for x in json.load(open("l.json"))}
assert d[0]["count"] == 20 and d[1]["count"] == 20 and d[1]["source"] == "pattern" and d[1]["period_entries"] == 2, d' 2>st.err
check "leaks --json: 20 steps on each device, device 1's of 2 entries ($(tail -1 st.err))" "[ ! -s st.err ]"

# --- one time format: leaks' cells are the µs, ms or s the figure needs ---
"$CMH" plot app.cmh -o p.svg 2>/dev/null
grep -A2 '^ *bytes  blocks' l.txt | sed -n 2p >row.txt
py - <<'PY' 2>tf.err
import json, re
origin = int(re.search(r'data-clock-origin-ns="(\d+)"', open("p.svg").read()).group(1))
x = json.load(open("l.json"))[0]["sites"][0]
def when(ns):
    d = ns // 1000 - origin // 1000; a = abs(d); s = "-" if d < 0 else "+"
    if a >= 999950: return "%s%.3fs" % (s, a / 1e6)
    if a >= 1000: return "%s%.1f ms" % (s, a / 1e3)
    return "%s%d \u00b5s" % (s if a else "+", a)
row = open("row.txt", encoding="utf-8").read()
want = " %s %s  growing" % (when(x["first_ns"]).rjust(10), when(x["last_ns"]).rjust(10))
assert want in row, (want, row)
PY
check "leaks' first and last: the figures at their scale, lined up ($(tr -s ' ' <row.txt | cut -c1-60); $(tail -1 tf.err))" "[ ! -s tf.err ] && ! grep -q '+0.000s' l.txt"

# --- the threads a site's blocks came from ---
"$CMH" record -q -o both.cmh -- "$P" 20 01 >out2.txt 2>/dev/null
"$CMH" leaks both.cmh >b.txt 2>&1
"$CMH" leaks --json both.cmh >b.json 2>&1
py - <<'PY' 2>th.err
import json
for d in json.load(open("b.json")):
    x = d["sites"][0]
    t = 1 + d["device"]  # thread 1 started first, on device 0
    assert x["threads_holding"] == 1, x
    m = x["made_by"]
    assert len(m) == 1 and m[0]["thread"] == t and m[0]["tid"] > 0 and m[0]["name"] == "worker", m
    print("made by recording thread %d (tid %d, 'worker')" % (t, m[0]["tid"]))
PY
sed -n "s/^        \(made by .*\)/\1/p" b.txt >made.txt
check "leaks --json: each device's site made by its own worker thread, and the text says so ($(tr '\n' '|' <made.txt) $(tail -1 th.err))" \
    "[ -s made.txt ] && [ ! -s th.err ] && [ \"\$(cat made.txt)\" = \"\$(py - <<'PY'
import json
for d in json.load(open('b.json')):
    m = d['sites'][0]['made_by'][0]
    print(\"made by recording thread %d (tid %d, 'worker')\" % (m['thread'], m['tid']))
PY
)\" ]"
# --- the parent's record names its forked child, and where the child's record is ---
"$CMH" summary app.cmh >s.txt 2>&1
check "leaks names the child's record and how it ended ($(grep 'forked child' l.txt | cut -c1-120))" \
    "grep -q \"^app.cmh: forked child $child: its record app.$child.cmh; it was killed, with no chance to mark its end (SIGKILL.* (recovered from its flight record)\$\" l.txt"
check "summary too ($(grep -c 'forked child' s.txt) line)" "[ \$(grep -c \"^app.cmh: forked child $child: its record app.$child.cmh; it was killed\" s.txt) -eq 1 ]"
py - "$child" <<'PY' 2>fc.err
import json, sys
pid = int(sys.argv[1])
for d in json.load(open("l.json")):
    c = d["forked_children"]
    assert len(c) == 1 and c[0]["pid"] == pid and c[0]["record"] == "app.%d.cmh" % pid, c
    assert c[0]["written_to"].endswith("/app.%d.cmh" % pid) and "killed" in c[0]["ending"] and "flight record" in c[0]["ending"], c
    assert d["forked_children_more"] == 0, d
PY
check "leaks --json: forked_children with its pid, record, where it was written and its ending ($(tail -1 fc.err))" "[ ! -s fc.err ]"
# a child's own record: its blocks were made by its own thread, the child's pid (it named the
# parent's: the thread table came through fork as it was, where the parent had allocated first)
mkdir ft && (cd ft && "$CMH" record -q -o f.cmh -- "$B/tests/fork_tid" >out.txt 2>&1)
ftc=$(sed -n 's/^child \([0-9]*\)$/\1/p' ft/out.txt)
"$CMH" leaks --json "ft/f.$ftc.cmh" >cj.json 2>/dev/null
py - "$ftc" cj.json <<'PY' 2>ct.err
import json, sys
child, d = int(sys.argv[1]), json.load(open(sys.argv[2]))
d = d[0] if isinstance(d, list) else d
tids = {m["tid"] for x in d["sites"] for m in x.get("made_by", [])}
assert tids == {child}, (tids, child)
PY
check "the child's record: its blocks made by the child's own thread (tid = its pid) ($(tail -1 ct.err))" "[ ! -s ct.err ]"
# the two records moved together: found beside the parent's, wherever that is now
mkdir moved && cp app.cmh "app.$child.cmh" moved/
(cd / && "$CMH" leaks "$T/moved/app.cmh") >m.txt 2>&1
check "records moved together: the child's found beside the parent's ($(grep 'forked child' m.txt | cut -c1-90))" \
    "grep -q \"^$T/moved/app.cmh: forked child $child: its record $T/moved/app.$child.cmh; it was killed\" m.txt"
"$CMH" report app.cmh -o r.html 2>/dev/null
check "the HTML report names the child, its record and how it ended" "grep -q \"<span class=.r-child. data-pid=.$child.>forked child $child: its record app.$child.cmh; it was killed, with no chance to mark its end (SIGKILL.*(recovered from its flight record)</span>\" r.html"
# export to SQLite of the parent's record takes the child's beside it
"$CMH" export app.cmh -o a.db 2>ex.txt
rc=$?
n=$(py -c "import sqlite3; print(sorted(r[0] for r in sqlite3.connect('a.db').execute('select pid from processes')))" 2>&1)
ppid=$(sed -n 's/^app.cmh: pid \([0-9]*\) .*/\1/p' s.txt)
check "export app.cmh -o a.db: the child's record goes in too, said (rc $rc, pids $n; $(tr '\n' '|' <ex.txt))" \
    "[ $rc -eq 0 ] && { [ \"$n\" = \"[$ppid, $child]\" ] || [ \"$n\" = \"[$child, $ppid]\" ]; } && grep -q \"forked child $child's record app.$child.cmh goes in too\" ex.txt && grep -q ': 2 records' ex.txt"
# the chrome trace of the parent's record: the child's process in too, on a track of its own, as in
# the database, each process's devices its own tracks (it held the parent's alone, one record)
"$CMH" export -f chrome app.cmh -o a.trace.json 2>exc.txt
rc=$?
n=$(py - a.trace.json <<'PY' 2>&1
import json, re, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
pids = sorted({int(m.group(1)) for m in (re.match(r"pid (\d+) ", v) for v in names.values()) if m})
tracks = {e["pid"] for e in ev if e.get("ph") == "C"}
print(pids if all(re.match(r"pid \d+ ", v) for v in names.values()) and tracks <= set(names) and len(tracks) == len(names) else "tracks %r, names %r" % (tracks, names))
PY
)
check "export -f chrome app.cmh: the child's process goes in too, its own track, said (rc $rc, pids $n; $(tr '\n' '|' <exc.txt))" \
    "[ $rc -eq 0 ] && { [ \"$n\" = \"[$ppid, $child]\" ] || [ \"$n\" = \"[$child, $ppid]\" ]; } && grep -q \"forked child $child's record app.$child.cmh goes in too\" exc.txt && grep -q ': 2 records' exc.txt"
# named twice: once
"$CMH" export app.cmh "app.$child.cmh" -o b.db 2>ex2.txt
check "the child named too: in once ($(tail -1 ex2.txt))" "grep -q ': 2 records' ex2.txt && ! grep -q 'goes in too' ex2.txt"
# and gone: said in one line, not an error
rm "moved/app.$child.cmh" "app.$child.cmh"
"$CMH" leaks moved/app.cmh >g.txt 2>&1
rc=$?
check "the child's record gone: one line says so, exit $rc ($(grep 'forked child' g.txt))" \
    "[ $rc -eq 0 ] && grep -q \"^moved/app.cmh: 1 forked child left no record here (no CUDA use, or moved elsewhere): pid $child\$\" g.txt"
finish
