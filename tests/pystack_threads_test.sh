#!/bin/sh
# pystack_threads_test.sh BUILD_DIR SOURCE_DIR - many Python threads allocating at once through
# ctypes (tests/python/pyalloc.py threads: 4 threads x 200 allocations, each with the GIL released,
# its Python stack read without it) under a plain LD_PRELOAD of the recorder, in `wait` and `held`.  In a ThreadSanitizer or
# AddressSanitizer build (scripts/test.sh; CMH_SAN_LIB names the runtime) the runtime is preloaded
# first into the system Python, so that it watches the recorder's side (Python itself is not
# instrumented; leaks are not looked for, Python keeps its own at exit): any report fails the
# test.  Every allocation has its Python frames, none is refused.
TEST=pystack_threads . "$(dirname "$0")/testlib.sh"
case "${LD_PRELOAD:-}" in *asan* | *ubsan* | *tsan*) echo "skipped: a sanitizer runtime in sh (CMH_SAN_LIB is the way)"; exit 77 ;; esac
PY=/usr/bin/python3
[ -x $PY ] || { echo "skipped: no /usr/bin/python3"; exit 77; }
pre="$B/libcumemhist.so"
[ -n "${CMH_SAN_LIB:-}" ] && pre="$CMH_SAN_LIB $pre"
# libunwind's per-thread caches and TSan's runtime do not get along at thread exit (scripts/test.sh):
# the recorder's own walk, glibc's backtrace() where it gives up
# Each mode in turn: `wait` (the default) and `held` (PyTorch's) both read the frames of a thread
# that released the GIL without it (pystack.c's GIL-free read), as four threads do it at once.
for mode in wait held; do
    env TSAN_OPTIONS="detect_deadlocks=0 halt_on_error=1 die_after_fork=0 exitcode=66" \
        ASAN_OPTIONS="detect_leaks=0 halt_on_error=1" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1" CUMEMHIST_UNWINDER=fast-glibc \
        CUMEMHIST_PYSTACKS=$mode CUMEMHIST_OUTPUT="$T/th.$mode.cmh" LD_PRELOAD="$pre" $PY "$SRC/tests/python/pyalloc.py" "$B/tests/libpycallback.so" threads \
        >out.$mode.txt 2>err.$mode.txt
    rc=$?
    check "$mode: 4 Python threads allocating under the recorder (preload: $pre): rc $rc, no report ($(grep -m1 WARNING err.$mode.txt))" \
        '[ $rc -eq 0 ] && ! grep -q "Sanitizer\|runtime error" err.$mode.txt && [ -s th.$mode.cmh ]'
    env -u LD_PRELOAD "$CMH" export -o th.$mode.json th.$mode.cmh 2>/dev/null
    check "$mode: all 800 allocations with their Python frames, read without the GIL, none refused" \
        'env -u LD_PRELOAD $PY -c "
import json
d = json.load(open(\"th.$mode.json\"))
fr, st = d[\"frames\"], d[\"stacks\"]
bl = [b for s in d[\"segments\"] for b in s[\"blocks\"]]
assert len(bl) == 800, len(bl)
assert all(any(fr[i][\"name\"] == \"worker\" and fr[i][\"filename\"].endswith(\"pyalloc.py\") for i in st[b[\"stack\"]]) for b in bl)
a = d[\"allocator_settings\"]
assert a[\"python_stacks\"] == 800 and a[\"python_stacks_read_without_gil\"] == 800, a
assert a[\"python_stacks_refused_nogil\"] == 0 and a[\"python_stacks_refused_layout\"] == 0, a
"'
done
finish
