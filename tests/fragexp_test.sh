#!/bin/sh
# fragexp_test.sh BUILD_DIR SOURCE_DIR - frag's releasable and trapped bytes of PyTorch's
# expandable segments are what empty_cache() gives back: release_cached_blocks() unmaps, of each
# free block of an expandable segment, the whole pages inside it (ExpandableSegment::unmap: pages
# from segmentRight(ptr) to segmentLeft(ptr + size)), 2 MiB pages in the small pool and 20 MiB
# (kLargeBuffer) in the large.  A stranger read torch_npu's device 0 (78.2 MiB trapped, 0
# releasable) as a mistake, thinking of 2 MiB pages everywhere: its free runs are all shorter than
# a page of their segment (the largest 18.9 MiB in a large-pool segment), so nothing is unmapped,
# and frag did not say why.  It now says what of trapped is in expandable segments and the page
# sizes (text; --json trapped_expandable).
#  - exp.pickle: a large-pool expandable segment (100 MiB) with free runs of 45 MiB at 10 MiB
#    (one whole page, 20-40 MiB) and of 40 MiB at its end (two pages), and a small-pool one (6 MiB)
#    with a run short of a page and a run of one page: releasable 62 MiB, trapped 28 MiB - 512 B,
#    recomputed here by PyTorch's rule.
#  - the torch_npu fixture's device 0: releasable 0, all 78.2 MiB trapped in expandable segments.
TEST=fragexp . "$(dirname "$0")/testlib.sh"

cat >rule.py <<'PY'
# PyTorch's empty_cache() on a snapshot's expandable segments: the whole pages inside each free run
import pickle, sys
def rule(path, device):
    d = pickle.load(open(path, 'rb'))
    rel = trap = 0
    for g in d['segments']:
        if g['device'] != device or not g.get('is_expandable'):
            continue
        page = (2 if g['segment_type'] == 'small' else 20) << 20
        at, runs, cur = g['address'], [], None
        for b in g['blocks']:
            if b['state'] == 'inactive':
                cur = cur or [at, 0]
                cur[1] += b['size']
            elif cur:
                runs.append(cur); cur = None
            at += b['size']
        if cur: runs.append(cur)
        for a, n in runs:
            lo = -(-(a - g['address']) // page) * page
            hi = (a + n - g['address']) // page * page
            rel += max(0, hi - lo)
            trap += n - max(0, hi - lo)
    return rel, trap
PY

py - <<'PY'
import pickle
MiB = 1 << 20
S, T = 0x7f0000000000, 0x7f1000000000
def blk(addr, size, active):
    return {'address': addr, 'size': size, 'requested_size': size if active else 0,
            'state': 'active_allocated' if active else 'inactive', 'frames': []}
def seg(addr, kind, blocks):
    tot = sum(b['size'] for b in blocks)
    al = sum(b['size'] for b in blocks if b['state'] != 'inactive')
    return {'device': 0, 'address': addr, 'total_size': tot, 'allocated_size': al, 'active_size': al, 'requested_size': al,
            'stream': 0, 'segment_type': kind, 'segment_pool_id': (0, 0), 'is_expandable': True, 'frames': [], 'blocks': blocks}
large = seg(S, 'large', [blk(S, 10 * MiB, 1), blk(S + 10 * MiB, 45 * MiB, 0), blk(S + 55 * MiB, 5 * MiB, 1), blk(S + 60 * MiB, 40 * MiB, 0)])
small = seg(T, 'small', [blk(T, 512, 1), blk(T + 512, 3 * MiB - 512, 0), blk(T + 3 * MiB, MiB, 1), blk(T + 4 * MiB, 2 * MiB, 0)])
pickle.dump({'segments': [large, small], 'device_traces': [[]],
             'allocator_settings': {'expandable_segments': True}}, open('exp.pickle', 'wb'), protocol=4)
PY

# FILE DEVICE RELEASABLE TRAPPED: frag --json's figures are the rule's and the given ones, all of
# trapped in expandable segments, and the text says the page sizes
same() {
    "$CMH" frag --json --device "$2" "$1" >f.json 2>/dev/null
    "$CMH" frag --device "$2" "$1" >f.txt 2>/dev/null
    py - "$@" <<'PY'
import json, sys
sys.path.insert(0, '.')
from rule import rule
path, dev, rel, trap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
f = json.load(open('f.json'))[0]
want = rule(path, dev)
print('frag', f['releasable'], f['trapped'], f.get('trapped_expandable'), 'rule', want)
txt = open('f.txt').read()
ok = (f['releasable'], f['trapped']) == want == (rel, trap) and f.get('trapped_expandable') == trap
ok = ok and 'empty_cache() unmaps' in txt and 'only whole pages, 20.0 MiB in the large pool, 2.0 MiB in the small' in txt
sys.exit(0 if ok else 1)
PY
}
MiB=1048576
check "synthetic: releasable 62 MiB (three 20 MiB pages, one 2 MiB page), trapped 28 MiB - 512 B, said with the page sizes" \
    "same exp.pickle 0 $((62 * MiB)) $((28 * MiB - 512))"

PT=$SRC/../shared/fixtures/pytorch
NPU=$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle
if [ -f "$NPU" ]; then
    check "torch_npu device 0: no free run holds a whole page: releasable 0, trapped 78.2 MiB (82034688 B), all in expandable segments" \
        "same '$NPU' 0 0 82034688"
else
    echo "skipped: $PT absent"
fi
finish
