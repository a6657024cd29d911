#!/bin/sh
# clobber_test.sh BUILD_DIR SOURCE_DIR - nothing clobbered: a writer replaces what is at -o only
# when it is that writer's own earlier output of the same kind (known by its mark), or when the
# user says --force.  `export REC -o tp.pickle` replaced a PyTorch _dump_snapshot() pickle there
# (495 kB -> a few kB, exit 0, "wrote tp.pickle"); so did -o other.db (another program's SQLite
# database), -o notes.json, any plain file, and plot, report, symbolize, merge alike.  Devices,
# FIFOs and symbolic links keep their rules (snapshot/atomic.c; tests/writers_test.sh).
TEST=clobber . "$(dirname "$0")/testlib.sh"
H=$F/h200
R=$H/leaky.cmh
unchanged() { cmp -s "$1" "$2"; }

# a PyTorch snapshot pickle (perhaps the only copy of a run): kept, exit 1, said; --force replaces it
cp "$H/torch_exp.pickle" tp.pickle
"$CMH" export "$R" -o tp.pickle 2>err.txt
rc=$?
check "export -o a PyTorch pickle: refused, status 1, kept, the file, what it holds and --force said ($rc: $(cat err.txt))" \
    "[ $rc -eq 1 ] && unchanged tp.pickle '$H/torch_exp.pickle' && grep -q 'tp.pickle: holds a pickle cumemhist did not export (a PyTorch snapshot' err.txt && grep -q -- '--force' err.txt"
"$CMH" export --force "$R" -o tp.pickle 2>err.txt
rc=$?
check "export --force -o a PyTorch pickle: replaced ($rc: $(cat err.txt))" "[ $rc -eq 0 ] && ! unchanged tp.pickle '$H/torch_exp.pickle'"

# its own earlier export of each format: replaced without a word of refusal
for f in x.pickle x.json x.trace.json x.pb.gz x.db; do
    "$CMH" export -q "$R" -o $f 2>err.txt || bad "first export -o $f: $(cat err.txt)"
    cp $f before.$f
    "$CMH" export -q "$R" -o $f 2>err.txt
    rc=$?
    check "export -o $f over its own earlier export: replaced ($rc: $(cat err.txt))" "[ $rc -eq 0 ] && [ -s $f ]"
done
check "our database says it is ours (PRAGMA application_id)" \
    "[ \"\$(py -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"pragma application_id\").fetchone()[0])' x.db)\" = 1129138244 ]"

# what cumemhist did not write, or another of its outputs: kept, exit 1, the file named
py -c "import sqlite3; c=sqlite3.connect('other.db'); c.execute('create table jobs (id integer, name text)'); c.execute(\"insert into jobs values (1, 'train')\"); c.commit()"
cp other.db other.before
echo '{"notes": "the run of Tuesday"}' >notes.json
cp notes.json notes.before
echo 'hand-written notes' >notes.txt
cp notes.txt notes.txt.before
try() { # try WHAT FILE BEFORE COMMAND...: refused, status 1, FILE as it was, named, --force said
    what=$1 file=$2 before=$3
    shift 3
    "$@" 2>err.txt
    rc=$?
    check "$what: refused, status 1, kept ($rc: $(cat err.txt))" \
        "[ $rc -eq 1 ] && unchanged $file $before && grep -q \"$file: holds .*not replaced.*--force\" err.txt"
}
try "export -o another program's SQLite database" other.db other.before "$CMH" export "$R" -o other.db
try "export -f json -o a JSON file of the user's" notes.json notes.before "$CMH" export -f json "$R" -o notes.json
try "export -f chrome -o a text file" notes.txt notes.txt.before "$CMH" export -f chrome "$R" -o notes.txt
try "export -f pprof -o a text file" notes.txt notes.txt.before "$CMH" export -f pprof "$R" -o notes.txt
try "plot -o a text file" notes.txt notes.txt.before "$CMH" plot "$R" -o notes.txt
try "flamegraph -o a text file" notes.txt notes.txt.before "$CMH" flamegraph "$R" -o notes.txt
try "report -o a JSON file" notes.json notes.before "$CMH" report "$R" -o notes.json
try "report -o our own JSON export (another kind)" x.json before.x.json "$CMH" report "$R" -o x.json
try "symbolize -o a JSON file" notes.json notes.before "$CMH" symbolize "$R" -o notes.json
try "merge -o a PyTorch pickle" tp2.pickle "$H/torch_exp.pickle" sh -c "cp '$H/torch_exp.pickle' tp2.pickle && '$CMH' merge -o tp2.pickle '$H/torch_exp.cmh' '$H/torch_exp.pickle'"
try "symbolize -o our own pickle export" x.pickle before.x.pickle "$CMH" symbolize "$R" -o x.pickle

# the marks are specific: a gzip file is not our profile by its header alone (pprof.c's header,
# mtime 0 and OS 3, is what `gzip -n` writes), folded lines of the user's in another order (perf's
# stackcollapse sorts by stack) or with a stack twice are not ours, nor a cumemhist.prom another
# program left in the textfile directory
printf 'the run of Tuesday\n' >notes.log && gzip -nf notes.log && cp notes.log.gz gz.before
try "export -f pprof -o a gzip file (gzip -n)" notes.log.gz gz.before "$CMH" export -f pprof "$R" -o notes.log.gz
printf 'main;a 1\nmain;b 5\n' >perf.folded && cp perf.folded perf.before
try "flamegraph --folded -o another tool's folded stacks (by stack, not by bytes)" perf.folded perf.before "$CMH" flamegraph --folded "$R" -o perf.folded
printf 'main;a 5\nmain;a 1\n' >sum.folded && cp sum.folded sum.before
try "flamegraph --folded -o folded lines with a stack twice" sum.folded sum.before "$CMH" flamegraph --folded "$R" -o sum.folded
mkdir -p tf && printf 'my_job_metric 1\n' >tf/cumemhist.prom && cp tf/cumemhist.prom prom.before
try "exporter --textfile over another program's cumemhist.prom" tf/cumemhist.prom prom.before "$CMH" exporter --once --textfile tf
rm -f tf/cumemhist.prom
"$CMH" exporter --once --textfile tf 2>/dev/null && "$CMH" exporter --once --textfile tf 2>err.txt
check "exporter --textfile over its own earlier textfile: replaced ($?: $(cat err.txt))" "[ -s tf/cumemhist.prom ] && ! cmp -s tf/cumemhist.prom prom.before"
"$CMH" export -q -f pprof "$R" -o mark.pb.gz
check "our profile reads back as gzip (its header's comment skipped by the reader)" \
    "py -c 'import gzip, sys; sys.exit(not gzip.open(sys.argv[1]).read())' mark.pb.gz"
if command -v promtool >/dev/null 2>&1; then
    env -u LD_PRELOAD promtool check metrics <tf/cumemhist.prom >pt.txt 2>&1
    check "promtool accepts the textfile with its first line ($(head -2 pt.txt | tr '\n' ' '))" "! grep -qi 'error' pt.txt"
fi

# pages, pictures and folded stacks of its own: replaced
for w in "report" "plot" "flamegraph" "flamegraph --folded" "view"; do
    "$CMH" $w "$R" -o page.out 2>/dev/null && "$CMH" $w "$R" -o page.out 2>err.txt
    check "$w -o its own earlier output: replaced ($?: $(cat err.txt))" "[ -s page.out ]"
    rm -f page.out
done
"$CMH" symbolize "$R" -o s.cmh 2>/dev/null && "$CMH" symbolize "$R" -o s.cmh 2>err.txt
check "symbolize -o its own earlier .cmh: replaced ($?: $(cat err.txt))" "[ -s s.cmh ]"

# an empty file holds nothing to lose; a link is replaced, never followed; a device is written through
: >empty.pickle
"$CMH" export -q "$R" -o empty.pickle 2>err.txt
check "export -o an empty file: replaced ($?: $(cat err.txt))" "[ -s empty.pickle ]"
ln -s notes.txt link.json
"$CMH" export -q -f json "$R" -o link.json 2>err.txt
check "export -o a symbolic link: the link replaced, its target untouched ($?: $(cat err.txt))" \
    "[ ! -L link.json ] && [ -s link.json ] && unchanged notes.txt notes.txt.before"
"$CMH" export -q -f json "$R" -o /dev/null 2>err.txt
check "export -o /dev/null: written through ($?: $(cat err.txt))" "[ -c /dev/null ]"

"$CMH" export --help >help.txt 2>&1
check "export --help says --force" "grep -q -- '--force' help.txt"
finish
