/*
 * cumemhist/recorder.h - the C API an application calls to control the recorder.
 *
 * The recorder (libcumemhist.so) records the CUDA memory history of the process: every driver
 * allocation, with a stack, into a per-device ring of trace entries, plus the live segments.
 * Preloading it (LD_PRELOAD, or `cumemhist record -- prog`) is enough; these calls let a
 * program switch recording on and off, dump a snapshot when it wants, and read its counters.
 *
 * Options mirror torch.cuda.memory._record_memory_history():
 *   enabled  CMH_ENABLED_OFF | _STATE (live blocks only) | _ALL (live blocks + trace history)
 *   context  CMH_CONTEXT_NONE | _STATE (stacks on live blocks) | _ALL_ALLOC (trace entries keep
 *            the allocation stack) | _ALL (frees take a stack of their own too)
 *   max_entries  ring capacity per device, 0 = unlimited; the oldest entries are dropped first
 *                and counted
 *   max_frames   deepest stack kept (1..128)
 *   clear_history  empty the rings now
 * The same options come from CUMEMHIST_ENABLED, CUMEMHIST_CONTEXT, CUMEMHIST_MAX_ENTRIES,
 * CUMEMHIST_MAX_FRAMES for LD_PRELOAD use; CUMEMHIST_OUTPUT is the dump path pattern
 * (%p = pid, %r = rank from RANK / LOCAL_RANK, default "cumemhist.%p.cmh").
 *
 * Every function returns CMH_OK or a negative CMH_E* code and never aborts the program.  Every
 * function may be called from any thread at any time, concurrently with the program's own CUDA
 * calls (the options change under a lock; the hooks read them atomically).
 */
#ifndef CUMEMHIST_RECORDER_H
#define CUMEMHIST_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CMH_OK 0
#define CMH_EINVAL (-1)  /* a bad argument */
#define CMH_ENOMEM (-2)  /* out of memory */
#define CMH_EIO (-3)     /* a file could not be written or read */
#define CMH_EFORMAT (-4) /* a file is not what it claims to be */

/* A short English text for a CMH_* code (a static string; never NULL). */
static inline const char *cmh_strerror(int rc)
{
    switch (rc) {
    case CMH_OK: return "success";
    case CMH_EINVAL: return "invalid argument";
    case CMH_ENOMEM: return "out of memory";
    case CMH_EIO: return "input/output error";
    case CMH_EFORMAT: return "not a valid snapshot";
    default: return "unknown error";
    }
}

typedef enum cmh_enabled { CMH_ENABLED_OFF = 0, CMH_ENABLED_STATE = 1, CMH_ENABLED_ALL = 2 } cmh_enabled;

typedef enum cmh_context {
    CMH_CONTEXT_NONE = 0,
    CMH_CONTEXT_STATE = 1,
    CMH_CONTEXT_ALLOC = 2,
    CMH_CONTEXT_ALL = 3
} cmh_context;

typedef struct cmh_options {
    cmh_enabled enabled;
    cmh_context context;
    uint64_t max_entries; /* 0 = unlimited */
    int max_frames;       /* 0 = keep the current value */
    int clear_history;
} cmh_options;

/* Start, change or stop recording (enabled = OFF stops and, as in PyTorch, clears the rings). */
int cmh_record_memory_history(const cmh_options *opts);

/* Write a snapshot of everything recorded so far to path (NULL = the configured pattern).
 * Atomic: a temporary file is renamed into place.  Recording goes on. */
int cmh_dump_snapshot(const char *path);

/* The path this process's snapshots go to (the CUMEMHIST_OUTPUT pattern made concrete). */
int cmh_output_path(char *buf, size_t cap);

/* Co-recording PyTorch (python/cumemhist/_startup does this for `cumemhist record`): before a
 * dump on request (cmh_dump_snapshot, SIGUSR1), fn(path, arg) is asked to write PyTorch's own
 * snapshot (a _dump_snapshot() pickle) to path; when it returns 1 that file is merged into the
 * snapshot (format version 2) and removed.  NULL unregisters.  At exit, when no hook can run any
 * more, the file named by cmh_torch_snapshot_file() (NULL: none) is merged the same way. */
int cmh_set_torch_snapshot_hook(int (*fn)(const char *path, void *arg), void *arg);
int cmh_torch_snapshot_file(const char *path);

/* Python frames with each stack (docs/RECORDER.md): OFF never.  A thread that released the GIL
 * around the driver call has its own frames read without it where the interpreter's layout is
 * known (CPython 3.11, 3.12), in both other modes; elsewhere HELD reads only a thread holding the
 * GIL, and WAIT (the default, CUMEMHIST_PYSTACKS) takes the GIL back for the walk.  A program whose GIL holder can wait on a lock
 * held by an allocating thread (PyTorch's caching allocator frees under the GIL) needs HELD: the
 * start-up hook sets it when torch is imported, the recorder itself once libc10_cuda is loaded. */
enum { CMH_PYTHON_OFF = 0, CMH_PYTHON_HELD = 1, CMH_PYTHON_WAIT = 2 };
int cmh_set_python_stacks(int mode);

typedef struct cmh_device_stats {
    int device; /* -1 = pinned host memory */
    uint64_t allocated_current, allocated_peak;
    uint64_t reserved_current, reserved_peak;
    uint64_t num_allocs, num_frees, num_ooms;
    uint64_t entries_recorded, entries_dropped;
} cmh_device_stats;

/* Fill up to cap per-device counters, return how many devices have any (may exceed cap). */
int cmh_memory_stats(cmh_device_stats *out, int cap);

/* Events the recorder itself lost (it ran out of memory or a table was full). */
uint64_t cmh_lost_events(void);

/*
 * The block API, for an allocator that sub-allocates driver memory (a caching allocator, a
 * pool): it reports its blocks so that allocated and reserved memory differ as they really do.
 * Include <cumemhist/blocks.h> rather than calling these directly: it makes every call a cheap
 * no-op when the recorder is not in the process.
 *
 *   cmh_segment_managed(ptr)        this driver allocation is sub-allocated by the caller: it
 *                                   holds the blocks reported below, not one implied block
 *   cmh_block_alloc(ptr, size, requested, stream)   a block handed out (size as allocated,
 *                                   requested as asked for)
 *   cmh_block_free_requested(ptr)   the user freed it; stream work may still use it
 *   cmh_block_free_completed(ptr)   it is free (alone: freed at once)
 *   cmh_mark(name)                  a point in time worth naming ("step 12"); leaks measures
 *                                   growth between marks.  The process's: written into the trace
 *                                   of every device it has used, whichever one is current
 *   cmh_range_push(name) / cmh_range_pop()   a named span, as PyTorch's external annotations (its
 *                                   start a mark as cmh_mark's, on every device)
 *   cmh_thread_name(name)           what the reports call the calling thread instead of the OS's
 *                                   name (its first 15 bytes): a Python thread's threading name,
 *                                   given by the start-up hook at the thread's start
 * The device of a block, and of a range's annotation, is the calling thread's current one.
 */
int cmh_segment_managed(uint64_t ptr);
int cmh_block_alloc(uint64_t ptr, uint64_t size, uint64_t requested, uint64_t stream);
int cmh_block_free_requested(uint64_t ptr);
int cmh_block_free_completed(uint64_t ptr);
int cmh_mark(const char *name);
int cmh_range_push(const char *name);
int cmh_range_pop(void);
int cmh_thread_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
