#!/bin/sh
# rows.sh [BUILD_DIR] - every figure of the speed table, each beside its baseline from the same
# run: PyTorch's own _memory_viz.py where it is on disk, the file size, the driver alone, one
# thread.  Figures only; nothing passes or fails.  Times are the best of 3 runs (wall seconds,
# /usr/bin/time); peak RSS is the kernel's (maxrss).
#
# The peer: $MEMVIZ_PY, else torch/cuda/_memory_viz.py from an importable torch.  Without it the
# two rows that need it say so.  Records are generated (bench_codecs --write) into a temporary
# directory: "blocks" is shaped like PyTorch's caching allocator, "segments" like a recorder's
# whole-block driver allocations, both with 24-frame stacks.
set -eu
B=$(cd "${1:-build-rel}" && pwd)
T=$(mktemp -d /tmp/cmh-rows-XXXXXX)
trap 'rm -rf "$T"' EXIT
BC=$B/bench_codecs CMH=$B/cumemhist
[ -x /usr/bin/time ] || { echo "rows.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }

. "$(dirname "$0")/lib.sh"
# best of 3 of an in-process phase: "seconds entries peak_kB"
phase() {
    b=
    for _ in 1 2 3; do
        r=$("$BC" --time "$1" "$2")
        if [ -z "$b" ] || awk "BEGIN{split(\"$r\",x,\" \"); split(\"$b\",y,\" \"); exit !(x[1] < y[1])}"; then b=$r; fi
    done
    echo "$b"
}
size() { stat -c %s "$1"; }
row() { printf '%-58s %s\n' "$1" "$2"; }

"$BC" --write blocks 200000 1 "$T/b200k.cmh" "$T/b200k.pickle"
"$BC" --write blocks 1000000 2 "$T/b1m.cmh" "$T/b1m.pickle"
"$BC" --write blocks 1000000 3 "$T/b1m-2.cmh"
"$BC" --write blocks-nostacks 1000000 2 "$T/n1m.cmh"
"$BC" --write segments 1000000 4 "$T/s1m.cmh" "$T/s1m.pickle"
echo "rows.sh: $(nproc) cores; records: 200k and 1M PyTorch-shaped entries ($(size "$T/b200k.pickle") and $(size "$T/b1m.pickle") B as pickles), 1M recorder-shaped ($(size "$T/s1m.cmh") B .cmh)"

# 1-2: PyTorch's own script, same file, same output
PEER=${MEMVIZ_PY:-}
if [ -z "$PEER" ]; then
    PEER=$(python3 -c 'import torch.cuda._memory_viz as m; print(m.__file__)' 2>/dev/null || true)
fi
for cmd in trace stats; do
    if [ -n "$PEER" ] && [ -f "$PEER" ]; then
        set -- $(best "$CMH" "$cmd" "$T/b200k.pickle")
        ours=$1
        set -- $(best python3 "$PEER" "$cmd" "$T/b200k.pickle")
        row "$cmd, 200k-entry pickle: ours vs _memory_viz.py" "$ours s vs $1 s = $(awk "BEGIN{printf \"%.1f\", $1 / $ours}")x faster (target >= $([ $cmd = trace ] && echo 20 || echo 10)x)"
    else
        set -- $(best "$CMH" "$cmd" "$T/b200k.pickle")
        row "$cmd, 200k-entry pickle" "$1 s; peer not found: set MEMVIZ_PY=.../torch/cuda/_memory_viz.py or install torch"
    fi
done

# the recorder's shape, where the script's segment lookup is quadratic: one run of it, 30 s at most
"$BC" --write segments 200000 5 "$T/s200k.cmh" "$T/s200k.pickle"
set -- $(best "$CMH" trace "$T/s200k.pickle")
ours=$1
if [ -n "$PEER" ] && [ -f "$PEER" ]; then
    t0=$(date +%s.%N)
    if timeout 30 python3 "$PEER" trace "$T/s200k.pickle" >/dev/null 2>&1; then
        p=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
        row "trace, 200k recorder-shaped pickle: ours vs _memory_viz.py" "$ours s vs $p s = $(awk "BEGIN{printf \"%.0f\", $p / $ours}")x faster"
    else
        row "trace, 200k recorder-shaped pickle: ours vs _memory_viz.py" "$ours s vs > 30 s (stopped) = > $(awk "BEGIN{printf \"%.0f\", 30 / $ours}")x faster"
    fi
else
    row "trace, 200k recorder-shaped pickle" "$ours s; peer not found"
fi

# 3-4: load rates, in process
for f in b1m.pickle s1m.pickle; do
    set -- $(phase load "$T/$f")
    row "pickle load ($f)" "$(awk "BEGIN{printf \"%.2f M entries/s, %.0f MB/s\", $2 / $1 / 1e6, $(size "$T/$f") / $1 / 1e6}") (target >= 5 M entries/s)"
done
for f in b1m.cmh s1m.cmh; do
    set -- $(phase summary "$T/$f")
    row ".cmh load + replay + summary ($f)" "$(awk "BEGIN{printf \"%.2f M entries/s\", $2 / $1 / 1e6}") (target >= 10 M entries/s)"
done

# 5-6: peak RSS of the command against the file it reads
for f in s1m.cmh b1m.cmh b200k.pickle b1m.pickle; do
    set -- $(best "$CMH" summary "$T/$f")
    row "peak RSS of summary / file size ($f)" "$(awk "BEGIN{printf \"%.1f MB / %.1f MB = %.2fx\", $2 / 1024, $(size "$T/$f") / 1e6, $2 * 1024 / $(size "$T/$f")}") (target <= $(case $f in *.cmh) echo 2.5 ;; *) echo 2 ;; esac)x)"
done

# 7: memory_viz export, in process (load included)
for f in b1m.cmh s1m.cmh; do
    set -- $(phase memviz "$T/$f")
    row "memviz export ($f, load included)" "$(awk "BEGIN{printf \"%.2f M entries/s\", $2 / $1 / 1e6}") (target >= 5 M entries/s)"
done

# 8: JSON size against the .cmh
for f in n1m.cmh b1m.cmh; do
    "$CMH" export --format json "$T/$f" -o "$T/x.json"
    row "export --format json / .cmh size ($f$([ $f = n1m.cmh ] && echo ', no stacks'))" "$(awk "BEGIN{printf \"%.1f MB / %.1f MB = %.1fx\", $(size "$T/x.json") / 1e6, $(size "$T/$f") / 1e6, $(size "$T/x.json") / $(size "$T/$f")}") (target <= 10x)"
    rm -f "$T/x.json"
done

# 9: diff of two 1M-entry records against two summary runs
set -- $(best "$CMH" diff "$T/b1m.cmh" "$T/b1m-2.cmh")
d=$1
set -- $(best "$CMH" summary "$T/b1m.cmh")
s1=$1
set -- $(best "$CMH" summary "$T/b1m-2.cmh")
row "diff of two 1M-entry records vs two summary runs" "$d s vs $(awk "BEGIN{print $s1 + $1}") s = $(awk "BEGIN{printf \"%.2f\", $d / ($s1 + $1)}")x (target <= 1x)"

# what-if: settings replayed per second through the allocator model (the recorded one and the
# default panel; the load of the file included)
ns=$("$CMH" whatif --json "$T/b200k.pickle" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["settings"]))')
set -- $(best "$CMH" whatif --json "$T/b200k.pickle")
set -- $(best "$CMH" summary "$T/b200k.pickle") "$1"
row "whatif, 200k-entry trace" "$ns settings in $3 s = $(awk "BEGIN{printf \"%.1f\", $ns / $3}") settings/s (load included; a summary of it: $1 s)"

# 10-12: the recorder, against the driver alone in the same process (the fake driver here)
LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$B/bench_hooks" "$B/libcumemhist.so" 1000000 >"$T/hooks"
sed -n 's/^hooked, enabled=all context=none *\(.*\)/\1/p' "$T/hooks" | { read -r v; row "recorder, no stacks, per pair over the bare driver" "$v (target <= +60 ns)"; }
sed -n 's/^hooked, context=all (2 stacks\/pair, 32 fr) *\(.*\)/\1/p' "$T/hooks" | { read -r v; row "recorder, context=all, per pair over the bare driver" "$v (target <= +500 ns)"; }
sed -n 's/^hooked, context=none, 1 thread *\(.*\)/\1/p' "$T/hooks" | { read -r v; row "recorder, 8 threads vs 1, CPU per pair" "$v (target <= 2x)"; }
sed -n 's/^driver alone, 1 thread *\(.*\)/\1/p' "$T/hooks" | { read -r v; row "  baseline: the driver alone, 8 threads vs 1" "$v"; }

# the recorder's hot path (issue 27): bench/rows_hot.sh
sh "$(dirname "$0")/rows_hot.sh" "$B"
# the live side: top and the exporter watching 8 busy processes (bench/rows_obs.sh)
sh "$(dirname "$0")/rows_obs.sh" "$B"
# issue 29: reading speed, every command linear (its own script)
sh "$(dirname "$0")/rows_speed.sh" "$B"
# the viewer's figures, beside MemoryViz.js in the same browser harness
sh "$(dirname "$0")/rows_view.sh" "$B"
# Python stacks with each allocation (bench/rows_py.sh)
sh "$(dirname "$0")/rows_py.sh" "$B"
