/*
 * torch_text.c - the text reports of PyTorch's torch/cuda/_memory_viz.py, `stats` (segsum) and
 * `trace`, reproduced character for character from the snapshot model (docs/PYTORCH.md, _memory_viz.py text), so that
 * scripts written against them keep working.  Two of its bugs are fixed on purpose: `trace`
 * ends each device with the true active total and a newline (the script prints its loop counter,
 * glued to the next header).  Its other quirks (names never reused, `seg_<i>` matched against a
 * segment's allocated size) are kept, since they shape every line after them.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "oatab.h"

#define PAGE_SIZE (20.0 * 1024 * 1024)

/* Python's f"{num:3.1f}{unit}B" after dividing by 1024 while abs(num) >= 1024 */
static void bytes_fmt(char *buf, size_t n, double num)
{
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
    for (int i = 0; i < 8; i++) {
        if (fabs(num) < 1024.0) {
            snprintf(buf, n, "%3.1f%sB", num, units[i]);
            return;
        }
        num /= 1024.0;
    }
    snprintf(buf, n, "%.1fYiB", num);
}

static void report_free(char *buf, size_t n, uint64_t ext, uint64_t in)
{
    char b[64];
    uint64_t total = ext + in;
    bytes_fmt(b, sizeof b, (double)total);
    if (total) snprintf(buf, n, "%s (%.1f%% internal)", b, (double)in / (double)total * 100.0);
    else snprintf(buf, n, "%s", b);
}

static uint64_t calc_active(const cmh_snapshot *s, const cmh_segment *g)
{
    uint64_t a = 0;
    for (uint32_t k = 0; k < g->nblocks; k++)
        if (s->blocks[g->first_block + k].state == CMH_BLOCK_ACTIVE_ALLOCATED) a += s->blocks[g->first_block + k].size;
    return a;
}

typedef struct seg_key {
    uint64_t total, active;
    uint32_t index;
} seg_key;

static int cmp_seg(const void *a, const void *b)
{
    const seg_key *x = a, *y = b;
    if (x->total != y->total) return x->total < y->total ? -1 : 1;
    if (x->active != y->active) return x->active < y->active ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index; /* Python's sort is stable */
}

int cmh_print_segsum(const cmh_snapshot *s, int device, FILE *fp)
{
    char b1[64], b2[128];
    bytes_fmt(b1, sizeof b1, PAGE_SIZE);
    fprintf(fp, "Summary of segments >= %s in size\n", b1);
    seg_key *keys = malloc((s->nsegments ? s->nsegments : 1) * sizeof *keys);
    if (!keys) return CMH_ENOMEM;
    uint32_t nkeys = 0;
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (device == CMH_ALL_DEVICES || s->segments[i].device == device)
            keys[nkeys++] = (seg_key){s->segments[i].size, calc_active(s, &s->segments[i]), i};
    qsort(keys, nkeys, sizeof *keys, cmp_seg);
    uint64_t total_reserved = 0, total_allocated = 0, free_external = 0, free_internal = 0;
    char *occupied = NULL;
    double *frac = NULL;
    size_t cap = 0;
    for (uint32_t si = 0; si < nkeys; si++) {
        const cmh_segment *g = &s->segments[keys[si].index];
        total_reserved += g->size;
        uint64_t ext = 0, in = 0, alloc = 0;
        size_t nseg = g->size ? (size_t)((g->size - 1) / (uint64_t)PAGE_SIZE + 1) : 0;
        if (nseg + 1 > cap) {
            cap = nseg + 1;
            char *no = realloc(occupied, cap);
            double *nf = realloc(frac, cap * sizeof *nf);
            if (!no || !nf) {
                free(no ? no : occupied);
                free(nf ? nf : frac);
                free(keys);
                return CMH_ENOMEM;
            }
            occupied = no;
            frac = nf;
        }
        memset(occupied, ' ', nseg);
        occupied[nseg] = 0;
        for (size_t j = 0; j < nseg; j++) frac[j] = 0.0;
        uint64_t boffset = 0;
        uint32_t range_i = 0;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s->blocks[g->first_block + k];
            if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) {
                uint64_t asz = b->requested;
                alloc += asz;
                in += b->size - asz;
                /* the page map of this allocation */
                uint64_t start_ = boffset, finish_ = boffset + asz;
                size_t start = (size_t)(start_ / (uint64_t)PAGE_SIZE);
                size_t finish = finish_ ? (size_t)((finish_ - 1) / (uint64_t)PAGE_SIZE + 1) : 0;
                char m = (char)('a' + range_i % 26);
                for (size_t j = start; j < finish && j < nseg; j++) {
                    double lo = (double)(start_ > j * (uint64_t)PAGE_SIZE ? start_ : j * (uint64_t)PAGE_SIZE);
                    double hi = (double)(finish_ < (j + 1) * (uint64_t)PAGE_SIZE ? finish_ : (j + 1) * (uint64_t)PAGE_SIZE);
                    frac[j] += (hi - lo) / PAGE_SIZE;
                    if (occupied[j] != ' ') {
                        int d = (int)(frac[j] * 10);
                        occupied[j] = d >= 0 && d <= 10 ? "0123456789*"[d] : '*';
                    } else {
                        occupied[j] = m;
                    }
                }
                range_i++;
            } else {
                ext += b->size;
            }
            boffset += b->size;
        }
        total_allocated += alloc;
        free_external += ext;
        free_internal += in;
        if ((double)g->size >= PAGE_SIZE) {
            bytes_fmt(b1, sizeof b1, (double)g->size);
            report_free(b2, sizeof b2, ext, in);
            fprintf(fp, "[%s] %s allocated, %s free", occupied, b1, b2);
            if (g->stream) fprintf(fp, " stream_%" PRIu64, g->stream);
            fputc('\n', fp);
        }
    }
    free(occupied);
    free(frac);
    free(keys);
    fprintf(fp, "segments: %u\n", nkeys);
    bytes_fmt(b1, sizeof b1, (double)total_reserved);
    fprintf(fp, "total_reserved: %s\n", b1);
    bytes_fmt(b1, sizeof b1, (double)total_allocated);
    fprintf(fp, "total_allocated: %s\n", b1);
    report_free(b2, sizeof b2, free_external, free_internal);
    fprintf(fp, "total_free: %s\n", b2);
    bytes_fmt(b1, sizeof b1, PAGE_SIZE);
    fprintf(fp,
            "\nLegend:\n"
            "    [a     ] - a segment in the allocator\n"
            "     ^-- a page %s of memory in the segment\n"
            "    a-z: pages filled with a single block's content\n"
            "    ' ': page is completely free\n"
            "    *: page if completely full with multiple blocks\n"
            "    0-9: page is partially full with tensors of multiple blocks (9 == 90%% full)\n"
            "    (X%% internal) - of the free memory, X%% is free because we rounded the size of the allocation.\n",
            b1);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}


/* ---- trace output without printf ----
 * `trace` prints a line per entry, and formatting them with printf was nearly half its time
 * (issue 29).  Its lines are strings, decimal integers and the script's byte sizes, so they are
 * put together in a buffer here; the sizes are rounded from the integer, exactly as printf
 * rounds the double (ties to even on the binary value), so the text stays byte for byte.
 * A line is written through a pointer into the buffer (put_*), after one check for room
 * (to_line): no length is counted and no call made per piece. */
typedef struct tout {
    FILE *fp;
    size_t n;
    char b[1 << 16];
} tout;

#define TO_LINE 256 /* longer than any line put_* write: names and numbers are at most 20 digits */

static void to_flush(tout *o)
{
    if (o->n) fwrite(o->b, 1, o->n, o->fp); /* a short write sets the stream's error: ferror says it */
    o->n = 0;
}

/* room for k <= 4096 more bytes */
static inline char *to_room(tout *o, size_t k)
{
    if (sizeof o->b - o->n < k) to_flush(o);
    return o->b + o->n;
}

/* room for one line: where it starts; to_end(o, p) when it is written */
static inline char *to_line(tout *o) { return to_room(o, TO_LINE); }
static inline void to_end(tout *o, const char *p) { o->n = (size_t)(p - o->b); }

/* a string literal at p */
#define PUT_LIT(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)

static const char g_digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                   "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";

/* the decimal digits of v at p (at most 20); the end */
static inline char *put_u64(char *p, uint64_t v)
{
    static const uint64_t p10[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                     100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
                                     10000000000000ull, 100000000000000ull, 1000000000000000ull,
                                     10000000000000000ull, 100000000000000000ull, 1000000000000000000ull,
                                     10000000000000000000ull};
    if (v < 10) {
        *p = (char)('0' + v);
        return p + 1;
    }
    unsigned t = (unsigned)(64 - __builtin_clzll(v)) * 1233 >> 12; /* log10(v), or one more */
    char *e = p + t + (v >= p10[t]), *q = e;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        q -= 2;
        memcpy(q, g_digits2 + 2 * r, 2);
    }
    if (v >= 10) memcpy(q - 2, g_digits2 + 2 * v, 2);
    else q[-1] = (char)('0' + v);
    return e;
}

/* bytes_fmt of the integer sign * v at p (at most 32 bytes); the end */
static char *put_bytes(char *p, uint64_t v, int neg)
{
    if (v >> 53) { /* beyond a double's integers: the double's own rounding, as the script has it */
        char b[64];
        bytes_fmt(b, sizeof b, neg ? -(double)v : (double)v);
        size_t n = strlen(b);
        if (n > 32) n = 32; /* never: the largest is "-16.0EiB" */
        memcpy(p, b, n);
        return p + n;
    }
    unsigned k = 0;
    while (k < 5 && v >> (10 * (k + 1))) k++; /* v / 1024^k < 1024: the script's unit */
    uint64_t x = v * 10, q = x;
    if (k) {
        unsigned sh = 10 * k;
        uint64_t r = x & ((1ull << sh) - 1), half = 1ull << (sh - 1);
        q = x >> sh;
        if (r > half || (r == half && (q & 1))) q++;
    }
    if (neg) *p++ = '-';
    p = put_u64(p, q / 10);
    *p++ = '.';
    *p++ = (char)('0' + q % 10);
    if (k) {
        memcpy(p, &"KiMiGiTiPi"[2 * (k - 1)], 2);
        p += 2;
    }
    *p++ = 'B';
    return p;
}

static inline char *put_size(char *p, uint64_t v) { return put_bytes(p, v, 0); }

/* _memory_viz.py's name number i: a..z, then a1..z1, ... */
static inline char *put_name(char *p, uint64_t i)
{
    *p++ = (char)('a' + i % 26);
    return i >= 26 ? put_u64(p, i / 26) : p;
}

/* ---- trace ---- */

/* Python's repr() of a str */
static void py_repr_str(FILE *fp, const char *s)
{
    int q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    fputc(q, fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (CMH_IS_NUL_PAIR(p)) fputs("\\x00", fp), p++; /* a NUL the model holds as C0 80 */
        else if (*p == '\\') fputs("\\\\", fp);
        else if (*p == q) fprintf(fp, "\\%c", q);
        else if (*p == '\n') fputs("\\n", fp);
        else if (*p == '\r') fputs("\\r", fp);
        else if (*p == '\t') fputs("\\t", fp);
        else if (*p < 0x20 || *p == 0x7f) fprintf(fp, "\\x%02x", *p);
        else fputc(*p, fp);
    }
    fputc(q, fp);
}

/* Python's repr() of a trace entry dict, keys in PyTorch's order, present as in the file */
static void py_repr_entry(FILE *fp, const cmh_snapshot *s, const cmh_entry *e)
{
    int unknown = CMH_ENTRY_UNKNOWN_ACTION(e); /* a newer PyTorch's action: as read, named by its action */
    int pt_mark = e->action == CMH_ACT_MARK && CMH_PT_MARKS_INLINE(s) && !unknown; /* PyTorch's annotation, as the pickle has it */
    fputs("{'action': ", fp);
    py_repr_str(fp, unknown ? cmh_str(s, cmh_entry_name(s, e)) : pt_mark ? cmh_pt_mark_action(e->flags) : cmh_action_name(e->action));
    if (e->action != CMH_ACT_OOM || cmh_entry_addr(s, e) != CMH_DEVICE_FREE_UNKNOWN) /* not known: no key, as the pickle has it */
        fprintf(fp, ", '%s': %" PRId64, e->action == CMH_ACT_OOM ? "device_free" : "addr", pt_mark ? 0 : (int64_t)cmh_entry_addr(s, e));
    fprintf(fp, ", 'size': %" PRId64 ", 'stream': %" PRId64, pt_mark ? 0 : (int64_t)cmh_entry_size(s, e), (int64_t)cmh_entry_stream(s, e));
    if (s->source != CMH_SRC_PYTORCH || (s->pt_fields & CMH_PT_TIME_US)) fprintf(fp, ", 'time_us': %" PRId64, cmh_entry_time(s, e) / 1000);
    if (e->action == CMH_ACT_POOL_SAMPLE) fprintf(fp, ", 'used': %" PRId64, (int64_t)cmh_entry_requested(s, e));
    if (e->action == CMH_ACT_MARK && !pt_mark && !unknown) {
        fputs(", 'name': ", fp);
        py_repr_str(fp, cmh_str(s, cmh_entry_name(s, e)));
    }
    if (s->pt_fields & CMH_PT_COMPILE_CONTEXT) {
        fputs(", 'compile_context': ", fp);
        py_repr_str(fp, cmh_str(s, cmh_entry_compile_context(s, e)));
    }
    if (s->pt_fields & CMH_PT_USER_METADATA) {
        fputs(", 'user_metadata': ", fp);
        py_repr_str(fp, cmh_str(s, cmh_entry_user_metadata(s, e)));
    }
    if (e->stack || (e->flags & CMH_EF_HAS_FRAMES)) {
        fputs(", 'frames': [", fp);
        const cmh_stack *st = &s->stacks[e->stack];
        for (uint32_t i = 0; i < st->count; i++) {
            const cmh_frame *f = &s->frames[s->stack_frames[st->first + i]];
            fputs(i ? ", {'name': " : "{'name': ", fp);
            py_repr_str(fp, cmh_str(s, f->name));
            fputs(", 'filename': ", fp);
            py_repr_str(fp, cmh_str(s, f->filename));
            fprintf(fp, ", 'line': %" PRId64 "}", f->line);
        }
        fputc(']', fp);
    }
    if (pt_mark) {
        fputs(", 'name': ", fp);
        py_repr_str(fp, cmh_str(s, cmh_entry_name(s, e)));
        fputs("}\n", fp);
        return;
    }
    if (unknown) {
        fputs("}\n", fp);
        return;
    }
    /* the keys our pickle adds (pickle_side_write.c), which the script prints with the rest */
    if (e->flags & CMH_EF_IMPLIED) fputs(", 'cmh_implied': True", fp);
    else if ((e->flags & CMH_EF_WHOLE_BLOCK) || e->kind != CMH_KIND_DEVICE)
        fprintf(fp, ", 'cmh_code': %d", e->action | (e->flags & CMH_EF_WHOLE_BLOCK) << 4 | (e->kind & 7) << 5);
    if (!(e->flags & CMH_EF_IMPLIED) && cmh_entry_requested(s, e) != cmh_entry_size(s, e)) fprintf(fp, ", 'cmh_requested': %" PRId64, (int64_t)cmh_entry_requested(s, e));
    fputs("}\n", fp);
}

/* address -> the number of the script's name for it (oatab.h; address 0 has a slot of its own) */
typedef struct name_slot {
    uint64_t addr;
    uint64_t name;
} name_slot;

typedef struct names {
    cmh_oatab t;
    name_slot zero;
    int has_zero, nomem;
} names;

static name_slot *names_get(names *t, uint64_t addr, int create)
{
    if (!addr) {
        if (create) t->has_zero = 1;
        return t->has_zero ? &t->zero : NULL;
    }
    name_slot *ns = create ? cmh_oa_get(&t->t, addr, NULL) : cmh_oa_find(&t->t, addr);
    if (create && !ns) t->nomem = 1;
    return ns;
}

static void names_init(names *t)
{
    memset(t, 0, sizeof *t);
    cmh_oa_init(&t->t, sizeof(name_slot));
}

typedef struct interval {
    uint64_t name, addr, size;
} interval;

/*
 * "The first of these intervals, in their order, that holds an address", for any address, in
 * O(log n): the script's segment lookups scan every interval in order, which is quadratic over a
 * long trace.  The endpoints cut the line into slots; painting the intervals in order, each slot
 * keeps the first that covers it (a skip list of unpainted slots makes every slot painted once).
 */
typedef struct first_cover {
    uint64_t *cut;  /* sorted distinct endpoints */
    uint32_t *slot; /* per slot [cut[j], cut[j+1]): the first interval's index, or UINT32_MAX */
    size_t ncut;
} first_cover;

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* the first index whose value is >= x (n if none); without branches on the values, which
 * `trace` calls for every alloc and whose outcome no predictor guesses */
static size_t lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
    if (!n) return 0;
    const uint64_t *b = v;
    while (n > 1) {
        size_t half = n / 2;
        b = b[half] < x ? b + half : b;
        n -= half;
    }
    return (size_t)(b - v) + (*b < x);
}

static void first_cover_free(first_cover *fc)
{
    free(fc->cut);
    free(fc->slot);
    memset(fc, 0, sizeof *fc);
}

static uint64_t iv_end(uint64_t addr, uint64_t size) { return size > UINT64_MAX - addr ? UINT64_MAX : addr + size; }

/* intervals i = 0..n-1 as (addr[i*stride], size[i*stride]) pairs read by get() */
static int first_cover_build(first_cover *fc, size_t n, void (*get)(const void *, size_t, uint64_t *, uint64_t *), const void *ctx)
{
    memset(fc, 0, sizeof *fc);
    if (!n) return 0;
    fc->cut = malloc(2 * n * sizeof *fc->cut);
    size_t *next = NULL;
    if (!fc->cut) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a, z;
        get(ctx, i, &a, &z);
        if (!z) continue;
        fc->cut[m++] = a;
        fc->cut[m++] = iv_end(a, z);
    }
    qsort(fc->cut, m, sizeof *fc->cut, u64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (!u || fc->cut[u - 1] != fc->cut[i]) fc->cut[u++] = fc->cut[i];
    fc->ncut = u;
    size_t nslot = u ? u - 1 : 0;
    fc->slot = malloc((nslot + 1) * sizeof *fc->slot);
    next = malloc((nslot + 1) * sizeof *next);
    if (!fc->slot || !next) {
        free(next);
        first_cover_free(fc);
        return -1;
    }
    for (size_t j = 0; j <= nslot; j++) fc->slot[j] = UINT32_MAX, next[j] = j;
    for (size_t i = 0; i < n; i++) {
        uint64_t a, z;
        get(ctx, i, &a, &z);
        if (!z) continue;
        size_t lo = lower_bound(fc->cut, u, a), hi = lower_bound(fc->cut, u, iv_end(a, z));
        for (size_t j = lo; j < hi;) {
            size_t r = j; /* the first unpainted slot at or after j (path-halving find) */
            while (next[r] != r) next[r] = next[next[r]], r = next[r];
            if (r >= hi) break;
            fc->slot[r] = (uint32_t)i;
            next[r] = r + 1;
            j = r + 1;
        }
    }
    free(next);
    return 0;
}

/* the first interval holding addr, or UINT32_MAX */
static uint32_t first_cover_find(const first_cover *fc, uint64_t addr)
{
    if (fc->ncut < 2 || addr < fc->cut[0]) return UINT32_MAX;
    size_t j = lower_bound(fc->cut, fc->ncut, addr);
    if (j == fc->ncut || fc->cut[j] != addr) j--; /* the slot that starts at or before addr */
    return j + 1 < fc->ncut ? fc->slot[j] : UINT32_MAX;
}

typedef struct trace_ctx {
    const cmh_snapshot *s;
    const cmh_trace *tr;
    const uint32_t *seg_alloc; /* the trace's segment_alloc entries, in order */
} trace_ctx;

static void get_seg_alloc(const void *ctx, size_t i, uint64_t *addr, uint64_t *size)
{
    const trace_ctx *c = ctx;
    const cmh_entry *e = &c->s->entries[c->seg_alloc[i]];
    *addr = cmh_entry_addr(c->s, e), *size = cmh_entry_size(c->s, e);
}

static void get_final_segment(const void *ctx, size_t i, uint64_t *addr, uint64_t *size)
{
    const trace_ctx *c = ctx;
    const cmh_segment *g = &c->s->segments[i];
    *addr = g->addr, *size = calc_active(c->s, g); /* _memory_viz.py matches allocated_size */
}

/* Entries with no PyTorch action (a pool's sample, a mark) are not in PyTorch's trace: skipped;
 * but a PyTorch snapshot's marks were its own annotation entries (CMH_PT_MARKS_INLINE). */
/* (a retried OOM of the memviz shape is not one either: its pickle keeps it aside, CMH_EF_RETRIED) */
static int pytorch_action(const cmh_snapshot *s, const cmh_entry *e)
{
    int a = e->action;
    return a != CMH_ACT_POOL_SAMPLE && (a != CMH_ACT_MARK || CMH_PT_MARKS_INLINE(s) || CMH_ENTRY_UNKNOWN_ACTION(e)) &&
           !cmh_entry_retried_oom(e);
}


int cmh_print_trace(const cmh_snapshot *s, int device, FILE *fp)
{
    tout *o = malloc(sizeof *o);
    if (!o) return CMH_ENOMEM;
    o->fp = fp;
    o->n = 0;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        if (device != CMH_ALL_DEVICES && tr->device != device) continue;
        const cmh_entry *ents = s->entries + tr->first_entry;
        /* one pass: the entries shown, and the segment_alloc ones for the interval lookups (a
           segment_alloc is looked at only once it has been seen) */
        uint32_t *seg_alloc = malloc(((size_t)tr->nentries + 1) * sizeof *seg_alloc);
        if (!seg_alloc) {
            free(o);
            return CMH_ENOMEM;
        }
        uint32_t shown = 0;
        size_t nsa = 0;
        for (uint32_t i = 0; i < tr->nentries; i++) {
            int a = ents[i].action;
            shown += pytorch_action(s, &ents[i]);
            seg_alloc[nsa] = tr->first_entry + i;
            nsa += a == CMH_ACT_SEGMENT_ALLOC;
        }
        if (!shown) {
            free(seg_alloc);
            continue;
        }
        char *p = to_line(o);
        p = PUT_LIT(p, "Device ");
        if (tr->device < 0) *p++ = '-';
        p = put_u64(p, tr->device < 0 ? (uint64_t)-(int64_t)tr->device : (uint64_t)tr->device);
        p = PUT_LIT(p, " ----------------\n");
        p = put_u64(p, shown);
        p = PUT_LIT(p, " entries\n");
        to_end(o, p);
        names allocs, segs;
        names_init(&allocs);
        names_init(&segs);
        int nomem = 0;
        interval *iv = NULL;
        size_t niv = 0, civ = 0;
        uint64_t next_name = 0;
        first_cover fc_trace, fc_final;
        memset(&fc_final, 0, sizeof fc_final); /* when fc_trace fails, fc_final is not built */
        trace_ctx c = {s, tr, seg_alloc};
        if (first_cover_build(&fc_trace, nsa, get_seg_alloc, &c) || first_cover_build(&fc_final, s->nsegments, get_final_segment, &c))
            nomem = 1;
        int64_t total = 0; /* the fixed TOTAL MEM: bytes still allocated at the end of the trace */
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &ents[i];
            /* read once: the line's bytes may alias the tables they come from, for the compiler */
            const uint64_t e_addr = cmh_entry_addr(s, e), e_size = cmh_entry_size(s, e);
            name_slot *ns;
            p = to_line(o);
            switch (e->action) {
            case CMH_ACT_ALLOC: {
                uint64_t nm = next_name++, seg_addr = 0;
                p = put_name(p, nm);
                p = PUT_LIT(p, " = ");
                /* the first segment_alloc so far that holds it (the first of all, if that one is
                   already seen), else the first final segment */
                uint32_t k = first_cover_find(&fc_trace, e_addr);
                if (k != UINT32_MAX && k < niv) {
                    p = put_name(p, iv[k].name);
                    seg_addr = iv[k].addr;
                } else if ((k = first_cover_find(&fc_final, e_addr)) != UINT32_MAX) {
                    p = PUT_LIT(p, "seg_");
                    p = put_u64(p, k);
                    seg_addr = s->segments[k].addr;
                } else {
                    p = PUT_LIT(p, "MEM");
                }
                *p++ = '[';
                p = put_u64(p, e_addr - seg_addr);
                *p++ = ':';
                p = put_size(p, e_size);
                p = PUT_LIT(p, "]\n");
                if ((ns = names_get(&allocs, e_addr, 1))) ns->name = nm;
                total = (int64_t)((uint64_t)total + e_size); /* wraps, never UB: sizes are whatever a file says */
                break;
            }
            case CMH_ACT_FREE_REQUESTED:
            case CMH_ACT_FREE_COMPLETED:
                ns = names_get(&allocs, e_addr, 0);
                if (e->action == CMH_ACT_FREE_REQUESTED) {
                    p = PUT_LIT(p, "del ");
                    p = ns ? put_name(p, ns->name) : put_u64(p, e_addr);
                    p = PUT_LIT(p, " # ");
                } else {
                    total = (int64_t)((uint64_t)total - e_size);
                    p = PUT_LIT(p, "# free completed for ");
                    p = ns ? put_name(p, ns->name) : put_u64(p, e_addr);
                    *p++ = ' ';
                }
                p = put_size(p, e_size);
                *p++ = '\n';
                break;
            case CMH_ACT_SEGMENT_ALLOC: {
                uint64_t nm = next_name++;
                p = put_name(p, nm);
                p = PUT_LIT(p, " = cudaMalloc(");
                p = put_u64(p, e_addr);
                p = PUT_LIT(p, ", ");
                p = put_size(p, e_size);
                p = PUT_LIT(p, ")\n");
                if (niv == civ) {
                    size_t nc = civ ? civ * 2 : 64;
                    interval *ni = realloc(iv, nc * sizeof *ni);
                    if (ni) iv = ni, civ = nc;
                    else nomem = 1;
                }
                if (niv < civ) iv[niv++] = (interval){nm, e_addr, e_size};
                if ((ns = names_get(&segs, e_addr, 1))) ns->name = nm;
                break;
            }
            case CMH_ACT_SEGMENT_FREE:
                ns = names_get(&segs, e_addr, 0);
                p = PUT_LIT(p, "cudaFree(");
                p = ns ? put_name(p, ns->name) : put_u64(p, e_addr);
                p = PUT_LIT(p, ") # ");
                p = put_size(p, e_size);
                *p++ = '\n';
                break;
            case CMH_ACT_OOM:
                if (cmh_entry_retried_oom(e)) break; /* not in the pickle's trace (pytorch_action) */
                p = PUT_LIT(p, "raise OutOfMemoryError() # ");
                p = put_size(p, e_size);
                p = PUT_LIT(p, " requested, ");
                if (e_addr == CMH_DEVICE_FREE_UNKNOWN) { /* no device_free in the entry (PyTorch's script would stop here) */
                    p = PUT_LIT(p, "device free not known\n");
                    break;
                }
                p = put_size(p, e_addr);
                p = PUT_LIT(p, " free in CUDA\n");
                break;
            default:
                if (!pytorch_action(s, e)) break; /* not in PyTorch's trace: nothing */
                to_flush(o); /* rare: printf is fine for it */
                py_repr_entry(fp, s, e);
                p = o->b;
                break;
            }
            to_end(o, p);
        }
        p = to_line(o);
        p = PUT_LIT(p, "TOTAL MEM: ");
        p = put_bytes(p, total < 0 ? (uint64_t)0 - (uint64_t)total : (uint64_t)total, total < 0);
        *p++ = '\n';
        to_end(o, p);
        cmh_oa_free(&allocs.t);
        cmh_oa_free(&segs.t);
        free(iv);
        free(seg_alloc);
        first_cover_free(&fc_trace);
        first_cover_free(&fc_final);
        if (nomem || allocs.nomem || segs.nomem) {
            free(o);
            return CMH_ENOMEM;
        }
    }
    to_flush(o);
    free(o);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}
