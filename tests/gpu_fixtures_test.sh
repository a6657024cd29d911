#!/bin/sh
# gpu_fixtures_test.sh BUILD_DIR - what the H200 runs recorded (tests/fixtures/h200*):
#  - `cumemhist summary` of PyTorch 2.11's own pickle equals the torch.cuda.memory_summary()
#    printed at the same moment: byte for byte with expandable segments; without them every
#    Cur Usage and Peak Usage cell (Tot Alloc/Tot Freed of two rows are 2 MiB apart there: the
#    replay sizes one freed block differently from the allocator, not yet understood)
#  - a real CUPTI recording: 60 kernels in three names, 20 calls each, demangled
set -u
B=$1
F=$(dirname "$0")/fixtures
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
T=$(mktemp -d /tmp/cmh-gpufix-XXXXXX)
trap 'rm -rf "$T"' EXIT
"$B/cumemhist" summary "$F/h200/torch_exp.pickle" >"$T/exp.txt"
if cmp -s "$T/exp.txt" "$F/h200/torch_exp_summary.txt"; then ok "expandable segments: identical to memory_summary()"; else
    bad "expandable segments differ"; diff "$T/exp.txt" "$F/h200/torch_exp_summary.txt"; fi
"$B/cumemhist" summary "$F/h200b/torch_plain.pickle" >"$T/plain.txt"
cut -c1-50 "$T/plain.txt" >"$T/a"
cut -c1-50 "$F/h200b/torch_plain_summary.txt" >"$T/b"
if cmp -s "$T/a" "$T/b"; then ok "plain: every Cur and Peak cell identical"; else bad "plain: Cur/Peak differ"; diff "$T/a" "$T/b"; fi
n=$(diff "$T/plain.txt" "$F/h200b/torch_plain_summary.txt" | grep -c '^<')
if [ "$n" -le 8 ]; then ok "plain: no more than the 8 known Tot lines differ ($n)"; else bad "plain: $n lines differ"; fi
"$B/cumemhist" kernels --json "$F/h200b/kernels.cmh" >"$T/k.json"
env -u LD_PRELOAD python3 - "$T/k.json" <<'PY' && ok "real CUPTI recording: 3 kernels x 20 calls, demangled" || bad "real CUPTI recording"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["name"]: r for r in d["rows"]}
assert d["status"] == "ok" and d["kernels"] == 60, d
for n in ("add(float*, float const*, int)", "scale(float*, int, float)", "fill(float*, int, float)"):
    assert rows[n]["calls"] == 20 and 1000 < rows[n]["avg_ns"] < 1000000, rows[n]
PY
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
