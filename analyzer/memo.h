/*
 * memo.h - the analyzer's side of reports.h's memo (cmh_replay_memo_begin): what other files of
 * the analyzer keep in it.  Both do nothing unless a memo is kept for s.
 */
#ifndef CMH_MEMO_H
#define CMH_MEMO_H

#include "cumemhist/reports.h"

/* The steps found for (device, sites, thread) while the memo was kept, copied into out: 1, else 0. */
int cmh_memo_steps_get(const cmh_snapshot *s, int device, const cmh_sites *sites, uint32_t thread, cmh_steps *out);
void cmh_memo_steps_put(const cmh_snapshot *s, int device, const cmh_sites *sites, const cmh_steps *st);

/* The record's clock span (clock.c) found while the memo was kept for s: 1 with *lo, *hi, else 0.
 * The span is a scan of every entry, and a report page asks for it from each view. */
int cmh_memo_clock_get(const cmh_snapshot *s, int64_t *lo, int64_t *hi);
void cmh_memo_clock_put(const cmh_snapshot *s, int64_t lo, int64_t hi);

/* The memo's sites at device's peak with this grouping, copied into p: 1, else 0; and keeping them. */
int cmh_memo_sites_get(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *p);
void cmh_memo_sites_put(const cmh_snapshot *s, int device, const cmh_sites *sites, const cmh_peak_report *p);

/* reports.c: the facts every report starts with (device, entries, dropped, history). */
void cmh_report_base_fill(const cmh_snapshot *s, int device, cmh_report_base *b);

/* replay_views.c: a copy of a forward replay's state, to go on from where r stands (a checkpoint):
 * no observer, the same order of blocks; NULL out of memory.  It reads r's per-entry arrays
 * until take_arrays hands them over (r must outlive it until then). */
cmh_replay *cmh_replay_clone(const cmh_replay *r);
void cmh_replay_take_arrays(cmh_replay *clone, cmh_replay *from);

/* reports.c: the sites of the blocks live in r (the peak report's rows): the blocks the program
 * holds, and with_pending those freed with stream work pending too (an OOM's holders). */
int cmh_live_sites(const cmh_replay *r, const cmh_sites *sites, int with_pending, cmh_site **out, uint32_t *n);

/* memo.c: device's peak totals (cmh_peak_totals) and a replay standing at its allocated peak
 * (*at; NULL when none was kept: replay to it).  *owned, when set, is the caller's to free. */
int cmh_peak_replay(const cmh_snapshot *s, int device, cmh_peak_report *p, const cmh_replay **at, cmh_replay **owned);
/* The same, and end_fn called with each block live at the end (the same replay's, when it is
 * the only one). */
int cmh_peak_replay_end(const cmh_snapshot *s, int device, cmh_peak_report *p, const cmh_replay **at, cmh_replay **owned,
                        void (*end_fn)(void *, const cmh_live_block *), void *end_arg);
/* reports.c: cmh_peak_compute, and the sites of the blocks live at the end (*end, *nend: the
 * caller frees *end), from one replay of the trace. */
int cmh_peak_compute_end(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *p, cmh_site **end, uint32_t *nend);

/* replay_backward.c: keep the state before the first entry of s's traces (NULL: drop what is kept). */
void cmh_replay_memo_keep(const cmh_snapshot *s);

#endif
