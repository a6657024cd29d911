/*
 * report.c - the one-file HTML report (cumemhist/pictures.h): everything inline (SVG, CSS), no
 * script and no external request, readable from 360 px to wide screens.  Every figure comes
 * from the same computations as the text reports (peak, owners, leaks, frag, oom, kernels).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/ownerwords.h"
#include "cumemhist/owners.h"
#include "cumemhist/pictures.h"
#include "cumemhist/reports.h"
#include "cumemhist/gapwords.h"
#include "cumemhist/leakwords.h"
#include "cumemhist/view.h"
#include "svg.h"

#define esc cmh_svg_text
#define SZ(v) cmh_svg_size((double)(v))

static const char g_css[] =
    "*{box-sizing:border-box}body{margin:0;background:#f4f5f8;color:#1d2129;font:14px/1.45 -apple-system,'Segoe UI',"
    "'DejaVu Sans',Helvetica,Arial,sans-serif}"
    "header.r-top{background:#1f2a44;color:#fff;padding:18px 24px}header.r-top h1{margin:0;font-size:20px;font-weight:600;"
    "overflow-wrap:anywhere}header.r-top p{margin:4px 0 0;color:#c8d0e0;font-size:13px;overflow-wrap:anywhere}"
    "main{max-width:1240px;margin:0 auto;padding:16px}"
    "section.r-dev{background:#fff;border:1px solid #dde1e8;border-radius:8px;margin:0 0 20px;padding:16px 18px}"
    "section.r-dev>h2{margin:0 0 10px;font-size:18px}h3{font-size:15px;margin:20px 0 8px;color:#2b3445}"
    ".r-cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(140px,1fr));gap:10px;margin:6px 0 4px}"
    ".r-card{background:#f7f8fb;border:1px solid #e3e6ec;border-radius:6px;padding:8px 10px}"
    ".r-card b{display:block;font-size:18px;font-variant-numeric:tabular-nums}.r-card span{color:#5b6475;font-size:12px}"
    ".r-wrap{overflow-x:auto}table{border-collapse:collapse;width:100%;font-size:13px}"
    "th,td{padding:5px 8px;border-bottom:1px solid #eceef2;text-align:left;vertical-align:top}"
    "th{color:#5b6475;font-weight:600;white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "td.site{overflow-wrap:anywhere;min-width:14em}.r-callers,.r-callers-growth{font-size:12px;margin-top:3px;font-weight:normal}"
    ".r-bar{height:10px;background:#e8ebf1;border-radius:3px;overflow:hidden;min-width:80px}"
    ".r-bar i{display:block;height:100%;background:#2d6fe8}.r-bar i.c{background:#e8912d}.r-bar i.u{background:#9aa3b2}"
    ".r-fbar{display:flex;height:12px;border-radius:3px;overflow:hidden;min-width:120px;background:#eee}"
    ".r-fbar i{display:block;height:100%}.r-fbar .a{background:#2d6fe8}.r-fbar .f{background:#f0b35e}"
    ".r-leak{color:#c0392b;font-weight:600}.r-ok{color:#2e7d32}.r-muted{color:#6b7385}"
    ".r-lost{border-left:4px solid #d9534f;background:#fdf1f0;padding:8px 12px;margin:8px 0}"
    ".r-drverr{white-space:pre-wrap;overflow-wrap:anywhere;border-left:4px solid #e6a23c;background:#fdf8ef;padding:8px 12px;margin:8px 0}"
    ".r-oom{border-left:4px solid #d62728;background:#fdf3f3;color:#5a1010;padding:8px 12px;margin:8px 0;border-radius:4px;overflow-wrap:anywhere}.r-oom a{color:#a01818}"
    ".r-tl{overflow-x:auto}svg.timeline{width:100%;min-width:900px;height:auto;display:block}svg.r-spark{width:120px;height:28px;display:block}"
    "footer{color:#6b7385;font-size:12px;text-align:center;padding:8px 0 24px}"
    "@media (max-width:640px){main{padding:8px}section.r-dev{padding:12px 10px}th,td{padding:4px 5px}.nw{display:none}"
    "td.site{min-width:9em}}";

static void card(FILE *fp, const char *value, const char *what)
{
    fputs("<div class=\"r-card\"><b>", fp);
    esc(fp, value);
    fputs("</b><span>", fp);
    esc(fp, what);
    fputs("</span></div>", fp);
}

static void site_label(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, char *buf, size_t cap)
{
    /* a row grouped by owner, package or file is named by it, as the text reports name it (the
     * site of its first stack named a whole package's bytes as one line's) */
    int by = g ? cmh_sites_group_by(g) : CMH_GROUP_SITE;
    if (g && (by == CMH_GROUP_MODULE || by == CMH_GROUP_PACKAGE)) {
        uint32_t gr = cmh_sites_group(g, stack);
        if (by == CMH_GROUP_PACKAGE) snprintf(buf, cap, "%s", cmh_sites_package_name(g, gr));
        else cmh_owner_name(cmh_sites_owner(g, gr), cmh_sites_owner_package(g, gr), buf, cap);
        if (*buf) return;
    }
    const cmh_frame *f = g && stack ? cmh_sites_site_of(g, stack) : NULL;
    if (f && by == CMH_GROUP_FILE) {
        snprintf(buf, cap, "%s", cmh_str(s, f->filename));
        return;
    }
    const char *why = f ? cmh_sites_no_user_frame(g, stack) : NULL;
    if (why) { /* a site of PyTorch's C++ alone: said, as the text reports say it */
        char fr[1024];
        cmh_svg_frame(s, f, fr, sizeof fr);
        snprintf(buf, cap, "(%s: %.1000s)", why, fr);
    } else if (f) cmh_svg_frame(s, f, buf, cap);
    else if (stack) snprintf(buf, cap, "(no frame)");
    else snprintf(buf, cap, "<no stack: %s>", cmh_no_stack_reason(s)); /* the words of every report */
}

/* Under a site's name, its bytes by the line that called it and, in leaks, which of those
 * callers grow: the words `peak` and `leaks` print (cumemhist/leakwords.h), from the same report. */
static void callers(FILE *fp, const cmh_snapshot *s, const cmh_site *x)
{
    char line[8192];
    if (cmh_site_callers_text(s, x, line, sizeof line)) {
        fputs("<div class=\"r-callers r-muted\">", fp);
        esc(fp, line);
        fputs("</div>", fp);
    }
    if (cmh_site_callers_growth_text(s, x, line, sizeof line)) {
        fputs("<div class=\"r-callers-growth r-leak\">", fp);
        esc(fp, line);
        fputs("</div>", fp);
    }
}

/* The blocks live at the end (one replay for every sparkline). */
typedef struct lives {
    cmh_live_block *b;
    uint32_t n, cap;
    int nomem;
} lives;

static void on_live(void *arg, const cmh_live_block *bl)
{
    lives *w = arg;
    if (bl->state != CMH_BLOCK_ACTIVE_ALLOCATED) return;
    if (w->n == w->cap) {
        uint32_t nc = w->cap ? w->cap * 2 : 256;
        cmh_live_block *nb = realloc(w->b, nc * sizeof *nb);
        if (!nb) {
            w->nomem = 1;
            return;
        }
        w->b = nb;
        w->cap = nc;
    }
    w->b[w->n++] = *bl;
}

static int cmp_time(const void *a, const void *b)
{
    const cmh_live_block *x = a, *y = b;
    return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

/* A sparkline of a leak site's still-live bytes accumulating over the record. */
static void spark(FILE *fp, const lives *lv, const cmh_sites *g, uint32_t group, int64_t t0, int64_t t1)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < lv->n; i++)
        if (cmh_sites_group(g, lv->b[i].stack) == group) total += lv->b[i].size;
    fputs("<svg class=\"r-spark\" viewBox=\"0 0 120 28\" preserveAspectRatio=\"none\"><path fill=\"none\" stroke=\"#c0392b\" "
          "stroke-width=\"1.5\" d=\"M0 27",
          fp);
    uint64_t acc = 0;
    for (uint32_t i = 0; i < lv->n && total; i++) { /* in allocation order (sorted by the caller) */
        if (cmh_sites_group(g, lv->b[i].stack) != group) continue;
        acc += lv->b[i].size;
        double x = t1 > t0 && lv->b[i].time_ns ? 120.0 * (double)(lv->b[i].time_ns - t0) / (double)(t1 - t0) : 0;
        if (x < 0) x = 0;
        if (x > 120) x = 120;
        fprintf(fp, "H%.1fV%.1f", x, 27 - 26.0 * (double)acc / (double)total);
    }
    fputs("H120\"/></svg>", fp);
}

/* Everything a device's section shows, computed at once: each piece replays the trace on its
 * own (replays of one snapshot may run in parallel), so the pieces run on every core. */
typedef struct pre {
    const cmh_snapshot *s, *raw;
    const cmh_sites *g;
    int dev, next;
    char *plot;
    size_t nplot;
    cmh_mem_stats st;
    cmh_peak_report pk;
    cmh_owners_report ow;
    cmh_leak_report lk;
    lives lv;
    cmh_frag_report fr;
    cmh_oom_report om;
    int rc[8];
} pre;

enum { T_OWNERS, T_PEAK, T_LEAKS, T_PLOT, T_FRAG, T_OOM, T_LIVES, T_SUMMARY, NTASKS };

static void run_task(pre *p, int k)
{
    const cmh_snapshot *s = p->s;
    int rc = CMH_OK;
    switch (k) {
    case T_OWNERS:
        if (p->dev >= 0) rc = cmh_owners_compute(p->raw, p->dev, &p->ow);
        break;
    case T_PEAK: rc = cmh_peak_compute(s, p->dev, p->g, &p->pk); break;
    case T_LEAKS: rc = cmh_leaks_compute(s, p->dev, p->g, 0, &p->lk); break;
    case T_PLOT: {
        FILE *m = open_memstream(&p->plot, &p->nplot);
        int32_t one = p->dev;
        cmh_plot_opts po = {1200, 300, &one, 1, NULL, 1, CMH_AXIS_AUTO};
        int32_t all[256]; /* one axis for every device's timeline of the page, as plot draws them */
        int nall = cmh_snapshot_devices(s, all, 256);
        cmh_plot_opts every = {1200, 300, all, nall < 256 ? nall : 256, NULL, 1, CMH_AXIS_AUTO};
        po.axis = cmh_plot_axis(s, &every, NULL);
        rc = m ? cmh_plot_timeline(s, &po, m) : CMH_ENOMEM;
        if (m && fclose(m) != 0 && rc == CMH_OK) rc = CMH_ENOMEM;
        break;
    }
    case T_FRAG: rc = cmh_frag_compute(s, p->dev, &p->fr); break;
    case T_OOM: rc = cmh_oom_compute(s, p->dev, p->g, &p->om); break;
    case T_LIVES:
        if (p->g) { /* the blocks live at the end, for the leak sites' sparklines */
            rc = cmh_end_blocks(s, p->dev, on_live, &p->lv); /* the header's replay found them */
            if (p->lv.nomem) rc = CMH_ENOMEM;
            if (rc == CMH_OK && p->lv.n) qsort(p->lv.b, p->lv.n, sizeof *p->lv.b, cmp_time);
        }
        break;
    case T_SUMMARY: rc = cmh_summary_compute(s, p->dev, &p->st); break;
    }
    p->rc[k] = rc;
}

static void *worker(void *arg)
{
    pre *p = arg;
    for (int k; (k = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < NTASKS;) run_task(p, k);
    return NULL;
}

static int compute(pre *p)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cores > 1 ? (int)(cores < NTASKS ? cores : NTASKS) - 1 : 0;
    pthread_t th[NTASKS];
    int started = 0;
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, worker, p) != 0) break;
    worker(p);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (int k = 0; k < NTASKS; k++)
        if (p->rc[k] != CMH_OK) return p->rc[k];
    return CMH_OK;
}

static void release(pre *p)
{
    free(p->plot);
    cmh_peak_report_free(&p->pk);
    cmh_owners_report_free(&p->ow);
    cmh_leak_report_free(&p->lk);
    free(p->lv.b);
    cmh_frag_report_free(&p->fr);
    cmh_oom_report_free(&p->om);
}

static int device_section(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, int dev, FILE *fp)
{
    char buf[1200];
    pre P;
    memset(&P, 0, sizeof P);
    P.s = s, P.raw = raw, P.g = g, P.dev = dev;
    int rc = compute(&P);
    if (rc != CMH_OK) {
        release(&P);
        return rc;
    }
    const cmh_mem_stats st = P.st;
    const cmh_peak_report pk = P.pk;
    fprintf(fp, "<section class=\"r-dev\" id=\"device%d\"><h2>", dev);
    if (dev < 0) fputs("Pinned host memory", fp);
    else fprintf(fp, "Device %d", dev);
    fputs("</h2>\n", fp);
    cmh_svg_facts(fp, s, dev, "div"); /* for scripts and tests/facts_test.py */
    /* the timeline */
    fputs("<div class=\"r-tl\">", fp); /* on a phone it scrolls, so its text stays readable */
    fwrite(P.plot, 1, P.nplot, fp);
    fputs("</div>", fp);
    /* the figures */
    int64_t t0 = cmh_clock_origin(s), t1 = cmh_clock_last(s); /* the record's one clock */
    /* a record with no history (enabled=state, history off) knows the end only: its replay's
     * peak is the end state, its OOMs 0 and its allocations the blocks live at the end, none of
     * which the record says (as `peak` and `summary` say it) */
    int hist = pk.base.history;
    fputs("<div class=\"r-cards\">", fp);
    int least = cmh_peak_extent(&pk) == CMH_PEAK_AT_LEAST; /* the trace does not reach back to the run's start */
    card(fp, hist ? SZ(pk.alloc_peak) : "not known", !hist ? "peak allocated (no history)" : least ? "peak allocated (at least)" : "peak allocated");
    card(fp, hist ? SZ(pk.reserved_peak) : "not known", !hist ? "peak reserved (no history)" : least ? "peak reserved (at least)" : "peak reserved");
    card(fp, SZ(pk.alloc_end), "allocated at the end");
    card(fp, SZ(pk.reserved_end), "reserved at the end");
    snprintf(buf, sizeof buf, "%" PRIu64, (uint64_t)st.num_ooms);
    int ooms_known = hist || cmh_trace_ooms_known(s, dev); /* (enabled=state counts them too) */
    card(fp, ooms_known ? buf : "not known", !ooms_known ? "out-of-memory errors (no history)" : st.num_ooms == 1 ? "out-of-memory error" : "out-of-memory errors");
    /* memory_stats' total counts the blocks live when the trace began (a ring that dropped its
     * oldest entries, a trace begun mid-run) as allocated then: the card counts the trace's own
     * and says those apart, as summary's note and its --json do */
    int64_t before = pk.allocs_start, made = st.allocation[CMH_POOL_ALL].allocated - before;
    char what[160] = "allocations in the trace";
    snprintf(buf, sizeof buf, "%" PRId64, made);
    if (before)
        snprintf(what, sizeof what, "allocation%s in the trace, %" PRId64 " more live when %s began", made == 1 ? "" : "s", before,
                 pk.base.dropped ? "its kept entries" : "it");
    else if (made == 1) snprintf(what, sizeof what, "allocation in the trace");
    card(fp, hist ? buf : "not known", hist ? what : "allocations (no history)");
    fputs("</div>\n", fp);
    if (hist && cmh_unsplit_text(&pk, buf, sizeof buf)) fprintf(fp, "<p class=\"r-muted r-unsplit\">Peak allocated: %s.</p>\n", buf);
    if (!hist && ooms_known)
        fprintf(fp, "<p class=\"r-muted r-nohist\">No history on this device (%s): only the state at "
                "the end is known, and the out-of-memory errors, counted all the same; the peak and the allocations made are not.</p>\n",
                pk.base.nohist_cause);
    else if (!hist)
        fprintf(fp, "<p class=\"r-muted r-nohist\">No history on this device (%s): only the state at "
                "the end is known; the peak, the out-of-memory errors and the allocations made are not.</p>\n",
                pk.base.nohist_cause);
    if (pk.base.dropped)
        fprintf(fp, "<p class=\"r-muted\">The ring dropped the %" PRIu64 " oldest entr%s: peaks and totals cover the last %" PRIu64 ", and the true peaks may be higher.</p>\n",
                pk.base.dropped, pk.base.dropped == 1 ? "y" : "ies", pk.base.entries);
    else if (hist && (pk.alloc_start || pk.reserved_start)) /* the replay inferred what was live before the trace */
        fprintf(fp, "<p class=\"r-muted r-midrun\">The trace begins mid-run: %s allocated and %s reserved before its first entry "
                    "(inferred from the end): peaks and totals cover its %" PRIu64 " entr%s only, and the true peaks may be higher.</p>\n",
                SZ(pk.alloc_start), SZ(pk.reserved_start), pk.base.entries, pk.base.entries == 1 ? "y" : "ies");
    /* the trace's own end is not the snapshot's: the "at the end" cards are the snapshot's (peak's note) */
    char gap[1024];
    if (hist && cmh_gap_stops_text(&pk.base.gap, pk.base.pytorch, " ", gap, sizeof gap)) {
        gap[0] = 'T'; /* (a sentence of its own: "the trace stops ...") */
        fputs("<p class=\"r-muted r-gap\">", fp);
        esc(fp, gap);
        fputs("</p>\n", fp);
    }
    /* owners, at the peak and at the end */
    if (dev >= 0) {
        cmh_owners_report ow = P.ow;
        /* a merged record's allocated peak is its one model's, this page's (as `peak` says) */
        if (hist) cmh_owners_set_alloc_peak(&ow, pk.alloc_peak, pk.alloc_index, pk.alloc_time_ns);
        for (uint32_t k = 0; k < ow.nmoments; k++) {
            const cmh_owners_moment *m = &ow.moments[k];
            if (strcmp(m->what, "peak") && strcmp(m->what, "end")) continue;
            uint64_t sum = m->used_known ? m->used : m->recorded;
            /* the moment as owners and peak name it: -1 is before the first entry, never "entry -1" */
            char at[64] = "";
            if (m->index >= 0) snprintf(at, sizeof at, " (entry %" PRId64 ")", m->index);
            else if (!strcmp(m->what, "peak")) snprintf(at, sizeof at, " (before the first entry)");
            fprintf(fp, "<h3>Who held the memory %s%s</h3>", strcmp(m->what, "peak") ? "at the end" : "at the reserved peak", at);
            /* which peak (the cards give two): owners' words (cumemhist/ownerwords.h) */
            char which[256];
            if (*cmh_owners_peak_words(&ow, m, t0, which, sizeof which)) {
                fputs("<p class=\"r-muted r-owners-peak\">", fp);
                esc(fp, which);
                fputs("</p>", fp);
            }
            fputs("<div class=\"r-wrap\"><table><tr><th>owner</th><th>bytes</th>"
                  "<th>share</th><th class=\"nw\"></th><th class=\"nw\">allocations</th></tr>\n",
                  fp);
            for (uint32_t i = 0; i < m->nrows; i++) {
                const cmh_owner_row *r = &m->rows[i];
                double pct = sum ? 100.0 * (double)r->bytes / (double)sum : 0;
                fputs("<tr><td class=\"site\">", fp);
                esc(fp, r->name);
                char note[256]; /* what the row rests on, as owners' text says it */
                if (r->kind == CMH_OWN_UNEXPLAINED && *cmh_owners_unexplained_note(m, t0, note, sizeof note)) {
                    fputs(" <span class=\"r-muted r-owners-note\">", fp);
                    esc(fp, note);
                    fputs("</span>", fp);
                }
                fprintf(fp, "</td><td class=\"n\">%s</td><td class=\"n\">%.1f%%</td><td class=\"nw\"><div class=\"r-bar\"><i class=\"%s\" style=\"width:%.1f%%\"></i></div></td>"
                            "<td class=\"n nw\">%s</td></tr>\n",
                        SZ(r->bytes), pct, r->kind == CMH_OWN_TORCH_CACHED || r->kind == CMH_OWN_POOL_CACHE ? "c" : r->kind == CMH_OWN_UNEXPLAINED ? "u" : "", pct,
                        r->allocations ? (snprintf(buf, sizeof buf, "%u", r->allocations), buf) : "-");
            }
            fprintf(fp, "<tr><th>total%s</th><td class=\"n\"><b>%s</b></td><td></td><td class=\"nw\"></td><td class=\"nw\"></td></tr></table></div>\n",
                    m->used_known ? "<span class=\"nw\"> (the device's used memory)</span>" : " recorded", SZ(sum));
        }
        if (ow.bad_samples) /* (owners says the same: a figure that cannot be is not shown as one) */
            fprintf(fp, "<p class=\"r-muted\">%u cuMemGetInfo sample%s of this device said more free than the device's total "
                        "(%s free of %s) and %s left out.</p>\n",
                    ow.bad_samples, ow.bad_samples > 1 ? "s" : "", SZ(ow.bad_sample.free), SZ(ow.bad_sample.total),
                    ow.bad_samples > 1 ? "were" : "was");
        if (ow.outside_samples) /* (owners says the same) */
            fprintf(fp, "<p class=\"r-muted\">%u cuMemGetInfo sample%s of this device %s taken before the first entry the ring kept, "
                        "and the ring dropped entries: what the record held then is not known, so %s left out.</p>\n",
                    ow.outside_samples, ow.outside_samples > 1 ? "s" : "", ow.outside_samples > 1 ? "were" : "was",
                    ow.outside_samples > 1 ? "they are" : "it is");
    }
    /* the sites live at the peak */
    if (pk.nsites) {
        fprintf(fp, "<h3>Live at %s, by allocation site</h3><div class=\"r-wrap\"><table><tr><th>site</th><th class=\"nw\">owner</th>"
                    "<th>bytes</th><th class=\"nw\">share</th><th class=\"nw\">blocks</th></tr>\n",
                hist ? "the allocated peak" : "the end (no history: the peak is not known)");
        for (uint32_t i = 0; i < pk.nsites && i < 12; i++) {
            const cmh_site *x = &pk.sites[i];
            site_label(s, g, x->stack, buf, sizeof buf);
            /* the peak report's own figures, machine-readable (tests/facts_test.py) */
            fprintf(fp, "<tr class=\"peak-site\" data-device=\"%d\" data-bytes=\"%" PRIu64 "\"><td class=\"site\">", dev, x->bytes);
            esc(fp, buf);
            callers(fp, s, x);
            fputs("</td><td class=\"nw\">", fp);
            char oname[256]; /* owners' name for it, as the text reports' [owner] tag */
            esc(fp, g ? cmh_owner_name(cmh_sites_owner(g, x->group), cmh_sites_owner_package(g, x->group), oname, sizeof oname) : "");
            fprintf(fp, "</td><td class=\"n\">%s</td><td class=\"n nw\">%.1f%%</td><td class=\"n nw\">%" PRIu64 "</td></tr>\n", SZ(x->bytes),
                    pk.alloc_peak ? 100.0 * (double)x->bytes / (double)pk.alloc_peak : 0, x->count);
        }
        fputs("</table></div>\n", fp);
    }
    /* leaks */
    const cmh_leak_report lk = P.lk;
    /* a snapshot taken while the process ran (snapshot PID, SIGUSR1): no end to speak of */
    int running = s->ending && !strncmp(cmh_str(s, s->ending), "was still running", 17);
    fprintf(fp, "<h3>Still live %s: %s in %" PRIu64 " block%s from %u site%s", running ? "at the snapshot, the process still running" : "at the end",
            SZ(lk.live_bytes), lk.live_blocks,
            lk.live_blocks == 1 ? "" : "s", lk.live_sites, lk.live_sites == 1 ? "" : "s");
    char words[512];
    cmh_leak_outcome_text(&lk, words, sizeof words);
    fprintf(fp, " \xe2\x80\x94 <span class=\"%s\">", lk.leaking || lk.stopped ? "r-leak" : lk.judged ? "r-ok" : "r-muted");
    esc(fp, words);
    fputs("</span></h3>\n<p class=\"r-muted\">", fp);
    esc(fp, cmh_leak_steps_text(&lk, words, sizeof words));
    fputs("</p>\n", fp);
    /* where no steps were found: how to give them, the note `leaks` prints after its outcome (and
     * its --json steps_hint), from the one function; the page had the outcome without it */
    if (cmh_leak_steps_hint(&lk, words, sizeof words)) {
        fprintf(fp, "<p class=\"r-steps-hint\" data-device=\"%d\">note: ", dev);
        esc(fp, words);
        fputs("</p>\n", fp);
    }
    const lives lv = P.lv;
    if (lk.nsites) {
        fprintf(fp, "<div class=\"r-wrap\"><table><tr><th>site</th><th>bytes</th><th class=\"nw\">blocks</th><th>verdict</th><th class=\"nw\">accumulated over the "
                    "record</th></tr>\n");
        for (uint32_t i = 0; i < lk.nsites && i < 10; i++) {
            const cmh_site *x = &lk.sites[i];
            site_label(s, g, x->stack, buf, sizeof buf);
            fprintf(fp, "<tr class=\"end-site\" data-device=\"%d\" data-bytes=\"%" PRIu64 "\" data-verdict=\"%s\" data-says=\"", dev,
                    x->bytes, cmh_leak_verdict_name(x->verdict));
            esc(fp, cmh_leak_site_text(x, words, sizeof words));
            fputs("\"><td class=\"site\">", fp);
            esc(fp, buf);
            callers(fp, s, x);
            if (cmh_site_made_by_text(s, x, words, sizeof words)) {
                fputs("<div class=\"r-made-by r-muted\">", fp);
                esc(fp, words);
                fputs("</div>", fp);
            }
            fprintf(fp, "</td><td class=\"n\">%s</td><td class=\"n nw\">%" PRIu64 "</td><td><span class=\"%s\">", SZ(x->bytes), x->count,
                    x->growing || x->verdict == CMH_LEAK_STOPPED ? "r-leak" : "r-muted");
            esc(fp, cmh_leak_site_text(x, words, sizeof words));
            fputs("</span></td><td class=\"nw\">", fp);
            if (g) spark(fp, &lv, g, x->group, t0, t1);
            fputs("</td></tr>\n", fp);
        }
        fputs("</table></div>\n", fp);
    }
    /* physical memory made with cuMemCreate and mapped nowhere: the leaks report's own sites */
    if (lk.nvmm_sites) {
        fprintf(fp, "<h3 class=\"vmm-held\" data-device=\"%d\" data-bytes=\"%" PRIu64 "\" data-handles=\"%" PRIu32 "\">Physical memory made "
                    "with cuMemCreate, held and mapped nowhere at the end (no block shows it): %s in %" PRIu32 " handle%s, from %" PRIu32 " site%s</h3>\n",
                dev, lk.vmm_unmapped_bytes, lk.vmm_unmapped_handles, SZ(lk.vmm_unmapped_bytes), lk.vmm_unmapped_handles, lk.vmm_unmapped_handles == 1 ? "" : "s", lk.nvmm_sites,
                lk.nvmm_sites == 1 ? "" : "s");
        fputs("<div class=\"r-wrap\"><table><tr><th>cuMemCreate site</th><th>bytes</th><th class=\"nw\">handles</th><th>verdict</th></tr>\n", fp);
        for (uint32_t i = 0; i < lk.nvmm_sites && i < 10; i++) {
            const cmh_vmm_site *x = &lk.vmm_sites[i];
            if (x->site) cmh_svg_frame(s, x->site, buf, sizeof buf);
            else snprintf(buf, sizeof buf, "<no stack recorded>");
            /* the leaks report's figures, machine-readable (tests/facts_test.py) */
            fprintf(fp, "<tr class=\"vmm-site\" data-device=\"%d\" data-bytes=\"%" PRIu64 "\" data-handles=\"%" PRIu32 "\" data-verdict=\"%s\" data-function=\"", dev,
                    x->bytes, x->handles, cmh_leak_verdict_name(x->judged.verdict));
            if (x->site) esc(fp, cmh_str(s, x->site->name));
            fputs("\" data-file=\"", fp);
            if (x->site) esc(fp, cmh_str(s, x->site->filename));
            fprintf(fp, "\" data-line=\"%" PRId64 "\"><td class=\"site\">", x->site ? x->site->line : 0);
            esc(fp, buf);
            fprintf(fp, "</td><td class=\"n\">%s</td><td class=\"n nw\">%" PRIu32 "</td><td>", SZ(x->bytes), x->handles);
            char why[256]; /* judged over the steps as leaks judges it */
            esc(fp, cmh_leak_site_text(&x->judged, why, sizeof why));
            fputs("</td></tr>\n", fp);
        }
        if (lk.nvmm_sites > 10) fprintf(fp, "<tr><td colspan=\"4\" class=\"r-muted\">... %" PRIu32 " more sites</td></tr>\n", lk.nvmm_sites - 10);
        fputs("</table></div>\n", fp);
    }
    /* fragmentation: the segments in frag's order, counted by use as frag counts them */
    cmh_frag_sort(&P.fr);
    const cmh_frag_report fr = P.fr;
    if (fr.nsegs) {
        fprintf(fp, "<h3>Segments at the end: %u, %s reserved, %s free inside: %s releasable, %s trapped", fr.nsegs,
                SZ(fr.reserved), SZ(fr.free), SZ(fr.releasable), SZ(fr.trapped));
        if (fr.private_segs) fprintf(fp, ", %s in private pools (a CUDA graph's or MemPool's)", SZ(fr.private_free));
        fprintf(fp, " (fragmentation %.1f%%)</h3>\n", 100 * fr.fragmentation);
        cmh_frag_use u = cmh_frag_count_use(&fr, 0, fr.nsegs);
        fprintf(fp, "<p class=\"r-muted r-seguse\">%u fully used (no free bytes%s%s), %u partly used, %u empty (nothing allocated); listed by "
                    CMH_FRAG_ORDER_WORDS "%s</p>\n",
                u.full, u.full ? ", " : "", u.full ? SZ(u.full_bytes) : "", u.part, u.empty, fr.nsegs > 16 ? "; the first 16" : "");
        fputs("<div class=\"r-wrap\"><table><tr><th>segment</th><th>reserved</th><th>allocated / free</th><th class=\"nw\">largest gap</th>"
              "<th class=\"nw\">frag.</th></tr>\n",
              fp);
        uint64_t biggest = 1;
        for (uint32_t i = 0; i < fr.nsegs; i++)
            if (fr.segs[i].reserved > biggest) biggest = fr.segs[i].reserved;
        for (uint32_t i = 0; i < fr.nsegs && i < 16; i++) {
            const cmh_frag_seg *x = &fr.segs[i];
            double w = 100.0 * (double)x->reserved / (double)biggest;
            fprintf(fp, "<tr><td class=\"n\">0x%" PRIx64 "%s", x->addr, x->expandable ? " (expandable)" : "");
            if (x->vmm && x->vmm_owner < fr.nvmm_owners) { /* another caller's cuMemMap range (NCCL's...): frag's tag */
                fputs(" (cuMemMap: ", fp);
                esc(fp, fr.vmm_owners[x->vmm_owner].name);
                fputc(')', fp);
            }
            fprintf(fp, "</td><td class=\"n\">%s</td><td><div class=\"r-fbar\" style=\"width:max(3px,%.2f%%)\">"
                        "<i class=\"a\" style=\"width:%.1f%%\"></i><i class=\"f\" style=\"width:%.1f%%\"></i></div></td>"
                        "<td class=\"n nw\">%s</td><td class=\"n nw\">%.0f%%</td></tr>\n",
                    SZ(x->reserved), w, /* to scale: 2 MiB beside 5.6 GiB is a sliver */
                    x->reserved ? 100.0 * (double)x->allocated / (double)x->reserved : 0,
                    x->reserved ? 100.0 * (double)x->free / (double)x->reserved : 0, SZ(x->largest_gap), 100 * x->fragmentation);
        }
        if (fr.nsegs > 16) {
            cmh_frag_use rest = cmh_frag_count_use(&fr, 16, fr.nsegs);
            fprintf(fp, "<tr><td colspan=\"5\" class=\"r-muted\">... %u more segments: %s reserved, ", fr.nsegs - 16, SZ(rest.reserved));
            fprintf(fp, "%s of it free; %u fully used, %u partly used, %u empty</td></tr>", SZ(rest.free), rest.full, rest.part, rest.empty);
        }
        fputs("</table></div>\n", fp);
    }
    /* OOMs */
    const cmh_oom_report om = P.om;
    for (uint32_t i = 0; i < om.nevents; i++) {
        const cmh_oom_event *e = &om.events[i];
        char title[64], retry[160] = "";
        /* numbered as oom and summary count them: a retried one is no OOM the program saw */
        if (e->number) snprintf(title, sizeof title, "Out of memory #%u", e->number);
        else snprintf(title, sizeof title, "Out of memory, retried");
        if (e->retried) {
            const char *what = e->retry_failed ? "it failed too" : "it succeeded; not counted as an OOM";
            if (e->retried == CMH_RETRY_SAME_STACK) /* no blocks reported: no cache to speak of */
                snprintf(retry, sizeof retry, "the same call stack asked again at entry %" PRId64 " after %s was freed: %s", e->retry_index,
                         SZ(e->retry_freed), what);
            else
                snprintf(retry, sizeof retry, "the allocator freed %s of its cache and asked again at entry %" PRId64 ": %s",
                         SZ(e->retry_freed), e->retry_index, what);
        } else if (e->retry_of >= 0) snprintf(retry, sizeof retry, "the retry of the request that failed at entry %" PRId64, e->retry_of);
        fprintf(fp, "<div class=\"r-oom\"><b>%s</b> at entry %" PRId64 ": asked for %s with %s allocated, %s reserved, "
                    "%s free inside the segments (%s trapped, largest gap %s), device free %s.",
                title, e->index, SZ(e->request), SZ(e->allocated), SZ(e->reserved), SZ(e->free_inside), SZ(e->split.trapped),
                SZ(e->largest_gap), e->device_free == CMH_DEVICE_FREE_UNKNOWN ? "not known" : SZ(e->device_free));
        if (e->request_pool[0] || e->request_pool[1])
            fprintf(fp, " The request was private pool (%" PRIu64 ", %" PRIu64 ")'s: %s free in its own segments, where the largest gap is measured.",
                    e->request_pool[0], e->request_pool[1], SZ(e->split.own_pool));
        if (e->split.unusable)
            fprintf(fp, " Of the free memory the request could use %s; %s was other pools'.", SZ(e->usable), SZ(e->split.unusable));
        if (e->gap_unknown_in)
            fprintf(fp, " The largest free gap is not known inside a pool's cache of %s (the record does not show its pieces); %s is the largest outside it.",
                    SZ(e->gap_unknown_in), SZ(e->largest_gap));
        if (*retry) fprintf(fp, "<br><b>Retry:</b> %s.", retry);
        fputs("<br><b>Verdict:</b> ", fp);
        esc(fp, cmh_oom_verdict_advice(e->verdict, cmh_record_pytorch(s)));
        if (e->request_stack) {
            site_label(s, g, e->request_stack, buf, sizeof buf);
            fputs("<br><b>Asked by:</b> ", fp);
            esc(fp, buf);
        }
        for (uint32_t k = 0; k < e->nsites && k < 3; k++) {
            site_label(s, g, e->sites[k].stack, buf, sizeof buf);
            fprintf(fp, "<br>%s %s: ", k ? "&nbsp; and" : "<b>Holding it:</b>", SZ(e->sites[k].bytes));
            esc(fp, buf);
        }
        fputs("</div>\n", fp);
    }
    /* kernels */
    cmh_kernel_row *kr = NULL;
    uint32_t nk = 0;
    int64_t gpu_ns = 0;
    if (s->nkernels && dev >= 0 && cmh_kernel_table(s, dev, CMH_KSORT_TOTAL, &kr, &nk, &gpu_ns) == CMH_OK && nk) {
        fprintf(fp, "<h3>Kernels: %.3f ms of GPU time</h3><div class=\"r-wrap\"><table><tr><th>kernel</th><th>calls</th><th>total</th>"
                    "<th>avg</th><th>share</th></tr>\n",
                (double)gpu_ns / 1e6);
        for (uint32_t i = 0; i < nk && i < 10; i++) {
            fputs("<tr><td class=\"site\">", fp);
            esc(fp, cmh_str(s, kr[i].name));
            fprintf(fp, "</td><td class=\"n\">%" PRIu64 "</td><td class=\"n\">%.3f ms</td><td class=\"n\">%.1f \xc2\xb5s</td><td class=\"n\">%.1f%%</td></tr>\n",
                    kr[i].calls, (double)kr[i].total_ns / 1e6, kr[i].avg_ns / 1e3, kr[i].pct);
        }
        fputs("</table></div>\n", fp);
    }
    free(kr);
    fputs("</section>\n", fp);
    release(&P);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}

static int report_page(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                       const char *title, const cmh_report_child *kids, uint32_t nkids, int with_view, FILE *fp)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, "
          "initial-scale=1\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; ",
          fp);
    if (with_view) fputs("script-src 'unsafe-inline'; ", fp); /* the interactive timeline's inline script, nothing else */
    fputs("img-src data:\"><title>cumemhist: ", fp);
    esc(fp, title ? title : "report");
    fprintf(fp, "</title><style>%s%s</style></head><body>\n<header class=\"r-top\"><h1>", g_css, with_view ? cmh_view_css_text() : "");
    esc(fp, title ? title : "cumemhist report");
    fputs("</h1><p>", fp);
    /* the parts that are known, one separator between each */
    int parts = 0;
#define PART() (parts++ ? fputs(" \xc2\xb7 ", fp) : 0)
    if (s->pid || *cmh_str(s, s->hostname)) {
        PART();
        if (s->pid) fprintf(fp, "pid %" PRId64 "%s", s->pid, *cmh_str(s, s->hostname) ? " on " : "");
        esc(fp, cmh_str(s, s->hostname));
    }
    if (*cmh_str(s, s->cmdline)) {
        PART();
        esc(fp, cmh_str(s, s->cmdline));
    }
    if (s->ending) {
        PART();
        fputs("the process ", fp);
        esc(fp, cmh_str(s, s->ending));
    }
    /* the children it forked, each with its record and how it ended as the caller found them
     * (the line `summary` and `leaks` print), else the record the recorder gave it; a child
     * killed with its GPU memory was said on `record`'s stderr only */
    for (uint32_t i = 0; i < s->nchildren && i < 8; i++) {
        const cmh_forked_child *c = &s->children[i];
        const char *base = c->path ? strrchr(c->path, '/') : NULL;
        PART();
        fprintf(fp, "<span class=\"r-child\" data-pid=\"%" PRId64 "\">", c->pid);
        if (kids && i < nkids && kids[i].pid == c->pid && kids[i].text) esc(fp, kids[i].text);
        else {
            fprintf(fp, "forked child %" PRId64, c->pid);
            if (c->path) {
                fputs(": its record ", fp);
                esc(fp, base ? base + 1 : c->path);
            }
        }
        fputs("</span>", fp);
    }
    if (s->nchildren > 8 || s->children_more) {
        PART();
        fprintf(fp, "%" PRIu64 " more forked children", (uint64_t)(s->nchildren > 8 ? s->nchildren - 8 : 0) + s->children_more);
    }
    PART();
    fprintf(fp, "%s snapshot", s->source == CMH_SRC_PYTORCH ? "PyTorch" : "cumemhist");
    PART();
    char listed[600]; /* several devices, each empty: one section stands for them (it read '1 device') */
    if (cmh_devices_empty_text(s, listed, sizeof listed)) {
        fputs("<span class=\"r-listed\">", fp);
        esc(fp, listed);
        fprintf(fp, " (device %d's section below; the others read the same)</span>", ndevices ? devices[0] : 0);
    } else fprintf(fp, "%d device%s", ndevices, ndevices == 1 ? "" : "s");
#undef PART
    fputs("</p>", fp);
    /* which device ran out of memory, before any device's section (the replay's count of each);
     * where the record's OOMs are on several devices, in the order of each device's first (by
     * time, cmh_record_ooms), the one with the record's first said, as `oom` says it */
    cmh_record_oom *ro = NULL;
    uint32_t nro = 0;
    int ordev[256], nord = 0;
    if (cmh_record_ooms(s, &ro, &nro) != CMH_OK) ro = NULL, nro = 0;
    for (uint32_t i = 0; i < nro && nord < 256; i++) {
        int seen = 0;
        for (int j = 0; j < nord && !seen; j++) seen = ordev[j] == ro[i].device;
        if (!seen) ordev[nord++] = ro[i].device;
    }
    for (int k = 0; k < ndevices && nord < 256; k++) { /* then the others, in order */
        int seen = 0;
        for (int j = 0; j < nord && !seen; j++) seen = ordev[j] == devices[k];
        if (!seen) ordev[nord++] = devices[k];
    }
    int several = 0;
    for (uint32_t i = 1; i < nro && !several; i++) several = ro[i].device != ro[0].device;
    for (int k = 0; k < nord; k++) {
        cmh_mem_stats st;
        int listed = 0;
        for (int j = 0; j < ndevices && !listed; j++) listed = devices[j] == ordev[k];
        if (!listed || ordev[k] < 0 || cmh_summary_compute(s, ordev[k], &st) != CMH_OK || !st.num_ooms) continue;
        fprintf(fp, "<p class=\"r-oom\" data-oom-device=\"%d\" data-ooms=\"%" PRId64 "\"><b>Out of memory on device %d</b>: %" PRId64
                    " error%s",
                ordev[k], (int64_t)st.num_ooms, ordev[k], (int64_t)st.num_ooms, st.num_ooms == 1 ? "" : "s");
        if (several && ordev[k] == ro[0].device && ro[0].rank) fprintf(fp, "; its #%u is the record's first (by time)", ro[0].number);
        else if (several && ordev[k] == ro[0].device) fprintf(fp, "; no times: which device's OOM came first is not known");
        fprintf(fp, " (<a href=\"#device%d\">its section</a>)</p>", ordev[k]);
    }
    free(ro);
    /* what a recovery from a flight record could not read (a copy cut short, records dropped):
     * the note every text report gives under the ending, before any figure */
    char lost[1024];
    if (cmh_history_lost_text(raw ? raw : s, lost, sizeof lost)) {
        fputs("<p class=\"r-lost\"><b>Incomplete record</b>: ", fp);
        esc(fp, lost);
        fputs("</p>", fp);
    }
    /* calls the driver refused (a double free, a pointer never allocated...): no entry shows them;
     * the note summary, oom, leaks, owners, frag and stats print, in the header */
    const cmh_snapshot *rec = raw ? raw : s;
    if (rec->ndrv_errors) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (m) {
            cmh_driver_errors_write(m, rec);
            if (fclose(m) == 0 && text) {
                fputs("<pre class=\"r-drverr\">", fp);
                esc(fp, text);
                fputs("</pre>", fp);
            }
        }
        free(text);
    }
    fputs("</header>\n<main>\n", fp);
    int rc = CMH_OK;
    for (int k = 0; k < ndevices && rc == CMH_OK; k++) rc = device_section(s, raw ? raw : s, g, devices[k], fp);
    if (rc == CMH_OK && with_view) {
        fputs("<h2 class=\"r-viewh\">Explore the active memory timeline</h2>\n", fp);
        rc = cmh_view_embed(s, g, devices, ndevices, title, fp);
    }
    fputs("</main><footer>Written by cumemhist. Figures as <code>cumemhist peak</code>, <code>owners</code>, <code>leaks</code>, "
          "<code>frag</code> and <code>oom</code> give them; definitions in docs/DEFINITIONS.md.</footer></body></html>\n",
          fp);
    if (rc == CMH_OK && ferror(fp)) rc = CMH_EIO;
    return rc;
}

/* The page asks for each device's peak and end state from its header, its plot's facts, its own
 * facts, its tasks and its viewer: computed once each (reports.h's memo) while s is read-only here.
 * CUMEMHIST_DEBUG_MEMO set: how many were computed, on stderr (for tests). */
static int memo_page(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                     const char *title, const cmh_report_child *kids, uint32_t nkids, int with_view, FILE *fp)
{
    cmh_replay_memo_history(s); /* one replay a device feeds the plot, the leaks and the viewer */
    int rc = report_page(s, raw, g, devices, ndevices, title, kids, nkids, with_view, fp);
    uint32_t n = cmh_replay_memo_end(s);
    if (getenv("CUMEMHIST_DEBUG_MEMO")) fprintf(stderr, "cumemhist: report: %u whole-trace results computed\n", n);
    return rc;
}

int cmh_report_html(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                    const char *title, FILE *fp)
{
    return memo_page(s, raw, g, devices, ndevices, title, NULL, 0, 0, fp);
}

int cmh_report_html_view(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                         const char *title, FILE *fp)
{
    return memo_page(s, raw, g, devices, ndevices, title, NULL, 0, 1, fp);
}

int cmh_report_html_ex(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                       const char *title, const cmh_report_child *children, uint32_t nchildren, int with_view, FILE *fp)
{
    return memo_page(s, raw, g, devices, ndevices, title, children, nchildren, !!with_view, fp);
}
