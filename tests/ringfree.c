/*
 * ringfree.c - memory the program freed after its last cuMemGetInfo sample, in a ring too small
 * to keep the frees' start (for tests/owners_test.sh): 100 MiB buffers until the device runs out
 * (the recorder samples cuMemGetInfo at the error: N x 100 MiB in use), then each freed.  Recorded
 * with --max-entries 5, the ring keeps the last 5 frees: its window begins with 500 MiB live,
 * after the sample.  The sample is of another moment than any the record can replay to: owners
 * charged the program's since-freed buffers to "not recorded (CUDA context, other processes)".
 * With an argument it ends by SIGKILL after the frees: no exit dump, so no sample at the end.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <signal.h>
#include <stdio.h>

#include "loop_prog.h"

int main(int argc, char **argv)
{
    (void)argv;
    if (loop_context(NULL)) return 2;
    CUdeviceptr b[64];
    int n = 0;
    while (n < 64 && cuMemAlloc(&b[n], 100u << 20) == CUDA_SUCCESS) n++;
    printf("held %d\n", n);
    while (n) cuMemFree(b[--n]);
    fflush(stdout);
    if (argc > 1) raise(SIGKILL);
    return 0;
}
