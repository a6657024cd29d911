#!/bin/sh
# export_facts_test.sh BUILD_DIR SOURCE_DIR - what the export formats of one record say, read
# back with their own clients (python's sqlite3; go tool pprof where installed): the SQLite
# schema's private pools (pool_id) and forked children (parent_pid); pprof's sample at the OOM
# (oom's figures); flamegraph's default over several devices (pprof's figures, said on stderr).
TEST=export_facts . "$(dirname "$0")/testlib.sh"

# --- SQLite: pool_id on segments, blocks and events (NULL where the record does not say) ---
cat >pools.py <<'PY'
import pickle, sys
M, base, T = 1 << 20, 1 << 40, 1_700_000_000_000_000
fr = [{'name': 'fwd', 'filename': '/home/u/m.py', 'line': 5}]
t = [T]
def e(action, addr, size, pool):
    t[0] += 1000
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t[0], 'frames': fr, 'pool_id': pool}
s0, s1, G = base, base + 20 * M, (1, 0)
tr = [e('segment_alloc', s0, 20 * M, (0, 0)), e('alloc', s0, 4 * M, (0, 0)), e('segment_alloc', s1, 20 * M, G), e('alloc', s1, 8 * M, G)]
def seg(addr, size, blocks, pool):
    act = sum(b['size'] for b in blocks if b['state'] != 'inactive')
    return {'device': 0, 'address': addr, 'total_size': size, 'allocated_size': act, 'active_size': act, 'requested_size': act,
            'stream': 0, 'segment_type': 'large', 'segment_pool_id': pool, 'is_expandable': False, 'frames': [], 'blocks': blocks}
blk = lambda a, n, st: {'address': a, 'size': n, 'requested_size': n if st != 'inactive' else 0, 'state': st, 'frames': fr if st != 'inactive' else []}
pickle.dump({'segments': [seg(s0, 20 * M, [blk(s0, 4 * M, 'active_allocated'), blk(s0 + 4 * M, 16 * M, 'inactive')], (0, 0)),
                          seg(s1, 20 * M, [blk(s1, 8 * M, 'active_allocated'), blk(s1 + 8 * M, 12 * M, 'inactive')], G)],
             'device_traces': [tr]}, open('pools.pickle', 'wb'))
PY
py pools.py || bad "writing pools.pickle failed"
"$CMH" export -q pools.pickle -o pools.db 2>err || bad "export -f sqlite of pools.pickle failed: $(cat err)"
check "sqlite: a CUDA graph's private pool is (1, 0) on its segment, its blocks and its entries; the default pool (0, 0)" "py - pools.db <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
q = lambda s: [tuple(r) for r in c.execute(s).fetchall()]
seg = q('SELECT address >> 20, pool_id FROM segments ORDER BY address')
blk = q('SELECT address >> 20, pool_id FROM blocks ORDER BY address')
ev = q('SELECT seq, pool_id FROM events ORDER BY seq')
print(seg, blk, ev)
b = 1 << 20
sys.exit(not (seg == [(b, '(0, 0)'), (b + 20, '(1, 0)')] and blk == [(b, '(0, 0)'), (b + 4, '(0, 0)'), (b + 20, '(1, 0)'), (b + 28, '(1, 0)')]
              and ev == [(0, '(0, 0)'), (1, '(0, 0)'), (2, '(1, 0)'), (3, '(1, 0)')]))
PY"

# --- SQLite: parent_pid of a child forked without exec; NULL for its parent, and for no pools said ---
mkdir fk
(cd fk && "$CMH" record -q -o x.cmh -- "$B/tests/forker" exit >out.txt 2>err.txt) || bad "record of forker failed: $(cat fk/err.txt)"
ppid=$(sed -n 's/^parent \([0-9]*\) .*/\1/p' fk/out.txt)
cpid=$(sed -n 's/^child \([0-9]*\) .*/\1/p' fk/out.txt)
"$CMH" export -q fk/x*.cmh -o fk.db 2>err || bad "export -f sqlite of the forked records failed: $(cat err)"
check "sqlite: the forked child's parent_pid is its parent ($ppid), the parent's NULL; the recorder's driver segments' pool_id NULL" "py - fk.db $ppid $cpid <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = dict(c.execute('SELECT pid, parent_pid FROM processes').fetchall())
pools = c.execute('SELECT count(pool_id) FROM segments').fetchone()[0] + c.execute('SELECT count(pool_id) FROM events').fetchone()[0]
print(rows, pools)
sys.exit(not (rows == {int(sys.argv[2]): None, int(sys.argv[3]): int(sys.argv[2])} and pools == 0))
PY"

# --- pprof: a sample type at the OOM, per device, with oom's figures (there was none: only the end's and
# the peak's, so `-sample_index` could not show what was live when the program ran out) ---
# oom2.pickle: device 0 without an OOM; device 1 with two, 10 MiB (kv) + 4 MiB (fwd) live at the first
cat >oom2.py <<'PY'
import pickle
M, base, T = 1 << 20, 1 << 40, 1_700_000_000_000_000
t = [T]
def f(name, line): return [{'name': name, 'filename': '/home/u/train.py', 'line': line}]
def e(action, addr, size, fr, **kw):
    t[0] += 1000
    d = {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t[0] // 1000, 'frames': fr}
    d.update(kw)
    return d
b0, b1 = base, base + (1 << 30)
# device 0: 6 MiB (weights) and 2 MiB (acts) live at the end, no OOM
tr0 = [e('segment_alloc', b0, 8 * M, f('load', 3)), e('alloc', b0, 6 * M, f('load', 3)), e('alloc', b0 + 6 * M, 2 * M, f('fwd', 9))]
# device 1: 10 MiB (kv) + 4 MiB (fwd) live at its first OOM, then 4 MiB freed, then a second OOM
tr1 = [e('segment_alloc', b1, 16 * M, f('kv', 20)), e('alloc', b1, 10 * M, f('kv', 20)), e('alloc', b1 + 10 * M, 4 * M, f('fwd', 9)),
       e('oom', 0, 32 * M, f('grow', 30), device_free=1 * M),
       e('free_requested', b1 + 10 * M, 4 * M, f('fwd', 9)), e('free_completed', b1 + 10 * M, 4 * M, f('fwd', 9)),
       e('oom', 0, 64 * M, f('grow', 31), device_free=5 * M)]
def seg(dev, addr, size, blocks):
    act = sum(b['size'] for b in blocks if b['state'] != 'inactive')
    return {'device': dev, 'address': addr, 'total_size': size, 'allocated_size': act, 'active_size': act, 'requested_size': act,
            'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [], 'blocks': blocks}
blk = lambda a, n, st, fr: {'address': a, 'size': n, 'requested_size': n if st != 'inactive' else 0, 'state': st, 'frames': fr}
pickle.dump({'segments': [seg(0, b0, 8 * M, [blk(b0, 6 * M, 'active_allocated', f('load', 3)), blk(b0 + 6 * M, 2 * M, 'active_allocated', f('fwd', 9))]),
                          seg(1, b1, 16 * M, [blk(b1, 10 * M, 'active_allocated', f('kv', 20)), blk(b1 + 10 * M, 6 * M, 'inactive', [])])],
             'device_traces': [tr0, tr1]}, open('oom2.pickle', 'wb'))
PY
py oom2.py || bad "writing oom2.pickle failed"
"$CMH" export -q oom2.pickle -o oom2.pb.gz 2>err || bad "export -f pprof of oom2.pickle failed: $(cat err)"
"$CMH" oom --json oom2.pickle >oom2.json 2>/dev/null
if command -v go >/dev/null && go tool pprof -raw oom2.pb.gz >oom2.raw 2>err; then
    check "pprof: oom_space and oom_objects, the comment naming device 1's out of memory #1 (entry 3, the first of 2) and device 0's none" \
        "grep -q '^live_space/bytes.dflt. live_objects/count peak_space/bytes peak_objects/count oom_space/bytes oom_objects/count\$' oom2.raw &&
         grep -q 'device 1, live at the end (entry 6) and at the allocated peak (entry 2), oom_space at out of memory #1 (entry 3, the first of 2,' oom2.raw &&
         grep -q 'device 0, live at the end (entry 2) and at the allocated peak (entry 2), no out-of-memory error (oom_space 0)' oom2.raw || { head -3 oom2.raw; false; }"
    for d in 0 1; do
        go tool pprof -unit=B -sample_index=oom_space -tagfocus=device=$d -top oom2.pb.gz >top$d.txt 2>&1
        go tool pprof -sample_index=oom_objects -tagfocus=device=$d -traces oom2.pb.gz >tr$d.txt 2>&1
    done
    check "pprof -sample_index=oom_space: device 1's total and each site's bytes and blocks are oom's at #1 (allocated 14 MiB: kv 10, fwd 4); device 0's none" "py - oom2.json top1.txt tr1.txt top0.txt <<'PY'
import json, re, sys
o = [r for r in json.load(open(sys.argv[1])) if r['device'] == 1][0]['ooms'][0]
top = open(sys.argv[2]).read()
total = int(re.search(r'accounting for (\\d+)B', top).group(1))
flat = {m.group(2): int(m.group(1)) for m in re.finditer(r'^ *(\\d+)B +\\S+ +\\S+ +\\S+ +\\S+ +(\\S+)\$', top, re.M)}
blocks = {}
for m in re.finditer(r'^ +(\\d+) +(\\S+)\$', open(sys.argv[3]).read(), re.M):
    blocks[m.group(2)] = blocks.get(m.group(2), 0) + int(m.group(1))
want = {x['site']['function']: x['bytes'] for x in o['sites']}
wantb = {x['site']['function']: x['blocks'] for x in o['sites']}
print('pprof', total, flat, blocks, 'oom', o['allocated'], want, wantb)
t0 = open(sys.argv[4]).read()
sys.exit(not (total == o['allocated'] and flat == want and blocks == wantb and 'accounting for 0,' in t0))
PY"
    # an OOM the ring dropped: no sample can hold it, and the comment says why (as oom says it)
    FAKECUDA_CAPACITY=1G "$CMH" record -q --max-entries 3 -o oomd.cmh -- "$B/samples/oom_demo" >/dev/null 2>&1
    "$CMH" export -q oomd.cmh -o oomd.pb.gz 2>/dev/null
    go tool pprof -raw oomd.pb.gz >oomd.raw 2>&1
    check "pprof of a record whose ring dropped its OOM: no oom_space, the comment says the ring dropped it" \
        "grep -q ', 1 out-of-memory error the ring dropped (what was live then is not known: no oom_space)\$' oomd.raw && ! grep -q oom_space/bytes oomd.raw"
else
    echo "skip: go tool pprof not installed (pprof checks)"
fi

# --- flamegraph over several devices: it drew the lowest with no word, where pprof holds every device;
# now said on stderr, and its figures are pprof's for the same device and sample (folded and SVG) ---
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G "$CMH" record -q -o mg.cmh -- "$B/samples/multigpu" 4 >/dev/null 2>&1
"$CMH" flamegraph mg.cmh -o mg.svg 2>fg.err
check "flamegraph: says it drew device 0 of the devices 0, 1 and how to see the other ($(cat fg.err))" \
    "grep -qx 'cumemhist: flamegraph: mg.cmh: drew device 0, the lowest of the devices the record used (0, 1); --device N for another (export -f pprof holds them all, each sample labelled: -tagfocus=device=N)' fg.err"
"$CMH" flamegraph --device 1 mg.cmh -o mg1.svg 2>fg1.err
check "flamegraph --device 1: no such word" "! grep -q 'drew device' fg1.err"
if command -v go >/dev/null; then
    "$CMH" export -q mg.cmh -o mg.pb.gz 2>/dev/null
    for d in 0 1; do
        for at in peak end oom; do
            case $at in peak) si=peak_space ;; end) si=live_space ;; oom) si=oom_space ;; esac
            [ $at = oom ] && [ $d = 0 ] && continue # (no OOM on device 0)
            "$CMH" flamegraph --device $d --at $at --folded mg.cmh >f.$d.$at 2>/dev/null
            "$CMH" flamegraph --device $d --at $at mg.cmh -o f.$d.$at.svg 2>/dev/null
            go tool pprof -unit=B -sample_index=$si -tagfocus=device=$d -top mg.pb.gz >p.$d.$at 2>&1
            check "device $d at $at: flamegraph's folded total and SVG root are pprof's $si (-tagfocus=device=$d)" "py - f.$d.$at f.$d.$at.svg p.$d.$at <<'PY'
import re, sys
folded = sum(int(l.rsplit(' ', 1)[1]) for l in open(sys.argv[1]) if l.strip())
svg = re.search(r'<title>all live memory — ([0-9.]+) MiB', open(sys.argv[2]).read())
pp = int(re.search(r'accounting for (\\d+)B', open(sys.argv[3]).read()).group(1))
print('folded', folded, 'svg', svg and svg.group(1), 'pprof', pp)
sys.exit(not (folded == pp and svg and svg.group(1) == '%.1f' % (pp / 2**20)))
PY"
        done
    done
fi

finish
