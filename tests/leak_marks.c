/*
 * leak_marks.c - leaks the tool must find whatever marks and threads surround them, for
 * leak_marks_test.sh:
 *   leak_marks marks N [MARK]  N iterations each keeping 1 MiB (keep()) beside an 8 MiB
 *                              temporary; MARK ("step 0") marked once before the loop
 *   leak_marks sparse N        the same with a "step I" mark every 10th iteration
 *   leak_marks shared          64 MiB weights made once by main through work_buf(), then 4 threads
 *                              of 20 iterations each taking a temporary through work_buf(); thread
 *                              2 also keeps 256 KiB an iteration through work_buf()
 *   leak_marks own             the same, thread 2 keeping its 256 KiB through cache_entry()
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemhist/blocks.h"

#define MIB (1u << 20)

static CUcontext ctx;
static int shared;
static volatile int kept, bufs, entries; /* (each helper its own body: none folded into another) */

__attribute__((noinline)) static CUdeviceptr keep(size_t n)
{
    CUdeviceptr p = 0;
    kept++;
    cuMemAlloc(&p, n);
    return p;
}

__attribute__((noinline)) static CUdeviceptr work_buf(size_t n)
{
    CUdeviceptr p = 0;
    bufs++;
    cuMemAlloc(&p, n);
    return p;
}

__attribute__((noinline)) static CUdeviceptr cache_entry(size_t n)
{
    CUdeviceptr p = 0;
    entries++;
    cuMemAlloc(&p, n);
    return p;
}

static void *worker(void *a)
{
    int id = (int)(long)a;
    unsigned seed = (unsigned)id * 7919u + (unsigned)getpid();
    cuCtxSetCurrent(ctx);
    for (int i = 0; i < 20; i++) {
        CUdeviceptr t = work_buf((size_t)(id + 1) * MIB);
        if (id == 2) {
            if (shared) work_buf(256u << 10); /* kept */
            else cache_entry(256u << 10);     /* kept */
        }
        usleep(1000 + (unsigned)rand_r(&seed) % 2000);
        cuMemFree(t);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    CUdevice d;
    if (argc < 2 || cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx)) return 2;
    if (!strcmp(argv[1], "marks") || !strcmp(argv[1], "sparse")) {
        int n = argc > 2 ? atoi(argv[2]) : 12, sparse = !strcmp(argv[1], "sparse");
        if (!sparse && argc > 3) CMH_MARK(argv[3]);
        for (int i = 0; i < n; i++) {
            if (sparse && i % 10 == 0) {
                char m[32];
                snprintf(m, sizeof m, "step %d", i);
                CMH_MARK(m);
            }
            keep(MIB);
            CUdeviceptr t = 0;
            cuMemAlloc(&t, 8 * MIB);
            cuMemFree(t);
        }
        return 0;
    }
    shared = !strcmp(argv[1], "shared");
    if (!shared && strcmp(argv[1], "own")) return 2;
    work_buf(64 * MIB); /* weights, made once before the threads */
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return 0;
}
