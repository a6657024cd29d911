#!/bin/sh
# unwind_test.sh BUILD_DIR SOURCE_DIR - the recorder's own stack walk (recorder/unwind.c) gives
# libunwind's stacks.  tests/unwind_prog.c, built with frame pointers and without, allocates
# 20 deep, through a library without frame pointers (one that keeps a number in %rbp across its
# call back into the program), from qsort's comparator, in 4 threads, in signal handlers (the
# thread's stack and a sigaltstack) and under a function with no unwind entry.
#  1. CUMEMHIST_UNWINDER=check walks every stack both ways: none may differ, the walk must have
#     answered for all but the 6 stacks it cannot (2 signal handlers, the function without an
#     unwind entry; alloc and free each), and those must have gone to libunwind.  Many of the
#     walk's answers are remembered walks (the twins, and the rbp twins, make two stacks start at
#     the same %rsp and differ in one return address, or only in a saved %rbp).
#  2. The recorded histories of CUMEMHIST_UNWINDER=fast (the default) and =libunwind name the
#     same stacks, entry for entry (threads interleave: compared as a multiset).
# A walk that trusted %rbp without the unwind tables fails 1 (tried: 400 stacks differ); so does a
# remembered walk taken without comparing the words it read (tried: 411 differ), and one that
# compares the return addresses but not the saved %rbp a CFA was taken from (tried: 40 differ).
TEST=unwind . "$(dirname "$0")/testlib.sh"
LIB="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" # a sanitizer's runtime first, as ctest gives it
ROUNDS=20
for v in fp nofp; do
    P=$B/tests/unwind_prog_$v
    CUMEMHIST_CONTEXT=all CUMEMHIST_UNWINDER=check CUMEMHIST_OUTPUT=$T/check_$v.cmh LD_PRELOAD=$LIB "$P" $ROUNDS >out_$v.txt 2>err_$v.txt
    rc=$?
    line=$(grep 'unwind check:.*stacks,' err_$v.txt)
    set -- $(echo "$line" | sed -n 's/.*check: \([0-9]*\) stacks, \([0-9]*\) walked, \([0-9]*\) fell back, \([0-9]*\) differed; \([0-9]*\) walks remembered/\1 \2 \3 \4 \5/p') 0 0 0 1 0
    all=$1 walked=$2 fell=$3 differed=$4 remembered=$5
    check "$v: check mode ran ($line), rc $rc" '[ $rc -eq 0 ] && [ "$all" -ge 800 ]'
    check "$v: the rbp twins start their walks at the same %rsp ($(grep 'rbp twins' out_$v.txt))" 'grep -q "rbp twins: the same start" out_$v.txt'
    check "$v: no stack differs from libunwind's, $remembered of them remembered walks ($differed differed; $(grep -m1 'differ (' err_$v.txt | cut -c1-200))" \
        '[ "$differed" -eq 0 ] && [ "$remembered" -ge 100 ]'
    check "$v: the walk answered for all but the signal handlers and the frame without unwind entry ($walked of $all; $fell to libunwind)" \
        '[ "$fell" -eq 6 ] && [ $((walked + fell)) -eq "$all" ]'
    for u in fast libunwind; do
        CUMEMHIST_CONTEXT=all CUMEMHIST_UNWINDER=$u CUMEMHIST_OUTPUT=$T/${u}_$v.cmh LD_PRELOAD=$LIB "$P" $ROUNDS >/dev/null 2>&1
        env -u LD_PRELOAD "$CMH" export -o ${u}_$v.json ${u}_$v.cmh 2>/dev/null
    done
    check "$v: the default walk and libunwind record the same stacks, entry for entry" "py - fast_$v.json libunwind_$v.json <<'PY'
import json, re, sys
from collections import Counter
def load(p):
    d = json.load(open(p))
    fr, st = d['frames'], d['stacks']
    # a frame's name, or its module for a PC without one (the address moves between runs)
    nm = lambda f: f['name'] if f['name'] and not re.match(r'0x[0-9a-f]+', f['name']) else '?' + f['filename']
    return Counter((e['action'], tuple(nm(fr[i]) for i in st[e['stack']])) for t in d['device_traces'] for e in t)
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sum(a.values()) >= 800 and a == b, (sum(a.values()), sum(b.values()), list((a - b).items())[:2], list((b - a).items())[:2])
deep = [k for k in a if k[1][:3] == ('alloc_free', 'deep', 'deep')]
assert any(len(k[1]) >= 22 for k in deep), 'no 20-deep stack'
assert any('mid_clobber' in k[1] and 'through_mid' in k[1] for k in a), 'no stack through the library'
PY"
done
finish
