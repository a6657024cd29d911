"""A Python program on the fake driver through ctypes, for tests/pystack_test.sh: device
memory allocated from known lines (marked "# L:name") in the main thread, worker threads, a
recursion, a generator, and a ctypes callback called by C (tests/pycallback.c).  Sizes are
distinct, so a report's row says which line it is.  argv[1]: the path of libpycallback.so;
argv[2] (optional): a mode (threads: only the worker threads, many times, for TSan; die:
one allocation, then SIGKILL; c10: one allocation before and one after loading a stand-in for
PyTorch's libc10_cuda.so)."""
import ctypes
import sys
import threading

cuda = ctypes.CDLL("libcuda.so.1")
MiB = 1 << 20
kept = []


def grab(n):
    p = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0  # L:grab
    kept.append(p.value)
    return p.value


def deep(k, n):
    if k == 0:
        return grab(n)  # L:deep-bottom
    return deep(k - 1, n)  # L:deep-rec


def gen(count, n):
    for _ in range(count):
        yield grab(n)  # L:gen


def in_callback(n):
    grab(n)  # L:callback
    return 0


def worker(n, times):
    for _ in range(times):
        grab(n)  # L:worker


def main():
    lib = ctypes.CDLL(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "all"
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuInit(0) == 0
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
    if mode == "threads":
        ts = [threading.Thread(target=lambda: (cuda.cuCtxSetCurrent(ctx), worker(64 << 10, 200))) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return
    if mode == "c10":  # PyTorch's CUDA allocator loaded (a stand-in named libc10_cuda.so)
        grab(1 * MiB)  # L:before-c10
        import os
        ctypes.CDLL(os.path.join(os.path.dirname(sys.argv[1]), "libc10_cuda.so"))
        grab(2 * MiB)  # L:after-c10
        return
    if mode == "die":  # the flight record outlives it: record recovers the stacks
        grab(1 * MiB)  # L:die
        import os
        import signal
        os.kill(os.getpid(), signal.SIGKILL)
    grab(1 * MiB)  # L:main
    deep(5, 2 * MiB)  # L:main-deep
    list(gen(3, 3 * MiB))  # L:main-gen
    CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
    cb = CB(in_callback)
    lib.pycb_run(cb, 4 * MiB)  # L:main-cb
    lib.pycb_alloc.restype = ctypes.c_ulonglong
    lib.pycb_alloc.argtypes = [ctypes.c_size_t]
    assert lib.pycb_alloc(5 * MiB)  # L:main-c
    ts = [threading.Thread(target=lambda: (cuda.cuCtxSetCurrent(ctx), worker(6 * MiB, 2))) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


if __name__ == "__main__":
    main()
