/*
 * steps_loop.c - the loop found in the trace itself, where the record names no steps (no marks,
 * no annotations that are steps: steps.c tries those first, then cmh_steps_from_pattern()).
 *
 * Finding the loop.  Every allocation and free is a symbol (its action, size and site).  Two
 * ways, the first that answers wins:
 *  - anchors: a symbol that happens once per step (the batch's first tensor, the loss) recurs
 *    at regular intervals, and the stretches between its occurrences hold nearly the same
 *    symbols (a step that keeps extra state, or takes another branch, still matches); the one
 *    that recurs most often, passing both tests, gives the steps (of those as frequent, the
 *    first to appear: the loop's first operation).  Its gaps may instead be regular in runs
 *    of ops (an op repeated back to back counts once: dynamic shapes, a step of 1-8 activations),
 *    its stretches then alike as runs (the record's loop only, not a thread's own, and a
 *    period of more steps wins over it); and an anchor whose stretches are each the loop's ops
 *    in the same order several times over, a varying number of times (an op recurring by
 *    chance every few steps), is none; nor is one regular in runs whose gaps in events fall in
 *    a few regular phases (a loop that changed shape: the shape search below tells its shapes
 *    apart).  Its first occurrence, a stretch shorter than every later one and unlike the next,
 *    is set-up (the anchor's op made once before the loop) and no step's;
 *  - autocorrelation of the symbol sequence: the shortest lag at which the sequence repeats
 *    itself best, for loops whose every symbol recurs several times a step (a thread that does
 *    the same alloc and free over and over, keeping one block every so often); the steps are
 *    then cut at the phase of the period where the loop holds the fewest bytes.
 * Either way a step holds at least two events, the loop repeats at least twice, and what is
 * not a whole step at the ends (set-up, tear-down) is no step.  Steps cut at an anchor mid-step
 * whose last one lacks half a step's events: the ops before the first anchor, as many as it
 * lacks and alike the last step's before its anchor, are the first iteration's, a step with the
 * first (the first iteration's ops before the anchor and the last one's after it, each short).
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "grow.h"
#include "steps_loop.h"

typedef struct ev {
    uint64_t sym;  /* action, size and site, mixed */
    uint64_t site; /* action and site: the same op whatever its size (a batch of another shape) */
    uint32_t stack; /* its whole call stack (0: none captured) */
    int64_t pos;   /* entry index */
    int64_t net;   /* bytes held by the series before this event (allocations minus frees) */
    int alloc;     /* an allocation: only these anchor steps */
    uint32_t thread, tpos; /* its recording thread, and its index among that thread's events */
    uint32_t run, trun;    /* its run's index (a run: events of one op, action and site, back to back), among all events and among its thread's */
    int64_t t;             /* its entry's time (0: none) */
} ev;

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* The events of the series: block allocations and frees when the trace has blocks, else the
 * driver's segments (a recorder's trace without an allocator above the driver). */
static int events(const cmh_replay *r, const cmh_sites *g, uint32_t thread, ev **out, uint32_t *count)
{
    const cmh_snapshot *s = cmh_replay_snapshot(r);
    int64_t n = cmh_replay_length(r);
    int blocks = 0;
    for (int64_t i = 0; i < n && !blocks; i++) blocks = cmh_replay_entry(r, i)->action == CMH_ACT_ALLOC;
    ev *v = NULL;
    uint32_t nv = 0, cap = 0, per[257] = {0}, runs[257] = {0}, run = 0;
    uint64_t last_site[257] = {0};
    int64_t net = 0;
    for (int64_t i = 0; i < n; i++) {
        const cmh_entry *e = cmh_replay_entry(r, i);
        if (!cmh_steps_mine(s, e, thread)) continue;
        int sign;
        switch (e->action) {
        case CMH_ACT_ALLOC: sign = 1; break;
        case CMH_ACT_FREE_REQUESTED: sign = -1; break;
        case CMH_ACT_SEGMENT_ALLOC:
        case CMH_ACT_SEGMENT_MAP: sign = blocks ? 0 : 1; break;
        case CMH_ACT_SEGMENT_FREE:
        case CMH_ACT_SEGMENT_UNMAP: sign = blocks ? 0 : -1; break;
        default: sign = 0;
        }
        if (!sign) continue;
        if (CMH_GROW(v, cap, (uint64_t)nv + 1, 1024)) {
            free(v);
            return CMH_ENOMEM;
        }
        uint64_t site = g ? cmh_sites_group(g, e->stack) : e->stack;
        v[nv].site = mix(((uint64_t)e->action << 56) ^ (site + 1));
        v[nv].sym = mix(v[nv].site ^ mix(cmh_entry_size(s, e) + 0x9e3779b97f4a7c15ull));
        v[nv].stack = e->stack;
        v[nv].pos = i;
        v[nv].net = net;
        v[nv].alloc = sign > 0;
        v[nv].thread = cmh_entry_thread(s, e);
        uint32_t slot = v[nv].thread < 256 ? v[nv].thread : 256;
        v[nv].tpos = per[slot]++;
        if (nv && v[nv].site != v[nv - 1].site) run++;
        if (v[nv].tpos && v[nv].site != last_site[slot]) runs[slot]++;
        last_site[slot] = v[nv].site;
        v[nv].run = run;
        v[nv].trun = runs[slot];
        v[nv].t = cmh_entry_time(s, e);
        /* in unsigned arithmetic: a hostile file's sizes may run past int64 (the figure then wraps) */
        net = (int64_t)((uint64_t)net + (sign > 0 ? cmh_entry_size(s, e) : (uint64_t)0 - cmh_entry_size(s, e)));
        nv++;
    }
    *out = v;
    *count = nv;
    return CMH_OK;
}

typedef struct occ {
    uint64_t sym;
    uint32_t at; /* event index */
} occ;

static int cmp_occ(const void *a, const void *b)
{
    const occ *x = a, *y = b;
    if (x->sym != y->sym) return x->sym < y->sym ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* o[0..n) (at rising) in cmp_occ's order: a stable LSD radix sort on sym, 16 bits a pass, through
 * tmp (n slots); equal syms keep their rising at.  qsort's comparisons were a twentieth of a
 * report page on a 1M-entry trace. */
static void sort_occ(occ *o, occ *tmp, uint32_t n)
{
    static const unsigned shift[4] = {0, 16, 32, 48};
    uint32_t (*cnt)[65536] = calloc(4, sizeof *cnt);
    if (!cnt) { /* no room for the counts: the comparison sort, same order */
        qsort(o, n, sizeof *o, cmp_occ);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        for (int d = 0; d < 4; d++) cnt[d][(o[i].sym >> shift[d]) & 0xffff]++;
    occ *src = o, *dst = tmp;
    for (int d = 0; d < 4; d++) {
        uint32_t *c = cnt[d], sum = 0;
        if (n && c[(src[0].sym >> shift[d]) & 0xffff] == n) continue; /* one digit throughout: already in order */
        for (uint32_t k = 0; k < 65536; k++) {
            uint32_t x = c[k];
            c[k] = sum;
            sum += x;
        }
        for (uint32_t i = 0; i < n; i++) dst[c[(src[i].sym >> shift[d]) & 0xffff]++] = src[i];
        occ *sw = src;
        src = dst;
        dst = sw;
    }
    if (src != o) memcpy(o, src, (size_t)n * sizeof *o);
    free(cnt);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

#define MIN_COVER 7 /* tenths of the record the loop spans (covers()) */

/* A run of one operation repeated back to back (the same action from the same site: a cache
 * grown buffer by buffer until full, buffers freed in a loop), longer than a step. */
typedef struct burst {
    uint32_t at, len; /* events */
} burst;

static int cmp_burst(const void *a, const void *b)
{
    const burst *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    return (x->at > y->at) - (x->at < y->at);
}

/* The runs of events v[0..nv) longer than min_events, longest first (*out NULL when none). */
static int bursts_of(const ev *v, uint32_t nv, uint32_t min_events, burst **out, uint32_t *count)
{
    burst *b = NULL;
    uint32_t n = 0, cap = 0;
    for (uint32_t i = 0, j; i < nv; i = j) {
        for (j = i + 1; j < nv && v[j].site == v[i].site;) j++;
        if (j - i <= min_events) continue;
        if (CMH_GROW(b, cap, (uint64_t)n + 1, 64)) {
            free(b);
            return CMH_ENOMEM;
        }
        b[n++] = (burst){i, j - i};
    }
    if (n) qsort(b, n, sizeof *b, cmp_burst);
    *out = b;
    *count = n;
    return CMH_OK;
}

/* Does a loop of steps of `step` events over events [lo, hi) span most of the first nv?  Its own
 * events count as they are, and so does what lies outside it, but for a run of one operation
 * longer than a step (bursts): set-up or tear-down, one operation however many times it repeats,
 * and no step of the loop (each holds the loop's other operations too).  (An 8-step loop of 3
 * events followed by 63 buffers of one kind made and freed was a sixth of the record's events:
 * no loop, and the burst was then taken for 42 more steps.) */
static int covers(const burst *bu, uint32_t nb, uint32_t nv, uint32_t lo, uint32_t hi, uint32_t step)
{
    uint64_t in = hi - lo, out = (uint64_t)lo + (nv - hi);
    for (uint32_t k = 0; k < nb && bu[k].len > step; k++) {
        uint32_t a = bu[k].at, b = bu[k].at + bu[k].len < nv ? bu[k].at + bu[k].len : nv;
        uint32_t before = b < lo ? b : lo, after = a > hi ? a : hi; /* its parts outside [lo, hi) */
        if (before > a + 1) out -= before - a - 1;
        if (b > after + 1) out -= b - after - 1;
    }
    return in * 10 >= (in + out) * MIN_COVER;
}

/* How alike two stretches of events are: the share of their symbols (as multisets, by op
 * whatever the size) they have in common. */
/* The share two sorted multisets x[0, nx) and y[0, ny) have in common, of the larger. */
static double common_share(const uint64_t *x, uint32_t nx, const uint64_t *y, uint32_t ny)
{
    uint32_t i = 0, j = 0, common = 0;
    while (i < nx && j < ny) {
        if (x[i] == y[j]) common++, i++, j++;
        else if (x[i] < y[j]) i++;
        else j++;
    }
    return nx && ny ? (double)common / (double)(nx > ny ? nx : ny) : 0;
}

/* The same of tmp[0, na) and tmp[na, na + nb), sorted here. */
static double common_share_tmp(uint64_t *tmp, uint32_t na, uint32_t nb)
{
    qsort(tmp, na, sizeof *tmp, cmp_u64);
    qsort(tmp + na, nb, sizeof *tmp, cmp_u64);
    return common_share(tmp, na, tmp + na, nb);
}

static double alike(const ev *v, uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1, uint64_t *tmp)
{
    uint32_t na = a1 - a0, nb = b1 - b0;
    for (uint32_t i = 0; i < na; i++) tmp[i] = v[a0 + i].site;
    for (uint32_t i = 0; i < nb; i++) tmp[na + i] = v[b0 + i].site;
    return common_share_tmp(tmp, na, nb);
}

/* The ops (action and site) of events [a0, a1), a run of one op back to back as one, into out;
 * how many.  wrap: the last run joins the first when they are one op (the stretch seen as one
 * turn of a loop, whose next turn begins where it ends). */
static uint32_t run_ops(const ev *v, uint32_t a0, uint32_t a1, int wrap, uint64_t *out)
{
    uint32_t n = 0;
    for (uint32_t i = a0; i < a1; i++)
        if (!n || out[n - 1] != v[i].site) out[n++] = v[i].site;
    if (wrap && n > 1 && out[n - 1] == out[0]) n--;
    return n;
}

/* How many runs of ops events [a0, a1) hold. */
static uint32_t run_ops_count(const ev *v, uint32_t a0, uint32_t a1)
{
    uint32_t n = 0;
    for (uint32_t i = a0; i < a1; i++) n += i == a0 || v[i].site != v[i - 1].site;
    return n;
}

/* How alike two stretches of events are as runs of ops: alike()'s share over run_ops(). */
static double alike_runs(const ev *v, uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1, uint64_t *tmp)
{
    uint32_t na = run_ops(v, a0, a1, 0, tmp), nb = run_ops(v, b0, b1, 0, tmp + na);
    return common_share_tmp(tmp, na, nb);
}

/* Is the stretch of events [a0, a1), as runs of ops, one shorter turn repeated (the loop's ops in
 * the same order several times over)?  How many times (0 when not). */
static uint32_t turns(const ev *v, uint32_t a0, uint32_t a1, uint64_t *tmp)
{
    uint32_t n = run_ops(v, a0, a1, 1, tmp);
    for (uint32_t d = 1; d <= n / 2; d++) {
        if (n % d) continue;
        uint32_t i = 0;
        while (i + d < n && tmp[i] == tmp[i + d]) i++;
        if (i + d >= n) return n / d;
    }
    return 0;
}

/* The runs of ops just before the anchor at a that repeat, op for op, the runs just before the next
 * one at b (fewer than the stretch [a, b) holds, the anchor's own left out). */
static uint32_t head_runs(const ev *v, uint32_t a, uint32_t b)
{
    uint32_t h = 0, i = a, j = b, room = run_ops_count(v, a, b);
    while (i > 0 && j > a + 1 && h + 1 < room && v[i - 1].site == v[j - 1].site) {
        uint64_t si = v[i - 1].site;
        while (i > 0 && v[i - 1].site == si) i--;
        while (j > a + 1 && v[j - 1].site == si) j--;
        h++;
    }
    return h;
}

/* The event h runs of ops before a, no earlier than lo. */
static uint32_t back_runs(const ev *v, uint32_t a, uint32_t lo, uint32_t h)
{
    uint32_t i = a;
    for (uint32_t x = 0; x < h && i > lo; x++) {
        uint64_t si = v[i - 1].site;
        while (i > lo && v[i - 1].site == si) i--;
    }
    return i;
}

#define ANCHOR_CANDIDATES 64 /* tried, most frequent first */
#define MAX_SHAPES 4 /* a loop's shapes: phases of an anchor's gaps (by_anchor), found one before another (from_pattern) */
#define MIN_ALIKE 0.7
#define MIN_REPEAT 0.8

/* Are an anchor's gaps, in phases of plens[0..n) gaps each, a loop that changed shape: 2 to
 * MAX_SHAPES phases of 2 gaps at least, each followed by the next or by one odd gap then the next
 * (a transition: the anchor mid-step, the gap from it runs over the rest of a step of one shape
 * and the start of one of the next)? */
static int shaped(const uint32_t *plens, uint32_t n)
{
    if (n > 2 * MAX_SHAPES - 1) return 0;
    uint32_t longs = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (plens[k] >= 2) {
            longs++;
            continue;
        }
        /* one odd gap, between two phases of 2 gaps at least */
        if (!k || k + 1 >= n || plens[k - 1] < 2 || plens[k + 1] < 2) return 0;
    }
    return longs >= 2 && longs <= MAX_SHAPES;
}

/* Anchors: the symbol that recurs most often at regular intervals between stretches alike. */
static int by_anchor(const ev *v, uint32_t nv, const burst *bu, uint32_t nb, uint32_t min_events, uint32_t **starts, uint32_t *nstarts,
                     uint32_t *phases_out, uint32_t *last_out, int runs_ok, int *runs_out)
{
    *starts = NULL;
    *nstarts = 0;
    *phases_out = 1, *last_out = 0, *runs_out = 0;
    occ *o = malloc((size_t)nv * sizeof *o);
    uint64_t *tmp = malloc((size_t)nv * sizeof(occ)); /* sort_occ's room first, then alike's */
    if (!o || !tmp) {
        free(o);
        free(tmp);
        return CMH_ENOMEM;
    }
    uint32_t no = 0;
    for (uint32_t i = 0; i < nv; i++)
        if (v[i].alloc) o[no++] = (occ){v[i].sym, i};
    sort_occ(o, (occ *)(void *)tmp, no);
    /* candidates: symbols recurring with regular gaps */
    struct cand {
        uint32_t first, count; /* into o */
        uint32_t phases, last; /* its gaps' phases (a loop that changed shape), the occurrence the last begins at */
        int runs;              /* regular in runs only (dynamic shapes): its stretches compared as runs */
    } *cand = NULL;
    uint32_t nc = 0, capc = 0;
    for (uint32_t i = 0; i < no;) {
        uint32_t j = i;
        while (j < no && o[j].sym == o[i].sym) j++;
        uint32_t c = j - i;
        if (c >= 2 && (uint64_t)c * 2 <= nv) {
            /* the gaps after the first (the first step may make its state, and be longer), counted
             * in the events of the anchor's own thread when it keeps to one: other threads'
             * events, interleaved as the scheduler likes, do not make a step look longer */
            int one = 1;
            for (uint32_t k = i + 1; k < j && one; k++) one = v[o[k].at].thread == v[o[i].at].thread;
#define POS(q) (one ? v[o[q].at].tpos : o[q].at)
            /* the gaps after the first: their least and most, and the phases they fall in, each
             * regular (a loop that changed shape: 4 events a step, then 2) */
            uint32_t gmin = UINT32_MAX, gmax = 0, g1 = POS(i + 1) - POS(i), phases = 1, pmin = UINT32_MAX, pmax = 0, plen = 0, pshort = UINT32_MAX, plast = 0;
            /* the phases' lengths in gaps, as long as they are few (shaped(): a loop that changed shape) */
            uint32_t plens[2 * MAX_SHAPES + 1], nplens = 0, f0min = 0, f0max = 0;
            for (uint32_t k = i + 2; k < j; k++) {
                uint32_t gp = POS(k) - POS(k - 1);
                if (gp < gmin) gmin = gp;
                if (gp > gmax) gmax = gp;
                uint32_t lo = gp < pmin ? gp : pmin, hi = gp > pmax ? gp : pmax;
                if (plen && (uint64_t)hi * 2 > (uint64_t)lo * 3) { /* the next phase */
                    if (plen < pshort) pshort = plen;
                    if (!nplens) f0min = pmin, f0max = pmax;
                    if (nplens < 2 * MAX_SHAPES + 1) plens[nplens] = plen;
                    nplens++;
                    phases++, pmin = pmax = gp, plen = 1, plast = k - 1 - i;
                } else
                    pmin = lo, pmax = hi, plen++;
            }
            if (plen && plen < pshort) pshort = plen;
            if (plen && !nplens) f0min = pmin, f0max = pmax;
            if (plen && nplens < 2 * MAX_SHAPES + 1) plens[nplens] = plen;
            if (plen) nplens++;
            /* (the first gap is of the first phase where it is as regular with it: 3 steps of 5
             * events before steps of 17 are a phase, though their gaps after the first are 1) */
            if (nplens) {
                uint32_t lo = g1 < f0min ? g1 : f0min, hi = g1 > f0max ? g1 : f0max;
                if ((uint64_t)hi * 2 <= (uint64_t)lo * 3) plens[0]++;
            }
#undef POS
            if (c == 2) gmin = gmax = g1;
            /* the same gaps counted in runs (an op repeated back to back counts once): a loop of
             * dynamic shapes repeats an op as many times as its batch's length says, 1 to 8
             * activations a step, and its anchor's gaps, irregular in events, are regular in ops */
#define RPOS(q) (one ? v[o[q].at].trun : v[o[q].at].run)
            uint32_t rmin = UINT32_MAX, rmax = 0, r1 = RPOS(i + 1) - RPOS(i);
            for (uint32_t k = i + 2; k < j; k++) {
                uint32_t gp = RPOS(k) - RPOS(k - 1);
                if (gp < rmin) rmin = gp;
                if (gp > rmax) rmax = gp;
            }
#undef RPOS
            if (c == 2) rmin = rmax = r1;
            int in_runs = rmin >= 2 && (uint64_t)rmax * 2 <= (uint64_t)rmin * 3 && (uint64_t)r1 * 2 <= (uint64_t)rmax * 5;
            /* the loop: from the first anchor to a step past the last */
            uint32_t span = o[j - 1].at - o[i].at, past = o[j - 1].at + span / (c - 1);
            /* regular (the longest gap at most 1.5 times the shortest, the first at most 2.5
             * times the longest), steps of min_events at least, and the loop covering most of
             * the record.  A loop that changed shape (a cache that filled and stopped growing, a
             * leak that began late: the loop stopped or began making some allocations, its other
             * operations staying) is one loop: its gaps may fall in up to MAX_SHAPES phases, each
             * regular and of 2 gaps at least, and its steps may hold one event fewer than
             * min_events (never fewer than 2) where some step holds min_events, the first one
             * too (a block kept in the warm-up).  (A loop of 3 driver calls a step, then 2 once
             * its cache was full, read 'steps: unknown', its cache 'held, steps not found'.)  A
             * pair made and freed over and over with nothing else in any step is still no loop. */
            uint32_t least = min_events > 2 ? min_events - 1 : min_events;
            int sized = gmin >= min_events || (gmin >= least && (gmax >= min_events || g1 >= min_events));
            int regular_all = (uint64_t)gmax * 2 <= (uint64_t)gmin * 3, regular = regular_all || (phases <= MAX_SHAPES && pshort >= 2);
            int by_events = regular && (uint64_t)g1 * 2 <= (uint64_t)gmax * 5;
            /* (in runs at the record's level only, its occurrences all one thread's: a server's
             * threads, each serving requests of its buffer and 1-3 scratch blocks, taken by
             * whichever thread is free, are as regular in runs, and no loop) */
            in_runs = in_runs && !by_events && runs_ok && one;
            /* (nor where its gaps in events are a loop that changed shape: up to MAX_SHAPES phases,
             * each regular and of 2 gaps at least, one odd gap between two where the anchor is
             * mid-step (its step's ops before it, then the next shape's after it).  Those are the
             * shape search's (from_pattern: a step of 5 events, then of 17, each shape its own
             * period), which tells the shapes apart: in runs, 'shapes: 1') */
            in_runs = in_runs && !shaped(plens, nplens);
            if (sized && g1 >= least && (by_events || in_runs) && covers(bu, nb, nv, o[i].at, past < nv ? past : nv, span / (c - 1))) {
                if (CMH_GROW(cand, capc, (uint64_t)nc + 1, 64)) {
                    free(cand);
                    free(o);
                    free(tmp);
                    return CMH_ENOMEM;
                }
                cand[nc++] = by_events ? (struct cand){i, c, regular_all ? 1 : phases, regular_all ? 0 : plast, 0} : (struct cand){i, c, 1, 0, 1};
            }
        }
        i = j;
    }
    /* most occurrences first (insertion: the candidates are few) */
    for (uint32_t x = 1; x < nc; x++)
        for (uint32_t y = x; y && cand[y - 1].count < cand[y].count; y--) {
            struct cand t = cand[y];
            cand[y] = cand[y - 1];
            cand[y - 1] = t;
        }
    /* the most frequent anchor whose stretches are alike; of those as frequent, the one that
     * comes first: the loop's first operation, where a step begins */
    int best = -1;
    for (uint32_t q = 0; q < nc && q < ANCHOR_CANDIDATES; q++) {
        if (best >= 0 && cand[q].count < cand[best].count) break;
        /* the stretches between occurrences alike: their median likeness */
        const occ *a = &o[cand[q].first];
        uint32_t c = cand[q].count, npair = c - 1;
        double sims[64];
        uint32_t ns = 0, stride = (npair + 63) / 64, judged = 0, repeated = 0, tmin = UINT32_MAX, tmax = 0;
        for (uint32_t k = 0; k + 1 < c && ns < 64; k += stride) {
            uint32_t e2 = k + 2 < c ? a[k + 2].at : nv;
            if (k + 2 >= c && (uint64_t)(nv - a[k + 1].at) * 2 < (uint64_t)(a[k + 1].at - a[k].at)) e2 = a[k + 1].at; /* a short tail */
            if (e2 <= a[k + 1].at) break;
            sims[ns++] = cand[q].runs ? alike_runs(v, a[k].at, a[k + 1].at, a[k + 1].at, e2, tmp) : alike(v, a[k].at, a[k + 1].at, a[k + 1].at, e2, tmp);
        }
        if (!ns) continue;
        for (uint32_t x = 1; x < ns; x++)
            for (uint32_t y = x; y && sims[y - 1] > sims[y]; y--) {
                double t = sims[y];
                sims[y] = sims[y - 1];
                sims[y - 1] = t;
            }
        if (sims[ns / 2] < MIN_ALIKE) continue;
        /* An op that recurs now and then, every few steps of a loop whose steps differ in length
         * (dynamic shapes: one random size of activation made again in 5 of 50 steps) is no
         * anchor: its stretches are each the loop's ops in the same order several times over, a
         * varying number of times (or 3 at least where fewer than 3 stretches tell).  It read 'steps: 5'
         * for 50, and its leak '+6.3 MiB per step' for 1.0.  (A step that is the same ops as many
         * times over every step is still one step: 64 iterations of a loop of sizes that cycle
         * every 64.)  The stretches between its occurrences, after the first (as its gaps). */
        for (uint32_t k = c > 2; k + 1 < c && judged < 64; k += stride) {
            uint32_t t = turns(v, a[k].at, a[k + 1].at, tmp);
            judged++;
            if (t) repeated++, tmin = t < tmin ? t : tmin, tmax = t > tmax ? t : tmax;
        }
        if (repeated * 2 > judged && (tmin != tmax || (judged < 3 && tmin >= 3))) continue;
        if (best < 0 || a[0].at < o[cand[best].first].at) best = (int)q;
    }
    int rc = CMH_OK;
    if (best >= 0) {
        uint32_t c = cand[best].count;
        *starts = malloc((size_t)c * sizeof **starts);
        if (!*starts) rc = CMH_ENOMEM;
        for (uint32_t k = 0; *starts && k < c; k++) (*starts)[k] = o[cand[best].first + k].at;
        if (*starts) *nstarts = c, *phases_out = cand[best].phases, *last_out = cand[best].last, *runs_out = cand[best].runs;
        /* The anchor's op made once before the loop too (a buffer made before it, then replaced
         * every step: kv = kv_buffer() before 120 steps that each make the next and free the
         * last) is no step's: a first stretch shorter than every later one and unlike the next
         * is set-up, the loop beginning at the second.  It read 'steps: 121' for 120. */
        if (*starts && c >= 4) {
            uint32_t *a = *starts, gmin = UINT32_MAX;
            for (uint32_t k = 2; k < c; k++)
                if (a[k] - a[k - 1] < gmin) gmin = a[k] - a[k - 1];
            if (a[1] - a[0] < gmin && alike(v, a[0], a[1], a[1], a[2], tmp) < MIN_ALIKE) {
                memmove(a, a + 1, (size_t)(c - 1) * sizeof *a);
                c--;
                *nstarts = c;
                if (*last_out) --*last_out;
            }
        }
        /* steps regular in runs only begin where the runs before their anchor that recur, op
         * for op, before the next one do (head_runs()): each step's own, however long */
        uint32_t h = *starts && c >= 2 && cand[best].runs ? head_runs(v, (*starts)[0], (*starts)[1]) : 0;
        for (uint32_t k = c; h && k-- > 0;) (*starts)[k] = back_runs(v, (*starts)[k], k ? (*starts)[k - 1] + 1 : 0, h);
    }
    free(cand);
    free(o);
    free(tmp);
    return rc;
}

#define AUTO_WINDOW 8192
#define MIN_STEP_EVENTS 3

/* Does the stretch of events [a, a + len) repeat itself at a lag shorter than len that divides
 * it (a burst of one allocation repeated, cut into steps of 3)?  Then it is a tighter loop's,
 * not a step of a loop of len. */
static int tighter(const ev *v, uint32_t a, uint32_t len)
{
    for (uint32_t d = 1; d <= len / 2; d++) {
        if (len % d) continue;
        uint32_t i = a;
        while (i + d < a + len && v[i].sym == v[i + d].sym) i++;
        if (i + d >= a + len) return 1;
    }
    return 0;
}

/* The sorted ops (by site, whatever the size) of events [a, a + len) into out: alike()'s
 * multisets, for a stretch compared with the next. */
static void sorted_ops(const ev *v, uint32_t a, uint32_t len, uint64_t *out)
{
    for (uint32_t i = 0; i < len; i++) out[i] = v[a + i].site;
    qsort(out, len, sizeof *out, cmp_u64);
}

/* Where the loop of period events that begins at from really repeats: of its whole steps, the
 * longest run (the latest of equals) in which no step is a tighter loop's (tighter()) and each
 * step holds the ops of the one before (alike, MIN_ALIKE): a lag that repeats across the record
 * need not be a step everywhere (an 8-step loop of 3 events, then 63 buffers of one kind made
 * and 63 freed, repeats at lag 3 throughout, and was read as 50 steps).  [*k0, *k1] of the
 * steps from `from`; 0 when no step passes. */
static int repeating_run(const ev *v, uint32_t nv, uint32_t from, uint32_t period, uint32_t *k0, uint32_t *k1)
{
    uint32_t whole = (nv - from) / period, best_len = 0, run = 0;
    uint64_t *room = malloc((size_t)period * 2 * sizeof *room), *cur = room, *prev = room + period;
    if (!room) return -1;
    for (uint32_t k = 0; k < whole; k++) {
        uint32_t a = from + k * period;
        int ok = !tighter(v, a, period);
        uint64_t *t = prev;
        prev = cur;
        cur = t;
        sorted_ops(v, a, period, cur);
        if (!ok) run = 0;
        else if (run && common_share(prev, period, cur, period) >= MIN_ALIKE) run++;
        else run = 1;
        if (run && run >= best_len) best_len = run, *k1 = k, *k0 = k + 1 - run;
    }
    free(room);
    return best_len ? 1 : 0;
}

/* Autocorrelation: the shortest lag at which the symbol sequence repeats (nearly) as well as
 * at its best lag; the steps cut at the phase where the series holds the fewest bytes, where the
 * loop repeats (repeating_run). */
static int by_period(const ev *v, uint32_t nv, const burst *bu, uint32_t nb, uint32_t min_events, uint32_t **starts, uint32_t *nstarts)
{
    *starts = NULL;
    *nstarts = 0;
    if (nv < 4) return CMH_OK;
    uint32_t w = nv < AUTO_WINDOW ? nv : AUTO_WINDOW, base = nv - w; /* the loop's latest stretch */
    if (min_events < MIN_STEP_EVENTS && w > AUTO_WINDOW / 2) w = AUTO_WINDOW / 2, base = nv - w; /* one thread of many: less */
    double *score = malloc((size_t)(w / 2 + 1) * sizeof *score);
    if (!score) return CMH_ENOMEM;
    double top = 0;
    for (uint32_t lag = 1; lag <= w / 2; lag++) {
        uint32_t match = 0;
        for (uint32_t i = base; i + lag < nv; i++) match += v[i].sym == v[i + lag].sym;
        score[lag] = (double)match / (double)(nv - base - lag);
        if (score[lag] > top) top = score[lag];
    }
    /* the shortest lag that misses (nearly) as rarely as the best: a multiple of the period
     * repeats as well as the period, a part of it misses where the step differs inside */
    uint32_t period = 0;
    /* (from lag 1: 40 allocations of one kind in a row repeat at lag 1, and were taken for a
     * loop of 2, read '+2.0 MiB per step' for 1 MiB an allocation) */
    for (uint32_t lag = 1; lag <= w / 2 && !period; lag++)
        if (1 - score[lag] <= (1 - top) * 1.5 + 0.002 && score[lag] >= MIN_REPEAT) period = lag;
    free(score);
    if (period < min_events) return CMH_OK; /* none, or a loop too tight to be a step */
    /* where the loop begins: the first event from which a whole period repeats the next */
    uint32_t from = 0;
    for (; from + 2 * period <= nv; from++) {
        uint32_t match = 0;
        for (uint32_t i = from; i < from + period; i++) match += v[i].sym == v[i + period].sym;
        if (match * 10 >= period * 9) break;
    }
    if (from + 2 * period > nv) return CMH_OK;
    uint32_t k0 = 0, k1 = 0;
    int found = repeating_run(v, nv, from, period, &k0, &k1);
    if (found < 0) return CMH_ENOMEM;
    /* the loop's events: its run of steps, to the end when it reaches the last whole step (the
     * rest is less than a step: from_pattern decides whether it is one) */
    uint32_t lo = from + k0 * period, hi = k1 + 1 == (nv - from) / period ? nv : from + (k1 + 1) * period;
    if (!found || k1 == k0 || !covers(bu, nb, nv, lo, hi, period)) return CMH_OK;
    /* the phase: the offset in the period where the series holds the fewest bytes */
    uint32_t phase = 0;
    double lowest = 0;
    for (uint32_t f = 0; f < period; f++) {
        double sum = 0;
        uint32_t cnt = 0;
        for (uint64_t i = (uint64_t)lo + f; i < hi; i += period) sum += (double)v[i].net, cnt++;
        if (cnt && (f == 0 || sum / cnt < lowest)) lowest = sum / cnt, phase = f;
    }
    uint32_t c = (hi - lo - phase + period - 1) / period;
    *starts = malloc((size_t)(c ? c : 1) * sizeof **starts);
    if (!*starts) return CMH_ENOMEM;
    for (uint32_t k = 0; k < c; k++) (*starts)[k] = lo + phase + k * period;
    *nstarts = c;
    return CMH_OK;
}

/* The longest run of one allocation op (action and site) back to back in events [0, nv), the
 * latest of equals: its length, its first event in *best (0 and 0 when there is none). */
static uint32_t alloc_run(const ev *v, uint32_t nv, uint32_t *best)
{
    uint32_t blen = 0;
    *best = 0;
    for (uint32_t i = 0, j; i < nv; i = j) {
        for (j = i + 1; j < nv && v[j].alloc && v[i].alloc && v[j].site == v[i].site;) j++;
        if (v[i].alloc && j - i >= blen) *best = i, blen = j - i;
    }
    return blen;
}

/* One recording thread's loop of a single allocation an iteration (a prefetch thread keeping a
 * buffer, then waiting for the next batch): its events are one operation repeated, no pattern of
 * two events or more, so neither anchors nor a period find it, and the record's steps, cut from
 * every thread's entries interleaved, were the scheduler's (a job whose main thread made and
 * freed 32 MiB every 0.2 s beside a thread keeping 2 MiB every 0.25 s read '+8.0 MiB per step
 * over the last 3 steps' in 11 runs of 12, 'rose in each of the 2 steps' in the 12th, and '+1.8
 * MiB per step over the last 13 steps' at 2.8 s).  Each allocation of the longest run of one
 * operation (the latest of equals) starts a step when the run is paced by time, not a burst:
 * CMH_LEAK_MIN_STEPS allocations at least; spread evenly over their span (in 7 of its 10 equal
 * parts, and no gap after the first less than a quarter of their median); spanning half the
 * record's time at least; and other threads working meanwhile (as many of their entries between
 * its first and last allocation).  A thread filling a cache in one go (a burst: the same allocation back
 * to back, the rest of the process idle or done) has no such steps.  The thread's own events
 * and their times decide, whatever the other threads' entries between them. */
static int by_pace(const cmh_replay *r, const ev *v, uint32_t nv, uint32_t **starts, uint32_t *nstarts)
{
    *starts = NULL;
    *nstarts = 0;
    const cmh_snapshot *s = cmh_replay_snapshot(r);
    uint32_t best, blen = alloc_run(v, nv, &best);
    if (blen < CMH_LEAK_MIN_STEPS) return CMH_OK;
    int64_t n = cmh_replay_length(r), t0 = 0, t1 = 0;
    for (int64_t i = 0; i < n && !t0; i++) t0 = cmh_entry_time(s, cmh_replay_entry(r, i));
    for (int64_t i = n - 1; i >= 0 && !t1; i--) t1 = cmh_entry_time(s, cmh_replay_entry(r, i));
    /* (times in unsigned arithmetic: a hostile file's may lie anywhere in int64) */
    uint64_t *g = malloc((size_t)blen * sizeof *g);
    if (!g) return CMH_ENOMEM;
    uint32_t ng = 0;
    int64_t first = cmh_entry_time(s, cmh_replay_entry(r, v[best].pos)), prev = first, last = first;
    int timed = first != 0;
    for (uint32_t k = 1; k < blen && timed; k++) {
        last = cmh_entry_time(s, cmh_replay_entry(r, v[best + k].pos));
        timed = last >= prev && last != 0;
        if (timed && k >= 2) g[ng++] = (uint64_t)last - (uint64_t)prev; /* (after the first: the first iteration may set up) */
        prev = last;
    }
    uint64_t span = (uint64_t)last - (uint64_t)first, whole = (uint64_t)t1 - (uint64_t)t0;
    int paced = timed && ng && t1 > t0 && last > first && span >= whole / 2 + whole % 2;
    if (paced) {
        uint64_t lo = g[0];
        for (uint32_t k = 1; k < ng; k++)
            if (g[k] < lo) lo = g[k];
        qsort(g, ng, sizeof *g, cmp_u64);
        uint64_t med = g[ng / 2];
        /* even: in 7 of 10 equal parts of its span at least (of as many as it has allocations,
         * when fewer); a pause stretched by a busy machine makes one gap longer, two bursts
         * fill two parts */
        uint32_t parts = blen < 10 ? blen : 10, hit = 0, mask = 0;
        for (uint32_t k = 0; k < blen; k++) {
            uint64_t t = (uint64_t)cmh_entry_time(s, cmh_replay_entry(r, v[best + k].pos)) - (uint64_t)first;
            double f = (double)t / (double)span * parts;
            uint32_t q = f < parts ? (uint32_t)f : parts - 1;
            mask |= 1u << q;
        }
        for (uint32_t q = 0; q < parts; q++) hit += mask >> q & 1;
        paced = med > 0 && lo >= med / 4 && hit * 10 >= parts * 7;
    }
    free(g);
    if (paced) { /* the others' entries meanwhile */
        uint32_t others = 0, me = v[best].thread;
        for (int64_t i = v[best].pos + 1; i < v[best + blen - 1].pos && others < CMH_LEAK_MIN_STEPS; i++) {
            const cmh_entry *e = cmh_replay_entry(r, i);
            others += e->action != CMH_ACT_MARK && cmh_entry_thread(s, e) != me;
        }
        paced = others >= CMH_LEAK_MIN_STEPS;
    }
    if (!paced) return CMH_OK;
    *starts = malloc((size_t)blen * sizeof **starts);
    if (!*starts) return CMH_ENOMEM;
    for (uint32_t k = 0; k < blen; k++) (*starts)[k] = best + k;
    *nstarts = blen;
    return CMH_OK;
}

/* Is each step one thread's whole life (a thread per task, or workers that ran one after
 * another)?  Then most of each step's entries are one thread's, and no thread has two steps:
 * none, not only no two in a row (4 threads of 40 steps each whose turns came round in order,
 * A B C D A B ..., read as 160 threads' lives, and so not racing: 'steps: 160 detected ...' in 1
 * run of 8, 'each recording thread's own' in the others).  0 where there is no memory to tell. */
static int whole_threads(const cmh_replay *r, const int64_t *p, uint32_t np)
{
    if (np < 2) return 1;
    uint32_t *who = malloc((size_t)(np - 1) * sizeof *who);
    if (!who) return 0;
    const cmh_snapshot *s = cmh_replay_snapshot(r);
    int whole = 1;
    for (uint32_t k = 0; k + 1 < np && whole; k++) {
        uint32_t first = cmh_entry_thread(s, cmh_replay_entry(r, p[k])), same = 0, all = 0;
        for (int64_t i = p[k]; i < p[k + 1]; i++) all++, same += cmh_entry_thread(s, cmh_replay_entry(r, i)) == first;
        whole = first && same * 10 >= all * 9;
        who[k] = first;
    }
    if (whole) {
        qsort(who, np - 1, sizeof *who, cmp_u32);
        for (uint32_t k = 1; k + 1 < np && whole; k++) whole = who[k] != who[k - 1];
    }
    free(who);
    return whole;
}

/* Are the steps of starts at[0..n) alike in length: after the first (which may make state), the
 * longest at most 1.5 times the shortest (by_anchor's regular steps, in one phase)? */
static int regular(const uint32_t *at, uint32_t n)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t k = 2; k < n; k++) {
        uint32_t g = at[k] - at[k - 1];
        if (g < lo) lo = g;
        if (g > hi) hi = g;
    }
    return (uint64_t)hi * 2 <= (uint64_t)lo * 3 || n < 3;
}

/* The events a step holds as the loop of starts at[0..nat) ended (nat >= 2): the median of its
 * last 3 steps (a loop that changed shape, from steps of 17 events to steps of 5, had its last
 * step measured against their mean, 11). */
static uint32_t last_step(const uint32_t *at, uint32_t nat)
{
    uint32_t g[3] = {0, 0, 0}, ng = 0;
    for (uint32_t k = nat - 1; k && ng < 3; k--) g[ng++] = at[k] - at[k - 1];
    qsort(g, ng, sizeof *g, cmp_u32);
    return g[ng / 2];
}

/* The loop of events [0, nv): by its anchors, else by its period (*anchored says which: 1 cut at
 * its anchors, 2 at its anchors counted in runs of ops and already where its steps begin, 0 by
 * its period).  An
 * anchor's steps may fall in phases of other lengths, one after another (a loop that changed
 * shape, its anchor in every step): *phases of them, the last from start *last on (1 and 0 else). */
static int find_loop(const ev *v, uint32_t nv, const burst *bu, uint32_t nb, uint32_t min_events, int runs_ok, uint32_t **at, uint32_t *nat,
                     int *anchored, uint32_t *phases, uint32_t *last)
{
    int runs = 0;
    int rc = by_anchor(v, nv, bu, nb, min_events, at, nat, phases, last, runs_ok, &runs);
    *anchored = *nat < 2 ? 0 : runs ? 2 : 1;
    if (rc == CMH_OK && *nat < 2) {
        free(*at);
        *at = NULL;
        rc = by_period(v, nv, bu, nb, min_events, at, nat);
    } else if (rc == CMH_OK && runs) {
        /* an anchor regular in runs of ops only gives way to a period of more steps (a block
         * kept every 1000 busy iterations, each one alloc and free: 195 steps for 3122) */
        uint32_t *p2 = NULL, n2 = 0;
        rc = by_period(v, nv, bu, nb, min_events, &p2, &n2);
        if (rc == CMH_OK && n2 > *nat) {
            free(*at);
            *at = p2, *nat = n2, *anchored = 0, *phases = 1, *last = 0;
        } else
            free(p2);
    }
    return rc;
}

/* The ops of a step that come before its anchor.  A step is cut at its anchor, the op that recurs
 * once a step at regular intervals, and that need not be the step's first: where the loop
 * changed shape, the ops before it may recur irregularly (one activation a step, then three),
 * and the anchor may be the step's last op.  Those ops end every cut step (they are the next
 * step's first), so the events just before the anchor at a that repeat, one for one, the events
 * before the next anchor at b are its step's: how many (fewer than b - a; 0 when none). */
static uint32_t head_of(const ev *v, uint32_t a, uint32_t b)
{
    uint32_t h = 0;
    while (h < a && h + 1 < b - a && v[a - 1 - h].sym == v[b - 1 - h].sym) h++;
    return h;
}

/* Where a later shape's steps begin, as events before its first anchor b[0] (b[1] its second):
 * a step of the shape before it after that one's last step began (begins), or at once where the
 * ops before its anchor in its steps reach no further (head_of, at most). */
static uint32_t later_head(const ev *v, const uint32_t *b, uint64_t begins)
{
    uint32_t most = head_of(v, b[0], b[1]);
    return begins + most <= b[0] ? most : begins >= b[0] ? 0 : b[0] - (uint32_t)begins;
}

#define SIBLINGS_TRIED 64 /* other recording threads whose loops are searched (each costs a pattern search) */

/* Does thread u's own loop (anchors or period, as its steps are found: never by_sibling) make op
 * (an allocation of one call stack and size) once in each of its CMH_LEAK_MIN_STEPS steps or more?
 * 1 yes, 0 no, or CMH_ENOMEM (negative). */
static int once_a_step(const cmh_replay *r, const cmh_sites *g, uint32_t u, const ev *op)
{
    ev *w;
    uint32_t nw, *at = NULL, nat = 0, phases, last;
    int anchored, yes = 0;
    if (events(r, g, u, &w, &nw) != CMH_OK) return CMH_ENOMEM;
    uint32_t made = 0;
    for (uint32_t i = 0; i < nw; i++) made += w[i].alloc && w[i].sym == op->sym && w[i].stack == op->stack;
    burst *bu = NULL;
    uint32_t nb = 0;
    int rc = made >= CMH_LEAK_MIN_STEPS ? bursts_of(w, nw, 2, &bu, &nb) : CMH_OK;
    if (rc == CMH_OK && made >= CMH_LEAK_MIN_STEPS) rc = find_loop(w, nw, bu, nb, 2, 0, &at, &nat, &anchored, &phases, &last);
    if (rc == CMH_OK && nat >= CMH_LEAK_MIN_STEPS + 1) {
        yes = 1;
        for (uint32_t k = 0; k + 1 < nat && yes; k++) {
            uint32_t in = 0;
            for (uint32_t i = at[k]; i < at[k + 1]; i++) in += w[i].alloc && w[i].sym == op->sym && w[i].stack == op->stack;
            yes = in == 1;
        }
    }
    free(at);
    free(bu);
    free(w);
    return rc != CMH_OK ? CMH_ENOMEM : yes;
}

/* One recording thread's loop of a single allocation an iteration, kept, where other threads run
 * the same loop and free theirs (workers of one function, one of them keeping its buffers): its
 * events are one operation repeated, no pattern of two events, so neither anchors nor a period
 * find it; by_pace does only where the threads' race spread its allocations over half the
 * record's time, and the scheduler decides that (three Python workers allocating 1 MiB at one
 * line, one keeping its 30: 'growing: +1.0 MiB per step over the last 29 steps of recording
 * thread 2' in 1 run of 9, 'held, steps not found' in the others, where its loop ran in a third
 * of the record).  Each allocation of its longest run of one operation starts a step when that
 * call (the same whole call stack, the same size) is made once in each step of another thread's
 * own loop: the loop's own work, seen in a thread that frees it.  The threads' own events decide,
 * whatever their order in the record.  A thread filling a cache back to back from a call no
 * other thread's loop makes each step (model weights, a pool made at start-up) has no such
 * steps, nor a single-threaded program: nothing tells its loop of allocations from a start-up's. */
static int by_sibling(const cmh_replay *r, const cmh_sites *g, const ev *v, uint32_t nv, uint32_t thread, uint32_t **starts, uint32_t *nstarts)
{
    *starts = NULL;
    *nstarts = 0;
    uint32_t best, blen = alloc_run(v, nv, &best);
    if (blen < CMH_LEAK_MIN_STEPS || !v[best].stack) return CMH_OK; /* (no stack: no call to tell apart) */
    for (uint32_t k = 1; k < blen; k++)
        if (v[best + k].sym != v[best].sym || v[best + k].stack != v[best].stack) return CMH_OK;
    /* the other recording threads, in their first entries' order */
    const cmh_snapshot *s = cmh_replay_snapshot(r);
    uint32_t others[SIBLINGS_TRIED], no = 0;
    int64_t n = cmh_replay_length(r);
    for (int64_t i = 0; i < n && no < SIBLINGS_TRIED; i++) {
        uint32_t u = cmh_entry_thread(s, cmh_replay_entry(r, i)), k = 0;
        while (k < no && others[k] != u) k++;
        if (u && u != thread && k == no) others[no++] = u;
    }
    int yes = 0;
    for (uint32_t k = 0; k < no && !yes; k++) {
        yes = once_a_step(r, g, others[k], &v[best]);
        if (yes < 0) return CMH_ENOMEM;
    }
    if (!yes) return CMH_OK;
    *starts = malloc((size_t)blen * sizeof **starts);
    if (!*starts) return CMH_ENOMEM;
    for (uint32_t k = 0; k < blen; k++) (*starts)[k] = best + k;
    *nstarts = blen;
    return CMH_OK;
}

int cmh_steps_from_pattern(const cmh_replay *r, const cmh_sites *g, uint32_t thread, cmh_steps *st, int *found)
{
    ev *v;
    uint32_t nv;
    int rc = events(r, g, thread, &v, &nv);
    if (rc != CMH_OK) return rc;
    uint32_t *at = NULL, nat = 0;
    /* a step of the whole record makes a few allocations at least; one thread's loop may be
     * a single allocation and its free.  A device whose every event one thread made, where
     * the process has other threads recording (on other devices), is that thread's loop: a
     * worker thread per device running the same loop of one allocation and its free read
     * 'steps: 20' on device 0 (where it also kept a block each step) and 'steps: unknown' on
     * device 1.  (A program of one thread keeps the record's rule.) */
    uint32_t one = nv ? v[0].thread : 0;
    for (uint32_t i = 1; one && i < nv; i++)
        if (v[i].thread != one) one = 0;
    if (one && !thread) {
        const cmh_snapshot *s = cmh_replay_snapshot(r);
        int others = 0;
        for (uint32_t i = 0; i < s->nentries && !others; i++) {
            uint32_t u = cmh_entry_thread(s, &s->entries[i]);
            others = u && u != one;
        }
        if (!others) one = 0;
    }
    uint32_t min_events = thread || one ? 2 : MIN_STEP_EVENTS;
    int runs_ok = !thread && !one; /* anchors counted in runs of ops: the record's loop, not a thread's */
    burst *bu = NULL;
    uint32_t nb = 0;
    rc = bursts_of(v, nv, min_events, &bu, &nb);
    int anchored = 0; /* the earliest shape's steps are cut at an anchor (by_period's at the fewest bytes; 2: where they begin, by runs) */
    uint32_t phases = 1, lastp = 0;
    if (rc == CMH_OK) rc = find_loop(v, nv, bu, nb, min_events, runs_ok, &at, &nat, &anchored, &phases, &lastp);
    int in_runs = anchored == 2; /* the latest shape's steps found in runs of ops (the last step's measure) */
    if (rc == CMH_OK && thread && nat < 2) { /* one thread's loop of one allocation, paced */
        free(at);
        at = NULL;
        rc = by_pace(r, v, nv, &at, &nat);
    }
    if (rc == CMH_OK && thread && nat < 2) { /* or kept where another thread's loop frees the same call's */
        free(at);
        at = NULL;
        rc = by_sibling(r, g, v, nv, thread, &at, &nat);
    }
    /* A loop that changed shape (a schedule's second phase, longer sequences): the loop found
     * is the latest shape; the events before its first step may be a loop of their own, cut
     * the same way and put before it, one earlier shape at a time.  (A 40-step loop whose last
     * 20 steps made 4 times the events read 'steps: 20', and a leak over all 40 'over the last
     * 19 steps'.)  The first shape's steps need 2 at least, covering most of what came before. */
    /* (an anchor's phases are shapes too: the same words whichever way the loop was found) */
    uint32_t latest = nat - lastp, shapes = phases, cur = nat; /* the latest shape's steps; the shapes found; the earliest's steps */
    for (; rc == CMH_OK && nat >= 2 && shapes < MAX_SHAPES; shapes++) {
        /* The earlier shape is searched before the later one's first step, not its first
         * anchor: its anchor need not be its step's first op, and the ops before it there
         * (head_of, at most) are no part of the earlier shape (where they held the earlier
         * shape's anchor, the steps read one more).  The later shape's steps then begin where
         * that step does, a step of the earlier shape after the earlier's last: cut at its
         * anchor, each of its steps would hold the next one's first ops, one step two of a
         * leak's blocks made there and its last none. */
        uint32_t most = anchored == 2 ? 0 : head_of(v, at[0], at[1]), pre = at[0] - most, *a2 = NULL, n2 = 0;
        if (pre < 4 * min_events) break;
        int anchored2;
        uint32_t phases2, last2;
        rc = find_loop(v, pre, bu, nb, min_events, runs_ok, &a2, &n2, &anchored2, &phases2, &last2);
        if (rc != CMH_OK || n2 < 2) {
            free(a2);
            break;
        }
        /* cut where its steps begin (as the first shape's, below), its last step running to
         * where the later shape begins: at least half a step of its own */
        uint32_t h2 = anchored2 == 1 && regular(a2, n2) ? head_of(v, a2[0], a2[1]) : 0, step2 = (a2[n2 - 1] - a2[0]) / (n2 - 1);
        for (uint32_t k = 0; k < n2; k++) a2[k] -= h2;
        if ((uint64_t)(pre - a2[n2 - 1]) * 2 < step2) n2--;
        uint32_t h = n2 && anchored != 2 ? later_head(v, at, (uint64_t)a2[n2 - 1] + step2) : 0;
        uint32_t *m = n2 >= 2 ? malloc(((size_t)n2 + nat) * sizeof *m) : NULL;
        if (m) {
            memcpy(m, a2, (size_t)n2 * sizeof *m);
            memcpy(m + n2, at, (size_t)nat * sizeof *m);
            for (uint32_t k = n2; k < n2 + cur; k++) m[k] -= h;
            free(at);
            at = m;
            nat += n2;
            cur = n2;
            anchored = anchored2;
            shapes += phases2 - 1;
        }
        free(a2);
        if (!m) break;
    }
    /* The loop's first step begins where the ops before its first anchor in it do (head_of):
     * the anchor need not be the step's first op.  Where the loop changed shape, the ops before
     * it may recur irregularly (one activation a step, then three), and the anchor may be the
     * step's last op.  (A 20-step loop that changed shape, keeping 1 MiB at each step's end from
     * a function of its own, read 'steps: 19': its first step's other ops were set-up; where the
     * compiler folded that function into another with the same code, there was no such anchor
     * and the steps read 20.)  Steps of one shape, alike in length, are each cut where their first
     * op is; an anchor's steps in phases of other lengths (its ops before it as many as the
     * phase's) keep their cuts at it, and the ops before its first are a step of their own when
     * the last step is not whole (below): one or the other, each step holding one anchor.
     * (Steps found by their period are cut where the loop holds the fewest bytes already.) */
    uint32_t head = rc == CMH_OK && nat >= 2 && anchored == 1 ? head_of(v, at[0], at[1]) : 0;
    if (head && regular(at, cur)) {
        for (uint32_t k = 0; k < cur; k++) at[k] -= head;
        head = 0;
    }
    /* And a later shape after it: a loop that changed shape to shorter steps (20 steps of 17
     * events, then 10 of 5) spans most of the record in its first shape, found first; the
     * events after its last step are searched the same way, one later shape at a time, their
     * steps put after it (the last step of the shape before runs to where they begin, as
     * above).  Before, the later shape's steps were the last step's: 'steps: 20' for 30. */
    for (; rc == CMH_OK && nat >= 2 && shapes < MAX_SHAPES; shapes++) {
        uint32_t step = last_step(at, nat), from = at[nat - 1] + step, *a3 = NULL, n3 = 0;
        if (from >= nv || nv - from < 4 * min_events) break;
        burst *b3 = NULL;
        uint32_t nb3 = 0;
        rc = bursts_of(v + from, nv - from, min_events, &b3, &nb3);
        int anchored3;
        uint32_t phases3 = 1, last3 = 0;
        if (rc == CMH_OK) rc = find_loop(v + from, nv - from, b3, nb3, min_events, runs_ok, &a3, &n3, &anchored3, &phases3, &last3);
        free(b3);
        uint32_t *m = rc == CMH_OK && n3 >= 2 ? malloc(((size_t)nat + n3) * sizeof *m) : NULL;
        if (m) {
            for (uint32_t k = 0; k < n3; k++) a3[k] += from;
            uint32_t h = anchored3 == 2 ? 0 : later_head(v, a3, from);
            in_runs = anchored3 == 2;
            memcpy(m, at, (size_t)nat * sizeof *m);
            for (uint32_t k = 0; k < n3; k++) m[nat + k] = a3[k] - h;
            free(at);
            at = m;
            nat += n3;
            latest = n3 - last3;
            shapes += phases3 - 1;
        }
        free(a3);
        if (!m) break;
    }
    if (rc == CMH_OK && nat >= 2) {
        int64_t n = cmh_replay_length(r);
        int64_t *p = malloc(((size_t)nat + 1) * sizeof *p); /* (the end, or the ops before the first anchor) */
        if (!p) rc = CMH_ENOMEM;
        uint32_t np = 0;
        for (uint32_t k = 0; p && k < nat; k++) p[np++] = v[at[k]].pos;
        if (p) {
            /* entries per step as the loop ended: its latest shape's */
            uint64_t gap = cmh_steps_median_gap(p + (nat - latest), latest);
            /* the last step is whole when the events after its start are as many as half a
             * step's as the loop ended (last_step); else the ops before the first anchor may be */
            /* (steps found in runs of ops: as many runs as half the step before's, whatever
             * the events: a step of 3 events after steps of 13 is whole when it holds their ops) */
            const cmh_snapshot *s = cmh_replay_snapshot(r);
            if (cmh_steps_tail_whole(s, nv - at[nat - 1], last_step(at, nat)) ||
                (in_runs && cmh_steps_tail_whole(s, run_ops_count(v, at[nat - 1], nv), run_ops_count(v, at[nat - 2], at[nat - 1]))))
                p[np++] = n; /* (other threads' events may come first) */
            else {
                /* the ops before the first anchor: a step with the first's when they hold half a
                 * step (head_of's, op for op), or when they are the ops of a step before its
                 * anchor that the last step lacks after it (an anchor mid-step whose steps begin
                 * differently, sizes cycling every 3 steps, the second making optimizer state:
                 * head_of finds none, and 300 iterations, cut at their anchors, read 'steps: 299',
                 * the first one's ops before it and the last one's after it each half a step short) */
                uint32_t lead = head, tail = nv - at[nat - 1], step = last_step(at, nat);
                if ((uint64_t)lead * 2 < at[1] - at[0] && tail < step) {
                    uint32_t h = step - tail;
                    uint64_t *tmp = h > lead && h <= at[0] && h <= at[nat - 1] - at[nat - 2] ? malloc((size_t)h * 2 * sizeof *tmp) : NULL;
                    if (tmp && alike(v, at[0] - h, at[0], at[nat - 1] - h, at[nat - 1], tmp) >= MIN_ALIKE) lead = h;
                    free(tmp);
                }
                if ((uint64_t)lead * 2 >= at[1] - at[0] || lead > head) {
                    memmove(p + 1, p, (size_t)np * sizeof *p);
                    p[0] = v[at[0] - lead].pos;
                    np++;
                }
            }
            if (np >= 3 || (np == 2 && p[1] == n)) {
                rc = cmh_steps_set_points(st, p, np);
                if (rc == CMH_OK) {
                    st->source = CMH_STEPS_PATTERN;
                    st->period = gap;
                    st->shapes = shapes;
                    st->thread_lives = !thread && whole_threads(r, p, np);
                    *found = 1;
                }
            }
            free(p);
        }
    }
    free(at);
    free(bu);
    free(v);
    return rc;
}
