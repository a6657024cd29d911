/*
 * vmm_halves.c - a cuMemCreate mapping given back in pieces, as allocators that map big and
 * unmap by chunk do.  After the last unmap (and the handle's release) nothing of it is in use,
 * so every reading of the record must end with nothing live; the replay once kept a 2 MiB block
 * of a 4 MiB map unmapped in two halves.
 *   vmm_halves halves     4 MiB mapped, unmapped as two 2 MiB halves in order
 *   vmm_halves quarters   4 MiB mapped, unmapped as four 1 MiB pieces in order
 *   vmm_halves reversed   4 MiB mapped, unmapped as four 1 MiB pieces, 2nd, 4th, 1st, 3rd
 *   vmm_halves twice      one 4 MiB handle mapped at two reservations and released, each map
 *                         unmapped in halves (the second map's in order, the first's last half first)
 *   vmm_halves early      a 16 MiB handle created before the first cuMemGetInfo sample (a 2 MiB
 *                         cuMemAlloc takes it) and mapped after it, then an 8 MiB one made and
 *                         mapped, a pause; unmapped and released at the end
 *   vmm_halves early kept the same, the pause before the maps, the 16 MiB handle unmapped and
 *                         held to the end, not released
 *   vmm_halves middle     8 MiB mapped, its middle 4 MiB unmapped first, then the 2 MiB left of it
 *                         and the 2 MiB right of it: one map, one allocation
 *   vmm_halves middle kept  the same, the two 2 MiB pieces kept mapped to the end
 *   vmm_halves several    three 2 MiB handles mapped side by side in one reservation, unmapped as
 *                         [1, 5) MiB (the first map's end, the second whole, the third's start),
 *                         then the first MiB and the last: three maps, three allocations
 * Each prints `peak USED` and `end USED`: cuMemGetInfo's used bytes (total - free) at the
 * program's highest moment and at its end (early: the end's and the bytes the peak held past
 * them, no sample taken at the peak).  Each call site is its own function, so each has its
 * own stack.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VMM_PROG "vmm_halves"
#include "vmm_prog.h"

#define MIB (1ull << 20)

__attribute__((noinline)) static CUdeviceptr map_all(size_t n, CUmemGenericAllocationHandle h)
{
    CUdeviceptr a;
    ck(cuMemAddressReserve(&a, n, 0, 0, 0), "cuMemAddressReserve");
    ck(cuMemMap(a, n, 0, h, 0), "cuMemMap");
    return a;
}

/* unmap [a, a + n) in pieces of `piece` bytes, in the order given by `order` (indexes) */
__attribute__((noinline)) static void unmap_pieces(CUdeviceptr a, size_t n, size_t piece, const int *order)
{
    for (size_t i = 0; i < n / piece; i++) ck(cuMemUnmap(a + (size_t)order[i] * piece, piece), "cuMemUnmap");
    ck(cuMemAddressFree(a, n), "cuMemAddressFree");
}

int main(int argc, char **argv)
{
    static const int inorder[] = {0, 1, 2, 3}, shuffled[] = {1, 3, 0, 2}, back[] = {1, 0};
    const char *mode = argc > 1 ? argv[1] : "";
    vmm_prog_setup();
    unsigned long long peak = 0;
    if (!strcmp(mode, "halves") || !strcmp(mode, "quarters") || !strcmp(mode, "reversed")) {
        CUmemGenericAllocationHandle h = make_handle(4 * MIB);
        CUdeviceptr a = map_all(4 * MIB, h);
        peak = used();
        if (!strcmp(mode, "halves")) unmap_pieces(a, 4 * MIB, 2 * MIB, inorder);
        else unmap_pieces(a, 4 * MIB, 1 * MIB, !strcmp(mode, "quarters") ? inorder : shuffled);
        ck(cuMemRelease(h), "cuMemRelease");
    } else if (!strcmp(mode, "twice")) {
        CUmemGenericAllocationHandle h = make_handle(4 * MIB);
        CUdeviceptr a = map_all(4 * MIB, h), b = map_all(4 * MIB, h);
        ck(cuMemRelease(h), "cuMemRelease"); /* the maps keep the memory */
        peak = used();
        unmap_pieces(b, 4 * MIB, 2 * MIB, inorder);
        unmap_pieces(a, 4 * MIB, 2 * MIB, back); /* the second half first */
    } else if (!strcmp(mode, "middle")) {
        CUmemGenericAllocationHandle h = make_handle(8 * MIB);
        CUdeviceptr a = map_all(8 * MIB, h);
        peak = used();
        ck(cuMemUnmap(a + 2 * MIB, 4 * MIB), "cuMemUnmap");
        if (argc <= 2) { /* kept: both pieces mapped to the end */
            ck(cuMemUnmap(a, 2 * MIB), "cuMemUnmap");
            ck(cuMemUnmap(a + 6 * MIB, 2 * MIB), "cuMemUnmap");
            ck(cuMemAddressFree(a, 8 * MIB), "cuMemAddressFree");
            ck(cuMemRelease(h), "cuMemRelease");
        }
    } else if (!strcmp(mode, "several")) {
        CUmemGenericAllocationHandle h[3];
        CUdeviceptr a;
        ck(cuMemAddressReserve(&a, 6 * MIB, 0, 0, 0), "cuMemAddressReserve");
        for (int i = 0; i < 3; i++) {
            h[i] = make_handle(2 * MIB);
            ck(cuMemMap(a + (size_t)i * 2 * MIB, 2 * MIB, 0, h[i], 0), "cuMemMap");
        }
        peak = used();
        ck(cuMemUnmap(a + 1 * MIB, 4 * MIB), "cuMemUnmap");
        ck(cuMemUnmap(a, 1 * MIB), "cuMemUnmap");
        ck(cuMemUnmap(a + 5 * MIB, 1 * MIB), "cuMemUnmap");
        ck(cuMemAddressFree(a, 6 * MIB), "cuMemAddressFree");
        for (int i = 0; i < 3; i++) ck(cuMemRelease(h[i]), "cuMemRelease");
    } else if (!strcmp(mode, "early")) {
        /* no sample at the peak: owners takes the peak's figure from the nearest sample, and a
         * pause of 200 ms makes that the first (early) or the end's (early kept) */
        int kept = argc > 2;
        struct timespec pause = {0, 200000000};
        CUmemGenericAllocationHandle h = make_handle(16 * MIB);
        CUdeviceptr p;
        ck(cuMemAlloc(&p, 2 * MIB), "cuMemAlloc"); /* the device's first sample: h in it already */
        if (kept) nanosleep(&pause, NULL);
        CUdeviceptr a = map_all(16 * MIB, h);
        CUmemGenericAllocationHandle g = make_handle(8 * MIB);
        CUdeviceptr b = map_all(8 * MIB, g);
        if (!kept) nanosleep(&pause, NULL);
        ck(cuMemUnmap(b, 8 * MIB), "cuMemUnmap");
        ck(cuMemUnmap(a, 16 * MIB), "cuMemUnmap");
        ck(cuMemRelease(g), "cuMemRelease");
        if (!kept) ck(cuMemRelease(h), "cuMemRelease"); /* kept: h held, mapped nowhere, to the end */
        ck(cuMemFree(p), "cuMemFree");
        unsigned long long end = used();
        printf("peak %llu\n", end + (kept ? 10 : 26) * MIB); /* the end's, and what the peak held beyond it */
        printf("end %llu\n", end);
        return 0;
    } else {
        fprintf(stderr, "usage: vmm_halves halves|quarters|reversed|twice|middle [kept]|several|early [kept]\n");
        return 2;
    }
    printf("peak %llu\n", peak);
    printf("end %llu\n", used());
    return 0;
}
