/*
 * reports.c - the questions users record for: what owned memory at the peak, what is leaking,
 * how fragmented the segments are, why an allocation ran out of memory, and what a change did.
 *
 * Everything is computed from a replay (replay.c), so it works the same on recorder snapshots
 * and on PyTorch pickles; byte figures of a PyTorch trace are in the allocator's rounded sizes
 * (replay.c sizes blocks the way the caching allocator does).  Live blocks are grouped by their
 * allocation stack ("sites").
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "grow.h"
#include "oatab.h"

/* ---- sites: live bytes grouped by stack ---- */

typedef struct site_map {
    cmh_site *v; /* dense, in order of appearance */
    uint32_t n, cap;
    cmh_oatab index; /* group + 1 -> index in v */
    const cmh_sites *sites; /* the grouping; NULL: every stack its own group */
    int failed;             /* out of memory: the map is incomplete */
} site_map;

typedef struct site_slot {
    uint64_t key; /* group + 1 */
    uint64_t i;
} site_slot;

static void site_map_init(site_map *m, const cmh_sites *sites)
{
    memset(m, 0, sizeof *m);
    m->sites = sites;
    cmh_oa_init(&m->index, sizeof(site_slot));
}

static uint32_t group_of(const site_map *m, uint32_t stack) { return m->sites ? cmh_sites_group(m->sites, stack) : stack; }

static cmh_site *site_get(site_map *m, uint32_t stack)
{
    int created;
    uint32_t group = group_of(m, stack);
    site_slot *sl = cmh_oa_get(&m->index, (uint64_t)group + 1, &created);
    if (!sl) goto oom;
    if (!created) return &m->v[sl->i];
    if (CMH_GROW(m->v, m->cap, (uint64_t)m->n + 1, 64)) {
        cmh_oa_remove(&m->index, sl);
        goto oom;
    }
    sl->i = m->n;
    cmh_site *s = &m->v[m->n++];
    memset(s, 0, sizeof *s);
    s->group = group;
    s->stack = stack;
    s->first_ns = INT64_MAX;
    s->last_ns = INT64_MIN;
    return s;
oom:
    m->failed = 1;
    return NULL;
}

static void site_map_free(site_map *m)
{
    free(m->v);
    cmh_oa_free(&m->index);
    memset(m, 0, sizeof *m);
}

static int cmp_site(const void *a, const void *b)
{
    const cmh_site *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->group < y->group ? -1 : x->group > y->group;
}

static void add_block(void *arg, const cmh_live_block *b)
{
    site_map *m = arg;
    cmh_site *s = site_get(m, b->stack);
    if (!s) return;
    s->bytes += b->size;
    s->count++;
    if (b->time_ns && b->time_ns < s->first_ns) s->first_ns = b->time_ns;
    if (b->time_ns && b->time_ns > s->last_ns) s->last_ns = b->time_ns;
}

/* The sites, sorted, handed over to *out (the map is emptied); CMH_ENOMEM if it was incomplete. */
static int finish_sites(site_map *m, cmh_site **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    if (m->failed) {
        site_map_free(m);
        return CMH_ENOMEM;
    }
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->v[i].first_ns == INT64_MAX) m->v[i].first_ns = 0;
        if (m->v[i].last_ns == INT64_MIN) m->v[i].last_ns = 0;
    }
    if (m->n) qsort(m->v, m->n, sizeof *m->v, cmp_site);
    cmh_oa_free(&m->index);
    *out = m->v;
    *n = m->n;
    m->v = NULL;
    return CMH_OK;
}

static int live_sites(const cmh_replay *r, const cmh_sites *sites, cmh_site **out, uint32_t *n)
{
    site_map m;
    site_map_init(&m, sites);
    cmh_replay_blocks(r, add_block, &m);
    return finish_sites(&m, out, n);
}

static void base_info(const cmh_snapshot *s, int device, cmh_report_base *b)
{
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    b->device = device;
    b->entries = t ? t->nentries : 0;
    b->dropped = t ? t->dropped : 0;
    b->pytorch = s->source == CMH_SRC_PYTORCH;
}

/* ---- peak ---- */

int cmh_peak_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *p)
{
    memset(p, 0, sizeof *p);
    base_info(s, device, &p->base);
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    const cmh_mem_stats *st = cmh_replay_stats(r);
    p->alloc_peak = st->allocated_bytes[0].current;
    p->reserved_peak = st->reserved_bytes[0].current;
    p->alloc_index = p->reserved_index = -1;
    while (cmh_replay_step(r)) {
        int64_t i = cmh_replay_position(r);
        if (st->allocated_bytes[0].current > p->alloc_peak) {
            p->alloc_peak = st->allocated_bytes[0].current;
            p->alloc_index = i;
            p->alloc_time_ns = cmh_replay_entry(r, i)->time_ns;
        }
        if (st->reserved_bytes[0].current > p->reserved_peak) {
            p->reserved_peak = st->reserved_bytes[0].current;
            p->reserved_index = i;
            p->reserved_time_ns = cmh_replay_entry(r, i)->time_ns;
        }
    }
    p->alloc_end = st->allocated_bytes[0].current;
    p->reserved_end = st->reserved_bytes[0].current;
    int64_t n = cmh_replay_length(r);
    /* reconciling the end with the final segments may have raised the figures past every entry */
    if (st->allocated_bytes[0].current > p->alloc_peak) p->alloc_peak = st->allocated_bytes[0].current, p->alloc_index = n;
    int rc = cmh_replay_status(r);
    cmh_replay_free(r);
    if (rc != CMH_OK) {
        cmh_peak_report_free(p);
        return rc;
    }

    /* again, up to the allocated peak, to see who owned memory then */
    if (!(r = cmh_replay_new(s, device))) return CMH_ENOMEM;
    while (cmh_replay_position(r) < p->alloc_index && cmh_replay_step(r)) {}
    rc = live_sites(r, sites, &p->sites, &p->nsites);
    if (rc == CMH_OK) rc = cmh_replay_status(r);
    cmh_replay_free(r);
    if (rc != CMH_OK) cmh_peak_report_free(p);
    return rc;
}

/* ---- leaks ---- */

#define MAX_CHECKPOINTS 64

typedef struct leak_ctx {
    site_map live; /* bytes per stack right now (cmh_site.bytes) */
} leak_ctx;

static void leak_observe(void *arg, int64_t delta, uint32_t stack)
{
    leak_ctx *c = arg;
    cmh_site *s = site_get(&c->live, stack);
    if (s) s->bytes = (uint64_t)((int64_t)s->bytes + delta);
}

int cmh_leaks_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, uint64_t min_bytes, cmh_leak_report *p)
{
    memset(p, 0, sizeof *p);
    base_info(s, device, &p->base);
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    int64_t n = cmh_replay_length(r);

    /* checkpoints: the trace's marks, else PyTorch's external annotations (their START times),
     * else ten even steps through the trace */
    int64_t cps[MAX_CHECKPOINTS];
    int ncp = 0, nmarks = 0;
    for (int64_t i = 0; i < n; i++) nmarks += cmh_replay_entry(r, i)->action == CMH_ACT_MARK;
    if (nmarks >= 2) {
        int stride = (nmarks + MAX_CHECKPOINTS - 1) / MAX_CHECKPOINTS, k = 0;
        for (int64_t i = 0; i < n && ncp < MAX_CHECKPOINTS; i++)
            if (cmh_replay_entry(r, i)->action == CMH_ACT_MARK && k++ % stride == 0) cps[ncp++] = i;
        p->checkpoint_kind = CMH_CP_MARKS;
    } else {
        int starts = 0;
        for (uint32_t a = 0; a < s->nannotations; a++) starts += s->annotations[a].stage == 0 && s->annotations[a].device == device;
        if (starts >= 2 && n) {
            int stride = (starts + MAX_CHECKPOINTS - 1) / MAX_CHECKPOINTS, k = 0;
            int64_t i = 0;
            for (uint32_t a = 0; a < s->nannotations && ncp < MAX_CHECKPOINTS; a++) {
                const cmh_annotation *an = &s->annotations[a];
                if (an->stage != 0 || an->device != device || k++ % stride) continue;
                while (i < n && cmh_replay_entry(r, i)->time_ns < an->time_ns) i++;
                if (!ncp || cps[ncp - 1] != i) cps[ncp++] = i;
            }
            p->checkpoint_kind = CMH_CP_ANNOTATIONS;
        }
        if (ncp < 2) {
            ncp = 0;
            for (int k = 0; k < 10 && n; k++) cps[ncp++] = n * k / 10;
            p->checkpoint_kind = CMH_CP_EVEN;
        }
    }
    p->ncheckpoints = ncp;

    leak_ctx c;
    site_map_init(&c.live, sites);
    int rc = CMH_OK;
    cmh_replay_observe(r, leak_observe, &c);
    /* samples[k][site index in c.live] */
    uint64_t *samples = NULL;
    uint32_t sample_cols = 0;
    int k = 0;
    for (;;) {
        int64_t pos = cmh_replay_position(r) + 1; /* the next entry to apply */
        while (k < ncp && cps[k] <= pos) {
            if (c.live.n > sample_cols) { /* widen: new sites appeared */
                uint32_t nc = c.live.n * 2 + 16;
                uint64_t *ns = calloc((size_t)MAX_CHECKPOINTS * nc, sizeof *ns);
                if (!ns) {
                    rc = CMH_ENOMEM;
                    goto out;
                }
                for (int q = 0; samples && q < k; q++)
                    memcpy(ns + (size_t)q * nc, samples + (size_t)q * sample_cols, sample_cols * sizeof *ns);
                free(samples);
                samples = ns;
                sample_cols = nc;
            }
            for (uint32_t i = 0; i < c.live.n; i++) samples[(size_t)k * sample_cols + i] = c.live.v[i].bytes;
            k++;
        }
        if (!cmh_replay_step(r)) break;
    }
    ncp = k;
    p->ncheckpoints = ncp;

    /* still live at the end, by site, with their growth over the checkpoints */
    site_map end;
    site_map_init(&end, sites);
    cmh_replay_blocks(r, add_block, &end);
    cmh_site *live;
    uint32_t nlive;
    if (c.live.failed || cmh_replay_status(r) != CMH_OK) rc = CMH_ENOMEM;
    if (finish_sites(&end, &live, &nlive) != CMH_OK) rc = CMH_ENOMEM;
    if (rc != CMH_OK) {
        free(live);
        goto out;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < nlive; i++) {
        cmh_site *st = &live[i];
        if (st->bytes < min_bytes) continue;
        /* the series: each checkpoint, then the end */
        const site_slot *cs = cmh_oa_find(&c.live.index, (uint64_t)st->group + 1);
        uint32_t col = cs ? (uint32_t)cs->i : UINT32_MAX;
        uint64_t prev = 0;
        int have = 0;
        st->rises = st->drops = 0;
        for (int q = 0; q <= ncp; q++) {
            uint64_t v = q < ncp ? (col < sample_cols ? samples[(size_t)q * sample_cols + col] : 0) : st->bytes;
            if (q == 0) st->start_bytes = v;
            if (have) {
                st->rises += v > prev;
                st->drops += v < prev;
            }
            prev = v;
            have = 1;
        }
        st->intervals = (uint32_t)ncp;
        st->growing = st->rises >= 3 && st->drops * 4 <= st->rises && st->bytes > st->start_bytes;
        p->leaking += st->growing;
        p->live_bytes += st->bytes;
        p->live_blocks += st->count;
        live[kept++] = *st;
    }
    p->sites = live;
    p->nsites = kept;
out:
    free(samples);
    site_map_free(&c.live);
    cmh_replay_free(r);
    if (rc != CMH_OK) cmh_leak_report_free(p);
    return rc;
}

/* ---- fragmentation ---- */

int cmh_frag_compute(const cmh_snapshot *s, int device, cmh_frag_report *p)
{
    memset(p, 0, sizeof *p);
    base_info(s, device, &p->base);
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nsegments; i++) n += s->segments[i].device == device;
    p->segs = calloc(n ? n : 1, sizeof *p->segs);
    if (!p->segs) return CMH_ENOMEM;
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->device != device) continue;
        cmh_frag_seg *f = &p->segs[p->nsegs++];
        f->index = i;
        f->addr = g->addr;
        f->reserved = g->size;
        f->expandable = (g->flags & CMH_SEG_EXPANDABLE) != 0;
        uint64_t active = 0, run = 0;
        int any_active = 0;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s->blocks[g->first_block + k];
            if (b->state == CMH_BLOCK_INACTIVE) {
                run += b->size;
                if (run > f->largest_gap) f->largest_gap = run;
                continue;
            }
            run = 0;
            any_active = 1;
            active += b->size;
            if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) f->allocated += b->size;
        }
        f->free = g->size - active;
        f->fragmentation = f->free ? 1.0 - (double)f->largest_gap / (double)f->free : 0.0;
        f->non_releasable = any_active && !f->expandable ? f->free : 0;
        p->reserved += f->reserved;
        p->allocated += f->allocated;
        p->free += f->free;
        p->non_releasable += f->non_releasable;
        if (f->largest_gap > p->largest_gap) p->largest_gap = f->largest_gap;
    }
    p->fragmentation = p->free ? 1.0 - (double)p->largest_gap / (double)p->free : 0.0;
    /* the last OOM, if any: would fragmentation, rather than demand, explain it? */
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (e->action == CMH_ACT_OOM) {
            p->last_oom_request = e->size;
            p->last_oom_device_free = e->addr;
            p->has_oom = 1;
        }
    }
    if (p->has_oom) p->last_oom_verdict = cmh_oom_verdict(p->last_oom_request, p->free, p->largest_gap, p->last_oom_device_free);
    return CMH_OK;
}

/* ---- OOM ---- */

int cmh_oom_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_oom_report *p)
{
    memset(p, 0, sizeof *p);
    base_info(s, device, &p->base);
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    int64_t n = cmh_replay_length(r);
    uint32_t count = 0;
    for (int64_t i = 0; i < n; i++) count += cmh_replay_entry(r, i)->action == CMH_ACT_OOM;
    p->events = calloc(count ? count : 1, sizeof *p->events);
    if (!p->events) {
        cmh_replay_free(r);
        return CMH_ENOMEM;
    }
    const cmh_mem_stats *st = cmh_replay_stats(r);
    for (int64_t i = 0; i < n; i++) {
        const cmh_entry *e = cmh_replay_entry(r, i);
        if (e->action == CMH_ACT_OOM) {
            cmh_oom_event *o = &p->events[p->nevents++];
            o->index = i;
            o->time_ns = e->time_ns;
            o->request = e->size;
            o->device_free = e->addr;
            o->allocated = (uint64_t)st->allocated_bytes[0].current;
            o->reserved = (uint64_t)st->reserved_bytes[0].current;
            cmh_replay_free_space(r, &o->free_inside, &o->largest_gap);
            o->fits_in_gap = o->largest_gap >= o->request;
            o->verdict = cmh_oom_verdict(o->request, o->free_inside, o->largest_gap, o->device_free);
            o->request_stack = e->stack;
            o->request_group = sites ? cmh_sites_group(sites, e->stack) : e->stack;
            if (live_sites(r, sites, &o->sites, &o->nsites) != CMH_OK) {
                cmh_replay_free(r);
                cmh_oom_report_free(p);
                return CMH_ENOMEM;
            }
        }
        cmh_replay_step(r);
    }
    int rc = cmh_replay_status(r);
    cmh_replay_free(r);
    if (rc != CMH_OK) cmh_oom_report_free(p);
    return rc;
}

void cmh_peak_report_free(cmh_peak_report *p)
{
    free(p->sites);
    memset(p, 0, sizeof *p);
}

void cmh_leak_report_free(cmh_leak_report *p)
{
    free(p->sites);
    memset(p, 0, sizeof *p);
}

void cmh_frag_report_free(cmh_frag_report *p)
{
    free(p->segs);
    memset(p, 0, sizeof *p);
}

int cmh_oom_verdict(uint64_t request, uint64_t free_inside, uint64_t largest_gap, uint64_t device_free)
{
    if (largest_gap >= request) return CMH_OOM_FIT_IGNORED;
    if (free_inside + device_free >= request) return CMH_OOM_FRAGMENTATION;
    return CMH_OOM_DEMAND;
}

void cmh_oom_report_free(cmh_oom_report *p)
{
    for (uint32_t i = 0; i < p->nevents; i++) free(p->events[i].sites);
    free(p->events);
    memset(p, 0, sizeof *p);
}
