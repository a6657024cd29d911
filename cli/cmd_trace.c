/*
 * cmd_trace.c - `cumemhist trace`: the `trace` text of PyTorch's torch/cuda/_memory_viz.py, for
 * any snapshot.
 */
#include <stdio.h>

#include "cli.h"

static const cli_command g_cmd = {
    "trace", "SNAPSHOT",
    "PyTorch's `python _memory_viz.py trace`: each device's trace as pseudo-code\n"
    "(a = cudaMalloc(...), b = a[offset:size], del b, ...).  Same text as PyTorch's, except\n"
    "that TOTAL MEM is the bytes still allocated at the end of the trace.",
    NULL, 0, 1, 1, 0, "cumemhist trace dump_snapshot.pickle | less"};

int cmd_trace(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&g_cmd, argc, argv, &path, &n);
    if (rc) return rc < 0 ? 0 : rc;
    cmh_snapshot s;
    if ((rc = cli_load(path, &s))) return rc;
    int crc = cmh_print_trace(&s, stdout);
    cmh_snapshot_free(&s);
    if (crc != CMH_OK) return cli_fail(path, crc);
    return cli_finish_stdout(0);
}
