#!/bin/sh
# rows_py.sh [BUILD_DIR] - what Python stacks (recorder/pystack.c) cost per allocation: a ctypes
# cuMemAlloc+cuMemFree pair from Python DEPTH frames deep (bench/bench_pystack.py), with the
# system Python on the fake driver, in ns per pair.  Under the recorder the modes take turns in
# one process (off: native stacks only; held: the walk only where the GIL is held; wait: the
# default), through ctypes.CDLL (the GIL released around the call: the frames read without it, or,
# as a Python without a GIL-free read, the GIL taken back for the walk) and ctypes.PyDLL (the GIL
# held); --context none keeps no stack, so its modes should not differ.
# With context=all a pair keeps two stacks (the allocation's and the free's).  Figures only;
# nothing passes or fails.  Called by rows.sh; alone: sh bench/rows_py.sh build-rel
set -eu
B=$(cd "${1:-build-rel}" && pwd)
PY=/usr/bin/python3
[ -x $PY ] || { echo "rows_py.sh: no /usr/bin/python3: Python stack rows skipped" >&2; exit 0; }
N=${CMH_PY_PAIRS:-20000}
BP=$(dirname "$0")/bench_pystack.py
T=$(mktemp -d /tmp/cmh-rowspy-XXXXXX)
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
row() { printf '%-58s %s\n' "$1" "$2"; }
rec() { env CUMEMHIST_OUTPUT="$T/r.%p.cmh" LD_PRELOAD="$B/libcumemhist.so" $PY "$BP" "$@"; }
get() { sed -n "s/^$1 //p" "$2"; }
for d in 10 30; do
    env -u LD_PRELOAD $PY "$BP" $d $N >"$T/bare"
    rec $d $N >"$T/cdll"
    rec $d $N pydll >"$T/pydll"
    CUMEMHIST_TEST_PYLAYOUT=none rec $d $N >"$T/api" # as a Python without a GIL-free read
    CUMEMHIST_CONTEXT=none rec $d $N >"$T/none"
    b=$(get bare "$T/bare") off=$(get off "$T/cdll") on=$(get wait "$T/cdll") ref=$(get held "$T/api")
    aoff=$(get off "$T/api") aon=$(get wait "$T/api")
    poff=$(get off "$T/pydll") pon=$(get held "$T/pydll")
    row "python depth $d: bare driver via ctypes, per pair" "$b ns"
    row "  recorder context=all, native stacks only" "$off ns"
    row "  + Python stacks, CDLL (read without the GIL)" "$on ns: +$((on - off)) ns a pair, +$(((on - off) / 2)) ns a stack"
    row "  + Python stacks, CDLL (no GIL-free read: GIL taken back)" "$aon ns vs $aoff ns: +$((aon - aoff)) ns a pair, +$(((aon - aoff) / 2)) ns a stack"
    row "  + Python stacks, PyDLL (GIL held)" "$pon ns vs $poff ns: +$((pon - poff)) ns a pair, +$(((pon - poff) / 2)) ns a stack"
    row "  held, CDLL, no GIL-free read (walk refused, counted)" "$ref ns: $((ref - aoff)) ns a pair"
    row "  context=none: Python stacks wait vs off" "$(get wait "$T/none") ns vs $(get off "$T/none") ns"
    rm -f "$T"/r.*
done
