/*
 * bench_blocks.c - what the block API costs an allocator.
 *
 * An allocator calls CMH_BLOCK_ALLOC / CMH_BLOCK_FREE_COMPLETED (include/cumemhist/blocks.h)
 * on every block it hands out and takes back, whether or not the recorder is in the process.
 * This prints ns per alloc+free pair of those calls:
 *   - recorder absent: the weak references are NULL, each call is a load and a branch;
 *     against an empty loop in the same run;
 *   - recorder preloaded (the program re-executes itself with LD_PRELOAD=LIB): recording off,
 *     on without stacks, and on with 32-frame stacks.
 * Figures only: nothing here passes or fails on time.
 *
 * usage: bench_blocks [path/to/libcumemhist.so] [pairs]   (fake or real driver on the path)
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumemhist/blocks.h"

#pragma weak cmh_record_memory_history /* present only in the preloaded run */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* the allocator's own bookkeeping stands in as a volatile store, so the loop is not removed */
static volatile uint64_t g_sink;

__attribute__((noinline)) static double empty_pairs(long n, uint64_t base)
{
    double t0 = now();
    for (long i = 0; i < n; i++) {
        uint64_t p = base + (uint64_t)(i & 255) * 4096;
        g_sink = p;
        g_sink = p + 1;
    }
    return (now() - t0) / (double)n;
}

__attribute__((noinline)) static double block_pairs(long n, uint64_t base)
{
    double t0 = now();
    for (long i = 0; i < n; i++) {
        uint64_t p = base + (uint64_t)(i & 255) * 4096;
        g_sink = p;
        CMH_BLOCK_ALLOC(p, 4096, 4000, 0);
        g_sink = p + 1;
        CMH_BLOCK_FREE_COMPLETED(p);
    }
    return (now() - t0) / (double)n;
}

static double best_of(double (*fn)(long, uint64_t), long n, uint64_t base)
{
    double best = 1e300;
    for (int r = 0; r < 5; r++) {
        double t = fn(n, base);
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *lib = argc > 1 ? argv[1] : NULL;
    long pairs = argc > 2 ? atol(argv[2]) : 2000000;
    int present = getenv("BENCH_BLOCKS_PRESENT") != NULL;
    if (!present) {
        if (cmh_block_alloc) {
            fprintf(stderr, "bench_blocks: start it without the recorder preloaded\n");
            return 2;
        }
        double base = best_of(empty_pairs, pairs, 1 << 20), absent = best_of(block_pairs, pairs, 1 << 20);
        printf("block API, recorder absent: %.2f ns per alloc+free pair (empty loop %.2f ns, +%.2f ns)\n", absent, base,
               absent - base);
        if (!lib) return 0;
        fflush(stdout);
        setenv("BENCH_BLOCKS_PRESENT", "1", 1);
        setenv("LD_PRELOAD", lib, 1);
        setenv("CUMEMHIST_ENABLED", "off", 1);
        setenv("CUMEMHIST_OUTPUT", "/tmp/cumemhist-bench-blocks.%p.cmh", 1); /* the exit dump, out of the way */
        execv("/proc/self/exe", argv);
        perror("bench_blocks: execv");
        return 1;
    }
    if (!cmh_block_alloc || !cmh_record_memory_history) {
        fprintf(stderr, "bench_blocks: %s did not load\n", lib ? lib : "the recorder");
        return 1;
    }
    /* a real driver allocation the blocks live in */
    CUdevice d;
    CUcontext c;
    CUdeviceptr seg;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) ||
        cuMemAlloc(&seg, 256 * 4096)) {
        fprintf(stderr, "bench_blocks: no device memory\n");
        return 1;
    }
    static const struct {
        const char *name;
        cmh_enabled en;
        cmh_context ctx;
    } modes[] = {{"off", CMH_ENABLED_OFF, CMH_CONTEXT_NONE},
                 {"enabled=all context=none", CMH_ENABLED_ALL, CMH_CONTEXT_NONE},
                 {"enabled=all context=alloc", CMH_ENABLED_ALL, CMH_CONTEXT_ALLOC}};
    double base = best_of(empty_pairs, pairs, seg);
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        cmh_options o = {modes[m].en, modes[m].ctx, 100000, 32, 1};
        cmh_record_memory_history(&o);
        CMH_SEGMENT_MANAGED(seg);
        long n = modes[m].ctx == CMH_CONTEXT_ALLOC ? pairs / 10 : pairs;
        double t = best_of(block_pairs, n, seg);
        printf("block API, recorder preloaded, %-26s %8.2f ns per pair (+%.2f ns over the empty loop)\n", modes[m].name,
               t, t - base);
    }
    cmh_options off = {CMH_ENABLED_OFF, CMH_CONTEXT_NONE, 0, 0, 1};
    cmh_record_memory_history(&off);
    cuMemFree(seg);
    return 0;
}
