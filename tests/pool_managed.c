/*
 * pool_managed.c - a stream-ordered pool's cache beside managed memory the driver does not count
 * as used (run with FAKECUDA_MANAGED_OFFDEVICE=1, as the real driver's managed memory whose pages
 * are not on the device): cuMemAllocAsync 8 MiB and cuMemFreeAsync it (the default pool keeps
 * it: no synchronize), cuMemAllocManaged 32 MiB kept, then, after the recorder's helper has
 * sampled cuMemGetInfo (1.5 s), SIGKILL: the record is recovered from the flight record, which
 * has no dump-time pool samples.  The pool still keeps its 8 MiB at the end (the program prints
 * what its RESERVED_MEM_CURRENT says, in bytes, before the kill).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

int main(void)
{
    if (loop_context(NULL)) return 2;
    CUdevice dev;
    CUstream s;
    CUmemoryPool pool;
    CUdeviceptr a, m;
    if (cuDeviceGet(&dev, 0) || cuStreamCreate(&s, 0) || cuDeviceGetDefaultMemPool(&pool, dev)) return 2;
    if (cuMemAllocAsync(&a, 8 * MIB, s) || cuMemFreeAsync(a, s)) return 1;
    if (cuMemAllocManaged(&m, 32 * MIB, CU_MEM_ATTACH_GLOBAL)) return 1;
    cuuint64_t reserved = 0;
    if (cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved)) return 1;
    printf("%llu\n", (unsigned long long)reserved);
    fflush(stdout);
    usleep(1500000);
    raise(SIGKILL);
    return 0;
}
