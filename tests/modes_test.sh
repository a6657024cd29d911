#!/bin/sh
# modes_test.sh BUILD_DIR SOURCE_DIR - what each recording mode lets the reports say, and what
# they say when the mode withholds something.  samples/leaky keeps 4 MiB a step (10 steps, from
# load_batch) and frees its activations; recorded under --enabled all|state and --context
# none|state|alloc|all.
TEST=modes . "$(dirname "$0")/testlib.sh"
P=$B/samples/leaky
SITE='load_batch (.*leaky.c:22)'

for m in "all all" "all none" "all state" "all alloc" "state all"; do
    set -- $m
    "$CMH" record -q --enabled $1 --context $2 -o "$1-$2.cmh" -- "$P" >/dev/null 2>&1 || bad "record --enabled $1 --context $2"
done

# enabled=all, context=all: peaks at an entry, every site named
"$CMH" peak all-all.cmh >p.txt 2>&1
grep -q '^peak allocated: .* at entry ' p.txt && grep -q "$SITE" p.txt && ! grep -q 'no stack' p.txt &&
    ok "all/all: the peak at an entry, its sites named" || bad "all/all peak: $(cat p.txt)"

# enabled=state: no history, so no peak; JSON says null, not the end state dressed as a peak
"$CMH" peak state-all.cmh >p.txt 2>&1
grep -q '^peak: not known: no history' p.txt && ! grep -q 'before the first entry' p.txt && grep -q "$SITE" p.txt &&
    ok "state: no peak claimed, the end state and its sites shown" || bad "state peak: $(cat p.txt)"
"$CMH" peak --json state-all.cmh | py -c "
import json, sys
d = json.load(sys.stdin)[0]
assert d['history'] is False and d['peak_allocated'] is None and d['end']['allocated'] == 40 << 20, d"
check "state: peak --json has history false and null peaks" "[ $? -eq 0 ]"
"$CMH" summary state-all.cmh >s.txt 2>&1
grep -q '^| Allocated memory      |  40960 KiB |' s.txt && ok "state: summary still prints the end state" || bad "state summary"
# ... and only the end state: the replay of a record with no entries would give the end as the
# peak, its blocks as allocated and nothing freed, none of which the record says; the OOMs it
# counted all the same (0 here; as PyTorch's num_ooms, counted regardless of history)
grep -q '^| Allocated memory      |  40960 KiB |          - |          - |          - |$' s.txt &&
    grep -q '^|            CUDA OOMs: 0  *|        cudaMalloc retries: -  *|$' s.txt && grep -q '^note: no history' s.txt &&
    grep -q 'and the OOMs, counted all the same' s.txt &&
    ok "state: summary's peak, totals and retry cells read '-', the OOMs counted, with a note" || bad "state summary invents figures: $(sed -n 4,9p s.txt)"
"$CMH" summary all-all.cmh >s.txt 2>&1
! grep -q ' - |' s.txt && ! grep -q '^note: no history' s.txt && ok "all: summary's cells all figures" || bad "all summary: $(cat s.txt)"
"$CMH" summary --json state-all.cmh | py -c "
import json, sys
d = json.load(sys.stdin)[0]
a = d['stats']['allocated_bytes.all']
assert d['history'] is False and a == {'current': 40 << 20, 'peak': None, 'allocated': None, 'freed': None}, d
assert d['num_ooms'] == 0 and d['num_alloc_retries'] is None, d"
check "state: summary --json has the current figures and the OOMs counted, null for the rest" "[ $? -eq 0 ]"

# enabled=state keeps no trace, so an OOM the program hit is not in it, but the recorder counts
# them all the same (tests/lifecycle_test.sh: a device's 2): none here, said as counted
"$CMH" oom state-all.cmh >o.txt 2>&1
grep -q 'device 0: no out-of-memory error (counted without history: recorded with enabled=state)' o.txt &&
    ok "state: oom says none was counted, without history" || bad "state oom: $(cat o.txt)"
"$CMH" oom all-all.cmh | grep -q 'no out-of-memory error in the record' && ok "all: oom says there was none" || bad "all oom"
"$CMH" oom --json state-all.cmh | py -c "
import json, sys
d = json.load(sys.stdin)[0]
assert d['history'] is False and d['ooms'] is None and d['num_ooms'] == 0, d"
check "state: oom --json has null ooms (not an empty list), and the count, 0" "[ $? -eq 0 ]"

# the report page says what summary and peak say: the cards and headings of the end, not a peak
"$CMH" report --static state-all.cmh -o st.html 2>/dev/null
grep -q '<b>not known</b><span>peak allocated (no history)' st.html && grep -q '<b>0</b><span>out-of-memory errors' st.html &&
    grep -q 'Live at the end (no history' st.html && ! grep -q 'Live at the allocated peak' st.html && ! grep -q 'entry -1' st.html &&
    ok "state: report's peak card says not known, its OOM card the count, its tables are of the end" || bad "state report: $(grep -o '<div class="r-card">.*</div>' st.html | head -c 600)"

# context=none: no stacks anywhere, and the reports say why
"$CMH" peak all-none.cmh >p.txt 2>&1
grep -q '<no stack: recorded with context none>' p.txt && ok "none: '<no stack: recorded with context none>'" ||
    bad "none peak: $(grep -i stack p.txt)"
grep -q '<no stack: recorded with context none>  \[\]' p.txt && bad "none peak: an empty owner '[]' after the site" || ok "none: no empty owner brackets"
"$CMH" leaks all-none.cmh 2>&1 | grep -q ' \[\]$' && bad "none leaks: an empty owner '[]'" || ok "none leaks: no empty owner brackets"

# context=state: the live blocks keep their stacks (PyTorch's meaning): the end and the still-live
# part of the peak are named, what was freed is said to have no stack for that reason
"$CMH" leaks all-state.cmh >l.txt 2>&1
grep -q "$SITE" l.txt && ! grep -q 'no stack' l.txt && ok "state context: leaks names the live blocks' site" ||
    bad "state context leaks: $(cat l.txt)"
"$CMH" peak all-state.cmh >p.txt 2>&1
grep -q "$SITE" p.txt && grep -q '<no stack: context state keeps the stacks of blocks live at the end only>' p.txt &&
    ok "state context: at the peak, the survivors named, the rest said why" || bad "state context peak: $(cat p.txt)"
"$CMH" peak --json all-state.cmh | py -c "
import json, sys
d = json.load(sys.stdin)[0]
named = sum(x['bytes'] for x in d['sites_at_peak'] if x.get('site'))
assert named == 40 << 20, d['sites_at_peak']"
check "state context: the 40 MiB still live at the end carry their site at the peak" "[ $? -eq 0 ]"

# context=alloc: allocations keep stacks (frees need none)
"$CMH" peak all-alloc.cmh >p.txt 2>&1
grep -q "$SITE" p.txt && ! grep -q 'no stack' p.txt && ok "alloc: sites named" || bad "alloc peak: $(cat p.txt)"

# the same program gives the same verdict in every mode that keeps a history and stacks (with
# context none every block is one group, the leak mixed with memory freed at the end)
for m in all-all all-state all-alloc; do
    "$CMH" leaks --fail-on-leak $m.cmh >/dev/null 2>&1
    rc=$?
    [ $rc -eq 3 ] && ok "$m: leaks --fail-on-leak exits 3 (the leak found)" || bad "$m: leaks --fail-on-leak exit $rc"
done
# without history, the gate cannot pass
"$CMH" leaks --fail-on-leak state-all.cmh >l.txt 2>&1
rc=$?
[ $rc -ne 0 ] && ! grep -qi 'no site kept growing' l.txt && ok "state: leaks --fail-on-leak does not pass (exit $rc)" ||
    bad "state: the leak gate passed: exit $rc, $(cat l.txt)"

finish
