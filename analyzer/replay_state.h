/*
 * replay_state.h - one device's replay (struct cmh_replay) as the files that make it share it
 * (private to analyzer/; the API is cumemhist/analyzer.h).  replay.c holds the operations on the
 * state and the forward pass over the trace; replay_backward.c the backward pass that finds the
 * state before the first entry, and the copies of it kept while a memo is; replay_views.c what
 * is read off a state (its blocks, segments and free space) and its copies (checkpoints).
 *
 * The passes share the state and the operations on it (a segment cut out, a block carved), and
 * each must undo exactly what the other does: the operations both call are here, the small ones
 * inline (each pass calls them for every entry), the others declared (defined in replay.c).
 */
#ifndef CMH_REPLAY_STATE_H
#define CMH_REPLAY_STATE_H

#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "oatab.h"
#include "pt_rules.h"

typedef struct range {
    uint64_t a, b;
} range;

typedef struct rseg {
    uint64_t addr, size;
    uint8_t pool, expandable, whole;
    /* the private pool its segment_alloc said (newer PyTorch): the pool id's number in
     * s->pool_ids, 0 when it said none (in the padding before active_bytes: no bigger) */
    uint32_t priv;
    uint64_t active_bytes;
    uint32_t nactive, gaps;
    range *r;
    uint32_t nr, capr;
    struct rseg *next_spare; /* on the replay's spare list */
} rseg;

typedef struct rblock {
    uint64_t addr; /* the key (oatab.h): a block at address 0 cannot exist and is an anomaly */
    uint64_t size, requested;
    int64_t time_ns;
    uint32_t stack;
    uint8_t state, pool;
    uint8_t final; /* backward pass: this block is one of the final segments' own */
    uint8_t untraced : 1; /* forward pass: live before the first entry, or added at the reconciliation */
    uint8_t unsplit : 1;  /* forward pass: a PyTorch block sized as the whole free run the allocator did not split */
    uint8_t piece : 1;    /* forward pass: one of the pieces an unmap inside it cut a block into (cmh_replay.pieces) */
} rblock;

typedef struct hslot { /* backward pass without maps: segments by exact address */
    uint64_t addr;
    rseg *g;
} hslot;

struct cmh_replay {
    const cmh_snapshot *s;
    const cmh_entry *e;
    uint32_t n;
    int64_t pos;
    /* Sorted by address.  A removed segment leaves a NULL (its saddr kept, so the order holds)
     * that a later insert next to it reuses; maybe_compact() drops them once they outnumber the
     * live ones.  Frees at random positions then cost no memmove. */
    rseg **segs;
    uint64_t *saddr; /* segs[i]->addr, side by side: the binary search touches one cache line */
    uint32_t nsegs, capsegs, ndead;
    cmh_oatab blocks; /* of rblock */
    cmh_mem_stats st;
    uint64_t anomalies;
    /* of allocated_bytes, what unsplit blocks (rblock.unsplit) hold beyond their rounded requests */
    int64_t unsplit_bytes;
    int pt_alloc; /* the alloc being applied is a PyTorch entry of a merged view (CMH_EF_PYTORCH) */
    cmh_pt_rules rules; /* PyTorch's, from the snapshot's allocator settings */
    int pytorch;        /* sizes in the trace are requested bytes: round like the allocator
                           (a merged view: only its entries flagged CMH_EF_PYTORCH) */
    uint64_t *exact;    /* pytorch: per alloc entry, the block's size when the final segments know it */
    uint32_t *final_stack; /* per entry without a stack: its block's stack at the end, if it survives */
    /* backward pass without maps: segments by exact address (hslot), ordered only at the end */
    cmh_oatab hseg;
    int hashmode;
    /* backward pass: the blocks of cuMemMap's whole-block maps, sorted by address, so that undoing
     * a map takes every piece of it its partial unmaps' undoing put back (replay_backward.c) */
    range *mapped;
    uint32_t nmapped, capmapped;
    /* forward pass: the blocks an unmap inside them cut in two (a cuMemMap unmapped in its
     * middle): the pieces are one allocation, counted once, until the last of them goes; by
     * their block's making time and stack (each piece keeps both), with how many are live */
    struct rpiece {
        int64_t time_ns;
        uint32_t stack, live;
    } *pieces;
    uint32_t npieces, cappieces;
    int in_part; /* fwd_free_part is cutting a block: fwd_free_completed leaves its pieces alone */
    int initializing; /* building the state before the first entry: split stats counted after */
    int nomem;        /* an allocation failed: the state is no longer exact */
    int device, reconciled;
    cmh_trace_gap gap; /* what the reconciliation found (cmh_replay_gap) */
    /* stream-ordered pools: reserved beyond used at the latest pool_sample, per pool handle */
    struct rpool {
        uint64_t handle;
        int64_t slack;
    } *pools;
    uint32_t npools;
    /* bytes moved between segments and the pools' caches since the pools' last samples, as the
     * stream-ordered calls moved them: a pooled free keeps its bytes in its pool (+), a pooled
     * allocation takes first from what the pools keep (-).  Reserved memory changes only by
     * what the next sample says beyond this (fwd_pool_sample), so a cached free is no -16, +16
     * of reserved (it made Tot Alloc/Freed count every cached free twice) */
    int64_t pool_pend;
    int64_t pool_took; /* of it, what pooled allocations took from the pools' caches (>= 0) */
    int64_t took_small; /* of that, what came from the small class's part of the caches */
    int64_t cache_small; /* of what the pools keep, the part small segments left (summary's rows) */
    /* segments freed into the pools and kept there (their sizes, classes and pools): still
     * reserved segments, as their bytes are still reserved memory; and per class, how many of them
     * pooled allocations took again since the pools' last sample (cached_segs_*, replay.c) */
    struct cseg {
        uint64_t size;
        uint64_t owner; /* its pool's handle (cmh_pool_sample_after), 0 not said */
        uint8_t pool;
    } *cached;
    uint32_t ncached, capcached;
    int64_t took_segs[3];
    /* pools_stale_end: the latest pool sample (its time, CMH_EF_AT_DUMP on it), the first
     * cuMemGetInfo sample's time (0: passed or none) and what the trace held then, and what the
     * end took as given back by the pools after their latest sample, and the sample saying so */
    int64_t pool_sample_ns, base_ns;
    int pool_at_dump, base_known;
    uint64_t base_held, base_used, stale_trim;
    /* live cuMemAllocManaged bytes (forward pass): memory the driver may not count as used, left
     * out of what pools_stale_end sets against a cuMemGetInfo sample */
    int64_t managed_live;
    int64_t stale_sample_ns;
    int pooled_op; /* the segment call being applied is a stream-ordered pool's (with samples) */
    uint64_t pooled_owner; /* and its pool's handle (cmh_pool_sample_after), 0 not said */
    cmh_replay_observer obs; /* told of every active block that appears or goes */
    void *obs_arg;
    rseg *spare; /* removed segments for reuse (seg_new) */
    int borrowed; /* exact and final_stack are another replay's (cmh_replay_clone) */
};

/* ---- blocks ---- */

static inline rblock *block_find(cmh_replay *r, uint64_t addr) { return addr ? cmh_oa_find(&r->blocks, addr) : NULL; }

/* The block at addr, created (zeroed: nothing of an earlier tenant, its 'final' mark above all)
 * if absent; NULL for address 0 or out of memory. */
static inline rblock *block_put(cmh_replay *r, uint64_t addr)
{
    if (!addr) return NULL;
    rblock *b = cmh_oa_get(&r->blocks, addr, NULL);
    if (!b) r->nomem = 1;
    return b;
}

static inline void block_del(cmh_replay *r, rblock *b) { cmh_oa_remove(&r->blocks, b); }

/* ---- segments ---- */

/* The first index with seg addr > addr.  Branch-free (the halving is a conditional move): every
 * lookup of the replay goes through here, and its branches would be coin flips. */
static inline uint32_t seg_lower(const cmh_replay *r, uint64_t addr)
{
    const uint64_t *a = r->saddr, *base = a;
    uint32_t len = r->nsegs;
    if (!len) return 0;
    while (len > 1) {
        uint32_t half = len / 2;
        base = base[half] <= addr ? base + half : base;
        len -= half;
    }
    return (uint32_t)(base - a) + (*base <= addr);
}

static inline rseg *seg_containing(const cmh_replay *r, uint64_t addr)
{
    uint32_t i = seg_lower(r, addr);
    while (i && !r->segs[i - 1]) i--;
    if (!i) return NULL;
    rseg *g = r->segs[i - 1];
    return addr < g->addr + g->size ? g : NULL;
}

static inline void maybe_compact(cmh_replay *r)
{
    if (r->ndead < 64 || r->ndead * 2 < r->nsegs) return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < r->nsegs; i++)
        if (r->segs[i]) {
            r->segs[k] = r->segs[i];
            r->saddr[k++] = r->saddr[i];
        }
    r->nsegs = k;
    r->ndead = 0;
}

/* A zeroed segment, from the spares when there is one: a trace allocates and frees segments by
 * the million, and calloc/free were a tenth of the replay.  A spare keeps its range array. */
static inline rseg *seg_new(cmh_replay *r)
{
    rseg *g = r->spare;
    if (!g) return calloc(1, sizeof *g);
    r->spare = g->next_spare;
    range *keep = g->r;
    uint32_t capr = g->capr;
    memset(g, 0, sizeof *g);
    g->r = keep;
    g->capr = capr;
    return g;
}

static inline void seg_release(cmh_replay *r, rseg *g)
{
    g->next_spare = r->spare;
    r->spare = g;
}

static inline uint8_t pool_rule(uint64_t size, int whole) { return (uint8_t)cmh_pool_rule(size, whole); }

/* ---- what both passes call (replay.c) ----
 * Hidden: the analyzer's own, never interposed, so that within replay.c the calls stay direct
 * and open to inlining as they were when these were static (the library is built
 * position-independent). */
#define CMH_RP_HIDDEN __attribute__((visibility("hidden")))

/* A segment at addr in the sorted array; NULL out of memory (r->nomem set). */
CMH_RP_HIDDEN rseg *cmh_rp_seg_insert(cmh_replay *r, uint64_t addr, uint64_t size, uint8_t pool, int expandable, int whole);
/* A mapped range of an expandable segment, joined to the mapped ranges of the same pool beside it. */
CMH_RP_HIDDEN rseg *cmh_rp_seg_map(cmh_replay *r, uint64_t addr, uint64_t size, uint8_t pool);
/* A segment's going (whole: CMH_EF_WHOLE_BLOCK, its block freed first): every segment overlapping
 * [addr, addr + size) removed or trimmed, with the stats. */
CMH_RP_HIDDEN void cmh_rp_segment_free_at(cmh_replay *r, uint64_t addr, uint64_t size, int whole);
/* Every table of r freed (its segments, spares, blocks, the backward pass's hash). */
CMH_RP_HIDDEN void cmh_rp_free_tables(cmh_replay *r);

/* ---- the state before the first entry, as lists (replay_backward.c) ---- */
typedef struct pre_seg {
    uint64_t addr, size;
    uint8_t pool, expandable, whole;
} pre_seg;

typedef struct pre_state {
    int device;
    uint32_t n;
    uint64_t *exact;       /* n, or NULL as the replay had it */
    uint32_t *final_stack; /* n, or NULL */
    pre_seg *segs;         /* in address order */
    rblock *blocks;        /* in the order the forward state takes them */
    uint32_t nsegs, nblocks;
} pre_state;

/* The kept states (while a memo is: reports.h) and the backward pass that finds one; each
 * function's comment is at its definition. */
CMH_RP_HIDDEN void cmh_rp_pre_free(pre_state *p);
CMH_RP_HIDDEN int cmh_rp_pre_get(const cmh_snapshot *s, int device, pre_state *out);
CMH_RP_HIDDEN void cmh_rp_pre_put(const cmh_snapshot *s, const pre_state *p);
CMH_RP_HIDDEN int cmh_rp_backward(cmh_replay *r, const cmh_snapshot *s, int device, pre_state *pre);

#endif
