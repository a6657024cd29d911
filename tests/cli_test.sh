#!/bin/sh
# cli_test.sh BUILD_DIR SOURCE_DIR - the cumemhist command end to end on the fake driver: record, exit
# status and signal forwarding, file naming across processes, OOM dumps, and the one-line
# errors on damaged snapshots.
TEST=cli . "$(dirname "$0")/testlib.sh"
S=$B/samples

# record + summary on the leaking sample
"$CMH" record -o leak.cmh -- "$S/leaky" 5 >out.txt 2>err.txt
rc=$?
check "record forwards exit 0" "[ $rc -eq 0 ]"
check "record names the file it wrote" "grep -q 'cumemhist: wrote .*leak.cmh' err.txt"
check "no claim file left" "[ ! -e leak.cmh.claim ]"
"$CMH" summary leak.cmh >sum.txt 2>&1
check "summary: 20 MiB still allocated" "grep -q '^| Allocated memory      |  20480 KiB |  96256 KiB |' sum.txt"
check "summary: 5 live segments" "grep -q '^| GPU reserved segments |       5    |' sum.txt"
# a plain C program's record: named like every report, and not titled as PyTorch's allocator's
check "summary of a driver record names its file and process first" "head -1 sum.txt | grep -q '^leak.cmh: pid [0-9]* on .*leaky 5\$'"
check "summary of a driver record is not titled PyTorch's" "grep -q '^|                          CUDA memory summary, device ID 0  ' sum.txt && ! grep -q PyTorch sum.txt"
# a snapshot piped in: "-" is standard input, for every reading command (it read '-: No such file or directory')
cat leak.cmh | "$CMH" summary - >sumin.txt 2>&1
check "summary - reads the snapshot from standard input, as summary FILE does" \
    "grep -q '^-: pid [0-9]* on .*leaky 5\$' sumin.txt && grep -qx -- '-: the process exited with status 0; this snapshot was written at its exit' sumin.txt &&
     [ \"\$(tail -n +3 sumin.txt)\" = \"\$(tail -n +3 sum.txt)\" ]"
"$CMH" peak - </dev/null >/dev/null 2>in.err
rc=$?
check "peak - of an empty standard input: says so, exit 1 ($(cat in.err))" "[ $rc -eq 1 ] && grep -q '^cumemhist: -: standard input is empty' in.err"
cat leak.cmh | "$CMH" diff - - >/dev/null 2>in.err
rc=$?
check "diff - -: standard input is read once, and it says so" "[ $rc -eq 1 ] && grep -q 'standard input was read already' in.err"
"$CMH" summary --json leak.cmh >sum.json
check "summary --json exact integers" "grep -q '\"allocated_bytes.all\": {\"current\": 20971520, \"peak\": 98566144' sum.json"
env -u LD_PRELOAD python3 -c "import json,sys; json.load(open('sum.json'))" 2>/dev/null && ok "summary --json parses" || bad "summary --json parses"

# a path JSON must escape
cp leak.cmh 'we"ird.cmh'
"$CMH" summary --json 'we"ird.cmh' >weird.json
env -u LD_PRELOAD python3 -c "import json, sys; assert json.load(open('weird.json'))[0]['file'] == sys.argv[1]" 'we"ird.cmh' 2>/dev/null &&
    ok "summary --json escapes the path" || bad "summary --json escapes the path"

# options each command takes, and only those
"$CMH" peak --fail-on-leak leak.cmh >/dev/null 2>perr.txt
check "peak refuses an option it does not have" "[ $? -eq 2 ] && grep -q \"unknown option '--fail-on-leak'\" perr.txt"
"$CMH" leaks --top 0 leak.cmh >/dev/null 2>&1
check "a value out of range is refused" "[ $? -eq 2 ]"
# a missing argument is one line that says what is missing, not the whole help on stderr
"$CMH" record >/dev/null 2>noprog.txt
rc=$?
check "record with no program: one line that says so, status 2 ($(cat noprog.txt))" \
    "[ $rc -eq 2 ] && [ \$(wc -l <noprog.txt) -eq 1 ] && grep -q '^cumemhist: record: no program to run (usage: cumemhist record ' noprog.txt"
"$CMH" diff leak.cmh >/dev/null 2>noarg.txt
rc=$?
check "diff with one snapshot: one line, status 2 ($(cat noarg.txt))" \
    "[ $rc -eq 2 ] && [ \$(wc -l <noarg.txt) -eq 1 ] && grep -q '^cumemhist: diff: too few arguments (usage: cumemhist diff \\[options\\] BEFORE AFTER' noarg.txt"
"$CMH" help summary | grep -q '^usage: cumemhist summary'
check "cumemhist help CMD is CMD --help" "[ $? -eq 0 ]"
"$CMH" --help | grep -qi chrome
check "the top-level help names chrome" "[ $? -eq 0 ]"

# exit status and signals are forwarded
"$CMH" record -q -- sh -c 'exit 7'
check "record forwards exit 7" "[ $? -eq 7 ]"
"$CMH" record -- sh -c 'exit 0' 2>err2.txt
check "says when nothing was written" "grep -q 'no snapshot written' err2.txt"
# no CUDA driver on the machine (this one, outside the fake driver's path): the program cannot
# load, ld.so exits 127, and record says why and how to run it on the build's fake driver
# (it said only "no process called a CUDA allocation entry point")
if ! env LD_LIBRARY_PATH= ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    env LD_LIBRARY_PATH= "$CMH" record -o nodrv.cmh -- "$S/leaky" 1 >/dev/null 2>nodrv.txt
    rc=$?
    check "no CUDA driver: record says so and names the fake driver ($(tail -2 nodrv.txt | tr '\n' ' '))" \
        "[ $rc -eq 127 ] && grep -q 'leaky exited 127 .* no libcuda.so.1 to load' nodrv.txt && grep -qF 'LD_LIBRARY_PATH=$B/fakecuda' nodrv.txt"
fi
# a program that cannot be run: its one line, not 'no snapshot written: no process called a CUDA
# allocation entry point' after it (trial5 #11)
"$CMH" record -o nx.cmh -- ./no-such-program-here 2>nx.txt
check "record of a program that cannot be run: exit 127, one line ($(tr '\n' '|' <nx.txt))" \
    "[ $? -eq 127 ] && [ \$(wc -l <nx.txt) -eq 1 ] && grep -qx 'cumemhist: cannot run ./no-such-program-here: No such file or directory' nx.txt"
"$CMH" record -- sh -c 'exit 127' 2>quiet127.txt
check "a program's own exit 127 with a driver at hand: no driver hint" "[ $? -eq 127 ] && ! grep -q 'no CUDA driver' quiet127.txt"
sh -c "\"$CMH\" record -q -- sh -c 'kill -TERM \$\$'"
check "record dies of the program's signal" "[ $? -eq 143 ]"

# a second run with the same -o replaces the first run's snapshot: said, not silent
"$CMH" record -o again.cmh -- "$S/leaky" 1 >/dev/null 2>again1.txt
"$CMH" record -o again.cmh -- "$S/leaky" 2 >/dev/null 2>again2.txt
check "record -o over an earlier run's file says it replaced it ($(cat again2.txt))" \
    "! grep -q replacing again1.txt && grep -q '^cumemhist: wrote .*again.cmh ([0-9]* bytes), replacing the file that was there before this run\$' again2.txt"

# several processes, one fixed path: none overwrites another
"$CMH" record -o multi.cmh -- sh -c "\"$S/leaky\" 1 >/dev/null & \"$S/leaky\" 2 >/dev/null; wait" 2>err3.txt
n=$(ls multi*.cmh 2>/dev/null | wc -l)
check "two processes, two files" "[ $n -eq 2 ] && [ -e multi.cmh ]"
check "record lists both" "[ \$(grep -c 'cumemhist: wrote' err3.txt) -eq 2 ]"
"$CMH" record -q -o seq.cmh -- sh -c "\"$S/leaky\" 1 >/dev/null; \"$S/leaky\" 2 >/dev/null"
check "one after another: the second does not overwrite the first" "[ \$(ls seq*.cmh | wc -l) -eq 2 ]"
"$CMH" record -o 'rank%r.%p.cmh' -- env RANK=3 "$S/leaky" 1 >/dev/null 2>&1
check "%r and %p expand" "ls rank3.*.cmh >/dev/null 2>&1"

# options reach the recorder
"$CMH" record -q -o small.cmh --max-entries 4 --context none -- "$S/leaky" 5 >/dev/null
"$CMH" summary small.cmh >small.txt
check "max-entries drops are reported" "grep -q 'dropped the 43 oldest entries' small.txt"
"$CMH" record --enabled bogus -- true 2>/dev/null
check "bad option value is refused" "[ $? -eq 2 ]"
"$CMH" record --help | grep -q -- '--max-entries'
check "record --help" "[ $? -eq 0 ]"

# SIGUSR1 dumps a running process, from the recorder's helper thread
"$CMH" record -q -o 'usr1.%p.cmh' -- "$S/leaky" 3 5 >usr1.out &
rpid=$!
i=0
while [ $i -lt 50 ] && ! grep -q leaked usr1.out 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -USR1 $rpid   # record forwards it to the program
i=0
while [ $i -lt 50 ] && ! ls usr1.*.cmh >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
check "SIGUSR1 dumps while the program runs" "ls usr1.*.cmh >/dev/null 2>&1 && kill -0 $rpid 2>/dev/null"
f=$(ls usr1.*.cmh 2>/dev/null | head -1)
"$CMH" summary "${f:-none}" 2>/dev/null | grep -q '^| GPU reserved segments |       3 '
check "the SIGUSR1 snapshot holds the 3 leaked segments" "[ $? -eq 0 ]"
kill $rpid 2>/dev/null
wait $rpid 2>/dev/null

# the first OOM is captured, the program's failure forwarded
FAKECUDA_CAPACITY=1G "$CMH" record -q -o oom.cmh -- "$S/oom_demo" >/dev/null
check "oom_demo exit 1 forwarded" "[ $? -eq 1 ]"
"$CMH" summary oom.cmh >oom.txt
check "summary counts the OOM" "grep -q 'CUDA OOMs: 1 ' oom.txt"

# the reports on the samples
"$CMH" leaks leak.cmh >leaks.txt
check "leaks names the leaking function with its bytes" "grep -q '20.0 MiB .*growing .*load_batch' leaks.txt"
"$CMH" leaks --json leak.cmh >leaks.json
n=$(py -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; print(len(d["sites"]))' leaks.json 2>/dev/null)
"$CMH" leaks --json --top 1 leak.cmh 2>/dev/null | grep -q "\"sites_left_out\": $((${n:-1} - 1))" && [ "${n:-0}" -ge 1 ] &&
    ok "leaks --json --top 1 says how many sites it left out ($((n - 1)))" || bad "leaks --json --top 1: no sites_left_out of $((${n:-1} - 1))"
"$CMH" peak --json --top 1 leak.cmh 2>/dev/null | grep -q '"sites_at_peak_left_out": [1-9]' &&
    ok "peak --json --top 1 says how many sites it left out" || bad "peak --json --top 1: no sites_at_peak_left_out"
check "leaks --json: exact bytes of the leak" "grep -q '\"bytes\": 20971520, \"blocks\": 5' leaks.json"
"$CMH" leaks --fail-on-leak leak.cmh >/dev/null
check "leaks --fail-on-leak exits 3" "[ $? -eq 3 ]"
"$CMH" oom oom.cmh >oomr.txt
check "oom: the failed request" "grep -q 'requested  *256.0 MiB (268435456 bytes)' oomr.txt"
check "oom: the culprit" "grep -q 'grow_model' oomr.txt && grep -q 'verdict: demand' oomr.txt"
"$CMH" peak leak.cmh >peak.txt
check "peak: bytes and the owners" "grep -q 'peak allocated: 94.0 MiB (98566144 bytes)' peak.txt && grep -q 'load_batch' peak.txt"
"$CMH" record -q -o leak10.cmh -- "$S/leaky" 10 >/dev/null
"$CMH" diff leak.cmh leak10.cmh --fail-if-peak-grows 5 >diff.txt
check "diff --fail-if-peak-grows exits 3 on growth" "[ $? -eq 3 ] && grep -q 'peak allocated' diff.txt"
"$CMH" diff leak.cmh leak.cmh --fail-if-peak-grows 5 >/dev/null
check "diff of a snapshot with itself passes the gate" "[ $? -eq 0 ]"
# a record with no history (enabled=state) has no peak: diff says so, not its end state as the
# peak with a percentage (PyTorch's history-off snapshot read 'peak allocated 86.7 MiB, -77.4%'),
# and the gate, which cannot look, fails: not as a growth (3) but as a check not made (5)
"$CMH" record -q --enabled state -o state.cmh -- "$S/leaky" 3 >/dev/null
"$CMH" diff leak.cmh state.cmh >dstate.txt 2>&1
check "diff against a record with no history: its peaks are not known, its end is compared" \
    "grep -q '^peak allocated .* not known  *-\$' dstate.txt && grep -q '^allocated at the end .*12.0 MiB' dstate.txt && grep -q 'state.cmh: no history on device 0' dstate.txt"
"$CMH" diff --json leak.cmh state.cmh >dstate.json
env -u LD_PRELOAD python3 -c "import json; d = json.load(open('dstate.json'))[0]; assert d['peak_growth_pct'] is None and d['peak_allocated']['after'] is None and d['peak_allocated']['delta'] is None and d['peak_allocated']['before'] > 0 and d['allocated_end']['after'] == 12 << 20 and all(x['peak_after'] is None for x in d['sites']), d"
check "diff --json against a record with no history: null peaks, no growth" "[ $? -eq 0 ]"
"$CMH" diff state.cmh leak10.cmh --fail-if-peak-grows 5 >/dev/null 2>dgate.err
check "diff --fail-if-peak-grows with a peak not known: fails with 5 (could not check), not 3 (grew), and says why" "[ $? -eq 5 ] && grep -q 'cannot be checked on device 0' dgate.err"
check "diff signs a growth in bytes as it signs counts ('+82.0 MiB', not '82.0 MiB')" \
    "grep -q '^peak allocated .* +[0-9.]* MiB  *+[0-9.]*%\$' diff.txt"
# a device one record lacks is absent there, not 0 B (-100.0%); one listed with no history (PyTorch's
# two-device snapshot, device 0 with only its 'snapshot' entry) has a peak not known, not '0 B ... new'
py - <<'PY' || bad "writing two.pickle failed"
import pickle
blk = {'size': 1 << 20, 'requested_size': 1 << 20, 'address': 1 << 40, 'state': 'active_allocated', 'frames': []}
seg = {'device': 1, 'address': 1 << 40, 'total_size': 1 << 20, 'allocated_size': 1 << 20, 'active_size': 1 << 20,
       'requested_size': 1 << 20, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False,
       'frames': [], 'blocks': [blk]}
snap = {'action': 'snapshot', 'addr': 0, 'size': 0, 'stream': 0, 'time_us': 1}
pickle.dump({'segments': [seg], 'device_traces': [[snap], []]}, open('two.pickle', 'wb'), protocol=4)
PY
"$CMH" diff two.pickle leak.cmh >dtwo.txt 2>&1
check "diff: a device only one record has reads 'absent' on the other side, and says so" \
    "grep -q '^allocated at the end  *1.0 MiB  *absent  *-\$' dtwo.txt && grep -q '^leak.cmh: no device 1 in this record' dtwo.txt && ! grep -q '100.0%' dtwo.txt"
check "diff: a device listed with no history has a peak not known, not '0 B ... new'" \
    "sed -n '/^device 0 /,/^segments/p' dtwo.txt | grep -q '^peak allocated  *not known  *94.0 MiB  *-\$'"
"$CMH" diff --json two.pickle leak.cmh | py -c "import json,sys; d=json.load(sys.stdin); assert d[0]['in_before'] and d[0]['peak_allocated']['before'] is None and not d[1]['in_after'], d" &&
    ok "diff --json: in_before/in_after, a null peak where not known" || bad "diff --json of a device one side lacks"
"$CMH" peak leak.cmh leak10.cmh >multi.txt
check "peak of several snapshots: a row each and the worst" "grep -q '^worst: leak10.cmh' multi.txt"
"$CMH" frag leak.cmh >/dev/null
check "frag runs" "[ $? -eq 0 ]"
for c in record summary peak leaks frag oom diff stats trace export; do
    "$CMH" $c --help >/dev/null 2>&1 || bad "$c --help"
done
ok "--help for every command"

# an empty snapshot: summary prints memory_summary()'s layout, Cur Usage 0 and '-' where a count is
# not known (an empty trace is also what history off leaves), as oom says the OOMs are not known
# (it printed PyTorch's table of zeros, 'CUDA OOMs: 0', beside oom's 'not known')
if [ -n "${CMH_PYTORCH_FIXTURES:-}" ] && [ -d "$CMH_PYTORCH_FIXTURES" ]; then
    "$CMH" summary "$CMH_PYTORCH_FIXTURES/resnet50_empty_0seg_4dev_expandable_settings.pickle" >empty.txt
    # a PyTorch snapshot: PyTorch's text and nothing else (the table's first line first)
    check "summary of a PyTorch snapshot: PyTorch's title, no line before the table" "head -2 empty.txt | tr -d '\n' | grep -q '^|=*||                  PyTorch CUDA memory summary, device ID 0 '"
    check "empty snapshot: summary is the table, Cur Usage 0, '-' for the rest" "grep -q '^| Allocated memory      |      0 B   |          - |          - |          - |\$' empty.txt && [ \$(wc -l <empty.txt) -ge 40 ]"
    "$CMH" oom "$CMH_PYTORCH_FIXTURES/resnet50_empty_0seg_4dev_expandable_settings.pickle" >empty_oom.txt 2>/dev/null
    "$CMH" summary --json "$CMH_PYTORCH_FIXTURES/resnet50_empty_0seg_4dev_expandable_settings.pickle" >empty_sum.json 2>/dev/null
    "$CMH" oom --json "$CMH_PYTORCH_FIXTURES/resnet50_empty_0seg_4dev_expandable_settings.pickle" >empty_oom.json 2>/dev/null
    check "empty snapshot: summary and oom agree the OOM count is not known ('CUDA OOMs: -', null; $(head -c 300 empty_oom.txt))" \
        "grep -q '^|            CUDA OOMs: -            |        cudaMalloc retries: -         |\$' empty.txt &&
         grep -q 'out-of-memory errors: not known' empty_oom.txt &&
         py -c 'import json; s = json.load(open(\"empty_sum.json\"))[0]; o = json.load(open(\"empty_oom.json\"))[0]; assert s[\"num_ooms\"] is None and o[\"ooms\"] is None, (s, o)'"
    "$CMH" peak "$CMH_PYTORCH_FIXTURES/resnet50_empty_0seg_4dev_expandable_settings.pickle" >empty2.txt
    check "empty snapshot: peak says so too" "grep -q 'no allocations recorded' empty2.txt"
fi

# a trace of one `snapshot` marker (PyTorch 2.0's ring of one entry, as the flexgen OOM-observer
# pickle): peak said "1 trace entry" then "no history (... or history off)"; it now says what the
# entry is and what is known (the end, which the peak was at least), in the words oom and summary use
py - <<'PY'
import pickle
M = 1 << 20
F = [{"name": "big", "filename": "/proj/a.py", "line": 3}]
blk = {"address": 1 << 40, "size": 6 * M, "requested_size": 6 * M, "state": "active_allocated", "frames": F}
seg = {"device": 0, "address": 1 << 40, "total_size": 6 * M, "allocated_size": 6 * M, "active_size": 6 * M, "requested_size": 6 * M,
       "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "frames": [], "blocks": [blk]}
tr = [{"action": "snapshot", "addr": 0, "size": 6 * M, "stream": 0}]
pickle.dump({"segments": [seg], "device_traces": [tr]}, open("marker.pickle", "wb"), protocol=4)
PY
for c in peak oom summary; do "$CMH" $c marker.pickle >marker_$c.txt 2>/dev/null; done
check "a trace of one snapshot marker: peak says why the peak is not known and what is known ($(sed -n 2p marker_peak.txt))" \
    "grep -q '^marker.pickle, device 0: 1 trace entry\$' marker_peak.txt &&
     grep -q '^peak: not known: no history (its trace holds only .snapshot. markers .*no allocation or free.*); only the state at the end is known, and the peak was at least it:\$' marker_peak.txt &&
     grep -q '^at the end:     allocated 6.0 MiB, reserved 6.0 MiB' marker_peak.txt && ! grep -q 'or history off' marker_peak.txt"
check "a trace of one snapshot marker: oom and summary give the same cause" \
    "grep -q 'out-of-memory errors: not known: no history (its trace holds only .snapshot. markers' marker_oom.txt &&
     grep -q '^note: no history on this device (its trace holds only .snapshot. markers' marker_summary.txt &&
     grep -q '^|            CUDA OOMs: -  ' marker_summary.txt"
if [ -n "${CMH_PYTORCH_FIXTURES:-}" ] && [ -d "$CMH_PYTORCH_FIXTURES" ]; then
    "$CMH" peak "$CMH_PYTORCH_FIXTURES/flexgen_torch20_oom_observer_block_history.pickle" >flex.txt 2>/dev/null
    check "flexgen (PyTorch 2.0, one snapshot entry): peak says why and the end it was at least ($(sed -n 2,3p flex.txt | tr '\n' ' '))" \
        "grep -q '^peak: not known: no history (its trace holds only .snapshot. markers.*the peak was at least it:\$' flex.txt &&
         grep -q '^at the end:     allocated 11.0 GiB, reserved 11.0 GiB' flex.txt"
fi

# a damaged pickle entry (size -5) is skipped and said so in one note, not dropped silently
py - <<'PY' || bad "writing neg.pickle failed"
import pickle
e = lambda a, addr, size: dict(action=a, addr=addr, size=size, stream=0, time_us=1, frames=[])
tr = [e("segment_alloc", 1 << 40, 2 << 20), e("alloc", 1 << 40, 1 << 20), e("alloc", (1 << 40) + (1 << 20), -5)]
pickle.dump({"segments": [], "device_traces": [tr]}, open("neg.pickle", "wb"), protocol=4)
PY
"$CMH" peak neg.pickle >neg.txt 2>neg.err
check "a pickle entry of size -5: skipped, one note says so ($(cat neg.err))" \
    "[ \"\$(grep -c 'note: neg.pickle: 1 trace entry was skipped' neg.err)\" = 1 ] && grep -q '^neg.pickle, device 0: 2 trace entries' neg.txt"

# an untimed record (PyTorch 2.0's snapshots have no time_us): every sentence names the entry
# alone ("at entry 5"), never a dash for the time; JSON says null wherever a time would be
env -u LD_PRELOAD python3 - untimed.pickle <<'PYEOF'
import pickle, sys
M, seg = 1 << 20, 0x7f0000000000
fr = lambda: [{"filename": "train.py", "line": 12, "name": "step"}]
e = lambda a, addr, size, **k: dict(action=a, addr=addr, size=size, stream=0, frames=fr(), **k)
trace = [e("segment_alloc", seg, 20 * M), e("alloc", seg, 8 * M), e("alloc", seg + 8 * M, 8 * M),
         e("free_requested", seg + 8 * M, 8 * M), e("free_completed", seg + 8 * M, 8 * M), e("oom", 0, 64 * M, device_free=4 * M)]
blocks = [{"address": seg, "size": 8 * M, "requested_size": 8 * M, "state": "active_allocated", "frames": fr()},
          {"address": seg + 8 * M, "size": 12 * M, "requested_size": 0, "state": "inactive", "frames": []}]
segs = [{"device": 0, "address": seg, "total_size": 20 * M, "allocated_size": 8 * M, "active_size": 8 * M, "requested_size": 8 * M,
         "stream": 0, "segment_type": "large", "is_expandable": False, "frames": fr(), "blocks": blocks}]
pickle.dump({"segments": segs, "device_traces": [trace]}, open(sys.argv[1], "wb"), protocol=4)
PYEOF
for c in peak oom frag owners ranks whatif; do "$CMH" $c untimed.pickle >"untimed.$c" 2>&1; done
check "untimed: no dash where a time would be (peak, oom, frag, owners, ranks, whatif)" \
    "! grep -n -e ', -\$' -e ', -)' -e ' at -' -e 'entry [0-9]*, -' untimed.peak untimed.oom untimed.frag untimed.owners untimed.ranks untimed.whatif"
check "untimed: peak and oom name the entry alone" \
    "grep -q '^peak allocated: 16.0 MiB (16777216 bytes) at entry 2\$' untimed.peak && grep -q 'out of memory #1 on device 0 at entry 5\$' untimed.oom &&
     grep -q 'out-of-memory error #1 (entry 5) asked' untimed.frag && grep -q ', peak reserved (entry 0): ' untimed.owners && grep -q 'the records have no times' untimed.ranks"
for c in peak oom owners trace ranks frag leaks; do "$CMH" $c --json untimed.pickle >"untimed.$c.json" 2>/dev/null; done
"$CMH" export -f json -o untimed.export.json untimed.pickle 2>/dev/null
check "untimed: export -f json leaves time_us out, as the pickle it came from" \
    "[ -s untimed.export.json ] && grep -q '\"action\": \"oom\"' untimed.export.json && ! grep -q time_us untimed.export.json"
env -u LD_PRELOAD python3 - <<'PYEOF' && ok "untimed: every time in JSON is null" || bad "untimed: a time in JSON is not null"
import json, sys
bad = []
def walk(x, where):
    if isinstance(x, dict):
        for k, v in x.items():
            if (k.endswith("_ns") or k == "seconds") and k not in ("gpu_time_ns",):
                if v is not None: bad.append(f"{where}.{k} = {v}")
            walk(v, where + "." + k)
    elif isinstance(x, list):
        for i, v in enumerate(x): walk(v, f"{where}[{i}]")
seen = 0
for c in ("peak", "oom", "owners", "trace", "ranks", "frag", "leaks"):
    d = json.load(open(f"untimed.{c}.json"))
    walk(d, c)
    seen += json.dumps(d).count("_ns\": null")
if bad or seen < 10:
    print("FAIL:", bad[:5], "nulls seen:", seen)
    sys.exit(1)
PYEOF

# a trace that begins mid-run (PyTorch's history turned on late, its old one-entry ring): its
# only entries free a block the trace never allocated; 12 segments of 2 MiB, one left empty
env -u LD_PRELOAD python3 - midrun.pickle <<'PYEOF'
import pickle, sys
M, seg = 1 << 20, 0x7f0000000000
fr = lambda: [{"filename": "train.py", "line": 7, "name": "load"}]
trace = [dict(action=a, addr=seg, size=2 * M, stream=0, time_us=1000 + i, frames=fr()) for i, a in enumerate(("free_requested", "free_completed"))]
segs = [{"device": 0, "address": seg + i * 2 * M, "total_size": 2 * M, "allocated_size": 2 * M * (i > 0), "active_size": 2 * M * (i > 0),
         "requested_size": 2 * M * (i > 0), "stream": 0, "segment_type": "large", "is_expandable": False, "frames": fr(),
         "blocks": [{"address": seg + i * 2 * M, "size": 2 * M, "requested_size": 2 * M, "state": "active_allocated" if i else "inactive",
                     "frames": fr()}]} for i in range(12)]
pickle.dump({"segments": segs, "device_traces": [trace]}, open(sys.argv[1], "wb"), protocol=4)
PYEOF
"$CMH" summary midrun.pickle >midrun.txt 2>&1
check "mid-run: summary says the trace begins mid-run, with the state the replay inferred before it" \
    "grep -q '^note: the trace begins mid-run: 24.0 MiB allocated and 24.0 MiB reserved before its first entry' midrun.txt"
# its Allocations total counts the 12 blocks live then as allocated (PyTorch's table): the note says them apart
check "mid-run: summary's note says the trace's allocations apart from the blocks live when it began" \
    "grep -q '^      then: 0 allocations in the trace, 12 more live when it began' midrun.txt"
"$CMH" summary --json midrun.pickle | py -c "
import json, sys
d = json.load(sys.stdin)[0]
assert d['history'] is True and d['before_first_entry'] == {'allocated': 24 << 20, 'reserved': 24 << 20, 'allocations': 12}, d
assert d['trace_allocations'] == 0 and d['stats']['allocation.all']['allocated'] == 12, d"
check "mid-run: summary --json gives the state before the first entry" "[ \$? -eq 0 ]"
"$CMH" summary leak.cmh | grep -q 'mid-run' && bad "a record from the start is called mid-run" || ok "a record from its start: no mid-run note"
# the report names the moment as owners and peak do (never "entry -1"), and says mid-run too
"$CMH" report --static midrun.pickle -o midrun.html 2>/dev/null
check "mid-run: the report's peak is 'before the first entry', never 'entry -1', and says mid-run" \
    "grep -q 'Who held the memory at the reserved peak (before the first entry)' midrun.html && ! grep -q 'entry -1' midrun.html &&
     grep -q 'The trace begins mid-run: 24.0 MiB allocated' midrun.html"
# its allocations card counts the trace's (none), not the 12 blocks live before it (trial5 #9)
check "mid-run: the report's allocations card counts the trace's, the blocks live before it apart" \
    "grep -q '<b>0</b><span>allocations in the trace, 12 more live when it began</span>' midrun.html &&
     ! grep -q 'allocations in the record' midrun.html"
# one OOM is 'out-of-memory error', not '1 out-of-memory errors' (trial5 #11)
"$CMH" report --static oom.cmh -o oomrep.html 2>/dev/null
check "report: one OOM's card in the singular" "grep -q '<b>1</b><span>out-of-memory error</span>' oomrep.html"
# frag --json lists every segment (a script sums them), and says what --top cut
"$CMH" frag --json midrun.pickle | py -c "
import json, sys
d = json.load(sys.stdin)[0]
assert len(d['segments']) == 12 and d['segments_total'] == 12 and d['segments_left_out'] == 0, d
assert sum(x['reserved'] for x in d['segments']) == d['reserved'], d"
check "frag --json: every segment, their sum the reserved figure" "[ \$? -eq 0 ]"
"$CMH" frag --json --top 5 midrun.pickle | py -c "
import json, sys
d = json.load(sys.stdin)[0]
assert len(d['segments']) == 5 and d['segments_total'] == 12 and d['segments_left_out'] == 7, d"
check "frag --json --top 5: five segments, and 7 left out said" "[ \$? -eq 0 ]"
"$CMH" frag midrun.pickle >midrun.frag
check "frag text: 10 segments by default, what the cut holds said ($(grep '^  \.\.\.' midrun.frag))" \
    "grep -q '^  ... 2 more segments (--top): 4.0 MiB reserved, 0 B of it free; 2 fully used, 0 partly used, 0 empty\$' midrun.frag"
# frag's table: its order said, and how many segments are fully used, listed or not (a 64 MiB
# segment with no free byte fell under '... 3 more segments (--top)' unsaid, behind 2 MiB ones
# listed by free bytes alone, ties by address)
env -u LD_PRELOAD python3 - fragorder.pickle <<'PYEOF'
import pickle, sys
M, base = 1 << 20, 0x7f0000000000
fr = [{"filename": "train.py", "line": 7, "name": "load"}]
def seg(i, size, used):
    a = base + i * 128 * M
    blocks = [{"address": a, "size": used, "requested_size": used, "state": "active_allocated", "frames": fr}]
    if size > used:
        blocks.append({"address": a + used, "size": size - used, "requested_size": 0, "state": "inactive", "frames": fr})
    return {"device": 0, "address": a, "total_size": size, "allocated_size": used, "active_size": used, "requested_size": used,
            "stream": 0, "segment_type": "large", "is_expandable": False, "frames": fr, "blocks": blocks}
# a 64 MiB segment fully used first; then 11 segments with 1 MiB free each: the last a 6 MiB one
segs = [seg(0, 64 * M, 64 * M)] + [seg(i, 2 * M, M) for i in range(1, 11)] + [seg(11, 6 * M, 5 * M)]
pickle.dump({"segments": segs, "device_traces": [[]]}, open(sys.argv[1], "wb"), protocol=4)
PYEOF
"$CMH" frag fragorder.pickle >fragorder.txt 2>&1
check "frag: the order said, every segment counted by use, the fully used one in the cut said ($(grep -e '^  12 segments' -e '^  listed' -e '^  \.\.\.' fragorder.txt | tr '\n' '|'))" \
    "grep -q '^  12 segments: 1 fully used (no free bytes, 64.0 MiB), 11 partly used, 0 empty (nothing allocated)\$' fragorder.txt &&
     grep -q '^  listed by trapped bytes (free that empty_cache() cannot give back), most first, then by free bytes, then by size, largest first; the first 10 (--top N for more):\$' fragorder.txt &&
     grep -q '^  ... 2 more segments (--top): 66.0 MiB reserved, 1.0 MiB of it free; 1 fully used, 1 partly used, 0 empty\$' fragorder.txt &&
     [ \"\$(grep -m1 '^  0x' fragorder.txt | awk '{print \$2, \$3}')\" = '6.0 MiB' ]"
"$CMH" frag --json fragorder.pickle | py -c "
import json, sys
d = json.load(sys.stdin)[0]
assert (d['segments_fully_used'], d['segments_partly_used'], d['segments_empty']) == (1, 11, 0), d
assert d['segments_order'] == 'trapped_desc,free_desc,reserved_desc,address' and d['segments'][0]['reserved'] == 6 << 20, d['segments'][0]"
check "frag --json: the segments counted by use and the order named" "[ \$? -eq 0 ]"
"$CMH" report --static fragorder.pickle -o fragorder.html 2>/dev/null
check "report: its segment table in frag's order, counted by use as frag counts them" \
    "grep -q '1 fully used (no free bytes, 64.0 MiB), 11 partly used, 0 empty (nothing allocated); listed by trapped bytes (free that empty_cache() cannot give back), most first, then by free bytes, then by size, largest first<' fragorder.html &&
     [ \"\$(grep -o '<tr><td class=\"n\">0x[0-9a-f]*' fragorder.html | head -1)\" = '<tr><td class=\"n\">0x7f0058000000' ]"

# fragmentation first: assignment2's one fragmented segment (255 MiB trapped, 81%) was listed 5th,
# under four empty 314 MiB segments that empty_cache() gives back (a stranger's trial)
if [ -n "${CMH_PYTORCH_FIXTURES:-}" ] && [ -d "$CMH_PYTORCH_FIXTURES" ]; then
    "$CMH" frag "$CMH_PYTORCH_FIXTURES/assignment2_training_trace.pickle" >a2frag.txt 2>&1
    check "frag: the segment with the most trapped bytes first, empty ones after ($(grep -m1 '^  0x' a2frag.txt))" \
        "grep -m1 '^  0x' a2frag.txt | grep -q '^  0xe0e200000 .* 255.4 MiB   255.4 MiB .*81.3%'"
fi

# damaged snapshots: one line naming the file and the byte, non-zero exit, no crash
size=$(wc -c <leak.cmh)
head -c $((size - 3)) leak.cmh >trunc.cmh
"$CMH" summary trunc.cmh >/dev/null 2>terr.txt
rc=$?
check "truncated: non-zero exit" "[ $rc -eq 1 ]"
check "truncated: one line with file and offset" "[ \$(wc -l <terr.txt) -eq 1 ] && grep -q '^cumemhist: trunc.cmh: truncated at byte $((size - 3)) (reading bytes $((size - 4))-$((size - 1)): 3 more bytes needed)' terr.txt"
# and says plainly what the missing end was ('it does not end with the checksum byte 29 announces'
# was hard to parse: trial5 #11)
check "truncated: the missing checksum said plainly ($(cat terr.txt))" \
    "grep -q '; byte [0-9]* says the file ends with a checksum, and it does not: the file is truncated or damaged\$' terr.txt"
printf 'garbage!' >garbage.cmh
"$CMH" summary garbage.cmh 2>gerr.txt
check "garbage: clear error" "[ $? -eq 1 ] && grep -q 'garbage.cmh: not a snapshot' gerr.txt"
# a ring that dropped one entry: 'the 1 oldest entry', not 'entries' (trial5 #11, plurals)
"$CMH" record -q -o r0.cmh -- "$S/leaky" 1 >/dev/null 2>&1
n0=$("$CMH" trace --json r0.cmh 2>/dev/null | py -c 'import json, sys; print(len(json.load(sys.stdin)[0]["entries"]))' 2>/dev/null)
"$CMH" record -q --max-entries $((n0 - 1)) -o r1.cmh -- "$S/leaky" 1 >/dev/null 2>&1
"$CMH" peak r1.cmh >r1.txt 2>&1; "$CMH" summary r1.cmh >>r1.txt 2>&1; "$CMH" report --static r1.cmh -o r1.html 2>/dev/null
check "a ring that dropped one entry: 'the 1 oldest entry' in peak, summary and the report ($(grep dropped r1.txt | tr '\n' '|'))" \
    "[ \$(grep -c 'the ring dropped the 1 oldest entry;' r1.txt) -eq 2 ] && grep -q 'The ring dropped the 1 oldest entry:' r1.html &&
     ! grep -q '1 oldest entries' r1.txt r1.html"
# cumemhist's own export -f json fed back: said to be JSON, which it writes and does not read (it
# said 'first byte 0x7b is neither a .cmh map nor a pickle PROTO': trial5 #11)
"$CMH" export -f json -o back.json leak.cmh 2>/dev/null
"$CMH" summary back.json 2>jerr.txt
check "export -f json read back: refused, said to be JSON, an export format ($(cat jerr.txt))" \
    "[ $? -eq 1 ] && grep -qx \"cumemhist: back.json: not a snapshot: JSON (byte 0 is '{'), an export format cumemhist writes and does not read back; read the .cmh or pickle it came from\" jerr.txt"
# a torch.save()d snapshot (a zip), a gzipped pickle and a protocol 0 or 1 pickle: each said what it
# is and what to do (each said 'first byte 0x50 (0x1f, 0x28, 0x7d) is neither a .cmh map nor a
# pickle PROTO': a stranger's trial)
printf 'PK\003\004rest of a zip' >tsave.pt
printf '\037\213\010\000gz' >snap.pickle.gz
printf '}q\000X\001\000\000\000aq\001K\001s.' >p1.pickle
printf '(dp0\nVa\np1\nI1\ns.' >p0.pickle
"$CMH" summary tsave.pt 2>zerr.txt; zrc=$?
"$CMH" summary snap.pickle.gz 2>>zerr.txt; zrc=$zrc$?
"$CMH" summary p1.pickle 2>>zerr.txt; zrc=$zrc$?
"$CMH" summary p0.pickle 2>>zerr.txt; zrc=$zrc$?
check "a zip, a gzip and protocol 0/1 pickles: each said, with what to do ($(tr '\n' '|' <zerr.txt))" \
    "[ $zrc = 1111 ] && grep -q 'tsave.pt: a zip archive, as torch.save() writes, not a snapshot: .*_dump_snapshot' zerr.txt &&
     grep -q 'snap.pickle.gz: gzip-compressed: uncompress it first' zerr.txt &&
     [ \$(grep -c 'a pickle of protocol 0 or 1 (no PROTO opcode at byte 0); .*protocol=4' zerr.txt) -eq 2 ] && ! grep -q neither zerr.txt"
# a flamegraph of a moment when nothing was live: said, not an empty file and exit 0 with no word
# (a stranger's --at oom on a device that held nothing then)
"$CMH" flamegraph "$F/h200b/kernels.cmh" --at end --folded >empty.folded 2>eerr2.txt; erc=$?
check "a flamegraph of nothing live: said on stderr ($(cat eerr2.txt))" \
    "[ $erc -eq 0 ] && [ ! -s empty.folded ] && grep -q 'kernels.cmh, device 0: nothing was live at the end (entry 3): the folded output is empty' eerr2.txt"
# a flight record given to a report: said to be one, with the command that reads it (it said
# 'first byte 0x43 is neither a .cmh map nor a pickle PROTO')
cp "$F/flight/killed-150.flight" k.flight
"$CMH" leaks k.flight 2>ferr.txt
check "a flight record given to leaks: said to be one, and 'cumemhist recover' named ($(cat ferr.txt))" \
    "[ \$? -eq 1 ] && grep -q 'k.flight: a flight record .*not a snapshot: .cumemhist recover FILE -o out.cmh' ferr.txt"
# a setting left in the environment is obeyed, and said (a stale CUMEMHIST_MAX_ENTRIES cut the
# history without a word, and the ring's note then advised --max-entries)
CUMEMHIST_MAX_ENTRIES=10 "$CMH" record -o env.cmh -- "$B/samples/leaky" >/dev/null 2>eerr.txt
check "record under CUMEMHIST_MAX_ENTRIES=10: said on stderr ($(head -1 eerr.txt))" \
    "grep -q '^cumemhist: note: CUMEMHIST_MAX_ENTRIES=10 from the environment is in force' eerr.txt"
CUMEMHIST_MAX_ENTRIES=10 "$CMH" record --max-entries 0 -o env.cmh -- "$B/samples/leaky" >/dev/null 2>eerr.txt
check "an option given: no note" "! grep -q 'from the environment' eerr.txt"
"$CMH" summary missing.cmh 2>merr.txt
check "missing file" "[ $? -eq 1 ] && grep -q 'missing.cmh: No such file' merr.txt"

# out of memory has its own exit status (not under a sanitizer: it reserves address space itself)
if [ -z "${LD_PRELOAD:-}" ]; then
    "$CMH" record -q -o big.cmh --context none -- "$S/multistream" 4 40000 >/dev/null 2>&1
    (ulimit -v 16000; "$CMH" summary big.cmh >/dev/null 2>oom.txt)
    rc=$?
    check "out of memory: exit 4 and says so" "[ $rc -eq 4 ] && grep -q 'out of memory' oom.txt"
fi

finish
