/*
 * asyncdev.c - stream-ordered allocations on a device other than the current context's, pools
 * giving back at a synchronize, and OOMs of one pool beside another's cache (tests/asyncdev_test.sh).
 * Run with FAKECUDA_DEVICES=2; the mode (argv[1]) says what:
 *   xdevoom  (256 MiB devices) device 1 holds 200 MiB (cuMemAlloc); with device 0's context
 *            current, cuMemAllocAsync of 100 MiB on a device-1 stream fails, on device 1;
 *   xdev     (256 MiB) with device 0 current: 32 MiB cuMemAllocAsync on a device-1 stream, 16 MiB
 *            from a private pool located on device 1 (kept), 8 MiB cuMemAllocAsync freed on
 *            device 1's stream;
 *   thresh   (512 MiB, 1 device) default pool, release threshold 0: 4 x 100 MiB async, freed,
 *            then SYNC (argv[2]: stream, ctx, event, procaddr: cuStreamSynchronize as
 *            cuGetProcAddress gives it), then cuMemAlloc 450 MiB (succeeds), 100 MiB (fails);
 *   privoom  (512 MiB, 1 device) the default pool keeps 300 MiB (threshold max); 300 MiB from a
 *            private pool fails;
 *   privoom2 the reverse: a private pool keeps 300 MiB; 300 MiB cuMemAllocAsync (default pool) fails.
 *   oddpool  privoom2 with requests of 100 MiB + 12345 B (the pool's cache is not what its
 *            requests asked; the record's end needs its dump's pool reads).
 * Prints "rc=N" of the last request.
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MIB (1ull << 20)
#define CK(x)                                                                                                    \
    do {                                                                                                         \
        if ((x) != CUDA_SUCCESS) {                                                                               \
            fprintf(stderr, "asyncdev: %s failed at line %d\n", #x, __LINE__);                                    \
            return 2;                                                                                            \
        }                                                                                                        \
    } while (0)

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st);

static CUcontext g_ctx[2];

static int contexts(int n)
{
    CK(cuInit(0));
    for (int i = 0; i < n; i++) {
        CUdevice d;
        CK(cuDeviceGet(&d, i));
        CK(cuDevicePrimaryCtxRetain(&g_ctx[i], d));
    }
    CK(cuCtxSetCurrent(g_ctx[0]));
    return 0;
}

static int private_pool(CUmemoryPool *mp, int dev)
{
    CUmemPoolProps pr;
    memset(&pr, 0, sizeof pr);
    pr.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pr.location.id = dev;
    CK(cuMemPoolCreate(mp, &pr));
    return 0;
}

__attribute__((noinline)) static CUresult other_device_async(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync(p, n, s); }

static int xdevoom(void)
{
    CUstream s1;
    CUdeviceptr q, p;
    if (contexts(2)) return 2;
    CK(cuCtxSetCurrent(g_ctx[1]));
    CK(cuStreamCreate(&s1, 0));
    CK(cuMemAlloc(&q, 200 * MIB));
    CK(cuCtxSetCurrent(g_ctx[0]));
    CUresult r = other_device_async(&p, 100 * MIB, s1);
    printf("rc=%d\n", (int)r);
    return 0;
}

static int xdev(void)
{
    CUstream s1;
    CUmemoryPool mp;
    CUdeviceptr a, b, c;
    if (contexts(2)) return 2;
    CK(cuCtxSetCurrent(g_ctx[1]));
    CK(cuStreamCreate(&s1, 0));
    CK(cuCtxSetCurrent(g_ctx[0]));
    if (private_pool(&mp, 1)) return 2;
    CK(other_device_async(&a, 32 * MIB, s1));
    CK(cuMemAllocFromPoolAsync(&b, 16 * MIB, mp, s1));
    CK(other_device_async(&c, 8 * MIB, s1));
    CK(cuMemFreeAsync(c, s1));
    printf("rc=0\n");
    return 0;
}

static int thresh(const char *how)
{
    CUstream s;
    CUdeviceptr a[4], big, more;
    if (contexts(1)) return 2;
    CK(cuStreamCreate(&s, 0));
    for (int i = 0; i < 4; i++) CK(cuMemAllocAsync(&a[i], 100 * MIB, s));
    for (int i = 0; i < 4; i++) CK(cuMemFreeAsync(a[i], s));
    if (!strcmp(how, "stream")) CK(cuStreamSynchronize(s));
    else if (!strcmp(how, "ctx")) CK(cuCtxSynchronize());
    else if (!strcmp(how, "event")) {
        CUevent ev;
        CK(cuEventCreate(&ev, 0));
        CK(cuEventRecord(ev, s));
        CK(cuEventSynchronize(ev));
        CK(cuEventDestroy(ev));
    } else if (!strcmp(how, "procaddr")) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult st;
        CK(cuGetProcAddress_v2("cuStreamSynchronize", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
        if (!fn) return 2;
        CK(((CUresult(*)(CUstream))fn)(s));
    } else return 2;
    CK(cuMemAlloc(&big, 450 * MIB));
    CUresult r = cuMemAlloc(&more, 100 * MIB);
    printf("rc=%d\n", (int)r);
    return 0;
}

__attribute__((noinline)) static CUresult from_pool(CUdeviceptr *p, CUmemoryPool mp, CUstream s, size_t n)
{
    return cuMemAllocFromPoolAsync(p, n, mp, s);
}

static int privoom(int reverse, size_t odd)
{
    CUstream s;
    CUmemoryPool defp, mp;
    CUdevice d;
    CUdeviceptr a[3], x;
    cuuint64_t thr = UINT64_MAX;
    if (contexts(1)) return 2;
    CK(cuDeviceGet(&d, 0));
    CK(cuStreamCreate(&s, 0));
    CK(cuDeviceGetDefaultMemPool(&defp, d));
    if (private_pool(&mp, 0)) return 2;
    CUmemoryPool keeper = reverse ? mp : defp;
    CK(cuMemPoolSetAttribute(keeper, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    for (int i = 0; i < 3; i++) CK(reverse ? from_pool(&a[i], mp, s, 100 * MIB + odd) : cuMemAllocAsync(&a[i], 100 * MIB, s));
    for (int i = 0; i < 3; i++) CK(cuMemFreeAsync(a[i], s));
    CK(cuStreamSynchronize(s));
    CUresult r = reverse ? other_device_async(&x, 300 * MIB, s) : from_pool(&x, mp, s, 300 * MIB);
    printf("rc=%d\n", (int)r);
    return 0;
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "xdevoom")) return xdevoom();
    if (!strcmp(m, "xdev")) return xdev();
    if (!strcmp(m, "thresh")) return thresh(argc > 2 ? argv[2] : "stream");
    if (!strcmp(m, "privoom")) return privoom(0, 0);
    if (!strcmp(m, "privoom2")) return privoom(1, 0);
    if (!strcmp(m, "oddpool")) return privoom(1, 12345);
    fprintf(stderr, "usage: asyncdev xdevoom|xdev|thresh [stream|ctx|event|procaddr]|privoom|privoom2|oddpool\n");
    return 2;
}
