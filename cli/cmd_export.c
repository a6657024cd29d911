/*
 * cmd_export.c - `cumemhist export SNAP --format memviz|json -o OUT`
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/viz.h"

static const char *const usage_text =
    "usage: cumemhist export [options] SNAPSHOT\n"
    "\n"
    "Write a snapshot (.cmh or PyTorch pickle) for another tool.\n"
    "\n"
    "options:\n"
    "  -f, --format memviz   a PyTorch snapshot pickle (protocol 4) that PyTorch's memory_viz page\n"
    "                        (pytorch.org/memory_viz) and _memory_viz.py open (default)\n"
    "  -f, --format json     the same dict as JSON, plus what PyTorch's schema cannot hold\n"
    "  -f, --format chrome   a Chrome / Perfetto trace (ui.perfetto.dev): memory counters per\n"
    "                        device, OOM and mark instants, kernels on one track per stream\n"
    "  -o, --output PATH     where to write (default: standard output; written atomically)\n"
    "\n"
    "example: cumemhist export run.cmh -o run.pickle   # then drag run.pickle onto memory_viz\n";

int cmd_export(int argc, char **argv)
{
    const char *path = NULL, *out = NULL, *format = "memviz", *v;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (cli_opt(argc, argv, &i, "-f", &v) || cli_opt(argc, argv, &i, "--format", &v)) format = v;
        else if (cli_opt(argc, argv, &i, "-o", &v) || cli_opt(argc, argv, &i, "--output", &v)) out = v;
        else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("export: unknown option '%s' (see cumemhist export --help)", argv[i]);
            return 2;
        } else if (!path) path = argv[i];
        else {
            cli_error("export: one snapshot at a time");
            return 2;
        }
    }
    if (!path) {
        fputs(usage_text, stderr);
        return 2;
    }
    int json = !strcmp(format, "json"), chrome = !strcmp(format, "chrome");
    if (!json && !chrome && strcmp(format, "memviz") && strcmp(format, "pickle")) {
        cli_error("export: unknown format '%s' (memviz, json or chrome)", format);
        return 2;
    }
    cmh_snapshot s;
    if (cli_load(path, &s)) return 1;
    char tmp[4200];
    FILE *fp = stdout;
    if (out && strcmp(out, "-")) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
        if (!(fp = fopen(tmp, "wb"))) {
            cli_error("%s: %s", tmp, strerror(errno));
            cmh_snapshot_free(&s);
            return 1;
        }
    }
    uint64_t host = 0;
    int rc = json ? cmh_export_json(&s, fp) : chrome ? cmh_export_chrome(&s, fp) : cmh_export_memviz(&s, fp, &host);
    if (fp != stdout) {
        if (fclose(fp) != 0) rc = CMH_EIO;
        if (rc == CMH_OK && rename(tmp, out) != 0) rc = CMH_EIO;
        if (rc != CMH_OK) unlink(tmp);
    } else if (fflush(stdout) != 0) rc = CMH_EIO;
    if (rc != CMH_OK) cli_error("%s: export failed (%s)", out ? out : "stdout", rc == CMH_ENOMEM ? "out of memory" : strerror(errno));
    else if (host && !json && !chrome)
        fprintf(stderr, "cumemhist: %llu pinned host allocations left out (memory_viz shows devices only)\n",
                (unsigned long long)host);
    cmh_snapshot_free(&s);
    return rc == CMH_OK ? 0 : 1;
}
