"""A PyTorch job for `cumemhist owners` (scripts/gpu-check.sh section 7): cuBLAS matmuls, an
NCCL process group of one where one can be made, then at one instant: a cumemhist dump (both
records, through the co-recording hook), torch.cuda.memory_stats() and mem_get_info() written
to OUT.json; then an induced OOM, whose observer dumps both again.

    cumemhist record -o job.cmh -- python3 samples/torch_owners.py OUT.json
"""
import json
import os
import sys

import torch

out = sys.argv[1]
dev = torch.device("cuda", 0)  # NCCL (PyTorch 2.11) refuses a device_id without an index
nccl = None
try:
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    t = torch.ones(1 << 20, device=dev)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    nccl = "ok"
except Exception as e:  # no NCCL here: the rest still runs
    nccl = "%s: %s" % (type(e).__name__, e)

a = torch.randn(4096, 4096, device=dev)
b = torch.randn(4096, 4096, device=dev)
keep = [a @ b for _ in range(4)]
c = torch.nn.functional.linear(a, b)
torch.cuda.synchronize()

import cumemhist  # noqa: E402  (on PYTHONPATH under `cumemhist record`)

mid = out[:-5] + ".mid.cmh" if out.endswith(".json") else out + ".mid.cmh"
free, total = torch.cuda.mem_get_info()
stats = torch.cuda.memory_stats()
ok = cumemhist.dump(mid)
free2, _ = torch.cuda.mem_get_info()
with open(out, "w") as f:
    json.dump({"snapshot": mid, "dumped": ok, "nccl": nccl, "used": total - free, "used_after": total - free2,
               "total": total, "allocated": stats["allocated_bytes.all.current"],
               "reserved": stats["reserved_bytes.all.current"], "summary": torch.cuda.memory_summary()}, f)
try:
    torch.empty(total * 2, dtype=torch.uint8, device=dev)
except torch.cuda.OutOfMemoryError:
    print("OOM caught")
