#!/bin/sh
# inspect_test.sh BUILD_DIR SOURCE_DIR - scripts/cmh_inspect.py, the .cmh reader that
# scripts/gpu-check.sh and scripts/gpu_compare.py check a GPU host's records with, reads the
# records this build writes: per device the same entries, actions and drop counts as `trace --json`.
# On the H200 (2026-12-04) it had stopped at every record (a trace's optional fields,
# docs/FORMAT.md: "too many values to unpack"; then at a pool_sample entry, an action it did not
# list), and the GPU check's comparisons with it.
TEST=inspect . "$(dirname "$0")/testlib.sh"
# a python3 with msgpack (Debian's python3-msgpack, scripts/deps.sh), the one on PATH first
PYM=
for p in python3 /usr/bin/python3; do
    if env -u LD_PRELOAD "$p" -c 'import msgpack' 2>/dev/null; then PYM=$p; break; fi
done
if [ -z "$PYM" ]; then
    bad "no python3 with msgpack (scripts/deps.sh installs python3-msgpack)"
    finish; exit 1
fi

# same REC: cmh_inspect's per-device entries, actions and drops against trace --json's
same() {
    "$CMH" trace --json "$1" >"$1.json" 2>/dev/null || return 1
    env -u LD_PRELOAD "$PYM" - "$SRC/scripts" "$1" "$1.json" <<'PY'
import collections, json, sys
sys.path.insert(0, sys.argv[1])
import cmh_inspect
s = cmh_inspect.load(sys.argv[2])
ours = {d: (len(t["entries"]), t["dropped"], collections.Counter(e["action"] for e in t["entries"]))
        for d, t in s["traces"].items()}
theirs = {}
for d in json.load(open(sys.argv[3])):
    theirs[d["device"]] = (len(d["entries"]), d["dropped_entries"], collections.Counter(e["action"] for e in d["entries"]))
print("cmh_inspect", {d: v[:2] for d, v in ours.items()}, "trace --json", {d: v[:2] for d, v in theirs.items()})
sys.exit(0 if ours == theirs and ours else 1)
PY
}

"$CMH" record -q -o leaky.cmh -- "$B/samples/leaky" 5 >/dev/null 2>&1
check "one device (leaky): cmh_inspect reads what trace --json reads" "same leaky.cmh"
FAKECUDA_DEVICES=2 "$CMH" record -q -o multi.cmh -- "$B/samples/multigpu" >/dev/null 2>&1
check "two devices (multigpu): the same, device by device" "same multi.cmh"
"$CMH" record -q -o pool.cmh -- "$B/samples/pool_async" >/dev/null 2>&1
check "a stream-ordered pool's samples (pool_async): the same actions" "same pool.cmh"
"$CMH" record -q --max-entries 10 -o ring.cmh -- "$B/samples/leaky" 5 >/dev/null 2>&1
check "a ring that dropped entries: the same drop count" "same ring.cmh"
for r in torch_async frag_oom pool_async owners_killed; do
    cp "$F/h200d/$r.cmh" .
    check "the H200's $r.cmh (a real driver): the same" "same $r.cmh"
done
check "the script's own report runs" "env -u LD_PRELOAD $PYM $SRC/scripts/cmh_inspect.py leaky.cmh | grep -q 'device 0: [0-9]* entries'"
finish
