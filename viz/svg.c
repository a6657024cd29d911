/*
 * svg.c - what the SVG pictures share (svg.h).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"
#include "svg.h"

void cmh_svg_text(FILE *fp, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", fp); break;
        case '<': fputs("&lt;", fp); break;
        case '>': fputs("&gt;", fp); break;
        case '"': fputs("&quot;", fp); break;
        case '\'': fputs("&apos;", fp); break;
        default:
            /* XML 1.0 allows no control characters but tab, newline and return */
            if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r') fputc('?', fp);
            else fputc(*s, fp);
        }
    }
}

const char *cmh_svg_size(double v)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    static _Thread_local char ring[8][32];
    static _Thread_local int k;
    char *b = ring[k++ & 7];
    int i = 0;
    double a = v < 0 ? -v : v;
    while (a >= 1024 && i < 5) a /= 1024, v /= 1024, i++;
    if (i == 0) snprintf(b, 32, "%.0f B", v);
    else snprintf(b, 32, "%.1f %s", v, u[i]);
    return b;
}

double cmh_svg_nice(double x)
{
    if (!(x > 0)) return 1;
    double p = pow(10, floor(log10(x))), m = x / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

void cmh_svg_frame(const cmh_snapshot *s, const cmh_frame *f, char *buf, size_t cap)
{
    const char *name = cmh_str(s, f->name), *file = cmh_str(s, f->filename);
    if (!*name) name = "??";
    if (!strcmp(file, "??")) file = ""; /* PyTorch's word for no file */
    if (*file && f->line > 0) snprintf(buf, cap, "%s (%s:%" PRId64 ")", name, file, f->line);
    else if (*file) snprintf(buf, cap, "%s (%s)", name, file);
    else if (f->module >= 0 && (uint32_t)f->module < s->nmodules) {
        const char *m = cmh_str(s, s->modules[f->module].path), *b = strrchr(m, '/');
        snprintf(buf, cap, "%s (%s)", name, b ? b + 1 : m);
    } else snprintf(buf, cap, "%s", name);
    for (const char *p = buf; *p; p++) /* a NUL the pickle had in a name (held as C0 80): shown escaped */
        if (CMH_IS_NUL_PAIR(p) || (unsigned char)*p < 0x20) {
            char t[1024];
            snprintf(t, sizeof t, "%s", buf);
            cmh_str_escape(t, buf, cap);
            break;
        }
}

/* The facts every output carries, from the one analyzer function that computes each, as data-*
 * attributes: tests/facts_test.py reads them back beside every other output's. */
int cmh_svg_facts(FILE *fp, const cmh_snapshot *s, int device, const char *tag)
{
    cmh_peak_report pk;
    cmh_mem_stats st;
    int rc = cmh_peak_totals(s, device, &pk); /* the sites at the peak are not among the facts */
    if (rc != CMH_OK) return rc;
    if ((rc = cmh_summary_compute(s, device, &st)) != CMH_OK) {
        cmh_peak_report_free(&pk);
        return rc;
    }
    uint64_t ann = 0, marks = 0;
    for (uint32_t i = 0; i < s->nannotations; i++) ann += s->annotations[i].device == device;
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    for (uint32_t i = 0; t && i < t->nentries; i++) marks += s->entries[t->first_entry + i].action == CMH_ACT_MARK;
    fprintf(fp, "<%s class=\"facts\"%s data-device=\"%d\" data-entries=\"%" PRIu64 "\" data-clock-origin-ns=\"%" PRId64 "\"", tag,
            strcmp(tag, "g") ? " hidden" : "", device, (uint64_t)pk.base.entries, cmh_clock_origin(s));
    fprintf(fp, " data-peak-allocated=\"%" PRId64 "\" data-peak-allocated-entry=\"%" PRId64 "\" data-peak-allocated-time-ns=\"%" PRId64 "\"",
            pk.alloc_peak, pk.alloc_index, pk.alloc_time_ns);
    fprintf(fp, " data-peak-reserved=\"%" PRId64 "\" data-peak-reserved-entry=\"%" PRId64 "\" data-peak-reserved-time-ns=\"%" PRId64 "\"",
            pk.reserved_peak, pk.reserved_index, pk.reserved_time_ns);
    fprintf(fp, " data-peak-requested=\"%" PRId64 "\" data-peak-requested-entry=\"%" PRId64 "\" data-peak-requested-time-ns=\"%" PRId64 "\"",
            pk.requested_peak, pk.requested_index, pk.requested_time_ns);
    fprintf(fp, " data-end-allocated=\"%" PRId64 "\" data-end-reserved=\"%" PRId64 "\" data-end-requested=\"%" PRId64 "\"", pk.alloc_end,
            pk.reserved_end, pk.requested_end);
    fprintf(fp, " data-ooms=\"%" PRId64 "\" data-annotations=\"%" PRIu64 "\" data-marks=\"%" PRIu64 "\"", (int64_t)st.num_ooms, ann, marks);
    fprintf(fp, strcmp(tag, "g") ? "></%s>\n" : "/>\n", tag);
    cmh_peak_report_free(&pk);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}
