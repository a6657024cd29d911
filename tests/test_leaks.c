/*
 * test_leaks.c - the leaks report's verdicts on hand-built traces: a leak per marked or found
 * step, the floors under which a rise is not called growing, warm-ups that a loaded machine's
 * scheduler spread over the record.
 */
#include <stdio.h>

#include "analyzer_util.h"

/* One site allocating 64 KiB per iteration and freeing it, except every `keep`-th (0: none
 * kept), after a warm-up of `cache` blocks kept from the start; entries `gap` ns apart. */
static void churn_history(cmh_snapshot *s, int iters, int keep, int cache)
{
    cmh_snapshot_init(s);
    uint32_t st = named_stack(s, "step");
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    uint64_t base = SEG_B;
    for (int i = 0; i < cache; i++) add_s(s, CMH_ACT_SEGMENT_ALLOC, base + (uint64_t)i * MIB, 64 << 10, st);
    int kept = 0;
    for (int i = 0; i < iters; i++) {
        uint64_t a = base + (uint64_t)(cache + kept) * MIB;
        add_s(s, CMH_ACT_SEGMENT_ALLOC, a, 64 << 10, st);
        if (keep && i % keep == 0) kept++;
        else add_s(s, CMH_ACT_SEGMENT_FREE, a, 64 << 10, st);
    }
    for (int i = 0; i < cache + kept; i++) {
        cmh_segment g = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_SMALL, base + (uint64_t)i * MIB, 64 << 10, 0, {0, 0}, st, 0, 0, 0};
        cmh_block b = {g.addr, 64 << 10, 64 << 10, st, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
        cmh_snapshot_add_segment(s, &g, NULL);
        cmh_snapshot_add_block(s, &b);
    }
}

/* No marks: the steps come from the loop's own pattern.  A site whose every 10th block stays
 * grows although its live bytes go up and down at every iteration; a warm-up cache that then
 * holds steady does not; three blocks kept in 30 iterations are three steps, too few to call
 * a leak (it rose in each); two kept in 300 iterations, two steps. */
static void test_leak_floors(void)
{
    static const struct {
        int iters, keep, cache, growing, steps, verdict;
    } cases[] = {{300, 10, 0, 1, 30, CMH_LEAK_GROWING}, {300, 0, 5, 0, 0, CMH_LEAK_UNJUDGED}, {300, 0, 0, 0, 0, 0},
                 {300, 30, 0, 1, 10, CMH_LEAK_GROWING}, {30, 10, 0, 0, 3, CMH_LEAK_RISING}, {300, 150, 0, 0, 2, CMH_LEAK_RISING}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cmh_snapshot s;
        churn_history(&s, cases[c].iters, cases[c].keep, cases[c].cache);
        cmh_sites *g = sites_of(&s);
        cmh_leak_report p;
        CU_ASSERT_EQUAL_FATAL(cmh_leaks_compute(&s, 0, g, 0, &p), CMH_OK);
        CU_ASSERT_EQUAL(p.steps.source, cases[c].steps ? CMH_STEPS_PATTERN : CMH_STEPS_UNKNOWN);
        CU_ASSERT_EQUAL(p.steps.count, (uint32_t)cases[c].steps);
        CU_ASSERT_EQUAL_FATAL(p.nsites, cases[c].keep || cases[c].cache ? 1u : 0u); /* nothing left: no site */
        if (!p.nsites) {
            CU_ASSERT_EQUAL(p.leaking, 0);
            cmh_leak_report_free(&p);
            cmh_sites_free(g);
            cmh_snapshot_free(&s);
            continue;
        }
        if (p.sites[0].growing != cases[c].growing || p.sites[0].verdict != cases[c].verdict)
            fprintf(stderr, "  case %zu: %s, steps %u rises %u trend %.2f\n", c, cmh_leak_verdict_name(p.sites[0].verdict), p.steps.count,
                    p.sites[0].rises, p.sites[0].trend);
        CU_ASSERT_EQUAL(p.sites[0].growing, cases[c].growing);
        CU_ASSERT_EQUAL(p.sites[0].verdict, cases[c].verdict);
        CU_ASSERT_EQUAL(p.judged, cases[c].steps >= CMH_LEAK_MIN_STEPS);
        if (cases[c].growing) CU_ASSERT_EQUAL(p.sites[0].rate, (int64_t)(64 << 10));
        CU_ASSERT_EQUAL(p.leaking, (uint32_t)cases[c].growing);
        if (cases[c].growing) CU_ASSERT(p.sites[0].trend >= CMH_LEAK_MIN_TREND);
        cmh_leak_report_free(&p);
        cmh_sites_free(g);
        cmh_snapshot_free(&s);
    }
}

/* Threads on a loaded machine: four threads each keep their first five blocks (a warm-up),
 * but the scheduler pauses two of them in the middle of theirs while the others run, so their
 * kept blocks land in seven of the record's ten windows.  That is no leak.  A thread-per-task
 * pattern, where each new thread keeps one block as it appears, all through the record, is. */
static void sched(cmh_snapshot *s, uint32_t st, uint64_t *next, int thread, int kept, int churn)
{
    for (int i = 0; i < kept; i++) {
        add_s(s, CMH_ACT_SEGMENT_ALLOC, (*next)++ * MIB, 64 << 10, st);
        set_thread(s, thread);
    }
    for (int i = 0; i < churn; i++) {
        add_s(s, CMH_ACT_SEGMENT_ALLOC, 0x7000000000ull, 64 << 10, st);
        set_thread(s, thread);
        add_s(s, CMH_ACT_SEGMENT_FREE, 0x7000000000ull, 64 << 10, st);
        set_thread(s, thread);
    }
}

static void final_segments(cmh_snapshot *s, uint32_t st, uint64_t n)
{
    for (uint64_t i = 1; i < n; i++) {
        cmh_segment g = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_SMALL, i * MIB, 64 << 10, 0, {0, 0}, st, 0, 0, 0};
        cmh_block b = {g.addr, 64 << 10, 64 << 10, st, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
        cmh_snapshot_add_segment(s, &g, NULL);
        cmh_snapshot_add_block(s, &b);
    }
}

static void test_leak_preempted_warmups(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    uint32_t st = named_stack(&s, "step_buffer");
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    uint64_t next = 1;
    /* threads 1 and 2 warm up at once; 3 and 4 are paused after each of their first blocks */
    sched(&s, st, &next, 1, 5, 0), sched(&s, st, &next, 2, 5, 0);
    sched(&s, st, &next, 3, 1, 0), sched(&s, st, &next, 1, 0, 120), sched(&s, st, &next, 3, 1, 0), sched(&s, st, &next, 1, 0, 120);
    sched(&s, st, &next, 3, 1, 0), sched(&s, st, &next, 1, 0, 55), sched(&s, st, &next, 3, 1, 0), sched(&s, st, &next, 2, 0, 120);
    sched(&s, st, &next, 3, 1, 0);
    sched(&s, st, &next, 4, 1, 0), sched(&s, st, &next, 2, 0, 120), sched(&s, st, &next, 4, 1, 0), sched(&s, st, &next, 2, 0, 55);
    sched(&s, st, &next, 4, 1, 0), sched(&s, st, &next, 3, 0, 120), sched(&s, st, &next, 4, 1, 0), sched(&s, st, &next, 3, 0, 120);
    sched(&s, st, &next, 4, 1, 0);
    sched(&s, st, &next, 3, 0, 55), sched(&s, st, &next, 4, 0, 295);
    final_segments(&s, st, next);
    CU_ASSERT_EQUAL(s.nentries, 2380);
    cmh_sites *g = sites_of(&s);
    cmh_leak_report p;
    CU_ASSERT_EQUAL_FATAL(cmh_leaks_compute(&s, 0, g, 0, &p), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(p.nsites, 1);
    CU_ASSERT_EQUAL(p.live_blocks, 20);
    if (p.sites[0].growing) fprintf(stderr, "  preempted warm-ups: rises %u trend %.2f thread %u\n", p.sites[0].rises, p.sites[0].trend, p.sites[0].thread);
    CU_ASSERT_FALSE(p.sites[0].growing);
    CU_ASSERT_EQUAL(p.leaking, 0);
    cmh_leak_report_free(&p);
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    /* thread per task: twelve threads one after another, each keeping its first block */
    cmh_snapshot_init(&s);
    st = named_stack(&s, "handle_request");
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    next = 1;
    for (int t = 1; t <= 12; t++) sched(&s, st, &next, t, 1, 40);
    final_segments(&s, st, next);
    g = sites_of(&s);
    CU_ASSERT_EQUAL_FATAL(cmh_leaks_compute(&s, 0, g, 0, &p), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(p.nsites, 1);
    CU_ASSERT_TRUE(p.sites[0].growing);
    cmh_leak_report_free(&p);
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
}

static void test_leaks_report(void)
{
    for (int marks = 0; marks < 2; marks++) {
        cmh_snapshot s;
        leaky_history(&s, 12, marks);
        cmh_leak_report p;
        cmh_sites *g = sites_of(&s);
        CU_ASSERT_EQUAL_FATAL(cmh_leaks_compute(&s, 0, g, 0, &p), CMH_OK);
        CU_ASSERT_EQUAL(p.steps.source, marks ? CMH_STEPS_MARKS : CMH_STEPS_PATTERN);
        CU_ASSERT_EQUAL(p.steps.count, 12); /* one per mark, or per repetition of the loop */
        CU_ASSERT(p.judged);
        CU_ASSERT_EQUAL(p.live_bytes, (64 + 48) * MIB);
        CU_ASSERT_EQUAL(p.live_blocks, 13);
        CU_ASSERT_EQUAL_FATAL(p.nsites, 2);
        CU_ASSERT_EQUAL(p.leaking, 1);
        const cmh_site *weights = &p.sites[0], *leak = &p.sites[1];
        CU_ASSERT_STRING_EQUAL(site_fn(&s, g, weights), "load_weights");
        CU_ASSERT_FALSE(weights->growing);
        CU_ASSERT_STRING_EQUAL(site_fn(&s, g, leak), "load_batch");
        CU_ASSERT_TRUE(leak->growing);
        CU_ASSERT_EQUAL(leak->bytes, 48 * MIB);
        CU_ASSERT_EQUAL(leak->count, 12);
        CU_ASSERT(leak->rises >= 9);
        CU_ASSERT_EQUAL(leak->rate, (int64_t)(4 * MIB));
        CU_ASSERT(leak->growth_steps >= 9);
        CU_ASSERT_EQUAL(weights->verdict, CMH_LEAK_STATE);
        CU_ASSERT(leak->first_ns > 0 && leak->last_ns > leak->first_ns);
        cmh_leak_report_free(&p);
        /* --min-bytes hides the small site's row, never the totals */
        CU_ASSERT_EQUAL(cmh_leaks_compute(&s, 0, g, 50 * MIB, &p), CMH_OK);
        CU_ASSERT_EQUAL(p.nsites, 1);
        CU_ASSERT_EQUAL(p.leaking, 1);
        CU_ASSERT_EQUAL(p.live_sites, 2);
        CU_ASSERT_EQUAL(p.live_bytes, (64 + 48) * MIB);
        CU_ASSERT_EQUAL(p.live_blocks, 13);
        CU_ASSERT_EQUAL(p.hidden_sites, 1);
        CU_ASSERT_EQUAL(p.hidden_bytes, 48 * MIB);
        cmh_leak_report_free(&p);
        cmh_sites_free(g);
        cmh_snapshot_free(&s);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("leaks", NULL, NULL);
    CMH_ADD_TEST(s, test_leaks_report);
    CMH_ADD_TEST(s, test_leak_preempted_warmups);
    CMH_ADD_TEST(s, test_leak_floors);
    return cmh_test_main();
}
