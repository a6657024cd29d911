/*
 * retry_lines.c - a helper that catches cuMemAlloc's out-of-memory error, gives its cache back and
 * asks for the same size again, written two ways, for tests/retrylines_test.sh (run it on a 1 GiB
 * device: FAKECUDA_CAPACITY=1G): `retry_lines lines` asks again from a second line of the helper,
 * `retry_lines loop` from the one call in a loop.  Six 100 MiB buffers are kept as the cache
 * (600 MiB); 700 MiB then fails, the cache is freed, and the second try succeeds (a retry: main
 * never sees the error); then main's own cuMemAlloc of 900 MiB fails (the one OOM the program
 * sees).  The two ways behave alike, and must be counted alike.  Exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#define MIB (1ull << 20)

static CUdeviceptr g_cache[8];
static int g_ncache;

static void give_back(void)
{
    while (g_ncache) cuMemFree(g_cache[--g_ncache]);
}

/* the retry on a line of its own */
__attribute__((noinline)) static CUresult alloc_lines(CUdeviceptr *p, size_t n)
{
    CUresult r = cuMemAlloc(p, n);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        give_back();
        r = cuMemAlloc(p, n);
    }
    return r;
}

/* the retry inside a loop: one call */
__attribute__((noinline)) static CUresult alloc_loop(CUdeviceptr *p, size_t n)
{
    CUresult r = CUDA_SUCCESS;
    for (int t = 0; t < 2; t++) {
        r = cuMemAlloc(p, n);
        if (r != CUDA_ERROR_OUT_OF_MEMORY) break;
        give_back();
    }
    return r;
}

int main(int argc, char **argv)
{
    int loop = argc > 1 && !strcmp(argv[1], "loop");
    CUresult (*alloc)(CUdeviceptr *, size_t) = loop ? alloc_loop : alloc_lines;
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    for (int i = 0; i < 6; i++)
        if (alloc(&g_cache[g_ncache++], 100 * MIB) != CUDA_SUCCESS) return 2;
    CUdeviceptr big, huge;
    CUresult r1 = alloc(&big, 700 * MIB);
    CUresult r2 = cuMemAlloc(&huge, 900 * MIB);
    printf("retry_lines %s: 700 MiB: error %d, then 900 MiB: error %d\n", loop ? "loop" : "lines", (int)r1, (int)r2);
    return r1 == CUDA_SUCCESS && r2 == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}
