/*
 * leaky.c - a driver-API program that leaks device memory, step after step.
 *
 * Each "training step" allocates activations and frees them, but load_batch() keeps a 4 MiB
 * cache buffer per step that is never freed: the slow leak users hunt.  Run it under the
 * recorder:   cumemhist record -- ./leaky 10   then   cumemhist summary cumemhist.<pid>.cmh
 * A second argument makes it wait that many seconds before exiting (time to send it SIGUSR1,
 * which makes the recorder dump a snapshot of the running process).
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static CUdeviceptr g_cache[1024];

__attribute__((noinline)) void load_batch(int step)
{
    CHECK(cuMemAlloc(&g_cache[step % 1024], 4 << 20)); /* the leak: never freed */
}

__attribute__((noinline)) void train_step(int step)
{
    CUdeviceptr act[4];
    for (int i = 0; i < 4; i++) CHECK(cuMemAlloc(&act[i], (size_t)(i + 1) << 20));
    load_batch(step);
    for (int i = 0; i < 4; i++) CHECK(cuMemFree(act[i]));
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    sample_init(NULL);
    CUdeviceptr weights;
    CHECK(cuMemAlloc(&weights, 64 << 20));
    for (int s = 0; s < steps; s++) train_step(s);
    CHECK(cuMemFree(weights));
    printf("leaky: %d step%s, %d MiB leaked\n", steps, steps == 1 ? "" : "s", steps * 4);
    fflush(stdout);
    /* a signal ends sleep() early (EINTR): sleep until the deadline */
    time_t end = time(NULL) + (argc > 2 ? atoi(argv[2]) : 0);
    while (time(NULL) < end) sleep(1);
    return 0;
}
