/*
 * report.c - the printing the report commands share (report.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

const char *rep_size(double v)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    static char ring[8][32];
    static int k;
    char *b = ring[k++ & 7];
    int i = 0;
    double a = v < 0 ? -v : v;
    while (a >= 1024 && i < 5) a /= 1024, v /= 1024, i++;
    if (i == 0) snprintf(b, 32, "%.0f B", v);
    else snprintf(b, 32, "%.1f %s", v, u[i]);
    return b;
}

const char *rep_when(int64_t t, int64_t t0)
{
    static char ring[8][32];
    static int k;
    char *b = ring[k++ & 7];
    if (!t || !t0) snprintf(b, 32, "-");
    else snprintf(b, 32, "%+.3fs", (double)(t - t0) / 1e9);
    return b;
}

int64_t rep_trace_start(const cmh_snapshot *s, int device)
{
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    for (uint32_t i = 0; t && i < t->nentries; i++)
        if (s->entries[t->first_entry + i].time_ns) return s->entries[t->first_entry + i].time_ns;
    return 0;
}

void rep_print_stack(const cmh_snapshot *s, uint32_t stack, int max, const char *indent)
{
    const char *names[64], *files[64];
    int64_t lines[64];
    int n = cmh_stack_lines(s, stack, max > 64 ? 64 : max, names, files, lines);
    for (int i = 0; i < n; i++) {
        if (!*files[i]) printf("%sat %s\n", indent, names[i]);
        else if (lines[i]) printf("%sat %s (%s:%" PRId64 ")\n", indent, names[i], files[i], lines[i]);
        else printf("%sat %s (%s)\n", indent, names[i], files[i]);
    }
    if (!stack) printf("%s<no stack: recorded with context none, or allocated before recording>\n", indent);
}

void rep_gpu_at(const cmh_snapshot *s, int device, int64_t t, const char *indent)
{
    if (!s->nkernels || !t) return;
    const cmh_kernel *run, *done;
    cmh_kernels_at(s, device, t, &run, &done);
    if (run) printf("%skernel running then: %s (stream %u)\n", indent, cmh_str(s, run->name), run->stream);
    if (done)
        printf("%slast kernel completed before: %s (stream %u, %.3f ms earlier)\n", indent, cmh_str(s, done->name),
               done->stream, (double)(t - done->end_ns) / 1e6);
}

void rep_notes(const cmh_report_base *b)
{
    if (b->dropped)
        printf("note: the ring dropped the %" PRIu64 " oldest entries; figures cover the last %" PRIu64 " only\n",
               b->dropped, b->entries);
    if (b->pytorch) printf("note: a PyTorch trace: sizes are the caching allocator's rounded block sizes\n");
}

void rep_json_base(cmh_jw *w, const char *path, const cmh_report_base *b)
{
    cmh_jw_kstr(w, "file", path);
    cmh_jw_kint(w, "device", b->device);
    cmh_jw_kuint(w, "trace_entries", b->entries);
    cmh_jw_kuint(w, "dropped_entries", b->dropped);
    cmh_jw_kstr(w, "source", b->pytorch ? "pytorch" : "recorder");
}

void rep_json_stack(cmh_jw *w, const cmh_snapshot *s, uint32_t stack, int max)
{
    const char *names[64], *files[64];
    int64_t lines[64];
    int n = cmh_stack_lines(s, stack, max > 64 ? 64 : max, names, files, lines);
    cmh_jw_arr(w);
    for (int i = 0; i < n; i++) {
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "name", names[i]);
        cmh_jw_kstr(w, "filename", files[i]);
        cmh_jw_kint(w, "line", lines[i]);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}

void rep_json_sites(cmh_jw *w, const cmh_snapshot *s, const cmh_site *sites, uint32_t n, int top, int frames,
                    uint64_t total, int leaks)
{
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < n && (int)i < top; i++) {
        const cmh_site *x = &sites[i];
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kuint(w, "bytes", x->bytes);
        cmh_jw_kuint(w, "blocks", x->count);
        cmh_jw_kdouble(w, "share", total ? (double)x->bytes / (double)total : 0.0, 4);
        cmh_jw_kint(w, "first_ns", x->first_ns);
        cmh_jw_kint(w, "last_ns", x->last_ns);
        if (leaks) {
            cmh_jw_kbool(w, "growing", x->growing);
            cmh_jw_kuint(w, "rises", x->rises);
            cmh_jw_kuint(w, "drops", x->drops);
            cmh_jw_kuint(w, "intervals", x->intervals);
            cmh_jw_kuint(w, "start_bytes", x->start_bytes);
        }
        cmh_jw_kstr(w, "site", cmh_stack_site(s, x->stack));
        cmh_jw_key(w, "stack");
        rep_json_stack(w, s, x->stack, frames ? frames : 64);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}
