#!/bin/sh
# rows_hot.sh [BUILD_DIR [LIB]] - the recorder's hot-path rows (issue 27), each beside its goal:
# ns per cuMemAlloc+cuMemFree pair over the bare driver at call depth 20, the flight record on,
# with its file on the disk file system (/var/tmp) and on tmpfs (/dev/shm), and once with
# CUMEMHIST_FLIGHT=0; the recorder's own CPU with 8 threads against 1; its bytes per entry; one
# exit dump of 5 M entries.  LIB (default BUILD_DIR/libcumemhist.so) is the recorder measured,
# so two builds can be put side by side.  PAIRS (default 300000) pairs a run (the threads row:
# TPAIRS, below).  Figures only:
# nothing passes or fails.  Times are process CPU (bench/bench_hot.c says why), best of 5; each
# per-pair row is followed by the kernel's part of it and by the calling thread's own CPU (its
# thread CPU clock: the hooks' cost to the caller, the helper thread's background work left out).
set -eu
B=$(cd "${1:-build-rel}" && pwd)
LIB=${2:-$B/libcumemhist.so}
PAIRS=${PAIRS:-300000}
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
H=$B/bench_hot
row() { printf '%-58s %s\n' "$1" "$2"; }
plus() { sed -n '/thread CPU/!s/.*hooked [0-9.]* ns\/pair, \(+[0-9.]* ns\).*/\1/p'; }
kern() { sed -n 's/.*the kernel.s part of the hooked runs \([0-9.]*\) ns\/pair$/\1/p'; }
own() { sed -n 's/.*the calling thread.s own CPU: .*, \(+[0-9.]* ns\) (thread CPU)$/\1/p'; }
DISK=${DISK_DIR:-/var/tmp}
SHM=${SHM_DIR:-/dev/shm}
echo "rows_hot.sh: $LIB, $PAIRS pairs a run, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); flight record on $DISK ($(stat -f -c %T "$DISK")) and $SHM ($(stat -f -c %T "$SHM"))"
# what the machine charges for the work no recorder of this design can skip (bench_floor.c): the
# least a row below could read here, beside its goal
for dir in "$DISK" "$SHM"; do
    f=$("$B/bench_floor" "$dir")
    row "the least a pair can add here, file on $(stat -f -c %T "$dir")" "$(echo "$f" | sed -n '2s/^floor: a recorded pair (--context none, unlimited): \([0-9]*\) ns with the flight record on .*, \([0-9]*\) ns with it off$/+\1 ns with the flight record on, +\2 ns off/p') ($(echo "$f" | sed -n '1s/^floor: //p' | sed 's/, fresh file pages on [^ ]* ([^)]*)/, its file pages/'))"
    row "  the same with first-touch pages, file on $(stat -f -c %T "$dir")" "$(echo "$f" | sed -n '3s/^floor: with the first pass.s pages (\(.*\)): \([0-9]*\) ns with the flight record on, \([0-9]*\) ns with it off$/+\2 ns on, +\3 ns off (\1)/p')"
done
for m in "none:--context none, unlimited entries:60" "none1m:--context none, --max-entries 1M:60" \
    "alloc:--context alloc, 32 frames:300" "all:--context all:450"; do
    mode=${m%%:*} rest=${m#*:}
    what=${rest%:*} goal=${rest##*:}
    dr=$(BENCH_DIR=$DISK "$H" "$LIB" "$mode" "$PAIRS")
    sr=$(BENCH_DIR=$SHM "$H" "$LIB" "$mode" "$PAIRS")
    or=$(CUMEMHIST_FLIGHT=0 "$H" "$LIB" "$mode" "$PAIRS")
    row "recorder per pair, $what" "disk $(echo "$dr" | plus), tmpfs $(echo "$sr" | plus), CUMEMHIST_FLIGHT=0 $(echo "$or" | plus) (goal <= +$goal ns, flight record on)"
    row "  of the hooked pair, the kernel's (page faults, fallocate)" "disk $(echo "$dr" | kern) ns, tmpfs $(echo "$sr" | kern) ns, CUMEMHIST_FLIGHT=0 $(echo "$or" | kern) ns"
    row "  the calling thread's own CPU (the helper's work left out)" "disk $(echo "$dr" | own), tmpfs $(echo "$sr" | own), CUMEMHIST_FLIGHT=0 $(echo "$or" | own)"
done
# the fake driver with FAKECUDA_THREAD_CACHE=1 there (bench_hot sets it): the threads' bare pairs
# take no lock in the driver, so the baseline is steady and the difference is the recorder's
# TPAIRS (default 700000, 5.6 M pairs a run): a run holds 2 to 3 of the bounded ring's flight
# record generations, each ended by a checkpoint on the helper thread (a dump of the ring, tens
# of ns a pair in all), where 2.4 M pairs held 1 or 2 by chance; each round is a process of its
# own (bench_hot.c says why), so a round must stay well within the flight record's 48 extents
TPAIRS=${TPAIRS:-700000}
t=$(BENCH_DIR=$DISK "$H" "$LIB" threads "$TPAIRS")
row "recorder's own CPU per pair, 8 threads vs 1 (--max-entries 1M)" "$(echo "$t" | sed -n 's/.*= \([0-9.]*x\)$/\1/p') ($(echo "$t" | sed -n 's/.*recorder.s own \(.*\) =.*/\1 ns/p'); bare $(echo "$t" | sed -n 's/.*bare 1 thread \([0-9.]*\), 8 threads \([0-9.]*\);.*/\1 vs \2 ns/p'); goal <= 1.5x)"
row "  the same, round by round (medians [range])" "$(echo "$t" | sed -n 's/^threads by round \(([0-9]*)\): \(.*\); medians$/\1 \2/p')"
echo "$t" | grep -q "flight record was off" && row "  (the flight record lost records in some rounds)" "$(echo "$t" | sed -n 's/^threads: in \(.*\)$/\1/p')"
for fl in 1 0; do
    r=$(CUMEMHIST_FLIGHT=$([ $fl = 1 ] && echo 4 || echo 0) BENCH_DIR=$DISK "$H" "$LIB" dump 2500000)
    tag=$([ $fl = 1 ] && echo "flight record on" || echo "CUMEMHIST_FLIGHT=0")
    row "recorder's bytes per entry, 5 M entries ($tag)" "$(echo "$r" | sed -n 's/.*recorder RSS \([0-9.]* MB = [0-9.]* B\/entry\).*/\1/p') (goal <= 32 B/entry plus stacks)"
    row "exit dump of 5 M entries ($tag)" "$(echo "$r" | sed -n 's/.*dump \([0-9.]* s\), .*peak RSS \(.*\)$/\1, peak RSS \2/p') (goal <= 1 s, <= 1.2x)"
done
