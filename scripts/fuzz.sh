#!/bin/sh
# fuzz.sh [pickle|cmh] [SECONDS] - build a reader's libFuzzer target with clang (ASan + UBSan)
# and run it, seeded with the real snapshots.  Crashes, leaks and hangs (> 10 s) stop it and
# leave the input in build-fuzz/.  Example: scripts/fuzz.sh pickle 600
set -eu
cd "$(dirname "$0")/.."
target=${1:-pickle}
secs=${2:-600}
out=build-fuzz
mkdir -p "$out/corpus-$target" "$out/seeds-$target"
SRC="snapshot/model.c snapshot/query.c snapshot/atomic.c snapshot/cmh_read.c snapshot/cmh_write.c snapshot/pickle_read.c
     snapshot/pickle_model.c snapshot/pickle_write.c snapshot/load.c analyzer/replay.c analyzer/pt_rules.c analyzer/summary.c"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Isnapshot -Ianalyzer \
    $(pkg-config --cflags msgpack-c 2>/dev/null || pkg-config --cflags msgpack) \
    "tests/fuzz/fuzz_$target.c" $SRC \
    $(pkg-config --libs msgpack-c 2>/dev/null || pkg-config --libs msgpack) -o "$out/fuzz_$target"
if [ "$target" = pickle ]; then
    cp ../shared/fixtures/pytorch/*.pickle tests/fixtures/h200*/*.pickle "$out/seeds-$target/" 2>/dev/null || true
else
    cp tests/fixtures/h200*/*.cmh "$out/seeds-$target/"
fi
cd "$out"
exec "./fuzz_$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    -print_final_stats=1 "corpus-$target" "seeds-$target"
