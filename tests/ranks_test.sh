#!/bin/sh
# ranks_test.sh BUILD_DIR SOURCE_DIR - `cumemhist ranks` over what a job leaves behind:
#  - per-rank PyTorch pickles (each rank's torch.cuda.memory._dump_snapshot, snap_rank0.pickle ...
#    snap_rank7.pickle; a pickle says no rank): they read as 8 records with no rank, 'not the
#    ranks of one job', compared as separate runs; now the ranks of one job, each its file
#    name's, peaks and the first OOM compared across them (--rank-from record: as before);
#  - a rank and a child it forked (its record says forked_from): read as two processes of the
#    job, both rank 0, in the spread; now the child is said to be the rank's forked child and
#    left out of the spread and the rank order;
#  - Kendall's tau of +0.67 over 4 ranks read 'the imbalance is systematic, not noise'; with 4
#    ranks no order is significant (its exact permutation p-value is 0.083 at best): now 'too
#    few ranks to tell'; over 8 ranks the exact p-value, checked against every permutation.
TEST=ranks . "$(dirname "$0")/testlib.sh"
P=$B/tests/time_leak
unset RANK LOCAL_RANK WORLD_SIZE SLURM_PROCID SLURM_LOCALID SLURM_NTASKS OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_SIZE

# --- 8 ranks' PyTorch pickles, made from records of varied figures (rank r keeps 10 blocks of
# r+1 MiB on device r; rank 5 runs out of memory at 24 MiB), written as PyTorch's _dump_snapshot writes them ---
mkdir job
r=0
for mib in 1 2 3 4 5 6 7 8; do
    cap=16G; [ $r = 5 ] && cap=24M
    FAKECUDA_DEVICES=8 FAKECUDA_CAPACITY=$cap "$CMH" record -q -o r$r.cmh -- "$P" 10 1000 $((mib << 20)) 0 $r >/dev/null 2>&1
    "$CMH" export -f memviz -o job/snap_rank$r.pickle r$r.cmh 2>/dev/null
    r=$((r + 1))
done
check "8 pickles written" "[ \$(ls job/*.pickle | wc -l) -eq 8 ]"
"$CMH" ranks job >job.txt 2>job.err
rc=$?
"$CMH" ranks --json job >job.json 2>/dev/null
check "ranks of 8 per-rank pickles: one job, ranks from the file names (rc $rc; $(head -1 job.txt))" \
    "[ $rc -eq 0 ] && head -1 job.txt | grep -q '^8 records, 8 processes on .*; ranks from the file names (--rank-from)'"
py - job.json <<'PY' 2>job.pyerr
import json, sys
d = json.load(open(sys.argv[1]))
assert d["one_job"] is True, d.get("not_one_job_because")
rows = d["processes"]
assert sorted(r["rank"] for r in rows) == list(range(8)), [r["rank"] for r in rows]
for r in rows:
    assert r["file"].endswith("snap_rank%d.pickle" % r["rank"]), r["file"]
    assert r["rank_from"] == "name", r
sp = d["spread"]["peak_allocated"]
assert sp["max_of"] == "rank 7" and sp["max"] == 80 << 20, sp
assert sp["min_of"] == "rank 0" and sp["min"] == 10 << 20, sp
oom = d["first_oom"]
assert oom and oom["rank"] == 5 and oom["ranks_that_ran_out"] == 1, oom
# the rank trend's exact p-value: every order of the 8 peaks among the ranks
import itertools
pk = [r["peak_allocated"] for r in sorted(rows, key=lambda r: r["rank"])]
def S(v):
    return sum((v[j] > v[i]) - (v[j] < v[i]) for i in range(len(v)) for j in range(i + 1, len(v)))
s0 = abs(S(pk)); n = ge = 0
for p in itertools.permutations(pk):
    n += 1; ge += abs(S(p)) >= s0
assert abs(d["spread"]["rank_trend_p"] - ge / n) < 1e-4, (d["spread"], ge / n)
assert d["spread"]["rank_trend_ranks"] == 8 and d["spread"]["rank_trend_verdict"] == ("systematic" if ge / n < 0.05 else "not significant"), d["spread"]
PY
check "--json: ranks 0-7 from the names, the peaks' spread (rank 0 10 MiB .. rank 7 80 MiB), rank 5's OOM first, the trend's exact p-value ($(tail -1 job.pyerr))" "[ ! -s job.pyerr ]"
check "the text says rank 5 ran out first and the peaks' trend over 8 ranks ($(grep -E '^first OOM|^the peaks' job.txt | tr '\n' '|'))" \
    "grep -q '^first OOM: rank 5 on [^,]*, device 5, at ' job.txt && grep -q '^the peaks rise with the rank (Kendall tau +[0-9.]* over 8 ranks, p = .*): the imbalance is systematic' job.txt"
"$CMH" ranks --rank-from record --json job >rec.json 2>/dev/null
py -c 'import json,sys; d=json.load(open("rec.json")); assert d["one_job"] is False and all(r["rank"] is None for r in d["processes"]), d["one_job"]' 2>rec.err
check "--rank-from record: the pickles say no rank, not one job ($(tail -1 rec.err))" "[ ! -s rec.err ]"
# a pickle that says its own rank (a record of RANK=3 exported) keeps it under auto, the name's under --rank-from name
RANK=3 WORLD_SIZE=8 "$CMH" record -q -o said.cmh -- "$P" 2 1000 >/dev/null 2>&1
"$CMH" export -f memviz -o snap_rank6.pickle said.cmh 2>/dev/null
"$CMH" ranks --json snap_rank6.pickle >said.json 2>/dev/null
"$CMH" ranks --rank-from name --json snap_rank6.pickle >named.json 2>/dev/null
py -c '
import json
a = json.load(open("said.json"))["processes"][0]; b = json.load(open("named.json"))["processes"][0]
assert (a["rank"], a["rank_from"], b["rank"], b["rank_from"]) == (3, "record", 6, "name"), (a["rank"], b["rank"])' 2>said.err
check "a record's own rank wins over its name's, --rank-from name the other way ($(tail -1 said.err))" "[ ! -s said.err ]"

# --- 4 ranks whose peaks mostly rise with the rank (tau +0.67): too few ranks to tell ---
# (records that say their rank: RANK=i WORLD_SIZE=4, blocks of 1, 3, 2, 4 MiB, each rank on its GPU)
mkdir four
i=0
for mib in 1 3 2 4; do
    RANK=$i WORLD_SIZE=4 FAKECUDA_DEVICES=4 "$CMH" record -q -o four/run.$i.cmh -- "$P" 10 1000 $((mib << 20)) 0 $i >/dev/null 2>&1
    i=$((i + 1))
done
"$CMH" ranks four >four.txt 2>&1
"$CMH" ranks --json four >four.json 2>/dev/null
check "4 ranks, tau +0.67: too few ranks to tell, not 'systematic' ($(grep '^the peaks' four.txt))" \
    "grep -q '^the peaks rise with the rank (Kendall tau +0.67 over 4 ranks): too few ranks to tell a systematic imbalance from noise (the most extreme order of 4 ranks has p = 0.083)' four.txt && ! grep -q 'is systematic' four.txt"
py -c '
import json
s = json.load(open("four.json"))["spread"]
assert s["rank_trend_verdict"] == "too few ranks to tell" and abs(s["rank_trend_p_min"] - 2 / 24) < 1e-3 and abs(s["rank_trend"] - 4 / 6) < 1e-3, s' 2>four.err
check "--json: rank_trend_verdict 'too few ranks to tell', p_min 2/24 ($(tail -1 four.err))" "[ ! -s four.err ]"

# --- a rank and the child it forked: the child is not a rank ---
RANK=0 WORLD_SIZE=1 FAKECUDA_DEVICES=2 "$CMH" record -q -o app.cmh -- "$B/tests/kin_prog" 20 0 >kin.out 2>/dev/null
child=$(sed -n 's/^child \([0-9]*\)$/\1/p' kin.out)
check "the rank's record and its child's ($(ls app*.cmh | tr '\n' ' '))" "[ -n '$child' ] && [ -f app.cmh ] && [ -f app.$child.cmh ]"
"$CMH" ranks app.cmh app.$child.cmh >kin.txt 2>&1
rc=$?
"$CMH" ranks --json app.cmh app.$child.cmh >kin.json 2>/dev/null
parent=$(py -c 'import json; print([p["pid"] for p in json.load(open("kin.json"))["processes"] if "forked_from" not in p][0])' 2>/dev/null)
check "the child said to be rank 0's forked child, not a rank (rc $rc; $(grep -E '^forked|^2 records' kin.txt | tr '\n' '|'))" \
    "[ $rc -eq 0 ] && grep -q '^2 records, 2 processes on ' kin.txt && grep -q \"^forked child: pid $child, forked by rank 0 (pid $parent): its own process, not a rank of the job\" kin.txt &&
     grep -q \"^ *child .*(rank 0's forked child, pid $child)\" kin.txt && ! grep -q 'appears in two records' kin.txt"
py - kin.json "$child" <<'PY' 2>kin.err
import json, sys
d = json.load(open(sys.argv[1])); child = int(sys.argv[2])
assert d["one_job"] is True, d.get("not_one_job_because")
assert d["forked_children"] == ["rank 0's forked child, pid %d" % child], d["forked_children"]
c = [p for p in d["processes"] if p["pid"] == child]
par = [p for p in d["processes"] if p["pid"] != child]
assert c and all(p["forked_from"] == par[0]["pid"] and p["child_of"] == "rank 0" for p in c), c
# the spread is the ranks' only: the parent's peaks
for k, f in (("peak_allocated", "peak_allocated"), ("peak_reserved", "peak_reserved")):
    sp = d["spread"][k]
    assert sp["max"] == max(p[f] for p in par) and sp["min"] == min(p[f] for p in par) and sp["max_of"] == "rank 0", (k, sp)
PY
check "--json: forked_children names it, forked_from its parent's pid, the spread the rank's alone ($(tail -1 kin.err))" "[ ! -s kin.err ]"
finish
