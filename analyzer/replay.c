/*
 * replay.c - one device's memory, reconstructed entry by entry.
 *
 * Two passes.  Backwards: start from the final segments and their active blocks and undo every
 * entry from the newest to the oldest; what remains is the state just before the first kept
 * entry (segments allocated before the ring's window, blocks whose alloc was dropped).
 * Forwards: start from that state and apply the entries, keeping PyTorch's memory_stats
 * counters.  Contradictions (a free of a block that does not exist, an alloc over a live one)
 * are counted as anomalies and applied as leniently as possible, never fatal.
 *
 * Segments live in an array sorted by address; each keeps its active blocks as sorted ranges so
 * that the non-releasable figure (free space inside segments that still hold an active block,
 * and the number of free runs there) updates in O(blocks in that segment).
 *
 * The state (its types and the small operations both passes call: replay_state.h) is shared by
 * both passes and by the reconciliation at the end, and each pass must undo exactly what the
 * other does.  This file: the operations on the state and the forward pass, from the start
 * state to the reconciliation; replay_backward.c: the backward pass and the start states kept
 * while a memo is; replay_views.c: what is read off a state and its copies.  PyTorch's sizing
 * rules are apart (pt_rules.c), and so is everything computed from a replay (reports.c, leaks.c,
 * frag.c, oom.c, diff.c, summary.c).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "replay_state.h"

/* ---- segments ---- */

/* The index of the first live segment that ends after addr (nsegs if none).  Holes are skipped
 * both ways: a hole's address may lie inside a live segment that grew over it (cmh_rp_seg_map). */
static uint32_t seg_first_after(const cmh_replay *r, uint64_t addr)
{
    uint32_t i = seg_lower(r, addr);
    while (i && !r->segs[i - 1]) i--;
    if (i && r->segs[i - 1]->addr + r->segs[i - 1]->size > addr) i--;
    while (i < r->nsegs && !r->segs[i]) i++;
    return i;
}

/* The block PyTorch carved at addr for a request: the rounded size, or the whole free run when
 * the allocator would not split it. */
static uint64_t pt_block_size(const cmh_replay *r, const rseg *g, uint64_t addr, uint64_t req)
{
    uint64_t rounded = cmh_pt_round(&r->rules, req);
    if (!g || g->expandable) return rounded;
    uint64_t end = g->addr + g->size;
    uint32_t lo = 0, hi = g->nr;
    while (lo < hi) { /* first active range starting after addr */
        uint32_t mid = (lo + hi) / 2;
        if (g->r[mid].a <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo < g->nr) end = g->r[lo].a;
    if (end <= addr || end - addr < rounded) return rounded;
    return cmh_pt_should_split(&r->rules, g->pool, g->expandable, rounded, end - addr - rounded) ? rounded : end - addr;
}

rseg *cmh_rp_seg_insert(cmh_replay *r, uint64_t addr, uint64_t size, uint8_t pool, int expandable, int whole)
{
    if (r->nsegs == r->capsegs) {
        uint32_t nc = r->capsegs ? r->capsegs * 2 : 64;
        rseg **ns = realloc(r->segs, nc * sizeof *ns);
        if (!ns) goto oom;
        r->segs = ns;
        uint64_t *na = realloc(r->saddr, nc * sizeof *na);
        if (!na) goto oom;
        r->saddr = na;
        r->capsegs = nc;
    }
    rseg *g = seg_new(r);
    if (!g) goto oom;
    g->addr = addr;
    g->size = size;
    g->pool = pool;
    g->expandable = (uint8_t)expandable;
    g->whole = (uint8_t)whole;
    g->gaps = size ? 1 : 0;
    uint32_t i = seg_lower(r, addr);
    /* a hole next to the place keeps the order when it takes this address */
    uint32_t hole = i && !r->segs[i - 1] ? i - 1 : i < r->nsegs && !r->segs[i] ? i : UINT32_MAX;
    if (hole != UINT32_MAX) {
        r->segs[hole] = g;
        r->saddr[hole] = addr;
        r->ndead--;
        return g;
    }
    memmove(&r->segs[i + 1], &r->segs[i], (r->nsegs - i) * sizeof *r->segs);
    memmove(&r->saddr[i + 1], &r->saddr[i], (r->nsegs - i) * sizeof *r->saddr);
    r->segs[i] = g;
    r->saddr[i] = addr;
    r->nsegs++;
    return g;
oom:
    r->nomem = 1;
    return NULL;
}

static void seg_remove_at(cmh_replay *r, uint32_t i)
{
    seg_release(r, r->segs[i]);
    r->segs[i] = NULL; /* a hole: indices stay valid until maybe_compact() */
    r->ndead++;
}

/* Recount g's free runs and active bytes from its ranges. */
static void seg_recount(rseg *g)
{
    uint64_t at = g->addr, end = g->addr + g->size;
    g->gaps = 0;
    g->active_bytes = 0;
    for (uint32_t k = 0; k < g->nr; k++) {
        g->gaps += g->r[k].a > at;
        g->active_bytes += g->r[k].b - g->r[k].a;
        at = g->r[k].b;
    }
    g->gaps += end > at;
    g->nactive = g->nr;
}

/* After g shrank: drop the active ranges no longer inside it (a block whose memory was unmapped
 * under it: the trace's anomaly, its bytes no longer in any segment). */
static void seg_clip_ranges(rseg *g)
{
    uint64_t end = g->addr + g->size;
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->nr; i++)
        if (g->r[i].a >= g->addr && g->r[i].b <= end) g->r[k++] = g->r[i];
    g->nr = k;
    seg_recount(g);
}

/* Move to `right` (just cut off the end of g) the active ranges of g that lie in it. */
static void seg_take_ranges(cmh_replay *r, rseg *right, rseg *g)
{
    uint32_t k = 0;
    while (k < g->nr && g->r[k].a < right->addr) k++;
    uint32_t n = 0;
    while (k + n < g->nr && g->r[k + n].b <= right->addr + right->size) n++;
    if (n > right->capr) { /* right may be a spare with an array of its own */
        range *nr = realloc(right->r, n * sizeof *nr);
        if (!nr) {
            r->nomem = 1;
            return;
        }
        right->r = nr;
        right->capr = n;
    }
    if (n) memcpy(right->r, g->r + k, n * sizeof *g->r);
    right->nr = n;
    seg_recount(right);
}

/* A mapped range of an expandable segment.  One next to a mapped range of the same pool
 * extends it, as PyTorch shows one segment per contiguous mapped range: a block may then span
 * what were two maps, and its bytes are all inside one segment (counted apart, the part past the
 * first map would have read as free). */
rseg *cmh_rp_seg_map(cmh_replay *r, uint64_t addr, uint64_t size, uint8_t pool)
{
    uint32_t i = seg_lower(r, addr), li = i, ri = i;
    while (li && !r->segs[li - 1]) li--;
    while (ri < r->nsegs && !r->segs[ri]) ri++;
    rseg *left = li && r->segs[li - 1]->expandable && r->segs[li - 1]->pool == pool &&
                         r->segs[li - 1]->addr + r->segs[li - 1]->size == addr
                     ? r->segs[li - 1]
                     : NULL;
    rseg *right = ri < r->nsegs && r->segs[ri]->expandable && r->segs[ri]->pool == pool && r->segs[ri]->addr == addr + size
                      ? r->segs[ri]
                      : NULL;
    if (!left && !right) return cmh_rp_seg_insert(r, addr, size, pool, 1, 0);
    /* free runs: the new range is one, joined with the left's trailing run and the right's leading run */
    int left_trails = left && (!left->nr || left->r[left->nr - 1].b < left->addr + left->size);
    int right_leads = right && (!right->nr || right->r[0].a > right->addr);
    if (left && right) {
        if (right->nr) {
            if (left->nr + right->nr > left->capr) {
                range *nrr = realloc(left->r, (left->nr + right->nr) * sizeof *nrr);
                if (!nrr) {
                    r->nomem = 1;
                    return NULL;
                }
                left->r = nrr;
                left->capr = left->nr + right->nr;
            }
            memcpy(left->r + left->nr, right->r, right->nr * sizeof *right->r);
        }
        left->nr += right->nr;
        left->size += size + right->size;
        left->active_bytes += right->active_bytes;
        left->nactive += right->nactive;
        left->gaps = left->gaps + right->gaps + 1 - (uint32_t)left_trails - (uint32_t)right_leads;
        seg_remove_at(r, ri);
        return left;
    }
    if (left) {
        left->size += size;
        left->gaps += (uint32_t)!left_trails;
        return left;
    }
    right->addr = addr;
    r->saddr[ri] = addr;
    for (uint32_t k = li; k < ri; k++) /* the holes before it (all of [li, ri)) keep the order */
        if (r->saddr[k] > addr) r->saddr[k] = addr;
    right->size += size;
    right->gaps += (uint32_t)!right_leads;
    return right;
}

/* ---- stats ---- */

/* Unsigned arithmetic: a hostile file's sizes may wrap, which must not be undefined. */
/* -x as a delta; sizes from a damaged file may reach 2^63, whose plain negation is undefined */
static inline int64_t neg(uint64_t x) { return (int64_t)(0 - x); }

static void stat_add(cmh_stat *s, int64_t d)
{
    s->current = (int64_t)((uint64_t)s->current + (uint64_t)d);
    if (d > 0) s->allocated = (int64_t)((uint64_t)s->allocated + (uint64_t)d);
    else s->freed = (int64_t)((uint64_t)s->freed - (uint64_t)d);
    if (s->current > s->peak) s->peak = s->current;
}

static void pool_add(cmh_stat *arr, int pool, int64_t d)
{
    stat_add(&arr[0], d);
    stat_add(&arr[pool], d);
}

/* What the stream-ordered pools keep, as the replay knows it now (their samples, and the
 * pooled calls since) */
static int64_t pools_cache(const cmh_replay *r)
{
    /* summed as stat_add sums: a damaged file's samples may say more than int64 holds together */
    uint64_t c = (uint64_t)r->pool_pend;
    for (uint32_t i = 0; i < r->npools; i++) c += (uint64_t)r->pools[i].slack;
    return (int64_t)c;
}

/* The pools' cache is counted in the class of the segments it came from (cache_small: what of
 * it small segments left), so that the large and small rows add up to the total (PyTorch's
 * memory_summary: the all row is their sum): a move between a segment and the cache stays
 * inside its class, and what changes across classes is counted in each class, and so in the
 * total, as the separate changes it is. */
static void class_add(cmh_stat *arr, int64_t ds, int64_t dl)
{
    if (ds) {
        stat_add(&arr[CMH_POOL_ALL], ds);
        stat_add(&arr[CMH_POOL_SMALL], ds);
    }
    if (dl) {
        stat_add(&arr[CMH_POOL_ALL], dl);
        stat_add(&arr[CMH_POOL_LARGE], dl);
    }
}

/* What the pool with handle owner keeps (0: not said, every pool's together): its latest sample's
 * slack and the pooled calls since, never more than the pools keep in all.  A pool not sampled
 * yet keeps nothing: its first allocation is new memory, not another pool's cache. */
static int64_t pool_cache_of(const cmh_replay *r, uint64_t owner)
{
    int64_t all = pools_cache(r);
    if (!owner) return all;
    uint32_t i = 0;
    while (i < r->npools && r->pools[i].handle != owner) i++;
    int64_t c = i < r->npools ? (int64_t)((uint64_t)r->pools[i].slack + (uint64_t)r->pool_pend) : 0;
    return c < 0 ? 0 : c < all ? c : all;
}

/* ---- the segments a stream-ordered pool keeps ----
 * PyTorch's GPU reserved segments move with its reserved memory: a segment is counted while its
 * bytes are reserved, freed when they go back to the driver, allocated when reserved grows.  A
 * pool's cached free changes reserved by 0 (the pool keeps the bytes), so its segment stays
 * counted, cached; a pooled allocation the cache serves takes a cached segment again, no new one;
 * the segments go when the pools' samples say they keep nothing.  Counting each pooled call as a
 * segment made and freed gave a private pool with its threshold at the most '3 current, 6
 * allocated, 3 freed' beside 'GPU reserved memory 12 MiB, 0 B freed'.  (A pool's trim that leaves
 * part of its cache keeps the count: which of its segments went the samples do not say.)  Each
 * pool keeps its own: a segment cached in one pool never serves another's allocation (one cache
 * for all had the default pool's 16 MiB allocations take a private pool's cached segments: 9
 * segments counted for 13). */

static int cls(uint8_t pool) { return pool == CMH_POOL_SMALL ? CMH_POOL_SMALL : CMH_POOL_LARGE; }

/* A segment freed into a pool: kept there, still a reserved segment. */
static void cached_segs_put(cmh_replay *r, uint64_t size, uint8_t pool, uint64_t owner)
{
    if (r->ncached == r->capcached) {
        uint32_t nc = r->capcached ? r->capcached * 2 : 16;
        struct cseg *n = realloc(r->cached, nc * sizeof *n);
        if (!n) {
            r->nomem = 1;
            return;
        }
        r->cached = n;
        r->capcached = nc;
    }
    r->cached[r->ncached++] = (struct cseg){size, owner, (uint8_t)cls(pool)};
}

static void cached_segs_drop(cmh_replay *r, uint32_t i) { r->cached[i] = r->cached[--r->ncached]; }

/* Whether cached segment c may be pool owner's (either not said: an older record's) */
static int cached_owner_fits(const struct cseg *c, uint64_t owner) { return !owner || !c->owner || c->owner == owner; }

/* A pooled allocation of size its pool's cache served (in part): a cached segment of that pool in
 * use again, if one is (of its size and class first; one of the other class is freed there,
 * allocated in this); 0 when none is, and the caller counts a new segment. */
static int cached_segs_take(cmh_replay *r, uint64_t size, uint8_t pool, uint64_t owner)
{
    int c = cls(pool);
    uint32_t best = r->ncached;
    for (uint32_t i = 0; i < r->ncached; i++) {
        if (!cached_owner_fits(&r->cached[i], owner)) continue;
        int score = (r->cached[i].pool == c) * 2 + (r->cached[i].size == size);
        int have = best == r->ncached ? -1 : (r->cached[best].pool == c) * 2 + (r->cached[best].size == size);
        if (score > have) best = i;
    }
    if (best == r->ncached) return 0;
    if (r->cached[best].pool != c) {
        pool_add(r->st.segment, r->cached[best].pool, -1);
        pool_add(r->st.segment, c, 1);
    }
    cached_segs_drop(r, best);
    r->took_segs[c]++;
    return 1;
}

/* The pools (owner's, 0: any) gave back `bytes` of their cache: cached segments that make it up
 * went back to the driver, one of that size first, then the largest that fit; all of them once
 * the pools keep nothing. */
static void cached_segs_release(cmh_replay *r, int64_t bytes, uint64_t owner)
{
    int all = pools_cache(r) <= 0;
    while (r->ncached && (all || bytes > 0)) {
        uint32_t pick = r->ncached;
        for (uint32_t i = 0; i < r->ncached; i++) {
            if (!all && (r->cached[i].size > (uint64_t)bytes || !cached_owner_fits(&r->cached[i], owner))) continue;
            if (pick == r->ncached || r->cached[i].size == (uint64_t)bytes ||
                (r->cached[pick].size != (uint64_t)bytes && r->cached[i].size > r->cached[pick].size))
                pick = i;
        }
        if (pick == r->ncached) break;
        bytes -= (int64_t)r->cached[pick].size;
        pool_add(r->st.segment, r->cached[pick].pool, -1);
        cached_segs_drop(r, pick);
    }
}

/* The cache (pool owner's, 0: the pools' at large) changed by d no call explains (a sample's trim
 * or growth): what it gives back comes from the large class first, then the small; what it grows
 * is large. */
static void cache_change(cmh_replay *r, int64_t d, uint64_t owner)
{
    if (d >= 0) {
        class_add(r->st.reserved_bytes, 0, d);
        return;
    }
    int64_t large = pools_cache(r) - r->cache_small, l = large <= 0 ? 0 : -d < large ? -d : large, sm = -d - l;
    if (sm > r->cache_small) sm = r->cache_small > 0 ? r->cache_small : 0, l = -d - sm;
    class_add(r->st.reserved_bytes, -sm, -l);
    r->cache_small -= sm;
    cached_segs_release(r, -d, owner);
}

static void split_contrib(const rseg *g, int64_t *bytes, int64_t *count)
{
    if (g->expandable || !g->nactive) {
        *bytes = *count = 0;
        return;
    }
    *bytes = (int64_t)(g->size - g->active_bytes);
    *count = g->gaps;
}

/* Add (sign 1) or remove (sign -1) the active range [a, b) in g, keeping the split stats. */
static void seg_activate(cmh_replay *r, rseg *g, uint64_t a, uint64_t b, int sign)
{
    int64_t b0 = 0, c0 = 0, b1, c1;
    if (!r->initializing) split_contrib(g, &b0, &c0);
    uint64_t end = g->addr + g->size;
    if (a < g->addr) a = g->addr;
    if (b > end) b = end;
    if (b <= a) return;
    uint32_t lo = 0; /* the first range starting at a or after; branch-free as seg_lower */
    if (g->nr) {
        const range *base = g->r;
        uint32_t len = g->nr;
        while (len > 1) {
            uint32_t half = len / 2;
            base = base[half].a < a ? base + half : base;
            len -= half;
        }
        lo = (uint32_t)(base - g->r) + (base->a < a);
    }
    if (sign > 0) {
        uint64_t prev_end = lo ? g->r[lo - 1].b : g->addr;
        uint64_t next_start = lo < g->nr ? g->r[lo].a : end;
        if (g->nr == g->capr) {
            uint32_t nc = g->capr ? g->capr * 2 : 4;
            range *nrr = realloc(g->r, nc * sizeof *nrr);
            if (!nrr) {
                r->nomem = 1;
                return;
            }
            g->r = nrr;
            g->capr = nc;
        }
        memmove(&g->r[lo + 1], &g->r[lo], (g->nr - lo) * sizeof *g->r);
        g->r[lo] = (range){a, b};
        g->nr++;
        g->gaps = g->gaps - (next_start > prev_end ? 1 : 0) + (a > prev_end) + (next_start > b);
        g->active_bytes += b - a;
        g->nactive++;
    } else {
        if (lo >= g->nr || g->r[lo].a != a) return;
        uint64_t prev_end = lo ? g->r[lo - 1].b : g->addr;
        uint64_t next_start = lo + 1 < g->nr ? g->r[lo + 1].a : end;
        uint64_t rb = g->r[lo].b;
        memmove(&g->r[lo], &g->r[lo + 1], (g->nr - lo - 1) * sizeof *g->r);
        g->nr--;
        g->gaps = g->gaps + (next_start > prev_end ? 1 : 0) - (a > prev_end) - (next_start > rb);
        g->active_bytes -= rb - a;
        g->nactive--;
    }
    if (r->initializing) return;
    split_contrib(g, &b1, &c1);
    pool_add(r->st.inactive_split_bytes, g->pool, (int64_t)((uint64_t)b1 - (uint64_t)b0)); /* wraps, never overflows */
    pool_add(r->st.inactive_split, g->pool, (int64_t)((uint64_t)c1 - (uint64_t)c0));
}

/* ---- forward operations ---- */

static void fwd_block_alloc(cmh_replay *r, uint64_t addr, uint64_t size, uint64_t req, uint8_t state, uint32_t stack,
                            int64_t time_ns)
{
    rblock *old = block_find(r, addr);
    if (old) { /* an alloc over a live block: the free was lost */
        r->anomalies++;
        return;
    }
    rseg *g = seg_containing(r, addr);
    rblock *b = block_put(r, addr);
    if (!b) return;
    b->size = size;
    b->requested = req;
    b->state = state;
    b->stack = stack;
    b->time_ns = time_ns;
    b->pool = g ? g->pool : pool_rule(size, 1);
    b->untraced = r->initializing || r->reconciled;
    if (r->obs) r->obs(r->obs_arg, (int64_t)size, stack, addr);
    if (state == CMH_BLOCK_ACTIVE_ALLOCATED) pool_add(r->st.allocated_bytes, b->pool, (int64_t)size);
    pool_add(r->st.active_bytes, b->pool, (int64_t)size);
    pool_add(r->st.requested_bytes, b->pool, (int64_t)req);
    pool_add(r->st.allocation, b->pool, 1);
    pool_add(r->st.active, b->pool, 1);
    if (r->rules.max_split && size >= r->rules.max_split) stat_add(&r->st.oversize_allocations, 1);
    /* A PyTorch block larger than its rounded request: only a classic large-pool segment's
     * allocator keeps a remainder of 512 bytes or more unsplit (should_split()), whether the model
     * sized it so (pt_block_size) or the final segments say so (an expandable segment's, or a
     * small pool's, always split: what else a size there holds is not this). */
    if ((r->pytorch || r->pt_alloc) && state == CMH_BLOCK_ACTIVE_ALLOCATED && g && !g->expandable && g->pool == CMH_POOL_LARGE) {
        uint64_t rounded = cmh_pt_round(&r->rules, req);
        if (size > rounded) b->unsplit = 1, r->unsplit_bytes += (int64_t)(size - rounded);
    }
    if (!g || addr + size > g->addr + g->size || addr + size < addr) r->anomalies++; /* not (all) inside a segment */
    if (g) seg_activate(r, g, addr, addr + size, 1);
}

/* An unsplit block stops counting as allocated: its bytes beyond the request go with it. */
static void unsplit_gone(cmh_replay *r, rblock *b)
{
    if (b->unsplit) r->unsplit_bytes -= (int64_t)(b->size - cmh_pt_round(&r->rules, b->requested));
    b->unsplit = 0;
}

static void fwd_free_requested(cmh_replay *r, uint64_t addr)
{
    rblock *b = block_find(r, addr);
    if (!b) {
        r->anomalies++;
        return;
    }
    if (b->state != CMH_BLOCK_ACTIVE_ALLOCATED) return;
    b->state = CMH_BLOCK_ACTIVE_PENDING_FREE;
    unsplit_gone(r, b);
    pool_add(r->st.allocated_bytes, b->pool, neg(b->size));
    pool_add(r->st.allocation, b->pool, -1);
}

/* The group of pieces a block of this making time and stack was cut into (NULL: none; with
 * make, a new one of none live; NULL out of memory). */
static struct rpiece *piece_group(cmh_replay *r, int64_t time_ns, uint32_t stack, int make)
{
    for (uint32_t i = 0; i < r->npieces; i++)
        if (r->pieces[i].time_ns == time_ns && r->pieces[i].stack == stack) return &r->pieces[i];
    if (!make) return NULL;
    if (CMH_GROW(r->pieces, r->cappieces, (uint64_t)r->npieces + 1, 8)) {
        r->nomem = 1;
        return NULL;
    }
    r->pieces[r->npieces] = (struct rpiece){time_ns, stack, 0};
    return &r->pieces[r->npieces++];
}

/* One count fewer made (not freed): a piece of a block counted already */
static void stat_uncount(cmh_stat *arr, int pool)
{
    for (int k = 0; k < 2; k++) {
        cmh_stat *s = &arr[k ? pool : 0];
        s->allocated--;
        s->current--;
    }
}

/* One count fewer freed: a piece of a block whose other pieces still live */
static void stat_unfree(cmh_stat *arr, int pool)
{
    for (int k = 0; k < 2; k++) {
        cmh_stat *s = &arr[k ? pool : 0];
        s->freed--;
        s->current++;
    }
}

static void fwd_free_completed(cmh_replay *r, uint64_t addr)
{
    rblock *b = block_find(r, addr);
    if (!b) {
        r->anomalies++;
        return;
    }
    if (b->piece && !r->in_part) { /* the allocation goes with its last piece: the others' frees count no allocation */
        struct rpiece *p = piece_group(r, b->time_ns, b->stack, 0);
        if (p && p->live > 1) {
            p->live--;
            if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) stat_unfree(r->st.allocation, b->pool);
            stat_unfree(r->st.active, b->pool);
        } else if (p)
            *p = r->pieces[--r->npieces];
    }
    if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) {
        unsplit_gone(r, b);
        pool_add(r->st.allocated_bytes, b->pool, neg(b->size));
        pool_add(r->st.allocation, b->pool, -1);
    }
    pool_add(r->st.active_bytes, b->pool, neg(b->size));
    pool_add(r->st.requested_bytes, b->pool, neg(b->requested));
    pool_add(r->st.active, b->pool, -1);
    if (r->rules.max_split && b->size >= r->rules.max_split) stat_add(&r->st.oversize_allocations, -1);
    rseg *g = seg_containing(r, addr);
    if (g) seg_activate(r, g, addr, addr + b->size, -1);
    if (r->obs) r->obs(r->obs_arg, neg(b->size), b->stack, addr);
    block_del(r, b);
}

/* The stack an entry stands for: its own, else (an entry of the trace) its block's at the end. */
static uint32_t stack_of(const cmh_replay *r, const cmh_entry *e)
{
    if (e->stack || !r->final_stack || e < r->e || e >= r->e + r->n) return e->stack;
    return r->final_stack[e - r->e];
}

/* A segment's appearing (addr, size; whole: CMH_EF_WHOLE_BLOCK, with its block's requested,
 * stack and time), from an entry or from the repair of what the file says. */
static void fwd_segment_alloc_at(cmh_replay *r, uint64_t addr, uint64_t size, int whole, uint64_t requested, uint32_t stack,
                                 int64_t time_ns, int expandable, uint8_t pool)
{
    if (seg_containing(r, addr)) {
        r->anomalies++;
        return;
    }
    uint8_t p = pool ? pool : pool_rule(size, whole);
    rseg *g = expandable ? cmh_rp_seg_map(r, addr, size, p) : cmh_rp_seg_insert(r, addr, size, p, 0, whole);
    if (!g) return;
    int64_t cache = r->pooled_op ? pool_cache_of(r, r->pooled_owner) : 0, take = cache <= 0 ? 0 : cache < (int64_t)size ? cache : (int64_t)size;
    if (take) { /* a pool's allocation from what it keeps: reserved grows by the rest only */
        int small = g->pool == CMH_POOL_SMALL;
        int64_t cs = r->cache_small < 0 ? 0 : r->cache_small > cache ? cache : r->cache_small;
        int64_t same = small ? cs : cache - cs, ts;
        if (same > take) same = take;
        ts = small ? same : take - same; /* taken from the small class's cache */
        if (small) class_add(r->st.reserved_bytes, (int64_t)size - same, -(take - same));
        else class_add(r->st.reserved_bytes, -(take - same), (int64_t)size - same);
        r->cache_small = cs - ts;
        r->pool_pend -= take;
        r->pool_took += take;
        r->took_small += ts;
    } else pool_add(r->st.reserved_bytes, g->pool, (int64_t)size);
    if (!expandable) { /* PyTorch does not count expandable segments */
        if (!take || !cached_segs_take(r, size, g->pool, r->pooled_owner)) pool_add(r->st.segment, g->pool, 1);
        if (r->rules.max_split && size >= r->rules.max_split) stat_add(&r->st.oversize_segments, 1);
    }
    if (whole) {
        fwd_block_alloc(r, addr, size, requested, CMH_BLOCK_ACTIVE_ALLOCATED, stack, time_ns);
    }
}

static void fwd_segment_alloc(cmh_replay *r, const cmh_entry *e, int expandable, uint8_t pool)
{
    int whole = (e->flags & CMH_EF_WHOLE_BLOCK) != 0;
    fwd_segment_alloc_at(r, cmh_entry_addr(r->s, e), cmh_entry_size(r->s, e), whole, whole ? cmh_entry_requested(r->s, e) : 0,
                         whole ? stack_of(r, e) : 0, whole ? cmh_entry_time(r->s, e) : 0, expandable, pool);
    /* known while the segment lives, freed before the end or not; by number, as the entry holds it */
    uint32_t num = cmh_entry_x(r->s, e)->pool;
    cmh_pool_id p = cmh_entry_pool_id(r->s, e);
    rseg *g = p.id[0] || p.id[1] ? seg_containing(r, cmh_entry_addr(r->s, e)) : NULL;
    if (g) g->priv = num;
}

/* Undo the totals' count of what stat_add just counted twice: x freed, then made again. */
static void stat_unturn(cmh_stat *arr, int pool, int64_t x)
{
    for (int k = 0; k < 2; k++) {
        cmh_stat *s = &arr[k ? pool : 0];
        s->allocated = (int64_t)((uint64_t)s->allocated - (uint64_t)x);
        s->freed = (int64_t)((uint64_t)s->freed - (uint64_t)x);
    }
}

/* A whole block's memory given back in part (a cuMemMap unmapped piece by piece: the recorder
 * keeps each remainder mapped, as the driver does): every block overlapping [lo, hi) loses that
 * part and keeps the rest, at its own address or past hi, its stack, time and state.  The
 * observers see the block go and its remainders appear (they follow blocks by address); the
 * totals count only the bytes given back, a remainder being no new allocation (a 4 MiB map
 * unmapped in two halves is 4 MiB allocated and freed, once).  Freeing just the block at lo
 * left the rest of the map to the next unmap, which found no block at its address: the
 * backward pass took that for a block made before the trace (a spurious 2 MiB at the start). */
static void fwd_free_part(cmh_replay *r, uint64_t lo, uint64_t hi)
{
    rseg *g = seg_containing(r, lo);
    rblock *b = block_find(r, lo);
    if (!g || !g->expandable || (b && b->size == hi - lo)) { /* a segment is freed whole: its block with it */
        fwd_free_completed(r, lo);
        return;
    }
    int hit = 0;
    for (;;) {
        uint32_t k = 0;
        while (k < g->nr && g->r[k].b <= lo) k++;
        if (k == g->nr || g->r[k].a >= hi || !(b = block_find(r, g->r[k].a))) break;
        hit = 1;
        rblock was = *b;
        uint64_t end = was.addr + was.size, left = lo > was.addr ? lo - was.addr : 0, right = end > hi ? end - hi : 0;
        uint64_t lreq = was.requested < left ? was.requested : left, rreq = was.requested - lreq < right ? was.requested - lreq : right;
        int alloc = was.state == CMH_BLOCK_ACTIVE_ALLOCATED, kept = (left != 0) + (right != 0);
        /* a block cut in two by an unmap inside it is one allocation in two pieces, counted once
         * (it counted two: one map was 2 allocations, its end 2 frees); a piece's own remainder
         * stays a piece of it.  The count taken before the pieces appear: no passing peak. */
        r->in_part = kept != 0; /* (a piece with a remainder: this counts it, not fwd_free_completed) */
        fwd_free_completed(r, was.addr);
        r->in_part = 0;
        if (kept == 2) {
            if (alloc) stat_uncount(r->st.allocation, was.pool);
            stat_uncount(r->st.active, was.pool);
        }
        if (left) fwd_block_alloc(r, was.addr, left, lreq, was.state, was.stack, was.time_ns);
        if (right) fwd_block_alloc(r, hi, right, rreq, was.state, was.stack, was.time_ns);
        if (kept && (was.piece || kept == 2)) {
            struct rpiece *grp = piece_group(r, was.time_ns, was.stack, 1);
            if (!grp) return;
            grp->live += (uint32_t)kept - (was.piece ? 1u : 0u); /* (a piece's remainders replace it) */
            rblock *x;
            if (left && (x = block_find(r, was.addr))) x->piece = 1;
            if (right && (x = block_find(r, hi))) x->piece = 1;
        }
        if (!kept) continue;
        if (alloc) stat_unturn(r->st.allocated_bytes, was.pool, (int64_t)(left + right));
        stat_unturn(r->st.active_bytes, was.pool, (int64_t)(left + right));
        stat_unturn(r->st.requested_bytes, was.pool, (int64_t)(lreq + rreq));
        if (alloc) stat_unturn(r->st.allocation, was.pool, 1); /* the first remainder is the block still */
        stat_unturn(r->st.active, was.pool, 1);
        if (r->rules.max_split && was.size >= r->rules.max_split && (left >= r->rules.max_split || right >= r->rules.max_split)) {
            r->st.oversize_allocations.allocated--;
            r->st.oversize_allocations.freed--;
        }
    }
    if (!hit) r->anomalies++;
}

void cmh_rp_segment_free_at(cmh_replay *r, uint64_t addr, uint64_t size, int whole)
{
    if (whole) fwd_free_part(r, addr, addr + size);
    uint64_t lo = addr, hi = addr + size;
    int hit = 0;
    /* Remove or trim every segment overlapping [lo, hi) (unmaps may cover several maps). */
    uint32_t i = seg_first_after(r, lo);
    while (i < r->nsegs && r->saddr[i] < hi) {
        rseg *g = r->segs[i];
        if (!g) {
            i++;
            continue;
        }
        uint64_t ga = g->addr, gb = g->addr + g->size;
        if (gb <= lo) {
            i++;
            continue;
        }
        hit = 1;
        uint64_t a = ga > lo ? ga : lo, b = gb < hi ? gb : hi;
        if (r->pooled_op) { /* a pool's free: the pool keeps it until its sample says otherwise */
            r->pool_pend += (int64_t)(b - a); /* (in its class: reserved the same) */
            if (g->pool == CMH_POOL_SMALL) r->cache_small += (int64_t)(b - a);
        } else pool_add(r->st.reserved_bytes, g->pool, neg(b - a));
        for (uint32_t k = 0; k < g->nr; k++) /* live blocks in memory given back: the trace lost their frees */
            if (g->r[k].a < b && g->r[k].b > a) {
                r->anomalies++;
                break;
            }
        if (a == ga && b == gb) {
            int64_t sb, sc;
            split_contrib(g, &sb, &sc);
            pool_add(r->st.inactive_split_bytes, g->pool, -sb);
            pool_add(r->st.inactive_split, g->pool, -sc);
            if (!g->expandable) {
                if (r->pooled_op) cached_segs_put(r, g->size, g->pool, r->pooled_owner);
                else pool_add(r->st.segment, g->pool, -1);
                if (r->rules.max_split && g->size >= r->rules.max_split) stat_add(&r->st.oversize_segments, -1);
            }
            seg_remove_at(r, i);
            continue;
        }
        /* partial: keep the pieces outside [a, b), each with its own active ranges */
        int64_t sb0, sc0, sb1, sc1, sb2 = 0, sc2 = 0;
        split_contrib(g, &sb0, &sc0);
        if (a > ga && b < gb) {
            rseg *right = cmh_rp_seg_insert(r, b, gb - b, g->pool, g->expandable, 0);
            if (right) {
                if (!g->expandable) pool_add(r->st.segment, g->pool, 1);
                seg_take_ranges(r, right, g);
                split_contrib(right, &sb2, &sc2);
            }
            g->size = a - ga;
        } else if (a == ga) {
            g->addr = b;
            r->saddr[i] = b;
            g->size = gb - b;
            /* segments that overlap (only a hostile file has them) may now be out of order */
            for (uint32_t k = i; k + 1 < r->nsegs && r->saddr[k + 1] < b; k++) {
                rseg *t = r->segs[k];
                r->segs[k] = r->segs[k + 1];
                r->segs[k + 1] = t;
                r->saddr[k] = r->saddr[k + 1];
                r->saddr[k + 1] = b;
            }
        } else {
            g->size = a - ga;
        }
        seg_clip_ranges(g);
        split_contrib(g, &sb1, &sc1);
        pool_add(r->st.inactive_split_bytes, g->pool, (int64_t)((uint64_t)sb1 + (uint64_t)sb2 - (uint64_t)sb0));
        pool_add(r->st.inactive_split, g->pool, (int64_t)((uint64_t)sc1 + (uint64_t)sc2 - (uint64_t)sc0));
        i = seg_first_after(r, b);
    }
    if (!hit) r->anomalies++;
}

static void fwd_pool_sample(cmh_replay *r, const cmh_entry *e);

/* what the trace held when the device's first cuMemGetInfo sample was taken (pools_stale_end) */
static void base_passed(cmh_replay *r)
{
    int64_t act = r->st.active_bytes[CMH_POOL_ALL].current, res = r->st.reserved_bytes[CMH_POOL_ALL].current;
    r->base_held = (uint64_t)(act > res ? act : res);
    /* managed memory the sample may not have counted (pools_stale_end) */
    uint64_t managed = r->managed_live > 0 ? (uint64_t)r->managed_live : 0;
    r->base_held = managed < r->base_held ? r->base_held - managed : 0;
    r->base_known = 1;
    r->base_ns = 0;
}

static void apply_forward(cmh_replay *r, const cmh_entry *e)
{
    if (__builtin_expect(r->base_ns != 0, 0) && cmh_entry_time(r->s, e) > r->base_ns) base_passed(r);
    /* a stream-ordered pool's segment call, where the record samples the pools (docs/DEFINITIONS.md) */
    r->pooled_op = r->npools && e->kind == CMH_KIND_ASYNC && e->action != CMH_ACT_POOL_SAMPLE;
    r->pooled_owner = 0;
    if (r->pooled_op && e >= r->e && e < r->e + r->n) {
        int64_t j = cmh_pool_sample_after(r->s, r->e, r->n, (uint32_t)(e - r->e));
        if (j >= 0) r->pooled_owner = cmh_entry_addr(r->s, &r->e[j]);
    }
    switch (e->action) {
    case CMH_ACT_ALLOC: {
        uint64_t size = cmh_entry_size(r->s, e);
        r->pt_alloc = (e->flags & CMH_EF_PYTORCH) != 0;
        if (r->pytorch || r->pt_alloc) {
            uint64_t known = r->exact ? r->exact[e - r->e] : 0;
            size = known ? known : pt_block_size(r, seg_containing(r, cmh_entry_addr(r->s, e)), cmh_entry_addr(r->s, e), cmh_entry_requested(r->s, e));
        }
        fwd_block_alloc(r, cmh_entry_addr(r->s, e), size, cmh_entry_requested(r->s, e), CMH_BLOCK_ACTIVE_ALLOCATED, stack_of(r, e), cmh_entry_time(r->s, e));
        r->pt_alloc = 0;
        break;
    }
    case CMH_ACT_FREE_REQUESTED: fwd_free_requested(r, cmh_entry_addr(r->s, e)); break;
    case CMH_ACT_FREE_COMPLETED: fwd_free_completed(r, cmh_entry_addr(r->s, e)); break;
    case CMH_ACT_SEGMENT_ALLOC:
        if (e->kind == CMH_KIND_MANAGED) r->managed_live += (int64_t)cmh_entry_size(r->s, e);
        fwd_segment_alloc(r, e, 0, 0);
        break;
    case CMH_ACT_SEGMENT_MAP: fwd_segment_alloc(r, e, 1, 0); break;
    case CMH_ACT_SEGMENT_FREE:
        if (e->kind == CMH_KIND_MANAGED) r->managed_live -= (int64_t)cmh_entry_size(r->s, e);
        /* fall through */
    case CMH_ACT_SEGMENT_UNMAP: cmh_rp_segment_free_at(r, cmh_entry_addr(r->s, e), cmh_entry_size(r->s, e), (e->flags & CMH_EF_WHOLE_BLOCK) != 0); break;
    case CMH_ACT_OOM: r->st.num_ooms++; break;
    case CMH_ACT_POOL_SAMPLE: fwd_pool_sample(r, e); break;
    default: break;
    }
    r->pooled_op = 0;
}

/* A pool's reserved bytes beyond its used bytes are reserved memory no segment shows; the
 * samples are absolute, so the replay keeps each pool's latest and adds the change. */
#define MAX_POOLS 1024

static void fwd_pool_sample(cmh_replay *r, const cmh_entry *e)
{
    int64_t slack = cmh_entry_size(r->s, e) > cmh_entry_requested(r->s, e) ? (int64_t)(cmh_entry_size(r->s, e) - cmh_entry_requested(r->s, e)) : 0;
    uint32_t i = 0;
    while (i < r->npools && r->pools[i].handle != cmh_entry_addr(r->s, e)) i++;
    if (i == r->npools) {
        /* programs have a handful of pools; a file naming thousands is not trusted with more */
        struct rpool *np = r->npools < MAX_POOLS && !(r->npools & (r->npools - 1))
                               ? realloc(r->pools, (r->npools ? r->npools * 2 : 1) * sizeof *np)
                               : r->pools;
        if (!np || r->npools >= MAX_POOLS) {
            if (!np) r->nomem = 1;
            else r->anomalies++;
            return;
        }
        r->pools = np;
        r->pools[r->npools++] = (struct rpool){cmh_entry_addr(r->s, e), 0};
    }
    /* the change of what the pools keep, less what the pooled calls since the last sample have
     * moved already (reserved then is the segments and the samples' slack, exactly) */
    int64_t d = (int64_t)((uint64_t)slack - (uint64_t)r->pools[i].slack - (uint64_t)r->pool_pend);
    if (d < 0 && !slack && r->pool_took) {
        /* the pool gave back more than the calls since explain and keeps nothing: it trimmed at a
         * synchronize before them (where pools trim; no call of ours), and what they took 'from its
         * cache' was new memory: given back d - took, then took allocated (Tot Freed and Alloc
         * count the trim and the growth; reserved is the same after) */
        int64_t g = r->pool_took - d, ts = r->took_small, tl = r->pool_took - ts;
        int64_t fs = r->cache_small + ts < 0 ? 0 : g < r->cache_small + ts ? g : r->cache_small + ts;
        class_add(r->st.reserved_bytes, -fs, -(g - fs));
        class_add(r->st.reserved_bytes, ts, tl);
        r->cache_small -= fs - ts;
        /* (so the cached segments: all gone at the trim, those taken since new ones) */
        for (int c = CMH_POOL_SMALL; c <= CMH_POOL_LARGE; c++) {
            pool_add(r->st.segment, c, -r->took_segs[c]);
            pool_add(r->st.segment, c, r->took_segs[c]);
        }
        cached_segs_release(r, INT64_MAX, cmh_entry_addr(r->s, e));
    } else if (d) cache_change(r, d, cmh_entry_addr(r->s, e));
    r->pool_pend = r->pool_took = r->took_small = 0;
    r->took_segs[CMH_POOL_SMALL] = r->took_segs[CMH_POOL_LARGE] = 0;
    r->pools[i].slack = slack;
    r->pool_sample_ns = cmh_entry_time(r->s, e);
    r->pool_at_dump = (e->flags & CMH_EF_AT_DUMP) != 0;
}

void cmh_rp_free_tables(cmh_replay *r)
{
    for (uint32_t i = 0; i < r->nsegs; i++) {
        if (!r->segs[i]) continue;
        free(r->segs[i]->r);
        free(r->segs[i]);
    }
    free(r->segs);
    free(r->saddr);
    cmh_oa_free(&r->blocks);
    for (uint32_t i = 0; i < r->hseg.cap; i++)
        if (cmh_oa_keyat(&r->hseg, i)) {
            rseg *g = ((hslot *)cmh_oa_at(&r->hseg, i))->g;
            free(g->r);
            free(g);
        }
    cmh_oa_free(&r->hseg);
    free(r->mapped);
    free(r->pieces);
    free(r->cached);
    for (rseg *g = r->spare, *nx; g; g = nx) {
        nx = g->next_spare;
        free(g->r);
        free(g);
    }
    r->spare = NULL;
}

cmh_replay *cmh_replay_new(const cmh_snapshot *s, int device)
{
    cmh_replay *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->s = s;
    r->pos = -1;
    r->device = device;
    cmh_oa_init(&r->blocks, sizeof(rblock));
    cmh_oa_init(&r->hseg, sizeof(hslot));
    cmh_pt_rules_from_snapshot(s, &r->rules);
    r->pytorch = s->source == CMH_SRC_PYTORCH;
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    if (t && t->nentries) {
        r->e = s->entries + t->first_entry;
        r->n = t->nentries;
    }
    /* the device's first cuMemGetInfo sample, where the trace starts at the program's start */
    for (uint32_t k = 0; t && !t->dropped && k < s->nmeminfo; k++) {
        const cmh_meminfo *m = &s->meminfo[k];
        if (m->device == device && m->free <= m->total && m->time_ns > 0 && (!r->base_ns || m->time_ns < r->base_ns))
            r->base_ns = m->time_ns, r->base_used = m->total - m->free;
    }
    pre_state pre;
    memset(&pre, 0, sizeof pre);
    if (!cmh_rp_pre_get(s, device, &pre)) {
        if (cmh_rp_backward(r, s, device, &pre) != CMH_OK) {
            cmh_rp_pre_free(&pre);
            goto oom;
        }
        cmh_rp_pre_put(s, &pre);
    }
    r->exact = pre.exact;
    r->final_stack = pre.final_stack;
    pre.exact = NULL;
    pre.final_stack = NULL;
    /* The forward state starts as that initial state, counted in as if allocated then. */
    for (uint32_t i = 0; i < pre.nsegs; i++) {
        const pre_seg *g = &pre.segs[i];
        if (!cmh_rp_seg_insert(r, g->addr, g->size, g->pool, g->expandable, g->whole)) goto oom;
        pool_add(r->st.reserved_bytes, g->pool, (int64_t)g->size);
        if (!g->expandable) {
            pool_add(r->st.segment, g->pool, 1);
            if (r->rules.max_split && g->size >= r->rules.max_split) stat_add(&r->st.oversize_segments, 1);
        }
    }
    /* Its blocks all at once: non-releasable space is counted once the segments are filled, so no
     * half-filled segment of this construction shows up as a peak. */
    r->initializing = 1;
    for (uint32_t i = 0; i < pre.nblocks; i++) {
        const rblock *x = &pre.blocks[i];
        fwd_block_alloc(r, x->addr, x->size, x->requested, x->state, x->stack, x->time_ns);
    }
    r->initializing = 0;
    for (uint32_t i = 0; i < r->nsegs; i++) {
        int64_t sb, sc;
        if (!r->segs[i]) continue;
        split_contrib(r->segs[i], &sb, &sc);
        pool_add(r->st.inactive_split_bytes, r->segs[i]->pool, sb);
        pool_add(r->st.inactive_split, r->segs[i]->pool, sc);
    }
    if (r->nomem) goto oom;
    cmh_rp_pre_free(&pre);
    return r;
oom:
    cmh_rp_pre_free(&pre);
    cmh_replay_free(r);
    return NULL;
}

/* After the last entry the replay must equal the final segments.  Where the file's trace and
 * segments disagree (an edited file, a lost entry), the segments win: whatever differs is freed
 * or allocated here, at the end, and counted as an anomaly. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A record whose pools' latest figures are older than its last cuMemGetInfo sample (one written
 * before the recorder read every pool at a dump, a recovered flight record; a pool unchanged at
 * the dump, which records no sample there, reads the same: the driver's sample then agrees with
 * the cache, and nothing is taken): a pool gives back
 * what it keeps above its release threshold at a synchronize, which a record older than the
 * synchronize hooks did not see, so its cache may be gone.  Where the device's used memory at that sample is below what the trace holds
 * (with the memory outside it at the first sample, as owners' baseline), that much of the cache
 * is taken as given back: the end says what the driver said, not a cache it no longer had
 * (cmh_replay_pools_stale tells the reports to say so). */
static int pools_read_at_dump(const cmh_snapshot *s)
{
    for (uint32_t i = 0; i < s->nsettings; i++)
        if (!strcmp(cmh_str(s, s->settings[i].key), "pools_read_at_dump") && !strcmp(cmh_str(s, s->settings[i].value), "1")) return 1;
    return 0;
}

static void pools_stale_end(cmh_replay *r)
{
    const cmh_snapshot *s = r->s;
    int64_t cache = pools_cache(r);
    /* (a dump that read every pool: the figures are the driver's; the rule would only misread
     * memory the driver does not count as used, managed memory not yet on the device, as a cache
     * given back) */
    if (cache <= 0 || r->pool_at_dump || !r->n || r->pytorch || pools_read_at_dump(s)) return;
    int64_t last = cmh_entry_time(s, &r->e[r->n - 1]);
    const cmh_meminfo *end = NULL;
    for (uint32_t k = 0; k < s->nmeminfo; k++) {
        const cmh_meminfo *m = &s->meminfo[k];
        if (m->device == r->device && m->free <= m->total && (!end || m->time_ns >= end->time_ns)) end = m;
    }
    /* the sample must come after every entry, its pools' latest samples above all */
    if (!end || end->time_ns < last || end->time_ns <= r->pool_sample_ns) return;
    int64_t act = r->st.active_bytes[CMH_POOL_ALL].current, res = r->st.reserved_bytes[CMH_POOL_ALL].current;
    uint64_t held = (uint64_t)(act > res ? act : res), used = end->total - end->free;
    /* managed memory (cuMemAllocManaged) is the driver's used memory only where its pages are on
     * the device: what the record holds of it may be missing from the sample for that reason, not
     * for a cache given back, so it is left out of what the sample is set against (a record that
     * says nothing of residency cannot tell the two apart; the cache is then kept) */
    uint64_t managed = r->managed_live > 0 ? (uint64_t)r->managed_live : 0;
    held = managed < held ? held - managed : 0;
    uint64_t outside = r->base_known && r->base_used > r->base_held ? r->base_used - r->base_held : 0;
    if (held + outside <= used) return;
    int64_t trim = (int64_t)(held + outside - used);
    if (trim > cache) trim = cache;
    cache_change(r, -trim, 0);
    r->stale_trim = r->gap.pools_given_back = (uint64_t)trim;
    r->stale_sample_ns = r->gap.pools_sample_ns = end->time_ns;
    for (uint32_t i = 0; i < r->npools && trim > 0; i++) { /* (largest first would be no truer) */
        int64_t t = r->pools[i].slack < trim ? r->pools[i].slack : trim;
        if (t <= 0) continue;
        r->pools[i].slack -= t;
        trim -= t;
    }
}

uint64_t cmh_replay_pools_cache(const cmh_replay *r)
{
    int64_t c = pools_cache(r);
    return c > 0 ? (uint64_t)c : 0;
}

int cmh_replay_pools_stale(const cmh_replay *r, uint64_t *bytes, int64_t *sample_ns)
{
    *bytes = r->stale_trim;
    *sample_ns = r->stale_sample_ns;
    return r->stale_trim != 0;
}

static void reconcile(cmh_replay *r)
{
    const cmh_snapshot *s = r->s;
    /* pooled calls no sample followed (a cuMemFree of a pool's memory, a sample lost): the end is
     * the final segments and the pools' latest samples, as frag and owners read it */
    if (r->pool_pend) {
        int64_t pend = r->pool_pend;
        r->pool_pend = 0; /* (cache_change reads the cache as the samples say it, less what goes) */
        if (pend > 0) { /* frees into the cache no sample confirmed: the small class's first */
            int64_t sm = r->cache_small < 0 ? 0 : r->cache_small < pend ? r->cache_small : pend;
            class_add(r->st.reserved_bytes, -sm, -(pend - sm));
            r->cache_small -= sm;
            cached_segs_release(r, pend, 0);
        } else cache_change(r, -pend, 0);
    }
    r->pool_pend = r->pool_took = r->took_small = 0;
    r->took_segs[CMH_POOL_SMALL] = r->took_segs[CMH_POOL_LARGE] = 0;
    if (r->base_ns) base_passed(r); /* (a first sample after every entry) */
    pools_stale_end(r);
    if (pools_cache(r) <= 0) cached_segs_release(r, INT64_MAX, 0);
    cmh_replay f; /* the final state, as tables */
    memset(&f, 0, sizeof f);
    f.s = s;
    cmh_oa_init(&f.blocks, sizeof(rblock));
    cmh_oa_init(&f.hseg, sizeof(hslot));
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->device != r->device) continue;
        /* contiguous mapped ranges as one, as the replay holds them */
        if (!((g->flags & CMH_SEG_EXPANDABLE) ? cmh_rp_seg_map(&f, g->addr, g->size, 0) : cmh_rp_seg_insert(&f, g->addr, g->size, 0, 0, 0)))
            goto out;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *bl = &s->blocks[g->first_block + k];
            rblock *x;
            if (bl->state == CMH_BLOCK_INACTIVE) continue;
            if (!(x = block_put(&f, bl->addr))) goto out;
            x->size = bl->size;
            x->requested = bl->requested;
            x->state = bl->state;
        }
    }
    /* blocks: live in the replay but not in the file, or different */
    /* (in address order, so the result does not depend on how the table happens to hold them) */
    uint64_t *gone = malloc((r->blocks.n ? r->blocks.n : 1) * sizeof *gone);
    uint32_t ngone = 0;
    if (!gone) {
        r->nomem = 1;
        goto out;
    }
    for (uint32_t i = 0; i < r->blocks.cap; i++) {
        const rblock *b = cmh_oa_at(&r->blocks, i);
        if (!b->addr) continue;
        const rblock *x = block_find(&f, b->addr);
        if (!(x && x->size == b->size && x->state == b->state)) gone[ngone++] = b->addr;
        if (!x) { /* the trace left it active; the snapshot holds no active block there: freed after */
            r->gap.unfreed_blocks++;
            r->gap.unfreed_bytes += b->size;
        }
    }
    qsort(gone, ngone, sizeof *gone, cmp_u64);
    for (uint32_t i = 0; i < ngone; i++) {
        r->anomalies++;
        fwd_free_completed(r, gone[i]);
    }
    free(gone);
    /* segments: in the replay but not in the file */
    for (uint32_t i = 0; i < r->nsegs;) {
        rseg *g = r->segs[i];
        if (!g) {
            i++;
            continue;
        }
        rseg *x = seg_containing(&f, g->addr);
        if (x && x->addr == g->addr && x->size == g->size) {
            i++;
            continue;
        }
        if (x && x->addr <= g->addr && g->addr + g->size <= x->addr + x->size) { /* a piece of a merged range */
            i++;
            continue;
        }
        r->anomalies++;
        if (!x) {
            r->gap.unfreed_segments++;
            r->gap.unfreed_reserved += g->size;
        }
        cmh_rp_segment_free_at(r, g->addr, g->size, 0);
        if (i < r->nsegs && r->segs[i] == g) i++; /* not removable (empty): leave it */
    }
    /* what the file has and the replay lacks */
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->device != r->device) continue;
        uint64_t covered = 0;
        for (uint32_t k = 0; k < r->nsegs; k++) {
            const rseg *q = r->segs[k];
            if (q && q->addr >= g->addr && q->addr + q->size <= g->addr + g->size) covered += q->size;
        }
        if (covered < g->size && !seg_containing(r, g->addr)) {
            r->anomalies++;
            uint8_t pool = g->pool == CMH_POOL_SMALL || g->pool == CMH_POOL_LARGE ? g->pool : 0;
            fwd_segment_alloc_at(r, g->addr, g->size, 0, 0, 0, 0, (g->flags & CMH_SEG_EXPANDABLE) != 0, pool);
        }
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *bl = &s->blocks[g->first_block + k];
            if (bl->state == CMH_BLOCK_INACTIVE || block_find(r, bl->addr)) continue;
            r->anomalies++;
            fwd_block_alloc(r, bl->addr, bl->size, bl->requested, bl->state, bl->stack, bl->time_ns);
        }
    }
    /* what is active now and no entry allocated: since before the first entry, or added just above */
    for (uint32_t i = 0; i < r->blocks.cap; i++) {
        const rblock *b = cmh_oa_at(&r->blocks, i);
        if (!b->addr || !b->untraced) continue;
        r->gap.untraced_blocks++;
        r->gap.untraced_bytes += b->size;
    }
out:
    if (f.nomem) r->nomem = 1;
    cmh_rp_free_tables(&f);
}

void cmh_replay_gap(const cmh_replay *r, cmh_trace_gap *out) { *out = r->gap; }

#ifndef NDEBUG
#include <stdio.h>
#define SANE_FAIL(n) (fprintf(stderr, "replay_sane: check %d failed\n", n), 0)
/* What the replay's own bookkeeping guarantees whatever the input (sizes may wrap: the sums are
 * taken the same way the counters are): the counters equal what the tables hold, segments stay
 * in address order, and each segment's active ranges add up to its active bytes. */
static int replay_sane(const cmh_replay *r)
{
    if (r->nomem) return 1; /* a failed allocation leaves the tables short, by design */
    uint64_t active = 0, allocated = 0, requested = 0;
    for (uint32_t i = 0; i < r->blocks.cap; i++) {
        const rblock *b = cmh_oa_at(&r->blocks, i);
        if (!b->addr) continue;
        active += b->size;
        requested += b->requested;
        if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) allocated += b->size;
    }
    if (active != (uint64_t)r->st.active_bytes[CMH_POOL_ALL].current) return SANE_FAIL(1);
    if (allocated != (uint64_t)r->st.allocated_bytes[CMH_POOL_ALL].current) return SANE_FAIL(2);
    if (requested != (uint64_t)r->st.requested_bytes[CMH_POOL_ALL].current) return SANE_FAIL(3);
    uint64_t more = 0; /* pieces of one allocation past its first (rblock.piece): one count */
    for (uint32_t i = 0; i < r->npieces; i++) more += r->pieces[i].live - 1;
    if ((int64_t)(r->blocks.n - more) != r->st.active[CMH_POOL_ALL].current) return SANE_FAIL(4);
    uint64_t prev = 0, seg_bytes = 0, seg_active = 0;
    for (uint32_t i = 0; i < r->nsegs; i++) {
        const rseg *g = r->segs[i];
        if (r->saddr[i] < prev) return SANE_FAIL(5);
        prev = r->saddr[i];
        if (!g) continue;
        if (g->addr != r->saddr[i] || g->nr != g->nactive) return SANE_FAIL(6);
        uint64_t sum = 0;
        for (uint32_t k = 0; k < g->nr; k++) sum += g->r[k].b - g->r[k].a;
        if (sum != g->active_bytes) return SANE_FAIL(7);
        seg_bytes += g->size;
        seg_active += g->active_bytes;
    }
    /* A trace that agrees with itself: reserved is the segments (and the pools' slack), every
     * active block is inside one, so free inside segments = reserved - active, exactly. */
    if (r->anomalies) return 1;
    int64_t slack = pools_cache(r);
    if (slack < 0) return SANE_FAIL(10); /* (a pooled allocation takes no more than the pools keep) */
    if (seg_bytes + (uint64_t)slack != (uint64_t)r->st.reserved_bytes[CMH_POOL_ALL].current) return SANE_FAIL(8);
    if (seg_active != active) return SANE_FAIL(9);
    return 1;
}
#endif

int cmh_replay_step(cmh_replay *r)
{
    if (r->pos + 1 >= (int64_t)r->n) {
        if (!r->reconciled) {
            r->reconciled = 1;
            reconcile(r);
            assert(replay_sane(r));
        }
        return 0;
    }
    r->pos++;
    maybe_compact(r);
    apply_forward(r, &r->e[r->pos]);
    assert((r->pos & 4095) || replay_sane(r)); /* every 4096 entries: the check walks every table */
    return 1;
}

const cmh_mem_stats *cmh_replay_stats(const cmh_replay *r) { return &r->st; }
int64_t cmh_replay_unsplit_bytes(const cmh_replay *r) { return r->unsplit_bytes; }
int64_t cmh_replay_position(const cmh_replay *r) { return r->pos; }
uint64_t cmh_replay_anomalies(const cmh_replay *r) { return r->anomalies; }
int cmh_replay_status(const cmh_replay *r) { return r->nomem ? CMH_ENOMEM : CMH_OK; }

void cmh_replay_free(cmh_replay *r)
{
    if (!r) return;
    if (!r->borrowed) {
        free(r->exact);
        free(r->final_stack);
    }
    free(r->pools);
    cmh_rp_free_tables(r);
    free(r);
}

void cmh_replay_observe(cmh_replay *r, cmh_replay_observer fn, void *arg)
{
    r->obs = fn;
    r->obs_arg = arg;
    for (uint32_t i = 0; fn && i < r->blocks.cap; i++) /* what is already there counts as appearing now */
        if (cmh_oa_keyat(&r->blocks, i)) {
            const rblock *b = cmh_oa_at(&r->blocks, i);
            fn(arg, (int64_t)b->size, b->stack, b->addr);
        }
}

const cmh_entry *cmh_replay_entry(const cmh_replay *r, int64_t i)
{
    return i >= 0 && i < (int64_t)r->n ? &r->e[i] : NULL;
}

int64_t cmh_replay_length(const cmh_replay *r) { return r->n; }
const cmh_snapshot *cmh_replay_snapshot(const cmh_replay *r) { return r->s; }
