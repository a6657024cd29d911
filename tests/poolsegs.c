/*
 * poolsegs.c - a private stream-ordered pool's segments, for poolsegs_test.sh: cuMemPoolCreate,
 * three 4 MiB cuMemAllocFromPoolAsync, each freed with cuMemFreeAsync, a synchronize, then three
 * 4 MiB again, live at the end.  With its release threshold at the most (the default) the pool
 * keeps what is freed and serves the second three from it: 12 MiB reserved once, none given back,
 * and so 3 segments made once, none freed (summary once read 3 current, 6 allocated, 3 freed).
 *   poolsegs trim   the threshold 0: the synchronize gives the 12 MiB back, 3 segments freed,
 *                   and the second three are new memory
 * Exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "pool_prog.h"

#define MIB (1ull << 20)
#define CK(x) do { if ((x) != CUDA_SUCCESS) { fprintf(stderr, "poolsegs: %s failed\n", #x); return 2; } } while (0)

int main(int argc, char **argv)
{
    CUstream st;
    CUmemoryPool pool;
    CK(pool_prog_setup(&st, &pool));
    cuuint64_t threshold = argc > 1 && !strcmp(argv[1], "trim") ? 0 : ~0ull;
    CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CUdeviceptr a[3];
    for (int i = 0; i < 3; i++) CK(cuMemAllocFromPoolAsync(&a[i], 4 * MIB, pool, st));
    for (int i = 0; i < 3; i++) CK(cuMemFreeAsync(a[i], st));
    CK(cuStreamSynchronize(st));
    for (int i = 0; i < 3; i++) CK(cuMemAllocFromPoolAsync(&a[i], 4 * MIB, pool, st));
    CK(cuStreamSynchronize(st));
    printf("poolsegs: ran\n");
    return 0;
}
