/*
 * vmm_kind.c - cuMemCreate memory that is no PyTorch expandable segment, and handles whose
 * release comes apart from their unmap.
 *   vmm_kind lib      a library's own VMM allocator, as NCCL's ncclCuMemAlloc: three 2 MiB
 *                     handles, each mapped at a reservation of its own and kept mapped to the end,
 *                     beside 4 MiB of cuMemAlloc
 *   vmm_kind late     an 8 MiB handle mapped, unmapped, then 16 MiB of cuMemAlloc (the peak: the
 *                     handle is still held, 24 MiB), freed, then the handle released
 *   vmm_kind unmapped an 8 MiB handle made, 16 MiB of cuMemAlloc (the peak, 24 MiB), freed, the
 *                     handle released without ever being mapped
 *   vmm_kind phys     a 64 MiB handle made, 16 MiB of cuMemAlloc (the physical peak, 80 MiB),
 *                     freed, then 32 MiB of the handle mapped (the reserved peak, 32 MiB of
 *                     ranges), unmapped, the handle released
 *   vmm_kind leak     10 steps, each marked (CMH_MARK "step"): an 8 MiB handle made, mapped,
 *                     unmapped and never released (the forgotten cuMemRelease): 80 MiB held at the
 *                     end, mapped nowhere; leak30: the same over 30 steps (240 MiB)
 *   vmm_kind release  the same 10 steps, each handle released after its unmap: nothing held
 * With a second argument (kill), the program then ends by SIGKILL: its record is recovered from the
 * flight record.  Each prints `peak USED` and `end USED` (cuMemGetInfo's total - free) at its highest moment and
 * at its end.  Each call site is its own function, so each has its own stack.
 */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define VMM_PROG "vmm_kind"
#include "vmm_prog.h"
#include "cumemhist/blocks.h"

#define MIB (1ull << 20)

/* the library's allocator: a reservation of its own, the handle mapped whole */
__attribute__((noinline)) static CUdeviceptr lib_map(size_t n, CUmemGenericAllocationHandle h)
{
    CUdeviceptr a;
    ck(cuMemAddressReserve(&a, n, 0, 0, 0), "cuMemAddressReserve");
    ck(cuMemMap(a, n, 0, h, 0), "cuMemMap");
    return a;
}

__attribute__((noinline)) static CUdeviceptr alloc(size_t n)
{
    CUdeviceptr x;
    ck(cuMemAlloc(&x, n), "cuMemAlloc");
    return x;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    vmm_prog_setup();
    if (!strcmp(mode, "lib")) {
        for (int i = 0; i < 3; i++) lib_map(2 * MIB, make_handle(2 * MIB));
        alloc(4 * MIB);
        printf("peak %llu\n", used());
    } else if (!strcmp(mode, "late")) {
        CUmemGenericAllocationHandle h = make_handle(8 * MIB);
        CUdeviceptr a = lib_map(8 * MIB, h);
        ck(cuMemUnmap(a, 8 * MIB), "cuMemUnmap"); /* held, mapped nowhere, until its release */
        CUdeviceptr x = alloc(16 * MIB);
        printf("peak %llu\n", used());
        ck(cuMemFree(x), "cuMemFree");
        ck(cuMemRelease(h), "cuMemRelease");
    } else if (!strcmp(mode, "unmapped")) {
        CUmemGenericAllocationHandle h = make_handle(8 * MIB);
        CUdeviceptr x = alloc(16 * MIB);
        printf("peak %llu\n", used());
        ck(cuMemFree(x), "cuMemFree");
        ck(cuMemRelease(h), "cuMemRelease"); /* never mapped */
    } else if (!strcmp(mode, "phys")) {
        CUmemGenericAllocationHandle h = make_handle(64 * MIB);
        CUdeviceptr x = alloc(16 * MIB);
        printf("peak %llu\n", used());
        ck(cuMemFree(x), "cuMemFree");
        CUdeviceptr a;
        ck(cuMemAddressReserve(&a, 64 * MIB, 0, 0, 0), "cuMemAddressReserve");
        ck(cuMemMap(a, 32 * MIB, 0, h, 0), "cuMemMap");
        ck(cuMemUnmap(a, 32 * MIB), "cuMemUnmap");
        ck(cuMemRelease(h), "cuMemRelease");
    } else if (!strcmp(mode, "leak") || !strcmp(mode, "leak30") || !strcmp(mode, "release")) {
        int steps = !strcmp(mode, "leak30") ? 30 : 10;
        CUdeviceptr a;
        ck(cuMemAddressReserve(&a, 8 * MIB, 0, 0, 0), "cuMemAddressReserve");
        for (int i = 0; i < steps; i++) {
            CMH_MARK("step");
            CUmemGenericAllocationHandle h = make_handle(8 * MIB);
            ck(cuMemMap(a, 8 * MIB, 0, h, 0), "cuMemMap");
            ck(cuMemUnmap(a, 8 * MIB), "cuMemUnmap");
            if (!strcmp(mode, "release")) ck(cuMemRelease(h), "cuMemRelease");
        }
        printf("peak %llu\n", used());
    } else {
        fprintf(stderr, "usage: vmm_kind lib|late|unmapped|phys|leak|leak30|release\n");
        return 2;
    }
    printf("end %llu\n", used());
    if (argc > 2) {
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    return 0;
}
