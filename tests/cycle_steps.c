/*
 * cycle_steps.c - a loop whose buffer's size comes round every few steps, with no leak
 * (tests/cycle_test.sh): `cycle_steps PERIOD N [CUT]`.  Each of N iterations allocates a buffer
 * of 1 + i % PERIOD MiB and a scratch block of 512 KiB, frees the scratch, then the buffer; the
 * last iteration stops before its buffer's free (it is still live at exit), as a run that ends
 * mid-step.  A stranger's program of this shape read 'growing: +914.3 KiB per step over the last
 * 7 steps' (exit 3 for --fail-on-leak) at N = 300 and 'state' at N = 302.
 *
 * With CUT (1: after the buffer's allocation, 2: after the scratch's, 3: after the scratch's
 * free) the last iteration stops there and the program waits (for SIGTERM, or 600 s), having
 * created the file CYCLE_READY names: a process to take a snapshot of mid-step, as `snapshot
 * PID`, `top` and the exporter do of a running one.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop_prog.h"

static void wait_here(void)
{
    const char *ready = getenv("CYCLE_READY");
    if (ready) {
        int fd = open(ready, O_CREAT | O_WRONLY, 0600);
        if (fd >= 0) close(fd);
    }
    for (int i = 0; i < 6000; i++) usleep(100000);
    exit(0);
}

__attribute__((noinline)) static CUdeviceptr buffer(int i, int period)
{
    CUdeviceptr a;
    CK(cuMemAlloc(&a, (size_t)(1 + i % period) << 20));
    return a;
}

__attribute__((noinline)) static CUdeviceptr scratch(void)
{
    CUdeviceptr b;
    CK(cuMemAlloc(&b, 512 << 10));
    return b;
}

int main(int argc, char **argv)
{
    int period = argc > 1 ? atoi(argv[1]) : 7, n = argc > 2 ? atoi(argv[2]) : 300, cut = argc > 3 ? atoi(argv[3]) : 0;
    if (period < 1 || n < 1) return 2;
    loop_device0();
    for (int i = 0; i < n; i++) {
        int last = i == n - 1;
        CUdeviceptr a = buffer(i, period);
        if (last && cut == 1) wait_here();
        CUdeviceptr b = scratch();
        if (last && cut == 2) wait_here();
        usleep(1000);
        CK(cuMemFree(b));
        if (last && cut == 3) wait_here();
        if (last) break; /* the last step cut short: its buffer still live at exit */
        CK(cuMemFree(a));
    }
    return 0;
}
