/*
 * bench_hooks.c - what a hooked allocation costs.
 *
 * Prints ns per cuMemAlloc+cuMemFree pair straight into the driver (the baseline) and through
 * libcumemhist's wrappers in the same process (dlopen'ed, wrappers called by address), with
 * recording off, on without stacks, and on with 32-frame stacks; events per second; and bytes
 * per trace entry in the dumped .cmh.  Figures only: nothing here passes or fails on time.
 *
 * Then 8 threads at once (on however many cores there are): CPU time per pair against one
 * thread's, hooked and bare, so contention inside the recorder shows as the difference.
 *
 * usage: bench_hooks [path/to/libcumemhist.so] [pairs]   (run with the fake driver on
 * LD_LIBRARY_PATH, or on a GPU host with the real one).  The recorder's files (its exit
 * snapshot, its flight record) go to a temporary directory that is removed at the end.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cumemhist/recorder.h"

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static alloc_fn g_alloc;
static free_fn g_free;
static long g_pairs;

/* stream-ordered pairs, through the same loop */
typedef CUresult (*async_alloc_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*async_free_fn)(CUdeviceptr, CUstream);
static async_alloc_fn g_aalloc;
static async_free_fn g_afree;
static CUresult async_alloc(CUdeviceptr *p, size_t n) { return g_aalloc(p, n, 0); }
static CUresult async_free(CUdeviceptr p) { return g_afree(p, 0); }

static double run_pairs(void)
{
    double t0 = now();
    for (long i = 0; i < g_pairs; i++) {
        CUdeviceptr p;
        if (g_alloc(&p, 4096 + (size_t)(i & 7) * 512) != CUDA_SUCCESS || g_free(p) != CUDA_SUCCESS) {
            fprintf(stderr, "bench_hooks: allocation failed\n");
            exit(1);
        }
    }
    return (now() - t0) / (double)g_pairs;
}

/* Run at a given stack depth so the unwinder has real frames to walk. */
__attribute__((noinline)) static double at_depth(int d)
{
    if (d > 0) {
        double r = at_depth(d - 1);
        __asm__ volatile("" ::: "memory"); /* keep the frame: no tail call */
        return r;
    }
    return run_pairs();
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *thread_pairs(void *arg)
{
    (void)arg;
    CUcontext ctx;
    CUdevice dev;
    if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return (void *)1;
    run_pairs();
    return NULL;
}

/* CPU ns per pair with nthreads running the loop at once */
static double threaded(int nthreads)
{
    pthread_t th[64];
    double c0 = cpu_now();
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, thread_pairs, NULL) != 0) return -1;
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    return (cpu_now() - c0) / ((double)g_pairs * nthreads);
}

static double best_threaded(int reps, int nthreads)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double v = threaded(nthreads);
        if (v >= 0 && v < best) best = v;
    }
    return best;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static double best_of(int reps, int depth)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double v = at_depth(depth);
        if (v < best) best = v;
    }
    return best;
}

int main(int argc, char **argv)
{
    char lib[PATH_MAX];
    if (argc > 1) snprintf(lib, sizeof lib, "%s", argv[1]);
    else {
        ssize_t n = readlink("/proc/self/exe", lib, sizeof lib - 1);
        lib[n > 0 ? n : 0] = 0;
        char *sl = strrchr(lib, '/');
        snprintf(sl ? sl + 1 : lib, sizeof lib - (size_t)(sl ? sl + 1 - lib : 0), "libcumemhist.so");
    }
    g_pairs = argc > 2 ? atol(argv[2]) : 200000;
    /* the recorder's exit snapshot and flight record: not in the current directory */
    char tmpdir[] = "/tmp/cmh-bench-hooks-XXXXXX", out[PATH_MAX];
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(out, sizeof out, "%s/bench.cmh", tmpdir);
    setenv("CUMEMHIST_OUTPUT", out, 1);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "bench_hooks: no CUDA device (put the fake driver on LD_LIBRARY_PATH)\n");
        return 2;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench_hooks: %s\n", dlerror());
        return 2;
    }
    alloc_fn w_alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    free_fn w_free = (free_fn)dlsym(h, "cuMemFree_v2");
    int (*rec)(const cmh_options *) = (int (*)(const cmh_options *))dlsym(h, "cmh_record_memory_history");
    int (*dump)(const char *) = (int (*)(const char *))dlsym(h, "cmh_dump_snapshot");
    if (!w_alloc || !w_free || !rec || !dump) {
        fprintf(stderr, "bench_hooks: %s does not export the recorder API\n", lib);
        return 2;
    }
    const int reps = 5, depth = 40;
    printf("bench_hooks: %ld alloc+free pairs per run, best of %d, call depth %d\n", g_pairs, reps, depth);

    g_alloc = cuMemAlloc;
    g_free = cuMemFree;
    at_depth(depth); /* warm up the driver */
    double base = best_of(reps, depth);

    g_alloc = w_alloc;
    g_free = w_free;
    cmh_options off = {CMH_ENABLED_OFF, CMH_CONTEXT_NONE, 0, 32, 1};
    rec(&off);
    double t_off = best_of(reps, depth);

    cmh_options nostack = {CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 1000000, 32, 1};
    rec(&nostack);
    double t_nostack = best_of(reps, depth);

    cmh_options stacks = {CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 1000000, 32, 1};
    rec(&stacks);
    double t_stacks = best_of(reps, depth);

    cmh_options stacks_alloc = {CMH_ENABLED_ALL, CMH_CONTEXT_ALLOC, 1000000, 32, 1};
    rec(&stacks_alloc);
    double t_alloc_ctx = best_of(reps, depth);

    /* the baseline again, last: the best of both runs, so warm-up never flatters the hooks */
    g_alloc = cuMemAlloc;
    g_free = cuMemFree;
    double base2 = best_of(reps, depth);
    if (base2 < base) base = base2;

    printf("%-44s %8.1f ns/pair\n", "driver alone (baseline)", base);
    printf("%-44s %8.1f ns/pair  (+%.1f ns)\n", "hooked, recording off", t_off, t_off - base);
    printf("%-44s %8.1f ns/pair  (+%.1f ns, %.2fx)\n", "hooked, enabled=all context=none", t_nostack, t_nostack - base,
           t_nostack / base);
    printf("%-44s %8.1f ns/pair  (+%.1f ns, %.2fx)\n", "hooked, context=alloc (1 stack/pair, 32 fr)", t_alloc_ctx,
           t_alloc_ctx - base, t_alloc_ctx / base);
    printf("%-44s %8.1f ns/pair  (+%.1f ns, %.2fx)\n", "hooked, context=all (2 stacks/pair, 32 fr)", t_stacks,
           t_stacks - base, t_stacks / base);
    printf("%-44s %8.2f M events/s\n", "recording rate, context=all", 2e3 / t_stacks);

    /* bytes per entry: the ring holds the last 1,000,000 entries with interned stacks */
    char path[] = "/tmp/cmh-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    double d0 = now();
    if (dump(path) != CMH_OK) {
        fprintf(stderr, "bench_hooks: dump failed\n");
        return 1;
    }
    double dump_ms = (now() - d0) / 1e6;
    struct stat st;
    stat(path, &st);
    unlink(path);
    printf("%-44s %8.2f B/entry  (%lld bytes for 1000000 entries, dump %.0f ms)\n", ".cmh size, context=alloc",
           (double)st.st_size / 1e6, (long long)st.st_size, dump_ms);
    /* stream-ordered: each hooked operation also samples its pool (two attribute queries) */
    async_alloc_fn w_aalloc = (async_alloc_fn)dlsym(h, "cuMemAllocAsync");
    async_free_fn w_afree = (async_free_fn)dlsym(h, "cuMemFreeAsync");
    double abase = 0, a_hooked = 0;
    if (w_aalloc && w_afree) {
        g_alloc = async_alloc;
        g_free = async_free;
        g_aalloc = cuMemAllocAsync;
        g_afree = cuMemFreeAsync;
        abase = best_of(reps, depth);
        g_aalloc = w_aalloc;
        g_afree = w_afree;
        cmh_options nostack = {CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 1000000, 32, 1};
        rec(&nostack);
        a_hooked = best_of(reps, depth);
        g_aalloc = cuMemAllocAsync;
        g_afree = cuMemFreeAsync;
        double abase2 = best_of(reps, depth);
        if (abase2 < abase) abase = abase2;
    }

    if (abase > 0) {
        printf("%-44s %8.1f ns/pair\n", "async driver alone (baseline)", abase);
        printf("%-44s %8.1f ns/pair  (+%.1f ns; the pool samples: +%.1f ns over a linear pair)\n",
               "async hooked, context=none, pool sampled", a_hooked, a_hooked - abase, (a_hooked - abase) - (t_nostack - base));
    }
    /* threads: CPU per pair, 8 at once against 1, bare and hooked (context=none) */
    g_alloc = cuMemAlloc;
    g_free = cuMemFree;
    double b1 = best_threaded(3, 1), b8 = best_threaded(3, 8);
    g_alloc = w_alloc;
    g_free = w_free;
    rec(&nostack);
    double h1 = best_threaded(3, 1), h8 = best_threaded(3, 8);
    printf("%-44s %8.1f ns/pair CPU, 8 threads %8.1f  (%.2fx)\n", "driver alone, 1 thread", b1, b8, b8 / b1);
    printf("%-44s %8.1f ns/pair CPU, 8 threads %8.1f  (%.2fx; recorder's own: +%.1f vs +%.1f ns)\n",
           "hooked, context=none, 1 thread", h1, h8, h8 / h1, h1 - b1, h8 - b8);
    rec(&off);
    fflush(stdout);
    remove_dir(tmpdir);
    _exit(0); /* no exit snapshot: the figures are the output */
}
