#!/bin/sh
# loadpaths_test.sh BUILD_DIR SOURCE_DIR [PYTORCH_FIXTURES [ours|pytorch]] - every command that
# reads a snapshot prints the same, and exits the same, whether its load takes the shortcuts the
# command asked for (CMH_LOAD_*: `stats` reads a pickle only up to its trace) or reads the whole
# file the generic way (CUMEMHIST_GENERIC_LOAD=1).  On the PyTorch fixtures, our recordings, the
# fuzz regressions, and pickles built to put the trace before the segments, or after them with a
# 'cumemhist' part.  ours: all but the PyTorch fixtures; pytorch: those alone; both when not said
# (ctest runs the two parts as two tests: each run of a command in a sanitizer build pays the
# runtime's start and leak scan, and on a loaded machine the whole took near its time limit).
set -u
usage="usage: $0 BUILD_DIR SOURCE_DIR [PYTORCH_FIXTURES [ours|pytorch]]"
B=$(cd "${1:?$usage}" && pwd)
S=$(cd "${2:?$usage}" && pwd)
P=${3:-}
PART=${4:-all}
case $PART in all | ours | pytorch) ;; *) echo "$usage" >&2; exit 2 ;; esac
ours=1 pytorch=1
[ "$PART" = pytorch ] && ours=0
[ "$PART" = ours ] && pytorch=0
T=$(mktemp -d /tmp/cmh-loadpaths-XXXXXX)
trap 'rm -rf "$T"' EXIT
C=$B/cumemhist
pass=0 fail=0 shortcut=0

files=
if [ $ours = 1 ]; then
    for f in "$S"/tests/fixtures/h200/*.cmh "$S"/tests/fixtures/h200/*.pickle "$S"/tests/fixtures/fuzz/*.cmh "$S"/tests/fixtures/fuzz/*.pickle; do
        [ -f "$f" ] && files="$files $f"
    done
fi
if [ $pytorch = 1 ]; then
    if [ -n "$P" ] && [ -d "$P" ]; then
        for f in "$P"/*.pickle; do files="$files $f"; done
    else
        echo "note: no PyTorch fixtures (../shared/fixtures/pytorch)$([ $ours = 1 ] && echo ': our own files only')"
    fi
fi
if [ $ours = 1 ]; then
    # our recordings as their memory_viz export (a 'cumemhist' part after the trace)
    for n in leaky torch_exp; do
        "$C" export --raw-frames "$S/tests/fixtures/h200/$n.cmh" -o "$T/$n.export.pickle" 2>/dev/null && files="$files $T/$n.export.pickle"
    done
    # the root's keys in other orders, as other writers may put them: trace first; segments last
    if command -v python3 >/dev/null; then
        for f in "$S/tests/fixtures/h200/torch_exp.pickle" "$T/leaky.export.pickle"; do
            [ -f "$f" ] || continue
            b=$(basename "$f" .pickle)
            python3 - "$f" "$T/$b.tracefirst.pickle" "$T/$b.p2.pickle" <<'PY' && files="$files $T/$b.tracefirst.pickle $T/$b.p2.pickle"
import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
first = {k: d[k] for k in ['device_traces'] + [k for k in d if k != 'device_traces']}
open(sys.argv[2], 'wb').write(pickle.dumps(first, protocol=4))
open(sys.argv[3], 'wb').write(pickle.dumps(d, protocol=2))
PY
        done
    fi
fi
[ -n "$files" ] || { echo "loadpaths $PART: no files to read: skipped"; exit 77; }

# every reading command, with the options that change what it reads.  CUMEMHIST_DEBUG_LOAD says on
# stderr what each load kept and which reader took the entries: the checks further down read what
# these runs said of their loads (stats, summary), not runs of their own (a sanitizer build's
# start and exit are most of a run's time)
cmds="summary|peak|leaks|frag|oom|owners|kernels|stats|stats --device 0|stats --json|trace|trace --json|whatif|plot -o -|flamegraph --folded -o -|export -f json -o -|export -f memviz -o -|export -f chrome -o -|report -o -"
n=0
for f in $files; do
    n=$((n + 1))
    IFS='|'
    for c in $cmds; do
        IFS=' '
        # shellcheck disable=SC2086
        CUMEMHIST_DEBUG_LOAD=1 "$C" $c "$f" >"$T/fast" 2>"$T/fast.err"
        rf=$?
        # shellcheck disable=SC2086
        CUMEMHIST_DEBUG_LOAD=1 CUMEMHIST_GENERIC_LOAD=1 "$C" $c "$f" >"$T/slow" 2>"$T/slow.err"
        rs=$?
        if [ $rf -eq $rs ] && cmp -s "$T/fast" "$T/slow"; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL: $c $f: exit $rf vs $rs (generic)"
            diff "$T/fast" "$T/slow" | head -5
            head -3 "$T/fast.err" "$T/slow.err"
        fi
        case $c in summary | stats) # kept for the checks below, file by file
            mv "$T/fast" "$T/$n.$c.out"
            mv "$T/fast.err" "$T/$n.$c.fast.err"
            mv "$T/slow.err" "$T/$n.$c.slow.err" ;;
        esac
        IFS='|'
    done
    IFS=' '
done
# NUMBER of file F in $files (the names the runs above kept their outputs under)
nth() {
    _k=0
    for _f in $files; do
        _k=$((_k + 1))
        [ "$_f" = "$1" ] && { echo $_k; return; }
    done
    echo 0
}

if [ $ours = 1 ]; then
    # the shortcut is taken, not merely harmless: a pickle cut off inside its trace still gives
    # `stats` on the fast path (its segments are all there), and only the generic read finds the cut
    f=$S/tests/fixtures/h200/torch_exp.pickle
    size=$(stat -c %s "$f")
    head -c $((size * 3 / 4)) "$f" >"$T/cut.pickle"
    if "$C" stats "$T/cut.pickle" >"$T/cut.fast" 2>/dev/null && ! CUMEMHIST_GENERIC_LOAD=1 "$C" stats "$T/cut.pickle" >/dev/null 2>&1 &&
        cmp -s "$T/$(nth "$f").stats.out" "$T/cut.fast"; then
        shortcut=1
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: stats of a pickle cut inside its trace: the fast path did not stop before the trace"
    fi
    # ... and a .cmh's traces are skipped over for `stats`, not read and kept
    k=$(nth "$S/tests/fixtures/h200/torch_exp.cmh")
    fast=$(grep '^cumemhist: cmh:' "$T/$k.stats.fast.err" 2>/dev/null)
    slow=$(grep '^cumemhist: cmh:' "$T/$k.stats.slow.err" 2>/dev/null)
    case "$fast|$slow" in
    "cumemhist: cmh: 0 trace entries kept (traces skipped)|cumemhist: cmh: "[1-9]*" trace entries kept")
        pass=$((pass + 1)) ;;
    *)
        fail=$((fail + 1))
        echo "FAIL: stats of a .cmh: the traces were not skipped ('$fast', generic: '$slow')" ;;
    esac
fi
# ... and the opcode path reads every trace entry of every real pickle, not merely agrees when it
# does: CUMEMHIST_DEBUG_LOAD counts the entries each reader took.  The machine's share is the
# entries pickle writes with APPEND rather than in a MARK ... APPENDS run: a list's last batch of
# 1000 when it holds one entry (a one-entry trace, or 200001 entries).  The fuzz inputs are left
# out (they are built to leave the schema); under CUMEMHIST_GENERIC_LOAD the machine takes all.
# (one python counts every file's entries: the number of the file in $files, then the two counts,
# a line each; a file python cannot read has no line)
if command -v python3 >/dev/null; then
    # shellcheck disable=SC2086
    python3 - $files >"$T/want" <<'PY'
import pickle, sys
for k, path in enumerate(sys.argv[1:], 1):
    if "/fuzz/" in path or path.endswith(".cmh"): continue
    try: d = pickle.load(open(path, 'rb'))
    except Exception: continue
    t = d.get('device_traces', []) if isinstance(d, dict) else []
    print(k, sum(len(x) for x in t), sum(1 for x in t if len(x) % 1000 == 1))
PY
    while read -r k total single; do
        f=$(echo $files | cut -d' ' -f"$k")
        pat='s/^cumemhist: pickle: \([0-9]*\) trace entries read from the opcodes, \([0-9]*\) by the generic machine$/\1 \2/p'
        got=$(sed -n "$pat" "$T/$k.summary.fast.err" 2>/dev/null)
        gen=$(sed -n "$pat" "$T/$k.summary.slow.err" 2>/dev/null)
        if [ "$got" = "$((total - single)) $single" ] && [ "$gen" = "0 $total" ]; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL: $f: entries from the opcodes / the machine: '$got' (want $((total - single)) $single), generic load: '$gen' (want 0 $total)"
        fi
    done <"$T/want"
fi
echo "loadpaths $PART: $pass passed, $fail failed ($(echo $files | wc -w) files)"
[ $fail -eq 0 ]
