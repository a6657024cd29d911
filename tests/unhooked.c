/*
 * unhooked.c - device memory taken by a path the recorder does not hook, after the record's
 * peak: a 64 MiB buffer made and freed (the peak), then TAKE MiB taken through the fake driver's
 * fakecuda_take() (as a library's own allocator or another process would: cuMemGetInfo sees it,
 * no recorded call made it), then 8 MiB kept by an ordinary cuMemAlloc.  The record's last
 * cuMemGetInfo sample then shows more in use than its reserved bytes.
 *   unhooked [TAKE_MIB]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "loop_prog.h"

int main(int argc, char **argv)
{
    long long take = (argc > 1 ? atoll(argv[1]) : 200) << 20;
    int (*take_fn)(int, long long) = (int (*)(int, long long))dlsym(RTLD_DEFAULT, "fakecuda_take");
    if (!take_fn) {
        fprintf(stderr, "unhooked: needs the fake driver (tests/fakecuda)\n");
        return 2;
    }
    if (loop_context(NULL)) return 2;
    CUdeviceptr big = loop_grab(64 << 20);
    cuMemFree(big);
    if (take_fn(0, take) != 0) {
        fprintf(stderr, "unhooked: the fake driver would not take %lld bytes\n", take);
        return 2;
    }
    loop_grab(8 << 20);
    return 0;
}
