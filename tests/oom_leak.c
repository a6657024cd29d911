/*
 * oom_leak.c - two out-of-memory errors a user has to act on, for oomleak_test.sh:
 *
 *   oom_leak leak   a step loop ("step I" marked) that each step keeps 40 MiB (keep_history(),
 *                   never freed) and takes a 96 MiB scratch buffer (scratch(), freed at the end of
 *                   the step), until the scratch buffer fails; the program then exits holding what
 *                   it kept.  Run on a 1 GiB device (FAKECUDA_CAPACITY=1G): a demand OOM driven by
 *                   the leak at keep_history.
 *   oom_leak trap   an allocator above the driver (the block API): make_pool() takes one 64 MiB
 *                   segment; big_tensor() takes 48 MiB of it and small_handle() 1 MiB after it;
 *                   the 48 MiB is freed, and the 1 MiB block, which is not the segment's
 *                   creator's, keeps the segment (63 MiB free in it) from being given back.  A
 *                   56 MiB request then fits in no gap and the device (FAKECUDA_CAPACITY=96M) has
 *                   32 MiB left: a fragmentation OOM whose trapping block is small_handle's.
 *   oom_leak helper one allocating helper, grab(), called by main() once for 64 MiB of weights and in
 *                   each marked step by fwd() (8 MiB, freed), bwd() (8 MiB, kept: the leak) and
 *                   opt() (8 MiB, freed), until one of them fails.  Run on a 512 MiB device: the
 *                   leak's site is grab's, its growth bwd's, and the failing request another
 *                   caller's; prints which.
 *
 * Prints what happened and exits 0 when it ran so.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/blocks.h"

#define MIB (1ull << 20)

static volatile int calls; /* (each helper its own body: none folded into another) */

__attribute__((noinline)) static CUresult scratch(CUdeviceptr *p)
{
    calls++;
    return cuMemAlloc(p, 96 * MIB);
}

__attribute__((noinline)) static CUresult keep_history(CUdeviceptr *p)
{
    calls += 2;
    return cuMemAlloc(p, 40 * MIB);
}

static int leak(void)
{
    CUdeviceptr t, k;
    for (int i = 0; i < 1000; i++) {
        char m[32];
        snprintf(m, sizeof m, "step %d", i);
        CMH_MARK(m);
        if (keep_history(&k) != CUDA_SUCCESS) return 1; /* (the scratch buffer fails first) */
        CUresult r = scratch(&t);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            printf("oom_leak: scratch out of memory at step %d\n", i);
            return 0;
        }
        if (r != CUDA_SUCCESS) return 1;
        cuMemFree(t);
    }
    return 1;
}

__attribute__((noinline)) static CUresult make_pool(CUdeviceptr *seg)
{
    calls++;
    CUresult r = cuMemAlloc(seg, 64 * MIB);
    if (r == CUDA_SUCCESS) CMH_SEGMENT_MANAGED(*seg);
    return r;
}

__attribute__((noinline)) static void big_tensor(CUdeviceptr at)
{
    calls += 2;
    CMH_BLOCK_ALLOC(at, 48 * MIB, 48 * MIB, 0);
}

__attribute__((noinline)) static void small_handle(CUdeviceptr at)
{
    calls += 3;
    CMH_BLOCK_ALLOC(at, 1 * MIB, 1 * MIB, 0);
}

__attribute__((noinline)) static CUresult grow_pool(CUdeviceptr *seg)
{
    calls += 4;
    return cuMemAlloc(seg, 56 * MIB);
}

static int trap(void)
{
    CUdeviceptr seg, more;
    if (make_pool(&seg) != CUDA_SUCCESS) return 1;
    big_tensor(seg);
    small_handle(seg + 48 * MIB);
    CMH_BLOCK_FREE_COMPLETED(seg);
    /* no 56 MiB gap in the segment (48 MiB before the handle, 15 MiB after it): a new segment */
    CUresult r = grow_pool(&more);
    printf("oom_leak: trap: 56 MiB: error %d\n", (int)r);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}

__attribute__((noinline)) static CUresult grab(CUdeviceptr *p, size_t n)
{
    calls += 5;
    return cuMemAlloc(p, n);
}

__attribute__((noinline)) static CUresult fwd(void)
{
    CUdeviceptr a;
    CUresult r = grab(&a, 8 * MIB);
    if (r == CUDA_SUCCESS) cuMemFree(a);
    return r;
}

__attribute__((noinline)) static CUresult bwd(void)
{
    CUdeviceptr b;
    calls += 6;
    return grab(&b, 8 * MIB); /* kept: the leak */
}

__attribute__((noinline)) static CUresult opt(void)
{
    CUdeviceptr c;
    calls += 7;
    CUresult r = grab(&c, 8 * MIB);
    if (r == CUDA_SUCCESS) cuMemFree(c);
    return r;
}

static int helper(void)
{
    CUdeviceptr w;
    if (grab(&w, 64 * MIB) != CUDA_SUCCESS) return 1;
    for (int i = 0; i < 1000; i++) {
        char m[32];
        snprintf(m, sizeof m, "step %d", i);
        CMH_MARK(m);
        const char *who = fwd() ? "fwd" : bwd() ? "bwd" : opt() ? "opt" : NULL;
        if (who) {
            printf("oom_leak: helper: %s out of memory at step %d\n", who, i);
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    if (argc < 2 || cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (!strcmp(argv[1], "leak")) return leak();
    if (!strcmp(argv[1], "trap")) return trap();
    if (!strcmp(argv[1], "helper")) return helper();
    return 2;
}
