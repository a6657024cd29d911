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
 *        bench_codecs --write SHAPE entries SEED PATH.cmh [PATH.pickle]   (a record for bench/rows.sh;
 *                     BENCH_RANK and BENCH_WORLD_SIZE make it a job's rank, for bench/fleet.sh)
 *        bench_codecs --time PHASE FILE   (one phase: "seconds entries peak_kB")
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

/* 64 distinct stacks of 24 frames */
static void make_stacks(cmh_snapshot *s, uint32_t *stacks)
{
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
}

static void generate(cmh_snapshot *s, uint32_t n)
{
    cmh_snapshot_init(s);
    s->pid = 1;
    uint32_t stacks[64];
    make_stacks(s, stacks);
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    enum { LIVE = 4096 };
    static uint64_t live_addr[LIVE], live_size[LIVE];
    static uint32_t live_stack[LIVE];
    int nlive = 0;
    uint64_t base = 0x7f0000000000ull, next_addr = base;
    int64_t t = 1700000000000000000ll;
    for (uint32_t i = 0; i < n; i++) {
        cmh_entry_full e;
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

/*
 * A trace shaped like PyTorch's caching allocator: 64 segments of 128 MiB made first, cut into
 * slots of 2, 4, 6 and 8 MiB; then blocks taken and given back at random slots (alloc,
 * free_requested, free_completed), each block filling its slot (so PyTorch's rounding and
 * splitting rules give the same sizes).  The final segments hold the live blocks, free runs
 * merged, as PyTorch reports them.  With nostacks, entries carry no stack.
 */
static void generate_blocks(cmh_snapshot *s, uint32_t n, int nostacks)
{
    cmh_snapshot_init(s);
    s->pid = 1;
    uint32_t stacks[64];
    make_stacks(s, stacks);
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    enum { NSEG = 64, MAXSLOT = 64 * 32 };
    const uint64_t MiB = 1 << 20, SEG = 128 * MiB, base = 0x7f0000000000ull;
    static uint64_t slot_addr[MAXSLOT], slot_size[MAXSLOT];
    static uint32_t slot_stack[MAXSLOT];
    static int slot_live[MAXSLOT], live_list[MAXSLOT], free_list[MAXSLOT], pos_in[MAXSLOT];
    int nslot = 0, nlive = 0, nfree = 0;
    int64_t t = 1700000000000000000ll;
    for (int g = 0; g < NSEG; g++) {
        uint64_t a = base + (uint64_t)g * 2 * SEG, end = a + SEG;
        for (int c = 0; a < end; c++) {
            uint64_t z = (uint64_t)(2 + 2 * (c % 4)) * MiB;
            if (z > end - a) z = end - a;
            slot_addr[nslot] = a, slot_size[nslot] = z, slot_live[nslot] = 0;
            pos_in[nslot] = nfree, free_list[nfree++] = nslot;
            nslot++, a += z;
        }
        cmh_entry_full e;
        memset(&e, 0, sizeof e);
        e.time_ns = t += 1000;
        e.action = CMH_ACT_SEGMENT_ALLOC;
        e.addr = base + (uint64_t)g * 2 * SEG;
        e.size = e.requested = SEG;
        e.stack = nostacks ? 0 : stacks[g % 64];
        cmh_snapshot_add_entry(s, &e);
    }
    for (uint32_t i = NSEG; i < n;) {
        cmh_entry_full e;
        memset(&e, 0, sizeof e);
        e.time_ns = t += 1000 + (int64_t)(next() % 50000);
        int do_free = nfree == 0 || (nlive > 0 && next() % 2);
        if (do_free) {
            int k = live_list[next() % (uint64_t)nlive], last = live_list[--nlive];
            live_list[pos_in[k]] = last, pos_in[last] = pos_in[k];
            pos_in[k] = nfree, free_list[nfree++] = k;
            slot_live[k] = 0;
            e.addr = slot_addr[k];
            e.size = e.requested = slot_size[k];
            e.stack = slot_stack[k];
            e.action = CMH_ACT_FREE_REQUESTED;
            cmh_snapshot_add_entry(s, &e);
            e.action = CMH_ACT_FREE_COMPLETED;
            cmh_snapshot_add_entry(s, &e);
            i += 2;
        } else {
            int k = free_list[next() % (uint64_t)nfree], last = free_list[--nfree];
            free_list[pos_in[k]] = last, pos_in[last] = pos_in[k];
            pos_in[k] = nlive, live_list[nlive++] = k;
            slot_live[k] = 1;
            slot_stack[k] = nostacks ? 0 : stacks[next() % 64];
            e.action = CMH_ACT_ALLOC;
            e.addr = slot_addr[k];
            e.size = e.requested = slot_size[k];
            e.stack = slot_stack[k];
            cmh_snapshot_add_entry(s, &e);
            i++;
        }
    }
    for (int g = 0, k = 0; g < NSEG; g++) {
        uint64_t a0 = base + (uint64_t)g * 2 * SEG;
        cmh_segment seg = {0, CMH_KIND_DEVICE, 0, CMH_POOL_LARGE, a0, SEG, 0, {0, 0}, nostacks ? 0 : stacks[g % 64], 0, 0, 0};
        cmh_snapshot_add_segment(s, &seg, NULL);
        for (; k < nslot && slot_addr[k] < a0 + SEG;) {
            if (slot_live[k]) {
                cmh_block b = {slot_addr[k], slot_size[k], slot_size[k], slot_stack[k], CMH_BLOCK_ACTIVE_ALLOCATED, 0};
                cmh_snapshot_add_block(s, &b);
                k++;
                continue;
            }
            cmh_block b = {slot_addr[k], 0, 0, 0, CMH_BLOCK_INACTIVE, 0};
            for (; k < nslot && slot_addr[k] < a0 + SEG && !slot_live[k]; k++) b.size += slot_size[k];
            cmh_snapshot_add_block(s, &b);
        }
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
        int failed = 0;
        if (cmh_snapshot_load(path, &s, err, sizeof err) == CMH_OK) {
            FILE *devnull = fopen("/dev/null", "w");
            int32_t dev0 = 0;
            if (replay == 1) {
                cmh_mem_stats st;
                cmh_summary_compute(&s, 0, &st);
                cmh_summary_print(&st, 0, 0, devnull);
            } else if (replay == 2) {
                cmh_plot_opts o = {1200, 300, &dev0, 1, path, 0, CMH_AXIS_AUTO};
                if (cmh_plot_timeline(&s, &o, devnull) != CMH_OK) failed = 1;
            } else if (replay == 3) {
                cmh_site_opts so = {CMH_GROUP_SITE, 0, NULL, 0};
                int src;
                cmh_sites *g = cmh_sites_new(&s, &so, &src, err, sizeof err);
                if (!g || cmh_report_html(&s, NULL, g, &dev0, 1, path, devnull) != CMH_OK) failed = 1;
                cmh_sites_free(g);
            } else if (replay == 4) {
                if (cmh_export_memviz(&s, devnull, NULL) != CMH_OK) failed = 1;
            } else if (replay == 5) {
                if (cmh_export_json(&s, 0, devnull) != CMH_OK) failed = 1;
            }
            fclose(devnull);
            r[0] = failed ? -1 : now() - t0;
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

static void usage(void)
{
    fprintf(stderr, "usage: bench_codecs [entries] [dir]\n"
                    "       bench_codecs --write SHAPE entries SEED PATH.cmh [PATH.pickle]\n"
                    "       bench_codecs --time load|summary|plot|report|memviz|json FILE\n"
                    "  SHAPE: segments (whole-block driver allocations, as the recorder sees them),\n"
                    "         blocks (PyTorch's caching allocator), blocks-nostacks\n");
    exit(2);
}

/* --time PHASE FILE: one phase in a child, as "seconds entries peak_kB" (for bench/rows.sh) */
static int time_only(int argc, char **argv)
{
    static const char *const names[] = {"load", "summary", "plot", "report", "memviz", "json"};
    if (argc < 4) usage();
    for (int i = 0; i < 6; i++)
        if (!strcmp(argv[2], names[i])) {
            long peak = 0;
            uint32_t got = 0;
            double t = phase(argv[3], i, &peak, &got);
            if (t < 0) return 1;
            printf("%.6f %u %ld\n", t, got, peak);
            return 0;
        }
    usage();
    return 2;
}

/* --write: only generate a record (for bench/rows.sh), as .cmh and optionally as a pickle */
static int write_only(int argc, char **argv)
{
    if (argc < 6) usage();
    const char *shape = argv[2];
    uint32_t n = (uint32_t)atol(argv[3]);
    rng ^= (uint64_t)atoll(argv[4]) * 0x9e3779b97f4a7c15ull;
    cmh_snapshot s;
    if (!strcmp(shape, "segments")) generate(&s, n);
    else if (!strcmp(shape, "blocks")) generate_blocks(&s, n, 0);
    else if (!strcmp(shape, "blocks-nostacks")) generate_blocks(&s, n, 1);
    else usage();
    const char *rk = getenv("BENCH_RANK"), *ws = getenv("BENCH_WORLD_SIZE"); /* as a job's rank would be */
    if (rk && *rk) s.rank = s.local_rank = atoi(rk);
    if (ws && *ws) s.world_size = atoi(ws);
    char err[256];
    if (cmh_cmh_write_file(&s, argv[5], err, sizeof err) != CMH_OK) {
        fprintf(stderr, "bench_codecs: %s\n", err);
        return 1;
    }
    if (argc > 6) {
        FILE *fp = fopen(argv[6], "wb");
        if (!fp || cmh_export_memviz(&s, fp, NULL) != CMH_OK || fclose(fp) != 0) {
            fprintf(stderr, "bench_codecs: cannot write %s\n", argv[6]);
            return 1;
        }
    }
    cmh_snapshot_free(&s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--write")) return write_only(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "--time")) return time_only(argc, argv);
    if (argc > 1 && (argv[1][0] < '0' || argv[1][0] > '9')) usage();
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
