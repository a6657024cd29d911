"""A Python program on the fake driver (through ctypes), for tests/corecord_test.sh.
argv[1]: torch (imports the stand-in), notorch, dump (a snapshot through the cumemhist
module mid-run), oom (PyTorch's out-of-memory observers called, as PyTorch does), usr1 PATH
(SIGUSR1 to itself, then waits for the snapshot at PATH), term (SIGTERM to itself), race threads|usr1 (a second dump,
from another thread or SIGUSR1, asked for while the first one's PyTorch snapshot is being taken:
the stand-in's waits for $STANDIN_GATE, made here once both have begun, or after 10 s)."""
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
if mode == "term":  # ended by SIGTERM (its default action): the recorder's dump on the way cannot ask Python
    import os
    import signal
    import time
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
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
if mode == "race":
    import os
    import signal
    import threading
    import time

    import cumemhist

    def count(path, what):
        with open(path) as f:
            return sum(line.startswith(what) or ('"%s"' % what) in line for line in f)

    def wait(path, what, n):
        for _ in range(1000):
            if count(path, what) >= n:
                return
            time.sleep(0.01)

    def wait_snapshots(n):
        wait(os.environ["STANDIN_LOG"], "snapshot", n)

    base = count(os.environ["STANDIN_LOG"], "snapshot")
    written = count(os.environ["CUMEMHIST_MANIFEST"], "snapshot ")
    ok = []
    first = threading.Thread(target=lambda: ok.append(cumemhist.dump()))
    first.start()
    wait_snapshots(base + 1)  # the first dump is in PyTorch's snapshot
    if sys.argv[2] == "threads":
        second = threading.Thread(target=lambda: ok.append(cumemhist.dump()))
        second.start()
    else:
        second = None
        os.kill(os.getpid(), signal.SIGUSR1)
    wait_snapshots(base + 2)
    open(os.environ["STANDIN_GATE"], "w").close()
    first.join()
    if second is not None:
        second.join()
    # the SIGUSR1 dump ends on the recorder's helper thread: both written (`record`'s manifest)
    wait(os.environ["CUMEMHIST_MANIFEST"], "snapshot ", written + 2)
    print("dumps", " ".join(str(x) for x in ok))
print("torch imported" if "torch" in sys.modules else "no torch")
