/*
 * cumemhist/reports.h - peak, leaks, fragmentation, OOM and diff, computed over a replay.
 *
 * A report groups live blocks by site (cumemhist/sites.h: by default the user's frame of the
 * allocation stack; or the whole stack, the owner module, the source file), each with the live
 * blocks it holds (bytes, count, first and last allocation time).  Given no cmh_sites, every
 * stack is its own group.  Sites come sorted by bytes, largest first.  Every report says how
 * many trace entries it covers and how many the ring dropped before them.
 *
 * Contracts, for every cmh_*_compute here:
 *  - it reads the snapshot and never changes it; calls on different reports may run at once in
 *    different threads, also over one snapshot;
 *  - it returns CMH_OK, or CMH_ENOMEM with the report left empty (nothing to free);
 *  - a report it filled owns its arrays: free them with the report's own cmh_*_report_free,
 *    which leaves the report empty and may be called on an empty one.
 */
#ifndef CUMEMHIST_REPORTS_H
#define CUMEMHIST_REPORTS_H

#include "analyzer.h"
#include "sites.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmh_site {
    uint32_t group; /* in the cmh_sites the report was computed with; its stack id without one */
    uint32_t stack; /* one stack of the group (the first seen) */
    uint64_t bytes, count;
    int64_t first_ns, last_ns;
    /* leaks only: how the site's still-live bytes accumulated over the windows of the record */
    uint64_t start_bytes;        /* still-live bytes allocated in the first window (or before the trace) */
    uint32_t rises, intervals;   /* later windows in which still-live bytes were allocated; windows */
    double trend;                /* Kendall's tau of the accumulated bytes, 0 .. 1 */
    uint32_t thread;             /* the windows were one recording thread's own entries (0: the record's) */
    int growing;                       /* the leak verdict (CMH_LEAK_MIN_RISES) */
} cmh_site;

typedef struct cmh_report_base {
    int device;
    uint64_t entries, dropped;
    int pytorch; /* byte figures of a PyTorch trace are the allocator's rounded sizes */
    int history; /* the trace says how memory changed; 0: only the end state is known (enabled=state) */
} cmh_report_base;

typedef struct cmh_peak_report {
    cmh_report_base base;
    int64_t alloc_peak, alloc_index, alloc_time_ns; /* index -1: before the first entry */
    int64_t reserved_peak, reserved_index, reserved_time_ns;
    int64_t requested_peak, requested_index, requested_time_ns; /* the bytes asked for, before rounding */
    int64_t alloc_end, reserved_end, requested_end;
    cmh_site *sites; /* live at the allocated peak */
    uint32_t nsites;
} cmh_peak_report;

int cmh_peak_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *out);
void cmh_peak_report_free(cmh_peak_report *r);

/* How the record is cut into windows: at the program's marks, at PyTorch's external annotations,
 * else in ten stretches of equal entry counts. */
enum { CMH_CP_EVEN = 0, CMH_CP_MARKS = 1, CMH_CP_ANNOTATIONS = 2 };

/* The leak verdict (docs/DEFINITIONS.md).  Only the blocks still live at the end count, each in
 * the window it was allocated in, so memory that comes and goes (another thread's temporaries,
 * a step's activations) cannot blur it, however threads interleave.  A site is growing when its
 * still-live blocks were allocated in at least half of the windows after the first (and at
 * least CMH_LEAK_MIN_RISES of them), spread evenly enough that the accumulated bytes trend up
 * (Kendall's tau at least CMH_LEAK_MIN_TREND).  Memory kept a few times and then no more (a
 * warm-up, a cache filled once per thread, the weights) is not called a leak.  When the record
 * knows its threads (a recorder snapshot), each thread's own entries are also cut into ten
 * windows, and a site one thread kept growing all its life is growing, however short that
 * life was next to the record's. */
#define CMH_LEAK_MIN_RISES 3
#define CMH_LEAK_MIN_TREND 0.5

typedef struct cmh_leak_report {
    cmh_report_base base;
    cmh_site *sites; /* still live at the end, at least min_bytes */
    uint32_t nsites;
    /* every still-live block, whatever min_bytes hides */
    uint64_t live_bytes, live_blocks;
    uint32_t live_sites;
    uint32_t leaking;      /* sites growing across the windows (min_bytes hides none of them from the count) */
    uint32_t hidden_sites; /* left out of sites by min_bytes, and their bytes */
    uint64_t hidden_bytes;
    int checkpoint_kind, ncheckpoints; /* ncheckpoints: the number of windows */
} cmh_leak_report;

int cmh_leaks_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, uint64_t min_bytes, cmh_leak_report *out);
void cmh_leak_report_free(cmh_leak_report *r);

/* free = reserved - allocated = releasable + trapped + pending_free (cmh_free_split):
 * pending_free is what the program freed whose stream work has not completed (not yet in a free
 * gap); fragmentation = trapped / reserved, the share of reserved memory that is free and yet
 * neither given back by empty_cache() nor usable by a request larger than its gaps. */
typedef struct cmh_frag_seg {
    uint32_t index;
    uint64_t addr, reserved, allocated, free, pending_free, largest_gap, releasable, trapped;
    double fragmentation; /* trapped / reserved */
    int expandable;
} cmh_frag_seg;

typedef struct cmh_oom_event cmh_oom_event;
typedef struct cmh_frag_report {
    cmh_report_base base;
    cmh_frag_seg *segs; /* at the end of the record */
    uint32_t nsegs;
    uint64_t reserved, allocated, free, pending_free, largest_gap, releasable, trapped, pool_cache;
    double fragmentation;
    int has_oom;
    uint32_t nooms;
    /* the last OOM, as cmh_oom_compute states it at that moment (its sites left out) */
    struct cmh_oom_event_state {
        int64_t index, time_ns;
        uint64_t request, device_free, allocated, reserved, free_inside, pending_free, largest_gap;
        uint64_t releasable, trapped;
        int verdict;
    } last_oom;
} cmh_frag_report;

int cmh_frag_compute(const cmh_snapshot *s, int device, cmh_frag_report *out);
void cmh_frag_report_free(cmh_frag_report *r);

/* Why a request failed: DEMAND when the bytes were in use, FRAGMENTATION when enough were free
 * (inside the segments, plus what the device had left) but no free gap was large enough,
 * FIT_IGNORED when a free gap was large enough (another stream's or pool's, which the allocator
 * may not use for this request). */
enum { CMH_OOM_DEMAND = 0, CMH_OOM_FRAGMENTATION = 1, CMH_OOM_FIT_IGNORED = 2 };
int cmh_oom_verdict(uint64_t request, uint64_t free_inside, uint64_t largest_gap, uint64_t device_free);
/* The verdict in one word ("demand"), and as every report says it in a sentence. */
const char *cmh_oom_verdict_name(int verdict);
const char *cmh_oom_verdict_text(int verdict);

/* free_inside = reserved - allocated (pending_free of it awaits stream work); largest_gap is the
 * largest free run inside one segment. */
struct cmh_oom_event {
    int64_t index, time_ns;
    uint64_t request, device_free, allocated, reserved, free_inside, pending_free, largest_gap;
    int fits_in_gap, verdict;
    cmh_free_split split; /* free_inside - pending_free, split into releasable and trapped */
    uint32_t request_stack, request_group; /* who asked (the OOM entry's stack, 0 when none) */
    cmh_site *sites; /* holding memory at that moment */
    uint32_t nsites;
};

typedef struct cmh_oom_report {
    cmh_report_base base;
    cmh_oom_event *events;
    uint32_t nevents;
} cmh_oom_report;

int cmh_oom_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_oom_report *out);
void cmh_oom_report_free(cmh_oom_report *r);

/* The snapshot's first out-of-memory error by time (the lowest device's first without times):
 * its device, its index in that device's trace and its time.  0 when there is none. */
int cmh_first_oom(const cmh_snapshot *s, int *device, int64_t *index, int64_t *time_ns);

/* Each device's peaks (pinned host memory left out): device first, then the rest by peak
 * reserved, largest first.  Fills up to cap, *n says how many. */
typedef struct cmh_device_load {
    int device;
    uint64_t peak_reserved, peak_allocated;
} cmh_device_load;
int cmh_device_balance(const cmh_snapshot *s, int device, cmh_device_load *loads, int cap, int *n);

/* ---- diff: what a change did, between two snapshots ---- */
typedef struct cmh_diff_site {
    char *key; /* what the site's frames say, as text: how sites are matched across snapshots */
    const cmh_snapshot *snap; /* the snapshot it was first seen in, and its group and stack there */
    uint32_t group, stack;
    int64_t before_end, after_end, before_peak, after_peak; /* live bytes at the end / at the peak */
} cmh_diff_site;

typedef struct cmh_diff_report {
    cmh_peak_report peak[2]; /* before, after */
    uint32_t segments[2];    /* at the end */
    double peak_growth_pct;  /* of peak allocated */
    cmh_diff_site *sites;    /* by the size of the change, largest first */
    uint32_t nsites;
} cmh_diff_report;

/* sites_before / sites_after group each snapshot (both by the same cmh_group_by); NULL: by stack */
int cmh_diff_compute(const cmh_snapshot *before, int dev_before, const cmh_sites *sites_before, const cmh_snapshot *after,
                     int dev_after, const cmh_sites *sites_after, cmh_diff_report *out);
void cmh_diff_report_free(cmh_diff_report *r);

/* ---- kernels (CUPTI sidecar) ---- */
enum { CMH_KSORT_TOTAL = 0, CMH_KSORT_AVG, CMH_KSORT_CALLS, CMH_KSORT_MAX };

typedef struct cmh_kernel_row {
    uint32_t name; /* string id */
    uint64_t calls;
    int64_t total_ns, min_ns, max_ns;
    double avg_ns, pct; /* pct: share of all kernel time */
} cmh_kernel_row;

/* One row per kernel name, of one device or CMH_ALL_DEVICES, sorted (CMH_KSORT_*); *rows is
 * malloc'ed (the caller frees it) and left NULL on failure.  Thread-safe. */
int cmh_kernel_table(const cmh_snapshot *s, int device, int sort, cmh_kernel_row **rows, uint32_t *n, int64_t *gpu_total_ns);
/* On device at time t: the kernel running (latest started), and the last one completed. */
void cmh_kernels_at(const cmh_snapshot *s, int device, int64_t t, const cmh_kernel **running, const cmh_kernel **last_done);


#ifdef __cplusplus
}
#endif
#endif
