/*
 * cat_leak.c - buffers replaced every step (tests/catleak_test.sh): no block of them outlives a
 * step, yet what each step leaves may rise.  No marks: the steps come from the allocation pattern.
 *   cat_leak [STEPS]   (default 30)
 * Each step makes and frees two activations (7 and 9 MiB) and:
 *   append_history  the torch.cat accumulation (history = cat(history, new)): a buffer 1 MiB
 *                   larger than the last, then the old one freed: 2, 3, ... MiB at the steps' ends
 *   kv_grow         the same, the old one freed first: a leak too
 *   double_buffer   a buffer of the same 2 MiB, then the old one freed: held, never growing
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "loop_prog.h"

static CUdeviceptr hist, kv, buf;
static size_t hist_size = 1 << 20, kv_size = 1 << 20;

__attribute__((noinline)) static void append_history(void)
{
    CUdeviceptr n;
    hist_size += 1 << 20;
    CK(cuMemAlloc(&n, hist_size));
    if (hist) CK(cuMemFree(hist));
    hist = n;
}

__attribute__((noinline)) static void kv_grow(void)
{
    if (kv) CK(cuMemFree(kv));
    kv_size += 1 << 20;
    CK(cuMemAlloc(&kv, kv_size));
}

__attribute__((noinline)) static void double_buffer(void)
{
    CUdeviceptr n;
    CK(cuMemAlloc(&n, 2 << 20));
    if (buf) CK(cuMemFree(buf));
    buf = n;
}

__attribute__((noinline)) static void step(void)
{
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 7 << 20));
    CK(cuMemAlloc(&b, 9 << 20));
    append_history();
    kv_grow();
    double_buffer();
    CK(cuMemFree(b));
    CK(cuMemFree(a));
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    loop_device0();
    for (int s = 0; s < steps; s++) step();
    return 0;
}
