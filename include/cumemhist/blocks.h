/*
 * cumemhist/blocks.h - the block API and annotations, callable unconditionally.
 *
 * Every recorder entry point is referenced weakly: when libcumemhist is not in the process
 * (neither preloaded nor linked), each CMH_* call below is a load and a branch, and does nothing.
 * Allocators and applications include this header and need not link anything.
 *
 *   CMH_SEGMENT_MANAGED(ptr)  CMH_BLOCK_ALLOC(ptr, size, requested, stream)
 *   CMH_BLOCK_FREE_REQUESTED(ptr)  CMH_BLOCK_FREE_COMPLETED(ptr)
 *   CMH_MARK(name)  CMH_RANGE_PUSH(name)  CMH_RANGE_POP()
 */
#ifndef CUMEMHIST_BLOCKS_H
#define CUMEMHIST_BLOCKS_H

#include "recorder.h"

#pragma weak cmh_segment_managed
#pragma weak cmh_block_alloc
#pragma weak cmh_block_free_requested
#pragma weak cmh_block_free_completed
#pragma weak cmh_mark
#pragma weak cmh_range_push
#pragma weak cmh_range_pop
#pragma weak cmh_thread_name

#define CMH_IF_LOADED(fn, args) ((fn) ? (void)fn args : (void)0)
#define CMH_SEGMENT_MANAGED(ptr) CMH_IF_LOADED(cmh_segment_managed, ((uint64_t)(ptr)))
#define CMH_BLOCK_ALLOC(ptr, size, requested, stream)                                                            \
    CMH_IF_LOADED(cmh_block_alloc, ((uint64_t)(ptr), (uint64_t)(size), (uint64_t)(requested), (uint64_t)(stream)))
#define CMH_BLOCK_FREE_REQUESTED(ptr) CMH_IF_LOADED(cmh_block_free_requested, ((uint64_t)(ptr)))
#define CMH_BLOCK_FREE_COMPLETED(ptr) CMH_IF_LOADED(cmh_block_free_completed, ((uint64_t)(ptr)))
#define CMH_MARK(name) CMH_IF_LOADED(cmh_mark, (name))
#define CMH_RANGE_PUSH(name) CMH_IF_LOADED(cmh_range_push, (name))
#define CMH_RANGE_POP() CMH_IF_LOADED(cmh_range_pop, ())
#define CMH_THREAD_NAME(name) CMH_IF_LOADED(cmh_thread_name, (name))

#endif
