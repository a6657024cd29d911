/*
 * clock.c - the record's clock, once: every view (text "+N.NNNs", plot, report timelines, the
 * Chrome trace) counts time from one origin, the record's first event across all devices (and
 * PyTorch's part of an unmerged record, on our clock), so the same instant reads the same in
 * each of them and one device's OOM is never drawn against another device's start.
 */
#include <stdint.h>

#include "cumemhist/analyzer.h"
#include "memo.h"

static void span(const cmh_snapshot *s, int64_t shift, int64_t *lo, int64_t *hi)
{
    for (uint32_t i = 0; i < s->nentries; i++) {
        int64_t t = cmh_entry_time(s, &s->entries[i]);
        if (!t) continue;
        t += shift;
        if (t < *lo) *lo = t;
        if (t > *hi) *hi = t;
    }
    for (uint32_t i = 0; i < s->nkernels; i++) {
        int64_t t = s->kernels[i].start_ns;
        if (!t) continue;
        if (t < *lo) *lo = t;
        if (t > *hi) *hi = t;
    }
}

static void record_span(const cmh_snapshot *s, int64_t *lo, int64_t *hi)
{
    if (cmh_memo_clock_get(s, lo, hi)) return; /* a report page asks once per view */
    *lo = INT64_MAX, *hi = INT64_MIN;
    span(s, 0, lo, hi);
    if (s->torch) span(s->torch, s->torch_clock_ns, lo, hi);
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
