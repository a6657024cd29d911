/* pycallback.c - a small C library for tests/pystack_test.sh: C that calls back into Python (a
 * ctypes CFUNCTYPE) which then allocates, and C that allocates itself, so that a mixed stack
 * Python -> C -> Python -> driver and Python -> C -> driver are both recorded. */
#include <cuda.h>
#include <stddef.h>

typedef int (*pycb_fn)(int);

/* Calls back into Python with arg; returns what the callback returns. */
__attribute__((noinline)) int pycb_run(pycb_fn cb, int arg)
{
    int r = cb(arg);
    __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays on the stack */
    return r;
}

/* Allocates n bytes on the current context itself; 0 on failure. */
__attribute__((noinline)) unsigned long long pycb_alloc(size_t n)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) return 0;
    __asm__ volatile("" ::: "memory");
    return (unsigned long long)p;
}
