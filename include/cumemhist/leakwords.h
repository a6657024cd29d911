/*
 * cumemhist/leakwords.h - the leak verdict in words, one wording for every writer (`leaks` text
 * and JSON, the HTML report, `ranks`): how the steps were found, what one site does from step
 * to step, and what the report concludes.  The verdict itself is cmh_leaks_compute's; these only
 * say it.  Each writes a NUL-terminated line into buf (truncated to cap) and returns buf.
 */
#ifndef CUMEMHIST_LEAKWORDS_H
#define CUMEMHIST_LEAKWORDS_H

#include <stddef.h>
#include <stdio.h>

#include "reports.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "steps: 8 from ProfilerStep annotations", "steps: 10 detected from the allocation pattern
 * (period 37 entries)", "steps: unknown (...)", with what it means for the verdict. */
const char *cmh_leak_steps_text(const cmh_leak_report *p, char *buf, size_t cap);
/* "marks", "annotations", "pattern", "unknown" */
const char *cmh_leak_steps_source(int source);
/* A span of time as the reports say it: "80 ms", "2.50 s", "12.0 min", "1.5 h" (under a
 * millisecond: "1 ms") */
void cmh_span_text(int64_t ns, char *out, size_t cap);
/* The time from t0 to t as every text report and the HTML report's words say it, in the unit
 * that keeps its figures at its scale: "+12.345s" from a second, "+176.4 ms", "+176 µs" (as
 * plot's axis and peak label say them), "+0 µs" at t0 itself; in whole microseconds of each
 * time, PyTorch's clock (a record and its memory_viz export read the same).  Never a negative
 * zero (a unit is chosen after rounding).  One formatter: a short run's leaks read "+0.000s" for
 * every site while plot said "+176.4 µs". */
void cmh_when_text(int64_t t, int64_t t0, char *out, size_t cap);
/* A site's verdict: "growing: +1.0 MiB per step over 8 steps", "stopped: grew +8.0 MiB per step
 * over steps 1-10, then flat for the last 10 steps; 80.0 MiB still held at the end, never freed",
 * "rose in each of the 3 steps: +40.0 MiB per step; too few steps to call it a leak", "state:
 * held across steps, not growing", ... */
const char *cmh_leak_site_text(const cmh_site *x, char *buf, size_t cap);
/* The short word for a table's column: growing, stopped, rising, state, steady, after, held. */
const char *cmh_leak_site_word(const cmh_site *x);
/* The conclusion: "1 site grows from step to step: a likely leak", "no site grows from step to
 * step now; 1 site grew over several steps, then stopped, and still holds 80.0 MiB: a likely leak
 * that stopped", "no site grows from step to step", "growth cannot be judged: ..." */
const char *cmh_leak_outcome_text(const cmh_leak_report *p, char *buf, size_t cap);
/* How to give the steps, where growth is not judged for want of any (no marks, no annotations,
 * no pattern): "to judge growth, give the steps: mark each iteration ..."; NULL otherwise. */
const char *cmh_leak_steps_hint(const cmh_leak_report *p, char *buf, size_t cap);

/* A frame as every text report names it: "name (file:line)", "name (file)", "name (module)";
 * a C++ name too long to read without its template arguments and parameters. */
const char *cmh_frame_text(const cmh_snapshot *s, const cmh_frame *f, char *buf, size_t cap);
/* n as an ordinal, "1st", "2nd", "3rd", "11th", "22nd", into buf: an OOM's place in the record
 * (oom's text, the pprof profile's comment). */
const char *cmh_ordinal(uint32_t n, char *buf, size_t cap);
/* The record's failed driver calls (.cmh driver_errors), as every report says them: "note: 3
 * driver calls failed (the driver refused them: no entry in the trace shows them):", each
 * (call, result) and the calls kept, each address judged by the trace (cmh_driver_error_what);
 * nothing when there are none.  summary, oom, leaks, owners, frag and stats print it on stdout,
 * the HTML report in its header. */
void cmh_driver_errors_write(FILE *fp, const cmh_snapshot *s);
/* Where a failed driver call was made, as every report names it (the note above, every --json's
 * driver_errors "site"): its stack's innermost frame in cmh_frame_text's words, NULL for a call
 * with no stack.  As symbolized as the snapshot is: a command loads it symbolized when it has
 * failed calls (cli/report_run.c), so that no report names the site by its module alone. */
const char *cmh_driver_error_site(const cmh_snapshot *s, uint32_t stack, char *buf, size_t cap);
/* What a snapshot recovered from a flight record could not read of it (.cmh history_lost), as
 * every report says it: "this record lost part of its history: its flight record is cut short
 * (the file ends at byte 13,000; 1,264 bytes of records written past it are lost; what was read
 * ends at byte 12,736), 1 torn record dropped (...): what the process did in what was lost is not
 * in these figures, so no verdict here can call the run clean (leaks --fail-on-leak does not pass
 * it: exit 5 where it finds no leak)".
 * cmh_history_lost_text: that sentence into buf (NULL when nothing was lost: the record was read
 * whole); cmh_history_lost_write: "note: " and it, a line, on fp (nothing when nothing was lost).
 * summary, oom, peak, leaks, owners, frag and the other text reports print it under the
 * process's ending, --json gives it as history_lost.text, the HTML report in its header. */
const char *cmh_history_lost_text(const cmh_snapshot *s, char *buf, size_t cap);
void cmh_history_lost_write(FILE *fp, const cmh_snapshot *s);
/* A site's bytes by the line that called it (peak, leaks, oom and the HTML report): "by caller:
 * 64.0 MiB build_model (job.py:7), 40.0 MiB prefetch (job.py:11) (growing)", the largest
 * CMH_CALLERS_SHOWN, then what other callers hold.  NULL where the split says nothing (fewer
 * than two callers). */
#define CMH_CALLERS_SHOWN 3
const char *cmh_site_callers_text(const cmh_snapshot *s, const cmh_site *x, char *buf, size_t cap);
/* A growing site of several callers, each judged alone (leaks): "the growth comes from one
 * caller, prefetch (job.py:11): 40.0 MiB of the row's 104.0 MiB (its other callers' blocks do
 * not grow)".  NULL where no caller was judged growing, or all of the row grows. */
const char *cmh_site_callers_growth_text(const cmh_snapshot *s, const cmh_site *x, char *buf, size_t cap);
/* The threads a site's still-live blocks came from (leaks, the HTML report): "made by recording
 * threads 1 (tid 4242, 'worker') and 2 (tid 4243, 'worker')".  NULL where that says nothing the
 * site's other lines do not: no thread known, or one thread that is the main one (its tid the
 * process's pid) or that the verdict's words name already. */
const char *cmh_site_made_by_text(const cmh_snapshot *s, const cmh_site *x, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
