/* thleak_prog.c - 4 threads, each doing 8 allocations and 8 frees a step for 40 steps, thread 2
 * leaking 2 MiB a step, after main's 256 MiB model: the process-wide pattern over interleaved
 * threads is a matter of scheduling; leaks' header must not be (leakheader_test.sh).
 * `thleak_prog marks`: main marks each step ("step N", cmh_mark when preloaded) and the threads
 * take it in lockstep (a barrier); main makes nothing after its model, so it repeats no step. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static CUcontext g_ctx;
static int g_marks;
static pthread_barrier_t g_bar;
static void *worker(void *arg) {
    long id = (long)arg;
    cuCtxSetCurrent(g_ctx);
    for (int s = 0; s < 40; s++) {
        if (g_marks) pthread_barrier_wait(&g_bar);
        CUdeviceptr tmp[8];
        for (int i = 0; i < 8; i++) cuMemAlloc(&tmp[i], (size_t)(1 + i) << 20);
        for (int i = 0; i < 8; i++) cuMemFree(tmp[i]);
        if (id == 2) { CUdeviceptr l; cuMemAlloc(&l, 2 << 20); }   /* thread 2 leaks 2 MiB a step */
        if (g_marks) pthread_barrier_wait(&g_bar);
        else usleep(2000);
    }
    return NULL;
}
int main(int argc, char **argv) {
    g_marks = argc > 1 && !strcmp(argv[1], "marks");
    int (*mark)(const char *) = g_marks ? (int (*)(const char *))dlsym(RTLD_DEFAULT, "cmh_mark") : NULL;
    if (g_marks) pthread_barrier_init(&g_bar, NULL, 5);
    CUdevice d; cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&g_ctx, d); cuCtxSetCurrent(g_ctx);
    CUdeviceptr model; cuMemAlloc(&model, 256 << 20);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int s = 0; g_marks && s < 40; s++) { /* the step's mark, then its work (the threads'), done before the next mark */
        char name[32];
        snprintf(name, sizeof name, "step %d", s + 1);
        if (mark) mark(name);
        pthread_barrier_wait(&g_bar);
        pthread_barrier_wait(&g_bar);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return 0;
}
