/*
 * oom_facts.c - two OOMs whose advice must rest on the record's facts (oomfacts_test.sh).
 *
 * oom_facts frag (FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=56M): the program's own allocator carves
 * one 48 MiB cuMemAlloc into six 8 MiB slots (reported as blocks), frees every other one, then
 * asks the driver for 16 MiB, which has 8 free: the device is 56 MiB (48 reserved + 8 free, as
 * cuMemGetInfo says), whatever PyTorch's allocator would have reserved for the same requests
 * (three 20 MiB segments: 60 MiB, more than the device holds).
 *
 * oom_facts multi (FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=64M): device 0 maps a 16 MiB and an
 * 8 MiB cuMemCreate handle, unmaps the 8 MiB one and keeps it (physical 8 MiB above its ranges),
 * then allocates and frees 8 MiB each step; device 1 leaks 4 MiB a step until it runs out.  The
 * OOM is a leak's: spreading the work over the devices is no advice for it, and device 0 held
 * 32 MiB (physical), not its 24 MiB of ranges.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/blocks.h"
#include "loop_prog.h"

#define MIB (1ull << 20)

static CUdeviceptr seg;
static int used[6];

/* a slot of the 48 MiB segment for n <= 8 MiB; else the driver */
static CUdeviceptr pool_alloc(size_t n)
{
    if (n <= 8 * MIB)
        for (int i = 0; i < 6; i++)
            if (!used[i]) {
                used[i] = 1;
                CUdeviceptr p = seg + (CUdeviceptr)i * 8 * MIB;
                CMH_BLOCK_ALLOC(p, 8 * MIB, n, 0);
                return p;
            }
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc(&p, n);
    printf("cuMemAlloc(%llu MiB) -> %d\n", (unsigned long long)(n / MIB), (int)r);
    return r ? 0 : p;
}

static void pool_free(CUdeviceptr p)
{
    used[(p - seg) / (8 * MIB)] = 0;
    CMH_BLOCK_FREE_COMPLETED(p);
}

static void frag(void)
{
    loop_device0();
    CK(cuMemAlloc(&seg, 48 * MIB));
    CMH_SEGMENT_MANAGED(seg);
    CUdeviceptr b[6];
    for (int i = 0; i < 6; i++) b[i] = pool_alloc(8 * MIB);
    for (int i = 0; i < 6; i += 2) pool_free(b[i]);
    printf("big %s\n", pool_alloc(16 * MIB) ? "fits" : "out of memory");
}

__attribute__((noinline)) static CUresult leak(CUdeviceptr *p) { return cuMemAlloc(p, 4 * MIB); }

static void multi(void)
{
    CUcontext c0, c1;
    CUdevice d0, d1;
    CK(cuDeviceGet(&d0, 0));
    CK(cuDeviceGet(&d1, 1));
    CK(cuDevicePrimaryCtxRetain(&c1, d1));
    CK(cuDevicePrimaryCtxRetain(&c0, d0));
    CK(cuCtxSetCurrent(c0));
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, 32 * MIB, 0, 0, 0));
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    CUmemGenericAllocationHandle h1, h2;
    CK(cuMemCreate(&h1, 16 * MIB, &p, 0));
    CK(cuMemCreate(&h2, 8 * MIB, &p, 0));
    CK(cuMemMap(va, 16 * MIB, 0, h1, 0));
    CK(cuMemMap(va + 16 * MIB, 8 * MIB, 0, h2, 0));
    CK(cuMemUnmap(va + 16 * MIB, 8 * MIB)); /* h2 kept, mapped nowhere */
    for (int step = 0; step < 40; step++) {
        char m[32];
        snprintf(m, sizeof m, "step %d", step);
        CMH_MARK(m);
        CK(cuCtxSetCurrent(c0));
        CUdeviceptr t;
        CK(cuMemAlloc(&t, 8 * MIB));
        CK(cuMemFree(t));
        CK(cuCtxSetCurrent(c1));
        CUdeviceptr l;
        CUresult r = leak(&l);
        if (r) {
            printf("out of memory at step %d\n", step);
            break;
        }
    }
}

int main(int argc, char **argv)
{
    CK(cuInit(0));
    if (argc > 1 && !strcmp(argv[1], "frag")) frag();
    else if (argc > 1 && !strcmp(argv[1], "multi")) multi();
    else {
        fprintf(stderr, "usage: oom_facts frag|multi\n");
        return 2;
    }
    return 0;
}
