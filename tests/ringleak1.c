/*
 * ringleak1.c - a single-threaded training loop that leaks, for ringleak_test.sh, recorded with a
 * short history (--max-entries 50): 64 MiB of weights, then 20 steps of six activations freed
 * and 2 MiB kept by log_metrics each step.  The blocks allocated before the kept history have no
 * thread in the record, yet the program has one thread: leaks said "made by recording thread 1
 * ... and threads not recorded".  Exits 0.
 */
#include <cuda.h>
#include <stdio.h>

#define MIB (1ull << 20)

static CUdeviceptr g_leak[64];

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

int main(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr w;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (cuMemAlloc(&w, 64 * MIB) != CUDA_SUCCESS) return 2;
    for (int s = 0; s < 20; s++)
        if (step(s)) return 2;
    printf("ringleak1: ran\n");
    return 0;
}
