/*
 * poolids.c - one allocation of each kind a pool id could be asked of, for poolids_test.sh: a
 * plain cuMemAlloc (in no pool), a cuMemAllocAsync from the device's default pool and a
 * cuMemAllocFromPoolAsync from a private pool (cuMemPoolCreate), each kept to the end, with one
 * more of each freed before it.  The sqlite export and the memviz pickle must name the same pool
 * for each, NULL (None) where there is none.  Exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "pool_prog.h"

#define MIB (1ull << 20)
#define CK(x) do { if ((x) != CUDA_SUCCESS) { fprintf(stderr, "poolids: %s failed\n", #x); return 2; } } while (0)

__attribute__((noinline)) static CUresult plain(CUdeviceptr *p) { return cuMemAlloc(p, 1 * MIB); }
__attribute__((noinline)) static CUresult from_default(CUdeviceptr *p, CUstream s) { return cuMemAllocAsync(p, 2 * MIB, s); }
__attribute__((noinline)) static CUresult from_private(CUdeviceptr *p, CUmemoryPool pool, CUstream s)
{
    return cuMemAllocFromPoolAsync(p, 4 * MIB, pool, s);
}

int main(void)
{
    CUstream st;
    CUmemoryPool pool;
    CK(pool_prog_setup(&st, &pool));
    CUdeviceptr a[2], b[2], k[2];
    for (int i = 0; i < 2; i++) {
        CK(plain(&a[i]));
        CK(from_default(&b[i], st));
        CK(from_private(&k[i], pool, st));
    }
    CK(cuMemFree(a[0]));
    CK(cuMemFreeAsync(b[0], st));
    CK(cuMemFreeAsync(k[0], st));
    CK(cuStreamSynchronize(st));
    printf("poolids: ran\n");
    return 0;
}
