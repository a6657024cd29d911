/*
 * midrun_dump.c - a snapshot written on request while the program runs (cmh_dump_snapshot to
 * argv[1]) after a cuMemAlloc, a VMM map (cuMemCreate + cuMemMap, as NCCL allocates) and a
 * pinned host buffer, so that the snapshot has two traces (device 0 and pinned host memory) and a
 * map log; then the program goes on and frees them, as a running job would.  Its ending counts
 * the entries "so far": tests/onefacts_test.sh checks that every reading counts them as the
 * reports do.
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
        fprintf(stderr, "usage: midrun_dump SNAPSHOT\n");
        return 2;
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
    return 0;
}
