/*
 * live.c - the incremental reader of a running process's flight record (cumemhist/live.h; the
 * format: snapshot/flight_format.h; the one-shot reader it mirrors: recover.c).
 *
 * State kept between refreshes: where each extent was read up to, the final state of the
 * entries applied so far (flight_state.c, with its per-device sums), the stacks, names and
 * modules seen, the latest cuMemGetInfo sample of each device and a window of the trace.  A
 * refresh looks at the header (it may have grown extents), remaps the file when it grew, and
 * walks each unfinished extent from where it stopped.  The state's stack ids are the recorder's
 * (a checkpoint's own, model ids, carry BASE_STACK): they become model stacks only when a
 * snapshot is made, when the modules their PCs belong to are known.
 *
 * Why it stops at an uncommitted record instead of skipping it as recover does: the process is
 * still writing, and the record is most likely just not finished.  Its extent waits for it,
 * unless the process has gone or the record has stayed so for CMH_LIVE_STALL_MS (a writer that
 * cannot finish); then it is counted torn and passed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "crc32c.h"
#include "cumemhist/live.h"
#include "cumemhist/recover.h"
#include "flight_format.h"
#include "flight_state.h"
#include "grow.h"
#include "oatab.h"
#include "registry.h"

#define BASE_STACK 0x80000000u /* a stack id of the checkpoint's model, not the recorder's */
#define DEFAULT_TRACE_CAP (1u << 20) /* an unbounded recording's window, per device */
#define RATE_POINTS 64
#define SEEN_BITS 65536u /* how far an entry can be overtaken in the file and still be read */

_Static_assert(sizeof(cmh_entry_full) == 64, "a trace entry (every field) is one cache line in the window");

typedef struct lstack {
    uint64_t id; /* the key: recorder stack id + 1 */
    uint64_t first;
    uint32_t depth, pad;
} lstack;

typedef struct lname {
    uint64_t id; /* the key: recorder name id + 1 */
    uint64_t off;
    uint32_t len, pad;
} lname;

typedef struct lpyframe {
    uint64_t id; /* the key: recorder Python frame id + 1 */
    uint64_t off; /* file then function, in namebuf */
    uint32_t file_len, name_len;
    int32_t line, pad;
} lpyframe;

/* One device's window: a ring of entries, one cache line each.  A journal entry's stack is the
 * recorder's and a mark's addr its name id; the checkpoint's entries (model ids) were pushed
 * first, so they are the oldest nbase of the window. */
typedef struct ltrace {
    cmh_entry_full *ring;
    uint64_t cap, alloc, head, n; /* cap: the window; alloc: slots made so far; head: the oldest */
    uint64_t nbase;
    uint64_t dropped_out;  /* entries that left the window (or the checkpoint's dropped) */
    uint64_t entries, ooms, last_seq;
    uint64_t *seen; /* SEEN_BITS bits: the sequence numbers (last_seq - SEEN_BITS, last_seq] read */
    int present;
} ltrace;

typedef struct lmod {
    uint64_t base, size;
    char *path, *build_id;
} lmod;

typedef struct rate_pt {
    int64_t ns;
    uint64_t allocated;
} rate_pt;

struct cmh_live {
    char path[4200];
    int fd;
    const unsigned char *map;
    size_t len, maplen; /* the file's size as last seen; the mapping's */
    uint32_t head, version; /* a whole head's bytes (16, or 8 in version 1); the file's version */
    uint64_t trace_cap_asked;
    /* where each extent was read up to; an uncommitted record waited for since stall_ns */
    uint64_t pos[CMH_FLIGHT_EXTENTS];
    int64_t stall_ns[CMH_FLIGHT_EXTENTS];
    uint64_t gen_from; /* extents of older generations are in the checkpoint */
    uint64_t cut[CMH_FLIGHT_SLOTS];
    cmh_fstate st;
    cmh_oatab stacks; /* of lstack */
    uint64_t *pcs;
    uint32_t npcs, cappcs;
    cmh_oatab names; /* of lname */
    cmh_oatab pyframes; /* of lpyframe */
    char *namebuf;
    uint32_t nnamebuf, capnamebuf;
    lmod *mods;
    uint32_t nmods, capmods;
    cmh_meminfo *samples; /* a ring of the latest cuMemGetInfo samples */
    uint32_t nsamples, sample_head;
    cmh_meminfo last_sample[CMH_FLIGHT_SLOTS];
    cmh_annotation *anns;
    uint32_t nanns, capanns;
    ltrace tr[CMH_FLIGHT_SLOTS];
    rate_pt rate[CMH_FLIGHT_SLOTS][RATE_POINTS];
    uint32_t nrate[CMH_FLIGHT_SLOTS];
    cmh_snapshot base;
    int have_base;
    int alive; /* the process still runs (as of this refresh) */
    cmh_live_info info;
    int hwcrc; /* the CPU has SSE4.2's crc32 */
};

#define MAX_SAMPLES 4096
#define MAX_ANNOTATIONS 65536

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int fail(cmh_live *l, char *err, size_t errlen, const char *what, uint64_t at)
{
    snprintf(err, errlen, "%s: %s at byte %llu", l->path, what, (unsigned long long)at);
    return CMH_EFORMAT;
}

static const cmh_flight_header *hdr(const cmh_live *l) { return (const cmh_flight_header *)l->map; }

static int64_t to_ns(const cmh_flight_header *h, int64_t ticks)
{
    if (!ticks) return 0;
    int64_t t0t = h->t0_ticks, t0n = h->t0_ns, t1t = h->t1_ticks, t1n = h->t1_ns;
#if defined(__x86_64__)
    /* The usual case (a tick after the first point, the line rising, the quotient in 64 bits)
     * by one 128/64-bit division instruction: the same quotient as the general way below,
     * whose call into libgcc's 128-bit division was a twentieth of a refresh. */
    if (t1t > t0t && ticks >= t0t && t1n >= t0n && t0n >= 0) {
        uint64_t dt = (uint64_t)t1t - (uint64_t)t0t;
        unsigned __int128 p = (unsigned __int128)((uint64_t)ticks - (uint64_t)t0t) * ((uint64_t)t1n - (uint64_t)t0n);
        uint64_t hi = (uint64_t)(p >> 64), lo = (uint64_t)p, q, r;
        if (hi < dt) {
            __asm__("divq %4" : "=a"(q), "=d"(r) : "a"(lo), "d"(hi), "rm"(dt) : "cc");
            (void)r;
            return q > (uint64_t)(INT64_MAX - t0n) ? INT64_MAX : t0n + (int64_t)q;
        }
    }
#endif
    __int128 dt = (__int128)t1t - t0t, d = (__int128)ticks - t0t, ns;
    if (dt <= 0) ns = t0n + d;
    else ns = t0n + d * ((__int128)t1n - t0n) / dt;
    return ns > INT64_MAX ? INT64_MAX : ns < INT64_MIN ? INT64_MIN : (int64_t)ns;
}

/* ---- the state from scratch (at open, and after a reset) ---- */

static void clear_state(cmh_live *l)
{
    cmh_fstate_free(&l->st);
    cmh_fstate_init(&l->st);
    cmh_oa_free(&l->stacks);
    cmh_oa_free(&l->names);
    cmh_oa_free(&l->pyframes);
    cmh_oa_init(&l->stacks, sizeof(lstack));
    cmh_oa_init(&l->names, sizeof(lname));
    cmh_oa_init(&l->pyframes, sizeof(lpyframe));
    l->npcs = l->nnamebuf = 0;
    for (uint32_t i = 0; i < l->nmods; i++) free(l->mods[i].path), free(l->mods[i].build_id);
    l->nmods = 0;
    l->nsamples = l->sample_head = 0;
    memset(l->last_sample, 0, sizeof l->last_sample);
    l->nanns = 0;
    for (int k = 0; k < CMH_FLIGHT_SLOTS; k++) {
        free(l->tr[k].ring);
        free(l->tr[k].seen);
        memset(&l->tr[k], 0, sizeof l->tr[k]);
    }
    memset(l->pos, 0, sizeof l->pos);
    memset(l->stall_ns, 0, sizeof l->stall_ns);
    memset(l->cut, 0, sizeof l->cut);
    l->gen_from = 0;
    if (l->have_base) cmh_snapshot_free(&l->base);
    l->have_base = 0;
    l->info.checkpoint = 0;
}

/* The window's next slot (the oldest one leaving it when it is full), for the caller to fill;
 * NULL: out of memory.  The entry is written in place, not built aside and copied in. */
static cmh_entry_full *trace_slot_grow(cmh_live *l, int k, int from_base);

/* The steady state inline (a full window: the oldest leaves it), the rest out of line. */
static inline cmh_entry_full *trace_slot(cmh_live *l, int k, int from_base)
{
    ltrace *t = &l->tr[k];
    if (__builtin_expect(!t->cap || t->n != t->alloc || t->alloc != t->cap || from_base || t->nbase, 0)) return trace_slot_grow(l, k, from_base);
    cmh_entry_full *e = &t->ring[t->head];
    if (++t->head == t->alloc) t->head = 0;
    t->dropped_out++;
    return e;
}

static cmh_entry_full *trace_slot_grow(cmh_live *l, int k, int from_base)
{
    ltrace *t = &l->tr[k];
    t->present = 1;
    if (!t->cap) {
        uint64_t max = hdr(l)->max_entries;
        t->cap = l->trace_cap_asked ? l->trace_cap_asked : max ? max : DEFAULT_TRACE_CAP;
        if (max && t->cap > max) t->cap = max;
        if (t->cap > (1u << 24)) t->cap = 1u << 24;
    }
    if (t->n == t->alloc && t->alloc < t->cap) { /* grow, putting the ring in order */
        uint64_t na = t->alloc ? t->alloc * 2 : 1024;
        if (na > t->cap) na = t->cap;
        cmh_entry_full *r = aligned_alloc(64, na * sizeof *r);
        if (!r) return NULL;
        for (uint64_t i = 0; i < t->n; i++) r[i] = t->ring[(t->head + i) % t->alloc];
        free(t->ring);
        t->ring = r, t->alloc = na, t->head = 0;
    }
    if (from_base) t->nbase++;
    if (t->n == t->alloc) { /* full: the oldest leaves the window */
        cmh_entry_full *e = &t->ring[t->head];
        if (++t->head == t->alloc) t->head = 0;
        if (t->nbase) t->nbase--;
        t->dropped_out++;
        return e;
    }
    uint64_t at = t->head + t->n;
    t->n++;
    return &t->ring[at >= t->alloc ? at - t->alloc : at];
}

static int trace_push(cmh_live *l, int k, const cmh_entry_full *e, int from_base)
{
    cmh_entry_full *d = trace_slot(l, k, from_base);
    if (!d) return CMH_ENOMEM;
    *d = *e;
    return CMH_OK;
}

/* The checkpoint as the base: its state, its trace (marked as the base's), its cut. */
static int load_base(cmh_live *l)
{
    const cmh_flight_header *h = hdr(l);
    uint32_t which = __atomic_load_n(&h->ckpt_which, __ATOMIC_ACQUIRE);
    if (which != 1 && which != 2) return CMH_OK;
    char cp[4400], e2[512];
    snprintf(cp, sizeof cp, "%s.ckpt%u.cmh", l->path, which);
    if (cmh_snapshot_load(cp, &l->base, e2, sizeof e2) != CMH_OK) return CMH_OK; /* the journal alone */
    l->have_base = l->info.checkpoint = 1;
    memcpy(l->cut, h->ckpt_cut[which - 1], sizeof l->cut);
    l->gen_from = h->ckpt_gen[which - 1];
    const cmh_snapshot *b = &l->base;
    for (uint32_t i = 0; i < b->nsegments && !l->st.nomem; i++) {
        const cmh_segment *g = &b->segments[i];
        fseg f = {g->addr, g->size, g->stream, {g->pool_id[0], g->pool_id[1]}, g->time_ns, g->stack | BASE_STACK, g->device, g->kind, g->flags, g->pool, 1};
        cmh_fstate_seg_add(&l->st, &f);
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *bl = &b->blocks[g->first_block + k];
            if (bl->state == CMH_BLOCK_INACTIVE) continue;
            cmh_entry_full e = {.addr = bl->addr, .requested = bl->requested, .stack = bl->stack | BASE_STACK, .time_ns = bl->time_ns};
            cmh_fstate_block_put(&l->st, &e, g->device, bl->size, bl->state);
        }
    }
    for (uint32_t t = 0; t < b->ntraces; t++) {
        const cmh_trace *bt = &b->traces[t];
        int k = cmh_fstate_slot(bt->device);
        if (k < 0) continue;
        l->tr[k].dropped_out += bt->dropped;
        l->tr[k].entries += bt->nentries + bt->dropped;
        for (uint64_t i = 0; i < bt->nentries; i++) {
            cmh_entry_full e;
            cmh_entry_get(b, &b->entries[bt->first_entry + i], &e);
            if (e.action == CMH_ACT_OOM) l->tr[k].ooms++;
            if (trace_push(l, k, &e, 1) != CMH_OK) return CMH_ENOMEM;
        }
    }
    for (uint32_t i = 0; i < b->nmeminfo; i++) {
        int k = cmh_fstate_slot(b->meminfo[i].device);
        if (k >= 0 && b->meminfo[i].time_ns >= l->last_sample[k].time_ns) l->last_sample[k] = b->meminfo[i];
    }
    return l->st.nomem ? CMH_ENOMEM : CMH_OK;
}

/* ---- records ---- */

static int add_sample(cmh_live *l, const cmh_meminfo *m)
{
    if (!l->samples && !(l->samples = malloc(MAX_SAMPLES * sizeof *l->samples))) return CMH_ENOMEM;
    if (l->nsamples < MAX_SAMPLES) l->samples[l->nsamples++] = *m;
    else {
        l->samples[l->sample_head] = *m;
        l->sample_head = (l->sample_head + 1) % MAX_SAMPLES;
    }
    int k = cmh_fstate_slot(m->device);
    if (k >= 0 && m->time_ns >= l->last_sample[k].time_ns) l->last_sample[k] = *m;
    return CMH_OK;
}

/*
 * Whether an entry's sequence number is read for the first time (1), or again (0; -1: out of
 * memory).  The recorder claims a number, then reserves the entry's record: two threads can
 * append theirs in the other order, so a number below the highest read is not always a copy.
 * The numbers read are kept as bits over the last SEEN_BITS; one overtaken by more is taken for
 * a copy.
 */
static int seen_once(ltrace *t, uint64_t seq)
{
    if (!t->seen && !(t->seen = calloc(SEEN_BITS / 64, 8))) return -1;
    if (seq > t->last_seq) {
        uint64_t gap = seq - t->last_seq;
        if (gap >= SEEN_BITS) memset(t->seen, 0, SEEN_BITS / 8);
        else
            for (uint64_t q = t->last_seq + 1; q < seq; q++) t->seen[q % SEEN_BITS / 64] &= ~(1ull << (q % 64)); /* not read yet */
        t->last_seq = seq;
    } else if (t->last_seq - seq >= SEEN_BITS || (t->seen[seq % SEEN_BITS / 64] >> (seq % 64) & 1)) {
        return 0;
    }
    t->seen[seq % SEEN_BITS / 64] |= 1ull << (seq % 64);
    return 1;
}

static void note_rate(cmh_live *l, int k, int64_t t, uint64_t before);

static int on_record(cmh_live *l, const unsigned char *body, uint32_t len, uint32_t type, uint64_t at, char *err, size_t errlen)
{
    const cmh_flight_header *h = hdr(l);
    switch (type) {
    case CMH_FR_ENTRY:
    case CMH_FR_ENTRY_SHORT:
    case CMH_FR_FREE_SHORT: {
        cmh_fr_entry xe, *x = &xe;
        if (!cmh_fr_entry_read(type, body, len, x)) return fail(l, err, errlen, "a short entry record", at);
        if (x->slot >= CMH_FLIGHT_SLOTS) return fail(l, err, errlen, "an entry of an impossible device", at);
        if (x->action >= CMH_ACT_COUNT || x->kind >= CMH_KIND_COUNT) return fail(l, err, errlen, "an entry of an unknown action", at);
        ltrace *t = &l->tr[x->slot];
        /* the checkpoint holds it, or it was appended twice (the record's start copies the ring) */
        if (x->seq <= l->cut[x->slot]) return CMH_OK;
        int fresh = seen_once(t, x->seq);
        if (fresh < 0) return CMH_ENOMEM;
        if (!fresh) return CMH_OK;
        /* a short free's size: the segment's (its allocation's record is ahead of it in the file) */
        if (type == CMH_FR_FREE_SHORT)
            x->size = x->requested = cmh_fstate_seg_size(&l->st, x->addr, x->slot == CMH_FLIGHT_SLOTS - 1 ? -1 : (int32_t)x->slot);
        cmh_entry_full *e = trace_slot(l, (int)x->slot, 0);
        if (!e) return CMH_ENOMEM;
        *e = (cmh_entry_full){.time_ns = to_ns(h, x->ticks), .addr = x->addr, .size = x->size, .requested = x->requested,
                         .stream = x->stream, .stack = x->stack, .thread = x->thread, .action = x->action, .kind = x->kind,
                         .flags = x->flags};
        t->entries++;
        if (x->action == CMH_ACT_OOM) t->ooms++;
        if (e->time_ns > l->info.last_ns) l->info.last_ns = e->time_ns;
        int32_t dev = x->slot == CMH_FLIGHT_SLOTS - 1 ? -1 : (int32_t)x->slot;
        uint64_t before = l->st.allocated[x->slot];
        cmh_fstate_apply(&l->st, e, dev);
        if (l->st.nomem) return CMH_ENOMEM;
        note_rate(l, (int)x->slot, e->time_ns, before);
        return CMH_OK;
    }
    case CMH_FR_CLEAR: return CMH_OK; /* the process keeps its state through a clear: so does the reader */
    case CMH_FR_STACK: {
        const cmh_fr_stack *x = (const cmh_fr_stack *)body;
        if (len < sizeof *x || x->depth > (len - sizeof *x) / 8 || x->depth > 4096)
            return fail(l, err, errlen, "a stack record that does not fit its length", at);
        lstack *p = cmh_oa_get(&l->stacks, (uint64_t)x->id + 1, NULL);
        if (!p || CMH_GROW(l->pcs, l->cappcs, (uint64_t)l->npcs + x->depth, 4096)) return CMH_ENOMEM;
        if (x->depth) memcpy(l->pcs + l->npcs, x + 1, (size_t)x->depth * 8);
        p->first = l->npcs;
        p->depth = x->depth;
        l->npcs += x->depth;
        return CMH_OK;
    }
    case CMH_FR_NAME: {
        const cmh_fr_name *x = (const cmh_fr_name *)body;
        if (len < sizeof *x || x->length > len - sizeof *x) return fail(l, err, errlen, "a name longer than its record", at);
        lname *n = cmh_oa_get(&l->names, (uint64_t)x->id + 1, NULL);
        if (!n || CMH_GROW(l->namebuf, l->capnamebuf, (uint64_t)l->nnamebuf + x->length + 1, 4096)) return CMH_ENOMEM;
        memcpy(l->namebuf + l->nnamebuf, x + 1, x->length);
        n->off = l->nnamebuf;
        n->len = x->length;
        l->nnamebuf += x->length;
        return CMH_OK;
    }
    case CMH_FR_PYFRAME: {
        const cmh_fr_pyframe *x = (const cmh_fr_pyframe *)body;
        if (len < sizeof *x || x->file_len > len - sizeof *x || x->name_len > len - sizeof *x - x->file_len)
            return fail(l, err, errlen, "a Python frame record longer than its length", at);
        lpyframe *f = cmh_oa_get(&l->pyframes, (uint64_t)x->id + 1, NULL);
        uint64_t n = (uint64_t)x->file_len + x->name_len;
        if (!f || CMH_GROW(l->namebuf, l->capnamebuf, (uint64_t)l->nnamebuf + n + 1, 4096)) return CMH_ENOMEM;
        memcpy(l->namebuf + l->nnamebuf, x + 1, n);
        f->off = l->nnamebuf;
        f->file_len = x->file_len;
        f->name_len = x->name_len;
        f->line = x->line;
        l->nnamebuf += (uint32_t)n;
        return CMH_OK;
    }
    case CMH_FR_MODULE: {
        const cmh_fr_module *x = (const cmh_fr_module *)body;
        if (len < sizeof *x || x->path_len > len - sizeof *x || x->build_id_len > len - sizeof *x - x->path_len)
            return fail(l, err, errlen, "a module record longer than its length", at);
        const char *path = (const char *)(x + 1);
        for (uint32_t i = 0; i < l->nmods; i++) /* a new generation names them again */
            if (l->mods[i].base == x->base && strlen(l->mods[i].path) == x->path_len && !memcmp(l->mods[i].path, path, x->path_len))
                return CMH_OK;
        if (CMH_GROW(l->mods, l->capmods, (uint64_t)l->nmods + 1, 64)) return CMH_ENOMEM;
        lmod *m = &l->mods[l->nmods];
        m->base = x->base;
        m->size = x->size;
        m->path = strndup(path, x->path_len);
        m->build_id = strndup(path + x->path_len, x->build_id_len);
        if (!m->path || !m->build_id) return free(m->path), free(m->build_id), CMH_ENOMEM;
        l->nmods++;
        return CMH_OK;
    }
    case CMH_FR_ANNOTATION: {
        const cmh_fr_annotation *x = (const cmh_fr_annotation *)body;
        if (len < sizeof *x) return fail(l, err, errlen, "a short annotation record", at);
        if (l->nanns >= MAX_ANNOTATIONS) return CMH_OK;
        if (CMH_GROW(l->anns, l->capanns, (uint64_t)l->nanns + 1, 64)) return CMH_ENOMEM;
        cmh_annotation a = {x->name, (uint8_t)(x->stage ? 1 : 0), x->device, to_ns(h, x->ticks)};
        l->anns[l->nanns++] = a;
        return CMH_OK;
    }
    case CMH_FR_MEMINFO: {
        const cmh_fr_meminfo *x = (const cmh_fr_meminfo *)body;
        if (len < sizeof *x) return fail(l, err, errlen, "a short cuMemGetInfo record", at);
        if (x->device < 0 || x->device >= CMH_FLIGHT_SLOTS - 1) return CMH_OK;
        cmh_meminfo m = {x->device, to_ns(h, x->ticks), x->free, x->total};
        return add_sample(l, &m);
    }
    default: return CMH_OK; /* a newer writer's record: not ours to read */
    }
}

/*
 * The checksums of the next few committed records at once.  One record's CRC is a chain of
 * crc32 instructions, each waiting 3 cycles for the one before: an entry's body (72 bytes) is 9
 * of them, a tenth of a refresh's time per entry.  Four records' chains run side by side in the
 * same time as one.  Gathers up to SUMS records from at (committed, of a length a writer writes;
 * the first one checked already by the caller) and writes their bodies' sums; returns how many.
 */
#define SUMS 4
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static void sums_hw(const unsigned char *const *p, const uint32_t *n, int k, uint32_t *out)
{
    uint64_t c[SUMS] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    uint32_t m = n[0];
    for (int j = 1; j < k; j++) m = n[j] < m ? n[j] : m;
    m &= ~7u;
    if (k == SUMS)
        for (uint32_t i = 0; i < m; i += 8) {
            uint64_t w0, w1, w2, w3;
            memcpy(&w0, p[0] + i, 8), memcpy(&w1, p[1] + i, 8), memcpy(&w2, p[2] + i, 8), memcpy(&w3, p[3] + i, 8);
            c[0] = _mm_crc32_u64(c[0], w0), c[1] = _mm_crc32_u64(c[1], w1);
            c[2] = _mm_crc32_u64(c[2], w2), c[3] = _mm_crc32_u64(c[3], w3);
        }
    else m = 0;
    for (int j = 0; j < k; j++) {
        uint32_t i = m;
        for (; i + 8 <= n[j]; i += 8) {
            uint64_t w;
            memcpy(&w, p[j] + i, 8);
            c[j] = _mm_crc32_u64(c[j], w);
        }
        uint32_t c32 = (uint32_t)c[j];
        for (; i < n[j]; i++) c32 = _mm_crc32_u8(c32, p[j][i]);
        out[j] = ~c32;
    }
}
#endif

static int sums_ahead(const cmh_live *l, const unsigned char *base, uint64_t at, uint64_t end, uint64_t *ats, uint32_t *sums)
{
    const unsigned char *p[SUMS];
    uint32_t n[SUMS];
    int k = 0;
    while (k < SUMS && at + CMH_FLIGHT_HEAD_V1 <= end) {
        cmh_fr_head hd;
        if (cmh_fr_head_read(base + at, l->version, end - at, &hd) != CMH_FRH_DONE) break;
        ats[k] = at;
        p[k] = base + at + hd.head;
        n[k++] = hd.len - hd.head;
        at += hd.len;
    }
#if defined(__x86_64__)
    if (l->hwcrc) {
        sums_hw(p, n, k, sums);
        return k;
    }
#endif
    for (int j = 0; j < k; j++) sums[j] = cmh_crc32c(0, p[j], n[j]);
    return k;
}

/* Read extent a on from where it stopped. */
static int walk(cmh_live *l, uint32_t a, char *err, size_t errlen)
{
    const cmh_flight_area *ar = &hdr(l)->area[a];
    uint64_t size = __atomic_load_n(&ar->size, __ATOMIC_ACQUIRE), cursor = __atomic_load_n(&ar->cursor, __ATOMIC_ACQUIRE);
    uint64_t sealed = __atomic_load_n(&ar->sealed, __ATOMIC_ACQUIRE), off = ar->offset;
    uint64_t end = cursor < size ? cursor : size;
    if (sealed && sealed < end) end = sealed;
    if (off < CMH_FLIGHT_HEADER || off % 8 || size > l->len || off > l->len - size)
        return fail(l, err, errlen, "an extent past the end of the file (header)", (uint64_t)((const char *)ar - (const char *)l->map));
    uint64_t at = l->pos[a];
    uint64_t bat[SUMS]; /* the records whose sums are in bsum, from bi on */
    uint32_t bsum[SUMS];
    int bn = 0, bi = 0;
    while (at + CMH_FLIGHT_HEAD_V1 <= end) {
        cmh_fr_head hd;
        int st = cmh_fr_head_read(l->map + off + at, l->version, end - at, &hd);
        if (st == CMH_FRH_BADLEN) { /* not a length a writer writes */
            l->info.torn++;
            at = end; /* what follows cannot be found: the extent is done */
            break;
        }
        if (st != CMH_FRH_DONE) { /* not there yet */
            int64_t t = now_ns();
            if (!l->stall_ns[a]) l->stall_ns[a] = t;
            int stuck = !l->alive || t - l->stall_ns[a] > (int64_t)CMH_LIVE_STALL_MS * 1000000;
            if (!stuck) break;
            l->info.torn++;
            l->stall_ns[a] = 0;
            if (st == CMH_FRH_EMPTY) { /* reserved and never written: nothing after it can be found */
                at = end;
                break;
            }
            at += hd.len;
            continue;
        }
        l->stall_ns[a] = 0;
        uint32_t len = hd.len;
        const unsigned char *body = l->map + off + at + hd.head;
        int whole = 1;
        if (hd.has_sum) {
            if (bi >= bn || bat[bi] != at) bn = sums_ahead(l, l->map + off, at, end, bat, bsum), bi = 0;
            uint32_t sum = bi < bn && bat[bi] == at ? bsum[bi++] : cmh_crc32c(0, body, len - hd.head);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
            whole = sum == hd.sum;
#else
            (void)sum;
#endif
        }
        if (!whole) l->info.damaged++;
        else {
            int rc = on_record(l, body, len - hd.head, hd.type, off + at, err, errlen);
            if (rc != CMH_OK) {
                l->pos[a] = at;
                return rc;
            }
        }
        at += len;
        l->info.last_bytes += len;
    }
    l->pos[a] = at;
    return CMH_OK;
}

/* Map the file anew when it grew (extents are added at its end). */
static int remap(cmh_live *l, char *err, size_t errlen)
{
    struct stat sb;
    if (fstat(l->fd, &sb) != 0) {
        snprintf(err, errlen, "%s: %s", l->path, strerror(errno));
        return CMH_EIO;
    }
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < CMH_FLIGHT_HEADER) {
        snprintf(err, errlen, "%s: not a flight record (%lld bytes)", l->path, (long long)sb.st_size);
        return CMH_EFORMAT;
    }
    if ((size_t)sb.st_size <= l->maplen) { /* the mapping reaches past it already: only what the file holds is read */
        l->len = (size_t)sb.st_size;
        return CMH_OK;
    }
    /* Mapped with room to grow (twice the size, at least 64 MiB more), so that a growing record
     * is not mapped again, and its pages faulted in again, at each new extent.  Nothing past
     * len, the file's size, is ever read. */
    size_t want = (size_t)sb.st_size * 2;
    if (want < (size_t)sb.st_size + ((size_t)64 << 20)) want = (size_t)sb.st_size + ((size_t)64 << 20);
    /* A mapping is grown in place or moved with its page tables (mremap): the pages read
     * already are not unmapped and faulted in again (unmapping them was a twentieth of the
     * exporter's time, with eight growing records). */
    void *m = l->map ? mremap((void *)l->map, l->maplen, want, MREMAP_MAYMOVE) : mmap(NULL, want, PROT_READ, MAP_SHARED, l->fd, 0);
    if (m == MAP_FAILED) {
        want = (size_t)sb.st_size;
        m = l->map ? mremap((void *)l->map, l->maplen, want, MREMAP_MAYMOVE) : mmap(NULL, want, PROT_READ, MAP_SHARED, l->fd, 0);
    }
    if (m == MAP_FAILED) { /* the old mapping, if any, is still there */
        snprintf(err, errlen, "%s: cannot map: %s", l->path, strerror(errno));
        return CMH_EIO;
    }
    l->map = m;
    l->maplen = want;
    l->len = (size_t)sb.st_size;
    return CMH_OK;
}

static int check_header(cmh_live *l, char *err, size_t errlen)
{
    const cmh_flight_header *h = hdr(l);
    if (memcmp(h->magic, CMH_FLIGHT_MAGIC, 8)) return fail(l, err, errlen, "not a flight record (no magic)", 0);
    if (h->version < 1 || h->version > CMH_FLIGHT_VERSION)
        return fail(l, err, errlen, "a flight record of a version this reader does not know", offsetof(cmh_flight_header, version));
    if (h->header_size != CMH_FLIGHT_HEADER) return fail(l, err, errlen, "a header of the wrong size", offsetof(cmh_flight_header, header_size));
    if (__atomic_load_n(&h->nareas, __ATOMIC_ACQUIRE) > CMH_FLIGHT_EXTENTS)
        return fail(l, err, errlen, "a header naming too many extents", offsetof(cmh_flight_header, nareas));
    l->head = h->version >= 2 ? sizeof(cmh_flight_rec) : CMH_FLIGHT_HEAD_V1;
    l->version = h->version;
    return CMH_OK;
}

static void take_identity(cmh_live *l)
{
    const cmh_flight_header *h = hdr(l);
    cmh_live_info *i = &l->info;
    i->pid = h->pid;
    i->rank = h->rank1 > 0 ? h->rank1 - 1 : -1;
    i->local_rank = h->local_rank1 > 0 ? h->local_rank1 - 1 : -1;
    i->world_size = h->world_size1 > 0 ? h->world_size1 - 1 : -1;
    snprintf(i->host, sizeof i->host, "%.*s", (int)strnlen(h->hostname, sizeof h->hostname), h->hostname);
    snprintf(i->cmdline, sizeof i->cmdline, "%.*s", (int)strnlen(h->cmdline, sizeof h->cmdline), h->cmdline);
    snprintf(i->producer, sizeof i->producer, "%.*s", (int)strnlen(h->producer, sizeof h->producer), h->producer);
    snprintf(i->boot_id, sizeof i->boot_id, "%.*s", (int)strnlen(h->boot_id, sizeof h->boot_id), h->boot_id);
    for (char *p = i->cmdline; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    for (char *p = i->host; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    i->start_ticks = h->proc_start_ticks;
}

/* A point of a device's allocated bytes, in the process's own time, at most one a second: the
 * change per minute is read off them at any refresh (the first one too). */
static void note_rate(cmh_live *l, int k, int64_t t, uint64_t before)
{
    rate_pt *r = l->rate[k];
    uint32_t n = l->nrate[k];
    int64_t next; /* the next second's start; a hostile record's times may sit at either end of int64 */
    if (n && (__builtin_add_overflow(r[n - 1].ns, (int64_t)1000000000, &next) || t < next)) {
        if (t >= r[n - 1].ns) r[n - 1].allocated = l->st.allocated[k]; /* the latest value of its second */
        return;
    }
    if (n == RATE_POINTS) {
        memmove(r, r + 1, (RATE_POINTS - 1) * sizeof *r);
        n--;
    }
    if (!n) r[n++] = (rate_pt){t > INT64_MIN ? t - 1 : t, before}; /* just before the first entry read */
    r[n++] = (rate_pt){t, l->st.allocated[k]};
    l->nrate[k] = n;
}

/* Allocated bytes per minute over the minute up to now (the process's last entry, once it
 * ended), or since its first entry when that was less than a minute ago. */
static int64_t change_per_min(const cmh_live *l, int k, uint64_t allocated)
{
    const rate_pt *r = l->rate[k];
    uint32_t n = l->nrate[k];
    if (n < 2) return 0;
    int64_t now = l->info.last_ns;
    if (l->alive) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* the recorder's clock (cmh_now_ns) */
        int64_t wall = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        if (wall > now) now = wall;
    }
    int64_t from = now - 60ll * 1000000000;
    uint32_t i = 0;
    while (i + 1 < n && r[i + 1].ns <= from) i++; /* the value as the window opened */
    int64_t t0 = r[i].ns > from ? r[i].ns : from;
    if (now - t0 < 1000000000) return 0; /* under a second: no rate yet */
    return (int64_t)(((double)allocated - (double)r[i].allocated) * 60e9 / (double)(now - t0));
}

int cmh_live_refresh(cmh_live *l, char *err, size_t errlen)
{
    int rc = remap(l, err, errlen);
    if (rc != CMH_OK) return rc;
    if ((rc = check_header(l, err, errlen)) != CMH_OK) return rc;
    const cmh_flight_header *h = hdr(l);
    l->info.last_bytes = 0;
    l->alive = cmh_registry_alive(h->pid, h->proc_start_ticks, l->info.boot_id) &&
               __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == CMH_FLIGHT_RUNNING;
    uint32_t n = __atomic_load_n(&h->nareas, __ATOMIC_ACQUIRE);
    /* an extent given back before it was read to its end: what it held is in a checkpoint now */
    for (uint32_t a = 0; a < n; a++) {
        const cmh_flight_area *ar = &h->area[a];
        if (ar->gen < l->gen_from || !__atomic_load_n(&ar->dropped, __ATOMIC_ACQUIRE)) continue;
        uint64_t c = ar->cursor < ar->size ? ar->cursor : ar->size;
        if (ar->sealed && ar->sealed < c) c = ar->sealed;
        if (l->pos[a] + CMH_FLIGHT_HEAD_V1 > c) continue; /* read to its end before it went */
        uint64_t resets = l->info.resets + 1, torn = l->info.torn, damaged = l->info.damaged, bytes = l->info.bytes;
        clear_state(l);
        l->info.resets = resets, l->info.torn = torn, l->info.damaged = damaged, l->info.bytes = bytes;
        if ((rc = load_base(l)) != CMH_OK) return rc;
        break;
    }
    for (uint32_t a = 0; a < n; a++) {
        const cmh_flight_area *ar = &h->area[a];
        if (__atomic_load_n(&ar->dropped, __ATOMIC_ACQUIRE) || ar->gen < l->gen_from || !__atomic_load_n(&ar->size, __ATOMIC_ACQUIRE)) continue;
        if ((rc = walk(l, a, err, errlen)) != CMH_OK) break;
    }
    l->info.bytes += l->info.last_bytes;
    l->info.state = (int)h->state;
    l->info.end_signal = h->end_signal;
    l->info.lost = h->lost_records + h->lost_events;
    if (l->st.dead > 4096 && l->st.dead > l->st.nsegs / 2 && cmh_fstate_compact(&l->st) != CMH_OK) rc = CMH_ENOMEM;
    if (rc == CMH_ENOMEM) snprintf(err, errlen, "%s: out of memory", l->path);
    return rc;
}

int cmh_live_open(const char *path, uint64_t trace_cap, cmh_live **out, char *err, size_t errlen)
{
    *out = NULL;
    cmh_live *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "%s: out of memory", path);
        return CMH_ENOMEM;
    }
    snprintf(l->path, sizeof l->path, "%s", path);
    l->trace_cap_asked = trace_cap;
#if defined(__x86_64__)
    l->hwcrc = __builtin_cpu_supports("sse4.2");
#endif
    cmh_fstate_init(&l->st);
    cmh_oa_init(&l->stacks, sizeof(lstack));
    cmh_oa_init(&l->names, sizeof(lname));
    cmh_oa_init(&l->pyframes, sizeof(lpyframe));
    l->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (l->fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(l);
        return CMH_EIO;
    }
    int rc = remap(l, err, errlen);
    if (rc == CMH_OK) rc = check_header(l, err, errlen);
    if (rc == CMH_OK) {
        take_identity(l);
        rc = load_base(l);
        if (rc == CMH_ENOMEM) snprintf(err, errlen, "%s: out of memory", path);
    }
    if (rc == CMH_OK) rc = cmh_live_refresh(l, err, errlen);
    if (rc != CMH_OK) {
        cmh_live_close(l);
        return rc;
    }
    *out = l;
    return CMH_OK;
}

void cmh_live_close(cmh_live *l)
{
    if (!l) return;
    clear_state(l);
    cmh_fstate_free(&l->st);
    cmh_oa_free(&l->stacks);
    cmh_oa_free(&l->names);
    cmh_oa_free(&l->pyframes);
    free(l->pcs);
    free(l->namebuf);
    free(l->mods);
    free(l->samples);
    free(l->anns);
    if (l->map) munmap((void *)l->map, l->maplen);
    if (l->fd >= 0) close(l->fd);
    free(l);
}

const cmh_live_info *cmh_live_get_info(const cmh_live *l) { return &l->info; }
const char *cmh_live_path(const cmh_live *l) { return l->path; }

uint32_t cmh_live_devices(const cmh_live *l, cmh_live_device *out, uint32_t cap)
{
    uint32_t n = 0;
    uint64_t max = hdr(l)->max_entries;
    for (int k = 0; k < CMH_FLIGHT_SLOTS; k++) {
        const ltrace *t = &l->tr[k];
        if (!t->present && !l->st.reserved[k] && !l->last_sample[k].time_ns) continue;
        if (n < cap) {
            cmh_live_device *d = &out[n];
            memset(d, 0, sizeof *d);
            d->device = k == CMH_FLIGHT_SLOTS - 1 ? -1 : k;
            d->allocated = l->st.allocated[k];
            d->reserved = l->st.reserved[k];
            d->peak_allocated = l->st.peak_allocated[k];
            d->peak_reserved = l->st.peak_reserved[k];
            d->entries = t->entries;
            d->dropped = max && t->entries > max ? t->entries - max : 0;
            d->ooms = t->ooms;
            if (l->last_sample[k].time_ns) {
                d->meminfo_known = 1;
                d->mem_free = l->last_sample[k].free;
                d->mem_total = l->last_sample[k].total;
                d->mem_time_ns = l->last_sample[k].time_ns;
            }
            d->change_per_min = change_per_min(l, k, d->allocated);
        }
        n++;
    }
    return n;
}

/* ---- a snapshot of now ---- */

typedef struct mk {
    cmh_live *l;
    cmh_snapshot *s;
    cmh_oatab made; /* recorder stack id + 1 -> model id */
    int nomem;
} mk;

typedef struct made_stack {
    uint64_t id;
    uint32_t model, pad;
} made_stack;

static uint32_t model_stack(void *arg, uint32_t rec)
{
    mk *m = arg;
    if (rec & BASE_STACK) return rec & ~BASE_STACK; /* the checkpoint's, copied with its ids */
    lstack *p = rec ? cmh_oa_find(&m->l->stacks, (uint64_t)rec + 1) : NULL;
    if (!p) return 0;
    made_stack *d = cmh_oa_find(&m->made, (uint64_t)rec + 1);
    if (d) return d->model;
    cmh_snapshot *s = m->s;
    uint32_t ids[4096];
    for (uint32_t i = 0; i < p->depth; i++) {
        uint64_t pc = m->l->pcs[p->first + i];
        if ((pc >> 48) == 0xC0DE) { /* a Python frame (CMH_FR_PYFRAME), as recover makes it */
            const lpyframe *py = cmh_oa_find(&m->l->pyframes, (pc & 0xFFFFFFFFull) + 1);
            const char *file = py ? m->l->namebuf + py->off : "??";
            cmh_frame q = {0, 0, 0, py ? py->line : 0, -1};
            if (cmh_strtab_intern(&s->strings, file, py ? py->file_len : 2, &q.filename) ||
                cmh_strtab_intern(&s->strings, py ? file + py->file_len : "??", py ? py->name_len : 2, &q.name) ||
                cmh_snapshot_add_frame(s, &q, &ids[i])) {
                m->nomem = 1;
                return 0;
            }
            continue;
        }
        if (cmh_fstate_pc_frame(s, pc, &ids[i]) != CMH_OK) {
            m->nomem = 1;
            return 0;
        }
    }
    uint32_t id;
    if (cmh_snapshot_add_stack(s, ids, p->depth, &id) != CMH_OK || !(d = cmh_oa_get(&m->made, (uint64_t)rec + 1, NULL))) {
        m->nomem = 1;
        return 0;
    }
    d->model = id;
    return id;
}

static int name_string(cmh_live *l, cmh_snapshot *s, uint32_t rec, uint32_t *out)
{
    const lname *n = rec ? cmh_oa_find(&l->names, (uint64_t)rec + 1) : NULL;
    return cmh_strtab_intern(&s->strings, n ? l->namebuf + n->off : "", n ? n->len : 0, out) == CMH_OK ? CMH_OK : CMH_ENOMEM;
}

int cmh_live_snapshot(cmh_live *l, cmh_snapshot *s)
{
    int rc = cmh_snapshot_init(s);
    if (rc) return rc;
    const cmh_flight_header *h = hdr(l);
    mk m = {l, s, {0}, 0};
    cmh_oa_init(&m.made, sizeof(made_stack));
    if (l->have_base && (rc = cmh_fstate_copy_dict(s, &l->base)) != CMH_OK) goto out;
    for (uint32_t i = 0; i < l->nmods; i++) {
        cmh_module md = {0, 0, l->mods[i].base, l->mods[i].size};
        if (cmh_strtab_intern(&s->strings, l->mods[i].path, strlen(l->mods[i].path), &md.path) ||
            cmh_strtab_intern(&s->strings, l->mods[i].build_id, strlen(l->mods[i].build_id), &md.build_id))
            goto nomem;
        int known = 0;
        for (uint32_t k = 0; k < s->nmodules && !known; k++) known = s->modules[k].base == md.base && s->modules[k].path == md.path;
        if (!known && cmh_snapshot_add_module(s, &md) != CMH_OK) goto nomem;
    }
    for (int k = 0; k < CMH_FLIGHT_SLOTS; k++) {
        ltrace *t = &l->tr[k];
        if (!t->present) continue;
        int32_t dev = k == CMH_FLIGHT_SLOTS - 1 ? -1 : k;
        if (cmh_snapshot_add_trace(s, dev, t->dropped_out, NULL) != CMH_OK) goto nomem;
        int64_t last = INT64_MIN;
        for (uint64_t i = 0; i < t->n; i++) {
            uint64_t at = t->head + i;
            cmh_entry_full e = t->ring[at >= t->alloc ? at - t->alloc : at];
            if (i >= t->nbase) {
                /* an entry overtaken in the file (seen_once) gets the time of the one before it, as recover gives */
                if (e.time_ns < last) e.time_ns = last;
                last = e.time_ns;
                e.stack = model_stack(&m, e.stack);
                if (e.action == CMH_ACT_MARK) {
                    if (name_string(l, s, (uint32_t)e.addr, &e.name) != CMH_OK) goto nomem;
                    e.addr = 0;
                }
            }
            if (m.nomem || cmh_snapshot_add_entry(s, &e) != CMH_OK) goto nomem;
        }
    }
    uint64_t orphans = 0;
    if ((rc = cmh_fstate_emit(&l->st, s, model_stack, &m, &orphans)) != CMH_OK || m.nomem) goto nomem;
    for (uint32_t i = 0; i < l->nsamples; i++) {
        uint32_t j = l->nsamples < MAX_SAMPLES ? i : (l->sample_head + i) % MAX_SAMPLES;
        if (cmh_snapshot_add_meminfo(s, &l->samples[j]) != CMH_OK) goto nomem;
    }
    for (uint32_t i = 0; i < l->nanns; i++) {
        cmh_annotation a = l->anns[i];
        if (l->have_base && a.time_ns <= l->base.dump_time_ns) continue;
        if (name_string(l, s, a.name, &a.name) != CMH_OK || cmh_snapshot_add_annotation(s, &a) != CMH_OK) goto nomem;
    }
    s->source = CMH_SRC_RECORDER;
    s->pid = h->pid;
    s->rank = l->info.rank;
    s->local_rank = l->info.local_rank;
    s->world_size = l->info.world_size;
    s->forked_from = h->forked_from > 0 && h->forked_from <= INT32_MAX ? h->forked_from : 0;
    snprintf(s->producer, sizeof s->producer, "%s", l->info.producer);
    if (cmh_strtab_intern(&s->strings, l->info.host, strlen(l->info.host), &s->hostname) ||
        cmh_strtab_intern(&s->strings, l->info.cmdline, strlen(l->info.cmdline), &s->cmdline))
        goto nomem;
    s->start_time_ns = h->start_ns;
    s->opt_enabled = h->enabled;
    s->opt_context = h->context;
    s->opt_max_entries = h->max_entries;
    s->opt_max_frames = h->max_frames;
    s->lost_events = l->info.lost + (l->have_base ? l->base.lost_events : 0);
    int64_t last = h->t1_ns;
    if (l->info.last_ns > last) last = l->info.last_ns;
    s->dump_time_ns = last;
    rc = CMH_OK;
    goto out;
nomem:
    rc = CMH_ENOMEM;
out:
    cmh_oa_free(&m.made);
    if (rc != CMH_OK) cmh_snapshot_free(s);
    return rc;
}
