#!/bin/sh
# ctxgone_test.sh BUILD_DIR SOURCE_DIR - memory the driver frees with its context
# (tests/ctx_gone.c): cuCtxDestroy and cuDevicePrimaryCtxReset end the context's allocations in
# the record (segment_free entries at the call), so nothing is left held at the end and leaks
# reports none; before, the record kept them live to the end: 'leaked', and the end's figures
# above what the driver said was in use.
TEST=ctxgone . "$(dirname "$0")/testlib.sh"

for mode in destroy reset; do
    FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o "$mode.cmh" -- "$B/tests/ctx_gone" "$mode" >/dev/null 2>"$mode.err"
    rc=$?
    check "ctx_gone $mode ran whole (exit $rc: $(cat "$mode.err"))" "[ $rc -eq 0 ]"
    "$CMH" peak --json "$mode.cmh" >"$mode.peak.json" 2>/dev/null
    "$CMH" leaks --json "$mode.cmh" >"$mode.leaks.json" 2>/dev/null
    "$CMH" owners --json "$mode.cmh" >"$mode.owners.json" 2>/dev/null
    check "ctx_gone $mode: nothing allocated at the end; the context's allocations end at the $mode (segment_free, no leak); owners' end sums to the driver's used memory" "py - '$mode' <<'PY'
import json, sys
mode = sys.argv[1]
M = 2**20
end = json.load(open(mode + '.peak.json'))[0]['end']
assert end['allocated'] == 0 and end['reserved'] == 0, end
lk = json.load(open(mode + '.leaks.json'))[0]
assert lk['live_bytes'] == 0 and lk['live_blocks'] == 0 and lk['live_sites'] == 0, lk
o = json.load(open(mode + '.owners.json'))[0]
e = [m for m in o['moments'] if m['moment'] == 'end'][0]
assert e['recorded'] == 0 and e['used'] == 100 * M == sum(r['bytes'] for r in e['rows']), e
PY"
done
# the frees are in the trace, at the destroy, after the allocations they end
"$CMH" trace destroy.cmh >destroy.trace 2>&1
check "ctx_gone destroy: the trace shows the three allocations freed at cuCtxDestroy, before the second context's" \
    "[ \$(grep -c '^cudaFree(' destroy.trace) -eq 4 ] && grep -A1 '# 100.0KiB\$' destroy.trace | grep -q '^g = cudaMalloc'"
finish
