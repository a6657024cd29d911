/*
 * kernels.c - kernel timing from the CUPTI sidecar: the per-kernel table users know from
 * prof.key_averages().table(), and what the GPU was doing at a given moment.
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "grow.h"

/* One comparator per order (qsort has no context argument, and a global would not be
 * thread-safe): larger first, then by name id. */
#define BY(field)                                                                                                \
    static int cmp_##field(const void *a, const void *b)                                                         \
    {                                                                                                            \
        const cmh_kernel_row *x = a, *y = b;                                                                     \
        if (x->field != y->field) return x->field > y->field ? -1 : 1;                                           \
        return x->name < y->name ? -1 : x->name > y->name;                                                       \
    }
BY(total_ns)
BY(avg_ns)
BY(calls)
BY(max_ns)
#undef BY

int cmh_kernel_table(const cmh_snapshot *s, int device, int sort, cmh_kernel_row **out, uint32_t *n, int64_t *gpu_total_ns)
{
    cmh_kernel_row *rows = NULL;
    uint32_t nr = 0, cap = 0;
    uint32_t *by_name = calloc(s->strings.n + 1, sizeof *by_name); /* name id -> row + 1 */
    if (!by_name) return CMH_ENOMEM;
    int64_t total = 0;
    for (uint32_t i = 0; i < s->nkernels; i++) {
        const cmh_kernel *k = &s->kernels[i];
        if (!k->start_ns || k->end_ns < k->start_ns || k->name >= s->strings.n) continue; /* no timestamps */
        if (device != CMH_ALL_DEVICES && k->device != device) continue;
        int64_t d = (int64_t)((uint64_t)k->end_ns - (uint64_t)k->start_ns); /* end >= start: fits */
        if (!by_name[k->name]) {
            if (CMH_GROW(rows, cap, (uint64_t)nr + 1, 64)) {
                free(rows);
                free(by_name);
                return CMH_ENOMEM;
            }
            memset(&rows[nr], 0, sizeof rows[nr]);
            rows[nr].name = k->name;
            rows[nr].min_ns = INT64_MAX;
            by_name[k->name] = ++nr;
        }
        cmh_kernel_row *r = &rows[by_name[k->name] - 1];
        r->calls++;
        r->total_ns += d;
        if (d < r->min_ns) r->min_ns = d;
        if (d > r->max_ns) r->max_ns = d;
        total += d;
    }
    for (uint32_t i = 0; i < nr; i++) {
        rows[i].avg_ns = (double)rows[i].total_ns / (double)rows[i].calls;
        rows[i].pct = total ? 100.0 * (double)rows[i].total_ns / (double)total : 0.0;
    }
    int (*cmp)(const void *, const void *) = sort == CMH_KSORT_AVG     ? cmp_avg_ns
                                             : sort == CMH_KSORT_CALLS ? cmp_calls
                                             : sort == CMH_KSORT_MAX   ? cmp_max_ns
                                                                       : cmp_total_ns;
    if (nr) qsort(rows, nr, sizeof *rows, cmp);
    free(by_name);
    *out = rows;
    *n = nr;
    *gpu_total_ns = total;
    return CMH_OK;
}

void cmh_kernels_at(const cmh_snapshot *s, int device, int64_t t, const cmh_kernel **running, const cmh_kernel **last_done)
{
    *running = *last_done = NULL;
    for (uint32_t i = 0; i < s->nkernels; i++) {
        const cmh_kernel *k = &s->kernels[i];
        if (k->device != device || !k->start_ns) continue;
        if (k->start_ns <= t && t <= k->end_ns) {
            if (!*running || k->start_ns > (*running)->start_ns) *running = k;
        } else if (k->end_ns < t && (!*last_done || k->end_ns > (*last_done)->end_ns)) {
            *last_done = k;
        }
    }
}
