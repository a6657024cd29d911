#!/bin/sh
# memviz_test.sh BUILD_DIR FIXTURES_DIR - every export opens the way memory_viz reads it:
# CPython's pickle loads it, its opcodes are the viewer's, the schema holds, blocks tile, and the
# trace replays backwards from the final segments (tests/check_memviz.py).  Exports: the real
# PyTorch fixtures (FIXTURES_DIR, when given and present), the H200 recordings, and a fresh
# recording on the fake driver.
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
F=$2
T=$(mktemp -d /tmp/cmh-memviz-XXXXXX)
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fail=0
"$B/cumemhist" record -q -o "$T/fresh.cmh" -- "$B/samples/leaky" 5 >/dev/null || fail=1
# PyTorch's own pickles: the shared fixtures when they sit beside the checkout, and ours from the H200
D=$(dirname "$0")/fixtures
if [ -n "$F" ] && [ -d "$F" ]; then
    set -- "$F"/*.pickle "$D"/h200/*.pickle "$D"/h200c/*.pickle
else
    echo "note: no ../shared/fixtures/pytorch: only the H200 snapshots and a fresh recording are exported"
    set -- "$D"/h200/*.pickle "$D"/h200c/*.pickle
fi
# a merged record: PyTorch's blocks beside the other driver allocations, as segments of their own
"$B/cumemhist" merge -o "$T/merged.cmh" "$D/h200/torch_exp.cmh" "$D/h200/torch_exp.pickle" 2>/dev/null || { echo "FAIL: merge"; fail=1; }
for f in "$@" "$D"/h200/*.cmh "$T/fresh.cmh" "$T/merged.cmh"; do
    "$B/cumemhist" export "$f" -o "$T/$(basename "$f").memviz.pickle" 2>/dev/null || { echo "FAIL: export $f"; fail=1; }
    "$B/cumemhist" export --format json "$f" -o "$T/$(basename "$f").json" 2>/dev/null || { echo "FAIL: json $f"; fail=1; }
done
env -u LD_PRELOAD python3 "$D/../check_memviz.py" --ours "$T"/*.memviz.pickle || fail=1
# the inputs themselves: PyTorch's segment totals agree with their blocks
env -u LD_PRELOAD python3 "$D/../check_memviz.py" --no-replay "$@" || fail=1
for j in "$T"/*.json; do
    env -u LD_PRELOAD python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$j" || { echo "FAIL: $j is not JSON"; fail=1; }
done
# interned stacks (schema 2) resolve to exactly the frames PyTorch's shape (--inline-frames) lists
for f in "$D"/h200/torch_exp.pickle "$T/fresh.cmh" "$T/merged.cmh"; do
    "$B/cumemhist" export --format json --inline-frames "$f" -o "$T/inline.json" 2>/dev/null || { echo "FAIL: json --inline-frames $f"; fail=1; }
    env -u LD_PRELOAD python3 - "$T/$(basename "$f").json" "$T/inline.json" "$f" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
name = sys.argv[3].split("/")[-1]
assert a["cumemhist"].pop("json_schema") == 2 and b["cumemhist"].pop("json_schema") == 1, name
stacks, frames = a.pop("stacks"), a.pop("frames")
assert stacks[0] == [], "stack 0 is the empty one"
# (each stack's owner goes with the stack table: one per stack, none for the empty one)
owners = a["cumemhist"].pop("stack_owners")
assert len(owners) == len(stacks) and owners[0] == "" and all(owners[1:]), name
def resolve(o):
    if isinstance(o, dict):
        if "stack" in o:
            o["frames"] = [frames[i] for i in stacks[o.pop("stack")]]
        for v in o.values(): resolve(v)
    elif isinstance(o, list):
        for v in o: resolve(v)
resolve(a)
n = sum(len(t) for t in b["device_traces"])
with_frames = sum(1 for t in b["device_traces"] for e in t if e["frames"])
assert with_frames, f"{name}: no entry has frames: nothing was compared"
assert a == b, f"{name}: the interned export does not resolve to the inline one"
print(f"ok: {name}: {n} entries ({with_frames} with frames): interned stacks resolve to the inline frames")
PY
done
# Newer PyTorch's per-entry pool_id (a tuple CPython memoizes, one object shared by two entries
# written as a memo reference): export -> memory_viz pickle keeps each entry's, and memory_viz
# still opens it.
env -u LD_PRELOAD python3 - "$T/pools.pickle" <<'PY' || fail=1
import pickle, sys
M, S = 1 << 20, 0x7F5000000000
pools, shared, tr, blocks = [(0, 0), (1, 0), (0, 7), (1, 0), (0, 0), (3, 2)], (5, 5), [], []
for i, p in enumerate(pools + [shared, shared]):
    a = S + i * M
    tr.append({"action": "alloc", "addr": a, "size": M, "stream": 0, "time_us": 1_700_000_000_000_000 + i, "compile_context": "N/A",
               "user_metadata": "", "frames": [{"name": "f", "filename": "a.py", "line": i}], "pool_id": p})
    blocks.append({"address": a, "size": M, "requested_size": M, "state": "active_allocated", "frames": tr[-1]["frames"]})
seg = {"device": 0, "address": S, "total_size": 8 * M, "allocated_size": 8 * M, "active_size": 8 * M, "requested_size": 8 * M, "stream": 0,
       "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
pickle.dump({"segments": [seg], "device_traces": [[{"action": "segment_alloc", "addr": S, "size": 8 * M, "stream": 0,
             "time_us": 1_699_999_999_999_999, "compile_context": "N/A", "user_metadata": "", "pool_id": (0, 0)}] + tr]},
            open(sys.argv[1], "wb"), protocol=4)
PY
"$B/cumemhist" export -f pickle -o "$T/pools.out.pickle" "$T/pools.pickle" || fail=1
env -u LD_PRELOAD python3 - "$T/pools.pickle" "$T/pools.out.pickle" <<'PY' || fail=1
import pickle, sys
a, b = (pickle.load(open(f, "rb"))["device_traces"][0] for f in sys.argv[1:3])
pa, pb = [e.get("pool_id") for e in a], [e.get("pool_id") for e in b]
assert pa == pb and pa[-1] == (5, 5) and pa[2] == (1, 0), (pa, pb)
print(f"ok: {len(pa)} entries' pool_id kept through the export, the memoized one too")
PY
env -u LD_PRELOAD python3 "$D/../check_memviz.py" --ours "$T/pools.out.pickle" || fail=1
"$B/cumemhist" export -f json -o "$T/pools.json" "$T/pools.pickle" || fail=1
env -u LD_PRELOAD python3 - "$T/pools.pickle" "$T/pools.json" <<'PY' || fail=1
import json, pickle, sys
a, b = pickle.load(open(sys.argv[1], "rb"))["device_traces"][0], json.load(open(sys.argv[2]))["device_traces"][0]
assert [list(e["pool_id"]) for e in a] == [e["pool_id"] for e in b], b
print(f"ok: the JSON export says each of the {len(b)} entries' pool_id too")
PY
exit $fail
