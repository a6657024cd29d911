/*
 * leakwords.c - the leak verdict in words (cumemhist/leakwords.h).  One wording, so that
 * `leaks`, its JSON, the HTML report and `ranks` can never say two things of one verdict.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/leakwords.h"
#include "svg.h"

const char *cmh_leak_steps_source(int source)
{
    static const char *const names[] = {"unknown", "marks", "annotations", "pattern"};
    return source >= 0 && source <= CMH_STEPS_PATTERN ? names[source] : "unknown";
}

static const char *plural(uint64_t n, const char *one, const char *many) { return n == 1 ? one : many; }

/* Marks (annotations) of other devices placed among this device's entries: ", placed by time:
 * this device's trace has none" when all are, ", the first 1 placed by time: this device's trace
 * begins after it" when the device was first used after them; "" when none are. */
static const char *lent_text(const cmh_steps *st, char *buf, size_t cap)
{
    if (!st->borrowed) buf[0] = 0;
    else if (st->borrowed >= st->marks) snprintf(buf, cap, ", placed by time: this device's trace has none");
    else snprintf(buf, cap, ", the first %u placed by time: this device's trace begins after %s", st->borrowed, st->borrowed == 1 ? "it" : "them");
    return buf;
}

const char *cmh_leak_steps_text(const cmh_leak_report *p, char *buf, size_t cap)
{
    const cmh_steps *st = &p->steps;
    char lent[96];
    size_t n = 0;
#define ADD(...)                                                                   \
    do {                                                                           \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);         \
    } while (0)
    buf[0] = 0;
    /* threads racing: the record's pattern is the scheduler's (it read 'steps: 39 ... (period 65
     * entries)' in one run, 'steps: 160 ... (period 16 entries)' in the next); the threads' own
     * steps are the same every run */
    if (p->steps_raced) {
        ADD("steps: each recording thread's own (threads with loops of their own: a pattern across their entries would be "
            "the scheduler's): %u %s %s ",
            p->race_threads, plural(p->race_threads, "thread", "threads"), plural(p->race_threads, "repeats", "repeat"));
        if (p->race_steps_min == p->race_steps_max) ADD("%u steps%s", p->race_steps_min, p->race_threads > 1 ? " each" : "");
        else ADD("%u to %u steps", p->race_steps_min, p->race_steps_max);
        if (p->race_period_min == p->race_period_max)
            ADD(" (%" PRIu64 " of %s own %s a step)", p->race_period_min, p->race_threads > 1 ? "their" : "its",
                plural(p->race_period_min, "entry", "entries"));
        else ADD(" (%" PRIu64 " to %" PRIu64 " of their own entries a step)", p->race_period_min, p->race_period_max);
    } else
    switch (st->source) {
    case CMH_STEPS_MARKS:
        ADD("steps: %u from the program's marks (\"%s\"%s)", st->count, st->label, lent_text(st, lent, sizeof lent));
        break;
    case CMH_STEPS_ANNOTATIONS:
        ADD("steps: %u from %s annotations", st->count, st->label);
        if (st->borrowed) ADD(" (%s)", lent_text(st, lent, sizeof lent) + 2);
        break;
    case CMH_STEPS_PATTERN:
        ADD("steps: %u detected from the allocation pattern (period %" PRIu64 " %s", st->count, st->period,
            plural(st->period, "entry", "entries"));
        if (st->shapes == 2) ADD(" as it ended; the loop changed shape once");
        else if (st->shapes == 3) ADD(" as it ended; the loop changed shape twice");
        else if (st->shapes > 3) ADD(" as it ended; the loop changed shape %u times", st->shapes - 1);
        ADD(")");
        if (st->few_count)
            ADD(", not the %u from %s%s%s (fewer than the %u growth needs)", st->few_count,
                st->few_source == CMH_STEPS_MARKS ? "the program's marks (\"" : "", st->few_label,
                st->few_source == CMH_STEPS_MARKS ? "\")" : " annotations", CMH_LEAK_MIN_STEPS);
        break;
    default:
        /* (a record of one entry has a history: too short a one to hold a loop) */
        if (!p->base.history) ADD("steps: unknown (the record has no allocation history)");
        else if (p->base.entries == 1) ADD("steps: unknown (the record has 1 trace entry: no loop to find)");
        else ADD("steps: unknown (no step marks or annotations, and no repeating allocation pattern)");
    }
    if (st->stride > 1 && !p->steps_raced) ADD(", measured every %u steps", st->stride);
    if (!p->judged && p->live_blocks && st->count && !p->steps_raced) {
        uint32_t active = cmh_steps_active(st);
        if (active < st->count) /* (the steps before this device was first used hold none of its entries) */
            ADD("; growth needs %u steps with this device's entries, it has %u (one to warm up, three to rise across)", CMH_LEAK_MIN_STEPS, active);
        else ADD("; growth needs %u steps (one to warm up, three to rise across)", CMH_LEAK_MIN_STEPS);
    }
    /* the threads' own steps, a sentence of its own: the record's steps and a thread's are two
     * things.  A thread repeats steps when it has CMH_LEAK_MIN_STEPS and made entries in as many
     * (leaks.c, repeaters(): the main thread marking the steps, its memory made once, does not) */
    /* (the record's steps and a thread's are two
     * things ('steps: unknown (...); 1 of the 1 recording threads ... repeat 4 or more steps of
     * their own' read as one contradicting itself) */
    /* (and said plainly: '1 of the 3 recording threads holding memory repeats 4 or more steps of
     * its own, and is judged by them' was hard to read) */
    uint32_t t = p->threads, j = p->threads_judged, m = CMH_LEAK_MIN_STEPS;
    if (t == 1 && j) ADD(". The thread holding memory has a loop of its own (%u steps or more); its sites are also judged by that loop's steps", m);
    else if (t == 1) ADD(". The thread holding memory has no loop of its own (%u steps or more)", m);
    else if (t && j == t)
        ADD(". Each of the %u threads holding memory has a loop of its own (%u steps or more); each one's sites are also judged by its loop's steps", t, m);
    else if (t && !j) ADD(". None of the %u threads holding memory has a loop of its own (%u steps or more)", t, m);
    else if (t && j == 1)
        ADD(". Of the %u threads holding memory, 1 has a loop of its own (%u steps or more); its sites are also judged by that loop's steps", t, m);
    else if (t)
        ADD(". Of the %u threads holding memory, %u have a loop of their own (%u steps or more); each one's sites are also judged by its loop's steps",
            t, j, m);
    return buf;
#undef ADD
}

const char *cmh_leak_site_word(const cmh_site *x)
{
    switch (x->verdict) {
    case CMH_LEAK_GROWING: return "growing";
    case CMH_LEAK_RISING: return "rising";
    case CMH_LEAK_STOPPED: return "stopped";
    case CMH_LEAK_STATE: return "state";
    case CMH_LEAK_STEADY: return "steady";
    case CMH_LEAK_AFTER: return "after";
    default: return x->unjudged_why ? "unjudged" : x->time_verdict == CMH_TIME_LEVEL ? "level" : "held";
    }
}

/* A site holding blocks that leave the device unjudged (cmh_site.unjudged_why): why, as the
 * outcome says it for the device */
static const char *unjudged_text(const cmh_site *x, char *buf, size_t cap)
{
    char size[32];
    snprintf(size, sizeof size, "%s", cmh_svg_size((double)x->unjudged_bytes));
    const char *blocks = plural(x->unjudged_blocks, "block", "blocks");
    if (x->unjudged_why == CMH_UNJUDGED_BEFORE_HISTORY)
        snprintf(buf, cap,
                 "unjudged: %s of it (%" PRIu64 " %s) was made before the first entry the record kept, in none of the recording threads' "
                 "steps (they race: each thread's blocks count over its own steps); growth not judged",
                 size, x->unjudged_blocks, blocks);
    else if (x->unjudged_why == CMH_UNJUDGED_NO_THREAD)
        snprintf(buf, cap,
                 "unjudged: %s of it (%" PRIu64 " %s) was made by entries that name no recording thread, in none of the recording threads' "
                 "steps (they race: each thread's blocks count over its own steps); growth not judged",
                 size, x->unjudged_blocks, blocks);
    else
        snprintf(buf, cap,
                 "unjudged: recording thread %u made %s of it (%" PRIu64 " %s) beside the other threads' loops, not before them from the main thread, and repeats too few steps "
                 "of its own (%u of the %u needed; they race: each thread's blocks count over its own steps); growth not judged",
                 x->unjudged_thread, size, x->unjudged_blocks, blocks, x->unjudged_thread_steps, CMH_LEAK_MIN_STEPS);
    return buf;
}

/* A site judged over the record's time (steps not found), in words: what was observed, no rate */
static const char *time_text(const cmh_site *x, const char *whose, char *buf, size_t cap)
{
    char span[32], part[32], from[32], to[32], top[32];
    cmh_span_text(x->time_span_ns, span, sizeof span);
    uint32_t M = x->time_slices ? x->time_slices : CMH_TIME_SLICES, n = M - x->time_low + 1;
    cmh_span_text((int64_t)((double)x->time_span_ns * n / M), part, sizeof part);
    snprintf(from, sizeof from, "%s", cmh_svg_size((double)x->time_from));
    snprintf(to, sizeof to, "%s", cmh_svg_size((double)x->time_to));
    snprintf(top, sizeof top, "%s", cmh_svg_size((double)x->time_top));
    if (x->time_verdict == CMH_TIME_GROWING)
        snprintf(buf, cap,
                 "growing over time (steps not found): held %s through slice %u and %s through the last, growing over the last %u of "
                 "the %u equal slices of the record (%s of %s), more through %u of the %u after its lowest; %" PRIu64
                 " allocations, in %u of the slices%s",
                 from, x->time_low, to, n, M, part, span, x->time_rises, n - 1, x->time_allocs, x->time_busy, whose);
    else {
        char before[32], drop[32];
        uint32_t at = 0; /* the slice before the last it held the most through */
        for (uint32_t k = 1; k + 1 < M && k < CMH_TIME_SLICES; k++)
            if (x->time_held[k] > x->time_held[at]) at = k;
        snprintf(before, sizeof before, "%s", cmh_svg_size((double)x->time_held[at]));
        snprintf(drop, sizeof drop, "%s", cmh_svg_size((double)x->time_drop));
        if (x->time_verdict == CMH_TIME_LEVEL)
            snprintf(buf, cap,
                     "level over time (steps not found): held %s through the last of the %u equal slices of the %s record, no more than "
                     "through slice %u (%s, its most before), give or take %s (the most it held less through one slice than through "
                     "the one before); %" PRIu64 " allocations, in %u of the slices%s",
                     to, M, span, at + 1, before, drop, x->time_allocs, x->time_busy, whose);
        else
            snprintf(buf, cap,
                     "held, steps not found: over the %u equal slices of the %s record it held %s through the last, above its most "
                     "before (%s, slice %u) by more than %s (the most it held less through one slice than through the one before), but "
                     "not steadily enough to call growing; growth not judged%s",
                     M, span, to, before, at + 1, drop, whose);
    }
    return buf;
}

/* "steps 1-10", "step 4": the steps a stopped site grew over */
static void stopped_range(const cmh_site *x, char *buf, size_t cap)
{
    uint32_t from = x->growth_first, to = x->growth_first + x->growth_steps - 1;
    if (from == to) snprintf(buf, cap, "step %u", from);
    else snprintf(buf, cap, "steps %u-%u", from, to);
}

/* A growth that stopped (CMH_LEAK_STOPPED), after "stopped: ": how it grew, then how long it
 * has not, then what it holds; each part a clause of its own, step numbers the record's.
 *   grew +8.0 MiB per step over steps 1-10, then flat for the last 10 steps; 80.0 MiB still held
 *   at the end, never freed
 * Where not every step (stretch) of the growth rose, how many did, and the rate on average;
 * past 512 steps the unit each count is in.  whose: " of recording thread 2" or "". */
static size_t stopped_head(const cmh_site *x, const char *whose, char *buf, size_t cap)
{
    uint32_t stride = x->stride > 1 ? x->stride : 1, stretches = x->growth_steps / stride;
    uint32_t rose = x->rises + (x->warm_rise && !x->warm_growth); /* (the first step's rise, where it is in the stretch) */
    char rate[32], range[48];
    snprintf(rate, sizeof rate, "+%s", cmh_svg_size((double)x->rate));
    stopped_range(x, range, sizeof range);
    int n;
    if (rose >= stretches && stride > 1) n = snprintf(buf, cap, "grew %s per step over %s, measured every %u steps%s", rate, range, stride, whose);
    else if (rose >= stretches) n = snprintf(buf, cap, "grew %s per step over %s%s", rate, range, whose);
    else if (stride > 1)
        n = snprintf(buf, cap, "grew in %u of the %u stretches of %u steps over %s%s, %s per step on average", rose, stretches, stride, range, whose, rate);
    else n = snprintf(buf, cap, "grew in %u of %s%s, %s per step on average", rose, range, whose, rate);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap;
}

/* ... then: ", then flat for the last 10 steps; 80.0 MiB still held at the end, never freed",
 * with what was freed since it stopped, and what a first step left out of the growth (state
 * made in it: a warm-up) added. */
static void stopped_tail(const cmh_site *x, char *buf, size_t cap)
{
    size_t n = 0;
#define ADD(...)                                                           \
    do {                                                                   \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__); \
    } while (0)
    ADD(", then %s for the last %u %s", x->held >= x->top ? "flat" : "grew no more", x->flat_steps, plural(x->flat_steps, "step", "steps"));
    ADD("; %s still held at the end", cmh_svg_size((double)x->held));
    if (x->held >= x->top) ADD(", never freed");
    else ADD(", after %s of it was freed", cmh_svg_size((double)(x->top - x->held)));
    if (x->warm_growth) ADD("; its first %s, a warm-up, added %s of it", x->stride > 1 ? "stretch" : "step", cmh_svg_size((double)x->warm_growth));
#undef ADD
}

/* "recording threads 2, 3, 4" (the first 6 of a mask, then how many more) */
static void thread_list(uint64_t mask, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "recording threads");
    uint32_t shown = 0, more = 0;
    for (uint32_t t = 1; t < 64; t++) {
        if (!(mask >> t & 1)) continue;
        if (shown == 6) {
            more++;
            continue;
        }
        if (n < cap) n += (size_t)snprintf(out + n, cap - n, "%s %u", shown ? "," : "", t);
        shown++;
    }
    if (more && n < cap) snprintf(out + n, cap - n, " and %u more", more);
}

static uint32_t bits(uint64_t m)
{
    uint32_t c = 0;
    for (; m; m &= m - 1) c++;
    return c;
}

/* A verdict judged thread by thread (x->threads, cmh_leak_combine_threads): the threads named,
 * each one's rate and stretch, their sum; NULL when one thread alone is named (its usual words). */
static const char *threads_text(const cmh_site *x, char *buf, size_t cap)
{
    uint32_t k = bits(x->thread_mask);
    if (x->threads < 2 || (x->verdict == CMH_LEAK_GROWING && k < 2)) return NULL;
    char list[128], of[48] = "", each[64], over[48];
    thread_list(x->thread_mask, list, sizeof list);
    /* (the same words whether or not the threads' runs overlapped this time: 'their steps
     * interleave' or 'one thread after another' by the run, for one program) */
    const char *why = "judged thread by thread: each by its own steps";
    switch (x->verdict) {
    case CMH_LEAK_GROWING:
        if (k < x->threads) snprintf(of, sizeof of, ", %u of the %u holding it", k, x->threads);
        if (x->rate_min == x->rate_max) snprintf(each, sizeof each, "%s%s each", x->rate_min >= 0 ? "+" : "", cmh_svg_size((double)x->rate_min));
        else {
            int m = snprintf(each, sizeof each, "%s%s", x->rate_min >= 0 ? "+" : "", cmh_svg_size((double)x->rate_min));
            snprintf(each + m, sizeof each - (size_t)m, " to %s%s each", x->rate_max >= 0 ? "+" : "", cmh_svg_size((double)x->rate_max));
        }
        if (x->growth_steps == x->growth_steps_max) snprintf(over, sizeof over, "the last %u %s", x->growth_steps, plural(x->growth_steps, "step", "steps"));
        else snprintf(over, sizeof over, "the last %u to %u steps", x->growth_steps, x->growth_steps_max);
        snprintf(buf, cap, "growing: %s%s per step of %s together%s (%s), over %s of each; %s", x->rate >= 0 ? "+" : "",
                 cmh_svg_size((double)x->rate), list, of, each, over, why);
        return buf;
    case CMH_LEAK_STOPPED: { /* each its own rate, over its own steps (they need not run at once) */
        char range[48], tail[256];
        stopped_range(x, range, sizeof range);
        stopped_tail(x, tail, sizeof tail);
        if (x->rate_min == x->rate_max)
            snprintf(buf, cap, "stopped: %s each grew +%s per step over %s of its own%s; %s", list, cmh_svg_size((double)x->rate_min), range, tail, why);
        else {
            snprintf(each, sizeof each, "+%s", cmh_svg_size((double)x->rate_min));
            snprintf(buf, cap, "stopped: %s grew %s to +%s per step each over %s of their own%s; %s", list, each,
                     cmh_svg_size((double)x->rate_max), range, tail, why);
        }
        return buf;
    }
    case CMH_LEAK_STATE:
        snprintf(buf, cap, "state: %s held across steps by %s, growing in none; %s", cmh_svg_size((double)x->held), list, why);
        return buf;
    case CMH_LEAK_STEADY: snprintf(buf, cap, "steady: back to the same level each step in each of %s; %s", list, why); return buf;
    default: return NULL; /* (after: judged by one thread's last step, its usual words) */
    }
}

/* "80 ms", "2.50 s", "12.0 min" */
void cmh_span_text(int64_t ns, char *out, size_t cap)
{
    double s = (double)ns / 1e9;
    if (s < 0.001) snprintf(out, cap, "1 ms"); /* (said as 'within') */
    else if (s < 1) snprintf(out, cap, "%.0f ms", s * 1e3);
    else if (s < 120) snprintf(out, cap, "%.2f s", s);
    else if (s < 7200) snprintf(out, cap, "%.1f min", s / 60);
    else snprintf(out, cap, "%.1f h", s / 3600);
}

void cmh_when_text(int64_t t, int64_t t0, char *out, size_t cap)
{
    /* whole microseconds of each time (PyTorch's time_us, as an export writes them), so that a
     * record and its memory_viz export read the same */
    int64_t d = t / 1000 - t0 / 1000;
    uint64_t a = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
    char sign = d < 0 ? '-' : '+';
    if (a >= 999950ull) snprintf(out, cap, "%c%.3fs", sign, (double)a / 1e6);
    else if (a >= 1000ull) snprintf(out, cap, "%c%.1f ms", sign, (double)a / 1e3);
    else snprintf(out, cap, "%c%llu \xc2\xb5s", a ? sign : '+', (unsigned long long)a);
}

const char *cmh_leak_site_text(const cmh_site *x, char *buf, size_t cap)
{
    if (x->verdict == CMH_LEAK_UNJUDGED && x->unjudged_why) return unjudged_text(x, buf, cap);
    if (threads_text(x, buf, cap)) return buf;
    char whose[96] = "", grew[512];
    const char *tn = x->thread_name ? x->thread_name : "";
    if (x->thread && x->thread_tid && *tn)
        snprintf(whose, sizeof whose, " of recording thread %u (tid %lld, '%.20s')", x->thread, (long long)x->thread_tid, tn);
    else if (x->thread && x->thread_tid) snprintf(whose, sizeof whose, " of recording thread %u (tid %lld)", x->thread, (long long)x->thread_tid);
    else if (x->thread) snprintf(whose, sizeof whose, " of recording thread %u", x->thread);
    if (x->time_verdict >= CMH_TIME_UNSTEADY) return time_text(x, whose, buf, cap); /* (judged over time, or a rise too unsteady) */
    switch (x->verdict) {
    case CMH_LEAK_GROWING:
        snprintf(buf, cap, "growing: %s%s per step over the last %u %s%s", x->rate >= 0 ? "+" : "", cmh_svg_size((double)x->rate),
                 x->growth_steps, plural(x->growth_steps, "step", "steps"), whose);
        if (x->refused) { /* (its growth counts what it asked to keep; the driver refused some of it) */
            size_t n = strlen(buf);
            if (n < cap)
                snprintf(buf + n, cap - n, ", counting %llu %s the driver refused (%s, out of memory)", (unsigned long long)x->refused,
                         plural(x->refused, "request", "requests"), cmh_svg_size((double)x->refused_bytes));
        }
        break;
    case CMH_LEAK_RISING:
        snprintf(buf, cap, "rose in each of the %u steps%s, by %s in all; too few steps to call it a leak or give a rate per step",
                 x->growth_steps, whose, cmh_svg_size((double)x->rise));
        break;
    case CMH_LEAK_STOPPED: { /* a leak that stopped: it rose across as many steps as a leak must, then no more */
        size_t n = stopped_head(x, whose, grew, sizeof grew);
        stopped_tail(x, grew + n, sizeof grew - n);
        snprintf(buf, cap, "stopped: %s", grew);
        break;
    }
    case CMH_LEAK_STATE: snprintf(buf, cap, "state: %s held across steps%s, not growing", cmh_svg_size((double)x->held), whose); break;
    case CMH_LEAK_STEADY: snprintf(buf, cap, "steady: back to the same level each step%s", whose); break;
    case CMH_LEAK_AFTER:
        snprintf(buf, cap, "after the last step: first made once the last of the %u steps%s had begun, by no step before; not a step's memory",
                 x->steps, whose);
        break;
    default:
        /* no step to judge it by: when its still-live blocks were made, as far as their times say */
        if (x->steps && x->steps < CMH_LEAK_MIN_STEPS)
            snprintf(buf, cap, "held, too few steps (%u of the %u needed); growth not judged", x->steps, CMH_LEAK_MIN_STEPS);
        else if (x->count >= 2 && x->first_ns > 0 && x->first_ns != INT64_MAX && x->last_ns > x->first_ns) {
            char span[32];
            cmh_span_text(x->last_ns - x->first_ns, span, sizeof span);
            /* (no rate: a site's blocks may come in one burst; the outcome gives the run's) */
            snprintf(buf, cap, "held, steps not found: its %" PRIu64 " still-live blocks were made within %s, first to last; growth not judged", x->count, span);
        } else if (x->first_ns > 0 && x->first_ns != INT64_MAX)
            snprintf(buf, cap, "held, steps not found: %s; growth not judged", x->count >= 2 ? "its still-live blocks were made at one instant" : "made once");
        else snprintf(buf, cap, "held, steps not found; growth not judged");
    }
    return buf;
}

/* Growth not judged because the record names no steps and none showed in its pattern: how to
 * give them.  A program of one thread whose every allocation is one call repeated, never freed,
 * is such a record: its loop cannot be told from a start-up's (weights made in a loop once), so
 * no step is inferred from it, and the user is told what would let it be judged (it read only
 * 'growth cannot be judged: the steps are unknown', and exit 5). */
const char *cmh_leak_steps_hint(const cmh_leak_report *p, char *buf, size_t cap)
{
    if (p->judged || !p->live_blocks || p->steps.count || p->steps_raced || p->unjudged_why || !p->base.history || p->base.entries < 2)
        return NULL;
    snprintf(buf, cap,
             "to judge growth, give the steps: mark each iteration of the loop, cumemhist.mark(\"step\") in Python (import cumemhist), "
             "CMH_MARK(\"step\") in C or C++ (#include <cumemhist/blocks.h>, nothing to link), or kill -USR2 PID at each step; then "
             "record again (one mark is one step; %u steps at least)",
             CMH_LEAK_MIN_STEPS);
    return buf;
}

const char *cmh_leak_outcome_text(const cmh_leak_report *p, char *buf, size_t cap)
{
    uint32_t rising = 0;
    for (uint32_t i = 0; i < p->nsites; i++) rising += p->sites[i].verdict == CMH_LEAK_RISING;
    /* a growth that stopped, said beside growth now: not growing, yet still held (it read 'no
     * site grows from step to step', and a user dismissed 80 MiB a leak had kept) */
    char stops[192] = "";
    if (p->stopped)
        snprintf(stops, sizeof stops, "%u %s over several steps, then stopped, and still %s %s: %s", p->stopped,
                 plural(p->stopped, "site grew", "sites grew"), plural(p->stopped, "holds", "hold"), cmh_svg_size((double)p->stopped_bytes),
                 plural(p->stopped, "a likely leak that stopped", "likely leaks that stopped"));
    /* sites judged over the record's time, steps not found for them (growth without steps) */
    char timed[160] = "";
    if (p->time_growing && p->time_growing < p->leaking)
        snprintf(timed, sizeof timed, " (%u of them over the record's time, steps not found)", p->time_growing);
    if (p->leaking && p->time_growing == p->leaking)
        snprintf(buf, cap, "%u %s over the record's time (steps not found: judged over its %u equal slices): %s%s%s", p->leaking,
                 plural(p->leaking, "site grows", "sites grow"), CMH_TIME_SLICES, plural(p->leaking, "a likely leak", "likely leaks"),
                 *stops ? "; " : "", stops);
    else if (p->leaking)
        snprintf(buf, cap, "%u %s from step to step%s: %s%s%s", p->leaking, plural(p->leaking, "site grows", "sites grow"), timed,
                 plural(p->leaking, "a likely leak", "likely leaks"), *stops ? "; " : "", stops);
    else if (p->stopped) snprintf(buf, cap, "no site grows from step to step now; %s", stops);
    else if (!p->live_blocks && p->vmm_unmapped_handles)
        snprintf(buf, cap, "no block is still live, but %s made with cuMemCreate is held mapped nowhere (%" PRIu32 " %s): no site grows",
                 cmh_svg_size((double)p->vmm_unmapped_bytes), p->vmm_unmapped_handles, plural(p->vmm_unmapped_handles, "handle", "handles"));
    else if (!p->live_blocks) snprintf(buf, cap, "nothing is still live: no site grows");
    else if (p->judged && p->time_level && !p->steps.count)
        snprintf(buf, cap, "no site grows over the record's time (steps not found: %u %s judged over its %u equal slices, level)",
                 p->time_level, plural(p->time_level, "site", "sites"), CMH_TIME_SLICES);
    else if (p->judged) snprintf(buf, cap, "no site grows from step to step");
    else {
        /* the steps growth is judged over: those with this device's entries (pinned host memory
         * used before the loop read "too few steps (7 of the 4 needed)": 7 steps, 1 of its own) */
        uint32_t active = cmh_steps_active(&p->steps);
        /* the steps are enough, yet still-live memory lies outside every racing thread's steps:
         * that, not the steps' count (a ring-limited record read 'too few steps (6 of the 4
         * needed)') */
        if (p->unjudged_why == CMH_UNJUDGED_BEFORE_HISTORY) {
            uint64_t before = p->live_bytes - p->grew_bytes, blocks = p->live_blocks - p->grew_blocks;
            char dropped[96] = "";
            if (p->base.dropped) snprintf(dropped, sizeof dropped, " (the ring dropped the %" PRIu64 " oldest entries)", p->base.dropped);
            snprintf(buf, cap,
                     "growth cannot be judged: %s still live (%" PRIu64 " %s) was made before the first entry the record kept%s, in none of the "
                     "recording threads' steps (they race: each thread's blocks count over its own steps)%s",
                     cmh_svg_size((double)before), blocks, plural(blocks, "block", "blocks"), dropped,
                     p->base.dropped ? "; record with a larger --max-entries" : "");
            return buf;
        }
        if (p->unjudged_why == CMH_UNJUDGED_NO_THREAD) {
            snprintf(buf, cap, "growth cannot be judged: still-live memory was made by entries that name no recording thread, in none of the "
                               "recording threads' steps (they race: each thread's blocks count over its own steps)");
            return buf;
        }
        if (p->unjudged_why == CMH_UNJUDGED_THREAD_STEPS) {
            snprintf(buf, cap,
                     "growth cannot be judged: recording thread %u made still-live memory beside the other threads' loops, not before them from the main thread, and repeats too "
                     "few steps of its own (%u of the %u needed; they race: each thread's blocks count over its own steps)",
                     p->unjudged_thread, p->unjudged_thread_steps, CMH_LEAK_MIN_STEPS);
            return buf;
        }
        size_t n = (size_t)snprintf(buf, cap, "growth cannot be judged: %s",
                                    !p->steps.count         ? (!p->base.history ? "no allocation history" : "the steps are unknown")
                                    : active < p->steps.count ? "too few steps with this device's entries"
                                                              : "too few steps");
        if (n < cap && p->steps.count) n += (size_t)snprintf(buf + n, cap - n, " (%u of the %u needed)", active, CMH_LEAK_MIN_STEPS);
        if (n < cap && rising) n += (size_t)snprintf(buf + n, cap - n, "; %u %s in each step", rising, plural(rising, "site rose", "sites rose"));
        /* no step found: what the still-live memory did over the run, honestly no more; a rate
         * only where the run is long enough and the memory came through it (run_rate) */
        if (n < cap && !p->steps.count && p->base.entries > 1 && p->grew_bytes && p->run_ns > 0) {
            char span[96], size[32], blocks[48], proc[32];
            cmh_span_text(p->run_ns, span, sizeof span);
            /* the entries' span, not the process's run, when the process ran longer (it held still
             * after its allocations): "the 1 ms its entries span, of a 6.0 s run" */
            int longer = p->process_ns > p->run_ns + p->run_ns / 10 + 1000000;
            if (longer) {
                cmh_span_text(p->process_ns, proc, sizeof proc);
                size_t sl = strlen(span);
                snprintf(span + sl, sizeof span - sl, " its entries span, of a %s", proc);
            }
            snprintf(size, sizeof size, "%s", cmh_svg_size((double)p->grew_bytes));
            snprintf(blocks, sizeof blocks, "%" PRIu64 " %s", p->grew_blocks, plural(p->grew_blocks, "block", "blocks"));
            if (p->run_rate > 0)
                snprintf(buf + n, cap - n, "; %s still live (%s) was made over the %s run: %s/s on average", size, blocks, span,
                         cmh_svg_size(p->run_rate));
            else if (p->run_ns < CMH_LEAK_RATE_MIN_NS)
                snprintf(buf + n, cap - n, "; %s still live (%s) was made over the %s run, too short a %s for a rate per second", size,
                         blocks, span, longer ? "span" : "run");
            else if (p->grew_slices == 1) /* the run cut in CMH_LEAK_RATE_SLICES equal parts: in how many it came */
                /* (the words say a tenth) */
                snprintf(buf + n, cap - n, "; %s still live (%s) was made in one burst, within one tenth of the %s run: no steady rate", size,
                         blocks, span);
            else
                snprintf(buf + n, cap - n, "; %s still live (%s) was made in bursts, within %u of the %u equal parts of the %s run: no steady rate",
                         size, blocks, p->grew_slices, CMH_LEAK_RATE_SLICES, span);
        }
    }
    return buf;
}

/* A C++ name too long to read, shortened for text: template arguments and parameters left out
 * ("a::b<...>::f(int, ...)" reads "a::b<>::f()"); JSON keeps the whole name. */
static const char *short_name(const char *n, char *buf, size_t cap)
{
    if (strlen(n) <= 100) return n;
    size_t k = 0;
    int angle = 0, paren = 0;
    for (const char *p = n; *p && k + 7 < cap; p++) {
        if (*p == '<' && !paren && !angle++) buf[k++] = '<';
        else if (*p == '>' && !paren && angle) {
            if (!--angle) buf[k++] = '>';
        } else if (*p == '(' && !angle && !paren && !strncmp(p, "(anonymous namespace)", 21)) {
            memcpy(buf + k, "(anon)", 6);
            k += 6;
            p += 20;
        } else if (*p == '(' && !angle) {
            if (!paren++) buf[k++] = '(';
        } else if (*p == ')' && !angle && paren) {
            if (!--paren) buf[k++] = ')';
        } else if (!angle && !paren) buf[k++] = *p;
    }
    buf[k] = 0;
    return buf;
}

const char *cmh_frame_text(const cmh_snapshot *s, const cmh_frame *f, char *buf, size_t cap)
{
    char sbuf[512];
    const char *name = short_name(cmh_str(s, f->name), sbuf, sizeof sbuf), *file = cmh_str(s, f->filename),
               *mod = cmh_frame_module(s, f);
    if (f->line > 0) snprintf(buf, cap, "%.900s (%.400s:%" PRId64 ")", name, file, f->line);
    else if (*file && strcmp(file, "??")) snprintf(buf, cap, "%.900s (%.400s)", name, file);
    else if (*mod) snprintf(buf, cap, "%.900s (%.400s)", name, mod);
    else snprintf(buf, cap, "%.900s", name);
    /* a NUL the pickle had in a name (held as C0 80), a control character: shown escaped */
    for (const char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || CMH_IS_NUL_PAIR(p)) {
            char t[1400];
            snprintf(t, sizeof t, "%s", buf);
            cmh_str_escape(t, buf, cap);
            break;
        }
    return buf;
}

/* append printf-style to buf at *at (what fits) */
static void add(char *buf, size_t cap, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
    if (*at >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, cap - *at, fmt, ap);
    va_end(ap);
    if (n > 0) *at = *at + (size_t)n < cap ? *at + (size_t)n : cap - 1;
}

const char *cmh_site_callers_text(const cmh_snapshot *s, const cmh_site *x, char *buf, size_t cap)
{
    /* only where the split says something: two callers or more, or one and the rest */
    if (x->ncallers < 2 && !(x->ncallers == 1 && x->callers_other.bytes)) return NULL;
    char fr[1400];
    size_t at = 0;
    buf[0] = 0;
    add(buf, cap, &at, "by caller:");
    /* the largest few, and every caller judged growing or stopped however small: the line a
     * leak comes from is never folded into "other callers" */
    uint64_t rest = x->callers_other.bytes;
    uint32_t shown = 0;
    for (uint32_t i = 0; i < x->ncallers; i++) {
        int marked = x->callers_judged && (x->callers[i].growing || x->callers[i].stopped);
        if (i >= CMH_CALLERS_SHOWN && !marked) {
            rest += x->callers[i].bytes;
            continue;
        }
        add(buf, cap, &at, "%s %s %s%s", shown++ ? "," : "", cmh_svg_size((double)x->callers[i].bytes),
            cmh_frame_text(s, &s->frames[x->callers[i].frame], fr, sizeof fr),
            !marked ? "" : x->callers[i].growing ? " (growing)" : " (stopped)");
    }
    if (rest) add(buf, cap, &at, ", %s from %s", cmh_svg_size((double)rest), x->callers_seen > shown ? "other callers" : "no caller");
    return buf;
}

const char *cmh_site_callers_growth_text(const cmh_snapshot *s, const cmh_site *x, char *buf, size_t cap)
{
    /* a growing site called from several lines (a helper, a ctypes wrapper): whose blocks grow,
     * and how much of the row's bytes are theirs */
    if (!x->callers_judged) return NULL;
    uint64_t grows = 0;
    uint32_t ng = 0, first = 0;
    int stops = x->verdict == CMH_LEAK_STOPPED; /* (a stopped site: the callers whose blocks stopped) */
    for (uint32_t i = 0; i < x->ncallers; i++)
        if (stops ? x->callers[i].stopped : x->callers[i].growing) {
            if (!ng++) first = i;
            grows += x->callers[i].bytes;
        }
    if (!ng || grows >= x->bytes) return NULL;
    char fr[1400], row[32];
    snprintf(row, sizeof row, "%s", cmh_svg_size((double)x->bytes));
    if (ng == 1 && stops)
        snprintf(buf, cap, "the growth that stopped comes from one caller, %s: %s of the row's %s; its other callers' blocks did not grow over several steps; the stack shown is this caller's",
                 cmh_frame_text(s, &s->frames[x->callers[first].frame], fr, sizeof fr), cmh_svg_size((double)grows), row);
    else if (stops)
        snprintf(buf, cap, "the growth that stopped comes from %u callers, marked stopped: %s of the row's %s; the other callers' blocks did not grow over several steps",
                 ng, cmh_svg_size((double)grows), row);
    else if (ng == 1)
        snprintf(buf, cap, "the growth comes from one caller, %s: %s of the row's %s (its other callers' blocks do not grow); the stack shown is this caller's",
                 cmh_frame_text(s, &s->frames[x->callers[first].frame], fr, sizeof fr), cmh_svg_size((double)grows), row);
    else
        snprintf(buf, cap, "the growth comes from %u callers, marked growing: %s of the row's %s (the other callers' blocks do not grow)", ng,
                 cmh_svg_size((double)grows), row);
    return buf;
}

const char *cmh_site_made_by_text(const cmh_snapshot *s, const cmh_site *x, char *buf, size_t cap)
{
    uint32_t n = 0, only = 0;
    for (uint32_t t = 1; t < 64; t++)
        if (x->made_by >> t & 1) n++, only = t;
    if (!n || !cap) return NULL;
    if (n == 1 && !x->made_by_other) {
        const cmh_thread_info *ti = cmh_snapshot_thread(s, only);
        if (x->thread == only || !ti || !ti->tid || ti->tid == s->pid) return NULL;
    }
    size_t k = (size_t)snprintf(buf, cap, "made by recording thread%s", n > 1 ? "s" : "");
    for (uint32_t t = 1, i = 0; t < 64 && k < cap; t++) {
        if (!(x->made_by >> t & 1)) continue;
        const cmh_thread_info *ti = cmh_snapshot_thread(s, t);
        const char *name = ti && ti->name ? cmh_str(s, ti->name) : "";
        const char *sep = !i ? " " : i + 1 == n && !x->made_by_other ? " and " : ", ";
        i++;
        if (ti && ti->tid && *name) k += (size_t)snprintf(buf + k, cap - k, "%s%u (tid %lld, '%.20s')", sep, t, (long long)ti->tid, name);
        else if (ti && ti->tid) k += (size_t)snprintf(buf + k, cap - k, "%s%u (tid %lld)", sep, t, (long long)ti->tid);
        else k += (size_t)snprintf(buf + k, cap - k, "%s%u", sep, t);
    }
    /* (a thread past the 63rd is not in the mask; an allocation the history dropped has no thread) */
    if (x->made_by_other & CMH_MADE_PAST63 && k < cap)
        k += (size_t)snprintf(buf + k, cap - k, "%s threads past the 63rd", x->made_by_other & CMH_MADE_BEFORE_HISTORY ? "," : " and");
    if (x->made_by_other & CMH_MADE_BEFORE_HISTORY && k < cap)
        snprintf(buf + k, cap - k, " and blocks allocated before the kept history (their threads not kept)");
    return buf;
}

const char *cmh_ordinal(uint32_t n, char *buf, size_t cap)
{
    const char *tail = n % 100 >= 11 && n % 100 <= 13 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    snprintf(buf, cap, "%u%s", n, tail);
    return buf;
}

/* ---- failed driver calls (.cmh driver_errors): the note every text report and the HTML report give ---- */

const char *cmh_driver_error_site(const cmh_snapshot *s, uint32_t stack, char *buf, size_t cap)
{
    if (!stack || stack >= s->nstacks || !s->stacks[stack].count) return NULL;
    return cmh_frame_text(s, &s->frames[s->stack_frames[s->stacks[stack].first]], buf, cap);
}

static const char *drv_times_text(uint64_t n)
{
    static char b[32];
    if (n == 1) return "once";
    if (n == 2) return "twice";
    snprintf(b, sizeof b, "%llu times", (unsigned long long)n);
    return b;
}

void cmh_driver_errors_write(FILE *fp, const cmh_snapshot *s)
{
    if (!s->ndrv_errors) return;
    uint64_t total = 0;
    for (uint32_t i = 0; i < s->ndrv_errors; i++) total += s->drv_errors[i].count;
    fprintf(fp, "note: %llu driver call%s failed (the driver refused %s: no entry in the trace shows %s):\n", (unsigned long long)total,
           total == 1 ? "" : "s", total == 1 ? "it" : "them", total == 1 ? "it" : "them");
    for (uint32_t i = 0; i < s->ndrv_errors; i++) {
        const cmh_drv_error *e = &s->drv_errors[i];
        char nb[32], what[256], site[1400];
        int fr = cmh_driver_error_judged(e->call) && e->result == 1;
        fprintf(fp, "      %s returned %s %s%s", e->call, cmh_cuda_error_name(e->result, nb, sizeof nb), drv_times_text(e->count),
               fr ? " (a pointer never allocated, freed twice, or not an allocation's base)" : "");
        if (e->nsites) {
            const char *f = cmh_driver_error_site(s, e->sites[0].stack, site, sizeof site);
            fprintf(fp, ", first at %s (thread %u)", f ? f : "<no stack recorded>", e->sites[0].thread);
        }
        fprintf(fp, ":\n");
        for (uint32_t j = 0; j < e->nsites; j++) {
            const cmh_drv_error_site *w = &e->sites[j];
            const char *f = cmh_driver_error_site(s, w->stack, site, sizeof site);
            fprintf(fp, "        0x%llx", (unsigned long long)w->addr);
            if (w->size) fprintf(fp, " (%s)", cmh_svg_size((double)w->size));
            if (cmh_driver_error_judged(e->call)) fprintf(fp, ": %s", cmh_driver_error_what(s, w->addr, w->time_ns, what, sizeof what));
            fprintf(fp, ", at %s (thread %u)\n", f ? f : "<no stack recorded>", w->thread);
        }
        if (e->count > e->nsites)
            fprintf(fp, "        (%llu more, not kept: the recorder keeps the first %d of each)\n", (unsigned long long)(e->count - e->nsites),
                   CMH_DRV_ERROR_SITES);
    }
}

/* ---- lost history (.cmh history_lost): the note every text report and the HTML report give ---- */

static const char *lost_num(uint64_t v, char *b, size_t cap)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) b[o++] = ',';
        b[o++] = tmp[i];
    }
    b[o] = 0;
    return b;
}

const char *cmh_history_lost_text(const cmh_snapshot *s, char *buf, size_t cap)
{
    const cmh_history_lost *h = &s->history_lost;
    if (!cap || !CMH_HISTORY_LOST(h)) return NULL;
    char n1[32], n2[32], n3[32];
    size_t k = (size_t)snprintf(buf, cap, "this record lost part of its history:");
    const char *sep = " ";
    if (h->cut_bytes && k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, "%sits flight record is cut short (the file ends at byte %s; %s byte%s of records written past it %s lost",
                              sep, lost_num(h->file_bytes, n1, sizeof n1), lost_num(h->cut_bytes, n2, sizeof n2),
                              h->cut_bytes == 1 ? "" : "s", h->cut_bytes == 1 ? "is" : "are");
        if (h->read_to && k < cap) k += (size_t)snprintf(buf + k, cap - k, "; what was read ends at byte %s", lost_num(h->read_to, n3, sizeof n3));
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, ")");
        sep = ", ";
    }
    if (h->torn && k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, "%s%s torn record%s dropped (left half-written by a writer's death%s)", sep,
                              lost_num(h->torn, n1, sizeof n1), h->torn == 1 ? "" : "s", h->cut_bytes ? " or by the cut" : "");
        sep = ", ";
    }
    if (h->damaged && k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, "%s%s damaged record%s dropped (not matching %s checksum)", sep, lost_num(h->damaged, n1, sizeof n1),
                              h->damaged == 1 ? "" : "s", h->damaged == 1 ? "its" : "their");
        sep = ", ";
    }
    if (h->refused && k < cap)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s record%s the full flight record had no room for", sep, lost_num(h->refused, n1, sizeof n1),
                              h->refused == 1 ? "" : "s");
    if (k < cap && !CMH_HISTORY_LOST_BEYOND_DEATH(h))
        /* the calls the death caught mid-write alone: a kill between two calls would have lost
         * nothing more, and must read the same (cmd_leaks.c) */
        snprintf(buf + k, cap - k, ": the call%s the death caught mid-write, not in these figures; what was read is the "
                                   "history up to it (leaks --fail-on-leak judges it as it would the record whole)", h->torn == 1 ? "" : "s");
    else if (k < cap)
        snprintf(buf + k, cap - k, ": what the process did in what was lost is not in these figures, so no verdict here can call the run clean "
                                   "(leaks --fail-on-leak does not pass it: exit 5 where it finds no leak)");
    return buf;
}

void cmh_history_lost_write(FILE *fp, const cmh_snapshot *s)
{
    char line[1024];
    if (cmh_history_lost_text(s, line, sizeof line)) fprintf(fp, "note: %s\n", line);
}
