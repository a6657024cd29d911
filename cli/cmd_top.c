/*
 * cmd_top.c - `cumemhist top`: every recorded process of the user and its devices, live, like
 * top(1): allocated, reserved, what the driver says is used (the cuMemGetInfo samples in the
 * flight record), change per minute, OOMs and dropped entries; for the selected row its sites
 * holding memory now and who owns the device's memory.  Full-screen through ncurses; --once
 * prints one frame (text, or --json) for scripts.  The figures come from the live readers
 * (cli/live.c), refreshed incrementally each interval.
 */
#define _GNU_SOURCE
#define NCURSES_NOMACROS /* functions only: ncurses is loaded when the full screen starts (cli/lazy_curses.c) */
#include <curses.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/reports.h"
#include "jsonw.h"
#include "live.h"
#include "registry.h"
#include <sys/stat.h>

static int g_once, g_json, g_gone, g_top = 5, g_interval = 1000, g_analysis = 5000, g_sort, g_keep_ended = 300000;
static const char *const g_sorts[] = {"allocated", "reserved", "change", "pid", NULL};

static const cli_option g_opts[] = {
    {"--once", NULL, CLI_FLAG, &g_once, NULL, "print one frame and exit (no terminal needed)", NULL, 0, 0, NULL},
    {"--json", NULL, CLI_FLAG, &g_json, NULL, "that frame as JSON (implies --once)", NULL, 0, 0, NULL},
    {"--gone", NULL, CLI_FLAG, &g_gone, NULL, "list your recorded processes that ended without a clean exit, with their flight records (for 'cumemhist recover'), and exit", NULL, 0, 0, NULL},
    {"--top", NULL, CLI_INT, &g_top, "N", "sites per process and device (default 5)", NULL, 1, 1000, NULL},
    {"--interval", NULL, CLI_INT, &g_interval, "MS", "refresh every MS milliseconds (default 1000)", NULL, 100, 3600000, NULL},
    {"--analysis-interval", NULL, CLI_INT, &g_analysis, "MS", "the selected row's sites and owners every MS (default 5000)", NULL, 100, 3600000, NULL},
    {"--keep-ended", NULL, CLI_INT, &g_keep_ended, "MS", "a process seen running that ends stays, marked ended, with its final figures for MS (default 300000: 5 minutes)", NULL, 0, 86400000, NULL},
    {"--sort", NULL, CLI_CHOICE, &g_sort, "allocated|reserved|change|pid", "the rows' order (default allocated; key s cycles)", g_sorts, 0, 0, NULL},
};

const cli_command cli_cmd_top = {
    "top", "[options] [PID|FLIGHT...]",
    "Watch the CUDA memory of every process you run under cumemhist (or those named), live: one\n"
    "row per process and device, with allocated, reserved and driver-used bytes, the change per\n"
    "minute (over the later half of a process younger than a minute, so that its start-up is no\n"
    "growth; '-' where the span is too short for a rate, as leaks decides one), out-of-memory\n"
    "errors (as oom counts them: a retry that succeeded is none) and dropped entries, and for\n"
    "the selected row the sites that\n"
    "hold memory now (with their leak verdict) and the device's owners.  Keys: up/down or j/k\n"
    "select, Tab the next site, Enter shows its stack, s changes the order, q quits.  The\n"
    "processes are read from their flight records: nothing is sent to them.  A process that\n"
    "ends stays for --keep-ended with its final figures, its CHANGE column reading 'ended'.",
    g_opts, CLI_NOPTS(g_opts), 0, 64, 0, "cumemhist top --once --json"};

typedef struct row {
    cli_proc *p;
    cmh_live_device d;
} row;

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    int64_t kx, ky;
    switch (g_sort) {
    case 1: kx = (int64_t)x->d.reserved, ky = (int64_t)y->d.reserved; break;
    case 2: kx = x->d.change_per_min, ky = y->d.change_per_min; break;
    case 3: kx = -x->p->pid, ky = -y->p->pid; break;
    default: kx = (int64_t)x->d.allocated, ky = (int64_t)y->d.allocated; break;
    }
    if (kx != ky) return kx < ky ? 1 : -1;
    if (x->p->pid != y->p->pid) return x->p->pid < y->p->pid ? -1 : 1;
    return x->d.device < y->d.device ? -1 : x->d.device > y->d.device;
}

static row *make_rows(cli_procs *ps, uint32_t *nrows)
{
    uint32_t n = 0, cap = 0;
    row *v = NULL;
    for (uint32_t i = 0; i < ps->n; i++) {
        cmh_live_device d[66];
        uint32_t nd = cmh_live_devices(ps->v[i].live, d, 66);
        if (nd > 66) nd = 66;
        for (uint32_t k = 0; k < nd; k++) {
            if (n == cap) {
                cap = cap ? cap * 2 : 32;
                row *nv = realloc(v, cap * sizeof *nv);
                if (!nv) break;
                v = nv;
            }
            v[n++] = (row){&ps->v[i], d[k]};
        }
    }
    if (n) qsort(v, n, sizeof *v, cmp_row);
    *nrows = n;
    return v;
}

static const cli_dev_analysis *analysis(cli_proc *p, int32_t device)
{
    if (cli_proc_analyze(p, (uint32_t)g_top, g_once ? 0 : g_analysis) != 0) return NULL;
    for (uint32_t i = 0; i < p->nan; i++)
        if (p->an[i].device == device) return &p->an[i];
    return NULL;
}

static const char *dev_name(int32_t d)
{
    static char b[16];
    if (d < 0) return "host";
    snprintf(b, sizeof b, "%d", d);
    return b;
}

/* the change per minute, of a process that runs: one that ended changes no more ("+0 B/min"
 * read as a steady process running) */
static const char *change(const row *r)
{
    static char b[48];
    int64_t v = r->d.change_per_min;
    if (r->p->ended) return "ended";
    if (!r->d.change_known) return "-"; /* too short a span for a rate (a burst, or under a second) */
    snprintf(b, sizeof b, "%s%s/min", v < 0 ? "-" : "+", cli_live_size((double)(v < 0 ? -v : v)));
    return b;
}

/* "now", or what the figures of a process that ended are */
/* When the panels under the rows are from: the analysis is redone at most every
 * --analysis-interval, so while the process runs on it can be behind the row above (47 MiB in
 * the row, 6 MiB in "sites holding memory now"): then its age is said, and the figure it is of. */
static const char *as_of(const row *r, const cli_dev_analysis *a)
{
    static char b[160];
    if (r->p->ended) return "at its end";
    if (!a || (a->allocated == r->d.allocated && a->reserved == r->d.reserved)) return "now";
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t age = (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000 - r->p->analyzed_ms;
    snprintf(b, sizeof b, "as of %.1f s ago, at %s allocated (the row above is newer; --analysis-interval)",
             (double)(age < 0 ? 0 : age) / 1000.0, cli_live_size((double)a->allocated));
    return b;
}

/* The driver-used column: cuMemGetInfo's latest sample (the recorder takes one a second), so it
 * can be older than the process's own figures; one below the process's reserved bytes cannot be
 * true now (every process's memory is in it): it is marked '*', and the frame says why. */
static const char *used_text(const cmh_live_device *d, char *buf, size_t cap, int *stale)
{
    if (!d->meminfo_known) return "-";
    uint64_t used = d->mem_total - d->mem_free;
    int old = used < d->reserved;
    if (old) *stale = 1;
    snprintf(buf, cap, "%s%s", cli_live_size((double)used), old ? "*" : "");
    return buf;
}

/* the note under a frame with a '*' in it */
static void stale_note(char *out, size_t cap)
{
    snprintf(out, cap, "* driver used is cuMemGetInfo's latest sample (the recorder takes one a second), taken before the "
                       "process reserved what it holds now, so it is below RESERVED; the next sample catches up");
}

/* ---- one frame, for scripts ---- */

static void json_frame(cli_procs *ps, row *rows, uint32_t n)
{
    cmh_jw w;
    cmh_jw_init(&w, stdout);
    cmh_jw_obj(&w);
    cmh_jw_key(&w, "processes");
    cmh_jw_arr(&w);
    for (uint32_t i = 0; i < ps->n; i++) {
        cli_proc *p = &ps->v[i];
        const cmh_live_info *in = cmh_live_get_info(p->live);
        cmh_jw_obj(&w);
        cmh_jw_kint(&w, "pid", in->pid);
        cmh_jw_kint(&w, "rank", in->rank);
        cmh_jw_kstr(&w, "host", in->host);
        cmh_jw_kstr(&w, "command", in->cmdline);
        cmh_jw_kstr(&w, "flight", p->flight);
        cmh_jw_kuint(&w, "torn", in->torn);
        cmh_jw_kuint(&w, "damaged", in->damaged);
        cmh_jw_kuint(&w, "lost", in->lost);
        /* whether it runs, as recover tells it (null: recorded on another host, cannot be told) */
        cmh_jw_key(&w, "running");
        if (p->elsewhere) cmh_jw_null(&w);
        else cmh_jw_bool(&w, !p->ended);
        cmh_jw_key(&w, "ended");
        if (p->ended) cmh_jw_str(&w, p->ending);
        else cmh_jw_null(&w);
        cmh_jw_key(&w, "devices");
        cmh_jw_arr(&w);
        for (uint32_t r = 0; r < n; r++) {
            if (rows[r].p != p) continue;
            const cmh_live_device *d = &rows[r].d;
            cmh_jw_obj(&w);
            cmh_jw_kint(&w, "device", d->device);
            cmh_jw_kuint(&w, "allocated", d->allocated);
            cmh_jw_kuint(&w, "reserved", d->reserved);
            cmh_jw_kuint(&w, "peak_allocated", d->peak_allocated);
            cmh_jw_kuint(&w, "peak_reserved", d->peak_reserved);
            if (d->meminfo_known) {
                cmh_jw_kuint(&w, "driver_used", d->mem_total - d->mem_free);
                cmh_jw_kuint(&w, "driver_total", d->mem_total);
            } else {
                cmh_jw_knull(&w, "driver_used");
                cmh_jw_knull(&w, "driver_total");
            }
            if (p->ended || !d->change_known) cmh_jw_knull(&w, "change_per_min");
            else cmh_jw_kint(&w, "change_per_min", d->change_per_min);
            cmh_jw_kuint(&w, "ooms", d->ooms); /* as `oom` and `summary` count them: a retry that succeeded is none */
            cmh_jw_kuint(&w, "oom_retries", d->oom_retries);
            cmh_jw_kuint(&w, "entries", d->entries);
            cmh_jw_kuint(&w, "dropped", d->dropped);
            const cli_dev_analysis *a = analysis(p, d->device);
            cmh_jw_key(&w, "sites");
            cmh_jw_arr(&w);
            for (uint32_t k = 0; a && k < a->nsites; k++) {
                cmh_jw_obj(&w);
                cmh_jw_kstr(&w, "site", a->sites[k].name);
                cmh_jw_kuint(&w, "bytes", a->sites[k].bytes);
                cmh_jw_kuint(&w, "blocks", a->sites[k].count);
                cmh_jw_kstr(&w, "verdict", cmh_leak_verdict_name(a->sites[k].verdict));
                if (a->sites[k].over_time) cmh_jw_knull(&w, "growth_per_step"); /* growing over the record's time: no rate per step */
                else cmh_jw_kint(&w, "growth_per_step", a->sites[k].rate);
                cmh_jw_kstr(&w, "by_caller", a->sites[k].callers);
                cmh_jw_key(&w, "stack"); /* as Enter shows it: from the site outward, machinery left out */
                cmh_jw_arr(&w);
                for (uint32_t f = 0; f < a->sites[k].nframes; f++) cmh_jw_str(&w, a->sites[k].frames[f]);
                cmh_jw_end(&w);
                cmh_jw_end(&w);
            }
            cmh_jw_end(&w);
            cmh_jw_key(&w, "owners");
            cmh_jw_arr(&w);
            for (uint32_t k = 0; a && k < a->nowners; k++) {
                cmh_jw_obj(&w);
                cmh_jw_kstr(&w, "owner", a->owners[k].name);
                cmh_jw_kuint(&w, "bytes", a->owners[k].bytes);
                cmh_jw_end(&w);
            }
            cmh_jw_end(&w);
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
        cmh_jw_end(&w);
    }
    cmh_jw_end(&w);
    if (ps->note[0]) cmh_jw_kstr(&w, "note", ps->note);
    cmh_jw_end(&w);
    cmh_jw_nl(&w);
    cmh_jw_finish(&w);
}

static void text_frame(cli_procs *ps, row *rows, uint32_t n)
{
    int stale = 0;
    printf("%7s %4s %6s %11s %11s %11s %14s %5s %8s  %s\n", "PID", "RANK", "DEVICE", "ALLOCATED", "RESERVED", "DRIVER USED", "CHANGE", "OOMS",
           "DROPPED", "COMMAND");
    for (uint32_t r = 0; r < n; r++) {
        const cmh_live_info *in = cmh_live_get_info(rows[r].p->live);
        const cmh_live_device *d = &rows[r].d;
        char rank[16], ubuf[32];
        snprintf(rank, sizeof rank, in->rank >= 0 ? "%d" : "-", in->rank);
        const char *used = used_text(d, ubuf, sizeof ubuf, &stale);
        printf("%7lld %4s %6s %11s %11s %11s %14s %5" PRIu64 " %8" PRIu64 "  %.60s\n", (long long)in->pid, rank, dev_name(d->device),
               cli_live_size((double)d->allocated), cli_live_size((double)d->reserved), used, change(&rows[r]), d->ooms, d->dropped,
               in->cmdline);
    }
    if (stale) {
        char note[256];
        stale_note(note, sizeof note);
        printf("%s\n", note);
    }
    for (uint32_t i = 0; i < ps->n; i++) { /* said once a process, whatever its devices */
        if (!ps->v[i].ended) continue;
        if (ps->v[i].gone_record) /* (its snapshot written: nothing to recover) */
            printf("\npid %lld is not running: it %s; its figures are those at its end\n", (long long)ps->v[i].pid, ps->v[i].ending);
        else
            printf("\npid %lld is not running: it %s; its figures are those at its end ('cumemhist recover %s' writes its snapshot)\n",
                   (long long)ps->v[i].pid, ps->v[i].ending, ps->v[i].flight);
    }
    for (uint32_t r = 0; r < n; r++) {
        const cli_dev_analysis *a = analysis(rows[r].p, rows[r].d.device);
        if (!a || !a->nsites) continue;
        printf("\npid %lld, device %s: sites holding memory %s\n", (long long)rows[r].p->pid, dev_name(rows[r].d.device), as_of(&rows[r], a));
        for (uint32_t k = 0; k < a->nsites; k++) {
            printf("  %11s  %6" PRIu64 " blocks  %-8s %s\n", cli_live_size((double)a->sites[k].bytes), a->sites[k].count,
                   cmh_leak_verdict_name(a->sites[k].verdict), a->sites[k].name);
            if (a->sites[k].callers[0]) printf("                                %s\n", a->sites[k].callers);
        }
    }
    if (!n) printf("(no recorded process of yours is running)\n");
    if (ps->note[0]) printf("\nnote: %s\n", ps->note);
}

/* ---- full screen ---- */

static WINDOW *g_scr; /* initscr()'s: ncurses' own variables (stdscr, LINES, COLS) are not used */

/* mvprintw without varargs through the loaded library: the line made here, cut at the width */
__attribute__((format(printf, 3, 4))) static void put(int y, int x, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    int w = getmaxx(g_scr) - x;
    if (w > 0) mvaddnstr(y, x, line, w);
}

static void draw(cli_procs *ps, row *rows, uint32_t n, uint32_t sel, uint32_t site, int show_stack)
{
    erase();
    int H = getmaxy(g_scr), W = getmaxx(g_scr), y = 0, stale = 0;
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%H:%M:%S", localtime(&now));
    put(y++, 0, "cumemhist top - %s - %u process%s - sorted by %s - keys: j/k select, Tab site, Enter stack, s sort, q quit", when,
             ps->n, ps->n == 1 ? "" : "es", g_sorts[g_sort]);
    y++;
    attron(A_BOLD);
    put(y++, 0, "%7s %4s %6s %11s %11s %11s %14s %5s %8s  %s", "PID", "RANK", "DEVICE", "ALLOCATED", "RESERVED", "DRIVER USED", "CHANGE",
             "OOMS", "DROPPED", "COMMAND");
    attroff(A_BOLD);
    int list_h = H / 2 - 3;
    uint32_t first = sel >= (uint32_t)list_h && list_h > 0 ? sel - (uint32_t)list_h + 1 : 0;
    for (uint32_t r = first; r < n && y < 3 + list_h; r++) {
        const cmh_live_info *in = cmh_live_get_info(rows[r].p->live);
        const cmh_live_device *d = &rows[r].d;
        char rank[16], ubuf[32];
        snprintf(rank, sizeof rank, in->rank >= 0 ? "%d" : "-", in->rank);
        const char *used = used_text(d, ubuf, sizeof ubuf, &stale);
        if (r == sel) attron(A_REVERSE);
        put(y++, 0, "%7lld %4s %6s %11s %11s %11s %14s %5" PRIu64 " %8" PRIu64 "  %.*s", (long long)in->pid, rank, dev_name(d->device),
                 cli_live_size((double)d->allocated), cli_live_size((double)d->reserved), used, change(&rows[r]), d->ooms, d->dropped,
                 W > 90 ? W - 90 : 10, in->cmdline);
        if (r == sel) attroff(A_REVERSE);
    }
    if (!n) put(y++, 0, "(no recorded process of yours is running: start one with 'cumemhist record -- PROGRAM')");
    if (stale) {
        char note[256];
        stale_note(note, sizeof note);
        put(y++, 0, "%s", note);
    }
    y++;
    if (n) {
        const cli_dev_analysis *a = analysis(rows[sel].p, rows[sel].d.device);
        attron(A_BOLD);
        put(y++, 0, "pid %lld, device %s: sites holding memory %s", (long long)rows[sel].p->pid, dev_name(rows[sel].d.device), as_of(&rows[sel], a));
        attroff(A_BOLD);
        if (rows[sel].p->ended) put(y++, 0, "pid %lld is not running: it %s", (long long)rows[sel].p->pid, rows[sel].p->ending);
        for (uint32_t k = 0; a && k < a->nsites && y < H - 2; k++) {
            if (k == site) attron(A_REVERSE);
            put(y++, 2, "%11s %6" PRIu64 " blocks  %-8s %.*s", cli_live_size((double)a->sites[k].bytes), a->sites[k].count,
                     cmh_leak_verdict_name(a->sites[k].verdict), W > 40 ? W - 40 : 10, a->sites[k].name);
            if (k == site) attroff(A_REVERSE);
        }
        if (a && show_stack && site < a->nsites) {
            y++;
            put(y++, 0, "stack of site %u:", site + 1);
            if (a->sites[site].callers[0]) put(y++, 2, "%.*s", W > 4 ? W - 4 : 10, a->sites[site].callers);
            for (uint32_t f = 0; f < a->sites[site].nframes && y < H - 1; f++) put(y++, 2, "#%u %.*s", f, W > 8 ? W - 8 : 10, a->sites[site].frames[f]);
        } else if (a && a->nowners) {
            y++;
            attron(A_BOLD);
            put(y++, 0, "owners of device %s %s", dev_name(rows[sel].d.device), as_of(&rows[sel], a));
            attroff(A_BOLD);
            for (uint32_t k = 0; k < a->nowners && y < H - 1; k++)
                put(y++, 2, "%11s  %s", cli_live_size((double)a->owners[k].bytes), a->owners[k].name);
        }
    }
    if (ps->note[0]) put(H - 1, 0, "note: %.*s", W > 8 ? W - 8 : 10, ps->note);
    refresh();
}

static int full_screen(cli_procs *ps)
{
    if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
        cli_error("top: standard input and output must be a terminal for the full-screen view (use --once or --json)");
        return CLI_EUSAGE;
    }
    g_scr = initscr();
    cbreak();
    noecho();
    keypad(g_scr, TRUE);
    curs_set(0);
    timeout(g_interval);
    uint32_t sel = 0, site = 0;
    int show_stack = 0, rc = 0;
    int64_t sel_pid = -1;
    int32_t sel_dev = 0;
    for (;;) {
        if ((rc = cli_procs_update(ps))) break;
        uint32_t n;
        row *rows = make_rows(ps, &n);
        for (uint32_t r = 0; r < n; r++) /* the selection follows its process when the order changes */
            if (rows[r].p->pid == sel_pid && rows[r].d.device == sel_dev) sel = r;
        if (sel >= n) sel = n ? n - 1 : 0;
        draw(ps, rows, n, sel, site, show_stack);
        int ch = getch();
        int quit = 0;
        switch (ch) {
        case 'q': case 'Q': quit = 1; break;
        case KEY_DOWN: case 'j': if (sel + 1 < n) sel++, site = 0, show_stack = 0; break;
        case KEY_UP: case 'k': if (sel) sel--, site = 0, show_stack = 0; break;
        case '\t': site = site + 1 < (uint32_t)g_top ? site + 1 : 0; break;
        case '\n': case KEY_ENTER: show_stack = !show_stack; break;
        case 's': g_sort = g_sorts[g_sort + 1] ? g_sort + 1 : 0; break;
        default: break;
        }
        if (n && sel < n) sel_pid = rows[sel].p->pid, sel_dev = rows[sel].d.device; /* found again in the next order */
        free(rows);
        if (quit) break;
    }
    endwin();
    return rc;
}

/* top --gone: the registry's gone entries (live.c said them once, in one line) */
static int list_gone(void)
{
    cmh_registry_entry *v;
    size_t n;
    if (cmh_registry_gone(&v, &n) != 0) {
        cli_error("the registry of recorded processes cannot be read: %s", strerror(errno));
        return CLI_EFILE;
    }
    cmh_jw w;
    if (g_json) {
        cmh_jw_init(&w, stdout);
        cmh_jw_obj(&w);
        cmh_jw_key(&w, "gone");
        cmh_jw_arr(&w);
    } else if (!n)
        printf("no recorded process of yours is gone with its flight record left\n");
    else
        printf("%zu recorded process%s ended without a clean exit; 'cumemhist recover FLIGHT' makes a snapshot of each:\n", n,
               n == 1 ? "" : "es");
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        int here = stat(v[i].flight, &st) == 0;
        if (g_json) {
            cmh_jw_nl(&w);
            cmh_jw_obj(&w);
            cmh_jw_kint(&w, "pid", v[i].pid);
            cmh_jw_kstr(&w, "flight", v[i].flight);
            cmh_jw_kint(&w, "flight_bytes", here ? (int64_t)st.st_size : 0);
            cmh_jw_kint(&w, "last_written_s", here ? (int64_t)st.st_mtime : 0);
            cmh_jw_end(&w);
        } else {
            char when[64] = "?";
            struct tm tm;
            time_t t = here ? st.st_mtime : 0;
            if (here && localtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
            printf("  pid %-8lld %s  (%s, last written %s)\n", (long long)v[i].pid, v[i].flight,
                   cli_live_size(here ? (double)st.st_size : 0), when);
        }
    }
    if (g_json) {
        cmh_jw_end(&w);
        cmh_jw_end(&w);
        cmh_jw_finish(&w);
        putchar('\n');
    }
    free(v);
    return cli_finish_stdout(0);
}

int cmd_top(int argc, char **argv)
{
    char *args[64];
    int n, rc = cli_parse(&cli_cmd_top, argc, argv, args, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    if (g_gone) return list_gone();
    if (g_json) g_once = 1;
    cli_procs ps;
    memset(&ps, 0, sizeof ps);
    ps.named = args;
    ps.nnamed = n;
    ps.quiet = !g_once;
    ps.trace_cap = g_once ? 0 : CLI_LIVE_TRACE;
    ps.keep_ended_ms = g_keep_ended;
    if (g_once) {
        if ((rc = cli_procs_update(&ps)) == 0) {
            uint32_t nr;
            row *rows = make_rows(&ps, &nr);
            if (g_json) json_frame(&ps, rows, nr);
            else text_frame(&ps, rows, nr);
            free(rows);
            rc = cli_finish_stdout(0);
        }
    } else {
        cli_procs_watch(&ps); /* (a job that ends between two frames is still shown, ended) */
        ps.screen = 1;
        rc = full_screen(&ps);
    }
    cli_procs_free(&ps);
    return rc;
}
