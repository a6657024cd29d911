/*
 * cmd_trace.c - `cumemhist trace`: the `trace` text of PyTorch's torch/cuda/_memory_viz.py, for
 * any snapshot (a recorder's is read in the shape its memory_viz export has), or the entries as
 * JSON.
 */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"

static int g_device = -2, g_json, g_quiet;

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "only device N's trace (default: every device)", NULL, 0, 0, NULL},
    CLI_OPT_JSON(&g_json),
    {"--quiet", "-q", CLI_FLAG, &g_quiet, NULL, "no note on stderr on how the text's entry numbers map to the record's", NULL, 0, 0, NULL},
    {"--raw-frames", NULL, CLI_FLAG, &rep_raw_frames, NULL,
     "a recorder's frames as recorded (export --raw-frames's text): without it they\n"
     "read as the export writes them (file:line from DWARF where the binaries are here)",
     NULL, 0, 0, NULL},
};

const cli_command cli_cmd_trace = {
    "trace", "[options] SNAPSHOT",
    "PyTorch's `python _memory_viz.py trace`: each device's trace as pseudo-code\n"
    "(a = cudaMalloc(...), b = a[offset:size], del b, ...).  Same text as PyTorch's on the same\n"
    "snapshot, except that TOTAL MEM is the bytes still allocated at the end of the trace; a\n"
    "recorder snapshot reads as its memory_viz export (cumemhist export), so its 'N entries'\n"
    "counts memory_viz's entries: where they are not the record's, a note on stderr says how\n"
    "they map in one line (-q: none; the record's own numbering, which every other command\n"
    "uses, is --json's; docs/CLI.md \"Entry numbers\"); and its frames are the export's\n"
    "(a frame recorded without a line gets its file:line from its binary's DWARF where that\n"
    "binary is on this machine; --raw-frames: as recorded).  An entry of an action this\n"
    "version does not know (a newer PyTorch's) prints as its dict, in its place, as the\n"
    "script prints it.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist trace dump_snapshot.pickle | less"};

static int section(const rep_section *sec, void *arg)
{
    (void)arg;
    const cmh_snapshot *s = sec->s;
    cmh_jw *w = sec->w;
    const cmh_trace *t = cmh_snapshot_trace(s, sec->device);
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "file", sec->path);
    cmh_jw_kint(w, "device", sec->device);
    rep_json_process(w, s);
    cmh_jw_kuint(w, "dropped_entries", t ? t->dropped : 0);
    cmh_peak_report p; /* where the entries' end is not the snapshot's (peak's and summary's figures) */
    int rc = cmh_peak_totals(s, sec->device, &p);
    if (rc != CMH_OK) return rc;
    rep_json_gap(w, &p.base);
    cmh_peak_report_free(&p);
    cmh_jw_nl(w);
    cmh_jw_key(w, "entries");
    cmh_jw_arr(w);
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "action", cmh_action_name(e->action));
        cmh_jw_kuint(w, "addr", cmh_entry_addr(s, e));
        cmh_jw_kuint(w, "size", cmh_entry_size(s, e));
        cmh_jw_kuint(w, "requested", cmh_entry_requested(s, e));
        cmh_jw_kuint(w, "stream", cmh_entry_stream(s, e));
        rep_json_time(w, "time_ns", cmh_entry_time(s, e));
        if (e->action == CMH_ACT_MARK) cmh_jw_kstr(w, "name", cmh_str(s, cmh_entry_name(s, e)));
        /* the user's frame, as every text report names the entry (the interpreter's and the
         * framework's frames passed over); frames keeps the whole stack */
        const cmh_frame *site = sec->g && e->stack ? cmh_sites_site_of(sec->g, e->stack) : NULL;
        cmh_jw_key(w, "site");
        if (site) rep_json_frame(w, s, site);
        else cmh_jw_null(w);
        cmh_jw_key(w, "frames");
        cmh_jw_arr(w);
        const cmh_stack *st = &s->stacks[e->stack < s->nstacks ? e->stack : 0];
        for (uint32_t k = 0; k < st->count; k++) rep_json_frame(w, s, &s->frames[s->stack_frames[st->first + k]]);
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_nl(w);
    rep_json_driver_errors(w, s); /* calls the driver refused: no entry shows them (the process's, in every device's object) */
    cmh_jw_end(w);
    return CMH_OK;
}

/* The text is memory_viz's to the byte: where the trace's own end is not the snapshot's (its
 * TOTAL MEM counts blocks the snapshot no longer holds, or misses blocks made before it), say so
 * on stderr, as peak does: the record's figures (cmh_trace_gap), read before it is shaped. */
static void gap_notes(const cmh_snapshot *s, void *arg)
{
    const char *path = arg;
    int32_t devs[256];
    int nd = g_device == -2 ? cmh_snapshot_devices(s, devs, 256) : (devs[0] = g_device, 1);
    for (int i = 0; i < nd && i < 256; i++) {
        cmh_peak_report p;
        char lead[1200];
        if (devs[i] >= 0 && !cmh_snapshot_trace(s, devs[i]) && rep_device_used(s, devs[i])) /* (memory_viz prints nothing for it) */
            fprintf(stderr, "cumemhist: trace: %s, device %d: nothing to print (%s); only the state at the end is known "
                            "(cumemhist summary, frag)\n", path, devs[i], cmh_no_history_cause(s, devs[i]));
        if (devs[i] < 0 || !cmh_snapshot_trace(s, devs[i]) || cmh_peak_totals(s, devs[i], &p) != CMH_OK) continue;
        snprintf(lead, sizeof lead, "cumemhist: trace: %s, device %d: ", path, devs[i]);
        rep_gap_notes_to(stderr, lead, &p.base, 1);
        const cmh_trace_gap *g = &p.base.gap;
        if (g->unfreed_bytes || g->untraced_bytes) {
            fprintf(stderr, "%sTOTAL MEM is what the trace's own entries leave", lead);
            if (g->unfreed_bytes) fprintf(stderr, ": it counts the %s the snapshot no longer holds", rep_size((double)g->unfreed_bytes));
            if (g->untraced_bytes)
                fprintf(stderr, "%s the %s live before its first entry", g->unfreed_bytes ? ", and leaves out" : ": it leaves out",
                        rep_size((double)g->untraced_bytes));
            fputc('\n', stderr);
        }
        cmh_peak_report_free(&p);
        /* a stream-ordered free (cuMemFreeAsync) is a segment_free in memory_viz's model, which the
         * text prints `cudaFree(x)`: the bytes went to the stream's pool, which may keep them
         * (reserved in every report), not to the driver */
        uint64_t bytes, nasync = cmh_stream_ordered_frees(s, devs[i], &bytes);
        if (nasync) {
            fprintf(stderr, "%s%" PRIu64 " of the cudaFree lines (%s) are stream-ordered frees (cuMemFreeAsync): the "
                            "bytes went back to a stream-ordered pool, not to the driver; what the pools keep is reserved in "
                            "every report (%s at the end: cumemhist frag)\n",
                    lead, nasync, rep_size((double)bytes), rep_size((double)cmh_end_pool_cache(s, devs[i], NULL)));
        }
    }
}

int cmd_trace(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_trace, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    if (g_json) return rep_run(&path, 1, g_device, 1, REP_SITES, section, NULL);
    if (g_device == -1) /* the text is memory_viz's, devices only (it read 'no device -1 ... (it has 0)') */
        return rep_no_pinned("trace", "trace's text is memory_viz's view, devices only (its pickle leaves pinned host "
                                      "memory out); `cumemhist trace --json --device -1` lists its entries");
    cmh_snapshot s;
    /* the text counts the pickle's entries (memory_viz's device_traces): where a recorder record's differ, say how they map to
     * the numbering every other command (and trace --json) gives (docs/DEFINITIONS.md) */
    if ((rc = rep_load_shaped_own_with(path, &s, g_quiet ? NULL : "trace", g_device, "the text counts the pickle's", gap_notes, path)))
        return rc;
    int32_t dev;
    if (g_device != -2 && rep_devices(path, &s, g_device, 1, &dev, 1) < 0) {
        cmh_snapshot_free(&s);
        return CLI_EUSAGE;
    }
    rep_say_empty_devices("trace", path, &s, g_device, -3); /* (every device: none stands for the others) */
    int crc = cmh_print_trace(&s, g_device == -2 ? CMH_ALL_DEVICES : g_device, stdout);
    cmh_snapshot_free(&s);
    if (crc == CMH_EIO) return cli_finish_stdout(CLI_EFILE);
    if (crc != CMH_OK) return cli_fail(path, crc);
    return cli_finish_stdout(0);
}
