/*
 * clock.c - the record's clock, once: every view (text "+N.NNNs", plot, report timelines, the
 * Chrome trace) counts time from one origin, the record's first event across all devices and
 * pinned host memory (and PyTorch's part of an unmerged record, on our clock), or the origin the
 * record was exported with where that is earlier (cmh_snapshot_clock_span: a pickle leaves pinned
 * host memory out, and keeps the .cmh's origin), so the same instant reads the same in each of
 * them and one device's OOM is never drawn against another device's start.
 */
#include <stdint.h>

#include "cumemhist/analyzer.h"
#include "memo.h"

static void record_span(const cmh_snapshot *s, int64_t *lo, int64_t *hi)
{
    if (cmh_memo_clock_get(s, lo, hi)) return; /* a report page asks once per view */
    cmh_snapshot_clock_span(s, lo, hi);
    cmh_memo_clock_put(s, *lo, *hi);
}

int64_t cmh_clock_origin(const cmh_snapshot *s)
{
    int64_t lo, hi;
    record_span(s, &lo, &hi);
    return lo == INT64_MAX ? 0 : lo;
}

int64_t cmh_clock_last(const cmh_snapshot *s)
{
    int64_t lo, hi;
    record_span(s, &lo, &hi);
    return hi == INT64_MIN ? 0 : hi;
}
