/*
 * paced_leak.c - a threaded job whose threads repeat loops of different periods, no step marks
 * (a stranger's Python job, as threads of C): main holds a model made first, then runs STEPS
 * steps of an activation made, a pause of MAIN_US and the activation freed; a "prefetch" thread
 * keeps one 2 MiB buffer every PREFETCH_US, N times (a leak, one allocation an iteration).  Every
 * allocation comes from one helper (loop_grab), as from a library's allocation function.  The
 * two threads' entries interleave as the pauses fall: a pattern across them is the scheduler's.
 *   paced_leak [STEPS [MAIN_US [N [PREFETCH_US]]]]   (default 20 20000 20 25000; PREFETCH_US 0:
 *   the N buffers made back to back, a cache filled in one go)
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop_prog.h"

static CUcontext g_ctx;
static int g_n = 20, g_prefetch_us = 25000;

/* each its own caller of loop_grab (the barrier keeps the call a call, not a jump to it) */
#define CALL_GRAB(n)                          \
    CUdeviceptr p = loop_grab(n);             \
    __asm__ volatile("" : : "r"(p) : "memory"); \
    return p
__attribute__((noinline)) static CUdeviceptr build_model(void) { CALL_GRAB(64 << 20); }
__attribute__((noinline)) static CUdeviceptr cache_one(void) { CALL_GRAB(2 << 20); }
__attribute__((noinline)) static CUdeviceptr activations(void) { CALL_GRAB(32 << 20); }

static void *prefetch(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "prefetch");
    cuCtxSetCurrent(g_ctx);
    for (int i = 0; i < g_n; i++) {
        cache_one(); /* kept: the leak */
        usleep((useconds_t)g_prefetch_us);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20, main_us = argc > 2 ? atoi(argv[2]) : 20000;
    if (argc > 3) g_n = atoi(argv[3]);
    if (argc > 4) g_prefetch_us = atoi(argv[4]);
    if (loop_context(&g_ctx)) return 2;
    build_model();
    pthread_t t;
    if (pthread_create(&t, NULL, prefetch, NULL)) return 1;
    for (int s = 0; s < steps; s++) {
        CUdeviceptr a = activations();
        usleep((useconds_t)main_us);
        cuMemFree(a);
    }
    pthread_join(t, NULL);
    return 0;
}
