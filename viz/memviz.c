/*
 * memviz.c - any snapshot in the shape PyTorch's memory_viz page expects.
 *
 * The viewer replays the trace backwards from the final segments (docs/PYTORCH.md, What memory_viz requires), so the export
 * keeps three invariants: blocks tile their segment; every live block lies in a live segment at
 * every point of the trace; and the trace agrees with the final segments.  A recorder segment
 * with no allocator above it is one block covering it, so its history is spelled the way
 * PyTorch would: segment_alloc then alloc; free_requested, free_completed, then segment_free
 * (map/unmap alike).  Marks have no PyTorch action and become START/END external annotations
 * of zero length.
 *
 * What PyTorch's schema has no room for travels in keys its readers ignore (pickle_side_write.c):
 * the kind and whole-block flag of segments and their entries, the requested size, which
 * entries are implied, the recording thread of each entry and the module of each frame, so
 * that pickle_read.c gives back the recorder's own model and every report (a leak's verdict
 * judged per thread, a block's owner) reads the pickle as it reads the record.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "cumemhist/viz.h"
#include "oatab.h"

/* in's stack as out's: map_frames and map_stacks remember what was copied (id + 1, 0 = not yet) */
static int copy_stack(const cmh_snapshot *in, cmh_snapshot *out, uint32_t stack, uint32_t *map_frames, uint32_t *map_stacks,
                      uint32_t *id)
{
    if (!stack || stack >= in->nstacks) {
        *id = 0;
        return CMH_OK;
    }
    if (map_stacks[stack]) {
        *id = map_stacks[stack] - 1;
        return CMH_OK;
    }
    const cmh_stack *st = &in->stacks[stack];
    /* every frame: a PyTorch pickle's C++ stacks run past 256 (263 in a LLaMA fine-tune), and the
     * user's line may be among the outer ones */
    uint32_t n = st->count;
    uint32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return CMH_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = in->stack_frames[st->first + i];
        if (!map_frames[f]) {
            cmh_frame fr = in->frames[f];
            uint32_t nid, extra = cmh_snapshot_extra(in, CMH_X_FRAME, f);
            const char *xt = cmh_str(in, extra);
            if (cmh_strtab_intern(&out->strings, cmh_str(in, fr.name), strlen(cmh_str(in, fr.name)), &fr.name) ||
                cmh_strtab_intern(&out->strings, cmh_str(in, fr.filename), strlen(cmh_str(in, fr.filename)), &fr.filename) ||
                (extra && cmh_strtab_intern(&out->strings, xt, strlen(xt), &extra)) || cmh_snapshot_add_frame(out, &fr, &nid) ||
                cmh_snapshot_add_extra(out, CMH_X_FRAME, nid, extra)) {
                free(ids);
                return CMH_ENOMEM;
            }
            map_frames[f] = nid + 1;
        }
        ids[i] = map_frames[f] - 1;
    }
    int rc = cmh_snapshot_add_stack(out, ids, n, id);
    free(ids);
    if (rc == CMH_OK) map_stacks[stack] = *id + 1;
    return rc;
}

static int str_copy(const cmh_snapshot *in, cmh_snapshot *out, uint32_t id, uint32_t *nid)
{
    const char *t = cmh_str(in, id);
    return cmh_strtab_intern(&out->strings, t, strlen(t), nid);
}

/* The keys PyTorch wrote that the model has no field for (cmh_extra): carried over as they are. */
static int extra_copy(const cmh_snapshot *in, cmh_snapshot *out, int what, uint32_t from, uint32_t to)
{
    uint32_t x = cmh_snapshot_extra(in, what, from);
    if (!x) return CMH_OK;
    int rc = str_copy(in, out, x, &x);
    return rc ? rc : cmh_snapshot_add_extra(out, what, to, x);
}

/* cmh_snapshot_add_entry with the entry's extra keys (a string id of in) */
static int add_entry_x(const cmh_snapshot *in, cmh_snapshot *out, const cmh_entry_full *e, uint32_t extra)
{
    if (extra && str_copy(in, out, extra, &extra)) return CMH_ENOMEM;
    if (cmh_snapshot_append_entry_extra(out, e, extra) != CMH_OK) return CMH_ENOMEM;
    out->traces[out->ntraces - 1].nentries++;
    return CMH_OK;
}

/* ---- making a trace agree with the final segments ---- */

/* address -> int64 (oatab.h; address 0 is never a key here) */
typedef struct aslot {
    uint64_t addr;
    int64_t v;
} aslot;
typedef cmh_oatab amap;
#define AMAP_INIT {NULL, 0, 0, sizeof(aslot)}

static int64_t *amap_slot(amap *m, uint64_t key, int create)
{
    if (!key) return NULL;
    aslot *sl = create ? cmh_oa_get(m, key, NULL) : cmh_oa_find(m, key);
    return sl ? &sl->v : NULL;
}

static void amap_free(amap *m) { cmh_oa_free(m); }

typedef struct fix {
    uint32_t before; /* insert before this entry index (n = at the end) */
    uint32_t seq;    /* the order fixes at one place keep (free_requested before free_completed) */
    cmh_entry_full e;
} fix;

static int cmp_fix(const void *a, const void *b)
{
    const fix *x = a, *y = b;
    if (x->before != y->before) return x->before < y->before ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The viewer replays backwards from the final segments.  Walking the same way, an alloc whose
 * block is gone (or a segment_alloc whose segment is gone) means its free was never recorded (an
 * edited file, a lost entry, or a PyTorch snapshot whose segments were taken after the trace's
 * last entry freed them): the free is put back just before the next alloc at that address, or at
 * the end, marked implied (the page needs it, the reports must not see it).  Blocks are keyed by address; value = index of the next alloc there + 1 when
 * the block is live (0 = live with no later alloc), absent when not live. */
static int repair(cmh_snapshot *s, uint32_t t, uint64_t *repaired)
{
    cmh_trace *tr = &s->traces[t];
    const cmh_entry *e0 = s->entries + tr->first_entry;
    uint32_t n = tr->nentries;
    amap live = AMAP_INIT, nextb = AMAP_INIT, segs = AMAP_INIT, nexts = AMAP_INIT;
    fix *fx = NULL;
    size_t nfx = 0, cfx = 0;
    int rc = CMH_OK;
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->device != tr->device) continue;
        int64_t *v = amap_slot(&segs, g->addr, 1);
        if (!v) goto oom;
        *v = 1;
        for (uint32_t k = 0; k < g->nblocks; k++)
            if (s->blocks[g->first_block + k].state != CMH_BLOCK_INACTIVE) {
                if (!(v = amap_slot(&live, s->blocks[g->first_block + k].addr, 1))) goto oom;
                *v = 1;
            }
    }
    for (int64_t i = (int64_t)n - 1; i >= 0; i--) {
        const cmh_entry *e = &e0[i];
        int blockwise = e->action == CMH_ACT_ALLOC, segwise = e->action == CMH_ACT_SEGMENT_ALLOC;
        amap *lm = blockwise ? &live : &segs, *nm = blockwise ? &nextb : &nexts;
        if (blockwise || segwise) {
            int64_t *v = amap_slot(lm, cmh_entry_addr(s, e), 0);
            if (!v || !*v) { /* gone: its free is missing */
                int64_t *nx = amap_slot(nm, cmh_entry_addr(s, e), 0);
                if (nfx == cfx) {
                    size_t nc = cfx ? cfx * 2 : 16;
                    fix *nf = realloc(fx, nc * sizeof *nf);
                    if (!nf) goto oom;
                    fx = nf;
                    cfx = nc;
                }
                uint32_t before = nx && *nx ? (uint32_t)(*nx - 1) : n;
                cmh_entry_full f;
                cmh_entry_get(s, e, &f);
                f.stack = 0;
                /* invented for the page alone: cmh_implied, so that a reader drops it and reads the
                 * snapshot back as it was (its figures, its entry numbers); timed as the entry it
                 * follows, so that time never runs backwards */
                f.flags = CMH_EF_IMPLIED;
                int64_t tb = cmh_entry_time(s, &e0[before - 1]);
                if (tb > f.time_ns) f.time_ns = tb;
                if (blockwise) {
                    f.action = CMH_ACT_FREE_REQUESTED;
                    fx[nfx] = (fix){before, (uint32_t)nfx, f};
                    nfx++;
                    f.action = CMH_ACT_FREE_COMPLETED;
                    if (nfx == cfx) {
                        fix *nf = realloc(fx, (cfx *= 2) * sizeof *nf);
                        if (!nf) goto oom;
                        fx = nf;
                    }
                    fx[nfx] = (fix){before, (uint32_t)nfx, f};
                    nfx++;
                } else {
                    f.action = CMH_ACT_SEGMENT_FREE;
                    fx[nfx] = (fix){before, (uint32_t)nfx, f};
                    nfx++;
                }
                (*repaired)++;
            }
            if (v) *v = 0; /* undone: not live before this entry */
            int64_t *nx = amap_slot(nm, cmh_entry_addr(s, e), 1);
            if (!nx) goto oom;
            *nx = i + 1;
        } else if (e->action == CMH_ACT_FREE_COMPLETED || e->action == CMH_ACT_SEGMENT_FREE) {
            int64_t *v = amap_slot(e->action == CMH_ACT_FREE_COMPLETED ? &live : &segs, cmh_entry_addr(s, e), 1);
            if (!v) goto oom;
            *v = 1;
        }
    }
    if (nfx) {
        /* rebuild this trace's entries with the fixes in place (at one position, in the order found) */
        qsort(fx, nfx, sizeof *fx, cmp_fix);
        /* this trace's entries move to the end of the entry table */
        uint32_t from = tr->first_entry, first = s->nentries;
        size_t k = 0, f = 0;
        for (uint32_t i = 0; i <= n; i++) {
            for (; f < nfx && fx[f].before == i; k++)
                if (cmh_snapshot_append_entry(s, &fx[f++].e) != CMH_OK) goto oom;
            if (i < n) {
                cmh_entry_full c; /* read before the table may move */
                cmh_entry_get(s, &s->entries[from + i], &c);
                uint32_t extra = cmh_entry_extra(s, &s->entries[from + i]);
                if (cmh_snapshot_append_entry_extra(s, &c, extra) != CMH_OK) goto oom;
                k++;
            }
        }
        tr = &s->traces[t];
        tr->first_entry = first;
        tr->nentries = (uint32_t)k;
    }
    goto out;
oom:
    rc = CMH_ENOMEM;
out:
    free(fx);
    amap_free(&live);
    amap_free(&nextb);
    amap_free(&segs);
    amap_free(&nexts);
    return rc;
}

/* A range's start is also a mark entry in the trace (a checkpoint for the reports); the viewer
 * sees it once, as the range's START annotation, not a second time as a point. */
typedef struct ann_key {
    int64_t t;
    uint32_t name;
    int32_t device;
} ann_key;

static int cmp_ann(const void *a, const void *b)
{
    const ann_key *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->name != y->name) return x->name < y->name ? -1 : 1;
    return (x->device > y->device) - (x->device < y->device);
}

/* The whole-block maps live at a point of a trace, by address, each as its implied alloc entry
 * (addr, size: its range).  A map unmapped in part keeps its remainders mapped (the recorder's
 * model, and the driver's): memory_viz knows a block by its address alone, so the part's implied
 * free is the whole block's, at its address, and each remainder an implied alloc of its own.
 * Freeing the part's address alone freed the whole block in the viewer, and the next part's
 * free, of an address it never saw allocated, drew that part live from the trace's start. */
typedef struct wmaps {
    cmh_entry_full *v;
    uint32_t n, cap;
} wmaps;

static uint32_t wm_lower(const wmaps *m, uint64_t addr) /* the first whose end is past addr */
{
    uint32_t lo = 0, hi = m->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (m->v[mid].addr + m->v[mid].size <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int wm_put(wmaps *m, const cmh_entry_full *e)
{
    uint32_t i = wm_lower(m, e->addr);
    if (i < m->n && m->v[i].addr == e->addr) { /* a map over a live one: the trace lost its unmap */
        m->v[i] = *e;
        return CMH_OK;
    }
    if (m->n == m->cap) {
        uint32_t nc = m->cap ? m->cap * 2 : 16;
        cmh_entry_full *nv = realloc(m->v, nc * sizeof *nv);
        if (!nv) return CMH_ENOMEM;
        m->v = nv;
        m->cap = nc;
    }
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i] = *e;
    m->n++;
    return CMH_OK;
}

/* A whole-block unmap of [lo, hi): the map holding it (its index), or m->n where none does. */
static uint32_t wm_holding(const wmaps *m, uint64_t lo, uint64_t hi)
{
    uint32_t i = wm_lower(m, lo);
    return i < m->n && m->v[i].addr <= lo && hi <= m->v[i].addr + m->v[i].size ? i : m->n;
}

static void wm_del(wmaps *m, uint32_t i)
{
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
    m->n--;
}

/* How many more entries than one memory_viz's trace gets for a record's entry (before the
 * marks and pool samples, which it gets none of, are taken out). */
static unsigned written(const cmh_entry *e)
{
    int a = e->action, whole = (e->flags & CMH_EF_WHOLE_BLOCK) != 0;
    return (whole && (a == CMH_ACT_SEGMENT_ALLOC || a == CMH_ACT_SEGMENT_MAP)) + 2u * (whole && (a == CMH_ACT_SEGMENT_FREE || a == CMH_ACT_SEGMENT_UNMAP));
}

int64_t cmh_memviz_index(const cmh_snapshot *in, int device, int64_t index, int64_t *total)
{
    int64_t n = 0, at = -1;
    for (uint32_t t = 0; t < in->ntraces; t++) {
        const cmh_trace *tr = &in->traces[t];
        if (tr->device != device) continue;
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &in->entries[tr->first_entry + i];
            uint64_t freed;
            if ((e->action != CMH_ACT_MARK || CMH_PT_MARKS_INLINE(in)) && e->action != CMH_ACT_POOL_SAMPLE &&
                !(e->action == CMH_ACT_OOM && cmh_oom_retried(in, tr, i, &freed))) /* (a retried OOM: aside, as PyTorch has none) */
                n += 1 + written(e);
            if ((int64_t)i == index) at = n - 1;
        }
    }
    if (total) *total = n;
    return at;
}

/* MemoryViz.js's annotate_snapshot(), for the entry asked about, over the entries the export
 * writes (cmh_memviz_shape: a whole-block segment's event is two or three of PyTorch's, no pool
 * samples, marks only where they were PyTorch's): device_traces in device order; a
 * free_completed right after a free_requested of the same address is folded into it (one "free"
 * row); each address's version counts its block frees (free_completed) and segment frees
 * (segment_free, segment_unmap) before it, across devices, as the page's two version spaces do. */
int64_t cmh_memviz_page_event(const cmh_snapshot *in, int device, int64_t index, int64_t *page_total, char *label,
                              size_t label_size)
{
    amap blocks = AMAP_INIT, segs = AMAP_INIT;
    int64_t page = -1, n = 0;
    int inline_marks = CMH_PT_MARKS_INLINE(in), ndev = 0;
    if (label && label_size) label[0] = 0;
    for (uint32_t t = 0; t < in->ntraces; t++)
        if (in->traces[t].device >= ndev) ndev = in->traces[t].device + 1;
    for (int d = 0; d < ndev && d <= device; d++) {
        int prev_freq = 0; /* the last row kept is a free_requested (not yet folded) */
        uint64_t prev_addr = 0;
        for (uint32_t t = 0; t < in->ntraces; t++) {
            if (in->traces[t].device != d) continue;
            for (uint32_t i = 0; i < in->traces[t].nentries; i++) {
                const cmh_entry *e = &in->entries[in->traces[t].first_entry + i];
                int a = e->action, whole = (e->flags & CMH_EF_WHOLE_BLOCK) != 0, acts[3], na = 0;
                uint64_t freed;
                if (a == CMH_ACT_POOL_SAMPLE || (a == CMH_ACT_MARK && !inline_marks)) continue;
                if (a == CMH_ACT_OOM && cmh_oom_retried(in, &in->traces[t], i, &freed)) continue; /* aside: no row */
                if (whole && (a == CMH_ACT_SEGMENT_ALLOC || a == CMH_ACT_SEGMENT_MAP))
                    acts[na++] = a, acts[na++] = CMH_ACT_ALLOC;
                else if (whole && (a == CMH_ACT_SEGMENT_FREE || a == CMH_ACT_SEGMENT_UNMAP))
                    acts[na++] = CMH_ACT_FREE_REQUESTED, acts[na++] = CMH_ACT_FREE_COMPLETED, acts[na++] = a;
                else
                    acts[na++] = a;
                uint64_t addr = a < CMH_ACT_OOM ? cmh_entry_addr(in, e) : 0;
                for (int k = 0; k < na; k++) {
                    int w = acts[k];
                    int seg = w == CMH_ACT_SEGMENT_ALLOC || w == CMH_ACT_SEGMENT_FREE || w == CMH_ACT_SEGMENT_MAP ||
                              w == CMH_ACT_SEGMENT_UNMAP;
                    int64_t version = 0, *v = addr ? amap_slot(seg ? &segs : &blocks, addr, 1) : NULL;
                    if (addr && !v) {
                        n = -1;
                        goto out;
                    }
                    if (v) {
                        version = *v;
                        if (w == CMH_ACT_FREE_COMPLETED || w == CMH_ACT_SEGMENT_FREE || w == CMH_ACT_SEGMENT_UNMAP) ++*v;
                    }
                    int folded = w == CMH_ACT_FREE_COMPLETED && prev_freq && prev_addr == addr;
                    if (!folded) n += d == device;
                    prev_freq = !folded && w == CMH_ACT_FREE_REQUESTED, prev_addr = addr;
                    if (d == device && (int64_t)i == index && k == na - 1) { /* the moment after the entry */
                        page = n - 1;
                        if (label && label_size && addr)
                            snprintf(label, label_size, "%s %c%" PRIx64 "_%" PRId64, folded ? "free" : cmh_action_name(w),
                                     seg ? 's' : 'b', addr, version);
                    }
                }
            }
        }
    }
out:
    amap_free(&blocks);
    amap_free(&segs);
    if (page_total) *page_total = n;
    return n < 0 ? -2 : page;
}

uint64_t cmh_host_allocations(const cmh_snapshot *s, uint64_t *live_segments, uint64_t *entries)
{
    /* each allocation its trace made, and each host segment live at the end that the trace did
     * not make (made before it began): an allocation is counted once, however many entries */
    amap made = AMAP_INIT;
    uint64_t n = 0, live = 0, nent = 0;
    int exact = 1;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        if (tr->device >= 0) continue;
        nent += tr->nentries;
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            if (e->action != CMH_ACT_SEGMENT_ALLOC && e->action != CMH_ACT_SEGMENT_MAP) continue;
            n++;
            int64_t *v = amap_slot(&made, cmh_entry_addr(s, e), 1);
            if (v) *v = 1;
            else exact = 0;
        }
    }
    for (uint32_t i = 0; i < s->nsegments; i++) {
        if (s->segments[i].device >= 0) continue;
        live++;
        if (exact && !amap_slot(&made, s->segments[i].addr, 0)) n++; /* (no memory for the set: the trace's alone) */
    }
    amap_free(&made);
    if (live_segments) *live_segments = live;
    if (entries) *entries = nent;
    return n;
}

/* A recorder's stream-ordered pools in the export: each private pool's segments and their entries
 * carry its id (cmh_pool_tags, as SQLite's pool_id says it); the default pool's and any other
 * driver allocation's stay (0, 0), PyTorch's schema having no "none".  It had written (0, 0), the
 * default pool's id, for every segment. */

int cmh_memviz_shape(const cmh_snapshot *in, cmh_snapshot *out, uint64_t *dropped_host)
{
    int rc = cmh_snapshot_init(out);
    if (rc) return rc;
    uint32_t *fmap = calloc((size_t)in->nframes + 1 + in->nstacks, sizeof *fmap), *smap = fmap ? fmap + in->nframes + 1 : NULL;
    if (!fmap) {
        cmh_snapshot_free(out);
        return CMH_ENOMEM;
    }
    ann_key *starts = NULL;
    size_t nstarts = 0;
    if (in->nannotations && !(starts = malloc(in->nannotations * sizeof *starts))) {
        free(fmap);
        cmh_snapshot_free(out);
        return CMH_ENOMEM;
    }
    for (uint32_t i = 0; i < in->nannotations; i++)
        if (in->annotations[i].stage == 0)
            starts[nstarts++] = (ann_key){in->annotations[i].time_ns, in->annotations[i].name, in->annotations[i].device};
    if (nstarts) qsort(starts, nstarts, sizeof *starts, cmp_ann);
    cmh_pool_tags *pt = NULL;
    if ((rc = cmh_pool_tags_new(in, &pt)) != CMH_OK) {
        cmh_pool_tags_free(pt);
        free(starts);
        free(fmap);
        cmh_snapshot_free(out);
        return rc;
    }
    amap made = AMAP_INIT;
    wmaps wm = {NULL, 0, 0};
    out->source = CMH_SRC_PYTORCH;
    out->pt_fields = in->source == CMH_SRC_PYTORCH ? in->pt_fields : CMH_PT_TIME_US | CMH_PT_FROM_RECORDER;
    out->pid = in->pid;
    out->opt_context = in->opt_context; /* whose stacks the frees carry: the pickle says it (pickle_side_write.c) */
#define TRY(x)                                                                                                   \
    do {                                                                                                         \
        if ((rc = (x)) != CMH_OK) goto out;                                                                      \
    } while (0)
    /* owners' figure of what no allocation explains, and the instants it places it by */
    out->start_time_ns = in->start_time_ns;
    out->dump_time_ns = in->dump_time_ns;
    /* the record's clock, whose earliest event may be pinned host memory's, left out here: every
     * "+N" time of the copy counts from the record's origin as the original's do (snapshot.h) */
    out->clock_origin_ns = cmh_snapshot_clock_origin(in);
    for (uint32_t i = 0; i < in->nmeminfo; i++) TRY(cmh_snapshot_add_meminfo(out, &in->meminfo[i]));
    for (uint32_t i = 0; i < in->nidents; i++) TRY(cmh_snapshot_add_ident(out, &in->idents[i]));
    for (uint32_t i = 0; i < in->ndrv_errors; i++) { /* calls the driver refused: the reports over the copy say them too */
        cmh_drv_error e = in->drv_errors[i];
        for (uint32_t j = 0; j < e.nsites && j < CMH_DRV_ERROR_SITES; j++) TRY(copy_stack(in, out, e.sites[j].stack, fmap, smap, &e.sites[j].stack));
        TRY(cmh_snapshot_add_drv_error(out, &e));
    }
    out->history_lost = in->history_lost; /* what a recovery could not read: the reports over the copy say it too */
    /* the physical memory of cuMemCreate handles, which no segment of the pickle says: the handles
     * held and mapped nowhere at the end, and which handle every map mapped (owners and peak
     * charge a handle once, whole: physmap.c); pickle_side_write.c writes them aside */
    for (uint32_t i = 0; i < in->nvmm_unmapped; i++) {
        cmh_vmm_handle h = in->vmm_unmapped[i];
        TRY(copy_stack(in, out, h.stack, fmap, smap, &h.stack));
        TRY(cmh_snapshot_add_vmm_unmapped(out, &h));
    }
    for (uint32_t i = 0; i < in->nvmm_maps; i++) {
        cmh_vmm_map mp = in->vmm_maps[i];
        TRY(copy_stack(in, out, mp.handle_stack, fmap, smap, &mp.handle_stack));
        TRY(cmh_snapshot_add_vmm_map(out, &mp));
    }
    for (uint32_t i = 0; i < in->nvmm_released; i++) {
        cmh_vmm_release rl = in->vmm_released[i];
        TRY(copy_stack(in, out, rl.stack, fmap, smap, &rl.stack));
        TRY(cmh_snapshot_add_vmm_release(out, &rl));
    }
    /* which process of a job, and how it ended: every report's first lines */
    out->rank = in->rank, out->local_rank = in->local_rank, out->world_size = in->world_size;
    out->forked_from = in->forked_from;
    if (in->ending) TRY(str_copy(in, out, in->ending, &out->ending));
    TRY(str_copy(in, out, in->hostname, &out->hostname));
    TRY(str_copy(in, out, in->cmdline, &out->cmdline));
    /* the module map, in its order: frames keep their module index, the owner of a block is read
     * from it (pickle_side_write.c writes it aside) */
    for (uint32_t i = 0; i < in->nmodules; i++) {
        cmh_module md = in->modules[i];
        TRY(str_copy(in, out, md.path, &md.path));
        TRY(str_copy(in, out, md.build_id, &md.build_id));
        TRY(cmh_snapshot_add_module(out, &md));
    }
    for (uint32_t i = 0; i < in->nthreads; i++) {
        cmh_thread_info ti = in->threads[i];
        TRY(str_copy(in, out, ti.name, &ti.name));
        TRY(cmh_snapshot_add_thread(out, &ti));
    }
    for (uint32_t i = 0; i < in->nsegments; i++) {
        const cmh_segment *g = &in->segments[i];
        if (g->device < 0) continue; /* pinned host memory: counted below */
        cmh_segment ng = *g;
        cmh_pool_tags_segment(pt, g, ng.pool_id); /* a private pool's: its id */
        TRY(copy_stack(in, out, g->stack, fmap, smap, &ng.stack));
        TRY(cmh_snapshot_add_segment(out, &ng, NULL));
        TRY(extra_copy(in, out, CMH_X_SEGMENT, i, out->nsegments - 1));
        /* blocks must tile the segment: fill any gap with an inactive block */
        uint64_t at = g->addr;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            cmh_block b = in->blocks[g->first_block + k];
            if (b.addr > at) {
                cmh_block gap = {at, b.addr - at, 0, 0, CMH_BLOCK_INACTIVE, 0};
                TRY(cmh_snapshot_add_block(out, &gap));
            }
            TRY(copy_stack(in, out, b.stack, fmap, smap, &b.stack));
            TRY(cmh_snapshot_add_block(out, &b));
            TRY(extra_copy(in, out, CMH_X_BLOCK, g->first_block + k, out->nblocks - 1));
            at = b.addr + b.size;
        }
        if (at < g->addr + g->size) {
            cmh_block gap = {at, g->addr + g->size - at, 0, 0, CMH_BLOCK_INACTIVE, 0};
            TRY(cmh_snapshot_add_block(out, &gap));
        }
    }
    uint64_t want = 0; /* the entries written, exactly: a whole-block segment's event gains its block's */
    for (uint32_t t = 0; t < in->ntraces; t++)
        for (uint32_t i = 0; in->traces[t].device >= 0 && i < in->traces[t].nentries; i++)
            want += 1 + written(&in->entries[in->traces[t].first_entry + i]);
    if (want <= UINT32_MAX) TRY(cmh_snapshot_reserve_entries(out, (uint32_t)want));
    for (uint32_t t = 0; t < in->ntraces; t++) {
        const cmh_trace *tr = &in->traces[t];
        if (tr->device < 0) continue;
        TRY(cmh_snapshot_add_trace(out, tr->device, tr->dropped, NULL));
        out->traces[out->ntraces - 1].dropped_ooms = tr->dropped_ooms; /* (the pickle carries it beside dropped) */
        /* whole blocks the trace saw allocated: one it did not (the ring dropped its entry, or it was
         * made before recording) is known by its free alone, and where frees carry their own line
         * (context all) memory_viz would take that line for its allocation site (a pre-trace block's
         * free_completed is its element): the implied free_requested / free_completed go frameless, and
         * pickle_write.c writes the segment_free's frames aside (cumemhist.free_frames: the segment
         * timeline's element is a pre-trace segment's segment_free) */
        amap_free(&made);
        made = (amap)AMAP_INIT;
        wm.n = 0;
        int own_free_stacks = cmh_frees_carry_own_stacks(in);
        for (uint32_t i = 0; i < tr->nentries; i++) {
            cmh_entry_full e;
            cmh_entry_get(in, &in->entries[tr->first_entry + i], &e);
            uint32_t extra = cmh_entry_extra(in, &in->entries[tr->first_entry + i]);
            if (pt) TRY(cmh_pool_tags_entry(pt, in, tr, i, e.pool_id)); /* a private pool's segment's entries carry its id, as newer PyTorch's do */
            TRY(copy_stack(in, out, e.stack, fmap, smap, &e.stack));
            if (e.compile_context) TRY(str_copy(in, out, e.compile_context, &e.compile_context));
            if (e.user_metadata) TRY(str_copy(in, out, e.user_metadata, &e.user_metadata));
            if (e.action == CMH_ACT_POOL_SAMPLE) { /* no PyTorch action: pickle_side_write.c keeps it aside */
                TRY(cmh_snapshot_add_entry(out, &e));
                continue;
            }
            if (e.action == CMH_ACT_MARK && CMH_PT_MARKS_INLINE(in)) { /* PyTorch's own: in place */
                TRY(str_copy(in, out, e.name, &e.name));
                TRY(add_entry_x(in, out, &e, extra));
                continue;
            }
            if (e.action == CMH_ACT_MARK) {
                ann_key k = {e.time_ns, e.name, tr->device};
                if (nstarts && bsearch(&k, starts, nstarts, sizeof *starts, cmp_ann)) continue;
                cmh_annotation a = {0, 0, tr->device, e.time_ns};
                TRY(str_copy(in, out, e.name, &a.name));
                TRY(cmh_snapshot_add_annotation(out, &a));
                a.stage = 1;
                TRY(cmh_snapshot_add_annotation(out, &a));
                continue;
            }
            int whole = (e.flags & CMH_EF_WHOLE_BLOCK) != 0;
            cmh_entry_full blk = e;
            blk.size = blk.requested; /* PyTorch's alloc/free entries carry the requested bytes */
            blk.flags = CMH_EF_IMPLIED;
            switch (e.action) {
            case CMH_ACT_SEGMENT_ALLOC:
            case CMH_ACT_SEGMENT_MAP:
                TRY(add_entry_x(in, out, &e, extra));
                if (whole && own_free_stacks) {
                    int64_t *v = amap_slot(&made, e.addr, 1);
                    if (!v && e.addr) TRY(CMH_ENOMEM);
                    if (v) *v = 1;
                }
                if (whole) {
                    blk.action = CMH_ACT_ALLOC;
                    TRY(cmh_snapshot_add_entry(out, &blk));
                    if (e.action == CMH_ACT_SEGMENT_MAP) {
                        cmh_entry_full m = blk;
                        m.size = e.size; /* the range; blk.size, the requested bytes, may differ */
                        TRY(wm_put(&wm, &m));
                    }
                }
                break;
            case CMH_ACT_SEGMENT_UNMAP: {
                uint32_t k = whole ? wm_holding(&wm, e.addr, e.addr + e.size) : wm.n;
                if (k == wm.n) goto freed; /* a map the trace did not see made: by the part's address */
                cmh_entry_full m = wm.v[k];
                wm_del(&wm, k);
                if (m.addr == e.addr && m.size == e.size) goto freed;
                /* in part: the block goes whole, its remainders come back as blocks of their own */
                blk.addr = m.addr;
                blk.size = m.requested;
                blk.action = CMH_ACT_FREE_REQUESTED;
                TRY(cmh_snapshot_add_entry(out, &blk));
                blk.action = CMH_ACT_FREE_COMPLETED;
                TRY(cmh_snapshot_add_entry(out, &blk));
                for (int side = 0; side < 2; side++) {
                    uint64_t a = side ? e.addr + e.size : m.addr, b = side ? m.addr + m.size : e.addr;
                    if (b <= a) continue;
                    cmh_entry_full r = m;
                    r.addr = a;
                    r.size = r.requested = b - a;
                    r.time_ns = e.time_ns;
                    TRY(cmh_snapshot_add_entry(out, &r));
                    TRY(wm_put(&wm, &r));
                    if (own_free_stacks) {
                        int64_t *v = amap_slot(&made, a, 1);
                        if (!v) TRY(CMH_ENOMEM);
                        *v = 1;
                    }
                }
                TRY(add_entry_x(in, out, &e, extra));
                break;
            }
            case CMH_ACT_SEGMENT_FREE:
            freed:
                if (whole && own_free_stacks) {
                    int64_t *v = amap_slot(&made, e.addr, 0);
                    if (!v || !*v) blk.stack = 0; /* no allocation seen: no site, not the free's line */
                    if (v) *v = 0;
                }
                if (whole) {
                    blk.action = CMH_ACT_FREE_REQUESTED;
                    TRY(cmh_snapshot_add_entry(out, &blk));
                    blk.action = CMH_ACT_FREE_COMPLETED;
                    TRY(cmh_snapshot_add_entry(out, &blk));
                }
                TRY(add_entry_x(in, out, &e, extra));
                break;
            case CMH_ACT_OOM: { /* one the allocator retried with success is no 'oom' PyTorch writes: aside */
                uint64_t freed;
                e.flags = (uint8_t)(e.flags & ~CMH_EF_RETRIED);
                if (cmh_oom_retried(in, tr, i, &freed)) e.flags |= CMH_EF_RETRIED;
                TRY(add_entry_x(in, out, &e, extra));
                break;
            }
            default:
                TRY(add_entry_x(in, out, &e, extra));
                break;
            }
        }
    }
    if (in->pt_extra) TRY(str_copy(in, out, in->pt_extra, &out->pt_extra));
    for (uint32_t i = 0; i < in->nannotations; i++) {
        cmh_annotation a = in->annotations[i];
        TRY(str_copy(in, out, a.name, &a.name));
        TRY(cmh_snapshot_add_annotation(out, &a));
    }
    for (uint32_t i = 0; i < in->nsettings; i++)
        TRY(cmh_snapshot_add_setting(out, cmh_str(in, in->settings[i].key), cmh_str(in, in->settings[i].value),
                                     in->settings[i].type));
    for (uint32_t t = 0; t < out->ntraces; t++) {
        uint64_t fixed = 0;
        TRY(repair(out, t, &fixed));
        out->skipped_entries += fixed;
    }
#undef TRY
out:
    free(fmap);
    free(starts);
    cmh_pool_tags_free(pt);
    amap_free(&made);
    free(wm.v);
    if (dropped_host && rc == CMH_OK) *dropped_host = cmh_host_allocations(in, NULL, NULL);
    if (rc != CMH_OK) cmh_snapshot_free(out);
    return rc;
}

/* Nothing cmh_memviz_shape would change in the entries, segments or blocks but the ids of
 * stacks, frames and strings. */
static int shape_is_identity(const cmh_snapshot *in)
{
    if (in->source == CMH_SRC_PYTORCH || in->torch) return 0;
    for (uint32_t i = 0; i < in->nstacks; i++)
    for (uint32_t i = 0; i < in->nsegments; i++) {
        const cmh_segment *g = &in->segments[i];
        if (g->device < 0 || g->stack >= in->nstacks) return 0;
        uint64_t at = g->addr;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &in->blocks[g->first_block + k];
            if (b->addr != at || b->stack >= in->nstacks) return 0;
            at = b->addr + b->size;
        }
        if (at != g->addr + g->size) return 0;
    }
    uint64_t n = 0;
    for (uint32_t t = 0; t < in->ntraces; t++) {
        const cmh_trace *tr = &in->traces[t];
        if (tr->device < 0 || tr->first_entry != n) return 0;
        n += tr->nentries;
    }
    if (n != in->nentries) return 0;
    for (uint32_t i = 0; i < in->nentries; i++) {
        const cmh_entry *e = &in->entries[i];
        if (e->action == CMH_ACT_MARK || (e->flags & CMH_EF_WHOLE_BLOCK) || e->stack >= in->nstacks) return 0;
        /* a private pool's segments get its id (cmh_pool_tags): a copy, not the record as it is */
        if (e->action == CMH_ACT_POOL_SAMPLE && (cmh_entry_stream(in, e) & CMH_POOL_PRIVATE)) return 0;
    }
    return 1;
}

int cmh_memviz_shape_move(cmh_snapshot *in, cmh_snapshot *out, int *moved)
{
    *moved = 0;
    if (!shape_is_identity(in)) return CMH_OK;
    int64_t origin = cmh_snapshot_clock_origin(in); /* (as cmh_memviz_shape keeps it) */
    int rc = cmh_snapshot_init(out);
    if (rc) return rc;
    free(out->strings.str[0]); /* the tables cmh_snapshot_init made, replaced by in's */
    free(out->strings.str);
    free(out->stacks);
    /* what cmh_memviz_shape carries over; the rest stays behind with `in` and goes with it */
#define MOVE(f) (out->f = in->f, memset(&in->f, 0, sizeof in->f))
    MOVE(strings);
    MOVE(frames), MOVE(nframes), MOVE(cap_frames);
    MOVE(stack_frames), MOVE(nstack_frames), MOVE(cap_stack_frames);
    MOVE(stacks), MOVE(nstacks), MOVE(cap_stacks), MOVE(stack_index);
    MOVE(segments), MOVE(nsegments), MOVE(cap_segments);
    MOVE(blocks), MOVE(nblocks), MOVE(cap_blocks);
    MOVE(entries), MOVE(nentries), MOVE(cap_entries);
    MOVE(xsets), MOVE(nxsets), MOVE(cap_xsets), MOVE(xset_index), MOVE(xset_last); /* the entries' rarer fields */
    MOVE(xmap), MOVE(nxmap), MOVE(cap_xmap);
    MOVE(pool_ids), MOVE(npool_ids), MOVE(cap_pool_ids), MOVE(pool_index); /* the pools their sets name */
    MOVE(pairs), MOVE(npairs), MOVE(cap_pairs), MOVE(pair_index), MOVE(pair_last); /* their addresses and sizes */
    MOVE(thighs), MOVE(nthighs), MOVE(cap_thighs), MOVE(thigh_last);                /* and times */
    MOVE(traces), MOVE(ntraces), MOVE(cap_traces);
    MOVE(annotations), MOVE(nannotations), MOVE(cap_annotations);
    MOVE(settings), MOVE(nsettings), MOVE(cap_settings);
    MOVE(modules), MOVE(nmodules), MOVE(cap_modules);
    MOVE(threads), MOVE(nthreads), MOVE(cap_threads);
    MOVE(meminfo), MOVE(nmeminfo), MOVE(cap_meminfo);
    MOVE(idents), MOVE(nidents), MOVE(cap_idents);
    MOVE(drv_errors), MOVE(ndrv_errors), MOVE(cap_drv_errors); /* (their stacks' ids stay: the stacks move too) */
    MOVE(history_lost);
    MOVE(vmm_unmapped), MOVE(nvmm_unmapped), MOVE(cap_vmm_unmapped); /* (the same) */
    MOVE(vmm_maps), MOVE(nvmm_maps), MOVE(cap_vmm_maps);
    MOVE(vmm_released), MOVE(nvmm_released), MOVE(cap_vmm_released);
#undef MOVE
    out->clock_origin_ns = origin;
    out->start_time_ns = in->start_time_ns;
    out->dump_time_ns = in->dump_time_ns;
    out->source = CMH_SRC_PYTORCH;
    out->pt_fields = CMH_PT_TIME_US | CMH_PT_FROM_RECORDER;
    out->pid = in->pid;
    out->opt_context = in->opt_context;
    out->hostname = in->hostname;
    out->cmdline = in->cmdline;
    out->ending = in->ending; /* (a string id: the strings moved) */
    out->rank = in->rank, out->local_rank = in->local_rank, out->world_size = in->world_size;
    out->forked_from = in->forked_from;
    cmh_snapshot_free(in);
    *moved = 1;
    for (uint32_t t = 0; t < out->ntraces; t++) {
        uint64_t fixed = 0;
        if ((rc = repair(out, t, &fixed)) != CMH_OK) {
            cmh_snapshot_free(out);
            return rc;
        }
        out->skipped_entries += fixed;
    }
    return CMH_OK;
}

int cmh_export_memviz(const cmh_snapshot *s, FILE *fp, uint64_t *dropped_host)
{
    return cmh_export_memviz_counted(s, fp, dropped_host, NULL, NULL);
}

int cmh_export_memviz_counted(const cmh_snapshot *s, FILE *fp, uint64_t *dropped_host, uint64_t *written, uint64_t *implied)
{
    cmh_snapshot shaped;
    int rc = cmh_memviz_shape(s, &shaped, dropped_host);
    if (rc != CMH_OK) return rc;
    /* what the file holds: the shaped traces, repairs included (the record's own count said 50
     * of a pickle holding 98) */
    uint64_t nw = cmh_pickle_trace_entries(&shaped, implied);
    if (written) *written = nw;
    /* the marks, aside (memory_viz sees them as annotations): where they were among the entries
     * the pickle's reader keeps, so that it reads the record's own trace back */
    uint32_t nm = 0;
    for (uint32_t i = 0; i < s->nentries && !CMH_PT_MARKS_INLINE(s); i++) nm += s->entries[i].action == CMH_ACT_MARK;
    cmh_pickle_mark *mk = nm ? malloc(nm * sizeof *mk) : NULL;
    if (nm && !mk) rc = CMH_ENOMEM;
    nm = 0;
    for (uint32_t t = 0; rc == CMH_OK && t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        uint64_t pos = 0;
        for (uint32_t i = 0; tr->device >= 0 && rc == CMH_OK && i < tr->nentries; i++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            if (e->action != CMH_ACT_MARK || CMH_PT_MARKS_INLINE(s)) { /* (inline: written in the trace) */
                pos++;
                continue;
            }
            const char *name = cmh_str(s, cmh_entry_name(s, e));
            mk[nm] = (cmh_pickle_mark){tr->device, pos, 0, cmh_entry_thread(s, e), cmh_entry_time(s, e)};
            if (cmh_strtab_intern(&shaped.strings, name, strlen(name), &mk[nm].name)) rc = CMH_ENOMEM;
            nm++;
        }
    }
    if (rc == CMH_OK) rc = cmh_pickle_write_marks(&shaped, mk, nm, fp);
    free(mk);
    cmh_snapshot_free(&shaped);
    return rc;
}
