#!/bin/sh
# asyncdev_test.sh BUILD_DIR SOURCE_DIR - stream-ordered allocations and their pools (tests/asyncdev.c).
#  - A cuMemAllocAsync is the STREAM's device's, a cuMemAllocFromPoolAsync the POOL's location's,
#    whatever context is current (before: filed under the current context's device; an OOM on
#    device 1 read "out of memory #1 on device 0", device free 256 MiB, "refused with room").
#  - A pool with release threshold 0 gives its cache back at a stream, context or event synchronize:
#    the recorder hooks them (and cuGetProcAddress's route to them) and records the trim there
#    (before: peak reserved 850 MiB on a 512 MiB device).  Recorded peaks never exceed the device.
#  - A pooled request's OOM counts only its own pool's cache as usable, and names the pools
#    ("the default pool of device N", "private pool #k (cuMemPoolCreate at file:line)"); before, the
#    other pool's cache was "the request's stream-ordered pool's cache ... trim the pool".
#  - export -f sqlite: a pools table gives each pool an id and a kind.
TEST=asyncdev . "$(dirname "$0")/testlib.sh"
M=1048576
P=$B/tests/asyncdev

# ---- the stream's device, the pool's device ----
export FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=256M
"$CMH" record -q -o xo.cmh -- "$P" xdevoom >xo.out 2>&1
check "xdevoom ran (the request failed with CUDA_ERROR_OUT_OF_MEMORY): $(cat xo.out)" 'grep -qx "rc=2" xo.out'
"$CMH" oom --json xo.cmh >xo.json 2>xo.err
check "oom: the OOM is device 1's, with device 1's free memory (56 MiB), a demand verdict" 'py - <<PY
import json
d = json.load(open("xo.json"))
by = {x["device"]: x for x in d}
assert not by.get(0, {}).get("ooms"), by.get(0)
o = by[1]["ooms"]
assert len(o) == 1, o
o = o[0]
assert o["request"] == 100 * $M and o["device_free"] == 56 * $M, o
assert o["allocated"] == 200 * $M, o
assert o["verdict"] == "demand", o["verdict"]
PY'

"$CMH" record -q -o xd.cmh -- "$P" xdev >xd.out 2>&1
check "xdev ran: $(cat xd.out)" 'grep -qx "rc=0" xd.out'
rm -f xd.db
"$CMH" export -f sqlite -o xd.db xd.cmh >/dev/null 2>xd.err
check "sqlite: the 32 MiB and 8 MiB async and the private pool's 16 MiB are device 1's, nothing on device 0 ($(cat xd.err))" 'py - <<PY
import sqlite3
c = sqlite3.connect("xd.db")
rows = c.execute("select device, size from events where action = \"segment_alloc\" order by seq").fetchall()
assert rows == [(1, 32 * $M), (1, 16 * $M), (1, 8 * $M)], rows
assert c.execute("select count(*) from events where device = 0").fetchone()[0] == 0
frees = c.execute("select device, size from events where action = \"segment_free\"").fetchall()
assert frees == [(1, 8 * $M)], frees
pools = c.execute("select device, kind from pools order by pool_id").fetchall()
assert sorted(pools) == [(1, "default"), (1, "private")], pools
PY'
"$CMH" owners --json xd.cmh >xd.own.json 2>&1
check "owners: device 1 at the end: 56 MiB recorded (48 MiB live, 8 MiB a pool's cache), of a used figure of device 1's own; no device 0" 'py - <<PY
import json
d = json.load(open("xd.own.json"))
assert [x["device"] for x in d] == [1], [x["device"] for x in d]
end = [m for m in d[0]["moments"] if m["moment"] == "end"][0]
assert end["recorded"] == 56 * $M, end
assert end["used"] == 56 * $M, end
PY'

# ---- a trim at a synchronize: the peak is what the driver could hold ----
export FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=512M
for how in stream ctx event procaddr; do
    "$CMH" record -q -o th_$how.cmh -- "$P" thresh $how >th_$how.out 2>&1
    check "thresh $how ran (450 MiB ok, 100 MiB refused): $(cat th_$how.out)" "grep -qx 'rc=2' th_$how.out"
    "$CMH" peak --json th_$how.cmh >th_$how.json 2>&1
    check "peak ($how synchronize): reserved peak 450 MiB, never above the 512 MiB device" "py - <<PY
import json
d = json.load(open('th_$how.json'))[0]
assert d['peak_reserved']['bytes'] == 450 * $M, d['peak_reserved']
assert d['end']['reserved'] == 450 * $M, d['end']
assert d['peak_reserved']['bytes'] <= 512 * $M
PY"
done
"$CMH" oom --json th_stream.cmh >th.oom.json 2>&1
check "oom after the trim: demand (450 MiB live, no pool cache)" 'py - <<PY
import json
o = json.load(open("th.oom.json"))[0]["ooms"][0]
assert o["reserved"] == 450 * $M and o["pool_cache"] == 0, o
assert o["verdict"] in ("demand", "too_large"), o["verdict"]
PY'

# ---- one pool's OOM beside another pool's cache ----
for m in privoom privoom2 oddpool; do
    "$CMH" record -q -o $m.cmh -- "$P" $m >$m.out 2>&1
    check "$m ran (the 300 MiB request failed): $(cat $m.out)" "grep -qx 'rc=2' $m.out"
    "$CMH" oom --json $m.cmh >$m.json 2>&1
    "$CMH" oom $m.cmh >$m.txt 2>&1
done
check "privoom: the private pool's request cannot use the default pool's 300 MiB cache; pools named" 'py - <<PY
import json
o = json.load(open("privoom.json"))[0]["ooms"][0]
assert o["pool_cache"] == 300 * $M and o["pool_cache_unusable"] == 300 * $M, o
assert o["usable"] == 0, o
assert o["request_stream_pool"]["name"].startswith("private pool #1 (cuMemPoolCreate at "), o["request_stream_pool"]
assert "asyncdev.c:" in o["request_stream_pool"]["name"], o["request_stream_pool"]
assert o["request_stream_pool"]["cache"] == 0, o["request_stream_pool"]
assert o["cache_pool"]["name"] == "the default pool of device 0", o["cache_pool"]
assert o["verdict"] != "pool_pieces", o["verdict"]
PY'
check "privoom text: kept by the default pool, not for this request; no 'the request's stream-ordered pool's cache'" \
    'grep -q "kept by the default pool of device 0 .*not for this request" privoom.txt && ! grep -q "in the request.s stream-ordered pool.s cache" privoom.txt'
check "privoom2: the default pool's request cannot use private pool #1's cache" 'py - <<PY
import json
o = json.load(open("privoom2.json"))[0]["ooms"][0]
assert o["pool_cache_unusable"] == 300 * $M and o["usable"] == 0, o
assert o["request_stream_pool"]["name"] == "the default pool of device 0", o["request_stream_pool"]
assert o["cache_pool"]["name"].startswith("private pool #1 (cuMemPoolCreate at "), o["cache_pool"]
PY'
rm -f pv.db
"$CMH" export -f sqlite -o pv.db privoom.cmh >/dev/null 2>pv.err
check "sqlite: pools has the default pool and private pool #1, with its creation stack; pool samples name them ($(cat pv.err))" 'py - <<PY
import sqlite3
c = sqlite3.connect("pv.db")
rows = c.execute("select kind, number, stack_id is not null from pools order by kind").fetchall()
assert rows == [("default", None, 0), ("private", 1, 1)], rows
n = c.execute("select count(*) from events e join pools p on e.driver_pool = p.pool_id where p.kind = \"private\" and e.action = \"pool_sample\"").fetchone()[0]
assert n >= 1, n
PY'
# ---- a record's memviz pickle reads back as the record (docs/CLI.md): before, the pickle lost each
# pool sample's kind, thread, stack and at-dump flag and the record's pools_read_at_dump, so its OOMs
# lost "the request's pool" and "not for this request", and its end took a cache as given back ----
for m in xo xd privoom privoom2 oddpool th_stream th_ctx th_event th_procaddr; do
    [ -f $m.cmh ] || continue
    rm -f $m.pickle
    "$CMH" export -q $m.cmh -o $m.pickle 2>$m.perr
    for r in oom owners; do
        "$CMH" $r $m.cmh 2>&1 | sed "s/$m\.cmh/REC/g" >$m.$r.a
        "$CMH" $r $m.pickle 2>&1 | sed "s/$m\.pickle/REC/g" >$m.$r.b
        check "$m: $r reads the same from the .cmh and its pickle ($(cat $m.perr); $(diff $m.$r.a $m.$r.b | head -4))" "cmp -s $m.$r.a $m.$r.b"
    done
done
finish
