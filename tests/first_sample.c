/*
 * first_sample.c - a device's first cuMemGetInfo sample, taken by the recorder at the program's
 * first allocation, against the entries it counts (owners_test.sh): one 64 MiB allocation,
 * freed, then a pause (the dump's sample comes long after).  The sample counts the allocation:
 * owners must never count its bytes twice ('the device had 128 MiB in use', half of it 'not
 * recorded (CUDA context, other processes)', in most recordings of the same program).
 *   first_sample plain   cuMemAlloc
 *   first_sample async   cuMemAllocAsync on the device's default pool, synchronized
 *   first_sample vmm     cuMemCreate + cuMemMap (the sample was taken between the two)
 *   first_sample alias   one 64 MiB handle mapped at two addresses, released while mapped
 *   first_sample oom     64 MiB blocks until the device is out of memory (run with a context
 *                        holding most of the device: FAKECUDA_CONTEXT); exit 0 at the error
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    loop_device0();
    CUdeviceptr p;
    if (!strcmp(mode, "plain")) {
        CK(cuMemAlloc(&p, 64 * MIB));
        CK(cuMemFree(p));
    } else if (!strcmp(mode, "oom")) {
        for (;;) {
            CUresult r = cuMemAlloc(&p, 64 * MIB);
            if (r == CUDA_ERROR_OUT_OF_MEMORY) return 0;
            CK(r);
        }
    } else if (!strcmp(mode, "async")) {
        CK(cuMemAllocAsync(&p, 64 * MIB, 0));
        CK(cuMemFreeAsync(p, 0));
        CK(cuStreamSynchronize(0));
    } else {
        int alias = !strcmp(mode, "alias");
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        CUmemGenericAllocationHandle h;
        CK(cuMemAddressReserve(&p, 256 * MIB, 0, 0, 0));
        CK(cuMemCreate(&h, 64 * MIB, &prop, 0));
        CK(cuMemMap(p, 64 * MIB, 0, h, 0));
        if (alias) {
            CK(cuMemMap(p + 64 * MIB, 64 * MIB, 0, h, 0));
            CK(cuMemRelease(h)); /* legal while mapped: the memory goes at the last unmap */
            size_t f, t;
            CK(cuMemGetInfo(&f, &t));
            printf("after release, mapped twice: %llu MiB used\n", (unsigned long long)((t - f) / MIB));
            CK(cuMemUnmap(p + 64 * MIB, 64 * MIB));
            CK(cuMemUnmap(p, 64 * MIB));
        } else {
            CK(cuMemUnmap(p, 64 * MIB));
            CK(cuMemRelease(h));
        }
        CK(cuMemAddressFree(p, 256 * MIB));
    }
    usleep(200000);
    return 0;
}
