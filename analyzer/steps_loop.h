/* steps_loop.h - what steps.c (the boundaries a record names) and steps_loop.c (the loop found
 * in the trace) share; private to the analyzer. */
#ifndef CMH_STEPS_LOOP_H
#define CMH_STEPS_LOOP_H
#include <stdint.h>

#include "cumemhist/reports.h"

/* The steps between points p[0..np) (entry indices), into st: every stride-th boundary where
 * they are more than CMH_STEPS_MAX_POINTS. */
int cmh_steps_set_points(cmh_steps *st, const int64_t *p, uint32_t np);

/* The median of the gaps between points, in entries. */
uint64_t cmh_steps_median_gap(const int64_t *p, uint32_t np);

/* Does entry e belong to the series being cut (every entry, or one thread's)? */
static inline int cmh_steps_mine(const cmh_snapshot *s, const cmh_entry *e, uint32_t thread) { return !thread || cmh_entry_thread(s, e) == thread; }

/* The loop of the record's (or thread's) allocations and frees, found by its anchors or its
 * period (steps_loop.c's header): into st with *found set, or *found left 0. */
int cmh_steps_from_pattern(const cmh_replay *r, const cmh_sites *g, uint32_t thread, cmh_steps *st, int *found);

#endif
