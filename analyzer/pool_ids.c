/*
 * pool_ids.c - the PyTorch pool id (segment_pool_id, an entry's pool_id) of a recorder's
 * allocations, asked by every writer that names one (the memviz pickle and JSON, SQLite).  A
 * driver allocation is in no allocator's pool; a stream-ordered one from a private pool
 * (cuMemPoolCreate) gets an id of its own, (0, base + N) for "private pool #N" (cmh_pool_descs:
 * the number `oom`, the reports and SQLite's pools.number give it, in order of creation), base the
 * largest MemPool number PyTorch's part already uses (0 without one), so the ids never meet
 * PyTorch's.  The pickle wrote it and SQLite, which computed nothing, wrote NULL for the same
 * segment: one answer, here.
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "oatab.h"

typedef struct pslot {
    uint64_t addr; /* (oatab.h: address 0 is never a key here) */
    int64_t n;     /* private pool number, 0 none */
} pslot;

struct cmh_pool_tags {
    cmh_pool_desc *d;
    uint32_t n;
    uint64_t base;
    cmh_oatab end;  /* addr -> private pool number of the async segment live there at its trace's end */
    cmh_oatab live; /* the same, as cmh_pool_tags_entry walks the traces */
};

static int64_t *slot(cmh_oatab *m, uint64_t key, int create)
{
    if (!key) return NULL;
    pslot *sl = create ? cmh_oa_get(m, key, NULL) : cmh_oa_find(m, key);
    return sl ? &sl->n : NULL;
}

int64_t cmh_pool_sample_after(const cmh_snapshot *s, const cmh_entry *ents, uint32_t n, uint32_t i)
{
    const cmh_entry *a = &ents[i];
    uint32_t th = cmh_entry_thread(s, a);
    uint64_t addr = cmh_entry_addr(s, a);
    for (uint32_t j = i + 1; j < n && j <= i + 64; j++) {
        const cmh_entry *e = &ents[j];
        if (cmh_entry_thread(s, e) != th) continue;
        if (e->action == CMH_ACT_POOL_SAMPLE) return j;
        if (e->action != CMH_ACT_ALLOC || cmh_entry_addr(s, e) != addr) return -1; /* the thread's next call: none said */
    }
    return -1;
}

/* The private pool (its number, 0 none) of the stream-ordered allocation at entry i of trace tr:
 * the pool its sample names (cmh_pool_sample_after). */
static uint32_t alloc_pool(const cmh_snapshot *in, const cmh_pool_tags *pt, const cmh_trace *tr, uint32_t i)
{
    int64_t j = cmh_pool_sample_after(in, in->entries + tr->first_entry, tr->nentries, i);
    if (j < 0) return 0;
    const cmh_entry *e = &in->entries[tr->first_entry + j];
    const cmh_pool_desc *p = cmh_pool_desc_find(pt->d, pt->n, cmh_entry_addr(in, e), cmh_entry_time(in, e));
    return p && p->kind == CMH_POOL_PRIVATE ? p->number : 0;
}

/* *pool (when not NULL) the private pool number of addr after entry i of trace tr, the map updated */
static int pool_step(const cmh_snapshot *in, const cmh_pool_tags *pt, cmh_oatab *live, const cmh_trace *tr, uint32_t i, uint32_t *pool)
{
    const cmh_entry *e = &in->entries[tr->first_entry + i];
    if (pool) *pool = 0;
    if (e->action > CMH_ACT_SEGMENT_UNMAP) return CMH_OK;
    uint64_t addr = cmh_entry_addr(in, e);
    if (e->action == CMH_ACT_SEGMENT_ALLOC || e->action == CMH_ACT_SEGMENT_MAP) { /* (any other kind: no pool's) */
        uint32_t n = e->action == CMH_ACT_SEGMENT_ALLOC && e->kind == CMH_KIND_ASYNC ? alloc_pool(in, pt, tr, i) : 0;
        int64_t *v = slot(live, addr, n != 0);
        if (n && !v) return CMH_ENOMEM;
        if (v) *v = n;
    }
    int64_t *v = slot(live, addr, 0);
    if (pool && v) *pool = (uint32_t)*v;
    if (v && (e->action == CMH_ACT_SEGMENT_FREE || e->action == CMH_ACT_SEGMENT_UNMAP)) *v = 0;
    return CMH_OK;
}

void cmh_pool_tags_free(cmh_pool_tags *pt)
{
    if (!pt) return;
    free(pt->d);
    cmh_oa_free(&pt->end);
    cmh_oa_free(&pt->live);
    free(pt);
}

int cmh_pool_tags_new(const cmh_snapshot *in, cmh_pool_tags **out)
{
    *out = NULL;
    if (in->source == CMH_SRC_PYTORCH) return CMH_OK; /* its ids are PyTorch's own */
    cmh_pool_tags *pt = calloc(1, sizeof *pt);
    if (!pt) return CMH_ENOMEM;
    cmh_oa_init(&pt->end, sizeof(pslot));
    cmh_oa_init(&pt->live, sizeof(pslot));
    int rc = cmh_pool_descs(in, &pt->d, &pt->n);
    int any = 0;
    for (uint32_t i = 0; rc == CMH_OK && i < pt->n; i++) any |= pt->d[i].kind == CMH_POOL_PRIVATE;
    if (rc != CMH_OK || !any) {
        cmh_pool_tags_free(pt);
        return rc;
    }
    for (uint32_t i = 0; i < in->nsegments; i++) /* PyTorch's MemPools' numbers (a merged record's part) */
        if (!in->segments[i].pool_id[0] && in->segments[i].pool_id[1] > pt->base) pt->base = in->segments[i].pool_id[1];
    for (uint32_t i = 0; i < in->npool_ids; i++)
        if (!in->pool_ids[i].id[0] && in->pool_ids[i].id[1] > pt->base) pt->base = in->pool_ids[i].id[1];
    for (uint32_t t = 0; t < in->ntraces && rc == CMH_OK; t++)
        for (uint32_t i = 0; i < in->traces[t].nentries && rc == CMH_OK; i++) rc = pool_step(in, pt, &pt->end, &in->traces[t], i, NULL);
    if (rc != CMH_OK) {
        cmh_pool_tags_free(pt);
        return rc;
    }
    *out = pt;
    return CMH_OK;
}

void cmh_pool_tags_segment(const cmh_pool_tags *pt, const cmh_segment *g, uint64_t id[2])
{
    id[0] = g->pool_id[0], id[1] = g->pool_id[1];
    if (!pt || g->kind != CMH_KIND_ASYNC || id[0] || id[1]) return;
    int64_t *v = slot((cmh_oatab *)&pt->end, g->addr, 0);
    if (v && *v) id[1] = pt->base + (uint64_t)*v;
}

int cmh_pool_tags_entry(cmh_pool_tags *pt, const cmh_snapshot *s, const cmh_trace *tr, uint32_t i, uint64_t id[2])
{
    cmh_pool_id p = cmh_entry_pool_id(s, &s->entries[tr->first_entry + i]);
    id[0] = p.id[0], id[1] = p.id[1];
    if (!pt) return CMH_OK;
    uint32_t pool = 0;
    int rc = pool_step(s, pt, &pt->live, tr, i, &pool);
    if (rc == CMH_OK && pool && !id[0] && !id[1]) id[1] = pt->base + pool;
    return rc;
}
