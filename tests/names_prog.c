/*
 * names_prog.c - what tests/names_test.sh records: the names reports give owners, packages and
 * threads.
 *   names_prog sites   64 MiB of weights (one line), 16 MiB of buffers from one helper called
 *                      from two lines, a 32 MiB workspace from "libcublasLt.so.12"
 *                      (names_lib.c), then a request the device cannot hold (set
 *                      FAKECUDA_CAPACITY): an OOM, and exit 1 with everything still held
 *   names_prog threads N   three threads named "loader-0".."loader-2" (pthread_setname_np
 *                      before their first allocation) make N allocate/free pairs each, then the
 *                      process waits (up to 30 s) for its flight record's first checkpoint
 *                      ($CUMEMHIST_OUTPUT.flight.ckpt1.cmh; the helper thread then drops the
 *                      first generation, where the threads' names were recorded), makes 1000
 *                      pairs of its own, pauses 0.5 s and dies of SIGKILL
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop_prog.h"

int cublasLtCreate(CUdeviceptr *workspace, size_t bytes);

/* each its own site: the driver called from this very function */
__attribute__((noinline)) static CUdeviceptr weights(void)
{
    CUdeviceptr p = 0;
    return cuMemAlloc(&p, 64u << 20) == CUDA_SUCCESS ? p : 0; /* L:weights */
}
__attribute__((noinline)) static CUdeviceptr buffer(size_t n)
{
    CUdeviceptr p = 0;
    return cuMemAlloc(&p, n) == CUDA_SUCCESS ? p : 0; /* L:buffer */
}

static CUcontext g_ctx;
static long g_pairs;

static void *loader(void *arg)
{
    char name[16];
    snprintf(name, sizeof name, "loader-%d", (int)(long)arg);
    pthread_setname_np(pthread_self(), name);
    cuCtxSetCurrent(g_ctx);
    for (long k = 0; k < g_pairs; k++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS) return NULL;
        cuMemFree(p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || loop_context(&g_ctx)) return 2;
    if (!strcmp(argv[1], "sites")) {
        CUdeviceptr w = weights();
        CUdeviceptr a = buffer(8u << 20); /* L:first */
        CUdeviceptr b = buffer(8u << 20); /* L:second */
        CUdeviceptr ws;
        if (cublasLtCreate(&ws, 32u << 20)) return 3;
        CUdeviceptr big;
        CUresult r = cuMemAlloc(&big, (size_t)64 << 30);
        printf("held %llx %llx %llx %llx; the big request: %d\n", (unsigned long long)w, (unsigned long long)a,
               (unsigned long long)b, (unsigned long long)ws, (int)r);
        return r == CUDA_SUCCESS ? 0 : 1;
    }
    if (!strcmp(argv[1], "threads") && argc > 2) {
        g_pairs = atol(argv[2]);
        pthread_t t[3];
        for (long i = 0; i < 3; i++) pthread_create(&t[i], NULL, loader, (void *)i);
        for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
        const char *out = getenv("CUMEMHIST_OUTPUT");
        char ck[4200];
        snprintf(ck, sizeof ck, "%s.flight.ckpt1.cmh", out ? out : "");
        struct timespec tick = {0, 10000000};
        for (int i = 0; i < 3000 && out && access(ck, F_OK); i++) nanosleep(&tick, NULL);
        /* the helper drops the first generation once the checkpoint is in (it waits for no more
         * than the appends in progress): the main thread's own entries meanwhile, then a pause
         * of some of the helper's ticks (100 ms each) */
        for (int i = 0; i < 1000; i++) {
            CUdeviceptr p;
            if (cuMemAlloc(&p, 4096) == CUDA_SUCCESS) cuMemFree(p);
        }
        struct timespec pause = {0, 500000000};
        nanosleep(&pause, NULL);
        raise(SIGKILL);
    }
    return 2;
}
