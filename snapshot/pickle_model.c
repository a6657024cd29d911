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

#include "oatab.h"
#include "pickle_internal.h"
#include "pickle_side.h"

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
    "history_lost", "driver_errors", "device_ids", "vmm_released",
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
static int is_known(const pm *m, const pv *key, const int *known, int nknown)
{
    if (key->tag != PV_STR) return 1; /* (not a key an extra can name) */
    int k = 0;
    while (k < nknown && m->key[known[k]] != key->u.id) k++;
    return k < nknown;
}

static int extras_of(pm *m, const pv *items, uint32_t n, const int *known, int nknown, uint32_t *out)
{
    *out = 0;
    xbuf b = {0};
    for (uint32_t i = 0; i + 1 < n; i += 2) {
        if (is_known(m, &items[i], known, nknown)) continue;
        xstr(&b, cmh_str(m->s, items[i].u.id));
        xvalue(m, &b, &items[i + 1], 0);
    }
    if (!b.nomem && b.n && cmh_strtab_intern(&m->s->strings, b.p, b.n, out) != CMH_OK) b.nomem = 1;
    free(b.p);
    return b.nomem ? pk_nomem(m) : 0;
}

static const int frame_known[] = {K_NAME, K_FILENAME, K_LINE};

/* ---- eager conversion of frames, stacks, entries ---- */

static int frame_of(pm *m, pcont *d, uint32_t *frame_id)
{
    const pv *name = pk_dict_get(m, d, m->key[K_NAME]), *file = pk_dict_get(m, d, m->key[K_FILENAME]);
    const pv *line = pk_dict_get(m, d, m->key[K_LINE]);
    if (!name || !file || name->tag != PV_STR || file->tag != PV_STR)
        return pk_fail(m, "a frame without str 'name' and 'filename' (near byte %zu)", m->op_at);
    int64_t ln = 0;
    if (line) pk_to_i64(line, &ln);
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
                if (pk_to_i64(&c->items[i], &x)) id[i] = (uint64_t)x;
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
        int nk = ann ? ENTRY_KNOWN : ENTRY_KNOWN - 1;
        if (m->fast_run) { /* pickle_fast.c's: such an entry is the machine's (0), its extras not interned */
            for (uint32_t i = 0; i + 1 < n; i += 2)
                if (!is_known(m, &items[i], entry_known, nk)) return 0;
        }
        if (extras_of(m, items, n, entry_known, nk, &m->entry_extra)) return -1;
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
    if ((f = fld[EK_CMH_IMPLIED]) && pk_to_i64(f, &x) && x) {
        *id = 0;
        return 2;
    }
    int64_t code = -1;
    if ((f = fld[EK_CMH_CODE]) && pk_to_i64(f, &code) && code >= 0 && (code & 15) < CMH_ACT_COUNT &&
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
        if ((f = fld[EK_TIME_US]) && pk_to_i64(f, &x)) {
            e.time_ns = pk_us_to_ns(x);
            m->s->pt_fields |= CMH_PT_TIME_US;
        }
        if ((f = fld[EK_STREAM]) && pk_to_i64(f, &x)) e.stream = (uint64_t)x;
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
        e.addr = (f = fld[EK_DEVICE_FREE]) && pk_to_i64(f, &x) ? (uint64_t)x : CMH_DEVICE_FREE_UNKNOWN;
    } else if ((f = fld[EK_ADDR]) && pk_to_i64(f, &x)) {
        e.addr = (uint64_t)x;
    }
    if ((f = fld[EK_SIZE]) && pk_to_i64(f, &x)) {
        if (x < 0) { /* no size: a damaged entry, skipped and counted as the unknown actions are, not replayed as 16 EiB */
            m->s->skipped_entries++;
            *id = 0;
            return 2;
        }
        e.size = e.requested = (uint64_t)x;
    }
    if ((f = fld[EK_STREAM]) && pk_to_i64(f, &x)) e.stream = (uint64_t)x;
    if ((f = fld[EK_TIME_US]) && pk_to_i64(f, &x)) {
        e.time_ns = pk_us_to_ns(x);
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
    if ((f = fld[EK_CMH_REQUESTED]) && pk_to_i64(f, &x)) e.requested = (uint64_t)x;
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
const pcont *pk_obj(pm *m, const pv *v, uint8_t kind)
{
    const pcont *c = pk_as_cont(m, v, kind);
    if (c) m->obj_at = c->at + 1;
    return c;
}

int pk_want_int(pm *m, const pcont *d, int key, int64_t *out, int required, const char *what)
{
    const pv *v = pk_dict_get(m, d, m->key[key]);
    m->obj_at = d->at + 1;
    if (!v) {
        if (required) return pk_fail(m, "%s without '%s'", what, pk_key_names[key]);
        return 0;
    }
    if (!pk_to_i64(v, out)) return pk_fail(m, "%s: '%s' is not an integer", what, pk_key_names[key]);
    return 0;
}

/* A field as uint64 with a default when absent (the usual shape of the schema's integers). */
static int want_u64(pm *m, const pcont *d, int key, uint64_t dflt, int required, const char *what, uint64_t *out)
{
    int64_t x = (int64_t)dflt;
    if (pk_want_int(m, d, key, &x, required, what)) return -1;
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
    const pcont *d = pk_obj(m, sv, C_DICT);
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
    if (pk_want_int(m, d, K_CMH_KIND, &x, 0, "segment")) return -1;
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
    const pcont *bl = v ? pk_obj(m, v, C_LIST) : NULL;
    if (!bl) return v ? pk_fail(m, "segment 'blocks' is not a list") : 0;
    uint64_t at = g.addr, covered = 0;
    for (uint32_t i = 0; i < bl->n; i++) {
        const pcont *b = pk_obj(m, &bl->items[i], C_DICT);
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
        const pcont *hist = h ? pk_obj(m, h, C_LIST) : NULL;
        if (hist && hist->n) {
            m->s->pt_fields |= CMH_PT_LEGACY_HISTORY;
            /* PyTorch's own tools read the first record: its real_size is what the block holds */
            const pcont *first = pk_obj(m, &hist->items[0], C_DICT);
            if (first) {
                x = 0;
                if (!pk_want_int(m, first, K_REAL_SIZE, &x, 0, "history")) blk.requested = (uint64_t)x;
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
        const pcont *tr = pk_obj(m, &outer->items[dev], C_LIST);
        if (!tr) return 0;
        for (uint32_t i = 0; i < tr->n; i++)
            if (tr->items[i].tag != PV_ENTRY || tr->items[i].u.id != next++) return 0;
    }
    if (next != m->nentries) return 0;
    next = 0;
    for (uint32_t dev = 0; dev < outer->n; dev++) {
        const pcont *tr = pk_obj(m, &outer->items[dev], C_LIST);
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
    const pcont *outer = pk_obj(m, tv, C_LIST);
    if (!outer) return pk_fail(m, "'device_traces' is not a list");
    if (!m->generic) {
        int a = adopt_entries(m, outer, nps);
        if (a) return a < 0 ? -1 : 0;
    }
    uint32_t k = 0, km = 0;
    for (uint32_t dev = 0; dev < outer->n; dev++) {
        const pcont *tr = pk_obj(m, &outer->items[dev], C_LIST);
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
            const cmh_entry *pe = &m->entries[e.u.id];
            cmh_entry_unpack(m->s, pe, m->xmap, m->nxmap, e.u.id, &full);
            /* its extra keys (cmh_extra), which the full form has no field for: from the same set,
             * found the same way (a far set numbered CMH_XS_FAR itself, 255, is a set like any) */
            uint32_t extra = cmh_entry_x_apart(m->s, pe, m->xmap, m->nxmap, e.u.id)->extra;
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
        const pcont *d = pk_obj(m, v, C_DICT);
        *type = 4;
        if (d) map_text(m, d, buf, n);
        else snprintf(buf, n, "{}");
        break;
    }
    default: *type = 0; snprintf(buf, n, "%s", ""); break;
    }
}

int pk_convert_top(pm *m, const pv *root)
{
    const pcont *d = pk_obj(m, root, C_DICT);
    if (!d) {
        const pcont *l = pk_obj(m, root, C_LIST);
        if (!l) return pk_fail(m, "not a PyTorch memory snapshot (the pickle holds neither a dict nor a list)");
        m->s->pt_fields |= CMH_PT_BARE_SEGMENTS; /* memory_snapshot(): segments only */
        for (uint32_t i = 0; i < l->n; i++)
            if (convert_segment(m, &l->items[i])) return -1;
        return 0;
    }
    const pv *segs = pk_dict_get(m, d, m->key[K_SEGMENTS]);
    if (!segs) return pk_fail(m, "not a PyTorch memory snapshot (no 'segments')");
    const pcont *sl = pk_obj(m, segs, C_LIST);
    if (!sl) return pk_fail(m, "'segments' is not a list");
    for (uint32_t i = 0; i < sl->n; i++)
        if (convert_segment(m, &sl->items[i])) return -1;
    const pv *ours = pk_dict_get(m, d, m->key[K_CUMEMHIST]);
    const pcont *od = ours ? pk_obj(m, ours, C_DICT) : NULL; /* exported by cumemhist (viz/memviz.c) */
    pool_at *ps = NULL;
    uint32_t nps = 0;
    if (od && pk_side_read_aside(m, od, &ps, &nps)) return -1;
    const pv *tr = pk_dict_get(m, d, m->key[K_DEVICE_TRACES]);
    int rc = tr ? convert_traces(m, tr, ps, nps) : 0;
    free(ps);
    if (rc) {
        free(m->marks_aside);
        m->marks_aside = NULL;
        return -1;
    }
    const pv *as = pk_dict_get(m, d, m->key[K_ALLOCATOR_SETTINGS]);
    const pcont *ad = as ? pk_obj(m, as, C_DICT) : NULL;
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
    if (od && pk_side_read(m, od)) goto fail;
    static const int top_known[] = {K_SEGMENTS, K_DEVICE_TRACES, K_ALLOCATOR_SETTINGS, K_EXTERNAL_ANNOTATIONS, K_CUMEMHIST};
    if (extras_of(m, d->items, d->n, top_known, (int)(sizeof top_known / sizeof *top_known), &m->s->pt_extra)) goto fail;
    const pv *ea = pk_dict_get(m, d, m->key[K_EXTERNAL_ANNOTATIONS]);
    const pcont *el = ea ? pk_obj(m, ea, C_LIST) : NULL;
    if (el) {
        m->s->pt_fields |= CMH_PT_EXTERNAL_ANNOTATIONS;
        for (uint32_t i = 0; i < el->n; i++) {
            const pcont *a = pk_obj(m, &el->items[i], C_DICT);
            if (!a) return pk_fail(m, "an external annotation is not a dict");
            cmh_annotation an = {0, 0, 0, 0};
            const pv *v = pk_dict_get(m, a, m->key[K_NAME]);
            if (v && v->tag == PV_STR) an.name = v->u.id;
            v = pk_dict_get(m, a, m->key[K_STAGE]);
            an.stage = v && v->tag == PV_STR && v->u.id == m->key[K_END];
            int64_t x = 0;
            if (pk_want_int(m, a, K_DEVICE, &x, 0, "annotation")) goto fail;
            an.device = (int32_t)x;
            x = 0;
            if (pk_want_int(m, a, K_TIME_US, &x, 0, "annotation")) goto fail;
            an.time_ns = pk_us_to_ns(x);
            if (cmh_snapshot_add_annotation(m->s, &an) != CMH_OK) {
                pk_nomem(m);
                goto fail;
            }
        }
        if (pk_side_drop_mark_annotations(m)) goto fail;
    }
    free(m->marks_aside);
    m->marks_aside = NULL;
    return 0;
fail:
    free(m->marks_aside);
    m->marks_aside = NULL;
    return -1;
}

