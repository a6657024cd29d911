#!/bin/sh
# truth_test.sh BUILD_DIR SOURCE_DIR - what the reports say is true, one check per class of
# fault: every device reported; the leak verdict the same on every run of a threaded program;
# filters that hide rows but never change totals; the requested peak; output errors on every
# command; JSON and --device on every report; file names, terminals and words.
TEST=truth . "$(dirname "$0")/testlib.sh"

# --- every device: a leak and an OOM only on device 1 ---
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G "$CMH" record -q -o mg.cmh -- "$B/samples/multigpu" 8 >mg.out
"$CMH" oom mg.cmh >oom.txt
grep -q 'out of memory #1 on device 1' oom.txt && grep -q 'device 0: no out-of-memory error' oom.txt &&
    grep -q 'requested by  *grow_kv_cache' oom.txt && ok "oom finds the OOM on device 1 and says device 0 had none" ||
    bad "oom of a 2-device record: $(head -3 oom.txt)"
# a driver-API program's uneven load: said, without advice about PyTorch's DataParallel (three.pickle's, oomstate_test, keeps it)
grep -q 'uneven load: device 1 held' oom.txt && ! grep -q 'DataParallel' oom.txt &&
    ok "oom of a driver-API record: the uneven load, no PyTorch advice" || bad "oom's uneven load of a driver-API record: $(grep -A1 uneven oom.txt)"
"$CMH" leaks mg.cmh >leaks.txt
grep -q '^mg.cmh, device 1: 64.0 MiB in 9 blocks' leaks.txt && grep -q 'growing.*cache_activations' leaks.txt &&
    grep -q '^mg.cmh, device 0: 32.0 MiB in 1 block still live' leaks.txt &&
    ok "leaks reports both devices, and device 1's leak" || bad "leaks of 2 devices: $(grep device leaks.txt)"
# (every command's two answers made first, then read by one Python: a Python start is slow)
for c in summary peak leaks frag oom stats trace; do
    "$CMH" $c --json mg.cmh >$c.all.json
    "$CMH" $c --json --device 1 mg.cmh >$c.1.json
done
# devs FILE...: each file's devices, "FILE d,d,..." a line ("FILE ?" where it does not read)
devs() {
    py - "$@" <<'EOF'
import json, sys
for f in sys.argv[1:]:
    try:
        print(f, ",".join(str(x["device"]) for x in json.load(open(f))))
    except Exception:
        print(f, "?")
EOF
}
devs summary.all.json summary.1.json peak.all.json peak.1.json leaks.all.json leaks.1.json frag.all.json frag.1.json \
    oom.all.json oom.1.json stats.all.json stats.1.json trace.all.json trace.1.json >devs.txt
for c in summary peak leaks frag oom stats trace; do
    n=$(sed -n "s/^$c\.all\.json //p" devs.txt)
    [ "$n" = "0,1" ] || { bad "$c --json: a list of every device (got '$n')"; continue; }
    n1=$(sed -n "s/^$c\.1\.json //p" devs.txt)
    [ "$n1" = "1" ] || bad "$c --json --device 1 (got '$n1')"
done && ok "summary, peak, leaks, frag, oom, stats, trace: --json is a list of every device; --device narrows it"
"$CMH" peak --device 5 mg.cmh 2>err.txt
[ $? -eq 2 ] && grep -q 'no device 5 in this snapshot (it has devices 0, 1)' err.txt && ok "--device of an absent device: exit 2 (a bad value), names the ones there" ||
    bad "--device 5: $(cat err.txt)"
"$CMH" summary mg.cmh | grep -c 'CUDA memory summary, device ID' | grep -qx 2 && ok "summary prints a table per device" ||
    bad "summary tables"
grep -q '^mg.cmh: pid [0-9]* on .*multigpu 8$' leaks.txt && "$CMH" peak --json mg.cmh | grep -q '"cmdline": ".*multigpu 8"' &&
    ok "reports name the recorded process (pid, host, command line)" || bad "process line: $(head -1 leaks.txt)"
"$CMH" diff --json mg.cmh mg.cmh | py -c "import json,sys; d=json.load(sys.stdin); assert [x['device'] for x in d]==[0,1]; assert d[1]['peak_requested']['before']>0" &&
    ok "diff compares device by device, the requested peak too" || bad "diff of 2 devices"

# --- the leak verdict: the same on every run, however the threads interleave ---
for mode in steps free; do
    leak=0 steady=0 i=0
    while [ $i -lt 20 ]; do
        rm -f l$i.cmh s$i.cmh
        "$CMH" record -q -o l$i.cmh -- "$B/tests/threaded_leak" leak 300 $mode >/dev/null 2>rec.err && "$CMH" leaks --fail-on-leak l$i.cmh >/dev/null
        if [ $? -eq 3 ]; then leak=$((leak + 1)); else echo "  ($mode run $i missed: $(cat rec.err) $("$CMH" leaks --json l$i.cmh 2>&1 | tr -d '\n' | cut -c1-600))"; fi
        "$CMH" record -q -o s$i.cmh -- "$B/tests/threaded_leak" steady 300 $mode >/dev/null 2>rec.err && "$CMH" leaks --fail-on-leak s$i.cmh >/dev/null
        if [ $? -eq 0 ]; then steady=$((steady + 1)); else
            echo "  ($mode steady run $i flagged: $(cat rec.err) $("$CMH" leaks --json s$i.cmh 2>&1 | py -c "import json,sys; d=json.load(sys.stdin)[0]; print([{k: v for k, v in x.items() if k != 'frames'} for x in d['sites']])" 2>&1 | cut -c1-1500))"
        fi
        i=$((i + 1))
    done
    [ $leak -eq 20 ] && [ $steady -eq 20 ] && ok "threaded leak ($mode): 20 of 20 runs say growing; its steady twin: 20 of 20 say none" ||
        bad "leak verdicts ($mode): $leak/20 leaking runs caught, $steady/20 steady runs cleared"
done

# --- which thread: numbered in the order the OS made the threads (the same every run, where the
# order they first allocate is a race), and named: its thread id and name.  100 iterations,
# free-running: the record as a whole has no loop, so the leak is judged over its thread's steps ---
i=0
while [ $i -lt 20 ]; do
    "$CMH" record -q -o t$i.cmh -- "$B/tests/threaded_leak" leak 100 free >/dev/null 2>&1
    "$CMH" leaks --json t$i.cmh >t$i.json 2>&1
    i=$((i + 1))
done
# the 20 runs' --json read by one Python (a run whose JSON does not read is a line of its own)
py - t[0-9].json t[0-9][0-9].json <<'EOF' | sort | uniq -c >threads.txt
import json, sys
for f in sys.argv[1:]:
    try:
        x = json.load(open(f))[0]["sites"][0]
        print(x["thread"], x["thread_name"], x["thread_tid"] > 0, "(tid " in x["says"])
    except Exception as e:
        print("%s: %r" % (f, e))
EOF
[ "$(wc -l <threads.txt)" -eq 1 ] && grep -q ' 20 1 worker 0 True True$' threads.txt &&
    ok "threaded leak: the leaking thread is thread 1 (its tid, 'worker 0') in 20 of 20 runs" || bad "thread numbers across runs: $(cat threads.txt)"

# a threaded record's Chrome trace: counter samples never go back in time on a track
"$CMH" export l0.cmh -o l0.trace.json && py - l0.trace.json <<'PY' && ok "chrome export of a threaded record: counters in time order per track" || bad "chrome counters out of order"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {}
for e in ev:
    if e["ph"] == "C":
        tracks.setdefault((e["pid"], e["name"]), []).append(e["ts"])
assert tracks and all(t == sorted(t) for t in tracks.values()), tracks.keys()
PY

# --- the leak verdict on real records: judged by steps, the same words in leaks, --json and report ---
"$CMH" leaks --fail-on-leak "$F/h200/leaky.cmh" >lk.txt 2>/dev/null
[ $? -eq 3 ] && grep -q '^steps: 10 detected from the allocation pattern' lk.txt && grep -q 'growing: +4.0 MiB per step over the last 9 steps' lk.txt &&
    ok "leaky on an H200: 10 steps from its pattern, load_batch growing +4.0 MiB per step, exit 3" || bad "leaky.cmh verdict: $(cat lk.txt)"
"$CMH" leaks --fail-on-leak "$F/h200/torch_exp.pickle" >lk.txt 2>/dev/null
[ $? -eq 0 ] && grep -q '^steps: 20 from Optimizer.step annotations' lk.txt && ! grep -q 'growing' lk.txt &&
    ok "a 20-step PyTorch run: steps from its Optimizer.step annotations, nothing growing, the gate passes" || bad "torch_exp.pickle verdict: $(cat lk.txt)"
"$CMH" leaks --fail-on-leak "$F/h200/torch_plain.cmh" >lk.txt 2>/dev/null
[ $? -eq 5 ] && grep -q 'growth cannot be judged: the steps are unknown' lk.txt &&
    ok "a driver-level record with no loop to see: growth cannot be judged, the gate exits 5" || bad "torch_plain.cmh: $(cat lk.txt)"
"$CMH" record -q -o st.cmh --enabled state -- "$B/samples/leaky" 6 >/dev/null 2>&1
"$CMH" leaks --fail-on-leak st.cmh >lk.txt 2>/dev/null
[ $? -eq 5 ] && grep -q 'no allocation history' lk.txt && ok "--enabled state (no history) never passes --fail-on-leak: exit 5" ||
    bad "--enabled state gate: $(cat lk.txt)"
PT=$SRC/../shared/fixtures/pytorch
if [ -f "$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle" ]; then
    "$CMH" leaks --fail-on-leak --device 0 "$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle" >lk.txt 2>/dev/null
    [ $? -eq 5 ] && grep -q '^steps: 3 detected from the allocation pattern' lk.txt &&
        grep -q 'rose in each of the 3 steps, by 120.0 MiB in all; too few steps to call it a leak or give a rate per step' lk.txt &&
        ! grep -q 'per step;' lk.txt &&
        grep -q 'state .*memory_leaks_demo.py:17' lk.txt && grep -q '^growth cannot be judged: too few steps (3 of the 4 needed)' lk.txt &&
        ok "the 3-step leak demo: line 11 rose 120 MiB over 3 steps (too few to call it or give a rate), line 17 is state, exit 5" || bad "memsnapdump verdict: $(cat lk.txt)"
fi
agree=1
for f in "$F/h200/leaky.cmh" "$F/h200c/torch_var_plain.pickle" "$PT/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle"; do
    [ -f "$f" ] || continue
    "$CMH" leaks --json --device 0 "$f" >lk.json 2>/dev/null && "$CMH" report --device 0 "$f" -o lk.html 2>/dev/null &&
        py - lk.json lk.html <<'PY' || { bad "report and leaks disagree on $f"; agree=0; }
import html, json, sys
d = json.load(open(sys.argv[1]))[0]
page = html.unescape(open(sys.argv[2]).read())
assert d["steps"]["text"] in page, d["steps"]["text"]
assert d["outcome"] in page, d["outcome"]
for x in d["sites"][:10]:
    assert x["says"] in page, x["says"]
PY
done
[ $agree -eq 1 ] && ok "report prints the steps, the outcome and each site's verdict in the words of leaks --json"

# --- filters hide rows, never totals ---
"$CMH" leaks --json l0.cmh >all.json
"$CMH" leaks --json --min-bytes 100M l0.cmh >min.json
py - all.json min.json <<'PY' && ok "--min-bytes hides rows; bytes, blocks, sites and the leak count stay" || bad "--min-bytes changed the totals"
import json, sys
a, m = (json.load(open(p))[0] for p in sys.argv[1:])
for k in ("live_bytes", "live_blocks", "live_sites", "leaking_sites"):
    assert a[k] == m[k], (k, a[k], m[k])
assert a["leaking_sites"] >= 1 and m["sites"] == [] and m["hidden_sites"] == a["live_sites"], m
PY
"$CMH" leaks --min-bytes 100M l0.cmh | grep -q 'hidden (--min-bytes 100.0 MiB)' && "$CMH" leaks --min-bytes 100M l0.cmh | grep -q 'grows from step to step' &&
    ok "--min-bytes text: the hidden sites are counted, the verdict kept" || bad "--min-bytes text"

# --- the requested peak, beside allocated and reserved ---
"$CMH" peak "$F/h200/torch_exp.pickle" >pk.txt
"$CMH" peak --json "$F/h200/torch_exp.pickle" | py -c "
import json, sys
p = json.load(sys.stdin)[0]
assert 0 < p['peak_requested']['bytes'] <= p['peak_allocated']['bytes'] <= p['peak_reserved']['bytes'], p
" && grep -q '^peak requested: ' pk.txt && ok "peak: requested <= allocated <= reserved, in text and JSON" || bad "requested peak"

# --- output errors: every command says why and exits 1 ---
bad_out=
for c in "summary l0.cmh" "peak l0.cmh" "leaks l0.cmh" "frag l0.cmh" "oom l0.cmh" "stats l0.cmh" "trace l0.cmh" \
    "kernels l0.cmh" "diff l0.cmh s0.cmh" "peak --json l0.cmh" "trace --json l0.cmh" "export -f json l0.cmh" \
    "peak --help" "--help"; do
    # shellcheck disable=SC2086 # $c is a command line
    "$CMH" $c >/dev/full 2>err.txt
    rc=$?
    [ $rc -eq 1 ] && grep -q 'No space left on device' err.txt || bad_out="$bad_out [$c: $rc $(cat err.txt)]"
done
"$CMH" export l0.cmh -o /dev/full 2>err.txt
[ $? -eq 1 ] && grep -q '/dev/full: write failed: No space left on device' err.txt && [ -c /dev/full ] || bad_out="$bad_out [export -o /dev/full]"
[ -z "$bad_out" ] && ok "14 commands > /dev/full and export -o /dev/full: exit 1, 'No space left on device'" || bad "output errors:$bad_out"

# --- files, terminals and words ---
"$CMH" export l0.cmh -o x.json && py -c "import json; json.load(open('x.json'))" &&
    "$CMH" export l0.cmh -o x.trace.json && py -c "import json; assert 'traceEvents' in json.load(open('x.trace.json'))" &&
    "$CMH" export l0.cmh -o x.pickle && head -c 2 x.pickle | od -An -tx1 | grep -q '80 04' &&
    ok "export infers the format from the name (.json, .trace.json, .pickle)" || bad "export format inference"
"$CMH" export -f memviz l0.cmh -o y.json 2>err.txt
[ $? -eq 2 ] && [ ! -e y.json ] && ok "export refuses a pickle named .json" || bad "export -f memviz -o y.json: $(cat err.txt)"
# each binary format, named as what it is (-f pprof was refused as 'a binary pickle')
for f in memviz:pickle pprof:pprof; do
py - "$CMH" l0.cmh "${f%%:*}" "${f#*:}" <<'PY' && ok "export -f ${f%%:*} refuses to write to a terminal, naming it a ${f#*:}" || bad "${f%%:*} to a terminal"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "export", sys.argv[2], "-f", sys.argv[3]])
out = b""
while True:
    try:
        b = os.read(fd, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(pid, 0)
assert os.WEXITSTATUS(st) == 2 and b"terminal" in out and sys.argv[4].encode() in out and b"\x80" not in out and b"\x1f\x8b" not in out, (st, out[:200])
PY
done
"$CMH" summary "$T" 2>err.txt
[ $? -eq 1 ] && grep -q 'is a directory, not a snapshot' err.txt && ok "a directory: 'is a directory'" || bad "directory argument: $(cat err.txt)"
"$CMH" record --lib "$T/nope.so" -- true 2>err.txt
[ $? -eq 1 ] && grep -q -- "--lib $T/nope.so: No such file or directory" err.txt && ok "record --lib names the missing file" ||
    bad "--lib: $(cat err.txt)"
CUMEMHIST_CONTEXT=bogus CUMEMHIST_MAX_FRAMES=abc "$CMH" record -q -o w.cmh -- "$B/samples/leaky" 1 >/dev/null 2>err.txt
[ "$(grep -c 'ignoring CUMEMHIST_' err.txt)" -eq 2 ] && ok "a bad CUMEMHIST_* setting: one warning each, then the default" ||
    bad "env warnings: $(cat err.txt)"
"$CMH" help summary | head -1 | grep -q '^usage: cumemhist summary' && "$CMH" --help | grep -q chrome &&
    ok "help summary is summary's help; the top-level help names chrome" || bad "help"
"$CMH" leaks mg.cmh | grep -q ' 1 blocks\| 1 sites' && bad "'1 blocks'" || ok "no '1 blocks' or '1 sites'"

# --- work after the training loop (tests/after_loop.c): an evaluation buffer made once the 20
# steps are over is 'after the last step', not 'steady' (which says the like went in each step
# before); the weights stay state; with marks or without, and with the loop changing shape halfway
# (its 20 steps found all the same: before, the pattern found the last shape's 10 alone)
for m in "marks" "plain" "marks reshape" "plain reshape"; do
    "$CMH" record -q -o al.cmh -- "$B/tests/after_loop" 20 $m >/dev/null 2>&1
    "$CMH" leaks al.cmh >al.txt 2>&1
    "$CMH" leaks --json al.cmh >al.json 2>/dev/null
    check "after the loop ($m): the eval buffer is 'after the last step', not steady; 20 steps ($(grep -A1 ' eval_buffer' al.txt | tr -s ' ' | head -2 | tr '\n' '|'))" \
        "grep -q '^steps: 20 ' al.txt && grep -q '  after  *eval_buffer' al.txt && grep -q '^        after the last step: first made once the last of the 20 steps had begun, by no step before; not a step' al.txt &&
         grep -q '  state  *weights' al.txt && py - al.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))[0]
v = {s['site']['function']: s for s in d['sites']}
e, w = v['eval_buffer'], v['weights']
assert e['verdict'] == 'after' and not e['growing'] and e['says'].startswith('after the last step'), e
assert w['verdict'] == 'state', w
PY"
done
# a leak across a loop that changed shape: every step of both shapes (before: 'steps: 10', the
# leak 'over the last 9 steps' of a 20-step loop), whether the compiler folds keep_history into
# kv_block (their code is the same: one site, the plain build's gcc -O2) or not (two sites: a
# sanitizer build; 'apart', a function that differs, in every build).  With two sites the steps
# read 19 ('period 17 entries'), the leak 'over the last 18 steps': the kept block, made last in
# each step, anchored the steps, and the first step's other ops were taken for set-up.
for k in leak apart; do
    "$CMH" record -q -o al.cmh -- "$B/tests/after_loop" 20 plain reshape $k >/dev/null 2>&1
    "$CMH" leaks al.cmh >al.txt 2>&1
    check "a loop that changed shape ($k): 20 steps, the leak over the last 19 ($(grep -E '^steps|growing:' al.txt | tr '\n' '|'))" \
        "grep -q '^steps: 20 detected from the allocation pattern' al.txt && grep -q '^        growing: +1.0 MiB per step over the last 19 steps' al.txt &&
         grep -q 'growing  keep_' al.txt"
done

finish
