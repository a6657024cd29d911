/*
 * vmm.c - the fake driver's virtual memory management (fakecuda.h): physical handles charged
 * against the device's capacity without addresses, a bump-only VA window beside the linear
 * range, and map/unmap/access calls that check their arguments (an unmap gives its pages back
 * and runs the fakecuda_on_unmap() hook).
 *
 * As the real driver, a handle released while mapped keeps its physical memory until its last
 * range is unmapped (it freed it at cuMemRelease: a recorder that counted such memory wrongly
 * could not be caught).  The handle's value is free again at the release (the driver may hand
 * it out again); the memory left mapped is then a record of its own the ranges point to.
 */
#include "fakecuda.h"

#include <stdlib.h>
#include <sys/mman.h>

#define VMM_GRANULARITY (2ull << 20)

/* Released handles, the latest first: the next cuMemCreate gives the latest one's value again,
 * as the real driver reuses values (whatever malloc does, a sanitizer's quarantine included). */
static fake_handle *g_released;

/* The mapped ranges, under g_lock: each is part of one handle's memory (or of the record left of
 * a handle released while mapped). */
typedef struct fake_map {
    uint64_t ptr, size;
    fake_handle *h;
} fake_map;
static fake_map *g_maps;
static size_t g_nmaps, g_capmaps;

/* One range fewer of h's memory (under g_lock): the last of a released handle's gives it back. */
static void unmapped_locked(fake_handle *h)
{
    if (--h->maps || !h->released) return;
    g_dev[h->device].used -= h->size;
    free(h);
}

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
    if (!room_locked(d, size)) r = CUDA_ERROR_OUT_OF_MEMORY;
    else d->used += size;
    pthread_mutex_unlock(&g_lock);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&g_lock);
    fake_handle *fh = g_released;
    if (fh) g_released = fh->next;
    pthread_mutex_unlock(&g_lock);
    if (!fh) fh = malloc(sizeof *fh);
    if (!fh) return CUDA_ERROR_OUT_OF_MEMORY;
    fh->device = dev;
    fh->size = size;
    fh->maps = 0;
    fh->released = 0;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)fh;
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    FAULT("cuMemRelease");
    fake_handle *fh = (fake_handle *)(uintptr_t)h;
    if (!fh) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    fake_handle *left = fh->maps ? malloc(sizeof *left) : NULL;
    if (fh->maps && !left) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (left) { /* mapped still: its memory stays until the last unmap */
        *left = *fh;
        left->released = 1;
        for (size_t i = 0; i < g_nmaps; i++)
            if (g_maps[i].h == fh) g_maps[i].h = left;
    } else g_dev[fh->device].used -= fh->size;
    fh->maps = 0;
    fh->next = g_released;
    g_released = fh;
    pthread_mutex_unlock(&g_lock);
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
    pthread_mutex_lock(&g_lock);
    if (g_nmaps == g_capmaps) {
        size_t nc = g_capmaps ? 2 * g_capmaps : 64;
        fake_map *nm = realloc(g_maps, nc * sizeof *nm);
        if (!nm) {
            pthread_mutex_unlock(&g_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_maps = nm;
        g_capmaps = nc;
    }
    g_maps[g_nmaps++] = (fake_map){ptr, size, fh};
    fh->maps++;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FAULT("cuMemUnmap");
    if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    /* the ranges it covers go, a range it cuts in part keeps the rest (one or two pieces) */
    pthread_mutex_lock(&g_lock);
    uint64_t lo = ptr, hi = ptr + size;
    if (g_nmaps == g_capmaps) { /* (room for a middle cut's second piece: ranges are disjoint, one at most) */
        fake_map *nm = realloc(g_maps, (g_capmaps + 64) * sizeof *nm);
        if (!nm) {
            pthread_mutex_unlock(&g_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_maps = nm;
        g_capmaps += 64;
    }
    for (size_t i = 0; i < g_nmaps;) {
        fake_map *m = &g_maps[i];
        uint64_t mlo = m->ptr, mhi = m->ptr + m->size;
        if (mhi <= lo || mlo >= hi) {
            i++;
            continue;
        }
        if (mlo < lo && mhi > hi) { /* cut in the middle: two pieces */
            g_maps[g_nmaps++] = (fake_map){hi, mhi - hi, m->h};
            m->h->maps++;
            m->size = lo - mlo;
            i++;
        } else if (mlo < lo) {
            m->size = lo - mlo;
            i++;
        } else if (mhi > hi) {
            m->ptr = hi;
            m->size = mhi - hi;
            i++;
        } else {
            fake_handle *h = m->h;
            *m = g_maps[--g_nmaps];
            unmapped_locked(h);
        }
    }
    pthread_mutex_unlock(&g_lock);
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
