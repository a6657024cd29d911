#!/bin/sh
# torchtext_test.sh BUILD_DIR FIXTURES_DIR - `cumemhist stats` is byte for byte what PyTorch's
# `_memory_viz.py stats` printed for each fixture (FIXTURES_DIR/expected), and `cumemhist trace`
# too, but for the last line of each device (TOTAL MEM, a known bug of the script: it prints its
# loop counter and no newline).
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
F=$2
T=$(mktemp -d /tmp/cmh-torchtext-XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -z "$F" ] || [ ! -d "$F/expected" ]; then
    echo "skipped: no PyTorch fixtures with _memory_viz.py's expected text (../shared/fixtures/pytorch)"
    exit 77
fi
pass=0 fail=0
for f in "$F"/*.pickle; do
    n=$(basename "$f" .pickle)
    "$B/cumemhist" stats "$f" >"$T/stats" 2>/dev/null
    if cmp -s "$T/stats" "$F/expected/$n.stats.txt"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: stats $n"; diff "$T/stats" "$F/expected/$n.stats.txt" | head -5; fi
    "$B/cumemhist" trace "$f" 2>/dev/null | grep -v '^TOTAL MEM: ' >"$T/trace"
    # the script's TOTAL MEM has no newline: the next device's header follows on that line
    sed 's/^TOTAL MEM: [^D]*//' "$F/expected/$n.trace.txt" | grep -v '^TOTAL MEM: ' | grep -v '^$' >"$T/want"
    if cmp -s "$T/trace" "$T/want"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: trace $n"; diff "$T/trace" "$T/want" | head -5; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
