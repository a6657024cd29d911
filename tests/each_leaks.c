/*
 * each_leaks.c - three worker threads run the same training step, each keeping 256 KiB a step
 * (a leak in every thread, from one line), with no step marks: a step makes an activation and a
 * gradient and frees them, pausing between (as kernels would), so that the threads' allocations
 * interleave as the scheduler likes.  "lock": the threads finish each step together (a barrier,
 * as data-parallel workers do); "free": each runs through at its own pace.  "steady": each keeps
 * its first 3 blocks only (a warm-up cache), then holds steady.
 *   each_leaks [STEPS [lock|free [leak|steady [NAP_US]]]]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_prog.h"

#define THREADS 3

static CUcontext g_ctx;
static pthread_barrier_t g_step;
static int g_steps = 10, g_lock = 1, g_leak = 1, g_nap = 200;

__attribute__((noinline)) static CUdeviceptr activation(void) { return loop_grab(4 << 20); }
__attribute__((noinline)) static CUdeviceptr gradient(void) { return loop_grab(2 << 20); }
__attribute__((noinline)) static CUdeviceptr keep(void) { return loop_grab(256 << 10); }

static void *worker(void *arg)
{
    char name[16];
    snprintf(name, sizeof name, "worker %ld", (long)arg);
    pthread_setname_np(pthread_self(), name);
    cuCtxSetCurrent(g_ctx);
    for (int s = 0; s < g_steps; s++) {
        CUdeviceptr a = activation();
        if (g_nap) usleep((useconds_t)g_nap);
        CUdeviceptr g = gradient();
        if (g_nap) usleep((useconds_t)g_nap);
        CUdeviceptr k = keep();
        if (!g_leak && s >= 3) cuMemFree(k);
        cuMemFree(g);
        cuMemFree(a);
        if (g_lock) pthread_barrier_wait(&g_step);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) g_steps = atoi(argv[1]);
    if (g_steps < 1) g_steps = 10;
    g_lock = !(argc > 2 && !strcmp(argv[2], "free"));
    g_leak = !(argc > 3 && !strcmp(argv[3], "steady"));
    if (argc > 4) g_nap = atoi(argv[4]);
    pthread_barrier_init(&g_step, NULL, THREADS);
    if (loop_context(&g_ctx)) return 2;
    loop_threads(THREADS, worker);
    return 0;
}
