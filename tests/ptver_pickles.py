#!/usr/bin/env python3
"""ptver_pickles.py OUTDIR - hand-made PyTorch memory snapshots, one per schema PyTorch has written
(docs/PYTORCH.md, "Snapshot schema"), each in protocol 2 (what the TorchScript C++ pickler and
old CPythons write) and protocol 4 (`_dump_snapshot`'s pickle.dump on CPython 3.8-3.13):

  v113     1.13: `_snapshot()` a dict with only 'segments'; blocks carry 'history'
           [{addr, real_size, frames}] and no address, frames or requested_size; no trace
  v113list 1.13's `memory_snapshot()`: the bare segment list
  v20      2.0: device_traces (no time_us), blocks still with 'history', requested_size
  recent   2.11 and later: every key 2.1-2.11 added plus unknown keys at every level (top,
           segment, block, entry, frame, allocator_settings), an annotation and an action no
           PyTorch has written yet ('defrag_hint'), pool_id on entries
  windows  2.x on Windows: backslashed paths with drive letters, UNC paths
  multidev two devices, an OOM on device 1 (device 0 healthy)
  pools    a private pool (segment_pool_id (1, 7)) beside the default pool, with a graph-capture
           style pool_id on entries
  newact   an unknown action ('sync_hint') repeated before each of 6 allocations: not a step

The figures each holds (what every reader must find) are in FIGS below, written to
OUTDIR/figures.txt as NAME KEY VALUE lines.  Standard library only.
"""
import os
import pickle
import sys

MIB = 1 << 20
KIB = 1 << 10
OUT = sys.argv[1]
FIGS = []


def fig(name, key, value):
    FIGS.append(f"{name} {key} {value}")


def lin(f, l, n):
    return {"filename": f, "line": l, "name": n}


def seg(dev, addr, blocks, legacy=False, extra=None, pool=(0, 0), expandable=False, stream=0, frames=None):
    total = sum(b["size"] for b in blocks)
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    s = {"device": dev, "address": addr, "total_size": total, "allocated_size": alloc, "active_size": active,
         "stream": stream, "segment_type": "large" if total > MIB else "small"}
    if not legacy:
        s["requested_size"] = sum(b.get("requested_size", b["size"]) for b in blocks if b["state"] != "inactive")
        s["segment_pool_id"] = pool
        s["is_expandable"] = expandable
        s["frames"] = frames or []
    s["blocks"] = blocks
    if extra:
        s.update(extra)
    return s


def blk(addr, size, state, frames, req=None, legacy=False, extra=None):
    if legacy:  # PyTorch <= 2.0: the block's history, newest last
        b = {"size": size, "state": state}
        if req is not None:
            b["requested_size"] = req
        b["history"] = [{"addr": addr, "real_size": req if req is not None else size, "frames": frames}] if state != "inactive" else []
        return b
    b = {"address": addr, "size": size, "requested_size": req if req is not None else (size if state != "inactive" else 0),
         "state": state, "frames": frames if state != "inactive" else []}
    if extra:
        b.update(extra)
    return b


def dump(name, obj):
    for proto in (2, 4):
        with open(os.path.join(OUT, f"{name}.p{proto}.pickle"), "wb") as f:
            pickle.dump(obj, f, protocol=proto)


# 1.13: segments only, per-block history, no requested_size, no trace
S = 0x7f5a00000000
f1 = [lin("/opt/conda/lib/python3.9/site-packages/torch/nn/modules/linear.py", 114, "forward"), lin("train.py", 30, "step")]
f2 = [lin("train.py", 41, "step")]
v113 = [seg(0, S, [blk(S, 8 * MIB, "active_allocated", f1, legacy=True), blk(S + 8 * MIB, 4 * MIB, "active_allocated", f2, legacy=True),
                   blk(S + 12 * MIB, 8 * MIB, "inactive", [], legacy=True)], legacy=True),
        seg(0, S + 32 * MIB, [blk(S + 32 * MIB, 512 * KIB, "active_allocated", f2, legacy=True),
                              blk(S + 32 * MIB + 512 * KIB, 1536 * KIB, "inactive", [], legacy=True)], legacy=True)]
dump("v113", {"segments": v113})
dump("v113list", v113)
for n in ("v113", "v113list"):
    fig(n, "reserved", 22 * MIB)
    fig(n, "allocated", 12 * MIB + 512 * KIB)
    fig(n, "segments", 2)

# 2.0: device_traces without time_us, legacy blocks with requested_size
S = 0x7f6000000000
fa = [lin("model.py", 12, "forward"), lin("train.py", 50, "main")]
fb = [lin("model.py", 19, "forward"), lin("train.py", 50, "main")]
v20_segs = [seg(0, S, [blk(S, 2 * MIB, "active_allocated", fa, req=2000000, legacy=True),
                       blk(S + 2 * MIB, 18 * MIB, "inactive", [], legacy=True)], legacy=True)]
v20_tr = [{"action": "segment_alloc", "addr": S, "size": 20 * MIB, "stream": 0, "frames": fa},
          {"action": "alloc", "addr": S, "size": 2000000, "stream": 0, "frames": fa},
          {"action": "alloc", "addr": S + 2 * MIB, "size": 6 * MIB, "stream": 0, "frames": fb},
          {"action": "free_requested", "addr": S + 2 * MIB, "size": 6 * MIB, "stream": 0, "frames": fb},
          {"action": "free_completed", "addr": S + 2 * MIB, "size": 6 * MIB, "stream": 0, "frames": fb}]
dump("v20", {"segments": v20_segs, "device_traces": [v20_tr]})
fig("v20", "reserved", 20 * MIB)
fig("v20", "allocated", 2 * MIB)
fig("v20", "peak", 8 * MIB)
fig("v20", "entries", 5)

# recent (2.11+): every known key, unknown keys everywhere, an annotation and an unknown action
S = 0x7f7000000000
T0 = 1764800000000000
fr = [lin("/home/u/proj/model.py", 88, "forward", ), lin("/home/u/proj/train.py", 120, "train_step")]
fr[0]["fx_node_op"] = "call_function"  # newer frame keys (the viewer reads fx_*)
fr[1]["future_frame_key"] = [1, 2, 3]
fu = [lin("/home/u/proj/train.py", 130, "train_step")]
unk = {"future_segment_key": {"nested": [1, "x", None]}, "another": 3.5}
recent_segs = [seg(0, S, [blk(S, 4 * MIB, "active_allocated", fr, req=4000000, extra={"future_block_key": "v"}),
                          blk(S + 4 * MIB, 16 * MIB, "inactive", [], extra={"future_block_key": "w"})],
                   extra=unk, frames=fr)]
def ent(action, addr, size, t, frames, **kw):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": T0 + t, "compile_context": "N/A",
         "user_metadata": "", "pool_id": (0, 0), "frames": frames, "future_entry_key": {"a": 1}}
    e.update(kw)
    return e
recent_tr = [ent("segment_alloc", S, 20 * MIB, 1, fr),
             ent("alloc", S, 4000000, 2, fr),
             ent("annotate", 0, 0, 3, [], name="step_1", stage="START"),
             ent("alloc", S + 4 * MIB, 8 * MIB, 4, fu),
             ent("defrag_hint", S + 4 * MIB, 8 * MIB, 5, fu),
             ent("free_requested", S + 4 * MIB, 8 * MIB, 6, fu),
             ent("free_completed", S + 4 * MIB, 8 * MIB, 7, fu),
             ent("defrag_hint", S, 4000000, 8, []),
             ent("snapshot", 0, 4 * MIB, 9, [])]
recent = {"device_traces": [recent_tr], "segments": recent_segs,
          "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False", "max_split_size": -1,
                                 "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                 "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
                                 "pinned_num_register_threads": 1, "roundup_power2_divisions": {"1": 0, "2": 0},
                                 "future_setting": "yes"},
          "external_annotations": [{"name": "step_1", "stage": "START", "device": 0, "time_us": T0 + 3},
                                   {"name": "step_1", "stage": "END", "device": 0, "time_us": T0 + 8, "future": 1}],
          "future_top_key": [{"x": 1}], "internal_metadata": {"k": "v"}}
dump("recent", recent)
fig("recent", "reserved", 20 * MIB)
fig("recent", "allocated", 4 * MIB)
fig("recent", "peak", 12 * MIB)
fig("recent", "entries", 9)
fig("recent", "unknown", 2)

# Windows: backslashes, drive letters, a UNC path, a path with spaces
S = 0x2a0000000
fw = [lin("C:\\Users\\dev\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\site-packages\\torch\\nn\\modules\\conv.py", 456, "_conv_forward"),
      lin("D:\\work\\my project\\train.py", 77, "main")]
fw2 = [lin("\\\\server\\share\\lib\\data.py", 9, "load"), lin("D:\\work\\my project\\train.py", 78, "main")]
win_segs = [seg(0, S, [blk(S, 6 * MIB, "active_allocated", fw), blk(S + 6 * MIB, 1 * MIB, "active_allocated", fw2),
                       blk(S + 7 * MIB, 13 * MIB, "inactive", [])], frames=fw)]
win_tr = [{"action": "segment_alloc", "addr": S, "size": 20 * MIB, "stream": 0, "time_us": T0 + 1, "frames": fw},
          {"action": "alloc", "addr": S, "size": 6 * MIB, "stream": 0, "time_us": T0 + 2, "frames": fw},
          {"action": "alloc", "addr": S + 6 * MIB, "size": 1 * MIB, "stream": 0, "time_us": T0 + 3, "frames": fw2}]
dump("windows", {"segments": win_segs, "device_traces": [win_tr], "allocator_settings": {}})
fig("windows", "reserved", 20 * MIB)
fig("windows", "allocated", 7 * MIB)

# two devices, an OOM on device 1
segs, traces = [], []
for dev in range(2):
    S = 0x7f8000000000 + dev * (1 << 36)
    fd = [lin("train.py", 200 + dev, "step")]
    segs.append(seg(dev, S, [blk(S, (10 + dev * 6) * MIB, "active_allocated", fd), blk(S + (10 + dev * 6) * MIB, (10 - dev * 6) * MIB, "inactive", [])],
                    frames=fd))
    tr = [{"action": "segment_alloc", "addr": S, "size": 20 * MIB, "stream": 0, "time_us": T0 + 10 * dev, "frames": fd},
          {"action": "alloc", "addr": S, "size": (10 + dev * 6) * MIB, "stream": 0, "time_us": T0 + 10 * dev + 1, "frames": fd}]
    if dev == 1:
        tr.append({"action": "oom", "device_free": 3 * MIB, "size": 64 * MIB, "stream": 0, "time_us": T0 + 12,
                   "frames": [lin("train.py", 240, "step")]})
    traces.append(tr)
dump("multidev", {"segments": segs, "device_traces": traces, "allocator_settings": {}})
fig("multidev", "allocated0", 10 * MIB)
fig("multidev", "allocated1", 16 * MIB)

# a private pool beside the default one
S = 0x7f9000000000
fp = [lin("graphs.py", 15, "capture")]
fd = [lin("train.py", 5, "main")]
pool_segs = [seg(0, S, [blk(S, 2 * MIB, "active_allocated", fd), blk(S + 2 * MIB, 18 * MIB, "inactive", [])], frames=fd),
             seg(0, S + 64 * MIB, [blk(S + 64 * MIB, 12 * MIB, "active_allocated", fp), blk(S + 76 * MIB, 8 * MIB, "inactive", [])],
                 pool=(1, 7), frames=fp)]
pool_tr = [{"action": "segment_alloc", "addr": S, "size": 20 * MIB, "stream": 0, "time_us": T0 + 1, "pool_id": (0, 0), "frames": fd},
           {"action": "alloc", "addr": S, "size": 2 * MIB, "stream": 0, "time_us": T0 + 2, "pool_id": (0, 0), "frames": fd},
           {"action": "segment_alloc", "addr": S + 64 * MIB, "size": 20 * MIB, "stream": 0, "time_us": T0 + 3, "pool_id": (1, 7), "frames": fp},
           {"action": "alloc", "addr": S + 64 * MIB, "size": 12 * MIB, "stream": 0, "time_us": T0 + 4, "pool_id": (1, 7), "frames": fp}]
dump("pools", {"segments": pool_segs, "device_traces": [pool_tr], "allocator_settings": {}})
fig("pools", "reserved", 40 * MIB)
fig("pools", "allocated", 14 * MIB)


# a newer action that repeats like a step but is none: it must not step the leak verdicts
S = 0x7fa000000000
fl = [lin("train.py", 60, "step")]
tr = [{"action": "segment_alloc", "addr": S, "size": 20 * MIB, "stream": 0, "time_us": T0, "frames": fl}]
blocks = []
for k in range(6):
    tr.append({"action": "sync_hint", "addr": 0, "size": 0, "stream": 0, "time_us": T0 + 10 * k + 1, "frames": []})
    tr.append({"action": "alloc", "addr": S + k * MIB, "size": MIB, "stream": 0, "time_us": T0 + 10 * k + 2, "frames": fl})
    blocks.append(blk(S + k * MIB, MIB, "active_allocated", fl))
blocks.append(blk(S + 6 * MIB, 14 * MIB, "inactive", []))
dump("newact", {"segments": [seg(0, S, blocks, frames=fl)], "device_traces": [tr], "allocator_settings": {}})
fig("newact", "reserved", 20 * MIB)
fig("newact", "allocated", 6 * MIB)
with open(os.path.join(OUT, "figures.txt"), "w") as f:
    f.write("\n".join(FIGS) + "\n")
