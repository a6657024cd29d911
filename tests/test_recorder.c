/*
 * test_recorder.c - the real recorder (LD_PRELOAD=libcumemhist.so) over the fake driver.
 *
 * Each test starts from a cleared history, drives the driver through the public entry points,
 * dumps a snapshot with cmh_dump_snapshot() and reads it back with the .cmh reader.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include "recorder_util.h"

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);


__attribute__((noinline)) static CUdeviceptr alloc_here(size_t n)
{
    CUdeviceptr p = 0;
    CU_ASSERT_EQUAL(cuMemAlloc(&p, n), CUDA_SUCCESS);
    return p;
}

static void test_linear_alloc_free(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 0);
    CUdeviceptr p = alloc_here(3 << 20);
    CUdeviceptr q = alloc_here(1000);
    CU_ASSERT_EQUAL(cuMemFree(p), CUDA_SUCCESS);
    cmh_snapshot s;
    dump_load(&s);
    const cmh_entry *a = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, p);
    const cmh_entry *f = find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, a), 3 << 20);
    CU_ASSERT_EQUAL(cmh_entry_requested(&s, a), 3 << 20);
    CU_ASSERT_EQUAL(a->kind, CMH_KIND_DEVICE);
    CU_ASSERT(a->flags & CMH_EF_WHOLE_BLOCK);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, f), 3 << 20);
    CU_ASSERT(cmh_entry_time(&s, a) > 1600000000000000000ll && cmh_entry_time(&s, f) >= cmh_entry_time(&s, a));
    CU_ASSERT(stack_names(&s, a->stack, "alloc_here"));
    CU_ASSERT(stack_names(&s, a->stack, "test_linear_alloc_free"));
    CU_ASSERT(f->stack != 0 && !stack_names(&s, f->stack, "alloc_here")); /* context=all: the free's own stack */
    /* the live one is a segment with one block covering it */
    const cmh_segment *g = find_segment(&s, q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(g->size, 1000);
    CU_ASSERT_EQUAL(g->device, 0);
    CU_ASSERT_EQUAL(g->nblocks, 1);
    CU_ASSERT_EQUAL(s.blocks[g->first_block].addr, q);
    CU_ASSERT_EQUAL(s.blocks[g->first_block].size, 1000);
    CU_ASSERT_EQUAL(s.blocks[g->first_block].state, CMH_BLOCK_ACTIVE_ALLOCATED);
    CU_ASSERT(stack_names(&s, g->stack, "alloc_here"));
    CU_ASSERT_PTR_NULL(find_segment(&s, p));
    CU_ASSERT_EQUAL(s.pid, getpid());
    CU_ASSERT(s.nmodules > 0);
    CU_ASSERT(strstr(cmh_str(&s, s.cmdline), "test_recorder") != NULL);
    cmh_snapshot_free(&s);
    cuMemFree(q);
}

static void test_every_entry_point(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALLOC, 0);
    CUdeviceptr pitch, managed, as1, as2, ap1, ap2;
    size_t pitch_b;
    void *h1, *h2;
    CUstream st;
    CUmemoryPool pool;
    CU_ASSERT_EQUAL(cuStreamCreate(&st, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAllocPitch(&pitch, &pitch_b, 1000, 10, 4), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAllocAsync(&as1, 8192, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAllocAsync_ptsz(&as2, 8192, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAllocFromPoolAsync(&ap1, 4096, pool, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAllocFromPoolAsync_ptsz(&ap2, 4096, pool, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAllocHost(&h1, 5000), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemHostAlloc(&h2, 6000, 0), CUDA_SUCCESS);
    /* VMM: reserve, create, map twice, unmap one, release */
    CUdeviceptr va;
    CUmemGenericAllocationHandle mh;
    CUmemAllocationProp prop = vmm_prop(0);
    CU_ASSERT_EQUAL(cuMemAddressReserve(&va, 8 << 20, 0, 0, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemCreate(&mh, 4 << 20, &prop, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemMap(va, 2 << 20, 0, mh, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemMap(va + (2 << 20), 2 << 20, 0, mh, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemUnmap(va + (2 << 20), 2 << 20), CUDA_SUCCESS);

    cmh_snapshot s;
    dump_load(&s);
    const cmh_entry *e;
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, pitch));
    CU_ASSERT_EQUAL(e->kind, CMH_KIND_PITCH);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), (uint64_t)pitch_b * 10);
    CU_ASSERT_EQUAL(cmh_entry_requested(&s, e), 10000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, managed));
    CU_ASSERT_EQUAL(e->kind, CMH_KIND_MANAGED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, as1));
    CU_ASSERT_EQUAL(e->kind, CMH_KIND_ASYNC);
    CU_ASSERT_EQUAL(cmh_entry_stream(&s, e), (uint64_t)(uintptr_t)st);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, as2));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, ap1));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, ap2));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, -1, CMH_ACT_SEGMENT_ALLOC, (uint64_t)(uintptr_t)h1));
    CU_ASSERT_EQUAL(e->kind, CMH_KIND_HOST);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 5000);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, -1, CMH_ACT_SEGMENT_ALLOC, (uint64_t)(uintptr_t)h2));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, 0, CMH_ACT_SEGMENT_MAP, va));
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 2 << 20);
    CU_ASSERT_EQUAL(e->kind, CMH_KIND_VMM);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_MAP, va + (2 << 20)));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, 0, CMH_ACT_SEGMENT_UNMAP, va + (2 << 20)));
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 2 << 20);
    const cmh_segment *g = find_segment(&s, va);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(g->flags & CMH_SEG_EXPANDABLE);
    CU_ASSERT_PTR_NULL(find_segment(&s, va + (2 << 20)));
    cmh_snapshot_free(&s);

    CU_ASSERT_EQUAL(cuMemFree(pitch), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree(managed), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync(as1, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync_ptsz(as2, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync(ap1, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeAsync_ptsz(ap2, st), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeHost(h1), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFreeHost(h2), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemUnmap(va, 2 << 20), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemRelease(mh), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAddressFree(va, 8 << 20), CUDA_SUCCESS);

    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, as1));
    CU_ASSERT_EQUAL(cmh_entry_stream(&s, e), (uint64_t)(uintptr_t)st);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), 8192);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, as2));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, ap1));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, ap2));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, pitch));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, managed));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, -1, CMH_ACT_SEGMENT_FREE, (uint64_t)(uintptr_t)h1));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_UNMAP, va));
    /* context=alloc: a free carries the allocation's stack */
    const cmh_entry *fa = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, pitch), *ff = find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, pitch);
    CU_ASSERT(fa && ff && fa->stack == ff->stack && fa->stack != 0);
    CU_ASSERT_EQUAL(s.nsegments, 0);
    cmh_snapshot_free(&s);
    cuStreamDestroy(st);
}

static void test_failed_free_is_undone(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    CUdeviceptr p = alloc_here(4096);
    /* a free of an address the driver does not know fails and records nothing */
    CU_ASSERT_NOT_EQUAL(cuMemFree(p + 512), CUDA_SUCCESS);
    cmh_snapshot s;
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL(find_segment(&s, p));
    CU_ASSERT_PTR_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, p + 512));
    CU_ASSERT_EQUAL(s.stacks[0].count, 0);
    CU_ASSERT_EQUAL(s.nstacks, 1); /* context none: no stack at all */
    cmh_snapshot_free(&s);
    cuMemFree(p);
}

static void test_oom_capture(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 0);
    CUdeviceptr p;
    size_t free_before = 0, total = 0;
    cuMemGetInfo(&free_before, &total);
    CU_ASSERT_EQUAL(cuMemAlloc(&p, total * 2), CUDA_ERROR_OUT_OF_MEMORY);
    cmh_snapshot s;
    dump_load(&s);
    const cmh_trace *t = trace_of(&s, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(t->nentries >= 1);
    const cmh_entry *e = &s.entries[t->first_entry + t->nentries - 1];
    CU_ASSERT_EQUAL(e->action, CMH_ACT_OOM);
    CU_ASSERT_EQUAL(cmh_entry_size(&s, e), total * 2);
    CU_ASSERT_EQUAL(cmh_entry_addr(&s, e), free_before); /* device_free, as PyTorch's oom entry */
    cmh_snapshot_free(&s);
    cmh_device_stats st[4];
    CU_ASSERT(cmh_memory_stats(st, 4) >= 1);
    CU_ASSERT(st[0].num_ooms >= 1);
    /* the first OOM was dumped at once to the configured path (CUMEMHIST_OUTPUT=DIR/x.%p.cmh) */
    const char *pat = getenv("CUMEMHIST_OUTPUT");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pat);
    char out[512];
    const char *pp = strstr(pat, "%p");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pp);
    snprintf(out, sizeof out, "%.*s%ld%s", (int)(pp - pat), pat, (long)getpid(), pp + 2);
    CU_ASSERT_EQUAL(access(out, R_OK), 0);
    cmh_snapshot o;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_load(out, &o, err, sizeof err), CMH_OK);
    t = trace_of(&o, 0);
    CU_ASSERT(t && t->nentries && o.entries[t->first_entry + t->nentries - 1].action == CMH_ACT_OOM);
    cmh_snapshot_free(&o);
}

static void test_enabled_state_vs_all(void)
{
    set_opts(CMH_ENABLED_STATE, CMH_CONTEXT_STATE, 0);
    CUdeviceptr p = alloc_here(8192), q = alloc_here(4096);
    cuMemFree(q);
    cmh_snapshot s;
    dump_load(&s);
    const cmh_trace *t = trace_of(&s, 0);
    CU_ASSERT(!t || t->nentries == 0); /* state: live blocks only */
    const cmh_segment *g = find_segment(&s, p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(stack_names(&s, g->stack, "alloc_here")); /* with their stacks */
    CU_ASSERT_PTR_NULL(find_segment(&s, q));
    cmh_snapshot_free(&s);

    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_STATE, 0);
    q = alloc_here(4096);
    cuMemFree(q);
    dump_load(&s);
    const cmh_entry *e = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->stack, 0); /* context=state: trace entries carry no stack */
    cmh_snapshot_free(&s);

    set_opts(CMH_ENABLED_OFF, CMH_CONTEXT_NONE, 0);
    CUdeviceptr r = alloc_here(4096);
    cuMemFree(r);
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 0);
    dump_load(&s);
    CU_ASSERT_PTR_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, r));
    cmh_snapshot_free(&s);
    cuMemFree(p);
}

static void test_ring_wraps_and_counts_drops(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 100);
    /* a cleared history starts with the state of the pools seen so far (one sample each) */
    cmh_snapshot s;
    dump_load(&s);
    const cmh_trace *t = trace_of(&s, 0);
    uint32_t pools = t ? t->nentries : 0;
    for (uint32_t i = 0; i < pools; i++) CU_ASSERT_EQUAL(s.entries[t->first_entry + i].action, CMH_ACT_POOL_SAMPLE);
    cmh_snapshot_free(&s);
    CUdeviceptr ptrs[125];
    for (int i = 0; i < 125; i++) CU_ASSERT_EQUAL(cuMemAlloc(&ptrs[i], (size_t)(i + 1) * 512), CUDA_SUCCESS);
    for (int i = 0; i < 125; i++) cuMemFree(ptrs[i]);
    dump_load(&s);
    t = trace_of(&s, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nentries, 100);
    CU_ASSERT_EQUAL(t->dropped, 150 + pools);
    /* the newest 100 remain, oldest first: the frees of ptrs[25..124] */
    for (uint32_t i = 0; i < t->nentries; i++) {
        const cmh_entry *e = &s.entries[t->first_entry + i];
        CU_ASSERT_EQUAL(e->action, CMH_ACT_SEGMENT_FREE);
        CU_ASSERT_EQUAL(cmh_entry_addr(&s, e), ptrs[25 + i]);
        CU_ASSERT_EQUAL(cmh_entry_size(&s, e), (uint64_t)(26 + i) * 512);
    }
    cmh_snapshot_free(&s);
    /* shrinking keeps the newest */
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
}

__attribute__((noinline)) static void same_site(CUdeviceptr *p) { CU_ASSERT_EQUAL(cuMemAlloc(p, 4096), CUDA_SUCCESS); }

static void test_stacks_interned(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_ALLOC, 0);
    CUdeviceptr p[50];
    for (int i = 0; i < 50; i++) same_site(&p[i]);
    cmh_snapshot s;
    dump_load(&s);
    uint32_t stack = 0;
    for (int i = 0; i < 50; i++) {
        const cmh_entry *e = find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, p[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        if (i == 0) stack = e->stack;
        CU_ASSERT_EQUAL(e->stack, stack);
    }
    CU_ASSERT(stack_names(&s, stack, "same_site"));
    /* innermost frame first: the call site, not the recorder */
    const cmh_stack *st = &s.stacks[stack];
    CU_ASSERT_STRING_EQUAL(cmh_str(&s, s.frames[s.stack_frames[st->first]].name), "same_site");
    /* every distinct frame stored once */
    for (uint32_t i = 0; i < s.nframes; i++)
        for (uint32_t j = i + 1; j < s.nframes; j++) CU_ASSERT_NOT_EQUAL(s.frames[i].pc, s.frames[j].pc);
    cmh_snapshot_free(&s);
    for (int i = 0; i < 50; i++) cuMemFree(p[i]);
}

#define NTHREADS 8
#define PER_THREAD 10000

static CUcontext g_ctx;

static void *hammer(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(g_ctx);
    for (int i = 0; i < PER_THREAD; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 512 * (size_t)(1 + i % 7)) != CUDA_SUCCESS) return (void *)1;
        if (cuMemFree(p) != CUDA_SUCCESS) return (void *)1;
    }
    return NULL;
}

static void test_threads_lose_nothing(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < NTHREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        CU_ASSERT_PTR_NULL(r);
    }
    cmh_snapshot s;
    dump_load(&s);
    const cmh_trace *tr = trace_of(&s, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    uint32_t pools = 0;
    while (pools < tr->nentries && s.entries[tr->first_entry + pools].action == CMH_ACT_POOL_SAMPLE) pools++;
    CU_ASSERT_EQUAL(tr->nentries - pools, 2 * NTHREADS * PER_THREAD);
    CU_ASSERT_EQUAL(tr->dropped, 0);
    /* in trace order each address alternates alloc, free: nothing lost, duplicated or reordered */
    uint32_t allocs = 0, frees = 0, bad = 0;
    enum { H = 1 << 16 };
    static struct {
        uint64_t addr;
        int live;
    } tab[H];
    memset(tab, 0, sizeof tab);
    for (uint32_t i = 0; i < tr->nentries; i++) {
        const cmh_entry *e = &s.entries[tr->first_entry + i];
        uint32_t j = (uint32_t)((cmh_entry_addr(&s, e) >> 9) * 2654435761u) & (H - 1);
        while (tab[j].addr && tab[j].addr != cmh_entry_addr(&s, e)) j = (j + 1) & (H - 1);
        tab[j].addr = cmh_entry_addr(&s, e);
        if (e->action == CMH_ACT_SEGMENT_ALLOC) {
            allocs++;
            bad += tab[j].live;
            tab[j].live = 1;
        } else if (e->action == CMH_ACT_SEGMENT_FREE) {
            frees++;
            bad += !tab[j].live;
            tab[j].live = 0;
        }
    }
    CU_ASSERT_EQUAL(allocs, NTHREADS * PER_THREAD);
    CU_ASSERT_EQUAL(frees, NTHREADS * PER_THREAD);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(cmh_lost_events(), 0);
    cmh_snapshot_free(&s);
}

static void test_three_devices(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    int n = 0;
    cuDeviceGetCount(&n);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CUdeviceptr p[3];
    CUcontext ctx[3];
    for (int d = 0; d < 3; d++) {
        CU_ASSERT_EQUAL(cuDevicePrimaryCtxRetain(&ctx[d], d), CUDA_SUCCESS);
        cuCtxSetCurrent(ctx[d]);
        CU_ASSERT_EQUAL(cuMemAlloc(&p[d], (size_t)(d + 1) << 20), CUDA_SUCCESS);
    }
    cuCtxSetCurrent(g_ctx);
    cmh_snapshot s;
    dump_load(&s);
    for (int d = 0; d < 3; d++) {
        const cmh_entry *e = find_entry(&s, d, CMH_ACT_SEGMENT_ALLOC, p[d]);
        CU_ASSERT_PTR_NOT_NULL(e);
        const cmh_segment *g = find_segment(&s, p[d]);
        CU_ASSERT(g && g->device == d && g->size == ((uint64_t)(d + 1) << 20));
    }
    cmh_snapshot_free(&s);
    cmh_device_stats st[8];
    int nd = cmh_memory_stats(st, 8);
    CU_ASSERT(nd >= 3);
    for (int d = 0; d < 3; d++) cuMemFree(p[d]);
}

/* an allocator above the driver: managed segment, blocks in three states, marks and a range */
static void test_fork(void)
{
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    const char *pat = getenv("CUMEMHIST_OUTPUT");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pat);
    CUdeviceptr before = alloc_here(3 << 20), in_child = 0;
    int fds[2];
    CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, 5 << 20) != CUDA_SUCCESS) _exit(3);
        cmh_mark("child");
        if (write(fds[1], &p, sizeof p) != sizeof p) _exit(4);
        exit(0); /* the exit dump writes the child's file */
    }
    close(fds[1]);
    CU_ASSERT_EQUAL(read(fds[0], &in_child, sizeof in_child), (ssize_t)sizeof in_child);
    close(fds[0]);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* the child's file: its pid in the name, its allocation, none of the parent's */
    char path[512], err[512];
    const char *pp = strstr(pat, "%p");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pp);
    snprintf(path, sizeof path, "%.*s%d%s", (int)(pp - pat), pat, (int)pid, pp + 2);
    cmh_snapshot s;
    int rc = cmh_snapshot_load(path, &s, err, sizeof err);
    if (rc != CMH_OK) fprintf(stderr, "child's snapshot %s: %s\n", path, err);
    CU_ASSERT_EQUAL_FATAL(rc, CMH_OK);
    CU_ASSERT_EQUAL(s.pid, (int64_t)pid);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, in_child));
    CU_ASSERT_PTR_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, before));
    CU_ASSERT_PTR_NOT_NULL(find_segment(&s, in_child));
    CU_ASSERT_PTR_NULL(find_segment(&s, before));
    cmh_snapshot_free(&s);
    unlink(path);

    /* the parent's history: its own allocation, nothing of the child's */
    dump_load(&s);
    CU_ASSERT_EQUAL(s.pid, (int64_t)getpid());
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, before));
    CU_ASSERT_PTR_NOT_NULL(find_segment(&s, before));
    CU_ASSERT(in_child == before || !find_segment(&s, in_child));
    const cmh_trace *t = trace_of(&s, 0);
    int child_marks = 0;
    for (uint32_t i = 0; t && i < t->nentries; i++)
        child_marks += s.entries[t->first_entry + i].action == CMH_ACT_MARK &&
                       strcmp(cmh_str(&s, cmh_entry_name(&s, &s.entries[t->first_entry + i])), "child") == 0;
    CU_ASSERT_EQUAL(child_marks, 0);
    cmh_snapshot_free(&s);
    cuMemFree(before);
}

static void test_cudart_style_lookup(void)
{
    /* What cudart does: dlopen the driver locally, fetch cuGetProcAddress_v2 with dlsym, ask it
     * for itself, then for base names with flags 0 and PER_THREAD_DEFAULT_STREAM. */
    set_opts(CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    typedef CUresult (*gpa1_t)(const char *, void **, int, cuuint64_t);
    gpa2_t gpa = (gpa2_t)dlsym(h, "cuGetProcAddress_v2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gpa);
    CU_ASSERT_PTR_EQUAL((void *)gpa, dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2")); /* our wrapper */
    void *self = NULL, *self1 = NULL;
    CUdriverProcAddressQueryResult qs;
    CU_ASSERT_EQUAL(gpa("cuGetProcAddress", &self, 12000, 0, &qs), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(self, (void *)gpa);
    CU_ASSERT_EQUAL(gpa("cuGetProcAddress", &self1, 11030, 0, &qs), CUDA_SUCCESS);
    gpa1_t gpa1 = (gpa1_t)self1;
    CU_ASSERT_PTR_NOT_NULL_FATAL(gpa1);
    CU_ASSERT_PTR_EQUAL(self1, dlsym(RTLD_DEFAULT, "cuGetProcAddress"));

    CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
    CUresult (*fr)(CUdeviceptr) = NULL;
    CUresult (*aa0)(CUdeviceptr *, size_t, CUstream) = NULL, (*aa2)(CUdeviceptr *, size_t, CUstream) = NULL;
    CUresult (*fa0)(CUdeviceptr, CUstream) = NULL, (*fa2)(CUdeviceptr, CUstream) = NULL;
    CU_ASSERT_EQUAL(gpa("cuMemAlloc", (void **)&alloc, 3020, 0, &qs), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(gpa1("cuMemFree", (void **)&fr, 3020, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(gpa("cuMemAllocAsync", (void **)&aa0, 11020, 0, &qs), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(gpa("cuMemAllocAsync", (void **)&aa2, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &qs),
                    CUDA_SUCCESS);
    CU_ASSERT_EQUAL(gpa("cuMemFreeAsync", (void **)&fa0, 11020, 0, &qs), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(gpa("cuMemFreeAsync", (void **)&fa2, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &qs),
                    CUDA_SUCCESS);
    /* each variant maps to the wrapper of that variant */
    CU_ASSERT_PTR_EQUAL((void *)alloc, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    CU_ASSERT_PTR_EQUAL((void *)aa0, dlsym(RTLD_DEFAULT, "cuMemAllocAsync"));
    CU_ASSERT_PTR_EQUAL((void *)aa2, dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
    CU_ASSERT_PTR_EQUAL((void *)fa2, dlsym(RTLD_DEFAULT, "cuMemFreeAsync_ptsz"));
    /* a handle lookup of a variant name also gets the wrapper */
    CU_ASSERT_PTR_EQUAL(dlsym(h, "cuMemAlloc_v2"), (void *)alloc);
    /* unknown names stay NULL, untouched names pass through */
    void *none = (void *)1;
    CU_ASSERT_EQUAL(gpa("cuNoSuchThing", &none, 12000, 0, &qs), CUDA_SUCCESS);
    CU_ASSERT_PTR_NULL(none);
    void *init = NULL;
    CU_ASSERT_EQUAL(gpa("cuInit", &init, 12000, 0, &qs), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(init, dlsym(h, "cuInit"));

    CUdeviceptr a, b, c;
    CU_ASSERT_EQUAL(alloc(&a, 12345), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(aa0(&b, 4096, NULL), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(aa2(&c, 4096, NULL), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(fr(a), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(fa0(b, NULL), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(fa2(c, NULL), CUDA_SUCCESS);
    cmh_snapshot s;
    dump_load(&s);
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, a));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, a));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, b));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, b));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_ALLOC, c));
    CU_ASSERT_PTR_NOT_NULL(find_entry(&s, 0, CMH_ACT_SEGMENT_FREE, c));
    cmh_snapshot_free(&s);
    dlclose(h);
}

int main(void)
{
    /* the recorder must be in the process (LD_PRELOAD, or this binary links it) */
    if (recorder_test_init(&g_ctx)) return 2;
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("recorder", NULL, NULL);
    CMH_ADD_TEST(s, test_linear_alloc_free);
    CMH_ADD_TEST(s, test_every_entry_point);
    CMH_ADD_TEST(s, test_failed_free_is_undone);
    CMH_ADD_TEST(s, test_oom_capture);
    CMH_ADD_TEST(s, test_enabled_state_vs_all);
    CMH_ADD_TEST(s, test_ring_wraps_and_counts_drops);
    CMH_ADD_TEST(s, test_stacks_interned);
    CMH_ADD_TEST(s, test_threads_lose_nothing);
    CMH_ADD_TEST(s, test_three_devices);
    CMH_ADD_TEST(s, test_fork);
    CMH_ADD_TEST(s, test_cudart_style_lookup);
    int rc = cmh_test_main();
    recorder_test_cleanup();
    return rc;
}
