/*
 * retry2.c - a driver-API program that gets an out-of-memory error and handles it itself, for
 * oomrule_test.sh (run it on an 8 GiB device: FAKECUDA_CAPACITY=8G): 6 GiB allocated; 4 GiB
 * asked for fails (the program sees CUDA_ERROR_OUT_OF_MEMORY); it frees its 6 GiB buffer (a
 * live buffer of its own, no cache) and asks for 4 GiB again from another line, which succeeds.
 * No allocator above the driver asked again: the failure was returned to the program, so it is
 * an OOM the program saw, not memory_summary's cudaMalloc retry.  Exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <unistd.h>

#define GIB (1ull << 30)

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr big, mid;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (cuMemAlloc(&big, 6 * GIB) != CUDA_SUCCESS) return 2;
    CUresult first = cuMemAlloc(&mid, 4 * GIB);
    cuMemFree(big);
    CUresult second = cuMemAlloc(&mid, 4 * GIB);
    printf("retry2: 4 GiB: error %d, then after freeing 6 GiB: error %d\n", (int)first, (int)second);
    fflush(stdout);
    for (int i = 0; argc > 1 && i < 600 && access(argv[1], F_OK) != 0; i++) usleep(100000);
    if (second == CUDA_SUCCESS) cuMemFree(mid);
    return first == CUDA_ERROR_OUT_OF_MEMORY && second == CUDA_SUCCESS ? 0 : 1;
}
