/*
 * poolfrag.c - stream-ordered pools' caches at the end, for fragpools_test.sh: a private pool
 * (cuMemPoolCreate) with its release threshold at the most, so that it keeps all it is given
 * back (5 rounds of 1..10 MiB allocated and freed: 55 MiB reserved, 5 MiB of it handed out at
 * the end), and the default pool (threshold 0) with two 16 MiB allocations live.  frag listed
 * the three live allocations as segments (37 MiB) under "reserved 88 MiB", the private pool's
 * 51 MiB cache in no row.  Exits 0 when it ran so.
 *   poolfrag two: then a second private pool, 3 MiB of it live at the end (a pool id of its own
 *   in the memory_viz export, fragpools_test.sh).
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "pool_prog.h"

#define MIB (1ull << 20)
#define CK(x) do { if ((x) != CUDA_SUCCESS) { fprintf(stderr, "poolfrag: %s failed\n", #x); return 2; } } while (0)

int main(int argc, char **argv)
{
    CUstream st;
    CUmemoryPool pool;
    CK(pool_prog_setup(&st, &pool));
    cuuint64_t most = ~0ull;
    CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &most));
    CUdeviceptr a[10], dd[3], keep;
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 10; i++) CK(cuMemAllocFromPoolAsync(&a[i], (size_t)(i + 1) * MIB, pool, st));
        for (int i = 0; i < 10; i++) CK(cuMemFreeAsync(a[i], st));
        CK(cuStreamSynchronize(st));
    }
    for (int i = 0; i < 3; i++) CK(cuMemAllocAsync(&dd[i], 16 * MIB, st));
    CK(cuMemFreeAsync(dd[1], st));
    CK(cuMemAllocFromPoolAsync(&keep, 5 * MIB, pool, st));
    if (argc > 1 && !strcmp(argv[1], "two")) {
        CUmemoryPool pool2;
        CUdeviceptr other;
        CUmemPoolProps p;
        pool_prog_props(&p);
        CK(cuMemPoolCreate(&pool2, &p));
        CK(cuMemAllocFromPoolAsync(&other, 3 * MIB, pool2, st));
    }
    CK(cuStreamSynchronize(st));
    printf("poolfrag: ran\n");
    return 0;
}
