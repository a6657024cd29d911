"""pyframes.py - the Python frames of each allocation of a record, read from its JSON export
(`cumemhist export -o X.json X.cmh`): what tests/pystack_test.sh and scripts/gpu-check.sh's
section 10 compare between ways of reading Python stacks (the C API with the GIL, without it)."""
import json


def frames(path):
    """{block size: sorted list of each block's (file, function, line) .py frames}, and the
    record's allocator settings (the python_stacks counters among them)."""
    d = json.load(open(path))
    fr, st = d["frames"], d["stacks"]
    by = {}
    for s in d["segments"]:
        for b in s["blocks"]:
            by.setdefault(b["size"], []).append(tuple((fr[i]["filename"], fr[i]["name"], fr[i]["line"]) for i in st[b["stack"]] if fr[i]["filename"].endswith(".py")))
    return {k: sorted(v) for k, v in by.items()}, d["allocator_settings"]
