#!/bin/sh
# oomloop_test.sh BUILD_DIR SOURCE_DIR - a program that catches out-of-memory and asks again
# (tests/oom_loop.c: one error filling the device, then 200 from one other line).
# 1. oom: errors alike (same call stack, request size, verdict) are one section with a count, the
#    numbers and the last one's moment (it printed 201 full sections); --all prints each; --json
#    lists every error, each with its group (the first alike).
# 2. --fail-on-oom: exit 7 where the record holds an error the program saw, 0 where none; without
#    it oom exits 0 (status 4 is cumemhist's own out of memory: docs/CLI.md).
TEST=oomloop . "$(dirname "$0")/testlib.sh"

FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=64M "$CMH" record -q -o loop.cmh -- "$B/tests/oom_loop" 200 >loop.out 2>&1
check "the program's 200 asks failed ($(tail -1 loop.out))" "grep -q '^200 asks failed' loop.out"

# ---- 1. grouping
"$CMH" oom loop.cmh >oom.txt 2>&1
rc=$?
check "oom exits 0 without the gate (rc $rc)" "[ $rc -eq 0 ]"
check "two sections, one per kind of error ($(grep -c ': out of memory #' oom.txt))" "[ \$(grep -c ': out of memory #' oom.txt) -eq 2 ]"
check "the fill's error alone: no 'alike' under #1" "! sed -n '/out of memory #1 /,/out of memory #2 /p' oom.txt | grep -q 'alike:'"
check "the loop's 200: #2 in full, then 199 more alike, #3 to #201, the last one's moment" \
    "grep -q '^  alike: 199 more (the same call stack, request size and verdict): #3 to #201, the last at entry [0-9]*, ' oom.txt"
"$CMH" oom --all loop.cmh >all.txt 2>&1
check "--all: every error in full ($(grep -c ': out of memory #' all.txt) sections), no 'alike'" \
    "[ \$(grep -c ': out of memory #' all.txt) -eq 201 ] && ! grep -q 'alike:' all.txt"
"$CMH" oom --json loop.cmh >oom.json 2>&1
if py - oom.json >json.txt 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
o = (d[0] if isinstance(d, list) else d)["ooms"]  # (one device: its object)
assert len(o) == 201, len(o)
assert [e["number"] for e in o] == list(range(1, 202)), "numbers"
assert o[0]["group"] == 0 and o[0]["request"] == 16 << 20, o[0]
assert all(e["group"] == 1 and e["request"] == 32 << 20 for e in o[1:]), [e["group"] for e in o[1:5]]
PY
then ok "--json: all 201 errors, #1 its own group, #2-#201 group 1"; else bad "--json: $(tail -3 json.txt)"; fi

# ---- 2. the gate
"$CMH" oom --fail-on-oom loop.cmh >/dev/null 2>&1
rc=$?
check "--fail-on-oom on a record with errors: exit 7 (rc $rc)" "[ $rc -eq 7 ]"
"$CMH" oom --json --fail-on-oom loop.cmh >/dev/null 2>&1
rc=$?
check "--fail-on-oom with --json: exit 7 too (rc $rc)" "[ $rc -eq 7 ]"
FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=64M "$CMH" record -q -o none.cmh -- "$B/tests/oom_loop" none >none.out 2>&1
"$CMH" oom --fail-on-oom none.cmh >none.txt 2>&1
rc=$?
check "--fail-on-oom on a record without errors: exit 0 (rc $rc)" "[ $rc -eq 0 ]"
# without history: the errors counted are errors the program saw (a record made with --enabled
# state counts them, as PyTorch's num_ooms: 7); none counted and no history is not known, exit 5
# as leaks' unjudged (a state-only snapshot passed the gate with 0, read as one without errors)
FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=64M "$CMH" record -q --enabled state -o state.cmh -- "$B/tests/oom_loop" 20 >state.out 2>&1
"$CMH" oom --fail-on-oom state.cmh >state.txt 2>&1
rc=$?
check "--fail-on-oom on a record without history that counted its errors: exit 7 (rc $rc: $(grep -o '[0-9]* out-of-memory errors; no history' state.txt))" "[ $rc -eq 7 ]"
py - <<'PY'
import pickle
blk = lambda a, n, st: {'address': a, 'size': n, 'requested_size': n if st.startswith('active') else 0, 'state': st, 'frames': []}
seg = {'device': 0, 'address': 0x7f0000000000, 'total_size': 2 << 20, 'allocated_size': 1 << 20, 'active_size': 1 << 20,
       'requested_size': 1 << 20, 'stream': 0, 'segment_type': 'small', 'segment_pool_id': (0, 0), 'is_expandable': False,
       'frames': [], 'blocks': [blk(0x7f0000000000, 1 << 20, 'active_allocated'), blk(0x7f0000100000, 1 << 20, 'inactive')]}
pickle.dump({'segments': [seg], 'device_traces': [[]]}, open('stateonly.pickle', 'wb'), protocol=2)
PY
"$CMH" oom --fail-on-oom stateonly.pickle >so.txt 2>&1
rc=$?
"$CMH" oom --json --fail-on-oom stateonly.pickle >/dev/null 2>&1
rcj=$?
check "--fail-on-oom on a state-only snapshot: not known, exit 5, with --json too (rc $rc $rcj: $(head -1 so.txt | cut -c1-90))" "[ $rc -eq 5 ] && [ $rcj -eq 5 ] && grep -q 'not known: no history' so.txt"

finish
