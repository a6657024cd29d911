#!/bin/sh
# pictures_test.sh BUILD_DIR SOURCE_DIR - every picture read back by a real consumer
# (tests/check_pictures.py: an XML parser, a folded-stack reader, gzip + a protobuf decode) and
# held to the reports: the timeline's peak is `peak`'s, its OOM markers `oom`'s; the folded
# stacks, the flamegraph and the pprof profile sum to the live bytes at their moment.
TEST=pictures . "$(dirname "$0")/testlib.sh"
CK="py $SRC/tests/check_pictures.py"
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G "$CMH" record -q -o multi.cmh -- "$B/samples/multigpu" 4 >/dev/null 2>&1
"$CMH" record -q -o leaky.cmh -- "$B/samples/leaky" 6 >/dev/null 2>&1
"$CMH" merge -o merged.cmh "$F/h200/torch_exp.cmh" "$F/h200/torch_exp.pickle" 2>/dev/null
# (the pictures are made first and read by one Python at the end: a Python start is slow; each
# record's files are named K.NAME, K its place in the list: two of them are leaky.cmh)
RECS="multi.cmh leaky.cmh merged.cmh $F/h200/torch_exp.pickle $F/h200/leaky.cmh"
k=0
for f in $RECS; do
    k=$((k + 1)) n=$k.$(basename "$f")
    "$CMH" plot "$f" -o "$n.svg" 2>/dev/null
    "$CMH" peak --json "$f" >"$n.peak.json" 2>/dev/null
    "$CMH" oom --json "$f" >"$n.oom.json" 2>/dev/null
    "$CMH" leaks --json "$f" >"$n.leaks.json" 2>/dev/null
done
# each record's live bytes at the end (leaks), its allocated peak and the peak's device: "K.NAME END PEAK DEVICE"
py - $RECS >figures.txt <<'EOF'
import json, os, sys
for k, f in enumerate(sys.argv[1:], 1):
    n = "%d.%s" % (k, os.path.basename(f))
    try:
        end = json.load(open(n + ".leaks.json"))[0]["live_bytes"]
    except Exception:
        end = ""
    try:
        p = json.load(open(n + ".peak.json"))[0]
        peak, dev = p["peak_allocated"]["bytes"], p["device"]
    except Exception:
        peak = dev = ""
    print(n, end, peak, dev)
EOF
fig() { awk -v n="$1" -v k="$2" '$1 == n { print $k }' figures.txt; } # fig K.NAME 2 (end) | 3 (peak) | 4 (device)
: >checks.tsv
tab=$(printf '\t')
k=0
for f in $RECS; do
    k=$((k + 1)) n=$k.$(basename "$f")
    echo "$n.tl${tab}timeline${tab}$n.svg${tab}$n.peak.json${tab}$n.oom.json" >>checks.tsv
    echo "$n.ly${tab}layout${tab}$n.svg" >>checks.tsv
    for at in end peak; do
        if [ $at = end ]; then want=$(fig "$n" 2); else want=$(fig "$n" 3); fi
        "$CMH" flamegraph --folded --at $at "$f" >"$n.$at.folded" 2>/dev/null
        "$CMH" flamegraph --at $at "$f" -o "$n.$at.svg" 2>/dev/null
        echo "$n.$at.fo${tab}folded${tab}$n.$at.folded${tab}$want" >>checks.tsv
        echo "$n.$at.fl${tab}flame${tab}$n.$at.svg${tab}$want" >>checks.tsv
    done
    # (the device the figures below are of: the default is the OOM's, device 1 of multi.cmh's)
    "$CMH" export --device "$(fig "$n" 4)" "$f" -o "$n.pb.gz" 2>/dev/null
    echo "$n.pp${tab}pprof${tab}$n.pb.gz${tab}$(fig "$n" 2)${tab}$(fig "$n" 3)" >>checks.tsv
done
$CK batch checks.tsv
# ck ID: what the batched check printed, and whether it passed
ck() { cat "$1.out" 2>/dev/null; [ "$(cat "$1.rc" 2>/dev/null)" = 0 ]; }
k=0
for f in $RECS; do
    k=$((k + 1)) n=$k.$(basename "$f")
    check "plot ${n#*.}: an SVG whose peaks and OOM markers are the reports'" 'ck "$n.tl"'
    check "plot ${n#*.}: every label clear of the series, the lines and each other ($(cat "$n.ly.out" 2>/dev/null | tr '\n' ' '))" 'ck "$n.ly"'
    for at in end peak; do
        if [ $at = end ]; then want=$(fig "$n" 2); else want=$(fig "$n" 3); fi
        check "flamegraph ${n#*.} --at $at: folded and SVG sum to the live bytes ($want)" 'ck "$n.$at.fo" && ck "$n.$at.fl"'
    done
    check "export ${n#*.} as pprof: decoded, its sums the live bytes at the end and at the peak" 'ck "$n.pp"'
done
"$CMH" flamegraph --device 1 --at oom multi.cmh -o oom.svg 2>/dev/null
check "flamegraph --at oom of the run that had one" '[ -s oom.svg ]'
# a bad --at is refused as every bad value is (exit 2), with the range the device has (trial5 #11:
# 'has no such out-of-memory error', exit 1)
"$CMH" flamegraph --device 1 --at oom:9 multi.cmh -o none.svg 2>err.txt
check "flamegraph --at oom:9 where there is no 9th: refused (exit 2), the OOMs there are said ($(cat err.txt))" \
    '[ $? -eq 2 ] && [ ! -e none.svg ] && grep -q "^cumemhist: flamegraph: --at oom:9: multi.cmh, device 1 has [0-9]* out-of-memory errors\{0,1\} (oom:1" err.txt'
"$CMH" flamegraph --device 1 --at 99999999 multi.cmh -o none.svg 2>err.txt
check "flamegraph --at 99999999 past the last entry: refused (exit 2), the entries said ($(cat err.txt))" \
    '[ $? -eq 2 ] && [ ! -e none.svg ] && grep -q "^cumemhist: flamegraph: --at 99999999: multi.cmh, device 1 has entries 0 to [1-9][0-9]*\$" err.txt'
# The x axis: a PyTorch run with 5.5 s of quiet start-up before its loop is drawn by entry (the
# loop gets the width) and says so; --axis time draws time; a record busy all along stays on time.
axis_of() { sed -n 's/.*class="xlabel" data-axis="\([a-z]*\)".*/\1/p' "$1" | sort -u | tr '\n' ' '; }
"$CMH" plot merged.cmh -o ax_auto.svg 2>/dev/null
check "plot of a record with a long quiet start: the entry axis by default, said on the plot ($(axis_of ax_auto.svg))" \
    '[ "$(axis_of ax_auto.svg)" = "entries " ] && grep -q "the busy part is [0-9]*% of the 5.8[0-9] s recorded; --axis time" ax_auto.svg'
# ... and a short record says its span as the reports do (a 13 ms trace read "of the 0.0 s recorded")
py - <<'EOF'
import pickle
M, P = 1 << 20, 0x7F0000000000
fr = [{"filename": "t.py", "line": 3, "name": "f"}]
tr = [{"action": "segment_alloc", "addr": P, "size": 20 * M, "stream": 0, "time_us": 1000, "frames": fr}]
tr += [{"action": "alloc", "addr": P + i * M, "size": M, "stream": 0, "time_us": 14000 + i, "frames": fr} for i in range(20)]
seg = {"device": 0, "address": P, "total_size": 20 * M, "allocated_size": 20 * M, "active_size": 20 * M, "requested_size": 20 * M,
       "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
       "blocks": [{"address": P + i * M, "size": M, "requested_size": M, "state": "active_allocated", "frames": fr} for i in range(20)]}
pickle.dump({"segments": [seg], "device_traces": [tr], "allocator_settings": {}, "external_annotations": []}, open("short.pickle", "wb"))
EOF
"$CMH" plot short.pickle -o ax_short.svg 2>/dev/null
check "plot of a 13 ms record on the entry axis says 13 ms, not 0.0 s" 'grep -q "the busy part is [0-9]*% of the 13 ms recorded" ax_short.svg'
check "plot of the merged record on the entry axis: PyTorch's 80 annotation edges drawn" '[ "$(grep -c "class=\"marker ann" ax_auto.svg)" -eq 80 ]'
"$CMH" plot --axis time merged.cmh -o ax_time.svg 2>/dev/null
check "plot --axis time: time since the record's first event" '[ "$(axis_of ax_time.svg)" = "time " ] && grep -q "time since the record.s first event" ax_time.svg'
# (the H200 recording of the leaky sample, not this run's: how busy a run recorded here looks
# depends on the machine's load, and under a sanitizer at load 10 it had gaps enough for entries)
"$CMH" plot --axis entries "$F/h200/leaky.cmh" -o ax_ent.svg 2>/dev/null
"$CMH" plot "$F/h200/leaky.cmh" -o ax_leaky.svg 2>/dev/null
check "plot of a record busy all along: time by default, entries when asked" '[ "$(axis_of ax_leaky.svg)" = "time " ] && [ "$(axis_of ax_ent.svg)" = "entries " ]'
"$CMH" plot multi.cmh -o ax_multi.svg 2>/dev/null
check "plot of two devices: one axis for the figure" '[ "$(axis_of ax_multi.svg | wc -w)" -eq 1 ]'
# a record with no history (enabled=state): the plot tells no peak ('peak 12.0 MiB at entry -1'
# where `peak` says the peak is not known), only the end state, and names no entry -1
"$CMH" record -q --enabled state -o state.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
"$CMH" plot state.cmh -o state.svg 2>/dev/null
check "plot of an enabled=state record: the end, no peak, no entry -1" \
    'grep -q ">at the end 12.0 MiB (no history: the peak is not known)<" state.svg && ! grep -q "at entry -1" state.svg'
# ... nor does the flamegraph (its default, --at peak, draws the end and says so) or the pprof
# profile's comment, which read 'at the allocated peak (entry -1)'
"$CMH" flamegraph state.cmh -o state_flame.svg 2>state_flame.err
check "flamegraph of an enabled=state record: the end, the peak not known, no entry -1" \
    'grep -q "live memory at the end (no history: the peak is not known)" state_flame.svg && ! grep -q "entry -1" state_flame.svg && grep -q "the peak is not known; drew the end" state_flame.err'
"$CMH" export state.cmh -o state.pb.gz 2>/dev/null
py -c "import gzip, sys; b = gzip.open('state.pb.gz').read(); sys.exit(0 if b'no history: the peak is not known' in b and b'entry -1' not in b else 1)"
check "pprof of an enabled=state record: the comment says the peak is not known, no entry -1" '[ $? -eq 0 ]'
# a 20,000-frame stack (deep recursion; PyTorch's C++ frames): every picture is drawn, and the
# flamegraph still sums to the live bytes (its recursive walk overflowed the stack ~7,000 levels down)
py - deep.pickle <<'EOF'
import pickle, sys
MIB = 1 << 20
st = [{"name": "f%d" % i, "filename": "/proj/deep.py", "line": i + 1} for i in range(20000)]
seg = {"device": 0, "address": 0x7f0000000000, "total_size": 16 * MIB, "allocated_size": 8 * MIB, "active_size": 8 * MIB,
       "requested_size": 8 * MIB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
       "frames": st, "blocks": [{"address": 0x7f0000000000, "size": 8 * MIB, "requested_size": 8 * MIB, "state": "active_allocated", "frames": st},
                                {"address": 0x7f0000800000, "size": 8 * MIB, "requested_size": 0, "state": "inactive", "frames": []}]}
tr = [{"action": "segment_alloc", "addr": 0x7f0000000000, "size": 16 * MIB, "stream": 0, "time_us": 1, "frames": st},
      {"action": "alloc", "addr": 0x7f0000000000, "size": 8 * MIB, "stream": 0, "time_us": 2, "frames": st}]
pickle.dump({"segments": [seg], "device_traces": [tr]}, open(sys.argv[1], "wb"), protocol=4)
EOF
"$CMH" flamegraph deep.pickle -o deep.svg 2>deep.err
check "flamegraph of a 20,000-frame stack: drawn, every level" \
    '[ $? -eq 0 ] && [ "$(grep -c "<rect x=.*data-bytes=.8388608" deep.svg)" -eq 20001 ] && grep -q "f19999 (/proj/deep.py:20000)" deep.svg'
"$CMH" flamegraph --folded deep.pickle >deep.folded 2>/dev/null
check "folded stacks of a 20,000-frame stack: one line, 20,000 frames" \
    '[ "$(wc -l <deep.folded)" -eq 1 ] && [ "$(tr ";" "\n" <deep.folded | wc -l)" -eq 20000 ]'
for cmd in "plot -o deep_plot.svg" "report -o deep.html" "view -o deep_view.html" "export -o deep.pb.gz" "export -o deep.db"; do
    "$CMH" $cmd deep.pickle >/dev/null 2>&1
    check "$cmd of a 20,000-frame stack" '[ $? -eq 0 ]'
done
# byte and entry axes have whole ticks: an empty snapshot's plot read '0.2 B, 0.4 B, ... 1 B' on
# its y axis (and entries 0.2 ... 1 on its x axis); a record of 3 entries drawn by entry read
# '0, 0.25, 0.5, ... 2'
py - <<'EOF'
import pickle
pickle.dump({'segments': [], 'device_traces': [[], [], [], []], 'allocator_settings': {}}, open('empty4.pickle', 'wb'), protocol=4)
P, fr = 0x7F0000000000, [{"filename": "t.py", "line": 3, "name": "f"}]
tr = [{"action": "segment_alloc", "addr": P, "size": 3, "stream": 0, "time_us": 1000, "frames": fr},
      {"action": "alloc", "addr": P, "size": 3, "stream": 0, "time_us": 1001, "frames": fr},
      {"action": "free_requested", "addr": P, "size": 3, "stream": 0, "time_us": 1002, "frames": fr}]
pickle.dump({"segments": [], "device_traces": [tr], "allocator_settings": {}}, open("tiny.pickle", "wb"), protocol=4)
EOF
ticks() { sed -n "s/.*class=\"$2\"[^>]*>\([^<]*\)<.*/\1/p" "$1" | tr '\n' '|'; }
"$CMH" plot empty4.pickle -o empty4.svg 2>/dev/null
check "plot of an empty snapshot: one 0 B tick, no entry ticks, 'nothing to plot' ($(ticks empty4.svg ytick) $(ticks empty4.svg xtick))" \
    '[ "$(ticks empty4.svg ytick)" = "0 B|" ] && [ -z "$(ticks empty4.svg xtick)" ] && grep -q ">nothing to plot: no memory allocated or reserved, no trace entries; 4 devices listed (0, 1, 2, 3), each empty: nothing allocated, no trace<" empty4.svg'
"$CMH" plot --axis entries tiny.pickle -o tiny.svg 2>/dev/null
check "plot of a 3-entry record by entry: whole bytes and entries on the axes ($(ticks tiny.svg ytick) $(ticks tiny.svg xtick))" \
    '[ -n "$(ticks tiny.svg ytick)" ] && ! ticks tiny.svg ytick | grep -q "\." && ! ticks tiny.svg xtick | grep -q "\." && ! grep -q "nothing to plot" tiny.svg'
finish
