/*
 * report.c - the printing and attribution the report commands share (report.h): sizes, times
 * and devices as people read them, a site and its frames in text and JSON, the notes every
 * report ends with, and a grouped row's sites.  Reading a record and running a report over its
 * devices is report_run.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemhist/gapwords.h"
#include "cumemhist/leakwords.h"
#include "report.h"
#include "svg.h"
#include "cumemhist/owners.h"

rep_attr rep_attribution;
int rep_raw_frames;
const char *const rep_group_names[] = {"site", "stack", "module", "file", "package", NULL}; /* the cmh_group_by order */

const char *rep_size(double v) { return cmh_svg_size(v); }

const char *rep_device_free(uint64_t device_free)
{
    return device_free == CMH_DEVICE_FREE_UNKNOWN ? "not known" : rep_size((double)device_free);
}

void rep_json_device_free(cmh_jw *w, const char *key, uint64_t device_free)
{
    cmh_jw_key(w, key);
    if (device_free == CMH_DEVICE_FREE_UNKNOWN) cmh_jw_null(w);
    else cmh_jw_uint(w, device_free);
}

/* The time from t0 to t as every text report prints it (cmh_when_text). */
static void rep_seconds(char *b, size_t cap, int64_t t, int64_t t0) { cmh_when_text(t, t0, b, cap); }

int rep_wide(const char *s)
{
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) == 0x80;
    return n;
}

const char *rep_when(int64_t t, int64_t t0)
{
    static char ring[8][32];
    static int k;
    char *b = ring[k++ & 7];
    if (!t || !t0) snprintf(b, 32, "-");
    else rep_seconds(b, 32, t, t0);
    return b;
}

const char *rep_at(int64_t index, int64_t t, int64_t t0)
{
    static char ring[8][64];
    static int k;
    char *b = ring[k++ & 7];
    if (!t || !t0) snprintf(b, 64, "entry %" PRId64, index);
    else {
        int n = snprintf(b, 64, "entry %" PRId64 ", ", index);
        rep_seconds(b + n, (size_t)(64 - n), t, t0);
    }
    return b;
}

/* Not-recorded memory that grew by no more than this since the first allocation is the memory
 * that was there before it (the driver hands out device memory in 2 MiB pages) */
#define NOT_RECORDED_SLACK (2ull << 20)

int rep_not_recorded_grew(const cmh_owners_report *o, uint64_t *since)
{
    uint64_t now = o->sample_used > o->sample_recorded ? o->sample_used - o->sample_recorded : 0;
    *since = !o->baseline.known ? now : now > o->baseline.unrecorded ? now - o->baseline.unrecorded : 0;
    return !o->baseline.known || *since > NOT_RECORDED_SLACK;
}

const char *rep_not_recorded_line(const cmh_owners_report *o, int64_t t0, char *buf, size_t cap)
{
    if (!o->sample_known || o->sample_used <= o->sample_recorded) return NULL;
    char when[48] = "";
    uint64_t since, excess = o->sample_used - o->sample_recorded;
    if (o->sample_time_ns && t0) snprintf(when, sizeof when, " (%s)", rep_when(o->sample_time_ns, t0));
    /* what came since has causes beside an unhooked path: on a real GPU (H200, CUDA 13) a PyTorch
     * job's context grew 72-80 MiB after its first allocation with every allocation path hooked,
     * the driver loading kernels lazily (CUDA_MODULE_LOADING=LAZY, the default since 12.2) and
     * NCCL and cuBLAS setting up their handles */
    /* on a GPU nearly every record has it: the context's own memory, there before the first
     * allocation and no doing of the program's; said plainly, in one line, when that is all */
    if (!rep_not_recorded_grew(o, &since)) {
        snprintf(buf, cap,
                 "not recorded: %s in use that no recorded call made, as at the first allocation: the CUDA context's own and "
                 "other processes' memory, not this program's (owners counts it, peak does not)",
                 rep_size((double)excess));
        return buf;
    }
    if (o->baseline.known && o->baseline.unrecorded) {
        snprintf(buf, cap,
                 "not recorded: the latest cuMemGetInfo%s had %s of %s in use, %s more than the %s the record held then: %s was "
                 "there at the first allocation (the CUDA context, other processes), %s came since, which no recorded call made "
                 "(the driver's own as kernels load lazily and libraries make their handles, a path not hooked, another "
                 "process); peak counts recorded memory only, owners adds the rest as 'not recorded'",
                 when, rep_size((double)o->sample_used), rep_size((double)o->sample_total), rep_size((double)excess),
                 rep_size((double)o->sample_recorded), rep_size((double)o->baseline.unrecorded), rep_size((double)since));
        return buf;
    }
    snprintf(buf, cap,
             "not recorded: the latest cuMemGetInfo%s had %s of %s in use, %s more than the %s the record held then: memory no "
             "recorded call made (the CUDA context, other processes, a path not hooked); peak counts recorded memory only, "
             "owners adds the rest as 'not recorded'",
             when, rep_size((double)o->sample_used), rep_size((double)o->sample_total), rep_size((double)(o->sample_used - o->sample_recorded)),
             rep_size((double)o->sample_recorded));
    return buf;
}

const char *rep_reconciled_line(int64_t trace_peak, int64_t end_reserved, char *buf, size_t cap)
{
    if (trace_peak < 0 || end_reserved <= trace_peak) return NULL;
    snprintf(buf, cap,
             "reconciled: the final segments hold %s more than any entry left (reserved %s at the end, %s at most after an entry): "
             "the record lacks the entries that made it, and peak and owners both take the final state for the reserved peak",
             rep_size((double)(end_reserved - trace_peak)), rep_size((double)end_reserved), rep_size((double)trace_peak));
    return buf;
}

void rep_json_reconciled(cmh_jw *w, int64_t trace_peak, int64_t end_reserved)
{
    char line[512];
    cmh_jw_key(w, "reconciled");
    if (!rep_reconciled_line(trace_peak, end_reserved, line, sizeof line)) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kint(w, "trace_peak_reserved", trace_peak);
    cmh_jw_kint(w, "end_reserved", end_reserved);
    cmh_jw_kstr(w, "says", line);
    cmh_jw_end(w);
}

void rep_json_not_recorded(cmh_jw *w, const cmh_owners_report *o, int64_t t0)
{
    char line[512];
    cmh_jw_key(w, "not_recorded");
    if (!rep_not_recorded_line(o, t0, line, sizeof line)) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    rep_json_time(w, "sample_time_ns", o->sample_time_ns);
    cmh_jw_kuint(w, "used", o->sample_used);
    cmh_jw_kuint(w, "total", o->sample_total);
    cmh_jw_kuint(w, "recorded", o->sample_recorded);
    cmh_jw_kuint(w, "bytes", o->sample_used - o->sample_recorded);
    /* of them, what was there at the first allocation (the context's), and what came since */
    uint64_t since;
    int grew = rep_not_recorded_grew(o, &since);
    if (o->baseline.known) {
        cmh_jw_kuint(w, "at_first_allocation", o->baseline.unrecorded);
        cmh_jw_kuint(w, "since", since);
    } else {
        cmh_jw_knull(w, "at_first_allocation");
        cmh_jw_knull(w, "since");
    }
    cmh_jw_kbool(w, "grew", grew);
    cmh_jw_kstr(w, "says", line);
    cmh_jw_end(w);
}

void rep_json_time(cmh_jw *w, const char *key, int64_t t)
{
    if (t) cmh_jw_kint(w, key, t);
    else cmh_jw_key(w, key), cmh_jw_null(w);
}

int64_t rep_trace_start(const cmh_snapshot *s, int device)
{
    (void)device; /* one origin for the record: a device's times read against the job's start */
    return cmh_clock_origin(s);
}

const char *rep_frame(const cmh_snapshot *s, const cmh_frame *f)
{
    static char ring[4][1400];
    static int k;
    return cmh_frame_text(s, f, ring[k++ & 3], sizeof ring[0]);
}

const char *rep_site_name(const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x)
{
    if (!g) return x->stack ? rep_frame(s, &s->frames[s->stack_frames[s->stacks[x->stack].first]]) : "<no stack recorded>";
    if (rep_attribution.group_by == CMH_GROUP_MODULE) { /* the owner, by the name every output gives it */
        static char ring[4][256];
        static int k;
        return rep_owner_name(g, x->group, ring[k++ & 3], sizeof ring[0]);
    }
    if (rep_attribution.group_by == CMH_GROUP_PACKAGE) return cmh_sites_package_name(g, x->group);
    const cmh_frame *f = cmh_sites_frame(g, x->group);
    if (!f) { /* what the record's options say of it, in the words every output gives */
        static char ring[4][200];
        static int k;
        char *b = ring[k++ & 3];
        snprintf(b, sizeof ring[0], "<no stack: %s>", cmh_no_stack_reason(s));
        return b;
    }
    if (rep_attribution.group_by == CMH_GROUP_FILE) return cmh_str(s, f->filename);
    return rep_group_site(s, g, x->group);
}

const char *rep_pool_name(const cmh_snapshot *s, const cmh_sites *g, uint64_t handle, int64_t at_ns, char *buf, size_t n)
{
    cmh_pool_desc *d = NULL;
    uint32_t nd = 0;
    const cmh_pool_desc *p = cmh_pool_descs(s, &d, &nd) == CMH_OK ? cmh_pool_desc_find(d, nd, handle, at_ns) : NULL;
    if (p && p->kind == CMH_POOL_DEFAULT) snprintf(buf, n, "the default pool of device %d", p->device);
    else if (p && p->kind == CMH_POOL_PRIVATE && p->stack && p->stack < s->nstacks && s->stacks[p->stack].count) {
        const cmh_frame *f = g ? cmh_sites_frame(g, cmh_sites_group(g, p->stack)) : NULL;
        if (!f) f = &s->frames[s->stack_frames[s->stacks[p->stack].first]];
        snprintf(buf, n, "private pool #%u (cuMemPoolCreate at %.200s)", p->number, rep_frame(s, f));
    } else if (p && p->kind == CMH_POOL_PRIVATE) snprintf(buf, n, "private pool #%u (0x%" PRIx64 ")", p->number, handle);
    else snprintf(buf, n, "pool 0x%" PRIx64, handle); /* an older record: its kind not said */
    free(d);
    return buf;
}

const char *rep_group_site(const cmh_snapshot *s, const cmh_sites *g, uint32_t group)
{
    const cmh_frame *f = g ? cmh_sites_frame(g, group) : NULL;
    if (!f) return "<no stack recorded>";
    const char *why = cmh_sites_no_user_frame(g, cmh_sites_stack(g, group));
    if (!why) return rep_frame(s, f);
    static char ring[4][1500];
    static int k;
    char *b = ring[k++ & 3];
    snprintf(b, sizeof ring[0], "(%s: %.1400s)", why, rep_frame(s, f));
    return b;
}

uint32_t rep_stack_lines(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, int max, rep_line *out, uint32_t cap,
                         uint32_t *left_out, uint32_t *more_out)
{
    const cmh_stack *st = &s->stacks[stack < s->nstacks ? stack : 0];
    /* from the site outward, in every grouping: grouped by whole stacks too, the frames that
     * tell two rows apart are the callers, not the machinery inside the site (six frames of
     * libffi and _ctypes, or of PyTorch's stack walker and allocator, the same on every row) */
    const cmh_frame *site = g ? cmh_sites_site_of(g, stack) : NULL;
    /* from a user's frame, the user's frames; from a fallback (all machinery), every frame */
    int hide = site && !cmh_sites_machinery(g, (uint32_t)(site - s->frames));
    int started = !site;
    uint32_t left = 0, more = 0, n = 0;
    for (uint32_t i = 0; i < st->count; i++) {
        uint32_t fid = s->stack_frames[st->first + i];
        const cmh_frame *f = &s->frames[fid];
        if (!started) started = f == site;
        if (!started || (hide && f != site &&
                         ((cmh_sites_machinery(g, fid) && !cmh_sites_cut_marker(g, fid)) || cmh_sites_stdlib_plumbing(g, fid)))) {
            left++;
            continue;
        }
        /* recursion: the same frame (function, file, line) again right outward of the last one
         * shown is one line, counted (a recursive f's N frames read "f (x12 recursive)") */
        if (n && !more && out[n - 1].f == f) {
            out[n - 1].repeat++;
            continue;
        }
        if (n >= (uint32_t)max || n >= cap) {
            more++;
            continue;
        }
        out[n++] = (rep_line){f, 1};
    }
    if (left_out) *left_out = left;
    if (more_out) *more_out = more;
    return n;
}

const char *rep_line_text(const cmh_snapshot *s, const rep_line *l)
{
    static char ring[4][1500];
    static int k;
    char *b = ring[k++ & 3];
    if (l->repeat > 1) snprintf(b, sizeof ring[0], "%.1400s (x%u recursive)", rep_frame(s, l->f), l->repeat);
    else snprintf(b, sizeof ring[0], "%s", rep_frame(s, l->f));
    return b;
}

void rep_print_frames(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, int max, const char *indent)
{
    rep_line lines[64];
    uint32_t left = 0, more = 0;
    uint32_t n = rep_stack_lines(s, g, stack, max, lines, 64, &left, &more);
    for (uint32_t i = 0; i < n; i++) printf("%sat %s\n", indent, rep_line_text(s, &lines[i]));
    /* grouped by stack, what the rows leave out is said: the whole stack is what they group by */
    if (g && cmh_sites_group_by(g) == CMH_GROUP_STACK && (left || more)) {
        printf("%s(", indent);
        if (left) printf("%u frame%s of machinery left out", left, left == 1 ? "" : "s");
        if (more) printf("%s%u more frame%s outward", left ? ", " : "", more, more == 1 ? "" : "s");
        printf("; --json lists them all)\n");
    }
}

void rep_print_callers(const cmh_snapshot *s, const cmh_site *x, const char *indent)
{
    char line[8192];
    if (cmh_site_callers_text(s, x, line, sizeof line)) printf("%s%s\n", indent, line);
    if (cmh_site_callers_growth_text(s, x, line, sizeof line)) printf("%s%s\n", indent, line);
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

const char *rep_releasable_how(uint64_t releasable, uint64_t pool_cache, uint64_t expandable_pages)
{
    /* what it is made of, by what gives it back: empty segments, the free pages of expandable
     * segments still in use (empty_cache() unmaps them too), a stream-ordered pool's cache */
    int empty = releasable > pool_cache + expandable_pages, pages = expandable_pages > 0;
    if (!releasable) return "nothing empty_cache() or a pool trim could give back";
    if (!pool_cache) {
        if (!pages) return "empty segments: empty_cache() gives it back";
        return empty ? "empty segments and expandable segments' free pages: empty_cache() gives it back"
                     : "expandable segments' free pages: empty_cache() unmaps them";
    }
    if (pool_cache >= releasable) return "a stream-ordered pool's cache: cuMemPoolTrimTo gives it back, not empty_cache()";
    if (!pages) return "empty segments, given back by empty_cache(), and a pool's cache, by cuMemPoolTrimTo";
    return empty ? "empty segments and expandable segments' free pages, given back by empty_cache(), and a pool's cache, by "
                   "cuMemPoolTrimTo"
                 : "expandable segments' free pages, given back by empty_cache(), and a pool's cache, by cuMemPoolTrimTo";
}

void rep_gap_notes_to(FILE *fp, const char *lead, const cmh_report_base *b, int starts)
{
    char buf[1024];
    if (cmh_gap_stops_text(&b->gap, b->pytorch, "\n      ", buf, sizeof buf)) fprintf(fp, "%snote: %s\n", lead, buf);
    if (starts && cmh_gap_starts_text(&b->gap, b->pytorch, b->dropped, "\n      ", buf, sizeof buf))
        fprintf(fp, "%snote: %s\n", lead, buf);
    if (cmh_gap_pools_text(&b->gap, "\n      ", buf, sizeof buf)) fprintf(fp, "%snote: %s\n", lead, buf);
}

void rep_gap_notes(const cmh_report_base *b, int starts) { rep_gap_notes_to(stdout, "", b, starts); }

void rep_vmm_unmapped_note(const cmh_snapshot *s, int device)
{
    uint32_t n = 0;
    uint64_t b = s->source == CMH_SRC_PYTORCH ? 0 : cmh_owners_vmm_unmapped(s, device, &n);
    if (!b) return;
    printf("note: the process also held %s of physical memory made with cuMemCreate and mapped nowhere at the end\n"
           "      (%s): in no segment, so outside these figures; owners counts it, leaks lists its sites\n",
           rep_size((double)b), rep_count(n, "handle", "handles"));
}

/* ---- failed driver calls (.cmh driver_errors) ---- */

void rep_driver_errors_note(const cmh_snapshot *s) { cmh_driver_errors_write(stdout, s); }

void rep_json_driver_errors(cmh_jw *w, const cmh_snapshot *s)
{
    cmh_jw_key(w, "driver_errors");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < s->ndrv_errors; i++) {
        const cmh_drv_error *e = &s->drv_errors[i];
        char nb[32], what[256], site[1400];
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "call", e->call);
        cmh_jw_kint(w, "result", e->result);
        cmh_jw_kstr(w, "error", cmh_cuda_error_name(e->result, nb, sizeof nb));
        cmh_jw_kuint(w, "count", e->count);
        cmh_jw_key(w, "calls");
        cmh_jw_arr(w);
        for (uint32_t j = 0; j < e->nsites; j++) {
            const cmh_drv_error_site *x = &e->sites[j];
            const char *f = cmh_driver_error_site(s, x->stack, site, sizeof site);
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "address", x->addr);
            cmh_jw_kuint(w, "size", x->size);
            cmh_jw_kuint(w, "thread", x->thread);
            cmh_jw_kint(w, "time_ns", x->time_ns);
            if (cmh_driver_error_judged(e->call)) cmh_jw_kstr(w, "what", cmh_driver_error_what(s, x->addr, x->time_ns, what, sizeof what));
            else cmh_jw_knull(w, "what");
            if (f) cmh_jw_kstr(w, "site", f);
            else cmh_jw_knull(w, "site");
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}

void rep_vmm_physical_note(const cmh_snapshot *s, int device)
{
    cmh_physical_peak ph;
    if (s->source == CMH_SRC_PYTORCH || device < 0 || cmh_physical_peak_compute(s, device, &ph) != CMH_OK || !ph.known) return;
    printf("note: device memory as the driver charges it, each cuMemCreate handle whole and once: %s at the end, %s at\n"
           "      its peak; the figures above count the mapped ranges (a handle mapped at two addresses twice, one\n"
           "      mapped in part by the part, one held and mapped nowhere not at all); owners and peak count the handles\n",
           rep_size((double)ph.at_end), rep_size((double)ph.peak));
}

void rep_json_vmm_physical(cmh_jw *w, const cmh_snapshot *s, int device)
{
    cmh_physical_peak ph;
    int known = s->source != CMH_SRC_PYTORCH && device >= 0 && cmh_physical_peak_compute(s, device, &ph) == CMH_OK && ph.known;
    cmh_jw_key(w, "physical");
    if (!known) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kint(w, "end", ph.at_end);
    cmh_jw_kint(w, "peak", ph.peak);
    cmh_jw_end(w);
}

void rep_json_vmm_unmapped(cmh_jw *w, const cmh_snapshot *s, int device)
{
    uint32_t n = 0;
    uint64_t b = s->source == CMH_SRC_PYTORCH ? 0 : cmh_owners_vmm_unmapped(s, device, &n);
    cmh_jw_key(w, "vmm_unmapped");
    cmh_jw_obj(w);
    cmh_jw_kuint(w, "bytes", b);
    cmh_jw_kuint(w, "handles", n);
    cmh_jw_end(w);
}

void rep_json_gap(cmh_jw *w, const cmh_report_base *b)
{
    char buf[1024];
    const cmh_trace_gap *g = &b->gap;
    cmh_jw_nl(w);
    cmh_jw_key(w, "trace_gap");
    cmh_jw_obj(w);
    cmh_jw_kbool(w, "stops_early", g->unfreed_blocks || g->unfreed_segments);
    cmh_jw_kuint(w, "unfreed_blocks", g->unfreed_blocks);
    cmh_jw_kuint(w, "unfreed_bytes", g->unfreed_bytes);
    cmh_jw_kuint(w, "unfreed_segments", g->unfreed_segments);
    cmh_jw_kuint(w, "unfreed_reserved", g->unfreed_reserved);
    cmh_jw_kbool(w, "starts_late", g->untraced_blocks != 0);
    cmh_jw_kuint(w, "untraced_blocks", g->untraced_blocks);
    cmh_jw_kuint(w, "untraced_bytes", g->untraced_bytes);
    cmh_jw_kuint(w, "pools_given_back", g->pools_given_back);
    cmh_jw_key(w, "says");
    cmh_jw_arr(w);
    if (cmh_gap_stops_text(g, b->pytorch, " ", buf, sizeof buf)) cmh_jw_str(w, buf);
    if (cmh_gap_starts_text(g, b->pytorch, b->dropped, " ", buf, sizeof buf)) cmh_jw_str(w, buf);
    if (cmh_gap_pools_text(g, " ", buf, sizeof buf)) cmh_jw_str(w, buf);
    cmh_jw_end(w);
    cmh_jw_end(w);
}

void rep_unsplit_note(const cmh_peak_report *p, const char *lead)
{
    char buf[256];
    if (p->base.history && cmh_unsplit_text(p, buf, sizeof buf)) printf("%s%s\n", lead, buf);
}

void rep_expandable_note(const cmh_frag_report *p, int in_summary)
{
    if (!p->expandable_segs) return;
    /* (PyTorch's CUDACachingAllocator: map_block adds to reserved_bytes only, never to segment;
     * free_block leaves an expandable segment's blocks out of inactive_split) */
    char segs[64], fr[32], tr[32];
    snprintf(segs, sizeof segs, "%s", rep_count(p->expandable_segs, "expandable segment", "expandable segments"));
    snprintf(fr, sizeof fr, "%s", rep_size((double)p->expandable_free));
    snprintf(tr, sizeof tr, "%s", rep_size((double)p->trapped_expandable));
    /* summary: on stderr, its standard output PyTorch's text to the byte (a run with expandable
     * segments printed memory_summary()'s table and nothing else, and still does) */
    if (in_summary)
        fprintf(stderr,
                "cumemhist: summary: device %d: the table has PyTorch's own counts: expandable segments are in GPU reserved\n"
                "  memory only, not in GPU reserved segments, and their free bytes not in Non-releasable memory (PyTorch\n"
                "  leaves them out of both); at the end %s (mapped ranges) hold%s %s free, %s of it\n"
                "  short of a whole page, which empty_cache() cannot unmap (`cumemhist frag`: segments, trapped)\n",
                p->base.device, segs, p->expandable_segs == 1 ? "s" : "", fr, tr);
    else
        printf("note: `cumemhist summary`, as PyTorch's memory_summary(), counts the %s neither in GPU reserved\n"
               "      segments nor in Non-releasable memory (PyTorch leaves them out of both: its 0 there is its\n"
               "      definition); their %s free, %s of it trapped, are in the figures above\n",
               segs, fr, tr);
}

void rep_beyond_torch_note(const cmh_beyond_torch *b, int device)
{
    if (!b->known || !b->nrows) return;
    /* (on stderr, as the expandable note: a co-recorded run's standard output is PyTorch's text) */
    fprintf(stderr, "cumemhist: summary: device %d: beyond PyTorch's pool (the table), the driver held %s for the process\n"
                    "  at Cur Usage's moment, which memory_summary() does not count:",
            device, rep_size((double)b->bytes));
    for (uint32_t i = 0; i < b->nrows; i++) {
        const cmh_owner_row *r = &b->rows[i];
        fprintf(stderr, "%s\n    %10s  %s", i ? "," : "", rep_size((double)r->bytes), r->name);
        if (r->allocations) fprintf(stderr, " (%s)", rep_count(r->allocations, "allocation", "allocations"));
    }
    if (b->used_known)
        fprintf(stderr, ";\n  with %s no recorded call made (the CUDA context, other processes), the device had %s of %s\n"
                        "  in use (`cumemhist owners`: every byte by owner)\n",
                rep_size((double)b->unexplained), rep_size((double)b->used), rep_size((double)b->total));
    else fprintf(stderr, "\n  (`cumemhist owners`: every byte by owner)\n");
}

void rep_json_beyond_torch(cmh_jw *w, const cmh_beyond_torch *b)
{
    cmh_jw_key(w, "beyond_pytorch");
    if (!b->known) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kuint(w, "bytes", b->bytes);
    cmh_jw_kuint(w, "allocations", b->allocations);
    cmh_jw_kuint(w, "pytorch_pool", b->torch_pool);
    cmh_jw_key(w, "owners");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < b->nrows; i++) {
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "owner", b->rows[i].name);
        cmh_jw_kuint(w, "bytes", b->rows[i].bytes);
        cmh_jw_kuint(w, "allocations", b->rows[i].allocations);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    if (b->used_known) {
        cmh_jw_kuint(w, "used", b->used);
        cmh_jw_kuint(w, "total", b->total);
        cmh_jw_kuint(w, "not_recorded", b->unexplained);
    } else {
        cmh_jw_knull(w, "used");
        cmh_jw_knull(w, "total");
        cmh_jw_knull(w, "not_recorded");
    }
    cmh_jw_end(w);
}

void rep_vmm_ranges_note(const cmh_frag_report *p)
{
    if (!p->vmm_segs) return;
    printf("note: %s %s other callers' cuMemMap ranges, not PyTorch's expandable segments (its allocator\n"
           "      did not map them: memory_summary() and empty_cache() never see them): %s reserved, %s free; by owner:",
           rep_count(p->vmm_segs, "segment", "segments"), p->vmm_segs == 1 ? "is" : "are", rep_size((double)p->vmm_reserved),
           rep_size((double)p->vmm_free));
    for (uint32_t k = 0; k < p->nvmm_owners; k++)
        printf("%s\n      %10s  %s (%s)", k ? "," : "", rep_size((double)p->vmm_owners[k].reserved), p->vmm_owners[k].name,
               rep_count(p->vmm_owners[k].segs, "range", "ranges"));
    putchar('\n');
}

const char *rep_vmm_range_tag(const cmh_frag_report *p, const cmh_frag_seg *g, char *buf, size_t n)
{
    if (g->expandable) snprintf(buf, n, "  (expandable)");
    else if (g->vmm && g->vmm_owner < p->nvmm_owners) snprintf(buf, n, "  (cuMemMap: %s)", p->vmm_owners[g->vmm_owner].name);
    else if (n) *buf = 0;
    return buf;
}

void rep_json_vmm_ranges(cmh_jw *w, const cmh_frag_report *p)
{
    cmh_jw_key(w, "vmm_ranges");
    if (!p->vmm_segs) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kuint(w, "segments", p->vmm_segs);
    cmh_jw_kuint(w, "reserved", p->vmm_reserved);
    cmh_jw_kuint(w, "free", p->vmm_free);
    cmh_jw_key(w, "owners");
    cmh_jw_arr(w);
    for (uint32_t k = 0; k < p->nvmm_owners; k++) {
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "owner", p->vmm_owners[k].name);
        cmh_jw_kuint(w, "segments", p->vmm_owners[k].segs);
        cmh_jw_kuint(w, "reserved", p->vmm_owners[k].reserved);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_end(w);
}

void rep_json_expandable(cmh_jw *w, const cmh_frag_report *p)
{
    cmh_jw_key(w, "expandable_at_end");
    if (!p->expandable_segs) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kuint(w, "segments", p->expandable_segs);
    cmh_jw_kuint(w, "free", p->expandable_free);
    cmh_jw_kuint(w, "trapped", p->trapped_expandable);
    cmh_jw_end(w);
}

void rep_json_unsplit(cmh_jw *w, const cmh_peak_report *p)
{
    if (p->base.history) cmh_jw_kint(w, "alloc_unsplit_at_peak", p->alloc_unsplit);
    else cmh_jw_knull(w, "alloc_unsplit_at_peak");
}

void rep_notes(const cmh_report_base *b)
{
    if (b->dropped)
        printf("note: the ring dropped the %s; figures cover the last %" PRIu64 " only%s\n",
               rep_count(b->dropped, "oldest entry", "oldest entries"), b->entries, b->dropped_ooms ? "," : "");
    if (b->dropped && b->dropped_ooms) /* a counter, as PyTorch's num_ooms: the OOMs among them still count */
        printf("      but the OOM count: %" PRIu64 " of the dropped entries %s, counted as the program's\n", b->dropped_ooms,
               b->dropped_ooms == 1 ? "was an OOM" : "were OOMs");
    if (b->pytorch) printf("note: a PyTorch trace: sizes are the caching allocator's rounded block sizes\n");
    if (!b->history && b->dropped_ooms) /* (enabled=state counts the OOMs all the same) */
        printf("note: no history on this device (%s): only the state at the end is known, and %s, counted all the same\n",
               b->nohist_cause, rep_count(b->dropped_ooms, "out-of-memory error", "out-of-memory errors"));
    else if (!b->history)
        printf("note: no history on this device (%s): only the state at the end is known\n", b->nohist_cause);
}

void rep_json_base(cmh_jw *w, const rep_section *sec, const cmh_report_base *b)
{
    cmh_jw_kstr(w, "file", sec->path);
    cmh_jw_kint(w, "device", sec->device);
    rep_json_process(w, sec->s);
    rep_json_children(w, sec->path, sec->s);
    cmh_jw_kuint(w, "trace_entries", b->entries);
    cmh_jw_kuint(w, "dropped_entries", b->dropped);
    cmh_jw_kstr(w, "source", b->pytorch ? "pytorch" : "recorder");
    cmh_jw_kbool(w, "history", b->history);
    /* why not (cmh_no_history_cause: "recorded with enabled=state"), as the text says it, export's
     * json its "no_history_cause" and SQLite's devices.no_history_cause */
    if (!b->history && b->nohist_cause) cmh_jw_kstr(w, "no_history_cause", b->nohist_cause);
}

void rep_json_frame(cmh_jw *w, const cmh_snapshot *s, const cmh_frame *f)
{
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "function", cmh_str(s, f->name));
    cmh_jw_kstr(w, "file", cmh_str(s, f->filename));
    cmh_jw_kint(w, "line", f->line);
    cmh_jw_kstr(w, "module", cmh_frame_module(s, f));
    cmh_jw_end(w);
}

void (*rep_json_site_hook)(cmh_jw *w, const cmh_site *x, void *arg);
void *rep_json_site_hook_arg;

void rep_json_site(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x, uint64_t total, int leaks)
{
    cmh_jw_obj(w);
    const cmh_frame *f = g ? cmh_sites_frame(g, x->group) : NULL;
    cmh_jw_key(w, "site");
    if (f) rep_json_frame(w, s, f);
    else cmh_jw_null(w);
    cmh_jw_kstr(w, "owner", g ? cmh_sites_owner(g, x->group) : "");
    char oname[256];
    cmh_jw_kstr(w, "owner_name", rep_owner_name(g, x->group, oname, sizeof oname)); /* owners' row, the [owner] tag */
    cmh_jw_kuint(w, "bytes", x->bytes);
    cmh_jw_kuint(w, "blocks", x->count);
    cmh_jw_kdouble(w, "share", total ? (double)x->bytes / (double)total : 0.0, 4);
    rep_json_time(w, "first_ns", x->first_ns);
    rep_json_time(w, "last_ns", x->last_ns);
    if (leaks) {
        char words[512];
        int unjudged = x->verdict == CMH_LEAK_UNJUDGED && x->unjudged_why;
        cmh_jw_kstr(w, "verdict", x->time_verdict == CMH_TIME_LEVEL && !unjudged ? "level" : cmh_leak_verdict_name(x->verdict));
        /* unjudged for the reason the device is (its unjudged_reason): its blocks that made it so */
        if (unjudged) {
            cmh_jw_kstr(w, "unjudged_reason", cmh_leak_unjudged_name(x->unjudged_why));
            cmh_jw_kuint(w, "unjudged_bytes", x->unjudged_bytes);
            cmh_jw_kuint(w, "unjudged_blocks", x->unjudged_blocks);
        }
        cmh_jw_kstr(w, "says", cmh_leak_site_text(x, words, sizeof words));
        /* steps not found for it: its judgment over the record's time (null: the steps judged it) */
        cmh_jw_key(w, "over_time");
        if (x->time_verdict) {
            cmh_jw_obj(w);
            cmh_jw_kstr(w, "verdict", cmh_leak_time_name(x->time_verdict));
            cmh_jw_kuint(w, "slices", x->time_slices);
            if (x->time_span_ns) cmh_jw_kint(w, "span_ns", x->time_span_ns);
            else cmh_jw_knull(w, "span_ns"); /* untimed: no span, as every untimed figure is null */
            cmh_jw_kuint(w, "allocations", x->time_allocs);
            cmh_jw_kuint(w, "busy_slices", x->time_busy);
            if (x->time_verdict >= CMH_TIME_UNSTEADY) { /* (the slices were read: what they held) */
                cmh_jw_kuint(w, "low_slice", x->time_low);
                cmh_jw_kint(w, "low_held_bytes", x->time_from);
                cmh_jw_kint(w, "last_held_bytes", x->time_to);
                cmh_jw_kint(w, "top_held_bytes", x->time_top);
                cmh_jw_kuint(w, "top_slice", x->time_top_at);
                cmh_jw_kuint(w, "rises", x->time_rises);
                cmh_jw_kint(w, "largest_drop_bytes", x->time_drop);
                cmh_jw_key(w, "held_bytes_by_slice"); /* made by a slice's start and still live at its end */
                cmh_jw_arr(w);
                for (uint32_t k = 0; k < x->time_slices && k < CMH_TIME_SLICES; k++) cmh_jw_int(w, x->time_held[k]);
                cmh_jw_end(w);
            }
            cmh_jw_end(w);
        } else cmh_jw_null(w);
        cmh_jw_kbool(w, "growing", x->growing);
        cmh_jw_kuint(w, "steps", x->steps);
        cmh_jw_kuint(w, "rises", x->rises); /* stretches of `stride` steps that rose */
        cmh_jw_kuint(w, "stride", x->stride ? x->stride : 1);
        cmh_jw_kuint(w, "flat_steps", x->flat_steps);
        cmh_jw_kbool(w, "warmup_rose", x->warm_rise != 0); /* the first step rose too, not in rises */
        cmh_jw_kuint(w, "growth_steps", x->growth_steps);
        /* a rate only where the verdict measured one (growing; stopped: while it grew); a rise
         * over too few steps is no rate */
        if ((x->verdict == CMH_LEAK_GROWING && !x->time_verdict) || x->verdict == CMH_LEAK_STOPPED) cmh_jw_kint(w, "rate_bytes_per_step", x->rate);
        else cmh_jw_knull(w, "rate_bytes_per_step");
        if (x->refused) { /* growing, counting its requests the driver refused (out of memory) */
            cmh_jw_kuint(w, "refused_requests", x->refused);
            cmh_jw_kuint(w, "refused_bytes", x->refused_bytes);
        }
        /* stopped: the steps it grew over (the record's numbers, from 1), what it held when it
         * stopped, and what its first step added where that is left out of them (a warm-up) */
        if (x->verdict == CMH_LEAK_STOPPED) {
            cmh_jw_kuint(w, "growth_first_step", x->growth_first);
            cmh_jw_kuint(w, "growth_last_step", x->growth_first + x->growth_steps - 1);
            cmh_jw_kuint(w, "held_when_stopped_bytes", x->top);
            cmh_jw_kuint(w, "warmup_grew_bytes", x->warm_growth);
        } else {
            cmh_jw_knull(w, "growth_first_step");
            cmh_jw_knull(w, "growth_last_step");
            cmh_jw_knull(w, "held_when_stopped_bytes");
            cmh_jw_knull(w, "warmup_grew_bytes");
        }
        if (x->verdict == CMH_LEAK_RISING) cmh_jw_kint(w, "rise_bytes", x->rise);
        cmh_jw_kdouble(w, "trend", x->trend, 4);
        cmh_jw_kuint(w, "held_bytes", x->held);
        cmh_jw_kuint(w, "thread", x->thread);
        cmh_jw_kint(w, "thread_tid", x->thread_tid);
        cmh_jw_kstr(w, "thread_name", x->thread_name ? x->thread_name : "");
        /* judged thread by thread (its blocks made by several threads racing): those it names,
         * of how many holding it; rate_bytes_per_step is then their rates summed */
        /* the threads that made its still-live blocks, however it was judged (it read 0 for a
         * site of one worker thread judged over the record's steps) */
        uint32_t holding = 0;
        for (uint32_t t = 1; t < 64; t++) holding += (uint32_t)(x->made_by >> t & 1);
        cmh_jw_kuint(w, "threads_holding", holding > x->threads ? holding : x->threads);
        cmh_jw_kbool(w, "threads_apart", x->threads_apart); /* (those threads ran one after another) */
        cmh_jw_key(w, "threads");
        cmh_jw_arr(w);
        for (uint32_t t = 1; x->threads >= 2 && t < 64; t++)
            if (x->thread_mask >> t & 1) cmh_jw_uint(w, t);
        cmh_jw_end(w);
        /* each of those threads, its OS thread id and name (0 and "" where not known) */
        cmh_jw_key(w, "made_by");
        cmh_jw_arr(w);
        for (uint32_t t = 1; t < 64; t++) {
            if (!(x->made_by >> t & 1)) continue;
            const cmh_thread_info *ti = cmh_snapshot_thread(s, t);
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "thread", t);
            cmh_jw_kint(w, "tid", ti ? ti->tid : 0);
            cmh_jw_kstr(w, "name", ti && ti->name ? cmh_str(s, ti->name) : "");
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        cmh_jw_kbool(w, "made_by_unrecorded", x->made_by_other != 0); /* (a block of no known thread, or of one past 63) */
        cmh_jw_kbool(w, "made_before_history", (x->made_by_other & CMH_MADE_BEFORE_HISTORY) != 0);
    }
    if (g && cmh_sites_group_by(g) == CMH_GROUP_SITE) { /* the site's bytes by the line that called it */
        cmh_jw_key(w, "callers");
        cmh_jw_arr(w);
        for (uint32_t i = 0; i < x->ncallers; i++) {
            cmh_jw_obj(w);
            cmh_jw_key(w, "caller");
            rep_json_frame(w, s, &s->frames[x->callers[i].frame]);
            cmh_jw_kuint(w, "bytes", x->callers[i].bytes);
            cmh_jw_kuint(w, "blocks", x->callers[i].count);
            if (x->callers_judged) { /* (leaks: a growing or stopped site, each caller judged alone) */
                cmh_jw_kbool(w, "growing", x->callers[i].growing);
                cmh_jw_kbool(w, "stopped", x->callers[i].stopped);
                cmh_jw_kint(w, "rate_bytes_per_step", x->callers[i].rate);
            }
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        cmh_jw_kuint(w, "callers_seen", x->callers_seen);
        cmh_jw_kuint(w, "callers_other_bytes", x->callers_other.bytes);
    }
    cmh_jw_key(w, "frames");
    cmh_jw_arr(w);
    const cmh_stack *st = &s->stacks[x->stack < s->nstacks ? x->stack : 0];
    for (uint32_t i = 0; i < st->count; i++) rep_json_frame(w, s, &s->frames[s->stack_frames[st->first + i]]);
    cmh_jw_end(w);
    if (rep_json_site_hook) rep_json_site_hook(w, x, rep_json_site_hook_arg);
    cmh_jw_end(w);
}

void rep_json_sites(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, const cmh_site *sites, uint32_t n, int top,
                    uint64_t total, int leaks)
{
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < n && (int)i < top; i++) {
        cmh_jw_nl(w);
        rep_json_site(w, s, g, &sites[i], total, leaks);
    }
    cmh_jw_end(w);
}

void rep_json_sites_left_out(cmh_jw *w, const char *key, uint32_t n, int top)
{
    char k[64];
    snprintf(k, sizeof k, "%s_left_out", key);
    cmh_jw_kuint(w, k, top >= 0 && n > (uint32_t)top ? n - (uint32_t)top : 0);
}

int rep_write(const char *path, int binary, int (*fn)(void *arg, FILE *fp), void *arg)
{
    if ((!path || !strcmp(path, "-")) && binary && isatty(STDOUT_FILENO)) {
        cli_error("not writing binary output to a terminal; name a file with -o (or redirect)");
        return CLI_EUSAGE;
    }
    char err[4400];
    cmh_atomic a;
    FILE *fp = cmh_output_open(&a, path ? path : "-", CMH_OUT_SHARED | CMH_OUT_AS(CMH_KIND_PAGE), err, sizeof err); /* pages, pictures, folded stacks */
    if (!fp) {
        cli_error("%s", err);
        return CLI_EFILE;
    }
    errno = 0;
    int rc = fn(arg, fp);
    int e = errno ? errno : EIO;
    const char *why = rc == CMH_EIO ? strerror(e) : cmh_strerror(rc);
    if (rc == CMH_OK) rc = cmh_atomic_commit(&a, err, sizeof err);
    else cmh_atomic_abort(&a), snprintf(err, sizeof err, "%s: write failed: %s", a.path, why);
    if (rc != CMH_OK) cli_error("%s", err);
    return rc == CMH_OK ? 0 : rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
}

const char *rep_owner_name(const cmh_sites *g, uint32_t group, char *buf, size_t n)
{
    return g ? cmh_owner_name(cmh_sites_owner(g, group), cmh_sites_owner_package(g, group), buf, n) : "";
}

const char *rep_owner_tag(const cmh_sites *g, uint32_t group, char *buf, size_t n)
{
    /* by the name owners gives it ("program (gpu.py)", "cuBLAS (libcublas.so.13)"), not its bare
     * module ("[gpu.py]" beside owners' "program (gpu.py)" read as two owners) */
    char name[256];
    const char *o = rep_owner_name(g, group, name, sizeof name);
    if (!*o) return "";
    snprintf(buf, n, "  [%s]", o);
    return buf;
}

/* ---- a grouped row's sites (peak, oom: --group-by module|file|package) ---- */

cmh_sites *rep_sites_by_site_under(const cmh_snapshot *s, const cmh_sites *g)
{
    if (!g) return NULL;
    int by = cmh_sites_group_by(g);
    if (by != CMH_GROUP_MODULE && by != CMH_GROUP_FILE && by != CMH_GROUP_PACKAGE) return NULL;
    cmh_site_opts o = {CMH_GROUP_SITE, rep_attribution.no_default, rep_attribution.skips.v, rep_attribution.skips.n};
    char err[512];
    int src;
    return cmh_sites_new(s, &o, &src, err, sizeof err);
}

int rep_row_sites_begin(rep_row_sites *b, const cmh_snapshot *s, const cmh_sites *g)
{
    memset(b, 0, sizeof *b);
    if (!(b->gs = rep_sites_by_site_under(s, g))) return 0;
    uint32_t n = cmh_sites_count(b->gs);
    if (!(b->row = malloc((n ? n : 1) * sizeof *b->row))) {
        rep_row_sites_end(b);
        return 0;
    }
    for (uint32_t i = 0; i < n; i++) b->row[i] = UINT32_MAX;
    for (uint32_t st = 0; st < s->nstacks; st++) { /* a site whose stacks fall in two rows is listed under neither */
        uint32_t a = cmh_sites_group(b->gs, st), r = cmh_sites_group(g, st);
        if (a < n) b->row[a] = b->row[a] == UINT32_MAX || b->row[a] == r ? r : UINT32_MAX - 1;
    }
    b->s = s;
    return 1;
}

void rep_row_sites_end(rep_row_sites *b)
{
    if (b->gs) cmh_sites_free(b->gs);
    free(b->row);
    memset(b, 0, sizeof *b);
}

/* whether site y (of b->sites) is one of row x's */
static int in_row(const rep_row_sites *b, const cmh_site *x, const cmh_site *y)
{
    return y->group < cmh_sites_count(b->gs) && b->row[y->group] == x->group;
}

void rep_row_sites_print(const rep_row_sites *b, const cmh_site *x, const char *indent)
{
    if (!b->gs || !b->sites) return;
    const cmh_snapshot *s = b->s;
    uint32_t k = 0;
    for (uint32_t j = 0; j < b->nsites; j++) k += in_row(b, x, &b->sites[j]);
    if (!k) return;
    char line[8192], size[32];
    size_t at = (size_t)snprintf(line, sizeof line, "of it, by site:");
    uint32_t shown = 0;
    uint64_t rest = 0;
    for (uint32_t j = 0; j < b->nsites; j++) {
        const cmh_site *y = &b->sites[j];
        if (!in_row(b, x, y)) continue;
        if (k == 1) { /* the row is one site: its own split by caller, as the grouping by site prints it */
            rep_print_callers(s, y, indent);
            return;
        }
        if (shown == CMH_CALLERS_SHOWN) {
            rest += y->bytes;
            continue;
        }
        snprintf(size, sizeof size, "%s", rep_size((double)y->bytes));
        if (at < sizeof line)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s %s %s", shown ? "," : "", size, rep_group_site(s, b->gs, y->group));
        shown++;
    }
    if (rest && at < sizeof line)
        snprintf(line + at, sizeof line - at, ", %s in %s more", rep_size((double)rest), rep_count(k - shown, "site", "sites"));
    printf("%s%s\n", indent, line);
}

void rep_row_sites_json(cmh_jw *w, const cmh_site *x, void *arg)
{
    const rep_row_sites *b = arg;
    if (!b || !b->gs || !b->sites) return;
    cmh_jw_key(w, "by_site");
    cmh_jw_arr(w);
    for (uint32_t j = 0; j < b->nsites; j++) {
        const cmh_site *y = &b->sites[j];
        if (!in_row(b, x, y)) continue;
        const cmh_frame *f = cmh_sites_frame(b->gs, y->group);
        cmh_jw_obj(w);
        cmh_jw_key(w, "site");
        if (f) rep_json_frame(w, b->s, f);
        else cmh_jw_null(w);
        cmh_jw_kuint(w, "bytes", y->bytes);
        cmh_jw_kuint(w, "blocks", y->count);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}

void rep_trap_print(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, uint32_t group, uint64_t free, uint32_t segs,
                    uint32_t sites)
{
    if (!sites) return;
    cmh_site x = {.group = group, .stack = stack};
    char tag[80];
    printf("  trapped by: %s%s\n"
           "    its live blocks keep %s free in %s apart: neither joined nor given back while they live (free\n"
           "    them, or allocate them before or apart from the large buffers)",
           rep_site_name(s, g, &x), rep_owner_tag(g, group, tag, sizeof tag), rep_size((double)free), rep_count(segs, "segment", "segments"));
    if (sites > 1) printf("; %s hold the rest", rep_count(sites - 1, "more site's blocks", "more sites' blocks"));
    printf("\n");
}

void rep_json_trap(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, uint32_t group, uint64_t free, uint32_t segs,
                   uint32_t sites)
{
    cmh_jw_key(w, "trapped_by"); /* the holder of the most free bytes kept apart (cmh_holder_pick's rule) */
    if (!sites) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    const cmh_frame *f = g ? cmh_sites_frame(g, group) : stack && stack < s->nstacks && s->stacks[stack].count
                                                            ? &s->frames[s->stack_frames[s->stacks[stack].first]]
                                                            : NULL;
    cmh_jw_key(w, "site");
    if (f) rep_json_frame(w, s, f);
    else cmh_jw_null(w);
    cmh_jw_kuint(w, "free", free);
    cmh_jw_kuint(w, "segments", segs);
    cmh_jw_kuint(w, "holders", sites);
    cmh_jw_end(w);
}
