#!/bin/sh
# oomleak_test.sh BUILD_DIR SOURCE_DIR - OOM verdicts a user can act on (tests/oom_leak.c):
#  - a demand driven by a leak (memory growing step over step until an allocation fails): oom
#    names the growing site, as leaks names it (oom said only 'demand: the memory was genuinely
#    in use', and listed what held memory then);
#  - a fragmentation OOM whose free gaps a small live block traps, in a segment another site made:
#    frag names the trapping block's site (it named only the segment's creator, who has nothing
#    left in it to free), and frag and oom name the same one.
TEST=oomleak . "$(dirname "$0")/testlib.sh"

# --- a leak until OOM ---
FAKECUDA_CAPACITY=1G "$CMH" record -q -o leak.cmh -- "$B/tests/oom_leak" leak >leak.out 2>&1
grep -q "oom_leak: scratch out of memory at step" leak.out && ok "oom_leak leak: the scratch buffer ran out of memory" ||
    bad "oom_leak leak did not run as designed: $(cat leak.out)"
"$CMH" oom leak.cmh >oom.txt 2>&1
"$CMH" oom --json leak.cmh >oom.json 2>&1
"$CMH" leaks --json leak.cmh >leaks.json 2>&1
"$CMH" leaks leak.cmh >leaks.txt 2>&1
check "oom: the demand names the growing site, what it grew by and over how many steps, and the failing request" \
    'grep -q "verdict: demand" oom.txt && grep -q "driven by a leak: allocated grew by [0-9.]* MiB over [0-9]* steps at keep_history (.*oom_leak.c:[0-9]*)" oom.txt &&
     grep -q "the failing request of 96.0 MiB came at entry [0-9]*.*, from scratch (.*oom_leak.c:[0-9]*)" oom.txt'
out=$(py - 2>&1 <<'PY'
import json
o = json.load(open("oom.json"))[0]
l = json.load(open("leaks.json"))[0]
bad = []
grow = [s for s in l["sites"] if s["verdict"] == "growing"]
if len(grow) != 1 or grow[0]["site"]["function"] != "keep_history":
    bad.append("leaks: growing sites %r" % [(s["site"], s["verdict"]) for s in l["sites"]])
ooms = o["ooms"]
if len(ooms) != 1:
    bad.append("%d OOMs" % len(ooms))
e = ooms[-1]
d = e["driven_by_leak"]
if e["verdict"] != "demand" or not d:
    bad.append("oom: verdict %s, driven_by_leak %r" % (e["verdict"], d))
elif grow:
    g = grow[0]
    # the same site, the same verdict, in the same words
    for k in ("site", "verdict", "says", "rate_bytes_per_step", "growth_steps"):
        if d["leak"][k] != g[k]:
            bad.append("%s: oom %r, leaks %r" % (k, d["leak"][k], g[k]))
    if d["grown_bytes"] != g["rate_bytes_per_step"] * g["growth_steps"] or d["growing_sites"] != 1:
        bad.append("grown %r growing_sites %r" % (d["grown_bytes"], d["growing_sites"]))
    # what it held at the error is its row of 'holding memory then'
    held = [s["bytes"] for s in e["sites"] if s["site"] == g["site"]]
    if held != [d["held_at_error"]]:
        bad.append("held_at_error %r, sites %r" % (d["held_at_error"], held))
if e["requested_by"]["site"]["function"] != "scratch":
    bad.append("requested_by %r" % e["requested_by"]["site"])
if e["trapped_by"] is not None:
    bad.append("a demand with trapped_by %r" % e["trapped_by"])
if e["free_in_segments"] != e["reserved"] - e["allocated"]:
    bad.append("free_in_segments %d != reserved %d - allocated %d" % (e["free_in_segments"], e["reserved"], e["allocated"]))
print("; ".join(bad) or "OK")
PY
)
[ "$out" = OK ] && ok "oom --json names the site leaks --json calls growing, in the same words; free = reserved - allocated" || bad "oom vs leaks: $out"
# the leaks text calls the same site growing
check "leaks: keep_history growing" 'grep -q "growing  keep_history (.*oom_leak.c" leaks.txt'
"$CMH" oom leak.cmh >oom2.txt 2>&1
check "oom: the same verdict every run" 'cmp -s oom.txt oom2.txt'

# --- a leak through a shared helper until OOM: oom names the growing caller, as leaks does, marks
# it in the holders' split, and names the failing request's own caller (a newcomer's trial: oom
# said 'at grab (helper2.c:6)' and 'from grab (helper2.c:6)', which read as if the leaking line had
# failed, while leaks named bwd (helper2.c:8)) ---
FAKECUDA_CAPACITY=512M "$CMH" record -q -o help.cmh -- "$B/tests/oom_leak" helper >help.out 2>&1
who=$(sed -n 's/^oom_leak: helper: \([a-z]*\) out of memory.*/\1/p' help.out)
"$CMH" oom help.cmh >hoom.txt 2>&1
"$CMH" leaks help.cmh >hleaks.txt 2>&1
check "oom through a helper: the growth bwd's, the failing request $who's, the holders' split marks bwd ($(grep -E 'driven by|failing request|by caller' hoom.txt | tr -s ' ' | tr '\n' '|'))" \
    '[ -n "$who" ] && [ "$who" != bwd ] &&
     grep -q "driven by a leak: .* at grab (.*oom_leak.c:[0-9]*), called from bwd (.*oom_leak.c:[0-9]*), which held" hoom.txt &&
     grep -q "the failing request of 8.0 MiB came at .*, from grab (.*oom_leak.c:[0-9]*), called from $who (.*oom_leak.c:[0-9]*)\$" hoom.txt &&
     grep -q "by caller: .*bwd (.*oom_leak.c:[0-9]*) (growing)" hoom.txt &&
     grep -q "the growth comes from one caller, bwd (" hleaks.txt'

# --- a fragmentation OOM: a small block of another site traps the segment ---
FAKECUDA_CAPACITY=96M "$CMH" record -q -o trap.cmh -- "$B/tests/oom_leak" trap >trap.out 2>&1
grep -q "oom_leak: trap: 56 MiB: error 2" trap.out && ok "oom_leak trap: the 56 MiB request ran out of memory" ||
    bad "oom_leak trap did not run as designed: $(cat trap.out)"
"$CMH" frag trap.cmh >frag.txt 2>&1
"$CMH" frag --json trap.cmh >frag.json 2>&1
"$CMH" oom trap.cmh >toom.txt 2>&1
"$CMH" oom --json trap.cmh >toom.json 2>&1
check "frag: the segment is held by small_handle, its creator make_pool said beside it" \
    'grep -q "%  small_handle (.*oom_leak.c:[0-9]*) (made by make_pool (.*oom_leak.c:[0-9]*))" frag.txt && grep -q "^  held by: the site of the segment" frag.txt ||
     { cat frag.txt; false; }'
check "oom: fragmentation, trapped by small_handle's live block" \
    'grep -q "verdict: fragmentation" toom.txt && grep -A1 "^  trapped by: small_handle (.*oom_leak.c:[0-9]*)" toom.txt | grep -q "^    its live blocks keep 63.0 MiB free in 1 segment apart" ||
     { cat toom.txt; false; }'
check "frag's last OOM prints oom's very line (frag never contradicts oom)" \
    '[ -n "$(grep "^  trapped by:" toom.txt)" ] && [ "$(grep -A2 "^  trapped by:" frag.txt)" = "$(grep -A2 "^  trapped by:" toom.txt)" ]'
out=$(py - 2>&1 <<'PY'
import json
f = json.load(open("frag.json"))[0]
o = json.load(open("toom.json"))[0]
bad = []
e = o["ooms"][-1]
t = e["trapped_by"]
if e["verdict"] != "fragmentation" or not t or t["site"]["function"] != "small_handle" or (t["free"], t["segments"], t["holders"]) != (63 << 20, 1, 1):
    bad.append("oom: verdict %s trapped_by %r" % (e["verdict"], t))
if f["last_oom"]["trapped_by"] != t or f["last_oom"]["verdict"] != e["verdict"]:
    bad.append("frag last_oom %r, oom %r" % (f["last_oom"], t))
if e["driven_by_leak"] is not None:
    bad.append("a fragmentation OOM driven_by_leak %r" % e["driven_by_leak"])
big = [g for g in f["segments"] if g["reserved"] == 64 << 20]
if len(big) != 1:
    bad.append("segments %r" % f["segments"])
else:
    g = big[0]
    if g["site"]["function"] != "make_pool" or g["held_by"]["function"] != "small_handle" or (g["held_bytes"], g["held_by_sites"]) != (1 << 20, 1):
        bad.append("segment: site %r held_by %r %r %r" % (g["site"], g["held_by"], g["held_bytes"], g["held_by_sites"]))
for g in f["segments"]:
    if g["free"] != g["reserved"] - g["allocated"]:
        bad.append("segment free %d != %d - %d" % (g["free"], g["reserved"], g["allocated"]))
if f["free_in_segments"] != f["reserved"] - f["allocated"] or e["free_in_segments"] != e["reserved"] - e["allocated"]:
    bad.append("free_in_segments != reserved - allocated")
print("; ".join(bad) or "OK")
PY
)
[ "$out" = OK ] && ok "frag --json: held_by small_handle, site make_pool; last_oom.trapped_by is oom's; free = reserved - allocated" || bad "frag/oom json: $out"
"$CMH" frag trap.cmh >frag2.txt 2>&1
"$CMH" oom trap.cmh >toom2.txt 2>&1
check "frag and oom: the same every run" 'cmp -s frag.txt frag2.txt && cmp -s toom.txt toom2.txt'

finish
