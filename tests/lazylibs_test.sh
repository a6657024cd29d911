#!/bin/sh
# lazylibs_test.sh BUILD_DIR SOURCE_DIR - the libraries few commands need (SQLite, libdw and what
# it pulls in, libstdc++, zlib, ncurses) are not loaded when the command starts (snapshot/lazylib.h), and
# are loaded, and work, in the commands that use them.  Read from the dynamic loader itself
# (LD_DEBUG=libs), not from timing.
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
S=$(cd "${2:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
T=$(mktemp -d /tmp/cmh-lazylibs-XXXXXX)
trap 'rm -rf "$T"' EXIT
# a registry of its own: `top --once` must not watch whatever else this user is recording (the
# frames of a live process are resolved, which loads libdw, as it should)
export XDG_RUNTIME_DIR=$T/xdg
export CUMEMHIST_REGISTRY=$T/xdg/cumemhist
mkdir -m 700 "$XDG_RUNTIME_DIR"
C=$B/cumemhist
F=$S/tests/fixtures/h200/leaky.cmh      # native frames: reports resolve them (libdw)
P=$S/tests/fixtures/h200/torch_exp.pickle # named frames only: nothing to resolve
pass=0 fail=0
heavy='libsqlite3|libdw|libelf|liblzma|libbz2|libz\.|libncurses|libtinfo'
# libstdc++ too, unless something the executable cannot do without brings it (a sanitizer's
# runtime does: then it is there from the start whatever we do)
ldd "$C" | grep -q 'libstdc++' || heavy="$heavy|libstdc\+\+"
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# nothing of them in the executable's own needs
if readelf -d "$C" | grep NEEDED | grep -Eq "$heavy"; then bad "cumemhist links $(readelf -d "$C" | grep NEEDED | grep -Eo "$heavy[^]]*" | tr '\n' ' ')"; else ok; fi
# nor loaded by the commands that do not use them (a report over native frames resolves them:
# that one loads libdw, below; trace resolves only frames it can, those without a line whose
# binary is on this machine, and leaky's binaries are not: nothing for libdw to do, so it stays
# unloaded, as for a record whose frames all have lines; vmm_phys_test has one whose are)
for c in "--version" "top --once" "summary $F" "stats $F" "trace $F" "leaks $P" "peak $P" "export -f json -o $T/x.json $P"; do
    # shellcheck disable=SC2086
    LD_DEBUG=libs "$C" $c >/dev/null 2>"$T/ld"
    if grep 'calling init' "$T/ld" | grep -Eq "$heavy"; then bad "$c loaded $(grep 'calling init' "$T/ld" | grep -Eo "$heavy[^ ]*" | tr '\n' ' ')"; else ok; fi
done
# and loaded, working, where they are used: each a function call of its library, and its result
use() { # LIB WHAT CMD...
    lib=$1 what=$2
    shift 2
    if LD_DEBUG=libs "$@" >"$T/out" 2>"$T/ld" && grep 'calling init' "$T/ld" | grep -Eq "$lib"; then ok; else bad "$what: $(grep -v '^ *[0-9]*:' "$T/ld" | tail -2)"; fi
}
use libsqlite3 "export -f sqlite" "$C" export -f sqlite -o "$T/x.db" "$F"
if command -v sqlite3 >/dev/null; then
    n=$(sqlite3 "$T/x.db" 'select count(*) from events' 2>/dev/null || echo 0)
    if [ "${n:-0}" -gt 0 ]; then ok; else bad "the SQLite export has no entries ($n)"; fi
fi
use libz "export -f pprof" "$C" export -f pprof -o "$T/x.pprof" "$F"
if [ "$(head -c 2 "$T/x.pprof" | od -An -tx1 | tr -d ' ')" = 1f8b ]; then ok; else bad "the pprof export is not gzip"; fi
use libdw "symbolize" "$C" symbolize -o "$T/s.cmh" "$F"
use libdw "leaks over native frames" "$C" leaks "$F"
echo "lazylibs: $pass passed, $fail failed"
[ $fail -eq 0 ]
