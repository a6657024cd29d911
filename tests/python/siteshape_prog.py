"""A live job for tests/siteshape_test.sh, over ctypes and the fake driver: one helper (alloc)
called from two lines (build, 8 MiB; deep, 2 MiB, at the bottom of a 12-deep recursion), then it
says it is ready (touches argv[1]) and holds its memory until argv[2] appears (at most a minute).
Lines marked "# L:name"."""
import ctypes
import os
import sys
import time

cu = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cu.cuInit(0) == 0
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0


def alloc(n):
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0  # L:alloc
    return p.value


def build():
    return alloc(8 << 20)  # L:build


def deep(n):
    if n == 0:
        return alloc(2 << 20)  # L:bottom
    return deep(n - 1)  # L:recurse


held = [build(), deep(12)]
open(sys.argv[1], "w").close()
for _ in range(600):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.1)
