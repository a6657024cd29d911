/*
 * diff.c - what a change did: two snapshots' peak and end figures side by side, and the sites
 * whose live bytes (at the end, and at the allocated peak) changed most.
 *
 * The snapshots may come from different runs, so sites are matched by what their frames say
 * (function, file, line, module: cmh_sites_key), never by stack id or address.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemhist/reports.h"
#include "grow.h"
#include "memo.h"
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

/* What a group's frames say, as text (cmh_sites_key), malloc'ed; without a grouping, the stack's
 * frames.  NULL when out of memory. */
static char *site_key(const cmh_snapshot *s, const cmh_sites *g, uint32_t group, uint32_t stack)
{
    char small[512];
    if (g) {
        size_t need = cmh_sites_key(g, group, small, sizeof small);
        char *k = malloc(need + 1);
        if (k && need < sizeof small) memcpy(k, small, need + 1);
        else if (k) cmh_sites_key(g, group, k, need + 1);
        return k;
    }
    const cmh_stack *st = &s->stacks[stack];
    size_t len = 16;
    for (uint32_t i = 0; i < st->count; i++) {
        const cmh_frame *f = &s->frames[s->stack_frames[st->first + i]];
        len += strlen(cmh_str(s, f->name)) + strlen(cmh_str(s, f->filename)) + 24;
    }
    char *k = malloc(len), *p = k;
    if (!k) return NULL;
    *p = 0;
    for (uint32_t i = 0; i < st->count; i++) {
        const cmh_frame *f = &s->frames[s->stack_frames[st->first + i]];
        p += sprintf(p, "%s@%s:%" PRId64 ";", cmh_str(s, f->name), cmh_str(s, f->filename), f->line);
    }
    if (!st->count) strcpy(k, "<no stack>");
    return k;
}

static cmh_diff_site *find(diff_ctx *c, const cmh_snapshot *s, const cmh_sites *g, const cmh_site *site)
{
    char *k = site_key(s, g, site->group, site->stack);
    if (!k) return NULL;
    uint64_t h = hash_str(k);
    uint32_t pos = UINT32_MAX;
    for (key_slot *sl; (sl = cmh_oa_next(&c->index, h, &pos));)
        if (!strcmp(c->v[sl->i].key, k)) {
            free(k);
            return &c->v[sl->i];
        }
    if (CMH_GROW(c->v, c->cap, (uint64_t)c->n + 1, 64)) goto oom;
    key_slot *sl = cmh_oa_add(&c->index, h);
    if (!sl) goto oom;
    sl->i = c->n;
    cmh_diff_site *e = &c->v[c->n++];
    memset(e, 0, sizeof *e);
    e->key = k;
    e->snap = s;
    e->group = site->group;
    e->stack = site->stack;
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

/* A diff needs each side's peak and its still-live blocks at the end, by site (those `leaks`
 * lists, without its steps and verdicts, which a diff does not show): one replay a side, both
 * sides at once on the cores there are, as the report's replays run. */
typedef struct diff_tasks {
    const cmh_snapshot *snap[2];
    const cmh_sites *sites[2];
    int dev[2];
    cmh_peak_report *peak; /* [2] */
    cmh_site *end[2];      /* still live at the end, by site */
    uint32_t nend[2];
    int rc[2];
    int next;
} diff_tasks;

static void *diff_worker(void *arg)
{
    diff_tasks *t = arg;
    for (int f; (f = __atomic_fetch_add(&t->next, 1, __ATOMIC_RELAXED)) < 2;)
        t->rc[f] = cmh_peak_compute_end(t->snap[f], t->dev[f], t->sites[f], &t->peak[f], &t->end[f], &t->nend[f]);
    return NULL;
}

/* The out-of-memory errors the program saw on dev, as summary's "CUDA OOMs" counts them: the
 * trace's OOM entries less the allocator's retries, plus those the ring dropped (a counter). */
static uint64_t program_ooms(const cmh_snapshot *s, int dev)
{
    const cmh_trace *t = cmh_snapshot_trace(s, dev);
    if (!t) return 0;
    uint64_t n = 0;
    for (uint32_t i = 0; i < t->nentries; i++) n += s->entries[t->first_entry + i].action == CMH_ACT_OOM;
    uint64_t retries = cmh_oom_retries(s, t);
    return (retries < n ? n - retries : 0) + t->dropped_ooms;
}

int cmh_diff_compute(const cmh_snapshot *before, int dev_before, const cmh_sites *sites_before, const cmh_snapshot *after,
                     int dev_after, const cmh_sites *sites_after, cmh_diff_report *out)
{
    memset(out, 0, sizeof *out);
    diff_tasks t;
    memset(&t, 0, sizeof t);
    t.snap[0] = before, t.snap[1] = after;
    t.sites[0] = sites_before, t.sites[1] = sites_after;
    t.dev[0] = dev_before, t.dev[1] = dev_after;
    t.peak = out->peak;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cores > 1 ? 1 : 0, started = 0;
    pthread_t th[1];
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, diff_worker, &t) != 0) break;
    diff_worker(&t);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    int rc = CMH_OK;
    for (int k = 0; k < 2; k++)
        if (t.rc[k] != CMH_OK && rc == CMH_OK) rc = t.rc[k];
    const cmh_snapshot *const *snap = t.snap;
    const cmh_sites *const *sites = t.sites;
    diff_ctx c;
    memset(&c, 0, sizeof c);
    cmh_oa_init(&c.index, sizeof(key_slot));
    for (int f = 0; f < 2 && rc == CMH_OK; f++) {
        for (uint32_t i = 0; i < snap[f]->nsegments; i++) out->segments[f] += snap[f]->segments[i].device == t.dev[f];
        out->ooms[f] = program_ooms(snap[f], t.dev[f]);
        for (uint32_t i = 0; i < t.nend[f] && rc == CMH_OK; i++) {
            cmh_diff_site *k = find(&c, snap[f], sites[f], &t.end[f][i]);
            if (!k) rc = CMH_ENOMEM;
            else *(f ? &k->after_end : &k->before_end) += (int64_t)t.end[f][i].bytes;
        }
        for (uint32_t i = 0; i < out->peak[f].nsites && rc == CMH_OK; i++) {
            cmh_diff_site *k = find(&c, snap[f], sites[f], &out->peak[f].sites[i]);
            if (!k) rc = CMH_ENOMEM;
            else *(f ? &k->after_peak : &k->before_peak) += (int64_t)out->peak[f].sites[i].bytes;
        }
    }
    for (int f = 0; f < 2; f++) free(t.end[f]);
    cmh_oa_free(&c.index);
    out->sites = c.v;
    out->nsites = c.n;
    if (rc != CMH_OK) {
        cmh_diff_report_free(out);
        return rc;
    }
    if (c.n) qsort(c.v, c.n, sizeof *c.v, cmp_change);
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
