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
 * rounds the double (ties to even on the binary value), so the text stays byte for byte. */
typedef struct tout {
    FILE *fp;
    size_t n;
    char b[1 << 16];
} tout;

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

static inline void to_mem(tout *o, const char *s, size_t len)
{
    if (len > 4096) {
        to_flush(o);
        fwrite(s, 1, len, o->fp);
        return;
    }
    memcpy(to_room(o, len), s, len);
    o->n += len;
}

static inline void to_str(tout *o, const char *s) { to_mem(o, s, strlen(s)); }

static inline void to_u64(tout *o, uint64_t v)
{
    char t[20], *e = t + sizeof t, *p = e;
    do *--p = (char)('0' + v % 10);
    while (v /= 10);
    to_mem(o, p, (size_t)(e - p));
}

/* bytes_fmt of the integer sign * v */
static void to_bytes(tout *o, uint64_t v, int neg)
{
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
    if (v >> 53) { /* beyond a double's integers: the double's own rounding, as the script has it */
        char b[64];
        bytes_fmt(b, sizeof b, neg ? -(double)v : (double)v);
        to_str(o, b);
        return;
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
    if (neg) to_mem(o, "-", 1);
    to_u64(o, q / 10);
    char *p = to_room(o, 8);
    *p++ = '.';
    *p++ = (char)('0' + q % 10);
    o->n += 2;
    to_str(o, units[k]);
    to_mem(o, "B", 1);
}

static inline void to_size(tout *o, uint64_t v) { to_bytes(o, v, 0); }

/* ---- trace ---- */

/* Python's repr() of a str */
static void py_repr_str(FILE *fp, const char *s)
{
    int q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    fputc(q, fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\') fputs("\\\\", fp);
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
    fputs("{'action': ", fp);
    py_repr_str(fp, cmh_action_name(e->action));
    fprintf(fp, ", '%s': %" PRId64 ", 'size': %" PRId64 ", 'stream': %" PRId64, e->action == CMH_ACT_OOM ? "device_free" : "addr",
            (int64_t)e->addr, (int64_t)e->size, (int64_t)cmh_entry_stream(s, e));
    if (s->source != CMH_SRC_PYTORCH || (s->pt_fields & CMH_PT_TIME_US)) fprintf(fp, ", 'time_us': %" PRId64, e->time_ns / 1000);
    if (e->action == CMH_ACT_POOL_SAMPLE) fprintf(fp, ", 'used': %" PRId64, (int64_t)cmh_entry_requested(s, e));
    if (e->action == CMH_ACT_MARK) {
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
    /* the keys our pickle adds (pickle_write.c), which the script prints with the rest */
    if (e->flags & CMH_EF_IMPLIED) fputs(", 'cmh_implied': True", fp);
    else if ((e->flags & CMH_EF_WHOLE_BLOCK) || e->kind != CMH_KIND_DEVICE)
        fprintf(fp, ", 'cmh_code': %d", e->action | (e->flags & CMH_EF_WHOLE_BLOCK) << 4 | (e->kind & 7) << 5);
    if (!(e->flags & CMH_EF_IMPLIED) && cmh_entry_requested(s, e) != e->size) fprintf(fp, ", 'cmh_requested': %" PRId64, (int64_t)cmh_entry_requested(s, e));
    fputs("}\n", fp);
}

/* address -> the script's name for it (oatab.h; address 0 has a slot of its own) */
typedef struct name_slot {
    uint64_t addr;
    char name[24];
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

/* _memory_viz.py's names: a..z, then a1..z1, ... */
static void u64_str(char *p, uint64_t v) /* room for 21 bytes */
{
    char t[20], *e = t + sizeof t, *d = e;
    do *--d = (char)('0' + v % 10);
    while (v /= 10);
    memcpy(p, d, (size_t)(e - d));
    p[e - d] = 0;
}

static void py_name(char *buf, size_t n, uint64_t i)
{
    (void)n; /* 24 bytes: a letter, up to 20 digits, the NUL */
    buf[0] = (char)('a' + i % 26);
    buf[1] = 0;
    if (i / 26) u64_str(buf + 1, i / 26);
}

static void name_copy(char *dst, const char *src) /* both 24-byte name buffers */
{
    size_t n = strlen(src);
    memcpy(dst, src, n + 1);
}

typedef struct interval {
    char name[24];
    uint64_t addr, size;
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

static size_t lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
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
    *addr = e->addr, *size = e->size;
}

static void get_final_segment(const void *ctx, size_t i, uint64_t *addr, uint64_t *size)
{
    const trace_ctx *c = ctx;
    const cmh_segment *g = &c->s->segments[i];
    *addr = g->addr, *size = calc_active(c->s, g); /* _memory_viz.py matches allocated_size */
}

/* Entries with no PyTorch action (a pool's sample, a mark) are not in PyTorch's trace: skipped. */
static int pytorch_action(int a) { return a != CMH_ACT_POOL_SAMPLE && a != CMH_ACT_MARK; }

int cmh_print_trace(const cmh_snapshot *s, int device, FILE *fp)
{
    tout *o = malloc(sizeof *o);
    if (!o) return CMH_ENOMEM;
    o->fp = fp;
    o->n = 0;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        if (device != CMH_ALL_DEVICES && tr->device != device) continue;
        uint32_t shown = 0;
        for (uint32_t i = 0; i < tr->nentries; i++) shown += pytorch_action(s->entries[tr->first_entry + i].action);
        if (!shown) continue;
        to_str(o, "Device ");
        if (tr->device < 0) to_mem(o, "-", 1);
        to_u64(o, tr->device < 0 ? (uint64_t)-(int64_t)tr->device : (uint64_t)tr->device);
        to_str(o, " ----------------\n");
        to_u64(o, shown);
        to_str(o, " entries\n");
        names allocs, segs;
        names_init(&allocs);
        names_init(&segs);
        int nomem = 0;
        interval *iv = NULL;
        size_t niv = 0, civ = 0;
        uint64_t next_name = 0;
        /* the interval lookups, built once: a segment_alloc is looked at only once it has been seen */
        uint32_t *seg_alloc = malloc(((size_t)tr->nentries + 1) * sizeof *seg_alloc);
        size_t nsa = 0;
        first_cover fc_trace, fc_final;
        memset(&fc_trace, 0, sizeof fc_trace);
        memset(&fc_final, 0, sizeof fc_final);
        if (!seg_alloc) nomem = 1;
        else {
            for (uint32_t i = 0; i < tr->nentries; i++)
                if (s->entries[tr->first_entry + i].action == CMH_ACT_SEGMENT_ALLOC) seg_alloc[nsa++] = tr->first_entry + i;
            trace_ctx c = {s, tr, seg_alloc};
            if (first_cover_build(&fc_trace, nsa, get_seg_alloc, &c) || first_cover_build(&fc_final, s->nsegments, get_final_segment, &c))
                nomem = 1;
        }
        int64_t total = 0; /* the fixed TOTAL MEM: bytes still allocated at the end of the trace */
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            char nm[24];
            name_slot *ns;
            if (!pytorch_action(e->action)) continue;
            switch (e->action) {
            case CMH_ACT_ALLOC: {
                py_name(nm, sizeof nm, next_name++);
                const char *seg_name = NULL;
                char segbuf[32];
                uint64_t seg_addr = 0;
                /* the first segment_alloc so far that holds it (the first of all, if that one is
                   already seen), else the first final segment */
                uint32_t k = first_cover_find(&fc_trace, e->addr);
                if (k != UINT32_MAX && k < niv) seg_name = iv[k].name, seg_addr = iv[k].addr;
                else if ((k = first_cover_find(&fc_final, e->addr)) != UINT32_MAX) {
                    memcpy(segbuf, "seg_", 4);
                    u64_str(segbuf + 4, k);
                    seg_name = segbuf;
                    seg_addr = s->segments[k].addr;
                }
                to_str(o, nm);
                to_str(o, " = ");
                to_str(o, seg_name ? seg_name : "MEM");
                to_mem(o, "[", 1);
                to_u64(o, e->addr - seg_addr);
                to_mem(o, ":", 1);
                to_size(o, e->size);
                to_mem(o, "]\n", 2);
                if ((ns = names_get(&allocs, e->addr, 1))) name_copy(ns->name, nm);
                total = (int64_t)((uint64_t)total + e->size); /* wraps, never UB: sizes are whatever a file says */
                break;
            }
            case CMH_ACT_FREE_REQUESTED:
            case CMH_ACT_FREE_COMPLETED:
                ns = names_get(&allocs, e->addr, 0);
                if (ns) name_copy(nm, ns->name);
                if (e->action == CMH_ACT_FREE_REQUESTED) {
                    to_str(o, "del ");
                    if (ns) to_str(o, nm);
                    else to_u64(o, e->addr);
                    to_str(o, " # ");
                } else {
                    total = (int64_t)((uint64_t)total - e->size);
                    to_str(o, "# free completed for ");
                    if (ns) to_str(o, nm);
                    else to_u64(o, e->addr);
                    to_mem(o, " ", 1);
                }
                to_size(o, e->size);
                to_mem(o, "\n", 1);
                break;
            case CMH_ACT_SEGMENT_ALLOC:
                py_name(nm, sizeof nm, next_name++);
                to_str(o, nm);
                to_str(o, " = cudaMalloc(");
                to_u64(o, e->addr);
                to_str(o, ", ");
                to_size(o, e->size);
                to_mem(o, ")\n", 2);
                if (niv == civ) {
                    size_t nc = civ ? civ * 2 : 64;
                    interval *ni = realloc(iv, nc * sizeof *ni);
                    if (ni) iv = ni, civ = nc;
                    else nomem = 1;
                }
                if (niv < civ) {
                    name_copy(iv[niv].name, nm);
                    iv[niv].addr = e->addr;
                    iv[niv].size = e->size;
                    niv++;
                }
                if ((ns = names_get(&segs, e->addr, 1))) name_copy(ns->name, nm);
                break;
            case CMH_ACT_SEGMENT_FREE:
                ns = names_get(&segs, e->addr, 0);
                to_str(o, "cudaFree(");
                if (ns) to_str(o, ns->name);
                else to_u64(o, e->addr);
                to_str(o, ") # ");
                to_size(o, e->size);
                to_mem(o, "\n", 1);
                break;
            case CMH_ACT_OOM:
                to_str(o, "raise OutOfMemoryError() # ");
                to_size(o, e->size);
                to_str(o, " requested, ");
                to_size(o, e->addr);
                to_str(o, " free in CUDA\n");
                break;
            default:
                to_flush(o); /* rare: printf is fine for it */
                py_repr_entry(fp, s, e);
                break;
            }
        }
        to_str(o, "TOTAL MEM: ");
        to_bytes(o, total < 0 ? (uint64_t)0 - (uint64_t)total : (uint64_t)total, total < 0);
        to_mem(o, "\n", 1);
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
