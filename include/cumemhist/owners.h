/*
 * cumemhist/owners.h - who holds every byte of a device: PyTorch's allocated and cached memory
 * (from PyTorch's part of a merged record), each library that called the driver itself (cuBLAS,
 * cuDNN, NCCL, ...), the program's own allocations, and what no recorded allocation explains
 * (cuMemGetInfo's used bytes minus everything recorded: the CUDA context, other processes).
 * At the end of the record, at the peak of recorded device memory (the reserved peak), and at
 * each out-of-memory error.  Definitions: docs/DEFINITIONS.md ("Owners").
 */
#ifndef CUMEMHIST_OWNERS_H
#define CUMEMHIST_OWNERS_H

#include "sites.h"
#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cmh_owner_kind {
    CMH_OWN_TORCH_ALLOCATED = 0, /* PyTorch's blocks in use (its part of the record) */
    CMH_OWN_TORCH_CACHED,        /* PyTorch's reserved segments not in use */
    CMH_OWN_TORCH_RESERVED,      /* PyTorch's segments, without its part (blocks unknown) */
    CMH_OWN_LIBRARY,             /* a library that called the driver itself, by name */
    CMH_OWN_PROGRAM,             /* the program's own code (its executable or its libraries) */
    CMH_OWN_UNKNOWN,             /* recorded without a stack */
    CMH_OWN_UNEXPLAINED,         /* cuMemGetInfo used minus everything recorded */
    /* blocks the program freed whose stream work is still pending (PyTorch's, or an allocator's
     * above the driver): not in use, as peak and leaks count them, and not cached either (no
     * request can have them, empty_cache() does not give them back, until the work completes) */
    CMH_OWN_PENDING_FREE,
    /* cuMemCreate handles held and mapped nowhere: at the end, those never mapped or unmapped and
     * kept (the record's vmm_unmapped); at any moment, those made and not mapped yet */
    CMH_OWN_VMM_UNMAPPED,
    /* what stream-ordered pools keep beyond what they hand out (freed to the pool, kept: frag's
     * "of it a pool's cache"; cuMemPoolTrimTo gives it back) */
    CMH_OWN_POOL_CACHE,
    /* managed memory (cuMemAllocManaged): the driver counts its pages as used only where they
     * are on the device; with a cuMemGetInfo sample, at most what the sample leaves unexplained */
    CMH_OWN_MANAGED,
} cmh_owner_kind;

/* The pool cache row's name, the same in every report (owners, report, frag's words) */
#define CMH_OWN_POOL_CACHE_NAME "a pool's cache (freed to a stream-ordered pool, kept: cuMemPoolTrimTo gives it back)"

/* The cuMemCreate row's name, at the end and before a handle's first map alike */
#define CMH_OWN_VMM_UNMAPPED_NAME "physical memory made with cuMemCreate, not mapped"

typedef struct cmh_owner_row {
    char name[96];
    int kind;
    uint64_t bytes;
    uint32_t allocations; /* driver allocations (0 for PyTorch's and the unexplained rows) */
    uint8_t torch_pool;   /* one of PyTorch's own rows (allocated, cached, its frees pending): what
                             its memory_summary() counts as reserved, as the driver saw it */
} cmh_owner_row;

typedef struct cmh_owners_moment {
    char what[32];           /* "end", "peak", "out of memory #1" */
    int64_t index, time_ns;  /* in the record's one numbering (cmh_merged_position; -1: before
                                the first entry); time 0 = unknown.  The end (and a peak that
                                is the final state) stands at the dump: time_ns is the dump's */
    int64_t entry_time_ns;   /* entry index's own time, what "(entry N, +T)" names (0: none, unknown) */
    cmh_owner_row *rows;     /* largest first; the unexplained row last */
    uint32_t nrows;
    uint64_t recorded;       /* the rows but the unexplained one */
    int used_known;          /* a cuMemGetInfo sample gives the device's used bytes */
    uint64_t used, total;    /* then: used = the sum of the rows */
    int64_t sample_time_ns;  /* the sample the unexplained row's figure comes from */
    int sample_exact;        /* that figure is exact: a sample taken at this moment (no entry that
                                changes memory between them) with no call in flight at it
                                (DEFINITIONS.md); else assumed steady from sample_time_ns's */
    int sample_low_end;      /* not exact, and no sample near without calls in flight: the figure
                                is the low end of the nearest sample's range */
    uint64_t in_flight;      /* the device's used bytes at this moment beyond the rows: other threads'
                                calls in the driver at it, logged just after; only where a sample
                                was taken at this moment (else 0: not known, and never a sample's
                                from another instant, whose calls the moment's rows may hold) */
    int peak_physical;       /* the peak moment is the physical peak (cmh_owners_report.peak_physical) */
    uint64_t managed_made;   /* managed memory (cuMemAllocManaged) live then, all of it; its row
                                (CMH_OWN_MANAGED) holds what of it the device's used figure leaves
                                room for (all of it without a sample) */
} cmh_owners_moment;

/* What no recorded call explains at the device's first cuMemGetInfo sample (taken at its first
 * allocation): the CUDA context's own memory and other processes', there before the program
 * allocated.  known: the record has a later sample to tell it from. */
typedef struct cmh_owners_baseline {
    int known;
    int64_t time_ns;
    uint64_t unrecorded; /* used - what the record held there (max of active and reserved) */
} cmh_owners_baseline;

/* The bytes (and how many handles) of device's physical memory made with cuMemCreate, held and
 * mapped nowhere when the snapshot was written (the .cmh vmm_unmapped table). */
uint64_t cmh_owners_vmm_unmapped(const cmh_snapshot *s, int device, uint32_t *count);

typedef struct cmh_owners_report {
    int device;
    int torch;                 /* PyTorch's part was there */
    uint64_t pinned_host;      /* at the end, all devices: on its own line */
    uint64_t entries;          /* the device's trace entries in that numbering */
    uint64_t torch_mismatch;   /* |PyTorch's reserved - its segments as the driver saw them| at the end */
    cmh_owners_moment *moments;
    uint32_t nmoments;
    /* the device's latest cuMemGetInfo sample (sample_known): its used and total bytes, and what
     * the record held at its instant (the moment's rows but the unexplained one).  used above
     * recorded is memory no recorded call made: `peak` counts recorded memory only, owners adds
     * the rest as its unexplained row; both say so in the same words where it is there */
    int sample_known;
    int64_t sample_time_ns;
    uint64_t sample_used, sample_total, sample_recorded;
    /* the same at the first sample (cmh_owners_baseline_compute): what of the not-recorded memory was
     * there from the start, and so what came since */
    cmh_owners_baseline baseline;
    /* the reconciliation with the final segments raised reserved above every entry's
     * (reconciled): the peak moment is then the final state, as `peak` names it; trace_peak the
     * most reserved after any entry, end_reserved the final state's */
    int reconciled;
    int64_t trace_peak, end_reserved;
    /* owners' peak moment is the peak of reserved (recorded device) memory, `peak`'s "peak
     * reserved"; the allocated peak, `peak`'s "peak allocated" (and the sites it lists), can be
     * another entry: known where the record is not merged (a merged record's `peak` replays its
     * one model: the caller sets it, cmh_owners_set_alloc_peak); index -1: before the first entry */
    int alloc_peak_known;
    int64_t alloc_peak, alloc_peak_index, alloc_peak_time_ns;
    /* where cuMemCreate handles make the driver's charge peak elsewhere than reserved (a handle
     * made and not mapped yet, or unmapped and not released yet: cmh_physical_peak_compute), the
     * peak moment is the physical peak, the memory the device held for the process, and this
     * says reserved's own peak (its bytes, its entry in the record's one numbering, its time) */
    int peak_physical;
    int64_t reserved_peak, reserved_peak_index, reserved_peak_time_ns;
    /* samples of the device that cannot be (more free than total), left out: how many, the first */
    uint32_t bad_samples;
    cmh_meminfo bad_sample;
    /* samples taken before the first entry a ring that dropped entries kept (what the record held
     * at them is not known: the dropped entries may be before or after), left out: how many, the first */
    uint32_t outside_samples;
    cmh_meminfo outside_sample;
} cmh_owners_report;

/* The report for one device (>= 0) of s: a recorder snapshot, merged or not, or a PyTorch one. */
int cmh_owners_compute(const cmh_snapshot *s, int device, cmh_owners_report *out);
/* Only the "end" moment (the same rows as cmh_owners_compute's), at half the cost: no pass to
 * find the peak and the OOMs.  For the live commands, which show owners now. */
int cmh_owners_compute_end(const cmh_snapshot *s, int device, cmh_owners_report *out);
void cmh_owners_report_free(cmh_owners_report *r);
/* r's allocated peak from `peak`'s figures for the same device (p: cmh_peak_totals of the model
 * `peak` reads, a merged record's one model) where r does not know it. */
void cmh_owners_set_alloc_peak(cmh_owners_report *r, int64_t bytes, int64_t index, int64_t time_ns);
/* What the driver held for the process on a device beyond PyTorch's caching allocator, at the
 * end of a record with PyTorch's part: the end moment's rows (cmh_owners_compute_end) but PyTorch's
 * own (torch_pool) and the unexplained one, by owner as owners names them (NCCL's cuMemMap ranges,
 * cuBLAS's workspace, the program's, a held cuMemCreate handle...).  PyTorch's memory_summary()
 * counts none of it: summary says it beside its table, as a user comparing with nvidia-smi needs. */
typedef struct cmh_beyond_torch {
    int known;            /* the record has PyTorch's part (else nothing below is set) */
    uint64_t bytes;       /* the rows' sum */
    uint32_t allocations; /* their driver allocations */
    cmh_owner_row *rows;  /* largest first (malloc'd; NULL with none) */
    uint32_t nrows;
    uint64_t torch_pool;  /* PyTorch's rows' sum: its reserved, as the driver saw it */
    int used_known;       /* the device's used memory at the end (a cuMemGetInfo sample), and of it */
    uint64_t used, total, unexplained; /* what no recorded call made (owners' 'not recorded') */
} cmh_beyond_torch;
int cmh_beyond_torch_compute(const cmh_snapshot *s, int device, cmh_beyond_torch *out);
void cmh_beyond_torch_free(cmh_beyond_torch *b);

/* Device's latest cuMemGetInfo sample in s that can be (free <= total; an index into
 * s->meminfo; -1: none), the one the report's sample_* figures come from (the calls then in
 * flight counted as recorded), and where the report places it (*at): INT64_MAX at the
 * dump (the final state, reconciled), else the last entry of device's trace at or before it (-1:
 * before the first).  The record held max(active, reserved) bytes there: what the rows sum to. */
int64_t cmh_owners_latest_sample(const cmh_snapshot *s, int device, int64_t *at);
/* Device's first sample's unrecorded bytes (a replay up to it); known 0 with no sample, or one
 * only.  CMH_OK or CMH_ENOMEM.  The report's baseline, and peak's, come from here. */
int cmh_owners_baseline_compute(const cmh_snapshot *s, int device, cmh_owners_baseline *out);

/* A module's name as a library ("cuBLAS" for libcublas.so.13), or NULL when it is not one of
 * NVIDIA's or PyTorch's. */
const char *cmh_library_name(const char *module);
/* The name an owner (cmh_sites_owner: a module, a Python file, a package, "PyTorch") goes by in
 * every output, owners' rows and the reports' [owner] tags alike: a library by its name and its
 * file ("cuBLAS (libcublas.so.13)", "PyTorch (libc10_cuda.so)"), a third-party package (package
 * set) by its name ("gpulib"), the program's own code as "program (train.py)"; "PyTorch" and "?"
 * as they are.  Written into buf (n bytes), which it returns; "" for no owner. */
const char *cmh_owner_name(const char *owner, int package, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
