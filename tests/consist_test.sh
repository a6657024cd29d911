#!/bin/sh
# consist_test.sh BUILD_DIR SOURCE_DIR - one record read alike by every output (tests/consist_prog.c).
TEST=consist . "$(dirname "$0")/testlib.sh"
export FAKECUDA_DEVICES=2
"$CMH" record -q -o c.cmh -- "$B/tests/consist_prog" >/dev/null 2>&1 || bad "record consist_prog"

# 1. the record's clock: the "+N" times of a .cmh and of its pickle (which leaves pinned host
#    memory, the earliest event, out) are the same; so the origin of their chrome and sqlite exports
"$CMH" export -q c.cmh -o c.pickle 2>/dev/null || bad "export c.pickle"
for d in 0 1; do
    "$CMH" peak --device $d c.cmh 2>/dev/null | grep -o 'at entry [0-9]*, +.*' >peak_cmh_$d.txt
    "$CMH" peak --device $d c.pickle 2>/dev/null | grep -o 'at entry [0-9]*, +.*' >peak_pk_$d.txt
    check "peak --device $d: the same time from the .cmh and its pickle ($(cat peak_cmh_$d.txt | tr '\n' ' ')/ $(cat peak_pk_$d.txt | tr '\n' ' '))" \
        "[ -s peak_cmh_$d.txt ] && cmp -s peak_cmh_$d.txt peak_pk_$d.txt"
done
"$CMH" leaks --device 0 c.cmh 2>/dev/null | grep -o '+[0-9.]* [^ ]*s  *+[0-9.]* [^ ]*s' >lk_cmh.txt
"$CMH" leaks --device 0 c.pickle 2>/dev/null | grep -o '+[0-9.]* [^ ]*s  *+[0-9.]* [^ ]*s' >lk_pk.txt
check "leaks --device 0: the sites' first and last times the same from the .cmh and its pickle" "[ -s lk_cmh.txt ] && cmp -s lk_cmh.txt lk_pk.txt"
# ... and a second round trip keeps it
"$CMH" export -q c.pickle -o c2.pickle 2>/dev/null
"$CMH" peak --device 1 c2.pickle 2>/dev/null | grep -o 'at entry [0-9]*, +.*' >peak_pk2_1.txt
check "peak --device 1 of the pickle's own pickle: the same time" "cmp -s peak_cmh_1.txt peak_pk2_1.txt"
for f in c c2; do
    src=$f.pickle
    [ $f = c ] && src=c.cmh
    "$CMH" export -q -f chrome $src -o $f.trace.json 2>/dev/null
    "$CMH" export -q -f sqlite $src -o $f.db 2>/dev/null
done
"$CMH" export -q -f chrome c.pickle -o cp.trace.json 2>/dev/null
"$CMH" export -q -f sqlite c.pickle -o cp.db 2>/dev/null
check "chrome and sqlite: one clock origin from the .cmh and from its pickle" "py -c '
import json, sqlite3
o = [json.load(open(f))[\"otherData\"][\"time_origin_ns\"] for f in (\"c.trace.json\", \"cp.trace.json\", \"c2.trace.json\")]
q = [sqlite3.connect(f).execute(\"select clock_origin_ns from processes\").fetchone()[0] for f in (\"c.db\", \"cp.db\", \"c2.db\")]
assert len(set(o)) == 1 and o == q, (o, q)
# the first entry kept on device 0 is read at the same offset in both
t = [sqlite3.connect(f).execute(\"select min(time_ns) from events where device = 0\").fetchone()[0] for f in (\"c.db\", \"cp.db\")]
assert abs((t[0] - q[0]) - (t[1] - q[1])) < 1000, (t, q)
'"

# 3. chrome: tracks named by what they are
check "chrome: the program's ranges and pinned host memory's counter named as such" "py -c '
import json
ev = json.load(open(\"c.trace.json\"))[\"traceEvents\"]
names = {e[\"args\"][\"name\"] for e in ev if e.get(\"ph\") == \"M\" and e.get(\"name\") == \"thread_name\"}
counters = {e[\"name\"] for e in ev if e.get(\"ph\") == \"C\"}
assert \"record_function (PyTorch)\" not in names, names
assert any(n.startswith(\"ranges (the program\") for n in names), names
assert any(n.startswith(\"thread \") and \"(worker2)\" in n for n in names), names
assert \"pinned host memory\" in counters and not any(\"gpu-1\" in c for c in counters), counters
'"

# 4. sqlite: the threads table names events.thread
check "sqlite: a threads table, every event's thread in it, the worker named" "py -c '
import sqlite3
db = sqlite3.connect(\"c.db\")
rows = db.execute(\"select thread, pid, tid, name from threads\").fetchall()
assert any(r[3] == \"worker2\" and r[2] and r[1] for r in rows), rows
missing = db.execute(\"select count(*) from events where thread is not null and thread != 0 and thread not in (select thread from threads)\").fetchone()[0]
assert missing == 0, (missing, rows)
'"

# 6. pinned host memory's steps are the program's: the devices' 8, not 7; and the outcome does
#    not say too few of more than are needed
"$CMH" leaks c.cmh >leaks.txt 2>&1
check "leaks: 8 steps on each device and on pinned host memory ($(grep '^steps' leaks.txt | tr '\n' ' '))" \
    "[ \$(grep -c '^steps: 8 from the program' leaks.txt) = 3 ]"
check "leaks: pinned host memory's outcome counts the steps with its entries ($(grep 'cannot be judged' leaks.txt))" \
    "grep -q 'growth cannot be judged: too few steps with this device.s entries (1 of the 4 needed)' leaks.txt &&
     ! grep -q '([0-9]* of the 4 needed)' leaks.txt | grep -v '([0-3] of'"

# ... also where the steps' lengths vary (a loaded machine: the last step's time was under half
# the median's, and pinned host memory read 7 steps where the devices read 8;
# tests/fixtures/leaks/pinned_uneven_steps.cmh is the consist.c record that read so)
"$CMH" leaks "$F/leaks/pinned_uneven_steps.cmh" >uneven.txt 2>&1
check "leaks of a record with uneven steps: 8 steps on both devices and pinned host memory ($(grep '^steps' uneven.txt | tr '\n' ' '))" \
    "[ \$(grep -c '^steps: 8 from the program' uneven.txt) = 3 ]"

# 7. a mark and a range opened at the same point are one step boundary
"$CMH" record -q -o one.cmh -- "$B/tests/consist_prog" onestep >/dev/null 2>&1 || bad "record consist_prog onestep"
"$CMH" leaks --device 0 one.cmh >one.txt 2>&1
check "leaks: a one-step run with a mark 'step 0' and a range 'step' has 1 step ($(grep '^steps' one.txt))" \
    "grep -q '^steps: 1 from the program.s marks' one.txt"
# ... and its pickle reads the same
"$CMH" export -q one.cmh -o one.pickle 2>/dev/null
"$CMH" leaks --device 0 one.pickle >onep.txt 2>&1
check "leaks of its pickle: 1 step too ($(grep '^steps' onep.txt))" "grep -q '^steps: 1 from the program.s marks' onep.txt"

# 5. --at oom:N where the device has none: what the record has, and the options that reach it
"$CMH" record -q -o oom.cmh -- "$B/tests/consist_prog" oom1 >/dev/null 2>&1
"$CMH" flamegraph --at oom:3 --folded oom.cmh >/dev/null 2>fg3.err
rc=$?
check "flamegraph --at oom:3: exit 2, device 1's one OOM named ($(cat fg3.err))" \
    "[ $rc = 2 ] && grep -q 'device 1 has 1 out-of-memory error (oom:1)' fg3.err"
"$CMH" flamegraph --device 0 --at oom:1 --folded oom.cmh >/dev/null 2>fg0.err
rc=$?
check "flamegraph --device 0 --at oom:1: exit 2, the record's OOM on device 1 named with its options ($(cat fg0.err))" \
    "[ $rc = 2 ] && grep -q 'device 0 has no out-of-memory error; the record has 1 out-of-memory error, on device 1 (--device 1 --at oom:1)' fg0.err"
"$CMH" flamegraph --at oom:1 --folded oom.cmh >fg1.out 2>fg1.err
check "flamegraph --at oom:1: drawn on device 1 ($(cat fg1.err))" "[ -s fg1.out ] && grep -q 'device 1, where the record' fg1.err"
finish
