#!/bin/sh
# deps.sh - install the Debian packages cumemhist builds against, if any is missing.
# python3-msgpack: scripts/cmh_inspect.py, the GPU check's .cmh reader (tests/inspect_test.sh).
# golang-go: `go tool pprof` reads our pprof exports back in tests/facts_test.py (skipped without it).
# libncurses-dev, libmicrohttpd-dev: `top` and `exporter`; prometheus (promtool with it), tmux:
# tests/prometheus_test.sh and tests/live_test.sh drive them.
# chromium, nodejs, npm: the viewer's test drives its page in Chromium with playwright-core (npm, into a cache).
# python3-torch: Debian's PyTorch 1.13 (CPU) for tests/torch_cpu_test.sh, the start-up hook against a
# real, older torch.  It is big: with its dependencies about 630 MB installed (168 packages).
# The CUDA toolkit itself (headers, stub driver, CUPTI) is expected at /usr/local/cuda.
set -eu
need=""
for p in cmake gcc g++ make pkg-config libunwind-dev libmsgpack-dev libcunit1-dev libdw-dev zlib1g-dev libsqlite3-dev python3 python3-msgpack clang man-db dpkg-dev golang-go libncurses-dev libmicrohttpd-dev prometheus tmux chromium python3-torch; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
# node and npm by command: a machine may have them from another source (NodeSource's nodejs
# carries npm, and Debian's npm package then cannot be installed beside it)
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"
if [ -n "$need" ]; then
    echo "cumemhist: installing$need" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ]; then
    echo "cumemhist: the CUDA toolkit was not found at ${CUDA_HOME:-/usr/local/cuda} (set CUDA_HOME)" >&2
    exit 1
fi
