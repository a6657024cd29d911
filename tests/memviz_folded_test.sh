#!/bin/sh
# memviz_folded_test.sh BUILD_DIR FIXTURES_DIR - `cumemhist flamegraph --memviz memory|segments`
# is byte for byte the folded text PyTorch's torch/cuda/_memory_viz.py `memory` / `segments`
# hands flamegraph.pl, on every PyTorch fixture.  The reference: the real script when one is at
# hand (CMH_MEMORY_VIZ=path/to/_memory_viz.py, or an installed torch whose script has the
# frames of blocks, 2.1 on: Debian's torch 1.13 has not), run with flamegraph.pl left out; and
# always the SHA-256 of what the script (pytorch 40998ddc) printed for each fixture
# (tests/fixtures/memviz_folded.sha256; 12 MB of text, not kept).  Also: the byte sum is the
# segments' total, and a hand-made pickle's Windows path, NUL and filtered frames come out as the
# script writes them.
set -u
B=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
F=$2
D=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/cmh-mvfold-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# the real script, when there is one that reads today's snapshots
REF=${CMH_MEMORY_VIZ:-}
if [ -z "$REF" ]; then
    REF=$(env -u LD_PRELOAD python3 -c "import torch.cuda._memory_viz as m; assert hasattr(m, '_frame_filter'); print(m.__file__)" 2>/dev/null)
fi
[ -n "$REF" ] || echo "note: no _memory_viz.py of PyTorch >= 2.1 here (CMH_MEMORY_VIZ=path sets one): compared with the recorded SHA-256 only"
ref() { # KIND PICKLE: the script's folded text, flamegraph.pl left out
    env -u LD_PRELOAD python3 - "$REF" "$1" "$2" <<'PY'
import importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("memviz_ref", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
data = pickle.load(open(sys.argv[3], "rb"))
if isinstance(data, list):
    data = {"segments": data, "traces": []}
sys.stdout.buffer.write(getattr(m, sys.argv[2])(data, format_flamegraph=lambda s: s).encode("utf-8", "surrogateescape"))
PY
}
if [ -n "$F" ] && [ -d "$F" ]; then
    for f in "$F"/*.pickle; do
        n=$(basename "$f" .pickle)
        for k in memory segments; do
            "$B/cumemhist" flamegraph --memviz $k "$f" >"$T/ours" 2>"$T/err" || { bad "$n $k: $(cat "$T/err")"; continue; }
            want=$(grep " $n.$k\$" "$D/fixtures/memviz_folded.sha256" | cut -d' ' -f1)
            got=$(sha256sum <"$T/ours" | cut -d' ' -f1)
            if [ -z "$want" ]; then bad "$n.$k: no recorded SHA-256 in tests/fixtures/memviz_folded.sha256"
            elif [ "$got" = "$want" ]; then ok; else bad "$n $k: not the script's text (SHA-256 $got, the script's $want; $(wc -l <"$T/ours") lines)"; fi
            if [ -n "$REF" ]; then
                ref $k "$f" >"$T/want" 2>"$T/referr" || { bad "$n $k: the script failed: $(tail -1 "$T/referr")"; continue; }
                if cmp -s "$T/ours" "$T/want"; then ok; else bad "$n $k: differs from $REF"; diff "$T/ours" "$T/want" | head -4 | cut -c1-300; fi
            fi
        done
        # the blocks tile their segments: the counts sum to what is reserved
        "$B/cumemhist" flamegraph --memviz segments "$f" 2>/dev/null | env -u LD_PRELOAD python3 -c "
import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
segs = d if isinstance(d, list) else d['segments']
got = sum(int(l.rsplit(b' ', 1)[1]) for l in sys.stdin.buffer.read().split(b'\n') if l)
assert got == sum(s['total_size'] for s in segs), (got, sum(s['total_size'] for s in segs))
" "$f" && ok || bad "$n: the folded bytes are not the segments' total"
    done
else
    echo "note: no PyTorch fixtures (../shared/fixtures/pytorch): those skipped"
fi
# a hand-made snapshot: a Windows path (the script cuts at '/' only), a NUL in a C++ name, frames
# the script filters, a block with no frames, a gap, two streams
env -u LD_PRELOAD python3 - "$T/hand.pickle" <<'PY'
import pickle, sys
M = 1 << 20
fr = [{"name": "at::empty\x00x", "filename": "", "line": 0},
      {"name": "PyEval_EvalFrame", "filename": "ceval.c", "line": 7},
      {"name": "step", "filename": "C:\\Users\\x\\train.py", "line": 12},
      {"name": "main", "filename": "/home/u/a;b/run.py", "line": 3}]
blocks = [{"address": 1 << 30, "size": 2 * M, "requested_size": M + 5, "state": "active_allocated", "frames": fr},
          {"address": (1 << 30) + 2 * M, "size": 2 * M, "requested_size": 0, "state": "inactive", "frames": []}]
segs = [{"device": 0, "address": 1 << 30, "total_size": 4 * M, "stream": 0, "blocks": blocks},
        {"device": 1, "address": 1 << 31, "total_size": M, "stream": 7,
         "blocks": [{"address": 1 << 31, "size": M, "requested_size": M, "state": "active_pending_free", "frames": fr[2:]}]}]
pickle.dump({"segments": segs, "device_traces": [[], []]}, open(sys.argv[1], "wb"), protocol=4)
PY
printf '%s\n' \
    'stream_0;seg_1073741824;active_allocated;run.py:3:main;C:\Users\x\train.py:12:step;:0:at::empty@x 1048581' \
    'stream_0;seg_1073741824;active_allocated;<gaps> 1048571' \
    'stream_0;seg_1073741824;inactive;<non-python> 0' \
    'stream_0;seg_1073741824;inactive;<gaps> 2097152' \
    'stream_7;seg_2147483648;active_pending_free;run.py:3:main;C:\Users\x\train.py:12:step 1048576' | tr '@' '\000' >"$T/hand.want"
"$B/cumemhist" flamegraph --memviz segments "$T/hand.pickle" >"$T/hand.ours" 2>"$T/err"
if cmp -s "$T/hand.ours" "$T/hand.want"; then ok; else bad "hand-made snapshot: $(cat "$T/err")"; diff "$T/hand.ours" "$T/hand.want" | cat -v | head; fi
if [ -n "$REF" ]; then
    ref segments "$T/hand.pickle" >"$T/hand.ref" && cmp -s "$T/hand.ref" "$T/hand.want" && ok || bad "hand-made: the expected text is not $REF's"
fi
# one device alone, and what --memviz refuses
"$B/cumemhist" flamegraph --memviz memory --device 1 "$T/hand.pickle" 2>/dev/null | grep -q '^stream_7;active_pending_free;run.py:3:main' &&
    [ "$("$B/cumemhist" flamegraph --memviz memory --device 1 "$T/hand.pickle" 2>/dev/null | wc -l)" -eq 1 ] && ok || bad "--device 1"
"$B/cumemhist" flamegraph --memviz memory --at peak "$T/hand.pickle" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--memviz with --at is not refused"
# --at end is what --memviz writes: taken, the same lines (a newcomer's trial: it was refused)
"$B/cumemhist" flamegraph --memviz memory --at end "$T/hand.pickle" >"$T/at_end.txt" 2>/dev/null &&
    "$B/cumemhist" flamegraph --memviz memory "$T/hand.pickle" 2>/dev/null | cmp -s - "$T/at_end.txt" && ok || bad "--memviz --at end is refused or differs"
"$B/cumemhist" flamegraph --memviz tree "$T/hand.pickle" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--memviz tree is not refused"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
