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
 * (frees and unmaps: before the call, undone if the driver refuses; see history.c); a refusal other
 * than an OOM is noted on the failure branch only (drverr.c: a double free, an unknown pointer).  What the
 * recorder keeps of pools and VMM is pools.c's and vmm.c's; this file only intercepts.
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Helpers the recorder itself needs from the driver. */
static CUresult (*real_cuCtxGetDevice)(CUdevice *);
static CUresult (*real_cuMemGetInfo_v2)(size_t *, size_t *);
static CUresult (*real_cuDeviceGetUuid)(CUuuid *, CUdevice);
static CUresult (*real_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*real_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*real_cuMemPoolGetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
static CUresult (*real_cuDeviceGetMemPool)(CUmemoryPool *, CUdevice);
static CUresult (*real_cuCtxGetCurrent)(CUcontext *);
static CUresult (*real_cuCtxPushCurrent)(CUcontext);
static CUresult (*real_cuCtxPopCurrent)(CUcontext *);
static CUresult (*real_cuStreamGetDevice)(CUstream, CUdevice *); /* CUDA 12.8 on */
static CUresult (*real_cuStreamGetCtx)(CUstream, CUcontext *);
static CUresult (*real_cuDeviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);

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
    X(cuMemPoolCreate, "cuMemPoolCreate", 11020, 0, (CUmemoryPool * pool, const CUmemPoolProps *props))          \
    X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 11020, 0,                                                  \
      (CUmemoryPool pool, CUmemPool_attribute attr, void *value))                                                \
    X(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 7000, 1, (CUstream s))                                    \
    X(cuStreamSynchronize, "cuStreamSynchronize", 2000, 0, (CUstream s))                                         \
    X(cuCtxSynchronize, "cuCtxSynchronize", 2000, 0, (void))                                                     \
    X(cuEventSynchronize, "cuEventSynchronize", 2000, 0, (CUevent ev))                                           \
    X(cuStreamDestroy_v2, "cuStreamDestroy", 4000, 0, (CUstream s))                                              \
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
    X(cuMemFreeHost, "cuMemFreeHost", 2000, 0, (void *p))                                                        \
    X(cuCtxDestroy_v2, "cuCtxDestroy", 4000, 0, (CUcontext ctx))                                                 \
    X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0, (CUdevice dev))

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
    real_cuDeviceGetUuid = (CUresult(*)(CUuuid *, CUdevice))cmh_driver_sym("cuDeviceGetUuid_v2");
    if (!real_cuDeviceGetUuid) real_cuDeviceGetUuid = (CUresult(*)(CUuuid *, CUdevice))cmh_driver_sym("cuDeviceGetUuid");
    real_cuDeviceGetName = (CUresult(*)(char *, int, CUdevice))cmh_driver_sym("cuDeviceGetName");
    real_cuDeviceGetPCIBusId = (CUresult(*)(char *, int, CUdevice))cmh_driver_sym("cuDeviceGetPCIBusId");
    real_cuMemPoolGetAttribute =
        (CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))cmh_driver_sym("cuMemPoolGetAttribute");
    real_cuDeviceGetMemPool = (CUresult(*)(CUmemoryPool *, CUdevice))cmh_driver_sym("cuDeviceGetMemPool");
    real_cuCtxGetCurrent = (CUresult(*)(CUcontext *))cmh_driver_sym("cuCtxGetCurrent");
    real_cuCtxPushCurrent = (CUresult(*)(CUcontext))cmh_driver_sym("cuCtxPushCurrent_v2");
    real_cuCtxPopCurrent = (CUresult(*)(CUcontext *))cmh_driver_sym("cuCtxPopCurrent_v2");
    real_cuStreamGetDevice = (CUresult(*)(CUstream, CUdevice *))cmh_driver_sym("cuStreamGetDevice");
    real_cuStreamGetCtx = (CUresult(*)(CUstream, CUcontext *))cmh_driver_sym("cuStreamGetCtx");
    real_cuDeviceGetDefaultMemPool = (CUresult(*)(CUmemoryPool *, CUdevice))cmh_driver_sym("cuDeviceGetDefaultMemPool");
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

int cmh_driver_pool_attrs(uint64_t pool, uint64_t *reserved, uint64_t *used)
{
    ensure_driver();
    cuuint64_t r = 0, u = 0;
    CUmemoryPool p = (CUmemoryPool)(uintptr_t)pool;
    if (!real_cuMemPoolGetAttribute || real_cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) != CUDA_SUCCESS ||
        real_cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u) != CUDA_SUCCESS)
        return -1;
    *reserved = r;
    *used = u;
    return 0;
}

int cmh_driver_pool_threshold(uint64_t pool, uint64_t *threshold)
{
    ensure_driver();
    cuuint64_t t = 0;
    if (!real_cuMemPoolGetAttribute ||
        real_cuMemPoolGetAttribute((CUmemoryPool)(uintptr_t)pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &t) != CUDA_SUCCESS)
        return -1;
    *threshold = t;
    return 0;
}

uint64_t cmh_driver_default_pool(int device)
{
    ensure_driver();
    CUmemoryPool p = NULL;
    if (!real_cuDeviceGetDefaultMemPool || real_cuDeviceGetDefaultMemPool(&p, (CUdevice)device) != CUDA_SUCCESS) return 0;
    return (uint64_t)(uintptr_t)p;
}

/* ---- which device a stream is of ----
 * A stream-ordered allocation is the stream's device's (cuMemAllocAsync: from the pool current to
 * the stream's device), whatever context is current: asked of the driver once per stream
 * (cuStreamGetDevice, or the stream's context made current for cuCtxGetDevice where the driver is
 * older than 12.8) and kept in a small per-thread cache, emptied for every thread when any stream
 * is destroyed (a new stream can take a destroyed one's handle). */
#define SCACHE 8
static uint32_t g_stream_gen = 1; /* bumped at every cuStreamDestroy */
static __thread struct {
    CUstream s;
    uint32_t gen;
    int dev;
} t_scache[SCACHE];

static int ask_stream_device(CUstream s, int *dev)
{
    CUdevice d = -1;
    if (real_cuStreamGetDevice) {
        if (real_cuStreamGetDevice(s, &d) != CUDA_SUCCESS) return -1;
    } else {
        CUcontext c = NULL, popped;
        if (!real_cuStreamGetCtx || real_cuStreamGetCtx(s, &c) != CUDA_SUCCESS || !c || !real_cuCtxPushCurrent ||
            !real_cuCtxPopCurrent || !real_cuCtxGetDevice || real_cuCtxPushCurrent(c) != CUDA_SUCCESS)
            return -1;
        CUresult r = real_cuCtxGetDevice(&d);
        real_cuCtxPopCurrent(&popped);
        if (r != CUDA_SUCCESS) return -1;
    }
    if (d < 0 || d >= CMH_MAX_DEVICES) return -1;
    *dev = d;
    return 0;
}

static int stream_device(CUstream s)
{
    /* the NULL, legacy and per-thread streams are the current context's */
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return cmh_current_device();
    ensure_driver();
    uint32_t gen = __atomic_load_n(&g_stream_gen, __ATOMIC_ACQUIRE);
    unsigned slot = (unsigned)(((uintptr_t)s >> 4) * 0x9E3779B1u) % SCACHE;
    if (t_scache[slot].s == s && t_scache[slot].gen == gen) return t_scache[slot].dev;
    int dev;
    if (ask_stream_device(s, &dev) != 0) return cmh_current_device(); /* the driver says nothing: as before */
    t_scache[slot].s = s, t_scache[slot].gen = gen, t_scache[slot].dev = dev;
    return dev;
}

/* The device a pool's memory is on: as recorded when it was created or first used; else its
 * device's default pool's; else the current context's. */
static int pool_device(CUmemoryPool pool)
{
    int dev = cmh_pools_device((uint64_t)(uintptr_t)pool);
    if (dev >= 0) return dev;
    for (int d = 0; d < CMH_MAX_DEVICES; d++) {
        uint64_t p = cmh_driver_default_pool(d);
        if (!p && d > 0) break; /* past the devices the driver has */
        if (p == (uint64_t)(uintptr_t)pool) return d;
    }
    return cmh_current_device();
}

/* ---- what the driver says of each device's memory (cuMemGetInfo) ----
 * Sampled at a device's first allocation (in the allocating thread, whose context is current;
 * that context is kept), at each out-of-memory error, and at each dump (through the kept
 * context, pushed on the dumping thread).  Reports take the device's used bytes from them. */
#define MAX_SAMPLES 4096
/* time_ns holds raw ticks (cmh_now_ticks) until cmh_meminfo_export maps them as the entries'
 * are: a sample stamped on another clock (CLOCK_REALTIME beside the entries' TSC line) came out
 * up to milliseconds off the entry it follows, before the first allocation it already counted,
 * and owners took that allocation's bytes for someone else's (fs2.cmh: 'the device had 1.0 GiB
 * in use' of a program that held 512 MiB). */
static cmh_meminfo g_samples[MAX_SAMPLES];
static uint32_t g_nsamples;
static pthread_mutex_t g_samples_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_dev_ctx[CMH_MAX_DEVICES];
static int g_dev_sampled[CMH_MAX_DEVICES];
static int g_dev_lost[CMH_MAX_DEVICES]; /* its kept context was destroyed: the next allocation's takes its place */
/* which GPU each device number is (the process's numbers: CUDA_VISIBLE_DEVICES renumbers), asked
 * once at its first allocation; under g_samples_lock */
static cmh_device_ident g_idents[CMH_MAX_DEVICES];

/* Sample device (its context current on this thread); 0, or -1 when the driver says nothing.
 * thread: the recording thread taking it right after its own call (0 for a dump's: a dump can
 * come long after the dumping thread's last call, so its calls bound nothing): another
 * thread's allocation can leave the driver before the sample and reach the trace after it, and
 * the analyzer needs to know whose next entries could be such (owners.c); naming the sampler
 * costs the sample, never an allocation. */
static int sample_current(int device, uint64_t *free_out, uint32_t thread)
{
    ensure_driver();
    size_t f = 0, t = 0;
    if (!real_cuMemGetInfo_v2 || real_cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS) return -1;
    if (free_out) *free_out = f;
    /* stamped after the driver answered (so after the sampler's own call it includes), on the
     * entries' clock */
    int64_t ticks = cmh_now_ticks();
    pthread_mutex_lock(&g_samples_lock);
    if (g_nsamples < MAX_SAMPLES) g_samples[g_nsamples++] = (cmh_meminfo){device, ticks, f, t, thread};
    else cmh_count_lost(1);
    pthread_mutex_unlock(&g_samples_lock);
    cmh_flight_meminfo(device, ticks, f, t, thread);
    return 0;
}

/* Which GPU device is: its UUID, name and PCI bus id, as the driver says (nothing kept when it
 * gives no UUID). */
static void identify(int device)
{
    CUuuid u;
    cmh_device_ident d = {.device = device};
    if (!real_cuDeviceGetUuid || real_cuDeviceGetUuid(&u, (CUdevice)device) != CUDA_SUCCESS) return;
    cmh_uuid_text((const unsigned char *)u.bytes, d.uuid);
    if (!real_cuDeviceGetName || real_cuDeviceGetName(d.name, (int)sizeof d.name, (CUdevice)device) != CUDA_SUCCESS) d.name[0] = 0;
    if (!real_cuDeviceGetPCIBusId || real_cuDeviceGetPCIBusId(d.pci_bus, (int)sizeof d.pci_bus, (CUdevice)device) != CUDA_SUCCESS)
        d.pci_bus[0] = 0;
    d.name[sizeof d.name - 1] = d.pci_bus[sizeof d.pci_bus - 1] = 0;
    pthread_mutex_lock(&g_samples_lock);
    g_idents[device] = d;
    pthread_mutex_unlock(&g_samples_lock);
    cmh_flight_device(&d);
}

static void first_alloc(int device)
{
    /* a device whose kept context was destroyed (context_gone): the next allocation's context,
     * of that device, is kept in its place, for the dumps' samples (none taken here: the device
     * was sampled at its first allocation already) */
    if (CMH_UNLIKELY(device >= 0 && device < CMH_MAX_DEVICES && __atomic_load_n(&g_dev_lost[device], __ATOMIC_RELAXED)) &&
        cmh_current_device() == device && __atomic_exchange_n(&g_dev_lost[device], 0, __ATOMIC_ACQ_REL)) {
        CUcontext c = NULL;
        if (real_cuCtxGetCurrent && real_cuCtxGetCurrent(&c) == CUDA_SUCCESS && c) __atomic_store_n(&g_dev_ctx[device], c, __ATOMIC_RELEASE);
        else __atomic_store_n(&g_dev_lost[device], 1, __ATOMIC_RELEASE);
    }
    /* only through a context of that device (a VMM allocation names its device, whatever the
     * thread's context is) */
    if (device < 0 || device >= CMH_MAX_DEVICES || __atomic_load_n(&g_dev_sampled[device], __ATOMIC_RELAXED) ||
        cmh_current_device() != device || __atomic_exchange_n(&g_dev_sampled[device], 1, __ATOMIC_ACQ_REL))
        return;
    CUcontext c = NULL;
    if (real_cuCtxGetCurrent && real_cuCtxGetCurrent(&c) == CUDA_SUCCESS && c)
        __atomic_store_n(&g_dev_ctx[device], c, __ATOMIC_RELEASE);
    sample_current(device, NULL, cmh_hist_thread());
    identify(device);
}

/* first_alloc of a stream-ordered allocation on device, which need not be the current context's: the
 * stream's context (of that device) made current for it (its first sample and the kept context). */
static void first_alloc_on_stream(int device, CUstream s)
{
    if (device < 0 || device >= CMH_MAX_DEVICES || __atomic_load_n(&g_dev_sampled[device], __ATOMIC_RELAXED)) return;
    if (cmh_current_device() == device) {
        first_alloc(device);
        return;
    }
    CUcontext c = NULL, popped;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !real_cuStreamGetCtx || !real_cuCtxPushCurrent ||
        !real_cuCtxPopCurrent || real_cuStreamGetCtx(s, &c) != CUDA_SUCCESS || !c || real_cuCtxPushCurrent(c) != CUDA_SUCCESS)
        return;
    first_alloc(device); /* (only where that context is the device's) */
    real_cuCtxPopCurrent(&popped);
}

void cmh_meminfo_sample_all(void)
{
    ensure_driver();
    if (!real_cuCtxPushCurrent || !real_cuCtxPopCurrent) return;
    for (int d = 0; d < CMH_MAX_DEVICES; d++) {
        CUcontext c = __atomic_load_n(&g_dev_ctx[d], __ATOMIC_ACQUIRE), popped;
        if (!c || real_cuCtxPushCurrent(c) != CUDA_SUCCESS) continue; /* a context destroyed since: nothing said */
        sample_current(d, NULL, 0); /* (not right after a call of the dumping thread's: none named) */
        real_cuCtxPopCurrent(&popped);
    }
}

void cmh_meminfo_sample_live(void)
{
    ensure_driver();
    cmh_pools_refresh(-1); /* what the pools keep now: a synchronize may have trimmed them (pools.c) */
    if (!real_cuCtxPushCurrent || !real_cuCtxPopCurrent || !real_cuMemGetInfo_v2) return;
    for (int d = 0; d < CMH_MAX_DEVICES; d++) {
        CUcontext c = __atomic_load_n(&g_dev_ctx[d], __ATOMIC_ACQUIRE), popped;
        if (!c || real_cuCtxPushCurrent(c) != CUDA_SUCCESS) continue;
        size_t f = 0, t = 0;
        if (real_cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS) cmh_flight_meminfo(d, cmh_now_ticks(), f, t, 0);
        real_cuCtxPopCurrent(&popped);
    }
}

int cmh_meminfo_export(cmh_snapshot *s)
{
    pthread_mutex_lock(&g_samples_lock);
    int rc = CMH_OK;
    int64_t now_ticks = cmh_now_ticks(), now_ns = cmh_now_ns();
    for (uint32_t i = 0; i < g_nsamples && rc == CMH_OK; i++) {
        cmh_meminfo m = g_samples[i];
        m.time_ns = cmh_ticks_to_ns(m.time_ns, now_ticks, now_ns);
        rc = cmh_snapshot_add_meminfo(s, &m);
    }
    for (int d = 0; d < CMH_MAX_DEVICES && rc == CMH_OK; d++)
        if (g_idents[d].uuid[0]) rc = cmh_snapshot_add_ident(s, &g_idents[d]);
    pthread_mutex_unlock(&g_samples_lock);
    return rc;
}

void cmh_meminfo_reset_after_fork(void)
{
    pthread_mutex_init(&g_samples_lock, NULL);
    g_nsamples = 0;
    memset(g_dev_sampled, 0, sizeof g_dev_sampled);
    memset(g_dev_ctx, 0, sizeof g_dev_ctx); /* the parent's contexts are not the child's */
    memset(g_dev_lost, 0, sizeof g_dev_lost);
    memset(g_idents, 0, sizeof g_idents);  /* asked again at the child's first allocation */
}

/* sample_current for device, whose context may not be the current one (a stream-ordered request on
 * another device's stream): its kept context pushed for the sample */
static int sample_device(int device, uint64_t *free_out, uint32_t thread)
{
    if (cmh_current_device() == device) return sample_current(device, free_out, thread);
    CUcontext c = device >= 0 && device < CMH_MAX_DEVICES ? __atomic_load_n(&g_dev_ctx[device], __ATOMIC_ACQUIRE) : NULL, popped;
    if (!c || !real_cuCtxPushCurrent || !real_cuCtxPopCurrent || real_cuCtxPushCurrent(c) != CUDA_SUCCESS) return -1;
    int r = sample_current(device, free_out, thread);
    real_cuCtxPopCurrent(&popped);
    return r;
}

/* pool: a stream-ordered request's pool (0 for any other), recorded right before the OOM's entry */
static void oom(int device, int kind, uint64_t size, uint64_t stream, uint64_t pool)
{
    uint64_t f = CMH_DEVICE_FREE_UNKNOWN; /* a host OOM's: no device free to tell */
    if (kind != CMH_KIND_HOST) cmh_pools_refresh(device); /* what pools keep at this moment, before the OOM's entry */
    if (pool) cmh_pools_request(pool, device);
    if (kind != CMH_KIND_HOST && sample_device(device, &f, cmh_hist_thread()) != 0) f = CMH_DEVICE_FREE_UNKNOWN;
    cmh_hist_oom(device, kind, size, stream, f);
    cmh_process_oom();
}

/* call: the entry point's base name, for a failure other than an OOM (drverr.c) */
static void after_alloc(const char *call, CUresult r, int device, int kind, uint64_t addr, uint64_t size,
                        uint64_t requested, uint64_t stream, uint64_t pool)
{
    if (r == CUDA_SUCCESS) {
        cmh_hist_segment_alloc(device, kind, addr, size, requested, stream, pool, CMH_ACT_SEGMENT_ALLOC);
        if (kind != CMH_KIND_HOST) first_alloc(device);
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY) oom(device, kind, size, stream, pool);
    else cmh_drverr_note(call, r, 0, requested);
}

static CUresult free_hooked(CUresult (*fn)(CUdeviceptr), CUdeviceptr p)
{
    cmh_live was;
    int had = cmh_rec_enabled() && p && cmh_hist_segment_free(p, 0, CMH_ACT_SEGMENT_FREE, &was);
    CUresult r = fn(p);
    if (CMH_UNLIKELY(r != CUDA_SUCCESS)) { /* a double free, a pointer never allocated, an address inside one */
        if (had) cmh_hist_free_undo(&was);
        cmh_drverr_note("cuMemFree", r, p, 0);
    }
    return r;
}

/* ---- linear, pitch, managed ---- */

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
    REAL(cuMemAlloc_v2);
    CUresult r = fn_(dptr, n);
    if (cmh_rec_enabled()) after_alloc("cuMemAlloc", r, cmh_current_device(), CMH_KIND_DEVICE, r == CUDA_SUCCESS ? *dptr : 0, n, n, 0, 0);
    return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned elem)
{
    REAL(cuMemAllocPitch_v2);
    CUresult r = fn_(dptr, pitch, w, h, elem);
    if (cmh_rec_enabled()) {
        uint64_t size = r == CUDA_SUCCESS ? (uint64_t)*pitch * h : (uint64_t)w * h;
        after_alloc("cuMemAllocPitch", r, cmh_current_device(), CMH_KIND_PITCH, r == CUDA_SUCCESS ? *dptr : 0, size, (uint64_t)w * h, 0, 0);
    }
    return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned flags)
{
    REAL(cuMemAllocManaged);
    CUresult r = fn_(dptr, n, flags);
    if (cmh_rec_enabled()) after_alloc("cuMemAllocManaged", r, cmh_current_device(), CMH_KIND_MANAGED, r == CUDA_SUCCESS ? *dptr : 0, n, n, 0, 0);
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
    REAL(cuMemFree_v2);
    return free_hooked(fn_, p);
}

/* ---- stream-ordered allocation and pools (pools.c samples each pool after every operation) ---- */

/* dev_expr: the allocation's device (the stream's, or the pool's location), worked out after the
 * call; pool_expr: its pool, known also for a failed request (the OOM names it) */
#define ASYNC_ALLOC(name, base, call, dev_expr, pool_expr)                                                       \
    REAL(name);                                                                                                  \
    CUresult r = call;                                                                                           \
    if (!cmh_rec_enabled()) return r; /* (nothing noted while recording is off, as the other hooks) */         \
    if (CMH_UNLIKELY(r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY)) cmh_drverr_note(base, r, 0, n);        \
    else {                                                                                                       \
        int dev_ = dev_expr;                                                                                     \
        uint64_t pool_ = (uint64_t)(uintptr_t)(pool_expr);                                                       \
        after_alloc(base, r, dev_, CMH_KIND_ASYNC, r == CUDA_SUCCESS ? *dptr : 0, n, n, (uint64_t)(uintptr_t)s, pool_); \
        if (r == CUDA_SUCCESS) first_alloc_on_stream(dev_, s);                                                   \
        if (pool_ && r == CUDA_SUCCESS) cmh_pools_sample(pool_, dev_);                                           \
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
    ASYNC_ALLOC(cuMemAllocAsync, "cuMemAllocAsync", fn_(dptr, n, s), stream_device(s), current_pool(dev_))
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s)
{
    ASYNC_ALLOC(cuMemAllocAsync_ptsz, "cuMemAllocAsync", fn_(dptr, n, s), stream_device(s), current_pool(dev_))
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s)
{
    ASYNC_ALLOC(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", fn_(dptr, n, pool, s), pool_device(pool), pool)
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s)
{
    ASYNC_ALLOC(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", fn_(dptr, n, pool, s), pool_device(pool), pool)
}

/* the pool the allocation came from, remembered with it (cmh_live.aux), takes it back */
#define ASYNC_FREE(name)                                                                                         \
    REAL(name);                                                                                                  \
    cmh_live was;                                                                                                \
    int had = cmh_rec_enabled() && p && cmh_hist_segment_free(p, (uint64_t)(uintptr_t)s, CMH_ACT_SEGMENT_FREE, &was);  \
    CUresult r = fn_(p, s);                                                                                      \
    if (CMH_UNLIKELY(r != CUDA_SUCCESS)) {                                                                       \
        if (had) cmh_hist_free_undo(&was);                                                                       \
        cmh_drverr_note("cuMemFreeAsync", r, p, 0);                                                              \
    } else if (had && was.aux) cmh_pools_sample(was.aux, was.device);                                            \
    return r;

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { ASYNC_FREE(cuMemFreeAsync) }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { ASYNC_FREE(cuMemFreeAsync_ptsz) }

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    REAL(cuMemPoolTrimTo);
    CUresult r = fn_(pool, keep);
    if (r == CUDA_SUCCESS && cmh_rec_enabled()) {
        int dev = cmh_pools_device((uint64_t)(uintptr_t)pool);
        cmh_pools_sample((uint64_t)(uintptr_t)pool, dev >= 0 ? dev : cmh_current_device());
    }
    return r;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    REAL(cuMemPoolCreate);
    CUresult r = fn_(pool, props);
    if (r == CUDA_SUCCESS && pool && cmh_rec_enabled()) {
        /* a pool is its location's device's, whatever context is current */
        int dev = props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE && props->location.id >= 0 &&
                          props->location.id < CMH_MAX_DEVICES
                      ? props->location.id
                      : cmh_current_device();
        cmh_pools_created((uint64_t)(uintptr_t)*pool, dev, cmh_rec_context() >= CMH_CONTEXT_ALLOC ? cmh_stack_capture() : 0);
    }
    return r;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    REAL(cuMemPoolSetAttribute);
    CUresult r = fn_(pool, attr, value);
    if (r == CUDA_SUCCESS && attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD && value)
        cmh_pools_threshold((uint64_t)(uintptr_t)pool, *(cuuint64_t *)value);
    return r;
}

/* ---- synchronizes: where a pool gives back what it holds above its release threshold ---- */

#define SYNC_HOOK(name, call)                                                                                    \
    REAL(name);                                                                                                  \
    CUresult r = call;                                                                                           \
    if (r == CUDA_SUCCESS && cmh_rec_enabled()) cmh_pools_synchronized();                                        \
    return r;

CUresult cuStreamSynchronize(CUstream s) { SYNC_HOOK(cuStreamSynchronize, fn_(s)) }
CUresult cuStreamSynchronize_ptsz(CUstream s) { SYNC_HOOK(cuStreamSynchronize_ptsz, fn_(s)) }
CUresult cuCtxSynchronize(void) { SYNC_HOOK(cuCtxSynchronize, fn_()) }
CUresult cuEventSynchronize(CUevent ev) { SYNC_HOOK(cuEventSynchronize, fn_(ev)) }

CUresult cuStreamDestroy_v2(CUstream s)
{
    REAL(cuStreamDestroy_v2);
    /* every thread's cached stream devices forgotten: the handle may come back as another device's */
    __atomic_add_fetch(&g_stream_gen, 1, __ATOMIC_ACQ_REL);
    return fn_(s);
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    REAL(cuMemPoolDestroy);
    cmh_pools_destroying((uint64_t)(uintptr_t)pool); /* the helper's question about it answered first */
    CUresult r = fn_(pool);
    if (r == CUDA_SUCCESS) cmh_pools_destroyed((uint64_t)(uintptr_t)pool);
    else cmh_pools_destroy_refused((uint64_t)(uintptr_t)pool);
    return r;
}

/* ---- virtual memory management (vmm.c keeps handles, reservations and mapped ranges) ---- */

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop, unsigned long long flags)
{
    REAL(cuMemCreate);
    CUresult r = fn_(h, n, prop, flags);
    if (!cmh_rec_enabled()) return r;
    /* The device comes from the allocation's location, never from a current context. */
    int dev = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : cmh_current_device();
    /* (the device's first sample waits for a map: taken here, it counted the handle, in no
     * segment yet, and owners called it 'not recorded (CUDA context, other processes)') */
    if (r == CUDA_SUCCESS) cmh_vmm_handle_created(*h, dev, n);
    else if (r == CUDA_ERROR_OUT_OF_MEMORY) oom(dev, CMH_KIND_VMM, n, 0, 0);
    else cmh_drverr_note("cuMemCreate", r, 0, n);
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    REAL(cuMemRelease);
    CUresult r = fn_(h);
    if (r == CUDA_SUCCESS) cmh_vmm_handle_released(h);
    else cmh_drverr_note("cuMemRelease", r, (uint64_t)h, 0); /* (a handle released twice, or never made) */
    return r;
}

CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags)
{
    REAL(cuMemMap);
    CUresult r = fn_(p, n, off, h, flags);
    if (r == CUDA_SUCCESS && cmh_rec_enabled()) {
        int dev = cmh_vmm_handle_device(h);
        cmh_vmm_mapped(dev >= 0 ? dev : cmh_current_device(), p, n, h);
        first_alloc(dev >= 0 ? dev : cmh_current_device());
    } else if (r != CUDA_SUCCESS) cmh_drverr_note("cuMemMap", r, p, n);
    return r;
}

CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
    REAL(cuMemUnmap);
    cmh_unmap u;
    cmh_vmm_unmap(p, n, &u); /* recorded before the driver unmaps, as every free */
    CUresult r = fn_(p, n);
    if (CMH_UNLIKELY(r != CUDA_SUCCESS)) {
        cmh_vmm_unmap_undo(&u);
        cmh_drverr_note("cuMemUnmap", r, p, n);
    } else cmh_vmm_unmap_done(&u);
    return r;
}

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags)
{
    REAL(cuMemAddressReserve);
    CUresult r = fn_(p, n, align, addr, flags);
    if (r == CUDA_SUCCESS && p) cmh_vmm_reserved(*p, n);
    else if (r != CUDA_SUCCESS) cmh_drverr_note("cuMemAddressReserve", r, addr, n);
    return r;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
    REAL(cuMemAddressFree);
    CUresult r = fn_(p, n);
    if (r == CUDA_SUCCESS) cmh_vmm_reservation_freed(p);
    else cmh_drverr_note("cuMemAddressFree", r, p, n);
    return r;
}

/* ---- pinned host memory ---- */

CUresult cuMemAllocHost_v2(void **pp, size_t n)
{
    REAL(cuMemAllocHost_v2);
    CUresult r = fn_(pp, n);
    if (cmh_rec_enabled()) after_alloc("cuMemAllocHost", r, -1, CMH_KIND_HOST, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, n, n, 0, 0);
    return r;
}

CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags)
{
    REAL(cuMemHostAlloc);
    CUresult r = fn_(pp, n, flags);
    if (cmh_rec_enabled()) after_alloc("cuMemHostAlloc", r, -1, CMH_KIND_HOST, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, n, n, 0, 0);
    return r;
}

CUresult cuMemFreeHost(void *p)
{
    REAL(cuMemFreeHost);
    cmh_live was;
    int had = cmh_rec_enabled() && p && cmh_hist_segment_free((uint64_t)(uintptr_t)p, 0, CMH_ACT_SEGMENT_FREE, &was);
    CUresult r = fn_(p);
    if (CMH_UNLIKELY(r != CUDA_SUCCESS)) {
        if (had) cmh_hist_free_undo(&was);
        cmh_drverr_note("cuMemFreeHost", r, (uint64_t)(uintptr_t)p, 0);
    }
    return r;
}

/* ---- contexts: a destroyed context's memory is freed with it ---- */

/* The device of context ctx (-1 unknown): made current on this thread for the question. */
static int ctx_device_of(CUcontext ctx)
{
    ensure_driver();
    CUcontext popped;
    CUdevice d = -1;
    if (!ctx || !real_cuCtxPushCurrent || !real_cuCtxPopCurrent || !real_cuCtxGetDevice) return -1;
    if (real_cuCtxPushCurrent(ctx) != CUDA_SUCCESS) return -1;
    if (real_cuCtxGetDevice(&d) != CUDA_SUCCESS) d = -1;
    real_cuCtxPopCurrent(&popped);
    return d >= 0 && d < CMH_MAX_DEVICES ? d : -1;
}

/* After a context of device went (ctx; NULL: the primary one was reset): its allocations, taken
 * before the call (addrs), end as freed.  A destroyed context the dumps sampled the device
 * through is forgotten (the next allocation's context on the device takes its place: first_alloc);
 * a reset primary context stays a valid handle, kept. */
static void context_gone(int device, CUcontext ctx, uint64_t *addrs, size_t n)
{
    (void)cmh_hist_context_gone(addrs, n);
    free(addrs);
    if (ctx && __atomic_compare_exchange_n(&g_dev_ctx[device], &ctx, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        __atomic_store_n(&g_dev_lost[device], 1, __ATOMIC_RELEASE);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    REAL(cuCtxDestroy_v2);
    int dev = cmh_rec_enabled() ? ctx_device_of(ctx) : -1;
    uint64_t *addrs = NULL;
    size_t n = 0;
    if (dev >= 0 && cmh_hist_context_collect(dev, &addrs, &n) != CMH_OK) cmh_count_lost(1);
    CUresult r = fn_(ctx);
    if (r == CUDA_SUCCESS && dev >= 0) context_gone(dev, ctx, addrs, n);
    else free(addrs);
    return r;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    REAL(cuDevicePrimaryCtxReset_v2);
    int ok = cmh_rec_enabled() && dev >= 0 && dev < CMH_MAX_DEVICES;
    uint64_t *addrs = NULL;
    size_t n = 0;
    if (ok && cmh_hist_context_collect(dev, &addrs, &n) != CMH_OK) cmh_count_lost(1);
    CUresult r = fn_(dev);
    if (r == CUDA_SUCCESS && ok) context_gone(dev, NULL, addrs, n);
    else free(addrs);
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
