/*
 * ownerwords.c - owners' moments in words (cumemhist/ownerwords.h).  One wording, so that
 * `owners` and the HTML report can never say two things of one moment.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/leakwords.h"
#include "cumemhist/ownerwords.h"
#include "svg.h"

const char *cmh_owners_moment_name(const cmh_owners_moment *m)
{
 return !strcmp(m->what, "peak") ? (m->peak_physical ? "peak physical" : "peak reserved") : !strcmp(m->what, "end") ? "at the end" : m->what;
}

/* "entry 847, +36.192s", "entry 847" untimed, "before the first entry" */
static void at_words(char *b, size_t cap, int64_t index, int64_t t, int64_t t0)
{
    if (index < 0) {
        snprintf(b, cap, "before the first entry");
        return;
    }
    if (!t || !t0) {
        snprintf(b, cap, "entry %" PRId64, index);
        return;
    }
    char s[32];
    cmh_when_text(t, t0, s, sizeof s);
    snprintf(b, cap, "entry %" PRId64 ", %s", index, s);
}

const char *cmh_owners_peak_words(const cmh_owners_report *r, const cmh_owners_moment *m, int64_t t0, char *buf, size_t cap)
{
    buf[0] = 0;
    if (strcmp(m->what, "peak")) return buf;
    if (r->peak_physical) { /* (cuMemCreate handles put the device's peak elsewhere than reserved's) */
        char at[64], al[160] = "";
        at_words(at, sizeof at, r->reserved_peak_index, r->reserved_peak_time_ns, t0);
        if (r->alloc_peak_known) {
            char aat[64];
            at_words(aat, sizeof aat, r->alloc_peak_index, r->alloc_peak_time_ns, t0);
            snprintf(al, sizeof al, ", allocated %s%s at %s", r->alloc_peak_index < 0 ? "" : "at ", aat, cmh_svg_size((double)r->alloc_peak));
        }
        snprintf(buf, cap,
                 "the physical peak: what the device held, each cuMemCreate handle whole from its making to its release,\n"
                 " mapped or not; reserved (the mapped ranges) peaked %s%s at %s%s: see `cumemhist peak`",
                 r->reserved_peak_index < 0 ? "" : "at ", at, cmh_svg_size((double)r->reserved_peak), al);
    } else if (!r->alloc_peak_known) snprintf(buf, cap, "the reserved peak; `cumemhist peak` gives the allocated peak");
    else if (r->alloc_peak_index == m->index && !r->reconciled)
        /* allocated counts every mapping of a cuMemCreate handle and all managed memory, the
         * rows each handle once and managed memory as far as the used figure goes: where that
         * makes allocated the larger, said so (vmm2: '8.0 MiB recorded ... at 16.0 MiB') */
        snprintf(buf, cap, "the reserved peak; allocated peaked here too, at %s%s", cmh_svg_size((double)r->alloc_peak),
                 r->alloc_peak > 0 && (uint64_t)r->alloc_peak > m->recorded ? ", counting each mapping of a cuMemCreate handle and all managed memory, where the rows count a handle once and managed memory as the driver does" : "");
    else {
        char at[64];
        at_words(at, sizeof at, r->alloc_peak_index, r->alloc_peak_time_ns, t0);
        snprintf(buf, cap, "the reserved peak; allocated peaked %s%s, at %s: see `cumemhist peak`", r->alloc_peak_index < 0 ? "" : "at ",
                 at, cmh_svg_size((double)r->alloc_peak));
    }
    return buf;
}

const char *cmh_owners_unexplained_note(const cmh_owners_moment *m, int64_t t0, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!m->used_known) return buf;
    int n = 0;
    if (!m->sample_exact) {
        char when[40] = "another moment";
        if (m->sample_time_ns && t0) cmh_when_text(m->sample_time_ns, t0, when, sizeof when);
        /* the nearest sample had calls in flight, as had every sample near it: its figure's low end */
        n = snprintf(buf, cap, m->sample_low_end ? "(cuMemGetInfo at %s, at least: calls were in flight at every sample near)"
                                                 : "(cuMemGetInfo at %s, assumed steady)",
                     when);
        if (n < 0 || (size_t)n >= cap) return buf;
    }
    if (m->in_flight) /* what the sample taken at this moment saw beyond the trace, and is not the row */
        snprintf(buf + n, cap - (size_t)n, "%s(and %s more in use then: other threads' allocations in the driver, logged just after)",
                 n ? "  " : "", cmh_svg_size((double)m->in_flight));
    return buf;
}
