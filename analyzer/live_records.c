/*
 * live_records.c - the live reader's walk over an extent (live_reader.h): the records' checks
 * (length, commit word, checksum, four at a time), an uncommitted record waited for or counted
 * torn, and each record applied to the state: an entry to the device's window and its final
 * state (once, by its sequence number), stacks, names, Python frames, modules, annotations and
 * cuMemGetInfo samples, and the points the change per minute is read from.
 *
 * One file, as the walk and the records it applies are the reader's hot loop: kept together, the
 * compiler keeps them in one piece.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "crc32c.h"
#include "grow.h"
#include "cumemhist/reports.h"
#include "live_reader.h"

#define DEFAULT_TRACE_CAP (1u << 20) /* an unbounded recording's window, per device */
#define MAX_ANNOTATIONS 65536
#define MAX_THREAD_NAMES 65536 /* recording threads named (CMH_FR_THREAD) */

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int cmh_live_fail(cmh_live *l, char *err, size_t errlen, const char *what, uint64_t at)
{
    snprintf(err, errlen, "%s: %s at byte %llu", l->path, what, (unsigned long long)at);
    return CMH_EFORMAT;
}

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

cmh_entry_full *cmh_live_trace_slot_grow(cmh_live *l, int k, int from_base)
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
        /* aligned_alloc wants a multiple of the alignment: an 80-byte entry times a window of
         * max_entries need not be one */
        cmh_entry_full *r = aligned_alloc(64, (na * sizeof *r + 63) / 64 * 64);
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
        t->ooms_out += e->action == CMH_ACT_OOM;
        return e;
    }
    uint64_t at = t->head + t->n;
    t->n++;
    return &t->ring[at >= t->alloc ? at - t->alloc : at];
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

/* Note OOM number at as a retry in the window (t->retried, kept in order); 0 out of memory. */
static int note_retried(ltrace *t, uint64_t at)
{
    if (t->retried_head && t->nretried == t->capretried) { /* room at the end: close the gap at the front */
        memmove(t->retried, t->retried + t->retried_head, (t->nretried - t->retried_head) * sizeof *t->retried);
        t->nretried -= t->retried_head;
        t->retried_head = 0;
    }
    if (t->nretried == t->capretried) {
        uint32_t nc = t->capretried ? t->capretried * 2 : 64;
        uint64_t *r = nc > t->capretried ? realloc(t->retried, nc * sizeof *r) : NULL;
        if (!r) return 0;
        t->retried = r, t->capretried = nc;
    }
    uint32_t i = t->nretried++;
    for (; i > t->retried_head && t->retried[i - 1] > at; i--) t->retried[i] = t->retried[i - 1];
    t->retried[i] = at;
    return 1;
}

void cmh_live_oom_entry(ltrace *t, const cmh_entry_full *e, int torch)
{
    /* the window holds entries (entries - n, entries]: a retry that left it counts as a snapshot's dropped OOM */
    uint64_t oldest = t->entries - t->n + 1;
    while (t->retried_head < t->nretried && t->retried[t->retried_head] < oldest) t->retried_head++, t->retries--, t->ooms++;
    if (t->retried_head == t->nretried) t->retried_head = t->nretried = 0;
    for (uint32_t i = 0; i < t->npend;) {
        loom *p = &t->pend[i];
        int r = t->entries - p->at > CMH_OOM_RETRY_WINDOW ? 0 : cmh_oom_retry_step(&p->q, e, 0, &p->freed);
        if (r < 0) {
            i++;
            continue;
        }
        /* it was counted as the program's when it came; one gone from the window stays so.  A
         * retry known by a block alloc before it (no same stack) is one while that block is in
         * the window: a snapshot's trace without it shows no allocator above (cmh_oom_above) */
        uint64_t key = p->at;
        if (r == CMH_RETRY_ALLOCATOR && p->ev && !(p->q.stack && e->stack == p->q.stack)) key = p->ev;
        if (r && key >= oldest && note_retried(t, key)) t->retries++, t->ooms--;
        *p = t->pend[--t->npend];
    }
    if (e->action == CMH_ACT_ALLOC) t->last_block = t->entries;
    if (e->action != CMH_ACT_OOM) return;
    t->ooms++;
    if (t->npend == LIVE_OOM_PENDING) return; /* (16 threads at once out of memory: the oldest undecided stays an OOM) */
    /* as cmh_oom_above over a snapshot of the window: PyTorch's allocator, or a block alloc entry
     * before this one, within CMH_OOM_RETRY_WINDOW and in the window (ev: that entry's number) */
    int mark = torch || (e->flags & CMH_EF_PYTORCH);
    uint64_t ev = !mark && t->last_block && t->last_block >= oldest && t->entries - t->last_block <= CMH_OOM_RETRY_WINDOW ? t->last_block : 0;
    int above = mark || ev;
    t->pend[t->npend++] = (loom){{e->thread, e->stack, e->size, e->stream, above, NULL}, t->entries, e->time_ns, ev, 0};
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

static int on_record(cmh_live *l, const unsigned char *body, uint32_t len, uint32_t type, uint64_t at, char *err, size_t errlen)
{
    const cmh_flight_header *h = hdr(l);
    switch (type) {
    case CMH_FR_ENTRY:
    case CMH_FR_ENTRY_SHORT:
    case CMH_FR_FREE_SHORT: {
        cmh_fr_entry xe, *x = &xe;
        if (!cmh_fr_entry_read(type, body, len, x)) return cmh_live_fail(l, err, errlen, "a short entry record", at);
        if (x->slot >= CMH_FLIGHT_SLOTS) return cmh_live_fail(l, err, errlen, "an entry of an impossible device", at);
        if (x->action >= CMH_ACT_COUNT || x->kind >= CMH_KIND_COUNT) return cmh_live_fail(l, err, errlen, "an entry of an unknown action", at);
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
        cmh_live_oom_entry(t, e, l->torch);
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
            return cmh_live_fail(l, err, errlen, "a stack record that does not fit its length", at);
        fstack *p = cmh_oa_get(&l->dict.stacks, (uint64_t)x->id + 1, NULL);
        if (!p || CMH_GROW(l->dict.pcs, l->dict.cappcs, (uint64_t)l->dict.npcs + x->depth, 4096)) return CMH_ENOMEM;
        if (x->depth) memcpy(l->dict.pcs + l->dict.npcs, x + 1, (size_t)x->depth * 8);
        p->first = l->dict.npcs;
        p->depth = x->depth;
        l->dict.npcs += x->depth;
        return CMH_OK;
    }
    case CMH_FR_NAME: {
        const cmh_fr_name *x = (const cmh_fr_name *)body;
        if (len < sizeof *x || x->length > len - sizeof *x) return cmh_live_fail(l, err, errlen, "a name longer than its record", at);
        fname *n = cmh_oa_get(&l->dict.names, (uint64_t)x->id + 1, NULL);
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
            return cmh_live_fail(l, err, errlen, "a Python frame record longer than its length", at);
        lpyframe *f = cmh_oa_get(&l->dict.pyframes, (uint64_t)x->id + 1, NULL);
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
            return cmh_live_fail(l, err, errlen, "a module record longer than its length", at);
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
        l->torch |= cmh_torch_allocator_module(m->path);
        l->nmods++;
        return CMH_OK;
    }
    case CMH_FR_ANNOTATION: {
        const cmh_fr_annotation *x = (const cmh_fr_annotation *)body;
        if (len < sizeof *x) return cmh_live_fail(l, err, errlen, "a short annotation record", at);
        if (l->nanns >= MAX_ANNOTATIONS) return CMH_OK;
        if (CMH_GROW(l->anns, l->capanns, (uint64_t)l->nanns + 1, 64)) return CMH_ENOMEM;
        cmh_annotation a = {x->name, (uint8_t)(x->stage ? 1 : 0), x->device, to_ns(h, x->ticks)};
        l->anns[l->nanns++] = a;
        return CMH_OK;
    }
    case CMH_FR_MEMINFO: {
        const cmh_fr_meminfo *x = (const cmh_fr_meminfo *)body;
        if (len < sizeof *x) return cmh_live_fail(l, err, errlen, "a short cuMemGetInfo record", at);
        if (x->device < 0 || x->device >= CMH_FLIGHT_SLOTS - 1) return CMH_OK;
        cmh_meminfo m = {x->device, to_ns(h, x->ticks), x->free, x->total, x->thread};
        return add_sample(l, &m);
    }
    case CMH_FR_DEVICE: {
        const cmh_fr_device *x = (const cmh_fr_device *)body;
        if (len < sizeof *x) return cmh_live_fail(l, err, errlen, "a short device record", at);
        if (x->device >= 0 && x->device < CMH_FLIGHT_SLOTS - 1) l->idents[x->device] = cmh_fr_device_ident(x);
        return CMH_OK;
    }
    case CMH_FR_THREAD: { /* the thread's tid and name, as recover puts them into thread_ids */
        const cmh_fr_thread *x = (const cmh_fr_thread *)body;
        if (len < sizeof *x) return cmh_live_fail(l, err, errlen, "a short thread record", at);
        if (!x->thread) return CMH_OK;
        uint32_t k = 0;
        while (k < l->nthreads && l->threads[k].thread != x->thread) k++;
        if (k == l->nthreads) {
            if (l->nthreads >= MAX_THREAD_NAMES) return CMH_OK; /* (a hostile file's: no more kept) */
            if (CMH_GROW(l->threads, l->capthreads, (uint64_t)l->nthreads + 1, 16)) return CMH_ENOMEM;
            l->nthreads++;
        }
        lthread *t = &l->threads[k];
        t->thread = x->thread;
        t->pad = 0;
        t->tid = x->tid;
        memcpy(t->name, x->name, sizeof t->name);
        return CMH_OK;
    }
    case CMH_FR_CHILD: { /* a running parent's snapshot names its children as its exit dump will */
        int rc = cmh_fchildren_add(&l->kids, body, len, (uint64_t)(body - l->map));
        return rc == CMH_EFORMAT ? cmh_live_fail(l, err, errlen, "a forked child record longer than its length", at) : rc;
    }
    case CMH_FR_VMM_HANDLE: {
        const cmh_fr_vmm_handle *x = (const cmh_fr_vmm_handle *)body;
        if (len < sizeof *x) return cmh_live_fail(l, err, errlen, "a short cuMemCreate handle record", at);
        if (!x->handle) return CMH_OK;
        int fresh = 0;
        lvmm *v = cmh_oa_get(&l->handles, x->handle, &fresh);
        if (!v) return CMH_ENOMEM;
        if (fresh || cmh_fr_vmm_later(x->seq, v->seq)) /* (read past an extent it waits in: the later state stays) */
            *v = (lvmm){x->handle, x->size, to_ns(h, x->ticks), x->device, x->stack, x->state, x->seq};
        return CMH_OK;
    }
    case CMH_FR_VMM_MAP: {
        cmh_fr_vmm_map x;
        if (len < sizeof x) return cmh_live_fail(l, err, errlen, "a short cuMemMap record", at);
        memcpy(&x, body, sizeof x);
        if (x.device < -1 || x.device > 1023 || !x.handle || !x.size) return CMH_OK; /* not a device's: not ours to keep */
        if (l->nmaps >= 1u << 20) return CMH_OK; /* (the recorder's own bound: maps past it count by their ranges) */
        if (CMH_GROW(l->maps, l->capmaps, (uint64_t)l->nmaps + 1, 64)) return CMH_ENOMEM;
        l->maps[l->nmaps++] = (cmh_vmm_map){x.device, x.addr, x.size, to_ns(h, x.ticks), x.handle, x.handle_size, x.handle_stack, to_ns(h, x.handle_ticks)};
        return CMH_OK;
    }
    case CMH_FR_VMM_RELEASE: {
        cmh_fr_vmm_release x;
        if (len < sizeof x) return cmh_live_fail(l, err, errlen, "a short cuMemRelease record", at);
        memcpy(&x, body, sizeof x);
        if (x.device < 0 || x.device > 1023 || !x.handle) return CMH_OK; /* not a device's: not ours to keep */
        if (l->nrels >= 1u << 20) return CMH_OK; /* (the recorder's own bound) */
        if (CMH_GROW(l->rels, l->caprels, (uint64_t)l->nrels + 1, 64)) return CMH_ENOMEM;
        l->rels[l->nrels++] = (cmh_vmm_release){x.device, x.handle, x.size, x.stack, to_ns(h, x.ticks), to_ns(h, x.release_ticks)};
        return CMH_OK;
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
int cmh_live_walk(cmh_live *l, uint32_t a, char *err, size_t errlen)
{
    const cmh_flight_area *ar = &hdr(l)->area[a];
    uint64_t size = __atomic_load_n(&ar->size, __ATOMIC_ACQUIRE), cursor = __atomic_load_n(&ar->cursor, __ATOMIC_ACQUIRE);
    uint64_t sealed = __atomic_load_n(&ar->sealed, __ATOMIC_ACQUIRE), off = ar->offset;
    /* (version 6) tiny entries' time base: set with the slot's other fields, under its serial */
    int64_t t0 = l->version >= 6 ? __atomic_load_n(&hdr(l)->area_t0[a], __ATOMIC_ACQUIRE) : 0;
    uint64_t end = cursor < size ? cursor : size;
    if (sealed && sealed < end) end = sealed;
    if (off < CMH_FLIGHT_HEADER || off % 8 || size > l->len || off > l->len - size)
        return cmh_live_fail(l, err, errlen, "an extent past the end of the file (header)", (uint64_t)((const char *)ar - (const char *)l->map));
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
        uint32_t type = hd.type, blen = len - hd.head;
        cmh_fr_entry_short tiny;
        if (whole && l->version >= 6 && hd.head == CMH_FR_COMPACT_HEAD && (type == CMH_FR_ENTRY_TINY || type == CMH_FR_FREE_TINY)) {
            /* read as the short record it stands for (flight_format.h); one without an entry skipped */
            int t = cmh_fr_tiny_read(&type, hd.first, body, blen, t0, &tiny);
            if (!t) whole = 0; /* its sum matched, yet it cannot be */
            if (t < 0) type = 0; /* no entry: a type no one reads */
            body = (const unsigned char *)&tiny, blen = type == CMH_FR_FREE_SHORT ? CMH_FR_FREE_SHORT_BODY : sizeof tiny;
        }
        if (!whole) l->info.damaged++;
        else if (type) {
            int rc = on_record(l, body, blen, type, off + at, err, errlen);
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
