/*
 * summary.c - torch.cuda.memory_summary(), computed from a replay of the trace.
 *
 * The layout is PyTorch's to the character (docs/PYTORCH.md, memory_summary() layout): 75 columns inside '|', sizes scaled
 * by the "all" row of the same column (so sub-rows share its unit), counts by 1000 from 750 K.
 */
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"

int cmh_summary_compute(const cmh_snapshot *s, int device, cmh_mem_stats *out)
{
    cmh_peak_report p;
    return cmh_summary_compute_peak(s, device, out, &p);
}

int cmh_summary_compute_peak(const cmh_snapshot *s, int device, cmh_mem_stats *out, cmh_peak_report *p)
{
    int rc = cmh_whole_replay_peak(s, device, out, p); /* one replay for the peak's totals too (reports.h's memo) */
    if (rc != CMH_OK) return rc;
    /* an OOM the allocator retried after freeing its cache is memory_summary's retry, not an OOM
     * the program saw (driver-level records; PyTorch records its OOMs once it gave up) */
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    uint64_t retries = cmh_oom_retries(s, t);
    if (retries > out->num_ooms) retries = out->num_ooms;
    out->num_ooms -= retries;
    out->num_alloc_retries += retries;
    /* a counter, as PyTorch's num_ooms: the OOMs the ring dropped were seen all the same */
    if (t) out->num_ooms += t->dropped_ooms;
    out->num_alloc_retries = cmh_alloc_retries(s, out->num_ooms, out->num_alloc_retries);
    return CMH_OK;
}

uint64_t cmh_alloc_retries(const cmh_snapshot *s, uint64_t ooms, uint64_t retries)
{
    /* PyTorch's allocator, before it gives up, frees its cached blocks and asks once more
     * (alloc_block(isRetry): num_alloc_retries += 1) outside a CUDA graph's capture: each OOM of a
     * PyTorch snapshot had a retry at least (those that then met are in no snapshot) */
    if (s->source == CMH_SRC_PYTORCH && !(s->pt_fields & CMH_PT_FROM_RECORDER) && retries < ooms) return ooms;
    return retries;
}

/* Python's // on possibly negative numbers */
static int64_t floordiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

static void fmt_size(char *buf, size_t n, int64_t sz, double pref)
{
    static const char *const units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    for (int k = 1; k < 6; k++) {
        if (pref < 768 * 1024) break;
        u = k;
        sz = floordiv(sz, 1024);
        pref /= 1024;
    }
    snprintf(buf, n, "%6lld %s", (long long)sz, units[u]);
}

static void fmt_count(char *buf, size_t n, int64_t c, double pref)
{
    static const char *const units[] = {" ", "K", "M"};
    int u = 0;
    for (int k = 1; k < 3; k++) {
        if (pref < 750 * 1000) break;
        u = k;
        c = floordiv(c, 1000);
        pref /= 1000;
    }
    snprintf(buf, n, "%7lld %s ", (long long)c, units[u]);
}

typedef void (*fmt_fn)(char *, size_t, int64_t, double);

static void line(FILE *fp, char ch)
{
    fputc('|', fp);
    for (int i = 0; i < 75; i++) fputc(ch, fp);
    fputs("|\n", fp);
}

/* history 0: only Cur Usage is known (the end state); the other columns print '-', the width of a
 * figure, rather than the end state dressed as a peak and totals */
static void row(FILE *fp, const char *name, const cmh_stat *v, const cmh_stat *pref, fmt_fn f, int history)
{
    char c[32], p[32] = "         -", a[32] = "         -", fr[32] = "         -";
    f(c, sizeof c, v->current, (double)pref->current);
    if (history) {
        f(p, sizeof p, v->peak, (double)pref->peak);
        f(a, sizeof a, v->allocated, (double)pref->allocated);
        f(fr, sizeof fr, v->freed, (double)pref->freed);
    }
    fprintf(fp, "| %-21s | %s | %s | %s | %s |\n", name, c, p, a, fr);
}

void cmh_summary_print(const cmh_mem_stats *st, int device, int abbreviated, FILE *fp)
{
    cmh_summary_print_titled(st, device, abbreviated, 1, fp);
}

void cmh_summary_print_titled(const cmh_mem_stats *st, int device, int abbreviated, int pytorch, FILE *fp)
{
    cmh_summary_print_known(st, device, abbreviated, pytorch, 1, fp);
}

void cmh_summary_print_known(const cmh_mem_stats *st, int device, int abbreviated, int pytorch, int history, FILE *fp)
{
    int ooms_known = history != 0;
    history = history == 1;
    struct {
        const cmh_stat *arr;
        const char *name;
        fmt_fn f;
    } metrics[] = {
        {st->allocated_bytes, "Allocated memory", fmt_size},
        {st->active_bytes, "Active memory", fmt_size},
        {st->requested_bytes, "Requested memory", fmt_size},
        {st->reserved_bytes, "GPU reserved memory", fmt_size},
        {st->inactive_split_bytes, "Non-releasable memory", fmt_size},
        {st->allocation, "Allocations", fmt_count},
        {st->active, "Active allocs", fmt_count},
        {st->segment, "GPU reserved segments", fmt_count},
        {st->inactive_split, "Non-releasable allocs", fmt_count},
    };
    line(fp, '=');
    /* PyTorch's title only over what PyTorch's allocator recorded; the same width either way */
    fprintf(fp, "|                  %s CUDA memory summary, device ID %-17d |\n", pytorch ? "PyTorch" : "       ", device);
    line(fp, '-');
    if (history)
        fprintf(fp, "|            CUDA OOMs: %-12llu |        cudaMalloc retries: %-8llu  |\n",
                (unsigned long long)st->num_ooms, (unsigned long long)st->num_alloc_retries);
    else if (ooms_known) /* counted without history: the retries are not */
        fprintf(fp, "|            CUDA OOMs: %-12llu |        cudaMalloc retries: %-8s  |\n", (unsigned long long)st->num_ooms, "-");
    else /* the errors are in the history a record without one does not have */
        fprintf(fp, "|            CUDA OOMs: %-12s |        cudaMalloc retries: %-8s  |\n", "-", "-");
    line(fp, '=');
    fputs("|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n", fp);
    for (size_t m = 0; m < sizeof metrics / sizeof metrics[0]; m++) {
        line(fp, '-');
        row(fp, metrics[m].name, &metrics[m].arr[CMH_POOL_ALL], &metrics[m].arr[CMH_POOL_ALL], metrics[m].f, history);
        if (abbreviated) continue;
        row(fp, "      from large pool", &metrics[m].arr[CMH_POOL_LARGE], &metrics[m].arr[CMH_POOL_ALL], metrics[m].f, history);
        row(fp, "      from small pool", &metrics[m].arr[CMH_POOL_SMALL], &metrics[m].arr[CMH_POOL_ALL], metrics[m].f, history);
    }
    line(fp, '-');
    row(fp, "Oversize allocations", &st->oversize_allocations, &st->oversize_allocations, fmt_count, history);
    line(fp, '-');
    row(fp, "Oversize GPU segments", &st->oversize_segments, &st->oversize_segments, fmt_count, history);
    line(fp, '=');
}
