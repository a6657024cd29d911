/*
 * time_leak.c - a leak paced by time on the main thread, no steps, no marks: one block of SIZE
 * bytes kept every US microseconds, N times (a program that allocates 1 MiB every 10 ms
 * forever, cut at N), then, with PLATEAU_MS, a wait of that long holding them (a warm-up that
 * fills a cache and plateaus), and a free of nothing.
 * On device DEVICE (a rank's own GPU).
 *   time_leak [N [US [SIZE [PLATEAU_MS [DEVICE]]]]]   (default 150 10000 1048576 0 0)
 */
#include <cuda.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 150, us = argc > 2 ? atoi(argv[2]) : 10000;
    size_t size = argc > 3 ? (size_t)atoll(argv[3]) : 1u << 20;
    int plateau_ms = argc > 4 ? atoi(argv[4]) : 0, devno = argc > 5 ? atoi(argv[5]) : 0;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, devno) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 1;
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, size)) return 2; /* kept: the leak */
        usleep((useconds_t)us);
    }
    if (plateau_ms > 0) usleep((useconds_t)plateau_ms * 1000);
    return 0;
}
