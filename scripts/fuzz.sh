#!/bin/sh
# fuzz.sh [cmh|pickle|flight|live|cli] [SECONDS] - build a libFuzzer target with clang (ASan + UBSan)
# and run it (FUZZ_BUILD_ONLY=1: build it only): the .cmh reader, the pickle reader (each with the replay over what it accepts), the
# flight-record reader (`cumemhist recover`), the live reader (top, snapshot, exporter: a record
# read, grown, read again), or the CLI's option parsing.  Seeded with the real
# snapshots, flight records of killed samples (from the build in build/), and argument vectors.
# Crashes, leaks and hangs (> 10 s) stop it and leave the input in build-fuzz/.  The run's
# figures (execs, coverage) end its output.  Example: scripts/fuzz.sh pickle 600
# Built with FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION: the .cmh and flight readers compute their
# checksums but do not refuse on a mismatch (a mutated input would never get past them to the
# parser otherwise); what they parse is the same.
set -eu
cd "$(dirname "$0")/.."
target=${1:-pickle}
secs=${2:-600}
out=build-fuzz
case $target in cmh | pickle | flight | live | cli) ;; *) echo "fuzz.sh: no target '$target' (cmh, pickle, flight, live, cli)" >&2; exit 2 ;; esac
mkdir -p "$out/corpus-$target" "$out/seeds-$target"
pc() { pkg-config "$@" msgpack-c 2>/dev/null || pkg-config "$@" msgpack; }
SRC="snapshot/model.c snapshot/query.c snapshot/atomic.c snapshot/cmh_read.c snapshot/cmh_write.c snapshot/crc32c.c snapshot/procid.c snapshot/registry.c snapshot/pickle_read.c snapshot/pickle_fast.c
     snapshot/pickle_model.c snapshot/pickle_side_read.c snapshot/pickle_write.c snapshot/pickle_side_write.c snapshot/load.c snapshot/lazylib.c analyzer/*.c"
LIBS=
case $target in
cli)
    # the viewer's script and style, made into C strings as the CMake build makes them
    for part in view.js:cmh_view_js view.css:cmh_view_css; do
        cmake -DIN="viz/view/${part%%:*}" -DOUT="$out/embed_${part#*:}.c" -DNAME="${part#*:}" -P viz/view/embed.cmake
    done
    SRC="$SRC snapshot/symbolize.c snapshot/lazy_dw.c viz/*.c $out/embed_cmh_view_js.c $out/embed_cmh_view_css.c $(ls cli/*.c | grep -v cli/main.c)"
    LIBS="-lpthread -lm -ldl" # libdw, libstdc++, zlib, SQLite, ncurses: loaded on first use (snapshot/lazylib.h)
    ;;
*) LIBS="-lm" ;;
esac
# Each source is compiled once into an object that every target links (make's way, without
# make): the objects live in a directory named by a checksum of the sources, the headers and the
# flags, so an edit anywhere compiles them again and nothing stale is linked; they are compiled
# $(nproc) at a time, each written under a temporary name and renamed, so that two runs at once
# never link a half-written one.  (Each target compiling its own copy, one file after another,
# was 97 s of CI's 10 minutes; this is a fraction of it.)
CFLAGS="-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -DCMH_VERSION=\"fuzz\"
    -DCMH_PYTHON_DIR=\"/nonexistent\" -DCMH_REL_LIBDIR=\"../lib\" -DCMH_REL_PYDIR=\"../share/cumemhist/python\" -DCMH_SOVERSION=\"0\"
    -Iinclude -Isnapshot -Ianalyzer -Icli -Iviz $(pc --cflags)"
key=$( (echo "$CFLAGS"; clang --version; cat include/*/*.h snapshot/*.[ch] analyzer/*.[ch] cli/*.[ch] viz/*.[ch] viz/view/*) | cksum | cut -d' ' -f1)
obj=$out/obj-$key
mkdir -p "$obj"
for d in "$out"/obj-*; do [ "$d" = "$obj" ] || rm -rf "$d"; done # objects of sources since changed
# shellcheck disable=SC2086
printf '%s\n' $SRC | CFLAGS=$CFLAGS OBJ=$obj xargs -P "$(nproc)" -I{} sh -c '
    o="$OBJ/$(echo "$1" | tr / _).o"
    [ -e "$o" ] && exit 0
    # shellcheck disable=SC2086
    clang $CFLAGS -fsanitize=fuzzer-no-link -c "$1" -o "$o.$$" && mv -f "$o.$$" "$o"' sh {}
OBJS=
for f in $SRC; do OBJS="$OBJS $obj/$(echo "$f" | tr / _).o"; done
# shellcheck disable=SC2086
clang $CFLAGS -fsanitize=fuzzer "tests/fuzz/fuzz_$target.c" $OBJS $(pc --libs) $LIBS -o "$out/fuzz_$target"
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
case $target in
pickle) cp ../shared/fixtures/pytorch/*.pickle tests/fixtures/h200*/*.pickle tests/fixtures/fuzz/*.pickle "$out/seeds-$target/" 2>/dev/null || true ;;
cmh)
    cp tests/fixtures/h200*/*.cmh tests/fixtures/fuzz/*.cmh "$out/seeds-$target/" # (what fuzzing found before, replayed first)
    # a version-2 file: a recording with PyTorch's part
    [ -x build/cumemhist ] && build/cumemhist merge -o "$out/seeds-$target/merged.cmh" tests/fixtures/h200/torch_exp.cmh \
        tests/fixtures/h200/torch_exp.pickle 2>/dev/null || true
    ;;
flight | live)
    # real records: the deaths test's program killed after 150 entries, with and without stacks
    [ -x build/tests/dies ] && [ -e build/libcumemhist.so ] || { echo "fuzz.sh: build first (cmake --build build)" >&2; exit 2; }
    cc -O1 -Isnapshot tests/fuzz/flight_seed.c -o "$out/flight_seed-$target"
    cp tests/fixtures/fuzz/*.flight tests/fixtures/flight/*.flight "$out/seeds-$target/" 2>/dev/null || true
    for ctx in none alloc all; do
        rm -f "$out/seed-$target-$ctx.cmh"*
        env LD_LIBRARY_PATH="$PWD/build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            LD_PRELOAD="$PWD/build/libcumemhist.so" CUMEMHIST_CONTEXT=$ctx CUMEMHIST_OUTPUT="$out/seed-$target-$ctx.cmh" \
            build/tests/dies kill 2>/dev/null || true
        "$out/flight_seed-$target" "$out/seed-$target-$ctx.cmh.flight" "$out/seeds-$target/killed-$ctx.flight"
        rm -f "$out/seed-$target-$ctx.cmh"*
    done
    # and allocations with their frees (the tiny free records of version 6, context none)
    rm -f "$out/seed-$target-pairs.cmh"*
    env LD_LIBRARY_PATH="$PWD/build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="$PWD/build/libcumemhist.so" \
        CUMEMHIST_CONTEXT=none CUMEMHIST_OUTPUT="$out/seed-$target-pairs.cmh" build/tests/pairs_die 60 kill 2>/dev/null || true
    "$out/flight_seed-$target" "$out/seed-$target-pairs.cmh.flight" "$out/seeds-$target/killed-pairs.flight"
    rm -f "$out/seed-$target-pairs.cmh"*
    ;;
cli)
    # every command with a few of its real options (the first byte picks the table)
    i=0
    for args in "-o\0x.cmh\0--max-entries\0001M\0--\0prog\0a" "--device\0-1\0x.cmh" "--json\0x.cmh" "--top=5\0x.cmh" \
        "--device=1\0--json\0x.cmh" "--bins\0004\0x.cmh" "-o\0y.cmh\0x.cmh.flight" "a\0b\0--\0-c"; do
        for c in 0 1 2 3 4 5 6 7 8 9 10 11 12; do
            printf "\\$(printf %03o $c)$args" >"$out/seeds-$target/seed-$i"
            i=$((i + 1))
        done
    done
    ;;
esac
cd "$out"
exec "./fuzz_$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    -print_final_stats=1 -close_fd_mask=3 "corpus-$target" "seeds-$target"
