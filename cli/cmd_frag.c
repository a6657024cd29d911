/*
 * cmd_frag.c - `cumemhist frag`: fragmentation of the reserved segments at the end of the
 * record, per device and per segment, and whether fragmentation explains the last OOM.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

static int g_device = -2, g_top = 10, g_json;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPT_TOP(&g_top, "segments to list, most free bytes first (default 10)"),
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_frag = {
    "frag", "[options] SNAPSHOT",
    "Fragmentation of the reserved segments at the end of the record, for every device and\n"
    "segment: reserved and allocated bytes, free bytes inside segments (reserved - allocated),\n"
    "the largest free gap,\n"
    "fragmentation (1 - largest gap / free), and non-releasable bytes (free space in segments\n"
    "that still hold a block: empty_cache() cannot return it).  Says when fragmentation rather\n"
    "than demand explains the last out-of-memory error.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist frag oom.pickle"};

static int cmp_free(const void *a, const void *b)
{
    const cmh_frag_seg *x = a, *y = b;
    if (x->free != y->free) return x->free > y->free ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static const char *const g_explain[] = {
    "demand: the memory was genuinely in use",
    "fragmentation, not demand: enough bytes were free, but no free gap was large enough",
    "a free gap was large enough (another stream or pool?)",
};

static int section(const rep_section *sec, void *arg)
{
    (void)arg;
    const cmh_snapshot *sp = sec->s;
    const cmh_sites *gs = sec->g;
    int dev = sec->device;
    cmh_frag_report p;
    int rc = cmh_frag_compute(sp, dev, &p);
    if (rc != CMH_OK) return rc;
    qsort(p.segs, p.nsegs, sizeof *p.segs, cmp_free);
    if (sec->w) {
        cmh_jw *w = sec->w;
        cmh_jw_obj(w);
        rep_json_base(w, sec, &p.base);
        cmh_jw_nl(w);
        cmh_jw_kuint(w, "reserved", p.reserved);
        cmh_jw_kuint(w, "allocated", p.allocated);
        cmh_jw_kuint(w, "free_in_segments", p.free);
        cmh_jw_kuint(w, "pending_free", p.pending_free);
        cmh_jw_kuint(w, "largest_gap", p.largest_gap);
        cmh_jw_kdouble(w, "fragmentation", p.fragmentation, 4);
        cmh_jw_kuint(w, "non_releasable", p.non_releasable);
        if (p.has_oom) {
            cmh_jw_nl(w);
            cmh_jw_key(w, "last_oom");
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "request", p.last_oom_request);
            cmh_jw_kuint(w, "device_free", p.last_oom_device_free);
            cmh_jw_kbool(w, "fragmentation_explains", p.last_oom_verdict == CMH_OOM_FRAGMENTATION);
            cmh_jw_end(w);
        }
        cmh_jw_nl(w);
        cmh_jw_key(w, "segments");
        cmh_jw_arr(w);
        for (uint32_t i = 0; i < p.nsegs && (int)i < g_top; i++) {
            const cmh_frag_seg *g = &p.segs[i];
            cmh_jw_nl(w);
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "address", g->addr);
            cmh_jw_kuint(w, "reserved", g->reserved);
            cmh_jw_kuint(w, "allocated", g->allocated);
            cmh_jw_kuint(w, "free", g->free);
            cmh_jw_kuint(w, "pending_free", g->pending_free);
            cmh_jw_kuint(w, "largest_gap", g->largest_gap);
            cmh_jw_kdouble(w, "fragmentation", g->fragmentation, 4);
            cmh_jw_kuint(w, "non_releasable", g->non_releasable);
            cmh_jw_kbool(w, "expandable", g->expandable);
            uint32_t stack = sp->segments[g->index].stack;
            const cmh_frame *f = cmh_sites_site_of(gs, stack);
            cmh_jw_key(w, "site"); /* who allocated the segment */
            if (f) rep_json_frame(w, sp, f);
            else cmh_jw_null(w);
            cmh_jw_kstr(w, "owner", cmh_sites_owner(gs, cmh_sites_group(gs, stack)));
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        cmh_jw_end(w);
    } else if (!p.nsegs) {
        printf("%s%s, %s: no segments at the end of the record\n", sec->index ? "\n" : "", sec->path, rep_device_name(dev));
    } else {
        if (sec->index) putchar('\n');
        printf("%s, %s: %s at the end of the record\n", sec->path, rep_device_name(dev), rep_count(p.nsegs, "segment", "segments"));
        printf("  reserved                 %12s\n", rep_size((double)p.reserved));
        printf("  allocated                %12s\n", rep_size((double)p.allocated));
        printf("  free inside segments     %12s   (reserved - allocated)", rep_size((double)p.free));
        if (p.pending_free) printf(", of it %s freed with stream work pending", rep_size((double)p.pending_free));
        printf("\n  largest free gap         %12s   fragmentation %.1f%%\n", rep_size((double)p.largest_gap), 100 * p.fragmentation);
        printf("  non-releasable           %12s   (free space in segments that still hold blocks)\n\n",
               rep_size((double)p.non_releasable));
        printf("  %-18s %11s %11s %11s %11s %6s %11s  %s\n", "segment", "reserved", "allocated", "free", "largest gap", "frag",
               "non-rel.", "allocated by");
        for (uint32_t i = 0; i < p.nsegs && (int)i < g_top; i++) {
            const cmh_frag_seg *g = &p.segs[i];
            const cmh_frame *f = cmh_sites_site_of(gs, sp->segments[g->index].stack);
            printf("  0x%-16" PRIx64 " %11s %11s %11s %11s %5.1f%% %11s  %s%s\n", g->addr, rep_size((double)g->reserved),
                   rep_size((double)g->allocated), rep_size((double)g->free), rep_size((double)g->largest_gap),
                   100 * g->fragmentation, rep_size((double)g->non_releasable), f ? rep_frame(sp, f) : "-",
                   g->expandable ? "  (expandable)" : "");
        }
        if (p.nsegs > (uint32_t)g_top) printf("  ... %s (--top)\n", rep_count(p.nsegs - (uint32_t)g_top, "more segment", "more segments"));
        if (p.has_oom)
            printf("\nthe last out-of-memory asked for %s: %s\n", rep_size((double)p.last_oom_request),
                   g_explain[p.last_oom_verdict]);
        rep_notes(&p.base);
    }
    cmh_frag_report_free(&p);
    return CMH_OK;
}

int cmd_frag(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_frag, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    return rep_run(&path, 1, g_device, g_json, REP_SITES, section, NULL);
}
