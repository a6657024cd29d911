/*
 * pt_rules.h - PyTorch's CUDACachingAllocator rules (c10/cuda/CUDACachingAllocator.cpp): how a
 * request is rounded, which pool it goes to, when a free block is split, how large a new
 * segment is.  Written once here, used by the replay (sizing a PyTorch trace's blocks the way
 * the allocator did) and by the what-if model.  Private to analyzer/.  docs/PYTORCH.md lists
 * the constants and where they come from.
 */
#ifndef CMH_PT_RULES_H
#define CMH_PT_RULES_H

#include <stdint.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"

#define CMH_PT_MIN_BLOCK 512ull               /* kMinBlockSize */
#define CMH_PT_SMALL_SIZE (1ull << 20)        /* kSmallSize: blocks up to it are small-pool */
#define CMH_PT_SMALL_BUFFER (2ull << 20)      /* kSmallBuffer: a small-pool segment */
#define CMH_PT_MIN_LARGE_ALLOC (10ull << 20)  /* kMinLargeAlloc */
#define CMH_PT_LARGE_BUFFER (20ull << 20)     /* kLargeBuffer */
#define CMH_PT_ROUND_LARGE (2ull << 20)       /* kRoundLarge */

/* torch_npu's NPUCachingAllocator (Ascend) adds 32 bytes to every request before it rounds it
 * (its round_size(): size + 32, then 512-byte steps), the rest of its rules being CUDA's: a
 * request of 1024 bytes is a 1536-byte block there, 1024 on CUDA. */
#define CMH_PT_NPU_PAD ((uint64_t)CMH_ALLOCATOR_NPU_PAD)

typedef struct cmh_pt_rules {
    int div[16];        /* roundup_power2_divisions per power-of-two MiB bucket (0: none) */
    uint64_t max_split; /* max_split_size in bytes, 0 = unlimited */
    uint64_t pad;       /* added to each request before rounding: CMH_PT_NPU_PAD on torch_npu, 0 on CUDA */
} cmh_pt_rules;

/* A snapshot's allocator setting as text (its allocator_settings), or NULL. */
const char *cmh_pt_setting(const cmh_snapshot *s, const char *key);
/* The rules in force for a snapshot (its allocator_settings; defaults where absent; the NPU's
 * pad on an NPU snapshot: cmh_allocator_pad). */
void cmh_pt_rules_from_snapshot(const cmh_snapshot *s, cmh_pt_rules *r);
/* Parse roundup_power2_divisions as kept by pickle_model.c ({"1": 0, "2": 4, ...}) into r->div. */
void cmh_pt_parse_divisions(cmh_pt_rules *r, const char *text);

/* round_size(): the request plus r->pad; below 512 -> 512; with d > 1 divisions and size > 512 * d, the next 1/d step
 * between powers of two; else a multiple of 512. */
uint64_t cmh_pt_round(const cmh_pt_rules *r, uint64_t size);
/* should_split(): does carving `rounded` out of a free block leave a remainder worth keeping? */
int cmh_pt_should_split(const cmh_pt_rules *r, int pool, int expandable, uint64_t rounded, uint64_t remaining);
/* get_allocation_size(): the segment cudaMalloc'ed for a rounded request of a pool. */
uint64_t cmh_pt_segment_size(uint64_t rounded);

#endif
