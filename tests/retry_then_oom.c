/*
 * retry_then_oom.c - a caching allocator's two kinds of out-of-memory error in one run, for
 * whatif_test.sh and live_test.sh (run it with FAKECUDA_CAPACITY=100M): two 20 MiB segments
 * of 8 MiB tensors after a 50 MiB one, the device then 10 MiB free; one 20 MiB segment emptied
 * into the cache; then
 * 24 MiB asked for (more than the cached segment holds): its new segment fails, the allocator frees its cache and asks again, and that
 * succeeds (a retry: memory_summary's "cudaMalloc retries", not an OOM the program sees); then
 * 40 MiB with nothing left to free: failed, retried, failed again (the one OOM the program sees).
 * With an argument PATH it then waits (a minute at most) until PATH exists before it exits, so a
 * reader can look at it live.
 * Exits 1 (the program's OOM).
 */
#include <stdio.h>
#include <unistd.h>

#include "cachealloc.h"

#define MIB (1ull << 20)

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    CUdeviceptr t[4], rest;
    if (!(rest = ca_malloc(50 * MIB, NULL, NULL))) return 2;
    for (int i = 0; i < 4; i++) /* (the cached segment last: beside the device's free end once given back) */
        if (!(t[i] = ca_malloc(8 * MIB, NULL, NULL))) return 2;
    ca_free(t[2]); /* the second segment is now all cache */
    ca_free(t[3]);
    CUresult err = CUDA_SUCCESS;
    CUdeviceptr mid = ca_malloc(24 * MIB, NULL, &err); /* fails once, then fits where the cache was */
    CUdeviceptr big = ca_malloc(40 * MIB, NULL, &err);  /* nothing left to free: the program's OOM */
    printf("retry_then_oom: 24 MiB %s after a retry; 40 MiB: %s\n", mid ? "allocated" : "failed",
           big ? "allocated" : err == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "another error");
    fflush(stdout);
    for (int i = 0; argc > 1 && i < 600 && access(argv[1], F_OK) != 0; i++) usleep(100000);
    return mid && !big ? 1 : 2;
}
