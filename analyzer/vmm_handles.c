/*
 * vmm_handles.c - the record's cuMemCreate handles one by one, each with its state at the end
 * (cumemhist/analyzer.h, cmh_vmm_handle_rows).
 *
 * The record has two tables of them and neither says it whole: vmm_maps names each map's handle
 * (a number the recorder gave it), vmm_unmapped lists the handles held and mapped nowhere at the
 * end, by their device, size, cuMemCreate stack and time but with no number (the recorder
 * numbers only the handles it saw mapped).  Whether a mapped handle is still mapped at the end
 * is the trace's to say (physmap.c, beside a replay); whether one mapped nowhere is still held
 * is vmm_unmapped's: the held row made as that handle was, as the physmap pairs them for owners
 * and the physical peak (cmh_physmap_held_handle), so that 'unmapped' here is exactly the handles
 * owners counts as held.  vmm_released says when each handle released while recorded went, by
 * its number, mapped or not: a handle made and released without a map is only there.  It was
 * worked out inside the SQLite export (vmm_handles); here it is a fact every writer can ask for.
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

/* a map row by what it says of its handle, for sorting */
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

/* Each held row's handle in the maps (as[j] for vmm_unmapped[j]; 0: never mapped), as the
 * physmap paired them, and those handles into kept: each device's physmap once. */
static int held_handles(const cmh_snapshot *s, uint64_t *as, hset *kept)
{
    for (uint32_t j = 0; j < s->nvmm_unmapped; j++) {
        int32_t dev = s->vmm_unmapped[j].device;
        uint32_t first = 0;
        while (s->vmm_unmapped[first].device != dev) first++;
        if (first < j) continue; /* (the device's physmap answered at its first row) */
        cmh_physmap *p = cmh_physmap_new(s, dev);
        if (!p) return CMH_ENOMEM;
        for (uint32_t k = j; k < s->nvmm_unmapped; k++)
            if (s->vmm_unmapped[k].device == dev && (as[k] = cmh_physmap_held_handle(p, &s->vmm_unmapped[k])))
                hset_add(kept, dev, as[k]);
        cmh_physmap_free(p);
    }
    if (kept->n) qsort(kept->v, kept->n, sizeof *kept->v, cmp_hkey);
    return kept->nomem ? CMH_ENOMEM : CMH_OK;
}

/* The release of handle (device, number) in rels (sorted by cmp_by_handle; the last, were there
 * two), NULL: none */
static const hrow *release_of(const hrow *rels, uint32_t n, int32_t device, uint64_t handle)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) { /* the first row past (device, handle) */
        uint32_t mid = lo + (hi - lo) / 2;
        if (rels[mid].device < device || (rels[mid].device == device && rels[mid].handle <= handle)) lo = mid + 1;
        else hi = mid;
    }
    return lo && rels[lo - 1].device == device && rels[lo - 1].handle == handle ? &rels[lo - 1] : NULL;
}

static int cmp_row(const void *x, const void *y) /* device, then handle number */
{
    const cmh_vmm_handle_row *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return (a->handle > b->handle) - (a->handle < b->handle);
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
    if (!s->nvmm_maps && !s->nvmm_unmapped && !s->nvmm_released) return CMH_OK;
    int rc = CMH_OK;
    cmh_vmm_handle_row *rows = NULL;
    uint32_t nrows = 0, cap = 0;
    hrow *maps = calloc(s->nvmm_maps + 1, sizeof *maps);
    uint64_t *as = calloc(s->nvmm_unmapped + 1, sizeof *as); /* each held row's handle in the maps (0: never mapped) */
    hrow *rels = calloc(s->nvmm_released + 1, sizeof *rels); /* the releases, by handle */
    hset mapped = {0}, kept = {0}; /* mapped somewhere at the end; held and mapped nowhere then */
    if (!maps || !as || !rels) rc = CMH_ENOMEM;
    for (uint32_t i = 0; rc == CMH_OK && i < s->nvmm_released; i++) {
        const cmh_vmm_release *v = &s->vmm_released[i];
        rels[i] = (hrow){v->device, v->handle, v->size, v->stack, v->time_ns, i};
    }
    if (rc == CMH_OK) qsort(rels, s->nvmm_released, sizeof *rels, cmp_by_handle);
    for (uint32_t i = 0; rc == CMH_OK && i < s->nvmm_maps; i++) {
        const cmh_vmm_map *m = &s->vmm_maps[i];
        maps[i] = (hrow){m->device, m->handle, m->handle_size, m->handle_stack, m->handle_time_ns, i};
    }
    if (rc == CMH_OK) qsort(maps, s->nvmm_maps, sizeof *maps, cmp_by_handle);
    for (uint32_t i = 0; rc == CMH_OK && i < s->nvmm_maps; i++) /* each device's maps: one replay */
        if (!i || maps[i].device != maps[i - 1].device) rc = mapped_at_end(s, maps[i].device, &mapped);
    if (rc == CMH_OK && mapped.n) qsort(mapped.v, mapped.n, sizeof *mapped.v, cmp_hkey);
    if (rc == CMH_OK) rc = held_handles(s, as, &kept);
    for (uint32_t i = 0, k; rc == CMH_OK && i < s->nvmm_maps; i = k) {
        const hrow *m = &maps[i]; /* the handle's first map */
        for (k = i + 1; k < s->nvmm_maps && maps[k].device == m->device && maps[k].handle == m->handle;) k++;
        int state = hset_has(&mapped, m->device, m->handle) ? CMH_VMMH_MAPPED
                    : hset_has(&kept, m->device, m->handle) ? CMH_VMMH_UNMAPPED /* held and mapped nowhere at the end */
                                                            : CMH_VMMH_RELEASED;
        const hrow *v = release_of(rels, s->nvmm_released, m->device, m->handle);
        cmh_vmm_handle_row r = {m->device, 1, m->handle, m->size, m->stack, m->time_ns, k - i, (uint8_t)state,
                                v ? s->vmm_released[v->i].release_ns : 0};
        rc = add_row(&rows, &nrows, &cap, &r);
    }
    /* made and released with no map: in no other table (each handle's last release, as above) */
    uint32_t nmapped = nrows;
    for (uint32_t i = 0; rc == CMH_OK && i < s->nvmm_released; i++) {
        const hrow *v = &rels[i];
        if (i + 1 < s->nvmm_released && rels[i + 1].device == v->device && rels[i + 1].handle == v->handle) continue;
        uint32_t lo = 0, hi = s->nvmm_maps; /* the handle's maps, if any */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (maps[mid].device < v->device || (maps[mid].device == v->device && maps[mid].handle < v->handle)) lo = mid + 1;
            else hi = mid;
        }
        if (lo < s->nvmm_maps && maps[lo].device == v->device && maps[lo].handle == v->handle) continue;
        cmh_vmm_handle_row r = {v->device, 1, v->handle, v->size, v->stack, v->time_ns, 0, CMH_VMMH_RELEASED,
                                s->vmm_released[v->i].release_ns};
        rc = add_row(&rows, &nrows, &cap, &r);
    }
    if (rc == CMH_OK && nrows > nmapped) qsort(rows, nrows, sizeof *rows, cmp_row); /* (numbered, each once: a total order) */
    for (uint32_t j = 0; rc == CMH_OK && j < s->nvmm_unmapped; j++) { /* held, never mapped */
        if (as[j]) continue;
        const cmh_vmm_handle *h = &s->vmm_unmapped[j];
        cmh_vmm_handle_row r = {h->device, 0, 0, h->size, h->stack, h->time_ns, 0, CMH_VMMH_UNMAPPED, 0};
        rc = add_row(&rows, &nrows, &cap, &r);
    }
    free(maps);
    free(rels);
    free(as);
    free(mapped.v);
    free(kept.v);
    if (rc == CMH_OK && (mapped.nomem || kept.nomem)) rc = CMH_ENOMEM;
    if (rc != CMH_OK) {
        free(rows);
        return rc;
    }
    *out = rows;
    *nout = nrows;
    return CMH_OK;
}
