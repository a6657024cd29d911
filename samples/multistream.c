/*
 * multistream.c - several threads, each with its own stream and context current, allocating
 * and freeing at the same time with cuMemAlloc, cuMemAllocAsync and a shared pinned host
 * buffer: what data-loader threads and multi-stream training look like to the driver.  The
 * recorder must lose nothing; each thread's last allocation is kept, so the final snapshot
 * holds exactly THREADS live blocks of known sizes (printed at the end).
 *   cumemhist record -o ms.cmh -- ./multistream 8 2000 && cumemhist summary ms.cmh
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static CUcontext g_ctx;
static int g_iters;

typedef struct worker {
    int id;
    CUdeviceptr kept;
    size_t kept_size;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    CHECK(cuCtxSetCurrent(g_ctx));
    CUstream st;
    CHECK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    unsigned seed = (unsigned)w->id * 2654435761u + 1;
    CUdeviceptr live[8] = {0};
    for (int i = 0; i < g_iters; i++) {
        seed = seed * 1103515245u + 12345u;
        int slot = (int)(seed >> 16) % 8;
        size_t size = ((seed >> 8) % 64 + 1) * 4096;
        if (live[slot]) {
            if (slot & 1) CHECK(cuMemFreeAsync(live[slot], st));
            else CHECK(cuMemFree(live[slot]));
            live[slot] = 0;
        } else if (slot & 1) {
            CHECK(cuMemAllocAsync(&live[slot], size, st));
        } else {
            CHECK(cuMemAlloc(&live[slot], size));
        }
    }
    for (int s = 0; s < 8; s++)
        if (live[s]) {
            if (s & 1) CHECK(cuMemFreeAsync(live[s], st));
            else CHECK(cuMemFree(live[s]));
        }
    w->kept_size = (size_t)(w->id + 1) << 20;
    CHECK(cuMemAlloc(&w->kept, w->kept_size));
    CHECK(cuStreamSynchronize(st));
    CHECK(cuStreamDestroy(st));
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    g_iters = argc > 2 ? atoi(argv[2]) : 2000;
    if (threads < 1 || threads > 64) threads = 8;
    CUdevice dev;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&g_ctx, dev));
    pthread_t t[64];
    worker w[64];
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){i, 0, 0};
        pthread_create(&t[i], NULL, run, &w[i]);
    }
    size_t total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += w[i].kept_size;
    }
    printf("multistream: threads %d iterations %d kept %d blocks %zu bytes\n", threads, g_iters, threads, total);
    return 0;
}
