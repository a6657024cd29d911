/*
 * vmm_held.c - physical memory made with cuMemCreate and held mapped nowhere: 20 MiB created and
 * never mapped, 8 MiB mapped, unmapped and never released (the two leaks), beside 4 MiB mapped
 * and kept mapped (a segment) and 6 MiB created and released (gone): 28 MiB held that no segment
 * shows.  Each call site is its own function, so each has its own stack.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

static CUmemAllocationProp g_prop;

static CUmemGenericAllocationHandle make(size_t n)
{
    CUmemGenericAllocationHandle h = 0;
    if (cuMemCreate(&h, n, &g_prop, 0) != CUDA_SUCCESS) {
        fprintf(stderr, "vmm_held: cuMemCreate failed (%zu bytes)\n", n);
        exit(1);
    }
    return h;
}

__attribute__((noinline)) static CUmemGenericAllocationHandle never_mapped(void) { return make(20 * MIB); }
__attribute__((noinline)) static CUmemGenericAllocationHandle unmapped_later(void) { return make(8 * MIB); }
__attribute__((noinline)) static CUmemGenericAllocationHandle kept_mapped(void) { return make(4 * MIB); }
__attribute__((noinline)) static CUmemGenericAllocationHandle released(void) { return make(6 * MIB); }

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "vmm_held: %s failed (%d)\n", what, (int)r);
        exit(1);
    }
}

int main(void)
{
    if (loop_context(NULL)) return 2;
    g_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    g_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    g_prop.location.id = 0;
    CUdeviceptr va = 0;
    check(cuMemAddressReserve(&va, 16 * MIB, 0, 0, 0), "cuMemAddressReserve");
    CUmemGenericAllocationHandle a = never_mapped(), b = unmapped_later(), c = kept_mapped(), d = released();
    (void)a;
    check(cuMemMap(va, 8 * MIB, 0, b, 0), "cuMemMap");
    check(cuMemMap(va + 8 * MIB, 4 * MIB, 0, c, 0), "cuMemMap");
    check(cuMemUnmap(va, 8 * MIB), "cuMemUnmap");
    check(cuMemRelease(d), "cuMemRelease");
    return 0;
}
