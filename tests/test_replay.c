/*
 * test_replay.c - the replay and memory_summary on hand-built traces with known answers: the
 * docs' worked example, a snapshot without a trace, the pool rule, a ring that lost its start,
 * whole-block segments, an empty snapshot, an address reused with another size, and where a
 * trace's end and its snapshot disagree (the trace gap).
 */
#include "analyzer_util.h"

static void worked_example(cmh_snapshot *s, int with_trace)
{
    cmh_snapshot_init(s);
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    if (with_trace) {
        add(s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 20 * MIB, 20 * MIB, 0);
        add(s, CMH_ACT_ALLOC, SEG_A, 4 * MIB, 4 * MIB, 0);
        add(s, CMH_ACT_SEGMENT_ALLOC, SEG_B, 2 * MIB, 2 * MIB, 0);
        add(s, CMH_ACT_ALLOC, SEG_B, 1024, 1000, 0);
        add(s, CMH_ACT_FREE_REQUESTED, SEG_A, 4 * MIB, 4 * MIB, 0);
        add(s, CMH_ACT_FREE_COMPLETED, SEG_A, 4 * MIB, 4 * MIB, 0);
    }
    cmh_segment a = {0, CMH_KIND_DEVICE, 0, CMH_POOL_LARGE, SEG_A, 20 * MIB, 0, {0, 0}, 0, 0, 0, 0};
    cmh_segment b = {0, CMH_KIND_DEVICE, 0, CMH_POOL_SMALL, SEG_B, 2 * MIB, 0, {0, 0}, 0, 0, 0, 0};
    cmh_block ia = {SEG_A, 20 * MIB, 0, 0, CMH_BLOCK_INACTIVE, 0};
    cmh_block yb = {SEG_B, 1024, 1000, 0, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
    cmh_block ib = {SEG_B + 1024, 2 * MIB - 1024, 0, 0, CMH_BLOCK_INACTIVE, 0};
    cmh_snapshot_add_segment(s, &a, NULL);
    cmh_snapshot_add_block(s, &ia);
    cmh_snapshot_add_segment(s, &b, NULL);
    cmh_snapshot_add_block(s, &yb);
    cmh_snapshot_add_block(s, &ib);
}

static const char *const expected_summary =
    "|===========================================================================|\n"
    "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
    "|---------------------------------------------------------------------------|\n"
    "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n"
    "|===========================================================================|\n"
    "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Allocated memory      |   1024 B   |   4097 KiB |   4097 KiB |   4096 KiB |\n"
    "|       from large pool |      0 B   |   4096 KiB |   4096 KiB |   4096 KiB |\n"
    "|       from small pool |   1024 B   |      1 KiB |      1 KiB |      0 KiB |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Active memory         |   1024 B   |   4097 KiB |   4097 KiB |   4096 KiB |\n"
    "|       from large pool |      0 B   |   4096 KiB |   4096 KiB |   4096 KiB |\n"
    "|       from small pool |   1024 B   |      1 KiB |      1 KiB |      0 KiB |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Requested memory      |   1000 B   |   4096 KiB |   4096 KiB |   4096 KiB |\n"
    "|       from large pool |      0 B   |   4096 KiB |   4096 KiB |   4096 KiB |\n"
    "|       from small pool |   1000 B   |      0 KiB |      0 KiB |      0 KiB |\n"
    "|---------------------------------------------------------------------------|\n"
    "| GPU reserved memory   |  22528 KiB |  22528 KiB |  22528 KiB |      0 B   |\n"
    "|       from large pool |  20480 KiB |  20480 KiB |  20480 KiB |      0 B   |\n"
    "|       from small pool |   2048 KiB |   2048 KiB |   2048 KiB |      0 B   |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Non-releasable memory |   2047 KiB |  18431 KiB |  18431 KiB |  16384 KiB |\n"
    "|       from large pool |      0 KiB |  16384 KiB |  16384 KiB |  16384 KiB |\n"
    "|       from small pool |   2047 KiB |   2047 KiB |   2047 KiB |      0 KiB |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Allocations           |       1    |       2    |       2    |       1    |\n"
    "|       from large pool |       0    |       1    |       1    |       1    |\n"
    "|       from small pool |       1    |       1    |       1    |       0    |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Active allocs         |       1    |       2    |       2    |       1    |\n"
    "|       from large pool |       0    |       1    |       1    |       1    |\n"
    "|       from small pool |       1    |       1    |       1    |       0    |\n"
    "|---------------------------------------------------------------------------|\n"
    "| GPU reserved segments |       2    |       2    |       2    |       0    |\n"
    "|       from large pool |       1    |       1    |       1    |       0    |\n"
    "|       from small pool |       1    |       1    |       1    |       0    |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Non-releasable allocs |       1    |       2    |       2    |       1    |\n"
    "|       from large pool |       0    |       1    |       1    |       1    |\n"
    "|       from small pool |       1    |       1    |       1    |       0    |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Oversize allocations  |       0    |       0    |       0    |       0    |\n"
    "|---------------------------------------------------------------------------|\n"
    "| Oversize GPU segments |       0    |       0    |       0    |       0    |\n"
    "|===========================================================================|\n";

static char *render(const cmh_mem_stats *st, int abbreviated)
{
    char *buf;
    size_t len;
    FILE *fp = open_memstream(&buf, &len);
    cmh_summary_print(st, 0, abbreviated, fp);
    fclose(fp);
    return buf;
}

static void test_summary_worked_example(void)
{
    cmh_snapshot s;
    worked_example(&s, 1);
    cmh_mem_stats st;
    CU_ASSERT_EQUAL_FATAL(cmh_summary_compute(&s, 0, &st), CMH_OK);
    char *text = render(&st, 0);
    CU_ASSERT_STRING_EQUAL(text, expected_summary);
    if (strcmp(text, expected_summary)) fputs(text, stderr);
    free(text);
    /* every line 77 wide */
    text = render(&st, 1);
    int lines = 0;
    for (char *p = text, *nl; (nl = strchr(p, '\n')); p = nl + 1, lines++) CU_ASSERT_EQUAL(nl - p, 77);
    CU_ASSERT_EQUAL(lines, 6 + 9 * 2 + 2 * 2 + 1); /* abbreviated: no pool rows */
    free(text);
    /* a record PyTorch's allocator did not make: the same table, titled without PyTorch's name */
    char *buf;
    size_t len;
    FILE *fp = open_memstream(&buf, &len);
    cmh_summary_print_titled(&st, 0, 0, 0, fp);
    fclose(fp);
    const char *pt = "|                  PyTorch CUDA memory summary, device ID 0                 |\n";
    const char *ours = "|                          CUDA memory summary, device ID 0                 |\n";
    CU_ASSERT_PTR_NULL(strstr(buf, "PyTorch"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, ours));
    CU_ASSERT_EQUAL(len, strlen(expected_summary));
    const char *at = strstr(expected_summary, pt);
    CU_ASSERT_FATAL(at != NULL);
    size_t off = (size_t)(at - expected_summary); /* everything but the title the same */
    CU_ASSERT(!strncmp(buf, expected_summary, off) && !strcmp(buf + off + strlen(ours), at + strlen(pt)));
    free(buf);
    cmh_snapshot_free(&s);
}

static void test_state_only_snapshot(void)
{
    /* no trace: the figures are the final segments' */
    cmh_snapshot s;
    worked_example(&s, 0);
    cmh_mem_stats st;
    cmh_summary_compute(&s, 0, &st);
    CU_ASSERT_EQUAL(st.allocated_bytes[0].current, 1024);
    CU_ASSERT_EQUAL(st.requested_bytes[0].current, 1000);
    CU_ASSERT_EQUAL(st.reserved_bytes[0].current, (int64_t)(22 * MIB));
    CU_ASSERT_EQUAL(st.reserved_bytes[CMH_POOL_LARGE].current, (int64_t)(20 * MIB));
    CU_ASSERT_EQUAL(st.inactive_split_bytes[0].current, (int64_t)(2 * MIB - 1024));
    CU_ASSERT_EQUAL(st.inactive_split[0].current, 1);
    CU_ASSERT_EQUAL(st.segment[0].current, 2);
    /* nothing before the snapshot is known: every peak is the state itself, and building that
     * state block by block leaves no half-filled segment behind as a peak */
    CU_ASSERT_EQUAL(st.inactive_split_bytes[0].peak, st.inactive_split_bytes[0].current);
    CU_ASSERT_EQUAL(st.inactive_split_bytes[0].allocated, st.inactive_split_bytes[0].current);
    CU_ASSERT_EQUAL(st.inactive_split[0].peak, 1);
    CU_ASSERT_EQUAL(st.allocated_bytes[0].peak, 1024);
    cmh_snapshot_free(&s);
}

/* The one pool rule (snapshot/query.c): a whole block up to 1 MiB is small; a caching allocator's
 * segment up to 2 MiB is small-pool; a segment's own pool wins. */
static void test_pool_rule(void)
{
    CU_ASSERT_EQUAL(cmh_pool_rule(1 << 20, 1), CMH_POOL_SMALL);
    CU_ASSERT_EQUAL(cmh_pool_rule((1 << 20) + 512, 1), CMH_POOL_LARGE);
    CU_ASSERT_EQUAL(cmh_pool_rule((1 << 20) + 512, 0), CMH_POOL_SMALL);
    CU_ASSERT_EQUAL(cmh_pool_rule(2 << 20, 0), CMH_POOL_SMALL);
    CU_ASSERT_EQUAL(cmh_pool_rule((2 << 20) + 512, 0), CMH_POOL_LARGE);
    cmh_segment g;
    memset(&g, 0, sizeof g);
    g.size = 3 << 19; /* 1.5 MiB */
    g.flags = CMH_SEG_WHOLE_BLOCK;
    CU_ASSERT_EQUAL(cmh_segment_pool(&g), CMH_POOL_LARGE);
    g.flags = 0;
    CU_ASSERT_EQUAL(cmh_segment_pool(&g), CMH_POOL_SMALL);
    g.pool = CMH_POOL_LARGE;
    CU_ASSERT_EQUAL(cmh_segment_pool(&g), CMH_POOL_LARGE);
    /* and the replay counts by it: a 1.5 MiB whole-block segment is large-pool memory */
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    add(&s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 3 << 19, 3 << 19, CMH_EF_WHOLE_BLOCK);
    add(&s, CMH_ACT_SEGMENT_ALLOC, SEG_B, 1 << 20, 1 << 20, CMH_EF_WHOLE_BLOCK);
    cmh_segment a = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_UNKNOWN, SEG_A, 3 << 19, 0, {0, 0}, 0, 0, 0, 0};
    cmh_segment b = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_UNKNOWN, SEG_B, 1 << 20, 0, {0, 0}, 0, 0, 0, 0};
    cmh_block ba = {SEG_A, 3 << 19, 3 << 19, 0, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
    cmh_block bb = {SEG_B, 1 << 20, 1 << 20, 0, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
    CU_ASSERT_EQUAL(cmh_snapshot_add_segment(&s, &a, NULL), CMH_OK);
    CU_ASSERT_EQUAL(cmh_snapshot_add_block(&s, &ba), CMH_OK);
    CU_ASSERT_EQUAL(cmh_snapshot_add_segment(&s, &b, NULL), CMH_OK);
    CU_ASSERT_EQUAL(cmh_snapshot_add_block(&s, &bb), CMH_OK);
    cmh_mem_stats st;
    CU_ASSERT_EQUAL_FATAL(cmh_summary_compute(&s, 0, &st), CMH_OK);
    CU_ASSERT_EQUAL(st.reserved_bytes[CMH_POOL_LARGE].current, 3 << 19);
    CU_ASSERT_EQUAL(st.reserved_bytes[CMH_POOL_SMALL].current, 1 << 20);
    CU_ASSERT_EQUAL(st.allocated_bytes[CMH_POOL_LARGE].current, 3 << 19);
    cmh_snapshot_free(&s);
}

static void test_ring_truncated(void)
{
    /* The ring kept only "alloc y; free x": the segments and x existed before its window. */
    cmh_snapshot s;
    worked_example(&s, 0);
    add(&s, CMH_ACT_ALLOC, SEG_B, 1024, 1000, 0);
    add(&s, CMH_ACT_FREE_REQUESTED, SEG_A, 4 * MIB, 4 * MIB, 0);
    add(&s, CMH_ACT_FREE_COMPLETED, SEG_A, 4 * MIB, 4 * MIB, 0);
    s.traces[0].dropped = 3;
    cmh_replay *r = cmh_replay_new(&s, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    const cmh_mem_stats *st = cmh_replay_stats(r);
    /* before the first kept entry: both segments, x live */
    CU_ASSERT_EQUAL(st->reserved_bytes[0].current, (int64_t)(22 * MIB));
    CU_ASSERT_EQUAL(st->allocated_bytes[0].current, (int64_t)(4 * MIB));
    CU_ASSERT_EQUAL(cmh_replay_position(r), -1);
    CU_ASSERT(cmh_replay_step(r));
    CU_ASSERT_EQUAL(st->allocated_bytes[0].current, (int64_t)(4 * MIB + 1024));
    while (cmh_replay_step(r)) {}
    CU_ASSERT_EQUAL(cmh_replay_position(r), 2);
    CU_ASSERT_EQUAL(st->allocated_bytes[0].current, 1024);
    CU_ASSERT_EQUAL(st->allocated_bytes[0].peak, (int64_t)(4 * MIB + 1024));
    CU_ASSERT_EQUAL(st->inactive_split_bytes[0].current, (int64_t)(2 * MIB - 1024));
    CU_ASSERT_EQUAL(cmh_replay_anomalies(r), 0);
    cmh_replay_free(r);
    cmh_snapshot_free(&s);
}

static void test_whole_block_segments(void)
{
    /* driver allocations with no allocator above: one block per segment, freed with it */
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    add(&s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 3 * MIB, 3 * MIB, CMH_EF_WHOLE_BLOCK);
    add(&s, CMH_ACT_SEGMENT_ALLOC, SEG_B, 4096, 4000, CMH_EF_WHOLE_BLOCK);
    add(&s, CMH_ACT_SEGMENT_FREE, SEG_A, 3 * MIB, 3 * MIB, CMH_EF_WHOLE_BLOCK);
    add(&s, CMH_ACT_OOM, 12345, 8 * MIB, 8 * MIB, 0);
    cmh_segment b = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_SMALL, SEG_B, 4096, 0, {0, 0}, 0, 0, 0, 0};
    cmh_block bb = {SEG_B, 4096, 4000, 0, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
    cmh_snapshot_add_segment(&s, &b, NULL);
    cmh_snapshot_add_block(&s, &bb);
    cmh_mem_stats st;
    cmh_summary_compute(&s, 0, &st);
    CU_ASSERT_EQUAL(st.allocated_bytes[0].current, 4096);
    CU_ASSERT_EQUAL(st.allocated_bytes[0].peak, (int64_t)(3 * MIB + 4096));
    CU_ASSERT_EQUAL(st.allocated_bytes[CMH_POOL_LARGE].allocated, (int64_t)(3 * MIB));
    CU_ASSERT_EQUAL(st.allocated_bytes[CMH_POOL_SMALL].allocated, 4096);
    CU_ASSERT_EQUAL(st.requested_bytes[0].current, 4000);
    CU_ASSERT_EQUAL(st.reserved_bytes[0].current, 4096);
    CU_ASSERT_EQUAL(st.inactive_split_bytes[0].peak, 0);
    CU_ASSERT_EQUAL(st.num_ooms, 1);
    cmh_snapshot_free(&s);
}

static void test_empty_snapshot(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    int32_t devs[4];
    CU_ASSERT_EQUAL(cmh_snapshot_devices(&s, devs, 4), 0);
    cmh_mem_stats st;
    CU_ASSERT_EQUAL(cmh_summary_compute(&s, 0, &st), CMH_OK);
    CU_ASSERT_EQUAL(st.reserved_bytes[0].peak, 0);
    cmh_snapshot_free(&s);
}

/* a stack with one named frame, for grouping by site */
/* A block freed where a surviving block later sits: the backward pass once gave the freed
 * block a fresh hash slot that kept the survivor's 'final' mark, and so the survivor's size.
 * 15 MiB asked of a free 16 MiB block leaves 1 MiB, which PyTorch does not split off. */
static void test_reused_address_sizes(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    s.source = CMH_SRC_PYTORCH;
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    add(&s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 16 * MIB, 16 * MIB, 0);
    add(&s, CMH_ACT_ALLOC, SEG_A, 15 * MIB, 15 * MIB, 0);
    add(&s, CMH_ACT_FREE_REQUESTED, SEG_A, 15 * MIB, 15 * MIB, 0);
    add(&s, CMH_ACT_FREE_COMPLETED, SEG_A, 15 * MIB, 15 * MIB, 0);
    add(&s, CMH_ACT_ALLOC, SEG_A, 16 * MIB, 16 * MIB, 0);
    cmh_segment a = {0, CMH_KIND_DEVICE, 0, CMH_POOL_LARGE, SEG_A, 16 * MIB, 0, {0, 0}, 0, 0, 0, 0};
    cmh_block b = {SEG_A, 16 * MIB, 16 * MIB, 0, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
    cmh_snapshot_add_segment(&s, &a, NULL);
    cmh_snapshot_add_block(&s, &b);
    cmh_mem_stats st;
    CU_ASSERT_EQUAL_FATAL(cmh_summary_compute(&s, 0, &st), CMH_OK);
    CU_ASSERT_EQUAL(st.allocated_bytes[CMH_POOL_ALL].allocated, 32 * MIB);
    CU_ASSERT_EQUAL(st.allocated_bytes[CMH_POOL_ALL].freed, 16 * MIB);
    CU_ASSERT_EQUAL(st.inactive_split[CMH_POOL_ALL].allocated, 0);
    CU_ASSERT_EQUAL(st.requested_bytes[CMH_POOL_ALL].allocated, 31 * MIB);
    cmh_snapshot_free(&s);
}

/* The trace gap (cmh_trace_gap): the worked example's trace, whose snapshot shows y inactive
 * (freed after the last entry: the trace stops before the snapshot), and the ring-truncated
 * one, whose x (4 MiB) no kept entry made and which the trace frees, while y it made: neither
 * stops early; a block active at the snapshot that no entry made starts late. */
static void test_trace_gap(void)
{
    cmh_snapshot s;
    cmh_trace_gap g;
    worked_example(&s, 1);
    s.blocks[1].state = CMH_BLOCK_INACTIVE; /* y: freed after the trace */
    cmh_replay *r = cmh_replay_new(&s, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    cmh_replay_gap(r, &g);
    CU_ASSERT_EQUAL(g.unfreed_blocks, 0); /* (known at the reconciliation, not before) */
    while (cmh_replay_step(r)) {}
    cmh_replay_gap(r, &g);
    CU_ASSERT_EQUAL(g.unfreed_blocks, 1);
    CU_ASSERT_EQUAL(g.unfreed_bytes, 1024);
    CU_ASSERT_EQUAL(g.unfreed_segments, 0);
    CU_ASSERT_EQUAL(g.untraced_blocks, 0);
    CU_ASSERT_EQUAL(cmh_replay_stats(r)->allocated_bytes[0].current, 0); /* the end is the snapshot's */
    CU_ASSERT_EQUAL(cmh_replay_stats(r)->allocated_bytes[0].peak, (int64_t)(4 * MIB + 1024)); /* the peak the trace's */
    cmh_replay_free(r);
    /* through the memo's whole replay and the peak report, the same figures */
    cmh_peak_report p;
    CU_ASSERT_EQUAL_FATAL(cmh_peak_totals(&s, 0, &p), CMH_OK);
    CU_ASSERT_EQUAL(p.base.gap.unfreed_blocks, 1);
    CU_ASSERT_EQUAL(p.base.gap.unfreed_bytes, 1024);
    cmh_peak_report_free(&p);
    cmh_snapshot_free(&s);

    /* the converse: y active at the snapshot, its alloc dropped with the ring's start */
    worked_example(&s, 0);
    add(&s, CMH_ACT_FREE_REQUESTED, SEG_A, 4 * MIB, 4 * MIB, 0);
    add(&s, CMH_ACT_FREE_COMPLETED, SEG_A, 4 * MIB, 4 * MIB, 0);
    s.traces[0].dropped = 4;
    CU_ASSERT_EQUAL_FATAL(cmh_trace_gap_compute(&s, 0, &g), CMH_OK);
    CU_ASSERT_EQUAL(g.unfreed_blocks, 0);
    CU_ASSERT_EQUAL(g.unfreed_segments, 0);
    CU_ASSERT_EQUAL(g.untraced_blocks, 1); /* y; x was made before too, but the trace frees it */
    CU_ASSERT_EQUAL(g.untraced_bytes, 1024);
    cmh_snapshot_free(&s);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("replay", NULL, NULL);
    CMH_ADD_TEST(s, test_summary_worked_example);
    CMH_ADD_TEST(s, test_state_only_snapshot);
    CMH_ADD_TEST(s, test_pool_rule);
    CMH_ADD_TEST(s, test_ring_truncated);
    CMH_ADD_TEST(s, test_whole_block_segments);
    CMH_ADD_TEST(s, test_empty_snapshot);
    CMH_ADD_TEST(s, test_reused_address_sizes);
    CMH_ADD_TEST(s, test_trace_gap);
    return cmh_test_main();
}
