/*
 * multigpu.c - a driver-API program that uses every device, leaks on one and runs out of
 * memory on it: what a multi-GPU job's record looks like when only one rank's device goes wrong.
 *
 * Each device gets 32 MiB of weights.  The last device (device 1 with two devices) also keeps a
 * 4 MiB buffer per step in cache_activations() and, after the steps, asks grow_kv_cache() for
 * 256 MiB buffers until the driver says CUDA_ERROR_OUT_OF_MEMORY.
 *   cumemhist record -- ./multigpu 8     then   cumemhist oom / leaks / peak cumemhist.<pid>.cmh
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define MAXDEV 16
#define MAXBUF 1024

static CUdeviceptr g_cache[MAXBUF], g_kv[MAXBUF];

static void use_device(CUcontext *ctx, int d)
{
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, d));
    CHECK(cuDevicePrimaryCtxRetain(&ctx[d], dev));
    CHECK(cuCtxSetCurrent(ctx[d]));
}

__attribute__((noinline)) void cache_activations(int step)
{
    CHECK(cuMemAlloc(&g_cache[step % MAXBUF], 4 << 20)); /* kept: the leak */
}

__attribute__((noinline)) CUresult grow_kv_cache(int *n)
{
    while (*n < MAXBUF) {
        CUresult r = cuMemAlloc(&g_kv[*n], 256u << 20);
        if (r != CUDA_SUCCESS) return r;
        (*n)++;
    }
    return CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 8, ndev = 0;
    CUcontext ctx[MAXDEV];
    CUdeviceptr weights[MAXDEV];
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&ndev));
    if (ndev > MAXDEV) ndev = MAXDEV;
    for (int d = 0; d < ndev; d++) {
        use_device(ctx, d);
        CHECK(cuMemAlloc(&weights[d], 32 << 20));
    }
    int last = ndev - 1;
    for (int s = 0; s < steps; s++)
        for (int d = 0; d < ndev; d++) {
            CUdeviceptr act;
            CHECK(cuCtxSetCurrent(ctx[d]));
            CHECK(cuMemAlloc(&act, 8 << 20));
            if (d == last) cache_activations(s);
            CHECK(cuMemFree(act));
        }
    CHECK(cuCtxSetCurrent(ctx[last]));
    int n = 0;
    CUresult r = grow_kv_cache(&n);
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("multigpu: %d device%s, %d step%s; device %d leaked %d MiB, then %d kv buffers of 256 MiB and %s\n", ndev,
           ndev == 1 ? "" : "s", steps, steps == 1 ? "" : "s", last, 4 * steps, n, name);
    for (int i = 0; i < n; i++) cuMemFree(g_kv[i]);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? 1 : 0;
}
