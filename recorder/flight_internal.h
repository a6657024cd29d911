/*
 * flight_internal.h - what the flight record's two files share (recorder/flight.c: the file, its
 * extents and the append path; flight_records.c: the records other than trace entries and the
 * module map).  Private to the recorder.
 */
#ifndef CMH_RECORDER_FLIGHT_INTERNAL_H
#define CMH_RECORDER_FLIGHT_INTERNAL_H

#include "flight_format.h"
#include "internal.h"

CMH_HIDDEN extern cmh_flight_header *cmh_fl_h; /* the file's header, mapped; NULL: no flight record */
/* Reserve a record of len bytes (a multiple of 8), head included, in the active extent; NULL
 * when none can take it (then counted lost).  counted: the extent's writer count is raised
 * until cmh_fl_commit (records written outside an entry's claim).  first: a compact head's first
 * word, or 0.  *area: for cmh_fl_commit (counted, the extent's index; not counted,
 * CMH_FLIGHT_EXTENTS + the index). */
CMH_HIDDEN cmh_flight_rec *cmh_fl_reserve(uint32_t len, uint32_t *area, int counted, uint32_t first);
/* The body's sum, then the commit word that makes the record visible. */
CMH_HIDDEN void cmh_fl_commit(cmh_flight_rec *r, int type, uint32_t area);
/* Bodies follow their heads. */
#define CMH_FL_BODY(r, type) ((type *)(void *)((r) + 1))

/* ---- flight_records.c ---- */
/* The modules loaded now that the record does not name yet, each a record. */
CMH_HIDDEN void cmh_fl_scan_modules(void);
/* Stacks were recorded since the last scan (their modules may be new). */
CMH_HIDDEN int cmh_fl_stacks_unscanned(void);
/* Forget the modules named (a new file names them again); stacks too: the counts start again. */
CMH_HIDDEN void cmh_fl_modules_reset(int stacks_too);

#endif
