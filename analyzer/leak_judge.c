/*
 * leak_judge.c - one site's leak verdict over one series of held bytes, a figure per step boundary
 * (cumemhist/reports.h, cmh_leak_judge; docs/DEFINITIONS.md, "The leak verdict").  The series are
 * cmh_leaks_compute's (leaks.c): the record's steps, or one recording thread's.
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"

/* Kendall's tau (the tau-a form) of a series against its order: 1 when every later value is
 * above every earlier one, -1 when below, 0 for no trend. */
static double kendall_tau(const int64_t *v, uint32_t n)
{
    if (n < 2) return 0;
    int64_t sum = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++) sum += (v[j] > v[i]) - (v[j] < v[i]);
    return (double)sum / ((double)n * (n - 1) / 2);
}

/* The least-squares slope of a series against its order, in its units per point. */
static int64_t slope(const int64_t *v, uint32_t n)
{
    if (n < 2) return 0;
    double mx = (n - 1) / 2.0, my = 0, sxy = 0, sxx = 0;
    for (uint32_t i = 0; i < n; i++) my += (double)v[i];
    my /= n;
    for (uint32_t i = 0; i < n; i++) sxy += (i - mx) * ((double)v[i] - my), sxx += (i - mx) * (i - mx);
    double b = sxy / sxx;
    if (!(b > -9.2e18 && b < 9.2e18)) return 0; /* a hostile file's figures: no rate rather than an overflow */
    return (int64_t)(b < 0 ? b - 0.5 : b + 0.5);
}

/* A rise over the whole run, however slow: a leak of a block every 15 steps rises across a
 * third of the stretches between points, so no recent stretch rose across half of its own, and
 * the last 7 steps, between two of its blocks, read 'then stopped'.  Over L[1..k] (after the
 * first step) its held bytes rose across need stretches at least, in each third of them, trending
 * up, and have been flat at the end for fewer stretches than they ever were between two rises
 * before (a leak that stopped has been flat longer than its rhythm; a cache filled in the first
 * steps has no rise in the later thirds).  Sets x as growing, in stretches between points. */
static int steady_rise(const int64_t *L, uint32_t k, uint32_t need, int last_own, cmh_site *x)
{
    if (k < 4 || L[k] <= L[1]) return 0;
    uint32_t rises = 0, first = 0, last = 1, gap = 0, third[3] = {0, 0, 0};
    for (uint32_t j = 2; j <= k; j++) {
        if (L[j] <= L[j - 1]) continue;
        rises++;
        if (!first) first = j;
        if (j - last > gap) gap = j - last; /* (from point 1 to the first rise too) */
        last = j;
        third[(uint64_t)(j - 2) * 3 / (k - 1)]++;
    }
    if (rises < need || !third[0] || !third[1] || !third[2] || k - last >= gap) return 0;
    double tau = kendall_tau(L + 1, k);
    if (tau < CMH_LEAK_MIN_TREND) return 0;
    x->verdict = CMH_LEAK_GROWING;
    x->growing = 1;
    x->growth_steps = k - first + 1;
    uint32_t end = last_own && k - 1 >= first ? k - 1 : k;
    x->rate = slope(L + first - 1, end - first + 2);
    x->trend = tau;
    return 1;
}

static void judge_series(const cmh_steps *st, const int64_t *L, int64_t end, uint32_t lead, cmh_site *x);
static void judge_cycles(const cmh_steps *st, const int64_t *L, int64_t end, uint32_t lead, cmh_site *x);

/* The verdict over one series: L[0..np-1], a site's held bytes at each point of steps st.  The
 * steps before the series' first entry (other devices' marks, placed by time before this device
 * was first used) are no steps of its: its first step with entries is its warm-up, and growth
 * needs CMH_LEAK_MIN_STEPS of its own (a device used from step 8 of 10 read '+5.0 MiB per step'
 * for its weights made in step 8 and 1 MiB kept a step). */
void cmh_leak_judge(const cmh_steps *st, const int64_t *L, int64_t end, cmh_site *x)
{
    uint32_t z = cmh_steps_lead(st);
    if (!z) {
        judge_cycles(st, L, end, 0, x);
        return;
    }
    cmh_steps own = *st;
    own.points = st->points + z;
    own.npoints = st->npoints - z;
    own.count = cmh_steps_active(st);
    judge_cycles(&own, L + z, end, z * (st->stride ? st->stride : 1), x);
}

#define CYCLE_MIN_TURNS 3 /* whole turns a cycle must be seen repeating in before it is taken for one */

/* The cycle of a series that falls and rises again in a fixed pattern: the least q >= 2 (in
 * points) for which L[j] - L[j - q] is one figure, *turn, over L[1..*last] (after the warm-up),
 * CYCLE_MIN_TURNS turns at least, *last moved on over the points after that still keep it.
 * The last two points are left out of the search (the last step's own blocks, and those past the
 * last point: a step the record cut short, which a cycle need not match).  0 where there is none:
 * a series that never falls (a leak's steps, a slow leak's stairs: the windows judge those), or
 * one whose every stretch changes by the same (a line). */
/* L[j] - L[i], wrapping: a hostile file's figures may lie anywhere in int64 */
static int64_t change(const int64_t *L, uint32_t i, uint32_t j) { return (int64_t)((uint64_t)L[j] - (uint64_t)L[i]); }

static uint32_t cycle_of(const int64_t *L, uint32_t k, uint32_t *last, int64_t *turn)
{
    if (k < 2 + 2 * CYCLE_MIN_TURNS) return 0;
    uint32_t e = k - 2, falls = 0, line = 1;
    for (uint32_t j = 2; j <= e; j++) {
        falls += L[j] < L[j - 1];
        line &= change(L, j - 1, j) == change(L, 1, 2);
    }
    if (!falls || line) return 0;
    for (uint32_t q = 2; (uint64_t)q * CYCLE_MIN_TURNS <= e; q++) {
        int64_t d = change(L, 1, 1 + q);
        uint32_t j = 2 + q;
        while (j <= e && change(L, j - q, j) == d) j++;
        if (j <= e) continue;
        while (j <= k && change(L, j - q, j) == d) j++;
        *last = j - 1;
        *turn = d;
        return q;
    }
    return 0;
}

/* A series that cycles (cycle_of: sizes that come round every q steps, a buffer of each size in
 * turn) is judged on whole turns of its cycle: its points every q-th, ending at the last that
 * keeps the cycle, with q steps between two.  A window of points judged as they come begins and
 * ends where it may inside a turn: a sawtooth of 1..7 MiB, steady, read 'growing: +914.3 KiB per
 * step over the last 7 steps' where the record ended at a tooth's top, 'state' where it ended
 * after a fall (tests/cycle_steps.c).  On whole turns it rises only where each turn holds more
 * than the one before: a leak beside the cycle still grows, by what a turn adds over its steps.
 * What it holds is still what it held across the last whole step (not the last whole turn's). */
static void judge_cycles(const cmh_steps *st, const int64_t *L, int64_t end, uint32_t lead, cmh_site *x)
{
    uint32_t np = st->npoints, k = np ? np - 1 : 0, last = 0;
    int64_t turn = 0;
    uint32_t q = cycle_of(L, k, &last, &turn);
    int64_t *F = q ? malloc(((size_t)last / q + 1) * sizeof *F) : NULL;
    int64_t *P = F ? malloc(((size_t)last / q + 1) * sizeof *P) : NULL;
    if (!P) { /* (no cycle, or no room for one: the series as it is) */
        free(F);
        judge_series(st, L, end, lead, x);
        return;
    }
    uint32_t n = last / q + 1, skip = last - (n - 1) * q, stride = st->stride ? st->stride : 1;
    for (uint32_t i = 0; i < n; i++) F[i] = L[skip + i * q], P[i] = st->points[skip + i * q];
    cmh_steps turns = *st;
    turns.points = P;
    turns.npoints = n;
    turns.stride = stride * q;
    turns.count = (n - 1) * turns.stride;
    judge_series(&turns, F, end, lead + skip * stride, x);
    free(F);
    free(P);
    /* the record's steps, and what it held across the last whole step of them */
    x->steps = st->count;
    int64_t h = k >= 2 || st->points[k] >= end ? L[k - 1] : L[k];
    x->held = (uint64_t)(h > 0 ? h : 0);
    if (x->verdict == CMH_LEAK_STATE || x->verdict == CMH_LEAK_STEADY)
        x->verdict = x->held ? CMH_LEAK_STATE : CMH_LEAK_STEADY;
}

/* A growth that stopped (CMH_LEAK_STOPPED): L rose across rises of the stretches after the first
 * (CMH_LEAK_MIN_RISES at least), the last at last_rise, and no more since; 0 where it did not
 * grow from its first rise to its last (falls between them as large).  Its stretch runs from
 * the first rise after the warm-up to the last, with the warm-up too where that grew by as much
 * as a step of the stretch did (within a factor of 2: a leak from the first step, 8 MiB a step
 * over steps 1-10, not 'steps 2-10' and 80 MiB held, a sum that did not add up); else what the
 * warm-up added is said apart (state made in it: an optimizer's, a model's).  The rate is what
 * it grew by over the stretch, per step.  lead: the steps before the series' (their numbers). */
static int stopped(const int64_t *L, uint32_t last_rise, uint32_t stride, uint32_t lead, cmh_site *x)
{
    uint32_t first = 2;
    while (L[first] <= L[first - 1]) first++;
    if (L[last_rise] <= L[first - 1]) return 0; /* (rises outweighed by falls between them: no growth) */
    uint64_t grew = (uint64_t)L[last_rise] - (uint64_t)L[first - 1], per = grew / (last_rise - first + 1);
    uint64_t warm = x->warm_rise ? (uint64_t)L[1] - (uint64_t)L[0] : 0;
    if (first == 2 && warm && warm <= 2 * per && 2 * warm >= per) first = 1, grew += warm, warm = 0;
    x->verdict = CMH_LEAK_STOPPED;
    x->growth_first = (first - 1) * stride + 1 + lead;
    x->growth_steps = (last_rise - first + 1) * stride;
    x->rate = (int64_t)(grew / x->growth_steps);
    x->top = (uint64_t)L[last_rise];
    x->warm_growth = warm;
    return 1;
}

static void judge_series(const cmh_steps *st, const int64_t *L, int64_t end, uint32_t lead, cmh_site *x)
{
    uint32_t np = st->npoints, k = np ? np - 1 : 0; /* intervals between points */
    x->verdict = CMH_LEAK_UNJUDGED;
    x->growing = 0;
    x->steps = st->count;
    x->rises = x->growth_steps = x->growth_first = x->flat_steps = 0;
    x->top = x->warm_growth = 0;
    x->warm_rise = 0;
    x->stride = 1;
    x->rate = x->rise = 0;
    x->trend = 0;
    x->held = 0;
    if (!k) return;
    /* what it held across the last whole step and still holds (the last point's bytes may be
     * that step's own: gradients, activations of a step the record ended in) */
    int last_own = k >= 2 || st->points[k] >= end;
    int64_t h = last_own ? L[k - 1] : L[k];
    x->held = (uint64_t)(h > 0 ? h : 0);
    uint32_t last_rise = 1;
    x->warm_rise = L[1] > L[0]; /* (the warm-up step: no rise of a leak's, yet it rose; said apart) */
    for (uint32_t j = 2; j <= k; j++)
        if (L[j] > L[j - 1]) x->rises++, last_rise = j;
    int64_t stride = st->stride ? st->stride : 1;
    /* past 512 steps a point is every stride-th step: the rises are counted in the stretches
     * between points that rose (times the stride, a leak of one block every 15 steps, measured
     * every 7, read 'grew in 1393 steps' for 200 blocks), the flat end in steps */
    x->stride = (uint32_t)stride;
    x->flat_steps = x->rises ? (k - last_rise) * (uint32_t)stride : 0;
    if (st->count >= CMH_LEAK_MIN_STEPS) {
        /* the longest recent stretch, after the first step, that rose across at least half of
         * its steps (and 3), trending up; its growth measured from its first rise */
        uint32_t need = st->thread_lives ? CMH_LEAK_MIN_THREAD_RISES : CMH_LEAK_MIN_RISES;
        for (uint32_t from = 2; from + need - 1 <= k; from++) {
            uint32_t len = k - from + 1, up = 0;
            for (uint32_t j = from; j <= k; j++) up += L[j] > L[j - 1];
            if (up < need || up * 2 < len) continue;
            /* still growing at the end: the stretch's later half rose too (a leak that stopped
             * halfway through the record is not growing now) */
            uint32_t mid = from + len / 2, up2 = 0;
            for (uint32_t j = mid; j <= k; j++) up2 += L[j] > L[j - 1];
            if (up2 * 2 < k - mid + 1) continue;
            double tau = kendall_tau(L + from - 1, len + 1);
            if (tau < CMH_LEAK_MIN_TREND || L[k] <= L[from - 1]) continue;
            uint32_t first = from;
            while (L[first] <= L[first - 1]) first++;
            /* flat at the end for 3 steps and more than twice its longest pause between two
             * rises before: a leak that stopped, not growing now (one rising in 30 steps of 40,
             * then flat, read 'growing: +871.6 KiB per step over the last 39 steps') */
            uint32_t gap = 1, prev = first;
            for (uint32_t j = first + 1; j <= k; j++)
                if (L[j] > L[j - 1]) {
                    if (j - prev > gap) gap = j - prev;
                    prev = j;
                }
            if (k - prev >= CMH_LEAK_MIN_RISES && k - prev > 2 * gap) continue;
            x->verdict = CMH_LEAK_GROWING;
            x->growing = 1;
            x->growth_steps = (k - first + 1) * (uint32_t)stride;
            /* least squares: jitter at either end matters less; up to the last point the held
             * bytes were taken from (L[k] may hold the unfinished last step's own blocks) */
            uint32_t last = last_own && k - 1 >= first ? k - 1 : k;
            x->rate = slope(L + first - 1, last - first + 2) / stride;
            x->trend = tau;
            return;
        }
        if (steady_rise(L, k, need, last_own, x)) {
            x->growth_steps *= (uint32_t)stride;
            x->rate /= stride;
            return;
        }
    } else if (k >= 2) {
        int each = 1;
        for (uint32_t j = 1; j <= k; j++) each &= L[j] > L[j - 1];
        if (each) {
            x->verdict = CMH_LEAK_RISING;
            x->growth_steps = k * (uint32_t)stride;
            /* its rise, not a rate: a rate per step from fewer steps than a trend needs
             * (CMH_LEAK_MIN_STEPS) extrapolates two or three figures */
            x->rise = (int64_t)((uint64_t)L[k] - (uint64_t)L[0]);
            x->trend = 1;
            return;
        }
    }
    /* held bytes that grew over several steps after the first, then no more: a leak that
     * stopped, not state (a cache filled in the first step or two stays state) */
    if (x->held && x->rises >= CMH_LEAK_MIN_RISES && x->flat_steps > 1 && stopped(L, last_rise, (uint32_t)stride, lead, x)) return;
    /* nor when its last rise is the last point's alone, where those bytes are the unfinished last
     * step's own (last_own: what it held across the last whole step is L[k-1], x->held): a cache
     * of 10 blocks filled over steps 0-9, then one evicted and one added each step, holds 9 of
     * them across each step and all 10 at the last point (the block added in the last step, still
     * live at the end), and read 'state' for 9 rises and 'flat for the last 0 steps'.  Its growth
     * is judged on the whole steps: rises before the last point, flat for 2 points at least (the
     * last whole step too: a site that rose in it and again at the end is not flat) */
    if (x->held && last_own && last_rise == k && k >= 4 && x->rises > CMH_LEAK_MIN_RISES) {
        uint32_t rises = 0, lr = 1;
        for (uint32_t j = 2; j < k; j++)
            if (L[j] > L[j - 1]) rises++, lr = j;
        if (rises >= CMH_LEAK_MIN_RISES && lr + 2 <= k && stopped(L, lr, (uint32_t)stride, lead, x)) {
            x->rises = rises;
            x->flat_steps = (k - lr) * (uint32_t)stride;
            return;
        }
    }
    /* back to the same level each step is a judgment too: not from fewer steps than growth needs
     * (one 'step' mark before the loop read 'steady' for a site keeping a block every iteration) */
    x->verdict = x->held ? CMH_LEAK_STATE : st->count >= CMH_LEAK_MIN_STEPS ? CMH_LEAK_STEADY : CMH_LEAK_UNJUDGED;
}

/* A steady site (nothing held across a step boundary) whose first allocation came once the last
 * step had begun: no step before made the like, so it is not a step's memory coming and going
 * but work after the loop (an evaluation, a checkpoint, the end of the run), or new in its last
 * step.  Where the last step ends cannot be told from the entries' positions alone (a detected
 * step begins at its anchor, which may lie inside the step), so the two are not told apart. */
void cmh_leak_judge_late(const cmh_steps *st, int64_t first, int64_t end, cmh_site *x)
{
    uint32_t np = st->npoints;
    if (x->verdict != CMH_LEAK_STEADY || np < 2 || st->count < 2) return; /* a step before the last, at least */
    int64_t last = st->points[np - 1] >= end ? st->points[np - 2] : st->points[np - 1];
    if (first >= last) x->verdict = CMH_LEAK_AFTER;
}

int cmh_leak_site_stopped(const cmh_site *x) { return x->verdict == CMH_LEAK_STOPPED; }

const char *cmh_leak_unjudged_name(int why)
{
    static const char *const name[] = {"too_few_steps", "made_before_history", "no_thread", "thread_too_few_steps"};
    return why >= 0 && why < (int)(sizeof name / sizeof *name) ? name[why] : "too_few_steps";
}

const char *cmh_leak_verdict_name(int verdict)
{
    static const char *const names[] = {"unjudged", "state", "steady", "rising", "growing", "after", "stopped"};
    return verdict >= 0 && verdict <= CMH_LEAK_STOPPED ? names[verdict] : "?";
}

