#!/bin/sh
# ringsite_test.sh BUILD_DIR SOURCE_DIR - a block whose allocation entry the ring dropped, freed in
# the kept window (tests/ringsite.c, --max-entries 11).  Its pickle export named the free's line
# (release_weights) as its allocation site in peak and the flamegraph, memory_viz's page too (the
# free_completed of a block allocated before the trace is its element, frames and all); and owners
# said "unknown (recorded without a stack)" where peak gave the dropped-entry reason and the
# flamegraph "<no stack>".  Now: no output names the free's line for it, from the .cmh or from its
# pickle, and owners, peak, the flamegraph, the chrome trace and pprof give one reason
# (cmh_no_stack_reason).  The segment_free of that block kept the free's frames, which memory_viz's
# segment timeline takes for a pre-trace segment's origin (its element, as free_completed is the
# block's) and its segment view draws the segment with: it is written frameless too, its frames
# kept in the cumemhist dict's free_frames, so that the pickle read back still gives the free
# its stack, as the .cmh does.  export -f json wrote that segment_free with the free's stack as its
# own (memory_viz's origin again); it now asks the pickle's question (cmh_entry_free_stack_aside):
# stack 0, the free's under free_stack, of the record and of its pickle alike.
TEST=ringsite . "$(dirname "$0")/testlib.sh"
export FAKECUDA_CAPACITY=1G
R='allocated before the first kept entry, or its stack could not be read'
"$CMH" record -q --max-entries 11 -o rs.cmh -- "$B/tests/ringsite" >rs.out 2>&1 && grep -q "ringsite: ran" rs.out &&
    ok "ringsite ran" || bad "ringsite did not run as designed: $(cat rs.out)"
"$CMH" export -q rs.cmh -o rs.pickle 2>exp.err && ok "exported" || bad "export failed: $(cat exp.err)"
for f in rs.cmh rs.pickle; do
    "$CMH" peak "$f" >"$f.peak" 2>&1
    "$CMH" owners "$f" >"$f.owners" 2>&1
    "$CMH" flamegraph --folded "$f" >"$f.folded" 2>&1
    "$CMH" flamegraph "$f" -o "$f.svg" >/dev/null 2>&1
    check "$f: peak names no allocation site for the 64 MiB block, with the reason" \
        "grep -q '64.0 MiB .*  <no stack: $R>\$' '$f.peak'"
    check "$f: peak never names the free's line (release_weights) as an allocation site" \
        "! grep -q release_weights '$f.peak'"
    check "$f: owners gives the same reason" "grep -q '64.0 MiB .*  unknown (no stack: $R)\$' '$f.owners'"
    check "$f: flamegraph --folded gives the same reason, not the free's line" \
        "grep -qx '<no stack: $R> 67108864' '$f.folded' && ! grep -q release_weights '$f.folded'"
    check "$f: the flamegraph SVG never names the free's line" "[ -s '$f.svg' ] && ! grep -q release_weights '$f.svg'"
    "$CMH" export -q -f chrome "$f" -o "$f.trace.json" >/dev/null 2>&1
    "$CMH" export -q -f pprof "$f" -o "$f.pb.gz" >/dev/null 2>&1
    check "$f: the chrome trace's peak sites give the same reason" "grep -q '\"site\": \"<no stack: $R>\"' '$f.trace.json'"
    check "$f: the pprof profile's stackless frame gives the same reason, never the free's line" \
        "gzip -dc '$f.pb.gz' | grep -aq '<no stack: $R>' && ! gzip -dc '$f.pb.gz' | grep -aq release_weights"
done
out=$(py <<'PY'
import pickle
d = pickle.load(open("rs.pickle", "rb"))
bad = []
if d["cumemhist"].get("context") != 3: bad.append("context %r" % d["cumemhist"].get("context"))
tr = d["device_traces"][0]
seen = set()
for e in tr:
    if e["action"] == "alloc": seen.add(e["addr"])
    if e["action"] in ("free_requested", "free_completed") and e["addr"] not in seen:
        names = [f["name"] for f in e.get("frames", [])]
        if names: bad.append("%s of a block allocated before the trace has frames %s" % (e["action"], names))
if not any(e["action"] == "free_completed" and e["addr"] not in seen and e["size"] == 64 << 20 for e in tr):
    bad.append("no free of the 64 MiB block allocated before the trace")
# memory_viz's segment timeline: a segment_free of a segment no segment_alloc made is the
# segment's element, its frames shown as its stack; the segment view draws the segment with them
segs = set()
for e in tr:
    if e["action"] == "segment_alloc": segs.add(e["addr"])
    if e["action"] == "segment_free" and e["addr"] not in segs:
        names = [f["name"] for f in e.get("frames", [])]
        if names: bad.append("segment_free of a segment allocated before the trace has frames %s" % names)
if not any(e["action"] == "segment_free" and e["addr"] not in segs and e["size"] == 64 << 20 for e in tr):
    bad.append("no segment_free of the 64 MiB segment allocated before the trace")
print("; ".join(bad) or "same")
PY
)
check "pickle: the frees of a block allocated before the trace carry no frames (memory_viz's element): $out" '[ "$out" = same ]'
# the JSON export is the pickle's dict: that segment_free carries no stack either (memory_viz's
# reading of it), the free's stack beside it under free_stack (free_frames inline), from the record
# and from its pickle alike (free_frames read back)
"$CMH" export -q -f json -o rs.cmh.json rs.cmh 2>/dev/null
"$CMH" export -q -f json -o rs.pickle.json rs.pickle 2>/dev/null
"$CMH" export -q -f json --inline-frames -o rs.inline.json rs.cmh 2>/dev/null
out=$(py - rs.cmh.json rs.pickle.json rs.inline.json <<'PY'
import json, sys
def entries(f):
    d = json.load(open(f))
    if "stacks" in d:
        names = lambda e, k: [d["frames"][i]["name"] for i in d["stacks"][e[k]]] if k in e else None
        keys = ("stack", "free_stack")
    else:
        names = lambda e, k: [x["name"] for x in e[k]] if k in e else None
        keys = ("frames", "free_frames")
    return [(e["action"], e["addr"], e["size"], names(e, keys[0]), names(e, keys[1])) for e in d["device_traces"][0]]
a, b, c = entries(sys.argv[1]), entries(sys.argv[2]), entries(sys.argv[3])
bad = []
if a != b: bad.append("the pickle's entries differ from the record's: %s" % [(x, y) for x, y in zip(a, b) if x != y][:3])
if a != c: bad.append("--inline-frames differs: %s" % [(x, y) for x, y in zip(a, c) if x != y][:3])
segs = set()
for f, es in (("record", a), ("pickle", b), ("inline", c)):
    last = [e for e in es if e[0] == "segment_free" and e[2] == 64 << 20]
    if not last: bad.append("%s: no 64 MiB segment_free" % f); continue
    if last[-1][3]: bad.append("%s: the 64 MiB segment_free, allocated before the trace, has a stack (memory_viz's origin): %s" % (f, last[-1][3]))
    if not last[-1][4] or "release_weights" not in last[-1][4]: bad.append("%s: the free's stack is not kept beside it: %s" % (f, last[-1][4]))
    extra = [e for e in es if e[4] is not None and e is not last[-1]]
    if extra: bad.append("%s: free_stack on other entries: %s" % (f, extra[:2]))
print("; ".join(bad) or "same")
PY
)
check "export -f json (record, pickle, --inline-frames): the pre-trace segment_free has no stack, the free's (release_weights) under free_stack: $out" '[ "$out" = same ]'
# many frees of blocks the window never saw allocated: free_frames has an item each, read back
# in one walk of the trace (pickle_side_read.c), and in another writer's order (the list
# reversed) still each on its own entry
"$CMH" record -q --max-entries 300 -o many.cmh -- "$B/tests/ringsite" many 300 >many.out 2>&1 &&
    "$CMH" export -q many.cmh -o many.pickle 2>>many.out && ok "ringsite many ran and exported" || bad "ringsite many: $(cat many.out)"
out=$(py <<'PY'
import pickle
d = pickle.load(open("many.pickle", "rb"))
ff = d["cumemhist"].get("free_frames", [])
d["cumemhist"]["free_frames"] = ff[::-1]
pickle.dump(d, open("many_rev.pickle", "wb"), protocol=4)
print(len(ff))
PY
)
check "many: free_frames has an item per free of a block allocated before the window (300): $out" '[ "$out" = 300 ]'
for f in many.cmh many.pickle many_rev.pickle; do "$CMH" export -q -f json -o "$f.json" "$f" 2>/dev/null; done
out=$(py - many.cmh.json many.pickle.json many_rev.pickle.json <<'PY'
import json, sys
def entries(f):
    d = json.load(open(f))
    names = lambda k: [d["frames"][i]["name"] for i in d["stacks"][k]] if k is not None else []
    # the free's stack: under free_stack where the entry has none of its own (memory_viz's reading)
    return [(e["action"], e["addr"], names(e.get("free_stack", e.get("stack")))) for e in d["device_traces"][0] if e["action"] == "segment_free"]
a, b, c = (entries(f) for f in sys.argv[1:])
bad = []
if len(a) != 300 or any("many" not in x[2] for x in a): bad.append("the record's 300 segment_free entries, each with its free's stack: %s" % a[:2])
if b != a: bad.append("the pickle's differ: %s" % [(x, y) for x, y in zip(a, b) if x != y][:2])
if c != a: bad.append("the reversed list's differ: %s" % [(x, y) for x, y in zip(a, c) if x != y][:2])
print("; ".join(bad) or "same")
PY
)
check "many: every segment_free read back from the pickle with its free's stack, the list in either order: $out" '[ "$out" = same ]'
finish
