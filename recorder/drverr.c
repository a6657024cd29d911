/*
 * drverr.c - driver calls of the memory API that failed with an error other than out-of-memory.
 *
 * A double free, a free of a pointer the program never got, a free of an address inside an
 * allocation (not its base): the driver refuses them (cuMemFree: CUDA_ERROR_INVALID_VALUE) and
 * the trace, which records only what the driver did, said nothing of them.  Users hunting a
 * crash need to see them.  The hooks call cmh_drverr_note on their failure branch only (an OOM
 * is the trace's own oom entry, never noted here): per (call, result) a count, and for the first
 * CMH_DRV_ERROR_SITES of each the address and size asked, the thread, the time and the stack
 * (under --context as an allocation's: state and above).  The dump writes the table as the
 * .cmh "driver_errors" (docs/FORMAT.md).  Nothing here runs on a call that succeeded, nor while
 * recording is off; a cleared history empties the table (cmh_drverr_clear).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "lock.h"

#define MAX_KINDS 32 /* (call, result) pairs; past them only counted (cmh_count_lost) */

typedef struct site {
    uint64_t addr, size;
    uint32_t thread, stack;
    int64_t ticks;
} site;

typedef struct kind {
    const char *call; /* a string literal of the hook's */
    int32_t result;
    uint64_t count;
    uint32_t nsites;
    site sites[CMH_DRV_ERROR_SITES];
} kind;

static cmh_mutex g_lock = CMH_MUTEX_INITIALIZER;
static kind g_kinds[MAX_KINDS];
static uint32_t g_nkinds;

void cmh_drverr_note(const char *call, int result, uint64_t addr, uint64_t size)
{
    if (!cmh_rec_enabled()) return;
    /* the stack is taken before the lock (a walk is long) and only while a site may still be
     * kept; one taken for a site that another thread filled meanwhile is interned, unused */
    int64_t ticks = cmh_now_ticks();
    uint32_t thread = cmh_hist_thread(), stack = 0;
    int want = 1;
    cmh_lock(&g_lock);
    for (uint32_t i = 0; i < g_nkinds; i++)
        if (g_kinds[i].result == result && !strcmp(g_kinds[i].call, call)) {
            want = g_kinds[i].nsites < CMH_DRV_ERROR_SITES;
            break;
        }
    cmh_unlock(&g_lock);
    if (want && cmh_rec_context() >= CMH_CONTEXT_STATE) stack = cmh_stack_capture();
    cmh_lock(&g_lock);
    kind *k = NULL;
    for (uint32_t i = 0; i < g_nkinds && !k; i++)
        if (g_kinds[i].result == result && !strcmp(g_kinds[i].call, call)) k = &g_kinds[i];
    if (!k && g_nkinds < MAX_KINDS) {
        k = &g_kinds[g_nkinds++];
        *k = (kind){.call = call, .result = result};
    }
    if (k) {
        k->count++;
        if (k->nsites < CMH_DRV_ERROR_SITES) k->sites[k->nsites++] = (site){addr, size, thread, stack, ticks};
    }
    cmh_unlock(&g_lock);
    if (!k) cmh_count_lost(1);
}

int cmh_drverr_export(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg, int64_t now_ticks, int64_t now_ns)
{
    kind v[MAX_KINDS];
    cmh_lock(&g_lock);
    uint32_t n = g_nkinds;
    memcpy(v, g_kinds, n * sizeof *v);
    cmh_unlock(&g_lock);
    int rc = CMH_OK;
    for (uint32_t i = 0; i < n && rc == CMH_OK; i++) {
        cmh_drv_error e = {.result = v[i].result, .count = v[i].count, .nsites = v[i].nsites};
        snprintf(e.call, sizeof e.call, "%s", v[i].call);
        for (uint32_t j = 0; j < v[i].nsites; j++) {
            const site *w = &v[i].sites[j];
            e.sites[j] = (cmh_drv_error_site){w->addr, w->size, w->thread, w->stack ? stack_map(w->stack, arg) : 0,
                                              cmh_ticks_to_ns(w->ticks, now_ticks, now_ns)};
        }
        rc = cmh_snapshot_add_drv_error(s, &e);
    }
    return rc;
}

/* a cleared history (cmh_record_memory_history's clear_history, or enabled off, as PyTorch's
 * record_memory_history clears): the failed calls before it go with the entries, as the trace's
 * oom entries do; the record says those made since */
void cmh_drverr_clear(void)
{
    cmh_lock(&g_lock);
    g_nkinds = 0;
    cmh_unlock(&g_lock);
}

/* a forked child's history begins at the fork: the parent's failures are in its record */
void cmh_drverr_reset_after_fork(void)
{
    cmh_mutex_init(&g_lock);
    g_nkinds = 0;
}
