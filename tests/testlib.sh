# testlib.sh - what the shell tests share.  A test named NAME, called as `NAME_test.sh BUILD_DIR
# SOURCE_DIR`, sources it with `TEST=NAME . "$(dirname "$0")/testlib.sh"` and gets B, SRC, CMH,
# F (the fixtures), T (a temporary directory, removed at exit, made current), the fake driver
# on the library path, a runtime directory of its own ($XDG_RUNTIME_DIR), and ok / bad / check / py /
# wait_until / finish.
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
SRC=$(cd "${2:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
CMH=$B/cumemhist
F=$SRC/tests/fixtures
T=$(mktemp -d "/tmp/cmh-${TEST:-test}-XXXXXX")
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the recorded processes' registry (top, snapshot, exporter) is the test's own, not the user's
export XDG_RUNTIME_DIR=$T/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
# (the registry stands apart from XDG_RUNTIME_DIR: said outright, for the recorder and the readers alike)
export CUMEMHIST_REGISTRY=$XDG_RUNTIME_DIR/cumemhist
# ThreadSanitizer (a CMH_TSAN build; other builds read none of this): each process's reports go to
# $T/tsan.PID, and finish() fails the test on any, printed, since most of the programs' stderr
# is thrown away or compared here.  A hardware fault is left to the program and the recorder:
# the runtime's own handler would report it and exit 66 where these tests check the death.  In
# a TSan build, the options scripts/test.sh gives its TSan step are the defaults, so that a test
# run alone (ctest -R NAME in build-tsan) runs as there: a forked child's first allocation
# starts the recorder's helper thread, which the runtime kills in a child of a process with
# threads unless die_after_fork=0; its lock-order checker cannot follow 65 device locks held at
# once; libunwind stays out (fast-glibc: its per-thread caches and the runtime do not get along
# at thread exit).
if grep -q '^CMH_TSAN:BOOL=ON' "$B/CMakeCache.txt" 2>/dev/null; then
    TSAN_OPTIONS="die_after_fork=0 detect_deadlocks=0 ${TSAN_OPTIONS:-}"
    export CUMEMHIST_UNWINDER=${CUMEMHIST_UNWINDER:-fast-glibc}
fi
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }log_path=$T/tsan handle_segv=0 handle_sigbus=0 handle_sigfpe=0"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; failed="${failed:-}  FAIL: $1
"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
py() { env -u LD_PRELOAD python3 "$@"; } # (a sanitizer runtime preloaded into python would abort it)
# ps without the sanitizer's runtime: preloaded into ps (procps-ng 4, linked with libgpg-error
# through libsystemd), the runtime's first malloc came inside libgpg-error's constructor's
# bindtextdomain, with glibc's _nl_state_lock write-held; the runtime's lazy start (dlerror ->
# dcgettext) took and released that lock again, leaving it broken, and ps's own textdomain()
# then waited on it for ever (livewatch stalled there, after its first five checks)
ps() { env -u LD_PRELOAD ps "$@"; }
# wait_until SECONDS CONDITION: CONDITION (a command line, eval'd) tried every 0.1 s until it holds
# (0) or about SECONDS have passed (1).  What a test waits for, not a guess of how long it takes: a
# sanitizer build on a loaded machine takes many times longer, and its quick runs wait no longer
# than they must.  SECONDS is a bound for a stuck test, well above what a loaded machine needs.
wait_until() {
    _wu=$(($1 * 10))
    until eval "$2"; do
        [ $_wu -gt 0 ] || return 1
        sleep 0.1
        _wu=$((_wu - 1))
    done
}
finish() {
    for _r in "$T"/tsan.*; do
        [ -e "$_r" ] || continue
        bad "ThreadSanitizer in pid ${_r##*.}: $(grep -m1 ThreadSanitizer "$_r")"
        cat "$_r"
    done
    # the failures again, last: a log cut in its middle (CI shows a head and a tail) still names them
    [ "$fail" -eq 0 ] || printf 'failed here:\n%s' "$failed"
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
cd "$T" || exit 1
