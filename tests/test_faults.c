/*
 * test_faults.c - the recorder where things go wrong: a driver that refuses, another thread in
 * the middle of a call, a caller's string gone, tables that fill up.  Over the fake driver only
 * (its fault injection and unmap hook, tests/fakecuda/fakecuda.c).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cumemhist/analyzer.h"
#include "recorder_util.h"

static void (*fake_inject)(const char *, long, int);
static void (*fake_clear)(void);
static void (*fake_on_unmap)(void (*)(CUdeviceptr, size_t));

/* the actions of device 0's entries at addr, in trace order, as letters: m map, u unmap */
static void map_history(const cmh_snapshot *s, uint64_t addr, char *out, size_t n)
{
    const cmh_trace *t = trace_of(s, 0);
    size_t k = 0;
    for (uint32_t i = 0; t && i < t->nentries && k + 1 < n; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (cmh_entry_addr(s, e) != addr) continue;
        if (e->action == CMH_ACT_SEGMENT_MAP) out[k++] = 'm';
        if (e->action == CMH_ACT_SEGMENT_UNMAP) out[k++] = 'u';
    }
    out[k] = 0;
}

/* ---- cuMemUnmap is recorded before the driver unmaps ---- */

static CUmemGenericAllocationHandle g_h2;
static int g_remapped;

/* Runs inside the driver's cuMemUnmap, after it unmapped: another thread maps the same range. */
static void map_again(CUdeviceptr p, size_t n)
{
    if (g_remapped++) return;
    CU_ASSERT_EQUAL(cuMemMap(p, n, 0, g_h2, 0), CUDA_SUCCESS);
}

static void test_unmap_recorded_before_the_driver(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    CUmemAllocationProp prop = vmm_prop(0);
    const size_t chunk = 2 << 20;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h1;
    CU_ASSERT_EQUAL_FATAL(cuMemAddressReserve(&va, 4 * chunk, 0, 0, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemCreate(&h1, chunk, &prop, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemCreate(&g_h2, chunk, &prop, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemMap(va, chunk, 0, h1, 0), CUDA_SUCCESS);
    g_remapped = 0;
    fake_on_unmap(map_again);
    CU_ASSERT_EQUAL(cuMemUnmap(va, chunk), CUDA_SUCCESS);
    fake_on_unmap(NULL);
    CU_ASSERT_EQUAL(g_remapped, 1);
    cmh_snapshot s;
    dump_load(&s);
    /* the second map happened after the unmap: it is alive, and the trace says so in order */
    const cmh_segment *g = find_segment(&s, va);
    CU_ASSERT_PTR_NOT_NULL(g);
    if (g) CU_ASSERT_EQUAL(g->size, chunk);
    char hist[16];
    map_history(&s, va, hist, sizeof hist);
    CU_ASSERT_STRING_EQUAL(hist, "mum");
    cmh_mem_stats ms;
    CU_ASSERT_EQUAL(cmh_summary_compute(&s, 0, &ms), CMH_OK);
    CU_ASSERT_EQUAL(ms.reserved_bytes[CMH_POOL_ALL].current, (int64_t)chunk);
    cmh_snapshot_free(&s);
    CU_ASSERT_EQUAL(cuMemUnmap(va, chunk), CUDA_SUCCESS);
    cuMemRelease(h1);
    cuMemRelease(g_h2);
    cuMemAddressFree(va, 4 * chunk);
}

static void test_refused_unmap_is_undone(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    CUmemAllocationProp prop = vmm_prop(0);
    const size_t chunk = 2 << 20;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h[2];
    CU_ASSERT_EQUAL_FATAL(cuMemAddressReserve(&va, 4 * chunk, 0, 0, 0), CUDA_SUCCESS);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(cuMemCreate(&h[i], chunk, &prop, 0), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cuMemMap(va + i * chunk, chunk, 0, h[i], 0), CUDA_SUCCESS);
    }
    fake_inject("cuMemUnmap", 1, CUDA_ERROR_INVALID_VALUE);
    CU_ASSERT_EQUAL(cuMemUnmap(va, 2 * chunk), CUDA_ERROR_INVALID_VALUE); /* forwarded unchanged */
    fake_clear();
    cmh_snapshot s;
    dump_load(&s);
    const cmh_segment *g = find_segment(&s, va);
    CU_ASSERT_PTR_NOT_NULL(g);
    if (g) CU_ASSERT_EQUAL(g->size, 2 * chunk); /* both maps still there, one growing segment */
    char hist[16];
    map_history(&s, va, hist, sizeof hist);
    CU_ASSERT_STRING_EQUAL(hist, "mum"); /* the unmap, then its undoing */
    cmh_mem_stats ms;
    CU_ASSERT_EQUAL(cmh_summary_compute(&s, 0, &ms), CMH_OK);
    CU_ASSERT_EQUAL(ms.reserved_bytes[CMH_POOL_ALL].current, (int64_t)(2 * chunk));
    CU_ASSERT_EQUAL(ms.allocated_bytes[CMH_POOL_ALL].current, (int64_t)(2 * chunk));
    cmh_snapshot_free(&s);
    CU_ASSERT_EQUAL(cuMemUnmap(va, 2 * chunk), CUDA_SUCCESS);
    dump_load(&s);
    CU_ASSERT_PTR_NULL(find_segment(&s, va));
    cmh_snapshot_free(&s);
    for (int i = 0; i < 2; i++) cuMemRelease(h[i]);
    cuMemAddressFree(va, 4 * chunk);
}

/* ---- a range's name is the caller's string as it was at push ---- */

static void test_range_name_copied_at_push(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    char name[32];
    snprintf(name, sizeof name, "forward-%d", 7);
    CU_ASSERT_EQUAL(cmh_range_push(name), CMH_OK);
    memset(name, 'X', sizeof name - 1); /* the caller reuses its buffer */
    CU_ASSERT_EQUAL(cmh_range_pop(), CMH_OK);
    cmh_snapshot s;
    dump_load(&s);
    int starts = 0, ends = 0;
    for (uint32_t i = 0; i < s.nannotations; i++) {
        const char *n = cmh_str(&s, s.annotations[i].name);
        CU_ASSERT_STRING_EQUAL(n, "forward-7");
        if (s.annotations[i].stage == 0) starts++;
        else ends++;
    }
    CU_ASSERT_EQUAL(starts, 1);
    CU_ASSERT_EQUAL(ends, 1);
    cmh_snapshot_free(&s);
}

/* ---- every refused call is forwarded unchanged and leaves no trace of success ---- */

static void test_refusals_forwarded(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 0);
    const int code = CUDA_ERROR_ILLEGAL_STATE; /* an unusual code: it must come back as it is */
    uint64_t before = cmh_lost_events();
    CUdeviceptr p = 0, q = 0;
    size_t pitch = 0;
    void *hp = NULL;
    fake_inject("cuMemAlloc", 1, code);
    CU_ASSERT_EQUAL(cuMemAlloc(&p, 4096), (CUresult)code);
    fake_inject("cuMemAllocPitch", 1, code);
    CU_ASSERT_EQUAL(cuMemAllocPitch(&p, &pitch, 1000, 10, 4), (CUresult)code);
    fake_inject("cuMemAllocManaged", 1, code);
    CU_ASSERT_EQUAL(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL), (CUresult)code);
    fake_inject("cuMemAllocHost", 1, code);
    CU_ASSERT_EQUAL(cuMemAllocHost(&hp, 4096), (CUresult)code);
    fake_inject("cuMemHostAlloc", 1, code);
    CU_ASSERT_EQUAL(cuMemHostAlloc(&hp, 4096, 0), (CUresult)code);
    fake_inject("cuMemAllocAsync", 1, code);
    CU_ASSERT_EQUAL(cuMemAllocAsync(&p, 4096, 0), (CUresult)code);
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    fake_inject("cuMemCreate", 1, code);
    CU_ASSERT_EQUAL(cuMemCreate(&h, 2 << 20, &prop, 0), (CUresult)code);
    /* frees: refused, the allocation is still live */
    CU_ASSERT_EQUAL_FATAL(cuMemAlloc(&q, 8192), CUDA_SUCCESS);
    fake_inject("cuMemFree", 1, code);
    CU_ASSERT_EQUAL(cuMemFree(q), (CUresult)code);
    CU_ASSERT_EQUAL_FATAL(cuMemAllocHost(&hp, 4096), CUDA_SUCCESS);
    fake_inject("cuMemFreeHost", 1, code);
    CU_ASSERT_EQUAL(cuMemFreeHost(hp), (CUresult)code);
    CUdeviceptr a = 0;
    CU_ASSERT_EQUAL_FATAL(cuMemAllocAsync(&a, 4096, 0), CUDA_SUCCESS);
    fake_inject("cuMemFreeAsync", 1, code);
    CU_ASSERT_EQUAL(cuMemFreeAsync(a, 0), (CUresult)code);
    fake_clear();
    cmh_snapshot s;
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL(find_segment(&s, q));
    CU_ASSERT_PTR_NOT_NULL(find_segment(&s, (uint64_t)(uintptr_t)hp));
    CU_ASSERT_PTR_NOT_NULL(find_segment(&s, a));
    /* a refused allocation records nothing: only the three that succeeded are there */
    CU_ASSERT_EQUAL(s.nsegments, 3);
    CU_ASSERT_EQUAL(cmh_lost_events(), before);
    cmh_snapshot_free(&s);
    CU_ASSERT_EQUAL(cuMemFree(q), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeHost(hp), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync(a, 0), CUDA_SUCCESS);
    dump_load(&s);
    CU_ASSERT_EQUAL(s.nsegments, 0);
    cmh_snapshot_free(&s);
}

/* ---- the fake driver: no allocation in the memory its context holds ---- */

/* A context's bytes (FAKECUDA_CONTEXT, or fakecuda_take's) are not there to allocate: an
 * allocation past capacity - context is refused, and cuMemGetInfo's free never runs below 0
 * (it handed out 256 MiB on a 400 MiB device with 300 MiB of context, free 2^64 - 29 MiB). */
static void test_context_not_allocatable(void)
{
    int (*take)(int, long long) = (int (*)(int, long long))dlsym(RTLD_DEFAULT, "fakecuda_take");
    CU_ASSERT_PTR_NOT_NULL_FATAL(take);
    size_t f = 0, t = 0, f2 = 0;
    CU_ASSERT_EQUAL_FATAL(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    CU_ASSERT_FATAL(f > (16u << 20) && f <= t);
    long long held = (long long)(f - (8u << 20)); /* 8 MiB left */
    CU_ASSERT_EQUAL_FATAL(take(0, held), 0);
    CUdeviceptr p = 0, q = 0;
    CU_ASSERT_EQUAL(cuMemAlloc(&p, 16u << 20), CUDA_ERROR_OUT_OF_MEMORY);
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CU_ASSERT_EQUAL(cuMemCreate(&h, 16u << 20, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CU_ASSERT_EQUAL(cuMemGetInfo(&f2, &t), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(f2, 8u << 20);
    CU_ASSERT_EQUAL(cuMemAlloc(&q, 8u << 20), CUDA_SUCCESS); /* what is left fits, to the byte */
    CU_ASSERT_EQUAL(cuMemGetInfo(&f2, &t), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(f2, 0);
    CU_ASSERT_EQUAL(cuMemFree(q), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(take(0, -held), 0);
    CU_ASSERT_EQUAL(cuMemGetInfo(&f2, &t), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(f2, f);
}

/* ---- the fixed tables count what they cannot hold ---- */

static void test_full_tables_count_their_drops(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    /* reservations: 4096 are kept */
    enum { NRES = 4100 };
    static CUdeviceptr va[NRES];
    uint64_t before = cmh_lost_events();
    for (int i = 0; i < NRES; i++) CU_ASSERT_EQUAL_FATAL(cuMemAddressReserve(&va[i], 2 << 20, 0, 0, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cmh_lost_events() - before, NRES - 4096);
    for (int i = 0; i < NRES; i++) cuMemAddressFree(va[i], 2 << 20);
    /* pools: 1024 are followed; an operation on any other is counted once */
    enum { NPOOLS = 1030 };
    static CUmemoryPool pools[NPOOLS];
    CUmemPoolProps props = pool_props(0);
    before = cmh_lost_events();
    for (int i = 0; i < NPOOLS; i++) {
        CUdeviceptr p;
        CU_ASSERT_EQUAL_FATAL(cuMemPoolCreate(&pools[i], &props), CUDA_SUCCESS);
        CU_ASSERT_EQUAL_FATAL(cuMemAllocFromPoolAsync(&p, 4096, pools[i], 0), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cuMemFreeAsync(p, 0), CUDA_SUCCESS);
    }
    /* pools met before this test are followed too: at least the overflow, twice (alloc + free) */
    uint64_t lost = cmh_lost_events() - before;
    CU_ASSERT(lost >= 2 * (NPOOLS - 1024) && lost % 2 == 0);
    for (int i = 0; i < NPOOLS; i++) cuMemPoolDestroy(pools[i]);
}

/* A pool destroyed while the recorder's helper asks the driver about it (its once-a-second
 * sample for the live readers reads every pool): the destroy waits for that query.  It did not,
 * and the query read the pool the driver had freed (ThreadSanitizer: heap-use-after-free in the
 * helper's cuMemPoolGetAttribute; a real driver may hand the handle out again meanwhile).  The
 * fake driver holds each query of another thread 300 ms (FAKECUDA_POOL_ATTR_MS). */
static void test_pool_destroyed_during_helper_query(void)
{
    int *inside = dlsym(RTLD_DEFAULT, "fakecuda_pool_attr_inside");
    CUmemoryPool *held = dlsym(RTLD_DEFAULT, "fakecuda_pool_attr_held");
    CU_ASSERT_PTR_NOT_NULL_FATAL(inside);
    CU_ASSERT_PTR_NOT_NULL_FATAL(held);
    CUmemoryPool pool;
    CUmemPoolProps props = pool_props(0);
    CU_ASSERT_EQUAL_FATAL(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    CUdeviceptr p;
    CU_ASSERT_EQUAL_FATAL(cuMemAllocFromPoolAsync(&p, 4096, pool, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync(p, 0), CUDA_SUCCESS);
    setenv("FAKECUDA_POOL_ATTR_MS", "300", 1);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && !__atomic_load_n(inside, __ATOMIC_SEQ_CST); i++) nanosleep(&ms, NULL);
    int was_inside = __atomic_load_n(inside, __ATOMIC_SEQ_CST);
    CU_ASSERT(was_inside > 0); /* (the helper's sample came within 5 s) */
    CU_ASSERT_EQUAL(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    /* the helper's query of the pool ended before the driver destroyed it (one of another pool
     * may be under way: the destroy does not wait for that) */
    CU_ASSERT(__atomic_load_n(held, __ATOMIC_SEQ_CST) != pool);
    /* (else it ends now, in this process: where it reads the freed pool, ThreadSanitizer says so) */
    for (int i = 0; i < 5000 && __atomic_load_n(inside, __ATOMIC_SEQ_CST); i++) nanosleep(&ms, NULL);
    unsetenv("FAKECUDA_POOL_ATTR_MS");
}

/* A pool destroyed while the helper asks the driver about another one: the destroy does not wait
 * for it (it waited for every resample under way, the program's thread sleeping 50 us a turn).
 * The helper's query is held at the fake driver's gate, taken before the destroyed pool was made,
 * so no copy of the helper's holds it; the gate is let go after the destroy. */
static void test_pool_destroy_waits_only_for_its_pool(void)
{
    int *inside = dlsym(RTLD_DEFAULT, "fakecuda_pool_attr_inside"), *gate = dlsym(RTLD_DEFAULT, "fakecuda_pool_attr_gate");
    CU_ASSERT_PTR_NOT_NULL_FATAL(inside);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gate);
    CUmemoryPool other, pool;
    CUmemPoolProps props = pool_props(0);
    CU_ASSERT_EQUAL_FATAL(cuMemPoolCreate(&other, &props), CUDA_SUCCESS);
    CUdeviceptr p;
    CU_ASSERT_EQUAL_FATAL(cuMemAllocFromPoolAsync(&p, 4096, other, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync(p, 0), CUDA_SUCCESS);
    __atomic_store_n(gate, 1, __ATOMIC_SEQ_CST);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && !__atomic_load_n(inside, __ATOMIC_SEQ_CST); i++) nanosleep(&ms, NULL);
    CU_ASSERT(__atomic_load_n(inside, __ATOMIC_SEQ_CST) > 0); /* (the helper's sample came within 5 s) */
    CU_ASSERT_EQUAL_FATAL(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(cuMemAllocFromPoolAsync(&p, 4096, pool, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync(p, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    /* the helper is still held at the gate: the destroy did not wait for it (before, it waited
     * until the gate gave up, 10 s, and the helper was out) */
    CU_ASSERT(__atomic_load_n(inside, __ATOMIC_SEQ_CST) > 0);
    __atomic_store_n(gate, 0, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 5000 && __atomic_load_n(inside, __ATOMIC_SEQ_CST); i++) nanosleep(&ms, NULL);
    CU_ASSERT_EQUAL(cuMemPoolDestroy(other), CUDA_SUCCESS);
}

/* ---- malloc failing inside the recorder (the faults_nomem test preloads tests/malloc_fail.c) ---- */

static int (*malloc_fail_set)(int);
static unsigned long *malloc_fail_refused;

static void test_recorder_malloc_fails(void)
{
    if (!malloc_fail_set) {
        /* only where the failing malloc is preloaded; faults_nomem says it must be */
        CU_ASSERT_PTR_NULL(getenv("CMH_EXPECT_MALLOC_FAIL"));
        return;
    }
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALLOC, 0);
    cmh_snapshot s;
    dump_load(&s);
    uint32_t before_segs = s.nsegments;
    cmh_snapshot_free(&s);
    char good[300], err[512];
    snprintf(good, sizeof good, "%s/good.cmh", g_dir);
    CU_ASSERT_EQUAL_FATAL(cmh_dump_snapshot(good), CMH_OK);
    uint64_t lost0 = cmh_lost_events();
    enum { KEEP = 3000, CHURN = 60000 };
    static CUdeviceptr keep[KEEP];
    CU_ASSERT_EQUAL_FATAL(malloc_fail_set(1), 0);
    /* every call still goes through and works: the program never sees the recorder's trouble */
    int ok = 1;
    for (int i = 0; i < KEEP; i++) ok &= cuMemAlloc(&keep[i], 4096 + (size_t)i * 512) == CUDA_SUCCESS;
    for (int i = 0; i < CHURN; i++) {
        CUdeviceptr p;
        ok &= cuMemAlloc(&p, 1 << 16) == CUDA_SUCCESS;
        ok &= cuMemsetD8(p, 0x5a, 1 << 16) == CUDA_SUCCESS;
        ok &= cuMemFree(p) == CUDA_SUCCESS;
    }
    CU_ASSERT(ok);
    /* a dump now cannot build its snapshot: it says so and leaves the last one whole */
    CU_ASSERT_NOT_EQUAL(cmh_dump_snapshot(good), CMH_OK);
    CU_ASSERT_EQUAL(malloc_fail_set(0), 0);
    uint64_t lost = cmh_lost_events() - lost0;
    CU_ASSERT(*malloc_fail_refused > 0);
    CU_ASSERT(lost > 0); /* what could not be kept is counted */
    CU_ASSERT_EQUAL(cmh_snapshot_load(good, &s, err, sizeof err), CMH_OK);
    cmh_snapshot_free(&s);
    /* memory back: recording and dumping work again, and the counts are in the snapshot */
    CUdeviceptr after;
    CU_ASSERT_EQUAL(cuMemAlloc(&after, 8192), CUDA_SUCCESS);
    dump_load(&s);
    CU_ASSERT(s.lost_events >= lost);
    CU_ASSERT_PTR_NOT_NULL(find_segment(&s, after));
    /* the live segments it kept are real ones: no invented or doubled segment */
    CU_ASSERT(s.nsegments <= before_segs + KEEP + 1);
    uint32_t kept = 0;
    for (int i = 0; i < KEEP; i++) kept += find_segment(&s, keep[i]) != NULL;
    fprintf(stderr, "[%lu mallocs refused, %llu events counted lost, %u of %d live segments kept] ", *malloc_fail_refused,
            (unsigned long long)lost, kept, KEEP);
    CU_ASSERT_EQUAL(s.nsegments - before_segs - 1, kept);
    cmh_snapshot_free(&s);
    for (int i = 0; i < KEEP; i++) CU_ASSERT_EQUAL(cuMemFree(keep[i]), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree(after), CUDA_SUCCESS);
}

int main(void)
{
    CUcontext ctx;
    if (getenv("CMH_REAL_DRIVER")) return 77; /* fault injection is the fake driver's */
    if (recorder_test_init(&ctx)) return 2;
    *(void **)&fake_inject = dlsym(RTLD_DEFAULT, "fakecuda_inject");
    *(void **)&fake_clear = dlsym(RTLD_DEFAULT, "fakecuda_clear_faults");
    *(void **)&fake_on_unmap = dlsym(RTLD_DEFAULT, "fakecuda_on_unmap");
    if (!fake_inject || !fake_clear || !fake_on_unmap) {
        fprintf(stderr, "test_faults: not the fake driver (no fakecuda_inject)\n");
        return 2;
    }
    *(void **)&malloc_fail_set = dlsym(RTLD_DEFAULT, "malloc_fail_set");
    malloc_fail_refused = dlsym(RTLD_DEFAULT, "malloc_fail_refused");
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("faults", NULL, NULL);
    CMH_ADD_TEST(s, test_unmap_recorded_before_the_driver);
    CMH_ADD_TEST(s, test_refused_unmap_is_undone);
    CMH_ADD_TEST(s, test_range_name_copied_at_push);
    CMH_ADD_TEST(s, test_refusals_forwarded);
    CMH_ADD_TEST(s, test_full_tables_count_their_drops);
    CMH_ADD_TEST(s, test_pool_destroyed_during_helper_query);
    CMH_ADD_TEST(s, test_pool_destroy_waits_only_for_its_pool);
    CMH_ADD_TEST(s, test_context_not_allocatable);
    CMH_ADD_TEST(s, test_recorder_malloc_fails);
    int rc = cmh_test_main();
    recorder_test_cleanup();
    return rc;
}
