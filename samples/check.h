/* check.h - the samples' one error check: a failed driver call prints its name and exits 1. */
#ifndef CMH_SAMPLES_CHECK_H
#define CMH_SAMPLES_CHECK_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        CUresult r_ = (call);                                                                                    \
        if (r_ != CUDA_SUCCESS) {                                                                                \
            const char *n_ = "?";                                                                                \
            cuGetErrorName(r_, &n_);                                                                             \
            fprintf(stderr, "%s failed: %s\n", #call, n_);                                                       \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

/* cuInit, device 0's primary context made current; returns the device */
static inline CUdevice sample_init(CUcontext *ctx)
{
    CUdevice dev;
    CUcontext c;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&c, dev));
    CHECK(cuCtxSetCurrent(c));
    if (ctx) *ctx = c;
    return dev;
}

#endif
