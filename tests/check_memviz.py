#!/usr/bin/env python3
"""check_memviz.py - does a pickle hold what PyTorch's memory_viz page can open?

    check_memviz.py [--ours] [--no-replay] FILE...

Loads each FILE with CPython's own pickle and checks what the viewer relies on (docs/PYTORCH.md, Pickles and What memory_viz requires):
the opcodes are in the viewer's unpickler subset (with --ours also: protocol 4, LONG1 of at most
8 bytes, batches of at most 1000, no shared entry/segment/block dicts), the dict has PyTorch's
schema, blocks tile their segments, the segment totals agree with the blocks, and the trace
agrees with the final segments when it is replayed backwards the way the viewer does.
--no-replay skips the trace check (for PyTorch's own files, which may disagree with themselves).
Prints one line per file; exits 1 if any check failed.  Standard library only.
"""
import pickle
import pickletools
import sys

VIEWER_OPS = {"PROTO", "FRAME", "MARK", "STOP", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "SETITEMS", "SETITEM",
              "APPENDS", "APPEND", "DICT", "LIST", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWTRUE",
              "NEWFALSE", "BININT1", "BININT2", "BININT", "LONG1", "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE",
              "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def check_opcodes(data, ours):
    stack = []  # None = MARK, 1 = a value
    for op, arg, pos in pickletools.genops(data):
        name = op.name
        need(name in VIEWER_OPS, f"opcode {name} at byte {pos} is not one the viewer reads")
        if name == "PROTO" and ours:
            need(arg == 4, f"protocol {arg}, not 4")
        if name == "LONG1" and ours:
            need(data[pos + 1] <= 8, f"LONG1 of {data[pos + 1]} bytes at byte {pos}")
        if name == "MARK":
            stack.append(None)
        elif name in ("APPENDS", "SETITEMS", "LIST", "DICT", "TUPLE"):
            n = 0
            while stack and stack[-1] is not None:
                stack.pop()
                n += 1
            need(stack, f"{name} without a MARK at byte {pos}")
            stack.pop()
            if ours and name in ("APPENDS", "SETITEMS"):
                need(n <= (1000 if name == "APPENDS" else 2000), f"{name} of {n} items at byte {pos}")
            if name in ("LIST", "DICT", "TUPLE"):
                stack.append(1)
        elif name == "APPEND":
            stack.pop()
        elif name == "SETITEM":
            del stack[-2:]
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            k = int(name[-1])
            del stack[-k:]
            stack.append(1)
        elif name in ("PROTO", "FRAME", "MEMOIZE", "BINPUT", "LONG_BINPUT", "STOP"):
            pass
        else:
            stack.append(1)


def check_frames(frames, where):
    need(isinstance(frames, list), f"{where}: frames is not a list")
    for f in frames:
        need(isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("filename"), str),
             f"{where}: a frame without str name/filename")
        need(isinstance(f.get("line", 0), int), f"{where}: frame line is not an int")


def check_schema(d, ours):
    if isinstance(d, list):  # memory_snapshot(): a bare segment list
        d = {"segments": d, "device_traces": []}
    need(isinstance(d, dict), "the pickle is not a dict")
    need(isinstance(d.get("segments"), list), "'segments' is not a list")
    need(isinstance(d.get("device_traces"), list), "'device_traces' is not a list")
    traces = d["device_traces"]
    for t in traces:
        need(isinstance(t, list), "a device trace is not a list")
    seen = set()
    for i, s in enumerate(d["segments"]):
        w = f"segment {i}"
        for k in ("device", "address", "total_size", "stream", "blocks"):
            need(k in s, f"{w}: no '{k}'")
        need(isinstance(s["device"], int) and s["device"] >= 0, f"{w}: bad device")
        if ours:
            need(s["device"] < len(traces), f"{w}: device {s['device']} has no device_traces entry")
            need(id(s) not in seen, f"{w}: a shared segment dict")
            seen.add(id(s))
        check_frames(s.get("frames", []), w)
        at, alloc, active, req = s["address"], 0, 0, 0
        for j, b in enumerate(s["blocks"]):
            wb = f"{w} block {j}"
            need(isinstance(b.get("size"), int) and b["size"] > 0, f"{wb}: bad size")
            need(b.get("state") in STATES, f"{wb}: state {b.get('state')!r}")
            if "address" in b:
                need(b["address"] == at, f"{wb}: blocks do not tile the segment")
            if "frames" in b:
                need(isinstance(b.get("requested_size"), int), f"{wb}: frames without requested_size")
                check_frames(b["frames"], wb)
            if ours:
                need(id(b) not in seen, f"{wb}: a shared block dict")
                seen.add(id(b))
            at += b["size"]
            if b["state"] == "active_allocated":
                alloc += b["size"]
            if b["state"] != "inactive":
                active += b["size"]
                req += b.get("requested_size", 0)
        need(at == s["address"] + s["total_size"], f"{w}: blocks sum to {at - s['address']}, total_size {s['total_size']}")
        for k, v in (("allocated_size", alloc), ("active_size", active), ("requested_size", req)):
            if k in s and not (k == "requested_size" and any("history" in b for b in s["blocks"])):
                need(s[k] == v, f"{w}: {k} {s[k]} but its blocks say {v}")
    for dev, t in enumerate(traces):
        for i, e in enumerate(t):
            w = f"device {dev} entry {i}"
            need(isinstance(e.get("action"), str), f"{w}: no action")
            if ours:
                need("category" not in e, f"{w}: has 'category'")
                need(id(e) not in seen, f"{w}: a shared entry dict")
                seen.add(id(e))
            need(isinstance(e.get("size"), int) and isinstance(e.get("stream", 0), int), f"{w}: size/stream")
            if e["action"] == "oom":
                need(isinstance(e.get("device_free"), int), f"{w}: oom without device_free")
            else:
                need(isinstance(e.get("addr"), int), f"{w}: no numeric addr")
            check_frames(e.get("frames", []), w)
    return d


def replay_backwards(d):
    """The viewer's Allocator State History, reduced to what can fail."""
    for dev, trace in enumerate(d["device_traces"]):
        segs = {}  # addr -> size
        blocks = {}  # addr -> state
        for s in d["segments"]:
            if s["device"] != dev:
                continue
            segs[s["address"]] = s["total_size"]
            at = s["address"]
            for b in s["blocks"]:
                if b["state"] != "inactive":
                    blocks[at] = b["state"]
                at += b["size"]

        def container(addr):
            for a, n in segs.items():
                if a <= addr < a + n:
                    return a
            return None

        for i in range(len(trace) - 1, -1, -1):
            e = trace[i]
            act, addr = e["action"], e.get("addr")
            w = f"device {dev} entry {i} ({act})"
            if act == "alloc":
                need(addr in blocks, f"{w}: undoing an alloc whose block does not exist")
                need(container(addr) is not None, f"{w}: a block outside every segment")
                del blocks[addr]
            elif act == "free_completed":
                blocks[addr] = "active_pending_free"
                need(container(addr) is not None, f"{w}: a block outside every segment")
            elif act == "free_requested":
                merged = i + 1 < len(trace) and trace[i + 1]["action"] == "free_completed" and trace[i + 1]["addr"] == addr
                if not merged:
                    need(addr in blocks, f"{w}: an unmerged free_requested of a block that does not exist")
                blocks[addr] = "active_allocated"
            elif act == "segment_alloc":
                need(addr in segs, f"{w}: undoing a segment_alloc whose segment is not there")
                need(not any(addr <= b < addr + segs[addr] for b in blocks), f"{w}: live blocks in a segment that did not exist yet")
                del segs[addr]
            elif act == "segment_free":
                segs[addr] = e["size"]
            elif act == "segment_map":
                c = container(addr)
                need(c is not None, f"{w}: undoing a segment_map with no segment there")
                n = segs.pop(c)
                if c < addr:
                    segs[c] = addr - c
                if addr + e["size"] < c + n:
                    segs[addr + e["size"]] = c + n - addr - e["size"]
                need(not any(addr <= b < addr + e["size"] for b in blocks), f"{w}: live blocks in a range not mapped yet")
            elif act == "segment_unmap":
                segs[addr] = e["size"]
    return 0


def main(argv):
    ours = "--ours" in argv
    replay = "--no-replay" not in argv
    files = [a for a in argv if not a.startswith("--")]
    failed = 0
    for f in files:
        try:
            data = open(f, "rb").read()
            check_opcodes(data, ours)
            d = check_schema(pickle.loads(data), ours)
            if replay:
                replay_backwards(d)
            n = sum(len(t) for t in d["device_traces"])
            print(f"ok: {f}: {len(d['segments'])} segments, {n} trace entries")
        except Bad as e:
            failed += 1
            print(f"FAIL: {f}: {e}")
        except Exception as e:  # a pickle CPython cannot load at all
            failed += 1
            print(f"FAIL: {f}: {type(e).__name__}: {e}")
    print(f"{len(files) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
