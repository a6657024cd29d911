/*
 * cmd_whatif.c - `cumemhist whatif SNAP`: the trace's requests replayed through a model of
 * PyTorch's caching allocator under other settings (analyzer/whatif.c), beside the recorded run:
 * peak reserved and allocated, fragmentation at the peak, segment events, and whether and where
 * it would run out of memory at the device's capacity.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "cumemhist/reports.h"
#include "cumemhist/whatif.h"

static int g_device = -2, g_json;
static cli_list g_set, g_conf, g_sweep;
static uint64_t g_capacity;
static int g_have_capacity;

static const cli_option g_opts[] = {
    {"--set", NULL, CLI_LIST, &g_set, "KEY=VALUE",
     "a setting to try (repeatable; together they make one): expandable_segments,\n"
     "max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold",
     NULL, 0, 0, NULL},
    {"--conf", NULL, CLI_LIST, &g_conf, "CONF",
     "a setting in PYTORCH_CUDA_ALLOC_CONF's syntax (repeatable: each one its own):\n"
     "expandable_segments:True,max_split_size_mb:128",
     NULL, 0, 0, NULL},
    {"--sweep", NULL, CLI_LIST, &g_sweep, "KEY=V1,V2,...", "one setting per value (on top of --set)", NULL, 0, 0, NULL},
    {"--capacity", NULL, CLI_SIZE, &g_capacity, "BYTES",
     "what the allocator may reserve (default: what the trace's OOM #1 implies, as `oom`\nnumbers it;\nwithout an OOM, unlimited: no OOM is predicted)",
     NULL, 0, 0, &g_have_capacity},
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "device to replay (default: where the record's first OOM happened, by time\nacross the devices, as `oom` says it, said on stderr with its number; without\ntimes, the lowest device's, said as a pick; else the\nlowest with a block-level trace)", NULL, 0, 0, NULL},
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_whatif = {
    "whatif", "[options] SNAPSHOT",
    "Would another allocator setting have avoided this OOM?  The block requests of a trace\n"
    "(a PyTorch snapshot, or a .cmh with block events) replayed through a model of PyTorch's\n"
    "caching allocator under other settings, beside the record's own figures (peak's) and the\n"
    "recorded settings replayed the same way:\n"
    "peak reserved and allocated, fragmentation at the peak, segment events, and whether and\n"
    "where each would run out of memory at the device's capacity.  Without --set, --conf or\n"
    "--sweep it tries expandable_segments, max_split_size_mb, garbage_collection_threshold and\n"
    "roundup_power2_divisions one at a time.  docs/WHATIF.md: the model and how far to trust it.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist whatif oom.pickle --sweep max_split_size_mb=64,128,256"};

typedef struct trial {
    char label[256];
    cmh_whatif_conf c;
    cmh_whatif_result r;
    int recorded;
} trial;

static int add_trial(trial **t, int *n, int *cap, const char *label, const cmh_whatif_conf *c, int recorded)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        trial *nt = realloc(*t, (size_t)nc * sizeof *nt);
        if (!nt) return CLI_ENOMEM;
        *t = nt;
        *cap = nc;
    }
    trial *x = &(*t)[(*n)++];
    memset(x, 0, sizeof *x);
    x->c = *c;
    x->recorded = recorded;
    cmh_whatif_conf_text(c, x->label, sizeof x->label);
    if (label) snprintf(x->label, sizeof x->label, "%s", label);
    return 0;
}

static int apply_sets(cmh_whatif_conf *c, const cli_list *l)
{
    char err[512];
    for (int i = 0; i < l->n; i++) {
        char kv[512];
        snprintf(kv, sizeof kv, "%s", l->v[i]);
        char *eq = strchr(kv, '=');
        if (!eq) eq = strchr(kv, ':');
        if (!eq) {
            cli_error("whatif: --set %s: not KEY=VALUE", l->v[i]);
            return CLI_EUSAGE;
        }
        *eq = 0;
        if (cmh_whatif_conf_set(c, kv, eq + 1, err, sizeof err) != CMH_OK) {
            cli_error("whatif: %s", err);
            return CLI_EUSAGE;
        }
    }
    return 0;
}

static int g_not_pytorch; /* the trace is another allocator's (a .cmh with block events) */

/* What the record itself shows on the device, as `peak` reports it (cmh_peak_totals), beside
 * the model's rows: the model replays the requests and need not make the same peaks. */
typedef struct recorded_run {
    cmh_peak_report pk;
    double free_at_peak; /* free inside segments / reserved after the allocated peak's entry */
    uint64_t segment_allocs, segment_frees, segment_maps, segment_unmaps;
    uint32_t ooms, retries; /* the OOMs the program saw and the retries, as `oom` counts them */
    uint32_t dropped; /* of ooms, those the ring dropped: the first kept, first_oom_index, is #dropped + 1 */
    int64_t first_oom_index; /* `oom`'s #1 (-1: none) */
    uint64_t first_oom_request;
    /* oom's verdict on #1 (cmh_oom_compute: one verdict in oom, frag and here), -1 when none;
     * where it is another pool's memory: which pool (or stream-ordered pool), how much */
    int verdict;
    uint64_t other_pool[2], other_bytes, cache_pool;
} recorded_run;

static int recorded_of(const cmh_snapshot *s, int dev, recorded_run *out)
{
    memset(out, 0, sizeof *out);
    out->first_oom_index = -1;
    out->verdict = -1;
    int rc = cmh_peak_totals(s, dev, &out->pk);
    if (rc != CMH_OK) return rc;
    const cmh_trace *t = cmh_snapshot_trace(s, dev);
    out->dropped = out->ooms = t && t->dropped_ooms < UINT32_MAX ? (uint32_t)t->dropped_ooms : t ? UINT32_MAX : 0;
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        out->segment_allocs += e->action == CMH_ACT_SEGMENT_ALLOC, out->segment_frees += e->action == CMH_ACT_SEGMENT_FREE;
        out->segment_maps += e->action == CMH_ACT_SEGMENT_MAP, out->segment_unmaps += e->action == CMH_ACT_SEGMENT_UNMAP;
        if (e->action == CMH_ACT_OOM) {
            uint64_t freed;
            if (cmh_oom_retried(s, t, i, &freed)) out->retries++;
            else if (out->ooms++ == out->dropped) out->first_oom_index = i, out->first_oom_request = (uint64_t)cmh_entry_size(s, e);
        }
    }
    if (out->first_oom_index >= 0) { /* what oom says of the first kept: the verdict is computed once, there */
        cmh_oom_report om;
        if ((rc = cmh_oom_compute(s, dev, NULL, &om)) != CMH_OK) {
            cmh_peak_report_free(&out->pk);
            return rc;
        }
        for (uint32_t k = 0; k < om.nevents; k++) {
            const cmh_oom_event *e = &om.events[k];
            if (e->number != out->dropped + 1) continue;
            out->verdict = e->verdict;
            out->other_pool[0] = e->split.top_pool[0], out->other_pool[1] = e->split.top_pool[1];
            out->other_bytes = e->verdict == CMH_OOM_POOL_CACHE ? e->cache_pool_bytes : e->split.top_pool_free;
            out->cache_pool = e->cache_pool;
        }
        cmh_oom_report_free(&om);
    }
    /* reserved at the allocated peak: a replay up to its entry (-1: the state before the first),
     * the moment every row's free share is taken at (a reserved peak's first moment may be long
     * before the program needed it: a trace that begins with its segments made reads 90% free) */
    if (out->pk.alloc_peak > 0) {
        cmh_replay *r = cmh_replay_new(s, dev);
        if (!r) {
            cmh_peak_report_free(&out->pk);
            return CMH_ENOMEM;
        }
        while (cmh_replay_position(r) < out->pk.alloc_index && cmh_replay_step(r) == 1) {}
        const cmh_mem_stats *st = cmh_replay_stats(r);
        int64_t res = st->reserved_bytes[CMH_POOL_ALL].current, al = st->allocated_bytes[CMH_POOL_ALL].current;
        out->free_at_peak = res > 0 && res >= al ? (double)(res - al) / (double)res : 0.0;
        cmh_replay_free(r);
    }
    return CMH_OK;
}

static void print_cells(const char *name, int width, uint64_t reserved, uint64_t allocated, double free_share, uint64_t sa, uint64_t sf,
                        uint64_t sm, uint64_t su)
{
    char segs[64];
    if (sm || su) snprintf(segs, sizeof segs, "%" PRIu64 " maps, %" PRIu64 " unmaps", sm, su);
    else snprintf(segs, sizeof segs, "%" PRIu64 " allocs, %" PRIu64 " frees", sa, sf);
    printf("%-*s %11s %11s %6.1f%%  %-22s ", width, name, rep_size((double)reserved), rep_size((double)allocated), free_share * 100.0, segs);
}

static void print_recorded(const recorded_run *rr, uint64_t capacity, int width)
{
    print_cells(g_not_pytorch ? "recorded (its own allocator)" : "recorded", width, (uint64_t)rr->pk.reserved_peak,
                (uint64_t)rr->pk.alloc_peak, rr->free_at_peak, rr->segment_allocs, rr->segment_frees, rr->segment_maps,
                rr->segment_unmaps);
    if (capacity && rr->pk.reserved_peak > (int64_t)capacity) /* it ran on a larger device: not "no OOM" at this one */
        printf("over it (reserved %s)\n", rep_size((double)rr->pk.reserved_peak));
    else if (rr->ooms && rr->first_oom_index < 0) /* every one fell out of the ring */
        printf("%s, all fallen out of the history\n", rep_count(rr->ooms, "OOM", "OOMs"));
    else if (rr->ooms)
        printf("OOM #%u at entry %" PRId64 " (%s requested%s%s)\n", rr->dropped + 1, rr->first_oom_index, rep_size((double)rr->first_oom_request),
               rr->retries ? "; not counted: " : "", rr->retries ? rep_count(rr->retries, "retry", "retries") : "");
    else if (rr->retries) printf("no OOM the program saw (%s)\n", rep_count(rr->retries, "retry that succeeded", "retries that succeeded"));
    else printf("%s\n", capacity ? "no OOM" : "-");
}

static void print_row(const trial *x, uint64_t capacity, int width)
{
    const cmh_whatif_result *r = &x->r;
    char name[300];
    snprintf(name, sizeof name, "%s%s", x->recorded ? (g_not_pytorch ? "model: its requests, PyTorch's " : "model of the recorded: ") : "",
             x->label[0] ? x->label : x->recorded && g_not_pytorch ? "defaults" : "PyTorch's defaults");
    print_cells(name, width, r->peak_reserved, r->peak_allocated, r->frag_at_peak, r->segment_allocs, r->segment_frees,
                r->segment_maps, r->segment_unmaps);
    if (r->ooms && r->first_oom_number)
        printf("OOM #%u at entry %" PRId64 " (%s requested)\n", r->first_oom_number, r->first_oom_index, rep_size((double)r->first_oom_request));
    else if (r->ooms) printf("OOM at entry %" PRId64 " (%s requested; the program had it met)\n", r->first_oom_index, rep_size((double)r->first_oom_request));
    else printf("%s\n", capacity ? "no OOM" : "-");
}

int cmd_whatif(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_whatif, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    cmh_snapshot s;
    if ((rc = rep_load_view(path, &s))) return rc;
    /* a device the record lacks is a usage error, as for every command (it read 'device 5 has no
     * block-level trace to replay' and exited 5); pinned host memory is no caching allocator's */
    if ((rc = rep_check_device(path, &s, g_device))) {
        cmh_snapshot_free(&s);
        return rc;
    }
    if (g_device == -1) {
        cmh_snapshot_free(&s);
        return rep_no_pinned("whatif", "whatif replays a device's block requests through a model of PyTorch's caching "
                                       "allocator, which does not serve pinned host memory; `cumemhist peak --device -1` "
                                       "and `leaks --device -1` report it");
    }
    /* the device: asked, or the lowest with block events */
    int dev = g_device;
    if (dev == -2 && !rep_oom_device(&s, "whatif", &dev)) { /* the question is about the OOM, when there is one */
        /* the lowest device with block events; the others are said on stderr, as an OOM's
         * device is (a two-device record's whatif showed device 0 and said nothing of device 1) */
        int nblock = 0;
        int32_t seen[64];
        for (uint32_t t = 0; t < s.ntraces; t++)
            for (uint32_t i = 0; i < s.traces[t].nentries; i++)
                if (s.entries[s.traces[t].first_entry + i].action == CMH_ACT_ALLOC) {
                    int32_t d = s.traces[t].device;
                    if (dev == -2 || d < dev) dev = d;
                    int k = 0;
                    while (k < nblock && seen[k] != d) k++;
                    if (k == nblock && nblock < 64) seen[nblock++] = d;
                    break;
                }
        if (nblock > 1)
            fprintf(stderr, "cumemhist: whatif: device %d, the lowest of the %d devices with a block-level trace (--device N for another)\n",
                    dev, nblock);
        if (dev == -2) {
            if (s.source == CMH_SRC_PYTORCH && !s.ntraces && (s.pt_fields & (CMH_PT_LEGACY_HISTORY | CMH_PT_BARE_SEGMENTS)))
                cli_error("whatif: %s has no block-level trace to replay (%s)", path, /* (1.13: segments alone) */
                          cmh_no_history_cause(&s, s.nsegments ? s.segments[0].device : 0));
            else if (s.source == CMH_SRC_PYTORCH)
                cli_error("whatif: %s has no block-level trace to replay (no 'alloc' events: recorded with "
                          "_record_memory_history(enabled='state'), or before any allocation)", path);
            else if (s.opt_enabled == CMH_ENABLED_STATE) /* no entries at all: not the driver's alone */
                cli_error("whatif: %s has no block-level trace to replay (no history: %s; only the state at the end, and "
                          "the OOMs counted, `cumemhist oom` says how many)", path, cmh_no_history_cause(&s, 0));
            else
                cli_error("whatif: %s has no block-level trace to replay (no 'alloc' events: a recording of the driver alone, "
                          "with no allocator above it reporting blocks)", path);
            cmh_snapshot_free(&s);
            return CLI_EUNJUDGED; /* read whole: the question cannot be asked of it */
        }
    }
    cmh_replay_memo_begin(&s); /* every trial seeds its model from the same state before the trace */
    cmh_whatif_conf rec;
    cmh_whatif_conf_recorded(&s, &rec);
    g_not_pytorch = s.source != CMH_SRC_PYTORCH;
    uint64_t capacity = g_have_capacity ? g_capacity : cmh_whatif_capacity(&s, dev);
    trial *t = NULL;
    int nt = 0, ct = 0;
    rc = add_trial(&t, &nt, &ct, NULL, &rec, 1);
    cmh_whatif_conf base = rec;
    if (!rc) rc = apply_sets(&base, &g_set);
    if (!rc && g_set.n && !g_sweep.n) rc = add_trial(&t, &nt, &ct, NULL, &base, 0);
    for (int i = 0; !rc && i < g_conf.n; i++) {
        cmh_whatif_conf c = rec;
        char err[512];
        if (cmh_whatif_conf_parse(&c, g_conf.v[i], err, sizeof err) != CMH_OK) {
            cli_error("whatif: --conf %s: %s", g_conf.v[i], err);
            rc = CLI_EUSAGE;
        } else {
            rc = add_trial(&t, &nt, &ct, NULL, &c, 0);
        }
    }
    for (int i = 0; !rc && i < g_sweep.n; i++) {
        char kv[1024];
        snprintf(kv, sizeof kv, "%s", g_sweep.v[i]);
        char *eq = strchr(kv, '=');
        if (!eq) {
            cli_error("whatif: --sweep %s: not KEY=V1,V2,...", g_sweep.v[i]);
            rc = CLI_EUSAGE;
            break;
        }
        *eq = 0;
        for (char *v = strtok(eq + 1, ","); v && !rc; v = strtok(NULL, ",")) {
            cmh_whatif_conf c = base;
            char err[512];
            if (cmh_whatif_conf_set(&c, kv, v, err, sizeof err) != CMH_OK) {
                cli_error("whatif: --sweep: %s", err);
                rc = CLI_EUSAGE;
            } else {
                rc = add_trial(&t, &nt, &ct, NULL, &c, 0);
            }
        }
    }
    if (!rc && nt == 1) { /* the usual suspects, one at a time */
        for (size_t i = 0; !rc && i < CMH_WHATIF_NPANEL; i++) {
            cmh_whatif_conf c = rec;
            char err[512];
            if (cmh_whatif_conf_parse(&c, cmh_whatif_panel[i], err, sizeof err) == CMH_OK && memcmp(&c, &rec, sizeof c))
                rc = add_trial(&t, &nt, &ct, NULL, &c, 0);
        }
    }
    /* the self-replay check holds the recorded settings to the recording's own capacity: at
     * another (--capacity) the trace's OOM and its retries are not what the model should make */
    uint64_t own = cmh_whatif_capacity(&s, dev);
    recorded_run rr;
    int rrc = rc ? CMH_EINVAL : recorded_of(&s, dev, &rr), have_rr = rrc == CMH_OK;
    if (!rc && rrc == CMH_ENOMEM) rc = CLI_ENOMEM;
    else if (!rc && rrc != CMH_OK) rc = cli_fail(path, rrc);
    for (int i = 0; !rc && i < nt; i++) {
        int wrc = cmh_whatif_run(&s, dev, &t[i].c, capacity, t[i].recorded && capacity == own, &t[i].r);
        if (wrc == CMH_ENOMEM) rc = CLI_ENOMEM;
        else if (wrc != CMH_OK) {
            /* why, as for a record with no block events at all (an OOM's device was taken: a driver-level
             * record's OOM read 'device 0 has no block-level trace to replay' and no more) */
            if (s.source == CMH_SRC_PYTORCH)
                cli_error("whatif: %s: device %d has no block-level trace to replay (no 'alloc' events: recorded with "
                          "_record_memory_history(enabled='state'), or before any allocation)", path, dev);
            else
                cli_error("whatif: %s: device %d has no block-level trace to replay (no 'alloc' events: a recording of the "
                          "driver alone, with no allocator above it reporting blocks; `cumemhist oom` judges the OOM "
                          "from the driver's figures)", path, dev);
            rc = CLI_EUNJUDGED;
        }
    }
    cmh_whatif_result self;
    memset(&self, 0, sizeof self);
    if (!rc && nt) {
        self = t[0].r;
        if (capacity != own && cmh_whatif_run(&s, dev, &t[0].c, own, 1, &self) == CMH_ENOMEM) rc = CLI_ENOMEM;
    }
    if (!rc && g_json) {
        cmh_jw w;
        cmh_jw_init(&w, stdout);
        cmh_jw_obj(&w);
        cmh_jw_kstr(&w, "file", path);
        cmh_jw_kint(&w, "device", dev);
        cmh_jw_kuint(&w, "capacity", capacity);
        cmh_whatif_cap k;
        cmh_whatif_capacity_ex(&s, dev, &k);
        cmh_jw_kstr(&w, "capacity_from", g_have_capacity ? "--capacity" : !capacity ? "none" : k.total && k.capacity == k.total ? "device_total" : "oom");
        if (capacity && !g_have_capacity) { /* what the device held at OOM #1, which the capacity is made of */
            cmh_jw_key(&w, "capacity_at_oom");
            cmh_jw_obj(&w);
            cmh_jw_kuint(&w, "plain_driver", k.whole);
            cmh_jw_kuint(&w, "allocator", k.reserved);
            if (k.free_known) cmh_jw_kuint(&w, "free", k.free);
            else cmh_jw_key(&w, "free"), cmh_jw_null(&w);
            cmh_jw_kuint(&w, "not_recorded", k.outside);
            cmh_jw_kuint(&w, "model_reserved", k.model); /* the model's of the recorded settings, apart */
            cmh_jw_kbool(&w, "model_over_capacity", k.model_over);
            cmh_jw_end(&w);
        }
        /* the record itself (peak's figures); "settings" are the model's, the recorded settings first */
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "record");
        cmh_jw_obj(&w);
        cmh_jw_kint(&w, "peak_reserved", rr.pk.reserved_peak);
        cmh_jw_kint(&w, "peak_reserved_index", rr.pk.reserved_index);
        cmh_jw_kint(&w, "peak_allocated", rr.pk.alloc_peak);
        cmh_jw_kint(&w, "peak_allocated_index", rr.pk.alloc_index);
        cmh_jw_key(&w, "free_share_at_peak");
        cmh_jw_double(&w, rr.free_at_peak, 4);
        cmh_jw_kuint(&w, "segment_allocs", rr.segment_allocs);
        cmh_jw_kuint(&w, "segment_frees", rr.segment_frees);
        cmh_jw_kuint(&w, "segment_maps", rr.segment_maps);
        cmh_jw_kuint(&w, "segment_unmaps", rr.segment_unmaps);
        cmh_jw_kuint(&w, "ooms", rr.ooms); /* as `oom` counts them (num_ooms, num_alloc_retries) */
        cmh_jw_kuint(&w, "oom_retries", rr.retries);
        /* the model's count (cmh_whatif_result: which pool as every writer names it), the same in every trial */
        cmh_jw_kuint(&w, "private_pool_requests", nt ? t[0].r.private_requests : 0);
        if (rr.first_oom_index >= 0)
            cmh_jw_kint(&w, "first_oom_index", rr.first_oom_index), cmh_jw_kuint(&w, "first_oom_number", rr.dropped + 1),
                cmh_jw_kuint(&w, "first_oom_requested", rr.first_oom_request);
        if (rr.verdict >= 0) cmh_jw_kstr(&w, "first_oom_verdict", cmh_oom_verdict_name(rr.verdict)); /* as oom --json says */
        cmh_jw_kbool(&w, "model_peaks_match", nt && (int64_t)t[0].r.peak_reserved == rr.pk.reserved_peak &&
                                                   (int64_t)t[0].r.peak_allocated == rr.pk.alloc_peak);
        cmh_jw_end(&w);
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "settings");
        cmh_jw_arr(&w);
        for (int i = 0; i < nt; i++) {
            const cmh_whatif_result *r = &t[i].r;
            cmh_jw_nl(&w);
            cmh_jw_obj(&w);
            cmh_jw_kstr(&w, "setting", t[i].label);
            cmh_jw_kbool(&w, "recorded", t[i].recorded);
            cmh_jw_kuint(&w, "peak_reserved", r->peak_reserved);
            cmh_jw_kuint(&w, "peak_allocated", r->peak_allocated);
            cmh_jw_key(&w, "free_share_at_peak"); /* free inside segments / reserved: not fragmentation (DEFINITIONS.md) */
            cmh_jw_double(&w, r->frag_at_peak, 4);
            cmh_jw_kuint(&w, "segment_allocs", r->segment_allocs);
            cmh_jw_kuint(&w, "segment_frees", r->segment_frees);
            cmh_jw_kuint(&w, "segment_maps", r->segment_maps);
            cmh_jw_kuint(&w, "segment_unmaps", r->segment_unmaps);
            cmh_jw_kuint(&w, "ooms", r->ooms);
            if (r->ooms) {
                cmh_jw_kint(&w, "first_oom_index", r->first_oom_index);
                cmh_jw_key(&w, "first_oom_number"); /* `oom`'s number for it; null: the program had it met */
                if (r->first_oom_number) cmh_jw_uint(&w, r->first_oom_number);
                else cmh_jw_null(&w);
                rep_json_time(&w, "first_oom_time_ns", r->first_oom_time_ns);
                cmh_jw_kuint(&w, "first_oom_requested", r->first_oom_request);
            }
            cmh_jw_kuint(&w, "requests", r->requests);
            cmh_jw_kuint(&w, "unknown_frees", r->unknown_frees);
            cmh_jw_kuint(&w, "unmade_frees", r->unmade_frees); /* of blocks the model ran out making */
            int64_t rec_at; /* its first OOM against the record's OOM #1 (cmh_whatif_oom_match: one answer, as oom's) */
            cmh_jw_kstr(&w, "oom_against_record", cmh_whatif_oom_match_name(cmh_whatif_oom_match(&s, dev, r, &rec_at)));
            cmh_jw_kuint(&w, "empty_cache_calls", r->empty_cache_calls);
            if (t[i].recorded) { /* at the recording's own capacity */
                cmh_jw_kuint(&w, "self_replay_mismatches", self.self_replay_mismatches);
                cmh_jw_kuint(&w, "recorded_segment_events", self.recorded_segment_events);
                if (self.self_replay_mismatches) cmh_jw_kstr(&w, "first_mismatch", self.first_mismatch);
            }
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
        cmh_jw_end(&w);
        putchar('\n');
    } else if (!rc) {
        const cmh_whatif_result *r0 = &t[0].r;
        printf("%s, device %d: %" PRIu64 " requests replayed; capacity %s\n", path, dev, r0->requests,
               capacity ? rep_size((double)capacity) : "unlimited (no OOM in the trace; --capacity BYTES to set one)");
        if (capacity && !g_have_capacity) {
            cmh_whatif_cap k;
            cmh_whatif_capacity_ex(&s, dev, &k);
            char parts[256] = "";
            if (k.whole) { /* never below what the device held: its plain driver allocations too (it said 648 MiB of a 16 GiB device) */
                char a[32];
                snprintf(a, sizeof a, "%s", rep_size((double)k.whole));
                snprintf(parts, sizeof parts, " (%s of it plain driver allocations, which the model leaves in place, %s its allocator's)", a,
                         rep_size((double)k.reserved));
            }
            if (k.total && k.capacity == k.total)
                printf("  (the device's total memory, as the record's cuMemGetInfo says; at the trace's OOM #%u, as `oom` numbers it: "
                       "reserved %s%s, %s free%s%s)\n", rr.dropped + 1,
                       rep_size((double)(k.whole + k.reserved)), parts, k.free_known ? rep_size((double)k.free) : "not known",
                       k.outside ? ", the rest held by nothing recorded (the CUDA context, other processes): " : "",
                       k.outside ? rep_size((double)k.outside) : "");
            else
                printf("  (the trace's OOM #%u, as `oom` numbers it: reserved then%s%s)\n", rr.dropped + 1, parts,
                       !k.free_known ? "; it reported no free memory (not known), so the device may have had more"
                                     : " plus the free memory it reported");
            if (k.model_over) /* the capacity is the record's; the model's replay that passes it is a mismatch, said */
                printf("  the model of the recorded settings reserves %s by then where the record had %s: more than the\n"
                       "  device held, so it runs out before the program did (a mismatch of the model, not of the device)\n",
                       rep_size((double)k.model), rep_size((double)k.reserved));
        }
        int width = 30;
        for (int i = 0; i < nt; i++) {
            int l = (int)strlen(t[i].label[0] ? t[i].label : "PyTorch's defaults") + (t[i].recorded ? 32 : 0);
            if (l > width) width = l;
        }
        printf("\n%-*s %11s %11s %7s  %-22s %s\n", width, "setting", "peak resv", "peak alloc", "free", "segments", "at the capacity");
        print_recorded(&rr, capacity, width);
        for (int i = 0; i < nt; i++) print_row(&t[i], capacity, width);
        if ((int64_t)r0->peak_reserved != rr.pk.reserved_peak || (int64_t)r0->peak_allocated != rr.pk.alloc_peak)
            printf("\nthe model %s peaks at %s reserved, %s allocated; the record at %s, %s (as `peak` says):\n"
                   "  read the other settings against the model's row, not the record's\n",
                   g_not_pytorch ? "(PyTorch's allocator serving these requests)" : "of the recorded settings",
                   rep_size((double)r0->peak_reserved), rep_size((double)r0->peak_allocated), rep_size((double)rr.pk.reserved_peak),
                   rep_size((double)rr.pk.alloc_peak));
        if (rr.verdict == CMH_OOM_PRIVATE_POOL && rr.other_bytes)
            printf("\nOOM #%u, as `oom` judges it: held by a private pool: %s free in pool (%" PRIu64 ", %" PRIu64 "), another pool's\n"
                   "  memory, which no allocator setting gives this request: free that graph or MemPool (cumemhist oom)\n",
                   rr.dropped + 1, rep_size((double)rr.other_bytes), rr.other_pool[0], rr.other_pool[1]);
        else if (rr.verdict == CMH_OOM_POOL_CACHE)
            printf("\nOOM #%u, as `oom` judges it: held in a stream-ordered pool's cache: %s kept by pool 0x%" PRIx64 ", which no\n"
                   "  allocator setting gives this request: trim the pool (cuMemPoolTrimTo) (cumemhist oom)\n",
                   rr.dropped + 1, rep_size((double)rr.other_bytes), rr.cache_pool);
        else if (rr.verdict >= 0)
            printf("\nOOM #%u, as `oom` judges it: %s\n", rr.dropped + 1, cmh_oom_verdict_name(rr.verdict));
        if (r0->private_requests)
            printf("\n%" PRIu64 " of the %" PRIu64 " requests (%s) were served in a private pool (pool_id not (0, 0): a CUDA graph's\n"
                   "  or a MemPool's); the model serves each from its own pool's segments, which no other pool's request reuses\n",
                   r0->private_requests, r0->requests, rep_size((double)r0->private_bytes));
        if (g_not_pytorch)
            printf("\n(a recording of another allocator: its block requests, replayed as PyTorch's allocator would serve them)");
        printf("\nself-replay of the recorded settings%s: ", capacity != own ? " (at the recording's own capacity)" : "");
        r0 = &self;
        if (!r0->self_replay_mismatches)
            printf("the model made the trace's %" PRIu64 " segment events, in order\n", r0->recorded_segment_events);
        else {
            printf("%" PRIu64 " differences between the trace's %" PRIu64 " segment events and the model's %" PRIu64 " (first: %s)",
                   r0->self_replay_mismatches, r0->recorded_segment_events,
                   r0->segment_allocs + r0->segment_frees + r0->segment_maps + r0->segment_unmaps, r0->first_mismatch);
            const cmh_trace *tr = cmh_snapshot_trace(&s, dev);
            if (r0->unknown_frees || (tr && tr->dropped))
                printf(";\n  the trace begins after the process had allocated: %" PRIu64 " frees of blocks it never shows%s",
                       r0->unknown_frees, tr && tr->dropped ? ", entries dropped by the ring" : "");
            /* frees of blocks the model ran out making are no sign of a trace begun late: said as
             * what they are (they read '1 frees of blocks it never shows' beside a complete trace) */
            if (r0->unmade_frees)
                printf(";\n  the model ran out at requests the program was given (its first OOM: entry %" PRId64 ", %s requested):\n"
                       "  %s it could not make",
                       r0->first_oom_index, rep_size((double)r0->first_oom_request),
                       rep_count(r0->unmade_frees, "free of a block", "frees of blocks"));
            putchar('\n');
        }
        if (r0->empty_cache_calls)
            printf("the trace shows %u empty_cache() (or OOM retries): every setting replays them where they were\n",
                   r0->empty_cache_calls);
    }
    free(t);
    if (have_rr) cmh_peak_report_free(&rr.pk);
    cmh_replay_memo_end(&s);
    cmh_snapshot_free(&s);
    return rc ? rc : cli_finish_stdout(0);
}
