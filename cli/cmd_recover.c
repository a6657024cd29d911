/*
 * cmd_recover.c - `cumemhist recover FLIGHT [-o OUT]`: the snapshot of a process that died
 * before writing it, from the flight record it kept (analyzer/recover.c).  `cumemhist record`
 * does the same for each of its processes that left one (cli_recover_flight).
 *
 * A record whose process still runs is still being written: recovering it as if it were final
 * would delete what the process records next.  So the record's process is looked for first (on
 * this host, by pid, start time and boot id: cli_flight_process); a live one is refused unless
 * --live asks for a copy, which leaves the record as it is.
 *
 * Nothing is lost to the snapshot written: a file at its path is replaced (and said to be) only
 * when it is a .cmh snapshot the recovered one stands in for: this process's own earlier one
 * (SIGUSR1; the same pid, host and start time) whose history the recovery holds whole
 * (cmh_record_holds).  Another process's snapshot is its record, which this flight record does not
 * supersede: kept, like the rest, unless --force.  One that holds what the flight record lacks (PyTorch's part,
 * which only a dump takes) is kept: the recovery goes beside it (NAME.recovered.cmh), or, at a
 * path -o named, is refused.  At the default path, which the user did not name, a pickle, a
 * flight record or any other file is kept the same way; a path -o names is the user's choice,
 * replaced as every writer replaces it (snapshot/atomic.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/recover.h"
#include "cumemhist/symbolize.h"
#include "registry.h"

static const char *g_out;
static int g_keep, g_live;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH",
     "where to write the snapshot (default: FLIGHT without .flight;\nwith --live, NAME.live.cmh).  A file there is replaced, "
     "and said to be, only\nwhen it is a .cmh the recovery stands in for: this process's earlier\n"
     "snapshot (SIGUSR1) whose history it holds whole; else kept (another process's\nsnapshot, one with PyTorch's part, a pickle, "
     "any other file): the recovery goes\nto NAME.recovered.cmh instead, -o's path is refused (exit 1; --force replaces it)", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
    {"--keep", NULL, CLI_FLAG, &g_keep, NULL, "keep the flight record (and its checkpoints) afterwards", NULL, 0, 0, NULL},
    {"--live", NULL, CLI_FLAG, &g_live, NULL,
     "the process still runs: take a copy of what it recorded so far and leave\nthe record as it is (nothing removed, nothing marked)", NULL, 0, 0, NULL},
};

const cli_command cli_cmd_recover = {
    "recover", "[options] FLIGHT",
    "Write the snapshot of a process that died before writing it (a crash, SIGKILL, a scheduler's\n"
    "hard limit) from the flight record it kept beside its snapshot path (NAME.cmh.flight): every\n"
    "entry it recorded, its stacks symbolized here from its module map.  `cumemhist record` does\n"
    "this by itself; this is for a program run with a plain LD_PRELOAD.  A record whose process\n"
    "still runs (its pid, with the same start time, on this host) is refused with exit status 2;\n"
    "--live copies it instead, leaving it untouched.  Nothing at the snapshot's path is lost: a\n"
    "snapshot the process wrote there before (SIGUSR1) is replaced only when the recovery holds\n"
    "all of it (not PyTorch's part, which only a dump takes); another process's snapshot (another\n"
    "pid, host or start time) is never replaced; else the recovery is NAME.recovered.cmh (with -o:\n"
    "refused, exit 1, unless --force).",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist recover cumemhist.4242.cmh.flight"};

int cli_flight_process(const cmh_flight_identity *id)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    if (id->hostname[0] && strcmp(id->hostname, host)) return CLI_PROC_ELSEWHERE;
    if (id->boot_id[0]) {
        char boot[40];
        cmh_boot_id(boot, sizeof boot);
        if (boot[0] && strcmp(boot, id->boot_id)) return CLI_PROC_GONE; /* this host has rebooted since */
    }
    char state;
    uint64_t start;
    if (id->pid <= 0 || !cmh_proc_stat(id->pid, &state, &start)) return CLI_PROC_GONE;
    if (state == 'Z' || state == 'X') return CLI_PROC_GONE; /* ended; its parent has not reaped it yet */
    if (!id->start_ticks) return CLI_PROC_ALIVE_UNSURE; /* a record older than start times */
    return start == id->start_ticks ? CLI_PROC_ALIVE : CLI_PROC_REUSED;
}

static const char *thousands(uint64_t v)
{
    static char ring[4][32];
    static int k;
    char *b = ring[k++ & 3], tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) b[o++] = ',';
        b[o++] = tmp[i];
    }
    b[o] = 0;
    return b;
}

/* The claim on the snapshot path a killed process left (PATH.claim: "SESSION PID"): without
 * it, the next run in the same session would write elsewhere. */
static void drop_claim(const char *snapshot, long long pid)
{
    char claim[4400];
    snprintf(claim, sizeof claim, "%s.claim", snapshot);
    FILE *f = *snapshot ? fopen(claim, "r") : NULL;
    long long sess, owner;
    int mine = f && fscanf(f, "%lld %lld", &sess, &owner) == 2 && owner == pid;
    if (f) fclose(f);
    if (mine) unlink(claim);
}

/* The snapshot's default name: the record's own without ".flight" (where the process would
 * have written it, unless the record was moved: a later run keeps a dead one's as
 * NAME.PID.cmh.flight), else the path the record names; a live copy's with ".live" before ".cmh",
 * never the path the process itself will write at its end. */
static void default_dest(const char *flight, const char *named, int live, char *out, size_t cap)
{
    size_t fl = strlen(flight);
    if (fl > 7 && !strcmp(flight + fl - 7, ".flight")) snprintf(out, cap, "%.*s", (int)(fl - 7), flight);
    else snprintf(out, cap, "%s", named);
    size_t l = strlen(out);
    if (!live || !l) return;
    if (l > 4 && !strcmp(out + l - 4, ".cmh")) out[l - 4] = 0;
    snprintf(out + strlen(out), cap - strlen(out), ".live.cmh");
}

/* The directory a path is in, resolved (links, "..") when it can be, else as written. */
static void dir_of(const char *path, char *out, size_t cap)
{
    char d[4400], r[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(d, sizeof d, ".");
    else if (slash == path) snprintf(d, sizeof d, "/");
    else snprintf(d, sizeof d, "%.*s", (int)(slash - path), path);
    snprintf(out, cap, "%s", realpath(d, r) ? r : d);
}

/* Where a snapshot the path dest could not take goes in the runtime directory dir: its name
 * there, with the pid (once), as a flight record kept there is named (recorder/config.c). */
static void runtime_name(const char *dir, const char *dest, long long pid, char *out, size_t cap)
{
    const char *base = strrchr(dest, '/');
    base = base ? base + 1 : dest;
    size_t stem = strlen(base);
    if (stem > 4 && !strcmp(base + stem - 4, ".cmh")) stem -= 4;
    char num[32];
    int n = snprintf(num, sizeof num, ".%lld", pid);
    int has = stem > (size_t)n && !strncmp(base + stem - (size_t)n, num, (size_t)n);
    snprintf(out, cap, "%s/%.*s%s.cmh", dir, (int)stem, base, has ? "" : num);
}

/* Whether the recovered snapshot s may be written at dest (nothing lost: the file header).
 * DEST_FREE: nothing there (or a device, a pipe, a link: written through or replaced as any
 * output is); DEST_REPLACE: a .cmh s stands in for, said in said ("replacing ..."); DEST_KEEP: a
 * file that holds what s does not, said in why ("holds ..."). */
enum { DEST_FREE, DEST_REPLACE, DEST_KEEP };
static int judge_dest(const char *dest, int named, const cmh_snapshot *s, char *said, size_t scap, char *why, size_t wcap)
{
    struct stat st;
    said[0] = why[0] = 0;
    if (lstat(dest, &st) != 0 || !S_ISREG(st.st_mode)) return DEST_FREE;
    const char *kind = cmh_recording_kind(dest);
    if (named && (!kind || strcmp(kind, "a cumemhist snapshot (.cmh)"))) return DEST_FREE; /* (as every writer replaces it) */
    if (!kind || strcmp(kind, "a cumemhist snapshot (.cmh)")) {
        snprintf(why, wcap, "holds %s", kind ? kind : "something other than a recording (not a .cmh snapshot, a pickle or a flight record)");
        return DEST_KEEP;
    }
    cmh_snapshot old;
    char err[4600];
    int guard = cmh_inputs_guard(0); /* read to be judged, not an input that no output may replace */
    int rc = cmh_snapshot_load(dest, &old, err, sizeof err);
    cmh_inputs_guard(guard);
    if (rc != CMH_OK) {
        snprintf(why, wcap, "holds a .cmh snapshot that could not be read whole (%s)", err);
        return DEST_KEEP;
    }
    int verdict = DEST_REPLACE;
    cmh_record_id ns, os;
    cmh_record_id_of(s, &ns);
    cmh_record_id_of(&old, &os);
    if (!cmh_same_process(&ns, &os)) {
        /* another process's record (same pid, host and start time make one process): this flight
         * record does not supersede it, whatever its path */
        verdict = DEST_KEEP;
        if (old.pid > 0 && old.pid != s->pid)
            snprintf(why, wcap, "holds pid %lld's snapshot, another process's record (this flight record is pid %lld's)", (long long)old.pid,
                     (long long)s->pid);
        else
            snprintf(why, wcap, "holds the snapshot of another process%s (another host or start time than this flight record's)",
                     old.pid > 0 ? " with its pid" : "");
    } else {
        int h = cmh_record_holds(&ns, &os);
        uint64_t more = s->nentries > old.nentries ? s->nentries - old.nentries : 0;
        if (h == CMH_HOLDS_SAME || h == CMH_HOLDS_MORE)
            snprintf(said, scap, "replacing its own earlier snapshot there (%s %s): this one holds all of it%s%s%s", thousands(old.nentries),
                     old.nentries == 1 ? "entry" : "entries", more ? " and " : "", more ? thousands(more) : "",
                     more ? more == 1 ? " entry more" : " entries more" : "");
        else {
            verdict = DEST_KEEP;
            const char *when = old.ending ? cmh_str(&old, old.ending) : "";
            const char *on = strstr(when, " written on ");
            char at[120] = "";
            if (on) snprintf(at, sizeof at, " (written on %.*s)", (int)strcspn(on + 12, " ("), on + 12);
            if (old.torch && !s->torch)
                snprintf(why, wcap, "holds pid %lld's own snapshot%s with PyTorch's part, which a flight record lacks", (long long)old.pid, at);
            else
                snprintf(why, wcap, "holds pid %lld's own snapshot%s, with %s %s the recovery lacks", (long long)old.pid, at,
                         old.nentries > s->nentries ? "entries" : "a later part",
                         old.nentries > s->nentries ? "that" : "of its history that");
        }
    }
    cmh_snapshot_free(&old);
    return verdict;
}

/* NAME.recovered.cmh beside NAME.cmh (or NAME): where a recovery goes when its path is kept. */
static void recovered_name(const char *dest, char *out, size_t cap)
{
    size_t l = strlen(dest);
    int cmh = l > 4 && !strcmp(dest + l - 4, ".cmh");
    snprintf(out, cap, "%.*s.recovered.cmh", (int)(cmh ? l - 4 : l), dest);
}

int cli_recover_flight(const char *flight, const char *out, int have_status, int status, int keep, int quiet, int live, int fallback,
                       cli_recovered *res)
{
    cli_recovered mine;
    if (!res) res = &mine;
    memset(res, 0, sizeof *res);
    char err[4600];
    cmh_flight_identity id;
    int rc = cmh_flight_identify(flight, &id, err, sizeof err);
    if (rc != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    int proc = cli_flight_process(&id), running = proc == CLI_PROC_ALIVE || proc == CLI_PROC_ALIVE_UNSURE;
    if (running && !live) {
        cli_error("%s: pid %lld is still running%s: its flight record is still being written, and recovering it "
                  "would remove what it records next. 'cumemhist recover --live %s' takes a copy and leaves the record as it is",
                  flight, (long long)id.pid,
                  proc == CLI_PROC_ALIVE_UNSURE ? " (or a later process has its pid: this record is older than start times)" : "", flight);
        return CLI_EUSAGE;
    }
    if (live) keep = 1; /* a copy: the record stays exactly as it is */
    if (proc == CLI_PROC_ELSEWHERE) keep = 1; /* it may still be written there */
    cmh_snapshot s;
    cmh_recover_info info;
    rc = cmh_flight_recover(flight, &s, &info, err, sizeof err);
    if (rc != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    /* a copy of a running process's record: a record still open is one being written, not lost */
    if (live && running) s.history_lost.torn = 0;
    char how[400];
    if (live && running) snprintf(how, sizeof how, "was still running when this copy was taken");
    else if (live && proc == CLI_PROC_ELSEWHERE) snprintf(how, sizeof how, "ran on %s (whether it still runs cannot be told here)", id.hostname);
    else cmh_flight_ending(&id, info.state, info.end_signal, have_status, status, how, sizeof how);
    char ending[520];
    if (live) snprintf(ending, sizeof ending, "%s (a copy of its flight record, %s %s so far)", how, thousands(info.entries),
                       info.entries == 1 ? "entry" : "entries");
    else snprintf(ending, sizeof ending, "%s after %s %s (recovered from its flight record)", how, thousands(info.entries),
                       info.entries == 1 ? "entry" : "entries");
    cmh_strtab_intern(&s.strings, ending, strlen(ending), &s.ending);
    cmh_symbolize_result r;
    /* names and lines from the binaries still here; kept open for the next recovery of this
     * command (record recovers each forked worker of a job: they share their binaries) */
    cmh_symbolize_offline(&s, CMH_SYM_ALL | CMH_SYM_KEEP, &r);
    char own[4400];
    default_dest(flight, info.snapshot_path, live, own, sizeof own);
    const char *dest = out ? out : own;
    /* record's recovery of a process whose path is a character device (-o /dev/null): written
     * through it as its exit dump would have been, nothing kept, as -o asked (it went to the
     * runtime directory while a process that ended normally was discarded); one that fails
     * there (/dev/full) falls back to the runtime directory below */
    struct stat dev_st;
    int through = fallback && !out && !live && info.snapshot_path[0] && stat(info.snapshot_path, &dev_st) == 0 && S_ISCHR(dev_st.st_mode);
    if (through) dest = info.snapshot_path;
    if (!*dest) {
        cmh_snapshot_free(&s);
        cli_error("%s: the record does not say where its snapshot goes: name it with -o", flight);
        return CLI_EUSAGE;
    }
    /* nothing lost: a file there that holds what this snapshot does not is kept */
    /* (why: the judgement, smaller than kept, which may come to hold it with the path: GCC 12's
     * Release build refused a copy of kept into why as one that may be cut) */
    char replacing[400], kept[10000] = "", aside[4400], why[4800] = "";
    int judged = judge_dest(dest, out != NULL, &s, replacing, sizeof replacing, why, sizeof why);
    if (judged == DEST_KEEP && cli_force) { /* the user said so: replaced, and said */
        snprintf(replacing, sizeof replacing, "replacing what was there (--force): it %.300s", why);
        judged = DEST_REPLACE;
        why[0] = 0;
    }
    if (judged != DEST_KEEP) snprintf(kept, sizeof kept, "%s", why);
    else {
        if (out) {
            cmh_snapshot_free(&s);
            cli_error("-o %s: %s: not replaced (name another file, or --force to replace it); %s is left as it is", dest, why, flight);
            return CLI_EFILE;
        }
        recovered_name(dest, aside, sizeof aside);
        char why2[4800];
        judged = judge_dest(aside, 0, &s, replacing, sizeof replacing, why2, sizeof why2);
        if (judged == DEST_KEEP) {
            cmh_snapshot_free(&s);
            cli_error("%s %s, and %s %s: neither replaced; name the snapshot with -o (%s is left as it is)", dest, why, aside, why2, flight);
            return CLI_EFILE;
        }
        snprintf(kept, sizeof kept, "%s %s: kept", dest, why);
        dest = aside;
    }
    rc = cmh_cmh_write_file(&s, dest, err, sizeof err);
    char rundir[PATH_MAX] = "", there[4400];
    if (cmh_runtime_dir(there, sizeof there) != 0 || !realpath(there, rundir)) rundir[0] = 0;
    if (rc != CMH_OK && rc != CMH_ENOMEM && fallback && !live && rundir[0]) {
        /* the path could not take it (a full directory): the runtime directory does, and the
         * record is removed only once the snapshot is there */
        runtime_name(rundir, dest, (long long)info.pid, there, sizeof there);
        snprintf(res->why, sizeof res->why, "%s", err);
        if (strcmp(there, dest) && (rc = cmh_cmh_write_file(&s, there, err, sizeof err)) == CMH_OK) {
            dest = there;
            res->fell_back = 1;
        } else
            cli_error("%s", res->why);
    }
    cmh_snapshot_free(&s);
    if (rc != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    snprintf(res->path, sizeof res->path, "%s", dest);
    /* -o /dev/null: the recovery is beside the flight record in the runtime directory, which a
     * device could not hold; so is one whose directory had no room for its flight record */
    struct stat nst;
    char asked_dir[4400] = "", dest_dir[4400] = "";
    if (info.snapshot_path[0]) dir_of(info.snapshot_path, asked_dir, sizeof asked_dir);
    dir_of(dest, dest_dir, sizeof dest_dir);
    int device = info.snapshot_path[0] && stat(info.snapshot_path, &nst) == 0 && !S_ISREG(nst.st_mode) && !S_ISDIR(nst.st_mode);
    int elsewhere = !live && (res->fell_back || (!out && info.snapshot_path[0] && strcmp(dest, info.snapshot_path) &&
                                                 (device || (rundir[0] && !strcmp(dest_dir, rundir) && strcmp(asked_dir, rundir)))));
    res->elsewhere = elsewhere;
    if (!quiet && info.unverified)
        fprintf(stderr, "cumemhist: note: %s: written before checksums; not verified\n", flight);
    if (!quiet) {
        if (live)
            fprintf(stderr, "cumemhist: pid %lld %s: a copy of its %s %s so far is in %s; %s is left as it is", (long long)info.pid,
                    running ? "is still running" : proc == CLI_PROC_ELSEWHERE ? "ran on another host" : "is not running",
                    thousands(info.entries), info.entries == 1 ? "entry" : "entries", dest, flight);
        else
            fprintf(stderr, "cumemhist: pid %lld %s after %s %s; snapshot %s", (long long)info.pid, how + (strncmp(how, "was ", 4) ? 0 : 4),
                    thousands(info.entries), info.entries == 1 ? "entry" : "entries", dest);
        if (through && !strcmp(dest, info.snapshot_path))
            fprintf(stderr, " (written through it: a character device, nothing of it is kept there, as -o asked)");
        else if (elsewhere && res->fell_back)
            fprintf(stderr, " (in the runtime directory: %s)", res->why);
        else if (elsewhere && device)
            fprintf(stderr, " (recovered beside its flight record: %s, the path asked for, is not a regular file)", info.snapshot_path);
        else if (elsewhere)
            fprintf(stderr, " (%s had no room for its flight record: both are in the runtime directory)", asked_dir);
        if (kept[0] && !res->fell_back) fprintf(stderr, " (%s)", kept);
        else if (judged == DEST_REPLACE && !res->fell_back) fprintf(stderr, " (%s)", replacing);
        if (info.torn) fprintf(stderr, " (%s torn record%s dropped)", thousands(info.torn), info.torn == 1 ? "" : "s");
        if (info.damaged)
            fprintf(stderr, " (%s damaged record%s dropped: %s not match%s checksum)", thousands(info.damaged),
                    info.damaged == 1 ? "" : "s", info.damaged == 1 ? "it does" : "they do", info.damaged == 1 ? " its" : " their");
        if (info.lost) fprintf(stderr, " (%s entr%s the full journal refused)", thousands(info.lost), info.lost == 1 ? "y" : "ies");
        if (info.truncated)
            fprintf(stderr, " (the file is cut short: %s bytes of records past its end are lost; %s is kept)", thousands(info.truncated),
                    flight);
        if (proc == CLI_PROC_REUSED) fprintf(stderr, " (pid %lld now belongs to a later process)", (long long)info.pid);
        if (proc == CLI_PROC_ELSEWHERE && !live)
            fprintf(stderr, " (recorded on %s: whether pid %lld still runs there cannot be told here, so %s is kept)", id.hostname,
                    (long long)info.pid, flight);
        if (live && !running && proc != CLI_PROC_ELSEWHERE) fprintf(stderr, " (without --live, recover would remove it)");
        fputc('\n', stderr);
    }
    if (!keep && !info.truncated) { /* a cut copy stays: the rest may be found */
        cmh_registry_forget(info.pid, flight); /* its registry entry pointed `top` and `recover` here */
        char p[4400];
        for (int i = 1; i <= 2; i++) {
            snprintf(p, sizeof p, "%s.ckpt%d.cmh", flight, i);
            unlink(p);
        }
        unlink(flight);
    }
    if (!live && proc != CLI_PROC_ELSEWHERE) drop_claim(info.snapshot_path, info.pid);
    return 0;
}

int cmd_recover(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_recover, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    cli_clear_dead_manifests(); /* what a killed `record` left besides its flight records */
    if (cli_not_flight_record(path, "recover reads the flight record a process left")) return CLI_EFILE;
    return cli_recover_flight(path, g_out, 0, 0, g_keep, 0, g_live, 0, NULL);
}
