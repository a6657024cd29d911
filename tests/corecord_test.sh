#!/bin/sh
# corecord_test.sh BUILD_DIR SOURCE_DIR - the PyTorch start-up hook's glue, without a GPU:
# `record` of a Python program that imports a stand-in torch (tests/python/standin, torch's
# names) switches PyTorch's history on with our options, takes its snapshot with ours (at exit,
# at a dump on request, at PyTorch's OOM) into one record; chains the user's sitecustomize;
# does nothing in a program without torch or with --no-torch; says once and goes on when an
# API is missing or raises.
TEST=corecord . "$(dirname "$0")/testlib.sh"
case "${LD_PRELOAD:-}" in *asan* | *ubsan*) echo "skipped: python under a sanitizer runtime"; exit 77 ;; esac
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
P=$SRC/tests/python
export PYTHONPATH=$P/standin STANDIN_SNAPSHOT=$F/h200/torch_exp.pickle STANDIN_LOG=$T/log.jsonl
"$CMH" summary "$F/h200/torch_exp.pickle" >pickle.txt
ev() { py -c "import json,sys; print(' '.join(json.loads(l)['event'] for l in open('log.jsonl')))" 2>/dev/null; }
rec() { py -c "import json; print([json.loads(l) for l in open('log.jsonl') if json.loads(l)['event']=='record'][0])" 2>/dev/null; }

rm -f log.jsonl
"$CMH" record -q -o t.cmh -- python3 "$P/corecord_prog.py" torch >out.txt 2>err.txt
check "a program importing torch: PyTorch's history switched on, its snapshot taken at exit ($(ev))" \
    '[ "$(ev)" = "import record snapshot" ] && grep -q "torch imported" out.txt && [ ! -s err.txt ]'
check "defaults mapped: enabled all, context all, stacks all (Python and C++), every entry" \
    'rec | grep -q "'"'"'enabled'"'"': '"'"'all'"'"', '"'"'context'"'"': '"'"'all'"'"', '"'"'stacks'"'"': '"'"'all'"'"', '"'"'max_entries'"'"': 9223372036854775807"'
# (standard output: PyTorch's text; the note on its expandable segments goes to stderr, as the pickle's)
"$CMH" summary t.cmh >t.txt 2>t.err
check "one record: its summary is PyTorch's (the part it carries), nothing left beside it" \
    'cmp -s t.txt pickle.txt && ! grep -qv "^cumemhist: summary: device 0: the table has PyTorch.s own counts\|^cumemhist: summary: device 0: beyond PyTorch.s pool\|^  " t.err && ! ls t.cmh.torch.pickle* >/dev/null 2>&1'
# What the driver held beside PyTorch's pool (here the program's own cuMemAlloc) is in no row of
# PyTorch's table: summary says it after the table, by owner, with owners' figures for the end
# (it said nothing: NCCL's 388 MiB and cuBLAS's 64 MiB of an H200 run were in no line)
"$CMH" summary --json t.cmh >t.json 2>/dev/null
"$CMH" owners --json t.cmh >o.json 2>/dev/null
py - t.json o.json <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))[0]["beyond_pytorch"]
o = json.load(open(sys.argv[2]))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
mine = ("torch_allocated", "torch_cached", "unexplained")
want = {r["owner"]: r["bytes"] for r in end["rows"] if r["kind"] not in mine and r["owner"] != "PyTorch freed, stream work pending"}
got = {r["owner"]: r["bytes"] for r in b["owners"]}
assert got == want and b["bytes"] == sum(want.values()) > 0, (got, want)
PY
brc=$?
check "summary names what the driver held beyond PyTorch's pool, as owners' end does: $(grep -A2 'beyond PyTorch' t.err | tr -s ' ')" \
    '[ $brc -eq 0 ] && grep -q "^cumemhist: summary: device 0: beyond PyTorch.s pool" t.err && grep -q "^ .* program (" t.err'
"$CMH" owners t.cmh >o.txt 2>&1
check "owners of it: the program's own allocation, PyTorch's rows present" 'grep -q "program (" o.txt && grep -q "PyTorch allocated" o.txt'

rm -f log.jsonl
"$CMH" record -q --enabled state --context alloc --max-entries 5000 -o s.cmh -- python3 "$P/corecord_prog.py" torch >/dev/null 2>&1
check "--enabled state --context alloc --max-entries 5000 mapped ($(rec))" \
    'rec | grep -q "'"'"'enabled'"'"': '"'"'state'"'"', '"'"'context'"'"': '"'"'alloc'"'"', '"'"'stacks'"'"': '"'"'all'"'"', '"'"'max_entries'"'"': 5000"'
rm -f log.jsonl
"$CMH" record -q --context none -o n.cmh -- python3 "$P/corecord_prog.py" torch >/dev/null 2>&1
check "--context none: no context, Python stacks only" 'rec | grep -q "'"'"'context'"'"': None, '"'"'stacks'"'"': '"'"'python'"'"'"'

rm -f log.jsonl
"$CMH" record -q -o d.cmh -- python3 "$P/corecord_prog.py" dump >/dev/null 2>err.txt
# (a snapshot of the running process: PyTorch's table, then the line saying its figures are that moment's)
table() { grep '^|' "$1"; }
"$CMH" summary mid.cmh >mid.txt 2>/dev/null
check "a dump on request (cumemhist.dump) takes PyTorch's snapshot with ours" \
    '[ "$(table mid.txt)" = "$(table pickle.txt)" ] && grep -q "^note: the process was still running when this snapshot was written on request" mid.txt &&
     [ "$(ev)" = "import record snapshot snapshot" ]'
# PyTorch's snapshot of a history with C++ stacks forks (addr2line): taken under the dump lock,
# which fork's prepare handler takes too, the dump waited for itself (the H200's section 7 hung
# for 5 minutes, until killed); the limit here stands for "for ever"
rm -f log.jsonl mid.cmh
STANDIN_FORK=1 timeout -s KILL 60 "$CMH" record -q -o f.cmh -- python3 "$P/corecord_prog.py" dump >/dev/null 2>err.txt
frc=$?
"$CMH" summary mid.cmh >midf.txt 2>/dev/null
check "a dump on request whose PyTorch snapshot forks: done (exit $frc), PyTorch's part in it" \
    '[ $frc -eq 0 ] && [ "$(table midf.txt)" = "$(table pickle.txt)" ] && ! ls mid.cmh.torch.pickle* >/dev/null 2>&1'
check "marks and ranges from Python reach the trace" '"$CMH" trace --json mid.cmh 2>/dev/null | grep -q "step 1"'

# the hook taken away while a dump on request takes PyTorch's part (the program's exit handler
# does so, beside another thread's dump): the dump still merges the part it took.  It asked
# again whether PyTorch's part could come, got no, streamed the rings, and removed the part
# unmerged ('mid.cmh' without PyTorch's table)
rm -f log.jsonl mid.cmh
STANDIN_UNHOOK=1 "$CMH" record -q -o uh.cmh -- python3 "$P/corecord_prog.py" dump >/dev/null 2>err.txt
urc=$?
"$CMH" summary mid.cmh >midu.txt 2>/dev/null
check "a dump whose hook is taken away while it takes PyTorch's part: merged all the same, exit $urc ($(table midu.txt | head -1 | cut -c1-60))" \
    '[ $urc -eq 0 ] && [ "$(table midu.txt)" = "$(table pickle.txt)" ] && ! ls mid.cmh.torch.pickle* >/dev/null 2>&1'

# ended by SIGTERM: the dump on the way cannot ask the interpreter for PyTorch's part (the
# signalled thread may hold it); the snapshot's ending and stderr say so, where the record read
# as one of the driver alone
rm -f log.jsonl term.cmh
"$CMH" record -q -o term.cmh -- python3 "$P/corecord_prog.py" term >/dev/null 2>err.txt
"$CMH" summary term.cmh >term.txt 2>&1
check "ended by SIGTERM: the snapshot says PyTorch's part is not in it, stderr too ($(grep -o 'written on the way.*' term.txt | cut -c1-70))" \
    'grep -q "ended by SIGTERM; this snapshot was written on the way, without PyTorch.s part" term.txt &&
     grep -q "term.cmh (signal SIGTERM): PyTorch.s part is not in it" err.txt'

# Two dumps at once, each with PyTorch's part: PyTorch's snapshot is taken before the dump lock
# (above), so a second dump asked for meanwhile (another thread's cumemhist.dump(), SIGUSR1's, the
# OOM observer's) to the same snapshot path took it beside the first: one file for both, the
# second's refused (FileExistsError) or merged by the first and gone, its dump without PyTorch's
# part. The stand-in's snapshot is held until both have begun.
for how in threads usr1; do
    rm -f log.jsonl gate r_$how.cmh*
    STANDIN_GATE=$T/gate "$CMH" record -q -o r_$how.cmh -- python3 "$P/corecord_prog.py" race $how >out.txt 2>err.txt
    rrc=$?
    check "two dumps at once ($how): each took PyTorch's snapshot and merged it, exit $rrc ($(ev); $(grep -m1 "PyTorch" err.txt))" \
        '[ $rrc -eq 0 ] && [ "$(ev)" = "import record snapshot snapshot snapshot" ] && ! grep -q PyTorch err.txt'
    check "two dumps at once ($how): nothing of PyTorch's left beside the record ($(ls r_$how.cmh.* 2>/dev/null | tr '\n' ' '))" \
        '! ls r_$how.cmh.* >/dev/null 2>&1 && [ -s r_$how.cmh ]'
done

rm -f log.jsonl mid.cmh*
STANDIN_SNAPSHOT_RAISES=1 "$CMH" record -q -o e.cmh -- python3 "$P/corecord_prog.py" dump >/dev/null 2>err.txt
erc=$?
check "PyTorch's snapshot raising at a dump: said, our part written (exit $erc), nothing half-written left ($(ls mid.cmh.* 2>/dev/null | tr '\n' ' '))" \
    '[ $erc -eq 0 ] && grep -q "snapshot could not be taken (RuntimeError" err.txt && [ -s mid.cmh ] && ! ls mid.cmh.* >/dev/null 2>&1'

rm -f log.jsonl u1.cmh
"$CMH" record -q -o u1.cmh -- python3 "$P/corecord_prog.py" usr1 "$T/u1.cmh" >/dev/null 2>err.txt
check "SIGUSR1: the helper thread's dump takes PyTorch's snapshot too ($(ev))" '[ "$(ev)" = "import record snapshot snapshot" ]'

rm -f log.jsonl o2.cmh
"$CMH" record -q -o o2.cmh -- python3 "$P/corecord_prog.py" oom >/dev/null 2>err.txt
check "PyTorch's OOM observer dumps both, before the exception (then exit again: $(ev))" '[ "$(ev)" = "import record snapshot snapshot" ]'

rm -f log.jsonl
"$CMH" record -q -o x.cmh -- python3 "$P/corecord_prog.py" notorch >out.txt 2>err.txt
check "a program that never imports torch: the hook imports nothing" '[ ! -e log.jsonl ] && grep -q "no torch" out.txt && [ -s x.cmh ]'
rm -f log.jsonl
"$CMH" record -q --no-torch -o y.cmh -- python3 "$P/corecord_prog.py" torch >/dev/null 2>err.txt
"$CMH" summary y.cmh >y.txt 2>&1
check "--no-torch: torch imported, its history left alone, a driver-level record" '[ "$(ev)" = "import" ] && ! cmp -s y.txt pickle.txt'

mkdir -p user
printf 'import os\nopen(os.path.join(os.environ["MARK_DIR"], "user-sitecustomize-ran"), "w").close()\n' >user/sitecustomize.py
rm -f log.jsonl
PYTHONPATH=$T/user:$PYTHONPATH MARK_DIR=$T "$CMH" record -q -o u.cmh -- python3 "$P/corecord_prog.py" torch >/dev/null 2>err.txt
check "the user's own sitecustomize still runs, and the hook too" '[ -e user-sitecustomize-ran ] && [ "$(ev)" = "import record snapshot" ]'

rm -f log.jsonl
STANDIN_MODE=missing "$CMH" record -q -o m.cmh -- python3 "$P/corecord_prog.py" torch >out.txt 2>err.txt
rc=$?
check "an API missing: said once, the driver level recorded, the program unharmed ($(head -1 err.txt))" \
    '[ $rc -eq 0 ] && [ "$(grep -c "cumemhist: this PyTorch has no" err.txt)" = 1 ] && [ -s m.cmh ] && grep -q "torch imported" out.txt'
rm -f log.jsonl
STANDIN_MODE=raises "$CMH" record -q -o r.cmh -- python3 "$P/corecord_prog.py" torch >out.txt 2>err.txt
rc=$?
check "an API that raises: said once, the program unharmed ($(head -1 err.txt))" \
    '[ $rc -eq 0 ] && [ "$(grep -c "refused (RuntimeError" err.txt)" = 1 ] && [ -s r.cmh ] && grep -q "torch imported" out.txt'
for v in v2.0 v1.13; do
    rm -f log.jsonl
    STANDIN_MODE=$v "$CMH" record -q -o $v.cmh -- python3 "$P/corecord_prog.py" torch >out.txt 2>err.txt
    check "PyTorch $v's _record_memory_history form, quietly ($(rec)) ($(head -1 err.txt))" \
        '[ ! -s err.txt ] && [ "$(ev)" = "import record snapshot" ] && rec | grep -q "'"'"'enabled'"'"': True"'
done
check "PyTorch 2.0: context and every entry, in its own words" \
    'rm -f log.jsonl; STANDIN_MODE=v2.0 "$CMH" record -q -o v.cmh -- python3 "$P/corecord_prog.py" torch >/dev/null 2>&1; rec | grep -q "'"'"'record_context'"'"': True, '"'"'trace_alloc_max_entries'"'"': 2147483647, '"'"'trace_alloc_record_context'"'"': True"'
finish
