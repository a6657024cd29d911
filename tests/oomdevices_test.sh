#!/bin/sh
# oomdevices_test.sh BUILD_DIR SOURCE_DIR - two devices, each with an out-of-memory error, device
# 1's first in time (tests/two_dev_oom.c).
# 1. Recorded with --enabled state (no entries: the OOMs counted all the same): every output
#    carries both devices, their OOM counts and why there are no entries (recorded with
#    enabled=state), alike: SQLite had no row for device 1 and ooms NULL for device 0, Chrome's
#    instant said the ring dropped an OOM it never held, export's JSON said nothing of either.
# 2. Recorded with history: the record's first OOM is one fact: oom lists device 1 first and
#    calls its #1 the record's first (it listed device 0 first, two '#1's, and did not say which
#    came first), its JSON ranks each; whatif and flamegraph --at oom pick that one and say which;
#    export -f pprof's oom_space is that one's, on device 1 alone, and its comment says so (it
#    held each device's own first: device 0's #1, the record's 2nd, beside device 1's).
# 3. The same record as a PyTorch pickle without time_us: which device's OOM came first is not
#    known, so none is called the record's first (oom called device 0's #1 "the record's first",
#    "in the record's order (by time)", report "the record's first (by time)", a record_rank);
#    whatif, flamegraph --at oom and pprof's oom_space take the lowest device's and say why.
TEST=oomdevices . "$(dirname "$0")/testlib.sh"
export FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G

"$CMH" record -q --enabled state -o s.cmh -- "$B/tests/two_dev_oom" >s.out 2>&1 || bad "record state: $(cat s.out)"
"$CMH" record -q -o h.cmh -- "$B/tests/two_dev_oom" >h.out 2>&1 || bad "record: $(cat h.out)"
check "the program ran out on both devices, device 1 first" \
    "grep -q 'device 1: 2 grows, then 2' h.out && grep -q 'device 0: big -> 2' h.out"

# ---- 1. no history (enabled=state): the same facts in every output
for f in s h; do
    "$CMH" export -q -f sqlite -o $f.db $f.cmh || bad "export sqlite $f"
    "$CMH" export -q -f chrome -o $f.trace.json $f.cmh || bad "export chrome $f"
    "$CMH" export -q -f json -o $f.json $f.cmh || bad "export json $f"
    "$CMH" oom --json $f.cmh >$f.oom.json || bad "oom --json $f"
    "$CMH" summary --json $f.cmh >$f.sum.json || bad "summary --json $f"
done
"$CMH" oom s.cmh >s.oom.txt 2>&1
"$CMH" summary s.cmh >s.sum.txt 2>&1
WHY='recorded with enabled=state'
if py - s.db "$WHY" >s.db.txt 2>&1 <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT device, trace_entries, ooms, oom_retries, dropped_ooms, no_history_cause FROM devices ORDER BY device").fetchall()
print(rows)
assert rows == [(0, 0, 1, None, None, sys.argv[2]), (1, 0, 1, None, None, sys.argv[2])], rows
assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
PY
then ok "sqlite (state): a row per device, ooms 1 each, retries and dropped NULL, no_history_cause says why"; else bad "sqlite (state): a row per device, ooms 1 each, retries and dropped NULL, no_history_cause says why: $(cat s.db.txt)"; fi
if py - h.db >h.db.txt 2>&1 <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT device, ooms, oom_retries, dropped_ooms, no_history_cause FROM devices ORDER BY device").fetchall()
assert rows == [(0, 1, 0, 0, None), (1, 1, 0, 0, None)], rows
PY
then ok "sqlite (history): ooms 1 each, no_history_cause NULL"; else bad "sqlite (history): ooms 1 each, no_history_cause NULL: $(cat h.db.txt)"; fi
if py - s.trace.json "$WHY" >s.chrome.txt 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
inst = [e for e in ev if e.get("ph") == "i"]
assert not any("ring" in e["name"] for e in inst), inst  # the ring dropped nothing: no entry was recorded
got = sorted((e["pid"], e["args"].get("ooms"), e["args"].get("no_history_cause")) for e in inst if "no_history_cause" in e.get("args", {}))
assert got == [(0, 1, sys.argv[2]), (1, 1, sys.argv[2])], got
assert all("no history (" + sys.argv[2] + ")" in e["name"] and "1 out-of-memory error, counted without entries" in e["name"]
           for e in inst if "no_history_cause" in e.get("args", {})), inst
PY
then ok "chrome (state): each device says no history and why, its 1 OOM counted without entries, no 'ring dropped'"; else bad "chrome (state): each device says no history and why, its 1 OOM counted without entries, no 'ring dropped': $(cat s.chrome.txt)"; fi
if py - s.json h.json "$WHY" >json.txt 2>&1 <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["cumemhist"]
h = json.load(open(sys.argv[2]))["cumemhist"]
assert s["ooms"] == {"0": 1, "1": 1}, s
assert s["no_history_cause"] == {"0": sys.argv[3], "1": sys.argv[3]}, s
assert h["ooms"] == {"0": 1, "1": 1} and "no_history_cause" not in h, h
PY
then ok "export json: ooms per device in both records, no_history_cause in the state record only"; else bad "export json: ooms per device in both records, no_history_cause in the state record only: $(cat json.txt)"; fi
if py - s.oom.json s.sum.json "$WHY" >reports.txt 2>&1 <<'PY'
import json, sys
for f in sys.argv[1:3]:
    d = json.load(open(f))
    got = sorted((o["device"], o["num_ooms"], o["history"], o.get("no_history_cause")) for o in d)
    assert got == [(0, 1, False, sys.argv[3]), (1, 1, False, sys.argv[3])], (f, got)
PY
then ok "oom and summary --json (state): both devices, 1 OOM each, no_history_cause says why"; else bad "oom and summary --json (state): both devices, 1 OOM each, no_history_cause says why: $(cat reports.txt)"; fi
check "oom and summary text (state): both devices' OOM counted, the same cause" \
    "[ \$(grep -c 'device [01]: 1 out-of-memory error; no history to explain it ($WHY)' s.oom.txt) = 2 ] &&
     [ \$(grep -c 'CUDA OOMs: 1 ' s.sum.txt) = 2 ] && [ \$(grep -c 'no history on this device ($WHY)' s.sum.txt) = 2 ]"
"$CMH" flamegraph --at oom -o s.svg s.cmh 2>s.fg.err
check "flamegraph --at oom (state): no history, the OOM counted without entries (not 'no out-of-memory error')" \
    "grep -q 'no history ($WHY): 1 out-of-memory error, counted without entries' s.fg.err && ! grep -q 'no out-of-memory error' s.fg.err"
"$CMH" whatif s.cmh 2>s.wi.err
check "whatif (state): no history named as the cause (not 'a recording of the driver alone')" \
    "grep -q 'no history: $WHY' s.wi.err && ! grep -q 'driver alone' s.wi.err"

# ---- 2. the record's first OOM: one fact across outputs
"$CMH" oom h.cmh >h.oom.txt 2>&1
grep ': out of memory #' h.oom.txt | head -1 >h.first.txt
check "oom lists device 1 first, its #1 the record's first" \
    "grep -q 'out of memory #1 on device 1 at entry [0-9]*, .*: the record.s first out-of-memory error (of 2)' h.first.txt"
check "oom: device 0's #1 is the record's 2nd, naming the first" \
    "grep -q 'out of memory #1 on device 0 at entry [0-9]*, .*: the record.s 2nd (of 2; the first: device 1.s #1)' h.oom.txt"
check "oom: one line above the devices names the record's first and the order" \
    "grep -q \"h.cmh: 2 out-of-memory errors on 2 devices; the record's first: device 1's #1 at entry\" h.oom.txt &&
     grep -q 'in the record.s order (by time; each device numbers its own): device 1 #1, device 0 #1' h.oom.txt"
if py - h.oom.json >rank.txt 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [o["device"] for o in d] == [0, 1], [o["device"] for o in d]  # device order, as every --json
got = [(o["device"], e["number"], e["record_rank"]) for o in d for e in o["ooms"]]
assert got == [(0, 1, 2), (1, 1, 1)], got
t = {o["device"]: o["ooms"][0]["time_ns"] for o in d}
assert t[1] < t[0], t  # the rank is the time's order
PY
then ok "oom --json: devices in device order, each OOM's record_rank by time (device 1's first)"; else bad "oom --json: devices in device order, each OOM's record_rank by time: $(cat rank.txt)"; fi
idx=$(py -c 'import json,sys; d=json.load(open(sys.argv[1])); print([o for o in d if o["device"] == 1][0]["ooms"][0]["index"])' h.oom.json)
"$CMH" whatif h.cmh >/dev/null 2>h.wi.err
"$CMH" flamegraph --at oom -o h.svg h.cmh 2>h.fg.err
for c in whatif flamegraph; do
    f=h.wi.err; [ $c = flamegraph ] && f=h.fg.err
    check "$c picks oom's record-first OOM and says which (device 1's #1 at entry $idx)" \
        "grep -q \"cumemhist: $c: device 1, where the record's first out-of-memory error happened: its #1 at entry $idx, \" $f"
done
"$CMH" report -o h.html h.cmh 2>/dev/null || bad "report h.cmh"
if py - h.html >page.txt 2>&1 <<'PY'
import re, sys
page = open(sys.argv[1]).read()
lines = re.findall(r'<p class="r-oom" data-oom-device="(\d+)"[^>]*>(.*?)</p>', page)
assert [d for d, _ in lines] == ["1", "0"], lines
assert "its #1 is the record's first (by time)" in lines[0][1] and "record's first" not in lines[1][1], lines
PY
then ok "report's header: device 1's OOM line first, saying its #1 is the record's first"; else bad "report's header: $(cat page.txt)"; fi
# pprof: oom_space is what was live at the record's first OOM, on its device (device 1); device 0's
# own OOM is said as the record's 2nd, its oom_space 0; a profile of device 0 alone says the first
# is on a device it does not hold (the comment is in the profile's string table: gzip -dc)
"$CMH" export -q -f pprof -o h.pb.gz h.cmh 2>pp.err || bad "export -f pprof: $(cat pp.err)"
"$CMH" export -q -f pprof --device 0 -o h0.pb.gz h.cmh 2>pp0.err || bad "export -f pprof --device 0: $(cat pp0.err)"
gzip -dc h.pb.gz | tr -d '\000' >h.pb.txt
gzip -dc h0.pb.gz | tr -d '\000' >h0.pb.txt
check "pprof's comment: oom_space is device 1's, the record's first; device 0's #1 the record's 2nd, its oom_space 0" \
    "grep -aq \"oom_space is device 1's (-tagfocus=device=1), what was live at the record's first out-of-memory error\" h.pb.txt &&
     grep -aq \"device 1, live at the end (entry [0-9]*) and at the allocated peak (entry [0-9]*), oom_space at out of memory #1 (entry $idx, as .cumemhist oom. shows it): the record's first out-of-memory error (of 2, by time)\" h.pb.txt &&
     grep -aq \"device 0, [^;]*, out of memory #1 at entry [0-9]*: the record's 2nd (of 2; the first: device 1's #1): oom_space 0 here, it holds device 1's\" h.pb.txt &&
     ! grep -aq 'device 0, [^;]*oom_space at out of memory' h.pb.txt"
check "pprof --device 0: its own #1, said as the record's 2nd, the first on a device the profile does not hold" \
    "grep -aq \"oom_space at out of memory #1 (entry [0-9]*, as .cumemhist oom. shows it): the record's 2nd (of 2; the first: device 1's #1, a device this profile does not hold)\" h0.pb.txt"
if command -v go >/dev/null 2>&1; then
    export GOCACHE="$T/gocache" GOPATH="$T/go" HOME="$T"
    for d in 0 1; do go tool pprof -unit=B -sample_index=oom_space -tagfocus=device=$d -top h.pb.gz >pp$d.txt 2>&1; done
    go tool pprof -raw h.pb.gz >pp.raw 2>&1
    if py - h.oom.json pp1.txt pp0.txt pp.raw >pp.txt 2>&1 <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
first = [o for o in d if o["device"] == 1][0]["ooms"][0]
def total(f):
    return int(re.search(r"accounting for (\d+)B?, ", open(f).read()).group(1))
t1, t0 = total(sys.argv[2]), total(sys.argv[3])
print("oom_space device 1", t1, "device 0", t0, "oom's allocated at the record's first", first["allocated"])
assert first["record_rank"] == 1 and t1 == first["allocated"] and t0 == 0, (t1, t0, first["allocated"])
assert "oom_space is device 1's" in open(sys.argv[4]).read()
PY
    then ok "go tool pprof: oom_space on device 1 is oom's allocated at the record's first OOM; device 0's 0"; else bad "go tool pprof oom_space: $(cat pp.txt)"; fi
else
    echo "skip: go tool pprof not installed (the oom_space figures)"
fi
"$CMH" oom --device 0 h.cmh >h.oom0.txt 2>&1
check "oom --device 0 still says the record's first was device 1's" \
    "grep -q \"the record's first: device 1's #1\" h.oom0.txt && grep -q 'the record.s 2nd (of 2' h.oom0.txt"

# ---- 3. no times: the order across devices is not known
"$CMH" export -q -o ht.pickle h.cmh || bad "export pickle"
py - ht.pickle u.pickle <<'PY' || bad "strip time_us"
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
n = 0
for t in d["device_traces"]:
    for e in t:
        n += e.pop("time_us", None) is not None
assert n, "no time_us to strip"
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
PY
"$CMH" oom u.pickle >u.oom.txt 2>&1
"$CMH" oom --json u.pickle >u.oom.json 2>/dev/null
"$CMH" whatif u.pickle >/dev/null 2>u.wi.err
"$CMH" flamegraph --at oom -o u.svg u.pickle 2>u.fg.err
"$CMH" report -o u.html u.pickle 2>/dev/null || bad "report u.pickle"
"$CMH" export -q -f pprof -o u.pb.gz u.pickle 2>/dev/null || bad "export -f pprof u.pickle"
gzip -dc u.pb.gz | tr -d '\000' >u.pb.txt
check "no times: oom says the order across devices is not known, names no record's first" \
    "grep -q \"u.pickle: 2 out-of-memory errors on 2 devices; no times: which device's OOM came first is not known (whatif and flamegraph --at oom look at the lowest device's, device 0's #1\" u.oom.txt &&
     grep -q 'by device (order not known' u.oom.txt && ! grep -q \"record's first\\|record's order\\|record's 2nd\" u.oom.txt"
check "no times: oom --json gives no record_rank" \
    "py -c 'import json,sys; d=json.load(open(sys.argv[1])); r=[e[\"record_rank\"] for o in d for e in o[\"ooms\"]]; assert len(r)==2 and r==[None,None], r' u.oom.json"
for c in whatif flamegraph; do
    f=u.wi.err; [ $c = flamegraph ] && f=u.fg.err
    check "no times: $c takes the lowest device's OOM and says the order is not known" \
        "grep -q \"cumemhist: $c: device 0, the lowest with an out-of-memory error (no times: which device's OOM came first is not known): its #1 at entry\" $f"
done
check "no times: report and pprof call no OOM the record's first" \
    "! grep -q \"record's first (by time)\" u.html && grep -q \"no times: which device's OOM came first is not known\" u.html &&
     ! grep -aq \"record's first out-of-memory\\|record's 2nd\" u.pb.txt && grep -aq \"oom_space is device 0's (-tagfocus=device=0), what was live at its first out-of-memory error (no times\" u.pb.txt"
finish
