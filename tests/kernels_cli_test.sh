#!/bin/sh
# kernels_cli_test.sh BUILD_DIR SOURCE_DIR - kernel timing end to end on the fake driver and fake CUPTI:
# record --kernels, the kernels table's figures, peak naming the kernel around it, and the
# Chrome export with kernel slices on per-stream tracks.  The environment (CTest) sets
# FAKECUPTI_KERNELS and LD_LIBRARY_PATH.
TEST=kernels . "$(dirname "$0")/testlib.sh"
unset LD_PRELOAD_SAVED
"$B/cumemhist" record -q --kernels -o "$T/k.cmh" -- "$B/samples/leaky" 2 >/dev/null
check "record --kernels writes a snapshot" "[ -s $T/k.cmh ]"
"$B/cumemhist" kernels "$T/k.cmh" >"$T/table"
check "kernels: gemm 2 calls, 4 us total, 2 us avg, 1-3 us, 88.89%" \
    "grep -Eq '^gemm\(float\*, int\) +2 +4\.000us +2\.000us +1\.000us +3\.000us +88\.89%' $T/table"
check "kernels: relu 1 call, 11.11%" "grep -Eq '^relu +1 +0\.500us .* 11\.11%' $T/table"
check "kernels: total and drops" "grep -q 'Self CUDA time total: 4.500us (3 kernel launches)' $T/table && grep -q 'dropped 3' $T/table"
"$B/cumemhist" kernels --sort calls --top 1 "$T/k.cmh" | grep -q '^gemm'
check "kernels --sort calls --top 1" "[ $? -eq 0 ]"
rows=$("$B/cumemhist" kernels --top 1 "$T/k.cmh" | grep -c '%$')
check "kernels --top N given explicitly prints N rows" "[ $rows -eq 1 ]"
"$B/cumemhist" kernels --sort bogus "$T/k.cmh" 2>/dev/null
check "kernels --sort refuses an unknown order" "[ $? -eq 2 ]"
"$B/cumemhist" export --format chrome "$T/k.cmh" -o "$T/k.json"
env -u LD_PRELOAD python3 - "$T/k.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
assert len(x) == 3, x
assert {e["tid"] for e in x} == {7, 8}, "one track per stream"
assert [e["name"] for e in x if e["tid"] == 8] == ["relu"]
assert all(e["dur"] > 0 for e in x)
# exact to the nanosecond, in microseconds (epoch nanoseconds through a double would be 256 ns off)
assert sorted(e["dur"] for e in x) == [0.5, 1.0, 3.0], [e["dur"] for e in x]
g = sorted(e["ts"] for e in x if e["tid"] == 7)
assert round((g[1] - g[0]) * 1000) == 1500 and abs((g[1] - g[0]) - 1.5) < 1e-9, g
for tr in {e["name"] for e in ev if e["ph"] == "C"}:
    ts = [e["ts"] for e in ev if e["ph"] == "C" and e["name"] == tr]
    assert ts == sorted(ts), "counter timestamps go backwards on " + tr
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert names[(0, 7)] == "stream 7" and names[(0, 8)] == "stream 8", names
c = [e for e in ev if e["ph"] == "C"]
assert c and all("allocated" in e["args"] for e in c)
assert "time_origin_ns" in d["otherData"]
print("chrome trace ok:", len(x), "kernel slices,", len(c), "counter samples")
PY
check "chrome export: kernel slices on per-stream tracks, memory counters" "[ $? -eq 0 ]"
"$B/cumemhist" kernels --device 0 "$T/k.cmh" | grep -Eq '^gemm\(float\*, int\) +2 '
check "kernels --device 0 keeps device 0's kernels" "[ $? -eq 0 ]"
"$B/cumemhist" kernels --device 3 "$T/k.cmh" 2>/dev/null
check "kernels --device of an absent device: exit 2 (a bad value)" "[ $? -eq 2 ]"
finish
