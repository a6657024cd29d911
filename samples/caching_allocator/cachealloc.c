/*
 * cachealloc.c - see cachealloc.h.  Single-threaded on purpose: the model to copy, not a
 * production allocator (guard it with a mutex to share it between threads).
 */
#include "cachealloc.h"

#include <stdlib.h>

#include "cumemhist/blocks.h"

#define MIN_BLOCK 512u
#define SMALL_SIZE (1u << 20)
#define SMALL_BUFFER (2u << 20)
#define LARGE_BUFFER (20u << 20)
#define MIN_LARGE_ALLOC (10u << 20)
#define ROUND_LARGE (2u << 20)

typedef struct block {
    CUdeviceptr ptr;
    size_t size, requested;
    CUstream stream;
    int allocated, small;
    struct block *prev, *next;      /* neighbours in the segment, address order */
    struct block *free_next;        /* the pool's free list */
} block;

static block *g_free[2]; /* [small] free lists */
static block **g_live;   /* allocated blocks, by pointer (open addressing) */
static size_t g_live_cap, g_live_n;
static ca_stats g_stats;

static size_t round_size(size_t n) { return n < MIN_BLOCK ? MIN_BLOCK : (n + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK; }

static size_t segment_size(size_t n)
{
    if (n <= SMALL_SIZE) return SMALL_BUFFER;
    if (n < MIN_LARGE_ALLOC) return LARGE_BUFFER;
    return (n + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

static size_t slot(CUdeviceptr p, size_t cap) { return (size_t)((p >> 9) * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1); }

static void live_put(block *b)
{
    if ((g_live_n + 1) * 2 > g_live_cap) {
        size_t nc = g_live_cap ? g_live_cap * 2 : 1024;
        block **n = calloc(nc, sizeof *n);
        if (!n) abort();
        for (size_t i = 0; i < g_live_cap; i++)
            if (g_live[i]) {
                size_t j = slot(g_live[i]->ptr, nc);
                while (n[j]) j = (j + 1) & (nc - 1);
                n[j] = g_live[i];
            }
        free(g_live);
        g_live = n;
        g_live_cap = nc;
    }
    size_t j = slot(b->ptr, g_live_cap);
    while (g_live[j]) j = (j + 1) & (g_live_cap - 1);
    g_live[j] = b;
    g_live_n++;
}

static block *live_take(CUdeviceptr p)
{
    if (!g_live_cap) return NULL;
    size_t m = g_live_cap - 1, j = slot(p, g_live_cap);
    for (; g_live[j]; j = (j + 1) & m)
        if (g_live[j]->ptr == p) break;
    block *b = g_live[j];
    if (!b) return NULL;
    g_live[j] = NULL;
    g_live_n--;
    for (size_t k = (j + 1) & m; g_live[k]; k = (k + 1) & m) { /* backward-shift deletion */
        size_t home = slot(g_live[k]->ptr, g_live_cap);
        if (((k - home) & m) >= ((k - j) & m)) {
            g_live[j] = g_live[k];
            g_live[k] = NULL;
            j = k;
        }
    }
    return b;
}

static void free_list_remove(block *b)
{
    for (block **pp = &g_free[b->small]; *pp; pp = &(*pp)->free_next)
        if (*pp == b) {
            *pp = b->free_next;
            return;
        }
}

static void free_list_add(block *b)
{
    b->free_next = g_free[b->small];
    g_free[b->small] = b;
}

/* best fit: the smallest free block of this pool and stream that is large enough */
static block *find_free(size_t size, int small, CUstream stream)
{
    block *best = NULL;
    for (block *b = g_free[small]; b; b = b->free_next)
        if (b->stream == stream && b->size >= size && (!best || b->size < best->size ||
                                                       (b->size == best->size && b->ptr < best->ptr)))
            best = b;
    return best;
}

static block *new_segment(size_t size, int small, CUstream stream, CUresult *err)
{
    size_t seg = segment_size(size);
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, seg);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) { /* give back what the cache holds, then try again */
        ca_empty_cache();
        r = cuMemAlloc(&p, seg);
    }
    if (r != CUDA_SUCCESS) {
        if (err) *err = r;
        return NULL;
    }
    CMH_SEGMENT_MANAGED(p); /* this segment holds the blocks reported below */
    block *b = calloc(1, sizeof *b);
    if (!b) abort();
    b->ptr = p;
    b->size = seg;
    b->stream = stream;
    b->small = small;
    g_stats.reserved += seg;
    g_stats.segments++;
    return b;
}

CUdeviceptr ca_malloc(size_t n, CUstream stream, CUresult *err)
{
    size_t size = round_size(n);
    int small = size <= SMALL_SIZE;
    block *b = find_free(size, small, stream);
    if (b) free_list_remove(b);
    else if (!(b = new_segment(size, small, stream, err))) return 0;
    size_t remaining = b->size - size;
    if (small ? remaining >= MIN_BLOCK : remaining > SMALL_SIZE) { /* split: the rest stays free */
        block *rest = calloc(1, sizeof *rest);
        if (!rest) abort();
        rest->ptr = b->ptr + size;
        rest->size = remaining;
        rest->stream = stream;
        rest->small = small;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        free_list_add(rest);
    }
    b->allocated = 1;
    b->requested = n;
    live_put(b);
    g_stats.allocated += b->size;
    g_stats.requested += n;
    g_stats.blocks++;
    CMH_BLOCK_ALLOC(b->ptr, b->size, n, (uintptr_t)stream);
    return b->ptr;
}

static void merge(block *dst, block *src) /* src follows dst and is free */
{
    free_list_remove(src);
    dst->size += src->size;
    dst->next = src->next;
    if (src->next) src->next->prev = dst;
    free(src);
}

void ca_free(CUdeviceptr p)
{
    block *b = live_take(p);
    if (!b) return;
    CMH_BLOCK_FREE_COMPLETED(p); /* no stream work outstanding here: freed at once */
    g_stats.allocated -= b->size;
    g_stats.requested -= b->requested;
    g_stats.blocks--;
    b->allocated = 0;
    if (b->next && !b->next->allocated) merge(b, b->next);
    if (b->prev && !b->prev->allocated) {
        block *prev = b->prev;
        merge(prev, b);
        return; /* prev is already on the free list */
    }
    free_list_add(b);
}

/* Release every cached segment that is entirely free (one unsplit block). */
void ca_empty_cache(void)
{
    for (int small = 0; small < 2; small++)
        for (block **pp = &g_free[small]; *pp;) {
            block *b = *pp;
            if (!b->prev && !b->next) {
                *pp = b->free_next;
                cuMemFree(b->ptr);
                g_stats.reserved -= b->size;
                g_stats.segments--;
                free(b);
            } else {
                pp = &b->free_next;
            }
        }
}

void ca_get_stats(ca_stats *s) { *s = g_stats; }
