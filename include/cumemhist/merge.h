/*
 * cumemhist/merge.h - one record from two: a driver-level recording and PyTorch's own snapshot
 * of the same process (co-recording writes them together; `cumemhist merge` joins them after).
 */
#ifndef CUMEMHIST_MERGE_H
#define CUMEMHIST_MERGE_H

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmh_merge_info {
    uint32_t matched;    /* PyTorch segment events found in the driver-level trace (the clock's evidence) */
    int64_t clock_ns;    /* the offset found: ours = PyTorch's + clock_ns */
    int64_t spread_ns;   /* the matches' spread around it (max - min) */
} cmh_merge_info;

/* Make torch (a PyTorch snapshot, moved: *torch is left empty) PyTorch's part of ours (a recorder
 * snapshot without one), with the two clocks aligned: the offset is the median difference
 * between the times both traces give the same segment event (an allocation or a map of the
 * same address and size on the same device); with no such event, 0 (both count from the Unix
 * epoch).  CMH_EINVAL with err set when the two do not fit (which is which, a part already
 * there, no device in common while both have segments). */
int cmh_merge_torch(cmh_snapshot *ours, cmh_snapshot *torch, cmh_merge_info *info, char *err, size_t errlen);

/* Every address range PyTorch's part held on device (-2: any): its final segments and every
 * range its trace allocated or mapped (expandable segments by their maps), sorted and merged;
 * *out is malloc'ed. */
typedef struct cmh_range {
    uint64_t a, b; /* [a, b) */
} cmh_range;
int cmh_torch_ranges(const cmh_snapshot *t, int device, cmh_range **out, uint32_t *n);
/* Whether [a, b) meets any of the sorted, merged ranges. */
int cmh_ranges_overlap(const cmh_range *r, uint32_t n, uint64_t a, uint64_t b);

/* Turn a merged record into one model the reports and memory_viz read: PyTorch's segments with
 * its blocks, trace and stacks (times on our clock), and every other driver allocation as a
 * segment of its own with its native stack; our entries inside PyTorch's ranges and our
 * driver-level refusals PyTorch handled give way to PyTorch's.  PyTorch's part is consumed
 * (s->torch NULL after).  A record without one is left as it is.  On CMH_ENOMEM s is unchanged. */
int cmh_merged_view(cmh_snapshot *s);
/* A running snapshot's ending ("was still running when ... (N entries so far)") made to count
 * the record's entries: its one timeline's, each device's apart where there are several (pinned
 * host memory's last), as cmh_merged_position numbers them.  With PyTorch's part still apart
 * that is the merged view's count, not the recorder's own nor PyTorch's, so every reading of
 * the record (its parts, its merged view, PyTorch's part) says the same.  An ending without
 * such a count is left as it is.  CMH_OK or CMH_ENOMEM. */
int cmh_ending_recount(cmh_snapshot *s);

/* The record's one entry numbering.  For a record with PyTorch's part, where entry `index` of
 * our own device trace lands in the merged timeline cmh_merged_view builds (an entry of ours the
 * view leaves out: PyTorch's own record of it where there is one, a segment event's twin or the
 * oom entry PyTorch wrote for its last refusal before it; else the merged entry just before
 * it), and that timeline's length; for any other
 * record, index itself and the trace's length.  Every view that names an entry of a merged
 * record asks this (owners works on the parts; peak, plot and the exports on the view). */
int cmh_merged_position(const cmh_snapshot *s, int device, int64_t index, int64_t *pos, int64_t *len);

#ifdef __cplusplus
}
#endif
#endif
