/*
 * frag.c - how fragmented the segments are at the end: each segment's free bytes, what of them
 * could be given back and what live blocks trap, and the last OOM judged at its moment (oom.c's
 * computation, so the two commands never disagree).
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/owners.h"
#include "cumemhist/reports.h"
#include "memo.h"


/* What each stream-ordered pool keeps at the end (up to CMH_FRAG_POOLS of them, *np said):
 * its latest sample's reserved beyond used, its kind (CMH_POOL_DEFAULT, CMH_POOL_PRIVATE, 0 not
 * said), less what the end takes as given back after them (cmh_trace_gap.pools_given_back, said
 * into gap when given: the replay's end, frag's and owners' the same), taken off the largest
 * caches first.  Their sum is returned. */
static uint64_t end_pool_caches(const cmh_snapshot *s, int device, cmh_trace_gap *gap, cmh_frag_pool *out, uint32_t *np_out)
{
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    cmh_frag_pool pl[CMH_FRAG_POOLS];
    uint64_t cache = 0;
    uint32_t np = 0;
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (e->action != CMH_ACT_POOL_SAMPLE) continue;
        uint32_t k = 0;
        while (k < np && pl[k].pool != cmh_entry_addr(s, e)) k++;
        if (k == np && np < CMH_FRAG_POOLS) pl[np++] = (cmh_frag_pool){cmh_entry_addr(s, e), 0, 0};
        if (k < np) {
            pl[k].cache = cmh_entry_size(s, e) > cmh_entry_requested(s, e) ? cmh_entry_size(s, e) - cmh_entry_requested(s, e) : 0;
            pl[k].kind = (uint32_t)cmh_entry_stream(s, e) & (CMH_POOL_DEFAULT | CMH_POOL_PRIVATE);
        }
    }
    for (uint32_t k = 0; k < np; k++) cache += pl[k].cache;
    if (cache) { /* a cache the driver's last sample says was given back (the replay's end) */
        cmh_trace_gap g;
        if (cmh_trace_gap_compute(s, device, &g) == CMH_OK && g.pools_given_back) {
            uint64_t back = g.pools_given_back < cache ? g.pools_given_back : cache;
            if (gap) gap->pools_given_back = back, gap->pools_sample_ns = g.pools_sample_ns;
            cache -= back;
            while (back) { /* (off the largest first: the record does not say whose) */
                uint32_t m = 0;
                for (uint32_t k = 1; k < np; k++)
                    if (pl[k].cache > pl[m].cache) m = k;
                uint64_t take = back < pl[m].cache ? back : pl[m].cache;
                pl[m].cache -= take, back -= take;
            }
        }
    }
    if (out) {
        *np_out = 0;
        for (uint32_t k = 0; k < np; k++)
            if (pl[k].cache) out[(*np_out)++] = pl[k];
    }
    return cache;
}

uint64_t cmh_end_pool_cache(const cmh_snapshot *s, int device, cmh_trace_gap *gap)
{
    return end_pool_caches(s, device, gap, NULL, NULL);
}

uint64_t cmh_stream_ordered_frees(const cmh_snapshot *s, int device, uint64_t *bytes)
{
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    uint64_t n = 0, b = 0;
    for (uint32_t k = 0; t && k < t->nentries; k++) {
        const cmh_entry *e = &s->entries[t->first_entry + k];
        if (e->action == CMH_ACT_SEGMENT_FREE && (e->flags & CMH_EF_WHOLE_BLOCK) && cmh_entry_stream(s, e)) n++, b += cmh_entry_size(s, e);
    }
    if (bytes) *bytes = b;
    return n;
}

/* ---- what holds a segment: its live blocks' site ---- */

typedef struct held_by {
    uint32_t group, stack;
    uint64_t size;
} held_by;

static int cmp_held_by(const void *a, const void *b)
{
    const held_by *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    if (x->size != y->size) return x->size > y->size ? -1 : 1; /* (a group's largest block first) */
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

int cmh_holder_pick(const cmh_sites *sites, const cmh_live_block *v, uint32_t n, cmh_holder *out)
{
    memset(out, 0, sizeof *out);
    held_by *h = n ? malloc(n * sizeof *h) : NULL;
    if (n && !h) return CMH_ENOMEM;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (v[i].state != CMH_BLOCK_INACTIVE)
            h[m++] = (held_by){sites ? cmh_sites_group(sites, v[i].stack) : v[i].stack, v[i].stack, v[i].size};
    if (m > 1) qsort(h, m, sizeof *h, cmp_held_by);
    for (uint32_t i = 0; i < m;) {
        uint32_t j = i;
        uint64_t sum = 0;
        for (; j < m && h[j].group == h[i].group; j++) sum += h[j].size;
        /* (groups in ascending order: the first of equals kept) */
        if (!out->nsites++ || sum > out->bytes) out->group = h[i].group, out->stack = h[i].stack, out->bytes = sum;
        i = j;
    }
    free(h);
    return CMH_OK;
}

int cmh_segment_holder(const cmh_snapshot *s, const cmh_sites *sites, uint32_t seg, cmh_holder *out)
{
    memset(out, 0, sizeof *out);
    if (seg >= s->nsegments) return CMH_OK;
    const cmh_segment *g = &s->segments[seg];
    cmh_live_block *v = g->nblocks ? malloc(g->nblocks * sizeof *v) : NULL;
    if (g->nblocks && !v) return CMH_ENOMEM;
    for (uint32_t k = 0; k < g->nblocks; k++) {
        const cmh_block *b = &s->blocks[g->first_block + k];
        v[k] = (cmh_live_block){.addr = b->addr, .size = b->size, .requested = b->requested, .time_ns = b->time_ns, .stack = b->stack,
                                .state = b->state};
    }
    int rc = cmh_holder_pick(sites, v, g->nblocks, out);
    free(v);
    return rc;
}

/* ---- fragmentation ---- */

/* A mapped range's owner (cmh_sites_owner by its stack, named as owners' rows name it) into buf;
 * 1 when PyTorch's caching allocator mapped it (an expandable segment).  A segment PyTorch's own
 * snapshot lists is its (kind DEVICE: its is_expandable); one of a driver-level record is a
 * cuMemMap whoever made it, the allocator's only when its stack says so.  sites: grouped any way
 * (the owner is the stack's); NULL: made here once, when a range asks. */
static int vmm_owner(const cmh_snapshot *s, const cmh_segment *g, const cmh_sites **sites, cmh_sites **made, char *buf, size_t n)
{
    if (g->kind != CMH_KIND_VMM) return 1; /* (PyTorch's own segment, its part of a merged record included) */
    if (!*sites && !*made) {
        cmh_site_opts o = {CMH_GROUP_STACK, 0, NULL, 0};
        int rc;
        char err[128];
        *made = cmh_sites_new(s, &o, &rc, err, sizeof err);
        *sites = *made;
    }
    const char *owner = *sites && g->stack ? cmh_sites_owner(*sites, cmh_sites_group(*sites, g->stack)) : "";
    const char *lib = *owner ? cmh_library_name(owner) : NULL;
    if (!strcmp(owner, "PyTorch") || (lib && !strcmp(lib, "PyTorch"))) return 1;
    if (!*owner) snprintf(buf, n, "unknown (recorded without a stack)");
    else cmh_owner_name(owner, cmh_sites_owner_package(*sites, cmh_sites_group(*sites, g->stack)), buf, n);
    return 0;
}

static void vmm_count(cmh_frag_report *p, cmh_frag_seg *f, const char *name)
{
    const uint32_t cap = sizeof p->vmm_owners / sizeof p->vmm_owners[0];
    uint32_t k = 0;
    while (k < p->nvmm_owners && strcmp(p->vmm_owners[k].name, name)) k++;
    if (k == p->nvmm_owners && k < cap) snprintf(p->vmm_owners[p->nvmm_owners++].name, sizeof p->vmm_owners[0].name, "%s", name);
    if (k == cap) { /* (past the table: the last row is 'other owners') */
        k = cap - 1;
        snprintf(p->vmm_owners[k].name, sizeof p->vmm_owners[k].name, "other owners");
    }
    p->vmm_owners[k].segs++;
    p->vmm_owners[k].reserved += f->reserved;
    f->vmm_owner = k;
    p->vmm_segs++;
    p->vmm_reserved += f->reserved;
    p->vmm_free += f->free;
}

int cmh_frag_compute(const cmh_snapshot *s, int device, cmh_frag_report *p) { return cmh_frag_compute_sites(s, device, NULL, p); }

int cmh_frag_compute_sites(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_frag_report *p)
{
    memset(p, 0, sizeof *p);
    cmh_report_base_fill(s, device, &p->base);
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nsegments; i++) n += s->segments[i].device == device;
    p->page_small = cmh_expandable_page(s, CMH_POOL_SMALL);
    p->page_large = cmh_expandable_page(s, CMH_POOL_LARGE);
    p->segs = calloc(n ? n : 1, sizeof *p->segs);
    if (!p->segs) return CMH_ENOMEM;
    const cmh_sites *osites = sites;
    cmh_sites *made = NULL;
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->device != device) continue;
        cmh_frag_seg *f = &p->segs[p->nsegs++];
        f->index = i;
        f->addr = g->addr;
        f->reserved = g->size;
        char owner[96] = "";
        if (g->flags & CMH_SEG_EXPANDABLE) {
            f->expandable = vmm_owner(s, g, &osites, &made, owner, sizeof owner);
            f->vmm = !f->expandable;
        }
        f->private_pool = g->pool_id[0] != 0 || g->pool_id[1] != 0;
        f->pool_id[0] = g->pool_id[0];
        f->pool_id[1] = g->pool_id[1];
        uint64_t active = 0, run = 0, run_at = g->addr;
        int any_active = 0;
        for (uint32_t k = 0; k < g->nblocks; k++) any_active |= s->blocks[g->first_block + k].state != CMH_BLOCK_INACTIVE;
        for (uint32_t k = 0; k <= g->nblocks; k++) {
            const cmh_block *b = k < g->nblocks ? &s->blocks[g->first_block + k] : NULL;
            if (b && b->state == CMH_BLOCK_INACTIVE) {
                if (!run) run_at = b->addr;
                run += b->size;
                if (run > f->largest_gap) f->largest_gap = run;
                continue;
            }
            cmh_free_gap(run_at, run_at + run, any_active, g->addr, f->expandable ? cmh_expandable_page(s, cmh_segment_pool(g)) : 0,
                         &f->releasable, &f->trapped);
            run = 0;
            if (!b) break;
            active += b->size;
            if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) f->allocated += b->size;
        }
        /* (a hostile file's blocks may add up past their segment: nothing is free then) */
        f->free = g->size > f->allocated ? g->size - f->allocated : 0;
        f->pending_free = active > f->allocated ? active - f->allocated : 0;
        uint64_t uncovered = g->size > active ? g->size - active : 0; /* bytes no block describes: free */
        uint64_t described = f->releasable + f->trapped;
        if (uncovered > described) cmh_free_gap(0, uncovered - described, any_active, 0, 0, &f->releasable, &f->trapped);
        if (f->private_pool) { /* the pool's own: not given back, not usable outside it */
            f->private_free = f->releasable + f->trapped;
            f->releasable = f->trapped = 0;
            p->private_segs++;
        }
        f->fragmentation = f->reserved ? (double)f->trapped / (double)f->reserved : 0.0;
        p->reserved += f->reserved;
        p->private_free += f->private_free;
        p->allocated += f->allocated;
        p->free += f->free;
        p->pending_free += f->pending_free;
        p->releasable += f->releasable;
        p->trapped += f->trapped;
        if (f->expandable) p->expandable_segs++, p->expandable_free += f->free;
        if (f->vmm) vmm_count(p, f, owner);
        if (f->expandable && f->trapped) {
            p->trapped_expandable += f->trapped;
            if (cmh_segment_pool(g) == CMH_POOL_LARGE) p->trapped_expandable_large = 1;
            else p->trapped_expandable_small = 1;
        }
        if (!f->private_pool && f->largest_gap > p->largest_gap) p->largest_gap = f->largest_gap;
    }
    cmh_sites_free(made);
    /* a stream-ordered pool keeps what it reserved beyond what it hands out (its latest sample):
     * reserved and free, as every report counts it, and given back by a trim */
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    p->pool_cache = end_pool_caches(s, device, &p->base.gap, p->pools, &p->npools);
    p->reserved += p->pool_cache;
    p->free += p->pool_cache;
    p->releasable += p->pool_cache;
    p->fragmentation = p->reserved ? (double)p->trapped / (double)p->reserved : 0.0;
    /* the last OOM: judged at that moment, by the one computation every command uses */
    for (uint32_t i = 0; t && i < t->nentries; i++) p->nooms += s->entries[t->first_entry + i].action == CMH_ACT_OOM;
    if (p->nooms) {
        cmh_oom_report om;
        int rc = cmh_oom_compute(s, device, sites, &om);
        if (rc != CMH_OK) {
            cmh_frag_report_free(p);
            return rc;
        }
        if (om.nevents) {
            const cmh_oom_event *e = &om.events[om.nevents - 1];
            p->has_oom = 1;
            p->last_oom = (struct cmh_oom_event_state){e->index, e->time_ns, e->request, e->device_free, e->allocated,
                                                       e->reserved, e->free_inside, e->pending_free, e->largest_gap,
                                                       e->split.releasable, e->split.trapped, e->split.private_free,
                                                       e->split.own_pool, e->usable, e->split.unusable,
                                                       {e->request_pool[0], e->request_pool[1]}, e->verdict,
                                                       e->number, e->retried, e->retry_index, e->gap_unknown_in,
                                                       e->trap_stack, e->trap_group, e->trap_segs, e->trap_sites, e->trap_free};
        }
        cmh_oom_report_free(&om);
    }
    return CMH_OK;
}

void cmh_frag_report_free(cmh_frag_report *p)
{
    free(p->segs);
    memset(p, 0, sizeof *p);
}

static int frag_order(const void *a, const void *b)
{
    const cmh_frag_seg *x = a, *y = b;
    if (x->trapped != y->trapped) return x->trapped > y->trapped ? -1 : 1; /* fragmentation first */
    if (x->free != y->free) return x->free > y->free ? -1 : 1;
    if (x->reserved != y->reserved) return x->reserved > y->reserved ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void cmh_frag_sort(cmh_frag_report *p)
{
    if (p->nsegs > 1) qsort(p->segs, p->nsegs, sizeof *p->segs, frag_order);
}

cmh_frag_use cmh_frag_count_use(const cmh_frag_report *p, uint32_t from, uint32_t to)
{
    cmh_frag_use u;
    memset(&u, 0, sizeof u);
    for (uint32_t i = from; i < to && i < p->nsegs; i++) {
        const cmh_frag_seg *g = &p->segs[i];
        u.reserved += g->reserved, u.free += g->free;
        if (!g->free) u.full++, u.full_bytes += g->reserved;
        else if (!g->allocated) u.empty++;
        else u.part++;
    }
    return u;
}

