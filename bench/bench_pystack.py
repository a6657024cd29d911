"""bench_pystack.py DEPTH PAIRS [cdll|pydll] - ns per cuMemAlloc+cuMemFree pair called through
ctypes from a Python function DEPTH frames deep, for bench/rows_py.sh.
cdll: ctypes.CDLL, which releases the GIL around the call (the recorder takes it back to read
the stack); pydll: ctypes.PyDLL, which keeps it.  Under the recorder the Python-stack modes
(cmh_set_python_stacks: off, held, wait) take turns round after round in this one process, so
that they are compared side by side on a noisy machine, in the thread's CPU time (time spent
descheduled is not counted); each prints "MODE NS", the best round.
Without the recorder: "bare NS".  Run with the fake driver (or a real one) on LD_LIBRARY_PATH."""
import ctypes
import sys
import time

depth, pairs = int(sys.argv[1]), int(sys.argv[2])
kind = sys.argv[3] if len(sys.argv) > 3 else "cdll"
cuda = (ctypes.PyDLL if kind == "pydll" else ctypes.CDLL)("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
alloc, free = cuda.cuMemAlloc_v2, cuda.cuMemFree_v2
free.argtypes = [ctypes.c_uint64]
try:
    set_mode = ctypes.CDLL(None).cmh_set_python_stacks
    set_mode.argtypes = [ctypes.c_int]
    modes = [("off", 0), ("held", 1), ("wait", 2)]
except AttributeError:
    set_mode, modes = None, [("bare", None)]


def loop(n):
    p = ctypes.c_uint64()
    ref = ctypes.byref(p)
    t0 = time.thread_time_ns()
    for i in range(n):
        alloc(ref, 4096 + (i & 7) * 512)
        free(p.value)
    return time.thread_time_ns() - t0


def nest(k, n):
    return loop(n) if k <= 1 else nest(k - 1, n)  # loop() is frame DEPTH, <module> frame 1


best = {}
for r in range(8):
    for name, m in modes:
        if set_mode:
            set_mode(m)
        t = nest(depth - 1, pairs // 10 if r == 0 else pairs)
        if r:  # round 0 warms: every (code, line) seen once
            best[name] = min(best.get(name, t), t)
for name, _ in modes:
    print("%s %.0f" % (name, best[name] / pairs))
