/*
 * test_owners.c - owners' 'not recorded' row against a cuMemGetInfo sample that disagrees with
 * the trace by the calls then in flight, on generated records whose every figure is known.
 *
 * A hook logs an allocation after the driver returns it and a free before the driver takes it
 * back, so a sample can count another thread's allocation the trace logs a moment later, or a
 * block the trace has already freed.  Neither is memory outside the record.  The sampler's own
 * next call is never in flight (its calls were all logged before it sampled), and memory really
 * taken outside the record (a context) must stay in the row to the byte.  A sample that cannot
 * be (more free than total) is left out and counted.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "cumemhist/owners.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define T0 1700000000000000000ll
#define TOTAL (16ull << 30)

static void entry(cmh_snapshot *s, int64_t t_us, int action, uint64_t addr, uint64_t size, uint32_t thread)
{
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = T0 + t_us * 1000;
    e.action = (uint8_t)action;
    e.addr = addr;
    e.size = e.requested = size;
    e.thread = thread;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
}

static void sample(cmh_snapshot *s, int64_t t_us, uint64_t used, uint32_t thread)
{
    cmh_meminfo m = {0, T0 + t_us * 1000, TOTAL - used, TOTAL, thread};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_meminfo(s, &m), CMH_OK);
}

static void start(cmh_snapshot *s)
{
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(s), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(s, 0, 0, NULL), CMH_OK);
}

static const cmh_owners_moment *moment(const cmh_owners_report *o, const char *what)
{
    for (uint32_t i = 0; i < o->nmoments; i++)
        if (!strcmp(o->moments[i].what, what)) return &o->moments[i];
    CU_FAIL_FATAL("no such moment");
    return NULL;
}

static uint64_t unexplained(const cmh_owners_moment *m)
{
    for (uint32_t i = 0; i < m->nrows; i++)
        if (m->rows[i].kind == CMH_OWN_UNEXPLAINED) return m->rows[i].bytes;
    return UINT64_MAX;
}

#define A(k) (0x7f0000000000ull + (uint64_t)(k) * 256 * MIB)

/* Thread 1 allocates 4 MiB and samples; threads 2 and 3 had 4 MiB each in the driver then,
 * logged 10 and 20 us later; thread 1 goes on to allocate 100 MiB (after its sample: not in
 * flight).  ctx bytes are a context's.  Frees come a second later; the end has no sample unless
 * end_sample. */
static void burst(cmh_snapshot *s, uint64_t ctx, uint32_t sampler, int end_sample)
{
    start(s);
    entry(s, 0, CMH_ACT_SEGMENT_ALLOC, A(0), 4 * MIB, 1);
    sample(s, 1, ctx + 12 * MIB, sampler);
    entry(s, 10, CMH_ACT_SEGMENT_ALLOC, A(1), 4 * MIB, 2);
    entry(s, 20, CMH_ACT_SEGMENT_ALLOC, A(2), 4 * MIB, 3);
    entry(s, 30, CMH_ACT_SEGMENT_ALLOC, A(3), 100 * MIB, 1);
    for (int k = 0; k < 4; k++) entry(s, 1000000 + k, CMH_ACT_SEGMENT_FREE, A(k), k == 3 ? 100 * MIB : 4 * MIB, k ? (uint32_t)k : 1);
    s->dump_time_ns = T0 + 2000000000ll;
    if (end_sample) sample(s, 2000000, ctx, 0);
}

static void test_allocations_in_flight(void)
{
    cmh_snapshot s;
    cmh_owners_report o;
    burst(&s, 0, 1, 0);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    const cmh_owners_moment *pk = moment(&o, "peak");
    CU_ASSERT_EQUAL(pk->recorded, 112 * MIB);
    CU_ASSERT_EQUAL(unexplained(pk), 0); /* it said 8 MiB: the two allocations in flight */
    /* the peak comes 3 entries after the sample: the two calls in flight then are logged by
     * it, in its rows; nothing was in flight at the peak that anything knows of, and its figure
     * is not exact (it said in_flight 8 MiB, '8.0 MiB more in use then', at a peak whose rows
     * hold those 8 MiB) */
    CU_ASSERT_EQUAL(pk->in_flight, 0);
    CU_ASSERT_FALSE(pk->sample_exact);
    CU_ASSERT_EQUAL(pk->used, 112 * MIB);
    CU_ASSERT_EQUAL(o.bad_samples, 0);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
    /* an out-of-memory error of the sampler's right after its sample (the recorder samples at
     * one, then logs it): the same instant, so the two calls then in flight are the error's, 8
     * MiB in use beyond its 4 MiB of rows; not exact (calls in flight), the end's exact sample's
     * figure taken (the steady assumption), and said */
    start(&s);
    entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, A(0), 4 * MIB, 1);
    sample(&s, 1, 12 * MIB, 1);
    entry(&s, 2, CMH_ACT_OOM, 0, 1ull << 40, 1);
    entry(&s, 10, CMH_ACT_SEGMENT_ALLOC, A(1), 4 * MIB, 2);
    entry(&s, 20, CMH_ACT_SEGMENT_ALLOC, A(2), 4 * MIB, 3);
    for (int k = 0; k < 3; k++) entry(&s, 1000000 + k, CMH_ACT_SEGMENT_FREE, A(k), 4 * MIB, (uint32_t)k + 1);
    s.dump_time_ns = T0 + 2000000000ll;
    sample(&s, 2000000, 0, 0);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    const cmh_owners_moment *om = moment(&o, "out of memory #1");
    CU_ASSERT_EQUAL(om->recorded, 4 * MIB);
    CU_ASSERT_EQUAL(unexplained(om), 0);
    CU_ASSERT_EQUAL(om->in_flight, 8 * MIB); /* threads 2's and 3's, logged after */
    CU_ASSERT_FALSE(om->sample_exact);
    CU_ASSERT_EQUAL(om->sample_time_ns, T0 + 2000000000ll); /* the figure's: the end's exact sample */
    CU_ASSERT_EQUAL(moment(&o, "peak")->in_flight, 0);
    CU_ASSERT_TRUE(moment(&o, "end")->sample_exact);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
}

/* A 300 MiB context stays whole: the sampler's own next allocation (100 MiB) is not taken for
 * one in flight, though no other sample says what is steady. */
static void test_context_kept_whole(void)
{
    cmh_snapshot s;
    cmh_owners_report o;
    burst(&s, 300 * MIB, 1, 0);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    const cmh_owners_moment *pk = moment(&o, "peak");
    CU_ASSERT_EQUAL(unexplained(pk), 300 * MIB);
    CU_ASSERT_EQUAL(pk->in_flight, 0); /* (the sample's calls in flight are in the peak's rows) */
    CU_ASSERT_EQUAL(unexplained(moment(&o, "end")), 300 * MIB);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
    /* a reader numbers the threads by their OS ids (the recorder numbered them by first event):
     * the sample's thread is renumbered with the entries', or the sampler's own 100 MiB after
     * it would be taken for one in flight (it said 200 MiB on burst3 with a context) */
    burst(&s, 300 * MIB, 1, 0);
    for (uint32_t k = 1; k <= 3; k++) {
        cmh_thread_info ti = {k, k == 1 ? 300 : 100 * (int64_t)k - 100, 0};
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_thread(&s, &ti), CMH_OK);
    }
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_number_threads(&s), CMH_OK);
    CU_ASSERT_EQUAL(s.meminfo[0].thread, 3);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    CU_ASSERT_EQUAL(unexplained(moment(&o, "peak")), 300 * MIB);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
    /* a sample that names no thread (a record from before): every next allocation may have been
     * in flight, the sampler's too, so the range is [200, 308] MiB; the exact end sample says
     * 300 is steady, and that is the figure */
    burst(&s, 300 * MIB, 0, 1);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    pk = moment(&o, "peak");
    CU_ASSERT_EQUAL(unexplained(pk), 300 * MIB);
    CU_ASSERT_EQUAL(pk->in_flight, 0);
    CU_ASSERT_EQUAL(unexplained(moment(&o, "end")), 300 * MIB);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
}

/* A free is logged before the driver takes the memory back: thread 2's 6 MiB, freed in the
 * trace between the sampler's own allocation and its sample, are still in its used bytes. */
static void test_free_in_flight(void)
{
    cmh_snapshot s;
    cmh_owners_report o;
    start(&s);
    entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, A(1), 6 * MIB, 2);
    entry(&s, 100, CMH_ACT_SEGMENT_ALLOC, A(0), 32 * MIB, 1);
    entry(&s, 200, CMH_ACT_SEGMENT_ALLOC, A(2), 2 * MIB, 1); /* the device's peak: 40 MiB */
    entry(&s, 203, CMH_ACT_SEGMENT_FREE, A(1), 6 * MIB, 2);
    sample(&s, 206, 40 * MIB + 64 * MIB, 1); /* 64 MiB: a context */
    entry(&s, 900000, CMH_ACT_SEGMENT_FREE, A(0), 32 * MIB, 1);
    s.dump_time_ns = T0 + 1000000000ll;
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    const cmh_owners_moment *pk = moment(&o, "peak");
    CU_ASSERT_EQUAL(pk->recorded, 40 * MIB);
    CU_ASSERT_EQUAL(unexplained(pk), 64 * MIB);
    /* the peak is before the free: its rows hold the 6 MiB the sample's free in flight held */
    CU_ASSERT_EQUAL(pk->in_flight, 0);
    CU_ASSERT_TRUE(pk->sample_low_end); /* (no exact sample: the figure is the range's low end) */
    cmh_owners_report_free(&o);
    /* thread 2's free logged before the sampler's own last call was done by then: 6 MiB more
     * in use at the sample is memory outside the record */
    cmh_snapshot_free(&s);
    start(&s);
    entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, A(1), 6 * MIB, 2);
    entry(&s, 100, CMH_ACT_SEGMENT_ALLOC, A(0), 32 * MIB, 1);
    entry(&s, 150, CMH_ACT_SEGMENT_FREE, A(1), 6 * MIB, 2);
    entry(&s, 200, CMH_ACT_SEGMENT_ALLOC, A(2), 2 * MIB, 1);
    sample(&s, 206, 34 * MIB + 70 * MIB, 1);
    entry(&s, 900000, CMH_ACT_SEGMENT_FREE, A(0), 32 * MIB, 1);
    s.dump_time_ns = T0 + 1000000000ll;
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    pk = moment(&o, "peak");
    CU_ASSERT_EQUAL(unexplained(pk), 70 * MIB);
    CU_ASSERT_EQUAL(pk->in_flight, 0);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
}

/* free > total cannot be: the sample is left out, counted, and no figure comes from it (it
 * printed '556.0 MiB of 400.0 MiB in use' from a fake driver whose free had wrapped) */
static void test_impossible_sample(void)
{
    cmh_snapshot s;
    cmh_owners_report o;
    start(&s);
    entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, A(0), 4 * MIB, 1);
    cmh_meminfo bad = {0, T0 + 1000, UINT64_MAX - 28 * MIB, 400 * MIB, 1};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_meminfo(&s, &bad), CMH_OK);
    s.dump_time_ns = T0 + 1000000ll;
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    CU_ASSERT_EQUAL(o.bad_samples, 1);
    CU_ASSERT_EQUAL(o.bad_sample.free, bad.free);
    CU_ASSERT_FALSE(o.sample_known);
    for (uint32_t i = 0; i < o.nmoments; i++) CU_ASSERT_FALSE(o.moments[i].used_known);
    cmh_owners_report_free(&o);
    /* beside a sample that can be, that one gives the figures */
    sample(&s, 500, 4 * MIB + 300 * MIB, 1);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    CU_ASSERT_EQUAL(o.bad_samples, 1);
    CU_ASSERT_EQUAL(unexplained(moment(&o, "end")), 300 * MIB);
    CU_ASSERT_EQUAL(o.sample_used, 304 * MIB);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
}

/* A device's first sample is taken right after its sampler's first allocation and counts it;
 * stamped a few microseconds before that allocation's entry (a record whose samples were on
 * another clock than its entries), it was placed before it: the 512 MiB counted twice, once
 * recorded and once 'not recorded (CUDA context, other processes)', assumed steady to the peak
 * ('the device had 1.0 GiB in use' of a program that held 512 MiB; fs2.cmh).  It follows an
 * entry of its sampler's, whatever its stamp says. */
static void test_sample_stamped_early(void)
{
    cmh_snapshot s;
    cmh_owners_report o;
    start(&s);
    sample(&s, -69, 512 * MIB, 1);
    entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, A(0), 512 * MIB, 1);
    entry(&s, 40, CMH_ACT_SEGMENT_FREE, A(0), 512 * MIB, 1);
    s.dump_time_ns = T0 + 2000000000ll;
    sample(&s, 2000000, 0, 0);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    const cmh_owners_moment *pk = moment(&o, "peak");
    CU_ASSERT_EQUAL(pk->recorded, 512 * MIB);
    CU_ASSERT_EQUAL(unexplained(pk), 0);
    CU_ASSERT_EQUAL(pk->used, 512 * MIB);
    CU_ASSERT_EQUAL(unexplained(moment(&o, "end")), 0);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
    /* memory really taken outside the record (a 300 MiB context) stays whole beside it */
    start(&s);
    sample(&s, -69, 300 * MIB + 512 * MIB, 1);
    entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, A(0), 512 * MIB, 1);
    entry(&s, 40, CMH_ACT_SEGMENT_FREE, A(0), 512 * MIB, 1);
    s.dump_time_ns = T0 + 2000000000ll;
    sample(&s, 2000000, 300 * MIB, 0);
    CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
    CU_ASSERT_EQUAL(unexplained(moment(&o, "peak")), 300 * MIB);
    CU_ASSERT_EQUAL(moment(&o, "peak")->used, 812 * MIB);
    cmh_owners_report_free(&o);
    cmh_snapshot_free(&s);
}

/* A moment between two samples, neither at its instant: the nearest is judged at the microsecond,
 * so a record and its pickle (entry times kept as microseconds) take the same one.  The peak at
 * 500.9 us is 500.1 us before the later sample and 500.9 us after the earlier: the .cmh took the
 * later, its pickle (the peak at 500 us) the earlier, and their 'not recorded' rows differed
 * (asyncdev's xd under load: "cuMemGetInfo at +973 us" against "+939 us"). */
static void at_ns(cmh_snapshot *s, int64_t t_ns, int action, uint64_t addr, uint64_t size)
{
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = T0 + t_ns;
    e.action = (uint8_t)action;
    e.addr = addr;
    e.size = e.requested = size;
    e.thread = 1;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
}

static void test_nearest_sample_at_the_microsecond(void)
{
    int64_t chosen[2];
    for (int us = 0; us < 2; us++) { /* 0: the record's nanoseconds, 1: its pickle's microseconds */
        cmh_snapshot s;
        cmh_owners_report o;
        start(&s);
        at_ns(&s, 0, CMH_ACT_SEGMENT_ALLOC, A(0), 4 * MIB);
        sample(&s, 0, 64 * MIB + 4 * MIB, 1);
        at_ns(&s, us ? 500000 : 500900, CMH_ACT_SEGMENT_ALLOC, A(1), 100 * MIB);
        at_ns(&s, 1000000, CMH_ACT_SEGMENT_FREE, A(1), 100 * MIB);
        sample(&s, 1001, 32 * MIB + 4 * MIB, 1);
        s.dump_time_ns = T0 + 2000000000ll;
        CU_ASSERT_EQUAL_FATAL(cmh_owners_compute(&s, 0, &o), CMH_OK);
        const cmh_owners_moment *pk = moment(&o, "peak");
        CU_ASSERT_EQUAL(pk->recorded, 104 * MIB);
        chosen[us] = pk->sample_time_ns;
        /* the earlier sample's 64 MiB outside the record, at the same microsecond distance */
        CU_ASSERT_EQUAL(unexplained(pk), 64 * MIB);
        cmh_owners_report_free(&o);
        cmh_snapshot_free(&s);
    }
    CU_ASSERT_EQUAL(chosen[0], chosen[1]);
    CU_ASSERT_EQUAL(chosen[0], T0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("owners", NULL, NULL);
    CMH_ADD_TEST(s, test_allocations_in_flight);
    CMH_ADD_TEST(s, test_context_kept_whole);
    CMH_ADD_TEST(s, test_free_in_flight);
    CMH_ADD_TEST(s, test_impossible_sample);
    CMH_ADD_TEST(s, test_sample_stamped_early);
    CMH_ADD_TEST(s, test_nearest_sample_at_the_microsecond);
    return cmh_test_main();
}
