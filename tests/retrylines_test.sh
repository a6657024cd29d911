#!/bin/sh
# retrylines_test.sh BUILD_DIR SOURCE_DIR - whether a handled OOM is a retry depends on what the
# program did, not on how the retry is written (tests/retry_lines.c): a helper that catches the
# error, gives its cache back and asks for the same size again.  A stranger's trial: with the
# retry on a second line of the helper, `oom` said 'out of memory #1 ... verdict: demand' and
# summary 'CUDA OOMs: 2 | cudaMalloc retries: 0'; with the retry in a loop (one call),
# 'retried: not counted as an OOM' and 'CUDA OOMs: 1 | cudaMalloc retries: 1'.  Now both the
# latter, in oom, summary, report, --json and the sqlite export; main's own 900 MiB is the OOM.
TEST=retrylines . "$(dirname "$0")/testlib.sh"
export FAKECUDA_CAPACITY=1G

for way in lines loop; do
    "$CMH" record -q -o "$way.cmh" -- "$B/tests/retry_lines" "$way" >"$way.out" 2>&1
    check "$way: ran as designed ($(cat "$way.out"))" "grep -q 'retry_lines $way: 700 MiB: error 0, then 900 MiB: error 2' $way.out"
    "$CMH" oom "$way.cmh" >"$way.oom" 2>&1
    "$CMH" summary "$way.cmh" >"$way.sum" 2>&1
    "$CMH" summary --json "$way.cmh" >"$way.sumj" 2>&1
    "$CMH" oom --json "$way.cmh" >"$way.oomj" 2>&1
    "$CMH" report "$way.cmh" -o "$way.html" >/dev/null 2>&1
    "$CMH" frag "$way.cmh" >"$way.frag" 2>&1
    "$CMH" export -f sqlite "$way.cmh" -o "$way.db" >/dev/null 2>&1
    out=$(py - "$way" <<'PY'
import json, re, sqlite3, sys
w = sys.argv[1]
txt, summ, page = open(w + ".oom").read(), open(w + ".sum").read(), open(w + ".html").read()
s = json.load(open(w + ".sumj"))[0]
o = json.load(open(w + ".oomj"))[0]
got = {"oom text": (len(re.findall(r"out of memory #\d+ on", txt)), len(re.findall(r"retried: not counted as an OOM", txt))),
       "summary": tuple(int(x) for x in re.findall(r"CUDA OOMs: (\d+)\s*\|\s*cudaMalloc retries: (\d+)", summ)[0]),
       "summary json": (s["num_ooms"], s["num_alloc_retries"]),
       "oom json": (o["num_ooms"], o["num_alloc_retries"]),
       "oom events": (sum(1 for x in o["ooms"] if x["number"]), sum(1 for x in o["ooms"] if x["retried"])),
       "report": (len(re.findall(r"Out of memory #\d+</b>", page)), len(re.findall(r"Out of memory, retried</b>", page)))}
try:
    got["sqlite"] = tuple(sqlite3.connect(w + ".db").execute("SELECT ooms, oom_retries FROM devices").fetchall()[0])
except Exception as e:
    got["sqlite"] = repr(e)
bad = {k: v for k, v in got.items() if v != (1, 1)}
first = [x for x in o["ooms"] if x["retried"]]
if not first or first[0]["request"] != 700 << 20:
    bad["retried one"] = [(x["request"], x["number"]) for x in first]
num = [x for x in o["ooms"] if x["number"]]
if not num or num[0]["request"] != 900 << 20:
    bad["oom #1"] = [(x["request"], x["number"]) for x in num]
print("bad %s" % bad if bad else "same")
PY
)
    check "$way: 1 OOM the program saw (main's 900 MiB), 1 retry (the helper's 700 MiB), in every output: $out" '[ "$out" = same ]'
done
check "frag's last OOM (main's 900 MiB) is #1 in both" "grep -q 'the last out-of-memory error #1 ' lines.frag && grep -q 'the last out-of-memory error #1 ' loop.frag"
check "oom's words say which: the same call stack (loop), the same function's other line (lines)" \
    "grep -q 'the same call stack asked for as much again after 600.0 MiB was freed' loop.oom &&
     grep -q 'the same function (another line of it, from the same call) asked for as much again after 600.0 MiB was freed' lines.oom"
finish
