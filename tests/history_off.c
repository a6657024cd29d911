/*
 * history_off.c - a record whose trace stops before its snapshot: three allocations with
 * history on, then history switched to enabled=state (the ring kept, nothing more appended),
 * two of them freed, then the exit dump.  The trace leaves 2 blocks allocated that the snapshot
 * does not hold (tracegap_test.sh).  The recorder's API is found through dlsym, so the program
 * runs under the preloaded recorder (`cumemhist record`) without linking it.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

#include "cumemhist/recorder.h"

int main(void)
{
    int (*record)(const cmh_options *) = (int (*)(const cmh_options *))dlsym(RTLD_DEFAULT, "cmh_record_memory_history");
    CUdevice d;
    CUcontext c;
    CUdeviceptr p[3];
    if (!record || cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
        fprintf(stderr, "history_off: no recorder or no device\n");
        return 1;
    }
    for (int i = 0; i < 3; i++)
        if (cuMemAlloc(&p[i], (size_t)(i + 1) << 20)) return 1;
    cmh_options o = {CMH_ENABLED_STATE, CMH_CONTEXT_ALL, 0, 0, 0};
    if (record(&o)) return 1;
    cuMemFree(p[0]);
    cuMemFree(p[1]);
    return 0;
}
