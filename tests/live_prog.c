/*
 * live_prog.c - a program to watch while it runs (the live tests: tests/live_test.sh,
 * tests/prometheus_test.sh; bench/rows_obs.sh).  `live_prog leak|steady|churn STEPS STEP_MS`:
 * each step is marked ("step N"), allocates 1 MiB of activations and frees them; the leaking
 * one also keeps 2 MiB a step in keep_cache(); churn does 1000 small allocations and frees a
 * step (the event rate of the benchmark).  After its steps it waits for SIGTERM (or 600 s).
 * With LIVE_READY=FILE it creates FILE after its first step, with LIVE_DONE=FILE after its last
 * (the tests wait for it, not a guessed time, before they compare figures that must hold still).
 * `exec` makes one step, then execs sleep 600 (a program that records nothing: its registry
 * entry must go stale).  `oomexit`, after its steps, waits until the file LIVE_GO names exists
 * (600 s at most), then asks for 1 TiB (an out-of-memory error) and exits 1 at once, as a job
 * that dies of its OOM: its end must not take the OOM from the live commands.
 */
#include <cuda.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumemhist/blocks.h"

static CUdeviceptr g_kept[100000];
static int g_nkept;

__attribute__((noinline)) static void keep_cache(void)
{
    if (g_nkept < 100000 && cuMemAlloc(&g_kept[g_nkept], 2 << 20) == CUDA_SUCCESS) g_nkept++;
}

__attribute__((noinline)) static void activations(void)
{
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS) cuMemFree(p);
}

__attribute__((noinline)) static void churn(void)
{
    for (int i = 0; i < 1000; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 4096) == CUDA_SUCCESS) cuMemFree(p);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: live_prog leak|steady|churn|exec|oomexit STEPS STEP_MS\n");
        return 2;
    }
    int leak = !strcmp(argv[1], "leak"), many = !strcmp(argv[1], "churn");
    long steps = atol(argv[2]), ms = atol(argv[3]);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 1;
    CUdeviceptr weights;
    cuMemAlloc(&weights, 8 << 20); /* held from the start: state, not a leak */
    const char *ready = getenv("LIVE_READY");
    for (long s = 0; steps <= 0 || s < steps; s++) {
        char name[32];
        snprintf(name, sizeof name, "step %ld", s);
        CMH_MARK(name);
        if (many) churn();
        else activations();
        if (leak) keep_cache();
        if (s == 0 && ready) close(open(ready, O_CREAT | O_WRONLY, 0600));
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
        nanosleep(&t, NULL);
    }
    const char *done = getenv("LIVE_DONE");
    if (done) close(open(done, O_CREAT | O_WRONLY, 0600));
    if (!strcmp(argv[1], "exec")) {
        execl("/bin/sleep", "sleep", "600", (char *)NULL);
        return 3;
    }
    if (!strcmp(argv[1], "oomexit")) {
        const char *go = getenv("LIVE_GO");
        for (int i = 0; i < 6000 && go && access(go, F_OK) != 0; i++) {
            struct timespec t = {0, 100000000};
            nanosleep(&t, NULL);
        }
        CUdeviceptr big;
        if (cuMemAlloc(&big, 1ull << 40) == CUDA_SUCCESS) return 3; /* (the fake device is far smaller) */
        return 1;
    }
    sleep(600);
    return 0;
}
