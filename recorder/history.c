/*
 * history.c - what the recorder keeps: per-device rings of trace entries and the live segments.
 *
 * Invariants:
 *  - A device's ring holds its most recent entries in append order; ring[head] is the oldest.
 *    With max_entries = 0 it grows without bound (head stays 0); otherwise it grows up to
 *    max_entries and then overwrites the oldest entry, counting it in `dropped`.
 *  - The live map holds every segment the recorder saw allocated and not yet freed, keyed by
 *    address, in 64 shards each under its own lock.  A device's counters change only under that
 *    device's lock, together with the entry that explains the change.
 *  - A free is recorded *before* the driver frees, so no later allocation of the same address
 *    can be recorded ahead of it; if the driver refuses, cmh_hist_free_undo puts it back.
 *  - No lock here is ever held across a driver call, a stack capture or a malloc of user size.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

volatile int cmh_touched;
uint64_t cmh_lost;

typedef struct dev_state {
    pthread_mutex_t lock;
    cmh_rec_entry *ring;
    uint64_t cap, head, count, dropped, total;
    uint64_t alloc_cur, alloc_peak, res_cur, res_peak, nallocs, nfrees, nooms;
    int used;
} dev_state;

static dev_state g_dev[CMH_MAX_DEVICES + 1];
static uint64_t g_max_entries; /* 0 = unlimited; guarded by every device lock */

#define NSHARD 64
typedef struct shard {
    pthread_mutex_t lock;
    cmh_live *slots; /* addr 0 = empty */
    uint32_t cap, n;
} shard;
static shard g_shard[NSHARD];  /* segments (driver allocations) */
static shard g_bshard[NSHARD]; /* blocks an allocator reported inside them (cmh_block_alloc) */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void take_reference(void);

static void init_locks(void)
{
    take_reference();
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) pthread_mutex_init(&g_dev[i].lock, NULL);
    for (int i = 0; i < NSHARD; i++) pthread_mutex_init(&g_shard[i].lock, NULL);
    for (int i = 0; i < NSHARD; i++) pthread_mutex_init(&g_bshard[i].lock, NULL);
    g_max_entries = cmh_cfg.max_entries;
}

static inline void ensure_init(void) { pthread_once(&g_once, init_locks); }

int64_t cmh_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Event times are taken as raw ticks (the TSC on x86-64, ~10 ns against ~28 ns for
 * clock_gettime) and mapped to wall-clock ns when a snapshot is made, by the line through two
 * reference points: one taken at start, one at the dump.  This is how PyTorch's own time_us
 * is made.  Elsewhere ticks are CLOCK_REALTIME ns and the map is the identity. */
static int64_t g_ref_ticks, g_ref_ns;

static void take_reference(void)
{
    g_ref_ns = cmh_now_ns();
    g_ref_ticks = cmh_now_ticks();
}

int64_t cmh_ticks_to_ns(int64_t ticks, int64_t now_ticks, int64_t now_ns)
{
#if defined(__x86_64__)
    if (!ticks) return 0;
    int64_t dt = now_ticks - g_ref_ticks;
    if (dt <= 0) return now_ns;
    return g_ref_ns + (int64_t)((__int128)(ticks - g_ref_ticks) * (now_ns - g_ref_ns) / dt);
#else
    (void)now_ticks;
    (void)now_ns;
    return ticks;
#endif
}

static inline uint64_t addr_hash(uint64_t a) { return (a >> 8) * 0x9E3779B97F4A7C15ull; }

static inline dev_state *dev_slot(int device)
{
    return &g_dev[device >= 0 && device < CMH_MAX_DEVICES ? device : CMH_HOST_SLOT];
}

/* ---- live map ---- */

static int shard_grow(shard *s)
{
    uint32_t nc = s->cap ? s->cap * 2 : 256;
    cmh_live *ns = calloc(nc, sizeof *ns);
    if (!ns) return -1;
    for (uint32_t i = 0; i < s->cap; i++) {
        if (!s->slots[i].addr) continue;
        uint32_t j = (uint32_t)addr_hash(s->slots[i].addr) & (nc - 1);
        while (ns[j].addr) j = (j + 1) & (nc - 1);
        ns[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = ns;
    s->cap = nc;
    return 0;
}

static int live_insert_in(shard *tab, const cmh_live *l)
{
    shard *s = &tab[addr_hash(l->addr) >> 58];
    pthread_mutex_lock(&s->lock);
    if ((s->n + 1) * 4 > s->cap * 3 && shard_grow(s) != 0) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    uint32_t j = (uint32_t)addr_hash(l->addr) & (s->cap - 1);
    while (s->slots[j].addr && s->slots[j].addr != l->addr) j = (j + 1) & (s->cap - 1);
    if (!s->slots[j].addr) s->n++;
    s->slots[j] = *l; /* an address reused without a free we saw: the newer one wins */
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void shard_delete_at(shard *s, uint32_t j)
{
    uint32_t m = s->cap - 1;
    s->slots[j].addr = 0;
    s->n--;
    for (uint32_t k = (j + 1) & m; s->slots[k].addr; k = (k + 1) & m) {
        uint32_t home = (uint32_t)addr_hash(s->slots[k].addr) & m;
        if (((k - home) & m) >= ((k - j) & m)) {
            s->slots[j] = s->slots[k];
            s->slots[k].addr = 0;
            j = k;
        }
    }
}

static int live_insert(const cmh_live *l) { return live_insert_in(g_shard, l); }

static int live_remove_in(shard *tab, uint64_t addr, cmh_live *out)
{
    shard *s = &tab[addr_hash(addr) >> 58];
    pthread_mutex_lock(&s->lock);
    int found = 0;
    if (s->cap) {
        uint32_t j = (uint32_t)addr_hash(addr) & (s->cap - 1);
        for (; s->slots[j].addr; j = (j + 1) & (s->cap - 1))
            if (s->slots[j].addr == addr) {
                *out = s->slots[j];
                shard_delete_at(s, j);
                found = 1;
                break;
            }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

static int live_remove(uint64_t addr, cmh_live *out) { return live_remove_in(g_shard, addr, out); }

/* Change a live entry in place; fn returns 0 to leave it unchanged.  Returns whether it exists. */
static int live_update_in(shard *tab, uint64_t addr, int (*fn)(cmh_live *, void *), void *arg, cmh_live *copy)
{
    shard *s = &tab[addr_hash(addr) >> 58];
    int found = 0;
    pthread_mutex_lock(&s->lock);
    if (s->cap)
        for (uint32_t j = (uint32_t)addr_hash(addr) & (s->cap - 1); s->slots[j].addr; j = (j + 1) & (s->cap - 1))
            if (s->slots[j].addr == addr) {
                found = fn(&s->slots[j], arg) ? 1 : 2;
                if (copy) *copy = s->slots[j];
                break;
            }
    pthread_mutex_unlock(&s->lock);
    return found;
}

/* ---- ring ---- */

static void ring_append(dev_state *d, const cmh_rec_entry *e)
{
    d->total++;
    if (g_max_entries && d->count == g_max_entries) {
        d->ring[d->head] = *e;
        d->head = (d->head + 1) % g_max_entries;
        d->dropped++;
        return;
    }
    if (d->count == d->cap) {
        uint64_t nc = d->cap ? d->cap * 2 : 4096;
        if (g_max_entries && nc > g_max_entries) nc = g_max_entries;
        cmh_rec_entry *nr = realloc(d->ring, nc * sizeof *nr);
        if (!nr) {
            __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
            return;
        }
        d->ring = nr;
        d->cap = nc;
    }
    d->ring[(d->head + d->count) % d->cap] = *e; /* head is 0 until the ring is full */
    d->count++;
}

static void record(int device, int action, int kind, int flags, uint64_t addr, uint64_t size, uint64_t requested,
                   uint64_t stream, uint32_t stack, int64_t dalloc, int64_t dres, int count_kind, int64_t t)
{
    dev_state *d = dev_slot(device);
    pthread_mutex_lock(&d->lock);
    d->used = 1;
    d->alloc_cur += (uint64_t)dalloc;
    d->res_cur += (uint64_t)dres;
    if (d->alloc_cur > d->alloc_peak) d->alloc_peak = d->alloc_cur;
    if (d->res_cur > d->res_peak) d->res_peak = d->res_cur;
    if (count_kind == 1) d->nallocs++;
    else if (count_kind == 2) d->nfrees++;
    else if (count_kind == 3) d->nooms++;
    if (cmh_enabled_now == CMH_ENABLED_ALL) {
        cmh_rec_entry e = {t ? t : cmh_now_ticks(), addr, size, requested, stream, stack, (uint8_t)action, (uint8_t)flags,
                           (uint8_t)kind};
        ring_append(d, &e);
    }
    pthread_mutex_unlock(&d->lock);
}

void cmh_hist_segment_alloc(int device, int kind, uint64_t addr, uint64_t size, uint64_t requested,
                            uint64_t stream, int action)
{
    if (!cmh_enabled_now) return;
    ensure_init();
    cmh_first_touch();
    int ctx = cmh_context_now;
    uint32_t stack = ctx >= CMH_CONTEXT_STATE ? cmh_stack_capture() : 0;
    cmh_live l = {addr, size, requested, stream, 0, stack, (int16_t)device, (uint8_t)kind, CMH_EF_WHOLE_BLOCK};
    l.time_ns = cmh_now_ticks();
    if (live_insert(&l) != 0) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    record(device, action, kind, CMH_EF_WHOLE_BLOCK, addr, size, requested, stream,
           ctx >= CMH_CONTEXT_ALLOC ? stack : 0, (int64_t)size, (int64_t)size, 1, l.time_ns);
}

/* The stack a free entry carries: its own with context=all, the allocation's with alloc, else none
 * (PyTorch's context semantics). */
static inline uint32_t free_stack(uint32_t alloc_stack)
{
    int ctx = cmh_context_now;
    return ctx == CMH_CONTEXT_ALL ? cmh_stack_capture() : ctx >= CMH_CONTEXT_ALLOC ? alloc_stack : 0;
}

static void purge_blocks(uint64_t lo, uint64_t hi);

int cmh_hist_segment_free(uint64_t addr, uint64_t stream, int action, cmh_live *was)
{
    if (!cmh_enabled_now) return 0;
    ensure_init();
    if (!live_remove(addr, was)) return 0;
    int whole = (was->flags & CMH_EF_WHOLE_BLOCK) != 0;
    if (!whole) purge_blocks(addr, addr + was->size); /* an allocator's blocks go with their segment */
    uint32_t stack = free_stack(was->stack);
    if (!stream) stream = was->stream;
    record(was->device, action, was->kind, was->flags, addr, was->size, was->requested, stream, stack,
           whole ? -(int64_t)was->size : 0, -(int64_t)was->size, 2, 0);
    return 1;
}

void cmh_hist_free_undo(const cmh_live *was)
{
    /* The driver refused a free we had already recorded: the segment is still there (an
     * allocator's blocks in it, already recorded as freed, are not brought back). */
    if (live_insert(was) != 0) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    int act = was->kind == CMH_KIND_VMM ? CMH_ACT_SEGMENT_MAP : CMH_ACT_SEGMENT_ALLOC;
    int whole = (was->flags & CMH_EF_WHOLE_BLOCK) != 0;
    record(was->device, act, was->kind, was->flags, was->addr, was->size, was->requested, was->stream, 0,
           whole ? (int64_t)was->size : 0, (int64_t)was->size, 0, 0);
}

void cmh_hist_unmap(uint64_t lo, uint64_t size)
{
    if (!cmh_enabled_now || !size) return;
    ensure_init();
    uint64_t hi = lo + size;
    cmh_live hit[64];
    for (int si = 0; si < NSHARD; si++) {
        shard *s = &g_shard[si];
        for (;;) {
            int n = 0;
            pthread_mutex_lock(&s->lock);
            for (uint32_t j = 0; j < s->cap && n < 64;) {
                cmh_live *l = &s->slots[j];
                if (l->addr && l->kind == CMH_KIND_VMM && l->addr < hi && l->addr + l->size > lo) {
                    hit[n++] = *l;
                    shard_delete_at(s, j); /* may pull a later slot into j: look at j again */
                    continue;
                }
                j++;
            }
            pthread_mutex_unlock(&s->lock);
            for (int i = 0; i < n; i++) {
                cmh_live *l = &hit[i];
                uint64_t a = l->addr > lo ? l->addr : lo;
                uint64_t b = l->addr + l->size < hi ? l->addr + l->size : hi;
                uint32_t stack = free_stack(l->stack);
                int whole = (l->flags & CMH_EF_WHOLE_BLOCK) != 0;
                if (!whole) purge_blocks(a, b);
                record(l->device, CMH_ACT_SEGMENT_UNMAP, CMH_KIND_VMM, l->flags, a, b - a, b - a, l->stream, stack,
                       whole ? -(int64_t)(b - a) : 0, -(int64_t)(b - a), 2, 0);
                if (l->addr < a) { /* left part stays mapped */
                    cmh_live left = *l;
                    left.size = a - l->addr;
                    left.requested = left.size;
                    live_insert(&left);
                }
                if (l->addr + l->size > b) {
                    cmh_live right = *l;
                    right.addr = b;
                    right.size = l->addr + l->size - b;
                    right.requested = right.size;
                    live_insert(&right);
                }
            }
            if (n < 64) break;
        }
    }
}

/* ---- blocks reported by an allocator above the driver (cmh_block_*) ---- */

static int clear_whole(cmh_live *l, void *arg)
{
    (void)arg;
    if (!(l->flags & CMH_EF_WHOLE_BLOCK)) return 0;
    l->flags &= (uint8_t)~CMH_EF_WHOLE_BLOCK;
    return 1;
}

int cmh_hist_segment_managed(uint64_t addr)
{
    if (!cmh_enabled_now) return CMH_OK;
    ensure_init();
    cmh_live l;
    int r = live_update_in(g_shard, addr, clear_whole, NULL, &l);
    if (!r) return CMH_EINVAL; /* not a driver allocation the recorder saw */
    if (r == 2) return CMH_OK; /* already managed */
    /* The segment no longer holds one implied block: take it out of the counters.  Its
     * segment_alloc entry in the ring loses the implied block at export (fix_managed). */
    dev_state *d = dev_slot(l.device);
    pthread_mutex_lock(&d->lock);
    d->alloc_cur -= l.size;
    pthread_mutex_unlock(&d->lock);
    return CMH_OK;
}

int cmh_hist_block_alloc(int device, uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream)
{
    if (!cmh_enabled_now) return CMH_OK;
    ensure_init();
    cmh_first_touch();
    int ctx = cmh_context_now;
    uint32_t stack = ctx >= CMH_CONTEXT_STATE ? cmh_stack_capture() : 0;
    cmh_live l = {addr, size, requested, stream, cmh_now_ticks(), stack, (int16_t)device, CMH_KIND_DEVICE,
                  CMH_BLOCK_ACTIVE_ALLOCATED};
    if (live_insert_in(g_bshard, &l) != 0) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    record(device, CMH_ACT_ALLOC, CMH_KIND_DEVICE, 0, addr, size, requested, stream, ctx >= CMH_CONTEXT_ALLOC ? stack : 0,
           (int64_t)size, 0, 1, l.time_ns);
    return CMH_OK;
}

static int mark_pending(cmh_live *l, void *arg)
{
    (void)arg;
    if (l->flags != CMH_BLOCK_ACTIVE_ALLOCATED) return 0;
    l->flags = CMH_BLOCK_ACTIVE_PENDING_FREE; /* for blocks, flags holds the block state */
    return 1;
}

int cmh_hist_block_free_requested(uint64_t addr)
{
    if (!cmh_enabled_now) return CMH_OK;
    ensure_init();
    cmh_live l;
    int r = live_update_in(g_bshard, addr, mark_pending, NULL, &l);
    if (!r) return CMH_EINVAL;
    if (r == 2) return CMH_OK; /* already requested */
    uint32_t stack = free_stack(l.stack);
    record(l.device, CMH_ACT_FREE_REQUESTED, CMH_KIND_DEVICE, 0, addr, l.size, l.requested, l.stream, stack,
           -(int64_t)l.size, 0, 0, 0);
    return CMH_OK;
}

/* A block removed from the table: its free, as PyTorch writes one. */
static void record_block_gone(const cmh_live *l)
{
    uint32_t stack = free_stack(l->stack);
    /* freed at once: PyTorch's readers expect free_requested before free_completed, as its
     * allocator writes them for every free */
    if (l->flags == CMH_BLOCK_ACTIVE_ALLOCATED)
        record(l->device, CMH_ACT_FREE_REQUESTED, CMH_KIND_DEVICE, 0, l->addr, l->size, l->requested, l->stream, stack,
               -(int64_t)l->size, 0, 0, 0);
    record(l->device, CMH_ACT_FREE_COMPLETED, CMH_KIND_DEVICE, 0, l->addr, l->size, l->requested, l->stream, stack, 0, 0,
           2, 0);
}

int cmh_hist_block_free_completed(uint64_t addr)
{
    if (!cmh_enabled_now) return CMH_OK;
    ensure_init();
    cmh_live l;
    if (!live_remove_in(g_bshard, addr, &l)) return CMH_EINVAL;
    record_block_gone(&l);
    return CMH_OK;
}

/* The driver allocation under reported blocks is going: the blocks still in it were never freed
 * by their allocator (a bug there, or a teardown); they are freed here, before the segment, so
 * the trace stays consistent and a later allocation at the same address starts clean. */
static void purge_blocks(uint64_t lo, uint64_t hi)
{
    cmh_live hit[64];
    for (int si = 0; si < NSHARD; si++) {
        shard *s = &g_bshard[si];
        for (;;) {
            int n = 0;
            pthread_mutex_lock(&s->lock);
            for (uint32_t j = 0; j < s->cap && n < 64;) {
                cmh_live *l = &s->slots[j];
                if (l->addr && l->addr >= lo && l->addr < hi) {
                    hit[n++] = *l;
                    shard_delete_at(s, j); /* may pull a later slot into j: look at j again */
                    continue;
                }
                j++;
            }
            pthread_mutex_unlock(&s->lock);
            for (int i = 0; i < n; i++) record_block_gone(&hit[i]);
            if (n < 64) break;
        }
    }
}

void cmh_hist_pool_sample(int device, uint64_t pool, uint64_t reserved, uint64_t used, int64_t slack_delta)
{
    if (!cmh_enabled_now) return;
    ensure_init();
    record(device, CMH_ACT_POOL_SAMPLE, CMH_KIND_ASYNC, 0, pool, reserved, used, 0, 0, 0, slack_delta, 0, 0);
}

/* ---- marks and ranges ---- */

static pthread_mutex_t g_names_lock = PTHREAD_MUTEX_INITIALIZER;
static char **g_names; /* name id - 1 -> text */
static uint32_t g_nnames, g_cnames;

typedef struct rec_ann {
    int64_t ticks;
    uint32_t name;
    int16_t device;
    uint8_t stage;
} rec_ann;
static rec_ann *g_anns;
static uint32_t g_nanns, g_canns;

static uint32_t name_id(const char *name)
{
    pthread_mutex_lock(&g_names_lock);
    uint32_t id = 0;
    for (uint32_t i = g_nnames; i-- > 0;) /* marks repeat a few names: newest first */
        if (!strcmp(g_names[i], name)) {
            id = i + 1;
            goto out;
        }
    if (g_nnames == g_cnames) {
        uint32_t nc = g_cnames ? g_cnames * 2 : 64;
        char **nn = realloc(g_names, nc * sizeof *nn);
        if (!nn) goto out;
        g_names = nn;
        g_cnames = nc;
    }
    if ((g_names[g_nnames] = strdup(name))) id = ++g_nnames;
out:
    pthread_mutex_unlock(&g_names_lock);
    return id;
}

int cmh_hist_mark(int device, const char *name, int stage)
{
    if (!cmh_enabled_now) return CMH_OK;
    ensure_init();
    uint32_t id = name_id(name ? name : "");
    if (!id) {
        __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
        return CMH_ENOMEM;
    }
    int64_t t = cmh_now_ticks();
    if (stage != 2) /* a point mark, or a range's start: a checkpoint in the trace */
        record(device, CMH_ACT_MARK, CMH_KIND_DEVICE, 0, id, 0, 0, 0, 0, 0, 0, 0, t);
    if (stage) {
        pthread_mutex_lock(&g_names_lock);
        if (g_nanns == g_canns) {
            uint32_t nc = g_canns ? g_canns * 2 : 64;
            rec_ann *na = realloc(g_anns, nc * sizeof *na);
            if (na) g_anns = na, g_canns = nc;
        }
        if (g_nanns < g_canns) g_anns[g_nanns++] = (rec_ann){t, id, (int16_t)device, (uint8_t)(stage - 1)};
        pthread_mutex_unlock(&g_names_lock);
    }
    return CMH_OK;
}

void cmh_hist_oom(int device, uint64_t size, uint64_t stream, uint64_t device_free)
{
    if (!cmh_enabled_now) return;
    ensure_init();
    cmh_first_touch();
    uint32_t stack = cmh_context_now >= CMH_CONTEXT_ALLOC ? cmh_stack_capture() : 0;
    record(device, CMH_ACT_OOM, CMH_KIND_DEVICE, 0, device_free, size, size, stream, stack, 0, 0, 3, 0);
}

/* ---- control ---- */

static void lock_all_devices(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) pthread_mutex_lock(&g_dev[i].lock);
}

static void unlock_all_devices(void)
{
    for (int i = CMH_MAX_DEVICES; i >= 0; i--) pthread_mutex_unlock(&g_dev[i].lock);
}

void cmh_hist_clear(void)
{
    ensure_init();
    lock_all_devices();
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        g_dev[i].head = g_dev[i].count = g_dev[i].dropped = 0;
    }
    unlock_all_devices();
}

void cmh_hist_set_capacity(uint64_t max_entries)
{
    ensure_init();
    lock_all_devices();
    if (max_entries != g_max_entries) {
        for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
            dev_state *d = &g_dev[i];
            if (!d->count) {
                free(d->ring);
                d->ring = NULL;
                d->cap = d->head = 0;
                continue;
            }
            uint64_t keep = max_entries && d->count > max_entries ? max_entries : d->count;
            uint64_t nc = keep;
            cmh_rec_entry *nr = malloc(nc * sizeof *nr);
            if (!nr) continue; /* keep the old ring and its limit */
            uint64_t skip = d->count - keep;
            for (uint64_t k = 0; k < keep; k++) nr[k] = d->ring[(d->head + skip + k) % d->cap];
            free(d->ring);
            d->ring = nr;
            d->cap = nc;
            d->head = 0;
            d->count = keep;
            d->dropped += skip;
        }
        g_max_entries = max_entries;
    }
    unlock_all_devices();
}

/* Called in the child after fork(): it starts a fresh history of its own. */
void cmh_hist_reset_after_fork(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        free(d->ring);
        memset(d, 0, sizeof *d);
        pthread_mutex_init(&d->lock, NULL);
    }
    for (int i = 0; i < NSHARD; i++) {
        shard *tabs[2] = {&g_shard[i], &g_bshard[i]};
        for (int k = 0; k < 2; k++) {
            pthread_mutex_init(&tabs[k]->lock, NULL);
            free(tabs[k]->slots);
            tabs[k]->slots = NULL;
            tabs[k]->cap = tabs[k]->n = 0;
        }
    }
    pthread_mutex_init(&g_names_lock, NULL);
    g_nanns = 0;
    cmh_touched = 0;
    cmh_lost = 0;
}

void cmh_hist_atfork_prepare(void)
{
    ensure_init();
    lock_all_devices();
    for (int i = 0; i < NSHARD; i++) pthread_mutex_lock(&g_shard[i].lock);
    for (int i = 0; i < NSHARD; i++) pthread_mutex_lock(&g_bshard[i].lock);
    pthread_mutex_lock(&g_names_lock);
}

void cmh_hist_atfork_parent(void)
{
    pthread_mutex_unlock(&g_names_lock);
    for (int i = NSHARD - 1; i >= 0; i--) pthread_mutex_unlock(&g_bshard[i].lock);
    for (int i = NSHARD - 1; i >= 0; i--) pthread_mutex_unlock(&g_shard[i].lock);
    unlock_all_devices();
}

int cmh_hist_stats(cmh_device_stats *out, int cap)
{
    ensure_init();
    int n = 0;
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        pthread_mutex_lock(&d->lock);
        if (d->used) {
            if (n < cap) {
                cmh_device_stats *o = &out[n];
                o->device = i == CMH_HOST_SLOT ? -1 : i;
                o->allocated_current = d->alloc_cur;
                o->allocated_peak = d->alloc_peak;
                o->reserved_current = d->res_cur;
                o->reserved_peak = d->res_peak;
                o->num_allocs = d->nallocs;
                o->num_frees = d->nfrees;
                o->num_ooms = d->nooms;
                o->entries_recorded = d->total;
                o->entries_dropped = d->dropped;
            }
            n++;
        }
        pthread_mutex_unlock(&d->lock);
    }
    return n;
}

/* ---- export for the dump ---- */

static int cmp_live(const void *a, const void *b)
{
    const cmh_live *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Copies every live record of a table (each shard under its lock), sorted by device and address. */
static int collect_live(shard *tab, cmh_live **out, size_t *count)
{
    size_t n = 0, cap = 0;
    cmh_live *all = NULL;
    for (int si = 0; si < NSHARD; si++) {
        shard *sh = &tab[si];
        pthread_mutex_lock(&sh->lock);
        if (n + sh->n > cap) {
            size_t nc = (n + sh->n) * 2 + 16;
            cmh_live *na = realloc(all, nc * sizeof *na);
            if (!na) {
                pthread_mutex_unlock(&sh->lock);
                free(all);
                return CMH_ENOMEM;
            }
            all = na;
            cap = nc;
        }
        for (uint32_t j = 0; j < sh->cap; j++)
            if (sh->slots[j].addr) all[n++] = sh->slots[j];
        pthread_mutex_unlock(&sh->lock);
    }
    if (n) qsort(all, n, sizeof *all, cmp_live);
    *out = all;
    *count = n;
    return CMH_OK;
}

/* A segment an allocator made managed (cmh_segment_managed) after its segment_alloc entry was
 * written: that entry still says "one implied block".  Walking the ring backwards, every managed
 * segment (live now, or freed later with its managed flags) takes the flag off its latest
 * segment_alloc / segment_map entry. */
static int fix_managed(cmh_rec_entry *e, uint64_t n, const cmh_live *live, size_t nl, int device)
{
    uint64_t want = 16;
    for (size_t k = 0; k < nl; k++) want += live[k].device == device && !(live[k].flags & CMH_EF_WHOLE_BLOCK);
    for (uint64_t k = 0; k < n; k++)
        want += (e[k].action == CMH_ACT_SEGMENT_FREE || e[k].action == CMH_ACT_SEGMENT_UNMAP) &&
                !(e[k].flags & CMH_EF_WHOLE_BLOCK);
    if (want == 16) return CMH_OK; /* no allocator above the driver here */
    uint64_t cap = 32;
    while (cap < want * 2) cap <<= 1;
    uint64_t *set = calloc(cap, sizeof *set), gone = ~0ull; /* 0 = empty, gone = removed */
    if (!set) return CMH_ENOMEM;
#define SLOT(a) ((uint64_t)(addr_hash(a) >> 20) & (cap - 1))
    for (size_t k = 0; k < nl; k++)
        if (live[k].device == device && !(live[k].flags & CMH_EF_WHOLE_BLOCK)) {
            uint64_t j = SLOT(live[k].addr);
            while (set[j] && set[j] != gone) j = (j + 1) & (cap - 1);
            set[j] = live[k].addr;
        }
    for (uint64_t k = n; k-- > 0;) {
        cmh_rec_entry *x = &e[k];
        int freed = x->action == CMH_ACT_SEGMENT_FREE || x->action == CMH_ACT_SEGMENT_UNMAP;
        int made = x->action == CMH_ACT_SEGMENT_ALLOC || x->action == CMH_ACT_SEGMENT_MAP;
        if (freed && !(x->flags & CMH_EF_WHOLE_BLOCK)) {
            uint64_t j = SLOT(x->addr);
            while (set[j] && set[j] != gone) j = (j + 1) & (cap - 1);
            set[j] = x->addr;
        } else if (made) {
            for (uint64_t j = SLOT(x->addr); set[j]; j = (j + 1) & (cap - 1))
                if (set[j] == x->addr) {
                    x->flags &= (uint8_t)~CMH_EF_WHOLE_BLOCK;
                    set[j] = gone;
                    break;
                }
        }
    }
#undef SLOT
    free(set);
    return CMH_OK;
}

int cmh_hist_export(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg)
{
    ensure_init();
    int64_t now_ticks = cmh_now_ticks(), now_ns = cmh_now_ns();
    /* the live segments, and the blocks allocators reported, each sorted by device and address */
    size_t nl = 0, nb = 0;
    cmh_live *all = NULL, *blocks = NULL;
    if (collect_live(g_shard, &all, &nl) != CMH_OK) return CMH_ENOMEM;
    if (collect_live(g_bshard, &blocks, &nb) != CMH_OK) {
        free(all);
        return CMH_ENOMEM;
    }
    /* Copy under the locks, convert (and symbolize) after releasing them. */
    int rc = CMH_OK;
    cmh_rec_entry *copy = NULL;
    for (int i = 0; i <= CMH_MAX_DEVICES && rc == CMH_OK; i++) {
        dev_state *d = &g_dev[i];
        pthread_mutex_lock(&d->lock);
        if (!d->used) {
            pthread_mutex_unlock(&d->lock);
            continue;
        }
        uint64_t n = d->count, dropped = d->dropped;
        copy = n ? malloc(n * sizeof *copy) : NULL;
        if (n && !copy) {
            pthread_mutex_unlock(&d->lock);
            rc = CMH_ENOMEM;
            break;
        }
        for (uint64_t k = 0; k < n; k++) copy[k] = d->ring[(d->head + k) % d->cap];
        pthread_mutex_unlock(&d->lock);
        int device = i == CMH_HOST_SLOT ? -1 : i;
        if (fix_managed(copy, n, all, nl, device) != CMH_OK || cmh_snapshot_add_trace(s, device, dropped, NULL) != CMH_OK)
            rc = CMH_ENOMEM;
        for (uint64_t k = 0; k < n && rc == CMH_OK; k++) {
            const cmh_rec_entry *r = &copy[k];
            cmh_entry e;
            memset(&e, 0, sizeof e);
            e.time_ns = cmh_ticks_to_ns(r->time_ns, now_ticks, now_ns);
            e.addr = r->addr;
            e.size = r->size;
            e.requested = r->requested;
            e.stream = r->stream;
            e.stack = r->stack ? stack_map(r->stack, arg) : 0;
            if (r->action == CMH_ACT_MARK) { /* addr holds the mark's name id */
                pthread_mutex_lock(&g_names_lock);
                const char *nm = r->addr && r->addr <= g_nnames ? g_names[r->addr - 1] : "";
                rc = cmh_strtab_intern(&s->strings, nm, strlen(nm), &e.name);
                pthread_mutex_unlock(&g_names_lock);
                e.addr = 0;
            }
            e.action = r->action;
            e.flags = r->flags;
            e.kind = r->kind;
            if (rc == CMH_OK && cmh_snapshot_add_entry(s, &e) != CMH_OK) rc = CMH_ENOMEM;
        }
        free(copy);
        copy = NULL;
    }
    if (rc != CMH_OK) {
        free(all);
        free(blocks);
        return rc;
    }

    size_t bi = 0;
    for (size_t k = 0; k < nl && rc == CMH_OK; k++) {
        const cmh_live *l = &all[k];
        cmh_segment g;
        memset(&g, 0, sizeof g);
        g.device = l->device;
        g.kind = l->kind;
        int whole = (l->flags & CMH_EF_WHOLE_BLOCK) != 0;
        g.flags = (uint8_t)((whole ? CMH_SEG_WHOLE_BLOCK : 0) | (l->kind == CMH_KIND_VMM ? CMH_SEG_EXPANDABLE : 0));
        g.addr = l->addr;
        g.size = l->size;
        g.stream = l->stream;
        g.stack = l->stack ? stack_map(l->stack, arg) : 0;
        g.time_ns = cmh_ticks_to_ns(l->time_ns, now_ticks, now_ns);
        if (whole) g.pool = l->size <= (1u << 20) ? CMH_POOL_SMALL : CMH_POOL_LARGE;
        else g.pool = l->size <= (2u << 20) ? CMH_POOL_SMALL : CMH_POOL_LARGE; /* a caching allocator's segments */
        if (cmh_snapshot_add_segment(s, &g, NULL) != CMH_OK) {
            rc = CMH_ENOMEM;
            break;
        }
        if (whole) {
            cmh_block b = {l->addr, l->size, l->requested, g.stack, CMH_BLOCK_ACTIVE_ALLOCATED, g.time_ns};
            if (cmh_snapshot_add_block(s, &b) != CMH_OK) rc = CMH_ENOMEM;
            /* contiguous maps in one reservation: one growing segment, a block per map */
            uint64_t lo, hi, end = l->addr + l->size;
            if (l->kind == CMH_KIND_VMM && cmh_vmm_reservation(l->addr, &lo, &hi)) {
                while (rc == CMH_OK && k + 1 < nl && all[k + 1].kind == CMH_KIND_VMM && all[k + 1].device == l->device &&
                       all[k + 1].addr == end && end + all[k + 1].size <= hi && (all[k + 1].flags & CMH_EF_WHOLE_BLOCK)) {
                    const cmh_live *m = &all[++k];
                    cmh_block mb = {m->addr, m->size, m->requested, m->stack ? stack_map(m->stack, arg) : 0,
                                    CMH_BLOCK_ACTIVE_ALLOCATED, cmh_ticks_to_ns(m->time_ns, now_ticks, now_ns)};
                    if (cmh_snapshot_add_block(s, &mb) != CMH_OK) rc = CMH_ENOMEM;
                    end += m->size;
                }
                s->segments[s->nsegments - 1].size = end - l->addr;
            }
            continue;
        }
        /* reported blocks inside it, with inactive blocks in the gaps so that they tile it */
        uint64_t at = l->addr, end = l->addr + l->size;
        while (bi < nb && (blocks[bi].device < l->device || (blocks[bi].device == l->device && blocks[bi].addr < at))) {
            __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED); /* a block outside every segment we know */
            bi++;
        }
        for (; bi < nb && blocks[bi].device == l->device && blocks[bi].addr < end && rc == CMH_OK; bi++) {
            const cmh_live *x = &blocks[bi];
            if (x->addr > at) {
                cmh_block gap = {at, x->addr - at, 0, 0, CMH_BLOCK_INACTIVE, 0};
                if (cmh_snapshot_add_block(s, &gap) != CMH_OK) rc = CMH_ENOMEM;
            }
            uint64_t sz = x->addr + x->size > end ? end - x->addr : x->size;
            cmh_block b = {x->addr, sz, x->requested, x->stack ? stack_map(x->stack, arg) : 0, x->flags,
                           cmh_ticks_to_ns(x->time_ns, now_ticks, now_ns)};
            if (cmh_snapshot_add_block(s, &b) != CMH_OK) rc = CMH_ENOMEM;
            at = x->addr + sz;
        }
        if (at < end && rc == CMH_OK) {
            cmh_block gap = {at, end - at, 0, 0, CMH_BLOCK_INACTIVE, 0};
            if (cmh_snapshot_add_block(s, &gap) != CMH_OK) rc = CMH_ENOMEM;
        }
    }
    free(blocks);
    /* ranges (cmh_range_push/pop) as PyTorch's external annotations */
    pthread_mutex_lock(&g_names_lock);
    for (uint32_t i = 0; i < g_nanns && rc == CMH_OK; i++) {
        cmh_annotation a = {0, g_anns[i].stage, g_anns[i].device, cmh_ticks_to_ns(g_anns[i].ticks, now_ticks, now_ns)};
        const char *nm = g_anns[i].name && g_anns[i].name <= g_nnames ? g_names[g_anns[i].name - 1] : "";
        if (cmh_strtab_intern(&s->strings, nm, strlen(nm), &a.name) != CMH_OK || cmh_snapshot_add_annotation(s, &a) != CMH_OK)
            rc = CMH_ENOMEM;
    }
    pthread_mutex_unlock(&g_names_lock);
    if (rc != CMH_OK) {
        free(all);
        return rc;
    }
    free(all);
    return CMH_OK;
}
