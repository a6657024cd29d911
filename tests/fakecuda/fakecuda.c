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
 * coalescing hands out 512-byte-aligned ranges; running past the capacity less the context's
 * own bytes returns CUDA_ERROR_OUT_OF_MEMORY, and cuMemGetInfo reports capacity minus what is
 * handed out and the context's bytes.
 *
 * Environment: FAKECUDA_DEVICES (default 1, at most 8), FAKECUDA_CAPACITY (bytes per device,
 * suffixes K/M/G, default 16G), FAKECUDA_CONTEXT (bytes cuMemGetInfo counts as used besides the
 * allocations, as a real context's own memory; default 0), FAKECUDA_FAIL (faults to inject, below),
 * CUDA_VISIBLE_DEVICES (as the real driver reads it: a comma-separated list of the machine's
 * device ordinals or UUIDs ("GPU-..." as cuDeviceGetUuid_v2 gives them, a prefix is enough),
 * up to the first entry that names none; the process's ordinals are the list's order; each device
 * keeps its UUID and PCI bus id), FAKECUDA_HOST_ID (a number that makes this machine's UUIDs its
 * own, default 0: two hosts' devices 0 differ as real GPUs do),
 * FAKECUDA_THREAD_CACHE=1 (for benchmarks: cuMemAlloc/cuMemFree keep each thread's last freed
 * ranges and hand them out again to it without the driver's lock, so that threads allocating at
 * once do not meet in the fake driver and the recorder's own cost stands out; ranges in a cache
 * still count as used in cuMemGetInfo; only for programs whose threads free what they allocated
 * themselves, as bench_hot's do), FAKECUDA_MANAGED_OFFDEVICE=1 (cuMemAllocManaged memory is not
 * counted as used by cuMemGetInfo, as the real driver's managed memory until its pages are on the
 * device; it still takes addresses and room).  cuCtxDestroy and cuDevicePrimaryCtxReset free
 * every linear, pitch and managed range their context made, as the driver frees a context's
 * memory with it.
 *
 * Fault injection, for the recorder's "forward every result unchanged" tests: FAKECUDA_FAIL is a
 * comma-separated list of NAME@N=CODE (the N-th call of entry point NAME, counted from 1,
 * returns CODE; N = '*': every call; =CODE defaults to 1, CUDA_ERROR_INVALID_VALUE), e.g.
 * "cuMemUnmap@2=1,cuMemAlloc@*=2".  NAME is the base name (cuMemAlloc for cuMemAlloc_v2).  A
 * test can also arm faults at run time with fakecuda_inject(), and run code inside an unmap
 * (after the driver's own work, before it returns) with fakecuda_on_unmap(), or inside each
 * linear allocation (the memory taken, the call not returned) with fakecuda_on_alloc().  fakecuda_take(dev,
 * bytes) takes device memory by no hooked entry point (a library's own path, another process):
 * cuMemGetInfo counts it as FAKECUDA_CONTEXT's.
 *
 * Linked with -Wl,-Bsymbolic: the proc-address table must point at our own functions, never at
 * the recorder's same-named exports, exactly as the real driver behaves.
 *
 * The driver is split by idea, all sharing fakecuda.h: this file, the device table and its
 * address-space allocator; faults.c, fault injection; context.c, init, devices, contexts and
 * streams; memory.c, linear/pitch/managed/host memory, copies and the thread cache; pools.c,
 * stream-ordered allocation; vmm.c, virtual memory management; procaddr.c, cuGetProcAddress.
 */
#include "fakecuda.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
int g_ndev = -1;

/* fork() from a thread while another allocates: the child gets the allocator whole, never a
 * lock held by a thread it does not have (a real driver refuses a forked child; the recorder's
 * fork tests need one that works) */
static void fork_prepare(void) { pthread_mutex_lock(&g_lock); }
static void fork_release(void) { pthread_mutex_unlock(&g_lock); }
__attribute__((constructor)) static void fork_safe(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }
fake_device g_dev[FAKE_MAX_DEVICES];
fake_ctx g_primary[FAKE_MAX_DEVICES];

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

/* The machine's device phys's UUID (FAKECUDA_HOST_ID makes one machine's differ from another's). */
void fake_uuid(int phys, unsigned char out[16])
{
    const char *h = getenv("FAKECUDA_HOST_ID");
    unsigned long long host = h ? strtoull(h, NULL, 0) : 0;
    static const unsigned char base[16] = {0xfa, 0x6e, 0xc0, 0xda, 0x1d, 0x3a, 0x4b, 0x70, 0x80, 0, 0, 0, 0, 0, 0, 0};
    memcpy(out, base, 16);
    for (int i = 0; i < 6; i++) out[9 + i] = (unsigned char)(host >> (8 * i));
    out[15] = (unsigned char)phys;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi and CUDA_VISIBLE_DEVICES write one */
static void uuid_text(const unsigned char u[16], char out[41])
{
    char *o = out + sprintf(out, "GPU-");
    for (int i = 0; i < 16; i++) o += sprintf(o, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
}

/* CUDA_VISIBLE_DEVICES: the machine's devices this process sees, in its order, as the real
 * driver takes them (an entry that names no device ends the list; one named twice ends it too) */
static int visible_devices(int machine, int *phys)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) {
        for (int i = 0; i < machine; i++) phys[i] = i;
        return machine;
    }
    int n = 0;
    while (*v && n < machine) {
        while (*v == ' ') v++;
        size_t len = strcspn(v, ",");
        int found = -1;
        if (len >= 4 && !strncmp(v, "GPU-", 4)) {
            for (int i = 0; i < machine && found < 0; i++) {
                unsigned char u[16];
                char t[41];
                fake_uuid(i, u);
                uuid_text(u, t);
                if (len <= strlen(t) && !strncmp(t, v, len)) found = i;
            }
        } else if (len > 0 && isdigit((unsigned char)*v)) {
            char *end;
            long i = strtol(v, &end, 10);
            if ((size_t)(end - v) == len && i >= 0 && i < machine) found = (int)i;
        }
        for (int j = 0; j < n; j++)
            if (phys[j] == found) found = -1;
        if (found < 0) break;
        phys[n++] = found;
        v += len;
        if (*v == ',') v++;
    }
    return n;
}

CUresult ensure_init_locked(void)
{
    if (g_ndev >= 0) return CUDA_SUCCESS;
    const char *nd = getenv("FAKECUDA_DEVICES");
    int machine = nd ? atoi(nd) : 1;
    if (machine < 0) machine = 0;
    if (machine > FAKE_MAX_DEVICES) machine = FAKE_MAX_DEVICES;
    int phys[FAKE_MAX_DEVICES];
    int n = visible_devices(machine, phys);
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
        d->physical = phys[i];
        g_primary[i].device = i;
        g_default_pool[i].device = i; /* a default pool knows its device from start-up */
    }
    g_ndev = n;
    return CUDA_SUCCESS;
}

static unsigned used_bucket(uint64_t addr) { return (unsigned)((addr >> 9) * 0x9E3779B1u) % USED_BUCKETS; }

CUresult range_alloc_locked(int dev, uint64_t size, uint64_t *out)
{
    fake_device *d = &g_dev[dev];
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    size = (size + FAKE_ALIGN - 1) & ~(uint64_t)(FAKE_ALIGN - 1);
    if (!room_locked(d, size)) return CUDA_ERROR_OUT_OF_MEMORY; /* (the free list spans the capacity, context and VMM included) */
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
        u->ctx = current_ctx();
        u->offdev = 0;
        unsigned b = used_bucket(a);
        u->next = d->used_map[b];
        d->used_map[b] = u;
        d->used += size;
        *out = a;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

used_range *used_find_locked(int dev, uint64_t addr)
{
    used_range *u = g_dev[dev].used_map[used_bucket(addr)];
    while (u && u->addr != addr) u = u->next;
    return u;
}

uint64_t ranges_free_ctx_locked(int dev, const void *ctx)
{
    uint64_t bytes = 0;
    for (unsigned b = 0; b < USED_BUCKETS; b++)
        for (used_range *u = g_dev[dev].used_map[b], *next; u; u = next) {
            next = u->next;
            if (u->ctx == ctx && !u->owner) bytes += range_free_locked(dev, u->addr);
        }
    return bytes;
}

uint64_t range_free_locked(int dev, uint64_t addr)
{
    fake_device *d = &g_dev[dev];
    unsigned b = used_bucket(addr);
    used_range **up = &d->used_map[b], *u;
    for (u = *up; u && u->addr != addr; up = &u->next, u = u->next) {}
    if (!u) return 0;
    *up = u->next;
    uint64_t size = u->size;
    int offdev = u->offdev;
    free(u);
    if (!offdev) d->used -= size;
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
