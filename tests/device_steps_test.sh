#!/bin/sh
# device_steps_test.sh BUILD_DIR SOURCE_DIR - a step mark is the process's, not the calling
# thread's current device's (tests/two_dev_steps.c: two devices, the steps marked from one
# thread with device 0 current, a leak on device 1).  Before, device 1 read 'steps: unknown', its
# leak that stopped halfway was 'held ... growth not judged', the record's outcome 'growth cannot
# be judged' and `leaks --fail-on-leak` exited 5 (now 6: a leak that stopped, grown over 10 steps
# and never freed).  Every output that judges leaks agrees: leaks
# (text, JSON), the HTML report and top (the exporter's verdicts are top's, cli/live.c).
TEST=device_steps . "$(dirname "$0")/testlib.sh"
export FAKECUDA_DEVICES=2
P=$B/tests/two_dev_steps

# a leak on device 1 for the first 10 of 20 steps, then none
"$CMH" record -q -o st.cmh -- "$P" 20 10 marks >/dev/null 2>&1
"$CMH" leaks --fail-on-leak st.cmh >st.txt 2>&1
rc=$?
check "leaks --fail-on-leak: a leak that stopped halfway, judged, fails the gate as a leak that stopped (exit $rc; it was 5 when device 1 had no steps, then 0 when it read 'state')" "[ $rc -eq 6 ]"
"$CMH" leaks --device 1 st.cmh >d1.txt 2>&1
check "device 1 has the steps marked with device 0 current: '$(grep '^steps' d1.txt)'" \
    "grep -q '^steps: 20 from the program.s marks (\"step\")\$' d1.txt"
check "device 1's leak that stopped halfway: '$(grep '^        stopped:' d1.txt)'" \
    "grep -q '^        stopped: grew +1.0 MiB per step over steps 1-10, then flat for the last 10 steps; 18.0 MiB still held at the end, never freed\$' d1.txt &&
     grep -q '^no site grows from step to step now; 1 site grew over several steps, then stopped, and still holds 18.0 MiB: a likely leak that stopped\$' d1.txt &&
     ! grep -q 'cannot be judged\|steps not found' d1.txt"
"$CMH" leaks --json st.cmh 2>/dev/null | py -c '
import json, sys
d = {x["device"]: x for x in json.load(sys.stdin)}
for dev in (0, 1):
    assert d[dev]["judged"] is True and d[dev]["steps"]["count"] == 20 and d[dev]["steps"]["source"] == "marks", d[dev]["steps"]
x = d[1]["sites"][0]
assert x["verdict"] == "stopped" and x["rises"] == 9 and x["flat_steps"] == 10 and x["warmup_rose"] is True and x["growth_first_step"] == 1 and x["growth_last_step"] == 10 and x["rate_bytes_per_step"] == 1 << 20, x' 2>json.err
check "leaks --json: both devices judged with the 20 marked steps, device 1 'stopped' (rose 9, flat 10, steps 1-10) ($(tail -1 json.err))" "[ ! -s json.err ]"
"$CMH" report -o st.html st.cmh 2>/dev/null
check "the HTML report says device 1's steps and verdict as leaks does" \
    "[ \$(grep -o 'steps: 20 from the program&apos;s marks' st.html | wc -l) -eq 2 ] &&
     grep -q 'data-verdict=\"stopped\" data-says=\"stopped: grew +1.0 MiB per step over steps 1-10, then flat for the last 10 steps' st.html"

# a leak on device 1 every step: growing, and --fail-on-leak fails for it
"$CMH" record -q -o gr.cmh -- "$P" 20 20 marks >/dev/null 2>&1
"$CMH" leaks --fail-on-leak --device 1 gr.cmh >gr.txt 2>&1
rc=$?
check "device 1's leak every step: growing, exit 3 ($rc): '$(grep '^        growing' gr.txt)'" \
    "[ $rc -eq 3 ] && grep -q '^        growing: +1.0 MiB per step over the last 19 steps\$' gr.txt"

# top reads the running process's flight record: the same verdicts
LIVE_DONE=$T/done env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=q.cmh "$P" 20 10 marks >/dev/null 2>&1 &
qp=$!
wait_until 60 '[ -e done ]'
"$CMH" top --json q.cmh.flight >q.json 2>q.err
kill -KILL $qp
wait $qp 2>/dev/null
py - q.json <<'EOF2' 2>top.err
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
v = {d["device"]: [s["verdict"] for s in d["sites"]] for d in p["devices"]}
assert v == {0: ["state"], 1: ["stopped"]}, v
EOF2
check "top --json: device 1's site 'stopped' as leaks says ($(tail -1 top.err))" "[ ! -s top.err ]"
# A record whose marks are on one device only (made before a mark was the process's, or a PyTorch
# snapshot whose annotations are in device 0's trace): the other device takes them by time.
# ANN=ext: the steps as PyTorch's external_annotations (the snapshot's top-level list), recorded
# for device 0 only, as PyTorch does for the current device.
gen_pickle() {
py - "$@" <<'PY' || bad "writing $3 failed"
import pickle, sys
MiB, fr = 1 << 20, [{'name': 'train_step', 'filename': '/home/u/train.py', 'line': 9}]
steps, stop = int(sys.argv[1]), int(sys.argv[2])
ext = len(sys.argv) > 4 and sys.argv[4] == 'ext'
tr, ann = [[], []], []
t = [1000]
def ent(d, a, addr, size, **kw):
    t[0] += 10
    e = {'action': a, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t[0], 'frames': fr}
    e.update(kw)
    tr[d].append(e)
b0, b1 = 1 << 40, 2 << 40
ent(0, 'segment_alloc', b0, 1024 * MiB); ent(1, 'segment_alloc', b1, 1024 * MiB)
ent(0, 'alloc', b0, 8 * MiB); ent(1, 'alloc', b1, 8 * MiB)
for s in range(steps):
    e = {'action': 'annotate', 'addr': 0, 'size': 0, 'stream': 0, 'time_us': t[0] + 5, 'name': 'step %d' % s}
    if ext:
        ann.append({'name': 'step', 'stage': 'START', 'device': 0, 'time_us': t[0] + 5})
    t[0] += 10
    if not ext:
        tr[0].append(e)
    ent(0, 'alloc', b0 + 8 * MiB, 4 * MiB)
    ent(1, 'alloc', b1 + 8 * MiB, 4 * MiB)
    if s < stop:
        ent(1, 'alloc', b1 + (100 + s) * MiB, MiB)
    for d, b in ((1, b1), (0, b0)):
        ent(d, 'free_requested', b + 8 * MiB, 4 * MiB); ent(d, 'free_completed', b + 8 * MiB, 4 * MiB)
    if ext:
        ann.append({'name': 'step', 'stage': 'END', 'device': 0, 'time_us': t[0] + 5})
def seg(d, base, kept):
    blocks = [{'address': base, 'size': 8 * MiB, 'requested_size': 8 * MiB, 'state': 'active_allocated', 'frames': fr}]
    blocks += [{'address': base + (100 + s) * MiB, 'size': MiB, 'requested_size': MiB, 'state': 'active_allocated', 'frames': fr} for s in range(kept)]
    return {'device': d, 'address': base, 'total_size': 1024 * MiB, 'allocated_size': (8 + kept) * MiB, 'active_size': (8 + kept) * MiB,
            'requested_size': (8 + kept) * MiB, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False,
            'frames': fr, 'blocks': blocks}
d = {'segments': [seg(0, b0, 0), seg(1, b1, stop)], 'device_traces': tr}
if ext:
    d['external_annotations'] = ann
pickle.dump(d, open(sys.argv[3], 'wb'))
PY
}
gen_pickle 20 10 old.pickle
"$CMH" leaks --fail-on-leak old.pickle >old.txt 2>&1
rc=$?
"$CMH" leaks --json old.pickle 2>/dev/null | py -c '
import json, sys
d = {x["device"]: x for x in json.load(sys.stdin)}
assert d[1]["steps"]["count"] == 20 and d[1]["steps"]["marks_of_other_devices"] is True, d[1]["steps"]
assert "marks_of_other_devices" not in d[0]["steps"], d[0]["steps"]
x = d[1]["sites"][0]
assert x["verdict"] == "stopped" and x["rises"] == 9 and x["flat_steps"] == 10 and x["warmup_rose"] is True and x["growth_first_step"] == 1 and x["growth_last_step"] == 10 and x["rate_bytes_per_step"] == 1 << 20, x' 2>old.err
check "marks on device 0 only: device 1 takes them by time, its leak that stopped judged (exit $rc; $(grep -A3 'device 1' old.txt | grep '^steps'))" \
    "[ $rc -eq 6 ] && [ ! -s old.err ] &&
     grep -q '^steps: 20 from the program.s marks (\"step\", placed by time: this device.s trace has none)\$' old.txt &&
     grep -q '^        stopped: grew +1.0 MiB per step over steps 1-10, then flat for the last 10 steps; 18.0 MiB still held at the end, never freed\$' old.txt"

# The same steps as PyTorch's external annotations, recorded for device 0 only (the device
# current when they were made): device 1 takes them by time as it takes marks.  Before, device 1
# read 'steps: unknown (no step marks or annotations, ...)', its leak that stopped 'held', and
# --fail-on-leak exited 5.
gen_pickle 20 10 ext.pickle ext
"$CMH" leaks --fail-on-leak ext.pickle >ext.txt 2>&1
rc=$?
"$CMH" leaks --json ext.pickle 2>/dev/null | py -c '
import json, sys
d = {x["device"]: x for x in json.load(sys.stdin)}
for dev in (0, 1):
    assert d[dev]["judged"] is True and d[dev]["steps"]["count"] == 20 and d[dev]["steps"]["source"] == "annotations", d[dev]["steps"]
assert d[1]["steps"]["marks_of_other_devices"] is True and d[1]["steps"]["marks_placed_by_time"] == 20, d[1]["steps"]
assert "marks_of_other_devices" not in d[0]["steps"], d[0]["steps"]
x = d[1]["sites"][0]
assert x["verdict"] == "stopped" and x["rises"] == 9 and x["flat_steps"] == 10 and x["warmup_rose"] is True and x["growth_first_step"] == 1 and x["growth_last_step"] == 10 and x["rate_bytes_per_step"] == 1 << 20, x' 2>ext.err
check "annotations on device 0 only: device 1 takes them by time (exit $rc; $(grep -A3 'device 1' ext.txt | grep '^steps'); $(tail -1 ext.err))" \
    "[ $rc -eq 6 ] && [ ! -s ext.err ] &&
     grep -q '^steps: 20 from step annotations\$' ext.txt &&
     grep -q '^steps: 20 from step annotations (placed by time: this device.s trace has none)\$' ext.txt &&
     grep -q '^        stopped: grew +1.0 MiB per step over steps 1-10, then flat for the last 10 steps; 18.0 MiB still held at the end, never freed\$' ext.txt"
"$CMH" report -o ext.html ext.pickle 2>/dev/null
check "the HTML report says device 1's annotated steps as leaks does" \
    "grep -q 'steps: 20 from step annotations (placed by time: this device&apos;s trace has none)' ext.html &&
     ! grep -q 'steps: unknown' ext.html"

# A device first used after the first marks (tests/two_dev_steps.c FIRST: device 1 first used in
# step FIRST, after its mark, which goes only into the traces of the devices used so far): one
# program, one count of steps on every device.  Before, device 1 read 'steps: 19' (FIRST 0) and
# 'steps: 2' (FIRST 17): its trace starts at a later mark.
for first in 0 12 17; do
    "$CMH" record -q -o late$first.cmh -- "$P" 20 20 marks $first >/dev/null 2>&1
    "$CMH" leaks --device 1 late$first.cmh >late$first.txt 2>&1
    "$CMH" leaks --json late$first.cmh 2>/dev/null | py -c '
import json, sys
d = {x["device"]: x for x in json.load(sys.stdin)}
assert d[0]["steps"]["count"] == 20 and d[1]["steps"]["count"] == 20, (d[0]["steps"], d[1]["steps"])
assert d[1]["steps"]["marks_placed_by_time"] == int(sys.argv[1]) + 1, d[1]["steps"]' $first 2>late$first.err
done
check "device 1 first used in step 1: 20 steps as device 0 has ($(grep "^steps" late0.txt); $(tail -1 late0.err))" \
    "[ ! -s late0.err ] && grep -q '^steps: 20 from the program.s marks (\"step\", the first 1 placed by time: this device.s trace begins after it)\$' late0.txt &&
     grep -q '^        growing: +1.0 MiB per step over the last 19 steps\$' late0.txt"
# used from step 13 on: its first step with entries is its warm-up (its weights are no growth)
check "device 1 first used in step 13: 20 steps, its leak judged over its own 8 ($(grep '^        growing' late12.txt); $(tail -1 late12.err))" \
    "[ ! -s late12.err ] && grep -q '^steps: 20 from the program.s marks (\"step\", the first 13 placed by time: this device.s trace begins after them)\$' late12.txt &&
     grep -q '^        growing: +1.0 MiB per step over the last 7 steps\$' late12.txt"
# used in the last 3 steps only: too few of its own to judge growth, and it says so
"$CMH" leaks --fail-on-leak --device 1 late17.cmh >/dev/null 2>&1
rc=$?
check "device 1 used in the last 3 steps: 20 steps, growth not judged from its 3 (exit $rc; $(grep '^steps' late17.txt); $(tail -1 late17.err))" \
    "[ $rc -eq 5 ] && [ ! -s late17.err ] &&
     grep -q '^steps: 20 from the program.s marks (\"step\", the first 18 placed by time: this device.s trace begins after them); growth needs 4 steps with this device.s entries, it has 3 (one to warm up, three to rise across)\$' late17.txt &&
     grep -q ' rising ' late17.txt"
finish
