# lib.sh - what the shell benches share (sourced, with T set to a scratch directory).
# best CMD ARGS...: "wall_seconds peak_rss_kB" of the best of 3 runs (/usr/bin/time), output thrown away.
best() {
    w= m=0
    for _ in 1 2 3; do
        /usr/bin/time -f "%e %M" -o "$T/t" "$@" >/dev/null 2>"$T/err" || { echo "bench: failed: $* ($(tail -1 "$T/err"))" >&2; exit 1; }
        read -r tw tm <"$T/t"
        if [ -z "$w" ] || awk "BEGIN{exit !($tw < $w)}"; then w=$tw; fi
        [ "$tm" -gt "$m" ] && m=$tm
    done
    echo "$w $m"
}
# best_cpu CMD ARGS...: "cpu_seconds wall_seconds" (user + system, and wall) of the run with the least
# CPU of 3: on a shared machine the CPU a process used moves less than its wall time.
best_cpu() {
    c='' w=''
    for _ in 1 2 3; do
        /usr/bin/time -f "%U %S %e" -o "$T/t" "$@" >/dev/null 2>"$T/err" || { echo "bench: failed: $* ($(tail -1 "$T/err"))" >&2; exit 1; }
        read -r tu ts tw <"$T/t"
        tc=$(awk "BEGIN{print $tu + $ts}")
        if [ -z "$c" ] || awk "BEGIN{exit !($tc < $c)}"; then c=$tc w=$tw; fi
    done
    echo "$c $w"
}
