/*
 * history.c - what the recorder keeps: per-device rings of trace entries, the live segments
 * (driver allocations other than VMM maps, which vmm.c keeps in address order) and each
 * device's counters.
 *
 * The hot path takes no lock.  An event claims its entry with one atomic add on its device's
 * `claim` word: the value is the entry's sequence number, so per-device order is the order of
 * the claims (a free claims before the real free, an allocation after the real one returned,
 * hooks.c).  It then writes the flight record and the ring slot, stores the slot's commit word
 * (cmh_ring_slot.word) last with release, and counts itself done (in its thread's counts, below).
 * The reserved bytes are an atomic add, peaks a compare-and-swap only when one rises.
 *
 * Invariants:
 *  - Entry s (1-based) of a device is at ring position k = s - 1 - base (base: the sequence at
 *    the last clear or new capacity), slot k of an unlimited ring, k % cap of a bounded one.
 *    Positions live in chunks of CHUNK entries (a bounded ring's last chunk may be shorter)
 *    through a fixed directory, so nothing ever moves; a bounded ring overwrites its oldest,
 *    and its drops are exactly claimed - base - cap (plus those before base: drop0).
 *  - A chunk is zero when it is put in the directory, so a slot's commit word is 0 until its
 *    entry is complete (a thread number is never 0).  An unlimited ring's slot is written
 *    once until a clear, which frees the chunks: a dump reads it in place (cmh_hist_view_ring,
 *    under g_view_lock), waiting on a slot still being written.
 *  - The helper thread puts the next chunk in the directory ahead of the writers (asked for when
 *    a writer passes the middle of a chunk), so a lock (`grow`, never the gate's) and a calloc
 *    on the hot path are only the fallback when the helper is late.
 *  - Whatever must see a ring still (a bounded ring's copy, a clear, a new capacity, fork)
 *    closes its gate: takes the device lock, sets GATE in `claim` (getting the exact count of
 *    claims), and waits until the done counts sum to it.  A writer whose claim came back with GATE set
 *    wrote nothing: it waits on the device lock and claims again; opening the gate stores the
 *    count back, which drops those refused claims.
 *  - Times are stamped after the claim, so a thread preempted between the two can stamp later
 *    than the next entry: readers (export.c, analyzer/recover.c) keep a ring's times
 *    non-decreasing, giving an overtaken entry the time of the one before it.
 *  - A free is recorded *before* the driver frees, so no later allocation of the same address
 *    can be recorded ahead of it; if the driver refuses, cmh_hist_free_undo puts it back.
 *  - No lock here is ever held across a driver call, a stack capture or a malloc of user size.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "muldiv.h"
#include "internal.h"

int cmh_touched;
uint64_t cmh_lost;

#define CHUNK_BITS CMH_RING_CHUNK_BITS
#define CHUNK (1ull << CHUNK_BITS) /* 1.5 MiB of entries (2 MiB bounded) and a side table, touched as used */
#define CHUNK_MASK (CHUNK - 1)
#define DIR_CHUNKS (1ull << 16) /* 2^32 entries a device; the directory is 512 KiB of address space, touched as used */
#define GATE (1ull << 63)

typedef struct dev_state {
    /* the writers' line */
    uint64_t claim __attribute__((aligned(64))); /* entries claimed since the start, | GATE while closed */
    uint64_t done; /* claims whose entry is complete, counted here only by a thread without its counts (tcounts) */
    /* allocated = res_cur - gap: a driver allocation changes both by its size, so the common
     * event is one atomic add here (gap moves only for managed segments and reported blocks) */
    uint64_t res_cur, gap, alloc_peak, res_peak;
    uint64_t nallocs, nfrees, nooms; /* as done: the rest is in the threads' counts */
    /* OOM entries claimed so far (counted with the entry, before it is done: a closed gate's
     * sum is exact), as done; oom_base their count at the last clear (gate closed) */
    uint64_t noom_entries, oom_base;
    /* read by writers, changed only with the gate closed (or, dir and its chunks, under lock) */
    cmh_ring_slot **dir __attribute__((aligned(64))); /* DIR_CHUNKS chunk pointers, or NULL */
    uint64_t cap;   /* 0 unlimited, else max_entries */
    uint64_t base;  /* the claim count at the last clear / new capacity */
    uint64_t drop0; /* entries dropped before base */
    uint64_t want;  /* chunk index + 1 the helper is asked to make */
    uint64_t hi;    /* chunks [0, hi) of dir may be there (under lock) */
    int used;
    cmh_mutex lock; /* the gate */
    /* the directory and its chunks: taken by a writer that finds no chunk (holding a claim, so
     * never the gate's lock, which waits for it), by the helper, and by a closed gate's holder */
    cmh_mutex grow;
} dev_state;

static dev_state g_dev[CMH_MAX_DEVICES + 1];
static uint64_t g_max_entries; /* 0 = unlimited; written with every gate closed */
/* Held by a dump that reads an unlimited ring in place (cmh_hist_view_ring), and by whatever
 * would rewrite entries under it (a clear, a new capacity); never by the hooks.  Taken before
 * any device lock. */
static cmh_mutex g_view_lock = CMH_MUTEX_INITIALIZER;
static int g_spare_asked; /* some device wants a chunk made ahead: the helper makes it */
static cmh_livetab *g_segs;    /* driver allocations, VMM maps aside */

/* ---- each thread's counts ----
 * Counts that only ever go up (entries done, allocations, frees, OOMs) are kept per thread, so
 * that counting one is a plain store to a line no other thread writes; a reader sums them.  A
 * thread's block outlives it: when it ends, the next new thread takes the block over (its counts
 * stay in the sums), so there are as many blocks as threads ever ran at once. */
enum { TC_DONE, TC_ALLOCS, TC_FREES, TC_OOMS, TC_OOM_ENTRIES, TC_N };
typedef struct tcounts {
    uint64_t n[CMH_MAX_DEVICES + 1][TC_N];
    struct tcounts *next;
    int free; /* its thread ended */
} tcounts;
static tcounts *g_tcounts; /* pushed, never removed */
static __thread tcounts *t_counts __attribute__((tls_model("initial-exec")));
static pthread_key_t g_tkey;
static int g_tkey_ok;

static void tcounts_release(void *p)
{
    t_counts = NULL;
    __atomic_store_n(&((tcounts *)p)->free, 1, __ATOMIC_RELEASE);
}

static tcounts *tcounts_take(void)
{
    tcounts *b;
    for (b = __atomic_load_n(&g_tcounts, __ATOMIC_ACQUIRE); b; b = b->next) {
        int one = 1;
        if (__atomic_load_n(&b->free, __ATOMIC_RELAXED) &&
            __atomic_compare_exchange_n(&b->free, &one, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            break;
    }
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL; /* then the shared counters count it */
        b->next = __atomic_load_n(&g_tcounts, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&g_tcounts, &b->next, b, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
    }
    t_counts = b;
    if (g_tkey_ok) pthread_setspecific(g_tkey, b);
    return b;
}

/* One more of count k of slot: the owner's store (release: a reader that sums it sees what came before). */
static inline void count_one(uint64_t *shared, int slot, int k)
{
    tcounts *b = t_counts;
    if (CMH_UNLIKELY(!b) && !(b = tcounts_take())) {
        __atomic_add_fetch(shared, 1, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&b->n[slot][k], __atomic_load_n(&b->n[slot][k], __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

static uint64_t count_sum(const uint64_t *shared, int slot, int k)
{
    uint64_t n = __atomic_load_n(shared, __ATOMIC_ACQUIRE);
    for (tcounts *b = __atomic_load_n(&g_tcounts, __ATOMIC_ACQUIRE); b; b = b->next) n += __atomic_load_n(&b->n[slot][k], __ATOMIC_ACQUIRE);
    return n;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void take_reference(void);

static int g_inited; /* set last by init_once: the hooks test it before paying for pthread_once */

static void init_once(void)
{
    take_reference();
    g_max_entries = cmh_cfg.max_entries;
    g_tkey_ok = pthread_key_create(&g_tkey, tcounts_release) == 0;
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        cmh_mutex_init(&g_dev[i].lock);
        cmh_mutex_init(&g_dev[i].grow);
        g_dev[i].cap = g_max_entries;
    }
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
    return g_ref_ns + cmh_muldiv(ticks - g_ref_ticks, now_ns - g_ref_ns, dt);
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

/* What the OS calls each numbered thread, so that a report can say which one it means; a slot is
 * written once, by its own thread, its `ready` set last (release). */
static struct {
    int64_t tid;
    char name[16];
    uint32_t ready;
} g_named[CMH_THREAD_NAMED + 1];

/* The name the program gave this thread (cmh_thread_name: a Python thread's threading name),
 * before or after its first event; empty: the OS's name is taken. */
static __thread char t_given_name[16];

/* A thread's first event: its id and its name then (pt_autograd_0, a data loader's), or the one
 * the program gave it */
static __attribute__((noinline, cold)) void name_thread(uint32_t t)
{
    if (t > CMH_THREAD_NAMED) return;
    g_named[t].tid = (int64_t)syscall(SYS_gettid);
    char name[17] = "";
    if (t_given_name[0]) memcpy(name, t_given_name, sizeof t_given_name);
    else if (prctl(PR_GET_NAME, (unsigned long)name, 0, 0, 0) != 0) name[0] = 0;
    memcpy(g_named[t].name, name, sizeof g_named[t].name);
    __atomic_store_n(&g_named[t].ready, 1, __ATOMIC_RELEASE);
    cmh_flight_thread(NULL, t, g_named[t].tid, name);
}

/* The program names the calling thread (its first 15 bytes, as the OS keeps them).  Given before
 * the thread's first event (a Python thread's start), its first event takes it; after, its slot
 * is written again and the flight record says the new name (a later thread record wins).  A
 * dump reading the slot while it changes may see part of either name: names only, never an
 * entry. */
void cmh_hist_name_thread(const char *name)
{
    size_t n = strnlen(name, sizeof t_given_name - 1);
    memset(t_given_name, 0, sizeof t_given_name);
    memcpy(t_given_name, name, n);
    uint32_t t = t_thread;
    if (!t || t > CMH_THREAD_NAMED || !__atomic_load_n(&g_named[t].ready, __ATOMIC_ACQUIRE)) return;
    memcpy(g_named[t].name, t_given_name, sizeof g_named[t].name);
    cmh_flight_thread(NULL, t, g_named[t].tid, t_given_name);
}

void cmh_hist_threads_each(void (*fn)(void *arg, uint32_t thread, int64_t tid, const char *name), void *arg)
{
    uint32_t n = __atomic_load_n(&g_threads, __ATOMIC_RELAXED);
    for (uint32_t t = 1; t <= n && t <= CMH_THREAD_NAMED; t++) {
        if (!__atomic_load_n(&g_named[t].ready, __ATOMIC_ACQUIRE)) continue;
        char name[17];
        memcpy(name, g_named[t].name, 16);
        name[16] = 0;
        fn(arg, t, g_named[t].tid, name);
    }
}

/* A number, not the OS thread id: small, never reused within the record, and a forked child's
 * thread keeps the one it had (its entries stay its own).  The number is the order of first
 * events, a race between threads; readers renumber by the thread ids kept beside it
 * (cmh_snapshot_number_threads). */
uint32_t cmh_hist_thread(void)
{
    if (!t_thread) {
        t_thread = __atomic_add_fetch(&g_threads, 1, __ATOMIC_RELAXED);
        name_thread(t_thread);
    }
    return t_thread < CMH_THREAD_MAX ? t_thread : CMH_THREAD_MAX;
}

/* ---- ring ---- */

/* entries in chunk ci of a ring of capacity cap */
static inline uint64_t chunk_len(uint64_t cap, uint64_t ci)
{
    return cap && cap - ci * CHUNK < CHUNK ? cap - ci * CHUNK : CHUNK;
}

/* A bounded ring's slot is 32 bytes: the entry, then the sequence number it holds (| BUSY while
 * its writer writes it), on the line the entry is written to: a writer takes its slot from an older one with a compare-and-swap,
 * waits while an older writer is still writing there (a few stores), and gives up when a newer
 * one has it already (a lap later: its entry would be dropped anyway).  So two writers never
 * write one slot at once, and what a slot holds is always its newest entry.
 * Every chunk ends with its side table (cmh_ring_side, one per slot): the fields an entry with
 * `side` set keeps out of line.  Position k of the table is slot k's, so whoever owns the slot
 * owns its side fields, a bounded ring's overwrite takes them with the slot, and a dump reads
 * them in place beside it.  The helper touches a chunk's pages up to its side table only: a
 * table's page is touched first by an entry that writes there (its old contents, where malloc
 * gave back used memory, are never read: only an entry's own `side` bit sends a reader there). */
#define BUSY (1ull << 63)
typedef struct bounded_slot {
    cmh_ring_slot e;
    uint64_t seq;
} bounded_slot;
_Static_assert(sizeof(bounded_slot) == 32, "a bounded ring's slot is 32 bytes: two a line");

/* slot off of a chunk, and a bounded ring's sequence number there */
static inline cmh_ring_slot *slot_at(cmh_ring_slot *c, uint64_t cap, uint64_t off)
{
    return cap ? &((bounded_slot *)(void *)c)[off].e : &c[off];
}
static inline uint64_t *slot_seq(cmh_ring_slot *c, uint64_t off) { return &((bounded_slot *)(void *)c)[off].seq; }

/* bytes of a chunk up to its side table, and in all */
static inline size_t chunk_hot_bytes(uint64_t cap, uint64_t ci)
{
    return chunk_len(cap, ci) * (cap ? sizeof(bounded_slot) : sizeof(cmh_ring_slot));
}

static inline size_t chunk_bytes(uint64_t cap, uint64_t ci)
{
    return chunk_hot_bytes(cap, ci) + chunk_len(cap, ci) * sizeof(cmh_ring_side);
}

static inline cmh_ring_side *chunk_side(cmh_ring_slot *c, uint64_t cap, uint64_t ci)
{
    return (cmh_ring_side *)(void *)((char *)c + chunk_hot_bytes(cap, ci));
}

static inline uint64_t load_claim(dev_state *d) { return __atomic_load_n(&d->claim, __ATOMIC_ACQUIRE) & ~GATE; }

/* Close the gate: no writer is in the ring when this returns, and none enters until open_gate. */
static uint64_t close_gate(dev_state *d)
{
    cmh_lock(&d->lock);
    uint64_t c = __atomic_fetch_or(&d->claim, GATE, __ATOMIC_ACQ_REL) & ~GATE;
    int slot = (int)(d - g_dev);
    for (int spins = 0; count_sum(&d->done, slot, TC_DONE) != c; spins++) {
        if (spins < 64) continue;
        sched_yield(); /* a writer between its claim and its commit: a few stores from done */
    }
    cmh_lock(&d->grow); /* the helper may be putting a chunk in */
    return c;
}

static void open_gate(dev_state *d, uint64_t c)
{
    cmh_unlock(&d->grow);
    __atomic_store_n(&d->claim, c, __ATOMIC_RELEASE); /* refused claims vanish: they claim again */
    cmh_unlock(&d->lock);
}

/* A chunk is an anonymous mapping of its own, so it is zero as it comes, with no pass over it:
 * malloc may give back memory a program freed (glibc serves blocks of this size from the heap
 * once the program freed a larger mapped one), which the helper then had to clear with a memset
 * after making its pages present, zeroing every entry's bytes twice.  One that spans a huge page
 * (a bounded ring's whole chunk, 2 MiB) is aligned to 2 MiB.  NULL when there is no memory. */
#define HUGE ((size_t)2 << 20)
static cmh_ring_slot *chunk_map(size_t bytes)
{
    size_t align = bytes >= HUGE ? HUGE : 0;
    char *m = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (align) { /* the unaligned head and what is past the chunk's last page back */
        char *end = m + ((bytes + align + 4095) & ~(size_t)4095);
        char *a = (char *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
        char *past = a + ((bytes + 4095) & ~(size_t)4095);
        if (a > m) munmap(m, (size_t)(a - m));
        if (end > past) munmap(past, (size_t)(end - past));
        m = a;
    }
    return (cmh_ring_slot *)(void *)m;
}

static void chunk_unmap(cmh_ring_slot *c, size_t bytes)
{
    if (c) munmap(c, bytes);
}

static void free_chunks(dev_state *d)
{
    if (!d->dir) return;
    for (uint64_t i = 0; i < d->hi; i++)
        if (d->dir[i]) chunk_unmap(d->dir[i], chunk_bytes(d->cap, i)), d->dir[i] = NULL;
    d->hi = 0;
}

/* LeakSanitizer does not scan mmap'ed memory: the directory's chunk pointers would read as
 * leaks at exit.  Under the sanitizer build it is made a root region. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
static void lsan_root(void *p, size_t n) { __lsan_register_root_region(p, n); }
#else
static void lsan_root(void *p, size_t n) { (void)p, (void)n; }
#endif

/* The slow path of a write: the chunk is not there yet (the helper was late); under the lock. */
static cmh_ring_slot *make_chunk(dev_state *d, uint64_t ci)
{
    cmh_lock(&d->grow);
    cmh_ring_slot **dir = __atomic_load_n(&d->dir, __ATOMIC_ACQUIRE);
    if (!dir) { /* mmap: its zero pages cost nothing until a chunk pointer lands in them */
        void *m = mmap(NULL, DIR_CHUNKS * sizeof *dir, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            lsan_root(m, DIR_CHUNKS * sizeof *dir);
            __atomic_store_n(&d->dir, dir = m, __ATOMIC_RELEASE);
        }
    }
    cmh_ring_slot *c = dir ? __atomic_load_n(&dir[ci], __ATOMIC_ACQUIRE) : NULL;
    if (dir && !c && (c = chunk_map(chunk_bytes(d->cap, ci)))) {
        __atomic_store_n(&dir[ci], c, __ATOMIC_RELEASE);
        if (ci >= d->hi) d->hi = ci + 1;
    }
    cmh_unlock(&d->grow);
    return c;
}

static void ask_chunk(dev_state *d, uint64_t ci)
{
    if (ci >= DIR_CHUNKS || (d->cap && ci * CHUNK >= d->cap)) return;
    cmh_ring_slot **dir = __atomic_load_n(&d->dir, __ATOMIC_ACQUIRE);
    if (dir && __atomic_load_n(&dir[ci], __ATOMIC_RELAXED)) return; /* a bounded ring's later laps */
    __atomic_store_n(&d->want, ci + 1, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&g_spare_asked, 1, __ATOMIC_ACQ_REL)) cmh_helper_wake();
}

int cmh_hist_spare_wanted(void) { return __atomic_load_n(&g_spare_asked, __ATOMIC_ACQUIRE); }

/* A chunk's pages made present, here on the helper thread rather than by page faults in the
 * hooks (which took every page fault of the rings themselves: a fifth of a recorded pair, perf).
 * The chunk is a fresh mapping (chunk_map), so the kernel's zeroing of each page is the only
 * pass over it.  A whole chunk's entries (a bounded ring's 2 MiB) are aligned to 2 MiB and ask
 * for a transparent huge page there: one fault instead of 512, and a recorded pair with the
 * flight record off measured ~12 ns cheaper for it (the pages are all written anyway, so the
 * footprint is the same). */
static void prefault(void *c, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    uintptr_t hlo = ((uintptr_t)c + HUGE - 1) & ~(uintptr_t)(HUGE - 1), hhi = ((uintptr_t)c + bytes) & ~(uintptr_t)(HUGE - 1);
    if (hhi > hlo) madvise((void *)hlo, hhi - hlo, MADV_HUGEPAGE);
#endif
    uintptr_t lo = (uintptr_t)c & ~(uintptr_t)4095, hi = ((uintptr_t)c + bytes + 4095) & ~(uintptr_t)4095;
#ifdef MADV_POPULATE_WRITE
    madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE); /* one call, not a fault a page */
#endif
    /* and a write to each page through this mapping, here, even where the madvise made them all:
     * under a hypervisor that keeps its own page tables (shadow paging; this VM is a PVM guest)
     * the kernel's populating fills only the guest's, and the first user access to each page
     * then leaves to the hypervisor.  Writing here takes those exits on the helper thread, not
     * in the hooks' first store to each page of the ring (the calling thread's own CPU per pair:
     * -69 to -74 ns with the flight record on, -22 and -43 with it off; the process's about the
     * same: docs/RECORDER.md, "The calling thread's own CPU").  The chunk is not in the
     * directory yet, so no writer or reader sees these writes; a write of 0 to zero memory.
     * A write: a read would map the zero page. */
    for (uintptr_t p = lo; p < hi; p += 4096) *(volatile char *)p = 0;
}

/* The helper thread: the chunk each ring asked for, its pages touched, put in its directory. */
void cmh_hist_make_spares(void)
{
    __atomic_store_n(&g_spare_asked, 0, __ATOMIC_RELEASE);
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        uint64_t w = __atomic_exchange_n(&d->want, 0, __ATOMIC_ACQ_REL);
        if (!w) continue;
        cmh_lock(&d->grow);
        uint64_t cap = d->cap;
        size_t bytes = chunk_bytes(cap, w - 1), hot = chunk_hot_bytes(cap, w - 1);
        cmh_ring_slot **dir = d->dir;
        int need = dir && !dir[w - 1] && (!cap || (w - 1) * CHUNK < cap);
        cmh_unlock(&d->grow);
        if (!need) continue;
        cmh_ring_slot *c = chunk_map(bytes);
        if (!c) continue; /* the writer will try itself */
        prefault(c, hot); /* not the side table */
        cmh_lock(&d->grow);
        if (d->dir == dir && d->cap == cap && !dir[w - 1]) {
            __atomic_store_n(&dir[w - 1], c, __ATOMIC_RELEASE);
            if (w > d->hi) d->hi = w;
            c = NULL;
        }
        cmh_unlock(&d->grow);
        chunk_unmap(c, bytes);
    }
}

static int own_slot(cmh_ring_slot *c, uint64_t off, uint64_t s)
{
    uint64_t *sq = slot_seq(c, off), cur = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
    for (int spins = 0;; spins++) {
        if ((cur & ~BUSY) >= s) return 0; /* a newer entry is there, or being written */
        if (!(cur & BUSY)) {
            if (__atomic_compare_exchange_n(sq, &cur, s | BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 1;
            continue;
        }
        if (spins >= 64) sched_yield();
        cur = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
    }
}

static inline void raise_peak(uint64_t *peak, uint64_t v)
{
    uint64_t p = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (v > p && !__atomic_compare_exchange_n(peak, &p, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

void cmh_hist_record(int device, int action, int kind, int flags, uint64_t addr, uint64_t size, uint64_t requested,
                     uint64_t stream, uint32_t stack, int64_t dalloc, int64_t dres, int count_kind, int64_t ticks)
{
    cmh_hist_ensure_init();
    dev_state *d = dev_slot(device);
    if (CMH_UNLIKELY(!__atomic_load_n(&d->used, __ATOMIC_RELAXED))) __atomic_store_n(&d->used, 1, __ATOMIC_RELAXED);
    uint64_t res = dres ? __atomic_add_fetch(&d->res_cur, (uint64_t)dres, __ATOMIC_RELAXED) : 0;
    if (dres) raise_peak(&d->res_peak, res);
    if (dalloc != dres) __atomic_add_fetch(&d->gap, (uint64_t)(dres - dalloc), __ATOMIC_RELAXED);
    if (dalloc > 0) { /* a rise can make a peak (exact but for a managed segment's change racing it) */
        if (!dres) res = __atomic_load_n(&d->res_cur, __ATOMIC_RELAXED);
        raise_peak(&d->alloc_peak, res - __atomic_load_n(&d->gap, __ATOMIC_RELAXED));
    }
    int slot = (int)(d - g_dev);
    if (count_kind == CMH_COUNT_ALLOC) count_one(&d->nallocs, slot, TC_ALLOCS);
    else if (count_kind == CMH_COUNT_FREE) count_one(&d->nfrees, slot, TC_FREES);
    else if (count_kind == CMH_COUNT_OOM) count_one(&d->nooms, slot, TC_OOMS);
    if (cmh_rec_enabled() != CMH_ENABLED_ALL) {
        /* an OOM with no history (enabled=state) is counted among the trace's OOMs all the same,
         * as one the ring dropped: the snapshot's dropped_ooms, PyTorch's num_ooms, which counts
         * them regardless of history (F14) */
        if (CMH_UNLIKELY(action == CMH_ACT_OOM)) count_one(&d->noom_entries, slot, TC_OOM_ENTRIES);
        return;
    }
    uint64_t s;
    for (;;) {
        s = __atomic_add_fetch(&d->claim, 1, __ATOMIC_ACQ_REL);
        if (CMH_LIKELY(!(s & GATE))) break;
        cmh_lock(&d->lock); /* closed: wait for it to open, then claim again */
        cmh_unlock(&d->lock);
    }
    if (!ticks) ticks = cmh_now_ticks();
    uint32_t thread = cmh_hist_thread();
    /* the entry packed once, for its ring slot and for its flight record */
    int fits = cmh_slot_fits(addr, size, requested, stream, stack, thread);
    uint64_t w1 = (uint64_t)((unsigned)kind & 7) << 56 | (uint64_t)((unsigned)flags & 15) << 59,
             word = (uint64_t)((unsigned)action & 15) << 60;
    if (CMH_LIKELY(fits)) {
        w1 |= size | (uint64_t)stack << 36;
        word |= addr | (uint64_t)thread << 48;
    } else { /* out of line (the side table, below): the rare entry pays */
        w1 |= CMH_SLOT_SIDE;
        word |= (uint64_t)CMH_SLOT_THREADS << 48;
    }
    /* the file first: a death in between loses nothing.  An entry that packs goes to the
     * flight record as its slot's words, in registers (cmh_flight_tiny) */
    if (CMH_UNLIKELY(!fits) || CMH_UNLIKELY(!cmh_flight_tiny(slot, s, ticks, w1, word))) {
        cmh_rec_entry e = {ticks, addr, size, requested, stream, stack, thread, (unsigned)action & 15, (unsigned)kind & 7,
                           (unsigned)flags & 15};
        cmh_flight_entry(slot, s, &e);
    }
    uint64_t k = s - 1 - d->base, cap = d->cap;
    if (cap && k >= cap) k %= cap;
    uint64_t ci = k >> CHUNK_BITS, off = k & CHUNK_MASK;
    cmh_ring_slot **dir = __atomic_load_n(&d->dir, __ATOMIC_ACQUIRE);
    cmh_ring_slot *c = dir ? __atomic_load_n(&dir[ci], __ATOMIC_ACQUIRE) : NULL;
    if (CMH_UNLIKELY(!c) && !(c = make_chunk(d, ci))) cmh_count_lost(1);
    else if (!cap || own_slot(c, off, s)) {
        cmh_ring_slot *at = slot_at(c, cap, off);
        CMH_PREFETCH_W(at);
        if (CMH_UNLIKELY(!fits)) chunk_side(c, cap, ci)[off] = (cmh_ring_side){addr, size, requested, stream, stack, thread};
        at->ticks = ticks;
        at->w1 = w1;
        __atomic_store_n(&at->word, word, __ATOMIC_RELEASE);
        if (cap) __atomic_store_n(slot_seq(c, off), s, __ATOMIC_RELEASE);
        if (CMH_UNLIKELY(off == CHUNK / 2)) ask_chunk(d, ci + 1);
    }
    if (CMH_UNLIKELY(action == CMH_ACT_OOM)) count_one(&d->noom_entries, slot, TC_OOM_ENTRIES);
    count_one(&d->done, slot, TC_DONE);
}

void cmh_hist_adjust_allocated(int device, int64_t dalloc)
{
    __atomic_sub_fetch(&dev_slot(device)->gap, (uint64_t)dalloc, __ATOMIC_RELAXED);
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

/* cuCtxDestroy, cuDevicePrimaryCtxReset: the driver frees every allocation the context made.
 * The recorder keeps no context per allocation (asking the driver at each one would cost the hot
 * path a call), so a device's contexts are taken as one: the addresses of the device's live
 * linear, pitch and managed allocations are taken before the driver's call, and ended after it
 * succeeded as the frees they are (segment_free entries, with the destroying call's stack).
 * Stream-ordered allocations (their pool's), VMM maps and handles, and pinned host memory are
 * left as they are. */
static int ctx_owned(int kind) { return kind == CMH_KIND_DEVICE || kind == CMH_KIND_PITCH || kind == CMH_KIND_MANAGED; }

int cmh_hist_context_collect(int device, uint64_t **addrs, size_t *n)
{
    *addrs = NULL;
    *n = 0;
    if (!cmh_rec_enabled()) return CMH_OK;
    cmh_hist_ensure_init();
    if (!g_segs) return CMH_OK;
    cmh_live *all = NULL;
    size_t nall = 0;
    if (cmh_live_collect(g_segs, &all, &nall) != CMH_OK) return CMH_ENOMEM;
    uint64_t *v = nall ? malloc(nall * sizeof *v) : NULL;
    if (nall && !v) {
        free(all);
        return CMH_ENOMEM;
    }
    for (size_t i = 0; i < nall; i++)
        if (all[i].device == device && ctx_owned(all[i].kind)) v[(*n)++] = all[i].addr;
    free(all);
    *addrs = v;
    return CMH_OK;
}

uint64_t cmh_hist_context_gone(const uint64_t *addrs, size_t n)
{
    uint64_t ended = 0;
    for (size_t i = 0; i < n; i++) {
        cmh_live was;
        if (cmh_hist_segment_free(addrs[i], 0, CMH_ACT_SEGMENT_FREE, &was)) ended++;
    }
    return ended;
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

void cmh_hist_oom(int device, int kind, uint64_t size, uint64_t stream, uint64_t device_free)
{
    if (!cmh_rec_enabled()) return;
    cmh_hist_ensure_init();
    cmh_first_touch();
    uint32_t stack = cmh_rec_context() >= CMH_CONTEXT_ALLOC ? cmh_stack_capture() : 0;
    /* its kind says which allocator failed: a stream-ordered pool's request (CMH_KIND_ASYNC) may
     * use what its pool keeps, any other may not */
    cmh_hist_record(device, CMH_ACT_OOM, kind, 0, device_free, size, size, stream, stack, 0, 0, CMH_COUNT_OOM, 0);
}

void cmh_hist_pool_sample(int device, uint64_t pool, uint64_t reserved, uint64_t used, int64_t slack_delta, int flags,
                          uint32_t tag, uint32_t stack)
{
    if (!cmh_rec_enabled()) return;
    /* the stream field says the pool's kind (CMH_POOL_*, snapshot.h) */
    cmh_hist_record(device, CMH_ACT_POOL_SAMPLE, CMH_KIND_ASYNC, flags, pool, reserved, used, tag, stack, 0, slack_delta,
                    CMH_COUNT_NONE, 0);
}

/* ---- control ---- */

static uint64_t g_closed[CMH_MAX_DEVICES + 1]; /* each gate's claim count while all are closed */

static void close_all(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) g_closed[i] = close_gate(&g_dev[i]);
}

static void open_all(void)
{
    for (int i = CMH_MAX_DEVICES; i >= 0; i--) open_gate(&g_dev[i], g_closed[i]);
}

/* entries in the ring now, claimed c (gate closed) */
static inline uint64_t ring_count(const dev_state *d, uint64_t c)
{
    uint64_t n = c - d->base;
    return d->cap && n > d->cap ? d->cap : n;
}

static inline uint64_t ring_dropped(const dev_state *d, uint64_t c)
{
    uint64_t n = c - d->base;
    return d->drop0 + (d->cap && n > d->cap ? n - d->cap : 0);
}

/* The entry k places after the oldest (gate closed, claimed c), its side fields in *side; NULL
 * where it was lost. */
static const cmh_ring_slot *nth(const dev_state *d, uint64_t c, uint64_t k, const cmh_ring_side **side)
{
    uint64_t n = c - d->base, p = d->cap && n > d->cap ? (n - d->cap + k) % d->cap : k;
    cmh_ring_slot *ch = d->dir ? d->dir[p >> CHUNK_BITS] : NULL, *e = ch ? slot_at(ch, d->cap, p & CHUNK_MASK) : NULL;
    if (!e || !e->word) return NULL;
    *side = &chunk_side(ch, d->cap, p >> CHUNK_BITS)[p & CHUNK_MASK];
    return e;
}

void cmh_hist_clear(void)
{
    cmh_hist_ensure_init();
    cmh_lock(&g_view_lock); /* no dump is reading a ring in place */
    close_all();
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        free_chunks(d); /* fresh zeroed chunks as entries come: commit words start at 0 again */
        d->base = g_closed[i];
        d->drop0 = 0;
        d->oom_base = count_sum(&d->noom_entries, i, TC_OOM_ENTRIES); /* cleared, as drop0: not dropped */
        if (g_closed[i]) cmh_flight_clear(i, g_closed[i]); /* entry numbers go on: the file drops what came before */
    }
    open_all();
    cmh_unlock(&g_view_lock);
    cmh_vmm_clear_maps(); /* (vmm_maps name entries: they go with them) */
    cmh_drverr_clear();   /* (the failed calls before the clear go with the entries, as oom entries do) */
}

/* The last `keep` entries of d, oldest first, into new chunks for a ring of max_entries
 * (gate closed, claimed c); -1 out of memory, d unchanged. */
static int rebuild(dev_state *d, uint64_t c, uint64_t keep, uint64_t max_entries)
{
    uint64_t n = (keep + CHUNK - 1) / CHUNK;
    cmh_ring_slot **nc = n <= DIR_CHUNKS ? calloc(n ? n : 1, sizeof *nc) : NULL;
    if (!nc) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (!(nc[i] = chunk_map(chunk_bytes(max_entries, i)))) {
            while (i--) chunk_unmap(nc[i], chunk_bytes(max_entries, i));
            free(nc);
            return -1;
        }
    uint64_t count = ring_count(d, c), skip = count - keep, kept = 0;
    for (uint64_t k = 0; k < keep; k++) {
        const cmh_ring_side *sd;
        const cmh_ring_slot *e = nth(d, c, skip + k, &sd);
        if (!e) continue; /* lost before */
        uint64_t ci = kept >> CHUNK_BITS, off = kept & CHUNK_MASK;
        *slot_at(nc[ci], max_entries, off) = *e;
        if (e->w1 & CMH_SLOT_SIDE) chunk_side(nc[ci], max_entries, ci)[off] = *sd;
        kept++;
    }
    if (max_entries) /* the slots' numbers: entry j of the new ring is number c - kept + 1 + j */
        for (uint64_t j = 0; j < kept; j++) *slot_seq(nc[j >> CHUNK_BITS], j & CHUNK_MASK) = c - kept + 1 + j;
    uint64_t dropped = ring_dropped(d, c) + skip;
    free_chunks(d);
    for (uint64_t i = 0; i < n; i++) d->dir[i] = nc[i];
    d->hi = n;
    free(nc);
    d->cap = max_entries;
    d->base = c - kept;
    d->drop0 = dropped;
    return 0;
}

void cmh_hist_set_capacity(uint64_t max_entries)
{
    cmh_hist_ensure_init();
    cmh_lock(&g_view_lock);
    close_all();
    if (max_entries != g_max_entries) {
        for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
            dev_state *d = &g_dev[i];
            uint64_t c = g_closed[i], count = ring_count(d, c);
            if (!count || !d->dir) {
                d->drop0 = ring_dropped(d, c);
                free_chunks(d);
                d->cap = max_entries;
                d->base = c;
                continue;
            }
            uint64_t keep = max_entries && count > max_entries ? max_entries : count;
            if (rebuild(d, c, keep, max_entries) != 0) cmh_count_lost(count); /* keep the old ring and its limit */
        }
        g_max_entries = max_entries;
        cmh_flight_set_capacity(max_entries);
    }
    open_all();
    cmh_unlock(&g_view_lock);
}

int cmh_hist_stats(cmh_device_stats *out, int cap)
{
    cmh_hist_ensure_init();
    int n = 0;
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        if (!__atomic_load_n(&d->used, __ATOMIC_RELAXED)) continue;
        if (n < cap) {
            cmh_device_stats *o = &out[n];
            cmh_lock(&d->lock); /* base, cap and drop0 stay (they change with the gate closed, under it) */
            uint64_t c = load_claim(d);
            o->entries_recorded = c;
            o->entries_dropped = ring_dropped(d, c);
            cmh_unlock(&d->lock);
            o->device = i == CMH_HOST_SLOT ? -1 : i;
            /* two words read while others change them: a moment's figure, never below 0 */
            uint64_t res = __atomic_load_n(&d->res_cur, __ATOMIC_RELAXED), gap = __atomic_load_n(&d->gap, __ATOMIC_RELAXED);
            o->allocated_current = (int64_t)(res - gap) > 0 ? res - gap : 0;
            o->allocated_peak = __atomic_load_n(&d->alloc_peak, __ATOMIC_RELAXED);
            o->reserved_current = __atomic_load_n(&d->res_cur, __ATOMIC_RELAXED);
            o->reserved_peak = __atomic_load_n(&d->res_peak, __ATOMIC_RELAXED);
            o->num_allocs = count_sum(&d->nallocs, i, TC_ALLOCS);
            o->num_frees = count_sum(&d->nfrees, i, TC_FREES);
            o->num_ooms = count_sum(&d->nooms, i, TC_OOMS);
        }
        n++;
    }
    return n;
}

/* A copy of the ring, oldest first, with the gate closed (lost entries left out). */
static int copy_closed(dev_state *d, uint64_t c, cmh_rec_entry **out, uint64_t *n)
{
    uint64_t count = ring_count(d, c), m = 0;
    *out = NULL;
    *n = 0;
    if (!count) return CMH_OK;
    if (!(*out = malloc(count * sizeof **out))) return CMH_ENOMEM;
    for (uint64_t k = 0; k < count; k++) {
        const cmh_ring_side *sd;
        const cmh_ring_slot *e = nth(d, c, k, &sd);
        if (e) cmh_ring_expand(e, sd, e->word, &(*out)[m++]);
    }
    *n = m;
    return CMH_OK;
}

int cmh_hist_copy_ring(int slot, cmh_rec_entry **out, uint64_t *n, uint64_t *dropped, uint64_t *seq, int *rc)
{
    cmh_hist_ensure_init();
    dev_state *d = &g_dev[slot];
    uint64_t c = close_gate(d);
    int used = __atomic_load_n(&d->used, __ATOMIC_RELAXED);
    *dropped = ring_dropped(d, c);
    *seq = c;
    *rc = used ? copy_closed(d, c, out, n) : (*out = NULL, *n = 0, CMH_OK);
    open_gate(d, c);
    return used;
}

const cmh_ring_slot *cmh_view_wait(const cmh_ring_view *v, uint64_t k, uint64_t *word)
{
    /* in place: entry k is claimed (k < n) but its writer has not stored its commit word yet, or
     * its chunk is still being made; NULL only when the writer found no memory for the chunk */
    for (int spins = 0;; spins++) {
        const cmh_ring_slot *c = __atomic_load_n(&v->chunks[k >> CHUNK_BITS], __ATOMIC_ACQUIRE);
        const cmh_ring_slot *e = c ? &c[k & CHUNK_MASK] : NULL;
        if (e && (*word = __atomic_load_n(&e->word, __ATOMIC_ACQUIRE))) return e;
        if (!e && spins > 1000) return NULL; /* lost (counted by its writer) */
        if (spins >= 64) sched_yield();
    }
}

/* Every gate closed by cmh_hist_hold (by the thread holding g_view_lock), each ring's claims
 * then: the views taken meanwhile end there. */
static int g_held;
static uint64_t g_held_at[CMH_MAX_DEVICES + 1];

void cmh_hist_hold(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) g_held_at[i] = close_gate(&g_dev[i]);
    g_held = 1;
}

void cmh_hist_unhold(void)
{
    g_held = 0;
    for (int i = CMH_MAX_DEVICES; i >= 0; i--) open_gate(&g_dev[i], g_held_at[i]);
}

int cmh_hist_view_ring(int slot, cmh_ring_view *v, uint64_t *dropped, uint64_t *seq, uint64_t *ooms, int *rc)
{
    cmh_hist_ensure_init();
    dev_state *d = &g_dev[slot];
    memset(v, 0, sizeof *v);
    *rc = CMH_OK;
    *ooms = 0;
    if (!__atomic_load_n(&d->used, __ATOMIC_RELAXED)) return 0;
    /* exact when held (every gate closed, every claim done); else a moment's figure */
    *ooms = count_sum(&d->noom_entries, slot, TC_OOM_ENTRIES) - d->oom_base;
    const char *copy = getenv("CUMEMHIST_DUMP_COPY"); /* "1": copy it anyway (the old way, to compare) */
    int in_place = !(copy && !strcmp(copy, "1"));
    if (!g_held) cmh_lock(&d->lock); /* (held: the gate's lock is this thread's already) */
    int unlimited = !d->cap;
    if (!g_held) cmh_unlock(&d->lock);
    if (unlimited && in_place) {
        /* unlimited: [0, n) is written once and stays where it is, the directory never moves;
         * writers go on past n meanwhile.  cap and base change only under g_view_lock. */
        uint64_t c = g_held ? g_held_at[slot] : load_claim(d);
        *dropped = d->drop0;
        *seq = c;
        v->chunks = __atomic_load_n(&d->dir, __ATOMIC_ACQUIRE);
        v->n = v->chunks ? c - d->base : 0;
        return 1;
    }
    uint64_t c = g_held ? g_held_at[slot] : close_gate(d); /* bounded: the oldest are being overwritten */
    *dropped = ring_dropped(d, c);
    *seq = c;
    uint64_t n;
    *rc = copy_closed(d, c, &v->copy, &n);
    v->n = n;
    if (!g_held) open_gate(d, c);
    return 1;
}

void cmh_hist_view_release(cmh_ring_view *v)
{
    free(v->copy);
    memset(v, 0, sizeof *v);
}

void cmh_hist_views_begin(void) { cmh_lock(&g_view_lock); }
void cmh_hist_views_end(void) { cmh_unlock(&g_view_lock); }

void cmh_hist_quiesce(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) open_gate(&g_dev[i], close_gate(&g_dev[i]));
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
    close_all();
    if (g_segs) cmh_live_lock_all(g_segs);
}

void cmh_hist_atfork_parent(void)
{
    if (g_segs) cmh_live_unlock_all(g_segs);
    open_all();
}

/* In the child after fork(): it starts a fresh history of its own. */
void cmh_hist_reset_after_fork(void)
{
    for (int i = 0; i <= CMH_MAX_DEVICES; i++) {
        dev_state *d = &g_dev[i];
        free_chunks(d);
        cmh_ring_slot **dir = d->dir; /* kept: it is the child's copy, now empty */
        memset(d, 0, sizeof *d);
        d->dir = dir;
        d->cap = g_max_entries;
        cmh_mutex_init(&d->lock);
        cmh_mutex_init(&d->grow);
    }
    /* the only thread now: every count starts again, the other threads' blocks are free */
    for (tcounts *b = g_tcounts; b; b = b->next) {
        memset(b->n, 0, sizeof b->n);
        b->free = b != t_counts;
    }
    cmh_mutex_init(&g_view_lock);
    g_spare_asked = 0;
    /* the child's one thread is its own, not the parent's: its id (a report said the child's
     * blocks were made by the parent's pid), and the parent's other threads are none of its */
    for (uint32_t t = 1; t <= CMH_THREAD_NAMED; t++)
        if (t != t_thread) __atomic_store_n(&g_named[t].ready, 0, __ATOMIC_RELAXED);
    if (t_thread && t_thread <= CMH_THREAD_NAMED && g_named[t_thread].ready) g_named[t_thread].tid = (int64_t)syscall(SYS_gettid);
    if (g_segs) cmh_live_reset(g_segs);
    cmh_touched = 0;
    cmh_lost = 0;
}
