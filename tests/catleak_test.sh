#!/bin/sh
# catleak_test.sh BUILD_DIR SOURCE_DIR - buffers the program replaces every step (tests/cat_leak.c):
# no block of them outlives a step, yet what each step leaves may rise.
#  - a stranger's trial: the torch.cat accumulation leak (each step a buffer 1 MiB larger than the
#    last, the old one then freed: 2, 3, ..., 41 MiB at successive step ends) read 'steady', 'no
#    site grows from step to step', exit 0 for --fail-on-leak, where the bytes held across a whole
#    step were the only series judged (0 throughout: no block lives across one); the same with the
#    old one freed first (kv_grow); now growing, +1.0 MiB per step, exit 3;
#  - a buffer of one size replaced every step (double buffering) is not growing;
#  - the held bytes are the live blocks' sum, and the verdicts the same twice;
#  - the same accumulation in a PyTorch snapshot whose steps are its Optimizer.step annotations,
#    and its out-of-memory error, a demand: 'driven by a leak' (it said no leak before).
TEST=catleak . "$(dirname "$0")/testlib.sh"
P=$B/tests/cat_leak

for i in 0 1; do
    "$CMH" record -q -o "cat$i.cmh" -- "$P" 30 >/dev/null 2>&1
    "$CMH" leaks --fail-on-leak "cat$i.cmh" >"cat$i.txt" 2>&1
    echo "rc $?" >"cat$i.v"
    "$CMH" leaks --json "cat$i.cmh" >"cat$i.json" 2>&1
    py - "cat$i.json" >>"cat$i.v" <<'PY'
import json, sys
for d in json.load(open(sys.argv[1])):
    print(d["steps"]["text"])
    for s in d["sites"]:
        print("%s %s %s | rate %s | held %s bytes %s" % (s["site"]["function"], s["verdict"], s["says"], s["rate_bytes_per_step"],
                                                        s["held_bytes"], s["bytes"]))
PY
done
cat cat0.v
check "the torch.cat accumulation: growing, +1.0 MiB per step, exit 3 ($(tr '\n' '|' <cat0.v))" \
    "grep -q '^rc 3\$' cat0.v && grep -q '^append_history growing growing: +1.0 MiB per step over the last 2[0-9] steps | rate 1048576 ' cat0.v"
check "the old buffer freed first: growing too" \
    "grep -q '^kv_grow growing growing: +1.0 MiB per step over the last 2[0-9] steps | rate 1048576 ' cat0.v"
check "a buffer of one size replaced every step: not growing" \
    "grep -q '^double_buffer ' cat0.v && ! grep -q '^double_buffer growing' cat0.v"
check "the text says it (the outcome, the row)" \
    "grep -q '2 sites grow from step to step' cat0.txt && grep -q ' growing  *append_history' cat0.txt"
check "a growing site's held bytes are its live blocks' sum (31 MiB)" \
    "grep -q '^append_history growing .* | held 32505856 bytes 32505856\$' cat0.v"
check "the same verdicts in two recordings" "cmp -s cat0.v cat1.v"

# a PyTorch snapshot: 30 steps between Optimizer.step annotations, each making and freeing three
# activations and replacing the accumulated history by one 2 MiB larger (then an out-of-memory error)
py - <<'PY'
import pickle
M, P = 1 << 20, 0x7F0000000000
W = "/w/train.py"
FW = [{"name": "forward", "filename": "/w/model.py", "line": 40}, {"name": "train_step", "filename": W, "line": 22}]
CAT = [{"name": "train_step", "filename": W, "line": 30}, {"name": "main", "filename": W, "line": 60}]
t = [1_790_000_000_000_000]
tr, live, ann, nxt = [], {}, [], [P]
def ent(a, addr, size, fr):
    t[0] += 100
    tr.append({"action": a, "addr": addr, "size": size, "stream": 0, "time_us": t[0], "frames": fr})
def alloc(size, fr):
    a = nxt[0]
    nxt[0] += size + 64 * M
    ent("segment_alloc", a, size, fr)
    ent("alloc", a, size, fr)
    live[a] = (size, fr)
    return a
def free(a):
    size, fr = live.pop(a)
    ent("free_requested", a, size, fr)
    ent("free_completed", a, size, fr)
    ent("segment_free", a, size, fr)
hist, hs = None, 0
for st in range(30):
    t[0] += 10
    ann.append({"name": "Optimizer.step#SGD.step", "stage": "START", "device": 0, "time_us": t[0]})
    acts = [alloc(8 * M, FW) for i in range(3)]
    for a in acts:
        free(a)
    hs += 2 * M
    n = alloc(hs, CAT)
    if hist is not None:
        free(hist)
    hist = n
    t[0] += 10
    ann.append({"name": "Optimizer.step#SGD.step", "stage": "END", "device": 0, "time_us": t[0]})
t[0] += 100
tr.append({"action": "oom", "device_free": 4 * M, "size": hs + 2 * M, "stream": 0, "time_us": t[0], "frames": CAT})
segs = [{"device": 0, "address": a, "total_size": s, "allocated_size": s, "active_size": s, "requested_size": s, "stream": 0,
         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr,
         "blocks": [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": fr}]}
        for a, (s, fr) in sorted(live.items())]
pickle.dump({"segments": segs, "device_traces": [tr], "allocator_settings": {}, "external_annotations": ann}, open("cat.pickle", "wb"))
PY
"$CMH" leaks --fail-on-leak cat.pickle >pk.txt 2>&1
rc=$?
check "a PyTorch snapshot's torch.cat accumulation over Optimizer.step annotations: growing, +2.0 MiB per step, exit 3 ($(tr '\n' '|' <pk.txt))" \
    "[ $rc = 3 ] && grep -q 'steps: 30 from Optimizer.step annotations' pk.txt && grep -q ' growing  *train_step (/w/train.py:30)' pk.txt &&
     grep -q 'growing: +2.0 MiB per step over the last 2[0-9] steps' pk.txt"
# its out-of-memory error (4 MiB free on the device, 60 MiB held by the history): a demand the leak drove
"$CMH" oom cat.pickle >oom.txt 2>&1
check "oom: the demand driven by the torch.cat leak ($(grep -E 'verdict|driven' oom.txt | tr '\n' '|'))" \
    "grep -q 'verdict: demand' oom.txt && grep -q 'driven by a leak: allocated grew by 58.0 MiB over 29 steps at train_step (/w/train.py:30), which held 60.0 MiB at the error' oom.txt"
finish
