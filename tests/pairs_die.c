/*
 * pairs_die.c - N cuMemAlloc/cuMemFree pairs (pair k of 256 * (k + 1) bytes, so that the order
 * can be checked), then a death by SIGKILL (or "exit"), for tests/hot_flight_test.sh: enough
 * entries to cross many extents of the flight record and, with a bounded ring, its checkpoints.
 *   pairs_die N [kill|exit] [ckpt|rss|hold]
 * With "ckpt", before dying it waits (up to 30 s) for the recorder's helper thread to have
 * written a checkpoint of $CUMEMHIST_OUTPUT's flight record: the helper makes it in the
 * background, on its own schedule, and a loaded machine may not run it before the death.
 * With "rss", it waits 300 ms (the helper's tick comes every 100 ms) and prints the KiB of the
 * flight record's mappings that are resident ("flight resident KiB: N").
 * With "hold", it prints "ready" and stays alive (up to 60 s) for readers of the running
 * process, until the test kills it.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop_prog.h"

int main(int argc, char **argv)
{
    if (argc < 2 || loop_context(NULL)) return 2;
    long n = atol(argv[1]);
    for (long k = 0; k < n; k++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 256 * (size_t)(k + 1)) != CUDA_SUCCESS) return 3;
        cuMemFree(p);
    }
    const char *out = getenv("CUMEMHIST_OUTPUT");
    if (argc > 3 && !strcmp(argv[3], "ckpt") && out) {
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s.flight.ckpt1.cmh", out);
        snprintf(b, sizeof b, "%s.flight.ckpt2.cmh", out);
        struct timespec tick = {0, 10000000};
        for (int i = 0; i < 3000 && access(a, F_OK) && access(b, F_OK); i++) nanosleep(&tick, NULL);
    }
    if (argc > 3 && !strcmp(argv[3], "rss")) {
        struct timespec pause = {0, 300000000};
        nanosleep(&pause, NULL);
        FILE *f = fopen("/proc/self/smaps", "r");
        char line[4400];
        long kb = 0;
        int ours = 0;
        while (f && fgets(line, sizeof line, f)) {
            size_t n = strlen(line);
            if (n && line[n - 1] == '\n') line[--n] = 0;
            const char *sp = strchr(line, ' ');
            if (sp && sp > line && sp[-1] != ':') /* a mapping's first line: its range, ..., its path */
                ours = n > 7 && !strcmp(line + n - 7, ".flight");
            else if (ours && !strncmp(line, "Rss:", 4))
                kb += atol(line + 4);
        }
        if (f) fclose(f);
        printf("flight resident KiB: %ld\n", kb);
        fflush(stdout);
    }
    if (argc > 3 && !strcmp(argv[3], "hold")) { /* alive for readers (up to 60 s), until killed */
        printf("ready\n");
        fflush(stdout);
        struct timespec tick = {0, 10000000};
        for (int i = 0; i < 6000; i++) nanosleep(&tick, NULL);
    }
    if (argc < 3 || strcmp(argv[2], "exit")) raise(SIGKILL);
    return 0;
}
