/*
 * cache_fill.c - a bounded cache filled over many steps, for tests/cachefill_test.sh: each of 120
 * steps makes and frees an activation (8 MiB), replaces a double buffer (16 MiB, the new one made
 * before the old is freed), and puts 1 MiB into a cache of 10 slots, evicting the oldest once it
 * is full: the cache grows over steps 0-9, then holds 10 MiB.  `cache_fill shared` makes the
 * cache's blocks through the activations' function (a site of both).  `cache_fill once` instead
 * makes 64 MiB of optimizer state once, in step 1 (state, not a leak).  No marks: the steps come
 * from the allocation pattern.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

__attribute__((noinline)) static CUdeviceptr kv_buffer(size_t n)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n));
    return p;
}

__attribute__((noinline)) static CUdeviceptr activation(size_t n)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n));
    return p;
}

__attribute__((noinline)) static CUdeviceptr lru_fill(size_t n)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n));
    return p;
}

__attribute__((noinline)) static CUdeviceptr optimizer_state(size_t n)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n));
    return p;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int shared = !strcmp(mode, "shared"), once = !strcmp(mode, "once");
    loop_device0();
    CUdeviceptr kv = kv_buffer(16 * MIB), lru[10] = {0}, opt = 0;
    int head = 0;
    for (int step = 0; step < 120; step++) {
        CUdeviceptr a = activation(8 * MIB);
        CUdeviceptr nk = kv_buffer(16 * MIB);
        CK(cuMemFree(kv));
        kv = nk;
        if (once) {
            if (step == 1) opt = optimizer_state(64 * MIB);
        } else {
            if (lru[head]) CK(cuMemFree(lru[head]));
            lru[head] = shared ? activation(1 * MIB) : lru_fill(1 * MIB);
            head = (head + 1) % 10;
        }
        CK(cuMemFree(a));
    }
    printf("cache_fill %s: done%s\n", mode, opt ? ", optimizer state kept" : "");
    return 0;
}
