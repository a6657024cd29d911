#!/bin/sh
# poolsync_test.sh BUILD_DIR SOURCE_DIR - stream-ordered pools on CUDA's default pool (release
# threshold 0): a synchronize gives the pool's cache back, which no hook sees.  The recorder reads
# every pool at each dump, so the end is what the driver said (before: a phantom 512 MiB cache at
# the end in peak, frag, owners and summary, owners' "the device had 512.0 MiB in use" against the
# record's own cuMemGetInfo sample of 0, and frag advising cuMemPoolTrimTo); a record written
# before that (tests/fixtures/pools/presync_*.cmh, recorded by cumemhist 0872966) is reconciled
# with its last cuMemGetInfo sample, and every report says so.  summary's "GPU reserved memory"
# large and small rows add up to the total (they said 199680 + 1536 KiB for a 198656 KiB Tot
# Alloc); owners names a pool's cache as frag does (it said "allocators above the driver").
TEST=poolsync . "$(dirname "$0")/testlib.sh"
export FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=8G
M=1048576
FIX=$SRC/tests/fixtures/pools

"$CMH" record -q -o ps.cmh -- "$B/tests/poolsync" >ps.out 2>&1
check "poolsync ran as designed (the driver: 32 MiB used, the pool 32 MiB reserved): $(cat ps.out)" \
    'grep -qx "driver: used 32 MiB more than at the start, pool reserved 32 MiB" ps.out'

# rows_add_up FILE: summary --json's reserved (and allocated) all row is its large + small rows
rows_add_up() {
    "$CMH" summary --json "$1" >rows.json 2>rows.err && py - <<'PY'
import json
st = json.load(open("rows.json"))[0]["stats"]
for what in ("reserved_bytes", "allocated_bytes", "segment"):
    a, l, s = (st["%s.%s" % (what, k)] for k in ("all", "large_pool", "small_pool"))
    for k in ("current", "allocated", "freed"):
        assert a[k] == l[k] + s[k], (what, k, a[k], l[k], s[k])
PY
}
check "summary: reserved's all row is large + small (Cur, Tot Alloc, Tot Freed), a fresh record" 'rows_add_up ps.cmh'
check "summary: the same in a record written before (pool_rows)" 'rows_add_up "$FIX/presync_pool_rows.cmh"'
"$CMH" summary ps.cmh >ps.sum.txt 2>&1
check "summary text: the GPU reserved memory row is its large + small rows (Cur, Tot Alloc, Tot Freed)" \
    'py - <<PY
import re
lines = open("ps.sum.txt").readlines()
i = [k for k, l in enumerate(lines) if "GPU reserved memory" in l][0]
rows = lines[i:i + 3]
def kib(c):
    n, u = c.split()
    return float(n) * {"B": 1 / 1024, "KiB": 1, "MiB": 1024, "GiB": 1 << 20}[u]
v = [[kib(c) for c in re.findall(r"\|\s*([0-9.]+ [KMG]?i?B)\s*", l)] for l in rows]
assert len(v) == 3 and all(len(x) == 4 for x in v), rows
for k in (0, 2, 3):
    assert v[0][k] == v[1][k] + v[2][k], (k, rows)
PY'

# the end is the driver's: 32 MiB in every report (the pool's cache given back at the synchronize)
"$CMH" peak --json ps.cmh >ps.peak.json 2>&1
"$CMH" frag --json ps.cmh >ps.frag.json 2>&1
"$CMH" owners --json ps.cmh >ps.own.json 2>&1
"$CMH" summary --json ps.cmh >ps.sum.json 2>&1
rm -f ps.db
"$CMH" export ps.cmh -o ps.db >/dev/null 2>&1
"$CMH" export ps.cmh -o ps.pickle >/dev/null 2>ps.pk.err
ends_agree() { # FILE-PREFIX BYTES: peak, frag, owners, summary and sqlite say BYTES reserved at the end
    py - "$1" "$2" <<'PY'
import json, sqlite3, sys
f, want = sys.argv[1], int(sys.argv[2])
p = json.load(open(f + ".peak.json"))[0]["end"]["reserved"]
fr = json.load(open(f + ".frag.json"))[0]
o = json.load(open(f + ".own.json"))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
s = json.load(open(f + ".sum.json"))[0]["stats"]["reserved_bytes.all"]["current"]
(db,), = sqlite3.connect(f + ".db").execute("SELECT reserved_at_end FROM devices").fetchall()
got = (p, fr["reserved"], fr["pool_cache"], end["recorded"], end["used"], s, db)
assert got == (want, want, 0, want, want, want, want), got
assert fr["free_in_segments"] == fr["reserved"] - fr["allocated"], fr
assert sum(r["bytes"] for r in end["rows"]) == end["used"], end
assert not [r for r in end["rows"] if "above the driver" in r["owner"] or r["kind"] == "pool_cache"], end["rows"]
PY
}
check "a fresh record's end: 32 MiB reserved in peak, frag (no pool cache), owners (the device's used), summary, sqlite" 'ends_agree ps $((32 * M))'
check "export: the pickle's note says 0 B of pool cache at the end, as the reports: $(cat ps.pk.err)" \
    'grep -q "0 B at the end)" ps.pk.err'
check "a fresh record's reports say nothing of a reconciliation" \
    '"$CMH" peak ps.cmh >ps.peak.txt 2>&1 && ! grep -q "latest samples are older" ps.peak.txt'

# a record written before the recorder read the pools at its dump: reconciled with its last
# cuMemGetInfo sample (0 B used), and said
cp "$FIX/presync_pool_sync.cmh" old.cmh
"$CMH" peak --json old.cmh >old.peak.json 2>&1
"$CMH" frag --json old.cmh >old.frag.json 2>&1
"$CMH" owners --json old.cmh >old.own.json 2>&1
"$CMH" summary --json old.cmh >old.sum.json 2>&1
rm -f old.db
"$CMH" export old.cmh -o old.db >/dev/null 2>&1
check "an older record's end: 0 B in peak, frag, owners, summary, sqlite (it said a 512 MiB pool cache)" 'ends_agree old 0'
for c in peak frag summary; do
    "$CMH" $c old.cmh >old.$c.txt 2>&1
    check "$c on an older record says the pools' cache was taken as given back, 512.0 MiB" \
        "grep -q 'latest samples are older than the last cuMemGetInfo sample' old.$c.txt && grep -q 'counts those 512.0 MiB as given back' old.$c.txt"
done
check "frag on an older record advises no cuMemPoolTrimTo" '! grep -q "cuMemPoolTrimTo gives it back" old.frag.txt'
check "peak --json on an older record: trace_gap.pools_given_back 512 MiB" \
    'py -c "import json; g = json.load(open(\"old.peak.json\"))[0][\"trace_gap\"]; assert g[\"pools_given_back\"] == 512 * 2**20, g"'

# a pool that keeps its cache (tests/poolcache.c, release threshold all at the end: 16 MiB kept):
# owners names it as frag does, in text and --json
"$CMH" record -q -o pc.cmh -- "$B/tests/poolcache" >pc.out 2>&1
"$CMH" owners --json pc.cmh >pc.own.json 2>&1
"$CMH" owners pc.cmh >pc.own.txt 2>&1
"$CMH" frag pc.cmh >pc.frag.txt 2>&1
check "owners: a pool's cache is its own row (kind pool_cache, 16 MiB at the end), named as frag names it" 'py - <<PY
import json, re
o = json.load(open("pc.own.json"))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
rows = [r for r in end["rows"] if r["kind"] == "pool_cache"]
assert len(rows) == 1 and rows[0]["bytes"] == 16 * 2**20, end["rows"]
assert not [r for r in end["rows"] if "above the driver" in r["owner"]], end["rows"]
words = re.search(r"of it a pool.s cache .*\((.*)\)", open("pc.frag.txt").read()).group(1)
assert rows[0]["owner"] == "a pool\x27s cache (" + words + ")", (rows[0]["owner"], words)
assert "a pool\x27s cache (" + words + ")" in open("pc.own.txt").read()
PY'
# managed memory the driver does not count (FAKECUDA_MANAGED_OFFDEVICE: its pages not on the
# device) beside a pool's 8 MiB cache, in a record recovered after SIGKILL (no dump-time pool
# samples: the stale-pool rule applies): the 32 MiB managed missing from cuMemGetInfo's used is
# not a cache given back; before, the rule took it for one and the end said 32 MiB reserved and
# 8 MiB 'given back' of a pool that still kept them (tests/pool_managed.c)
rm -f pm.cmh*
FAKECUDA_MANAGED_OFFDEVICE=1 FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o pm.cmh -- "$B/tests/pool_managed" >pm.out 2>pm.err
"$CMH" peak --json pm.cmh >pm.peak.json 2>&1
check "a recovered record with managed memory off the device: the pool's 8 MiB cache kept (40 MiB reserved), none taken as given back ($(cat pm.out))" 'py - <<PY
import json
M = 2**20
assert open("pm.out").read().split() == [str(8 * M)]  # the driver: the pool keeps 8 MiB
d = json.load(open("pm.peak.json"))[0]
assert (d["end"]["allocated"], d["end"]["reserved"]) == (32 * M, 40 * M), d["end"]
assert d["trace_gap"]["pools_given_back"] == 0, d["trace_gap"]
PY'
finish
