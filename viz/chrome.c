/*
 * chrome.c - a snapshot as a Chrome / Perfetto trace (Trace Event Format JSON).
 *
 * Per device, a process "GPU n" with a memory counter track (allocated bytes, and reserved_free
 * = reserved - allocated stacked on top, after every trace entry, from the replay), instants
 * for OOMs, the allocated peak (with the sites that held it), marks as instants on the track of
 * the thread that made them, PyTorch's record_function ranges (external_annotations START/END)
 * as complete ("X") slices on a track of their own (PyTorch does not say which thread), and, when
 * kernel timing was recorded, one thread per CUDA stream carrying the kernels as complete ("X")
 * slices.
 *
 * Times are exact: integer nanoseconds from the earliest event, written as microseconds with
 * three decimals (a double holds epoch microseconds only to 0.25 us, so no time passes through
 * one); the origin is in otherData.time_origin_ns.  Every track's timestamps are non-decreasing,
 * as Perfetto expects: a counter sample is the state after its entry, so entries keep their
 * trace order and a time earlier than the previous one (threads stamping just before they
 * record) is raised to it; kernels are sorted by start on each stream.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/gapwords.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "cumemhist/viz.h"
#include "jsonw.h"

/* Where a snapshot's tracks go: its processes' ids (base + device; pinned host memory 1000
 * after the base) and names, and the clock's origin. */
typedef struct chrome_ctx {
    cmh_jw *w;
    int64_t t0;
    int pid_base;
    const char *label; /* NULL: "GPU n"; else "label" (", GPU n" when the snapshot has several) */
    int ndevices;
    uint32_t *timeless; /* devices whose trace has no times: drawn at 1 us per entry */
} chrome_ctx;

static int pid_of(const chrome_ctx *c, int device) { return c->pid_base + (device < 0 ? 1000 : device); }

static void meta(cmh_jw *w, const char *what, int pid, int64_t tid, const char *name)
{
    cmh_jw_nl(w);
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "ph", "M");
    cmh_jw_kstr(w, "name", what);
    cmh_jw_kint(w, "pid", pid);
    if (tid >= 0) cmh_jw_kint(w, "tid", tid);
    cmh_jw_key(w, "args");
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "name", name);
    cmh_jw_end(w);
    cmh_jw_end(w);
}

/* "fn (file:line)", as the reports name a frame */
static void frame_text(const cmh_snapshot *s, const cmh_frame *f, char *buf, size_t cap)
{
    const char *name = cmh_str(s, f->name), *file = cmh_str(s, f->filename), *mod = cmh_frame_module(s, f);
    if (f->line > 0) snprintf(buf, cap, "%.600s (%.400s:%" PRId64 ")", name, file, f->line);
    else if (*file && strcmp(file, "??")) snprintf(buf, cap, "%.600s (%.400s)", name, file);
    else snprintf(buf, cap, "%.600s%s%.300s%s", name, *mod ? " (" : "", mod, *mod ? ")" : "");
}

/* The allocated peak as an instant on its device, with the sites that held it (the peak
 * report's figures, by the default attribution), so the trace says whose memory the top of the
 * counter is. */
/* An instant event's opening: its scope ("p": the process, "t": the thread), where and when; the
 * caller adds its name (when not given) and args, and closes it. */
static void instant_begin(cmh_jw *w, const char *scope, int pid, int tid, int64_t ts_ns, const char *name)
{
    cmh_jw_nl(w);
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "ph", "i");
    cmh_jw_kstr(w, "s", scope);
    cmh_jw_kint(w, "pid", pid);
    cmh_jw_kint(w, "tid", tid);
    cmh_jw_key(w, "ts");
    cmh_jw_us(w, ts_ns);
    if (name) cmh_jw_kstr(w, "name", name);
}

/* One sample of a device's memory counter: allocated, and reserved's free part stacked on it. */
static void counter_sample(cmh_jw *w, const char *counter, int pid, int64_t ts_ns, const cmh_mem_stats *st, int64_t *shown_alloc,
                           int64_t *shown_res)
{
    cmh_jw_nl(w);
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "ph", "C");
    cmh_jw_kstr(w, "name", counter);
    cmh_jw_kint(w, "pid", pid);
    cmh_jw_key(w, "ts");
    cmh_jw_us(w, ts_ns);
    cmh_jw_key(w, "args");
    cmh_jw_obj(w);
    cmh_jw_kint(w, "allocated", st->allocated_bytes[CMH_POOL_ALL].current);
    cmh_jw_kint(w, "reserved_free", st->reserved_bytes[CMH_POOL_ALL].current - st->allocated_bytes[CMH_POOL_ALL].current);
    cmh_jw_end(w);
    cmh_jw_end(w);
    *shown_alloc = st->allocated_bytes[CMH_POOL_ALL].current;
    *shown_res = st->reserved_bytes[CMH_POOL_ALL].current;
}

static void peak_instant(const chrome_ctx *c, const cmh_snapshot *s, int dev, const cmh_sites *g, const cmh_peak_report *pk,
                         int64_t t)
{
    const cmh_peak_report p = *pk;
    {
        cmh_jw *w = c->w;
        char what[128], text[1100];
        int least = cmh_peak_extent(&p) == CMH_PEAK_AT_LEAST; /* the trace does not reach back to the run's start */
        snprintf(what, sizeof what, "peak allocated: %s%" PRId64 " bytes", least ? "at least " : "", p.alloc_peak);
        instant_begin(w, "p", pid_of(c, dev), 0, t - c->t0, what);
        cmh_jw_key(w, "args");
        cmh_jw_obj(w);
        cmh_jw_kbool(w, "peak_at_least", least);
        cmh_jw_key(w, "sites");
        cmh_jw_arr(w);
        for (uint32_t i = 0; i < p.nsites && i < 10; i++) {
            const cmh_frame *f = cmh_sites_frame(g, p.sites[i].group);
            cmh_jw_obj(w);
            if (f) frame_text(s, f, text, sizeof text);
            else snprintf(text, sizeof text, "<no stack: %s>", cmh_no_stack_reason(s)); /* every report's words */
            cmh_jw_kstr(w, "site", text);
            cmh_jw_kuint(w, "bytes", p.sites[i].bytes);
            cmh_jw_kuint(w, "blocks", p.sites[i].count);
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        if (cmh_unsplit_text(&p, text, sizeof text)) cmh_jw_kstr(w, "note", text);
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
}

/* Threads' tracks sit far above any stream id a kernel track uses; thread 0 = unknown (PyTorch's
 * annotations). */
#define THREAD_TID(t) (0x7f000000ll + (int64_t)(t))

typedef struct slice {
    int64_t start, end; /* end < start: a START without its END, or an END without its START */
    uint32_t name;
} slice;

static int cmp_slice(const void *a, const void *b)
{
    const slice *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_ann(const void *a, const void *b)
{
    const cmh_annotation *x = *(const cmh_annotation *const *)a, *y = *(const cmh_annotation *const *)b;
    return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns ? 1 : x < y ? -1 : x > y;
}

typedef struct mark_key {
    int64_t time;
    uint32_t name;
} mark_key;

static int cmp_mark_key(const void *a, const void *b)
{
    const mark_key *x = a, *y = b;
    if (x->time != y->time) return x->time < y->time ? -1 : 1;
    return (x->name > y->name) - (x->name < y->name);
}

/* The ranges of one device (PyTorch's record_function annotations, or the program's own:
 * cmh_range_push, cumemhist.range()): each END closes the innermost open START of its name.  The
 * track is named by who made them (a C program's CMH_RANGE_PUSH spans sat on one named
 * "record_function (PyTorch)"). */
static int annotation_track(const chrome_ctx *c, const cmh_snapshot *s, int dev)
{
    cmh_jw *w = c->w;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nannotations; i++) n += s->annotations[i].device == dev && s->annotations[i].time_ns;
    if (!n) return CMH_OK;
    const cmh_annotation **a = malloc(n * sizeof *a);
    slice *sl = malloc(n * sizeof *sl);
    uint32_t *open = malloc(n * sizeof *open);
    if (!a || !sl || !open) {
        free(a), free(sl), free(open);
        return CMH_ENOMEM;
    }
    uint32_t k = 0, ns = 0, no = 0;
    for (uint32_t i = 0; i < s->nannotations; i++)
        if (s->annotations[i].device == dev && s->annotations[i].time_ns) a[k++] = &s->annotations[i];
    qsort(a, n, sizeof *a, cmp_ann);
    for (uint32_t i = 0; i < n; i++) {
        if (a[i]->stage == 0) {
            sl[ns] = (slice){a[i]->time_ns, INT64_MIN, a[i]->name};
            open[no++] = ns++;
            continue;
        }
        uint32_t o = no;
        while (o > 0 && sl[open[o - 1]].name != a[i]->name) o--;
        if (o) {
            sl[open[o - 1]].end = a[i]->time_ns;
            memmove(&open[o - 1], &open[o], (no - o) * sizeof *open);
            no--;
        } else sl[ns++] = (slice){a[i]->time_ns, INT64_MIN, a[i]->name};
    }
    qsort(sl, ns, sizeof *sl, cmp_slice);
    /* whose: a range the program opened (cmh_range_push) has a mark of its name at its start's
     * instant in this device's trace; PyTorch's record_function ranges (its snapshots', or
     * merged into a record) have none */
    uint32_t ours = 0, theirs = 0, nmk = 0;
    const cmh_trace *tr = CMH_PT_MARKS_INLINE(s) ? NULL : cmh_snapshot_trace(s, dev);
    for (uint32_t k = 0; tr && k < tr->nentries; k++) nmk += s->entries[tr->first_entry + k].action == CMH_ACT_MARK;
    mark_key *mk = nmk ? malloc(nmk * sizeof *mk) : NULL;
    if (nmk && !mk) {
        free(a), free(sl), free(open);
        return CMH_ENOMEM;
    }
    nmk = 0;
    for (uint32_t k = 0; mk && k < tr->nentries; k++) {
        const cmh_entry *e = &s->entries[tr->first_entry + k];
        if (e->action == CMH_ACT_MARK) mk[nmk++] = (mark_key){cmh_entry_time(s, e), cmh_entry_name(s, e)};
    }
    if (nmk) qsort(mk, nmk, sizeof *mk, cmp_mark_key);
    for (uint32_t i = 0; i < ns; i++) {
        mark_key key = {sl[i].start, sl[i].name};
        if (nmk && bsearch(&key, mk, nmk, sizeof *mk, cmp_mark_key)) ours++;
        else theirs++;
    }
    free(mk);
    meta(w, "thread_name", pid_of(c, dev), THREAD_TID(0),
         !ours    ? "record_function (PyTorch)"
         : theirs ? "ranges (the program's: cumemhist.range, CMH_RANGE_PUSH; and PyTorch's record_function)"
                  : "ranges (the program's: cumemhist.range, CMH_RANGE_PUSH)");
    for (uint32_t i = 0; i < ns; i++) {
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "ph", sl[i].end >= sl[i].start ? "X" : "i");
        if (sl[i].end < sl[i].start) cmh_jw_kstr(w, "s", "t");
        cmh_jw_kstr(w, "cat", "annotation");
        cmh_jw_kint(w, "pid", pid_of(c, dev));
        cmh_jw_kint(w, "tid", THREAD_TID(0));
        cmh_jw_key(w, "ts");
        cmh_jw_us(w, sl[i].start - c->t0);
        if (sl[i].end >= sl[i].start) {
            cmh_jw_key(w, "dur");
            cmh_jw_us(w, sl[i].end - sl[i].start);
        }
        cmh_jw_kstr(w, "name", cmh_str(s, sl[i].name));
        cmh_jw_end(w);
    }
    free(a), free(sl), free(open);
    return CMH_OK;
}

static int device_track(const chrome_ctx *c, const cmh_snapshot *s, int dev)
{
    cmh_jw *w = c->w;
    int64_t t0 = c->t0;
    char name[256];
    if (c->label && c->ndevices > 1)
        snprintf(name, sizeof name, "%s, %s", c->label, dev < 0 ? "pinned host memory" : "GPU");
    else if (c->label) snprintf(name, sizeof name, "%s", c->label);
    else if (dev < 0) snprintf(name, sizeof name, "pinned host memory");
    else snprintf(name, sizeof name, "GPU %d", dev);
    if (c->label && c->ndevices > 1 && dev >= 0) {
        size_t n = strlen(name);
        snprintf(name + n, sizeof name - n, " %d", dev);
    }
    meta(w, "process_name", pid_of(c, dev), -1, name);
    /* how the process ended, and whose child it was, as the reports say it ("forked child 803:
     * ...; it was killed by SIGKILL"): a job's trace named its processes and no ending, so a
     * killed worker's track read as one that ran to its end (Perfetto shows labels by the name) */
    if (c->label && (s->ending || s->forked_from > 0)) {
        char labels[1200];
        int n = s->forked_from > 0 ? snprintf(labels, sizeof labels, "forked from pid %lld", (long long)s->forked_from) : 0;
        if (s->ending) snprintf(labels + n, sizeof labels - (size_t)n, "%sthe process %s", n ? "; " : "", cmh_str(s, s->ending));
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "ph", "M");
        cmh_jw_kstr(w, "name", "process_labels");
        cmh_jw_kint(w, "pid", pid_of(c, dev));
        cmh_jw_key(w, "args");
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "labels", labels);
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
    if (c->label) { /* the order Perfetto lists them in: as the ranks go */
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "ph", "M");
        cmh_jw_kstr(w, "name", "process_sort_index");
        cmh_jw_kint(w, "pid", pid_of(c, dev));
        cmh_jw_key(w, "args");
        cmh_jw_obj(w);
        cmh_jw_kint(w, "sort_index", pid_of(c, dev));
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
    /* the allocated peak, marked where the replay reaches it */
    int prc;
    char err[256];
    cmh_peak_report pk;
    memset(&pk, 0, sizeof pk);
    cmh_sites *g = dev >= 0 ? cmh_sites_new(s, NULL, &prc, err, sizeof err) : NULL;
    if (dev >= 0 && (!g || cmh_peak_compute(s, dev, g, &pk) != CMH_OK)) {
        cmh_sites_free(g);
        return CMH_ENOMEM;
    }
    cmh_replay *r = cmh_replay_new(s, dev);
    if (!r) {
        cmh_peak_report_free(&pk);
        cmh_sites_free(g);
        return CMH_ENOMEM;
    }
    /* A trace with no time at all (PyTorch 2.0's, an NPU build's: no time_us) would leave the
     * track empty; its entries are drawn in order instead, one microsecond apart. */
    int timeless = cmh_replay_length(r) > 0;
    for (int64_t i = 0; timeless && i < cmh_replay_length(r); i++)
        if (cmh_entry_time(cmh_replay_snapshot(r), cmh_replay_entry(r, i))) timeless = 0;
    if (timeless) (*c->timeless)++;
    int64_t peak_at = g && pk.nsites && (pk.alloc_time_ns || timeless) ? pk.alloc_index : -2;
    const cmh_mem_stats *st = cmh_replay_stats(r);
    char counter[32];
    if (dev < 0) snprintf(counter, sizeof counter, "pinned host memory"); /* (it read "gpu-1 memory") */
    else snprintf(counter, sizeof counter, "gpu%d memory", dev);
    int64_t last = t0;
    const cmh_trace *tr = cmh_snapshot_trace(s, dev);
    if (!cmh_trace_has_history(s, dev)) {
        /* no entry says how memory changed (enabled=state, PyTorch's history off): said, with the
         * OOMs counted without entries (the trace's dropped_ooms: the ring dropped nothing, no entry
         * was recorded), as summary's CUDA OOMs and oom's "no history to explain it" say them; it
         * read "1 out-of-memory error before the first entry kept (the ring dropped it)" */
        uint64_t n;
        int known = cmh_nohist_ooms(s, dev, &n);
        char what[320], ooms[96] = "";
        if (known && n)
            snprintf(ooms, sizeof ooms, "; %" PRIu64 " out-of-memory error%s, counted without entries", n, n == 1 ? "" : "s");
        else if (known) snprintf(ooms, sizeof ooms, "; no out-of-memory error (counted without entries)");
        snprintf(what, sizeof what, "no history (%s): no entries, only the state at the end%s", cmh_no_history_cause(s, dev), ooms);
        instant_begin(w, "p", pid_of(c, dev), 0, 0, what);
        cmh_jw_key(w, "args");
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "no_history_cause", cmh_no_history_cause(s, dev));
        cmh_jw_key(w, "ooms"); /* null: not known (no history, and not counted) */
        if (known) cmh_jw_uint(w, n);
        else cmh_jw_null(w);
        cmh_jw_end(w);
        cmh_jw_end(w);
    } else if (tr && tr->dropped_ooms) { /* OOMs the ring dropped: one instant where the kept entries begin (they were lost here) */
        int64_t first = !timeless && cmh_replay_length(r) ? cmh_entry_time(s, cmh_replay_entry(r, 0)) : 0;
        char what[160];
        snprintf(what, sizeof what, "%" PRIu64 " out-of-memory error%s before the first entry kept (the ring dropped %s)", tr->dropped_ooms,
                 tr->dropped_ooms == 1 ? "" : "s", tr->dropped_ooms == 1 ? "it" : "them");
        instant_begin(w, "p", pid_of(c, dev), 0, first > t0 ? first - t0 : 0, what);
        cmh_jw_key(w, "args");
        cmh_jw_obj(w);
        cmh_jw_kuint(w, "dropped_ooms", tr->dropped_ooms);
        cmh_jw_end(w);
        cmh_jw_end(w);
        if (first > last) last = first;
    }
    uint32_t named[256], nnamed = 0; /* threads whose track has its name (a thread past 256 repeats it) */
    /* the state before the first entry (the trace may begin with memory held: a peak there is
     * peak's "before the first entry"), at the first entry's instant; a device with no entries
     * has only this, its end state */
    int64_t first = t0, shown_alloc, shown_res;
    for (int64_t i = 0; !timeless && i < cmh_replay_length(r); i++)
        if ((first = cmh_entry_time(s, cmh_replay_entry(r, i))) != 0) break;
    if (!first || first < t0) first = t0;
    counter_sample(w, counter, pid_of(c, dev), first - t0, st, &shown_alloc, &shown_res);
    if (peak_at == -1) peak_instant(c, s, dev, g, &pk, first);
    while (cmh_replay_step(r)) {
        const cmh_entry *e = cmh_replay_entry(r, cmh_replay_position(r));
        int64_t et = timeless ? t0 + (cmh_replay_position(r) + 1) * 1000 : cmh_entry_time(s, e); /* (0: the state before them) */
        if (!timeless && !et) continue;
        int64_t t = et > last ? et : last;
        last = t;
        if (e->action == CMH_ACT_MARK) { /* the thread's track gets its name before its first mark */
            uint32_t k = 0;
            while (k < nnamed && named[k] != cmh_entry_thread(s, e)) k++;
            if (k == nnamed && nnamed < 256) {
                char tn[160];
                /* by the name the reports give it ("recording thread 3 (tid ..., 'worker2')") */
                const cmh_thread_info *ti = cmh_entry_thread(s, e) ? cmh_snapshot_thread(s, cmh_entry_thread(s, e)) : NULL;
                const char *tname = ti && ti->name ? cmh_str(s, ti->name) : "";
                if (*tname) snprintf(tn, sizeof tn, "thread %u (%.120s)", cmh_entry_thread(s, e), tname);
                else snprintf(tn, sizeof tn, cmh_entry_thread(s, e) ? "thread %u" : "marks (thread unknown)", cmh_entry_thread(s, e));
                meta(w, "thread_name", pid_of(c, dev), THREAD_TID(cmh_entry_thread(s, e)), tn);
                named[nnamed++] = cmh_entry_thread(s, e);
            }
        }
        if (e->action == CMH_ACT_OOM || e->action == CMH_ACT_MARK) {
            int mark = e->action == CMH_ACT_MARK;
            instant_begin(w, mark ? "t" : "p", pid_of(c, dev), mark ? THREAD_TID(cmh_entry_thread(s, e)) : 0, t - t0, NULL);
            if (e->action == CMH_ACT_MARK) cmh_jw_kstr(w, "name", cmh_str(s, cmh_entry_name(s, e)));
            else {
                char what[128];
                uint64_t freed;
                char df[32] = "not known"; /* device free */
                if (cmh_entry_addr(s, e) != CMH_DEVICE_FREE_UNKNOWN) snprintf(df, sizeof df, "%" PRIu64, cmh_entry_addr(s, e));
                snprintf(what, sizeof what, "out of memory%s: %" PRIu64 " bytes requested, device free %s",
                         cmh_oom_retried(s, cmh_snapshot_trace(s, dev), (uint32_t)cmh_replay_position(r), &freed) ? ", retried" : "", cmh_entry_size(s, e), df);
                cmh_jw_kstr(w, "name", what);
            }
            cmh_jw_end(w);
        } else
            counter_sample(w, counter, pid_of(c, dev), t - t0, st, &shown_alloc, &shown_res);
        int64_t pos = cmh_replay_position(r), len = cmh_replay_length(r);
        /* without times, a peak before the first entry or after the last (the state the trace
         * starts from, the end reconciled with the segments) goes on the first or last sample */
        if (pos == peak_at || (timeless && peak_at != -2 && peak_at >= len && pos == len - 1))
            peak_instant(c, s, dev, g, &pk, t);
    }
    /* the end: the replay reconciled with the snapshot's segments (a trace that stops before the
     * snapshot leaves blocks it never freed): a last sample where that state differs, at the dump */
    if (cmh_replay_length(r) && (st->allocated_bytes[CMH_POOL_ALL].current != shown_alloc ||
                                 st->reserved_bytes[CMH_POOL_ALL].current != shown_res)) {
        int64_t end = timeless ? last + 1000 : s->dump_time_ns > last ? s->dump_time_ns : last;
        counter_sample(w, counter, pid_of(c, dev), end - t0, st, &shown_alloc, &shown_res);
        /* and why, where the trace stopped before its snapshot: the reports' words, on the drop */
        cmh_trace_gap gap;
        char why[1024];
        cmh_replay_gap(r, &gap);
        if (cmh_gap_stops_text(&gap, s->source == CMH_SRC_PYTORCH, " ", why, sizeof why)) {
            instant_begin(w, "p", pid_of(c, dev), 0, end - t0, why);
            cmh_jw_end(w);
        }
    }
    int rc = cmh_replay_status(r);
    cmh_replay_free(r);
    cmh_peak_report_free(&pk);
    cmh_sites_free(g);
    return rc == CMH_OK ? annotation_track(c, s, dev) : rc;
}

static int cmp_kernel(const void *a, const void *b)
{
    const cmh_kernel *x = *(const cmh_kernel *const *)a, *y = *(const cmh_kernel *const *)b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
    if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
    return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

static int kernel_tracks(const chrome_ctx *c, const cmh_snapshot *s)
{
    cmh_jw *w = c->w;
    int64_t t0 = c->t0;
    const cmh_kernel **k = malloc((s->nkernels ? s->nkernels : 1) * sizeof *k);
    if (!k) return CMH_ENOMEM;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nkernels; i++)
        if (s->kernels[i].start_ns && s->kernels[i].end_ns >= s->kernels[i].start_ns) k[n++] = &s->kernels[i];
    qsort(k, n, sizeof *k, cmp_kernel);
    for (uint32_t i = 0; i < n; i++) {
        const cmh_kernel *x = k[i];
        if (!i || x->device != k[i - 1]->device || x->stream != k[i - 1]->stream) { /* a new track: its name first */
            char name[32];
            snprintf(name, sizeof name, "stream %u", x->stream);
            meta(w, "thread_name", pid_of(c, x->device), x->stream, name);
        }
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "ph", "X");
        cmh_jw_kstr(w, "cat", "kernel");
        cmh_jw_kint(w, "pid", pid_of(c, x->device));
        cmh_jw_kuint(w, "tid", x->stream);
        cmh_jw_key(w, "ts");
        cmh_jw_us(w, x->start_ns - t0);
        cmh_jw_key(w, "dur");
        cmh_jw_us(w, x->end_ns - x->start_ns);
        cmh_jw_kstr(w, "name", cmh_str(s, x->name));
        cmh_jw_key(w, "args");
        cmh_jw_obj(w);
        cmh_jw_kuint(w, "correlation", x->correlation);
        cmh_jw_key(w, "grid");
        cmh_jw_arr(w);
        for (int d = 0; d < 3; d++) cmh_jw_int(w, x->grid[d]);
        cmh_jw_end(w);
        cmh_jw_key(w, "block");
        cmh_jw_arr(w);
        for (int d = 0; d < 3; d++) cmh_jw_int(w, x->block[d]);
        cmh_jw_end(w);
        cmh_jw_kuint(w, "registers", x->registers);
        cmh_jw_kuint(w, "shared_bytes", x->shared_bytes);
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
    free(k);
    return CMH_OK;
}

int64_t cmh_chrome_origin(const cmh_snapshot *s)
{
    return cmh_clock_origin(s);
}

struct cmh_chrome {
    FILE *fp;
    int64_t t0;
    uint64_t kernels_dropped;
    uint32_t snapshots, pytorch, timeless;
    cmh_jw w;
};

cmh_chrome *cmh_chrome_begin(FILE *fp, int64_t t0)
{
    cmh_chrome *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fp = fp;
    c->t0 = t0;
    cmh_jw_init(&c->w, fp);
    cmh_jw_obj(&c->w);
    cmh_jw_kstr(&c->w, "displayTimeUnit", "ns");
    cmh_jw_key(&c->w, "traceEvents");
    cmh_jw_arr(&c->w);
    return c;
}

int cmh_chrome_add(cmh_chrome *c, const cmh_snapshot *s, int pid_base, const char *label)
{
    int32_t devs[64];
    int nd = cmh_snapshot_devices(s, devs, 64);
    chrome_ctx x = {&c->w, c->t0, pid_base, label, nd, &c->timeless};
    int rc = CMH_OK;
    for (int d = 0; d < nd && d < 64 && rc == CMH_OK; d++) rc = device_track(&x, s, devs[d]);
    if (rc == CMH_OK) rc = kernel_tracks(&x, s);
    c->kernels_dropped += s->kernels_dropped;
    c->snapshots++;
    if (s->source == CMH_SRC_PYTORCH) c->pytorch++;
    return rc;
}

int cmh_chrome_end(cmh_chrome *c)
{
    cmh_jw_end(&c->w);
    cmh_jw_nl(&c->w);
    cmh_jw_key(&c->w, "otherData");
    cmh_jw_obj(&c->w);
    cmh_jw_kint(&c->w, "time_origin_ns", c->t0);
    cmh_jw_kstr(&c->w, "source", c->pytorch == c->snapshots && c->snapshots ? "pytorch" : c->pytorch ? "mixed" : "cumemhist");
    cmh_jw_kuint(&c->w, "kernels_dropped", c->kernels_dropped);
    if (c->snapshots > 1) cmh_jw_kuint(&c->w, "snapshots", c->snapshots);
    if (c->timeless) /* say that those tracks' times are made up */
        cmh_jw_kstr(&c->w, "untimed_devices", "a trace without times is drawn in entry order, 1 us per entry");
    cmh_jw_end(&c->w);
    cmh_jw_end(&c->w);
    fputc('\n', c->fp);
    int rc = ferror(c->fp) ? CMH_EIO : CMH_OK;
    free(c);
    return rc;
}

int cmh_export_chrome(const cmh_snapshot *s, FILE *fp)
{
    cmh_chrome *c = cmh_chrome_begin(fp, cmh_chrome_origin(s));
    if (!c) return CMH_ENOMEM;
    int rc = cmh_chrome_add(c, s, 0, NULL);
    int erc = cmh_chrome_end(c);
    return rc != CMH_OK ? rc : erc;
}
