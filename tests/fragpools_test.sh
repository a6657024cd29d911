#!/bin/sh
# fragpools_test.sh BUILD_DIR SOURCE_DIR - frag's rows add up to its reserved when stream-ordered
# pools keep a cache (tests/poolfrag.c): the segments listed plus a row per pool's cache make
# reserved, and free inside = reserved - allocated holds in what is listed, in the text and in
# --json.  frag once said "reserved 88.0 MiB", "free inside segments 51.0 MiB", then "3 segments: 3
# fully used (no free bytes, 37.0 MiB)", its --json segments summing to 37 MiB with
# segments_left_out 0: the pool's cache was in no row.
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
finish
