/*
 * server_leak.c - programs with no step structure: a server's threads serving requests at
 * irregular times (no marks, no loop of fixed shape), for leaks' growth without steps
 * (docs/DEFINITIONS.md "Growth without steps", tests/server_leak_test.sh).
 *   server_leak server [REQUESTS]   4 threads serving 4 x REQUESTS requests (default 160 each) at
 *                                   irregular times (1-16 ms apart); a request makes its buffer and 1-3
 *                                   scratch blocks of varying sizes, frees the scratch, and frees
 *                                   its buffer but every tenth (kept: the leak)
 *   server_leak cache [REQUESTS]    the same, but the kept buffers go into a cache of 20 that,
 *                                   once full, frees its oldest for each new one: it fills, then
 *                                   holds its level (no leak)
 *   server_leak oom [REQUESTS]      server, then a 96 MiB request (on a device the caller sizes
 *                                   with FAKECUDA_CAPACITY: it fails)
 *   server_leak bursts              two bursts 1.2 s apart, each of 40 buffers kept, nothing
 *                                   between (no trend to see)
 *   server_leak short               server with 40 requests a thread, 0-2 ms apart (a record
 *                                   too short to judge over time)
 */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1u << 20)
#define THREADS 4
#define CACHE 20

static int requests = 160, use_cache, max_gap_us = 16000;
static CUcontext ctx;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUdeviceptr cache[CACHE];
static unsigned ncache, oldest;
static atomic_int served;

static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* scratch for one request: made and freed within it */
static __attribute__((noinline)) CUdeviceptr scratch(size_t size)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, size)) return 0;
    return p;
}

/* a cache of kept buffers: full, it frees its oldest for each new one */
static __attribute__((noinline)) void remember(CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    if (ncache < CACHE) cache[ncache++] = p;
    else {
        cuMemFree(cache[oldest]);
        cache[oldest] = p;
        oldest = (oldest + 1) % CACHE;
    }
    pthread_mutex_unlock(&lock);
}

static __attribute__((noinline)) int serve(uint32_t *seed, int i)
{
    CUdeviceptr buf = 0, tmp[3];
    if (cuMemAlloc(&buf, MIB)) return 1; /* the request's buffer */
    unsigned nt = 1 + next_rand(seed) % 3;
    for (unsigned k = 0; k < nt; k++) tmp[k] = scratch((size_t)(1 + next_rand(seed) % 8) * 64 * 1024);
    for (unsigned k = 0; k < nt; k++)
        if (tmp[k]) cuMemFree(tmp[k]);
    if (i % 10 == 9) { /* one buffer in ten kept */
        if (use_cache) remember(buf);
        return 0; /* (server: kept for good, the leak) */
    }
    cuMemFree(buf);
    return 0;
}

static void *worker(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 7;
    cuCtxSetCurrent(ctx);
    /* the requests are the server's, taken by whichever thread is free: the threads serve to
     * the end together (none winds down early) */
    for (int i; (i = atomic_fetch_add(&served, 1)) < requests * THREADS;) {
        if (serve(&seed, i)) return (void *)1;
        usleep((useconds_t)(max_gap_us > 1000 ? 1000 + next_rand(&seed) % (uint32_t)(max_gap_us - 1000) : next_rand(&seed) % 2000));
    }
    return NULL;
}

static __attribute__((noinline)) void burst(void)
{
    for (int i = 0; i < 40; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, MIB)) exit(2);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "server";
    if (argc > 2) requests = atoi(argv[2]);
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 1;
    if (!strcmp(mode, "bursts")) {
        burst();
        usleep(1200000);
        burst();
        return 0;
    }
    use_cache = !strcmp(mode, "cache");
    if (!strcmp(mode, "short")) requests = argc > 2 ? requests : 40, max_gap_us = 0;
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(t + 1))) return 1;
    int bad = 0;
    for (int t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad |= r != NULL;
    }
    if (bad) return 2;
    if (!strcmp(mode, "oom")) {
        CUdeviceptr big;
        if (cuMemAlloc(&big, 96u * MIB) == CUDA_SUCCESS) return 3; /* the device was to be too small */
        return 0;
    }
    return 0;
}
