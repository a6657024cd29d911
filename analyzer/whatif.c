/*
 * whatif.c - a model of PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp) that
 * replays a trace's requests under any setting (cumemhist/whatif.h; docs/WHATIF.md).
 *
 * What it follows, as the allocator does it:
 *   - the small (<= 1 MiB) and large pools, per stream: a free block serves only its stream;
 *   - rounding (pt_rules.c: 512 B steps, roundup_power2_divisions), the segment sizes cudaMalloc
 *     is asked for (2 MiB, 20 MiB, or the request rounded to 2 MiB);
 *   - best fit by (stream, size, address), splitting when the remainder is worth keeping,
 *     merging a freed block with free neighbours of the same segment;
 *   - max_split_size: no oversize block for a small request, an oversize one only within 20 MiB
 *     of the request, oversize blocks never split, freed first on an OOM;
 *   - expandable segments: one virtual segment per stream and pool, grown by mapping 2 MiB
 *     (small) or 20 MiB (large) pages at its end, a free block that cannot grow preferred;
 *   - on a failed cudaMalloc: free cached oversize blocks, then every cached block
 *     (empty_cache), then try again; and the program's own empty_cache() where the trace shows
 *     one (a burst of segment frees);
 *   - garbage_collection_threshold: cached whole segments freed, oldest first, while reserved
 *     memory is above the threshold of the capacity;
 *   - record_stream: memory is reusable at free_completed, not free_requested.
 * Pool rules shared with the replay come from pt_rules.c, not copied.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"
#include "cumemhist/whatif.h"
#include "grow.h"
#include "oatab.h"
#include "pt_rules.h"

#define SMALL 0 /* the model's pools, as indexes (CMH_POOL_* toward pt_rules.c) */
#define LARGE 1
#define PAGE_SMALL CMH_PT_SMALL_BUFFER /* an expandable segment's page, small pool */
#define PAGE_LARGE CMH_PT_LARGE_BUFFER /* ... large pool */
#define VIRTUAL_SIZE (1ull << 40)      /* an expandable segment's address range */

#include "whatif_tree.h"

typedef struct ev {
    uint8_t action;
    uint64_t size;
} ev;

typedef struct live_slot {
    uint64_t addr; /* the trace's address of the block */
    wblk *b;
    int unmade; /* b NULL: the model ran out making it, where the program had it (its free is no unknown one) */
} live_slot;

typedef struct wmodel {
    const cmh_whatif_conf *c;
    cmh_pt_rules rules;
    uint64_t capacity;
    /* what the device holds beside the model's segments, against the capacity: the trace's plain
     * driver allocations live now (whole-block: no allocator asked for them), and what no entry
     * made (the CUDA context, other processes: cmh_whatif_cap's outside) */
    uint64_t whole, outside;
    btree freeb[2];    /* free mapped blocks by (stream, size, address) */
    btree unmapped[2]; /* unmapped ranges of expandable segments by (stream, address) */
    wpools pools;      /* the private pools (whatif_pools.c): their free blocks apart */
    uint32_t rng;      /* the treaps' priorities (xorshift; the shape never changes a result) */
    wseg **segs;
    uint32_t nsegs, csegs;
    uint64_t next_addr, reserved, allocated, tick;
    cmh_oatab live;
    cmh_whatif_result *r;
    ev *evs;
    uint32_t nevs, cevs;
    int compare, nomem;
} wmodel;

/* the free blocks of a pool (owner 0: the default one), small or large */
static btree *free_tree(wmodel *m, uint32_t owner, int pool)
{
    return owner && owner <= m->pools.n ? &m->pools.privs[owner - 1]->freeb[pool] : &m->freeb[pool];
}

#define PUT_FREE(m, b) wt_put(&(m)->rng, free_tree((m), (b)->seg->owner, (b)->pool), (b))
#define TAKE_FREE(m, b) wt_take(free_tree((m), (b)->seg->owner, (b)->pool), (b))
#define PUT_UNMAPPED(m, b) wt_put(&(m)->rng, &(m)->unmapped[(b)->pool], (b))
#define TAKE_UNMAPPED(m, b) wt_take(&(m)->unmapped[(b)->pool], (b))

/* ---- events, blocks, segments ---- */

static void emit(wmodel *m, int action, uint64_t size)
{
    cmh_whatif_result *r = m->r;
    if (action == CMH_ACT_SEGMENT_ALLOC) r->segment_allocs++;
    else if (action == CMH_ACT_SEGMENT_FREE) r->segment_frees++;
    else if (action == CMH_ACT_SEGMENT_MAP) r->segment_maps++;
    else r->segment_unmaps++;
    if (!m->compare) return;
    if (CMH_GROW(m->evs, m->cevs, (uint64_t)m->nevs + 1, 256)) {
        m->nomem = 1;
        return;
    }
    m->evs[m->nevs++] = (ev){(uint8_t)action, size};
}

static wblk *new_block(wmodel *m, wseg *g, uint64_t addr, uint64_t size, int mapped)
{
    wblk *b = calloc(1, sizeof *b);
    if (!b) {
        m->nomem = 1;
        return NULL;
    }
    b->addr = addr, b->size = size, b->stream = g->stream, b->seg = g, b->pool = g->pool, b->mapped = (uint8_t)mapped;
    if (addr == g->addr) g->first = b;
    return b;
}

static wseg *new_segment(wmodel *m, int pool, int64_t stream, uint64_t size, int expandable)
{
    if (CMH_GROW(m->segs, m->csegs, (uint64_t)m->nsegs + 1, 64)) {
        m->nomem = 1;
        return NULL;
    }
    wseg *g = calloc(1, sizeof *g);
    if (!g) {
        m->nomem = 1;
        return NULL;
    }
    g->addr = m->next_addr, g->size = size, g->stream = stream, g->pool = (uint8_t)pool, g->expandable = (uint8_t)expandable;
    m->next_addr += (size + PAGE_LARGE - 1) / PAGE_LARGE * PAGE_LARGE + PAGE_LARGE; /* apart, as cudaMalloc's are */
    m->segs[m->nsegs++] = g;
    return g;
}

/* A whole free segment back to the driver. */
static void release_segment(wmodel *m, wblk *b)
{
    wseg *g = b->seg;
    TAKE_FREE(m, b);
    m->reserved -= g->size;
    emit(m, CMH_ACT_SEGMENT_FREE, g->size);
    for (uint32_t i = 0; i < m->nsegs; i++)
        if (m->segs[i] == g) {
            m->segs[i] = m->segs[--m->nsegs];
            break;
        }
    free(g);
    free(b);
}

static int allocatable(const wblk *b) { return b && !b->allocated; }

/* Merge b's free neighbours of the same mapping into it (they leave their set); b is in none. */
static wblk *merge(wmodel *m, wblk *b)
{
    wblk *p = b->prev, *n = b->next;
    if (p && !p->allocated && p->mapped == b->mapped) {
        if (p->mapped) TAKE_FREE(m, p);
        else TAKE_UNMAPPED(m, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        free(b);
        b = p;
    }
    if (n && !n->allocated && n->mapped == b->mapped) {
        if (n->mapped) TAKE_FREE(m, n);
        else TAKE_UNMAPPED(m, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        free(n);
    }
    return b;
}

/* Cut b (in no set) at size: the rest a new block after it, with b's mapping. */
static wblk *cut(wmodel *m, wblk *b, uint64_t size)
{
    wblk *rest = new_block(m, b->seg, b->addr + size, b->size - size, b->mapped);
    if (!rest) return NULL;
    rest->prev = b, rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    return rest;
}

/* ---- expandable segments ---- */

static uint64_t page_of(int pool) { return pool == SMALL ? PAGE_SMALL : PAGE_LARGE; }

/* Whether want more bytes of segments would pass the capacity, beside what the device holds
 * apart from the model (in unsigned arithmetic, saturating: a hostile file's sizes). */
static int over_capacity(const wmodel *m, uint64_t want)
{
    if (!m->capacity) return 0;
    uint64_t used = m->reserved, add[3] = {m->whole, m->outside, want};
    for (int k = 0; k < 3; k++) used = used > UINT64_MAX - add[k] ? UINT64_MAX : used + add[k];
    return used > m->capacity;
}

/* Map the first `size` bytes (rounded to pages) of unmapped block u; the new memory joins the
 * free block before it.  The mapped free block, in the free set; NULL at the capacity. */
static wblk *map_block(wmodel *m, wblk *u, uint64_t size)
{
    uint64_t pg = page_of(u->pool), want = (size + pg - 1) / pg * pg;
    if (want > u->size) want = u->size;
    if (over_capacity(m, want)) return NULL;
    TAKE_UNMAPPED(m, u);
    if (want < u->size) {
        wblk *rest = cut(m, u, want);
        if (!rest) return NULL;
        PUT_UNMAPPED(m, rest);
    }
    u->mapped = 1;
    m->reserved += want;
    emit(m, CMH_ACT_SEGMENT_MAP, want);
    u = merge(m, u);
    u->freed_at = m->tick;
    PUT_FREE(m, u);
    return u;
}

/* Enough free or unmapped room from b on, walking the segment? */
static int room_from(const wblk *b, uint64_t size)
{
    uint64_t bytes = 0;
    for (; bytes < size && allocatable(b); b = b->next) bytes += b->size;
    return bytes >= size;
}

static wblk *expandable_block(wmodel *m, int pool, int64_t stream, uint64_t size)
{
    btree *u = &m->unmapped[pool];
    wblk *c = NULL;
    for (wblk *y = wt_lower(u, stream, 0, 0); y && y->stream == stream && !c; y = wt_next(y)) {
        wblk *x = y;
        if (allocatable(x->prev)) x = x->prev; /* a free block just before the unmapped range counts */
        if (room_from(x, size)) c = x;
    }
    if (!c) {
        wseg *g = new_segment(m, pool, stream, VIRTUAL_SIZE, 1);
        if (!g || !(c = new_block(m, g, g->addr, g->size, 0))) return NULL;
        PUT_UNMAPPED(m, c);
    }
    if (!c->mapped && !(c = map_block(m, c, c->size < size ? c->size : size))) return NULL;
    while (c->size < size) {
        wblk *n = c->next;
        uint64_t need = size - c->size;
        if (!n || n->mapped || !(c = map_block(m, n, need < n->size ? need : n->size))) return NULL;
    }
    TAKE_FREE(m, c);
    return c;
}

/* Unmap the whole pages inside free block b of an expandable segment. */
static void unmap_free(wmodel *m, wblk *b)
{
    uint64_t pg = page_of(b->pool), base = b->seg->addr;
    uint64_t lo = (b->addr - base + pg - 1) / pg * pg + base, hi = (b->addr + b->size - base) / pg * pg + base;
    if (hi <= lo) return;
    TAKE_FREE(m, b);
    wblk *mid = b;
    if (lo > b->addr) { /* a part page before: stays mapped and free */
        if (!(mid = cut(m, b, lo - b->addr))) return;
        b->freed_at = m->tick;
        PUT_FREE(m, b);
    }
    if (mid->addr + mid->size > hi) { /* and after */
        wblk *tail = cut(m, mid, hi - mid->addr);
        if (!tail) return;
        tail->freed_at = m->tick;
        PUT_FREE(m, tail);
    }
    mid->mapped = 0;
    m->reserved -= mid->size;
    emit(m, CMH_ACT_SEGMENT_UNMAP, mid->size);
    mid = merge(m, mid);
    PUT_UNMAPPED(m, mid);
}

/* ---- the allocator ---- */

/* release_cached_blocks(): every cached block back (empty_cache). */
static void release_cached(wmodel *m)
{
    for (int pool = 0; pool < 2; pool++) {
        btree *f = &m->freeb[pool];
        uint32_t n = 0;
        wblk **all = malloc((f->n ? f->n : 1) * sizeof *all);
        if (!all) {
            m->nomem = 1;
            return;
        }
        for (wblk *x = wt_first(f); x; x = wt_next(x)) all[n++] = x;
        for (uint32_t i = 0; i < n; i++) {
            wblk *b = all[i];
            if (b->seg->expandable) unmap_free(m, b);
            else if (!b->prev && !b->next) release_segment(m, b);
        }
        free(all);
    }
}

/* release_available_cached_blocks(): with max_split_size, cached oversize blocks first. */
static int release_oversize(wmodel *m, int64_t stream, uint64_t size)
{
    uint64_t ms = m->rules.max_split;
    if (!ms) return 0;
    btree *f = &m->freeb[LARGE];
    uint64_t key = size < ms ? ms : size;
    wblk *x = wt_lower(f, stream, key, 0);
    if (x && x->stream == stream && !x->seg->expandable && !x->prev && !x->next) {
        release_segment(m, x);
        return 1;
    }
    uint64_t released = 0; /* no single one: several, the largest first */
    for (wblk *p = x ? wt_prev(x) : wt_last(f); released < key && p;) {
        wblk *b = p;
        if (b->size < ms || b->stream != stream) break;
        p = wt_prev(b); /* before b leaves the index */
        if (!b->seg->expandable && !b->prev && !b->next) {
            released += b->size;
            release_segment(m, b);
        }
    }
    return released >= key;
}

/* garbage_collect_cached_blocks(): above the threshold of the capacity, whole cached segments of
 * the large pool go, those free the longest first (at least the average age each round). */
static void collect_garbage(wmodel *m)
{
    if (m->c->gc_threshold <= 0 || !m->capacity) return;
    uint64_t limit = (uint64_t)(m->c->gc_threshold * (double)m->capacity);
    if (m->reserved <= limit) return;
    uint64_t target = m->reserved - limit, reclaimed = 0;
    for (int freed = 1; freed && reclaimed < target;) {
        btree *f = &m->freeb[LARGE];
        double total = 0;
        uint32_t count = 0;
        for (wblk *x = wt_first(f); x; x = wt_next(x))
            if (!x->prev && !x->next && !x->seg->expandable) total += (double)(m->tick - x->freed_at), count++;
        if (!count) return;
        double avg = total / count;
        freed = 0;
        for (wblk *b = wt_first(f), *nx; b && reclaimed < target; b = nx) {
            nx = wt_next(b); /* before b leaves the index */
            if (!b->prev && !b->next && !b->seg->expandable && (double)(m->tick - b->freed_at) >= avg) {
                reclaimed += b->size;
                release_segment(m, b);
                freed = 1;
            }
        }
    }
}

static uint64_t expand_size(const wblk *b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); }

static wblk *free_block_for(wmodel *m, uint32_t owner, int pool, int64_t stream, uint64_t size)
{
    btree *f = free_tree(m, owner, pool);
    wblk *b = wt_lower(f, stream, size, 0), *nx;
    if (!b || b->stream != stream) return NULL;
    if (b->seg->expandable) /* one that cannot grow, if as good */
        while ((nx = wt_next(b)) && nx->stream == stream && expand_size(nx) < expand_size(b)) b = nx;
    uint64_t ms = m->rules.max_split;
    if (ms && size < ms && b->size >= ms) return NULL;                    /* no oversize block for a small request */
    if (ms && size >= ms && b->size >= size + CMH_PT_LARGE_BUFFER) return NULL; /* an oversize one, within 20 MiB */
    TAKE_FREE(m, b);
    return b;
}

static wblk *cuda_malloc(wmodel *m, uint32_t owner, int pool, int64_t stream, uint64_t size)
{
    /* a private pool's segments are never expandable ones (the allocator's checkpointing of
     * private pools does not handle them) */
    if (m->c->expandable && !owner) return expandable_block(m, pool, stream, size);
    uint64_t want = cmh_pt_segment_size(size);
    if (over_capacity(m, want)) return NULL;
    wseg *g = new_segment(m, pool, stream, want, 0);
    if (g) g->owner = owner;
    wblk *b = g ? new_block(m, g, g->addr, want, 1) : NULL;
    if (!b) return NULL;
    m->reserved += want;
    emit(m, CMH_ACT_SEGMENT_ALLOC, want);
    return b;
}

/* malloc(): the block for a request, or NULL (out of memory at the capacity). */
/* malloc(): the block for a request of pool owner (0: the default pool), or NULL (out of memory
 * at the capacity).  What is freed to make room is the default pool's cache alone: a private
 * pool keeps its segments while it lives (empty_cache() frees only those of pools already
 * given up), and the model takes every pool to live to the end of the trace. */
static wblk *model_malloc(wmodel *m, uint64_t request, int64_t stream, uint32_t owner)
{
    m->tick++;
    uint64_t size = cmh_pt_round(&m->rules, request);
    int pool = size <= CMH_PT_SMALL_SIZE ? SMALL : LARGE;
    wblk *b = free_block_for(m, owner, pool, stream, size);
    if (!b) {
        collect_garbage(m);
        b = cuda_malloc(m, owner, pool, stream, size);
        if (!b && release_oversize(m, stream, size)) b = cuda_malloc(m, owner, pool, stream, size);
        if (!b) {
            release_cached(m);
            b = cuda_malloc(m, owner, pool, stream, size);
        }
        if (!b) return NULL;
    }
    if (cmh_pt_should_split(&m->rules, pool == SMALL ? CMH_POOL_SMALL : CMH_POOL_LARGE, m->c->expandable, size, b->size - size)) {
        wblk *rest = cut(m, b, size);
        if (rest) {
            rest->freed_at = m->tick;
            PUT_FREE(m, rest);
        }
    }
    b->allocated = 1;
    m->allocated += b->size;
    return b;
}

static void model_free(wmodel *m, wblk *b)
{
    b->allocated = 0;
    m->allocated -= b->size;
    b = merge(m, b);
    b->freed_at = m->tick;
    PUT_FREE(m, b);
}

/* ---- settings ---- */

void cmh_whatif_conf_recorded(const cmh_snapshot *s, cmh_whatif_conf *c)
{
    memset(c, 0, sizeof *c);
    cmh_pt_rules r;
    cmh_pt_rules_from_snapshot(s, &r);
    c->max_split = r.max_split;
    memcpy(c->div, r.div, sizeof c->div);
    c->pad = r.pad;
    const char *e = cmh_pt_setting(s, "expandable_segments"), *g = cmh_pt_setting(s, "garbage_collection_threshold");
    c->expandable = e && (!strcmp(e, "True") || !strcmp(e, "true") || !strcmp(e, "1"));
    /* a snapshot that does not say (older PyTorch, other backends) shows it by what it holds */
    for (uint32_t i = 0; !e && i < s->nsegments && !c->expandable; i++) c->expandable = (s->segments[i].flags & CMH_SEG_EXPANDABLE) != 0;
    for (uint32_t i = 0; !e && i < s->nentries && !c->expandable; i++)
        c->expandable = s->entries[i].action == CMH_ACT_SEGMENT_MAP || s->entries[i].action == CMH_ACT_SEGMENT_UNMAP;
    double t = g ? atof(g) : 0.0;
    c->gc_threshold = t > 0 && t < 1 ? t : 0.0; /* what PyTorch accepts; anything else (a file's "nan") is off */
}

static int bad(char *err, size_t n, const char *fmt, const char *a, const char *b)
{
    snprintf(err, n, fmt, a, b);
    return CMH_EINVAL;
}

int cmh_whatif_conf_set(cmh_whatif_conf *c, const char *key, const char *value, char *err, size_t errlen)
{
    char *end;
    if (!strcmp(key, "expandable_segments")) {
        if (!strcasecmp(value, "true") || !strcmp(value, "1")) c->expandable = 1;
        else if (!strcasecmp(value, "false") || !strcmp(value, "0")) c->expandable = 0;
        else return bad(err, errlen, "%s: '%s' is not True or False", key, value);
    } else if (!strcmp(key, "max_split_size_mb")) {
        double mb = strtod(value, &end);
        if (*end || !(mb >= 0 && mb < 1e12)) return bad(err, errlen, "%s: '%s' is not a number of MiB", key, value);
        if (mb > 0 && mb <= 20) return bad(err, errlen, "%s: %s MiB: PyTorch wants more than 20 (kLargeBuffer)", key, value);
        c->max_split = mb > 0 ? (uint64_t)(mb * 1048576.0) : 0;
    } else if (!strcmp(key, "garbage_collection_threshold")) {
        double t = strtod(value, &end);
        if (*end || !(t > 0 && t < 1)) return bad(err, errlen, "%s: '%s' is not a fraction between 0 and 1", key, value);
        c->gc_threshold = t;
    } else if (!strcmp(key, "roundup_power2_divisions")) {
        if (value[0] != '[') { /* one value for every size */
            long d = strtol(value, &end, 10);
            if (*end || d < 0 || (d & (d - 1))) return bad(err, errlen, "%s: '%s' is not a power of two", key, value);
            for (int i = 0; i < 16; i++) c->div[i] = (int)d;
        } else { /* [256:1,512:2,>:8]: per size in MiB up to it, '>' for the rest */
            int last = -1;
            for (const char *p = value + 1; *p && *p != ']';) {
                long mib = -1;
                if (*p == '>') p++;
                else mib = strtol(p, &end, 10), p = end;
                if (*p != ':') return bad(err, errlen, "%s: '%s' is not [MiB:divisions,...]", key, value);
                long d = strtol(p + 1, &end, 10);
                p = end;
                if (d < 0 || (d & (d - 1))) return bad(err, errlen, "%s: '%s' has a division that is not a power of two", key, value);
                int upto = mib < 0 ? 15 : mib > 0 ? 63 - __builtin_clzll((unsigned long long)mib) : 0;
                if (upto > 15) upto = 15;
                for (int i = last + 1; i <= upto; i++) c->div[i] = (int)d;
                last = upto;
                if (*p == ',') p++;
            }
        }
    } else {
        return bad(err, errlen, "%s%s: not a setting the model follows (expandable_segments, max_split_size_mb, "
                                "roundup_power2_divisions, garbage_collection_threshold)", key, "");
    }
    return CMH_OK;
}

int cmh_whatif_conf_parse(cmh_whatif_conf *c, const char *conf, char *err, size_t errlen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", conf);
    /* commas separate settings, except inside [...] */
    char *p = buf;
    while (*p) {
        char *q = p;
        int depth = 0;
        while (*q && (depth || *q != ',')) depth += (*q == '[') - (*q == ']'), q++;
        char save = *q;
        *q = 0;
        char *colon = strchr(p, ':');
        if (!colon) return bad(err, errlen, "'%s' is not KEY:VALUE%s", p, "");
        *colon = 0;
        while (*p == ' ') p++;
        int rc = cmh_whatif_conf_set(c, p, colon + 1, err, errlen);
        if (rc != CMH_OK) return rc;
        if (!save) break;
        p = q + 1;
    }
    return CMH_OK;
}

void cmh_whatif_conf_text(const cmh_whatif_conf *c, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
#define ADD(...) k += (size_t)snprintf(buf + k, k < n ? n - k : 0, __VA_ARGS__)
    if (c->expandable) ADD("%sexpandable_segments:True", k ? "," : "");
    if (c->max_split) ADD("%smax_split_size_mb:%" PRIu64, k ? "," : "", c->max_split >> 20);
    if (c->gc_threshold > 0) ADD("%sgarbage_collection_threshold:%g", k ? "," : "", c->gc_threshold);
    int any = 0, same = 1;
    for (int i = 0; i < 16; i++) any |= c->div[i] != 0, same &= c->div[i] == c->div[0];
    if (any && same) ADD("%sroundup_power2_divisions:%d", k ? "," : "", c->div[0]);
    else if (any) {
        ADD("%sroundup_power2_divisions:[", k ? "," : "");
        for (int i = 0; i < 16; i++) ADD("%s%d:%d", i ? "," : "", 1 << i, c->div[i]);
        ADD("]");
    }
#undef ADD
}

/* ---- the replay ---- */

static int is_free_action(int a) { return a == CMH_ACT_SEGMENT_FREE || a == CMH_ACT_SEGMENT_UNMAP; }

static int cmp_ev(const void *a, const void *b)
{
    const ev *x = a, *y = b;
    return (x->size > y->size) - (x->size < y->size);
}

/* A burst of frees comes in whatever order the allocator walked its sets: sorted by size. */
static void normalize(ev *v, uint32_t n)
{
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        if (is_free_action(v[i].action))
            while (j < n && v[j].action == v[i].action) j++;
        if (j - i > 1) qsort(v + i, j - i, sizeof *v, cmp_ev);
        i = j;
    }
}

static void compare_events(wmodel *m, const cmh_snapshot *s, const cmh_trace *t)
{
    cmh_whatif_result *r = m->r;
    ev *rec = malloc((t->nentries ? t->nentries : 1) * sizeof *rec);
    if (!rec) {
        m->nomem = 1;
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        /* a driver allocation no allocator asked for (whole-block, in a recording) is not the model's to make */
        if (e->action >= CMH_ACT_SEGMENT_ALLOC && e->action <= CMH_ACT_SEGMENT_UNMAP && !(e->flags & CMH_EF_WHOLE_BLOCK))
            rec[n++] = (ev){e->action, cmh_entry_size(s, e)};
    }
    normalize(rec, n);
    normalize(m->evs, m->nevs);
    r->recorded_segment_events = n;
    uint32_t most = n > m->nevs ? n : m->nevs;
    for (uint32_t i = 0; i < most; i++) {
        int same = i < n && i < m->nevs && rec[i].action == m->evs[i].action && rec[i].size == m->evs[i].size;
        if (same) continue;
        if (!r->self_replay_mismatches++) {
            r->first_mismatch_index = i;
            char a[96] = "nothing", b[96] = "nothing";
            if (i < n) snprintf(a, sizeof a, "%s of %" PRIu64 " B", cmh_action_name(rec[i].action), rec[i].size);
            if (i < m->nevs) snprintf(b, sizeof b, "%s of %" PRIu64 " B", cmh_action_name(m->evs[i].action), m->evs[i].size);
            snprintf(r->first_mismatch, sizeof r->first_mismatch, "segment event %u: the trace has %s, the model %s", i, a, b);
        }
    }
    free(rec);
}

static void free_model(wmodel *m)
{
    wp_free(&m->pools);
    for (uint32_t i = 0; i < m->nsegs; i++) free(m->segs[i]);
    free(m->segs);
    free(m->evs);
    cmh_oa_free(&m->live);
}

/* The blocks of the model, each freed once (they are chained per segment from any of them). */
/* Every block, segment by segment from its lowest (a segment's first block lives as long as it:
 * merging keeps the lower of two blocks). */
static void free_blocks(wmodel *m)
{
    for (uint32_t i = 0; i < m->nsegs; i++) {
        /* from the real head: a damaged file's empty block at the segment's address may sit before
         * the one that took over `first` (new_block), still linked to it (the fuzzer's leak) */
        wblk *x = m->segs[i]->first;
        while (x && x->prev) x = x->prev;
        for (wblk *nx; x; x = nx) {
            nx = x->next;
            free(x);
        }
    }
}

/* ---- the state before the first entry (a trace that begins late) ---- */

typedef struct seed {
    wmodel *m;
    const cmh_snapshot *s;
    int device;
    cmh_live_segment *segs;
    uint32_t nsegs, csegs;
    cmh_live_block *blocks;
    uint32_t nblocks, cblocks;
} seed;

static void seed_seg(void *arg, const cmh_live_segment *g)
{
    seed *x = arg;
    if (CMH_GROW(x->segs, x->csegs, (uint64_t)x->nsegs + 1, 64)) x->m->nomem = 1;
    else x->segs[x->nsegs++] = *g;
}

static void seed_block(void *arg, const cmh_live_block *b)
{
    seed *x = arg;
    if (CMH_GROW(x->blocks, x->cblocks, (uint64_t)x->nblocks + 1, 256)) x->m->nomem = 1;
    else x->blocks[x->nblocks++] = *b;
}

static int cmp_lb(const void *a, const void *b)
{
    const cmh_live_block *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* The segment's stream: the final segment at its address says, else the default stream. */
static int64_t stream_of(const cmh_snapshot *s, int device, uint64_t addr)
{
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].device == device && addr >= s->segments[i].addr && addr < s->segments[i].addr + s->segments[i].size)
            return (int64_t)s->segments[i].stream;
    return 0;
}

/* The model starts where the trace does: the segments and live blocks the replay finds before
 * the first entry (none for a trace that starts with the process), at their own addresses. */
static void seed_model(wmodel *m, const cmh_snapshot *s, int device)
{
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) {
        m->nomem = 1;
        return;
    }
    seed x = {m, s, device, NULL, 0, 0, NULL, 0, 0};
    cmh_replay_segments(r, seed_seg, &x);
    cmh_replay_blocks(r, seed_block, &x);
    cmh_replay_free(r);
    if (x.nblocks) qsort(x.blocks, x.nblocks, sizeof *x.blocks, cmp_lb);
    uint32_t k = 0;
    for (uint32_t i = 0; i < x.nsegs && !m->nomem; i++) {
        const cmh_live_segment *ls = &x.segs[i];
        int pool = ls->pool == CMH_POOL_SMALL ? SMALL : LARGE;
        wseg *g = new_segment(m, pool, stream_of(s, device, ls->addr), ls->expandable ? VIRTUAL_SIZE : ls->size, ls->expandable);
        if (!g) break;
        g->owner = wp_final(&m->pools, ls->addr);
        g->addr = ls->addr;
        if (ls->addr + g->size + PAGE_LARGE > m->next_addr) m->next_addr = ls->addr + g->size + 2 * PAGE_LARGE;
        m->reserved += ls->size;
        uint64_t at = ls->addr, end = ls->addr + ls->size;
        wblk *last = NULL;
        while (k < x.nblocks && x.blocks[k].addr < ls->addr) k++;
        for (;;) { /* blocks and the free runs between them */
            int have = k < x.nblocks && x.blocks[k].addr < end;
            uint64_t next = have ? x.blocks[k].addr : end;
            wblk *b = NULL;
            if (next > at) { /* a free run */
                b = new_block(m, g, at, next - at, 1);
                if (!b) break;
                b->prev = last;
                if (last) last->next = b;
                last = b;
                PUT_FREE(m, b);
                at = next;
            }
            if (!have) break;
            uint64_t sz = x.blocks[k].size;
            if (at + sz > end) sz = end - at;
            if (!(b = new_block(m, g, at, sz, 1))) break;
            b->allocated = 1;
            m->allocated += sz;
            b->prev = last;
            if (last) last->next = b;
            last = b;
            live_slot *sl = cmh_oa_get(&m->live, at, NULL);
            if (!sl) m->nomem = 1;
            else sl->b = b;
            at += sz;
            k++;
        }
        if (ls->expandable && !m->nomem) { /* what it may still grow into */
            wblk *u = new_block(m, g, end, ls->addr + VIRTUAL_SIZE - end, 0);
            if (!u) break;
            u->prev = last;
            if (last) last->next = u;
            PUT_UNMAPPED(m, u);
        }
    }
    free(x.segs);
    free(x.blocks);
}

int cmh_whatif_run(const cmh_snapshot *s, int device, const cmh_whatif_conf *conf, uint64_t capacity, int compare,
                   cmh_whatif_result *out)
{
    memset(out, 0, sizeof *out);
    out->peak_reserved_index = out->first_oom_index = out->first_mismatch_index = -1;
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    int has_blocks = 0, has_completed = 0;
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        int a = s->entries[t->first_entry + i].action;
        has_blocks |= a == CMH_ACT_ALLOC;
        has_completed |= a == CMH_ACT_FREE_COMPLETED;
    }
    if (!has_blocks) return CMH_EINVAL;
    wmodel m;
    memset(&m, 0, sizeof m);
    m.c = conf;
    m.rules.max_split = conf->max_split;
    memcpy(m.rules.div, conf->div, sizeof m.rules.div);
    m.rules.pad = conf->pad;
    m.capacity = capacity;
    int total_known = 0; /* (without the device's total, nothing is outside: no replay to find it) */
    for (uint32_t i = 0; i < s->nmeminfo && !total_known; i++) total_known = s->meminfo[i].device == device && s->meminfo[i].total;
    if (capacity && total_known) { /* what the device held that no entry made, at the trace's OOM (0 without one) */
        cmh_whatif_cap k;
        cmh_whatif_capacity_ex(s, device, &k);
        m.outside = k.outside;
    }
    m.r = out;
    m.compare = compare;
    m.next_addr = 1ull << 32;
    for (int p = 0; p < 2; p++) m.freeb[p].f = wt_cmp_size, m.unmapped[p].f = wt_cmp_addr;
    m.rng = 0x9E3779B9u;
    cmh_oa_init(&m.live, sizeof(live_slot));
    if (wp_init(&m.pools, s, device)) m.nomem = 1;
    seed_model(&m, s, device);
    int prev_action = -1;
    int64_t retry_at = -1; /* the OOM entry that is the allocator's retry of a failed one */
    /* each OOM's retry, found in one pass (a retry scan per OOM was quadratic in the OOMs) */
    uint32_t *retry = NULL, nooms = 0;
    for (uint32_t i = 0; i < t->nentries; i++) nooms += s->entries[t->first_entry + i].action == CMH_ACT_OOM;
    if (nooms && (!(retry = malloc((size_t)t->nentries * sizeof *retry)) || cmh_oom_retry_table(s, t, t->nentries, retry) != CMH_OK))
        m.nomem = 1;
    for (uint32_t i = 0; i < t->nentries && !m.nomem && !m.pools.nomem; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        int a = e->action;
        if (e->flags & CMH_EF_WHOLE_BLOCK) { /* a plain driver allocation: room the model cannot have */
            uint64_t z = cmh_entry_size(s, e);
            if (a == CMH_ACT_SEGMENT_ALLOC || a == CMH_ACT_SEGMENT_MAP) m.whole = m.whole > UINT64_MAX - z ? UINT64_MAX : m.whole + z;
            else if (a == CMH_ACT_SEGMENT_FREE || a == CMH_ACT_SEGMENT_UNMAP) m.whole -= z < m.whole ? z : m.whole;
        }
        if (a == CMH_ACT_ALLOC) {
            out->requests++;
            /* read once: the model's writes may alias the snapshot's tables, for the compiler */
            uint64_t addr = cmh_entry_addr(s, e), req = cmh_entry_requested(s, e);
            if (!req) req = cmh_entry_size(s, e);
            uint32_t owner = wp_request(&m.pools, s, e, addr);
            if (owner) out->private_requests++, out->private_bytes += req;
            wblk *b = model_malloc(&m, req, (int64_t)cmh_entry_stream(s, e), owner);
            if (addr) {
                live_slot *sl = cmh_oa_get(&m.live, addr, NULL);
                if (!sl) m.nomem = 1;
                else if (sl->b) model_free(&m, sl->b); /* the trace reused an address it never freed */
                if (sl) sl->b = b, sl->unmade = !b;
            } else if (b) {
                model_free(&m, b);
            }
            if (!b && !out->ooms++)
                out->first_oom_index = i, out->first_oom_time_ns = cmh_entry_time(s, e), out->first_oom_request = req;
        } else if (a == CMH_ACT_FREE_COMPLETED || (a == CMH_ACT_FREE_REQUESTED && !has_completed)) {
            uint64_t addr = cmh_entry_addr(s, e);
            live_slot *sl = addr ? cmh_oa_find(&m.live, addr) : NULL;
            if (sl && !sl->b && sl->unmade) { /* a block the model ran out making: the trace shows it */
                out->unmade_frees++;
                cmh_oa_remove(&m.live, sl);
            } else if (!sl || !sl->b) out->unknown_frees++;
            else {
                model_free(&m, sl->b);
                cmh_oa_remove(&m.live, sl);
            }
        } else if (is_free_action(a)) {
            if (!is_free_action(prev_action)) { /* the program's empty_cache(), or the allocator's own retry */
                out->empty_cache_calls++;
                release_cached(&m);
            }
        } else if (a == CMH_ACT_OOM) { /* the request that failed then: does it fail here? */
            /* the allocator's failed retry asks for the same again: the model, which frees its
             * cache and retries within one request, already answered it at the first OOM */
            int again = (int64_t)i == retry_at;
            if (retry[i] && s->entries[t->first_entry + retry[i]].action == CMH_ACT_OOM) retry_at = retry[i];
            if (!again) {
                wblk *b = model_malloc(&m, cmh_entry_size(s, e), (int64_t)cmh_entry_stream(s, e), wp_request(&m.pools, s, e, 0));
                if (b) model_free(&m, b);
                else if (!out->ooms++) {
                    int64_t seen;
                    out->first_oom_number = cmh_oom_number(s, t, i, &seen);
                    out->first_oom_index = seen >= 0 ? seen : i; /* where `oom` says its number */
                    out->first_oom_time_ns = cmh_entry_time(s, &s->entries[t->first_entry + out->first_oom_index]);
                    out->first_oom_request = cmh_entry_size(s, e);
                }
            }
        }
        prev_action = a;
        if (m.reserved > out->peak_reserved) {
            out->peak_reserved = m.reserved;
            out->peak_reserved_index = i;
        }
        if (m.allocated > out->peak_allocated) { /* the free share then: every row's at the same moment */
            out->peak_allocated = m.allocated;
            out->frag_at_peak = m.reserved ? (double)(m.reserved - m.allocated) / (double)m.reserved : 0.0;
        }
    }
    out->end_reserved = m.reserved;
    out->end_allocated = m.allocated;
    if (m.pools.nomem) m.nomem = 1;
    if (compare && !m.nomem) compare_events(&m, s, t);
    free(retry);
    int rc = m.nomem ? CMH_ENOMEM : CMH_OK;
    free_blocks(&m);
    free_model(&m);
    return rc;
}

int cmh_whatif_capacity_ex(const cmh_snapshot *s, int device, cmh_whatif_cap *k)
{
    memset(k, 0, sizeof *k);
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    /* the OOM `oom` calls #1, from where its request first failed: its failed retries came
     * after the allocator had freed its cache, which the model does within the one request */
    int64_t first;
    if (cmh_oom_first(s, t, &first) < 0) return 0;
    /* the recorded settings, unlimited, up to the OOM: what the model reserves then */
    cmh_snapshot cut = *s;
    cmh_trace ct = *t;
    ct.nentries = (uint32_t)first;
    cut.traces = &ct;
    cut.ntraces = 1;
    cmh_whatif_conf c;
    cmh_whatif_conf_recorded(s, &c);
    cmh_whatif_result r;
    uint64_t model = 0;
    if (cmh_whatif_run(&cut, device, &c, 0, 0, &r) == CMH_OK) model = r.end_reserved;
    /* what the trace had reserved then, every segment (the replay's), and of it the plain driver
     * allocations (whole-block: no allocator above asked for them, the model makes none) */
    uint64_t rec = 0;
    cmh_replay *rp = cmh_replay_new(s, device);
    while (rp && cmh_replay_position(rp) < first - 1 && cmh_replay_step(rp) > 0) {
    }
    if (rp && cmh_replay_status(rp) == CMH_OK && cmh_replay_position(rp) == first - 1)
        rec = (uint64_t)cmh_replay_stats(rp)->reserved_bytes[CMH_POOL_ALL].current;
    cmh_replay_free(rp);
    for (int64_t i = 0; i < first; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (!(e->flags & CMH_EF_WHOLE_BLOCK)) continue;
        uint64_t z = cmh_entry_size(s, e);
        if (e->action == CMH_ACT_SEGMENT_ALLOC || e->action == CMH_ACT_SEGMENT_MAP) k->whole = k->whole > UINT64_MAX - z ? UINT64_MAX : k->whole + z;
        else if (e->action == CMH_ACT_SEGMENT_FREE || e->action == CMH_ACT_SEGMENT_UNMAP) k->whole -= z < k->whole ? z : k->whole;
    }
    if (k->whole > rec) k->whole = rec;
    /* the allocator's room: what the record says it had (the trace's segments but the plain
     * ones), whatever the model makes of the same requests.  Where the model's replay differs,
     * its reserve would misstate the device: a program's own allocator of 48 MiB with 8 MiB free
     * read 'capacity 68.0 MiB' of a 56 MiB device, because PyTorch's rules serving its six 8 MiB
     * blocks reserve 60 MiB; and a PyTorch trace of 20 MiB read 15 (the model's 10 + 5 free).
     * The model's own reserve is kept apart (model), and whether the device could hold it. */
    k->reserved = rec - k->whole;
    k->model = model;
    /* device free not known (a PyTorch OOM entry without device_free): what was reserved, the
     * least the device held, never reserved + UINT64_MAX */
    uint64_t device_free = cmh_entry_addr(s, &s->entries[t->first_entry + first]);
    k->free = device_free == CMH_DEVICE_FREE_UNKNOWN ? 0 : device_free;
    k->free_known = device_free != CMH_DEVICE_FREE_UNKNOWN;
    /* the device: never below what it held then (its plain allocations too: a program that took
     * 15.4 GiB with cuMemAlloc beside its allocator's 640 MiB read 'capacity 648.0 MiB' of a
     * 16 GiB device); its total where the record knows it (cuMemGetInfo), the memory no entry
     * made (the CUDA context, other processes) then outside the model too */
    uint64_t held = k->whole + k->reserved;
    k->capacity = held > UINT64_MAX - k->free ? UINT64_MAX : held + k->free;
    for (uint32_t i = 0; i < s->nmeminfo; i++)
        if (s->meminfo[i].device == device && s->meminfo[i].free <= s->meminfo[i].total && s->meminfo[i].total > k->total)
            k->total = s->meminfo[i].total;
    if (k->total > k->capacity && k->free_known) {
        k->outside = k->total - k->capacity;
        k->capacity = k->total;
    }
    /* the model's replay of the recorded settings up to the OOM, with what it leaves in place: more
     * than the device then is a mismatch of the model, which runs out before the record did */
    uint64_t need = model, add[2] = {k->whole, k->outside};
    for (int j = 0; j < 2; j++) need = need > UINT64_MAX - add[j] ? UINT64_MAX : need + add[j];
    k->model_over = need > k->capacity;
    return 1;
}

int cmh_whatif_oom_match(const cmh_snapshot *s, int device, const cmh_whatif_result *r, int64_t *recorded)
{
    int64_t asked;
    *recorded = cmh_oom_first(s, cmh_snapshot_trace(s, device), &asked);
    if (*recorded < 0) return CMH_WHATIF_OOM_NO_RECORD;
    if (!r->ooms) return CMH_WHATIF_OOM_NONE;
    /* the model's first OOM at an OOM entry is named by the entry `oom` numbers (through the
     * request's failed retries, as cmh_oom_first's is); at a block the program was given, by that */
    if (r->first_oom_index == *recorded) return CMH_WHATIF_OOM_SAME;
    return r->first_oom_index < *recorded ? CMH_WHATIF_OOM_EARLIER : CMH_WHATIF_OOM_LATER;
}

const char *cmh_whatif_oom_match_name(int match)
{
    static const char *const n[] = {"same", "earlier", "later", "none", "no_recorded_oom"};
    return match >= 0 && match <= CMH_WHATIF_OOM_NO_RECORD ? n[match] : "?";
}

uint64_t cmh_whatif_capacity(const cmh_snapshot *s, int device)
{
    cmh_whatif_cap k;
    cmh_whatif_capacity_ex(s, device, &k);
    return k.capacity;
}

/* ---- the usual suspects ---- */

const char *const cmh_whatif_panel[CMH_WHATIF_NPANEL] = {
    "expandable_segments:True", "expandable_segments:False", "max_split_size_mb:128",
    "max_split_size_mb:512", "garbage_collection_threshold:0.8", "roundup_power2_divisions:4"};

int cmh_whatif_avoids(const cmh_snapshot *s, int device, cmh_whatif_panel_result *out)
{
    memset(out, 0, sizeof *out);
    cmh_whatif_capacity_ex(s, device, &out->cap);
    uint64_t capacity = out->cap.capacity;
    if (!capacity) return CMH_EINVAL; /* no OOM on the device: nothing to avoid */
    cmh_whatif_conf rec;
    cmh_whatif_conf_recorded(s, &rec);
    cmh_whatif_result r;
    int rc = cmh_whatif_run(s, device, &rec, capacity, 0, &r);
    if (rc != CMH_OK) return rc;
    /* the recorded OOM, not any: a model that runs out at a request the program was given has
     * left the record's path, and its later rows answer another question (a program's own
     * allocator of 48 MiB on a 56 MiB device: the model's 60 MiB ran out at entry 5, and 'none of
     * the 5 the what-if model tries avoids it' was said of an OOM the record never had) */
    out->match = cmh_whatif_oom_match(s, device, &r, &out->oom_index);
    out->model_oom_index = r.ooms ? r.first_oom_index : -1;
    out->model_oom_request = r.ooms ? r.first_oom_request : 0;
    out->model_oom_number = r.ooms ? r.first_oom_number : 0;
    out->reproduced = out->match == CMH_WHATIF_OOM_SAME; /* else the model cannot judge the others */
    for (int i = 0; i < CMH_WHATIF_NPANEL && out->reproduced; i++) {
        cmh_whatif_conf c = rec;
        char err[256];
        if (cmh_whatif_conf_parse(&c, cmh_whatif_panel[i], err, sizeof err) != CMH_OK || !memcmp(&c, &rec, sizeof c)) continue;
        if ((rc = cmh_whatif_run(s, device, &c, capacity, 0, &r)) != CMH_OK) return rc;
        out->tried |= 1u << i;
        if (!r.ooms) out->avoided |= 1u << i;
    }
    return CMH_OK;
}
