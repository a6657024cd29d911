# testlib.sh - what the shell tests share.  A test named NAME, called as `NAME_test.sh BUILD_DIR
# SOURCE_DIR`, sources it with `TEST=NAME . "$(dirname "$0")/testlib.sh"` and gets B, SRC, CMH,
# F (the fixtures), T (a temporary directory, removed at exit, made current), the fake driver
# on the library path, a runtime directory of its own ($XDG_RUNTIME_DIR), and ok / bad / check / py / finish.
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
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
py() { env -u LD_PRELOAD python3 "$@"; } # (a sanitizer runtime preloaded into python would abort it)
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
cd "$T" || exit 1
