/*
 * after_loop.c - a training loop, then work after it: weights made once, STEPS steps that each
 * make and free an activation and a gradient, then an evaluation buffer kept to the end (made
 * after the last step: not a step's memory), and a final temporary.  With "marks", each step
 * begins with cmh_mark("step N") (found through dlsym: the program runs under the preloaded
 * recorder without linking it).  With "reshape", the steps from STEPS/2 on make three
 * activations, an attention buffer and four small KV blocks, 16 events a step where there were 4
 * (the loop changes shape halfway, as a schedule's next phase does).  With "leak", every step
 * keeps 1 MiB more (a leak across both shapes), from keep_history, whose code is kv_block's: a
 * compiler folding identical functions (gcc -O2's identical-code folding) makes the two one
 * site, a sanitizer build keeps them two.  With "apart", from keep_apart, two sites in every
 * build: its code differs, and it is neither inlined nor folded.
 *   after_loop [STEPS [marks|plain [reshape|same [leak|apart]]]]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

static void fail(void)
{
    fprintf(stderr, "after_loop: cuMemAlloc failed\n");
    exit(1);
}
/* each function below its own allocation site (a macro: an inlined helper would be the site) */
#define GRAB(n)                                                \
    do {                                                       \
        if (cuMemAlloc(&p, (n)) != CUDA_SUCCESS) fail();       \
    } while (0)
__attribute__((noinline)) static CUdeviceptr weights(void)
{
    CUdeviceptr p;
    GRAB(8 << 20);
    return p;
}
__attribute__((noinline)) static CUdeviceptr activation(void)
{
    CUdeviceptr p;
    GRAB(4 << 20);
    return p;
}
__attribute__((noinline)) static CUdeviceptr gradient(void)
{
    CUdeviceptr p;
    GRAB(2 << 20);
    return p;
}
__attribute__((noinline)) static CUdeviceptr attention(void)
{
    CUdeviceptr p;
    GRAB(3 << 20);
    return p;
}
__attribute__((noinline)) static CUdeviceptr kv_block(void)
{
    CUdeviceptr p;
    GRAB(1 << 20);
    return p;
}
__attribute__((noinline)) static CUdeviceptr keep_history(void)
{
    CUdeviceptr p;
    GRAB(1 << 20);
    return p;
}
#if defined(__GNUC__) && !defined(__clang__)
#define NOT_FOLDED __attribute__((noinline, noipa))
#else
#define NOT_FOLDED __attribute__((noinline))
#endif
static volatile unsigned g_kept;
NOT_FOLDED static CUdeviceptr keep_apart(void)
{
    CUdeviceptr p;
    GRAB(1 << 20);
    g_kept++; /* (code of its own: no function to fold it into) */
    return p;
}
__attribute__((noinline)) static CUdeviceptr eval_buffer(void)
{
    CUdeviceptr p;
    GRAB(16 << 20);
    return p;
}
__attribute__((noinline)) static CUdeviceptr report_temp(void)
{
    CUdeviceptr p;
    GRAB(1 << 20);
    return p;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    loop_mark_fn mark = loop_marks(argc > 2 && !strcmp(argv[2], "marks"));
    int reshape = argc > 3 && !strcmp(argv[3], "reshape"), leak = argc > 4 && !strcmp(argv[4], "leak"),
        apart = argc > 4 && !strcmp(argv[4], "apart");
    if (loop_context(NULL)) return 2;
    weights();
    for (int s = 0; s < steps; s++) {
        loop_step(mark, s);
        if (reshape && s >= steps / 2) {
            CUdeviceptr a[3], k[4], t;
            for (int i = 0; i < 3; i++) a[i] = activation();
            t = attention();
            for (int i = 0; i < 4; i++) k[i] = kv_block();
            for (int i = 0; i < 4; i++) cuMemFree(k[i]);
            cuMemFree(t);
            for (int i = 0; i < 3; i++) cuMemFree(a[i]);
        } else {
            CUdeviceptr a = activation(), g = gradient();
            cuMemFree(g);
            cuMemFree(a);
        }
        if (leak) keep_history();
        if (apart) keep_apart();
    }
    if (mark) mark("eval");
    eval_buffer(); /* kept to the end */
    cuMemFree(report_temp());
    return 0;
}
