#!/bin/sh
# rows_py.sh [BUILD_DIR] - what Python stacks (recorder/pystack.c) cost per allocation: a ctypes
# cuMemAlloc+cuMemFree pair from Python DEPTH frames deep (bench/bench_pystack.py), with the
# system Python on the fake driver, in ns per pair: the bare driver, the recorder with native
# stacks only (CUMEMHIST_PYSTACKS=off), and with Python stacks, through ctypes.CDLL (the GIL
# released around the call, taken back for the walk) and ctypes.PyDLL (the GIL held); and
# --context none with and without them (no stack, so nothing to add).  With context=all a pair
# keeps two stacks (the allocation's and the free's).  Figures only; nothing passes or fails.
# Called by rows.sh; alone: sh bench/rows_py.sh build-rel
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
bare() { env -u LD_PRELOAD $PY "$BP" "$@"; }
rec() { env CUMEMHIST_OUTPUT="$T/r.%p.cmh" LD_PRELOAD="$B/libcumemhist.so" $PY "$BP" "$@"; }
for d in 10 30; do
    b=$(bare $d $N)
    off=$(CUMEMHIST_PYSTACKS=off rec $d $N)
    on=$(rec $d $N)
    held=$(rec $d $N pydll)
    hoff=$(CUMEMHIST_PYSTACKS=off rec $d $N pydll)
    none=$(CUMEMHIST_CONTEXT=none rec $d $N)
    noneoff=$(CUMEMHIST_CONTEXT=none CUMEMHIST_PYSTACKS=off rec $d $N)
    row "python depth $d: bare driver via ctypes, per pair" "$b ns"
    row "  recorder context=all, native stacks only" "$off ns (+$((off - b)) ns)"
    row "  + Python stacks, CDLL (GIL taken back)" "$on ns (+$((on - off)) ns a pair, +$(((on - off) / 2)) ns a stack)"
    row "  + Python stacks, PyDLL (GIL held)" "$held ns vs $hoff ns native only (+$((held - hoff)) ns a pair)"
    row "  context=none, Python stacks on vs off" "$none ns vs $noneoff ns ($((none - noneoff)) ns)"
    rm -f "$T"/*
done
