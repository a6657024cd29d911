/*
 * fakecuda.h - what the fake driver's files share (private to tests/fakecuda/): its constants,
 * the device table and its lock, the address-space allocator (fakecuda.c), the calling thread's
 * current context (context.c), fault injection (faults.c) and the default stream-ordered pools
 * (pools.c).
 *
 * Everything declared here is hidden: the library's exported names stay exactly the driver's
 * entry points and the fakecuda_* test hooks.  g_lock guards the device table, its allocator and
 * the pools; a *_locked function is called with it held.
 */
#ifndef CMH_FAKECUDA_H
#define CMH_FAKECUDA_H

#include <cuda.h>
#undef cuGetProcAddress

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_MAX_DEVICES 8
#define FAKE_ALIGN 512u
#define FAKE_DRIVER_VERSION 13000

/* ---- the device table: one address-space allocator per device (fakecuda.c) ---- */

typedef struct range {
    uint64_t addr, size;
    struct range *next;
} range;

typedef struct used_range {
    uint64_t addr, size;
    void *owner; /* the stream-ordered pool it came from, if any */
    void *ctx;   /* the context current when it was made (NULL: none); its destroy frees it */
    int offdev;  /* managed memory cuMemGetInfo does not count (FAKECUDA_MANAGED_OFFDEVICE) */
    struct used_range *next;
} used_range;

#define USED_BUCKETS 4096

typedef struct fake_device {
    uint64_t base, capacity, va_base, va_size, va_next;
    uint64_t used; /* bytes handed out (linear + async + VMM physical) */
    uint64_t pool_cache; /* bytes stream-ordered pools keep reserved beyond what they hand out: the
                            driver's backing memory, used as cuMemGetInfo counts it (pools.c) */
    uint64_t context; /* bytes cuMemGetInfo counts as used beyond them (FAKECUDA_CONTEXT: a context's own) */
    range *free_list;
    used_range *used_map[USED_BUCKETS];
    int physical; /* which of the machine's FAKECUDA_DEVICES this ordinal is (CUDA_VISIBLE_DEVICES) */
} fake_device;

/* What cuMemGetInfo counts as used on d (the lock held): what is handed out, its context's own,
 * and what pools keep. */
static inline uint64_t taken_locked(const fake_device *d) { return d->used + d->context + d->pool_cache; }

/* Whether size more bytes fit on d beside what is taken (the lock held): a real device has no
 * room for allocations in the memory its context takes or a pool keeps, and cuMemGetInfo's free
 * (capacity - taken) must never run below zero. */
static inline int room_locked(const fake_device *d, uint64_t size)
{
    uint64_t taken = taken_locked(d);
    return taken <= d->capacity && size <= d->capacity - taken;
}

typedef struct fake_ctx {
    int device;
    int refs;
    int destroyed; /* a handle another thread may still hold: the real driver answers it with an error */
    struct fake_ctx *next_dead;
} fake_ctx;

typedef struct fake_stream {
    fake_ctx *ctx;
} fake_stream;

typedef struct fake_handle {
    int device;
    uint64_t size;
    struct fake_handle *next; /* released: the next one to be made again (vmm.c) */
    uint32_t maps;            /* mapped ranges of its memory now (vmm.c) */
    int released;             /* its memory's record once the handle was released while mapped */
} fake_handle;

/* A stream-ordered pool.  reserved is its backing memory: used (what it hands out) plus what it
 * keeps, which is its share of its device's pool_cache.  It keeps what is freed until a trim, or
 * until a synchronize finds more than its release threshold reserved (pools.c). */
typedef struct fake_pool {
    int device;
    uint64_t used, reserved, high, threshold;
    struct fake_pool *next; /* the created pools (g_pools), for the synchronizes' release */
} fake_pool;

#pragma GCC visibility push(hidden)

extern pthread_mutex_t g_lock;
extern int g_ndev; /* -1 until cuInit */
extern fake_device g_dev[FAKE_MAX_DEVICES];
extern fake_ctx g_primary[FAKE_MAX_DEVICES];
extern fake_pool g_default_pool[FAKE_MAX_DEVICES]; /* pools.c */
/* A stream, event or context synchronize: every pool holding more than its release threshold
 * gives the rest back to its device (pools.c). */
void pools_synchronized(void);

CUresult ensure_init_locked(void);
void fake_uuid(int phys, unsigned char out[16]);
CUresult range_alloc_locked(int dev, uint64_t size, uint64_t *out);
used_range *used_find_locked(int dev, uint64_t addr);
/* Returns the freed size, or 0 if addr is not the start of a live range on dev. */
uint64_t range_free_locked(int dev, uint64_t addr);
/* cuCtxDestroy, cuDevicePrimaryCtxReset: every range of dev that context ctx made (no pool's)
 * given back, as the driver frees a context's memory with it; returns the bytes. */
uint64_t ranges_free_ctx_locked(int dev, const void *ctx);

/* ---- the calling thread's current context (its stack: context.c) ---- */

/* local-dynamic, as a file's own static thread-locals get: one look-up of this library's block
 * serves them and the thread cache's (memory.c), not one call per variable */
#define FAKE_TLS __thread __attribute__((tls_model("local-dynamic")))
extern FAKE_TLS fake_ctx *t_ctx_stack[16];
extern FAKE_TLS int t_ctx_depth;

/* ---- fault injection (faults.c) ---- */

extern int g_armed; /* read without the lock: 0 when no fault can fire (the common case) */
/* The code this call of name must fail with, or CUDA_SUCCESS. */
CUresult injected(const char *name);
extern void (*g_on_unmap)(CUdeviceptr, size_t);
extern void (*g_on_alloc)(CUdeviceptr, size_t);

#pragma GCC visibility pop

/* What every allocation and free passes through, inline as when the driver was one file: a
 * call into another file here cost a fifth more per cuMemAlloc+cuMemFree pair (bench_hot's bare
 * figure, which the recorder's cost is read against). */

static inline int dev_of_addr(uint64_t a)
{
    for (int i = 0; i < g_ndev; i++)
        if (a >= g_dev[i].base && a < g_dev[i].va_base + g_dev[i].va_size) return i;
    return -1;
}

static inline fake_ctx *current_ctx(void) { return t_ctx_depth ? t_ctx_stack[t_ctx_depth - 1] : NULL; }

static inline CUresult ctx_device(int *dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    fake_ctx *c = current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *dev = c->device;
    return CUDA_SUCCESS;
}

#define FAULT(name)                                                                                              \
    do {                                                                                                         \
        if (__atomic_load_n(&g_armed, __ATOMIC_ACQUIRE)) {                                                       \
            CUresult f_ = injected(name);                                                                        \
            if (f_ != CUDA_SUCCESS) return f_;                                                                   \
        }                                                                                                        \
    } while (0)

/* Entry points the table of cuGetProcAddress (procaddr.c) names that cuda.h does not declare
 * under these names. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

#endif
