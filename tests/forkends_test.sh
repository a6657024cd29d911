#!/bin/sh
# forkends_test.sh BUILD_DIR SOURCE_DIR - what a parent's record says of the children it forked,
# under a plain LD_PRELOAD (no `record` to recover anything), from a stranger's trial
# (tests/forker.c):
#  - a child that used CUDA and died (SIGABRT, SIGKILL) left NAME.PID.cmh.flight beside the
#    parent's record, and the parent's reports said "2 forked children left no record here (no
#    CUDA use, or moved elsewhere)": they name the flight record, how the child ended, and the
#    `cumemhist recover` that makes its snapshot;
#  - `cumemhist report` named each child's record but not how it ended, which summary said;
#  - a parent killed with SIGKILL and recovered from its flight record named no child at all.
TEST=forkends . "$(dirname "$0")/testlib.sh"
FK=$B/tests/forker
preload="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # (as fork_test.sh: the children's ends are what is read)

# --- a parent that lives, its children dying three ways ---
mkdir run && cd run || exit 1
env LD_PRELOAD="$preload" CUMEMHIST_OUTPUT=x.cmh "$FK" abort kill exit3 >out.txt 2>err.txt
ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' out.txt)
ab=$(sed -n 's/^child \([0-9]*\) abort .*/\1/p' out.txt)
ki=$(sed -n 's/^child \([0-9]*\) kill .*/\1/p' out.txt)
e3=$(sed -n 's/^child \([0-9]*\) exit3 .*/\1/p' out.txt)
check "the run: the parent's x.cmh, the aborted and killed children's flight records, the exit(3) one's x.$e3.cmh ($(ls | tr '\n' ' '))" \
    "[ -n '$ppid' ] && [ -f x.cmh ] && [ -f x.$ab.cmh.flight ] && [ -f x.$ki.cmh.flight ] && [ -f x.$e3.cmh ] && [ ! -e x.$ab.cmh ]"
"$CMH" summary x.cmh >s.txt 2>&1
check "summary names the aborted child's flight record, how it ended and the recover that reads it ($(grep "child $ab" s.txt | cut -c1-160))" \
    "grep -qxF \"x.cmh: forked child $ab: no snapshot, its flight record x.$ab.cmh.flight (\\\`cumemhist recover x.$ab.cmh.flight\\\` writes it); it was killed by SIGABRT\" s.txt"
check "... the killed one's, said killed ($(grep "child $ki" s.txt | cut -c1-160))" \
    "grep -q \"^x.cmh: forked child $ki: no snapshot, its flight record x.$ki.cmh.flight (.cumemhist recover x.$ki.cmh.flight. writes it); it was killed, with no chance to mark its end (SIGKILL\" s.txt"
check "... the exit(3) one's record and its status, and no line says a child left no record" \
    "grep -q \"^x.cmh: forked child $e3: its record x.$e3.cmh; it exited with status 3\" s.txt && ! grep -q 'left no record' s.txt"
"$CMH" leaks --json x.cmh >l.json 2>/dev/null
py - "$ab" "$e3" <<'PY' 2>lj.err
import json, sys
ab, e3 = int(sys.argv[1]), int(sys.argv[2])
c = {x["pid"]: x for x in json.load(open("l.json"))[0]["forked_children"]}
assert c[ab]["record"] is None and c[ab]["flight_record"] == "x.%d.cmh.flight" % ab and c[ab]["ending"] == "was killed by SIGABRT", c[ab]
assert c[e3]["record"] == "x.%d.cmh" % e3 and c[e3]["flight_record"] is None and c[e3]["ending"].startswith("exited with status 3"), c[e3]
PY
check "leaks --json: flight_record and ending of the aborted child, record of the exited one ($(tail -1 lj.err))" "[ ! -s lj.err ]"

# --- the HTML report says each ending, the line summary prints ---
"$CMH" report x.cmh -o r.html 2>/dev/null
for c in $ab $ki $e3; do
    want=$(grep "^x.cmh: forked child $c:" s.txt | sed 's/^x.cmh: //; s/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g')
    check "report: child $c as summary says it, its ending with it ($(echo "$want" | cut -c1-100))" \
        "[ -n \"\$want\" ] && grep -qF \"<span class=\\\"r-child\\\" data-pid=\\\"$c\\\">\$want</span>\" r.html"
done
grep -o 'data-pid="[0-9]*">[^<]*' r.html | grep -q 'killed by SIGABRT' && grep -o 'data-pid="[0-9]*">[^<]*' r.html | grep -q 'exited with status 3' &&
    ok "report: 'killed by SIGABRT' and 'exited with status 3' on the page" || bad "report's children: $(grep -o '<span class="r-child"[^/]*' r.html)"

# --- the recover it names, then the record is found ---
"$CMH" recover "x.$ab.cmh.flight" >/dev/null 2>rec.txt
"$CMH" summary x.cmh >s2.txt 2>&1
check "after the recover it named: the aborted child's record, its ending the recovered one's ($(grep "child $ab" s2.txt | cut -c1-120))" \
    "grep -q \"^x.cmh: forked child $ab: its record x.$ab.cmh; it was killed by SIGABRT after [0-9]* .* (recovered from its flight record)\$\" s2.txt"
cd "$T" || exit 1

# --- a parent killed with SIGKILL: its recovered record names its children as the exit dump does ---
mkdir dead && cd dead || exit 1
env LD_PRELOAD="$preload" CUMEMHIST_OUTPUT=x.cmh "$FK" killed abort exit3 >out.txt 2>err.txt
ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' out.txt)
ab=$(sed -n 's/^child \([0-9]*\) abort .*/\1/p' out.txt)
e3=$(sed -n 's/^child \([0-9]*\) exit3 .*/\1/p' out.txt)
"$CMH" recover x.cmh.flight >/dev/null 2>rec.txt
rc=$?
"$CMH" summary x.cmh >s.txt 2>&1
check "the killed parent recovered (rc $rc), said killed ($(sed -n 2p s.txt | cut -c1-80))" \
    "[ $rc -eq 0 ] && sed -n 2p s.txt | grep -q '^x.cmh: the process was killed'"
check "its recovered record names both children: the aborted one's flight record, the exit(3) one's record ($(grep -c 'forked child' s.txt) lines)" \
    "grep -q \"^x.cmh: forked child $ab: no snapshot, its flight record x.$ab.cmh.flight .*; it was killed by SIGABRT\$\" s.txt &&
     grep -q \"^x.cmh: forked child $e3: its record x.$e3.cmh; it exited with status 3\" s.txt"
"$CMH" leaks --json x.cmh >p.json 2>/dev/null
py - "$ab" "$e3" <<'PY' 2>pj.err
import json, sys, os
want = sorted(int(a) for a in sys.argv[1:])
d = json.load(open("p.json"))[0]
c = d["forked_children"]
assert sorted(x["pid"] for x in c) == want and d["forked_children_more"] == 0, c
assert all(x["written_to"] == os.path.abspath("x.%d.cmh" % x["pid"]) for x in c), c
PY
check "leaks --json of the recovered parent: forked_children the two pids, written_to their paths ($(tail -1 pj.err))" "[ ! -s pj.err ]"
cd "$T" || exit 1

# ... and after checkpoints, which give back the extents its children's records were in: a
# bounded ring (1,000 entries) and a 1 MiB first extent, 400,000 allocations and frees after
# the forks
mkdir ckpt && cd ckpt || exit 1
env LD_PRELOAD="$preload" CUMEMHIST_OUTPUT=x.cmh CUMEMHIST_MAX_ENTRIES=1000 CUMEMHIST_FLIGHT=1 FORKER_CHURN=400000 \
    "$FK" killed abort exit3 >out.txt 2>err.txt
ab=$(sed -n 's/^child \([0-9]*\) abort .*/\1/p' out.txt)
e3=$(sed -n 's/^child \([0-9]*\) exit3 .*/\1/p' out.txt)
nck=$(ls x.cmh.flight.ckpt*.cmh 2>/dev/null | wc -l)
"$CMH" recover x.cmh.flight >/dev/null 2>rec.txt
rc=$?
"$CMH" summary x.cmh >s.txt 2>&1
check "after a checkpoint ($nck kept, rc $rc): the recovered parent still names both children ($(grep -c 'forked child' s.txt) lines)" \
    "[ $nck -ge 1 ] && [ $rc -eq 0 ] && grep -q \"^x.cmh: forked child $ab: no snapshot, its flight record x.$ab.cmh.flight .*; it was killed by SIGABRT\$\" s.txt &&
     grep -q \"^x.cmh: forked child $e3: its record x.$e3.cmh; it exited with status 3\" s.txt"
cd "$T" || exit 1

finish
