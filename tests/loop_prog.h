/*
 * loop_prog.h - what the training-loop programs (after_loop.c, stops_leak.c) share: device 0's
 * primary context made current, and cmh_mark("step N") at each step's start when asked for.
 * They run under the preloaded recorder without linking it, so cmh_mark is found through dlsym
 * (the including file defines _GNU_SOURCE first, for RTLD_DEFAULT).  Not recorder_util.h: that
 * one is the CUnit suites', which link the recorder.
 */
#ifndef CMH_LOOP_PROG_H
#define CMH_LOOP_PROG_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

typedef int (*loop_mark_fn)(const char *);

/* cmh_mark when marks are asked for (on) and the recorder is preloaded, else NULL. */
static inline loop_mark_fn loop_marks(int on) { return on ? (loop_mark_fn)dlsym(RTLD_DEFAULT, "cmh_mark") : NULL; }

/* Device 0's primary context made current: 0, else 2 (the driver is not usable). */
static inline int loop_context(void)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 2;
    return 0;
}

/* Step s begins: "step s" marked, when mark is set. */
static inline void loop_step(loop_mark_fn mark, int s)
{
    char name[32];
    snprintf(name, sizeof name, "step %d", s);
    if (mark) mark(name);
}

#endif
