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
 * as they are complete.  A memoized (shared) frame list converts once.  Those conversions, and
 * the schema of the finished value, are in pickle_model.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oatab.h"
#include "mapped.h"
#include "pickle_internal.h"

int pk_fail(pm *m, const char *fmt, ...)
{
    if (m->failed) return -1;
    m->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
    /* every message points at a byte: the object the model was reading, or the opcode */
    if (!strstr(m->err, "byte")) {
        size_t n = strlen(m->err);
        if (m->obj_at) snprintf(m->err + n, m->errlen - n, " (in the object at byte %zu)", m->obj_at - 1);
        else snprintf(m->err + n, m->errlen - n, " (at byte %zu)", m->op_at);
    }
    return -1;
}

int pk_nomem(pm *m)
{
    if (m->failed) return -1;
    m->nomem = 1;
    return pk_fail(m, "out of memory at byte %zu", m->op_at);
}

static __attribute__((noinline)) void drop_behind(pm *m) { cmh_drop_behind(m->p, m->pos, &m->dropped); }
void pk_drop_behind(pm *m) { drop_behind(m); }

static inline int need(pm *m, size_t n)
{
    if (__builtin_expect(m->mapped && m->pos - m->dropped >= CMH_DROP_STEP, 0)) drop_behind(m);
    if (m->len - m->pos < n)
        return pk_fail(m, "truncated at byte %zu (expected %zu more byte%s)", m->len, n - (m->len - m->pos), n - (m->len - m->pos) == 1 ? "" : "s");
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
        if (!ns) return pk_nomem(m);
        m->stack = ns;
        m->scap = nc;
    }
    m->stack[m->sp++] = v;
    return 0;
}

static int pop(pm *m, pv *v)
{
    size_t floor_ = m->nmarks ? m->marks[m->nmarks - 1] : 0;
    if (m->sp <= floor_) return pk_fail(m, "pickle stack underflow at byte %zu", m->op_at);
    *v = m->stack[--m->sp];
    return 0;
}

static int top(pm *m, pv **v)
{
    size_t floor_ = m->nmarks ? m->marks[m->nmarks - 1] : 0;
    if (m->sp <= floor_) return pk_fail(m, "pickle stack underflow at byte %zu", m->op_at);
    *v = &m->stack[m->sp - 1];
    return 0;
}

static int new_cont(pm *m, uint8_t kind, pv *out);
int pk_new_cont(pm *m, uint8_t kind, pv *out) { return new_cont(m, kind, out); }
static int cont_add(pm *m, pcont *c, const pv *items, size_t n);
int pk_cont_add(pm *m, pcont *c, const pv *items, size_t n) { return cont_add(m, c, items, n); }

static int new_cont(pm *m, uint8_t kind, pv *out)
{
    if (m->nfree_conts) { /* a recycled slot, its item array kept for reuse */
        uint32_t id = m->free_conts[--m->nfree_conts];
        pcont *c = &m->conts[id];
        pv *items = c->items;
        uint32_t cap = c->cap;
        memset(c, 0, sizeof *c);
        c->items = items;
        c->cap = cap;
        c->kind = kind;
        c->at = m->op_at;
        out->tag = PV_CONT;
        out->u.id = id;
        return 0;
    }
    if (m->nconts == m->cconts) {
        uint32_t nc = m->cconts ? m->cconts * 2 : 1024;
        pcont *n = realloc(m->conts, (size_t)nc * sizeof *n);
        if (!n) return pk_nomem(m);
        m->conts = n;
        m->cconts = nc;
    }
    pcont *c = &m->conts[m->nconts];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->at = m->op_at;
    out->tag = PV_CONT;
    out->u.id = m->nconts++;
    return 0;
}

static int cont_add(pm *m, pcont *c, const pv *items, size_t n)
{
    if (c->conv_tag) return pk_fail(m, "a converted object is modified at byte %zu", m->op_at);
    if (n == 0) return 0;
    if ((uint64_t)c->n + n > UINT32_MAX) return pk_fail(m, "container too large at byte %zu", m->op_at);
    if (c->n + n > c->cap) {
        uint64_t nc = c->cap ? c->cap : 4;
        while (nc < c->n + n) nc *= 2;
        pv *ni = realloc(c->items, (size_t)nc * sizeof *ni);
        if (!ni) return pk_nomem(m);
        c->items = ni;
        c->cap = (uint32_t)nc;
    }
    memcpy(c->items + c->n, items, n * sizeof *items);
    c->n += (uint32_t)n;
    return 0;
}

void pk_done_with(pm *m, uint32_t id, uint8_t tag, uint32_t conv)
{
    pcont *c = &m->conts[id];
    c->conv_tag = tag;
    c->conv_id = conv;
    c->n = 0;
    if (!c->memoized) {
        if (m->nfree_conts == m->cfree_conts) {
            uint32_t nc = m->cfree_conts ? m->cfree_conts * 2 : 256;
            uint32_t *nf = realloc(m->free_conts, (size_t)nc * sizeof *nf);
            if (nf) m->free_conts = nf, m->cfree_conts = nc;
        }
        if (m->nfree_conts < m->cfree_conts) {
            m->free_conts[m->nfree_conts++] = id;
            return;
        }
    }
    free(c->items); /* a shared one keeps only what it became */
    c->items = NULL;
    c->cap = 0;
}

pcont *pk_as_cont(pm *m, const pv *v, uint8_t kind)
{
    if (v->tag != PV_CONT) return NULL;
    pcont *c = &m->conts[v->u.id];
    return c->kind == kind ? c : NULL;
}

const pv *pk_dict_get(pm *m, const pcont *d, uint32_t key)
{
    (void)m;
    for (uint32_t i = 0; i + 1 < d->n; i += 2)
        if (d->items[i].tag == PV_STR && d->items[i].u.id == key) return &d->items[i + 1];
    return NULL;
}

static int memo_put(pm *m, uint64_t idx)
{
    pv *t = NULL;
    if (top(m, &t)) return -1;
    /* writers number the memo from 0; a sparse index would cost memory the input never paid for */
    if (idx > m->len || (idx > 4096 && idx > m->memo_len * 2))
        return pk_fail(m, "memo index %llu too large at byte %zu", (unsigned long long)idx, m->op_at);
    if (idx >= m->memo_cap) {
        size_t nc = m->memo_cap ? m->memo_cap : 1024;
        while (nc <= idx) nc *= 2;
        pv *nm = realloc(m->memo, nc * sizeof *nm);
        if (!nm) return pk_nomem(m);
        memset(nm + m->memo_cap, 0xff, (nc - m->memo_cap) * sizeof *nm); /* tag 0xff = unset */
        m->memo = nm;
        m->memo_cap = nc;
    }
    m->memo[idx] = *t;
    if (t->tag == PV_CONT) m->conts[t->u.id].memoized = 1;
    if (idx >= m->memo_len) m->memo_len = idx + 1;
    return 0;
}

static int memo_get(pm *m, uint64_t idx)
{
    if (idx >= m->memo_len || m->memo[idx].tag == 0xff)
        return pk_fail(m, "memo index %llu used before it was set, at byte %zu", (unsigned long long)idx, m->op_at);
    return push(m, m->memo[idx]);
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
    if (!m->nmarks) return pk_fail(m, "no MARK for the opcode at byte %zu", m->op_at);
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
            if (b[i] != (neg ? 0xff : 0x00)) return pk_fail(m, "integer wider than 64 bits at byte %zu", m->op_at);
        v = le(b, 8);
        if (neg && !(v >> 63)) return pk_fail(m, "integer wider than 64 bits at byte %zu", m->op_at);
    }
    pv x = {PV_INT, {.i = (int64_t)v}};
    return push(m, x);
}

/* The next value pushed would be a key of the root dict: the stack holds only the root and its
 * pending key/value pairs (SETITEMS after one MARK, as CPython writes a small dict), or only the
 * root (SETITEM one pair at a time). */
static int at_root_key(const pm *m)
{
    if (!m->sp || m->stack[0].tag != PV_CONT || m->conts[m->stack[0].u.id].kind != C_DICT) return 0;
    if (m->nmarks == 0) return m->sp == 1;
    return m->nmarks == 1 && m->marks[0] == 1 && (m->sp - 1) % 2 == 0;
}

/* One line of a GLOBAL or INST argument ("module\n"), at most cap - 1 printable bytes of it kept
 * (the rest shown as '?'); the position is not moved.  0 when no newline ends it in 256 bytes. */
static size_t global_line(const pm *m, size_t at, char *out, size_t cap)
{
    size_t n = 0;
    for (; at + n < m->len && n < 256 && m->p[at + n] != '\n'; n++)
        if (n < cap - 1) out[n] = m->p[at + n] >= 0x20 && m->p[at + n] < 0x7f ? (char)m->p[at + n] : '?';
    out[n < cap - 1 ? n : cap - 1] = 0;
    return at + n < m->len && m->p[at + n] == '\n' ? n + 1 : 0;
}

/* An opcode outside the subset, refused with what the file holds and what is accepted: a class
 * or function reference (GLOBAL, STACK_GLOBAL, INST) by its name, never imported nor run. */
static int refuse(pm *m, uint8_t op)
{
    static const char accepted[] = "a memory snapshot (torch.cuda.memory._dump_snapshot()) holds only dicts, lists, tuples, strings, "
                                   "numbers, booleans and None, the opcodes PyTorch's memory_viz reader accepts";
    char mod[96] = "", name[96] = "";
    if (op == 'c' || op == 'i') { /* module\nname\n after the opcode (m->pos) */
        size_t a = global_line(m, m->pos, mod, sizeof mod), b = a ? global_line(m, m->pos + a, name, sizeof name) : 0;
        if (!b) mod[0] = name[0] = 0;
    } else if (op == 0x93 && m->sp >= 2 && m->stack[m->sp - 2].tag == PV_STR && m->stack[m->sp - 1].tag == PV_STR) {
        snprintf(mod, sizeof mod, "%.95s", cmh_str(m->s, m->stack[m->sp - 2].u.id));
        snprintf(name, sizeof name, "%.95s", cmh_str(m->s, m->stack[m->sp - 1].u.id));
        for (char *c = mod; *c; c++) *c = *c >= 0x20 && *c < 0x7f ? *c : '?';
        for (char *c = name; *c; c++) *c = *c >= 0x20 && *c < 0x7f ? *c : '?';
    }
    if (op == 'c' || op == 'i' || op == 0x93) {
        if (mod[0] && name[0])
            return pk_fail(m, "it holds a Python object, %s.%s (pickle opcode 0x%02x %s at byte %zu; never imported nor run): %s",
                           mod, name, op, opname(op), m->op_at, accepted);
        return pk_fail(m, "it holds a Python object, a class or function reference (pickle opcode 0x%02x %s at byte %zu; never "
                          "imported nor run): %s",
                       op, opname(op), m->op_at, accepted);
    }
    if (op == 'R' || op == 'b' || op == 0x81 || op == 0x92 || op == 'o')
        return pk_fail(m, "it builds a Python object (pickle opcode 0x%02x %s at byte %zu; never run): %s",
                       op, opname(op), m->op_at, accepted);
    return pk_fail(m, "unsupported pickle opcode 0x%02x (%s) at byte %zu: %s", op, opname(op), m->op_at, accepted);
}

/* The root at the early stop: the pairs pending on the stack go into it, as SETITEMS would. */
static int stop_early(pm *m, pv *result)
{
    if (m->sp > 1 && cont_add(m, &m->conts[m->stack[0].u.id], m->stack + 1, m->sp - 1)) return -1;
    m->sp = 1;
    m->nmarks = 0;
    *result = m->stack[0];
    return 0;
}

static int read_str(pm *m, size_t n)
{
    if (need(m, n)) return -1;
    const char *b = (const char *)m->p + m->pos;
    pv x = {PV_STR, {.id = 0}};
    if (cmh_strtab_intern_bytes(&m->s->strings, b, n, &x.u.id) != CMH_OK) return pk_nomem(m); /* a NUL held as C0 80 */
    m->pos += n;
    if (__builtin_expect(m->segments_only, 0) && (x.u.id == m->key[K_DEVICE_TRACES] || x.u.id == m->key[K_SEGMENTS]) &&
        at_root_key(m)) {
        if (x.u.id == m->key[K_SEGMENTS]) m->seen_segments = 1;
        else if (m->seen_segments) { /* the trace, and all after it, is not needed */
            m->stop = 1;
            return 0;
        } /* a writer that put the trace first: it is read, as there is no skipping it */
    }
    return push(m, x);
}

static int run(pm *m, pv *result)
{
    for (;;) {
        if (__builtin_expect(m->stop, 0)) return stop_early(m, result);
        if (need(m, 1)) return -1;
        m->op_at = m->pos;
        uint8_t op = m->p[m->pos++];
        pv v, k, *t = NULL;
        size_t from = 0;
        switch (op) {
        case 0x80: /* PROTO */
            if (need(m, 1)) return -1;
            m->protocol = m->p[m->pos++];
            if (m->protocol < 2 || m->protocol > 5)
                return pk_fail(m, "unsupported pickle protocol %d at byte %zu (PyTorch writes 2 to 5)", m->protocol, m->op_at);
            break;
        case 0x95: /* FRAME: a length hint */
            if (need(m, 8)) return -1;
            m->pos += 8;
            break;
        case '(': /* MARK */
            if (!m->generic && m->pos < m->len && m->p[m->pos] == '}' && m->sp && m->stack[m->sp - 1].tag == PV_CONT &&
                (!m->nmarks || m->marks[m->nmarks - 1] < m->sp)) {
                int r = pk_fast_entries(m);
                if (r < 0) return -1;
                if (r > 0) break;
            }
            if (m->nmarks == m->mcap) {
                size_t nc = m->mcap ? m->mcap * 2 : 64;
                size_t *nmk = realloc(m->marks, nc * sizeof *nmk);
                if (!nmk) return pk_nomem(m);
                m->marks = nmk;
                m->mcap = nc;
            }
            m->marks[m->nmarks++] = m->sp;
            break;
        case '.': /* STOP */
            if (m->nmarks) return pk_fail(m, "STOP with an open MARK at byte %zu", m->op_at);
            if (m->sp != 1) return pk_fail(m, "STOP with %zu values on the stack at byte %zu", m->sp, m->op_at);
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
            if (n > 16) return pk_fail(m, "integer wider than 64 bits at byte %zu", m->op_at);
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
            if (n > m->len) return pk_fail(m, "truncated at byte %zu (a string of %llu bytes)", m->len, (unsigned long long)n);
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
            if (!pk_as_cont(m, t, C_LIST)) return pk_fail(m, "APPEND to something that is not a list at byte %zu", m->op_at);
            if (pk_convert_entry(m, &v) || pk_convert_frame(m, &v)) return -1;
            if (cont_add(m, &m->conts[t->u.id], &v, 1)) return -1;
            break;
        case 'e': { /* APPENDS */
            if (mark_items(m, &from)) return -1;
            if (from == 0 || !pk_as_cont(m, &m->stack[from - 1], C_LIST))
                return pk_fail(m, "APPENDS to something that is not a list at byte %zu", m->op_at);
            for (size_t i = from; i < m->sp; i++)
                if (pk_convert_entry(m, &m->stack[i]) || pk_convert_frame(m, &m->stack[i])) return -1;
            if (cont_add(m, &m->conts[m->stack[from - 1].u.id], m->stack + from, m->sp - from)) return -1;
            m->sp = from;
            break;
        }
        case 's': /* SETITEM */
            if (pop(m, &v) || pop(m, &k) || top(m, &t)) return -1;
            if (!pk_as_cont(m, t, C_DICT)) return pk_fail(m, "SETITEM on something that is not a dict at byte %zu", m->op_at);
            if (k.tag == PV_STR && k.u.id == m->key[K_FRAMES] && pk_convert_stack(m, &v)) return -1;
            {
                pv kv[2] = {k, v};
                if (cont_add(m, &m->conts[t->u.id], kv, 2)) return -1;
            }
            break;
        case 'u': { /* SETITEMS */
            if (mark_items(m, &from)) return -1;
            if (from == 0 || !pk_as_cont(m, &m->stack[from - 1], C_DICT))
                return pk_fail(m, "SETITEMS on something that is not a dict at byte %zu", m->op_at);
            if ((m->sp - from) % 2) return pk_fail(m, "SETITEMS with an odd number of items at byte %zu", m->op_at);
            for (size_t i = from; i < m->sp; i += 2)
                if (m->stack[i].tag == PV_STR && m->stack[i].u.id == m->key[K_FRAMES] && pk_convert_stack(m, &m->stack[i + 1]))
                    return -1;
            if (cont_add(m, &m->conts[m->stack[from - 1].u.id], m->stack + from, m->sp - from)) return -1;
            m->sp = from;
            break;
        }
        case 'd': case 'l': case 't': { /* DICT, LIST, TUPLE from the mark */
            if (mark_items(m, &from)) return -1;
            uint8_t kind = op == 'd' ? C_DICT : op == 'l' ? C_LIST : C_TUPLE;
            if (kind == C_DICT && (m->sp - from) % 2) return pk_fail(m, "DICT with an odd number of items at byte %zu", m->op_at);
            if (new_cont(m, kind, &v)) return -1;
            if (kind == C_LIST)
                for (size_t i = from; i < m->sp; i++)
                    if (pk_convert_entry(m, &m->stack[i]) || pk_convert_frame(m, &m->stack[i])) return -1;
            if (m->sp > from && cont_add(m, &m->conts[v.u.id], m->stack + from, m->sp - from)) return -1;
            m->sp = from;
            if (push(m, v)) return -1;
            break;
        }
        case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
            size_t n = (size_t)(op - 0x84);
            size_t floor_ = m->nmarks ? m->marks[m->nmarks - 1] : 0;
            if (m->sp < floor_ + n) return pk_fail(m, "pickle stack underflow at byte %zu", m->op_at);
            if (new_cont(m, C_TUPLE, &v)) return -1;
            if (cont_add(m, &m->conts[v.u.id], m->stack + m->sp - n, n)) return -1;
            m->sp -= n;
            if (push(m, v)) return -1;
            break;
        }
        default:
            return refuse(m, op);
        }
    }
}

static int read_pickle(const void *buf, size_t len, int mapped, unsigned flags, cmh_snapshot *s, char *err, size_t errlen)
{
    pm m;
    memset(&m, 0, sizeof m);
    m.mapped = mapped;
    m.segments_only = (flags & CMH_LOAD_SEGMENTS) != 0;
    m.generic = (flags & CMH_LOAD_GENERIC) != 0;
    for (int i = 0; i < 4; i++) m.shapes[i].n = UINT32_MAX; /* no entry shape seen yet */
    m.p = buf;
    m.len = len;
    m.s = s;
    cmh_oa_init(&m.frames, sizeof(frame_slot));
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
        if (cmh_strtab_intern(&s->strings, pk_key_names[i], strlen(pk_key_names[i]), &m.key[i]) != CMH_OK) {
            pk_nomem(&m);
            break;
        }
    pv root = {PV_NONE, {.i = 0}};
    int rc = m.failed ? -1 : run(&m, &root);
    if (rc == 0 && !m.stop && m.pos != m.len) rc = pk_fail(&m, "%zu bytes after STOP at byte %zu", m.len - m.pos, m.pos);
    if (rc == 0) rc = pk_convert_top(&m, &root);
    /* CUMEMHIST_DEBUG_LOAD set: which reader took the trace's entries (tests check that the
     * opcode path takes every entry of real snapshots, not merely that it agrees when it does) */
    const char *dbg = getenv("CUMEMHIST_DEBUG_LOAD");
    if (dbg && *dbg && rc == 0)
        fprintf(stderr, "cumemhist: pickle: %llu trace entries read from the opcodes, %llu by the generic machine\n",
                (unsigned long long)m.fast_dicts, (unsigned long long)m.generic_dicts);
    for (uint32_t i = 0; i < m.nconts; i++) free(m.conts[i].items);
    free(m.conts);
    free(m.free_conts);
    free(m.stack);
    free(m.marks);
    free(m.memo);
    free(m.entries);
    free(m.marks_aside); /* a conversion that failed midway (pk_convert_top frees it otherwise) */
    free(m.xmap);
    free(m.fast.undo);
    free(m.fast.conv);
    free(m.fast.items);
    free(m.fast.frames);
    free(m.fast.pend);
    cmh_oa_free(&m.frames);
    if (rc != 0) {
        cmh_snapshot_free(s);
        return m.nomem ? CMH_ENOMEM : CMH_EFORMAT;
    }
    return CMH_OK;
}


int cmh_pickle_read(const void *buf, size_t len, cmh_snapshot *s, char *err, size_t errlen)
{
    return read_pickle(buf, len, 0, 0, s, err, errlen);
}

int cmh_pickle_read_ex(const void *buf, size_t len, unsigned flags, cmh_snapshot *s, char *err, size_t errlen)
{
    return read_pickle(buf, len, 0, flags, s, err, errlen);
}

int cmh_pickle_read_mapped(const void *map, size_t len, unsigned flags, cmh_snapshot *s, char *err, size_t errlen)
{
    return read_pickle(map, len, 1, flags, s, err, errlen);
}
