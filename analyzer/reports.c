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
    /* a history: entries that say how memory changed (enabled=state leaves none, at most a
     * snapshot marker per device) */
    for (uint32_t i = 0; t && i < t->nentries && !b->history; i++) {
        int a = s->entries[t->first_entry + i].action;
        b->history = a != CMH_ACT_SNAPSHOT && a != CMH_ACT_MARK && a != CMH_ACT_POOL_SAMPLE;
    }
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
    p->requested_peak = st->requested_bytes[0].current;
    p->alloc_index = p->reserved_index = p->requested_index = -1;
    while (cmh_replay_step(r)) {
        int64_t i = cmh_replay_position(r);
        if (st->requested_bytes[0].current > p->requested_peak) {
            p->requested_peak = st->requested_bytes[0].current;
            p->requested_index = i;
            p->requested_time_ns = cmh_replay_entry(r, i)->time_ns;
        }
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
    p->requested_end = st->requested_bytes[0].current;
    int64_t n = cmh_replay_length(r);
    /* reconciling the end with the final segments may have raised the figures past every entry */
    if (p->alloc_end > p->alloc_peak) p->alloc_peak = p->alloc_end, p->alloc_index = n;
    if (p->reserved_end > p->reserved_peak) p->reserved_peak = p->reserved_end, p->reserved_index = n;
    if (p->requested_end > p->requested_peak) p->requested_peak = p->requested_end, p->requested_index = n;
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

#define MAX_WINDOWS 64

/* The live blocks, by address, each with the window it was allocated in: at the end, exactly
 * the still-live blocks and when each appeared. */
typedef struct born_slot {
    uint64_t addr;
    uint32_t stack;
    int32_t window;
    int64_t index; /* the allocating entry, -1 before the trace */
    uint64_t size;
} born_slot;

typedef struct leak_ctx {
    cmh_oatab born;
    const cmh_replay *r;
    int window; /* the window being replayed */
    int nomem;
} leak_ctx;

static void leak_observe(void *arg, int64_t delta, uint32_t stack, uint64_t addr)
{
    leak_ctx *c = arg;
    if (delta < 0) {
        born_slot *b = cmh_oa_find(&c->born, addr);
        if (b) cmh_oa_remove(&c->born, b);
        return;
    }
    born_slot *b = cmh_oa_get(&c->born, addr, NULL);
    if (!b) {
        c->nomem = 1;
        return;
    }
    b->stack = stack;
    b->window = c->window;
    b->index = cmh_replay_position(c->r);
    b->size = (uint64_t)delta;
}

/* Kendall's tau (the tau-a form) of a series against its order: 1 when every later value is
 * above every earlier one, -1 when below, 0 for no trend. */
static double kendall_tau(const uint64_t *v, int n)
{
    if (n < 2) return 0;
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) sum += (v[j] > v[i]) - (v[j] < v[i]);
    return (double)sum / ((double)n * (n - 1) / 2);
}

#define THREAD_WINDOWS 10

/* The verdict over one series of windows: add[w] = still-live bytes allocated in window w. */
static void leak_verdict(const uint64_t *add, int nw, cmh_site *st)
{
    uint64_t series[MAX_WINDOWS] = {0}, sum = 0;
    st->rises = 0;
    for (int q = 0; q < nw; q++) {
        sum += add[q];
        series[q] = sum; /* still-live bytes allocated by the end of window q */
        if (q) st->rises += add[q] > 0;
    }
    st->start_bytes = nw ? series[0] : 0;
    st->intervals = (uint32_t)nw;
    st->trend = kendall_tau(series, nw);
    uint32_t need = (uint32_t)nw / 2; /* half the steps between windows, rounded up */
    if (need < CMH_LEAK_MIN_RISES) need = CMH_LEAK_MIN_RISES;
    st->growing = nw > 1 && st->rises >= need && st->trend >= CMH_LEAK_MIN_TREND;
}

/* One site's still-live blocks made by one thread, in windows of that thread's own entries. */
typedef struct thread_series {
    uint64_t key; /* (row << 32 | thread) + 1 */
    uint64_t add[THREAD_WINDOWS];
} thread_series;

/* Where the windows begin (entry indices, ascending, the first 0): at most MAX_WINDOWS. */
static int leak_windows(const cmh_snapshot *s, int device, const cmh_replay *r, int64_t *cut, int *kind)
{
    int64_t n = cmh_replay_length(r);
    int ncut = 0, nmarks = 0, starts = 0;
    if (!n) return 0;
    for (int64_t i = 0; i < n; i++) nmarks += cmh_replay_entry(r, i)->action == CMH_ACT_MARK;
    for (uint32_t a = 0; a < s->nannotations; a++) starts += s->annotations[a].stage == 0 && s->annotations[a].device == device;
    cut[ncut++] = 0;
    if (nmarks >= CMH_LEAK_MIN_RISES) { /* one window per step: from each mark to the next */
        int stride = (nmarks + MAX_WINDOWS - 2) / (MAX_WINDOWS - 1), k = 0;
        for (int64_t i = 0; i < n && ncut < MAX_WINDOWS; i++)
            if (cmh_replay_entry(r, i)->action == CMH_ACT_MARK && k++ % stride == 0 && i > cut[ncut - 1]) cut[ncut++] = i;
        *kind = CMH_CP_MARKS;
        return ncut;
    }
    if (starts >= CMH_LEAK_MIN_RISES) {
        int stride = (starts + MAX_WINDOWS - 2) / (MAX_WINDOWS - 1), k = 0;
        int64_t i = 0;
        for (uint32_t a = 0; a < s->nannotations && ncut < MAX_WINDOWS; a++) {
            const cmh_annotation *an = &s->annotations[a];
            if (an->stage != 0 || an->device != device || k++ % stride) continue;
            while (i < n && cmh_replay_entry(r, i)->time_ns < an->time_ns) i++;
            if (i > cut[ncut - 1] && i < n) cut[ncut++] = i;
        }
        if (ncut >= CMH_LEAK_MIN_RISES) {
            *kind = CMH_CP_ANNOTATIONS;
            return ncut;
        }
        ncut = 1;
    }
    /* ten stretches of equal entry counts: the same cut for the same program, whatever its
     * timing (floors, not instants, make interleaved threads harmless) */
    for (int w = 1; w < 10; w++)
        if (n * w / 10 > cut[ncut - 1]) cut[ncut++] = n * w / 10;
    *kind = CMH_CP_EVEN;
    return ncut;
}

int cmh_leaks_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, uint64_t min_bytes, cmh_leak_report *p)
{
    memset(p, 0, sizeof *p);
    base_info(s, device, &p->base);
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    int64_t cut[MAX_WINDOWS];
    int nw = leak_windows(s, device, r, cut, &p->checkpoint_kind);

    leak_ctx c = {.r = r, .window = 0};
    cmh_oa_init(&c.born, sizeof(born_slot));
    int rc = CMH_OK;
    cmh_replay_observe(r, leak_observe, &c); /* the state before the first entry: window 0 */
    for (int w = 0; w < nw; w++) {
        c.window = w;
        int64_t until = w + 1 < nw ? cut[w + 1] : INT64_MAX; /* this window's entries end before it */
        while (cmh_replay_position(r) + 1 < until && cmh_replay_step(r)) {}
    }
    while (cmh_replay_step(r)) {} /* the end (and, with no windows, everything) */
    p->ncheckpoints = nw;

    /* With several recording threads, each thread's entries are windows of their own too: a
     * thread that leaks all its life is seen whatever share of the record its life is. */
    int64_t n = cmh_replay_length(r);
    uint32_t *rank = NULL, *per_thread = NULL, maxthread = 0, nthreads = 0;
    for (int64_t i = 0; i < n; i++)
        if (cmh_replay_entry(r, i)->thread > maxthread) maxthread = cmh_replay_entry(r, i)->thread;
    if (maxthread && maxthread < (1u << 24)) {
        rank = malloc((size_t)n * sizeof *rank);
        per_thread = calloc((size_t)maxthread + 1, sizeof *per_thread);
        if (!rank || !per_thread) rc = CMH_ENOMEM;
        for (int64_t i = 0; rc == CMH_OK && i < n; i++) {
            uint32_t t = cmh_replay_entry(r, i)->thread;
            if (!per_thread[t]++ && t) nthreads++;
            rank[i] = per_thread[t] - 1;
        }
    }

    /* the record's window each thread began in */
    int *first_window = NULL;
    if (rc == CMH_OK && nthreads >= 2 && nw) {
        first_window = malloc(((size_t)maxthread + 1) * sizeof *first_window);
        if (!first_window) rc = CMH_ENOMEM;
        for (uint32_t t = 0; first_window && t <= maxthread; t++) first_window[t] = -1;
        int w = 0;
        for (int64_t i = 0; first_window && i < n; i++) {
            while (w + 1 < nw && cut[w + 1] <= i) w++;
            uint32_t t = cmh_replay_entry(r, i)->thread;
            if (first_window[t] < 0) first_window[t] = w;
        }
    }

    /* still live at the end, by site, with how their bytes accumulated window by window */
    site_map end;
    site_map_init(&end, sites);
    cmh_replay_blocks(r, add_block, &end);
    cmh_site *live = NULL;
    uint32_t nlive = 0;
    uint64_t *grew = NULL; /* grew[site * nw + w]: still-live bytes allocated in window w */
    cmh_oatab rows, tser;
    cmh_oa_init(&rows, sizeof(site_slot));
    cmh_oa_init(&tser, sizeof(thread_series));
    if (c.nomem || cmh_replay_status(r) != CMH_OK) rc = CMH_ENOMEM;
    if (finish_sites(&end, &live, &nlive) != CMH_OK) rc = CMH_ENOMEM;
    if (rc == CMH_OK && nlive && nw && !(grew = calloc((size_t)nlive * (size_t)nw, sizeof *grew))) rc = CMH_ENOMEM;
    for (uint32_t i = 0; i < nlive && rc == CMH_OK; i++) { /* the rows of `live` by group */
        site_slot *sl = cmh_oa_get(&rows, (uint64_t)live[i].group + 1, NULL);
        if (!sl) rc = CMH_ENOMEM;
        else sl->i = i;
    }
    for (uint32_t i = 0; i < c.born.cap && rc == CMH_OK; i++) {
        if (!cmh_oa_keyat(&c.born, i)) continue;
        const born_slot *b = cmh_oa_at(&c.born, i);
        const site_slot *sl = cmh_oa_find(&rows, (uint64_t)(sites ? cmh_sites_group(sites, b->stack) : b->stack) + 1);
        if (!sl) continue;
        uint32_t t = nthreads >= 2 && b->index >= 0 ? cmh_replay_entry(r, b->index)->thread : 0;
        int w = b->window;
        /* a thread's warm-up (its first own window) counts in the record's window where the
         * thread began: a scheduler that pauses a thread in the middle of it, and lets the others
         * run, does not make rises of it */
        if (t && first_window && (uint64_t)rank[b->index] * THREAD_WINDOWS / per_thread[t] == 0) w = first_window[t];
        if (nw && w >= 0 && w < nw) grew[sl->i * (size_t)nw + (size_t)w] += b->size;
        if (!t) continue;
        thread_series *ts = cmh_oa_get(&tser, (sl->i << 32 | t) + 1, NULL);
        if (!ts) {
            rc = CMH_ENOMEM;
            break;
        }
        ts->add[(uint64_t)rank[b->index] * THREAD_WINDOWS / per_thread[t]] += b->size;
    }
    if (rc != CMH_OK) {
        free(live);
        goto done;
    }
    for (uint32_t i = 0; i < nlive; i++) {
        cmh_site *st = &live[i];
        leak_verdict(nw ? grew + i * (size_t)nw : NULL, nw, st);
        st->thread = 0;
        p->leaking += st->growing;
        p->live_bytes += st->bytes;
        p->live_blocks += st->count;
        p->live_sites++;
    }
    /* a site that one thread kept growing all its life grows, whatever the record as a whole says */
    for (uint32_t i = 0; i < tser.cap; i++) {
        if (!cmh_oa_keyat(&tser, i)) continue;
        const thread_series *ts = cmh_oa_at(&tser, i);
        cmh_site *st = &live[(ts->key - 1) >> 32], one = *st;
        leak_verdict(ts->add, THREAD_WINDOWS, &one);
        if (!one.growing || (st->growing && (st->thread || one.rises <= st->rises))) continue;
        p->leaking += !st->growing;
        one.thread = (uint32_t)((ts->key - 1) & 0xffffffffu);
        *st = one;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < nlive; i++) {
        if (live[i].bytes < min_bytes) { /* hidden from the rows, never from the totals */
            p->hidden_sites++;
            p->hidden_bytes += live[i].bytes;
            continue;
        }
        live[kept++] = live[i];
    }
    p->sites = live;
    p->nsites = kept;
done:
    free(first_window);
    free(grew);
    free(rank);
    free(per_thread);
    cmh_oa_free(&rows);
    cmh_oa_free(&tser);
    cmh_oa_free(&c.born);
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
            cmh_free_gap(run_at, run_at + run, any_active, f->expandable, &f->releasable, &f->trapped);
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
        if (uncovered > described) cmh_free_gap(0, uncovered - described, any_active, 0, &f->releasable, &f->trapped);
        f->fragmentation = f->reserved ? (double)f->trapped / (double)f->reserved : 0.0;
        p->reserved += f->reserved;
        p->allocated += f->allocated;
        p->free += f->free;
        p->pending_free += f->pending_free;
        p->releasable += f->releasable;
        p->trapped += f->trapped;
        if (f->largest_gap > p->largest_gap) p->largest_gap = f->largest_gap;
    }
    /* a stream-ordered pool keeps what it reserved beyond what it hands out (its latest sample):
     * reserved and free, as every report counts it, and given back by a trim */
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    enum { NPOOLS = 64 };
    uint64_t handle[NPOOLS], slack[NPOOLS];
    uint32_t np = 0;
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (e->action != CMH_ACT_POOL_SAMPLE) continue;
        uint32_t k = 0;
        while (k < np && handle[k] != e->addr) k++;
        if (k == np && np < NPOOLS) handle[np++] = e->addr;
        if (k < np) slack[k] = e->size > e->requested ? e->size - e->requested : 0;
    }
    for (uint32_t k = 0; k < np; k++) p->pool_cache += slack[k];
    p->reserved += p->pool_cache;
    p->free += p->pool_cache;
    p->releasable += p->pool_cache;
    p->fragmentation = p->reserved ? (double)p->trapped / (double)p->reserved : 0.0;
    /* the last OOM: judged at that moment, by the one computation every command uses */
    for (uint32_t i = 0; t && i < t->nentries; i++) p->nooms += s->entries[t->first_entry + i].action == CMH_ACT_OOM;
    if (p->nooms) {
        cmh_oom_report om;
        int rc = cmh_oom_compute(s, device, NULL, &om);
        if (rc != CMH_OK) {
            cmh_frag_report_free(p);
            return rc;
        }
        if (om.nevents) {
            const cmh_oom_event *e = &om.events[om.nevents - 1];
            p->has_oom = 1;
            p->last_oom = (struct cmh_oom_event_state){e->index, e->time_ns, e->request, e->device_free, e->allocated,
                                                       e->reserved, e->free_inside, e->pending_free, e->largest_gap,
                                                       e->split.releasable, e->split.trapped, e->verdict};
        }
        cmh_oom_report_free(&om);
    }
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
            uint64_t in_gaps;
            cmh_replay_free_space(r, &in_gaps, &o->largest_gap);
            cmh_replay_free_split(r, &o->split);
            /* free inside = reserved - allocated, by definition; what the gaps do not hold of it is
             * freed memory whose stream work is pending (a trace that contradicts itself may leave
             * the two apart: the figures then say what the counters say) */
            o->free_inside = o->reserved > o->allocated ? o->reserved - o->allocated : 0;
            uint64_t active = (uint64_t)st->active_bytes[0].current;
            o->pending_free = active > o->allocated ? active - o->allocated : 0;
            (void)in_gaps;
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

const char *cmh_oom_verdict_name(int verdict)
{
    static const char *const names[] = {"demand", "fragmentation", "fit in a free gap"};
    return names[verdict >= 0 && verdict <= 2 ? verdict : 0];
}

const char *cmh_oom_verdict_text(int verdict)
{
    static const char *const text[] = {
        "demand: the memory was genuinely in use",
        "fragmentation, not demand: enough bytes were free, but no free gap was large enough",
        "a free gap inside the reserved segments was large enough (another stream or memory pool?)"};
    return text[verdict >= 0 && verdict <= 2 ? verdict : 0];
}

void cmh_oom_report_free(cmh_oom_report *p)
{
    for (uint32_t i = 0; i < p->nevents; i++) free(p->events[i].sites);
    free(p->events);
    memset(p, 0, sizeof *p);
}
