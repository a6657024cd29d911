/* leak_refused.c - two sites whose leak verdict once hung on what the held bytes alone showed
 * (after a stranger's leakoom.c and dyn.c): a leak that runs into the device's limit and keeps
 * going (its requests refused every step, its held bytes flat: read 'stopped'), and a buffer
 * replaced by a larger one as larger ones are needed (a workspace: read 'stopped' or 'state' by
 * the sizes a seed drew).  Each step is marked ("step").
 *
 *   leak_refused oom       keeps 16 MiB a step beside a 100 MiB temporary, a failed request
 *                          ignored, 100 steps (run it with FAKECUDA_CAPACITY=1G: refused from step 46)
 *   leak_refused exit      the same, ending at its first failed request (exit 1)
 *   leak_refused workspace SEED   40 steps: a workspace of 1-64 MiB freed and made anew where a
 *                          step needs more, beside 1-5 temporaries of 1-16 MiB (dyn.c's sizes)
 *   leak_refused highwater SEED   the same sizes, the workspace grown by a block of the
 *                          difference kept beside the old (never freed): a high-water mark kept
 *                          in pieces */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_prog.h"

__attribute__((noinline)) static CUresult keep(CUdeviceptr *p) { return cuMemAlloc(p, 16 << 20); }

__attribute__((noinline)) static void workspace(CUdeviceptr *ws, size_t need) { CK(cuMemAlloc(ws, need)); }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "oom";
    unsigned seed = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 1;
    loop_mark_fn mark = loop_marks(1);
    loop_device0();
    if (!strcmp(mode, "oom") || !strcmp(mode, "exit")) {
        CUdeviceptr w = loop_grab(200 << 20), k;
        (void)w;
        for (int i = 0; i < 100; i++) {
            if (mark) mark("step");
            CUdeviceptr a = loop_grab(100 << 20);
            if (keep(&k) != CUDA_SUCCESS && !strcmp(mode, "exit")) return 1;
            CK(cuMemFree(a));
        }
        return 0;
    }
    srand(seed);
    CUdeviceptr ws = 0, piece;
    size_t wsz = 0;
    for (int i = 0; i < 40; i++) {
        if (mark) mark("step");
        size_t need = ((size_t)(rand() % 64) + 1) << 20;
        if (need > wsz) {
            if (!strcmp(mode, "workspace")) {
                if (ws) CK(cuMemFree(ws));
                workspace(&ws, need);
            } else workspace(&piece, need - wsz);
            wsz = need;
        }
        int n = 1 + rand() % 5;
        CUdeviceptr a[8];
        for (int j = 0; j < n; j++) a[j] = loop_grab((((size_t)rand() % 16) + 1) << 20);
        for (int j = 0; j < n; j++) CK(cuMemFree(a[j]));
    }
    return 0;
}
