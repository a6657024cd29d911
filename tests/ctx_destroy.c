/*
 * ctx_destroy.c - a correct program that destroys its context before it exits, with 1 MiB it
 * never freed (the driver frees it with the context): the recorder's exit dump must not touch
 * the dead context (seen: a SIGSEGV, in the fake driver, from a use of the freed handle).
 */
#include <cuda.h>

#undef cuCtxCreate
CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev); /* the three-argument form */

int main(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuCtxCreate_v2(&c, 0, d)) return 2;
    if (cuMemAlloc(&p, 1 << 20) || cuMemFree(p) || cuMemAlloc(&p, 1 << 20)) return 3;
    return cuCtxDestroy(c) ? 4 : 0;
}
