/*
 * waitretry.c - a driver-API program with its own wait-and-retry loop, for oomrule_test.sh (run it
 * on an 8 GiB device: FAKECUDA_CAPACITY=8G): 6 GiB allocated and kept; then 4 GiB asked for up to
 * three times from the same call (the same call stack), waiting between tries and freeing
 * nothing; all three fail and the program gives up.  No allocator gave memory back and asked
 * again: each failure went back to the program, 3 OOMs it saw, no cudaMalloc retry (summary once
 * said "CUDA OOMs: 1 | cudaMalloc retries: 2").  Exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <time.h>

#define GIB (1ull << 30)

/* one call site (tests/CMakeLists.txt builds this file unoptimized: no copy of the call) */
__attribute__((noinline)) static CUresult grab(CUdeviceptr *p)
{
    return cuMemAlloc(p, 4 * GIB);
}

int main(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr hold, p;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (cuMemAlloc(&hold, 6 * GIB) != CUDA_SUCCESS) return 2;
    int failed = 0;
    for (int i = 0; i < 3; i++) {
        if (grab(&p) != CUDA_ERROR_OUT_OF_MEMORY) return 1;
        failed++;
        struct timespec t = {0, 20000000};
        nanosleep(&t, NULL);
    }
    printf("waitretry: 4 GiB failed %d times, nothing freed between\n", failed);
    cuMemFree(hold);
    return 0;
}
