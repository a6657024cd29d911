/*
 * blocks.c - the blocks an allocator above the driver reports (cmh_block_alloc and friends) and
 * the driver allocations it manages (cmh_segment_managed).
 *
 * Blocks live in their own live table, keyed by address.  Beside it, a count of live blocks per
 * 2 MiB granule of address, kept with one atomic add per block: when a managed segment is freed
 * (or part of one unmapped), the counts of its granules say at once whether blocks were left
 * in it.  Only then, which is an allocator's bug or a teardown, is the block table searched.
 * A count is never below the blocks really there, so 0 always means "none left"; sharing a
 * counter between granules (the table is a window of 2 TiB) only costs a search.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* live reported blocks per 2 MiB granule of address, the granule taken modulo 2^20 (a 2 TiB
 * window; two granules sharing a counter only make a search happen that finds nothing) */
#define GRANULE_SHIFT 21
#define NGRANULES (1u << 20)
static uint32_t g_granules[NGRANULES];

static cmh_livetab *g_blocks;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void) { g_blocks = cmh_live_new(); }
static inline void ensure_init(void) { pthread_once(&g_once, init_once); }

static inline uint32_t *granule(uint64_t addr) { return &g_granules[(addr >> GRANULE_SHIFT) & (NGRANULES - 1)]; }

/* Might a live block start in [lo, hi)?  0 means certainly none. */
static int any_block_in(uint64_t lo, uint64_t hi)
{
    if (hi <= lo) return 0;
    uint64_t first = lo >> GRANULE_SHIFT, last = (hi - 1) >> GRANULE_SHIFT;
    if (last - first >= NGRANULES) return 1;
    for (uint64_t g = first; g <= last; g++)
        if (__atomic_load_n(&g_granules[g & (NGRANULES - 1)], __ATOMIC_RELAXED)) return 1;
    return 0;
}

int cmh_blocks_segment_managed(uint64_t addr)
{
    if (!cmh_rec_enabled()) return CMH_OK;
    cmh_live seg;
    int r = cmh_hist_segment_managed(addr, &seg);
    return r < 0 ? r : CMH_OK;
}

int cmh_blocks_alloc(int device, uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream)
{
    if (!cmh_rec_enabled()) return CMH_OK;
    ensure_init();
    cmh_first_touch();
    int ctx = cmh_rec_context();
    uint32_t stack = ctx >= CMH_CONTEXT_STATE ? cmh_stack_capture() : 0;
    cmh_live l = {addr, size, requested, stream, cmh_now_ticks(), 0, stack, (int16_t)device, CMH_KIND_DEVICE,
                  CMH_BLOCK_ACTIVE_ALLOCATED};
    if (g_blocks && cmh_live_insert(g_blocks, &l) == 0) __atomic_add_fetch(granule(addr), 1, __ATOMIC_RELAXED);
    else cmh_count_lost(1);
    cmh_hist_record(device, CMH_ACT_ALLOC, CMH_KIND_DEVICE, 0, addr, size, requested, stream,
                    ctx >= CMH_CONTEXT_ALLOC ? stack : 0, (int64_t)size, 0, CMH_COUNT_ALLOC, l.ticks);
    return CMH_OK;
}

static int mark_pending(cmh_live *l, void *arg)
{
    (void)arg;
    if (l->flags != CMH_BLOCK_ACTIVE_ALLOCATED) return 0;
    l->flags = CMH_BLOCK_ACTIVE_PENDING_FREE; /* for blocks, flags holds the block state */
    return 1;
}

int cmh_blocks_free_requested(uint64_t addr)
{
    if (!cmh_rec_enabled()) return CMH_OK;
    ensure_init();
    cmh_live l;
    int r = g_blocks ? cmh_live_update(g_blocks, addr, mark_pending, NULL, &l) : 0;
    if (!r) return CMH_EINVAL;
    if (r == 2) return CMH_OK; /* already requested */
    uint32_t stack = cmh_hist_free_stack(l.stack);
    cmh_hist_record(l.device, CMH_ACT_FREE_REQUESTED, CMH_KIND_DEVICE, 0, addr, l.size, l.requested, l.stream, stack,
                    -(int64_t)l.size, 0, CMH_COUNT_NONE, 0);
    return CMH_OK;
}

/* A block removed from the table: its free, as PyTorch writes one. */
static void block_gone(const cmh_live *l)
{
    __atomic_sub_fetch(granule(l->addr), 1, __ATOMIC_RELAXED);
    uint32_t stack = cmh_hist_free_stack(l->stack);
    /* freed at once: PyTorch's readers expect free_requested before free_completed, as its
     * allocator writes them for every free */
    if (l->flags == CMH_BLOCK_ACTIVE_ALLOCATED)
        cmh_hist_record(l->device, CMH_ACT_FREE_REQUESTED, CMH_KIND_DEVICE, 0, l->addr, l->size, l->requested, l->stream,
                        stack, -(int64_t)l->size, 0, CMH_COUNT_NONE, 0);
    cmh_hist_record(l->device, CMH_ACT_FREE_COMPLETED, CMH_KIND_DEVICE, 0, l->addr, l->size, l->requested, l->stream,
                    stack, 0, 0, CMH_COUNT_FREE, 0);
}

int cmh_blocks_free_completed(uint64_t addr)
{
    if (!cmh_rec_enabled()) return CMH_OK;
    ensure_init();
    cmh_live l;
    if (!g_blocks || !cmh_live_remove(g_blocks, addr, &l)) return CMH_EINVAL;
    block_gone(&l);
    return CMH_OK;
}

typedef struct range {
    uint64_t lo, hi;
} range;

static int in_range(const cmh_live *l, void *arg)
{
    const range *r = arg;
    return l->addr >= r->lo && l->addr < r->hi;
}

void cmh_blocks_segment_gone(uint64_t lo, uint64_t hi)
{
    ensure_init();
    if (!g_blocks || !any_block_in(lo, hi)) return; /* the common case: the allocator freed its blocks first */
    range r = {lo, hi};
    cmh_live_remove_if(g_blocks, in_range, block_gone, &r);
}

int cmh_blocks_collect(cmh_live **out, size_t *n)
{
    ensure_init();
    if (!g_blocks) {
        *out = NULL;
        *n = 0;
        return CMH_OK;
    }
    return cmh_live_collect(g_blocks, out, n);
}

void cmh_blocks_atfork_prepare(void)
{
    ensure_init();
    if (g_blocks) cmh_live_lock_all(g_blocks);
}

void cmh_blocks_atfork_parent(void)
{
    if (g_blocks) cmh_live_unlock_all(g_blocks);
}

void cmh_blocks_reset_after_fork(void)
{
    if (g_blocks) cmh_live_reset(g_blocks);
    memset(g_granules, 0, sizeof g_granules);
}
