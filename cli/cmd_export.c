/*
 * cmd_export.c - `cumemhist export SNAP --format memviz|json|chrome|pprof -o OUT`: a snapshot
 * shaped for another tool (viz/), written atomically; and `export --format chrome|sqlite
 * FILES...|DIR -o OUT`: the records of a whole job in one trace or one database, read one at a
 * time.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fleet.h"
#include "report.h"
#include "cumemhist/merge.h"
#include "cumemhist/pictures.h"
#include "cumemhist/recover.h"
#include "cumemhist/viz.h"

enum { F_MEMVIZ, F_PICKLE, F_JSON, F_CHROME, F_PPROF, F_SQLITE };
static const char *const g_formats[] = {"memviz", "pickle", "json", "chrome", "pprof", "sqlite", NULL};
static int g_format = F_MEMVIZ, g_device = -2;
static const char *g_out;
static int g_format_given, g_inline_frames, g_raw_frames, g_quiet;

static const cli_option g_opts[] = {
    {"--format", "-f", CLI_CHOICE, &g_format, "FORMAT",
     "memviz (default), also called pickle: a PyTorch snapshot pickle (protocol 4)\n"
     "that PyTorch's memory_viz page (pytorch.org/memory_viz) and _memory_viz.py open;\n"
     "json: the same dict as JSON, plus what PyTorch's schema cannot hold, stacks\n"
     "interned (\"stack\" indexes the top-level \"stacks\" and \"frames\" lists);\n"
     "chrome: a Chrome / Perfetto trace (ui.perfetto.dev): memory counters per\n"
     "device, OOM and mark instants, kernels on one track per stream;\n"
     "pprof: a gzipped profile.proto (go tool pprof, speedscope): live bytes and\n"
     "blocks by stack at the end and at the allocated peak (and at the record's\n"
     "first OOM, as oom says it: oom_space, on its device), of every device (each sample labelled\n"
     "device=N; --device N: one; pinned host memory left out, said on stderr and in\n"
     "the profile's comment: --device -1 for it alone);\n"
     "sqlite: a SQLite database of one or many records (docs/FLEET.md: tables and\n"
     "queries; pandas, DuckDB, Spark read it).  chrome and sqlite take several\n"
     "SNAPSHOTs (or a directory of them): one trace or database for a whole job,\n"
     "a process once (of its files, a .cmh and its pickle, the one holding the\n"
     "other's; the one left out named on stderr)",
     g_formats, 0, 0, &g_format_given},
    {"--output", "-o", CLI_STR, &g_out, "PATH",
     "where to write (default: standard output; written atomically).  Without --format the\n"
     "name says it: .json is json, .trace.json or .perfetto.json chrome, .pb.gz or\n"
     ".pprof pprof, .db or .sqlite sqlite, .pickle, .pkl or no extension memviz; any other name is refused",
     NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "pprof: that device alone, -1 pinned host memory (default: every device, as the\nreports, pinned host memory apart; each sample labelled device=N: go tool pprof\n-tagfocus=device=N)", NULL, 0, 0, NULL},
    {"--skip", NULL, CLI_LIST, &rep_attribution.skips, "REGEX",
     "pprof: frames whose function, file or module match are machinery too,\nleft out as flamegraph leaves them (repeatable; docs/ATTRIBUTION.md)", NULL, 0, 0, NULL},
    {"--no-default-skip", NULL, CLI_FLAG, &rep_attribution.no_default, NULL,
     "pprof: only --skip decides what is machinery; alone, every frame as\nrecorded (the interpreter's, the driver's, libc's) is kept", NULL, 0, 0, NULL},
    {"--raw-frames", NULL, CLI_FLAG, &g_raw_frames, NULL,
     "frames as recorded (addresses, modules): without it every export resolves them\n"
     "as the reports do (file:line from DWARF, demangled, inlined calls as frames)",
     NULL, 0, 0, NULL},
    {"--inline-frames", NULL, CLI_FLAG, &g_inline_frames, NULL,
     "json: each segment, block and entry carries its own \"frames\" list, exactly\n"
     "PyTorch's dict (several times larger)",
     NULL, 0, 0, NULL},
    {"--quiet", "-q", CLI_FLAG, &g_quiet, NULL,
     "no 'wrote FILE' line and no note on memory_viz's entry numbering (a note\n"
     "of what was left out stays)",
     NULL, 0, 0, NULL},
};

const cli_command cli_cmd_export = {"export", "[options] SNAPSHOT...", "Write a snapshot (.cmh or PyTorch pickle) for another tool.",
                                  g_opts, CLI_NOPTS(g_opts), 1, 1 << 20, 0,
                                  "cumemhist export run.cmh -o run.pickle   # then drag run.pickle onto memory_viz"};

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcasecmp(s + a - b, tail);
}

/* The format a file name asks for: F_* or -1 when it says nothing. */
static int format_of_name(const char *name)
{
    if (ends_with(name, ".trace.json") || ends_with(name, ".perfetto.json") || ends_with(name, ".chrome.json")) return F_CHROME;
    if (ends_with(name, ".json")) return F_JSON;
    if (ends_with(name, ".pb.gz") || ends_with(name, ".pprof")) return F_PPROF;
    if (ends_with(name, ".pickle") || ends_with(name, ".pkl")) return F_MEMVIZ;
    if (ends_with(name, ".db") || ends_with(name, ".sqlite") || ends_with(name, ".sqlite3")) return F_SQLITE;
    return -1;
}

/* the flight records add_children took in for children with no snapshot: read as recover reads
 * them (a flight record the user names is refused as every command refuses it, pointing at
 * recover: its process may still run) */
static cmh_pathlist g_child_flights;

static int child_flight(const char *path)
{
    for (uint32_t i = 0; i < g_child_flights.n; i++)
        if (!strcmp(g_child_flights.v[i], path)) return 1;
    return 0;
}

/* A record as the reports view it; a forked child's flight record (add_children: a child killed
 * or ended by _exit() under a plain LD_PRELOAD left no snapshot) read as `recover` reads it, in
 * memory, the file left as it is: its pid, its start (the fork), how it ended, its entries. */
static int export_view(const char *path, cmh_snapshot *s)
{
    if (!child_flight(path)) return rep_load_view(path, s);
    cmh_recover_info info;
    char err[4600];
    int rc = cmh_flight_recover(path, s, &info, err, sizeof err);
    if (rc == CMH_OK && ((rc = cmh_snapshot_number_threads(s)) != CMH_OK || (rc = cmh_ending_recount(s)) != CMH_OK)) {
        cmh_snapshot_free(s); /* (a failed recovery has freed its own) */
        snprintf(err, sizeof err, "%s: out of memory", path);
    }
    if (rc == CMH_OK) return 0;
    cli_error("%s", err);
    return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
}

/* A record as the exports write it: merged, and its frames resolved as the reports show them
 * (rep_load's symbolization) unless --raw-frames. */
static int load_for_export(const char *path, cmh_snapshot *s)
{
    int rc = export_view(path, s);
    if (rc || g_raw_frames) return rc;
    if ((rc = cli_symbolize(path, s))) cmh_snapshot_free(s);
    return rc;
}

/* The line every format says once its file is in place (none for standard output, which holds
 * the export itself): chrome and json said nothing where sqlite said this. */
static void say_wrote_of(const char *out, uint32_t records, uint64_t entries, const char *of)
{
    if (!out || !strcmp(out, "-") || g_quiet) return;
    fprintf(stderr, "cumemhist: wrote %s: %u record%s, %llu trace %s%s\n", out, records, records == 1 ? "" : "s",
            (unsigned long long)entries, entries == 1 ? "entry" : "entries", of);
}

/* memory_viz draws segments: what a stream-ordered pool keeps beyond what it hands out (its
 * cache, in the record's pool samples, in every report's reserved) is not on its page, which
 * then reads less reserved than peak; one line per device that had any, with how much */
static void say_pool_cache(const cmh_snapshot *s)
{
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        enum { NPOOLS = 64 };
        uint64_t handle[NPOOLS], slack[NPOOLS], sum = 0, most = 0;
        uint32_t np = 0;
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            if (e->action != CMH_ACT_POOL_SAMPLE) continue;
            uint32_t k = 0;
            while (k < np && handle[k] != cmh_entry_addr(s, e)) k++;
            if (k == np && np < NPOOLS) handle[np] = cmh_entry_addr(s, e), slack[np++] = 0;
            if (k == np) continue;
            uint64_t now = cmh_entry_size(s, e) > cmh_entry_requested(s, e) ? cmh_entry_size(s, e) - cmh_entry_requested(s, e) : 0;
            sum = sum - slack[k] + now, slack[k] = now;
            if (sum > most) most = sum;
        }
        /* at the end: what the reports say there (less what the end takes as given back after
         * the pools' latest samples: cmh_end_pool_cache) */
        if (most) sum = cmh_end_pool_cache(s, tr->device, NULL);
        if (most)
            fprintf(stderr,
                    "cumemhist: export: device %d: memory_viz draws segments, not a stream-ordered pool's cache (freed to a "
                    "stream-ordered pool, kept: cuMemPoolTrimTo gives it back): its reserved reads less than the reports' by "
                    "that cache (up to %s; %s at the end)\n",
                    tr->device, rep_size((double)most), rep_size((double)sum));
    }
}

static void say_wrote(const char *out, uint32_t records, uint64_t entries)
{
    say_wrote_of(out, records, entries, "");
}

/* ---- many records: one chrome trace, one database ---- */

/* "rank 3 @ host", else "pid 4242 @ host", else the file */
static void label_of(const cmh_snapshot *s, const char *path, char *buf, size_t n)
{
    const char *host = cmh_str(s, s->hostname);
    if (s->rank >= 0) snprintf(buf, n, "rank %d%s%s", (int)s->rank, *host ? " @ " : "", host);
    else if (s->pid) snprintf(buf, n, "pid %" PRId64 "%s%s", s->pid, *host ? " @ " : "", host);
    else snprintf(buf, n, "%s", path);
}

static int many_chrome(const cmh_pathlist *pl, FILE *fp, uint64_t *entries)
{
    /* the clock's origin first (the earliest event of them all), then each in turn */
    int64_t t0 = 0;
    for (uint32_t i = 0; i < pl->n; i++) {
        cmh_snapshot s;
        int rc = export_view(pl->v[i], &s);
        if (rc) return rc;
        int64_t o = cmh_chrome_origin(&s);
        if (o && (!t0 || o < t0)) t0 = o;
        cmh_snapshot_free(&s);
    }
    cmh_chrome *c = cmh_chrome_begin(fp, t0);
    if (!c) return CLI_ENOMEM;
    int rc = 0;
    for (uint32_t i = 0; i < pl->n && !rc; i++) {
        cmh_snapshot s;
        if ((rc = load_for_export(pl->v[i], &s))) break;
        char label[512];
        label_of(&s, pl->v[i], label, sizeof label);
        int crc = cmh_chrome_add(c, &s, (int)(i + 1) * 2000, label);
        if (crc != CMH_OK) rc = cli_fail(pl->v[i], crc);
        *entries += s.nentries;
        cmh_snapshot_free(&s);
    }
    int erc = cmh_chrome_end(c);
    return rc ? rc : erc == CMH_OK ? 0 : erc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
}

static const char *stack_site(void *arg, const cmh_snapshot *s, const cmh_sites *g, uint32_t stack)
{
    (void)arg;
    cmh_site x;
    memset(&x, 0, sizeof x);
    x.stack = stack;
    x.group = g ? cmh_sites_group(g, stack) : stack;
    return rep_site_name(s, g, &x);
}

/* The records of the children the named records forked, found beside them (rep_child_record),
 * appended to pl for one database or one trace of the run (take): `export app.cmh -o a.db` said
 * "1 record" where the run wrote the killed child's app.803.cmh beside it.  Each one taken is
 * said; where the format holds one process (take 0: a pickle, a profile), each one left out is
 * said instead (a pprof export said "1 record" and nothing of the child beside it). */
static int add_children(cmh_pathlist *pl, int take)
{
    uint32_t named = pl->n;
    for (uint32_t i = 0; i < named; i++) {
        if (!strcmp(pl->v[i], "-")) continue; /* (standard input is read once) */
        cmh_snapshot s;
        char err[512], found[4400], ending[1024];
        if (cmh_snapshot_load_ex(pl->v[i], &s, CMH_LOAD_SEGMENTS, err, sizeof err) != CMH_OK) continue; /* (its own load says why) */
        for (uint32_t k = 0; k < s.nchildren; k++) {
            /* a child with no snapshot is in by its flight record (killed, _exit()): the database
             * and the trace left out the children the reports name (not one still running, whose
             * record is still being written) */
            int flight = 0;
            if (!rep_child_record(pl->v[i], &s.children[k], found, sizeof found, ending, sizeof ending) &&
                (!(flight = rep_child_flight(pl->v[i], &s.children[k], found, sizeof found, ending, sizeof ending)) || !strcmp(ending, "still runs")))
                continue;
            if (!take) {
                fprintf(stderr, "cumemhist: %s: forked child %lld's %s %s is not in this export (its format holds one process: export "
                                "it on its own, or the run with -f sqlite or -f chrome)\n",
                        pl->v[i], (long long)s.children[k].pid, flight ? "flight record" : "record", found);
                continue;
            }
            struct stat a, b;
            int dup = 0;
            for (uint32_t j = 0; j < pl->n && !dup; j++)
                dup = !strcmp(pl->v[j], found) || (stat(pl->v[j], &a) == 0 && stat(found, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino);
            if (dup) continue;
            if (cmh_pathlist_add(pl, found) != 0 || (flight && cmh_pathlist_add(&g_child_flights, found) != 0)) {
                cmh_snapshot_free(&s);
                return CLI_ENOMEM;
            }
            fprintf(stderr, "cumemhist: %s: forked child %lld's %s %s goes in too\n", pl->v[i], (long long)s.children[k].pid,
                    flight ? "flight record (it left no snapshot)" : "record", found);
        }
        cmh_snapshot_free(&s);
    }
    return 0;
}

static int many_sqlite(const cmh_pathlist *pl, const char *out)
{
    if (!out || !strcmp(out, "-")) {
        cli_error("export: --format sqlite writes a database file: name it with -o (fleet.db)");
        return CLI_EUSAGE;
    }
    char err[4400];
    cmh_atomic out_file; /* SQLite writes by name: a temporary file beside the target, renamed when done */
    if (cmh_output_begin(&out_file, out, CMH_OUT_SEEKABLE | CMH_OUT_SHARED | CMH_OUT_AS(CMH_KIND_SQLITE), err, sizeof err) != 0) {
        cli_error("%s", err);
        return CLI_EFILE;
    }
    cmh_sqlite *db = cmh_sqlite_open(out_file.tmppath, err, sizeof err);
    if (!db) {
        size_t tl = strlen(out_file.tmppath); /* the message names the file the user asked for */
        cli_error("%s: %s", out, !strncmp(err, out_file.tmppath, tl) && err[tl] == ':' ? err + tl + 2 : err);
        cmh_atomic_abort(&out_file);
        return CLI_EFILE;
    }
    int rc = 0;
    uint64_t entries = 0;
    for (uint32_t i = 0; i < pl->n && !rc; i++) {
        cmh_snapshot s;
        cmh_sites *g;
        if ((rc = g_raw_frames ? load_for_export(pl->v[i], &s) : export_view(pl->v[i], &s))) break;
        if (!g_raw_frames && (rc = rep_load_sites(pl->v[i], &s, &g))) break; /* (s freed there) */
        if (g_raw_frames) { /* the sites of the frames as recorded */
            cmh_site_opts o = {rep_attribution.group_by, rep_attribution.no_default, rep_attribution.skips.v,
                               rep_attribution.skips.n};
            int src;
            char why[512];
            if (!(g = cmh_sites_new(&s, &o, &src, why, sizeof why))) {
                cli_error("%s", why);
                cmh_snapshot_free(&s);
                rc = src == CMH_EINVAL ? CLI_EUSAGE : CLI_ENOMEM;
                break;
            }
        }
        int erc = cmh_sqlite_add(db, &s, pl->v[i], g, stack_site, NULL);
        if (erc != CMH_OK) {
            cli_error("%s: %s", pl->v[i], err);
            rc = erc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
        }
        entries += s.nentries;
        cmh_sites_free(g);
        cmh_snapshot_free(&s);
    }
    if (rc) {
        cmh_sqlite_abort(db);
        cmh_atomic_abort(&out_file);
        return rc;
    }
    if (cmh_sqlite_close(db) != CMH_OK) {
        cli_error("%s: %s", out, err);
        cmh_atomic_abort(&out_file);
        return CLI_EFILE;
    }
    if (cmh_atomic_commit(&out_file, err, sizeof err) != CMH_OK) {
        cli_error("%s", err);
        return CLI_EFILE;
    }
    say_wrote(out, pl->n, entries);
    return 0;
}

int cmd_export(int argc, char **argv)
{
    char **args = malloc((size_t)(argc > 1 ? argc : 1) * sizeof *args);
    int n, rc = args ? cli_parse(&cli_cmd_export, argc, argv, args, &n) : CLI_ENOMEM;
    if (rc) {
        free(args);
        return rc < 0 ? cli_finish_stdout(0) : rc;
    }
    int named = g_out && strcmp(g_out, "-") ? format_of_name(g_out) : -1;
    /* a name whose extension says no export format: a page or a picture (no export writes one),
     * folded stacks, text: it wrote a memviz pickle under that name.  A name with no extension
     * is memviz, the default. */
    const char *base = g_out ? strrchr(g_out, '/') : NULL;
    base = base ? base + 1 : g_out;
    const char *ext = base ? strrchr(base, '.') : NULL;
    if (!g_format_given && named < 0 && g_out && strcmp(g_out, "-") && ext && ext != base) {
        if (ends_with(g_out, ".html") || ends_with(g_out, ".htm") || ends_with(g_out, ".svg"))
            cli_error("export: no export format writes %s: `cumemhist report` (one page, every report) or `cumemhist view` "
                      "(the interactive timeline) writes a page, `cumemhist plot` or `flamegraph` a picture; --format memviz "
                      "writes a pickle under that name anyway",
                      g_out);
        else
            cli_error("export: the name %s says no export format (%s is not one): .pickle or .pkl is memviz, .json json, "
                      ".trace.json chrome, .pb.gz or .pprof pprof, .db or .sqlite sqlite; `cumemhist flamegraph --folded` "
                      "writes folded stacks; --format FORMAT writes that format under any name",
                      g_out, ext);
        free(args);
        return CLI_EUSAGE;
    }
    if (!g_format_given && named >= 0) g_format = named;
    else if (g_format_given && named >= 0 && ((named == F_PPROF) != (g_format == F_PPROF))) {
        cli_error("export: --format %s does not write what the name %s says (%s); rename it or change --format",
                  g_formats[g_format], g_out, named == F_PPROF ? "a pprof profile" : "not a pprof profile");
        free(args);
        return CLI_EUSAGE;
    } else if (g_format_given && named >= 0 && (named == F_MEMVIZ) != (g_format == F_MEMVIZ || g_format == F_PICKLE)) {
        cli_error("export: --format %s does not write what the name %s says (%s); rename it or change --format",
                  g_formats[g_format], g_out, named == F_MEMVIZ ? "a pickle" : "JSON");
        free(args);
        return CLI_EUSAGE;
    }
    if ((named == F_SQLITE) != (g_format == F_SQLITE) && g_format_given && named >= 0) {
        cli_error("export: --format %s does not write what the name %s says (%s); rename it or change --format",
                  g_formats[g_format], g_out, named == F_SQLITE ? "a database" : "not a database");
        free(args);
        return CLI_EUSAGE;
    }
    if ((rep_attribution.skips.n || rep_attribution.no_default) && g_format != F_PPROF) {
        cli_error("export: --skip and --no-default-skip are for -f pprof (its stacks start at the sites); -f %s keeps "
                  "every frame as recorded",
                  g_formats[g_format]);
        free(args);
        return CLI_EUSAGE;
    }
    if (g_device != -2 && g_format != F_PPROF) { /* (it wrote every device without a word) */
        cli_error("export: --device is for -f pprof (a profile of that device alone); -f %s writes every device of the record, "
                  "for memory_viz, Perfetto or SQL to select one",
                  g_formats[g_format]);
        free(args);
        return CLI_EUSAGE;
    }
    cmh_pathlist pl;
    rc = cmh_expand_paths(args, n, &pl);
    int given = n, dir = pl.ndirs > 0;
    if (!rc && !pl.n) { /* only directories, none holding a snapshot: not 'one snapshot at a time (0 given)' */
        if (given == 1) cli_error("%s: no snapshots in this directory (no .cmh or .pickle file)", args[0]);
        else cli_error("export: no snapshots in the directories given (no .cmh or .pickle file)");
        rc = CLI_EFILE;
    }
    free(args);
    if (rc) return rc;
    /* a run's forked children are in a job's trace as in its database: `export -f chrome app.cmh`
     * left out the killed child's app.803.cmh that the sqlite export took in */
    uint32_t nnamed = pl.n;
    if (add_children(&pl, g_format == F_SQLITE || g_format == F_CHROME)) {
        cmh_pathlist_free(&pl);
        cmh_pathlist_free(&g_child_flights);
        return CLI_ENOMEM;
    }
    if (g_format == F_SQLITE || (g_format == F_CHROME && (given > 1 || dir || pl.n > nnamed))) {
        if (!pl.n) cli_error("export: no .cmh or .pickle files in the directories given"), rc = CLI_EFILE;
        /* a process once, however many files hold it (a .cmh and its pickle: "5 records" for 4) */
        if (!rc) rc = cmh_pathlist_one_per_process(&pl, "export");
        if (!rc && g_format == F_SQLITE) rc = many_sqlite(&pl, g_out);
        else if (!rc) {
            cmh_atomic a;
            char err[4400];
            FILE *fp = cmh_output_open(&a, g_out ? g_out : "-", CMH_OUT_SHARED | CMH_OUT_AS(CMH_KIND_CHROME), err, sizeof err);
            if (!fp) {
                cli_error("%s", err);
                rc = CLI_EFILE;
            } else {
                uint64_t entries = 0;
                rc = many_chrome(&pl, fp, &entries);
                if (!rc && cmh_atomic_commit(&a, err, sizeof err) != CMH_OK) cli_error("%s", err), rc = CLI_EFILE;
                else if (rc) cmh_atomic_abort(&a);
                else say_wrote(g_out, pl.n, entries);
            }
        }
        cmh_pathlist_free(&pl);
        cmh_pathlist_free(&g_child_flights);
        return rc;
    }
    if (pl.n != 1) {
        cli_error("export: --format %s writes one snapshot at a time (%u given); chrome and sqlite take several", g_formats[g_format], pl.n);
        cmh_pathlist_free(&pl);
        return CLI_EUSAGE;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", pl.v[0]);
    cmh_pathlist_free(&pl);
    int binary = g_format == F_MEMVIZ || g_format == F_PICKLE || g_format == F_PPROF;
    if (binary && (!g_out || !strcmp(g_out, "-")) && isatty(STDOUT_FILENO)) {
        cli_error("export: not writing %s to a terminal; name a file with -o (%s) or redirect",
                  g_format == F_PPROF ? "a gzipped pprof profile" : "a binary pickle", g_format == F_PPROF ? "heap.pb.gz" : "run.pickle");
        return CLI_EUSAGE;
    }
    cmh_snapshot s;
    if ((rc = load_for_export(path, &s))) return rc; /* PyTorch's blocks beside the other allocations */
    if ((rc = rep_check_device(path, &s, g_device))) { /* --device 5 of a one-device record wrote device 0's */
        cmh_snapshot_free(&s);
        return rc;
    }
    char err[4400];
    cmh_atomic a;
    /* a snapshot (the memviz pickle) stays private like a .cmh; JSON, Chrome and pprof are for sharing */
    unsigned share = g_format == F_MEMVIZ || g_format == F_PICKLE ? 0 : CMH_OUT_SHARED;
    /* what is at -o is replaced only when it is our own earlier export of this format (or --force) */
    share |= CMH_OUT_AS(g_format == F_JSON ? CMH_KIND_JSON : g_format == F_CHROME ? CMH_KIND_CHROME : g_format == F_PPROF ? CMH_KIND_PPROF : CMH_KIND_PICKLE);
    FILE *fp = cmh_output_open(&a, g_out ? g_out : "-", share, err, sizeof err);
    if (!fp) {
        cli_error("%s", err);
        cmh_snapshot_free(&s);
        return CLI_EFILE;
    }
    uint64_t host = 0, pk_written = 0, pk_implied = 0; /* pk_*: the memviz pickle's device_traces */
    errno = 0;
    /* pprof: every device, as every report covers every device (it took one, device 1 of two,
     * with only a note on stderr), each sample labelled; --device: that one */
    int32_t devs[256];
    int ndev = 0;
    cmh_sites *g = NULL;
    if (g_format == F_PPROF) {
        /* every device, as the reports cover them; pinned host memory apart, as they keep it (a
         * default profile's total added it to the GPUs': 24 MB for 16 + 8), unless it is all */
        ndev = rep_devices(path, &s, g_device, g_device == -2, devs, 256);
        if (!ndev && g_device == -2) ndev = rep_devices(path, &s, g_device, 0, devs, 256);
        cmh_site_opts o = {CMH_GROUP_SITE, rep_attribution.no_default, rep_attribution.skips.v, rep_attribution.skips.n};
        int src = CMH_OK;
        if (ndev < 0 || !(g = cmh_sites_new(&s, &o, &src, err, sizeof err))) {
            if (ndev >= 0) cli_error("%s", err);
            cmh_atomic_abort(&a);
            cmh_snapshot_free(&s);
            return ndev < 0 || src == CMH_EINVAL ? CLI_EUSAGE : CLI_ENOMEM;
        }
    }
    int erc = g_format == F_JSON     ? cmh_export_json(&s, g_inline_frames ? CMH_JSON_INLINE_FRAMES : 0, fp)
              : g_format == F_CHROME ? cmh_export_chrome(&s, fp)
              : g_format == F_PPROF  ? cmh_export_pprof(&s, g, devs, ndev, fp)
                                     : cmh_export_memviz_counted(&s, fp, &host, &pk_written, &pk_implied);
    int e = errno ? errno : EIO; /* a write that failed (ENOSPC, EPIPE) says why here */
    const char *why = erc == CMH_EIO ? strerror(e) : cmh_strerror(erc);
    if (erc == CMH_OK) erc = cmh_atomic_commit(&a, err, sizeof err);
    else cmh_atomic_abort(&a), snprintf(err, sizeof err, "%s: write failed: %s", a.path, why);
    if (erc != CMH_OK) cli_error("%s", err);
    uint64_t host_live = 0, host_entries = 0;
    /* pprof: left out where the profile holds no pinned host memory (the devices' profile, as the
     * reports keep it apart; it was said only without -q, and the help said "of every device") */
    int pprof_host_out = g_format == F_PPROF && ndev > 0;
    for (int k = 0; k < ndev && pprof_host_out; k++) pprof_host_out = devs[k] >= 0;
    if ((g_format != F_CHROME && g_format != F_PPROF) || pprof_host_out) host = cmh_host_allocations(&s, &host_live, &host_entries);
    if (erc == CMH_OK && host && g_format != F_CHROME)
        fprintf(stderr, "cumemhist: export: %llu pinned host allocation%s left out (%llu live at the end, %llu trace entr%s; %s)\n",
                (unsigned long long)host, host == 1 ? "" : "s", (unsigned long long)host_live, (unsigned long long)host_entries,
                host_entries == 1 ? "y" : "ies",
                g_format == F_JSON    ? "PyTorch's schema has devices only: leaks, owners and the SQLite export keep them"
                : g_format == F_PPROF ? "the profile is the devices', as the reports keep pinned host memory apart: --device -1 for it"
                                      : "memory_viz shows devices only: leaks, owners and the SQLite export keep them");
    if (erc == CMH_OK && (g_format == F_MEMVIZ || g_format == F_PICKLE) && !g_quiet) say_pool_cache(&s);
    if (erc == CMH_OK && (g_format == F_MEMVIZ || g_format == F_PICKLE)) {
        if (!g_quiet) rep_say_memviz_numbering(&s, "export", -2, NULL);
    }
    if (erc == CMH_OK && g_format == F_PPROF) { /* the entries of the devices it holds, and which they are */
        uint64_t ne = 0;
        char of[160];
        size_t ol = (size_t)snprintf(of, sizeof of, " of %s", ndev == 1 ? "device " : "devices ");
        for (int k = 0; k < ndev; k++) {
            const cmh_trace *t = cmh_snapshot_trace(&s, devs[k]);
            ne += t ? t->nentries : 0;
            if (ol < sizeof of) {
                if (devs[k] < 0) ol += (size_t)snprintf(of + ol, sizeof of - ol, "%s-1 (pinned host)", k ? ", " : "");
                else ol += (size_t)snprintf(of + ol, sizeof of - ol, "%s%d", k ? ", " : "", (int)devs[k]);
            }
        }
        if (ndev > 1 && ol < sizeof of) snprintf(of + ol, sizeof of - ol, " (label device: -tagfocus=device=N for one)");
        say_wrote_of(g_out, 1, ne, of);
    } else if (erc == CMH_OK && (g_format == F_MEMVIZ || g_format == F_PICKLE)) {
        /* the entries its device_traces hold, the export's implied ones among them (it said the
         * record's 50 of a file holding 98); reading the file back drops those */
        char of[96] = "";
        if (pk_implied) /* (a driver allocation's block, a free never recorded: docs/CLI.md, export) */
            snprintf(of, sizeof of, " (%llu implied for memory_viz, dropped when read back)", (unsigned long long)pk_implied);
        say_wrote_of(g_out, 1, pk_written, of);
    } else if (erc == CMH_OK) say_wrote(g_out, 1, s.nentries - host_entries); /* what the file holds */
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    if (erc != CMH_OK) return erc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    return 0;
}
