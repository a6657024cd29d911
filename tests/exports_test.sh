#!/bin/sh
# exports_test.sh BUILD_DIR SOURCE_DIR - every export of a native recording carries its frames
# as the reports show them (file:line from DWARF, demangled): the memory_viz pickle, JSON,
# Chrome, pprof and SQLite; --raw-frames keeps them as recorded.
TEST=exports . "$(dirname "$0")/testlib.sh"

"$CMH" record -q -o l.cmh -- "$B/samples/leaky" 4 >/dev/null
for f in l.pickle l.json l.trace.json l.pb.gz l.db; do "$CMH" export -o $f l.cmh 2>/dev/null || bad "export $f"; done
"$CMH" export --raw-frames -o raw.pickle l.cmh
"$CMH" export --raw-frames -o raw.db l.cmh 2>/dev/null
py - <<'PY' && ok "memviz pickle, JSON, Chrome and SQLite name leaky.c:LINE; --raw-frames (pickle, SQLite) does not" || bad "exports without file:line"
import json, pickle, sqlite3
def lines(frames):
    return {(f["name"] if "name" in f else f["function"], f["line"]) for f in frames
            if f.get("filename", f.get("file", "")).endswith("leaky.c") and f["line"] > 0}
d = pickle.load(open("l.pickle", "rb"))
fr = [f for seg in d["segments"] for b in seg["blocks"] for f in b.get("frames", [])]
fr += [f for t in d["device_traces"] for e in t for f in e.get("frames", [])]
got = lines(fr)
assert {n for n, _ in got} >= {"load_batch", "main"}, sorted(got)[:5]
assert not any(f["filename"] == "leaky" and f["line"] == 0 and f["name"] == "main" for f in fr), "raw main left"
raw = pickle.load(open("raw.pickle", "rb"))
rfr = [f for seg in raw["segments"] for b in seg["blocks"] for f in b.get("frames", [])]
assert not lines(rfr), "--raw-frames resolved frames"
j = json.load(open("l.json"))
assert {n for n, _ in lines(j["frames"])} >= {"load_batch", "main"}, j["frames"][:3]
c = json.load(open("l.trace.json"))
ev = c["traceEvents"] if isinstance(c, dict) else c
txt = json.dumps([e for e in ev if e.get("ph") not in ("C", "M")])
assert "leaky.c:" in txt and "load_batch" in txt, txt[:300]
db = sqlite3.connect("l.db")
rows = db.execute("select name, line from frames where filename like '%leaky.c' and line > 0").fetchall()
assert {r[0] for r in rows} >= {"load_batch", "main"}, rows
raw = sqlite3.connect("raw.db").execute("select count(*) from frames where filename like '%leaky.c'").fetchone()[0]
assert raw == 0, raw
PY
finish
