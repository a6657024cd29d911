/*
 * ctx_gone.c - memory freed by the driver with its context, no cuMemFree of it:
 *   ctx_gone destroy: a created context makes 1 MiB (cuMemAlloc), 2 MiB (cuMemAllocManaged) and a
 *     pitch allocation, then cuCtxDestroy; a second context then makes 3 MiB and frees it.
 *   ctx_gone reset: the primary context (cuDevicePrimaryCtxRetain) makes 4 MiB, then
 *     cuDevicePrimaryCtxReset; it is made current again, and the driver says 100 MiB in use (run
 *     with FAKECUDA_CONTEXT=100M: its own; exit 5 if not).
 * Nothing is left allocated at the end (the driver's cuMemGetInfo says so too): a recorder that
 * missed the destroy or the reset reports the context's memory as still held (a leak).
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#undef cuCtxCreate
CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev); /* the three-argument form */

#define MIB (1u << 20)

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c, c2;
    CUdeviceptr p, q, m, x;
    size_t pitch;
    if (argc < 2 || cuInit(0) || cuDeviceGet(&d, 0)) return 2;
    if (!strcmp(argv[1], "destroy")) {
        if (cuCtxCreate_v2(&c, 0, d)) return 2;
        if (cuMemAlloc(&p, MIB) || cuMemAllocManaged(&m, 2 * MIB, CU_MEM_ATTACH_GLOBAL) || cuMemAllocPitch(&q, &pitch, 1000, 100, 4))
            return 3;
        if (cuCtxDestroy(c)) return 4;
        if (cuCtxCreate_v2(&c2, 0, d) || cuMemAlloc(&x, 3 * MIB) || cuMemFree(x)) return 5;
        return cuCtxDestroy(c2) ? 4 : 0;
    }
    if (!strcmp(argv[1], "reset")) {
        if (cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
        if (cuMemAlloc(&p, 4 * MIB)) return 3;
        if (cuDevicePrimaryCtxReset(d)) return 4;
        /* (nothing made after it: an allocation at the freed address would replace the record's
         * 4 MiB whether or not the reset was seen) */
        size_t f, t;
        if (cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuMemGetInfo(&f, &t) || t - f != 100 * MIB) return 5;
        return 0;
    }
    fprintf(stderr, "usage: ctx_gone destroy|reset\n");
    return 2;
}
