/*
 * whatif_pools.c - which pool each of the what-if model's requests is of (whatif_tree.h): the
 * entry's pool_id, else the final segment's pool id as cmh_pool_tags names it for every writer
 * (one notion of which pool; `whatif` counts its private requests from here too).  Every lookup
 * is a hash or a binary search: a trace of millions of requests may name many pools (a hostile
 * one, one each).
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "grow.h"
#include "oatab.h"
#include "whatif_tree.h"

typedef struct owner_slot {
    uint64_t key; /* the id's hash (cmh_oa_hashkey) */
    uint32_t owner, pad;
} owner_slot;

static uint64_t id_hash(const uint64_t id[2]) { return cmh_oa_hashkey(cmh_oa_mix(id[0]) ^ cmh_oa_mix(id[1] + 0x9E3779B97F4A7C15ull)); }

uint32_t wp_owner(wpools *p, const uint64_t id[2])
{
    if (!id[0] && !id[1]) return 0;
    uint64_t h = id_hash(id);
    uint32_t pos = UINT32_MAX;
    for (owner_slot *sl; (sl = cmh_oa_next(&p->index, h, &pos));)
        if (p->privs[sl->owner - 1]->id[0] == id[0] && p->privs[sl->owner - 1]->id[1] == id[1]) return sl->owner;
    wpriv *w = calloc(1, sizeof *w);
    owner_slot *sl = NULL;
    if (!w || p->n == UINT32_MAX - 1 || CMH_GROW(p->privs, p->cap, (uint64_t)p->n + 1, 8) || !(sl = cmh_oa_add(&p->index, h))) {
        free(w);
        p->nomem = 1;
        return 0;
    }
    w->id[0] = id[0], w->id[1] = id[1];
    w->freeb[0].f = w->freeb[1].f = wt_cmp_size;
    p->privs[p->n++] = w;
    sl->owner = p->n;
    return p->n;
}

static int cmp_final(const void *a, const void *b)
{
    const wfinal *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

int wp_init(wpools *p, const cmh_snapshot *s, int device)
{
    memset(p, 0, sizeof *p);
    cmh_oa_init(&p->index, sizeof(owner_slot));
    /* a final segment's pool as every writer names it (cmh_pool_tags: its own id, or a recorder's
     * private stream-ordered pool's), so that what-if and the exports agree on which pool */
    cmh_pool_tags *pt = NULL;
    if (cmh_pool_tags_new(s, &pt) != CMH_OK) return p->nomem = 1, -1;
    uint64_t id[2];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].device == device) cmh_pool_tags_segment(pt, &s->segments[i], id), n += id[0] || id[1];
    if (n && !(p->finals = malloc(n * sizeof *p->finals))) p->nomem = 1;
    for (uint32_t i = 0; n && p->finals && i < s->nsegments; i++) { /* (most records: no private pool at the end, none) */
        const cmh_segment *g = &s->segments[i];
        if (g->device != device) continue;
        cmh_pool_tags_segment(pt, g, id);
        if (id[0] || id[1]) p->finals[p->nfinals++] = (wfinal){g->addr, g->size, wp_owner(p, id)};
    }
    cmh_pool_tags_free(pt);
    if (p->nfinals) qsort(p->finals, p->nfinals, sizeof *p->finals, cmp_final);
    return p->nomem ? -1 : 0;
}

void wp_free(wpools *p)
{
    for (uint32_t i = 0; i < p->n; i++) free(p->privs[i]);
    free(p->privs);
    cmh_oa_free(&p->index);
    free(p->by_num);
    free(p->finals);
    memset(p, 0, sizeof *p);
}

uint32_t wp_final(const wpools *p, uint64_t addr)
{
    uint32_t lo = 0, hi = p->nfinals; /* the last segment starting at or below addr */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->finals[mid].addr <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return 0;
    const wfinal *f = &p->finals[lo - 1];
    return addr - f->addr < f->size ? f->owner : 0;
}

uint32_t wp_request(wpools *p, const cmh_snapshot *s, const cmh_entry *e, uint64_t addr)
{
    uint32_t num = cmh_entry_x(s, e)->pool; /* the entry's pool, by its number in the snapshot */
    if (num && num < s->npool_ids) {
        if (!p->by_num) {
            if (!(p->by_num = calloc(s->npool_ids, sizeof *p->by_num))) return p->nomem = 1, 0;
        }
        if (!p->by_num[num]) p->by_num[num] = wp_owner(p, s->pool_ids[num].id);
        return p->by_num[num];
    }
    return p->nfinals && addr && !(s->pt_fields & CMH_PT_POOL_ID) ? wp_final(p, addr) : 0;
}
