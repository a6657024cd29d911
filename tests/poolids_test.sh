#!/bin/sh
# poolids_test.sh BUILD_DIR SOURCE_DIR - the pool id of each kind of driver allocation, said alike by
# every export of one record (tests/poolids.c: a plain cuMemAlloc of 1 MiB, a cuMemAllocAsync of
# 2 MiB from the default pool, a cuMemAllocFromPoolAsync of 4 MiB from a private pool).  The
# memviz pickle gave the private pool's segment and entries (0, 1), but SQLite's pool_id was NULL
# for it on segments, blocks and events (it computed nothing); SQLite of that pickle said "(0, 0)"
# on every other event, the pickle's filler, where the record's database said NULL.  Now one fact
# (cmh_pool_tags): the private pool's id wherever the pickle gives it, NULL for the rest (in no pool:
# docs/FLEET.md), from the record and from its pickle alike.
TEST=poolids . "$(dirname "$0")/testlib.sh"
"$CMH" record -q -o pi.cmh -- "$B/tests/poolids" >pi.out 2>&1 && grep -q "poolids: ran" pi.out &&
    ok "poolids ran" || bad "poolids did not run as designed: $(cat pi.out)"
"$CMH" export -q pi.cmh -o pi.pickle 2>err || bad "export pickle: $(cat err)"
"$CMH" export -q -f json pi.cmh -o pi.json 2>err || bad "export json: $(cat err)"
"$CMH" export -q pi.cmh -o cmh.db 2>err || bad "export sqlite: $(cat err)"
"$CMH" export -q pi.pickle -o pickle.db 2>err || bad "export sqlite of the pickle: $(cat err)"
cat >cmp.py <<'PY'
import json, pickle, sqlite3, sys
M = 1 << 20
kinds = {1: "plain cuMemAlloc", 2: "the default pool's", 4: "the private pool's"}
bad = []
d = pickle.load(open("pi.pickle", "rb"))
pk = {s["total_size"] // M: tuple(s["segment_pool_id"]) for s in d["segments"]}
if sorted(pk) != [1, 2, 4]: bad.append("pickle's segments %r" % pk)
priv = pk.get(4)
if not priv or priv == (0, 0) or pk.get(1) != (0, 0) or pk.get(2) != (0, 0): bad.append("pickle's segment_pool_id %r: the private pool's is no id of its own" % pk)
want = {n: ("(%d, %d)" % priv if n == 4 and priv else None) for n in kinds}
j = json.load(open("pi.json"))
js = {s["total_size"] // M: tuple(s["segment_pool_id"]) for s in j["segments"]}
if js != pk: bad.append("json's segment_pool_id %r, the pickle's %r" % (js, pk))
for db in ("cmh.db", "pickle.db"):
    c = sqlite3.connect(db)
    seg = {r[0] // M: r[1] for r in c.execute("SELECT size, pool_id FROM segments")}
    blk = {r[0] // M: r[1] for r in c.execute("SELECT size, pool_id FROM blocks")}
    for n in kinds:
        if seg.get(n, "missing") != want[n]: bad.append("%s: segments.pool_id of %s %r, want %r" % (db, kinds[n], seg.get(n, "missing"), want[n]))
        if blk.get(n, "missing") != want[n]: bad.append("%s: blocks.pool_id of %s %r, want %r" % (db, kinds[n], blk.get(n, "missing"), want[n]))
    for seq, action, size, pool in c.execute("SELECT seq, action, size, pool_id FROM events"):
        w = want.get(size // M) if action.startswith("segment_") else None
        if pool != w: bad.append("%s: events.pool_id of %s seq %d (%d MiB) %r, want %r" % (db, action, seq, size // M, pool, w))
print("; ".join(bad[:6]) or "same")
PY
out=$(py cmp.py 2>&1)
check "pool ids: the private pool's as the pickle's segment_pool_id in SQLite's segments, blocks and events (record and pickle), NULL for the plain and the default pool's allocations and the pool samples: $out" '[ "$out" = same ]'
finish
