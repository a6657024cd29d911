/*
 * pools.c - the fake driver's stream-ordered allocation (fakecuda.h): one default pool per
 * device and created ones, each charging its ranges (marked with their owner in the allocator)
 * to its used and reserved bytes, with the attributes and trims a program reads and sets.
 */
#include "fakecuda.h"

#include <stdlib.h>

/* ---- stream-ordered allocation: one default pool per device ---- */

fake_pool g_default_pool[FAKE_MAX_DEVICES];

static int stream_device(CUstream s, int *dev)
{
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
        *dev = ((fake_stream *)s)->ctx->device;
        return 1;
    }
    return ctx_device(dev) == CUDA_SUCCESS;
}

#define POOL_CHUNK (2ull << 20)

static CUresult pool_alloc(fake_pool *pool, CUdeviceptr *dptr, size_t n)
{
    if (!dptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a = 0;
    pthread_mutex_lock(&g_lock);
    CUresult r = range_alloc_locked(pool->device, n, &a);
    if (r == CUDA_SUCCESS) {
        used_find_locked(pool->device, a)->owner = pool;
        pool->used += (n + FAKE_ALIGN - 1) & ~(uint64_t)(FAKE_ALIGN - 1);
        uint64_t want = (pool->used + POOL_CHUNK - 1) & ~(POOL_CHUNK - 1);
        if (want > pool->reserved) pool->reserved = want;
        if (pool->reserved > pool->high) pool->high = pool->reserved;
        *dptr = (CUdeviceptr)a;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
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
    if (n && pool) pool->used = pool->used >= n ? pool->used - n : 0;
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
    pthread_mutex_unlock(&g_lock);
    if (p < g_default_pool || p >= g_default_pool + FAKE_MAX_DEVICES) free(p);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    FAULT("cuMemPoolTrimTo");
    fake_pool *p = (fake_pool *)pool;
    pthread_mutex_lock(&g_lock);
    uint64_t floor_b = (p->used + POOL_CHUNK - 1) & ~(POOL_CHUNK - 1);
    p->reserved = keep > floor_b ? (p->reserved < keep ? p->reserved : keep) : floor_b;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* The release threshold is accepted and kept; the fake pool releases only on a trim. */
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

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    fake_pool *p = (fake_pool *)pool;
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
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
