/*
 * inflight.c - allocations in flight at the recorder's first cuMemGetInfo sample, made so on
 * every run: THREADS-1 threads each allocate MIB MiB and are held inside the driver (the fake's
 * fakecuda_on_alloc: the memory taken, the call not yet returned, so no hook has logged it)
 * until one more thread's allocation of MIB MiB has returned, and with it the recorder's sample
 * at the device's first allocation, which reads all THREADS * MIB in use while the trace holds
 * MIB.  A pause, then every block is freed.  TAKE MiB taken first through fakecuda_take (no hooked call:
 * real unrecorded memory, like FAKECUDA_CONTEXT's) must stay 'not recorded', the rest must not.
 * PEAK_MIB > 0: after the threads' phase, a single-threaded one: their blocks freed, then PEAK_MIB
 * allocated in one call, the peak, with no thread in the driver (the nearest sample is still the
 * first, where calls were in flight: none of them is the peak's).  OOM 1: before its first
 * allocation, while the others are held, the main thread asks for more than the device has
 * (an out-of-memory error, and a sample, taken with the held calls in flight: theirs).
 *   inflight [THREADS [MIB [TAKE_MIB [PEAK_MIB [OOM]]]]]      (defaults 3, 4, 0, 0, 0)
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop_prog.h"

static CUcontext g_ctx;
static size_t g_bytes;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_held, g_released;
static __thread int t_hold; /* this thread's allocation waits in the driver */

/* inside the fake driver's allocation: the held threads say so, then wait for the release */
static void on_alloc(CUdeviceptr p, size_t n)
{
    (void)p;
    (void)n;
    if (!t_hold) return;
    pthread_mutex_lock(&g_lock);
    g_held++;
    pthread_cond_broadcast(&g_cond);
    while (!g_released) pthread_cond_wait(&g_cond, &g_lock);
    pthread_mutex_unlock(&g_lock);
}

static void *held(void *arg)
{
    CUdeviceptr *p = arg;
    t_hold = 1;
    if (cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS || cuMemAlloc(p, g_bytes) != CUDA_SUCCESS) *p = 0;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 3;
    g_bytes = (size_t)(argc > 2 ? atoll(argv[2]) : 4) << 20;
    long long take = (argc > 3 ? atoll(argv[3]) : 0) << 20;
    size_t peak = (size_t)(argc > 4 ? atoll(argv[4]) : 0) << 20;
    int oom = argc > 5 && atoi(argv[5]);
    void (*hook)(void (*)(CUdeviceptr, size_t)) = (void (*)(void (*)(CUdeviceptr, size_t)))dlsym(RTLD_DEFAULT, "fakecuda_on_alloc");
    int (*take_fn)(int, long long) = (int (*)(int, long long))dlsym(RTLD_DEFAULT, "fakecuda_take");
    if (threads < 2 || threads > 64 || !g_bytes) {
        fprintf(stderr, "usage: inflight [THREADS (2..64) [MIB [TAKE_MIB [PEAK_MIB [OOM (0|1)]]]]]\n");
        return 2;
    }
    if (!hook || !take_fn) {
        fprintf(stderr, "inflight: needs the fake driver (tests/fakecuda)\n");
        return 2;
    }
    if (loop_context(&g_ctx)) return 2;
    if (take && take_fn(0, take) != 0) {
        fprintf(stderr, "inflight: the fake driver would not take %lld bytes\n", take);
        return 2;
    }
    hook(on_alloc);
    pthread_t t[64];
    CUdeviceptr p[64] = {0};
    for (int i = 1; i < threads; i++) pthread_create(&t[i], NULL, held, &p[i]);
    pthread_mutex_lock(&g_lock);
    while (g_held < threads - 1) pthread_cond_wait(&g_cond, &g_lock);
    pthread_mutex_unlock(&g_lock);
    /* an out-of-memory error now: the recorder samples with the held calls in flight */
    CUdeviceptr big = 0;
    if (oom && cuMemAlloc(&big, (size_t)1 << 50) != CUDA_ERROR_OUT_OF_MEMORY) return 1;
    /* every other allocation is in the driver and unlogged: this one is the first logged, and
     * the recorder samples cuMemGetInfo right after it */
    if (cuMemAlloc(&p[0], g_bytes) != CUDA_SUCCESS) return 1;
    pthread_mutex_lock(&g_lock);
    g_released = 1;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
    for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
    CUdeviceptr top = 0;
    if (peak) { /* one thread from here: the threads' blocks freed, then the peak in one call */
        for (int i = 1; i < threads; i++)
            if (!p[i] || cuMemFree(p[i]) != CUDA_SUCCESS) return 1;
        for (int i = 1; i < threads; i++) p[i] = 0;
        if (cuMemAlloc(&top, peak) != CUDA_SUCCESS) return 1;
    }
    /* the peak is now: its nearest cuMemGetInfo must be the one at the first allocation, not
     * the one at the end (a pause, never a figure the test reads) */
    usleep(300000);
    for (int i = 0; i < threads; i++)
        if ((i == 0 || !peak) && (!p[i] || cuMemFree(p[i]) != CUDA_SUCCESS)) return 1;
    if (top && cuMemFree(top) != CUDA_SUCCESS) return 1;
    printf("inflight: %d x %zu MiB at once, %lld MiB taken unhooked, %zu MiB peak alone%s\n", threads, g_bytes >> 20, take >> 20,
           peak >> 20, oom ? ", an out-of-memory error among them" : "");
    return 0;
}
