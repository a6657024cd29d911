/*
 * fuzz_util.h - what the fuzz targets share: a memory file the readers can map by path, a
 * summary of every device of what they rebuilt (the replay runs over it all), and the what-if
 * allocator model over every device of what the snapshot readers accepted.
 */
#ifndef CMH_FUZZ_UTIL_H
#define CMH_FUZZ_UTIL_H
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"
#include "cumemhist/whatif.h"

/* The memory file's descriptor (made at the first call, aborting where it cannot be) and its path. */
static inline int fuzz_memfd(const char *name, const char **path)
{
    static int fd = -1;
    static char p[64];
    if (fd < 0) {
        fd = memfd_create(name, 0);
        if (fd < 0) abort();
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    }
    *path = p;
    return fd;
}

static inline void fuzz_summarize_devices(const cmh_snapshot *s)
{
    int32_t devs[8];
    int nd = cmh_snapshot_devices(s, devs, 8);
    for (int i = 0; i < nd && i < 8; i++) {
        cmh_mem_stats st;
        cmh_summary_compute(s, devs[i], &st);
    }
}

/* Every device's summary and the what-if model with the recorded configuration and a 64 MiB
 * device (its OOM paths too); flip: once more with expandable segments the other way. */
static inline void fuzz_whatif_devices(const cmh_snapshot *s, int flip)
{
    int32_t devs[8];
    int nd = cmh_snapshot_devices(s, devs, 8);
    for (int i = 0; i < nd && i < 8; i++) {
        cmh_mem_stats st;
        cmh_summary_compute(s, devs[i], &st);
        cmh_whatif_conf c;
        cmh_whatif_conf_recorded(s, &c);
        cmh_whatif_result r;
        cmh_whatif_run(s, devs[i], &c, 64ull << 20, 1, &r);
        if (!flip) continue;
        c.expandable = !c.expandable;
        cmh_whatif_run(s, devs[i], &c, 0, 0, &r);
    }
}
#endif
