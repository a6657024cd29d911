#!/bin/sh
# pystack_threads_test.sh BUILD_DIR SOURCE_DIR - many Python threads allocating at once through
# ctypes (tests/python/pyalloc.py threads: 4 threads x 200 allocations, each taking the GIL back
# for its Python stack) under a plain LD_PRELOAD of the recorder.  In a ThreadSanitizer or
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
env TSAN_OPTIONS="detect_deadlocks=0 halt_on_error=1 die_after_fork=0 exitcode=66" \
    ASAN_OPTIONS="detect_leaks=0 halt_on_error=1" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1" CUMEMHIST_UNWINDER=fast-glibc \
    CUMEMHIST_OUTPUT="$T/th.cmh" LD_PRELOAD="$pre" $PY "$SRC/tests/python/pyalloc.py" "$B/tests/libpycallback.so" threads \
    >out.txt 2>err.txt
rc=$?
check "4 Python threads allocating under the recorder (preload: $pre): rc $rc, no report ($(grep -m1 WARNING err.txt))" \
    '[ $rc -eq 0 ] && ! grep -q "Sanitizer\|runtime error" err.txt && [ -s th.cmh ]'
env -u LD_PRELOAD "$CMH" export -o th.json th.cmh 2>/dev/null
check "all 800 allocations with their Python frames, none refused" \
    'env -u LD_PRELOAD $PY -c "
import json
d = json.load(open(\"th.json\"))
fr, st = d[\"frames\"], d[\"stacks\"]
bl = [b for s in d[\"segments\"] for b in s[\"blocks\"]]
assert len(bl) == 800, len(bl)
assert all(any(fr[i][\"name\"] == \"worker\" and fr[i][\"filename\"].endswith(\"pyalloc.py\") for i in st[b[\"stack\"]]) for b in bl)
s = json.dumps(d[\"allocator_settings\"])
assert \"\\\"python_stacks\\\": 800\" in s and \"\\\"python_stacks_refused_nogil\\\": 0\" in s, s[-300:]
"'
finish
