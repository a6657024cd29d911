/*
 * bench_live.c - the live reader's cost per flight record entry (issue 28's CPU goal):
 * `bench_live FLIGHT [REPEAT]` opens the flight record REPEAT times with a watching reader's
 * trace window (each open reads it all, as a refresh reads what was appended) and prints the
 * CPU time per entry read (best of REPEAT); then that of one live snapshot of the state.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cumemhist/live.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* the machine is shared: CPU time, not wall time */
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_live FLIGHT [REPEAT]\n");
        return 2;
    }
    int rep = argc > 2 ? atoi(argv[2]) : 5;
    char err[4600];
    double best = 1e30;
    uint64_t entries = 0;
    for (int r = 0; r < rep; r++) {
        cmh_live *l;
        double t0 = now();
        if (cmh_live_open(argv[1], 65536, &l, err, sizeof err) != CMH_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        double t = now() - t0;
        cmh_live_device d[64];
        uint32_t n = cmh_live_devices(l, d, 64);
        entries = 0;
        for (uint32_t i = 0; i < n && i < 64; i++) entries += d[i].entries;
        if (t < best) best = t;
        if (r == rep - 1) {
            cmh_snapshot s;
            t0 = now();
            if (cmh_live_snapshot(l, &s) != CMH_OK) return 1;
            printf("snapshot of the state: %.2f ms\n", (now() - t0) * 1e3);
            cmh_snapshot_free(&s);
        }
        cmh_live_close(l);
    }
    printf("%" PRIu64 " entries, %.2f ms: %.1f ns an entry (best of %d)\n", entries, best * 1e3, best * 1e9 / (double)(entries ? entries : 1), rep);
    return 0;
}
