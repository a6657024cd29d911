/*
 * blocks.c - the blocks an allocator above the driver reports (cmh_block_alloc and friends) and
 * the driver allocations it manages (cmh_segment_managed).
 *
 * Blocks live in their own live table, keyed by address.  The managed segments are kept in an
 * address-ordered array with the count of reported blocks inside each, so that freeing a
 * segment (or unmapping part of one) knows at once whether blocks were left in it: only then,
 * which is an allocator's bug or a teardown, is the block table searched.  A block counted in a
 * managed segment carries aux = 1.  A count is never below the blocks really inside (a range
 * cut in two gives each part the whole count), so 0 always means "none left".
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct mseg {
    uint64_t lo, hi;
    uint64_t nblocks; /* reported blocks inside, still live */
} mseg;

static cmh_livetab *g_blocks;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cmh_mutex g_mlock = CMH_MUTEX_INITIALIZER;
static mseg *g_m; /* sorted by lo, disjoint */
static uint32_t g_nm, g_capm;

static void init_once(void) { g_blocks = cmh_live_new(); }
static inline void ensure_init(void) { pthread_once(&g_once, init_once); }

/* first index whose hi > addr */
static uint32_t m_lower(uint64_t addr)
{
    assert(cmh_held(&g_mlock));
    uint32_t lo = 0, hi = g_nm;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (g_m[mid].hi <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static mseg *m_containing(uint64_t addr)
{
    uint32_t i = m_lower(addr);
    return i < g_nm && g_m[i].lo <= addr ? &g_m[i] : NULL;
}

static void m_insert(uint64_t lo, uint64_t hi, uint64_t nblocks)
{
    cmh_lock(&g_mlock);
    uint32_t i = m_lower(lo);
    if (i < g_nm && g_m[i].lo < hi) { /* overlaps a managed range: a stale one, replaced */
        g_m[i].lo = lo;
        g_m[i].hi = hi;
        g_m[i].nblocks += nblocks;
        cmh_unlock(&g_mlock);
        return;
    }
    if (g_nm == g_capm) {
        uint32_t nc = g_capm ? g_capm * 2 : 64;
        mseg *nm = realloc(g_m, nc * sizeof *nm);
        if (!nm) {
            cmh_unlock(&g_mlock);
            cmh_count_lost(1);
            return;
        }
        g_m = nm;
        g_capm = nc;
    }
    memmove(&g_m[i + 1], &g_m[i], (g_nm - i) * sizeof *g_m);
    g_m[i] = (mseg){lo, hi, nblocks};
    g_nm++;
    cmh_unlock(&g_mlock);
}

int cmh_blocks_segment_managed(uint64_t addr)
{
    if (!cmh_rec_enabled()) return CMH_OK;
    cmh_live seg;
    int r = cmh_hist_segment_managed(addr, &seg);
    if (r < 0) return r;
    if (r == 1) m_insert(seg.addr, seg.addr + seg.size, 0);
    return CMH_OK;
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
    cmh_lock(&g_mlock);
    mseg *m = m_containing(addr);
    if (m) {
        m->nblocks++;
        l.aux = 1;
    }
    cmh_unlock(&g_mlock);
    if (!g_blocks || cmh_live_insert(g_blocks, &l) != 0) cmh_count_lost(1);
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

/* A block removed from the table: its free, as PyTorch writes one, and its segment's count. */
static void block_gone(const cmh_live *l)
{
    if (l->aux) {
        cmh_lock(&g_mlock);
        mseg *m = m_containing(l->addr);
        if (m && m->nblocks) m->nblocks--;
        cmh_unlock(&g_mlock);
    }
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
    /* 1: were blocks left in the managed ranges that overlap [lo, hi)? */
    int scan = 0;
    cmh_lock(&g_mlock);
    for (uint32_t i = m_lower(lo); i < g_nm && g_m[i].lo < hi; i++) scan |= g_m[i].nblocks != 0;
    cmh_unlock(&g_mlock);
    /* 2: free them, while their managed ranges still count them */
    range r = {lo, hi};
    if (scan && g_blocks) cmh_live_remove_if(g_blocks, in_range, block_gone, &r);
    /* 3: the ranges lose [lo, hi) */
    cmh_lock(&g_mlock);
    uint32_t i = m_lower(lo);
    while (i < g_nm && g_m[i].lo < hi) {
        mseg *m = &g_m[i];
        if (m->lo >= lo && m->hi <= hi) { /* all of it */
            memmove(m, m + 1, (g_nm - i - 1) * sizeof *m);
            g_nm--;
            continue;
        }
        if (m->lo < lo && m->hi > hi) { /* a hole in the middle: two ranges, each keeping the count */
            mseg right = {hi, m->hi, m->nblocks};
            m->hi = lo;
            cmh_unlock(&g_mlock);
            m_insert(right.lo, right.hi, right.nblocks);
            return;
        }
        if (m->lo < lo) m->hi = lo;
        else m->lo = hi;
        i++;
    }
    cmh_unlock(&g_mlock);
}

void cmh_blocks_segment_back(uint64_t lo, uint64_t hi) { m_insert(lo, hi, 0); }

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
    cmh_lock(&g_mlock);
    if (g_blocks) cmh_live_lock_all(g_blocks);
}

void cmh_blocks_atfork_parent(void)
{
    if (g_blocks) cmh_live_unlock_all(g_blocks);
    cmh_unlock(&g_mlock);
}

void cmh_blocks_reset_after_fork(void)
{
    if (g_blocks) cmh_live_reset(g_blocks);
    cmh_mutex_init(&g_mlock);
    free(g_m);
    g_m = NULL;
    g_nm = g_capm = 0;
}
