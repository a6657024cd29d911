/*
 * cumemhist/snapshot.h - the in-memory snapshot model and its codecs.
 *
 * A snapshot is what a recorder dump or a PyTorch _dump_snapshot() holds: the segments alive at
 * the end with their blocks, one trace (ring) per device, oldest entry first, and the stacks the
 * entries point at.  Strings, frames and stacks are interned: an entry carries a stack id, a
 * stack is a run of frame ids, a frame holds string ids.  Id 0 of each table is "none" (the
 * empty string, the empty stack), so a zeroed struct is a valid "no context".
 *
 * Ownership: a cmh_snapshot owns every array in it; cmh_snapshot_free releases all of it and
 * leaves it zeroed (freeing it again is harmless).
 *
 * Threads: functions that build a snapshot (cmh_snapshot_add_*, the readers) change it and
 * must not run at once on one snapshot; everything that only reads one (the queries, the
 * writers, every analyzer and exporter) may run at once on it from any number of threads.
 * Different snapshots are independent.
 *
 * Errors: every function returns CMH_OK or a negative CMH_E* code (cmh_strerror() names it).  A
 * reader that fails leaves its output snapshot empty (nothing to free) and says in err what
 * failed and at which byte; it returns CMH_ENOMEM when memory ran out, CMH_EFORMAT when the
 * input is not a valid snapshot, CMH_EIO when a file could not be read.
 */
#ifndef CUMEMHIST_SNAPSHOT_H
#define CUMEMHIST_SNAPSHOT_H

#include <stdint.h>
#include <stdio.h>

#include "recorder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Trace actions: PyTorch's names, plus mark (a user annotation) and pool_sample (a
 * stream-ordered pool's reserved and used bytes as the driver reports them: addr = the pool's
 * handle, size = reserved, requested = used; reserved beyond used counts as reserved memory). */
typedef enum cmh_action {
    CMH_ACT_ALLOC = 0,
    CMH_ACT_FREE_REQUESTED,
    CMH_ACT_FREE_COMPLETED,
    CMH_ACT_SEGMENT_ALLOC,
    CMH_ACT_SEGMENT_FREE,
    CMH_ACT_SEGMENT_MAP,
    CMH_ACT_SEGMENT_UNMAP,
    CMH_ACT_OOM,
    CMH_ACT_SNAPSHOT,
    CMH_ACT_MARK,
    CMH_ACT_POOL_SAMPLE,
    CMH_ACT_COUNT
} cmh_action;

const char *cmh_action_name(int action);
int cmh_action_from_name(const char *name); /* -1 if unknown */

/* An oom entry's addr when the device's free memory is not known (a PyTorch OOM entry without
 * 'device_free'): readers say "not known" (null in JSON) and writers leave the key out. */
#define CMH_DEVICE_FREE_UNKNOWN UINT64_MAX

/* Entry flags. */
#define CMH_EF_WHOLE_BLOCK 0x01 /* segment_alloc/free/map/unmap with no allocator above: the
                                   segment is also one allocated block covering it */
#define CMH_EF_IMPLIED 0x02     /* an alloc/free spelled out for PyTorch's readers from a whole
                                   block (viz/memviz.c); never in a recorded trace */
#define CMH_EF_HAS_FRAMES 0x04  /* a PyTorch entry that carried a 'frames' key (maybe empty) */
#define CMH_EF_PYTORCH 0x08     /* in a merged view (cmh_merged_view), an entry of PyTorch's part:
                                   its sizes are requested bytes, rounded by the replay as the
                                   caching allocator did; in memory only, never in a file */
#define CMH_EF_AT_DUMP 0x01 /* on a pool_sample (the whole-block bit, which a sample never has): read
                              at a dump, where every known pool is read again and recorded where
                              its figure changed: the trace's latest pool figure is then the
                              dump's (analyzer/replay.c, pools_stale_end) */
#define CMH_EF_USER_DEFINED 0x01 /* on a mark (the whole-block bit, which a mark never has): a
                                    PyTorch annotation whose action was 'user_defined' (mid-2024),
                                    not 'annotate' (newest main); kept in a .cmh as bit 4 */

#define CMH_EF_UNKNOWN_ACTION 0x02 /* on a mark (the implied bit, which a mark never has): a PyTorch
                                      trace entry of an action this version does not know (a newer
                                      PyTorch's), kept in place: its name is the action, its address,
                                      size, stream, time and stack the entry's; it replays as nothing,
                                      steps nothing, and is written back as it was read */

/* In a .cmh, an entry's 13th field (docs/FORMAT.md): its flags beyond the code byte's, written
 * only where one is set.  Bit 0: CMH_EF_UNKNOWN_ACTION on a mark. */
#define CMH_CMH_XF_UNKNOWN_ACTION 0x1u

#define CMH_EF_RETRIED 0x01     /* on an oom (the whole-block bit, which an oom never has), in the
                                   memviz shape only (viz/memviz.c): an OOM the allocator retried
                                   with success (cmh_oom_retried).  PyTorch writes an 'oom' entry only
                                   once the allocation finally fails, so the pickle keeps it aside */

/* A pool_sample's stream field (a sample has no stream): what the recorder knows of the pool, bits
 * (0 in records made before it said so: the pool's kind not known).  Exactly one of DEFAULT and
 * PRIVATE says its kind; CREATED marks the sample taken at its cuMemPoolCreate (the entry's stack is
 * that call's); REQUEST marks the sample of the pool a stream-ordered request that failed asked,
 * recorded right before that request's oom entry by the same thread. */
#define CMH_POOL_DEFAULT 0x1u /* the default pool of its device (cuDeviceGetDefaultMemPool) */
#define CMH_POOL_PRIVATE 0x2u /* any other: cuMemPoolCreate's */
#define CMH_POOL_CREATED 0x4u
#define CMH_POOL_REQUEST 0x8u

/* The action a PyTorch annotation held inline in its trace (a mark) is written back with: the
 * one it was read with.  (Every export wrote 'annotate', user_defined ones too.) */
static inline const char *cmh_pt_mark_action(unsigned entry_flags)
{
    return entry_flags & CMH_EF_USER_DEFINED ? "user_defined" : "annotate";
}

/* A PyTorch trace entry of an action this version does not know, kept as a mark (CMH_EF_UNKNOWN_ACTION). */
#define CMH_ENTRY_UNKNOWN_ACTION(e) ((e)->action == CMH_ACT_MARK && ((e)->flags & CMH_EF_UNKNOWN_ACTION))
/* A mark that names a place in the program (a step): the recorder's marks and PyTorch's annotations. */
#define CMH_ENTRY_STEP_MARK(e) ((e)->action == CMH_ACT_MARK && !((e)->flags & CMH_EF_UNKNOWN_ACTION))

/* What kind of driver memory a segment is. */
typedef enum cmh_mem_kind {
    CMH_KIND_DEVICE = 0, /* cuMemAlloc, or a PyTorch segment */
    CMH_KIND_PITCH,
    CMH_KIND_MANAGED,
    CMH_KIND_ASYNC, /* stream-ordered (cuMemAllocAsync / FromPool) */
    CMH_KIND_VMM,   /* cuMemMap of cuMemCreate memory */
    CMH_KIND_HOST,  /* pinned host memory */
    CMH_KIND_COUNT
} cmh_mem_kind;

const char *cmh_kind_name(int kind);

typedef enum cmh_block_state {
    CMH_BLOCK_INACTIVE = 0,
    CMH_BLOCK_ACTIVE_ALLOCATED,
    CMH_BLOCK_ACTIVE_PENDING_FREE
} cmh_block_state;

/* PyTorch's two pools.  The same numbers index the per-pool figures of cmh_mem_stats, where index
 * CMH_POOL_ALL (0) is every pool together. */
typedef enum cmh_pool { CMH_POOL_UNKNOWN = 0, CMH_POOL_SMALL = 1, CMH_POOL_LARGE = 2 } cmh_pool;
#define CMH_POOL_ALL 0

/* The pool of a segment of `size` bytes: with whole (no allocator above the driver: the segment
 * is one block) the block rule, small up to 1 MiB (kSmallSize); otherwise a caching
 * allocator's segment, small up to 2 MiB (kSmallBuffer).  The one place this rule is written. */
int cmh_pool_rule(uint64_t size, int whole);

typedef struct cmh_frame {
    uint64_t pc;       /* 0 when the source (a pickle) has none */
    uint32_t name;     /* string id */
    uint32_t filename; /* string id */
    int64_t line;
    int32_t module; /* index into modules, -1 if unknown */
} cmh_frame;

typedef struct cmh_stack {
    uint32_t first; /* into stack_frames[] */
    uint32_t count; /* innermost frame first */
} cmh_stack;

typedef struct cmh_block {
    uint64_t addr, size, requested;
    uint32_t stack;
    uint8_t state;
    int64_t time_ns;
} cmh_block;

#define CMH_SEG_EXPANDABLE 0x01
#define CMH_SEG_WHOLE_BLOCK 0x02 /* blocks were implied by the recorder, not reported */

typedef struct cmh_segment {
    int32_t device; /* -1 = pinned host */
    uint8_t kind, flags, pool;
    uint64_t addr, size, stream;
    uint64_t pool_id[2];
    uint32_t stack;
    int64_t time_ns;
    uint32_t first_block, nblocks; /* into blocks[], address order, tiling the segment */
} cmh_segment;

/* A trace entry with every field: what readers build and cmh_snapshot_add_entry takes, and what
 * cmh_entry_get gives back.  The model keeps entries in the compact form below. */
typedef struct cmh_entry_full {
    int64_t time_ns; /* ns since the Unix epoch; 0 = unknown */
    uint64_t addr;   /* for oom: device free bytes; for mark: 0 */
    uint64_t size;   /* bytes (rounded for blocks); for oom: the request */
    uint64_t requested; /* requested bytes for alloc/free, else = size */
    uint64_t stream;
    /* the memory pool the entry's block or segment belongs to (PyTorch's 'pool_id', newer
     * versions): (0, 0) the default pool or unknown, else a CUDA graph's or a MemPool's, as a
     * segment's pool_id */
    uint64_t pool_id[2];
    uint32_t stack;
    uint32_t name;            /* mark: the label (string id) */
    uint32_t compile_context; /* string id, 0 = none */
    uint32_t user_metadata;   /* string id, 0 = none */
    uint32_t thread;          /* the recording thread (1, 2, ... in order of appearance), 0 = unknown */
    uint8_t action, flags, kind;
} cmh_entry_full;

/* The fields of an entry that most entries leave at their defaults, kept once per distinct set
 * (s->xsets; set 0 is all defaults): requested = size - slack (mod 2^64), stream, name,
 * compile_context, user_metadata and thread as in cmh_entry_full, the pool id as its number in
 * s->pool_ids (0: (0, 0)), and, for an entry whose time's upper half is not in s->thighs
 * (th == CMH_TH_FAR), that upper half.  A trace repeats few sets (a thread, a stream, a compile
 * context, a private pool), so an entry holds its set's number, not the set. */
typedef struct cmh_entry_xset {
    uint64_t slack;
    uint64_t stream;
    uint32_t thread, name, compile_context, user_metadata;
    uint32_t thigh; /* the upper 32 bits of the time of an entry with th == CMH_TH_FAR, else 0 */
    uint32_t pool;  /* s->pool_ids[pool]: the entry's pool id (0: the default pool, (0, 0)) */
    uint32_t extra; /* a PyTorch entry's keys the model has no field for (cmh_extra, below; 0 none) */
    uint32_t spare; /* (no padding: a set's bytes are hashed) */
} cmh_entry_xset;

/* A memory pool's id as PyTorch writes it: (0, 0) the default pool; a CUDA graph's pool
 * (graph_pool_handle: (id, 0)) or a MemPool's ((0, id)) otherwise. */
typedef struct cmh_pool_id {
    uint64_t id[2];
} cmh_pool_id;

/* An address and a size an entry names, kept once per distinct pair (s->pairs): an alloc and
 * its free, a block and its reuse at the same place name the same pair. */
typedef struct cmh_entry_pair {
    uint64_t addr, size;
} cmh_entry_pair;

/* An entry as the model keeps it: 16 bytes, a quarter of cmh_entry_full, since a trace is most
 * of a snapshot's memory (a .cmh spends ~17 bytes an entry; the model must not hold much more).
 *  - time: its lower 32 bits here (tlo); its upper 32 bits s->thighs[th], each distinct upper
 *    half kept once (4.3 s of nanoseconds each: a trace of hours has a few thousand); past
 *    CMH_TH_FAR of them, th == CMH_TH_FAR and the upper half is in the entry's set.
 *  - address and size: s->pairs[pair].
 *  - stack, action, flags (CMH_EF_*, 4 bits), kind, and xs, the set of rarer fields.
 * Read through cmh_entry_time/_addr/_size and cmh_entry_requested/_stream/_thread/_name/
 * _compile_context/_user_metadata (or cmh_entry_get), written only through
 * cmh_snapshot_add_entry / cmh_entry_set / cmh_entry_pack.  Every table an entry names only
 * grows, so a copy of an entry of s reads against s as the entry does (but for an xs of
 * CMH_XS_FAR: cmh_entry_unpack). */
#define CMH_XS_FAR 255  /* the set's number is in s->xmap, by the entry's index */
#define CMH_TH_FAR 8191 /* the time's upper half is in the entry's set */
typedef struct cmh_entry {
    uint32_t tlo;   /* the time's lower 32 bits (ns since the Unix epoch; 0 = unknown) */
    uint32_t pair;  /* s->pairs[pair]: the address (for oom: device free bytes; for mark: 0) and
                     * size (bytes, rounded for blocks; for oom: the request) */
    uint32_t stack;
    uint32_t action : 4, flags : 4, kind : 3;
    uint32_t xs : 8; /* its set of rarer fields: 0 none, 1..254 s->xsets[xs], CMH_XS_FAR: looked up in s->xmap */
    uint32_t th : 13; /* the time's upper half: s->thighs[th], or the set's (CMH_TH_FAR) */
} cmh_entry;

/* An oom entry that memviz's shape marked retried (CMH_EF_RETRIED). */
static inline int cmh_entry_retried_oom(const cmh_entry *e) { return e->action == CMH_ACT_OOM && (e->flags & CMH_EF_RETRIED); }

/* An entry whose set's number does not fit in xs: its index in s->entries and the number. */
typedef struct cmh_entry_xref {
    uint32_t entry, xset;
} cmh_entry_xref;

typedef struct cmh_trace {
    int32_t device;
    uint64_t dropped;     /* entries the ring dropped before the first one kept */
    /* of them, the OOM entries (driver failures): the process saw them, the trace no longer
     * shows them; every count of OOMs adds them (counted as the program's, as an OOM no entry
     * after it shows retried: cmh_oom_retry), and the first OOM kept is numbered after them */
    uint64_t dropped_ooms;
    uint32_t first_entry; /* into entries[] */
    uint32_t nentries;
} cmh_trace;

typedef struct cmh_module {
    uint32_t path, build_id; /* string ids (build id in hex) */
    uint64_t base, size;
} cmh_module;

/* A recording thread (the number entries carry) and what the OS called it: its thread id and
 * its name (pthread_setname_np, prctl; at its first recorded event). */
typedef struct cmh_thread_info {
    uint32_t thread;
    int64_t tid;   /* 0 = unknown */
    uint32_t name; /* string id, 0 = none */
} cmh_thread_info;

/* Which GPU a device number was.  Device numbers are the process's own (CUDA_VISIBLE_DEVICES
 * renumbers them from 0): two processes' device 0 can be two GPUs, and one GPU can be device 0 in
 * one and device 3 in another.  The recorder asks the driver at a device's first allocation
 * (cuDeviceGetUuid_v2, cuDeviceGetName, cuDeviceGetPCIBusId).  Empty strings: not known (a
 * PyTorch snapshot, an older record). */
typedef struct cmh_device_ident {
    int32_t device;
    char uuid[48];    /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    char name[64];    /* "NVIDIA H200" */
    char pci_bus[24]; /* "0000:18:00.0" */
} cmh_device_ident;

/* A child this process forked without exec, and where its record went. */
typedef struct cmh_forked_child {
    int64_t pid;
    char *path; /* NULL: not known */
} cmh_forked_child;

typedef struct cmh_annotation {
    uint32_t name;
    uint8_t stage; /* 0 START, 1 END */
    int32_t device;
    int64_t time_ns;
} cmh_annotation;

typedef struct cmh_setting {
    uint32_t key, value; /* string ids; values kept in their text form */
    uint8_t type;        /* 0 str, 1 int, 2 float, 3 bool, 4 map (value = JSON text) */
} cmh_setting;

/* A kernel execution from the CUPTI sidecar; times on the recorder's clock (Unix epoch ns). */
typedef struct cmh_kernel {
    uint32_t name; /* string id, demangled when possible */
    int32_t device;
    uint32_t stream;
    int64_t start_ns, end_ns;
    int32_t grid[3], block[3];
    uint32_t registers, shared_bytes, correlation;
} cmh_kernel;

/* An open-addressing table (its functions: snapshot/oatab.h): records of `esize` bytes keyed by
 * their first 8. */
typedef struct cmh_oatab {
    unsigned char *slots;
    uint32_t cap, n; /* capacity (0 or a power of two), records held */
    uint32_t esize;  /* bytes per record, key first */
} cmh_oatab;

typedef struct cmh_strtab {
    char **str; /* str[0] = "" */
    uint32_t n, cap;
    cmh_oatab index; /* content hash -> id (id 0 is never looked up) */
} cmh_strtab;

typedef enum cmh_source { CMH_SRC_RECORDER = 0, CMH_SRC_PYTORCH = 1 } cmh_source;

/* Which optional PyTorch fields the source carried (so a pickle written back has the same keys). */
#define CMH_PT_TIME_US 0x01
#define CMH_PT_COMPILE_CONTEXT 0x02
#define CMH_PT_USER_METADATA 0x04
#define CMH_PT_ALLOCATOR_SETTINGS 0x08
#define CMH_PT_EXTERNAL_ANNOTATIONS 0x10
#define CMH_PT_LEGACY_HISTORY 0x20 /* PyTorch <= 2.0 block 'history' layout */
#define CMH_PT_BARE_SEGMENTS 0x40  /* memory_snapshot(): a bare list of segments */
#define CMH_PT_FROM_RECORDER 0x80  /* a pickle exported from a recorder snapshot (viz/memviz.c) */
#define CMH_PT_POOL_ID 0x100       /* trace entries said their 'pool_id' (newer PyTorch), even (0, 0) */
#define CMH_PT_NO_REQUESTED 0x200  /* some live block had no 'requested_size': its size stands in */
#define CMH_PT_UNKNOWN_ACTIONS 0x400 /* some trace entry's action was not one this version knows (CMH_EF_UNKNOWN_ACTION) */
/* A PyTorch snapshot's marks are its own trace entries ('annotate', 'user_defined'): an export
 * writes them back in place, as 'annotate' entries, so that its entry numbers stay PyTorch's. */
#define CMH_PT_MARKS_INLINE(s) ((s)->source == CMH_SRC_PYTORCH && !((s)->pt_fields & CMH_PT_FROM_RECORDER))

/* The keys of a PyTorch dict (top level, segment, block, trace entry, frame) that the model has no
 * field for, kept so that a pickle written back has every key PyTorch wrote (newer versions add
 * keys: 'internal_metadata', 'forward_frames', frames' 'fx_*'): one string per dict, its keys
 * and values in order, each value as
 *   N | T | F | i<decimal>; | d<C99 hex float>; | s<bytes>:<utf-8> | [values] | (values) | {key value ...}
 * (frames and stacks written out as the dicts and lists they were).  pickle_model.c makes it,
 * pickle_write.c writes it back, viz/memviz.c carries it over; nothing else reads it.  A trace
 * entry's is in its set of rarer fields (cmh_entry_extra); the others' in s->extras. */
enum { CMH_X_SEGMENT, CMH_X_BLOCK, CMH_X_FRAME, CMH_X_COUNT };
typedef struct cmh_extra {
    uint32_t index; /* the segment's, block's or frame's */
    uint32_t text;  /* string id */
} cmh_extra;

typedef struct cmh_meminfo {
    int32_t device;
    int64_t time_ns;
    uint64_t free, total; /* bytes */
    /* the recording thread that took it right after its own call returned (a device's first
     * allocation, an OOM), as entries number threads; 0: none (a dump's) or not known.  Its own
     * calls are all recorded by then; another thread's may have left the driver, not yet logged */
    uint32_t thread;
} cmh_meminfo;

/* Physical memory made with cuMemCreate that was still held (not released with cuMemRelease)
 * and mapped nowhere when the snapshot was taken: memory the driver charges to the process that
 * no segment shows.  One per handle. */
typedef struct cmh_vmm_handle {
    int32_t device;
    uint64_t size;   /* bytes, as cuMemCreate was asked */
    uint32_t stack;  /* the cuMemCreate call's stack (0: none captured) */
    int64_t time_ns; /* when it was created (0: unknown) */
} cmh_vmm_handle;

/* One cuMemMap the recorder saw (.cmh "vmm_maps"): the range it mapped and the cuMemCreate
 * handle whose memory it mapped.  The driver charges a handle's whole size once, from its
 * creation until it is released and unmapped everywhere, however many ranges map it (the same
 * handle at two addresses is one allocation) and however little of it is mapped: the trace's
 * segment_map entries say the address range only, this table says whose memory it is
 * (cmh_physmap, analyzer/physmap.c).  One row per map, in the order made. */
typedef struct cmh_vmm_map {
    int32_t device;
    uint64_t addr, size; /* the range mapped, as its segment_map entry says it */
    int64_t time_ns;     /* the map's segment_map entry's time */
    uint64_t handle;     /* the handle's number in this record (1, 2, ...: a value the driver reuses is a new number) */
    uint64_t handle_size;     /* bytes cuMemCreate made */
    uint32_t handle_stack;    /* the cuMemCreate call's stack (0: none) */
    int64_t handle_time_ns;   /* when it was made (0: unknown) */
} cmh_vmm_map;

/* A cuMemCreate handle released with cuMemRelease while the recorder watched (.cmh
 * "vmm_released"): the driver charges a handle from its making until its release, unmapped or
 * never mapped in between (a handle released while mapped: until its last unmap).  Without these
 * rows a handle unmapped and released later counted only until its unmap, and one made and
 * released without a map was never seen (physmap.c).  One per release, in the order made. */
typedef struct cmh_vmm_release {
    int32_t device;
    uint64_t handle;    /* the record's number of it, as vmm_maps names it (none of its rows: never mapped) */
    uint64_t size;      /* bytes cuMemCreate made */
    uint32_t stack;     /* the cuMemCreate call's stack (0: none) */
    int64_t time_ns;    /* when it was made (0: unknown) */
    int64_t release_ns; /* when cuMemRelease released it */
} cmh_vmm_release;

/* Driver calls of the memory API that failed with an error other than out-of-memory (those are
 * the trace's oom entries): a double free, a free of a pointer never allocated or of an address
 * inside an allocation (cuMemFree returns CUDA_ERROR_INVALID_VALUE), a release of a handle
 * already released...  One per (call, result): how many times, and the first
 * CMH_DRV_ERROR_SITES of them (.cmh "driver_errors"). */
#define CMH_DRV_ERROR_SITES 8
typedef struct cmh_drv_error_site {
    uint64_t addr, size; /* the address (or handle) the call was given, and the bytes asked (0: none) */
    uint32_t thread;     /* the calling thread, as entries number them (0: not known) */
    uint32_t stack;      /* its stack (0: none captured: --context none) */
    int64_t time_ns;     /* when (0: unknown) */
} cmh_drv_error_site;
typedef struct cmh_drv_error {
    char call[32];   /* the driver entry point, by its base name ("cuMemFree") */
    int32_t result;  /* the CUresult it returned */
    uint64_t count;  /* how many times */
    uint32_t nsites; /* the first of them, at most CMH_DRV_ERROR_SITES */
    cmh_drv_error_site sites[CMH_DRV_ERROR_SITES];
} cmh_drv_error;

/* What a snapshot recovered from a flight record could not read of it (.cmh "history_lost";
 * absent from a record read whole, and from every dump): the history ends early or has holes,
 * so what the reports find is over part of what the process did, and no verdict over it may
 * pass as clean (cmh_history_lost_write says it; `leaks --fail-on-leak` exits 5).  Zero
 * everywhere: nothing lost. */
typedef struct cmh_history_lost {
    uint64_t cut_bytes;   /* bytes of written records past the file's end (a copy cut short): lost */
    uint64_t file_bytes;  /* the flight record's size when read: its readable part ends there (0: not cut) */
    uint64_t read_to;     /* with cut_bytes: the byte after the last record read whole before the cut */
    uint64_t torn;        /* records skipped, torn (their writer died in them, or the cut went through them) */
    uint64_t damaged;     /* records skipped, whole but not matching their checksum */
    uint64_t refused;     /* records the full journal had no room for */
} cmh_history_lost;
/* Did the record lose part of its history (any count above not 0)? */
#define CMH_HISTORY_LOST(h) ((h)->cut_bytes || (h)->torn || (h)->damaged || (h)->refused)
/* Lost beyond the death itself: records cut off, damaged or refused.  Torn records alone are the
 * calls a death caught mid-write (each thread's one in flight, and those after it): said, but a
 * SIGKILL that lands mid-write or between two calls must give the same verdict. */
#define CMH_HISTORY_LOST_BEYOND_DEATH(h) ((h)->cut_bytes || (h)->damaged || (h)->refused)

typedef struct cmh_snapshot {
    uint32_t version;
    uint8_t source;
    uint16_t pt_fields;       /* CMH_PT_* */
    uint64_t skipped_entries; /* trace entries left out: a size out of range (actions this version does not know are kept: CMH_EF_UNKNOWN_ACTION) */
    uint8_t unverified;       /* a .cmh written before checksums: read without a check of its bytes */
    /* meta */
    int64_t pid;
    uint32_t hostname, cmdline; /* string ids */
    uint32_t ending;            /* string id: how the process ended, when the record knows (0: not said) */
    /* a PyTorch pickle's keys the model has no field for (cmh_extra, below): the top level's, and
     * by kind (CMH_X_*) each segment's, block's and frame's that had any, ascending by index */
    uint32_t pt_extra;
    cmh_extra *extras[CMH_X_COUNT];
    uint32_t nextras[CMH_X_COUNT], cap_extras[CMH_X_COUNT];
    int64_t start_time_ns, dump_time_ns;
    /* the origin of the record's clock as the record it was exported from had it (a pickle's
     * cumemhist.clock_origin_ns), whose earliest event the export may have left out (pinned host
     * memory): cmh_snapshot_clock_origin; 0: none said, the earliest event is the origin */
    int64_t clock_origin_ns;
    uint8_t opt_enabled, opt_context;
    uint64_t opt_max_entries;
    int32_t opt_max_frames;
    uint64_t lost_events;
    /* who wrote it and which process of a job it was (.cmh "process"; absent = unknown) */
    char producer[48];                   /* "cumemhist 0.1.0": the recorder, or the command that wrote it */
    int32_t rank, local_rank, world_size; /* from RANK/LOCAL_RANK/WORLD_SIZE (or SLURM, Open MPI); -1 unknown */
    int64_t forked_from; /* the pid this process was forked from (a fork without exec); 0: it was not, or unknown */
    /* the children this process forked without exec, in order (.cmh process.children; none in
     * an older record): each one's pid and the path its own record takes as the recorder computed
     * it (NULL: not known; relative to the process's working directory); children_more: those
     * forked past the ones kept.  Owned by the snapshot (cmh_snapshot_add_child). */
    cmh_forked_child *children;
    uint32_t nchildren, children_more;

    cmh_strtab strings;
    cmh_frame *frames;
    uint32_t nframes, cap_frames;
    uint32_t *stack_frames;
    uint32_t nstack_frames, cap_stack_frames;
    cmh_stack *stacks;
    uint32_t nstacks, cap_stacks;
    cmh_oatab stack_index; /* interning: content hash -> stack id */
    cmh_module *modules;
    uint32_t nmodules, cap_modules;
    cmh_segment *segments;
    uint32_t nsegments, cap_segments;
    cmh_block *blocks;
    uint32_t nblocks, cap_blocks;
    cmh_entry *entries;
    uint32_t nentries, cap_entries;
    cmh_entry_pair *pairs; /* the (address, size) pairs entries name */
    uint32_t npairs, cap_pairs;
    cmh_oatab pair_index;  /* interning: (address, size) hash -> pair number */
    uint32_t pair_last;    /* the pair interned last */
    uint32_t *thighs;      /* the upper halves of entries' times */
    uint32_t nthighs, cap_thighs;
    uint32_t thigh_last;   /* the upper half interned last */
    cmh_entry_xset *xsets; /* [0] all defaults (or NULL while no entry has another set) */
    uint32_t nxsets, cap_xsets;
    cmh_oatab xset_index;  /* interning: content hash -> set number */
    uint32_t xset_last;    /* the set interned last (a trace repeats its sets in runs) */
    cmh_pool_id *pool_ids; /* the pools entries name ([0] = (0, 0), or NULL while none names another) */
    uint32_t npool_ids, cap_pool_ids;
    cmh_oatab pool_index;  /* interning: pool id hash -> number */
    cmh_entry_xref *xmap;  /* the entries with xs == CMH_XS_FAR, by ascending entry index */
    uint32_t nxmap, cap_xmap;
    cmh_trace *traces;
    uint32_t ntraces, cap_traces;
    cmh_annotation *annotations;
    uint32_t nannotations, cap_annotations;
    cmh_setting *settings;
    uint32_t nsettings, cap_settings;
    cmh_kernel *kernels; /* in completion order */
    uint32_t nkernels, cap_kernels;
    uint64_t kernels_dropped;
    uint32_t kernels_status; /* string id: 0 = not asked for; "ok"; or why timing is unavailable */
    /* what the driver said of each device's memory (cuMemGetInfo), at moments the recorder chose */
    cmh_meminfo *meminfo;
    uint32_t nmeminfo, cap_meminfo;
    /* cuMemCreate handles held but not mapped at the snapshot (.cmh "vmm_unmapped") */
    cmh_vmm_handle *vmm_unmapped;
    uint32_t nvmm_unmapped, cap_vmm_unmapped;
    /* every cuMemMap and the handle it mapped (.cmh "vmm_maps"; none in older records) */
    cmh_vmm_map *vmm_maps;
    uint32_t nvmm_maps, cap_vmm_maps;
    /* every cuMemRelease (.cmh "vmm_released"; none in older records) */
    cmh_vmm_release *vmm_released;
    uint32_t nvmm_released, cap_vmm_released;
    /* the recording threads the recorder could name, by number (cmh_snapshot_thread) */
    cmh_thread_info *threads;
    uint32_t nthreads, cap_threads;
    /* which GPU each device number was (.cmh "device_ids"; none for a PyTorch snapshot) */
    cmh_device_ident *idents;
    uint32_t nidents, cap_idents;
    /* failed driver calls other than OOMs (.cmh "driver_errors"; none in older records) */
    cmh_drv_error *drv_errors;
    uint32_t ndrv_errors, cap_drv_errors;
    /* what a recovery from a flight record could not read (.cmh "history_lost"; zero: nothing) */
    cmh_history_lost history_lost;
    /* PyTorch's own snapshot of the same process, taken with ours (co-recording, `merge`): its
     * caching allocator's segments, blocks, trace and stacks, in its own model; NULL if none.
     * torch_clock_ns: add it to a time of PyTorch's part to get ours (the two clocks aligned). */
    struct cmh_snapshot *torch;
    int64_t torch_clock_ns;
} cmh_snapshot;

/* A segment's pool: its own when the source said, else cmh_pool_rule. */
int cmh_segment_pool(const cmh_segment *g);

/* Model building.  All return CMH_OK or CMH_ENOMEM. */
int cmh_snapshot_init(cmh_snapshot *s);
void cmh_snapshot_free(cmh_snapshot *s);
int cmh_strtab_intern(cmh_strtab *t, const char *str, size_t len, uint32_t *id);
/* A source's string that may hold NUL bytes (PyTorch writes any str: a demangled C++ name can
 * carry one): each NUL is held as the pair C0 80, which is never valid UTF-8 and so never a
 * string's own bytes; the pickle writer gives the NUL back, text outputs show it escaped
 * (cmh_str_escape), JSON writes \u0000. */
int cmh_strtab_intern_bytes(cmh_strtab *t, const char *str, size_t len, uint32_t *id);
#define CMH_IS_NUL_PAIR(p) ((unsigned char)(p)[0] == 0xC0 && (unsigned char)(p)[1] == 0x80)
/* in for a text output: the held NULs as "\x00" (and other control characters as "\xNN", which
 * a terminal would act on); out of cap bytes, truncated to fit; returns out */
char *cmh_str_escape(const char *in, char *out, size_t cap);
/* The length of a function name without the suffixes a compiler gives its clones of it
 * ("f.isra.0", "f.constprop.0.part.1", "f.cold", "f.lto_priv.0", "f.llvm.123", and a demangled
 * name's " [clone .isra.0]"): the source's name, the one people look for. */
size_t cmh_name_base_len(const char *name);

static inline const char *cmh_str(const cmh_snapshot *s, uint32_t id)
{
    return id < s->strings.n ? s->strings.str[id] : "";
}
int cmh_snapshot_add_frame(cmh_snapshot *s, const cmh_frame *f, uint32_t *id);
/* Interns a stack given as frame ids (innermost first); identical stacks share one id. */
int cmh_snapshot_add_stack(cmh_snapshot *s, const uint32_t *frame_ids, uint32_t n, uint32_t *id);
/* After the stacks' frames were rewritten in place: index them again for interning. */
int cmh_snapshot_reindex_stacks(cmh_snapshot *s);
int cmh_snapshot_add_segment(cmh_snapshot *s, const cmh_segment *seg, cmh_segment **out);
int cmh_snapshot_add_meminfo(cmh_snapshot *s, const cmh_meminfo *m);
int cmh_snapshot_add_vmm_unmapped(cmh_snapshot *s, const cmh_vmm_handle *h);
int cmh_snapshot_add_vmm_map(cmh_snapshot *s, const cmh_vmm_map *m);
int cmh_snapshot_add_vmm_release(cmh_snapshot *s, const cmh_vmm_release *r);
int cmh_snapshot_add_drv_error(cmh_snapshot *s, const cmh_drv_error *e);
/* The CUresult's name ("CUDA_ERROR_INVALID_VALUE"); "CUresult N" written into buf for one not known. */
const char *cmh_cuda_error_name(int32_t result, char *buf, size_t n);
/* What the trace says of addr at time t (a refused free's address), in buf: "freed already (a
 * double free)", "inside the live 4.0 MiB allocation at 0x... (+4096 bytes), not its base",
 * "never allocated while recorded" or "live in the trace". */
const char *cmh_driver_error_what(const cmh_snapshot *s, uint64_t addr, int64_t t, char *buf, size_t n);
/* Whether a failed call's address is one cmh_driver_error_what can judge: a free's or an
 * unmap's, which name an address the trace saw (cuMemRelease names a handle, an allocation
 * call an address it never returned).  Every output that says the verdict asks this. */
int cmh_driver_error_judged(const char *call);
int cmh_snapshot_add_block(cmh_snapshot *s, const cmh_block *b);
int cmh_snapshot_add_trace(cmh_snapshot *s, int32_t device, uint64_t dropped, cmh_trace **out);
int cmh_snapshot_add_entry(cmh_snapshot *s, const cmh_entry_full *e); /* into the last trace */
/* At the end of s->entries, no trace told: for a caller that sets its traces' ranges itself. */
int cmh_snapshot_append_entry(cmh_snapshot *s, const cmh_entry_full *e);
int cmh_snapshot_reserve_entries(cmh_snapshot *s, uint32_t more); /* room for more entries, exactly */
int cmh_snapshot_add_module(cmh_snapshot *s, const cmh_module *m);
int cmh_snapshot_add_thread(cmh_snapshot *s, const cmh_thread_info *t);
/* What is known of recording thread `thread` (NULL: nothing). */
const cmh_thread_info *cmh_snapshot_thread(const cmh_snapshot *s, uint32_t thread);
/* The record's clock (docs/DEFINITIONS.md "The record's clock"): *lo its origin, the earliest of
 * its events (entries of every device and of pinned host memory, kernels, PyTorch's part of an
 * unmerged record on our clock) and of the origin it was exported with (clock_origin_ns); *hi
 * its latest event.  INT64_MAX and INT64_MIN when it has no timed event.  Analyses ask
 * cmh_clock_origin (analyzer.h), which keeps the answer. */
void cmh_snapshot_clock_span(const cmh_snapshot *s, int64_t *lo, int64_t *hi);
/* Its origin alone (0: no timed event) */
int64_t cmh_snapshot_clock_origin(const cmh_snapshot *s);
/* Add (or, for a device already there, replace) what is known of which GPU a device was. */
int cmh_snapshot_add_ident(cmh_snapshot *s, const cmh_device_ident *d);
/* Which GPU device was, or NULL when the record does not say (no UUID known). */
const cmh_device_ident *cmh_snapshot_ident(const cmh_snapshot *s, int device);
/* The UUID's text as CUDA_VISIBLE_DEVICES and nvidia-smi write it ("GPU-" and 36 characters)
 * from the driver's 16 bytes. */
void cmh_uuid_text(const unsigned char bytes[16], char out[48]);
/* A child forked without exec appended to s->children (path copied; NULL: not known). */
int cmh_snapshot_add_child(cmh_snapshot *s, int64_t pid, const char *path);
/* Number the recording threads in the order the OS made them (their thread ids: the main
 * thread first, then each thread as it was created), the same for every run of a program that
 * creates its threads in the same order, rather than in the order they first recorded (a race
 * between threads); threads without an id follow, in their old order.  Rewrites every entry's
 * thread and the table.  Readers call it on what they load. */
int cmh_snapshot_number_threads(cmh_snapshot *s);
int cmh_snapshot_add_annotation(cmh_snapshot *s, const cmh_annotation *a);
int cmh_snapshot_add_setting(cmh_snapshot *s, const char *key, const char *value, uint8_t type);
int cmh_snapshot_add_kernel(cmh_snapshot *s, const cmh_kernel *k);
/* The extra keys (cmh_extra) of segment, block or frame `index` of kind `what`: added in
 * ascending index order; looked up by it (0: none). */
int cmh_snapshot_add_extra(cmh_snapshot *s, int what, uint32_t index, uint32_t text);
uint32_t cmh_snapshot_extra(const cmh_snapshot *s, int what, uint32_t index);

/* Queries.  Devices that appear in a snapshot (a trace with entries or OOMs, or segments), ascending with
 * pinned host memory (-1) last; fills up to cap and returns how many there are. */
int cmh_snapshot_devices(const cmh_snapshot *s, int32_t *out, int cap);
/* The devices its traces list, empty ones too (PyTorch lists every device it saw, used or not),
 * ascending as cmh_snapshot_devices; fills up to cap and returns how many there are. */
int cmh_snapshot_listed_devices(const cmh_snapshot *s, int32_t *out, int cap);
/* The trace of a device, NULL when it has none. */
const cmh_trace *cmh_snapshot_trace(const cmh_snapshot *s, int device);
/* Whether entry i of tr, in PyTorch's shape (cmh_memviz_shape), is the segment_free (or
 * segment_unmap) of a whole block the trace never saw allocated (the ring dropped its allocation,
 * or it was made before recording) whose stack is the free's own (context all): memory_viz takes a
 * pre-trace segment's segment_free for the segment's element and its frames for its origin, so
 * every writer in that shape gives it no stack and keeps the free's apart (the pickle's
 * cumemhist.free_frames, the JSON export's free_stack). */
int cmh_entry_free_stack_aside(const cmh_snapshot *s, const cmh_trace *tr, uint32_t i);

/* An entry's rarer fields (cmh_entry_xset).  e must be one of s->entries (or xs must be below
 * CMH_XS_FAR: a copy of an entry of s is read against s too). */
extern const cmh_entry_xset cmh_xset_none;
const cmh_entry_xset *cmh_entry_xfar(const cmh_snapshot *s, const cmh_entry *e);
static inline const cmh_entry_xset *cmh_entry_x(const cmh_snapshot *s, const cmh_entry *e)
{
    if (__builtin_expect(!e->xs, 1)) return &cmh_xset_none;
    return e->xs < CMH_XS_FAR ? &s->xsets[e->xs] : cmh_entry_xfar(s, e);
}
static inline uint64_t cmh_entry_addr(const cmh_snapshot *s, const cmh_entry *e) { return s->pairs[e->pair].addr; }
static inline uint64_t cmh_entry_size(const cmh_snapshot *s, const cmh_entry *e) { return s->pairs[e->pair].size; }
static inline int64_t cmh_entry_time(const cmh_snapshot *s, const cmh_entry *e)
{
    uint32_t hi = __builtin_expect(e->th != CMH_TH_FAR, 1) ? s->thighs[e->th] : cmh_entry_x(s, e)->thigh;
    return (int64_t)(((uint64_t)hi << 32) | e->tlo);
}
static inline uint64_t cmh_entry_requested(const cmh_snapshot *s, const cmh_entry *e) { return cmh_entry_size(s, e) - cmh_entry_x(s, e)->slack; }
static inline uint64_t cmh_entry_stream(const cmh_snapshot *s, const cmh_entry *e) { return cmh_entry_x(s, e)->stream; }
static inline uint32_t cmh_entry_thread(const cmh_snapshot *s, const cmh_entry *e) { return cmh_entry_x(s, e)->thread; }
static inline uint32_t cmh_entry_name(const cmh_snapshot *s, const cmh_entry *e) { return cmh_entry_x(s, e)->name; }
static inline uint32_t cmh_entry_compile_context(const cmh_snapshot *s, const cmh_entry *e) { return cmh_entry_x(s, e)->compile_context; }
static inline uint32_t cmh_entry_user_metadata(const cmh_snapshot *s, const cmh_entry *e) { return cmh_entry_x(s, e)->user_metadata; }
static inline uint32_t cmh_entry_extra(const cmh_snapshot *s, const cmh_entry *e) { return cmh_entry_x(s, e)->extra; }
/* A pool id's number in s->pool_ids (interned: 0 for (0, 0)), as entries' sets hold it. */
int cmh_snapshot_pool_number(cmh_snapshot *s, const uint64_t id[2], uint32_t *number);
/* Whether a PyTorch export should say each entry's pool_id: the source did (CMH_PT_POOL_ID), or
 * an entry is a private pool's (looked up in the entries' sets, which only entries make). */
int cmh_snapshot_entry_pools(const cmh_snapshot *s);
/* The entry's pool id; (0, 0) for the default pool and for an entry whose source did not say. */
static inline cmh_pool_id cmh_entry_pool_id(const cmh_snapshot *s, const cmh_entry *e)
{
    uint32_t p = cmh_entry_x(s, e)->pool;
    return p && p < s->npool_ids ? s->pool_ids[p] : (cmh_pool_id){{0, 0}};
}
/* Every field of an entry of s. */
void cmh_entry_get(const cmh_snapshot *s, const cmh_entry *e, cmh_entry_full *out);
/* The same for an entry kept apart from s->entries with its own map of far sets (xmap, nxmap;
 * index: the entry's place in that map), its sets still s's. */
void cmh_entry_unpack(const cmh_snapshot *s, const cmh_entry *e, const cmh_entry_xref *xmap, uint32_t nxmap, uint32_t index,
                      cmh_entry_full *out);
/* Its set of rarer fields, read the same way (the extra keys, cmh_extra, are only there: the full
 * form has no field for them). */
const cmh_entry_xset *cmh_entry_x_apart(const cmh_snapshot *s, const cmh_entry *e, const cmh_entry_xref *xmap, uint32_t nxmap,
                                        uint32_t index);
/* Rewrite entry i of s in place with every field of e (CMH_OK or CMH_ENOMEM). */
int cmh_entry_set(cmh_snapshot *s, uint32_t i, const cmh_entry_full *e);
/* Entry i's extra keys (cmh_extra, a string id of s; 0 none) replaced, its fields kept. */
int cmh_entry_set_extra(cmh_snapshot *s, uint32_t i, uint32_t extra);
/* The compact form of e as an entry of s at index i, its set interned (*far: the number when it
 * does not fit in xs, for s->xmap; 0 when it fits).  For a builder that fills s->entries itself. */
int cmh_entry_pack(cmh_snapshot *s, const cmh_entry_full *e, cmh_entry *out, uint32_t *far);
/* The same with the entry's extra keys (cmh_extra, a string id of s; 0 none), and the
 * cmh_snapshot_append_entry that keeps them. */
int cmh_entry_pack_extra(cmh_snapshot *s, const cmh_entry_full *e, uint32_t extra, cmh_entry *out, uint32_t *far);
int cmh_snapshot_append_entry_extra(cmh_snapshot *s, const cmh_entry_full *e, uint32_t extra);
int cmh_snapshot_add_entry_extra(cmh_snapshot *s, const cmh_entry_full *e, uint32_t extra); /* into the last trace */

/* Writing a file (snapshot/atomic.c): the one rule for every output, by what is at the path.
 * Missing or a regular file (or a symlink, which is never followed: the link is replaced, and
 * stderr says what it pointed to): written to a temporary file beside it (mode 0600, O_EXCL |
 * O_NOFOLLOW), fsync'ed, renamed over it; readers see the old file or the new one whole.  A
 * replaced regular file of the user's own passes on its permissions: all of its bits with
 * CMH_OUT_SHARED (an output meant for sharing), else (a snapshot) only the group's and others'
 * read bits on top of 0600.  A FIFO, a character device (a
 * terminal, /dev/null, /dev/full), "-" and this process's own /dev/stdout, /dev/stderr,
 * /dev/fd/N: written through, unless CMH_OUT_SEEKABLE says the format needs a seekable file,
 * then refused.  A directory, a block device, a socket: refused.  err gets a one-line message
 * naming the path; nothing that is not a regular file this process made is ever removed.
 *
 * cmh_output_open gives a stream; cmh_output_begin only the descriptor and, for a library that
 * opens files by name (SQLite), tmppath.  cmh_atomic_commit puts it in place, or removes it and
 * says why (CMH_EIO); cmh_atomic_abort removes it.  cmh_atomic_open is cmh_output_open(.., 0). */
/* Two more rules keep what the user has.  A file that holds a recording (a .cmh snapshot, a
 * flight record, a pickle) is never replaced by an output that is not one (CMH_OUT_SHARED: a
 * report, a picture, JSON...): `report run.cmh -o run.cmh` is refused, not an HTML page where the
 * only copy of the record was.  And with cmh_inputs_guard(1) (the command line sets it), every
 * file a load opened is remembered, and no output may replace one of them.  CMH_OUT_PUBLIC: a new
 * file gets 0666 less the umask, not 0600 (a file another user's program must read: the
 * exporter's node_exporter textfile). */
enum { CMH_OUT_SEEKABLE = 1, CMH_OUT_SHARED = 2, CMH_OUT_PUBLIC = 4 };
/* What an output is, said with CMH_OUT_AS(kind) in its flags: then a non-empty regular file at
 * its path is replaced only when it holds what this output itself would have written (our own
 * earlier output of that kind, known by its mark: a .cmh's format key, our pickle's `cumemhist`
 * dict, our SQLite's application_id or schema, our JSON's `cumemhist` object, our trace's and
 * pprof's gzip header comment, our page's title or picture's header, folded stacks' order, the
 * exporter textfile's first line), or when the
 * user said --force (cmh_outputs_force); else it is refused (EEXIST), err naming the file, what
 * it seems to hold and --force.  An empty file holds nothing to lose: replaced. */
enum { CMH_KIND_CMH = 1, CMH_KIND_PICKLE, CMH_KIND_JSON, CMH_KIND_CHROME, CMH_KIND_PPROF, CMH_KIND_SQLITE, CMH_KIND_PAGE, CMH_KIND_METRICS };
/* The marks written for it: a pprof profile's gzip header comment (FCOMMENT, right after the 10
 * bytes of the header), and the first line of the exporter's textfile (a Prometheus comment). */
#define CMH_PPROF_GZIP_MARK "cumemhist pprof profile"
#define CMH_METRICS_MARK "# cumemhist exporter textfile (node_exporter's textfile collector reads it)\n"
#define CMH_OUT_AS(kind) ((unsigned)(kind) << 8)
#define CMH_SQLITE_APPLICATION_ID 0x434d4844 /* "CMHD": PRAGMA application_id of our databases */
int cmh_outputs_force(int on); /* the command line's --force, for every output of this process; returns what it was */
int cmh_inputs_guard(int on); /* returns what it was */
/* Remember an input (the loaders call it; a reader of other files may too). */
void cmh_input_opened(int fd);
/* What recording the file at path holds, by its first bytes ("a cumemhist snapshot (.cmh)", "a
 * flight record", "a pickle (...)"), or NULL: something else, or unreadable. */
const char *cmh_recording_kind(const char *path);
typedef struct cmh_atomic {
    int dirfd, fd;
    int direct; /* writing to path itself (not a regular file) */
    unsigned mode; /* the file's permissions at the commit (0: 0600) */
    FILE *fp;
    char path[4096], base[1024], tmp[1100], tmppath[5200];
    char link[1024]; /* what a symbolic link replaced pointed to ("" when none) */
} cmh_atomic;
int cmh_output_begin(cmh_atomic *a, const char *path, unsigned flags, char *err, size_t errlen);
FILE *cmh_output_open(cmh_atomic *a, const char *path, unsigned flags, char *err, size_t errlen);
FILE *cmh_atomic_open(cmh_atomic *a, const char *path, char *err, size_t errlen);
int cmh_atomic_commit(cmh_atomic *a, char *err, size_t errlen);
void cmh_atomic_abort(cmh_atomic *a);
/* Where a process's own file is told apart from PATH (PATH.PID.cmh for PATH.cmh): the dot of the
 * last component's extension, else the end of path (a name that starts with its only dot, such
 * as ".cmh", has no extension). */
const char *cmh_path_ext(const char *path);

/* Who a process is beyond its pid (snapshot/procid.c).  cmh_proc_stat: its state letter (may be
 * NULL) and start time in clock ticks after boot, of pid (0: this process); 0 when it is not
 * there.  cmh_boot_id: the boot's id ("" when unknown). */
int cmh_proc_stat(long long pid, char *state, uint64_t *start_ticks);
void cmh_boot_id(char *out, size_t cap);
/* Who wrote a record and how far it goes, all that tells two records of one process apart
 * (cmh_record_id_of; small, for a command that weighs many records without keeping them). */
typedef struct cmh_record_id {
    int64_t pid, start_time_ns, dump_time_ns;
    char host[256];
    uint64_t reach;  /* trace entries recorded by then, kept or dropped by the ring (0: not read) */
    uint32_t kept;   /* of them, kept */
    int torch;       /* it holds PyTorch's part */
    int lost;        /* it lost part of its history beyond its death (cut, damaged, refused) */
} cmh_record_id;
void cmh_record_id_of(const cmh_snapshot *s, cmh_record_id *id);
/* Whether two records are of one process: the same pid, host and start time, as each record says
 * them (a record that says no pid or no start time, PyTorch's own pickle, is no other's).  Two
 * such records are copies of one (a .cmh and its export as a pickle), or snapshots of it taken at
 * two moments (SIGUSR1, then its exit or its recovery from the flight record). */
int cmh_same_process(const cmh_record_id *a, const cmh_record_id *b);
/* Of two records of one process (read alike: both whole, or both without traces), what a holds
 * against b.  a holds all of b's when its history reaches as far (as many trace entries, kept
 * and dropped by the ring; read without entries, a dump as late; a history lost in part never
 * counting as more) and b has no PyTorch part that a lacks.  CMH_HOLDS_SAME: each holds all of
 * the other's (copies); MORE: a holds all of b's and more; LESS: b all of a's and more; APART:
 * each holds something the other lacks (a recovery, without PyTorch's part, of a process whose
 * SIGUSR1 snapshot has it). */
enum { CMH_HOLDS_SAME, CMH_HOLDS_MORE, CMH_HOLDS_LESS, CMH_HOLDS_APART };
int cmh_record_holds(const cmh_record_id *a, const cmh_record_id *b);

/* The .cmh codec (docs/FORMAT.md). */
/* 1; 2 when the file carries PyTorch's part ("torch"), the version it is written with then */
#define CMH_FORMAT_VERSION 2
int cmh_cmh_write(const cmh_snapshot *s, FILE *fp);
/* Write to path atomically (cmh_atomic_open). */
int cmh_cmh_write_file(const cmh_snapshot *s, const char *path, char *err, size_t errlen);
/* The same with the traces' entries streamed from elsewhere (the recorder's rings) instead of
 * s->entries: trace i has s->traces[i].nentries entries (its first_entry unused), and entry k of
 * it is asked of src, in order k = 0, 1, ... for each trace (thread() may be asked any number of
 * times, in order too, and must say the thread entry() put in out->thread).  Every string and
 * stack an entry names must already be in s. */
typedef struct cmh_entry_source {
    void *arg;
    void (*entry)(void *arg, uint32_t trace, uint64_t k, cmh_entry_full *out);
    uint32_t (*thread)(void *arg, uint32_t trace, uint64_t k);
} cmh_entry_source;
int cmh_cmh_write_file_source(const cmh_snapshot *s, const cmh_entry_source *src, const char *path, char *err, size_t errlen);
/* Read from a buffer into s (initialized here); on failure err says what and at which byte. */
int cmh_cmh_read(const void *buf, size_t len, cmh_snapshot *s, char *err, size_t errlen);

/* PyTorch pickles (snapshot/pickle_read.c, pickle_write.c; docs/PYTORCH.md). */
int cmh_pickle_read(const void *buf, size_t len, cmh_snapshot *s, char *err, size_t errlen);
/* Protocol 4, only the opcodes memory_viz accepts; see pickle_write.c for the shaping rules. */
int cmh_pickle_write(const cmh_snapshot *s, FILE *fp);
/* A mark (cmh_mark, SIGUSR2) that a memory_viz pickle carries aside, in its `cumemhist` dict:
 * memory_viz has no such action (it sees the mark as an annotation), the reader puts it back in
 * its trace.  pos counts the device's entries before it that a reader keeps (PyTorch's actions
 * not implied, and pool samples); name is a string id of the snapshot written. */
typedef struct cmh_pickle_mark {
    int32_t device;
    uint64_t pos;
    uint32_t name, thread;
    int64_t time_ns;
} cmh_pickle_mark;
int cmh_pickle_write_marks(const cmh_snapshot *s, const cmh_pickle_mark *marks, uint32_t nmarks, FILE *fp);
/* How many entries cmh_pickle_write puts in s's device_traces (the writer's own rule: marks
 * aside, a retried OOM aside, pinned host memory left out), and of them in *implied (when given)
 * those marked implied (CMH_EF_IMPLIED: a free memory_viz needs that the trace lacks, which
 * cumemhist drops when it reads the pickle back). */
uint64_t cmh_pickle_trace_entries(const cmh_snapshot *s, uint64_t *implied);

/* Load any snapshot file (.cmh or PyTorch pickle, by content).  err gets a one-line message
 * naming the file, e.g. "snap.cmh: truncated at byte 18231 (expected 4 more bytes)". */
int cmh_snapshot_load(const char *path, cmh_snapshot *s, char *err, size_t errlen);
/* The same, for a caller that needs only part of it (flags: CMH_LOAD_*; 0 = all).  With
 * CMH_LOAD_SEGMENTS only the segments and their blocks are sure to be there (with what the
 * file holds before them): a PyTorch pickle is read up to its 'device_traces' key, so the
 * traces, settings and annotations after it are absent; a .cmh has no traces (they are
 * skipped over), and everything else.  CUMEMHIST_GENERIC_LOAD=1 in the environment makes every load a full one. */
#define CMH_LOAD_SEGMENTS 0x1u
/* No shortcut at all, however the file looks: the way any file would be read (what
 * CUMEMHIST_GENERIC_LOAD=1 turns every load into; for tests that hold the two against each other). */
#define CMH_LOAD_GENERIC 0x80000000u
int cmh_snapshot_load_ex(const char *path, cmh_snapshot *s, unsigned flags, char *err, size_t errlen);
/* cmh_pickle_read with those flags (the fuzz target holds CMH_LOAD_GENERIC against 0). */
int cmh_pickle_read_ex(const void *buf, size_t len, unsigned flags, cmh_snapshot *s, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
