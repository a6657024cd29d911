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

finish
