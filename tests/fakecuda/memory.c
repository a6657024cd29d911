/*
 * memory.c - the fake driver's plain memory (fakecuda.h): cuMemGetInfo, copies and memset,
 * linear, pitch and managed allocations from the device's address-space allocator, pinned host
 * memory, and FAKECUDA_THREAD_CACHE, the benchmarks' lock-free per-thread reuse of freed ranges.
 */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>

static CUresult alloc_on_current(uint64_t size, CUdeviceptr *out)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = ctx_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    uint64_t a = 0;
    pthread_mutex_lock(&g_lock);
    r = range_alloc_locked(dev, size, &a);
    pthread_mutex_unlock(&g_lock);
    if (r == CUDA_SUCCESS) *out = (CUdeviceptr)a;
    void (*on_alloc)(CUdeviceptr, size_t) = __atomic_load_n(&g_on_alloc, __ATOMIC_ACQUIRE);
    if (r == CUDA_SUCCESS && on_alloc) on_alloc((CUdeviceptr)a, size);
    return r;
}

static CUresult free_any(CUdeviceptr p)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (p == 0) return CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    int dev = dev_of_addr(p);
    uint64_t n = dev >= 0 ? range_free_locked(dev, p) : 0;
    pthread_mutex_unlock(&g_lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- memory info, copies ---- */

CUresult cuMemGetInfo(size_t *free_b, size_t *total_b)
{
    FAULT("cuMemGetInfo");
    int dev;
    CUresult r = ctx_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&g_lock);
    uint64_t taken = taken_locked(&g_dev[dev]); /* (never past the capacity: room_locked) */
    if (free_b) *free_b = taken < g_dev[dev].capacity ? g_dev[dev].capacity - taken : 0;
    if (total_b) *total_b = g_dev[dev].capacity;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* A test hook: device dev's memory taken (or, negative, given back) by no entry point the
 * recorder hooks, as a library's own path or another process would: cuMemGetInfo counts it. */
__attribute__((visibility("default"))) int fakecuda_take(int dev, long long bytes)
{
    pthread_mutex_lock(&g_lock);
    int ok = ensure_init_locked() == CUDA_SUCCESS && dev >= 0 && dev < g_ndev;
    if (ok) {
        fake_device *d = &g_dev[dev];
        uint64_t now = d->context + (uint64_t)bytes;
        ok = bytes >= 0 ? now <= d->capacity - d->used - d->pool_cache && now >= d->context : (uint64_t)-bytes <= d->context;
        if (ok) d->context = now;
    }
    pthread_mutex_unlock(&g_lock);
    return ok ? 0 : -1;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n)
{
    memset((void *)(uintptr_t)dst, v, n);
    return CUDA_SUCCESS;
}

/* ---- linear, pitch, managed ---- */

/* FAKECUDA_THREAD_CACHE: a thread's ranges, live or freed by it, by address; a freed one of the
 * same rounded size and device is handed out again with no lock (the bench's loops of pairs). */
#define TCACHE 32
static __thread struct {
    uint64_t addr, size;
    int dev, live;
} t_cache[TCACHE];
static __thread int t_ncache;
static int g_tcache = -1; /* -1: not read yet */

static int tcache_on(void)
{
    int on = __atomic_load_n(&g_tcache, __ATOMIC_RELAXED);
    if (on < 0) {
        const char *e = getenv("FAKECUDA_THREAD_CACHE");
        on = e && !strcmp(e, "1");
        __atomic_store_n(&g_tcache, on, __ATOMIC_RELAXED);
    }
    return on;
}

static CUresult alloc_cached(uint64_t size, CUdeviceptr *out)
{
    if (!out || !size) return alloc_on_current(size, out);
    int dev;
    CUresult r = ctx_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    uint64_t rounded = (size + FAKE_ALIGN - 1) & ~(uint64_t)(FAKE_ALIGN - 1);
    for (int i = 0; i < t_ncache; i++)
        if (!t_cache[i].live && t_cache[i].size == rounded && t_cache[i].dev == dev) {
            t_cache[i].live = 1;
            *out = (CUdeviceptr)t_cache[i].addr;
            return CUDA_SUCCESS;
        }
    r = alloc_on_current(size, out);
    if (r == CUDA_SUCCESS && t_ncache < TCACHE) {
        t_cache[t_ncache].addr = *out;
        t_cache[t_ncache].size = rounded;
        t_cache[t_ncache].dev = dev;
        t_cache[t_ncache++].live = 1;
    }
    return r;
}

static int free_cached(CUdeviceptr p)
{
    for (int i = 0; i < t_ncache; i++)
        if (t_cache[i].live && t_cache[i].addr == p) {
            t_cache[i].live = 0;
            return 1;
        }
    return 0;
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
    FAULT("cuMemAlloc");
    return tcache_on() ? alloc_cached(bytesize, dptr) : alloc_on_current(bytesize, dptr);
}

CUresult cuMemAllocPitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem)
{
    FAULT("cuMemAllocPitch");
    if (!pitch || (elem != 4 && elem != 8 && elem != 16) || width == 0 || height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) & ~(size_t)511;
    CUresult r = alloc_on_current((uint64_t)p * height, dptr);
    if (r == CUDA_SUCCESS) *pitch = p;
    return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FAULT("cuMemAllocManaged");
    (void)flags;
    CUresult r = alloc_on_current(bytesize, dptr);
    const char *off = getenv("FAKECUDA_MANAGED_OFFDEVICE");
    if (r != CUDA_SUCCESS || !off || strcmp(off, "1")) return r;
    /* not on the device (yet): cuMemGetInfo does not count it */
    int dev = dev_of_addr(*dptr);
    pthread_mutex_lock(&g_lock);
    used_range *u = dev >= 0 ? used_find_locked(dev, *dptr) : NULL;
    if (u && !u->offdev) {
        u->offdev = 1;
        g_dev[dev].used -= u->size;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult cuMemFree(CUdeviceptr p) {
    FAULT("cuMemFree");
    if (tcache_on() && p && free_cached(p)) return CUDA_SUCCESS;
    return free_any(p);
}

/* ---- host ---- */

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    FAULT("cuMemHostAlloc");
    (void)flags;
    if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void **pp, size_t bytesize)
{
    FAULT("cuMemAllocHost");
    if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    FAULT("cuMemFreeHost");
    free(p);
    return CUDA_SUCCESS;
}
