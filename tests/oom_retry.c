/*
 * oom_retry.c - a driver-API program that runs out of memory twice, for tests/oomstate_test.sh
 * (run it with FAKECUDA_CAPACITY=100M): six 16 MiB segments through a tiny caching layer (ask()),
 * two of them then kept in its cache; 32 MiB asked of the layer fails (out of memory), the layer
 * gives its cache back and asks for the same 32 MiB again from the same call, which succeeds (a
 * retry, memory_summary's "cudaMalloc retries": the same call stack asked again, the program saw
 * no error); then the program's own cuMemAlloc of 64 MiB, with nothing to give back, fails (the
 * one failure the program sees).  Exits 1 then.
 */
#include <cuda.h>
#include <stdio.h>

#define MIB (1ull << 20)

static CUdeviceptr g_cache[6];
static int g_ncache;

/* cuMemAlloc; on out-of-memory the cache given back and the same call made again (one call
 * site: tests/CMakeLists.txt builds this file unoptimized, so that the compiler neither copies
 * the call nor makes it a tail call, which the recorder would see as other call stacks) */
__attribute__((noinline)) static CUresult ask(CUdeviceptr *p, size_t size)
{
    CUresult r;
    for (int again = 0;; again++) {
        r = cuMemAlloc(p, size);
        if (r != CUDA_ERROR_OUT_OF_MEMORY || again) break;
        while (g_ncache) cuMemFree(g_cache[--g_ncache]);
    }
    return r;
}

int main(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr seg[6], big, huge;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    for (int i = 0; i < 6; i++)
        if (ask(&seg[i], 16 * MIB) != CUDA_SUCCESS) return 2;
    g_cache[g_ncache++] = seg[5]; /* done with: kept cached, as an allocator does */
    g_cache[g_ncache++] = seg[4];
    if (ask(&big, 32 * MIB) != CUDA_SUCCESS) return 2;
    if (cuMemAlloc(&huge, 64 * MIB) != CUDA_ERROR_OUT_OF_MEMORY) return 2;
    printf("oom_retry: 32 MiB failed, then succeeded after 32 MiB freed; 64 MiB: CUDA_ERROR_OUT_OF_MEMORY\n");
    return 1;
}
