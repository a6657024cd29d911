/*
 * demo.c - a training-like workload on the caching allocator: weights that stay, activations
 * of varying sizes that come and go, a few small tensors.  Prints the allocator's own counters
 * at the end, which `cumemhist summary` of a recording must reproduce:
 *   cumemhist record -o ca.cmh -- ./caching_demo && cumemhist summary ca.cmh
 */
#include <stdio.h>
#include <stdlib.h>

#include "cachealloc.h"
#include "cumemhist/blocks.h"

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 8;
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    CUdeviceptr weights[4];
    for (int i = 0; i < 4; i++) weights[i] = ca_malloc((size_t)(3 + i) << 20, NULL, NULL);
    for (int s = 0; s < steps; s++) {
        char name[32];
        snprintf(name, sizeof name, "step %d", s);
        CMH_MARK(name);
        CUdeviceptr act[6], small[5];
        CMH_RANGE_PUSH("forward");
        for (int i = 0; i < 6; i++) act[i] = ca_malloc((size_t)(1 + (s + i) % 5) * (700 << 10) + 100, NULL, NULL);
        for (int i = 0; i < 5; i++) small[i] = ca_malloc((size_t)(i + 1) * 1000, NULL, NULL);
        CMH_RANGE_POP();
        for (int i = 0; i < 6; i += 2) ca_free(act[i]);
        for (int i = 1; i < 6; i += 2) ca_free(act[i]);
        for (int i = 0; i < 4; i++) ca_free(small[i]); /* one small tensor a step is kept */
    }
    ca_stats st;
    ca_get_stats(&st);
    printf("caching_demo: allocated %llu requested %llu reserved %llu segments %llu blocks %llu\n",
           (unsigned long long)st.allocated, (unsigned long long)st.requested, (unsigned long long)st.reserved,
           (unsigned long long)st.segments, (unsigned long long)st.blocks);
    for (int i = 0; i < 4; i++) (void)weights[i];
    return 0;
}
