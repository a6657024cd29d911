/*
 * oom_loop.c - a program that catches out-of-memory and keeps asking, for tests/oomloop_test.sh
 * (run it with FAKECUDA_CAPACITY=64M): 16 MiB segments until the device is full (the last ask
 * fails: one error from that line), then N asks of 32 MiB from one other line, each failing (a
 * serving loop that retries after an OOM).  "none": one allocation freed again, no error.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    CUdeviceptr p, q;
    if (argc > 1 && !strcmp(argv[1], "none")) {
        if (cuMemAlloc(&p, 16 * MIB)) return 1;
        cuMemFree(p);
        return 0;
    }
    int n = argc > 1 ? atoi(argv[1]) : 200, failed = 0;
    while (cuMemAlloc(&p, 16 * MIB) == CUDA_SUCCESS) {}
    for (int i = 0; i < n; i++) failed += cuMemAlloc(&q, 32 * MIB) == CUDA_ERROR_OUT_OF_MEMORY;
    printf("%d asks failed\n", failed);
    return 0;
}
