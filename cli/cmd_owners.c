/*
 * cmd_owners.c - `cumemhist owners`: who holds every byte of each device, at the end, at the
 * peak and at each out-of-memory error (cumemhist/owners.h).
 */
#include <stdio.h>
#include <string.h>

#include "cumemhist/ownerwords.h"
#include "cumemhist/owners.h"
#include "report.h"

static int g_device = -2, g_json;

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "only device N (default: every device in the snapshot)", NULL, 0, 0, NULL},
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_owners = {
    "owners", "[options] SNAPSHOT",
    "Who holds every byte of each device, at the end of the record, at the peak of recorded\n"
    "device memory (the reserved peak, `peak`'s \"peak reserved\"; or its \"peak physical\" where\n"
    "cuMemCreate handles held unmapped put the device's peak elsewhere; it says where the other\n"
    "peaks are) and at each out-of-memory error: PyTorch's allocated and cached memory (from\n"
    "PyTorch's part of a merged or co-recorded snapshot), blocks freed whose stream work is\n"
    "still pending (neither in use nor cached), each library that called the driver\n"
    "itself (cuBLAS, cuDNN, NCCL, ...), the program's own allocations (a cuMemCreate handle\n"
    "counted whole and once, however many ranges map it and however much of it), managed\n"
    "memory (its own row: the driver counts its pages only where they are on the device),\n"
    "physical memory made with cuMemCreate and mapped nowhere at the end, and what no recorded\n"
    "allocation explains (cuMemGetInfo's used bytes minus everything recorded: the CUDA context,\n"
    "other processes).  The rows sum to the device's used memory when the record has a\n"
    "cuMemGetInfo sample, else to what was recorded.  Pinned host memory is on its own line.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist owners merged.cmh"};

static const char *const g_kinds[] = {"torch_allocated", "torch_cached", "torch_reserved", "library", "program", "unknown", "unexplained",
                                      "pending_free", "vmm_unmapped", "pool_cache", "managed"}; /* the cmh_owner_kind order */

static void json_moment(cmh_jw *w, const cmh_owners_report *p, const cmh_owners_moment *m, int64_t t0)
{
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "moment", m->what);
    cmh_jw_key(w, "index"); /* null where the device has no trace entry, as the text names none */
    if (m->index >= 0 || !strcmp(m->what, "peak")) cmh_jw_int(w, m->index); /* the peak: -1 before the first entry, as peak --json */
    else cmh_jw_null(w);
    /* the entry's time, as the text's "(entry N, +T)"; the dump's apart where the moment stands at it */
    int64_t et = m->index >= 0 ? m->entry_time_ns : m->time_ns;
    rep_json_time(w, "time_ns", et);
    if (et && t0) cmh_jw_kdouble(w, "seconds", (double)(et - t0) / 1e9, 6);
    else cmh_jw_key(w, "seconds"), cmh_jw_null(w); /* an untimed record: null, as every time is */
    if (m->index >= 0 && m->time_ns && m->entry_time_ns && m->time_ns != m->entry_time_ns) {
        rep_json_time(w, "dump_time_ns", m->time_ns);
        if (t0) cmh_jw_kdouble(w, "dump_seconds", (double)(m->time_ns - t0) / 1e9, 6);
    }
    if (!strcmp(m->what, "peak")) { /* which peak: the reserved one, as `peak` names it; and the allocated one */
        cmh_jw_kstr(w, "peak_of", p->peak_physical ? "physical" : "reserved");
        cmh_jw_key(w, "reserved_peak"); /* reserved's own, where the physical peak is elsewhere (null: here) */
        if (p->peak_physical) {
            cmh_jw_obj(w);
            cmh_jw_kint(w, "index", p->reserved_peak_index);
            rep_json_time(w, "time_ns", p->reserved_peak_time_ns);
            cmh_jw_kint(w, "bytes", p->reserved_peak);
            cmh_jw_end(w);
        } else cmh_jw_null(w);
        cmh_jw_key(w, "allocated_peak");
        if (p->alloc_peak_known) {
            cmh_jw_obj(w);
            cmh_jw_kint(w, "index", p->alloc_peak_index);
            rep_json_time(w, "time_ns", p->alloc_peak_time_ns);
            if (p->alloc_peak_time_ns && t0) cmh_jw_kdouble(w, "seconds", (double)(p->alloc_peak_time_ns - t0) / 1e9, 6);
            else cmh_jw_key(w, "seconds"), cmh_jw_null(w);
            cmh_jw_kint(w, "bytes", p->alloc_peak);
            cmh_jw_end(w);
        } else cmh_jw_null(w); /* (a merged record: `peak --json`'s peak_allocated) */
    }
    cmh_jw_kuint(w, "recorded", m->recorded);
    cmh_jw_kuint(w, "managed_made", m->managed_made); /* (the managed row holds what of it the sample leaves room for) */
    cmh_jw_key(w, "used");
    if (m->used_known) cmh_jw_uint(w, m->used);
    else cmh_jw_null(w);
    cmh_jw_key(w, "total");
    if (m->used_known) cmh_jw_uint(w, m->total);
    else cmh_jw_null(w);
    if (m->used_known) {
        rep_json_time(w, "sample_time_ns", m->sample_time_ns);
        cmh_jw_kbool(w, "sample_exact", m->sample_exact);
        cmh_jw_kbool(w, "sample_low_end", m->sample_low_end);
        cmh_jw_kuint(w, "in_flight", m->in_flight);
        char note[256];
        cmh_jw_kstr(w, "note", cmh_owners_unexplained_note(m, t0, note, sizeof note)); /* the text's words */
    }
    cmh_jw_nl(w);
    cmh_jw_key(w, "rows");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < m->nrows; i++) {
        const cmh_owner_row *r = &m->rows[i];
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "owner", r->name);
        cmh_jw_kstr(w, "kind", g_kinds[r->kind]);
        cmh_jw_kuint(w, "bytes", r->bytes);
        cmh_jw_kuint(w, "allocations", r->allocations);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_end(w);
}

static void text_moment(const rep_section *sec, const cmh_owners_report *p, const cmh_owners_moment *m, int64_t t0)
{
    uint64_t sum = m->used_known ? m->used : m->recorded;
    /* a device with no trace entry has no entry to name ('at the end (entry -1)') */
    /* "(entry N, +T)" is entry N's time, as everywhere; the dump's, where the moment stands at it, apart */
    char dumped[64] = "";
    if (m->time_ns && t0 && m->entry_time_ns && m->time_ns != m->entry_time_ns) { /* (said where it reads otherwise) */
        char et[32];
        snprintf(et, sizeof et, "%s", rep_when(m->entry_time_ns, t0));
        if (strcmp(et, rep_when(m->time_ns, t0))) snprintf(dumped, sizeof dumped, "; dumped at %s", rep_when(m->time_ns, t0));
    }
    printf("\n%s, %s, %s (%s%s): %s", sec->path, rep_device_name(sec->device), cmh_owners_moment_name(m),
           m->index >= 0 ? rep_at(m->index, m->entry_time_ns, t0) : strcmp(m->what, "peak") ? "no trace entries" : "before the first entry",
           m->index >= 0 ? dumped : "", rep_size((double)m->recorded));
    printf(" recorded");
    if (m->used_known) printf("; the device had %s of %s in use", rep_size((double)m->used), rep_size((double)m->total));
    if (m->used_known && m->used > m->total) /* (managed memory can oversubscribe; anything else is a wrong figure) */
        printf(" (more than the device has: managed memory past it, or a figure that cannot be)");
    char which[256]; /* which peak (`peak` gives two): the reserved one, and where allocated peaked */
    if (*cmh_owners_peak_words(p, m, t0, which, sizeof which)) printf("\n(%s)", which);
    printf("\n%14s  %6s  %6s  %s\n", "bytes", "share", "allocs", "owner");
    for (uint32_t i = 0; i < m->nrows; i++) {
        const cmh_owner_row *r = &m->rows[i];
        char n[16] = "-";
        if (r->allocations) snprintf(n, sizeof n, "%u", r->allocations);
        printf("%14s  %5.1f%%  %6s  %s", rep_size((double)r->bytes), sum ? 100.0 * (double)r->bytes / (double)sum : 0.0, n, r->name);
        char note[256]; /* (the HTML report's words too: cumemhist/ownerwords.h) */
        if (r->kind == CMH_OWN_UNEXPLAINED && *cmh_owners_unexplained_note(m, t0, note, sizeof note)) printf("  %s", note);
        putchar('\n');
    }
    printf("%14s  %5.1f%%  %6s  %s\n", rep_size((double)sum), sum ? 100.0 : 0.0, "", m->used_known       ? "total = the device's used memory"
           : p->outside_samples ? "total recorded (no cuMemGetInfo sample the kept entries place: the device's used memory is not known)"
                                : "total recorded (no cuMemGetInfo sample: nothing says what the record misses)");
    if (m->managed_made) { /* the driver counts managed pages only where they are on the device */
        uint64_t counted = 0;
        for (uint32_t i = 0; i < m->nrows; i++)
            if (m->rows[i].kind == CMH_OWN_MANAGED) counted += m->rows[i].bytes;
        printf("  (managed memory: %s made with cuMemAllocManaged; the driver counts its pages as used only where they are on the device",
               rep_size((double)m->managed_made));
        if (m->used_known) printf(", so %s of it at most here, the rest off the device)\n", rep_size((double)counted));
        else printf(": no cuMemGetInfo sample says how much of it was)\n");
    }
}

/* A merged record's allocated peak as `peak` finds it: on its one model (cmh_merged_view, the
 * record read again), which owners, working on the two parts, does not replay. */
static int merged_alloc_peak(const rep_section *sec, cmh_owners_report *p)
{
    cmh_snapshot v;
    if (rep_load_view(sec->path, &v)) return CMH_EIO;
    cmh_peak_report pk;
    int rc = cmh_peak_totals(&v, sec->device, &pk);
    if (rc == CMH_OK) cmh_owners_set_alloc_peak(p, pk.alloc_peak, pk.alloc_index, pk.alloc_time_ns);
    cmh_peak_report_free(&pk);
    cmh_snapshot_free(&v);
    return rc;
}

static int section(const rep_section *sec, void *arg)
{
    (void)arg;
    if (sec->device < 0) return CMH_OK; /* pinned host memory: a line of every device's report */
    cmh_owners_report p;
    int rc = cmh_owners_compute(sec->s, sec->device, &p);
    if (rc != CMH_OK) return rc;
    int has_peak = 0;
    for (uint32_t i = 0; i < p.nmoments; i++) has_peak |= !strcmp(p.moments[i].what, "peak");
    if (has_peak && !p.alloc_peak_known && sec->s->torch && (rc = merged_alloc_peak(sec, &p)) != CMH_OK) {
        cmh_owners_report_free(&p);
        return rc;
    }
    int64_t t0 = rep_trace_start(sec->s, sec->device);
    if (sec->w) {
        cmh_jw *w = sec->w;
        const cmh_trace *dt = cmh_snapshot_trace(sec->s, sec->device); /* (dropped_entries said 0 of a ring that dropped) */
        cmh_report_base b = {.device = sec->device, .entries = p.entries, .dropped = dt ? dt->dropped : 0,
                             .dropped_ooms = dt ? dt->dropped_ooms : 0, .pytorch = sec->s->source == CMH_SRC_PYTORCH, .history = 1};
        cmh_jw_obj(w);
        rep_json_base(w, sec, &b);
        cmh_jw_kbool(w, "pytorch_part", p.torch);
        cmh_jw_kuint(w, "pinned_host", p.pinned_host);
        cmh_jw_kuint(w, "impossible_samples", p.bad_samples);
        cmh_jw_kuint(w, "samples_before_kept_entries", p.outside_samples);
        if (p.torch && sec->s->source != CMH_SRC_PYTORCH) cmh_jw_kuint(w, "pytorch_mismatch", p.torch_mismatch);
        rep_json_not_recorded(w, &p, t0);
        rep_json_reconciled(w, p.reconciled ? p.trace_peak : -1, p.end_reserved);
        cmh_jw_nl(w);
        cmh_jw_key(w, "moments");
        cmh_jw_arr(w);
        for (uint32_t i = 0; i < p.nmoments; i++) {
            cmh_jw_nl(w);
            json_moment(w, &p, &p.moments[i], t0);
        }
        cmh_jw_end(w);
        cmh_jw_end(w);
    } else {
        for (uint32_t i = 0; i < p.nmoments; i++) text_moment(sec, &p, &p.moments[i], t0);
        char line[512];
        if (rep_not_recorded_line(&p, t0, line, sizeof line)) printf("%s\n", line); /* (peak prints the same) */
        if (p.reconciled && rep_reconciled_line(p.trace_peak, p.end_reserved, line, sizeof line)) printf("%s\n", line);
        if (p.bad_samples)
            printf("note: %u cuMemGetInfo sample%s of this device cannot be (the first, at %s: %s free of %s total) and %s left out\n",
                   p.bad_samples, p.bad_samples > 1 ? "s" : "", rep_when(p.bad_sample.time_ns, t0), rep_size((double)p.bad_sample.free),
                   rep_size((double)p.bad_sample.total), p.bad_samples > 1 ? "are" : "is");
        if (p.outside_samples)
            printf("note: %u cuMemGetInfo sample%s of this device (the first at %s: %s in use) %s taken before the first entry the ring "
                   "kept, and the ring dropped entries: what the record held then is not known, so %s left out\n",
                   p.outside_samples, p.outside_samples > 1 ? "s" : "", rep_when(p.outside_sample.time_ns, t0),
                   rep_size((double)(p.outside_sample.total - p.outside_sample.free)), p.outside_samples > 1 ? "were" : "was",
                   p.outside_samples > 1 ? "they are" : "it is");
        printf("pinned host memory (all devices, at the end): %s\n", rep_size((double)p.pinned_host));
        if (!p.torch && sec->s->source != CMH_SRC_PYTORCH)
            printf("(no PyTorch part: record with `cumemhist record` on a PyTorch job, or `cumemhist merge` its "
                   "_dump_snapshot(), to split PyTorch's memory into allocated and cached)\n");
        if (p.torch && p.torch_mismatch)
            printf("note: PyTorch's reserved memory and its segments as the driver saw them differ by %s at the end\n",
                   rep_size((double)p.torch_mismatch));
        if (sec->index + 1 == sec->ndevices) rep_driver_errors_note(sec->s); /* calls the driver refused: summary's note */
    }
    cmh_owners_report_free(&p);
    return CMH_OK;
}

int cmd_owners(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_owners, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    /* owners splits a device's memory against cuMemGetInfo; pinned host memory is one line of
     * each device's report (it printed the header alone, and --json '[]', exit 0) */
    if (g_device == -1)
        return rep_no_pinned("owners", "owners splits a device's memory by holder against cuMemGetInfo; pinned host "
                                       "memory is a line of every device's report ('pinned host memory (all devices, at "
                                       "the end)'), and `cumemhist leaks --device -1` or `peak --device -1` name who "
                                       "holds it, by site and owner");
    return rep_run(&path, 1, g_device, g_json, REP_NO_HOST, section, NULL);
}
