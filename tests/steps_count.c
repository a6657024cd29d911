/* steps_count.c - training loops of a known number of iterations, no marks, each shape one a
 * stranger's program had (/tmp/trial2's swapbuf.c, steady_var.c) where the steps read one too
 * many or one too few.
 *
 *   steps_count SHAPE N [THREADED]
 *     SHAPE  swap:    a buffer made once before the loop, then replaced every step (the next
 *                     made, the last freed), an activation and a capped cache of 10 blocks
 *                     (swapbuf.c: 'steps: 121' for 120, the buffer made before the loop taken
 *                     for a step's);
 *            cycle:   activations of sizes that cycle every 3 steps, a workspace made in the
 *                     first step and optimizer state in the second, then a gradient made and
 *                     freed: the op once a step (the gradient) is mid-step, the ops before it
 *                     never the same twice running (steady_var.c: 'steps: 299' for 300);
 *            partial: cycle, then the first op of one more iteration (less than half a step:
 *                     no step);
 *            plain:   cycle without the workspace and the state (no warm-up).
 *     N      iterations
 *     THREADED  1: the loop runs in a thread of its own, the main thread waiting
 *
 * The steps are N. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop_prog.h"

#define MB (1ull << 20)

static CUcontext ctx;
static const char *shape;
static int n;

static void pause_us(long us)
{
    struct timespec t = {0, us * 1000};
    nanosleep(&t, 0);
}

__attribute__((noinline)) static CUdeviceptr kv_buffer(size_t b)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, b));
    return p;
}

__attribute__((noinline)) static CUdeviceptr act(size_t b)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, b));
    return p;
}

__attribute__((noinline)) static CUdeviceptr state(size_t b)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, b));
    return p;
}

__attribute__((noinline)) static CUdeviceptr grad(size_t b)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, b));
    return p;
}

static void swap_loop(void)
{
    CUdeviceptr kv = kv_buffer(16 * MB), lru[10] = {0};
    int head = 0;
    for (int step = 0; step < n; step++) {
        CUdeviceptr a = act(8 * MB), nk = kv_buffer(16 * MB);
        CK(cuMemFree(kv));
        kv = nk;
        if (lru[head]) CK(cuMemFree(lru[head]));
        lru[head] = act(1 * MB);
        head = (head + 1) % 10;
        pause_us(300);
        CK(cuMemFree(a));
    }
}

static void cycle_loop(int warm, int partial)
{
    CUdeviceptr w;
    CK(cuMemAlloc(&w, 32 * MB));
    static const size_t sz[3] = {8 * MB, 16 * MB, 12 * MB};
    for (int step = 0; step < n + partial; step++) {
        CUdeviceptr a = act(sz[step % 3]);
        if (step == n) break; /* the partial iteration: its first op, the loop then stopped */
        CUdeviceptr b = act(sz[(step + 1) % 3]);
        if (warm && step == 0) state(4 * MB);
        CK(cuMemFree(b));
        CK(cuMemFree(a));
        if (warm && step == 1) state(32 * MB), state(32 * MB);
        CUdeviceptr g = grad(2 * MB);
        pause_us(300);
        CK(cuMemFree(g));
    }
}

static void *loop(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    if (!strcmp(shape, "swap")) swap_loop();
    else if (!strcmp(shape, "cycle")) cycle_loop(1, 0);
    else if (!strcmp(shape, "partial")) cycle_loop(1, 1);
    else if (!strcmp(shape, "plain")) cycle_loop(0, 0);
    else exit(2);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    shape = argv[1];
    n = atoi(argv[2]);
    int threaded = argc > 3 && atoi(argv[3]);
    if (n < 1) return 2;
    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    if (!threaded) {
        loop(NULL);
        return 0;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, loop, NULL)) return 1;
    pthread_join(t, NULL);
    return 0;
}
