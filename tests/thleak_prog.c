/* thleak_prog.c - 4 threads, each doing 8 allocations and 8 frees a step for 40 steps, thread 2
 * leaking 2 MiB a step, after main's 256 MiB model: the process-wide pattern over interleaved
 * threads is a matter of scheduling; leaks' header must not be (leakhdr_test.sh). */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static CUcontext g_ctx;
static void *worker(void *arg) {
    long id = (long)arg;
    cuCtxSetCurrent(g_ctx);
    for (int s = 0; s < 40; s++) {
        CUdeviceptr tmp[8];
        for (int i = 0; i < 8; i++) cuMemAlloc(&tmp[i], (size_t)(1 + i) << 20);
        for (int i = 0; i < 8; i++) cuMemFree(tmp[i]);
        if (id == 2) { CUdeviceptr l; cuMemAlloc(&l, 2 << 20); }   /* thread 2 leaks 2 MiB a step */
        usleep(2000);
    }
    return NULL;
}
int main(void) {
    CUdevice d; cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&g_ctx, d); cuCtxSetCurrent(g_ctx);
    CUdeviceptr model; cuMemAlloc(&model, 256 << 20);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return 0;
}
