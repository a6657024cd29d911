/*
 * cmd_export.c - `cumemhist export SNAP --format memviz|json|chrome -o OUT`: a snapshot shaped for
 * another tool (viz/), written atomically.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/merge.h"
#include "cumemhist/pictures.h"
#include "cumemhist/viz.h"

enum { F_MEMVIZ, F_PICKLE, F_JSON, F_CHROME, F_PPROF };
static const char *const g_formats[] = {"memviz", "pickle", "json", "chrome", "pprof", NULL};
static int g_format = F_MEMVIZ, g_device = -2;
static const char *g_out;
static int g_format_given, g_inline_frames;

static const cli_option g_opts[] = {
    {"--format", "-f", CLI_CHOICE, &g_format, "FORMAT",
     "memviz (default): a PyTorch snapshot pickle (protocol 4) that PyTorch's\n"
     "memory_viz page (pytorch.org/memory_viz) and _memory_viz.py open;\n"
     "json: the same dict as JSON, plus what PyTorch's schema cannot hold, stacks\n"
     "interned (\"stack\" indexes the top-level \"stacks\" and \"frames\" lists);\n"
     "chrome: a Chrome / Perfetto trace (ui.perfetto.dev): memory counters per\n"
     "device, OOM and mark instants, kernels on one track per stream;\n"
     "pprof: a gzipped profile.proto (go tool pprof, speedscope): live bytes and\n"
     "blocks by stack at the end and at the allocated peak, of one device",
     g_formats, 0, 0, &g_format_given},
    {"--output", "-o", CLI_STR, &g_out, "PATH",
     "where to write (default: standard output; written atomically).  Without --format the\n"
     "name says it: .json is json, .trace.json or .perfetto.json chrome, .pb.gz or\n"
     ".pprof pprof, else memviz",
     NULL, 0, 0, NULL},
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "pprof: the device (default: the lowest)", NULL, 0, 0, NULL},
    {"--inline-frames", NULL, CLI_FLAG, &g_inline_frames, NULL,
     "json: each segment, block and entry carries its own \"frames\" list, exactly\n"
     "PyTorch's dict (several times larger)",
     NULL, 0, 0, NULL},
};

const cli_command cli_cmd_export = {"export", "[options] SNAPSHOT", "Write a snapshot (.cmh or PyTorch pickle) for another tool.",
                                  g_opts, CLI_NOPTS(g_opts), 1, 1, 0,
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
    return -1;
}

int cmd_export(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_export, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    int named = g_out && strcmp(g_out, "-") ? format_of_name(g_out) : -1;
    if (!g_format_given && named >= 0) g_format = named;
    else if (g_format_given && named >= 0 && ((named == F_PPROF) != (g_format == F_PPROF))) {
        cli_error("export: --format %s does not write what the name %s says (%s); rename it or change --format",
                  g_formats[g_format], g_out, named == F_PPROF ? "a pprof profile" : "not a pprof profile");
        return CLI_EUSAGE;
    } else if (g_format_given && named >= 0 && (named == F_MEMVIZ) != (g_format == F_MEMVIZ || g_format == F_PICKLE)) {
        cli_error("export: --format %s does not write what the name %s says (%s); rename it or change --format",
                  g_formats[g_format], g_out, named == F_MEMVIZ ? "a pickle" : "JSON");
        return CLI_EUSAGE;
    }
    int binary = g_format == F_MEMVIZ || g_format == F_PICKLE || g_format == F_PPROF;
    if (binary && (!g_out || !strcmp(g_out, "-")) && isatty(STDOUT_FILENO)) {
        cli_error("export: not writing a binary pickle to a terminal; name a file with -o (or redirect)");
        return CLI_EUSAGE;
    }
    cmh_snapshot s;
    if ((rc = cli_load(path, &s))) return rc;
    if (s.torch && (rc = cmh_merged_view(&s)) != CMH_OK) { /* PyTorch's blocks beside the other allocations */
        cmh_snapshot_free(&s);
        return cli_fail(path, rc);
    }
    char err[4400];
    cmh_atomic a;
    FILE *fp = stdout;
    if (g_out && strcmp(g_out, "-") && !(fp = cmh_atomic_open(&a, g_out, err, sizeof err))) {
        cli_error("%s", err);
        cmh_snapshot_free(&s);
        return CLI_EFILE;
    }
    uint64_t host = 0;
    errno = 0;
    int dev = g_device;
    if (g_format == F_PPROF && dev == -2) { /* the lowest device */
        int32_t devs[256];
        int nd = cmh_snapshot_devices(&s, devs, 256);
        dev = 0;
        for (int i = 0; i < nd && i < 256; i++)
            if (devs[i] >= 0) {
                dev = devs[i];
                break;
            }
    }
    int erc = g_format == F_JSON     ? cmh_export_json(&s, g_inline_frames ? CMH_JSON_INLINE_FRAMES : 0, fp)
              : g_format == F_CHROME ? cmh_export_chrome(&s, fp)
              : g_format == F_PPROF  ? cmh_export_pprof(&s, dev, fp)
                                     : cmh_export_memviz(&s, fp, &host);
    int e = errno ? errno : EIO; /* a write that failed (ENOSPC, EPIPE) says why here */
    const char *why = erc == CMH_EIO ? strerror(e) : cmh_strerror(erc);
    if (fp != stdout) {
        if (erc == CMH_OK) erc = cmh_atomic_commit(&a, err, sizeof err);
        else cmh_atomic_abort(&a), snprintf(err, sizeof err, "%s: write failed: %s", g_out, why);
        if (erc != CMH_OK) cli_error("%s", err);
    } else if (erc != CMH_OK) {
        cli_error("standard output: %s", why);
    }
    if (erc == CMH_OK && host && g_format != F_JSON && g_format != F_CHROME)
        fprintf(stderr, "cumemhist: %llu pinned host allocations left out (memory_viz shows devices only)\n",
                (unsigned long long)host);
    cmh_snapshot_free(&s);
    if (erc != CMH_OK) return erc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    return fp == stdout ? cli_finish_stdout(0) : 0;
}
