/*
 * test_snapshot.c - the model and the .cmh codec: interning, a full round trip with every
 * field, and the reader's errors on truncated, garbage and hostile input; the checksum the
 * files end with (crc32c.c: the published check values, the instruction and the tables agree).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "cumemhist/snapshot.h"
#include "testutil.h"

static void build(cmh_snapshot *s)
{
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(s), CMH_OK);
    s->pid = 4242;
    s->start_time_ns = 1700000000000000000ll;
    s->dump_time_ns = 1700000000123456789ll;
    s->opt_enabled = CMH_ENABLED_ALL;
    s->opt_context = CMH_CONTEXT_ALLOC;
    s->opt_max_entries = 1000;
    s->opt_max_frames = 16;
    s->lost_events = 3;
    cmh_strtab_intern(&s->strings, "host", 4, &s->hostname);
    cmh_strtab_intern(&s->strings, "python train.py", 15, &s->cmdline);
    cmh_module m = {0, 0, 0x400000, 0x1000};
    cmh_strtab_intern(&s->strings, "/usr/bin/prog", 13, &m.path);
    cmh_strtab_intern(&s->strings, "abcdef", 6, &m.build_id);
    cmh_snapshot_add_module(s, &m);
    uint32_t f[3], st1, st2;
    for (int i = 0; i < 3; i++) {
        cmh_frame fr = {0x400100u + (uint64_t)i * 16, 0, 0, i * 10, i == 2 ? -1 : 0};
        char name[16];
        snprintf(name, sizeof name, "fn%d", i);
        cmh_strtab_intern(&s->strings, name, strlen(name), &fr.name);
        cmh_strtab_intern(&s->strings, "prog.c", 6, &fr.filename);
        cmh_snapshot_add_frame(s, &fr, &f[i]);
    }
    cmh_snapshot_add_stack(s, f, 3, &st1);
    cmh_snapshot_add_stack(s, f + 1, 2, &st2);
    cmh_segment g = {0, CMH_KIND_DEVICE, CMH_SEG_WHOLE_BLOCK, CMH_POOL_LARGE, 0x7f0000000000ull, 4 << 20, 7, {0, 0}, st1, 1700000000000001000ll, 0, 0};
    cmh_snapshot_add_segment(s, &g, NULL);
    cmh_block b = {0x7f0000000000ull, 1 << 20, 1000000, st1, CMH_BLOCK_ACTIVE_ALLOCATED, 1700000000000001000ll};
    cmh_snapshot_add_block(s, &b);
    cmh_block b2 = {0x7f0000100000ull, 3 << 20, 0, 0, CMH_BLOCK_INACTIVE, 0};
    cmh_snapshot_add_block(s, &b2);
    cmh_segment h = {-1, CMH_KIND_HOST, CMH_SEG_WHOLE_BLOCK, CMH_POOL_SMALL, 0x5000, 4096, 0, {1, 2}, 0, 5, 0, 0};
    cmh_snapshot_add_segment(s, &h, NULL);
    cmh_snapshot_add_trace(s, 0, 17, NULL);
    cmh_entry_full e1 = {1700000000000001000ll, 0x7f0000000000ull, 4 << 20, 4 << 20, 7, {0, 0}, st1, 0, 0, 0, 3, CMH_ACT_SEGMENT_ALLOC, CMH_EF_WHOLE_BLOCK, CMH_KIND_ASYNC};
    cmh_entry_full e2 = {1700000000000000500ll, 0x10, 2048, 1000, 0, {0, 0}, st2, 0, 0, 0, 3, CMH_ACT_ALLOC, 0, 0}; /* time going back, addr down */
    cmh_entry_full e3 = {1700000000000002000ll, 123456, 1 << 30, 1 << 30, 0, {0, 0}, 0, 0, 0, 0, 1, CMH_ACT_OOM, 0, 0};
    cmh_entry_full e4 = {1700000000000003000ll, 0, 0, 0, 0, {0, 0}, 0, 0, 0, 0, 0, CMH_ACT_MARK, 0, 0};
    cmh_strtab_intern(&s->strings, "step 1", 6, &e4.name);
    cmh_strtab_intern(&s->strings, "N/A", 3, &e4.compile_context);
    cmh_strtab_intern(&s->strings, "meta", 4, &e4.user_metadata);
    cmh_snapshot_add_entry(s, &e1);
    cmh_snapshot_add_entry(s, &e2);
    cmh_snapshot_add_entry(s, &e3);
    cmh_snapshot_add_entry(s, &e4);
    cmh_snapshot_add_trace(s, 1, 0, NULL);
    cmh_annotation a = {e4.name, 1, 0, 1700000000000003000ll};
    cmh_snapshot_add_annotation(s, &a);
    cmh_snapshot_add_setting(s, "max_split_size", "-1", 1);
}

/* field by field: struct padding is not part of the model */
static int eq_segment(const cmh_segment *a, const cmh_segment *b)
{
    return a->device == b->device && a->kind == b->kind && a->flags == b->flags && a->pool == b->pool &&
           a->addr == b->addr && a->size == b->size && a->stream == b->stream && a->pool_id[0] == b->pool_id[0] &&
           a->pool_id[1] == b->pool_id[1] && a->stack == b->stack && a->time_ns == b->time_ns &&
           a->first_block == b->first_block && a->nblocks == b->nblocks;
}

static int eq_block(const cmh_block *a, const cmh_block *b)
{
    return a->addr == b->addr && a->size == b->size && a->requested == b->requested && a->stack == b->stack &&
           a->state == b->state && a->time_ns == b->time_ns;
}

static int eq_entry(const cmh_snapshot *sa, const cmh_entry *ca, const cmh_snapshot *sb, const cmh_entry *cb)
{
    cmh_entry_full fa, fb, *a = &fa, *b = &fb;
    cmh_entry_get(sa, ca, a);
    cmh_entry_get(sb, cb, b);
    return a->time_ns == b->time_ns && a->addr == b->addr && a->size == b->size && a->requested == b->requested &&
           a->stream == b->stream && a->stack == b->stack && a->name == b->name &&
           a->compile_context == b->compile_context && a->user_metadata == b->user_metadata && a->thread == b->thread &&
           a->action == b->action && a->flags == b->flags && a->kind == b->kind;
}

static int write_mem(const cmh_snapshot *s, char **buf, size_t *len)
{
    FILE *fp = open_memstream(buf, len);
    if (!fp) return -1;
    int rc = cmh_cmh_write(s, fp);
    fclose(fp);
    return rc;
}

static void test_interning(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    uint32_t a, b, c, e;
    cmh_strtab_intern(&s.strings, "alpha", 5, &a);
    cmh_strtab_intern(&s.strings, "beta", 4, &b);
    cmh_strtab_intern(&s.strings, "alphabet", 5, &c); /* length-bounded: "alpha" again */
    cmh_strtab_intern(&s.strings, "", 0, &e);
    CU_ASSERT_EQUAL(a, c);
    CU_ASSERT_NOT_EQUAL(a, b);
    CU_ASSERT_EQUAL(e, 0);
    for (int i = 0; i < 5000; i++) { /* through several rehashes */
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        uint32_t id, id2;
        cmh_strtab_intern(&s.strings, k, strlen(k), &id);
        cmh_strtab_intern(&s.strings, k, strlen(k), &id2);
        CU_ASSERT_EQUAL(id, id2);
    }
    CU_ASSERT_EQUAL(s.strings.n, 5003);
    uint32_t fr[4] = {1, 2, 3, 4}, st[3];
    cmh_snapshot_add_stack(&s, fr, 4, &st[0]);
    cmh_snapshot_add_stack(&s, fr, 3, &st[1]);
    cmh_snapshot_add_stack(&s, fr, 4, &st[2]);
    CU_ASSERT_EQUAL(st[0], st[2]);
    CU_ASSERT_NOT_EQUAL(st[0], st[1]);
    CU_ASSERT_EQUAL(s.nstacks, 3);
    cmh_snapshot_free(&s);
}


/* The compact entry (snapshot.h): 16 bytes, its rarer fields one set per distinct combination.
 * 700 entries: defaults, a repeated set, and 600 sets of their own, so numbers past 254 go to
 * s->xmap; every field read back as added, through a .cmh round trip and a pickle one, and
 * cmh_entry_set moving entries into and out of the map. */
static cmh_entry_full compact_entry(uint32_t i)
{
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    e.time_ns = (1700000000000000ll + i) * 1000; /* whole microseconds: a pickle keeps those */
    e.addr = 0x7f0000000000ull + (uint64_t)i * 512;
    e.size = 512;
    e.requested = i % 3 ? 512 : 100 + i; /* a third with their own requested bytes */
    e.action = i % 2 ? CMH_ACT_FREE_COMPLETED : CMH_ACT_ALLOC;
    if (i % 7 == 0) e.stream = 7;            /* one shared set */
    if (i >= 100) e.stream = 1000 + i;        /* 600 sets of their own */
    e.thread = i % 5 == 0 ? 0 : 1 + i % 2;
    return e;
}

static int eq_full(const cmh_entry_full *a, const cmh_entry_full *b)
{
    return a->time_ns == b->time_ns && a->addr == b->addr && a->size == b->size && a->requested == b->requested &&
           a->stream == b->stream && a->stack == b->stack && a->name == b->name &&
           a->compile_context == b->compile_context && a->user_metadata == b->user_metadata && a->thread == b->thread &&
           a->action == b->action && a->flags == b->flags && a->kind == b->kind;
}

static uint32_t compact_mismatches(const cmh_snapshot *s, uint32_t n, int with_thread)
{
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n && i < s->nentries; i++) {
        cmh_entry_full want = compact_entry(i), got;
        if (!with_thread) want.thread = 0;
        cmh_entry_get(s, &s->entries[i], &got);
        bad += !eq_full(&want, &got) || cmh_entry_requested(s, &s->entries[i]) != want.requested ||
               cmh_entry_stream(s, &s->entries[i]) != want.stream;
    }
    return bad + (s->nentries != n);
}

static void test_compact_entries(void)
{
    CU_ASSERT_EQUAL(sizeof(cmh_entry), 16);
    enum { N = 700 };
    cmh_snapshot s, r;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&s), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&s, 0, 0, NULL), CMH_OK);
    for (uint32_t i = 0; i < N; i++) {
        cmh_entry_full e = compact_entry(i);
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
    }
    CU_ASSERT(s.nxmap > 300);              /* the far path is taken */
    CU_ASSERT(s.nxsets > 600 && s.nxsets < 700); /* sets shared where entries share them */
    CU_ASSERT_EQUAL(compact_mismatches(&s, N, 1), 0);
    /* through the .cmh codec */
    char *buf;
    size_t len;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(compact_mismatches(&r, N, 1), 0);
    free(buf);
    cmh_snapshot_free(&r);
    /* through the pickle codec (PyTorch's dict has no thread) */
    FILE *fp = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL_FATAL(cmh_pickle_write(&s, fp), CMH_OK);
    fclose(fp);
    CU_ASSERT_EQUAL_FATAL(cmh_pickle_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(compact_mismatches(&r, N, 0), 0);
    free(buf);
    cmh_snapshot_free(&r);
    /* rewritten in place: a far entry to defaults, a default one to a far set, and back */
    cmh_entry_full d, f = compact_entry(650), got;
    memset(&d, 0, sizeof d);
    d.action = CMH_ACT_MARK;
    uint32_t far_before = s.nxmap;
    CU_ASSERT_EQUAL(cmh_entry_set(&s, 650, &d), CMH_OK);
    CU_ASSERT_EQUAL(s.nxmap, far_before - 1);
    cmh_entry_get(&s, &s.entries[650], &got);
    CU_ASSERT(eq_full(&got, &d));
    f.stream = 5000000; /* a set no entry has yet */
    CU_ASSERT_EQUAL(cmh_entry_set(&s, 5, &f), CMH_OK);
    CU_ASSERT_EQUAL(s.nxmap, far_before);
    cmh_entry_get(&s, &s.entries[5], &got);
    CU_ASSERT(eq_full(&got, &f));
    for (uint32_t i = 1; i < s.nxmap; i++) CU_ASSERT(s.xmap[i - 1].entry < s.xmap[i].entry);
    cmh_entry_full e5 = compact_entry(5), e650 = compact_entry(650);
    CU_ASSERT_EQUAL(cmh_entry_set(&s, 5, &e5), CMH_OK);
    CU_ASSERT_EQUAL(cmh_entry_set(&s, 650, &e650), CMH_OK);
    CU_ASSERT_EQUAL(compact_mismatches(&s, N, 1), 0);
    cmh_snapshot_free(&s);
}

/* The entry's time and (address, size) (snapshot.h): 9000 entries whose times have 9000
 * distinct upper halves, out of order, one of them negative, so past CMH_TH_FAR - 1 of them the
 * upper half goes to the entry's set, and the last 500 have sets of their own too (set numbers
 * past 254: s->xmap); 3000 distinct pairs, each shared by three entries, an address in six.  Every field reads
 * back as added, through a .cmh round trip, and after cmh_entry_set moves entries between a
 * kept upper half and a far one. */
static cmh_entry_full wide_entry(uint32_t i)
{
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    uint64_t hi = (uint64_t)i * 7919 % 9000; /* a permutation of 0..8999 */
    e.time_ns = (int64_t)((hi << 32) | (i * 13u));
    if (i == 3) e.time_ns = -5; /* a hostile file's time: upper half 0xffffffff */
    /* two entries in a row at one address with two sizes (a segment and its first block), each
     * address with six sizes in all */
    e.addr = 0x7f0000000000ull + (uint64_t)(i / 2 % 500) * 4096;
    e.size = 512 + (uint64_t)(i % 2) * 256 + (uint64_t)(i / 3000) * 1024;
    e.requested = e.size;
    e.action = i % 2 ? CMH_ACT_FREE_COMPLETED : CMH_ACT_ALLOC;
    e.flags = i % 16; /* every flag bit the entry keeps */
    e.kind = i % CMH_KIND_COUNT;
    if (i >= 8500) e.stream = 10000 + i;
    return e;
}

/* flags: the flag bits expected kept (a .cmh keeps CMH_EF_WHOLE_BLOCK alone: the others are told again by its readers) */
static uint32_t wide_mismatches(const cmh_snapshot *s, uint32_t n, uint8_t flags)
{
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n && i < s->nentries; i++) {
        cmh_entry_full want = wide_entry(i), got;
        want.flags &= flags;
        const cmh_entry *e = &s->entries[i];
        cmh_entry_get(s, e, &got);
        int b = !eq_full(&want, &got) || cmh_entry_time(s, e) != want.time_ns || cmh_entry_addr(s, e) != want.addr ||
                cmh_entry_size(s, e) != want.size || cmh_entry_stream(s, e) != want.stream;
        bad += b;
    }
    return bad + (s->nentries != n);
}

static void test_compact_times_and_pairs(void)
{
    enum { N = 9000 };
    cmh_snapshot s, r;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&s), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&s, 0, 0, NULL), CMH_OK);
    for (uint32_t i = 0; i < N; i++) {
        cmh_entry_full e = wide_entry(i);
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
    }
    CU_ASSERT_EQUAL(s.npairs, 3000);
    CU_ASSERT_EQUAL(s.nthighs, CMH_TH_FAR);
    uint32_t far = 0, both = 0;
    for (uint32_t i = 0; i < N; i++) {
        far += s.entries[i].th == CMH_TH_FAR;
        both += s.entries[i].th == CMH_TH_FAR && s.entries[i].xs == CMH_XS_FAR;
    }
    CU_ASSERT_EQUAL(far, N - CMH_TH_FAR);
    CU_ASSERT(both > 0); /* an upper half in a set whose number is in s->xmap */
    CU_ASSERT_EQUAL(wide_mismatches(&s, N, 15), 0);
    /* a copy of an entry whose set number fits reads as the entry does */
    for (uint32_t i = 0; i < N; i++) {
        cmh_entry c = s.entries[i];
        if (c.xs != CMH_XS_FAR && cmh_entry_time(&s, &c) != wide_entry(i).time_ns) {
            CU_FAIL("a copy's time");
            break;
        }
    }
    char *buf;
    size_t len;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    int rc = cmh_cmh_read(buf, len, &r, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
    CU_ASSERT_EQUAL(wide_mismatches(&r, N, CMH_EF_WHOLE_BLOCK), 0);
    free(buf);
    cmh_snapshot_free(&r);
    /* in place: a kept upper half made far, a far one made kept, a pair changed, and back */
    uint32_t near_i = 0, far_i = 0;
    while (s.entries[near_i].th == CMH_TH_FAR) near_i++;
    while (s.entries[far_i].th != CMH_TH_FAR) far_i++;
    cmh_entry_full a = wide_entry(near_i), b = wide_entry(far_i), got;
    a.time_ns = (int64_t)(((uint64_t)0x12345678 << 32) | 99); /* an upper half the table lacks */
    a.addr = 0x1000, a.size = 77;                             /* a pair no entry has */
    b.time_ns = wide_entry(near_i).time_ns;                   /* one it has */
    CU_ASSERT_EQUAL(cmh_entry_set(&s, near_i, &a), CMH_OK);
    CU_ASSERT_EQUAL(cmh_entry_set(&s, far_i, &b), CMH_OK);
    CU_ASSERT_EQUAL(s.entries[near_i].th, CMH_TH_FAR);
    CU_ASSERT_NOT_EQUAL(s.entries[far_i].th, CMH_TH_FAR);
    cmh_entry_get(&s, &s.entries[near_i], &got);
    CU_ASSERT(eq_full(&got, &a));
    cmh_entry_get(&s, &s.entries[far_i], &got);
    CU_ASSERT(eq_full(&got, &b));
    CU_ASSERT_EQUAL(s.npairs, 3001);
    cmh_entry_full a0 = wide_entry(near_i), b0 = wide_entry(far_i);
    CU_ASSERT_EQUAL(cmh_entry_set(&s, near_i, &a0), CMH_OK);
    CU_ASSERT_EQUAL(cmh_entry_set(&s, far_i, &b0), CMH_OK);
    CU_ASSERT_EQUAL(wide_mismatches(&s, N, 15), 0);
    cmh_snapshot_free(&s);
}

/* The writer packs trace entries straight into its buffer (cmh_write.c, pack_entry) and keeps a
 * trace's thread runs as the entries go by, asking the threads again only past 4,096 runs. Three
 * traces: one whose thread changes at every entry for its first 9,000 (more runs than kept), one
 * with threads in runs of 100, one without threads; fields at every boundary of msgpack's forms
 * (fixint, 8, 16, 32, 64 bits, negative deltas of address and time).  Everything reads back. */
static const uint64_t k_edges[] = {0, 1, 31, 32, 33, 127, 128, 255, 256, 65535, 65536, 0xffffffffull, 0x100000000ull,
                                   0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull};
#define NEDGES (sizeof k_edges / sizeof k_edges[0])
static cmh_entry_full edge_entry(uint32_t trace, uint32_t i)
{
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    uint64_t a = k_edges[i % NEDGES], b = k_edges[(i / NEDGES) % NEDGES];
    e.time_ns = (int64_t)(i % 3 ? a : 0 - b); /* deltas up and down, wide and short */
    e.addr = i % 5 ? b : ~a;
    e.size = a;
    e.requested = i % 7 ? e.size : b;
    e.stream = i % 11 ? 0 : b;
    e.name = i % 17 ? 0 : 1 + i % 3;
    e.compile_context = i % 19 ? 0 : 2;
    e.user_metadata = i % 23 ? 0 : 3;
    if (i % 29 == 0) e.pool_id[0] = a, e.pool_id[1] = b;
    e.action = i % CMH_ACT_COUNT;
    e.flags = i % 2; /* the .cmh keeps CMH_EF_WHOLE_BLOCK */
    e.kind = i % CMH_KIND_COUNT;
    e.thread = trace == 0 ? (i < 9000 ? 1 + i % 2 : 7) : trace == 1 ? 1 + i / 100 % 5 : 0;
    return e;
}

static void test_entries_packed_and_thread_runs(void)
{
    enum { N = 12000 };
    cmh_snapshot s, r;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(&s), CMH_OK);
    uint32_t id;
    CU_ASSERT_EQUAL_FATAL(cmh_strtab_intern(&s.strings, "a", 1, &id), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_strtab_intern(&s.strings, "b", 1, &id), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_strtab_intern(&s.strings, "c", 1, &id), CMH_OK);
    for (uint32_t t = 0; t < 3; t++) {
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(&s, (int)t, t, NULL), CMH_OK);
        for (uint32_t i = 0; i < N; i++) {
            cmh_entry_full e = edge_entry(t, i);
            CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
        }
    }
    char *buf;
    size_t len;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    int rc = cmh_cmh_read(buf, len, &r, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
    CU_ASSERT_EQUAL_FATAL(r.ntraces, 3);
    uint32_t bad = 0, bad_thread = 0;
    for (uint32_t t = 0; t < 3; t++) {
        CU_ASSERT_EQUAL_FATAL(r.traces[t].nentries, N);
        for (uint32_t i = 0; i < N; i++) {
            cmh_entry_full want = edge_entry(t, i), got;
            cmh_entry_get(&r, &r.entries[r.traces[t].first_entry + i], &got);
            bad_thread += got.thread != want.thread;
            bad += got.time_ns != want.time_ns || got.addr != want.addr || got.size != want.size ||
                   got.requested != want.requested || got.stream != want.stream || got.stack != want.stack ||
                   got.name != want.name || got.compile_context != want.compile_context ||
                   got.user_metadata != want.user_metadata || got.pool_id[0] != want.pool_id[0] ||
                   got.pool_id[1] != want.pool_id[1] || got.action != want.action || got.flags != want.flags ||
                   got.kind != want.kind;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(bad_thread, 0);
    free(buf);
    cmh_snapshot_free(&r);
    cmh_snapshot_free(&s);
}

static void test_round_trip(void)
{
    cmh_snapshot s, r;
    build(&s);
    char *buf;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    char err[256];
    int rc = cmh_cmh_read(buf, len, &r, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
    CU_ASSERT_EQUAL(r.pid, 4242);
    CU_ASSERT_EQUAL(r.start_time_ns, s.start_time_ns);
    CU_ASSERT_EQUAL(r.dump_time_ns, s.dump_time_ns);
    CU_ASSERT_EQUAL(r.opt_context, CMH_CONTEXT_ALLOC);
    CU_ASSERT_EQUAL(r.opt_max_entries, 1000);
    CU_ASSERT_EQUAL(r.opt_max_frames, 16);
    CU_ASSERT_EQUAL(r.lost_events, 3);
    CU_ASSERT_STRING_EQUAL(cmh_str(&r, r.hostname), "host");
    CU_ASSERT_STRING_EQUAL(cmh_str(&r, r.cmdline), "python train.py");
    CU_ASSERT_EQUAL(r.nmodules, 1);
    CU_ASSERT_STRING_EQUAL(cmh_str(&r, r.modules[0].path), "/usr/bin/prog");
    CU_ASSERT_STRING_EQUAL(cmh_str(&r, r.modules[0].build_id), "abcdef");
    CU_ASSERT_EQUAL(r.modules[0].base, 0x400000);
    CU_ASSERT_EQUAL(r.nframes, 3);
    CU_ASSERT_EQUAL(r.frames[2].module, -1);
    CU_ASSERT_EQUAL(r.frames[1].line, 10);
    CU_ASSERT_EQUAL(r.frames[1].pc, 0x400110);
    CU_ASSERT_STRING_EQUAL(cmh_str(&r, r.frames[2].name), "fn2");
    CU_ASSERT_EQUAL(r.nstacks, 3);
    CU_ASSERT_EQUAL(r.stacks[1].count, 3);
    CU_ASSERT_EQUAL(r.stacks[2].count, 2);
    CU_ASSERT_EQUAL(r.nsegments, 2);
    CU_ASSERT(eq_segment(&r.segments[0], &s.segments[0]));
    CU_ASSERT_EQUAL(r.segments[1].device, -1);
    CU_ASSERT_EQUAL(r.segments[1].pool_id[1], 2);
    CU_ASSERT_EQUAL(r.nblocks, 2);
    CU_ASSERT(eq_block(&r.blocks[0], &s.blocks[0]) && eq_block(&r.blocks[1], &s.blocks[1]));
    CU_ASSERT_EQUAL(r.ntraces, 2);
    CU_ASSERT_EQUAL(r.traces[0].dropped, 17);
    CU_ASSERT_EQUAL(r.traces[1].device, 1);
    CU_ASSERT_EQUAL(r.traces[1].nentries, 0);
    CU_ASSERT_EQUAL_FATAL(r.nentries, 4);
    for (int i = 0; i < 4; i++) CU_ASSERT(eq_entry(&r, &r.entries[i], &s, &s.entries[i]));
    CU_ASSERT_EQUAL(r.nannotations, 1);
    CU_ASSERT_STRING_EQUAL(cmh_str(&r, r.annotations[0].name), "step 1");
    CU_ASSERT_EQUAL(r.nsettings, 1);
    CU_ASSERT_STRING_EQUAL(cmh_str(&r, r.settings[0].value), "-1");
    /* and the same bytes again */
    char *buf2;
    size_t len2;
    CU_ASSERT_EQUAL(write_mem(&r, &buf2, &len2), CMH_OK);
    CU_ASSERT_EQUAL(len, len2);
    CU_ASSERT(len == len2 && memcmp(buf, buf2, len) == 0);
    free(buf2);
    free(buf);
    cmh_snapshot_free(&r);
    cmh_snapshot_free(&s);
}

/* Every cuMemMap with its handle (vmm_maps): read back as written, the same bytes again, every
 * truncation refused, a stack id out of range refused; a record without the key has none. */
static void test_vmm_maps_round_trip(void)
{
    cmh_snapshot s, r;
    build(&s);
    char *buf, *buf2;
    size_t len, len2;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK); /* (an older record: no vmm_maps) */
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(r.nvmm_maps, 0);
    cmh_snapshot_free(&r);
    free(buf);
    CU_ASSERT_FATAL(s.nstacks >= 2);
    cmh_vmm_map a = {0, 0x7f0000000000ull, 8ull << 20, 1700000000100000000ll, 1, 8ull << 20, s.nstacks - 1, 1700000000000000000ll};
    cmh_vmm_map b = {0, 0x7f0000800000ull, 8ull << 20, 1700000000200000000ll, 1, 8ull << 20, s.nstacks - 1, 1700000000000000000ll};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_vmm_map(&s, &a), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_vmm_map(&s, &b), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(r.version, 1); /* an optional table: no new version */
    CU_ASSERT_EQUAL_FATAL(r.nvmm_maps, 2);
    for (int i = 0; i < 2; i++) {
        const cmh_vmm_map *x = &r.vmm_maps[i], *y = i ? &b : &a;
        CU_ASSERT(x->device == y->device && x->addr == y->addr && x->size == y->size && x->time_ns == y->time_ns && x->handle == y->handle &&
                  x->handle_size == y->handle_size && x->handle_stack == y->handle_stack && x->handle_time_ns == y->handle_time_ns);
    }
    CU_ASSERT_EQUAL(write_mem(&r, &buf2, &len2), CMH_OK);
    CU_ASSERT(len2 == len && memcmp(buf, buf2, len) == 0);
    free(buf2);
    cmh_snapshot_free(&r);
    for (size_t n = 0; n < len; n += 5) CU_ASSERT_EQUAL(cmh_cmh_read(buf, n, &r, err, sizeof err), CMH_EFORMAT);
    free(buf);
    s.vmm_maps[1].handle_stack = 99;
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "stack id 99 out of range") != NULL);
    free(buf);
    cmh_snapshot_free(&s);
}

/* The failed driver calls (driver_errors): read back as written, the same bytes again, every
 * truncation refused, a stack id out of range refused; a record without them reads none. */
static void test_driver_errors_round_trip(void)
{
    cmh_snapshot s, r;
    build(&s);
    CU_ASSERT_FATAL(s.nstacks >= 2);
    char *buf, *buf2;
    size_t len, len2;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK); /* without: none read, version 1 */
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT(r.ndrv_errors == 0 && r.version == 1);
    cmh_snapshot_free(&r);
    free(buf);
    cmh_drv_error a = {.call = "cuMemFree", .result = 1, .count = 11, .nsites = 2};
    a.sites[0] = (cmh_drv_error_site){0x7f0000400000ull, 0, 1, s.nstacks - 1, 1700000000100000000ll};
    a.sites[1] = (cmh_drv_error_site){0xdeadbeef000ull, 0, 2, 0, 1700000000200000000ll};
    cmh_drv_error b = {.call = "cuMemRelease", .result = 400, .count = 1, .nsites = 0};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_drv_error(&s, &a), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_drv_error(&s, &b), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(r.version, 1); /* an optional table: no new version */
    CU_ASSERT_EQUAL_FATAL(r.ndrv_errors, 2);
    CU_ASSERT(!strcmp(r.drv_errors[0].call, "cuMemFree") && r.drv_errors[0].result == 1 && r.drv_errors[0].count == 11 &&
              r.drv_errors[0].nsites == 2);
    CU_ASSERT(r.drv_errors[0].sites[0].addr == a.sites[0].addr && r.drv_errors[0].sites[0].stack == a.sites[0].stack &&
              r.drv_errors[0].sites[0].thread == 1 && r.drv_errors[0].sites[0].time_ns == a.sites[0].time_ns);
    CU_ASSERT(r.drv_errors[0].sites[1].addr == 0xdeadbeef000ull && r.drv_errors[0].sites[1].thread == 2);
    CU_ASSERT(!strcmp(r.drv_errors[1].call, "cuMemRelease") && r.drv_errors[1].result == 400 && r.drv_errors[1].nsites == 0);
    char nb[32];
    CU_ASSERT_STRING_EQUAL(cmh_cuda_error_name(1, nb, sizeof nb), "CUDA_ERROR_INVALID_VALUE");
    CU_ASSERT_STRING_EQUAL(cmh_cuda_error_name(12345, nb, sizeof nb), "CUresult 12345");
    CU_ASSERT_EQUAL(write_mem(&r, &buf2, &len2), CMH_OK);
    CU_ASSERT(len2 == len && memcmp(buf, buf2, len) == 0);
    free(buf2);
    cmh_snapshot_free(&r);
    for (size_t n = 0; n < len; n += 5) CU_ASSERT_EQUAL(cmh_cmh_read(buf, n, &r, err, sizeof err), CMH_EFORMAT);
    free(buf);
    s.drv_errors[0].sites[1].stack = 99;
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "stack id 99 out of range") != NULL);
    free(buf);
    cmh_snapshot_free(&s);
}

/* What a recovery could not read (history_lost): none written while nothing was lost; read back
 * as written, no new version, the same bytes again, every truncation refused. */
static void test_history_lost_round_trip(void)
{
    cmh_snapshot s, r;
    build(&s);
    char *buf, *buf2;
    size_t len, len2, len0;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len0), CMH_OK);
    int named = 0; /* not a key of a record read whole */
    for (size_t i = 0; i + 12 <= len0; i++) named |= !memcmp(buf + i, "history_lost", 12);
    CU_ASSERT(!named);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len0, &r, err, sizeof err), CMH_OK);
    CU_ASSERT(!CMH_HISTORY_LOST(&r.history_lost) && !r.history_lost.file_bytes && !r.history_lost.read_to);
    cmh_snapshot_free(&r);
    free(buf);
    s.history_lost = (cmh_history_lost){.cut_bytes = 1264, .file_bytes = 13000, .read_to = 12968, .torn = 1, .damaged = 2,
                                        .refused = 5000000000ull};
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT(len > len0);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(r.version, 1); /* an optional key: no new version */
    CU_ASSERT(r.history_lost.cut_bytes == 1264 && r.history_lost.file_bytes == 13000 && r.history_lost.read_to == 12968 &&
              r.history_lost.torn == 1 && r.history_lost.damaged == 2 && r.history_lost.refused == 5000000000ull);
    CU_ASSERT_EQUAL(write_mem(&r, &buf2, &len2), CMH_OK);
    CU_ASSERT(len2 == len && memcmp(buf, buf2, len) == 0);
    free(buf2);
    cmh_snapshot_free(&r);
    for (size_t n = 0; n < len; n += 5) CU_ASSERT_EQUAL(cmh_cmh_read(buf, n, &r, err, sizeof err), CMH_EFORMAT);
    free(buf);
    s.history_lost = (cmh_history_lost){.damaged = 1}; /* any count alone is a loss */
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT(CMH_HISTORY_LOST(&r.history_lost) && r.history_lost.damaged == 1 && !r.history_lost.cut_bytes);
    cmh_snapshot_free(&r);
    free(buf);
    cmh_snapshot_free(&s);
}

/* The cuMemCreate handles held and mapped nowhere (vmm_unmapped): read back as written, the
 * same bytes again, every truncation refused; a stack id or device out of range refused. */
static void test_vmm_unmapped_round_trip(void)
{
    cmh_snapshot s, r;
    build(&s);
    CU_ASSERT_FATAL(s.nstacks >= 2);
    cmh_vmm_handle a = {0, 20ull << 20, s.nstacks - 1, 1700000000100000000ll}, b = {1, 8ull << 20, 0, 0};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_vmm_unmapped(&s, &a), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_vmm_unmapped(&s, &b), CMH_OK);
    char *buf, *buf2;
    size_t len, len2;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(r.version, 1); /* an optional table: no new version */
    CU_ASSERT_EQUAL_FATAL(r.nvmm_unmapped, 2);
    CU_ASSERT(r.vmm_unmapped[0].device == 0 && r.vmm_unmapped[0].size == a.size && r.vmm_unmapped[0].stack == a.stack &&
              r.vmm_unmapped[0].time_ns == a.time_ns);
    CU_ASSERT(r.vmm_unmapped[1].device == 1 && r.vmm_unmapped[1].size == b.size && r.vmm_unmapped[1].stack == 0);
    CU_ASSERT_EQUAL(write_mem(&r, &buf2, &len2), CMH_OK);
    CU_ASSERT(len2 == len && memcmp(buf, buf2, len) == 0);
    free(buf2);
    cmh_snapshot_free(&r);
    for (size_t n = 0; n < len; n += 5) CU_ASSERT_EQUAL(cmh_cmh_read(buf, n, &r, err, sizeof err), CMH_EFORMAT);
    free(buf);
    s.vmm_unmapped[1].stack = 99;
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "stack id 99 out of range") != NULL);
    free(buf);
    s.vmm_unmapped[1].stack = 0;
    s.vmm_unmapped[1].device = 5000;
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "unmapped VMM memory of device 5000") != NULL);
    free(buf);
    cmh_snapshot_free(&s);
}

/* Version 2: PyTorch's part rides inside, with the clock and cuMemGetInfo samples; a file
 * without a PyTorch part stays version 1 (an older reader reads it). */
static void test_torch_part_round_trip(void)
{
    cmh_snapshot s, r;
    build(&s);
    cmh_meminfo mi = {0, 1700000000100000000ll, 3ull << 30, 80ull << 30, 7}, mi0 = {0, 1700000000200000000ll, 2ull << 30, 80ull << 30, 0};
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_meminfo(&s, &mi), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_meminfo(&s, &mi0), CMH_OK); /* (no sampling thread: written as 4 fields) */
    char *buf;
    size_t len;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(r.version, 1);
    CU_ASSERT_PTR_NULL(r.torch);
    CU_ASSERT_EQUAL(r.nmeminfo, 2);
    CU_ASSERT(r.nmeminfo == 2 && r.meminfo[0].free == mi.free && r.meminfo[0].total == mi.total && r.meminfo[0].time_ns == mi.time_ns &&
              r.meminfo[0].thread == 7 && r.meminfo[1].thread == 0 && r.meminfo[1].free == mi0.free);
    cmh_snapshot_free(&r);
    free(buf);
    /* with PyTorch's part */
    cmh_snapshot *t = malloc(sizeof *t);
    build(t);
    t->source = CMH_SRC_PYTORCH;
    s.torch = t;
    s.torch_clock_ns = -91234;
    CU_ASSERT_EQUAL_FATAL(write_mem(&s, &buf, &len), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(r.version, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.torch);
    CU_ASSERT_EQUAL(r.torch_clock_ns, -91234);
    CU_ASSERT_EQUAL(r.torch->source, CMH_SRC_PYTORCH);
    CU_ASSERT_EQUAL(r.torch->nsegments, t->nsegments);
    CU_ASSERT_EQUAL(r.torch->nentries, t->nentries);
    CU_ASSERT_EQUAL(r.torch->nstacks, t->nstacks);
    CU_ASSERT_PTR_NULL(r.torch->torch);
    /* the same bytes again from what was read */
    char *buf2;
    size_t len2;
    CU_ASSERT_EQUAL(write_mem(&r, &buf2, &len2), CMH_OK);
    CU_ASSERT(len2 == len && memcmp(buf, buf2, len) == 0);
    free(buf2);
    cmh_snapshot_free(&r);
    /* every truncation of it still fails cleanly */
    for (size_t n = 0; n < len; n += 7) CU_ASSERT_EQUAL(cmh_cmh_read(buf, n, &r, err, sizeof err), CMH_EFORMAT);
    free(buf);
    cmh_snapshot_free(&s); /* frees its part too */
}

static void test_every_truncation_fails_cleanly(void)
{
    cmh_snapshot s, r;
    build(&s);
    char *buf;
    size_t len;
    write_mem(&s, &buf, &len);
    char err[256];
    for (size_t n = 0; n < len; n++) {
        int rc = cmh_cmh_read(buf, n, &r, err, sizeof err);
        CU_ASSERT_EQUAL(rc, CMH_EFORMAT);
        if (rc == CMH_OK) cmh_snapshot_free(&r);
        CU_ASSERT(strstr(err, "byte") != NULL);
    }
    CU_ASSERT_EQUAL(cmh_cmh_read(buf, len - 1, &r, err, sizeof err), CMH_EFORMAT);
    char want[96];
    snprintf(want, sizeof want, "truncated at byte %zu", len - 1);
    CU_ASSERT(strncmp(err, want, strlen(want)) == 0);
    free(buf);
    cmh_snapshot_free(&s);
}

static void test_garbage_and_hostile_input(void)
{
    cmh_snapshot r;
    char err[256];
    /* a map that is not ours */
    const unsigned char notours[] = {0x81, 0xa6, 'f', 'o', 'r', 'm', 'a', 't', 0xa3, 'x', 'y', 'z'};
    CU_ASSERT_EQUAL(cmh_cmh_read(notours, sizeof notours, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "not a cumemhist snapshot") != NULL);
    /* an array count far beyond the data */
    const unsigned char huge[] = {0x82, 0xa6, 'f', 'o', 'r', 'm', 'a', 't', 0xa9, 'c', 'u', 'm', 'e', 'm', 'h', 'i', 's', 't',
                                  0xa7, 's', 't', 'r', 'i', 'n', 'g', 's', 0xdd, 0xff, 0xff, 0xff, 0xff};
    CU_ASSERT_EQUAL(cmh_cmh_read(huge, sizeof huge, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "truncated") != NULL);
    /* deep nesting under an unknown key is skipped without recursion */
    size_t n = 1 << 20;
    unsigned char *deep = malloc(n + 64);
    size_t k = 0;
    const unsigned char head[] = {0x82, 0xa6, 'f', 'o', 'r', 'm', 'a', 't', 0xa9, 'c', 'u', 'm', 'e', 'm', 'h', 'i', 's', 't', 0xa1, 'z'};
    memcpy(deep, head, sizeof head);
    k = sizeof head;
    while (k < n) deep[k++] = 0x91; /* [[[[... */
    deep[k++] = 0xc0;
    CU_ASSERT_EQUAL(cmh_cmh_read(deep, k, &r, err, sizeof err), CMH_OK);
    cmh_snapshot_free(&r);
    CU_ASSERT_EQUAL(cmh_cmh_read(deep, k - 1, &r, err, sizeof err), CMH_EFORMAT);
    free(deep);
    /* out-of-range ids are refused */
    cmh_snapshot s;
    build(&s);
    s.entries[0].stack = 99;
    char *buf;
    size_t len;
    write_mem(&s, &buf, &len);
    CU_ASSERT_EQUAL(cmh_cmh_read(buf, len, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strstr(err, "stack id 99 out of range") != NULL);
    free(buf);
    cmh_snapshot_free(&s);
}

static void test_load_names_the_file(void)
{
    char path[] = "/tmp/cmh-garbage-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, "hello world", 11), 11);
    close(fd);
    cmh_snapshot r;
    char err[512];
    CU_ASSERT_EQUAL(cmh_snapshot_load(path, &r, err, sizeof err), CMH_EFORMAT);
    CU_ASSERT(strncmp(err, path, strlen(path)) == 0);
    CU_ASSERT(strstr(err, "not a snapshot") != NULL);
    unlink(path);
    CU_ASSERT_EQUAL(cmh_snapshot_load(path, &r, err, sizeof err), CMH_EIO);
    CU_ASSERT(strstr(err, "No such file") != NULL);
}

/* .cmh files recorded by this recorder on a real H200 (tests/fixtures/h200). */
static int has_frame(const cmh_snapshot *s, uint32_t stack, const char *name)
{
    for (uint32_t i = 0; i < s->stacks[stack].count; i++)
        if (!strcmp(cmh_str(s, s->frames[s->stack_frames[s->stacks[stack].first + i]].name), name)) return 1;
    return 0;
}

static void test_real_gpu_recordings(void)
{
    char err[512];
    cmh_snapshot s;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_load(CMH_FIXTURES "/h200/cudart.cmh", &s, err, sizeof err), CMH_OK);
    int allocs = 0, frees = 0, named = 0;
    for (uint32_t i = 0; i < s.nentries; i++) {
        const cmh_entry *e = &s.entries[i];
        allocs += e->action == CMH_ACT_SEGMENT_ALLOC;
        frees += e->action == CMH_ACT_SEGMENT_FREE;
        if (e->action == CMH_ACT_SEGMENT_ALLOC)
            named += has_frame(&s, e->stack, "make_buffer(unsigned long)") ||
                     has_frame(&s, e->stack, "make_async(unsigned long, CUstream_st*)");
    }
    CU_ASSERT_EQUAL(allocs, 4);
    CU_ASSERT_EQUAL(frees, 3);
    CU_ASSERT_EQUAL(named, 4); /* the program's own (demangled) functions, through static cudart */
    CU_ASSERT_EQUAL(s.nsegments, 1);
    CU_ASSERT_EQUAL(s.segments[0].size, 16u << 20);
    cmh_snapshot_free(&s);

    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_load(CMH_FIXTURES "/h200/leaky.cmh", &s, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(s.nsegments, 10);
    for (uint32_t i = 0; i < s.nsegments; i++) {
        CU_ASSERT_EQUAL(s.segments[i].size, 4u << 20);
        CU_ASSERT(has_frame(&s, s.segments[i].stack, "load_batch"));
    }
    cmh_snapshot_free(&s);

    /* PyTorch 2.11 under the recorder: its 14 caching-allocator segments plus 6 others */
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_load(CMH_FIXTURES "/h200/torch_plain.cmh", &s, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(s.nsegments, 20);
    CU_ASSERT_EQUAL(s.ntraces, 1);
    cmh_snapshot_free(&s);
}

/* RFC 3720 B.4's vectors and the usual check value; then the CPU's path against the tables, at
 * every alignment, across the length where a run splits into three streams, fed in pieces. */
static void test_crc32c(void)
{
    unsigned char z[32], f[32], inc[32];
    for (int i = 0; i < 32; i++) z[i] = 0, f[i] = 0xff, inc[i] = (unsigned char)i;
    CU_ASSERT_EQUAL(cmh_crc32c(0, "123456789", 9), 0xe3069283u);
    CU_ASSERT_EQUAL(cmh_crc32c(0, z, 32), 0x8a9136aau);
    CU_ASSERT_EQUAL(cmh_crc32c(0, f, 32), 0x62a8ab43u);
    CU_ASSERT_EQUAL(cmh_crc32c(0, inc, 32), 0x46dd794eu);
    CU_ASSERT_EQUAL(cmh_crc32c_sw(0, "123456789", 9), 0xe3069283u);
    CU_ASSERT_EQUAL(cmh_crc32c(0, "", 0), 0);
    size_t cap = 200000;
    unsigned char *b = malloc(cap + 16);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < cap + 16; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
    }
    static const size_t lens[] = {1, 3, 4, 7, 8, 9, 15, 76, 3071, 3072, 3073, 3079, 3080, 3096, 65536, 65543, 199999};
    unsigned bad = 0;
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
        for (size_t off = 0; off < 9; off++) {
            uint32_t want = cmh_crc32c_sw(0, b + off, lens[k]);
            bad += cmh_crc32c(0, b + off, lens[k]) != want;
            size_t cut = lens[k] / 3;
            bad += cmh_crc32c(cmh_crc32c(0, b + off, cut), b + off + cut, lens[k] - cut) != want;
        }
    CU_ASSERT_EQUAL(bad, 0);
    /* the recorder's inline sum of whole words, with the instruction and without */
    for (int hw = 0; hw < 2; hw++)
        for (unsigned n = 1; n <= 3; n++)
            for (size_t off = 0; off < 64; off += 8) {
                uint64_t w[3];
                memcpy(w, b + off, 8 * n);
                CU_ASSERT_EQUAL(cmh_crc32c_words(hw && cmh_crc32c_hw(), w, n), cmh_crc32c_sw(0, w, 8 * n));
            }
    free(b);
}

/* The output guard (cmh_inputs_guard, snapshot/atomic.c) refuses to replace a file this process
 * read, and only that file: an input removed since, whose inode a new file took (a long-running
 * exporter read a checkpoint that was then removed, and its own textfile's next write took the
 * freed inode), is not the input.  Inputs are remembered by device, inode, size and time of
 * change; by device and inode alone the new file was refused as 'what this command reads'.
 * Made in the build directory (a disk file system that reuses a freed inode at once; a tmpfs
 * never does, and there only the refusals are checked). */
static void test_inputs_guard_inode_reuse(void)
{
    char dir[] = CMH_TEST_SCRATCH "/cmh-guard-XXXXXX", in[sizeof dir + 16], kept[sizeof dir + 16], path[sizeof dir + 32], err[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(in, sizeof in, "%s/ckpt.cmh", dir);
    snprintf(kept, sizeof kept, "%s/kept.cmh", dir);
    cmh_inputs_guard(1);
    struct stat st_in;
    const char *names[2] = {in, kept};
    for (int k = 0; k < 2; k++) { /* two inputs read: one to remove, one still there */
        FILE *f = fopen(names[k], "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs("a checkpoint the command read\n", f);
        fclose(f);
        int fd = open(names[k], O_RDONLY);
        CU_ASSERT_FATAL(fd >= 0);
        cmh_input_opened(fd);
        if (k == 0) CU_ASSERT_EQUAL_FATAL(fstat(fd, &st_in), 0);
        close(fd);
    }
    cmh_atomic a;
    CU_ASSERT_EQUAL(cmh_output_begin(&a, in, 0, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is what this command reads"));
    CU_ASSERT_EQUAL(unlink(in), 0);
    /* new files until one takes the removed input's inode (bounded; the misses kept, so that
     * each try is a new inode's chance) */
    int n = 0, reused = 0;
    for (; n < 4000 && !reused; n++) {
        snprintf(path, sizeof path, "%s/new%d.prom", dir, n);
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
        CU_ASSERT_FATAL(fd >= 0);
        CU_ASSERT_EQUAL(write(fd, "cumemhist_up 1\n", 15), 15);
        struct stat st;
        CU_ASSERT_EQUAL_FATAL(fstat(fd, &st), 0);
        close(fd);
        reused = st.st_dev == st_in.st_dev && st.st_ino == st_in.st_ino;
    }
    if (reused) {
        /* the new file at the input's old inode is not the input: written over */
        int rc = cmh_output_begin(&a, path, 0, err, sizeof err);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc != 0) fprintf(stderr, "\n  the new file at the removed input's inode %llu was refused: %s\n", (unsigned long long)st_in.st_ino, err);
        else cmh_atomic_abort(&a);
    } else fprintf(stderr, "\n  (no new file took the removed input's inode in %d tries here: that case not checked)\n", n);
    /* the input still there is still refused */
    CU_ASSERT_EQUAL(cmh_output_begin(&a, kept, 0, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is what this command reads"));
    cmh_inputs_guard(0);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/new%d.prom", dir, i);
        unlink(path);
    }
    unlink(kept);
    rmdir(dir);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("snapshot", NULL, NULL);
    CMH_ADD_TEST(s, test_crc32c);
    CMH_ADD_TEST(s, test_interning);
    CMH_ADD_TEST(s, test_round_trip);
    CMH_ADD_TEST(s, test_compact_entries);
    CMH_ADD_TEST(s, test_compact_times_and_pairs);
    CMH_ADD_TEST(s, test_entries_packed_and_thread_runs);
    CMH_ADD_TEST(s, test_every_truncation_fails_cleanly);
    CMH_ADD_TEST(s, test_torch_part_round_trip);
    CMH_ADD_TEST(s, test_vmm_unmapped_round_trip);
    CMH_ADD_TEST(s, test_driver_errors_round_trip);
    CMH_ADD_TEST(s, test_history_lost_round_trip);
    CMH_ADD_TEST(s, test_vmm_maps_round_trip);
    CMH_ADD_TEST(s, test_garbage_and_hostile_input);
    CMH_ADD_TEST(s, test_load_names_the_file);
    CMH_ADD_TEST(s, test_real_gpu_recordings);
    CMH_ADD_TEST(s, test_inputs_guard_inode_reuse);
    return cmh_test_main();
}
