/*
 * fuzz_flight.c - libFuzzer target for the flight-record reader (cumemhist recover): the
 * header, the extents, torn and foreign records, and the state it rebuilds from them.  The
 * reader maps a file, so each input is written to a memory file first.  Seeds are real flight
 * records of a killed sample, compacted by flight_seed.c.  Build and run with scripts/fuzz.sh
 * flight.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/recover.h"
#include "cumemhist/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("flight", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    cmh_snapshot s;
    cmh_recover_info info;
    char err[512];
    if (cmh_flight_recover(path, &s, &info, err, sizeof err) != CMH_OK) return 0;
    int32_t devs[8];
    int nd = cmh_snapshot_devices(&s, devs, 8);
    for (int i = 0; i < nd && i < 8; i++) {
        cmh_mem_stats st;
        cmh_summary_compute(&s, devs[i], &st);
    }
    cmh_snapshot_free(&s);
    return 0;
}
