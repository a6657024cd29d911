/* fork_tid.c - a parent that allocates (its thread numbered and named), then forks a child that
 * allocates: the child's record must give its blocks the child's own thread id (kin_test.sh). */
#include <cuda.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
    CUdevice d; CUcontext c; CUdeviceptr p, q;
    cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
    cuMemAlloc(&p, 1 << 20); /* the parent's thread is named before the fork */
    pid_t k = fork();
    if (k == 0) { cuMemAlloc(&q, 2 << 20); printf("child %d\n", (int)getpid()); fflush(stdout); _exit(0); }
    waitpid(k, NULL, 0);
    return 0;
}
