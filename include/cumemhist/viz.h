/*
 * cumemhist/viz.h - exporters: each shapes a snapshot for one consumer and writes it to a FILE*.
 *
 * Each reads the snapshot without changing it (any number may run at once on one snapshot) and
 * returns CMH_OK, CMH_ENOMEM, or CMH_EIO when the stream failed; on failure the stream holds a
 * partial document, which the caller discards (cmh_atomic_abort).
 */
#ifndef CUMEMHIST_VIZ_H
#define CUMEMHIST_VIZ_H

#include <stdio.h>

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A model that follows PyTorch's snapshot rules (docs/PYTORCH.md, What memory_viz requires), made from any snapshot:
 * a segment with an implied whole block becomes segment_alloc + alloc and its free
 * free_requested + free_completed + segment_free; times become µs; pinned host memory (device
 * -1) is left out, its allocations counted in *dropped_host (cmh_host_allocations).  A PyTorch-sourced snapshot is copied as is. */
/* The pinned host allocations of a record (memory_viz has devices only: the exports leave them
 * out): each one its trace made, and each host segment live at the end made before the trace;
 * in *live_segments (when given) the host segments live at the end, in *entries its host trace
 * entries. */
uint64_t cmh_host_allocations(const cmh_snapshot *s, uint64_t *live_segments, uint64_t *entries);
int cmh_memviz_shape(const cmh_snapshot *in, cmh_snapshot *out, uint64_t *dropped_host);
/* The same for a caller done with `in`, where the shaping changes no entry (no whole blocks,
 * marks, pinned host memory, gaps between blocks): in's
 * tables and arrays move into *out as they are instead of being copied (ids then keep in's
 * numbering; the content is the copy's).  *moved = 0: not such a snapshot, in untouched (call
 * cmh_memviz_shape); 1: in is freed. */
int cmh_memviz_shape_move(cmh_snapshot *in, cmh_snapshot *out, int *moved);

/* memory_viz's number for the moment after a record's entry `index` of `device` (its own
 * trace has more entries: a whole-block segment's event is two or three of PyTorch's, and it
 * has no marks or pool samples), and in *total (when given) how many entries its trace of that
 * device holds.  -1: before its first entry.  A trace the export repairs (a free never
 * recorded, put back) is counted as it was recorded. */
int64_t cmh_memviz_index(const cmh_snapshot *in, int device, int64_t index, int64_t *total);

/* Where a record's entry `index` of `device` stands in memory_viz's page (MemoryViz.js's
 * Allocator State History) once exported: the page folds a free_requested and the
 * free_completed right after it into one "free" row.  Returns its row (-1: none; -2: out of
 * memory), gives in *page_total the device's rows, and in label the text a user finds the row
 * by with ctrl-f ("alloc b7f0012000_0": action, b(lock) or s(egment), address in hex, version). */
int64_t cmh_memviz_page_event(const cmh_snapshot *in, int device, int64_t index, int64_t *page_total, char *label,
                              size_t label_size);

/* The memory_viz pickle (protocol 4) of any snapshot: PyTorch's schema, and in its `cumemhist`
 * dict (which memory_viz ignores) what reading it back needs to give the record's own model:
 * each entry's recording thread, each frame's module, the marks and pool samples in place.
 * cumemhist reads it back in the record's entry numbering; cmh_memviz_index maps to memory_viz's. */
int cmh_export_memviz(const cmh_snapshot *s, FILE *fp, uint64_t *dropped_host);
/* The same, saying in *written the entries its device_traces hold and in *implied those of them
 * the export added (cmh_pickle_trace_entries of the shaped model: what the file holds, not the
 * record's count; either may be NULL). */
int cmh_export_memviz_counted(const cmh_snapshot *s, FILE *fp, uint64_t *dropped_host, uint64_t *written, uint64_t *implied);

/* A Chrome / Perfetto trace: memory counters per device, OOM and mark instants, kernel slices
 * on one track per stream. */
int cmh_export_chrome(const cmh_snapshot *s, FILE *fp);

/* The same for many snapshots in one trace, one at a time (only the writer's state is kept
 * between them): begin with the clock's origin (the earliest cmh_chrome_origin of them all),
 * add each with its own process ids (pid_base + device) and a name for its processes ("rank 3 @
 * host"), end.  Every track's timestamps are non-decreasing. */
typedef struct cmh_chrome cmh_chrome;
int64_t cmh_chrome_origin(const cmh_snapshot *s);      /* its earliest event (0: none) */
cmh_chrome *cmh_chrome_begin(FILE *fp, int64_t t0);    /* NULL: out of memory */
int cmh_chrome_add(cmh_chrome *c, const cmh_snapshot *s, int pid_base, const char *label);
int cmh_chrome_end(cmh_chrome *c);                     /* closes the trace, frees c */

/* Snapshots into one SQLite database (docs/FLEET.md: the schema): open a new file, add each
 * snapshot in a transaction of its own (file: the name its processes row keeps; site_name, when
 * not NULL, names each stack's site for the sites table), close (indexes made, then the file is
 * complete) or abort.  Errors are written to err. */
typedef struct cmh_sites cmh_sites;
typedef struct cmh_sqlite cmh_sqlite;
cmh_sqlite *cmh_sqlite_open(const char *path, char *err, size_t errlen);
int cmh_sqlite_add(cmh_sqlite *db, const cmh_snapshot *s, const char *file, const cmh_sites *g,
                   const char *(*site_name)(void *arg, const cmh_snapshot *s, const cmh_sites *g, uint32_t stack), void *arg);
int cmh_sqlite_close(cmh_sqlite *db);
void cmh_sqlite_abort(cmh_sqlite *db);

/* The same dict as JSON, with a "cumemhist" object for what PyTorch's schema has no place for.
 * Stacks are interned: "stack" indexes into the top-level "stacks" and "frames" (schema 2);
 * CMH_JSON_INLINE_FRAMES writes each object's own "frames" list, as PyTorch's dict (schema 1). */
enum { CMH_JSON_INLINE_FRAMES = 1 };
int cmh_export_json(const cmh_snapshot *s, int flags, FILE *fp);

#ifdef __cplusplus
}
#endif
#endif
