/*
 * stops_leak.c - a training loop whose leak stops halfway: weights made once, then STEPS steps
 * that each make and free an activation and a gradient, and for the first STOP steps keep 1 MiB
 * more (a history that stops growing).  With "marks", each step begins with cmh_mark("step N"),
 * found through dlsym so that the program runs under the preloaded recorder without linking it.
 *   stops_leak [STEPS [STOP [marks]]]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

__attribute__((noinline)) static CUdeviceptr weights(void) { return loop_grab(8 << 20); }
__attribute__((noinline)) static CUdeviceptr activation(void) { return loop_grab(4 << 20); }
__attribute__((noinline)) static CUdeviceptr gradient(void) { return loop_grab(2 << 20); }
__attribute__((noinline)) static CUdeviceptr keep_history(void) { return loop_grab(1 << 20); }

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20, stop = argc > 2 ? atoi(argv[2]) : 10;
    loop_mark_fn mark = loop_marks(argc > 3 && !strcmp(argv[3], "marks"));
    if (loop_context(NULL)) return 2;
    weights();
    for (int s = 0; s < steps; s++) {
        loop_step(mark, s);
        CUdeviceptr a = activation(), g = gradient();
        if (s < stop) keep_history();
        cuMemFree(g);
        cuMemFree(a);
    }
    return 0;
}
