"""Debian's python3-torch (a CPU build) imported under record, for tests/torch_cpu_test.sh: the
driver-level record (ctypes on the fake driver) before and after the import keeps its Python
lines, and the start-up hook says one line at most."""
import ctypes

cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cuda.cuInit(0) == 0
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0  # L:before
import torch  # noqa: E402

x = torch.ones(1000) * 2
assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(2 << 20)) == 0  # L:after
print("torch %s cuda %s sum %d" % (torch.__version__, torch.cuda.is_available(), int(x.sum())))
