/*
 * ringleak2.c - ringleak1.c's leak in a worker thread, for ringleak_test.sh, recorded with a
 * short history (--max-entries 50): the main thread allocates 64 MiB of weights, a worker runs 20
 * steps of six activations freed and 2 MiB kept by log_metrics each step.  The record names two
 * recording threads, and the first steps' kept blocks fell out of the history, so they have no
 * thread: leaks said "made by recording thread 2 ... and threads not recorded" of a program with
 * no thread it did not record.  Exits 0.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>

#define MIB (1ull << 20)

static CUdeviceptr g_leak[64];
static CUcontext g_ctx;

__attribute__((noinline)) static int log_metrics(int s) { return cuMemAlloc(&g_leak[s], 2 * MIB) != CUDA_SUCCESS; }

__attribute__((noinline)) static int step(int s)
{
    CUdeviceptr a[6];
    for (int i = 0; i < 6; i++)
        if (cuMemAlloc(&a[i], (size_t)(i + 1) * MIB) != CUDA_SUCCESS) return 1;
    if (log_metrics(s)) return 1;
    for (int i = 5; i >= 0; i--) cuMemFree(a[i]);
    return 0;
}

static void *worker(void *arg)
{
    (void)arg;
    if (cuCtxSetCurrent(g_ctx)) return (void *)1;
    for (int s = 0; s < 20; s++)
        if (step(s)) return (void *)1;
    return NULL;
}

int main(void)
{
    CUdevice d;
    CUdeviceptr w;
    pthread_t t;
    void *rc = NULL;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&g_ctx, d) || cuCtxSetCurrent(g_ctx)) return 2;
    if (cuMemAlloc(&w, 64 * MIB) != CUDA_SUCCESS) return 2;
    if (pthread_create(&t, NULL, worker, NULL) || pthread_join(t, &rc) || rc) return 2;
    printf("ringleak2: ran\n");
    return 0;
}
