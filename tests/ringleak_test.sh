#!/bin/sh
# ringleak_test.sh BUILD_DIR SOURCE_DIR - a single-threaded program's leak under a short history
# (--max-entries 50, tests/ringleak1.c): the blocks allocated before the kept history have no
# thread in the record, but the record names one recording thread, so they were its.  leaks said
# "made by recording thread 1 (tid N, 'ringleak1') and threads not recorded" (--json
# made_by_unrecorded true) of a program with no other thread.  With the leak in a worker thread
# (tests/ringleak2.c: two recording threads) those blocks are said to be allocated before the kept
# history (made_before_history), where it said "and threads not recorded".
TEST=ringleak . "$(dirname "$0")/testlib.sh"
export FAKECUDA_CAPACITY=1G
"$CMH" record -q --max-entries 50 -o ring.cmh -- "$B/tests/ringleak1" >ring.out 2>&1 && grep -q "ringleak1: ran" ring.out &&
    ok "ringleak1 ran" || bad "ringleak1 did not run as designed: $(cat ring.out)"
"$CMH" leaks ring.cmh >leaks.txt 2>&1
"$CMH" leaks --json ring.cmh >leaks.json 2>&1
out=$(py <<'PY'
import json
d = json.load(open("leaks.json"))
d = d[0] if isinstance(d, list) else d
bad = []
sites = d["sites"]
if not any("log_metrics" in json.dumps(x) for x in sites): bad.append("no log_metrics site")
if d.get("dropped_entries", 1) == 0 and not d.get("trace_entries"): bad.append("no ring")
for x in sites:
    if x.get("made_by_unrecorded"): bad.append("made_by_unrecorded at %s" % x.get("function", x.get("site")))
    if len(x.get("made_by", [])) > 1: bad.append("made_by %s" % x["made_by"])
if "threads not recorded" in open("leaks.txt").read(): bad.append("text: threads not recorded")
print("; ".join(bad) or "same")
PY
)
check "leaks: one recording thread made every block, none 'not recorded': $out" '[ "$out" = same ]'

"$CMH" record -q --max-entries 50 -o ring2.cmh -- "$B/tests/ringleak2" >ring2.out 2>&1 && grep -q "ringleak2: ran" ring2.out &&
    ok "ringleak2 ran" || bad "ringleak2 did not run as designed: $(cat ring2.out)"
"$CMH" leaks ring2.cmh >leaks2.txt 2>&1
"$CMH" leaks --json ring2.cmh >leaks2.json 2>&1
out=$(py <<'PY'
import json
d = json.load(open("leaks2.json"))
d = d[0] if isinstance(d, list) else d
bad = []
site = [x for x in d["sites"] if "log_metrics" in json.dumps(x)]
if len(site) != 1: bad.append("%d log_metrics sites" % len(site))
else:
    x = site[0]
    if not x.get("made_before_history"): bad.append("made_before_history %s" % x.get("made_before_history"))
    if not x.get("made_by_unrecorded"): bad.append("made_by_unrecorded %s" % x.get("made_by_unrecorded"))
    if len(x.get("made_by", [])) != 1: bad.append("made_by %s" % x.get("made_by"))
t = open("leaks2.txt").read()
if "threads not recorded" in t: bad.append("text: threads not recorded")
if "and blocks allocated before the kept history" not in t: bad.append("text: no 'allocated before the kept history'")
print("; ".join(bad) or "same")
PY
)
check "leaks, the leak in a worker thread: blocks before the kept history said so: $out" '[ "$out" = same ]'

# 4 racing threads on 2 devices, the kept blocks' allocations dropped (tests/ring_threads.c): growth
# cannot be judged, and the outcome says why.  It said "too few steps (6 of the 4 needed)" of 6 steps.
FAKECUDA_DEVICES=2 "$CMH" record -q --max-entries 50 -o ring3.cmh -- "$B/tests/ring_threads" >ring3.out 2>&1 && grep -q "done" ring3.out &&
    ok "ring_threads ran" || bad "ring_threads did not run as designed: $(cat ring3.out)"
"$CMH" leaks ring3.cmh >leaks3.txt 2>&1
"$CMH" leaks --fail-on-leak ring3.cmh >/dev/null 2>&1
rc3=$?
"$CMH" leaks --json ring3.cmh >leaks3.json 2>&1
out=$(py <<'PY'
import json
bad = []
for d in json.load(open("leaks3.json")):
    if d["judged"]:
        if d["unjudged_reason"] is not None: bad.append("device %d judged, reason %s" % (d["device"], d["unjudged_reason"]))
        continue
    n = d["steps"]["count"] or 0
    if n >= d["steps"]["min_steps"] and "too few steps" in d["outcome"]: bad.append("device %d: %r of %d steps" % (d["device"], d["outcome"], n))
    if d["unjudged_reason"] != "made_before_history": bad.append("device %d: reason %s" % (d["device"], d["unjudged_reason"]))
    if "before the first entry the record kept (the ring dropped the" not in d["outcome"]: bad.append("device %d: %r" % (d["device"], d["outcome"]))
if not any(not d["judged"] for d in json.load(open("leaks3.json"))): bad.append("every device judged")
print("; ".join(bad) or "same")
PY
)
check "racing threads, kept blocks made before the history: growth not judged, and that is the reason given: $out" '[ "$out" = same ]'
check "the text says it, and --fail-on-leak exits 5 (exit $rc3)" \
    'grep -q "was made before the first entry the record kept" leaks3.txt && ! grep -q "too few steps" leaks3.txt && [ "$rc3" = 5 ]'
# and the site holding those blocks says so too: its row read 'state' ('held across steps, not
# growing') under the device's 'growth cannot be judged'
out=$(py <<'PY'
import json
bad, seen = [], 0
for d in json.load(open("leaks3.json")):
    if d["judged"]: continue
    for x in d["sites"]:
        if not x.get("made_before_history") or x["verdict"] in ("growing", "stopped"): continue
        seen += 1
        where = "device %d, %s" % (d["device"], (x["site"] or {}).get("function"))
        if x["verdict"] != "unjudged": bad.append("%s: verdict %s" % (where, x["verdict"]))
        if x.get("unjudged_reason") != d["unjudged_reason"]: bad.append("%s: reason %s" % (where, x.get("unjudged_reason")))
        if not x.get("unjudged_blocks") or x["unjudged_bytes"] > x["bytes"]: bad.append("%s: %s of %s bytes" % (where, x.get("unjudged_bytes"), x["bytes"]))
        if not x["says"].startswith("unjudged: "): bad.append("%s: says %r" % (where, x["says"]))
if not seen: bad.append("no site with blocks made before the history")
print("; ".join(bad) or "same")
PY
)
check "racing threads, kept blocks made before the history: their site is unjudged too, for that reason: $out" '[ "$out" = same ]'
check "the text's row says unjudged, not a verdict" \
    'grep -q "  unjudged *leaky_site" leaks3.txt && grep -q "^ *unjudged: .* was made before the first entry the record kept" leaks3.txt && ! grep -q "  state  *leaky_site" leaks3.txt'
finish
