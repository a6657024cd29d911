/*
 * vmm_held.c - physical memory made with cuMemCreate and held mapped nowhere: 20 MiB created and
 * never mapped, 8 MiB mapped, unmapped and never released (the two leaks), beside 4 MiB mapped
 * twice and kept mapped once (a segment: its second map unmapped in two halves) and 6 MiB
 * created and released (gone), and 2 MiB released while mapped, its handle value made again for
 * 2 MiB that is mapped, the first's map then unmapped (the fake driver gives the freed value
 * back; exit 3 if it did not): 28 MiB held that no segment shows.  Each call site is its own function, so each has its own stack.  `vmm_held only`: the
 * 20 MiB handle alone, no map nor any other allocation (the process is recorded all the same).
 * `vmm_held fork`: that handle, then a fork whose child makes 2 MiB it never maps and prints
 * its pid (the child's record holds its own 2 MiB, not the parent's 20).  `vmm_held kill`: the
 * whole program, then SIGKILL (no exit dump: its flight record is all that is left).  `vmm_held
 * ckpt`: the same, with 300,000 cuMemAlloc/cuMemFree pairs after the handles and a wait (up to
 * 30 s) for a checkpoint of $CUMEMHIST_OUTPUT's flight record before the SIGKILL: run with a
 * bounded ring (CUMEMHIST_MAX_ENTRIES) and CUMEMHIST_FLIGHT=1, the handles' first records are
 * in a generation the checkpoint replaced.  `vmm_held hold`: the whole program, then it creates
 * $VMM_READY and waits (up to 60 s) to be killed, for readers of a running process.
 *   vmm_held [only|fork|kill|ckpt|hold]
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loop_prog.h"

#define MIB (1ull << 20)

static CUmemAllocationProp g_prop;

/* n bytes of device 0's physical memory; a failure ends the program */
#define MAKE(name, mib)                                                                                                  \
    __attribute__((noinline)) static CUmemGenericAllocationHandle name(void)                                           \
    {                                                                                                                    \
        CUmemGenericAllocationHandle h = 0;                                                                              \
        if (cuMemCreate(&h, (mib) * MIB, &g_prop, 0) != CUDA_SUCCESS) {                                                  \
            fprintf(stderr, "vmm_held: cuMemCreate failed (%d MiB)\n", (mib));                                            \
            exit(1);                                                                                                     \
        }                                                                                                                \
        return h;                                                                                                        \
    }

MAKE(never_mapped, 20)
MAKE(unmapped_later, 8)
MAKE(kept_mapped, 4)
MAKE(released, 6)
MAKE(released_mapped, 2)
MAKE(same_value, 2)
MAKE(in_child, 2)

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "vmm_held: %s failed (%d)\n", what, (int)r);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (loop_context(NULL)) return 2;
    g_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    g_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    g_prop.location.id = 0;
    if (argc > 1 && !strcmp(argv[1], "only")) return never_mapped() ? 0 : 1;
    if (argc > 1 && !strcmp(argv[1], "fork")) {
        (void)never_mapped();
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (!pid) {
            (void)in_child();
            printf("%d\n", (int)getpid());
            return 0;
        }
        int st;
        return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
    }
    CUdeviceptr va = 0;
    check(cuMemAddressReserve(&va, 32 * MIB, 0, 0, 0), "cuMemAddressReserve");
    CUmemGenericAllocationHandle a = never_mapped();
    CUmemGenericAllocationHandle b = unmapped_later();
    CUmemGenericAllocationHandle c = kept_mapped();
    CUmemGenericAllocationHandle d = released();
    (void)a;
    check(cuMemMap(va, 8 * MIB, 0, b, 0), "cuMemMap");
    check(cuMemMap(va + 8 * MIB, 4 * MIB, 0, c, 0), "cuMemMap");
    check(cuMemMap(va + 12 * MIB, 4 * MIB, 0, c, 0), "cuMemMap"); /* c twice */
    check(cuMemUnmap(va, 8 * MIB), "cuMemUnmap");
    check(cuMemUnmap(va + 12 * MIB, 2 * MIB), "cuMemUnmap"); /* c's second map, half by half: */
    check(cuMemUnmap(va + 14 * MIB, 2 * MIB), "cuMemUnmap"); /* still mapped at va + 8 MiB */
    check(cuMemRelease(d), "cuMemRelease");
    CUmemGenericAllocationHandle e = released_mapped();
    check(cuMemMap(va + 16 * MIB, 2 * MIB, 0, e, 0), "cuMemMap");
    check(cuMemRelease(e), "cuMemRelease"); /* released while mapped, as allocators do */
    CUmemGenericAllocationHandle f = same_value();
    check(cuMemMap(va + 18 * MIB, 2 * MIB, 0, f, 0), "cuMemMap");
    check(cuMemUnmap(va + 16 * MIB, 2 * MIB), "cuMemUnmap"); /* e's memory goes; f stays mapped */
    if (f != e) {
        fprintf(stderr, "vmm_held: the fake driver did not give the released handle's value back\n");
        return 3;
    }
    if (argc > 1 && !strcmp(argv[1], "ckpt")) {
        for (int i = 0; i < 300000; i++) {
            CUdeviceptr p;
            check(cuMemAlloc(&p, 256), "cuMemAlloc");
            cuMemFree(p);
        }
        const char *out = getenv("CUMEMHIST_OUTPUT");
        char x[4096], y[4096];
        snprintf(x, sizeof x, "%s.flight.ckpt1.cmh", out ? out : "");
        snprintf(y, sizeof y, "%s.flight.ckpt2.cmh", out ? out : "");
        struct timespec tick = {0, 10000000};
        for (int i = 0; out && i < 3000 && access(x, F_OK) && access(y, F_OK); i++) nanosleep(&tick, NULL);
    }
    if (argc > 1 && (!strcmp(argv[1], "kill") || !strcmp(argv[1], "ckpt"))) raise(SIGKILL);
    if (argc > 1 && !strcmp(argv[1], "hold")) {
        const char *ready = getenv("VMM_READY");
        FILE *f = ready ? fopen(ready, "w") : NULL;
        if (f) fclose(f);
        for (int i = 0; i < 600; i++) usleep(100000);
    }
    return 0;
}
