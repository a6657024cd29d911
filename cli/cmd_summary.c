/*
 * cmd_summary.c - `cumemhist summary`: torch.cuda.memory_summary() of a snapshot, computed by
 * replaying its trace.
 */
#include <stdio.h>

#include "cli.h"
#include "jsonw.h"

static int g_device = -2, g_abbrev, g_json;

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "device to report (default: the lowest device in the snapshot)", NULL, 0, 0, NULL},
    {"--abbreviated", NULL, CLI_FLAG, &g_abbrev, NULL, "omit the large/small pool rows", NULL, 0, 0, NULL},
    {"--json", NULL, CLI_FLAG, &g_json, NULL, "machine-readable output, every figure an exact integer", NULL, 0, 0, NULL},
};

static const cli_command g_cmd = {
    "summary", "[options] SNAPSHOT",
    "Print the torch.cuda.memory_summary() table of a snapshot (.cmh or PyTorch pickle),\n"
    "computed by replaying its trace: Cur Usage is the end of the record, Peak Usage the\n"
    "maximum over it.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist summary cumemhist.1234.cmh"};

static void json_stat(cmh_jw *w, const char *name, const cmh_stat *s)
{
    cmh_jw_nl(w);
    cmh_jw_key(w, name);
    cmh_jw_obj(w);
    cmh_jw_kint(w, "current", s->current);
    cmh_jw_kint(w, "peak", s->peak);
    cmh_jw_kint(w, "allocated", s->allocated);
    cmh_jw_kint(w, "freed", s->freed);
    cmh_jw_end(w);
}

static void json_pools(cmh_jw *w, const char *metric, const cmh_stat *arr)
{
    static const struct {
        const char *name;
        int index;
    } pools[] = {{"all", CMH_POOL_ALL}, {"large_pool", CMH_POOL_LARGE}, {"small_pool", CMH_POOL_SMALL}};
    for (int p = 0; p < 3; p++) {
        char name[96];
        snprintf(name, sizeof name, "%s.%s", metric, pools[p].name);
        json_stat(w, name, &arr[pools[p].index]);
    }
}

int cmd_summary(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&g_cmd, argc, argv, &path, &n);
    if (rc) return rc < 0 ? 0 : rc;
    cmh_snapshot s;
    int device;
    if ((rc = cli_load_device(path, g_device, &s, &device))) return rc;
    int32_t devs[64];
    int nd = cmh_snapshot_devices(&s, devs, 64);
    cmh_mem_stats st;
    int crc = cmh_summary_compute(&s, device, &st);
    if (crc != CMH_OK) {
        cmh_snapshot_free(&s);
        return cli_fail(path, crc);
    }
    const cmh_trace *t = cmh_snapshot_trace(&s, device);
    uint64_t dropped = t ? t->dropped : 0, nent = t ? t->nentries : 0;
    if (g_json) {
        cmh_jw w;
        cmh_jw_init(&w, stdout);
        cmh_jw_obj(&w);
        cmh_jw_kstr(&w, "file", path);
        cmh_jw_kint(&w, "device", device);
        cmh_jw_kuint(&w, "trace_entries", nent);
        cmh_jw_kuint(&w, "dropped_entries", dropped);
        cmh_jw_kstr(&w, "byte_units", s.source == CMH_SRC_PYTORCH ? "requested" : "allocated");
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "stats");
        cmh_jw_obj(&w);
        json_pools(&w, "allocated_bytes", st.allocated_bytes);
        json_pools(&w, "active_bytes", st.active_bytes);
        json_pools(&w, "requested_bytes", st.requested_bytes);
        json_pools(&w, "reserved_bytes", st.reserved_bytes);
        json_pools(&w, "inactive_split_bytes", st.inactive_split_bytes);
        json_pools(&w, "allocation", st.allocation);
        json_pools(&w, "active", st.active);
        json_pools(&w, "segment", st.segment);
        json_pools(&w, "inactive_split", st.inactive_split);
        json_stat(&w, "oversize_allocations", &st.oversize_allocations);
        json_stat(&w, "oversize_segments", &st.oversize_segments);
        cmh_jw_end(&w);
        cmh_jw_nl(&w);
        cmh_jw_kuint(&w, "num_ooms", st.num_ooms);
        cmh_jw_kuint(&w, "num_alloc_retries", st.num_alloc_retries);
        cmh_jw_end(&w);
        putchar('\n');
    } else if (!nd) {
        printf("%s: no allocations recorded\n", path);
    } else {
        cmh_summary_print(&st, device, g_abbrev, stdout);
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
    return cli_finish_stdout(0);
}
