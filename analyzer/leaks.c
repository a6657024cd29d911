/*
 * leaks.c - what is leaking: the blocks still live at the end, by site, each judged by how the
 * bytes it held moved over the program's steps (steps.c finds them; leak_judge.c judges a series,
 * leak_threads.c combines the threads' verdicts), and the physical memory (cuMemCreate) held and
 * mapped nowhere at the end.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/owners.h"
#include "cumemhist/reports.h"
#include "grow.h"
#include "memo.h"
#include "oatab.h"
#include "report_sites.h"

/* ---- leaks ---- */

/* The live blocks, by address, with the entry that allocated each: at the end, exactly the
 * still-live blocks. */
typedef struct born_slot {
    uint64_t addr;
    uint32_t stack;
    uint32_t thread;
    int64_t index; /* the allocating entry, -1 before the trace */
    uint64_t size;
    int recorded; /* by an entry of the trace (not found only in the final segments) */
} born_slot;

/* One series of held bytes: a site's (thread 0) or a site's blocks made by one thread, as a
 * difference array over that series' points. */
typedef struct held_row {
    uint64_t key; /* (group << 32 | thread) + 1 */
    uint32_t row; /* into leak_ctx.held */
} held_row;

typedef struct owner_slot {
    uint64_t key; /* group + 1 */
    uint32_t thread; /* the thread that made one of its still-live blocks (the first seen) */
    uint32_t mixed;  /* another thread made one of them too */
    uint64_t mask;   /* the threads (below 64) that made them */
    int unowned;     /* CMH_MADE_* bits: one made by a thread past 63, one allocated before the kept history */
    /* of them, those that leave the device unjudged where the threads race: the first reason
     * (CMH_UNJUDGED_*, 0: none) in the device's order, its thread, their bytes and count */
    int unjudged;
    uint32_t unjudged_thread;
    uint64_t unjudged_bytes, unjudged_blocks;
} owner_slot;

/* A site's first allocation the trace recorded (any block of it, freed or still live). */
typedef struct first_slot {
    uint64_t key; /* group + 1 */
    int64_t index;
} first_slot;

/* A site's bytes held through each of the record's equal slices of time, and its allocations
 * in each slice (growth without steps: judge_time). */
typedef struct time_row {
    uint64_t key; /* group + 1 */
    int64_t held[CMH_TIME_SLICES];
    uint32_t allocs[CMH_TIME_SLICES];
    uint64_t nallocs;
} time_row;

/* A site's blocks live at once: now, and the most ever (a workspace, replaced by a larger one
 * each time it grows, the old freed first: never more than 1). */
typedef struct lives_slot {
    uint64_t key; /* group + 1 */
    uint64_t now, most;
} lives_slot;

/* A site's requests the driver refused (its oom entries, not retried with success): how many,
 * and their bytes. */
typedef struct refused_slot {
    uint64_t key; /* group + 1 */
    uint64_t count, bytes;
} refused_slot;

typedef struct leak_ctx {
    cmh_oatab born, rows, owners, firsts;
    cmh_oatab lives; /* a site's lives_slot */
    /* a site's refused requests (refused_slot), and their bytes as rows like rows' (keys alike),
     * each counted as a block made at its entry and kept to the end: what the site asked to keep
     * (a leak that ran into the device's limit and kept going: its requests failed each step, its
     * held bytes flat, and read 'stopped: ... then flat for the last 55 steps') */
    cmh_oatab refused, rrows;
    cmh_oatab times; /* a site's time_row (group + 1) */
    cmh_oatab crows; /* a site's caller's held bytes over the record's steps (caller_key) */
    const cmh_replay *r;
    const cmh_sites *sites;
    const cmh_steps *steps; /* [0] the record's, [t] thread t's (count 0: none) */
    uint32_t nsteps;        /* entries of steps */
    int64_t **held;         /* held[row]: npoints + 1 differences */
    /* the same rows' bytes at each step's end (its blocks live at the next point, or at the end
     * for the last): a buffer the program replaces every step by a larger one (the torch.cat
     * accumulation, x = cat(x, new) with the old freed, or free-then-alloc) has no block live
     * across a whole step, so its rows read 0 throughout while it held 2, 3, ..., 41 MiB at
     * successive step ends ('steady' for a leak of 1 MiB a step) */
    cmh_oatab erows, ecrows;
    uint32_t nheld, capheld;
    uint64_t grew; /* still-live bytes made by the trace's entries */
    uint64_t grew_blocks;
    uint32_t grew_slices; /* bit k: some of them made in the run's k-th of CMH_LEAK_RATE_SLICES stretches */
    const cmh_snapshot *s;
    int64_t t_first, t_last; /* the run's entries' span (0: untimed) */
    int at_end;    /* the replay is reconciling with the final segments */
    int nomem;
    /* threads racing (steps_raced): the threads with steps of their own, whose blocks count over
     * those steps only, never over the record's (another thread's, where the scheduler placed
     * them): one thread's leak through a helper others use for temporaries read '+243.3 KiB per
     * step over the last 18 steps' one run, '+298.7 KiB ... 17' the next, for 256 KiB a step; a
     * block main made once before the threads 'grew in 3 (4, 5, 6) steps' */
    uint64_t apart;
} leak_ctx;

/* The first point above a, and the last point at most f (an index into points, -1 if none). */
static uint32_t first_above(const int64_t *p, uint32_t np, int64_t a)
{
    uint32_t lo = 0, hi = np;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p[mid] > a) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* A block of `size` bytes lived from entry a to entry f (f = INT64_MAX: still live): it is held
 * at point j when live there (a < P[j] <= f) and still live at the next point (P[j+1] <= f; the
 * end, past the last).  at_end: held at the end of step j instead, live at the next point (the
 * end, past the last) whenever it was made: the step that made it too. */
static void held_add_to(leak_ctx *c, cmh_oatab *rows, uint64_t key, const cmh_steps *st, int64_t a, int64_t f, uint64_t size, int at_end)
{
    if (!st || !st->npoints) return;
    uint32_t np = st->npoints, lo = first_above(st->points, np, a);
    if (at_end && lo) lo--;
    /* the last j with P[j+1] <= f: all of them when the block outlived the record */
    int64_t hi = f == INT64_MAX ? (int64_t)np - 1 : (int64_t)first_above(st->points, np, f) - 2;
    if ((int64_t)lo > hi) return;
    int created;
    held_row *h = cmh_oa_get(rows, key, &created);
    if (!h) goto oom;
    if (created) {
        int64_t *d = calloc((size_t)np + 1, sizeof *d);
        if (!d || CMH_GROW(c->held, c->capheld, (uint64_t)c->nheld + 1, 64)) {
            free(d);
            cmh_oa_remove(rows, h);
            goto oom;
        }
        h->row = c->nheld;
        c->held[c->nheld++] = d;
    }
    /* wrapping sums: a hostile file's sizes may add up past int64 (its figures are then nonsense, not UB) */
    c->held[h->row][lo] = (int64_t)((uint64_t)c->held[h->row][lo] + size);
    c->held[h->row][hi + 1] = (int64_t)((uint64_t)c->held[h->row][hi + 1] - size);
    return;
oom:
    c->nomem = 1;
}

static void held_add(leak_ctx *c, int at_end, uint32_t group, uint32_t thread, int64_t a, int64_t f, uint64_t size)
{
    held_add_to(c, at_end ? &c->erows : &c->rows, ((uint64_t)group << 32 | thread) + 1, thread < c->nsteps ? &c->steps[thread] : NULL, a,
                f, size, at_end);
}

/* A site's caller, as add_caller tells callers apart (function, file and line, not frame id):
 * the key of its row in crows.  0 for none. */
static uint64_t caller_key(uint32_t group, const cmh_frame *f)
{
    if (!f) return 0;
    uint64_t k = ((uint64_t)group << 32 | f->name) * 0x9e3779b97f4a7c15ull;
    k ^= ((uint64_t)f->filename << 32 | (uint32_t)f->line) + 0xbf58476d1ce4e5b9ull + (k << 6) + (k >> 2);
    return k ? k : 1;
}

/* The key of a caller's row over one thread's steps (its blocks that thread made). */
static uint64_t thread_caller_key(uint64_t k, uint32_t thread)
{
    uint64_t t = (k ^ ((uint64_t)thread + 1) * 0xd6e8feb86659fd93ull) * 0x9e3779b97f4a7c15ull;
    return t ? t : 2;
}

/* The record's one recording thread, when the recorder named exactly one (0: several, or none said). */
static uint32_t only_thread(const cmh_snapshot *s)
{
    return s->source == CMH_SRC_RECORDER && s->nthreads == 1 ? s->threads[0].thread : 0;
}

/* Can thread t's still-live blocks be the program's set-up, made before the other threads' loops
 * (a model main loaded before it started its workers), where threads race and t has no loop of
 * its own?  Only the process's main thread starts the others, so only its work can come before
 * their steps by the program's own order; another thread's allocations fall before, among or
 * after the others' steps as the scheduler ran it (a worker filling a 30-block cache beside two
 * looping ones, judged by where its cache fell alone, was 'state' in 3 runs of 20 on one core,
 * made before their first step, and 'unjudged' in the others).  1 for the main thread, and where
 * the record names no thread ids (a synthetic trace: where its blocks came is all there is to go
 * by); 0 for any other. */
static int setup_thread(const cmh_snapshot *s, uint32_t t)
{
    const cmh_thread_info *ti = cmh_snapshot_thread(s, t);
    return !ti || !ti->tid || s->pid <= 0 || ti->tid == s->pid;
}

/* A block of group's, made at entry b->index (before the trace: -1, or not recorded) and freed
 * at entry f (INT64_MAX: still live): the slices it was held through, and the slice its
 * allocation came in.  Held through slice k (of CMH_TIME_SLICES equal ones from the first entry's
 * time to the last's): made at or before its start, freed after its end (the last: still live at
 * the end).  A block lives one interval, so it was live all through; a request's buffer made and
 * freed within a slice never counts, as a step's temporaries never count in a step's held bytes. */
static void time_add(leak_ctx *c, uint32_t group, const born_slot *b, int64_t f)
{
    if (!c->t_first || c->t_last <= c->t_first) return; /* untimed: nothing to slice */
    int created;
    time_row *tr = cmh_oa_get(&c->times, (uint64_t)group + 1, &created);
    if (!tr) {
        c->nomem = 1;
        return;
    }
    if (created) memset(&tr->held, 0, sizeof *tr - offsetof(time_row, held));
    double span = (double)(c->t_last - c->t_first);
    int64_t ta = b->recorded && b->index >= 0 ? cmh_entry_time(c->s, cmh_replay_entry(c->r, b->index)) : 0;
    int made = ta > 0; /* made by a timed entry of the trace: an allocation counted in its slice */
    if (!made) ta = c->t_first - 1;
    int64_t tf = f == INT64_MAX ? INT64_MAX : cmh_entry_time(c->s, cmh_replay_entry(c->r, f));
    if (f != INT64_MAX && tf <= 0) tf = c->t_last; /* (an untimed free: gone by the end) */
    for (int k = 0; k < CMH_TIME_SLICES; k++) {
        int64_t t0 = c->t_first + (int64_t)(span * k / CMH_TIME_SLICES), t1 = c->t_first + (int64_t)(span * (k + 1) / CMH_TIME_SLICES);
        if (ta <= t0 && (k == CMH_TIME_SLICES - 1 ? f == INT64_MAX : tf > t1)) tr->held[k] = (int64_t)((uint64_t)tr->held[k] + b->size);
    }
    if (made) {
        double at = (double)(ta - c->t_first) / span * CMH_TIME_SLICES;
        int k = at < 0 ? 0 : at >= CMH_TIME_SLICES ? CMH_TIME_SLICES - 1 : (int)at;
        tr->allocs[k]++;
        tr->nallocs++;
    }
}

/* more: another piece of an allocation one of whose blocks counted already (cmh_live_block.more) */
static void held_block(leak_ctx *c, const born_slot *b, int64_t f, int more)
{
    uint32_t group = c->sites ? cmh_sites_group(c->sites, b->stack) : b->stack;
    if (f == INT64_MAX) {
        int created;
        owner_slot *o = cmh_oa_get(&c->owners, (uint64_t)group + 1, &created);
        if (!o) c->nomem = 1;
        else {
            if (created) memset(&o->thread, 0, sizeof *o - offsetof(owner_slot, thread));
            /* a block whose allocation fell out of the history (--max-entries) has no thread: in
             * a record of one recording thread (the recorder lists every thread that recorded,
             * not only the history's) it was that one's ("made by recording thread 1 and threads
             * not recorded" was said of a single-threaded program) */
            uint32_t th = b->thread ? b->thread : only_thread(c->s);
            if (th && !o->thread) o->thread = th;
            else if (th && o->thread != th) o->mixed = 1;
            if (th && th < 64) o->mask |= 1ull << th;
            else o->unowned |= th ? CMH_MADE_PAST63 : CMH_MADE_BEFORE_HISTORY;
        }
        if (b->recorded) {
            c->grew += b->size;
            c->grew_blocks += !more;
            int64_t t = b->index >= 0 ? cmh_entry_time(c->s, cmh_replay_entry(c->r, b->index)) : 0;
            if (t && c->t_first && c->t_last > c->t_first) {
                double at = (double)(t - c->t_first) / (double)(c->t_last - c->t_first) * CMH_LEAK_RATE_SLICES;
                int k = at < 0 ? 0 : at >= CMH_LEAK_RATE_SLICES ? CMH_LEAK_RATE_SLICES - 1 : (int)at;
                c->grew_slices |= 1u << k;
            }
        }
    }
    if (b->recorded) {
        int created;
        first_slot *fs = cmh_oa_get(&c->firsts, (uint64_t)group + 1, &created);
        if (!fs) c->nomem = 1;
        else if (created || b->index < fs->index) fs->index = b->index;
    }
    time_add(c, group, b, f);
    int apart = b->thread && b->thread < 64 && (c->apart >> b->thread & 1);
    for (int e = 0; e < 2; e++) { /* held across each step, and at each step's end */
        if (!apart) held_add(c, e, group, 0, b->index, f, b->size);
        if (b->thread) held_add(c, e, group, b->thread, b->index, f, b->size);
        /* and under its caller (a site called from several lines: a helper, a ctypes wrapper) */
        if (c->sites && cmh_sites_group_by(c->sites) == CMH_GROUP_SITE) {
            uint64_t k = caller_key(group, cmh_sites_caller_of(c->sites, b->stack));
            cmh_oatab *crows = e ? &c->ecrows : &c->crows;
            if (k && !apart) held_add_to(c, crows, k, c->nsteps ? &c->steps[0] : NULL, b->index, f, b->size, e);
            /* and over its thread's own steps (a site judged thread by thread: which callers grow there) */
            if (k && b->thread && b->thread < c->nsteps)
                held_add_to(c, crows, thread_caller_key(k, b->thread), &c->steps[b->thread], b->index, f, b->size, e);
        }
    }
}

/* A block appearing (delta > 0) or freed while the replay applies entry pos (-1: the state
 * before the first; at_end: the reconciliation with the final segments). */
static void leak_event(leak_ctx *c, int64_t pos, int at_end, int64_t delta, uint32_t stack, uint64_t addr)
{
    int64_t n = cmh_replay_length(c->r);
    if (delta < 0) {
        born_slot *b = cmh_oa_find(&c->born, addr);
        if (b) {
            lives_slot *v = cmh_oa_find(&c->lives, (uint64_t)(c->sites ? cmh_sites_group(c->sites, b->stack) : b->stack) + 1);
            if (v && v->now) v->now--;
            /* freed while reconciling with the final segments: gone by the end, not before */
            held_block(c, b, at_end ? n - 1 : pos, 0);
            cmh_oa_remove(&c->born, b);
        }
        return;
    }
    born_slot *b = cmh_oa_get(&c->born, addr, NULL);
    int created;
    lives_slot *v = b ? cmh_oa_get(&c->lives, (uint64_t)(c->sites ? cmh_sites_group(c->sites, stack) : stack) + 1, &created) : NULL;
    if (!v) {
        c->nomem = 1;
        return;
    }
    if (created) v->now = v->most = 0;
    if (++v->now > v->most) v->most = v->now;
    b->stack = stack;
    b->index = at_end ? n - 1 : pos;
    b->recorded = !at_end && pos >= 0; /* pos -1: live before the first entry, not made by the trace */
    const cmh_entry *e = at_end ? NULL : cmh_replay_entry(c->r, pos);
    b->thread = e ? cmh_entry_thread(cmh_replay_snapshot(c->r), e) : 0;
    b->size = (uint64_t)delta;
}

/* The blocks freed with stream work pending at the end (their addresses, in a table of keys). */
static void add_pending(void *arg, const cmh_live_block *b)
{
    if (b->state != CMH_BLOCK_ACTIVE_PENDING_FREE || !b->addr) return;
    if (!cmh_oa_get(arg, b->addr, NULL)) ((cmh_oatab *)arg)->esize = 0; /* (out of memory: said below) */
}

/* The blocks at the end: those freed with stream work pending (add_pending), and the pieces of an
 * allocation past the one that counts it (cmh_live_block.more: a cuMemMap unmapped in its middle
 * is one block, not two). */
typedef struct end_tabs {
    cmh_oatab *pending, *more;
} end_tabs;

static void add_end_block(void *arg, const cmh_live_block *b)
{
    end_tabs *t = arg;
    add_pending(t->pending, b);
    if (b->more && b->addr && !cmh_oa_get(t->more, b->addr, NULL)) t->pending->esize = 0; /* (out of memory: said below) */
}

/* Entry i, where it is an oom the allocator did not retry with success: a request of its site's
 * refused, counted over the record's steps and its thread's as a block made there and kept. */
static void refused_request(leak_ctx *c, int64_t i)
{
    const cmh_entry *e = cmh_replay_entry(c->r, i);
    if (!e || e->action != CMH_ACT_OOM || cmh_entry_retried_oom(e)) return;
    uint32_t group = c->sites ? cmh_sites_group(c->sites, e->stack) : e->stack, th = cmh_entry_thread(c->s, e);
    uint64_t size = cmh_entry_size(c->s, e);
    int created;
    refused_slot *rf = cmh_oa_get(&c->refused, (uint64_t)group + 1, &created);
    if (!rf) {
        c->nomem = 1;
        return;
    }
    if (created) rf->count = rf->bytes = 0;
    rf->count++;
    rf->bytes += size;
    if (!(th && th < 64 && (c->apart >> th & 1)) && c->nsteps)
        held_add_to(c, &c->rrows, ((uint64_t)group << 32) + 1, &c->steps[0], i, INT64_MAX, size, 0);
    if (th && th < c->nsteps) held_add_to(c, &c->rrows, ((uint64_t)group << 32 | th) + 1, &c->steps[th], i, INT64_MAX, size, 0);
}

static void leak_observe(void *arg, int64_t delta, uint32_t stack, uint64_t addr)
{
    leak_ctx *c = arg;
    leak_event(c, cmh_replay_position(c->r), c->at_end, delta, stack, addr);
}

/* The series of one row, summed out of its differences (zeros without a row: 0 returned). */
static int series_in(const leak_ctx *c, const cmh_oatab *rows, uint64_t key, int64_t *L, uint32_t np)
{
    memset(L, 0, (size_t)np * sizeof *L);
    const held_row *h = cmh_oa_find(rows, key);
    if (!h) return 0;
    int64_t acc = 0;
    for (uint32_t j = 0; j < np; j++) L[j] = acc = (int64_t)((uint64_t)acc + (uint64_t)c->held[h->row][j]);
    return 1;
}

/* A row judged over steps st (callers: a caller's row): by its bytes held across each step;
 * where those do not grow, growing when its bytes at each step's end grow (a buffer replaced
 * every step by a larger one: no block of it outlives a step, yet what the steps leave rises).
 * Growth alone is taken from the steps' ends: the other verdicts stay those of the bytes held
 * across steps (a buffer made anew each step, alloc before free, is no state).  Whether the
 * site has a row. */
static int judge_row(const leak_ctx *c, int callers, uint64_t key, const cmh_steps *st, int64_t *L, int64_t n, cmh_site *x)
{
    int have = series_in(c, callers ? &c->crows : &c->rows, key, L, st->npoints);
    cmh_leak_judge(st, L, n, x);
    x->refused = x->refused_bytes = 0;
    uint32_t group = (uint32_t)((key - 1) >> 32);
    if (!callers && x->verdict == CMH_LEAK_STOPPED) {
        /* it stopped growing where its requests began to fail: judged on what it asked to keep,
         * its held bytes and its refused requests together (not a temporary's refusals: the site
         * rose over several steps, keeping what it was given, before it went flat) */
        const refused_slot *rf = cmh_oa_find(&c->refused, (uint64_t)group + 1);
        int64_t *R = rf ? malloc((size_t)st->npoints * sizeof *R) : NULL;
        if (R && series_in(c, &c->rrows, key, R, st->npoints)) {
            for (uint32_t j = 0; j < st->npoints; j++) L[j] = (int64_t)((uint64_t)L[j] + (uint64_t)R[j]);
            cmh_site e = *x;
            cmh_leak_judge(st, L, n, &e);
            if (e.verdict == CMH_LEAK_GROWING) {
                e.held = x->held; /* (what it holds is what it was given) */
                *x = e;
                x->refused = rf->count;
                x->refused_bytes = rf->bytes;
            }
            series_in(c, &c->rows, key, L, st->npoints);
        }
        free(R);
    }
    if (x->verdict != CMH_LEAK_GROWING && series_in(c, callers ? &c->ecrows : &c->erows, key, L, st->npoints)) {
        have = 1;
        cmh_site e = *x;
        cmh_leak_judge(st, L, n, &e);
        if (e.verdict == CMH_LEAK_GROWING) *x = e;
    }
    /* one block at a time, each freed before the next was made: a buffer replaced by a larger one
     * as larger ones were needed (a cuBLAS or cuDNN workspace, a cache's high-water mark) holds
     * what the largest need took, and grows ever more rarely (a workspace sized by dyn.c's random
     * needs read 'stopped: grew in 5 of steps 3-39', 'growing: +238.8 KiB per step over the last 39
     * steps' or 'state' by the seed).  Not a leak that stopped, nor one growing, unless it grew
     * across most steps of its stretch (a buffer replaced every step by a larger one: an
     * accumulation, x = cat(x, new) with the old freed first) */
    const lives_slot *v = callers ? NULL : cmh_oa_find(&c->lives, (uint64_t)group + 1);
    if (v && v->most == 1 && !x->refused &&
        (x->verdict == CMH_LEAK_STOPPED || (x->verdict == CMH_LEAK_GROWING && (uint64_t)x->rises * x->stride * 2 < x->growth_steps))) {
        x->verdict = CMH_LEAK_STATE;
        x->growing = 0;
        x->rate = 0;
        x->growth_steps = x->growth_first = 0;
        x->top = x->warm_growth = 0;
        x->trend = 0;
    }
    return have;
}

static int judge_of(const leak_ctx *c, uint32_t group, uint32_t thread, const cmh_steps *st, int64_t *L, int64_t n, cmh_site *x)
{
    return judge_row(c, 0, ((uint64_t)group << 32 | thread) + 1, st, L, n, x);
}

/* ---- physical memory made with cuMemCreate, held and mapped nowhere at the end, by site ---- */

static int cmp_vmm_site(const void *a, const void *b)
{
    const cmh_vmm_site *x = a, *y = b;
    return x->bytes != y->bytes ? (x->bytes < y->bytes ? 1 : -1) : (x->stack > y->stack) - (x->stack < y->stack);
}

/* A held handle's site: its cuMemCreate stack's, by the site rules of g, else its innermost frame
 * (NULL: no stack); *stack the stack it is of. */
static const cmh_frame *vmm_site_of(const cmh_snapshot *s, const cmh_sites *g, const cmh_vmm_handle *h, uint32_t *stack)
{
    *stack = h->stack < s->nstacks ? h->stack : 0;
    const cmh_stack *st = &s->stacks[*stack];
    return !*stack || !st->count ? NULL : g ? cmh_sites_site_of(g, *stack) : &s->frames[s->stack_frames[st->first]];
}

/* The device's held, unmapped handles (the .cmh vmm_unmapped table) grouped by their site. */
static int vmm_sites(const cmh_snapshot *s, int device, const cmh_sites *g, cmh_leak_report *p)
{
    for (uint32_t i = 0; i < s->nvmm_unmapped; i++) {
        const cmh_vmm_handle *h = &s->vmm_unmapped[i];
        if (h->device != device) continue;
        uint32_t stack;
        const cmh_frame *site = vmm_site_of(s, g, h, &stack);
        uint32_t k = 0;
        while (k < p->nvmm_sites && p->vmm_sites[k].site != site) k++;
        if (k == p->nvmm_sites) {
            cmh_vmm_site *nv = realloc(p->vmm_sites, (k + 1) * sizeof *nv);
            if (!nv) return CMH_ENOMEM;
            p->vmm_sites = nv;
            nv[k] = (cmh_vmm_site){.site = site, .stack = stack};
            p->nvmm_sites++;
        }
        p->vmm_sites[k].bytes += h->size;
        p->vmm_sites[k].handles++;
    }
    if (p->nvmm_sites > 1) qsort(p->vmm_sites, p->nvmm_sites, sizeof *p->vmm_sites, cmp_vmm_site);
    return CMH_OK;
}

#define MAX_THREADS 64 /* threads cut one by one at most (each costs a pattern search) */

/* Which of the threads holding still-live blocks (holds[t] set) repeat steps of their own: set
 * holds[t] to 2 for those with CMH_LEAK_MIN_STEPS steps or more, of which as many hold entries of
 * theirs besides marks.  A thread's steps may be its marks alone (the main thread marking the
 * program's steps, its memory made once before them): that thread repeats no step, and was
 * counted in 'Each of the 4 recording threads holding memory repeats 4 or more steps of its own'. */
static int repeaters(const cmh_snapshot *s, const cmh_replay *r, const cmh_steps *steps, uint32_t maxthread, char *holds)
{
    int64_t n = cmh_replay_length(r);
    uint32_t *seen = calloc(((size_t)maxthread + 1) * 2, sizeof *seen); /* [2t]: steps with entries, [2t+1]: the last one + 1 */
    if (!seen) return CMH_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        const cmh_entry *e = cmh_replay_entry(r, i);
        uint32_t t = cmh_entry_thread(s, e);
        if (!t || t > maxthread || !holds[t] || e->action == CMH_ACT_MARK) continue;
        const cmh_steps *st = &steps[t];
        if (st->count < CMH_LEAK_MIN_STEPS || st->npoints < 2) continue;
        uint32_t j = first_above(st->points, st->npoints, i); /* entry i is in step j - 1 (0: before the first) */
        if (!j || j >= st->npoints || seen[2 * t + 1] == j) continue;
        seen[2 * t + 1] = j;
        seen[2 * t] += st->stride ? st->stride : 1;
    }
    for (uint32_t t = 1; t <= maxthread; t++)
        if (holds[t] && seen[2 * t] >= CMH_LEAK_MIN_STEPS) holds[t] = 2;
    free(seen);
    return CMH_OK;
}

/* The record's steps found in a pattern across recording threads that race (no marks, no
 * annotations; two threads or more with steps of their own): that pattern is the scheduler's and
 * changes from run to run (a program of 4 threads read 'steps: 39 ... (period 65 entries)', then
 * 'steps: 160 ... (period 16 entries)', and its model 'state' in one run, 'held' in the next).
 * Whether they race is a fact of each thread's own loop, never of where the scheduler put their
 * runs: two threads with loops of their own race whether or not their runs happened to overlap
 * this time (three workers of one loop, started together, ran one after another in 18 runs of 20
 * and overlapped in 2: 'steps: unknown' or 'each recording thread's own' by the run, and a thread
 * filling a cache beside them 'held', 'unjudged', 'state', 'stopped' or 'growing').  Then p's
 * race_* figures say the threads' own steps, and the record's steps, unless their count is one
 * thread's loop's, are those of the lowest-numbered thread with steps of its own, its period
 * counted in its own entries.  *first_step: the earliest step any thread of
 * its own begins.  CMH_OK, or CMH_ENOMEM. */
static int leaks_raced(const cmh_snapshot *s, const cmh_replay *r, cmh_steps *steps, uint32_t maxthread, cmh_leak_report *p,
                       int64_t *first_step)
{
    int64_t n = cmh_replay_length(r);
    *first_step = INT64_MAX;
    if (steps[0].source != CMH_STEPS_PATTERN && steps[0].count) return CMH_OK; /* the program's own marks or annotations */
    /* each of the record's steps one thread's whole life, steps enough to judge by (a thread per
     * task, each churning a loop of its own and keeping a block: a leak across the threads, in
     * none of them).  Not a few threads' lives: three workers that ran one after another this
     * time and together the next read 'rising' over 'steps: 3 ... (period 47 entries)' in 1 run
     * of 5, 'stopped' by their own steps in the others */
    if (steps[0].thread_lives && steps[0].count >= CMH_LEAK_MIN_STEPS) return CMH_OK;
    uint64_t *own = calloc((size_t)maxthread + 1, sizeof *own);
    if (!own) return CMH_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        uint32_t t = cmh_entry_thread(s, cmh_replay_entry(r, i));
        if (t > maxthread) continue;
        /* a thread's step in its own entries (its steps' period counts every thread's entries
         * between its boundaries: the race again) */
        if (t && steps[t].npoints >= 2 && i >= steps[t].points[0] && i < steps[t].points[steps[t].npoints - 1]) own[t]++;
    }
    int raced = 0, agrees = 0;
    uint32_t best = 0;
    for (uint32_t a = 1; a <= maxthread; a++) {
        if (steps[a].count < CMH_LEAK_MIN_STEPS || steps[a].npoints < 2) continue;
        if (steps[a].points[0] < *first_step) *first_step = steps[a].points[0];
        if (!best) best = a;
        agrees |= steps[0].count == steps[a].count;
        for (uint32_t b = a + 1; b <= maxthread && !raced; b++) raced = steps[b].count >= CMH_LEAK_MIN_STEPS && steps[b].npoints >= 2;
    }
    int rc = CMH_OK;
    if (raced) {
        p->steps_raced = 1;
        for (uint32_t t = 1; t <= maxthread; t++) {
            if (steps[t].count < CMH_LEAK_MIN_STEPS || steps[t].npoints < 2) continue;
            uint64_t period = (own[t] + steps[t].count / 2) / steps[t].count;
            if (!p->race_threads++) {
                p->race_steps_min = p->race_steps_max = steps[t].count;
                p->race_period_min = p->race_period_max = period;
            }
            if (steps[t].count < p->race_steps_min) p->race_steps_min = steps[t].count;
            if (steps[t].count > p->race_steps_max) p->race_steps_max = steps[t].count;
            if (period < p->race_period_min) p->race_period_min = period;
            if (period > p->race_period_max) p->race_period_max = period;
        }
        /* the record's steps, where the race made them no thread's loop (or none): the first
         * stepping thread's, the same every run; a count one thread's loop has too (a main
         * loop beside workers' churn) is that loop's, and kept */
        int64_t *pts = agrees ? NULL : malloc((size_t)steps[best].npoints * sizeof *pts);
        if (agrees) {
        } else if (!pts) rc = CMH_ENOMEM;
        else {
            memcpy(pts, steps[best].points, (size_t)steps[best].npoints * sizeof *pts);
            cmh_steps_free(&steps[0]);
            steps[0] = steps[best];
            steps[0].points = pts;
            steps[0].thread = 0;
            steps[0].thread_lives = 0;
            steps[0].period = (own[best] + steps[best].count / 2) / steps[best].count;
        }
    }
    free(own);
    return rc;
}

/* The steps leaks judges by: *steps_out[0] the record's, [t] (t = 1..*maxthread, with 2 recording
 * threads or more) each thread's own; where threads race (leaks_raced), p's steps_raced and race_*
 * figures say so and [0] is as leaks_raced left it.  Steps found are memoized (a report page's
 * timeline asks again).  CMH_OK or CMH_ENOMEM (*steps_out then still to be freed, maxthread + 1 of them). */
static int judged_steps(const cmh_snapshot *s, int device, const cmh_replay *r, const cmh_sites *sites, cmh_leak_report *p,
                        cmh_steps **steps_out, uint32_t *maxthread_out, uint32_t *nthreads_out, int64_t *race_first_step)
{
    int64_t n = cmh_replay_length(r);
    /* the recording threads (a recorder snapshot says which thread made each entry) */
    uint32_t maxthread = 0, nthreads = 0;
    for (int64_t i = 0; i < n; i++)
        if (cmh_entry_thread(s, cmh_replay_entry(r, i)) > maxthread) maxthread = cmh_entry_thread(s, cmh_replay_entry(r, i));
    if (maxthread >= MAX_THREADS) maxthread = 0; /* too many to cut one by one: the record's steps alone */
    cmh_steps *steps = calloc((size_t)maxthread + 1, sizeof *steps);
    char *seen = calloc((size_t)maxthread + 1, 1);
    int rc = steps && seen ? CMH_OK : CMH_ENOMEM;
    for (int64_t i = 0; rc == CMH_OK && i < n; i++) seen[cmh_entry_thread(s, cmh_replay_entry(r, i)) <= maxthread ? cmh_entry_thread(s, cmh_replay_entry(r, i)) : 0] = 1;
    for (uint32_t t = 1; rc == CMH_OK && t <= maxthread; t++) nthreads += seen[t];
    if (rc == CMH_OK) rc = cmh_steps_find(s, device, r, sites, 0, &steps[0]);
    for (uint32_t t = 1; rc == CMH_OK && nthreads >= 2 && t <= maxthread; t++)
        if (seen[t]) rc = cmh_steps_find(s, device, r, sites, t, &steps[t]);
    *race_first_step = INT64_MAX;
    if (rc == CMH_OK && nthreads >= 2) rc = leaks_raced(s, r, steps, maxthread, p, race_first_step);
    free(seen);
    *steps_out = steps;
    *maxthread_out = steps ? maxthread : 0;
    *nthreads_out = nthreads;
    return rc;
}

int cmh_leak_steps_judged(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_leak_report *p, cmh_steps **threads, uint32_t *nthreads)
{
    memset(p, 0, sizeof *p);
    *threads = NULL;
    *nthreads = 0;
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    cmh_steps *steps = NULL;
    uint32_t maxthread = 0, nt = 0;
    int64_t first = INT64_MAX;
    int rc = judged_steps(s, device, r, sites, p, &steps, &maxthread, &nt, &first);
    cmh_replay_free(r);
    if (rc == CMH_OK) {
        p->steps = steps[0];
        steps[0].points = NULL;
        cmh_steps_free(&steps[0]);
        if (p->steps_raced) { /* each thread's own: those with steps enough to judge by */
            for (uint32_t t = 1; t <= maxthread; t++) {
                if (steps[t].count < CMH_LEAK_MIN_STEPS || steps[t].npoints < 2) {
                    cmh_steps_free(&steps[t]);
                    continue;
                }
                steps[(*nthreads)++] = steps[t];
            }
            *threads = steps;
            return CMH_OK;
        }
    }
    for (uint32_t t = 0; steps && t <= maxthread; t++) cmh_steps_free(&steps[t]);
    free(steps);
    if (rc != CMH_OK) cmh_steps_free(&p->steps);
    return rc;
}

/* Growth without steps (reports.h CMH_TIME_*, docs/DEFINITIONS.md "Growth without steps"): a
 * site's bytes H held through each slice (H[0] the first), its allocations in each slice (n in
 * all), over a record spanning span_ns.  Observed only: no rate, nothing beyond the record. */
static void judge_time(const int64_t *H, const uint32_t *allocs, uint64_t n, int64_t span_ns, cmh_site *x)
{
    enum { M = CMH_TIME_SLICES };
    x->time_slices = M;
    x->time_span_ns = span_ns;
    x->time_allocs = n;
    if (!span_ns || !H) {
        x->time_verdict = span_ns ? CMH_TIME_FEW : CMH_TIME_UNTIMED;
        return;
    }
    for (int k = 0; k < M; k++) x->time_busy += allocs[k] >= CMH_TIME_SLICE_ALLOCS;
    uint32_t low = 0, top = 0;
    int64_t drop = 0; /* the most it gave back from one slice to the next: what it does without growing */
    for (uint32_t k = 1; k < M; k++) {
        if (H[k] <= H[low]) low = k;
        if (H[k] > H[top]) top = k;
        if (H[k - 1] - H[k] > drop) drop = H[k - 1] - H[k];
    }
    /* (slices counted from 1 in the words and --json) */
    _Static_assert(sizeof x->time_held / sizeof *x->time_held == M, "time_held: one a slice");
    memcpy(x->time_held, H, sizeof x->time_held);
    x->time_low = low + 1, x->time_top_at = top + 1, x->time_drop = drop;
    x->time_from = H[low], x->time_to = H[M - 1], x->time_top = H[top];
    for (uint32_t k = low + 1; k < M; k++) x->time_rises += H[k] > H[k - 1];
    if (span_ns < CMH_TIME_MIN_NS) x->time_verdict = CMH_TIME_SHORT;
    else if (n < CMH_TIME_MIN_ALLOCS) x->time_verdict = CMH_TIME_FEW;
    else if (x->time_busy < CMH_TIME_MIN_BUSY) x->time_verdict = CMH_TIME_BURSTS;
    else {
        uint32_t last5 = 0, last3 = 0, grew = M - 1 - low;
        int64_t before = H[0]; /* the most it held through any slice before the last */
        for (uint32_t k = 1; k < M - 1; k++) before = H[k] > before ? H[k] : before;
        for (uint32_t k = M - 5; k < M; k++) last5 += H[k] > H[k - 1];
        for (uint32_t k = M - 3; k < M; k++) last3 += H[k] > H[k - 1];
        /* level: through the last slice it held no more than its most before, give or take the
         * most it gave back from one slice to the next (a cache full and churning) */
        if (H[M - 1] <= before + drop) x->time_verdict = CMH_TIME_LEVEL;
        /* growing: held the most through the last slice, risen from its lowest over the later
         * half of the record at least, across 3 in 5 of the slices since, 3 of the last 5 and each
         * of the last 3, by more over those 3 than CMH_TIME_DROPS times the most it ever gave back
         * from one slice to the next (a cache's churn about its level is no growth) */
        else if (H[M - 1] >= H[top] && H[M - 1] > H[low] && grew >= CMH_TIME_MIN_GREW && x->time_rises * 5 >= grew * 3 && last5 >= 3 &&
                 last3 == 3 && H[M - 1] - H[M - 4] > CMH_TIME_DROPS * drop) {
            x->time_verdict = CMH_TIME_GROWING;
            x->verdict = CMH_LEAK_GROWING, x->growing = 1;
        } else x->time_verdict = CMH_TIME_UNSTEADY; /* above its level, not steadily: not judged */
    }
}

/* The last of the device's n entries at or before t (-1: none, or t unknown): where a handle
 * made at t begins to count.  (The entries come in time order.) */
static int64_t entry_before(const leak_ctx *c, int64_t n, int64_t t)
{
    if (t <= 0) return -1;
    int64_t lo = 0, hi = n; /* the first entry after t */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cmh_entry_time(c->s, cmh_replay_entry(c->r, mid)) <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

/* The held, unmapped handles judged by site over steps st as blocks are: each counts from its
 * making to the end (it was never released), so a handle made each step, unmapped and never
 * released is a site growing by its size a step, as a block allocated each step and never freed
 * is (such a leak read 'no site grows' and passed --fail-on-leak).  Its making is placed among
 * the entries by its first map's segment_map entry where the maps name it (that entry's own
 * time), else by its cuMemCreate time: a mark taken in the cuMemCreate hook is stamped after the
 * handle, which put 2 of 10 handles a step early ('+8.7 MiB per step' for 8 MiB).  Rows keyed
 * by the site's index + 1 in vmm_rows. */
static int judge_vmm_sites(leak_ctx *c, int device, const cmh_steps *st, int64_t *L, int64_t n, cmh_leak_report *p)
{
    const cmh_snapshot *s = c->s;
    typedef struct {
        uint64_t handle; /* (the key) */
        int64_t time_ns;
    } map_slot;
    cmh_oatab vmm_rows, first_map; /* a handle number's first map time */
    cmh_oa_init(&vmm_rows, sizeof(held_row));
    cmh_oa_init(&first_map, sizeof(map_slot));
    for (uint32_t i = 0; i < s->nvmm_maps; i++) {
        const cmh_vmm_map *m = &s->vmm_maps[i];
        if (m->device != device || !m->handle) continue;
        int created;
        map_slot *f = cmh_oa_get(&first_map, m->handle, &created);
        if (!f) c->nomem = 1;
        else if (created || m->time_ns < f->time_ns) f->time_ns = m->time_ns;
    }
    cmh_physmap *pm = first_map.n ? cmh_physmap_new(s, device) : NULL;
    if (first_map.n && !pm) c->nomem = 1;
    for (uint32_t i = 0; !c->nomem && i < s->nvmm_unmapped; i++) {
        const cmh_vmm_handle *h = &s->vmm_unmapped[i];
        if (h->device != device) continue;
        uint32_t stack, k = 0;
        const cmh_frame *site = vmm_site_of(s, c->sites, h, &stack);
        while (k < p->nvmm_sites && p->vmm_sites[k].site != site) k++;
        uint64_t num = pm ? cmh_physmap_held_handle(pm, h) : 0;
        const map_slot *mapped = num ? cmh_oa_find(&first_map, num) : NULL;
        int64_t made = entry_before(c, n, mapped ? mapped->time_ns : h->time_ns);
        if (k < p->nvmm_sites) held_add_to(c, &vmm_rows, (uint64_t)k + 1, st, made, INT64_MAX, h->size, 0);
    }
    cmh_physmap_free(pm);
    cmh_oa_free(&first_map);
    for (uint32_t k = 0; !c->nomem && k < p->nvmm_sites; k++) {
        cmh_vmm_site *v = &p->vmm_sites[k];
        cmh_site *x = &v->judged;
        memset(x, 0, sizeof *x);
        x->stack = v->stack;
        x->bytes = v->bytes;
        x->count = v->handles;
        series_in(c, &vmm_rows, (uint64_t)k + 1, L, st->npoints);
        cmh_leak_judge(st, L, n, x);
        p->leaking += x->growing;
        if (x->verdict == CMH_LEAK_STOPPED) p->stopped++, p->stopped_bytes += v->bytes;
    }
    cmh_oa_free(&vmm_rows);
    return c->nomem ? CMH_ENOMEM : CMH_OK;
}

const char *cmh_leak_time_name(int v)
{
    switch (v) {
    case CMH_TIME_UNTIMED: return "untimed";
    case CMH_TIME_SHORT: return "too short";
    case CMH_TIME_FEW: return "too few allocations";
    case CMH_TIME_BURSTS: return "bursts";
    case CMH_TIME_GROWING: return "growing";
    case CMH_TIME_LEVEL: return "level";
    case CMH_TIME_UNSTEADY: return "unsteady";
    default: return "not tried";
    }
}

int cmh_leaks_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, uint64_t min_bytes, cmh_leak_report *p)
{
    memset(p, 0, sizeof *p);
    cmh_report_base_fill(s, device, &p->base);
    p->vmm_unmapped_bytes = cmh_owners_vmm_unmapped(s, device, &p->vmm_unmapped_handles);
    cmh_replay *r = vmm_sites(s, device, sites, p) == CMH_OK ? cmh_replay_new(s, device) : NULL;
    if (!r) {
        cmh_leak_report_free(p);
        return CMH_ENOMEM;
    }
    int64_t n = cmh_replay_length(r);
    uint32_t maxthread = 0, nthreads = 0;
    leak_ctx c = {.r = r, .sites = sites, .s = s};
    c.t_first = n ? cmh_entry_time(s, cmh_replay_entry(r, 0)) : 0;
    c.t_last = n ? cmh_entry_time(s, cmh_replay_entry(r, n - 1)) : 0;
    cmh_oa_init(&c.born, sizeof(born_slot));
    cmh_oa_init(&c.rows, sizeof(held_row));
    cmh_oa_init(&c.crows, sizeof(held_row));
    cmh_oa_init(&c.erows, sizeof(held_row));
    cmh_oa_init(&c.ecrows, sizeof(held_row));
    cmh_oa_init(&c.owners, sizeof(owner_slot));
    cmh_oa_init(&c.firsts, sizeof(first_slot));
    cmh_oa_init(&c.times, sizeof(time_row));
    cmh_oa_init(&c.lives, sizeof(lives_slot));
    cmh_oa_init(&c.refused, sizeof(refused_slot));
    cmh_oa_init(&c.rrows, sizeof(held_row));
    cmh_oatab pending, more; /* blocks freed with stream work pending at the end, pieces past the first (add_end_block) */
    cmh_oa_init(&pending, sizeof(uint64_t));
    cmh_oa_init(&more, sizeof(uint64_t));
    end_tabs ends = {&pending, &more};
    cmh_steps *steps = NULL;
    int64_t *L = NULL;
    cmh_site *live = NULL, *ones = NULL; /* a site judged over each thread */
    uint32_t nlive = 0;
    int64_t race_first_step = INT64_MAX;
    int rc = judged_steps(s, device, r, sites, p, &steps, &maxthread, &nthreads, &race_first_step);
    if (rc != CMH_OK) goto done;
    c.steps = steps;
    c.nsteps = nthreads >= 2 ? maxthread + 1 : 1;
    for (uint32_t t = 1; p->steps_raced && t <= maxthread && t < 64; t++) {
        if (steps[t].count >= CMH_LEAK_MIN_STEPS && steps[t].npoints >= 2) c.apart |= 1ull << t;
        /* a thread with no loop of its own that is no set-up's: its blocks count over no other
         * thread's steps either (unjudged below); over the first racing thread's, a cache it
         * filled while they looped read 'growing +1.0 MiB per step over the last 10 steps' or
         * 'stopped' where its burst fell across their steps */
        else if (steps[t].count < CMH_LEAK_MIN_STEPS && !setup_thread(s, t)) c.apart |= 1ull << t;
    }

    /* the blocks' lives: a report page's history (reports.h, its events as this replay's
     * observer would be told of them), else the replay */
    const cmh_replay_history *h = cmh_memo_history(s, device);
    if (h && h->n == n) {
        for (uint64_t k = 0; k < h->nev; k++) {
            const cmh_block_event *ev = &h->ev[k];
            int at_end = (int64_t)ev->pos1 == n + 1;
            /* (the replay's position while reconciling is its last entry's) */
            leak_event(&c, at_end ? n - 1 : (int64_t)ev->pos1 - 1, at_end, ev->delta, ev->stack, ev->addr);
        }
    } else {
        h = NULL;
        cmh_replay_observe(r, leak_observe, &c); /* the state before the first entry */
        while (cmh_replay_position(r) + 1 < n && cmh_replay_step(r)) {}
        c.at_end = 1;
        while (cmh_replay_step(r)) {} /* the reconciliation with the final segments */
        if (p->base.history) cmh_replay_gap(r, &p->base.gap);
    }
    if (h && cmh_trace_gap_compute(s, device, &p->base.gap) != CMH_OK) rc = CMH_ENOMEM; /* (the memo's replay) */
    /* still live: held to the end.  Not one the program freed with stream work pending: freed by
     * the program, gone at the end (the rows and the header leave it out: a pending 4 MiB read
     * '8.0 MiB in 1 block still live' above '12.0 MiB still live (2 blocks)' in the outcome) */
    if (h) {
        if (cmh_end_blocks(s, device, add_end_block, &ends) != CMH_OK) rc = CMH_ENOMEM;
    } else cmh_replay_blocks(r, add_end_block, &ends);
    if (!pending.esize) rc = CMH_ENOMEM;
    for (uint32_t i = 0; i < c.born.cap; i++)
        if (cmh_oa_keyat(&c.born, i)) {
            const born_slot *b = cmh_oa_at(&c.born, i);
            held_block(&c, b, pending.n && cmh_oa_find(&pending, cmh_oa_keyat(&c.born, i)) ? n - 1 : INT64_MAX,
                       more.n && cmh_oa_find(&more, cmh_oa_keyat(&c.born, i)));
        }
    for (int64_t i = 0; i < n; i++) refused_request(&c, i);
    if (c.nomem || cmh_replay_status(r) != CMH_OK) rc = CMH_ENOMEM;

    /* still live at the end, by site */
    cmh_site_map end;
    cmh_site_map_init(&end, sites);
    if (h) {
        if (cmh_end_blocks(s, device, cmh_site_map_add_block, &end) != CMH_OK) rc = CMH_ENOMEM;
    } else cmh_replay_blocks(r, cmh_site_map_add_block, &end);
    if (cmh_site_map_finish(&end, &live, &nlive) != CMH_OK) rc = CMH_ENOMEM;
    /* which threads hold still-live blocks */
    char *holds = rc == CMH_OK ? calloc((size_t)maxthread + 1, 1) : NULL;
    if (rc == CMH_OK && !holds) rc = CMH_ENOMEM;
    for (uint32_t i = 0; rc == CMH_OK && i < c.born.cap; i++)
        if (cmh_oa_keyat(&c.born, i) && !(pending.n && cmh_oa_find(&pending, cmh_oa_keyat(&c.born, i)))) {
            uint32_t t = ((const born_slot *)cmh_oa_at(&c.born, i))->thread;
            holds[t <= maxthread ? t : 0] = 1;
        }
    if (rc == CMH_OK && (!(L = malloc(CMH_STEPS_MAX_POINTS * sizeof *L)) || !(ones = malloc(64 * sizeof *ones)))) rc = CMH_ENOMEM;
    /* which of them have a loop of their own (holds[t] 2): known before the sites are judged */
    if (rc == CMH_OK && nthreads >= 2 && repeaters(s, r, steps, maxthread, holds) != CMH_OK) rc = CMH_ENOMEM;
    if (rc != CMH_OK) {
        free(holds);
        goto done;
    }
    for (uint32_t i = 0; i < nlive; i++) {
        cmh_site *x = &live[i];
        judge_of(&c, x->group, 0, &steps[0], L, n, x);
        x->thread = x->threads = 0;
        x->threads_apart = 0;
        x->thread_mask = 0;
        /* a site that one thread kept growing grows, whatever the record as a whole says; with
         * the record's steps unknown, the steps of the thread that made its blocks judge it */
        const owner_slot *own = cmh_oa_find(&c.owners, (uint64_t)x->group + 1);
        /* still-live blocks of several threads, each with steps of its own, and the record's steps
         * found in their allocations interleaved (or not at all): judged thread by thread.  Those
         * steps change with the race from run to run (3 threads keeping 256 KiB a step each read
         * '+768.0 KiB per step over the last 9 steps', 'over the last 6', or thread 1's 256 KiB
         * alone with the record's steps not found); each thread's own entries keep their order.
         * Not where each of the record's steps is one thread's whole life (a thread per task
         * keeping a block as each appears: a leak across the threads, in none of them) */
        uint32_t tl[64], nt = 0;
        int by_threads = nthreads >= 2 && own && own->mixed && !own->unowned && !steps[0].thread_lives &&
                         (steps[0].source == CMH_STEPS_PATTERN || !steps[0].count);
        for (uint32_t t = 1; by_threads && t < 64; t++)
            if (own->mask >> t & 1) {
                if (t > maxthread || steps[t].count < CMH_LEAK_MIN_STEPS) by_threads = 0;
                tl[nt++] = t;
            }
        for (uint32_t k = 0; by_threads && k < nt; k++) {
            ones[k] = *x;
            judge_of(&c, x->group, tl[k], &steps[tl[k]], L, n, &ones[k]);
        }
        /* every still-live block of it made by one thread that marks no steps yet runs a loop of
         * its own, where the record's steps are marks (or annotations) other threads made: judged
         * by that thread's loop alone.  Another thread's marks cut its entries where the scheduler
         * put them this time (a worker keeping 1 MiB in 6 of its 16 iterations, the steps marked
         * by its sibling, read 'stopped' in 13 runs of 15 and 'state' in 2, its first marked step
         * a warm-up that had already added 2.0 MiB); the marks a thread makes are its own steps */
        uint32_t lt = own && !own->mixed && !own->unowned ? own->thread : 0;
        int by_own_loop = nthreads >= 2 && lt && lt <= maxthread && holds[lt] == 2 && steps[lt].source == CMH_STEPS_PATTERN &&
                          (steps[0].source == CMH_STEPS_MARKS || steps[0].source == CMH_STEPS_ANNOTATIONS);
        if (by_own_loop) {
            cmh_site one = *x;
            if (judge_of(&c, x->group, lt, &steps[lt], L, n, &one)) *x = one, x->thread = lt;
            else by_own_loop = 0;
        }
        if (by_threads) { /* (growing by the record's steps alone: threads that appear one by one, each keeping a block) */
            cmh_site rec = *x;
            cmh_leak_combine_threads(x, ones, tl, nt);
            /* not where the threads race: the record's steps are then one thread's, and the other
             * threads' blocks fall in them where the scheduler put them (4 threads each keeping
             * their first 5 buffers, one started late, read 'growing ... over the last 223
             * steps' in 1 run of 40) */
            /* Nor where every thread holding it grew over its own steps and then stopped (each
             * a cache of its own, filled and full: a pool of workers, none growing now): the
             * threads' verdict, stopped, explains the record's rise.  (3 threads each filling a cache in 10 of its
             * 20 iterations read 'growing: +521.6 KiB per step over the last 40 steps' where they
             * ran one after another, and 'state' where they overlapped.) */
            int stopped = 1;
            for (uint32_t k = 0; k < nt && stopped; k++) stopped = !ones[k].held || cmh_leak_site_stopped(&ones[k]);
            if (x->verdict != CMH_LEAK_GROWING && rec.verdict == CMH_LEAK_GROWING && !p->steps_raced && !stopped) *x = rec;
            else x->threads_apart = !p->steps_raced;
        }
        /* growing by the record's steps, and every live block of it made by one thread whose own
         * steps call it growing too: its rate and steps are that thread's.  The record's steps, from
         * several threads' allocations interleaved as they raced, change from run to run (one
         * program read +1.0 MiB per step over 11 steps, then +2.0 MiB over 6); the thread's do not */
        else if (!by_own_loop && x->verdict == CMH_LEAK_GROWING && nthreads >= 2 && own && own->thread && !own->mixed && own->thread <= maxthread && holds[own->thread] &&
            steps[own->thread].count >= CMH_LEAK_MIN_STEPS) {
            cmh_site one = *x;
            judge_of(&c, x->group, own->thread, &steps[own->thread], L, n, &one);
            if (one.verdict == CMH_LEAK_GROWING) *x = one, x->thread = own->thread;
        }
        for (uint32_t t = 1; !by_threads && !by_own_loop && nthreads >= 2 && t <= maxthread && x->verdict != CMH_LEAK_GROWING; t++) {
            /* the thread that made every still-live block of it judges it when nothing else can;
             * not one of several (the first of them seen is the hash table's order: a site of
             * main's model and a cache another thread filled in one go read 'state' in 1 run of
             * 12, judged by main's steps, and 'held, steps not found' in the others) */
            int owner = own && !own->mixed && own->thread == t;
            if (!holds[t] || !steps[t].npoints) continue;
            cmh_site one = *x;
            if (!judge_of(&c, x->group, t, &steps[t], L, n, &one) && !owner) continue;
            /* (an owner apart: its blocks are in none of the record's rows) */
            if (one.verdict == CMH_LEAK_GROWING || (owner && (x->verdict == CMH_LEAK_UNJUDGED || (t < 64 && (c.apart >> t & 1))))) {
                *x = one;
                x->thread = t;
            }
        }
        /* growing (or stopped) over the record's steps, called from several lines: which
         * callers' blocks grow (stopped: a helper's leak that stopped, beside the model's state
         * made through it) */
        if ((x->verdict == CMH_LEAK_GROWING || x->verdict == CMH_LEAK_STOPPED) && !x->thread && !x->threads && x->ncallers >= 2) {
            x->callers_judged = 1;
            for (uint32_t k = 0; k < x->ncallers; k++) {
                cmh_site one = *x;
                uint64_t key = caller_key(x->group, &s->frames[x->callers[k].frame]);
                if (!judge_row(&c, 1, key, &steps[0], L, n, &one)) continue;
                x->callers[k].growing = one.verdict == CMH_LEAK_GROWING;
                x->callers[k].stopped = one.verdict == CMH_LEAK_STOPPED;
                x->callers[k].rate = x->callers[k].growing || x->callers[k].stopped ? one.rate : 0;
            }
        }
        /* growing over its threads' own steps, called from several lines: each caller's blocks
         * that each growing thread made, judged over that thread's steps (a thread keeping a
         * buffer an iteration through a helper the main thread called once for its model) */
        else if (x->verdict == CMH_LEAK_GROWING && (x->thread || x->threads) && x->ncallers >= 2) {
            uint64_t mask = x->threads ? x->thread_mask : x->thread < 64 ? 1ull << x->thread : 0;
            x->callers_judged = mask != 0;
            for (uint32_t k = 0; mask && k < x->ncallers; k++) {
                uint64_t key = caller_key(x->group, &s->frames[x->callers[k].frame]);
                x->callers[k].growing = 0;
                x->callers[k].rate = 0;
                for (uint32_t t = 1; t < 64 && t <= maxthread; t++) {
                    cmh_site one = *x;
                    if (!(mask >> t & 1) || !judge_row(&c, 1, thread_caller_key(key, t), &steps[t], L, n, &one)) continue;
                    if (one.verdict != CMH_LEAK_GROWING) continue;
                    x->callers[k].growing = 1;
                    x->callers[k].rate = (int64_t)((uint64_t)x->callers[k].rate + (uint64_t)one.rate);
                }
            }
        }
        /* the growth (or the stopped growth) is one caller's: the row shows that caller's stack,
         * the line a user mends, not the stack of the caller holding the most bytes (a model's
         * state made through the same helper) */
        if (x->callers_judged) {
            uint32_t ng = 0, only = 0;
            for (uint32_t k = 0; k < x->ncallers; k++)
                if (x->verdict == CMH_LEAK_STOPPED ? x->callers[k].stopped : x->callers[k].growing) ng++, only = k;
            if (ng == 1 && x->callers[only].count) x->stack = x->callers[only].stack;
        }
        const first_slot *fs = cmh_oa_find(&c.firsts, (uint64_t)x->group + 1);
        if (fs) cmh_leak_judge_late(&steps[x->thread <= maxthread ? x->thread : 0], fs->index, n, x);
        const cmh_thread_info *ti = cmh_snapshot_thread(s, x->thread);
        x->thread_tid = ti ? ti->tid : 0;
        x->thread_name = ti ? cmh_str(s, ti->name) : "";
        x->made_by = own ? own->mask : 0;
        x->made_by_other = own ? own->unowned : 0;
        /* steps not found for it: judged over the record's time instead */
        if (x->verdict == CMH_LEAK_UNJUDGED && !x->threads && !(x->steps && x->steps < CMH_LEAK_MIN_STEPS)) {
            const time_row *tr = cmh_oa_find(&c.times, (uint64_t)x->group + 1);
            judge_time(tr ? tr->held : NULL, tr ? tr->allocs : NULL, tr ? tr->nallocs : 0, c.t_first && c.t_last > c.t_first ? c.t_last - c.t_first : 0, x);
            p->time_growing += x->time_verdict == CMH_TIME_GROWING;
            p->time_level += x->time_verdict == CMH_TIME_LEVEL;
        }
        p->time_unjudged += x->verdict == CMH_LEAK_UNJUDGED && x->time_verdict != CMH_TIME_LEVEL;
        p->leaking += x->growing;
        if (x->verdict == CMH_LEAK_STOPPED) p->stopped++, p->stopped_bytes += x->bytes;
        p->live_bytes += x->bytes;
        p->live_blocks += x->count;
        p->live_sites++;
    }
    for (uint32_t t = 1; nthreads >= 2 && t <= maxthread; t++) {
        p->threads += holds[t] != 0;
        p->threads_judged += holds[t] == 2;
    }
    p->judged = !p->live_blocks || cmh_steps_active(&steps[0]) >= CMH_LEAK_MIN_STEPS || (p->threads && p->threads_judged == p->threads && !holds[0]);
    /* threads racing: judged by the threads alone; a holding thread without steps of its own
     * must be the main thread, and have made its still-live blocks before the others' first step
     * (a model loaded first: setup_thread) */
    if (p->steps_raced) {
        /* (and why not, the first reason met in this order: before the history, no thread, a thread's steps) */
        int judged = 1, why = 0;
        for (uint32_t i = 0; i < c.born.cap; i++)
            if (cmh_oa_keyat(&c.born, i) && !(pending.n && cmh_oa_find(&pending, cmh_oa_keyat(&c.born, i)))) {
                const born_slot *b = cmh_oa_at(&c.born, i);
                uint32_t t = b->thread <= maxthread ? b->thread : 0;
                int w = !t ? (b->recorded ? CMH_UNJUDGED_NO_THREAD : CMH_UNJUDGED_BEFORE_HISTORY)
                        : steps[t].count < CMH_LEAK_MIN_STEPS && (b->index >= race_first_step || !setup_thread(s, t)) ? CMH_UNJUDGED_THREAD_STEPS
                                                                                              : 0;
                if (!w) continue;
                judged = 0;
                /* and the site the block is of: its row cannot claim what the device cannot */
                owner_slot *o = cmh_oa_find(&c.owners, (uint64_t)(sites ? cmh_sites_group(sites, b->stack) : b->stack) + 1);
                if (o) {
                    if (!o->unjudged || w < o->unjudged) o->unjudged = w, o->unjudged_thread = w == CMH_UNJUDGED_THREAD_STEPS ? t : 0;
                    o->unjudged_bytes += b->size;
                    o->unjudged_blocks++;
                }
                if (!why || w < why) {
                    why = w;
                    p->unjudged_thread = w == CMH_UNJUDGED_THREAD_STEPS ? t : 0;
                    p->unjudged_thread_steps = w == CMH_UNJUDGED_THREAD_STEPS ? steps[t].count : 0;
                }
            }
        p->judged = !p->live_blocks || judged;
        p->unjudged_why = p->judged ? 0 : why;
    }
    free(holds);
    /* steps not found, yet every still-live site judged over the record's time */
    if (!p->judged && p->live_blocks && !p->time_unjudged && (p->time_growing || p->time_level)) p->judged = 1;
    if (p->judged) p->unjudged_why = p->unjudged_thread = p->unjudged_thread_steps = 0;
    /* the sites holding those blocks: unjudged too, and why; a growth (or a stopped one) found in
     * what was judged stands, those blocks can only add to it */
    for (uint32_t i = 0; !p->judged && p->steps_raced && i < nlive; i++) {
        cmh_site *x = &live[i];
        const owner_slot *own = cmh_oa_find(&c.owners, (uint64_t)x->group + 1);
        if (!own || !own->unjudged || x->verdict == CMH_LEAK_GROWING || x->verdict == CMH_LEAK_STOPPED) continue;
        x->verdict = CMH_LEAK_UNJUDGED;
        x->unjudged_why = own->unjudged;
        x->unjudged_thread = own->unjudged_thread;
        x->unjudged_thread_steps = own->unjudged_thread && own->unjudged_thread <= maxthread ? steps[own->unjudged_thread].count : 0;
        x->unjudged_bytes = own->unjudged_bytes;
        x->unjudged_blocks = own->unjudged_blocks;
    }
    if (rc == CMH_OK && judge_vmm_sites(&c, device, &steps[0], L, n, p) != CMH_OK) rc = CMH_ENOMEM;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < nlive; i++) {
        if (live[i].bytes < min_bytes) { /* hidden from the rows, never from the totals */
            p->hidden_sites++;
            p->hidden_bytes += live[i].bytes;
            continue;
        }
        live[kept++] = live[i];
    }
    p->sites = live;
    p->nsites = kept;
    p->grew_bytes = c.grew;
    p->grew_blocks = c.grew_blocks;
    for (uint32_t k = 0; k < CMH_LEAK_RATE_SLICES; k++) p->grew_slices += c.grew_slices >> k & 1;
    p->run_ns = c.t_first && c.t_last > c.t_first ? c.t_last - c.t_first : 0; /* (0: untimed, said without a rate) */
    p->process_ns = s->start_time_ns > 0 && s->dump_time_ns > s->start_time_ns ? s->dump_time_ns - s->start_time_ns : 0;
    if (p->run_ns >= CMH_LEAK_RATE_MIN_NS && p->grew_slices >= CMH_LEAK_MIN_STEPS)
        p->run_rate = (double)p->grew_bytes * 1e9 / (double)p->run_ns;
    live = NULL;
    p->steps = steps[0];
    steps[0].points = NULL;
done:
    free(live);
    free(L);
    free(ones);
    for (uint32_t t = 0; steps && t <= maxthread; t++) cmh_steps_free(&steps[t]);
    free(steps);
    for (uint32_t i = 0; i < c.nheld; i++) free(c.held[i]);
    free(c.held);
    cmh_oa_free(&c.rows);
    cmh_oa_free(&c.crows);
    cmh_oa_free(&c.erows);
    cmh_oa_free(&c.ecrows);
    cmh_oa_free(&c.owners);
    cmh_oa_free(&c.firsts);
    cmh_oa_free(&c.times);
    cmh_oa_free(&c.lives);
    cmh_oa_free(&c.refused);
    cmh_oa_free(&c.rrows);
    cmh_oa_free(&c.born);
    cmh_oa_free(&pending);
    cmh_oa_free(&more);
    cmh_replay_free(r);
    if (rc != CMH_OK) cmh_leak_report_free(p);
    return rc;
}

void cmh_leak_report_free(cmh_leak_report *p)
{
    free(p->sites);
    free(p->vmm_sites);
    cmh_steps_free(&p->steps);
    memset(p, 0, sizeof *p);
}
