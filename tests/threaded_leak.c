/*
 * threaded_leak.c - four worker threads allocate and free 64 KiB per iteration from one line,
 * in steps of 10 iterations that all threads finish before the next begins (as data-parallel
 * workers do); with "leak", thread 0 keeps one buffer per step (the leak), otherwise each thread
 * keeps only its first 5 (a warm-up cache that then holds steady).  Within a step the threads
 * interleave as the scheduler likes: the leak verdict must be the same on every run.  With
 * "free", no steps: each thread runs through as fast as it can, and a thread may be done before
 * another starts.
 *   threaded_leak leak|steady [ITERATIONS] [free]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

#define THREADS 4
#define MAXIT 4096

static CUcontext g_ctx;
static pthread_barrier_t g_step;
static int g_leak, g_iters = 300, g_free;
static CUdeviceptr g_kept[THREADS][MAXIT];

__attribute__((noinline)) static CUdeviceptr step_buffer(void)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, 64 << 10) != CUDA_SUCCESS) {
        fprintf(stderr, "threaded_leak: cuMemAlloc failed\n");
        exit(1);
    }
    return p;
}

static void *worker(void *arg)
{
    int t = (int)(long)arg, kept = 0;
    char name[16];
    snprintf(name, sizeof name, "worker %d", t); /* what reports call the thread, beside its number */
    pthread_setname_np(pthread_self(), name);
    cuCtxSetCurrent(g_ctx);
    for (int i = 0; i < g_iters; i++) {
        CUdeviceptr p = step_buffer();
        int keep = g_leak ? t == 0 && i % 10 == 0 : i < 5;
        if (keep) g_kept[t][kept++] = p;
        else cuMemFree(p);
        if (!g_free && i % 10 == 9) pthread_barrier_wait(&g_step);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    g_leak = argc > 1 && !strcmp(argv[1], "leak");
    if (argc > 2) g_iters = atoi(argv[2]);
    g_free = argc > 3 && !strcmp(argv[3], "free");
    if (g_iters < 10 || g_iters > MAXIT) g_iters = 300;
    g_iters -= g_iters % 10; /* whole steps: every thread meets every barrier */
    pthread_barrier_init(&g_step, NULL, THREADS);
    if (loop_context(&g_ctx)) return 2;
    loop_threads(THREADS, worker);
    return 0;
}
