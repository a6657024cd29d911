#!/bin/sh
# cycle_test.sh BUILD_DIR SOURCE_DIR - a loop whose buffer's size comes round every few steps
# (tests/cycle_steps.c) has one verdict, whatever the run's length and wherever a snapshot cuts it.
#  - a stranger's trial: sizes 1..7 MiB in turn, the last step's buffer still live at exit, read
#    'growing: +914.3 KiB per step over the last 7 steps' (exit 3 for --fail-on-leak) at 300
#    iterations, '+281.6 KiB ... over the last 15' at 301, and 'state' (exit 0) at 302-306: the
#    windows the growth was judged in began and ended inside a turn of the cycle.  Now periods 3,
#    5 and 7, each over run lengths covering two whole turns, read one verdict and one exit code;
#  - a snapshot of the running process cut mid-step (`snapshot PID`, `top --once`): the step in
#    flight is partial and does not count.  One verdict at every cut (steady, state and growing
#    came of one process's successive snapshots), and top's is leaks' of the same process.
TEST=cycle . "$(dirname "$0")/testlib.sh"
P=$B/tests/cycle_steps
N=40

# --- run lengths over two whole turns of each period: one verdict, one exit code ---
for q in 3 5 7; do
    n=$N
    while [ $n -lt $((N + 2 * q)) ]; do
        "$CMH" record -q -o "c$q-$n.cmh" -- "$P" $q $n >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak "c$q-$n.cmh" >"c$q-$n.txt" 2>&1
        rc=$?
        "$CMH" leaks --json "c$q-$n.cmh" >"c$q-$n.json" 2>/dev/null
        v=$(py -c "import json,sys; d=json.load(open(sys.argv[1]))[0]; print(' '.join(s['verdict'] for s in d['sites'] if s['site']['function'] == 'buffer'))" "c$q-$n.json")
        echo "period $q, $n iterations: $v, exit $rc" | tee -a runs.txt
        echo "$v exit $rc" >>"v$q.txt"
        n=$((n + 1))
    done
done
for q in 3 5 7; do
    k=$(sort -u "v$q.txt" | wc -l)
    check "period $q: one verdict over $((2 * q)) run lengths ($(sort "v$q.txt" | uniq -c | tr -s ' \n' ' '))" '[ "$k" = 1 ]'
done
k=$(sort -u v3.txt v5.txt v7.txt | wc -l)
check "periods 3, 5, 7: the same verdict and exit code ($(sort v3.txt v5.txt v7.txt | uniq -c | tr -s ' \n' ' '))" \
    '[ "$k" = 1 ] && grep -q "^state exit 0\$" v7.txt'
check "no run says it grows" "! grep -q growing c*.txt"

# --- a snapshot of the running process cut mid-step, and top of it: one verdict ---
export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD }$B/libcumemhist.so
for q in 3 7; do
    n=$N
    while [ $n -lt $((N + q)) ]; do
        cut=$((1 + n % 3))
        rm -f ready
        CUMEMHIST_OUTPUT=$T/run$q-$n.cmh CYCLE_READY=$T/ready "$P" $q $n $cut >/dev/null 2>&1 &
        pid=$!
        if wait_until 60 '[ -e ready ]'; then
            "$CMH" snapshot -q $pid -o "s$q-$n.cmh" >/dev/null 2>&1
            "$CMH" top --once --json >"top$q-$n.json" 2>/dev/null
            "$CMH" leaks --json "s$q-$n.cmh" >"s$q-$n.json" 2>/dev/null
            "$CMH" leaks --fail-on-leak "s$q-$n.cmh" >/dev/null 2>&1
            rc=$?
            out=$(py - "s$q-$n.json" "top$q-$n.json" $pid <<'PY'
import json, sys
leaks = json.load(open(sys.argv[1]))[0]
lv = [s["verdict"] for s in leaks["sites"] if s["site"]["function"] == "buffer"]
top = [p for p in json.load(open(sys.argv[2]))["processes"] if p["pid"] == int(sys.argv[3])]
tv = [s["verdict"] for p in top for d in p["devices"] for s in d["sites"] if s["site"].startswith("buffer ")]
print(" ".join(lv), "top", " ".join(tv))
PY
)
        else
            out="not ready"
            rc=-
        fi
        kill $pid 2>/dev/null
        wait $pid 2>/dev/null
        echo "period $q, $n iterations, cut after $cut: leaks $out, exit $rc" | tee -a cuts.txt
        echo "$out exit $rc" >>cutv.txt
        n=$((n + 1))
    done
done
k=$(sort -u cutv.txt | wc -l)
check "a snapshot cut mid-step, at 3 cuts and 10 run lengths: one verdict, top's the same as leaks' ($(sort cutv.txt | uniq -c | tr -s ' \n' ' '))" \
    '[ "$k" = 1 ] && grep -q "^steady top steady exit 0\$" cutv.txt'
finish
