/*
 * cmd_peak.c - `cumemhist peak`: peak allocated and reserved memory, when, and which sites held
 * memory at the allocated peak; with several snapshots, a row each and the worst.
 */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"

static int g_device = -2, g_top = 10, g_frames = 6, g_json;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE(&g_device),
    CLI_OPT_TOP(&g_top, "sites to list (default 10)"),
    CLI_OPT_FRAMES(&g_frames),
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

static const cli_command g_cmd = {
    "peak", "[options] SNAPSHOT...",
    "Peak allocated and peak reserved memory: how much, when (trace entry and time), and which\n"
    "allocation sites owned the memory at the allocated peak.  With several snapshots (one per\n"
    "rank or process), one row each and the worst.",
    g_opts, CLI_NOPTS(g_opts), 1, 64, 0, "cumemhist peak train.cmh --top 5"};

static void print_text(const char *path, const cmh_snapshot *s, const cmh_sites *g, int dev, const cmh_peak_report *p)
{
    int64_t t0 = rep_trace_start(s, dev);
    if (!p->base.entries && !s->nsegments) {
        printf("%s: no allocations recorded\n", path);
        return;
    }
    printf("%s, device %d: %" PRIu64 " trace entries\n", path, dev, p->base.entries);
    printf("peak allocated: %s (%" PRId64 " bytes)", rep_size((double)p->alloc_peak), p->alloc_peak);
    if (p->alloc_index >= 0) printf(" at entry %" PRId64 ", %s\n", p->alloc_index, rep_when(p->alloc_time_ns, t0));
    else printf(" before the first entry\n");
    rep_gpu_at(s, dev, p->alloc_time_ns, "                ");
    printf("peak reserved:  %s (%" PRId64 " bytes)", rep_size((double)p->reserved_peak), p->reserved_peak);
    if (p->reserved_index >= 0) printf(" at entry %" PRId64 ", %s", p->reserved_index, rep_when(p->reserved_time_ns, t0));
    printf("\nat the end:     allocated %s, reserved %s\n\n", rep_size((double)p->alloc_end), rep_size((double)p->reserved_end));
    printf("live at the allocated peak, by allocation site:\n");
    printf("  %12s %7s %7s  %s\n", "bytes", "share", "blocks", "site  [owner]");
    for (uint32_t i = 0; i < p->nsites && (int)i < g_top; i++) {
        const cmh_site *x = &p->sites[i];
        printf("  %12s %6.1f%% %7" PRIu64 "  %s  [%s]\n", rep_size((double)x->bytes),
               p->alloc_peak ? 100.0 * (double)x->bytes / (double)p->alloc_peak : 0.0, x->count, rep_site_name(s, g, x),
               cmh_sites_owner(g, x->group));
        rep_print_frames(s, g, x->stack, g_frames, "        ");
    }
    if (p->nsites > (uint32_t)g_top) printf("  ... %u more sites (--top)\n", p->nsites - (uint32_t)g_top);
    rep_notes(&p->base);
}

static void print_json(cmh_jw *w, const char *path, const cmh_snapshot *s, const cmh_sites *g, const cmh_peak_report *p)
{
    cmh_jw_obj(w);
    rep_json_base(w, path, &p->base);
    cmh_jw_nl(w);
    cmh_jw_key(w, "peak_allocated");
    cmh_jw_obj(w);
    cmh_jw_kint(w, "bytes", p->alloc_peak);
    cmh_jw_kint(w, "index", p->alloc_index);
    cmh_jw_kint(w, "time_ns", p->alloc_time_ns);
    cmh_jw_end(w);
    cmh_jw_nl(w);
    cmh_jw_key(w, "peak_reserved");
    cmh_jw_obj(w);
    cmh_jw_kint(w, "bytes", p->reserved_peak);
    cmh_jw_kint(w, "index", p->reserved_index);
    cmh_jw_kint(w, "time_ns", p->reserved_time_ns);
    cmh_jw_end(w);
    cmh_jw_nl(w);
    cmh_jw_key(w, "end");
    cmh_jw_obj(w);
    cmh_jw_kint(w, "allocated", p->alloc_end);
    cmh_jw_kint(w, "reserved", p->reserved_end);
    cmh_jw_end(w);
    cmh_jw_nl(w);
    cmh_jw_key(w, "sites_at_peak");
    rep_json_sites(w, s, g, p->sites, p->nsites, g_top, (uint64_t)p->alloc_peak, 0);
    cmh_jw_end(w);
}

int cmd_peak(int argc, char **argv)
{
    char *paths[64];
    int npaths, rc = cli_parse(&g_cmd, argc, argv, paths, &npaths);
    if (rc) return rc < 0 ? 0 : rc;
    int worst = -1;
    int64_t worst_peak = -1;
    cmh_jw w;
    cmh_jw_init(&w, stdout);
    if (g_json && npaths > 1) cmh_jw_arr(&w);
    for (int f = 0; f < npaths; f++) {
        cmh_snapshot s;
        cmh_sites *g;
        int dev;
        if ((rc = rep_load(paths[f], g_device, &s, &dev, &g))) return rc;
        cmh_peak_report p;
        int crc = cmh_peak_compute(&s, dev, g, &p);
        if (crc != CMH_OK) {
            cmh_sites_free(g);
            cmh_snapshot_free(&s);
            return cli_fail(paths[f], crc);
        }
        if (p.alloc_peak > worst_peak) worst_peak = p.alloc_peak, worst = f;
        if (g_json) {
            if (f) cmh_jw_nl(&w);
            print_json(&w, paths[f], &s, g, &p);
        } else if (npaths > 1) {
            if (f == 0) printf("%-40s %6s %12s %12s %12s %12s\n", "snapshot", "device", "peak alloc", "peak reserved", "end alloc",
                               "end reserved");
            printf("%-40s %6d %12s %12s %12s %12s\n", paths[f], dev, rep_size((double)p.alloc_peak),
                   rep_size((double)p.reserved_peak), rep_size((double)p.alloc_end), rep_size((double)p.reserved_end));
        } else {
            print_text(paths[f], &s, g, dev, &p);
        }
        cmh_peak_report_free(&p);
        cmh_sites_free(g);
        cmh_snapshot_free(&s);
    }
    if (g_json) {
        if (npaths > 1) cmh_jw_end(&w);
        putchar('\n');
    } else if (npaths > 1) {
        printf("worst: %s (peak allocated %s)\n", paths[worst], rep_size((double)worst_peak));
    }
    return cli_finish_stdout(0);
}
