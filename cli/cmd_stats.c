/*
 * cmd_stats.c - `cumemhist stats`: the `stats` text of PyTorch's torch/cuda/_memory_viz.py, for
 * any snapshot (a recorder's is read in the shape its memory_viz export has), or its figures
 * as JSON.
 */
#include <stdio.h>

#include "report.h"

static int g_device = -2, g_json;

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "only device N's segments (default: all, as the script does)", NULL, 0, 0, NULL},
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_stats = {
    "stats", "[options] SNAPSHOT",
    "PyTorch's `python _memory_viz.py stats`: every segment of 20 MiB or more as a row of\n"
    "20 MiB pages (a-z: one block, 0-9: partly full, *: full, ' ': free), its free bytes and\n"
    "how much of them is rounding (internal), then the totals.  Same text as PyTorch's on the\n"
    "same snapshot; a recorder snapshot reads as its memory_viz export (cumemhist export).\n"
    "A stream-ordered pool's cache is in no segment, so the totals leave it out: stderr says\n"
    "how much, and the reserved every other report gives; --json adds pool_cache and reserved.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist stats dump_snapshot.pickle"};

/* Per device: each segment's figures as the script counts them (allocated = requested bytes of
 * allocated blocks, internal = their rounding, external = inactive blocks). */
static int section(const rep_section *sec, void *arg)
{
    (void)arg;
    const cmh_snapshot *s = sec->s;
    cmh_jw *w = sec->w;
    uint64_t reserved = 0, allocated = 0, ext_all = 0, in_all = 0;
    uint32_t nseg = 0;
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "file", sec->path);
    cmh_jw_kint(w, "device", sec->device);
    rep_json_process(w, s);
    cmh_jw_nl(w);
    cmh_jw_key(w, "segments");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->device != sec->device) continue;
        uint64_t alloc = 0, ext = 0, in = 0;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s->blocks[g->first_block + k];
            if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) alloc += b->requested, in += b->size - b->requested;
            else ext += b->size;
        }
        reserved += g->size;
        allocated += alloc;
        ext_all += ext;
        in_all += in;
        nseg++;
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kuint(w, "address", g->addr);
        cmh_jw_kuint(w, "total_size", g->size);
        cmh_jw_kuint(w, "allocated", alloc);
        cmh_jw_kuint(w, "free_external", ext);
        cmh_jw_kuint(w, "free_internal", in);
        cmh_jw_kuint(w, "blocks", g->nblocks);
        cmh_jw_kuint(w, "stream", g->stream);
        cmh_jw_kbool(w, "expandable", (g->flags & CMH_SEG_EXPANDABLE) != 0);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_nl(w);
    cmh_jw_kuint(w, "segment_count", nseg);
    cmh_jw_kuint(w, "total_reserved", reserved);
    cmh_jw_kuint(w, "total_allocated", allocated);
    cmh_jw_kuint(w, "total_free_external", ext_all);
    cmh_jw_kuint(w, "total_free_internal", in_all);
    /* memory_viz draws segments: what a stream-ordered pool keeps is reserved in every report yet
     * in no segment here; the reports' reserved is the segments' plus that cache, and free inside
     * segments plus the cache = reserved - allocated (docs/DEFINITIONS.md) */
    uint64_t cache = cmh_end_pool_cache(s, sec->device, NULL);
    cmh_jw_kuint(w, "pool_cache", cache);
    cmh_jw_kuint(w, "reserved", reserved + cache);
    cmh_jw_end(w);
    return CMH_OK;
}

/* The same in words, after the script's text (stderr: the text stays the script's): a recorder's
 * stream-ordered pool keeps what it was given back, reserved by every report, yet memory_viz's
 * segments (and so the script's total_reserved) leave it out.  Only a record that holds
 * stream-ordered memory at its end (a recorder's segment on a stream, or a private pool's) is read
 * again whole for it (pooled), so that stats keeps skipping the traces of the rest: a pool that
 * kept a cache with none of its allocations live at the end goes unsaid here (stats --json, frag
 * say it). */
static int pooled(const cmh_snapshot *shaped)
{
    for (uint32_t i = 0; i < shaped->nsegments; i++) /* a recorder's stream-ordered allocation: a whole-block segment on a stream or a private pool's */
        if (shaped->segments[i].device >= 0 && (shaped->segments[i].flags & CMH_SEG_WHOLE_BLOCK) &&
            (shaped->segments[i].stream || shaped->segments[i].pool_id[1]))
            return 1;
    return 0;
}

static void say_pool_cache(const cmh_snapshot *full, int want)
{
    for (uint32_t t = 0; t < full->ntraces; t++) {
        int dev = full->traces[t].device;
        if (dev < 0 || (want != -2 && dev != want)) continue;
        /* frag's figures of the end: its reserved is the segments' plus the pools' cache */
        cmh_frag_report f;
        if (cmh_frag_compute(full, dev, &f) != CMH_OK) continue;
        uint64_t cache = f.pool_cache, reserved = f.reserved, free = f.reserved - f.allocated;
        cmh_frag_report_free(&f);
        if (!cache) continue;
        char a[32], b[32], c[32], d[32];
        snprintf(a, sizeof a, "%s", rep_size((double)(reserved - cache)));
        snprintf(b, sizeof b, "%s", rep_size((double)cache));
        snprintf(c, sizeof c, "%s", rep_size((double)reserved));
        snprintf(d, sizeof d, "%s", rep_size((double)free));
        fprintf(stderr,
                "cumemhist: stats: device %d: total_reserved counts segments only (%s): memory_viz draws segments, not a "
                "stream-ordered pool's cache (freed to a stream-ordered pool, kept: cuMemPoolTrimTo gives it back) of %s at "
                "the end; reserved, as every other report says it, is %s, and free inside segments plus that cache is %s "
                "(reserved - allocated)\n",
                dev, a, b, c, d);
    }
}

int cmd_stats(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_stats, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    /* memory_viz's view has devices only: -1 read 'no device -1 in this snapshot (it has 0)' of a
     * record whose summary --device -1 shows its pinned memory */
    if (g_device == -1)
        return rep_no_pinned("stats", "stats is memory_viz's view, devices only (its pickle leaves pinned host memory "
                                      "out); `cumemhist frag --device -1` shows its segments");
    if (g_json) return rep_run(&path, 1, g_device, 1, REP_SHAPED | REP_NO_HOST, section, NULL);
    cmh_snapshot s;
    /* the text is the segments alone: the trace (the bulk of the file) is not read, unless a
     * --device must be checked against every device the file has, the traces' too */
    if ((rc = rep_load_shaped_ex(path, &s, g_device == -2 ? CMH_LOAD_SEGMENTS : 0))) return rc;
    int32_t dev;
    if (g_device != -2 && rep_devices(path, &s, g_device, 1, &dev, 1) < 0) {
        cmh_snapshot_free(&s);
        return CLI_EUSAGE;
    }
    int crc = cmh_print_segsum(&s, g_device == -2 ? CMH_ALL_DEVICES : g_device, stdout);
    putchar('\n'); /* the script print()s its result: one more newline */
    fflush(stdout);
    /* the record whole, once, for the pools' cache and for the calls the driver refused (summary's
     * note, after the script's text), judged by the whole trace: the segments' load has none, and
     * memory_viz's shape (--device) no pinned host memory.  A pooled record with failed calls was
     * read whole twice more */
    int pool = crc == CMH_OK && pooled(&s);
    cmh_snapshot full;
    if ((pool || (crc == CMH_OK && s.ndrv_errors)) && rep_load_view(path, &full) == 0 && rep_name_failed_calls(path, &full) == 0) {
        if (pool) say_pool_cache(&full, g_device);
        rep_driver_errors_note(&full);
        cmh_snapshot_free(&full);
    }
    cmh_snapshot_free(&s);
    if (crc == CMH_EIO) return cli_finish_stdout(CLI_EFILE);
    if (crc != CMH_OK) return cli_fail(path, crc);
    return cli_finish_stdout(0);
}
