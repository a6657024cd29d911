"""A device-memory helper over ctypes, for tests/pyattr_test.sh: the test installs it twice, as
the user's own module (proj/mylib/gpu.py) and as a third-party package under site-packages
(env/lib/python3.11/site-packages/gpulib/__init__.py)."""
import ctypes

cu = ctypes.CDLL("libcuda.so.1")


def init():
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cu.cuInit(0) == 0
    assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0


def device_alloc(n):
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0  # L:alloc
    return p.value


def device_free(p):
    cu.cuMemFree_v2(ctypes.c_uint64(p))
