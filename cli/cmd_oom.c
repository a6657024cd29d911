/*
 * cmd_oom.c - `cumemhist oom`: every out-of-memory error in the record, with what the device
 * and the segments still had free, a verdict (demand or fragmentation), and who held memory.
 */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"

static int g_device = -2, g_top = 10, g_frames = 6, g_json;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE(&g_device),
    CLI_OPT_TOP(&g_top, "sites to list per error (default 10)"),
    CLI_OPT_FRAMES(&g_frames),
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

static const cli_command g_cmd = {
    "oom", "[options] SNAPSHOT",
    "Every out-of-memory error in the record: the request, what the device still had free, what\n"
    "was allocated and reserved, whether the request would have fit in a free gap, a verdict\n"
    "(demand or fragmentation), and the allocation sites holding memory at that moment.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist oom cumemhist.1234.cmh"};

static const char *const g_verdicts[] = {"demand", "fragmentation", "fit in a free gap"};
static const char *const g_explain[] = {
    "demand: the memory was genuinely in use",
    "fragmentation, not demand: enough bytes were free, but no free gap was large enough",
    "a free gap inside the reserved segments was large enough (another stream or memory pool?)"};

int cmd_oom(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&g_cmd, argc, argv, &path, &n);
    if (rc) return rc < 0 ? 0 : rc;
    cmh_snapshot s;
    cmh_sites *g;
    int dev;
    if ((rc = rep_load(path, g_device, &s, &dev, &g))) return rc;
    cmh_oom_report p;
    int crc = cmh_oom_compute(&s, dev, g, &p);
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
        cmh_jw_key(&w, "ooms");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < p.nevents; i++) {
            const cmh_oom_event *e = &p.events[i];
            cmh_jw_nl(&w);
            cmh_jw_obj(&w);
            cmh_jw_kint(&w, "index", e->index);
            cmh_jw_kint(&w, "time_ns", e->time_ns);
            cmh_jw_kuint(&w, "request", e->request);
            cmh_jw_kuint(&w, "device_free", e->device_free);
            cmh_jw_kuint(&w, "allocated", e->allocated);
            cmh_jw_kuint(&w, "reserved", e->reserved);
            cmh_jw_kuint(&w, "free_in_segments", e->free_inside);
            cmh_jw_kuint(&w, "largest_gap", e->largest_gap);
            cmh_jw_kbool(&w, "fits_in_gap", e->fits_in_gap);
            cmh_jw_kstr(&w, "verdict", g_verdicts[e->verdict]);
            cmh_jw_key(&w, "requested_by");
            if (e->request_stack) {
                cmh_site who = {e->request_group, e->request_stack, e->request, 1, e->time_ns, e->time_ns, 0, 0, 0, 0, 0};
                rep_json_site(&w, &s, g, &who, e->request, 0);
            } else cmh_jw_null(&w);
            cmh_jw_key(&w, "sites");
            rep_json_sites(&w, &s, g, e->sites, e->nsites, g_top, e->allocated, 0);
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
        cmh_jw_end(&w);
        putchar('\n');
    } else if (!p.nevents) {
        printf("%s, device %d: no out-of-memory error in the record (%" PRIu64 " trace entries)\n", path, dev, p.base.entries);
        rep_notes(&p.base);
    } else {
        for (uint32_t i = 0; i < p.nevents; i++) {
            const cmh_oom_event *e = &p.events[i];
            printf("%sout of memory #%u on device %d at entry %" PRId64 ", %s\n", i ? "\n" : "", i + 1, dev, e->index,
                   rep_when(e->time_ns, t0));
            printf("  requested               %12s (%" PRIu64 " bytes)\n", rep_size((double)e->request), e->request);
            if (e->request_stack) {
                cmh_site who = {e->request_group, e->request_stack, e->request, 1, 0, 0, 0, 0, 0, 0, 0};
                printf("  requested by            %s  [%s]\n", rep_site_name(&s, g, &who), cmh_sites_owner(g, e->request_group));
                rep_print_frames(&s, g, e->request_stack, g_frames, "                            ");
            } else {
                printf("  requested by            <no stack: recorded with context none or state>\n");
            }
            printf("  device free (driver)    %12s\n", rep_size((double)e->device_free));
            printf("  allocated               %12s\n", rep_size((double)e->allocated));
            printf("  reserved                %12s\n", rep_size((double)e->reserved));
            printf("  free inside segments    %12s   largest gap %s: the request %s in it\n", rep_size((double)e->free_inside),
                   rep_size((double)e->largest_gap), e->fits_in_gap ? "fits" : "does not fit");
            printf("  verdict: %s\n", g_explain[e->verdict]);
            rep_gpu_at(&s, dev, e->time_ns, "  ");
            printf("  holding memory then:\n");
            for (uint32_t k = 0; k < e->nsites && (int)k < g_top; k++) {
                const cmh_site *x = &e->sites[k];
                printf("    %12s %7" PRIu64 " block%s  %s  [%s]\n", rep_size((double)x->bytes), x->count, x->count == 1 ? " " : "s",
                       rep_site_name(&s, g, x), cmh_sites_owner(g, x->group));
                rep_print_frames(&s, g, x->stack, g_frames, "          ");
            }
        }
        rep_notes(&p.base);
    }
    cmh_oom_report_free(&p);
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    return cli_finish_stdout(0);
}
