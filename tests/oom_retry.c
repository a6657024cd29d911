/*
 * oom_retry.c - a driver-API program that runs out of memory twice, as a caching allocator does,
 * for tests/oomstate_test.sh (run it with FAKECUDA_CAPACITY=100M): six 16 MiB segments, then
 * 32 MiB asked for (out of memory), two of the segments given back and the same 32 MiB asked
 * again (it succeeds: a retry, memory_summary's "cudaMalloc retries"), then 64 MiB asked for
 * with nothing to give back (out of memory: the one failure the program sees).  Exits 1 then.
 */
#include <cuda.h>
#include <stdio.h>

#define MIB (1ull << 20)

int main(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr seg[6], big, huge;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    for (int i = 0; i < 6; i++)
        if (cuMemAlloc(&seg[i], 16 * MIB) != CUDA_SUCCESS) return 2;
    if (cuMemAlloc(&big, 32 * MIB) != CUDA_ERROR_OUT_OF_MEMORY) return 2;
    cuMemFree(seg[4]); /* the cache given back, as an allocator does before it asks again */
    cuMemFree(seg[5]);
    if (cuMemAlloc(&big, 32 * MIB) != CUDA_SUCCESS) return 2;
    if (cuMemAlloc(&huge, 64 * MIB) != CUDA_ERROR_OUT_OF_MEMORY) return 2;
    printf("oom_retry: 32 MiB failed, then succeeded after 32 MiB freed; 64 MiB: CUDA_ERROR_OUT_OF_MEMORY\n");
    return 1;
}
