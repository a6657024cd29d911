#!/bin/sh
# npupad_test.sh BUILD_DIR SOURCE_DIR - an Ascend NPU's snapshot (torch_npu) is rounded as its
# allocator rounds: NPUCachingAllocator's round_size() adds 32 bytes to each request before
# PyTorch's 512-byte steps (on chips before the 910_95), so a request of 1024 bytes is a block of
# 1536 and one of 16384 a block of 16896.  The replay and the what-if model took CUDA's rounding
# for every snapshot: blocks freed before the end were 512 bytes short each, and the model of the
# recorded settings did not make the record's own peaks on the torch_npu fixture.
#  - npu.pickle: four live 1024-byte requests in 1536-byte blocks (the snapshot's own segment says
#    so) and a 16384-byte request allocated and freed: allocated peaks at 4 x 1536 + 16896.
#  - cuda.pickle: the same with CUDA's blocks (1024 bytes): 4 x 1024 + 16384, no pad (a guard).
#  - frames.pickle: nothing live at the end, torch_npu's own Python in the stacks: the pad is
#    assumed, and said on stderr.
#  - the torch_npu fixture's device 0 (expandable segments: every block split): the peak is the
#    one an independent replay with the pad finds, and `whatif`'s model of the recorded settings
#    makes the record's peaks (model_peaks_match).
TEST=npupad . "$(dirname "$0")/testlib.sh"

py - <<'PY'
import pickle
S = 0x7f0000000000
NPU = '/env/lib/python3.10/site-packages/torch_npu/utils/_module.py'
def entry(action, addr, size, file='/proj/train.py'):
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': 1000, 'compile_context': 'N/A',
            'user_metadata': '', 'frames': [{'name': 'f', 'filename': file, 'line': 1}]}
def write(name, block, live, file='/proj/train.py'):
    tr, blocks, a = [entry('segment_alloc', S, 2 << 20, file)], [], S
    for k in range(4):
        tr.append(entry('alloc', a, 1024, file))
        if live:
            blocks.append({'address': a, 'size': block, 'requested_size': 1024, 'state': 'active_allocated',
                           'frames': [{'name': 'f', 'filename': file, 'line': 1}]})
        a += block
    tr += [entry('alloc', a, 16384, file), entry('free_requested', a, 16384, file), entry('free_completed', a, 16384, file)]
    if not live:
        for k in range(4):
            tr += [entry('free_requested', S + k * block, 1024, file), entry('free_completed', S + k * block, 1024, file)]
    held = 4 * block if live else 0
    if live:
        blocks.append({'address': a, 'size': (2 << 20) - held, 'requested_size': 0, 'state': 'inactive', 'frames': []})
    else:
        blocks = [{'address': S, 'size': 2 << 20, 'requested_size': 0, 'state': 'inactive', 'frames': []}]
    seg = {'device': 0, 'address': S, 'total_size': 2 << 20, 'allocated_size': held, 'active_size': held,
           'requested_size': 4096 if live else 0, 'stream': 0, 'segment_type': 'small', 'segment_pool_id': (0, 0),
           'is_expandable': False, 'frames': [], 'blocks': blocks}
    with open(name, 'wb') as f:
        pickle.dump({'segments': [seg], 'device_traces': [tr]}, f, protocol=4)
write('npu.pickle', 1536, True)
write('cuda.pickle', 1024, True)
write('frames.pickle', 1536, False, NPU)
PY

# NAME PEAK: peak --json's allocated peak, and whatif's model of the recorded settings the same
peak_is() {
    "$CMH" peak --json "$1" >p.json 2>/dev/null && "$CMH" whatif --json "$1" >w.json 2>/dev/null && py - "$2" <<'PY'
import json, sys
p, w = json.load(open('p.json'))[0], json.load(open('w.json'))
got, model = p['peak_allocated']['bytes'], w['settings'][0]['peak_allocated']
print('peak allocated', got, 'model', model, 'want', sys.argv[1])
sys.exit(0 if got == model == int(sys.argv[1]) else 1)
PY
}
check "torch_npu's blocks (1024 -> 1536): allocated peaks at 4 x 1536 + 16896 = 23040, the model too" "peak_is npu.pickle 23040"
check "CUDA's blocks (1024 -> 1024): 4 x 1024 + 16384 = 20480, no pad" "peak_is cuda.pickle 20480"
check "no live block, torch_npu in the stacks: the pad assumed (4 x 1536 + 16896 = 23040)" "peak_is frames.pickle 23040"
"$CMH" peak frames.pickle >/dev/null 2>err.txt
check "... and said so on stderr" "grep -q 'no live block to show how requests were rounded: each is taken as padded by 32 bytes' err.txt"
"$CMH" peak npu.pickle >/dev/null 2>err.txt
check "where the blocks show it, nothing on stderr" "[ ! -s err.txt ]"

PT=$SRC/../shared/fixtures/pytorch
NPU=$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle
if [ -f "$NPU" ]; then
    "$CMH" peak --json "$NPU" >fx.json 2>/dev/null
    "$CMH" whatif --json --device 0 "$NPU" >fw.json 2>/dev/null
    check "torch_npu fixture, device 0: the peak is an independent replay's with the pad; whatif's model makes the record's peaks" "py - '$NPU' <<'PY'
import json, pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
rnd = lambda n: 512 if n + 32 < 512 else (n + 32 + 511) // 512 * 512
t = d['device_traces'][0]
end = sum(b['size'] for s in d['segments'] if s['device'] == 0 for b in s['blocks'] if b['state'] == 'active_allocated')
live, deltas = {}, []
for e in t:  # (expandable segments: every block is its rounded request)
    if e['action'] == 'alloc': live[e['addr']] = rnd(e['size']); deltas.append(live[e['addr']])
    elif e['action'] == 'free_requested': deltas.append(-live.pop(e['addr'], rnd(e['size'])))
    else: deltas.append(0)
cur = end - sum(deltas); peak = cur
for x in deltas: cur += x; peak = max(peak, cur)
got = {x['device']: x for x in json.load(open('fx.json'))}[0]['peak_allocated']['bytes']
w = json.load(open('fw.json'))
print('independent', peak, 'peak', got, 'model_peaks_match', w['record']['model_peaks_match'])
sys.exit(0 if got == peak and w['record']['model_peaks_match'] else 1)
PY"
else
    echo "skipped: the torch_npu fixture (no PyTorch fixtures)"
fi
finish
