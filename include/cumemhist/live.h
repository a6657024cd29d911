/*
 * cumemhist/live.h - reading a running process's flight record as it grows (analyzer/live.c):
 * the one reader behind `cumemhist top`, `cumemhist snapshot` and `cumemhist exporter`.
 *
 * A reader maps the record read-only and never writes to it, signals nothing, and keeps its
 * replay state between refreshes: each refresh reads only the records appended since the last
 * one.  A record whose commit word is not set yet is not there yet: the reader stops before it
 * and looks again next time (a record left uncommitted for good, by a writer that died, is
 * skipped once the process is gone or a later record of its extent has been committed for
 * CMH_LIVE_STALL_MS).  When the process started a new generation and gave back extents the
 * reader had not finished (it read too seldom), the reader starts over from the checkpoint, as
 * `recover` would, and counts it in resets.
 *
 * Everything the file says is checked before use, as in recover.h: a hostile record can make
 * the reader refuse the file (CMH_EFORMAT, with err saying where) but not crash it.
 *
 * Ownership: a cmh_live owns its mapping and state; cmh_live_close releases them.  Not
 * thread-safe: one thread per reader (different readers are independent).
 */
#ifndef CUMEMHIST_LIVE_H
#define CUMEMHIST_LIVE_H

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMH_LIVE_STALL_MS 2000
/* An OOM whose retry is not decided yet (the thread has done nothing since) is counted once it
 * is this old, or its process ended: an allocator asks again at once, so the count never shows
 * an OOM that a retry then takes back (a Prometheus counter never goes down), and one the
 * program saw (its thread then allocates no more) is counted a moment later. */
#define CMH_LIVE_OOM_GRACE_MS 1000

typedef struct cmh_live cmh_live;

/* What the reader knows of one device (or -1, pinned host memory) now. */
typedef struct cmh_live_device {
    int32_t device;
    uint64_t allocated, reserved;           /* now (docs/DEFINITIONS.md) */
    uint64_t peak_allocated, peak_reserved; /* the maxima over the entries the record holds */
    uint64_t entries;                       /* trace entries recorded for it so far */
    uint64_t dropped;                       /* of them, beyond the ring's max_entries */
    uint64_t ooms;                          /* out-of-memory errors the program saw, as `oom` and `summary` count them
                                               (one whose retry is not decided yet, after CMH_LIVE_OOM_GRACE_MS) */
    uint64_t oom_retries;                   /* the allocator's retries after it freed its cache (not OOMs: memory_summary's cudaMalloc retries) */
    int meminfo_known;                      /* a cuMemGetInfo sample was read */
    uint64_t mem_free, mem_total;           /* the latest one */
    int64_t mem_time_ns;
    /* allocated bytes per minute over the last minute of the process (over the later half of
     * its life when younger, from the end of its first second at the earliest: its start-up is
     * no growth per minute); change_known 0 (and change_per_min 0) where a span that short makes no rate:
     * under a second, or a younger process whose allocated bytes changed in fewer than
     * CMH_LEAK_MIN_STEPS of CMH_LEAK_RATE_SLICES stretches (a burst), as `leaks` gives a rate */
    int64_t change_per_min;
    int change_known;
} cmh_live_device;

typedef struct cmh_live_info {
    int64_t pid;
    int32_t rank, local_rank, world_size; /* -1: unknown */
    char host[256], cmdline[2048], producer[48];
    uint64_t start_ticks;
    char boot_id[40];
    int state, end_signal; /* CMH_ENDED_* (recover.h), as the process marked it */
    uint64_t torn, damaged;  /* records skipped (recover.h) */
    uint64_t lost;           /* records the journal had no room for, and events the recorder lost */
    uint64_t resets;         /* times the reader started over from a checkpoint */
    uint64_t bytes;          /* record bytes read, all refreshes */
    uint64_t last_bytes;     /* of them, by the latest refresh */
    int64_t last_ns;         /* the latest entry's time */
    int checkpoint;          /* a checkpoint is the base */
} cmh_live_info;

/* Open the flight record at path and read what it holds.  trace_cap: trace entries kept per
 * device for cmh_live_snapshot (the oldest dropped past it; 0: the recording's own max_entries,
 * unbounded when that is).  CMH_OK; CMH_EIO / CMH_EFORMAT / CMH_ENOMEM with err. */
int cmh_live_open(const char *path, uint64_t trace_cap, cmh_live **out, char *err, size_t errlen);
/* Read what was appended since.  Same codes; after an error the reader still holds what it had. */
int cmh_live_refresh(cmh_live *l, char *err, size_t errlen);
const cmh_live_info *cmh_live_get_info(const cmh_live *l);
const char *cmh_live_path(const cmh_live *l);
/* The devices that have anything, by device number (pinned host memory last); returns how many
 * there are (writes at most cap). */
uint32_t cmh_live_devices(const cmh_live *l, cmh_live_device *out, uint32_t cap);
/* The state now as a snapshot (initialized here): segments and blocks, the kept trace, stacks
 * (PCs with their module: cmh_symbolize_offline names them), cuMemGetInfo samples, who the
 * process is.  CMH_OK or CMH_ENOMEM. */
int cmh_live_snapshot(cmh_live *l, cmh_snapshot *out);
void cmh_live_close(cmh_live *l);

#ifdef __cplusplus
}
#endif
#endif
