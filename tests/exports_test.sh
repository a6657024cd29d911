#!/bin/sh
# exports_test.sh BUILD_DIR SOURCE_DIR - every export of a native recording carries its frames
# as the reports show them (file:line from DWARF, demangled): the memory_viz pickle, JSON,
# Chrome, pprof and SQLite; --raw-frames keeps them as recorded.
TEST=exports . "$(dirname "$0")/testlib.sh"

"$CMH" record -q -o l.cmh -- "$B/samples/leaky" 4 >/dev/null
for f in l.pickle l.json l.trace.json l.pb.gz l.db; do "$CMH" export -o $f l.cmh 2>/dev/null || bad "export $f"; done
"$CMH" export --raw-frames -o raw.pickle l.cmh
# -o x.html wrote a memviz pickle named x.html: no export writes a page; the commands that do are named
check "export -o x.html is refused, report and view named, nothing written" \
    "! '$CMH' export -o l.html l.cmh 2>html.err && grep -q 'cumemhist report' html.err && [ ! -e l.html ]"
check "export -f memviz -o x.html still writes the pickle asked for" \
    "'$CMH' export -f memviz -o l2.html l.cmh 2>/dev/null && py -c 'import pickle; pickle.load(open(\"l2.html\", \"rb\"))'"
# ... and any name whose extension is no export format's (-o x.folded wrote a pickle): refused, the
# formats and flamegraph --folded named; a name with no extension is memviz's
check "export -o x.folded is refused, the formats named, nothing written" \
    "! '$CMH' export -o l.folded l.cmh 2>fold.err && grep -q 'flamegraph --folded' fold.err && grep -q '.pickle or .pkl is memviz' fold.err && [ ! -e l.folded ]"
# pprof holds every device, as every report does (it held one: the lowest device used, one
# emptied by the end, beside device 1's live 2 MiB, so go tool pprof showed 0 of 0; then the one
# holding the most, device 1, with a note on stderr only); each sample is labelled with its device
py - <<'EOF'
import pickle
M = 1 << 20
fr = lambda line: [{"filename": "train.py", "line": line, "name": "step"}]
ent = lambda a, addr, size, t, line: {"action": a, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": fr(line)}
P0, P1 = 0x7F0000000000, 0x8F0000000000
t0 = [ent(a, P0, 8 * M, i + 1, 7) for i, a in enumerate(["segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"])]
t1 = [ent("segment_alloc", P1, 2 * M, 6, 9), ent("alloc", P1, 2 * M, 7, 9)]
seg = {"device": 1, "address": P1, "total_size": 2 * M, "allocated_size": 2 * M, "active_size": 2 * M, "requested_size": 2 * M,
       "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
       "blocks": [{"address": P1, "size": 2 * M, "requested_size": 2 * M, "state": "active_allocated", "frames": fr(9)}]}
pickle.dump({"segments": [seg], "device_traces": [t0, t1], "allocator_settings": {}, "external_annotations": []}, open("twodev.pickle", "wb"))
EOF
check "export -f pprof holds both devices, device 1's live 2 MiB among them, and says so ($(cat twodev.err))" \
    "'$CMH' export twodev.pickle -o twodev.pb.gz 2>twodev.err &&
     grep -qx 'cumemhist: wrote twodev.pb.gz: 1 record, 7 trace entries of devices 0, 1 (label device: -tagfocus=device=N for one)' twodev.err &&
     py '$SRC/tests/check_pictures.py' pprof twodev.pb.gz $((2 << 20)) $((10 << 20))"
check "export -o NAME without an extension writes the memviz pickle" \
    "'$CMH' export -o lsnap l.cmh 2>/dev/null && py -c 'import pickle; pickle.load(open(\"lsnap\", \"rb\"))'"
# a directory holding no snapshot is said to be so, not 'one snapshot at a time (0 given)'
mkdir adir
"$CMH" export adir/ >/dev/null 2>adir.err
rc=$?
check "export of a directory with no snapshot: 'adir/: no snapshots in this directory', exit 1 ($(cat adir.err))" \
    "[ $rc -eq 1 ] && grep -q '^cumemhist: adir/: no snapshots in this directory' adir.err"
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

# The same program, the same verdict in either format: the memory_viz export carries what
# leaks judges from (each entry's recording thread: a worker's leak is judged over its own steps)
# and what owners are named from (each frame's module), in keys memory_viz ignores.
"$CMH" record -q -o thr.cmh -- "$B/tests/threaded_leak" leak 100 >/dev/null
"$CMH" export -o thr.pickle thr.cmh 2>/dev/null
"$CMH" leaks --json thr.cmh >thr.cmh.json
"$CMH" leaks --json thr.pickle >thr.pickle.json
py - <<'PY' && ok "leaks on the record and on its memviz export: one verdict, one owner (growing, threaded_leak)" || bad "leaks differs between thr.cmh and thr.pickle"
import json
a, b = (json.load(open(f)) for f in ("thr.cmh.json", "thr.pickle.json"))
def view(r):
    return [(d["device"], d["judged"], d["steps"].get("threads"), [(x["verdict"], x["owner"], x["bytes"], x["says"], x["site"]["module"]) for x in d["sites"]]) for d in r]
va, vb = view(a), view(b)
print(va, vb, sep="\n")
assert va == vb
assert va[0][3][0][:2] == ("growing", "threaded_leak"), va
PY

# A loop with marks and a leak that stops halfway: its words say it stopped; the export carries
# the marks aside (memory_viz sees annotations), so the pickle reads back with the record's steps
# and entry numbers, and export says how memory_viz's own numbers map, which a replay of the
# pickle as memory_viz reads it confirms (its allocated peak is at the entry named).
"$CMH" record -q -o st.cmh -- "$B/tests/stops_leak" 20 10 marks >/dev/null
"$CMH" leaks st.cmh >st.txt
grep -q 'stopped: grew +1.0 MiB per step over steps 1-10, then flat for the last 10 steps; 18.0 MiB still held at the end, never freed' st.txt &&
    ok "leaks: a leak that stopped says so in text" || bad "leaks' words for a leak that stopped: $(sed -n 3,8p st.txt)"
"$CMH" export -o st.pickle st.cmh 2>st.err
"$CMH" leaks st.pickle >stp.txt
"$CMH" peak --json st.cmh >st.peak.json
"$CMH" peak --json st.pickle >stp.peak.json
py - <<'PY' && ok "marks travel in the export: the same steps, verdicts and entry numbers read back; memory_viz's page rows and the peak's row as export says" || bad "marks and numbering: $(cat st.err)"
import json, pickle, re
# past the lines that name the file (the process, how it ended, the device's heading)
a = [l for l in open("st.txt").read().splitlines() if not l.startswith("st.cmh")]
b = [l for l in open("stp.txt").read().splitlines() if not l.startswith("st.pickle")]
assert a == b, (a[:3], b[:3])
assert "20 from the program's marks" in a[0], a[0]
pa, pb = json.load(open("st.peak.json"))[0], json.load(open("stp.peak.json"))[0]
assert pa["peak_allocated"]["index"] == pb["peak_allocated"]["index"] and pa["peak_allocated"]["bytes"] == pb["peak_allocated"]["bytes"] and pa["trace_entries"] == pb["trace_entries"], (pa["peak_allocated"], pb["peak_allocated"])
# the page's rows as MemoryViz.js's annotate_snapshot() makes them: a free_completed right after
# the free_requested of its address folded into one "free" row; versions count each address's
# block frees and segment frees, across the devices in order (what ctrl-f finds a row by)
m = re.search(r"^cumemhist: export: device 0: (\d+) entries are the pickle's (\d+), memory_viz's (\d+) rows; "
              r"the allocated peak, entry (\d+), is the row `([^`]+)` \(ctrl-f\); docs/CLI.md \"Entry numbers\"$", open("st.err").read(), re.M)
assert m, open("st.err").read()
ours, total, rows, rec = map(int, m.groups()[:4])
assert ours == pa["trace_entries"] and rec == pa["peak_allocated"]["index"], (m.groups(), pa["peak_allocated"])
d = pickle.load(open("st.pickle", "rb"))
tr = d["device_traces"][0]
assert len(tr) == total, (len(tr), total)
live, best, at = 0, -1, -1
for i, e in enumerate(tr):
    live += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
    if live > best:
        best, at = live, i
assert best == pa["peak_allocated"]["bytes"], (at, best)
bver, sver, page, label = {}, {}, [], None
for i, e in enumerate(tr):
    a, seg = e["action"], e["action"].startswith("segment")
    sp = sver if seg else bver
    v = sp.get(e.get("addr"), 0)
    if a in ("free_completed", "segment_free", "segment_unmap"): sp[e["addr"]] = v + 1
    if a == "free_completed" and page and page[-1][0] == "free_requested" and page[-1][1] == e["addr"]:
        page[-1][0] = "free"
    else:
        page.append([a, e.get("addr"), v])
    if i == at: label = "%s %s%x_%d" % (page[-1][0], "s" if seg else "b", e["addr"], page[-1][2])
assert rows == len(page) < total, (rows, len(page), total)
assert m.group(5) == label, (m.group(5), label)
PY
# A two-device record that ran out of memory on device 1: pprof's profile holds both devices, the
# OOM's among them (one profile of one device was of device 0, said on stderr only).
py - <<'PY'
import pickle
M, F = 1 << 20, [{"name": "big", "filename": "/proj/a.py", "line": 3}]
def seg(dev, addr, blocks):
    bl, a = [], addr
    for size, state in blocks:
        bl.append({"address": a, "size": size, "requested_size": size if state != "inactive" else 0, "state": state,
                   "frames": F if state != "inactive" else []})
        a += size
    act = sum(b["size"] for b in bl if b["state"] != "inactive")
    return {"device": dev, "address": addr, "total_size": a - addr, "allocated_size": act, "active_size": act, "requested_size": act,
            "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": bl}
def ent(action, addr, size, t, **kw):
    return dict({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1_700_000_000_000_000 + t, "frames": F}, **kw)
A0, A1 = 0x7F1000000000, 0x7F2000000000
segs = [seg(0, A0, [(2 * M, "active_allocated")]), seg(1, A1, [(60 * M, "active_allocated"), (20 * M, "inactive"), (20 * M, "active_allocated")])]
t0 = [ent("segment_alloc", A0, 2 * M, 0), ent("alloc", A0, 2 * M, 1)]
t1 = [ent("segment_alloc", A1, 100 * M, 0), ent("alloc", A1, 60 * M, 1), ent("alloc", A1 + 60 * M, 20 * M, 2), ent("alloc", A1 + 80 * M, 20 * M, 3),
      ent("free_requested", A1 + 60 * M, 20 * M, 4), ent("free_completed", A1 + 60 * M, 20 * M, 4), ent("oom", 0, 40 * M, 5, device_free=10 * M)]
pickle.dump({"segments": segs, "device_traces": [t0, t1], "allocator_settings": {"expandable_segments": False}, "external_annotations": []},
            open("oom1.pickle", "wb"))
PY
"$CMH" export -o oom1.pb.gz oom1.pickle 2>oom1.err
"$CMH" export --device 1 -o oom1d1.pb.gz oom1.pickle 2>/dev/null
"$CMH" export --device 0 -o oom1d0.pb.gz oom1.pickle 2>/dev/null
check "pprof of a record that ran out on device 1: both devices by default, --device 1 that one alone" \
    "! cmp -s oom1.pb.gz oom1d1.pb.gz && ! cmp -s oom1.pb.gz oom1d0.pb.gz && ! cmp -s oom1d0.pb.gz oom1d1.pb.gz &&
     grep -q 'trace entries of devices 0, 1 (label device' oom1.err"
"$CMH" whatif oom1.pickle 2>oom1w.err >/dev/null
check "whatif names the same device in the same words, and which OOM of it (oom's number)" "grep -qx \"cumemhist: whatif: device 1, where the record's first out-of-memory error happened: its #1 at entry [0-9][0-9]*.* (--device N for another)\" oom1w.err"
# a record of one trace entry is counted in the singular ('1 trace entries' before), by export
# -f sqlite on stderr and in plot's panel title
py -c "
import pickle
a, fr = 0x7f5000000000, [{'filename': '/proj/run.py', 'line': 10, 'name': 'grow'}]
blk = {'address': a, 'size': 1 << 20, 'requested_size': 1 << 20, 'state': 'active_allocated', 'frames': fr}
seg = {'device': 0, 'address': a, 'total_size': 1 << 20, 'allocated_size': 1 << 20, 'active_size': 1 << 20, 'requested_size': 1 << 20,
       'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': fr, 'blocks': [blk]}
tr = [{'action': 'alloc', 'addr': a, 'size': 1 << 20, 'stream': 0, 'time_us': 1000, 'frames': fr}]
pickle.dump({'segments': [seg], 'device_traces': [tr], 'allocator_settings': {}}, open('one.pickle', 'wb'), protocol=4)"
"$CMH" export -f sqlite one.pickle -o one.db 2>one.err
"$CMH" plot one.pickle -o one.svg 2>/dev/null
check "one trace entry: 'wrote one.db: 1 record, 1 trace entry', and plot's '1 trace entry'" \
    "grep -qx 'cumemhist: wrote one.db: 1 record, 1 trace entry' one.err && grep -q ' 1 trace entry</text>' one.svg && ! grep -q '1 trace entries' one.svg"

# every format written to a file says so, in one form (-f chrome and -f json said nothing, while
# sqlite said 'wrote FILE'); standard output, which holds the export itself, gets no such line
n=$("$CMH" trace --json l.cmh 2>/dev/null | py -c 'import json, sys; print(sum(len(d["entries"]) for d in json.load(sys.stdin)))' 2>/dev/null)
: >wrote.err
for f in memviz:w.pickle json:w.json chrome:w.trace.json pprof:w.pb.gz sqlite:w.db; do
    "$CMH" export -f ${f%%:*} -o ${f#*:} l.cmh 2>w.err || bad "export -f ${f%%:*}"
    of=; [ ${f%%:*} = pprof ] && of=" of device 0" # a profile is of one device, its entries said so
    # the memviz pickle: the entries its device_traces hold, the implied ones said (it said the
    # record's count of a file holding more)
    m=$n; [ ${f%%:*} = memviz ] && m=$(py -c "import pickle, sys; print(sum(len(t) for t in pickle.load(open(sys.argv[1], 'rb'))['device_traces']))" w.pickle) &&
        of=" ($((m - n > 0 ? m - n : 0)) implied for memory_viz, dropped when read back)"
    [ ${f%%:*} = memviz ] && [ "$m" = "$n" ] && of=
    grep -x "cumemhist: wrote ${f#*:}: 1 record, $m trace entries$of" w.err >>wrote.err || echo "${f%%:*}: $(cat w.err)" >>wrote.err
done
"$CMH" record -q -o l2.cmh -- "$B/samples/leaky" 4 >/dev/null # (another process: one file twice is one process, counted once)
"$CMH" export -f chrome -o w2.trace.json l.cmh l2.cmh 2>w.err
grep -x "cumemhist: wrote w2.trace.json: 2 records, $((2 * n)) trace entries" w.err >>wrote.err || echo "chrome of 2: $(cat w.err)" >>wrote.err
"$CMH" export -f json l.cmh >/dev/null 2>w.err
"$CMH" export -f chrome -o - l.cmh >/dev/null 2>>w.err
check "export -f memviz, json, chrome (1 and 2 records), pprof, sqlite: 'cumemhist: wrote FILE: 1 record, $n trace entries'; none to stdout ($(grep -v '^cumemhist: wrote' wrote.err | head -3 | tr '\n' '|'))" \
    "[ \$(grep -c '^cumemhist: wrote w' wrote.err) -eq 6 ] && [ \$(wc -l <wrote.err) -eq 6 ] && [ ! -s w.err ]"
# pprof of one device of two counts that device's entries (trial5 #11: 'wrote f1.pb.gz: 1 record,
# 122 trace entries' where device 1 has 30, 122 both devices')
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G "$CMH" record -q -o mg.cmh -- "$B/samples/multigpu" 4 >/dev/null 2>&1
n1=$("$CMH" trace --json --device 1 mg.cmh 2>/dev/null | py -c 'import json, sys; print(len(json.load(sys.stdin)[0]["entries"]))' 2>/dev/null)
"$CMH" export -f pprof --device 1 -o mg1.pb.gz mg.cmh 2>mg1.err
check "export -f pprof --device 1: 'wrote mg1.pb.gz: 1 record, $n1 trace entries of device 1' ($(cat mg1.err))" \
    "[ -n '$n1' ] && grep -qx 'cumemhist: wrote mg1.pb.gz: 1 record, $n1 trace entries of device 1' mg1.err"
# a stream-ordered pool's cache is in every report's reserved but not on memory_viz's page (it
# draws segments): export says so, with how much (a stranger's trial: the page read 0 B reserved
# at the end where peak said 4.0 MiB)
"$CMH" record -q -o pa.cmh -- "$B/samples/pool_async" >/dev/null 2>&1
"$CMH" export pa.cmh -o pa.pickle 2>pa.err
end_res=$("$CMH" peak --json pa.cmh | py -c 'import json, sys; d = json.load(sys.stdin)[0]; print(d["end"]["reserved"])')
py - pa.pickle "$end_res" <<'PY' && ok "export names the pool cache memory_viz leaves out, as much as the page's reserved lacks at the end" || bad "pool cache note: $(cat pa.err)"
import pickle, re, sys
d = pickle.load(open(sys.argv[1], "rb"))
page_end = sum(g["total_size"] for g in d["segments"] if g["device"] == 0)
m = re.search(r"^cumemhist: export: device 0: memory_viz draws segments, not a stream-ordered pool's cache \(freed to a "
              r"stream-ordered pool, kept: cuMemPoolTrimTo gives it back\): its reserved reads "
              r"less than the reports' by that cache \(up to ([0-9.]+) MiB; ([0-9.]+) (MiB|B) at the end\)$", open("pa.err").read(), re.M)
assert m, open("pa.err").read()
end = float(m.group(2)) * (2**20 if m.group(3) == "MiB" else 1)
assert abs(end - (int(sys.argv[2]) - page_end)) < 0.06 * 2**20, (m.groups(), sys.argv[2], page_end)
PY


# a stream-ordered pool's cached frees and trims (tests/poolcache.c): reserved's Tot Alloc / Tot
# Freed are the pool's growth and trims as its samples show them (124 / 96 MiB: the recorder reads
# the pool again at each synchronize, so the trim and the growth that once fell between two
# samples both saying 28 MiB are seen; 108 / 80 before), its peak 28 MiB,
# and the SQLite export's reserved_delta of a free the pool keeps is 0.  summary said Tot Alloc
# 332 MiB (each cached free -16, +16, -16 MiB) and a peak of 44 MiB (trial8 F20).
"$CMH" record -q -o pc.cmh -- "$B/tests/poolcache" >pc.out 2>&1
rm -f pc.db
"$CMH" summary --json pc.cmh >pc.sum.json 2>&1
"$CMH" frag --json pc.cmh >pc.frag.json 2>&1
"$CMH" owners --json pc.cmh >pc.own.json 2>&1
"$CMH" peak --json pc.cmh >pc.peak.json 2>&1
"$CMH" export pc.cmh -o pc.db >/dev/null 2>&1
check "poolcache: summary's reserved totals count the pool's growth and trims once, peak 28 MiB; SQLite, frag, owners and peak agree" 'grep -qx done pc.out && py - <<PY
import json, sqlite3
M = 2**20
r = json.load(open("pc.sum.json"))[0]["stats"]["reserved_bytes.all"]
assert (r["allocated"], r["freed"], r["current"], r["peak"]) == (124 * M, 96 * M, 28 * M, 28 * M), {k: v / M for k, v in r.items()}
db = sqlite3.connect("pc.db")
kept = db.execute("SELECT reserved_delta FROM events WHERE action = \"segment_free\"").fetchall()
assert len(kept) == 10 and set(kept) == {(0,)}, kept
(start, end, peak), = db.execute("SELECT reserved_at_start, reserved_at_end, peak_reserved FROM devices").fetchall()
(total,), = db.execute("SELECT SUM(reserved_delta) FROM events").fetchall()
assert (start, end, peak, start + total) == (0, 28 * M, 28 * M, 28 * M), (start, end, peak, total)
f = json.load(open("pc.frag.json"))[0]
assert (f["reserved"], f["allocated"], f["free_in_segments"], f["pool_cache"]) == (28 * M, 12 * M, 16 * M, 16 * M), f
p = json.load(open("pc.peak.json"))[0]
assert p["peak_reserved"]["bytes"] == 28 * M, p["peak_reserved"]
o = json.load(open("pc.own.json"))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
assert end["recorded"] == 28 * M, end
PY'

# processes.ending says how each process ended, the same words as every report's "the process"
# line (before: NULL for a process that exited, however it exited; only a killed one's was said)
"$CMH" record -q -o oo.cmh -- "$B/samples/oom_demo" >/dev/null 2>&1
"$CMH" record -q -o dk.cmh -- "$B/tests/dies" kill >/dev/null 2>&1
"$CMH" record -q -o dt.cmh -- "$B/tests/dies" term >/dev/null 2>&1
for f in l oo dk dt; do "$CMH" export -f sqlite -o end_$f.db $f.cmh 2>/dev/null; "$CMH" export -f json -o end_$f.json $f.cmh 2>/dev/null; "$CMH" summary $f.cmh >end_$f.txt 2>/dev/null; done
out=$(py - <<'PY'
import json, sqlite3
want = {"l": "exited with status 0; this snapshot was written at its exit",
        "oo": "exited with status 1; this snapshot was written at its exit",
        "dk": "killed by SIGKILL", "dt": "was ended by SIGTERM"}
bad = []
for f, w in want.items():
    end = sqlite3.connect("end_%s.db" % f).execute("SELECT ending FROM processes").fetchone()[0]
    said = [l.split(": the process ", 1)[1].strip() for l in open("end_%s.txt" % f) if ": the process " in l]
    if not end or w not in end: bad.append("%s: ending %r, not %r" % (f, end, w))
    if said != [end]: bad.append("%s: summary says %r, sqlite %r" % (f, said, end))
    js = json.load(open("end_%s.json" % f))["cumemhist"].get("ending")
    if js != end: bad.append("%s: export json says %r, sqlite %r" % (f, js, end))
print("; ".join(bad) or "same")
PY
)
check "sqlite processes.ending: exit status 0, exit status 1 (its OOM), SIGKILL, SIGTERM, as summary and export json say: $out" '[ "$out" = same ]'
# ranks says how a process ended where that is news: a clean exit 0 (now said by every exit dump)
# is left to --json, the rank that exited 1 or was killed stands out
"$CMH" ranks l.cmh oo.cmh dk.cmh >end_ranks.txt 2>/dev/null
"$CMH" ranks --json l.cmh oo.cmh dk.cmh >end_ranks.json 2>/dev/null
check "ranks: the exit-1 and killed rows say how they ended, the exit-0 row does not; --json has all three" \
    "grep -q '\[oo.cmh\]  (exited with status 1; ' end_ranks.txt && grep -q '\[dk.cmh\]  (.*SIGKILL' end_ranks.txt &&
     ! grep -q 'exited with status 0' end_ranks.txt &&
     [ \"\$(py -c 'import json; print(sorted(p[\"ending\"].split(\";\")[0] for p in json.load(open(\"end_ranks.json\"))[\"processes\"])[:2])')\" = \"['exited with status 0', 'exited with status 1']\" ]"
finish
