/*
 * unwind_prog.c - stacks for tests/unwind_test.sh to walk both ways (the recorder's walk and
 * libunwind's, CUMEMHIST_UNWINDER=check), built twice: with frame pointers (unwind_prog_fp) and
 * without (unwind_prog_nofp).  Every case allocates and frees under the recorder (context all):
 *   deep     20 calls deep, then cuMemAlloc/cuMemFree; and under twin_a or twin_b, two copies of
 *            one function (the walks start at the same %rsp, the stacks differ in one frame)
 *   twins    rbp twins (below): two stacks that differ only in where a saved %rbp points
 *   mid      through libunwind_mid.so (no frame pointers) and back: mid_call, and mid_clobber,
 *            which keeps a number in %rbp across the call
 *   qsort    from inside libc's qsort comparator (a callback from frame-pointer-less libc)
 *   threads  4 threads doing deep and mid
 *   signal   in a SIGUSR1 handler, on the thread's stack and on a sigaltstack
 *   nocfi    under a hand-written function with no unwind entry at all
 * usage: unwind_prog [ROUNDS]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

typedef int (*mid_cb)(int);
int mid_call(mid_cb cb, int d);
int mid_clobber(mid_cb cb, int d);

static int g_fail;

__attribute__((noinline)) static int alloc_free(int d)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, 4096 + (size_t)d * 256) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) g_fail = 1;
    __asm__ volatile("" ::: "memory"); /* keep the frame: no tail call */
    return (int)(p & 1);
}

__attribute__((noinline)) static int deep(int d)
{
    if (d > 0) {
        int r = deep(d - 1);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    return alloc_free(d);
}

/* twins: the same code, so the same frame sizes, so the walk starts at the same %rsp under
 * either; only the return addresses tell the stacks apart */
__attribute__((noinline)) int twin_a(int d)
{
    int r = deep(d);
    __asm__ volatile("" ::: "memory");
    return r;
}
__attribute__((noinline)) int twin_b(int d)
{
    int r = deep(d);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

/* rbp twins: V's frame has a size of the caller's choosing (alloca: its CFA is %rbp-based), and
 * W1 and W2 differ in their own frame's size, both called from one call instruction; V's size
 * is chosen so that under either the walk starts at the same %rsp and meets the same return
 * addresses below V.  Only the saved %rbp tells where V's return address is, and so whether
 * the stack goes through W1 or W2 (under W2 the slot where W1's return address was is in V's
 * unwritten alloca area, still holding it). */
static volatile int g_probe;
static volatile uintptr_t g_probe_at;

__attribute__((noinline)) static int leaf_v(int d)
{
    if (g_probe) {
        volatile char here = 0;
        g_probe_at = (uintptr_t)&here;
        return here;
    }
    return deep(d);
}

__attribute__((noinline)) static int frame_v(int k)
{
    char *p = __builtin_alloca((size_t)k);
    p[0] = 1;
    __asm__ volatile("" : : "r"(p) : "memory");
    int r = leaf_v(2);
    __asm__ volatile("" ::: "memory");
    return r + p[0];
}

__attribute__((noinline)) static int w1(int k)
{
    volatile char pad[512];
    pad[0] = 0;
    pad[511] = 0;
    int r = frame_v(k);
    __asm__ volatile("" ::: "memory");
    return r + pad[0];
}

__attribute__((noinline)) static int w2(int k)
{
    volatile char pad[16];
    pad[0] = 0;
    int r = frame_v(k);
    __asm__ volatile("" ::: "memory");
    return r + pad[0];
}

static int (*volatile g_w[2])(int) = {w1, w2};

static void rbp_twins(long rounds)
{
    g_probe = 1;
    g_w[0](64);
    uintptr_t a1 = g_probe_at;
    g_w[1](64);
    long k2 = 64 + (long)(g_probe_at - a1);
    if (k2 > 0) g_w[1]((int)k2);
    int same = k2 > 0 && g_probe_at == a1;
    g_probe = 0;
    printf("rbp twins: %s\n", same ? "the same start" : "different starts");
    for (long j = 0; j < 2 * rounds && same; j++) {
        int w = (int)(j & 1);
        g_w[w](w ? (int)k2 : 64); /* one call instruction for both */
    }
}

static int cb_deep(int d) { return deep(d); }

/* twice through: program -> library -> program -> library -> program */
static int cb_again(int d) { return mid_clobber(cb_deep, d + 2) + 1; }

__attribute__((noinline)) static int through_mid(int d)
{
    int r = mid_call(cb_deep, d) + mid_clobber(cb_deep, d + 1) + mid_call(cb_again, d);
    __asm__ volatile("" ::: "memory");
    return r;
}

static int cmp_alloc(const void *a, const void *b)
{
    alloc_free(3);
    return *(const int *)a - *(const int *)b;
}

static void on_usr1(int sig)
{
    (void)sig;
    deep(4);
}

__attribute__((noinline, used)) int nocfi_target(void) { return deep(5); }

/* a function the unwind tables know nothing about: it calls nocfi_target */
__asm__(".text\n"
        ".globl nocfi_tramp\n"
        ".type nocfi_tramp,@function\n"
        "nocfi_tramp:\n"
        "  push %rbx\n"
        "  call nocfi_target\n"
        "  pop %rbx\n"
        "  ret\n"
        ".size nocfi_tramp, .-nocfi_tramp\n");
int nocfi_tramp(void);

static void *thread_main(void *arg)
{
    long rounds = (long)arg;
    CUdevice dev;
    CUcontext ctx;
    if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) g_fail = 1;
    for (long i = 0; i < rounds; i++) {
        deep(20);
        through_mid((int)(i & 3));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 50;
    if (loop_context(NULL)) return 2;
    for (long i = 0; i < rounds; i++) {
        deep(20);
        deep((int)(i % 7));
        through_mid((int)(i & 3));
        for (int k = 0; k < 6; k++) (k % 3 ? twin_a : twin_b)(6);
    }
    rbp_twins(rounds);
    int v[8] = {5, 3, 8, 1, 9, 2, 7, 4};
    qsort(v, 8, sizeof *v, cmp_alloc);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, thread_main, (void *)rounds);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    static stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_size = 1 << 16;
    ss.ss_sp = malloc(ss.ss_size);
    if (ss.ss_sp && sigaltstack(&ss, NULL) == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sa.sa_flags = SA_ONSTACK;
        sigaction(SIGUSR1, &sa, NULL);
        raise(SIGUSR1);
    }
    nocfi_tramp();
    printf("unwind_prog: %s\n", g_fail ? "an allocation failed" : "done");
    return g_fail;
}
