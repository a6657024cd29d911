/*
 * reload_prog.c LIB_A LIB_B - stacks after a library is unloaded and another is mapped at its
 * address (tests/reload_test.sh).  Two threads, the main one and a worker, each allocate through
 * LIB_A's a_call (cb called back from it) ROUNDS times; the main thread closes LIB_A and opens
 * LIB_B, which must land at the same address (tried up to 20 times: "same address" on stdout);
 * then both threads allocate through LIB_B's b_call, whose return address is a_call's (the
 * worker's stacks through A and B are the same PCs, frame for frame).  The
 * worker never calls dlopen or dlclose itself: its caches learn of the change from the generation.
 * A's allocations are 1 MiB, B's 3 MiB; each is freed at once.  With a third argument "close",
 * LIB_B is closed too before the exit: both libraries are then gone at the dump, at one address.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "loop_prog.h"

#define ROUNDS 50
typedef void (*call_fn)(void (*)(void));

static __thread size_t g_bytes; /* each thread its own: the main thread and the worker run at once */
static __thread volatile int g_calls;

__attribute__((noinline)) static void cb(void)
{
    CUdeviceptr p;
    if (cuMemAlloc(&p, g_bytes) == CUDA_SUCCESS) cuMemFree(p);
    g_calls++;
}

/* the frame a stale rule skips: it keeps a frame pointer, and does something after the call */
__attribute__((noinline)) static void use_lib(call_fn f, size_t bytes)
{
    g_bytes = bytes;
    f(cb);
    g_calls++;
}

static pthread_barrier_t g_bar;
static call_fn g_fn;
static size_t g_worker_bytes;
static volatile int g_phases = 2; /* a loop the compiler cannot unroll: one call site for both */

__attribute__((noinline)) static void rounds(call_fn f, size_t bytes)
{
    for (int i = 0; i < ROUNDS; i++) use_lib(f, bytes);
    g_calls++;
}

/* The worker's stacks through A and through B are the very same PCs: one call site each. */
static void *worker(void *arg)
{
    (void)arg;
    CUcontext c;
    CUdevice d;
    if (cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return NULL;
    for (int phase = 0; phase < g_phases; phase++) {
        pthread_barrier_wait(&g_bar); /* g_fn set */
        rounds(g_fn, g_worker_bytes);
        pthread_barrier_wait(&g_bar); /* done with it */
    }
    return NULL;
}

static uintptr_t base_of(void *h)
{
    struct link_map *lm = NULL;
    return h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm ? (uintptr_t)lm->l_addr : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || loop_context(NULL)) return 2;
    pthread_t t;
    pthread_barrier_init(&g_bar, NULL, 2);
    if (pthread_create(&t, NULL, worker, NULL)) return 2;
    void *ha = NULL, *hb = NULL;
    uintptr_t at_a = 0, at_b = 0;
    for (int tries = 0; tries < 20 && (!hb || at_a != at_b); tries++) {
        if (hb) dlclose(hb);
        ha = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        call_fn fa = ha ? (call_fn)dlsym(ha, "a_call") : NULL;
        if (!fa) {
            fprintf(stderr, "%s\n", dlerror());
            return 3;
        }
        at_a = base_of(ha);
        /* the main thread allocates through A on every try; the worker on the first */
        for (int i = 0; i < ROUNDS; i++) use_lib(fa, 1 << 20);
        if (tries == 0) {
            g_fn = fa;
            g_worker_bytes = 1 << 20;
            pthread_barrier_wait(&g_bar);
            pthread_barrier_wait(&g_bar);
        }
        if (dlclose(ha)) return 4;
        hb = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        at_b = base_of(hb);
    }
    call_fn fb = hb ? (call_fn)dlsym(hb, "b_call") : NULL;
    if (!fb) return 5;
    printf("A at %#lx, B at %#lx: %s\n", (unsigned long)at_a, (unsigned long)at_b, at_a == at_b ? "same address" : "moved");
    fflush(stdout);
    g_fn = fb;
    g_worker_bytes = 3 << 20;
    pthread_barrier_wait(&g_bar);
    for (int i = 0; i < ROUNDS; i++) use_lib(fb, 3 << 20);
    pthread_barrier_wait(&g_bar);
    pthread_join(t, NULL);
    if (argc > 3 && !strcmp(argv[3], "close") && dlclose(hb)) return 6;
    return 0;
}
