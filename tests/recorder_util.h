/*
 * recorder_util.h - what the suites that run the real recorder over the fake driver share:
 * options, a dump read back, lookups in the snapshot, the properties of a VMM allocation and of a
 * pool, and the set-up of one or two devices.  One test binary includes it once.
 */
#ifndef CMH_RECORDER_UTIL_H
#define CMH_RECORDER_UTIL_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/recorder.h"
#include "cumemhist/snapshot.h"
#include "testutil.h"

static char g_dir[] = "/tmp/cmh-test-XXXXXX";
static int g_n;

static inline void set_opts(cmh_enabled en, cmh_context ctx, uint64_t max_entries)
{
    cmh_options o = {en, ctx, max_entries, 32, 1};
    CU_ASSERT_EQUAL_FATAL(cmh_record_memory_history(&o), CMH_OK);
}

static inline void dump_load(cmh_snapshot *s)
{
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/snap%d.cmh", g_dir, g_n++);
    CU_ASSERT_EQUAL_FATAL(cmh_dump_snapshot(path), CMH_OK);
    int rc = cmh_snapshot_load(path, s, err, sizeof err);
    if (rc != CMH_OK) fprintf(stderr, "load: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
}

static inline const cmh_trace *trace_of(const cmh_snapshot *s, int dev)
{
    for (uint32_t i = 0; i < s->ntraces; i++)
        if (s->traces[i].device == dev) return &s->traces[i];
    return NULL;
}

/* the n-th entry of device dev with this action and address, or NULL */
static inline const cmh_entry *find_entry(const cmh_snapshot *s, int dev, int action, uint64_t addr)
{
    const cmh_trace *t = trace_of(s, dev);
    if (!t) return NULL;
    for (uint32_t i = 0; i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (e->action == action && cmh_entry_addr(s, e) == addr) return e;
    }
    return NULL;
}

static inline const cmh_segment *find_segment(const cmh_snapshot *s, uint64_t addr)
{
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].addr == addr) return &s->segments[i];
    return NULL;
}

static inline int stack_names(const cmh_snapshot *s, uint32_t stack, const char *fn)
{
    const cmh_stack *st = &s->stacks[stack];
    for (uint32_t i = 0; i < st->count; i++)
        if (strcmp(cmh_str(s, s->frames[s->stack_frames[st->first + i]].name), fn) == 0) return 1;
    return 0;
}


/* The binary's set-up: a directory for the dumps, device 0's primary context made current.
 * Returns 0, or 2 when the driver (fake or real) is not usable. */
static inline int recorder_test_init(CUcontext *ctx)
{
    CUdevice dev;
    if (!mkdtemp(g_dir)) return 2;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(*ctx) != CUDA_SUCCESS)
        return 2;
    return 0;
}

/* Device 1's primary context into ctx[1], device 0's (c0, from recorder_test_init) into ctx[0].
 * Returns 0, or 77 (skip) when the driver has fewer than two devices. */
static inline int recorder_test_second_device(CUcontext c0, CUcontext ctx[2])
{
    CUdevice d1;
    int ndev = 0;
    cuDeviceGetCount(&ndev);
    if (ndev < 2 || cuDeviceGet(&d1, 1) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx[1], d1) != CUDA_SUCCESS) return 77;
    ctx[0] = c0;
    return 0;
}

/* A pinned VMM allocation's properties on device dev, as cuMemCreate takes them. */
static inline CUmemAllocationProp vmm_prop(int dev)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

/* A stream-ordered pool's properties on device dev, as cuMemPoolCreate takes them. */
static inline CUmemPoolProps pool_props(int dev)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    return props;
}

static inline void recorder_test_cleanup(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

#endif
