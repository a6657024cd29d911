/*
 * bench_stacks.c - stack capture alone (recorder/stacks.c + recorder/unwind.c, linked in with
 * stubs for the rest of the recorder): ns per captured and interned stack, one mode per process.
 *
 * usage: bench_stacks DEPTH [distinct] [CAPTURES]
 *   DEPTH     frames of the loop's own recursion under the capture (the stack is DEPTH plus main's
 *             few; at most 32 kept, as the recorder's default)
 *   distinct  every capture a stack not seen before (the recursion takes one of two functions
 *             at each level, by the bits of the capture's number): the interning's miss path
 * The walk and the cache are chosen as in the recorder: CUMEMHIST_UNWINDER=fast|libunwind|glibc,
 * CUMEMHIST_STACK_CACHE=0, CUMEMHIST_WALK_MEMO=0.  Times are the thread's CPU time, best of 5, less
 * the same loop without the capture; the first capture (every rule read from .eh_frame) is
 * printed on its own.  Figures only: nothing passes or fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* ---- what stacks.c needs from the rest of the recorder ---- */
cmh_config cmh_cfg = {.max_frames = 32};
uint64_t cmh_lost;
void *cmh_dlsym_resolve(void) { return (void *)(uintptr_t)&dlsym; }
int cmh_in_own_module(const void *p)
{
    (void)p;
    return 0;
}
void cmh_log(const char *fmt, ...) { (void)fmt; }
int cmh_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg) { return dl_iterate_phdr(cb, arg); }
void cmh_flight_stack(uint32_t id, const uintptr_t *pcs, uint32_t depth)
{
    (void)id;
    (void)pcs;
    (void)depth;
}
int cmh_pystack_capture(uintptr_t *out, int max)
{
    (void)out;
    (void)max;
    return 0;
}
int cmh_pystack_in_interp(uintptr_t pc)
{
    (void)pc;
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static long g_n;
static int g_distinct, g_bare;
static volatile uint32_t g_sink;

__attribute__((noinline)) static void down_a(int d, long i);
__attribute__((noinline)) static void down_b(int d, long i);
static void down(int d, long i)
{
    if (g_distinct && (i >> d) & 1) down_b(d, i);
    else down_a(d, i);
}
__attribute__((noinline)) static void down_a(int d, long i)
{
    if (d > 0) down(d - 1, i);
    else g_sink = g_bare ? 1 : cmh_stack_capture();
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void down_b(int d, long i)
{
    if (d > 0) down(d - 1, i);
    else g_sink = g_bare ? 1 : cmh_stack_capture();
    __asm__ volatile("" ::: "memory");
}

/* ns per pass through the loop: with the capture, or without (g_bare) */
static double timed(int depth)
{
    double best = 1e30;
    long base = 1;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (long i = 0; i < g_n; i++) down(depth, g_distinct ? base + i : 0);
        double v = (now() - t0) / (double)g_n;
        if (v < best) best = v;
        base += g_n;
    }
    return best;
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 20;
    g_distinct = argc > 2 && !strcmp(argv[2], "distinct");
    g_n = argc > 3 ? atol(argv[3]) : 200000;
    double t0 = now();
    down(depth, 0);
    double first = now() - t0;
    const uintptr_t *pcs;
    uint32_t frames = cmh_stack_get(g_sink, &pcs, NULL);
    double with = timed(depth);
    g_bare = 1;
    double bare = timed(depth);
    const char *u = getenv("CUMEMHIST_UNWINDER"), *c = getenv("CUMEMHIST_STACK_CACHE");
    const char *mm = getenv("CUMEMHIST_WALK_MEMO");
    printf("capture: %s walk, memo %s, id cache %s, %s stacks of %u frames: %.1f ns/stack (loop %.1f, bare %.1f; first %.1f us)\n",
           u && *u ? u : "fast", mm && !strcmp(mm, "0") ? "off" : "on", c && !strcmp(c, "0") ? "off" : "on",
           g_distinct ? "distinct" : "repeated", frames, with - bare, with, bare, first / 1e3);
    return 0;
}
