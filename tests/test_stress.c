/*
 * test_stress.c - the real recorder under load: 32 threads, each making CMH_STRESS_CALLS
 * (default 10,000; 100,000 for the full run) mixed calls on two devices and two streams each:
 * cuMemAlloc / cuMemFree, cuMemAllocAsync / cuMemFreeAsync, allocations from a shared pool,
 * VMM reserve / create / map / unmap / release, marks; stacks on (context=alloc) and a ring of
 * 5,000 entries that wraps many times.  It must finish with no crash or deadlock, with drop
 * counts exact (entries kept + dropped = entries recorded, per device), and with the final
 * state equal to the program's own ledger (every live allocation, and nothing else).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder_util.h"

#define MAX_THREADS 32
#define KEEP 16 /* live allocations a thread keeps at most, per kind */

static CUcontext g_ctx[2];
static CUmemoryPool g_pool[2];
static long g_calls = 10000;

typedef struct ledger {
    CUdeviceptr sync[KEEP], async[KEEP];
    int sync_dev[KEEP], async_dev[KEEP];
    CUstream async_stream[KEEP];
    int nsync, nasync;
    uint64_t rng;
    long made; /* hooked calls made */
} ledger;

static ledger g_led[MAX_THREADS];
static int THREADS = MAX_THREADS; /* CMH_STRESS_THREADS lowers it */

static uint64_t rnd(ledger *l, uint64_t n)
{
    l->rng ^= l->rng << 13, l->rng ^= l->rng >> 7, l->rng ^= l->rng << 17;
    return l->rng % n;
}

static void vmm_round(int dev)
{
    CUmemAllocationProp prop = vmm_prop(dev);
    CUdeviceptr base;
    CUmemGenericAllocationHandle h;
    if (cuMemAddressReserve(&base, 4 << 20, 0, 0, 0) != CUDA_SUCCESS) return;
    if (cuMemCreate(&h, 2 << 20, &prop, 0) == CUDA_SUCCESS) {
        if (cuMemMap(base, 2 << 20, 0, h, 0) == CUDA_SUCCESS) cuMemUnmap(base, 2 << 20);
        cuMemRelease(h);
    }
    cuMemAddressFree(base, 4 << 20);
}

static void *worker(void *arg)
{
    ledger *l = arg;
    CUstream st[2];
    for (int d = 0; d < 2; d++) {
        cuCtxSetCurrent(g_ctx[d]);
        cuStreamCreate(&st[d], 0);
    }
    for (long i = 0; i < g_calls; i++) {
        int dev = (int)rnd(l, 2);
        cuCtxSetCurrent(g_ctx[dev]);
        switch (rnd(l, 10)) {
        case 0: case 1: case 2: { /* a driver allocation, kept or freed */
            CUdeviceptr p;
            if (cuMemAlloc(&p, 4096 * (1 + rnd(l, 64))) != CUDA_SUCCESS) break;
            if (l->nsync < KEEP && rnd(l, 2)) l->sync[l->nsync] = p, l->sync_dev[l->nsync++] = dev;
            else cuMemFree(p);
            break;
        }
        case 3: /* free one kept */
            if (l->nsync) {
                int k = (int)rnd(l, (uint64_t)l->nsync);
                cuCtxSetCurrent(g_ctx[l->sync_dev[k]]);
                cuMemFree(l->sync[k]);
                l->sync[k] = l->sync[--l->nsync], l->sync_dev[k] = l->sync_dev[l->nsync];
            }
            break;
        case 4: case 5: { /* stream-ordered, from the device's default pool or the shared one */
            CUdeviceptr p;
            CUresult r = rnd(l, 2) ? cuMemAllocAsync(&p, 4096 * (1 + rnd(l, 16)), st[dev])
                                   : cuMemAllocFromPoolAsync(&p, 8192, g_pool[dev], st[dev]);
            if (r != CUDA_SUCCESS) break;
            if (l->nasync < KEEP && rnd(l, 2)) {
                l->async[l->nasync] = p, l->async_dev[l->nasync] = dev, l->async_stream[l->nasync++] = st[dev];
            } else cuMemFreeAsync(p, st[dev]);
            break;
        }
        case 6:
            if (l->nasync) {
                int k = (int)rnd(l, (uint64_t)l->nasync);
                cuCtxSetCurrent(g_ctx[l->async_dev[k]]);
                cuMemFreeAsync(l->async[k], l->async_stream[k]);
                l->async[k] = l->async[--l->nasync];
                l->async_dev[k] = l->async_dev[l->nasync];
                l->async_stream[k] = l->async_stream[l->nasync];
            }
            break;
        case 7: vmm_round(dev); break;
        case 8:
            if (rnd(l, 50) == 0) cmh_mark("stress step");
            break;
        default: { /* a short-lived one: alloc and free at once */
            CUdeviceptr p;
            if (cuMemAlloc(&p, 512) == CUDA_SUCCESS) cuMemFree(p);
            break;
        }
        }
        l->made++;
    }
    return NULL;
}

static int contains(const cmh_snapshot *s, int dev, uint64_t addr)
{
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].device == dev && addr >= s->segments[i].addr && addr < s->segments[i].addr + s->segments[i].size) {
            for (uint32_t k = 0; k < s->segments[i].nblocks; k++)
                if (s->blocks[s->segments[i].first_block + k].addr == addr &&
                    s->blocks[s->segments[i].first_block + k].state != CMH_BLOCK_INACTIVE)
                    return 1;
        }
    return 0;
}

static void test_stress(void)
{
    const char *n = getenv("CMH_STRESS_CALLS"), *th = getenv("CMH_STRESS_THREADS");
    if (n && atol(n) > 0) g_calls = atol(n);
    if (th && atoi(th) > 0 && atoi(th) < MAX_THREADS) THREADS = atoi(th);
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALLOC, 5000);
    for (int d = 0; d < 2; d++) {
        CUmemPoolProps pp = pool_props(d);
        cuCtxSetCurrent(g_ctx[d]);
        CU_ASSERT_EQUAL_FATAL(cuMemPoolCreate(&g_pool[d], &pp), CUDA_SUCCESS);
    }
    pthread_t t[MAX_THREADS];
    for (int i = 0; i < THREADS; i++) {
        g_led[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, worker, &g_led[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    long made = 0;
    for (int i = 0; i < THREADS; i++) made += g_led[i].made;
    CU_ASSERT_EQUAL(made, THREADS * g_calls);

    cmh_device_stats st[4];
    int nd = cmh_memory_stats(st, 4);
    cmh_snapshot s;
    dump_load(&s);
    CU_ASSERT(cmh_lost_events() == 0);
    uint64_t kept = 0, dropped = 0;
    for (int k = 0; k < nd && k < 4; k++) {
        const cmh_trace *tr = trace_of(&s, st[k].device);
        CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
        /* exact: what the ring kept and dropped is what was recorded */
        CU_ASSERT_EQUAL(tr->nentries + tr->dropped, st[k].entries_recorded);
        CU_ASSERT_EQUAL(tr->dropped, st[k].entries_dropped);
        CU_ASSERT(tr->nentries <= 5000);
        kept += tr->nentries;
        dropped += tr->dropped;
    }
    CU_ASSERT(dropped > 10 * kept || g_calls < 10000); /* it wrapped many times */
    /* the final state: every live allocation of the ledger, on its device */
    uint64_t live = 0, found = 0;
    for (int i = 0; i < THREADS; i++) {
        for (int k = 0; k < g_led[i].nsync; k++) live++, found += contains(&s, g_led[i].sync_dev[k], g_led[i].sync[k]);
        for (int k = 0; k < g_led[i].nasync; k++) live++, found += contains(&s, g_led[i].async_dev[k], g_led[i].async[k]);
    }
    CU_ASSERT_EQUAL(found, live);
    /* ... and nothing else: every live block of the snapshot is one of them (VMM maps all undone) */
    uint64_t blocks = 0;
    for (uint32_t i = 0; i < s.nsegments; i++)
        for (uint32_t k = 0; k < s.segments[i].nblocks; k++) blocks += s.blocks[s.segments[i].first_block + k].state != CMH_BLOCK_INACTIVE;
    CU_ASSERT_EQUAL(blocks, live);
    fprintf(stderr, "\n  %d threads x %ld calls: %lu entries kept, %lu dropped, %lu live allocations found of %lu\n", THREADS,
            g_calls, (unsigned long)kept, (unsigned long)dropped, (unsigned long)found, (unsigned long)live);
    cmh_snapshot_free(&s);
}

int main(void)
{
    CUcontext c0;
    int rc = recorder_test_init(&c0);
    if (rc) return 77;
    if (recorder_test_second_device(c0, g_ctx)) return 77;
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("stress", NULL, NULL);
    CMH_ADD_TEST(s, test_stress);
    return cmh_test_main();
}
