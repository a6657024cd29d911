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
 * -1) is left out and counted in *dropped_host.  A PyTorch-sourced snapshot is copied as is. */
int cmh_memviz_shape(const cmh_snapshot *in, cmh_snapshot *out, uint64_t *dropped_host);

/* The memory_viz pickle (protocol 4) of any snapshot. */
int cmh_export_memviz(const cmh_snapshot *s, FILE *fp, uint64_t *dropped_host);

/* A Chrome / Perfetto trace: memory counters per device, OOM and mark instants, kernel slices
 * on one track per stream. */
int cmh_export_chrome(const cmh_snapshot *s, FILE *fp);

/* The same dict as JSON, with a "cumemhist" object for what PyTorch's schema has no place for.
 * Stacks are interned: "stack" indexes into the top-level "stacks" and "frames" (schema 2);
 * CMH_JSON_INLINE_FRAMES writes each object's own "frames" list, as PyTorch's dict (schema 1). */
enum { CMH_JSON_INLINE_FRAMES = 1 };
int cmh_export_json(const cmh_snapshot *s, int flags, FILE *fp);

#ifdef __cplusplus
}
#endif
#endif
