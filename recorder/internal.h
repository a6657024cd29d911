/*
 * internal.h - what the recorder's files share.  Nothing here is public API.
 *
 * Layout of the recorder (one file, one idea):
 *   driver.c   finds the real driver and the real dlsym; the C side of the dlsym interposer
 *   hooks.c    the exported wrappers and the cuGetProcAddress variant mapping
 *   pools.c    stream-ordered pools: which pools exist, their reserved and used bytes
 *   vmm.c      VMM: handles, address reservations, the mapped ranges and their unmapping
 *   history.c  per-device rings of trace entries, the live segments, the counters
 *   livetab.c  the sharded live table (address -> record) that segments and blocks use
 *   blocks.c   blocks an allocator above the driver reports (the block API's state)
 *   marks.c    names of marks and ranges, and the ranges as annotations
 *   stacks.c   stacks captured (the walk below, else libunwind) and interned
 *   unwind.c   the recorder's own stack walk: .eh_frame rules per PC, walks remembered
 *   pystack.c  the Python frames of the allocating thread, as pseudo PCs in its stack
 *   pystack_nogil.c  the same frames of a thread without the GIL, read by the layout
 *   symbols.c  symbolization at dump (ELF .symtab, .dynsym, dladdr) and the module map
 *   export.c   the recorder's state as a snapshot model
 *   dump.c     one snapshot: the model built, symbolized, written atomically
 *   process.c  the process's life: start-up, signals, the helper thread, fork, exit
 *   api.c      the public C API (include/cumemhist/recorder.h)
 *   config.c   options from the API and CUMEMHIST_* variables, output path patterns
 *   kernels.c  the CUPTI sidecar's records (recorder/cupti/)
 * The recorder contract (what a hook may and may not do) is docs/RECORDER.md.
 */
#ifndef CMH_RECORDER_INTERNAL_H
#define CMH_RECORDER_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "cumemhist/recorder.h"
#include "cumemhist/snapshot.h"
#include "lock.h"

#define CMH_HIDDEN __attribute__((visibility("hidden")))
#define CMH_EXPORT __attribute__((visibility("default")))
#define CMH_LIKELY(x) __builtin_expect(!!(x), 1)
/* How far ahead of its store an append asks for the line it will write (history.c's ring slots,
 * flight.c's records): both are appended in order into pages no core has cached (the kernel, or
 * the helper, made them), and without it the first store to each line waited for the line at the
 * next locked instruction (a claim, a lock, the driver's own mutex), some 10 ns a recorded pair
 * (bench_hot none; the same from 256 to 1024 bytes ahead).  A prefetch never faults: one past a
 * mapping's end, or into a page not made yet, is dropped. */
#define CMH_PREFETCH_AHEAD 512
#define CMH_PREFETCH_W(p) __builtin_prefetch((const char *)(p) + CMH_PREFETCH_AHEAD, 1, 3)
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

/* Written under cmh_cfg_lock (cmh_config_apply); the hooks read only the two hot copies below,
 * atomically, and the rest is read where a stale value is harmless (a dump's metadata). */
CMH_HIDDEN extern cmh_config cmh_cfg;
CMH_HIDDEN extern int cmh_enabled_now;
CMH_HIDDEN extern int cmh_context_now;
static inline int cmh_rec_enabled(void) { return __atomic_load_n(&cmh_enabled_now, __ATOMIC_RELAXED); }
static inline int cmh_rec_context(void) { return __atomic_load_n(&cmh_context_now, __ATOMIC_RELAXED); }
CMH_HIDDEN void cmh_config_from_env(void);
/* cmh_record_memory_history(): validate, then apply under the config lock. */
CMH_HIDDEN int cmh_config_apply(const cmh_options *o);
/* Expand %p / %r and the pid rule for fixed paths into out. */
CMH_HIDDEN int cmh_config_output_path(const char *pattern, char *out, size_t outlen);
/* The path a child this process forked (pid) takes for its snapshot, as that child computes it:
 * %p its pid; a fixed path or %r with .PID inserted (the launched process keeps NAME).  -1: too
 * long, or a stream (stdout). */
CMH_HIDDEN int cmh_config_child_output_path(const char *pattern, long pid, char *out, size_t outlen);
CMH_HIDDEN int cmh_config_output_streams(const char *path);
CMH_HIDDEN int cmh_config_runtime_dir(char *out, size_t outlen);
CMH_HIDDEN int cmh_config_flight_path(const char *snap, char *out, size_t outlen);
CMH_HIDDEN int cmh_config_flight_path_runtime(const char *snap, char *out, size_t outlen);
/* RANK / LOCAL_RANK / WORLD_SIZE (or Slurm's, Open MPI's, MPICH's): -1 for each not set */
CMH_HIDDEN void cmh_job_identity(int32_t *rank, int32_t *local_rank, int32_t *world_size);
CMH_HIDDEN void cmh_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- time (history.c) ---- */
CMH_HIDDEN int64_t cmh_now_ns(void);
#if defined(__x86_64__)
#include <x86intrin.h>
static inline int64_t cmh_now_ticks(void) { return (int64_t)__rdtsc(); }
#else
static inline int64_t cmh_now_ticks(void) { return cmh_now_ns(); }
#endif
/* Raw ticks to Unix-epoch ns, by the line through the start reference and (now_ticks, now_ns). */
CMH_HIDDEN int64_t cmh_ticks_to_ns(int64_t ticks, int64_t now_ticks, int64_t now_ns);

/* ---- livetab.c: address -> record, in 64 shards each under its own lock ---- */
typedef struct cmh_live {
    uint64_t addr; /* the key: first (oatab.h) */
    uint64_t size, requested, stream;
    int64_t ticks; /* raw ticks of the allocation */
    uint64_t aux;  /* segments: the stream-ordered pool; blocks: the managed segment holding it */
    uint32_t stack;
    int16_t device;
    uint8_t kind, flags; /* segments: CMH_EF_*; reported blocks: the block state */
} cmh_live;

typedef struct cmh_livetab cmh_livetab;
CMH_HIDDEN cmh_livetab *cmh_live_new(void);
/* Insert or replace (an address reused without a free we saw: the newer one wins); -1 when out of
 * memory. */
CMH_HIDDEN int cmh_live_insert(cmh_livetab *t, const cmh_live *l);
/* Remove addr, copying it to *out; 0 if absent. */
CMH_HIDDEN int cmh_live_remove(cmh_livetab *t, uint64_t addr, cmh_live *out);
/* Change the record of addr in place (fn returns 0 to leave it unchanged) and copy it to *copy:
 * 0 absent, 1 changed, 2 left unchanged. */
CMH_HIDDEN int cmh_live_update(cmh_livetab *t, uint64_t addr, int (*fn)(cmh_live *, void *), void *arg, cmh_live *copy);
/* Remove every record for which pred says yes, calling gone() on each after its shard's lock is
 * released; returns how many. */
CMH_HIDDEN uint64_t cmh_live_remove_if(cmh_livetab *t, int (*pred)(const cmh_live *, void *), void (*gone)(const cmh_live *),
                                       void *arg);
/* A copy of every record, sorted by device and address (malloc'ed); CMH_ENOMEM or CMH_OK. */
CMH_HIDDEN int cmh_live_collect(cmh_livetab *t, cmh_live **out, size_t *n);
CMH_HIDDEN void cmh_live_lock_all(cmh_livetab *t);
CMH_HIDDEN void cmh_live_unlock_all(cmh_livetab *t);
CMH_HIDDEN void cmh_live_reset(cmh_livetab *t); /* fork child: empty, fresh locks */

/* ---- history.c ---- */
/* An entry as readers get it (the export, the flight record, a ring's copy): every field. */
typedef struct cmh_rec_entry {
    int64_t ticks; /* raw ticks until export */
    uint64_t addr, size, requested, stream;
    uint32_t stack;
    uint32_t thread : 21, action : 4, kind : 3, flags : 4;
} cmh_rec_entry;
/* An entry as a ring holds it: three words, 24 bytes, where the common entry fits (every field
 * within the bits below, requested = size, no stream); a bounded ring's slot adds its sequence
 * number in the same 32 bytes (history.c), so that owning the slot and writing it touch one line.
 *   ticks
 *   w1    size (bits 0-35) | stack << 36 (20 bits) | kind << 56 (3) | flags << 59 (4) | side << 63
 *   word  addr (bits 0-47) | thread << 48 (12 bits) | action << 60 (4)
 * An entry that does not fit has `side` set and every field of it in its chunk's side table, at
 * the same position (cmh_ring_side; history.c says where), written before the commit word, so
 * whatever owns or reads the slot owns or reads them too (its thread bits then read all ones).
 * A side table's pages are touched only by the entries that use them.  `word` is the entry's
 * commit word: stored last, with release, into a slot that was zero, never 0 itself (a thread's
 * number is never 0), so a reader that loads it nonzero (acquire) sees the whole entry.  The
 * bytes per entry are the recorder's footprint and most of its cost per call (each new page of
 * a ring is zeroed by the kernel), so the common entry is packed as the flight record's is. */
typedef struct cmh_ring_slot {
    int64_t ticks;
    uint64_t w1;
    uint64_t word;
} cmh_ring_slot;
typedef struct cmh_ring_side {
    uint64_t addr, size, requested, stream;
    uint32_t stack, thread;
} cmh_ring_side;
_Static_assert(sizeof(cmh_ring_slot) == 24, "a ring entry is 24 bytes");
_Static_assert(CMH_ACT_COUNT <= 16 && CMH_KIND_COUNT <= 8, "actions and kinds fit their bits");
#define CMH_SLOT_SIDE (1ull << 63)
#define CMH_SLOT_THREADS 0xfffu /* the thread bits of a slot whose fields are in its side table */
/* whether an entry fits a slot without its side table */
static inline int cmh_slot_fits(uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream, uint32_t stack,
                                uint32_t thread)
{
    return !((addr >> 48) | (size >> 36) | (requested ^ size) | stream | (stack >> 20) | (thread / CMH_SLOT_THREADS));
}
static inline int cmh_slot_action(uint64_t word) { return (int)(word >> 60); }
/* slot (its commit word `word`, loaded already) and, where it has them, its side fields as an entry */
static inline void cmh_ring_expand(const cmh_ring_slot *sl, const cmh_ring_side *sd, uint64_t word, cmh_rec_entry *out)
{
    uint64_t w1 = sl->w1;
    out->ticks = sl->ticks;
    out->action = (unsigned)(word >> 60);
    out->kind = (unsigned)(w1 >> 56) & 7;
    out->flags = (unsigned)(w1 >> 59) & 15;
    if (w1 & CMH_SLOT_SIDE) {
        out->addr = sd->addr;
        out->size = sd->size;
        out->requested = sd->requested;
        out->stream = sd->stream;
        out->stack = sd->stack;
        out->thread = sd->thread;
        return;
    }
    out->addr = word & ((1ull << 48) - 1);
    out->size = out->requested = w1 & ((1ull << 36) - 1);
    out->stream = 0;
    out->stack = (uint32_t)(w1 >> 36) & 0xfffff;
    out->thread = (uint32_t)(word >> 48) & CMH_SLOT_THREADS;
}
#define CMH_THREAD_MAX ((1u << 20) - 1) /* threads past it share the last number */

/* This thread's number in the record: 1, 2, ... in the order threads first record something. */
CMH_HIDDEN uint32_t cmh_hist_thread(void);
/* The threads named so far (their OS thread id and name at their first event), the first
 * CMH_THREAD_NAMED of them: fn(arg, thread, tid, name) for each. */
#define CMH_THREAD_NAMED 4096
/* The program's name for the calling thread (cmh_thread_name), taken instead of the OS's. */
CMH_HIDDEN void cmh_hist_name_thread(const char *name);
CMH_HIDDEN void cmh_hist_threads_each(void (*fn)(void *arg, uint32_t thread, int64_t tid, const char *name), void *arg);

/* count_kind of cmh_hist_record */
enum { CMH_COUNT_NONE = 0, CMH_COUNT_ALLOC = 1, CMH_COUNT_FREE = 2, CMH_COUNT_OOM = 3 };
/* Append an entry to device's ring (with enabled=all) and change its counters by dalloc / dres,
 * without a lock (history.c says how); ticks 0 = now. */
CMH_HIDDEN void cmh_hist_record(int device, int action, int kind, int flags, uint64_t addr, uint64_t size,
                                uint64_t requested, uint64_t stream, uint32_t stack, int64_t dalloc, int64_t dres,
                                int count_kind, int64_t ticks);
/* The counters' allocated bytes of device change without an entry (a segment made managed). */
CMH_HIDDEN void cmh_hist_adjust_allocated(int device, int64_t dalloc);
/* The stack a free entry carries: its own with context=all, the allocation's with alloc, else
 * none (PyTorch's context semantics). */
CMH_HIDDEN uint32_t cmh_hist_free_stack(uint32_t alloc_stack);
/* A driver allocation succeeded (VMM maps go to vmm.c). */
CMH_HIDDEN void cmh_hist_segment_alloc(int device, int kind, uint64_t addr, uint64_t size, uint64_t requested,
                                       uint64_t stream, uint64_t pool, int action);
/* Before a free reaches the driver: forget the segment and record the free.  Returns 1 and
 * fills *was if the address was live.  If the driver then refuses, cmh_hist_free_undo. */
CMH_HIDDEN int cmh_hist_segment_free(uint64_t addr, uint64_t stream, int action, cmh_live *was);
CMH_HIDDEN void cmh_hist_free_undo(const cmh_live *was);
/* A context of device about to be destroyed (cuCtxDestroy, cuDevicePrimaryCtxReset): *addrs
 * (malloc'ed, n of them) the device's live linear, pitch and managed allocations, which
 * cmh_hist_context_gone then ends as freed once the driver succeeded (history.c). */
CMH_HIDDEN int cmh_hist_context_collect(int device, uint64_t **addrs, size_t *n);
CMH_HIDDEN uint64_t cmh_hist_context_gone(const uint64_t *addrs, size_t n);
/* A segment made managed by its allocator: its implied block leaves the counters. */
CMH_HIDDEN int cmh_hist_segment_managed(uint64_t addr, cmh_live *seg);
CMH_HIDDEN void cmh_hist_oom(int device, int kind, uint64_t size, uint64_t stream, uint64_t device_free);
/* tag: CMH_POOL_* bits, kept in the entry's stream field; stack: a creation's call site (else 0) */
CMH_HIDDEN void cmh_hist_pool_sample(int device, uint64_t pool, uint64_t reserved, uint64_t used, int64_t slack_delta, int flags,
                                     uint32_t tag, uint32_t stack);
CMH_HIDDEN void cmh_hist_clear(void);
CMH_HIDDEN void cmh_hist_set_capacity(uint64_t max_entries);
CMH_HIDDEN int cmh_hist_stats(cmh_device_stats *out, int cap);
/* For the export: device slot i's ring (a malloc'ed copy, oldest first), drop count and entry
 * count so far (the last entry's sequence number); 0 when the device was never used. */
CMH_HIDDEN int cmh_hist_copy_ring(int slot, cmh_rec_entry **out, uint64_t *n, uint64_t *dropped, uint64_t *seq, int *rc);
/* The same for a dump, without a copy of the entries where it can (an unlimited ring is read in
 * place: its entries never move and are never rewritten but by a clear or a new capacity, which
 * wait for cmh_hist_view_release).  A bounded ring is copied, as its oldest entries are being
 * overwritten.  Entry k of the view is cmh_view_get(v, k, &e), oldest first, or 0 for an entry the
 * recorder lost (no memory for its chunk); read in place, cmh_view_get waits for an entry still
 * being written (its commit word); rc: CMH_ENOMEM or CMH_OK. */
#define CMH_RING_CHUNK_BITS 16
typedef struct cmh_ring_view {
    cmh_ring_slot *const *chunks; /* an unlimited ring's chunk directory, read in place; or NULL */
    cmh_rec_entry *copy;          /* else a copy, oldest first */
    uint64_t n;
} cmh_ring_view;
/* an unlimited ring's chunk: CHUNK slots, then their side table */
#define CMH_RING_SIDE(c) ((const cmh_ring_side *)(const void *)((c) + (1ull << CMH_RING_CHUNK_BITS)))
CMH_HIDDEN const cmh_ring_slot *cmh_view_wait(const cmh_ring_view *v, uint64_t k, uint64_t *word);
/* entry k of the view into *out: 1, or 0 where the recorder lost it */
static inline int cmh_view_get(const cmh_ring_view *v, uint64_t k, cmh_rec_entry *out)
{
    if (v->copy) {
        *out = v->copy[k];
        return 1;
    }
    const cmh_ring_slot *c = __atomic_load_n(&v->chunks[k >> CMH_RING_CHUNK_BITS], __ATOMIC_ACQUIRE);
    uint64_t off = k & ((1ull << CMH_RING_CHUNK_BITS) - 1);
    uint64_t word = c ? __atomic_load_n(&c[off].word, __ATOMIC_ACQUIRE) : 0;
    const cmh_ring_slot *e = word ? &c[off] : cmh_view_wait(v, k, &word);
    if (!e) return 0;
    cmh_ring_expand(e, &CMH_RING_SIDE(e - off)[off], word, out);
    return 1;
}
/* only its thread (the writer asks for it apart from the entry) */
static inline uint32_t cmh_view_thread(const cmh_ring_view *v, uint64_t k)
{
    if (v->copy) return v->copy[k].thread;
    const cmh_ring_slot *c = __atomic_load_n(&v->chunks[k >> CMH_RING_CHUNK_BITS], __ATOMIC_ACQUIRE);
    uint64_t off = k & ((1ull << CMH_RING_CHUNK_BITS) - 1);
    uint64_t word = c ? __atomic_load_n(&c[off].word, __ATOMIC_ACQUIRE) : 0;
    const cmh_ring_slot *e = word ? &c[off] : cmh_view_wait(v, k, &word);
    if (!e) return 0;
    return e->w1 & CMH_SLOT_SIDE ? CMH_RING_SIDE(e - off)[off].thread : (uint32_t)(word >> 48) & CMH_SLOT_THREADS;
}
/* Views are taken between cmh_hist_views_begin and _end (one lock: what would rewrite a ring in
 * place, a clear or a new capacity, waits for _end), any number of them at once. */
CMH_HIDDEN void cmh_hist_views_begin(void);
CMH_HIDDEN void cmh_hist_views_end(void);
/* *ooms: the OOM entries the device recorded since the last clear (those the view lacks were
 * dropped by the ring, or lost) */
CMH_HIDDEN int cmh_hist_view_ring(int slot, cmh_ring_view *v, uint64_t *dropped, uint64_t *seq, uint64_t *ooms, int *rc);
/* Between cmh_hist_hold and _unhold (inside a views_begin/_end), no entry is claimed or being
 * written on any device: the live tables read then hold every entry claimed so far (a table
 * changes before its entry is claimed), and the views taken then end at that same point.  A
 * thread that changed a table and waits to claim its entry: that entry comes past the views'
 * end and repeats what the tables show.  Nothing may be recorded by the holding thread. */
CMH_HIDDEN void cmh_hist_hold(void);
CMH_HIDDEN void cmh_hist_unhold(void);
CMH_HIDDEN void cmh_hist_view_release(cmh_ring_view *v);
/* The helper thread makes rings' next chunks ahead of them (history.c). */
CMH_HIDDEN int cmh_hist_spare_wanted(void);
CMH_HIDDEN void cmh_hist_make_spares(void);
/* Every entry claimed so far on every device is written (its flight record included): the
 * checkpoint, before it gives back extents that such a writer may still be writing into. */
CMH_HIDDEN void cmh_hist_quiesce(void);
CMH_HIDDEN int cmh_hist_collect_segments(cmh_live **out, size_t *n);
CMH_HIDDEN void cmh_hist_atfork_prepare(void);
CMH_HIDDEN void cmh_hist_atfork_parent(void);
CMH_HIDDEN void cmh_hist_reset_after_fork(void);
/* dl_iterate_phdr, never under way at a fork (process.c says why): the recorder's only walk of
 * the loader's modules */
struct dl_phdr_info;
CMH_HIDDEN int cmh_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg);
CMH_HIDDEN void cmh_hist_ensure_init(void);
CMH_HIDDEN extern int cmh_touched;    /* the process used a hooked entry point */
CMH_HIDDEN extern uint64_t cmh_lost; /* events the recorder could not keep */
static inline void cmh_count_lost(uint64_t n) { __atomic_add_fetch(&cmh_lost, n, __ATOMIC_RELAXED); }

/* ---- blocks.c: the block API's state ---- */
CMH_HIDDEN int cmh_blocks_segment_managed(uint64_t addr);
CMH_HIDDEN int cmh_blocks_alloc(int device, uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream);
CMH_HIDDEN int cmh_blocks_free_requested(uint64_t addr);
CMH_HIDDEN int cmh_blocks_free_completed(uint64_t addr);
/* The driver memory [lo, hi) under reported blocks is going: free the blocks still in it. */
CMH_HIDDEN void cmh_blocks_segment_gone(uint64_t lo, uint64_t hi);
CMH_HIDDEN int cmh_blocks_collect(cmh_live **out, size_t *n);
CMH_HIDDEN void cmh_blocks_atfork_prepare(void);
CMH_HIDDEN void cmh_blocks_atfork_parent(void);
CMH_HIDDEN void cmh_blocks_reset_after_fork(void);

/* ---- marks.c ---- */
/* A name's id (1-based), interned; 0 when out of memory. */
CMH_HIDDEN uint32_t cmh_marks_name_id(const char *name);
/* stage: 0 a point mark, 1 a range starts, 2 it ends */
CMH_HIDDEN int cmh_marks_record(int device, uint32_t name_id, int stage);
/* Intern the text of name id into the snapshot's strings. */
CMH_HIDDEN int cmh_marks_intern(cmh_snapshot *s, uint32_t name_id, uint32_t *out);
/* The ranges as annotations, into the snapshot. */
CMH_HIDDEN int cmh_marks_export(cmh_snapshot *s, int64_t now_ticks, int64_t now_ns);
/* Every name interned so far. */
CMH_HIDDEN void cmh_marks_each(void (*fn)(uint32_t id, const char *name));
CMH_HIDDEN void cmh_marks_atfork_prepare(void);
CMH_HIDDEN void cmh_marks_atfork_parent(void);
CMH_HIDDEN void cmh_marks_reset_after_fork(void);

/* ---- pools.c ---- */
/* Record a pool's reserved and used bytes now (after an operation on it). */
CMH_HIDDEN void cmh_pools_sample(uint64_t pool, int device);
CMH_HIDDEN void cmh_pools_destroying(uint64_t pool);
CMH_HIDDEN void cmh_pools_destroy_refused(uint64_t pool);
CMH_HIDDEN void cmh_pools_destroyed(uint64_t pool);
/* A pool cuMemPoolCreate made on device (its location), with that call's stack: a private pool. */
CMH_HIDDEN void cmh_pools_created(uint64_t pool, int device, uint32_t stack);
/* The pool a failed stream-ordered request asked, recorded (CMH_POOL_REQUEST) before its oom entry. */
CMH_HIDDEN void cmh_pools_request(uint64_t pool, int device);
/* cuMemPoolSetAttribute set a pool's release threshold. */
CMH_HIDDEN void cmh_pools_threshold(uint64_t pool, uint64_t threshold);
/* A synchronize returned: pools that held more than their release threshold read again. */
CMH_HIDDEN void cmh_pools_synchronized(void);
CMH_HIDDEN int cmh_pools_device(uint64_t pool); /* -1 if unknown */
CMH_HIDDEN int cmh_pools_any(void);              /* has any pool been seen */
CMH_HIDDEN void cmh_pools_resample(void);        /* every known pool again (a cleared history) */
/* The device's known pools again, recorded where what they keep changed (an out-of-memory error:
 * a synchronize may have released it, unseen). */
CMH_HIDDEN void cmh_pools_refresh(int device);
CMH_HIDDEN void cmh_pools_at_dump(void);
CMH_HIDDEN void cmh_pools_atfork_prepare(void);
CMH_HIDDEN void cmh_pools_atfork_parent(void);
CMH_HIDDEN void cmh_pools_reset_after_fork(void);

/* ---- vmm.c ---- */
CMH_HIDDEN void cmh_vmm_handle_created(uint64_t handle, int device, uint64_t size);
/* the handles held and mapped nowhere, added to s (their stacks through stack_map) */
CMH_HIDDEN int cmh_vmm_export_unmapped(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg);
CMH_HIDDEN void cmh_vmm_clear_maps(void);
CMH_HIDDEN int cmh_vmm_export_maps(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg);
CMH_HIDDEN int cmh_vmm_export_released(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg);
CMH_HIDDEN void cmh_vmm_handle_released(uint64_t handle);
/* Every handle held, into the flight record again (a new generation, a late start). */
CMH_HIDDEN void cmh_vmm_flight_handles(void);
CMH_HIDDEN int cmh_vmm_handle_device(uint64_t handle); /* -1 if unknown */
CMH_HIDDEN void cmh_vmm_reserved(uint64_t addr, uint64_t size);
CMH_HIDDEN void cmh_vmm_reservation_freed(uint64_t addr);
/* The reservation holding addr: 1 and [*lo, *hi), else 0. */
CMH_HIDDEN int cmh_vmm_reservation(uint64_t addr, uint64_t *lo, uint64_t *hi);
/* A map succeeded. */
CMH_HIDDEN void cmh_vmm_mapped(int device, uint64_t addr, uint64_t size, uint64_t handle);
/* Before an unmap reaches the driver: every mapped range inside [addr, addr+size) is recorded as
 * segment_unmap and forgotten, and u remembers them.  Then, once the driver has answered,
 * cmh_vmm_unmap_undo(u) if it refused, else cmh_vmm_unmap_done(u). */
typedef struct cmh_unmap {
    uint64_t lo, hi;
    uint32_t n, cap;
    cmh_live *orig; /* the ranges the unmap hit, as they were */
    cmh_live inline_orig[8];
} cmh_unmap;
CMH_HIDDEN void cmh_vmm_unmap(uint64_t addr, uint64_t size, cmh_unmap *u);
CMH_HIDDEN void cmh_vmm_unmap_undo(cmh_unmap *u);
CMH_HIDDEN void cmh_vmm_unmap_done(cmh_unmap *u);
/* Change the map starting at addr in place, as cmh_live_update does. */
CMH_HIDDEN int cmh_vmm_update(uint64_t addr, int (*fn)(cmh_live *, void *), void *arg, cmh_live *copy);
CMH_HIDDEN int cmh_vmm_collect(cmh_live **out, size_t *n);
CMH_HIDDEN void cmh_vmm_atfork_prepare(void);
CMH_HIDDEN void cmh_vmm_atfork_parent(void);
CMH_HIDDEN void cmh_vmm_reset_after_fork(void);

/* ---- drverr.c: failed driver calls other than OOMs ---- */
/* A hook's failure branch: call (a string literal, the entry point's base name) returned result
 * for addr/size (0 where the call has none). */
CMH_HIDDEN void cmh_drverr_note(const char *call, int result, uint64_t addr, uint64_t size);
/* The table, into s (.cmh "driver_errors"; stacks through stack_map), its times mapped by the
 * entries' own reference (now_ticks, now_ns: export.c's), so that a failed call and the entries
 * around it keep their order: cmh_driver_error_what reads the trace up to the call's time. */
CMH_HIDDEN int cmh_drverr_export(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg, int64_t now_ticks, int64_t now_ns);
CMH_HIDDEN void cmh_drverr_reset_after_fork(void);
/* the history cleared (cmh_hist_clear): the failed calls noted before it are forgotten */
CMH_HIDDEN void cmh_drverr_clear(void);

/* ---- stacks.c ---- */
/* Capture and intern the current stack; 0 = none (disabled, or the recorder is out of room). */
CMH_HIDDEN uint32_t cmh_stack_capture(void);
/* Walk the interned stack: returns the frame count and sets *pcs (stable while the process runs)
 * and, unless NULL, *gen: cmh_mod_gen when it was captured (which modules its PCs are in). */
CMH_HIDDEN uint32_t cmh_stack_get(uint32_t id, const uintptr_t **pcs, unsigned *gen);
/* Every stack interned so far (a flight record started after a fork learns the inherited ones). */
CMH_HIDDEN void cmh_stacks_each(void (*fn)(uint32_t id, const uintptr_t *pcs, uint32_t depth));
CMH_HIDDEN void cmh_stacks_init(void);
CMH_HIDDEN void cmh_stacks_atfork_prepare(void);
CMH_HIDDEN void cmh_stacks_atfork_parent(void);
CMH_HIDDEN void cmh_stacks_atfork_child(void);
/* The module generation: bumped when an object was unloaded (dlclose, or the helper's scan of
 * dl_iterate_phdr's unload count), so that every thread's walk caches (rules per PC, remembered
 * walks) start over at its next capture: code mapped later at the same address is other code. */
CMH_HIDDEN extern unsigned cmh_mod_gen;
CMH_HIDDEN unsigned long long cmh_modules_subs(void); /* objects unloaded since the start (dlpi_subs) */
CMH_HIDDEN void cmh_modules_unloaded(unsigned long long subs);
CMH_HIDDEN void cmh_modules_poll(void);

/* ---- unwind.c: the recorder's own stack walk (frame pointers and .eh_frame rules, per PC) ---- */
#define CMH_UNW_BITS 10
#define CMH_UNW_SLOTS (1u << CMH_UNW_BITS)
enum { CMH_UNW_VALID = 1, CMH_UNW_LAST = 2 };
/* How a frame's caller is found at one PC: CFA = (cfa_reg == 7 ? %rsp : %rbp) + cfa_off, the
 * return address at CFA - 8, %rbp at CFA + rbp_off (0: unchanged).  LAST: the outermost frame. */
typedef struct cmh_unw_rule {
    int32_t cfa_off;
    int16_t rbp_off;
    uint8_t cfa_reg, flags;
} cmh_unw_rule;
typedef struct cmh_unw_slot {
    uintptr_t pc;
    cmh_unw_rule r;
} cmh_unw_slot;
/* A walk remembered: where it started (%rsp, the PC, %rbp when a step used it) and every stack
 * word it read to go on; if all are as they were, the walk would give the same PCs again.  id is
 * the stack they were interned as with the Python frames py[0..npy) (stacks.c; 0: none yet). */
#define CMH_UNW_MEMO_MAX 40 /* walks of up to this many frames are remembered */
#define CMH_UNW_MEMO_PY 32  /* and an id for up to this many Python frames with them */
#define CMH_UNW_MEMO_SETS 4
#define CMH_UNW_MEMO_WAYS 4
typedef struct cmh_unw_memo {
    uintptr_t rsp0, rip0, rbp0;
    int32_t max, n, nread, uses_rbp0;
    uint32_t id, skip;
    int32_t npy;
    uintptr_t py[CMH_UNW_MEMO_PY];
    uintptr_t addr[2 * CMH_UNW_MEMO_MAX], val[2 * CMH_UNW_MEMO_MAX];
    void *pcs[CMH_UNW_MEMO_MAX];
} cmh_unw_memo;
/* One thread's: its stack's bounds, the rules of the PCs it has walked (direct-mapped by PC) and
 * its last walks. */
typedef struct cmh_unw_cache {
    uintptr_t stack_lo, stack_hi;
    uint64_t misses, replays;
    unsigned gen; /* cmh_mod_gen when the rules and walks were last emptied */
    uint32_t next_way[CMH_UNW_MEMO_SETS];
    cmh_unw_slot slot[CMH_UNW_SLOTS];
    cmh_unw_memo memo[CMH_UNW_MEMO_SETS][CMH_UNW_MEMO_WAYS];
} cmh_unw_cache;
/* The rule of the frame whose return address is pc: 0, or -1 when the walk must not go on. */
CMH_HIDDEN int cmh_unwind_rule(uintptr_t pc, cmh_unw_rule *out);
/* Up to max return addresses from the caller's caller on (the caller's own PC first); -1: walk
 * with libunwind instead.  With memo, a walk is first looked for among the remembered ones: on
 * a hit *memo is set, buf is left alone and the PCs are (*memo)->pcs; after a walk made afresh
 * *memo is the entry that now remembers it (or NULL). */
CMH_HIDDEN int cmh_unwind_walk(void **buf, int max, cmh_unw_cache *c, cmh_unw_memo **memo);
CMH_HIDDEN int cmh_unwind_stack_bounds(uintptr_t *lo, uintptr_t *hi);

/* ---- pystack.c: the Python frames of the allocating thread ---- */
/* A Python frame is the pseudo PC CMH_PYTOKEN | id (no user-space address looks like it). */
#define CMH_PYTOKEN 0xC0DE000000000000ull
#define CMH_MAX_STACK (2 * CMH_MAX_FRAMES) /* native frames plus Python ones */
static inline int cmh_is_pytoken(uintptr_t pc) { return (pc & 0xFFFF000000000000ull) == CMH_PYTOKEN; }
/* NOGIL: the thread released the GIL, this Python has no GIL-free reader (pystack.c) and the mode
 * forbids waiting; LAYOUT: the GIL-free read found memory not laid out as expected (or unreadable) */
enum { CMH_PYREFUSE_NOGIL, CMH_PYREFUSE_FINALIZING, CMH_PYREFUSE_LAYOUT, CMH_PYREFUSE_N };
CMH_HIDDEN extern uint64_t cmh_py_refused[CMH_PYREFUSE_N];
CMH_HIDDEN extern uint64_t cmh_py_captured;
CMH_HIDDEN extern uint64_t cmh_py_nogil_reads; /* of cmh_py_captured, read without the GIL */
CMH_HIDDEN extern __thread int cmh_on_helper __attribute__((tls_model("initial-exec"))); /* process.c: set on the recorder's helper thread; read per stack */
/* Up to max tokens of this thread's Python stack, innermost first; 0 when there is none or it is
 * not safe to read now (counted in cmh_py_refused). */
CMH_HIDDEN int cmh_pystack_capture(uintptr_t *out, int max);
/* Whether a return address is in the interpreter's own code (where Python frames go). */
CMH_HIDDEN int cmh_pystack_in_interp(uintptr_t pc);
CMH_HIDDEN int cmh_pystack_frame(uintptr_t token, const char **file, const char **name, int32_t *line);
CMH_HIDDEN void cmh_pystack_each(void (*fn)(uint32_t id, const char *file, const char *name, int32_t line));
CMH_HIDDEN int cmh_pystack_set_mode(int mode);
CMH_HIDDEN void cmh_pystack_atfork_prepare(void);
CMH_HIDDEN void cmh_pystack_atfork_parent(void);
CMH_HIDDEN void cmh_pystack_atfork_child(void);

/* ---- symbols.c ---- */
/* Add frames and modules for a list of PCs to the model: out_ids[i] = frame id of pcs[i]. */
typedef struct cmh_symbolizer cmh_symbolizer;
CMH_HIDDEN cmh_symbolizer *cmh_symbolizer_new(cmh_snapshot *s);
/* gen: the stack's (cmh_stack_get): a PC is named in the module mapped there at that generation */
CMH_HIDDEN int cmh_symbolize(cmh_symbolizer *z, uintptr_t pc, int is_return_address, unsigned gen, uint32_t *frame_id);
CMH_HIDDEN void cmh_symbolizer_free(cmh_symbolizer *z);
/* A C++ name demangled (malloc'ed), or NULL when it is not one or no demangler is at hand. */
CMH_HIDDEN char *cmh_symbolizer_demangle(cmh_symbolizer *z, const char *name);

/* ---- export.c ---- */
/* Copy the rings, live segments, blocks and annotations into the model (stack_map turns a
 * recorder stack id into a model stack id). */
CMH_HIDDEN int cmh_export_state(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t rec_stack, void *), void *arg);
/* The same with the rings' entries left in the rings: the model gets each trace's device, drop
 * count and entry count (no entries), every stack and name they use, and the rest as above;
 * cmh_export_stream_source then hands the writer the entries, read from the rings in place (or
 * from a bounded ring's copy), until cmh_export_stream_end.  1 (and nothing held): a ring lost
 * entries (no memory for a chunk), export the model instead. */
typedef struct cmh_export_stream cmh_export_stream;
CMH_HIDDEN int cmh_export_state_stream(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t rec_stack, void *), void *arg,
                                       cmh_export_stream **out);
CMH_HIDDEN void cmh_export_stream_source(cmh_export_stream *x, cmh_entry_source *src);
CMH_HIDDEN void cmh_export_stream_end(cmh_export_stream *x);
/* Each device slot's last entry sequence number in the latest export (under the dump lock). */
CMH_HIDDEN extern uint64_t cmh_export_seq[CMH_MAX_DEVICES + 1];

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
/* The driver's own functions the recorder calls for itself (pools.c): NULL when absent. */
CMH_HIDDEN int cmh_driver_pool_attrs(uint64_t pool, uint64_t *reserved, uint64_t *used);
CMH_HIDDEN int cmh_driver_pool_threshold(uint64_t pool, uint64_t *threshold);
CMH_HIDDEN uint64_t cmh_driver_default_pool(int device); /* 0 when the driver says none */

/* ---- flight.c: the history in a file from the start (snapshot/flight_format.h) ---- */
CMH_HIDDEN void cmh_flight_start(void); /* at the first touch */
CMH_HIDDEN void cmh_flight_entry(int slot, uint64_t seq, const cmh_rec_entry *e); /* between its claim and its commit */
/* The same for an entry that packs into a ring slot (cmh_slot_fits), given as the slot's words
 * (ticks, w1, word: cmh_ring_slot), as a tiny record (snapshot/flight_format.h): 1 written (or
 * no flight record), 0 when it does not fit one: then cmh_flight_entry.  The hot path's: the
 * entry is packed once, for both, and passed in registers (flight.c). */
CMH_HIDDEN int cmh_flight_tiny(int slot, uint64_t seq, int64_t ticks, uint64_t w1, uint64_t word);
CMH_HIDDEN void cmh_flight_clear(int slot, uint64_t seq);                          /* with the ring closed */
CMH_HIDDEN void cmh_flight_set_capacity(uint64_t max_entries);
CMH_HIDDEN void cmh_flight_stack(uint32_t id, const uintptr_t *pcs, uint32_t depth);
CMH_HIDDEN void cmh_flight_name(uint32_t id, const char *name);
CMH_HIDDEN void cmh_flight_pyframe(uint32_t id, const char *file, const char *name, int32_t line);
CMH_HIDDEN void cmh_flight_annotation(int64_t ticks, uint32_t name, int device, int stage);
CMH_HIDDEN void cmh_flight_meminfo(int device, int64_t ticks, uint64_t free_b, uint64_t total, uint32_t thread);
CMH_HIDDEN void cmh_flight_device(const cmh_device_ident *d);
/* a cuMemCreate handle's state now (CMH_FR_VMM_*: flight_format.h); under vmm.c's handle lock */
CMH_HIDDEN void cmh_flight_vmm_handle(uint64_t handle, int device, uint64_t size, int64_t ticks, uint32_t stack, int state);
/* a row of the map log (CMH_FR_VMM_MAP), as the exit dump's vmm_maps has it */
CMH_HIDDEN void cmh_flight_vmm_map(int device, uint64_t addr, uint64_t size, int64_t ticks, uint64_t serial, uint64_t hsize, uint32_t hstack,
                                   int64_t hticks);
CMH_HIDDEN void cmh_flight_vmm_release(int device, uint64_t serial, uint64_t size, uint32_t stack, int64_t ticks, int64_t release_ticks);
CMH_HIDDEN void cmh_flight_thread(void *arg, uint32_t thread, int64_t tid, const char *name);
/* a child forked without exec: its number among the forks, pid (0: past those kept), the path
 * its record takes (NULL: not known) */
CMH_HIDDEN void cmh_flight_child(uint32_t index, int64_t pid, const char *path);
CMH_HIDDEN void cmh_flight_tick(void); /* the helper thread, every ~100 ms */
CMH_HIDDEN int cmh_flight_checkpoint_wanted(void);
CMH_HIDDEN int cmh_flight_populate_wanted(void);
CMH_HIDDEN void cmh_flight_populate(void); /* the helper: make the next pages writable */
CMH_HIDDEN int cmh_flight_prepare_wanted(void);
CMH_HIDDEN void cmh_flight_prepare(void); /* the helper: the next extent, made ahead */
CMH_HIDDEN void cmh_helper_wake(void);
/* cuMemGetInfo samples (hooks.c): of every device through the contexts seen, into a snapshot */
CMH_HIDDEN void cmh_meminfo_sample_all(void);
/* the helper, once a second: a sample of each device into the flight record only (the live
 * readers' driver-used figure; the snapshot keeps the event-driven ones) */
CMH_HIDDEN void cmh_meminfo_sample_live(void);
CMH_HIDDEN int cmh_meminfo_export(cmh_snapshot *s);
CMH_HIDDEN void cmh_meminfo_reset_after_fork(void);     /* wake the helper thread (it looks at what is wanted) */
CMH_HIDDEN void cmh_flight_checkpoint(void);
CMH_HIDDEN void cmh_flight_ended_by_signal(int sig); /* async-signal-safe */
/* _exit(status) / _Exit: marks the record QUIT with the status (async-signal-safe) */
CMH_HIDDEN void cmh_flight_ended_by_exit(int status);
/* At exit: the files go when the snapshot was written, else the record says the process exited. */
CMH_HIDDEN void cmh_flight_finish(int snapshot_written);
CMH_HIDDEN void cmh_flight_reset_after_fork(void);
CMH_HIDDEN const char *cmh_flight_path(void);

/* ---- dump.c ---- */
/* Write one snapshot to path (NULL: the configured pattern); why names the trigger in messages. */
CMH_HIDDEN int cmh_dump(const char *path, const char *why);
/* the exit dump: `ending` says the process exited with this status (what exit() was given) */
CMH_HIDDEN int cmh_dump_at_exit(int status);
CMH_HIDDEN int cmh_dump_set_torch_hook(int (*fn)(const char *path, void *arg), void *arg);
CMH_HIDDEN int cmh_dump_set_torch_file(const char *path);
/* A flight record's checkpoint: a dump to path, not named in the manifest, with each device
 * slot's last entry sequence at the moment its ring was copied in cut[]. */
CMH_HIDDEN int cmh_dump_checkpoint(const char *path, uint64_t *cut, int nslots);
/* Append "KIND PID PATH" ("KIND PID PPID" without a path) to the manifest `cumemhist record` reads:
 * touched (the process used CUDA), flight, snapshot. */
CMH_HIDDEN void cmh_dump_note_manifest(const char *kind, const char *path);
/* The same line for another process (pid): a record of its that this one moved */
CMH_HIDDEN void cmh_dump_note_manifest_of(const char *kind, long pid, const char *path);
/* A line whose last field is a word, not a path ("claimed PID OWNER": the path was another run's) */
CMH_HIDDEN void cmh_dump_note_manifest_word(const char *kind, const char *word);
CMH_HIDDEN void cmh_dump_manifest_init(void);
CMH_HIDDEN void cmh_dump_note_signal(int sig, long sender);
CMH_HIDDEN void cmh_dump_atfork_prepare(void);
CMH_HIDDEN void cmh_dump_atfork_parent(void);
CMH_HIDDEN void cmh_dump_reset_after_fork(void);

/* ---- process.c ---- */
CMH_HIDDEN void cmh_first_touch(void);
/* The first out-of-memory error: dump now, on the helper thread, and wait for it. */
CMH_HIDDEN void cmh_process_oom(void);
CMH_HIDDEN int64_t cmh_process_start_ns(void);
CMH_HIDDEN int64_t cmh_process_forked_from(void); /* 0: not a child of fork() without exec */
/* The children this process forked (fork(), each pid once, in order): up to cap of them in out,
 * their count returned; *more: those forked past what is kept (CMH_MAX_CHILDREN). */
#define CMH_MAX_CHILDREN 1024
CMH_HIDDEN uint32_t cmh_process_children(int64_t *out, uint32_t cap, uint32_t *more);
/* The path child pid's own record takes (the output pattern, as that child computes it): 1 and
 * the path in out; 0: not known. */
CMH_HIDDEN int cmh_process_child_path(int64_t pid, char *out, size_t cap);
/* Every child forked so far into the flight record (cmh_flight_child): at its start and at
 * each checkpoint, which give back the extents that named them. */
CMH_HIDDEN void cmh_process_flight_children(void);

/* ---- signals.c: the recorder's handlers, invisible to the program ---- */
enum { CMH_SIG_DEATH = 1, CMH_SIG_REQUEST = 2 };
/* At start-up: take sig with fn.  CMH_SIG_DEATH: unless ignored; the program keeps its own
 * disposition, which fn hands the signal on to.  CMH_SIG_REQUEST (SIGUSR1/2): only when at
 * SIG_DFL, and the program's for good from its first setting.  0: taken. */
CMH_HIDDEN int cmh_sig_take(int sig, void (*fn)(int, siginfo_t *, void *), int kind);
/* In the handler (async-signal-safe): the program's disposition of sig for this delivery (a
 * handler set with SA_RESETHAND is SIG_DFL from now on) */
CMH_HIDDEN void cmh_sig_program(int sig, struct sigaction *out);
/* Call the program's handler a as the kernel would have (SA_SIGINFO, SA_NODEFER) */
CMH_HIDDEN void cmh_sig_run_program(int sig, const struct sigaction *a, siginfo_t *si, void *uc);
/* The default action, now: SIG_DFL set (the program's too) and sig raised (it is delivered as
 * the handler returns) */
CMH_HIDDEN void cmh_sig_die(int sig);
CMH_HIDDEN void cmh_sig_reset_after_fork(void);

#endif
