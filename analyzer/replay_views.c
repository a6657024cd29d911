/*
 * replay_views.c - what is read off a replay's state (replay_state.h): its live blocks and
 * segments, its free space, and a copy of it to go on from (a checkpoint, memo.h).
 */
#include <stdlib.h>
#include <string.h>

#include "memo.h"
#include "replay_state.h"

cmh_replay *cmh_replay_clone(const cmh_replay *r)
{
    cmh_replay *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = *r;
    c->segs = NULL;
    c->saddr = NULL;
    c->nsegs = c->capsegs = 0; /* (until copied: a failed copy frees what it has) */
    cmh_oa_init(&c->blocks, r->blocks.esize);
    cmh_oa_init(&c->hseg, r->hseg.esize); /* the backward pass's alone: empty going forwards */
    c->pools = NULL;
    c->cached = NULL;
    c->ncached = c->capcached = 0;
    c->pieces = NULL;
    c->npieces = c->cappieces = 0;
    c->mapped = NULL; /* (the backward pass's alone) */
    c->nmapped = c->capmapped = 0;
    c->spare = NULL;
    c->obs = NULL;
    c->obs_arg = NULL;
    c->borrowed = 1;
    if (r->hashmode || r->hseg.n) goto oom;
    if (r->capsegs) {
        c->segs = calloc(r->capsegs, sizeof *c->segs);
        c->saddr = malloc(r->capsegs * sizeof *c->saddr);
        if (!c->segs || !c->saddr) goto oom;
        c->capsegs = r->capsegs;
        memcpy(c->saddr, r->saddr, r->nsegs * sizeof *c->saddr);
        for (uint32_t i = 0; i < r->nsegs; i++, c->nsegs++) {
            const rseg *g = r->segs[i];
            if (!g) continue;
            rseg *x = malloc(sizeof *x);
            if (!x) goto oom;
            *x = *g;
            x->next_spare = NULL;
            x->r = g->capr ? malloc(g->capr * sizeof *x->r) : NULL;
            if (g->capr && !x->r) {
                free(x);
                goto oom;
            }
            if (g->nr) memcpy(x->r, g->r, g->nr * sizeof *x->r);
            c->segs[i] = x;
        }
    }
    if (r->blocks.cap) { /* the same slots: the blocks are walked in the same order */
        size_t bytes = (size_t)r->blocks.cap * r->blocks.esize;
        if (!(c->blocks.slots = malloc(bytes))) goto oom;
        memcpy(c->blocks.slots, r->blocks.slots, bytes);
        c->blocks.cap = r->blocks.cap;
        c->blocks.n = r->blocks.n;
    }
    if (r->npools) { /* the capacity fwd_pool_sample grows it to: the next power of two */
        uint32_t cap = 1;
        while (cap < r->npools) cap *= 2;
        if (!(c->pools = malloc(cap * sizeof *c->pools))) goto oom;
        memcpy(c->pools, r->pools, r->npools * sizeof *c->pools);
    }
    if (r->npieces) {
        if (!(c->pieces = malloc(r->npieces * sizeof *c->pieces))) goto oom;
        memcpy(c->pieces, r->pieces, r->npieces * sizeof *c->pieces);
        c->npieces = c->cappieces = r->npieces;
    }
    if (r->ncached) {
        if (!(c->cached = malloc(r->ncached * sizeof *c->cached))) goto oom;
        memcpy(c->cached, r->cached, r->ncached * sizeof *c->cached);
        c->ncached = c->capcached = r->ncached;
    }
    return c;
oom:
    cmh_replay_free(c);
    return NULL;
}

void cmh_replay_take_arrays(cmh_replay *c, cmh_replay *from)
{
    if (!c->borrowed || c->exact != from->exact || c->final_stack != from->final_stack || from->borrowed) return;
    from->exact = NULL;
    from->final_stack = NULL;
    c->borrowed = 0;
}

void cmh_replay_blocks(const cmh_replay *r, void (*fn)(void *, const cmh_live_block *), void *arg)
{
    /* which groups of pieces (rblock.piece) have had a block given (out of memory: each piece counts) */
    uint8_t *given = r->npieces ? calloc(r->npieces, 1) : NULL;
    for (uint32_t i = 0; i < r->blocks.cap; i++) {
        const rblock *b = cmh_oa_at(&r->blocks, i);
        if (!b->addr) continue;
        cmh_live_block lb = {b->addr, b->size, b->requested, b->time_ns, b->stack, b->state, b->pool, 0};
        for (uint32_t k = 0; b->piece && given && k < r->npieces; k++)
            if (r->pieces[k].time_ns == b->time_ns && r->pieces[k].stack == b->stack) {
                lb.more = given[k];
                given[k] = 1;
                break;
            }
        fn(arg, &lb);
    }
    free(given);
}

void cmh_replay_segments(const cmh_replay *r, void (*fn)(void *, const cmh_live_segment *), void *arg)
{
    for (uint32_t i = 0; i < r->nsegs; i++) {
        const rseg *g = r->segs[i];
        if (!g) continue;
        cmh_live_segment ls = {g->addr, g->size, g->pool, g->expandable};
        fn(arg, &ls);
    }
}

uint64_t cmh_expandable_page(const cmh_snapshot *s, int pool)
{
    /* PyTorch's expandable segments map and unmap in pages of kSmallBuffer (small pool) or
     * kLargeBuffer (large pool: 20 MiB), from the segment's start; a recorder's own cuMemMap'd
     * ranges at the driver's 2 MiB granularity */
    return s->source == CMH_SRC_PYTORCH && pool == CMH_POOL_LARGE ? CMH_PT_LARGE_BUFFER : CMH_PT_SMALL_BUFFER;
}

void cmh_free_gap(uint64_t a, uint64_t b, int holds_active, uint64_t base, uint64_t page, uint64_t *releasable, uint64_t *trapped)
{
    if (b <= a) return;
    if (!holds_active) { /* a segment with nothing in it: empty_cache() gives it all back */
        *releasable += b - a;
        return;
    }
    if (!page || a < base) {
        *trapped += b - a;
        return;
    }
    /* an expandable segment unmaps the whole pages of a free run, wherever it is (its pages
     * counted from the segment's start) */
    uint64_t lo = base + (a - base + page - 1) / page * page, hi = base + (b - base) / page * page;
    uint64_t rel = hi > lo ? hi - lo : 0;
    *releasable += rel;
    *trapped += b - a - rel;
}

/* The pool id of the replay's segment g: its segment_alloc's (rseg.priv, from PyTorch versions
 * that write it), known while it lives, freed before the end or not; else the final segment's at
 * its address, its segment_pool_id; (0, 0), the default pool, when neither says.  any_final: the
 * record has a private pool's final segment on the device (most have none: nothing looked up). */
static cmh_pool_id seg_pool(const cmh_replay *r, const rseg *g, int any_final)
{
    const cmh_snapshot *s = r->s;
    if (g->priv && g->priv < s->npool_ids) return s->pool_ids[g->priv];
    for (uint32_t i = 0; any_final && i < s->nsegments; i++) {
        const cmh_segment *f = &s->segments[i];
        if (f->device == r->device && f->addr <= g->addr && g->addr < f->addr + (f->size ? f->size : 1))
            return (cmh_pool_id){{f->pool_id[0], f->pool_id[1]}};
    }
    return (cmh_pool_id){{0, 0}};
}

void cmh_replay_free_split(const cmh_replay *r, cmh_free_split *out) { cmh_replay_free_split_for(r, NULL, out); }

void cmh_replay_free_split_for(const cmh_replay *r, const uint64_t request_pool[2], cmh_free_split *out)
{
    memset(out, 0, sizeof *out);
    struct {
        uint64_t id[2], free;
    } per[32]; /* other private pools' free, to name the one holding most */
    uint32_t nper = 0;
    int mine_private = request_pool && (request_pool[0] || request_pool[1]);
    int any_final = 0;
    for (uint32_t i = 0; i < r->s->nsegments && !any_final; i++) {
        const cmh_segment *g = &r->s->segments[i];
        any_final = g->device == r->device && (g->pool_id[0] || g->pool_id[1]);
    }
    for (uint32_t i = 0; i < r->nsegs; i++) {
        const rseg *g = r->segs[i];
        if (!g) continue;
        cmh_pool_id p = seg_pool(r, g, any_final);
        int priv = p.id[0] || p.id[1];
        int own = mine_private && priv && p.id[0] == request_pool[0] && p.id[1] == request_pool[1];
        uint64_t at = g->addr;
        for (uint32_t k = 0; k <= g->nr; k++) {
            uint64_t end = k < g->nr ? g->r[k].a : g->addr + g->size;
            if (end > at && own) {
                out->own_pool += end - at; /* the request's own pool's: its to use where a run fits */
                if (end - at > out->largest_gap) out->largest_gap = end - at;
            } else if (end > at && priv) {
                out->private_free += end - at; /* another pool's: no request outside it can use it */
                uint32_t q = 0;
                while (q < nper && (per[q].id[0] != p.id[0] || per[q].id[1] != p.id[1])) q++;
                if (q == nper && nper < 32) per[nper].id[0] = p.id[0], per[nper].id[1] = p.id[1], per[nper++].free = 0;
                if (q < nper) per[q].free += end - at;
            } else if (end > at) {
                uint64_t trapped = out->trapped, releasable = out->releasable;
                cmh_free_gap(at, end, g->nr > 0, g->addr, g->expandable ? cmh_expandable_page(r->s, g->pool) : 0, &out->releasable,
                             &out->trapped);
                if (g->nr > 0) out->expandable_pages += out->releasable - releasable; /* (0 unless expandable) */
                /* a private pool's request never takes the default pool's cached blocks: of them it
                 * gets what empty_cache() gives back to the device alone */
                if (mine_private) out->unusable += out->trapped - trapped;
                else if (end - at > out->largest_gap) out->largest_gap = end - at;
            }
            if (k < g->nr && g->r[k].b > at) at = g->r[k].b;
        }
    }
    out->unusable += out->private_free;
    for (uint32_t q = 0; q < nper; q++)
        if (per[q].free > out->top_pool_free)
            out->top_pool[0] = per[q].id[0], out->top_pool[1] = per[q].id[1], out->top_pool_free = per[q].free;
    for (uint32_t i = 0; i < r->npools; i++) out->pool_cache += (uint64_t)r->pools[i].slack;
    if (r->pool_pend) out->pool_cache = (uint64_t)((int64_t)out->pool_cache + r->pool_pend); /* (pooled calls since the samples: never below 0) */
    out->releasable += out->pool_cache; /* a pool's cache goes back with cuMemPoolTrimTo */
}

void cmh_replay_pool_cache_top(const cmh_replay *r, uint64_t *pool, uint64_t *bytes)
{
    *pool = *bytes = 0;
    for (uint32_t i = 0; i < r->npools; i++)
        if ((uint64_t)r->pools[i].slack > *bytes) *pool = r->pools[i].handle, *bytes = (uint64_t)r->pools[i].slack;
}

void cmh_replay_free_space(const cmh_replay *r, uint64_t *free_inside, uint64_t *largest_gap)
{
    cmh_free_split x; /* the same walk: the two figures can never disagree */
    cmh_replay_free_split(r, &x);
    *free_inside = x.releasable + x.trapped + x.private_free + x.own_pool;
    *largest_gap = x.largest_gap;
}

uint64_t cmh_replay_request_pool(const cmh_replay *r, int64_t oom)
{
    const cmh_entry *o = cmh_replay_entry(r, oom);
    if (!o || o->action != CMH_ACT_OOM || o->kind != CMH_KIND_ASYNC) return 0;
    uint32_t th = cmh_entry_thread(r->s, o);
    /* recorded right before it by its thread: other threads' entries may come between, a few */
    for (int64_t i = oom - 1; i >= 0 && i >= oom - 64; i--) {
        const cmh_entry *e = cmh_replay_entry(r, i);
        if (!e || cmh_entry_thread(r->s, e) != th) continue;
        if (e->action == CMH_ACT_POOL_SAMPLE && (cmh_entry_stream(r->s, e) & CMH_POOL_REQUEST)) return cmh_entry_addr(r->s, e);
        if (e->action != CMH_ACT_POOL_SAMPLE) return 0; /* the thread's previous call: not this request's */
    }
    return 0;
}

uint64_t cmh_replay_pool_cache_except(const cmh_replay *r, uint64_t pool, uint64_t *top, uint64_t *top_bytes)
{
    uint64_t sum = 0;
    *top = *top_bytes = 0;
    for (uint32_t i = 0; i < r->npools; i++) {
        if (r->pools[i].handle == pool || r->pools[i].slack <= 0) continue;
        sum += (uint64_t)r->pools[i].slack;
        if ((uint64_t)r->pools[i].slack > *top_bytes) *top = r->pools[i].handle, *top_bytes = (uint64_t)r->pools[i].slack;
    }
    return sum;
}

static int desc_cmp(const void *a, const void *b)
{
    const cmh_pool_desc *x = a, *y = b;
    return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

int cmh_pool_descs(const cmh_snapshot *s, cmh_pool_desc **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    uint32_t cap = 0;
    cmh_pool_desc *d = NULL;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            if (e->action != CMH_ACT_POOL_SAMPLE) continue;
            uint64_t h = cmh_entry_addr(s, e), tag = cmh_entry_stream(s, e);
            int created = (tag & CMH_POOL_CREATED) != 0;
            uint32_t k = *n;
            if (!created) /* a pool seen before on this device: no new one */
                for (k = 0; k < *n && !(d[k].handle == h && d[k].device == tr->device); k++) {}
            if (k < *n) continue;
            if (*n == cap) {
                cmh_pool_desc *nd = realloc(d, (cap ? cap * 2 : 8) * sizeof *nd);
                if (!nd) {
                    free(d);
                    return CMH_ENOMEM;
                }
                d = nd, cap = cap ? cap * 2 : 8;
            }
            unsigned kind = tag & CMH_POOL_DEFAULT ? CMH_POOL_DEFAULT : tag & CMH_POOL_PRIVATE ? CMH_POOL_PRIVATE : 0;
            d[(*n)++] = (cmh_pool_desc){h, tr->device, kind, 0, created ? e->stack : 0, cmh_entry_time(s, e)};
        }
    }
    if (*n > 1) qsort(d, *n, sizeof *d, desc_cmp);
    uint32_t k = 0;
    for (uint32_t i = 0; i < *n; i++)
        if (d[i].kind == CMH_POOL_PRIVATE) d[i].number = ++k;
    *out = d;
    return CMH_OK;
}

const cmh_pool_desc *cmh_pool_desc_find(const cmh_pool_desc *d, uint32_t n, uint64_t handle, int64_t at_ns)
{
    const cmh_pool_desc *best = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (d[i].handle != handle) continue;
        if (!best || d[i].time_ns <= at_ns) best = &d[i];
    }
    return best;
}
