/*
 * ringsite.c - a block whose allocation the ring drops, freed inside the kept window (for
 * tests/ringsite_test.sh): make_weights() takes 64 MiB, twelve steps each take and free 8 MiB,
 * then release_weights() frees the 64 MiB.  Recorded with --max-entries 11, the window holds the
 * last five steps and the free: the weights are live at the window's allocated peak with no
 * allocation entry.  The pickle export named release_weights' cuMemFree line as their allocation
 * site (peak, flamegraph), and owners, peak and the flamegraph each gave another reason for it.
 * `ringsite many N`: N blocks made, then all freed, so that a window of N entries holds N frees
 * of blocks it never saw allocated (the pickle's cumemhist.free_frames: one item each).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

static CUdeviceptr weights;

__attribute__((noinline)) static int make_weights(void) { return cuMemAlloc(&weights, 64u << 20) != CUDA_SUCCESS; }

__attribute__((noinline)) static int step(void)
{
    CUdeviceptr a;
    if (cuMemAlloc(&a, 8u << 20) != CUDA_SUCCESS) return 1;
    return cuMemFree(a) != CUDA_SUCCESS;
}

__attribute__((noinline)) static int release_weights(void) { return cuMemFree(weights) != CUDA_SUCCESS; }

static int many(int n)
{
    CUdeviceptr *p = calloc((size_t)n, sizeof *p);
    if (!p) return 1;
    for (int i = 0; i < n; i++)
        if (cuMemAlloc(&p[i], 4096) != CUDA_SUCCESS) return 1;
    for (int i = 0; i < n; i++)
        if (cuMemFree(p[i]) != CUDA_SUCCESS) return 1;
    free(p);
    printf("ringsite: ran %d\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    if (loop_context(NULL)) return 2;
    if (argc > 2 && !strcmp(argv[1], "many")) return many(atoi(argv[2]));
    if (make_weights()) return 1;
    for (int i = 0; i < 12; i++)
        if (step()) return 1;
    if (release_weights()) return 1;
    printf("ringsite: ran\n");
    return 0;
}
