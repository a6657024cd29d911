/*
 * cachealloc.h - a small best-fit caching allocator on the CUDA driver API, the way PyTorch's
 * CUDACachingAllocator works: small (<= 1 MiB) and large pools, sizes rounded to 512 bytes,
 * 2 MiB segments for small blocks, 20 MiB for large ones under 10 MiB, blocks split when the
 * remainder is worth keeping and merged with free neighbours, reuse per stream, and on
 * cuMemAlloc failure the unsplit cached segments released and the allocation retried.
 *
 * It reports its blocks to cumemhist through <cumemhist/blocks.h>, so a recording shows
 * allocated memory inside reserved segments; without the recorder the calls do nothing.
 * Copy it as a model for your own allocator.
 */
#ifndef CACHEALLOC_H
#define CACHEALLOC_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ca_stats {
    uint64_t allocated, requested, reserved; /* bytes now */
    uint64_t segments, blocks;
} ca_stats;

/* 0 on failure (the driver's error in *err when err is given). */
CUdeviceptr ca_malloc(size_t size, CUstream stream, CUresult *err);
void ca_free(CUdeviceptr p);
void ca_empty_cache(void);
void ca_get_stats(ca_stats *s);

#endif
