/*
 * chrome.c - a snapshot as a Chrome / Perfetto trace (Trace Event Format JSON).
 *
 * Per device, a process "GPU n" with a memory counter track (allocated bytes, and reserved_free
 * = reserved - allocated stacked on top, after every trace entry, from the replay), instants
 * for OOMs and marks, and, when kernel timing was recorded, one thread per CUDA stream carrying
 * the kernels as complete ("X") slices.
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
#include "cumemhist/viz.h"
#include "jsonw.h"

static int pid_of(int device) { return device < 0 ? 1000 : device; } /* pinned host memory: its own process */

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

static int device_track(cmh_jw *w, const cmh_snapshot *s, int dev, int64_t t0)
{
    char name[64];
    if (dev < 0) snprintf(name, sizeof name, "pinned host memory");
    else snprintf(name, sizeof name, "GPU %d", dev);
    meta(w, "process_name", pid_of(dev), -1, name);
    cmh_replay *r = cmh_replay_new(s, dev);
    if (!r) return CMH_ENOMEM;
    const cmh_mem_stats *st = cmh_replay_stats(r);
    char counter[32];
    snprintf(counter, sizeof counter, "gpu%d memory", dev);
    int64_t last = t0;
    while (cmh_replay_step(r)) {
        const cmh_entry *e = cmh_replay_entry(r, cmh_replay_position(r));
        if (!e->time_ns) continue;
        int64_t t = e->time_ns > last ? e->time_ns : last;
        last = t;
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        if (e->action == CMH_ACT_OOM || e->action == CMH_ACT_MARK) {
            cmh_jw_kstr(w, "ph", "i");
            cmh_jw_kstr(w, "s", "p");
            cmh_jw_kint(w, "pid", pid_of(dev));
            cmh_jw_kint(w, "tid", 0);
            cmh_jw_key(w, "ts");
            cmh_jw_us(w, t - t0);
            if (e->action == CMH_ACT_MARK) cmh_jw_kstr(w, "name", cmh_str(s, e->name));
            else {
                char what[128];
                snprintf(what, sizeof what, "out of memory: %" PRIu64 " bytes requested, %" PRIu64 " free", e->size, e->addr);
                cmh_jw_kstr(w, "name", what);
            }
        } else {
            cmh_jw_kstr(w, "ph", "C");
            cmh_jw_kstr(w, "name", counter);
            cmh_jw_kint(w, "pid", pid_of(dev));
            cmh_jw_key(w, "ts");
            cmh_jw_us(w, t - t0);
            cmh_jw_key(w, "args");
            cmh_jw_obj(w);
            cmh_jw_kint(w, "allocated", st->allocated_bytes[CMH_POOL_ALL].current);
            /* stacked: reserved on top */
            cmh_jw_kint(w, "reserved_free", st->reserved_bytes[CMH_POOL_ALL].current - st->allocated_bytes[CMH_POOL_ALL].current);
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
    }
    int rc = cmh_replay_status(r);
    cmh_replay_free(r);
    return rc;
}

static int cmp_kernel(const void *a, const void *b)
{
    const cmh_kernel *x = *(const cmh_kernel *const *)a, *y = *(const cmh_kernel *const *)b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
    if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
    return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

static int kernel_tracks(cmh_jw *w, const cmh_snapshot *s, int64_t t0)
{
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
            meta(w, "thread_name", pid_of(x->device), x->stream, name);
        }
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "ph", "X");
        cmh_jw_kstr(w, "cat", "kernel");
        cmh_jw_kint(w, "pid", pid_of(x->device));
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

int cmh_export_chrome(const cmh_snapshot *s, FILE *fp)
{
    int64_t t0 = INT64_MAX;
    for (uint32_t i = 0; i < s->nentries; i++)
        if (s->entries[i].time_ns && s->entries[i].time_ns < t0) t0 = s->entries[i].time_ns;
    for (uint32_t i = 0; i < s->nkernels; i++)
        if (s->kernels[i].start_ns && s->kernels[i].start_ns < t0) t0 = s->kernels[i].start_ns;
    if (t0 == INT64_MAX) t0 = 0;
    cmh_jw w;
    cmh_jw_init(&w, fp);
    cmh_jw_obj(&w);
    cmh_jw_kstr(&w, "displayTimeUnit", "ns");
    cmh_jw_key(&w, "traceEvents");
    cmh_jw_arr(&w);
    int32_t devs[64];
    int nd = cmh_snapshot_devices(s, devs, 64);
    int rc = CMH_OK;
    for (int d = 0; d < nd && d < 64 && rc == CMH_OK; d++) rc = device_track(&w, s, devs[d], t0);
    if (rc == CMH_OK) rc = kernel_tracks(&w, s, t0);
    if (rc != CMH_OK) return rc;
    cmh_jw_end(&w);
    cmh_jw_nl(&w);
    cmh_jw_key(&w, "otherData");
    cmh_jw_obj(&w);
    cmh_jw_kint(&w, "time_origin_ns", t0);
    cmh_jw_kstr(&w, "source", s->source == CMH_SRC_PYTORCH ? "pytorch" : "cumemhist");
    cmh_jw_kuint(&w, "kernels_dropped", s->kernels_dropped);
    cmh_jw_end(&w);
    cmh_jw_end(&w);
    fputc('\n', fp);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}
