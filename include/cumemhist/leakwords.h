/*
 * cumemhist/leakwords.h - the leak verdict in words, one wording for every writer (`leaks` text
 * and JSON, the HTML report, `ranks`): how the steps were found, what one site does from step
 * to step, and what the report concludes.  The verdict itself is cmh_leaks_compute's; these only
 * say it.  Each writes a NUL-terminated line into buf (truncated to cap) and returns buf.
 */
#ifndef CUMEMHIST_LEAKWORDS_H
#define CUMEMHIST_LEAKWORDS_H

#include <stddef.h>

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
/* A site's verdict: "growing: +1.0 MiB per step over 8 steps", "rose in each of the 3 steps:
 * +40.0 MiB per step; too few steps to call it a leak", "state: held across steps, not
 * growing", ... */
const char *cmh_leak_site_text(const cmh_site *x, char *buf, size_t cap);
/* The short word for a table's column: growing, rising, state, steady, after, held. */
const char *cmh_leak_site_word(const cmh_site *x);
/* The conclusion: "1 site grows from step to step: a likely leak", "no site grows from step to
 * step", "growth cannot be judged: ..." */
const char *cmh_leak_outcome_text(const cmh_leak_report *p, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
