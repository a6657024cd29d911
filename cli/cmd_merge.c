/*
 * cmd_merge.c - `cumemhist merge OURS.cmh TORCH.pickle -o MERGED.cmh`: one record from a
 * driver-level recording and PyTorch's _dump_snapshot() of the same process (cumemhist/merge.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cumemhist/merge.h"

static const char *g_out;
static int g_force;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write the merged record (required)", NULL, 0, 0, NULL},
    {"--force", NULL, CLI_FLAG, &g_force, NULL, "join two snapshots that do not look like one process's; and replace what is at -o\neven when it is not a .cmh snapshot", NULL, 0, 0, NULL},
};

/* The first and last instants a snapshot's trace entries give (ns; 0, 0: none has a time). */
static void time_span(const cmh_snapshot *s, int64_t *lo, int64_t *hi)
{
    *lo = *hi = 0;
    for (uint32_t i = 0; i < s->nentries; i++) {
        int64_t t = cmh_entry_time(s, &s->entries[i]);
        if (!t) continue;
        if (!*lo || t < *lo) *lo = t;
        if (t > *hi) *hi = t;
    }
}

/* Whether the two are plainly not one process's (a slip: rank 0's recording with rank 1's
 * pickle, last week's pickle): their traces' times an hour or more apart, or none of PyTorch's
 * segments memory the recording saw while both have some.  why says which, with figures. */
static int unrelated(const cmh_snapshot *ours, const cmh_snapshot *torch, char *why, size_t n)
{
    int64_t olo, ohi, tlo, thi;
    time_span(ours, &olo, &ohi);
    time_span(torch, &tlo, &thi);
    if (ours->start_time_ns && (!olo || ours->start_time_ns < olo)) olo = ours->start_time_ns;
    if (ours->dump_time_ns > ohi) ohi = ours->dump_time_ns;
    const int64_t slack = (int64_t)3600 * 1000000000;
    if (olo && tlo && (thi + slack < olo || tlo > ohi + slack)) {
        double gap = (double)(thi < olo ? olo - thi : tlo - ohi) / 1e9;
        snprintf(why, n, "PyTorch's trace %s %.1f %s %s the recording's", thi < olo ? "ends" : "begins",
                 gap >= 86400 ? gap / 86400 : gap / 3600, gap >= 86400 ? "days" : "hours", thi < olo ? "before" : "after");
        return 1;
    }
    cmh_range *r = NULL;
    uint32_t nr = 0, theirs = 0, seen = 0, mine = 0;
    if (cmh_torch_ranges(torch, -2, &r, &nr) != CMH_OK || !nr) {
        free(r);
        return 0;
    }
    for (uint32_t i = 0; i < ours->nsegments; i++) {
        const cmh_segment *g = &ours->segments[i];
        if (g->device < 0) continue;
        mine++;
        seen += cmh_ranges_overlap(r, nr, g->addr, g->addr + g->size);
    }
    for (uint32_t i = 0; i < ours->nentries && !seen; i++) {
        const cmh_entry *e = &ours->entries[i];
        if (e->action != CMH_ACT_SEGMENT_ALLOC && e->action != CMH_ACT_SEGMENT_MAP) continue;
        mine++;
        seen += cmh_ranges_overlap(r, nr, cmh_entry_addr(ours, e), cmh_entry_addr(ours, e) + cmh_entry_size(ours, e));
    }
    theirs = nr;
    free(r);
    if (mine && !seen) {
        snprintf(why, n, "none of PyTorch's %u address range%s is memory the recording saw allocated", theirs,
                 theirs == 1 ? "" : "s");
        return 1;
    }
    return 0;
}

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
    char err[4400], why[256];
    if (ours.source == CMH_SRC_RECORDER && torch.source == CMH_SRC_PYTORCH && !ours.torch && !g_force &&
        unrelated(&ours, &torch, why, sizeof why)) {
        cmh_snapshot_free(&ours);
        cmh_snapshot_free(&torch);
        cli_error("merge: %s and %s do not look like one process's: %s (--force joins them anyway)", paths[0], paths[1], why);
        return CLI_EFILE;
    }
    rc = cmh_merge_torch(&ours, &torch, &info, err, sizeof err);
    cmh_snapshot_free(&torch);
    if (rc != CMH_OK) {
        cmh_snapshot_free(&ours);
        cli_error("merge: %s and %s: %s", paths[0], paths[1], err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    cmh_outputs_force(g_force); /* (its --force: -o is replaced whatever it holds) */
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
