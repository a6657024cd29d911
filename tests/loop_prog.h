/*
 * loop_prog.h - what the test programs run under the recorder share (after_loop.c, stops_leak.c,
 * each_leaks.c, threaded_leak.c, unhooked.c, ...): device 0's primary context made current,
 * device memory taken or the program ended, a driver call checked (CK), and cmh_mark("step N") at each step's start when
 * asked for.  They run under the preloaded recorder without linking it, so cmh_mark is found
 * through dlsym (the including file defines _GNU_SOURCE first, for RTLD_DEFAULT and
 * program_invocation_short_name).  Not recorder_util.h: that one is the CUnit suites', which
 * link the recorder.
 */
#ifndef CMH_LOOP_PROG_H
#define CMH_LOOP_PROG_H

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*loop_mark_fn)(const char *);

/* cmh_mark when marks are asked for (on) and the recorder is preloaded, else NULL. */
static inline loop_mark_fn loop_marks(int on) { return on ? (loop_mark_fn)dlsym(RTLD_DEFAULT, "cmh_mark") : NULL; }

/* Device 0's primary context made current, and given in *ctx where ctx is set (for the threads
 * that make it theirs): 0, else 2 (the driver is not usable). */
static inline int loop_context(CUcontext *ctx)
{
    CUdevice dev;
    CUcontext c;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(c) != CUDA_SUCCESS)
        return 2;
    if (ctx) *ctx = c;
    return 0;
}

/* x, a driver call, returned CUDA_SUCCESS; else the program ends (exit 1) naming the call, its
 * line and the driver's code. */
#define CK(x)                                                                                        \
    do {                                                                                             \
        CUresult r_ = (x);                                                                           \
        if (r_ != CUDA_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r_);                   \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

/* Device 0's primary context made current, or the program ends (exit 1). */
static inline void loop_device0(void)
{
    if (loop_context(NULL)) {
        fprintf(stderr, "%s: device 0's primary context could not be made current\n", program_invocation_short_name);
        exit(1);
    }
}

/* n bytes of device memory; a failure ends the program (exit 1).  Never inlined: the recorded
 * stacks have this frame on top and their callers under it, one site each. */
__attribute__((noinline, unused)) static CUdeviceptr loop_grab(size_t n)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) {
        fprintf(stderr, "%s: cuMemAlloc failed (%zu bytes)\n", program_invocation_short_name, n);
        exit(1);
    }
    return p;
}

/* n threads (at most 64) each running fn with its number (0 .. n-1), all joined. */
static inline void loop_threads(int n, void *(*fn)(void *))
{
    pthread_t th[64];
    if (n > 64) n = 64;
    for (long t = 0; t < n; t++) pthread_create(&th[t], NULL, fn, (void *)t);
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
}

/* Step s begins: "step s" marked, when mark is set. */
static inline void loop_step(loop_mark_fn mark, int s)
{
    char name[32];
    snprintf(name, sizeof name, "step %d", s);
    if (mark) mark(name);
}

#endif
