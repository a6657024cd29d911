/*
 * asyncpool.c - an out-of-memory error of a stream-ordered pool's own request beside that pool's
 * cache, for oomrule_test.sh (FAKECUDA_CAPACITY=512M): the default pool, told to keep everything,
 * hands out 4 x 100 MiB by cuMemAllocAsync; two are freed back into it (200 MiB cached, in two
 * pieces); a 300 MiB cuMemAllocAsync from the same pool then fails; the program trims the pool and
 * asks again from another line (the fake device, its free memory now in two pieces of 200 and
 * 112 MiB, refuses that too).  Exits 0 when the first request failed so.  With an argument it stops
 * after the first (its OOM is then the last, the one frag and whatif describe).  (`oom` once said
 * "largest free gap 0 B ... no free gap was large enough" of the 200 MiB cache it cannot see into.)
 */
#include <cuda.h>
#include <stdio.h>

#define MIB (1ull << 20)

__attribute__((noinline)) static CUresult first_ask(CUdeviceptr *p, CUstream s) { return cuMemAllocAsync(p, 300 * MIB, s); }
__attribute__((noinline)) static CUresult after_trim(CUdeviceptr *p, CUstream s) { return cuMemAllocAsync(p, 300 * MIB, s); }

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    CUstream st;
    CUmemoryPool pool;
    CUdeviceptr p[4], big;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (cuStreamCreate(&st, 0) || cuDeviceGetDefaultMemPool(&pool, d)) return 2;
    cuuint64_t keep = ~0ull;
    if (cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep)) return 2;
    for (int i = 0; i < 4; i++)
        if (cuMemAllocAsync(&p[i], 100 * MIB, st) != CUDA_SUCCESS) return 2;
    cuMemFreeAsync(p[0], st);
    cuMemFreeAsync(p[1], st);
    cuStreamSynchronize(st);
    CUresult first = first_ask(&big, st), second = CUDA_ERROR_UNKNOWN;
    (void)argv;
    if (first == CUDA_ERROR_OUT_OF_MEMORY && argc < 2) { /* with an argument: no second ask */
        cuMemPoolTrimTo(pool, 0);
        second = after_trim(&big, st);
    }
    cuStreamSynchronize(st);
    printf("asyncpool: 300 MiB: error %d, then after the trim: error %d\n", (int)first, (int)second);
    return first == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}
