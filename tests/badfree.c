/* badfree.c - frees the driver refuses (badfree_test.sh), from a stranger's trial: a double free,
 * a free of a pointer never allocated, and a free of an address inside a live allocation (not its
 * base).  Each cuMemFree returns CUDA_ERROR_INVALID_VALUE, on the real driver as on the fake;
 * the record had no trace of any of them.  Prints each call's result, then the addresses. */
#include <cuda.h>
#include <stdio.h>

#define MB (1ull << 20)
#define CK(x)                                                                                                    \
    do {                                                                                                         \
        CUresult r_ = (x);                                                                                       \
        if (r_) {                                                                                                \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r_);                                \
            return 2;                                                                                            \
        }                                                                                                        \
    } while (0)

int main(void)
{
    CUdevice d;
    CUcontext ctx;
    CUdeviceptr a, b;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc(&a, 4 * MB));
    CK(cuMemAlloc(&b, 1 * MB));
    CK(cuMemFree(a));
    CUresult r1 = cuMemFree(a);                             /* freed twice */
    CUresult r2 = cuMemFree((CUdeviceptr)0xdeadbeef000ull); /* never allocated */
    CUresult r3 = cuMemFree(b + 4096);                      /* inside b, live, not its base */
    printf("double free -> %d\nunknown free -> %d\ninterior free -> %d\n", (int)r1, (int)r2, (int)r3);
    printf("a=0x%llx b=0x%llx\n", (unsigned long long)a, (unsigned long long)b);
    return 0; /* b live at the end (1 MiB) */
}
