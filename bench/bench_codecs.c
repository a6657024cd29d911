/*
 * bench_codecs.c - how fast snapshots load and replay, and how big they are.
 *
 * Generates a history of N trace entries (default 1,000,000: alloc/free pairs over a working set
 * of live segments, 64 distinct 24-frame stacks), writes it as .cmh and as a PyTorch pickle
 * (the memory_viz export), then, each in a fresh child process so peak RSS is its own:
 * load .cmh, load pickle, load + replay + summary for both; load + plot and load + report (the
 * timeline SVG and the HTML page).  Prints entries/s, MB/s, bytes per
 * entry and peak RSS against file size.  Figures only; nothing passes or fails on time.
 *
 * usage: bench_codecs [entries] [dir]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"
#include "cumemhist/pictures.h"
#include "cumemhist/viz.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void generate(cmh_snapshot *s, uint32_t n)
{
    cmh_snapshot_init(s);
    s->pid = 1;
    uint32_t stacks[64];
    for (int k = 0; k < 64; k++) {
        uint32_t fr[24];
        for (int j = 0; j < 24; j++) {
            char name[64];
            snprintf(name, sizeof name, "function_%d_%d", k % 8, j);
            cmh_frame f = {0x400000u + (uint64_t)k * 4096 + (uint64_t)j * 16, 0, 0, j, -1};
            cmh_strtab_intern(&s->strings, name, strlen(name), &f.name);
            cmh_strtab_intern(&s->strings, "train.py", 8, &f.filename);
            cmh_snapshot_add_frame(s, &f, &fr[j]);
        }
        cmh_snapshot_add_stack(s, fr, 24, &stacks[k]);
    }
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    enum { LIVE = 4096 };
    static uint64_t live_addr[LIVE], live_size[LIVE];
    static uint32_t live_stack[LIVE];
    int nlive = 0;
    uint64_t base = 0x7f0000000000ull, next_addr = base;
    int64_t t = 1700000000000000000ll;
    for (uint32_t i = 0; i < n; i++) {
        cmh_entry e;
        memset(&e, 0, sizeof e);
        e.time_ns = t += 1000 + (int64_t)(next() % 50000);
        e.flags = CMH_EF_WHOLE_BLOCK;
        int do_free = nlive == LIVE || (nlive > 0 && next() % 2);
        if (do_free) {
            int k = (int)(next() % (uint64_t)nlive);
            e.action = CMH_ACT_SEGMENT_FREE;
            e.addr = live_addr[k];
            e.size = e.requested = live_size[k];
            e.stack = live_stack[k];
            live_addr[k] = live_addr[nlive - 1];
            live_size[k] = live_size[nlive - 1];
            live_stack[k] = live_stack[nlive - 1];
            nlive--;
        } else {
            e.action = CMH_ACT_SEGMENT_ALLOC;
            e.size = e.requested = (uint64_t)(1 + next() % 4096) * 512;
            e.addr = next_addr;
            next_addr += (e.size + 0xfffff) & ~0xfffffull;
            e.stack = stacks[next() % 64];
            live_addr[nlive] = e.addr;
            live_size[nlive] = e.size;
            live_stack[nlive] = e.stack;
            nlive++;
        }
        cmh_snapshot_add_entry(s, &e);
    }
    for (int k = 0; k < nlive; k++) { /* the survivors are the final segments, by address */
        for (int j = k + 1; j < nlive; j++)
            if (live_addr[j] < live_addr[k]) {
                uint64_t a = live_addr[k], b = live_size[k];
                uint32_t c = live_stack[k];
                live_addr[k] = live_addr[j], live_size[k] = live_size[j], live_stack[k] = live_stack[j];
                live_addr[j] = a, live_size[j] = b, live_stack[j] = c;
            }
        cmh_segment g = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_LARGE, live_addr[k], live_size[k], 0, {0, 0},
                         live_stack[k], 0, 0, 0};
        cmh_block b = {live_addr[k], live_size[k], live_size[k], live_stack[k], CMH_BLOCK_ACTIVE_ALLOCATED, 0};
        cmh_snapshot_add_segment(s, &g, NULL);
        cmh_snapshot_add_block(s, &b);
    }
}

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* Run one phase in a child: its own peak RSS.  Returns seconds, or -1. */
static double phase(const char *path, int replay, long *peak_kb, uint32_t *entries)
{
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        double t0 = now();
        cmh_snapshot s;
        char err[256];
        double r[2] = {-1, 0};
        if (cmh_snapshot_load(path, &s, err, sizeof err) == CMH_OK) {
            FILE *devnull = fopen("/dev/null", "w");
            int32_t dev0 = 0;
            if (replay == 1) {
                cmh_mem_stats st;
                cmh_summary_compute(&s, 0, &st);
                cmh_summary_print(&st, 0, 0, devnull);
            } else if (replay == 2) {
                cmh_plot_opts o = {1200, 300, &dev0, 1, path, 0};
                if (cmh_plot_timeline(&s, &o, devnull) != CMH_OK) r[1] = -1;
            } else if (replay == 3) {
                cmh_site_opts so = {CMH_GROUP_SITE, 0, NULL, 0};
                int src;
                cmh_sites *g = cmh_sites_new(&s, &so, &src, err, sizeof err);
                if (!g || cmh_report_html(&s, NULL, g, &dev0, 1, path, devnull) != CMH_OK) r[1] = -1;
                cmh_sites_free(g);
            }
            fclose(devnull);
            r[0] = now() - t0;
            r[1] = s.nentries;
        } else {
            fprintf(stderr, "bench_codecs: %s\n", err);
        }
        if (write(fd[1], r, sizeof r) != sizeof r) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    double r[2] = {-1, 0};
    if (read(fd[0], r, sizeof r) != sizeof r) r[0] = -1;
    close(fd[0]);
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    *peak_kb = ru.ru_maxrss;
    *entries = (uint32_t)r[1];
    return r[0];
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)atol(argv[1]) : 1000000;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char cmh[512], pkl[512];
    snprintf(cmh, sizeof cmh, "%s/bench_codecs.%ld.cmh", dir, (long)getpid());
    snprintf(pkl, sizeof pkl, "%s/bench_codecs.%ld.pickle", dir, (long)getpid());

    cmh_snapshot s;
    generate(&s, n);
    char err[256];
    double t0 = now();
    if (cmh_cmh_write_file(&s, cmh, err, sizeof err) != CMH_OK) {
        fprintf(stderr, "bench_codecs: %s\n", err);
        return 1;
    }
    double t_wcmh = now() - t0;
    FILE *fp = fopen(pkl, "wb");
    t0 = now();
    cmh_export_memviz(&s, fp, NULL);
    fclose(fp);
    double t_wpkl = now() - t0;
    cmh_snapshot_free(&s);

    long sc = file_size(cmh), sp = file_size(pkl);
    printf("bench_codecs: %u trace entries (alloc/free of whole-block segments, 64 stacks x 24 frames)\n", n);
    printf("%-34s %10ld bytes  %6.2f B/entry   written in %.2f s (%.1f M entries/s)\n", ".cmh", sc, (double)sc / n, t_wcmh,
           n / t_wcmh / 1e6);
    printf("%-34s %10ld bytes  %6.2f B/entry   written in %.2f s (%.1f M entries/s)\n", "pickle (memory_viz export)", sp,
           (double)sp / n, t_wpkl, n / t_wpkl / 1e6);
    printf("%-34s %10.2f x\n", "pickle size / .cmh size", (double)sp / sc);

    struct {
        const char *what, *path;
        int replay;
    } phases[] = {
        {"load .cmh", cmh, 0},
        {"load .cmh + replay + summary", cmh, 1},
        {"load pickle", pkl, 0},
        {"load pickle + replay + summary", pkl, 1},
        {"load .cmh + plot (timeline SVG)", cmh, 2},
        {"load .cmh + report (HTML page)", cmh, 3},
    };
    for (int i = 0; i < 6; i++) {
        long peak = 0;
        uint32_t got = 0;
        double t = phase(phases[i].path, phases[i].replay, &peak, &got);
        long size = file_size(phases[i].path);
        if (t < 0) {
            printf("%-34s failed\n", phases[i].what);
            continue;
        }
        printf("%-34s %7.3f s  %6.2f M entries/s  %7.1f MB/s  peak RSS %6.1f MB = %.2fx the file (%u entries)\n",
               phases[i].what, t, got / t / 1e6, size / t / 1e6, peak / 1024.0, peak * 1024.0 / size, got);
    }
    if (getenv("BENCH_KEEP")) printf("kept %s and %s\n", cmh, pkl);
    else {
        unlink(cmh);
        unlink(pkl);
    }
    return 0;
}
