/*
 * live.h - what the live commands (top, snapshot, exporter) share (cli/live.c): finding the
 * processes to watch (the registry, or the pids and flight records named), one incremental
 * reader each (cumemhist/live.h), and the figures each shows, computed once here from the
 * analyzer (sites still live now with their leak verdict, owners at the end) so that top, the
 * exporter and a snapshot's reports agree.
 */
#ifndef CMH_CLI_LIVE_H
#define CMH_CLI_LIVE_H

#include <stdint.h>

#include "cumemhist/live.h"
#include "cumemhist/owners.h"
#include "cumemhist/recover.h"

#define CLI_LIVE_FRAMES 12
/* the trace window a watching reader keeps per device (the leak verdict's steps come from it):
 * the latest 65,536 entries; one-frame runs keep what the recording keeps */
#define CLI_LIVE_TRACE 65536

typedef struct cli_site_row {
    char name[512];
    uint64_t bytes, count;
    int verdict;  /* CMH_LEAK_* */
    int64_t rate; /* bytes per step, growing sites */
    int over_time; /* growing judged over the record's time (steps not found): no rate per step */
    uint32_t nframes;
    char frames[CLI_LIVE_FRAMES][300]; /* its stack from the site outward, as rep_print_frames prints it */
    char callers[600];                 /* "by caller: ..." (cmh_site_callers_text), "" for one caller */
} cli_site_row;

typedef struct cli_dev_analysis {
    int32_t device;
    cli_site_row *sites; /* largest first, at most the top asked for */
    uint32_t nsites, live_sites;
    cmh_owner_row *owners;
    uint32_t nowners;
    uint64_t allocated, reserved; /* the device's, in the state analysed (top says when the row above has moved on) */
} cli_dev_analysis;

typedef struct cli_proc {
    cmh_live *live;
    char flight[4200];
    int64_t pid;
    int seen; /* still named by the registry at the last look */
    /* whether its process still runs, as this host tells at each look (cli_flight_process):
     * ended, and how in recover's words (cmh_flight_ending); elsewhere: recorded on another
     * host, where whether it runs cannot be told.  A record's figures are then its end's */
    int ended, elsewhere;
    char ending[400];
    /* Ended is for good: a process that ended keeps its final figures (the reader still holds
     * its record open, read to its end even once removed) for keep_ended_ms after this command
     * saw it end (ended_ms, monotonic), so that a scrape at a normal interval still sees its last
     * OOM; ran: this command saw it running; just_ended: it ended at this look (to say once);
     * gone_record: its flight record is no longer at its path (made into its snapshot) */
    int ran, just_ended, gone_record;
    /* who its record says it is, as last read while the record was there (how it ended is told
     * from it once the record is gone) */
    cmh_flight_identity id;
    int have_id;
    int64_t ended_ms;
    /* the analysis, of the state after analyzed_bytes record bytes */
    uint64_t analyzed_bytes;
    int64_t analyzed_ms;
    int analyzed;
    cli_dev_analysis *an;
    uint32_t nan;
} cli_proc;

typedef struct cli_procs {
    cli_proc *v;
    uint32_t n, cap;
    char **named; /* pids or flight records given, or none: the registry */
    int nnamed;
    int quiet;    /* say nothing of stale entries */
    uint64_t trace_cap; /* trace entries per device each reader keeps for the analysis (0: all the recording keeps) */
    int64_t keep_ended_ms; /* how long a process seen running and then ending keeps its final figures */
    int looked;            /* the first look was made (named targets are found then, and read to their end) */
    char note[512]; /* the latest thing worth saying (a stale entry, an unreadable record) */
    int watching; /* cli_procs_watch's thread runs */
    int screen;   /* full-screen top: notes go to its note line, not to stderr */
} cli_procs;

/* Watch the registry between looks (all processes, none named): a thread opens each process's
 * flight record the moment it registers and holds it; the next look (cli_procs_update) reads it,
 * so that one that ends before then (an OOM at start-up: its record is removed at its end) is
 * still read to its end and shown ended.  0, or -1 (not watched: looks alone find processes). */
int cli_procs_watch(cli_procs *ps);
/* Take the records the watcher holds (cli_procs_update does, at each look). */
void cli_procs_catch(cli_procs *ps);

/* Find the processes (first call) or look again (later calls: new ones in the registry are
 * added), then refresh each reader.  A process that ends (its registry entry gone, or its pid no
 * longer its own) is marked ended and kept, its final figures read to the end, for
 * keep_ended_ms; then dropped.  Named targets are found at the first look only: 0, or an exit
 * status (a named target that cannot be read then: the message printed); a named process that
 * ends later is one that ended, not an error. */
int cli_procs_update(cli_procs *ps);
void cli_procs_free(cli_procs *ps);
/* The flight record of a pid or path argument, checked to be the user's own; 0 or CLI_*.
 * ended_too: a pid whose process died (stale in the registry, its flight record still there)
 * resolves to that record (top, exporter: its final state, marked ended); else it is an error
 * that names the record for `cumemhist recover` (snapshot) */
int cli_live_resolve(const char *arg, char *flight, size_t cap, int ended_too);
/* After cli_live_resolve: "" or, for a pid found in the process itself rather than the registry,
 * where it registered and the record read (the caller says it: a note) */
extern char cli_live_found[8400];
/* Analyze a process's state now: top sites per device.  Kept while nothing new was read, or
 * for min_ms after the last analysis (a snapshot of the state, symbolized, and the reports over
 * it cost far more than a refresh). */
int cli_proc_analyze(cli_proc *p, uint32_t top, int64_t min_ms);
/* "1.5 GiB"-style, for the screen */
const char *cli_live_size(double bytes);

#endif
