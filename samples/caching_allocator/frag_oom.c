/*
 * frag_oom.c - an out-of-memory error caused by fragmentation, not demand.
 *
 * 8 MiB tensors fill 20 MiB segments two at a time; every other one is freed, leaving 8 MiB
 * holes next to 4 MiB tails, and the segments cannot be released because each still holds a
 * tensor.  Then a 12 MiB tensor is asked for: plenty of bytes are free inside the segments, no
 * single gap is large enough, and the device has no room for a new segment.
 *   FAKECUDA_CAPACITY=100M cumemhist record -o frag.cmh -- ./frag_oom
 *   cumemhist oom frag.cmh     # verdict: fragmentation
 */
#include <stdio.h>

#include "cachealloc.h"

int main(void)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    size_t free_b = 0, total = 0;
    cuMemGetInfo(&free_b, &total);
    CUdeviceptr t[64];
    int n = 0;
    CUresult err = CUDA_SUCCESS;
    /* fill the device with 20 MiB segments of two 8 MiB tensors each, keeping 20 MiB spare */
    while (n < 64 && (size_t)(n / 2 + 2) * (20u << 20) <= free_b && (t[n] = ca_malloc(8u << 20, NULL, &err))) n++;
    for (int i = 0; i < n; i += 2) ca_free(t[i]);
    /* use up the spare: the device has no room for another 12 MiB */
    CUdeviceptr filler = 0;
    cuMemGetInfo(&free_b, &total);
    if (free_b > (8u << 20)) cuMemAlloc(&filler, free_b - (8u << 20));
    ca_stats st;
    ca_get_stats(&st);
    CUdeviceptr big = ca_malloc(12u << 20, NULL, &err);
    const char *name = "?";
    cuGetErrorName(err, &name);
    printf("frag_oom: %d tensors of 8 MiB in %llu segments, %llu MiB free inside them; 12 MiB: %s\n", n,
           (unsigned long long)st.segments, (unsigned long long)((st.reserved - st.allocated) >> 20),
           big ? "allocated" : name);
    if (filler) cuMemFree(filler);
    return big ? 0 : 1;
}
