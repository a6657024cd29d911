/*
 * dlclose_prog.c LIBRARY - allocates 1 MiB through LIBRARY's dl_alloc (kept), closes LIBRARY,
 * then allocates 2 MiB itself and exits: the exit snapshot must still name dl_alloc and the
 * library (tests/attribution_test.sh).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

#include "loop_prog.h"

int main(int argc, char **argv)
{
    if (argc < 2 || loop_context(NULL)) return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 3;
    }
    CUdeviceptr (*da)(size_t) = (CUdeviceptr(*)(size_t))dlsym(h, "dl_alloc");
    if (!da || !da(1 << 20)) return 4;
    if (dlclose(h)) return 5;
    CUdeviceptr p;
    return cuMemAlloc(&p, 2 << 20) == CUDA_SUCCESS ? 0 : 6;
}
