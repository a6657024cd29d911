#!/bin/sh
# pt_exports_test.sh BUILD_DIR SOURCE_DIR - exports of PyTorch's published snapshots against the
# pickle itself: a snapshot without times (no time_us: PyTorch 2.0, NPU builds) still gives a
# chrome trace with every entry on it, in trace order, ending where the snapshot's blocks say.
TEST=pt_exports . "$(dirname "$0")/testlib.sh"
PT=$SRC/../shared/fixtures/pytorch
NPU=$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle
if [ ! -f "$NPU" ]; then
    echo "skipped: $PT absent"
    exit 0
fi

"$CMH" export -f chrome "$NPU" -o npu.trace.json 2>err || bad "export -f chrome of a timeless snapshot failed: $(cat err)"
check "a timeless snapshot's chrome trace has one counter sample per entry, the last equal to its blocks" \
    "py - '$NPU' npu.trace.json <<'PY'
import json, pickle, sys
s = pickle.load(open(sys.argv[1], 'rb'))
t = json.load(open(sys.argv[2]))
bad = 0
for d in (0, 1):
    ev = [e for e in t['traceEvents'] if e.get('ph') == 'C' and e['pid'] == d]
    n = len(s['device_traces'][d])
    alloc = sum(b['size'] for g in s['segments'] if g['device'] == d for b in g['blocks'] if b['state'] == 'active_allocated')
    ts = [e['ts'] for e in ev]
    print('device', d, 'samples', len(ev), 'entries', n, 'last allocated', ev[-1]['args']['allocated'] if ev else None, 'truth', alloc)
    if len(ev) != n or not ev or ev[-1]['args']['allocated'] != alloc or ts != sorted(ts) or len(set(ts)) != n:
        bad = 1
sys.exit(bad)
PY"
finish
