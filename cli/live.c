/*
 * live.c - finding and reading the processes the live commands show (live.h).
 *
 * Without arguments the processes are the user's registry's (snapshot/registry.h), looked at
 * again at each refresh: a process that ended cleanly left it, one that died is stale (its flight
 * record stays for `cumemhist recover`) and is said once and removed from it.  Either way a
 * process seen running is kept, marked ended, with its final figures for keep_ended_ms: its
 * last moments (an OOM that ended the job) are what a monitor most needs to see.
 * Another user's processes are never shown: the registry is per user, and a flight record named
 * on the command line must belong to the caller.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/recover.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "cumemhist/symbolize.h"
#include "live.h"
#include "registry.h"
#include "report.h"

const char *cli_live_size(double b) { return rep_size(b); }

static int is_pid(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

int cli_live_resolve(const char *arg, char *flight, size_t cap, int ended_too)
{
    if (is_pid(arg)) {
        long long pid = atoll(arg);
        cmh_registry_entry *v;
        size_t n;
        if (cmh_registry_list(&v, &n, 0) != 0) {
            cli_error("pid %lld: the registry of recorded processes cannot be read (%s)", pid, strerror(errno));
            return CLI_EFILE;
        }
        int found = 0, stale = 0;
        char left[4200] = ""; /* a stale one's flight record, still there */
        for (size_t i = 0; i < n && !found; i++)
            if (v[i].pid == pid) {
                if (v[i].stale) {
                    stale = 1;
                    if (v[i].recoverable) snprintf(left, sizeof left, "%s", v[i].flight);
                } else found = 1, snprintf(flight, cap, "%s", v[i].flight);
            }
        free(v);
        if (found) return 0;
        if (!stale && cmh_registry_gone(&v, &n) == 0) { /* said gone by an earlier look (top --gone) */
            for (size_t i = 0; i < n && !stale; i++)
                if (v[i].pid == pid) stale = 1, snprintf(left, sizeof left, "%s", v[i].flight);
            free(v);
        }
        /* top and the exporter show a process that died as its flight record does (its final
         * state, marked ended: a monitor keeps serving it); a snapshot of it is recover's */
        if (stale && left[0] && ended_too) {
            snprintf(flight, cap, "%s", left);
            return 0;
        }
        if (stale && left[0]) cli_error("pid %lld is no longer running; its flight record %s is for 'cumemhist recover'", pid, left);
        else if (stale) cli_error("pid %lld is no longer running, and its flight record is no longer there", pid);
        else cli_error("pid %lld is not a process of yours recorded by cumemhist (none in the registry; a flight record path works too)", pid);
        return CLI_EFILE;
    }
    struct stat st;
    if (stat(arg, &st) != 0) {
        cli_error("%s: %s", arg, strerror(errno));
        return CLI_EFILE;
    }
    if (st.st_uid != getuid()) { /* even for root: another user's process is not ours to show */
        cli_error("%s: belongs to another user (uid %ld): not shown", arg, (long)st.st_uid);
        return CLI_EFILE;
    }
    if (cli_not_flight_record(arg, "top, snapshot and exporter watch running processes' flight records")) return CLI_EFILE;
    snprintf(flight, cap, "%s", arg);
    return 0;
}

int cli_not_flight_record(const char *path, const char *reads)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* (the reader says why) */
    if (S_ISDIR(st.st_mode)) { /* it said 'not a flight record (36864 bytes)' */
        cli_error("%s: a directory, not a flight record", path);
        return 1;
    }
    /* a snapshot given where a flight record goes ('top --once x.cmh' said 'not a flight record (2292
     * bytes)', recover 'not a flight record (no magic at byte 0)'): named as what it is, and the
     * commands that read it */
    unsigned char b[2] = {0, 0};
    FILE *f = S_ISREG(st.st_mode) ? fopen(path, "rb") : NULL;
    size_t got = f ? fread(b, 1, 2, f) : 0;
    if (f) fclose(f);
    if (got == 2 && ((b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) || (b[0] & 0xf0) == 0x80 || b[0] == 0xde || b[0] == 0xdf)) {
        cli_error("%s: a snapshot, not a flight record: %s; read a snapshot with cumemhist summary, peak or view", path, reads);
        return 1;
    }
    return 0;
}

static void proc_free(cli_proc *p)
{
    cmh_live_close(p->live);
    for (uint32_t i = 0; i < p->nan; i++) free(p->an[i].sites), free(p->an[i].owners);
    free(p->an);
    memset(p, 0, sizeof *p);
}

static int add_proc(cli_procs *ps, const char *flight, int64_t pid, int named)
{
    for (uint32_t i = 0; i < ps->n; i++) /* (one that ended is not the process a new entry names: a record's path is reused) */
        if (!strcmp(ps->v[i].flight, flight) && !ps->v[i].ended) return ps->v[i].seen = 1, 0;
    char err[4600];
    cmh_live *l;
    int rc = cmh_live_open(flight, ps->trace_cap, &l, err, sizeof err);
    if (rc != CMH_OK) {
        if (named) {
            cli_error("%s", err);
            return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
        }
        snprintf(ps->note, sizeof ps->note, "pid %lld: %.400s", (long long)pid, err);
        return 0;
    }
    if (ps->n == ps->cap) {
        uint32_t nc = ps->cap ? ps->cap * 2 : 16;
        cli_proc *nv = realloc(ps->v, nc * sizeof *nv);
        if (!nv) return cmh_live_close(l), CLI_ENOMEM;
        ps->v = nv, ps->cap = nc;
    }
    cli_proc *p = &ps->v[ps->n++];
    memset(p, 0, sizeof *p);
    p->live = l;
    p->seen = 1;
    p->pid = cmh_live_get_info(l)->pid;
    snprintf(p->flight, sizeof p->flight, "%s", flight);
    return 0;
}

/* Whether p's process still runs, and how it ended if not: a flight record of a process killed
 * while recording reads as any other, so this is asked of the host each look, as recover asks.
 * An end is for good: the figures are then the process's final ones. */
static void proc_state(cli_proc *p)
{
    if (p->ended) return;
    cmh_flight_identity id;
    char err[4600];
    const cmh_live_info *in = cmh_live_get_info(p->live);
    p->elsewhere = 0;
    if (cmh_flight_identify(p->flight, &id, err, sizeof err) == CMH_OK) {
        int proc = cli_flight_process(&id);
        if (proc == CLI_PROC_ELSEWHERE) p->elsewhere = 1;
        if (proc != CLI_PROC_GONE && proc != CLI_PROC_REUSED) return;
        p->ended = 1;
        cli_flight_ending(&id, in->state, in->end_signal, 0, 0, p->ending, sizeof p->ending);
        return;
    }
    /* No record at its path: a process removes its own at its end, once its snapshot holds it all
     * (and its registry entry after it), as record and recover do for one that died.  Ended once
     * its registry entry went (a clean end runs no code of the program after) or its pid is no
     * longer its own; the reader still has the record open, read to its end. */
    if (p->seen && cmh_registry_alive(in->pid, (uint64_t)in->start_ticks, in->boot_id)) return;
    p->ended = p->gone_record = 1;
    if (in->state == CMH_ENDED_SIGNALED)
        snprintf(p->ending, sizeof p->ending, "was stopped by %s, its snapshot written and its flight record removed",
                 cmh_signal_name(in->end_signal));
    else snprintf(p->ending, sizeof p->ending, "stopped running, its snapshot written and its flight record removed");
}

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int cli_procs_update(cli_procs *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) ps->v[i].seen = 0, ps->v[i].just_ended = 0;
    if (ps->nnamed && ps->looked) {
        /* found at the first look, and read from then on: a pid that no longer resolves (its
         * entry went at its end) or a record removed at the end is a process that ended */
        for (uint32_t i = 0; i < ps->n; i++) ps->v[i].seen = 1;
    } else if (ps->nnamed) {
        for (int i = 0; i < ps->nnamed; i++) {
            char flight[4200];
            int rc = cli_live_resolve(ps->named[i], flight, sizeof flight, 1);
            if (!rc) rc = add_proc(ps, flight, 0, 1);
            if (rc) return rc;
        }
    } else {
        cmh_registry_entry *v;
        size_t n;
        if (cmh_registry_list(&v, &n, 1) != 0) {
            cli_error("the registry of recorded processes cannot be read: %s", strerror(errno));
            return CLI_EFILE;
        }
        /* the processes found gone since the last look: one line for them all, where their flight
         * records are still there (a shared machine's killed benchmarks are many: a line each
         * buried the one job watched); those whose records went too leave nothing to say */
        size_t ngone = 0;
        int64_t first = 0;
        const char *first_flight = "";
        for (size_t i = 0; i < n; i++) {
            if (v[i].stale) {
                if (v[i].recoverable && !ngone++) first = v[i].pid, first_flight = v[i].flight;
                continue;
            }
            int rc = add_proc(ps, v[i].flight, v[i].pid, 0);
            if (rc) return free(v), rc;
        }
        if (ngone == 1)
            snprintf(ps->note, sizeof ps->note, "pid %lld is gone; its flight record %.300s is for 'cumemhist recover'",
                     (long long)first, first_flight);
        else if (ngone > 1) {
            int at = snprintf(ps->note, sizeof ps->note, "%zu recorded processes are gone (pids", ngone);
            size_t shown = 0;
            for (size_t i = 0; i < n && shown < 5; i++)
                if (v[i].stale && v[i].recoverable)
                    at += snprintf(ps->note + at, sizeof ps->note - (size_t)at, "%s %lld", shown++ ? "," : "", (long long)v[i].pid);
            snprintf(ps->note + at, sizeof ps->note - (size_t)at,
                     "%s); their flight records are for 'cumemhist recover': 'cumemhist top --gone' lists them",
                     ngone > shown ? " and more" : "");
        }
        if (ngone && !ps->quiet) fprintf(stderr, "cumemhist: note: %s\n", ps->note);
        free(v);
    }
    ps->looked = 1;
    uint32_t k = 0;
    int64_t now = mono_ms();
    for (uint32_t i = 0; i < ps->n; i++) {
        cli_proc *p = &ps->v[i];
        /* an ended one too: what its last moments appended (its last OOM) is read, and an OOM
         * whose retry was pending counts now its process is gone (cmh_live_devices) */
        char err[4600];
        if (cmh_live_refresh(p->live, err, sizeof err) != CMH_OK) snprintf(ps->note, sizeof ps->note, "%.500s", err);
        proc_state(p);
        if (!p->seen && !p->ended) { /* out of the registry, yet running: not ours to show any more */
            proc_free(p);
            continue;
        }
        if (!p->ended) p->ran = 1;
        else if (!p->ended_ms) p->ended_ms = now, p->just_ended = p->ran;
        else if ((p->ran || !ps->nnamed) && now - p->ended_ms >= ps->keep_ended_ms) { /* its final figures were kept long enough */
            proc_free(p);
            continue;
        }
        ps->v[k++] = *p;
    }
    ps->n = k;
    return 0;
}

void cli_procs_free(cli_procs *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) proc_free(&ps->v[i]);
    free(ps->v);
    memset(ps, 0, sizeof *ps);
}

static int by_bytes(const void *a, const void *b)
{
    const cmh_owner_row *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

int cli_proc_analyze(cli_proc *p, uint32_t top, int64_t min_ms)
{
    const cmh_live_info *info = cmh_live_get_info(p->live);
    /* (one that ended: at once on what its end appended, then never again: its state is final) */
    if (p->analyzed && (p->analyzed_bytes == info->bytes || (!p->ended && mono_ms() - p->analyzed_ms < min_ms))) return 0;
    p->analyzed_ms = mono_ms();
    for (uint32_t i = 0; i < p->nan; i++) free(p->an[i].sites), free(p->an[i].owners);
    free(p->an);
    p->an = NULL;
    p->nan = 0;
    cmh_snapshot s;
    if (cmh_live_snapshot(p->live, &s) != CMH_OK) return CLI_ENOMEM;
    cmh_symbolize_result sr;
    cmh_symbolize_offline(&s, CMH_SYM_ALL | CMH_SYM_KEEP, &sr); /* the same binaries each time: kept open */
    int rc = 0;
    char err[512];
    cmh_site_opts so = {CMH_GROUP_SITE, 0, NULL, 0};
    cmh_sites *g = cmh_sites_new(&s, &so, &rc, err, sizeof err);
    int32_t devs[66];
    int nd = cmh_snapshot_devices(&s, devs, 66);
    if (nd > 66) nd = 66;
    p->an = calloc((size_t)(nd ? nd : 1), sizeof *p->an);
    if (!p->an || !g) rc = CLI_ENOMEM;
    for (int i = 0; i < nd && !rc; i++) {
        cli_dev_analysis *a = &p->an[p->nan++];
        a->device = devs[i];
        cmh_leak_report lr;
        if (cmh_leaks_compute(&s, devs[i], g, 0, &lr) == CMH_OK) {
            a->live_sites = lr.nsites;
            uint32_t n = lr.nsites < top ? lr.nsites : top;
            a->sites = calloc(n ? n : 1, sizeof *a->sites);
            for (uint32_t k = 0; a->sites && k < n; k++) {
                const cmh_site *x = &lr.sites[k];
                cli_site_row *r = &a->sites[a->nsites++];
                snprintf(r->name, sizeof r->name, "%s", rep_site_name(&s, g, x));
                r->bytes = x->bytes;
                r->count = x->count;
                r->verdict = x->verdict;
                r->rate = x->growing ? x->rate : 0;
                const cmh_stack *st = &s.stacks[x->stack < s.nstacks ? x->stack : 0];
                for (uint32_t f = 0; f < st->count && r->nframes < CLI_LIVE_FRAMES; f++)
                    snprintf(r->frames[r->nframes++], sizeof r->frames[0], "%s", rep_frame(&s, &s.frames[s.stack_frames[st->first + f]]));
            }
            cmh_leak_report_free(&lr);
        }
        cmh_owners_report or;
        if (devs[i] >= 0 && cmh_owners_compute_end(&s, devs[i], &or) == CMH_OK) { /* owners now: the end alone */
            for (uint32_t m = 0; m < or.nmoments; m++) {
                if (strcmp(or.moments[m].what, "end")) continue;
                a->owners = malloc((or.moments[m].nrows ? or.moments[m].nrows : 1) * sizeof *a->owners);
                if (a->owners) {
                    if (or.moments[m].nrows) /* (none: no rows, and no array to copy from) */
                        memcpy(a->owners, or.moments[m].rows, or.moments[m].nrows * sizeof *a->owners);
                    a->nowners = or.moments[m].nrows;
                    qsort(a->owners, a->nowners, sizeof *a->owners, by_bytes);
                }
            }
            cmh_owners_report_free(&or);
        }
    }
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    p->analyzed = 1;
    p->analyzed_bytes = info->bytes;
    return rc;
}
