/*
 * stops_leak.c - a training loop whose leak stops halfway: weights made once, then STEPS steps
 * that each make and free an activation and a gradient, and for the first STOP steps keep 1 MiB
 * more (a history that stops growing).  With "marks", each step begins with cmh_mark("step N"),
 * found through dlsym so that the program runs under the preloaded recorder without linking it.
 *   stops_leak [STEPS [STOP [marks]]]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static CUdeviceptr grab(size_t n)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) {
        fprintf(stderr, "stops_leak: cuMemAlloc failed\n");
        exit(1);
    }
    return p;
}
__attribute__((noinline)) static CUdeviceptr weights(void) { return grab(8 << 20); }
__attribute__((noinline)) static CUdeviceptr activation(void) { return grab(4 << 20); }
__attribute__((noinline)) static CUdeviceptr gradient(void) { return grab(2 << 20); }
__attribute__((noinline)) static CUdeviceptr keep_history(void) { return grab(1 << 20); }

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20, stop = argc > 2 ? atoi(argv[2]) : 10;
    int (*mark)(const char *) = argc > 3 && !strcmp(argv[3], "marks") ? (int (*)(const char *))dlsym(RTLD_DEFAULT, "cmh_mark") : NULL;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 2;
    weights();
    for (int s = 0; s < steps; s++) {
        char name[32];
        snprintf(name, sizeof name, "step %d", s);
        if (mark) mark(name);
        CUdeviceptr a = activation(), g = gradient();
        if (s < stop) keep_history();
        cuMemFree(g);
        cuMemFree(a);
    }
    return 0;
}
