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

#include "pickle_writer.h"

const char *const pkw_keys[W_NKEYS] = {
    "segments", "device_traces", "allocator_settings", "external_annotations", "device", "address",
    "total_size", "allocated_size", "active_size", "requested_size", "stream", "segment_type",
    "segment_pool_id", "is_expandable", "frames", "blocks", "size", "state", "action", "addr", "device_free",
    "time_us", "compile_context", "user_metadata", "name", "filename", "line", "stage", "START", "END",
    "small", "large", "inactive", "active_allocated", "active_pending_free", "cmh_code", "cmh_requested",
    "cmh_implied", "cmh_kind", "cmh_whole", "cumemhist", "source", "pid", "dropped", "pool_samples", "host", "cmdline",
    "modules", "frame_modules", "threads", "marks", "thread_ids", "pool_id", "meminfo", "start_ns", "dump_ns", "process", "ending",
    "dropped_ooms", "retried_ooms", "clock_origin_ns", "pool_sample_tags", "pools_read_at_dump", "context", "vmm_unmapped", "vmm_maps",
    "free_frames",
    "history_lost", "driver_errors", "device_ids", "vmm_released",
};

__attribute__((noinline)) int pkw_grow(pw *w, size_t n)
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

void pkw_flush_frame(pw *w)
{
    if (!w->n) return;
    unsigned char h[9] = {0x95};
    uint64_t n = w->n;
    for (int i = 0; i < 8; i++) h[1 + i] = (unsigned char)(n >> (8 * i));
    if (fwrite(h, 1, 9, w->fp) != 9 || fwrite(w->buf, 1, w->n, w->fp) != w->n) w->failed = 1;
    w->n = 0;
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
    case 'd': w_float(w, strtod(p + 1, NULL)); break;
    case 's': {
        char *e;
        size_t n = (size_t)strtoull(p + 1, &e, 10);
        str_head(w, n);
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

void pkw_frames(pw *w, const cmh_snapshot *s, uint32_t stack)
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
    pkw_frames(w, s, g->stack);
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
        pkw_frames(w, s, b->state == CMH_BLOCK_INACTIVE ? 0 : b->stack);
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

uint64_t cmh_pickle_trace_entries(const cmh_snapshot *s, uint64_t *implied)
{
    uint64_t n = 0, imp = 0;
    int inline_marks = CMH_PT_MARKS_INLINE(s);
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        if (tr->device < 0) continue; /* (no device trace of its own in PyTorch's schema) */
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            if (!written_entry(e, inline_marks)) continue;
            n++;
            imp += (e->flags & CMH_EF_IMPLIED) != 0;
        }
    }
    if (implied) *implied = imp;
    return n;
}

/* Whether a reader of the pickle finds the entry in device_traces (what an aside item's position counts). */
int pkw_kept_entry(const cmh_entry *e) { return e->action < CMH_ACT_MARK && !(e->flags & CMH_EF_IMPLIED) && !cmh_entry_retried_oom(e); }

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
        pkw_frames(w, s, aside ? 0 : e->stack); /* (aside: cumemhist.free_frames) */
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
    case 2: w_float(w, strtod(v, NULL)); break;
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
    if (ours) pkw_side(&w, s, ndev, has_settings, marks, nmarks); /* for pickle_read.c; PyTorch's readers ignore it */
    op(&w, 'u');
    raw(&w, ".", 1);
    pkw_flush_frame(&w);
out:
    free(w.buf);
    free(w.str_memo);
    free(w.frame_memo);
    free(w.stack_memo);
    free(w.action_memo);
    return w.nomem ? CMH_ENOMEM : w.failed || ferror(fp) ? CMH_EIO : CMH_OK;
}
