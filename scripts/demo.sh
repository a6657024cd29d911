#!/bin/sh
# demo.sh - install, build, record the leaking sample and print its memory summary.
# Without a GPU the sample runs on the fake driver built in tests/fakecuda.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
if ! ldconfig -p | grep -q 'libcuda.so.1 '; then
    echo "cumemhist: no CUDA driver here; the sample runs on the fake driver (build/fakecuda)" >&2
    export LD_LIBRARY_PATH="$PWD/build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
build/cumemhist record -o build/leaky.cmh -- build/samples/leaky 10
build/cumemhist summary build/leaky.cmh
