#!/bin/sh
# torchtext_test.sh BUILD_DIR FIXTURES_DIR - `cumemhist stats` is byte for byte what PyTorch's
# `_memory_viz.py stats` printed for each fixture (FIXTURES_DIR/expected, when there), and
# `cumemhist trace` too, but for the last line of each device (TOTAL MEM, a known bug of the
# script: it prints its loop counter and no newline); the same for our own recordings in
# tests/fixtures/memviz, read as .cmh and as their memory_viz export, whose TOTAL MEM must be
# the bytes still allocated at the end.
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
F=$2
T=$(mktemp -d /tmp/cmh-torchtext-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
# compare SNAPSHOT EXPECTED_STATS EXPECTED_TRACE [TRACE_OPTION]
compare() {
    "$B/cumemhist" stats "$1" >"$T/stats" 2>/dev/null
    if cmp -s "$T/stats" "$2"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: stats $1"; diff "$T/stats" "$2" | head -5; fi
    # shellcheck disable=SC2086
    "$B/cumemhist" trace ${4:-} "$1" 2>/dev/null | grep -v '^TOTAL MEM: ' >"$T/trace"
    # the script's TOTAL MEM has no newline: the next device's header follows on that line
    sed 's/^TOTAL MEM: [^D]*//' "$3" | grep -v '^TOTAL MEM: ' | grep -v '^$' >"$T/want"
    if cmp -s "$T/trace" "$T/want"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: trace $1"; diff "$T/trace" "$T/want" | head -5; fi
}
if [ -n "$F" ] && [ -d "$F/expected" ]; then
    for f in "$F"/*.pickle; do
        n=$(basename "$f" .pickle)
        compare "$f" "$F/expected/$n.stats.txt" "$F/expected/$n.trace.txt"
    done
else
    echo "note: no PyTorch fixtures with _memory_viz.py's expected text (../shared/fixtures/pytorch): those skipped"
fi
# our own recordings: the .cmh and its memory_viz export read the way the script read the export
M=$(dirname "$0")/fixtures/memviz
for f in "$M"/*.cmh; do
    n=$(basename "$f" .cmh)
    # --raw-frames: the expected text holds the frames as recorded (resolved ones depend on
    # which of the recorded binaries this machine still has), for the export as for trace of
    # the record itself (which reads as the export: symbolized where the binaries are here)
    "$B/cumemhist" export --raw-frames "$f" -o "$T/$n.pickle" 2>/dev/null
    compare "$f" "$M/$n.stats.txt" "$M/$n.trace.txt" --raw-frames
    compare "$T/$n.pickle" "$M/$n.stats.txt" "$M/$n.trace.txt"
    # and TOTAL MEM is what is still allocated at the end (the bytes asked for), device by device
    "$B/cumemhist" trace "$f" | grep '^TOTAL MEM: ' >"$T/total"
    if "$B/cumemhist" peak --json "$f" | env -u LD_PRELOAD python3 -c "
import json, sys
def fmt(n):
    for u in ['', 'Ki', 'Mi', 'Gi', 'Ti']:
        if abs(n) < 1024.0:
            return f'{n:3.1f}{u}B'
        n /= 1024.0
want = ['TOTAL MEM: ' + fmt(d['end']['requested']) for d in json.load(sys.stdin)]
got = open(sys.argv[1]).read().split(chr(10))[:-1]
assert got == want, (got, want)
" "$T/total"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: TOTAL MEM of $n"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
