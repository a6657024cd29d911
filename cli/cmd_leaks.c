/*
 * cmd_leaks.c - `cumemhist leaks`: blocks still allocated at the end, by allocation site, and the
 * sites whose live bytes kept growing across the record (likely leaks), for every device.
 */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"

static int g_device = -2, g_top = 10, g_frames = 6, g_json, g_fail;
static uint64_t g_min_bytes;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPT_TOP(&g_top, "sites to list (default 10)"),
    CLI_OPT_FRAMES(&g_frames),
    {"--min-bytes", NULL, CLI_SIZE, &g_min_bytes, "B", "hide sites holding less (e.g. 1M); the totals still count them", NULL, 0, 0, NULL},
    {"--fail-on-leak", NULL, CLI_FLAG, &g_fail, NULL, "exit with status 3 when a site keeps growing (for CI)", NULL, 0, 0, NULL},
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_leaks = {
    "leaks", "[options] SNAPSHOT",
    "Blocks still allocated at the end of the record, grouped by allocation site, and whether\n"
    "each site kept growing.  The record is cut into windows (at the program's marks, else at\n"
    "PyTorch's external annotations, else ten stretches of equal entry counts) and each\n"
    "still-live block counted in the window it was allocated in; temporaries, freed, never\n"
    "count.  A site is a likely leak when its still-live blocks come from at least half of the\n"
    "windows after the first (and 3 of them), accumulating evenly (Kendall's tau >= 0.5); in a\n"
    "recording, also when one thread's blocks do so over ten windows of its own entries.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist leaks train.cmh --min-bytes 1M --fail-on-leak"};

static const char *const g_cp_kind[] = {"ten stretches of equal entry counts", "between marks", "between external annotations"};

static int section(const rep_section *sec, void *arg)
{
    uint32_t *leaking = arg;
    const cmh_snapshot *s = sec->s;
    const cmh_sites *g = sec->g;
    int dev = sec->device;
    cmh_leak_report p;
    int rc = cmh_leaks_compute(s, dev, g, g_min_bytes, &p);
    if (rc != CMH_OK) return rc;
    *leaking += p.leaking;
    int64_t t0 = rep_trace_start(s, dev);
    if (sec->w) {
        cmh_jw *w = sec->w;
        cmh_jw_obj(w);
        rep_json_base(w, sec, &p.base);
        cmh_jw_nl(w);
        cmh_jw_kuint(w, "live_bytes", p.live_bytes);
        cmh_jw_kuint(w, "live_blocks", p.live_blocks);
        cmh_jw_kuint(w, "live_sites", p.live_sites);
        cmh_jw_kuint(w, "leaking_sites", p.leaking);
        cmh_jw_kuint(w, "hidden_sites", p.hidden_sites);
        cmh_jw_kuint(w, "hidden_bytes", p.hidden_bytes);
        cmh_jw_kint(w, "windows", p.ncheckpoints);
        cmh_jw_kstr(w, "window_kind", g_cp_kind[p.checkpoint_kind]);
        cmh_jw_nl(w);
        cmh_jw_key(w, "sites");
        rep_json_sites(w, s, g, p.sites, p.nsites, g_top, p.live_bytes, 1);
        cmh_jw_end(w);
    } else {
        if (sec->index) putchar('\n');
        if (!p.base.entries && !s->nsegments) {
            printf("%s: no allocations recorded\n", sec->path);
        } else {
            printf("%s, %s: %s in %s still live at the end, from %s\n", sec->path, rep_device_name(dev),
                   rep_size((double)p.live_bytes), rep_count(p.live_blocks, "block", "blocks"),
                   rep_count(p.live_sites, "site", "sites"));
            printf("growth measured over %s (%s)\n\n", rep_count((uint64_t)p.ncheckpoints, "window", "windows"),
                   g_cp_kind[p.checkpoint_kind]);
            if (p.nsites) {
                printf("  %12s %7s %10s %10s  %-14s %s\n", "bytes", "blocks", "first", "last", "growth", "site  [owner]");
                for (uint32_t i = 0; i < p.nsites && (int)i < g_top; i++) {
                    const cmh_site *x = &p.sites[i];
                    char growth[32];
                    snprintf(growth, sizeof growth, "%s %u/%u", x->growing ? "LEAK" : x->rises ? "up" : "flat", x->rises,
                             x->intervals > 0 ? x->intervals - 1 : 0);
                    printf("  %12s %7" PRIu64 " %10s %10s  %-14s %s  [%s]\n", rep_size((double)x->bytes), x->count,
                           rep_when(x->first_ns, t0), rep_when(x->last_ns, t0), growth, rep_site_name(s, g, x),
                           cmh_sites_owner(g, x->group));
                    rep_print_frames(s, g, x->stack, g_frames, "        ");
                    if (x->growing && x->thread)
                        printf("        (growing over recording thread %u's own entries)\n", x->thread);
                }
            }
            if (p.nsites > (uint32_t)g_top) printf("  ... %s (--top)\n", rep_count(p.nsites - (uint32_t)g_top, "more site", "more sites"));
            if (p.hidden_sites)
                printf("  ... %s holding %s hidden (--min-bytes %s)\n", rep_count(p.hidden_sites, "site", "sites"),
                       rep_size((double)p.hidden_bytes), rep_size((double)g_min_bytes));
            if (p.leaking)
                printf("\n%s kept growing across the record: likely leak%s\n", rep_count(p.leaking, "site", "sites"),
                       p.leaking == 1 ? "" : "s");
            else printf("\nno site kept growing across the record\n");
            rep_notes(&p.base);
        }
    }
    cmh_leak_report_free(&p);
    return CMH_OK;
}

int cmd_leaks(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_leaks, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    uint32_t leaking = 0;
    rc = rep_run(&path, 1, g_device, g_json, REP_SITES, section, &leaking);
    return rc ? rc : g_fail && leaking ? CLI_ECHECK : 0;
}
