/*
 * cumemhist/recover.h - a snapshot from a flight record: the file a recording process keeps its
 * history in (snapshot/flight_format.h), turned into a normal snapshot after the process died,
 * however it died (`cumemhist recover`, and `cumemhist record` when its program did not write
 * its snapshot).
 *
 * The reader trusts nothing in the file: every area, record length and count is checked against
 * the file's size before it is used; a record whose commit word is wrong (torn by the death of
 * its writer) is skipped and counted, never read, and so is one whose body does not match the
 * checksum in its head (damaged after it was written).  Frames are PCs with their module; their names
 * and lines come from the symbolizer (cumemhist/symbolize.h) afterwards.
 */
#ifndef CUMEMHIST_RECOVER_H
#define CUMEMHIST_RECOVER_H

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* QUIT: it called _exit() / _Exit() (end_signal: the status) */
enum { CMH_ENDED_RUNNING = 0, CMH_ENDED_EXITED = 1, CMH_ENDED_SIGNALED = 2, CMH_ENDED_EXECED = 3, CMH_ENDED_QUIT = 4 };

typedef struct cmh_recover_info {
    int64_t pid;
    int state;      /* CMH_ENDED_*: what the process itself marked (RUNNING: it said nothing: SIGKILL?) */
    int end_signal; /* with SIGNALED; with QUIT, the _exit status */
    uint64_t entries;         /* trace entries in the snapshot */
    uint64_t journal_entries; /* of them, from the journal (the rest from the checkpoint) */
    uint64_t torn;            /* records skipped, torn by their writer's death */
    uint64_t damaged;         /* records skipped, whole but not matching their checksum */
    int unverified;           /* a version-1 record: no checksums to check */
    uint64_t lost;            /* records the journal had no room for */
    uint64_t orphans;         /* blocks whose segment was not in the record */
    int checkpoint;           /* a checkpoint was the base (its file: FLIGHT.ckptN.cmh) */
    char snapshot_path[4200]; /* where the process would have written its snapshot */
    uint64_t truncated;       /* bytes of written records past the file's end (a cut copy): lost */
    int marks_exit;           /* as in cmh_flight_identity */
    uint64_t read_to;         /* with truncated: the byte after the last record read before the cut */
} cmh_recover_info;

/* Read the flight record at path into out (initialized here).  CMH_OK; CMH_EFORMAT or CMH_EIO
 * with err naming the file and the byte; CMH_ENOMEM.  out->ending says how the process ended as
 * far as the record knows. */
int cmh_flight_recover(const char *path, cmh_snapshot *out, cmh_recover_info *info, char *err, size_t errlen);
/* Who wrote a flight record, from its header alone (cheap on a record of any size): what a
 * caller needs to tell whether that process still runs.  Fields a record written before them
 * lacks are zero or empty. */
typedef struct cmh_flight_identity {
    int64_t pid;
    uint64_t start_ticks;  /* /proc/PID/stat field 22 of the writer (0: unknown) */
    char boot_id[40];      /* the boot it ran in ("": unknown) */
    char hostname[256];
    int64_t forked_from;   /* the pid it was forked from (0: none) */
    int state;             /* CMH_ENDED_*, as the process marked it */
    int end_signal;        /* with state SIGNALED the signal, with QUIT the _exit() status */
    int marks_exit;        /* its recorder marks _exit() (QUIT): no mark at all was a death no code of it saw */
    char snapshot_path[4200]; /* where the process writes its snapshot when it ends ("": not said) */
} cmh_flight_identity;
/* CMH_OK; CMH_EFORMAT (not a flight record) or CMH_EIO with err naming the file. */
int cmh_flight_identify(const char *path, cmh_flight_identity *id, char *err, size_t errlen);
/* How a process that no longer runs ended, in words after its pid ("was killed by SIGSEGV",
 * "ended without its exit dump and left no mark (SIGKILL, ...)"): from its parent's wait status
 * where have_status, else what it marked in its flight record (state, end_signal: CMH_ENDED_*).
 * One wording for recover, record, top, a parent's reports of its children and
 * cmh_flight_recover's ending. */
void cmh_flight_ending(const cmh_flight_identity *id, int state, int end_signal, int have_status, int status, char *how, size_t cap);
/* "SIGSEGV", or "signal N" */
const char *cmh_signal_name(int sig);

#ifdef __cplusplus
}
#endif
#endif
