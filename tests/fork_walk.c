/*
 * fork_walk - fork while the recorder's helper thread walks the loader's modules (its 100 ms
 * tick looks for objects unloaded; tests/slow_walk.c, preloaded, keeps such a walk inside
 * dl_iterate_phdr 300 ms, the window a fork hits by chance made wide enough to hit every
 * time).  The child allocates, which starts its own flight record and so walks the modules
 * too: it must finish.  Exit 0: the child allocated and ended; 1: it hung (killed after about
 * 20 s); 2: set-up or the child failed.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loop_prog.h"

int main(void)
{
    CUcontext ctx;
    if (loop_context(&ctx)) return 2;
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) return 2; /* the recorder starts: its helper too */
    int *inside = (int *)dlsym(RTLD_DEFAULT, "slow_walk_inside");
    if (!inside) return 2;
    struct timespec ms = {0, 1000000};
    while (!__atomic_load_n(inside, __ATOMIC_SEQ_CST)) nanosleep(&ms, NULL);
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        cuCtxSetCurrent(ctx);
        CUdeviceptr q;
        _exit(cuMemAlloc(&q, 1 << 20) == CUDA_SUCCESS ? 0 : 3);
    }
    int st = 0, waited = 0;
    while (waitpid(pid, &st, WNOHANG) == 0 && waited < 20000) {
        nanosleep(&ms, NULL);
        waited++;
    }
    int hung = waited >= 20000;
    if (hung) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    int ok = !hung && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("child %s\n", hung ? "hung" : ok ? "allocated and ended" : "failed");
    return hung ? 1 : ok ? 0 : 2;
}
