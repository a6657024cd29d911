/*
 * fleet_rank.c - one rank of a data-parallel job, on the CUDA driver API: start it once per rank
 * with RANK, LOCAL_RANK and WORLD_SIZE set, as torchrun would, and look at the records with
 * `cumemhist ranks` (tests/fleet_test.sh does).
 *
 * Each rank uses device LOCAL_RANK (modulo the devices it sees: one, under a launcher that gives each
 * rank its own GPU through CUDA_VISIBLE_DEVICES), holds its shard of the weights (64 MiB + 4 MiB per rank:
 * a small systematic imbalance) and runs STEPS training steps, each marked "step N": it
 * allocates the step's activations and frees them.  Two ranks misbehave, chosen by environment:
 *   FLEET_LEAK_RANK  keeps a 1 MiB batch cache per step and never frees it (a leak);
 *   FLEET_OOM_RANK   asks for FLEET_OOM_MIB MiB (default 1024) at step FLEET_OOM_STEP
 *                    (default 3), prints the driver's error and exits 1, as a framework would.
 *
 * usage: fleet_rank [STEPS]   (default 8)
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "cumemhist/blocks.h"

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static int check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return 0;
    const char *s = NULL;
    cuGetErrorName(r, &s);
    fprintf(stderr, "fleet_rank: %s: %s\n", what, s ? s : "error");
    return -1;
}

__attribute__((noinline)) static CUdeviceptr load_weights(size_t bytes)
{
    CUdeviceptr p = 0;
    if (check(cuMemAlloc(&p, bytes), "cuMemAlloc (weights)")) exit(1);
    return p;
}

__attribute__((noinline)) static int forward_activations(size_t bytes, CUdeviceptr *out)
{
    return check(cuMemAlloc(out, bytes), "cuMemAlloc (activations)");
}

__attribute__((noinline)) static CUdeviceptr cache_batch(void)
{
    CUdeviceptr p = 0;
    if (check(cuMemAlloc(&p, 1 << 20), "cuMemAlloc (batch cache)")) exit(1);
    return p;
}

__attribute__((noinline)) static int gather_all(size_t bytes)
{
    CUdeviceptr p = 0;
    if (check(cuMemAlloc(&p, bytes), "cuMemAlloc (all-gather buffer)")) return -1;
    cuMemFree(p);
    return 0;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 8;
    int rank = env_int("RANK", 0), local = env_int("LOCAL_RANK", rank);
    int leak_rank = env_int("FLEET_LEAK_RANK", -1), oom_rank = env_int("FLEET_OOM_RANK", -1);
    int oom_step = env_int("FLEET_OOM_STEP", 3);
    size_t oom_bytes = (size_t)env_int("FLEET_OOM_MIB", 1024) << 20;
    CUdevice dev;
    CUcontext ctx;
    int ndev = 0;
    /* device LOCAL_RANK of those it sees, as torchrun's ranks pick theirs; a launcher that gives
     * each rank one GPU (CUDA_VISIBLE_DEVICES) leaves it one: LOCAL_RANK modulo the count */
    if (check(cuInit(0), "cuInit") || check(cuDeviceGetCount(&ndev), "cuDeviceGetCount")) return 1;
    if (ndev > 0) local %= ndev;
    if (check(cuDeviceGet(&dev, local), "cuDeviceGet") ||
        check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") || check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
        return 1;
    CUdeviceptr w = load_weights((size_t)(64 + 4 * rank) << 20);
    for (int s = 0; s < steps; s++) {
        char mark[32];
        snprintf(mark, sizeof mark, "step %d", s);
        CMH_MARK(mark);
        CUdeviceptr act[4];
        for (int k = 0; k < 4; k++)
            if (forward_activations((size_t)(8 + k) << 20, &act[k])) return 1;
        if (rank == leak_rank) cache_batch();
        if (rank == oom_rank && s == oom_step && gather_all(oom_bytes)) return 1;
        for (int k = 3; k >= 0; k--) cuMemFree(act[k]);
    }
    cuMemFree(w);
    printf("fleet_rank: rank %d done, %d steps\n", rank, steps);
    return 0;
}
