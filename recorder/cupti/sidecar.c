/*
 * sidecar.c - libcumemhist_cupti.so: kernel timing from CUPTI's Activity API.
 *
 * CONCURRENT_KERNEL only (KERNEL serializes kernels).  Buffers are our own (8-byte aligned,
 * 1 MiB each); each completed buffer is walked with cuptiActivityGetNextRecord and its kernel
 * records copied into a table, names interned once.  CUPTI's timestamps are put on the
 * recorder's clock by registering a CLOCK_REALTIME timestamp callback before any kind is
 * enabled; where that is refused, the offset between cuptiGetTimestamp() and CLOCK_REALTIME is
 * measured once and applied.  Dropped records (CUPTI's count, and buffers we could not
 * allocate) are counted and reported, never hidden.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oatab.h"
#include "sidecar.h"

#define EXPORT __attribute__((visibility("default")))
#define BUF_SIZE (1u << 20)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cmh_kernel_rec *g_recs;
static size_t g_n, g_cap;
static uint64_t g_lost; /* buffers we could not give CUPTI, records we could not keep */
static int64_t g_offset; /* added to CUPTI timestamps when the callback could not be registered */
static int g_started;

typedef struct name_slot { /* interned kernel names (oatab.h), keyed by their hash */
    uint64_t hash;
    char *name;
} name_slot;
static cmh_oatab g_names = {NULL, 0, 0, sizeof(name_slot)};

static uint64_t CUPTIAPI realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *intern(const char *s)
{
    if (!s) s = "<unknown>";
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = cmh_oa_hashkey(h);
    uint32_t pos = UINT32_MAX;
    for (name_slot *n; (n = cmh_oa_next(&g_names, h, &pos));)
        if (!strcmp(n->name, s)) return n->name;
    char *copy = strdup(s);
    name_slot *n = copy ? cmh_oa_add(&g_names, h) : NULL;
    if (!n) {
        free(copy);
        return NULL;
    }
    n->name = copy;
    return copy;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, 8, BUF_SIZE) != 0) p = NULL;
    if (!p) __atomic_add_fetch(&g_lost, 1, __ATOMIC_RELAXED); /* CUPTI drops what would have gone here */
    *buffer = p;
    *size = p ? BUF_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&g_lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        if (g_n == g_cap) {
            size_t nc = g_cap ? g_cap * 2 : 4096;
            cmh_kernel_rec *nr = realloc(g_recs, nc * sizeof *nr);
            if (!nr) {
                g_lost++;
                continue;
            }
            g_recs = nr;
            g_cap = nc;
        }
        cmh_kernel_rec *r = &g_recs[g_n++];
        r->name = intern(k->name);
        r->device = (int32_t)k->deviceId;
        r->stream = k->streamId;
        r->start_ns = k->start ? k->start + (uint64_t)g_offset : 0; /* 0: CUPTI lacked device memory */
        r->end_ns = k->end ? k->end + (uint64_t)g_offset : 0;
        r->grid[0] = k->gridX, r->grid[1] = k->gridY, r->grid[2] = k->gridZ;
        r->block[0] = k->blockX, r->block[1] = k->blockY, r->block[2] = k->blockZ;
        r->registers = k->registersPerThread;
        r->shared_bytes = (uint32_t)k->staticSharedMemory + (uint32_t)k->dynamicSharedMemory;
        r->correlation = k->correlationId;
    }
    pthread_mutex_unlock(&g_lock);
    free(buffer);
}

static int failed(CUptiResult r, const char *what, char *why, size_t whylen)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown error";
    snprintf(why, whylen, "%s: %s (%d)", what, s, (int)r);
    return -1;
}

EXPORT int cmh_sidecar_start(int flush_ms, char *why, size_t whylen)
{
    if (g_started) return 0;
    /* the recorder's clock, before any kind is enabled */
    if (cuptiActivityRegisterTimestampCallback(realtime_ns) != CUPTI_SUCCESS) {
        uint64_t c = 0;
        if (cuptiGetTimestamp(&c) == CUPTI_SUCCESS) g_offset = (int64_t)(realtime_ns() - c);
    }
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return failed(r, "cuptiActivityRegisterCallbacks", why, whylen);
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) return failed(r, "cuptiActivityEnable(CONCURRENT_KERNEL)", why, whylen);
    if (flush_ms > 0) cuptiActivityFlushPeriod((uint32_t)flush_ms);
    g_started = 1;
    return 0;
}

EXPORT int cmh_sidecar_collect(void (*fn)(void *, const cmh_kernel_rec *), void *arg, uint64_t *dropped, char *why,
                               size_t whylen)
{
    if (!g_started) {
        snprintf(why, whylen, "not started");
        return -1;
    }
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* after the CUDA teardown at exit this may fail: what arrived stays */
    size_t n = 0;
    uint64_t d = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &n) == CUPTI_SUCCESS) d = n;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++) fn(arg, &g_recs[i]);
    *dropped = d + g_lost;
    pthread_mutex_unlock(&g_lock);
    return 0;
}
