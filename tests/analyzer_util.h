/*
 * analyzer_util.h - what the analyzer's suites on hand-built traces share (test_replay.c,
 * test_reports.c, test_leaks.c): entries added one by one, named one-frame stacks, the sites of
 * a snapshot, and the whole-block history of a leak that peak and leaks both read.  One test
 * binary includes it once.
 */
#ifndef CMH_ANALYZER_UTIL_H
#define CMH_ANALYZER_UTIL_H

#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define SEG_A 0x7f0000000000ull
#define SEG_B 0x7f0010000000ull

static inline void add(cmh_snapshot *s, int action, uint64_t addr, uint64_t size, uint64_t req, int flags)
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


static inline cmh_sites *sites_of(const cmh_snapshot *s)
{
    int rc;
    char err[128];
    cmh_site_opts o = {CMH_GROUP_SITE, 0, NULL, 0};
    cmh_sites *g = cmh_sites_new(s, &o, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(g);
    return g;
}

/* the function a site of a report names */
static inline const char *site_fn(const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x)
{
    const cmh_frame *f = cmh_sites_frame(g, x->group);
    return f ? cmh_str(s, f->name) : "";
}

static inline uint32_t named_stack(cmh_snapshot *s, const char *fn)
{
    cmh_frame f = {0, 0, 0, 0, -1};
    cmh_strtab_intern(&s->strings, fn, strlen(fn), &f.name);
    cmh_strtab_intern(&s->strings, "prog.c", 6, &f.filename);
    uint32_t fid, sid;
    cmh_snapshot_add_frame(s, &f, &fid);
    cmh_snapshot_add_stack(s, &fid, 1, &sid);
    return sid;
}

static inline void add_s(cmh_snapshot *s, int action, uint64_t addr, uint64_t size, uint32_t stack)
{
    add(s, action, addr, size, size, CMH_EF_WHOLE_BLOCK);
    s->entries[s->nentries - 1].stack = stack;
}

/* the last entry's recording thread */
static inline void set_thread(cmh_snapshot *s, int thread)
{
    cmh_entry_full e;
    cmh_entry_get(s, &s->entries[s->nentries - 1], &e);
    e.thread = (uint32_t)thread;
    CU_ASSERT_EQUAL_FATAL(cmh_entry_set(s, s->nentries - 1, &e), CMH_OK);
}

/* A whole-block history: weights (kept), a leak of 4 MiB per step, temporaries freed each step. */
static inline void leaky_history(cmh_snapshot *s, int steps, int with_marks)
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

#endif
