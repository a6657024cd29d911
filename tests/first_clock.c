/*
 * first_clock.c - the flight record's first clock slope at a process's first allocation
 * (hot_flight_test.sh).  The recorder maps an entry's raw ticks to wall-clock ns by the line
 * through two points in the record's header; the first slope must be there at once, for a
 * process that dies before the helper thread's first tick.  It was made by sleeping 2 ms in the
 * first allocation between two points (half of that call's 4-5 ms); the first point is now the
 * one taken when the library was loaded.  This program notes the wall clock, makes its first
 * allocation, and reads its own flight record's header: the first point must come before the
 * allocation (the load's, not one taken inside the call), and the slope must be positive.
 * Orders of events only, no durations.  usage: first_clock FLIGHT_PATH; exit 0 when both hold.
 */
#include <cuda.h>
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "flight_format.h"

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    int64_t before = now_ns();
    if (cuMemAlloc(&p, 1 << 20)) return 2;
    cmh_flight_header h;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        fprintf(stderr, "first_clock: no flight record at %s\n", argv[1]);
        return 1;
    }
    close(fd);
    cuMemFree(p);
    int rc = 0;
    if (h.t0_ns > before) {
        fprintf(stderr, "first_clock: the clock's first point was taken in the first allocation (%lld ns after the call began), not at load\n",
                (long long)(h.t0_ns - before));
        rc = 1;
    }
    if (!(h.t1_ticks > h.t0_ticks && h.t1_ns > h.t0_ns)) {
        fprintf(stderr, "first_clock: no first slope (t0 %lld/%lld, t1 %lld/%lld)\n", (long long)h.t0_ticks,
                (long long)h.t0_ns, (long long)h.t1_ticks, (long long)h.t1_ns);
        rc = 1;
    }
    return rc;
}
