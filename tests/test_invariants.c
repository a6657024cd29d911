/*
 * test_invariants.c - the figures hold together, on every fixture and on generated snapshots,
 * on every device: no trace contradicts itself, and at every instant the free bytes inside
 * reserved memory are reserved - active (so free inside segments = reserved - allocated, the
 * rest pending), and the largest free gap fits in them; at each OOM the report says the same;
 * at the peak, the sites add up to the peak; at the end, frag's figures agree.
 *
 * Generated snapshots: recorder-style histories on three devices mixing whole-block segments,
 * segments sub-allocated by blocks (freed at once or with stream work pending), an expandable
 * reservation mapped and unmapped in 2 MiB steps with blocks spanning maps, and OOM errors; a
 * fixed seed per history, so a failure names its seed; and stream-ordered pools whose samples
 * keep a cache beyond what they hand out.  At every instant the free bytes split into
 * releasable and trapped; at each OOM and at the end the split adds up, and frag's end is
 * peak's end.
 */
#include <inttypes.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"
#include "fixture_walk.h"
#include "testutil.h"

#define MIB (1ull << 20)

static uint64_t g_checked_instants, g_checked_ooms, g_checked_files;

/* ---- the checks ---- */

static void check_device(const char *what, const cmh_snapshot *s, int dev, int want_clean)
{
    cmh_replay *r = cmh_replay_new(s, dev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    const cmh_mem_stats *st = cmh_replay_stats(r);
    int reported = 0;
    do {
        if (cmh_replay_anomalies(r)) { /* a trace that contradicts itself promises nothing */
            if (want_clean) {
                fprintf(stderr, "\n  %s device %d: anomalies at entry %" PRId64 "\n", what, dev, cmh_replay_position(r));
                CU_FAIL("the replay found anomalies in the trace");
            }
            break;
        }
        uint64_t free_in, gap;
        cmh_replay_free_space(r, &free_in, &gap);
        int64_t reserved = st->reserved_bytes[CMH_POOL_ALL].current, active = st->active_bytes[CMH_POOL_ALL].current,
                allocated = st->allocated_bytes[CMH_POOL_ALL].current;
        cmh_free_split split;
        cmh_replay_free_split(r, &split);
        int ok = (int64_t)free_in == reserved - active && gap <= free_in && allocated <= active && active <= reserved &&
                 split.releasable + split.trapped + split.private_free == free_in && split.largest_gap == gap && split.pool_cache <= split.releasable;
        if (!ok && !reported++)
            fprintf(stderr, "\n  %s device %d entry %" PRId64 ": free %" PRIu64 " gap %" PRIu64 " reserved %" PRId64
                            " active %" PRId64 " allocated %" PRId64 "\n",
                    what, dev, cmh_replay_position(r), free_in, gap, reserved, active, allocated);
        CU_ASSERT(ok);
        g_checked_instants++;
    } while (cmh_replay_step(r));
    /* (the end may still disagree with the final segments: a snapshot cut by hand, a ring that
     * dropped entries; the reconciliation counts that, and the checks below allow for it) */
    uint64_t anomalies = cmh_replay_anomalies(r);
    cmh_replay_free(r);

    cmh_oom_report o;
    CU_ASSERT_EQUAL_FATAL(cmh_oom_compute(s, dev, NULL, &o), CMH_OK);
    for (uint32_t i = 0; i < o.nevents; i++) {
        const cmh_oom_event *e = &o.events[i];
        CU_ASSERT_EQUAL(e->free_inside, e->reserved - e->allocated);
        if (!anomalies) CU_ASSERT(e->largest_gap + e->pending_free <= e->free_inside);
        if (!anomalies) CU_ASSERT_EQUAL(e->split.releasable + e->split.trapped + e->split.private_free + e->split.own_pool + e->pending_free, e->free_inside);
        CU_ASSERT_EQUAL(e->usable + e->split.unusable, e->free_inside);
        uint64_t held = 0;
        for (uint32_t k = 0; k < e->nsites; k++) held += e->sites[k].bytes;
        if (!anomalies) CU_ASSERT(held >= e->allocated); /* the holders: every active block, pending ones too */
        g_checked_ooms++;
    }
    cmh_oom_report_free(&o);

    cmh_peak_report p;
    CU_ASSERT_EQUAL_FATAL(cmh_peak_compute(s, dev, NULL, &p), CMH_OK);
    uint64_t at_peak = 0;
    for (uint32_t k = 0; k < p.nsites; k++) at_peak += p.sites[k].bytes;
    if (!anomalies) CU_ASSERT_EQUAL(at_peak, (uint64_t)p.alloc_peak); /* the blocks held at the allocated peak are it */
    CU_ASSERT(p.alloc_peak <= p.reserved_peak || anomalies);
    CU_ASSERT(p.alloc_end <= p.alloc_peak && p.reserved_end <= p.reserved_peak);
    int64_t reserved_end = p.reserved_end, allocated_end = p.alloc_end;
    cmh_peak_report_free(&p);

    cmh_frag_report f;
    CU_ASSERT_EQUAL_FATAL(cmh_frag_compute(s, dev, &f), CMH_OK);
    uint64_t sum_free = 0;
    for (uint32_t k = 0; k < f.nsegs; k++) {
        const cmh_frag_seg *g = &f.segs[k];
        if (g->allocated <= g->reserved) CU_ASSERT_EQUAL(g->free, g->reserved - g->allocated);
        CU_ASSERT(g->largest_gap <= g->free);
        sum_free += g->free;
    }
    CU_ASSERT_EQUAL(f.free, sum_free + f.pool_cache);
    if (f.allocated <= f.reserved) CU_ASSERT_EQUAL(f.free, f.reserved - f.allocated);
    if (f.allocated <= f.reserved) CU_ASSERT_EQUAL(f.releasable + f.trapped + f.private_free + f.pending_free, f.free);
    /* frag's end is peak's end: pools' caches and expandable maps included */
    if (!anomalies) {
        CU_ASSERT_EQUAL((int64_t)f.reserved, reserved_end);
        CU_ASSERT_EQUAL((int64_t)f.allocated, allocated_end);
        if ((int64_t)f.reserved != reserved_end)
            fprintf(stderr, "\n  %s device %d: frag reserved %" PRIu64 ", peak's end %" PRId64 "\n", what, dev, f.reserved, reserved_end);
    }
    cmh_frag_report_free(&f);
}

static void check_snapshot(const char *what, const cmh_snapshot *s, int want_clean)
{
    int32_t devs[64];
    int n = cmh_snapshot_devices(s, devs, 64);
    for (int k = 0; k < n && k < 64; k++) check_device(what, s, devs[k], want_clean);
    g_checked_files++;
}

/* ---- generated histories ---- */

static uint64_t g_rng;
static uint64_t rnd(uint64_t n) /* xorshift64*, 0 .. n-1 */
{
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return (g_rng * 2685821657736338717ull >> 33) % n;
}

typedef struct gblock {
    uint64_t addr, size;
    int state; /* CMH_BLOCK_* */
} gblock;

typedef struct gseg {
    uint64_t addr, size;
    int managed, expandable;
    gblock b[32];
    int nb;
    int pooled; /* a stream-ordered pool's (kind async): its bytes move to and from the pools' cache */
} gseg;

typedef struct gdev {
    gseg seg[48];
    int nseg;
    uint64_t next_addr, resv; /* expandable reservation base; resv: mapped bytes from it */
    int exp;                  /* index of the expandable segment in seg, -1 when nothing is mapped */
} gdev;

static int64_t g_t;

static int g_kind; /* the kind of the entries entry() makes (0: unsaid) */

static void entry(cmh_snapshot *s, int action, uint64_t addr, uint64_t size, int flags)
{
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = g_t += 1000;
    e.action = (uint8_t)action;
    e.addr = addr;
    e.size = e.requested = size;
    e.flags = (uint8_t)flags;
    e.kind = (uint8_t)g_kind;
    e.thread = 1 + (uint32_t)rnd(3);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
}

/* a free run of `size` in g (first fit), or UINT64_MAX */
static uint64_t fit(const gseg *g, uint64_t size)
{
    uint64_t at = g->addr;
    for (int i = 0; i <= g->nb; i++) {
        uint64_t end = i < g->nb ? g->b[i].addr : g->addr + g->size;
        if (end >= at + size) return at;
        if (i < g->nb) at = g->b[i].addr + g->b[i].size;
    }
    return UINT64_MAX;
}

static void add_block(gseg *g, uint64_t addr, uint64_t size)
{
    int i = g->nb++;
    while (i > 0 && g->b[i - 1].addr > addr) g->b[i] = g->b[i - 1], i--;
    g->b[i] = (gblock){addr, size, CMH_BLOCK_ACTIVE_ALLOCATED};
}

static void del_block(gseg *g, int i)
{
    memmove(&g->b[i], &g->b[i + 1], (size_t)(g->nb - i - 1) * sizeof *g->b);
    g->nb--;
}

static void del_seg(gdev *d, int i)
{
    if (d->exp > i) d->exp--;
    else if (d->exp == i) d->exp = -1;
    memmove(&d->seg[i], &d->seg[i + 1], (size_t)(d->nseg - i - 1) * sizeof *d->seg);
    d->nseg--;
}

static void step(cmh_snapshot *s, gdev *d)
{
    int op = (int)rnd(11);
    if (op == 10) { /* a stream-ordered pool's sample: what it reserves beyond what it hands out */
        uint64_t used = rnd(8) * MIB, slack = rnd(17) * MIB;
        cmh_entry_full e;
        memset(&e, 0, sizeof e);
        e.time_ns = g_t += 1000;
        e.action = CMH_ACT_POOL_SAMPLE;
        e.addr = 0x900d0000 + rnd(2); /* two pools */
        e.size = used + slack;
        e.requested = used;
        e.thread = 1;
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
        return;
    }
    if (op == 0 && d->nseg < 40) { /* a driver allocation, one block */
        uint64_t size = (1 + rnd(8)) * MIB;
        gseg *g = &d->seg[d->nseg++];
        memset(g, 0, sizeof *g);
        *g = (gseg){d->next_addr, size, 0, 0, {{0}}, 0, (int)rnd(2)};
        d->next_addr += 64 * MIB;
        g_kind = g->pooled ? CMH_KIND_ASYNC : 0; /* (cuMemAllocAsync: the replay moves bytes from the pools' cache) */
        entry(s, CMH_ACT_SEGMENT_ALLOC, g->addr, size, CMH_EF_WHOLE_BLOCK);
        g_kind = 0;
        add_block(g, g->addr, size);
    } else if (op == 1 && d->nseg < 40) { /* a segment an allocator sub-allocates */
        gseg *g = &d->seg[d->nseg++];
        memset(g, 0, sizeof *g);
        *g = (gseg){d->next_addr, 20 * MIB, 1, 0, {{0}}, 0, 0};
        d->next_addr += 64 * MIB;
        entry(s, CMH_ACT_SEGMENT_ALLOC, g->addr, g->size, 0);
    } else if (op <= 4 && d->nseg) { /* a block into a managed or expandable segment */
        gseg *g = &d->seg[rnd((uint64_t)d->nseg)];
        if (!(g->managed || g->expandable) || g->nb == 32) return;
        uint64_t size = (1 + rnd(6)) * MIB / 2, at = fit(g, size);
        if (at == UINT64_MAX) {
            entry(s, CMH_ACT_OOM, 3 * MIB, size, 0); /* addr: the device's free bytes */
            return;
        }
        entry(s, CMH_ACT_ALLOC, at, size, 0);
        add_block(g, at, size);
    } else if (op <= 7 && d->nseg) { /* a free: of a whole segment, or of a block (maybe pending) */
        int i = (int)rnd((uint64_t)d->nseg);
        gseg *g = &d->seg[i];
        if (!g->managed && !g->expandable) {
            g_kind = g->pooled ? CMH_KIND_ASYNC : 0; /* (cuMemFreeAsync: kept in the pools' cache till a sample) */
            entry(s, CMH_ACT_SEGMENT_FREE, g->addr, g->size, CMH_EF_WHOLE_BLOCK);
            g_kind = 0;
            del_seg(d, i);
            return;
        }
        if (!g->nb) {
            if (g->managed) {
                entry(s, CMH_ACT_SEGMENT_FREE, g->addr, g->size, 0);
                del_seg(d, i);
            }
            return;
        }
        int k = (int)rnd((uint64_t)g->nb);
        gblock *b = &g->b[k];
        if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) {
            entry(s, CMH_ACT_FREE_REQUESTED, b->addr, b->size, 0);
            b->state = CMH_BLOCK_ACTIVE_PENDING_FREE;
            if (rnd(3)) return; /* stream work pending for now */
        }
        entry(s, CMH_ACT_FREE_COMPLETED, b->addr, b->size, 0);
        del_block(g, k);
    } else if (op == 8) { /* map 2 MiB at the end of the reservation */
        if (d->exp < 0 && d->nseg < 40) {
            gseg *g = &d->seg[d->exp = d->nseg++];
            memset(g, 0, sizeof *g);
            *g = (gseg){d->resv, 0, 0, 1, {{0}}, 0, 0};
        }
        if (d->exp < 0) return;
        gseg *g = &d->seg[d->exp];
        entry(s, CMH_ACT_SEGMENT_MAP, g->addr + g->size, 2 * MIB, 0);
        g->size += 2 * MIB;
    } else if (op == 9 && d->exp >= 0) { /* unmap the last 2 MiB when nothing is in it */
        gseg *g = &d->seg[d->exp];
        uint64_t tail = g->addr + g->size - 2 * MIB;
        if (g->nb && g->b[g->nb - 1].addr + g->b[g->nb - 1].size > tail) return;
        entry(s, CMH_ACT_SEGMENT_UNMAP, tail, 2 * MIB, 0);
        g->size -= 2 * MIB;
        if (!g->size) del_seg(d, d->exp);
    }
}

static void generate(cmh_snapshot *s, uint64_t seed, int steps)
{
    g_rng = seed * 0x9E3779B97F4A7C15ull | 1;
    g_t = 1700000000000000000ll;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(s), CMH_OK);
    static gdev dev[3];
    for (int k = 0; k < 3; k++) {
        memset(&dev[k], 0, sizeof dev[k]);
        dev[k].next_addr = (uint64_t)(k + 1) << 40;
        dev[k].resv = ((uint64_t)(k + 1) << 40) + (1ull << 39);
        dev[k].exp = -1;
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(s, k, 0, NULL), CMH_OK);
        for (int i = 0; i < steps; i++) step(s, &dev[k]);
    }
    for (int k = 0; k < 3; k++) /* the final state: segments and their active blocks */
        for (int i = 0; i < dev[k].nseg; i++) {
            const gseg *g = &dev[k].seg[i];
            cmh_segment sg;
            memset(&sg, 0, sizeof sg);
            sg.device = k;
            sg.addr = g->addr;
            sg.size = g->size;
            sg.pool = g->expandable ? CMH_POOL_LARGE : (uint8_t)cmh_pool_rule(g->size, !g->managed && !g->expandable);
            sg.flags = (uint8_t)(g->expandable ? CMH_SEG_EXPANDABLE : !g->managed ? CMH_SEG_WHOLE_BLOCK : 0);
            CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_segment(s, &sg, NULL), CMH_OK);
            for (int b = 0; b < g->nb; b++) {
                cmh_block bl = {g->b[b].addr, g->b[b].size, g->b[b].size, 0, (uint8_t)g->b[b].state, 0};
                CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_block(s, &bl), CMH_OK);
            }
        }
}

static void test_generated(void)
{
    for (uint64_t seed = 1; seed <= 60; seed++) {
        cmh_snapshot s;
        generate(&s, seed, 150 + (int)(seed % 5) * 100);
        char what[32];
        snprintf(what, sizeof what, "seed %" PRIu64, seed);
        check_snapshot(what, &s, 1);
        cmh_snapshot_free(&s);
    }
}

/* A trace that contradicts itself says so (the invariant is only promised when it does not):
 * a block outside every segment, one running past its segment's end, a segment given back
 * with a block still live in it.  The fuzzer found the first and the last passing silently. */
static void test_contradictions(void)
{
    static const struct {
        uint64_t block_addr, block_size;
        int free_segment;
    } cases[] = {{5ull << 30, MIB, 0}, {(1ull << 40) + 19 * MIB, 2 * MIB, 0}, {1ull << 40, MIB, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cmh_snapshot s;
        g_t = 1700000000000000000ll;
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&s), CMH_OK);
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&s, 0, 0, NULL), CMH_OK);
        entry(&s, CMH_ACT_SEGMENT_ALLOC, 1ull << 40, 20 * MIB, 0);
        entry(&s, CMH_ACT_ALLOC, cases[c].block_addr, cases[c].block_size, 0);
        if (cases[c].free_segment) entry(&s, CMH_ACT_SEGMENT_FREE, 1ull << 40, 20 * MIB, 0);
        cmh_replay *r = cmh_replay_new(&s, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        while (cmh_replay_position(r) + 1 < cmh_replay_length(r) && cmh_replay_step(r)) {}
        CU_ASSERT(cmh_replay_anomalies(r) >= 1);
        cmh_replay_free(r);
        cmh_snapshot_free(&s);
    }
}

/* ---- the fixtures ---- */

static void check_fixture(const char *path, cmh_snapshot *s) { check_snapshot(path, s, 1); }

static void test_fixtures(void)
{
    cmh_fixture_walk(check_fixture);
    fprintf(stderr, "\n  %" PRIu64 " snapshots, %" PRIu64 " instants, %" PRIu64 " OOMs checked so far\n", g_checked_files,
            g_checked_instants, g_checked_ooms);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("invariants", NULL, NULL);
    CMH_ADD_TEST(s, test_generated);
    CMH_ADD_TEST(s, test_contradictions);
    CMH_ADD_TEST(s, test_fixtures);
    return cmh_test_main();
}
