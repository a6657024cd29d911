/*
 * pickle_side.h - the `cumemhist` dict of an exported pickle (pickle_side_read.c), as the
 * conversion of PyTorch's schema (pickle_model.c) calls it.  Private to snapshot/.
 *
 * The dict is read in two steps because part of it must be woven into the trace as the trace is
 * made (pool samples, retried OOMs and marks go back between PyTorch's entries) and the rest
 * (threads, frees' frames, ...) names entries that exist only once the trace is made.
 */
#ifndef CMH_PICKLE_SIDE_H
#define CMH_PICKLE_SIDE_H

#include <stdint.h>

#include "pickle_internal.h"

/* An entry the export kept aside (a pool sample, a retried OOM, a mark), with where it goes
 * back: before the device's kept entry number pos, in seq order among those at one pos. */
typedef struct pool_at {
    int32_t device;
    uint64_t pos;
    uint64_t seq; /* the order written: marks at one position keep it (pool samples and retried OOMs: read_retried_ooms) */
    cmh_entry_full e;
} pool_at;

/* Before the trace: the pool samples and retried OOMs into *ps (*nps of them, sorted by device
 * and position; the caller frees *ps), the marks into m->marks_aside.  0, or -1 with pk_fail. */
int pk_side_read_aside(pm *m, const pcont *od, pool_at **ps, uint32_t *nps);
/* After the trace and allocator_settings: everything else the dict holds.  0, or -1 with pk_fail. */
int pk_side_read(pm *m, const pcont *od);
/* After external_annotations: the START/END pair the export wrote for each mark it kept aside
 * goes, the mark being back in the trace. */
int pk_side_drop_mark_annotations(pm *m);

#endif
