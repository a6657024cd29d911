/*
 * kin_prog.c - a parent with two threads, each on its own device running the same loop of
 * steps, and a forked child that uses the GPU and is killed, for tests/kin_test.sh:
 *   kin_prog [STEPS [LEAKDEVS]]    (default 20 steps; LEAKDEVS: "0", "1", "01" or "-", default "0")
 * Thread 1 works on device 0, thread 2 on device 1 (both named "worker"); in each step a worker
 * allocates 256 KiB and frees it, from worker() through grab(), and where its device is in
 * LEAKDEVS first allocates 1 MiB that it keeps.  Before the threads start, the parent forks a child that
 * allocates 2 MiB and is killed by SIGKILL; its pid goes to stdout as "child PID".
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_steps = 20;
static const char *g_leak = "0";

__attribute__((noinline)) static CUdeviceptr grab(size_t n)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) exit(1);
    return p;
}

__attribute__((noinline)) static void *worker(void *arg)
{
    int dev = (int)(long)arg;
    CUdevice d;
    CUcontext c;
    pthread_setname_np(pthread_self(), "worker");
    if (cuDeviceGet(&d, dev) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS)
        exit(2);
    int leak = strchr(g_leak, '0' + dev) != NULL;
    for (int s = 0; s < g_steps; s++) {
        if (leak) grab(1 << 20);
        cuMemFree(grab(256 << 10));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) g_steps = atoi(argv[1]);
    if (argc > 2) g_leak = argv[2];
    if (cuInit(0) != CUDA_SUCCESS) return 2;
    pid_t child = fork();
    if (child == 0) {
        CUdevice d;
        CUcontext c;
        if (cuDeviceGet(&d, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS)
            _exit(2);
        grab(2 << 20);
        raise(SIGKILL);
    }
    printf("child %ld\n", (long)child);
    fflush(stdout);
    waitpid(child, NULL, 0);
    pthread_t th[2];
    for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    return 0;
}
