#!/usr/bin/env python3
"""cmh_inspect.py - read a .cmh snapshot from Python (msgpack), for checks on hosts where only
Python is at hand.  Mirrors docs/FORMAT.md.

    python3 cmh_inspect.py SNAP.cmh            # counts by action, live segments, top stacks
    import cmh_inspect; s = cmh_inspect.load("x.cmh")
"""
import collections
import sys

import msgpack

ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "mark"]
KINDS = ["device", "pitch", "managed", "async", "vmm", "host"]


def load(path):
    with open(path, "rb") as f:
        d = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    assert d["format"] == "cumemhist", "not a cumemhist snapshot"
    strings = d["strings"]
    frames = [{"pc": f[0], "name": strings[f[1]], "filename": strings[f[2]], "line": f[3]} for f in d["frames"]]
    stacks = [[frames[i] for i in st] for st in d["stacks"]]
    segments = []
    for g in d["segments"]:
        segments.append({"device": g[0], "kind": KINDS[g[1]], "flags": g[2], "address": g[4], "size": g[5],
                         "stream": g[6], "frames": stacks[g[9]],
                         "blocks": [{"address": g[4] + b[0], "size": b[1], "requested": b[2], "state": b[3],
                                     "frames": stacks[b[4]]} for b in g[11]]})
    traces = {}
    for dev, dropped, entries in d["traces"]:
        addr = t = 0
        out = []
        for e in entries:
            addr += e[1]
            t += e[4]
            out.append({"action": ACTIONS[e[0] & 15], "whole_block": bool(e[0] & 16), "kind": KINDS[(e[0] >> 5) & 7],
                        "addr": addr & (2**64 - 1), "size": e[2], "stream": e[3], "time_ns": t,
                        "frames": stacks[e[5]], "requested": e[6] if len(e) > 6 else e[2]})
        traces[dev] = {"dropped": dropped, "entries": out}
    return {"segments": segments, "traces": traces, "pid": d["meta"][1], "stacks": stacks}


def main(path):
    s = load(path)
    print(f"{path}: pid {s['pid']}, {len(s['segments'])} live segments")
    for dev, t in sorted(s["traces"].items()):
        c = collections.Counter(e["action"] for e in t["entries"])
        print(f"  device {dev}: {len(t['entries'])} entries ({t['dropped']} dropped): {dict(c)}")
    sites = collections.Counter()
    for g in s["segments"]:
        names = [f["name"] for f in g["frames"][:4]]
        sites[" <- ".join(names) or "<no stack>"] += g["size"]
    for site, n in sites.most_common(5):
        print(f"  live {n:>14,d} B  {site}")


if __name__ == "__main__":
    main(sys.argv[1])
