#!/bin/sh
# fleet_test.sh BUILD_DIR SOURCE_DIR - a 4-rank job of samples/fleet_rank on the fake driver (4
# devices of 512 MiB): rank 1 leaks 1 MiB a step, rank 2 runs out of memory at step 3.  `ranks`
# must name both; the merged Chrome trace must hold 4 process tracks in time order; fleet.db must
# hold every row of the records; and the example queries of docs/FLEET.md must give the answers
# the job was built to give.
TEST=fleet . "$(dirname "$0")/testlib.sh"

for r in 0 1 2 3; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 FLEET_LEAK_RANK=1 FLEET_OOM_RANK=2 FAKECUDA_DEVICES=4 FAKECUDA_CAPACITY=512M \
        "$CMH" record -q -o run.%r.cmh -- "$B/samples/fleet_rank" 10 >/dev/null 2>&1
    echo "rank $r: exit $?" >>exits.txt
done
[ "$(cat exits.txt | tr '\n' ' ')" = "rank 0: exit 0 rank 1: exit 0 rank 2: exit 1 rank 3: exit 0 " ] &&
    ok "4 ranks recorded (rank 2 ended by its OOM)" || bad "ranks: $(cat exits.txt)"

# ranks, text and JSON
"$CMH" ranks . >ranks.txt 2>&1 || bad "ranks failed: $(cat ranks.txt)"
grep -q "^leaking: rank 1, 10.0 MiB in 1 growing site (cache_batch" ranks.txt && ok "ranks names the leaking rank: $(grep ^leaking ranks.txt)" ||
    bad "ranks does not name rank 1 as leaking: $(cat ranks.txt)"
grep -q "^first OOM: rank 2 on .*, device 2, at .*: 1.0 GiB requested" ranks.txt && ok "ranks names the first OOM: $(grep '^first OOM' ranks.txt)" ||
    bad "ranks does not name rank 2's OOM: $(cat ranks.txt)"
"$CMH" ranks --json run.*.cmh >ranks.json 2>&1 || bad "ranks --json failed"
py - ranks.json <<'EOF' || fail=$((fail + 1))
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["processes"]
assert [r["rank"] for r in rows] == [0, 1, 2, 3], rows
assert [r["device"] for r in rows] == [0, 1, 2, 3]
assert all(r["world_size"] == 4 for r in rows)
assert d["leaking"] == ["rank 1"], d["leaking"]
assert rows[1]["leaked_bytes"] == 10 << 20, rows[1]
assert d["first_oom"]["rank"] == 2 and d["first_oom"]["requested"] == 1 << 30, d["first_oom"]
assert [r["ooms"] for r in rows] == [0, 0, 1, 0]
# weights 64 + 4r MiB, activations 38 MiB; rank 1 also its 10 MiB of cache
assert [r["peak_allocated"] >> 20 for r in rows] == [102, 116, 110, 114], [r["peak_allocated"] >> 20 for r in rows]
assert d["spread"]["peak_allocated"]["max_of"] == "rank 1" and d["spread"]["peak_allocated"]["median"] >> 20 == 112
assert all(r["top_site_at_peak"].startswith("load_weights") for r in rows), [r["top_site_at_peak"] for r in rows]
print("ok: ranks --json: 4 rows in rank order, the spread, rank 1 leaking 10 MiB, rank 2's OOM first")
EOF

# one Chrome trace for all ranks
"$CMH" export run.*.cmh -o all.trace.json 2>err.txt || bad "chrome export of 4 records: $(cat err.txt)"
py - all.trace.json <<'EOF' || fail=$((fail + 1))
import json, sys, collections
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(v.split(" @ ")[0] for v in names.values()) == ["rank 0", "rank 1", "rank 2", "rank 3"], names
last = collections.defaultdict(lambda: -1.0)
n = 0
for e in ev:
    if e["ph"] == "M":
        continue
    assert e["pid"] in names, e
    key = (e["pid"], e.get("tid"), e["ph"], e["name"] if e["ph"] == "C" else "")
    assert e["ts"] >= last[key], f"track {key}: {e['ts']} after {last[key]}"
    last[key] = e["ts"]
    n += 1
ooms = [names[e["pid"]] for e in ev if e["ph"] == "i" and e["name"].startswith("out of memory")]
assert len(ooms) == 1 and ooms[0].startswith("rank 2 @"), ooms
print(f"ok: one Chrome trace: 4 process tracks ({', '.join(sorted(names.values()))}), {n} events in time order per track, rank 2's OOM an instant")
EOF

# the database
"$CMH" export --format sqlite . -o fleet.db 2>err.txt || bad "sqlite export: $(cat err.txt)"
for r in 0 1 2 3; do "$CMH" export --format json run.$r.cmh -o run.$r.json; done
py - fleet.db ranks.json "$SRC/docs/FLEET.md" <<'EOF' || fail=$((fail + 1))
import json, re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = json.load(open(sys.argv[2]))["processes"]
q = lambda sql, *a: db.execute(sql, a).fetchall()
assert q("SELECT COUNT(*) FROM processes") == [(4,)]
for r in rows:
    (pid,), = q("SELECT process_id FROM processes WHERE rank = ?", r["rank"])
    j = json.load(open(f"run.{r['rank']}.json"))
    got = (q("SELECT COUNT(*) FROM events WHERE process_id = ?", pid)[0][0], q("SELECT COUNT(*) FROM segments WHERE process_id = ?", pid)[0][0],
           q("SELECT COUNT(*) FROM blocks WHERE process_id = ?", pid)[0][0], q("SELECT COUNT(*) FROM marks WHERE process_id = ?", pid)[0][0])
    want = (r["trace_entries"], len(j["segments"]), sum(len(s["blocks"]) for s in j["segments"]), 4 if r["rank"] == 2 else 10)
    assert got == want, f"rank {r['rank']}: (events, segments, blocks, marks) {got} != the record's {want}"
    (peak,), = q("SELECT peak_allocated FROM devices WHERE process_id = ?", pid)
    assert peak == r["peak_allocated"], (peak, r["peak_allocated"])
    # allocated memory as a sum of deltas ends where the record ends
    (end, total), = q("SELECT allocated_at_end, allocated_at_start + (SELECT SUM(allocated_delta) FROM events WHERE process_id = ?) FROM devices WHERE process_id = ?", pid, pid)
    assert end == total, (end, total)
print("ok: fleet.db: 4 processes; events, segments, blocks and marks of each equal its record's; peaks and sums agree")

doc = open(sys.argv[3]).read()
queries = dict(re.findall(r"```sql\n-- query: (\S+)\n(.*?)```", doc, re.S))
assert set(queries) == {"worst-rank-peak-owners", "growth-per-rank-per-step", "first-oom", "ranks-that-ran-out"}, list(queries)
owners = q(queries["worst-rank-peak-owners"])
assert [(o[0], o[1].split(" ")[0], o[2] >> 20, o[3]) for o in owners] == [(1, "load_weights", 68, 1), (1, "forward_activations", 38, 4), (1, "cache_batch", 10, 10)], owners
growth = q(queries["growth-per-rank-per-step"])
by = {}
for rank, name, alloc, g in growth:
    by.setdefault(rank, []).append(g)
assert set(by) == {0, 1, 2, 3} and len(by[2]) == 4 and len(by[0]) == 10, {k: len(v) for k, v in by.items()}
assert by[1][1:] == [1 << 20] * 9, by[1]
assert all(v[1:] == [0] * (len(v) - 1) for k, v in by.items() if k != 1), by
oom = q(queries["first-oom"])
assert len(oom) == 1 and oom[0][0] == 2 and oom[0][2] == 2 and oom[0][4] == 1 << 30, oom
ran_out = q(queries["ranks-that-ran-out"])
assert [(r[0], r[2], r[3], r[4], r[5]) for r in ran_out] == [(2, 2, 1, 0, 0)], ran_out
print(f"ok: docs/FLEET.md's queries: the worst rank's peak owners {[(o[1].split(' ')[0], o[2] >> 20) for o in owners]} MiB; rank 1 grows 1 MiB a step, the others 0; the first OOM is rank 2's")
EOF

# real PyTorch snapshots, some whose trace begins late: the documented owners query sums to the peak
set -- "$F"/h200/*.pickle "$F"/h200c/*.pickle
[ -d "$SRC/../shared/fixtures/pytorch" ] && set -- "$@" "$SRC/../shared/fixtures/pytorch/octree_nca_cpp_frames_snapshot_action.pickle"
for f in "$@"; do
    [ -f "$f" ] || continue
    rm -f one.db
    "$CMH" export "$f" -o one.db 2>/dev/null || { bad "sqlite export of $f"; continue; }
    py - one.db "$SRC/docs/FLEET.md" "$f" <<'EOF' || fail=$((fail + 1))
import re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = dict(re.findall(r"```sql\n-- query: (\S+)\n(.*?)```", open(sys.argv[2]).read(), re.S))
rows = db.execute(q["worst-rank-peak-owners"]).fetchall()
(peak, start), = db.execute("SELECT peak_allocated, allocated_at_start FROM devices ORDER BY peak_allocated DESC, process_id LIMIT 1").fetchall()
assert sum(r[2] for r in rows) == peak, (sys.argv[3], sum(r[2] for r in rows), peak)
print(f"ok: {sys.argv[3].split('/')[-1]}: the owners query sums to the peak, {peak} B ({start} B live before the trace)")
EOF
done

# a record with no history (enabled=state; PyTorch's history off): its device has a row, the end
# state in it and its peaks NULL (the row was missing: a query of the job's memory at the end
# missed the device; a one-entry state trace had its end state stored as the peak)
"$CMH" record -q --enabled state -o state.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
rm -f state.db
"$CMH" export state.cmh -o state.db 2>/dev/null
py - state.db <<'EOF'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT device, peak_allocated, peak_allocated_seq, peak_reserved, allocated_at_end, reserved_at_end FROM devices").fetchall()
assert rows == [(0, None, None, None, 12 << 20, 12 << 20)], rows
EOF
check "sqlite: a device of a record with no history has a row, its end state, NULL peaks" '[ $? -eq 0 ]'

# records that cannot be read are named, the rest reported
printf 'not a snapshot' >broken.cmh
"$CMH" ranks run.0.cmh broken.cmh >mixed.txt 2>mixed.err
rc=$?
[ $rc -eq 1 ] && grep -q "broken.cmh" mixed.err && grep -q "^     0 " mixed.txt && ok "a broken record is named (exit 1), the others reported" ||
    bad "ranks with a broken record: exit $rc, $(cat mixed.err)"
# records that are not the ranks of one job are said to be, and compared as separate runs: two
# single-GPU runs of a program (no rank, both on device 0 of this host), or a rank twice
"$CMH" record -q -o solo1.cmh -- "$B/samples/leaky" 2 >/dev/null 2>&1
"$CMH" record -q -o solo2.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
"$CMH" ranks solo1.cmh solo2.cmh >solo.txt 2>solo.err
check "two unrelated single-GPU records: not called one job's 2 devices ($(head -1 solo.txt | cut -c1-150))" \
    "head -1 solo.txt | grep -q '^2 records, not the ranks of one job (no record says which rank it was: RANK unset; two processes on device 0 of [^)]*): 2 separate processes' &&
     ! grep -q 'devices' solo.txt && grep -q \"times from each record's own first entry\" solo.txt && [ ! -s solo.err ]"
"$CMH" ranks --json solo1.cmh solo2.cmh >solo.json 2>solo.err
py - solo.json ranks.json <<'EOF' && grep -q "are not the ranks of one job" solo.err && ok "ranks --json: one_job false with the reasons (said on stderr), true for the 4-rank job" || bad "ranks --json one_job: $(cat solo.err)"
import json, sys
d, job = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["one_job"] is False and "RANK unset" in d["not_one_job_because"], d
assert job["one_job"] is True and "not_one_job_because" not in job, job
EOF
RANK=1 LOCAL_RANK=1 WORLD_SIZE=4 FAKECUDA_DEVICES=4 "$CMH" record -q -o again.cmh -- "$B/samples/fleet_rank" 2 >/dev/null 2>&1
"$CMH" ranks run.*.cmh again.cmh >again.txt 2>&1
check "a rank twice (two processes): not one job" "head -1 again.txt | grep -q 'not the ranks of one job (rank 1 appears in two records'"
cp run.1.cmh copy.cmh # one process's record twice: still one job, the process counted once, the copy named
"$CMH" ranks run.*.cmh copy.cmh >copy.txt 2>copy.err
check "one process's record twice: one job, 4 processes, the copy left out and said ($(cat copy.err))" \
    "head -1 copy.txt | grep -q '^4 records, 4 processes on 4 devices' && grep -q '^cumemhist: ranks: run.1.cmh and copy.cmh are records of one process (pid [0-9]* on .*; copies of one record): run.1.cmh taken, copy.cmh left out' copy.err"
"$CMH" ranks run.*.cmh >job.txt 2>&1
check "the 4-rank job: one job, 4 processes on 4 devices" "head -1 job.txt | grep -q \"^4 records, 4 processes on 4 devices; times from the job's first entry\""

# a record with no history (enabled=state): its peak is not known, as peak, owners and plot say
# (before: 'peak alloc 11.0 GiB', the end state dressed as a peak, in text and JSON)
"$CMH" record -q --enabled state -o st.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
"$CMH" ranks st.cmh run.1.cmh >st.txt 2>&1
"$CMH" ranks --json st.cmh run.1.cmh >st.json 2>/dev/null
check "ranks: a record with no history has no peak, its end state said as such ($(grep st.cmh st.txt | cut -c1-200))" \
    "grep st.cmh st.txt | grep -q '^ *- .* not known  *-  *not known  *- .*at the end .*(no history: the peak is not known; at the end [0-9.]* [KMG]*i*B allocated, [0-9.]* [KMG]*i*B reserved; recorded with enabled=state)\$' &&
     grep -q '^(over the 1 row with a history; 1 has none, its peak not known)' st.txt && ! grep -q 'min [^(]*(st.cmh)' st.txt"
check "ranks --json: no history, peak null (not the end state), the spread over the records with one" "py - st.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
st = [p for p in d['processes'] if p['file'] == 'st.cmh'][0]
other = [p for p in d['processes'] if p['file'] != 'st.cmh'][0]
assert st['history'] is False and st['peak_allocated'] is None and st['peak_reserved'] is None, st
assert st['allocated_at_end'] > 0 and 'top_site_at_end' in st and 'top_site_at_peak' not in st, st
assert other['history'] is True and other['peak_allocated'] > 0, other
sp = d['spread']
assert sp['peaks_not_known'] == 1 and sp['peak_allocated']['min'] == sp['peak_allocated']['max'] == other['peak_allocated'], sp
PY"
"$CMH" ranks --json st.cmh >st1.json 2>/dev/null
"$CMH" ranks st.cmh >st1.txt 2>&1
# why, as the record says it (it said '(recorded with enabled=state)' of every record, a PyTorch
# snapshot with its history off too)
check "ranks: no record with a history: no spread of peaks, and why as the record says ($(grep '^peak allocated' st1.txt))" \
    "grep -q '^peak allocated: not known: no record has a history on any device (recorded with enabled=state)\$' st1.txt &&
     py -c 'import json,sys; d=json.load(open(\"st1.json\")); assert d[\"spread\"][\"peak_allocated\"] is None and d[\"processes\"][0][\"no_history_cause\"] == \"recorded with enabled=state\", d'"
FLEX="$SRC/../shared/fixtures/pytorch/flexgen_torch20_oom_observer_block_history.pickle"
if [ -f "$FLEX" ]; then
    "$CMH" ranks "$FLEX" >flex.txt 2>/dev/null
    check "ranks on PyTorch 2.0's state-only snapshot: 'not known', not 'peak alloc 11.0 GiB'" \
        "grep -q '^ *- *0 *not known .*11.0 GiB at the end' flex.txt &&
         grep -q '^peak allocated: not known: no record has a history on any device (its trace holds only .snapshot. markers' flex.txt"
    # its OOMs are not known either, as oom says (ranks read 'OOMs 0', 'first OOM: none', \"ooms\": 0)
    "$CMH" ranks --json "$FLEX" >flex.json 2>/dev/null
    check "ranks on it: OOMs '-', 'first OOM: not known', ooms null in --json, as oom says not known" \
        "grep -q '^ *- *0 *not known *- *not known *- *- ' flex.txt && grep -q '^first OOM: not known: no record has a history' flex.txt &&
         py -c 'import json; d = json.load(open(\"flex.json\")); assert d[\"processes\"][0][\"ooms\"] is None, d[\"processes\"][0]'"
fi

# a host's name whole, however long (the column cut them at 12: 'gpu-node-004' for both of
# gpu-node-0042.cluster... and gpu-node-0043.cluster...); a UTS namespace of our own names them
LONG1=gpu-node-0042.cluster.example.org LONG2=gpu-node-0043.cluster.example.org
if unshare -Ur -u true 2>/dev/null; then
    for h in $LONG1 $LONG2; do
        unshare -Ur -u sh -c "hostname $h && exec \"\$0\" record -q -o host.$h.cmh -- \"\$1\" 2" "$CMH" "$B/samples/leaky" >/dev/null 2>&1
    done
    "$CMH" ranks host.*.cmh >host.txt 2>&1
    check "ranks: each host's name whole ($(grep -c 'gpu-node-004[23].cluster.example.org  ' host.txt) rows)" \
        "grep -q '^  rank  host  *dev  ' host.txt && grep -q '^     -  $LONG1    0  ' host.txt && grep -q '^     -  $LONG2    0  ' host.txt"
else
    echo "skip: no user namespace for a host name of our own (unshare -Ur -u)"
fi

# a record and its converted copy in one directory (an earlier export of rank 1 as a pickle): one
# process, counted once by every command over many records ("5 records" for 4 processes, without
# a word), the .cmh kept though the copy comes first, the one left out named with the one taken
# (cp without a sanitizer runtime preloaded: its leak report at exit is cp's exit status)
mkdir dup && env -u LD_PRELOAD cp run.0.cmh run.1.cmh run.2.cmh run.3.cmh dup/ || bad "the directory with the 4 records"
"$CMH" export -q dup/run.1.cmh -o dup/a_copy.pickle 2>copy_export.err || bad "the copy of run.1.cmh: $(cat copy_export.err)"
said="are records of one process (pid [0-9]* on .*; copies of one record): dup/run.1.cmh taken, dup/a_copy.pickle left out"
"$CMH" export dup -o dup.db 2>dup_db.err
check "export DIR -o DB with a record and its pickle: 4 records, the copy left out and said ($(cat dup_db.err | tr '\n' '|'))" \
    "grep -q 'wrote dup.db: 4 records' dup_db.err && grep -q \"^cumemhist: export: dup/a_copy.pickle and dup/run.1.cmh \$said\" dup_db.err && [ \"\$(py -c \"import sqlite3; print(sqlite3.connect('dup.db').execute('select count(*) from processes').fetchone()[0])\")\" = 4 ]"
"$CMH" export dup -o dup.trace.json 2>dup_tr.err
check "export DIR -o trace.json: the same rule, 4 records ($(tail -1 dup_tr.err))" \
    "grep -q 'wrote dup.trace.json: 4 records' dup_tr.err && grep -q \"^cumemhist: export: dup/a_copy.pickle and dup/run.1.cmh \$said\" dup_tr.err"
"$CMH" ranks --json dup >dup_ranks.json 2>dup_ranks.err
check "ranks DIR: the same rule, one row per rank ($(cat dup_ranks.err | tr '\n' '|'))" \
    "grep -q \"^cumemhist: ranks: dup/a_copy.pickle and dup/run.1.cmh \$said\" dup_ranks.err && py -c \"import json; d = json.load(open('dup_ranks.json')); assert d['files'] == 4 and [r['rank'] for r in d['processes']] == [0, 1, 2, 3], d\""

# PyTorch's own snapshots have no rank: rows all the same
"$CMH" ranks "$F"/h200/*.pickle >pt.txt 2>&1 && grep -q "^     -  " pt.txt && ok "ranks reads PyTorch's pickles (no rank: by file)" ||
    bad "ranks on pickles: $(head -5 pt.txt)"
finish
