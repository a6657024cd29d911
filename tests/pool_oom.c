/*
 * pool_oom.c - an out-of-memory error beside a stream-ordered pool's cache, for oomstate_test.sh:
 * the device's default pool, told to keep everything (release threshold: all), fills the device
 * with 4 MiB allocations, half of them are freed into it, and then a plain cuMemAlloc of 4 MiB
 * fails: the pool keeps the freed 32 MiB reserved (the driver's pool attributes call it its
 * backing memory, and cuMemGetInfo counts it used) until cuMemPoolTrimTo gives it back, after
 * which the same cuMemAlloc succeeds.  Run it on a 64 MiB device (FAKECUDA_CAPACITY=64M).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

int main(void)
{
    CUdevice dev;
    CUstream st;
    CUmemoryPool pool;
    if (loop_context(NULL) || cuCtxGetDevice(&dev)) return 2;
    if (cuStreamCreate(&st, 0) || cuDeviceGetDefaultMemPool(&pool, dev)) return 2;
    cuuint64_t keep = ~0ull;
    if (cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep)) return 2;
    CUdeviceptr p[64], big = 0;
    int n = 0;
    while (n < 64 && cuMemAllocAsync(&p[n], 4 * MIB, st) == CUDA_SUCCESS) n++;
    for (int i = 0; i < n; i += 2) cuMemFreeAsync(p[i], st);
    cuStreamSynchronize(st);
    size_t free_b = 0, total_b = 0;
    cuMemGetInfo(&free_b, &total_b);
    CUresult before = cuMemAlloc(&big, 4 * MIB);
    cuMemPoolTrimTo(pool, 0);
    CUresult after = cuMemAlloc(&big, 4 * MIB);
    printf("pool_oom: %d x 4 MiB, half freed into the pool; device free %zu; cuMemAlloc 4 MiB: %d, after the trim: %d\n", n,
           free_b, (int)before, (int)after);
    if (after == CUDA_SUCCESS) cuMemFree(big);
    for (int i = 1; i < n; i += 2) cuMemFreeAsync(p[i], st);
    cuStreamSynchronize(st);
    return before == CUDA_ERROR_OUT_OF_MEMORY && after == CUDA_SUCCESS ? 0 : 1;
}
