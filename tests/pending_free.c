/*
 * pending_free.c - an allocator above the driver with a block freed while stream work still uses
 * it, for owners_test.sh: one 20 MiB segment holding a 4 MiB block in use and a 6 MiB block the
 * program freed (free_requested, its completion never reported), 10 MiB never handed out.  peak
 * and leaks count the 6 MiB as no longer live; owners must too, and not call it cached.
 */
#include <cuda.h>
#include <stdio.h>

#include "cumemhist/blocks.h"

#define MIB (1ull << 20)

int main(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr seg;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (cuMemAlloc(&seg, 20 * MIB) != CUDA_SUCCESS) return 2;
    CMH_SEGMENT_MANAGED(seg);
    CMH_BLOCK_ALLOC(seg, 4 * MIB, 4 * MIB, 0);
    CMH_BLOCK_ALLOC(seg + 4 * MIB, 6 * MIB, 6 * MIB, 0);
    CMH_BLOCK_FREE_REQUESTED(seg + 4 * MIB); /* its stream work still runs at the end */
    printf("pending_free: 4 MiB in use, 6 MiB freed with work pending, in a 20 MiB segment\n");
    return 0;
}
