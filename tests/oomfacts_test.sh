#!/bin/sh
# oomfacts_test.sh BUILD_DIR SOURCE_DIR - OOM advice rests on the record's facts (tests/oom_facts.c).
# 1. frag on a 56 MiB device: a program's own allocator of 48 MiB, 8 MiB free.  whatif's capacity
#    is 56 MiB (the recorded reserve and free, the device's total), not 68 (the model's 60 MiB of
#    PyTorch's segments for the same requests, plus the free); the model passing the device is said
#    as a mismatch, in whatif and in oom's allocator-settings line.
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

finish
