/*
 * chrome.c - a snapshot as a Chrome / Perfetto trace (Trace Event Format JSON).
 *
 * Per device, a process "GPU n" with a memory counter track (allocated bytes, and reserved_free =
 * reserved - allocated stacked on top, after
 * every trace entry, from the replay), instants for OOMs and marks, and, when kernel timing was
 * recorded, one thread per CUDA stream carrying the kernels as complete ("X") slices.  Times
 * are microseconds from the earliest event (a double holds epoch microseconds only to 0.25 us);
 * the origin is in otherData.time_origin_ns.
 */
#include <inttypes.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/viz.h"

static void jstr(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(fp, "\\%c", *p);
        else if (*p < 0x20) fprintf(fp, "\\u%04x", *p);
        else fputc(*p, fp);
    }
    fputc('"', fp);
}

static double us(int64_t t, int64_t t0) { return ((double)t - (double)t0) / 1000.0; }

static int pid_of(int device) { return device < 0 ? 1000 : device; } /* pinned host memory: its own process */

int cmh_export_chrome(const cmh_snapshot *s, FILE *fp)
{
    int64_t t0 = INT64_MAX;
    for (uint32_t i = 0; i < s->nentries; i++)
        if (s->entries[i].time_ns && s->entries[i].time_ns < t0) t0 = s->entries[i].time_ns;
    for (uint32_t i = 0; i < s->nkernels; i++)
        if (s->kernels[i].start_ns && s->kernels[i].start_ns < t0) t0 = s->kernels[i].start_ns;
    if (t0 == INT64_MAX) t0 = 0;
    fputs("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n", fp);
    int first = 1;
#define SEP() (first ? (first = 0, "") : ",\n")
    int32_t devs[64];
    int nd = cmh_snapshot_devices(s, devs, 64);
    for (int d = 0; d < nd && d < 64; d++) {
        int dev = devs[d];
        fprintf(fp, "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": ", SEP(), pid_of(dev));
        if (dev < 0) jstr(fp, "pinned host memory");
        else fprintf(fp, "\"GPU %d\"", dev);
        fputs("}}", fp);
        cmh_replay *r = cmh_replay_new(s, dev);
        if (!r) return CMH_ENOMEM;
        const cmh_mem_stats *st = cmh_replay_stats(r);
        while (cmh_replay_step(r)) {
            const cmh_entry *e = cmh_replay_entry(r, cmh_replay_position(r));
            if (!e->time_ns) continue;
            double ts = us(e->time_ns, t0);
            if (e->action == CMH_ACT_OOM || e->action == CMH_ACT_MARK) {
                fprintf(fp, "%s{\"ph\": \"i\", \"s\": \"p\", \"pid\": %d, \"tid\": 0, \"ts\": %.3f, \"name\": ", SEP(),
                        pid_of(dev), ts);
                if (e->action == CMH_ACT_MARK) jstr(fp, cmh_str(s, e->name));
                else fprintf(fp, "\"out of memory: %" PRIu64 " bytes requested, %" PRIu64 " free\"", e->size, e->addr);
                fputc('}', fp);
                continue;
            }
            fprintf(fp,
                    "%s{\"ph\": \"C\", \"name\": \"gpu%d memory\", \"pid\": %d, \"ts\": %.3f, \"args\": {\"allocated\": %" PRId64
                    ", \"reserved_free\": %" PRId64 "}}",
                    SEP(), dev, pid_of(dev), ts, st->allocated_bytes[0].current,
                    st->reserved_bytes[0].current - st->allocated_bytes[0].current); /* stacked: reserved on top */
        }
        cmh_replay_free(r);
    }
    /* kernels: one track per stream */
    uint32_t named[256][2];
    int nnamed = 0;
    for (uint32_t i = 0; i < s->nkernels; i++) {
        const cmh_kernel *k = &s->kernels[i];
        if (!k->start_ns) continue;
        int seen = 0;
        for (int j = 0; j < nnamed; j++) seen |= named[j][0] == (uint32_t)k->device && named[j][1] == k->stream;
        if (!seen && nnamed < 256) {
            named[nnamed][0] = (uint32_t)k->device;
            named[nnamed][1] = k->stream;
            nnamed++;
            fprintf(fp, "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %u, \"args\": {\"name\": \"stream %u\"}}",
                    SEP(), pid_of(k->device), k->stream, k->stream);
        }
        fprintf(fp, "%s{\"ph\": \"X\", \"cat\": \"kernel\", \"pid\": %d, \"tid\": %u, \"ts\": %.3f, \"dur\": %.3f, \"name\": ", SEP(),
                pid_of(k->device), k->stream, us(k->start_ns, t0), ((double)k->end_ns - (double)k->start_ns) / 1000.0);
        jstr(fp, cmh_str(s, k->name));
        fprintf(fp,
                ", \"args\": {\"correlation\": %u, \"grid\": [%d, %d, %d], \"block\": [%d, %d, %d], \"registers\": %u"
                ", \"shared_bytes\": %u}}",
                k->correlation, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->registers,
                k->shared_bytes);
    }
#undef SEP
    fprintf(fp, "\n], \"otherData\": {\"time_origin_ns\": %" PRId64 ", \"source\": \"%s\", \"kernels_dropped\": %" PRIu64 "}}\n",
            t0, s->source == CMH_SRC_PYTORCH ? "pytorch" : "cumemhist", s->kernels_dropped);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}
