/*
 * test_verdicts.c - the leak verdict against a corpus with known truth.
 *
 * Each case synthesizes a training loop as a recorder would have written it (whole-block
 * driver allocations): weights loaded before the loop, activations made in the forward pass
 * and freed in the backward one, gradients made in the backward pass and freed by the next
 * step's zero_grad, optimizer state made in step 1, a cache filled once, and, in some cases, a
 * leak that starts at step k; with worker threads that churn temporaries of their own (one of
 * them, in some cases, the one that leaks), their entries interleaved at random with the main
 * thread's; with step marks, with Optimizer.step annotations, or with neither (the steps then
 * come from the loop's pattern alone).  Over 50 seeds each, the verdict must be the truth every
 * time: the step count, no state or steady site called growing, every leak found.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/leakwords.h"
#include "cumemhist/reports.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define KIB (1ull << 10)
#define SEEDS 50

typedef struct rng {
    uint64_t s;
} rng;

static uint32_t rnd(rng *r, uint32_t n) /* 0 .. n-1 */
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((r->s >> 33) % n);
}

enum { B_PATTERN, B_MARKS, B_ANNOTATIONS };
enum { L_NONE, L_MAIN, L_WORKER, L_STOPS }; /* L_STOPS: the main thread leaks over the first 60% of the steps, then stops */

typedef struct op {
    uint8_t action;
    uint32_t stack, thread;
    uint64_t addr, size;
    uint32_t mark; /* a mark's name (string id); action MARK */
    int annotate;  /* 1: an Optimizer.step START before it, 2: an END after it */
} op;

typedef struct gen {
    cmh_snapshot *s;
    rng r;
    uint64_t next;
    int64_t t;
    op q[8][256]; /* one step's operations, per thread */
    int nq[8];
    uint64_t live[4096][3]; /* addr, size, stack */
    int nlive;
    uint32_t opt_name;
} gen;

static uint32_t stack_named(cmh_snapshot *s, const char *fn)
{
    cmh_frame f = {0, 0, 0, 0, -1};
    cmh_strtab_intern(&s->strings, fn, strlen(fn), &f.name);
    cmh_strtab_intern(&s->strings, "train.c", 7, &f.filename);
    uint32_t fid, sid;
    cmh_snapshot_add_frame(s, &f, &fid);
    cmh_snapshot_add_stack(s, &fid, 1, &sid);
    return sid;
}

static uint64_t g_alloc(gen *g, int thread, uint32_t stack, uint64_t size)
{
    uint64_t a = 0x7f0000000000ull + g->next;
    g->next += (size + MIB - 1) / MIB * MIB + MIB;
    g->q[thread][g->nq[thread]++] = (op){CMH_ACT_SEGMENT_ALLOC, stack, (uint32_t)thread + 1, a, size, 0, 0};
    return a;
}

static void g_free(gen *g, int thread, uint32_t stack, uint64_t a, uint64_t size)
{
    g->q[thread][g->nq[thread]++] = (op){CMH_ACT_SEGMENT_FREE, stack, (uint32_t)thread + 1, a, size, 0, 0};
}

static void emit(gen *g, const op *o)
{
    cmh_snapshot *s = g->s;
    if (o->annotate == 1) {
        cmh_annotation an = {g->opt_name, 0, 0, g->t + 500};
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_annotation(s, &an), CMH_OK);
    }
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = g->t += 1000;
    e.action = o->action;
    e.addr = o->addr;
    e.size = e.requested = o->size;
    e.stack = o->stack;
    e.thread = o->thread;
    e.name = o->mark;
    e.flags = o->action == CMH_ACT_MARK ? 0 : CMH_EF_WHOLE_BLOCK;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
    if (o->action == CMH_ACT_SEGMENT_ALLOC) {
        g->live[g->nlive][0] = o->addr, g->live[g->nlive][1] = o->size, g->live[g->nlive][2] = o->stack;
        g->nlive++;
    } else if (o->action == CMH_ACT_SEGMENT_FREE) {
        for (int i = 0; i < g->nlive; i++)
            if (g->live[i][0] == o->addr) {
                memmove(g->live[i], g->live[i + 1], (size_t)(g->nlive - i - 1) * sizeof g->live[0]);
                g->nlive--;
                break;
            }
    }
    if (o->annotate == 2) {
        cmh_annotation an = {g->opt_name, 1, 0, g->t + 500};
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_annotation(s, &an), CMH_OK);
    }
}

/* The step's operations, the threads' interleaved at random (each thread's in its order). */
static void flush(gen *g, int nthreads)
{
    int at[8] = {0}, left = 0;
    for (int t = 0; t < nthreads; t++) left += g->nq[t];
    while (left) {
        int t = (int)rnd(&g->r, (uint32_t)nthreads);
        if (at[t] == g->nq[t]) continue;
        emit(g, &g->q[t][at[t]++]);
        left--;
    }
    memset(g->nq, 0, sizeof g->nq);
}

/* What the recorder's dump says is live at the end (g's live blocks, each a whole segment),
 * then the leak report of device 0 by site; the sites for the caller to free. */
static cmh_sites *live_and_leaks(cmh_snapshot *s, const gen *g, cmh_leak_report *p)
{
    for (int i = 0; i < g->nlive; i++) {
        cmh_segment sg = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, (uint8_t)cmh_pool_rule(g->live[i][1], 1), g->live[i][0], g->live[i][1], 0, {0, 0},
                          (uint32_t)g->live[i][2], 0, 0, 0};
        cmh_block b = {g->live[i][0], g->live[i][1], g->live[i][1], (uint32_t)g->live[i][2], CMH_BLOCK_ACTIVE_ALLOCATED, 0};
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_segment(s, &sg, NULL), CMH_OK);
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_block(s, &b), CMH_OK);
    }
    int rc;
    char err[128];
    cmh_site_opts so = {CMH_GROUP_SITE, 0, NULL, 0};
    cmh_sites *sites = cmh_sites_new(s, &so, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sites);
    CU_ASSERT_EQUAL_FATAL(cmh_leaks_compute(s, 0, sites, 0, p), CMH_OK);
    return sites;
}

typedef struct truth {
    int steps, leak, judged;
    const char *leak_site;
} truth;

static const char *fn_of(const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x)
{
    const cmh_frame *f = cmh_sites_frame(g, x->group);
    return f ? cmh_str(s, f->name) : "";
}

/* The generator over a new snapshot with one device's trace, at a fixed start time. */
static gen *gen_start(cmh_snapshot *s)
{
    static gen G;
    memset(&G, 0, sizeof G);
    cmh_snapshot_init(s);
    G.s = s;
    G.t = 1700000000000000000ll;
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    return &G;
}

/* One case; returns 1 when the verdict is the truth in every respect. */
static int run_case(uint64_t seed, int bounds, int workers, int leak, int steps_wanted)
{
    cmh_snapshot s;
    gen *g = gen_start(&s);
    g->r.s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)(bounds * 131 + workers * 17 + leak * 7 + steps_wanted);
    cmh_strtab_intern(&s.strings, "Optimizer.step#AdamW.step", 25, &g->opt_name);
    uint32_t st_w = stack_named(&s, "load_weights"), st_act = stack_named(&s, "forward"), st_grad = stack_named(&s, "backward"),
             st_opt = stack_named(&s, "adamw_init_state"), st_tmp = stack_named(&s, "adamw_step"), st_cache = stack_named(&s, "cudnn_find"),
             st_leak = stack_named(&s, "keep_history"), st_wtmp = stack_named(&s, "worker_batch"), st_wleak = stack_named(&s, "worker_keep");
    int N = steps_wanted ? steps_wanted : 4 + (int)rnd(&g->r, 13);
    int nparams = 2 + (int)rnd(&g->r, 4), nact = 3 + (int)rnd(&g->r, 4), cache_step = 1 + (int)rnd(&g->r, 2);
    int k = 1 + (int)rnd(&g->r, (uint32_t)(N - 2 > 1 ? N - 2 : 1)); /* the leak's first step: it rises in 3 steps or more after the first */
    int nthreads = 1 + workers;
    uint64_t act[16], grad[16];
    /* before the loop: the weights */
    for (int j = 0; j < nparams; j++) g_alloc(g, 0, st_w, (uint64_t)(j + 1) * 4 * MIB);
    flush(g, 1);
    uint32_t markname[64];
    for (int i = 1; i <= N; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "step %d", i);
        cmh_strtab_intern(&s.strings, nm, strlen(nm), &markname[i % 64]);
        if (bounds == B_MARKS) g->q[0][g->nq[0]++] = (op){CMH_ACT_MARK, 0, 1, 0, 0, markname[i % 64], 0};
        for (int j = 0; j < nact; j++) act[j] = g_alloc(g, 0, st_act, (uint64_t)(j + 2) * 2 * MIB);
        /* in the forward pass: a cache filled once, and the leak (a history that keeps a tensor
         * of every step) */
        if (i == cache_step) g_alloc(g, 0, st_cache, 8 * MIB);
        if ((leak == L_MAIN && i >= k) || (leak == L_STOPS && i <= (N + 1) / 2 + 1)) g_alloc(g, 0, st_leak, 1 * MIB);
        if (i > 1)
            for (int j = 0; j < nparams; j++) g_free(g, 0, st_grad, grad[j], (uint64_t)(j + 1) * 4 * MIB); /* zero_grad */
        for (int j = nact - 1; j >= 0; j--) {
            g_free(g, 0, st_act, act[j], (uint64_t)(j + 2) * 2 * MIB);
            if (j < nparams) grad[j] = g_alloc(g, 0, st_grad, (uint64_t)(j + 1) * 4 * MIB);
        }
        for (int j = nact; j < nparams; j++) grad[j] = g_alloc(g, 0, st_grad, (uint64_t)(j + 1) * 4 * MIB);
        /* the optimizer step, inside its annotation */
        int first_opt = g->nq[0];
        if (i == 1)
            for (int j = 0; j < 2 * nparams; j++) g_alloc(g, 0, st_opt, (uint64_t)(j / 2 + 1) * 4 * MIB);
        uint64_t tmp = g_alloc(g, 0, st_tmp, 512 * KIB);
        g_free(g, 0, st_tmp, tmp, 512 * KIB);
        if (bounds == B_ANNOTATIONS) {
            g->q[0][first_opt].annotate = 1;
            g->q[0][g->nq[0] - 1].annotate = 2;
        }
        for (int w = 1; w <= workers; w++)
            for (int it = 0; it < 2; it++) {
                uint64_t a = g_alloc(g, w, st_wtmp, 256 * KIB), b = g_alloc(g, w, st_wtmp, 768 * KIB);
                g_free(g, w, st_wtmp, a, 256 * KIB);
                g_free(g, w, st_wtmp, b, 768 * KIB);
                if (leak == L_WORKER && w == 1 && it == 1 && i >= k) g_alloc(g, w, st_wleak, 1 * MIB);
            }
        flush(g, nthreads);
    }
    cmh_leak_report p;
    cmh_sites *sites = live_and_leaks(&s, g, &p);
    int ok = 1;
    char why[512] = "";
    static const int src[] = {CMH_STEPS_PATTERN, CMH_STEPS_MARKS, CMH_STEPS_ANNOTATIONS};
    /* the step count: exact, found the way the record allows */
    if (p.steps.count != (uint32_t)N || p.steps.source != src[bounds]) {
        ok = 0;
        int n = snprintf(why, sizeof why, "steps %u (source %d), truth %d (source %d) at", p.steps.count, p.steps.source, N, src[bounds]);
        for (uint32_t j = 0; j < p.steps.npoints && n < 300; j++) n += snprintf(why + n, sizeof why - (size_t)n, " %" PRId64, p.steps.points[j]);
        snprintf(why + n, sizeof why - (size_t)n, " of %u", s.nentries);
    }
    int few = N < CMH_LEAK_MIN_STEPS;
    if (p.judged != !few) ok = 0, snprintf(why + strlen(why), sizeof why - strlen(why), "; judged %d", p.judged);
    uint32_t want_leaking = !few && (leak == L_MAIN || leak == L_WORKER); /* a leak that stopped is not growing now */
    if (p.leaking != want_leaking) ok = 0, snprintf(why + strlen(why), sizeof why - strlen(why), "; leaking %u, truth %u", p.leaking, want_leaking);
    for (uint32_t i = 0; i < p.nsites; i++) {
        const cmh_site *x = &p.sites[i];
        const char *fn = fn_of(&s, sites, x);
        int want;
        if (!strcmp(fn, "keep_history") || !strcmp(fn, "worker_keep")) want = few ? CMH_LEAK_RISING : CMH_LEAK_GROWING;
        /* (with too few steps, back to the same level is no judgment either: 'held', growth not
         * judged; one 'step' mark before a loop read 'steady' for a leak) */
        else if (!strcmp(fn, "backward")) want = few ? CMH_LEAK_UNJUDGED : CMH_LEAK_STEADY;
        else want = CMH_LEAK_STATE; /* weights, optimizer state, the cache */
        if (leak == L_STOPS && !strcmp(fn, "keep_history")) want = CMH_LEAK_STOPPED; /* grew, then held since it stopped */
        if (few && want == CMH_LEAK_RISING && k > 1) want = CMH_LEAK_STATE; /* did not rise in each */
        int good = x->verdict == want && x->growing == (want == CMH_LEAK_GROWING);
        /* a leak that stopped says so in words: it rose in each of its steps after the first,
         * then stayed flat for the steps after its last; no other site grew and stopped */
        int stops = leak == L_STOPS && !strcmp(fn, "keep_history"), last = (N + 1) / 2 + 1;
        char says[512], want_says[160];
        cmh_leak_site_text(x, says, sizeof says);
        snprintf(want_says, sizeof want_says, "stopped: grew +1.0 MiB per step over steps 1-%d, then flat for the last %d steps; %d.0 MiB still held at the end, never freed",
                 last, N - last, last);
        if (cmh_leak_site_stopped(x) != stops || (stops && (x->rises != (uint32_t)last - 1 || x->flat_steps != (uint32_t)(N - last) ||
                                                           x->growth_first != 1 || x->growth_steps != (uint32_t)last || strcmp(says, want_says))))
            good = 0;
        /* the rate: exact when one thread does it all; a worker's leak is not in step with the
         * main thread's boundaries, so a block may land on either side of one */
        int64_t off = x->rate - (int64_t)MIB;
        if (want == CMH_LEAK_GROWING && (workers ? off < -(int64_t)MIB / 2 || off > (int64_t)MIB / 2 : off != 0)) good = 0;
        if (!good) {
            ok = 0;
            snprintf(why + strlen(why), sizeof why - strlen(why), "; %s: %s (rate %" PRId64 ", thread %u, rises %u, flat %u: %.300s), truth %s",
                     fn, cmh_leak_verdict_name(x->verdict), x->rate, x->thread, x->rises, x->flat_steps, says, cmh_leak_verdict_name(want));
        }
    }
    if (!ok)
        fprintf(stderr, "  seed %" PRIu64 " bounds %d workers %d leak %d (N %d, k %d): %s\n", seed, bounds, workers, leak, N, k, why);
    cmh_leak_report_free(&p);
    cmh_sites_free(sites);
    cmh_snapshot_free(&s);
    return ok;
}

static void test_corpus(void)
{
    int total = 0, right = 0, cases = 0;
    for (int bounds = B_PATTERN; bounds <= B_ANNOTATIONS; bounds++)
        for (int workers = 0; workers <= 2; workers += 2)
            for (int leak = L_NONE; leak <= (workers ? L_WORKER : L_MAIN); leak++) {
                cases++;
                for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                    total++;
                    right += run_case(seed, bounds, workers, leak, 0);
                }
            }
    /* too few steps: three, a leak in each; growth is not judged, the rise is said */
    for (int bounds = B_PATTERN; bounds <= B_MARKS; bounds++) {
        cases++;
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
            total++;
            right += run_case(seed, bounds, 0, L_MAIN, 3);
        }
    }
    /* a leak that stopped halfway: what it kept is held, and not called growing */
    for (int bounds = B_PATTERN; bounds <= B_ANNOTATIONS; bounds++) {
        cases++;
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
            total++;
            right += run_case(seed, bounds, 0, L_STOPS, 10 + (int)(seed % 7));
        }
    }
    printf("\n  leak-verdict corpus: %d cases x %d seeds: verdict == truth in %d of %d\n", cases, SEEDS, right, total);
    CU_ASSERT_EQUAL(right, total);
}

/* A record that ends inside a step (a snapshot of a running process: top, the exporter,
 * `snapshot PID`) while the leaking site's own temporary of that step is live: one helper makes
 * every allocation (a ctypes program's alloc()), 8 MiB freed within the step and 1 MiB kept.  The
 * growth per step is the 1 MiB kept, not pulled up by the unfinished step's 8 MiB. */
static void test_midstep_rate(void)
{
    for (int N = 6; N <= 40; N += 17) {
        cmh_snapshot s;
        gen *g = gen_start(&s);
        uint32_t st = stack_named(&s, "alloc"), mark;
        cmh_strtab_intern(&s.strings, "step", 4, &mark);
        for (int i = 1; i <= N + 1; i++) {
            g->q[0][g->nq[0]++] = (op){CMH_ACT_MARK, 0, 1, 0, 0, mark, 0};
            uint64_t tmp = g_alloc(g, 0, st, 8 * MIB);
            if (i <= N) {
                g_alloc(g, 0, st, 1 * MIB);
                g_free(g, 0, st, tmp, 8 * MIB);
            }
            flush(g, 1);
        }
        cmh_leak_report p;
        cmh_sites *sites = live_and_leaks(&s, g, &p);
        CU_ASSERT_EQUAL(p.nsites, 1);
        if (p.nsites == 1) {
            CU_ASSERT_EQUAL(p.sites[0].verdict, CMH_LEAK_GROWING);
            CU_ASSERT_EQUAL(p.sites[0].rate, (int64_t)MIB);
            if (p.sites[0].rate != (int64_t)MIB) fprintf(stderr, "  %d steps, then a step under way: rate %" PRId64 ", truth %llu\n", N, p.sites[0].rate, MIB);
        }
        cmh_leak_report_free(&p);
        cmh_sites_free(sites);
        cmh_snapshot_free(&s);
    }
}

/* A leak that stopped, in a record of more steps than the leak report keeps points for (513): the
 * points are every stride-th step, and its words say so and count in steps: 'stopped: grew +1.0
 * MiB per step over steps 1-1000, measured every 4 steps, then flat for the last 1000 steps; ...'.
 * Before, it read 'grew in 249 steps' (points as steps), then 'grew in 996 steps' (stretches
 * times the stride: a leak of one block every 15 steps read 'grew in 1393 steps' for its 200
 * blocks), then 'grew in 249 of the 499 stretches of 4 steps it was measured over, then stopped
 * (flat for the last 1000 steps)' as a state site. */
static void test_stopped_strided(void)
{
    for (int N = 600; N <= 2000; N += 1400) {
        cmh_snapshot s;
        gen *g = gen_start(&s);
        uint32_t st = stack_named(&s, "keep"), st_tmp = stack_named(&s, "tmp"), mark;
        cmh_strtab_intern(&s.strings, "step", 4, &mark);
        int stop = N / 2;
        for (int i = 1; i <= N; i++) {
            g->q[0][g->nq[0]++] = (op){CMH_ACT_MARK, 0, 1, 0, 0, mark, 0};
            uint64_t tmp = g_alloc(g, 0, st_tmp, 8 * MIB);
            if (i <= stop) g_alloc(g, 0, st, 1 * MIB);
            g_free(g, 0, st_tmp, tmp, 8 * MIB);
            flush(g, 1);
        }
        cmh_leak_report p;
        cmh_sites *sites = live_and_leaks(&s, g, &p);
        CU_ASSERT_EQUAL(p.nsites, 1);
        if (p.nsites == 1) {
            const cmh_site *x = &p.sites[0];
            uint32_t stride = p.steps.stride ? p.steps.stride : 1;
            char says[512];
            cmh_leak_site_text(x, says, sizeof says);
            /* rose in each step after the first up to the stop, flat after it: each to a stride */
            int rises_ok = (x->rises + 1) * stride >= (uint32_t)stop - 1 && x->rises * stride <= (uint32_t)stop - 1 + stride;
            int flat_ok = x->flat_steps + stride >= (uint32_t)(N - stop) && x->flat_steps <= (uint32_t)(N - stop) + stride;
            CU_ASSERT(cmh_leak_site_stopped(x));
            char unit[256];
            /* its first stretch (the warm-up) rose as much as the others: counted in its growth,
             * the steps it grew over and those flat since adding up to the record's */
            snprintf(unit, sizeof unit, "stopped: grew +1.0 MiB per step over steps 1-%u, measured every %u steps, then flat for the last %u steps; ",
                     x->growth_steps, stride, x->flat_steps);
            CU_ASSERT(x->warm_rise && !x->warm_growth && x->growth_first == 1 && x->growth_steps + x->flat_steps == p.steps.count);
            CU_ASSERT(rises_ok && flat_ok && stride > 1 && strstr(says, unit));
            if (!rises_ok || !flat_ok || !strstr(says, unit)) fprintf(stderr, "  %d steps (stride %u), a leak in the first %d: %s\n", N, stride, stop, says);
        }
        cmh_leak_report_free(&p);
        cmh_sites_free(sites);
        cmh_snapshot_free(&s);
    }
}

/* Three threads racing through the same loop, one of them keeping 1 MiB a step (a data loader's
 * cache): the record's steps come from their allocations interleaved as they raced, and change
 * with the interleaving; the leak is told by the steps of the thread that made it, the same every
 * run ('+1.0 MiB per step over the last 11 steps of recording thread 2'; it read +2.0 MiB over 6
 * in one run of a real program, +1.0 MiB over 10 in another). */
static void test_racing_threads(void)
{
    uint32_t growth0 = 0;
    int same = 1;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        cmh_snapshot s;
        gen *g = gen_start(&s);
        g->r.s = seed * 0x9e3779b97f4a7c15ull;
        uint32_t st_tmp = stack_named(&s, "load"), st_keep = stack_named(&s, "cache");
        for (int i = 1; i <= 12; i++) {
            for (int t = 0; t < 3; t++) {
                uint64_t a = g_alloc(g, t, st_tmp, 4 * MIB);
                if (t == 1) g_alloc(g, t, st_keep, 1 * MIB);
                g_free(g, t, st_tmp, a, 4 * MIB);
            }
            flush(g, 3);
        }
        cmh_leak_report p;
        cmh_sites *sites = live_and_leaks(&s, g, &p);
        CU_ASSERT_EQUAL(p.nsites, 1);
        if (p.nsites == 1) {
            const cmh_site *x = &p.sites[0];
            int ok = x->verdict == CMH_LEAK_GROWING && x->rate == (int64_t)MIB && x->thread == 2;
            if (seed == 1) growth0 = x->growth_steps;
            same &= x->growth_steps == growth0;
            CU_ASSERT(ok);
            if (!ok || x->growth_steps != growth0)
                fprintf(stderr, "  seed %" PRIu64 ": %s, rate %" PRId64 " over %u steps, thread %u (seed 1: %u steps)\n", seed,
                        cmh_leak_verdict_name(x->verdict), x->rate, x->growth_steps, x->thread, growth0);
        }
        cmh_leak_report_free(&p);
        cmh_sites_free(sites);
        cmh_snapshot_free(&s);
    }
    CU_ASSERT(same);
}

/* Three threads racing through the same loop, each keeping 256 KiB a step from one line (a leak
 * in every thread): the site's blocks are all three threads', so no one thread's steps judge it;
 * it is judged thread by thread, every leaking thread named and their rates summed, the same for
 * every interleaving (the record's steps, cut from the race, read 768 KiB over 9 steps, over 6,
 * or 256 KiB of thread 1 alone).  Its twin keeps a block in each of the first 3 steps only: held,
 * growing in none, for every interleaving too. */
static void test_every_thread_leaks(void)
{
    for (int leak = 1; leak >= 0; leak--) {
        cmh_site first;
        memset(&first, 0, sizeof first);
        for (uint64_t seed = 1; seed <= 24; seed++) {
            cmh_snapshot s;
            gen *g = gen_start(&s);
            g->r.s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)leak;
            uint32_t st_tmp = stack_named(&s, "load"), st_keep = stack_named(&s, "cache");
            for (int i = 1; i <= 12; i++) {
                for (int t = 0; t < 3; t++) {
                    uint64_t a = g_alloc(g, t, st_tmp, 4 * MIB);
                    uint64_t k = g_alloc(g, t, st_keep, 256 * KIB);
                    if (!leak && i > 3) g_free(g, t, st_keep, k, 256 * KIB);
                    g_free(g, t, st_tmp, a, 4 * MIB);
                }
                flush(g, 3);
            }
            cmh_leak_report p;
            cmh_sites *sites = live_and_leaks(&s, g, &p);
            CU_ASSERT_EQUAL(p.nsites, 1);
            if (p.nsites == 1) {
                const cmh_site *x = &p.sites[0];
                int ok = leak ? x->verdict == CMH_LEAK_GROWING && x->rate == 3 * 256 * (int64_t)KIB && x->rate_min == 256 * (int64_t)KIB &&
                                    x->rate_max == x->rate_min && x->threads == 3 && x->thread_mask == 0xe && x->growth_steps == 11 &&
                                    x->growth_steps_max == 11
                              : x->verdict == CMH_LEAK_STATE && !x->growing && x->held == 9 * 256 * KIB && x->threads == 3 &&
                                    x->thread_mask == 0xe;
                if (seed == 1) first = *x;
                int same = x->verdict == first.verdict && x->rate == first.rate && x->thread_mask == first.thread_mask &&
                           x->growth_steps == first.growth_steps && x->held == first.held && x->steps == first.steps;
                CU_ASSERT(ok && same);
                if (!ok || !same)
                    fprintf(stderr, "  %s, seed %" PRIu64 ": %s, rate %" PRId64 " (%" PRId64 "..%" PRId64 ") over %u..%u steps, threads %u mask %#" PRIx64
                            ", held %" PRIu64 "\n", leak ? "leak" : "steady", seed, cmh_leak_verdict_name(x->verdict), x->rate, x->rate_min,
                            x->rate_max, x->growth_steps, x->growth_steps_max, x->threads, x->thread_mask, x->held);
            }
            cmh_leak_report_free(&p);
            cmh_sites_free(sites);
            cmh_snapshot_free(&s);
        }
    }
}

/* tests/thleak_prog.c as the recorder sees it: main's 256 MiB model, then 4 threads racing
 * through 40 steps of 8 allocations and 8 frees, thread 2 keeping 2 MiB a step.  The pattern
 * across the threads' interleaved entries is the scheduler's (one run read 'steps: 39 ...
 * (period 65 entries)', another 'steps: 160 ... (period 16 entries)'); leaks' header must read
 * the same for every interleaving, as its verdicts do. */
static void test_racing_header(void)
{
    char first[1024] = "", line[1024];
    int same = 1;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        cmh_snapshot s;
        gen *g = gen_start(&s);
        g->r.s = seed * 0x9e3779b97f4a7c15ull;
        uint32_t st_model = stack_named(&s, "main"), st_tmp = stack_named(&s, "worker"), st_keep = stack_named(&s, "worker_leak");
        g_alloc(g, 0, st_model, 256 * MIB);
        flush(g, 1);
        /* the threads drift apart: each flush holds 4 steps of each, their entries shuffled */
        for (int i = 0; i < 40; i += 4) {
            for (int t = 1; t <= 4; t++)
                for (int k = 0; k < 4; k++) {
                    uint64_t a[8];
                    for (int j = 0; j < 8; j++) a[j] = g_alloc(g, t, st_tmp, (uint64_t)(1 + j) * MIB);
                    for (int j = 0; j < 8; j++) g_free(g, t, st_tmp, a[j], (uint64_t)(1 + j) * MIB);
                    if (t == 3) g_alloc(g, t, st_keep, 2 * MIB);
                }
            flush(g, 5);
        }
        cmh_leak_report p;
        cmh_sites *sites = live_and_leaks(&s, g, &p);
        size_t len = strlen(cmh_leak_steps_text(&p, line, sizeof line));
        /* and the rows' verdicts, and whether growth was judged (--fail-on-leak's exit) */
        for (uint32_t i = 0; i < p.nsites && len + 64 < sizeof line; i++)
            len += (size_t)snprintf(line + len, sizeof line - len, " | %s %s", fn_of(&s, sites, &p.sites[i]), cmh_leak_site_word(&p.sites[i]));
        snprintf(line + len, sizeof line - len, " | judged %d", p.judged);
        if (seed == 1) snprintf(first, sizeof first, "%s", line);
        if (strcmp(line, first)) {
            if (same) fprintf(stderr, "  seed 1: %s\n  seed %" PRIu64 ": %s\n", first, seed, line);
            same = 0;
        }
        int leak_found = 0;
        for (uint32_t i = 0; i < p.nsites; i++) leak_found |= p.sites[i].growing && p.sites[i].rate == (int64_t)(2 * MIB);
        CU_ASSERT(leak_found);
        cmh_leak_report_free(&p);
        cmh_sites_free(sites);
        cmh_snapshot_free(&s);
    }
    CU_ASSERT(same);
}

/* tests/after_loop.c's reshaped loop, as either build of it records it: N steps that each make
 * and free an activation and a gradient, from step c on three activations, an attention buffer
 * and four KV blocks (or those first, then the short steps), and every step keeps 1 MiB.  The
 * kept block's function has the KV blocks' code: where the compiler folds the two into one
 * (identical-code folding: a plain -O2 build) they are one site, where it does not (a
 * sanitizer build, -fno-ipa-icf, two functions that differ) they are two.  The steps must be N
 * either way, wherever in the step the block is kept (first, mid-step, last), the shape change
 * said ('the loop changed shape once'), and the leak growing at 1 MiB a step; the shape changes
 * where one of the two spans most of the record, as a loop found must (DEFINITIONS.md: 70% of
 * its events).  Before, two sites with the block kept last read 'steps: N - 1' (the block
 * anchored the steps: the first step's other ops were taken for set-up) and no shape change, one
 * site with it kept first N + 1, and short steps after long ones 'steps: c' (the short ones taken
 * for the last long step): 89 of the 120 cases. */
static void test_reshaped_sites(void)
{
    static const char *const where[] = {"first", "mid-step", "last"};
    int bad = 0;
    for (int rev = 0; rev <= 1; rev++)
        for (int folded = 0; folded <= 1; folded++)
            for (int at = 0; at < 3; at++)
                for (int N = 12; N <= 30; N += 9)
                    for (int c = rev ? N / 2 : N / 4; c <= (rev ? 3 * N / 4 : N / 2); c += N / 8) {
                        cmh_snapshot s;
                        gen *g = gen_start(&s);
                        uint32_t st_w = stack_named(&s, "weights"), st_act = stack_named(&s, "activation"), st_grad = stack_named(&s, "gradient"),
                                 st_att = stack_named(&s, "attention"), st_kv = stack_named(&s, "kv_block"),
                                 st_keep = folded ? st_kv : stack_named(&s, "keep_history");
                        g_alloc(g, 0, st_w, 8 * MIB);
                        flush(g, 1);
                        for (int i = 0; i < N; i++) {
                            if (at == 0) g_alloc(g, 0, st_keep, 1 * MIB);
                            if (rev ? i < c : i >= c) {
                                uint64_t a[3], k[4], t;
                                for (int j = 0; j < 3; j++) a[j] = g_alloc(g, 0, st_act, 4 * MIB);
                                t = g_alloc(g, 0, st_att, 3 * MIB);
                                for (int j = 0; j < 4; j++) k[j] = g_alloc(g, 0, st_kv, 1 * MIB);
                                if (at == 1) g_alloc(g, 0, st_keep, 1 * MIB);
                                for (int j = 0; j < 4; j++) g_free(g, 0, st_kv, k[j], 1 * MIB);
                                g_free(g, 0, st_att, t, 3 * MIB);
                                for (int j = 0; j < 3; j++) g_free(g, 0, st_act, a[j], 4 * MIB);
                            } else {
                                uint64_t a = g_alloc(g, 0, st_act, 4 * MIB), gr = g_alloc(g, 0, st_grad, 2 * MIB);
                                if (at == 1) g_alloc(g, 0, st_keep, 1 * MIB);
                                g_free(g, 0, st_grad, gr, 2 * MIB);
                                g_free(g, 0, st_act, a, 4 * MIB);
                            }
                            if (at == 2) g_alloc(g, 0, st_keep, 1 * MIB);
                            flush(g, 1);
                        }
                        cmh_leak_report p;
                        cmh_sites *sites = live_and_leaks(&s, g, &p);
                        const cmh_site *keep = NULL;
                        for (uint32_t i = 0; i < p.nsites; i++)
                            if (p.sites[i].group == cmh_sites_group(sites, st_keep)) keep = &p.sites[i];
                        int ok = p.steps.count == (uint32_t)N && p.steps.source == CMH_STEPS_PATTERN && p.steps.shapes == 2 && keep && keep->growing &&
                                 keep->rate == (int64_t)MIB;
                        if (!ok && bad++ < 10) {
                            char line[512];
                            fprintf(stderr, "  %s, kept %s, %d steps, %s from step %d: %s; the kept block %s, rate %" PRId64 "\n",
                                    folded ? "one site" : "two sites", where[at], N, rev ? "short steps" : "long steps", c,
                                    cmh_leak_steps_text(&p, line, sizeof line), keep ? cmh_leak_verdict_name(keep->verdict) : "not found", keep ? keep->rate : 0);
                        }
                        CU_ASSERT(ok);
                        cmh_leak_report_free(&p);
                        cmh_sites_free(sites);
                        cmh_snapshot_free(&s);
                    }
}

/* A buffer whose size comes round every q steps (1..q MiB), each one live across the next step's
 * boundary and freed in the step after: its held bytes cycle, and a window judged point by point
 * began and ended inside a turn (tests/cycle_test.sh: 'growing: +914.3 KiB per step over the last 7
 * steps' at one run length, 'state' at the next).  Judged on whole turns: never growing, whatever
 * the run's length; and with 256 KiB a step kept at the same site, growing at 256 KiB a step at
 * every length (the cycle does not hide a leak beside it). */
static void test_cycle_turns(void)
{
    int bad = 0;
    for (int q = 3; q <= 7; q += 2)
        for (int leak = 0; leak <= 1; leak++)
            for (int N = 40; N < 40 + 2 * q; N++) {
                cmh_snapshot s;
                gen *g = gen_start(&s);
                uint32_t st = stack_named(&s, "cycle"), mark;
                cmh_strtab_intern(&s.strings, "step", 4, &mark);
                uint64_t buf[2] = {0, 0}, size[2] = {0, 0};
                for (int i = 0; i < N; i++) {
                    g->q[0][g->nq[0]++] = (op){CMH_ACT_MARK, 0, 1, 0, 0, mark, 0};
                    uint64_t sz = (uint64_t)(1 + i % q) * MIB;
                    uint64_t a = g_alloc(g, 0, st, sz);
                    if (leak) g_alloc(g, 0, st, MIB / 4);
                    if (buf[i % 2]) g_free(g, 0, st, buf[i % 2], size[i % 2]);
                    buf[i % 2] = a, size[i % 2] = sz;
                    flush(g, 1);
                }
                cmh_leak_report p;
                cmh_sites *sites = live_and_leaks(&s, g, &p);
                const cmh_site *x = p.nsites == 1 ? &p.sites[0] : NULL;
                int ok = x && (leak ? x->verdict == CMH_LEAK_GROWING && x->rate == (int64_t)MIB / 4 : x->verdict == CMH_LEAK_STATE);
                if (!ok && bad++ < 10) {
                    char line[512];
                    fprintf(stderr, "  period %d, %d steps%s: %s\n", q, N, leak ? ", 256 KiB kept a step" : "",
                            x ? cmh_leak_site_text(x, line, sizeof line) : "no single site");
                }
                CU_ASSERT(ok);
                cmh_leak_report_free(&p);
                cmh_sites_free(sites);
                cmh_snapshot_free(&s);
            }
}

/* Three threads running loops of their own, recorded as a scheduler may run them: one after
 * another (in 4 orders), all at once, and at 8 random starts and paces.  Each thread's entries
 * keep their own times (a step of a loop every 100 us, a cache's blocks 2 us apart), the record
 * their merge.  The program is the same, so the verdict, its words and the steps line must be
 * (tests/twin_leak.c, a stranger's pyleak3.py: whether the threads' runs overlapped decided
 * whether they raced, 'steps: unknown' where they ran one after another and 'each recording
 * thread's own' where they overlapped).  The process is pid 1000; its main thread records
 * nothing but where a case says so (thread 1, tid 1000).
 *   keeper: threads 1 and 3 make and free 1 MiB a step, thread 2 makes it and keeps it: growing,
 *     +1.0 MiB a step, of thread 2.
 *   only: threads 1 and 3 loop so, thread 2 only fills a cache of 30 blocks of 1 MiB from a call
 *     of its own and ends (twin_leak only): never growing or stopped, growth not judged, in every
 *     order; it read 'held' where they ran one after another, 'state' where its cache came before
 *     their first step, 'unjudged' where it came among them.
 *   model: the main thread's model made before it starts the two looping threads: state.
 *   caches: each thread keeps 1 MiB in the first 10 of its 20 iterations (plateau_leak threads):
 *     stopped; one after another, the record's steps were the threads' 3 lives: 'rising'. */
static void test_loops_any_order(void)
{
    static const char *const cases[] = {"keeper", "only", "model", "caches"};
    static const int perms[4][3] = {{0, 1, 2}, {1, 0, 2}, {2, 1, 0}, {0, 2, 1}};
    enum { US = 1000 };
    for (int c = 0; c < 4; c++) {
        char first[1536] = "";
        int same = 1, bad = 0;
        for (int v = 0; v < 4 + 1 + 8; v++) {
            cmh_snapshot s;
            gen *g = gen_start(&s);
            g->r.s = (uint64_t)(v * 7 + c + 1) * 0x9e3779b97f4a7c15ull;
            int64_t t0 = g->t;
            s.pid = 1000;
            for (uint32_t t = 1; t <= 3; t++) {
                cmh_thread_info ti = {t, c == 2 && t == 1 ? 1000 : 1000 + t, 0};
                CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_thread(&s, &ti), CMH_OK);
            }
            uint32_t st_work = stack_named(&s, "work"), st_fill = stack_named(&s, "fill_cache"), st_model = stack_named(&s, "model"),
                     st_keep = stack_named(&s, "keep");
            const char *watch = c == 1 ? "fill_cache" : c == 2 ? "model" : c == 3 ? "keep" : "work";
            /* each thread's operations (g->q) at its own times (at), from its start on */
            static int64_t at[3][256];
            int nsteps = c == 3 ? 20 : 30;
            int64_t begin[3], period[3], prev_end = 10 * US;
            for (int k = 0; k < 3; k++) {
                int t = v < 4 ? perms[v][k] : k;
                period[t] = v < 5 ? 100 * US : (80 + (int64_t)rnd(&g->r, 41)) * US;
                begin[t] = v < 4 ? prev_end : v == 4 ? 10 * US : (10 + (int64_t)rnd(&g->r, 2000)) * US;
                prev_end = begin[t] + (int64_t)nsteps * period[t] + 10 * US;
            }
            if (c == 2) { /* main's model, before it starts the others */
                g_alloc(g, 0, st_model, 256 * MIB);
                at[0][0] = 0;
            }
            for (int t = 0; t < 3; t++) {
                if (c == 2 && t == 0) continue; /* main: its model only */
                if (c == 1 && t == 1) { /* the cache: back to back, then nothing */
                    for (int k = 0; k < 30; k++) {
                        at[t][g->nq[t]] = begin[t] + k * 2 * US;
                        g_alloc(g, t, st_fill, MIB);
                    }
                    continue;
                }
                for (int i = 0; i < nsteps; i++) {
                    int64_t ts = begin[t] + i * period[t];
                    at[t][g->nq[t]] = ts;
                    uint64_t a = g_alloc(g, t, st_work, MIB);
                    if (c == 3 && i < 10) {
                        at[t][g->nq[t]] = ts + 10 * US;
                        g_alloc(g, t, st_keep, MIB);
                    }
                    if (c != 0 || t != 1) {
                        at[t][g->nq[t]] = ts + 30 * US;
                        g_free(g, t, st_work, a, MIB);
                    }
                }
            }
            /* the record: their merge by time (a tie to the lower thread) */
            int pos[3] = {0, 0, 0};
            for (;;) {
                int best = -1;
                for (int t = 0; t < 3; t++)
                    if (pos[t] < g->nq[t] && (best < 0 || at[t][pos[t]] < at[best][pos[best]])) best = t;
                if (best < 0) break;
                g->t = t0 + at[best][pos[best]] - 1000; /* (emit adds its 1 us) */
                emit(g, &g->q[best][pos[best]++]);
            }
            memset(g->nq, 0, sizeof g->nq);
            cmh_leak_report p;
            cmh_sites *sites = live_and_leaks(&s, g, &p);
            const cmh_site *x = NULL;
            for (uint32_t i = 0; i < p.nsites; i++)
                if (!strcmp(fn_of(&s, sites, &p.sites[i]), watch)) x = &p.sites[i];
            char line[1536], says[512];
            size_t len = strlen(cmh_leak_steps_text(&p, line, sizeof line));
            snprintf(line + len, sizeof line - len, " | %s | judged %d", x ? cmh_leak_site_text(x, says, sizeof says) : "(no site)", p.judged);
            int ok = x != NULL;
            if (x && c == 0) ok = x->verdict == CMH_LEAK_GROWING && x->rate == (int64_t)MIB && x->thread == 2;
            if (x && c == 1) ok = x->verdict == CMH_LEAK_UNJUDGED && !x->growing && !p.judged;
            if (x && c == 2) ok = x->verdict == CMH_LEAK_STATE && p.judged;
            if (x && c == 3) ok = x->verdict == CMH_LEAK_STOPPED && !x->growing;
            if (!ok && bad++ < 3) fprintf(stderr, "  %s, order %d: %s\n", cases[c], v, line);
            CU_ASSERT(ok);
            if (!v) snprintf(first, sizeof first, "%s", line);
            else if (strcmp(line, first)) {
                if (same) fprintf(stderr, "  %s, order 0: %s\n  %s, order %d: %s\n", cases[c], first, cases[c], v, line);
                same = 0;
            }
            cmh_leak_report_free(&p);
            cmh_sites_free(sites);
            cmh_snapshot_free(&s);
        }
        CU_ASSERT(same);
    }
}

/* One worker thread keeping 1 MiB in each of its first 6 of 16 iterations, and never freeing
 * them, beside two siblings; one of them marks each step ("step"), the keeper marks none.  A
 * round's allocations land around the marker's mark in the scheduler's order: the keeper's
 * before it in some rounds and after it in others (recorded: 'state' in 2 runs of 15, the
 * others 'stopped' in words that changed from run to run).  The keeper's own loop judges its
 * site, the same in every order: stopped, over its own steps 1-6. */
static void test_marks_of_another_thread(void)
{
    /* each round's allocation groups in order: M the marker's mark and temporary, K the keeper's
     * temporary and kept block, O the third thread's temporary */
    static const char *const orders[2][16] = {
        {"MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO", "MKO"},
        {"OKM", "OKM", "MKO", "OKM", "OMK", "OKM", "MKO", "OKM", "OMK", "MKO", "OKM", "MKO", "OMK", "OKM", "MKO", "OKM"}};
    char first[1024] = "";
    for (int v = 0; v < 2; v++) {
        cmh_snapshot s;
        gen *g = gen_start(&s);
        s.pid = 1000;
        for (uint32_t t = 1; t <= 4; t++) {
            cmh_thread_info ti = {t, 1000 + t - 1, 0};
            CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_thread(&s, &ti), CMH_OK);
        }
        uint32_t st_w = stack_named(&s, "weights"), st_tmp = stack_named(&s, "work"), st_keep = stack_named(&s, "keep"), mark;
        cmh_strtab_intern(&s.strings, "step", 4, &mark);
        g_alloc(g, 0, st_w, 8 * MIB); /* main's, before it starts the workers */
        flush(g, 1);
        for (int r = 0; r < 16; r++) {
            uint64_t a[4];
            for (const char *o = orders[v][r]; *o; o++) {
                int t = *o == 'M' ? 1 : *o == 'K' ? 2 : 3;
                if (t == 1) g->q[0][g->nq[0]++] = (op){CMH_ACT_MARK, 0, 2, 0, 0, mark, 0};
                a[t] = g_alloc(g, 0, st_tmp, (uint64_t)t * 2 * MIB);
                g->q[0][g->nq[0] - 1].thread = (uint32_t)t + 1;
                if (t == 2 && r < 6) {
                    g_alloc(g, 0, st_keep, MIB);
                    g->q[0][g->nq[0] - 1].thread = 3;
                }
            }
            for (int t = 1; t <= 3; t++) {
                g_free(g, 0, st_tmp, a[t], (uint64_t)t * 2 * MIB);
                g->q[0][g->nq[0] - 1].thread = (uint32_t)t + 1;
            }
            flush(g, 1);
        }
        cmh_leak_report p;
        cmh_sites *sites = live_and_leaks(&s, g, &p);
        const cmh_site *x = NULL;
        for (uint32_t i = 0; i < p.nsites; i++)
            if (!strcmp(fn_of(&s, sites, &p.sites[i]), "keep")) x = &p.sites[i];
        char line[1024], says[512];
        snprintf(line, sizeof line, "%s | %s", cmh_leak_steps_text(&p, says, sizeof says), "");
        size_t len = strlen(line);
        snprintf(line + len, sizeof line - len, "%s", x ? cmh_leak_site_text(x, says, sizeof says) : "(no site)");
        int ok = x && x->verdict == CMH_LEAK_STOPPED && x->thread == 3 && p.stopped == 1;
        if (!ok) fprintf(stderr, "  order %d: %s\n", v, line);
        CU_ASSERT(ok);
        if (!v) snprintf(first, sizeof first, "%s", line);
        else if (strcmp(line, first)) {
            fprintf(stderr, "  order 0: %s\n  order %d: %s\n", first, v, line);
            CU_FAIL("the keeper's verdict changed with the order");
        }
        cmh_leak_report_free(&p);
        cmh_sites_free(sites);
        cmh_snapshot_free(&s);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("verdicts", NULL, NULL);
    CMH_ADD_TEST(s, test_corpus);
    CMH_ADD_TEST(s, test_midstep_rate);
    CMH_ADD_TEST(s, test_stopped_strided);
    CMH_ADD_TEST(s, test_racing_threads);
    CMH_ADD_TEST(s, test_every_thread_leaks);
    CMH_ADD_TEST(s, test_racing_header);
    CMH_ADD_TEST(s, test_reshaped_sites);
    CMH_ADD_TEST(s, test_cycle_turns);
    CMH_ADD_TEST(s, test_loops_any_order);
    CMH_ADD_TEST(s, test_marks_of_another_thread);
    return cmh_test_main();
}
