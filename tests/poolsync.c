/*
 * poolsync.c - CUDA's default pool (release threshold 0, as cudaMallocAsync users get it) gives
 * back what it keeps at a synchronize (tests/poolsync_test.sh; the recorder reads the pool again
 * there, older records did not).  3 times
 * { cuMemAllocAsync 512 KiB (a small segment) + 64 MiB; cuMemFreeAsync both; synchronize }, then
 * cuMemAllocAsync 32 MiB kept, cuMemAllocAsync 96 MiB freed, synchronize, and the driver asked:
 * it prints what cuMemGetInfo and the pool's RESERVED_MEM_CURRENT say (32 MiB: the kept block).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

int main(void)
{
    if (loop_context(NULL)) return 2;
    CUdevice dev;
    CUstream s;
    CUmemoryPool pool;
    if (cuDeviceGet(&dev, 0) || cuStreamCreate(&s, 0) || cuDeviceGetDefaultMemPool(&pool, dev)) return 2;
    size_t f0, t0;
    if (cuMemGetInfo(&f0, &t0)) return 2;
    for (int i = 0; i < 3; i++) {
        CUdeviceptr a, b;
        if (cuMemAllocAsync(&a, 512 << 10, s) || cuMemAllocAsync(&b, 64 * MIB, s) || cuMemFreeAsync(a, s) || cuMemFreeAsync(b, s) ||
            cuStreamSynchronize(s))
            return 1;
    }
    CUdeviceptr keep, t;
    if (cuMemAllocAsync(&keep, 32 * MIB, s) || cuMemAllocAsync(&t, 96 * MIB, s) || cuMemFreeAsync(t, s) || cuStreamSynchronize(s)) return 1;
    size_t f, tot;
    cuuint64_t r = 0;
    if (cuMemGetInfo(&f, &tot) || cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r)) return 1;
    printf("driver: used %llu MiB more than at the start, pool reserved %llu MiB\n", (unsigned long long)((f0 - f) / MIB),
           (unsigned long long)(r / MIB));
    return 0;
}
