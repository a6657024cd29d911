/*
 * plateau_leak.c - loops without marks whose leak has a shape (tests/plateau_test.sh): each
 * iteration makes and frees an activation, and keeps 1 MiB (a cache entry) in some iterations.
 *   plateau_leak SHAPE [STEPS [N [MIB]]]
 *   plateau  keeps a block (of MIB MiB, default 1) in each of the first N iterations, then none:
 *            a cache that fills and stops growing, or a leak that stops (3 driver calls an
 *            iteration, then 2)
 *   every2   keeps a block every 2nd iteration: a leak
 *   cache2   keeps 2 blocks in each of the first N iterations, then none (4 driver calls an
 *            iteration, then 2)
 *   late     keeps a block in each iteration from the Nth on: a leak that began late (2 driver
 *            calls an iteration, then 3)
 *   warmup   keeps a block in the first iteration only: state, not a leak
 *   sizes    keeps a block every iteration, each 64 KiB larger than the one before: a leak
 *   twosites weights made once before the loop (state), then two buffers from two sites made
 *            and freed and a block kept every iteration (a leak): two sites, one leaking
 *   threads  N threads (default 3), each its own loop of STEPS iterations keeping a block in each
 *            of its first STEPS/2: each a cache that stops growing.  They all wait for one
 *            another after their first iteration: their loops overlap, as concurrent loops do
 *   serial   the same threads, each started once the one before has ended
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

__attribute__((noinline)) static CUdeviceptr activation(void) { return loop_grab(4 << 20); }
__attribute__((noinline)) static CUdeviceptr scratch(void) { return loop_grab(2 << 20); }
__attribute__((noinline)) static CUdeviceptr keep(size_t n) { return loop_grab(n); }
/* a site of its own (its own driver call: the site is the frame that calls the driver) */
__attribute__((noinline)) static CUdeviceptr weights(void)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, 8 << 20) != CUDA_SUCCESS) exit(1);
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
    return p;
}

static int steps = 20, n = 10;
static CUcontext ctx;
static pthread_barrier_t met;

static void *worker(void *arg)
{
    cuCtxSetCurrent(ctx);
    for (int s = 0; s < steps; s++) {
        CUdeviceptr a = activation();
        if (s < steps / 2) keep(1 << 20);
        cuMemFree(a);
        if (!s && arg) pthread_barrier_wait(&met);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *shape = argc > 1 ? argv[1] : "plateau";
    if (argc > 2) steps = atoi(argv[2]);
    int threads = !strcmp(shape, "threads"), serial = !strcmp(shape, "serial");
    n = argc > 3 ? atoi(argv[3]) : threads || serial ? 3 : steps / 2;
    size_t mib = argc > 4 ? (size_t)atoi(argv[4]) : 1;
    if (loop_context(&ctx)) return 2;
    if (threads) {
        if (n < 1 || n > 64) n = 3;
        pthread_barrier_init(&met, NULL, (unsigned)n);
        pthread_t th[64];
        for (int t = 0; t < n; t++) pthread_create(&th[t], NULL, worker, &met);
        for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
        return 0;
    }
    for (int t = 0; serial && t < n; t++) { /* one after another */
        pthread_t th;
        pthread_create(&th, NULL, worker, NULL);
        pthread_join(th, NULL);
    }
    if (serial) return 0;
    if (!strcmp(shape, "twosites")) weights();
    for (int s = 0; s < steps; s++) {
        CUdeviceptr a = activation(), b = 0;
        if (!strcmp(shape, "twosites")) b = scratch();
        if (!strcmp(shape, "plateau") && s < n) keep(mib << 20);
        if ((!strcmp(shape, "every2") && s % 2 == 0) ||
            (!strcmp(shape, "late") && s >= n) ||
            (!strcmp(shape, "warmup") && s == 0) || !strcmp(shape, "twosites"))
            keep(1 << 20);
        if (!strcmp(shape, "sizes")) keep((size_t)(s + 1) << 16);
        if (!strcmp(shape, "cache2") && s < n) keep(1 << 20), keep(1 << 20);
        if (b) cuMemFree(b);
        cuMemFree(a);
    }
    return 0;
}
