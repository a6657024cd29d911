#!/usr/bin/env python3
"""summary_fixtures_test.py CUMEMHIST DIR... - on every real PyTorch snapshot in the DIRs, the
current figures of `cumemhist summary --json` (allocated, active, requested, reserved, per
device) equal what the file's own segments and blocks say, whatever its trace holds."""
import glob
import json
import pickle
import subprocess
import sys

cmh, dirs = sys.argv[1], sys.argv[2:]
files = sorted(f for d in dirs for f in glob.glob(d + "/*.pickle"))
if not files:
    print("FAIL: no snapshots in", dirs)
    sys.exit(1)
passed = failed = 0
for f in files:
    d = pickle.load(open(f, "rb"))
    segs = d["segments"] if isinstance(d, dict) else d
    traces = d.get("device_traces", []) if isinstance(d, dict) else []
    devs = sorted({s["device"] for s in segs} | {i for i, t in enumerate(traces) if t})
    for dev in devs:
        ss = [s for s in segs if s["device"] == dev]
        want = {
            "allocated_bytes": sum(b["size"] for s in ss for b in s["blocks"] if b["state"] == "active_allocated"),
            "active_bytes": sum(b["size"] for s in ss for b in s["blocks"] if b["state"] != "inactive"),
            "reserved_bytes": sum(s["total_size"] for s in ss),
            "segment": sum(1 for s in ss if not s.get("is_expandable")),
        }
        out = subprocess.run([cmh, "summary", "--json", "--device", str(dev), f], capture_output=True, text=True)
        got = json.loads(out.stdout)[0]["stats"]  # one object per device; --device: one
        got = {k: got[k + ".all"]["current"] for k in want}
        if got == want:
            passed += 1
        else:
            failed += 1
            print(f"FAIL: {f} device {dev}: want {want}, got {got}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
