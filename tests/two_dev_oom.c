/*
 * two_dev_oom.c - two devices, each running out of memory once, device 1 first (run with
 * FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G): device 0 takes a 600 MiB model; device 1 200 MiB,
 * then grows by 300 MiB until the third fails (200 + 300 + 300 + 300 > 1024); then device 0 asks
 * for 500 MiB and fails (600 + 500 > 1024).  The program handles each error and goes on, freeing
 * everything but the model.  Device 0's OOM is the later one though device 0 is the lower number:
 * `oom` calls device 1's the record's first, and whatif and --at oom look at it.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

__attribute__((noinline)) static CUresult grow(CUdeviceptr *p) { return cuMemAlloc(p, 300 * MIB); }
__attribute__((noinline)) static CUresult big(CUdeviceptr *p) { return cuMemAlloc(p, 500 * MIB); }

int main(void)
{
    CUcontext ctx[2];
    CK(cuInit(0));
    for (int i = 0; i < 2; i++) {
        CUdevice d;
        CK(cuDeviceGet(&d, i));
        CK(cuDevicePrimaryCtxRetain(&ctx[i], d));
    }
    CK(cuCtxSetCurrent(ctx[0]));
    CUdeviceptr model, b1, g[4], x;
    CK(cuMemAlloc(&model, 600 * MIB));
    CK(cuCtxSetCurrent(ctx[1]));
    CK(cuMemAlloc(&b1, 200 * MIB));
    int n = 0;
    CUresult r;
    while (n < 4 && (r = grow(&g[n])) == CUDA_SUCCESS) n++;
    printf("device 1: %d grows, then %d\n", n, (int)r);
    CK(cuCtxSetCurrent(ctx[0]));
    r = big(&x);
    printf("device 0: big -> %d\n", (int)r);
    if (r == CUDA_SUCCESS) CK(cuMemFree(x));
    CK(cuCtxSetCurrent(ctx[1]));
    for (int i = 0; i < n; i++) CK(cuMemFree(g[i]));
    CK(cuMemFree(b1));
    return 0;
}
