/*
 * pools.c - the fake driver's stream-ordered allocation (fakecuda.h): one default pool per
 * device and created ones, each charging its ranges (marked with their owner in the allocator)
 * to its used and reserved bytes, with the attributes and trims a program reads and sets.
 *
 * A pool's reserved bytes are device memory, as the driver's are (CU_MEMPOOL_ATTR_RESERVED_MEM_
 * CURRENT: the backing memory allocated for the pool): cuMemGetInfo counts them used, and no other
 * allocation has them.  A free returns its bytes to the pool, not to the device; the pool gives
 * them back on cuMemPoolTrimTo (down to the bytes to keep, never below what backs outstanding
 * allocations), and on a stream, event or context synchronize when it holds more than its
 * release threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, default 0: all it can), as the driver
 * API's reference says of both.  A pool serves an allocation from what it keeps first.  (It
 * was the other way: a free gave the range back to the device while the pool still reported it
 * reserved, so an OOM beside a pool's cache read as one with room on the device.)
 */
#include "fakecuda.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- stream-ordered allocation: one default pool per device ---- */

fake_pool g_default_pool[FAKE_MAX_DEVICES];
static fake_pool *g_pools; /* the created ones, under g_lock */

static int stream_device(CUstream s, int *dev)
{
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
        *dev = ((fake_stream *)s)->ctx->device;
        return 1;
    }
    return ctx_device(dev) == CUDA_SUCCESS;
}

#define POOL_CHUNK (2ull << 20) /* the pool's backing grows by this much at a time, where it fits */

static CUresult pool_alloc(fake_pool *pool, CUdeviceptr *dptr, size_t n)
{
    if (!dptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t size = ((uint64_t)n + FAKE_ALIGN - 1) & ~(uint64_t)(FAKE_ALIGN - 1), a = 0;
    pthread_mutex_lock(&g_lock);
    fake_device *d = &g_dev[pool->device];
    /* what the pool keeps serves first: the device is asked only for the rest */
    uint64_t kept = pool->reserved - pool->used, mine = size < kept ? size : kept;
    d->pool_cache -= mine;
    CUresult r = range_alloc_locked(pool->device, size, &a);
    if (r != CUDA_SUCCESS) {
        d->pool_cache += mine;
    } else {
        used_find_locked(pool->device, a)->owner = pool;
        pool->used += size;
        if (pool->used > pool->reserved) { /* grown: its backing rounded up to the chunk where the device has it */
            uint64_t extra = ((pool->used + POOL_CHUNK - 1) & ~(POOL_CHUNK - 1)) - pool->used;
            if (!room_locked(d, extra)) extra = 0;
            d->pool_cache += extra;
            pool->reserved = pool->used + extra;
        }
        if (pool->reserved > pool->high) pool->high = pool->reserved;
        *dptr = (CUdeviceptr)a;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Give back to the device what p keeps beyond keep bytes reserved, never what backs its
 * outstanding allocations (rounded to the chunk, as the driver's backing is coarser than them). */
static void pool_release_locked(fake_pool *p, uint64_t keep)
{
    uint64_t floor_b = (p->used + POOL_CHUNK - 1) & ~(POOL_CHUNK - 1);
    uint64_t target = keep > floor_b ? keep : floor_b;
    if (target < p->used) target = p->used;
    if (p->reserved <= target) return;
    g_dev[p->device].pool_cache -= p->reserved - target;
    p->reserved = target;
}

void pools_synchronized(void)
{
    pthread_mutex_lock(&g_lock);
    for (int d = 0; d < g_ndev; d++)
        if (g_default_pool[d].reserved > g_default_pool[d].threshold) pool_release_locked(&g_default_pool[d], g_default_pool[d].threshold);
    for (fake_pool *p = g_pools; p; p = p->next)
        if (p->reserved > p->threshold) pool_release_locked(p, p->threshold);
    pthread_mutex_unlock(&g_lock);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s)
{
    FAULT("cuMemAllocAsync");
    int dev;
    if (!stream_device(s, &dev)) return CUDA_ERROR_INVALID_CONTEXT;
    return pool_alloc(&g_default_pool[dev], dptr, n); /* (a default pool knows its device from start-up) */
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s) { return cuMemAllocAsync(dptr, n, s); }

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s)
{
    FAULT("cuMemAllocFromPoolAsync");
    (void)s;
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return pool_alloc((fake_pool *)pool, dptr, n);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s)
{
    return cuMemAllocFromPoolAsync(dptr, n, pool, s);
}

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    FAULT("cuMemFreeAsync");
    (void)s;
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int dev = dev_of_addr(p);
    used_range *u = dev >= 0 ? used_find_locked(dev, p) : NULL;
    fake_pool *pool = u ? u->owner : NULL; /* NULL: a cuMemAlloc'd pointer, freed in order */
    uint64_t n = u ? range_free_locked(dev, p) : 0;
    if (n && pool) { /* the bytes stay the pool's, reserved: still used on the device */
        pool->used -= n;
        g_dev[dev].pool_cache += n;
    }
    pthread_mutex_unlock(&g_lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    *pool = (CUmemoryPool)&g_default_pool[dev];
    return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    FAULT("cuMemPoolCreate");
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !props || props->location.id < 0 || props->location.id >= g_ndev) return CUDA_ERROR_INVALID_VALUE;
    fake_pool *p = calloc(1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    p->device = props->location.id;
    pthread_mutex_lock(&g_lock);
    p->next = g_pools;
    g_pools = p;
    pthread_mutex_unlock(&g_lock);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) { return cuDeviceGetDefaultMemPool(pool, dev); }

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    FAULT("cuMemPoolDestroy");
    fake_pool *p = (fake_pool *)pool;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock); /* its live pointers stay valid; frees no longer charge it */
    for (int d = 0; d < g_ndev; d++)
        for (unsigned b = 0; b < USED_BUCKETS; b++)
            for (used_range *u = g_dev[d].used_map[b]; u; u = u->next)
                if (u->owner == p) u->owner = NULL;
    g_dev[p->device].pool_cache -= p->reserved - p->used; /* what it kept goes back with it */
    p->reserved = p->used = 0;
    for (fake_pool **pp = &g_pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    if (p < g_default_pool || p >= g_default_pool + FAKE_MAX_DEVICES) free(p);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    FAULT("cuMemPoolTrimTo");
    fake_pool *p = (fake_pool *)pool;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    pool_release_locked(p, keep);
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* The release threshold is kept; a synchronize releases what a pool holds beyond it. */
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    fake_pool *p = (fake_pool *)pool;
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
        pthread_mutex_lock(&g_lock);
        p->threshold = *(cuuint64_t *)value;
        pthread_mutex_unlock(&g_lock);
        return CUDA_SUCCESS;
    }
    return attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ? CUDA_SUCCESS
                                                                                             : CUDA_ERROR_NOT_SUPPORTED;
}

/* FAKECUDA_POOL_ATTR_MS (tests): a query from any thread but the process's first waits this long
 * before it reads the pool, fakecuda_pool_attr_inside counting the queries waiting, so that a
 * test can destroy the pool while the recorder's helper is inside one (test_faults).
 * fakecuda_pool_attr_gate (tests): while a test holds it nonzero, such a query waits for it to
 * be let go (10 s at most), counted the same way. */
int fakecuda_pool_attr_inside, fakecuda_pool_attr_gate;
CUmemoryPool fakecuda_pool_attr_held; /* the pool of the query held last (NULL: none held now) */

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    fake_pool *p = (fake_pool *)pool;
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    const char *slow = getenv("FAKECUDA_POOL_ATTR_MS");
    if (slow && syscall(SYS_gettid) != getpid()) {
        long ms = atol(slow);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        __atomic_store_n(&fakecuda_pool_attr_held, pool, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&fakecuda_pool_attr_inside, 1, __ATOMIC_SEQ_CST);
        nanosleep(&ts, NULL);
        __atomic_sub_fetch(&fakecuda_pool_attr_inside, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&fakecuda_pool_attr_held, NULL, __ATOMIC_SEQ_CST);
    }
    if (__atomic_load_n(&fakecuda_pool_attr_gate, __ATOMIC_SEQ_CST) && syscall(SYS_gettid) != getpid()) {
        struct timespec ms = {0, 1000000};
        __atomic_store_n(&fakecuda_pool_attr_held, pool, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&fakecuda_pool_attr_inside, 1, __ATOMIC_SEQ_CST);
        for (int i = 0; i < 10000 && __atomic_load_n(&fakecuda_pool_attr_gate, __ATOMIC_SEQ_CST); i++) nanosleep(&ms, NULL);
        __atomic_sub_fetch(&fakecuda_pool_attr_inside, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&fakecuda_pool_attr_held, NULL, __ATOMIC_SEQ_CST);
    }
    pthread_mutex_lock(&g_lock);
    uint64_t v = 0;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
    default: break;
    }
    pthread_mutex_unlock(&g_lock);
    *(cuuint64_t *)value = v;
    return CUDA_SUCCESS;
}
