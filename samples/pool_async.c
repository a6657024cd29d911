/*
 * pool_async.c - stream-ordered allocation (cuMemAllocAsync / cuMemAllocFromPoolAsync) on the
 * device's default pool and on a pool of its own, with a release threshold so the pool keeps
 * memory between steps, then a trim and the pool's destruction.
 *
 * The pool's reserved bytes exceed what it hands out; the recorder samples both after every
 * pool operation, so `cumemhist summary` shows allocated < reserved, as the pool's attributes
 * say (printed at the end):
 *   cumemhist record -o pool.cmh -- ./pool_async && cumemhist summary pool.cmh
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void pool_attrs(CUmemoryPool pool, unsigned long long *reserved, unsigned long long *used)
{
    cuuint64_t r = 0, u = 0;
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r));
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u));
    *reserved = r;
    *used = u;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 4;
    CUdevice dev = sample_init(NULL);
    CUstream st;
    CHECK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

    /* a pool of our own that keeps up to 64 MiB between steps */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    cuuint64_t keep = 64ull << 20;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));

    CUdeviceptr kept = 0;
    for (int s = 0; s < steps; s++) {
        CUdeviceptr a[6], tmp;
        for (int i = 0; i < 6; i++) CHECK(cuMemAllocFromPoolAsync(&a[i], (size_t)(i + 1) * (1 << 20) + 4096, pool, st));
        CHECK(cuMemAllocAsync(&tmp, 3 << 20, st)); /* the device's default pool */
        CHECK(cuMemFreeAsync(tmp, st));
        for (int i = 0; i < 6; i++)
            if (i != 5 || s) CHECK(cuMemFreeAsync(a[i], st));
        if (!s) kept = a[5];
        CHECK(cuStreamSynchronize(st));
    }
    unsigned long long reserved, used;
    pool_attrs(pool, &reserved, &used);
    printf("pool_async: pool reserved %llu used %llu\n", reserved, used);
    CHECK(cuMemPoolTrimTo(pool, 0));
    pool_attrs(pool, &reserved, &used);
    printf("pool_async: after trim reserved %llu used %llu\n", reserved, used);
    CHECK(cuMemFreeAsync(kept, st));
    CHECK(cuStreamSynchronize(st));
    CHECK(cuMemPoolDestroy(pool));
    CHECK(cuStreamDestroy(st));
    return 0;
}
