/*
 * forker.c - a parent that allocates, then forks one child per word of its arguments, each
 * child allocating on its own and ending the way the word says, for tests/fork_test.sh:
 *   forker [threaded | late | killed] HOW...      HOW: kill | segv | abort | _exit | exit | exit3 | hold
 * The parent makes 3 allocations of 1 MiB (kept) before the first fork (with "late", after the
 * last child ended: the children touch CUDA first, the first of them taking the flight record's
 * path that the parent's own takes over later); child i (from 0)
 * makes i + 2 allocations of (i + 1) * 64 KiB from a line of its own (kept), then ends.  With
 * "threaded", a second thread of the parent allocates and frees 64 KiB blocks (from a third
 * line) all the while the children are forked, a 4 KiB one kept every 64 rounds, and stops
 * after the last child has ended (or 300,000 rounds); the parent frees nothing of it.  For each child a line
 * "child PID HOW ALLOCS BYTES" goes to stdout as it is forked, and at the end
 * "parent PID ALLOCS BYTES": what each one's snapshot must hold live at the end (the parent's:
 * its allocations and its thread's, the frees counted apart as "parent_frees N").  With
 * "killed", the parent then ends by SIGKILL, its flight record all that is left of it; before
 * that, with FORKER_CHURN=N in the environment, it allocates and frees 64 KiB N times (from
 * thread_alloc's line), enough for a bounded ring's flight record to checkpoint.  With
 * FORKER_HOLD=FILE, the parent prints "holding" after its last line and waits for FILE to exist
 * before it ends (a running parent whose children have ended); a "hold" child waits for it too,
 * then exits (0), the parent not waiting for it before (a child still running).
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

#include "loop_prog.h"

static CUcontext g_ctx;
static volatile int g_stop;
static unsigned long g_thread_rounds, g_thread_kept;

__attribute__((noinline)) static CUdeviceptr parent_alloc(size_t size)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, size) != CUDA_SUCCESS) exit(2);
    return p;
}

__attribute__((noinline)) static CUdeviceptr child_alloc(size_t size)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, size) != CUDA_SUCCESS) _exit(2);
    return p;
}

__attribute__((noinline)) static CUdeviceptr thread_alloc(size_t size)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, size) != CUDA_SUCCESS) exit(3); /* (not parent_alloc's code: the two must stay two functions) */
    return p;
}

static void *churn(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(g_ctx);
    /* bounded, so that a child that hangs cannot make the parent's record grow without end */
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) && __atomic_load_n(&g_thread_rounds, __ATOMIC_RELAXED) < 300000) {
        CUdeviceptr p = thread_alloc(64 << 10);
        cuMemFree(p);
        unsigned long r = __atomic_load_n(&g_thread_rounds, __ATOMIC_RELAXED);
        if (r % 64 == 0) { /* a slow leak, so the parent's end state has its own shape */
            thread_alloc(4 << 10);
            g_thread_kept++;
        }
        __atomic_store_n(&g_thread_rounds, r + 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* until FORKER_HOLD's file exists (a bound of about 2 minutes for a test that never makes it) */
static void hold_on(void)
{
    const char *hold = getenv("FORKER_HOLD");
    for (int i = 0; hold && i < 12000 && access(hold, F_OK) != 0; i++) usleep(10000);
}

static void die(const char *how)
{
    fflush(NULL);
    if (!strcmp(how, "hold")) hold_on(); /* then exit(0) */
    if (!strcmp(how, "kill")) raise(SIGKILL);
    if (!strcmp(how, "segv")) {
        volatile int *volatile nowhere = NULL;
        *nowhere = 1;
    }
    if (!strcmp(how, "abort")) abort();
    if (!strcmp(how, "_exit")) _exit(0);
    if (!strcmp(how, "exit3")) exit(3);
    exit(0); /* "exit": atexit handlers run, the child's snapshot is written the ordinary way */
}

int main(int argc, char **argv)
{
    if (loop_context(&g_ctx)) return 2;
    int threaded = argc > 1 && !strcmp(argv[1], "threaded"), late = argc > 1 && !strcmp(argv[1], "late");
    int killed = argc > 1 && !strcmp(argv[1], "killed");
    int first = 1 + threaded + late + killed;
    for (int i = 0; i < 3 && !late; i++) parent_alloc(1 << 20);
    pid_t held[64];
    int nheld = 0;
    pthread_t t;
    if (argc - first > 64) return 2;
    if (threaded && pthread_create(&t, NULL, churn, NULL) != 0) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = first; i < argc; i++) {
        int k = i - first;
        if (threaded) /* the thread is in the middle of its work when the fork comes */
            while (__atomic_load_n(&g_thread_rounds, __ATOMIC_RELAXED) < (unsigned long)(k + 1) * 200) usleep(100);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) return 2;
        if (pid == 0) {
            cuCtxSetCurrent(g_ctx);
            for (int j = 0; j < k + 2; j++) child_alloc((size_t)(k + 1) << 16);
            die(argv[i]);
        }
        printf("child %ld %s %d %lu\n", (long)pid, argv[i], k + 2, (unsigned long)(k + 2) * ((unsigned long)(k + 1) << 16));
        int st;
        if (!strcmp(argv[i], "hold")) held[nheld++] = pid; /* still running while the parent holds */
        else
            while (waitpid(pid, &st, 0) < 0) {}
    }
    for (int i = 0; i < 3 && late; i++) parent_alloc(1 << 20);
    if (threaded) {
        __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
    }
    printf("parent %ld %lu %lu\n", (long)getpid(), 3 + g_thread_kept, (3ul << 20) + g_thread_kept * (4ul << 10));
    printf("parent_frees %lu\n", g_thread_rounds);
    /* FORKER_HOLD=FILE: the parent still runs, its children ended, until FILE exists (a bound
     * of about 2 minutes for a test that never makes it): what `cumemhist snapshot PID` sees */
    if (getenv("FORKER_HOLD")) {
        printf("holding\n");
        hold_on();
    }
    for (int i = 0, st; i < nheld; i++)
        while (waitpid(held[i], &st, 0) < 0) {}
    if (killed) {
        long churn = getenv("FORKER_CHURN") ? atol(getenv("FORKER_CHURN")) : 0;
        for (long i = 0; i < churn; i++) cuMemFree(thread_alloc(64 << 10));
        fflush(stdout);
        raise(SIGKILL);
    }
    return 0;
}
