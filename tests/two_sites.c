/*
 * two_sites.c - one allocating function called from two lines of main, for the attribution test:
 * by site it is one row (the allocating line), by stack two (main's two lines).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>

#include "loop_prog.h"

__attribute__((noinline)) static CUdeviceptr buffer(size_t n)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) fprintf(stderr, "two_sites: cuMemAlloc failed\n");
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
    return p;
}

/* inlined into main: DWARF gives it a frame of its own */
static inline __attribute__((always_inline)) CUdeviceptr inlined_buffer(size_t n)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) fprintf(stderr, "two_sites: cuMemAlloc failed\n");
    return p;
}

int main(void)
{
    if (loop_context(NULL)) return 2;
    CUdeviceptr a = buffer(1 << 20); /* first call */
    CUdeviceptr b = buffer(2 << 20); /* second call */
    CUdeviceptr c = inlined_buffer(3 << 20);
    printf("two_sites: %llx %llx %llx\n", (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
    return 0;
}
