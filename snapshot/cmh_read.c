/*
 * cmh_read.c - the .cmh reader: msgpack bytes to the snapshot model (docs/FORMAT.md).
 *
 * A small cursor decoder over the mapped file rather than msgpack-c's object tree: it needs no
 * memory beyond the model it fills (an object tree costs several times the file), and every
 * error names the exact byte offset.  Nothing here recurses on input: unknown values are
 * skipped with an explicit pending-item counter, so a hostile nesting depth costs nothing.
 *
 * A file that ends with a checksum (docs/FORMAT.md, "Checksum") is checked whole before a byte
 * of it is parsed, so damage is reported as damage, not as whatever the flipped bit happened to
 * make of the bytes.  A file whose map announces a checksum ("checksum" after "version") but
 * does not end with one was cut short or damaged there, and is refused; one with neither was
 * written before checksums and is read unverified (s->unverified: the command says so).  A
 * fuzzing build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, scripts/fuzz.sh) computes the sum
 * but does not refuse on a mismatch, or no mutated input would ever reach the parser.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "cumemhist/snapshot.h"
#include "mapped.h"

typedef struct cur {
    const uint8_t *p;
    size_t len, pos;
    int mapped;     /* p maps the file (mapped.h): pages behind pos go back as it advances */
    size_t dropped; /* bytes given back so far */
    char *err;
    size_t errlen;
    int failed;
    int nomem;     /* the failure was memory, not the file */
    int has_sum;   /* the file ends with a checksum, verified (sum_at: where its key begins) */
    size_t announced; /* the map said "checksum": "crc32c" (where its key began + 1) */
    size_t sum_at;
    unsigned flags; /* CMH_LOAD_*: with CMH_LOAD_SEGMENTS the traces are skipped, not kept */
} cur;

/* The file's last entry: the key "crc32c", then the sum as 0xce and 4 bytes, big-endian. */
static const unsigned char trailer_key[] = {0xa6, 'c', 'r', 'c', '3', '2', 'c', 0xce};
#define TRAILER (sizeof trailer_key + 4)

static int fail(cur *c, const char *fmt, ...)
{
    if (c->failed) return -1;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    if (!strstr(c->err, "byte")) { /* every message points at a byte: where the reader stood */
        size_t n = strlen(c->err);
        snprintf(c->err + n, c->errlen - n, " (at byte %zu)", c->pos);
    }
    return -1;
}

static int nomem(cur *c)
{
    if (c->failed) return -1;
    c->nomem = 1;
    return fail(c, "out of memory at byte %zu", c->pos);
}

static __attribute__((noinline)) void drop_behind(cur *c) { cmh_drop_behind(c->p, c->pos, &c->dropped); }

static inline int need(cur *c, size_t n)
{
    if (c->failed) return -1;
    if (__builtin_expect(c->mapped && c->pos - c->dropped >= CMH_DROP_STEP, 0)) drop_behind(c);
    if (c->len - c->pos < n) { /* what the reader stood on, and how far past the end it reaches (the file ends at byte len) */
        size_t more = n - (c->len - c->pos);
        if (n == 1) return fail(c, "truncated at byte %zu (reading byte %zu: 1 more byte needed)", c->len, c->pos);
        return fail(c, "truncated at byte %zu (reading bytes %zu-%zu: %zu more byte%s needed)", c->len, c->pos, c->pos + n - 1, more,
                    more == 1 ? "" : "s");
    }
    return 0;
}

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* Any msgpack integer as int64 (uint64 above INT64_MAX is kept bit-exact). */
static int rd_int(cur *c, int64_t *out)
{
    if (need(c, 1)) return -1;
    size_t at = c->pos;
    uint8_t t = c->p[c->pos++];
    int n = 0, sgn = 0;
    if (t <= 0x7f) { *out = t; return 0; }
    if (t >= 0xe0) { *out = (int8_t)t; return 0; }
    switch (t) {
    case 0xcc: n = 1; break;
    case 0xcd: n = 2; break;
    case 0xce: n = 4; break;
    case 0xcf: n = 8; break;
    case 0xd0: n = 1; sgn = 1; break;
    case 0xd1: n = 2; sgn = 1; break;
    case 0xd2: n = 4; sgn = 1; break;
    case 0xd3: n = 8; sgn = 1; break;
    default: return fail(c, "expected an integer at byte %zu, found type 0x%02x", at, t);
    }
    if (need(c, (size_t)n)) return -1;
    uint64_t v = be(c->p + c->pos, n);
    c->pos += (size_t)n;
    if (sgn && n < 8 && (v >> (n * 8 - 1))) v |= ~0ull << (n * 8);
    *out = (int64_t)v;
    return 0;
}

static int rd_u64(cur *c, uint64_t *out)
{
    int64_t v = 0;
    if (rd_int(c, &v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int rd_u32(cur *c, uint32_t *out, uint32_t limit, const char *what)
{
    size_t at = c->pos;
    int64_t v = 0;
    if (rd_int(c, &v)) return -1;
    if (v < 0 || (uint64_t)v >= limit) return fail(c, "%s %lld out of range at byte %zu", what, (long long)v, at);
    *out = (uint32_t)v;
    return 0;
}

static int rd_container(cur *c, int map, uint32_t *n)
{
    if (need(c, 1)) return -1;
    size_t at = c->pos;
    uint8_t t = c->p[c->pos++];
    if (!map && (t & 0xf0) == 0x90) { *n = t & 0x0f; return 0; }
    if (map && (t & 0xf0) == 0x80) { *n = t & 0x0f; return 0; }
    int w = 0;
    if (t == (map ? 0xde : 0xdc)) w = 2;
    else if (t == (map ? 0xdf : 0xdd)) w = 4;
    else return fail(c, "expected %s at byte %zu, found type 0x%02x", map ? "a map" : "an array", at, t);
    if (need(c, (size_t)w)) return -1;
    *n = (uint32_t)be(c->p + c->pos, w);
    c->pos += (size_t)w;
    /* Every element takes at least one byte: a count past the end is a lie, not a big file.  (A
     * map's entry is two: "a map of 17 items cannot fit in the 29 bytes left" said so of 17.) */
    uint64_t least = (uint64_t)*n * (map ? 2 : 1);
    size_t left = c->len - c->pos;
    if (least > left)
        return fail(c, "truncated at byte %zu (the %s at byte %zu holds %u %s%s, %llu bytes at least, and %zu byte%s %s left)", c->len,
                    map ? "map" : "array", at, *n, map ? "entr" : "item", map ? (*n == 1 ? "y" : "ies") : (*n == 1 ? "" : "s"),
                    (unsigned long long)least, left, left == 1 ? "" : "s", left == 1 ? "is" : "are");
    return 0;
}

static int rd_array(cur *c, uint32_t *n) { return rd_container(c, 0, n); }

static int rd_array_n(cur *c, uint32_t lo, uint32_t hi, uint32_t *n, const char *what)
{
    size_t at = c->pos;
    if (rd_array(c, n)) return -1;
    if (*n < lo || *n > hi) return fail(c, "%s at byte %zu has %u fields (expected %u..%u)", what, at, *n, lo, hi);
    return 0;
}

static int rd_str(cur *c, const char **s, uint32_t *n)
{
    if (need(c, 1)) return -1;
    size_t at = c->pos;
    uint8_t t = c->p[c->pos++];
    int w = 0;
    if ((t & 0xe0) == 0xa0) *n = t & 0x1f;
    else if (t == 0xd9) w = 1;
    else if (t == 0xda) w = 2;
    else if (t == 0xdb) w = 4;
    else return fail(c, "expected a string at byte %zu, found type 0x%02x", at, t);
    if (w) {
        if (need(c, (size_t)w)) return -1;
        *n = (uint32_t)be(c->p + c->pos, w);
        c->pos += (size_t)w;
    }
    if (need(c, *n)) return -1;
    *s = (const char *)c->p + c->pos;
    c->pos += *n;
    return 0;
}

/* Skip one value of any shape without recursion. */
static int skip(cur *c)
{
    uint64_t pending = 1;
    while (pending) {
        pending--;
        if (need(c, 1)) return -1;
        size_t at = c->pos;
        uint8_t t = c->p[c->pos];
        uint32_t n;
        if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) { c->pos++; continue; }
        if ((t & 0xf0) == 0x90 || t == 0xdc || t == 0xdd) { if (rd_array(c, &n)) return -1; pending += n; continue; }
        if ((t & 0xf0) == 0x80 || t == 0xde || t == 0xdf) { if (rd_container(c, 1, &n)) return -1; pending += 2ull * n; continue; }
        if ((t & 0xe0) == 0xa0 || t == 0xd9 || t == 0xda || t == 0xdb) { const char *s; if (rd_str(c, &s, &n)) return -1; continue; }
        int w;
        switch (t) {
        case 0xcc: case 0xd0: w = 1; break;
        case 0xcd: case 0xd1: w = 2; break;
        case 0xce: case 0xd2: case 0xca: w = 4; break;
        case 0xcf: case 0xd3: case 0xcb: w = 8; break;
        case 0xc4: case 0xc5: case 0xc6: {
            int lw = t == 0xc4 ? 1 : t == 0xc5 ? 2 : 4;
            c->pos++;
            if (need(c, (size_t)lw)) return -1;
            uint64_t l = be(c->p + c->pos, lw);
            c->pos += (size_t)lw;
            if (need(c, l)) return -1;
            c->pos += l;
            continue;
        }
        default: return fail(c, "unsupported msgpack type 0x%02x at byte %zu", t, at);
        }
        c->pos++;
        if (need(c, (size_t)w)) return -1;
        c->pos += (size_t)w;
    }
    return 0;
}

static int rd_meta(cur *c, cmh_snapshot *s)
{
    uint32_t n;
    int64_t v = 0;
    if (rd_array_n(c, 11, 64, &n, "meta")) return -1;
    if (rd_int(c, &v)) return -1;
    s->source = (uint8_t)v;
    if (rd_int(c, &s->pid) || rd_u64(c, (uint64_t *)&v)) return -1;
    s->hostname = (uint32_t)v;
    if (rd_u64(c, (uint64_t *)&v)) return -1;
    s->cmdline = (uint32_t)v;
    if (rd_int(c, &s->start_time_ns) || rd_int(c, &s->dump_time_ns)) return -1;
    if (rd_int(c, &v)) return -1;
    s->opt_enabled = (uint8_t)v;
    if (rd_int(c, &v)) return -1;
    s->opt_context = (uint8_t)v;
    if (rd_u64(c, &s->opt_max_entries) || rd_int(c, &v)) return -1;
    s->opt_max_frames = (int32_t)v;
    if (rd_u64(c, &s->lost_events)) return -1;
    if (n >= 12) {
        if (rd_u64(c, (uint64_t *)&v)) return -1;
        s->ending = (uint32_t)v;
    }
    for (uint32_t i = 12; i < n; i++)
        if (skip(c)) return -1;
    return 0;
}

static int rd_strings(cur *c, cmh_snapshot *s)
{
    uint32_t n;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *p;
        uint32_t l, id;
        size_t at = c->pos;
        if (rd_str(c, &p, &l)) return -1;
        if (i == 0) {
            if (l != 0) return fail(c, "string 0 at byte %zu must be empty", at);
            continue;
        }
        if (memchr(p, 0, l)) return fail(c, "string with a NUL byte at byte %zu", at);
        if (cmh_strtab_intern(&s->strings, p, l, &id) != CMH_OK) return nomem(c);
        if (id != i) return fail(c, "duplicate string %u at byte %zu", i, at);
    }
    return 0;
}

static int rd_modules(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_module m;
        if (rd_array_n(c, 4, 64, &k, "module")) return -1;
        if (rd_u32(c, &m.path, s->strings.n, "string id") || rd_u32(c, &m.build_id, s->strings.n, "string id") ||
            rd_u64(c, &m.base) || rd_u64(c, &m.size))
            return -1;
        for (uint32_t j = 4; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_module(s, &m) != CMH_OK) return nomem(c);
    }
    return 0;
}

static int rd_frames(cur *c, cmh_snapshot *s)
{
    uint32_t n, k, id;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_frame f;
        int64_t mod;
        if (rd_array_n(c, 5, 64, &k, "frame")) return -1;
        if (rd_u64(c, &f.pc) || rd_u32(c, &f.name, s->strings.n, "string id") ||
            rd_u32(c, &f.filename, s->strings.n, "string id") || rd_int(c, &f.line) || rd_int(c, &mod))
            return -1;
        if (mod < -1 || mod >= (int64_t)s->nmodules) return fail(c, "module index %lld out of range", (long long)mod);
        f.module = (int32_t)mod;
        for (uint32_t j = 5; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_frame(s, &f, &id) != CMH_OK) return nomem(c);
    }
    return 0;
}

static int rd_stacks(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    /* as deep as a PyTorch pickle's (the pickle reader's 4096): its C++ stacks pass 256, and
     * symbolize or merge write them here */
    uint32_t buf[4096];
    for (uint32_t i = 0; i < n; i++) {
        size_t at = c->pos;
        if (rd_array(c, &k)) return -1;
        if (k > 4096) return fail(c, "stack at byte %zu has %u frames (at most 4096)", at, k);
        for (uint32_t j = 0; j < k; j++)
            if (rd_u32(c, &buf[j], s->nframes, "frame id")) return -1;
        if (i == 0) {
            if (k) return fail(c, "stack 0 at byte %zu must be empty", at);
            continue;
        }
        /* Stacks are written already interned; keep their ids even if two happen to be equal. */
        uint32_t id;
        if (cmh_snapshot_add_stack(s, buf, k, &id) != CMH_OK) return nomem(c);
        if (id != i) return fail(c, "duplicate stack %u at byte %zu", i, at);
    }
    return 0;
}

static int rd_segments(cur *c, cmh_snapshot *s)
{
    uint32_t n, k, nb;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_segment g;
        memset(&g, 0, sizeof g);
        int64_t v = 0;
        if (rd_array_n(c, 12, 64, &k, "segment")) return -1;
        if (rd_int(c, &v)) return -1;
        g.device = (int32_t)v;
        if (rd_int(c, &v)) return -1;
        g.kind = (uint8_t)v;
        if (rd_int(c, &v)) return -1;
        g.flags = (uint8_t)v;
        if (rd_int(c, &v)) return -1;
        g.pool = (uint8_t)v;
        if (rd_u64(c, &g.addr) || rd_u64(c, &g.size) || rd_u64(c, &g.stream) || rd_u64(c, &g.pool_id[0]) ||
            rd_u64(c, &g.pool_id[1]) || rd_u32(c, &g.stack, s->nstacks, "stack id") || rd_int(c, &g.time_ns) ||
            rd_array(c, &nb))
            return -1;
        if (cmh_snapshot_add_segment(s, &g, NULL) != CMH_OK) return nomem(c);
        for (uint32_t j = 0; j < nb; j++) {
            cmh_block b;
            uint32_t bk;
            uint64_t off;
            if (rd_array_n(c, 6, 64, &bk, "block")) return -1;
            if (rd_u64(c, &off) || rd_u64(c, &b.size) || rd_u64(c, &b.requested) || rd_int(c, &v)) return -1;
            b.state = (uint8_t)v;
            if (rd_u32(c, &b.stack, s->nstacks, "stack id") || rd_int(c, &b.time_ns)) return -1;
            for (uint32_t q = 6; q < bk; q++)
                if (skip(c)) return -1;
            b.addr = g.addr + off;
            if (cmh_snapshot_add_block(s, &b) != CMH_OK) return nomem(c);
        }
        for (uint32_t j = 12; j < k; j++)
            if (skip(c)) return -1;
    }
    return 0;
}

static int rd_traces(cur *c, cmh_snapshot *s)
{
    uint32_t n, k, ne;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t dev;
        uint64_t dropped;
        if (rd_array_n(c, 3, 64, &k, "trace")) return -1;
        if (rd_int(c, &dev) || rd_u64(c, &dropped) || rd_array(c, &ne)) return -1;
        if (cmh_snapshot_add_trace(s, (int32_t)dev, dropped, NULL) != CMH_OK) return nomem(c);
        /* an entry takes at least 7 bytes: room for all of them at once, as far as the file can hold */
        size_t fit = (c->len - c->pos) / 7;
        if (cmh_snapshot_reserve_entries(s, ne < fit ? ne : (uint32_t)fit) != CMH_OK) return nomem(c);
        uint64_t addr = 0;
        int64_t t = 0;
        for (uint32_t j = 0; j < ne; j++) {
            cmh_entry_full e;
            memset(&e, 0, sizeof e);
            uint32_t ek;
            int64_t code, da, dt;
            size_t at = c->pos;
            if (rd_array_n(c, 6, 64, &ek, "trace entry")) return -1;
            if (rd_int(c, &code) || rd_int(c, &da) || rd_u64(c, &e.size) || rd_u64(c, &e.stream) || rd_int(c, &dt) ||
                rd_u32(c, &e.stack, s->nstacks, "stack id"))
                return -1;
            if (code < 0 || (code & 15) >= CMH_ACT_COUNT || ((code >> 5) & 7) >= CMH_KIND_COUNT || code > 255)
                return fail(c, "unknown action code %lld at byte %zu", (long long)code, at);
            e.action = code & 15;
            e.flags = (code >> 4) & 1;
            e.kind = (code >> 5) & 7;
            addr += (uint64_t)da;
            t = (int64_t)((uint64_t)t + (uint64_t)dt); /* a hostile delta wraps, never overflows */
            e.addr = addr;
            e.time_ns = t;
            e.requested = e.size;
            if (ek >= 7 && rd_u64(c, &e.requested)) return -1;
            if (ek >= 10 && (rd_u32(c, &e.name, s->strings.n, "string id") ||
                             rd_u32(c, &e.compile_context, s->strings.n, "string id") ||
                             rd_u32(c, &e.user_metadata, s->strings.n, "string id")))
                return -1;
            if (ek >= 12 && (rd_u64(c, &e.pool_id[0]) || rd_u64(c, &e.pool_id[1]))) return -1;
            if (ek >= 13) { /* its flags beyond the code byte's (bits this version does not know: ignored) */
                uint64_t xf;
                if (rd_u64(c, &xf)) return -1;
                if ((xf & CMH_CMH_XF_UNKNOWN_ACTION) && e.action == CMH_ACT_MARK) {
                    e.flags |= CMH_EF_UNKNOWN_ACTION;
                    s->pt_fields |= CMH_PT_UNKNOWN_ACTIONS;
                }
            }
            for (uint32_t q = ek >= 13 ? 13 : ek >= 12 ? 12 : ek >= 10 ? 10 : ek >= 7 ? 7 : 6; q < ek; q++)
                if (skip(c)) return -1;
            if (cmh_snapshot_add_entry(s, &e) != CMH_OK) return nomem(c);
        }
        if (k >= 4) { /* the threads, as runs [count, thread, ...] over this trace's entries */
            uint32_t nr, at = 0;
            size_t where = c->pos;
            uint32_t first = s->traces[s->ntraces - 1].first_entry; /* (entries may be NULL: none read) */
            if (rd_array(c, &nr)) return -1;
            if (nr % 2) return fail(c, "thread runs of odd length %u at byte %zu", nr, where);
            for (uint32_t r = 0; r < nr / 2; r++) {
                uint32_t count = 0, thread = 0;
                if (rd_u32(c, &count, UINT32_MAX, "thread run") || rd_u32(c, &thread, UINT32_MAX, "thread")) return -1;
                if (count > ne - at) return fail(c, "thread runs cover more than the %u entries at byte %zu", ne, where);
                for (uint32_t q = 0; q < count; q++, at++) {
                    cmh_entry_full f;
                    cmh_entry_get(s, &s->entries[first + at], &f);
                    f.thread = thread;
                    if (cmh_entry_set(s, first + at, &f) != CMH_OK) return nomem(c);
                }
            }
        }
        if (k >= 5) {
            uint64_t dooms;
            if (rd_u64(c, &dooms)) return -1;
            s->traces[s->ntraces - 1].dropped_ooms = dooms;
        }
        for (uint32_t j = 5; j < k; j++)
            if (skip(c)) return -1;
    }
    return 0;
}

static int rd_annotations(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_annotation a;
        int64_t v = 0;
        if (rd_array_n(c, 4, 64, &k, "annotation")) return -1;
        if (rd_u32(c, &a.name, s->strings.n, "string id") || rd_int(c, &v)) return -1;
        a.stage = (uint8_t)v;
        if (rd_int(c, &v)) return -1;
        a.device = (int32_t)v;
        if (rd_int(c, &a.time_ns)) return -1;
        for (uint32_t j = 4; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_annotation(s, &a) != CMH_OK) return nomem(c);
    }
    return 0;
}

static int rd_settings(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t key = 0, val = 0;
        int64_t type;
        if (rd_array_n(c, 3, 64, &k, "setting")) return -1;
        if (rd_u32(c, &key, s->strings.n, "string id") || rd_u32(c, &val, s->strings.n, "string id") ||
            rd_int(c, &type))
            return -1;
        for (uint32_t j = 3; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_setting(s, cmh_str(s, key), cmh_str(s, val), (uint8_t)type) != CMH_OK)
            return nomem(c);
    }
    return 0;
}

static int rd_kernels(cur *c, cmh_snapshot *s)
{
    uint32_t n, k, nk;
    if (rd_array_n(c, 3, 64, &n, "kernels")) return -1;
    if (rd_u32(c, &s->kernels_status, s->strings.n, "string id") || rd_u64(c, &s->kernels_dropped) || rd_array(c, &nk))
        return -1;
    int64_t prev = 0;
    for (uint32_t i = 0; i < nk; i++) {
        cmh_kernel kr;
        int64_t v, dur;
        if (rd_array_n(c, 14, 64, &k, "kernel")) return -1;
        if (rd_u32(c, &kr.name, s->strings.n, "string id") || rd_int(c, &v)) return -1;
        kr.device = (int32_t)v;
        if (rd_int(c, &v)) return -1;
        kr.stream = (uint32_t)v;
        if (rd_int(c, &v) || rd_int(c, &dur)) return -1;
        kr.start_ns = (int64_t)((uint64_t)prev + (uint64_t)v);
        kr.end_ns = (int64_t)((uint64_t)kr.start_ns + (uint64_t)dur);
        prev = kr.start_ns;
        for (int j = 0; j < 6; j++) {
            if (rd_int(c, &v)) return -1;
            if (j < 3) kr.grid[j] = (int32_t)v;
            else kr.block[j - 3] = (int32_t)v;
        }
        if (rd_int(c, &v)) return -1;
        kr.registers = (uint32_t)v;
        if (rd_int(c, &v)) return -1;
        kr.shared_bytes = (uint32_t)v;
        if (rd_int(c, &v)) return -1;
        kr.correlation = (uint32_t)v;
        for (uint32_t j = 14; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_kernel(s, &kr) != CMH_OK) return nomem(c);
    }
    for (uint32_t j = 3; j < n; j++)
        if (skip(c)) return -1;
    return 0;
}

static int rd_meminfo(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_meminfo m = {0};
        int64_t dev;
        uint64_t thread = 0;
        if (rd_array_n(c, 4, 64, &k, "meminfo") || rd_int(c, &dev) || rd_int(c, &m.time_ns) || rd_u64(c, &m.free) ||
            rd_u64(c, &m.total) || (k > 4 && rd_u64(c, &thread)))
            return -1;
        if (dev < -1 || dev > 1023) return fail(c, "meminfo of device %lld", (long long)dev);
        m.device = (int32_t)dev;
        m.thread = thread <= UINT32_MAX ? (uint32_t)thread : 0;
        for (uint32_t j = 5; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_meminfo(s, &m) != CMH_OK) return nomem(c);
    }
    return 0;
}

/* vmm_unmapped: [[device, size, stack, time_ns], ...]; stacks come earlier in the file */
static int rd_vmm_unmapped(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_vmm_handle h = {0};
        int64_t dev;
        if (rd_array_n(c, 4, 64, &k, "vmm_unmapped") || rd_int(c, &dev) || rd_u64(c, &h.size) ||
            rd_u32(c, &h.stack, s->nstacks, "stack id") || rd_int(c, &h.time_ns))
            return -1;
        if (dev < -1 || dev > 1023) return fail(c, "unmapped VMM memory of device %lld", (long long)dev);
        h.device = (int32_t)dev;
        for (uint32_t j = 4; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_vmm_unmapped(s, &h) != CMH_OK) return nomem(c);
    }
    return 0;
}

/* vmm_maps: [[device, addr, size, time_ns, handle, handle_size, handle_stack, handle_time_ns], ...] */
static int rd_vmm_maps(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_vmm_map m = {0};
        int64_t dev;
        if (rd_array_n(c, 8, 64, &k, "vmm_maps") || rd_int(c, &dev) || rd_u64(c, &m.addr) || rd_u64(c, &m.size) ||
            rd_int(c, &m.time_ns) || rd_u64(c, &m.handle) || rd_u64(c, &m.handle_size) ||
            rd_u32(c, &m.handle_stack, s->nstacks, "stack id") || rd_int(c, &m.handle_time_ns))
            return -1;
        if (dev < 0 || dev > 1023) return fail(c, "a VMM map of device %lld", (long long)dev);
        m.device = (int32_t)dev;
        for (uint32_t j = 8; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_vmm_map(s, &m) != CMH_OK) return nomem(c);
    }
    return 0;
}

/* vmm_released: [[device, handle, size, stack, time_ns, release_ns], ...]; stacks come earlier */
static int rd_vmm_released(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_vmm_release r = {0};
        int64_t dev;
        if (rd_array_n(c, 6, 64, &k, "vmm_released") || rd_int(c, &dev) || rd_u64(c, &r.handle) || rd_u64(c, &r.size) ||
            rd_u32(c, &r.stack, s->nstacks, "stack id") || rd_int(c, &r.time_ns) || rd_int(c, &r.release_ns))
            return -1;
        if (dev < 0 || dev > 1023) return fail(c, "a cuMemRelease of device %lld", (long long)dev);
        r.device = (int32_t)dev;
        for (uint32_t j = 6; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_vmm_release(s, &r) != CMH_OK) return nomem(c);
    }
    return 0;
}

/* entry_extras: [[trace, entry in it, string id], ...]: a PyTorch entry's keys the model has no
 * field for (cmh_extra); the traces and strings come earlier */
static int rd_entry_extras(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = 0, j = 0, x = 0;
        if (rd_array_n(c, 3, 64, &k, "entry_extras") || rd_u32(c, &t, s->ntraces, "trace") ||
            rd_u32(c, &j, s->traces[t].nentries, "entry") || rd_u32(c, &x, s->strings.n, "string id"))
            return -1;
        for (uint32_t m = 3; m < k; m++)
            if (skip(c)) return -1;
        if (cmh_entry_set_extra(s, s->traces[t].first_entry + j, x) != CMH_OK) return nomem(c);
    }
    return 0;
}

/* driver_errors: [[call, result, count, [[addr, size, thread, time_ns, stack], ...]], ...]; stacks come earlier */
static int rd_driver_errors(cur *c, cmh_snapshot *s)
{
    uint32_t n, k, m, q;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_drv_error e = {0};
        const char *call;
        uint32_t cl;
        int64_t res;
        if (rd_array_n(c, 4, 64, &k, "driver_errors") || rd_str(c, &call, &cl) || rd_int(c, &res) || rd_u64(c, &e.count) ||
            rd_array(c, &m))
            return -1;
        if (res < INT32_MIN || res > INT32_MAX) return fail(c, "driver_errors[%u]: result %lld", i, (long long)res);
        snprintf(e.call, sizeof e.call, "%.*s", (int)(cl < sizeof e.call ? cl : sizeof e.call - 1), call);
        e.result = (int32_t)res;
        for (uint32_t j = 0; j < m; j++) {
            cmh_drv_error_site w = {0};
            if (rd_array_n(c, 5, 64, &q, "driver_errors site") || rd_u64(c, &w.addr) || rd_u64(c, &w.size) ||
                rd_u32(c, &w.thread, UINT32_MAX, "thread") || rd_int(c, &w.time_ns) || rd_u32(c, &w.stack, s->nstacks, "stack id"))
                return -1;
            for (uint32_t x = 5; x < q; x++)
                if (skip(c)) return -1;
            if (e.nsites < CMH_DRV_ERROR_SITES) e.sites[e.nsites++] = w; /* (a later writer's more: kept counted) */
        }
        for (uint32_t j = 4; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_drv_error(s, &e) != CMH_OK) return nomem(c);
    }
    return 0;
}

/* history_lost: [cut_bytes, file_bytes, read_to, torn, damaged, refused]; a later writer's fields past them skipped */
static int rd_history_lost(cur *c, cmh_snapshot *s)
{
    uint32_t k;
    cmh_history_lost h = {0};
    if (rd_array_n(c, 6, 64, &k, "history_lost") || rd_u64(c, &h.cut_bytes) || rd_u64(c, &h.file_bytes) || rd_u64(c, &h.read_to) ||
        rd_u64(c, &h.torn) || rd_u64(c, &h.damaged) || rd_u64(c, &h.refused))
        return -1;
    for (uint32_t j = 6; j < k; j++)
        if (skip(c)) return -1;
    s->history_lost = h;
    return 0;
}

/* device_ids: [[device, uuid, name, pci_bus], ...] */
static int rd_device_ids(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_device_ident d = {0};
        int64_t dev;
        const char *v[3];
        uint32_t vl[3];
        if (rd_array_n(c, 4, 64, &k, "device_ids") || rd_int(c, &dev) || rd_str(c, &v[0], &vl[0]) || rd_str(c, &v[1], &vl[1]) ||
            rd_str(c, &v[2], &vl[2]))
            return -1;
        if (dev < 0 || dev > 1023) return fail(c, "device_ids[%u]: device %lld", i, (long long)dev);
        d.device = (int32_t)dev;
        snprintf(d.uuid, sizeof d.uuid, "%.*s", (int)(vl[0] < sizeof d.uuid ? vl[0] : sizeof d.uuid - 1), v[0]);
        snprintf(d.name, sizeof d.name, "%.*s", (int)(vl[1] < sizeof d.name ? vl[1] : sizeof d.name - 1), v[1]);
        snprintf(d.pci_bus, sizeof d.pci_bus, "%.*s", (int)(vl[2] < sizeof d.pci_bus ? vl[2] : sizeof d.pci_bus - 1), v[2]);
        for (uint32_t j = 4; j < k; j++)
            if (skip(c)) return -1;
        if (cmh_snapshot_add_ident(s, &d) != CMH_OK) return nomem(c);
    }
    return 0;
}

static int rd_thread_ids(cur *c, cmh_snapshot *s)
{
    uint32_t n, k;
    if (rd_array(c, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t th, tid, name;
        if (rd_array_n(c, 3, 64, &k, "thread_ids") || rd_int(c, &th) || rd_int(c, &tid) || rd_int(c, &name)) return -1;
        if (th < 1 || th > UINT32_MAX || name < 0 || (uint64_t)name >= s->strings.n)
            return fail(c, "thread_ids[%u]: thread %lld, name %lld", i, (long long)th, (long long)name);
        for (uint32_t j = 3; j < k; j++)
            if (skip(c)) return -1;
        cmh_thread_info t = {(uint32_t)th, tid, (uint32_t)name};
        if (cmh_snapshot_add_thread(s, &t) != CMH_OK) return nomem(c);
    }
    return 0;
}

static int rd_snapshot(cur *c, cmh_snapshot *s, int nested);

/* "checksum": the kind of sum the file ends with.  The sum itself was checked before parsing
 * began (read_cmh); a file that announces one and does not end with it is refused once parsed
 * (a cut file fails the parse first, and is told truncated). */
static int rd_announce(cur *c, size_t at)
{
    const char *v;
    uint32_t vl;
    if (rd_str(c, &v, &vl)) return -1;
    if (vl != 6 || memcmp(v, "crc32c", 6))
        return fail(c, "a checksum of kind '%.*s' at byte %zu, which this cumemhist does not know", (int)(vl > 32 ? 32 : vl), v, at);
    c->announced = at + 1;
    return 0;
}

/* PyTorch's part: a snapshot map of the same form, inside ours (only there). */
static int rd_torch(cur *c, cmh_snapshot *s, int nested)
{
    if (nested) return fail(c, "a PyTorch part inside a PyTorch part");
    if (s->torch) return fail(c, "a second PyTorch part");
    cmh_snapshot *t = malloc(sizeof *t);
    if (!t || cmh_snapshot_init(t) != CMH_OK) {
        free(t);
        return nomem(c);
    }
    if (rd_snapshot(c, t, 1)) {
        cmh_snapshot_free(t);
        free(t);
        return -1;
    }
    s->torch = t;
    return 0;
}

/* "process": {producer, rank, local_rank, world_size, forked_from}; other keys skipped. */
static int rd_process(cur *c, cmh_snapshot *s)
{
    uint32_t n;
    if (rd_container(c, 1, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        if (rd_str(c, &k, &kl)) return -1;
        int32_t *dst = kl == 4 && !memcmp(k, "rank", 4)         ? &s->rank
                       : kl == 10 && !memcmp(k, "local_rank", 10) ? &s->local_rank
                       : kl == 10 && !memcmp(k, "world_size", 10) ? &s->world_size
                                                                  : NULL;
        if (kl == 8 && !memcmp(k, "producer", 8)) {
            const char *v;
            uint32_t vl;
            if (rd_str(c, &v, &vl)) return -1;
            size_t m = vl < sizeof s->producer - 1 ? vl : sizeof s->producer - 1;
            memcpy(s->producer, v, m);
            s->producer[m] = 0;
            for (size_t j = 0; j < m; j++) /* shown as is in reports: no control characters */
                if ((unsigned char)s->producer[j] < 0x20 || s->producer[j] == 0x7f) s->producer[j] = '?';
        } else if (kl == 8 && !memcmp(k, "children", 8)) {
            uint32_t m, two;
            if (rd_array(c, &m)) return -1;
            for (uint32_t j = 0; j < m; j++) {
                int64_t pid;
                if (rd_array_n(c, 2, 2, &two, "process children entry") || rd_int(c, &pid)) return -1;
                if (pid <= 0 || pid > INT32_MAX) return fail(c, "process child pid %lld out of range", (long long)pid);
                char path[4096], *pp = NULL;
                if (c->pos < c->len && c->p[c->pos] == 0xc0) c->pos++; /* nil: not known */
                else {
                    const char *v;
                    uint32_t vl;
                    if (rd_str(c, &v, &vl)) return -1;
                    if (vl >= sizeof path || memchr(v, 0, vl)) return fail(c, "process child %lld: a path of %u bytes", (long long)pid, vl);
                    memcpy(path, v, vl);
                    path[vl] = 0;
                    pp = path;
                }
                if (cmh_snapshot_add_child(s, pid, pp) != CMH_OK) return nomem(c);
            }
        } else if (kl == 13 && !memcmp(k, "children_more", 13)) {
            int64_t v;
            if (rd_int(c, &v)) return -1;
            if (v < 0 || v > INT32_MAX) return fail(c, "process children_more %lld out of range", (long long)v);
            s->children_more = (uint32_t)v;
        } else if (kl == 11 && !memcmp(k, "forked_from", 11)) {
            int64_t v;
            if (rd_int(c, &v)) return -1;
            if (v < 0 || v > INT32_MAX) return fail(c, "process forked_from %lld out of range", (long long)v);
            s->forked_from = v;
        } else if (dst) {
            int64_t v;
            if (rd_int(c, &v)) return -1;
            if (v < -1 || v > INT32_MAX) return fail(c, "process %.*s %lld out of range", (int)kl, k, (long long)v);
            *dst = (int32_t)v;
        } else if (skip(c)) {
            return -1;
        }
    }
    return 0;
}

/* A snapshot's map at the cursor into s (initialized); -1 with the error set. */
static int rd_snapshot(cur *c, cmh_snapshot *s, int nested)
{
    uint32_t n;
    int seen_format = 0;
    size_t meta_at = 0, map_at = c->pos;
    /* Sections must come in dependency order (strings before the ids that point at them);
     * the writer emits them so, and an id checked against a table not yet read fails cleanly. */
    if (rd_container(c, 1, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        size_t at = c->pos;
        if (rd_str(c, &k, &kl)) return -1;
#define KEY(x) (kl == sizeof(x) - 1 && memcmp(k, x, kl) == 0)
        int r;
        if (KEY("format")) {
            const char *v;
            uint32_t vl;
            if (rd_str(c, &v, &vl)) return -1;
            if (vl != 9 || memcmp(v, "cumemhist", 9) != 0) return fail(c, "not a cumemhist snapshot (format tag at byte %zu)", at);
            seen_format = 1;
            continue;
        } else if (KEY("version")) {
            int64_t v = 0;
            if (rd_int(c, &v)) return -1;
            if (v < 1 || v > CMH_FORMAT_VERSION)
                return fail(c, "format version %lld is newer than this cumemhist reads (%d)", (long long)v, CMH_FORMAT_VERSION);
            s->version = (uint32_t)v;
            continue;
        } else if (KEY("meta")) {
            meta_at = c->pos;
            r = rd_meta(c, s);
        }
        else if (KEY("process")) r = rd_process(c, s);
        else if (KEY("strings")) r = rd_strings(c, s);
        else if (KEY("modules")) r = rd_modules(c, s);
        else if (KEY("frames")) r = rd_frames(c, s);
        else if (KEY("stacks")) r = rd_stacks(c, s);
        else if (KEY("segments")) r = rd_segments(c, s);
        else if (KEY("traces")) r = c->flags & CMH_LOAD_SEGMENTS ? skip(c) : rd_traces(c, s);
        else if (KEY("annotations")) r = rd_annotations(c, s);
        else if (KEY("settings")) r = rd_settings(c, s);
        else if (KEY("kernels")) r = rd_kernels(c, s);
        else if (KEY("meminfo")) r = rd_meminfo(c, s);
        else if (KEY("vmm_unmapped")) r = rd_vmm_unmapped(c, s);
        else if (KEY("vmm_maps")) r = rd_vmm_maps(c, s);
        else if (KEY("vmm_released")) r = rd_vmm_released(c, s);
        else if (KEY("device_ids")) r = rd_device_ids(c, s);
        else if (KEY("driver_errors")) r = rd_driver_errors(c, s);
        else if (KEY("history_lost")) r = rd_history_lost(c, s);
        else if (KEY("thread_ids")) r = rd_thread_ids(c, s);
        else if (KEY("torch_clock_ns")) r = rd_int(c, &s->torch_clock_ns);
        else if (KEY("entry_extras")) r = c->flags & CMH_LOAD_SEGMENTS ? skip(c) : rd_entry_extras(c, s);
        else if (KEY("entry_pool_ids")) {
            int64_t v = 0;
            r = rd_int(c, &v);
            if (!r && v) s->pt_fields |= CMH_PT_POOL_ID;
        }
        else if (KEY("torch")) r = rd_torch(c, s, nested);
        else if (!nested && KEY("checksum")) r = rd_announce(c, at);
        else if (!nested && KEY("crc32c")) {
            int64_t v; /* read first: a file cut inside it is told truncated */
            if (rd_int(c, &v)) return -1;
            if (!c->has_sum || at != c->sum_at)
                return fail(c, "a checksum at byte %zu that is not the last %zu bytes of the file", at, TRAILER);
            r = 0;
        }
        else r = skip(c);
#undef KEY
        if (r) return -1;
        if (!seen_format) return fail(c, "not a cumemhist snapshot (no format tag before byte %zu)", at);
    }
    if (!seen_format) return fail(c, "not a cumemhist snapshot (no format tag in the map at byte %zu)", map_at);
    /* meta string ids are checked last: strings come after meta in the file. */
    if (s->hostname >= s->strings.n || s->cmdline >= s->strings.n || s->ending >= s->strings.n)
        return fail(c, "meta (at byte %zu) names a string that does not exist", meta_at);
    return 0;
}

/* The sum over every byte before its own four.  A mapping is read in steps, each given back
 * once summed (mapped.h): the parse that follows reads the pages again from the page cache,
 * and peak memory stays the model's. */
static int verify(cur *c)
{
    size_t end = c->len - 4, dropped = 0;
    uint32_t sum = 0;
    for (size_t at = 0; at < end;) {
        size_t n = end - at < CMH_DROP_STEP ? end - at : CMH_DROP_STEP;
        sum = cmh_crc32c(sum, c->p + at, n);
        at += n;
        if (c->mapped) cmh_drop_behind(c->p, at, &dropped);
    }
    uint32_t want = (uint32_t)be(c->p + end, 4);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    if (sum != want)
        return fail(c, "checksum mismatch over bytes 0-%zu (the file is damaged)", end - 1);
#endif
    return 0;
}

static int read_cmh(const void *buf, size_t len, int mapped, unsigned flags, cmh_snapshot *s, char *err, size_t errlen)
{
    cur c = {buf, len, 0, mapped, 0, err, errlen, 0, 0, 0, 0, 0, flags & CMH_LOAD_SEGMENTS};
    if (cmh_snapshot_init(s) != CMH_OK) {
        snprintf(err, errlen, "out of memory");
        return CMH_ENOMEM;
    }
    if (len >= TRAILER && !memcmp(c.p + len - TRAILER, trailer_key, sizeof trailer_key)) {
        c.has_sum = 1;
        c.sum_at = len - TRAILER;
        if (verify(&c)) goto bad;
    }
    if (rd_snapshot(&c, s, 0)) {
        if (c.announced && !c.has_sum && !c.nomem) { /* what the parser tripped on is the missing end */
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, "; byte %zu says the file ends with a checksum, and it does not: the file is truncated or damaged",
                     c.announced - 1);
        }
        goto bad;
    }
    if (c.announced && !c.has_sum) {
        fail(&c, "no checksum at its end (bytes %zu-%zu), though byte %zu says it has one: the file is damaged",
             len > TRAILER ? len - TRAILER : 0, len - 1, c.announced - 1);
        goto bad;
    }
    s->unverified = !c.has_sum;
    if (c.pos != c.len) {
        fail(&c, "%zu unexpected bytes after the snapshot at byte %zu", c.len - c.pos, c.pos);
        goto bad;
    }
    /* CUMEMHIST_DEBUG_LOAD set: how many trace entries were kept (0 when the command asked for
     * the segments alone: tests check that the traces are skipped, not merely harmless) */
    const char *dbg = getenv("CUMEMHIST_DEBUG_LOAD");
    if (dbg && *dbg) fprintf(stderr, "cumemhist: cmh: %u trace entries kept%s\n", s->nentries, flags & CMH_LOAD_SEGMENTS ? " (traces skipped)" : "");
    return CMH_OK;
bad:
    cmh_snapshot_free(s);
    return c.nomem ? CMH_ENOMEM : CMH_EFORMAT;
}

int cmh_cmh_read(const void *buf, size_t len, cmh_snapshot *s, char *err, size_t errlen)
{
    return read_cmh(buf, len, 0, 0, s, err, errlen);
}

int cmh_cmh_read_mapped(const void *map, size_t len, unsigned flags, cmh_snapshot *s, char *err, size_t errlen)
{
    return read_cmh(map, len, 1, flags, s, err, errlen);
}
