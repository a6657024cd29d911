/*
 * vmm_handles.c - the record's cuMemCreate handles one by one, each with its state at the end
 * (cumemhist/analyzer.h, cmh_vmm_handle_rows).
 *
 * The record has two tables of them and neither says it whole: vmm_maps names each map's handle
 * (a number the recorder gave it), vmm_unmapped lists the handles held and mapped nowhere at the
 * end, by their device, size, cuMemCreate stack and time but with no number (the recorder
 * numbers only the handles it saw mapped).  Whether a mapped handle is still mapped at the end
 * is the trace's to say (physmap.c, beside a replay); whether one mapped nowhere is still held
 * is vmm_unmapped's: the held row made as that handle was.  It was worked out inside the SQLite
 * export (vmm_handles); here it is a fact every writer can ask for.
 */
#include <stdlib.h>

#include "cumemhist/analyzer.h"

typedef struct hkey {
    int32_t device;
    uint64_t handle;
} hkey;

typedef struct hset { /* handles (device, number) */
    hkey *v;
    uint32_t n, cap;
    int nomem;
} hset;

static void hset_add(hset *h, int32_t device, uint64_t handle)
{
    if (h->n == h->cap) {
        uint32_t nc = h->cap ? h->cap * 2 : 16;
        hkey *nv = realloc(h->v, nc * sizeof *nv);
        if (!nv) {
            h->nomem = 1;
            return;
        }
        h->v = nv, h->cap = nc;
    }
    h->v[h->n++] = (hkey){device, handle};
}

static int cmp_hkey(const void *x, const void *y)
{
    const hkey *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return (a->handle > b->handle) - (a->handle < b->handle);
}

static int hset_has(const hset *h, int32_t device, uint64_t handle)
{
    hkey k = {device, handle};
    return h->n && bsearch(&k, h->v, h->n, sizeof *h->v, cmp_hkey) != NULL;
}

static void on_mapped(void *arg, const cmh_vmm_map *row, uint64_t bytes)
{
    (void)bytes;
    hset_add(arg, row->device, row->handle);
}

/* The handles mapped somewhere at the end of the device's trace, as owners and peak count them
 * (physmap.c: the trace's maps and unmaps, each map's handle by its row), into h. */
static int mapped_at_end(const cmh_snapshot *s, int32_t device, hset *h)
{
    cmh_physmap *p = cmh_physmap_new(s, device);
    if (!p) return CMH_ENOMEM;
    cmh_replay *r = cmh_physmap_has_rows(p) ? cmh_replay_new(s, device) : NULL;
    int rc = cmh_physmap_has_rows(p) && !r ? CMH_ENOMEM : CMH_OK;
    while (r && cmh_replay_step(r)) {
        const cmh_entry *e = cmh_replay_entry(r, cmh_replay_position(r));
        if (!e) break; /* (the reconciliation after the last entry: no map nor unmap) */
        cmh_physmap_step(p, e);
    }
    if (r && (rc = cmh_replay_status(r)) == CMH_OK) rc = cmh_physmap_status(p);
    cmh_physmap_reset(p);
    if (rc == CMH_OK) cmh_physmap_remainders(p, on_mapped, h); /* (reset: every handle mapped now) */
    cmh_replay_free(r);
    cmh_physmap_free(p);
    return rc == CMH_OK && h->nomem ? CMH_ENOMEM : rc;
}

/* a map row or a held row by what it says of its handle, for sorting */
typedef struct hrow {
    int32_t device;
    uint64_t handle, size;
    uint32_t stack;
    int64_t time_ns;
    uint32_t i; /* its index in its table */
} hrow;

static int cmp_by_handle(const void *x, const void *y) /* device, handle, then the order made */
{
    const hrow *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    if (a->handle != b->handle) return a->handle < b->handle ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int cmp_by_make(const void *x, const void *y) /* device, size, stack, time: the handle as made */
{
    const hrow *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    if (a->stack != b->stack) return a->stack < b->stack ? -1 : 1;
    if (a->time_ns != b->time_ns) return a->time_ns < b->time_ns ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}
const char *cmh_vmm_handle_state_name(int state)
{
    return state == CMH_VMMH_MAPPED ? "mapped" : state == CMH_VMMH_UNMAPPED ? "unmapped" : "released";
}

static int add_row(cmh_vmm_handle_row **v, uint32_t *n, uint32_t *cap, const cmh_vmm_handle_row *r)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 16;
        cmh_vmm_handle_row *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return CMH_ENOMEM;
        *v = nv, *cap = nc;
    }
    (*v)[(*n)++] = *r;
    return CMH_OK;
}

int cmh_vmm_handle_rows(const cmh_snapshot *s, cmh_vmm_handle_row **out, uint32_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (!s->nvmm_maps && !s->nvmm_unmapped) return CMH_OK;
    int rc = CMH_OK;
    cmh_vmm_handle_row *rows = NULL;
    uint32_t nrows = 0, cap = 0;
    hrow *maps = calloc(s->nvmm_maps + 1, sizeof *maps), *held = calloc(s->nvmm_unmapped + 1, sizeof *held);
    uint8_t *taken = calloc(s->nvmm_unmapped + 1, 1); /* a held row that is a mapped handle's */
    hset mapped = {0};
    if (!maps || !held || !taken) rc = CMH_ENOMEM;
    for (uint32_t i = 0; rc == CMH_OK && i < s->nvmm_maps; i++) {
        const cmh_vmm_map *m = &s->vmm_maps[i];
        maps[i] = (hrow){m->device, m->handle, m->handle_size, m->handle_stack, m->handle_time_ns, i};
    }
    for (uint32_t i = 0; rc == CMH_OK && i < s->nvmm_unmapped; i++) {
        const cmh_vmm_handle *h = &s->vmm_unmapped[i];
        held[i] = (hrow){h->device, 0, h->size, h->stack, h->time_ns, i};
    }
    if (rc == CMH_OK) {
        qsort(maps, s->nvmm_maps, sizeof *maps, cmp_by_handle);
        qsort(held, s->nvmm_unmapped, sizeof *held, cmp_by_make);
    }
    for (uint32_t i = 0; rc == CMH_OK && i < s->nvmm_maps; i++) /* each device's maps: one replay */
        if (!i || maps[i].device != maps[i - 1].device) rc = mapped_at_end(s, maps[i].device, &mapped);
    if (rc == CMH_OK && mapped.n) qsort(mapped.v, mapped.n, sizeof *mapped.v, cmp_hkey);
    for (uint32_t i = 0, k; rc == CMH_OK && i < s->nvmm_maps; i = k) {
        const hrow *m = &maps[i]; /* the handle's first map */
        for (k = i + 1; k < s->nvmm_maps && maps[k].device == m->device && maps[k].handle == m->handle;) k++;
        int state = CMH_VMMH_RELEASED;
        if (hset_has(&mapped, m->device, m->handle)) state = CMH_VMMH_MAPPED;
        else { /* held and mapped nowhere at the end: the held row made as this handle was (its
                * device, size and cuMemCreate stack; of several, the one made nearest its time:
                * the two tables stamp a handle's creation apart, by a few hundred ns) */
            hrow key = *m;
            key.time_ns = INT64_MIN, key.i = 0;
            uint32_t lo = 0, hi = s->nvmm_unmapped, best = UINT32_MAX;
            while (lo < hi) {
                uint32_t mid = (lo + hi) / 2;
                if (cmp_by_make(&held[mid], &key) < 0) lo = mid + 1;
                else hi = mid;
            }
            for (; lo < s->nvmm_unmapped && held[lo].device == m->device && held[lo].size == m->size && held[lo].stack == m->stack; lo++)
                if (!taken[lo] && (best == UINT32_MAX || llabs(held[lo].time_ns - m->time_ns) < llabs(held[best].time_ns - m->time_ns)))
                    best = lo;
            if (best != UINT32_MAX) {
                taken[best] = 1;
                state = CMH_VMMH_UNMAPPED;
            }
        }
        cmh_vmm_handle_row r = {m->device, 1, m->handle, m->size, m->stack, m->time_ns, k - i, (uint8_t)state};
        rc = add_row(&rows, &nrows, &cap, &r);
    }
    for (uint32_t j = 0; rc == CMH_OK && j < s->nvmm_unmapped; j++) { /* held, never mapped */
        if (taken[j]) continue;
        const hrow *h = &held[j];
        cmh_vmm_handle_row r = {h->device, 0, 0, h->size, h->stack, h->time_ns, 0, CMH_VMMH_UNMAPPED};
        rc = add_row(&rows, &nrows, &cap, &r);
    }
    free(maps);
    free(held);
    free(taken);
    free(mapped.v);
    if (rc == CMH_OK && mapped.nomem) rc = CMH_ENOMEM;
    if (rc != CMH_OK) {
        free(rows);
        return rc;
    }
    *out = rows;
    *nout = nrows;
    return CMH_OK;
}
