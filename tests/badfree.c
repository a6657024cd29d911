/* badfree.c - frees the driver refuses (badfree_test.sh), from a stranger's trial: a double free,
 * a free of a pointer never allocated, and a free of an address inside a live allocation (not its
 * base).  Each cuMemFree returns CUDA_ERROR_INVALID_VALUE, on the real driver as on the fake;
 * the record had no trace of any of them.  Prints each call's result, then the addresses.
 *   badfree clear: then the history cleared (cmh_record_memory_history's clear_history, found
 *     through dlsym: the preloaded recorder's) and a and b + 4096 freed again: the record's
 *     failed calls are these two, the three before the clear gone with the entries
 *   badfree off: recording off (enabled off) before the three, then on again: none recorded
 *   badfree host: then 1 MiB of pinned host memory made and freed, the free refused (run under
 *     FAKECUDA_FAIL=cuMemFreeHost: the real driver refuses one it cannot free), so it stays live */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/recorder.h"

#define MB (1ull << 20)
#define CK(x)                                                                                                    \
    do {                                                                                                         \
        CUresult r_ = (x);                                                                                       \
        if (r_) {                                                                                                \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r_);                                \
            return 2;                                                                                            \
        }                                                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int (*record)(const cmh_options *) = (int (*)(const cmh_options *))dlsym(RTLD_DEFAULT, "cmh_record_memory_history");
    if (*mode && !record) {
        fprintf(stderr, "badfree: %s: no recorder\n", mode);
        return 1;
    }
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
    if (!strcmp(mode, "off")) {
        cmh_options o = {CMH_ENABLED_OFF, CMH_CONTEXT_ALL, 0, 0, 0};
        if (record(&o)) return 1;
    }
    CUresult r1 = cuMemFree(a);                             /* freed twice */
    CUresult r2 = cuMemFree((CUdeviceptr)0xdeadbeef000ull); /* never allocated */
    CUresult r3 = cuMemFree(b + 4096);                      /* inside b, live, not its base */
    printf("double free -> %d\nunknown free -> %d\ninterior free -> %d\n", (int)r1, (int)r2, (int)r3);
    if (!strcmp(mode, "off")) {
        cmh_options o = {CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 0, 0, 0};
        if (record(&o)) return 1;
    }
    if (!strcmp(mode, "clear")) {
        cmh_options o = {CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 0, 0, 1};
        if (record(&o)) return 1;
        printf("after clear -> %d %d\n", (int)cuMemFree(a), (int)cuMemFree(b + 4096));
    }
    if (!strcmp(mode, "host")) {
        void *h;
        CK(cuMemAllocHost(&h, 1 * MB));
        printf("host free -> %d\nh=%p\n", (int)cuMemFreeHost(h), h);
    }
    printf("a=0x%llx b=0x%llx\n", (unsigned long long)a, (unsigned long long)b);
    return 0; /* b live at the end (1 MiB) */
}
