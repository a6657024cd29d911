/* pinned_prog.c - 6 MiB of pinned host memory (cuMemHostAlloc) and 64 MiB of device memory,
 * both held at exit: a record with device 0 and the pinned host slot (-1), for devices_test.sh. */
#include <cuda.h>

int main(void)
{
    CUdevice d;
    CUcontext c;
    void *h;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 1;
    if (cuMemHostAlloc(&h, 6 << 20, 0) || cuMemAlloc(&p, 64 << 20)) return 1;
    return 0;
}
