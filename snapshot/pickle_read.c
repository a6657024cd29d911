/*
 * pickle_read.c - PyTorch memory snapshots (pickles) into the snapshot model.  No Python.
 *
 * A small pickle machine for the subset PyTorch's two writers produce (CPython protocols 2-5
 * and the TorchScript pickler's PROTO 2 form): containers, strings, ints of up to 64 bits,
 * floats, bools, None, the memo and FRAME.  Anything that would run code (GLOBAL, REDUCE,
 * BUILD, ...) is refused with the opcode and its byte offset, never executed.
 *
 * Values are 16-byte tagged cells; containers live in one table, so memo references are just
 * indices (a billion-laughs pickle that shares one list a million times costs a million cells,
 * not a million copies).  Strings are interned straight into the snapshot's string table.
 * Nothing recurses on the input: the value and mark stacks are heap arrays, and the conversion
 * to the model walks the fixed schema depth by depth.
 *
 * Memory stays near the size of the model: trace entries are the bulk of any snapshot, and an
 * entry dict is converted into a cmh_entry (and its items freed) the moment it is appended to
 * its trace list; frame dicts become interned frames and frame lists interned stacks as soon
 * as they are complete.  A memoized (shared) frame list converts once.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/snapshot.h"

enum {
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_FLOAT,
    PV_STR,   /* id: string id */
    PV_CONT,  /* id: container index */
    PV_FRAME, /* id: frame id (a converted frame dict) */
    PV_STACK, /* id: stack id (a converted frame list) */
    PV_ENTRY, /* id: index into entries (a converted trace entry dict) */
};

#define PV_SKIP 0xf0 /* conv_tag of an entry of an action this version skips */

typedef struct pv {
    uint8_t tag;
    union {
        int64_t i;
        double f;
        uint32_t id;
    } u;
} pv;

enum { C_LIST, C_DICT, C_TUPLE };

typedef struct pcont {
    uint8_t kind;
    uint8_t conv_tag; /* 0, or PV_FRAME / PV_STACK / PV_ENTRY once converted */
    uint32_t conv_id;
    uint32_t n, cap;
    pv *items; /* dicts: key, value, key, value... */
} pcont;

/* Keys and values the conversion looks for, interned once. */
enum {
    K_SEGMENTS, K_DEVICE_TRACES, K_ALLOCATOR_SETTINGS, K_EXTERNAL_ANNOTATIONS, K_DEVICE, K_ADDRESS,
    K_TOTAL_SIZE, K_STREAM, K_SEGMENT_TYPE, K_SEGMENT_POOL_ID, K_IS_EXPANDABLE, K_FRAMES, K_BLOCKS, K_SIZE,
    K_REQUESTED_SIZE, K_STATE, K_HISTORY, K_ADDR, K_REAL_SIZE, K_ACTION, K_TIME_US, K_COMPILE_CONTEXT,
    K_USER_METADATA, K_DEVICE_FREE, K_NAME, K_FILENAME, K_LINE, K_STAGE, K_LARGE, K_SMALL,
    K_ACTIVE_ALLOCATED, K_ACTIVE_PENDING_FREE, K_ACTIVE_AWAITING_FREE, K_INACTIVE, K_START, K_END, K_CMH_CODE,
    K_CMH_REQUESTED, K_CMH_IMPLIED, K_CMH_KIND, K_CMH_WHOLE, K_CUMEMHIST, K_SOURCE, K_PID, K_DROPPED, K_RECORDER,
    K_POOL_SAMPLES,
    NKEYS
};
static const char *const key_names[NKEYS] = {
    "segments", "device_traces", "allocator_settings", "external_annotations", "device", "address",
    "total_size", "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks", "size",
    "requested_size", "state", "history", "addr", "real_size", "action", "time_us", "compile_context",
    "user_metadata", "device_free", "name", "filename", "line", "stage", "large", "small",
    "active_allocated", "active_pending_free", "active_awaiting_free", "inactive", "START", "END", "cmh_code",
    "cmh_requested", "cmh_implied", "cmh_kind", "cmh_whole", "cumemhist", "source", "pid", "dropped", "recorder",
    "pool_samples",
};

typedef struct frame_slot {
    uint32_t name, filename, id_plus1;
    int64_t line;
} frame_slot;

typedef struct pm {
    const uint8_t *p;
    size_t len, pos, op_at;
    cmh_snapshot *s;
    char *err;
    size_t errlen;
    int failed;
    uint32_t key[NKEYS];
    uint32_t action_of[64]; /* small cache: string id -> action + 1 for the action names */
    pv *stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    pv *memo;
    size_t memo_len, memo_cap;
    pcont *conts;
    uint32_t nconts, cconts;
    cmh_entry *entries; /* converted trace entries, in pickle order */
    uint32_t nentries, centries;
    frame_slot *fslots;
    uint32_t fcap, fn;
    uint64_t budget; /* cells the conversion may still create: bounds shared-container blowups */
    int protocol;
} pm;

static int fail(pm *m, const char *fmt, ...)
{
    if (m->failed) return -1;
    m->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int need(pm *m, size_t n)
{
    if (m->len - m->pos < n)
        return fail(m, "truncated at byte %zu (expected %zu more bytes)", m->len, n - (m->len - m->pos));
    return 0;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- stacks, memo, containers ---- */

static int push(pm *m, pv v)
{
    if (m->sp == m->scap) {
        size_t nc = m->scap ? m->scap * 2 : 256;
        pv *ns = realloc(m->stack, nc * sizeof *ns);
        if (!ns) return fail(m, "out of memory");
        m->stack = ns;
        m->scap = nc;
    }
    m->stack[m->sp++] = v;
    return 0;
}

static int pop(pm *m, pv *v)
{
    size_t floor_ = m->nmarks ? m->marks[m->nmarks - 1] : 0;
    if (m->sp <= floor_) return fail(m, "pickle stack underflow at byte %zu", m->op_at);
    *v = m->stack[--m->sp];
    return 0;
}

static int top(pm *m, pv **v)
{
    size_t floor_ = m->nmarks ? m->marks[m->nmarks - 1] : 0;
    if (m->sp <= floor_) return fail(m, "pickle stack underflow at byte %zu", m->op_at);
    *v = &m->stack[m->sp - 1];
    return 0;
}

static int new_cont(pm *m, uint8_t kind, pv *out)
{
    if (m->nconts == m->cconts) {
        uint32_t nc = m->cconts ? m->cconts * 2 : 1024;
        pcont *n = realloc(m->conts, (size_t)nc * sizeof *n);
        if (!n) return fail(m, "out of memory");
        m->conts = n;
        m->cconts = nc;
    }
    pcont *c = &m->conts[m->nconts];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    out->tag = PV_CONT;
    out->u.id = m->nconts++;
    return 0;
}

static int cont_add(pm *m, pcont *c, const pv *items, size_t n)
{
    if (c->conv_tag) return fail(m, "a converted object is modified at byte %zu", m->op_at);
    if (n == 0) return 0;
    if ((uint64_t)c->n + n > UINT32_MAX) return fail(m, "container too large at byte %zu", m->op_at);
    if (c->n + n > c->cap) {
        uint64_t nc = c->cap ? c->cap : 4;
        while (nc < c->n + n) nc *= 2;
        pv *ni = realloc(c->items, (size_t)nc * sizeof *ni);
        if (!ni) return fail(m, "out of memory");
        c->items = ni;
        c->cap = (uint32_t)nc;
    }
    memcpy(c->items + c->n, items, n * sizeof *items);
    c->n += (uint32_t)n;
    return 0;
}

static pcont *as_cont(pm *m, const pv *v, uint8_t kind)
{
    if (v->tag != PV_CONT) return NULL;
    pcont *c = &m->conts[v->u.id];
    return c->kind == kind ? c : NULL;
}

static const pv *dict_get(pm *m, const pcont *d, uint32_t key)
{
    (void)m;
    for (uint32_t i = 0; i + 1 < d->n; i += 2)
        if (d->items[i].tag == PV_STR && d->items[i].u.id == key) return &d->items[i + 1];
    return NULL;
}

static int memo_put(pm *m, uint64_t idx)
{
    pv *t;
    if (top(m, &t)) return -1;
    /* writers number the memo from 0; a sparse index would cost memory the input never paid for */
    if (idx > m->len || (idx > 4096 && idx > m->memo_len * 2))
        return fail(m, "memo index %llu too large at byte %zu", (unsigned long long)idx, m->op_at);
    if (idx >= m->memo_cap) {
        size_t nc = m->memo_cap ? m->memo_cap : 1024;
        while (nc <= idx) nc *= 2;
        pv *nm = realloc(m->memo, nc * sizeof *nm);
        if (!nm) return fail(m, "out of memory");
        memset(nm + m->memo_cap, 0xff, (nc - m->memo_cap) * sizeof *nm); /* tag 0xff = unset */
        m->memo = nm;
        m->memo_cap = nc;
    }
    m->memo[idx] = *t;
    if (idx >= m->memo_len) m->memo_len = idx + 1;
    return 0;
}

static int memo_get(pm *m, uint64_t idx)
{
    if (idx >= m->memo_len || m->memo[idx].tag == 0xff)
        return fail(m, "memo index %llu used before it was set, at byte %zu", (unsigned long long)idx, m->op_at);
    return push(m, m->memo[idx]);
}

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
    const pv *name = dict_get(m, d, m->key[K_NAME]), *file = dict_get(m, d, m->key[K_FILENAME]);
    const pv *line = dict_get(m, d, m->key[K_LINE]);
    if (!name || !file || name->tag != PV_STR || file->tag != PV_STR)
        return fail(m, "a frame without str 'name' and 'filename' (near byte %zu)", m->op_at);
    int64_t ln = 0;
    if (line) to_i64(line, &ln);
    /* identical frames share one id even when the writer did not share the object */
    if ((m->fn + 1) * 2 > m->fcap) {
        uint32_t nc = m->fcap ? m->fcap * 2 : 1024;
        frame_slot *ns = calloc(nc, sizeof *ns);
        if (!ns) return fail(m, "out of memory");
        for (uint32_t i = 0; i < m->fcap; i++) {
            if (!m->fslots[i].id_plus1) continue;
            frame_slot *o = &m->fslots[i];
            uint32_t j = (uint32_t)((o->name * 31u + o->filename) * 2654435761u ^ (uint32_t)o->line) & (nc - 1);
            while (ns[j].id_plus1) j = (j + 1) & (nc - 1);
            ns[j] = *o;
        }
        free(m->fslots);
        m->fslots = ns;
        m->fcap = nc;
    }
    uint32_t j = (uint32_t)((name->u.id * 31u + file->u.id) * 2654435761u ^ (uint32_t)ln) & (m->fcap - 1);
    for (; m->fslots[j].id_plus1; j = (j + 1) & (m->fcap - 1)) {
        frame_slot *o = &m->fslots[j];
        if (o->name == name->u.id && o->filename == file->u.id && o->line == ln) {
            *frame_id = o->id_plus1 - 1;
            return 0;
        }
    }
    cmh_frame f = {0, name->u.id, file->u.id, ln, -1};
    if (cmh_snapshot_add_frame(m->s, &f, frame_id) != CMH_OK) return fail(m, "out of memory");
    m->fslots[j] = (frame_slot){name->u.id, file->u.id, *frame_id + 1, ln};
    m->fn++;
    return 0;
}

static void release_items(pcont *c, uint8_t tag, uint32_t id)
{
    free(c->items);
    c->items = NULL;
    c->n = c->cap = 0;
    c->conv_tag = tag;
    c->conv_id = id;
}

/* A frame dict (if v is one) becomes PV_FRAME. */
static int convert_frame(pm *m, pv *v)
{
    pcont *c;
    if (v->tag != PV_CONT) return 0;
    c = &m->conts[v->u.id];
    if (c->conv_tag == PV_FRAME) {
        v->tag = PV_FRAME;
        v->u.id = c->conv_id;
        return 0;
    }
    if (c->kind != C_DICT || c->conv_tag || !dict_get(m, c, m->key[K_FILENAME])) return 0;
    uint32_t id;
    if (frame_of(m, c, &id)) return -1;
    release_items(c, PV_FRAME, id);
    v->tag = PV_FRAME;
    v->u.id = id;
    return 0;
}

/* A list of frames becomes PV_STACK (converted once, however often the memo shares it). */
static int convert_stack(pm *m, pv *v)
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
        release_items(c, PV_STACK, 0);
        v->tag = PV_STACK;
        v->u.id = 0;
        return 0;
    }
    uint32_t small[128], *ids = small;
    if (c->n > 128 && !(ids = malloc((size_t)c->n * sizeof *ids))) return fail(m, "out of memory");
    for (uint32_t i = 0; i < c->n; i++) {
        if (convert_frame(m, &c->items[i])) goto bad;
        if (c->items[i].tag != PV_FRAME) {
            fail(m, "a 'frames' list holds something other than frames (near byte %zu)", m->op_at);
            goto bad;
        }
        ids[i] = c->items[i].u.id;
    }
    uint32_t sid;
    if (cmh_snapshot_add_stack(m->s, ids, c->n, &sid) != CMH_OK) {
        fail(m, "out of memory");
        goto bad;
    }
    if (ids != small) free(ids);
    release_items(c, PV_STACK, sid);
    v->tag = PV_STACK;
    v->u.id = sid;
    return 0;
bad:
    if (ids != small) free(ids);
    return -1;
}

static int action_of(pm *m, uint32_t str)
{
    if (str < 64 && m->action_of[str]) return (int)m->action_of[str] - 1;
    int a = cmh_action_from_name(cmh_str(m->s, str));
    if (str < 64) m->action_of[str] = (uint32_t)(a + 1);
    return a;
}

/* A trace-entry dict (one with 'action') becomes PV_ENTRY. */
static int convert_entry(pm *m, pv *v)
{
    if (v->tag != PV_CONT) return 0;
    pcont *c = &m->conts[v->u.id];
    if (c->conv_tag == PV_ENTRY || c->conv_tag == PV_SKIP) {
        v->tag = c->conv_tag == PV_ENTRY ? PV_ENTRY : PV_NONE;
        v->u.id = c->conv_id;
        return 0;
    }
    if (c->kind != C_DICT || c->conv_tag) return 0;
    const pv *act = dict_get(m, c, m->key[K_ACTION]);
    if (!act) return 0;
    if (act->tag != PV_STR) return fail(m, "a trace entry whose 'action' is not a string (near byte %zu)", m->op_at);
    cmh_entry e;
    memset(&e, 0, sizeof e);
    int a = action_of(m, act->u.id);
    int64_t x;
    const pv *f;
    /* our own keys (viz/memviz.c): entries implied by a whole block, and what PyTorch lacks */
    if ((f = dict_get(m, c, m->key[K_CMH_IMPLIED])) && to_i64(f, &x) && x) {
        release_items(c, PV_SKIP, 0);
        v->tag = PV_NONE;
        return 0;
    }
    int64_t code = -1;
    if ((f = dict_get(m, c, m->key[K_CMH_CODE])) && to_i64(f, &code) && code >= 0 && (code & 15) < CMH_ACT_COUNT &&
        ((code >> 5) & 7) < CMH_KIND_COUNT) {
        a = (int)(code & 15);
        e.flags = (uint8_t)((code >> 4) & 1);
    } else {
        code = -1;
    }
    if (a < 0 || a >= CMH_ACT_MARK) {
        m->s->skipped_entries++; /* e.g. 'annotate' (newer PyTorch): not part of the model */
        release_items(c, PV_SKIP, 0);
        v->tag = PV_NONE;
        return 0;
    }
    e.action = (uint8_t)a;
    if (a == CMH_ACT_OOM) {
        if ((f = dict_get(m, c, m->key[K_DEVICE_FREE])) && to_i64(f, &x)) e.addr = (uint64_t)x;
    } else if ((f = dict_get(m, c, m->key[K_ADDR])) && to_i64(f, &x)) {
        e.addr = (uint64_t)x;
    }
    if ((f = dict_get(m, c, m->key[K_SIZE])) && to_i64(f, &x)) e.size = e.requested = (uint64_t)x;
    if ((f = dict_get(m, c, m->key[K_STREAM])) && to_i64(f, &x)) e.stream = (uint64_t)x;
    if ((f = dict_get(m, c, m->key[K_TIME_US])) && to_i64(f, &x)) {
        e.time_ns = us_to_ns(x);
        m->s->pt_fields |= CMH_PT_TIME_US;
    }
    if ((f = dict_get(m, c, m->key[K_COMPILE_CONTEXT])) && f->tag == PV_STR) {
        e.compile_context = f->u.id;
        m->s->pt_fields |= CMH_PT_COMPILE_CONTEXT;
    }
    if ((f = dict_get(m, c, m->key[K_USER_METADATA])) && f->tag == PV_STR) {
        e.user_metadata = f->u.id;
        m->s->pt_fields |= CMH_PT_USER_METADATA;
    }
    pv *fr = (pv *)dict_get(m, c, m->key[K_FRAMES]);
    if (fr) {
        if (convert_stack(m, fr)) return -1;
        if (fr->tag == PV_STACK) e.stack = fr->u.id;
        if (code < 0) e.flags |= CMH_EF_HAS_FRAMES; /* a PyTorch entry's own key; ours carry cmh_code */
    }
    e.kind = code >= 0 ? (uint8_t)((code >> 5) & 7) : CMH_KIND_DEVICE;
    if ((f = dict_get(m, c, m->key[K_CMH_REQUESTED])) && to_i64(f, &x)) e.requested = (uint64_t)x;
    if (m->nentries == m->centries) {
        uint32_t nc = m->centries ? m->centries * 2 : 4096;
        cmh_entry *ne = realloc(m->entries, (size_t)nc * sizeof *ne);
        if (!ne) return fail(m, "out of memory");
        m->entries = ne;
        m->centries = nc;
    }
    m->entries[m->nentries] = e;
    release_items(c, PV_ENTRY, m->nentries);
    v->tag = PV_ENTRY;
    v->u.id = m->nentries++;
    return 0;
}

/* ---- the machine ---- */

static const char *opname(uint8_t op)
{
    switch (op) {
    case 'c': return "GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 0x93: return "STACK_GLOBAL";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 0x82: return "EXT1";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    default: return "unknown";
    }
}

static int mark_items(pm *m, size_t *from)
{
    if (!m->nmarks) return fail(m, "no MARK for the opcode at byte %zu", m->op_at);
    *from = m->marks[--m->nmarks];
    return 0;
}

static int read_long(pm *m, size_t n)
{
    if (need(m, n)) return -1;
    const uint8_t *b = m->p + m->pos;
    m->pos += n;
    uint64_t v = 0;
    if (n == 0) v = 0;
    else if (n <= 8) {
        v = le(b, (int)n);
        if (n < 8 && (b[n - 1] & 0x80)) v |= ~0ull << (8 * n);
    } else {
        /* wider only as sign padding: a 9-byte positive value < 2^64 (CPython pads uint64s) */
        int neg = (b[n - 1] & 0x80) != 0;
        for (size_t i = 8; i < n; i++)
            if (b[i] != (neg ? 0xff : 0x00)) return fail(m, "integer wider than 64 bits at byte %zu", m->op_at);
        v = le(b, 8);
        if (neg && !(v >> 63)) return fail(m, "integer wider than 64 bits at byte %zu", m->op_at);
    }
    pv x = {PV_INT, {.i = (int64_t)v}};
    return push(m, x);
}

static int read_str(pm *m, size_t n)
{
    if (need(m, n)) return -1;
    const char *b = (const char *)m->p + m->pos;
    if (memchr(b, 0, n)) return fail(m, "string with a NUL character at byte %zu", m->op_at);
    pv x = {PV_STR, {.id = 0}};
    if (cmh_strtab_intern(&m->s->strings, b, n, &x.u.id) != CMH_OK) return fail(m, "out of memory");
    m->pos += n;
    return push(m, x);
}

static int run(pm *m, pv *result)
{
    for (;;) {
        if (need(m, 1)) return -1;
        m->op_at = m->pos;
        uint8_t op = m->p[m->pos++];
        pv v, k, *t;
        size_t from = 0;
        switch (op) {
        case 0x80: /* PROTO */
            if (need(m, 1)) return -1;
            m->protocol = m->p[m->pos++];
            if (m->protocol < 2 || m->protocol > 5)
                return fail(m, "unsupported pickle protocol %d at byte %zu (PyTorch writes 2 to 5)", m->protocol, m->op_at);
            break;
        case 0x95: /* FRAME: a length hint */
            if (need(m, 8)) return -1;
            m->pos += 8;
            break;
        case '(': /* MARK */
            if (m->nmarks == m->mcap) {
                size_t nc = m->mcap ? m->mcap * 2 : 64;
                size_t *nmk = realloc(m->marks, nc * sizeof *nmk);
                if (!nmk) return fail(m, "out of memory");
                m->marks = nmk;
                m->mcap = nc;
            }
            m->marks[m->nmarks++] = m->sp;
            break;
        case '.': /* STOP */
            if (m->nmarks) return fail(m, "STOP with an open MARK at byte %zu", m->op_at);
            if (m->sp != 1) return fail(m, "STOP with %zu values on the stack at byte %zu", m->sp, m->op_at);
            *result = m->stack[0];
            return 0;
        case '}': if (new_cont(m, C_DICT, &v) || push(m, v)) return -1; break;
        case ']': if (new_cont(m, C_LIST, &v) || push(m, v)) return -1; break;
        case ')': if (new_cont(m, C_TUPLE, &v) || push(m, v)) return -1; break;
        case 'N': v.tag = PV_NONE; v.u.i = 0; if (push(m, v)) return -1; break;
        case 0x88: case 0x89: v.tag = PV_BOOL; v.u.i = op == 0x88; if (push(m, v)) return -1; break;
        case 'K':
            if (need(m, 1)) return -1;
            v.tag = PV_INT; v.u.i = m->p[m->pos++];
            if (push(m, v)) return -1;
            break;
        case 'M':
            if (need(m, 2)) return -1;
            v.tag = PV_INT; v.u.i = (int64_t)le(m->p + m->pos, 2); m->pos += 2;
            if (push(m, v)) return -1;
            break;
        case 'J':
            if (need(m, 4)) return -1;
            v.tag = PV_INT; v.u.i = (int32_t)(uint32_t)le(m->p + m->pos, 4); m->pos += 4;
            if (push(m, v)) return -1;
            break;
        case 0x8a: /* LONG1 */
            if (need(m, 1)) return -1;
            if (read_long(m, m->p[m->pos++])) return -1;
            break;
        case 0x8b: { /* LONG4 */
            if (need(m, 4)) return -1;
            uint64_t n = le(m->p + m->pos, 4);
            m->pos += 4;
            if (n > 16) return fail(m, "integer wider than 64 bits at byte %zu", m->op_at);
            if (read_long(m, (size_t)n)) return -1;
            break;
        }
        case 'G': { /* BINFLOAT, big-endian */
            if (need(m, 8)) return -1;
            uint64_t bits = 0;
            for (int i = 0; i < 8; i++) bits = bits << 8 | m->p[m->pos + (size_t)i];
            m->pos += 8;
            v.tag = PV_FLOAT;
            memcpy(&v.u.f, &bits, 8);
            if (push(m, v)) return -1;
            break;
        }
        case 0x8c: if (need(m, 1) || read_str(m, m->p[m->pos++])) return -1; break;
        case 'X': {
            if (need(m, 4)) return -1;
            size_t n = (size_t)le(m->p + m->pos, 4);
            m->pos += 4;
            if (read_str(m, n)) return -1;
            break;
        }
        case 0x8d: {
            if (need(m, 8)) return -1;
            uint64_t n = le(m->p + m->pos, 8);
            m->pos += 8;
            if (n > m->len) return fail(m, "truncated at byte %zu (a string of %llu bytes)", m->len, (unsigned long long)n);
            if (read_str(m, (size_t)n)) return -1;
            break;
        }
        case 0x94: if (memo_put(m, m->memo_len)) return -1; break; /* MEMOIZE */
        case 'q': if (need(m, 1) || memo_put(m, m->p[m->pos++])) return -1; break;
        case 'r': {
            if (need(m, 4)) return -1;
            uint64_t i = le(m->p + m->pos, 4);
            m->pos += 4;
            if (memo_put(m, i)) return -1;
            break;
        }
        case 'h': if (need(m, 1) || memo_get(m, m->p[m->pos++])) return -1; break;
        case 'j': {
            if (need(m, 4)) return -1;
            uint64_t i = le(m->p + m->pos, 4);
            m->pos += 4;
            if (memo_get(m, i)) return -1;
            break;
        }
        case 'a': /* APPEND */
            if (pop(m, &v) || top(m, &t)) return -1;
            if (!as_cont(m, t, C_LIST)) return fail(m, "APPEND to something that is not a list at byte %zu", m->op_at);
            if (convert_entry(m, &v) || convert_frame(m, &v)) return -1;
            if (cont_add(m, &m->conts[t->u.id], &v, 1)) return -1;
            break;
        case 'e': { /* APPENDS */
            if (mark_items(m, &from)) return -1;
            if (from == 0 || !as_cont(m, &m->stack[from - 1], C_LIST))
                return fail(m, "APPENDS to something that is not a list at byte %zu", m->op_at);
            for (size_t i = from; i < m->sp; i++)
                if (convert_entry(m, &m->stack[i]) || convert_frame(m, &m->stack[i])) return -1;
            if (cont_add(m, &m->conts[m->stack[from - 1].u.id], m->stack + from, m->sp - from)) return -1;
            m->sp = from;
            break;
        }
        case 's': /* SETITEM */
            if (pop(m, &v) || pop(m, &k) || top(m, &t)) return -1;
            if (!as_cont(m, t, C_DICT)) return fail(m, "SETITEM on something that is not a dict at byte %zu", m->op_at);
            if (k.tag == PV_STR && k.u.id == m->key[K_FRAMES] && convert_stack(m, &v)) return -1;
            {
                pv kv[2] = {k, v};
                if (cont_add(m, &m->conts[t->u.id], kv, 2)) return -1;
            }
            break;
        case 'u': { /* SETITEMS */
            if (mark_items(m, &from)) return -1;
            if (from == 0 || !as_cont(m, &m->stack[from - 1], C_DICT))
                return fail(m, "SETITEMS on something that is not a dict at byte %zu", m->op_at);
            if ((m->sp - from) % 2) return fail(m, "SETITEMS with an odd number of items at byte %zu", m->op_at);
            for (size_t i = from; i < m->sp; i += 2)
                if (m->stack[i].tag == PV_STR && m->stack[i].u.id == m->key[K_FRAMES] && convert_stack(m, &m->stack[i + 1]))
                    return -1;
            if (cont_add(m, &m->conts[m->stack[from - 1].u.id], m->stack + from, m->sp - from)) return -1;
            m->sp = from;
            break;
        }
        case 'd': case 'l': case 't': { /* DICT, LIST, TUPLE from the mark */
            if (mark_items(m, &from)) return -1;
            uint8_t kind = op == 'd' ? C_DICT : op == 'l' ? C_LIST : C_TUPLE;
            if (kind == C_DICT && (m->sp - from) % 2) return fail(m, "DICT with an odd number of items at byte %zu", m->op_at);
            if (new_cont(m, kind, &v)) return -1;
            if (kind == C_LIST)
                for (size_t i = from; i < m->sp; i++)
                    if (convert_entry(m, &m->stack[i]) || convert_frame(m, &m->stack[i])) return -1;
            if (m->sp > from && cont_add(m, &m->conts[v.u.id], m->stack + from, m->sp - from)) return -1;
            m->sp = from;
            if (push(m, v)) return -1;
            break;
        }
        case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
            size_t n = (size_t)(op - 0x84);
            size_t floor_ = m->nmarks ? m->marks[m->nmarks - 1] : 0;
            if (m->sp < floor_ + n) return fail(m, "pickle stack underflow at byte %zu", m->op_at);
            if (new_cont(m, C_TUPLE, &v)) return -1;
            if (cont_add(m, &m->conts[v.u.id], m->stack + m->sp - n, n)) return -1;
            m->sp -= n;
            if (push(m, v)) return -1;
            break;
        }
        default:
            return fail(m, "unsupported pickle opcode 0x%02x (%s) at byte %zu", op, opname(op), m->op_at);
        }
    }
}

/* ---- the finished value into the model ---- */

static int want_int(pm *m, const pcont *d, int key, int64_t *out, int required, const char *what)
{
    const pv *v = dict_get(m, d, m->key[key]);
    if (!v) {
        if (required) return fail(m, "%s without '%s'", what, key_names[key]);
        return 0;
    }
    if (!to_i64(v, out)) return fail(m, "%s: '%s' is not an integer", what, key_names[key]);
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
    pv *f = (pv *)dict_get(m, d, m->key[K_FRAMES]);
    if (!f) return 0;
    if (f->tag == PV_CONT && convert_stack(m, f)) return 0;
    return f->tag == PV_STACK ? f->u.id : 0;
}

static int convert_segment(pm *m, const pv *sv)
{
    const pcont *d = as_cont(m, sv, C_DICT);
    if (!d) return fail(m, "a segment is not a dict");
    cmh_segment g;
    memset(&g, 0, sizeof g);
    int64_t x = 0;
    uint64_t dev;
    if (want_u64(m, d, K_DEVICE, 0, 0, "segment", &dev) || want_u64(m, d, K_ADDRESS, 0, 1, "segment", &g.addr) ||
        want_u64(m, d, K_TOTAL_SIZE, 0, 1, "segment", &g.size) || want_u64(m, d, K_STREAM, 0, 0, "segment", &g.stream))
        return -1;
    g.device = (int32_t)dev;
    const pv *v = dict_get(m, d, m->key[K_SEGMENT_TYPE]);
    g.pool = v && v->tag == PV_STR ? (v->u.id == m->key[K_SMALL] ? CMH_POOL_SMALL : v->u.id == m->key[K_LARGE] ? CMH_POOL_LARGE : CMH_POOL_UNKNOWN)
                                   : CMH_POOL_UNKNOWN;
    const pcont *pid = (v = dict_get(m, d, m->key[K_SEGMENT_POOL_ID])) ? as_cont(m, v, C_TUPLE) : NULL;
    if (!pid && v) pid = as_cont(m, v, C_LIST);
    for (uint32_t i = 0; pid && i < 2 && i < pid->n; i++)
        if (to_i64(&pid->items[i], &x)) g.pool_id[i] = (uint64_t)x;
    v = dict_get(m, d, m->key[K_IS_EXPANDABLE]);
    if (v && (v->tag == PV_BOOL || v->tag == PV_INT) && v->u.i) g.flags |= CMH_SEG_EXPANDABLE;
    g.stack = stack_of(m, d);
    g.kind = CMH_KIND_DEVICE;
    if (want_int(m, d, K_CMH_KIND, &x, 0, "segment")) return -1;
    if ((v = dict_get(m, d, m->key[K_CMH_KIND])) && x >= 0 && x < CMH_KIND_COUNT) g.kind = (uint8_t)x;
    v = dict_get(m, d, m->key[K_CMH_WHOLE]);
    if (v && (v->tag == PV_BOOL || v->tag == PV_INT) && v->u.i) g.flags |= CMH_SEG_WHOLE_BLOCK;
    if (m->failed || cmh_snapshot_add_segment(m->s, &g, NULL) != CMH_OK) return fail(m, "out of memory");
    v = dict_get(m, d, m->key[K_BLOCKS]);
    const pcont *bl = v ? as_cont(m, v, C_LIST) : NULL;
    if (!bl) return v ? fail(m, "segment 'blocks' is not a list") : 0;
    uint64_t at = g.addr;
    for (uint32_t i = 0; i < bl->n; i++) {
        const pcont *b = as_cont(m, &bl->items[i], C_DICT);
        if (!b) return fail(m, "a block is not a dict");
        if (m->budget-- == 0) return fail(m, "the snapshot expands far beyond its size (shared containers)");
        cmh_block blk;
        memset(&blk, 0, sizeof blk);
        if (want_u64(m, b, K_ADDRESS, at, 0, "block", &blk.addr) || want_u64(m, b, K_SIZE, 0, 1, "block", &blk.size) ||
            want_u64(m, b, K_REQUESTED_SIZE, 0, 0, "block", &blk.requested))
            return -1;
        v = dict_get(m, b, m->key[K_STATE]);
        uint32_t st = v && v->tag == PV_STR ? v->u.id : 0;
        blk.state = st == m->key[K_ACTIVE_ALLOCATED] ? CMH_BLOCK_ACTIVE_ALLOCATED
                    : st == m->key[K_ACTIVE_PENDING_FREE] || st == m->key[K_ACTIVE_AWAITING_FREE] ? CMH_BLOCK_ACTIVE_PENDING_FREE
                                                                                                 : CMH_BLOCK_INACTIVE;
        blk.stack = stack_of(m, b);
        /* PyTorch <= 2.0: no address/frames, a 'history' of {addr, real_size, frames} */
        const pv *h = dict_get(m, b, m->key[K_HISTORY]);
        const pcont *hist = h ? as_cont(m, h, C_LIST) : NULL;
        if (hist && hist->n) {
            m->s->pt_fields |= CMH_PT_LEGACY_HISTORY;
            /* PyTorch's own tools read the first record: its real_size is what the block holds */
            const pcont *first = as_cont(m, &hist->items[0], C_DICT);
            if (first) {
                x = 0;
                if (!want_int(m, first, K_REAL_SIZE, &x, 0, "history")) blk.requested = (uint64_t)x;
                if (!blk.stack) blk.stack = stack_of(m, first);
            }
        }
        if (m->failed || cmh_snapshot_add_block(m->s, &blk) != CMH_OK) return fail(m, "out of memory");
        at = blk.addr + blk.size;
    }
    return 0;
}

static int convert_traces(pm *m, const pv *tv)
{
    const pcont *outer = as_cont(m, tv, C_LIST);
    if (!outer) return fail(m, "'device_traces' is not a list");
    for (uint32_t dev = 0; dev < outer->n; dev++) {
        const pcont *tr = as_cont(m, &outer->items[dev], C_LIST);
        if (!tr) return fail(m, "device_traces[%u] is not a list", dev);
        if (cmh_snapshot_add_trace(m->s, (int32_t)dev, 0, NULL) != CMH_OK) return fail(m, "out of memory");
        for (uint32_t i = 0; i < tr->n; i++) {
            pv e = tr->items[i];
            if (e.tag == PV_CONT && convert_entry(m, &e)) return -1;
            if (e.tag == PV_NONE) continue; /* an action this version skips */
            if (e.tag != PV_ENTRY) return fail(m, "device_traces[%u][%u] is not a trace entry", dev, i);
            if (m->budget-- == 0) return fail(m, "the snapshot expands far beyond its size (shared containers)");
            if (cmh_snapshot_add_entry(m->s, &m->entries[e.u.id]) != CMH_OK) return fail(m, "out of memory");
        }
    }
    return 0;
}

static void value_text(pm *m, const pv *v, char *buf, size_t n, uint8_t *type);

static void map_text(pm *m, const pcont *d, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "{");
    for (uint32_t i = 0; i + 1 < d->n && k < n; i += 2) {
        char kb[256], vb[256];
        uint8_t t;
        value_text(m, &d->items[i], kb, sizeof kb, &t);
        value_text(m, &d->items[i + 1], vb, sizeof vb, &t);
        k += (size_t)snprintf(buf + k, n - k, "%s\"%s\": %s", i ? ", " : "", kb, vb);
    }
    if (k < n) snprintf(buf + k, n - k, "}");
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
        const pcont *d = as_cont(m, v, C_DICT);
        *type = 4;
        if (d) map_text(m, d, buf, n);
        else snprintf(buf, n, "{}");
        break;
    }
    default: *type = 0; snprintf(buf, n, "%s", ""); break;
    }
}

/* Pool samples an export kept aside (pickle_write.c), put back at their places in the traces:
 * each is (device, how many of that device's entries precede it, pool, reserved, used, time_us). */
typedef struct pool_at {
    int32_t device;
    uint64_t pos;
    cmh_entry e;
} pool_at;

static int cmp_pool_at(const void *a, const void *b)
{
    const pool_at *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int insert_pool_samples(pm *m, const pcont *pl)
{
    cmh_snapshot *s = m->s;
    if ((uint64_t)s->nentries + pl->n > UINT32_MAX) return fail(m, "too many trace entries");
    size_t cap = (size_t)s->nentries + pl->n;
    pool_at *ps = calloc(pl->n, sizeof *ps);
    cmh_entry *ne = calloc(cap, sizeof *ne);
    uint32_t *orig = calloc(s->ntraces + 1, sizeof *orig); /* each trace's entries before the merge */
    if (!ps || !ne || !orig) {
        free(ps);
        free(ne);
        free(orig);
        return fail(m, "out of memory");
    }
    for (uint32_t t = 0; t < s->ntraces; t++) orig[t] = s->traces[t].nentries;
    for (uint32_t i = 0; i < pl->n; i++) {
        const pcont *t = as_cont(m, &pl->items[i], C_TUPLE);
        int64_t v[6];
        int ok = t && t->n == 6;
        for (int k = 0; ok && k < 6; k++) ok = to_i64(&t->items[k], &v[k]);
        if (!ok || v[1] < 0) {
            free(ps);
            free(ne);
            free(orig);
            return fail(m, "cumemhist.pool_samples[%u] is not (device, position, pool, reserved, used, time_us)", i);
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
    qsort(ps, pl->n, sizeof *ps, cmp_pool_at);
    /* a sample at position p comes before the device's entry p; past the end, after the last */
    uint32_t n = 0;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        cmh_trace *tr = &s->traces[t];
        uint64_t before = 0; /* this device's entries in earlier traces */
        int last = 1;
        for (uint32_t u = 0; u < s->ntraces; u++)
            if (s->traces[u].device == tr->device) {
                if (u < t) before += orig[u];
                if (u > t) last = 0;
            }
        uint32_t k = 0;
        while (k < pl->n && (ps[k].device < tr->device || (ps[k].device == tr->device && ps[k].pos < before))) k++;
        uint32_t first = n;
        for (uint32_t i = 0; i < tr->nentries; i++) {
            while (k < pl->n && ps[k].device == tr->device && ps[k].pos <= before + i) ne[n++] = ps[k++].e;
            ne[n++] = s->entries[tr->first_entry + i];
        }
        while (last && k < pl->n && ps[k].device == tr->device) ne[n++] = ps[k++].e;
        tr->first_entry = first;
        tr->nentries = n - first;
    }
    free(s->entries);
    s->entries = ne;
    s->nentries = n;
    s->cap_entries = (uint32_t)cap;
    free(ps);
    free(orig);
    return 0;
}

static int convert_top(pm *m, const pv *root)
{
    const pcont *d = as_cont(m, root, C_DICT);
    if (!d) {
        const pcont *l = as_cont(m, root, C_LIST);
        if (!l) return fail(m, "not a PyTorch memory snapshot (the pickle holds neither a dict nor a list)");
        m->s->pt_fields |= CMH_PT_BARE_SEGMENTS; /* memory_snapshot(): segments only */
        for (uint32_t i = 0; i < l->n; i++)
            if (convert_segment(m, &l->items[i])) return -1;
        return 0;
    }
    const pv *segs = dict_get(m, d, m->key[K_SEGMENTS]);
    if (!segs) return fail(m, "not a PyTorch memory snapshot (no 'segments')");
    const pcont *sl = as_cont(m, segs, C_LIST);
    if (!sl) return fail(m, "'segments' is not a list");
    for (uint32_t i = 0; i < sl->n; i++)
        if (convert_segment(m, &sl->items[i])) return -1;
    const pv *tr = dict_get(m, d, m->key[K_DEVICE_TRACES]);
    if (tr && convert_traces(m, tr)) return -1;
    const pv *as = dict_get(m, d, m->key[K_ALLOCATOR_SETTINGS]);
    const pcont *ad = as ? as_cont(m, as, C_DICT) : NULL;
    if (ad) {
        m->s->pt_fields |= CMH_PT_ALLOCATOR_SETTINGS;
        for (uint32_t i = 0; i + 1 < ad->n; i += 2) {
            if (ad->items[i].tag != PV_STR) continue;
            char buf[4096];
            uint8_t type;
            value_text(m, &ad->items[i + 1], buf, sizeof buf, &type);
            if (cmh_snapshot_add_setting(m->s, cmh_str(m->s, ad->items[i].u.id), buf, type) != CMH_OK)
                return fail(m, "out of memory");
        }
    }
    const pv *ours = dict_get(m, d, m->key[K_CUMEMHIST]);
    const pcont *od = ours ? as_cont(m, ours, C_DICT) : NULL;
    if (od) { /* exported by cumemhist (viz/memviz.c) */
        const pv *src = dict_get(m, od, m->key[K_SOURCE]);
        if (src && src->tag == PV_STR && src->u.id == m->key[K_RECORDER]) {
            m->s->source = CMH_SRC_RECORDER;
            m->s->pt_fields |= CMH_PT_FROM_RECORDER;
        }
        int64_t x = 0;
        if (!want_int(m, od, K_PID, &x, 0, "cumemhist")) m->s->pid = x;
        const pv *dr = dict_get(m, od, m->key[K_DROPPED]);
        const pcont *dl = dr ? as_cont(m, dr, C_LIST) : NULL;
        for (uint32_t i = 0; dl && i < dl->n; i++)
            for (uint32_t t = 0; t < m->s->ntraces; t++)
                if (m->s->traces[t].device == (int32_t)i && to_i64(&dl->items[i], &x)) m->s->traces[t].dropped = (uint64_t)x;
        const pv *ps = dict_get(m, od, m->key[K_POOL_SAMPLES]);
        const pcont *pl = ps ? as_cont(m, ps, C_LIST) : NULL;
        if (pl && pl->n && insert_pool_samples(m, pl)) return -1;
    }
    const pv *ea = dict_get(m, d, m->key[K_EXTERNAL_ANNOTATIONS]);
    const pcont *el = ea ? as_cont(m, ea, C_LIST) : NULL;
    if (el) {
        m->s->pt_fields |= CMH_PT_EXTERNAL_ANNOTATIONS;
        for (uint32_t i = 0; i < el->n; i++) {
            const pcont *a = as_cont(m, &el->items[i], C_DICT);
            if (!a) return fail(m, "an external annotation is not a dict");
            cmh_annotation an = {0, 0, 0, 0};
            const pv *v = dict_get(m, a, m->key[K_NAME]);
            if (v && v->tag == PV_STR) an.name = v->u.id;
            v = dict_get(m, a, m->key[K_STAGE]);
            an.stage = v && v->tag == PV_STR && v->u.id == m->key[K_END];
            int64_t x = 0;
            if (want_int(m, a, K_DEVICE, &x, 0, "annotation")) return -1;
            an.device = (int32_t)x;
            x = 0;
            if (want_int(m, a, K_TIME_US, &x, 0, "annotation")) return -1;
            an.time_ns = us_to_ns(x);
            if (cmh_snapshot_add_annotation(m->s, &an) != CMH_OK) return fail(m, "out of memory");
        }
    }
    return 0;
}

int cmh_pickle_read(const void *buf, size_t len, cmh_snapshot *s, char *err, size_t errlen)
{
    pm m;
    memset(&m, 0, sizeof m);
    m.p = buf;
    m.len = len;
    m.s = s;
    m.err = err;
    m.errlen = errlen;
    if (cmh_snapshot_init(s) != CMH_OK) {
        snprintf(err, errlen, "out of memory");
        return CMH_ENOMEM;
    }
    s->source = CMH_SRC_PYTORCH;
    /* every block and entry comes from at least a few bytes of input; sharing may multiply
     * them, but not past this */
    m.budget = (uint64_t)len * 4 + 4096;
    for (int i = 0; i < NKEYS; i++)
        if (cmh_strtab_intern(&s->strings, key_names[i], strlen(key_names[i]), &m.key[i]) != CMH_OK) {
            fail(&m, "out of memory");
            break;
        }
    pv root = {PV_NONE, {.i = 0}};
    int rc = m.failed ? -1 : run(&m, &root);
    if (rc == 0 && m.pos != m.len) rc = fail(&m, "%zu bytes after STOP at byte %zu", m.len - m.pos, m.pos);
    if (rc == 0) rc = convert_top(&m, &root);
    for (uint32_t i = 0; i < m.nconts; i++) free(m.conts[i].items);
    free(m.conts);
    free(m.stack);
    free(m.marks);
    free(m.memo);
    free(m.entries);
    free(m.fslots);
    if (rc != 0) {
        cmh_snapshot_free(s);
        return CMH_EFORMAT;
    }
    return CMH_OK;
}
