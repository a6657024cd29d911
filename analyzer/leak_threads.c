/*
 * leak_threads.c - one site's leak verdict from its verdicts over each recording thread that
 * holds its blocks (cumemhist/reports.h, cmh_leak_combine_threads).
 *
 * Threads that each run the same loop and race one another leave a record whose own steps,
 * found in the pattern of their allocations interleaved, differ from run to run: three threads
 * each keeping 256 KiB a step read "+768.0 KiB per step over the last 9 steps" in one run,
 * "over the last 6" in the next, and "+256.0 KiB ... of recording thread 1" (the others' share
 * forgotten) when the interleaving hid the record's loop.  Each thread's own entries come in the
 * order it made them whatever the race, so its steps and its share of a site are the same every
 * run: judged over those, and summed here, the verdict is too.
 */
#include <string.h>

#include "cumemhist/reports.h"

void cmh_leak_combine_threads(cmh_site *x, const cmh_site *one, const uint32_t *thread, uint32_t n)
{
    if (!n) return;
    uint32_t growing = 0, first = 0, holder = 0, steps = UINT32_MAX, stride = 1, rises = 0, flat = UINT32_MAX;
    uint32_t gs_lo = UINT32_MAX, gs_hi = 0, after = 0, stops = 0, from = UINT32_MAX, to = 0;
    uint64_t top = 0, warm_growth = 0;
    int64_t stop_rate = 0, stop_lo = INT64_MAX, stop_hi = INT64_MIN;
    int warm = 0;
    int64_t sum = 0, lo = INT64_MAX, hi = INT64_MIN;
    uint64_t held = 0, mask_g = 0, mask_all = 0;
    double trend = 1;
    for (uint32_t i = 0; i < n; i++) {
        const cmh_site *o = &one[i];
        uint64_t bit = thread[i] < 64 ? 1ull << thread[i] : 0;
        mask_all |= bit;
        held += o->held;
        if (o->steps < steps) steps = o->steps;
        if (o->stride > stride) stride = o->stride;
        after += o->verdict == CMH_LEAK_AFTER;
        if (o->held && !holder) holder = thread[i];
        if (o->verdict == CMH_LEAK_GROWING) {
            if (!growing++) first = thread[i];
            mask_g |= bit;
            sum = (int64_t)((uint64_t)sum + (uint64_t)o->rate); /* (a hostile file's rates wrap, never UB) */
            if (o->rate < lo) lo = o->rate;
            if (o->rate > hi) hi = o->rate;
            if (o->growth_steps < gs_lo) gs_lo = o->growth_steps;
            if (o->growth_steps > gs_hi) gs_hi = o->growth_steps;
            if (o->trend < trend) trend = o->trend;
        }
        if (o->verdict == CMH_LEAK_STOPPED) { /* each one's stretch in its own steps: from the earliest to the latest */
            stops++;
            if (o->growth_first < from) from = o->growth_first;
            if (o->growth_first + o->growth_steps - 1 > to) to = o->growth_first + o->growth_steps - 1;
            stop_rate = (int64_t)((uint64_t)stop_rate + (uint64_t)o->rate);
            if (o->rate < stop_lo) stop_lo = o->rate;
            if (o->rate > stop_hi) stop_hi = o->rate;
            top += o->top;
            warm_growth += o->warm_growth;
        } else
            top += o->held; /* (another holder's bytes: what it held at the end, it held then) */
        /* a growth that stopped in every thread that rose: the most rises, the fewest flat steps */
        if (o->rises > rises) rises = o->rises, warm = o->warm_rise;
        if (o->rises && o->flat_steps < flat) flat = o->flat_steps;
    }
    x->threads = n;
    x->steps = steps;
    x->stride = stride;
    x->held = held;
    if (growing) {
        x->verdict = CMH_LEAK_GROWING;
        x->growing = 1;
        x->thread = first;
        x->thread_mask = mask_g;
        x->rate = sum;
        x->rate_min = lo;
        x->rate_max = hi;
        x->growth_steps = gs_lo;
        x->growth_steps_max = gs_hi;
        x->trend = trend;
        x->rises = rises;
        x->flat_steps = 0;
        x->growth_first = 0;
        x->top = x->warm_growth = 0;
        return;
    }
    /* none grows: grew over several of its own steps and stopped in one of them at least
     * (stopped: their rates summed, each one's, from the earliest step any began to grow to the
     * latest any stopped, each in its own steps), else held across steps by one at least (state), else back
     * to the same level each step in every one (steady), made only after each one's last step
     * (after) */
    x->verdict = stops && held ? CMH_LEAK_STOPPED : held ? CMH_LEAK_STATE : after == n ? CMH_LEAK_AFTER : CMH_LEAK_STEADY;
    x->growing = 0;
    x->thread = held ? holder : thread[0];
    x->thread_mask = mask_all;
    x->rate = x->rate_min = x->rate_max = 0;
    x->growth_steps = x->growth_steps_max = x->growth_first = 0;
    x->top = x->warm_growth = 0;
    if (x->verdict == CMH_LEAK_STOPPED) {
        x->rate = stop_rate;
        x->rate_min = stop_lo;
        x->rate_max = stop_hi;
        x->growth_first = from;
        x->growth_steps = to - from + 1;
        x->top = top;
        x->warm_growth = warm_growth;
    }
    x->trend = 0;
    x->rises = rises;
    x->warm_rise = warm;
    x->flat_steps = rises && flat != UINT32_MAX ? flat : 0;
}
