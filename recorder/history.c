/*
 * history.c - what the recorder keeps: per-device rings of trace entries, the live segments
 * (driver allocations other than VMM maps, which vmm.c keeps in address order) and each
 * device's counters.
 *
 * Invariants:
 *  - A device's ring holds its most recent entries in append order; position head is the
 *    oldest.  It is a list of chunks of CHUNK entries (the last one of a bounded ring may be
 *    shorter), so it grows by a chunk and never moves an entry: with max_entries = 0 it grows
 *    without bound (head stays 0, and an entry once written is never written again until a
 *    clear, which is what lets a dump read it in place: cmh_hist_view_ring); otherwise it grows
 *    up to max_entries and then overwrites the oldest entry, counting it in `dropped`.
 *  - The helper thread makes the next chunk ahead (`spare`, its pages already touched) when a
 *    ring comes within half a chunk of its end, so growth is a pointer store on the hot path;
 *    a malloc there is only the fallback when the helper is late or absent.
 *  - A device's counters change only under that device's lock, together with the entry that
 *    explains the change (cmh_hist_record).
 *  - Entry times never decrease along a ring: a thread stamps its event before it takes the
 *    lock, so one that was overtaken gets the time of the entry before it.
 *  - A free is recorded *before* the driver frees, so no later allocation of the same address
 *    can be recorded ahead of it; if the driver refuses, cmh_hist_free_undo puts it back.
 *  - No lock here is ever held across a driver call, a stack capture or a malloc of user size.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

int cmh_touched;
uint64_t cmh_lost;

typedef struct dev_state {
    cmh_mutex lock;
    cmh_rec_entry **chunks; /* chunk i holds positions [i * CHUNK, (i + 1) * CHUNK) */
    uint64_t nchunks, dircap;
    cmh_rec_entry *spare; /* a whole chunk the helper made ahead, or NULL */
    uint64_t ask_at;      /* the count at which the helper is asked for the next spare */
    uint64_t cap, head, count, dropped, total;
    uint64_t alloc_cur, alloc_peak, res_cur, res_peak, nallocs, nfrees, nooms;
    int64_t last_ticks; /* of the newest entry: the ring's times never go backwards */
    int used;
} dev_state;

static dev_state g_dev[CMH_MAX_DEVICES + 1];
static uint64_t g_max_entries; /* 0 = unlimited; written with every device lock held */
/* Held by a dump that reads an unlimited ring in place (cmh_hist_view_ring), and by whatever
 * would rewrite entries under it (a clear, a new capacity); never by the hooks.  Taken before
 * any device lock. */
static cmh_mutex g_view_lock = CMH_MUTEX_INITIALIZER;
static int g_spare_asked; /* some device wants a spare chunk: the helper makes it */
static cmh_livetab *g_segs;    /* driver allocations, VMM maps aside */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void take_reference(void);

static int g_inited; /* set last by init_once: the hooks test it before paying for pthread_once */

static void init_once(void)
{
    take_reference();
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        cmh_mutex_init(&g_dev[i].lock);
        g_dev[i].ask_at = UINT64_MAX;
    }
    g_max_entries = cmh_cfg.max_entries;
    g_segs = cmh_live_new(); /* NULL: out of memory at start-up; every segment is then lost */
    __atomic_store_n(&g_inited, 1, __ATOMIC_RELEASE);
}

void cmh_hist_ensure_init(void)
{
    if (CMH_UNLIKELY(!__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE))) pthread_once(&g_once, init_once);
}

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

static inline dev_state *dev_slot(int device)
{
    return &g_dev[device >= 0 && device < CMH_MAX_DEVICES ? device : CMH_HOST_SLOT];
}

/* ---- threads ---- */

static uint32_t g_threads;
/* initial-exec: a fixed offset from the thread pointer, not a __tls_get_addr call per entry (the
 * library is preloaded or linked, so its few bytes of TLS come from the static block) */
static __thread uint32_t t_thread __attribute__((tls_model("initial-exec")));

/* A number, not the OS thread id: small, never reused within the record, and a forked child's
 * thread keeps the one it had (its entries stay its own). */
uint32_t cmh_hist_thread(void)
{
    if (!t_thread) t_thread = __atomic_add_fetch(&g_threads, 1, __ATOMIC_RELAXED);
    return t_thread < CMH_THREAD_MAX ? t_thread : CMH_THREAD_MAX;
}

/* ---- ring ---- */

#define CHUNK_BITS CMH_RING_CHUNK_BITS
#define CHUNK (1ull << CHUNK_BITS) /* 3 MiB of entries */
#define CHUNK_MASK (CHUNK - 1)

static inline cmh_rec_entry *at_pos(const dev_state *d, uint64_t p) { return &d->chunks[p >> CHUNK_BITS][p & CHUNK_MASK]; }

/* The entry k places after the oldest. */
static inline cmh_rec_entry *nth(const dev_state *d, uint64_t k)
{
    uint64_t p = d->head + k;
    return at_pos(d, p >= d->cap ? p - d->cap : p);
}

static void free_chunks(dev_state *d)
{
    for (uint64_t i = 0; i < d->nchunks; i++) free(d->chunks[i]);
    free(d->chunks);
    free(d->spare);
    d->chunks = NULL;
    d->spare = NULL;
    d->nchunks = d->dircap = d->cap = d->head = 0;
    d->ask_at = UINT64_MAX;
}

/* When the ring can still grow past cap, ask for a spare once half of the last chunk is used. */
static void set_ask(dev_state *d)
{
    int more = !g_max_entries || d->cap + CHUNK <= g_max_entries; /* a whole chunk would be used */
    d->ask_at = more && !d->spare ? d->cap - CHUNK / 2 : UINT64_MAX;
}

/* One more chunk at the end of a ring that is full and unwrapped (head 0); -1 out of memory. */
static int grow(dev_state *d)
{
    assert(cmh_held(&d->lock) && d->head == 0 && d->count == d->cap);
    uint64_t want = CHUNK;
    if (g_max_entries && g_max_entries - d->cap < want) want = g_max_entries - d->cap;
    if (d->nchunks == d->dircap) {
        uint64_t nc = d->dircap ? d->dircap * 2 : 16;
        cmh_rec_entry **nd = realloc(d->chunks, nc * sizeof *nd); /* 8 bytes a chunk: rare and small */
        if (!nd) return -1;
        d->chunks = nd;
        d->dircap = nc;
    }
    cmh_rec_entry *c;
    if (want == CHUNK && d->spare) {
        c = d->spare;
        d->spare = NULL;
    } else if (!(c = malloc(want * sizeof *c))) return -1;
    d->chunks[d->nchunks++] = c;
    d->cap += want;
    set_ask(d);
    return 0;
}

static void ask_spare(dev_state *d)
{
    d->ask_at = UINT64_MAX;
    if (!__atomic_exchange_n(&g_spare_asked, 1, __ATOMIC_ACQ_REL)) cmh_helper_wake();
}

static void ring_append(dev_state *d, const cmh_rec_entry *e)
{
    assert(cmh_held(&d->lock));
    d->total++;
    cmh_flight_entry((int)(d - g_dev), d->total, e); /* the file first: a death in between loses nothing */
    if (g_max_entries && d->count == g_max_entries) {
        *at_pos(d, d->head) = *e;
        if (++d->head == g_max_entries) d->head = 0; /* no division on the hot path */
        d->dropped++;
        return;
    }
    if (CMH_UNLIKELY(d->count == d->cap) && grow(d) != 0) {
        cmh_count_lost(1);
        return;
    }
    *nth(d, d->count) = *e;
    if (CMH_UNLIKELY(++d->count == d->ask_at)) ask_spare(d);
}

int cmh_hist_spare_wanted(void) { return __atomic_load_n(&g_spare_asked, __ATOMIC_ACQUIRE); }

/* The helper thread: a spare chunk, its pages touched, for each ring that asked. */
void cmh_hist_make_spares(void)
{
    __atomic_store_n(&g_spare_asked, 0, __ATOMIC_RELEASE);
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        cmh_lock(&d->lock);
        int want = !d->spare && d->ask_at == UINT64_MAX && d->cap && d->cap - d->count <= CHUNK / 2 &&
                   (!g_max_entries || d->cap + CHUNK <= g_max_entries);
        cmh_unlock(&d->lock);
        if (!want) continue;
        cmh_rec_entry *c = malloc(CHUNK * sizeof *c);
        if (!c) continue; /* the hot path will try itself */
        memset(c, 0, CHUNK * sizeof *c); /* the page faults here, not in the hooks */
        cmh_lock(&d->lock);
        if (!d->spare && (!g_max_entries || d->cap + CHUNK <= g_max_entries)) d->spare = c, c = NULL;
        cmh_unlock(&d->lock);
        free(c);
    }
}

void cmh_hist_record(int device, int action, int kind, int flags, uint64_t addr, uint64_t size, uint64_t requested,
                     uint64_t stream, uint32_t stack, int64_t dalloc, int64_t dres, int count_kind, int64_t ticks)
{
    cmh_hist_ensure_init();
    dev_state *d = dev_slot(device);
    cmh_lock(&d->lock);
    d->used = 1;
    d->alloc_cur += (uint64_t)dalloc;
    d->res_cur += (uint64_t)dres;
    if (d->alloc_cur > d->alloc_peak) d->alloc_peak = d->alloc_cur;
    if (d->res_cur > d->res_peak) d->res_peak = d->res_cur;
    if (count_kind == CMH_COUNT_ALLOC) d->nallocs++;
    else if (count_kind == CMH_COUNT_FREE) d->nfrees++;
    else if (count_kind == CMH_COUNT_OOM) d->nooms++;
    if (cmh_rec_enabled() == CMH_ENABLED_ALL) {
        if (!ticks) ticks = cmh_now_ticks();
        if (ticks < d->last_ticks) ticks = d->last_ticks;
        d->last_ticks = ticks;
        cmh_rec_entry e = {ticks, addr, size, requested, stream, stack, cmh_hist_thread(), (unsigned)action & 15,
                           (unsigned)kind & 7, (unsigned)flags & 15};
        ring_append(d, &e);
    }
    cmh_unlock(&d->lock);
}

void cmh_hist_adjust_allocated(int device, int64_t dalloc)
{
    dev_state *d = dev_slot(device);
    cmh_lock(&d->lock);
    d->alloc_cur += (uint64_t)dalloc;
    cmh_unlock(&d->lock);
}

uint32_t cmh_hist_free_stack(uint32_t alloc_stack)
{
    int ctx = cmh_rec_context();
    return ctx == CMH_CONTEXT_ALL ? cmh_stack_capture() : ctx >= CMH_CONTEXT_ALLOC ? alloc_stack : 0;
}

/* ---- segments ---- */

void cmh_hist_segment_alloc(int device, int kind, uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream,
                            uint64_t pool, int action)
{
    if (!cmh_rec_enabled()) return;
    cmh_hist_ensure_init();
    cmh_first_touch();
    int ctx = cmh_rec_context();
    uint32_t stack = ctx >= CMH_CONTEXT_STATE ? cmh_stack_capture() : 0;
    cmh_live l = {addr, size, requested, stream, cmh_now_ticks(), pool, stack, (int16_t)device, (uint8_t)kind,
                  CMH_EF_WHOLE_BLOCK};
    if (!g_segs || cmh_live_insert(g_segs, &l) != 0) cmh_count_lost(1);
    cmh_hist_record(device, action, kind, CMH_EF_WHOLE_BLOCK, addr, size, requested, stream,
                    ctx >= CMH_CONTEXT_ALLOC ? stack : 0, (int64_t)size, (int64_t)size, CMH_COUNT_ALLOC, l.ticks);
}

int cmh_hist_segment_free(uint64_t addr, uint64_t stream, int action, cmh_live *was)
{
    if (!cmh_rec_enabled()) return 0;
    cmh_hist_ensure_init();
    if (!g_segs || !cmh_live_remove(g_segs, addr, was)) return 0;
    int whole = (was->flags & CMH_EF_WHOLE_BLOCK) != 0;
    if (!whole) cmh_blocks_segment_gone(addr, addr + was->size); /* an allocator's blocks go with it */
    uint32_t stack = cmh_hist_free_stack(was->stack);
    if (!stream) stream = was->stream;
    cmh_hist_record(was->device, action, was->kind, was->flags, addr, was->size, was->requested, stream, stack,
                    whole ? -(int64_t)was->size : 0, -(int64_t)was->size, CMH_COUNT_FREE, 0);
    return 1;
}

void cmh_hist_free_undo(const cmh_live *was)
{
    /* The driver refused a free we had already recorded: the segment is still there (an
     * allocator's blocks in it, already recorded as freed, are not brought back). */
    if (!g_segs || cmh_live_insert(g_segs, was) != 0) cmh_count_lost(1);
    int whole = (was->flags & CMH_EF_WHOLE_BLOCK) != 0;
    cmh_hist_record(was->device, CMH_ACT_SEGMENT_ALLOC, was->kind, was->flags, was->addr, was->size, was->requested,
                    was->stream, 0, whole ? (int64_t)was->size : 0, (int64_t)was->size, CMH_COUNT_NONE, 0);
}

static int clear_whole(cmh_live *l, void *arg)
{
    (void)arg;
    if (!(l->flags & CMH_EF_WHOLE_BLOCK)) return 0;
    l->flags &= (uint8_t)~CMH_EF_WHOLE_BLOCK;
    return 1;
}

int cmh_hist_segment_managed(uint64_t addr, cmh_live *seg)
{
    cmh_hist_ensure_init();
    int r = g_segs ? cmh_live_update(g_segs, addr, clear_whole, NULL, seg) : 0;
    if (!r) r = cmh_vmm_update(addr, clear_whole, NULL, seg);
    if (!r) return CMH_EINVAL; /* not a driver allocation the recorder saw */
    if (r == 2) return CMH_OK; /* already managed */
    /* The segment no longer holds one implied block: take it out of the counters.  Its
     * segment_alloc entry in the ring loses the implied block at export (export.c). */
    cmh_hist_adjust_allocated(seg->device, -(int64_t)seg->size);
    return 1;
}

void cmh_hist_oom(int device, uint64_t size, uint64_t stream, uint64_t device_free)
{
    if (!cmh_rec_enabled()) return;
    cmh_hist_ensure_init();
    cmh_first_touch();
    uint32_t stack = cmh_rec_context() >= CMH_CONTEXT_ALLOC ? cmh_stack_capture() : 0;
    cmh_hist_record(device, CMH_ACT_OOM, CMH_KIND_DEVICE, 0, device_free, size, size, stream, stack, 0, 0, CMH_COUNT_OOM, 0);
}

void cmh_hist_pool_sample(int device, uint64_t pool, uint64_t reserved, uint64_t used, int64_t slack_delta)
{
    if (!cmh_rec_enabled()) return;
    cmh_hist_record(device, CMH_ACT_POOL_SAMPLE, CMH_KIND_ASYNC, 0, pool, reserved, used, 0, 0, 0, slack_delta,
                    CMH_COUNT_NONE, 0);
}

/* ---- control ---- */

static void lock_all_devices(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) cmh_lock(&g_dev[i].lock);
}

static void unlock_all_devices(void)
{
    for (int i = CMH_MAX_DEVICES; i >= 0; i--) cmh_unlock(&g_dev[i].lock);
}

void cmh_hist_clear(void)
{
    cmh_hist_ensure_init();
    cmh_lock(&g_view_lock); /* no dump is reading a ring in place */
    lock_all_devices();
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        g_dev[i].head = g_dev[i].count = g_dev[i].dropped = 0;
        set_ask(&g_dev[i]);
        if (g_dev[i].total) cmh_flight_clear(i, g_dev[i].total); /* entry numbers go on: the file drops what came before */
    }
    unlock_all_devices();
    cmh_unlock(&g_view_lock);
}

/* The last `keep` entries of d, oldest first, into a new list of chunks sized for max_entries
 * (the rule grow() follows); -1 out of memory, d unchanged. */
static int rebuild(dev_state *d, uint64_t keep, uint64_t max_entries)
{
    uint64_t n = (keep + CHUNK - 1) / CHUNK, cap = 0;
    cmh_rec_entry **nc = calloc(n ? n : 1, sizeof *nc);
    if (!nc) return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t want = max_entries && max_entries - cap < CHUNK ? max_entries - cap : CHUNK;
        if (!(nc[i] = malloc(want * sizeof **nc))) {
            while (i--) free(nc[i]);
            free(nc);
            return -1;
        }
        cap += want;
    }
    uint64_t skip = d->count - keep;
    for (uint64_t k = 0; k < keep; k++) nc[k >> CHUNK_BITS][k & CHUNK_MASK] = *nth(d, skip + k);
    uint64_t dropped = d->dropped + skip;
    free_chunks(d);
    d->chunks = nc;
    d->nchunks = d->dircap = n;
    d->cap = cap;
    d->head = 0;
    d->count = keep;
    d->dropped = dropped;
    return 0;
}

void cmh_hist_set_capacity(uint64_t max_entries)
{
    cmh_hist_ensure_init();
    cmh_lock(&g_view_lock);
    lock_all_devices();
    if (max_entries != g_max_entries) {
        for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
            dev_state *d = &g_dev[i];
            if (!d->count) {
                free_chunks(d);
                continue;
            }
            uint64_t keep = max_entries && d->count > max_entries ? max_entries : d->count;
            if (rebuild(d, keep, max_entries) != 0) continue; /* keep the old ring and its limit */
        }
        g_max_entries = max_entries;
        for (int i = 0; i <= CMH_MAX_DEVICES; i++) set_ask(&g_dev[i]);
        cmh_flight_set_capacity(max_entries);
    }
    unlock_all_devices();
    cmh_unlock(&g_view_lock);
}

int cmh_hist_stats(cmh_device_stats *out, int cap)
{
    cmh_hist_ensure_init();
    int n = 0;
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        cmh_lock(&d->lock);
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
        cmh_unlock(&d->lock);
    }
    return n;
}

int cmh_hist_copy_ring(int slot, cmh_rec_entry **out, uint64_t *n, uint64_t *dropped, uint64_t *seq, int *rc)
{
    cmh_hist_ensure_init();
    dev_state *d = &g_dev[slot];
    *rc = CMH_OK;
    *out = NULL;
    cmh_lock(&d->lock);
    int used = d->used;
    *n = d->count;
    *dropped = d->dropped;
    *seq = d->total;
    if (used && d->count) {
        *out = malloc(d->count * sizeof **out);
        if (!*out) *rc = CMH_ENOMEM;
        else
            for (uint64_t k = 0; k < d->count; k++) (*out)[k] = *nth(d, k);
    }
    cmh_unlock(&d->lock);
    return used;
}

int cmh_hist_view_ring(int slot, cmh_ring_view *v, uint64_t *dropped, uint64_t *seq, int *rc)
{
    cmh_hist_ensure_init();
    dev_state *d = &g_dev[slot];
    memset(v, 0, sizeof *v);
    *rc = CMH_OK;
    cmh_lock(&g_view_lock);
    cmh_lock(&d->lock);
    int used = d->used;
    *dropped = d->dropped;
    *seq = d->total;
    if (used && d->count) {
        const char *copy = getenv("CUMEMHIST_DUMP_COPY"); /* "1": copy it anyway (the old way, to compare) */
        if (!g_max_entries && !(copy && !strcmp(copy, "1"))) {
            /* unlimited: [0, count) is written once and stays where it is; only the chunk list
             * can move (it grows), so the view keeps a copy of that alone */
            assert(d->head == 0);
            v->chunks = malloc(d->nchunks * sizeof *v->chunks);
            if (v->chunks) {
                memcpy(v->chunks, d->chunks, d->nchunks * sizeof *v->chunks);
                v->n = d->count;
                v->locked = 1;
            }
        } else if ((v->copy = malloc(d->count * sizeof *v->copy))) { /* bounded: the oldest are overwritten */
            for (uint64_t k = 0; k < d->count; k++) v->copy[k] = *nth(d, k);
            v->n = d->count;
        }
        if (!v->n) *rc = CMH_ENOMEM;
    }
    cmh_unlock(&d->lock);
    if (!v->locked) cmh_unlock(&g_view_lock);
    return used;
}

void cmh_hist_view_release(cmh_ring_view *v)
{
    free(v->chunks);
    free(v->copy);
    if (v->locked) cmh_unlock(&g_view_lock);
    memset(v, 0, sizeof *v);
}

int cmh_hist_collect_segments(cmh_live **out, size_t *n)
{
    cmh_hist_ensure_init();
    if (!g_segs) {
        *out = NULL;
        *n = 0;
        return CMH_OK;
    }
    return cmh_live_collect(g_segs, out, n);
}

/* ---- fork ---- */

void cmh_hist_atfork_prepare(void)
{
    cmh_hist_ensure_init();
    lock_all_devices();
    if (g_segs) cmh_live_lock_all(g_segs);
}

void cmh_hist_atfork_parent(void)
{
    if (g_segs) cmh_live_unlock_all(g_segs);
    unlock_all_devices();
}

/* In the child after fork(): it starts a fresh history of its own. */
void cmh_hist_reset_after_fork(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        free_chunks(d);
        memset(d, 0, sizeof *d);
        cmh_mutex_init(&d->lock);
        d->ask_at = UINT64_MAX;
    }
    cmh_mutex_init(&g_view_lock);
    g_spare_asked = 0;
    if (g_segs) cmh_live_reset(g_segs);
    cmh_touched = 0;
    cmh_lost = 0;
}
