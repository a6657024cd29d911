/*
 * export.c - the recorder's state as a snapshot model (include/cumemhist/snapshot.h): each
 * device's ring as its trace, the live segments with their blocks, the ranges as annotations.
 *
 * The live tables and the rings' views are taken at one point, with every ring's gate closed
 * (collect_at_one_point): the state is the one the trace ends at, which a flight checkpoint
 * needs (its reader applies the journal's entries past that point to it).  They are converted
 * after the gates open (symbolizing a stack, through stack_map, may take long).
 *
 * The shapes: a segment with no allocator above it holds one block covering it; contiguous VMM
 * maps inside one reservation become one growing segment with a block per map (PyTorch's
 * expandable segments); an allocator's reported blocks tile their segment, with inactive
 * blocks in the gaps.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oatab.h"

/* A segment an allocator made managed (cmh_segment_managed) after its segment_alloc entry was
 * written: that entry still says "one implied block".  Walking the ring backwards, every managed
 * segment (live now, or freed later with its managed flags) takes the flag off its latest
 * segment_alloc / segment_map entry.  The ring is read in place (cmh_hist_view_ring), so the
 * entries to change are only named, in *fixed (positions + 1), and changed as they are exported. */
static inline int managed_free(const cmh_rec_entry *x)
{
    return (x->action == CMH_ACT_SEGMENT_FREE || x->action == CMH_ACT_SEGMENT_UNMAP) && !(x->flags & CMH_EF_WHOLE_BLOCK);
}

/* ring_frees: the ring's frees of managed segments when the caller counted them (the streamed
 * export's first pass does, saving a read of every entry), else UINT64_MAX */
static int fix_managed(const cmh_ring_view *v, cmh_oatab *fixed, const cmh_live *live, size_t nl, int device, uint64_t ring_frees)
{
    uint64_t want = 0, n = v->n;
    for (size_t k = 0; k < nl; k++) want += live[k].device == device && !(live[k].flags & CMH_EF_WHOLE_BLOCK);
    if (ring_frees != UINT64_MAX) want += ring_frees;
    else
        for (uint64_t k = 0; k < n; k++) {
            cmh_rec_entry e;
            if (cmh_view_get(v, k, &e)) want += managed_free(&e);
        }
    if (!want) return CMH_OK; /* no allocator above the driver here */
    cmh_oatab set; /* addresses of managed segments not yet matched with their allocation */
    cmh_oa_init(&set, sizeof(uint64_t));
    if (cmh_oa_reserve(&set, (uint32_t)(want < UINT32_MAX / 2 ? want : UINT32_MAX / 2)) != 0) return CMH_ENOMEM;
    for (size_t k = 0; k < nl; k++)
        if (live[k].device == device && !(live[k].flags & CMH_EF_WHOLE_BLOCK) && !cmh_oa_get(&set, live[k].addr, NULL))
            goto oom;
    for (uint64_t k = n; k-- > 0;) {
        cmh_rec_entry e;
        const cmh_rec_entry *x = &e;
        if (!cmh_view_get(v, k, &e)) continue;
        int freed = x->action == CMH_ACT_SEGMENT_FREE || x->action == CMH_ACT_SEGMENT_UNMAP;
        int made = x->action == CMH_ACT_SEGMENT_ALLOC || x->action == CMH_ACT_SEGMENT_MAP;
        if (freed && !(x->flags & CMH_EF_WHOLE_BLOCK)) {
            if (!cmh_oa_get(&set, x->addr, NULL)) goto oom;
        } else if (made) {
            void *slot = cmh_oa_find(&set, x->addr);
            if (slot) {
                if (!cmh_oa_get(fixed, k + 1, NULL)) goto oom;
                cmh_oa_remove(&set, slot);
            }
        }
    }
    cmh_oa_free(&set);
    return CMH_OK;
oom:
    cmh_oa_free(&set);
    return CMH_ENOMEM;
}

/* Ring entry k as a model entry; *last: the time of the entry before it (raw ticks). */
static int convert(cmh_snapshot *s, const cmh_rec_entry *r, uint64_t k, const cmh_oatab *fixed, int64_t *last,
                   uint32_t (*stack_map)(uint32_t, void *), void *arg, int64_t now_ticks, int64_t now_ns, cmh_entry_full *e)
{
    int rc = CMH_OK;
    memset(e, 0, sizeof *e);
    /* a writer stamps after its claim: one overtaken gets the time of the entry before */
    int64_t t = r->ticks > *last ? r->ticks : *last;
    *last = t;
    e->time_ns = cmh_ticks_to_ns(t, now_ticks, now_ns);
    e->addr = r->addr;
    e->size = r->size;
    e->requested = r->requested;
    e->stream = r->stream;
    e->stack = r->stack ? stack_map(r->stack, arg) : 0;
    e->thread = r->thread;
    if (r->action == CMH_ACT_MARK) { /* addr holds the mark's name id */
        rc = cmh_marks_intern(s, (uint32_t)r->addr, &e->name);
        e->addr = 0;
    }
    e->action = r->action;
    e->flags = r->flags;
    if (fixed->n && cmh_oa_find((cmh_oatab *)fixed, k + 1)) e->flags &= ~(unsigned)CMH_EF_WHOLE_BLOCK & 15u;
    e->kind = r->kind;
    return rc;
}

uint64_t cmh_export_seq[CMH_MAX_DEVICES + 1];

/* The views of the rings, taken at one point with the live tables (collect_live): a slot's
 * taken = 0 where its device recorded nothing. */
typedef struct ring_views {
    cmh_ring_view v[CMH_MAX_DEVICES + 1];
    uint64_t dropped[CMH_MAX_DEVICES + 1];
    uint64_t ooms[CMH_MAX_DEVICES + 1]; /* OOM entries recorded (cmh_hist_view_ring) */
    int taken[CMH_MAX_DEVICES + 1];
} ring_views;

static int export_rings(cmh_snapshot *s, ring_views *rv, const cmh_live *live, size_t nl, uint32_t (*stack_map)(uint32_t, void *),
                        void *arg, int64_t now_ticks, int64_t now_ns)
{
    int rc = CMH_OK;
    for (int i = 0; i <= CMH_MAX_DEVICES && rc == CMH_OK; i++) {
        if (!rv->taken[i]) continue;
        cmh_ring_view *v = &rv->v[i];
        uint64_t n = v->n;
        int device = i == CMH_HOST_SLOT ? -1 : i;
        cmh_oatab fixed; /* positions + 1 of entries that lose CMH_EF_WHOLE_BLOCK */
        cmh_oa_init(&fixed, sizeof(uint64_t));
        rc = fix_managed(v, &fixed, live, nl, device, UINT64_MAX);
        if (rc == CMH_OK) rc = cmh_snapshot_add_trace(s, device, rv->dropped[i], NULL);
        if (rc == CMH_OK && n <= UINT32_MAX) rc = cmh_snapshot_reserve_entries(s, (uint32_t)n);
        int64_t last = INT64_MIN;
        uint64_t kept_ooms = 0;
        for (uint64_t k = 0; k < n && rc == CMH_OK; k++) {
            cmh_rec_entry r;
            if (!cmh_view_get(v, k, &r)) continue; /* lost: counted */
            kept_ooms += r.action == CMH_ACT_OOM;
            cmh_entry_full e;
            rc = convert(s, &r, k, &fixed, &last, stack_map, arg, now_ticks, now_ns, &e);
            if (rc == CMH_OK) rc = cmh_snapshot_add_entry(s, &e);
        }
        /* the OOMs the ring dropped: the process saw them (summary's count, oom's numbers) */
        if (rc == CMH_OK && rv->ooms[i] > kept_ooms) s->traces[s->ntraces - 1].dropped_ooms = rv->ooms[i] - kept_ooms;
        cmh_oa_free(&fixed);
    }
    return rc;
}

static int cmp_live(const void *a, const void *b)
{
    const cmh_live *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int add_block(cmh_snapshot *s, uint64_t addr, uint64_t size, uint64_t requested, uint32_t stack, uint8_t state,
                     int64_t time_ns)
{
    cmh_block b = {addr, size, requested, stack, state, time_ns};
    return cmh_snapshot_add_block(s, &b);
}

static int export_segments(cmh_snapshot *s, const cmh_live *all, size_t nl, const cmh_live *blocks, size_t nb,
                           uint32_t (*stack_map)(uint32_t, void *), void *arg, int64_t now_ticks, int64_t now_ns)
{
    size_t bi = 0;
    int rc = CMH_OK;
    for (size_t k = 0; k < nl && rc == CMH_OK; k++) {
        const cmh_live *l = &all[k];
        cmh_segment g;
        memset(&g, 0, sizeof g);
        g.device = l->device;
        g.kind = l->kind;
        int whole = (l->flags & CMH_EF_WHOLE_BLOCK) != 0;
        g.flags = (uint8_t)((whole ? CMH_SEG_WHOLE_BLOCK : 0) | (l->kind == CMH_KIND_VMM ? CMH_SEG_EXPANDABLE : 0));
        g.addr = l->addr;
        g.size = l->size;
        g.stream = l->stream;
        g.stack = l->stack ? stack_map(l->stack, arg) : 0;
        g.time_ns = cmh_ticks_to_ns(l->ticks, now_ticks, now_ns);
        g.pool = (uint8_t)cmh_pool_rule(l->size, whole);
        if ((rc = cmh_snapshot_add_segment(s, &g, NULL)) != CMH_OK) break;
        if (whole) {
            rc = add_block(s, l->addr, l->size, l->requested, g.stack, CMH_BLOCK_ACTIVE_ALLOCATED, g.time_ns);
            /* contiguous maps in one reservation: one growing segment, a block per map */
            uint64_t lo, hi, end = l->addr + l->size;
            if (l->kind == CMH_KIND_VMM && cmh_vmm_reservation(l->addr, &lo, &hi)) {
                while (rc == CMH_OK && k + 1 < nl && all[k + 1].kind == CMH_KIND_VMM && all[k + 1].device == l->device &&
                       all[k + 1].addr == end && end + all[k + 1].size <= hi && (all[k + 1].flags & CMH_EF_WHOLE_BLOCK)) {
                    const cmh_live *m = &all[++k];
                    rc = add_block(s, m->addr, m->size, m->requested, m->stack ? stack_map(m->stack, arg) : 0,
                                   CMH_BLOCK_ACTIVE_ALLOCATED, cmh_ticks_to_ns(m->ticks, now_ticks, now_ns));
                    end += m->size;
                }
                s->segments[s->nsegments - 1].size = end - l->addr;
            }
            continue;
        }
        /* reported blocks inside it, with inactive blocks in the gaps so that they tile it */
        uint64_t at = l->addr, end = l->addr + l->size;
        while (bi < nb && (blocks[bi].device < l->device || (blocks[bi].device == l->device && blocks[bi].addr < at))) {
            cmh_count_lost(1); /* a block outside every segment we know */
            bi++;
        }
        for (; bi < nb && blocks[bi].device == l->device && blocks[bi].addr < end && rc == CMH_OK; bi++) {
            const cmh_live *x = &blocks[bi];
            if (x->addr > at) rc = add_block(s, at, x->addr - at, 0, 0, CMH_BLOCK_INACTIVE, 0);
            uint64_t sz = x->addr + x->size > end ? end - x->addr : x->size;
            if (rc == CMH_OK)
                rc = add_block(s, x->addr, sz, x->requested, x->stack ? stack_map(x->stack, arg) : 0, x->flags,
                               cmh_ticks_to_ns(x->ticks, now_ticks, now_ns));
            at = x->addr + sz;
        }
        if (at < end && rc == CMH_OK) rc = add_block(s, at, end - at, 0, 0, CMH_BLOCK_INACTIVE, 0);
    }
    return rc;
}

/* The live segments (driver allocations and VMM maps, merged), and the blocks allocators
 * reported, each sorted by device and address. */
static int collect_live(cmh_live **all_, size_t *nl_, cmh_live **blocks, size_t *nb)
{
    size_t nl = 0, nv = 0;
    cmh_live *all = NULL, *maps = NULL;
    *blocks = NULL;
    *nb = 0;
    int rc = cmh_hist_collect_segments(&all, &nl);
    if (rc == CMH_OK) rc = cmh_vmm_collect(&maps, &nv);
    if (rc == CMH_OK && nv) {
        cmh_live *both = realloc(all, (nl + nv) * sizeof *both);
        if (!both) rc = CMH_ENOMEM;
        else {
            memcpy(both + nl, maps, nv * sizeof *maps);
            all = both;
            nl += nv;
            qsort(all, nl, sizeof *all, cmp_live);
        }
    }
    free(maps);
    if (rc == CMH_OK) rc = cmh_blocks_collect(blocks, nb);
    *all_ = all;
    *nl_ = nl;
    return rc;
}

/* The live tables and every ring's view at one point (cmh_hist_hold): the state a snapshot
 * holds is the one its trace ends at, and cmh_export_seq[] names that point.  A flight
 * checkpoint is read as its state followed by the journal's entries past cmh_export_seq[]: a
 * table copied before the rings' ends (once, one after the other) held segments whose frees
 * were before the cut, so a reader of the journal never saw them freed (`exporter` showed
 * 767589120 bytes allocated beside all 6000000 entries of a program that had freed everything);
 * one copied after them, segments whose allocations it skipped.  Called between
 * cmh_hist_views_begin and _end; nothing here records or symbolizes. */
static int collect_at_one_point(cmh_live **all, size_t *nl, cmh_live **blocks, size_t *nb, ring_views *rv, int *rc_view)
{
    memset(rv, 0, sizeof *rv);
    *rc_view = CMH_OK;
    cmh_hist_hold();
    int rc = collect_live(all, nl, blocks, nb);
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        int r = CMH_OK;
        cmh_export_seq[i] = 0;
        rv->taken[i] = cmh_hist_view_ring(i, &rv->v[i], &rv->dropped[i], &cmh_export_seq[i], &rv->ooms[i], &r);
        if (r != CMH_OK && *rc_view == CMH_OK) *rc_view = r;
    }
    cmh_hist_unhold();
    return rc;
}

static void release_views(ring_views *rv)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++)
        if (rv->taken[i]) cmh_hist_view_release(&rv->v[i]);
}

typedef struct thread_out {
    cmh_snapshot *s;
    int rc;
} thread_out;

static void thread_to_model(void *arg, uint32_t thread, int64_t tid, const char *name)
{
    thread_out *o = arg;
    cmh_thread_info t = {thread, tid, 0};
    if (o->rc == CMH_OK && (cmh_strtab_intern(&o->s->strings, name, strlen(name), &t.name) || cmh_snapshot_add_thread(o->s, &t)))
        o->rc = CMH_ENOMEM;
}

/* The threads' ids and names, for readers to say which thread a number is. */
static int export_threads(cmh_snapshot *s)
{
    thread_out o = {s, CMH_OK};
    cmh_hist_threads_each(thread_to_model, &o);
    return o.rc;
}

int cmh_export_state(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg)
{
    int64_t now_ticks = cmh_now_ticks(), now_ns = cmh_now_ns();
    size_t nl = 0, nb = 0;
    cmh_live *all = NULL, *blocks = NULL;
    ring_views *rv = malloc(sizeof *rv);
    if (!rv) return CMH_ENOMEM;
    int rcv;
    cmh_hist_views_begin();
    int rc = collect_at_one_point(&all, &nl, &blocks, &nb, rv, &rcv);
    if (rc == CMH_OK) rc = rcv;
    if (rc == CMH_OK) rc = export_rings(s, rv, all, nl, stack_map, arg, now_ticks, now_ns);
    release_views(rv);
    cmh_hist_views_end();
    free(rv);
    if (rc == CMH_OK) rc = export_segments(s, all, nl, blocks, nb, stack_map, arg, now_ticks, now_ns);
    if (rc == CMH_OK) rc = cmh_marks_export(s, now_ticks, now_ns);
    if (rc == CMH_OK) rc = cmh_drverr_export(s, stack_map, arg, now_ticks, now_ns); /* (the entries' times: drverr.c) */
    if (rc == CMH_OK) rc = export_threads(s);
    free(all);
    free(blocks);
    return rc;
}

/* ---- the streamed export: a dump that writes the rings' entries straight into the file ---- */

struct cmh_export_stream {
    cmh_snapshot *s;
    uint32_t (*stack_map)(uint32_t, void *);
    void *arg;
    int64_t now_ticks, now_ns;
    uint32_t ntraces;
    struct {
        cmh_ring_view v;
        cmh_oatab fixed; /* as in export_rings */
        int64_t last;    /* the time clamp, as entries are asked in order */
        int device;
        uint64_t dropped, ooms;
    } t[CMH_MAX_DEVICES + 1];
};

static void stream_entry(void *arg, uint32_t trace, uint64_t k, cmh_entry_full *out)
{
    cmh_export_stream *x = arg;
    if (!k) x->t[trace].last = INT64_MIN;
    /* every stack and name was interned by the first pass: these are lookups now */
    cmh_rec_entry r = {0};
    cmh_view_get(&x->t[trace].v, k, &r); /* never lost: the first pass saw every entry */
    convert(x->s, &r, k, &x->t[trace].fixed, &x->t[trace].last, x->stack_map, x->arg,
            x->now_ticks, x->now_ns, out);
}

static uint32_t stream_thread(void *arg, uint32_t trace, uint64_t k)
{
    cmh_export_stream *x = arg;
    return cmh_view_thread(&x->t[trace].v, k);
}

void cmh_export_stream_source(cmh_export_stream *x, cmh_entry_source *src)
{
    src->arg = x;
    src->entry = stream_entry;
    src->thread = stream_thread;
}

void cmh_export_stream_end(cmh_export_stream *x)
{
    if (!x) return;
    for (uint32_t i = 0; i < x->ntraces; i++) {
        cmh_hist_view_release(&x->t[i].v);
        cmh_oa_free(&x->t[i].fixed);
    }
    cmh_hist_views_end();
    free(x);
}

int cmh_export_state_stream(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg, cmh_export_stream **out)
{
    *out = NULL;
    cmh_export_stream *x = calloc(1, sizeof *x);
    if (!x) return CMH_ENOMEM;
    x->s = s;
    x->stack_map = stack_map;
    x->arg = arg;
    x->now_ticks = cmh_now_ticks();
    x->now_ns = cmh_now_ns();
    size_t nl = 0, nb = 0;
    cmh_live *all = NULL, *blocks = NULL;
    ring_views *rv = malloc(sizeof *rv);
    if (!rv) return free(x), CMH_ENOMEM;
    int rcv, lost = 0;
    cmh_hist_views_begin(); /* ended by cmh_export_stream_end, when the writer is done with the views */
    int rc = collect_at_one_point(&all, &nl, &blocks, &nb, rv, &rcv);
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) { /* every view the stream's from now (released at its end) */
        if (!rv->taken[i]) continue;
        x->t[x->ntraces].v = rv->v[i];
        x->t[x->ntraces].device = i == CMH_HOST_SLOT ? -1 : i;
        x->t[x->ntraces].dropped = rv->dropped[i];
        x->t[x->ntraces].ooms = rv->ooms[i];
        cmh_oa_init(&x->t[x->ntraces].fixed, sizeof(uint64_t));
        x->ntraces++;
    }
    free(rv);
    if (rc == CMH_OK) rc = rcv;
    for (uint32_t j = 0; j < x->ntraces && rc == CMH_OK && !lost; j++) {
        cmh_ring_view *v = &x->t[j].v;
        int device = x->t[j].device;
        if (v->n > UINT32_MAX) rc = CMH_ENOMEM;
        if (rc == CMH_OK) rc = cmh_snapshot_add_trace(s, device, x->t[j].dropped, NULL);
        /* the first pass: what the entries name goes into the model before the writer starts,
         * and the frees fix_managed wants counted */
        uint64_t kept_ooms = 0, frees = 0;
        for (uint64_t k = 0; k < v->n && rc == CMH_OK && !lost; k++) {
            cmh_rec_entry e;
            const cmh_rec_entry *r = &e;
            if (!cmh_view_get(v, k, &e)) {
                lost = 1;
                break;
            }
            kept_ooms += r->action == CMH_ACT_OOM;
            frees += managed_free(r);
            if (r->stack) stack_map(r->stack, arg);
            if (r->action == CMH_ACT_MARK) {
                uint32_t id;
                rc = cmh_marks_intern(s, (uint32_t)r->addr, &id);
            }
        }
        if (rc == CMH_OK && !lost) rc = fix_managed(v, &x->t[j].fixed, all, nl, device, frees);
        if (rc == CMH_OK) s->traces[s->ntraces - 1].nentries = (uint32_t)v->n; /* entries: in the rings */
        if (rc == CMH_OK && x->t[j].ooms > kept_ooms) s->traces[s->ntraces - 1].dropped_ooms = x->t[j].ooms - kept_ooms;
    }
    if (rc == CMH_OK && !lost) rc = export_segments(s, all, nl, blocks, nb, stack_map, arg, x->now_ticks, x->now_ns);
    if (rc == CMH_OK && !lost) rc = cmh_marks_export(s, x->now_ticks, x->now_ns);
    if (rc == CMH_OK && !lost) rc = cmh_drverr_export(s, stack_map, arg, x->now_ticks, x->now_ns);
    if (rc == CMH_OK && !lost) rc = export_threads(s);
    free(all);
    free(blocks);
    if (rc != CMH_OK || lost) {
        cmh_export_stream_end(x);
        return rc != CMH_OK ? rc : 1;
    }
    *out = x;
    return CMH_OK;
}
