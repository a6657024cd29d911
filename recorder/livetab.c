/*
 * livetab.c - what is alive now, keyed by address: the recorder's segments (history.c) and the
 * blocks an allocator reports (blocks.c) each keep one of these.
 *
 * 64 shards chosen by the address's hash, each an open-addressing table (snapshot/oatab.h)
 * under its own lock, so threads allocating at once rarely meet.  A lock is held only for the
 * table operation itself: never across a driver call, a stack capture or a callback.
 *
 * The shard's lock is a spin lock whose release is a plain store: one locked instruction per
 * insert or remove instead of two.  The futex lock (lock.h) must exchange its word on release
 * to learn whether anyone sleeps; its two locked instructions were 86% of the samples of
 * cmh_live_insert and cmh_live_remove, and a fifth of what a recorded pair cost its caller in
 * user space (perf of bench_hot none).  A shard's section is a few dozen instructions and 64
 * shards rarely meet; a waiter spins a little, then yields, then sleeps in short naps, so a
 * holder preempted mid-section (8 threads on 2 cores), or one holding every shard across a
 * fork (cmh_live_lock_all), costs the waiters little CPU.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "oatab.h"

#define NSHARD 64

/* A line of its own: two shards sharing one (32 bytes each) made threads working on different
 * shards take each other's line at every lock and unlock. */
typedef struct shard {
    uint32_t lock; /* 0 free, 1 held */
    cmh_oatab t;   /* of cmh_live */
} __attribute__((aligned(64))) shard;
_Static_assert(sizeof(shard) == 64 && _Alignof(shard) == 64, "a shard is one cache line of its own");

static __attribute__((noinline, cold)) void spin_slow(uint32_t *l)
{
    int saved = errno; /* the program's errno is not ours to change */
    for (unsigned n = 0;; n++) {
        if (!__atomic_load_n(l, __ATOMIC_RELAXED) && !__atomic_exchange_n(l, 1u, __ATOMIC_ACQUIRE)) break;
#if defined(__x86_64__) || defined(__i386__)
        if (n < 64) __builtin_ia32_pause();
#else
        if (n < 64) continue;
#endif
        else if (n < 256) sched_yield();
        else {
            struct timespec nap = {0, 50000};
            nanosleep(&nap, NULL);
        }
    }
    errno = saved;
}

static inline void shard_lock(shard *s)
{
    if (CMH_UNLIKELY(__atomic_exchange_n(&s->lock, 1u, __ATOMIC_ACQUIRE))) spin_slow(&s->lock);
}

static inline void shard_unlock(shard *s) { __atomic_store_n(&s->lock, 0u, __ATOMIC_RELEASE); }

struct cmh_livetab {
    shard sh[NSHARD];
};

_Static_assert(offsetof(cmh_live, addr) == 0, "oatab.h keys a record by its first 8 bytes");

/* one multiply picks the shard (the table mixes the key again inside it) */
static inline shard *shard_of(cmh_livetab *t, uint64_t addr) { return &t->sh[((addr >> 8) * 0x9E3779B97F4A7C15ull) >> 58]; }

cmh_livetab *cmh_live_new(void)
{
    cmh_livetab *t = aligned_alloc(64, sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < NSHARD; i++) {
        __atomic_store_n(&t->sh[i].lock, 0u, __ATOMIC_RELAXED);
        cmh_oa_init(&t->sh[i].t, sizeof(cmh_live));
    }
    return t;
}

int cmh_live_insert(cmh_livetab *t, const cmh_live *l)
{
    shard *s = shard_of(t, l->addr);
    shard_lock(s);
    void *slot = cmh_oa_put(&s->t, l);
    shard_unlock(s);
    return slot ? 0 : -1;
}

int cmh_live_remove(cmh_livetab *t, uint64_t addr, cmh_live *out)
{
    if (!addr) return 0;
    shard *s = shard_of(t, addr);
    shard_lock(s);
    uint32_t j = cmh_oa_index(&s->t, addr);
    if (j != UINT32_MAX) {
        *out = *(const cmh_live *)cmh_oa_at(&s->t, j);
        cmh_oa_remove_at(&s->t, j);
    }
    shard_unlock(s);
    return j != UINT32_MAX;
}

int cmh_live_update(cmh_livetab *t, uint64_t addr, int (*fn)(cmh_live *, void *), void *arg, cmh_live *copy)
{
    if (!addr) return 0;
    shard *s = shard_of(t, addr);
    int found = 0;
    shard_lock(s);
    cmh_live *slot = cmh_oa_find(&s->t, addr);
    if (slot) {
        found = fn(slot, arg) ? 1 : 2;
        if (copy) *copy = *slot;
    }
    shard_unlock(s);
    return found;
}

uint64_t cmh_live_remove_if(cmh_livetab *t, int (*pred)(const cmh_live *, void *), void (*gone)(const cmh_live *),
                            void *arg)
{
    uint64_t total = 0;
    cmh_live hit[64];
    for (int si = 0; si < NSHARD; si++) {
        shard *s = &t->sh[si];
        for (;;) {
            int n = 0;
            shard_lock(s);
            for (uint32_t j = 0; j < s->t.cap && n < 64;) {
                cmh_live *l = cmh_oa_at(&s->t, j);
                if (l->addr && pred(l, arg)) {
                    hit[n++] = *l;
                    cmh_oa_remove_at(&s->t, j); /* may pull a later record into j: look at j again */
                    continue;
                }
                j++;
            }
            shard_unlock(s);
            for (int i = 0; i < n; i++) gone(&hit[i]);
            total += (uint64_t)n;
            if (n < 64) break;
        }
    }
    return total;
}

static int cmp_live(const void *a, const void *b)
{
    const cmh_live *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int cmh_live_collect(cmh_livetab *t, cmh_live **out, size_t *count)
{
    size_t n = 0, cap = 0;
    cmh_live *all = NULL;
    for (int si = 0; si < NSHARD; si++) {
        shard *s = &t->sh[si];
        shard_lock(s);
        if (n + s->t.n > cap) {
            size_t nc = (n + s->t.n) * 2 + 16;
            cmh_live *na = realloc(all, nc * sizeof *na);
            if (!na) {
                shard_unlock(s);
                free(all);
                return CMH_ENOMEM;
            }
            all = na;
            cap = nc;
        }
        for (uint32_t j = 0; j < s->t.cap; j++) {
            const cmh_live *l = cmh_oa_at(&s->t, j);
            if (l->addr) all[n++] = *l;
        }
        shard_unlock(s);
    }
    if (n) qsort(all, n, sizeof *all, cmp_live);
    *out = all;
    *count = n;
    return CMH_OK;
}

void cmh_live_lock_all(cmh_livetab *t)
{
    for (int i = 0; i < NSHARD; i++) shard_lock(&t->sh[i]);
}

void cmh_live_unlock_all(cmh_livetab *t)
{
    for (int i = NSHARD - 1; i >= 0; i--) shard_unlock(&t->sh[i]);
}

void cmh_live_reset(cmh_livetab *t)
{
    for (int i = 0; i < NSHARD; i++) {
        __atomic_store_n(&t->sh[i].lock, 0u, __ATOMIC_RELAXED);
        cmh_oa_free(&t->sh[i].t);
    }
}
