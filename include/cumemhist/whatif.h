/*
 * cumemhist/whatif.h - replaying a trace's requests through a model of PyTorch's caching
 * allocator under other settings (analyzer/whatif.c; docs/WHATIF.md says what the model holds,
 * what it leaves out and how far to trust it).
 */
#ifndef CUMEMHIST_WHATIF_H
#define CUMEMHIST_WHATIF_H

#include <stdint.h>

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The settings of PYTORCH_CUDA_ALLOC_CONF the model follows. */
typedef struct cmh_whatif_conf {
    int expandable;      /* expandable_segments */
    uint64_t max_split;  /* max_split_size in bytes; 0 = unlimited */
    int div[16];         /* roundup_power2_divisions per power-of-two MiB bucket (0: none) */
    double gc_threshold; /* garbage_collection_threshold, 0 = off */
    uint64_t pad;        /* the allocator's own, no setting: added to each request before rounding (32 on
                            torch_npu's NPUCachingAllocator, 0 on CUDA's) */
} cmh_whatif_conf;

/* The settings a snapshot was recorded under (its allocator_settings; defaults where absent). */
void cmh_whatif_conf_recorded(const cmh_snapshot *s, cmh_whatif_conf *c);
/* One setting, PyTorch's key and value ("expandable_segments", "True"; "max_split_size_mb",
 * "128"; "roundup_power2_divisions", "4" or "[256:1,512:2,>:8]"; "garbage_collection_threshold",
 * "0.8").  CMH_OK, or CMH_EINVAL with the reason in err. */
int cmh_whatif_conf_set(cmh_whatif_conf *c, const char *key, const char *value, char *err, size_t errlen);
/* PYTORCH_CUDA_ALLOC_CONF's own syntax: "expandable_segments:True,max_split_size_mb:128". */
int cmh_whatif_conf_parse(cmh_whatif_conf *c, const char *conf, char *err, size_t errlen);
/* The setting as PYTORCH_CUDA_ALLOC_CONF would say it ("" for PyTorch's defaults). */
void cmh_whatif_conf_text(const cmh_whatif_conf *c, char *buf, size_t n);

typedef struct cmh_whatif_result {
    uint64_t requests;        /* allocations replayed */
    uint64_t unknown_frees;   /* frees of blocks allocated before the trace began (not replayed) */
    uint64_t unmade_frees;    /* frees the trace shows of blocks the model ran out making (its OOMs at
                                 requests the program was given): no sign of a trace begun late */
    uint64_t peak_reserved, peak_allocated;
    int64_t peak_reserved_index; /* the trace entry at which reserved peaked (-1: never above 0) */
    double frag_at_peak;      /* at the allocated peak (the moment the program needed most, the same entry in every row):
                                 free bytes inside segments / reserved (shown as "free", not fragmentation) */
    uint64_t segment_allocs, segment_frees, segment_maps, segment_unmaps;
    uint32_t empty_cache_calls; /* the program's empty_cache() (a burst of segment frees in the trace) */
    uint32_t ooms;            /* requests the model could not serve at the capacity */
    /* the first of them: where, when, how much; where it is a request the record also failed
     * (a recorded OOM, through its failed retries), first_oom_index is the entry of the OOM
     * `oom` numbers for it and first_oom_number that number (cmh_oom_number); 0 for a request
     * the program had met (a retry that succeeded, or no OOM at all) */
    int64_t first_oom_index, first_oom_time_ns;
    uint64_t first_oom_request;
    uint32_t first_oom_number;
    uint64_t end_reserved, end_allocated;
    /* requests of a private pool (the entry's pool_id, else its final segment's segment_pool_id):
     * the model serves each from its own pool's segments alone */
    uint64_t private_requests, private_bytes;
    /* with compare: the model's segment events against the trace's, one by one */
    uint64_t recorded_segment_events, self_replay_mismatches;
    int64_t first_mismatch_index; /* in the trace's segment events (-1: none) */
    char first_mismatch[256];
} cmh_whatif_result;

/* Replay device's trace under conf at capacity (the device's bytes; 0 = unlimited): the model's
 * segments, the trace's plain driver allocations live at each entry and what the trace's OOM
 * says no entry made (cmh_whatif_cap's outside) together stay within it.
 * compare: also check the model's segment events against the recorded ones (meant for the
 * recorded settings).  CMH_OK, CMH_ENOMEM, or CMH_EINVAL for a trace with nothing to replay
 * (no block-level alloc events: a recorder trace without an allocator above the driver). */
int cmh_whatif_run(const cmh_snapshot *s, int device, const cmh_whatif_conf *conf, uint64_t capacity, int compare,
                   cmh_whatif_result *out);

/* The capacity a trace's first OOM implies (its OOM #1, cmh_oom_first: the first the program saw,
 * else the first retried one): the device as it was then, never below what it held, from the
 * record's facts alone.  capacity: the plain driver allocations live then (whole: whole-block
 * segments, no allocator above asked for them), the allocator's reserve as recorded (reserved:
 * the trace's other segments) and the free memory the OOM reported (free; 0 and free_known 0
 * where it reported none); or the device's total memory where the record knows it (cuMemGetInfo:
 * total) and it is more, the difference (outside: the CUDA context, other processes) then held
 * apart from the model as the plain allocations are.  model: what the model of the recorded
 * settings reserves by then; model_over: it, with whole and outside, is more than the capacity
 * (the model's replay differs from the record and runs out before the record did: a mismatch to
 * say, not a capacity).  All 0 when the trace has no OOM (returns 0; else 1). */
typedef struct cmh_whatif_cap {
    uint64_t capacity, whole, reserved, free, total, outside, model;
    int free_known, model_over;
} cmh_whatif_cap;
int cmh_whatif_capacity_ex(const cmh_snapshot *s, int device, cmh_whatif_cap *out);
/* Its capacity alone (0: no OOM). */
uint64_t cmh_whatif_capacity(const cmh_snapshot *s, int device);

/* Where a replay's first OOM (r, of cmh_whatif_run on device) stands against the record's OOM #1
 * on that device (cmh_oom_first's, the one the capacity is taken at):
 *   CMH_WHATIF_OOM_SAME     the model fails the request the record failed, at the same entry;
 *   CMH_WHATIF_OOM_EARLIER  it runs out before: at a request the program was given (or an OOM it
 *                           got past on a retry), the record's OOM never reached;
 *   CMH_WHATIF_OOM_LATER    it serves the record's OOM and runs out at a later request;
 *   CMH_WHATIF_OOM_NONE     it never runs out (the record did);
 *   CMH_WHATIF_OOM_NO_RECORD the record has no OOM on the device to compare with.
 * *recorded: the record's OOM #1 entry (-1 with none).  One answer for every writer: only SAME
 * is the recorded OOM reproduced. */
enum { CMH_WHATIF_OOM_SAME, CMH_WHATIF_OOM_EARLIER, CMH_WHATIF_OOM_LATER, CMH_WHATIF_OOM_NONE, CMH_WHATIF_OOM_NO_RECORD };
int cmh_whatif_oom_match(const cmh_snapshot *s, int device, const cmh_whatif_result *r, int64_t *recorded);
/* Its name in JSON: "same", "earlier", "later", "none", "no_recorded_oom". */
const char *cmh_whatif_oom_match_name(int match);

/* The settings tried one at a time when none is named (PYTORCH_CUDA_ALLOC_CONF syntax). */
#define CMH_WHATIF_NPANEL 6
extern const char *const cmh_whatif_panel[CMH_WHATIF_NPANEL];

/* Would any setting of the panel have avoided device's first OOM, at the capacity the OOM
 * implies (cap, cmh_whatif_capacity_ex's: its model_over says the model of the recorded
 * settings could not hold what it reserves by then on the device, and runs out earlier)?
 * reproduced: the recorded settings fail that same request, at its entry (match SAME), else the
 * model cannot judge and no setting is tried; match, and the model's own first OOM (model_oom_*:
 * entry, request, `oom`'s number or 0 for a request the program was given; index -1: none) say
 * where it ran out instead.  tried and avoided: bit i for cmh_whatif_panel[i] (a setting equal to
 * the recorded one is not tried).  CMH_EINVAL: no OOM or no block-level trace on the device. */
typedef struct cmh_whatif_panel_result {
    int reproduced;
    int match;             /* cmh_whatif_oom_match's */
    int64_t oom_index;     /* the record's OOM #1 entry */
    int64_t model_oom_index;
    uint64_t model_oom_request;
    uint32_t model_oom_number;
    unsigned tried, avoided;
    cmh_whatif_cap cap;
} cmh_whatif_panel_result;
int cmh_whatif_avoids(const cmh_snapshot *s, int device, cmh_whatif_panel_result *out);

#ifdef __cplusplus
}
#endif
#endif
