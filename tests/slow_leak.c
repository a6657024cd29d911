/*
 * slow_leak.c - leaks that the steps found from the allocation pattern (no marks) must not hide.
 *   slow_leak burst [STEPS [KV]]   a loop of STEPS steps (an activation made and freed, 1 MiB kept
 *                                   each step: the leak), then KV buffers of 8 MiB made one after
 *                                   another and freed (a cache grown until full, after the loop)
 *   slow_leak slow [ITERS [EVERY [STOP]]]  ITERS iterations of busy churn over 16 slots of
 *                                   varied sizes, and one 64 KiB block kept every EVERY
 *                                   iterations (a slow leak, linear over the whole run), up to
 *                                   iteration STOP when given (a slow leak that stops)
 *   slow_leak keep [ITERS [1]]      one thread keeps 1 MiB an iteration and does nothing else;
 *                                   a second thread makes and frees one block (two recording
 *                                   threads, one holding memory); 1: each iteration marked
 *                                   "step N" (cmh_mark), as leaks' note says to
 *   slow_leak one                   one allocation, kept (a record of one entry)
 * Each allocation site is a function of its own (noinline) so that the reports name it.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

static CUcontext g_ctx;

static void fail(size_t n)
{
    fprintf(stderr, "slow_leak: cuMemAlloc of %zu bytes failed\n", n);
    exit(1);
}
/* each function below its own allocation site (a macro: a shared helper would be the site; and
 * bodies that differ, or the linker may fold two into one) */
#define GRAB(n)                                                     \
    CUdeviceptr p = 0;                                              \
    if (cuMemAlloc(&p, (n)) != CUDA_SUCCESS) fail(n);               \
    return p
__attribute__((noinline)) static CUdeviceptr weights(void) { GRAB(16 << 20); }
__attribute__((noinline)) static CUdeviceptr activation(void) { GRAB(4 << 20); }
__attribute__((noinline)) static CUdeviceptr keep_history(void) { GRAB(1 << 20); }
__attribute__((noinline)) static CUdeviceptr keep_small(void) { GRAB(64 << 10); }
__attribute__((noinline)) static CUdeviceptr kv_buffer(void) { GRAB(8 << 20); }
__attribute__((noinline)) static CUdeviceptr churn(size_t n) { GRAB(n); }

static void burst(int steps, int kv)
{
    CUdeviceptr *buf = calloc((size_t)kv, sizeof *buf);
    if (!buf) exit(1);
    weights();
    for (int s = 0; s < steps; s++) {
        CUdeviceptr a = activation();
        keep_history();
        cuMemFree(a);
    }
    for (int i = 0; i < kv; i++) buf[i] = kv_buffer();
    for (int i = 0; i < kv; i++) cuMemFree(buf[i]);
    free(buf);
}

static void slow(int iters, int every, int stop)
{
    CUdeviceptr slot[16];
    for (int i = 0; i < iters; i++) {
        int k = i % 16;
        if (i >= 16) cuMemFree(slot[k]);
        slot[k] = churn((size_t)(1 + (i * 7919) % 64) << 16);
        if (i % every == every - 1 && i < stop) keep_small();
    }
}

static void *one_block(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(g_ctx);
    cuMemFree(churn(2 << 20));
    return NULL;
}

static void keep(int iters, int marked)
{
    pthread_t t;
    loop_mark_fn mark = loop_marks(marked);
    if (pthread_create(&t, NULL, one_block, NULL) || pthread_join(t, NULL)) exit(1);
    for (int i = 0; i < iters; i++) {
        loop_step(mark, i);
        keep_history();
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "burst";
    int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0, c = argc > 4 ? atoi(argv[4]) : 0;
    if (loop_context(&g_ctx)) return 2;
    if (!strcmp(mode, "burst")) burst(a > 0 ? a : 8, b > 0 ? b : 63);
    else if (!strcmp(mode, "slow")) slow(a > 0 ? a : 200000, b > 0 ? b : 1000, c > 0 ? c : a > 0 ? a : 200000);
    else if (!strcmp(mode, "keep")) keep(a > 0 ? a : 40, b == 1);
    else if (!strcmp(mode, "one")) weights();
    else {
        fprintf(stderr, "usage: slow_leak burst [STEPS [KV]] | slow [ITERS [EVERY [STOP]]] | keep [ITERS [1]] | one\n");
        return 2;
    }
    return 0;
}
