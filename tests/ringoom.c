/*
 * ringoom.c - OOMs that fall out of a small ring (for tests/oomrule_test.sh): three OOMs the
 * program sees (from distinct lines), then 40 allocate/free pairs, then a fourth OOM.  Recorded
 * with --max-entries 20, the first three are no longer in the trace; the process saw four, and
 * every output must say so.  With an argument, it waits for that file to exist before it ends
 * (so that top, the exporter and `snapshot PID` read it live), after printing "oom 4".
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop_prog.h"

#define MiB (1ull << 20)

__attribute__((noinline)) static CUresult o1(CUdeviceptr *p) { return cuMemAlloc(p, 600 * MiB); }
__attribute__((noinline)) static CUresult o2(CUdeviceptr *p) { return cuMemAlloc(p, 700 * MiB); }
__attribute__((noinline)) static CUresult o3(CUdeviceptr *p) { return cuMemAlloc(p, 800 * MiB); }
__attribute__((noinline)) static CUresult o4(CUdeviceptr *p) { return cuMemAlloc(p, 900 * MiB); }

int main(int argc, char **argv)
{
    loop_device0();
    CUdeviceptr p, keep;
    CK(cuMemAlloc(&keep, 10 * MiB));
    int n = (o1(&p) != 0) + (o2(&p) != 0) + (o3(&p) != 0);
    for (int i = 0; i < 40; i++) {
        CK(cuMemAlloc(&p, 1 * MiB));
        CK(cuMemFree(p));
    }
    n += o4(&p) != 0;
    printf("oom %d\n", n);
    fflush(stdout);
    for (int i = 0; argc > 1 && access(argv[1], F_OK) != 0 && i < 6000; i++) usleep(10000);
    return 0;
}
