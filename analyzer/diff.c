/*
 * diff.c - what a change did: two snapshots' peak and end figures side by side, and the sites
 * whose live bytes (at the end, and at the allocated peak) changed most.
 *
 * The snapshots may come from different runs, so sites are matched by what their frames say
 * (name, file, line), never by stack id or address.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "oatab.h"

typedef struct key_slot {
    uint64_t hash; /* key */
    uint64_t i;    /* index in the site array */
} key_slot;

typedef struct diff_ctx {
    cmh_diff_site *v;
    uint32_t n, cap;
    cmh_oatab index;
} diff_ctx;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return cmh_oa_hashkey(h);
}

/* The site's frames as text ("name@file:line;..."), then a NUL and its first frame's name, in one
 * malloc'ed buffer; NULL when out of memory. */
static char *site_key(const cmh_snapshot *s, uint32_t stack)
{
    const char *names[16], *files[16];
    int64_t lines[16];
    int n = cmh_stack_lines(s, stack, 16, names, files, lines);
    size_t len = 32 + (n ? strlen(names[0]) : 0);
    for (int i = 0; i < n; i++) len += strlen(names[i]) + strlen(files[i]) + 24;
    char *k = malloc(len), *p = k;
    if (!k) return NULL;
    *p = 0;
    for (int i = 0; i < n; i++) p += sprintf(p, "%s@%s:%" PRId64 ";", names[i], files[i], lines[i]);
    if (!n) p += sprintf(k, "%s", stack ? "<unknown>" : "<no stack>");
    strcpy(p + 1, n ? names[0] : k);
    return k;
}

static cmh_diff_site *find(diff_ctx *c, const cmh_snapshot *s, uint32_t stack)
{
    char *k = site_key(s, stack);
    if (!k) return NULL;
    uint64_t h = hash_str(k);
    uint32_t pos = UINT32_MAX;
    for (key_slot *sl; (sl = cmh_oa_next(&c->index, h, &pos));)
        if (!strcmp(c->v[sl->i].key, k)) {
            free(k);
            return &c->v[sl->i];
        }
    if (c->n == c->cap) {
        uint32_t nc = c->cap ? c->cap * 2 : 64;
        cmh_diff_site *nv = realloc(c->v, nc * sizeof *nv);
        if (!nv) goto oom;
        c->v = nv;
        c->cap = nc;
    }
    key_slot *sl = cmh_oa_add(&c->index, h);
    if (!sl) goto oom;
    sl->i = c->n;
    cmh_diff_site *e = &c->v[c->n++];
    memset(e, 0, sizeof *e);
    e->key = k;
    return e;
oom:
    free(k);
    return NULL;
}

static int64_t change(const cmh_diff_site *x)
{
    return llabs(x->after_end - x->before_end) + llabs(x->after_peak - x->before_peak);
}

static int cmp_change(const void *a, const void *b)
{
    const cmh_diff_site *x = a, *y = b;
    int64_t dx = change(x), dy = change(y);
    if (dx != dy) return dx > dy ? -1 : 1;
    return strcmp(x->key, y->key);
}

int cmh_diff_compute(const cmh_snapshot *before, int dev_before, const cmh_snapshot *after, int dev_after,
                     cmh_diff_report *out)
{
    memset(out, 0, sizeof *out);
    const cmh_snapshot *snap[2] = {before, after};
    int dev[2] = {dev_before, dev_after};
    diff_ctx c;
    memset(&c, 0, sizeof c);
    cmh_oa_init(&c.index, sizeof(key_slot));
    int rc = CMH_OK;
    for (int f = 0; f < 2 && rc == CMH_OK; f++) {
        cmh_leak_report lk;
        if ((rc = cmh_peak_compute(snap[f], dev[f], &out->peak[f])) != CMH_OK) break;
        if ((rc = cmh_leaks_compute(snap[f], dev[f], 0, &lk)) != CMH_OK) break;
        for (uint32_t i = 0; i < snap[f]->nsegments; i++) out->segments[f] += snap[f]->segments[i].device == dev[f];
        for (uint32_t i = 0; i < lk.nsites && rc == CMH_OK; i++) {
            cmh_diff_site *k = find(&c, snap[f], lk.sites[i].stack);
            if (!k) rc = CMH_ENOMEM;
            else *(f ? &k->after_end : &k->before_end) += (int64_t)lk.sites[i].bytes;
        }
        for (uint32_t i = 0; i < out->peak[f].nsites && rc == CMH_OK; i++) {
            cmh_diff_site *k = find(&c, snap[f], out->peak[f].sites[i].stack);
            if (!k) rc = CMH_ENOMEM;
            else *(f ? &k->after_peak : &k->before_peak) += (int64_t)out->peak[f].sites[i].bytes;
        }
        cmh_leak_report_free(&lk);
    }
    cmh_oa_free(&c.index);
    out->sites = c.v;
    out->nsites = c.n;
    if (rc != CMH_OK) {
        cmh_diff_report_free(out);
        return rc;
    }
    if (c.n) qsort(c.v, c.n, sizeof *c.v, cmp_change);
    for (uint32_t i = 0; i < c.n; i++) c.v[i].top = c.v[i].key + strlen(c.v[i].key) + 1;
    int64_t a = out->peak[0].alloc_peak, b = out->peak[1].alloc_peak;
    out->peak_growth_pct = a ? 100.0 * (double)(b - a) / (double)a : b ? 100.0 : 0.0;
    return CMH_OK;
}

void cmh_diff_report_free(cmh_diff_report *r)
{
    for (uint32_t i = 0; i < r->nsites; i++) free(r->sites[i].key);
    free(r->sites);
    cmh_peak_report_free(&r->peak[0]);
    cmh_peak_report_free(&r->peak[1]);
    memset(r, 0, sizeof *r);
}
