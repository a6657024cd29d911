/*
 * consist_prog.c - one record that every output must read alike (consist_test.sh): 4 MiB of
 * pinned host memory first (the record's earliest event, which the pickle leaves out), then
 * weights on devices 0 and 1 and 8 steps, each begun with a mark "step N" and a range "fwd"
 * around it, made from a worker thread named "worker2" (pthread_setname_np); device 0 keeps
 * 1 MiB a step.  Run with FAKECUDA_DEVICES=2 under the preloaded recorder.
 *   consist_prog          the loop above
 *   consist_prog onestep  one step: a mark "step 0", then a range "step" around the step's work
 *                         (one boundary, not two)
 *   consist_prog oom1     the loop, then one out-of-memory error on device 1 (a request larger
 *                         than the fake device)
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

typedef int (*name_fn)(const char *);
typedef int (*pop_fn)(void);
static name_fn g_mark, g_push;
static pop_fn g_pop;
static CUcontext g_c[2];
static const char *g_mode = "";

static void mark(const char *n) { if (g_mark) g_mark(n); }
static void push(const char *n) { if (g_push) g_push(n); }
static void pop(void) { if (g_pop) g_pop(); }

__attribute__((noinline)) static CUdeviceptr grab(int dev, size_t n)
{
    CUdeviceptr p = 0;
    cuCtxSetCurrent(g_c[dev]);
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) return 0;
    return p;
}

__attribute__((noinline)) static CUdeviceptr weights(int dev, size_t n) { return grab(dev, n); }
__attribute__((noinline)) static CUdeviceptr activation(int dev, size_t n) { return grab(dev, n); }
__attribute__((noinline)) static CUdeviceptr leak_here(void) { return grab(0, 1 << 20); }

static void drop(int dev, CUdeviceptr p)
{
    cuCtxSetCurrent(g_c[dev]);
    cuMemFree(p);
}

static void *work(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "worker2");
    void *h;
    cuCtxSetCurrent(g_c[0]);
    if (cuMemAllocHost(&h, 4 << 20) != CUDA_SUCCESS) return (void *)1;
    usleep(200); /* pinned host memory well before the devices' first entry */
    weights(0, 100 << 20);
    weights(1, 50 << 20);
    if (!strcmp(g_mode, "onestep")) {
        mark("step 0");
        usleep(20);
        push("step");
        CUdeviceptr a = activation(0, 10 << 20);
        usleep(500);
        drop(0, a);
        pop();
        mark("done");
        return NULL;
    }
    for (int s = 0; s < 8; s++) {
        char nm[32];
        snprintf(nm, sizeof nm, "step %d", s);
        mark(nm);
        push("fwd");
        CUdeviceptr a = activation(0, 10 << 20), b = activation(1, 20 << 20);
        leak_here();
        usleep(1000);
        drop(0, a);
        drop(1, b);
        pop();
    }
    mark("end");
    if (!strcmp(g_mode, "oom1")) {
        CUdeviceptr p = 0;
        cuCtxSetCurrent(g_c[1]);
        if (cuMemAlloc(&p, (size_t)1 << 40) == CUDA_SUCCESS) return (void *)1; /* (larger than any fake device) */
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) g_mode = argv[1];
    g_mark = (name_fn)dlsym(RTLD_DEFAULT, "cmh_mark");
    g_push = (name_fn)dlsym(RTLD_DEFAULT, "cmh_range_push");
    g_pop = (pop_fn)dlsym(RTLD_DEFAULT, "cmh_range_pop");
    if (cuInit(0) != CUDA_SUCCESS) return 2;
    for (int i = 0; i < 2; i++) {
        CUdevice d;
        if (cuDeviceGet(&d, i) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&g_c[i], d) != CUDA_SUCCESS) {
            fprintf(stderr, "consist_prog: no device %d (FAKECUDA_DEVICES=2)\n", i);
            return 2;
        }
    }
    pthread_t t;
    void *rc;
    if (pthread_create(&t, NULL, work, NULL) || pthread_join(t, &rc)) return 2;
    return rc ? 1 : 0;
}
