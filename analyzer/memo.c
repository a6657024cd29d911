/*
 * memo.c - the whole-trace results of a snapshot (peak totals, the end state, the blocks live at
 * the end, the reserved peak), each from one replay, and the memo that keeps them, the sites at
 * the peak, the steps and the clock span while a snapshot is read-only (reports.h's
 * cmh_replay_memo_begin/end: a report page asks for each many times).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "grow.h"
#include "memo.h"

/* ---- the memo: whole-trace results kept while a snapshot is read-only (reports.h) ----
 * One snapshot at a time (the first begin's; a begin for another is not memoized), its devices'
 * totals and end state, and per (device, grouping) the sites at the peak.  Threads of a report
 * page ask at once: the table is locked, the replays run outside the lock (two threads may
 * compute the same figures; the first stored stays). */
typedef struct memo_dev {
    int device, rc;
    cmh_peak_report pk; /* without sites */
    cmh_mem_stats st;
    cmh_live_block *live; /* the active blocks at the end, in the replay's order */
    uint32_t nlive;
    int64_t rpeak[2]; /* cmh_reserved_first_peak's */
    cmh_replay_history *hist; /* with g_memo_want_hist */
    cmh_replay *at_peak;      /* with g_memo_want_hist: standing at the allocated peak (its sites) */
} memo_dev;

typedef struct memo_sites {
    int device;
    const cmh_sites *sites;
    cmh_site *v;
    uint32_t n;
} memo_sites;

static pthread_mutex_t g_memo_lock = PTHREAD_MUTEX_INITIALIZER;
static const cmh_snapshot *g_memo_s;
static int g_memo_depth;
static memo_dev *g_memo_dev;
static memo_sites *g_memo_sites;
static uint32_t g_memo_ndev, g_memo_nsites;
typedef struct memo_steps {
    int device;
    const cmh_sites *sites;
    cmh_steps st;
} memo_steps;
static memo_steps *g_memo_steps;
static uint32_t g_memo_nsteps;
static int g_memo_clock_known; /* g_memo_clock holds the record's clock span (clock.c) */
static int64_t g_memo_clock[2];
static uint32_t g_memo_replays; /* whole replays run for the memo's snapshot (cmh_replay_memo_end returns it) */
static int g_memo_want_hist; /* keep each device's history (cmh_replay_memo_history) */

/* ---- a device's history (reports.h's cmh_replay_history), filled by the memo's replay ---- */
typedef struct hist_rec {
    cmh_replay_history h;
    int64_t *a, *r;      /* h.allocated, h.reserved */
    cmh_block_event *ev; /* h.ev */
    uint64_t cap;
    uint32_t pos1; /* the event's entry + 1, set before each step */
    int nomem;
} hist_rec;

static void hist_free(cmh_replay_history *h)
{
    if (!h) return;
    hist_rec *x = (hist_rec *)h;
    free(x->a);
    free(x->r);
    free(x->ev);
    free(x);
}

static void hist_observe(void *arg, int64_t delta, uint32_t stack, uint64_t addr)
{
    hist_rec *x = arg;
    if (x->nomem) return;
    if (x->h.nev == x->cap) {
        uint64_t nc = x->cap ? x->cap * 2 : 4096;
        cmh_block_event *nv = realloc(x->ev, nc * sizeof *nv);
        if (!nv) {
            x->nomem = 1;
            return;
        }
        x->ev = nv;
        x->cap = nc;
    }
    x->ev[x->h.nev++] = (cmh_block_event){addr, delta, x->pos1, stack};
}

/* A history for r's trace, not yet filled (NULL: out of memory, or a trace too long to number). */
static hist_rec *hist_new(cmh_replay *r)
{
    int64_t n = cmh_replay_length(r);
    if (n >= (int64_t)UINT32_MAX - 1) return NULL;
    hist_rec *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->h.n = n;
    x->a = malloc(((size_t)n + 1) * sizeof *x->a);
    x->r = malloc(((size_t)n + 1) * sizeof *x->r);
    if (!x->a || !x->r) {
        hist_free(&x->h);
        return NULL;
    }
    const cmh_mem_stats *st = cmh_replay_stats(r);
    x->h.allocated0 = st->allocated_bytes[0].current;
    x->h.reserved0 = st->reserved_bytes[0].current;
    cmh_replay_observe(r, hist_observe, x); /* the blocks before the first entry: pos1 0 */
    return x;
}

void cmh_replay_memo_history(const cmh_snapshot *s)
{
    pthread_mutex_lock(&g_memo_lock);
    if (g_memo_s == s) g_memo_want_hist = 1;
    pthread_mutex_unlock(&g_memo_lock);
}

void cmh_replay_memo_begin(const cmh_snapshot *s)
{
    pthread_mutex_lock(&g_memo_lock);
    if (!g_memo_s) {
        g_memo_s = s;
        g_memo_depth = 1;
        g_memo_replays = 0;
        g_memo_clock_known = 0;
        g_memo_want_hist = 0;
        cmh_replay_memo_keep(s);
    } else if (g_memo_s == s) g_memo_depth++;
    pthread_mutex_unlock(&g_memo_lock);
}

uint32_t cmh_replay_memo_end(const cmh_snapshot *s)
{
    uint32_t n = 0;
    pthread_mutex_lock(&g_memo_lock);
    if (g_memo_s == s && --g_memo_depth == 0) {
        for (uint32_t i = 0; i < g_memo_nsites; i++) free(g_memo_sites[i].v);
        free(g_memo_sites);
        for (uint32_t i = 0; i < g_memo_ndev; i++) {
            free(g_memo_dev[i].live);
            hist_free(g_memo_dev[i].hist);
            cmh_replay_free(g_memo_dev[i].at_peak);
        }
        for (uint32_t i = 0; i < g_memo_nsteps; i++) free(g_memo_steps[i].st.points);
        free(g_memo_steps);
        g_memo_steps = NULL;
        g_memo_nsteps = 0;
        free(g_memo_dev);
        g_memo_sites = NULL;
        g_memo_dev = NULL;
        g_memo_ndev = g_memo_nsites = 0;
        g_memo_s = NULL;
        g_memo_clock_known = 0;
        g_memo_want_hist = 0;
        n = g_memo_replays;
        cmh_replay_memo_keep(NULL);
    }
    pthread_mutex_unlock(&g_memo_lock);
    return n;
}

int cmh_memo_clock_get(const cmh_snapshot *s, int64_t *lo, int64_t *hi)
{
    int found = 0;
    pthread_mutex_lock(&g_memo_lock);
    if (g_memo_s == s && g_memo_clock_known) {
        *lo = g_memo_clock[0], *hi = g_memo_clock[1];
        found = 1;
    }
    pthread_mutex_unlock(&g_memo_lock);
    return found;
}

void cmh_memo_clock_put(const cmh_snapshot *s, int64_t lo, int64_t hi)
{
    pthread_mutex_lock(&g_memo_lock);
    if (g_memo_s == s) {
        g_memo_clock[0] = lo, g_memo_clock[1] = hi;
        g_memo_clock_known = 1;
    }
    pthread_mutex_unlock(&g_memo_lock);
}

typedef struct live_list {
    cmh_live_block *v;
    uint32_t n, cap;
    int nomem;
} live_list;

static void on_live(void *arg, const cmh_live_block *b)
{
    live_list *l = arg;
    if (l->nomem) return;
    if (l->n == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 256;
        cmh_live_block *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->nomem = 1;
            return;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = *b;
}

/* The whole trace replayed once: the totals of the peak report (no sites) and the end state
 * (with live, its active blocks too; with hist, what it saw on the way).  With at_peak it also
 * hands back a replay standing at the allocated peak, for its sites.  A second replay from the
 * start to the peak would cost more the later the peak comes (peak was 11% above linear from 1M
 * to 2M entries); instead a copy of the state is kept at a new maximum when the last copy is
 * over a sixteenth of the trace behind, and the kept copy goes on to the final peak: at most 16
 * copies and a sixteenth of the trace. */
static int whole_replay(const cmh_snapshot *s, int device, cmh_peak_report *p, cmh_mem_stats *end, live_list *live, int64_t rpeak[2],
                        hist_rec **hist, cmh_replay **at_peak)
{
    rpeak[0] = rpeak[1] = -1;
    memset(p, 0, sizeof *p);
    memset(end, 0, sizeof *end);
    cmh_report_base_fill(s, device, &p->base);
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    const cmh_mem_stats *st = cmh_replay_stats(r);
    p->alloc_peak = st->allocated_bytes[0].current;
    p->alloc_unsplit = cmh_replay_unsplit_bytes(r);
    p->reserved_peak = st->reserved_bytes[0].current;
    p->requested_peak = st->requested_bytes[0].current;
    p->alloc_index = p->reserved_index = p->requested_index = -1;
    p->alloc_start = p->alloc_peak;
    p->reserved_start = p->reserved_peak;
    p->allocs_start = st->allocation[0].allocated;
    rpeak[0] = p->reserved_peak; /* the state before the first entry counts, as for `peak` (owners said 'entry 0') */
    hist_rec *h = hist ? hist_new(r) : NULL;
    if (h) h->pos1 = 1;
    cmh_replay *ck = at_peak ? cmh_replay_clone(r) : NULL; /* the state at (or before) the peak so far */
    int64_t ck_pos = -1, ck_gap = cmh_replay_length(r) / 16;
    if (ck_gap < 4096) ck_gap = 4096;
    while (cmh_replay_step(r)) {
        int64_t i = cmh_replay_position(r);
        if (h) {
            h->a[i] = st->allocated_bytes[0].current;
            h->r[i] = st->reserved_bytes[0].current;
            h->pos1 = (uint32_t)i + 2; /* the next step's entry, or the reconciliation after the last */
        }
        if (st->reserved_bytes[0].current > rpeak[0]) rpeak[0] = st->reserved_bytes[0].current, rpeak[1] = i;
        p->reserved_last = st->reserved_bytes[0].current; /* (the last entry's, before the reconciliation) */
        p->active_last = st->active_bytes[0].current;
        if (st->requested_bytes[0].current > p->requested_peak) {
            p->requested_peak = st->requested_bytes[0].current;
            p->requested_index = i;
            p->requested_time_ns = cmh_entry_time(cmh_replay_snapshot(r), cmh_replay_entry(r, i));
        }
        if (st->allocated_bytes[0].current > p->alloc_peak) {
            p->alloc_peak = st->allocated_bytes[0].current;
            p->alloc_unsplit = cmh_replay_unsplit_bytes(r);
            p->alloc_index = i;
            p->alloc_time_ns = cmh_entry_time(cmh_replay_snapshot(r), cmh_replay_entry(r, i));
            if (ck && i - ck_pos > ck_gap) {
                cmh_replay *c2 = cmh_replay_clone(r);
                if (c2) {
                    cmh_replay_free(ck);
                    ck = c2;
                    ck_pos = i;
                }
            }
        }
        if (st->reserved_bytes[0].current > p->reserved_peak) {
            p->reserved_peak = st->reserved_bytes[0].current;
            p->reserved_index = i;
            p->reserved_time_ns = cmh_entry_time(cmh_replay_snapshot(r), cmh_replay_entry(r, i));
        }
    }
    if (p->base.history) cmh_replay_gap(r, &p->base.gap); /* (no history: no trace to disagree with the end) */
    p->alloc_end = st->allocated_bytes[0].current;
    p->reserved_end = st->reserved_bytes[0].current;
    p->requested_end = st->requested_bytes[0].current;
    p->active_end = st->active_bytes[0].current;
    int64_t n = cmh_replay_length(r);
    /* reconciling the end with the final segments may have raised the figures past every entry */
    if (p->alloc_end > p->alloc_peak) p->alloc_peak = p->alloc_end, p->alloc_index = n, p->alloc_unsplit = cmh_replay_unsplit_bytes(r);
    if (p->reserved_end > p->reserved_peak) p->reserved_peak = p->reserved_end, p->reserved_index = n;
    if (p->requested_end > p->requested_peak) p->requested_peak = p->requested_end, p->requested_index = n;
    int rc = cmh_replay_status(r);
    if (rc == CMH_OK) *end = *st;
    if (rc == CMH_OK && live) cmh_replay_blocks(r, on_live, live);
    if (h && (rc != CMH_OK || h->nomem)) {
        hist_free(&h->h);
        h = NULL;
    }
    if (h) {
        h->h.allocated = h->a;
        h->h.reserved = h->r;
        h->h.ev = h->ev;
        h->h.allocated_end = st->allocated_bytes[0].current;
        h->h.reserved_end = st->reserved_bytes[0].current;
        *hist = h;
    }
    if (ck && rc == CMH_OK) { /* on to the peak, as a replay from the start would go */
        while (cmh_replay_position(ck) < p->alloc_index && cmh_replay_step(ck)) {}
        if (cmh_replay_status(ck) == CMH_OK) {
            cmh_replay_take_arrays(ck, r);
            *at_peak = ck;
            ck = NULL;
        }
    }
    cmh_replay_free(ck);
    cmh_replay_free(r);
    if (rc != CMH_OK) memset(p, 0, sizeof *p);
    return rc;
}

/* whole_replay, through the memo */
static int whole(const cmh_snapshot *s, int device, cmh_peak_report *p, cmh_mem_stats *end, int64_t rpeak[2])
{
    pthread_mutex_lock(&g_memo_lock);
    int memo = g_memo_s == s;
    for (uint32_t i = 0; memo && i < g_memo_ndev; i++)
        if (g_memo_dev[i].device == device) {
            *p = g_memo_dev[i].pk;
            *end = g_memo_dev[i].st;
            rpeak[0] = g_memo_dev[i].rpeak[0];
            rpeak[1] = g_memo_dev[i].rpeak[1];
            int rc = g_memo_dev[i].rc;
            pthread_mutex_unlock(&g_memo_lock);
            return rc;
        }
    int want_hist = memo && g_memo_want_hist;
    pthread_mutex_unlock(&g_memo_lock);
    live_list live = {0};
    hist_rec *hist = NULL;
    cmh_replay *atpk = NULL;
    int rc = whole_replay(s, device, p, end, memo ? &live : NULL, rpeak, want_hist ? &hist : NULL, want_hist ? &atpk : NULL);
    if (!memo || rc == CMH_ENOMEM || live.nomem) { /* out of memory: maybe not the next time */
        free(live.v);
        hist_free(hist ? &hist->h : NULL);
        cmh_replay_free(atpk);
        return rc;
    }
    pthread_mutex_lock(&g_memo_lock);
    int have = g_memo_s != s;
    for (uint32_t i = 0; !have && i < g_memo_ndev; i++) have = g_memo_dev[i].device == device;
    memo_dev *nd = have ? NULL : realloc(g_memo_dev, (g_memo_ndev + 1) * sizeof *nd);
    if (nd) {
        g_memo_dev = nd;
        nd[g_memo_ndev++] = (memo_dev){device, rc, *p, *end, live.v, live.n, {rpeak[0], rpeak[1]}, hist ? &hist->h : NULL, atpk};
        g_memo_replays++;
    } else {
        free(live.v);
        hist_free(hist ? &hist->h : NULL);
        cmh_replay_free(atpk);
    }
    pthread_mutex_unlock(&g_memo_lock);
    return rc;
}

int cmh_end_blocks(const cmh_snapshot *s, int device, void (*fn)(void *, const cmh_live_block *), void *arg)
{
    cmh_mem_stats end;
    cmh_peak_report p;
    int64_t rp[2];
    int rc = whole(s, device, &p, &end, rp); /* kept, when the memo is */
    if (rc != CMH_OK) return rc;
    pthread_mutex_lock(&g_memo_lock);
    for (uint32_t i = 0; g_memo_s == s && i < g_memo_ndev; i++)
        if (g_memo_dev[i].device == device) {
            for (uint32_t k = 0; k < g_memo_dev[i].nlive; k++) fn(arg, &g_memo_dev[i].live[k]);
            pthread_mutex_unlock(&g_memo_lock);
            return CMH_OK;
        }
    pthread_mutex_unlock(&g_memo_lock);
    cmh_replay *r = cmh_replay_new(s, device); /* no memo: the replay itself */
    if (!r) return CMH_ENOMEM;
    while (cmh_replay_step(r)) {}
    rc = cmh_replay_status(r);
    if (rc == CMH_OK) cmh_replay_blocks(r, fn, arg);
    cmh_replay_free(r);
    return rc;
}

const cmh_replay_history *cmh_memo_history(const cmh_snapshot *s, int device)
{
    cmh_mem_stats end;
    cmh_peak_report p;
    int64_t rp[2];
    pthread_mutex_lock(&g_memo_lock);
    int kept = g_memo_s == s && g_memo_want_hist;
    pthread_mutex_unlock(&g_memo_lock);
    if (!kept || whole(s, device, &p, &end, rp) != CMH_OK) return NULL; /* no replay without the memo */
    const cmh_replay_history *h = NULL;
    pthread_mutex_lock(&g_memo_lock);
    for (uint32_t i = 0; g_memo_s == s && i < g_memo_ndev; i++) /* (a history is never moved: stable until the end) */
        if (g_memo_dev[i].device == device) h = g_memo_dev[i].hist;
    pthread_mutex_unlock(&g_memo_lock);
    return h;
}

int cmh_peak_replay_end(const cmh_snapshot *s, int device, cmh_peak_report *p, const cmh_replay **at, cmh_replay **owned,
                        void (*end_fn)(void *, const cmh_live_block *), void *end_arg)
{
    cmh_mem_stats end;
    int64_t rp[2];
    *at = NULL;
    *owned = NULL;
    pthread_mutex_lock(&g_memo_lock);
    int memo = g_memo_s == s;
    pthread_mutex_unlock(&g_memo_lock);
    if (!memo) { /* one replay for both (and for the end's blocks, when asked) */
        live_list live = {0};
        int rc = whole_replay(s, device, p, &end, end_fn ? &live : NULL, rp, NULL, owned);
        *at = *owned;
        if (rc == CMH_OK && live.nomem) rc = CMH_ENOMEM;
        for (uint32_t i = 0; rc == CMH_OK && i < live.n; i++) end_fn(end_arg, &live.v[i]);
        free(live.v);
        return rc;
    }
    int rc = whole(s, device, p, &end, rp);
    if (rc == CMH_OK && end_fn) rc = cmh_end_blocks(s, device, end_fn, end_arg);
    if (rc != CMH_OK) return rc;
    pthread_mutex_lock(&g_memo_lock); /* (kept until the memo ends, and only read) */
    for (uint32_t i = 0; g_memo_s == s && i < g_memo_ndev; i++)
        if (g_memo_dev[i].device == device) *at = g_memo_dev[i].at_peak;
    pthread_mutex_unlock(&g_memo_lock);
    return rc;
}

int cmh_peak_replay(const cmh_snapshot *s, int device, cmh_peak_report *p, const cmh_replay **at, cmh_replay **owned)
{
    return cmh_peak_replay_end(s, device, p, at, owned, NULL, NULL);
}

int cmh_whole_replay(const cmh_snapshot *s, int device, cmh_mem_stats *end)
{
    cmh_peak_report p;
    int64_t rp[2];
    return whole(s, device, &p, end, rp);
}

int cmh_whole_replay_peak(const cmh_snapshot *s, int device, cmh_mem_stats *end, cmh_peak_report *p)
{
    int64_t rp[2];
    return whole(s, device, p, end, rp);
}

int cmh_trace_gap_compute(const cmh_snapshot *s, int device, cmh_trace_gap *out)
{
    cmh_peak_report p;
    cmh_mem_stats end;
    int64_t rp[2];
    int rc = whole(s, device, &p, &end, rp);
    memset(out, 0, sizeof *out);
    if (rc == CMH_OK) *out = p.base.gap;
    return rc;
}

int cmh_peak_totals(const cmh_snapshot *s, int device, cmh_peak_report *p)
{
    cmh_mem_stats end;
    int64_t rp[2];
    return whole(s, device, p, &end, rp);
}

int cmh_reserved_first_peak(const cmh_snapshot *s, int device, int64_t *peak, int64_t *index)
{
    int64_t end;
    return cmh_reserved_peaks(s, device, peak, index, &end);
}

int cmh_reserved_peaks(const cmh_snapshot *s, int device, int64_t *peak, int64_t *index, int64_t *end_reserved)
{
    cmh_peak_report p;
    return cmh_reserved_peaks_totals(s, device, peak, index, end_reserved, &p);
}

int cmh_reserved_peaks_totals(const cmh_snapshot *s, int device, int64_t *peak, int64_t *index, int64_t *end_reserved,
                              cmh_peak_report *p)
{
    cmh_mem_stats end;
    int64_t rp[2];
    int rc = whole(s, device, p, &end, rp);
    *peak = rp[0];
    *index = rp[1];
    *end_reserved = p->reserved_end;
    return rc;
}

/* The memo's sites at device's peak with this grouping, copied into p (1), or 0. */
int cmh_memo_sites_get(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *p)
{
    int got = 0;
    pthread_mutex_lock(&g_memo_lock);
    for (uint32_t i = 0; g_memo_s == s && i < g_memo_nsites && !got; i++) {
        const memo_sites *m = &g_memo_sites[i];
        if (m->device != device || m->sites != sites) continue;
        cmh_site *v = m->n ? malloc(m->n * sizeof *v) : NULL;
        if (m->n && !v) break;
        if (m->n) memcpy(v, m->v, m->n * sizeof *v);
        p->sites = v;
        p->nsites = m->n;
        got = 1;
    }
    pthread_mutex_unlock(&g_memo_lock);
    return got;
}

void cmh_memo_sites_put(const cmh_snapshot *s, int device, const cmh_sites *sites, const cmh_peak_report *p)
{
    pthread_mutex_lock(&g_memo_lock);
    int have = g_memo_s != s;
    for (uint32_t i = 0; !have && i < g_memo_nsites; i++) have = g_memo_sites[i].device == device && g_memo_sites[i].sites == sites;
    cmh_site *v = have || !p->nsites ? NULL : malloc(p->nsites * sizeof *v);
    memo_sites *nm = have || (p->nsites && !v) ? NULL : realloc(g_memo_sites, (g_memo_nsites + 1) * sizeof *nm);
    if (nm) {
        if (p->nsites) memcpy(v, p->sites, p->nsites * sizeof *v);
        g_memo_sites = nm;
        nm[g_memo_nsites++] = (memo_sites){device, sites, v, p->nsites};
        g_memo_replays++;
    } else free(v);
    pthread_mutex_unlock(&g_memo_lock);
}

static int copy_steps(cmh_steps *to, const cmh_steps *from)
{
    *to = *from;
    to->points = NULL;
    if (!from->npoints) return 1;
    if (!(to->points = malloc(from->npoints * sizeof *to->points))) return 0;
    memcpy(to->points, from->points, from->npoints * sizeof *to->points);
    return 1;
}

int cmh_memo_steps_get(const cmh_snapshot *s, int device, const cmh_sites *sites, uint32_t thread, cmh_steps *out)
{
    int got = 0;
    pthread_mutex_lock(&g_memo_lock);
    for (uint32_t i = 0; g_memo_s == s && i < g_memo_nsteps && !got; i++) {
        const memo_steps *m = &g_memo_steps[i];
        if (m->device == device && m->sites == sites && m->st.thread == thread) got = copy_steps(out, &m->st);
    }
    pthread_mutex_unlock(&g_memo_lock);
    return got;
}

void cmh_memo_steps_put(const cmh_snapshot *s, int device, const cmh_sites *sites, const cmh_steps *st)
{
    pthread_mutex_lock(&g_memo_lock);
    int have = g_memo_s != s;
    for (uint32_t i = 0; !have && i < g_memo_nsteps; i++)
        have = g_memo_steps[i].device == device && g_memo_steps[i].sites == sites && g_memo_steps[i].st.thread == st->thread;
    memo_steps *nm = have ? NULL : realloc(g_memo_steps, (g_memo_nsteps + 1) * sizeof *nm);
    if (nm) {
        g_memo_steps = nm;
        nm[g_memo_nsteps].device = device;
        nm[g_memo_nsteps].sites = sites;
        if (copy_steps(&nm[g_memo_nsteps].st, st)) {
            g_memo_nsteps++;
            g_memo_replays++;
        }
    }
    pthread_mutex_unlock(&g_memo_lock);
}
