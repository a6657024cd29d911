/*
 * cmd_reports.c - `cumemhist peak | leaks | frag | oom | diff`: the reports users record for,
 * as text for people and --json for scripts (every byte figure an exact integer).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cumemhist/reports.h"

typedef struct opts {
    const char *paths[64];
    int npaths;
    int device, json, top, frames, fail_on_leak;
    uint64_t min_bytes;
    double fail_pct;
    int have_fail_pct;
} opts;

static int parse(int argc, char **argv, const char *usage, opts *o, int max_paths)
{
    memset(o, 0, sizeof *o);
    o->device = -2;
    o->top = 10;
    o->frames = 6;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 1;
        }
        if (!strcmp(argv[i], "--json")) o->json = 1;
        else if (!strcmp(argv[i], "--fail-on-leak")) o->fail_on_leak = 1;
        else if (cli_opt(argc, argv, &i, "--device", &v)) {
            if (cli_parse_device(v, &o->device)) return 2;
        } else if (cli_opt(argc, argv, &i, "--top", &v)) {
            o->top = atoi(v);
            if (o->top <= 0) {
                cli_error("--top: '%s' is not a positive number", v);
                return 2;
            }
        } else if (cli_opt(argc, argv, &i, "--frames", &v)) {
            o->frames = atoi(v);
            if (o->frames < 0 || o->frames > 64) {
                cli_error("--frames: '%s' is not a number from 0 to 64", v);
                return 2;
            }
        } else if (cli_opt(argc, argv, &i, "--min-bytes", &v)) {
            if (cli_parse_u64(v, &o->min_bytes)) {
                cli_error("--min-bytes: '%s' is not a size (e.g. 1048576 or 1M)", v);
                return 2;
            }
        } else if (cli_opt(argc, argv, &i, "--fail-if-peak-grows", &v)) {
            char *end;
            o->fail_pct = strtod(v, &end);
            if (*end == '%') end++;
            if (*end || o->fail_pct < 0) {
                cli_error("--fail-if-peak-grows: '%s' is not a percentage", v);
                return 2;
            }
            o->have_fail_pct = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("%s: unknown option '%s' (see cumemhist %s --help)", argv[0], argv[i], argv[0]);
            return 2;
        } else if (o->npaths < max_paths) {
            o->paths[o->npaths++] = argv[i];
        } else {
            cli_error("%s: too many snapshots (at most %d)", argv[0], max_paths);
            return 2;
        }
    }
    if (!o->npaths) {
        fputs(usage, stderr);
        return 2;
    }
    return 0;
}

static void size_text(char *buf, size_t n, double v)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    double a = v < 0 ? -v : v;
    while (a >= 1024 && i < 5) a /= 1024, v /= 1024, i++;
    if (i == 0) snprintf(buf, n, "%.0f B", v);
    else snprintf(buf, n, "%.1f %s", v, u[i]);
}

static const char *sz(double v)
{
    static char ring[8][32];
    static int k;
    char *b = ring[k++ & 7];
    size_text(b, 32, v);
    return b;
}

static int64_t trace_start(const cmh_snapshot *s, int device)
{
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    for (uint32_t i = 0; t && i < t->nentries; i++)
        if (s->entries[t->first_entry + i].time_ns) return s->entries[t->first_entry + i].time_ns;
    return 0;
}

static const char *when(int64_t t, int64_t t0)
{
    static char ring[8][32];
    static int k;
    char *b = ring[k++ & 7];
    if (!t || !t0) snprintf(b, 32, "-");
    else snprintf(b, 32, "%+.3fs", (double)(t - t0) / 1e9);
    return b;
}

static void print_stack(const cmh_snapshot *s, uint32_t stack, int max, const char *indent)
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

static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void json_stack(const cmh_snapshot *s, uint32_t stack, int max)
{
    const char *names[64], *files[64];
    int64_t lines[64];
    int n = cmh_stack_lines(s, stack, max > 64 ? 64 : max, names, files, lines);
    putchar('[');
    for (int i = 0; i < n; i++) {
        printf(i ? ", {\"name\": " : "{\"name\": ");
        json_str(names[i]);
        printf(", \"filename\": ");
        json_str(files[i]);
        printf(", \"line\": %" PRId64 "}", lines[i]);
    }
    putchar(']');
}

static void json_sites(const cmh_snapshot *s, const cmh_site *sites, uint32_t n, int top, int frames, uint64_t total, int leaks)
{
    printf("[");
    for (uint32_t i = 0; i < n && (int)i < top; i++) {
        const cmh_site *x = &sites[i];
        printf("%s\n    {\"bytes\": %" PRIu64 ", \"blocks\": %" PRIu64 ", \"share\": %.4f, \"first_ns\": %" PRId64
               ", \"last_ns\": %" PRId64,
               i ? "," : "", x->bytes, x->count, total ? (double)x->bytes / (double)total : 0.0, x->first_ns, x->last_ns);
        if (leaks)
            printf(", \"growing\": %s, \"rises\": %u, \"drops\": %u, \"intervals\": %u, \"start_bytes\": %" PRIu64,
                   x->growing ? "true" : "false", x->rises, x->drops, x->intervals, x->start_bytes);
        printf(", \"site\": ");
        json_str(cmh_stack_site(s, x->stack));
        printf(", \"stack\": ");
        json_stack(s, x->stack, frames ? frames : 64);
        printf("}");
    }
    printf("]");
}

/* What the GPU was doing at time t (kernel timing, when recorded). */
static void gpu_at(const cmh_snapshot *s, int device, int64_t t, const char *indent)
{
    if (!s->nkernels || !t) return;
    const cmh_kernel *run, *done;
    cmh_kernels_at(s, device, t, &run, &done);
    if (run) printf("%skernel running then: %s (stream %u)\n", indent, cmh_str(s, run->name), run->stream);
    if (done)
        printf("%slast kernel completed before: %s (stream %u, %.3f ms earlier)\n", indent, cmh_str(s, done->name),
               done->stream, (double)(t - done->end_ns) / 1e6);
}

static void dropped_note(const cmh_report_base *b)
{
    if (b->dropped)
        printf("note: the ring dropped the %" PRIu64 " oldest entries; figures cover the last %" PRIu64 " only\n",
               b->dropped, b->entries);
    if (b->pytorch) printf("note: a PyTorch trace: sizes are the caching allocator's rounded block sizes\n");
}

static void json_base(const char *path, const cmh_report_base *b)
{
    printf("{\"file\": ");
    json_str(path);
    printf(", \"device\": %d, \"trace_entries\": %" PRIu64 ", \"dropped_entries\": %" PRIu64 ", \"source\": \"%s\"",
           b->device, b->entries, b->dropped, b->pytorch ? "pytorch" : "recorder");
}

/* ---- peak ---- */

static const char *const peak_usage =
    "usage: cumemhist peak [options] SNAPSHOT...\n"
    "\n"
    "Peak allocated and peak reserved memory: how much, when (trace entry and time), and which\n"
    "allocation sites owned the memory at the allocated peak.  With several snapshots (one per\n"
    "rank or process), one row each and the worst.\n"
    "\n"
    "options:\n"
    "  --device N     device to report (default: the lowest in each snapshot)\n"
    "  --top N        sites to list (default 10)\n"
    "  --frames N     frames per site (default 6)\n"
    "  --json         machine-readable output\n"
    "\n"
    "example: cumemhist peak train.cmh --top 5\n";

int cmd_peak(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, peak_usage, &o, 64);
    if (rc) return rc == 1 ? 0 : rc;
    int worst = -1;
    int64_t worst_peak = -1;
    if (o.json) printf(o.npaths > 1 ? "[" : "");
    for (int f = 0; f < o.npaths; f++) {
        cmh_snapshot s;
        int dev;
        if (cli_load_device(o.paths[f], o.device, &s, &dev)) return 1;
        cmh_peak_report p;
        if (cmh_peak_compute(&s, dev, &p) != CMH_OK) {
            cli_error("out of memory");
            cmh_snapshot_free(&s);
            return 1;
        }
        if (p.alloc_peak > worst_peak) worst_peak = p.alloc_peak, worst = f;
        int64_t t0 = trace_start(&s, dev);
        if (o.json) {
            if (f) printf(",\n");
            json_base(o.paths[f], &p.base);
            printf(",\n \"peak_allocated\": {\"bytes\": %" PRId64 ", \"index\": %" PRId64 ", \"time_ns\": %" PRId64 "},\n",
                   p.alloc_peak, p.alloc_index, p.alloc_time_ns);
            printf(" \"peak_reserved\": {\"bytes\": %" PRId64 ", \"index\": %" PRId64 ", \"time_ns\": %" PRId64 "},\n",
                   p.reserved_peak, p.reserved_index, p.reserved_time_ns);
            printf(" \"end\": {\"allocated\": %" PRId64 ", \"reserved\": %" PRId64 "},\n \"sites_at_peak\": ", p.alloc_end,
                   p.reserved_end);
            json_sites(&s, p.sites, p.nsites, o.top, o.frames, (uint64_t)p.alloc_peak, 0);
            printf("}");
        } else if (o.npaths > 1) {
            if (f == 0) printf("%-40s %6s %12s %12s %12s %12s\n", "snapshot", "device", "peak alloc", "peak reserved",
                               "end alloc", "end reserved");
            printf("%-40s %6d %12s %12s %12s %12s\n", o.paths[f], dev, sz((double)p.alloc_peak), sz((double)p.reserved_peak),
                   sz((double)p.alloc_end), sz((double)p.reserved_end));
        } else if (!p.base.entries && !s.nsegments) {
            printf("%s: no allocations recorded\n", o.paths[f]);
        } else {
            printf("%s, device %d: %" PRIu64 " trace entries\n", o.paths[f], dev, p.base.entries);
            printf("peak allocated: %s (%" PRId64 " bytes) %s\n", sz((double)p.alloc_peak), p.alloc_peak,
                   p.alloc_index < 0 ? "before the first entry" : "");
            if (p.alloc_index >= 0)
                printf("                at entry %" PRId64 ", %s\n", p.alloc_index, when(p.alloc_time_ns, t0));
            gpu_at(&s, dev, p.alloc_time_ns, "                ");
            printf("peak reserved:  %s (%" PRId64 " bytes)", sz((double)p.reserved_peak), p.reserved_peak);
            if (p.reserved_index >= 0) printf(" at entry %" PRId64 ", %s", p.reserved_index, when(p.reserved_time_ns, t0));
            printf("\nat the end:     allocated %s, reserved %s\n\n", sz((double)p.alloc_end), sz((double)p.reserved_end));
            printf("live at the allocated peak, by allocation site:\n");
            printf("  %12s %7s %7s  %s\n", "bytes", "share", "blocks", "site");
            for (uint32_t i = 0; i < p.nsites && (int)i < o.top; i++) {
                const cmh_site *x = &p.sites[i];
                printf("  %12s %6.1f%% %7" PRIu64 "  %s\n", sz((double)x->bytes),
                       p.alloc_peak ? 100.0 * (double)x->bytes / (double)p.alloc_peak : 0.0, x->count,
                       cmh_stack_site(&s, x->stack));
                print_stack(&s, x->stack, o.frames, "        ");
            }
            if (p.nsites > (uint32_t)o.top) printf("  ... %u more sites (--top)\n", p.nsites - (uint32_t)o.top);
            dropped_note(&p.base);
        }
        cmh_report_free_sites(p.sites);
        cmh_snapshot_free(&s);
    }
    if (o.json) printf(o.npaths > 1 ? "]\n" : "\n");
    else if (o.npaths > 1) printf("worst: %s (peak allocated %s)\n", o.paths[worst], sz((double)worst_peak));
    return 0;
}

/* ---- leaks ---- */

static const char *const leaks_usage =
    "usage: cumemhist leaks [options] SNAPSHOT\n"
    "\n"
    "Blocks still allocated at the end of the record, grouped by allocation site, with the\n"
    "growth of each site's live bytes across the record: at the program's marks (cmh_mark),\n"
    "else at PyTorch's external annotations, else at ten even points.  A site whose live\n"
    "bytes keep rising is reported as a likely leak.\n"
    "\n"
    "options:\n"
    "  --device N       device to report (default: the lowest in the snapshot)\n"
    "  --top N          sites to list (default 10)\n"
    "  --frames N       frames per site (default 6)\n"
    "  --min-bytes B    leave out sites holding less (e.g. 1M)\n"
    "  --fail-on-leak   exit with status 3 when a site keeps growing (for CI)\n"
    "  --json           machine-readable output\n"
    "\n"
    "example: cumemhist leaks train.cmh --min-bytes 1M --fail-on-leak\n";

int cmd_leaks(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, leaks_usage, &o, 1);
    if (rc) return rc == 1 ? 0 : rc;
    cmh_snapshot s;
    int dev;
    if (cli_load_device(o.paths[0], o.device, &s, &dev)) return 1;
    cmh_leak_report p;
    if (cmh_leaks_compute(&s, dev, o.min_bytes, &p) != CMH_OK) {
        cli_error("out of memory");
        cmh_snapshot_free(&s);
        return 1;
    }
    static const char *const cpk[] = {"even points of the trace", "marks", "external annotations"};
    int64_t t0 = trace_start(&s, dev);
    if (o.json) {
        json_base(o.paths[0], &p.base);
        printf(",\n \"live_bytes\": %" PRIu64 ", \"live_blocks\": %" PRIu64 ", \"leaking_sites\": %u, \"checkpoints\": %d"
               ", \"checkpoint_kind\": \"%s\",\n \"sites\": ",
               p.live_bytes, p.live_blocks, p.leaking, p.ncheckpoints, cpk[p.checkpoint_kind]);
        json_sites(&s, p.sites, p.nsites, o.top, o.frames, p.live_bytes, 1);
        printf("}\n");
    } else if (!p.base.entries && !s.nsegments) {
        printf("%s: no allocations recorded\n", o.paths[0]);
    } else {
        printf("%s, device %d: %s in %" PRIu64 " blocks still live at the end, from %u site%s\n", o.paths[0], dev,
               sz((double)p.live_bytes), p.live_blocks, p.nsites, p.nsites == 1 ? "" : "s");
        printf("growth measured at %d %s\n\n", p.ncheckpoints, cpk[p.checkpoint_kind]);
        printf("  %12s %7s %10s %10s  %-14s %s\n", "bytes", "blocks", "first", "last", "growth", "site");
        for (uint32_t i = 0; i < p.nsites && (int)i < o.top; i++) {
            const cmh_site *x = &p.sites[i];
            char g[32];
            snprintf(g, sizeof g, "%s %u/%u", x->growing ? "LEAK" : x->rises ? "up" : "flat", x->rises, x->intervals);
            printf("  %12s %7" PRIu64 " %10s %10s  %-14s %s\n", sz((double)x->bytes), x->count, when(x->first_ns, t0),
                   when(x->last_ns, t0), g, cmh_stack_site(&s, x->stack));
            print_stack(&s, x->stack, o.frames, "        ");
        }
        if (p.nsites > (uint32_t)o.top) printf("  ... %u more sites (--top)\n", p.nsites - (uint32_t)o.top);
        if (p.leaking)
            printf("\n%u site%s kept growing across the record: likely leak%s\n", p.leaking, p.leaking == 1 ? "" : "s",
                   p.leaking == 1 ? "" : "s");
        else printf("\nno site kept growing across the record\n");
        dropped_note(&p.base);
    }
    int leaking = p.leaking;
    cmh_report_free_sites(p.sites);
    cmh_snapshot_free(&s);
    return o.fail_on_leak && leaking ? 3 : 0;
}

/* ---- frag ---- */

static const char *const frag_usage =
    "usage: cumemhist frag [options] SNAPSHOT\n"
    "\n"
    "Fragmentation of the reserved segments at the end of the record: per device and per\n"
    "segment, reserved and allocated bytes, free bytes inside segments, the largest free gap,\n"
    "fragmentation (1 - largest gap / free), and non-releasable bytes (free space in segments\n"
    "that still hold a block: empty_cache() cannot return it).  Says when fragmentation rather\n"
    "than demand explains the last out-of-memory error.\n"
    "\n"
    "options:\n"
    "  --device N    device to report (default: the lowest in the snapshot)\n"
    "  --top N       segments to list, most free bytes first (default 10)\n"
    "  --json        machine-readable output\n"
    "\n"
    "example: cumemhist frag oom.pickle\n";

static int cmp_free(const void *a, const void *b)
{
    const cmh_frag_seg *x = a, *y = b;
    return x->free > y->free ? -1 : x->free < y->free;
}

int cmd_frag(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, frag_usage, &o, 1);
    if (rc) return rc == 1 ? 0 : rc;
    cmh_snapshot s;
    int dev;
    if (cli_load_device(o.paths[0], o.device, &s, &dev)) return 1;
    cmh_frag_report p;
    if (cmh_frag_compute(&s, dev, &p) != CMH_OK) {
        cli_error("out of memory");
        cmh_snapshot_free(&s);
        return 1;
    }
    qsort(p.segs, p.nsegs, sizeof *p.segs, cmp_free);
    int frag_verdict = p.has_oom && p.last_oom_request > p.largest_gap && p.free + p.last_oom_device_free >= p.last_oom_request;
    if (o.json) {
        json_base(o.paths[0], &p.base);
        printf(",\n \"reserved\": %" PRIu64 ", \"allocated\": %" PRIu64 ", \"reserved_unallocated\": %" PRIu64
               ", \"free_in_segments\": %" PRIu64 ", \"largest_gap\": %" PRIu64 ", \"fragmentation\": %.4f"
               ", \"non_releasable\": %" PRIu64 ",\n",
               p.reserved, p.allocated, p.reserved - p.allocated, p.free, p.largest_gap, p.fragmentation, p.non_releasable);
        if (p.has_oom)
            printf(" \"last_oom\": {\"request\": %" PRIu64 ", \"device_free\": %" PRIu64 ", \"fragmentation_explains\": %s},\n",
                   p.last_oom_request, p.last_oom_device_free, frag_verdict ? "true" : "false");
        printf(" \"segments\": [");
        for (uint32_t i = 0; i < p.nsegs && (int)i < o.top; i++) {
            const cmh_frag_seg *g = &p.segs[i];
            printf("%s\n  {\"address\": %" PRIu64 ", \"reserved\": %" PRIu64 ", \"allocated\": %" PRIu64 ", \"free\": %" PRIu64
                   ", \"largest_gap\": %" PRIu64 ", \"fragmentation\": %.4f, \"non_releasable\": %" PRIu64 ", \"expandable\": %s}",
                   i ? "," : "", g->addr, g->reserved, g->allocated, g->free, g->largest_gap, g->fragmentation,
                   g->non_releasable, g->expandable ? "true" : "false");
        }
        printf("]}\n");
    } else if (!p.nsegs) {
        printf("%s: no segments at the end of the record\n", o.paths[0]);
    } else {
        printf("%s, device %d: %u segments at the end of the record\n", o.paths[0], dev, p.nsegs);
        printf("  reserved                 %12s\n", sz((double)p.reserved));
        printf("  allocated                %12s\n", sz((double)p.allocated));
        printf("  reserved but unallocated %12s\n", sz((double)(p.reserved - p.allocated)));
        printf("  free inside segments     %12s   largest gap %s, fragmentation %.1f%%\n", sz((double)p.free),
               sz((double)p.largest_gap), 100 * p.fragmentation);
        printf("  non-releasable           %12s   (free space in segments that still hold blocks)\n\n",
               sz((double)p.non_releasable));
        printf("  %-18s %11s %11s %11s %11s %6s %11s\n", "segment", "reserved", "allocated", "free", "largest gap", "frag",
               "non-rel.");
        for (uint32_t i = 0; i < p.nsegs && (int)i < o.top; i++) {
            const cmh_frag_seg *g = &p.segs[i];
            printf("  0x%-16" PRIx64 " %11s %11s %11s %11s %5.1f%% %11s%s\n", g->addr, sz((double)g->reserved),
                   sz((double)g->allocated), sz((double)g->free), sz((double)g->largest_gap), 100 * g->fragmentation,
                   sz((double)g->non_releasable), g->expandable ? " expandable" : "");
        }
        if (p.nsegs > (uint32_t)o.top) printf("  ... %u more segments (--top)\n", p.nsegs - (uint32_t)o.top);
        if (p.has_oom)
            printf("\nthe last out-of-memory asked for %s: %s\n", sz((double)p.last_oom_request),
                   frag_verdict ? "fragmentation, not demand: enough bytes were free, but no free gap was large enough"
                   : p.last_oom_request <= p.largest_gap ? "a free gap was large enough (another stream or pool?)"
                                                         : "demand: the memory was genuinely in use");
        dropped_note(&p.base);
    }
    free(p.segs);
    cmh_snapshot_free(&s);
    return 0;
}

/* ---- oom ---- */

static const char *const oom_usage =
    "usage: cumemhist oom [options] SNAPSHOT\n"
    "\n"
    "Every out-of-memory error in the record: the request, what the device still had free, what\n"
    "was allocated and reserved, whether the request would have fit in a free gap, a verdict\n"
    "(demand or fragmentation), and the allocation sites holding memory at that moment.\n"
    "\n"
    "options:\n"
    "  --device N    device to report (default: the lowest in the snapshot)\n"
    "  --top N       sites to list per error (default 10)\n"
    "  --frames N    frames per site (default 6)\n"
    "  --json        machine-readable output\n"
    "\n"
    "example: cumemhist oom cumemhist.1234.cmh\n";

int cmd_oom(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, oom_usage, &o, 1);
    if (rc) return rc == 1 ? 0 : rc;
    cmh_snapshot s;
    int dev;
    if (cli_load_device(o.paths[0], o.device, &s, &dev)) return 1;
    cmh_oom_report p;
    if (cmh_oom_compute(&s, dev, &p) != CMH_OK) {
        cli_error("out of memory");
        cmh_snapshot_free(&s);
        return 1;
    }
    static const char *const verdicts[] = {"demand", "fragmentation", "fit in a free gap"};
    static const char *const explain[] = {
        "demand: the memory was genuinely in use",
        "fragmentation, not demand: enough bytes were free, but no free gap was large enough",
        "a free gap inside the reserved segments was large enough (another stream or memory pool?)"};
    int64_t t0 = trace_start(&s, dev);
    if (o.json) {
        json_base(o.paths[0], &p.base);
        printf(",\n \"ooms\": [");
        for (uint32_t i = 0; i < p.nevents; i++) {
            const cmh_oom_event *e = &p.events[i];
            printf("%s\n  {\"index\": %" PRId64 ", \"time_ns\": %" PRId64 ", \"request\": %" PRIu64 ", \"device_free\": %" PRIu64
                   ", \"allocated\": %" PRIu64 ", \"reserved\": %" PRIu64 ", \"free_in_segments\": %" PRIu64
                   ", \"largest_gap\": %" PRIu64 ", \"fits_in_gap\": %s, \"verdict\": \"%s\", \"sites\": ",
                   i ? "," : "", e->index, e->time_ns, e->request, e->device_free, e->allocated, e->reserved, e->free_inside,
                   e->largest_gap, e->fits_in_gap ? "true" : "false", verdicts[e->verdict]);
            json_sites(&s, e->sites, e->nsites, o.top, o.frames, e->allocated, 0);
            printf("}");
        }
        printf("]}\n");
    } else if (!p.nevents) {
        printf("%s, device %d: no out-of-memory error in the record (%" PRIu64 " trace entries)\n", o.paths[0], dev,
               p.base.entries);
        dropped_note(&p.base);
    } else {
        for (uint32_t i = 0; i < p.nevents; i++) {
            const cmh_oom_event *e = &p.events[i];
            printf("%sout of memory #%u on device %d at entry %" PRId64 ", %s\n", i ? "\n" : "", i + 1, dev, e->index,
                   when(e->time_ns, t0));
            printf("  requested               %12s (%" PRIu64 " bytes)\n", sz((double)e->request), e->request);
            printf("  device free (driver)    %12s\n", sz((double)e->device_free));
            printf("  allocated               %12s\n", sz((double)e->allocated));
            printf("  reserved                %12s\n", sz((double)e->reserved));
            printf("  free inside segments    %12s   largest gap %s: the request %s in it\n", sz((double)e->free_inside),
                   sz((double)e->largest_gap), e->fits_in_gap ? "fits" : "does not fit");
            printf("  verdict: %s\n", explain[e->verdict]);
            gpu_at(&s, dev, e->time_ns, "  ");
            printf("  holding memory then:\n");
            for (uint32_t k = 0; k < e->nsites && (int)k < o.top; k++) {
                const cmh_site *x = &e->sites[k];
                printf("    %12s %7" PRIu64 " blocks  %s\n", sz((double)x->bytes), x->count, cmh_stack_site(&s, x->stack));
                print_stack(&s, x->stack, o.frames, "          ");
            }
        }
        dropped_note(&p.base);
    }
    cmh_oom_report_free(&p);
    cmh_snapshot_free(&s);
    return 0;
}

/* ---- diff ---- */

static const char *const diff_usage =
    "usage: cumemhist diff [options] BEFORE AFTER\n"
    "\n"
    "What a change did to memory: peak and end figures of two snapshots side by side, and the\n"
    "allocation sites whose live bytes (at the end, and at the allocated peak) changed most.\n"
    "Sites are matched by their frames, so the two snapshots may come from different runs.\n"
    "\n"
    "options:\n"
    "  --device N                 device to compare (default: the lowest in each)\n"
    "  --top N                    sites to list (default 10)\n"
    "  --fail-if-peak-grows PCT   exit with status 3 if peak allocated grew by more than PCT%\n"
    "  --json                     machine-readable output\n"
    "\n"
    "example: cumemhist diff main.cmh branch.cmh --fail-if-peak-grows 5\n";

typedef struct keyed {
    char *key; /* the site's frames, as text */
    int64_t before_end, after_end, before_peak, after_peak;
} keyed;

static char *site_key(const cmh_snapshot *s, uint32_t stack)
{
    const char *names[16], *files[16];
    int64_t lines[16];
    int n = cmh_stack_lines(s, stack, 16, names, files, lines);
    size_t len = 16;
    for (int i = 0; i < n; i++) len += strlen(names[i]) + strlen(files[i]) + 24;
    char *k = malloc(len), *p = k;
    if (!k) return NULL;
    *p = 0;
    for (int i = 0; i < n; i++) p += sprintf(p, "%s@%s:%" PRId64 ";", names[i], files[i], lines[i]);
    if (!n) strcpy(k, stack ? "<unknown>" : "<no stack>");
    return k;
}

static keyed *find_key(keyed **v, size_t *n, size_t *cap, char *k)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i].key, k)) {
            free(k);
            return &(*v)[i];
        }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        keyed *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return NULL;
        *v = nv;
        *cap = nc;
    }
    keyed *e = &(*v)[(*n)++];
    memset(e, 0, sizeof *e);
    e->key = k;
    return e;
}

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int64_t dx = llabs((x->after_end - x->before_end)) + llabs(x->after_peak - x->before_peak);
    int64_t dy = llabs((y->after_end - y->before_end)) + llabs(y->after_peak - y->before_peak);
    return dx > dy ? -1 : dx < dy;
}

int cmd_diff(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, diff_usage, &o, 2);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.npaths != 2) {
        fputs(diff_usage, stderr);
        return 2;
    }
    cmh_snapshot s[2];
    cmh_peak_report pk[2];
    cmh_leak_report lk[2];
    uint32_t nseg[2] = {0, 0};
    keyed *v = NULL;
    size_t n = 0, cap = 0;
    for (int f = 0; f < 2; f++) {
        int dev;
        if (cli_load_device(o.paths[f], o.device, &s[f], &dev)) return 1;
        if (cmh_peak_compute(&s[f], dev, &pk[f]) != CMH_OK || cmh_leaks_compute(&s[f], dev, 0, &lk[f]) != CMH_OK) {
            cli_error("out of memory");
            return 1;
        }
        for (uint32_t i = 0; i < s[f].nsegments; i++) nseg[f] += s[f].segments[i].device == dev;
        for (uint32_t i = 0; i < lk[f].nsites; i++) {
            keyed *k = find_key(&v, &n, &cap, site_key(&s[f], lk[f].sites[i].stack));
            if (k) *(f ? &k->after_end : &k->before_end) += (int64_t)lk[f].sites[i].bytes;
        }
        for (uint32_t i = 0; i < pk[f].nsites; i++) {
            keyed *k = find_key(&v, &n, &cap, site_key(&s[f], pk[f].sites[i].stack));
            if (k) *(f ? &k->after_peak : &k->before_peak) += (int64_t)pk[f].sites[i].bytes;
        }
    }
    if (n) qsort(v, n, sizeof *v, cmp_keyed);
    double growth = pk[0].alloc_peak ? 100.0 * (double)(pk[1].alloc_peak - pk[0].alloc_peak) / (double)pk[0].alloc_peak
                    : pk[1].alloc_peak ? 100.0 : 0.0;
    struct {
        const char *what;
        int64_t a, b;
    } rows[] = {
        {"peak allocated", pk[0].alloc_peak, pk[1].alloc_peak},
        {"peak reserved", pk[0].reserved_peak, pk[1].reserved_peak},
        {"allocated at the end", pk[0].alloc_end, pk[1].alloc_end},
        {"reserved at the end", pk[0].reserved_end, pk[1].reserved_end},
        {"segments at the end", nseg[0], nseg[1]},
    };
    if (o.json) {
        printf("{\"before\": ");
        json_str(o.paths[0]);
        printf(", \"after\": ");
        json_str(o.paths[1]);
        printf(", \"peak_growth_pct\": %.3f", growth);
        static const char *const keys[] = {"peak_allocated", "peak_reserved", "allocated_end", "reserved_end", "segments_end"};
        for (int i = 0; i < 5; i++)
            printf(", \"%s\": {\"before\": %" PRId64 ", \"after\": %" PRId64 ", \"delta\": %" PRId64 "}", keys[i], rows[i].a,
                   rows[i].b, rows[i].b - rows[i].a);
        printf(",\n \"sites\": [");
        for (size_t i = 0; i < n && (int)i < o.top; i++) {
            printf("%s\n  {\"frames\": ", i ? "," : "");
            json_str(v[i].key);
            printf(", \"end_before\": %" PRId64 ", \"end_after\": %" PRId64 ", \"peak_before\": %" PRId64
                   ", \"peak_after\": %" PRId64 "}",
                   v[i].before_end, v[i].after_end, v[i].before_peak, v[i].after_peak);
        }
        printf("]}\n");
    } else {
        printf("%-22s %14s %14s %14s %9s\n", "", "before", "after", "change", "");
        for (int i = 0; i < 5; i++) {
            int bytes = i < 4;
            double pct = rows[i].a ? 100.0 * (double)(rows[i].b - rows[i].a) / (double)rows[i].a : 0.0;
            if (bytes)
                printf("%-22s %14s %14s %14s %+8.1f%%\n", rows[i].what, sz((double)rows[i].a), sz((double)rows[i].b),
                       sz((double)(rows[i].b - rows[i].a)), pct);
            else
                printf("%-22s %14" PRId64 " %14" PRId64 " %+14" PRId64 " %+8.1f%%\n", rows[i].what, rows[i].a, rows[i].b,
                       rows[i].b - rows[i].a, pct);
        }
        printf("\nsites that changed most (live bytes at the end / at the allocated peak):\n");
        for (size_t i = 0; i < n && (int)i < o.top; i++) {
            if (v[i].after_end == v[i].before_end && v[i].after_peak == v[i].before_peak) break;
            char first[256];
            const char *semi = strchr(v[i].key, '@');
            snprintf(first, sizeof first, "%.*s", semi ? (int)(semi - v[i].key) : (int)strlen(v[i].key), v[i].key);
            printf("  end %12s -> %-12s  peak %12s -> %-12s  %s\n", sz((double)v[i].before_end), sz((double)v[i].after_end),
                   sz((double)v[i].before_peak), sz((double)v[i].after_peak), first);
        }
        if (o.have_fail_pct)
            printf("\npeak allocated %s by %.1f%% (limit %.1f%%)\n", growth >= 0 ? "grew" : "shrank", growth < 0 ? -growth : growth,
                   o.fail_pct);
    }
    for (size_t i = 0; i < n; i++) free(v[i].key);
    free(v);
    for (int f = 0; f < 2; f++) {
        cmh_report_free_sites(pk[f].sites);
        cmh_report_free_sites(lk[f].sites);
        cmh_snapshot_free(&s[f]);
    }
    return o.have_fail_pct && growth > o.fail_pct ? 3 : 0;
}

/* ---- kernels ---- */

static const char *const kernels_usage =
    "usage: cumemhist kernels [options] SNAPSHOT\n"
    "\n"
    "Kernel timing recorded with `cumemhist record --kernels` (CUPTI), one row per kernel, as in\n"
    "torch.profiler's key_averages().table(): calls, total, average, minimum and maximum\n"
    "duration, and the share of all kernel time.\n"
    "\n"
    "options:\n"
    "  --sort total|avg|calls|max   order of the rows (default total)\n"
    "  --top N                      rows to print (default 20)\n"
    "  --json                       machine-readable output (durations in ns)\n"
    "\n"
    "example: cumemhist kernels run.cmh --sort avg --top 10\n";

static void time_fmt(char *buf, size_t n, double ns)
{
    double us = ns / 1000.0; /* torch.autograd.profiler's format_time */
    if (us >= 1e6) snprintf(buf, n, "%.3fs", us / 1e6);
    else if (us >= 1e3) snprintf(buf, n, "%.3fms", us / 1e3);
    else snprintf(buf, n, "%.3fus", us);
}

int cmd_kernels(int argc, char **argv)
{
    int sort = CMH_KSORT_TOTAL;
    /* pull --sort out before the shared parser */
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_opt(argc, argv, &i, "--sort", &v)) {
            if (!strcmp(v, "total")) sort = CMH_KSORT_TOTAL;
            else if (!strcmp(v, "avg")) sort = CMH_KSORT_AVG;
            else if (!strcmp(v, "calls")) sort = CMH_KSORT_CALLS;
            else if (!strcmp(v, "max")) sort = CMH_KSORT_MAX;
            else {
                cli_error("--sort: '%s' is not total, avg, calls or max", v);
                return 2;
            }
            memmove(&argv[i - 1], &argv[i + 1], (size_t)(argc - i - 1) * sizeof *argv);
            argc -= 2;
            i -= 2;
        }
    }
    opts o;
    int rc = parse(argc, argv, kernels_usage, &o, 1);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.top == 10) o.top = 20;
    cmh_snapshot s;
    if (cli_load(o.paths[0], &s)) return 1;
    cmh_kernel_row *rows;
    uint32_t n;
    int64_t total;
    if (cmh_kernel_table(&s, sort, &rows, &n, &total) != CMH_OK) {
        cli_error("out of memory");
        cmh_snapshot_free(&s);
        return 1;
    }
    const char *status = s.kernels_status ? cmh_str(&s, s.kernels_status) : "not recorded (cumemhist record --kernels)";
    if (o.json) {
        printf("{\"file\": ");
        json_str(o.paths[0]);
        printf(", \"status\": ");
        json_str(status);
        printf(", \"kernels\": %u, \"dropped\": %" PRIu64 ", \"gpu_time_ns\": %" PRId64 ", \"rows\": [", s.nkernels,
               s.kernels_dropped, total);
        for (uint32_t i = 0; i < n && (int)i < o.top; i++) {
            printf("%s\n  {\"name\": ", i ? "," : "");
            json_str(cmh_str(&s, rows[i].name));
            printf(", \"calls\": %" PRIu64 ", \"total_ns\": %" PRId64 ", \"avg_ns\": %.1f, \"min_ns\": %" PRId64
                   ", \"max_ns\": %" PRId64 ", \"pct\": %.4f}",
                   rows[i].calls, rows[i].total_ns, rows[i].avg_ns, rows[i].min_ns, rows[i].max_ns, rows[i].pct);
        }
        printf("]}\n");
    } else if (!s.nkernels) {
        printf("%s: no kernel timing: %s\n", o.paths[0], status);
    } else {
        printf("%-60s %8s %12s %12s %12s %12s %9s\n", "Name", "Calls", "Total", "Avg", "Min", "Max", "GPU time");
        for (uint32_t i = 0; i < n && (int)i < o.top; i++) {
            char t[4][32];
            time_fmt(t[0], 32, (double)rows[i].total_ns);
            time_fmt(t[1], 32, rows[i].avg_ns);
            time_fmt(t[2], 32, (double)rows[i].min_ns);
            time_fmt(t[3], 32, (double)rows[i].max_ns);
            const char *name = cmh_str(&s, rows[i].name);
            printf("%-60.60s %8" PRIu64 " %12s %12s %12s %12s %8.2f%%\n", name, rows[i].calls, t[0], t[1], t[2], t[3],
                   rows[i].pct);
        }
        if (n > (uint32_t)o.top) printf("... %u more kernels (--top)\n", n - (uint32_t)o.top);
        char tt[32];
        time_fmt(tt, sizeof tt, (double)total);
        printf("Self CUDA time total: %s (%u kernel launches)\n", tt, s.nkernels);
        if (s.kernels_dropped) printf("note: CUPTI dropped %" PRIu64 " records; the table misses them\n", s.kernels_dropped);
    }
    free(rows);
    cmh_snapshot_free(&s);
    return 0;
}
