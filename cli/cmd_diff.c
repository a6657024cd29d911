/*
 * cmd_diff.c - `cumemhist diff BEFORE AFTER`: what a change did to memory (analyzer/diff.c), and
 * a gate for CI (--fail-if-peak-grows).
 */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"

static int g_device = -2, g_top = 10, g_json, g_have_pct;
static double g_fail_pct;

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "device to compare (default: the lowest in each)", NULL, 0, 0, NULL},
    CLI_OPT_TOP(&g_top, "sites to list (default 10)"),
    CLI_OPTS_ATTRIBUTION,
    {"--fail-if-peak-grows", NULL, CLI_PCT, &g_fail_pct, "PCT", "exit with status 3 if peak allocated grew by more than PCT%",
     NULL, 0, 0, &g_have_pct},
    CLI_OPT_JSON(&g_json),
};

static const cli_command g_cmd = {
    "diff", "[options] BEFORE AFTER",
    "What a change did to memory: peak and end figures of two snapshots side by side, and the\n"
    "allocation sites whose live bytes (at the end, and at the allocated peak) changed most.\n"
    "Sites are matched by their frames, so the two snapshots may come from different runs.",
    g_opts, CLI_NOPTS(g_opts), 2, 2, 0, "cumemhist diff main.cmh branch.cmh --fail-if-peak-grows 5"};

int cmd_diff(int argc, char **argv)
{
    char *paths[2];
    int n, rc = cli_parse(&g_cmd, argc, argv, paths, &n);
    if (rc) return rc < 0 ? 0 : rc;
    cmh_snapshot s[2];
    cmh_sites *g[2];
    int dev[2];
    if ((rc = rep_load(paths[0], g_device, &s[0], &dev[0], &g[0]))) return rc;
    if ((rc = rep_load(paths[1], g_device, &s[1], &dev[1], &g[1]))) {
        cmh_sites_free(g[0]);
        cmh_snapshot_free(&s[0]);
        return rc;
    }
    cmh_diff_report d;
    int crc = cmh_diff_compute(&s[0], dev[0], g[0], &s[1], dev[1], g[1], &d);
    if (crc != CMH_OK) {
        for (int f = 0; f < 2; f++) cmh_sites_free(g[f]), cmh_snapshot_free(&s[f]);
        return cli_fail(paths[1], crc);
    }
    const cmh_peak_report *pk = d.peak;
    struct {
        const char *what, *key;
        int64_t a, b;
    } rows[] = {
        {"peak allocated", "peak_allocated", pk[0].alloc_peak, pk[1].alloc_peak},
        {"peak reserved", "peak_reserved", pk[0].reserved_peak, pk[1].reserved_peak},
        {"allocated at the end", "allocated_end", pk[0].alloc_end, pk[1].alloc_end},
        {"reserved at the end", "reserved_end", pk[0].reserved_end, pk[1].reserved_end},
        {"segments at the end", "segments_end", d.segments[0], d.segments[1]},
    };
    if (g_json) {
        cmh_jw w;
        cmh_jw_init(&w, stdout);
        cmh_jw_obj(&w);
        cmh_jw_kstr(&w, "before", paths[0]);
        cmh_jw_kstr(&w, "after", paths[1]);
        cmh_jw_kdouble(&w, "peak_growth_pct", d.peak_growth_pct, 3);
        for (int i = 0; i < 5; i++) {
            cmh_jw_key(&w, rows[i].key);
            cmh_jw_obj(&w);
            cmh_jw_kint(&w, "before", rows[i].a);
            cmh_jw_kint(&w, "after", rows[i].b);
            cmh_jw_kint(&w, "delta", rows[i].b - rows[i].a);
            cmh_jw_end(&w);
        }
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "sites");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < d.nsites && (int)i < g_top; i++) {
            const cmh_diff_site *x = &d.sites[i];
            cmh_jw_nl(&w);
            const cmh_sites *sg = x->snap == &s[0] ? g[0] : g[1];
            cmh_site one = {x->group, x->stack, 0, 0, 0, 0, 0, 0, 0, 0, 0};
            cmh_jw_obj(&w);
            cmh_jw_kstr(&w, "key", x->key);
            const cmh_frame *f = cmh_sites_frame(sg, x->group);
            cmh_jw_key(&w, "site");
            if (f) rep_json_frame(&w, x->snap, f);
            else cmh_jw_null(&w);
            cmh_jw_kstr(&w, "owner", cmh_sites_owner(sg, one.group));
            cmh_jw_key(&w, "frames");
            cmh_jw_arr(&w);
            const cmh_stack *st = &x->snap->stacks[x->stack];
            for (uint32_t k = 0; k < st->count; k++) rep_json_frame(&w, x->snap, &x->snap->frames[x->snap->stack_frames[st->first + k]]);
            cmh_jw_end(&w);
            cmh_jw_kint(&w, "end_before", x->before_end);
            cmh_jw_kint(&w, "end_after", x->after_end);
            cmh_jw_kint(&w, "peak_before", x->before_peak);
            cmh_jw_kint(&w, "peak_after", x->after_peak);
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
        cmh_jw_end(&w);
        putchar('\n');
    } else {
        printf("%-22s %14s %14s %14s %9s\n", "", "before", "after", "change", "");
        for (int i = 0; i < 5; i++) {
            double pct = rows[i].a ? 100.0 * (double)(rows[i].b - rows[i].a) / (double)rows[i].a : 0.0;
            if (i < 4)
                printf("%-22s %14s %14s %14s %+8.1f%%\n", rows[i].what, rep_size((double)rows[i].a), rep_size((double)rows[i].b),
                       rep_size((double)(rows[i].b - rows[i].a)), pct);
            else
                printf("%-22s %14" PRId64 " %14" PRId64 " %+14" PRId64 " %+8.1f%%\n", rows[i].what, rows[i].a, rows[i].b,
                       rows[i].b - rows[i].a, pct);
        }
        printf("\nsites that changed most (live bytes at the end / at the allocated peak):\n");
        for (uint32_t i = 0; i < d.nsites && (int)i < g_top; i++) {
            const cmh_diff_site *x = &d.sites[i];
            if (x->after_end == x->before_end && x->after_peak == x->before_peak) break;
            cmh_site one = {x->group, x->stack, 0, 0, 0, 0, 0, 0, 0, 0, 0};
            printf("  end %12s -> %-12s  peak %12s -> %-12s  %s\n", rep_size((double)x->before_end), rep_size((double)x->after_end),
                   rep_size((double)x->before_peak), rep_size((double)x->after_peak),
                   rep_site_name(x->snap, x->snap == &s[0] ? g[0] : g[1], &one));
        }
        if (g_have_pct)
            printf("\npeak allocated %s by %.1f%% (limit %.1f%%)\n", d.peak_growth_pct >= 0 ? "grew" : "shrank",
                   d.peak_growth_pct < 0 ? -d.peak_growth_pct : d.peak_growth_pct, g_fail_pct);
    }
    int grew = g_have_pct && d.peak_growth_pct > g_fail_pct;
    cmh_diff_report_free(&d);
    for (int f = 0; f < 2; f++) cmh_sites_free(g[f]), cmh_snapshot_free(&s[f]);
    rc = cli_finish_stdout(0);
    return rc ? rc : grew ? CLI_ECHECK : 0;
}
