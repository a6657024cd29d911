/*
 * lifecycle.c - a driver-API program whose life ends in ways the recorder must not change, for
 * tests/lifecycle_test.sh:
 *   lifecycle mainexit          allocate 8 MiB, then pthread_exit() from main: the process ends
 *                               (status 0) when its last thread does, here main itself
 *   lifecycle lastworker        allocate 8 MiB, start a thread that makes 20 allocations of 1 MiB
 *                               (2 ms apart), pthread_exit() from main: that thread is the last
 *   lifecycle closefds [N]      allocate 4 MiB, close every descriptor from 3 up (as a daemon
 *                               does), open out.txt (which takes the lowest number, one the
 *                               recorder's was), make N allocations (default 50; odd ones freed),
 *                               write to out.txt, return 0 from main
 *   lifecycle forks N           allocate 1 MiB, then N times: fork a child that allocates 2 MiB
 *                               and _exit(0)s, wait for it; return 0
 *   lifecycle oom               on device 2 (FAKECUDA_DEVICES=3, FAKECUDA_CAPACITY=64M): 16 MiB
 *                               allocations until one fails, free all but one, fail again with a
 *                               128 MiB one, free all; device 0 keeps 1 MiB
 */
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static CUcontext ctx;

static void init(int dev)
{
    CUdevice d;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d, dev) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        exit(2);
}

static CUdeviceptr alloc(size_t n)
{
    CUdeviceptr p;
    if (cuMemAlloc(&p, n) != CUDA_SUCCESS) exit(2);
    return p;
}

static void *worker(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    struct timespec pause = {0, 2000000};
    for (int i = 0; i < 20; i++) {
        alloc(1u << 20);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "";
    if (!strcmp(how, "mainexit") || !strcmp(how, "lastworker")) {
        init(0);
        alloc(8u << 20);
        pthread_t t;
        if (how[0] == 'l' && pthread_create(&t, NULL, worker, NULL) != 0) return 2;
        pthread_exit(NULL);
    }
    if (!strcmp(how, "closefds")) {
        init(0);
        alloc(4u << 20);
        int closed = 0;
        for (int fd = 3; fd < 1024; fd++) closed += close(fd) == 0;
        printf("closed %d\n", closed);
        fflush(stdout);
        int f = open("out.txt", O_CREAT | O_TRUNC | O_WRONLY, 0644);
        if (f < 0 || write(f, "hello\n", 6) != 6) return 2;
        int n = argc > 2 ? atoi(argv[2]) : 50;
        for (int i = 0; i < n; i++) {
            CUdeviceptr b = alloc(1u << 10);
            if (i % 2) cuMemFree(b);
        }
        if (write(f, "world\n", 6) != 6) return 2;
        close(f);
        return 0;
    }
    if (!strcmp(how, "forks") && argc > 2) {
        init(0);
        alloc(1u << 20);
        for (int k = 0; k < atoi(argv[2]); k++) {
            pid_t p = fork();
            if (p < 0) return 2;
            if (p == 0) {
                init(0);
                alloc(2u << 20);
                _exit(0);
            }
            waitpid(p, NULL, 0);
        }
        return 0;
    }
    if (!strcmp(how, "oom")) {
        init(0);
        alloc(1u << 20);
        init(2);
        CUdeviceptr b[64];
        int n = 0, fails = 0;
        while (n < 64 && cuMemAlloc(&b[n], 16u << 20) == CUDA_SUCCESS) n++;
        fails += n < 64;
        while (n > 1) cuMemFree(b[--n]);
        CUdeviceptr big;
        fails += cuMemAlloc(&big, 128u << 20) != CUDA_SUCCESS;
        while (n > 0) cuMemFree(b[--n]);
        printf("ooms %d\n", fails);
        return 0;
    }
    fprintf(stderr, "usage: lifecycle mainexit | lastworker | closefds | forks N | oom\n");
    return 2;
}
