/*
 * cmd_summary.c - `cumemhist summary SNAP [--device N] [--abbreviated] [--json]`
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const usage_text =
    "usage: cumemhist summary [options] SNAPSHOT\n"
    "\n"
    "Print the torch.cuda.memory_summary() table of a snapshot (.cmh or PyTorch pickle),\n"
    "computed by replaying its trace: Cur Usage is the end of the record, Peak Usage the\n"
    "maximum over it.\n"
    "\n"
    "options:\n"
    "  --device N      device to report (default: the lowest device in the snapshot)\n"
    "  --abbreviated   omit the large/small pool rows\n"
    "  --json          machine-readable output, every figure an exact integer\n"
    "\n"
    "example: cumemhist summary cumemhist.1234.cmh\n";

static void json_stat(FILE *fp, const char *name, const cmh_stat *s, int last)
{
    fprintf(fp, "    \"%s\": {\"current\": %lld, \"peak\": %lld, \"allocated\": %lld, \"freed\": %lld}%s\n", name,
            (long long)s->current, (long long)s->peak, (long long)s->allocated, (long long)s->freed, last ? "" : ",");
}

static void json_pools(FILE *fp, const char *metric, const cmh_stat *arr)
{
    static const struct {
        const char *name;
        int index;
    } pools[] = {{"all", CMH_POOL_ALL}, {"large_pool", CMH_POOL_LARGE}, {"small_pool", CMH_POOL_SMALL}};
    for (int p = 0; p < 3; p++) {
        char name[96];
        snprintf(name, sizeof name, "%s.%s", metric, pools[p].name);
        json_stat(fp, name, &arr[pools[p].index], 0);
    }
}

int cmd_summary(int argc, char **argv)
{
    const char *path = NULL, *v;
    int device = -2, abbreviated = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--abbreviated")) abbreviated = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (cli_opt(argc, argv, &i, "--device", &v)) {
            if (cli_parse_device(v, &device)) return 2;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("summary: unknown option '%s' (see cumemhist summary --help)", argv[i]);
            return 2;
        } else if (!path) path = argv[i];
        else {
            cli_error("summary: one snapshot at a time");
            return 2;
        }
    }
    if (!path) {
        fputs(usage_text, stderr);
        return 2;
    }
    cmh_snapshot s;
    if (cli_load_device(path, device, &s, &device)) return 1;
    int32_t devs[64];
    int nd = cmh_snapshot_devices(&s, devs, 64);
    cmh_mem_stats st;
    if (cmh_summary_compute(&s, device, &st) != CMH_OK) {
        cli_error("out of memory");
        cmh_snapshot_free(&s);
        return 1;
    }
    const cmh_trace *t = cmh_snapshot_trace(&s, device);
    uint64_t dropped = t ? t->dropped : 0, nent = t ? t->nentries : 0;
    if (json) {
        printf("{\n  \"file\": \"%s\",\n  \"device\": %d,\n  \"trace_entries\": %llu,\n  \"dropped_entries\": %llu,\n",
               path, device, (unsigned long long)nent, (unsigned long long)dropped);
        printf("  \"byte_units\": \"%s\",\n", s.source == CMH_SRC_PYTORCH ? "requested" : "allocated");
        printf("  \"stats\": {\n");
        json_pools(stdout, "allocated_bytes", st.allocated_bytes);
        json_pools(stdout, "active_bytes", st.active_bytes);
        json_pools(stdout, "requested_bytes", st.requested_bytes);
        json_pools(stdout, "reserved_bytes", st.reserved_bytes);
        json_pools(stdout, "inactive_split_bytes", st.inactive_split_bytes);
        json_pools(stdout, "allocation", st.allocation);
        json_pools(stdout, "active", st.active);
        json_pools(stdout, "segment", st.segment);
        json_pools(stdout, "inactive_split", st.inactive_split);
        json_stat(stdout, "oversize_allocations", &st.oversize_allocations, 0);
        json_stat(stdout, "oversize_segments", &st.oversize_segments, 1);
        printf("  },\n  \"num_ooms\": %llu,\n  \"num_alloc_retries\": %llu\n}\n", (unsigned long long)st.num_ooms,
               (unsigned long long)st.num_alloc_retries);
    } else if (!nd) {
        printf("%s: no allocations recorded\n", path);
    } else {
        cmh_summary_print(&st, device, abbreviated, stdout);
        if (device == -1) printf("note: device -1 is pinned host memory\n");
        if (dropped)
            printf("note: the ring dropped the %llu oldest entries; peaks and totals cover the last %llu only\n",
                   (unsigned long long)dropped, (unsigned long long)nent);
        if (nd > 1) {
            printf("note: this snapshot also has device%s", nd > 2 ? "s" : "");
            for (int k = 0; k < nd && k < 64; k++)
                if (devs[k] != device) printf(" %d", devs[k]);
            printf(" (--device N)\n");
        }
    }
    cmh_snapshot_free(&s);
    return 0;
}
