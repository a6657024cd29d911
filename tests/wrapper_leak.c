/*
 * wrapper_leak.c - one allocating helper called from two lines: once for a large buffer that
 * stays (the weights), and in each of 10 marked steps for a 1 MiB buffer kept (the leak), beside
 * a 4 MiB one freed.  By site it is one row, 'growing', most of its bytes the weights': leaks
 * must say which caller's blocks grow (a ctypes wrapper in Python reads the same way).
 * `wrapper_leak many`: three more callers keep 32, 16 and 8 MiB once, and the leak is 512 KiB a
 * step: the growing caller is the smallest of five, past the three largest a row lists.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>

#include "loop_prog.h"

__attribute__((noinline)) static CUdeviceptr grab(size_t n)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) fprintf(stderr, "wrapper_leak: cuMemAlloc failed\n");
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
    return p;
}

int main(int argc, char **argv)
{
    int many = argc > 1 && argv[1][0] == 'm';
    loop_mark_fn mark = loop_marks(1);
    if (loop_context(NULL)) return 2;
    grab(64 << 20); /* the weights, made once */
    if (many) {
        grab(32 << 20);
        grab(16 << 20);
        grab(8 << 20);
    }
    for (int s = 0; s < 10; s++) {
        loop_step(mark, s);
        CUdeviceptr a = grab(4 << 20);
        grab(many ? 512 << 10 : 1 << 20); /* kept: the leak */
        cuMemFree(a);
    }
    return 0;
}
