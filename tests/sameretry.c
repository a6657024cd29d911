/*
 * sameretry.c - a tiny caching layer over the driver API that handles out-of-memory errors
 * itself, for oomrule_test.sh (run it on an 8 GiB device: FAKECUDA_CAPACITY=8G): when
 * cuMemAlloc fails it gives back every buffer it keeps cached and asks for the same size again
 * from the same call (the same call stack), as PyTorch's caching allocator does; the program
 * sees an error only when that fails too.  Three 2 GiB buffers, two of them freed into the cache;
 * 4 GiB then fails, the cache (4 GiB) is given back, and the same call succeeds (a retry, not an
 * OOM the program saw); 8 GiB fails with nothing left to give back, and fails again (the one
 * OOM the program sees).  Exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GIB (1ull << 30)

static struct {
    CUdeviceptr p;
    size_t size;
} g_cache[8];
static int g_ncache;

static void cache_release(void)
{
    while (g_ncache) cuMemFree(g_cache[--g_ncache].p);
}

static void cache_free(CUdeviceptr p, size_t size)
{
    g_cache[g_ncache].p = p;
    g_cache[g_ncache++].size = size;
}

__attribute__((noinline)) static CUresult cache_alloc(CUdeviceptr *p, size_t size)
{
    for (int i = 0; i < g_ncache; i++)
        if (g_cache[i].size == size) {
            *p = g_cache[i].p;
            g_cache[i] = g_cache[--g_ncache];
            return CUDA_SUCCESS;
        }
    /* one call site for both tries (tests/CMakeLists.txt builds this file unoptimized, so that the
     * compiler neither copies the call nor makes it a tail call, which would be other stacks) */
    CUresult r;
    for (int attempt = 0;; attempt++) {
        r = cuMemAlloc(p, size);
        if (r != CUDA_ERROR_OUT_OF_MEMORY || attempt) break;
        cache_release(); /* give back the cache, then ask again from this same call */
    }
    return r;
}

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr b[3], mid, huge;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    for (int i = 0; i < 3; i++)
        if (cache_alloc(&b[i], 2 * GIB) != CUDA_SUCCESS) return 2;
    cache_free(b[1], 2 * GIB);
    cache_free(b[2], 2 * GIB);
    CUresult r1 = cache_alloc(&mid, 4 * GIB);
    if (argc > 1 && !strcmp(argv[1], "once")) {
        printf("sameretry: 4 GiB: error %d (after a retry)\n", (int)r1);
        return r1 == CUDA_SUCCESS ? 0 : 1;
    }
    CUresult r2 = cache_alloc(&huge, 8 * GIB);
    printf("sameretry: 4 GiB: error %d (after a retry), 8 GiB: error %d\n", (int)r1, (int)r2);
    fflush(stdout);
    for (int i = 0; argc > 1 && i < 600 && access(argv[1], F_OK) != 0; i++) usleep(100000);
    return r1 == CUDA_SUCCESS && r2 == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}
