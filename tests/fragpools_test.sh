#!/bin/sh
# fragpools_test.sh BUILD_DIR SOURCE_DIR - frag's rows add up to its reserved when stream-ordered
# pools keep a cache (tests/poolfrag.c): the segments listed plus a row per pool's cache make
# reserved, and free inside = reserved - allocated holds in what is listed, in the text and in
# --json.  frag once said "reserved 88.0 MiB", "free inside segments 51.0 MiB", then "3 segments: 3
# fully used (no free bytes, 37.0 MiB)", its --json segments summing to 37 MiB with
# segments_left_out 0: the pool's cache was in no row.  And every output agrees on reserved, with
# stats and trace saying why memory_viz's figures are the segments' alone.
TEST=fragpools . "$(dirname "$0")/testlib.sh"
export FAKECUDA_CAPACITY=1G
"$CMH" record -q -o pc.cmh -- "$B/tests/poolfrag" >pc.out 2>&1 && grep -q "poolfrag: ran" pc.out &&
    ok "poolfrag ran" || bad "poolfrag did not run as designed: $(cat pc.out)"
"$CMH" frag --json pc.cmh >pc.json 2>&1
"$CMH" frag pc.cmh >pc.txt 2>&1
out=$(py <<'PY'
import json, re
d = json.load(open("pc.json"))[0]
rows = d["segments"] + d.get("pool_caches", [])
bad = []
if d["segments_left_out"] != 0: bad.append("left out %d" % d["segments_left_out"])
if sum(r["reserved"] for r in rows) != d["reserved"]: bad.append("json rows reserved %d != %d" % (sum(r["reserved"] for r in rows), d["reserved"]))
if sum(r["allocated"] for r in rows) != d["allocated"]: bad.append("json rows allocated")
if sum(r["free"] for r in rows) != d["free_in_segments"] or d["free_in_segments"] != d["reserved"] - d["allocated"]: bad.append("json rows free")
if not d.get("pool_caches") or d["pool_caches"][0]["kind"] != "private" or sum(r["reserved"] for r in d["pool_caches"]) != d["pool_cache"] or not d["pool_cache"]:
    bad.append("pool_caches %s" % d.get("pool_caches"))
# the text: every row (segments and pools' caches) sums to the reserved line
txt = open("pc.txt").read()
size = r"([0-9.]+) (B|KiB|MiB|GiB)"
def val(m): return float(m[0]) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[1]]
res = val(re.search(r"^  reserved +" + size, txt, re.M).groups())
tot = 0
for l in txt.splitlines():
    m = re.match(r"^  (0x[0-9a-f]+|pool 0x[0-9a-f]+) +" + size, l)
    if m: tot += val(m.groups()[1:])
if abs(tot - res) > 1: bad.append("text rows %.0f != reserved %.0f" % (tot, res))
if "no segment holds it" not in txt: bad.append("no word of the pools' cache in the count line")
print("; ".join(bad) or "same")
PY
)
check "frag: segments plus pools' caches make reserved, free = reserved - allocated, text and --json: $out" '[ "$out" = same ]'

# the same record in every output: reserved at the end is the segments plus the pools' caches, and
# free inside segments (plus the cache) = reserved - allocated.  stats (_memory_viz.py's text, the
# segments alone) said total_reserved 37 MiB and trace `cudaFree(x)` for every cuMemFreeAsync the
# pool kept, with no word, where summary, peak, frag and SQLite said 88 MiB: now stats --json gives
# `pool_cache` and `reserved` beside the script's totals, and stats and trace say on stderr why the
# script's figure is less (tests/poolfrag.c; the pickle read back says the same)
"$CMH" export -q -f memviz -o pc.pickle pc.cmh >/dev/null 2>&1
"$CMH" export -q -f sqlite -o pc.db pc.cmh >/dev/null 2>&1
"$CMH" summary --json pc.cmh >sum.json 2>&1
"$CMH" peak --json pc.cmh >peak.json 2>&1
"$CMH" stats --json pc.cmh >stats.json 2>&1
"$CMH" stats --json pc.pickle >pstats.json 2>&1
"$CMH" stats pc.cmh >stats.txt 2>stats.err
"$CMH" stats pc.pickle >pstats.txt 2>pstats.err
"$CMH" trace pc.cmh >trace.txt 2>trace.err
out=$(py <<'PY'
import json, re, sqlite3
def one(f):
    d = json.load(open(f))
    return d[0] if isinstance(d, list) else d
bad = []
fr = one("pc.json")
R, A = fr["reserved"], fr["allocated"]
if fr["free_in_segments"] != R - A: bad.append("frag free %d != %d - %d" % (fr["free_in_segments"], R, A))
if not fr.get("pool_cache"): bad.append("no pool cache: not the case under test")
su = one("sum.json")["stats"]
if (su["reserved_bytes.all"]["current"], su["allocated_bytes.all"]["current"]) != (R, A): bad.append("summary %s" % su["reserved_bytes.all"])
pk = one("peak.json")["end"]
if (pk["reserved"], pk["allocated"]) != (R, A): bad.append("peak end %s" % pk)
db = sqlite3.connect("pc.db")
if db.execute("select reserved_at_end, allocated_at_end from devices").fetchone() != (R, A): bad.append("sqlite")
for f in ("stats.json", "pstats.json"):
    st = one(f)
    seg_alloc = st["total_allocated"] + st["total_free_internal"]  # blocks' sizes (the script counts requested bytes)
    if st.get("reserved") != R: bad.append("%s reserved %s != %d" % (f, st.get("reserved"), R))
    if st.get("pool_cache") != fr["pool_cache"]: bad.append("%s pool_cache %s" % (f, st.get("pool_cache")))
    if st["total_reserved"] + st.get("pool_cache", 0) != R: bad.append("%s segments + cache != reserved" % f)
    if seg_alloc != A or st["total_free_external"] + st.get("pool_cache", 0) != R - A: bad.append("%s free != reserved - allocated" % f)
def mib(x): return "%.1f MiB" % (x / 1048576)
for f in ("stats.err", "pstats.err"):
    t = open(f).read()
    if "total_reserved counts segments only (%s)" % mib(R - fr["pool_cache"]) not in t or "every other report says it, is %s" % mib(R) not in t \
       or "is %s (reserved - allocated)" % mib(R - A) not in t:
        bad.append("%s: %r" % (f, t))
m = re.search(r"^total_reserved: (.*)$", open("stats.txt").read(), re.M)
if not m or open("stats.txt").read() != open("pstats.txt").read(): bad.append("stats text of the .cmh and its pickle differ")
n = len(re.findall(r"^cudaFree\(", open("trace.txt").read(), re.M))
if not re.search(r"(\d+) of the cudaFree lines .* are stream-ordered frees \(cuMemFreeAsync\)", open("trace.err").read()): bad.append("trace: no word of the stream-ordered frees among its %d cudaFree lines" % n)
print("; ".join(bad) or "same")
PY
)
check "every output: reserved = segments + pools' caches, free = reserved - allocated; stats and trace say why the script's figures differ: $out" '[ "$out" = same ]'

# the memory_viz export: each cuMemPoolCreate pool's segments, and their entries, carry a pool id
# of their own, (0, N) for private pool #N (SQLite's pools.number, oom's "private pool #N"), the
# default pool's (0, 0); it wrote (0, 0) for all, a private pool's segments read as the default
# pool's.  poolfrag two: a second private pool, 3 MiB live.
"$CMH" record -q -o two.cmh -- "$B/tests/poolfrag" two >two.out 2>&1
"$CMH" export -f memviz -o two.pickle two.cmh >/dev/null 2>&1
"$CMH" export -f memviz -o two.again.pickle two.cmh >/dev/null 2>&1
"$CMH" export -f sqlite -o two.db two.cmh >/dev/null 2>&1
out=$(py <<'PY'
import pickle, sqlite3
d = pickle.load(open("two.pickle", "rb"))
bad = []
by = {s["blocks"][0]["requested_size"]: tuple(s["segment_pool_id"]) for s in d["segments"] if s["blocks"]}
db = sqlite3.connect("two.db")
num = [r[0] for r in db.execute("select number from pools where kind = 'private' order by pool_id")]
if num != [1, 2]: bad.append("sqlite private pools %s" % num)
want = {5 << 20: (0, 1), 3 << 20: (0, 2), 16 << 20: (0, 0)}
for size, pid in want.items():
    if by.get(size) != pid: bad.append("the %d MiB segment's pool id %s, not %s" % (size >> 20, by.get(size), pid))
ents = d["device_traces"][0]
pooled = {}
for e in ents:
    if e["action"] == "segment_alloc": pooled[e.get("pool_id", (0, 0))] = pooled.get(e.get("pool_id", (0, 0)), 0) + 1
# pool #1: 5 rounds of 10 and the one kept; #2 one; the default pool the three 16 MiB
if pooled != {(0, 1): 51, (0, 2): 1, (0, 0): 3}: bad.append("segment_alloc entries by pool %s" % pooled)
if open("two.pickle", "rb").read() != open("two.again.pickle", "rb").read(): bad.append("two exports differ")
print("; ".join(bad) or "same")
PY
)
check "memviz export: private pools' own ids, as SQLite numbers them: $out" '[ "$out" = same ]'
check "the export opens in memory_viz" "py '$SRC/tests/check_memviz.py' --ours two.pickle"
# summary's GPU reserved segments with a cache per pool (PyTorch's row, docs/DEFINITIONS.md): a
# segment a pool keeps serves only that pool.  poolfrag: the private pool's 10 segments, made in
# the first round and served again in the next four and by the 5 MiB one kept, and the default
# pool's three 16 MiB ones, of which the final synchronize gives dd[1] back: 13 made, 1 freed,
# 12 at the end.  poolfrag two: the second pool's 3 MiB one besides: 14 made, 13 at the end.  One
# cache for every pool had the default pool's allocations take the private pool's segments:
# 9 current, 10 peak, 10 made, 1 freed for both.  The same from the record and its pickle.
segs() {
    for f in "$@"; do
        "$CMH" summary --json $f >segs.json 2>&1
        py - <<'PY'
import json
g = json.load(open("segs.json"))[0]["stats"]["segment.all"]
print(g["current"], g["peak"], g["allocated"], g["freed"])
PY
    done | tr '\n' ' '
}
out=$(segs pc.cmh pc.pickle)
check "poolfrag: 12 segments at the end, 13 at the peak, 13 made, 1 freed (record, pickle: $out)" '[ "$out" = "12 13 13 1 12 13 13 1 " ]'
out=$(segs two.cmh two.pickle)
check "poolfrag two: 13 segments at the end, 14 at the peak, 14 made, 1 freed (record, pickle: $out)" '[ "$out" = "13 14 14 1 13 14 14 1 " ]'
# the same on an H200 (tests/fixtures/h200d/pool_async.cmh): a private pool keeps its 32 MiB through
# four rounds (7 segments: 6 in the first, a 6 MiB one more in the second while the first's is
# live) and the default pool makes a 3 MiB one each round and gives its 32 MiB back: 11 made, 8
# at the peak, all 11 freed at the trim and destroy.  One cache had each default-pool trim take
# the private pool's cached segments with it: 28 made, 28 freed.
out=$(segs "$SRC/tests/fixtures/h200d/pool_async.cmh")
check "pool_async (H200): 0 segments at the end, 8 at the peak, 11 made, 11 freed ($out)" '[ "$out" = "0 8 11 11 " ]'
# stats of a pooled record with a call the driver refused (the 11th cuMemFreeAsync: poolfrag stops
# there, its pool's cache and the failed call both in the record): the record read whole once, for
# the pools' cache and the driver's note both.  It was read whole twice more than the segments' load
FAKECUDA_FAIL=cuMemFreeAsync@11 "$CMH" record -q -o pbad.cmh -- "$B/tests/poolfrag" >pbad.out 2>&1
CUMEMHIST_DEBUG_LOAD=1 "$CMH" stats pbad.cmh >pbad.stats 2>pbad.err
whole=$(grep -c 'trace entries kept$' pbad.err)
check "stats of a pooled record with a failed call reads it whole once ($whole times), says both" \
    "[ $whole -eq 1 ] && grep -q 'trace entries kept (traces skipped)' pbad.err && grep -q 'total_reserved counts segments only' pbad.err &&
     grep -q '^note: 1 driver call failed' pbad.stats && grep -q 'cuMemFreeAsync returned CUDA_ERROR_INVALID_VALUE once' pbad.stats"
finish
