/*
 * cmd_leaks.c - `cumemhist leaks`: blocks still allocated at the end, by allocation site, and the
 * sites whose live bytes kept growing across the record (likely leaks).
 */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"

static int g_device = -2, g_top = 10, g_frames = 6, g_json, g_fail;
static uint64_t g_min_bytes;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE(&g_device),
    CLI_OPT_TOP(&g_top, "sites to list (default 10)"),
    CLI_OPT_FRAMES(&g_frames),
    {"--min-bytes", NULL, CLI_SIZE, &g_min_bytes, "B", "leave out sites holding less (e.g. 1M)", NULL, 0, 0, NULL},
    {"--fail-on-leak", NULL, CLI_FLAG, &g_fail, NULL, "exit with status 3 when a site keeps growing (for CI)", NULL, 0, 0, NULL},
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

static const cli_command g_cmd = {
    "leaks", "[options] SNAPSHOT",
    "Blocks still allocated at the end of the record, grouped by allocation site, with the\n"
    "growth of each site's live bytes across the record: at the program's marks (cmh_mark),\n"
    "else at PyTorch's external annotations, else at ten even points.  A site whose live\n"
    "bytes keep rising is reported as a likely leak.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist leaks train.cmh --min-bytes 1M --fail-on-leak"};

static const char *const g_cp_kind[] = {"even points of the trace", "marks", "external annotations"};

int cmd_leaks(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&g_cmd, argc, argv, &path, &n);
    if (rc) return rc < 0 ? 0 : rc;
    cmh_snapshot s;
    cmh_sites *g;
    int dev;
    if ((rc = rep_load(path, g_device, &s, &dev, &g))) return rc;
    cmh_leak_report p;
    int crc = cmh_leaks_compute(&s, dev, g, g_min_bytes, &p);
    if (crc != CMH_OK) {
        cmh_sites_free(g);
        cmh_snapshot_free(&s);
        return cli_fail(path, crc);
    }
    int64_t t0 = rep_trace_start(&s, dev);
    if (g_json) {
        cmh_jw w;
        cmh_jw_init(&w, stdout);
        cmh_jw_obj(&w);
        rep_json_base(&w, path, &p.base);
        cmh_jw_nl(&w);
        cmh_jw_kuint(&w, "live_bytes", p.live_bytes);
        cmh_jw_kuint(&w, "live_blocks", p.live_blocks);
        cmh_jw_kuint(&w, "leaking_sites", p.leaking);
        cmh_jw_kint(&w, "checkpoints", p.ncheckpoints);
        cmh_jw_kstr(&w, "checkpoint_kind", g_cp_kind[p.checkpoint_kind]);
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "sites");
        rep_json_sites(&w, &s, g, p.sites, p.nsites, g_top, p.live_bytes, 1);
        cmh_jw_end(&w);
        putchar('\n');
    } else if (!p.base.entries && !s.nsegments) {
        printf("%s: no allocations recorded\n", path);
    } else {
        printf("%s, device %d: %s in %" PRIu64 " blocks still live at the end, from %u site%s\n", path, dev,
               rep_size((double)p.live_bytes), p.live_blocks, p.nsites, p.nsites == 1 ? "" : "s");
        printf("growth measured at %d %s\n\n", p.ncheckpoints, g_cp_kind[p.checkpoint_kind]);
        printf("  %12s %7s %10s %10s  %-14s %s\n", "bytes", "blocks", "first", "last", "growth", "site  [owner]");
        for (uint32_t i = 0; i < p.nsites && (int)i < g_top; i++) {
            const cmh_site *x = &p.sites[i];
            char growth[32];
            snprintf(growth, sizeof growth, "%s %u/%u", x->growing ? "LEAK" : x->rises ? "up" : "flat", x->rises, x->intervals);
            printf("  %12s %7" PRIu64 " %10s %10s  %-14s %s  [%s]\n", rep_size((double)x->bytes), x->count,
                   rep_when(x->first_ns, t0), rep_when(x->last_ns, t0), growth, rep_site_name(&s, g, x),
                   cmh_sites_owner(g, x->group));
            rep_print_frames(&s, g, x->stack, g_frames, "        ");
        }
        if (p.nsites > (uint32_t)g_top) printf("  ... %u more sites (--top)\n", p.nsites - (uint32_t)g_top);
        if (p.leaking)
            printf("\n%u site%s kept growing across the record: likely leak%s\n", p.leaking, p.leaking == 1 ? "" : "s",
                   p.leaking == 1 ? "" : "s");
        else printf("\nno site kept growing across the record\n");
        rep_notes(&p.base);
    }
    int leaking = p.leaking;
    cmh_leak_report_free(&p);
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    rc = cli_finish_stdout(0);
    return rc ? rc : g_fail && leaking ? CLI_ECHECK : 0;
}
