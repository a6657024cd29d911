/*
 * view.c - the interactive viewer's writer (`cumemhist view`, and the section `report` embeds):
 * one offline page whose script only draws.  Everything that needs the whole record is done
 * here, once:
 *
 *  - the replay (analyzer/replay.c) says when each active block appears and goes; each is one
 *    allocation, a band of the Active Memory Timeline, stacked in allocation order as PyTorch's
 *    memory_viz stacks them (a band sits on every band allocated before it and still live);
 *  - the allocated and reserved lines are the replay's own counters after each entry;
 *  - level of detail: the trace is cut into columns of VIEW_COL entries, and each column keeps
 *    one instant, the one where the band stack is highest (so a peak is never averaged away).
 *    At that instant the bands thinner than 1/VIEW_FOLD of the stack (a pixel or two at most,
 *    as the page scales y to the highest column in view) are folded into one band per
 *    site on top of the rest, as memory_viz folds its small tensors into one summary band.
 *    Coarser levels halve the columns, each keeping the higher of its two children, so a
 *    million entries at full width draw a few thousand rectangles.  Zoomed in past VIEW_COL
 *    entries a column, the page computes the exact stack itself from the allocation list.
 *
 * Packing: per device one byte stream of unsigned LEB128 varints (sorted sequences as deltas),
 * base64 in a <script type="application/octet-stream">; names, sites, stacks and frames as JSON
 * beside it.  docs/VIEW.md gives the layout; view.js (viz/view/) reads it in the same order.
 * Facts come from the analyzer: the peak (cmh_peak_compute), steps (cmh_steps_find), sites
 * (cmh_sites), the clock (cmh_clock_origin).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/gapwords.h"
#include "cumemhist/leakwords.h"
#include "cumemhist/pictures.h"
#include "cumemhist/reports.h"
#include "cumemhist/view.h"
#include "jsonw.h"
#include "svg.h"

#define VIEW_COL 64   /* entries per column at the finest level the writer keeps */
#define VIEW_FOLD 256 /* a band under 1/VIEW_FOLD of its column's stack is folded (1.5 px of a 380 px plot) */

extern const char cmh_view_js[], cmh_view_css[]; /* viz/view/, embedded at build time */

/* ---- a growable byte stream of varints ---- */
typedef struct vbuf {
    unsigned char *p;
    size_t n, cap;
    int nomem;
} vbuf;

static void vb_put(vbuf *b, uint64_t v)
{
    if (b->n + 10 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->nomem = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    do {
        unsigned char c = v & 0x7f;
        v >>= 7;
        b->p[b->n++] = c | (v ? 0x80 : 0);
    } while (v);
}
static uint64_t zz(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* ---- the allocations of one device ---- */
typedef struct vband {
    int64_t start, end; /* live in the states after entries start .. end-1 (start -1: before the trace) */
    uint64_t size, addr;
    uint32_t stack;
    uint32_t site; /* site_of its stack, capped at the sites' count (found once, for the sweep) */
} vband;

typedef struct vdev {
    vband *a;
    uint32_t na, cap;
    uint64_t *key; /* open addressing: address -> allocation id + 1 (0: empty, UINT32_MAX: deleted) */
    uint32_t *val;
    uint32_t hcap, hused;
    const cmh_snapshot *s;
    const cmh_entry *e; /* the device's trace */
    int64_t n;
    int64_t pos;   /* the entry being applied (-1 before the first; n at the final reconcile) */
    int nomem;
    uint64_t active;
} vdev;

static uint32_t hslot(const vdev *d, uint64_t addr)
{
    uint64_t h = addr * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & (d->hcap - 1);
}

static int hgrow(vdev *d)
{
    uint32_t ocap = d->hcap, ncap = ocap ? ocap * 2 : 1024;
    uint64_t *ok = d->key;
    uint32_t *ov = d->val;
    d->key = calloc(ncap, sizeof *d->key);
    d->val = calloc(ncap, sizeof *d->val);
    if (!d->key || !d->val) {
        free(d->key), free(d->val);
        d->key = ok, d->val = ov;
        return -1;
    }
    d->hcap = ncap, d->hused = 0;
    for (uint32_t i = 0; i < ocap; i++)
        if (ov[i] && ov[i] != UINT32_MAX) {
            uint32_t j = hslot(d, ok[i]);
            while (d->val[j]) j = (j + 1) & (ncap - 1);
            d->key[j] = ok[i], d->val[j] = ov[i], d->hused++;
        }
    free(ok), free(ov);
    return 0;
}

static void on_block(void *arg, int64_t delta, uint32_t stack, uint64_t addr)
{
    vdev *d = arg;
    if (d->nomem) return;
    if (delta > 0) {
        if (d->na == d->cap) {
            uint32_t cap = d->cap ? d->cap * 2 : 1024;
            vband *a = realloc(d->a, cap * sizeof *a);
            if (!a) {
                d->nomem = 1;
                return;
            }
            d->a = a, d->cap = cap;
        }
        if ((d->hused + 1) * 2 > d->hcap && hgrow(d)) {
            d->nomem = 1;
            return;
        }
        vband *v = &d->a[d->na];
        v->start = d->pos, v->end = INT64_MAX, v->size = (uint64_t)delta, v->addr = addr, v->stack = stack;
        d->active += (uint64_t)delta;
        uint32_t j = hslot(d, addr);
        while (d->val[j] && d->val[j] != UINT32_MAX && d->key[j] != addr) j = (j + 1) & (d->hcap - 1);
        if (!d->val[j]) d->hused++;
        d->key[j] = addr, d->val[j] = ++d->na;
        return;
    }
    if (!d->hcap) return;
    uint32_t j = hslot(d, addr);
    while (d->val[j] && (d->val[j] == UINT32_MAX || d->key[j] != addr)) j = (j + 1) & (d->hcap - 1);
    if (!d->val[j]) return; /* the replay never frees what it did not show */
    vband *v = &d->a[d->val[j] - 1];
    v->end = d->pos;
    /* memory_viz's rule: a free_requested right before its free_completed is one free, there */
    const cmh_entry *prev = d->pos > 0 && d->pos - 1 < d->n ? &d->e[d->pos - 1] : NULL;
    const cmh_entry *cur = d->pos >= 0 && d->pos < d->n ? &d->e[d->pos] : NULL;
    if (prev && cur && cur->action == CMH_ACT_FREE_COMPLETED && prev->action == CMH_ACT_FREE_REQUESTED && cmh_entry_addr(d->s, prev) == addr &&
        v->start < d->pos - 1)
        v->end = d->pos - 1;
    d->active -= v->size;
    d->val[j] = UINT32_MAX;
}

static void vdev_free(vdev *d)
{
    free(d->a), free(d->key), free(d->val);
    memset(d, 0, sizeof *d);
}

static uint32_t site_of(const cmh_sites *g, uint32_t stack) { return g ? cmh_sites_group(g, stack) : stack; }

/* ---- base64 ---- */
static void b64(FILE *fp, const unsigned char *p, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char line[4 * 1024 + 8];
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        line[k++] = t[v >> 18 & 63];
        line[k++] = t[v >> 12 & 63];
        line[k++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        line[k++] = i + 2 < n ? t[v & 63] : '=';
        if (k >= 4 * 1024) {
            fwrite(line, 1, k, fp);
            k = 0;
        }
    }
    fwrite(line, 1, k, fp);
}

/* JSON inside a <script> element: '<' spelled \u003c so no text closes it */
static void put_script_json(FILE *fp, const char *j, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (j[i] == '<') fputs("\\u003c", fp);
        else fputc(j[i], fp);
    }
}

typedef struct vstate {
    uint32_t *live; /* ids live at the instant, ascending (compacted at each instant) */
    uint32_t nlive, cap;
    uint32_t *band; /* of those, the ones drawn as bands (cap slots) */
    double *fold;   /* per site, folded bytes at the instant */
    uint32_t *touched;
    uint32_t ntouched;
} vstate;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* One device's stream.  Layout (every number a varint; z = zigzag):
 *   n entries, na allocations
 *   per allocation: start+1 as a delta from the previous start+1, life (end-start; 0 = to the end),
 *                   size, stack
 *   allocated line (less the band stack's height): count, then (entry delta, z value delta) pairs
 *   where it changes; reserved (itself) the same
 *   columns: ncols, then per column: instant delta (from the column's first entry), band count,
 *            band ids as deltas, fold count, (site delta, bytes) pairs; allocated max, reserved max
 *            in the column
 *   levels: nlevels, per level: ncols, per column the level-0 column whose state it shows (delta) */
static int device_stream(const cmh_snapshot *s, const cmh_sites *g, int dev, vbuf *out, cmh_jw *w)
{
    /* the blocks' lives and the two lines: a report page's history (reports.h), else a replay */
    const cmh_replay_history *h = cmh_memo_history(s, dev);
    cmh_replay *r = h ? NULL : cmh_replay_new(s, dev);
    if (!h && !r) return CMH_ENOMEM;
    const cmh_trace *tr = cmh_snapshot_trace(s, dev);
    vdev d = {0};
    d.pos = -1;
    d.s = s;
    d.e = tr && tr->nentries ? &s->entries[tr->first_entry] : NULL;
    int64_t n = d.n = h ? h->n : cmh_replay_length(r);
    uint64_t *act = malloc(((size_t)n + 1) * sizeof *act);
    int64_t *alv = malloc(((size_t)n + 1) * sizeof *alv), *rsv_own = h ? NULL : malloc(((size_t)n + 1) * sizeof *rsv_own);
    const int64_t *rsv = h ? h->reserved : rsv_own;
    int rc = CMH_OK;
    if (!act || !alv || !rsv) rc = CMH_ENOMEM;
    if (h && rc == CMH_OK) {
        memcpy(alv, h->allocated, (size_t)n * sizeof *alv);
        for (uint64_t k = 0; k < h->nev && !d.nomem; k++) {
            d.pos = (int64_t)h->ev[k].pos1 - 1;
            on_block(&d, h->ev[k].delta, h->ev[k].stack, h->ev[k].addr);
        }
    } else if (rc == CMH_OK) {
        cmh_replay_observe(r, on_block, &d);
        for (int64_t i = 0;; i++) {
            d.pos = i;
            if (!cmh_replay_step(r)) break;
            const cmh_mem_stats *st = cmh_replay_stats(r);
            alv[i] = st->allocated_bytes[CMH_POOL_ALL].current;
            rsv_own[i] = st->reserved_bytes[CMH_POOL_ALL].current;
        }
    }
    if (rc == CMH_OK && (d.nomem || (r && cmh_replay_status(r) != CMH_OK))) rc = CMH_ENOMEM;
    if (r) cmh_replay_free(r);
    /* the band stack's height after each entry, from the bands themselves */
    if (rc == CMH_OK) {
        int64_t *dl = calloc((size_t)n + 1, sizeof *dl);
        if (!dl) rc = CMH_ENOMEM;
        for (uint32_t i = 0; dl && i < d.na; i++) {
            int64_t a = d.a[i].start < 0 ? 0 : d.a[i].start, b = d.a[i].end > n ? n : d.a[i].end;
            if (a >= b) continue;
            dl[a] += (int64_t)d.a[i].size;
            dl[b] -= (int64_t)d.a[i].size;
        }
        int64_t run = 0;
        for (int64_t i = 0; dl && i < n; i++) act[i] = (uint64_t)(run += dl[i]);
        free(dl);
    }
    vstate vs = {0};
    uint32_t ncols = (uint32_t)((n + VIEW_COL - 1) / VIEW_COL);
    int64_t *inst = NULL;
    uint32_t nsites = g ? cmh_sites_count(g) : s->nstacks;
    if (rc == CMH_OK) {
        inst = malloc(((size_t)ncols + 1) * sizeof *inst);
        vs.fold = calloc((size_t)nsites + 1, sizeof *vs.fold);
        vs.touched = malloc(((size_t)nsites + 1) * sizeof *vs.touched);
        if (!inst || !vs.fold || !vs.touched) rc = CMH_ENOMEM;
    }
    if (rc == CMH_OK) {
        vb_put(out, (uint64_t)n);
        vb_put(out, d.na);
        int64_t prev = 0;
        for (uint32_t i = 0; i < d.na; i++) {
            vband *v = &d.a[i];
            if (v->end > n) v->end = n; /* still live at the end */
            vb_put(out, (uint64_t)(v->start + 1 - prev));
            prev = v->start + 1;
            vb_put(out, v->end >= n ? 0 : (uint64_t)(v->end - v->start));
            vb_put(out, v->size);
            vb_put(out, v->stack);
        }
        /* the allocated line as its difference from the band stack (which the page sums itself):
         * nearly always 0, so a few pairs where a million would be */
        for (int64_t i = 0; i < n; i++) alv[i] -= (int64_t)act[i];
        for (int line = 0; line < 2; line++) {
            const int64_t *x = line ? rsv : alv;
            int64_t last = 0, lasti = 0;
            uint64_t cnt = 0;
            for (int64_t i = 0; i < n; i++) cnt += x[i] != (i ? x[i - 1] : 0);
            vb_put(out, cnt);
            for (int64_t i = 0; i < n; i++)
                if (x[i] != (i ? x[i - 1] : 0)) {
                    vb_put(out, (uint64_t)(i - lasti));
                    vb_put(out, zz(x[i] - last));
                    lasti = i, last = x[i];
                }
        }
        /* the instant of each column: where the band stack is highest */
        for (uint32_t c = 0; c < ncols; c++) {
            int64_t a = (int64_t)c * VIEW_COL, b = a + VIEW_COL < n ? a + VIEW_COL : n, best = a;
            for (int64_t i = a; i < b; i++)
                if (act[i] > act[best]) best = i;
            inst[c] = best;
        }
        for (uint32_t i = 0; i < d.na; i++) {
            uint32_t st = site_of(g, d.a[i].stack);
            d.a[i].site = st > nsites ? nsites : st;
        }
        /* sweep: the live set at each instant, in allocation order */
        vb_put(out, ncols);
        uint32_t p = 0;
        for (uint32_t c = 0; c < ncols && rc == CMH_OK; c++) {
            int64_t e = inst[c];
            while (p < d.na && d.a[p].start <= e) {
                if (vs.nlive == vs.cap) {
                    uint32_t cap = vs.cap ? vs.cap * 2 : 1024;
                    uint32_t *l = realloc(vs.live, cap * sizeof *l);
                    if (l) vs.live = l;
                    uint32_t *bd = l ? realloc(vs.band, cap * sizeof *bd) : NULL;
                    if (bd) vs.band = bd;
                    if (!l || !bd) {
                        rc = CMH_ENOMEM;
                        break;
                    }
                    vs.cap = cap;
                }
                vs.live[vs.nlive++] = p++;
            }
            if (rc != CMH_OK) break;
            /* one pass over the live set: still live, then a band or folded into its site (the
             * bands are written after their count, the folds after the bands) */
            uint32_t k = 0, nband = 0;
            double thr = (double)act[e] / VIEW_FOLD;
            vs.ntouched = 0;
            for (uint32_t i = 0; i < vs.nlive; i++) {
                uint32_t id = vs.live[i];
                const vband *v = &d.a[id];
                if (v->end <= e) continue;
                vs.live[k++] = id;
                double size = (double)v->size;
                if (size >= thr) vs.band[nband++] = id;
                else {
                    uint32_t st = v->site;
                    if (vs.fold[st] == 0) vs.touched[vs.ntouched++] = st;
                    vs.fold[st] += size;
                }
            }
            vs.nlive = k;
            vb_put(out, (uint64_t)(e - (int64_t)c * VIEW_COL));
            vb_put(out, nband);
            uint32_t last = 0;
            for (uint32_t i = 0; i < nband; i++) {
                vb_put(out, vs.band[i] - last);
                last = vs.band[i];
            }
            qsort(vs.touched, vs.ntouched, sizeof *vs.touched, cmp_u32);
            vb_put(out, vs.ntouched);
            last = 0;
            for (uint32_t i = 0; i < vs.ntouched; i++) {
                vb_put(out, vs.touched[i] - last);
                last = vs.touched[i];
                vb_put(out, (uint64_t)vs.fold[last]);
                vs.fold[last] = 0;
            }
            int64_t a = (int64_t)c * VIEW_COL, b = a + VIEW_COL < n ? a + VIEW_COL : n, am = 0, rm = 0;
            for (int64_t i = a; i < b; i++) {
                if (alv[i] + (int64_t)act[i] > am) am = alv[i] + (int64_t)act[i];
                if (rsv[i] > rm) rm = rsv[i];
            }
            vb_put(out, (uint64_t)am);
            vb_put(out, (uint64_t)rm);
        }
    }
    if (rc == CMH_OK) {
        /* coarser levels: each column the higher of its two children */
        uint32_t *lv = malloc(((size_t)ncols + 1) * sizeof *lv), m = ncols, nl = 0;
        if (!lv) rc = CMH_ENOMEM;
        for (uint32_t mm = ncols; rc == CMH_OK && mm > 1; mm = (mm + 1) / 2) nl++;
        if (rc == CMH_OK) {
            vb_put(out, nl);
            for (uint32_t c = 0; c < ncols; c++) lv[c] = c;
            while (m > 1) {
                uint32_t nm = (m + 1) / 2;
                for (uint32_t c = 0; c < nm; c++) {
                    uint32_t x = lv[2 * c], y = 2 * c + 1 < m ? lv[2 * c + 1] : x;
                    lv[c] = act[inst[y]] > act[inst[x]] ? y : x;
                }
                m = nm;
                vb_put(out, m);
                uint32_t last = 0;
                for (uint32_t c = 0; c < m; c++) {
                    vb_put(out, lv[c] - last);
                    last = lv[c];
                }
            }
        }
        free(lv);
    }
    if (out->nomem) rc = CMH_ENOMEM;
    /* the device's facts for the page: peak, OOMs, marks, steps */
    if (rc == CMH_OK) {
        cmh_peak_report pk;
        if (cmh_peak_compute(s, dev, g, &pk) == CMH_OK) {
            cmh_jw_key(w, "peak");
            cmh_jw_obj(w);
            cmh_jw_kint(w, "bytes", pk.alloc_peak);
            cmh_jw_kint(w, "index", pk.alloc_index);
            cmh_jw_kint(w, "reserved", pk.reserved_peak);
            cmh_jw_kint(w, "reserved_index", pk.reserved_index);
            cmh_jw_end(w);
            cmh_jw_kuint(w, "dropped", pk.base.dropped);
            cmh_peak_report_free(&pk);
        }
        const cmh_trace *t = cmh_snapshot_trace(s, dev);
        cmh_jw_key(w, "events");
        cmh_jw_arr(w);
        for (uint32_t i = 0; t && i < t->nentries; i++) {
            const cmh_entry *e = &s->entries[t->first_entry + i];
            if (e->action != CMH_ACT_OOM && e->action != CMH_ACT_MARK) continue;
            cmh_jw_obj(w);
            cmh_jw_kint(w, "i", i);
            cmh_jw_kstr(w, "kind", e->action == CMH_ACT_OOM ? "oom" : "mark");
            if (e->action == CMH_ACT_OOM) {
                uint64_t freed;
                cmh_jw_kuint(w, "size", cmh_entry_size(s, e));
                cmh_jw_key(w, "free"); /* null: not known */
                if (cmh_entry_addr(s, e) == CMH_DEVICE_FREE_UNKNOWN) cmh_jw_null(w);
                else cmh_jw_uint(w, cmh_entry_addr(s, e));
                cmh_jw_kbool(w, "retried", cmh_oom_retried(s, t, i, &freed)); /* (no OOM the program saw) */
            } else cmh_jw_kstr(w, "label", cmh_str(s, cmh_entry_name(s, e)));
            cmh_jw_end(w);
        }
        /* annotations have times only: each sits at the first entry not before it */
        for (uint32_t k = 0; t && t->nentries && k < s->nannotations; k++) {
            const cmh_annotation *a = &s->annotations[k];
            if ((a->device != dev && a->device >= 0) || a->stage != 0 || !a->time_ns) continue;
            uint32_t lo = 0, hi = t->nentries;
            while (lo < hi) {
                uint32_t mid = (lo + hi) / 2;
                if (cmh_entry_time(s, &s->entries[t->first_entry + mid]) < a->time_ns) lo = mid + 1;
                else hi = mid;
            }
            if (lo >= t->nentries) continue;
            cmh_jw_obj(w);
            cmh_jw_kint(w, "i", lo);
            cmh_jw_kstr(w, "kind", "annotation");
            cmh_jw_kstr(w, "label", cmh_str(s, a->name));
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        /* the steps leaks judges by (a report page found them already, its leaks): the record's,
         * or, where the recording threads race, each thread's own (the record's pattern across
         * them is the scheduler's, and leaks judges by none of it) */
        cmh_leak_report lp;
        cmh_steps *ts = NULL;
        uint32_t nts = 0;
        int src = cmh_leak_steps_judged(s, dev, g, &lp, &ts, &nts);
        cmh_jw_key(w, "steps");
        cmh_jw_arr(w);
        for (uint32_t i = 0; src == CMH_OK && !lp.steps_raced && i < lp.steps.npoints; i++) cmh_jw_int(w, lp.steps.points[i]);
        cmh_jw_end(w);
        cmh_jw_kstr(w, "steps_label", src == CMH_OK && !lp.steps_raced && lp.steps.count ? lp.steps.label : "");
        if (src == CMH_OK && lp.steps_raced) {
            char words[512], who[96];
            cmh_jw_kstr(w, "steps_note", cmh_leak_steps_text(&lp, words, sizeof words));
            cmh_jw_key(w, "thread_steps");
            cmh_jw_arr(w);
            for (uint32_t k = 0; k < nts; k++) {
                const cmh_thread_info *ti = cmh_snapshot_thread(s, ts[k].thread);
                const char *tn = ti ? cmh_str(s, ti->name) : "";
                if (ti && ti->tid && *tn) snprintf(who, sizeof who, "recording thread %u (tid %lld, '%.20s')", ts[k].thread, (long long)ti->tid, tn);
                else if (ti && ti->tid) snprintf(who, sizeof who, "recording thread %u (tid %lld)", ts[k].thread, (long long)ti->tid);
                else snprintf(who, sizeof who, "recording thread %u", ts[k].thread);
                cmh_jw_obj(w);
                cmh_jw_kint(w, "thread", ts[k].thread);
                cmh_jw_kstr(w, "label", who);
                cmh_jw_kint(w, "count", ts[k].count);
                cmh_jw_key(w, "points");
                cmh_jw_arr(w);
                for (uint32_t i = 0; i < ts[k].npoints; i++) cmh_jw_int(w, ts[k].points[i]);
                cmh_jw_end(w);
                cmh_jw_end(w);
            }
            cmh_jw_end(w);
        }
        /* a trace that stops before its snapshot: the page's end is the trace's own (blocks it
         * never freed still drawn); the reports' end is the snapshot's: the heading says so there */
        char gap[1024];
        cmh_trace_gap tg;
        if (cmh_trace_gap_compute(s, dev, &tg) == CMH_OK &&
            cmh_gap_stops_text(&tg, (src == CMH_OK && lp.base.pytorch) || s->source == CMH_SRC_PYTORCH, " ", gap, sizeof gap))
            cmh_jw_kstr(w, "gap_note", gap);
        for (uint32_t k = 0; k < nts; k++) cmh_steps_free(&ts[k]);
        free(ts);
        if (src == CMH_OK) cmh_leak_report_free(&lp);
        cmh_jw_kint(w, "col", VIEW_COL);
    }
    free(vs.live), free(vs.band), free(vs.fold), free(vs.touched);
    free(inst), free(act), free(alv), free(rsv_own);
    vdev_free(&d);
    return rc;
}

/* Entry times for the panel: per device, a varint stream of µs deltas from the clock's origin,
 * one per entry (the panel shows when an allocation was made and freed). */
static void times_stream(const cmh_snapshot *s, int dev, int64_t t0, vbuf *out)
{
    const cmh_trace *t = cmh_snapshot_trace(s, dev);
    int64_t prev = 0;
    vb_put(out, t ? t->nentries : 0);
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        int64_t ns = cmh_entry_time(s, &s->entries[t->first_entry + i]), us = ns && t0 ? (ns - t0) / 1000 : prev;
        vb_put(out, zz(us - prev));
        prev = us;
    }
}

static int write_names(FILE *fp, const cmh_snapshot *s, const cmh_sites *g, const int32_t *devs, int nd, const char *title)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return CMH_ENOMEM;
    cmh_jw w;
    cmh_jw_init(&w, m);
    cmh_jw_obj(&w);
    cmh_jw_kstr(&w, "title", title ? title : "");
    cmh_jw_kstr(&w, "source", s->source == CMH_SRC_PYTORCH ? "pytorch" : "cumemhist");
    cmh_jw_kint(&w, "origin_ns", cmh_clock_origin(s));
    /* sites: label, file, line, function; stacks: site and frame ids, innermost first */
    uint32_t nsites = g ? cmh_sites_count(g) : s->nstacks;
    cmh_jw_key(&w, "sites");
    cmh_jw_arr(&w);
    char fb[1024];
    for (uint32_t i = 0; i < nsites; i++) {
        const cmh_frame *f = g ? cmh_sites_frame(g, i) : NULL;
        if (!g && i < s->nstacks && s->stacks[i].count) f = &s->frames[s->stack_frames[s->stacks[i].first]];
        cmh_jw_arr(&w);
        if (f) {
            cmh_svg_frame(s, f, fb, sizeof fb);
            cmh_jw_str(&w, fb);
            cmh_jw_str(&w, cmh_str(s, f->name));
            cmh_jw_str(&w, cmh_str(s, f->filename));
            cmh_jw_int(&w, f->line);
        } else { /* every report's words for it (cmh_no_stack_reason) */
            snprintf(fb, sizeof fb, "<no stack: %s>", cmh_no_stack_reason(s));
            cmh_jw_str(&w, fb);
        }
        cmh_jw_end(&w);
    }
    cmh_jw_end(&w);
    cmh_jw_key(&w, "stacks");
    cmh_jw_arr(&w);
    for (uint32_t i = 0; i < s->nstacks; i++) {
        cmh_jw_arr(&w);
        cmh_jw_uint(&w, site_of(g, i));
        for (uint32_t k = 0; k < s->stacks[i].count; k++) cmh_jw_uint(&w, s->stack_frames[s->stacks[i].first + k]);
        cmh_jw_end(&w);
    }
    cmh_jw_end(&w);
    cmh_jw_key(&w, "frames");
    cmh_jw_arr(&w);
    for (uint32_t i = 0; i < s->nframes; i++) {
        cmh_svg_frame(s, &s->frames[i], fb, sizeof fb);
        cmh_jw_arr(&w);
        cmh_jw_str(&w, fb);
        cmh_jw_bool(&w, g && cmh_sites_machinery(g, i));
        cmh_jw_end(&w);
    }
    cmh_jw_end(&w);
    cmh_jw_key(&w, "devices");
    cmh_jw_arr(&w);
    int rc = CMH_OK;
    vbuf *streams = calloc((size_t)nd * 2 + 1, sizeof *streams);
    if (!streams) rc = CMH_ENOMEM;
    for (int k = 0; k < nd && rc == CMH_OK; k++) {
        cmh_jw_obj(&w);
        cmh_jw_kint(&w, "device", devs[k]);
        rc = device_stream(s, g, devs[k], &streams[2 * k], &w);
        times_stream(s, devs[k], cmh_clock_origin(s), &streams[2 * k + 1]);
        if (streams[2 * k + 1].nomem) rc = CMH_ENOMEM;
        cmh_jw_end(&w);
    }
    cmh_jw_end(&w);
    cmh_jw_end(&w);
    int jrc = cmh_jw_finish(&w);
    fclose(m);
    if (rc == CMH_OK && jrc != CMH_OK) rc = jrc;
    if (rc == CMH_OK) {
        fputs("<script type=\"application/json\" id=\"cmh-view-meta\">", fp);
        put_script_json(fp, buf, len);
        fputs("</script>\n", fp);
        for (int k = 0; k < nd; k++) {
            fprintf(fp, "<script type=\"application/octet-stream\" id=\"cmh-view-d%d\">", k);
            b64(fp, streams[2 * k].p, streams[2 * k].n);
            fprintf(fp, "</script>\n<script type=\"application/octet-stream\" id=\"cmh-view-t%d\">", k);
            b64(fp, streams[2 * k + 1].p, streams[2 * k + 1].n);
            fputs("</script>\n", fp);
        }
    }
    for (int k = 0; streams && k < 2 * nd; k++) free(streams[k].p);
    free(streams);
    free(buf);
    return rc;
}

int cmh_view_embed(const cmh_snapshot *s, const cmh_sites *g, const int32_t *devices, int ndevices, const char *title, FILE *fp)
{
    fputs("<section class=\"cmh-view\" id=\"cmh-view\" aria-label=\"Active memory timeline\"><noscript>The interactive "
          "timeline needs JavaScript.</noscript></section>\n",
          fp);
    int rc = write_names(fp, s, g, devices, ndevices, title);
    if (rc != CMH_OK) return rc;
    fputs("<script>", fp);
    fputs(cmh_view_js, fp);
    fputs("</script>\n", fp);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}

const char *cmh_view_css_text(void) { return cmh_view_css; }

int cmh_view_html(const cmh_snapshot *s, const cmh_sites *g, const int32_t *devices, int ndevices, const char *title, FILE *fp)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, "
          "initial-scale=1\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
          "script-src 'unsafe-inline'; img-src data:\"><title>cumemhist view: ",
          fp);
    cmh_svg_text(fp, title ? title : "snapshot");
    fprintf(fp, "</title><style>%s</style></head><body class=\"cmh-view-page\">\n", cmh_view_css);
    int rc = cmh_view_embed(s, g, devices, ndevices, title, fp);
    fputs("</body></html>\n", fp);
    if (rc == CMH_OK && ferror(fp)) rc = CMH_EIO;
    return rc;
}
