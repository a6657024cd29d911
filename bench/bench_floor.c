/*
 * bench_floor.c - what the machine charges for the recorder's unavoidable work, so that the hot
 * path's rows (bench/rows_hot.sh) can be read beside the least any recorder of this design could
 * cost here.  A recorded cuMemAlloc + cuMemFree pair with --context none, an unlimited ring and the
 * flight record on does, whatever its code:
 *   - 10 locked read-modify-writes: the live table's lock and unlock on the allocation and on the
 *     free (4), the device's reserved bytes (2), its entry number (2), the flight record's cursor (2)
 *     (8 with the flight record off);
 *   - 2 clock reads, one per entry (the recorder's clock: the time-stamp counter on x86-64);
 *   - 48 bytes of ring (two 24-byte entries) in fresh anonymous pages, and 56 bytes of flight
 *     record (a 32-byte allocation, a 24-byte free: version 6's tiny entries; 72 before, 40 and
 *     32) in fresh pages of a file.
 * Each is timed alone, on the process's CPU clock as bench_hot times a pair, and the sum printed.
 * It is a floor, not an estimate: a pair also does its stores, hashes, branches and calls.
 * Fresh pages are timed in three passes: the floor takes the least (pages the kernel had just
 * taken back from this process); a third line gives the same sum with the first pass's pages,
 * nearer what a recorder that keeps taking new memory pays on a virtual machine (three() says why).
 *
 * usage: bench_floor [DIR]   DIR: where the file's pages are made (default $BENCH_DIR, else /tmp)
 * Figures only: nothing passes or fails.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "flight_format.h"
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int64_t clock_read(void)
{
#if defined(__x86_64__)
    return (int64_t)__rdtsc();
#else
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
#endif
}

static uint64_t g_word __attribute__((aligned(64)));
static volatile int64_t g_sink;

static double locked_add_ns(long n)
{
    double t0 = cpu_ns();
    for (long i = 0; i < n; i++) __atomic_add_fetch(&g_word, 1, __ATOMIC_ACQ_REL);
    return (cpu_ns() - t0) / (double)n;
}

static double clock_read_ns(long n)
{
    int64_t s = 0;
    double t0 = cpu_ns();
    for (long i = 0; i < n; i++) s += clock_read();
    g_sink = s;
    return (cpu_ns() - t0) / (double)n;
}

/* Made present as the recorder makes them (one MADV_POPULATE_WRITE where the kernel has it), then
 * written through with 8-byte stores, as entries fill them. */
static void fill(void *m, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    madvise(m, bytes, MADV_POPULATE_WRITE);
#endif
    uint64_t *w = m;
    for (size_t i = 0; i < bytes / 8; i++) w[i] = i;
}

static double fresh_anon_ns_per_byte(size_t bytes)
{
    double t0 = cpu_ns();
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    fill(m, bytes);
    double t = cpu_ns() - t0;
    munmap(m, bytes);
    return t / (double)bytes;
}

/* The flight record's way: an extent allocated ahead (posix_fallocate), mapped shared, its pages
 * made present and written.  Its writeback is the kernel's flusher threads', not counted. */
static double fresh_file_ns_per_byte(const char *dir, size_t bytes)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cmh-floor-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    unlink(path);
    double r = -1;
    if (posix_fallocate(fd, 0, (off_t)bytes) == 0) {
        double t0 = cpu_ns();
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            fill(m, bytes);
            r = (cpu_ns() - t0) / (double)bytes;
            munmap(m, bytes);
        }
    }
    close(fd);
    return r;
}

static const char *fs_name(const char *dir)
{
    struct statfs s;
    if (statfs(dir, &s) != 0) return "?";
    switch ((unsigned long)s.f_type) {
    case 0x01021994: return "tmpfs";
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794c7630: return "overlayfs";
    default: return "other";
    }
}

static double min3(double a, double b, double c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* Fresh pages in three passes, each given back before the next: the least is memory the kernel
 * had just taken back from this process; the first is whatever it handed out first, which on a
 * virtual machine that gives free memory back to its host (virtio-balloon's free page reporting)
 * is often memory the host must back again at its first touch, as most of a long-running
 * recorder's pages are: 2 to 6 times dearer here. */
typedef struct passes {
    double first, least;
} passes;

static passes three(double a, double b, double c)
{
    passes p = {a, min3(a, b, c)};
    return p;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("BENCH_DIR") ? getenv("BENCH_DIR") : "/tmp";
    if (argc > 2 || (argc > 1 && !strcmp(argv[1], "--help"))) {
        fprintf(stderr, "usage: bench_floor [DIR]\n");
        return 2;
    }
    const size_t bytes = (size_t)128 << 20;
    double lock = min3(locked_add_ns(20000000), locked_add_ns(20000000), locked_add_ns(20000000));
    double clk = min3(clock_read_ns(20000000), clock_read_ns(20000000), clock_read_ns(20000000));
    double a1 = fresh_anon_ns_per_byte(bytes), a2 = fresh_anon_ns_per_byte(bytes), a3 = fresh_anon_ns_per_byte(bytes);
    double f1 = fresh_file_ns_per_byte(dir, bytes), f2 = fresh_file_ns_per_byte(dir, bytes), f3 = fresh_file_ns_per_byte(dir, bytes);
    passes pa = three(a1, a2, a3), pf = three(f1, f2, f3);
    double anon = pa.least, file = pf.least;
    if (f1 < 0 || f2 < 0 || f3 < 0) {
        fprintf(stderr, "bench_floor: cannot make a %zu-byte file in %s\n", bytes, dir);
        return 1;
    }
    printf("floor: locked add %.1f ns, clock read %.1f ns, fresh anonymous pages %.2f ns/B, fresh file pages on %s (%s) %.2f ns/B\n",
           lock, clk, anon, dir, fs_name(dir), file);
    enum { FLIGHT_BYTES = CMH_FR_ENTRY_TINY_LEN + CMH_FR_FREE_TINY_LEN };
    double off = 8 * lock + 2 * clk + 48 * anon, on = 10 * lock + 2 * clk + 48 * anon + FLIGHT_BYTES * file;
    printf("floor: a recorded pair (--context none, unlimited): %.0f ns with the flight record on (10 locked adds, 2 clock "
           "reads, 48 B of ring, %d B of flight record), %.0f ns with it off\n",
           on, (int)FLIGHT_BYTES, off);
    double con = 10 * lock + 2 * clk + 48 * pa.first + FLIGHT_BYTES * pf.first, coff = 8 * lock + 2 * clk + 48 * pa.first;
    printf("floor: with the first pass's pages (%.2f ns/B anonymous, %.2f ns/B of file): %.0f ns with the flight record on, %.0f ns "
           "with it off\n",
           pa.first, pf.first, con, coff);
    return 0;
}
