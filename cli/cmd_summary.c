/*
 * cmd_summary.c - `cumemhist summary`: torch.cuda.memory_summary() of a snapshot, computed by
 * replaying its trace.
 */
#include <stdio.h>
#include <string.h>

#include "cumemhist/owners.h"
#include "cumemhist/recorder.h"
#include "report.h"

static int g_device = -2, g_abbrev, g_json;

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "only device N (-1: pinned host memory); default: every GPU device", NULL, 0, 0, NULL},
    {"--abbreviated", NULL, CLI_FLAG, &g_abbrev, NULL, "omit the large/small pool rows", NULL, 0, 0, NULL},
    {"--json", NULL, CLI_FLAG, &g_json, NULL, "machine-readable output, every figure an exact integer", NULL, 0, 0, NULL},
};

const cli_command cli_cmd_summary = {
    "summary", "[options] SNAPSHOT",
    "Print the torch.cuda.memory_summary() table of a snapshot (.cmh or PyTorch pickle) for\n"
    "each of its devices, computed by replaying its trace: Cur Usage is the end of the record,\n"
    "Peak Usage the maximum over it.  A PyTorch snapshot prints PyTorch's text exactly; any other\n"
    "record is headed by its file and process, and titled \"CUDA memory summary\".  A record with\n"
    "no history (--enabled state, PyTorch's history off, or traces empty) knows only Cur Usage:\n"
    "the rest reads '-'.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist summary cumemhist.1234.cmh"};

/* history 0: only the current figure is known (null for the rest, as peak --json says it) */
static void json_stat(cmh_jw *w, const char *name, const cmh_stat *s, int history)
{
    cmh_jw_nl(w);
    cmh_jw_key(w, name);
    cmh_jw_obj(w);
    cmh_jw_kint(w, "current", s->current);
    if (history) {
        cmh_jw_kint(w, "peak", s->peak);
        cmh_jw_kint(w, "allocated", s->allocated);
        cmh_jw_kint(w, "freed", s->freed);
    } else {
        cmh_jw_knull(w, "peak");
        cmh_jw_knull(w, "allocated");
        cmh_jw_knull(w, "freed");
    }
    cmh_jw_end(w);
}

static void json_pools(cmh_jw *w, const char *metric, const cmh_stat *arr, int history)
{
    static const struct {
        const char *name;
        int index;
    } pools[] = {{"all", CMH_POOL_ALL}, {"large_pool", CMH_POOL_LARGE}, {"small_pool", CMH_POOL_SMALL}};
    for (int p = 0; p < 3; p++) {
        char name[96];
        snprintf(name, sizeof name, "%s.%s", metric, pools[p].name);
        json_stat(w, name, &arr[pools[p].index], history);
    }
}

static int section(const rep_section *sec, void *arg)
{
    (void)arg;
    const cmh_snapshot *s = sec->s;
    int device = sec->device;
    cmh_mem_stats st;
    cmh_peak_report pk; /* (the same replay's: the state it inferred before the first entry) */
    int crc = cmh_summary_compute_peak(s, device, &st, &pk);
    if (crc != CMH_OK) return crc;
    cmh_frag_report fr; /* the expandable segments at the end: PyTorch's rows leave them out (a note says them) */
    if ((crc = cmh_frag_compute(s, device, &fr)) != CMH_OK) {
        cmh_peak_report_free(&pk);
        return crc;
    }
    cmh_beyond_torch bt; /* what the driver held beside PyTorch's pool (NCCL's maps, cuBLAS's workspace...) */
    if ((crc = sec->whole ? cmh_beyond_torch_compute(sec->whole, device, &bt) : (memset(&bt, 0, sizeof bt), CMH_OK)) != CMH_OK) {
        cmh_frag_report_free(&fr);
        cmh_peak_report_free(&pk);
        return crc;
    }
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    uint64_t dropped = t ? t->dropped : 0, nent = t ? t->nentries : 0;
    /* no history (enabled=state, PyTorch's history off): the replay has only the end state, and
     * would print it as the peak, count its blocks as allocated and nothing freed, and 0 OOMs */
    int history = pk.base.history;
    /* A snapshot that holds nothing at all (PyTorch's of a process with nothing allocated, its
     * traces empty) is a record with no history too: an empty trace is also what history off
     * leaves, so the peaks, totals and OOMs are not known, as oom and peak say; the table keeps
     * memory_summary()'s layout, Cur Usage 0 and '-' for the rest (it printed PyTorch's table of
     * zeros, 'CUDA OOMs: 0', beside oom's 'out-of-memory errors: not known') */
    /* a trace that began mid-run (PyTorch's recording turned on late, its ring of old): the
     * replay inferred what was live before its first entry, as for a ring that dropped entries */
    int midrun = cmh_peak_extent(&pk) == CMH_PEAK_AT_LEAST && !dropped; /* (peak's rule: its peaks are lower bounds) */
    int ooms_known = history || cmh_trace_ooms_known(s, device); /* (enabled=state counts them too) */
    /* taken while the process ran (SIGUSR1, cmh_dump_snapshot, `snapshot PID`): the figures are
     * that moment's, and the run went on (CUDA OOMs 0 read as the whole run's) */
    int running = cmh_snapshot_running(s);
    if (sec->w) {
        cmh_jw *w = sec->w;
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "file", sec->path);
        cmh_jw_kint(w, "device", device);
        rep_json_process(w, s);
        rep_json_children(w, sec->path, s);
        cmh_jw_kuint(w, "trace_entries", nent);
        cmh_jw_kbool(w, "pytorch_part", sec->torch_part); /* trace_entries PyTorch's own, of the record's (ending) */
        cmh_jw_kuint(w, "dropped_entries", dropped);
        cmh_jw_kbool(w, "history", history);
        cmh_jw_kbool(w, "as_of_snapshot", running); /* the process still ran: the figures are that moment's */
        /* Peak Usage a lower bound: the trace does not reach back to the run's start (peak's rule) */
        if (history) cmh_jw_kbool(w, "peak_at_least", cmh_peak_extent(&pk) == CMH_PEAK_AT_LEAST);
        else cmh_jw_knull(w, "peak_at_least");
        if (!history && pk.base.nohist_cause) cmh_jw_kstr(w, "no_history_cause", pk.base.nohist_cause); /* why not: the note's words */
        cmh_jw_key(w, "before_first_entry"); /* what the replay inferred was live then (null: no history) */
        if (history) {
            cmh_jw_obj(w);
            cmh_jw_kint(w, "allocated", pk.alloc_start);
            cmh_jw_kint(w, "reserved", pk.reserved_start);
            cmh_jw_kint(w, "allocations", pk.allocs_start); /* the blocks live then, in stats' allocation totals */
            cmh_jw_end(w);
        } else cmh_jw_null(w);
        /* the allocations the trace made: allocation.all's allocated less those live before it (the
         * report's card) */
        if (history) cmh_jw_kint(w, "trace_allocations", st.allocation[CMH_POOL_ALL].allocated - pk.allocs_start);
        else cmh_jw_knull(w, "trace_allocations");
        rep_json_gap(w, &pk.base); /* the end's blocks the trace never freed (Tot Freed counts them), or never made */
        rep_json_unsplit(w, &pk);
        rep_json_expandable(w, &fr);
        rep_json_beyond_torch(w, &bt);
        rep_json_vmm_unmapped(w, s, device);
        rep_json_vmm_physical(w, s, device);
        cmh_jw_kstr(w, "source", s->source == CMH_SRC_PYTORCH ? "pytorch" : "recorder"); /* who made the record: the text's title */
        cmh_jw_kstr(w, "byte_units", s->source == CMH_SRC_PYTORCH ? "requested" : "allocated");
        cmh_jw_nl(w);
        cmh_jw_key(w, "stats");
        cmh_jw_obj(w);
        json_pools(w, "allocated_bytes", st.allocated_bytes, history);
        json_pools(w, "active_bytes", st.active_bytes, history);
        json_pools(w, "requested_bytes", st.requested_bytes, history);
        json_pools(w, "reserved_bytes", st.reserved_bytes, history);
        json_pools(w, "inactive_split_bytes", st.inactive_split_bytes, history);
        json_pools(w, "allocation", st.allocation, history);
        json_pools(w, "active", st.active, history);
        json_pools(w, "segment", st.segment, history);
        json_pools(w, "inactive_split", st.inactive_split, history);
        json_stat(w, "oversize_allocations", &st.oversize_allocations, history);
        json_stat(w, "oversize_segments", &st.oversize_segments, history);
        cmh_jw_end(w);
        cmh_jw_nl(w);
        if (history) { /* of num_ooms, those the ring dropped (the text's note; oom --json's dropped_ooms) */
            cmh_jw_kuint(w, "dropped_ooms", t ? t->dropped_ooms : 0);
            cmh_jw_kuint(w, "num_ooms", st.num_ooms);
            cmh_jw_kuint(w, "num_alloc_retries", st.num_alloc_retries);
        } else {
            cmh_jw_knull(w, "dropped_ooms");
            if (ooms_known) cmh_jw_kuint(w, "num_ooms", st.num_ooms); /* counted without history */
            else cmh_jw_knull(w, "num_ooms");
            cmh_jw_knull(w, "num_alloc_retries");
        }
        rep_json_driver_errors(w, s); /* (the process's, in every device's object) */
        cmh_jw_end(w);
        cmh_frag_report_free(&fr);
        cmh_beyond_torch_free(&bt);
        return CMH_OK;
    }
    /* memory_summary()'s table ('-' for what a record with no history does not know).  A
     * record PyTorch's allocator made is PyTorch's text to the byte (no line it lacks); any other
     * is named like every other report, and its title does not claim PyTorch made it. */
    int pytorch = s->source == CMH_SRC_PYTORCH;
    if (sec->index) putchar('\n');
    if (!pytorch && sec->index == 0) {
        if (s->pid || s->cmdline) rep_print_process(sec->path, s);
        else printf("%s:\n", sec->path);
    }
    cmh_summary_print_known(&st, device, g_abbrev, pytorch, history ? 1 : ooms_known ? CMH_SUMMARY_OOMS_KNOWN : 0, stdout);
    if (device == -1) printf("note: device -1 is pinned host memory\n");
    if (!history && ooms_known)
        printf("note: no history on this device (%s): only Cur Usage, the state\n"
               "      at the end, is known, and the OOMs, counted all the same; the peaks, the totals\n"
               "      and the retries are not ('-')\n",
               pk.base.nohist_cause);
    else if (!history)
        printf("note: no history on this device (%s): only Cur Usage, the state\n"
               "      at the end, is known; the peaks, the totals, the OOMs and the retries are not ('-')\n",
               pk.base.nohist_cause);
    /* the Allocations row's total counts the blocks live when the trace began: said apart, as the
     * report's card says them */
    int64_t before = pk.allocs_start, made = st.allocation[CMH_POOL_ALL].allocated - before;
    if (dropped)
        printf("note: the ring dropped the %llu oldest entr%s; peaks cover the last %llu only, and the totals count what\n"
               "      was live when they began as allocated then: %s in the trace, %lld more live when its kept\n"
               "      entries began (what was allocated and freed before is not in them)\n",
               (unsigned long long)dropped, dropped == 1 ? "y" : "ies", (unsigned long long)nent, rep_count((uint64_t)made, "allocation", "allocations"),
               (long long)before);
    const cmh_trace *dt = cmh_snapshot_trace(s, device);
    if (dropped && dt && dt->dropped_ooms) /* a counter, as PyTorch's num_ooms */
        printf("note: CUDA OOMs counts the %llu OOM%s among the dropped entries too (as the program's: no entry is left to\n"
               "      show a retry); `cumemhist oom` numbers the ones kept after them\n",
               (unsigned long long)dt->dropped_ooms, dt->dropped_ooms == 1 ? "" : "s");
    if (midrun)
        printf("note: the trace begins mid-run: %s allocated and %s reserved before its first entry (inferred from the\n"
               "      end); peaks cover its %s only (the true peaks may be higher: Peak Usage is at least), and\n"
               "      the totals count what was live when it began as allocated\n"
               "      then: %s in the trace, %lld more live when it began (what was allocated and freed\n"
               "      before is not in them)\n",
               rep_size((double)pk.alloc_start), rep_size((double)pk.reserved_start), rep_count(nent, "entry", "entries"),
               rep_count((uint64_t)made, "allocation", "allocations"), (long long)before);
    /* the trace's own end is not the snapshot's: Cur Usage is the snapshot's, and Tot Freed counts
     * the blocks the snapshot no longer holds as freed at the end (no entry frees them) */
    if (history) rep_gap_notes(&pk.base, 0);
    rep_unsplit_note(&pk, "note: Peak Usage of Allocated memory: "); /* (PyTorch's own figure: its table keeps it) */
    if (running) { /* (the table as memory_summary() would have printed it then) */
        printf("note: the process %s;\n", cmh_str(s, s->ending));
        /* the ending counts the record's entries (cli_load_ex); a co-recorded record's table reads
         * PyTorch's own snapshot, whose entries are some of them: said whose (it said 18 so far
         * where every other command said 220) */
        if (sec->torch_part)
            printf("      this table is PyTorch's own snapshot's: its %s are among device %d's;\n",
                   rep_count(nent, "entry", "entries"), device);
        printf("      every figure is as of that moment, not the run's end: Cur Usage then, Peak Usage and the totals\n"
               "      so far%s\n",
               ooms_known ? ", CUDA OOMs and cudaMalloc retries those until then" : "");
    }
    rep_expandable_note(&fr, 1); /* (GPU reserved segments 0 beside frag's segments: both said) */
    rep_beyond_torch_note(&bt, device); /* (nvidia-smi's figure is more than the table's: who holds the rest) */
    rep_vmm_unmapped_note(s, device);
    rep_vmm_physical_note(s, device);
    if (sec->index + 1 == sec->ndevices && g_device == -2) { /* the last table: what the others left out */
        int32_t all[256];
        int n = cmh_snapshot_devices(s, all, 256);
        if (n > 0 && all[n > 256 ? 255 : n - 1] == -1)
            printf("note: the snapshot also holds pinned host memory (cumemhist summary --device -1)\n");
    }
    if (sec->index + 1 == sec->ndevices) rep_driver_errors_note(s); /* (PyTorch's text keeps its layout: a record of ours alone has any) */
    cmh_frag_report_free(&fr);
    cmh_beyond_torch_free(&bt);
    return CMH_OK;
}

int cmd_summary(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_summary, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    return rep_run(&path, 1, g_device, g_json, REP_NO_HOST | REP_PYTORCH_TEXT | REP_TORCH_PART, section, NULL);
}
