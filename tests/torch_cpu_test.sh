#!/bin/sh
# torch_cpu_test.sh BUILD_DIR SOURCE_DIR - Debian's python3-torch (1.13, a CPU build) imported by
# a program under `record` (tests/python/torch_cpu_prog.py): the start-up hook says one line,
# that PyTorch's history is unavailable, and nothing else (no TypeError from a
# _record_memory_history form this version refuses); the driver-level record is intact, with
# the Python line of each allocation before and after the import.
TEST=torch_cpu . "$(dirname "$0")/testlib.sh"
case "${LD_PRELOAD:-}" in *asan* | *ubsan* | *tsan*) echo "skipped: python under a sanitizer runtime"; exit 77 ;; esac
PY=/usr/bin/python3
env -u LD_PRELOAD $PY -c "import torch" 2>/dev/null || { echo "skipped: no torch for $PY (scripts/deps.sh installs python3-torch)"; exit 77; }
PROG=$SRC/tests/python/torch_cpu_prog.py
"$CMH" record -q -o t.cmh -- $PY "$PROG" >out.txt 2>err.txt
rc=$?
check "the program ran (rc $rc: $(cat out.txt))" '[ $rc -eq 0 ] && grep -q "^torch .* cuda False sum 2000" out.txt'
check "one line on stderr: PyTorch's history is unavailable ($(cat err.txt))" \
    '[ "$(wc -l <err.txt)" = 1 ] && grep -q "^cumemhist: this PyTorch has no CUDA: PyTorch.s history is unavailable" err.txt'
"$CMH" leaks t.cmh >leaks.txt 2>&1
a=$(grep -n "# L:before" "$PROG" | cut -d: -f1)
b=$(grep -n "# L:after" "$PROG" | cut -d: -f1)
check "the driver-level record: both allocations, at their Python lines $a and $b" \
    'grep -q "3.0 MiB in 2 blocks" leaks.txt && grep -q "<module> (.*torch_cpu_prog.py:$a)" leaks.txt && grep -q "<module> (.*torch_cpu_prog.py:$b)" leaks.txt'
finish
