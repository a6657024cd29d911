/*
 * pools.c - stream-ordered memory pools: what each one reserves beyond what it hands out.
 *
 * Each async allocation is a segment holding one block; the pool behind it reserves more than
 * it hands out.  After every operation on a pool (an async allocation from it, an async free of
 * one of its allocations, a trim, its destruction) its reserved and used bytes are read from
 * the driver (pool attributes: host-side queries, outside any lock of ours) and recorded as a
 * pool_sample, so that reserved memory includes what pools keep.  Only the pool the operation
 * touched is queried: two attribute reads per operation, measured in bench_hooks (async rows).
 * A pool's used bytes change when the stream reaches a free, so a sample taken at the call may
 * lag by the stream's queue; and a pool gives back what it keeps above its release threshold at
 * a stream, event or context synchronize: hooks.c calls cmh_pools_synchronized after each, which
 * reads again the pools that held more than their threshold at their last sample (none: one
 * relaxed load) and records where what they keep changed.  An out-of-memory error reads the
 * device's pools again (cmh_pools_refresh) so that its moment has what they keep then, the
 * helper does with its live cuMemGetInfo samples (once a second, recorded only where a pool's
 * figure changed), and every dump does before its cuMemGetInfo samples (cmh_pools_at_dump: every
 * pool recorded, flagged CMH_EF_AT_DUMP), so the end of a record is what the driver said then.
 *
 * Each sample says the pool's kind in its stream field (CMH_POOL_*, snapshot.h): its device's
 * default pool or a private one (cuMemPoolCreate, whose sample carries that call's stack), and a
 * failed request's pool is sampled, flagged CMH_POOL_REQUEST, right before its oom entry.
 *
 * At most CMH_MAX_POOLS pools are followed (the replay trusts no more, analyzer/replay.c); an
 * operation on a pool past them is counted as lost.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "oatab.h"

#define CMH_MAX_POOLS 1024

typedef struct prec {
    uint64_t handle; /* key */
    int64_t device;
    int64_t slack;     /* reserved - used at the last sample */
    uint64_t threshold; /* its release threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), as last read or set */
    uint32_t tag;       /* CMH_POOL_DEFAULT or CMH_POOL_PRIVATE (snapshot.h), said on each of its samples */
    int over;           /* reserved > threshold at the last sample: a synchronize may give some back */
    int dying;          /* the program is destroying it: no new query of the driver about it */
    uint32_t busy;      /* resamples that copied it and have not yet recorded it: a destroy waits for them */
} prec;

static cmh_mutex g_lock = CMH_MUTEX_INITIALIZER;
static cmh_oatab g_pools = {NULL, 0, 0, sizeof(prec)};
static int g_any; /* read without the lock: has any pool been seen */
static int g_over; /* read without the lock: how many pools hold more than their release threshold */

/* changed_only: record nothing when what the pool keeps is as last recorded (a refresh);
 * flags: the entry's (CMH_EF_AT_DUMP); tag: CMH_POOL_* bits beyond the pool's kind (CMH_POOL_CREATED,
 * CMH_POOL_REQUEST); stack: the sample's (a creation's call site); kind: the pool's kind when it is
 * new here (0: ask the driver whether it is its device's default pool) */
static void pool_record(uint64_t h, int device, uint64_t reserved, uint64_t used, int gone, int changed_only, int flags,
                        uint32_t tag, uint32_t stack, uint32_t kind)
{
    int64_t slack = reserved > used ? (int64_t)(reserved - used) : 0;
    uint64_t thr = 0;
    if (!gone && !kind && cmh_pools_device(h) < 0) { /* first seen: its kind and threshold, asked once */
        kind = cmh_driver_default_pool(device) == h ? CMH_POOL_DEFAULT : CMH_POOL_PRIVATE;
        if (cmh_driver_pool_threshold(h, &thr) != 0) thr = 0;
    }
    cmh_lock(&g_lock);
    prec *p = cmh_oa_find(&g_pools, h);
    if (changed_only && (!p || p->slack == slack)) {
        cmh_unlock(&g_lock);
        return;
    }
    if (!p && !gone) {
        p = g_pools.n < CMH_MAX_POOLS ? cmh_oa_add(&g_pools, h) : NULL;
        if (p) {
            p->device = device;
            p->tag = kind ? kind : CMH_POOL_PRIVATE;
            p->threshold = thr;
            __atomic_store_n(&g_any, 1, __ATOMIC_RELAXED);
        }
    }
    if (!p) {
        cmh_unlock(&g_lock);
        if (!gone) cmh_count_lost(1);
        return;
    }
    /* recorded under the pools lock, so two samples of one pool reach the ring in order */
    cmh_hist_pool_sample((int)p->device, h, reserved, used, slack - p->slack, flags, p->tag | tag, stack);
    p->slack = slack;
    int over = !gone && reserved > p->threshold;
    if (over != p->over) __atomic_add_fetch(&g_over, over ? 1 : -1, __ATOMIC_RELAXED);
    p->over = over;
    if (gone) cmh_oa_remove(&g_pools, p);
    cmh_unlock(&g_lock);
}

void cmh_pools_sample(uint64_t pool, int device)
{
    uint64_t reserved, used;
    if (!pool || cmh_driver_pool_attrs(pool, &reserved, &used) != 0) return;
    pool_record(pool, device, reserved, used, 0, 0, 0, 0, 0, 0);
}

void cmh_pools_created(uint64_t pool, int device, uint32_t stack)
{
    uint64_t reserved = 0, used = 0, thr = 0;
    if (!pool) return;
    cmh_driver_pool_attrs(pool, &reserved, &used); /* (0 and 0 where the driver says nothing) */
    if (cmh_driver_pool_threshold(pool, &thr) != 0) thr = 0;
    cmh_lock(&g_lock); /* a handle the driver hands out again after a destroy: the new pool's */
    prec *p = cmh_oa_find(&g_pools, pool);
    if (p) {
        if (p->over) __atomic_sub_fetch(&g_over, 1, __ATOMIC_RELAXED);
        cmh_oa_remove(&g_pools, p);
    }
    p = g_pools.n < CMH_MAX_POOLS ? cmh_oa_add(&g_pools, pool) : NULL;
    if (p) {
        p->device = device;
        p->tag = CMH_POOL_PRIVATE;
        p->threshold = thr;
        __atomic_store_n(&g_any, 1, __ATOMIC_RELAXED);
    }
    cmh_unlock(&g_lock);
    /* (past the followed pools: nothing counted here, each operation on it is, as before) */
    if (p) pool_record(pool, device, reserved, used, 0, 0, 0, CMH_POOL_CREATED, stack, CMH_POOL_PRIVATE);
}

void cmh_pools_request(uint64_t pool, int device)
{
    uint64_t reserved, used;
    if (!pool || cmh_driver_pool_attrs(pool, &reserved, &used) != 0) return;
    pool_record(pool, device, reserved, used, 0, 0, 0, CMH_POOL_REQUEST, 0, 0);
}

void cmh_pools_threshold(uint64_t pool, uint64_t threshold)
{
    if (cmh_pools_device(pool) < 0) return; /* read at its first sample */
    cmh_lock(&g_lock);
    prec *p = cmh_oa_find(&g_pools, pool);
    if (p) p->threshold = threshold;
    cmh_unlock(&g_lock);
}

/* Before the driver destroys a pool: no resample asks about it from now on, and those that may
 * (their copy of the table, made before, holds it: its busy count) have recorded it.  Without the
 * wait the helper's once-a-second sample asked the driver about a pool the program had just
 * destroyed, the fake driver's freed memory (ThreadSanitizer: heap-use-after-free), a handle the
 * real driver may give a new pool.  Resamples of other pools are not waited for: the program's
 * thread sleeps only when one is reading this pool.  The caller holds no recorder lock. */
void cmh_pools_destroying(uint64_t pool)
{
    if (!cmh_pools_any()) return;
    cmh_lock(&g_lock);
    prec *p = cmh_oa_find(&g_pools, pool);
    uint32_t busy = 0;
    if (p) {
        p->dying = 1;
        busy = p->busy;
    }
    cmh_unlock(&g_lock);
    if (!busy) return;
    int saved = errno; /* the program's errno is not ours to change */
    struct timespec us = {0, 50000};
    do { /* (found again each turn: the table moves its entries when it grows) */
        nanosleep(&us, NULL);
        cmh_lock(&g_lock);
        p = cmh_oa_find(&g_pools, pool);
        busy = p ? p->busy : 0;
        cmh_unlock(&g_lock);
    } while (busy);
    errno = saved;
}

/* the driver refused the destroy: the pool lives on, and is sampled again */
void cmh_pools_destroy_refused(uint64_t pool)
{
    if (!cmh_pools_any()) return;
    cmh_lock(&g_lock);
    prec *p = cmh_oa_find(&g_pools, pool);
    if (p) p->dying = 0;
    cmh_unlock(&g_lock);
}

void cmh_pools_destroyed(uint64_t pool)
{
    if (cmh_pools_device(pool) >= 0) pool_record(pool, 0, 0, 0, 1, 0, 0, 0, 0, 0);
}

int cmh_pools_device(uint64_t pool)
{
    if (!__atomic_load_n(&g_any, __ATOMIC_RELAXED)) return -1;
    cmh_lock(&g_lock);
    prec *p = cmh_oa_find(&g_pools, pool);
    int dev = p ? (int)p->device : -1;
    cmh_unlock(&g_lock);
    return dev;
}

int cmh_pools_any(void) { return __atomic_load_n(&g_any, __ATOMIC_RELAXED); }

/* After the history is cleared: every known pool's state again, so the new trace starts from it. */
/* Every known pool of device (-1: of every device) read again; changed_only: recorded only where
 * what it keeps changed since its last sample; over_only: only the pools that held more than their
 * release threshold (a synchronize gives back only that). */
static void resample(int device, int changed_only, int flags, int over_only)
{
    if (!cmh_pools_any()) return;
    cmh_lock(&g_lock);
    uint32_t n = 0;
    prec *all = malloc((g_pools.n ? g_pools.n : 1) * sizeof *all);
    for (uint32_t i = 0; all && i < g_pools.cap; i++) {
        prec *p = cmh_oa_at(&g_pools, i);
        if (!cmh_oa_keyat(&g_pools, i) || p->dying || (device >= 0 && p->device != device) || (over_only && !p->over))
            continue;
        p->busy++; /* (under the lock: a destroy that marks it after sees it) */
        all[n++] = *p;
    }
    cmh_unlock(&g_lock);
    if (!all) {
        cmh_count_lost(1);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t reserved, used;
        if (cmh_driver_pool_attrs(all[i].handle, &reserved, &used) == 0)
            pool_record(all[i].handle, (int)all[i].device, reserved, used, 0, changed_only, flags, 0, 0, all[i].tag);
        cmh_lock(&g_lock); /* recorded: a destroy waiting for it may go on */
        prec *p = cmh_oa_find(&g_pools, all[i].handle);
        if (p && p->busy) p->busy--;
        cmh_unlock(&g_lock);
    }
    free(all);
}

void cmh_pools_resample(void) { resample(-1, 0, 0, 0); }

void cmh_pools_refresh(int device) { resample(device, 1, 0, 0); }

/* After a stream, event or context synchronize: a pool holding more than its release threshold
 * gives the rest back there (CUDA's stream-ordered allocator), which no other call shows.  Only
 * when some pool held more than its threshold at its last sample (one relaxed load otherwise),
 * those pools are read again and recorded where what they keep changed: the trim is an entry at
 * the synchronize, not at the pool's next operation. */
void cmh_pools_synchronized(void)
{
    if (!__atomic_load_n(&g_over, __ATOMIC_RELAXED)) return;
    resample(-1, 1, 0, 1);
}

/* At a dump: every known pool read again, and recorded where what it keeps changed since its last
 * sample (a trim the synchronize hooks did not see), flagged CMH_EF_AT_DUMP; an
 * unchanged pool adds no entry (a dump adds no entry to a ring that has not changed). */
void cmh_pools_at_dump(void) { resample(-1, 1, CMH_EF_AT_DUMP, 0); }

/* fork(): the child's pools are not the parent's */
void cmh_pools_reset_after_fork(void)
{
    cmh_mutex_init(&g_lock);
    cmh_oa_free(&g_pools);
    g_any = 0;
    g_over = 0; /* (busy counts went with the table: a resample under way at the fork is not the child's) */
}

void cmh_pools_atfork_prepare(void) { cmh_lock(&g_lock); }
void cmh_pools_atfork_parent(void) { cmh_unlock(&g_lock); }
