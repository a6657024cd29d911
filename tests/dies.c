/*
 * dies.c - a driver-API program that makes 100 allocations (50 freed: 150 trace entries) and
 * then ends the way it is told, for tests/deaths_test.sh:
 *   dies exit | _exit | segv | abrt | fpe | ill | bus | kill | term | int | sleep SECONDS | block DIR | exec | until FILE
 * (sleep: prints "ready" once the allocations are made, then sleeps.)
 * (until: prints "ready" once the allocations are made, then exits 0 once FILE exists (a test
 * fills the snapshot's directory meanwhile), or after 120 s.)
 * (_exit: _exit(0), no exit handler runs.)
 * (block: make DIR, where the snapshot was to go, a directory, then exit 0.)
 * (exec: exec() itself as `dies exit`: two programs in one process, 150 entries each.)
 */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) static void work(int n)
{
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) exit(2);
        if (i % 2) cuMemFree(p);
    }
}

int main(int argc, char **argv)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    work(100);
    const char *how = argc > 1 ? argv[1] : "exit";
    if (!strcmp(how, "segv")) { /* a real fault */
        volatile int *volatile nowhere = NULL;
        *nowhere = 1;
    }
    if (!strcmp(how, "abrt")) abort();
    if (!strcmp(how, "fpe")) raise(SIGFPE);
    if (!strcmp(how, "ill")) raise(SIGILL);
    if (!strcmp(how, "bus")) raise(SIGBUS);
    if (!strcmp(how, "kill")) raise(SIGKILL);
    if (!strcmp(how, "_exit")) _exit(0);
    if (!strcmp(how, "term")) raise(SIGTERM);
    if (!strcmp(how, "int")) raise(SIGINT);
    if (!strcmp(how, "sleep")) { /* "ready" once its 150 entries are made: what a test waits for */
        printf("ready\n");
        fflush(stdout);
        sleep(argc > 2 ? (unsigned)atoi(argv[2]) : 30);
    }
    if (!strcmp(how, "until") && argc > 2) {
        printf("ready\n");
        fflush(stdout);
        struct timespec pause = {0, 10000000};
        for (int i = 0; i < 12000 && access(argv[2], F_OK) != 0; i++) nanosleep(&pause, NULL);
    }
    if (!strcmp(how, "block") && argc > 2) mkdir(argv[2], 0700);
    if (!strcmp(how, "exec")) {
        execl("/proc/self/exe", argv[0], "exit", (char *)NULL);
        return 3;
    }
    return 0;
}
