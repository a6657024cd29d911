/*
 * test_reports.c - the peak, frag and OOM reports on hand-built traces with known answers, and a
 * block pending its free as each report counts it (the leaks report's verdicts: test_leaks.c).
 */
#include "analyzer_util.h"

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
    /* no free figure (an entry without device_free, a failed cuMemGetInfo): not judged too large,
     * nor refused with room, nor demand where the segments' free bytes alone fall short (the rest
     * may have been free on the device: 'not known', it read 'demand'); enough free inside the
     * segments is fragmentation whatever the device had; a device free of 0 is a figure, the
     * device full */
    CU_ASSERT_EQUAL(one_segment_request_verdict(CMH_DEVICE_FREE_UNKNOWN, 31 * MIB), CMH_OOM_UNKNOWN);
    CU_ASSERT_EQUAL(one_segment_request_verdict(0, 31 * MIB), CMH_OOM_TOO_LARGE);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 0, 0, CMH_DEVICE_FREE_UNKNOWN), CMH_OOM_UNKNOWN);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 0, 0, 0), CMH_OOM_DEMAND);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 12, 0, CMH_DEVICE_FREE_UNKNOWN), CMH_OOM_FRAGMENTATION);
    CU_ASSERT_EQUAL(cmh_oom_verdict_pools(10, 12, 8, 0, CMH_DEVICE_FREE_UNKNOWN), CMH_OOM_PRIVATE_POOL);
    CU_ASSERT_STRING_EQUAL(cmh_oom_verdict_name(CMH_OOM_UNKNOWN), "not known");
    CU_ASSERT_PTR_NOT_NULL(strstr(cmh_oom_verdict_text(CMH_OOM_UNKNOWN), "cannot be told"));
    CU_ASSERT_EQUAL(one_segment_oom_verdict(16 * MIB), CMH_OOM_DRIVER);
    CU_ASSERT_STRING_EQUAL(cmh_oom_verdict_name(CMH_OOM_DRIVER), "refused with room");
    /* PyTorch's remedies only in a PyTorch record's sentence: a C program's names the environment's limit */
    CU_ASSERT_PTR_NOT_NULL(strstr(cmh_oom_verdict_advice(CMH_OOM_DRIVER, 1), "set_per_process_memory_fraction"));
    CU_ASSERT_PTR_NULL(strstr(cmh_oom_verdict_advice(CMH_OOM_DRIVER, 0), "PyTorch"));
    CU_ASSERT_PTR_NULL(strstr(cmh_oom_verdict_advice(CMH_OOM_DRIVER, 0), "set_per_process"));
    CU_ASSERT_PTR_NOT_NULL(strstr(cmh_oom_verdict_advice(CMH_OOM_DRIVER, 0), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
    CU_ASSERT_PTR_NULL(strstr(cmh_oom_verdict_advice(CMH_OOM_POOL_CACHE, 0), "empty_cache"));
    CU_ASSERT_PTR_NOT_NULL(strstr(cmh_oom_verdict_advice(CMH_OOM_POOL_CACHE, 1), "empty_cache"));
    /* the order of the rules: a gap that fits first, then the device's own room, then the sum */
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 12, 10, 50), CMH_OOM_FIT_IGNORED);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 12, 5, 10), CMH_OOM_DRIVER);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 6, 5, 4), CMH_OOM_FRAGMENTATION);
    CU_ASSERT_EQUAL(cmh_oom_verdict(10, 3, 3, 4), CMH_OOM_DEMAND);
}

/* An OOM then the same size asked again: a retry only when an allocator above the driver caught
 * the error, by the record's evidence.  A driver-API program that freed a buffer of its own (or
 * trimmed a pool) and asked again from another line saw the error: `oom` and summary once called
 * it "the allocator's retry" and counted no OOM. */
static void oom_then_again(cmh_snapshot *s, int same_stack, int stacks, int blocks, int trim)
{
    cmh_snapshot_init(s);
    uint32_t oom_stack = stacks ? named_stack(s, "ask") : 0, again_stack = stacks ? named_stack(s, "ask_again") : 0;
    if (same_stack) again_stack = oom_stack;
    cmh_snapshot_add_trace(s, 0, 0, NULL);
    add_s(s, CMH_ACT_SEGMENT_ALLOC, SEG_A, 6 * MIB, oom_stack);
    if (blocks) add(s, CMH_ACT_ALLOC, SEG_A, 1 * MIB, 1 * MIB, 0); /* an allocator reports its blocks */
    add(s, CMH_ACT_POOL_SAMPLE, 0x1234, 6 * MIB, 0, 0);            /* a pool keeping 6 MiB */
    add(s, CMH_ACT_OOM, 2 * MIB, 4 * MIB, 4 * MIB, 0);
    s->entries[s->nentries - 1].stack = oom_stack;
    if (trim) add(s, CMH_ACT_POOL_SAMPLE, 0x1234, 0, 0, 0); /* cuMemPoolTrimTo gave its 6 MiB back */
    else add_s(s, CMH_ACT_SEGMENT_FREE, SEG_A, 6 * MIB, oom_stack);
    add_s(s, CMH_ACT_SEGMENT_ALLOC, SEG_B, 4 * MIB, again_stack);
}

static void test_oom_retry_rule(void)
{
    cmh_snapshot s;
    uint64_t freed;
    uint32_t at;
    struct {
        int same_stack, stacks, blocks, trim, want, torch;
    } c[] = {
        {0, 1, 0, 0, 0, 0},                    /* retry2.c: another line asked again: the program's OOM */
        {0, 1, 0, 1, 0, 0},                    /* pooloom.c: a pool trimmed, another line: the program's */
        {1, 1, 0, 0, CMH_RETRY_SAME_STACK, 0}, /* a caching layer asking again where it failed */
        {1, 1, 0, 1, CMH_RETRY_SAME_STACK, 0},
        {0, 0, 0, 0, 0, 0},                    /* no stacks (context none), no blocks: the program's */
        {0, 1, 1, 0, CMH_RETRY_ALLOCATOR, 0},  /* an allocator reporting blocks (PyTorch's way) */
        {0, 0, 1, 1, CMH_RETRY_ALLOCATOR, 0},
        {0, 1, 0, 0, CMH_RETRY_ALLOCATOR, 1}, /* PyTorch's allocator loaded: it asks again from another line */
    };
    for (unsigned k = 0; k < sizeof c / sizeof c[0]; k++) {
        oom_then_again(&s, c[k].same_stack, c[k].stacks, c[k].blocks, c[k].trim);
        if (c[k].torch) {
            cmh_module m = {0, 0, 0x7f0000000000ull, 1 << 20};
            cmh_strtab_intern(&s.strings, "/opt/torch/lib/libc10_cuda.so", 29, &m.path);
            CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_module(&s, &m), CMH_OK);
        }
        const cmh_trace *t = cmh_snapshot_trace(&s, 0);
        uint32_t oom = c[k].blocks ? 3 : 2;
        int r = cmh_oom_retry(&s, t, oom, &freed, &at);
        CU_ASSERT_EQUAL(r, c[k].want);
        if (r != c[k].want) printf("case %u: %d, not %d\n", k, r, c[k].want);
        if (r) {
            CU_ASSERT_EQUAL(at, oom + 2);
            CU_ASSERT_EQUAL(freed, 6 * MIB); /* a segment freed, or a pool trimmed: memory given back */
        }
        cmh_mem_stats st;
        CU_ASSERT_EQUAL_FATAL(cmh_summary_compute(&s, 0, &st), CMH_OK);
        CU_ASSERT_EQUAL(st.num_ooms, r ? 0u : 1u);
        CU_ASSERT_EQUAL(st.num_alloc_retries, r ? 1u : 0u);
        int64_t seen;
        CU_ASSERT_EQUAL(cmh_oom_number(&s, t, oom, &seen), r ? 0u : 1u);
        cmh_snapshot_free(&s);
    }
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

/* One entry of a recording thread (1, 2, 3), for the OOM numbering below; its driver
 * allocations and OOMs have the thread's call stack (a caching layer asking again where it
 * failed: the evidence that makes an OOM a retry, cmh_oom_retry) */
static uint32_t th_stack[4];
static void add_th(cmh_snapshot *s, int action, uint64_t size, uint32_t thread)
{
    static int64_t t = 1700000000000000000ll;
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = t += 1000;
    e.action = (uint8_t)action;
    e.addr = action == CMH_ACT_OOM ? 0 : SEG_A + size;
    e.size = e.requested = size;
    e.thread = thread;
    if (action == CMH_ACT_OOM || action == CMH_ACT_SEGMENT_ALLOC) e.stack = th_stack[thread];
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(s, &e), CMH_OK);
}

static void th_stacks(cmh_snapshot *s)
{
    static const char *names[4] = {"none", "ask_1", "ask_2", "ask_3"};
    for (int k = 1; k < 4; k++) th_stack[k] = named_stack(s, names[k]);
}

/* cmh_oom_number over many OOMs of 3 threads whose entries interleave: each request fails and
 * the program sees it (numbered), or its allocator frees its cache and fails again (the retry
 * numbered, not the first), or frees and succeeds (no number); then two at the edge of the retry
 * window.  Every OOM's number and where it is seen, against the numbers known by construction
 * and `oom`'s (cmh_oom_compute).  Before, each call counted the OOMs before it with a retry scan
 * each: quadratic in the OOMs, for whatif's first failing request on a record of thousands. */
#define NREQ 3000
static void test_oom_number_many(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    s.source = CMH_SRC_RECORDER;
    th_stacks(&s);
    cmh_snapshot_add_trace(&s, 0, 0, NULL);
    /* each thread's entries, then merged round-robin an entry at a time */
    enum { PER = 4 };
    static struct { int action; uint64_t size; int req; } th[3][NREQ * PER / 3 + PER];
    uint32_t nth[3] = {0, 0, 0};
    for (int r = 0; r < NREQ; r++) {
        int k = r % 3, kind = (r / 3) % 3;
        uint64_t size = (uint64_t)(r + 1) * MIB;
        th[k][nth[k]++] = (typeof(th[0][0])){CMH_ACT_OOM, size, r};
        if (kind) {
            th[k][nth[k]++] = (typeof(th[0][0])){CMH_ACT_SEGMENT_FREE, 2 * MIB, -1};
            th[k][nth[k]++] = (typeof(th[0][0])){kind == 1 ? CMH_ACT_OOM : CMH_ACT_SEGMENT_ALLOC, size, r};
        }
        if (r % 7 == 0) th[k][nth[k]++] = (typeof(th[0][0])){CMH_ACT_MARK, 0, -1};
    }
    static int req_of[NREQ * PER + 8];
    static int64_t last_oom[NREQ]; /* each request's last OOM: the one numbered, unless met */
    static int met[NREQ];
    uint32_t pos[3] = {0, 0, 0}, n = 0;
    for (int more = 1; more;) {
        more = 0;
        for (int k = 0; k < 3; k++) {
            if (pos[k] >= nth[k]) continue;
            more = 1;
            typeof(th[0][0]) *x = &th[k][pos[k]++];
            add_th(&s, x->action, x->size, (uint32_t)k + 1);
            req_of[n] = x->action == CMH_ACT_OOM ? x->req : -1;
            if (x->action == CMH_ACT_OOM) last_oom[x->req] = n;
            if (x->action == CMH_ACT_SEGMENT_ALLOC) met[x->req] = 1;
            n++;
        }
    }
    const cmh_trace *t = cmh_snapshot_trace(&s, 0);
    CU_ASSERT_EQUAL_FATAL(t->nentries, n);
    /* the numbers by construction: the requests the program saw, in the order of their last OOM */
    static uint32_t number[NREQ];
    uint32_t seen = 0, bad = 0;
    for (uint32_t i = 0; i < n && i < NREQ * PER + 8; i++)
        if (req_of[i] >= 0 && last_oom[req_of[i]] == i && !met[req_of[i]]) number[req_of[i]] = ++seen;
    uint32_t kinds01 = 0;
    for (int r = 0; r < NREQ; r++) kinds01 += (r / 3) % 3 != 2;
    CU_ASSERT_EQUAL(seen, kinds01); /* the requests of kinds 0 and 1 */
    cmh_oom_report o;
    CU_ASSERT_EQUAL_FATAL(cmh_oom_compute(&s, 0, NULL, &o), CMH_OK);
    uint32_t ev = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (s.entries[t->first_entry + i].action != CMH_ACT_OOM) continue;
        int64_t at;
        uint32_t got = cmh_oom_number(&s, t, i, &at);
        CU_ASSERT_FATAL(ev < o.nevents && o.events[ev].index == (int64_t)i);
        int r = req_of[i];
        uint32_t want = met[r] ? 0 : number[r];
        int64_t want_at = met[r] ? -1 : last_oom[r];
        /* `oom` numbers the OOM where the request is seen; the earlier ones are its retries */
        uint32_t oom_says = want_at >= 0 ? o.events[ev].number : 0;
        if (got != want || at != want_at || (want_at == (int64_t)i && oom_says != want)) {
            if (!bad++) fprintf(stderr, "OOM at %u: number %u seen at %lld, want %u at %lld (oom: %u)\n", i, got, (long long)at, want, (long long)want_at, oom_says);
        }
        ev++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ev, o.nevents);
    CU_ASSERT_EQUAL(o.failures, seen);
    cmh_oom_report_free(&o);
    cmh_snapshot_free(&s);

    /* at the edge of the retry window: thread 1's request decided by its next allocation
     * CMH_OOM_RETRY_WINDOW entries later is a retry that met (no number); one entry further, no
     * retry: the program saw it, #1 (thread 1 gives a segment back first: a same-stack retry
     * needs memory given back, else it is the program's own asking again) */
    for (uint32_t k = 0; k < 2; k++) {
        cmh_snapshot_init(&s);
        s.source = CMH_SRC_RECORDER;
        th_stacks(&s);
        cmh_snapshot_add_trace(&s, 0, 0, NULL);
        add_th(&s, CMH_ACT_OOM, 5 * MIB, 1);
        for (uint32_t j = 1; j < CMH_OOM_RETRY_WINDOW + k; j++)
            if (j == 1) add_th(&s, CMH_ACT_SEGMENT_FREE, 2 * MIB, 1);
            else add_th(&s, CMH_ACT_MARK, 0, 2);
        add_th(&s, CMH_ACT_SEGMENT_ALLOC, 5 * MIB, 1);
        int64_t at;
        uint32_t got = cmh_oom_number(&s, cmh_snapshot_trace(&s, 0), 0, &at);
        CU_ASSERT_EQUAL(got, k);
        CU_ASSERT_EQUAL(at, k ? 0 : -1);
        cmh_snapshot_free(&s);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("reports", NULL, NULL);
    CMH_ADD_TEST(s, test_peak_report);
    CMH_ADD_TEST(s, test_frag_report);
    CMH_ADD_TEST(s, test_oom_report);
    CMH_ADD_TEST(s, test_oom_retry_rule);
    CMH_ADD_TEST(s, test_pending_free_not_live);
    CMH_ADD_TEST(s, test_oom_number_many);
    return cmh_test_main();
}
