#!/bin/sh
# cutflight_test.sh BUILD_DIR SOURCE_DIR - a flight record cut short (an interrupted copy, a full
# disk) loses part of the process's history, and what `recover` makes of it must say so: the
# snapshot keeps what was lost (.cmh history_lost: the bytes past the file's end, where its
# readable part ends, the torn records), every report says it under the process's ending, in
# text, in --json and in the HTML report, and `leaks --fail-on-leak` does not pass it (exit 5).
# A copy cut just past its first entry (a mark) read 'killed after 1 entry', 'nothing is still
# live' and passed the gate, exit 0, the loss said on recover's stderr alone.  The record whole
# says nothing of a loss and passes.  Cuts: after the header only (12,288 bytes), inside the
# first entry's record, just past it, and halfway through the records.  A record torn by the
# death alone (the file whole) is said but judged as the whole record is: exit 0 here, as a kill
# that came between two calls would give.
TEST=cutflight . "$(dirname "$0")/testlib.sh"
P=$B/tests/cut_flight

env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=c.cmh "$P" 2>/dev/null
[ -s c.cmh.flight ] || { bad "cut_flight left no flight record"; finish; exit 1; }
mv c.cmh.flight whole.flight
rm -f c.cmh.claim
# the records' end: area[0]'s offset + cursor (snapshot/flight_format.h; one extent here)
set -- $(py - whole.flight <<'EOF2'
import struct, sys
m = open(sys.argv[1], 'rb').read()
off, size, cursor = struct.unpack_from('<QQQ', m, 112)
print(off, off + min(cursor, size))
EOF2
)
off=$1 recend=$2

# cutrec N: recover a copy of the first N bytes to cN.cmh; its entries (from recover's line) in $n
cutrec() {
    head -c "$1" whole.flight >"c$1.cmh.flight"
    "$CMH" recover --keep "c$1.cmh.flight" 2>"err$1.txt"
    rc=$?
    n=$(sed -n 's/.* after \([0-9,]*\) entr.*/\1/p' "err$1.txt" | tr -d ,)
}
lost_json() { # FILE COMMAND: that command's --json history_lost as "cut file read_to torn text?" or "null"
    "$CMH" $2 --json "$1" 2>/dev/null | py -c '
import json, sys
d = json.load(sys.stdin)
h = d[0]["history_lost"]
print("null" if h is None else "%d %d %s %d %d" % (h["cut_bytes"], h["file_bytes"], h["read_to"], h["torn_records"],
      h["text"].startswith("this record lost part of its history")))'
}

# --- the record whole: no note anywhere, the gate passes ---
head -c 100000000 whole.flight >w.cmh.flight
"$CMH" recover --keep w.cmh.flight 2>err.txt
"$CMH" leaks --fail-on-leak w.cmh >leaks.txt 2>&1
rc=$?
check "whole: 24 entries, nothing live, the gate passes (exit $rc), no note ($(sed -n 1p err.txt | cut -c1-100))" \
    "grep -q 'after 24 entries' err.txt && [ $rc -eq 0 ] && grep -q 'nothing is still live' leaks.txt && ! grep -q 'lost part of its history' leaks.txt"
for c in summary oom peak owners leaks; do
    j=$(lost_json w.cmh $c)
    check "whole: $c --json history_lost null ($j)" "[ '$j' = null ]"
done

# --- cut after the header only: nothing read, everything lost ---
cutrec 12288
"$CMH" leaks --fail-on-leak c12288.cmh >leaks.txt 2>&1
lrc=$?
check "header only: recovered, 0 entries, the loss said on stderr ($rc: $(cat err12288.txt | cut -c1-200))" \
    "[ $rc -eq 0 ] && [ '$n' = 0 ] && grep -q 'the file is cut short' err12288.txt"
check "header only: leaks --fail-on-leak exit 5, not 0 ($lrc: $(tr '\n' ' ' <leaks.txt | cut -c1-400))" "[ $lrc -eq 5 ]"
check "header only: leaks says the loss, the file's end at byte 12,288" \
    "grep -q '^c12288.cmh: note: this record lost part of its history: its flight record is cut short (the file ends at byte 12,288; .* bytes of records written past it are lost' leaks.txt"
j=$(lost_json c12288.cmh leaks)
check "header only: --json history_lost: cut $((recend - 12288)) bytes, file 12288, read to 12288, 0 torn ($j)" \
    "[ '$j' = '$((recend - 12288)) 12288 12288 0 1' ]"

# --- just past the first entry (its mark): the smallest cut that reads 1 entry, by halving ---
lo=$off hi=$recend
while [ $((hi - lo)) -gt 8 ]; do
    mid=$(((lo + hi) / 16 * 8))
    cutrec $mid
    if [ "${n:-0}" -ge 1 ]; then hi=$mid; else lo=$mid; fi
    rm -f "c$mid.cmh" "c$mid.cmh.flight" "err$mid.txt"
done
one=$hi
cutrec $one
check "cut at $one: 1 entry read" "[ $rc -eq 0 ] && [ '$n' = 1 ]"
"$CMH" leaks --fail-on-leak c$one.cmh >leaks.txt 2>&1
lrc=$?
check "cut at $one: leaks --fail-on-leak exit 5, not 0 ($lrc: $(tr '\n' ' ' <leaks.txt | cut -c1-500))" "[ $lrc -eq 5 ]"
check "cut at $one: the outcome line is followed by its qualifier" \
    "grep -A1 '^nothing is still live' leaks.txt | grep -q '^note: that is of the history read alone'"
one_g=$(py -c 'import sys; print("{:,}".format(int(sys.argv[1])))' $one)
for c in summary oom peak owners frag; do
    "$CMH" $c c$one.cmh >out.txt 2>&1
    check "cut at $one: $c says the loss under the ending" \
        "grep -A1 '^c$one.cmh: the process was killed' out.txt | grep -q '^c$one.cmh: note: this record lost part of its history: its flight record is cut short (the file ends at byte $one_g'"
    j=$(lost_json c$one.cmh $c)
    check "cut at $one: $c --json history_lost: cut $((recend - one)) bytes, file $one, read to $one ($j)" \
        "[ '$j' = '$((recend - one)) $one $one 0 1' ]"
done
"$CMH" report c$one.cmh -o r.html 2>/dev/null
check "cut at $one: the HTML report's header says it" \
    "grep -q '<p class=\"r-lost\"><b>Incomplete record</b>: this record lost part of its history: its flight record is cut short' r.html"

# --- inside the first entry's record: it is torn, the readable part ends before it ---
mid1=$((one - 3))
cutrec $mid1
"$CMH" leaks --fail-on-leak c$mid1.cmh >leaks.txt 2>&1
lrc=$?
j=$(lost_json c$mid1.cmh summary)
set -- $j
check "cut at $mid1 (inside a record): 0 entries, 1 torn, read to before the cut, exit 5 ($n; $j; $lrc)" \
    "[ '$n' = 0 ] && [ '$1' = $((recend - mid1)) ] && [ '$2' = $mid1 ] && [ '$3' -lt $mid1 ] && [ '$3' -ge $off ] && [ '$4' = 1 ] && [ $lrc -eq 5 ]"
check "cut at $mid1: the torn record said" "grep -q '1 torn record dropped (left half-written by a writer.s death or by the cut)' leaks.txt"

# --- halfway through the records past the first entry: the bytes lost and the bytes kept add up to the records' end ---
half=$(((one + recend) / 2 + 3)) # (past the first entry: what comes before it is the stacks and modules, larger under a sanitizer)
cutrec $half
j=$(lost_json c$half.cmh owners)
set -- $j
"$CMH" leaks --fail-on-leak c$half.cmh >leaks.txt 2>&1
lrc=$?
check "cut at $half: $n entries, cut + file = the records' end $recend, read to <= the cut, exit 5 ($j; $lrc)" \
    "[ '$n' -ge 1 ] && [ '$n' -lt 24 ] && [ \$(($1 + $2)) = $recend ] && [ '$2' = $half ] && [ '$3' -le $half ] && [ $lrc -eq 5 ]"

# --- symbolize writes the snapshot again: the loss stays with it ---
"$CMH" symbolize c$one.cmh -o sym.cmh >/dev/null 2>&1
"$CMH" leaks --fail-on-leak sym.cmh >/dev/null 2>&1
lrc=$?
j=$(lost_json sym.cmh summary)
check "symbolized copy: history_lost kept, exit 5 ($j; $lrc)" "[ '$j' = '$((recend - one)) $one $one 0 1' ] && [ $lrc -eq 5 ]"
# --- exported to PyTorch's pickle (which cumemhist reads back) and to SQLite: the loss goes with
# it.  The pickle kept no history_lost: leaks --fail-on-leak over it exited 0 where the .cmh exits 5,
# and no report of it said the loss ---
"$CMH" export --format memviz c$one.cmh -o c$one.pickle 2>/dev/null
"$CMH" leaks --fail-on-leak c$one.pickle >leaks.txt 2>&1
lrc=$?
check "cut at $one, its pickle: leaks --fail-on-leak exit 5 as the .cmh's ($lrc: $(tr '\n' ' ' <leaks.txt | cut -c1-300))" "[ $lrc -eq 5 ]"
check "cut at $one, its pickle: leaks says the loss, the file's end at byte $one_g" \
    "grep -q '^c$one.pickle: note: this record lost part of its history: its flight record is cut short (the file ends at byte $one_g' leaks.txt"
j=$(lost_json c$one.pickle summary)
check "cut at $one, its pickle: --json history_lost as the .cmh's ($j)" "[ '$j' = '$((recend - one)) $one $one 0 1' ]"
py -c "import pickle, sys; d = pickle.load(open(sys.argv[1], 'rb')); assert d['cumemhist']['history_lost'] == ($((recend - one)), $one, $one, 0, 0, 0), d['cumemhist'].get('history_lost')" c$one.pickle 2>py.txt
check "cut at $one, its pickle: Python's pickle.load reads it, cumemhist.history_lost a tuple ($(tail -1 py.txt))" "[ ! -s py.txt ]"
"$CMH" export --format memviz w.cmh -o w.pickle 2>/dev/null
"$CMH" leaks --fail-on-leak w.pickle >leaks.txt 2>&1
lrc=$?
check "whole, its pickle: the gate passes (exit $lrc), no note" "[ $lrc -eq 0 ] && ! grep -q 'lost part of its history' leaks.txt"
py -c "import pickle, sys; d = pickle.load(open(sys.argv[1], 'rb')); assert 'history_lost' not in d['cumemhist']" w.pickle 2>py.txt
check "whole, its pickle: no cumemhist.history_lost ($(tail -1 py.txt))" "[ ! -s py.txt ]"
rm -f f.db fw.db fp.db
# (each in a database of its own: the three are records of one process, which one database
# counts once, the one holding the others' taken)
"$CMH" export --format sqlite c$one.cmh -o f.db 2>/dev/null
"$CMH" export --format sqlite w.cmh -o fw.db 2>/dev/null
"$CMH" export --format sqlite c$one.pickle -o fp.db 2>/dev/null
rows=$(py -c "
import sqlite3, sys
for db in ('f.db', 'fw.db', 'fp.db'):
  for r in sqlite3.connect(db).execute('select file, lost_cut_bytes, lost_torn, lost_damaged, lost_refused, history_lost from processes order by process_id'):
    print(r[0], r[1], r[2], r[3], r[4], 'null' if r[5] is None else r[5].startswith('this record lost part of its history: its flight record is cut short (the file ends at byte $one_g'))
" 2>&1 | tr '\n' ';')
check "sqlite processes: the cut record and its pickle say the loss, the whole one none ($rows)" \
    "[ '$rows' = 'c$one.cmh $((recend - one)) 0 0 0 True;w.cmh 0 0 0 0 null;c$one.pickle $((recend - one)) 0 0 0 True;' ]"

# --- the last record torn by the death alone (zeroed, the file whole): said, and the gate judges
# what was read as it would the record whole: a kill mid-write or between two calls reads the same ---
cutrec $((recend - 1))
last=$(py -c "import json,sys; print(json.load(sys.stdin)[0]['history_lost']['read_to'])" <<EOF2
$("$CMH" summary --json c$((recend - 1)).cmh 2>/dev/null)
EOF2
) # where the last record begins: a cut inside it read up to there
py - whole.flight "$last" "$recend" <<'EOF2'
import sys
m = bytearray(open(sys.argv[1], 'rb').read())
a, b = int(sys.argv[2]), int(sys.argv[3])
m[a:b] = bytes(b - a)
open("t.cmh.flight", "wb").write(m)
EOF2
"$CMH" recover --keep t.cmh.flight 2>errt.txt
"$CMH" leaks --fail-on-leak t.cmh >leaks.txt 2>&1
lrc=$?
j=$("$CMH" leaks --json t.cmh 2>/dev/null | py -c "import json,sys; h = json.load(sys.stdin)[0]['history_lost']; print(h['cut_bytes'], h['torn_records'], h['damaged_records'])")
check "the last record torn, the file whole (read to $last of $recend): 1 torn, nothing cut ($j), gate exit $lrc as the whole record's 0" \
    "[ '$j' = '0 1 0' ] && [ $lrc -eq 0 ] && grep -q '1 torn record dropped (left half-written by a writer.s death): the call the death caught mid-write' leaks.txt"
check "a cut of 1 byte says it in the singular" "grep -q '1 byte of records written past it is lost' err$((recend - 1)).txt || $CMH summary c$((recend - 1)).cmh 2>&1 | grep -q '1 byte of records written past it is lost'"
finish
