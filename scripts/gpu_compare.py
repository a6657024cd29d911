#!/usr/bin/env python3
"""gpu_compare.py - the comparisons of scripts/gpu-check.sh, printed as tables.

    gpu_compare.py cudart DEMO_STDOUT SNAP.cmh        printed pointers vs recorded allocations
    gpu_compare.py torch PREFIX [expandable]          PyTorch's segments / maps vs ours
    gpu_compare.py kernels EVENTS_STDOUT KERNELS.json  CUDA-event times vs what CUPTI recorded
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmh_inspect  # noqa: E402


def ranges_union(rs):
    out = []
    for a, n in sorted(rs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], a + n)
        else:
            out.append([a, a + n])
    return out


def cudart(stdout_path, snap_path):
    s = cmh_inspect.load(snap_path)
    want = []
    for line in open(stdout_path):
        p = line.split()
        if p and p[0] == "alloc":
            want.append((int(p[1], 16), int(p[2])))
    entries = [e for t in s["traces"].values() for e in t["entries"]]
    allocs = {(e["addr"], e["size"]): e for e in entries if e["action"] == "segment_alloc"}
    frees = {e["addr"] for e in entries if e["action"] == "segment_free"}
    ok = 0
    print(f"{'pointer':>16} {'bytes':>10}  captured  freed  kind    stack (innermost first)")
    for addr, size in want:
        e = allocs.get((addr, size))
        ok += e is not None
        names = " <- ".join(f["name"] for f in e["frames"][:4]) if e else "-"
        print(f"{addr:16x} {size:10d}  {'yes' if e else 'NO':8}  {'yes' if addr in frees else 'no':5}  "
              f"{e['kind'] if e else '-':6}  {names}")
    print(f"cudart: {ok}/{len(want)} allocations captured; {len(allocs)} segment_alloc entries in all")
    return ok == len(want)


def torch_check(prefix, expandable):
    t = json.load(open(prefix + ".json"))
    s = cmh_inspect.load(prefix + ".cmh")
    ours_live = {(g["address"], g["size"]) for g in s["segments"]}
    entries = [e for tr in s["traces"].values() for e in tr["entries"]]
    good = True
    if not expandable:
        missing = [(a, n) for d, a, n, x in t["segments"] if (a, n) not in ours_live]
        print(f"torch: {len(t['segments'])} PyTorch segments, {len(t['segments']) - len(missing)} found in ours "
              f"as live driver allocations (address, size); ours has {len(ours_live)} live in all")
        for a, n in missing[:10]:
            print(f"  missing {a:x} {n}")
        pt_allocs = sum(1 for a, _, _ in t["trace"] if a == "segment_alloc")
        pt_frees = sum(1 for a, _, _ in t["trace"] if a == "segment_free")
        our_allocs = sum(1 for e in entries if e["action"] == "segment_alloc")
        our_frees = sum(1 for e in entries if e["action"] == "segment_free")
        print(f"  segment_alloc: PyTorch {pt_allocs}, ours {our_allocs}; segment_free: PyTorch {pt_frees}, ours {our_frees}")
        good = not missing
    else:
        pt_map = [(a, n) for act, a, n in t["trace"] if act == "segment_map"]
        pt_unmap = [(a, n) for act, a, n in t["trace"] if act == "segment_unmap"]
        our_map = [(e["addr"], e["size"]) for e in entries if e["action"] == "segment_map"]
        our_unmap = [(e["addr"], e["size"]) for e in entries if e["action"] == "segment_unmap"]
        print(f"torch expandable: segment_map PyTorch {len(pt_map)} ({sum(n for _, n in pt_map)} B), "
              f"ours {len(our_map)} ({sum(n for _, n in our_map)} B)")
        print(f"  segment_unmap PyTorch {len(pt_unmap)} ({sum(n for _, n in pt_unmap)} B), "
              f"ours {len(our_unmap)} ({sum(n for _, n in our_unmap)} B)")
        pt_live = ranges_union([(a, n) for d, a, n, x in t["segments"]])
        our_vmm = ranges_union([(g["address"], g["size"]) for g in s["segments"] if g["kind"] == "vmm"])
        print(f"  mapped now: PyTorch {pt_live and sum(b - a for a, b in pt_live)} B in {len(pt_live)} ranges, "
              f"ours {our_vmm and sum(b - a for a, b in our_vmm)} B in {len(our_vmm)} ranges; "
              f"{'identical' if pt_live == our_vmm else 'DIFFERENT'}")
        good = pt_live == our_vmm
    return good


def kernels(events_path, table_path):
    ev = {}
    for line in open(events_path):
        p = line.split()
        if p and p[0] == "event":
            ev.setdefault(p[1], []).append(float(p[2]) * 1e6)  # ms -> ns
    rows = json.load(open(table_path))["rows"]
    print(f"{'kernel':<34} {'calls':>5} {'CUPTI avg':>12} {'events avg':>12} {'events/CUPTI':>12}")
    good = True
    for name, times in sorted(ev.items()):
        row = next((r for r in rows if r["name"].split("(")[0] == name), None)
        if not row:
            print(f"{name:<34} not recorded by CUPTI")
            good = False
            continue
        avg_ev = sum(times) / len(times)
        print(f"{row['name']:<34} {row['calls']:>5} {row['avg_ns'] / 1e3:>10.1f}us {avg_ev / 1e3:>10.1f}us "
              f"{avg_ev / row['avg_ns']:>12.3f}")
        good = good and row["calls"] == len(times)
    return good


if __name__ == "__main__":
    if sys.argv[1] == "kernels":
        sys.exit(0 if kernels(sys.argv[2], sys.argv[3]) else 1)
    if sys.argv[1] == "cudart":
        sys.exit(0 if cudart(sys.argv[2], sys.argv[3]) else 1)
    sys.exit(0 if torch_check(sys.argv[2], len(sys.argv) > 3) else 1)
