/*
 * physmap.c - device memory as the driver charges it where cuMemCreate handles are mapped
 * (cumemhist/analyzer.h, cmh_physmap).
 *
 * A VMM map's segment_map entry says an address range; the driver charges the memory of the
 * handle it maps, all of it, once: from cuMemCreate until the handle is released and unmapped
 * everywhere.  One handle mapped at two addresses is one handle's memory (the ranges' sum counted
 * it twice: 16 MiB of an 8 MiB handle), and a handle mapped in part is charged whole (a 32 MiB
 * handle with 4 MiB mapped is 32 MiB in use).  The record's vmm_maps table names each map's
 * handle; this walks a device's trace entry by entry beside the replay, keeping which handle
 * every mapped range holds, and says how far the handles' sizes are from the bytes mapped:
 * physical = reserved + cmh_physmap_adjust() + cmh_physmap_held() (below).  A map without a
 * row (a record before the table, a map of a handle made unseen, entries the ring dropped before
 * the first kept one) counts by its range, as before.  Managed memory's live ranges are kept
 * here too (cmh_physmap_managed): the driver counts it as used only where its pages are on the
 * device.
 *
 * A handle held and mapped nowhere is charged too, and no range shows it.  The record says which
 * handles were so held at its end (vmm_unmapped) but not when each stopped being mapped, nor, for
 * those it saw mapped, which map rows are theirs (the table has no handle number): each held row
 * is matched here, once, to a handle the maps name and the trace leaves mapped nowhere at the
 * end (the same device, size and cuMemCreate stack, the nearest making time: the two tables stamp
 * one cuMemCreate apart by a few hundred ns).  A held handle is then in use and mapped nowhere
 * from its last unmap on (one the maps name), or from its making (one never mapped), at every
 * moment, not at the end alone: counted only at the end, an earlier moment put it in its
 * cuMemGetInfo sample's 'not recorded', and the physical peak left it out (cmh_physmap_held).
 * A handle made and not mapped yet is in use and mapped nowhere too (the driver charges it from
 * cuMemCreate): its maps' rows say when it was made, and it counts from then until its first map
 * is stepped, in the same figure (cmh_physmap_held: owners' row, the physical peak).  Left out of
 * it, the physical peak missed a handle made before a cuMemAlloc and mapped after (64 MiB made,
 * 16 MiB allocated: the driver said 80, the peak 64).
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "oatab.h"

typedef struct prange {
    uint64_t addr, size;
    const cmh_vmm_map *row; /* NULL: a map without a row (counted by its range) */
} prange;

/* a table of ranges kept by address (the live maps, the managed allocations) */
typedef struct rtab {
    prange *v;
    uint32_t n, cap;
} rtab;

typedef struct phandle {
    uint64_t handle; /* key: the record's handle number */
    uint64_t mapped; /* bytes of ranges that map it now */
    uint64_t taken;  /* cmh_physmap_take's count since the last reset */
    const cmh_vmm_map *row;
    uint32_t held; /* 1 + its index in cmh_physmap.held: held and mapped nowhere at the end (0: not) */
    uint32_t rel;  /* 1 + its index in cmh_physmap.rels: released during the record (0: not) */
} phandle;

/* a cuMemRelease of the device (vmm_released): the handle is in use until then, mapped or not */
typedef struct rel {
    const cmh_vmm_release *r;
    uint8_t mapped_ever; /* the maps name it (else never mapped: in use from its making) */
    uint8_t off_map;     /* mapped once, mapped nowhere now (its ranges stepped) */
    uint8_t on;          /* counted in rel_bytes now */
} rel;

/* a handle held and mapped nowhere at the record's end (a vmm_unmapped row of the device) */
typedef struct held {
    const cmh_vmm_handle *h;
    uint64_t handle;   /* the maps' number of it (0: never mapped, as far as the maps say) */
    int64_t first_map; /* its first map row's time (handle != 0) */
    uint8_t on;        /* counted in held_bytes now */
} held;

struct cmh_physmap {
    const cmh_snapshot *s;
    int device;
    const cmh_vmm_map **rows; /* the device's rows by (addr, size, time) */
    uint32_t nrows;
    rtab live;          /* mapped ranges, disjoint */
    rtab managed;       /* managed allocations live now */
    rtab final_managed; /* the final segments' managed ones (allocated before the first kept entry) */
    cmh_oatab handles; /* of phandle */
    /* each handle once (its earliest map's row), with the time of that map: the handles held
     * before they were first mapped (held_advance: made and not mapped yet) */
    struct first_map {
        const cmh_vmm_map *row;
        int64_t mapped_ns;
        uint8_t yet; /* 1: counted in yet_bytes (made, not mapped yet); 2: mapped since */
    } *firsts;            /* by handle */
    uint32_t nfirsts;
    struct made_ix {
        int64_t made_ns;
        uint32_t first;
    } *by_made;           /* firsts' indexes by making time */
    uint32_t yet_next;    /* the first of by_made not made yet, by now_ns */
    uint64_t yet_bytes;   /* of the handles made and not mapped yet now */
    uint32_t yet_count;
    int64_t kept_from_ns; /* where the ring dropped entries: its first kept entry's time (else INT64_MIN) */
    int64_t adjust;
    held *held;               /* by making time */
    uint32_t nheld, held_next; /* held_next: the first never-mapped one not made yet, by now_ns */
    uint64_t held_bytes;      /* of those held and mapped nowhere now */
    uint32_t held_count;
    int64_t now_ns;
    rel *rels;          /* by handle number */
    uint32_t nrels;
    rel **rel_made, **rel_gone; /* rels by making time, by release time */
    uint32_t rel_made_next, rel_gone_next; /* the first of each not reached yet, by now_ns */
    uint64_t rel_bytes; /* of the released handles in use and mapped nowhere now */
    uint32_t rel_count;
    int nomem;
};

static int cmp_row(const void *x, const void *y)
{
    const cmh_vmm_map *a = *(const cmh_vmm_map *const *)x, *b = *(const cmh_vmm_map *const *)y;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return (a->time_ns > b->time_ns) - (a->time_ns < b->time_ns);
}

static int rt_put(rtab *t, uint32_t i, prange r);

static int cmp_range(const void *x, const void *y)
{
    const prange *a = x, *b = y;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

static int cmp_handle_time(const void *x, const void *y)
{
    const cmh_vmm_map *a = *(const cmh_vmm_map *const *)x, *b = *(const cmh_vmm_map *const *)y;
    if (a->handle != b->handle) return a->handle < b->handle ? -1 : 1;
    return (a->time_ns > b->time_ns) - (a->time_ns < b->time_ns);
}

static int cmp_made(const void *x, const void *y)
{
    const struct made_ix *a = x, *b = y;
    return (a->made_ns > b->made_ns) - (a->made_ns < b->made_ns);
}

/* p->firsts from p->rows: one per handle whose making time is known */
static int firsts_make(cmh_physmap *p)
{
    const cmh_vmm_map **by = malloc(p->nrows * sizeof *by);
    if (!by || !(p->firsts = malloc(p->nrows * sizeof *p->firsts))) {
        free(by);
        return -1;
    }
    memcpy(by, p->rows, p->nrows * sizeof *by);
    qsort(by, p->nrows, sizeof *by, cmp_handle_time);
    for (uint32_t i = 0; i < p->nrows; i++)
        if ((!i || by[i - 1]->handle != by[i]->handle) && by[i]->handle_time_ns)
            p->firsts[p->nfirsts++] = (struct first_map){by[i], by[i]->time_ns, 0};
    free(by);
    if (p->nfirsts && !(p->by_made = malloc(p->nfirsts * sizeof *p->by_made))) return -1;
    for (uint32_t i = 0; i < p->nfirsts; i++) p->by_made[i] = (struct made_ix){p->firsts[i].row->handle_time_ns, i};
    qsort(p->by_made, p->nfirsts, sizeof *p->by_made, cmp_made);
    return 0;
}

static int held_make(cmh_physmap *p);
static int map_kept(const cmh_physmap *p, int64_t mapped_ns);

static int cmp_rel(const void *x, const void *y)
{
    const rel *a = x, *b = y;
    return (a->r->handle > b->r->handle) - (a->r->handle < b->r->handle);
}

static int cmp_rel_made(const void *x, const void *y)
{
    int64_t a = (*(rel *const *)x)->r->time_ns, b = (*(rel *const *)y)->r->time_ns;
    return (a > b) - (a < b);
}

static int cmp_rel_gone(const void *x, const void *y)
{
    int64_t a = (*(rel *const *)x)->r->release_ns, b = (*(rel *const *)y)->r->release_ns;
    return (a > b) - (a < b);
}

/* p->rels: the device's releases, each marked whether the maps name its handle */
static int rels_make(cmh_physmap *p)
{
    const cmh_snapshot *s = p->s;
    for (uint32_t i = 0; i < s->nvmm_released; i++) p->nrels += s->vmm_released[i].device == p->device;
    if (!p->nrels) return 0;
    if (!(p->rels = calloc(p->nrels, sizeof *p->rels))) return -1;
    for (uint32_t i = 0, n = 0; i < s->nvmm_released; i++)
        if (s->vmm_released[i].device == p->device) p->rels[n++].r = &s->vmm_released[i];
    qsort(p->rels, p->nrels, sizeof *p->rels, cmp_rel);
    for (uint32_t k = 0; k < p->nrels; k++) { /* (firsts: each handle once, by number) */
        uint32_t lo = 0, hi = p->nfirsts;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (p->firsts[mid].row->handle < p->rels[k].r->handle) lo = mid + 1;
            else hi = mid;
        }
        p->rels[k].mapped_ever = lo < p->nfirsts && p->firsts[lo].row->handle == p->rels[k].r->handle;
    }
    if (!(p->rel_made = malloc(p->nrels * sizeof *p->rel_made)) || !(p->rel_gone = malloc(p->nrels * sizeof *p->rel_gone))) return -1;
    for (uint32_t k = 0; k < p->nrels; k++) p->rel_made[k] = p->rel_gone[k] = &p->rels[k];
    qsort(p->rel_made, p->nrels, sizeof *p->rel_made, cmp_rel_made);
    qsort(p->rel_gone, p->nrels, sizeof *p->rel_gone, cmp_rel_gone);
    return 0;
}

static void rel_set(cmh_physmap *p, rel *x, int on)
{
    if (x->on == on) return;
    x->on = (uint8_t)on;
    p->rel_bytes += on ? x->r->size : -x->r->size;
    p->rel_count += on ? 1u : -1u;
}

/* the releases' states at t (later than the last asked): a handle never mapped is in use from its
 * making to its release; one mapped, from its last unmap to its release (handle_add: a release
 * while mapped, its memory goes at the last unmap) */
static void rels_at(cmh_physmap *p, int64_t t)
{
    for (; p->rel_made_next < p->nrels && p->rel_made[p->rel_made_next]->r->time_ns <= t; p->rel_made_next++) {
        rel *x = p->rel_made[p->rel_made_next];
        if (!x->mapped_ever && t < x->r->release_ns) rel_set(p, x, 1);
    }
    for (; p->rel_gone_next < p->nrels && p->rel_gone[p->rel_gone_next]->r->release_ns <= t; p->rel_gone_next++)
        rel_set(p, p->rel_gone[p->rel_gone_next], 0);
}

static cmh_physmap *make(const cmh_snapshot *s, int device, int with_held)
{
    cmh_physmap *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->s = s;
    p->device = device;
    cmh_oa_init(&p->handles, sizeof(phandle));
    for (uint32_t i = 0; i < s->nvmm_maps; i++) p->nrows += s->vmm_maps[i].device == device;
    if (p->nrows) {
        p->rows = malloc(p->nrows * sizeof *p->rows);
        if (!p->rows) {
            free(p);
            return NULL;
        }
        uint32_t n = 0;
        for (uint32_t i = 0; i < s->nvmm_maps; i++)
            if (s->vmm_maps[i].device == device) p->rows[n++] = &s->vmm_maps[i];
        qsort(p->rows, p->nrows, sizeof *p->rows, cmp_row);
        if (firsts_make(p)) {
            cmh_physmap_free(p);
            return NULL;
        }
    }
    p->kept_from_ns = INT64_MIN;
    for (uint32_t i = 0; i < s->ntraces; i++)
        if (s->traces[i].device == device && s->traces[i].dropped)
            p->kept_from_ns = s->traces[i].nentries ? cmh_entry_time(s, &s->entries[s->traces[i].first_entry]) : INT64_MAX;
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].device == device && s->segments[i].kind == CMH_KIND_MANAGED &&
            rt_put(&p->final_managed, p->final_managed.n, (prange){s->segments[i].addr, s->segments[i].size, NULL})) {
            cmh_physmap_free(p);
            return NULL;
        }
    if (p->final_managed.n > 1) qsort(p->final_managed.v, p->final_managed.n, sizeof *p->final_managed.v, cmp_range);
    p->now_ns = INT64_MIN;
    if (rels_make(p)) {
        cmh_physmap_free(p);
        return NULL;
    }
    if (with_held && held_make(p)) {
        cmh_physmap_free(p);
        return NULL;
    }
    return p;
}

cmh_physmap *cmh_physmap_new(const cmh_snapshot *s, int device) { return make(s, device, 1); }

void cmh_physmap_free(cmh_physmap *p)
{
    if (!p) return;
    free(p->rows);
    free(p->firsts);
    free(p->by_made);
    free(p->live.v);
    free(p->managed.v);
    free(p->final_managed.v);
    free(p->held);
    free(p->rels);
    free(p->rel_made);
    free(p->rel_gone);
    cmh_oa_free(&p->handles);
    free(p);
}

int cmh_physmap_has_rows(const cmh_physmap *p) { return p && p->nrows; }

/* the handle's share of adjust: its size less the bytes mapped, while any is */
static int64_t share(const phandle *h) { return h->mapped ? (int64_t)h->row->handle_size - (int64_t)h->mapped : 0; }

static void held_set(cmh_physmap *p, uint32_t k, int on)
{
    held *x = &p->held[k];
    if (x->on == on) return;
    x->on = (uint8_t)on;
    p->held_bytes += on ? x->h->size : -x->h->size;
    p->held_count += on ? 1u : -1u;
}

/* the handles never mapped made by t (one whose making time is not known: from the start) */
static void held_advance(cmh_physmap *p, int64_t t)
{
    if (t <= p->now_ns) return;
    p->now_ns = t;
    if (p->nrels) rels_at(p, t);
    for (; p->held_next < p->nheld && p->held[p->held_next].h->time_ns <= t; p->held_next++)
        if (!p->held[p->held_next].handle) held_set(p, p->held_next, 1);
    /* the end: every one, by the record's own word (a map of one whose entry was never stepped) */
    for (uint32_t k = 0; t == INT64_MAX && k < p->nheld; k++) held_set(p, k, 1);
    /* made by t and not mapped yet: no map of it stepped (the entries, not the rows' times, say
     * when: a pickle keeps the entries' times to the microsecond, the rows' to the nanosecond),
     * where its first map is among the kept entries (one the ring dropped is never stepped) */
    for (; p->yet_next < p->nfirsts && p->by_made[p->yet_next].made_ns <= t; p->yet_next++) {
        struct first_map *f = &p->firsts[p->by_made[p->yet_next].first];
        if (f->yet || !map_kept(p, f->mapped_ns) || cmh_oa_find(&p->handles, f->row->handle)) continue;
        f->yet = 1;
        p->yet_bytes += f->row->handle_size;
        p->yet_count++;
    }
}

/* handle mapped for the first time: no longer made and not mapped yet */
static void yet_mapped(cmh_physmap *p, uint64_t handle)
{
    uint32_t lo = 0, hi = p->nfirsts;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p->firsts[mid].row->handle < handle) lo = mid + 1;
        else hi = mid;
    }
    if (lo == p->nfirsts || p->firsts[lo].row->handle != handle) return;
    struct first_map *f = &p->firsts[lo];
    if (f->yet == 1) {
        p->yet_bytes -= f->row->handle_size;
        p->yet_count--;
    }
    f->yet = 2;
}

static void handle_add(cmh_physmap *p, const cmh_vmm_map *row, int64_t delta)
{
    if (!row) return;
    int fresh;
    phandle *h = cmh_oa_get(&p->handles, row->handle, &fresh);
    if (!h) {
        p->nomem = 1;
        return;
    }
    if (fresh) {
        h->row = row;
        for (uint32_t k = 0; k < p->nheld && !h->held; k++)
            if (p->held[k].handle == row->handle) h->held = k + 1;
        if (p->nrels) { /* its release, if the record saw one */
            rel key = {&(cmh_vmm_release){.handle = row->handle}, 0, 0, 0};
            rel *x = bsearch(&key, p->rels, p->nrels, sizeof *p->rels, cmp_rel);
            if (x) h->rel = (uint32_t)(x - p->rels) + 1;
        }
        yet_mapped(p, row->handle);
    }
    p->adjust -= share(h);
    if (delta < 0 && (uint64_t)-delta > h->mapped) h->mapped = 0;
    else h->mapped += (uint64_t)delta;
    p->adjust += share(h);
    if (h->held) held_set(p, h->held - 1, !h->mapped); /* held at the end: mapped nowhere now is in use */
    if (h->rel) { /* released later: mapped nowhere now is in use until then */
        rel *x = &p->rels[h->rel - 1];
        x->off_map = !h->mapped;
        rel_set(p, x, !h->mapped && p->now_ns < x->r->release_ns);
    }
}

/* The row of the map at addr, size whose time is nearest t (entries and rows are stamped alike). */
static const cmh_vmm_map *row_of(const cmh_physmap *p, uint64_t addr, uint64_t size, int64_t t)
{
    uint32_t lo = 0, hi = p->nrows;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        const cmh_vmm_map *m = p->rows[mid];
        if (m->addr < addr || (m->addr == addr && m->size < size)) lo = mid + 1;
        else hi = mid;
    }
    const cmh_vmm_map *best = NULL;
    for (uint32_t i = lo; i < p->nrows && p->rows[i]->addr == addr && p->rows[i]->size == size; i++) {
        int64_t d = p->rows[i]->time_ns - t, bd = best ? best->time_ns - t : 0;
        if (!best || (d < 0 ? -d : d) < (bd < 0 ? -bd : bd)) best = p->rows[i];
    }
    return best;
}

static uint32_t rt_lower(const rtab *t, uint64_t addr) /* first range whose end > addr */
{
    uint32_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (t->v[mid].addr + t->v[mid].size <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int rt_in(const rtab *t, uint64_t addr)
{
    uint32_t i = rt_lower(t, addr);
    return i < t->n && t->v[i].addr <= addr;
}

/* the first range from i on that begins at or past end */
static uint32_t rt_past(const rtab *t, uint32_t i, uint64_t end)
{
    while (i < t->n && t->v[i].addr < end) i++;
    return i;
}

static void rt_cut(rtab *t, uint32_t i, uint32_t k) /* drops ranges i..k-1 */
{
    if (k <= i) return; /* (nothing to drop: the table may not be made yet, no memmove from NULL) */
    memmove(&t->v[i], &t->v[k], (t->n - k) * sizeof *t->v);
    t->n -= k - i;
}

static int rt_put(rtab *t, uint32_t i, prange r) /* puts r before range i; -1: no memory */
{
    if (t->n == t->cap) {
        uint32_t nc = t->cap ? t->cap * 2 : 16;
        prange *nv = realloc(t->v, nc * sizeof *nv);
        if (!nv) return -1;
        t->v = nv;
        t->cap = nc;
    }
    memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
    t->v[i] = r;
    t->n++;
    return 0;
}

static void live_insert(cmh_physmap *p, prange r)
{
    uint32_t i = rt_lower(&p->live, r.addr), k = rt_past(&p->live, i, r.addr + r.size);
    /* (a map never seen unmapped gives way) */
    for (uint32_t j = i; j < k; j++) handle_add(p, p->live.v[j].row, -(int64_t)p->live.v[j].size);
    rt_cut(&p->live, i, k);
    if (rt_put(&p->live, i, r)) {
        p->nomem = 1;
        return;
    }
    handle_add(p, r.row, (int64_t)r.size);
}

static void live_remove(cmh_physmap *p, uint64_t lo, uint64_t hi)
{
    uint32_t i = rt_lower(&p->live, lo);
    while (i < p->live.n && p->live.v[i].addr < hi) {
        prange m = p->live.v[i];
        uint64_t a = m.addr > lo ? m.addr : lo, b = m.addr + m.size < hi ? m.addr + m.size : hi;
        rt_cut(&p->live, i, i + 1);
        handle_add(p, m.row, -(int64_t)(b - a));
        /* the parts left of and right of the unmapped range stay: their bytes are still the handle's */
        if (m.addr < a && rt_put(&p->live, i++, (prange){m.addr, a - m.addr, m.row})) {
            p->nomem = 1;
            return;
        }
        if (m.addr + m.size > b && rt_put(&p->live, i++, (prange){b, m.addr + m.size - b, m.row})) {
            p->nomem = 1;
            return;
        }
    }
}

void cmh_physmap_step(cmh_physmap *p, const cmh_entry *e)
{
    const cmh_snapshot *s = p->s;
    uint64_t addr = cmh_entry_addr(s, e), size = cmh_entry_size(s, e);
    held_advance(p, cmh_entry_time(s, e));
    if (e->kind == CMH_KIND_VMM && e->action == CMH_ACT_SEGMENT_MAP && size)
        live_insert(p, (prange){addr, size, row_of(p, addr, size, cmh_entry_time(s, e))});
    else if (e->kind == CMH_KIND_VMM && e->action == CMH_ACT_SEGMENT_UNMAP && size)
        live_remove(p, addr, addr + size);
    else if (e->kind == CMH_KIND_MANAGED && e->action == CMH_ACT_SEGMENT_ALLOC && size) {
        uint32_t i = rt_lower(&p->managed, addr);
        rt_cut(&p->managed, i, rt_past(&p->managed, i, addr + size)); /* (a free never seen: gone) */
        if (rt_put(&p->managed, i, (prange){addr, size, NULL})) p->nomem = 1;
    } else if (e->kind == CMH_KIND_MANAGED && e->action == CMH_ACT_SEGMENT_FREE) {
        uint32_t i = rt_lower(&p->managed, addr);
        if (i < p->managed.n && p->managed.v[i].addr == addr) rt_cut(&p->managed, i, i + 1);
    }
}

int64_t cmh_physmap_adjust(const cmh_physmap *p) { return p ? p->adjust : 0; }

uint64_t cmh_physmap_held(cmh_physmap *p, int64_t t_ns, uint32_t *count)
{
    if (p) held_advance(p, t_ns);
    if (count) *count = p ? p->held_count + p->yet_count + p->rel_count : 0;
    return p ? p->held_bytes + p->yet_bytes + p->rel_bytes : 0;
}

uint64_t cmh_physmap_held_handle(const cmh_physmap *p, const cmh_vmm_handle *h)
{
    for (uint32_t k = 0; p && k < p->nheld; k++)
        if (p->held[k].h == h) return p->held[k].handle;
    return 0;
}

static int cmp_held_made(const void *x, const void *y)
{
    const held *a = x, *b = y;
    return (a->h->time_ns > b->h->time_ns) - (a->h->time_ns < b->h->time_ns);
}

static int64_t dist(int64_t a, int64_t b) { return a > b ? a - b : b - a; }

/* A row is stamped a moment before its segment_map entry: a map that long before the first kept
 * entry may still be that entry's */
#define ROW_EARLY_NS 1000000ll

/* a map at mapped_ns is among the kept entries (one the ring dropped is never stepped) */
static int map_kept(const cmh_physmap *p, int64_t mapped_ns)
{
    return mapped_ns >= p->kept_from_ns || (uint64_t)p->kept_from_ns - (uint64_t)mapped_ns <= ROW_EARLY_NS;
}

/* p->held: the device's handles held and mapped nowhere at the end, each matched to the handle the
 * maps name that it is, if any (the file's header says how), by making time.  The one pairing of
 * the two tables: vmm_handles.c asks it (cmh_physmap_held_handle). */
static int held_make(cmh_physmap *p)
{
    const cmh_snapshot *s = p->s;
    for (uint32_t i = 0; i < s->nvmm_unmapped; i++) p->nheld += s->vmm_unmapped[i].device == p->device;
    if (!p->nheld) return 0;
    if (!(p->held = calloc(p->nheld, sizeof *p->held))) return -1;
    for (uint32_t i = 0, n = 0; i < s->nvmm_unmapped; i++)
        if (s->vmm_unmapped[i].device == p->device) p->held[n++].h = &s->vmm_unmapped[i];
    const cmh_trace *tr = NULL;
    for (uint32_t i = 0; i < s->ntraces && !tr; i++)
        if (s->traces[i].device == p->device) tr = &s->traces[i];
    if (p->nrows) {
        /* the handles the maps name that the trace leaves mapped nowhere: its maps walked to the end */
        cmh_physmap *w = make(s, p->device, 0);
        const cmh_vmm_map **by = malloc(p->nrows * sizeof *by);
        if (!w || !by) {
            cmh_physmap_free(w);
            free(by);
            return -1;
        }
        for (uint64_t i = 0; tr && i < tr->nentries; i++) cmh_physmap_step(w, &s->entries[tr->first_entry + i]);
        memcpy(by, p->rows, p->nrows * sizeof *by);
        qsort(by, p->nrows, sizeof *by, cmp_handle_time);
        for (uint32_t i = 0; i < p->nrows && !w->nomem; i++) {
            const cmh_vmm_map *m = by[i]; /* the handle's first map */
            if (i && by[i - 1]->handle == m->handle) continue;
            const phandle *h = cmh_oa_find(&w->handles, m->handle);
            if (h && h->mapped) continue;
            held *best = NULL; /* the held row made as it was, nearest its time, not taken */
            for (uint32_t k = 0; k < p->nheld; k++) {
                held *x = &p->held[k];
                if (!x->handle && x->h->size == m->handle_size && x->h->stack == m->handle_stack &&
                    (!best || dist(x->h->time_ns, m->handle_time_ns) < dist(best->h->time_ns, m->handle_time_ns)))
                    best = x;
            }
            if (best) {
                best->handle = m->handle;
                best->first_map = m->time_ns;
            }
        }
        int nomem = w->nomem;
        cmh_physmap_free(w);
        free(by);
        if (nomem) return -1;
    }
    qsort(p->held, p->nheld, sizeof *p->held, cmp_held_made);
    for (uint32_t k = 0; k < p->nheld; k++)
        /* a map before the ring's first kept entry was dropped with it: one of a held handle made
         * it in use and mapped nowhere from before the kept entries (its unmap, if kept, finds no
         * range); one kept and not stepped yet is counted made and not mapped yet (held_advance) */
        if (p->held[k].handle && !map_kept(p, p->held[k].first_map)) held_set(p, k, 1);
    return 0;
}

int cmh_physmap_status(const cmh_physmap *p) { return p && p->nomem ? CMH_ENOMEM : CMH_OK; }

const cmh_vmm_map *cmh_physmap_find(const cmh_physmap *p, uint64_t addr)
{
    if (!p) return NULL;
    uint32_t i = rt_lower(&p->live, addr);
    return i < p->live.n && p->live.v[i].addr <= addr ? p->live.v[i].row : NULL;
}

int cmh_physmap_managed(const cmh_physmap *p, uint64_t addr)
{
    /* (allocated before the first kept entry: the final segments know its kind) */
    return p && (rt_in(&p->managed, addr) || rt_in(&p->final_managed, addr));
}

void cmh_physmap_reset(cmh_physmap *p)
{
    for (uint32_t i = 0; p && i < p->handles.cap; i++) {
        phandle *h = cmh_oa_at(&p->handles, i);
        if (h->handle) h->taken = 0;
    }
}

uint64_t cmh_physmap_take(cmh_physmap *p, const cmh_vmm_map *row, uint64_t bytes)
{
    phandle *h = cmh_oa_find(&p->handles, row->handle);
    if (!h || !h->mapped) return bytes;
    uint64_t left = h->row->handle_size > h->taken ? h->row->handle_size - h->taken : 0;
    if (bytes > left) bytes = left;
    h->taken += bytes;
    return bytes;
}

void cmh_physmap_remainders(const cmh_physmap *p, void (*fn)(void *, const cmh_vmm_map *, uint64_t), void *arg)
{
    for (uint32_t i = 0; p && i < p->handles.cap; i++) {
        const phandle *h = cmh_oa_at(&p->handles, i);
        if (h->handle && h->mapped && h->taken < h->row->handle_size) fn(arg, h->row, h->row->handle_size - h->taken);
    }
}

/* The peak, and the physical bytes after entry want (-1: none asked) into *at_want. */
static int physical_walk(const cmh_snapshot *s, int device, cmh_physical_peak *out, int64_t want, int64_t *at_want);

int cmh_physical_peak_compute(const cmh_snapshot *s, int device, cmh_physical_peak *out)
{
    return physical_walk(s, device, out, -1, NULL);
}

int cmh_physical_peak_at(const cmh_snapshot *s, int device, int64_t index, cmh_physical_peak *out, int64_t *at_index)
{
    *at_index = -1;
    return physical_walk(s, device, out, index, at_index);
}

static int physical_walk(const cmh_snapshot *s, int device, cmh_physical_peak *out, int64_t want, int64_t *at_want)
{
    memset(out, 0, sizeof *out);
    out->index = -1;
    cmh_physmap *p = cmh_physmap_new(s, device);
    if (!p) return CMH_ENOMEM;
    if (!cmh_physmap_has_rows(p) && !p->nheld && !p->nrels) {
        cmh_physmap_free(p);
        return CMH_OK;
    }
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) {
        cmh_physmap_free(p);
        return CMH_ENOMEM;
    }
    int64_t n = cmh_replay_length(r);
    out->peak = -1;
    while (cmh_replay_step(r)) {
        int64_t pos = cmh_replay_position(r);
        const cmh_entry *e = cmh_replay_entry(r, pos);
        if (!e) break;
        cmh_physmap_step(p, e);
        int64_t adj = cmh_physmap_adjust(p) + (int64_t)cmh_physmap_held(p, cmh_entry_time(s, e), NULL);
        int64_t phys = cmh_replay_stats(r)->reserved_bytes[CMH_POOL_ALL].current + adj;
        if (adj) out->known = 1;
        if (pos == want) *at_want = phys;
        if (phys > out->peak) {
            out->peak = phys;
            out->index = pos;
            out->time_ns = cmh_entry_time(s, e);
        }
    }
    /* the end: the final segments (the reconciliation), as peak's own end */
    int64_t end_adj = cmh_physmap_adjust(p) + (int64_t)cmh_physmap_held(p, INT64_MAX, NULL); /* (every held handle made by then) */
    if (end_adj) out->known = 1;
    out->at_end = cmh_replay_stats(r)->reserved_bytes[CMH_POOL_ALL].current + end_adj;
    if (out->at_end > out->peak) {
        out->peak = out->at_end;
        out->index = n;
        out->time_ns = s->dump_time_ns;
    }
    if (out->peak < 0) out->peak = 0;
    int rc = cmh_replay_status(r) != CMH_OK ? cmh_replay_status(r) : cmh_physmap_status(p);
    cmh_replay_free(r);
    cmh_physmap_free(p);
    return rc;
}
