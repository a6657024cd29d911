/*
 * cmd_torchtext.c - `cumemhist stats SNAP` and `cumemhist trace SNAP`: the two text reports of
 * PyTorch's torch/cuda/_memory_viz.py, for any snapshot.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int run(int argc, char **argv, const char *usage, int (*print)(const cmh_snapshot *, FILE *), int newline)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("%s: unknown option '%s'", argv[0], argv[i]);
            return 2;
        }
        if (path) {
            cli_error("%s: one snapshot at a time", argv[0]);
            return 2;
        }
        path = argv[i];
    }
    if (!path) {
        fputs(usage, stderr);
        return 2;
    }
    cmh_snapshot s;
    if (cli_load(path, &s)) return 1;
    int rc = print(&s, stdout);
    if (newline) putchar('\n'); /* the script print()s its result: one more newline */
    cmh_snapshot_free(&s);
    if (rc != CMH_OK) cli_error("%s: out of memory", path);
    return rc == CMH_OK ? 0 : 1;
}

int cmd_stats(int argc, char **argv)
{
    return run(argc, argv,
               "usage: cumemhist stats SNAPSHOT\n"
               "\n"
               "PyTorch's `python _memory_viz.py stats`: every segment of 20 MiB or more as a row of\n"
               "20 MiB pages (a-z: one block, 0-9: partly full, *: full, ' ': free), its free bytes and\n"
               "how much of them is rounding (internal), then the totals.  Same text as PyTorch's.\n"
               "\n"
               "example: cumemhist stats dump_snapshot.pickle\n",
               cmh_print_segsum, 1);
}

int cmd_trace(int argc, char **argv)
{
    return run(argc, argv,
               "usage: cumemhist trace SNAPSHOT\n"
               "\n"
               "PyTorch's `python _memory_viz.py trace`: each device's trace as pseudo-code\n"
               "(a = cudaMalloc(...), b = a[offset:size], del b, ...).  Same text as PyTorch's, except\n"
               "that TOTAL MEM is the bytes still allocated at the end of the trace.\n"
               "\n"
               "example: cumemhist trace dump_snapshot.pickle | less\n",
               cmh_print_trace, 0);
}
