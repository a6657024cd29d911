/*
 * oom_demo.c - a driver-API program that runs out of device memory.
 *
 * It grows a list of 256 MiB buffers in grow_model() until cuMemAlloc fails, then reports the
 * error and exits 1, as a training job would.  Under the recorder the first out-of-memory result
 * is dumped at once, with the device's free bytes at that moment.
 *   cumemhist record -- ./oom_demo
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXBUF 4096

__attribute__((noinline)) CUresult grow_model(CUdeviceptr *bufs, int *n)
{
    for (;;) {
        if (*n == MAXBUF) return CUDA_SUCCESS;
        CUresult r = cuMemAlloc(&bufs[*n], 256u << 20);
        if (r != CUDA_SUCCESS) return r;
        (*n)++;
    }
}

int main(void)
{
    static CUdeviceptr bufs[MAXBUF];
    int n = 0;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "oom_demo: no CUDA device\n");
        return 2;
    }
    size_t free_b = 0, total = 0;
    cuMemGetInfo(&free_b, &total);
    CUresult r = grow_model(bufs, &n);
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("oom_demo: %d buffers of 256 MiB (%zu MiB free of %zu at start), then %s\n", n, free_b >> 20, total >> 20, name);
    for (int i = 0; i < n; i++) cuMemFree(bufs[i]);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? 1 : 0;
}
