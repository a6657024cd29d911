#!/usr/bin/env python3
"""cmh_inspect.py - read a .cmh snapshot from Python (msgpack), for checks on hosts where only
Python is at hand.  Mirrors docs/FORMAT.md.

    python3 cmh_inspect.py SNAP.cmh            # counts by action, live segments, top stacks
    import cmh_inspect; s = cmh_inspect.load("x.cmh")

A file that ends with a checksum (docs/FORMAT.md, "Checksum") is checked before it is decoded:
a damaged one raises ValueError naming the byte range; one written before checksums loads,
with a note on stderr.  The CRC-32C comes from the crc32c package when it is installed, else
from a table here (about 10 MB/s: enough for the small records this script is for).
"""
import collections
import struct
import sys

import msgpack

TRAILER_KEY = b"\xa6crc32c\xce"  # the last 12 bytes: this, then the sum (uint32, big-endian)

try:
    from crc32c import crc32c as _crc32c
except ImportError:
    _crc32c = None
    _TABLE = []
    for _n in range(256):
        _c = _n
        for _ in range(8):
            _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
        _TABLE.append(_c)


def crc32c(data):
    if _crc32c is not None:
        return _crc32c(data)
    c = 0xFFFFFFFF
    t = _TABLE
    for b in data:
        c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def verify(path, raw):
    """True if raw ends with a checksum that matches; False if it has none (written before
    checksums); ValueError if it is damaged."""
    n = len(raw)
    if n >= 12 and raw[n - 12:n - 4] == TRAILER_KEY:
        want = struct.unpack(">I", raw[n - 4:])[0]
        if crc32c(raw[:n - 4]) != want:
            raise ValueError(f"{path}: checksum mismatch over bytes 0-{n - 5} (the file is damaged)")
        return True
    return False

ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "mark", "pool_sample"]
KINDS = ["device", "pitch", "managed", "async", "vmm", "host"]


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    summed = verify(path, raw)
    d = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    assert d["format"] == "cumemhist", "not a cumemhist snapshot"
    if "checksum" in d and not summed:
        raise ValueError(f"{path}: no checksum at its end, though it says it has one: the file is truncated or damaged")
    if not summed:
        print(f"cmh_inspect: note: {path}: written before checksums; not verified", file=sys.stderr)
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
    for tr in d["traces"]:  # [device, dropped, entries, threads?, dropped_ooms?] (docs/FORMAT.md)
        dev, dropped, entries = tr[0], tr[1], tr[2]
        addr = t = 0
        out = []
        for e in entries:
            addr += e[1]
            t += e[4]
            code = e[0] & 15
            out.append({"action": ACTIONS[code] if code < len(ACTIONS) else "action_%d" % code, "whole_block": bool(e[0] & 16), "kind": KINDS[(e[0] >> 5) & 7],
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
