#!/bin/sh
# diffmatch_test.sh BUILD_DIR SOURCE_DIR CC CUDA_INCLUDE - `diff` after the usual edit, rebuild and
# record again, and between checkouts: a site is matched by its function, then its file's name, the
# line only telling a function's sites apart.  A one-line shift turned every site into an
# 'X -> 0 B' and '0 B -> X' pair, the one site that changed out of the top 10; a binary rebuilt
# before `symbolize` left the before record without lines; /builds/1111/proj vs /builds/2222/proj
# (or C:\proj vs /home/u/proj) listed every site twice.  And --fail-if-peak-grows: a device that
# cannot be checked (no history) is status 5, not 3 (the "peak grew" status) where the peak fell.
TEST=diffmatch . "$(dirname "$0")/testlib.sh"
CC=${3:-cc}
INC=${4:-/usr/local/cuda/include}
INC=${INC%%;*}

# the program, before and after the fix: the loss log freed each step, and one comment line on
# top, so every line below moves by one; adam_init has two sites (the line tells them apart)
cat >train_before.c <<'C'
#include <cuda.h>
#include <stdlib.h>
#define MiB (1ull << 20)
static CUdeviceptr W[4], M[4], V[4], logs[64];
static int nlog;
static void alloc_weights(void) { for (int i = 0; i < 4; i++) cuMemAlloc(&W[i], 8 * MiB); }
static void adam_init(void)
{
    for (int i = 0; i < 4; i++) cuMemAlloc(&M[i], 4 * MiB);
    for (int i = 0; i < 4; i++) cuMemAlloc(&V[i], 2 * MiB);
}
static CUdeviceptr forward(void) { CUdeviceptr a; cuMemAlloc(&a, 16 * MiB); return a; }
static void log_loss(void) { cuMemAlloc(&logs[nlog++], MiB); }
static void log_flush(void) { while (nlog > 1) cuMemFree(logs[--nlog]); }
int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 6, fixed = FIXED;
    CUdevice d; CUcontext c;
    cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
    alloc_weights();
    adam_init();
    for (int s = 0; s < steps; s++) {
        CUdeviceptr a = forward();
        cuMemFree(a);
        log_loss();
        if (fixed) log_flush();
    }
    return 0;
}
C
{ echo '/* fixed: flush the loss log each step */'; cat train_before.c; } >train_after.c
# (the same file, train.c, edited in place, as a user does)
# (a sanitizer build preloads its runtime into the test's own program too: its leaks at exit,
# which are the program's design, are not what this test reads)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
build() { cp "$1" train.c && "$CC" -g -O0 -DFIXED=$2 -I"$INC" -o train train.c -L"$B/fakecuda" -lcuda 2>cc.log || { cat cc.log; bad "cc $1"; finish; exit 1; }; }
build train_before.c 0
"$CMH" record -q -o before.cmh -- ./train 6 >/dev/null 2>&1 || bad "record before"
"$CMH" symbolize before.cmh -o before.sym.cmh 2>/dev/null || bad "symbolize before"
sleep 1 # (a new binary: another build id and mtime)
build train_after.c 1
"$CMH" record -q -o after.cmh -- ./train 6 >/dev/null 2>&1 || bad "record after"
sites() { sed -n '/^sites that changed most/,/^$/p' "$1" | grep '^  end'; }

"$CMH" diff before.sym.cmh after.cmh >sym.txt 2>sym.err
rc=$?
check "diff after a one-line shift: one site changed, log_loss, its line moved by one ($(sites sym.txt | tr -s ' ' | head -3 | tr '\n' '|'))" \
    "[ $rc -eq 0 ] && [ \$(sites sym.txt | wc -l) -eq 1 ] && sites sym.txt | grep -Eq 'end +6.0 MiB -> 1.0 MiB .* log_loss \(.*/train.c:13 -> 14\)\$'"
check "diff after a one-line shift: no site of an unchanged function listed" "! grep -Eq 'adam_init|alloc_weights|forward' sym.txt"
"$CMH" diff --json before.sym.cmh after.cmh | py -c "
import json, sys
d = json.load(sys.stdin)[0]['sites']
m = {(x['site'] or {}).get('function'): x for x in d}
assert all(x['match'] in ('same', 'moved') for x in d), [(x['key'], x['match']) for x in d]
a = [x for x in d if x['site']['function'] == 'adam_init']
assert len(a) == 2 and all(x['end_before'] == x['end_after'] for x in a), a
assert sorted(x['end_after'] for x in a) == [8 << 20, 16 << 20], a
assert all(x['site_after']['line'] == x['site']['line'] + 1 for x in a), a
assert m['log_loss']['end_before'] == 6 << 20 and m['log_loss']['end_after'] == 1 << 20 and m['log_loss']['match'] == 'moved', m['log_loss']
" 2>json.err
check "diff --json: adam_init's two sites each matched to its own moved line ($(tail -1 json.err))" "[ $? -eq 0 ]"

# rebuilt without symbolize: the before record has no lines; matched by function name, and said
"$CMH" diff before.cmh after.cmh >nosym.txt 2>nosym.err
rc=$?
check "diff with the before binary rebuilt: says its lines are lost and what to do ($(grep diff: nosym.err))" \
    "grep -q '^cumemhist: diff: before.cmh: its sites have no lines (the binary was rebuilt after it was recorded): they are matched to after.cmh.s by function name; to keep the lines, run .cumemhist symbolize before.cmh. before rebuilding' nosym.err"
check "diff with the before binary rebuilt: sites matched by function, only log_loss listed ($(sites nosym.txt | tr -s ' ' | head -3 | tr '\n' '|'))" \
    "[ $rc -eq 0 ] && [ \$(sites nosym.txt | wc -l) -eq 1 ] && sites nosym.txt | grep -Eq 'end +6.0 MiB -> 1.0 MiB .* log_loss \(.*/train.c:14\)\$'"

# the same code in two checkouts, and on Windows and Linux: no site changed
cat >gen.py <<'PY'
import pickle, sys
MiB = 1 << 20
def F(fn, line, name): return {'filename': fn, 'line': line, 'name': name}
def snap(out, proj, sep, leak, dev1=False):
    tr, segs, nxt = [], [], [0x7f0000000000]
    def alloc(size, line, name):
        fr = [F(proj + sep + 'model.py', line, name), F(proj + sep + 'train.py', 88, 'main')]
        a = nxt[0]; nxt[0] += 0x10000000
        tr.append(dict(action='segment_alloc', addr=a, size=size, stream=0, frames=fr))
        tr.append(dict(action='alloc', addr=a, size=size, stream=0, frames=fr))
        g = dict(device=0, address=a, total_size=size, allocated_size=size, active_size=size, requested_size=size, stream=0,
                 segment_type='large', segment_pool_id=(0, 0), is_expandable=False, frames=fr,
                 blocks=[dict(address=a, size=size, requested_size=size, state='active_allocated', frames=fr)])
        segs.append(g); return g
    def free(g):
        for act in ('free_requested', 'free_completed'):
            tr.append(dict(action=act, addr=g['address'], size=g['total_size'], stream=0, frames=g['frames']))
        g.update(allocated_size=0, active_size=0, requested_size=0)
        g['blocks'][0].update(state='inactive', requested_size=0, frames=[])
    alloc(12 * MiB, 12, '__init__')
    alloc(leak * MiB, 44, 'cache')
    for i in range(4):
        x = alloc(6 * MiB, 40, 'forward'); y = alloc(2 * MiB, 41, 'forward')
        free(x); free(y)
    if dev1:  # a device with segments but no trace (history off there): its peak is not known
        fr = [F(proj + sep + 'shard.py', 70, 'shard')]
        segs.append(dict(device=1, address=1 << 44, total_size=30 * MiB, allocated_size=30 * MiB, active_size=30 * MiB,
                         requested_size=30 * MiB, stream=0, segment_type='large', segment_pool_id=(0, 0), is_expandable=False,
                         frames=fr, blocks=[dict(address=1 << 44, size=30 * MiB, requested_size=30 * MiB, state='active_allocated', frames=fr)]))
    pickle.dump({'segments': segs, 'device_traces': [tr, []] if dev1 else [tr]}, open(out, 'wb'), protocol=4)
snap('ci_1111.pickle', '/builds/1111/proj', '/', 3)
snap('ci_2222.pickle', '/builds/2222/proj', '/', 3)
snap('win.pickle', 'C:\\proj', '\\', 3)
snap('linux.pickle', '/home/u/proj', '/', 3)
snap('linux_more.pickle', '/home/u/proj', '/', 7)
snap('two_before.pickle', '/p', '/', 8, True)
snap('two_after.pickle', '/p', '/', 1, True)
snap('two_grown.pickle', '/p', '/', 30, True)
PY
py gen.py || bad "gen.py"
"$CMH" diff ci_1111.pickle ci_2222.pickle >ci.txt 2>&1
check "diff of the same code in two CI checkouts: no site changed ($(sites ci.txt | wc -l) listed)" \
    "grep -q 'no site.s live bytes changed' ci.txt && ! grep -q '/builds/' ci.txt"
"$CMH" diff win.pickle linux.pickle >wl.txt 2>&1
check "diff of a Windows snapshot and a Linux one of the same code: no site changed" "grep -q 'no site.s live bytes changed' wl.txt"
"$CMH" diff win.pickle linux_more.pickle >wl2.txt 2>&1
check "diff Windows vs Linux: the one site that grew, once, by its Linux path ($(sites wl2.txt | tr -s ' ' | tr '\n' '|'))" \
    "[ \$(sites wl2.txt | wc -l) -eq 1 ] && sites wl2.txt | grep -Eq 'end +3.0 MiB -> 7.0 MiB .* cache \(/home/u/proj/model.py:44\)\$'"
"$CMH" diff --group-by file ci_1111.pickle ci_2222.pickle >cif.txt 2>&1
check "diff --group-by file of two checkouts: no file changed" "grep -q 'no site.s live bytes changed' cif.txt"

# --fail-if-peak-grows: device 0's peak fell, device 1 has no history: not 'grew' (3) but 'could not check' (5)
"$CMH" diff two_before.pickle two_after.pickle --fail-if-peak-grows 5 >g.txt 2>g.err
rc=$?
check "diff --fail-if-peak-grows, peak fell on device 0, device 1 not known: status 5, says which ($rc: $(cat g.err))" \
    "[ $rc -eq 5 ] && grep -q 'cannot be checked on device 1: a peak is not known' g.err && grep -q 'checked on device 0: no growth over the limit' g.err && grep -q '^peak allocated shrank' g.txt"
"$CMH" diff two_before.pickle two_grown.pickle --fail-if-peak-grows 5 >/dev/null 2>g2.err
rc=$?
check "diff --fail-if-peak-grows, peak grew on device 0, device 1 not known: status 3 ($rc)" \
    "[ $rc -eq 3 ] && grep -q 'checked on device 0: the peak grew' g2.err"
"$CMH" diff two_before.pickle two_after.pickle --fail-if-peak-grows 5 --device 0 >/dev/null 2>&1
check "diff --fail-if-peak-grows --device 0 (the device with a history): status 0" "[ $? -eq 0 ]"
# two distinct sites of one function, each record having one of them (a parent's main:13 and its
# forked child's main:19, one binary): 'main (sites.c:13 -> 19)' paired them as one site moved.
# One binary's two lines are two sites; across a rebuild, a site is paired across lines only by a
# shift that explains the function's sites (the nearest line is no evidence: site B is new here)
cat >sites_before.c <<'C'
#include <cuda.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "AC";
    CUdevice d; CUcontext c; CUdeviceptr p;
    cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
    if (strchr(which, 'A')) cuMemAlloc(&p, 3 << 20); /* site A */
    if (strchr(which, 'B')) cuMemAlloc(&p, 5 << 20); /* site B */
    if (strchr(which, 'C')) cuMemAlloc(&p, 7 << 20); /* site C */
    return 0;
}
C
cp sites_before.c sites.c && "$CC" -g -O0 -I"$INC" -o sites sites.c -L"$B/fakecuda" -lcuda 2>cc.log || bad "cc sites_before.c"
"$CMH" record -q -o sa.cmh -- ./sites A >/dev/null 2>&1 || bad "record sites A"
"$CMH" record -q -o sc.cmh -- ./sites C >/dev/null 2>&1 || bad "record sites C"
"$CMH" record -q -o sac.cmh -- ./sites AC >/dev/null 2>&1 || bad "record sites AC"
for f in sa sc sac; do "$CMH" symbolize $f.cmh -o $f.s.cmh 2>/dev/null || bad "symbolize $f"; done
sleep 1 # (a new binary: another build id and mtime)
{ printf '/* three\n * lines\n * more */\n'; cat sites_before.c; } >sites_after.c
cp sites_after.c sites.c && "$CC" -g -O0 -I"$INC" -o sites sites.c -L"$B/fakecuda" -lcuda 2>cc.log || bad "cc sites_after.c"
"$CMH" record -q -o sb2.cmh -- ./sites B >/dev/null 2>&1 || bad "record sites B (rebuilt)"
"$CMH" record -q -o sac2.cmh -- ./sites AC >/dev/null 2>&1 || bad "record sites AC (rebuilt)"
"$CMH" diff sa.s.cmh sc.s.cmh >one.txt 2>&1
check "diff of one binary's two runs, each at another site of main: two sites, none paired across lines ($(sites one.txt | tr -s ' ' | tr '\n' '|'))" \
    "[ \$(sites one.txt | wc -l) -eq 2 ] && ! grep -Eq ':[0-9]+ -> [0-9]+\)\$' one.txt && sites one.txt | grep -Eq 'end +3.0 MiB -> 0 B .* main \(.*sites.c:9\)\$' && sites one.txt | grep -Eq 'end +0 B -> 7.0 MiB .* main \(.*sites.c:11\)\$'"
"$CMH" diff sac.s.cmh sb2.cmh >new.txt 2>&1
check "diff across a rebuild (three lines added above): site B is new, not A or C moved ($(sites new.txt | tr -s ' ' | tr '\n' '|'))" \
    "[ \$(sites new.txt | wc -l) -eq 3 ] && ! grep -Eq ':[0-9]+ -> [0-9]+\)\$' new.txt && sites new.txt | grep -Eq 'end +0 B -> 5.0 MiB .* main \(.*sites.c:13\)\$'"
"$CMH" diff sac.s.cmh sac2.cmh >moved.txt 2>&1
"$CMH" diff --json sac.s.cmh sac2.cmh | py -c "
import json, sys
d = json.load(sys.stdin)[0]['sites']
assert len(d) == 2 and all(x['match'] == 'moved' and x['site_after']['line'] == x['site']['line'] + 3 for x in d), d
" 2>moved.err
check "diff across a rebuild of the same runs: A and C each matched to its own line moved by three ($(tail -1 moved.err))" "[ \$? -eq 0 ] && grep -q 'no site.s live bytes changed' moved.txt"
"$CMH" diff --help >help.txt 2>&1
check "diff --help documents status 5" "grep -q 'else 5 if a device could not be checked' help.txt"
finish
