#!/usr/bin/env python3
"""facts_test.py BUILD_DIR SOURCE_DIR [PYTORCH_FIXTURES] - one set of facts in every output.

For each record of a corpus (fixtures, our own recordings of driver-level, block-API, pool,
VMM/expandable, multi-device and OOM programs on the fake driver, a merged record, a recovered
flight record), every output is produced and parsed back with a real client where there is one
(Python's sqlite3, json, pickle, an XML parser), and each fact an output carries must equal the
one `peak --json` / `oom --json` give, per device.  OUTPUTS x FACTS is the matrix: a new output
joins by one line in OUTPUTS (its reader and the facts it must carry).
"""
import html
import json
import os
import pickle
import re
import sqlite3
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

B, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
PT = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else ""
CMH = os.path.join(B, "cumemhist")
F = os.path.join(SRC, "tests", "fixtures")
T = tempfile.mkdtemp(prefix="cmh-facts-")
ENV = dict(os.environ)
ENV["LD_LIBRARY_PATH"] = os.path.join(B, "fakecuda") + (":" + ENV["LD_LIBRARY_PATH"] if ENV.get("LD_LIBRARY_PATH") else "")
ENV["XDG_RUNTIME_DIR"] = T
ENV["CUMEMHIST_REGISTRY"] = T + "/cumemhist"
ENV.pop("LD_PRELOAD", None)
# a sanitizer build: its runtime first in every program we start (the recorder preloads after it);
# ctest hands it over as CMH_SH_PRELOAD, python itself runs without it
if os.environ.get("CMH_SH_PRELOAD"):
    ENV["LD_PRELOAD"] = os.environ["CMH_SH_PRELOAD"]
PLAIN_ENV = {k: v for k, v in ENV.items() if k != "LD_PRELOAD"}

FACTS = ["clock_origin_ns", "marks", "entries", "peak_allocated", "peak_allocated_entry", "peak_allocated_time_ns", "peak_reserved", "peak_reserved_entry",
         "peak_reserved_time_ns", "peak_requested", "peak_requested_entry", "end_allocated", "end_reserved", "end_requested", "ooms",
         "annotations"]
# facts that are lists: live bytes by site at the allocated peak (the top ten), and at the end with
# each site's verdict and its words (the top ten); physical memory made with cuMemCreate and held
# mapped nowhere at the end, [bytes, handles] and by cuMemCreate site (the top ten)
SITE_FACTS = ["sites_at_peak", "sites_at_end", "vmm_unmapped", "vmm_sites"]
TOP = 10


def run(*args, env=None, ok=True):
    p = subprocess.run([CMH, *args], cwd=T, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if ok and p.returncode != 0:
        raise RuntimeError("cumemhist %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.decode(errors="replace")[-400:]))
    return p.stdout


def out(name):
    return os.path.join(T, name)


# ---- the reference: peak --json and oom --json, the analyzer's own answers ----
def reference(rec):
    facts = {}
    for d in json.loads(run("peak", "--json", rec)):
        if d["device"] < 0:
            continue
        f = facts.setdefault(d["device"], {})
        f["entries"] = d["trace_entries"]
        for k in ("allocated", "reserved", "requested"):
            p = d.get("peak_" + k)
            if p:
                # an unknown time is null in JSON (NULL in SQLite, 0 in the pictures' attributes): 0 here
                f["peak_" + k], f["peak_%s_entry" % k], f["peak_%s_time_ns" % k] = p["bytes"], p["index"], p["time_ns"] or 0
            f["end_" + k] = d["end"][k]
    for d in json.loads(run("peak", "--json", "--top", str(TOP), rec)):
        if d["device"] in facts:
            facts[d["device"]]["sites_at_peak"] = [x["bytes"] for x in d["sites_at_peak"]][:TOP]
    for d in json.loads(run("leaks", "--json", "--top", str(TOP), rec, ok=False) or b"[]"):
        if d["device"] in facts:
            facts[d["device"]]["sites_at_end"] = [[x["bytes"], x["verdict"], x["says"]] for x in d["sites"]][:TOP]
            v = d["vmm_unmapped"]
            facts[d["device"]]["vmm_unmapped"] = [v["bytes"], v["handles"]]
            facts[d["device"]]["vmm_sites"] = [[x["bytes"], x["handles"], x["verdict"]] + vmm_site(x["site"]) for x in v["sites"]][:TOP]
    for d in json.loads(run("oom", "--json", rec, ok=False) or b"[]"):
        if d["device"] in facts:
            # null: no history, the errors not known; the other outputs count the record's OOM events, none
            facts[d["device"]]["ooms"] = len(d["ooms"] or [])
    return facts


def vmm_site(frame):
    return [frame["function"], frame["file"], frame["line"]] if frame else ["", "", 0]


# ---- each output, parsed back: {device: {fact: value}} ----
def attrs_facts(a):
    f = {}
    for k in FACTS:
        v = a.get("data-" + k.replace("_", "-"))
        if v is not None:
            f[k] = int(v)
    return int(a["data-device"]), f


def from_sqlite(rec):
    db = out("f.db")
    if os.path.exists(db):
        os.unlink(db)
    run("export", "-f", "sqlite", "-o", db, rec)
    c = sqlite3.connect(db)
    facts = {}
    for row in c.execute("SELECT device, trace_entries, peak_allocated, peak_allocated_seq, peak_allocated_time_ns, peak_reserved,"
                         " peak_reserved_seq, peak_reserved_time_ns, allocated_at_end, reserved_at_end FROM devices"):
        if row[0] < 0:
            continue
        f = dict(zip(["entries", "peak_allocated", "peak_allocated_entry", "peak_allocated_time_ns", "peak_reserved",
                      "peak_reserved_entry", "peak_reserved_time_ns", "end_allocated", "end_reserved"], row[1:]))
        # NULL: the peak was the state before the first entry (no entry), or its time is unknown (null in JSON)
        f = {k: (-1 if k.endswith("_entry") else 0) if v is None else v for k, v in f.items()}
        f["ooms"] = c.execute("SELECT count(*) FROM events WHERE device=? AND action='oom'", (row[0],)).fetchone()[0]
        f["annotations"] = c.execute("SELECT count(*) FROM marks WHERE device=? AND stage!='point'", (row[0],)).fetchone()[0]
        facts[row[0]] = f
    c.close()
    return facts


def from_chrome(rec):
    path = out("f.trace.json")
    run("export", "-f", "chrome", "-o", path, rec)
    d = json.load(open(path))
    origin = int(d["otherData"]["time_origin_ns"]) if "time_origin_ns" in d.get("otherData", {}) else 0
    facts = {}
    for e in d["traceEvents"]:
        m = re.match(r"gpu(\d+) memory$", e.get("name", ""))
        if e["ph"] == "C" and m:
            f = facts.setdefault(int(m.group(1)), {"ooms": 0, "annotations": 0, "_pid": e["pid"], "clock_origin_ns": origin})
            a = e["args"]["allocated"]
            f["end_allocated"], f["end_reserved"] = a, a + e["args"]["reserved_free"]
            if a > f.get("peak_allocated", -1):
                f["peak_allocated"], f["peak_allocated_time_ns"] = a, origin + round(float(e["ts"]) * 1000)
    bypid = {f["_pid"]: f for f in facts.values()}
    for e in d["traceEvents"]:
        f = bypid.get(e.get("pid"))
        if f is None:
            continue
        if e["ph"] == "i" and e.get("name", "").startswith("out of memory"):
            f["ooms"] += 1
        if e.get("cat") == "annotation":
            f["annotations"] += 2 if e["ph"] == "X" else 1
        if e["ph"] == "i" and e.get("name", "").startswith("peak allocated"):
            f["sites_at_peak"] = [x["bytes"] for x in e["args"]["sites"]][:TOP]
    for f in facts.values():
        del f["_pid"]
        f.setdefault("sites_at_peak", [])  # no instant: nothing was live at the peak
    return facts


def from_owners(rec):
    facts = {}
    for d in json.loads(run("owners", "--json", rec)):
        if d["device"] < 0:
            continue
        f = {"entries": d["trace_entries"], "vmm_unmapped": [0, 0]}
        for m in d["moments"]:
            if m["moment"] == "end" and d["trace_entries"]:
                f["_end_index"] = m["index"]
            if m["moment"] == "end":
                for r in m["rows"]:
                    if r["kind"] == "vmm_unmapped":
                        f["vmm_unmapped"] = [r["bytes"], r["allocations"]]
        facts[d["device"]] = f
    return facts


def from_plot(rec):
    path = out("f.svg")
    run("plot", "-o", path, rec)
    facts = {}
    for g in ET.parse(path).getroot().iter("{http://www.w3.org/2000/svg}g"):
        if g.get("class") == "facts":
            dev, f = attrs_facts(g.attrib)
            facts.setdefault(dev, {}).update(f)
    # the marker drawn at the peak says the same bytes and entry
    for g in ET.parse(path).getroot().iter("{http://www.w3.org/2000/svg}g"):
        if g.get("class") != "peak":
            continue
        dev = int(g.get("data-device"))
        if int(g.get("data-bytes")) != facts[dev].get("peak_allocated") or int(g.get("data-entry")) != facts[dev].get("peak_allocated_entry"):
            facts[dev]["peak_marker_disagrees"] = (g.get("data-bytes"), g.get("data-entry"))
    return facts


def from_report(rec):
    path = out("f.html")
    run("report", "-o", path, rec)
    facts = {}
    page = open(path, encoding="utf-8").read()
    for tag in re.findall(r"<div class=\"facts\"[^>]*>", page):
        dev, f = attrs_facts(dict(re.findall(r"([\w-]+)=\"([^\"]*)\"", tag)))
        facts[dev] = f
    for tag in re.findall(r"<h3 class=\"vmm-held\"[^>]*>", page):
        a = dict(re.findall(r"([\w-]+)=\"([^\"]*)\"", tag))
        facts.setdefault(int(a["data-device"]), {})["vmm_unmapped"] = [int(a["data-bytes"]), int(a["data-handles"])]
    for tag in re.findall(r"<tr class=\"vmm-site\"[^>]*>", page):
        a = dict(re.findall(r"([\w-]+)=\"([^\"]*)\"", tag))
        facts.setdefault(int(a["data-device"]), {}).setdefault("vmm_sites", []).append(
            [int(a["data-bytes"]), int(a["data-handles"]), a["data-verdict"], html.unescape(a["data-function"]), html.unescape(a["data-file"]), int(a["data-line"])])
    for tag in re.findall(r"<tr class=\"(?:peak|end)-site\"[^>]*>", page):
        a = dict(re.findall(r"([\w-]+)=\"([^\"]*)\"", tag))
        f = facts.setdefault(int(a["data-device"]), {})
        if "peak-site" in tag:
            f.setdefault("sites_at_peak", []).append(int(a["data-bytes"]))
        else:
            f.setdefault("sites_at_end", []).append([int(a["data-bytes"]), a["data-verdict"], html.unescape(a["data-says"])])
    for f in facts.values():
        f.setdefault("sites_at_peak", [])
        f.setdefault("sites_at_end", [])
        f.setdefault("vmm_unmapped", [0, 0])
        f.setdefault("vmm_sites", [])
        f["sites_at_peak"] = f["sites_at_peak"][:TOP]
        f["sites_at_end"] = f["sites_at_end"][:TOP]
    return facts


def snapshot_dict_facts(d):
    """PyTorch's snapshot dict (the memviz pickle, the JSON export): OOMs and annotations per device"""
    facts = {}
    for dev, tr in enumerate(d.get("device_traces", [])):
        facts[dev] = {"ooms": sum(1 for e in tr if e.get("action") == "oom"), "annotations": 0}
    for a in d.get("external_annotations", []):
        facts.setdefault(a["device"], {"ooms": 0, "annotations": 0})["annotations"] += 1
    return facts


def from_memviz(rec):
    path = out("f.pickle")
    # the last record's export, made from a PyTorch pickle, is in PyTorch's own format with no mark
    # of ours, which export refuses to replace (docs/CLI.md "Where output goes"): a fresh path each time
    if os.path.exists(path):
        os.remove(path)
    run("export", "-f", "memviz", "-o", path, rec)
    return snapshot_dict_facts(pickle.load(open(path, "rb")))


def from_json(rec):
    return snapshot_dict_facts(json.loads(run("export", "-f", "json", rec)))


GO = subprocess.run(["sh", "-c", "command -v go"], stdout=subprocess.PIPE).stdout.decode().strip()


def from_pprof(rec):
    """go tool pprof's own reading: the sample columns summed, the entries its comment names."""
    facts = {}
    for d in json.loads(run("peak", "--json", rec)):
        dev = d["device"]
        if dev < 0:
            continue
        path = out("f%d.pb.gz" % dev)
        run("export", "-f", "pprof", "--device", str(dev), "-o", path, rec)
        p = subprocess.run([GO, "tool", "pprof", "-raw", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=PLAIN_ENV)
        text = p.stdout.decode(errors="replace")
        lines = text.splitlines()
        if p.returncode != 0 or "Samples:" not in lines:
            facts[dev] = {"pprof_unreadable": True}
            continue
        i = lines.index("Samples:")
        cols = lines[i + 1].split()
        sums = [0] * len(cols)
        for ln in lines[i + 2:]:
            if re.match(r"\s+[\w.]+:\[", ln):  # a sample's labels (device:[0 count], owner:[cuBLAS (libcublas.so.13)])
                continue
            m = re.match(r"\s*([\d\s]+):", ln)
            if not m:
                break
            for k, v in enumerate(m.group(1).split()):
                sums[k] += int(v)
        f = {}
        for k, c in enumerate(cols):
            if c.startswith("live_space"):
                f["end_allocated"] = sums[k]
            if c.startswith("peak_space"):
                f["peak_allocated"] = sums[k]
        m = re.search(r"at the allocated peak \((?:entry (\d+)|(before the first entry))[;)]", text)
        if m:  # (before the first entry: peak --json's index -1; "; ...": a trace begun mid-run, its peak a lower bound)
            f["peak_allocated_entry"] = int(m.group(1)) if m.group(1) else -1
        facts[dev] = f
    return facts


# output: (reader, the facts it must carry)
OUTPUTS = {
    "sqlite": (from_sqlite, ["entries", "peak_allocated", "peak_allocated_entry", "peak_allocated_time_ns", "peak_reserved",
                             "peak_reserved_entry", "peak_reserved_time_ns", "end_allocated", "end_reserved", "ooms", "annotations"]),
    "chrome": (from_chrome, ["clock_origin_ns", "end_allocated", "end_reserved", "peak_allocated", "peak_allocated_time_ns", "ooms", "annotations",
                             "sites_at_peak"]),
    "owners": (from_owners, ["entries", "vmm_unmapped"]),
    "plot": (from_plot, FACTS),
    "report": (from_report, FACTS + SITE_FACTS),
    # memory_viz has no marks: a point mark becomes a START/END pair beside PyTorch's annotations,
    # so its count is the record's annotations only when the record has no marks
    "memviz": (from_memviz, ["ooms", "annotations_unless_marks"]),
    "json": (from_json, ["ooms", "annotations_unless_marks"]),
    "pprof": (from_pprof, ["end_allocated", "peak_allocated", "peak_allocated_entry"]),  # go tool pprof, when installed
}
if not GO:
    print("skipped: pprof (go tool pprof not installed: apt-get install golang-go)")
    del OUTPUTS["pprof"]


# ---- the corpus ----
def record(name, prog, *args, env=None, where="samples"):
    e = dict(ENV)
    e.update(env or {})
    path = out(name + ".cmh")
    p = subprocess.run([CMH, "record", "-q", "-o", path, "--", os.path.join(B, where, prog), *args], cwd=T, env=e,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.exists(path):
        raise RuntimeError("record %s: exit %d, no snapshot" % (prog, p.returncode))
    return path


def corpus():
    c = {}
    c["leaky (driver level)"] = record("leaky", "leaky")
    c["caching_demo (block API)"] = record("caching", "caching_demo", "6")
    c["pool_async (pools)"] = record("pool", "pool_async", "4")
    c["expandable (VMM)"] = record("exp", "expandable", env={"EXPANDABLE_KEEP": "1"})
    # cuMemCreate handles held and mapped nowhere (tests/vmm_held.c), at exit and after a SIGKILL
    c["vmm_held (handles mapped nowhere)"] = record("vmmheld", "vmm_held", where="tests")
    c["vmm_held kill (recovered)"] = record("vmmkill", "vmm_held", "kill", where="tests")
    c["multigpu (2 devices)"] = record("multi", "multigpu", "4", env={"FAKECUDA_DEVICES": "2", "FAKECUDA_CAPACITY": "1G"})
    c["oom_demo (OOM)"] = record("oom", "oom_demo", env={"FAKECUDA_CAPACITY": "1G"})
    run("merge", "-o", out("merged.cmh"), os.path.join(F, "h200", "torch_exp.cmh"), os.path.join(F, "h200", "torch_exp.pickle"))
    c["merged h200 torch_exp"] = out("merged.cmh")
    subprocess.run(["cp", os.path.join(F, "flight", "killed-150.flight"), out("fl.flight")], check=True)
    run("recover", out("fl.flight"), "-o", out("recovered.cmh"), ok=False)
    if os.path.exists(out("recovered.cmh")):
        c["recovered flight record"] = out("recovered.cmh")
    c["h200 torch_exp.pickle"] = os.path.join(F, "h200", "torch_exp.pickle")
    c["h200 cudart.cmh"] = os.path.join(F, "h200", "cudart.cmh")
    c["h200b kernels.cmh"] = os.path.join(F, "h200b", "kernels.cmh")
    if PT and os.path.isdir(PT):
        for n in ("layoutediting_two_devices.pickle", "flexgen_torch20_oom_observer_block_history.pickle"):
            if os.path.exists(os.path.join(PT, n)):
                c["pytorch " + n] = os.path.join(PT, n)
    return c


# Figures known from outside for fixtures: the merged record is PyTorch's own rounded peak
# (490,675,200, its memory_summary) plus cuBLAS's workspaces (134,481,920) the driver saw, and it
# keeps PyTorch's 80 external_annotations.
KNOWN = {
    "merged h200 torch_exp": {0: {"peak_allocated": 625157120, "peak_requested": 625154252, "end_allocated": 538972160,
                                  "end_requested": 538970272, "annotations": 80, "peak_reserved_entry": 276, "entries": 1833}},
    "h200 torch_exp.pickle": {0: {"peak_allocated": 490675200, "annotations": 80}},
    # tests/vmm_held.c: 20 MiB never mapped, 8 MiB unmapped and kept, each from its own function
    "vmm_held (handles mapped nowhere)": {0: {"vmm_unmapped": [28 << 20, 2]}},
    "vmm_held kill (recovered)": {0: {"vmm_unmapped": [28 << 20, 2]}},
}


def main():
    npass = nfail = 0
    recs = corpus()
    if "recovered flight record" not in recs:
        print("FAIL: recover of killed-150.flight wrote nothing")
        nfail += 1
    for name, rec in recs.items():
        ref = reference(rec)
        got = {o: reader(rec) for o, (reader, _) in OUTPUTS.items()}
        # the annotation count: the report's (every device's PyTorch annotations), checked against the others
        for dev in ref:
            if dev in got["report"]:
                ref[dev].setdefault("annotations", got["report"][dev].get("annotations"))
                ref[dev].setdefault("clock_origin_ns", got["report"][dev].get("clock_origin_ns"))
                ref[dev].setdefault("ooms", 0)
        for dev, known in KNOWN.get(name, {}).items():
            for fact, v in known.items():
                if ref.get(dev, {}).get(fact) != v:
                    print("FAIL: %s, device %d: %s is %s, known to be %s" % (name, dev, fact, ref.get(dev, {}).get(fact), v))
                    nfail += 1
                else:
                    npass += 1
        for o, (_, must) in OUTPUTS.items():
            for dev, rf in sorted(ref.items()):
                g = got[o].get(dev)
                if g is None:
                    # a Chrome trace draws timed entries only
                    if (rf.get("entries") or o in ("plot", "report")) and not (o == "chrome" and not rf.get("peak_reserved_time_ns")):
                        print("FAIL: %s: %s has no device %d" % (name, o, dev))
                        nfail += 1
                    continue
                bad = []
                for fact in must:
                    if fact == "annotations_unless_marks":
                        if got["report"].get(dev, {}).get("marks"):
                            continue
                        fact = "annotations"
                    if fact not in rf:
                        continue
                    if rf.get("peak_allocated_entry", 0) < 0 and (fact.startswith("peak_allocated") or fact == "sites_at_peak") and o == "chrome":
                        continue
                    if fact not in g:
                        bad.append("%s missing" % fact)
                    elif g[fact] != rf[fact]:
                        bad.append("%s %s != %s" % (fact, g[fact], rf[fact]))
                if "_end_index" in g and g["_end_index"] != rf["entries"] - 1:
                    bad.append("end entry %s != %s" % (g["_end_index"], rf["entries"] - 1))
                if "peak_marker_disagrees" in g:
                    bad.append("peak marker %s" % (g["peak_marker_disagrees"],))
                if bad:
                    print("FAIL: %s, device %d, %s: %s" % (name, dev, o, "; ".join(bad)))
                    nfail += 1
                else:
                    npass += 1
        print("ok: %s (%d devices, %d outputs)" % (name, len(ref), len(OUTPUTS)))
    print("%d passed, %d failed" % (npass, nfail))
    subprocess.run(["rm", "-rf", T])
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
