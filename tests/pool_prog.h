/*
 * pool_prog.h - the set-up the stream-ordered pool test programs share (poolfrag.c, poolsegs.c,
 * poolids.c): device 0's primary context, a stream, and a private pool of device memory made
 * with cuMemPoolCreate.  Their allocations stay in each program, where their lines are the sites
 * the tests read.
 */
#ifndef CMH_TESTS_POOL_PROG_H
#define CMH_TESTS_POOL_PROG_H

#include <cuda.h>
#include <string.h>

/* A private pool's properties: pinned device memory on device 0. */
static inline void pool_prog_props(CUmemPoolProps *p)
{
    memset(p, 0, sizeof *p);
    p->allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->location.id = 0;
}

/* The first call that fails, returned as it failed (the program says which program it was). */
static inline CUresult pool_prog_setup(CUstream *st, CUmemoryPool *pool)
{
    CUdevice d;
    CUcontext c;
    CUresult r;
    if ((r = cuInit(0)) || (r = cuDeviceGet(&d, 0)) || (r = cuDevicePrimaryCtxRetain(&c, d)) || (r = cuCtxSetCurrent(c)) ||
        (r = cuStreamCreate(st, 0)))
        return r;
    CUmemPoolProps p;
    pool_prog_props(&p);
    return cuMemPoolCreate(pool, &p);
}

#endif
