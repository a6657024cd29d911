/*
 * cmd_snapshot.c - `cumemhist snapshot PID|FLIGHT [-o OUT]`: a snapshot of a running process,
 * taken from its flight record by the live reader (cumemhist/live.h): no signal sent, nothing
 * in the record changed.  Every report reads the result as it reads any snapshot.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cumemhist/live.h"
#include "cumemhist/recover.h"
#include "cumemhist/symbolize.h"
#include "live.h"
#include "report.h"

#define KIDS_SAID 16 /* children said one a line; the snapshot lists them all */

static const char *g_out;
static int g_quiet;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write it (default: cumemhist.PID.live.cmh here)", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
    {"--quiet", "-q", CLI_FLAG, &g_quiet, NULL, "say nothing on success", NULL, 0, 0, NULL},
};

const cli_command cli_cmd_snapshot = {
    "snapshot", "[options] PID|FLIGHT",
    "Write a snapshot of a running recorded process, as it is now, from its flight record: the\n"
    "process is not signalled and the record is not touched.  PID is looked up in your registry\n"
    "of recorded processes (`cumemhist top` lists them), else in the process itself (its flight\n"
    "record is mapped in it); FLIGHT is a flight record's path.  The children it forked without exec\n"
    "(DataLoader workers, multiprocessing) are named, each with its record and how it ended\n"
    "(a running one: `cumemhist snapshot CHILD` takes its own).",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist snapshot 4242 -o now.cmh && cumemhist leaks now.cmh"};

int cmd_snapshot(int argc, char **argv)
{
    char *arg;
    int n, rc = cli_parse(&cli_cmd_snapshot, argc, argv, &arg, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    char flight[4200], err[4600];
    if ((rc = cli_live_resolve(arg, flight, sizeof flight, 0))) return rc;
    if (cli_live_found[0] && !g_quiet) fprintf(stderr, "cumemhist: note: %s\n", cli_live_found);
    cmh_live *l;
    /* the whole trace the record holds (up to the recording's max_entries, or 16M entries a device) */
    if ((rc = cmh_live_open(flight, UINT64_C(1) << 24, &l, err, sizeof err)) != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    const cmh_live_info *info = cmh_live_get_info(l);
    cmh_snapshot s;
    if (cmh_live_snapshot(l, &s) != CMH_OK) {
        cmh_live_close(l);
        cli_error("%s: out of memory", flight);
        return CLI_ENOMEM;
    }
    uint64_t entries = s.nentries;
    /* a dead process's record read as if it still ran ('pid N: 3 entries so far'): said, and
     * recover named, which makes its snapshot and says how it ended */
    cmh_flight_identity id;
    int proc = cmh_flight_identify(flight, &id, err, sizeof err) == CMH_OK ? cli_flight_process(&id) : CLI_PROC_ALIVE_UNSURE;
    int gone = proc == CLI_PROC_GONE || proc == CLI_PROC_REUSED;
    char ending[400];
    if (gone)
        snprintf(ending, sizeof ending, "was no longer running when this snapshot was taken from its flight record (%" PRIu64 " %s)", entries,
                 entries == 1 ? "entry" : "entries");
    else
        snprintf(ending, sizeof ending, "was still running when this snapshot was taken from its flight record (%" PRIu64 " %s so far)", entries,
                 entries == 1 ? "entry" : "entries");
    cmh_strtab_intern(&s.strings, ending, strlen(ending), &s.ending);
    cmh_symbolize_result r;
    cmh_symbolize_offline(&s, CMH_SYM_ALL, &r);
    /* the children it forked (DataLoader workers, multiprocessing), each with where its record is
     * and how it ended, as the reports of its snapshot will say them: said nowhere before its end */
    char (*kids)[1200] = s.nchildren && !g_quiet ? calloc(s.nchildren < KIDS_SAID ? s.nchildren : KIDS_SAID, sizeof *kids) : NULL;
    uint32_t nkids = kids ? (s.nchildren < KIDS_SAID ? s.nchildren : KIDS_SAID) : 0, more = s.nchildren - nkids + s.children_more;
    char own[64];
    snprintf(own, sizeof own, "cumemhist.%lld.live.cmh", (long long)info->pid);
    const char *dest = g_out ? g_out : own;
    rc = cmh_cmh_write_file(&s, dest, err, sizeof err);
    for (uint32_t i = 0; rc == CMH_OK && i < nkids; i++) rep_child_text(dest, &s.children[i], kids[i], sizeof kids[i]);
    cmh_snapshot_free(&s);
    if (rc != CMH_OK) {
        free(kids);
        cmh_live_close(l);
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    if (!g_quiet) {
        if (gone)
            fprintf(stderr, "cumemhist: pid %lld is not running%s: its %" PRIu64 " %s in %s; 'cumemhist recover %s' makes its "
                    "snapshot, says how it ended and removes the record", (long long)info->pid,
                    proc == CLI_PROC_REUSED ? " (its pid belongs to a later process)" : "", entries, entries == 1 ? "entry is" : "entries are",
                    dest, flight);
        else fprintf(stderr, "cumemhist: pid %lld: %" PRIu64 " %s so far, in %s", (long long)info->pid, entries, entries == 1 ? "entry" : "entries", dest);
        if (info->torn) fprintf(stderr, " (%" PRIu64 " torn record%s skipped)", info->torn, info->torn == 1 ? "" : "s");
        if (info->damaged) fprintf(stderr, " (%" PRIu64 " damaged record%s skipped)", info->damaged, info->damaged == 1 ? "" : "s");
        fputc('\n', stderr);
        for (uint32_t i = 0; i < nkids; i++) fprintf(stderr, "cumemhist: pid %lld: %s\n", (long long)info->pid, kids[i]);
        if (more)
            fprintf(stderr, "cumemhist: pid %lld: %u more forked %s, not looked up here\n", (long long)info->pid, more,
                    more == 1 ? "child" : "children");
    }
    free(kids);
    cmh_live_close(l);
    return 0;
}
