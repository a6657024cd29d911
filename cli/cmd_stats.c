/*
 * cmd_stats.c - `cumemhist stats`: the `stats` text of PyTorch's torch/cuda/_memory_viz.py, for
 * any snapshot.
 */
#include <stdio.h>

#include "cli.h"

static const cli_command g_cmd = {
    "stats", "SNAPSHOT",
    "PyTorch's `python _memory_viz.py stats`: every segment of 20 MiB or more as a row of\n"
    "20 MiB pages (a-z: one block, 0-9: partly full, *: full, ' ': free), its free bytes and\n"
    "how much of them is rounding (internal), then the totals.  Same text as PyTorch's.",
    NULL, 0, 1, 1, 0, "cumemhist stats dump_snapshot.pickle"};

int cmd_stats(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&g_cmd, argc, argv, &path, &n);
    if (rc) return rc < 0 ? 0 : rc;
    cmh_snapshot s;
    if ((rc = cli_load(path, &s))) return rc;
    int crc = cmh_print_segsum(&s, stdout);
    putchar('\n'); /* the script print()s its result: one more newline */
    cmh_snapshot_free(&s);
    if (crc != CMH_OK) return cli_fail(path, crc);
    return cli_finish_stdout(0);
}
