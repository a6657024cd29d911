/*
 * pairs_die.c - N cuMemAlloc/cuMemFree pairs (pair k of 256 * (k + 1) bytes, so that the order
 * can be checked), then a death by SIGKILL (or "exit"), for tests/hot_flight_test.sh: enough
 * entries to cross many extents of the flight record and, with a bounded ring, its checkpoints.
 *   pairs_die N [kill|exit]
 */
#include <cuda.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    if (argc < 2 || cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    long n = atol(argv[1]);
    for (long k = 0; k < n; k++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 256 * (size_t)(k + 1)) != CUDA_SUCCESS) return 3;
        cuMemFree(p);
    }
    if (argc < 3 || strcmp(argv[2], "exit")) raise(SIGKILL);
    return 0;
}
