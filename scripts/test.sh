#!/bin/sh
# test.sh - install, build and run the whole test suite: once in a plain build, once under
# AddressSanitizer + UndefinedBehaviorSanitizer, the recorder's suites under ThreadSanitizer,
# then a short fuzz run of each reader.  Runs the tests on the fake driver.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
jobs=$(nproc)
# ctest in build dir $1 (the rest: its options); where a test fails, its failed checks are said
# again at the end, where a log cut in its middle (CI keeps a head and a tail) still shows them
suite() {
    _d=$1; shift
    (cd "$_d" && ctest --output-on-failure "$@") && return 0
    echo "the failed checks, again:"
    grep -h -E 'FAIL|FAILED|Assertion|ERROR: AddressSanitizer|runtime error' "$_d"/Testing/Temporary/LastTest*.log | grep -v ' ok: ' | head -80
    return 1
}
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMH_ASSERTS=ON >/dev/null
cmake --build build -j"$jobs" >/dev/null
suite build -j"$jobs"
# The Release build compiles too: -O3's inlining makes GCC's -Warray-bounds see paths -O2 does
# not (pickle_writer.h's copy failed it under -Werror while every tested build passed).
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j"$jobs" >/dev/null
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMH_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
suite build-asan -j"$jobs"
# ThreadSanitizer over the recorder's suites (the threads, the rings, the flight record).  Its
# lock-order checker cannot follow 65 device locks held at once; libunwind's per-thread caches
# and its runtime do not get along at thread exit, so libunwind stays out: the recorder's own walk
# takes the stacks, glibc's backtrace() those it gives up on (fast-glibc).  pystack_threads:
# Python threads reading their Python stacks under the recorder (the runtime preloaded into python3).
# The shell tests of the flight record's cuts, deaths, fork and the live readers run here too (sh
# itself without the runtime; each process's report fails the test: tests/testlib.sh), and
# fork_walk.  hot_flight passes here too but is left out: its 5.7 M recorded pairs take about
# 106 s of CPU under the runtime, twice the rest of this step (ctest -R hot_flight in build-tsan).
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMH_TSAN=ON -DCMH_ASSERTS=ON >/dev/null
cmake --build build-tsan -j"$jobs" --target cumemhist fakecuda test_recorder test_allocators test_faults test_stress test_hot pycallback cumemhist_cli \
    dies ctx_destroy forker live_prog retry_then_oom cut_flight slow_walk fork_walk >/dev/null
TSAN_OPTIONS="detect_deadlocks=0 halt_on_error=1 die_after_fork=0" CUMEMHIST_UNWINDER=fast-glibc \
    suite build-tsan -j"$jobs" -R '^(recorder|allocators|faults|stress|hot|pystack_threads|deaths|fork|live|cutflight|fork_walk)$'
# A fuzz smoke run of each reader and of the option parser (scripts/fuzz.sh runs them longer):
# built first (their objects compiled once for all), then run $jobs at a time, each fuzzer being
# one process on one core; the figures are printed in the same order every time.
mkdir -p build-fuzz
targets="cmh pickle flight live cli"
for t in $targets; do
    FUZZ_BUILD_ONLY=1 sh scripts/fuzz.sh "$t" >build-fuzz/smoke-$t.log 2>&1 || { tail -40 build-fuzz/smoke-$t.log; exit 1; }
done
rm -f build-fuzz/smoke.failed
printf '%s\n' $targets | xargs -P "$jobs" -I{} sh -c \
    'sh scripts/fuzz.sh "$1" "${CMH_FUZZ_SECONDS:-10}" >build-fuzz/smoke-$1.log 2>&1 || echo "$1" >>build-fuzz/smoke.failed' sh {}
for t in $targets; do
    if grep -qx "$t" build-fuzz/smoke.failed 2>/dev/null; then
        rm -f build-fuzz/smoke.failed
        tail -40 build-fuzz/smoke-$t.log
        echo "fuzz $t: failed (build-fuzz/smoke-$t.log)"
        exit 1
    fi
    sed -n "s/^stat::number_of_executed_units: */fuzz $t: executions: /p" build-fuzz/smoke-$t.log
done
