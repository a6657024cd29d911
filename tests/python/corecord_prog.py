"""A Python program on the fake driver (through ctypes), for tests/corecord_test.sh.
argv[1]: torch (imports the stand-in), notorch, dump (a snapshot through the cumemhist
module mid-run), oom (PyTorch's out-of-memory observers called, as PyTorch does), usr1 PATH
(SIGUSR1 to itself, then waits for the snapshot at PATH)."""
import ctypes
import sys

mode = sys.argv[1]
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cuda.cuInit(0) == 0
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0
if mode != "notorch":
    import torch
if mode == "dump":
    import cumemhist
    assert cumemhist.recording()
    cumemhist.mark("step 1")
    with cumemhist.range("forward"):
        pass
    assert cumemhist.dump("mid.cmh")
if mode == "oom":
    torch._C._standin_oom()
if mode == "usr1":  # the recorder's helper thread dumps, and calls into Python for PyTorch's part
    import os
    import signal
    import time
    out = sys.argv[2]
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(500):
        if os.path.exists(out):
            break
        time.sleep(0.01)
print("torch imported" if "torch" in sys.modules else "no torch")
