/* dyn_steps.c - a training loop of dynamic shapes, with no marks or annotations (after a stranger's
 * program, dyn.c): each step makes 1-8 activations of 1-64 MiB (a pseudo-random sequence length
 * and sizes) and frees them, and keeps 1 MiB (a metric kept by mistake) from a function of its own.
 *
 *   dyn_steps SEED [WHERE [STEPS [US]]]
 *     SEED   the pseudo-random sequence (0: dyn.c's own)
 *     WHERE  where in a step the kept block is made: end (after the activations, before their
 *            frees: dyn.c), first (before the activations), mid (after the first half of them),
 *            anysize (as end, of 1-4 MiB: no op of one size once a step)
 *     STEPS  steps (50), US microseconds between steps (2000)
 *
 * The steps are STEPS, the kept block 1 MiB a step (anysize: 2.5 MiB on average). */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop_prog.h"

static CUdeviceptr keep[4096];
static const char *where = "end";
static unsigned seed;

__attribute__((noinline)) void keep_metric(int s, unsigned r)
{
    size_t mib = strcmp(where, "anysize") ? 1 : 1 + (r >> 20) % 4;
    CK(cuMemAlloc(&keep[s], mib << 20));
}

__attribute__((noinline)) void fwd(int s)
{
    unsigned r = (unsigned)s * 2654435761u + seed * 40503u;
    if (seed) r = r * 1103515245u + 12345u + seed; /* (seed 0: dyn.c's sequence) */
    int n = 1 + (int)((r >> 28) % 8);
    CUdeviceptr a[8];
    if (!strcmp(where, "first")) keep_metric(s, r);
    for (int i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        CK(cuMemAlloc(&a[i], (size_t)(1 + (r >> 16) % 64) << 20));
        if (!strcmp(where, "mid") && i == (n - 1) / 2) keep_metric(s, r);
    }
    if (!strcmp(where, "end") || !strcmp(where, "anysize")) keep_metric(s, r);
    for (int i = n - 1; i >= 0; i--) CK(cuMemFree(a[i]));
}

int main(int argc, char **argv)
{
    seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 0;
    if (argc > 2) where = argv[2];
    int steps = argc > 3 ? atoi(argv[3]) : 50;
    long us = argc > 4 ? atol(argv[4]) : 2000;
    if (steps < 1 || steps > 4096) return 2;
    loop_device0();
    for (int s = 0; s < steps; s++) {
        fwd(s);
        struct timespec t = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&t, 0);
    }
    return 0;
}
