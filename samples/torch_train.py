"""torch_train.py - a small PyTorch training loop, for checking cumemhist against PyTorch's own
recorder on a GPU host (scripts/gpu-check.sh).

    python3 torch_train.py check PREFIX [steps]   # record with _record_memory_history too, then
                                                  # dump PyTorch's snapshot and ours at one moment
    python3 torch_train.py time [steps]           # print the median step time
    TORCH_TRAIN_WORKLOAD=varied ...               # another allocation pattern (step_varied)
    TORCH_TRAIN_HISTORY=all python3 torch_train.py time   # the same with PyTorch's own recorder
                                                  # on (context and stacks all), as co-recording sets it

`check` writes PREFIX.pickle (PyTorch's _dump_snapshot), PREFIX_summary.txt
(torch.cuda.memory_summary()), PREFIX_stats.json (memory_stats()), PREFIX.json (segments and the
segment-level trace, from _snapshot()) and, when libcumemhist is preloaded, PREFIX.cmh (ours,
dumped through cmh_dump_snapshot at the same instant).
"""
import ctypes
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 10)).cuda()
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def step(model, opt, i):
    batch = 256 + 64 * (i % 5)  # varying shapes churn the caching allocator
    x = torch.randn(batch, 1024, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    scratch = torch.empty((i % 7 + 1) * (3 << 20), dtype=torch.uint8, device="cuda")  # odd-sized temporaries
    del scratch
    return loss


def step_varied(model, opt, i, side):
    """Another allocation pattern (TORCH_TRAIN_WORKLOAD=varied): attention over random sequence
    lengths, many small tensors, frees in a shuffled order, and a tensor used on a second stream
    (record_stream), whose free the allocator defers until that stream is done."""
    g = torch.Generator().manual_seed(i)
    seq = int(torch.randint(16, 300, (1,), generator=g))
    q = torch.randn(8, seq, 64, device="cuda")
    att = torch.softmax(q @ q.transpose(1, 2) / 8.0, dim=-1) @ q
    smalls = [torch.empty(int(n), device="cuda") for n in torch.randint(1, 40000, (12,), generator=g)]
    loss = step(model, opt, i)
    with torch.cuda.stream(side):
        shared = torch.randn(int(torch.randint(1 << 18, 1 << 21, (1,), generator=g)), device="cuda")
        shared.mul_(2.0)
    torch.cuda.current_stream().wait_stream(side)
    shared.record_stream(torch.cuda.current_stream())
    for k in torch.randperm(len(smalls), generator=g).tolist():
        smalls[k] = None
    del att, q, shared
    return loss


def main():
    mode = sys.argv[1]
    if mode == "check":
        prefix = sys.argv[2]
        steps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
        torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
        model, opt = build()
        varied = os.environ.get("TORCH_TRAIN_WORKLOAD") == "varied"
        side = torch.cuda.Stream() if varied else None
        for i in range(steps):
            if varied:
                step_varied(model, opt, i, side)
            else:
                step(model, opt, i)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        try:  # our dump at the same instant, if the recorder is preloaded
            ours = ctypes.CDLL(None).cmh_dump_snapshot
            ours.argtypes = [ctypes.c_char_p]
            rc = ours((prefix + ".cmh").encode())
            print(f"cmh_dump_snapshot: {rc}")
        except AttributeError:
            print("cmh_dump_snapshot: recorder not preloaded")
        torch.cuda.memory._dump_snapshot(prefix + ".pickle")
        with open(prefix + "_summary.txt", "w") as f:
            f.write(torch.cuda.memory_summary())
        with open(prefix + "_stats.json", "w") as f:
            json.dump(torch.cuda.memory_stats(), f, indent=1)
        segs = [[s["device"], s["address"], s["total_size"], bool(s.get("is_expandable", False))]
                for s in snap["segments"]]
        trace = [[e["action"], e["addr"], e["size"]] for e in snap["device_traces"][0]
                 if e["action"].startswith("segment_")]
        with open(prefix + ".json", "w") as f:
            json.dump({"segments": segs, "trace": trace}, f)
        print(f"check: {steps} steps, {len(segs)} segments, {len(trace)} segment-level trace entries")
    else:
        steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
        if os.environ.get("TORCH_TRAIN_HISTORY") == "all":  # PyTorch's own cost, for comparison
            torch.cuda.memory._record_memory_history(context="all", stacks="all", max_entries=100000)
        model, opt = build()
        for i in range(10):
            step(model, opt, i)
        times = []
        for i in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(model, opt, i)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        print(f"median step {statistics.median(times) * 1e6:.1f} us over {steps} steps")


if __name__ == "__main__":
    main()
