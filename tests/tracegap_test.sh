#!/bin/sh
# tracegap_test.sh BUILD_DIR SOURCE_DIR [PYTORCH_FIXTURES] - a trace whose end is not the snapshot's
# (docs/DEFINITIONS.md "Trace gap").  A PyTorch history turned off before _dump_snapshot, the
# tensors freed in between: the trace leaves blocks allocated that the snapshot holds inactive.
# peak said "at the end: allocated 0 B" under a peak of the trace's, leaks "nothing is still
# live", summary's Tot Freed counted frees no entry made, trace's TOTAL MEM the trace's own end,
# and nothing said why.  Each now says so once, with the same counts and bytes (text and --json),
# and the converse (blocks active at the snapshot no entry made) as the mid-run notes say it.
TEST=tracegap . "$(dirname "$0")/testlib.sh"
PTF=${3:-}

# stops.pickle: 3 segments made in the trace; 3 blocks allocated and never freed (4 + 6 MiB in
# seg0, 10 MiB filling seg2), one (8 MiB in seg1) allocated and freed.  The snapshot: seg0 and seg1
# each one inactive block, seg2 gone (empty_cache() after the frees).
# starts.pickle: the converse: a 4 MiB block active at the snapshot that no entry made, the
# trace's own 2 MiB allocated and freed.
py - <<'PY' || bad "writing the pickles failed"
import pickle
M, base, T = 1 << 20, 1 << 40, 1_700_000_000_000_000
fr = [{'name': 'fwd', 'filename': '/home/u/m.py', 'line': 5}]
t = [T]
def e(action, addr, size):
    t[0] += 1000
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t[0], 'frames': fr}
s0, s1, s2 = base, base + 20 * M, base + 40 * M
tr = [e('segment_alloc', s0, 20 * M), e('alloc', s0, 4 * M), e('alloc', s0 + 4 * M, 6 * M),
      e('segment_alloc', s1, 20 * M), e('alloc', s1, 8 * M), e('free_requested', s1, 8 * M), e('free_completed', s1, 8 * M),
      e('segment_alloc', s2, 10 * M), e('alloc', s2, 10 * M)]
def seg(addr, size, blocks):
    act = sum(b['size'] for b in blocks if b['state'] != 'inactive')
    return {'device': 0, 'address': addr, 'total_size': size, 'allocated_size': act, 'active_size': act, 'requested_size': act,
            'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [], 'blocks': blocks}
ina = lambda a, n: {'address': a, 'size': n, 'requested_size': 0, 'state': 'inactive', 'frames': []}
pickle.dump({'segments': [seg(s0, 20 * M, [ina(s0, 20 * M)]), seg(s1, 20 * M, [ina(s1, 20 * M)])], 'device_traces': [tr]},
            open('stops.pickle', 'wb'))
t[0] = T
tr = [e('alloc', s0 + 4 * M, 2 * M), e('free_requested', s0 + 4 * M, 2 * M), e('free_completed', s0 + 4 * M, 2 * M)]
old = {'address': s0, 'size': 4 * M, 'requested_size': 4 * M, 'state': 'active_allocated',
       'frames': [{'name': 'init', 'filename': '/home/u/m.py', 'line': 2}]}
pickle.dump({'segments': [seg(s0, 20 * M, [old, ina(s0 + 4 * M, 16 * M)])], 'device_traces': [tr]}, open('starts.pickle', 'wb'))
PY

STOPS="note: the trace stops before the snapshot: 3 blocks (20.0 MiB) it allocated and never freed are not active in the snapshot,"
SEGS="      and 1 segment (10.0 MiB reserved) it left is not in the snapshot;"
"$CMH" peak stops.pickle >peak.txt 2>&1
check "peak: says the trace stops before the snapshot, with counts and bytes, under 'at the end'" \
    "grep -A2 '^at the end:     allocated 0 B, reserved 40.0 MiB' peak.txt | grep -qF '$STOPS' && grep -qxF '$SEGS' peak.txt || { cat peak.txt; false; }"
check "peak: says what the user can do" "grep -q 'take the snapshot while history is still recording' peak.txt"
check "peak: its figures stay the trace's, exact (20 MiB allocated after entry 8)" \
    "grep -q '^peak allocated: 20.0 MiB (20971520 bytes) at entry 8' peak.txt && grep -q '^peak reserved:  50.0 MiB (52428800 bytes) at entry 7' peak.txt"
check "peak: the note once" "[ \$(grep -c 'the trace stops before the snapshot' peak.txt) -eq 1 ]"
"$CMH" leaks stops.pickle >leaks.txt 2>&1
check "leaks: none of those blocks is a leak, and the note says why nothing is live" \
    "grep -q '0 B in 0 blocks still live at the end' leaks.txt && grep -qF '$STOPS' leaks.txt && grep -q 'none of them is a leak' leaks.txt"
"$CMH" leaks --fail-on-leak stops.pickle >/dev/null 2>&1
rc=$?
check "leaks --fail-on-leak: passes (exit $rc)" "[ $rc -eq 0 ]"
"$CMH" summary stops.pickle >sum.txt 2>&1
check "summary: the note after the table, Tot Freed named" \
    "sed -n '/^|=*|\$/,\$p' sum.txt | tail -n +2 | grep -qF '$STOPS' && grep -q \"summary's Tot Freed too\" sum.txt"
check "summary: the table stays PyTorch's (no note inside it)" "! grep '^|' sum.txt | grep -q 'trace stops'"
"$CMH" trace stops.pickle >trace.out 2>trace.err
check "trace: stdout is memory_viz's text alone, the note on stderr with what TOTAL MEM counts" \
    "! grep -q 'stops before' trace.out && tail -1 trace.out | grep -q '^TOTAL MEM: 20.0MiB' &&
     grep -q '^cumemhist: trace: stops.pickle, device 0: note: the trace stops before the snapshot: 3 blocks (20.0 MiB)' trace.err &&
     grep -q 'TOTAL MEM is what the trace.s own entries leave: it counts the 20.0 MiB the snapshot no longer holds' trace.err"
"$CMH" report --static stops.pickle -o stops.html 2>/dev/null
check "report: the page says it under the cards" \
    "grep -q '<p class=\"r-muted r-gap\">The trace stops before the snapshot: 3 blocks (20.0 MiB)' stops.html"
"$CMH" plot stops.pickle -o stops.svg 2>/dev/null
check "plot: the timeline's header says the drop at its end" \
    "grep -q 'the trace stops before the snapshot: 3 blocks (20.0 MiB) freed after its last entry' stops.svg"
# one figure, every --json
for c in peak leaks summary trace; do "$CMH" $c --json stops.pickle >$c.json 2>/dev/null; done
py - <<'PY'
import json, sys
want = {'stops_early': True, 'unfreed_blocks': 3, 'unfreed_bytes': 20 << 20, 'unfreed_segments': 1, 'unfreed_reserved': 10 << 20,
        'starts_late': False, 'untraced_blocks': 0, 'untraced_bytes': 0}
bad = []
for c in ('peak', 'leaks', 'summary', 'trace'):
    g = json.load(open(c + '.json'))[0]['trace_gap']
    if {k: g[k] for k in want} != want or len(g['says']) != 1 or 'stops before the snapshot' not in g['says'][0]:
        bad.append((c, g))
p = json.load(open('peak.json'))[0]
if p['peak_allocated']['bytes'] != 20 << 20 or p['end']['allocated'] != 0:
    bad.append(('peak figures', p['peak_allocated'], p['end']))
if json.load(open('leaks.json'))[0]['live_bytes'] != 0:
    bad.append('leaks live')
print(bad or 'ok')
sys.exit(1 if bad else 0)
PY
check "--json: peak, leaks, summary and trace give the same trace_gap" "[ \$? -eq 0 ]"

# the converse: a block active at the snapshot that no entry allocated
"$CMH" peak starts.pickle >peak2.txt 2>&1
check "peak: a trace that begins mid-run says so (the block no entry made), as summary's note names it" \
    "grep -q '^note: the trace begins mid-run: 1 block (4.0 MiB) active at the snapshot was allocated before its first entry' peak2.txt &&
     ! grep -q 'stops before' peak2.txt"
"$CMH" summary starts.pickle >sum2.txt 2>&1
check "summary: its own mid-run note, once, and no stop note" \
    "[ \$(grep -c 'mid-run' sum2.txt) -eq 1 ] && grep -q '^note: the trace begins mid-run: 4.0 MiB allocated' sum2.txt && ! grep -q 'stops before' sum2.txt"
"$CMH" trace starts.pickle >/dev/null 2>trace2.err
check "trace: says TOTAL MEM leaves out what was live before the first entry" \
    "grep -q 'TOTAL MEM is what the trace.s own entries leave: it leaves out the 4.0 MiB live before its first entry' trace2.err"
"$CMH" peak --json starts.pickle >peak2.json
"$CMH" leaks --json starts.pickle >leaks2.json
py - <<'PY'
import json, sys
g = json.load(open('peak2.json'))[0]['trace_gap']
l = json.load(open('leaks2.json'))[0]
ok = (g['stops_early'] is False and g['starts_late'] is True and g['untraced_blocks'] == 1 and g['untraced_bytes'] == 4 << 20
      and l['trace_gap'] == g and l['live_before_trace_blocks'] == 1 and l['live_before_trace_bytes'] == 4 << 20)
print(ok or (g, l['trace_gap'], l['live_before_trace_bytes']))
sys.exit(0 if ok else 1)
PY
check "--json: the converse's figures, the same in leaks (and its live_before_trace)" "[ \$? -eq 0 ]"

# a record whose trace and snapshot agree: nothing said
"$CMH" record -o leak.cmh -- "$B/samples/leaky" 3 >/dev/null 2>&1
"$CMH" peak leak.cmh >peak3.txt 2>&1
"$CMH" peak --json leak.cmh >peak3.json 2>&1
check "a record from its start to its dump: no gap note, no gap in --json" \
    "! grep -q 'stops before\|begins mid-run' peak3.txt && py -c \"import json; g = json.load(open('peak3.json'))[0]['trace_gap']; assert not g['stops_early'] and not g['starts_late'] and g['says'] == []\""

# our own record of it: history switched to enabled=state (the ring kept), then two blocks freed
"$CMH" record -q -o off.cmh -- "$B/tests/history_off" >/dev/null 2>&1
"$CMH" peak off.cmh >off.txt 2>&1
"$CMH" leaks --json off.cmh >off.json 2>&1
check "a .cmh whose history was switched to enabled=state before the frees: the same note, in the recorder's words" \
    "grep -q '^note: the trace stops before the snapshot: 2 blocks (3.0 MiB) it allocated and never freed are not active in the snapshot,' off.txt &&
     grep -q 'cmh_dump_snapshot before switching history to enabled=state' off.txt &&
     py -c \"import json; g = json.load(open('off.json'))[0]['trace_gap']; assert g['unfreed_blocks'] == 2 and g['unfreed_bytes'] == 3 << 20, g\" ||
     { cat off.txt; false; }"
# trace reads a record in memory_viz's shape: its note is the record's own (read before the shaping)
"$CMH" trace off.cmh >/dev/null 2>off.err
check "trace of that .cmh: the record's note on stderr" \
    "grep -q '^cumemhist: trace: off.cmh, device 0: note: the trace stops before the snapshot: 2 blocks (3.0 MiB)' off.err &&
     grep -q 'cmh_dump_snapshot before switching history to enabled=state' off.err"

# export -f sqlite: the documented sum (allocated_at_start + the events' allocated_delta) is the end
# leaks and peak give (it summed to the trace's own end: 20 MiB for stops.pickle, 6 MiB for off.cmh,
# where devices.allocated_at_end said 0 B and 3 MiB); the blocks never freed end at the trace_gap row
for f in stops.pickle off.cmh starts.pickle; do
    rm -f "gap_$f.db"
    "$CMH" export -q -f sqlite "$f" -o "gap_$f.db" 2>err || bad "export -f sqlite of $f failed: $(cat err)"
    "$CMH" leaks --json "$f" >"gap_$f.json" 2>/dev/null
    check "sqlite of $f: allocated_at_start + SUM(allocated_delta) = allocated_at_end (leaks' end), reserved too; a trace_gap row where it stops early" "py - gap_$f.db gap_$f.json $f <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
d = c.execute('SELECT device, trace_entries, allocated_at_start, allocated_at_end, reserved_at_start, reserved_at_end FROM devices').fetchall()
bad = 0
for dev, n, a0, a1, r0, r1 in d:
    sa, sr = c.execute('SELECT COALESCE(SUM(allocated_delta), 0), COALESCE(SUM(reserved_delta), 0) FROM events WHERE device = ?', (dev,)).fetchone()
    print(sys.argv[3], 'device', dev, 'sum', a0 + sa, 'at end', a1, 'reserved sum', r0 + sr, 'at end', r1)
    bad |= a0 + sa != a1 or r0 + sr != r1
    gap = c.execute(\"SELECT seq, allocated_delta FROM events WHERE device = ? AND action = 'trace_gap'\", (dev,)).fetchall()
    if sys.argv[3] != 'starts.pickle':
        bad |= len(gap) != 1 or gap[0][0] != n
        # the allocations never freed: given back by the gap row, none left live at the end
        live = c.execute('SELECT COALESCE(SUM(allocated_delta), 0) FROM events WHERE device = ? AND allocated_delta > 0 AND end_seq IS NULL', (dev,)).fetchone()[0]
        bad |= live + a0 != a1
    else:
        bad |= len(gap) != 0
    live = {r['device']: r['live_bytes'] for r in json.load(open(sys.argv[2]))}
    bad |= live.get(dev) != a1
sys.exit(bad)
PY"
done

# a record with no history (enabled=state): only the end is known, no trace to disagree with it
N0=${PTF:-/nonexistent}/docubox_state_only.pickle
if [ -f "$N0" ]; then
    "$CMH" peak --json "$N0" >nohist.json 2>/dev/null
    check "no history: no trace gap (not 'begins mid-run' for every block of the end state)" \
        "py -c \"import json; g = json.load(open('nohist.json'))[0]['trace_gap']; assert not g['starts_late'] and g['says'] == [], g\""
fi

# PyTorch's own: transformer_nuggets' snapshot was dumped after history was turned off
N=$PTF/transformer_nuggets_mini_snapshot.pickle
if [ -n "$PTF" ] && [ -f "$N" ]; then
    "$CMH" peak "$N" >n.txt 2>&1
    check "transformer_nuggets: peak says 24 blocks (384.1 MiB) the trace never freed are gone from the snapshot" \
        "grep -q '^peak allocated: 384.1 MiB (402753536 bytes) at entry 43' n.txt &&
         grep -q '^note: the trace stops before the snapshot: 24 blocks (384.1 MiB) it allocated and never freed are not active in the snapshot;' n.txt"
    "$CMH" leaks "$N" >n.leaks 2>&1
    "$CMH" summary "$N" >n.sum 2>&1
    "$CMH" trace "$N" >n.trace 2>n.err
    check "transformer_nuggets: leaks, summary and trace (stderr) say it too" \
        "grep -q 'stops before the snapshot: 24 blocks (384.1 MiB)' n.leaks && grep -q 'stops before the snapshot: 24 blocks (384.1 MiB)' n.sum &&
         grep -q 'stops before the snapshot: 24 blocks (384.1 MiB)' n.err && tail -1 n.trace | grep -q '^TOTAL MEM: 384.1MiB\$'"
else
    echo "skip: no PyTorch fixtures"
fi
finish
