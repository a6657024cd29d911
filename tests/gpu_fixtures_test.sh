#!/bin/sh
# gpu_fixtures_test.sh BUILD_DIR SOURCE_DIR - what the H200 runs recorded (tests/fixtures/h200*):
#  - `cumemhist summary` of PyTorch 2.11's own pickle equals the torch.cuda.memory_summary()
#    printed at the same moment, byte for byte, with and without expandable segments
#  - a real CUPTI recording: 60 kernels in three names, 20 calls each, demangled
#  - a PyTorch job killed on the H200, recovered from its flight record: its owners sum to the
#    device's used memory; a real fragmentation OOM, retried, is called fragmentation
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
"$B/cumemhist" summary "$F/h200d/torch_plain.pickle" >"$T/plain_d.txt"
if cmp -s "$T/plain_d.txt" "$F/h200d/torch_plain_summary.txt"; then ok "fourth run, plain allocator: identical to memory_summary()"; else
    bad "fourth run, plain allocator differs"; diff "$T/plain_d.txt" "$F/h200d/torch_plain_summary.txt"; fi
# a PyTorch job killed on the GPU, recovered from its flight record: owners sum to the device's
# used memory at both moments, and the record says how it ended
"$B/cumemhist" owners --json "$F/h200d/owners_killed.cmh" >"$T/ok.json" 2>/dev/null
env -u LD_PRELOAD python3 - "$T/ok.json" <<'PY' && ok "killed job: owners sum to the device's used memory" || bad "killed job: owners"
import json, sys
d = json.load(open(sys.argv[1]))[0]
assert "killed by SIGTERM" in d["process"]["ending"], d["process"]
for m in d["moments"]:
    assert sum(r["bytes"] for r in m["rows"]) == m["used"] and m["used"] > m["recorded"] > 0, m
PY
"$B/cumemhist" oom "$F/h200d/frag_oom.cmh" >"$T/fo.txt" 2>/dev/null
check "real fragmentation OOM: retried, called fragmentation" "grep -q 'verdict: fragmentation' $T/fo.txt && grep -q 'retry of' $T/fo.txt"
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
