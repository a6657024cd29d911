/*
 * vmm_phys.c - device memory the driver charges where the ranges a record shows say otherwise.
 *   vmm_phys alias    one 8 MiB cuMemCreate handle mapped at two reservations (16 MiB of ranges,
 *                     8 MiB of memory), released while mapped, then one map unmapped
 *   vmm_phys part     a 32 MiB handle of which 4 MiB is mapped (the other 28 MiB still in use)
 *   vmm_phys spare    three handles made first: A (16 MiB) mapped at two reservations, B (16 MiB)
 *                     mapped, C (8 MiB) never mapped; then A's second map and B's unmapped and
 *                     B released (A mapped once and C held at the end)
 *   vmm_phys kept     four 2 MiB handles made and mapped, the last unmapped and kept (never
 *                     released), then 3 MiB of cuMemAlloc freed again (a stranger's vmm.c): the
 *                     peak, at the cuMemAlloc, holds 11 MiB where the ranges say 9
 *   vmm_phys notyet   a 64 MiB handle made, then 16 MiB of cuMemAlloc (the peak: the driver charges
 *                     the handle from its making, 80 MiB), freed, then 32 MiB of the handle mapped,
 *                     unmapped, the handle released
 *   vmm_phys held [kill]  a 16 MiB handle made and mapped, 4 MiB of cuMemAlloc (the peak, 20 MiB),
 *                     freed, the handle unmapped and kept to the end; kill: then SIGKILL (the
 *                     record is recovered from its flight record)
 *   vmm_phys managed [second]  64 MiB of cuMemAllocManaged and 8 MiB of cuMemAlloc, the
 *                     managed memory first, or second (with FAKECUDA_MANAGED_OFFDEVICE=1 the
 *                     managed pages are off the device; else the fake driver counts them at once)
 * Each prints `peak USED` and `end USED`: cuMemGetInfo's used bytes (total - free) at its
 * highest moment and at its end, for owners' totals to be held to.  Each call site is its own
 * function, so each has its own stack.
 */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VMM_PROG "vmm_phys"
#include "vmm_prog.h"

#define MIB (1ull << 20)

__attribute__((noinline)) static CUdeviceptr map_at(size_t resv, size_t n, CUmemGenericAllocationHandle h)
{
    CUdeviceptr a;
    ck(cuMemAddressReserve(&a, resv, 0, 0, 0), "cuMemAddressReserve");
    ck(cuMemMap(a, n, 0, h, 0), "cuMemMap");
    return a;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    vmm_prog_setup();
    if (!strcmp(mode, "alias")) {
        CUmemGenericAllocationHandle h = make_handle(8 * MIB);
        map_at(8 * MIB, 8 * MIB, h);
        CUdeviceptr b = map_at(8 * MIB, 8 * MIB, h);
        ck(cuMemRelease(h), "cuMemRelease"); /* still mapped twice: the memory stays */
        printf("peak %llu\n", used());
        ck(cuMemUnmap(b, 8 * MIB), "cuMemUnmap");
    } else if (!strcmp(mode, "part")) {
        CUmemGenericAllocationHandle h = make_handle(32 * MIB);
        map_at(32 * MIB, 4 * MIB, h);
        printf("peak %llu\n", used());
    } else if (!strcmp(mode, "spare")) {
        CUmemGenericAllocationHandle a = make_handle(16 * MIB), b = make_handle(16 * MIB);
        (void)make_handle(8 * MIB); /* held, mapped nowhere, to the end */
        map_at(16 * MIB, 16 * MIB, a);
        CUdeviceptr bm = map_at(16 * MIB, 16 * MIB, b), a2 = map_at(16 * MIB, 16 * MIB, a);
        printf("peak %llu\n", used());
        ck(cuMemUnmap(a2, 16 * MIB), "cuMemUnmap");
        ck(cuMemUnmap(bm, 16 * MIB), "cuMemUnmap");
        ck(cuMemRelease(b), "cuMemRelease");
    } else if (!strcmp(mode, "kept")) {
        CUdeviceptr r, x;
        CUmemGenericAllocationHandle h[4];
        ck(cuMemAddressReserve(&r, 32 * MIB, 0, 0, 0), "cuMemAddressReserve");
        for (int i = 0; i < 4; i++) {
            h[i] = make_handle(2 * MIB);
            ck(cuMemMap(r + i * 2 * MIB, 2 * MIB, 0, h[i], 0), "cuMemMap");
        }
        ck(cuMemUnmap(r + 3 * 2 * MIB, 2 * MIB), "cuMemUnmap"); /* h[3] held, mapped nowhere, to the end */
        ck(cuMemAlloc(&x, 3 * MIB), "cuMemAlloc");
        printf("peak %llu\n", used());
        ck(cuMemFree(x), "cuMemFree");
    } else if (!strcmp(mode, "notyet")) {
        CUmemGenericAllocationHandle h = make_handle(64 * MIB);
        CUdeviceptr x;
        ck(cuMemAlloc(&x, 16 * MIB), "cuMemAlloc"); /* h made, not mapped yet */
        printf("peak %llu\n", used());
        ck(cuMemFree(x), "cuMemFree");
        CUdeviceptr a = map_at(64 * MIB, 32 * MIB, h);
        ck(cuMemUnmap(a, 32 * MIB), "cuMemUnmap");
        ck(cuMemRelease(h), "cuMemRelease");
    } else if (!strcmp(mode, "held")) {
        CUmemGenericAllocationHandle h = make_handle(16 * MIB);
        CUdeviceptr a = map_at(16 * MIB, 16 * MIB, h), x;
        ck(cuMemAlloc(&x, 4 * MIB), "cuMemAlloc");
        printf("peak %llu\n", used());
        ck(cuMemFree(x), "cuMemFree");
        ck(cuMemUnmap(a, 16 * MIB), "cuMemUnmap"); /* h held, mapped nowhere, to the end */
        if (argc > 2) {
            printf("end %llu\n", used());
            fflush(stdout);
            kill(getpid(), SIGKILL);
        }
    } else if (!strcmp(mode, "managed")) {
        CUdeviceptr m, a;
        if (argc > 2) ck(cuMemAlloc(&a, 8 * MIB), "cuMemAlloc"); /* managed_second: the first sample before it */
        ck(cuMemAllocManaged(&m, 64 * MIB, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
        if (argc <= 2) ck(cuMemAlloc(&a, 8 * MIB), "cuMemAlloc");
        printf("peak %llu\n", used());
    } else {
        fprintf(stderr, "usage: vmm_phys alias|part|spare|kept|notyet|held [kill]|managed\n");
        return 2;
    }
    printf("end %llu\n", used());
    return 0;
}
