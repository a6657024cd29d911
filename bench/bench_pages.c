/*
 * bench_pages.c - what a new page costs on this machine, per byte: the floor under the
 * recorder's hot path (issue 27).  A recorded pair writes bytes no page held before: its ring
 * entries (anonymous memory, on transparent huge pages) and its flight record (the page cache of
 * a file on disk or on tmpfs), and the kernel zeroes each new page before the recorder writes a
 * byte.  This makes MiB of such pages present with one MADV_POPULATE_WRITE, as the recorder's
 * helper thread does, 4 times over (each time a new mapping, the last one unmapped or its file
 * removed), and prints the process CPU it took per byte each time.  On a virtual machine whose
 * host backs guest memory on first touch, the first round pays for that too.
 *
 * usage: bench_pages MiB huge|4k [FILE]   (FILE: a file made and removed there, mapped shared)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_pages MiB huge|4k [FILE]\n");
        return 2;
    }
#ifndef MADV_POPULATE_WRITE
    fprintf(stderr, "bench_pages: no MADV_POPULATE_WRITE here\n");
    return 1;
#else
    size_t n = (size_t)atol(argv[1]) << 20, huge = (size_t)2 << 20;
    int thp = !strcmp(argv[2], "huge");
    const char *file = argc > 3 ? argv[3] : NULL;
    for (int round = 0; round < 4; round++) {
        int fd = -1;
        char *m, *base = NULL;
        if (file) {
            fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || posix_fallocate(fd, 0, (off_t)n) != 0) return perror(file), 1;
            m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        } else {
            base = mmap(NULL, n + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            m = base == MAP_FAILED ? MAP_FAILED : (char *)(((uintptr_t)base + huge - 1) & ~(uintptr_t)(huge - 1));
            if (m != MAP_FAILED) madvise(m, n, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        }
        if (m == MAP_FAILED) return perror("mmap"), 1;
        double t0 = cpu_s();
        if (madvise(m, n, MADV_POPULATE_WRITE) != 0) return perror("madvise"), 1;
        double t = cpu_s() - t0;
        printf("%s, %s pages, round %d: %.3f ns a byte, %.2f us a 4 KiB page\n", file ? "file" : "anonymous", file ? "4 KiB" : thp ? "huge" : "4 KiB",
               round + 1, t * 1e9 / (double)n, t * 1e6 / (double)(n / 4096));
        if (file) {
            munmap(m, n);
            close(fd);
            unlink(file);
        } else {
            munmap(base, n + huge);
        }
    }
    return 0;
#endif
}
