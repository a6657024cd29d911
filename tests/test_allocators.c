/*
 * test_allocators.c - allocators above the driver, through the real recorder over the fake
 * driver: the block API (managed segments, three block states, marks, ranges), stream-ordered
 * pools (reserved vs used), and VMM maps as one expandable segment.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "recorder_util.h"

static uint64_t allocated_now(void)
{
    cmh_device_stats st[4];
    int n = cmh_memory_stats(st, 4);
    for (int i = 0; i < n && i < 4; i++)
        if (st[i].device == 0) return st[i].allocated_current;
    return 0;
}

static void test_block_api(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALLOC, 0);
    uint64_t base = allocated_now();
    CUdeviceptr seg;
    CU_ASSERT_EQUAL_FATAL(cuMemAlloc(&seg, 4 << 20), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(allocated_now() - base, 4 << 20); /* one implied block, until it is managed */
    CU_ASSERT_EQUAL(cmh_segment_managed(seg), CMH_OK);
    CU_ASSERT_EQUAL(cmh_mark("step 1"), CMH_OK);
    CU_ASSERT_EQUAL(cmh_range_push("forward"), CMH_OK);
    CU_ASSERT_EQUAL(cmh_block_alloc(seg, 1 << 20, 1000000, 7), CMH_OK);
    CU_ASSERT_EQUAL(cmh_block_alloc(seg + (1 << 20), 512 << 10, 500000, 7), CMH_OK);
    CU_ASSERT_EQUAL(cmh_block_alloc(seg + (3 << 20), 1 << 20, 1 << 20, 7), CMH_OK);
    CU_ASSERT_EQUAL(cmh_range_pop(), CMH_OK);
    CU_ASSERT_EQUAL(cmh_block_free_requested(seg + (1 << 20)), CMH_OK); /* pending on its stream */
    CU_ASSERT_EQUAL(cmh_block_free_completed(seg + (3 << 20)), CMH_OK);  /* freed at once */
    CU_ASSERT_NOT_EQUAL(cmh_block_free_completed(seg + 12345), CMH_OK);  /* not a block */
    CU_ASSERT_NOT_EQUAL(cmh_range_pop(), CMH_OK);                        /* nothing open */
    CU_ASSERT_EQUAL(allocated_now() - base, 1 << 20); /* the pending block no longer counts */

    cmh_snapshot s;
    dump_load(&s);
    const cmh_segment *g = find_segment(&s, seg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_FALSE(g->flags & CMH_SEG_WHOLE_BLOCK);
    uint64_t alloc = 0, pending = 0;
    for (uint32_t k = 0; k < g->nblocks; k++) {
        const cmh_block *b = &s.blocks[g->first_block + k];
        if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) {
            alloc += b->size;
            CU_ASSERT_EQUAL(b->addr, seg);
        }
        if (b->state == CMH_BLOCK_ACTIVE_PENDING_FREE) {
            pending += b->size;
            CU_ASSERT_EQUAL(b->addr, seg + (1 << 20));
        }
    }
    CU_ASSERT_EQUAL(alloc, 1 << 20);
    CU_ASSERT_EQUAL(pending, 512 << 10);
    const cmh_entry *e;
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, 0, CMH_ACT_ALLOC, seg + (1 << 20)));
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 512 << 10);
    CU_ASSERT_EQUAL(cmh_entry_requested(&s, e), 500000);
    CU_ASSERT_EQUAL(cmh_entry_stream(&s, e), 7);
    CU_ASSERT(e->stack != 0);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_FREE_REQUESTED, seg + (1 << 20)));
    CU_ASSERT_PTR_NULL(find_entry(&s, 0, CMH_ACT_FREE_COMPLETED, seg + (1 << 20)));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_FREE_REQUESTED, seg + (3 << 20)));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_FREE_COMPLETED, seg + (3 << 20)));
    /* marks by name, the range's two ends as annotations */
    int marks = 0, fwd_start = 0, fwd_end = 0;
    const cmh_trace *t = trace_of(&s, 0);
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *m = &s.entries[t->first_entry + i];
        if (m->action == CMH_ACT_MARK)
            marks += strcmp(cmh_str(&s, cmh_entry_name(&s, m)), "step 1") == 0 || strcmp(cmh_str(&s, cmh_entry_name(&s, m)), "forward") == 0;
    }
    for (uint32_t i = 0; i < s.nannotations; i++)
        if (strcmp(cmh_str(&s, s.annotations[i].name), "forward") == 0) {
            fwd_start += s.annotations[i].stage == 0;
            fwd_end += s.annotations[i].stage == 1;
            CU_ASSERT_EQUAL(s.annotations[i].device, 0);
        }
    CU_ASSERT_EQUAL(marks, 2);
    CU_ASSERT_EQUAL(fwd_start, 1);
    CU_ASSERT_EQUAL(fwd_end, 1);
    cmh_snapshot_free(&s);

    /* the pending block completes; freeing the segment frees the block still in it, first */
    cmh_mem_stats ms;
    CU_ASSERT_EQUAL(cmh_block_free_completed(seg + (1 << 20)), CMH_OK);
    CU_ASSERT_EQUAL(cuMemFree(seg), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(allocated_now(), base);
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_FREE_COMPLETED, seg + (1 << 20)));
    const cmh_entry *fc = find_entry(&s, 0, CMH_ACT_FREE_COMPLETED, seg), *sf = find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, seg);
    CU_ASSERT(fc && sf && fc < sf);
    CU_ASSERT_PTR_NULL(find_segment(&s, seg));
    CU_ASSERT_EQUAL(cmh_summary_compute(&s, 0, &ms), CMH_OK);
    CU_ASSERT_EQUAL(ms.allocated_bytes[CMH_POOL_ALL].current, 0);
    cmh_snapshot_free(&s);
    /* a new driver allocation at the same address starts with no blocks */
    CUdeviceptr again;
    CU_ASSERT_EQUAL_FATAL(cuMemAlloc(&again, 4 << 20), CUDA_SUCCESS);
    dump_load(&s);
    const cmh_segment *ng = find_segment(&s, again);
    CU_ASSERT(ng && ng->nblocks == 1 && s.blocks[ng->first_block].size == 4 << 20);
    cmh_snapshot_free(&s);
    cuMemFree(again);
}

/* an allocator that declares its segment managed long after the cuMemAlloc (other threads'
 * traffic in between): the segment_alloc entry still loses its implied block */
static void test_managed_late(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    CUdeviceptr seg, q, seg2;
    CU_ASSERT_EQUAL_FATAL(cuMemAlloc(&seg, 2 << 20), CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(cuMemAlloc(&seg2, 2 << 20), CUDA_SUCCESS);
    for (int i = 0; i < 400; i++) {
        CU_ASSERT_EQUAL(cuMemAlloc(&q, 4096), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cuMemFree(q), CUDA_SUCCESS);
    }
    CU_ASSERT_EQUAL(cmh_segment_managed(seg), CMH_OK);
    CU_ASSERT_EQUAL(cmh_segment_managed(seg2), CMH_OK);
    CU_ASSERT_EQUAL(cmh_block_alloc(seg, 4096, 4000, 0), CMH_OK);
    CU_ASSERT_EQUAL(cmh_block_alloc(seg2, 8192, 8000, 0), CMH_OK);
    CU_ASSERT_EQUAL(cmh_block_free_completed(seg2), CMH_OK);
    CU_ASSERT_EQUAL(cuMemFree(seg2), CUDA_SUCCESS); /* freed managed: only its free entry says so */
    cmh_snapshot s;
    dump_load(&s);
    const cmh_entry *e = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, seg), *e2 = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, seg2);
    CU_ASSERT(e && !(e->flags & CMH_EF_WHOLE_BLOCK));
    CU_ASSERT(e2 && !(e2->flags & CMH_EF_WHOLE_BLOCK));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, q)); /* plain ones keep theirs */
    CU_ASSERT(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, q)->flags & CMH_EF_WHOLE_BLOCK);
    cmh_replay *r = cmh_replay_new(&s, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    while (cmh_replay_step(r)) {}
    CU_ASSERT_EQUAL(cmh_replay_anomalies(r), 0);
    CU_ASSERT_EQUAL(cmh_replay_stats(r)->allocated_bytes[CMH_POOL_ALL].current, 4096);
    CU_ASSERT_EQUAL(cmh_replay_stats(r)->allocated_bytes[CMH_POOL_ALL].peak, 4096 + 8192);
    cmh_replay_free(r);
    cmh_snapshot_free(&s);
    CU_ASSERT_EQUAL(cmh_block_free_completed(seg), CMH_OK);
    CU_ASSERT_EQUAL(cuMemFree(seg), CUDA_SUCCESS);
}

/* the last pool_sample of this pool in the trace, or NULL */
static const cmh_entry *last_pool_sample(const cmh_snapshot *s, uint64_t pool)
{
    const cmh_trace *t = trace_of(s, 0);
    const cmh_entry *last = NULL;
    for (uint32_t i = 0; t && i < t->nentries; i++)
        if (s->entries[t->first_entry + i].action == CMH_ACT_POOL_SAMPLE && cmh_entry_addr(s, &s->entries[t->first_entry + i]) == pool)
            last = &s->entries[t->first_entry + i];
    return last;
}

/* reserved beyond used of every pool, at its last sample */
static uint64_t pools_slack(const cmh_snapshot *s)
{
    const cmh_trace *t = trace_of(s, 0);
    uint64_t sum = 0;
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (e->action == CMH_ACT_POOL_SAMPLE && last_pool_sample(s, cmh_entry_addr(s, e)) == e) sum += cmh_entry_size(s, e) - cmh_entry_requested(s, e);
    }
    return sum;
}

static uint64_t reserved_now(void)
{
    cmh_device_stats st[4];
    CU_ASSERT_FATAL(cmh_memory_stats(st, 4) >= 1);
    for (int i = 0; i < 4; i++)
        if (st[i].device == 0) return st[i].reserved_current;
    return 0;
}

/* recording with no stacks, a new pool on device 0 and a stream to use it on (the test ends,
 * asserted, when the driver made none) */
static void pool_and_stream(CUmemoryPool *pool, CUstream *st)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    CUmemPoolProps props = pool_props(0);
    CU_ASSERT_EQUAL_FATAL(cuMemPoolCreate(pool, &props), CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(cuStreamCreate(st, 0), CUDA_SUCCESS);
}

/* stream-ordered pools: reserved (what the pool keeps) vs used (what it handed out) */
static void test_pools(void)
{
    CUmemoryPool pool;
    CUstream st;
    pool_and_stream(&pool, &st);
    uint64_t h = (uint64_t)(uintptr_t)pool, base = reserved_now();
    CUdeviceptr p[3];
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(cuMemAllocFromPoolAsync(&p[i], 100 << 10, pool, st), CUDA_SUCCESS);
    cuuint64_t res = 0, used = 0;
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res);
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
    CU_ASSERT(res > used && used >= 3 * (100 << 10));
    /* the recorder's reserved: the three blocks' segments plus what the pool keeps beyond them */
    CU_ASSERT_EQUAL(reserved_now() - base, 3 * (100 << 10) + (res - used));

    cmh_snapshot s;
    dump_load(&s);
    const cmh_entry *e = last_pool_sample(&s, h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), res);
    CU_ASSERT_EQUAL(cmh_entry_requested(&s, e), used);
    CU_ASSERT_EQUAL(e->kind, CMH_KIND_ASYNC);
    /* the analyzer: allocated = what the pool handed out; reserved includes the pool's slack */
    cmh_mem_stats ms;
    CU_ASSERT_EQUAL_FATAL(cmh_summary_compute(&s, 0, &ms), CMH_OK);
    uint64_t seg_total = 0;
    for (uint32_t i = 0; i < s.nsegments; i++)
        if (s.segments[i].device == 0) seg_total += s.segments[i].size;
    CU_ASSERT_EQUAL((uint64_t)ms.reserved_bytes[CMH_POOL_ALL].current, seg_total + pools_slack(&s));
    CU_ASSERT(pools_slack(&s) >= res - used);
    CU_ASSERT_EQUAL((uint64_t)ms.reserved_bytes[CMH_POOL_ALL].current, reserved_now());
    cmh_snapshot_free(&s);

    /* frees lower used, not reserved; trimming returns what is unused */
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(cuMemFreeAsync(p[i], st), CUDA_SUCCESS);
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res);
    CU_ASSERT(res > 0);
    CU_ASSERT_EQUAL(reserved_now() - base, res);
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = last_pool_sample(&s, h));
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), res);
    CU_ASSERT_EQUAL(cmh_entry_requested(&s, e), 0);
    cmh_snapshot_free(&s);
    CU_ASSERT_EQUAL(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(reserved_now(), base);
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = last_pool_sample(&s, h));
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 0);
    cmh_snapshot_free(&s);

    /* destroying a pool that still keeps memory releases it from the count */
    CU_ASSERT_EQUAL(cuMemAllocFromPoolAsync(&p[0], 4096, pool, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync(p[0], st), CUDA_SUCCESS);
    CU_ASSERT(reserved_now() > base);
    CU_ASSERT_EQUAL(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(reserved_now(), base);
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = last_pool_sample(&s, h));
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 0);
    CU_ASSERT_EQUAL(cmh_summary_compute(&s, 0, &ms), CMH_OK);
    seg_total = 0;
    for (uint32_t i = 0; i < s.nsegments; i++)
        if (s.segments[i].device == 0) seg_total += s.segments[i].size;
    CU_ASSERT_EQUAL((uint64_t)ms.reserved_bytes[CMH_POOL_ALL].current, seg_total + pools_slack(&s));
    CU_ASSERT_EQUAL((uint64_t)ms.reserved_bytes[CMH_POOL_ALL].current, reserved_now());
    cmh_snapshot_free(&s);
    cuStreamDestroy(st);
}

/* the device's used bytes, as cuMemGetInfo says */
static uint64_t device_used(void)
{
    size_t free_b = 0, total_b = 0;
    CU_ASSERT_EQUAL(cuMemGetInfo(&free_b, &total_b), CUDA_SUCCESS);
    return total_b - free_b;
}

/* A pool's reserved bytes are device memory (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: the backing
 * memory allocated for it): what it keeps after a free stays used on the device until a trim,
 * or until a synchronize finds more than its release threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD),
 * and it serves later allocations first.  The fake once gave freed ranges back to the device at
 * once while still reporting them reserved. */
static void test_pool_backing(void)
{
    CUmemoryPool pool;
    CUstream st;
    pool_and_stream(&pool, &st);
    cuuint64_t keep_all = ~0ull, none = 0, res = 0, used = 0;
    CU_ASSERT_EQUAL(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all), CUDA_SUCCESS);
    const uint64_t MiB = 1 << 20, base = device_used();
    CUdeviceptr p[4];
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(cuMemAllocFromPoolAsync(&p[i], 4 * MiB, pool, st), CUDA_SUCCESS);
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res);
    CU_ASSERT_EQUAL(res, 16 * MiB);
    CU_ASSERT_EQUAL(device_used() - base, res);
    for (int i = 0; i < 4; i += 2) CU_ASSERT_EQUAL(cuMemFreeAsync(p[i], st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuStreamSynchronize(st), CUDA_SUCCESS); /* below the threshold: kept */
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res);
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
    CU_ASSERT_EQUAL(res, 16 * MiB);
    CU_ASSERT_EQUAL(used, 8 * MiB);
    CU_ASSERT_EQUAL(device_used() - base, 16 * MiB); /* freed into the pool: still used on the device */
    CU_ASSERT_EQUAL(cuMemAllocFromPoolAsync(&p[0], 4 * MiB, pool, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(device_used() - base, 16 * MiB); /* served from what the pool kept */
    CU_ASSERT_EQUAL(cuMemFreeAsync(p[0], st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(device_used() - base, 8 * MiB); /* the trim gave back all but what backs p[1], p[3] */
    CU_ASSERT_EQUAL(cuMemFreeAsync(p[1], st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(device_used() - base, 8 * MiB);
    CU_ASSERT_EQUAL(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &none), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxSynchronize(), CUDA_SUCCESS); /* over a threshold of 0: released down to p[3]'s */
    CU_ASSERT_EQUAL(device_used() - base, 4 * MiB);
    /* no call of the recorder's saw that release; an OOM reads the pools again, so that its moment
     * has the pool keeping nothing beyond p[3] */
    CUdeviceptr huge = 0;
    CU_ASSERT_EQUAL(cuMemAlloc(&huge, 64ull << 30), CUDA_ERROR_OUT_OF_MEMORY);
    cmh_snapshot s;
    dump_load(&s);
    const cmh_entry *e = last_pool_sample(&s, (uint64_t)(uintptr_t)pool);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 4 * MiB);
    CU_ASSERT_EQUAL(cmh_entry_requested(&s, e), 4 * MiB);
    cmh_snapshot_free(&s);
    CU_ASSERT_EQUAL(cuMemFreeAsync(p[3], st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemPoolDestroy(pool), CUDA_SUCCESS); /* what it kept goes back with it */
    CU_ASSERT_EQUAL(device_used(), base);
    cuStreamDestroy(st);
}

/* VMM as PyTorch's expandable segments: maps inside one reservation are one growing segment */
static void test_expandable_segment(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    CUmemAllocationProp prop = vmm_prop(0);
    CUdeviceptr va;
    const size_t chunk = 2 << 20;
    CUmemGenericAllocationHandle h[4];
    CU_ASSERT_EQUAL_FATAL(cuMemAddressReserve(&va, 16 << 20, 0, 0, 0), CUDA_SUCCESS);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(cuMemCreate(&h[i], chunk, &prop, 0), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cuMemMap(va + i * chunk, chunk, 0, h[i], 0), CUDA_SUCCESS);
    }
    cmh_snapshot s;
    dump_load(&s);
    const cmh_segment *g = find_segment(&s, va);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(g->size, 4 * chunk);
    CU_ASSERT_EQUAL(g->nblocks, 4);
    CU_ASSERT(g->flags & CMH_SEG_EXPANDABLE);
    for (int i = 1; i < 4; i++) CU_ASSERT_PTR_NULL(find_segment(&s, va + i * chunk));
    const cmh_trace *t = trace_of(&s, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    int maps = 0;
    for (uint32_t i = 0; i < t->nentries; i++) {
        const cmh_entry *e = &s.entries[t->first_entry + i];
        if (e->action != CMH_ACT_SEGMENT_MAP) continue;
        CU_ASSERT_EQUAL(cmh_entry_addr(&s, e), va + maps * chunk); /* in order, each a chunk */
        CU_ASSERT_EQUAL(cmh_entry_size(&s, e), chunk);
        maps++;
    }
    CU_ASSERT_EQUAL(maps, 4);
    cmh_mem_stats ms;
    CU_ASSERT_EQUAL(cmh_summary_compute(&s, 0, &ms), CMH_OK);
    CU_ASSERT_EQUAL(ms.reserved_bytes[CMH_POOL_ALL].peak - ms.reserved_bytes[CMH_POOL_ALL].current, 0);
    cmh_snapshot_free(&s);

    /* shrink from the top, as expandable segments do: the segment shrinks with it */
    CU_ASSERT_EQUAL(cuMemUnmap(va + 3 * chunk, chunk), CUDA_SUCCESS);
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g = find_segment(&s, va));
    CU_ASSERT_EQUAL(g->size, 3 * chunk);
    const cmh_entry *e = find_entry(&s, 0, CMH_ACT_SEGMENT_UNMAP, va + 3 * chunk);
    CU_ASSERT(e && cmh_entry_size(&s, e) == chunk);
    cmh_snapshot_free(&s);
    /* a hole in the middle leaves two segments, as the mapped ranges are */
    CU_ASSERT_EQUAL(cuMemUnmap(va + chunk, chunk), CUDA_SUCCESS);
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g = find_segment(&s, va));
    CU_ASSERT_EQUAL(g->size, chunk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g = find_segment(&s, va + 2 * chunk));
    CU_ASSERT_EQUAL(g->size, chunk);
    cmh_snapshot_free(&s);
    /* all unmapped and released: nothing left, the peak was the four maps */
    CU_ASSERT_EQUAL(cuMemUnmap(va, chunk), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemUnmap(va + 2 * chunk, chunk), CUDA_SUCCESS);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(cuMemRelease(h[i]), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAddressFree(va, 16 << 20), CUDA_SUCCESS);
    dump_load(&s);
    CU_ASSERT_EQUAL(s.nsegments, 0);
    CU_ASSERT_EQUAL(cmh_summary_compute(&s, 0, &ms), CMH_OK);
    CU_ASSERT_EQUAL(ms.reserved_bytes[CMH_POOL_ALL].current - (int64_t)pools_slack(&s), 0);
    CU_ASSERT_EQUAL(ms.reserved_bytes[CMH_POOL_ALL].peak - (int64_t)pools_slack(&s), 4 * chunk);
    cmh_snapshot_free(&s);
}

/* A handle made while recording is off is not kept, as no allocation then is: only the one made
 * once recording is on again is held and mapped nowhere in the dump. */
static void test_vmm_handle_paused(void)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle off, on;
    set_opts(CMH_ENABLED_OFF, CMH_CONTEXT_NONE, 0);
    CU_ASSERT_EQUAL_FATAL(cuMemCreate(&off, 6 << 20, &prop, 0), CUDA_SUCCESS);
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    CU_ASSERT_EQUAL_FATAL(cuMemCreate(&on, 2 << 20, &prop, 0), CUDA_SUCCESS);
    cmh_snapshot s;
    dump_load(&s);
    CU_ASSERT_EQUAL(s.nvmm_unmapped, 1);
    CU_ASSERT(s.nvmm_unmapped == 1 && s.vmm_unmapped[0].size == 2 << 20 && s.vmm_unmapped[0].device == 0);
    cmh_snapshot_free(&s);
    CU_ASSERT_EQUAL(cuMemRelease(off), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemRelease(on), CUDA_SUCCESS);
    dump_load(&s);
    CU_ASSERT_EQUAL(s.nvmm_unmapped, 0);
    cmh_snapshot_free(&s);
}

/* fork(): the child records a fresh history into its own file; the parent's is untouched */
int main(void)
{
    CUcontext ctx;
    if (recorder_test_init(&ctx)) return 2;
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("allocators", NULL, NULL);
    CMH_ADD_TEST(s, test_block_api);
    CMH_ADD_TEST(s, test_managed_late);
    CMH_ADD_TEST(s, test_pools);
    CMH_ADD_TEST(s, test_pool_backing);
    CMH_ADD_TEST(s, test_expandable_segment);
    CMH_ADD_TEST(s, test_vmm_handle_paused);
    int rc = cmh_test_main();
    recorder_test_cleanup();
    return rc;
}
