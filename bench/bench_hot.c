/*
 * bench_hot.c - the recorder's hot path, one mode per process, for the table of issue 27
 * (bench/rows_hot.sh runs it): ns per cuMemAlloc+cuMemFree pair over the bare driver at call
 * depth 20, the recorder's own CPU per pair with 8 threads against 1, and the footprint and
 * exit-dump figures of a long record.  One mode per process so that each starts with a fresh
 * ring and flight record, as a program would.  Figures only: nothing passes or fails on time.
 *
 * usage: bench_hot LIB MODE [PAIRS]
 *   MODE  none | none1m | alloc | all     ns per pair, best of 5 (context, --max-entries 1M)
 *         threads                        CPU per pair, 8 threads vs 1, hooked and bare, the mean
 *                                        of 3 bare and BENCH_ROUNDS (7) hooked runs of each, in
 *                                        turn, 8 x PAIRS pairs a run, each hooked round in a
 *                                        fresh process after 600,000 pairs; then by round: the
 *                                        median ratio, the process's CPU and the working threads'
 *                                        own (thread CPU clocks), and the helper's share
 *                                        (the fake driver with FAKECUDA_THREAD_CACHE=1: each
 *                                        thread's pairs take no lock in the driver, so the bare
 *                                        baseline is steady and the difference is the recorder's)
 *                                        (BENCH_ONLY=N: only N hooked threads, 8 x PAIRS pairs
 *                                        in all, 3 times: for a profiler)
 *         dump                           PAIRS pairs (unlimited, context none), then the
 *                                        recorder's bytes per entry and one dump: its time and
 *                                        peak RSS against the RSS before it
 * Times are the process's CPU time (BENCH_CLOCK=wall for the wall clock); the dump's is wall.
 * The single-thread modes print a second line: the same runs on the calling thread's own CPU
 * clock (the hooks' cost to the caller, without the helper thread's background work).
 * The recorder's files go to $BENCH_DIR (default /tmp), in a directory removed once it ended;
 * CUMEMHIST_FLIGHT=0 in the environment turns the flight record off as for any program.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cumemhist/recorder.h"
#include "flight_format.h" /* the record's header: whether it lost records */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

static alloc_fn g_alloc;
static free_fn g_free;
static long g_pairs;

static double clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The clock the single-thread modes read: the process's CPU time (BENCH_CLOCK=wall: the wall
 * clock).  CPU time counts the helper thread's work for the recorder and leaves out the time
 * other programs on a shared machine took the core; wall time counts both. */
static clockid_t g_clock = CLOCK_PROCESS_CPUTIME_ID;

/* the kernel's share of the process's CPU (getrusage: every thread's, the helper's too), ns */
static double sys_ns(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_stime.tv_sec * 1e9 + (double)u.ru_stime.tv_usec * 1e3;
}

/* The kernel's part: ns per pair of this thread's last run, and best_of's mean over its runs.  A
 * kernel that accounts CPU time by the tick (CONFIG_TICK_CPU_ACCOUNTING, 250 Hz here) splits user
 * from system by sampling, so one 70 ms run's split is a handful of samples: the mean of all the
 * runs is the figure, the best run's would be noise. */
static _Thread_local double g_sys_last;
static double g_sys_mean;

/* The calling thread's own CPU per pair (CLOCK_THREAD_CPUTIME_ID) of the last run, and the best
 * of best_of's runs: what the hooks cost the thread that calls the driver, without the helper
 * thread's work for the recorder (populating the rings' and the flight record's next pages,
 * giving written pages back), which the process's figure counts. */
static _Thread_local double g_thr_last;
static double g_thr_best;

static double run_pairs(void)
{
    double s0 = sys_ns();
    double h0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    double t0 = clock_ns(g_clock);
    for (long i = 0; i < g_pairs; i++) {
        CUdeviceptr p;
        if (g_alloc(&p, 4096 + (size_t)(i & 7) * 512) != CUDA_SUCCESS || g_free(p) != CUDA_SUCCESS) {
            fprintf(stderr, "bench_hot: allocation failed\n");
            exit(1);
        }
    }
    double t = (clock_ns(g_clock) - t0) / (double)g_pairs;
    g_thr_last = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - h0) / (double)g_pairs;
    g_sys_last = (sys_ns() - s0) / (double)g_pairs;
    return t;
}

/* the loop at a call depth, so that a stack has real frames to walk */
__attribute__((noinline)) static double at_depth(int d)
{
    if (d > 0) {
        double r = at_depth(d - 1);
        __asm__ volatile("" ::: "memory"); /* keep the frame: no tail call */
        return r;
    }
    return run_pairs();
}

static double best_of(int reps, int depth)
{
    double best = 1e30, sys = 0, thr = 1e30;
    for (int r = 0; r < reps; r++) {
        double v = at_depth(depth);
        if (v < best) best = v;
        if (g_thr_last < thr) thr = g_thr_last;
        sys += g_sys_last;
    }
    g_sys_mean = sys / reps;
    g_thr_best = thr;
    return best;
}

static void *thread_pairs(void *arg)
{
    CUcontext ctx;
    CUdevice dev;
    if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return (void *)1;
    double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    at_depth(20);
    *(double *)arg = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

/* CPU ns per pair of nthreads threads doing per_thread pairs each, the process's (the helper
 * thread's work for the recorder included); *own: the working threads' own CPU per pair alone
 * (-1 when a thread failed) */
static double threaded(int nthreads, long per_thread, double *own)
{
    pthread_t th[64];
    double cpu[64] = {0}, sum = 0;
    g_pairs = per_thread;
    double c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, thread_pairs, &cpu[i]) != 0) return -1;
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    double all = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0, n = (double)per_thread * nthreads;
    for (int i = 0; i < nthreads; i++) sum += cpu[i];
    if (own) *own = sum / n;
    return all / n;
}

/* 1 thread against 8, the same number of pairs in all (1 thread does 8 x PAIRS), in turn 1 8,
 * 8 1, 1 8 ... (a drift of the machine falls on both alike), each round's CPU per pair kept:
 * what the recorder does now and then (a checkpoint of the bounded ring's flight record, a new
 * chunk) falls on both alike, where a best-of-N would keep the 1-thread runs that had none and
 * compare them with 8-thread runs that always have some.  p1/p8: the process's CPU per pair,
 * o1/o8 the working threads' own, for each of reps rounds. */
#define MAX_ROUNDS 64
static void one_vs_eight(int reps, long pairs, double *p1, double *p8, double *o1, double *o8)
{
    for (int r = 0; r < reps; r++) {
        if (r & 1) {
            p8[r] = threaded(8, pairs, &o8[r]);
            p1[r] = threaded(1, 8 * pairs, &o1[r]);
        } else {
            p1[r] = threaded(1, 8 * pairs, &o1[r]);
            p8[r] = threaded(8, pairs, &o8[r]);
        }
    }
}

static double mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s / n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the median, min and max of n values (sorted in place) */
static void spread(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *med = n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    *lo = v[0];
    *hi = v[n - 1];
}

/* kB of a /proc/self/status line */
static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) v = atol(line + kl);
    if (f) fclose(f);
    return v;
}

static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[PATH_MAX + 512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
}

/* Records the flight record in dir could not take (its header's count), -1 when there is none. */
static double flight_lost(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    char p[PATH_MAX + 512];
    double lost = -1;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 7, ".flight")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        uint64_t v;
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && pread(fd, &v, sizeof v, offsetof(cmh_flight_header, lost_records)) == (ssize_t)sizeof v) lost = (double)v;
        if (fd >= 0) close(fd);
    }
    closedir(d);
    return lost;
}

static void remove_dir(const char *dir)
{
    clear_dir(dir);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_hot LIB none|none1m|alloc|all|threads|dump [PAIRS]\n");
        return 2;
    }
    const char *lib = argv[1], *mode = argv[2];
    g_pairs = argc > 3 ? atol(argv[3]) : 1000000;
    const char *base_dir = getenv("BENCH_DIR") ? getenv("BENCH_DIR") : "/tmp";
    char tmpdir[PATH_MAX], out[PATH_MAX + 16];
    snprintf(tmpdir, sizeof tmpdir, "%s/cmh-bench-hot-XXXXXX", base_dir);
    if (!mkdtemp(tmpdir)) {
        perror("bench_hot: mkdtemp");
        return 1;
    }
    /* The directory is removed by a child that waits for this process to end, not by this
     * process: the recorder's helper thread may be writing a checkpoint of the flight record
     * there until the very end (it renamed into a directory already gone: "cannot rename into
     * place"), and only this process's death stops it for sure.  The child leaves the process
     * group and lets go of the output, so that whatever waits for this process (a shell's
     * $(...)) does not wait for it, and whatever ends this process's group once it exited (a
     * timing harness) does not kill it with its work undone. */
    int gone[2];
    if (pipe2(gone, O_CLOEXEC) != 0) {
        perror("bench_hot: pipe");
        return 1;
    }
    pid_t cleaner = fork();
    if (cleaner == 0) {
        close(gone[1]);
        setsid();
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) dup2(null, 0), dup2(null, 1), dup2(null, 2), close(null);
        char byte;
        while (read(gone[0], &byte, 1) > 0) {} /* EOF: every copy of the write end is closed, so the parent is gone */
        remove_dir(tmpdir);
        _exit(0);
    }
    close(gone[0]);
    if (cleaner < 0) close(gone[1]), gone[1] = -1; /* no child: removed below, as before */
    snprintf(out, sizeof out, "%s/bench.cmh", tmpdir);
    setenv("CUMEMHIST_OUTPUT", out, 1);
    /* before the driver's first allocation: it reads this once */
    if (!strcmp(mode, "threads") && !getenv("FAKECUDA_THREAD_CACHE")) setenv("FAKECUDA_THREAD_CACHE", "1", 1);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "bench_hot: no CUDA device (put the fake driver on LD_LIBRARY_PATH)\n");
        return 2;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench_hot: %s\n", dlerror());
        return 2;
    }
    alloc_fn w_alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    free_fn w_free = (free_fn)dlsym(h, "cuMemFree_v2");
    int (*rec)(const cmh_options *) = (int (*)(const cmh_options *))dlsym(h, "cmh_record_memory_history");
    int (*dump)(const char *) = (int (*)(const char *))dlsym(h, "cmh_dump_snapshot");
    if (!w_alloc || !w_free || !rec || !dump) {
        fprintf(stderr, "bench_hot: %s does not export the recorder API\n", lib);
        return 2;
    }
    if (getenv("BENCH_CLOCK") && !strcmp(getenv("BENCH_CLOCK"), "wall")) g_clock = CLOCK_MONOTONIC;
    const int reps = 5, depth = 20;
    int rc = 0;
    g_alloc = cuMemAlloc;
    g_free = cuMemFree;
    at_depth(depth); /* warm the driver up */

    if (!strcmp(mode, "threads") && getenv("BENCH_ONLY")) { /* for a profiler: hooked, N threads only */
        int n = atoi(getenv("BENCH_ONLY"));
        if (n < 1 || n > 64) n = 1;
        g_alloc = w_alloc;
        g_free = w_free;
        cmh_options o = {CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 1000000, 32, 1};
        rec(&o);
        double sum = 0;
        long pairs = g_pairs;
        for (int r = 0; r < 3; r++) sum += threaded(n, 8 * pairs / n, NULL);
        printf("threads: %d hooked, CPU ns/pair %.1f\n", n, sum / 3);
    } else if (!strcmp(mode, "threads")) {
        long pairs = g_pairs;
        int rounds = getenv("BENCH_ROUNDS") ? atoi(getenv("BENCH_ROUNDS")) : 7;
        if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 7;
        double bp1[MAX_ROUNDS], bp8[MAX_ROUNDS], bo1[MAX_ROUNDS], bo8[MAX_ROUNDS];
        double hp1[MAX_ROUNDS], hp8[MAX_ROUNDS], ho1[MAX_ROUNDS], ho8[MAX_ROUNDS];
        one_vs_eight(3, pairs, bp1, bp8, bo1, bo8);
        double b1 = mean(bp1, 3), b8 = mean(bp8, 3), bw1 = mean(bo1, 3), bw8 = mean(bo8, 3);
        /* Each hooked round in a process of its own (forked before the recorder was touched):
         * a bounded ring's flight record ends its generations with checkpoints and takes a new
         * extent for each doubling, and once its 48 extents are used it is full for good (found
         * here: after about 9 generations, 16 M pairs at --max-entries 1M, every later record is
         * lost).  One process for all the rounds measured most of them without a flight record. */
        int lost_rounds = 0;
        for (int r = 0; r < rounds; r++) {
            int fds[2];
            double v[5] = {-1, -1, -1, -1, -1};
            if (pipe(fds) != 0) return 1;
            pid_t c = fork();
            if (c == 0) {
                close(fds[0]);
                g_alloc = w_alloc;
                g_free = w_free;
                cmh_options o = {CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 1000000, 32, 1};
                rec(&o);
                threaded(1, 600000, NULL); /* the ring's first lap (its chunks made) before either */
                if (r & 1) { /* in turn 1 8, 8 1, ... as before */
                    v[1] = threaded(8, pairs, &v[3]);
                    v[0] = threaded(1, 8 * pairs, &v[2]);
                } else {
                    v[0] = threaded(1, 8 * pairs, &v[2]);
                    v[1] = threaded(8, pairs, &v[3]);
                }
                v[4] = flight_lost(tmpdir);
                if (write(fds[1], v, sizeof v) != (ssize_t)sizeof v) _exit(1);
                _exit(0);
            }
            close(fds[1]);
            if (c < 0 || read(fds[0], v, sizeof v) != (ssize_t)sizeof v) {
                fprintf(stderr, "bench_hot: round %d failed\n", r);
                return 1;
            }
            close(fds[0]);
            waitpid(c, NULL, 0);
            hp1[r] = v[0], hp8[r] = v[1], ho1[r] = v[2], ho8[r] = v[3];
            if (v[4] != 0) lost_rounds++; /* -1: no flight record at all (CUMEMHIST_FLIGHT=0) */
            clear_dir(tmpdir); /* the round's flight record and checkpoints */
        }
        double h1 = mean(hp1, rounds), h8 = mean(hp8, rounds);
        printf("threads: CPU ns/pair bare 1 thread %.1f, 8 threads %.1f; hooked %.1f, %.1f; recorder's own +%.1f vs +%.1f = %.2fx\n",
               b1, b8, h1, h8, h1 - b1, h8 - b8, (h8 - b8) / (h1 - b1));
        /* round by round: the ratio of each round's pair of runs, over the bare means */
        double rp[MAX_ROUNDS], ro[MAX_ROUNDS], rest1[MAX_ROUNDS], rest8[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            rp[r] = (hp8[r] - b8) / (hp1[r] - b1);
            ro[r] = (ho8[r] - bw8) / (ho1[r] - bw1);
            rest1[r] = hp1[r] - ho1[r]; /* the helper's (and the idle main thread's) CPU per pair */
            rest8[r] = hp8[r] - ho8[r];
        }
        double m, lo, hi, mo, loo, hio, m1, m8, x;
        spread(rp, rounds, &m, &lo, &hi);
        spread(ro, rounds, &mo, &loo, &hio);
        spread(rest1, rounds, &m1, &x, &x);
        spread(rest8, rounds, &m8, &x, &x);
        printf("threads by round (%d): the process's CPU %.2fx [%.2f-%.2f]; the working threads' own %.2fx [%.2f-%.2f]; "
               "the rest (helper) %.1f vs %.1f ns/pair; medians\n",
               rounds, m, lo, hi, mo, loo, hio, m1, m8);
        if (lost_rounds) printf("threads: in %d of %d rounds the flight record was off or lost records\n", lost_rounds, rounds);
    } else if (!strcmp(mode, "dump")) {
        g_alloc = w_alloc;
        g_free = w_free;
        cmh_options o = {CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0, 32, 1};
        long rss0 = status_kb("VmRSS:");
        rec(&o);
        at_depth(depth);
        long rss1 = status_kb("VmRSS:");
        int fd = open("/proc/self/clear_refs", O_WRONLY); /* "5": the peak RSS starts again from now */
        if (fd >= 0) {
            if (write(fd, "5", 1) != 1) perror("bench_hot: clear_refs");
            close(fd);
        }
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/dump.cmh", tmpdir);
        double t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if (dump(path) != CMH_OK) {
            fprintf(stderr, "bench_hot: dump failed\n");
            rc = 1;
        }
        double secs = (clock_ns(CLOCK_MONOTONIC) - t0) / 1e9, csecs = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e9;
        long hwm = status_kb("VmHWM:");
        struct stat st;
        long long fsize = stat(path, &st) == 0 ? (long long)st.st_size : -1;
        double entries = 2.0 * (double)g_pairs;
        printf("dump: %.0f entries; recorder RSS %.1f MB = %.1f B/entry; dump %.3f s, %.3f s of its thread's CPU, %lld B; peak RSS %.1f MB vs %.1f MB before = %.2fx\n",
               entries, (double)(rss1 - rss0) / 1024, (double)(rss1 - rss0) * 1024 / entries, secs, csecs, fsize,
               (double)hwm / 1024, (double)rss1 / 1024, (double)hwm / (double)rss1);
    } else {
        cmh_options o = {CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0, 32, 1};
        if (!strcmp(mode, "none1m")) o.max_entries = 1000000;
        else if (!strcmp(mode, "alloc")) o.context = CMH_CONTEXT_ALLOC;
        else if (!strcmp(mode, "all")) o.context = CMH_CONTEXT_ALL;
        else if (strcmp(mode, "none")) {
            fprintf(stderr, "bench_hot: unknown mode %s\n", mode);
            return 2;
        }
        double base = best_of(reps, depth), tbase = g_thr_best;
        g_alloc = w_alloc;
        g_free = w_free;
        rec(&o);
        double t = best_of(reps, depth), tsys = g_sys_mean, tt = g_thr_best;
        g_alloc = cuMemAlloc;
        g_free = cuMemFree;
        double base2 = best_of(reps, depth); /* the best of both, so warm-up never flatters the hooks */
        if (base2 < base) base = base2;
        if (g_thr_best < tbase) tbase = g_thr_best;
        printf("%s: bare %.1f ns/pair, hooked %.1f ns/pair, +%.1f ns (%s); the kernel's part of the hooked runs %.1f ns/pair\n", mode, base,
               t, t - base, g_clock == CLOCK_MONOTONIC ? "wall" : "process CPU", tsys);
        /* the same runs on the calling thread's own CPU clock (best of each): the hooks' cost to
         * the caller, the helper thread's background work left out */
        printf("%s: the calling thread's own CPU: bare %.1f ns/pair, hooked %.1f ns/pair, +%.1f ns (thread CPU)\n", mode, tbase, tt,
               tt - tbase);
    }
    fflush(stdout);
    cmh_options off = {CMH_ENABLED_OFF, CMH_CONTEXT_NONE, 0, 32, 1};
    rec(&off);
    if (gone[1] < 0) remove_dir(tmpdir);
    _exit(rc); /* and the child removes the directory */ /* no exit snapshot: the figures are the output */
}
