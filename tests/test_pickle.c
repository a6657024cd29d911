/*
 * test_pickle.c - PyTorch pickles: every real fixture loads with the counts it holds, what we
 * write reads back losslessly, and hostile input gives a clear error, never a crash.
 */
#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/recover.h"
#include "cumemhist/snapshot.h"
#include "cumemhist/viz.h"
#include "cumemhist/whatif.h"
#include "cumemhist/reports.h"
#include "testutil.h"

typedef struct expect {
    const char *file;
    uint32_t segments, blocks, devices;
    uint32_t actions[9]; /* alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map,
                            segment_unmap, oom, snapshot */
    uint32_t frames, annotations;
} expect;

/* Counted from the files with CPython's pickle (distinct (name, filename, line) frames). */
static const expect fixtures[] = {
    {"assignment2_training_trace.pickle", 216, 455, 1, {1721, 1721, 1721, 0, 0, 0, 0, 0, 0}, 55, 0},
    {"cs336_kk_2.7b_forward_compile_annotations_cppframes.pickle", 961, 2077, 1, {3020, 2377, 2377, 178, 742, 0, 0, 0, 0}, 1396, 1802},
    {"docubox_state_only.pickle", 12, 116, 1, {0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
    {"flexgen_torch20_oom_observer_block_history.pickle", 176, 463, 1, {0, 0, 0, 0, 0, 0, 0, 0, 1}, 12, 0},
    {"layoutediting_two_devices.pickle", 673, 6644, 2, {0, 0, 1, 0, 0, 0, 0, 0, 1}, 79, 0},
    {"memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle", 55, 770, 8, {6115, 5790, 5790, 52, 0, 75, 10, 0, 0}, 78, 0},
    {"octree_nca_cpp_frames_snapshot_action.pickle", 22, 97, 1, {294, 293, 293, 21, 0, 0, 0, 0, 1}, 164, 0},
    {"resnet50_empty_0seg_4dev_expandable_settings.pickle", 0, 0, 4, {0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
    {"transformer_nuggets_mini_snapshot.pickle", 14, 14, 1, {28, 4, 4, 14, 0, 0, 0, 0, 0}, 200, 0},
};

static int load_fixture(const char *name, cmh_snapshot *s)
{
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/%s", CMH_PYTORCH_FIXTURES, name);
    int rc = cmh_snapshot_load(path, s, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    return rc;
}

static void test_fixture_counts(void)
{
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        const expect *x = &fixtures[i];
        cmh_snapshot s;
        CU_ASSERT_EQUAL_FATAL(load_fixture(x->file, &s), CMH_OK);
        CU_ASSERT_EQUAL(s.source, CMH_SRC_PYTORCH);
        CU_ASSERT_EQUAL(s.nsegments, x->segments);
        CU_ASSERT_EQUAL(s.nblocks, x->blocks);
        CU_ASSERT_EQUAL(s.ntraces, x->devices);
        uint32_t got[CMH_ACT_COUNT] = {0};
        for (uint32_t k = 0; k < s.nentries; k++) got[s.entries[k].action]++;
        for (int a = 0; a < 9; a++) {
            CU_ASSERT_EQUAL(got[a], x->actions[a]);
            if (got[a] != x->actions[a]) fprintf(stderr, "%s: %s %u, want %u\n", x->file, cmh_action_name(a), got[a], x->actions[a]);
        }
        CU_ASSERT_EQUAL(s.nframes, x->frames);
        if (s.nframes != x->frames) fprintf(stderr, "%s: %u frames, want %u\n", x->file, s.nframes, x->frames);
        CU_ASSERT_EQUAL(s.nannotations, x->annotations);
        /* blocks tile their segments */
        for (uint32_t g = 0; g < s.nsegments; g++) {
            uint64_t at = s.segments[g].addr;
            for (uint32_t k = 0; k < s.segments[g].nblocks; k++) {
                CU_ASSERT_EQUAL(s.blocks[s.segments[g].first_block + k].addr, at);
                at += s.blocks[s.segments[g].first_block + k].size;
            }
            CU_ASSERT_EQUAL(at, s.segments[g].addr + s.segments[g].size);
        }
        cmh_snapshot_free(&s);
    }
}

static void test_fixture_details(void)
{
    cmh_snapshot s;
    CU_ASSERT_EQUAL_FATAL(load_fixture("assignment2_training_trace.pickle", &s), CMH_OK);
    CU_ASSERT(s.pt_fields & CMH_PT_TIME_US);
    CU_ASSERT(s.pt_fields & CMH_PT_COMPILE_CONTEXT);
    CU_ASSERT(s.pt_fields & CMH_PT_USER_METADATA);
    CU_ASSERT_STRING_EQUAL(cmh_str(&s, cmh_entry_compile_context(&s, &s.entries[0])), "N/A");
    CU_ASSERT(cmh_entry_time(&s, &s.entries[0]) > 1600000000000000000ll && cmh_entry_time(&s, &s.entries[0]) % 1000 == 0);
    /* Windows paths survive */
    int win = 0;
    for (uint32_t i = 0; i < s.nframes; i++) win |= strchr(cmh_str(&s, s.frames[i].filename), '\\') != NULL;
    CU_ASSERT(win);
    cmh_snapshot_free(&s);

    CU_ASSERT_EQUAL_FATAL(load_fixture("memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle", &s), CMH_OK);
    int expandable = 0, nonzero_stream = 0;
    for (uint32_t i = 0; i < s.nsegments; i++) {
        expandable += (s.segments[i].flags & CMH_SEG_EXPANDABLE) != 0;
        nonzero_stream += s.segments[i].stream != 0;
    }
    CU_ASSERT(expandable > 0);
    CU_ASSERT(nonzero_stream > 0);
    cmh_snapshot_free(&s);

    CU_ASSERT_EQUAL_FATAL(load_fixture("flexgen_torch20_oom_observer_block_history.pickle", &s), CMH_OK);
    CU_ASSERT(s.pt_fields & CMH_PT_LEGACY_HISTORY);
    int with_stack = 0;
    for (uint32_t i = 0; i < s.nblocks; i++) with_stack += s.blocks[i].stack != 0;
    CU_ASSERT(with_stack > 0); /* frames recovered from the legacy per-block history */
    cmh_snapshot_free(&s);

    CU_ASSERT_EQUAL_FATAL(load_fixture("transformer_nuggets_mini_snapshot.pickle", &s), CMH_OK);
    const char *mss = NULL;
    for (uint32_t i = 0; i < s.nsettings; i++)
        if (!strcmp(cmh_str(&s, s.settings[i].key), "max_split_size")) mss = cmh_str(&s, s.settings[i].value);
    CU_ASSERT_PTR_NOT_NULL(mss);
    cmh_snapshot_free(&s);
}

static int write_mem(const cmh_snapshot *s, char **buf, size_t *len)
{
    FILE *fp = open_memstream(buf, len);
    int rc = cmh_pickle_write(s, fp);
    fclose(fp);
    return rc;
}

static int same_stack(const cmh_snapshot *a, uint32_t sa, const cmh_snapshot *b, uint32_t sb)
{
    if (a->stacks[sa].count != b->stacks[sb].count) return 0;
    for (uint32_t i = 0; i < a->stacks[sa].count; i++) {
        const cmh_frame *x = &a->frames[a->stack_frames[a->stacks[sa].first + i]];
        const cmh_frame *y = &b->frames[b->stack_frames[b->stacks[sb].first + i]];
        if (strcmp(cmh_str(a, x->name), cmh_str(b, y->name)) || strcmp(cmh_str(a, x->filename), cmh_str(b, y->filename)) ||
            x->line != y->line)
            return 0;
    }
    return 1;
}

/* pickle -> model -> pickle -> model keeps every field of the snapshot schema (docs/PYTORCH.md) */
static void test_round_trip_lossless(void)
{
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        cmh_snapshot a, b;
        CU_ASSERT_EQUAL_FATAL(load_fixture(fixtures[f].file, &a), CMH_OK);
        char *buf;
        size_t len;
        CU_ASSERT_EQUAL_FATAL(write_mem(&a, &buf, &len), CMH_OK);
        char err[256];
        int rc = cmh_pickle_read(buf, len, &b, err, sizeof err);
        if (rc) fprintf(stderr, "%s: %s\n", fixtures[f].file, err);
        CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
        int bad = 0;
        /* a legacy (<= 2.0) block history is written back in the 2.1 form, and as it was (its
         * 'history' kept with PyTorch's other keys: cmh_extra) */
        bad |= a.nsegments != b.nsegments || a.nblocks != b.nblocks || a.nentries != b.nentries ||
               a.nannotations != b.nannotations || a.nsettings != b.nsettings || a.pt_fields != b.pt_fields;
        for (uint32_t i = 0; !bad && i < a.nsegments; i++) {
            const cmh_segment *x = &a.segments[i], *y = &b.segments[i];
            bad |= x->device != y->device || x->addr != y->addr || x->size != y->size || x->stream != y->stream ||
                   x->pool != y->pool || x->flags != y->flags || x->pool_id[0] != y->pool_id[0] ||
                   x->pool_id[1] != y->pool_id[1] || !same_stack(&a, x->stack, &b, y->stack) || x->nblocks != y->nblocks;
        }
        for (uint32_t i = 0; !bad && i < a.nblocks; i++) {
            const cmh_block *x = &a.blocks[i], *y = &b.blocks[i];
            bad |= x->addr != y->addr || x->size != y->size || x->requested != y->requested || x->state != y->state ||
                   (x->state != CMH_BLOCK_INACTIVE && !same_stack(&a, x->stack, &b, y->stack));
        }
        for (uint32_t t = 0; !bad && t < a.ntraces; t++)
            bad |= a.traces[t].device != b.traces[t].device || a.traces[t].nentries != b.traces[t].nentries;
        for (uint32_t i = 0; !bad && i < a.nentries; i++) {
            const cmh_entry *x = &a.entries[i], *y = &b.entries[i];
            bad |= x->action != y->action || cmh_entry_addr(&a, x) != cmh_entry_addr(&b, y) || cmh_entry_size(&a, x) != cmh_entry_size(&b, y) || cmh_entry_stream(&a, x) != cmh_entry_stream(&b, y) ||
                   cmh_entry_time(&a, x) != cmh_entry_time(&b, y) || strcmp(cmh_str(&a, cmh_entry_compile_context(&a, x)), cmh_str(&b, cmh_entry_compile_context(&b, y))) ||
                   strcmp(cmh_str(&a, cmh_entry_user_metadata(&a, x)), cmh_str(&b, cmh_entry_user_metadata(&b, y))) ||
                   !same_stack(&a, x->stack, &b, y->stack);
        }
        for (uint32_t i = 0; !bad && i < a.nannotations; i++)
            bad |= strcmp(cmh_str(&a, a.annotations[i].name), cmh_str(&b, b.annotations[i].name)) ||
                   a.annotations[i].stage != b.annotations[i].stage || a.annotations[i].time_ns != b.annotations[i].time_ns ||
                   a.annotations[i].device != b.annotations[i].device;
        for (uint32_t i = 0; !bad && i < a.nsettings; i++)
            bad |= strcmp(cmh_str(&a, a.settings[i].key), cmh_str(&b, b.settings[i].key)) ||
                   strcmp(cmh_str(&a, a.settings[i].value), cmh_str(&b, b.settings[i].value)) ||
                   a.settings[i].type != b.settings[i].type;
        CU_ASSERT_FALSE(bad);
        if (bad) fprintf(stderr, "round trip differs: %s\n", fixtures[f].file);
        /* and writing it again gives the same bytes */
        char *buf2;
        size_t len2;
        write_mem(&b, &buf2, &len2);
        CU_ASSERT(len == len2 && !memcmp(buf, buf2, len));
        free(buf);
        free(buf2);
        cmh_snapshot_free(&a);
        cmh_snapshot_free(&b);
    }
}

/* .cmh -> model -> memory_viz pickle -> model keeps every figure the analyzer computes */
static void test_recorder_export_keeps_figures(void)
{
    static const char *const files[] = {"cudart.cmh", "leaky.cmh", "torch_plain.cmh", "torch_exp.cmh"};
    for (size_t f = 0; f < 4; f++) {
        char path[512], err[512];
        snprintf(path, sizeof path, "%s/h200/%s", CMH_FIXTURES, files[f]);
        cmh_snapshot a, b;
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_load(path, &a, err, sizeof err), CMH_OK);
        char *buf;
        size_t len;
        FILE *fp = open_memstream(&buf, &len);
        CU_ASSERT_EQUAL(cmh_export_memviz(&a, fp, NULL), CMH_OK);
        fclose(fp);
        CU_ASSERT_EQUAL_FATAL(cmh_pickle_read(buf, len, &b, err, sizeof err), CMH_OK);
        CU_ASSERT_EQUAL(b.source, CMH_SRC_RECORDER);
        CU_ASSERT_EQUAL(b.pid, a.pid);
        CU_ASSERT_EQUAL(b.nentries, a.nentries);
        CU_ASSERT_EQUAL(b.nsegments, a.nsegments);
        cmh_mem_stats sa, sb;
        cmh_summary_compute(&a, 0, &sa);
        cmh_summary_compute(&b, 0, &sb);
        CU_ASSERT_EQUAL(memcmp(&sa, &sb, sizeof sa), 0);
        for (uint32_t i = 0; i < a.nentries && i < b.nentries; i++) {
            CU_ASSERT_EQUAL(a.entries[i].kind, b.entries[i].kind);
            CU_ASSERT_EQUAL(a.entries[i].flags, b.entries[i].flags);
            CU_ASSERT_EQUAL(cmh_entry_requested(&a, &a.entries[i]), cmh_entry_requested(&b, &b.entries[i]));
            /* what leaks judges and names from: the recording thread, the frames' modules */
            CU_ASSERT_EQUAL(cmh_entry_thread(&a, &a.entries[i]), cmh_entry_thread(&b, &b.entries[i]));
            const cmh_stack *sa = &a.stacks[a.entries[i].stack], *sb = &b.stacks[b.entries[i].stack];
            CU_ASSERT_EQUAL_FATAL(sa->count, sb->count);
            for (uint32_t k = 0; k < sa->count; k++)
                CU_ASSERT_STRING_EQUAL(cmh_frame_module(&a, &a.frames[a.stack_frames[sa->first + k]]),
                                       cmh_frame_module(&b, &b.frames[b.stack_frames[sb->first + k]]));
        }
        free(buf);
        cmh_snapshot_free(&a);
        cmh_snapshot_free(&b);
    }
}

/* ---- hostile input ---- */

static int rd(const void *p, size_t n, char *err, size_t errlen)
{
    cmh_snapshot s;
    int rc = cmh_pickle_read(p, n, &s, err, errlen);
    if (rc == CMH_OK) cmh_snapshot_free(&s);
    return rc;
}

/* stream-ordered pool samples and marks have no PyTorch action: the export keeps them aside,
 * and reading puts each back at its place: first, between entries and last, on two devices,
 * beside one another; and every entry keeps its recording thread */
static void test_pool_samples_round_trip(void)
{
    cmh_snapshot a, b;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&a), CMH_OK);
    a.source = CMH_SRC_RECORDER;
    a.pt_fields = CMH_PT_FROM_RECORDER;
    a.pid = 42;
    uint32_t m1, m2;
    CU_ASSERT_EQUAL_FATAL(cmh_strtab_intern(&a.strings, "step 1", 6, &m1), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_strtab_intern(&a.strings, "step 2", 6, &m2), CMH_OK);
    const uint64_t A = 0x7f0000000000ull, B = A + (8 << 20), C = 0x7e0000000000ull, P = 0x5555aaaa0000ull;
    struct {
        int dev, newtrace;
        cmh_entry_full e;
    } seq[] = {
        {0, 1, {1000, P, 2 << 20, 0, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_POOL_SAMPLE, 0, CMH_KIND_ASYNC}},
        {0, 0, {1500, 0, 0, 0, 0, {0, 0}, 0, m1, 0, 0, 2, CMH_ACT_MARK, 0, 0}},
        {0, 0, {2000, A, 1 << 20, 1 << 20, 0, {0, 0}, 0, 0, 0, 0, 1, CMH_ACT_SEGMENT_ALLOC, CMH_EF_WHOLE_BLOCK, CMH_KIND_ASYNC}},
        {0, 0, {3000, P, 2 << 20, 1 << 20, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_POOL_SAMPLE, 0, CMH_KIND_ASYNC}},
        {0, 0, {3500, 0, 0, 0, 0, {0, 0}, 0, m2, 0, 0, 2, CMH_ACT_MARK, 0, 0}},
        {0, 0, {4000, A, 1 << 20, 1 << 20, 0, {0, 0}, 0, 0, 0, 0, 3, CMH_ACT_SEGMENT_FREE, CMH_EF_WHOLE_BLOCK, CMH_KIND_ASYNC}},
        {0, 0, {5000, P, 2 << 20, 0, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_POOL_SAMPLE, 0, CMH_KIND_ASYNC}},
        {0, 0, {6000, P, 4 << 20, 0, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_POOL_SAMPLE, 0, CMH_KIND_ASYNC}},
        {0, 0, {7000, B, 2 << 20, 2 << 20, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_SEGMENT_ALLOC, CMH_EF_WHOLE_BLOCK, CMH_KIND_ASYNC}},
        {0, 0, {8000, P, 4 << 20, 2 << 20, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_POOL_SAMPLE, 0, CMH_KIND_ASYNC}},
        {1, 1, {9000, C, 3 << 20, 3 << 20, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_SEGMENT_ALLOC, CMH_EF_WHOLE_BLOCK, CMH_KIND_DEVICE}},
        {1, 0, {9500, P + 1, 6 << 20, 3 << 20, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_POOL_SAMPLE, 0, CMH_KIND_ASYNC}},
    };
    const size_t n = sizeof seq / sizeof *seq;
    for (size_t i = 0; i < n; i++) {
        if (seq[i].newtrace) CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&a, seq[i].dev, 0, NULL), CMH_OK);
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&a, &seq[i].e), CMH_OK);
    }
    cmh_segment gb = {0, CMH_KIND_ASYNC, CMH_SEG_WHOLE_BLOCK, CMH_POOL_LARGE, B, 2 << 20, 0, {0, 0}, 0, 7000, 0, 0};
    cmh_segment gc = {1, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_LARGE, C, 3 << 20, 0, {0, 0}, 0, 9000, 0, 0};
    cmh_block bb = {B, 2 << 20, 2 << 20, 0, CMH_BLOCK_ACTIVE_ALLOCATED, 7000};
    cmh_block bc = {C, 3 << 20, 3 << 20, 0, CMH_BLOCK_ACTIVE_ALLOCATED, 9000};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_segment(&a, &gb, NULL), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_block(&a, &bb), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_segment(&a, &gc, NULL), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_block(&a, &bc), CMH_OK);

    char *buf, err[512];
    size_t len;
    FILE *fp = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL(cmh_export_memviz(&a, fp, NULL), CMH_OK);
    fclose(fp);
    CU_ASSERT_EQUAL_FATAL(cmh_pickle_read(buf, len, &b, err, sizeof err), CMH_OK);
    /* per device, the same sequence of (action, addr, size, requested) */
    for (int d = 0; d < 2; d++) {
        size_t want = 0, got = 0;
        for (size_t i = 0; i < n; i++) want += seq[i].dev == d;
        for (uint32_t t = 0; t < b.ntraces; t++) {
            if (b.traces[t].device != d) continue;
            for (uint32_t i = 0; i < b.traces[t].nentries; i++, got++) {
                const cmh_entry *e = &b.entries[b.traces[t].first_entry + i];
                size_t k = 0, seen = 0;
                while (k < n && !(seq[k].dev == d && seen++ == got)) k++;
                CU_ASSERT_FATAL(k < n);
                CU_ASSERT_EQUAL(e->action, seq[k].e.action);
                CU_ASSERT_EQUAL(cmh_entry_addr(&b, e), seq[k].e.addr);
                CU_ASSERT_EQUAL(cmh_entry_size(&b, e), seq[k].e.size);
                CU_ASSERT_EQUAL(cmh_entry_requested(&b, e), seq[k].e.requested);
                CU_ASSERT_EQUAL(cmh_entry_time(&b, e), seq[k].e.time_ns / 1000 * 1000);
                CU_ASSERT_EQUAL(cmh_entry_thread(&b, e), seq[k].e.thread);
                CU_ASSERT_STRING_EQUAL(cmh_str(&b, cmh_entry_name(&b, e)), cmh_str(&a, seq[k].e.name));
            }
        }
        CU_ASSERT_EQUAL(got, want);
    }
    for (int d = 0; d < 2; d++) {
        cmh_mem_stats sa, sb;
        CU_ASSERT_EQUAL(cmh_summary_compute(&a, d, &sa), CMH_OK);
        CU_ASSERT_EQUAL(cmh_summary_compute(&b, d, &sb), CMH_OK);
        CU_ASSERT_EQUAL(memcmp(&sa, &sb, sizeof sa), 0);
        CU_ASSERT_EQUAL(sb.reserved_bytes[CMH_POOL_ALL].current, d ? (6 << 20) : (4 << 20));
    }
    CU_ASSERT_EQUAL(b.nannotations, 0); /* the marks' START/END pairs for memory_viz went with them */
    free(buf);
    cmh_snapshot_free(&a);
    cmh_snapshot_free(&b);

    /* a malformed sample is refused, not guessed at */
    static const unsigned char bad_sample[] = {
        0x80, 0x04, 0x7d, 0x28, 0x8c, 0x08, 's', 'e', 'g', 'm', 'e', 'n', 't', 's', 0x5d, 0x8c, 0x0d, 'd', 'e', 'v', 'i',
        'c', 'e', '_', 't', 'r', 'a', 'c', 'e', 's', 0x5d, 0x5d, 0x61, 0x8c, 0x09, 'c', 'u', 'm', 'e', 'm', 'h', 'i',
        's', 't', 0x7d, 0x28, 0x8c, 0x0c, 'p', 'o', 'o', 'l', '_', 's', 'a', 'm', 'p', 'l', 'e', 's', 0x5d, 0x28, 0x4b,
        0x00, 0x4b, 0x01, 0x74, 0x61, 0x75, 0x75, 0x2e};
    CU_ASSERT_EQUAL(rd(bad_sample, sizeof bad_sample, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "pool_samples[0]"));
}

/* {'segments': [], 'device_traces': [[]]} the smallest file (35 bytes) */
static const unsigned char minimal[] = {0x80, 0x04, 0x7d, 0x28, 0x8c, 0x08, 's', 'e', 'g', 'm', 'e', 'n', 't', 's', 0x5d,
                                        0x8c, 0x0d, 'd', 'e', 'v', 'i', 'c', 'e', '_', 't', 'r', 'a', 'c', 'e', 's',
                                        0x5d, 0x5d, 0x61, 0x75, 0x2e};

static void test_minimal_and_truncated(void)
{
    char err[256];
    CU_ASSERT_EQUAL(sizeof minimal, 35);
    cmh_snapshot s;
    CU_ASSERT_EQUAL_FATAL(cmh_pickle_read(minimal, sizeof minimal, &s, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(s.ntraces, 1);
    CU_ASSERT_EQUAL(s.nsegments, 0);
    cmh_snapshot_free(&s);
    for (size_t n = 0; n < sizeof minimal; n++) {
        CU_ASSERT_EQUAL(rd(minimal, n, err, sizeof err), CMH_EFORMAT);
        CU_ASSERT(strstr(err, "byte") != NULL);
    }
    CU_ASSERT_EQUAL(rd(minimal, 20, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT_STRING_EQUAL(err, "truncated at byte 20 (expected 10 more bytes)");
    /* every prefix of a real PyTorch snapshot fails cleanly too (sampled) */
    char path[512];
    snprintf(path, sizeof path, "%s/h200/torch_exp.pickle", CMH_FIXTURES);
    FILE *fp = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    static unsigned char big[1 << 20];
    size_t len = fread(big, 1, sizeof big, fp);
    fclose(fp);
    for (size_t n = 0; n < len; n += 997) CU_ASSERT_EQUAL(rd(big, n, err, sizeof err), CMH_EFORMAT);
}

static void test_wrong_protocol_and_code(void)
{
    char err[1024];
    const unsigned char p6[] = {0x80, 0x06, 0x7d, 0x2e};
    CU_ASSERT_EQUAL(rd(p6, sizeof p6, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT_STRING_EQUAL(err, "unsupported pickle protocol 6 at byte 0 (PyTorch writes 2 to 5)");
    /* os.system('x') through GLOBAL + REDUCE: refused at the GLOBAL, never run */
    const char evil[] = "\x80\x02" "cos\nsystem\n" "(X\x01\x00\x00\x00xtR.";
    CU_ASSERT_EQUAL(rd(evil, sizeof evil - 1, err, sizeof err), CMH_EFORMAT);
    /* what the file holds (the reference, by name) and what a snapshot may hold */
    CU_ASSERT_STRING_EQUAL(err, "it holds a Python object, os.system (pickle opcode 0x63 GLOBAL at byte 2; never imported nor run): "
                                "a memory snapshot (torch.cuda.memory._dump_snapshot()) holds only dicts, lists, tuples, strings, "
                                "numbers, booleans and None, the opcodes PyTorch's memory_viz reader accepts");
    const unsigned char reduce[] = {0x80, 0x04, 0x4e, 0x29, 'R', '.'};
    CU_ASSERT_EQUAL(rd(reduce, sizeof reduce, err, sizeof err), CMH_EFORMAT);
    static const char red[] = "it builds a Python object (pickle opcode 0x52 REDUCE at byte 4; never run): a memory snapshot";
    CU_ASSERT(!strncmp(err, red, sizeof red - 1));
    const unsigned char sg[] = {0x80, 0x04, 0x93, '.'};
    CU_ASSERT_EQUAL(rd(sg, sizeof sg, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "a class or function reference (pickle opcode 0x93 STACK_GLOBAL at byte 2") != NULL);
    /* protocol 4's class reference (collections.OrderedDict in a dict): named from its two strings */
    const char sg2[] = "\x80\x04}\x8c\x0b" "collections" "\x8c\x0b" "OrderedDict" "\x93)R.";
    CU_ASSERT_EQUAL(rd(sg2, sizeof sg2 - 1, err, sizeof err), CMH_EFORMAT);
    static const char od[] = "it holds a Python object, collections.OrderedDict (pickle opcode 0x93 STACK_GLOBAL at byte 29;";
    CU_ASSERT(!strncmp(err, od, sizeof od - 1));
    /* a GLOBAL cut short: no name made up, the bytes past the end never read */
    const char cut[] = "\x80\x02" "cos\nsys";
    CU_ASSERT_EQUAL(rd(cut, sizeof cut - 1, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "a class or function reference (pickle opcode 0x63 GLOBAL at byte 2") != NULL);
    /* integers: 9-byte LONG1 of a uint64 is fine, 10 bytes of real width is not */
    const unsigned char big9[] = {0x80, 0x04, 0x8a, 0x09, 1, 2, 3, 4, 5, 6, 7, 0x80, 0x00, '.'};
    CU_ASSERT_EQUAL(rd(big9, sizeof big9, err, sizeof err), CMH_EFORMAT); /* an int is not a snapshot... */
    CU_ASSERT(strstr(err, "neither a dict nor a list") != NULL);          /* ...but it parsed */
    const unsigned char wide[] = {0x80, 0x04, 0x8a, 0x0a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, '.'};
    CU_ASSERT_EQUAL(rd(wide, sizeof wide, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT_STRING_EQUAL(err, "integer wider than 64 bits at byte 2");
    /* a string length far past the end */
    const unsigned char huge[] = {0x80, 0x04, 'X', 0xff, 0xff, 0xff, 0x7f, 'a', '.'};
    CU_ASSERT_EQUAL(rd(huge, sizeof huge, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strncmp(err, "truncated at byte 9", 19) == 0);
    /* memo use before set */
    const unsigned char memo[] = {0x80, 0x04, 'h', 0x05, '.'};
    CU_ASSERT_EQUAL(rd(memo, sizeof memo, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "memo index 5 used before it was set") != NULL);
}

static void test_cycles_and_bombs(void)
{
    char err[256];
    /* a list that contains itself, as segments */
    const unsigned char cyc[] = {0x80, 0x04, 0x7d, 0x94, 0x8c, 0x08, 's', 'e', 'g', 'm', 'e', 'n', 't', 's',
                                 0x5d, 0x94, 0x68, 0x01, 0x61, 0x73, '.'};
    CU_ASSERT_EQUAL(rd(cyc, sizeof cyc, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT_STRING_EQUAL(err, "a segment is not a dict (in the object at byte 14)"); /* the list */
    /* a dict that is its own 'segments' */
    const unsigned char self[] = {0x80, 0x04, 0x7d, 0x94, 0x8c, 0x08, 's', 'e', 'g', 'm', 'e', 'n', 't', 's',
                                  0x68, 0x00, 0x73, '.'};
    CU_ASSERT_EQUAL(rd(self, sizeof self, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT_STRING_EQUAL(err, "'segments' is not a list (in the object at byte 2)");

    /* billion laughs: one entry dict, shared 1000 times in a list, that list 1000 times in
     * device_traces -> a million entries from a few kilobytes: refused, not expanded */
    size_t cap = 1 << 16, n = 0;
    unsigned char *p = malloc(cap);
#define B(x) (p[n++] = (unsigned char)(x))
    B(0x80); B(0x04); B(0x7d); B(0x28);
    const char *k1 = "segments";
    B(0x8c); B(8); memcpy(p + n, k1, 8); n += 8; B(0x5d);
    const char *k2 = "device_traces";
    B(0x8c); B(13); memcpy(p + n, k2, 13); n += 13;
    B(0x5d); B(0x28); /* outer list, and the MARK of its APPENDS */
    B(0x5d); B(0x94); /* inner list, memo 0 */
    B(0x28);
    B(0x7d); B(0x94); /* entry dict, memo 1 */
    B(0x28); B(0x8c); B(6); memcpy(p + n, "action", 6); n += 6; B(0x8c); B(5); memcpy(p + n, "alloc", 5); n += 5;
    B(0x8c); B(4); memcpy(p + n, "addr", 4); n += 4; B(0x4b); B(1);
    B(0x8c); B(4); memcpy(p + n, "size", 4); n += 4; B(0x4b); B(2); B(0x75);
    for (int i = 0; i < 999; i++) { B(0x68); B(1); }
    B(0x65); /* APPENDS: inner has 1000 refs to one entry */
    for (int i = 0; i < 999; i++) { B(0x68); B(0); }
    B(0x65); /* outer has 1000 refs to inner */
    B(0x75); B(0x2e);
#undef B
    CU_ASSERT_EQUAL(rd(p, n, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "expands far beyond its size") != NULL);
    if (!strstr(err, "expands")) fprintf(stderr, "billion laughs: %s\n", err);
    free(p);

    /* a million nested lists: no recursion anywhere */
    size_t depth = 1000000;
    p = malloc(depth * 2 + 8);
    n = 0;
    p[n++] = 0x80;
    p[n++] = 0x04;
    for (size_t i = 0; i < depth; i++) p[n++] = 0x5d;
    for (size_t i = 1; i < depth; i++) p[n++] = 0x61;
    p[n++] = '.';
    CU_ASSERT_EQUAL(rd(p, n, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT_STRING_EQUAL(err, "a segment is not a dict (in the object at byte 2)");
    /* and a million open MARKs */
    n = 2;
    for (size_t i = 0; i < depth; i++) p[n++] = 0x28;
    p[n++] = '.';
    CU_ASSERT_EQUAL(rd(p, n, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "STOP with an open MARK") != NULL);
    free(p);
}

static void test_cpp_pickler_form(void)
{
    /* The TorchScript pickler: PROTO 2, BINUNICODE for every string, BINPUT memo, 8-byte LONG1,
     * one unbatched MARK ... APPENDS per list, SETITEMS dicts. */
    unsigned char p[512];
    size_t n = 0;
#define B(x) (p[n++] = (unsigned char)(x))
#define U(s)                                                                                                     \
    do {                                                                                                         \
        size_t l_ = strlen(s);                                                                                   \
        B('X'); B(l_); B(0); B(0); B(0);                                                                          \
        memcpy(p + n, s, l_);                                                                                    \
        n += l_;                                                                                                 \
    } while (0)
    B(0x80); B(2); B('}'); B('q'); B(0); B('(');
    U("segments"); B(']'); B('q'); B(1); B('(');
    B('}'); B('('); U("device"); B('K'); B(0); U("address"); B(0x8a); B(8);
    for (int i = 0; i < 8; i++) B(i == 5 ? 0x7f : 0);
    U("total_size"); B('J'); B(0); B(0); B(0x20); B(0); U("stream"); B('K'); B(0);
    U("blocks"); B(']'); B('('); B('}'); B('('); U("size"); B('J'); B(0); B(0); B(0x20); B(0);
    U("state"); U("active_allocated"); U("requested_size"); B('J'); B(0); B(0); B(0x20); B(0); B('u'); B('e');
    B('u'); B('e');
    U("device_traces"); B(']'); B('('); B(']'); B('e');
    B('u'); B('.');
#undef U
#undef B
    cmh_snapshot s;
    char err[256];
    int rc = cmh_pickle_read(p, n, &s, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
    CU_ASSERT_EQUAL(s.nsegments, 1);
    CU_ASSERT_EQUAL(s.segments[0].addr, 0x7f0000000000ull);
    CU_ASSERT_EQUAL(s.segments[0].size, 2u << 20);
    CU_ASSERT_EQUAL(s.nblocks, 1);
    CU_ASSERT_EQUAL(s.blocks[0].state, CMH_BLOCK_ACTIVE_ALLOCATED);
    cmh_snapshot_free(&s);
}

static uint32_t differs_from_generic(const void *p, size_t n);

/* Trace entries the opcode reader takes in one pass (keys by memo reference, values inline or by
 * reference: pickle_fast.c, entry_direct) against the generic machine (CMH_LOAD_GENERIC): every
 * integer form and width, signs, None and booleans, a duplicate key, and entries that leave that pass half-way (a memoized value, a FRAME hint, a memo slot
 * given another string) mixed in; an entry with a key the model keeps aside (cmh_extra: 'other',
 * 'name' on an alloc) is the machine's, its run read by the machine. */
static void test_direct_entries_as_generic(void)
{
    enum { CAP = 1 << 16, NENT = 600 };
    unsigned char *p = malloc(CAP);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t n = 0;
    uint32_t memo = 0;
#define B(x) (p[n++] = (unsigned char)(x))
#define S(str) /* a short string, memoized: its memo index is memo - 1 */                                  \
    do {                                                                                                   \
        size_t l_ = strlen(str);                                                                           \
        B(0x8c); B(l_);                                                                                    \
        memcpy(p + n, str, l_);                                                                            \
        n += l_;                                                                                           \
        B(0x94);                                                                                           \
        memo++;                                                                                            \
    } while (0)
#define REF(i) (B('j'), B((i) & 0xff), B((i) >> 8 & 0xff), B(0), B(0))
    B(0x80); B(4);
    B('}'); B(0x94); memo++;
    B('(');
    S("segments"); B(']'); B(0x94); memo++;
    S("device_traces"); B(']'); B(0x94); memo++; B('(');
    B(']'); B(0x94); memo++; /* device 0's trace */
    B('(');
    /* the first entry names the keys, the actions and a stack (entry() reads it: it memoizes) */
    B('}'); B('(');
    S("action"); uint32_t k_action = memo - 1;
    S("alloc"); uint32_t a_alloc = memo - 1;
    S("addr"); uint32_t k_addr = memo - 1; B('K'); B(1);
    S("size"); uint32_t k_size = memo - 1; B('K'); B(2);
    S("stream"); uint32_t k_stream = memo - 1; B('K'); B(0);
    S("time_us"); uint32_t k_time = memo - 1; B('K'); B(3);
    S("other"); uint32_t k_other = memo - 1; S("free_requested"); uint32_t a_freq = memo - 1;
    REF(k_other); S("segment_alloc"); uint32_t a_salloc = memo - 1;
    S("compile_context"); uint32_t k_cc = memo - 1; S("N/A");
    S("frames"); uint32_t k_frames = memo - 1;
    B(']'); B(0x94); uint32_t stack = memo++;
    B('}'); B('('); S("name"); uint32_t k_name = memo - 1; S("f"); S("filename"); S("x.py"); S("line"); B('K'); B(7); B('u'); B('a');
    B('u');
    /* ('other' is an extra, cmh_extra: the machine reads that entry's run, so it ends here) */
    B('e'); B('(');
    uint64_t x = 0x2545F4914F6CDD1Dull;
    const uint32_t keys[4] = {k_addr, k_size, k_stream, k_time}, acts[3] = {a_alloc, a_freq, a_salloc};
    for (int i = 1; i < NENT; i++) {
        B('}'); B('(');
        REF(k_action);
        REF(acts[i % 3]);
        for (int k = 0; k < 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            REF(keys[k]);
            switch (x % 9) {
            case 0: B('K'); B(x >> 8); break;
            case 1: B('M'); B(x >> 8); B(x >> 16); break;
            case 2: B('J'); B(x >> 8); B(x >> 16); B(x >> 24); B(x >> 32); break; /* either sign */
            case 3: B('N'); break;
            case 4: B(x & 1 << 9 ? 0x88 : 0x89); break;
            default: { /* LONG1 of 0..8 bytes, the top one's sign bit either way */
                int len = (int)((x >> 12) % 9);
                uint64_t y = x * 0x9E3779B97F4A7C15ull;
                B(0x8a); B(len);
                for (int b = 0; b < len; b++) B(y >> (8 * b));
            }
            }
            if (i % 97 == 0 && k == 1) { B(0x94); memo++; } /* a memoized value: entry() */
        }
        if (i % 5 == 0) { REF(k_size); B('K'); B(99); } /* a second 'size': the first counts */
        if (i == 301) { /* a value put into the memo slot of an action named before: it names another */
            REF(k_cc);
            B(0x8c); B(14);
            memcpy(p + n, "free_completed", 14);
            n += 14;
            B('r'); B(a_freq & 0xff); B(a_freq >> 8 & 0xff); B(0); B(0);
        }
        if (i % 2 == 0) { REF(k_frames); REF(stack); }
        B('u');
        if (i % 150 == 0) { B(0x95); for (int b = 0; b < 8; b++) B(b ? 0 : 1); } /* a FRAME hint */
        CU_ASSERT_FATAL(n < CAP - 256);
    }
    /* a run of its own: an entry with 'name' (read on an annotation
     * only, an extra here, which the machine keeps), then one the pass takes */
    B('e'); B('(');
    for (int i = 0; i < 2; i++) {
        B('}'); B('('); REF(k_action); REF(a_alloc); REF(k_addr); B('K'); B(1); REF(k_size); B('K'); B(2);
        if (!i) { REF(k_name); B('K'); B(9); }
        B('u');
    }
    B('e'); B('e'); B('u'); B('.');
#undef REF
#undef S
#undef B
    cmh_snapshot a, g;
    char err[256];
    int rc = cmh_pickle_read_ex(p, n, 0, &a, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_pickle_read_ex(p, n, CMH_LOAD_GENERIC, &g, err, sizeof err), CMH_OK);
    /* an entry whose size came out negative is skipped and counted, by either reader alike */
    CU_ASSERT_EQUAL(a.nentries + a.skipped_entries, NENT + 2);
    CU_ASSERT(a.skipped_entries > 0 && a.skipped_entries < NENT / 2);
    CU_ASSERT_EQUAL(a.skipped_entries, g.skipped_entries);
    CU_ASSERT_EQUAL_FATAL(a.nentries, g.nentries);
    int bad = 0;
    for (uint32_t i = 0; i < a.nentries; i++) {
        cmh_entry_full ef, ff, *e = &ef, *f = &ff;
        cmh_entry_get(&a, &a.entries[i], &ef);
        cmh_entry_get(&g, &g.entries[i], &ff);
        if (e->action != f->action || e->addr != f->addr || e->size != f->size || e->requested != f->requested ||
            e->stream != f->stream || e->time_ns != f->time_ns || e->flags != f->flags || e->kind != f->kind ||
            !same_stack(&a, e->stack, &g, f->stack)) {
            if (bad++ < 5)
                fprintf(stderr, "entry %u: %d %llx %llx %llx %lld, generic %d %llx %llx %llx %lld\n", i, e->action,
                        (unsigned long long)e->addr, (unsigned long long)e->size, (unsigned long long)e->stream,
                        (long long)e->time_ns, f->action, (unsigned long long)f->addr, (unsigned long long)f->size,
                        (unsigned long long)f->stream, (long long)f->time_ns);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(differs_from_generic(p, n), 0); /* their extras, and the pickle written back, too */
    /* acts[1]'s slot, renamed at entry 301: free_requested before, free_completed after (which
     * entries are kept depends on their sizes' signs, so counted rather than indexed) */
    uint32_t nreq = 0, ncomp = 0;
    for (uint32_t i = 0; i < a.nentries; i++) {
        uint8_t act = a.entries[i].action;
        nreq += act == CMH_ACT_FREE_REQUESTED, ncomp += act == CMH_ACT_FREE_COMPLETED;
    }
    CU_ASSERT(nreq > 50 && ncomp > 50);
    CU_ASSERT_EQUAL(a.pt_fields, g.pt_fields);
    cmh_snapshot_free(&a);
    cmh_snapshot_free(&g);
    free(p);
}

/* How the fast reader's model of pickle bytes differs from the generic machine's
 * (CMH_LOAD_GENERIC), as the fuzz target (tests/fuzz/fuzz_pickle.c) judges it: 0 the same
 * verdict and, when read, the same entries (extra keys included, cmh_extra) and the same pickle
 * written back; else the number of entries that differ, plus one for the verdict or the bytes. */
static uint32_t differs_from_generic(const void *p, size_t n)
{
    cmh_snapshot a, g;
    char ea[256], eg[256];
    int ra = cmh_pickle_read_ex(p, n, 0, &a, ea, sizeof ea), rg = cmh_pickle_read_ex(p, n, CMH_LOAD_GENERIC, &g, eg, sizeof eg);
    if (ra != rg || (ra != CMH_OK && strcmp(ea, eg))) {
        if (ra == CMH_OK) cmh_snapshot_free(&a);
        if (rg == CMH_OK) cmh_snapshot_free(&g);
        return 1;
    }
    if (ra != CMH_OK) return 0;
    uint32_t bad = a.nentries != g.nentries;
    for (uint32_t i = 0; i < a.nentries && i < g.nentries; i++) {
        cmh_entry_full x, y;
        cmh_entry_get(&a, &a.entries[i], &x);
        cmh_entry_get(&g, &g.entries[i], &y);
        uint32_t xa = cmh_entry_extra(&a, &a.entries[i]), xg = cmh_entry_extra(&g, &g.entries[i]);
        if (memcmp(&x, &y, sizeof x) || !xa != !xg || strcmp(cmh_str(&a, xa), cmh_str(&g, xg))) {
            if (bad++ < 3) fprintf(stderr, "entry %u: fast and generic readers differ (extra %u, %u)\n", i, xa, xg);
        }
    }
    char *pa, *pg;
    size_t na, ng;
    write_mem(&a, &pa, &na);
    write_mem(&g, &pg, &ng);
    bad += na != ng || memcmp(pa, pg, na);
    free(pa);
    free(pg);
    cmh_snapshot_free(&a);
    cmh_snapshot_free(&g);
    return bad;
}

/* An entry key PyTorch's schema does not have (torch_exp.pickle's memoized 'time_us' renamed
 * 'tim_eus', so every entry says it, each with its own time): both readers keep it on every
 * entry (cmh_extra) and write it back.  Each distinct time is a set of rarer fields of its own,
 * so the sets pass 255, the number an entry's xs says "far" with; the generic reader, copying its
 * entries into the model, took set number 255 itself for that mark and dropped the pair of
 * entries (318 and 319, a free_requested and its free_completed) that had it. */
static void test_unknown_entry_key_far_sets(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/h200/torch_exp.pickle", CMH_FIXTURES);
    FILE *fp = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    static char p[1 << 20];
    size_t n = fread(p, 1, sizeof p, fp);
    fclose(fp);
    uint32_t renamed = 0;
    for (size_t i = 0; i + 9 <= n; i++)
        if (!memcmp(p + i, "\x8c\x07time_us", 9)) memcpy(p + i + 2, "tim_eus", 7), renamed++;
    CU_ASSERT_EQUAL_FATAL(renamed, 1); /* memoized once: every entry names it by reference */
    CU_ASSERT_EQUAL(differs_from_generic(p, n), 0);
    /* and a string new to the model late in the trace (an entry's compile_context 'N/A' written
     * out again there, made 'n/A'), amid entries with extras: the generic machine interns the
     * strings of a run of entries (up to an APPENDS) before their extras, and the fast reader
     * interned each entry's extras as it went: the two numbered 'n/A' apart (entry 925) */
    char *na = NULL;
    for (size_t i = n / 2; i + 5 <= n && !na; i++)
        if (!memcmp(p + i, "\x8c\x03N/A", 5)) na = p + i + 2;
    CU_ASSERT_PTR_NOT_NULL_FATAL(na);
    *na = 'n';
    CU_ASSERT_EQUAL(differs_from_generic(p, n), 0);
    for (int generic = 0; generic < 2; generic++) {
        cmh_snapshot s;
        char err[256];
        CU_ASSERT_EQUAL_FATAL(cmh_pickle_read_ex(p, n, generic ? CMH_LOAD_GENERIC : 0, &s, err, sizeof err), CMH_OK);
        CU_ASSERT(s.nxsets > 256);
        uint32_t kept = 0;
        for (uint32_t i = 0; i < s.nentries; i++) kept += strstr(cmh_str(&s, cmh_entry_extra(&s, &s.entries[i])), "tim_eus") != NULL;
        CU_ASSERT_EQUAL(kept, s.nentries);
        char *w;
        size_t nw;
        CU_ASSERT_EQUAL_FATAL(write_mem(&s, &w, &nw), CMH_OK);
        uint32_t written = 0;
        for (size_t i = 0; i + 7 <= nw; i++) written += !memcmp(w + i, "tim_eus", 7);
        CU_ASSERT(written >= 1);
        free(w);
        cmh_snapshot_free(&s);
    }
}

/* inputs the fuzzer found (every file in tests/fixtures/fuzz): each must load or fail, and go
 * through every report, in time and with the replay's own checks (assertions) holding */
/* cmh_memviz_shape_move hands the loaded model over whole: the entries' sets of rarer fields go
 * with the entries (stream, thread and requested bytes read the same as from the shaped copy). */
static void test_shape_move_keeps_rare_fields(void)
{
    cmh_snapshot s, copy, moved;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&s), CMH_OK);
    cmh_segment g;
    memset(&g, 0, sizeof g);
    g.addr = 0x7f0000000000ull;
    g.size = 2 << 20;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_segment(&s, &g, NULL), CMH_OK);
    cmh_block b = {g.addr, g.size, g.size, 0, CMH_BLOCK_INACTIVE, 0};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_block(&s, &b), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&s, 0, 0, NULL), CMH_OK);
    for (uint32_t i = 0; i < 8; i++) {
        cmh_entry_full e;
        memset(&e, 0, sizeof e);
        e.time_ns = 1000000 * (int64_t)(i + 1);
        e.action = i % 2 ? CMH_ACT_FREE_COMPLETED : CMH_ACT_ALLOC;
        e.addr = g.addr + (i / 2) * 512;
        e.size = 512;
        e.requested = 500 - i / 2;
        e.stream = 7 + i / 4;
        e.thread = 1 + i % 3;
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
    }
    CU_ASSERT_EQUAL_FATAL(cmh_memviz_shape(&s, &copy, NULL), CMH_OK);
    int was_moved = 0;
    CU_ASSERT_EQUAL_FATAL(cmh_memviz_shape_move(&s, &moved, &was_moved), CMH_OK);
    CU_ASSERT_FATAL(was_moved);
    CU_ASSERT_EQUAL_FATAL(moved.nentries, copy.nentries);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < moved.nentries; i++) {
        cmh_entry_full x, y;
        cmh_entry_get(&copy, &copy.entries[i], &x);
        cmh_entry_get(&moved, &moved.entries[i], &y);
        bad += x.requested != y.requested || x.stream != y.stream || x.thread != y.thread || x.addr != y.addr || x.action != y.action;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(cmh_entry_stream(&moved, &moved.entries[0]), 7);
    CU_ASSERT_EQUAL(cmh_entry_requested(&moved, &moved.entries[0]), 500);
    cmh_snapshot_free(&moved);
    cmh_snapshot_free(&copy);
    cmh_snapshot_free(&s);
}

static void test_fuzz_regressions(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fuzz", CMH_FIXTURES);
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int files = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        files++;
        cmh_snapshot s;
        size_t nl = strlen(de->d_name);
        if (nl > 7 && !strcmp(de->d_name + nl - 7, ".flight")) { /* a flight record: through recover's reader */
            cmh_recover_info info;
            if (cmh_flight_recover(path, &s, &info, err, sizeof err) != CMH_OK) continue;
        } else {
            if (nl > 7 && !strcmp(de->d_name + nl - 7, ".pickle")) { /* the fuzz target's own check */
                FILE *fp = fopen(path, "rb");
                CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
                static char p[1 << 20];
                size_t n = fread(p, 1, sizeof p, fp);
                fclose(fp);
                uint32_t bad = differs_from_generic(p, n);
                if (bad) fprintf(stderr, "%s: the fast and generic readers differ\n", de->d_name);
                CU_ASSERT_EQUAL(bad, 0);
            }
            if (cmh_snapshot_load(path, &s, err, sizeof err) != CMH_OK) continue;
        }
        int32_t devs[8];
        int nd = cmh_snapshot_devices(&s, devs, 8);
        for (int k = 0; k < nd && k < 8; k++) {
            cmh_mem_stats st;
            cmh_peak_report pk;
            cmh_leak_report lk;
            cmh_frag_report fr;
            cmh_oom_report om;
            CU_ASSERT_EQUAL(cmh_summary_compute(&s, devs[k], &st), CMH_OK);
            CU_ASSERT_EQUAL(cmh_peak_compute(&s, devs[k], NULL, &pk), CMH_OK);
            CU_ASSERT_EQUAL(cmh_leaks_compute(&s, devs[k], NULL, 0, &lk), CMH_OK);
            CU_ASSERT_EQUAL(cmh_frag_compute(&s, devs[k], &fr), CMH_OK);
            CU_ASSERT_EQUAL(cmh_oom_compute(&s, devs[k], NULL, &om), CMH_OK);
            /* and the what-if model, as the fuzz targets run it (its leaks: LeakSanitizer's) */
            cmh_whatif_conf c;
            cmh_whatif_result wr;
            cmh_whatif_conf_recorded(&s, &c);
            cmh_whatif_run(&s, devs[k], &c, 64ull << 20, 1, &wr);
            cmh_peak_report_free(&pk);
            cmh_leak_report_free(&lk);
            cmh_frag_report_free(&fr);
            cmh_oom_report_free(&om);
        }
        cmh_snapshot_free(&s);
    }
    closedir(d);
    CU_ASSERT(files >= 4);
}

/* Newer PyTorch's per-entry 'pool_id' (PR #177717): pickle -> model -> .cmh -> model -> pickle
 * keeps each entry's pool, (0, 0) included, and the pickle says it on every entry; the opcode
 * reader and the generic machine read the same pools. */
static int has_bytes(const char *p, size_t n, const char *what)
{
    size_t k = strlen(what);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(p + i, what, k)) return 1;
    return 0;
}

static void test_entry_pool_ids_round_trip(void)
{
    static const uint64_t pools[][2] = {{0, 0}, {1, 0}, {0, 5}, {1, 0}, {(uint64_t)1 << 40, 3}};
    cmh_snapshot a, b, c, g;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&a), CMH_OK);
    a.source = CMH_SRC_PYTORCH;
    a.pt_fields = CMH_PT_TIME_US | CMH_PT_POOL_ID;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&a, 0, 0, NULL), CMH_OK);
    for (uint32_t i = 0; i < 5; i++) {
        cmh_entry_full e = {.time_ns = 1000000 * (i + 1), .addr = 0x7f0000000000ull + (i << 20), .size = 1 << 20,
                            .requested = 1 << 20, .pool_id = {pools[i][0], pools[i][1]}, .action = CMH_ACT_ALLOC};
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&a, &e), CMH_OK);
    }
    CU_ASSERT_EQUAL(a.npool_ids, 4); /* (0, 0) and three others, each once */
    char *p1, *p2, *cm;
    size_t n1, n2, ncm;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&a, &p1, &n1), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_pickle_read(p1, n1, &b, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_pickle_read_ex(p1, n1, CMH_LOAD_GENERIC, &g, err, sizeof err), CMH_OK);
    CU_ASSERT(b.pt_fields & CMH_PT_POOL_ID);
    FILE *fp = open_memstream(&cm, &ncm);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_write(&b, fp), CMH_OK);
    fclose(fp);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(cm, ncm, &c, err, sizeof err), CMH_OK);
    CU_ASSERT(c.pt_fields & CMH_PT_POOL_ID);
    CU_ASSERT_EQUAL_FATAL(c.nentries, 5);
    CU_ASSERT_EQUAL_FATAL(g.nentries, 5);
    for (uint32_t i = 0; i < 5; i++) {
        cmh_pool_id x = cmh_entry_pool_id(&b, &b.entries[i]), y = cmh_entry_pool_id(&c, &c.entries[i]);
        cmh_pool_id z = cmh_entry_pool_id(&g, &g.entries[i]);
        CU_ASSERT(x.id[0] == pools[i][0] && x.id[1] == pools[i][1]);
        CU_ASSERT(y.id[0] == pools[i][0] && y.id[1] == pools[i][1]);
        CU_ASSERT(z.id[0] == pools[i][0] && z.id[1] == pools[i][1]);
    }
    /* a .cmh does not say which of PyTorch's optional keys the pickle had (time_us here): only
     * whether its entries said their pool */
    CU_ASSERT_EQUAL(c.pt_fields, CMH_PT_POOL_ID);
    c.pt_fields = b.pt_fields;
    CU_ASSERT_EQUAL_FATAL(write_mem(&c, &p2, &n2), CMH_OK);
    CU_ASSERT(n1 == n2 && !memcmp(p1, p2, n1)); /* the same pickle, 'pool_id' on every entry */
    CU_ASSERT(has_bytes(p1, n1, "pool_id"));
    /* a snapshot none of whose entries said a pool writes none */
    cmh_snapshot_free(&a);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&a), CMH_OK);
    a.source = CMH_SRC_PYTORCH;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&a, 0, 0, NULL), CMH_OK);
    cmh_entry_full e = {.addr = 0x1000, .size = 512, .requested = 512, .action = CMH_ACT_ALLOC};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&a, &e), CMH_OK);
    free(p2);
    CU_ASSERT_EQUAL_FATAL(write_mem(&a, &p2, &n2), CMH_OK);
    CU_ASSERT(!has_bytes(p2, n2, "pool_id"));
    free(p1), free(p2), free(cm);
    cmh_snapshot_free(&a), cmh_snapshot_free(&b), cmh_snapshot_free(&c), cmh_snapshot_free(&g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("pickle", NULL, NULL);
    /* PyTorch's snapshots in ../shared, when they sit beside the checkout (CMakeLists.txt) */
    if (CMH_PYTORCH_FIXTURES[0] && access(CMH_PYTORCH_FIXTURES, R_OK) == 0) {
        CMH_ADD_TEST(s, test_fixture_counts);
        CMH_ADD_TEST(s, test_fixture_details);
        CMH_ADD_TEST(s, test_round_trip_lossless);
    } else {
        fprintf(stderr, "skipped: the tests on ../shared/fixtures/pytorch (not beside the checkout)\n");
    }
    CMH_ADD_TEST(s, test_recorder_export_keeps_figures);
    CMH_ADD_TEST(s, test_minimal_and_truncated);
    CMH_ADD_TEST(s, test_wrong_protocol_and_code);
    CMH_ADD_TEST(s, test_cycles_and_bombs);
    CMH_ADD_TEST(s, test_cpp_pickler_form);
    CMH_ADD_TEST(s, test_direct_entries_as_generic);
    CMH_ADD_TEST(s, test_fuzz_regressions);
    CMH_ADD_TEST(s, test_unknown_entry_key_far_sets);
    CMH_ADD_TEST(s, test_pool_samples_round_trip);
    CMH_ADD_TEST(s, test_shape_move_keeps_rare_fields);
    CMH_ADD_TEST(s, test_entry_pool_ids_round_trip);
    return cmh_test_main();
}
