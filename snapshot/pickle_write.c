/*
 * pickle_write.c - the snapshot model as a PyTorch memory snapshot pickle.
 *
 * Protocol 4 with only the opcodes the memory_viz page's unpickler accepts (docs/PYTORCH.md, Pickles), in
 * the shapes CPython's pickler gives them: ints in their smallest form (LONG1 of at most 8
 * bytes), SHORT_BINUNICODE below 256 bytes, MARK ... APPENDS/SETITEMS in batches of at most
 * 1000 items (APPEND/SETITEM for a lone last item), FRAME every ~64 KiB.  Only shared values are
 * memoized: strings, frame dicts and per-stack frame lists.  Entry, segment and block dicts
 * never are, because the viewer annotates them in place.
 *
 * This writes the model as it is, with PyTorch's keys and key order; making a recorder
 * snapshot look like PyTorch's (implied blocks, frees in two steps) is viz/memviz.c's job.
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/snapshot.h"

#define FRAME_TARGET (64 * 1024)
#define BATCH 1000

enum {
    W_SEGMENTS, W_DEVICE_TRACES, W_ALLOCATOR_SETTINGS, W_EXTERNAL_ANNOTATIONS, W_DEVICE, W_ADDRESS,
    W_TOTAL_SIZE, W_ALLOCATED_SIZE, W_ACTIVE_SIZE, W_REQUESTED_SIZE, W_STREAM, W_SEGMENT_TYPE,
    W_SEGMENT_POOL_ID, W_IS_EXPANDABLE, W_FRAMES, W_BLOCKS, W_SIZE, W_STATE, W_ACTION, W_ADDR, W_DEVICE_FREE,
    W_TIME_US, W_COMPILE_CONTEXT, W_USER_METADATA, W_NAME, W_FILENAME, W_LINE, W_STAGE, W_START, W_END,
    W_SMALL, W_LARGE, W_INACTIVE, W_ACTIVE_ALLOCATED, W_ACTIVE_PENDING_FREE, W_CMH_CODE, W_CMH_REQUESTED,
    W_CMH_IMPLIED, W_CMH_KIND, W_CMH_WHOLE, W_CUMEMHIST, W_SOURCE, W_PID, W_DROPPED, W_POOL_SAMPLES, W_HOST, W_CMDLINE,
    W_MODULES, W_FRAME_MODULES, W_THREADS, W_MARKS, W_THREAD_IDS, W_POOL_ID, W_MEMINFO, W_START_NS, W_DUMP_NS, W_PROCESS, W_ENDING, W_DROPPED_OOMS, W_RETRIED_OOMS, W_CLOCK_ORIGIN_NS, W_POOL_SAMPLE_TAGS, W_POOLS_READ_AT_DUMP, W_CONTEXT, W_VMM_UNMAPPED, W_VMM_MAPS, W_FREE_FRAMES,
    W_HISTORY_LOST, W_DRIVER_ERRORS, W_DEVICE_IDS, W_NKEYS
};
static const char *const wkeys[W_NKEYS] = {
    "segments", "device_traces", "allocator_settings", "external_annotations", "device", "address",
    "total_size", "allocated_size", "active_size", "requested_size", "stream", "segment_type",
    "segment_pool_id", "is_expandable", "frames", "blocks", "size", "state", "action", "addr", "device_free",
    "time_us", "compile_context", "user_metadata", "name", "filename", "line", "stage", "START", "END",
    "small", "large", "inactive", "active_allocated", "active_pending_free", "cmh_code", "cmh_requested",
    "cmh_implied", "cmh_kind", "cmh_whole", "cumemhist", "source", "pid", "dropped", "pool_samples", "host", "cmdline",
    "modules", "frame_modules", "threads", "marks", "thread_ids", "pool_id", "meminfo", "start_ns", "dump_ns", "process", "ending",
    "dropped_ooms", "retried_ooms", "clock_origin_ns", "pool_sample_tags", "pools_read_at_dump", "context", "vmm_unmapped", "vmm_maps",
    "free_frames",
    "history_lost", "driver_errors", "device_ids",
};

typedef struct pw {
    FILE *fp;
    unsigned char *buf; /* the current frame */
    size_t n, cap;
    int failed;
    int nomem; /* failed for memory, not for the stream */
    uint32_t next_memo;
    uint32_t *str_memo;   /* model string id -> memo index + 1 */
    uint32_t key_memo[W_NKEYS];
    uint32_t *frame_memo; /* frame id -> memo index + 1 */
    uint32_t *stack_memo; /* stack id -> memo index + 1 */
    uint32_t *action_memo;
    int pooled; /* entries say their pool_id (cmh_snapshot_entry_pools) */
} pw;

static __attribute__((noinline)) int grow(pw *w, size_t n)
{
    size_t nc = w->cap ? w->cap : FRAME_TARGET * 2;
    while (nc < w->n + n) nc *= 2;
    unsigned char *nb = realloc(w->buf, nc);
    if (!nb) {
        w->failed = w->nomem = 1;
        return -1;
    }
    w->buf = nb;
    w->cap = nc;
    return 0;
}

/* Most writes are an opcode and a few bytes: copied inline, not through a call to memcpy. */
static inline void raw_small(pw *w, const unsigned char *p, size_t n) /* n <= 16 */
{
    if (w->n + n > w->cap && grow(w, n)) return;
    unsigned char *d = w->buf + w->n;
    for (size_t i = 0; i < n; i++) d[i] = p[i];
    w->n += n;
}

static inline void raw(pw *w, const void *p, size_t n)
{
    if (n <= 16) {
        raw_small(w, p, n);
        return;
    }
    if (w->n + n > w->cap && grow(w, n)) return;
    memcpy(w->buf + w->n, p, n);
    w->n += n;
}

static void flush_frame(pw *w)
{
    if (!w->n) return;
    unsigned char h[9] = {0x95};
    uint64_t n = w->n;
    for (int i = 0; i < 8; i++) h[1 + i] = (unsigned char)(n >> (8 * i));
    if (fwrite(h, 1, 9, w->fp) != 9 || fwrite(w->buf, 1, w->n, w->fp) != w->n) w->failed = 1;
    w->n = 0;
}

/* Called between opcodes: a frame closes once it holds FRAME_TARGET bytes. */
static inline void boundary(pw *w)
{
    if (w->n >= FRAME_TARGET) flush_frame(w);
}

static void op(pw *w, unsigned char c)
{
    raw(w, &c, 1);
    boundary(w);
}

static void w_int(pw *w, int64_t v)
{
    unsigned char b[10];
    if (v >= 0 && v <= 0xff) {
        b[0] = 'K';
        b[1] = (unsigned char)v;
        raw(w, b, 2);
    } else if (v >= 0 && v <= 0xffff) {
        b[0] = 'M';
        b[1] = (unsigned char)v;
        b[2] = (unsigned char)(v >> 8);
        raw(w, b, 3);
    } else if (v >= -2147483648ll && v <= 2147483647ll) {
        b[0] = 'J';
        for (int i = 0; i < 4; i++) b[1 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        raw(w, b, 5);
    } else {
        /* LONG1: little-endian two's complement in the fewest bytes that keep the sign */
        int n = 8;
        while (n > 1) {
            int64_t top_ = v >> (8 * (n - 1) - 1);
            if (top_ == 0 || top_ == -1) n--;
            else break;
        }
        b[0] = 0x8a;
        b[1] = (unsigned char)n;
        for (int i = 0; i < n; i++) b[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        raw_small(w, b, (size_t)n + 2); /* (raw: GCC at -O1 under ASan took its memcpy, for n > 16, for reachable) */
    }
    boundary(w);
}

static void memoize(pw *w, uint32_t *slot)
{
    op(w, 0x94);
    *slot = ++w->next_memo; /* memo index + 1 */
}

static void get(pw *w, uint32_t slot)
{
    uint32_t i = slot - 1;
    unsigned char b[5];
    if (i < 256) {
        b[0] = 'h';
        b[1] = (unsigned char)i;
        raw(w, b, 2);
    } else {
        b[0] = 'j';
        for (int k = 0; k < 4; k++) b[1 + k] = (unsigned char)(i >> (8 * k));
        raw(w, b, 5);
    }
    boundary(w);
}

static void str_body(pw *w, const char *s)
{
    size_t n = strlen(s), nul = 0;
    for (const char *p = s; *p; p++) nul += CMH_IS_NUL_PAIR(p);
    if (nul) n -= nul; /* a NUL the reader held as C0 80 (cmh_strtab_intern_bytes): the NUL again */
    unsigned char h[5];
    if (n < 256) {
        h[0] = 0x8c;
        h[1] = (unsigned char)n;
        raw(w, h, 2);
    } else {
        h[0] = 'X';
        for (int i = 0; i < 4; i++) h[1 + i] = (unsigned char)(n >> (8 * i));
        raw(w, h, 5);
    }
    if (!nul) {
        raw(w, s, n);
        return;
    }
    for (const char *p = s, *run = s;; p++) {
        if (!*p || CMH_IS_NUL_PAIR(p)) {
            raw(w, run, (size_t)(p - run));
            if (!*p) break;
            raw(w, "", 1);
            run = ++p + 1;
        }
    }
}

/* A string, memoized the first time, a memo reference after. */
static void w_str_memo(pw *w, const char *s, uint32_t *slot)
{
    if (*slot) {
        get(w, *slot);
        return;
    }
    str_body(w, s);
    memoize(w, slot);
}

static void w_key(pw *w, int k) { w_str_memo(w, wkeys[k], &w->key_memo[k]); }
static void w_sid(pw *w, const cmh_snapshot *s, uint32_t id) { w_str_memo(w, cmh_str(s, id), &w->str_memo[id]); }

static void w_bool(pw *w, int b) { op(w, b ? 0x88 : 0x89); }

/* Batches: call begin for item i of n, then write the item, then end for item i. */
static void batch_begin(pw *w, uint32_t i, uint32_t n)
{
    if (i % BATCH == 0 && n - i > 1) op(w, '(');
}

static void batch_end(pw *w, uint32_t i, uint32_t n, int dict)
{
    uint32_t start = i - i % BATCH;
    int last_of_batch = (i + 1) % BATCH == 0 || i + 1 == n;
    if (!last_of_batch) return;
    if (i == start && n - start == 1) op(w, dict ? 's' : 'a'); /* a lone item */
    else op(w, dict ? 'u' : 'e');
}

/* ---- the keys the model has no field for (snapshot.h, cmh_extra), back as they were ---- */

/* The end of the value at p (NULL: not one). */
static const char *x_skip(const char *p, int depth)
{
    if (!p || depth > 40) return NULL;
    switch (*p) {
    case 'N': case 'T': case 'F': return p + 1;
    case 'i': case 'd': {
        const char *e = strchr(p, ';');
        return e ? e + 1 : NULL;
    }
    case 's': {
        char *e;
        unsigned long long n = strtoull(p + 1, &e, 10);
        if (*e != ':' || strlen(e + 1) < n) return NULL;
        return e + 1 + n;
    }
    case '[': case '(': case '{': {
        char close = *p == '[' ? ']' : *p == '(' ? ')' : '}';
        p++;
        while (p && *p && *p != close) p = x_skip(p, depth + 1);
        return p && *p == close ? p + 1 : NULL;
    }
    default: return NULL;
    }
}

static const char *x_value(pw *w, const char *p, int depth)
{
    const char *end = x_skip(p, depth);
    if (!end) { /* not ours to read: None rather than a broken pickle */
        op(w, 'N');
        return NULL;
    }
    switch (*p) {
    case 'N': op(w, 'N'); break;
    case 'T': case 'F': w_bool(w, *p == 'T'); break;
    case 'i': w_int(w, strtoll(p + 1, NULL, 10)); break;
    case 'd': {
        double d = strtod(p + 1, NULL);
        uint64_t bits;
        memcpy(&bits, &d, 8);
        unsigned char b[9] = {'G'};
        for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(bits >> (56 - 8 * i));
        raw(w, b, 9);
        boundary(w);
        break;
    }
    case 's': {
        char *e;
        size_t n = (size_t)strtoull(p + 1, &e, 10);
        unsigned char h[5];
        if (n < 256) {
            h[0] = 0x8c;
            h[1] = (unsigned char)n;
            raw(w, h, 2);
        } else {
            h[0] = 'X';
            for (int i = 0; i < 4; i++) h[1 + i] = (unsigned char)(n >> (8 * i));
            raw(w, h, 5);
        }
        raw(w, e + 1, n);
        boundary(w);
        break;
    }
    case '(': {
        op(w, '(');
        for (const char *q = p + 1; q && *q != ')';) q = x_value(w, q, depth + 1);
        op(w, 't');
        break;
    }
    case '[': case '{': {
        int dict = *p == '{';
        char close = dict ? '}' : ']';
        uint32_t n = 0;
        for (const char *q = p + 1; *q != close; q = x_skip(q, depth + 1)) n++;
        if (dict) n /= 2;
        op(w, dict ? '}' : ']');
        const char *q = p + 1;
        for (uint32_t i = 0; i < n; i++) {
            batch_begin(w, i, n);
            q = x_value(w, q, depth + 1);
            if (dict) q = x_value(w, q, depth + 1);
            batch_end(w, i, n, dict);
        }
        break;
    }
    }
    return end;
}

/* The pairs of extra (a string id), pushed inside the MARK of the dict being written (its SETITEMS takes them). */
static void w_extra(pw *w, const cmh_snapshot *s, uint32_t extra)
{
    if (!extra) return;
    const char *p = cmh_str(s, extra), *end = p + strlen(p);
    uint32_t n = 0;
    for (const char *q = p; q && q < end; q = x_skip(q, 0)) n++;
    for (uint32_t i = 0; i + 1 < n && p; i += 2) { /* whole pairs only */
        p = x_value(w, p, 0);
        if (p) p = x_value(w, p, 0);
        else op(w, 'N');
    }
}

static void w_frames(pw *w, const cmh_snapshot *s, uint32_t stack)
{
    if (stack && w->stack_memo[stack]) {
        get(w, w->stack_memo[stack]);
        return;
    }
    op(w, ']');
    uint32_t slot = 0;
    if (stack) memoize(w, &slot);
    const cmh_stack *st = &s->stacks[stack];
    for (uint32_t i = 0; i < st->count; i++) {
        batch_begin(w, i, st->count);
        uint32_t fid = s->stack_frames[st->first + i];
        if (w->frame_memo[fid]) get(w, w->frame_memo[fid]);
        else {
            const cmh_frame *f = &s->frames[fid];
            op(w, '}');
            memoize(w, &w->frame_memo[fid]);
            op(w, '(');
            w_key(w, W_NAME);
            w_sid(w, s, f->name);
            w_key(w, W_FILENAME);
            w_sid(w, s, f->filename);
            w_key(w, W_LINE);
            w_int(w, f->line);
            w_extra(w, s, cmh_snapshot_extra(s, CMH_X_FRAME, fid));
            op(w, 'u');
        }
        batch_end(w, i, st->count, 0);
    }
    if (stack) w->stack_memo[stack] = slot;
}

static const char *state_name(int st)
{
    return st == CMH_BLOCK_ACTIVE_ALLOCATED ? "active_allocated" : st == CMH_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free" : "inactive";
}

static void w_segment(pw *w, const cmh_snapshot *s, const cmh_segment *g)
{
    uint64_t alloc = 0, active = 0, req = 0;
    for (uint32_t k = 0; k < g->nblocks; k++) {
        const cmh_block *b = &s->blocks[g->first_block + k];
        if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) alloc += b->size;
        if (b->state != CMH_BLOCK_INACTIVE) {
            active += b->size;
            req += b->requested;
        }
    }
    op(w, '}');
    op(w, '(');
    w_key(w, W_DEVICE);
    w_int(w, g->device);
    w_key(w, W_ADDRESS);
    w_int(w, (int64_t)g->addr);
    w_key(w, W_TOTAL_SIZE);
    w_int(w, (int64_t)g->size);
    w_key(w, W_ALLOCATED_SIZE);
    w_int(w, (int64_t)alloc);
    w_key(w, W_ACTIVE_SIZE);
    w_int(w, (int64_t)active);
    w_key(w, W_REQUESTED_SIZE);
    w_int(w, (int64_t)req);
    w_key(w, W_STREAM);
    w_int(w, (int64_t)g->stream);
    w_key(w, W_SEGMENT_TYPE);
    int small = cmh_segment_pool(g) == CMH_POOL_SMALL;
    w_key(w, small ? W_SMALL : W_LARGE);
    w_key(w, W_SEGMENT_POOL_ID);
    w_int(w, (int64_t)g->pool_id[0]);
    w_int(w, (int64_t)g->pool_id[1]);
    op(w, 0x86); /* TUPLE2 */
    w_key(w, W_IS_EXPANDABLE);
    w_bool(w, (g->flags & CMH_SEG_EXPANDABLE) != 0);
    w_key(w, W_FRAMES);
    w_frames(w, s, g->stack);
    w_extra(w, s, cmh_snapshot_extra(s, CMH_X_SEGMENT, (uint32_t)(g - s->segments)));
    if (g->kind != CMH_KIND_DEVICE || (g->flags & CMH_SEG_WHOLE_BLOCK)) { /* ours: ignored by PyTorch's readers */
        w_key(w, W_CMH_KIND);
        w_int(w, g->kind);
        w_key(w, W_CMH_WHOLE);
        w_bool(w, (g->flags & CMH_SEG_WHOLE_BLOCK) != 0);
    }
    w_key(w, W_BLOCKS);
    op(w, ']');
    for (uint32_t k = 0; k < g->nblocks; k++) {
        const cmh_block *b = &s->blocks[g->first_block + k];
        batch_begin(w, k, g->nblocks);
        op(w, '}');
        op(w, '(');
        w_key(w, W_ADDRESS);
        w_int(w, (int64_t)b->addr);
        w_key(w, W_SIZE);
        w_int(w, (int64_t)b->size);
        w_key(w, W_REQUESTED_SIZE);
        w_int(w, (int64_t)b->requested);
        w_key(w, W_STATE);
        str_body(w, state_name(b->state)); /* short and few: CPython would memoize; the viewer does not care */
        boundary(w);
        w_key(w, W_FRAMES);
        w_frames(w, s, b->state == CMH_BLOCK_INACTIVE ? 0 : b->stack);
        w_extra(w, s, cmh_snapshot_extra(s, CMH_X_BLOCK, g->first_block + k));
        op(w, 'u');
        batch_end(w, k, g->nblocks, 0);
    }
    op(w, 'u');
}

/* Whether device_traces holds an entry of this action: PyTorch's actions, marks where they
 * were PyTorch's own annotations (CMH_PT_MARKS_INLINE), and actions a newer PyTorch wrote that
 * this version does not know (CMH_EF_UNKNOWN_ACTION), always: they were read from the trace. */
static int written_entry(const cmh_entry *e, int inline_marks)
{
    if (cmh_entry_retried_oom(e)) return 0; /* PyTorch writes an 'oom' only once the allocation finally failed: aside */
    return e->action < CMH_ACT_MARK || (e->action == CMH_ACT_MARK && inline_marks) || CMH_ENTRY_UNKNOWN_ACTION(e);
}

/* Whether a reader of the pickle finds the entry in device_traces (what an aside item's position counts). */
static int kept_entry(const cmh_entry *e) { return e->action < CMH_ACT_MARK && !(e->flags & CMH_EF_IMPLIED) && !cmh_entry_retried_oom(e); }

static void w_entry(pw *w, const cmh_snapshot *s, const cmh_entry *e, int aside)
{
    op(w, '}');
    op(w, '(');
    w_key(w, W_ACTION);
    int unknown = CMH_ENTRY_UNKNOWN_ACTION(e); /* a newer PyTorch's action: written back as it was read */
    int mark = e->action == CMH_ACT_MARK && !unknown; /* a PyTorch annotation (CMH_PT_MARKS_INLINE): as newest PyTorch writes it */
    int ud = mark && (e->flags & CMH_EF_USER_DEFINED); /* as it was read: user_defined or annotate */
    if (unknown) w_sid(w, s, cmh_entry_name(s, e));
    else w_str_memo(w, mark ? cmh_pt_mark_action(e->flags) : cmh_action_name(e->action), &w->action_memo[ud ? CMH_ACT_COUNT : e->action]);
    if (e->action != CMH_ACT_OOM || cmh_entry_addr(s, e) != CMH_DEVICE_FREE_UNKNOWN) { /* not known: no key, as read */
        w_key(w, e->action == CMH_ACT_OOM ? W_DEVICE_FREE : W_ADDR);
        w_int(w, mark ? 0 : (int64_t)cmh_entry_addr(s, e));
    }
    w_key(w, W_SIZE);
    w_int(w, mark ? 0 : (int64_t)cmh_entry_size(s, e));
    w_key(w, W_STREAM);
    w_int(w, (int64_t)cmh_entry_stream(s, e));
    if (s->source != CMH_SRC_PYTORCH || (s->pt_fields & CMH_PT_TIME_US)) {
        w_key(w, W_TIME_US);
        w_int(w, cmh_entry_time(s, e) / 1000);
    }
    if (s->pt_fields & CMH_PT_COMPILE_CONTEXT) {
        w_key(w, W_COMPILE_CONTEXT);
        w_sid(w, s, cmh_entry_compile_context(s, e));
    }
    if (s->pt_fields & CMH_PT_USER_METADATA) {
        w_key(w, W_USER_METADATA);
        w_sid(w, s, cmh_entry_user_metadata(s, e));
    }
    /* as newer PyTorch writes it, on every entry or on none: (0, 0) the default pool */
    if (w->pooled) {
        cmh_pool_id p = cmh_entry_pool_id(s, e);
        w_key(w, W_POOL_ID);
        w_int(w, (int64_t)p.id[0]);
        w_int(w, (int64_t)p.id[1]);
        op(w, 0x86); /* TUPLE2 */
    }
    if (e->stack || (e->flags & CMH_EF_HAS_FRAMES)) {
        w_key(w, W_FRAMES);
        w_frames(w, s, aside ? 0 : e->stack); /* (aside: cumemhist.free_frames) */
    }
    if (mark) {
        w_key(w, W_NAME);
        w_sid(w, s, cmh_entry_name(s, e));
    }
    w_extra(w, s, cmh_entry_extra(s, e)); /* what newer PyTorch wrote that the model has no field for */
    /* ours, ignored by PyTorch's readers: what makes the round trip exact */
    if (unknown) {
        op(w, 'u');
        return;
    }
    if (e->flags & CMH_EF_IMPLIED) {
        w_key(w, W_CMH_IMPLIED);
        w_bool(w, 1);
    } else if (!mark && ((e->flags & CMH_EF_WHOLE_BLOCK) || e->kind != CMH_KIND_DEVICE)) {
        w_key(w, W_CMH_CODE);
        w_int(w, e->action | (e->flags & CMH_EF_WHOLE_BLOCK) << 4 | (e->kind & 7) << 5);
    }
    if (!(e->flags & CMH_EF_IMPLIED) && cmh_entry_requested(s, e) != cmh_entry_size(s, e)) {
        w_key(w, W_CMH_REQUESTED);
        w_int(w, (int64_t)cmh_entry_requested(s, e));
    }
    op(w, 'u');
}

/* allocator_settings values come back from their text form (pickle_read.c value_text). */
static void w_setting_value(pw *w, const cmh_snapshot *s, const cmh_setting *st)
{
    const char *v = cmh_str(s, st->value);
    switch (st->type) {
    case 1: w_int(w, strtoll(v, NULL, 10)); break;
    case 2: {
        double d = strtod(v, NULL);
        uint64_t bits;
        memcpy(&bits, &d, 8);
        unsigned char b[9] = {'G'};
        for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(bits >> (56 - 8 * i));
        raw(w, b, 9);
        boundary(w);
        break;
    }
    case 3: w_bool(w, !strcmp(v, "True")); break;
    case 4: { /* {"k": int, ...} */
        op(w, '}');
        uint32_t n = 0;
        for (const char *p = v; (p = strchr(p, ':')); p++) n++;
        uint32_t i = 0;
        for (const char *p = v; (p = strchr(p, '"'));) {
            const char *q = strchr(p + 1, '"');
            if (!q) break;
            char key[256];
            size_t kl = (size_t)(q - p - 1) < sizeof key - 1 ? (size_t)(q - p - 1) : sizeof key - 1;
            memcpy(key, p + 1, kl);
            key[kl] = 0;
            const char *colon = strchr(q, ':');
            if (!colon) break;
            batch_begin(w, i, n);
            str_body(w, key);
            boundary(w);
            w_int(w, strtoll(colon + 1, NULL, 10));
            batch_end(w, i, n, 1);
            i++;
            p = strchr(colon, ',');
            if (!p) break;
        }
        break;
    }
    default:
        str_body(w, v);
        boundary(w);
        break;
    }
}

/* The recording thread of each device's entries, for a leak judged per thread: one list per
 * device, [count, thread, count, thread, ...] run-length over the entries a reader keeps (not
 * the implied ones, nor marks), as the .cmh's `threads`.  Nothing when no thread is known. */
static void w_ours_threads(pw *w, const cmh_snapshot *s, int ndev)
{
    int any = 0;
    for (uint32_t i = 0; i < s->nxsets && !any; i++) any = s->xsets[i].thread != 0; /* entries carry it in their set */
    if (!any) return;
    uint32_t *rl = malloc(2 * ((size_t)s->nentries + 1) * sizeof *rl); /* count, thread, ... */
    if (!rl) {
        w->failed = w->nomem = 1;
        return;
    }
    w_key(w, W_THREADS);
    op(w, ']');
    for (int d = 0; d < ndev; d++) {
        uint32_t n = 0;
        for (uint32_t t = 0; t < s->ntraces; t++) {
            if (s->traces[t].device != d) continue;
            for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                if (e->action >= CMH_ACT_MARK || (e->flags & CMH_EF_IMPLIED)) continue;
                uint32_t th = cmh_entry_thread(s, e);
                if (n && rl[n - 1] == th) rl[n - 2]++;
                else rl[n++] = 1, rl[n++] = th;
            }
        }
        batch_begin(w, (uint32_t)d, (uint32_t)ndev);
        op(w, ']');
        for (uint32_t k = 0; k < n; k++) {
            batch_begin(w, k, n);
            w_int(w, rl[k]);
            batch_end(w, k, n, 0);
        }
        batch_end(w, (uint32_t)d, (uint32_t)ndev, 0);
    }
    free(rl);
}

/* The module map and each written frame's module, by reference to its frame dict: who called
 * the driver (a block's owner) is read from it.  Nothing without a module map. */
static void w_ours_modules(pw *w, const cmh_snapshot *s)
{
    if (!s->nmodules) return;
    w_key(w, W_MODULES);
    op(w, ']');
    for (uint32_t i = 0; i < s->nmodules; i++) {
        const cmh_module *md = &s->modules[i];
        batch_begin(w, i, s->nmodules);
        op(w, '(');
        w_sid(w, s, md->path);
        w_sid(w, s, md->build_id);
        w_int(w, (int64_t)md->base);
        w_int(w, (int64_t)md->size);
        op(w, 't');
        batch_end(w, i, s->nmodules, 0);
    }
    uint32_t n = 0, k = 0;
    for (uint32_t i = 0; i < s->nframes; i++)
        n += w->frame_memo[i] && s->frames[i].module >= 0 && (uint32_t)s->frames[i].module < s->nmodules;
    w_key(w, W_FRAME_MODULES);
    op(w, ']');
    for (uint32_t i = 0; i < s->nframes; i++) {
        if (!w->frame_memo[i] || s->frames[i].module < 0 || (uint32_t)s->frames[i].module >= s->nmodules) continue;
        batch_begin(w, k, n);
        op(w, '(');
        get(w, w->frame_memo[i]);
        w_int(w, s->frames[i].module);
        op(w, 't');
        batch_end(w, k, n, 0);
        k++;
    }
}

int cmh_pickle_write(const cmh_snapshot *s, FILE *fp) { return cmh_pickle_write_marks(s, NULL, 0, fp); }

int cmh_pickle_write_marks(const cmh_snapshot *s, const cmh_pickle_mark *marks, uint32_t nmarks, FILE *fp)
{
    pw w;
    memset(&w, 0, sizeof w);
    w.pooled = cmh_snapshot_entry_pools(s);
    w.fp = fp;
    w.str_memo = calloc(s->strings.n + 1, sizeof *w.str_memo);
    w.frame_memo = calloc(s->nframes + 1, sizeof *w.frame_memo);
    w.stack_memo = calloc(s->nstacks + 1, sizeof *w.stack_memo);
    w.action_memo = calloc(CMH_ACT_COUNT + 1, sizeof *w.action_memo); /* + 'user_defined' */
    if (!w.str_memo || !w.frame_memo || !w.stack_memo || !w.action_memo) {
        w.failed = w.nomem = 1;
        goto out;
    }
    const unsigned char proto[2] = {0x80, 4};
    if (fwrite(proto, 1, 2, fp) != 2) w.failed = 1;

    int ndev = 0;
    for (uint32_t i = 0; i < s->ntraces; i++)
        if (s->traces[i].device >= ndev) ndev = s->traces[i].device + 1;
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].device >= ndev) ndev = s->segments[i].device + 1;
    if (ndev == 0) ndev = 1; /* memory_viz wants at least one device trace */

    int has_settings = (s->pt_fields & CMH_PT_ALLOCATOR_SETTINGS) != 0;
    int has_ann = (s->pt_fields & CMH_PT_EXTERNAL_ANNOTATIONS) != 0 || s->nannotations;
    int ours = s->pid != 0 || (s->pt_fields & CMH_PT_FROM_RECORDER);
    op(&w, '}');
    op(&w, '(');

    /* segments (device -1, pinned host memory, has no place in PyTorch's schema) */
    w_key(&w, W_SEGMENTS);
    op(&w, ']');
    uint32_t nseg = 0, si = 0;
    for (uint32_t i = 0; i < s->nsegments; i++) nseg += s->segments[i].device >= 0;
    for (uint32_t i = 0; i < s->nsegments; i++) {
        if (s->segments[i].device < 0) continue;
        batch_begin(&w, si, nseg);
        w_segment(&w, s, &s->segments[i]);
        batch_end(&w, si, nseg, 0);
        si++;
    }

    w_key(&w, W_DEVICE_TRACES);
    op(&w, ']');
    for (int d = 0; d < ndev; d++) {
        batch_begin(&w, (uint32_t)d, (uint32_t)ndev);
        op(&w, ']');
        for (uint32_t t = 0; t < s->ntraces; t++) {
            if (s->traces[t].device != d) continue;
            const cmh_trace *tr = &s->traces[t];
            uint32_t n = 0;
            int inline_marks = CMH_PT_MARKS_INLINE(s);
            for (uint32_t i = 0; i < tr->nentries; i++) n += written_entry(&s->entries[tr->first_entry + i], inline_marks);
            uint32_t k = 0;
            for (uint32_t i = 0; i < tr->nentries; i++) {
                const cmh_entry *e = &s->entries[tr->first_entry + i];
                if (!written_entry(e, inline_marks)) continue; /* not PyTorch actions (marks: see external_annotations) */
                batch_begin(&w, k, n);
                w_entry(&w, s, e, cmh_entry_free_stack_aside(s, tr, i));
                batch_end(&w, k, n, 0);
                k++;
            }
        }
        batch_end(&w, (uint32_t)d, (uint32_t)ndev, 0);
    }

    if (has_settings) {
        w_key(&w, W_ALLOCATOR_SETTINGS);
        op(&w, '}');
        for (uint32_t i = 0; i < s->nsettings; i++) {
            batch_begin(&w, i, s->nsettings);
            w_sid(&w, s, s->settings[i].key);
            w_setting_value(&w, s, &s->settings[i]);
            batch_end(&w, i, s->nsettings, 1);
        }
    }
    if (has_ann) {
        w_key(&w, W_EXTERNAL_ANNOTATIONS);
        op(&w, ']');
        for (uint32_t i = 0; i < s->nannotations; i++) {
            const cmh_annotation *a = &s->annotations[i];
            batch_begin(&w, i, s->nannotations);
            op(&w, '}');
            op(&w, '(');
            w_key(&w, W_NAME);
            w_sid(&w, s, a->name);
            w_key(&w, W_STAGE);
            w_key(&w, a->stage ? W_END : W_START);
            w_key(&w, W_DEVICE);
            w_int(&w, a->device);
            w_key(&w, W_TIME_US);
            w_int(&w, a->time_ns / 1000);
            op(&w, 'u');
            batch_end(&w, i, s->nannotations, 0);
        }
    }
    w_extra(&w, s, s->pt_extra);
    if (ours) { /* where the snapshot came from, for pickle_read.c; PyTorch's readers ignore it */
        w_key(&w, W_CUMEMHIST);
        op(&w, '}');
        op(&w, '(');
        w_key(&w, W_SOURCE);
        str_body(&w, (s->pt_fields & CMH_PT_FROM_RECORDER) ? "recorder" : "pytorch");
        boundary(&w);
        w_key(&w, W_PID);
        w_int(&w, s->pid);
        /* the recorder's --context (recorder.h): with "all" a free entry's frames are the free's own
         * line, never its block's allocation site (cmh_frees_carry_own_stacks) */
        if (s->pt_fields & CMH_PT_FROM_RECORDER) {
            w_key(&w, W_CONTEXT);
            w_int(&w, s->opt_context);
        }
        w_key(&w, W_HOST);
        str_body(&w, cmh_str(s, s->hostname));
        boundary(&w);
        w_key(&w, W_CMDLINE);
        str_body(&w, cmh_str(s, s->cmdline));
        boundary(&w);
        w_key(&w, W_DROPPED);
        op(&w, ']');
        for (int d = 0; d < ndev; d++) {
            uint64_t dr = 0;
            for (uint32_t t = 0; t < s->ntraces; t++)
                if (s->traces[t].device == d) dr += s->traces[t].dropped;
            batch_begin(&w, (uint32_t)d, (uint32_t)ndev);
            w_int(&w, (int64_t)dr);
            batch_end(&w, (uint32_t)d, (uint32_t)ndev, 0);
        }
        /* stream-ordered pool samples, which no PyTorch action carries: (device, position in
         * that device's written trace, pool, reserved, used, time_us) */
        uint32_t nps = 0;
        for (uint32_t i = 0; i < s->nentries; i++) nps += s->entries[i].action == CMH_ACT_POOL_SAMPLE;
        if (nps) {
            w_key(&w, W_POOL_SAMPLES);
            op(&w, ']');
            uint32_t k = 0;
            for (int d = 0; d < ndev; d++) {
                int64_t pos = 0;
                for (uint32_t t = 0; t < s->ntraces; t++) {
                    if (s->traces[t].device != d) continue;
                    for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                        const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                        if (kept_entry(e)) pos++; /* what a reader keeps */
                        if (e->action != CMH_ACT_POOL_SAMPLE) continue;
                        batch_begin(&w, k, nps);
                        op(&w, '(');
                        w_int(&w, d);
                        w_int(&w, pos);
                        w_int(&w, (int64_t)cmh_entry_addr(s, e));
                        w_int(&w, (int64_t)cmh_entry_size(s, e));
                        w_int(&w, (int64_t)cmh_entry_requested(s, e));
                        w_int(&w, cmh_entry_time(s, e) / 1000);
                        op(&w, 't');
                        batch_end(&w, k, nps, 0);
                        k++;
                    }
                }
            }
            /* what else the model holds of each sample, in the same order (a separate list, so a
             * reader that knows only pool_samples still reads them): (stream: the CMH_POOL_* bits,
             * flags: CMH_EF_AT_DUMP, thread, frames: cuMemPoolCreate's stack) */
            w_key(&w, W_POOL_SAMPLE_TAGS);
            op(&w, ']');
            k = 0;
            for (int d = 0; d < ndev; d++)
                for (uint32_t t = 0; t < s->ntraces; t++) {
                    if (s->traces[t].device != d) continue;
                    for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                        const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                        if (e->action != CMH_ACT_POOL_SAMPLE) continue;
                        batch_begin(&w, k, nps);
                        op(&w, '(');
                        w_int(&w, (int64_t)cmh_entry_stream(s, e));
                        w_int(&w, e->flags);
                        w_int(&w, cmh_entry_thread(s, e));
                        w_frames(&w, s, e->stack);
                        op(&w, 't');
                        batch_end(&w, k, nps, 0);
                        k++;
                    }
                }
        }
        /* OOMs the allocator retried with success (CMH_EF_RETRIED), which PyTorch's trace has no
         * 'oom' for: (device, position as a pool sample's, order among the device's pool samples
         * and these, size, device_free (None: not known), stream, time_us, kind, frames) */
        uint32_t nro = 0;
        for (uint32_t i = 0; i < s->nentries; i++) nro += cmh_entry_retried_oom(&s->entries[i]);
        if (nro) {
            w_key(&w, W_RETRIED_OOMS);
            op(&w, ']');
            uint32_t k = 0;
            for (int d = 0; d < ndev; d++) {
                int64_t pos = 0, order = 0;
                for (uint32_t t = 0; t < s->ntraces; t++) {
                    if (s->traces[t].device != d) continue;
                    for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                        const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                        if (kept_entry(e)) pos++;
                        if (e->action == CMH_ACT_POOL_SAMPLE) order++;
                        if (!cmh_entry_retried_oom(e)) continue;
                        batch_begin(&w, k, nro);
                        op(&w, '(');
                        w_int(&w, d);
                        w_int(&w, pos);
                        w_int(&w, order++);
                        w_int(&w, (int64_t)cmh_entry_size(s, e));
                        if (cmh_entry_addr(s, e) == CMH_DEVICE_FREE_UNKNOWN) op(&w, 'N');
                        else w_int(&w, (int64_t)cmh_entry_addr(s, e));
                        w_int(&w, (int64_t)cmh_entry_stream(s, e));
                        w_int(&w, cmh_entry_time(s, e) / 1000);
                        w_int(&w, e->kind);
                        w_frames(&w, s, e->stack);
                        op(&w, 't');
                        batch_end(&w, k, nro, 0);
                        k++;
                    }
                }
            }
        }
        /* the frees' frames written empty in device_traces (cmh_entry_free_stack_aside): (device, which of
         * the device's segment_free and segment_unmap entries, counted from 0, frames) */
        uint32_t nff = 0;
        for (uint32_t t = 0; t < s->ntraces; t++)
            for (uint32_t i = 0; s->traces[t].device >= 0 && i < s->traces[t].nentries; i++) nff += cmh_entry_free_stack_aside(s, &s->traces[t], i);
        if (nff) {
            w_key(&w, W_FREE_FRAMES);
            op(&w, ']');
            uint32_t k = 0;
            for (int d = 0; d < ndev; d++) {
                int64_t nth = 0;
                for (uint32_t t = 0; t < s->ntraces; t++) {
                    if (s->traces[t].device != d) continue;
                    for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                        const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                        if (e->action != CMH_ACT_SEGMENT_FREE && e->action != CMH_ACT_SEGMENT_UNMAP) continue;
                        if (cmh_entry_free_stack_aside(s, &s->traces[t], i)) {
                            batch_begin(&w, k, nff);
                            op(&w, '(');
                            w_int(&w, d);
                            w_int(&w, nth);
                            w_frames(&w, s, e->stack);
                            op(&w, 't');
                            batch_end(&w, k, nff, 0);
                            k++;
                        }
                        nth++;
                    }
                }
            }
        }
        /* what the driver said of each device's memory (cuMemGetInfo: owners' "not recorded" row),
         * (device, time_ns, free, total, thread), and the record's start and dump, which owners
         * and the reports place those samples and the end by: in nanoseconds, as the .cmh has them */
        if (s->nmeminfo) {
            w_key(&w, W_MEMINFO);
            op(&w, ']');
            for (uint32_t i = 0; i < s->nmeminfo; i++) {
                const cmh_meminfo *m = &s->meminfo[i];
                batch_begin(&w, i, s->nmeminfo);
                op(&w, '(');
                w_int(&w, m->device);
                w_int(&w, m->time_ns);
                w_int(&w, (int64_t)m->free);
                w_int(&w, (int64_t)m->total);
                w_int(&w, m->thread);
                op(&w, 't');
                batch_end(&w, i, s->nmeminfo, 0);
            }
        }
        /* the physical memory of cuMemCreate handles (the .cmh's vmm_unmapped and vmm_maps), which
         * the trace's segment_map entries do not say: owners and peak charge a handle's whole size
         * once however many ranges map it, and a handle held but mapped nowhere at the end.
         * vmm_unmapped: (device, size, time_ns, frames); vmm_maps, in the order made: (device,
         * addr, size, time_ns, handle, handle_size, handle_time_ns, frames of cuMemCreate) */
        if (s->nvmm_unmapped) {
            w_key(&w, W_VMM_UNMAPPED);
            op(&w, ']');
            for (uint32_t i = 0; i < s->nvmm_unmapped; i++) {
                const cmh_vmm_handle *h = &s->vmm_unmapped[i];
                batch_begin(&w, i, s->nvmm_unmapped);
                op(&w, '(');
                w_int(&w, h->device);
                w_int(&w, (int64_t)h->size);
                w_int(&w, h->time_ns);
                w_frames(&w, s, h->stack < s->nstacks ? h->stack : 0);
                op(&w, 't');
                batch_end(&w, i, s->nvmm_unmapped, 0);
            }
        }
        if (s->nvmm_maps) {
            w_key(&w, W_VMM_MAPS);
            op(&w, ']');
            for (uint32_t i = 0; i < s->nvmm_maps; i++) {
                const cmh_vmm_map *v = &s->vmm_maps[i];
                batch_begin(&w, i, s->nvmm_maps);
                op(&w, '(');
                w_int(&w, v->device);
                w_int(&w, (int64_t)v->addr);
                w_int(&w, (int64_t)v->size);
                w_int(&w, v->time_ns);
                w_int(&w, (int64_t)v->handle);
                w_int(&w, (int64_t)v->handle_size);
                w_int(&w, v->handle_time_ns);
                w_frames(&w, s, v->handle_stack < s->nstacks ? v->handle_stack : 0);
                op(&w, 't');
                batch_end(&w, i, s->nvmm_maps, 0);
            }
        }
        /* what a recovery from a cut flight record could not read (the .cmh's history_lost): the
         * reports over the pickle say it, and `leaks --fail-on-leak` fails on it, as over the .cmh.
         * (cut_bytes, file_bytes, read_to, torn, damaged, refused) */
        if (CMH_HISTORY_LOST(&s->history_lost)) {
            const cmh_history_lost *h = &s->history_lost;
            w_key(&w, W_HISTORY_LOST);
            op(&w, '(');
            w_int(&w, (int64_t)h->cut_bytes);
            w_int(&w, (int64_t)h->file_bytes);
            w_int(&w, (int64_t)h->read_to);
            w_int(&w, (int64_t)h->torn);
            w_int(&w, (int64_t)h->damaged);
            w_int(&w, (int64_t)h->refused);
            op(&w, 't');
        }
        /* driver calls that failed other than OOM (the .cmh's driver_errors, which no trace entry
         * says): (call, result, count, [(addr, size, thread, time_ns, frames), ...]) */
        if (s->ndrv_errors) {
            w_key(&w, W_DRIVER_ERRORS);
            op(&w, ']');
            for (uint32_t i = 0; i < s->ndrv_errors; i++) {
                const cmh_drv_error *e = &s->drv_errors[i];
                uint32_t ns = e->nsites < CMH_DRV_ERROR_SITES ? e->nsites : CMH_DRV_ERROR_SITES;
                batch_begin(&w, i, s->ndrv_errors);
                op(&w, '(');
                char call[sizeof e->call + 1];
                snprintf(call, sizeof call, "%.*s", (int)sizeof e->call, e->call);
                str_body(&w, call);
                boundary(&w);
                w_int(&w, e->result);
                w_int(&w, (int64_t)e->count);
                op(&w, ']');
                for (uint32_t j = 0; j < ns; j++) {
                    const cmh_drv_error_site *st = &e->sites[j];
                    batch_begin(&w, j, ns);
                    op(&w, '(');
                    w_int(&w, (int64_t)st->addr);
                    w_int(&w, (int64_t)st->size);
                    w_int(&w, st->thread);
                    w_int(&w, st->time_ns);
                    w_frames(&w, s, st->stack < s->nstacks ? st->stack : 0);
                    op(&w, 't');
                    batch_end(&w, j, ns, 0);
                }
                op(&w, 't');
                batch_end(&w, i, s->ndrv_errors, 0);
            }
        }
        /* which GPU each device number was (the .cmh's device_ids: `ranks`, sqlite's devices):
         * (device, uuid, name, pci_bus), "" where not known */
        if (s->nidents) {
            w_key(&w, W_DEVICE_IDS);
            op(&w, ']');
            for (uint32_t i = 0; i < s->nidents; i++) {
                const cmh_device_ident *d = &s->idents[i];
                char buf[sizeof d->name + 1];
                batch_begin(&w, i, s->nidents);
                op(&w, '(');
                w_int(&w, d->device);
                snprintf(buf, sizeof buf, "%.*s", (int)sizeof d->uuid, d->uuid);
                str_body(&w, buf);
                boundary(&w);
                snprintf(buf, sizeof buf, "%.*s", (int)sizeof d->name, d->name);
                str_body(&w, buf);
                boundary(&w);
                snprintf(buf, sizeof buf, "%.*s", (int)sizeof d->pci_bus, d->pci_bus);
                str_body(&w, buf);
                boundary(&w);
                op(&w, 't');
                batch_end(&w, i, s->nidents, 0);
            }
        }
        /* which process of a job it was, and how it ended (every report's first lines) */
        if (s->rank >= 0 || s->local_rank >= 0 || s->world_size >= 0 || s->forked_from > 0) {
            w_key(&w, W_PROCESS); /* (rank, local_rank, world_size, forked_from): -1, 0 unknown */
            op(&w, '(');
            w_int(&w, s->rank);
            w_int(&w, s->local_rank);
            w_int(&w, s->world_size);
            w_int(&w, s->forked_from);
            op(&w, 't');
        }
        uint64_t any_dooms = 0;
        for (uint32_t t = 0; t < s->ntraces; t++) any_dooms |= s->traces[t].dropped_ooms;
        if (any_dooms) { /* per device, as dropped: the OOM entries among the dropped ones */
            w_key(&w, W_DROPPED_OOMS);
            op(&w, ']');
            for (int d = 0; d < ndev; d++) {
                uint64_t n = 0;
                for (uint32_t t = 0; t < s->ntraces; t++)
                    if (s->traces[t].device == d) n += s->traces[t].dropped_ooms;
                batch_begin(&w, (uint32_t)d, (uint32_t)ndev);
                w_int(&w, (int64_t)n);
                batch_end(&w, (uint32_t)d, (uint32_t)ndev, 0);
            }
        }
        if (s->ending) {
            w_key(&w, W_ENDING);
            w_sid(&w, s, s->ending);
        }
        if (s->start_time_ns) {
            w_key(&w, W_START_NS);
            w_int(&w, s->start_time_ns);
        }
        if (s->dump_time_ns) {
            w_key(&w, W_DUMP_NS);
            w_int(&w, s->dump_time_ns);
        }
        /* the record's clock origin, in ns as the .cmh has it: its earliest event may be one the
         * pickle leaves out (pinned host memory), and every "+N" time counts from it (a device's
         * peak read +571 us from the .cmh, +418 us from its pickle) */
        int64_t origin = cmh_snapshot_clock_origin(s);
        if (origin) {
            w_key(&w, W_CLOCK_ORIGIN_NS);
            w_int(&w, origin);
        }
        /* the recorder's word that its dump read every pool (replay.c, pools_stale_end), a setting
         * that allocator_settings carries only where the record has PyTorch's */
        for (uint32_t i = 0; !has_settings && i < s->nsettings; i++)
            if (!strcmp(cmh_str(s, s->settings[i].key), "pools_read_at_dump") && !strcmp(cmh_str(s, s->settings[i].value), "1")) {
                w_key(&w, W_POOLS_READ_AT_DUMP);
                w_int(&w, 1);
                break;
            }
        w_ours_threads(&w, s, ndev);
        if (s->nthreads) { /* (thread, tid, name): which thread a number is */
            w_key(&w, W_THREAD_IDS);
            op(&w, ']');
            for (uint32_t i = 0; i < s->nthreads; i++) {
                batch_begin(&w, i, s->nthreads);
                op(&w, '(');
                w_int(&w, s->threads[i].thread);
                w_int(&w, s->threads[i].tid);
                w_sid(&w, s, s->threads[i].name);
                op(&w, 't');
                batch_end(&w, i, s->nthreads, 0);
            }
        }
        if (nmarks) { /* (device, position, name, time_us, thread), in trace order */
            w_key(&w, W_MARKS);
            op(&w, ']');
            for (uint32_t i = 0; i < nmarks; i++) {
                batch_begin(&w, i, nmarks);
                op(&w, '(');
                w_int(&w, marks[i].device);
                w_int(&w, (int64_t)marks[i].pos);
                w_sid(&w, s, marks[i].name);
                w_int(&w, marks[i].time_ns / 1000);
                w_int(&w, marks[i].thread);
                op(&w, 't');
                batch_end(&w, i, nmarks, 0);
            }
        }
        w_ours_modules(&w, s);
        op(&w, 'u');
    }
    op(&w, 'u');
    raw(&w, ".", 1);
    flush_frame(&w);
out:
    free(w.buf);
    free(w.str_memo);
    free(w.frame_memo);
    free(w.stack_memo);
    free(w.action_memo);
    return w.nomem ? CMH_ENOMEM : w.failed || ferror(fp) ? CMH_EIO : CMH_OK;
}
