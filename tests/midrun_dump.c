/*
 * midrun_dump.c - a snapshot written on request while the program runs (cmh_dump_snapshot to
 * argv[1]) after a cuMemAlloc, a VMM map (cuMemCreate + cuMemMap, as NCCL allocates) and a
 * pinned host buffer, so that the snapshot has two traces (device 0 and pinned host memory) and a
 * map log; then the program goes on and frees them, as a running job would.  Its ending counts
 * the entries "so far": tests/onefacts_test.sh checks that every reading counts them as the
 * reports do.  With a second argument, "2", device 1 gets an allocation too before the snapshot:
 * the ending then counts three traces, each said apart.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/recorder.h"
#include "loop_prog.h"

#define MIB (1ull << 20)

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: midrun_dump SNAPSHOT [2]\n");
        return 2;
    }
    int two = argc > 2 && !strcmp(argv[2], "2");
    CUdeviceptr d1 = 0;
    CUcontext c1;
    if (two) { /* device 1's first, then device 0's context current for the rest */
        CUdevice dev1;
        CK(cuInit(0));
        CK(cuDeviceGet(&dev1, 1));
        CK(cuDevicePrimaryCtxRetain(&c1, dev1));
        CK(cuCtxSetCurrent(c1));
        CK(cuMemAlloc(&d1, 3 * MIB));
    }
    loop_device0();
    CUdeviceptr p, a;
    CK(cuMemAlloc(&p, 4 * MIB));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, 2 * MIB, &prop, 0));
    CK(cuMemAddressReserve(&a, 2 * MIB, 0, 0, 0));
    CK(cuMemMap(a, 2 * MIB, 0, h, 0));
    void *host;
    CK(cuMemHostAlloc(&host, 1 * MIB, 0));
    if (cmh_dump_snapshot(argv[1]) != CMH_OK) {
        fprintf(stderr, "midrun_dump: cmh_dump_snapshot failed\n");
        return 1;
    }
    /* the run goes on past the snapshot */
    CK(cuMemFreeHost(host));
    CK(cuMemUnmap(a, 2 * MIB));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(a, 2 * MIB));
    CK(cuMemFree(p));
    if (two) {
        CK(cuCtxSetCurrent(c1));
        CK(cuMemFree(d1));
    }
    return 0;
}
