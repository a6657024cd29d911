/*
 * cumemhist/ownerwords.h - owners' moments in words, one wording for every writer (`owners`
 * text and the HTML report), so that the two can never say two things of one moment.
 */
#ifndef CUMEMHIST_OWNERWORDS_H
#define CUMEMHIST_OWNERWORDS_H

#include <stddef.h>
#include <stdint.h>

#include "owners.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The moment's name: "peak reserved" (owners' peak is the peak of reserved memory, as `peak`
 * names it), "at the end", "out of memory #1". */
const char *cmh_owners_moment_name(const cmh_owners_moment *m);
/* Which peak the peak moment is, beside the allocated one (empty for any other moment):
 * "the reserved peak; allocated peaked at entry 847, +36.192s, at 5.3 GiB: see `cumemhist peak`",
 * "the reserved peak; allocated peaked here too, at 24.0 MiB".  t0: the record's clock origin. */
const char *cmh_owners_peak_words(const cmh_owners_report *r, const cmh_owners_moment *m, int64_t t0, char *buf, size_t cap);
/* What the moment's "not recorded" row rests on (empty where its figure is exact):
 * "(cuMemGetInfo at +0.301s, assumed steady)" where it comes from another instant, and
 * "(and 8.0 MiB more in use then: other threads' allocations in the driver, logged just after)"
 * where calls were in flight at a sample taken at this moment (docs/DEFINITIONS.md). */
const char *cmh_owners_unexplained_note(const cmh_owners_moment *m, int64_t t0, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
