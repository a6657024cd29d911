/*
 * dlclose_lib.c - a library that allocates device memory, opened and closed again by
 * dlclose_prog.c (tests/attribution_test.sh): its frames must keep their names after dlclose.
 */
#include <cuda.h>

CUdeviceptr dl_alloc(size_t bytes);
CUdeviceptr dl_alloc(size_t bytes)
{
    CUdeviceptr p = 0;
    cuMemAlloc(&p, bytes);
    return p;
}
