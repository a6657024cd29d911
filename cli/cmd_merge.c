/*
 * cmd_merge.c - `cumemhist merge OURS.cmh TORCH.pickle -o MERGED.cmh`: one record from a
 * driver-level recording and PyTorch's _dump_snapshot() of the same process (cumemhist/merge.h).
 */
#include <stdio.h>

#include "cli.h"
#include "cumemhist/merge.h"

static const char *g_out;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write the merged record (required)", NULL, 0, 0, NULL},
};

const cli_command cli_cmd_merge = {
    "merge", "-o MERGED.cmh RECORDING.cmh TORCH.pickle",
    "Join a cumemhist recording and PyTorch's own snapshot of the same process, taken separately,\n"
    "into one record: PyTorch's segments, blocks, trace and stacks ride along with every driver\n"
    "allocation, the two clocks aligned on the segment events both saw.  `cumemhist record`\n"
    "co-records a PyTorch job this way by itself.  `owners` then accounts for every byte.",
    g_opts, CLI_NOPTS(g_opts), 2, 2, 0, "cumemhist merge -o merged.cmh train.cmh snapshot.pickle"};

int cmd_merge(int argc, char **argv)
{
    char *paths[2];
    int n, rc = cli_parse(&cli_cmd_merge, argc, argv, paths, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    if (!g_out) {
        cli_error("merge: name the merged record with -o");
        return CLI_EUSAGE;
    }
    cmh_snapshot ours, torch;
    if ((rc = cli_load(paths[0], &ours))) return rc;
    if ((rc = cli_load(paths[1], &torch))) {
        cmh_snapshot_free(&ours);
        return rc;
    }
    cmh_merge_info info;
    char err[4400];
    rc = cmh_merge_torch(&ours, &torch, &info, err, sizeof err);
    cmh_snapshot_free(&torch);
    if (rc != CMH_OK) {
        cmh_snapshot_free(&ours);
        cli_error("merge: %s and %s: %s", paths[0], paths[1], err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    rc = cmh_cmh_write_file(&ours, g_out, err, sizeof err);
    cmh_snapshot_free(&ours);
    if (rc != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    if (info.matched) /* ours = PyTorch's + clock_ns: the sign is the operator ('+ -0.091 ms' was read as a typo) */
        fprintf(stderr, "cumemhist: %s: the clocks aligned on %u segment events (ours = PyTorch's %c %.3f ms, spread %.3f ms)\n", g_out,
                info.matched, info.clock_ns < 0 ? '-' : '+', (double)(info.clock_ns < 0 ? -info.clock_ns : info.clock_ns) / 1e6,
                (double)info.spread_ns / 1e6);
    else
        fprintf(stderr, "cumemhist: %s: no segment event seen by both: the clocks are taken as equal (both Unix time)\n", g_out);
    return 0;
}
