#!/bin/sh
# oomfacts_test.sh BUILD_DIR SOURCE_DIR - OOM advice rests on the record's facts (tests/oom_facts.c).
# 1. frag on a 56 MiB device: a program's own allocator of 48 MiB, 8 MiB free.  whatif's capacity
#    is 56 MiB (the recorded reserve and free, the device's total), not 68 (the model's 60 MiB of
#    PyTorch's segments for the same requests, plus the free); the model passing the device is said
#    as a mismatch, in whatif and in oom's allocator-settings line.  That model runs out at entry 5,
#    a request the program was given: not the recorded OOM (entry 13), so oom says it is not
#    reproduced and judges no setting against it, and whatif's self-replay names the free of the
#    block the model could not make as that, not as a trace begun after the process allocated.
# 2. multi: device 1 leaks 4 MiB a step until it runs out; device 0 held 32 MiB physical (24 of
#    ranges, an 8 MiB handle kept unmapped).  oom's advice has one first, the leak: no "spreading
#    the work ... is where to look first" beside it; the devices compared by what each held as peak
#    says it (2.0x, physical), not by reserved (2.7x).
TEST=oomfacts . "$(dirname "$0")/testlib.sh"

# ---- 1. the capacity from the record's facts
FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=56M "$CMH" record -q -o frag.cmh -- "$B/tests/oom_facts" frag >frag.out 2>&1
check "frag ran out with 8 MiB free ($(tail -1 frag.out))" "grep -q 'big out of memory' frag.out"
"$CMH" whatif frag.cmh >wi.txt 2>&1
"$CMH" whatif --json frag.cmh >wi.json 2>&1
check "whatif: capacity 56.0 MiB, the device's total ($(head -1 wi.txt | sed 's/.*; //'))" \
    "grep -q '; capacity 56.0 MiB\$' wi.txt && grep -q 'reserved 48.0 MiB, 8.0 MiB free' wi.txt"
check "whatif: the model's 60 MiB over the device said as a mismatch" \
    "grep -q 'the model of the recorded settings reserves 60.0 MiB by then where the record had 48.0 MiB' wi.txt"
if py - wi.json >wi.py.txt 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
k = d["capacity_at_oom"]
MiB = 1 << 20
assert d["capacity"] == 56 * MiB and d["capacity_from"] == "device_total", (d["capacity"], d["capacity_from"])
assert k["allocator"] == 48 * MiB and k["free"] == 8 * MiB and k["not_recorded"] == 0, k
assert k["model_reserved"] == 60 * MiB and k["model_over_capacity"] is True, k
PY
then ok "whatif --json: capacity 56 MiB, allocator 48 MiB (the record's), model_reserved 60 MiB over"; else bad "whatif --json: $(cat wi.py.txt)"; fi
"$CMH" oom frag.cmh >oom.txt 2>&1
check "oom: the allocator-settings line says the model's 60 MiB passes the device's 56 MiB" \
    "grep -q 'reserves 60.0 MiB by this OOM where the record' oom.txt && grep -q 'more than the device.s 56.0 MiB' oom.txt"
check "oom: the model's OOM at entry 5 is not the recorded one at 13: not reproduced, no setting judged ($(grep -A2 'does not reproduce' oom.txt | tail -1))" \
    "grep -q 'the what-if model does not reproduce this OOM' oom.txt &&
     grep -q '(the model runs out earlier, at entry 5: 8.0 MiB requested, which the program was given; this OOM is entry 13)' oom.txt &&
     ! grep -q 'avoids it' oom.txt"
"$CMH" oom --json frag.cmh >oom.json 2>&1
if py - oom.json >oom.py.txt 2>&1 <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))[0]["whatif"]
assert w["reproduced"] is False and w["model_oom"] == "earlier" and w["model_oom_index"] == 5, w
PY
then ok "oom --json: reproduced false, model_oom earlier at entry 5"; else bad "oom --json: $(cat oom.py.txt)"; fi
check "whatif: the self-replay's free of the block the model could not make is said so, not as a late trace ($(tail -1 wi.txt))" \
    "grep -q '^  1 free of a block it could not make' wi.txt && ! grep -q 'never shows' wi.txt"
if py - wi.json >wi2.py.txt 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["settings"][0]
assert r["recorded"] and r["unmade_frees"] == 1 and r["unknown_frees"] == 0 and r["oom_against_record"] == "earlier", r
PY
then ok "whatif --json: unmade_frees 1, unknown_frees 0, oom_against_record earlier"; else bad "whatif --json: $(cat wi2.py.txt)"; fi

# ---- 2. one first: the leak; devices by what they held
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=64M "$CMH" record -q -o multi.cmh -- "$B/tests/oom_facts" multi >multi.out 2>&1
check "multi ran out on device 1 ($(tail -1 multi.out))" "grep -q 'out of memory at step 16' multi.out"
"$CMH" oom multi.cmh >m.txt 2>&1
"$CMH" oom --json multi.cmh >m.json 2>&1
"$CMH" peak multi.cmh >p.txt 2>&1
check "oom: driven by a leak at leak()" "grep -q 'driven by a leak: allocated grew by 64.0 MiB over 16 steps at leak' m.txt"
check "oom: one place to look first, the leak: no 'where to look first' for the uneven load ($(grep -A1 'uneven' m.txt | tr '\n' ' '))" \
    "! grep -q 'look first' m.txt && grep -q 'which the leak above accounts for' m.txt"
check "peak: device 0 held 32.0 MiB physical" "grep -q '^peak physical:  32.0 MiB' p.txt"
check "oom: devices compared by what they held: device 0 32.0 MiB physical, 2.0x ($(grep 'devices (' m.txt))" \
    "grep -q 'device 1 64.0 MiB, device 0 32.0 MiB physical' m.txt && grep -q 'device 1 held 2.0x the next device' m.txt"
if py - m.json >m.py.txt 2>&1 <<'PY'
import json, sys
d = [x for x in json.load(open(sys.argv[1])) if x["device"] == 1][0]
MiB = 1 << 20
held = {x["device"]: (x["peak_held"], x["held_is"]) for x in d["devices"]}
assert held == {1: (64 * MiB, "reserved"), 0: (32 * MiB, "physical")}, held
assert d["uneven_load"] is True and d["look_first"] == "leak", (d["uneven_load"], d["look_first"])
PY
then ok "oom --json: peak_held 64/32 MiB (device 0 physical), look_first leak"; else bad "oom --json: $(cat m.py.txt)"; fi
finish
