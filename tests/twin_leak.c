/*
 * twin_leak.c - three worker threads run one loop of one allocation an iteration, from one line
 * (a stranger's Python job of ctypes workers, as threads of C): each makes 1 MiB a step and frees
 * it, but worker 1, which keeps its blocks (a leak, 1 MiB a step).  No step marks.  How the
 * threads take turns is the argument, so that a test sees each order the scheduler may give:
 * "seq" one after another (each thread's loop a third of the record), "turns" one step each in
 * turn, "free" as the scheduler likes.  tests/twin_leak_test.sh.
 * "cache": as "free", but worker 1 first makes its STEPS blocks back to back from a call of its own
 * (a cache filled in one go, of the loop's size), then runs the loop freeing each as the others.
 * "only": worker 1 fills that cache and does nothing else (the other two run the loop).
 *   twin_leak [seq|turns|free|cache|only [STEPS]]   (default free 30)
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

#define THREADS 3

static CUcontext g_ctx;
static int g_steps = 30, g_turns;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static long g_turn; /* the worker whose step comes next ("turns") */
static int g_cache, g_only;

/* worker 1's cache ("cache"): n blocks of the loop's size, from a call no loop makes */
__attribute__((noinline)) static void fill_cache(int n)
{
    for (int i = 0; i < n; i++) {
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) exit(1);
    }
}

static void *worker(void *arg)
{
    long me = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "w%ld", me);
    pthread_setname_np(pthread_self(), name);
    cuCtxSetCurrent(g_ctx);
    if ((g_cache || g_only) && me == 1) fill_cache(g_steps);
    if (g_only && me == 1) return NULL;
    for (int s = 0; s < g_steps; s++) {
        if (g_turns) {
            pthread_mutex_lock(&g_lock);
            while (g_turn != me) pthread_cond_wait(&g_cond, &g_lock);
        }
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) exit(1); /* the one line every worker runs */
        if (me != 1 || g_cache) cuMemFree(p);
        if (g_turns) {
            g_turn = (g_turn + 1) % THREADS;
            pthread_cond_broadcast(&g_cond);
            pthread_mutex_unlock(&g_lock);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "free";
    if (argc > 2) g_steps = atoi(argv[2]);
    if (g_steps < 1) g_steps = 30;
    g_turns = !strcmp(mode, "turns");
    g_cache = !strcmp(mode, "cache");
    g_only = !strcmp(mode, "only");
    if (loop_context(&g_ctx)) return 2;
    if (!strcmp(mode, "seq")) { /* each worker's whole loop before the next one starts */
        for (long t = 0; t < THREADS; t++) {
            pthread_t th;
            if (pthread_create(&th, NULL, worker, (void *)t)) return 1;
            pthread_join(th, NULL);
        }
        return 0;
    }
    loop_threads(THREADS, worker);
    return 0;
}
