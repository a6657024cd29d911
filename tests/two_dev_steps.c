/*
 * two_dev_steps.c - a two-device training loop that marks its steps from one thread, with device
 * 0 current: each step makes and frees an activation on each device, and device 1 keeps 1 MiB
 * more for the first STOP steps (a leak that stops halfway; STOP = STEPS: one that never stops).
 * The step marks are the process's, not device 0's: device 1's leak verdict is judged with them.
 * With LIVE_DONE=FILE it creates FILE after its last step and sleeps 60 s holding its memory
 * (for top and the exporter, which read running processes).  With FIRST, device 1 is first used
 * in step FIRST (from 0), after that step's mark: its trace holds the marks of the later steps
 * only (a mark goes into the traces of the devices used so far), and it works from that step on.
 *   two_dev_steps [STEPS [STOP [marks [FIRST]]]]    (run with FAKECUDA_DEVICES=2)
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "loop_prog.h"

__attribute__((noinline)) static CUdeviceptr weights(void) { return loop_grab(8 << 20); }
__attribute__((noinline)) static CUdeviceptr activation(void) { return loop_grab(4 << 20); }
__attribute__((noinline)) static CUdeviceptr keep_history(void) { return loop_grab(1 << 20); }

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20, stop = argc > 2 ? atoi(argv[2]) : 10;
    loop_mark_fn mark = loop_marks(argc > 3 && !strcmp(argv[3], "marks"));
    int first = argc > 4 ? atoi(argv[4]) : -1;
    CUcontext c0, c1;
    CUdevice d1;
    if (loop_context(&c0)) return 2;
    if (cuDeviceGet(&d1, 1) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c1, d1) != CUDA_SUCCESS) {
        fprintf(stderr, "two_dev_steps: no device 1 (FAKECUDA_DEVICES=2)\n");
        return 2;
    }
    weights();
    if (first < 0) {
        cuCtxSetCurrent(c1);
        weights();
        cuCtxSetCurrent(c0);
    }
    for (int s = 0; s < steps; s++) {
        loop_step(mark, s); /* device 0 is current */
        CUdeviceptr a0 = activation();
        if (s < first) {
            cuMemFree(a0);
            continue;
        }
        cuCtxSetCurrent(c1);
        if (s == first) weights();
        CUdeviceptr a1 = activation();
        if (s < stop) keep_history();
        cuMemFree(a1);
        cuCtxSetCurrent(c0);
        cuMemFree(a0);
    }
    const char *done = getenv("LIVE_DONE");
    if (done) {
        close(open(done, O_CREAT | O_WRONLY, 0600));
        sleep(60);
    }
    return 0;
}
