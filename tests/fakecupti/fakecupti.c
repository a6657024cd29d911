/*
 * fakecupti.c - a libcupti.so.13 of our own for machines without a GPU (where the real
 * cuptiActivityEnable fails).  It implements the entry points the sidecar calls and delivers
 * synthetic CUpti_ActivityKernel10 records (the real struct from the CUDA 13 headers) through
 * the real buffer-request / buffer-completed protocol, walked by its own
 * cuptiActivityGetNextRecord.
 *
 * Environment:
 *   FAKECUPTI_KERNELS   "name:duration_ns:stream:device;..." delivered at the first forced flush,
 *                       back to back from 1 us after cuptiActivityEnable, on the registered clock
 *   FAKECUPTI_DROPPED   what cuptiActivityGetNumDroppedRecords reports
 *   FAKECUPTI_REFUSE    1: cuptiActivityEnable answers MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as when
 *                       Nsight Systems or PyTorch's profiler already holds the subscriber
 *   FAKECUPTI_NO_TSCB   1: refuse the timestamp callback; cuptiGetTimestamp then runs 5 s behind
 *                       CLOCK_REALTIME, so the caller must measure the offset
 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static CUpti_BuffersCallbackRequestFunc g_req;
static CUpti_BuffersCallbackCompleteFunc g_done;
static CUpti_TimestampCallbackFunc g_ts;
static uint64_t g_t0;
static int g_enabled, g_delivered;

static uint64_t realtime(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
    *ts = realtime() - 5000000000ull;
    return CUPTI_SUCCESS;
}

static uint64_t now(void)
{
    if (g_ts) return g_ts();
    uint64_t t;
    cuptiGetTimestamp(&t);
    return t;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn)
{
    const char *no = getenv("FAKECUPTI_NO_TSCB");
    if (no && *no == '1') return CUPTI_ERROR_NOT_SUPPORTED;
    g_ts = fn;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done)
{
    if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
    g_req = req;
    g_done = done;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    const char *refuse = getenv("FAKECUPTI_REFUSE");
    if (refuse && *refuse == '1') return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) return CUPTI_ERROR_NOT_SUPPORTED;
    g_enabled = 1;
    g_t0 = now();
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    (void)kind;
    g_enabled = 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushPeriod(uint32_t ms)
{
    (void)ms;
    return CUPTI_SUCCESS;
}

static char *names_storage;

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    if (!g_enabled || g_delivered || !g_req) return CUPTI_SUCCESS;
    g_delivered = 1;
    const char *spec = getenv("FAKECUPTI_KERNELS");
    if (!spec || !*spec) return CUPTI_SUCCESS;
    names_storage = strdup(spec);
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    g_req(&buf, &size, &maxrec);
    if (!buf) return CUPTI_SUCCESS; /* the caller had no buffer: these records are dropped */
    size_t n = 0;
    uint64_t t = g_t0 + 1000;
    uint32_t corr = 1;
    for (char *save = NULL, *item = strtok_r(names_storage, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if ((n + 1) * sizeof(CUpti_ActivityKernel10) > size) break;
        char *name = item, *d = strchr(item, ':');
        if (!d) continue;
        *d++ = 0;
        char *st = strchr(d, ':');
        if (st) *st++ = 0;
        char *dev = st ? strchr(st, ':') : NULL;
        if (dev) *dev++ = 0;
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(buf + n * sizeof *k);
        memset(k, 0, sizeof *k);
        k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k->name = name;
        k->start = t;
        k->end = t + strtoull(d, NULL, 10);
        k->streamId = st ? (uint32_t)atoi(st) : 7;
        k->deviceId = dev ? (uint32_t)atoi(dev) : 0;
        k->gridX = 128, k->gridY = 1, k->gridZ = 1;
        k->blockX = 256, k->blockY = 1, k->blockZ = 1;
        k->registersPerThread = 32;
        k->staticSharedMemory = 1024;
        k->dynamicSharedMemory = 2048;
        k->correlationId = corr++;
        t = k->end + 500;
        n++;
    }
    g_done(NULL, 0, buf, size, n * sizeof(CUpti_ActivityKernel10));
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
    uint8_t *next = *record ? (uint8_t *)*record + sizeof(CUpti_ActivityKernel10) : buffer;
    if (next + sizeof(CUpti_ActivityKernel10) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx;
    (void)stream;
    const char *d = getenv("FAKECUPTI_DROPPED");
    *dropped = d ? strtoull(d, NULL, 10) : 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **str)
{
    switch (r) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}
