#!/bin/sh
# gpu_fixtures_test.sh BUILD_DIR SOURCE_DIR - what the H200 runs recorded (tests/fixtures/h200*):
#  - `cumemhist summary` of PyTorch 2.11's own pickle equals the torch.cuda.memory_summary()
#    printed at the same moment, byte for byte, with and without expandable segments
#  - a real CUPTI recording: 60 kernels in three names, 20 calls each, demangled
TEST=gpufix . "$(dirname "$0")/testlib.sh"
"$B/cumemhist" summary "$F/h200/torch_exp.pickle" >"$T/exp.txt"
if cmp -s "$T/exp.txt" "$F/h200/torch_exp_summary.txt"; then ok "expandable segments: identical to memory_summary()"; else
    bad "expandable segments differ"; diff "$T/exp.txt" "$F/h200/torch_exp_summary.txt"; fi
"$B/cumemhist" summary "$F/h200b/torch_plain.pickle" >"$T/plain.txt"
if cmp -s "$T/plain.txt" "$F/h200b/torch_plain_summary.txt"; then ok "plain allocator: identical to memory_summary()"; else
    bad "plain allocator differs"; diff "$T/plain.txt" "$F/h200b/torch_plain_summary.txt"; fi
for conf in plain expandable; do  # a second workload: random lengths, shuffled frees, a second stream
    "$B/cumemhist" summary "$F/h200c/torch_var_$conf.pickle" >"$T/var_$conf.txt"
    if cmp -s "$T/var_$conf.txt" "$F/h200c/torch_var_${conf}_summary.txt"; then ok "varied workload, $conf: identical to memory_summary()"; else
        bad "varied workload, $conf: differs"; diff "$T/var_$conf.txt" "$F/h200c/torch_var_${conf}_summary.txt"; fi
done
"$B/cumemhist" kernels --json "$F/h200b/kernels.cmh" >"$T/k.json"
env -u LD_PRELOAD python3 - "$T/k.json" <<'PY' && ok "real CUPTI recording: 3 kernels x 20 calls, demangled" || bad "real CUPTI recording"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["name"]: r for r in d["rows"]}
assert d["status"] == "ok" and d["kernels"] == 60, d
for n in ("add(float*, float const*, int)", "scale(float*, int, float)", "fill(float*, int, float)"):
    assert rows[n]["calls"] == 20 and 1000 < rows[n]["avg_ns"] < 1000000, rows[n]
PY
finish
