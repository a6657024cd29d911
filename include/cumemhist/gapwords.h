/*
 * cumemhist/gapwords.h - where the trace and the snapshot disagree about the end, in words: one
 * wording for every writer (peak, leaks, summary, trace, plot: text and --json; the HTML report).
 * The figures are the replay's reconciliation's (analyzer.h, cmh_trace_gap); these only say them.
 * Each writes a NUL-terminated text into buf (truncated to cap) and returns it, or returns NULL
 * when there is nothing to say.  nl joins the text's lines: "\n      " under a "note: ", " " for
 * one line (JSON, HTML).
 */
#ifndef CUMEMHIST_GAPWORDS_H
#define CUMEMHIST_GAPWORDS_H

#include <stddef.h>

#include "reports.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The trace stops before the snapshot: "the trace stops before the snapshot: 24 blocks (384.1 MiB)
 * it allocated and never freed are not active in the snapshot ...", with what the end's figures
 * are and what to do.  pytorch: a PyTorch record (its own call names). */
const char *cmh_gap_stops_text(const cmh_trace_gap *g, int pytorch, const char *nl, char *buf, size_t cap);
/* The trace starts late: "the trace begins mid-run: 12 blocks (24.0 MiB) active at the snapshot
 * were allocated before its first entry ...", or with dropped entries, before its first kept
 * entry (the ring dropped the entries that made them). */
const char *cmh_gap_starts_text(const cmh_trace_gap *g, int pytorch, uint64_t dropped, const char *nl, char *buf, size_t cap);

/* The pools' cache taken as given back at the end: "the stream-ordered pools' latest samples are
 * older than the last cuMemGetInfo sample (after the trace's last entry), which says 512.0 MiB
 * less in use than the record holds with them: ... counts those 512.0 MiB as given back". */
const char *cmh_gap_pools_text(const cmh_trace_gap *g, const char *nl, char *buf, size_t cap);

/* A PyTorch trace's allocated peak holds whole blocks the allocator did not split (its
 * should_split(): a large-pool block stays whole when 1 MiB or less would be left, and
 * memory_stats' allocated_bytes counts the block): "allocated counts whole blocks the allocator
 * did not split: +20.9 MiB over the requests at the peak" (p->alloc_unsplit), NULL when none. */
const char *cmh_unsplit_text(const cmh_peak_report *p, char *buf, size_t cap);

/* The peaks are a lower bound (cmh_peak_extent CMH_PEAK_AT_LEAST): "the trace begins mid-run
 * (10.0 GiB allocated and 10.5 GiB reserved before its first entry), so the true peaks may be
 * higher than the trace's: allocated at least 10.0 GiB, reserved at least 10.5 GiB", or with dropped entries, "the ring dropped the 5 oldest
 * entries: ...".  NULL when the peaks are exact or not known. */
const char *cmh_peak_bound_text(const cmh_peak_report *p, const char *nl, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
