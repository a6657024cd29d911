#!/bin/sh
# ptver_test.sh BUILD_DIR SOURCE_DIR - every PyTorch schema from 1.13 to a newer one than we know,
# each pickled with protocol 2 and 4 (tests/ptver_pickles.py: 1.13's segments with per-block
# history and no trace, its bare segment list, 2.0, a recent dump with unknown keys at every level
# and an action no PyTorch has written yet, Windows paths, two devices with an OOM on device 1, a
# private pool), read by every command: none fails, the figures are the snapshot's, an unknown
# action is kept in place (trace prints it as _memory_viz.py does, counts it, exports write it
# back, a .cmh made of it too; it had been dropped, and `trace` said "7 entries" of 9), a missing
# trace is said as such,
# and every memory_viz export opens in PyTorch's viewer (tests/check_memviz.py).
TEST=ptver . "$(dirname "$0")/testlib.sh"

py "$SRC/tests/ptver_pickles.py" . || { bad "ptver_pickles.py failed"; finish; }
fig() { awk -v n="$1" -v k="$2" '$1 == n && $2 == k { print $3 }' figures.txt; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

for f in *.p2.pickle *.p4.pickle; do
    for c in summary peak leaks oom frag owners trace stats plot whatif; do
        "$CMH" $c "$f" >"$f.$c.out" 2>"$f.$c.err"
        rc=$?
        # (whatif on a snapshot with no trace: 5, the question cannot be asked of it, said on stderr)
        [ $rc -eq 0 ] || { [ $c = whatif ] && [ $rc -eq 5 ] && case $f in v113*) true ;; *) false ;; esac; } ||
            bad "$c $f: exit $rc: $(tail -2 "$f.$c.err")"
    done
    for x in memviz json chrome pprof sqlite; do
        "$CMH" export -f $x -o "$f.$x" "$f" >/dev/null 2>"$f.$x.err" || bad "export -f $x $f: $(tail -2 "$f.$x.err")"
    done
    "$CMH" flamegraph "$f" >"$f.svg" 2>"$f.flame.err" || bad "flamegraph $f: $(tail -2 "$f.flame.err")"
    "$CMH" report -o "$f.html" "$f" >/dev/null 2>"$f.report.err" || bad "report $f: $(tail -2 "$f.report.err")"
    grep -l "Segmentation\|AddressSanitizer\|runtime error\|Assertion" "$f".*.err >/dev/null 2>&1 && bad "$f: a crash or sanitizer report"
done
[ $fail -eq 0 ] && ok "every command and export reads all 16 pickles"

# the figures: allocated and reserved from the segments where there is no trace (1.13)
for n in v113 v113list recent windows pools v20 newact; do
    for p in p2 p4; do
        f=$n.$p.pickle
        a=$(mib "$(fig $n allocated)") r=$(mib "$(fig $n reserved)")
        check "frag $f: allocated $a, reserved $r" "grep -q '^  allocated  *$a\$' $f.frag.out && grep -q '^  reserved  *$r\$' $f.frag.out"
    done
done
for p in p2 p4; do
    check "v20.$p: peak from the trace" "grep -q '^peak allocated: $(mib "$(fig v20 peak)") ' v20.$p.pickle.peak.out"
    check "recent.$p: peak from the trace, the unknown action changing nothing" \
        "grep -q '^peak allocated: $(mib "$(fig recent peak)") ' recent.$p.pickle.peak.out"
    check "multidev.$p: device 1's OOM" "grep -q 'out of memory #1 on device 1 at entry 2' multidev.$p.pickle.oom.out && grep -q 'device 0: no out-of-memory error' multidev.$p.pickle.oom.out"
    check "pools.$p: the private pool named" "grep -q 'private pool (1, 7)' pools.$p.pickle.frag.out"
    check "windows.$p: Windows paths whole" "grep -qF 'main (D:\\work\\my project\\train.py:77)' windows.$p.pickle.peak.out && grep -qF 'load (\\\\server\\share\\lib\\data.py:9)' windows.$p.pickle.peak.out"
done

# an unknown action: kept, in place, counted, shown as itself
for p in p2 p4; do
    f=recent.$p.pickle
    check "trace $f: PyTorch's count of entries (9), the unknown ones among them" "grep -q '^$(fig recent entries) entries\$' $f.trace.out"
    check "trace $f: each unknown entry printed as _memory_viz.py prints an entry it has no line for" \
        "[ \$(grep -c \"^{'action': 'defrag_hint', 'addr': [0-9]*, 'size': [0-9]*, 'stream': 0, 'time_us': \" $f.trace.out) -eq $(fig recent unknown) ]"
    check "trace $f: in place (after the alloc it names, before its free)" \
        "grep -A1 '^c = a\\[4194304:8.0MiB\\]' $f.trace.out | grep -q \"'defrag_hint', 'addr': 140119017259008, 'size': 8388608\""
    check "$f: the note counts and names them, for every command" \
        "grep -q \"2 trace entries are of actions this version does not know ('defrag_hint'): kept in place\" $f.peak.err && grep -q 'defrag_hint' $f.trace.err"
    check "leaks $f: an unknown action steps nothing (the annotation alone does)" "grep -q '^steps: 1 from' $f.leaks.out"
    py - "$f.memviz" "$f" <<'EOF'
import pickle, sys
out, src = (pickle.load(open(a, "rb")) for a in sys.argv[1:3])
a, b = out["device_traces"][0], src["device_traces"][0]
assert [e["action"] for e in a] == [e["action"] for e in b], ([e["action"] for e in a], [e["action"] for e in b])
for x, y in zip(a, b):
    if x["action"] == "defrag_hint":
        assert x == y, (x, y)  # written back as read, unknown keys too
EOF
    check "export $f: the unknown entries written back in place, as read" "[ $? -eq 0 ]"
    py - "$f.memviz" <<'EOF'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
s = d["segments"][0]
assert d["future_top_key"] == [{"x": 1}] and d["internal_metadata"] == {"k": "v"}, d.keys()
assert d["allocator_settings"]["future_setting"] == "yes"
assert s["future_segment_key"] == {"nested": [1, "x", None]} and s["another"] == 3.5, s.keys()
assert [b["future_block_key"] for b in s["blocks"]] == ["v", "w"]
assert s["frames"][0]["fx_node_op"] == "call_function" and s["frames"][1]["future_frame_key"] == [1, 2, 3]
EOF
    check "export $f: unknown keys at every level written back" "[ $? -eq 0 ]"
    py - "$f.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
acts = [e["action"] for e in d["device_traces"][0]]
assert acts.count("defrag_hint") == 2 and len(acts) == 9, acts
EOF
    check "export -f json $f: the unknown entries as themselves" "[ $? -eq 0 ]"
done

for p in p2 p4; do
    f=newact.$p.pickle
    check "leaks $f: a newer action repeated like a step steps nothing (it read '6 from the program's marks (\"sync_hint\")')" \
        "grep -q '^steps: unknown' $f.leaks.out"
    check "trace $f: its 13 entries, the 6 unknown ones printed" "grep -q '^13 entries\$' $f.trace.out && [ \$(grep -c \"^{'action': 'sync_hint'\" $f.trace.out) -eq 6 ]"
done

# converted to .cmh (symbolize: any writer of .cmh), the unknown actions stay unknown: they had
# come back as named marks ('steps: 6 from the program's marks ("sync_hint")') and a memory_viz
# export of the .cmh dropped them (trace of it: no sync_hint entry)
f=newact.p4.pickle
"$CMH" symbolize -o newact.cmh "$f" >/dev/null 2>&1
"$CMH" leaks newact.cmh >newact.cmh.leaks 2>&1
check "leaks of $f made .cmh: the unknown action steps nothing ($(grep '^steps' newact.cmh.leaks))" "grep -q '^steps: unknown' newact.cmh.leaks"
"$CMH" export -f memviz -o newact.back.pickle newact.cmh >/dev/null 2>&1
"$CMH" trace newact.back.pickle >newact.back.trace 2>/dev/null
check "the .cmh's memory_viz export writes the 6 unknown entries back as themselves" \
    "[ \$(grep -c \"^{'action': 'sync_hint'\" newact.back.trace) -eq 6 ] && grep -q '^13 entries\$' newact.back.trace"

# no trace: said, not silent
for n in v113 v113list; do
    f=$n.p4.pickle
    check "trace $f: the missing trace said on stderr" "grep -q 'device 0: nothing to print' $f.trace.err && [ ! -s $f.trace.out ]"
done
check "peak v113: PyTorch 1.13's layout named as the cause" "grep -q \"no history (the snapshot has no trace: PyTorch 1.13's layout\" v113.p4.pickle.peak.out"
check "whatif v113: why it cannot replay" "grep -q \"no block-level trace to replay (the snapshot has no trace: PyTorch 1.13's layout\" v113.p4.pickle.whatif.err"
check "peak v113list: the bare segment list named as the cause" "grep -q \"no history (the snapshot is memory_snapshot()'s bare segment list\" v113list.p4.pickle.peak.out"

# PyTorch's viewer opens every memory_viz export
py "$SRC/tests/check_memviz.py" --ours *.pickle.memviz >viewer.txt 2>&1
check "check_memviz: every export is one PyTorch's memory_viz opens" "[ $? -eq 0 ]"
[ $fail -eq 0 ] || cat viewer.txt
finish
