/*
 * pickle_model.c - PyTorch's snapshot schema (docs/PYTORCH.md, Snapshot schema) into the model, for pickle_read.c.
 *
 * Frames, frame lists and trace entries are converted while the machine runs, the moment their
 * container is complete, so the bulk of a snapshot never exists twice; segments, blocks,
 * settings, annotations and what cumemhist's own exports keep aside are converted from the
 * finished root.  The schema has a fixed depth: nothing here recurses on the input.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cumemhist/recorder.h"
#include "oatab.h"
#include "pickle_internal.h"

const char *const pk_key_names[NKEYS] = {
    "segments", "device_traces", "allocator_settings", "external_annotations", "device", "address",
    "total_size", "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks", "size",
    "requested_size", "state", "history", "addr", "real_size", "action", "time_us", "compile_context",
    "user_metadata", "device_free", "name", "filename", "line", "stage", "large", "small",
    "active_allocated", "active_pending_free", "active_awaiting_free", "inactive", "START", "END", "cmh_code",
    "cmh_requested", "cmh_implied", "cmh_kind", "cmh_whole", "cumemhist", "source", "pid", "dropped", "recorder",
    "pool_samples", "host", "cmdline", "modules", "frame_modules", "threads", "marks", "thread_ids", "pool_id",
    "meminfo", "start_ns", "dump_ns", "process", "ending", "dropped_ooms", "allocated_size", "active_size", "retried_ooms",
    "clock_origin_ns", "pool_sample_tags", "pools_read_at_dump", "context", "vmm_unmapped", "vmm_maps",
    "free_frames",
    "history_lost", "driver_errors", "device_ids",
};

/* ---- keys the model has no field for (snapshot.h, cmh_extra), kept as text ---- */

typedef struct xbuf {
    char *p;
    size_t n, cap;
    int nomem;
} xbuf;

static void xput(xbuf *b, const char *s, size_t n)
{
    if (b->nomem) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->nomem = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void xfmt(xbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xfmt(xbuf *b, const char *fmt, ...)
{
    char t[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    if (n > 0) xput(b, t, (size_t)n < sizeof t ? (size_t)n : sizeof t - 1);
}

static void xstr(xbuf *b, const char *s)
{
    size_t n = strlen(s);
    xfmt(b, "s%zu:", n);
    xput(b, s, n);
}

static void xframe(pm *m, xbuf *b, uint32_t fid)
{
    const cmh_frame *f = &m->s->frames[fid];
    xput(b, "{", 1);
    xstr(b, "name");
    xstr(b, cmh_str(m->s, f->name));
    xstr(b, "filename");
    xstr(b, cmh_str(m->s, f->filename));
    xstr(b, "line");
    xfmt(b, "i%lld;", (long long)f->line);
    const char *fx = cmh_str(m->s, cmh_snapshot_extra(m->s, CMH_X_FRAME, fid));
    xput(b, fx, strlen(fx));
    xput(b, "}", 1);
}

static void xvalue(pm *m, xbuf *b, const pv *v, int depth)
{
    if (depth > 32) { /* deeper than any schema: cut, as None */
        xput(b, "N", 1);
        return;
    }
    switch (v->tag) {
    case PV_BOOL: xput(b, v->u.i ? "T" : "F", 1); return;
    case PV_INT: xfmt(b, "i%lld;", (long long)v->u.i); return;
    case PV_FLOAT: xfmt(b, "d%a;", v->u.f); return;
    case PV_STR: xstr(b, cmh_str(m->s, v->u.id)); return;
    case PV_FRAME: xframe(m, b, v->u.id); return;
    case PV_STACK: {
        const cmh_stack *st = &m->s->stacks[v->u.id];
        xput(b, "[", 1);
        for (uint32_t i = 0; i < st->count; i++) xframe(m, b, m->s->stack_frames[st->first + i]);
        xput(b, "]", 1);
        return;
    }
    case PV_POOL: {
        uint64_t id[2] = {0, 0};
        if (v->u.id && v->u.id < m->s->npool_ids) id[0] = m->s->pool_ids[v->u.id].id[0], id[1] = m->s->pool_ids[v->u.id].id[1];
        xfmt(b, "(i%lld;", (long long)id[0]);
        xfmt(b, "i%lld;)", (long long)id[1]);
        return;
    }
    case PV_CONT: {
        const pcont *c = &m->conts[v->u.id];
        if (c->conv_tag) { /* converted where it was shared: what it became */
            pv cv = {c->conv_tag == PV_SKIP ? PV_NONE : c->conv_tag, {.id = c->conv_id}};
            if (cv.tag == PV_ENTRY) cv.tag = PV_NONE;
            xvalue(m, b, &cv, depth);
            return;
        }
        const char *o = c->kind == C_DICT ? "{}" : c->kind == C_TUPLE ? "()" : "[]";
        xput(b, o, 1);
        for (uint32_t i = 0; i < c->n; i++) xvalue(m, b, &c->items[i], depth + 1);
        xput(b, o + 1, 1);
        return;
    }
    default: xput(b, "N", 1); return;
    }
}

/* The pairs of a dict whose keys are not among known (K_* ids; n of them) as one interned
 * string (0: none).  -1 out of memory. */
static int extras_of(pm *m, const pv *items, uint32_t n, const int *known, int nknown, uint32_t *out)
{
    *out = 0;
    xbuf b = {0};
    for (uint32_t i = 0; i + 1 < n; i += 2) {
        if (items[i].tag != PV_STR) continue;
        int k = 0;
        while (k < nknown && m->key[known[k]] != items[i].u.id) k++;
        if (k < nknown) continue;
        xstr(&b, cmh_str(m->s, items[i].u.id));
        xvalue(m, &b, &items[i + 1], 0);
    }
    if (!b.nomem && b.n && cmh_strtab_intern(&m->s->strings, b.p, b.n, out) != CMH_OK) b.nomem = 1;
    free(b.p);
    return b.nomem ? pk_nomem(m) : 0;
}

static const int frame_known[] = {K_NAME, K_FILENAME, K_LINE};

/* ---- eager conversion of frames, stacks, entries ---- */

static int64_t us_to_ns(int64_t us)
{
    if (us > INT64_MAX / 1000) return INT64_MAX;
    if (us < INT64_MIN / 1000) return INT64_MIN;
    return us * 1000;
}

static int to_i64(const pv *v, int64_t *out)
{
    if (v->tag == PV_INT || v->tag == PV_BOOL) {
        *out = v->u.i;
        return 1;
    }
    return 0;
}

static int frame_of(pm *m, pcont *d, uint32_t *frame_id)
{
    const pv *name = pk_dict_get(m, d, m->key[K_NAME]), *file = pk_dict_get(m, d, m->key[K_FILENAME]);
    const pv *line = pk_dict_get(m, d, m->key[K_LINE]);
    if (!name || !file || name->tag != PV_STR || file->tag != PV_STR)
        return pk_fail(m, "a frame without str 'name' and 'filename' (near byte %zu)", m->op_at);
    int64_t ln = 0;
    if (line) to_i64(line, &ln);
    uint32_t extra = 0; /* newer PyTorch's 'fx_*' keys: a frame differs by them too */
    if (d->n > 6 && extras_of(m, d->items, d->n, frame_known, 3, &extra)) return -1;
    /* identical frames share one id even when the writer did not share the object */
    uint64_t h = cmh_oa_hashkey(cmh_oa_mix(((uint64_t)name->u.id << 32 | file->u.id) ^ (uint64_t)ln * 0x9E3779B97F4A7C15ull ^
                                           (uint64_t)extra << 17));
    uint32_t pos = UINT32_MAX;
    for (frame_slot *o; (o = cmh_oa_next(&m->frames, h, &pos));)
        if (o->name == name->u.id && o->filename == file->u.id && o->line == ln && o->extra == extra) {
            *frame_id = o->id;
            return 0;
        }
    cmh_frame f = {0, name->u.id, file->u.id, ln, -1};
    frame_slot *o;
    if (cmh_snapshot_add_frame(m->s, &f, frame_id) != CMH_OK || !(o = cmh_oa_add(&m->frames, h)) ||
        cmh_snapshot_add_extra(m->s, CMH_X_FRAME, *frame_id, extra) != CMH_OK)
        return pk_nomem(m);
    o->name = name->u.id;
    o->filename = file->u.id;
    o->id = *frame_id;
    o->line = ln;
    o->extra = extra;
    return 0;
}

int pk_frame_of(pm *m, const pv *items, uint32_t n, uint32_t *frame_id)
{
    pcont d = {.kind = C_DICT, .n = n, .items = (pv *)items};
    return frame_of(m, &d, frame_id);
}

/* A frame dict (if v is one) becomes PV_FRAME. */
int pk_convert_frame(pm *m, pv *v)
{
    pcont *c;
    if (v->tag != PV_CONT) return 0;
    c = &m->conts[v->u.id];
    if (c->conv_tag == PV_FRAME) {
        v->tag = PV_FRAME;
        v->u.id = c->conv_id;
        return 0;
    }
    if (c->kind != C_DICT || c->conv_tag || !pk_dict_get(m, c, m->key[K_FILENAME])) return 0;
    uint32_t id;
    if (frame_of(m, c, &id)) return -1;
    pk_done_with(m, (uint32_t)(c - m->conts), PV_FRAME, id);
    v->tag = PV_FRAME;
    v->u.id = id;
    return 0;
}

/* A list of frames becomes PV_STACK (converted once, however often the memo shares it). */
int pk_convert_stack(pm *m, pv *v)
{
    if (v->tag != PV_CONT) return 0;
    pcont *c = &m->conts[v->u.id];
    if (c->conv_tag == PV_STACK) {
        v->tag = PV_STACK;
        v->u.id = c->conv_id;
        return 0;
    }
    if ((c->kind != C_LIST && c->kind != C_TUPLE) || c->conv_tag) return 0;
    if (c->n == 0) { /* the empty stack */
        pk_done_with(m, (uint32_t)(c - m->conts), PV_STACK, 0);
        v->tag = PV_STACK;
        v->u.id = 0;
        return 0;
    }
    uint32_t small[128] = {0}, *ids = small; /* zeroed: GCC with ASan at -O2 cannot see that the loop fills the c->n read */
    if (c->n > 128 && !(ids = malloc((size_t)c->n * sizeof *ids))) return pk_nomem(m);
    for (uint32_t i = 0; i < c->n; i++) {
        if (pk_convert_frame(m, &c->items[i])) goto bad;
        if (c->items[i].tag != PV_FRAME) {
            pk_fail(m, "a 'frames' list holds something other than frames (near byte %zu)", m->op_at);
            goto bad;
        }
        ids[i] = c->items[i].u.id;
    }
    uint32_t sid;
    if (cmh_snapshot_add_stack(m->s, ids, c->n, &sid) != CMH_OK) {
        pk_nomem(m);
        goto bad;
    }
    if (ids != small) free(ids);
    pk_done_with(m, (uint32_t)(c - m->conts), PV_STACK, sid);
    v->tag = PV_STACK;
    v->u.id = sid;
    return 0;
bad:
    if (ids != small) free(ids);
    return -1;
}

/* The next MiB of an array being filled, made present in one call rather than a page fault per
 * 4 KiB: a quarter of `trace`'s time on a 1M-entry pickle was the faults of the entry table
 * (issue 29).  At most that MiB beyond what is used; nothing where the kernel lacks the call. */
void pk_prefault(void *from, void *end)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t a = ((uintptr_t)from + 4095) & ~(uintptr_t)4095, b = (uintptr_t)end & ~(uintptr_t)4095;
    if (b - a > (1u << 20) && b > a) b = a + (1u << 20);
    if (b > a) madvise((void *)a, b - a, MADV_POPULATE_WRITE);
#else
    (void)from, (void)end;
#endif
}

static int action_of(pm *m, uint32_t str)
{
    unsigned slot = (str ^ str >> 6) & 63;
    if (m->action_of[slot].action && m->action_of[slot].str == str) return (int)m->action_of[slot].action - 1;
    int a = cmh_action_from_name(cmh_str(m->s, str));
    m->action_of[slot].str = str;
    m->action_of[slot].action = (uint32_t)(a + 1);
    return a;
}

/* A trace-entry dict (one with 'action') becomes PV_ENTRY. */
/* The keys of a trace entry the conversion reads (EK_*: pickle_internal.h). */
const uint8_t pk_entry_keys[NEK] = {K_ACTION, K_CMH_IMPLIED, K_CMH_CODE, K_DEVICE_FREE, K_ADDR, K_SIZE, K_STREAM,
                                        K_TIME_US, K_COMPILE_CONTEXT, K_USER_METADATA, K_FRAMES, K_CMH_REQUESTED, K_POOL_ID, K_NAME};

/* f[EK_*]: each wanted key's value in dict c (its first occurrence, as pk_dict_get), or NULL.
 * A dict with the keys of one of the last few shapes, in the same order (nearly every entry of a
 * writer), reuses the positions found then: one comparison per key instead of a search per
 * wanted key. */
static void entry_fields(pm *m, const pv *items, uint32_t n, const pv **f)
{
    const pcont dc = {.kind = C_DICT, .n = n, .items = (pv *)items}, *c = &dc;
    uint32_t nk = c->n / 2;
    for (int s = 0; s < 4; s++) {
        const struct pk_shape *sh = &m->shapes[s];
        if (sh->n != nk) continue;
        uint32_t i = 0;
        while (i < nk && c->items[2 * i].tag == PV_STR && c->items[2 * i].u.id == sh->keys[i]) i++;
        if (i < nk) continue;
        for (int k = 0; k < NEK; k++) f[k] = sh->pos[k] >= 0 ? &c->items[2 * sh->pos[k] + 1] : NULL;
        return;
    }
    for (int k = 0; k < NEK; k++) f[k] = pk_dict_get(m, c, m->key[pk_entry_keys[k]]);
    if (nk > 16) return; /* not a shape to remember */
    struct pk_shape *sh = &m->shapes[m->next_shape++ & 3];
    sh->n = nk;
    for (uint32_t i = 0; i < nk; i++) {
        if (c->items[2 * i].tag != PV_STR) {
            sh->n = UINT32_MAX;
            return;
        }
        sh->keys[i] = c->items[2 * i].u.id;
    }
    for (int k = 0; k < NEK; k++) sh->pos[k] = f[k] ? (int8_t)((f[k] - c->items - 1) / 2) : -1;
}

int pk_pool_of(pm *m, const pv *v, int convert, uint64_t id[2])
{
    uint32_t num;
    id[0] = id[1] = 0;
    if (v->tag == PV_POOL) {
        num = v->u.id;
    } else if (v->tag == PV_CONT) {
        pcont *c = &m->conts[v->u.id];
        if (c->conv_tag == PV_POOL) {
            num = c->conv_id;
        } else {
            if ((c->kind != C_TUPLE && c->kind != C_LIST) || c->conv_tag) return 0;
            int64_t x;
            for (uint32_t i = 0; i < 2 && i < c->n; i++)
                if (to_i64(&c->items[i], &x)) id[i] = (uint64_t)x;
            /* a list may still grow (APPENDS after a memo reference): only tuples are done with */
            if (convert && c->kind == C_TUPLE) {
                if (cmh_snapshot_pool_number(m->s, id, &num) != CMH_OK) return -1;
                pk_done_with(m, (uint32_t)(c - m->conts), PV_POOL, num);
            }
            return 1;
        }
    } else {
        return 0;
    }
    if (num && num < m->s->npool_ids) {
        id[0] = m->s->pool_ids[num].id[0];
        id[1] = m->s->pool_ids[num].id[1];
    }
    return 1;
}

static int add_entry(pm *m, const cmh_entry_full *e, uint32_t *id);

static int annotation_action(const char *a) { return strcmp(a, "annotate") == 0 || strcmp(a, "user_defined") == 0; }

/* An entry's keys that the conversion reads ('name' only on an annotation): the rest are extras. */
static const int entry_known[] = {K_ACTION, K_ADDR, K_DEVICE_FREE, K_SIZE, K_STREAM, K_TIME_US, K_COMPILE_CONTEXT,
                                  K_USER_METADATA, K_FRAMES, K_POOL_ID, K_CMH_CODE, K_CMH_IMPLIED, K_CMH_REQUESTED, K_NAME};
#define ENTRY_KNOWN (int)(sizeof entry_known / sizeof *entry_known)

int pk_entry_from_items(pm *m, const pv *items, uint32_t n, uint32_t *id)
{
    const pv *fld[NEK];
    entry_fields(m, items, n, fld);
    uint32_t known = 0;
    for (int k = 0; k < NEK; k++) known += fld[k] != NULL;
    m->entry_extra = 0;
    int ann = fld[EK_ACTION] && fld[EK_ACTION]->tag == PV_STR && annotation_action(cmh_str(m->s, fld[EK_ACTION]->u.id));
    if (!ann && fld[EK_NAME]) known--;
    if (fld[EK_ACTION] && known < n / 2) { /* keys the conversion does not read: kept aside */
        if (extras_of(m, items, n, entry_known, ann ? ENTRY_KNOWN : ENTRY_KNOWN - 1, &m->entry_extra)) return -1;
    }
    int r = pk_entry_from_fields(m, fld, id);
    m->entry_extra = 0;
    return r;
}

int pk_entry_from_fields(pm *m, const pv *const *fld, uint32_t *id)
{
    const pv *act = fld[EK_ACTION];
    if (!act) return 0;
    if (act->tag != PV_STR) return pk_fail(m, "a trace entry whose 'action' is not a string (near byte %zu)", m->op_at);
    cmh_entry_full e;
    memset(&e, 0, sizeof e);
    int a = action_of(m, act->u.id);
    int64_t x;
    const pv *f;
    /* our own keys (viz/memviz.c): entries implied by a whole block, and what PyTorch lacks */
    if ((f = fld[EK_CMH_IMPLIED]) && to_i64(f, &x) && x) {
        *id = 0;
        return 2;
    }
    int64_t code = -1;
    if ((f = fld[EK_CMH_CODE]) && to_i64(f, &code) && code >= 0 && (code & 15) < CMH_ACT_COUNT &&
        ((code >> 5) & 7) < CMH_KIND_COUNT) {
        a = (int)(code & 15);
        e.flags = (uint8_t)((code >> 4) & 1);
    } else {
        code = -1;
    }
    if (a < 0 && annotation_action(cmh_str(m->s, act->u.id))) {
        /* PyTorch's own annotations in the trace ('annotate', newest main; 'user_defined', mid-2024):
         * a mark at its place, named by the entry, so the entry numbers stay PyTorch's and a step
         * annotation steps the leak verdicts as our marks do */
        e.action = CMH_ACT_MARK;
        if (!strcmp(cmh_str(m->s, act->u.id), "user_defined")) e.flags |= CMH_EF_USER_DEFINED; /* written back so */
        if ((f = fld[EK_NAME]) && f->tag == PV_STR) e.name = f->u.id;
        else if ((f = fld[EK_USER_METADATA]) && f->tag == PV_STR && cmh_str(m->s, f->u.id)[0]) e.name = f->u.id;
        else e.name = act->u.id;
        if ((f = fld[EK_TIME_US]) && to_i64(f, &x)) {
            e.time_ns = us_to_ns(x);
            m->s->pt_fields |= CMH_PT_TIME_US;
        }
        if ((f = fld[EK_STREAM]) && to_i64(f, &x)) e.stream = (uint64_t)x;
        if ((f = fld[EK_COMPILE_CONTEXT]) && f->tag == PV_STR) e.compile_context = f->u.id;
        if ((f = fld[EK_USER_METADATA]) && f->tag == PV_STR) e.user_metadata = f->u.id;
        return add_entry(m, &e, id);
    }
    int unknown = a < 0 || a >= CMH_ACT_MARK;
    if (unknown) {
        /* an action this version does not know (a newer PyTorch's): kept in place as a mark named by
         * its action (CMH_EF_UNKNOWN_ACTION), with its own address, size, stream, time and stack, so
         * that entry numbers stay PyTorch's, `trace` prints it as _memory_viz.py does and an export
         * writes it back; it replays as nothing and steps nothing */
        e.action = CMH_ACT_MARK;
        e.flags = CMH_EF_UNKNOWN_ACTION;
        e.name = act->u.id;
        m->s->pt_fields |= CMH_PT_UNKNOWN_ACTIONS;
    } else {
        e.action = (uint8_t)a;
    }
    if (a == CMH_ACT_OOM) {
        e.addr = (f = fld[EK_DEVICE_FREE]) && to_i64(f, &x) ? (uint64_t)x : CMH_DEVICE_FREE_UNKNOWN;
    } else if ((f = fld[EK_ADDR]) && to_i64(f, &x)) {
        e.addr = (uint64_t)x;
    }
    if ((f = fld[EK_SIZE]) && to_i64(f, &x)) {
        if (x < 0) { /* no size: a damaged entry, skipped and counted as the unknown actions are, not replayed as 16 EiB */
            m->s->skipped_entries++;
            *id = 0;
            return 2;
        }
        e.size = e.requested = (uint64_t)x;
    }
    if ((f = fld[EK_STREAM]) && to_i64(f, &x)) e.stream = (uint64_t)x;
    if ((f = fld[EK_TIME_US]) && to_i64(f, &x)) {
        e.time_ns = us_to_ns(x);
        m->s->pt_fields |= CMH_PT_TIME_US;
    }
    if ((f = fld[EK_COMPILE_CONTEXT]) && f->tag == PV_STR) {
        e.compile_context = f->u.id;
        m->s->pt_fields |= CMH_PT_COMPILE_CONTEXT;
    }
    if ((f = fld[EK_USER_METADATA]) && f->tag == PV_STR) {
        e.user_metadata = f->u.id;
        m->s->pt_fields |= CMH_PT_USER_METADATA;
    }
    pv *fr = (pv *)fld[EK_FRAMES];
    if (fr) {
        if (pk_convert_stack(m, fr)) return -1;
        if (fr->tag == PV_STACK) e.stack = fr->u.id;
        if (code < 0) e.flags |= CMH_EF_HAS_FRAMES; /* a PyTorch entry's own key; ours carry cmh_code */
    }
    e.kind = code >= 0 && !unknown ? (uint8_t)((code >> 5) & 7) : CMH_KIND_DEVICE;
    if ((f = fld[EK_CMH_REQUESTED]) && to_i64(f, &x)) e.requested = (uint64_t)x;
    if ((f = fld[EK_POOL_ID])) {
        int r = pk_pool_of(m, f, 1, e.pool_id);
        if (r < 0) return pk_nomem(m);
        if (r) m->s->pt_fields |= CMH_PT_POOL_ID;
    }
    return add_entry(m, &e, id);
}

static int add_entry(pm *m, const cmh_entry_full *ep, uint32_t *id)
{
    uint32_t extra = m->entry_extra; /* pk_entry_from_items' */
    cmh_entry_full e = *ep;
    if (m->nentries == m->centries) {
        uint32_t nc = m->centries ? m->centries * 2 : 4096;
        cmh_entry *ne = realloc(m->entries, (size_t)nc * sizeof *ne);
        if (!ne) return pk_nomem(m);
        m->entries = ne;
        m->centries = nc;
    }
    if (m->nentries && !(m->nentries & (PK_PREFAULT_ENTRIES - 1))) pk_prefault(m->entries + m->nentries, m->entries + m->centries);
    uint32_t far;
    if (cmh_entry_pack_extra(m->s, &e, extra, &m->entries[m->nentries], &far) != CMH_OK) return pk_nomem(m);
    if (far) {
        if (m->nxmap == m->cxmap) {
            uint32_t nc = m->cxmap ? m->cxmap * 2 : 64;
            cmh_entry_xref *nx = realloc(m->xmap, (size_t)nc * sizeof *nx);
            if (!nx) return pk_nomem(m);
            m->xmap = nx;
            m->cxmap = nc;
        }
        m->xmap[m->nxmap++] = (cmh_entry_xref){m->nentries, far};
    }
    *id = m->nentries++;
    return 1;
}

void pk_entries_truncate(pm *m, uint32_t n)
{
    m->nentries = n;
    while (m->nxmap && m->xmap[m->nxmap - 1].entry >= n) m->nxmap--;
}

int pk_convert_entry(pm *m, pv *v)
{
    if (v->tag != PV_CONT) return 0;
    pcont *c = &m->conts[v->u.id];
    if (c->conv_tag == PV_ENTRY || c->conv_tag == PV_SKIP) {
        v->tag = c->conv_tag == PV_ENTRY ? PV_ENTRY : PV_NONE;
        v->u.id = c->conv_id;
        return 0;
    }
    if (c->kind != C_DICT || c->conv_tag) return 0;
    uint32_t id = 0;
    int r = pk_entry_from_items(m, c->items, c->n, &id);
    if (r <= 0) return r;
    m->generic_dicts++;
    pk_done_with(m, (uint32_t)(c - m->conts), r == 1 ? PV_ENTRY : PV_SKIP, id);
    v->tag = r == 1 ? PV_ENTRY : PV_NONE;
    v->u.id = id;
    return 0;
}

/* ---- the finished value into the model ---- */

/* A container of the model, remembered as the one an error points at. */
static const pcont *obj(pm *m, const pv *v, uint8_t kind)
{
    const pcont *c = pk_as_cont(m, v, kind);
    if (c) m->obj_at = c->at + 1;
    return c;
}

static int want_int(pm *m, const pcont *d, int key, int64_t *out, int required, const char *what)
{
    const pv *v = pk_dict_get(m, d, m->key[key]);
    m->obj_at = d->at + 1;
    if (!v) {
        if (required) return pk_fail(m, "%s without '%s'", what, pk_key_names[key]);
        return 0;
    }
    if (!to_i64(v, out)) return pk_fail(m, "%s: '%s' is not an integer", what, pk_key_names[key]);
    return 0;
}

/* A field as uint64 with a default when absent (the usual shape of the schema's integers). */
static int want_u64(pm *m, const pcont *d, int key, uint64_t dflt, int required, const char *what, uint64_t *out)
{
    int64_t x = (int64_t)dflt;
    if (want_int(m, d, key, &x, required, what)) return -1;
    *out = (uint64_t)x;
    return 0;
}

static uint32_t stack_of(pm *m, const pcont *d)
{
    pv *f = (pv *)pk_dict_get(m, d, m->key[K_FRAMES]);
    if (!f) return 0;
    if (f->tag == PV_CONT && pk_convert_stack(m, f)) return 0;
    return f->tag == PV_STACK ? f->u.id : 0;
}

static int convert_segment(pm *m, const pv *sv)
{
    const pcont *d = obj(m, sv, C_DICT);
    if (!d) return pk_fail(m, "a segment is not a dict");
    cmh_segment g;
    memset(&g, 0, sizeof g);
    int64_t x = 0;
    uint64_t dev;
    if (want_u64(m, d, K_DEVICE, 0, 0, "segment", &dev) || want_u64(m, d, K_ADDRESS, 0, 1, "segment", &g.addr) ||
        want_u64(m, d, K_TOTAL_SIZE, 0, 1, "segment", &g.size) || want_u64(m, d, K_STREAM, 0, 0, "segment", &g.stream))
        return -1;
    g.device = (int32_t)dev;
    const pv *v = pk_dict_get(m, d, m->key[K_SEGMENT_TYPE]);
    g.pool = v && v->tag == PV_STR ? (v->u.id == m->key[K_SMALL] ? CMH_POOL_SMALL : v->u.id == m->key[K_LARGE] ? CMH_POOL_LARGE : CMH_POOL_UNKNOWN)
                                   : CMH_POOL_UNKNOWN;
    if ((v = pk_dict_get(m, d, m->key[K_SEGMENT_POOL_ID])) && pk_pool_of(m, v, 0, g.pool_id) < 0) return pk_nomem(m);
    v = pk_dict_get(m, d, m->key[K_IS_EXPANDABLE]);
    if (v && (v->tag == PV_BOOL || v->tag == PV_INT) && v->u.i) g.flags |= CMH_SEG_EXPANDABLE;
    g.stack = stack_of(m, d);
    g.kind = CMH_KIND_DEVICE;
    if (want_int(m, d, K_CMH_KIND, &x, 0, "segment")) return -1;
    if ((v = pk_dict_get(m, d, m->key[K_CMH_KIND])) && x >= 0 && x < CMH_KIND_COUNT) g.kind = (uint8_t)x;
    v = pk_dict_get(m, d, m->key[K_CMH_WHOLE]);
    if (v && (v->tag == PV_BOOL || v->tag == PV_INT) && v->u.i) g.flags |= CMH_SEG_WHOLE_BLOCK;
    static const int seg_known[] = {K_DEVICE, K_ADDRESS, K_TOTAL_SIZE, K_ALLOCATED_SIZE, K_ACTIVE_SIZE, K_REQUESTED_SIZE,
                                    K_STREAM, K_SEGMENT_TYPE, K_SEGMENT_POOL_ID, K_IS_EXPANDABLE, K_FRAMES, K_BLOCKS,
                                    K_CMH_KIND, K_CMH_WHOLE};
    uint32_t extra;
    if (extras_of(m, d->items, d->n, seg_known, (int)(sizeof seg_known / sizeof *seg_known), &extra)) return -1;
    if (m->failed || cmh_snapshot_add_segment(m->s, &g, NULL) != CMH_OK ||
        cmh_snapshot_add_extra(m->s, CMH_X_SEGMENT, m->s->nsegments - 1, extra) != CMH_OK)
        return pk_nomem(m);
    v = pk_dict_get(m, d, m->key[K_BLOCKS]);
    const pcont *bl = v ? obj(m, v, C_LIST) : NULL;
    if (!bl) return v ? pk_fail(m, "segment 'blocks' is not a list") : 0;
    uint64_t at = g.addr, covered = 0;
    for (uint32_t i = 0; i < bl->n; i++) {
        const pcont *b = obj(m, &bl->items[i], C_DICT);
        if (!b) return pk_fail(m, "a block is not a dict");
        if (m->budget-- == 0) return pk_fail(m, "the snapshot expands far beyond its size (shared containers)");
        cmh_block blk;
        memset(&blk, 0, sizeof blk);
        if (want_u64(m, b, K_ADDRESS, at, 0, "block", &blk.addr) || want_u64(m, b, K_SIZE, 0, 1, "block", &blk.size) ||
            want_u64(m, b, K_REQUESTED_SIZE, 0, 0, "block", &blk.requested))
            return -1;
        v = pk_dict_get(m, b, m->key[K_STATE]);
        uint32_t st = v && v->tag == PV_STR ? v->u.id : 0;
        blk.state = st == m->key[K_ACTIVE_ALLOCATED] ? CMH_BLOCK_ACTIVE_ALLOCATED
                    : st == m->key[K_ACTIVE_PENDING_FREE] || st == m->key[K_ACTIVE_AWAITING_FREE] ? CMH_BLOCK_ACTIVE_PENDING_FREE
                                                                                                 : CMH_BLOCK_INACTIVE;
        blk.stack = stack_of(m, b);
        /* PyTorch <= 2.0: no address/frames, a 'history' of {addr, real_size, frames} */
        const pv *h = pk_dict_get(m, b, m->key[K_HISTORY]);
        const pcont *hist = h ? obj(m, h, C_LIST) : NULL;
        if (hist && hist->n) {
            m->s->pt_fields |= CMH_PT_LEGACY_HISTORY;
            /* PyTorch's own tools read the first record: its real_size is what the block holds */
            const pcont *first = obj(m, &hist->items[0], C_DICT);
            if (first) {
                x = 0;
                if (!want_int(m, first, K_REAL_SIZE, &x, 0, "history")) blk.requested = (uint64_t)x;
                if (!blk.stack) blk.stack = stack_of(m, first);
            }
        }
        /* no requested_size (PyTorch < 2.1's state-only dumps, hand-made ones): PyTorch's viewer
         * reads `requested_size || size`; so do we, and say so once (cli/util.c) rather than count
         * the block's requested bytes as 0 */
        if (blk.state != CMH_BLOCK_INACTIVE && !(hist && hist->n) && !pk_dict_get(m, b, m->key[K_REQUESTED_SIZE])) {
            blk.requested = blk.size;
            m->s->pt_fields |= CMH_PT_NO_REQUESTED;
        }
        /* (PyTorch <= 2.0's 'history' is read above and kept too: written back as it was) */
        static const int block_known[] = {K_ADDRESS, K_SIZE, K_REQUESTED_SIZE, K_STATE, K_FRAMES};
        if (extras_of(m, b->items, b->n, block_known, (int)(sizeof block_known / sizeof *block_known), &extra)) return -1;
        if (m->failed || cmh_snapshot_add_block(m->s, &blk) != CMH_OK ||
            cmh_snapshot_add_extra(m->s, CMH_X_BLOCK, m->s->nblocks - 1, extra) != CMH_OK)
            return pk_nomem(m);
        at = blk.addr + blk.size;
        covered += blk.size;
    }
    /* a segment whose blocks cover less than its total_size contradicts itself (PyTorch's own
     * segsum asserts they tile it): said, and the bytes no block covers counted as a free
     * (inactive) gap after its last block, so that free = reserved - allocated holds in every
     * report (stats once said reserved 6.0 MiB, allocated 2.0 MiB, free 2.0 MiB) */
    if (bl->n && covered < g.size) {
        uint64_t gap = g.size - covered;
        fprintf(stderr,
                "cumemhist: warning: the snapshot contradicts itself: segment 0x%llx on device %d has total_size %llu bytes, "
                "its %u blocks cover %llu: %llu bytes uncovered, counted as a free (inactive) gap\n",
                (unsigned long long)g.addr, (int)g.device, (unsigned long long)g.size, bl->n, (unsigned long long)covered,
                (unsigned long long)gap);
        cmh_block blk;
        memset(&blk, 0, sizeof blk);
        blk.addr = at >= g.addr && at - g.addr <= g.size - gap ? at : g.addr + covered;
        blk.size = gap;
        blk.state = CMH_BLOCK_INACTIVE;
        if (cmh_snapshot_add_block(m->s, &blk) != CMH_OK || cmh_snapshot_add_extra(m->s, CMH_X_BLOCK, m->s->nblocks - 1, 0) != CMH_OK)
            return pk_nomem(m);
    }
    return 0;
}

/* Pool samples a cumemhist export kept aside (pickle_write.c), each (device, how many of that
 * device's entries precede it, pool, reserved, used, time_us), sorted by device and position
 * for convert_traces to put back in place. */
typedef struct pool_at {
    int32_t device;
    uint64_t pos;
    uint64_t seq; /* the order written: marks at one position keep it (pool samples and retried OOMs: read_retried_ooms) */
    cmh_entry_full e;
} pool_at;

static int cmp_pool_at(const void *a, const void *b)
{
    const pool_at *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* cumemhist.marks (pickle_write.c): (device, position, name, time_us, thread), position counting
 * the device's entries before it, pool samples included; sorted by device and position. */
static int read_marks(pm *m, const pcont *ml, pool_at **out)
{
    pool_at *mk = calloc(ml->n ? ml->n : 1, sizeof *mk);
    if (!mk) return pk_nomem(m);
    for (uint32_t i = 0; i < ml->n; i++) {
        const pcont *t = obj(m, &ml->items[i], C_TUPLE);
        int64_t v[5];
        int ok = t && t->n == 5 && t->items[2].tag == PV_STR;
        for (int k = 0; ok && k < 5; k++) ok = k == 2 || to_i64(&t->items[k], &v[k]);
        if (!ok || v[1] < 0 || v[4] < 0 || v[4] > UINT32_MAX) {
            free(mk);
            return pk_fail(m, "cumemhist.marks[%u] is not (device, position, name, time_us, thread)", i);
        }
        mk[i].device = (int32_t)v[0];
        mk[i].pos = (uint64_t)v[1];
        mk[i].seq = i;
        mk[i].e.action = CMH_ACT_MARK;
        mk[i].e.name = t->items[2].u.id;
        mk[i].e.time_ns = us_to_ns(v[3]);
        mk[i].e.thread = (uint32_t)v[4];
    }
    qsort(mk, ml->n, sizeof *mk, cmp_pool_at);
    *out = mk;
    return 0;
}

/* cumemhist.pool_sample_tags (pickle_write.c; absent from older exports): each pool sample's
 * (stream: CMH_POOL_* bits, flags, thread, frames), in pool_samples' order */
static int read_pool_sample_tags(pm *m, const pcont *tl, pool_at *ps, uint32_t n)
{
    for (uint32_t i = 0; i < tl->n && i < n; i++) {
        pcont *t = (pcont *)obj(m, &tl->items[i], C_TUPLE);
        int64_t v[3];
        int ok = t && t->n == 4;
        for (int k = 0; ok && k < 3; k++) ok = to_i64(&t->items[k], &v[k]);
        if (ok && t->items[3].tag == PV_CONT && pk_convert_stack(m, &t->items[3])) return -1;
        if (!ok || t->items[3].tag != PV_STACK || v[1] < 0 || v[1] > 15 || v[2] < 0 || v[2] > UINT32_MAX)
            return pk_fail(m, "cumemhist.pool_sample_tags[%u] is not (stream, flags, thread, frames)", i);
        ps[i].e.stream = (uint64_t)v[0];
        ps[i].e.flags = (uint8_t)v[1];
        ps[i].e.thread = (uint32_t)v[2];
        ps[i].e.stack = t->items[3].u.id;
    }
    return 0;
}

static int read_pool_samples(pm *m, const pcont *pl, const pcont *tags, pool_at **out)
{
    pool_at *ps = calloc(pl->n, sizeof *ps);
    if (!ps) return pk_nomem(m);
    for (uint32_t i = 0; i < pl->n; i++) {
        const pcont *t = obj(m, &pl->items[i], C_TUPLE);
        int64_t v[6];
        int ok = t && t->n == 6;
        for (int k = 0; ok && k < 6; k++) ok = to_i64(&t->items[k], &v[k]);
        if (!ok || v[1] < 0) {
            free(ps);
            return pk_fail(m, "cumemhist.pool_samples[%u] is not (device, position, pool, reserved, used, time_us)", i);
        }
        ps[i].device = (int32_t)v[0];
        ps[i].pos = (uint64_t)v[1];
        ps[i].e.action = CMH_ACT_POOL_SAMPLE;
        ps[i].e.kind = CMH_KIND_ASYNC;
        ps[i].e.addr = (uint64_t)v[2];
        ps[i].e.size = (uint64_t)v[3];
        ps[i].e.requested = (uint64_t)v[4];
        ps[i].e.time_ns = us_to_ns(v[5]);
    }
    if (tags && read_pool_sample_tags(m, tags, ps, pl->n)) {
        free(ps);
        return -1;
    }
    for (uint32_t i = 0, j = 0; i < pl->n; i++, j++) { /* j: its index among its device's (the list goes device by device) */
        if (i && ps[i].device != ps[i - 1].device) j = 0;
        ps[i].seq = (uint64_t)(2 * j + 1) << 20;
    }
    qsort(ps, pl->n, sizeof *ps, cmp_pool_at);
    *out = ps;
    return 0;
}

/* cumemhist.retried_ooms (pickle_write.c): OOMs the allocator retried with success, which the
 * pickle's trace has no 'oom' for (CMH_EF_RETRIED), back among ps (*nps of them) where they
 * were: (device, position, order among the device's pool samples and these, size, device_free
 * or None, stream, time_us, kind, frames). */
static int read_retried_ooms(pm *m, const pcont *rl, pool_at **ps, uint32_t *nps)
{
    pool_at *all = realloc(*ps, ((size_t)*nps + rl->n) * sizeof *all);
    if (!all) return pk_nomem(m);
    *ps = all;
    int32_t dev = INT32_MIN;
    uint64_t k = 0; /* retried OOMs of the device before this one */
    for (uint32_t i = 0; i < rl->n; i++) {
        pcont *t = (pcont *)obj(m, &rl->items[i], C_TUPLE);
        int64_t v[8];
        int ok = t && t->n == 9;
        for (int j = 0; ok && j < 8; j++) ok = j == 4 ? (t->items[4].tag == PV_NONE || to_i64(&t->items[4], &v[4])) : to_i64(&t->items[j], &v[j]);
        if (ok && t->items[8].tag == PV_CONT && pk_convert_stack(m, &t->items[8])) return -1;
        if (!ok || v[1] < 0 || v[2] < 0 || v[0] < -1 || v[0] > 1023 || t->items[8].tag != PV_STACK)
            return pk_fail(m, "cumemhist.retried_ooms[%u] is not (device, position, order, size, device_free, stream, time_us, kind, frames)", i);
        if ((int32_t)v[0] != dev) dev = (int32_t)v[0], k = 0;
        pool_at *a = &all[(*nps)++];
        memset(a, 0, sizeof *a);
        a->device = dev;
        a->pos = (uint64_t)v[1];
        /* after the device's first order - k pool samples (pool sample j: 2j + 1), in order among themselves */
        a->seq = ((uint64_t)(2 * ((uint64_t)v[2] - k)) << 20) + k;
        k++;
        a->e.action = CMH_ACT_OOM;
        a->e.size = a->e.requested = (uint64_t)v[3];
        a->e.addr = t->items[4].tag == PV_NONE ? CMH_DEVICE_FREE_UNKNOWN : (uint64_t)v[4];
        a->e.stream = (uint64_t)v[5];
        a->e.time_ns = us_to_ns(v[6]);
        a->e.kind = v[7] >= 0 && v[7] < CMH_KIND_COUNT ? (uint8_t)v[7] : CMH_KIND_DEVICE;
        a->e.stack = t->items[8].u.id;
    }
    qsort(all, *nps, sizeof *all, cmp_pool_at);
    return 0;
}

/* cumemhist.vmm_unmapped (pickle_write.c): the cuMemCreate handles held and mapped nowhere at
 * the end, (device, size, time_ns, frames), as the .cmh's vmm_unmapped */
static int read_vmm_unmapped(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        pcont *t = (pcont *)obj(m, &l->items[i], C_TUPLE);
        int64_t v[3];
        int ok = t && t->n == 4;
        for (int k = 0; ok && k < 3; k++) ok = to_i64(&t->items[k], &v[k]);
        if (ok && t->items[3].tag == PV_CONT && pk_convert_stack(m, &t->items[3])) return -1;
        if (!ok || t->items[3].tag != PV_STACK || v[0] < -1 || v[0] > 1023 || v[1] < 0)
            return pk_fail(m, "cumemhist.vmm_unmapped[%u] is not (device, size, time_ns, frames)", i);
        cmh_vmm_handle h = {(int32_t)v[0], (uint64_t)v[1], t->items[3].u.id, v[2]};
        if (cmh_snapshot_add_vmm_unmapped(m->s, &h) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.vmm_maps (pickle_write.c): every cuMemMap and the handle it mapped, (device, addr,
 * size, time_ns, handle, handle_size, handle_time_ns, frames of cuMemCreate), as the .cmh's
 * vmm_maps (physmap.c charges each handle once, whole, by them) */
static int read_vmm_maps(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        pcont *t = (pcont *)obj(m, &l->items[i], C_TUPLE);
        int64_t v[7];
        int ok = t && t->n == 8;
        for (int k = 0; ok && k < 7; k++) ok = to_i64(&t->items[k], &v[k]);
        if (ok && t->items[7].tag == PV_CONT && pk_convert_stack(m, &t->items[7])) return -1;
        if (!ok || t->items[7].tag != PV_STACK || v[0] < 0 || v[0] > 1023)
            return pk_fail(m, "cumemhist.vmm_maps[%u] is not (device, addr, size, time_ns, handle, handle_size, handle_time_ns, frames)", i);
        cmh_vmm_map r = {(int32_t)v[0], (uint64_t)v[1], (uint64_t)v[2], v[3], (uint64_t)v[4], (uint64_t)v[5], t->items[7].u.id, v[6]};
        if (cmh_snapshot_add_vmm_map(m->s, &r) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.free_frames (cmh_entry_free_stack_aside): the frees' stacks of whole blocks
 * the trace never saw allocated, written frameless in device_traces so that memory_viz does not
 * take the free's line for the segment's origin: (device, which of the device's segment_free
 * and segment_unmap entries, frames), put back on that entry. */
static int read_free_frames(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        pcont *t = (pcont *)obj(m, &l->items[i], C_TUPLE);
        int64_t v[2];
        int ok = t && t->n == 3;
        for (int k = 0; ok && k < 2; k++) ok = to_i64(&t->items[k], &v[k]);
        if (ok && t->items[2].tag == PV_CONT && pk_convert_stack(m, &t->items[2])) return -1;
        ok = ok && t->items[2].tag == PV_STACK && v[1] >= 0;
        cmh_entry *at = NULL;
        for (uint32_t tr = 0; ok && tr < m->s->ntraces && !at; tr++) {
            const cmh_trace *c = &m->s->traces[tr];
            if (c->device != v[0]) continue;
            int64_t nth = 0;
            for (uint32_t k = 0; k < c->nentries && !at; k++) {
                cmh_entry *e = &m->s->entries[c->first_entry + k];
                if (e->action != CMH_ACT_SEGMENT_FREE && e->action != CMH_ACT_SEGMENT_UNMAP) continue;
                if (nth++ == v[1]) at = e;
            }
        }
        if (!at) return pk_fail(m, "cumemhist.free_frames[%u] is not (device, one of its segment_free entries, frames)", i);
        if (!at->stack) at->stack = t->items[2].u.id; /* (frames the entry has itself stay) */
    }
    return 0;
}

/* cumemhist.history_lost (pickle_write.c): what a recovery from a cut flight record could not
 * read, (cut_bytes, file_bytes, read_to, torn, damaged, refused), as the .cmh's history_lost;
 * a later writer's fields past them ignored */
static int read_history_lost(pm *m, const pcont *t)
{
    int64_t v[6];
    int ok = t->n >= 6;
    for (int k = 0; ok && k < 6; k++) ok = to_i64(&t->items[k], &v[k]) && v[k] >= 0;
    if (!ok) return pk_fail(m, "cumemhist.history_lost is not (cut_bytes, file_bytes, read_to, torn, damaged, refused)");
    cmh_history_lost h = {(uint64_t)v[0], (uint64_t)v[1], (uint64_t)v[2], (uint64_t)v[3], (uint64_t)v[4], (uint64_t)v[5]};
    m->s->history_lost = h;
    return 0;
}

/* cumemhist.driver_errors (pickle_write.c): the driver calls that failed other than OOM,
 * (call, result, count, [(addr, size, thread, time_ns, frames), ...]), as the .cmh's driver_errors */
static int read_driver_errors(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        const pcont *t = obj(m, &l->items[i], C_TUPLE);
        int64_t res = 0, count = 0;
        const pcont *sl = t && t->n == 4 ? obj(m, &t->items[3], C_LIST) : NULL;
        if (!sl || t->items[0].tag != PV_STR || !to_i64(&t->items[1], &res) || !to_i64(&t->items[2], &count) || res < INT32_MIN ||
            res > INT32_MAX || count < 0)
            return pk_fail(m, "cumemhist.driver_errors[%u] is not (call, result, count, sites)", i);
        cmh_drv_error e;
        memset(&e, 0, sizeof e);
        snprintf(e.call, sizeof e.call, "%s", cmh_str(m->s, t->items[0].u.id));
        e.result = (int32_t)res;
        e.count = (uint64_t)count;
        for (uint32_t j = 0; j < sl->n; j++) {
            pcont *st = (pcont *)obj(m, &sl->items[j], C_TUPLE);
            int64_t v[4];
            int ok = st && st->n == 5;
            for (int k = 0; ok && k < 4; k++) ok = to_i64(&st->items[k], &v[k]);
            if (ok && st->items[4].tag == PV_CONT && pk_convert_stack(m, &st->items[4])) return -1;
            if (!ok || st->items[4].tag != PV_STACK || v[2] < 0 || v[2] > UINT32_MAX)
                return pk_fail(m, "cumemhist.driver_errors[%u] site %u is not (addr, size, thread, time_ns, frames)", i, j);
            if (e.nsites >= CMH_DRV_ERROR_SITES) continue; /* (a later writer's more: kept counted) */
            cmh_drv_error_site w = {(uint64_t)v[0], (uint64_t)v[1], (uint32_t)v[2], st->items[4].u.id, v[3]};
            e.sites[e.nsites++] = w;
        }
        if (cmh_snapshot_add_drv_error(m->s, &e) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.device_ids (pickle_write.c): which GPU each device number was, (device, uuid, name,
 * pci_bus), as the .cmh's device_ids */
static int read_device_ids(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        const pcont *t = obj(m, &l->items[i], C_TUPLE);
        int64_t dev = -1;
        if (!t || t->n != 4 || !to_i64(&t->items[0], &dev) || dev < 0 || dev > 1023 || t->items[1].tag != PV_STR ||
            t->items[2].tag != PV_STR || t->items[3].tag != PV_STR)
            return pk_fail(m, "cumemhist.device_ids[%u] is not (device, uuid, name, pci_bus)", i);
        cmh_device_ident d;
        memset(&d, 0, sizeof d);
        d.device = (int32_t)dev;
        snprintf(d.uuid, sizeof d.uuid, "%s", cmh_str(m->s, t->items[1].u.id));
        snprintf(d.name, sizeof d.name, "%s", cmh_str(m->s, t->items[2].u.id));
        snprintf(d.pci_bus, sizeof d.pci_bus, "%s", cmh_str(m->s, t->items[3].u.id));
        if (cmh_snapshot_add_ident(m->s, &d) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* One trace per device; pool samples (ps, sorted) go back before the kept entry their position
 * names, or after the last one. */
/* The usual case, where the entries converted while the machine ran are already the model's
 * entries in order (every item of every device's list a converted entry, numbered 0, 1, 2 ...
 * across them, none shared or skipped, no pool samples to weave in): their array becomes the
 * snapshot's as it is, rather than copied entry by entry, so each entry exists once. */
static int adopt_entries(pm *m, const pcont *outer, uint32_t nps)
{
    if (nps || m->nmarks_aside || m->s->nentries || m->s->entries || (uint64_t)m->nentries > m->budget) return 0;
    uint32_t next = 0;
    for (uint32_t dev = 0; dev < outer->n; dev++) {
        const pcont *tr = obj(m, &outer->items[dev], C_LIST);
        if (!tr) return 0;
        for (uint32_t i = 0; i < tr->n; i++)
            if (tr->items[i].tag != PV_ENTRY || tr->items[i].u.id != next++) return 0;
    }
    if (next != m->nentries) return 0;
    next = 0;
    for (uint32_t dev = 0; dev < outer->n; dev++) {
        const pcont *tr = obj(m, &outer->items[dev], C_LIST);
        cmh_trace *t;
        if (cmh_snapshot_add_trace(m->s, (int32_t)dev, 0, &t) != CMH_OK) return pk_nomem(m);
        t->first_entry = next;
        t->nentries = tr->n;
        next += tr->n;
    }
    m->budget -= m->nentries;
    m->s->entries = m->entries;
    m->s->nentries = m->s->cap_entries = m->nentries;
    m->s->xmap = m->xmap; /* the same indices: the entries keep their places */
    m->s->nxmap = m->nxmap;
    m->s->cap_xmap = m->cxmap;
    m->xmap = NULL;
    m->nxmap = m->cxmap = 0;
    if (m->centries > m->nentries) { /* give back the doubling's slack */
        cmh_entry *fit = realloc(m->entries, (m->nentries ? m->nentries : 1) * sizeof *fit);
        if (fit) m->s->entries = fit;
    }
    m->entries = NULL;
    m->nentries = m->centries = 0;
    return 1;
}

static int convert_traces(pm *m, const pv *tv, const pool_at *ps, uint32_t nps)
{
    const pcont *outer = obj(m, tv, C_LIST);
    if (!outer) return pk_fail(m, "'device_traces' is not a list");
    if (!m->generic) {
        int a = adopt_entries(m, outer, nps);
        if (a) return a < 0 ? -1 : 0;
    }
    uint32_t k = 0, km = 0;
    for (uint32_t dev = 0; dev < outer->n; dev++) {
        const pcont *tr = obj(m, &outer->items[dev], C_LIST);
        if (!tr) return pk_fail(m, "device_traces[%u] is not a list", dev);
        if (cmh_snapshot_add_trace(m->s, (int32_t)dev, 0, NULL) != CMH_OK) return pk_nomem(m);
        while (k < nps && ps[k].device < (int32_t)dev) k++;
        while (km < m->nmarks_aside && m->marks_aside[km].device < (int32_t)dev) km++;
        uint64_t kept = 0, added = 0; /* PyTorch's entries; they and the pool samples */
#define MARKS_UP_TO(n)                                                                                            \
    for (; km < m->nmarks_aside && m->marks_aside[km].device == (int32_t)dev && m->marks_aside[km].pos <= (n); km++) \
        if (cmh_snapshot_add_entry(m->s, &m->marks_aside[km].e) != CMH_OK) return pk_nomem(m);
        for (uint32_t i = 0; i <= tr->n; i++) {
            for (; k < nps && ps[k].device == (int32_t)dev && (i == tr->n || ps[k].pos <= kept); k++) {
                MARKS_UP_TO(added);
                if (cmh_snapshot_add_entry(m->s, &ps[k].e) != CMH_OK) return pk_nomem(m);
                added++;
            }
            if (i == tr->n) {
                MARKS_UP_TO(UINT64_MAX);
                break;
            }
            pv e = tr->items[i];
            if (e.tag == PV_CONT && pk_convert_entry(m, &e)) return -1;
            if (e.tag == PV_NONE) continue; /* an action this version skips */
            if (e.tag != PV_ENTRY) return pk_fail(m, "device_traces[%u][%u] is not a trace entry", dev, i);
            if (m->budget-- == 0) return pk_fail(m, "the snapshot expands far beyond its size (shared containers)");
            MARKS_UP_TO(added);
            cmh_entry_full full;
            cmh_entry_unpack(m->s, &m->entries[e.u.id], m->xmap, m->nxmap, e.u.id, &full);
            const cmh_entry *pe = &m->entries[e.u.id];
            uint32_t xs = pe->xs, extra = 0; /* its extra keys (cmh_extra), which the full form has no field for */
            if (xs == CMH_XS_FAR) { /* m->xmap ascends by entry */
                uint32_t lo = 0, hi = m->nxmap;
                while (lo < hi) {
                    uint32_t mid = lo + (hi - lo) / 2;
                    if (m->xmap[mid].entry < e.u.id) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < m->nxmap && m->xmap[lo].entry == e.u.id) xs = m->xmap[lo].xset;
            }
            if (xs && xs != CMH_XS_FAR && xs < m->s->nxsets) extra = m->s->xsets[xs].extra;
            if (cmh_snapshot_append_entry_extra(m->s, &full, extra) != CMH_OK) return pk_nomem(m);
            m->s->traces[m->s->ntraces - 1].nentries++;
            kept++, added++;
        }
#undef MARKS_UP_TO
    }
    return 0;
}

static void value_text(pm *m, const pv *v, char *buf, size_t n, uint8_t *type);

/* A map setting (roundup_power2_divisions: str -> int) as a flat JSON object of integers, the form
 * pickle_write.c and viz/json.c read back: a key's quote, backslash and control characters
 * become '_', a value that is not an integer becomes 0.  Whole pairs only: a map too long for
 * the buffer is cut after its last pair that fits. */
static void map_text(pm *m, const pcont *d, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "{");
    for (uint32_t i = 0; i + 1 < d->n; i += 2) {
        char kb[256], pair[320];
        uint8_t t;
        value_text(m, &d->items[i], kb, sizeof kb, &t);
        for (char *c = kb; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '_';
        long long v = d->items[i + 1].tag == PV_INT ? (long long)d->items[i + 1].u.i : 0;
        int l = snprintf(pair, sizeof pair, "%s\"%s\": %lld", k > 1 ? ", " : "", kb, v);
        if (l < 0 || k + (size_t)l + 2 > n) break;
        memcpy(buf + k, pair, (size_t)l + 1);
        k += (size_t)l;
    }
    snprintf(buf + k, n - k, "}");
}

/* allocator_settings values are kept as text with a type tag (pickle_write.c turns them back). */
static void value_text(pm *m, const pv *v, char *buf, size_t n, uint8_t *type)
{
    switch (v->tag) {
    case PV_STR: *type = 0; snprintf(buf, n, "%s", cmh_str(m->s, v->u.id)); break;
    case PV_INT: *type = 1; snprintf(buf, n, "%lld", (long long)v->u.i); break;
    case PV_FLOAT: *type = 2; snprintf(buf, n, "%.17g", v->u.f); break;
    case PV_BOOL: *type = 3; snprintf(buf, n, "%s", v->u.i ? "True" : "False"); break;
    case PV_CONT: {
        const pcont *d = obj(m, v, C_DICT);
        *type = 4;
        if (d) map_text(m, d, buf, n);
        else snprintf(buf, n, "{}");
        break;
    }
    default: *type = 0; snprintf(buf, n, "%s", ""); break;
    }
}

/* cumemhist.threads (pickle_write.c): each device's entries' recording threads, run-length
 * over the entries kept (marks and pool samples, which it does not count, are passed over). */
static int read_threads(pm *m, const pcont *tl)
{
    for (uint32_t d = 0; d < tl->n; d++) {
        const pcont *rl = obj(m, &tl->items[d], C_LIST);
        if (!rl) return pk_fail(m, "cumemhist.threads[%u] is not a list", d);
        cmh_trace *tr = NULL;
        for (uint32_t t = 0; t < m->s->ntraces && !tr; t++)
            if (m->s->traces[t].device == (int32_t)d) tr = &m->s->traces[t];
        uint32_t i = 0;
        for (uint32_t k = 0; tr && k + 1 < rl->n; k += 2) {
            int64_t count, thread;
            if (!to_i64(&rl->items[k], &count) || !to_i64(&rl->items[k + 1], &thread) || count < 0 || thread < 0 ||
                thread > UINT32_MAX)
                return pk_fail(m, "cumemhist.threads[%u] is not [count, thread, ...]", d);
            for (; count > 0 && i < tr->nentries; i++) {
                uint32_t at = tr->first_entry + i;
                cmh_entry_full e;
                cmh_entry_get(m->s, &m->s->entries[at], &e);
                if (e.action >= CMH_ACT_MARK) continue; /* marks and pool samples: not counted (their own say) */
                count--;
                if (e.thread == (uint32_t)thread) continue;
                e.thread = (uint32_t)thread;
                if (cmh_entry_set(m->s, at, &e) != CMH_OK) return pk_nomem(m);
            }
        }
    }
    return 0;
}

/* cumemhist.modules and cumemhist.frame_modules (pickle_write.c): the module map, and each
 * frame's module (a reference to the frame's own dict, then the module's index). */
static int read_modules(pm *m, const pcont *ml, const pcont *fl)
{
    uint32_t base = m->s->nmodules;
    for (uint32_t i = 0; i < ml->n; i++) {
        const pcont *t = obj(m, &ml->items[i], C_TUPLE);
        int64_t b, n;
        if (!t || t->n != 4 || t->items[0].tag != PV_STR || t->items[1].tag != PV_STR || !to_i64(&t->items[2], &b) ||
            !to_i64(&t->items[3], &n))
            return pk_fail(m, "cumemhist.modules[%u] is not (path, build_id, base, size)", i);
        cmh_module md = {t->items[0].u.id, t->items[1].u.id, (uint64_t)b, (uint64_t)n};
        if (cmh_snapshot_add_module(m->s, &md) != CMH_OK) return pk_nomem(m);
    }
    for (uint32_t i = 0; fl && i < fl->n; i++) {
        const pcont *t = obj(m, &fl->items[i], C_TUPLE);
        int64_t mod;
        pv f = t && t->n == 2 ? t->items[0] : (pv){0};
        if (f.tag == PV_CONT && pk_convert_frame(m, &f)) return -1;
        if (!t || t->n != 2 || f.tag != PV_FRAME || f.u.id >= m->s->nframes || !to_i64(&t->items[1], &mod) || mod < 0 ||
            (uint64_t)mod >= ml->n)
            return pk_fail(m, "cumemhist.frame_modules[%u] is not (frame, module)", i);
        m->s->frames[f.u.id].module = (int32_t)(base + (uint64_t)mod);
    }
    return 0;
}

/* The export wrote each mark it carries aside as a START and an END of zero length for
 * memory_viz (viz/memviz.c); with the mark back in the trace, that pair goes. */
typedef struct mark_key {
    int64_t t;
    uint32_t name;
    int32_t device;
} mark_key;

static int cmp_mark_key(const void *a, const void *b)
{
    const mark_key *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->name != y->name) return x->name < y->name ? -1 : 1;
    return (x->device > y->device) - (x->device < y->device);
}

static int drop_mark_annotations(pm *m)
{
    cmh_snapshot *s = m->s;
    if (!m->nmarks_aside) return 0;
    mark_key *keys = malloc(m->nmarks_aside * sizeof *keys);
    if (!keys) return pk_nomem(m);
    for (uint32_t j = 0; j < m->nmarks_aside; j++)
        keys[j] = (mark_key){m->marks_aside[j].e.time_ns, m->marks_aside[j].e.name, m->marks_aside[j].device};
    qsort(keys, m->nmarks_aside, sizeof *keys, cmp_mark_key);
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->nannotations; i++) {
        const cmh_annotation *a = &s->annotations[i], *b = i + 1 < s->nannotations ? a + 1 : NULL;
        int pair = b && a->stage == 0 && b->stage == 1 && a->name == b->name && a->device == b->device && a->time_ns == b->time_ns;
        mark_key key = {a->time_ns, a->name, a->device};
        if (pair && bsearch(&key, keys, m->nmarks_aside, sizeof *keys, cmp_mark_key)) {
            i++; /* and its END */
            continue;
        }
        s->annotations[k++] = *a;
    }
    s->nannotations = k;
    free(keys);
    return 0;
}

int pk_convert_top(pm *m, const pv *root)
{
    const pcont *d = obj(m, root, C_DICT);
    if (!d) {
        const pcont *l = obj(m, root, C_LIST);
        if (!l) return pk_fail(m, "not a PyTorch memory snapshot (the pickle holds neither a dict nor a list)");
        m->s->pt_fields |= CMH_PT_BARE_SEGMENTS; /* memory_snapshot(): segments only */
        for (uint32_t i = 0; i < l->n; i++)
            if (convert_segment(m, &l->items[i])) return -1;
        return 0;
    }
    const pv *segs = pk_dict_get(m, d, m->key[K_SEGMENTS]);
    if (!segs) return pk_fail(m, "not a PyTorch memory snapshot (no 'segments')");
    const pcont *sl = obj(m, segs, C_LIST);
    if (!sl) return pk_fail(m, "'segments' is not a list");
    for (uint32_t i = 0; i < sl->n; i++)
        if (convert_segment(m, &sl->items[i])) return -1;
    const pv *ours = pk_dict_get(m, d, m->key[K_CUMEMHIST]);
    const pcont *od = ours ? obj(m, ours, C_DICT) : NULL; /* exported by cumemhist (viz/memviz.c) */
    const pv *psv = od ? pk_dict_get(m, od, m->key[K_POOL_SAMPLES]) : NULL;
    const pcont *pl = psv ? obj(m, psv, C_LIST) : NULL;
    pool_at *ps = NULL;
    const pv *ptv = od ? pk_dict_get(m, od, m->key[K_POOL_SAMPLE_TAGS]) : NULL;
    const pcont *ptl = ptv ? obj(m, ptv, C_LIST) : NULL;
    if (pl && pl->n && read_pool_samples(m, pl, ptl, &ps)) return -1;
    uint32_t nps = ps ? pl->n : 0;
    const pv *rov = od ? pk_dict_get(m, od, m->key[K_RETRIED_OOMS]) : NULL;
    const pcont *rol = rov ? obj(m, rov, C_LIST) : NULL;
    if (rol && rol->n && read_retried_ooms(m, rol, &ps, &nps)) {
        free(ps);
        return -1;
    }
    const pv *mkv = od ? pk_dict_get(m, od, m->key[K_MARKS]) : NULL;
    const pcont *mkl = mkv ? obj(m, mkv, C_LIST) : NULL;
    if (mkl && mkl->n && read_marks(m, mkl, &m->marks_aside)) {
        free(ps);
        return -1;
    }
    m->nmarks_aside = m->marks_aside ? mkl->n : 0;
    const pv *tr = pk_dict_get(m, d, m->key[K_DEVICE_TRACES]);
    int rc = tr ? convert_traces(m, tr, ps, nps) : 0;
    free(ps);
    if (rc) {
        free(m->marks_aside);
        m->marks_aside = NULL;
        return -1;
    }
    const pv *as = pk_dict_get(m, d, m->key[K_ALLOCATOR_SETTINGS]);
    const pcont *ad = as ? obj(m, as, C_DICT) : NULL;
    if (ad) {
        m->s->pt_fields |= CMH_PT_ALLOCATOR_SETTINGS;
        for (uint32_t i = 0; i + 1 < ad->n; i += 2) {
            if (ad->items[i].tag != PV_STR) continue;
            char buf[4096];
            uint8_t type;
            value_text(m, &ad->items[i + 1], buf, sizeof buf, &type);
            if (cmh_snapshot_add_setting(m->s, cmh_str(m->s, ad->items[i].u.id), buf, type) != CMH_OK)
                return pk_nomem(m);
        }
    }
    if (od) {
        const pv *src = pk_dict_get(m, od, m->key[K_SOURCE]);
        if (src && src->tag == PV_STR && src->u.id == m->key[K_RECORDER]) {
            m->s->source = CMH_SRC_RECORDER;
            m->s->pt_fields |= CMH_PT_FROM_RECORDER;
        }
        int64_t x = 0;
        if (!want_int(m, od, K_PID, &x, 0, "cumemhist")) m->s->pid = x;
        x = -1;
        if (!want_int(m, od, K_CONTEXT, &x, 0, "cumemhist") && x >= CMH_CONTEXT_NONE && x <= CMH_CONTEXT_ALL)
            m->s->opt_context = (uint8_t)x; /* the recorder's: whose stacks its frees carry */
        const pv *hv = pk_dict_get(m, od, m->key[K_HOST]), *cv = pk_dict_get(m, od, m->key[K_CMDLINE]);
        if (hv && hv->tag == PV_STR) m->s->hostname = hv->u.id;
        if (cv && cv->tag == PV_STR) m->s->cmdline = cv->u.id;
        const pv *dr = pk_dict_get(m, od, m->key[K_DROPPED]);
        const pcont *dl = dr ? obj(m, dr, C_LIST) : NULL;
        for (uint32_t i = 0; dl && i < dl->n; i++)
            for (uint32_t t = 0; t < m->s->ntraces; t++)
                if (m->s->traces[t].device == (int32_t)i && to_i64(&dl->items[i], &x)) m->s->traces[t].dropped = (uint64_t)x;
        const pv *dov = pk_dict_get(m, od, m->key[K_DROPPED_OOMS]); /* of them, the OOM entries (cmh_trace) */
        const pcont *dol = dov ? obj(m, dov, C_LIST) : NULL;
        for (uint32_t i = 0; dol && i < dol->n; i++)
            for (uint32_t t = 0; t < m->s->ntraces; t++)
                if (m->s->traces[t].device == (int32_t)i && to_i64(&dol->items[i], &x) && x > 0) m->s->traces[t].dropped_ooms = (uint64_t)x;
        x = 0;
        if (!want_int(m, od, K_POOLS_READ_AT_DUMP, &x, 0, "cumemhist") && x == 1 && !(m->s->pt_fields & CMH_PT_ALLOCATOR_SETTINGS) &&
            cmh_snapshot_add_setting(m->s, "pools_read_at_dump", "1", 1) != CMH_OK)
            return pk_nomem(m);
        const pv *th = pk_dict_get(m, od, m->key[K_THREADS]);
        const pcont *tl = th ? obj(m, th, C_LIST) : NULL;
        if (tl && read_threads(m, tl)) goto fail;
        const pv *tiv = pk_dict_get(m, od, m->key[K_THREAD_IDS]);
        const pcont *til = tiv ? obj(m, tiv, C_LIST) : NULL;
        for (uint32_t i = 0; til && i < til->n; i++) {
            const pcont *t = obj(m, &til->items[i], C_TUPLE);
            int64_t th, tid;
            if (!t || t->n != 3 || !to_i64(&t->items[0], &th) || !to_i64(&t->items[1], &tid) || t->items[2].tag != PV_STR || th < 1 ||
                th > UINT32_MAX)
                goto fail_threads;
            cmh_thread_info ti = {(uint32_t)th, tid, t->items[2].u.id};
            if (cmh_snapshot_add_thread(m->s, &ti) != CMH_OK) {
                pk_nomem(m);
                goto fail;
            }
        }
        if (want_int(m, od, K_START_NS, &m->s->start_time_ns, 0, "cumemhist") ||
            want_int(m, od, K_DUMP_NS, &m->s->dump_time_ns, 0, "cumemhist") ||
            want_int(m, od, K_CLOCK_ORIGIN_NS, &m->s->clock_origin_ns, 0, "cumemhist"))
            goto fail;
        const pv *prv = pk_dict_get(m, od, m->key[K_PROCESS]), *env = pk_dict_get(m, od, m->key[K_ENDING]);
        const pcont *prt = prv ? obj(m, prv, C_TUPLE) : NULL;
        if (prt) { /* (rank, local_rank, world_size, forked_from): pickle_write.c */
            int64_t v[4];
            int ok = prt->n == 4;
            for (int k = 0; ok && k < 4; k++) ok = to_i64(&prt->items[k], &v[k]);
            for (int k = 0; ok && k < 3; k++) ok = v[k] >= -1 && v[k] <= INT32_MAX;
            if (!ok) {
                pk_fail(m, "cumemhist.process is not (rank, local_rank, world_size, forked_from)");
                goto fail;
            }
            m->s->rank = (int32_t)v[0];
            m->s->local_rank = (int32_t)v[1];
            m->s->world_size = (int32_t)v[2];
            m->s->forked_from = v[3];
        }
        if (env && env->tag == PV_STR) m->s->ending = env->u.id;
        const pv *miv = pk_dict_get(m, od, m->key[K_MEMINFO]);
        const pcont *mil = miv ? obj(m, miv, C_LIST) : NULL;
        for (uint32_t i = 0; mil && i < mil->n; i++) { /* (device, time_ns, free, total, thread): pickle_write.c */
            const pcont *t = obj(m, &mil->items[i], C_TUPLE);
            int64_t v[5];
            int ok = t && t->n == 5;
            for (int k = 0; ok && k < 5; k++) ok = to_i64(&t->items[k], &v[k]);
            if (!ok || v[0] < -1 || v[0] > 1023 || v[4] < 0 || v[4] > UINT32_MAX) {
                pk_fail(m, "cumemhist.meminfo[%u] is not (device, time_ns, free, total, thread)", i);
                goto fail;
            }
            cmh_meminfo mi = {(int32_t)v[0], v[1], (uint64_t)v[2], (uint64_t)v[3], (uint32_t)v[4]};
            if (cmh_snapshot_add_meminfo(m->s, &mi) != CMH_OK) {
                pk_nomem(m);
                goto fail;
            }
        }
        const pv *vuv = pk_dict_get(m, od, m->key[K_VMM_UNMAPPED]), *vmv = pk_dict_get(m, od, m->key[K_VMM_MAPS]);
        const pcont *vul = vuv ? obj(m, vuv, C_LIST) : NULL, *vml = vmv ? obj(m, vmv, C_LIST) : NULL;
        if ((vul && read_vmm_unmapped(m, vul)) || (vml && read_vmm_maps(m, vml))) goto fail;
        const pv *ffv = pk_dict_get(m, od, m->key[K_FREE_FRAMES]);
        const pcont *ffl = ffv ? obj(m, ffv, C_LIST) : NULL;
        if (ffl && read_free_frames(m, ffl)) goto fail;
        const pv *hlv = pk_dict_get(m, od, m->key[K_HISTORY_LOST]), *dev = pk_dict_get(m, od, m->key[K_DRIVER_ERRORS]),
                 *div = pk_dict_get(m, od, m->key[K_DEVICE_IDS]);
        const pcont *hlt = hlv ? obj(m, hlv, C_TUPLE) : NULL, *del = dev ? obj(m, dev, C_LIST) : NULL, *dil = div ? obj(m, div, C_LIST) : NULL;
        if ((hlt && read_history_lost(m, hlt)) || (del && read_driver_errors(m, del)) || (dil && read_device_ids(m, dil))) goto fail;
        const pv *mv = pk_dict_get(m, od, m->key[K_MODULES]), *fv = pk_dict_get(m, od, m->key[K_FRAME_MODULES]);
        const pcont *ml = mv ? obj(m, mv, C_LIST) : NULL, *fl = fv ? obj(m, fv, C_LIST) : NULL;
        if (ml && read_modules(m, ml, fl)) goto fail;
    }
    static const int top_known[] = {K_SEGMENTS, K_DEVICE_TRACES, K_ALLOCATOR_SETTINGS, K_EXTERNAL_ANNOTATIONS, K_CUMEMHIST};
    if (extras_of(m, d->items, d->n, top_known, (int)(sizeof top_known / sizeof *top_known), &m->s->pt_extra)) goto fail;
    const pv *ea = pk_dict_get(m, d, m->key[K_EXTERNAL_ANNOTATIONS]);
    const pcont *el = ea ? obj(m, ea, C_LIST) : NULL;
    if (el) {
        m->s->pt_fields |= CMH_PT_EXTERNAL_ANNOTATIONS;
        for (uint32_t i = 0; i < el->n; i++) {
            const pcont *a = obj(m, &el->items[i], C_DICT);
            if (!a) return pk_fail(m, "an external annotation is not a dict");
            cmh_annotation an = {0, 0, 0, 0};
            const pv *v = pk_dict_get(m, a, m->key[K_NAME]);
            if (v && v->tag == PV_STR) an.name = v->u.id;
            v = pk_dict_get(m, a, m->key[K_STAGE]);
            an.stage = v && v->tag == PV_STR && v->u.id == m->key[K_END];
            int64_t x = 0;
            if (want_int(m, a, K_DEVICE, &x, 0, "annotation")) goto fail;
            an.device = (int32_t)x;
            x = 0;
            if (want_int(m, a, K_TIME_US, &x, 0, "annotation")) goto fail;
            an.time_ns = us_to_ns(x);
            if (cmh_snapshot_add_annotation(m->s, &an) != CMH_OK) {
                pk_nomem(m);
                goto fail;
            }
        }
        if (drop_mark_annotations(m)) goto fail;
    }
    free(m->marks_aside);
    m->marks_aside = NULL;
    return 0;
fail_threads:
    pk_fail(m, "cumemhist.thread_ids is not a list of (thread, tid, name)");
fail:
    free(m->marks_aside);
    m->marks_aside = NULL;
    return -1;
}

