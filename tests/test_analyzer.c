/*
 * test_analyzer.c - the replay and memory_summary on hand-built traces with known answers.
 */
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define SEG_A 0x7f0000000000ull
#define SEG_B 0x7f0010000000ull

static void add(cmh_snapshot *s, int action, uint64_t addr, uint64_t size, uint64_t req, int flags)
{
    static int64_t t = 1700000000000000000ll;
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = t += 1000;
    e.action = (uint8_t)action;
    e.addr = addr;
    e.size = size;
    e.requested = req;
    e.flags = (uint8_t)flags;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
}

/* docs/PYTORCH.md's memory_summary example: x = 4 MiB (new 20 MiB segment), y = 1000 B (new 2 MiB segment), del x. */
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

static cmh_sites *sites_of(const cmh_snapshot *s)
{
    int rc;
    char err[128];
    cmh_site_opts o = {CMH_GROUP_SITE, 0, NULL, 0};
    cmh_sites *g = cmh_sites_new(s, &o, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(g);
    return g;
}

/* the function a site of a report names */
static const char *site_fn(const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x)
{
    const cmh_frame *f = cmh_sites_frame(g, x->group);
    return f ? cmh_str(s, f->name) : "";
}

static uint32_t named_stack(cmh_snapshot *s, const char *fn)
{
    cmh_frame f = {0, 0, 0, 0, -1};
    cmh_strtab_intern(&s->strings, fn, strlen(fn), &f.name);
    cmh_strtab_intern(&s->strings, "prog.c", 6, &f.filename);
    uint32_t fid, sid;
    cmh_snapshot_add_frame(s, &f, &fid);
    cmh_snapshot_add_stack(s, &fid, 1, &sid);
    return sid;
}

static void add_s(cmh_snapshot *s, int action, uint64_t addr, uint64_t size, uint32_t stack)
{
    add(s, action, addr, size, size, CMH_EF_WHOLE_BLOCK);
    s->entries[s->nentries - 1].stack = stack;
}

/* the last entry's recording thread */
static void set_thread(cmh_snapshot *s, int thread)
{
    cmh_entry_full e;
    cmh_entry_get(s, &s->entries[s->nentries - 1], &e);
    e.thread = (uint32_t)thread;
    CU_ASSERT_EQUAL_FATAL(cmh_entry_set(s, s->nentries - 1, &e), CMH_OK);
}

/* A whole-block history: weights (kept), a leak of 4 MiB per step, temporaries freed each step. */
static void leaky_history(cmh_snapshot *s, int steps, int with_marks)
{
    cmh_snapshot_init(s);
    uint32_t w = named_stack(s, "load_weights"), l = named_stack(s, "load_batch"), t = named_stack(s, "forward");
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    add_s(s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 64 * MIB, w);
    for (int i = 0; i < steps; i++) {
        if (with_marks) add(s, CMH_ACT_MARK, 0, 0, 0, 0);
        add_s(s, CMH_ACT_SEGMENT_ALLOC, SEG_B + (uint64_t)i * 64 * MIB, 4 * MIB, l);
        add_s(s, CMH_ACT_SEGMENT_ALLOC, SEG_B + 0x100000000ull, 30 * MIB, t);
        add_s(s, CMH_ACT_SEGMENT_FREE, SEG_B + 0x100000000ull, 30 * MIB, t);
    }
    cmh_segment g = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_LARGE, SEG_A, 64 * MIB, 0, {0, 0}, w, 0, 0, 0};
    cmh_block b = {SEG_A, 64 * MIB, 64 * MIB, w, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
    cmh_snapshot_add_segment(s, &g, NULL);
    cmh_snapshot_add_block(s, &b);
    for (int i = 0; i < steps; i++) {
        cmh_segment h = g;
        h.addr = b.addr = SEG_B + (uint64_t)i * 64 * MIB;
        h.size = b.size = b.requested = 4 * MIB;
        h.stack = b.stack = l;
        cmh_snapshot_add_segment(s, &h, NULL);
        cmh_snapshot_add_block(s, &b);
    }
}

static void test_peak_report(void)
{
    cmh_snapshot s;
    leaky_history(&s, 5, 0);
    cmh_peak_report p;
    cmh_sites *g = sites_of(&s);
    CU_ASSERT_EQUAL_FATAL(cmh_peak_compute(&s, 0, g, &p), CMH_OK);
    /* the peak is the last step's temporary: 64 + 5*4 + 30 MiB, at entry 1 + 4*3 + 2 = 14 */
    CU_ASSERT_EQUAL(p.alloc_peak, (int64_t)(114 * MIB));
    CU_ASSERT_EQUAL(p.alloc_index, 14);
    CU_ASSERT_EQUAL(p.alloc_time_ns, cmh_entry_time(&s, &s.entries[14]));
    CU_ASSERT_EQUAL(p.reserved_peak, (int64_t)(114 * MIB));
    CU_ASSERT_EQUAL(p.alloc_end, (int64_t)(84 * MIB));
    CU_ASSERT_EQUAL_FATAL(p.nsites, 3);
    CU_ASSERT_STRING_EQUAL(site_fn(&s, g, &p.sites[0]), "load_weights");
    CU_ASSERT_EQUAL(p.sites[0].bytes, 64 * MIB);
    CU_ASSERT_STRING_EQUAL(site_fn(&s, g, &p.sites[1]), "forward");
    CU_ASSERT_EQUAL(p.sites[1].bytes, 30 * MIB);
    CU_ASSERT_EQUAL(p.sites[2].bytes, 20 * MIB);
    CU_ASSERT_EQUAL(p.sites[2].count, 5);
    cmh_peak_report_free(&p);
    CU_ASSERT_PTR_NULL(p.sites);
    cmh_peak_report_free(&p); /* an emptied report may be freed again */
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
}

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

/* Two 20 MiB segments, each half full with a free 10 MiB gap: a 15 MiB request fails although
 * 20 MiB are free inside them -- fragmentation. */
static void frag_history(cmh_snapshot *s, uint64_t device_free)
{
    cmh_snapshot_init(s);
    uint32_t st = named_stack(s, "activations");
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    for (int k = 0; k < 2; k++) {
        uint64_t a = k ? SEG_B : SEG_A;
        add(s, CMH_ACT_SEGMENT_ALLOC, a, 20 * MIB, 20 * MIB, 0);
        add(s, CMH_ACT_ALLOC, a + 5 * MIB, 10 * MIB, 10 * MIB, 0);
        s->entries[s->nentries - 1].stack = st;
    }
    add(s, CMH_ACT_OOM, device_free, 15 * MIB, 15 * MIB, 0);
    for (int k = 0; k < 2; k++) {
        uint64_t a = k ? SEG_B : SEG_A;
        cmh_segment g = {0, CMH_KIND_DEVICE, 0, CMH_POOL_LARGE, a, 20 * MIB, 0, {0, 0}, 0, 0, 0, 0};
        cmh_block b0 = {a, 5 * MIB, 0, 0, CMH_BLOCK_INACTIVE, 0};
        cmh_block b1 = {a + 5 * MIB, 10 * MIB, 10 * MIB, st, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
        cmh_block b2 = {a + 15 * MIB, 5 * MIB, 0, 0, CMH_BLOCK_INACTIVE, 0};
        cmh_snapshot_add_segment(s, &g, NULL);
        cmh_snapshot_add_block(s, &b0);
        cmh_snapshot_add_block(s, &b1);
        cmh_snapshot_add_block(s, &b2);
    }
}

static void test_frag_report(void)
{
    cmh_snapshot s;
    frag_history(&s, 0);
    cmh_frag_report p;
    CU_ASSERT_EQUAL_FATAL(cmh_frag_compute(&s, 0, &p), CMH_OK);
    CU_ASSERT_EQUAL(p.nsegs, 2);
    CU_ASSERT_EQUAL(p.reserved, 40 * MIB);
    CU_ASSERT_EQUAL(p.allocated, 20 * MIB);
    CU_ASSERT_EQUAL(p.free, 20 * MIB);
    CU_ASSERT_EQUAL(p.largest_gap, 5 * MIB);
    /* the gaps on either side of a live block: trapped, none of it releasable */
    CU_ASSERT_EQUAL(p.trapped, 20 * MIB);
    CU_ASSERT_EQUAL(p.releasable, 0);
    CU_ASSERT_EQUAL(p.releasable + p.trapped + p.pending_free, p.reserved - p.allocated);
    CU_ASSERT_DOUBLE_EQUAL(p.fragmentation, 0.5, 1e-9);
    CU_ASSERT_EQUAL(p.segs[0].largest_gap, 5 * MIB);
    CU_ASSERT_DOUBLE_EQUAL(p.segs[0].fragmentation, 0.5, 1e-9);
    CU_ASSERT_TRUE(p.has_oom);
    CU_ASSERT_EQUAL(p.last_oom.request, 15 * MIB);
    free(p.segs);
    cmh_snapshot_free(&s);
}

/* A 20 MiB segment wholly allocated, then a request failing with device_free left on the
 * device: the OOM's verdict (-1 where the report could not be made). */
static int one_segment_request_verdict(uint64_t device_free, uint64_t request)
{
    cmh_snapshot s;
    cmh_oom_report p;
    cmh_snapshot_init(&s);
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    add(&s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 20 * MIB, 20 * MIB, CMH_EF_WHOLE_BLOCK);
    add(&s, CMH_ACT_OOM, device_free, request, request, 0);
    cmh_sites *g = sites_of(&s);
    int v = -1;
    if (cmh_oom_compute(&s, 0, g, &p) == CMH_OK) {
        if (p.nevents == 1 && p.events[0].device_free == device_free) v = p.events[0].verdict;
        cmh_oom_report_free(&p);
    }
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    return v;
}

/* The same with a 15 MiB request. */
static int one_segment_oom_verdict(uint64_t device_free) { return one_segment_request_verdict(device_free, 15 * MIB); }

static void test_oom_report(void)
{
    cmh_snapshot s;
    frag_history(&s, 0);
    cmh_oom_report p;
    cmh_sites *g = sites_of(&s);
    CU_ASSERT_EQUAL_FATAL(cmh_oom_compute(&s, 0, g, &p), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(p.nevents, 1);
    const cmh_oom_event *e = &p.events[0];
    CU_ASSERT_EQUAL(e->index, 4);
    CU_ASSERT_EQUAL(e->request, 15 * MIB);
    CU_ASSERT_EQUAL(e->allocated, 20 * MIB);
    CU_ASSERT_EQUAL(e->reserved, 40 * MIB);
    CU_ASSERT_EQUAL(e->free_inside, 20 * MIB);
    CU_ASSERT_EQUAL(e->largest_gap, 5 * MIB);
    CU_ASSERT_FALSE(e->fits_in_gap);
    CU_ASSERT_EQUAL(e->verdict, CMH_OOM_FRAGMENTATION);
    CU_ASSERT_EQUAL_FATAL(e->nsites, 1);
    CU_ASSERT_STRING_EQUAL(site_fn(&s, g, &e->sites[0]), "activations");
    CU_ASSERT_EQUAL(e->sites[0].bytes, 20 * MIB);
    cmh_oom_report_free(&p);
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    /* the same request when nothing is free inside the segments: demand; and when the device
     * said 16 MiB were free and the 15 MiB request failed all the same: not this program's
     * memory (a process limit, another process, the driver), whatever the segments hold */
    CU_ASSERT_EQUAL(one_segment_oom_verdict(1 * MIB), CMH_OOM_DEMAND);
    /* a request larger than all the device could give the process (its free bytes and the 20 MiB
     * the process held, together), on a device where nothing else was used: not the memory in
     * use (a driver-API program asking 900 MiB of a 512 MiB device with nothing allocated read
     * "demand: the memory was genuinely in use") */
    CU_ASSERT_EQUAL(one_segment_request_verdict(10 * MIB, 31 * MIB), CMH_OOM_TOO_LARGE);
    CU_ASSERT_EQUAL(one_segment_request_verdict(10 * MIB, 30 * MIB), CMH_OOM_DEMAND);
    CU_ASSERT_EQUAL(one_segment_request_verdict(1 * MIB, 1ull << 40), CMH_OOM_TOO_LARGE);
    CU_ASSERT_STRING_EQUAL(cmh_oom_verdict_name(CMH_OOM_TOO_LARGE), "too large");
    CU_ASSERT_FALSE(cmh_oom_too_large(UINT64_MAX, 2, UINT64_MAX)); /* (no wrap-around) */
    /* no free figure (0: an entry without device_free, a failed cuMemGetInfo): not judged too large */
    CU_ASSERT_EQUAL(one_segment_request_verdict(0, 31 * MIB), CMH_OOM_DEMAND);
    CU_ASSERT_EQUAL(one_segment_oom_verdict(16 * MIB), CMH_OOM_DRIVER);
    CU_ASSERT_STRING_EQUAL(cmh_oom_verdict_name(CMH_OOM_DRIVER), "refused with room");
    /* the order of the rules: a gap that fits first, then the device's own room, then the sum */
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 12, 10, 50), CMH_OOM_FIT_IGNORED);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 12, 5, 10), CMH_OOM_DRIVER);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 6, 5, 4), CMH_OOM_FRAGMENTATION);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 3, 3, 4), CMH_OOM_DEMAND);
}

/* A block freed while a side stream still uses it (free_requested, no free_completed): the
 * program let it go.  The peak's sites and the leaks' still-live blocks are the blocks the
 * program holds, so they sum to allocated (a pickle of 10 MiB pending beside 60 MiB allocated
 * listed 70 MiB of sites "at the allocated peak" and "70.0 MiB still live" while peak,
 * flamegraph and frag said 60); an OOM's holders keep it, as it holds memory all the same. */
static void test_pending_free_not_live(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    uint32_t kept = named_stack(&s, "weights"), gone = named_stack(&s, "side_stream_buffer");
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    add(&s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 40 * MIB, 40 * MIB, 0);
    add(&s, CMH_ACT_ALLOC, SEG_A, 10 * MIB, 10 * MIB, 0);
    s.entries[s.nentries - 1].stack = gone;
    add(&s, CMH_ACT_FREE_REQUESTED, SEG_A, 10 * MIB, 10 * MIB, 0);
    s.entries[s.nentries - 1].stack = gone;
    add(&s, CMH_ACT_ALLOC, SEG_A + 10 * MIB, 20 * MIB, 20 * MIB, 0);
    s.entries[s.nentries - 1].stack = kept;
    add(&s, CMH_ACT_OOM, 0, 30 * MIB, 30 * MIB, 0);
    cmh_segment g = {0, CMH_KIND_DEVICE, 0, CMH_POOL_LARGE, SEG_A, 40 * MIB, 0, {0, 0}, 0, 0, 0, 0};
    cmh_block b0 = {SEG_A, 10 * MIB, 10 * MIB, gone, CMH_BLOCK_ACTIVE_PENDING_FREE, 0};
    cmh_block b1 = {SEG_A + 10 * MIB, 20 * MIB, 20 * MIB, kept, CMH_BLOCK_ACTIVE_ALLOCATED, 0};
    cmh_block b2 = {SEG_A + 30 * MIB, 10 * MIB, 0, 0, CMH_BLOCK_INACTIVE, 0};
    cmh_snapshot_add_segment(&s, &g, NULL);
    cmh_snapshot_add_block(&s, &b0);
    cmh_snapshot_add_block(&s, &b1);
    cmh_snapshot_add_block(&s, &b2);
    cmh_sites *gs = sites_of(&s);

    cmh_peak_report p;
    CU_ASSERT_EQUAL_FATAL(cmh_peak_compute(&s, 0, gs, &p), CMH_OK);
    CU_ASSERT_EQUAL(p.alloc_peak, (int64_t)(20 * MIB));
    CU_ASSERT_EQUAL_FATAL(p.nsites, 1);
    CU_ASSERT_STRING_EQUAL(site_fn(&s, gs, &p.sites[0]), "weights");
    CU_ASSERT_EQUAL(p.sites[0].bytes, 20 * MIB);
    cmh_peak_report_free(&p);

    cmh_leak_report l;
    CU_ASSERT_EQUAL_FATAL(cmh_leaks_compute(&s, 0, gs, 0, &l), CMH_OK);
    CU_ASSERT_EQUAL(l.live_bytes, 20 * MIB);
    CU_ASSERT_EQUAL(l.live_blocks, 1);
    CU_ASSERT_EQUAL(l.live_sites, 1);
    cmh_leak_report_free(&l);

    cmh_oom_report o;
    CU_ASSERT_EQUAL_FATAL(cmh_oom_compute(&s, 0, gs, &o), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(o.nevents, 1);
    CU_ASSERT_EQUAL(o.events[0].allocated, 20 * MIB);
    CU_ASSERT_EQUAL(o.events[0].pending_free, 10 * MIB);
    uint64_t held = 0;
    for (uint32_t k = 0; k < o.events[0].nsites; k++) held += o.events[0].sites[k].bytes;
    CU_ASSERT_EQUAL(held, 30 * MIB);
    cmh_oom_report_free(&o);
    cmh_sites_free(gs);
    cmh_snapshot_free(&s);
}

/* The script's sizes, f"{num:3.1f}{unit}B", as printf writes them: the oracle `trace` must agree
 * with byte for byte now that it rounds from the integer itself (ties to even on the binary
 * value, 1023.95 KiB and up becoming "1024.0KiB", beyond 2^53 the double's own rounding). */
static void py_size(char *buf, size_t n, double num)
{
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
    for (int i = 0; i < 8; i++, num /= 1024.0)
        if (num < 1024.0 && num > -1024.0) {
            snprintf(buf, n, "%3.1f%sB", num, units[i]);
            return;
        }
    snprintf(buf, n, "%.1fYiB", num);
}

static void test_trace_sizes_as_printf(void)
{
    cmh_snapshot s;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&s), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&s, 0, 0, NULL), CMH_OK);
    enum { N = 6000 };
    static uint64_t sizes[N];
    uint64_t x = 88172645463325252ull;
    int n = 0;
    for (uint64_t v = 0; v < 2100; v++) sizes[n++] = v; /* every byte count and the first KiB */
    for (int k = 1; k <= 6; k++) /* around each tie and each unit's edge */
        for (int d = -40; d <= 40; d++) {
            uint64_t unit = 1ull << (10 * k), tie = unit / 20; /* x.05 of the unit */
            sizes[n++] = 3 * unit + tie + (uint64_t)(int64_t)d;
            sizes[n++] = 1024 * unit - unit / 20 + (uint64_t)(int64_t)d;
        }
    while (n < N - 4) { /* and random sizes of every magnitude */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        sizes[n++] = x >> (x % 64);
    }
    sizes[n++] = (1ull << 53) + 1;
    sizes[n++] = UINT64_MAX;
    sizes[n++] = 1ull << 60;
    sizes[n++] = 12345678901234567890ull;
    for (int i = 0; i < n; i++) {
        cmh_entry_full e = {0};
        e.action = CMH_ACT_ALLOC;
        e.addr = (uint64_t)i + 1;
        e.size = e.requested = sizes[i];
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    CU_ASSERT_EQUAL_FATAL(cmh_print_trace(&s, CMH_ALL_DEVICES, fp), CMH_OK);
    fclose(fp);
    char *line = strchr(strchr(text, '\n') + 1, '\n') + 1; /* after "Device 0" and "N entries" */
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char want[96], *end = strchr(line, '\n');
        CU_ASSERT_PTR_NOT_NULL_FATAL(end);
        py_size(want, sizeof want, (double)sizes[i]);
        char *colon = strchr(line, ':');
        size_t got = (size_t)(end - 1 - (colon + 1)); /* between ':' and ']' */
        if (!colon || got != strlen(want) || memcmp(colon + 1, want, got)) {
            if (bad++ < 5) fprintf(stderr, "size %llu: '%.*s', printf says '%s'\n", (unsigned long long)sizes[i], (int)(end - line), line, want);
        }
        line = end + 1;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(!strncmp(line, "TOTAL MEM: ", 11));
    free(text);
    cmh_snapshot_free(&s);
}

/* The integers of `trace` (offsets, unnamed addresses, the script's names a..z, a1.., the device
 * and the count), written without printf, against printf's own text: every number of digits and
 * the edge of each, up to 2^64 - 1. */
static void test_trace_numbers_as_printf(void)
{
    cmh_snapshot s;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&s), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&s, 0, 0, NULL), CMH_OK);
    enum { N = 3000 };
    static uint64_t addrs[N];
    int n = 0;
    uint64_t p = 1, x = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k <= 19; k++, p *= 10) /* 10^k - 1, 10^k, 10^k + 1 */
        for (int d = -1; d <= 1; d++) addrs[n++] = p + (uint64_t)(int64_t)d;
    addrs[n++] = UINT64_MAX;
    addrs[n++] = UINT64_MAX - 1;
    for (uint64_t v = 0; v < 200; v++) addrs[n++] = v;
    while (n < N) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        addrs[n++] = x >> (x % 64);
    }
    for (int i = 0; i < n; i++) { /* alloc A at no segment (MEM[A:...]), then a free of an unknown address */
        cmh_entry_full e = {0};
        e.action = i % 2 ? CMH_ACT_FREE_REQUESTED : CMH_ACT_ALLOC;
        e.addr = i % 2 ? ~addrs[i] : addrs[i];
        e.size = e.requested = 512;
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    CU_ASSERT_EQUAL_FATAL(cmh_print_trace(&s, CMH_ALL_DEVICES, fp), CMH_OK);
    fclose(fp);
    char want[128];
    snprintf(want, sizeof want, "Device 0 ----------------\n%d entries\n", n);
    CU_ASSERT_FATAL(!strncmp(text, want, strlen(want)));
    char *line = text + strlen(want);
    int bad = 0, names = 0;
    for (int i = 0; i < n; i++) {
        char *end = strchr(line, '\n');
        CU_ASSERT_PTR_NOT_NULL_FATAL(end);
        if (i % 2) {
            /* an address never allocated keeps its number; one allocated before has its name */
            int known = 0;
            for (int j = 0; j < i && !known; j += 2) known = addrs[j] == ~addrs[i];
            if (known) {
                line = end + 1;
                continue;
            }
            snprintf(want, sizeof want, "del %llu # 512.0B", (unsigned long long)~addrs[i]);
        } else {
            int k = names++;
            char nm[32];
            if (k / 26) snprintf(nm, sizeof nm, "%c%d", 'a' + k % 26, k / 26);
            else snprintf(nm, sizeof nm, "%c", 'a' + k % 26);
            snprintf(want, sizeof want, "%s = MEM[%llu:512.0B]", nm, (unsigned long long)addrs[i]);
        }
        if ((size_t)(end - line) != strlen(want) || memcmp(line, want, strlen(want))) {
            if (bad++ < 5) fprintf(stderr, "'%.*s', printf says '%s'\n", (int)(end - line), line, want);
        }
        line = end + 1;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(!strncmp(line, "TOTAL MEM: ", 11));
    free(text);
    cmh_snapshot_free(&s);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("analyzer", NULL, NULL);
    CMH_ADD_TEST(s, test_summary_worked_example);
    CMH_ADD_TEST(s, test_state_only_snapshot);
    CMH_ADD_TEST(s, test_pool_rule);
    CMH_ADD_TEST(s, test_ring_truncated);
    CMH_ADD_TEST(s, test_whole_block_segments);
    CMH_ADD_TEST(s, test_empty_snapshot);
    CMH_ADD_TEST(s, test_reused_address_sizes);
    CMH_ADD_TEST(s, test_peak_report);
    CMH_ADD_TEST(s, test_leaks_report);
    CMH_ADD_TEST(s, test_leak_preempted_warmups);
    CMH_ADD_TEST(s, test_leak_floors);
    CMH_ADD_TEST(s, test_frag_report);
    CMH_ADD_TEST(s, test_oom_report);
    CMH_ADD_TEST(s, test_pending_free_not_live);
    CMH_ADD_TEST(s, test_trace_sizes_as_printf);
    CMH_ADD_TEST(s, test_trace_numbers_as_printf);
    return cmh_test_main();
}
