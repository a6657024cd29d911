#!/bin/sh
# badfree_test.sh BUILD_DIR SOURCE_DIR - frees the driver refuses (tests/badfree.c): a double
# free, a free of a pointer never allocated, a free of an address inside a live allocation (not
# its base).  The driver returns CUDA_ERROR_INVALID_VALUE for each and does nothing, so no trace
# entry shows them; before, every report and export showed three entries and said nothing of the
# three failed calls.  Now the record keeps them (.cmh driver_errors) and summary, oom and leaks
# say them in a note (their --json, trace --json and export's sqlite as a list); trace's text,
# PyTorch's, has no such action and stays as it was.
TEST=badfree . "$(dirname "$0")/testlib.sh"

"$CMH" record -q -o bf.cmh -- "$B/tests/badfree" >bf.out 2>bf.err
rc=$?
check "badfree ran whole (exit $rc: $(cat bf.err))" "[ $rc -eq 0 ] && [ -s bf.cmh ]"
# the fake driver refuses them as the real one does (CUDA_ERROR_INVALID_VALUE, 1)
check "the driver refused the double free, the unknown pointer and the interior address with CUDA_ERROR_INVALID_VALUE" \
    "grep -qx 'double free -> 1' bf.out && grep -qx 'unknown free -> 1' bf.out && grep -qx 'interior free -> 1' bf.out"
A=$(sed -n 's/^a=\(0x[0-9a-f]*\) b=.*/\1/p' bf.out)
BB=$(sed -n 's/^a=.* b=\(0x[0-9a-f]*\)$/\1/p' bf.out)
INNER=$(printf '0x%x' $((BB + 4096)))
L1=$(grep -n 'freed twice' "$SRC/tests/badfree.c" | head -1 | cut -d: -f1)
L2=$(grep -n 'never allocated \*/' "$SRC/tests/badfree.c" | head -1 | cut -d: -f1)
L3=$(grep -n 'inside b, live' "$SRC/tests/badfree.c" | head -1 | cut -d: -f1)

"$CMH" summary bf.cmh >sum.txt 2>&1
"$CMH" oom bf.cmh >oom.txt 2>&1
"$CMH" leaks bf.cmh >leaks.txt 2>&1
for f in sum oom leaks; do
    check "$f: one note names the 3 failed cuMemFree calls and what each address was" \
        "[ \$(grep -c 'driver calls failed' $f.txt) -eq 1 ] && grep -q '^note: 3 driver calls failed' $f.txt &&
         grep -q 'cuMemFree returned CUDA_ERROR_INVALID_VALUE 3 times' $f.txt &&
         grep -q '^        $A: freed already (a double free), at main' $f.txt &&
         grep -q '^        0xdeadbeef000: never allocated while recorded, at main' $f.txt &&
         grep -q '^        $INNER: inside the live 1.0 MiB allocation at $BB (+4096 bytes), not its base, at main' $f.txt"
done
# owners, frag, stats (after PyTorch's text) and the HTML report say them too: they printed nothing
"$CMH" owners bf.cmh >owners.txt 2>&1
"$CMH" frag bf.cmh >frag.txt 2>&1
"$CMH" stats bf.cmh >stats.txt 2>&1
"$CMH" stats --device 0 bf.cmh >stats0.txt 2>&1
for f in owners frag stats stats0; do
    check "$f: the same note, once" \
        "[ \$(grep -c 'driver calls failed' $f.txt) -eq 1 ] && grep -q '^note: 3 driver calls failed' $f.txt &&
         grep -q 'cuMemFree returned CUDA_ERROR_INVALID_VALUE 3 times' $f.txt &&
         grep -q '^        $A: freed already (a double free), at main' $f.txt &&
         grep -q '^        $INNER: inside the live 1.0 MiB allocation at $BB (+4096 bytes), not its base, at main' $f.txt"
done
"$CMH" report -o bf.html bf.cmh >/dev/null 2>&1
check "report (HTML): the note in its header" \
    "grep -q '<pre class=\"r-drverr\">note: 3 driver calls failed' bf.html && grep -q '$A: freed already (a double free)' bf.html"

check "leaks: each failed call at its line of badfree.c (thread 1)" \
    "grep -q 'first at main (.*badfree.c:$L1) (thread 1)' leaks.txt && grep -q 'never allocated while recorded, at main (.*badfree.c:$L2) (thread 1)' leaks.txt &&
     grep -q 'not its base, at main (.*badfree.c:$L3) (thread 1)' leaks.txt"

"$CMH" summary --json bf.cmh >sum.json 2>/dev/null
"$CMH" oom --json bf.cmh >oom.json 2>/dev/null
"$CMH" leaks --json bf.cmh >leaks.json 2>/dev/null
"$CMH" trace --json bf.cmh >trace.json 2>/dev/null
check "summary, oom, leaks and trace --json: driver_errors lists the three calls, in order, with their addresses" "py - $A $BB <<'PY'
import json, sys
a, b = int(sys.argv[1], 16), int(sys.argv[2], 16)
for f in ('sum', 'oom', 'leaks', 'trace'):
    d = json.load(open(f + '.json'))
    assert len(d) == 1, (f, len(d))
    de = d[0]['driver_errors']
    assert len(de) == 1, (f, de)
    e = de[0]
    assert e['call'] == 'cuMemFree' and e['result'] == 1 and e['error'] == 'CUDA_ERROR_INVALID_VALUE' and e['count'] == 3, (f, e)
    assert [c['address'] for c in e['calls']] == [a, 0xdeadbeef000, b + 4096], (f, e)
    assert [c['what'].split(' ')[0] for c in e['calls']] == ['freed', 'never', 'inside'], (f, e)
    assert all(c['thread'] == 1 and c['time_ns'] > 0 and c['site'] for c in e['calls']), (f, e)
    ts = sorted(c['time_ns'] for c in e['calls'])
    assert ts == [c['time_ns'] for c in e['calls']], (f, e)
# the trace itself is unchanged: the 2 allocations and the 1 free that succeeded
t = json.load(open('trace.json'))[0]['entries']
assert len(t) == 3, t
PY"

# trace's text is PyTorch's (no such action): unchanged, three entries
"$CMH" trace bf.cmh >trace.txt 2>/dev/null
check "trace: PyTorch's text, no word of the failed calls" \
    "[ \$(grep -c 'cudaMalloc\|cudaFree' trace.txt) -eq 3 ] && ! grep -qi 'driver\|INVALID_VALUE' trace.txt"

# export sqlite: a driver_errors table (docs/FLEET.md)
rm -f bf.db
"$CMH" export -o bf.db bf.cmh >/dev/null 2>&1
check "export sqlite: driver_errors has a row per failed call, their stacks in stacks" "py - $A <<'PY'
import sqlite3, sys
a = int(sys.argv[1], 16)
db = sqlite3.connect('bf.db')
r = db.execute('select call, result, error, count, seq, address, thread, what, stack_id from driver_errors order by seq').fetchall()
assert len(r) == 3, r
assert all(x[0] == 'cuMemFree' and x[1] == 1 and x[2] == 'CUDA_ERROR_INVALID_VALUE' and x[3] == 3 and x[6] == 1 for x in r), r
assert [x[4] for x in r] == [1, 2, 3] and r[0][5] == a and r[1][5] == 0xdeadbeef000, r
assert r[0][7].startswith('freed already') and r[2][7].startswith('inside the live'), r
for x in r:
    assert db.execute('select count(*) from stacks where process_id = 1 and stack_id = ?', (x[8],)).fetchone()[0] > 0, x
PY"

# --context none: counted and kept, without stacks
CUMEMHIST_CONTEXT=none "$CMH" record -q -o nost.cmh -- "$B/tests/badfree" >/dev/null 2>&1
"$CMH" summary --json nost.cmh >nost.json 2>/dev/null
check "--context none: the failed calls kept, with no stack" "py <<'PY'
import json
e = json.load(open('nost.json'))[0]['driver_errors']
assert len(e) == 1 and e[0]['count'] == 3 and len(e[0]['calls']) == 3, e
assert all(c['site'] is None for c in e[0]['calls']), e
PY"

# exported to PyTorch's pickle (which cumemhist reads back): the failed calls go with it, in the
# cumemhist dict memory_viz ignores.  The pickle kept none: its reports said nothing of them
"$CMH" export --format memviz bf.cmh -o bf.pickle >/dev/null 2>&1
"$CMH" leaks bf.pickle >pleaks.txt 2>&1
"$CMH" summary bf.pickle >psum.txt 2>&1
for f in pleaks psum; do
    check "$f (the pickle): the same note, its addresses and lines as the .cmh's" \
        "[ \$(grep -c 'driver calls failed' $f.txt) -eq 1 ] && grep -q '^note: 3 driver calls failed' $f.txt &&
         grep -q 'cuMemFree returned CUDA_ERROR_INVALID_VALUE 3 times' $f.txt &&
         grep -q '^        $A: freed already (a double free), at main' $f.txt &&
         grep -q '^        0xdeadbeef000: never allocated while recorded, at main' $f.txt &&
         grep -q 'not its base, at main (.*badfree.c:$L3) (thread 1)' $f.txt"
done
"$CMH" summary --json bf.pickle >psum.json 2>/dev/null
check "summary --json of the pickle: driver_errors as the .cmh's (its sites symbolized by the export)" "py <<'PY'
import json
a, b = json.load(open('sum.json'))[0]['driver_errors'], json.load(open('psum.json'))[0]['driver_errors']
assert all(c['site'].startswith('main (') for c in b[0]['calls']), b
for e in a + b:
    for c in e['calls']:
        del c['site']
assert a == b, (a, b)
PY"
check "Python's pickle.load reads it: cumemhist.driver_errors (call, result, count, sites)" "py - $A $INNER <<'PY'
import pickle, sys
a, inner = int(sys.argv[1], 16), int(sys.argv[2], 16)
d = pickle.load(open('bf.pickle', 'rb'))['cumemhist']['driver_errors']
assert len(d) == 1 and d[0][:3] == ('cuMemFree', 1, 3) and [s[0] for s in d[0][3]] == [a, 0xdeadbeef000, inner], d
assert all(s[2] == 1 and s[4] and s[4][0]['name'] for s in d[0][3]), d
PY"
"$CMH" export --format memviz nost.cmh -o nost.pickle >/dev/null 2>&1
"$CMH" summary --json nost.pickle >nostp.json 2>/dev/null
check "--context none, its pickle: the failed calls kept, with no stack" "py <<'PY'
import json
e = json.load(open('nostp.json'))[0]['driver_errors']
assert len(e) == 1 and e[0]['count'] == 3 and len(e[0]['calls']) == 3, e
assert all(c['site'] is None for c in e[0]['calls']), e
PY"

# a cleared history (cmh_record_memory_history's clear_history) empties the failed calls too, as it
# empties the entries: the record had kept the 3 before the clear beside the 2 after it
"$CMH" record -q -o clear.cmh -- "$B/tests/badfree" clear >clear.out 2>&1
"$CMH" summary --json clear.cmh >clear.json 2>/dev/null
CA=$(sed -n 's/^a=\(0x[0-9a-f]*\) b=.*/\1/p' clear.out)
check "a cleared history: only the 2 failed calls after the clear ($(grep 'after clear' clear.out))" "py - $CA <<'PY'
import json, sys
a = int(sys.argv[1], 16)
e = json.load(open('clear.json'))[0]['driver_errors']
assert len(e) == 1 and e[0]['count'] == 2 and len(e[0]['calls']) == 2, e
assert 0xdeadbeef000 not in [c['address'] for c in e[0]['calls']] and a in [c['address'] for c in e[0]['calls']], e
PY"
# recording off (enabled off, then on again): the failed calls made while off are not noted
"$CMH" record -q -o off.cmh -- "$B/tests/badfree" off >off.out 2>&1
"$CMH" summary off.cmh >off.txt 2>&1
check "recording off: the 3 failed calls while off not noted ($(grep -c 'driver call' off.txt))" \
    "grep -qx 'double free -> 1' off.out && ! grep -q 'driver call' off.txt"

# a record without failed calls reads as before: no note, an empty list
"$CMH" record -q -o clean.cmh -- "$B/tests/ctx_gone" destroy >/dev/null 2>&1
"$CMH" summary clean.cmh >clean.txt 2>&1
"$CMH" summary --json clean.cmh >clean.json 2>/dev/null
check "a record without failed calls: no note, driver_errors []" \
    "! grep -q 'driver call' clean.txt && py -c \"import json; assert all(d['driver_errors'] == [] for d in json.load(open('clean.json')))\""

# a free the driver refused of memory still live (pinned host memory, refused under
# FAKECUDA_FAIL): the recorder records the free before the call and puts the block back when it
# is refused.  The note said 'freed already (a double free)' in 7 recordings of 8: the failed
# call's time was mapped to ns by another reference than the entries', tens of ns apart, and
# fell before the block was put back.  stats --device 0 said 'never allocated while recorded':
# it judged by memory_viz's shape, which has no pinned host memory.  Three recordings.
for i in 1 2 3; do
    FAKECUDA_FAIL=cuMemFreeHost "$CMH" record -q -o bfh$i.cmh -- "$B/tests/badfree" host >bfh$i.out 2>&1
    H=$(sed -n 's/^h=//p' bfh$i.out)
    "$CMH" summary bfh$i.cmh >bfh$i.sum 2>&1
    check "host $i: the refused cuMemFreeHost of live pinned memory ($H) reads live in the trace, not a double free" \
        "grep -qx 'host free -> 1' bfh$i.out && grep -q '^        $H: live in the trace, at main' bfh$i.sum"
done
"$CMH" stats --device 0 bfh3.cmh >bfh3.stats0 2>&1
check "host: stats --device 0 judges it by the whole trace, as stats does" "grep -q '^        $H: live in the trace, at main' bfh3.stats0"
# one site wording for one fact: summary, stats and owners named a failed call's site "main
# (badfree)" (they symbolize nothing) where frag, oom and leaks said "main (.../badfree.c:67)".
# Every report's note, and every --json's "site", names it by cmh_driver_error_site, symbolized
L4=$(grep -n 'cuMemFreeHost(h)' "$SRC/tests/badfree.c" | head -1 | cut -d: -f1)
for c in summary stats owners frag oom leaks; do "$CMH" $c bfh3.cmh >site.$c 2>&1; done
cp bfh3.stats0 site.stats0
for c in summary oom leaks trace; do "$CMH" $c --json bfh3.cmh >site.$c.json 2>/dev/null; done
check "host: every report names the refused calls' sites alike, by file and line ($(grep -ho 'first at [^(]*([^)]*)' site.* | sort | uniq -c | tr '\n' ';'))" "py - $L1 $L4 <<'PY'
import json, re, sys
l1, l4 = sys.argv[1], sys.argv[2]
notes = {}
for c in ('summary', 'stats', 'stats0', 'owners', 'frag', 'oom', 'leaks'):
    t = open('site.' + c).read()
    t = t[t.index('driver calls failed'):]
    notes[c] = re.findall(r'(?:first at|, at) (.*?) \(thread \d+\)', t)
ref = notes['leaks']
assert len(ref) == 6 and ref[0].endswith('badfree.c:%s)' % l1) and ref[4].endswith('badfree.c:%s)' % l4), ref
for c, v in notes.items():
    assert v == ref, (c, v, ref)
for c in ('summary', 'oom', 'leaks', 'trace'):
    d = json.load(open('site.%s.json' % c))[0]['driver_errors']
    sites = [x['site'] for e in d for x in e['calls']]
    assert sites == [r for i, r in enumerate(ref) if i not in (0, 4)], (c, sites, ref)
PY"
finish
