/* holes_prog.c - a plain C program (no PyTorch) whose 1 GiB request the driver refuses with 4 GiB
 * free, in 512 MiB holes between live allocations (FAKECUDA_CAPACITY=8G): oom's "refused with
 * room" verdict on a record with no PyTorch in it (oomadvice in devices_test.sh). */
#include <cuda.h>
#include <stdio.h>

int main(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr p[64], big;
    int n = 0;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 1;
    size_t free_b, total;
    if (cuMemGetInfo(&free_b, &total)) return 1;
    while (n < 64 && (size_t)(n + 1) * ((size_t)512 << 20) <= free_b && cuMemAlloc(&p[n], (size_t)512 << 20) == CUDA_SUCCESS) n++;
    for (int i = 0; i < n; i += 2) cuMemFree(p[i]);
    CUresult r = cuMemAlloc(&big, (size_t)1 << 30);
    printf("%d blocks of 512 MiB, every other freed; 1 GiB: %d\n", n, (int)r);
    return r == CUDA_SUCCESS ? 2 : 0;
}
