#!/bin/sh
# reload_test.sh BUILD_DIR SOURCE_DIR - stacks after a library is unloaded and another mapped at
# its address.  tests/reload_prog.c allocates through libreload_a.so's a_call (which keeps a
# frame pointer) in two threads, closes it, opens libreload_b.so at the same address, and
# allocates through b_call (no frame pointer), whose call returns to the very PC a_call's did.
# Rules or remembered walks kept from A walk B's frame by A's rule: the CFA comes from the
# caller's %rbp and the caller, use_lib, vanishes from the stack (tried without the module
# generation: every 3 MiB stack lacked use_lib, in the recorder's walk and in libunwind's, whose
# per-thread cache is as stale; so check mode saw no difference).  Each unwinder mode must record
#   - B's allocations (3 MiB) as cb, b_call, use_lib, then main or rounds (the worker), in both threads;
#   - A's (1 MiB) as cb, a_call, use_lib, ...: named with A's symbols though B is what is mapped
#     there at the dump (the same PCs, so one stack before the module generation was part of a
#     stack's identity; named b_call then);
#   - under check, no stack differing between the walk and the slow walk.
# Then, closing B too before the exit (both unloaded at one address at the dump), B's stacks
# must still name b_call and A's a_call (before: both named by the first unloaded, A).  With
# two C libraries (reload_clib.c, -g), each frame's file and line must be its own library's,
# B open or closed at the exit (before: A's frames read B's file and line, one Dwfl for both).
TEST=reload . "$(dirname "$0")/testlib.sh"
LIB="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" # a sanitizer's runtime first, as ctest gives it
la=$(grep -n "A's call" "$SRC/tests/reload_clib.c" | cut -d: -f1)
lb=$(grep -n "B's call" "$SRC/tests/reload_clib.c" | cut -d: -f1)
for u in fast check libunwind fast-glibc fast+close fast+c fast+c+close; do
    close=; lib=reload_; case $u in *+close) close=close ;; esac
    case $u in *+c | *+c+*) lib=reload_c ;; esac
    CUMEMHIST_CONTEXT=all CUMEMHIST_UNWINDER=${u%%+*} CUMEMHIST_OUTPUT=$T/$u.cmh LD_PRELOAD=$LIB \
        "$B/tests/reload_prog" "$B/tests/lib${lib}a.so" "$B/tests/lib${lib}b.so" $close >out_$u.txt 2>err_$u.txt
    rc=$?
    check "$u: B was mapped where A was ($(cat out_$u.txt)), rc $rc" '[ $rc -eq 0 ] && grep -q "same address" out_$u.txt'
    env -u LD_PRELOAD "$CMH" export -o $u.json $u.cmh 2>/dev/null
    check "$u: B's allocations name b_call and the frame under it, in both threads; A's a_call" "py - $u.json $lib $la $lb <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
lines = sys.argv[2] == 'reload_c'
fr, st = d['frames'], d['stacks']
seen = {}
for t in d['device_traces']:
    for e in t:
        if e['action'] != 'alloc': continue
        names = tuple(fr[i]['name'] for i in st[e['stack']])
        seen.setdefault(e['size'], set()).add(names)
want = {3 << 20: 100, 1 << 20: 100}
for size, stacks in seen.items():
    for names in stacks:
        lib = 'b_call' if size == 3 << 20 else 'a_call'
        assert names[0] == 'cb' and names[1] == lib and names[2] == 'use_lib' and names[3] in ('main', 'rounds'), (size, names)
    if lines:  # the file and line of the library's frame: its own
        want_line = int(sys.argv[3] if size == 1 << 20 else sys.argv[4])
        for e in (e for t in d['device_traces'] for e in t if e['action'] == 'alloc' and e['size'] == size):
            f = fr[st[e['stack']][1]]
            assert f['filename'].endswith('reload_clib.c') and f['line'] == want_line, (size, f, want_line)
ends = {n[3] for s in seen.values() for n in s}
assert ends == {'main', 'rounds'} and set(seen) == set(want), seen
PY"
    if [ $u = check ]; then
        line=$(grep 'unwind check:.*stacks,' err_$u.txt)
        set -- $(echo "$line" | sed -n 's/.*check: \([0-9]*\) stacks, \([0-9]*\) walked, \([0-9]*\) fell back, \([0-9]*\) differed;.*/\1 \4/p') 0 1
        all=$1 differed=$2
        check "check: no stack differs ($line)" '[ "$all" -ge 200 ] && [ "$differed" -eq 0 ]'
    fi
done
finish
