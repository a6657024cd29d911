/*
 * fakecuda.c - a host-backed libcuda.so.1 for machines without a GPU.
 *
 * Implements just enough of the CUDA Driver API for driver-API programs and for the recorder's
 * tests: init, devices, contexts, streams, every allocation entry point the recorder hooks,
 * memcpy/memset, stream-ordered pools and VMM, and cuGetProcAddress(_v2) answering base names
 * by cudaVersion and flags the way the real driver documents it.  It is our own code; it knows
 * nothing of NVIDIA's private interfaces.
 *
 * Each device owns one reservation of CAPACITY bytes of host address space (PROT_READ|WRITE,
 * MAP_NORESERVE), so a 64 GiB "device" costs nothing until its pages are touched, and device
 * pointers are real host pointers (memcpy works).  Inside it a first-fit free list with
 * coalescing hands out 512-byte-aligned ranges; running past the capacity returns
 * CUDA_ERROR_OUT_OF_MEMORY, and cuMemGetInfo reports capacity minus what is handed out.
 *
 * Environment: FAKECUDA_DEVICES (default 1, at most 8), FAKECUDA_CAPACITY (bytes per device,
 * suffixes K/M/G, default 16G), FAKECUDA_CONTEXT (bytes cuMemGetInfo counts as used besides the
 * allocations, as a real context's own memory; default 0), FAKECUDA_FAIL (faults to inject, below),
 * FAKECUDA_THREAD_CACHE=1 (for benchmarks: cuMemAlloc/cuMemFree keep each thread's last freed
 * ranges and hand them out again to it without the driver's lock, so that threads allocating at
 * once do not meet in the fake driver and the recorder's own cost stands out; ranges in a cache
 * still count as used in cuMemGetInfo; only for programs whose threads free what they allocated
 * themselves, as bench_hot's do).
 *
 * Fault injection, for the recorder's "forward every result unchanged" tests: FAKECUDA_FAIL is a
 * comma-separated list of NAME@N=CODE (the N-th call of entry point NAME, counted from 1,
 * returns CODE; N = '*': every call; =CODE defaults to 1, CUDA_ERROR_INVALID_VALUE), e.g.
 * "cuMemUnmap@2=1,cuMemAlloc@*=2".  NAME is the base name (cuMemAlloc for cuMemAlloc_v2).  A
 * test can also arm faults at run time with fakecuda_inject(), and run code inside an unmap
 * (after the driver's own work, before it returns) with fakecuda_on_unmap().
 *
 * Linked with -Wl,-Bsymbolic: the proc-address table must point at our own functions, never at
 * the recorder's same-named exports, exactly as the real driver behaves.
 *
 * One file although long: it is one idea, the driver API surface a test program sees, and
 * every entry point shares the device table, the address-space allocator and the fault
 * injection above.
 */
#include <cuda.h>
#undef cuGetProcAddress

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FAKE_MAX_DEVICES 8
#define FAKE_ALIGN 512u
#define FAKE_DRIVER_VERSION 13000

/* ---- address-space allocator: free ranges sorted by address, first fit, coalescing ---- */

typedef struct range {
    uint64_t addr, size;
    struct range *next;
} range;

typedef struct used_range {
    uint64_t addr, size;
    void *owner; /* the stream-ordered pool it came from, if any */
    struct used_range *next;
} used_range;

#define USED_BUCKETS 4096

typedef struct fake_device {
    uint64_t base, capacity, va_base, va_size, va_next;
    uint64_t used; /* bytes handed out (linear + async + VMM physical) */
    uint64_t context; /* bytes cuMemGetInfo counts as used beyond them (FAKECUDA_CONTEXT: a context's own) */
    range *free_list;
    used_range *used_map[USED_BUCKETS];
    uint64_t pool_used, pool_reserved, pool_high; /* default stream-ordered pool */
} fake_device;

typedef struct fake_ctx {
    int device;
    int refs;
    int destroyed; /* a handle another thread may still hold: the real driver answers it with an error */
    struct fake_ctx *next_dead;
} fake_ctx;

static fake_ctx *g_dead; /* destroyed contexts, kept (and reachable) for the handles still around */

typedef struct fake_stream {
    fake_ctx *ctx;
} fake_stream;

typedef struct fake_handle {
    int device;
    uint64_t size;
} fake_handle;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_ndev = -1;

/* fork() from a thread while another allocates: the child gets the allocator whole, never a
 * lock held by a thread it does not have (a real driver refuses a forked child; the recorder's
 * fork tests need one that works) */
static void fork_prepare(void) { pthread_mutex_lock(&g_lock); }
static void fork_release(void) { pthread_mutex_unlock(&g_lock); }
__attribute__((constructor)) static void fork_safe(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }
static fake_device g_dev[FAKE_MAX_DEVICES];
static fake_ctx g_primary[FAKE_MAX_DEVICES];
static __thread fake_ctx *t_ctx_stack[16];
static __thread int t_ctx_depth;

static uint64_t parse_size(const char *s, uint64_t dflt)
{
    if (!s || !*s) return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (toupper((unsigned char)*end)) {
    case 'K': v <<= 10; break;
    case 'M': v <<= 20; break;
    case 'G': v <<= 30; break;
    case 'T': v <<= 40; break;
    default: break;
    }
    return v ? v : dflt;
}

static void set_default_pool_device(int i);
static CUresult ensure_init_locked(void)
{
    if (g_ndev >= 0) return CUDA_SUCCESS;
    const char *nd = getenv("FAKECUDA_DEVICES");
    int n = nd ? atoi(nd) : 1;
    if (n < 0) n = 0;
    if (n > FAKE_MAX_DEVICES) n = FAKE_MAX_DEVICES;
    uint64_t cap = parse_size(getenv("FAKECUDA_CAPACITY"), 16ull << 30);
    cap = (cap + FAKE_ALIGN - 1) & ~(uint64_t)(FAKE_ALIGN - 1);
    uint64_t context = parse_size(getenv("FAKECUDA_CONTEXT"), 0);
    for (int i = 0; i < n; i++) {
        fake_device *d = &g_dev[i];
        memset(d, 0, sizeof *d);
        /* One mapping for the linear allocator and a VA window 4x larger for VMM. */
        uint64_t va = cap * 4;
        void *p = mmap(NULL, cap + va, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
        d->base = (uint64_t)(uintptr_t)p;
        d->capacity = cap;
        d->context = context < cap ? context : 0;
        d->va_base = d->base + cap;
        d->va_size = va;
        d->va_next = d->va_base;
        range *r = malloc(sizeof *r);
        if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
        r->addr = d->base;
        r->size = cap;
        r->next = NULL;
        d->free_list = r;
        g_primary[i].device = i;
        set_default_pool_device(i);
    }
    g_ndev = n;
    return CUDA_SUCCESS;
}

static unsigned used_bucket(uint64_t addr) { return (unsigned)((addr >> 9) * 0x9E3779B1u) % USED_BUCKETS; }

static int dev_of_addr(uint64_t a)
{
    for (int i = 0; i < g_ndev; i++)
        if (a >= g_dev[i].base && a < g_dev[i].va_base + g_dev[i].va_size) return i;
    return -1;
}

static CUresult range_alloc_locked(int dev, uint64_t size, uint64_t *out)
{
    fake_device *d = &g_dev[dev];
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    size = (size + FAKE_ALIGN - 1) & ~(uint64_t)(FAKE_ALIGN - 1);
    range **pp = &d->free_list;
    for (range *r = *pp; r; pp = &r->next, r = r->next) {
        if (r->size < size) continue;
        uint64_t a = r->addr;
        r->addr += size;
        r->size -= size;
        if (r->size == 0) {
            *pp = r->next;
            free(r);
        }
        used_range *u = malloc(sizeof *u);
        if (!u) return CUDA_ERROR_OUT_OF_MEMORY;
        u->addr = a;
        u->size = size;
        u->owner = NULL;
        unsigned b = used_bucket(a);
        u->next = d->used_map[b];
        d->used_map[b] = u;
        d->used += size;
        *out = a;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static used_range *used_find_locked(int dev, uint64_t addr)
{
    used_range *u = g_dev[dev].used_map[used_bucket(addr)];
    while (u && u->addr != addr) u = u->next;
    return u;
}

/* Returns the freed size, or 0 if addr is not the start of a live range on dev. */
static uint64_t range_free_locked(int dev, uint64_t addr)
{
    fake_device *d = &g_dev[dev];
    unsigned b = used_bucket(addr);
    used_range **up = &d->used_map[b], *u;
    for (u = *up; u && u->addr != addr; up = &u->next, u = u->next) {}
    if (!u) return 0;
    *up = u->next;
    uint64_t size = u->size;
    free(u);
    d->used -= size;
    /* Give large ranges' pages back so long tests stay small. */
    if (size >= (256u << 10)) madvise((void *)(uintptr_t)addr, size, MADV_DONTNEED);
    range **pp = &d->free_list, *prev = NULL;
    while (*pp && (*pp)->addr < addr) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    range *next = *pp;
    if (prev && prev->addr + prev->size == addr) {
        prev->size += size;
        if (next && prev->addr + prev->size == next->addr) {
            prev->size += next->size;
            prev->next = next->next;
            free(next);
        }
        return size;
    }
    if (next && addr + size == next->addr) {
        next->addr = addr;
        next->size += size;
        return size;
    }
    range *r = malloc(sizeof *r);
    if (!r) return size; /* leaks the range, never corrupts */
    r->addr = addr;
    r->size = size;
    r->next = next;
    *pp = r;
    return size;
}

static fake_ctx *current_ctx(void) { return t_ctx_depth ? t_ctx_stack[t_ctx_depth - 1] : NULL; }

static CUresult ctx_device(int *dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    fake_ctx *c = current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *dev = c->device;
    return CUDA_SUCCESS;
}

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

/* ---- fault injection ---- */

#define MAX_FAULTS 32
static struct fault {
    char name[48];
    long nth; /* 0 = every call */
    long calls;
    int code;
} g_faults[MAX_FAULTS];
static int g_nfaults = -1; /* -1: FAKECUDA_FAIL not read yet */
static int g_armed = -1;    /* read without the lock: 0 when no fault can fire (the common case) */
static pthread_mutex_t g_fault_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_fault_locked(const char *name, size_t len, long nth, int code)
{
    if (g_nfaults >= MAX_FAULTS || len >= sizeof g_faults[0].name) return;
    __atomic_store_n(&g_armed, 1, __ATOMIC_RELEASE);
    struct fault *f = &g_faults[g_nfaults++];
    memcpy(f->name, name, len);
    f->name[len] = 0;
    f->nth = nth;
    f->calls = 0;
    f->code = code;
}

static void read_faults_locked(void)
{
    g_nfaults = 0;
    __atomic_store_n(&g_armed, 0, __ATOMIC_RELEASE);
    const char *e = getenv("FAKECUDA_FAIL");
    for (const char *p = e; p && *p;) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *at = memchr(p, '@', (size_t)(end - p));
        const char *eq = memchr(p, '=', (size_t)(end - p));
        size_t nl = (size_t)((at ? at : eq ? eq : end) - p);
        long nth = at && at[1] != '*' ? strtol(at + 1, NULL, 10) : 0;
        int code = eq ? atoi(eq + 1) : CUDA_ERROR_INVALID_VALUE;
        add_fault_locked(p, nl, nth, code);
        p = *end ? end + 1 : end;
    }
}

/* Arm a fault: the nth next call of name (0 = every call) returns code. */
__attribute__((visibility("default"))) void fakecuda_inject(const char *name, long nth, int code)
{
    pthread_mutex_lock(&g_fault_lock);
    if (g_nfaults < 0) read_faults_locked();
    add_fault_locked(name, strlen(name), nth, code);
    pthread_mutex_unlock(&g_fault_lock);
}

__attribute__((visibility("default"))) void fakecuda_clear_faults(void)
{
    pthread_mutex_lock(&g_fault_lock);
    g_nfaults = 0;
    __atomic_store_n(&g_armed, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_fault_lock);
}

/* The code this call of name must fail with, or CUDA_SUCCESS. */
static CUresult injected(const char *name)
{
    if (!__atomic_load_n(&g_armed, __ATOMIC_ACQUIRE)) return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_fault_lock);
    if (g_nfaults < 0) read_faults_locked();
    for (int i = 0; i < g_nfaults && r == CUDA_SUCCESS; i++) {
        struct fault *f = &g_faults[i];
        if (strcmp(f->name, name)) continue;
        f->calls++;
        if (!f->nth || f->calls == f->nth) r = (CUresult)f->code;
    }
    pthread_mutex_unlock(&g_fault_lock);
    return r;
}

#define FAULT(name)                                                                                              \
    do {                                                                                                         \
        CUresult f_ = injected(name);                                                                            \
        if (f_ != CUDA_SUCCESS) return f_;                                                                       \
    } while (0)

static void (*g_on_unmap)(CUdeviceptr, size_t);

__attribute__((visibility("default"))) void fakecuda_on_unmap(void (*fn)(CUdeviceptr, size_t)) { g_on_unmap = fn; }

/* ---- init, devices, contexts, streams ---- */

CUresult cuInit(unsigned int flags)
{
    (void)flags;
    pthread_mutex_lock(&g_lock);
    CUresult r = ensure_init_locked();
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult cuDriverGetVersion(int *v)
{
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = FAKE_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = g_ndev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d || ordinal < 0 || ordinal >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!name || len <= 0 || dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_VALUE;
    strncpy(name, "cumemhist fake device", (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!bytes || dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_VALUE;
    *bytes = g_dev[dev].capacity;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!pi || dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 1; break;
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx || dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    __atomic_add_fetch(&g_primary[dev].refs, 1, __ATOMIC_RELAXED);
    *pctx = (CUcontext)&g_primary[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    __atomic_sub_fetch(&g_primary[dev].refs, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx || dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    fake_ctx *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    c->device = dev;
    c->refs = 1;
    if (t_ctx_depth < 16) t_ctx_stack[t_ctx_depth++] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    return ctx_create(pctx, dev);
}

CUresult cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    (void)params;
    (void)flags;
    return ctx_create(pctx, dev);
}

CUresult cuCtxDestroy(CUcontext ctx)
{
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < t_ctx_depth; i++)
        if (t_ctx_stack[i] == (fake_ctx *)ctx) {
            memmove(&t_ctx_stack[i], &t_ctx_stack[i + 1], sizeof(void *) * (size_t)(t_ctx_depth - i - 1));
            t_ctx_depth--;
            break;
        }
    fake_ctx *c = (fake_ctx *)ctx;
    /* kept, marked: a handle still held elsewhere (another thread's, a tool's) gets an error, as
     * from the real driver, instead of freed memory */
    if (c < g_primary || c >= g_primary + FAKE_MAX_DEVICES) {
        pthread_mutex_lock(&g_lock);
        c->destroyed = 1;
        c->next_dead = g_dead;
        g_dead = c;
        pthread_mutex_unlock(&g_lock);
    }
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (t_ctx_depth == 0) {
        if (ctx) t_ctx_stack[t_ctx_depth++] = (fake_ctx *)ctx;
    } else if (ctx) {
        t_ctx_stack[t_ctx_depth - 1] = (fake_ctx *)ctx;
    } else {
        t_ctx_depth--;
    }
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)current_ctx();
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_ctx_depth >= 16) return CUDA_ERROR_INVALID_VALUE;
    t_ctx_stack[t_ctx_depth++] = (fake_ctx *)ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    if (!t_ctx_depth) return CUDA_ERROR_INVALID_CONTEXT;
    fake_ctx *c = t_ctx_stack[--t_ctx_depth];
    if (pctx) *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    int d;
    CUresult r = ctx_device(&d);
    if (r == CUDA_SUCCESS) *dev = d;
    return r;
}

CUresult cuCtxSynchronize(void) { return current_ctx() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
    (void)flags;
    if (!ps) return CUDA_ERROR_INVALID_VALUE;
    fake_ctx *c = current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->ctx = c;
    *ps = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s)
{
    free(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult e, const char **p)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *p = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *p = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *p = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *p = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *p = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_DEVICE: *p = "CUDA_ERROR_INVALID_DEVICE"; break;
    default: *p = "CUDA_ERROR_UNKNOWN"; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult e, const char **p) { return cuGetErrorName(e, p); }

/* ---- memory info, copies ---- */

CUresult cuMemGetInfo(size_t *free_b, size_t *total_b)
{
    FAULT("cuMemGetInfo");
    int dev;
    CUresult r = ctx_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&g_lock);
    if (free_b) *free_b = g_dev[dev].capacity - g_dev[dev].used - g_dev[dev].context;
    if (total_b) *total_b = g_dev[dev].capacity;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
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
    return alloc_on_current(bytesize, dptr);
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

/* ---- stream-ordered allocation: one default pool per device ---- */

typedef struct fake_pool {
    int device;
    uint64_t used, reserved, high, threshold;
} fake_pool;

static fake_pool g_default_pool[FAKE_MAX_DEVICES];

static void set_default_pool_device(int i) { g_default_pool[i].device = i; }

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

/* ---- virtual memory management ---- */

#define VMM_GRANULARITY (2ull << 20)

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags o)
{
    (void)prop;
    (void)o;
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    *g = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    FAULT("cuMemCreate");
    (void)flags;
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!h || !prop || size == 0 || size % VMM_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 || prop->location.id >= g_ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    int dev = prop->location.id;
    pthread_mutex_lock(&g_lock);
    fake_device *d = &g_dev[dev];
    /* Physical memory is accounted against the linear range without handing out addresses. */
    CUresult r = CUDA_SUCCESS;
    if (d->used + size > d->capacity) r = CUDA_ERROR_OUT_OF_MEMORY;
    else d->used += size;
    pthread_mutex_unlock(&g_lock);
    if (r != CUDA_SUCCESS) return r;
    fake_handle *fh = malloc(sizeof *fh);
    if (!fh) return CUDA_ERROR_OUT_OF_MEMORY;
    fh->device = dev;
    fh->size = size;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)fh;
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    FAULT("cuMemRelease");
    fake_handle *fh = (fake_handle *)(uintptr_t)h;
    if (!fh) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    g_dev[fh->device].used -= fh->size;
    pthread_mutex_unlock(&g_lock);
    free(fh);
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags)
{
    FAULT("cuMemAddressReserve");
    (void)addr;
    (void)flags;
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    int dev = 0;
    if (ctx_device(&dev) != CUDA_SUCCESS) dev = 0;
    if (align < VMM_GRANULARITY) align = VMM_GRANULARITY;
    pthread_mutex_lock(&g_lock);
    fake_device *d = &g_dev[dev];
    uint64_t a = (d->va_next + align - 1) & ~((uint64_t)align - 1);
    CUresult r = CUDA_SUCCESS;
    if (a + size > d->va_base + d->va_size) r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        d->va_next = a + size;
        *ptr = (CUdeviceptr)a;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    FAULT("cuMemAddressFree");
    (void)ptr;
    (void)size;
    return CUDA_SUCCESS; /* the VA window is only ever bumped */
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags)
{
    FAULT("cuMemMap");
    (void)offset;
    (void)flags;
    fake_handle *fh = (fake_handle *)(uintptr_t)h;
    if (!fh || !ptr || size == 0 || size > fh->size) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FAULT("cuMemUnmap");
    if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    madvise((void *)(uintptr_t)ptr, size, MADV_DONTNEED);
    if (g_on_unmap) g_on_unmap(ptr, size);
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    (void)ptr;
    (void)size;
    (void)desc;
    (void)count;
    return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress ---- */

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

typedef struct proc_entry {
    const char *base;
    int version; /* the cudaVersion this variant appeared in */
    int ptsz;    /* 1: the per-thread-default-stream variant */
    void *fn;
} proc_entry;

#define P(b, v, f) {b, v, 0, (void *)(f)}
#define PT(b, v, f) {b, v, 1, (void *)(f)}

/* Newest variant of each base name first. */
static const proc_entry g_procs[] = {
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease),
    P("cuCtxCreate", 12050, cuCtxCreate),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxDestroy", 4000, cuCtxDestroy),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 4000, cuStreamDestroy),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuMemGetInfo", 3020, cuMemGetInfo),
    P("cuMemcpyHtoD", 3020, cuMemcpyHtoD),
    P("cuMemcpyDtoH", 3020, cuMemcpyDtoH),
    P("cuMemsetD8", 3020, cuMemsetD8),
    P("cuMemAlloc", 3020, cuMemAlloc),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemFree", 3020, cuMemFree),
    P("cuMemAllocHost", 3020, cuMemAllocHost),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    P("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    P("cuMemFreeAsync", 11020, cuMemFreeAsync),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    P("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    P("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (cudaVersion > FAKE_DRIVER_VERSION) return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                    !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    int found_name = 0;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
        const proc_entry *e = &g_procs[i];
        if (strcmp(e->base, symbol) != 0) continue;
        found_name = 1;
        if (e->version > cudaVersion) continue;
        if (e->ptsz && !want_ptsz) continue;
        *pfn = e->fn;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (status) *status = found_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return found_name ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
