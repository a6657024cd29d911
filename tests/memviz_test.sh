#!/bin/sh
# memviz_test.sh BUILD_DIR FIXTURES_DIR - every export opens the way memory_viz reads it:
# CPython's pickle loads it, its opcodes are the viewer's, the schema holds, blocks tile, and the
# trace replays backwards from the final segments (tests/check_memviz.py).  Exports: the real
# PyTorch fixtures, the H200 recordings, and a fresh recording on the fake driver.
set -u
B=$1
F=$2
T=$(mktemp -d /tmp/cmh-memviz-XXXXXX)
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fail=0
"$B/cumemhist" record -q -o "$T/fresh.cmh" -- "$B/samples/leaky" 5 >/dev/null || fail=1
for f in "$F"/*.pickle "$(dirname "$0")"/fixtures/h200/*.cmh "$(dirname "$0")"/fixtures/h200/*.pickle \
    "$(dirname "$0")"/fixtures/h200c/*.pickle "$T/fresh.cmh"; do
    "$B/cumemhist" export "$f" -o "$T/$(basename "$f").memviz.pickle" 2>/dev/null || { echo "FAIL: export $f"; fail=1; }
    "$B/cumemhist" export --format json "$f" -o "$T/$(basename "$f").json" 2>/dev/null || { echo "FAIL: json $f"; fail=1; }
done
env -u LD_PRELOAD python3 "$(dirname "$0")/check_memviz.py" --ours "$T"/*.memviz.pickle || fail=1
# the inputs themselves: PyTorch's segment totals agree with their blocks
env -u LD_PRELOAD python3 "$(dirname "$0")/check_memviz.py" --no-replay "$F"/*.pickle || fail=1
for j in "$T"/*.json; do
    env -u LD_PRELOAD python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$j" || { echo "FAIL: $j is not JSON"; fail=1; }
done
exit $fail
