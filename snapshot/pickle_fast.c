/*
 * pickle_fast.c - trace entries read straight from the pickle's opcodes into the model.
 *
 * The bulk of every PyTorch snapshot is device_traces: lists of entry dicts ({'action': ...,
 * 'addr': ..., 'frames': [{'name', 'filename', 'line'}, ...], ...}), each written as the same
 * few opcodes (EMPTY_DICT, MARK, keys and scalars or memo references, SETITEMS) in runs of up
 * to a thousand between a MARK and an APPENDS.  The generic machine (pickle_read.c) pushes each
 * of those as a tagged cell, builds a container, and converts it when it is appended; here a run
 * is read in one pass against that schema, each dict's items gathered in a small buffer and
 * handed to the same conversions (pk_entry_from_items, pk_frame_of), so the result is the
 * machine's, cell for cell, memo included.
 *
 * It decides per run and never guesses: anything that is not that shape (another opcode, a key
 * that is not a string, a container where a scalar belongs, a memo reference to something not
 * yet converted, a dict without 'action' first, an entry key the conversion does not read: the
 * machine keeps it, cmh_extra) undoes what the run did to the memo and the
 * entries and leaves the bytes to the machine, which reads them, or reports them, as always.
 * What stays behind after an undo (strings, frames and stacks interned) is what the machine
 * interns from the same bytes anyway, in the same order.
 */
#include <stdlib.h>
#include <string.h>

#include "mapped.h"
#include "pickle_internal.h"

#define FP_MAX_PAIRS 32   /* keys of one dict the fast path takes: PyTorch writes up to ~12 */
#define FP_MAX_FRAMES 4096 /* frames of one stack */
#define PV_PENDING 0xfe    /* a memo slot named for a dict or list still being read */

typedef struct memo_undo {
    uint64_t idx;
    pv old;
} memo_undo;

typedef struct memo_conv { /* a memo slot holding a value converted here: a container at commit */
    uint64_t idx, at;
    uint8_t kind;
} memo_conv;

typedef struct fp {
    pm *m;
    size_t pos;
    memo_undo *undo;
    size_t nundo, cundo;
    memo_conv *conv;
    size_t nconv, cconv;
    size_t memo_len0;
    pv *items; /* the run's converted entries, for the APPENDS */
    size_t nitems, citems;
    struct pend_frame *pend; /* the frames of the entry being read (FP_MAX_FRAMES) */
    uint32_t *ids;
    uint32_t nframes;
    int nomem;
} fp;

/* The next opcode (FRAME hints skipped), or -1 at the end. */
static inline int next_op(fp *f)
{
    pm *m = f->m;
    while (f->pos < m->len) {
        uint8_t o = m->p[f->pos];
        if (o != 0x95) {
            f->pos++;
            return o;
        }
        if (m->len - f->pos < 9) return -1;
        f->pos += 9;
    }
    return -1;
}

static inline int peek_op(fp *f)
{
    size_t at = f->pos;
    int o = next_op(f);
    f->pos = at;
    return o;
}

static inline int bytes(fp *f, size_t n, const uint8_t **b)
{
    if (f->m->len - f->pos < n) return 0;
    *b = f->m->p + f->pos;
    f->pos += n;
    return 1;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* pickle's little-endian 2- and 4-byte arguments (the compiler makes these single loads) */
static inline uint32_t le2(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t le4(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int grow(void **arr, size_t *cap, size_t need, size_t esize)
{
    if (need <= *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *n = realloc(*arr, nc * esize);
    if (!n) return 0;
    *arr = n;
    *cap = nc;
    return 1;
}

/* A memo put of v at idx (the machine's checks; a failing one is the machine's to report). */
static int memo_put(fp *f, uint64_t idx, pv v, uint64_t at, uint8_t kind)
{
    pm *m = f->m;
    if (idx > m->len || (idx > 4096 && idx > m->memo_len * 2)) return 0;
    if (idx >= m->memo_cap) {
        size_t nc = m->memo_cap ? m->memo_cap : 1024;
        while (nc <= idx) nc *= 2;
        pv *nm = realloc(m->memo, nc * sizeof *nm);
        if (!nm) return f->nomem = 1, 0;
        memset(nm + m->memo_cap, 0xff, (nc - m->memo_cap) * sizeof *nm);
        m->memo = nm;
        m->memo_cap = nc;
    }
    if (!grow((void **)&f->undo, &f->cundo, f->nundo + 1, sizeof *f->undo)) return f->nomem = 1, 0;
    (void)at, (void)kind;
    f->undo[f->nundo++] = (memo_undo){idx, m->memo[idx]};
    m->memo[idx] = v;
    if (idx >= m->memo_len) m->memo_len = idx + 1;
    return 1;
}

/* After a value: the memo puts that name it (none, or one). 1 fine, 0 not this shape.  The value
 * is read through its pointer, only when a put follows.  Inlined into scalar() even with a second
 * caller (pool_tuple): a call per value was +100 instructions an entry, +4% of a whole load. */
static inline __attribute__((always_inline)) int memo_after(fp *f, const pv *vp, uint64_t at, uint8_t kind)
{
    int o = peek_op(f);
    const uint8_t *b;
    if (o == 0x94) {
        next_op(f);
        if (!memo_put(f, f->m->memo_len, *vp, at, kind)) return 0;
    } else if (o == 'q') {
        next_op(f);
        if (!bytes(f, 1, &b) || !memo_put(f, b[0], *vp, at, kind)) return 0;
    } else if (o == 'r') {
        next_op(f);
        if (!bytes(f, 4, &b) || !memo_put(f, le(b, 4), *vp, at, kind)) return 0;
    } else {
        return 1;
    }
    o = peek_op(f);
    return o != 0x94 && o != 'q' && o != 'r'; /* a second name: the machine's */
}

/* A memo reference, as what it became: containers only once converted (PV_FRAME, PV_STACK,
 * PV_ENTRY, PV_SKIP); 0 for anything else. */
static int memo_get(fp *f, uint64_t idx, pv *out)
{
    pm *m = f->m;
    if (idx >= m->memo_len || m->memo[idx].tag == 0xff || m->memo[idx].tag == PV_PENDING) return 0;
    *out = m->memo[idx];
    if (out->tag == PV_CONT) {
        const pcont *c = &m->conts[out->u.id];
        if (!c->conv_tag) return 0;
        out->tag = c->conv_tag;
        out->u.id = c->conv_id;
    }
    return 1;
}

/* A scalar, a string or a memo reference (opcode o already read), its memo puts included. */
static int scalar(fp *f, int o, pv *v)
{
    pm *m = f->m;
    const uint8_t *b;
    size_t n;
    switch (o) {
    case 'N': *v = (pv){PV_NONE, {.i = 0}}; break;
    case 0x88: case 0x89: *v = (pv){PV_BOOL, {.i = o == 0x88}}; break;
    case 'K': if (!bytes(f, 1, &b)) return 0; *v = (pv){PV_INT, {.i = b[0]}}; break;
    case 'M': if (!bytes(f, 2, &b)) return 0; *v = (pv){PV_INT, {.i = (int64_t)le2(b)}}; break;
    case 'J': if (!bytes(f, 4, &b)) return 0; *v = (pv){PV_INT, {.i = (int32_t)le4(b)}}; break;
    case 0x8a: { /* LONG1, as pickle_read.c's read_long */
        if (!bytes(f, 1, &b)) return 0;
        n = b[0];
        if (!bytes(f, n, &b)) return 0;
        uint64_t x = 0;
        if (n && n <= 8) {
            x = le(b, (int)n);
            if (n < 8 && (b[n - 1] & 0x80)) x |= ~0ull << (8 * n);
        } else if (n > 8) {
            int neg = (b[n - 1] & 0x80) != 0;
            for (size_t i = 8; i < n; i++)
                if (b[i] != (neg ? 0xff : 0x00)) return 0;
            x = le(b, 8);
            if (neg && !(x >> 63)) return 0;
        }
        *v = (pv){PV_INT, {.i = (int64_t)x}};
        break;
    }
    case 'G': {
        if (!bytes(f, 8, &b)) return 0;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];
        v->tag = PV_FLOAT;
        memcpy(&v->u.f, &bits, 8);
        break;
    }
    case 0x8c: case 'X': {
        if (!bytes(f, o == 'X' ? 4 : 1, &b)) return 0;
        n = o == 'X' ? (size_t)le4(b) : b[0];
        if (!bytes(f, n, &b)) return 0;
        v->tag = PV_STR;
        if (cmh_strtab_intern_bytes(&m->s->strings, (const char *)b, n, &v->u.id) != CMH_OK) return f->nomem = 1, 0;
        break;
    }
    case 'h': if (!bytes(f, 1, &b) || !memo_get(f, b[0], v)) return 0; return 1; /* a reference is not memoized again */
    case 'j': if (!bytes(f, 4, &b) || !memo_get(f, le4(b), v)) return 0; return 1;
    default: return 0;
    }
    return memo_after(f, v, 0, 0);
}

static int is_scalar(const pv *v) { return v->tag <= PV_STR; }

/* A pool id, (a, b) of two integers (newer PyTorch's 'pool_id' of every entry), after its first
 * opcode o: interned at once and kept as PV_POOL, in the memo too when the tuple is memoized (as
 * CPython's pickler does every tuple), where a later reference finds it converted. */
static int pool_tuple(fp *f, int o, pv *v)
{
    pv a, b;
    if (!scalar(f, o, &a) || a.tag != PV_INT || !scalar(f, next_op(f), &b) || b.tag != PV_INT || next_op(f) != 0x86) return 0;
    uint64_t id[2] = {(uint64_t)a.u.i, (uint64_t)b.u.i};
    uint32_t num;
    if (cmh_snapshot_pool_number(f->m->s, id, &num) != CMH_OK) return f->nomem = 1, 0;
    *v = (pv){PV_POOL, {.id = num}};
    return memo_after(f, v, 0, 0);
}

/* A dict's items after its EMPTY_DICT (at byte `at`): its own memo put, MARK, pairs, SETITEMS.
 * *memo_at: the memo slot naming the dict (or UINT64_MAX), to set once it is converted. */
static int dict_open(fp *f, uint64_t *memo_idx)
{
    pm *m = f->m;
    const uint8_t *b;
    int o = peek_op(f);
    *memo_idx = UINT64_MAX;
    if (o == 0x94) next_op(f), *memo_idx = m->memo_len;
    else if (o == 'q') { next_op(f); if (!bytes(f, 1, &b)) return 0; *memo_idx = b[0]; }
    else if (o == 'r') { next_op(f); if (!bytes(f, 4, &b)) return 0; *memo_idx = le(b, 4); }
    if (*memo_idx != UINT64_MAX && !memo_put(f, *memo_idx, (pv){PV_PENDING, {.i = 0}}, 0, 0)) return 0;
    o = peek_op(f);
    if (o == 0x94 || o == 'q' || o == 'r') return 0; /* a second name: the machine's */
    return next_op(f) == '(';
}

/* The converted dict or list into the memo slot its opcode named when it began (unless something
 * else was put there since, as the machine would have it). */
static int memo_name(fp *f, uint64_t idx, pv v, uint64_t at, uint8_t kind)
{
    pm *m = f->m;
    if (idx == UINT64_MAX || m->memo[idx].tag != PV_PENDING) return 1;
    if (!grow((void **)&f->conv, &f->cconv, f->nconv + 1, sizeof *f->conv)) return f->nomem = 1, 0;
    f->conv[f->nconv++] = (memo_conv){idx, at, kind};
    m->memo[idx] = v;
    return 1;
}

/* A frame of a list being read: one converted before (id), or a frame dict, interned when the
 * list's APPEND or APPENDS comes, as the machine converts it (midx: its memo slot, or none). */
typedef struct pend_frame {
    uint32_t name, file, id;
    uint32_t ref; /* a memo reference to a frame dict of the same list not yet interned: its index + 1 */
    int done;
    int64_t line;
    uint64_t midx, at;
} pend_frame;

/* At a memo reference (BINGET or LONG_BINGET, not yet read): whether APPEND follows it, so that
 * it is one more frame of the list, not the key after the list (PyTorch's lists of frames end
 * with APPENDS, and a key of the entry may well be a memo reference).  A FRAME hint between the
 * two says no: the entry's loop then finds a frame for a key and leaves the run to the machine. */
static int ref_appended(fp *f)
{
    const pm *m = f->m;
    size_t at = f->pos;
    while (at < m->len && m->p[at] == 0x95) at += 9; /* FRAME hints before it, as next_op skips them */
    if (at >= m->len) return 0;
    size_t after = at + (m->p[at] == 'h' ? 2 : 5);
    return after < m->len && m->p[after] == 'a';
}

static int frame(fp *f, int o, pend_frame *pf)
{
    pm *m = f->m;
    pv v;
    memset(pf, 0, sizeof *pf);
    if (o == 'h' || o == 'j') {
        const uint8_t *b;
        if (!bytes(f, o == 'h' ? 1 : 4, &b)) return 0;
        uint64_t idx = o == 'h' ? b[0] : le4(b);
        /* the same frame twice in one stack (recursion): the machine converts the dict once and
         * finds it converted the second time; here the second takes the first's id at interning */
        if (idx < m->memo_len && m->memo[idx].tag == PV_PENDING && m->memo[idx].u.i > 0) {
            pf->ref = (uint32_t)m->memo[idx].u.i;
            return 1;
        }
        if (!memo_get(f, idx, &v) || v.tag != PV_FRAME) return 0;
        pf->id = v.u.id;
        pf->done = 1;
        return 1;
    }
    if (o != '}') return 0;
    pf->at = f->pos - 1;
    if (!dict_open(f, &pf->midx)) return 0;
    if (pf->midx != UINT64_MAX) m->memo[pf->midx].u.i = (int64_t)(pf - f->pend) + 1; /* for a reference in the same list */
    pv it[2 * FP_MAX_PAIRS];
    uint32_t n = 0;
    for (;;) {
        o = next_op(f);
        if (o == 'u') break;
        if (n == 2 * FP_MAX_PAIRS || !scalar(f, o, &it[n]) || it[n].tag != PV_STR) return 0;
        if (it[n].u.id == m->key[K_ACTION]) return 0; /* the machine would take it for an entry */
        if (!scalar(f, next_op(f), &it[n + 1]) || !is_scalar(&it[n + 1])) return 0;
        n += 2;
    }
    /* as pk_frame_of reads it: the first 'name', 'filename', 'line'; the first two strings (else
     * the machine reports it), the line an integer or 0 */
    const pv *name = NULL, *file = NULL, *line = NULL;
    for (uint32_t i = 0; i < n; i += 2) {
        if (!name && it[i].u.id == m->key[K_NAME]) name = &it[i + 1];
        if (!file && it[i].u.id == m->key[K_FILENAME]) file = &it[i + 1];
        if (!line && it[i].u.id == m->key[K_LINE]) line = &it[i + 1];
    }
    if (!name || !file || name->tag != PV_STR || file->tag != PV_STR) return 0;
    if (n > 6) return 0; /* more than name, filename, line ('fx_*'): the machine keeps them (cmh_extra) */
    pf->name = name->u.id;
    pf->file = file->u.id;
    pf->line = line && (line->tag == PV_INT || line->tag == PV_BOOL) ? line->u.i : 0;
    return 1;
}

/* The frames read since the last APPEND(S), interned now, in order. */
static int intern_frames(fp *f, pend_frame *pf, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (pf[i].done) continue;
        if (pf[i].ref) { /* interned just before, in this loop (a reference comes after its dict) */
            const pend_frame *to = &f->pend[pf[i].ref - 1];
            if (!to->done) return 0;
            pf[i].id = to->id;
            pf[i].done = 1;
            continue;
        }
        pv it[6] = {{PV_STR, {.id = f->m->key[K_NAME]}}, {PV_STR, {.id = pf[i].name}},
                    {PV_STR, {.id = f->m->key[K_FILENAME]}}, {PV_STR, {.id = pf[i].file}},
                    {PV_STR, {.id = f->m->key[K_LINE]}}, {PV_INT, {.i = pf[i].line}}};
        if (pk_frame_of(f->m, it, 6, &pf[i].id)) return f->nomem = 1, 0;
        pf[i].done = 1;
        if (!memo_name(f, pf[i].midx, (pv){PV_FRAME, {.id = pf[i].id}}, pf[i].at, C_DICT)) return 0;
    }
    return 1;
}

/* A 'frames' list after its EMPTY_LIST: its memo put, then runs of frames (MARK ... APPENDS)
 * or single ones (... APPEND), until the next opcode is something else.  Its frames end at
 * f->frames + *first (*n of them); it becomes a stack at its entry's SETITEMS, as in the machine. */
static int frames_list(fp *f, uint32_t *first, uint32_t *n, uint64_t *midx, uint64_t *at)
{
    pm *m = f->m;
    const uint8_t *b;
    *at = f->pos - 1;
    *midx = UINT64_MAX;
    int o = peek_op(f);
    if (o == 0x94) next_op(f), *midx = m->memo_len;
    else if (o == 'q') { next_op(f); if (!bytes(f, 1, &b)) return 0; *midx = b[0]; }
    else if (o == 'r') { next_op(f); if (!bytes(f, 4, &b)) return 0; *midx = le(b, 4); }
    if (*midx != UINT64_MAX && !memo_put(f, *midx, (pv){PV_PENDING, {.i = 0}}, 0, 0)) return 0;
    o = peek_op(f);
    if (o == 0x94 || o == 'q' || o == 'r') return 0;
    *first = f->nframes;
    pend_frame *pf = f->pend;
    for (;;) {
        o = peek_op(f);
        if (o == '(') {
            next_op(f);
            uint32_t from = f->nframes;
            for (;;) {
                o = next_op(f);
                if (o == 'e') break;
                if (f->nframes == FP_MAX_FRAMES || !frame(f, o, &pf[f->nframes])) return 0;
                f->nframes++;
            }
            if (!intern_frames(f, pf + from, f->nframes - from)) return 0;
        } else if (o == '}' || o == 'h' || o == 'j') {
            if (o != '}' && !ref_appended(f)) break; /* a reference not APPENDed: the entry's next key */
            next_op(f);
            if (f->nframes == FP_MAX_FRAMES || !frame(f, o, &pf[f->nframes]) || next_op(f) != 'a') return 0;
            if (!intern_frames(f, pf + f->nframes, 1)) return 0;
            f->nframes++;
        } else {
            break;
        }
    }
    *n = f->nframes - *first;
    return 1;
}

/* One trace entry dict after its EMPTY_DICT: 'action' first, scalars, 'frames' lists. */
static int entry(fp *f, pv *out)
{
    pm *m = f->m;
    uint64_t at = f->pos - 1, midx;
    if (!dict_open(f, &midx)) return 0;
    pv it[2 * FP_MAX_PAIRS];
    uint32_t n = 0;
    struct { uint32_t item, first, n; uint64_t midx, at; } lists[2];
    int nlists = 0;
    const uint32_t kpool = m->key[K_POOL_ID]; /* (loaded once: the loop's stores may alias m) */
    f->nframes = 0;
    for (;;) {
        int o = next_op(f);
        if (o == 'u') break;
        if (n == 2 * FP_MAX_PAIRS || !scalar(f, o, &it[n]) || it[n].tag != PV_STR) return 0;
        if (n == 0 && it[0].u.id != m->key[K_ACTION]) return 0;
        o = next_op(f);
        pv *v = &it[n + 1];
        if (it[n].u.id == m->key[K_FRAMES]) {
            if (o == ']') {
                if (nlists == 2) return 0;
                lists[nlists].item = n + 1;
                if (!frames_list(f, &lists[nlists].first, &lists[nlists].n, &lists[nlists].midx, &lists[nlists].at)) return 0;
                *v = (pv){PV_PENDING, {.i = 0}};
                nlists++;
            } else if (!scalar(f, o, v) || (!is_scalar(v) && v->tag != PV_STACK)) {
                return 0;
            }
        } else if (it[n].u.id == kpool && (o == 'K' || o == 'M' || o == 'J' || o == 0x8a)) {
            if (!pool_tuple(f, o, v)) return 0;
        } else if (!scalar(f, o, v) || (!is_scalar(v) && !(v->tag == PV_POOL && it[n].u.id == kpool))) {
            return 0;
        }
        n += 2;
    }
    if (n == 0 || it[1].tag != PV_STR) return 0; /* a non-string action: the machine's to report */
    for (int l = 0; l < nlists; l++) { /* the frame lists become stacks at SETITEMS */
        uint32_t sid = 0, *ids = f->ids;
        for (uint32_t i = 0; i < lists[l].n; i++) ids[i] = f->pend[lists[l].first + i].id;
        if (lists[l].n && cmh_snapshot_add_stack(m->s, ids, lists[l].n, &sid) != CMH_OK) return f->nomem = 1, 0;
        it[lists[l].item] = (pv){PV_STACK, {.id = sid}};
        if (!memo_name(f, lists[l].midx, it[lists[l].item], lists[l].at, C_LIST)) return 0;
    }
    uint32_t id = 0;
    int r = pk_entry_from_items(m, it, n, &id);
    if (r < 0) return f->nomem = 1, 0;
    if (r == 0) return 0;
    *out = r == 1 ? (pv){PV_ENTRY, {.id = id}} : (pv){PV_NONE, {.id = 0}};
    return memo_name(f, midx, r == 1 ? *out : (pv){PV_SKIP, {.id = 0}}, at, C_DICT);
}

/*
 * The commonest entry of all, read in one pass: a dict that is not memoized itself, whose keys
 * are all memo references to strings and whose values are integers, None, booleans or memo
 * references to what the memo already holds converted (an action's name, a stack).  That is
 * every entry of a cumemhist export and of any writer that shares its keys and frames; each
 * opcode is read once, each key found among the wanted ones through a small cache, and the
 * values go straight to the conversion (pk_entry_from_fields), with no items gathered, no shape
 * matched and no look-ahead for memo puts beyond one byte.  It changes nothing until the dict is
 * complete: anything else (a memo put, a string to intern, a list of frames, a FRAME hint, a
 * float) returns 0 with the position where it was, and entry() reads the dict as before.
 * 1 done, 0 not this shape, -1 out of memory.
 */
typedef struct ref_slot { /* a memo reference as what the memo holds, and, for a key, its EK_* */
    uint32_t idx1; /* memo index + 1; 0 empty */
    uint32_t ek;   /* EK_* of a string among the keys the conversion reads, else NEK */
    pv v;          /* a scalar or a stack (a converted frames list) */
} ref_slot;

#define REF_SLOTS 64

/* What memo slot idx holds, through a cache of the last references (an entry names the same
 * keys, actions and stacks over and over); NULL for anything but a scalar or a stack.  The
 * cache holds while the memo does: entry() may change the memo, so each call of it empties the
 * cache (pk_fast_entries). */
static inline const ref_slot *ref_of(const pm *m, ref_slot *rc, uint64_t idx)
{
    ref_slot *c = &rc[idx & (REF_SLOTS - 1)];
    if (c->idx1 == idx + 1) return c;
    if (idx >= m->memo_len || idx >= UINT32_MAX) return NULL;
    pv v = m->memo[idx];
    if (v.tag == PV_CONT) {
        const pcont *k = &m->conts[v.u.id];
        if (k->conv_tag != PV_STACK && k->conv_tag != PV_POOL) return NULL;
        v = (pv){k->conv_tag, {.id = k->conv_id}};
    } else if (!is_scalar(&v) && v.tag != PV_STACK && v.tag != PV_POOL) {
        return NULL;
    }
    uint32_t k = NEK;
    if (v.tag == PV_STR)
        for (k = 0; k < NEK && m->key[pk_entry_keys[k]] != v.u.id;) k++;
    c->idx1 = (uint32_t)idx + 1;
    c->ek = k;
    c->v = v;
    return c;
}

static int entry_direct(fp *f, ref_slot *rc, pv *out)
{
    pm *m = f->m;
    const uint8_t *p = m->p;
    size_t pos = f->pos, len = m->len;
    pv vals[NEK];
    const pv *fld[NEK];
    memset(fld, 0, sizeof fld);
    if (pos >= len || p[pos] != '(') return 0; /* a memo put or a FRAME hint first: entry() */
    pos++;
    for (uint32_t npairs = 0;; npairs++) {
        if (len - pos < 16) return 0; /* near the end: entry() checks each byte */
        int o = p[pos++];
        if (o == 'u') break;
        if (npairs == FP_MAX_PAIRS) return 0;
        /* the key: a memo reference to a string */
        uint64_t idx;
        if (o == 'h') idx = p[pos++];
        else if (o == 'j') idx = le4(p + pos), pos += 4;
        else return 0;
        const ref_slot *key = ref_of(m, rc, idx);
        if (!key || key->v.tag != PV_STR || (npairs == 0 && key->ek != EK_ACTION)) return 0;
        /* a key the conversion does not read, or 'name' (read on an annotation only, an extra on any
         * other entry): entry() decides, as pk_entry_from_items */
        if (key->ek == NEK || key->ek == EK_NAME) return 0;
        uint32_t k = key->ek;
        /* the value */
        pv v;
        o = p[pos++];
        switch (o) {
        case 'K': v = (pv){PV_INT, {.i = p[pos]}}, pos += 1; break;
        case 'M': v = (pv){PV_INT, {.i = (int64_t)le2(p + pos)}}, pos += 2; break;
        case 'J': v = (pv){PV_INT, {.i = (int32_t)le4(p + pos)}}, pos += 4; break;
        case 0x8a: { /* LONG1 of up to 8 bytes, as scalar(); 16 bytes are there to read */
            size_t n = p[pos++];
            if (n > 8) return 0;
            uint64_t x;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            memcpy(&x, p + pos, 8);
#else
            x = le(p + pos, 8);
#endif
            if (n < 8) {
                x &= n ? ~0ull >> (64 - 8 * n) : 0;
                if (n && (p[pos + n - 1] & 0x80)) x |= ~0ull << (8 * n);
            }
            pos += n;
            v = (pv){PV_INT, {.i = (int64_t)x}};
            break;
        }
        case 'N': v = (pv){PV_NONE, {.i = 0}}; break;
        case 0x88: case 0x89: v = (pv){PV_BOOL, {.i = o == 0x88}}; break;
        case 'h': case 'j': {
            const ref_slot *r = ref_of(m, rc, o == 'h' ? p[pos] : le4(p + pos));
            pos += o == 'h' ? 1 : 4;
            if (!r || (r->v.tag == PV_STACK && k != EK_FRAMES) || (r->v.tag == PV_POOL && k != EK_POOL_ID)) return 0; /* a stack is a frames value only */
            v = r->v;
            goto have; /* a reference is not memoized again: no put can follow */
        }
        default: return 0;
        }
        if (k == EK_POOL_ID && v.tag == PV_INT) { /* (a, b): TorchScript's pickler writes it unmemoized */
            int64_t b;
            if (len - pos < 8) return 0; /* the 16 bytes at the key may be spent: entry() checks each byte */
            if (p[pos] == 'K') b = p[pos + 1], pos += 2;
            else if (p[pos] == 'M') b = (int64_t)le2(p + pos + 1), pos += 3;
            else if (p[pos] == 'J') b = (int32_t)le4(p + pos + 1), pos += 5;
            else return 0; /* a long second: entry() */
            if (p[pos++] != 0x86) return 0;
            uint64_t id[2] = {(uint64_t)v.u.i, (uint64_t)b};
            uint32_t num;
            if (cmh_snapshot_pool_number(m->s, id, &num) != CMH_OK) return f->nomem = 1, -1;
            v = (pv){PV_POOL, {.id = num}};
        }
        if (p[pos] == 0x94 || p[pos] == 'q' || p[pos] == 'r') return 0; /* the value memoized: entry() */
    have:
        if (k < NEK && !fld[k]) {
            vals[k] = v;
            fld[k] = &vals[k];
        }
    }
    if (!fld[EK_ACTION] || fld[EK_ACTION]->tag != PV_STR) return 0; /* the machine's to report */
    uint32_t id = 0;
    int r = pk_entry_from_fields(m, fld, &id);
    if (r < 0) return f->nomem = 1, -1;
    if (r == 0) return 0;
    f->pos = pos;
    *out = r == 1 ? (pv){PV_ENTRY, {.id = id}} : (pv){PV_NONE, {.id = 0}};
    return 1;
}

static void undo(fp *f, uint32_t nentries, uint64_t skipped, uint32_t pt_fields)
{
    pm *m = f->m;
    for (size_t i = f->nundo; i-- > 0;) m->memo[f->undo[i].idx] = f->undo[i].old;
    m->memo_len = f->memo_len0;
    pk_entries_truncate(m, nentries);
    m->s->skipped_entries = skipped;
    m->s->pt_fields = pt_fields;
}

/* The memo slots that name converted dicts and lists get the machine's form: a memoized
 * container, already converted. */
static int commit(fp *f)
{
    pm *m = f->m;
    for (size_t i = f->nconv; i-- > 0;) { /* the last to name a slot is what it holds */
        const memo_conv *c = &f->conv[i];
        pv v = m->memo[c->idx], cv;
        if (v.tag != PV_FRAME && v.tag != PV_STACK && v.tag != PV_ENTRY && v.tag != PV_SKIP) continue;
        if (pk_new_cont(m, c->kind, &cv)) return -1;
        pcont *k = &m->conts[cv.u.id];
        free(k->items);
        k->items = NULL;
        k->cap = 0;
        k->at = c->at;
        k->memoized = 1;
        k->conv_tag = v.tag;
        k->conv_id = v.u.id;
        m->memo[c->idx] = cv;
    }
    return 0;
}

int pk_fast_entries(pm *m)
{
    pcont *list = pk_as_cont(m, &m->stack[m->sp - 1], C_LIST);
    if (!list || list->conv_tag) return 0;
    uint32_t list_id = m->stack[m->sp - 1].u.id;
    if (__builtin_expect(m->mapped && m->pos - m->dropped >= CMH_DROP_STEP, 0)) pk_drop_behind(m);
    fp f;
    memset(&f, 0, sizeof f);
    f.m = m;
    f.pos = m->pos;
    f.memo_len0 = m->memo_len;
    f.undo = m->fast.undo, f.cundo = m->fast.cundo;
    f.conv = m->fast.conv, f.cconv = m->fast.cconv;
    f.items = m->fast.items, f.citems = m->fast.citems;
    if (!m->fast.frames && !(m->fast.frames = malloc(FP_MAX_FRAMES * sizeof *m->fast.frames))) return pk_nomem(m);
    if (!m->fast.pend && !(m->fast.pend = malloc(FP_MAX_FRAMES * sizeof(pend_frame)))) return pk_nomem(m);
    f.ids = m->fast.frames;
    f.pend = m->fast.pend;
    uint32_t nentries = m->nentries, pt_fields = m->s->pt_fields;
    uint64_t skipped = m->s->skipped_entries;
    int ok = 1;
    ref_slot refs[REF_SLOTS];
    memset(refs, 0, sizeof refs);
    m->fast_run = 1;
    for (;;) {
        int o = next_op(&f);
        if (o == 'e') break;
        if (o != '}' || !grow((void **)&f.items, &f.citems, f.nitems + 1, sizeof *f.items)) {
            ok = 0;
            break;
        }
        int r = entry_direct(&f, refs, &f.items[f.nitems]);
        if (r == 0) {
            memset(refs, 0, sizeof refs); /* entry() may put into the memo */
            r = entry(&f, &f.items[f.nitems]);
        }
        if (r <= 0) {
            ok = 0;
            break;
        }
        f.nitems++;
    }
    m->fast_run = 0;
    int rc = 0;
    if (!ok || f.nomem) {
        undo(&f, nentries, skipped, pt_fields);
        rc = f.nomem ? pk_nomem(m) : 0;
    } else if (commit(&f) || pk_cont_add(m, &m->conts[list_id], f.items, f.nitems)) { /* commit may move conts */
        rc = -1;
    } else {
        m->pos = f.pos;
        m->fast_dicts += f.nitems;
        rc = 1;
    }
    m->fast.undo = f.undo, m->fast.cundo = f.cundo;
    m->fast.conv = f.conv, m->fast.cconv = f.cconv;
    m->fast.items = f.items, m->fast.citems = f.citems;
    return rc;
}
