/*
 * outpath_prog.c - a driver-API program for tests/outpath_test.sh: allocates 4 MiB, then
 *   -c DIR   changes to DIR (as Hydra and `cd $WORKDIR` wrappers do),
 * allocates N MiB more (-m N, default 2), then
 *   -r FILE  writes its pid to FILE (it is running and has used CUDA),
 *   -w FILE  waits until FILE exists (at most 120 s; a signal ends it sooner),
 * and returns 0 from main (its exit dump is written).
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        if ((x) != CUDA_SUCCESS) {                                                                                     \
            fprintf(stderr, "%s failed\n", #x);                                                                        \
            return 2;                                                                                                  \
        }                                                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    const char *dir = NULL, *ready = NULL, *wait = NULL;
    int mb = 2, opt;
    while ((opt = getopt(argc, argv, "c:m:r:w:")) != -1) {
        if (opt == 'c') dir = optarg;
        else if (opt == 'm') mb = atoi(optarg);
        else if (opt == 'r') ready = optarg;
        else if (opt == 'w') wait = optarg;
        else return 64;
    }
    CUdevice d;
    CUcontext c;
    CUdeviceptr p, q;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
    CK(cuMemAlloc(&p, 4 << 20));
    if (dir && chdir(dir) != 0) {
        perror(dir);
        return 3;
    }
    CK(cuMemAlloc(&q, (size_t)mb << 20));
    if (ready) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", ready);
        FILE *f = fopen(tmp, "w");
        if (!f) return 4;
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
        if (rename(tmp, ready) != 0) return 4;
    }
    struct timespec pause = {0, 20000000};
    for (int i = 0; wait && i < 6000 && access(wait, F_OK) != 0; i++) nanosleep(&pause, NULL);
    return 0;
}
