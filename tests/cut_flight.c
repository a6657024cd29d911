/*
 * cut_flight.c - a clean loop, then a death no code of it sees, for tests/cutflight_test.sh: 8
 * steps, each marked ("step N") and each allocating 1 MiB and freeing it (nothing held at the
 * end: a whole record passes `leaks --fail-on-leak`), then SIGKILL.  Its flight record's first
 * record is the first step's mark, no allocation: a copy cut just past it holds nothing live.
 */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cumemhist/blocks.h"

__attribute__((noinline)) static void step(int i)
{
    char name[32];
    snprintf(name, sizeof name, "step %d", i);
    CMH_MARK(name);
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) exit(2);
    if (cuMemFree(p) != CUDA_SUCCESS) exit(2);
}

int main(void)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    for (int i = 0; i < 8; i++) step(i);
    raise(SIGKILL);
    return 3;
}
