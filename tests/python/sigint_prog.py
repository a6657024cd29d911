# sigint_prog.py MODE [FILE] - a ctypes program that is sent a signal it may handle itself
# (tests/signals_test.sh):
#   getsignal   print signal.getsignal of SIGINT, SIGTERM, SIGUSR1, SIGUSR2
#   catch FILE  16 MiB, SIGINT to itself; catches KeyboardInterrupt, then 8 MiB more, writes FILE
#               (a checkpoint), exits 3
#   uncaught    16 MiB, SIGINT to itself, KeyboardInterrupt not caught (Python then dies of SIGINT)
#   term        16 MiB, a SIGTERM handler of its own, SIGTERM to itself; goes on: 8 MiB more, exit 0
import ctypes, os, signal, sys, time

mode = sys.argv[1]
if mode == "getsignal":
    print(" ".join(str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)))
    sys.exit(0)
cu = ctypes.CDLL("libcuda.so.1")
ctx, dev = ctypes.c_void_p(), ctypes.c_int()
cu.cuInit(0)
cu.cuDeviceGet(ctypes.byref(dev), 0)
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
cu.cuCtxSetCurrent(ctx)


def alloc(n):
    p = ctypes.c_uint64()
    if cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) != 0:
        sys.exit(2)
    return p.value


alloc(16 << 20)
if mode == "term":
    got = []
    signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    os.kill(os.getpid(), signal.SIGTERM)
    for i in range(200):
        if got:
            break
        time.sleep(0.05)
    alloc(8 << 20)
    print("SIGTERM handled, went on" if got else "no SIGTERM seen", flush=True)
    sys.exit(0 if got else 5)
try:
    os.kill(os.getpid(), signal.SIGINT)
    for i in range(200):
        time.sleep(0.05)
    print("no KeyboardInterrupt", flush=True)
    sys.exit(4)
except KeyboardInterrupt:
    if mode == "uncaught":
        raise
    alloc(8 << 20)
    open(sys.argv[2], "w").write("checkpoint\n")
    print("caught KeyboardInterrupt, checkpoint saved", flush=True)
    sys.exit(3)
