/*
 * cumemhist/analyzer.h - computations over a snapshot.  No I/O beyond the FILE* handed in.
 *
 * The replay reconstructs one device's memory over its trace.  Because a ring may have dropped
 * its oldest entries, it first walks the trace backwards from the final segments (undoing each
 * entry) to find the state at the first kept entry, then steps forward, keeping PyTorch's
 * memory_stats counters (current / peak / allocated / freed, for all, large and small pools).
 * Definitions: docs/DEFINITIONS.md; PyTorch's allocator rules: docs/PYTORCH.md.
 */
#ifndef CUMEMHIST_ANALYZER_H
#define CUMEMHIST_ANALYZER_H

#include <stdio.h>

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmh_stat {
    int64_t current, peak, allocated, freed;
} cmh_stat;

/* PyTorch's memory_stats(): each per-pool figure is an array indexed by CMH_POOL_ALL,
 * CMH_POOL_SMALL and CMH_POOL_LARGE (snapshot.h). */
typedef struct cmh_mem_stats {
    cmh_stat allocated_bytes[3], active_bytes[3], requested_bytes[3], reserved_bytes[3], inactive_split_bytes[3];
    cmh_stat allocation[3], active[3], segment[3], inactive_split[3];
    cmh_stat oversize_allocations, oversize_segments;
    uint64_t num_ooms, num_alloc_retries;
} cmh_mem_stats;

typedef struct cmh_replay cmh_replay;

/* A replay reads the snapshot and never changes it; several replays of one snapshot may run at
 * once in different threads, each replay used by one thread at a time. */

/* Prepare a replay of device's trace (reconstructing the state before its first entry).
 * Returns NULL on out-of-memory. */
cmh_replay *cmh_replay_new(const cmh_snapshot *s, int device);
/* Apply the next entry and return 1.  After the last entry, one more call returns 0 and
 * reconciles the state with the snapshot's final segments (whatever the trace left different
 * is freed or allocated there, each counted as an anomaly); every later call returns 0. */
int cmh_replay_step(cmh_replay *r);
/* CMH_ENOMEM once any step ran out of memory (its figures are then not to be trusted), else
 * CMH_OK.  Every computation over a replay checks it before it reports. */
int cmh_replay_status(const cmh_replay *r);
const cmh_mem_stats *cmh_replay_stats(const cmh_replay *r);
/* Of a PyTorch trace's allocated bytes now, what blocks hold beyond their rounded requests
 * because the allocator did not split them: PyTorch's should_split() keeps a large-pool block
 * whole when no more than kSmallSize (1 MiB) would be left, and allocated_bytes counts the
 * block's size (docs/PYTORCH.md): the model's blocks sized so, and the final segments' blocks
 * of classic large-pool segments larger than their rounded requests. */
int64_t cmh_replay_unsplit_bytes(const cmh_replay *r);

/* The bytes a snapshot's allocator adds to each request before rounding it: 32 for torch_npu's
 * NPUCachingAllocator on Ascend chips before the 910_95 (its round_size(): size + 32, then
 * PyTorch's steps; 0 on CUDA's and on later chips).  No field of a snapshot names the device
 * type: its live blocks in pools that always split (small, expandable) say which rounding made
 * them; where none does, torch_npu in its frames says an NPU and the pad is assumed (*assumed
 * 1).  The replay, the what-if model and every figure of block sizes use it. */
uint64_t cmh_allocator_pad(const cmh_snapshot *s, int *assumed);
#define CMH_ALLOCATOR_NPU_PAD 32u
/* Index (within the device's trace) of the entry applied last, -1 before the first. */
int64_t cmh_replay_position(const cmh_replay *r);
/* Entries whose effect contradicted the state (e.g. a free of an unknown block): a measure of
 * how far the trace and final segments disagree. */
uint64_t cmh_replay_anomalies(const cmh_replay *r);
void cmh_replay_free(cmh_replay *r);

/* Where the trace and the snapshot's final segments disagree about the end (docs/DEFINITIONS.md,
 * "trace gap"), as the reconciliation after the last entry found it (zeros before it).
 * Stops early: the trace's own end state holds blocks (and segments) that the snapshot does not:
 * the entries that freed them are missing after its last one (PyTorch's history turned off with
 * _record_memory_history(enabled=None), or its ring full, before _dump_snapshot; a record cut
 * short).  The reconciliation frees them there, so the end's figures are the snapshot's.
 * Starts late: blocks active at the snapshot that no kept entry allocated (the trace began
 * mid-run, or the ring dropped the entries that made them): live since before the first entry,
 * or added at the reconciliation. */
typedef struct cmh_trace_gap {
    uint64_t unfreed_blocks, unfreed_bytes;     /* stops early: blocks left active, the snapshot holds none there */
    uint64_t unfreed_segments, unfreed_reserved; /* stops early: segments left, the snapshot lacks */
    uint64_t untraced_blocks, untraced_bytes;   /* starts late: active at the snapshot, allocated by no entry */
    /* stream-ordered pools whose latest samples are older than the device's last cuMemGetInfo
     * sample, which says less in use: what of their cache the end takes as given back (at a
     * synchronize, which no hook sees), and that sample's time (cmh_replay_pools_stale) */
    uint64_t pools_given_back;
    int64_t pools_sample_ns;
} cmh_trace_gap;
void cmh_replay_gap(const cmh_replay *r, cmh_trace_gap *out);

/* Watch the replay: fn(arg, +bytes or -bytes, stack, address) for every active block that
 * appears or is freed (completed), including the blocks present before the first entry. */
typedef void (*cmh_replay_observer)(void *arg, int64_t delta, uint32_t stack, uint64_t addr);
void cmh_replay_observe(cmh_replay *r, cmh_replay_observer fn, void *arg);
/* Entry i of the device's trace (NULL outside it), and how many there are. */
const cmh_entry *cmh_replay_entry(const cmh_replay *r, int64_t i);
/* The snapshot the replay's entries are of (their rarer fields are read against it). */
const cmh_snapshot *cmh_replay_snapshot(const cmh_replay *r);
int64_t cmh_replay_length(const cmh_replay *r);

/* Device memory as the driver charges it where cuMemCreate handles are mapped (physmap.c): fed
 * a device's trace entries in order, it keeps which handle each mapped range holds (the record's
 * vmm_maps), so that a handle counts its size once, however many ranges map it and however much
 * of it they map, and the handles held and mapped nowhere:
 * physical = reserved + cmh_physmap_adjust() + cmh_physmap_held().  NULL: out of memory. */
typedef struct cmh_physmap cmh_physmap;
cmh_physmap *cmh_physmap_new(const cmh_snapshot *s, int device);
void cmh_physmap_free(cmh_physmap *p);
int cmh_physmap_has_rows(const cmh_physmap *p); /* the record names the device's maps' handles */
void cmh_physmap_step(cmh_physmap *p, const cmh_entry *e);
int64_t cmh_physmap_adjust(const cmh_physmap *p);
int cmh_physmap_status(const cmh_physmap *p); /* CMH_ENOMEM if a step ran out of memory */
/* the map whose handle is mapped at addr now (NULL: none, or a map without a row) */
const cmh_vmm_map *cmh_physmap_find(const cmh_physmap *p, uint64_t addr);
/* addr is in a managed allocation (cuMemAllocManaged) now */
int cmh_physmap_managed(const cmh_physmap *p, uint64_t addr);
/* Counting a moment's blocks: reset, then take each mapped block's bytes (what is left of its
 * handle's size: an alias of bytes taken already is 0), then the handles' remainders (the part
 * mapped nowhere), each once. */
void cmh_physmap_reset(cmh_physmap *p);
uint64_t cmh_physmap_take(cmh_physmap *p, const cmh_vmm_map *row, uint64_t bytes);
void cmh_physmap_remainders(const cmh_physmap *p, void (*fn)(void *, const cmh_vmm_map *, uint64_t), void *arg);
/* The bytes (and *count, the handles) of cuMemCreate handles in use and mapped nowhere now (by
 * t_ns: the moment's time, at least the last entry stepped's; INT64_MAX: the end): of those the
 * record says were held so at its end (vmm_unmapped), the ones seen mapped from their unmap on,
 * the ones never mapped from their making; and the handles made and not mapped yet (their
 * vmm_maps rows say when they were made; no map of them stepped yet), which the driver charges
 * from cuMemCreate on.  In no range and no block: a moment's own row (owners), and part of
 * physical = reserved + adjust + held. */
uint64_t cmh_physmap_held(cmh_physmap *p, int64_t t_ns, uint32_t *count);
/* The handle the maps name (cmh_vmm_map.handle) that held row h of the device's vmm_unmapped is,
 * as the physmap matched them (physmap.c); 0: never mapped, as far as the maps say. */
uint64_t cmh_physmap_held_handle(const cmh_physmap *p, const cmh_vmm_handle *h);
/* A device's physical peak and end (reserved + the adjustment + the handles held and mapped
 * nowhere, entry by entry); *known 0 where the record has neither vmm_maps rows nor held
 * handles for the device, or they never change a figure. */
typedef struct cmh_physical_peak {
    int known;            /* the handles make physical differ from reserved at some entry, or at the end */
    int64_t peak, at_end; /* bytes */
    int64_t index;        /* the peak's entry in the device's trace (-1: before the first) */
    int64_t time_ns;
} cmh_physical_peak;
int cmh_physical_peak_compute(const cmh_snapshot *s, int device, cmh_physical_peak *out);
/* The same, and the physical bytes after entry index of the device's trace (*at_index; -1 where
 * the trace has no such entry): whether another moment is a physical peak too. */
int cmh_physical_peak_at(const cmh_snapshot *s, int device, int64_t index, cmh_physical_peak *out, int64_t *at_index);

/* The record's cuMemCreate handles, one row each (vmm_handles.c): those its maps or its releases
 * (vmm_released) name, in order of device and handle number, then those held and never mapped
 * (no number: the recorder numbers only the handles it saw mapped or released), with how many
 * maps each had, its state at the end: mapped somewhere, held and mapped nowhere (vmm_unmapped),
 * or released; and when cuMemRelease released it.  *rows malloc'd (free it; NULL with none).
 * CMH_OK or CMH_ENOMEM. */
enum { CMH_VMMH_MAPPED, CMH_VMMH_UNMAPPED, CMH_VMMH_RELEASED };
typedef struct cmh_vmm_handle_row {
    int32_t device;
    int numbered;     /* handle is the record's number for it (0: held and never mapped) */
    uint64_t handle;
    uint64_t size;
    uint32_t stack;   /* cuMemCreate's (0: none) */
    int64_t time_ns;  /* cuMemCreate's (0: not known) */
    uint32_t maps;    /* cuMemMap calls of it */
    uint8_t state;    /* CMH_VMMH_* */
    int64_t release_ns; /* cuMemRelease's (0: not released while recorded, or a record from before releases were kept) */
} cmh_vmm_handle_row;
int cmh_vmm_handle_rows(const cmh_snapshot *s, cmh_vmm_handle_row **rows, uint32_t *n);
/* "mapped", "unmapped" (held, mapped nowhere) or "released" */
const char *cmh_vmm_handle_state_name(int state);

typedef struct cmh_live_block {
    uint64_t addr, size, requested;
    int64_t time_ns;
    uint32_t stack;
    uint8_t state, pool;
    /* another piece of an allocation a block given already is part of (a cuMemMap unmapped in
     * its middle is one allocation in two pieces): its bytes count, not as one more block */
    uint8_t more;
} cmh_live_block;
/* Every active block now. */
void cmh_replay_blocks(const cmh_replay *r, void (*fn)(void *, const cmh_live_block *), void *arg);
typedef struct cmh_live_segment {
    uint64_t addr, size;
    uint8_t pool, expandable; /* pool: CMH_POOL_SMALL or CMH_POOL_LARGE */
} cmh_live_segment;
/* Every segment now (a contiguous mapped range of an expandable one), by address. */
void cmh_replay_segments(const cmh_replay *r, void (*fn)(void *, const cmh_live_segment *), void *arg);
/* Free bytes inside reserved memory now (the segments' free runs, plus what stream-ordered
 * pools keep beyond what they hand out), and the largest contiguous free run in one segment.
 * For a trace that agrees with itself (no anomalies), free_inside = reserved - active. */
void cmh_replay_free_space(const cmh_replay *r, uint64_t *free_inside, uint64_t *largest_gap);

/* Free memory inside reserved memory, split by what could be done with it (docs/DEFINITIONS.md):
 * releasable = what empty_cache() (or cuMemPoolTrimTo) would give back: segments that hold no
 * active block, the whole pages of an expandable segment's free runs (cmh_expandable_page), a pool's cache;
 * trapped = the free gaps between active blocks that nothing can give back, usable only by
 * requests that fit them; private = the free runs of segments in a private pool (a PyTorch
 * segment whose segment_pool_id is not (0, 0): a CUDA graph's or a MemPool's), which neither
 * empty_cache() gives back while the pool lives nor a request outside the pool can use;
 * own_pool = for a request of a private pool (cmh_replay_free_split_for), the free runs of that
 * pool's own segments: the request's to use where a run fits, never given back while the pool
 * lives (they are not in private, which then holds the other pools' alone).
 * releasable + trapped + private + own_pool + pending free = reserved - allocated.
 * unusable = what of it the request's pool could not have used: private, and for a private
 * pool's request the default pool's trapped gaps too (the allocator serves a private pool from
 * its own blocks and new segments only; what empty_cache() gives back becomes the device's). */
typedef struct cmh_free_split {
    uint64_t releasable, trapped, pool_cache; /* pool_cache: the part of releasable pools keep */
    uint64_t expandable_pages; /* the part of releasable that is the free pages of expandable
                                  segments still holding blocks (not empty segments) */
    uint64_t largest_gap;  /* the largest free run in one segment of the request's pool (the default
                              pool's without a request), either kind */
    uint64_t private_free; /* free inside private pools' segments other than the request's (not in
                              the three above) */
    uint64_t own_pool;     /* free inside the request's own private pool's segments */
    uint64_t unusable;     /* private_free, plus trapped for a private pool's request */
    uint64_t top_pool[2], top_pool_free; /* the other private pool with the most of private_free (among
                                            the first 32 pools seen), and how much */
} cmh_free_split;
void cmh_replay_free_split(const cmh_replay *r, cmh_free_split *out);
/* The same, as a request of pool request_pool sees it (PyTorch's pool id; (0, 0) the default
 * pool: then the same figures as cmh_replay_free_split). */
void cmh_replay_free_split_for(const cmh_replay *r, const uint64_t request_pool[2], cmh_free_split *out);
/* The stream-ordered pool keeping the most of pool_cache now: its handle and bytes (0, 0: none). */
void cmh_replay_pool_cache_top(const cmh_replay *r, uint64_t *pool, uint64_t *bytes);
/* The stream-ordered pool the failed request at entry oom asked (its handle): the pool sample the
 * recorder flags CMH_POOL_REQUEST right before that oom entry on the same thread; 0 when the
 * record does not say (an older record, not a pooled request). */
uint64_t cmh_replay_request_pool(const cmh_replay *r, int64_t oom);
/* What the replay's pools keep (their cache) now, but pool's: its total, and the pool keeping the
 * most of it (its handle and bytes). */
uint64_t cmh_replay_pool_cache_except(const cmh_replay *r, uint64_t pool, uint64_t *top, uint64_t *top_bytes);

/* What a record says of a stream-ordered pool (its pool_sample entries, CMH_POOL_* in their stream
 * field): its kind, its device, and for a private pool its number (1, 2, ... in the order of the
 * cuMemPoolCreate calls or first samples across the record) and its creation's stack. */
typedef struct cmh_pool_desc {
    uint64_t handle;
    int device;
    unsigned kind;   /* CMH_POOL_DEFAULT, CMH_POOL_PRIVATE, 0 not said (an older record) */
    uint32_t number; /* private pools: 1, 2, ...; 0 otherwise */
    uint32_t stack;  /* its cuMemPoolCreate's stack, 0 not recorded */
    int64_t time_ns; /* its creation's (or first sample's) time */
} cmh_pool_desc;
/* Every pool the record names, in order of creation (a handle the driver hands out again after a
 * cuMemPoolDestroy is a new pool); *out malloc'ed, to free.  CMH_OK or CMH_ENOMEM. */
int cmh_pool_descs(const cmh_snapshot *s, cmh_pool_desc **out, uint32_t *n);
/* The pool with handle alive at time at_ns (the latest created by then; the first when none), or NULL. */
const cmh_pool_desc *cmh_pool_desc_find(const cmh_pool_desc *d, uint32_t n, uint64_t handle, int64_t at_ns);
/* Which stream-ordered pool a pooled call (entry i of the n entries ents, a trace's) is of: the
 * pool sample its thread recorded right after it (the hooks sample the pool an allocation came
 * from, or a free went back to, once the call returns, on the same thread; other threads'
 * entries may come between).  The sample's index in ents, or -1 when the thread's next call came
 * first (none said).  One answer for the pool ids (cmh_pool_tags) and the replay's caches. */
int64_t cmh_pool_sample_after(const cmh_snapshot *s, const cmh_entry *ents, uint32_t n, uint32_t i);
/* The PyTorch pool ids of a recorder's allocations (analyzer/pool_ids.c): a private pool's
 * (cuMemPoolCreate) segments and entries (0, base + N) for "private pool #N"; any other driver
 * allocation is in no pool (its id stays (0, 0), which a writer of a recorder's snapshot says as
 * none).  *out NULL where there is nothing to add (a PyTorch snapshot, no private pool): every id
 * is then the snapshot's own.  CMH_OK or CMH_ENOMEM. */
typedef struct cmh_pool_tags cmh_pool_tags;
int cmh_pool_tags_new(const cmh_snapshot *s, cmh_pool_tags **out);
void cmh_pool_tags_free(cmh_pool_tags *pt);
/* A final segment's pool id (its own where it has one). */
void cmh_pool_tags_segment(const cmh_pool_tags *pt, const cmh_segment *g, uint64_t id[2]);
/* Entry i of trace tr's pool id (its own where it has one); asked of every entry of each trace
 * in order (it follows the segments live).  CMH_OK or CMH_ENOMEM. */
int cmh_pool_tags_entry(cmh_pool_tags *pt, const cmh_snapshot *s, const cmh_trace *tr, uint32_t i, uint64_t id[2]);
/* After the last entry: what of the stream-ordered pools' cache the end took as given back
 * because the pools' latest samples are older than the device's last cuMemGetInfo sample, which
 * says less in use than the trace holds (a record without samples at its dump: a pool trims at
 * a synchronize, which no hook sees); its bytes and that sample's time.  1 when so, else 0. */
int cmh_replay_pools_stale(const cmh_replay *r, uint64_t *bytes, int64_t *sample_ns);
/* What the stream-ordered pools keep now, as the replay knows it (their samples, the pooled
 * calls since): the part of reserved memory no segment shows. */
uint64_t cmh_replay_pools_cache(const cmh_replay *r);
/* The split of one free run [a, b) of a segment starting at base (added to *releasable and
 * *trapped); page: an expandable segment's page (cmh_expandable_page), 0 for another segment. */
void cmh_free_gap(uint64_t a, uint64_t b, int holds_active, uint64_t base, uint64_t page, uint64_t *releasable, uint64_t *trapped);
/* The page an expandable segment of pool (CMH_POOL_*) maps and unmaps in: PyTorch's 20 MiB
 * (kLargeBuffer) in its large pool, else 2 MiB. */
uint64_t cmh_expandable_page(const cmh_snapshot *s, int pool);

/* memory_summary(): replay the whole trace of device and fill stats. */
int cmh_summary_compute(const cmh_snapshot *s, int device, cmh_mem_stats *out);
/* The exact torch.cuda.memory_summary() table. */
void cmh_summary_print(const cmh_mem_stats *st, int device, int abbreviated, FILE *fp);
/* The same table; pytorch 0 titles it "CUDA memory summary" (a record PyTorch's allocator did not
 * make: its figures are the driver's or another allocator's, in PyTorch's layout). */
void cmh_summary_print_titled(const cmh_mem_stats *st, int device, int abbreviated, int pytorch, FILE *fp);
/* The same table; history 0 (a record with no history: enabled=state, PyTorch's history off)
 * prints only Cur Usage, the end state: Peak, Tot Alloc, Tot Freed, the OOMs and the retries
 * read '-' (not known), where the replay would give the end state again and zeros; history
 * CMH_SUMMARY_OOMS_KNOWN (no history, but the record counted its OOMs: the recorder's
 * enabled=state, as PyTorch's num_ooms) prints the OOMs' count too. */
#define CMH_SUMMARY_OOMS_KNOWN 2
void cmh_summary_print_known(const cmh_mem_stats *st, int device, int abbreviated, int pytorch, int history, FILE *fp);

/* torch/cuda/_memory_viz.py's `stats` (segsum) and `trace` text, character for character, of
 * a snapshot in PyTorch's shape (a recorder snapshot goes through cmh_memviz_shape first, as
 * its export would).  device: one device's segments / trace, or CMH_ALL_DEVICES as the script
 * does.  CMH_EIO when writing to fp failed. */
#define CMH_ALL_DEVICES (-2)
int cmh_print_segsum(const cmh_snapshot *s, int device, FILE *fp);
int cmh_print_trace(const cmh_snapshot *s, int device, FILE *fp);

/* The record's clock (analyzer/clock.c): the time of its first and of its last event across
 * every device (trace entries, kernels, PyTorch's part on our clock), 0 when nothing has a
 * time.  Every view counts "+N.NNNs" from cmh_clock_origin and says so. */
int64_t cmh_clock_origin(const cmh_snapshot *s);
int64_t cmh_clock_last(const cmh_snapshot *s);

#ifdef __cplusplus
}
#endif
#endif
