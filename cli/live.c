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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/leakwords.h"
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

/* A child of pid that runs the recorder with a flight record (pid was `cumemhist record`,
 * found by its command line): its pid, or 0. */
static long long recorded_child(long long pid)
{
    DIR *d = opendir("/proc");
    long long found = 0;
    for (struct dirent *de; d && !found && (de = readdir(d));) {
        if (!is_pid(de->d_name)) continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = 0;
        const char *rp = strrchr(buf, ')'); /* pid (comm) state ppid */
        long long ppid = 0;
        char flight[4200];
        if (rp && sscanf(rp + 1, " %*c %lld", &ppid) == 1 && ppid == pid &&
            cmh_registry_find_proc(atoll(de->d_name), flight, sizeof flight, NULL, 0) == 1)
            found = atoll(de->d_name);
    }
    if (d) closedir(d);
    return found;
}

char cli_live_found[8400];

int cli_live_resolve(const char *arg, char *flight, size_t cap, int ended_too)
{
    cli_live_found[0] = 0;
    if (is_pid(arg)) {
        long long pid = atoll(arg);
        cmh_registry_entry *v;
        size_t n;
        if (cmh_registry_list(&v, &n, 0) != 0) {
            cli_error("pid %lld: the registry of recorded processes cannot be read (%s)", pid, strerror(errno));
            return CLI_EFILE;
        }
        int found = 0, stale = 0, nosuch = 0;
        long long child = 0;
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
        if (!stale) { /* not in the registry here: the process itself says (another CUMEMHIST_REGISTRY, a private /tmp) */
            char where[4200];
            int fp = cmh_registry_find_proc(pid, flight, cap, where, sizeof where);
            if (fp == 1) {
                char dir[4096] = "";
                if (cmh_registry_dir(0, dir, sizeof dir) != 0) dir[0] = 0;
                char pre[64];
                snprintf(pre, sizeof pre, "/proc/%lld/root/", pid);
                char why[4400];
                if (where[0]) snprintf(why, sizeof why, "it registered in its CUMEMHIST_REGISTRY, %.4096s", where);
                else if (!strncmp(flight, pre, strlen(pre))) snprintf(why, sizeof why, "it sees another /tmp than this shell (a private one)");
                else if (getenv("CUMEMHIST_REGISTRY") && *getenv("CUMEMHIST_REGISTRY") == '/')
                    snprintf(why, sizeof why, "it registered in the fixed place, /tmp/cumemhist-%ld, not this command's CUMEMHIST_REGISTRY", (long)getuid());
                else snprintf(why, sizeof why, "its entry is elsewhere (an older recorder's: $XDG_RUNTIME_DIR/cumemhist or $TMPDIR/cumemhist-UID)");
                snprintf(cli_live_found, sizeof cli_live_found,
                         "pid %lld runs the recorder but is not in the registry %.1500s: %.1500s; its flight record, found in the "
                         "process (/proc/%lld/maps), is read: %.1500s",
                         pid, dir[0] ? dir : "(none here)", why, pid, flight);
                return 0;
            }
            if (fp == 0 && (child = recorded_child(pid)) > 0) { /* (`cumemhist record` maps the recorder too) */
                cli_error("pid %lld is not the recorded program; its child pid %lld is (cumemhist record's own pid is its launcher's): "
                          "give pid %lld", pid, child, child);
                return CLI_EFILE;
            }
            if (fp == 0) {
                cli_error("pid %lld runs the cumemhist recorder but keeps no flight record to read (it could not make one: its "
                          "log says why); kill -USR1 %lld makes it write its snapshot now", pid, pid);
                return CLI_EFILE;
            }
            if (errno == ESRCH) nosuch = 1;
            else if (errno == EPERM) {
                cli_error("pid %lld is not a process of yours: not shown", pid);
                return CLI_EFILE;
            }
        }
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
        else if (nosuch) cli_error("pid %lld: no such process (a flight record path works too)", pid);
        else if ((child = recorded_child(pid)) > 0)
            cli_error("pid %lld is not the recorded program; its child pid %lld is (cumemhist record's own pid is its launcher's): "
                      "give pid %lld", pid, child, child);
        else cli_error("pid %lld does not run the cumemhist recorder (libcumemhist.so is not loaded in it; a flight record path works too)", pid);
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

static int add_proc_via(cli_procs *ps, const char *flight, const char *open_path, int64_t pid, int named)
{
    for (uint32_t i = 0; i < ps->n; i++) /* (one that ended is not the process a new entry names: a record's path is reused) */
        if (!strcmp(ps->v[i].flight, flight) && !ps->v[i].ended) return ps->v[i].seen = 1, 0;
    char err[4600];
    cmh_live *l;
    int rc = cmh_live_open(open_path, ps->trace_cap, &l, err, sizeof err);
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

/* A process whose record went without a mark of its end (a clean exit marks none; nor does a
 * SIGKILL, after which `record` or recover made the snapshot and removed the record): how it
 * ended as its snapshot beside the record says (the exit dump's exit status; record's "was killed
 * by SIGKILL"), as a record left behind would be said.  1 said. */
static int snapshot_ending(cli_proc *p, int64_t pid)
{
    char snap[4200];
    size_t l = strlen(p->flight);
    if (p->have_id && p->id.snapshot_path[0] == '/') snprintf(snap, sizeof snap, "%s", p->id.snapshot_path); /* (where its header says) */
    else if (l > 7 && !strcmp(p->flight + l - 7, ".flight")) snprintf(snap, sizeof snap, "%.*s", (int)(l - 7), p->flight);
    else return 0;
    cmh_snapshot s;
    char err[512];
    if (cmh_snapshot_load_ex(snap, &s, CMH_LOAD_SEGMENTS, err, sizeof err) != CMH_OK) return 0;
    int ok = s.pid == pid && s.ending;
    if (ok) {
        const char *e = cmh_str(&s, s.ending);
        size_t n = strcspn(e, ";"); /* ("; this snapshot was written at its exit": the snapshot's own words) */
        snprintf(p->ending, sizeof p->ending, "%.*s; its snapshot %.200s written and its flight record removed", (int)(n < 180 ? n : 180), e, snap);
    }
    cmh_snapshot_free(&s);
    return ok;
}

static int add_proc(cli_procs *ps, const char *flight, int64_t pid, int named) { return add_proc_via(ps, flight, flight, pid, named); }

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
        p->id = id, p->have_id = 1;
        int proc = cli_flight_process(&id);
        if (proc == CLI_PROC_ELSEWHERE) p->elsewhere = 1;
        if (proc != CLI_PROC_GONE && proc != CLI_PROC_REUSED) return;
        p->ended = 1;
        cmh_flight_ending(&id, in->state, in->end_signal, 0, 0, p->ending, sizeof p->ending);
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
    else if (!snapshot_ending(p, in->pid))
        snprintf(p->ending, sizeof p->ending, "stopped running, its snapshot written and its flight record removed");
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
            if (cli_live_found[0] && ps->screen) snprintf(ps->note, sizeof ps->note, "%.500s", cli_live_found); /* (the screen's note line) */
            else if (cli_live_found[0]) fprintf(stderr, "cumemhist: note: %s\n", cli_live_found);
            if (!rc) rc = add_proc(ps, flight, 0, 1);
            if (rc) return rc;
        }
    } else {
        cli_procs_catch(ps); /* those that registered since the last look, held open since (some gone already) */
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

/* The registry watcher (cli_procs_watch): a thread that opens each process's flight record the
 * moment it registers and holds it, so that a job that ends before the next look (an OOM at
 * start-up: its record is removed at its end) is still read, to its end, from the descriptor. */
typedef struct held_rec {
    long long pid;
    char flight[4200];
    int fd;
} held_rec;
typedef struct seen_rec {
    long long pid;
    uint64_t start;
} seen_rec;
static struct {
    pthread_mutex_t mu;
    held_rec *v; /* opened, not yet taken by cli_procs_catch */
    size_t n, cap;
    seen_rec *seen; /* the registered processes whose records were opened (each once); only those still registered are kept */
    size_t nseen;
    int wfd, stop;
    pthread_t th;
} g_w = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, NULL, 0, -1, 0, 0};

static void watch_look(void)
{
    cmh_registry_entry *v;
    size_t n;
    if (cmh_registry_list(&v, &n, 0) != 0) return;
    seen_rec *now = malloc((n ? n : 1) * sizeof *now);
    size_t nnow = 0;
    for (size_t i = 0; now && i < n; i++) {
        if (v[i].stale) continue;
        int known = 0;
        for (size_t k = 0; k < g_w.nseen && !known; k++) known = g_w.seen[k].pid == v[i].pid && g_w.seen[k].start == v[i].start_ticks;
        now[nnow++] = (seen_rec){v[i].pid, v[i].start_ticks};
        if (known) continue;
        int fd = open(v[i].flight, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        pthread_mutex_lock(&g_w.mu);
        if (g_w.n == g_w.cap) {
            size_t nc = g_w.cap ? g_w.cap * 2 : 16;
            held_rec *nv = realloc(g_w.v, nc * sizeof *nv);
            if (nv) g_w.v = nv, g_w.cap = nc;
        }
        if (g_w.n < g_w.cap) {
            held_rec *h = &g_w.v[g_w.n++];
            h->pid = v[i].pid, h->fd = fd;
            snprintf(h->flight, sizeof h->flight, "%s", v[i].flight);
        } else close(fd);
        pthread_mutex_unlock(&g_w.mu);
    }
    if (now) free(g_w.seen), g_w.seen = now, g_w.nseen = nnow;
    free(v);
}

static void *watch_thread(void *arg)
{
    (void)arg;
    char ev[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (!__atomic_load_n(&g_w.stop, __ATOMIC_ACQUIRE)) {
        struct pollfd pf = {g_w.wfd, POLLIN, 0};
        if (poll(&pf, 1, 200) <= 0) continue;
        int entry = 0;
        for (ssize_t n; (n = read(g_w.wfd, ev, sizeof ev)) > 0;)
            for (char *at = ev; at < ev + n;) {
                const struct inotify_event *e = (const struct inotify_event *)at;
                size_t l = e->len ? strlen(e->name) : 0;
                if (l > 5 && !strcmp(e->name + l - 5, ".proc") && e->name[0] != '.') entry = 1;
                at += sizeof *e + e->len;
            }
        if (entry) watch_look();
    }
    return NULL;
}

int cli_procs_watch(cli_procs *ps)
{
    if (ps->nnamed) return -1;
    if (ps->watching) return 0;
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return -1;
    int any = 0;
    for (int which = 0; which < 2; which++) {
        char dir[4096];
        if (cmh_registry_dir(which, dir, sizeof dir) == 0 && inotify_add_watch(fd, dir, IN_MOVED_TO | IN_CREATE | IN_ONLYDIR) >= 0) any = 1;
    }
    g_w.wfd = fd, g_w.stop = 0;
    if (!any || pthread_create(&g_w.th, NULL, watch_thread, NULL) != 0) return close(fd), g_w.wfd = -1, -1;
    ps->watching = 1;
    return 0;
}

void cli_procs_catch(cli_procs *ps)
{
    if (!ps->watching) return;
    pthread_mutex_lock(&g_w.mu);
    held_rec *v = g_w.v;
    size_t n = g_w.n;
    g_w.v = NULL, g_w.n = g_w.cap = 0;
    pthread_mutex_unlock(&g_w.mu);
    for (size_t i = 0; i < n; i++) {
        /* at its path while it is still there (its checkpoints are found beside it); else
         * (removed at its end) through the descriptor held since it registered */
        struct stat a, b;
        char via[64];
        const char *open_path = v[i].flight;
        if (stat(v[i].flight, &a) != 0 || fstat(v[i].fd, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            snprintf(via, sizeof via, "/proc/self/fd/%d", v[i].fd);
            open_path = via;
        }
        add_proc_via(ps, v[i].flight, open_path, v[i].pid, 0);
        close(v[i].fd);
    }
    free(v);
}

void cli_procs_free(cli_procs *ps)
{
    if (ps->watching) {
        __atomic_store_n(&g_w.stop, 1, __ATOMIC_RELEASE);
        pthread_join(g_w.th, NULL);
        close(g_w.wfd), g_w.wfd = -1;
        for (size_t i = 0; i < g_w.n; i++) close(g_w.v[i].fd);
        free(g_w.v), free(g_w.seen);
        g_w.v = NULL, g_w.seen = NULL, g_w.n = g_w.cap = g_w.nseen = 0;
        ps->watching = 0;
    }
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
    cmh_live_device live[66]; /* the figures of the state analysed */
    uint32_t nlive = cmh_live_devices(p->live, live, 66);
    if (nlive > 66) nlive = 66;
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
        for (uint32_t k = 0; k < nlive; k++)
            if (live[k].device == devs[i]) a->allocated = live[k].allocated, a->reserved = live[k].reserved;
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
                r->over_time = x->time_verdict == CMH_TIME_GROWING;
                r->rate = x->growing && !r->over_time ? x->rate : 0;
                /* its stack as the finished record's reports print it (rep_print_frames): from the
                 * site outward, ctypes' glue and CPython's frames left out, recursion folded */
                rep_line lines[CLI_LIVE_FRAMES];
                uint32_t nl = x->stack ? rep_stack_lines(&s, g, x->stack, CLI_LIVE_FRAMES, lines, CLI_LIVE_FRAMES, NULL, NULL) : 0;
                for (uint32_t f = 0; f < nl; f++) snprintf(r->frames[r->nframes++], sizeof r->frames[0], "%s", rep_line_text(&s, &lines[f]));
                /* and its bytes by the lines that called it, as leaks and peak split them */
                if (!cmh_site_callers_text(&s, x, r->callers, sizeof r->callers)) r->callers[0] = 0;
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
