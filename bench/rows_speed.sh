#!/bin/sh
# rows_speed.sh [BUILD_DIR] - the figures of issue 29 (reading speed), each goal beside its anchor
# from the same run: PyTorch's _memory_viz.py on the same file (MEMVIZ_PY, run by the real
# interpreter), an empty process, the file's size, two summary runs, and for linearity the same
# command at 100k entries.  Figures only; nothing passes or fails.  Times are the best of 3
# (wall seconds, /usr/bin/time); the script's runs on the 1M-entry file are one each.
# rows.sh calls it at its end; alone: sh bench/rows_speed.sh build-rel
# ROWS_SPEED_MAX=1000000 stops the linearity rows at 1M entries (default 4M); ROWS_SPEED_CPU=1 times
# them by CPU rather than wall.
set -eu
B=$(cd "${1:-build-rel}" && pwd)
T=$(mktemp -d /tmp/cmh-rows-speed-XXXXXX)
trap 'rm -rf "$T"' EXIT
BC=$B/bench_codecs CMH=$B/cumemhist
[ -x /usr/bin/time ] || { echo "rows_speed.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
row() { printf '%-62s %s\n' "$1" "$2"; }
size() { stat -c %s "$1"; }
once() { # CMD...: "wall_seconds peak_rss_kB" of one run
    /usr/bin/time -f "%e %M" -o "$T/t1" "$@" >/dev/null 2>"$T/err1" || { echo "bench: failed: $* ($(tail -1 "$T/err1"))" >&2; exit 1; }
    cat "$T/t1"
}
# PEER OURS: how many times faster; ours of 0 (under /usr/bin/time's 10 ms step) counts as 10 ms ("> ")
ratio() { awk "BEGIN{if ($2 <= 0) printf \"> %.0f\", $1 / 0.01; else printf \"%.1f\", $1 / $2}"; }
MAX=${ROWS_SPEED_MAX:-4000000}

PEER=${MEMVIZ_PY:-}
[ -n "$PEER" ] || PEER=$(python3 -c 'import torch.cuda._memory_viz as m; print(m.__file__)' 2>/dev/null || true)
FX=$(dirname "$0")/../../shared/fixtures/pytorch
"$BC" --write blocks 200000 1 "$T/b200k.cmh" "$T/b200k.pickle" >/dev/null
"$BC" --write blocks 1000000 2 "$T/b1m.cmh" "$T/b1m.pickle" >/dev/null
"$BC" --write blocks 1000000 3 "$T/b1m-2.cmh" >/dev/null
echo "rows_speed.sh: $(nproc) cores; peer: ${PEER:-not found (set MEMVIZ_PY=.../torch/cuda/_memory_viz.py)}"

# trace and stats against the script, same file, same text
# (a file of some thousands of entries takes ours a few ms, under /usr/bin/time's 10 ms step: ours is
# then timed over 20 runs in one loop, the shell's start of each included, and divided by 20)
peer_row() { # FILE LABEL GOAL RUNS
    for cmd in trace stats; do
        if [ "$4" = 1 ]; then
            set -- "$1" "$2" "$3" "$4" $(best "$CMH" "$cmd" "$1")
            ours=$5
        else
            set -- "$1" "$2" "$3" "$4" $(best sh -c 'i=0; while [ $i -lt 20 ]; do "$0" "$1" "$2" >/dev/null; i=$((i + 1)); done' "$CMH" "$cmd" "$1")
            ours=$(awk "BEGIN{printf \"%.4f\", $5 / 20}")
        fi
        if [ -n "$PEER" ] && [ -f "$PEER" ]; then
            if [ "$4" = 1 ]; then p=$(once python3 "$PEER" "$cmd" "$1"); else p=$(best python3 "$PEER" "$cmd" "$1"); fi
            p=${p% *}
            row "$cmd, $2: ours vs _memory_viz.py" "$ours s vs $p s = $(ratio "$p" "$ours")x faster (goal >= $3x)"
        else
            row "$cmd, $2" "$ours s; peer not found"
        fi
    done
}
for f in cs336_kk_2.7b_forward_compile_annotations_cppframes memsnapdump_npu_multi_devices_expandable_segment_map_unmap assignment2_training_trace; do
    [ -f "$FX/$f.pickle" ] && peer_row "$FX/$f.pickle" "$(echo "$f" | cut -c1-20) ($(python3 -c "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); print(sum(len(t) for t in d['device_traces']))" "$FX/$f.pickle" 2>/dev/null || echo '?') entries)" 20 3
done
peer_row "$T/b200k.pickle" "200k-entry pickle" 20 3
peer_row "$T/b1m.pickle" "1M-entry pickle" 30 1

# start-up: a command that reads nothing, against a process that does nothing
# (200 runs a figure: /usr/bin/time counts in 10 ms steps; the shell's loop is in both)
set -- $(best sh -c 'i=0; while [ $i -lt 200 ]; do "$0" --version >/dev/null; i=$((i + 1)); done' "$CMH")
v=$1
set -- $(best sh -c 'i=0; while [ $i -lt 200 ]; do "$0" >/dev/null; i=$((i + 1)); done' /bin/true)
row "start-up (cumemhist --version) vs /bin/true, per run" "$(awk "BEGIN{printf \"%.2f ms vs %.2f ms: %.2f ms of ours\", $v * 5, $1 * 5, ($v - $1) * 5}") (goal <= 1 ms)"

# peak RSS against the file
for f in b200k.pickle b1m.pickle b200k.cmh b1m.cmh; do
    set -- $(best "$CMH" summary "$T/$f")
    row "peak RSS of summary / file size ($f)" "$(awk "BEGIN{printf \"%.1f MB / %.1f MB = %.2fx\", $2 / 1024, $(size "$T/$f") / 1e6, $2 * 1024 / $(size "$T/$f")}") (goal <= $(case $f in *.cmh) echo 2 ;; *) echo 1.5 ;; esac)x)"
done

# the goal holds for the load: every command that loads a .cmh's trace, not summary alone
for f in b200k.cmh b1m.cmh; do
    for c in peak trace whatif plot; do
        if [ $c = plot ]; then set -- $(best "$CMH" plot -o "$T/p.svg" "$T/$f"); else set -- $(best "$CMH" $c "$T/$f"); fi
        row "peak RSS of $c / file size ($f)" "$(awk "BEGIN{printf \"%.1f MB / %.1f MB = %.2fx\", $2 / 1024, $(size "$T/$f") / 1e6, $2 * 1024 / $(size "$T/$f")}") (goal <= 2x)"
    done
done

# stats of a .cmh reads its segments and skips its traces (as it stops a pickle before its trace)
set -- $(best "$CMH" stats "$T/b1m.cmh")
row "peak RSS of stats / file size (b1m.cmh)" "$(awk "BEGIN{printf \"%.1f MB / %.1f MB = %.2fx\", $2 / 1024, $(size "$T/b1m.cmh") / 1e6, $2 * 1024 / $(size "$T/b1m.cmh")}")"

# trace of a recorder pickle: the shaped model is the loaded one (cmh_memviz_shape_move), not a second copy
for f in b200k.pickle b1m.pickle; do
    set -- $(best "$CMH" trace "$T/$f")
    row "peak RSS of trace / file size ($f)" "$(awk "BEGIN{printf \"%.1f MB / %.1f MB = %.2fx\", $2 / 1024, $(size "$T/$f") / 1e6, $2 * 1024 / $(size "$T/$f")}") (goal <= 1.5x)"
done

# per entry at 1M, beside summary's: wall (best of 3) and CPU (user + system, least of 3; the
# figure that holds on a shared machine)
set -- $(best "$CMH" summary "$T/b1m.cmh")
sum=$1
# shellcheck disable=SC2046 # two numbers
set -- $(best_cpu "$CMH" summary "$T/b1m.cmh")
sumc=$1
for c in "report -o $T/r.html" "export -f json -o $T/x.json" "whatif"; do
    # shellcheck disable=SC2086,SC2046
    set -- $(best "$CMH" $c "$T/b1m.cmh")
    w=$1
    # shellcheck disable=SC2086,SC2046
    set -- $(best_cpu "$CMH" $c "$T/b1m.cmh")
    row "${c%% -o*}, 1M entries, per entry (summary's beside)" "$(awk "BEGIN{printf \"%.2f us vs %.2f us; cpu %.2f us vs %.2f us\", $w, $sum, $1, $sumc}") (goal <= 0.6 us)"
done
set -- $(best "$CMH" diff "$T/b1m.cmh" "$T/b1m-2.cmh")
d=$1
set -- $(best "$CMH" summary "$T/b1m-2.cmh")
row "diff of two 1M-entry records vs two summary runs" "$d s vs $(awk "BEGIN{print $sum + $1}") s = $(awk "BEGIN{printf \"%.2f\", $d / ($sum + $1)}")x (goal <= 1x)"

# linearity: time per entry from 100k to MAX, every reading command (wall, best of 3; ROWS_SPEED_CPU=1:
# CPU, user + system, least of 3, for a shared machine)
sizes="100000 1000000"
[ "$MAX" -gt 1000000 ] && sizes="$sizes $MAX"
for n in $sizes; do "$BC" --write blocks "$n" 7 "$T/l$n.cmh" >/dev/null; done
"$BC" --write blocks 100000 8 "$T/l100000-2.cmh" >/dev/null
how=best
[ "${ROWS_SPEED_CPU:-0}" = 1 ] && how=best_cpu
for c in summary peak leaks frag oom owners stats trace whatif plot "flamegraph --folded" report "export -f json" "export -f memviz" "export -f chrome" "export -f pprof" diff; do
    line=
    first=
    for n in $sizes; do
        case $c in
        diff) set -- $($how "$CMH" diff "$T/l100000-2.cmh" "$T/l$n.cmh") ;;
        plot | flamegraph* | report | export*) set -- $($how "$CMH" $c -o "$T/out" "$T/l$n.cmh") ;;
        *) set -- $($how "$CMH" $c "$T/l$n.cmh") ;;
        esac
        us=$(awk "BEGIN{printf \"%.3f\", $1 * 1e6 / $n}")
        [ -n "$first" ] || first=$us
        line="$line $(awk "BEGIN{printf \"%.2f\", $us}")"
        last=$us
    done
    row "linearity$([ "$how" = best_cpu ] && echo " (cpu)"): $c, us per entry at $(echo $sizes | sed 's/000000/M/g; s/00000/00k/g; s/ /, /g')" "$line (last/first = $(awk "BEGIN{printf \"%.2f\", $last / ($first > 0 ? $first : 1)}"); goal: flat)"
done
