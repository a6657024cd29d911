#!/bin/sh
# stackless_test.sh BUILD_DIR SOURCE_DIR - a PyTorch trace recorded with Python stacks whose
# backward ran on the autograd engine's own threads: their allocations (the gradients, a cuBLAS
# workspace) carry no frame at all.  Every output said "<no stack: recorded without stacks, or
# allocated before recording>" of them, which was neither (a real H200 record, PyTorch 2.11:
# 112.2 MiB in 7 blocks, every other allocation with its frames).
#  - mixed.pickle: one allocation with the user's frame, one without: the reason names a thread
#    with no Python frame, in peak and leaks (the words every output takes).
#  - bare.pickle: no allocation with a frame: recorded without stacks, as before (a guard).
#  - merged.cmh: a record of ours joined with mixed.pickle (as `record` co-records PyTorch): the
#    same blocks said "allocated before the first kept entry" (the H200's torch_plain.cmh); now the
#    thread too.  The record alone keeps its own words (a guard).
TEST=stackless . "$(dirname "$0")/testlib.sh"

py - <<'PY'
import pickle
S, MiB = 0x7f0000000000, 1 << 20
def entry(action, addr, size, frames):
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': 1000, 'compile_context': 'N/A',
            'user_metadata': '', 'frames': frames}
def write(name, user):
    fr = [{'name': 'step', 'filename': '/proj/train.py', 'line': 41}] if user else []
    T = S + 20 * MiB  # the backward thread's own segment (made by it: no frame either)
    tr = [entry('segment_alloc', S, 20 * MiB, fr), entry('alloc', S, 2 * MiB, fr),
          entry('segment_alloc', T, 20 * MiB, []), entry('alloc', T, 4 * MiB, [])]
    def seg(addr, size, frames):
        blocks = [{'address': addr, 'size': size, 'requested_size': size, 'state': 'active_allocated', 'frames': frames},
                  {'address': addr + size, 'size': 20 * MiB - size, 'requested_size': 0, 'state': 'inactive', 'frames': []}]
        return {'device': 0, 'address': addr, 'total_size': 20 * MiB, 'allocated_size': size, 'active_size': size,
                'requested_size': size, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0),
                'is_expandable': False, 'frames': frames, 'blocks': blocks}
    with open(name, 'wb') as f:
        pickle.dump({'segments': [seg(S, 2 * MiB, fr), seg(T, 4 * MiB, [])], 'device_traces': [tr]}, f, protocol=4)
write('mixed.pickle', True)
write('bare.pickle', False)
PY

R="allocated by a thread with no Python frame (autograd's backward: stacks='all' keeps its C++ frames), or before recording"
"$CMH" peak mixed.pickle >p.txt 2>/dev/null
"$CMH" leaks mixed.pickle >o.txt 2>/dev/null
check "peak: the 4 MiB without a frame is a thread's with no Python frame" 'grep -qF "4.0 MiB   66.7%       1  <no stack: $R>" p.txt'
check "peak: the 2 MiB keeps its line" "grep -qF 'step (/proj/train.py:41)' p.txt"
check "leaks: the same words" 'grep -qF "<no stack: $R>" o.txt'
"$CMH" peak bare.pickle >b.txt 2>/dev/null
check "no allocation with a frame: recorded without stacks, as before" \
    "grep -qF '<no stack: recorded without stacks, or allocated before recording>' b.txt && ! grep -q 'Python frame' b.txt"
"$CMH" record -q -o rec.cmh -- "$B/samples/leaky" 2 >/dev/null 2>&1
"$CMH" merge --force -o merged.cmh rec.cmh mixed.pickle >/dev/null 2>&1
"$CMH" peak merged.cmh >m.txt 2>/dev/null
"$CMH" peak rec.cmh >r.txt 2>/dev/null
check "merged with PyTorch's part: its block without a frame names the thread too" \
    "grep -qF \"<no stack: allocated by a thread with no Python frame (autograd's backward, with PyTorch's history under stacks='python')\" m.txt"
check "the record alone: no word of Python threads" "[ -s r.txt ] && ! grep -q 'Python frame' r.txt"
finish
