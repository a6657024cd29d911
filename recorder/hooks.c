/*
 * hooks.c - the driver entry points the recorder intercepts, and how callers reach them.
 *
 * Three routes lead here:
 *  1. symbol interposition: a program linked against libcuda calls cuMemAlloc_v2 and the
 *     preloaded export below wins;
 *  2. cuGetProcAddress(_v2): cudart and frameworks ask the driver for base names ("cuMemAlloc")
 *     with a cudaVersion and flags.  The caller's exact arguments go to the real driver; the
 *     pointer it returns is matched against the driver's exported variants (cuMemAlloc_v2,
 *     cuMemAllocAsync_ptsz, ...) and swapped for our wrapper of that variant.  A pointer that
 *     matches no export falls back to the documented rule (newest variant at or below
 *     cudaVersion; _ptsz iff PER_THREAD_DEFAULT_STREAM and not LEGACY_STREAM);
 *  3. dlsym(handle, "cu...") on a dlopen'ed driver (driver.c, dlsym_x86_64.S).
 * Every wrapper calls the real function through a pointer taken from the driver's own handle,
 * forwards its result untouched, holds no lock across it, and records only after success
 * (frees: before the call, undone if the driver refuses; see history.c).
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress
#include <pthread.h>
#include <string.h>

#include "internal.h"

#define CMH_EXPORT __attribute__((visibility("default")))

/* Helpers the recorder itself needs from the driver. */
static CUresult (*real_cuCtxGetDevice)(CUdevice *);
static CUresult (*real_cuMemGetInfo_v2)(size_t *, size_t *);
static CUresult (*real_cuMemPoolGetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
static CUresult (*real_cuDeviceGetMemPool)(CUmemoryPool *, CUdevice);

/* name, base name, PFN version, ptsz, return type args */
#define HOOK_LIST(X)                                                                                             \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0,                                                         \
      (const char *symbol, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st))             \
    X(cuGetProcAddress, "cuGetProcAddress", 11030, 0, (const char *symbol, void **pfn, int ver, cuuint64_t flags)) \
    X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, (CUdeviceptr * dptr, size_t n))                                      \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0,                                                            \
      (CUdeviceptr * dptr, size_t *pitch, size_t w, size_t h, unsigned elem))                                    \
    X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, (CUdeviceptr * dptr, size_t n, unsigned flags))           \
    X(cuMemFree_v2, "cuMemFree", 3020, 0, (CUdeviceptr p))                                                       \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 1, (CUdeviceptr * dptr, size_t n, CUstream s))             \
    X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, (CUdeviceptr * dptr, size_t n, CUstream s))                  \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 1,                                         \
      (CUdeviceptr * dptr, size_t n, CUmemoryPool pool, CUstream s))                                             \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0,                                              \
      (CUdeviceptr * dptr, size_t n, CUmemoryPool pool, CUstream s))                                             \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 1, (CUdeviceptr p, CUstream s))                              \
    X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0, (CUdeviceptr p, CUstream s))                                   \
    X(cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, 0, (CUmemoryPool pool, size_t keep))                           \
    X(cuMemPoolDestroy, "cuMemPoolDestroy", 11020, 0, (CUmemoryPool pool))                                       \
    X(cuMemCreate, "cuMemCreate", 10020, 0,                                                                      \
      (CUmemGenericAllocationHandle * h, size_t n, const CUmemAllocationProp *prop, unsigned long long flags))     \
    X(cuMemRelease, "cuMemRelease", 10020, 0, (CUmemGenericAllocationHandle h))                                  \
    X(cuMemMap, "cuMemMap", 10020, 0,                                                                            \
      (CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags))            \
    X(cuMemUnmap, "cuMemUnmap", 10020, 0, (CUdeviceptr p, size_t n))                                             \
    X(cuMemAddressReserve, "cuMemAddressReserve", 10020, 0,                                                      \
      (CUdeviceptr * p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags))                     \
    X(cuMemAddressFree, "cuMemAddressFree", 10020, 0, (CUdeviceptr p, size_t n))                                 \
    X(cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0, (void **pp, size_t n))                                       \
    X(cuMemHostAlloc, "cuMemHostAlloc", 2020, 0, (void **pp, size_t n, unsigned flags))                          \
    X(cuMemFreeHost, "cuMemFreeHost", 2000, 0, (void *p))

#define DECLARE_REAL(name, base, ver, ptsz, args) static CUresult(*real_##name) args;
HOOK_LIST(DECLARE_REAL)

#define DECLARE_EXPORT(name, base, ver, ptsz, args) CMH_EXPORT CUresult name args;
HOOK_LIST(DECLARE_EXPORT)

typedef struct hook {
    const char *name, *base;
    int version, ptsz;
    void *wrapper;
    void **real; /* where the real pointer lives */
} hook;

#define HOOK_ENTRY(name, base, ver, ptsz, args) {#name, base, ver, ptsz, (void *)name, (void **)&real_##name},
/* Per base name, newest variant first (the rule below takes the first that fits). */
static const hook g_hooks[] = {HOOK_LIST(HOOK_ENTRY)};
#define NHOOKS (sizeof g_hooks / sizeof g_hooks[0])

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static __thread int t_in_init;

static void drv_init(void)
{
    t_in_init = 1;
    for (size_t i = 0; i < NHOOKS; i++) {
        void *p = cmh_driver_sym(g_hooks[i].name);
        void *expected = NULL;
        if (p) __atomic_compare_exchange_n(g_hooks[i].real, &expected, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    real_cuCtxGetDevice = (CUresult(*)(CUdevice *))cmh_driver_sym("cuCtxGetDevice");
    real_cuMemGetInfo_v2 = (CUresult(*)(size_t *, size_t *))cmh_driver_sym("cuMemGetInfo_v2");
    real_cuMemPoolGetAttribute =
        (CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))cmh_driver_sym("cuMemPoolGetAttribute");
    real_cuDeviceGetMemPool = (CUresult(*)(CUmemoryPool *, CUdevice))cmh_driver_sym("cuDeviceGetMemPool");
    t_in_init = 0;
}

static inline void ensure_driver(void) { pthread_once(&g_once, drv_init); }

#define REAL(name)                                                                                               \
    __typeof__(real_##name) fn_ = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE);                               \
    if (CMH_UNLIKELY(!fn_)) {                                                                                    \
        ensure_driver();                                                                                         \
        fn_ = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE);                                                   \
        if (!fn_) return CUDA_ERROR_NOT_INITIALIZED;                                                             \
    }

int cmh_current_device(void)
{
    ensure_driver();
    CUdevice d = 0;
    if (!real_cuCtxGetDevice || real_cuCtxGetDevice(&d) != CUDA_SUCCESS) return 0;
    return d >= 0 && d < CMH_MAX_DEVICES ? d : 0;
}

uint64_t cmh_device_free_bytes(void)
{
    ensure_driver();
    size_t f = 0, t = 0;
    if (!real_cuMemGetInfo_v2 || real_cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS) return 0;
    return f;
}

static void after_alloc(CUresult r, int device, int kind, uint64_t addr, uint64_t size, uint64_t requested,
                        uint64_t stream, int action)
{
    if (r == CUDA_SUCCESS) {
        cmh_hist_segment_alloc(device, kind, addr, size, requested, stream, action);
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        cmh_hist_oom(device, size, stream, kind == CMH_KIND_HOST ? 0 : cmh_device_free_bytes());
        cmh_dump_on_oom();
    }
}

static CUresult free_hooked(CUresult (*fn)(CUdeviceptr), CUdeviceptr p)
{
    cmh_live was;
    int had = cmh_enabled_now && p && cmh_hist_segment_free(p, 0, CMH_ACT_SEGMENT_FREE, &was);
    CUresult r = fn(p);
    if (had && r != CUDA_SUCCESS) cmh_hist_free_undo(&was);
    return r;
}

/* ---- linear, pitch, managed ---- */

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
    REAL(cuMemAlloc_v2);
    CUresult r = fn_(dptr, n);
    if (cmh_enabled_now)
        after_alloc(r, cmh_current_device(), CMH_KIND_DEVICE, r == CUDA_SUCCESS ? *dptr : 0, n, n, 0,
                    CMH_ACT_SEGMENT_ALLOC);
    return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned elem)
{
    REAL(cuMemAllocPitch_v2);
    CUresult r = fn_(dptr, pitch, w, h, elem);
    if (cmh_enabled_now) {
        uint64_t size = r == CUDA_SUCCESS ? (uint64_t)*pitch * h : (uint64_t)w * h;
        after_alloc(r, cmh_current_device(), CMH_KIND_PITCH, r == CUDA_SUCCESS ? *dptr : 0, size, (uint64_t)w * h, 0,
                    CMH_ACT_SEGMENT_ALLOC);
    }
    return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned flags)
{
    REAL(cuMemAllocManaged);
    CUresult r = fn_(dptr, n, flags);
    if (cmh_enabled_now)
        after_alloc(r, cmh_current_device(), CMH_KIND_MANAGED, r == CUDA_SUCCESS ? *dptr : 0, n, n, 0,
                    CMH_ACT_SEGMENT_ALLOC);
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
    REAL(cuMemFree_v2);
    return free_hooked(fn_, p);
}

/* ---- stream-ordered allocation and pools ----
 * Each async allocation is a segment holding one block; the pool behind it reserves more than
 * it hands out.  After every operation on a pool its reserved and used bytes are read from the
 * driver (pool attributes, host-side queries, outside any lock of ours) and recorded as a
 * pool_sample, so reserved memory includes what pools keep.  A pool's used bytes change when
 * the stream reaches a free, so a sample taken at the call may lag by the stream's queue. */
#define NPOOLS 64
static struct {
    uint64_t h;
    int device;
    int64_t slack; /* reserved - used at the last sample */
} g_pools[NPOOLS];
static int g_npools;
static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;

static void pool_record(uint64_t h, int device, uint64_t reserved, uint64_t used, int gone)
{
    int64_t slack = reserved > used ? (int64_t)(reserved - used) : 0;
    pthread_mutex_lock(&g_pools_lock);
    int i = 0;
    while (i < g_npools && g_pools[i].h != h) i++;
    if (i == g_npools) {
        if (gone || g_npools == NPOOLS) {
            if (!gone) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&g_pools_lock);
            return;
        }
        g_pools[g_npools] = (__typeof__(g_pools[0])){h, device, 0};
        __atomic_store_n(&g_npools, g_npools + 1, __ATOMIC_RELEASE); /* read unlocked by pool_sample_device */
    }
    cmh_hist_pool_sample(device, h, reserved, used, slack - g_pools[i].slack);
    g_pools[i].slack = slack;
    if (gone) {
        g_pools[i] = g_pools[g_npools - 1];
        __atomic_store_n(&g_npools, g_npools - 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_pools_lock);
}

static void pool_sample(CUmemoryPool pool, int device)
{
    cuuint64_t reserved = 0, used = 0;
    if (!pool || !real_cuMemPoolGetAttribute ||
        real_cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
        real_cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS)
        return;
    pool_record((uint64_t)(uintptr_t)pool, device, reserved, used, 0);
}

/* after a free: which pool took it back is not known, so every pool seen on the device */
static void pool_sample_device(int device)
{
    CUmemoryPool mine[NPOOLS];
    int n = 0;
    if (!__atomic_load_n(&g_npools, __ATOMIC_RELAXED)) return; /* frees of cuMemAlloc'd memory: no pools */
    pthread_mutex_lock(&g_pools_lock);
    for (int i = 0; i < g_npools; i++)
        if (g_pools[i].device == device) mine[n++] = (CUmemoryPool)(uintptr_t)g_pools[i].h;
    pthread_mutex_unlock(&g_pools_lock);
    for (int i = 0; i < n; i++) pool_sample(mine[i], device);
}

/* After the history is cleared: every known pool's state again, so the new trace starts from it. */
void cmh_pools_resample(void)
{
    uint64_t h[NPOOLS];
    int dev[NPOOLS], n = 0;
    pthread_mutex_lock(&g_pools_lock);
    for (int i = 0; i < g_npools; i++) h[n] = g_pools[i].h, dev[n++] = g_pools[i].device;
    pthread_mutex_unlock(&g_pools_lock);
    for (int i = 0; i < n; i++) pool_sample((CUmemoryPool)(uintptr_t)h[i], dev[i]);
}

/* fork(): the child's pools are not the parent's */
void cmh_pools_reset_after_fork(void)
{
    pthread_mutex_init(&g_pools_lock, NULL);
    g_npools = 0;
}

static int pool_device(CUmemoryPool pool)
{
    int device = -1;
    pthread_mutex_lock(&g_pools_lock);
    for (int i = 0; i < g_npools; i++)
        if (g_pools[i].h == (uint64_t)(uintptr_t)pool) device = g_pools[i].device;
    pthread_mutex_unlock(&g_pools_lock);
    return device;
}

#define ASYNC_ALLOC(name, call, pool_expr)                                                                       \
    REAL(name);                                                                                                  \
    CUresult r = call;                                                                                           \
    if (cmh_enabled_now) {                                                                                       \
        int dev_ = cmh_current_device();                                                                         \
        after_alloc(r, dev_, CMH_KIND_ASYNC, r == CUDA_SUCCESS ? *dptr : 0, n, n, (uint64_t)(uintptr_t)s,        \
                    CMH_ACT_SEGMENT_ALLOC);                                                                      \
        if (r == CUDA_SUCCESS) {                                                                                 \
            CUmemoryPool pool_ = pool_expr;                                                                      \
            pool_sample(pool_, dev_);                                                                            \
        }                                                                                                        \
    }                                                                                                            \
    return r;

static CUmemoryPool current_pool(int device)
{
    CUmemoryPool p = NULL;
    if (!real_cuDeviceGetMemPool || real_cuDeviceGetMemPool(&p, device) != CUDA_SUCCESS) return NULL;
    return p;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s)
{
    ASYNC_ALLOC(cuMemAllocAsync, fn_(dptr, n, s), current_pool(dev_))
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s)
{
    ASYNC_ALLOC(cuMemAllocAsync_ptsz, fn_(dptr, n, s), current_pool(dev_))
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s)
{
    ASYNC_ALLOC(cuMemAllocFromPoolAsync, fn_(dptr, n, pool, s), pool)
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s)
{
    ASYNC_ALLOC(cuMemAllocFromPoolAsync_ptsz, fn_(dptr, n, pool, s), pool)
}

#define ASYNC_FREE(name)                                                                                         \
    REAL(name);                                                                                                  \
    cmh_live was;                                                                                                \
    int had = cmh_enabled_now && p && cmh_hist_segment_free(p, (uint64_t)(uintptr_t)s, CMH_ACT_SEGMENT_FREE, &was); \
    CUresult r = fn_(p, s);                                                                                      \
    if (had && r != CUDA_SUCCESS) cmh_hist_free_undo(&was);                                                      \
    if (had && r == CUDA_SUCCESS) pool_sample_device(was.device);                                               \
    return r;

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { ASYNC_FREE(cuMemFreeAsync) }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { ASYNC_FREE(cuMemFreeAsync_ptsz) }

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    REAL(cuMemPoolTrimTo);
    CUresult r = fn_(pool, keep);
    if (r == CUDA_SUCCESS && cmh_enabled_now) {
        int dev = pool_device(pool);
        pool_sample(pool, dev >= 0 ? dev : cmh_current_device());
    }
    return r;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    REAL(cuMemPoolDestroy);
    int dev = pool_device(pool);
    CUresult r = fn_(pool);
    if (r == CUDA_SUCCESS && dev >= 0) pool_record((uint64_t)(uintptr_t)pool, dev, 0, 0, 1);
    return r;
}

/* ---- virtual memory management ---- */

/* cuMemCreate handles -> device, so a later cuMemMap is charged to the right device. */
#define NHANDLES 1024
static struct {
    uint64_t h;
    int device;
} g_handles[NHANDLES];
static pthread_mutex_t g_handles_lock = PTHREAD_MUTEX_INITIALIZER;

static void handle_put(uint64_t h, int device)
{
    pthread_mutex_lock(&g_handles_lock);
    size_t j = (h * 0x9E3779B97F4A7C15ull >> 32) % NHANDLES;
    for (size_t k = 0; k < NHANDLES; k++, j = (j + 1) % NHANDLES)
        if (!g_handles[j].h || g_handles[j].h == ~0ull || g_handles[j].h == h) {
            g_handles[j].h = h;
            g_handles[j].device = device;
            break;
        }
    pthread_mutex_unlock(&g_handles_lock);
}

static int handle_device(uint64_t h, int remove)
{
    int dev = -1;
    pthread_mutex_lock(&g_handles_lock);
    size_t j = (h * 0x9E3779B97F4A7C15ull >> 32) % NHANDLES;
    for (size_t k = 0; k < NHANDLES && g_handles[j].h; k++, j = (j + 1) % NHANDLES)
        if (g_handles[j].h == h) {
            dev = g_handles[j].device;
            if (remove) g_handles[j].h = ~0ull; /* a tombstone keeps the probe chain */
            break;
        }
    pthread_mutex_unlock(&g_handles_lock);
    return dev;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop, unsigned long long flags)
{
    REAL(cuMemCreate);
    CUresult r = fn_(h, n, prop, flags);
    if (!cmh_enabled_now) return r;
    /* The device comes from the allocation's location, never from a current context. */
    int dev = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : cmh_current_device();
    if (r == CUDA_SUCCESS) handle_put(*h, dev);
    else if (r == CUDA_ERROR_OUT_OF_MEMORY) after_alloc(r, dev, CMH_KIND_VMM, 0, n, n, 0, CMH_ACT_SEGMENT_MAP);
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    REAL(cuMemRelease);
    CUresult r = fn_(h);
    if (r == CUDA_SUCCESS && cmh_enabled_now) handle_device(h, 1);
    return r;
}

CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags)
{
    REAL(cuMemMap);
    CUresult r = fn_(p, n, off, h, flags);
    if (r == CUDA_SUCCESS && cmh_enabled_now) {
        int dev = handle_device(h, 0);
        if (dev < 0) dev = cmh_current_device();
        cmh_hist_segment_alloc(dev, CMH_KIND_VMM, p, n, n, 0, CMH_ACT_SEGMENT_MAP);
    }
    return r;
}

CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
    REAL(cuMemUnmap);
    CUresult r = fn_(p, n);
    if (r == CUDA_SUCCESS && cmh_enabled_now) cmh_hist_unmap(p, n);
    return r;
}

/* Reserving address space costs no memory, but a reservation is what makes maps one segment:
 * contiguous maps inside one reservation are exported as one growing segment, the way PyTorch's
 * expandable segments appear (history.c).  Kept in a small table; past it, maps stay separate. */
#define NRES 256
static struct {
    uint64_t lo, hi;
} g_res[NRES];
static int g_nres;
static pthread_mutex_t g_res_lock = PTHREAD_MUTEX_INITIALIZER;

int cmh_vmm_reservation(uint64_t addr, uint64_t *lo, uint64_t *hi)
{
    int found = 0;
    pthread_mutex_lock(&g_res_lock);
    for (int i = 0; i < g_nres && !found; i++)
        if (addr >= g_res[i].lo && addr < g_res[i].hi) {
            *lo = g_res[i].lo;
            *hi = g_res[i].hi;
            found = 1;
        }
    pthread_mutex_unlock(&g_res_lock);
    return found;
}

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags)
{
    REAL(cuMemAddressReserve);
    CUresult r = fn_(p, n, align, addr, flags);
    if (r == CUDA_SUCCESS && p && n) {
        pthread_mutex_lock(&g_res_lock);
        if (g_nres < NRES) g_res[g_nres++] = (__typeof__(g_res[0])){*p, *p + n};
        pthread_mutex_unlock(&g_res_lock);
    }
    return r;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
    REAL(cuMemAddressFree);
    CUresult r = fn_(p, n);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&g_res_lock);
        for (int i = 0; i < g_nres; i++)
            if (g_res[i].lo == p) {
                g_res[i] = g_res[--g_nres];
                break;
            }
        pthread_mutex_unlock(&g_res_lock);
    }
    return r;
}

/* ---- pinned host memory ---- */

CUresult cuMemAllocHost_v2(void **pp, size_t n)
{
    REAL(cuMemAllocHost_v2);
    CUresult r = fn_(pp, n);
    if (cmh_enabled_now)
        after_alloc(r, -1, CMH_KIND_HOST, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, n, n, 0,
                    CMH_ACT_SEGMENT_ALLOC);
    return r;
}

CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags)
{
    REAL(cuMemHostAlloc);
    CUresult r = fn_(pp, n, flags);
    if (cmh_enabled_now)
        after_alloc(r, -1, CMH_KIND_HOST, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, n, n, 0,
                    CMH_ACT_SEGMENT_ALLOC);
    return r;
}

CUresult cuMemFreeHost(void *p)
{
    REAL(cuMemFreeHost);
    cmh_live was;
    int had = cmh_enabled_now && p && cmh_hist_segment_free((uint64_t)(uintptr_t)p, 0, CMH_ACT_SEGMENT_FREE, &was);
    CUresult r = fn_(p);
    if (had && r != CUDA_SUCCESS) cmh_hist_free_undo(&was);
    return r;
}

/* ---- cuGetProcAddress ---- */

static void *map_variant(const char *base, void *p, int ver, cuuint64_t flags)
{
    if (!base || !p || cmh_in_own_module(p) || t_in_init) return p;
    ensure_driver();
    for (size_t i = 0; i < NHOOKS; i++)
        if (__atomic_load_n(g_hooks[i].real, __ATOMIC_ACQUIRE) == p) return g_hooks[i].wrapper;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    for (size_t i = 0; i < NHOOKS; i++) {
        const hook *k = &g_hooks[i];
        if (strcmp(k->base, base) != 0 || k->version > ver || k->ptsz != want_ptsz) continue;
        /* Not one of the driver's exports: adopt it as this variant's real function. */
        void *expected = NULL;
        __atomic_compare_exchange_n(k->real, &expected, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        if (cmh_cfg.debug) cmh_log("cuGetProcAddress(%s, %d, %llu): unexported pointer taken as %s", base, ver,
                                   (unsigned long long)flags, k->name);
        return k->wrapper;
    }
    return p; /* a legacy variant (e.g. 32-bit cuMemAlloc) or a name we do not hook */
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    REAL(cuGetProcAddress_v2);
    CUresult r = fn_(symbol, pfn, ver, flags, st);
    if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = map_variant(symbol, *pfn, ver, flags);
    return r;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
    REAL(cuGetProcAddress);
    CUresult r = fn_(symbol, pfn, ver, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = map_variant(symbol, *pfn, ver, flags);
    return r;
}

void *cmh_hook_for_symbol(const char *name, void *real)
{
    if (t_in_init) return real;
    for (size_t i = 0; i < NHOOKS; i++) {
        if (strcmp(g_hooks[i].name, name) != 0) continue;
        void *expected = NULL;
        __atomic_compare_exchange_n(g_hooks[i].real, &expected, real, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        /* Hand out the wrapper only if it will call this very function. */
        return __atomic_load_n(g_hooks[i].real, __ATOMIC_ACQUIRE) == real ? g_hooks[i].wrapper : real;
    }
    return real;
}
