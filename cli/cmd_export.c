/*
 * cmd_export.c - `cumemhist export SNAP --format memviz|json|chrome -o OUT`: a snapshot shaped for
 * another tool (viz/), written atomically.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/viz.h"

enum { F_MEMVIZ, F_PICKLE, F_JSON, F_CHROME };
static const char *const g_formats[] = {"memviz", "pickle", "json", "chrome", NULL};
static int g_format = F_MEMVIZ;
static const char *g_out;

static const cli_option g_opts[] = {
    {"--format", "-f", CLI_CHOICE, &g_format, "FORMAT",
     "memviz (default): a PyTorch snapshot pickle (protocol 4) that PyTorch's\n"
     "memory_viz page (pytorch.org/memory_viz) and _memory_viz.py open;\n"
     "json: the same dict as JSON, plus what PyTorch's schema cannot hold;\n"
     "chrome: a Chrome / Perfetto trace (ui.perfetto.dev): memory counters per\n"
     "device, OOM and mark instants, kernels on one track per stream",
     g_formats, 0, 0, NULL},
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write (default: standard output; written atomically)", NULL, 0, 0, NULL},
};

static const cli_command g_cmd = {"export", "[options] SNAPSHOT", "Write a snapshot (.cmh or PyTorch pickle) for another tool.",
                                  g_opts, CLI_NOPTS(g_opts), 1, 1, 0,
                                  "cumemhist export run.cmh -o run.pickle   # then drag run.pickle onto memory_viz"};

int cmd_export(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&g_cmd, argc, argv, &path, &n);
    if (rc) return rc < 0 ? 0 : rc;
    cmh_snapshot s;
    if ((rc = cli_load(path, &s))) return rc;
    char err[4400];
    cmh_atomic a;
    FILE *fp = stdout;
    if (g_out && strcmp(g_out, "-") && !(fp = cmh_atomic_open(&a, g_out, err, sizeof err))) {
        cli_error("%s", err);
        cmh_snapshot_free(&s);
        return CLI_EFILE;
    }
    uint64_t host = 0;
    int erc = g_format == F_JSON     ? cmh_export_json(&s, fp)
              : g_format == F_CHROME ? cmh_export_chrome(&s, fp)
                                     : cmh_export_memviz(&s, fp, &host);
    if (fp != stdout) {
        if (erc == CMH_OK) erc = cmh_atomic_commit(&a, err, sizeof err);
        else cmh_atomic_abort(&a), snprintf(err, sizeof err, "%s: %s", g_out, cmh_strerror(erc));
        if (erc != CMH_OK) cli_error("%s", err);
    } else if (erc != CMH_OK) {
        cli_error("standard output: export failed (%s)", erc == CMH_ENOMEM ? "out of memory" : strerror(errno));
    }
    if (erc == CMH_OK && host && g_format != F_JSON && g_format != F_CHROME)
        fprintf(stderr, "cumemhist: %llu pinned host allocations left out (memory_viz shows devices only)\n",
                (unsigned long long)host);
    cmh_snapshot_free(&s);
    if (erc != CMH_OK) return erc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    return fp == stdout ? cli_finish_stdout(0) : 0;
}
