/*
 * test_pagememo.c - a report page's shortcuts give what the long way gives.
 *
 * A report page keeps one replay per device (reports.h's memo with its history): the plot, the
 * leaks, the owners' end and the viewer read what that replay saw instead of replaying the trace
 * each, and the peak's sites come from a copy of the replay kept on its way to the peak.  Every
 * figure must be the one the standalone replays give.  Three ways are compared on every fixture
 * and on generated traces long enough for the copies to be taken again and again:
 *   plain:   no memo (the peak's sites from the copy kept during the one replay);
 *   memo:    the memo without history (the peak's sites from a second replay to the peak);
 *   page:    the memo with history, as a report page keeps it.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/owners.h"
#include "cumemhist/pictures.h"
#include "cumemhist/reports.h"
#include "cumemhist/view.h"
#include "fixture_walk.h"
#include "testutil.h"

enum { PLAIN, MEMO, PAGE };

static void put_site(FILE *m, const cmh_site *x)
{
    fprintf(m, " site %u %u %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " v%d g%d %u %u %u %" PRId64 " %.6f %" PRIu64 " t%u c%u/%u",
            x->group, x->stack, x->bytes, x->count, x->first_ns, x->last_ns, x->verdict, x->growing, x->steps, x->rises,
            x->growth_steps, x->rate, x->trend, x->held, x->thread, x->ncallers, x->callers_seen);
    for (uint32_t k = 0; k < x->ncallers && k < CMH_SITE_CALLERS; k++)
        fprintf(m, " [%u %" PRIu64 " %" PRIu64 "]", x->callers[k].frame, x->callers[k].bytes, x->callers[k].count);
    fprintf(m, " other %" PRIu64 " %" PRIu64 "\n", x->callers_other.bytes, x->callers_other.count);
}

/* Everything one device's reports and pictures say, as text. */
static char *device_text(const cmh_snapshot *s, const cmh_sites *g, int dev)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    cmh_peak_report pk;
    int rc = cmh_peak_compute(s, dev, g, &pk);
    fprintf(m, "peak rc %d\n", rc);
    if (rc == CMH_OK) {
        fprintf(m, "%" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n",
                pk.alloc_peak, pk.alloc_index, pk.reserved_peak, pk.reserved_index, pk.requested_peak, pk.requested_index,
                pk.alloc_end, pk.reserved_end, pk.requested_end);
        for (uint32_t i = 0; i < pk.nsites; i++) put_site(m, &pk.sites[i]);
        cmh_peak_report_free(&pk);
    }
    cmh_leak_report lk;
    rc = cmh_leaks_compute(s, dev, g, 0, &lk);
    fprintf(m, "leaks rc %d\n", rc);
    if (rc == CMH_OK) {
        fprintf(m, "%" PRIu64 " %" PRIu64 " %u %u %u %" PRIu64 " %u %u %d steps %u %u\n", lk.live_bytes, lk.live_blocks, lk.live_sites,
                lk.leaking, lk.hidden_sites, lk.hidden_bytes, lk.threads, lk.threads_judged, lk.judged, lk.steps.count,
                lk.steps.npoints);
        for (uint32_t i = 0; i < lk.nsites; i++) put_site(m, &lk.sites[i]);
        cmh_leak_report_free(&lk);
    }
    if (dev >= 0) {
        cmh_owners_report ow;
        rc = cmh_owners_compute(s, dev, &ow);
        fprintf(m, "owners rc %d\n", rc);
        if (rc == CMH_OK) {
            fprintf(m, "%" PRIu64 " %" PRIu64 "\n", ow.entries, ow.pinned_host);
            for (uint32_t k = 0; k < ow.nmoments; k++) {
                const cmh_owners_moment *o = &ow.moments[k];
                fprintf(m, "moment %s %" PRId64 " %" PRIu64 " %d %" PRIu64 "\n", o->what, o->index, o->recorded, o->used_known, o->used);
                for (uint32_t i = 0; i < o->nrows; i++)
                    fprintf(m, "  %s %d %" PRIu64 " %u\n", o->rows[i].name, o->rows[i].kind, o->rows[i].bytes, o->rows[i].allocations);
            }
            cmh_owners_report_free(&ow);
        }
    }
    int32_t one = dev;
    cmh_plot_opts po = {1200, 300, &one, 1, NULL, 1, CMH_AXIS_AUTO};
    fprintf(m, "plot rc %d\n", cmh_plot_timeline(s, &po, m));
    fprintf(m, "view rc %d\n", cmh_view_embed(s, g, &one, 1, "t", m));
    CU_ASSERT_EQUAL(fclose(m), 0);
    return buf;
}

static uint64_t g_compared;

static void compare(const char *what, const cmh_snapshot *s)
{
    char err[256];
    int rc;
    cmh_site_opts o = {CMH_GROUP_SITE, 0, NULL, 0};
    cmh_sites *g = cmh_sites_new(s, &o, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    int32_t devs[64];
    int n = cmh_snapshot_devices(s, devs, 64);
    for (int k = 0; k < n && k < 64; k++) {
        char *t[3];
        for (int way = PLAIN; way <= PAGE; way++) {
            if (way != PLAIN) cmh_replay_memo_begin(s);
            if (way == PAGE) cmh_replay_memo_history(s);
            t[way] = device_text(s, g, devs[k]);
            if (way != PLAIN) cmh_replay_memo_end(s);
        }
        for (int way = MEMO; way <= PAGE; way++) {
            int same = !strcmp(t[PLAIN], t[way]);
            CU_ASSERT(same);
            if (!same) {
                size_t i = 0;
                while (t[PLAIN][i] && t[PLAIN][i] == t[way][i]) i++;
                size_t from = i > 80 ? i - 80 : 0;
                fprintf(stderr, "\n  %s device %d: the %s way differs at byte %zu:\n  plain: %.200s\n  %s: %.200s\n", what, devs[k],
                        way == MEMO ? "memo" : "page", i, t[PLAIN] + from, way == MEMO ? "memo" : "page", t[way] + from);
            }
        }
        for (int way = PLAIN; way <= PAGE; way++) free(t[way]);
        g_compared++;
    }
    cmh_sites_free(g);
}

/* ---- generated: one long trace whose peak keeps rising, in steps, with frees in between ---- */

static uint64_t g_rng;
static uint64_t rnd(uint64_t n)
{
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return (g_rng * 2685821657736338717ull >> 33) % n;
}

#define GB (1ull << 30)
#define SLOTS 4096

static void entry(cmh_snapshot *s, int64_t *t, int action, uint64_t addr, uint64_t size, uint32_t thread)
{
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = *t += 1000;
    e.action = (uint8_t)action;
    e.addr = addr;
    e.size = e.requested = size;
    e.thread = thread;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
}

/* nentries entries on device 0: one 4 GiB segment sub-allocated in 1 MiB slots (blocks of 1 to
 * 1 MiB), the live count drifting up (drift in 1/16ths: the chance an operation allocates), the
 * final segment and its live blocks as the end state (or none: the reconciliation frees them). */
static void generate(cmh_snapshot *s, uint64_t seed, uint32_t nentries, int drift, int with_end)
{
    static uint64_t size[SLOTS];
    static int pending[SLOTS];
    g_rng = seed * 0x9E3779B97F4A7C15ull | 1;
    int64_t t = 1700000000000000000ll;
    memset(size, 0, sizeof size);
    memset(pending, 0, sizeof pending);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(s), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(s, 0, 0, NULL), CMH_OK);
    const uint64_t base = 1ull << 40;
    entry(s, &t, CMH_ACT_SEGMENT_ALLOC, base, 4 * GB, 1);
    for (uint32_t i = 1; i < nentries; i++) {
        uint32_t k = (uint32_t)rnd(SLOTS), thread = 1 + (uint32_t)rnd(2);
        uint64_t addr = base + (uint64_t)k * (1u << 20);
        if (pending[k]) { /* a requested free completes */
            entry(s, &t, CMH_ACT_FREE_COMPLETED, addr, size[k], thread);
            pending[k] = 0, size[k] = 0;
        } else if (!size[k] && (int)rnd(16) < drift) {
            size[k] = (1 + rnd(256)) * 4096;
            entry(s, &t, CMH_ACT_ALLOC, addr, size[k], thread);
        } else if (size[k] && rnd(16) >= (uint64_t)drift) {
            int req = rnd(3) == 0;
            entry(s, &t, req ? CMH_ACT_FREE_REQUESTED : CMH_ACT_FREE_COMPLETED, addr, size[k], thread);
            if (req) pending[k] = 1;
            else size[k] = 0;
        } else entry(s, &t, CMH_ACT_MARK, 0, 0, thread);
    }
    if (!with_end) return;
    cmh_segment sg;
    memset(&sg, 0, sizeof sg);
    sg.device = 0;
    sg.addr = base;
    sg.size = 4 * GB;
    sg.pool = CMH_POOL_LARGE;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_segment(s, &sg, NULL), CMH_OK);
    for (uint32_t k = 0; k < SLOTS; k++)
        if (size[k]) {
            cmh_block bl = {base + (uint64_t)k * (1u << 20), size[k], size[k], 0,
                            (uint8_t)(pending[k] ? CMH_BLOCK_ACTIVE_PENDING_FREE : CMH_BLOCK_ACTIVE_ALLOCATED), 0};
            CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_block(s, &bl), CMH_OK);
        }
}

static void test_generated(void)
{
    static const struct {
        uint32_t n;
        int drift, with_end;
    } cases[] = {{120000, 9, 1}, {90000, 8, 1}, {70000, 10, 0}, {3000, 9, 1}, {1, 8, 1}};
    for (uint64_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cmh_snapshot s;
        generate(&s, c + 1, cases[c].n, cases[c].drift, cases[c].with_end);
        char what[64];
        snprintf(what, sizeof what, "generated %u entries, drift %d", cases[c].n, cases[c].drift);
        compare(what, &s);
        cmh_snapshot_free(&s);
    }
}

/* ---- the fixtures ---- */

static void check_fixture(const char *path, cmh_snapshot *s) { compare(path, s); }

static void test_fixtures(void)
{
    cmh_fixture_walk(check_fixture);
    fprintf(stderr, "\n  %" PRIu64 " devices compared three ways\n", g_compared);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("pagememo", NULL, NULL);
    CMH_ADD_TEST(s, test_generated);
    CMH_ADD_TEST(s, test_fixtures);
    return cmh_test_main();
}
