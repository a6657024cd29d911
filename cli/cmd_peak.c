/*
 * cmd_peak.c - `cumemhist peak`: peak allocated, reserved and requested memory, when, and which
 * sites held memory at the allocated peak, for every device; with several snapshots, a row each
 * and the worst.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/gapwords.h"
#include "cumemhist/owners.h"
#include "report.h"

static int g_device = -2, g_top = 10, g_frames = 6, g_json;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPT_TOP(&g_top, "sites to list (default 10)"),
    CLI_OPT_FRAMES(&g_frames),
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_peak = {
    "peak", "[options] SNAPSHOT...",
    "Peak allocated, reserved and requested memory: how much, when (trace entry and time), and\n"
    "which allocation sites owned the memory at the allocated peak, for every device; where\n"
    "cuMemCreate handles are mapped twice or in part, the physical peak too (each handle\n"
    "whole and once, as the driver charges it).  With several snapshots (one per rank or\n"
    "process), one row per device of each and the worst.",
    g_opts, CLI_NOPTS(g_opts), 1, 64, 0, "cumemhist peak train.cmh --top 5"};

typedef struct peak_run {
    int table; /* several snapshots: one row per section */
    char worst_path[1024];
    int worst_device;
    int64_t worst_peak;
} peak_run;

static void print_when(int64_t index, int64_t time_ns, int64_t t0, int64_t n)
{
    if (index < 0) printf(" before the first entry\n");
    else if (index >= n) printf(" at the end (the final state)\n");
    else printf(" at %s\n", rep_at(index, time_ns, t0));
}

static void print_text(const rep_section *sec, const cmh_peak_report *p, const cmh_physical_peak *ph, const char *why, const char *recon,
                       const rep_row_sites *rs)
{
    const cmh_snapshot *s = sec->s;
    const cmh_sites *g = sec->g;
    int dev = sec->device;
    int64_t t0 = rep_trace_start(s, dev), n = (int64_t)p->base.entries;
    if (sec->index) putchar('\n');
    if (!p->base.entries && !s->nsegments) {
        printf("%s: no allocations recorded\n", sec->path);
        return;
    }
    printf("%s, %s: %s\n", sec->path, rep_device_name(dev), rep_count(p->base.entries, "trace entry", "trace entries"));
    if (!p->base.history) { /* the end state is all there is: no peak can be told */
        /* what is known: the state at the end, which the peak was at least (it read 'peak: not
         * known' with nothing after it of what is) */
        printf("peak: not known: no history (%s); only the state at the end is known, and the peak was at least it:\n",
               p->base.nohist_cause);
        printf("at the end:     allocated %s, reserved %s, requested %s\n", rep_size((double)p->alloc_end),
               rep_size((double)p->reserved_end), rep_size((double)p->requested_end));
        if (why) printf("%s\n", why);
        printf("\nlive at the end, by allocation site:\n");
    } else {
    printf("peak allocated: %s (%" PRId64 " bytes)", rep_size((double)p->alloc_peak), p->alloc_peak);
    print_when(p->alloc_index, p->alloc_time_ns, t0, n);
    rep_unsplit_note(p, "                ");
    rep_gpu_at(s, dev, p->alloc_time_ns, "                ");
    printf("peak reserved:  %s (%" PRId64 " bytes)", rep_size((double)p->reserved_peak), p->reserved_peak);
    print_when(p->reserved_index, p->reserved_time_ns, t0, n);
    printf("peak requested: %s (%" PRId64 " bytes)", rep_size((double)p->requested_peak), p->requested_peak);
    print_when(p->requested_index, p->requested_time_ns, t0, n);
    if (ph->known) { /* cuMemCreate handles mapped twice, in part, or held unmapped: the device's memory is not the ranges' sum */
        printf("peak physical:  %s (%" PRId64 " bytes)", rep_size((double)ph->peak), ph->peak);
        print_when(ph->index, ph->time_ns, t0, n);
        printf("                (device memory as the driver charges it: a cuMemCreate handle counts its whole size once,\n"
               "                however many ranges map it and however much of it they map, mapped nowhere too while held;\n"
               "                allocated and reserved count the mapped ranges)\n");
    }
    char bound[400]; /* a trace that does not reach back to the run's start: its peaks are lower bounds */
    if (cmh_peak_bound_text(p, "\n                ", bound, sizeof bound)) printf("                %s\n", bound);
    printf("at the end:     allocated %s, reserved %s, requested %s", rep_size((double)p->alloc_end),
           rep_size((double)p->reserved_end), rep_size((double)p->requested_end));
    if (ph->known) printf(", physical %s", rep_size((double)ph->at_end));
    putchar('\n');
    rep_gap_notes(&p->base, 1); /* why the end is not what the trace left, right under it */
    rep_vmm_unmapped_note(s, dev);
    if (recon) printf("%s\n", recon); /* (owners prints the same lines) */
    if (why) printf("%s\n", why);
    printf("\nlive at the allocated peak, by allocation site:\n");
    }
    printf("  %12s %7s %7s  %s\n", "bytes", "share", "blocks", "site  [owner]");
    for (uint32_t i = 0; i < p->nsites && (int)i < g_top; i++) {
        const cmh_site *x = &p->sites[i];
        char tag[80];
        printf("  %12s %6.1f%% %7" PRIu64 "  %s%s\n", rep_size((double)x->bytes),
               p->alloc_peak ? 100.0 * (double)x->bytes / (double)p->alloc_peak : 0.0, x->count, rep_site_name(s, g, x),
               rep_owner_tag(g, x->group, tag, sizeof tag));
        rep_print_callers(s, x, "        ");
        rep_row_sites_print(rs, x, "        ");
        rep_print_frames(s, g, x->stack, g_frames, "        ");
    }
    if (p->nsites > (uint32_t)g_top) printf("  ... %s (--top)\n", rep_count(p->nsites - (uint32_t)g_top, "more site", "more sites"));
    rep_notes(&p->base);
}

static void json_when(cmh_jw *w, const char *key, int64_t bytes, int64_t index, int64_t time_ns)
{
    cmh_jw_nl(w);
    cmh_jw_key(w, key);
    cmh_jw_obj(w);
    cmh_jw_kint(w, "bytes", bytes);
    cmh_jw_kint(w, "index", index);
    rep_json_time(w, "time_ns", time_ns);
    cmh_jw_end(w);
}

static void print_json(const rep_section *sec, const cmh_peak_report *p, const cmh_physical_peak *ph, const cmh_owners_report *o,
                       int64_t trace_peak, int64_t end_reserved, rep_row_sites *rs)
{
    cmh_jw *w = sec->w;
    cmh_jw_obj(w);
    rep_json_base(w, sec, &p->base);
    if (p->base.history) {
        json_when(w, "peak_allocated", p->alloc_peak, p->alloc_index, p->alloc_time_ns);
        json_when(w, "peak_reserved", p->reserved_peak, p->reserved_index, p->reserved_time_ns);
        json_when(w, "peak_requested", p->requested_peak, p->requested_index, p->requested_time_ns);
        /* the figures are lower bounds where the trace does not reach back to the run's start */
        cmh_jw_kbool(w, "peak_at_least", cmh_peak_extent(p) == CMH_PEAK_AT_LEAST);
        rep_json_unsplit(w, p);
        if (ph->known) json_when(w, "peak_physical", ph->peak, ph->index, ph->time_ns);
        else { /* the handles make no difference, or the record does not name them: reserved's figure */
            cmh_jw_key(w, "peak_physical");
            cmh_jw_null(w);
        }
    } else { /* no history: no peak to tell (null, not the end state dressed as one) */
        cmh_jw_nl(w);
        cmh_jw_key(w, "peak_allocated");
        cmh_jw_null(w);
        cmh_jw_key(w, "peak_reserved");
        cmh_jw_null(w);
        cmh_jw_key(w, "peak_requested");
        cmh_jw_null(w);
        cmh_jw_knull(w, "peak_at_least");
        rep_json_unsplit(w, p);
    }
    cmh_jw_nl(w);
    cmh_jw_key(w, "end");
    cmh_jw_obj(w);
    cmh_jw_kint(w, "allocated", p->alloc_end);
    cmh_jw_kint(w, "reserved", p->reserved_end);
    cmh_jw_kint(w, "requested", p->requested_end);
    if (ph->known) cmh_jw_kint(w, "physical", ph->at_end);
    cmh_jw_end(w);
    rep_json_vmm_unmapped(w, sec->s, sec->device);
    cmh_jw_nl(w);
    rep_json_not_recorded(w, o, rep_trace_start(sec->s, sec->device));
    rep_json_reconciled(w, trace_peak, end_reserved);
    rep_json_gap(w, &p->base);
    cmh_jw_nl(w);
    cmh_jw_key(w, "sites_at_peak");
    rep_json_site_hook = rs->gs ? rep_row_sites_json : NULL; /* a grouped row: "by_site" */
    rep_json_site_hook_arg = rs;
    rep_json_sites(w, sec->s, sec->g, p->sites, p->nsites, g_top, (uint64_t)p->alloc_peak, 0);
    rep_json_site_hook = NULL;
    rep_json_sites_left_out(w, "sites_at_peak", p->nsites, g_top);
    cmh_jw_end(w);
}

static int section(const rep_section *sec, void *arg)
{
    peak_run *run = arg;
    cmh_peak_report p;
    int rc = cmh_peak_compute(sec->s, sec->device, sec->g, &p);
    if (rc != CMH_OK) return rc;
    cmh_physical_peak ph;
    if ((rc = cmh_physical_peak_compute(sec->s, sec->device, &ph)) != CMH_OK) {
        cmh_peak_report_free(&p);
        return rc;
    }
    if (p.alloc_peak > run->worst_peak) {
        run->worst_peak = p.alloc_peak;
        run->worst_device = sec->device;
        snprintf(run->worst_path, sizeof run->worst_path, "%s", sec->path);
    }
    /* more in use than recorded (a cuMemGetInfo sample says): the line owners prints too, so that
     * its total (the device's used memory) and this report's reserved bytes never read as a
     * contradiction; owners' replay to each sample only where there is one */
    cmh_owners_report o;
    memset(&o, 0, sizeof o);
    int64_t at, n = (int64_t)p.base.entries;
    int64_t k = cmh_owners_latest_sample(sec->s, sec->device, &at);
    /* a sample at the end or after the last entry (where the recorder takes it): this report's
     * own replay has the record's figures there, no second one needed (a merged record's peak
     * reads PyTorch's model, owners the driver's: owners' replay then) */
    if (k >= 0 && (at == INT64_MAX || (n && at == n - 1)) && !sec->s->torch && p.base.history) {
        const cmh_meminfo *mi = &sec->s->meminfo[k];
        int64_t act = at == INT64_MAX ? p.active_end : p.active_last, res = at == INT64_MAX ? p.reserved_end : p.reserved_last;
        /* each cuMemCreate handle once and whole, as owners counts it; the handles held and mapped
         * nowhere at the dump (in physical too) beside the ranges, as owners counts them too */
        uint64_t held = cmh_owners_vmm_unmapped(sec->s, sec->device, &(uint32_t){0});
        if (ph.known) res += ph.at_end - (int64_t)held - p.reserved_end;
        o = (cmh_owners_report){.device = sec->device, .sample_known = 1, .sample_time_ns = mi->time_ns, .sample_total = mi->total,
                                .sample_used = mi->total > mi->free ? mi->total - mi->free : 0, .sample_recorded = (uint64_t)(act > res ? act : res)};
        o.sample_recorded += held;
        if ((rc = cmh_owners_baseline_compute(sec->s, sec->device, &o.baseline)) != CMH_OK) {
            cmh_peak_report_free(&p);
            return rc;
        }
    } else if (k >= 0 && (rc = cmh_owners_compute_end(sec->s, sec->device, &o)) != CMH_OK) {
        cmh_peak_report_free(&p);
        return rc;
    }
    char line[512];
    const char *why = rep_not_recorded_line(&o, rep_trace_start(sec->s, sec->device), line, sizeof line);
    /* a reserved peak that is the final state, above every entry's: why, in owners' words too
     * (the entries' own peak from a second look, only then) */
    int64_t trace_peak = -1, tp_index, end_reserved = p.reserved_end;
    if (p.base.history && p.reserved_index >= (int64_t)p.base.entries && p.base.entries &&
        (rc = cmh_reserved_peaks(sec->s, sec->device, &trace_peak, &tp_index, &end_reserved)) != CMH_OK) {
        cmh_owners_report_free(&o);
        cmh_peak_report_free(&p);
        return rc;
    }
    char line2[512];
    const char *recon = rep_reconciled_line(trace_peak, end_reserved, line2, sizeof line2);
    /* a row grouped by module, file or package: its sites at the same peak (a failure to group
     * again only leaves the split out) */
    rep_row_sites rs;
    memset(&rs, 0, sizeof rs);
    cmh_peak_report ps;
    int have_ps = 0;
    if (!run->table && rep_row_sites_begin(&rs, sec->s, sec->g) && cmh_peak_compute(sec->s, sec->device, rs.gs, &ps) == CMH_OK) {
        have_ps = 1;
        rs.sites = ps.sites;
        rs.nsites = ps.nsites;
    }
    if (sec->w) print_json(sec, &p, &ph, &o, trace_peak, end_reserved, &rs);
    else if (run->table) {
        if (sec->index == 0)
            printf("%-40s %-18s %12s %12s %12s %12s %12s\n", "snapshot", "device", "peak alloc", "peak reserved", "peak requested",
                   "end alloc", "end reserved");
        printf("%-40s %-18s %12s %12s %12s %12s %12s\n", sec->path, rep_device_name(sec->device), rep_size((double)p.alloc_peak),
               rep_size((double)p.reserved_peak), rep_size((double)p.requested_peak), rep_size((double)p.alloc_end),
               rep_size((double)p.reserved_end));
    } else print_text(sec, &p, &ph, why, recon, &rs);
    if (have_ps) cmh_peak_report_free(&ps);
    rep_row_sites_end(&rs);
    cmh_owners_report_free(&o);
    cmh_peak_report_free(&p);
    return CMH_OK;
}

int cmd_peak(int argc, char **argv)
{
    char *paths[64];
    int npaths, rc = cli_parse(&cli_cmd_peak, argc, argv, paths, &npaths);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    peak_run run = {npaths > 1, "", 0, -1};
    rc = rep_run(paths, npaths, g_device, g_json, REP_SITES, section, &run);
    if (!rc && run.table && !g_json) {
        printf("worst: %s, %s (peak allocated %s)\n", run.worst_path, rep_device_name(run.worst_device),
               rep_size((double)run.worst_peak));
        rc = cli_finish_stdout(0);
    }
    return rc;
}
