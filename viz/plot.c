/*
 * plot.c - the timeline: allocated and reserved bytes over time, one SVG panel per device.
 *
 * Each device's trace is replayed once and binned into the pixel columns of its panel, keeping
 * the minimum and the maximum of each series per column; the path goes down each column from
 * its maximum to its minimum, so a 10 M-entry trace draws in a few thousand points and no peak
 * is ever averaged away.  The peak is found as the `peak` report finds it (cmh_peak_compute).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/gapwords.h"
#include "cumemhist/leakwords.h"
#include "cumemhist/pictures.h"
#include "cumemhist/reports.h"
#include "svg.h"

typedef struct col {
    int64_t amin, amax, rmin, rmax;
    int64_t afirst, alast, rfirst, rlast; /* memory holds its value until the next entry: steps */
    int has;
} col;

static void put(col *c, int64_t a, int64_t r)
{
    c->alast = a;
    c->rlast = r;
    if (!c->has) {
        c->amin = c->amax = c->afirst = a;
        c->rmin = c->rmax = c->rfirst = r;
        c->has = 1;
        return;
    }
    if (a < c->amin) c->amin = a;
    if (a > c->amax) c->amax = a;
    if (r < c->rmin) c->rmin = r;
    if (r > c->rmax) c->rmax = r;
}

typedef struct marker {
    double x;
    int kind; /* 0 oom, 1 mark, 2 annotation start, 3 annotation end */
    char label[96], title[256];
    int row, end; /* its label's row in the head band (-1: not drawn) and anchor */
    double lx;    /* and x */
} marker;

static marker *new_marker(marker **mk, uint32_t *n, uint32_t *cap)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 32;
        marker *nm = realloc(*mk, nc * sizeof *nm);
        if (!nm) return NULL;
        *mk = nm;
        *cap = nc;
    }
    return &(*mk)[(*n)++];
}

/* A generous width of a label in px of type (bold 12 px: the peak's), for placing it where it
 * fits: no font metrics here, so every character counts as wide as DejaVu Sans Bold's widest
 * common ones (digits 0.7 em, most lower case less). */
static double label_width(const char *t, double px)
{
    double w = 0;
    for (; *t; t++)
        if (((unsigned char)*t & 0xC0) != 0x80) w += 0.7 * px;
    return w;
}

/* The x and anchor of a label of width w for the point at x in [lo, hi]: gap beside it, right of
 * it where it fits, else left of it, else against the nearer edge, never outside. */
static double label_x(double x, double gap, double w, double lo, double hi, int *end)
{
    *end = 0;
    if (x + gap + w <= hi) return x + gap;
    if (x - gap - w >= lo) return *end = 1, x - gap;
    if (lo + w <= hi && x - lo < hi - x) return lo;
    return *end = 1, hi;
}

/* ---- the head band: every label of a panel, in rows above every series and line ----
 * A label beside what it names crossed the series (the reserved line through the peak's label),
 * a note in a corner lay on a series ending there, and the markers' labels at the foot crossed
 * their neighbours' lines.  In the band no series, grid line or marker line is drawn (the scale
 * puts the largest figure under it), so a label need only miss the others: each takes the
 * first row where it does. */
#define BAND_ROWS 4
typedef struct band {
    struct {
        double x0, x1;
        int row;
    } box[BAND_ROWS * 48];
    int n, rows;
} band;

/* Place a label of width w at lx (anchored at its end: end) in the first row it fits: the row, or
 * -1 where none has room (too many near each other: the marker's tooltip still names it). */
static int band_place(band *b, double lx, double w, int end, int first_row)
{
    double x0 = end ? lx - w : lx, x1 = end ? lx : lx + w;
    for (int row = first_row; row < BAND_ROWS && b->n < (int)(sizeof b->box / sizeof b->box[0]); row++) {
        int free = 1;
        for (int k = 0; k < b->n && free; k++)
            free = b->box[k].row != row || x1 + 6 <= b->box[k].x0 || b->box[k].x1 + 6 <= x0;
        if (!free) continue;
        b->box[b->n].x0 = x0, b->box[b->n].x1 = x1, b->box[b->n].row = row;
        b->n++;
        if (row + 1 > b->rows) b->rows = row + 1;
        return row;
    }
    return -1;
}

static int panel(const cmh_snapshot *s, int device, int top, int W, int H, int axis, double busy, FILE *fp)
{
    const cmh_trace *tr = cmh_snapshot_trace(s, device);
    uint32_t n = tr ? tr->nentries : 0;
    const cmh_entry *ents = tr ? &s->entries[tr->first_entry] : NULL;
    /* every device's panel on the record's one clock (cmh_clock_origin), so the panels line up */
    int64_t t0 = cmh_clock_origin(s), t1 = cmh_clock_last(s);
    int timed = 0;
    for (uint32_t i = 0; i < n && !timed; i++) timed = cmh_entry_time(s, &ents[i]) != 0;
    int by_time = axis == CMH_AXIS_TIME && timed && t0 && t1 > t0; /* else by entry index */
    const int L = 78, R = 24, T = 34, B = 46;
    int pw = W - L - R, ph = H - T - B;
    if (pw < 50) pw = 50;
    if (ph < 40) ph = 40;
    col *cols = calloc((size_t)pw + 1, sizeof *cols);
    marker *mk = NULL;
    uint32_t nmk = 0, capmk = 0;
    uint32_t nooms = tr && tr->dropped_ooms < UINT32_MAX ? (uint32_t)tr->dropped_ooms : 0; /* numbered after the ring's dropped ones, as oom numbers them */
    if (!cols) return CMH_ENOMEM;
    /* the allocated peak, found as cmh_peak_compute finds it (the first maximum; the state before
     * the first entry counts, and the end reconciled with the final segments) */
    struct {
        int64_t alloc_peak, alloc_index, alloc_unsplit;
    } pk = {0, -1, 0};
    int rc = CMH_OK;
    /* the allocated and reserved bytes after each entry: a report page's history (reports.h),
     * else a replay of our own */
    const cmh_replay_history *h = cmh_memo_history(s, device);
    cmh_replay *r = h ? NULL : cmh_replay_new(s, device);
    if (!h && !r) {
        free(cols);
        return CMH_ENOMEM;
    }
    const cmh_mem_stats *st = r ? cmh_replay_stats(r) : NULL;
    int64_t a0 = h ? h->allocated0 : st->allocated_bytes[CMH_POOL_ALL].current; /* before the first entry */
    int64_t r0 = h ? h->reserved0 : st->reserved_bytes[CMH_POOL_ALL].current;
    pk.alloc_peak = a0;
    if (r) pk.alloc_unsplit = cmh_replay_unsplit_bytes(r);
#define XOF(i, t) (by_time ? (double)((t) - t0) / (double)(t1 - t0) : n > 1 ? (double)(i) / (double)(n - 1) : 0.0)
    int64_t ymax = 0;
    put(&cols[0], a0, r0);
    for (int64_t i = 0;; i++) {
        int64_t av, rv;
        if (h) {
            if (i >= h->n) break;
            av = h->allocated[i], rv = h->reserved[i];
        } else {
            if (!cmh_replay_step(r)) break;
            av = st->allocated_bytes[CMH_POOL_ALL].current, rv = st->reserved_bytes[CMH_POOL_ALL].current;
        }
        const cmh_entry *e = &ents[i];
        if (av > pk.alloc_peak) pk.alloc_peak = av, pk.alloc_index = i, pk.alloc_unsplit = r ? cmh_replay_unsplit_bytes(r) : 0;
        int64_t t = cmh_entry_time(s, e) ? cmh_entry_time(s, e) : t0;
        double x = XOF(i, t);
        if (x < 0) x = 0;
        if (x > 1) x = 1;
        int c = (int)(x * pw);
        put(&cols[c], av, rv);
        if (e->action == CMH_ACT_OOM || e->action == CMH_ACT_MARK) {
            marker *m = new_marker(&mk, &nmk, &capmk);
            if (!m) {
                rc = CMH_ENOMEM;
                goto out;
            }
            m->x = x;
            if (e->action == CMH_ACT_OOM) {
                m->kind = 0;
                uint64_t freed;
                char df[32]; /* cmh_svg_size's buffer is the size's: the free figure kept apart */
                snprintf(df, sizeof df, "%s",
                         cmh_entry_addr(s, e) == CMH_DEVICE_FREE_UNKNOWN ? "not known" : cmh_svg_size((double)cmh_entry_addr(s, e)));
                /* numbered as oom and summary count them: a retried one is no OOM the program saw */
                if (cmh_oom_retried(s, tr, (uint32_t)i, &freed)) {
                    snprintf(m->label, sizeof m->label, "OOM, retried");
                    snprintf(m->title, sizeof m->title, "out of memory at entry %" PRId64 ", retried: asked %s, device free %s", i,
                             cmh_svg_size((double)cmh_entry_size(s, e)), df);
                } else {
                    snprintf(m->label, sizeof m->label, "OOM #%u", ++nooms);
                    snprintf(m->title, sizeof m->title, "out of memory #%u at entry %" PRId64 ": asked %s, device free %s", nooms, i,
                             cmh_svg_size((double)cmh_entry_size(s, e)), df);
                }
            } else {
                m->kind = 1;
                snprintf(m->label, sizeof m->label, "%s", cmh_str(s, cmh_entry_name(s, e)));
                snprintf(m->title, sizeof m->title, "mark \"%s\" at entry %" PRId64, cmh_str(s, cmh_entry_name(s, e)), i);
            }
        }
    }
    if (r && (rc = cmh_replay_status(r)) != CMH_OK) goto out;
    {
        int64_t ae = h ? h->allocated_end : st->allocated_bytes[CMH_POOL_ALL].current; /* the end */
        put(&cols[pw], ae, h ? h->reserved_end : st->reserved_bytes[CMH_POOL_ALL].current);
        if (ae > pk.alloc_peak) pk.alloc_peak = ae, pk.alloc_index = n, pk.alloc_unsplit = r ? cmh_replay_unsplit_bytes(r) : 0;
    }
    if (h) { /* (a report page's history has no such figure: the page's own peak, kept as well) */
        cmh_peak_report full;
        if ((rc = cmh_peak_totals(s, device, &full)) != CMH_OK) goto out;
        pk.alloc_unsplit = full.alloc_unsplit;
        cmh_peak_report_free(&full);
    }
    /* the last column is the snapshot's end: where the trace's own end differs, the header says why
     * (the words of peak's note, the analyzer's figures) */
    cmh_trace_gap gap;
    if (r) cmh_replay_gap(r, &gap);
    else if ((rc = cmh_trace_gap_compute(s, device, &gap)) != CMH_OK) goto out;
    /* annotations have times only: on the entry axis each sits at the first entry not before it */
    for (uint32_t k = 0; (by_time || (timed && n > 1)) && k < s->nannotations; k++) {
        const cmh_annotation *a = &s->annotations[k];
        if ((a->device != device && a->device != -1) || a->time_ns < t0 || a->time_ns > t1) continue;
        marker *m = new_marker(&mk, &nmk, &capmk);
        if (!m) {
            rc = CMH_ENOMEM;
            goto out;
        }
        if (by_time) m->x = XOF(0, a->time_ns);
        else {
            uint32_t lo = 0, hi = n;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (cmh_entry_time(s, &ents[mid]) < a->time_ns) lo = mid + 1;
                else hi = mid;
            }
            m->x = XOF(lo < n ? lo : n - 1, 0);
        }
        m->kind = a->stage ? 3 : 2;
        snprintf(m->label, sizeof m->label, "%s %s", a->stage ? "end" : "start", cmh_str(s, a->name));
        snprintf(m->title, sizeof m->title, "%s of \"%s\"", a->stage ? "end" : "start", cmh_str(s, a->name));
    }
    for (int c = 0; c <= pw; c++)
        if (cols[c].has) {
            if (cols[c].amax > ymax) ymax = cols[c].amax;
            if (cols[c].rmax > ymax) ymax = cols[c].rmax;
        }
    if (pk.alloc_peak > ymax) ymax = pk.alloc_peak;

    /* the peak's words, and the words on what of it is whole blocks (the same as every report's),
     * in the head band, beside the peak where they fit (band_place) */
    int history = cmh_trace_has_history(s, device);
    /* a trace that does not reach back to the run's start: the peak is at least its figure (peak's rule) */
    cmh_peak_report bound = {.base = {.history = history, .dropped = tr ? tr->dropped : 0}, .alloc_start = a0, .reserved_start = r0};
    const char *least = cmh_peak_extent(&bound) == CMH_PEAK_AT_LEAST ? "at least " : "";
    char label[128] = "", why[200] = "";
    int64_t peak_at = -1;
    const cmh_entry *peak_e = NULL;
    if (pk.alloc_peak > 0) {
        int64_t len = n; /* len: the reconciled end */
        peak_at = pk.alloc_index >= len ? len - 1 : pk.alloc_index;
        peak_e = peak_at >= 0 && peak_at < len ? &ents[peak_at] : NULL;
        if (by_time && peak_e && cmh_entry_time(s, peak_e)) { /* (the time as `peak` says it: one formatter) */
            char when[40];
            cmh_when_text(cmh_entry_time(s, peak_e), t0, when, sizeof when);
            snprintf(label, sizeof label, "peak %s%s at %s", least, cmh_svg_size((double)pk.alloc_peak), when);
        }
        else if (pk.alloc_index >= 0)
            snprintf(label, sizeof label, "peak %s%s at entry %" PRId64, least, cmh_svg_size((double)pk.alloc_peak), pk.alloc_index);
        else if (history) snprintf(label, sizeof label, "peak %s%s before the first entry", least, cmh_svg_size((double)pk.alloc_peak));
        else snprintf(label, sizeof label, "at the end %s (no history: the peak is not known)", cmh_svg_size((double)pk.alloc_peak));
        cmh_peak_report said = {.alloc_unsplit = pk.alloc_unsplit};
        if (!history || !cmh_unsplit_text(&said, why, sizeof why)) why[0] = 0;
    }
    /* the labels' rows: the peak's words first (its note under it), then the OOMs', then the
     * marks' and annotations' (all of them up to 40 markers, as before) */
    band *lay = calloc(1, sizeof *lay);
    if (!lay) {
        rc = CMH_ENOMEM;
        goto out;
    }
    double peak_x = L + (peak_e ? XOF(peak_at, cmh_entry_time(s, peak_e) ? cmh_entry_time(s, peak_e) : t0) : 0) * pw;
    double row_x[2] = {0, 0};
    int row_end[2] = {0, 0};
    const char *rows[2] = {label, why};
    for (int k = 0; k < 2 && rows[k][0]; k++) {
        double w = label_width(rows[k], 12);
        row_x[k] = label_x(peak_x, 8, w, L + 4, L + pw - 4, &row_end[k]);
        band_place(lay, row_x[k], w, row_end[k], k); /* (rows 0 and 1: the band is empty yet) */
    }
    int labelled = nmk <= 40;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < nmk; k++) {
            marker *m = &mk[k];
            if ((m->kind == 0) != (pass == 0)) continue;
            m->row = -1;
            if (!labelled && m->kind) continue;
            double w = label_width(m->label, m->kind ? 10 : 12);
            m->lx = label_x(L + m->x * pw, 3, w, L + 4, L + pw - 4, &m->end);
            m->row = band_place(lay, m->lx, w, m->end, 0);
        }
    /* a label row (12 px type: 14 px from ascent to descent); the band: its rows, and room under
     * them for the peak's dot */
    const double line_h = 15;
    double band = lay->rows ? 8 + line_h * lay->rows : 0;
    free(lay);
    double top_y = (double)top + T, bottom = top_y + ph;
    double yscale = ymax > 0 ? (ph - band) / ((double)ymax * (band > 0 ? 1.0 : 1.08)) : 0;
#define YOF(v) (bottom - (double)(v) * yscale)
    fprintf(fp, "<g class=\"panel\" data-device=\"%d\" data-entries=\"%u\">\n", device, n);
    fprintf(fp, "<text class=\"h\" x=\"%d\" y=\"%d\">", L, top + 20);
    cmh_svg_text(fp, device < 0 ? "pinned host memory" : NULL);
    if (device >= 0) fprintf(fp, "device %d", device);
    fprintf(fp, " \xc2\xb7 %u trace %s", n, n == 1 ? "entry" : "entries");
    if (gap.unfreed_blocks)
        fprintf(fp, " \xc2\xb7 the trace stops before the snapshot: %" PRIu64 " block%s (%s) freed after its last entry", gap.unfreed_blocks,
                gap.unfreed_blocks == 1 ? "" : "s", cmh_svg_size((double)gap.unfreed_bytes));
    fputs("</text>\n", fp);
    fprintf(fp, "<rect class=\"area\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>\n", L, top_y, pw, ph);
    /* y axis: about five ticks at round figures */
    double unit = ymax >= (2ll << 30) ? 1073741824.0 : ymax >= (2 << 20) ? 1048576.0 : ymax >= 2048 ? 1024.0 : 1.0;
    const char *uname = unit == 1073741824.0 ? "GiB" : unit == 1048576.0 ? "MiB" : unit == 1024.0 ? "KiB" : "B";
    double span = ymax > 0 ? (ph - band) / yscale / unit : 0, step = cmh_svg_nice(span / 5);
    /* bytes come whole: no '0.2 B' tick (an axis under 5 B, or an empty snapshot's: one 0 B tick
     * and a word that there is nothing to draw) */
    if (unit == 1.0 && step < 1) step = 1;
    if (ymax <= 0) {
        char listed[600]; /* (one panel standing for several listed devices, each empty) */
        fprintf(fp, "<text class=\"empty\" x=\"%.1f\" y=\"%.1f\">nothing to plot: no memory allocated or reserved%s", L + pw / 2.0,
                top_y + ph / 2.0, n ? "" : ", no trace entries");
        if (cmh_devices_empty_text(s, listed, sizeof listed)) {
            fputs("; ", fp);
            cmh_svg_text(fp, listed);
        }
        fputs("</text>\n", fp);
    }
    for (double v = 0; v <= span + 1e-9; v += step) {
        double y = bottom - v * unit * yscale;
        if (y < top_y + band - 0.5) break;
        fprintf(fp, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>", L, y, L + pw, y);
        fprintf(fp, "<text class=\"ytick\" x=\"%d\" y=\"%.1f\">%g %s</text>\n", L - 6, y + 4, v, uname);
    }
    /* x axis, in the unit the record's length reads best in */
    double secs = by_time ? (double)(t1 - t0) / 1e9 : 0;
    double tu = secs >= 1 ? 1 : secs >= 1e-3 ? 1e-3 : 1e-6;
    const char *tun = tu == 1 ? "s" : tu == 1e-3 ? " ms" : " \xc2\xb5s";
    double xspan = by_time ? secs / tu : (double)(n ? n - 1 : 1);
    double xstep = cmh_svg_nice(xspan / 8);
    if (!by_time && xstep < 1) xstep = 1; /* entries are whole too (it read 0.2, 0.4 on a short trace) */
    for (int k = 0; xspan > 0 && (by_time || n > 1) && k * xstep <= xspan * (1 + 1e-9); k++) {
        double v = k * xstep, x = L + v / xspan * pw;
        fprintf(fp, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, bottom, x, bottom + 5);
        if (by_time) fprintf(fp, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\">+%g%s</text>\n", x, bottom + 18, v, tun);
        else fprintf(fp, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\">%g</text>\n", x, bottom + 18, v);
    }
    char xl[160];
    if (by_time) snprintf(xl, sizeof xl, "time since the record's first event");
    else if (busy > 0 && timed) { /* why not time: say so, and how to get it */
        char span[32];
        cmh_span_text(t1 - t0, span, sizeof span); /* (a 14 ms record read "of the 0.0 s recorded") */
        snprintf(xl, sizeof xl, "trace entry (the busy part is %.0f%% of the %s recorded; --axis time for time)", 100 * busy, span);
    } else snprintf(xl, sizeof xl, "trace entry");
    fprintf(fp, "<text class=\"xlabel\" data-axis=\"%s\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", by_time ? "time" : "entries", L + pw / 2.0,
            bottom + 36, xl);
    /* the series: reserved under allocated */
    for (int sidx = 0; sidx < 2; sidx++) {
        int64_t smax = 0;
        for (int c = 0; c <= pw; c++)
            if (cols[c].has && (sidx ? cols[c].amax : cols[c].rmax) > smax) smax = sidx ? cols[c].amax : cols[c].rmax;
        fprintf(fp, "<path class=\"%s\" data-series=\"%s\" data-max=\"%" PRId64 "\" d=\"", sidx ? "alloc" : "res",
                sidx ? "allocated" : "reserved", smax);
        int first = 1;
        int64_t last = 0;
        for (int c = 0; c <= pw; c++) {
            if (!cols[c].has) continue;
            int64_t hi = sidx ? cols[c].amax : cols[c].rmax, lo = sidx ? cols[c].amin : cols[c].rmin;
            int64_t in = sidx ? cols[c].afirst : cols[c].rfirst, outv = sidx ? cols[c].alast : cols[c].rlast;
            if (first) fprintf(fp, "M%d %.1f", L + c, YOF(in));
            else fprintf(fp, "L%d %.1fL%d %.1f", L + c, YOF(last), L + c, YOF(in)); /* held, then the step */
            /* the column's whole range, ending at its last value */
            fprintf(fp, "L%d %.1fL%d %.1fL%d %.1f", L + c, YOF(hi), L + c, YOF(lo), L + c, YOF(outv));
            last = outv;
            first = 0;
        }
        if (!first) fprintf(fp, "L%d %.1f", L + pw, YOF(last)); /* to the end of the record */
        fputs("\"/>\n", fp);
    }
    /* markers */
    for (uint32_t k = 0; k < nmk; k++) {
        const marker *m = &mk[k];
        double x = L + m->x * pw;
        static const char *const cls[] = {"oom", "mark", "ann", "ann"};
        fprintf(fp, "<g class=\"marker %s\"><title>", cls[m->kind]);
        cmh_svg_text(fp, m->title);
        fprintf(fp, "</title><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, top_y + band, x, bottom);
        if (m->row >= 0) { /* in the head band, at the top of its line */
            fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\"%s>", m->lx, top_y + line_h * (m->row + 1) - 2, m->end ? " text-anchor=\"end\"" : "");
            cmh_svg_text(fp, m->label);
            fputs("</text>", fp);
        }
        fputs("</g>\n", fp);
    }
    /* the peak, with the figure `peak` gives, and its words: a peak before the first entry is
     * named so, and a record with no history (enabled=state) has none to tell (it read 'peak
     * 11.0 GiB at entry -1' where `peak` says the peak is not known).  Its dot on the series, its
     * words in the band above every series, beside it where they fit. */
    if (label[0]) {
        fprintf(fp, "<g class=\"peak\" data-device=\"%d\" data-bytes=\"%" PRId64 "\" data-entry=\"%" PRId64 "\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>",
                device, pk.alloc_peak, pk.alloc_index, peak_x, YOF(pk.alloc_peak));
        for (int k = 0; k < 2 && rows[k][0]; k++) {
            fprintf(fp, "<text%s x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", k ? " class=\"unsplit\"" : "", row_x[k],
                    top_y + line_h * (k + 1) - 2, row_end[k] ? "end" : "start");
            cmh_svg_text(fp, rows[k]);
            fputs("</text>", fp);
        }
        fputs("</g>\n", fp);
    }
    /* the legend */
    fprintf(fp, "<g class=\"legend\"><rect class=\"res\" x=\"%d\" y=\"%d\" width=\"14\" height=\"4\"/><text x=\"%d\" y=\"%d\">reserved</text>"
                "<rect class=\"alloc\" x=\"%d\" y=\"%d\" width=\"14\" height=\"4\"/><text x=\"%d\" y=\"%d\">allocated</text></g>\n",
            L + pw - 190, top + 16, L + pw - 172, top + 21, L + pw - 100, top + 16, L + pw - 82, top + 21);
    rc = cmh_svg_facts(fp, s, device, "g");
    fputs("</g>\n", fp);
#undef XOF
#undef YOF
out:
    if (r) cmh_replay_free(r);
    free(cols);
    free(mk);
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int cmh_plot_axis(const cmh_snapshot *s, const cmh_plot_opts *o, double *busy)
{
    if (busy) *busy = 0;
    int64_t t0 = cmh_clock_origin(s), t1 = cmh_clock_last(s);
    if (!t0 || t1 <= t0) return CMH_AXIS_TIME; /* no clock: the panels count entries anyway */
    /* the known times, in the devices' order: in time order (a trace mostly is), the percentiles
     * are read off in place; else a sorted copy (8 bytes an entry, as much as the model's half) */
    uint64_t n = 0;
    int sorted = 1;
    int64_t last = INT64_MIN;
    for (int k = 0; k < o->ndevices; k++) {
        const cmh_trace *tr = cmh_snapshot_trace(s, o->devices[k]);
        for (uint32_t i = 0; tr && i < tr->nentries; i++) {
            int64_t ti = cmh_entry_time(s, &s->entries[tr->first_entry + i]);
            if (!ti) continue;
            n++;
            if (ti < last) sorted = 0;
            last = ti;
        }
    }
    if (n < 20) return CMH_AXIS_TIME;
    int64_t lo = 0, hi = 0;
    if (sorted) {
        uint64_t m = 0, klo = n * 5 / 100, khi = n * 95 / 100;
        for (int k = 0; k < o->ndevices; k++) {
            const cmh_trace *tr = cmh_snapshot_trace(s, o->devices[k]);
            for (uint32_t i = 0; tr && i < tr->nentries; i++) {
                int64_t ti = cmh_entry_time(s, &s->entries[tr->first_entry + i]);
                if (!ti) continue;
                if (m == klo) lo = ti;
                if (m == khi) hi = ti;
                m++;
            }
        }
    } else {
        int64_t *t = malloc(n * sizeof *t);
        if (!t) return CMH_AXIS_TIME;
        uint64_t m = 0;
        for (int k = 0; k < o->ndevices; k++) {
            const cmh_trace *tr = cmh_snapshot_trace(s, o->devices[k]);
            for (uint32_t i = 0; tr && i < tr->nentries; i++) {
                int64_t ti = cmh_entry_time(s, &s->entries[tr->first_entry + i]);
                if (ti) t[m++] = ti;
            }
        }
        qsort(t, m, sizeof *t, cmp_i64);
        lo = t[m * 5 / 100], hi = t[m * 95 / 100];
        free(t);
    }
    double share = (double)(hi - lo) / (double)(t1 - t0);
    if (busy) *busy = share;
    return share < CMH_AXIS_BUSY_SHARE ? CMH_AXIS_ENTRIES : CMH_AXIS_TIME;
}

int cmh_plot_timeline(const cmh_snapshot *s, const cmh_plot_opts *o, FILE *fp)
{
    int W = o && o->width >= 200 ? o->width : 1200, H = o && o->panel_height >= 120 ? o->panel_height : 300;
    int nd = o ? o->ndevices : 0;
    int head = o && o->title ? 28 : 0;
    if (o && o->inline_svg)
        fprintf(fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" viewBox=\"0 0 %d %d\" preserveAspectRatio=\"xMinYMin meet\" "
                    "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
                W, head + H * (nd ? nd : 1));
    else
        fprintf(fp, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                    "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
                W, head + H * (nd ? nd : 1), W, head + H * (nd ? nd : 1));
    fputs("<style>.area{fill:#fbfbfd;stroke:#d0d4dc}.grid{stroke:#e6e8ee}.tick{stroke:#9aa0aa}"
          ".ytick{text-anchor:end;fill:#555}.xtick{text-anchor:middle;fill:#555}.xlabel{text-anchor:middle;fill:#777}.empty{text-anchor:middle;fill:#777}"
          ".h{font-weight:bold;font-size:14px;fill:#222}.t{font-weight:bold;font-size:15px;fill:#111}"
          "path.res{fill:none;stroke:#e8912d;stroke-width:4;stroke-opacity:0.55;stroke-linejoin:round}path.alloc{fill:none;stroke:#2d6fe8;stroke-width:1.5;stroke-linejoin:round}"
          "rect.res{fill:#e8912d}rect.alloc{fill:#2d6fe8}.legend text{fill:#333}"
          ".marker line{stroke-width:1}.oom line{stroke:#d62728;stroke-dasharray:4 3}.oom text{fill:#d62728}"
          ".mark line{stroke:#888;stroke-dasharray:2 3}.mark text,.ann text{fill:#666;font-size:10px}"
          ".ann line{stroke:#2ca02c;stroke-dasharray:1 3}.peak circle{fill:#2d6fe8;stroke:#fff;stroke-width:1.5}"
          ".peak text{font-weight:bold;fill:#1a4fb8}</style>\n",
          fp);
    fprintf(fp, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, head + H * (nd ? nd : 1));
    if (head) {
        fprintf(fp, "<text class=\"t\" x=\"16\" y=\"22\">");
        cmh_svg_text(fp, o->title);
        fputs("</text>\n", fp);
    }
    int rc = CMH_OK;
    double busy = 0;
    int axis = o->axis == CMH_AXIS_AUTO ? cmh_plot_axis(s, o, &busy) : o->axis;
    for (int k = 0; k < nd && rc == CMH_OK; k++) rc = panel(s, o->devices[k], head + k * H, W, H, axis, busy, fp);
    fputs("</svg>\n", fp);
    if (rc == CMH_OK && ferror(fp)) rc = CMH_EIO;
    return rc;
}
