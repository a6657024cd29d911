#!/bin/sh
# fleet.sh [BUILD_DIR] [RECORDS] [ENTRIES] - `ranks` and `export --format sqlite` over a job's
# records: RECORDS (default 64) generated ranks of ENTRIES (default 100,000) PyTorch-shaped
# trace entries each.  Prints records/s and entries/s, and each command's peak RSS against one
# record's own (summary of one file): the commands read one record at a time, so their memory
# should stay near a few records however many there are.  Figures only; best of 3 (wall, maxrss).
set -eu
B=$(cd "${1:-build-rel}" && pwd)
N=${2:-64}
E=${3:-100000}
T=$(mktemp -d /tmp/cmh-fleet-XXXXXX)
trap 'rm -rf "$T"' EXIT
[ -x /usr/bin/time ] || { echo "fleet.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
mkdir "$T/run"
i=0
while [ $i -lt "$N" ]; do
    BENCH_RANK=$i BENCH_WORLD_SIZE=$N "$B/bench_codecs" --write blocks "$E" $((i + 1)) "$T/run/run.$i.cmh"
    i=$((i + 1))
done
bytes=$(du -sb "$T/run" | cut -f1)
. "$(dirname "$0")/lib.sh"
echo "fleet.sh: $(nproc) cores; $N records of $E entries ($(awk "BEGIN{printf \"%.1f\", $bytes / 1e6}") MB of .cmh)"
set -- $(best "$B/cumemhist" summary "$T/run/run.0.cmh")
one=$2
printf '%-44s %7.3f s  peak RSS %6.1f MB (the baseline)\n' "summary of one record" "$1" "$(awk "BEGIN{print $2 / 1024}")"
set -- $(best "$B/cumemhist" ranks "$T/run")
printf '%-44s %7.3f s  %6.1f records/s  %5.2f M entries/s  peak RSS %6.1f MB = %.1fx one record\n' "ranks over $N records" "$1" \
    "$(awk "BEGIN{print $N / $1}")" "$(awk "BEGIN{print $N * $E / $1 / 1e6}")" "$(awk "BEGIN{print $2 / 1024}")" "$(awk "BEGIN{print $2 / $one}")"
set -- $(best "$B/cumemhist" ranks --jobs 1 "$T/run")
printf '%-44s %7.3f s  %6.1f records/s  %5.2f M entries/s  peak RSS %6.1f MB = %.1fx one record\n' "ranks --jobs 1 (one core)" "$1" \
    "$(awk "BEGIN{print $N / $1}")" "$(awk "BEGIN{print $N * $E / $1 / 1e6}")" "$(awk "BEGIN{print $2 / 1024}")" "$(awk "BEGIN{print $2 / $one}")"
set -- $(best "$B/cumemhist" export --format sqlite "$T/run" -o "$T/fleet.db")
printf '%-44s %7.3f s  %6.1f records/s  %5.2f M entries/s  peak RSS %6.1f MB = %.1fx one record; %.1f MB database\n' \
    "export --format sqlite of $N records" "$1" "$(awk "BEGIN{print $N / $1}")" "$(awk "BEGIN{print $N * $E / $1 / 1e6}")" \
    "$(awk "BEGIN{print $2 / 1024}")" "$(awk "BEGIN{print $2 / $one}")" "$(awk "BEGIN{print $(stat -c %s "$T/fleet.db") / 1e6}")"
