/*
 * diff.c - what a change did: two snapshots' peak and end figures side by side, and the sites
 * whose live bytes (at the end, and at the allocated peak) changed most.
 *
 * The snapshots may come from different runs, so sites are matched by what their frames say, never
 * by stack id or address; and from different builds or checkouts, so not by the whole text: by
 * function name, then file name (its last component, '/' or '\\'), the line only telling apart
 * a function's several sites (match_sites below).
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

/* ---- matching the two sides' sites ---- */

/* What a side's site is matched by: its bucket (function names; grouped by file, the file's
 * name; by module or package, the whole key), its file's last component ("" when it has no
 * source line: a binary not symbolized, or rebuilt since), its line, its module. */
typedef struct mitem {
    uint32_t i;       /* in its side's array */
    char *bucket;     /* malloc'ed */
    const char *base; /* into the snapshot's strings */
    const char *mod;
    const char *build; /* its module's build id ("": not known) */
    int64_t line;
    int paired;
} mitem;

static const char *base_name(const char *p)
{
    const char *b = p;
    for (const char *q = p; *q; q++)
        if (*q == '/' || *q == '\\') b = q + 1;
    return b;
}

static int has_file(const cmh_snapshot *s, const cmh_frame *f)
{
    const char *file = cmh_str(s, f->filename);
    return f->line > 0 && *file && strcmp(file, "??") != 0;
}

static int mitem_fill(mitem *m, const cmh_snapshot *s, const cmh_sites *g, const cmh_diff_site *x)
{
    int by = g ? cmh_sites_group_by(g) : CMH_GROUP_STACK;
    const cmh_frame *f = g ? cmh_sites_frame(g, x->group)
                           : s->stacks[x->stack].count ? &s->frames[s->stack_frames[s->stacks[x->stack].first]] : NULL;
    m->base = "", m->mod = "", m->build = "", m->line = 0, m->paired = 0;
    if (f && has_file(s, f)) m->base = base_name(cmh_str(s, f->filename)), m->line = f->line;
    if (f) m->mod = cmh_frame_module(s, f);
    if (f && f->module >= 0 && (uint32_t)f->module < s->nmodules) m->build = cmh_str(s, s->modules[f->module].build_id);
    if (!f || by == CMH_GROUP_MODULE || by == CMH_GROUP_PACKAGE) {
        m->bucket = strdup(x->key);
        m->base = "", m->line = 0; /* one row per key: nothing to tell apart */
    } else if (by == CMH_GROUP_FILE) {
        const char *file = cmh_str(s, f->filename);
        m->bucket = strdup(*file && strcmp(file, "??") ? base_name(file) : m->mod);
        m->base = m->bucket ? m->bucket : "", m->line = 0; /* (two files of one name: paired in turn) */
    } else if (by == CMH_GROUP_STACK) {
        const cmh_stack *st = &s->stacks[x->stack];
        size_t len = 1;
        for (uint32_t k = 0; k < st->count; k++) len += strlen(cmh_str(s, s->frames[s->stack_frames[st->first + k]].name)) + 1;
        if ((m->bucket = malloc(len))) {
            char *p = m->bucket;
            *p = 0;
            for (uint32_t k = 0; k < st->count; k++) p += sprintf(p, "%s;", cmh_str(s, s->frames[s->stack_frames[st->first + k]].name));
        }
    } else
        m->bucket = strdup(cmh_str(s, f->name));
    return m->bucket ? 0 : -1;
}

static int cmp_mitem(const void *a, const void *b)
{
    const mitem *x = a, *y = b;
    int c = strcmp(x->bucket, y->bucket);
    if (c) return c;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

typedef struct pair_cost {
    int64_t d;
    uint32_t a, b;
} pair_cost;

static int cmp_cost(const void *p, const void *q)
{
    const pair_cost *x = p, *y = q;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    return x->b < y->b ? -1 : x->b > y->b;
}

/* Pairs the unpaired items of a (before) and b (after), both in line order, that ok() accepts:
 * as many on each side, in order (an edit above them moves them all alike); else each to the
 * nearest line first.  pair[i] of a gets the index in b. */
typedef int (*pair_ok)(const mitem *a, const mitem *b);

static int pair_run(mitem *a, uint32_t na, mitem *b, uint32_t nb, pair_ok ok, uint32_t *pair)
{
    uint32_t *ia = malloc(((size_t)na + 1) * sizeof *ia), *ib = malloc(((size_t)nb + 1) * sizeof *ib);
    if (!ia || !ib) return free(ia), free(ib), -1;
    /* the candidates: those ok() accepts of some unpaired item on the other side */
    uint32_t ka = 0, kb = 0;
    for (uint32_t i = 0; i < na; i++) {
        int any = 0;
        for (uint32_t j = 0; j < nb && !any && !a[i].paired; j++) any = !b[j].paired && ok(&a[i], &b[j]);
        if (any) ia[ka++] = i;
    }
    for (uint32_t j = 0; j < nb; j++) {
        int any = 0;
        for (uint32_t k = 0; k < ka && !any && !b[j].paired; k++) any = ok(&a[ia[k]], &b[j]);
        if (any) ib[kb++] = j;
    }
    int inorder = ka == kb;
    for (uint32_t k = 0; k < ka && inorder; k++) inorder = ok(&a[ia[k]], &b[ib[k]]);
    if (inorder || (uint64_t)ka * kb > (1u << 20)) {
        for (uint32_t k = 0, j = 0; k < ka && j < kb; k++, j++)
            if (ok(&a[ia[k]], &b[ib[j]])) a[ia[k]].paired = b[ib[j]].paired = 1, pair[ia[k]] = ib[j];
    } else {
        pair_cost *c = malloc(((size_t)ka * kb + 1) * sizeof *c);
        if (!c) return free(ia), free(ib), -1;
        size_t n = 0;
        for (uint32_t k = 0; k < ka; k++)
            for (uint32_t j = 0; j < kb; j++)
                if (ok(&a[ia[k]], &b[ib[j]])) c[n++] = (pair_cost){llabs(a[ia[k]].line - b[ib[j]].line), ia[k], ib[j]};
        qsort(c, n, sizeof *c, cmp_cost);
        for (size_t k = 0; k < n; k++)
            if (!a[c[k].a].paired && !b[c[k].b].paired) a[c[k].a].paired = b[c[k].b].paired = 1, pair[c[k].a] = c[k].b;
        free(c);
    }
    free(ia);
    free(ib);
    return 0;
}

/* the same file name, both with lines */
static int ok_file(const mitem *a, const mitem *b) { return *a->base && !strcmp(a->base, b->base); }

static int cmp_i64(const void *p, const void *q)
{
    int64_t x = *(const int64_t *)p, y = *(const int64_t *)q;
    return (x > y) - (x < y);
}

/* Whether a and b can be one site at lines d apart: the same file name, and, at another line,
 * not one binary (the same build id: its code has not moved, so two lines are two sites). */
static int ok_shift(const mitem *a, const mitem *b, int64_t d)
{
    return ok_file(a, b) && b->line - a->line == d && (!d || !*a->build || strcmp(a->build, b->build));
}

/* The unpaired items of a paired with b's at d lines further on, in line order (both are). */
static void pair_at(mitem *a, uint32_t na, mitem *b, uint32_t nb, int64_t d, uint32_t *pair)
{
    for (uint32_t i = 0; i < na; i++)
        for (uint32_t j = 0; j < nb && !a[i].paired; j++)
            if (!b[j].paired && ok_shift(&a[i], &b[j], d)) a[i].paired = b[j].paired = 1, pair[i] = j;
}

/* Pairs the sites of one function (both sides' in line order) with lines: by the shift that
 * pairs the most of them, then the next shift for the rest (an edit inside the function moves
 * the sites below it further), as long as one shift pairs more than any other, 0 (no move)
 * winning a tie.  An edit moves a function's sites alike; two sites of one function are never
 * paired merely for being the nearest (a parent's main:13 and its forked child's main:19, one
 * binary: two sites, not one moved), nor are two lines of one binary ever one site. */
static int pair_lines(mitem *a, uint32_t na, mitem *b, uint32_t nb, uint32_t *pair)
{
    if ((uint64_t)na * nb > (1u << 16)) { /* (too many to weigh every shift: the same lines only) */
        pair_at(a, na, b, nb, 0, pair);
        return 0;
    }
    int64_t *ds = malloc(((size_t)na * nb + 1) * sizeof *ds);
    if (!ds) return -1;
    for (;;) {
        size_t n = 0;
        for (uint32_t i = 0; i < na; i++)
            for (uint32_t j = 0; j < nb; j++)
                if (!a[i].paired && !b[j].paired && ok_shift(&a[i], &b[j], b[j].line - a[i].line)) ds[n++] = b[j].line - a[i].line;
        if (!n) break;
        qsort(ds, n, sizeof *ds, cmp_i64);
        int64_t best = 0;
        uint32_t most = 0, ties = 0;
        for (size_t k = 0, e; k < n; k = e) {
            for (e = k + 1; e < n && ds[e] == ds[k];) e++;
            /* the pairs at this shift: its count of candidates, one site a line on each side */
            uint32_t c = (uint32_t)(e - k);
            if (c > most || (c == most && ds[k] == 0)) most = c, best = ds[k], ties = 0;
            else if (c == most && best != 0) ties++;
        }
        if (most && !ties) {
            pair_at(a, na, b, nb, best, pair);
            continue;
        }
        /* shifts that explain the rest alike: as many sites left on each side, in order (an edit
         * between them moved the lower ones further), else which moved where is not known */
        uint32_t ia = 0, ib = 0, ka = 0, kb = 0, inorder = 1;
        for (uint32_t i = 0; i < na; i++) ka += !a[i].paired;
        for (uint32_t j = 0; j < nb; j++) kb += !b[j].paired;
        for (uint32_t k = 0; k < ka && ka == kb && inorder; k++, ia++, ib++) {
            while (a[ia].paired) ia++;
            while (b[ib].paired) ib++;
            inorder = ok_shift(&a[ia], &b[ib], b[ib].line - a[ia].line);
        }
        if (ka != kb || !inorder) break;
        for (ia = 0, ib = 0; ia < na; ia++, ib++) {
            while (ia < na && a[ia].paired) ia++;
            while (ib < nb && b[ib].paired) ib++;
            if (ia < na && ib < nb) a[ia].paired = b[ib].paired = 1, pair[ia] = ib;
        }
        break;
    }
    free(ds);
    return 0;
}
/* a side without lines (a module, when both know theirs, the same) */
static int ok_nolines(const mitem *a, const mitem *b)
{
    return (!*a->base || !*b->base) && (!*a->mod || !*b->mod || !strcmp(a->mod, b->mod));
}
/* grouped by module, package or file, or no frame: the bucket is the row */
static int ok_any(const mitem *a, const mitem *b) { return (void)a, (void)b, 1; }

/* How a pair was matched where their keys differ: CMH_DIFF_MOVED where both sides have a file
 * (another line, another directory) or the rows are files, modules or packages; else (a side
 * without lines) CMH_DIFF_BY_FUNCTION. */
static int pair_kind(const cmh_snapshot *const *snap, const cmh_sites *const *sites, const cmh_diff_site *x)
{
    cmh_diff_site y = *x;
    y.group = x->group_after, y.stack = x->stack_after, y.key = x->key_after;
    mitem a, b;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    int ra = mitem_fill(&a, snap[0], sites[0], x), rb = mitem_fill(&b, snap[1], sites[1], &y);
    int by = sites[0] ? cmh_sites_group_by(sites[0]) : CMH_GROUP_STACK;
    int kind = ra || rb || (*a.base && *b.base) || (by != CMH_GROUP_SITE && by != CMH_GROUP_STACK) ? CMH_DIFF_MOVED : CMH_DIFF_BY_FUNCTION;
    free(a.bucket);
    free(b.bucket);
    return kind;
}

/* Matches side 0's sites (v[0]) with side 1's (v[1]): join[j], for side 1's site j, is the index
 * of side 0's site whose row it joins, or UINT32_MAX (a site side 0 lacks).  One to one, but for
 * a side 0 site without lines: where its function has several sites on side 1, it is all of
 * them (without lines, the record could not tell them apart: one row, their bytes added). */
static int match_sites(const cmh_snapshot *const *snap, const cmh_sites *const *sites, cmh_diff_site *const *v, const uint32_t *n,
                       uint32_t *join)
{
    mitem *m[2] = {calloc((size_t)n[0] + 1, sizeof(mitem)), calloc((size_t)n[1] + 1, sizeof(mitem))};
    uint32_t *pr = malloc(((size_t)n[0] + 1) * sizeof *pr);
    int rc = m[0] && m[1] && pr ? 0 : -1;
    for (int f = 0; f < 2 && !rc; f++)
        for (uint32_t i = 0; i < n[f] && !rc; i++) {
            m[f][i].i = i;
            rc = mitem_fill(&m[f][i], snap[f], sites[f], &v[f][i]);
        }
    if (!rc) {
        qsort(m[0], n[0], sizeof(mitem), cmp_mitem);
        qsort(m[1], n[1], sizeof(mitem), cmp_mitem);
    }
    for (uint32_t j = 0; j < n[1]; j++) join[j] = UINT32_MAX;
    for (uint32_t a = 0, b = 0; !rc && a < n[0] && b < n[1];) { /* bucket by bucket */
        int c = strcmp(m[0][a].bucket, m[1][b].bucket);
        if (c) {
            if (c < 0) a++;
            else b++;
            continue;
        }
        uint32_t ea = a, eb = b;
        while (ea < n[0] && !strcmp(m[0][ea].bucket, m[0][a].bucket)) ea++;
        while (eb < n[1] && !strcmp(m[1][eb].bucket, m[1][b].bucket)) eb++;
        uint32_t na = ea - a, nb = eb - b;
        mitem *ma = m[0] + a, *mb = m[1] + b;
        for (uint32_t k = 0; k < na; k++) pr[k] = UINT32_MAX;
        int plain = !*ma[0].base && !*mb[0].base && na == 1 && nb == 1;
        if (plain) rc = pair_run(ma, na, mb, nb, ok_any, pr);
        else rc = pair_lines(ma, na, mb, nb, pr);
        for (uint32_t k = 0; k < na; k++)
            if (pr[k] != UINT32_MAX) join[mb[pr[k]].i] = ma[k].i;
        /* a side 0 site without lines: every site of its function (and module) side 1 has left */
        for (uint32_t k = 0; k < na && !rc && !plain; k++) {
            if (*ma[k].base || ma[k].paired) continue;
            for (uint32_t j = 0; j < nb; j++)
                if (!mb[j].paired && ok_nolines(&ma[k], &mb[j])) ma[k].paired = mb[j].paired = 1, join[mb[j].i] = ma[k].i;
        }
        /* a side 1 site without lines: one of side 0's, the nearest */
        for (uint32_t k = 0; k < na; k++) pr[k] = UINT32_MAX;
        if (!rc && !plain) rc = pair_run(ma, na, mb, nb, ok_nolines, pr);
        for (uint32_t k = 0; k < na && !rc && !plain; k++)
            if (pr[k] != UINT32_MAX) join[mb[pr[k]].i] = ma[k].i;
        a = ea, b = eb;
    }
    for (int f = 0; f < 2; f++)
        for (uint32_t i = 0; m[f] && i < n[f]; i++) free(m[f][i].bucket);
    free(m[0]);
    free(m[1]);
    free(pr);
    return rc;
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
    /* each side's sites by what their frames say, then matched across (match_sites) */
    diff_ctx c[2];
    memset(c, 0, sizeof c);
    for (int f = 0; f < 2; f++) cmh_oa_init(&c[f].index, sizeof(key_slot));
    for (int f = 0; f < 2 && rc == CMH_OK; f++) {
        for (uint32_t i = 0; i < snap[f]->nsegments; i++) out->segments[f] += snap[f]->segments[i].device == t.dev[f];
        out->ooms[f] = program_ooms(snap[f], t.dev[f]);
        for (uint32_t i = 0; i < t.nend[f] && rc == CMH_OK; i++) {
            cmh_diff_site *k = find(&c[f], snap[f], sites[f], &t.end[f][i]);
            if (!k) rc = CMH_ENOMEM;
            else *(f ? &k->after_end : &k->before_end) += (int64_t)t.end[f][i].bytes;
        }
        for (uint32_t i = 0; i < out->peak[f].nsites && rc == CMH_OK; i++) {
            cmh_diff_site *k = find(&c[f], snap[f], sites[f], &out->peak[f].sites[i]);
            if (!k) rc = CMH_ENOMEM;
            else *(f ? &k->after_peak : &k->before_peak) += (int64_t)out->peak[f].sites[i].bytes;
        }
    }
    for (int f = 0; f < 2; f++) free(t.end[f]), cmh_oa_free(&c[f].index);
    uint32_t *join = rc == CMH_OK ? malloc(((size_t)c[1].n + 1) * sizeof *join) : NULL;
    cmh_diff_site *const v[2] = {c[0].v, c[1].v};
    const uint32_t nv[2] = {c[0].n, c[1].n};
    if (rc == CMH_OK && (!join || match_sites(snap, sites, v, nv, join))) rc = CMH_ENOMEM;
    if (rc == CMH_OK && CMH_GROW(c[0].v, c[0].cap, (uint64_t)c[0].n + c[1].n + 1, 64)) rc = CMH_ENOMEM;
    if (rc == CMH_OK) { /* side 1's sites join side 0's rows; those side 0 lacks are rows of their own */
        uint32_t n0 = c[0].n;
        for (uint32_t j = 0; j < c[1].n; j++) {
            cmh_diff_site *y = &c[1].v[j];
            if (join[j] == UINT32_MAX) {
                c[0].v[c[0].n++] = *y, y->key = NULL;
                continue;
            }
            cmh_diff_site *x = &c[0].v[join[j]];
            x->after_end += y->after_end, x->after_peak += y->after_peak;
            if (x->snap_after) { /* one more of a function's sites, where side 0 has no lines */
                x->merged_after++;
                continue;
            }
            x->snap_after = y->snap, x->group_after = y->group, x->stack_after = y->stack;
            x->key_after = y->key, y->key = NULL;
        }
        for (uint32_t i = 0; i < n0; i++) {
            cmh_diff_site *x = &c[0].v[i];
            if (x->snap_after)
                x->match = !strcmp(x->key, x->key_after) && !x->merged_after ? CMH_DIFF_SAME : pair_kind(snap, sites, x);
        }
    }
    free(join);
    for (uint32_t j = 0; j < c[1].n; j++) free(c[1].v[j].key);
    free(c[1].v);
    out->sites = c[0].v;
    out->nsites = c[0].n;
    if (rc != CMH_OK) {
        cmh_diff_report_free(out);
        return rc;
    }
    diff_ctx *cc = &c[0];
    if (cc->n) qsort(cc->v, cc->n, sizeof *cc->v, cmp_change);
    int64_t a = out->peak[0].alloc_peak, b = out->peak[1].alloc_peak;
    out->peak_growth_pct = a ? 100.0 * (double)(b - a) / (double)a : b ? 100.0 : 0.0;
    const cmh_snapshot *snap2[2] = {before, after};
    int dev2[2] = {dev_before, dev_after};
    for (int f = 0; f < 2; f++) {
        cmh_physical_peak *ph = &out->phys[f];
        if ((rc = cmh_physical_peak_compute(snap2[f], dev2[f], ph)) != CMH_OK) {
            cmh_diff_report_free(out);
            return rc;
        }
        out->physical |= ph->known;
        if (!ph->known) ph->peak = out->peak[f].reserved_peak, ph->at_end = out->peak[f].reserved_end;
    }
    a = out->phys[0].peak, b = out->phys[1].peak;
    out->phys_growth_pct = a ? 100.0 * (double)(b - a) / (double)a : b ? 100.0 : 0.0;
    return CMH_OK;
}

void cmh_diff_report_free(cmh_diff_report *r)
{
    for (uint32_t i = 0; i < r->nsites; i++) free(r->sites[i].key), free(r->sites[i].key_after);
    free(r->sites);
    cmh_peak_report_free(&r->peak[0]);
    cmh_peak_report_free(&r->peak[1]);
    memset(r, 0, sizeof *r);
}
