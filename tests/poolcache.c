/*
 * poolcache.c - what a stream-ordered pool takes from the device and gives back, for
 * tests/exports_test.sh.  The device's default pool, release threshold 0: 6 iterations of
 * { cuMemAllocAsync 2 MiB kept; cuMemAllocAsync 16 MiB; cuMemFreeAsync it; synchronize } (the pool
 * keeps each 16 MiB until the synchronize gives it back); then release threshold all, 4 times
 * { cuMemAllocAsync 16 MiB; cuMemFreeAsync it; synchronize }: the pool grows once and serves the
 * rest from its cache.  The pool's samples show it grew by 6 x 18 + 16 = 124 MiB and gave back
 * 6 x 16 = 96 MiB (the recorder reads the pool again after each synchronize; without that, the
 * first phase's last trim and the second phase's growth fell between two samples that both said
 * 28 MiB: 108 and 80), never held more than 28 MiB, and keeps 12 MiB used + 16 MiB cached at the
 * end.  The replay counted each cached free -16, +16, -16 MiB (Tot
 * Alloc 332 MiB) and each allocation from the cache +16 before the sample's -16 (a peak of 44 MiB).
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
    CUdeviceptr keep[6], t;
    for (int i = 0; i < 6; i++) {
        if (cuMemAllocAsync(&keep[i], 2 * MIB, s) || cuMemAllocAsync(&t, 16 * MIB, s) || cuMemFreeAsync(t, s) || cuStreamSynchronize(s))
            return 1;
    }
    uint64_t all = UINT64_MAX;
    if (cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &all)) return 1;
    for (int i = 0; i < 4; i++)
        if (cuMemAllocAsync(&t, 16 * MIB, s) || cuMemFreeAsync(t, s) || cuStreamSynchronize(s)) return 1;
    printf("done\n");
    return 0;
}
