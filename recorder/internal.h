/*
 * internal.h - what the recorder's files share.  Nothing here is public API.
 *
 * Layout of the recorder (one file, one idea):
 *   driver.c   finds the real driver and the real dlsym; the C side of the dlsym interposer
 *   hooks.c    the exported wrappers and the cuGetProcAddress variant mapping
 *   history.c  per-device rings of trace entries, live segments, counters
 *   stacks.c   unw_backtrace into interned stacks
 *   symbols.c  symbolization at dump (dladdr, ELF .symtab) and the module map
 *   config.c   options from the API and CUMEMHIST_* variables, output path patterns
 *   dump.c     snapshots: building the model, atomic writes, triggers (API, exit, SIGUSR1, OOM)
 */
#ifndef CMH_RECORDER_INTERNAL_H
#define CMH_RECORDER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cumemhist/recorder.h"
#include "cumemhist/snapshot.h"

#define CMH_HIDDEN __attribute__((visibility("hidden")))
#define CMH_LIKELY(x) __builtin_expect(!!(x), 1)
#define CMH_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define CMH_MAX_DEVICES 64
#define CMH_HOST_SLOT CMH_MAX_DEVICES /* pinned host memory, device -1 in snapshots */
#define CMH_MAX_FRAMES 128

/* ---- config.c ---- */
typedef struct cmh_config {
    int enabled; /* cmh_enabled */
    int context; /* cmh_context */
    uint64_t max_entries;
    int max_frames;
    char output[4096]; /* path pattern */
    int debug;
    int kernels; /* load the CUPTI sidecar */
} cmh_config;

CMH_HIDDEN extern cmh_config cmh_cfg;
/* Hot-path copies of cmh_cfg.enabled / context, read without a lock. */
CMH_HIDDEN extern volatile int cmh_enabled_now;
CMH_HIDDEN extern volatile int cmh_context_now;
CMH_HIDDEN void cmh_config_from_env(void);
/* Expand %p / %r and the pid rule for fixed paths into out. */
CMH_HIDDEN int cmh_config_output_path(const char *pattern, char *out, size_t outlen);
CMH_HIDDEN void cmh_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- history.c ---- */
typedef struct cmh_rec_entry {
    int64_t time_ns; /* raw ticks until export (cmh_ticks_to_ns) */
    uint64_t addr, size, requested, stream;
    uint32_t stack;
    uint8_t action, flags, kind;
} cmh_rec_entry;

typedef struct cmh_live {
    uint64_t addr, size, requested, stream;
    int64_t time_ns; /* raw ticks */
    uint32_t stack;
    int16_t device;
    uint8_t kind, flags; /* segments: CMH_EF_*; reported blocks: the block state */
} cmh_live;

CMH_HIDDEN int64_t cmh_now_ns(void);
#if defined(__x86_64__)
#include <x86intrin.h>
static inline int64_t cmh_now_ticks(void) { return (int64_t)__rdtsc(); }
#else
static inline int64_t cmh_now_ticks(void) { return cmh_now_ns(); }
#endif
CMH_HIDDEN int64_t cmh_ticks_to_ns(int64_t ticks, int64_t now_ticks, int64_t now_ns);
/* A driver allocation succeeded. */
CMH_HIDDEN void cmh_hist_segment_alloc(int device, int kind, uint64_t addr, uint64_t size, uint64_t requested,
                                       uint64_t stream, int action);
/* Before a free reaches the driver: forget the segment and record the free.  Returns 1 and
 * fills *was if the address was live.  If the driver then refuses, cmh_hist_free_undo. */
CMH_HIDDEN int cmh_hist_segment_free(uint64_t addr, uint64_t stream, int action, cmh_live *was);
CMH_HIDDEN void cmh_hist_free_undo(const cmh_live *was);
/* Unmap [addr, addr+size): every mapped range inside it is recorded as segment_unmap. */
CMH_HIDDEN void cmh_hist_unmap(uint64_t addr, uint64_t size);
CMH_HIDDEN void cmh_hist_oom(int device, uint64_t size, uint64_t stream, uint64_t device_free);
/* The block API (an allocator above the driver reporting its blocks); see recorder.h. */
CMH_HIDDEN int cmh_hist_segment_managed(uint64_t addr);
CMH_HIDDEN int cmh_hist_block_alloc(int device, uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream);
CMH_HIDDEN int cmh_hist_block_free_requested(uint64_t addr);
CMH_HIDDEN int cmh_hist_block_free_completed(uint64_t addr);
/* stage: 0 a point mark, 1 a range starts, 2 it ends */
CMH_HIDDEN int cmh_hist_mark(int device, const char *name, int stage);
/* a stream-ordered pool's reserved and used bytes; slack_delta = change of reserved - used */
CMH_HIDDEN int cmh_vmm_reservation(uint64_t addr, uint64_t *lo, uint64_t *hi); /* hooks.c */
CMH_HIDDEN void cmh_pools_resample(void);         /* hooks.c: record every known pool again */
CMH_HIDDEN void cmh_pools_reset_after_fork(void);
CMH_HIDDEN void cmh_hist_pool_sample(int device, uint64_t pool, uint64_t reserved, uint64_t used, int64_t slack_delta);
CMH_HIDDEN void cmh_hist_clear(void);
CMH_HIDDEN void cmh_hist_reset_after_fork(void);
CMH_HIDDEN void cmh_hist_atfork_prepare(void);
CMH_HIDDEN void cmh_hist_atfork_parent(void);
CMH_HIDDEN void cmh_hist_set_capacity(uint64_t max_entries);
/* For the dump: copy rings and live segments into the model under the locks. */
CMH_HIDDEN int cmh_hist_export(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t rec_stack, void *), void *arg);
CMH_HIDDEN int cmh_hist_stats(cmh_device_stats *out, int cap);
CMH_HIDDEN extern volatile int cmh_touched; /* the process used a hooked entry point */
CMH_HIDDEN extern uint64_t cmh_lost;       /* events the recorder could not keep */

/* ---- stacks.c ---- */
/* Capture and intern the current stack; 0 = none (disabled, or the recorder is out of room). */
CMH_HIDDEN uint32_t cmh_stack_capture(void);
/* Walk the interned stack: returns the frame count and sets *pcs (stable while the process runs). */
CMH_HIDDEN uint32_t cmh_stack_get(uint32_t id, const uintptr_t **pcs);
CMH_HIDDEN void cmh_stacks_init(void);
CMH_HIDDEN void cmh_stacks_atfork_prepare(void);
CMH_HIDDEN void cmh_stacks_atfork_parent(void);
CMH_HIDDEN void cmh_stacks_atfork_child(void);

/* ---- symbols.c ---- */
/* Add frames and modules for a list of PCs to the model: out_ids[i] = frame id of pcs[i]. */
typedef struct cmh_symbolizer cmh_symbolizer;
CMH_HIDDEN cmh_symbolizer *cmh_symbolizer_new(cmh_snapshot *s);
CMH_HIDDEN int cmh_symbolize(cmh_symbolizer *z, uintptr_t pc, int is_return_address, uint32_t *frame_id);
CMH_HIDDEN void cmh_symbolizer_free(cmh_symbolizer *z);
/* A C++ name demangled (malloc'ed), or NULL when it is not one or no demangler is at hand. */
CMH_HIDDEN char *cmh_symbolizer_demangle(cmh_symbolizer *z, const char *name);

/* ---- kernels.c ---- */
CMH_HIDDEN void cmh_kernels_start(void);
CMH_HIDDEN int cmh_kernels_export(cmh_snapshot *s, cmh_symbolizer *z);

/* ---- driver.c ---- */
CMH_HIDDEN extern void *(*cmh_real_dlsym)(void *, const char *);
CMH_HIDDEN void *cmh_dlsym_resolve(void);
CMH_HIDDEN void *cmh_driver_handle(void);
CMH_HIDDEN void *cmh_driver_sym(const char *name); /* from the real driver, never from us */
CMH_HIDDEN int cmh_in_own_module(const void *p);

/* ---- hooks.c ---- */
CMH_HIDDEN void *cmh_hook_for_symbol(const char *name, void *real);
CMH_HIDDEN int cmh_current_device(void);
CMH_HIDDEN uint64_t cmh_device_free_bytes(void);

/* ---- dump.c ---- */
CMH_HIDDEN void cmh_dump_on_oom(void);
CMH_HIDDEN void cmh_first_touch(void);

#endif
