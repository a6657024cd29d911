"""A job for tests/pyattr_test.sh: one ctypes helper (argv[1]: "own", the user's mylib.gpu; "pkg",
the installed package gpulib) called once for 64 MiB of weights that stay, and in each of 10
steps for a 4 MiB buffer freed and a 1 MiB one kept (the leak).  Lines marked "# L:name"."""
import sys

if sys.argv[1] == "pkg":
    import gpulib as gpu
else:
    from mylib import gpu

MiB = 1 << 20
kept = []


def build_model():
    return gpu.device_alloc(64 * MiB)  # L:weights


def step():
    tmp = gpu.device_alloc(4 * MiB)  # L:tmp
    kept.append(gpu.device_alloc(1 * MiB))  # L:keep
    gpu.device_free(tmp)


gpu.init()
w = build_model()  # L:main
for _ in range(10):
    step()
