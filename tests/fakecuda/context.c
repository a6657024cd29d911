/*
 * context.c - the fake driver's init, devices, contexts, streams and error names (fakecuda.h):
 * each thread's stack of current contexts, primary contexts, created and destroyed ones (a
 * destroyed context stays readable, marked, for the handles still held), and the streams that
 * remember their context.
 */
#include "fakecuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fake_ctx *g_dead; /* destroyed contexts, kept (and reachable) for the handles still around */

FAKE_TLS fake_ctx *t_ctx_stack[16];
FAKE_TLS int t_ctx_depth;

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

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    fake_uuid(g_dev[dev].physical, (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (!bus || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x18 + 0x10 * g_dev[dev].physical);
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

/* The primary context's memory is freed (the context itself stays, for its holders to use
 * again: the fake keeps no other state in it). */
CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    if (g_ndev < 0) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= g_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_lock);
    (void)ranges_free_ctx_locked(dev, &g_primary[dev]);
    pthread_mutex_unlock(&g_lock);
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
    /* the memory the context made goes with it, as the driver frees it */
    pthread_mutex_lock(&g_lock);
    if (!c->destroyed && c->device >= 0 && c->device < g_ndev) (void)ranges_free_ctx_locked(c->device, c);
    pthread_mutex_unlock(&g_lock);
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

CUresult cuCtxSynchronize(void)
{
    if (!current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    pools_synchronized();
    return CUDA_SUCCESS;
}

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

/* A stream's context and device, as the driver answers them (cuStreamGetCtx; cuStreamGetDevice,
 * CUDA 12.8): the NULL, legacy and per-thread streams are the current context's. */
CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    fake_ctx *c = s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD ? ((fake_stream *)s)->ctx : current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice(CUstream s, CUdevice *dev)
{
    CUcontext c;
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuStreamGetCtx(s, &c);
    if (r == CUDA_SUCCESS) *dev = ((fake_ctx *)c)->device;
    return r;
}

/* Events: a recorded event is reached at once (the fake runs no work); synchronizing on one is a
 * synchronize, where pools give back what they hold beyond their release threshold. */
typedef struct fake_event {
    int recorded;
} fake_event;

CUresult cuEventCreate(CUevent *ev, unsigned int flags)
{
    (void)flags;
    if (!ev) return CUDA_ERROR_INVALID_VALUE;
    if (!current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    fake_event *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    *ev = (CUevent)e;
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent ev, CUstream s)
{
    (void)s;
    if (!ev) return CUDA_ERROR_INVALID_HANDLE;
    ((fake_event *)ev)->recorded = 1;
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent ev)
{
    if (!ev) return CUDA_ERROR_INVALID_HANDLE;
    pools_synchronized();
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent ev)
{
    free(ev);
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
    pools_synchronized();
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
