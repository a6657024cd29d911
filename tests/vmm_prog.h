/*
 * vmm_prog.h - what the cuMemCreate test programs share (vmm_halves.c, vmm_phys.c): device 0's
 * primary context, a check that ends the program on a failed call, the device's used bytes as
 * cuMemGetInfo says them, and make_handle(), a handle of device 0's pinned memory.  make_handle
 * is one function, not inlined: its cuMemCreate is one site, the same in each program, and the
 * programs' own lines (the maps, unmaps, releases) stay theirs.  Define VMM_PROG, the program's
 * name for its error messages, before including it.
 */
#ifndef CMH_TESTS_VMM_PROG_H
#define CMH_TESTS_VMM_PROG_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ck(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, VMM_PROG ": %s failed (%d)\n", what, (int)r);
        exit(1);
    }
}

/* device 0's primary context, current */
static void vmm_prog_setup(void)
{
    CUdevice dev;
    CUcontext ctx;
    ck(cuInit(0), "cuInit");
    ck(cuDeviceGet(&dev, 0), "cuDeviceGet");
    ck(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    ck(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

/* the device's used bytes, total - free */
static unsigned long long used(void)
{
    size_t f, t;
    ck(cuMemGetInfo(&f, &t), "cuMemGetInfo");
    return (unsigned long long)(t - f);
}

__attribute__((noinline)) static CUmemGenericAllocationHandle make_handle(size_t n)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    CUmemGenericAllocationHandle h;
    ck(cuMemCreate(&h, n, &p, 0), "cuMemCreate");
    return h;
}

#endif
