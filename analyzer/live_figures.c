/*
 * live_figures.c - each device's figures from a live reader (live_reader.h): allocated,
 * reserved, their peaks, entries, drops, OOMs, the latest cuMemGetInfo sample, and the change
 * of allocated bytes per minute read off the points the walk keeps; and the reader's identity.
 */
#include <string.h>
#include <time.h>

#include "cumemhist/reports.h"
#include "live_reader.h"

/* Now, on the recorder's clock (cmh_now_ns) */
static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Allocated bytes per minute over the minute up to now (the process's last entry, once it
 * ended), or, for a process younger than that, over the later half of its life (from the end of
 * its first second at the earliest): its start-up (weights loaded in its first moments) is no
 * growth per minute, and counting it made a process that loads 4 GiB and then leaks 80 MiB a
 * second read '+84 GiB/min' at 3 s and '+20 GiB/min' at 15 s.  A point holds the latest value
 * of its second, so the half starts at the end of the last point's second that ended by
 * mid-life.  A figure per minute from a shorter span is an extrapolation, and one from a burst
 * says nothing of a rate: as `leaks` gives a rate (CMH_LEAK_RATE_MIN_NS, CMH_LEAK_MIN_STEPS of
 * CMH_LEAK_RATE_SLICES stretches), a younger span has one only when it lasted a second at least
 * and allocated changed in as many of its equal stretches; a whole minute's change is the
 * change per minute itself.  *known 0: none. */
int64_t cmh_live_rate(const rate_pt *r, uint32_t n, int64_t now, uint64_t allocated, int *known)
{
    *known = 0;
    if (n < 2 || now < INT64_MIN + 60ll * 1000000000) return 0;
    int64_t from = now - 60ll * 1000000000;
    uint32_t i = 0;
    while (i + 1 < n && r[i + 1].ns <= from) i++; /* the value as the window opened */
    int64_t t0 = r[i].ns > from ? r[i].ns : from;
    if (t0 > from) { /* younger than the window: a trend over its stretches, or nothing */
        int64_t span = now - t0;
        if (span < CMH_LEAK_RATE_MIN_NS) return 0; /* under a second: no rate yet */
        uint32_t slices = 0;
        for (uint32_t j = i + 1; j < n; j++) {
            if (r[j].allocated == r[j - 1].allocated) continue;
            int64_t s = (int64_t)((double)(r[j].ns - t0) * CMH_LEAK_RATE_SLICES / (double)span);
            slices |= 1u << (s < 0 ? 0 : s >= CMH_LEAK_RATE_SLICES ? CMH_LEAK_RATE_SLICES - 1 : s);
        }
        if ((uint32_t)__builtin_popcount(slices) < CMH_LEAK_MIN_STEPS && allocated != r[i].allocated) return 0;
        /* a trend: its figure from the later half of its life, past its start-up */
        if (r[1].ns > now - CMH_LEAK_RATE_MIN_NS) return 0; /* (a hostile record's times may lie ahead) */
        int64_t mid = r[1].ns + (now - r[1].ns) / 2;
        i = 1;
        while (i + 1 < n && r[i + 1].ns <= mid - 1000000000) i++;
        t0 = r[i].ns + 1000000000; /* the end of that point's second: its value then */
    }
    int64_t span = now - t0;
    if (span < CMH_LEAK_RATE_MIN_NS) return 0; /* under a second: no rate yet */
    *known = 1;
    return (int64_t)(((double)allocated - (double)r[i].allocated) * 60e9 / (double)span);
}

static int64_t change_per_min(const cmh_live *l, int k, uint64_t allocated, int *known)
{
    int64_t now = l->info.last_ns;
    if (l->alive && wall_ns() > now) now = wall_ns();
    return cmh_live_rate(l->rate[k], l->nrate[k], now, allocated, known);
}

const cmh_live_info *cmh_live_get_info(const cmh_live *l) { return &l->info; }
const char *cmh_live_path(const cmh_live *l) { return l->path; }

uint32_t cmh_live_devices(const cmh_live *l, cmh_live_device *out, uint32_t cap)
{
    uint32_t n = 0;
    uint64_t max = hdr(l)->max_entries;
    for (int k = 0; k < CMH_FLIGHT_SLOTS; k++) {
        const ltrace *t = &l->tr[k];
        if (!t->present && !l->st.reserved[k] && !l->last_sample[k].time_ns) continue;
        if (n < cap) {
            cmh_live_device *d = &out[n];
            memset(d, 0, sizeof *d);
            d->device = k == CMH_FLIGHT_SLOTS - 1 ? -1 : k;
            d->allocated = l->st.allocated[k];
            d->reserved = l->st.reserved[k];
            d->peak_allocated = l->st.peak_allocated[k];
            d->peak_reserved = l->st.peak_reserved[k];
            d->entries = t->entries;
            d->dropped = max && t->entries > max ? t->entries - max : 0;
            d->ooms = t->ooms;
            for (uint32_t q = 0; q < t->npend && l->alive; q++) /* too new to tell from a retry */
                if (wall_ns() - t->pend[q].ns < CMH_LIVE_OOM_GRACE_MS * 1000000ll) d->ooms--;
            d->oom_retries = t->retries;
            if (l->last_sample[k].time_ns) {
                d->meminfo_known = 1;
                d->mem_free = l->last_sample[k].free;
                d->mem_total = l->last_sample[k].total;
                d->mem_time_ns = l->last_sample[k].time_ns;
            }
            d->change_per_min = change_per_min(l, k, d->allocated, &d->change_known);
        }
        n++;
    }
    return n;
}
