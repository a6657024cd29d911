/*
 * pooloom.c - an out-of-memory error the program sees beside a stream-ordered pool's cache, for
 * oomrule_test.sh (run it on an 8 GiB device: FAKECUDA_CAPACITY=8G): the default pool, told to
 * keep everything, gets 6 GiB that is freed back into it; a plain cuMemAlloc of 4 GiB then fails
 * (the program sees CUDA_ERROR_OUT_OF_MEMORY); the program trims the pool (6 GiB given back to
 * the device) and asks for 4 GiB again from another line, which succeeds.  Exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <unistd.h>

#define GIB (1ull << 30)

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    CUstream st;
    CUmemoryPool pool;
    CUdeviceptr p, mid;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (cuStreamCreate(&st, 0) || cuDeviceGetDefaultMemPool(&pool, d)) return 2;
    cuuint64_t keep = ~0ull;
    if (cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep)) return 2;
    if (cuMemAllocAsync(&p, 6 * GIB, st) != CUDA_SUCCESS) return 2;
    cuMemFreeAsync(p, st);
    cuStreamSynchronize(st);
    CUresult first = cuMemAlloc(&mid, 4 * GIB);
    cuMemPoolTrimTo(pool, 0);
    CUresult second = cuMemAlloc(&mid, 4 * GIB);
    printf("pooloom: 4 GiB: error %d, then after the trim: error %d\n", (int)first, (int)second);
    fflush(stdout);
    for (int i = 0; argc > 1 && i < 600 && access(argv[1], F_OK) != 0; i++) usleep(100000);
    if (second == CUDA_SUCCESS) cuMemFree(mid);
    cuStreamDestroy(st);
    return first == CUDA_ERROR_OUT_OF_MEMORY && second == CUDA_SUCCESS ? 0 : 1;
}
