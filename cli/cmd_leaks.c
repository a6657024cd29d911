/*
 * cmd_leaks.c - `cumemhist leaks`: blocks still allocated at the end, by allocation site, and
 * what each site does from one step of the loop to the next (growing: a likely leak; state;
 * steady), for every device.  The verdict and its words are the analyzer's (reports.h,
 * leakwords.h); this file only lays them out.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/leakwords.h"
#include "report.h"

static int g_device = -2, g_top = 10, g_frames = 6, g_json, g_fail;
static uint64_t g_min_bytes;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPT_TOP(&g_top, "sites to list (default 10)"),
    CLI_OPT_FRAMES(&g_frames),
    {"--min-bytes", NULL, CLI_SIZE, &g_min_bytes, "B", "hide sites holding less (e.g. 1M); the totals still count them", NULL, 0, 0, NULL},
    {"--fail-on-leak", NULL, CLI_FLAG, &g_fail, NULL,
     "for CI: exit 3 when a site grows (from step to step, or over the record's time); else 6 when one stopped (grew over 3 steps or more after the "
     "first, still held); else 5 when growth cannot be judged or the record lost part of its history (a flight record cut short); else 0",
     NULL, 0, 0, NULL},
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_leaks = {
    "leaks", "[options] SNAPSHOT",
    "Blocks still allocated at the end of the record, grouped by allocation site, and what each\n"
    "site does from one step of the training loop to the next.  The steps come from the\n"
    "program's marks, else PyTorch's step annotations (ProfilerStep#N, Optimizer.step), else\n"
    "the loop's own repeating allocation pattern (also where marks give fewer than 4 steps and\n"
    "the pattern 4 or more), else they are unknown.  A site's held bytes\n"
    "at a step boundary are its blocks live there and still live at the next one.  growing:\n"
    "they rose across at least half of a recent stretch of steps after the first (3 at least;\n"
    "a likely leak), or its bytes at the steps' ends did (a buffer replaced every step by a\n"
    "larger one: torch.cat accumulation); stopped: not growing now, but they rose across 3 steps or more after the\n"
    "first, then no more, and are still held (a leak that stopped, or a cache filled over many\n"
    "steps; its rises those of whole steps: one at the last point made by the unfinished last\n"
    "step alone is none); state: held across steps, not growing, grown in its first three steps\n"
    "at most (weights, optimizer state); steady: back to the same level each step; after: made once the\n"
    "last step had begun, in no step before (work after the loop); with fewer than 4 steps\n"
    "growth is not judged.  Steps unknown, a site is judged over the record's time instead: its\n"
    "bytes held through each of 10 equal slices (a record of 1 s at least, 40 allocations of\n"
    "the site, 2 in 6 slices at least): growing (the most through the last slice, risen\n"
    "through the later half, each of the last 3 slices, beyond its churn) or level; no rate.\n"
    "--fail-on-leak: exit 3 for a growing site, else 6 for a stopped one,\n"
    "else 5 where growth cannot be judged or the record lost part of its history\n"
    "(recovered from a flight record cut short, or with records dropped), else 0.  In a\n"
    "recording, each thread's own steps are judged too.  Physical memory made with\n"
    "cuMemCreate and held mapped nowhere at the end (no block shows it) is listed after the\n"
    "sites, by its cuMemCreate site, each judged over the steps as blocks are (a handle made\n"
    "each step and never released grows).  See docs/DEFINITIONS.md.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist leaks train.cmh --min-bytes 1M --fail-on-leak"};

/* ---- physical memory made with cuMemCreate, held and mapped nowhere at the end, by site (the
 * analyzer's grouping: cmh_leak_report.vmm_sites, which the HTML report lists too) ---- */

static void held_json(cmh_jw *w, const cmh_snapshot *s, const cmh_leak_report *p)
{
    const cmh_vmm_site *v = p->vmm_sites;
    uint32_t n = p->nvmm_sites;
    cmh_jw_key(w, "vmm_unmapped");
    cmh_jw_obj(w);
    cmh_jw_kuint(w, "bytes", p->vmm_unmapped_bytes);
    cmh_jw_kuint(w, "handles", p->vmm_unmapped_handles);
    cmh_jw_key(w, "sites");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < n && (int)i < g_top; i++) {
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kuint(w, "bytes", v[i].bytes);
        cmh_jw_kuint(w, "handles", v[i].handles);
        /* judged over the steps as a block site is (each handle held from its making) */
        cmh_jw_kstr(w, "verdict", cmh_leak_verdict_name(v[i].judged.verdict));
        cmh_jw_kint(w, "rate_per_step", v[i].judged.growing ? v[i].judged.rate : 0);
        cmh_jw_key(w, "site");
        if (v[i].site) rep_json_frame(w, s, v[i].site);
        else cmh_jw_null(w);
        cmh_jw_key(w, "frames");
        cmh_jw_arr(w);
        const cmh_stack *st = &s->stacks[v[i].stack < s->nstacks ? v[i].stack : 0];
        for (uint32_t f = 0; f < st->count; f++) rep_json_frame(w, s, &s->frames[s->stack_frames[st->first + f]]);
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_end(w);
}

static void held_text(const cmh_snapshot *s, const cmh_sites *g, const cmh_leak_report *p)
{
    const cmh_vmm_site *v = p->vmm_sites;
    uint32_t n = p->nvmm_sites;
    printf("\nphysical memory made with cuMemCreate, held and mapped nowhere at the end (no block shows it): %s in %s, from %s\n",
           rep_size((double)p->vmm_unmapped_bytes), rep_count(p->vmm_unmapped_handles, "handle", "handles"),
           rep_count(n, "site", "sites"));
    printf("  %12s %7s  %s\n", "bytes", "handles", "cuMemCreate site");
    for (uint32_t i = 0; i < n && (int)i < g_top; i++) {
        char why[256];
        printf("  %12s %7" PRIu32 "  %s\n", rep_size((double)v[i].bytes), v[i].handles,
               v[i].site ? rep_frame(s, v[i].site) : "<no stack recorded>");
        printf("        %s\n", cmh_leak_site_text(&v[i].judged, why, sizeof why));
        if (v[i].stack) rep_print_frames(s, g, v[i].stack, g_frames, "        ");
    }
    if (n > (uint32_t)g_top) printf("  ... %s (--top)\n", rep_count(n - (uint32_t)g_top, "more site", "more sites"));
}


/* ---- a row grouped by module, file or package is a union of sites, each judged alone too:
 * the row's verdict is its summed bytes', so a row holding a model's weights (state) and a
 * prefetch buffer that grows reads "80.0 MiB growing" where 16 MiB grows.  Under such a row, its
 * sites' own verdicts and bytes when they differ, and how much of the row grows. ---- */

typedef struct by_site {
    cmh_sites *gs;     /* the snapshot grouped by site (NULL: rows are sites or stacks already) */
    cmh_leak_report q; /* the leak verdicts by site, over the same steps */
    uint32_t *row;     /* a site's row in the grouping shown (ROW_NONE: none; ROW_MANY: several) */
} by_site;

#define ROW_NONE UINT32_MAX
#define ROW_MANY (UINT32_MAX - 1)

static void by_site_free(by_site *b)
{
    if (b->gs) {
        cmh_leak_report_free(&b->q);
        cmh_sites_free(b->gs);
    }
    free(b->row);
    b->gs = NULL;
    b->row = NULL;
}

/* 0: nothing to split (a grouping by site or stack; a failure to group again, said by no line) */
static int by_site_new(const cmh_snapshot *s, const cmh_sites *g, int dev, by_site *b)
{
    b->row = NULL;
    if (!(b->gs = rep_sites_by_site_under(s, g))) return 0;
    if (cmh_leaks_compute(s, dev, b->gs, 0, &b->q) != CMH_OK) {
        cmh_sites_free(b->gs);
        b->gs = NULL;
        return 0;
    }
    uint32_t n = cmh_sites_count(b->gs);
    if (!(b->row = malloc((n ? n : 1) * sizeof *b->row))) {
        by_site_free(b);
        return 0;
    }
    for (uint32_t i = 0; i < n; i++) b->row[i] = ROW_NONE;
    for (uint32_t st = 0; st < s->nstacks; st++) {
        uint32_t a = cmh_sites_group(b->gs, st), r = cmh_sites_group(g, st);
        if (a >= n) continue;
        b->row[a] = b->row[a] == ROW_NONE || b->row[a] == r ? r : ROW_MANY;
    }
    return 1;
}

/* the sites of row x (by site), largest first as the report sorts them: how many, and whether
 * their verdicts differ */
static uint32_t row_sites(const by_site *b, const cmh_site *x, int *differ)
{
    uint32_t k = 0;
    int first = -1;
    *differ = 0;
    for (uint32_t j = 0; j < b->q.nsites; j++) {
        const cmh_site *y = &b->q.sites[j];
        if (y->group >= cmh_sites_count(b->gs) || b->row[y->group] != x->group) continue;
        if (first < 0) first = y->verdict;
        else if (y->verdict != first) *differ = 1;
        k++;
    }
    if (k == 1 && first != x->verdict) *differ = 1;
    return k;
}

/* the bytes of site y that grow: its growing callers' when each was judged alone */
static uint64_t site_growing_bytes(const cmh_site *y)
{
    if (y->verdict != CMH_LEAK_GROWING) return 0;
    if (!y->callers_judged) return y->bytes;
    uint64_t g = 0;
    for (uint32_t i = 0; i < y->ncallers; i++) g += y->callers[i].growing ? y->callers[i].bytes : 0;
    return g;
}

static void print_row_sites(const cmh_snapshot *s, const by_site *b, const cmh_site *x, const char *indent)
{
    if (!b->gs) return;
    int differ;
    uint32_t k = row_sites(b, x, &differ);
    if (!k || (k >= 2 && !differ)) return;
    char line[8192], size[32], rows[32];
    size_t at = 0;
    uint32_t shown = 0, ng = 0, first = 0;
    uint64_t rest = 0, grows = 0;
    at += (size_t)snprintf(line, sizeof line, "of it, by site:");
    for (uint32_t j = 0; j < b->q.nsites; j++) {
        const cmh_site *y = &b->q.sites[j];
        if (y->group >= cmh_sites_count(b->gs) || b->row[y->group] != x->group) continue;
        if (k == 1) { /* the row is one site: its own split by caller, as the grouping by site prints it */
            if (differ) printf("%sof it, by site: %s %s %s\n", indent, rep_size((double)y->bytes), cmh_leak_site_word(y),
                               rep_group_site(s, b->gs, y->group));
            rep_print_callers(s, y, indent);
            return;
        }
        if (y->verdict == CMH_LEAK_GROWING) {
            if (!ng++) first = j;
            grows += site_growing_bytes(y);
        }
        if (shown == CMH_CALLERS_SHOWN) {
            rest += y->bytes;
            continue;
        }
        snprintf(size, sizeof size, "%s", rep_size((double)y->bytes));
        if (at < sizeof line)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s %s %s %s", shown ? "," : "", size, cmh_leak_site_word(y),
                                   rep_group_site(s, b->gs, y->group));
        shown++;
    }
    if (rest && at < sizeof line)
        snprintf(line + at, sizeof line - at, ", %s in %s more", rep_size((double)rest), rep_count(k - shown, "site", "sites"));
    printf("%s%s\n", indent, line);
    if (x->verdict != CMH_LEAK_GROWING && !ng) return;
    snprintf(rows, sizeof rows, "%s", rep_size((double)x->bytes));
    snprintf(size, sizeof size, "%s", rep_size((double)grows));
    if (!ng)
        printf("%snone of its %u sites grows alone: the row's %s grows only as their sum\n", indent, k, rows);
    else if (grows < x->bytes && ng == 1) {
        printf("%sthe growth comes from one of its %u sites, %s: %s of the row's %s (its other sites' blocks do not grow)\n", indent, k,
               rep_group_site(s, b->gs, b->q.sites[first].group), size, rows);
    } else if (grows < x->bytes)
        printf("%sthe growth comes from %u of its %u sites, marked growing: %s of the row's %s (the other sites' blocks do not grow)\n",
               indent, ng, k, size, rows);
}


/* --json, a grouped row: "growing_bytes" (its growing sites' bytes, each site judged alone) and
 * "by_site" (its sites: frame, bytes, blocks, verdict, growing_bytes) */
typedef struct json_arg {
    const cmh_snapshot *s;
    const by_site *b;
} json_arg;

static void json_row_sites(cmh_jw *w, const cmh_site *x, void *arg)
{
    const json_arg *a = arg;
    const by_site *b = a->b;
    if (!b->gs) return;
    uint64_t grows = 0;
    cmh_jw_key(w, "by_site");
    cmh_jw_arr(w);
    for (uint32_t j = 0; j < b->q.nsites; j++) {
        const cmh_site *y = &b->q.sites[j];
        if (y->group >= cmh_sites_count(b->gs) || b->row[y->group] != x->group) continue;
        grows += site_growing_bytes(y);
        const cmh_frame *f = cmh_sites_frame(b->gs, y->group);
        cmh_jw_obj(w);
        cmh_jw_key(w, "site");
        if (f) rep_json_frame(w, a->s, f);
        else cmh_jw_null(w);
        cmh_jw_kuint(w, "bytes", y->bytes);
        cmh_jw_kuint(w, "blocks", y->count);
        cmh_jw_kstr(w, "verdict", cmh_leak_verdict_name(y->verdict));
        cmh_jw_kuint(w, "growing_bytes", site_growing_bytes(y));
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_kuint(w, "growing_bytes", grows);
}

typedef struct outcome {
    uint32_t leaking, stopped, unjudged; /* devices' growing sites, stopped sites; devices whose growth cannot be judged */
} outcome;

static int section(const rep_section *sec, void *arg)
{
    outcome *out = arg;
    const cmh_snapshot *s = sec->s;
    const cmh_sites *g = sec->g;
    int dev = sec->device;
    cmh_leak_report p;
    int rc = cmh_leaks_compute(s, dev, g, g_min_bytes, &p);
    if (rc != CMH_OK) return rc;
    by_site bs;
    by_site_new(s, g, dev, &bs);
    out->leaking += p.leaking;
    out->stopped += p.stopped;
    /* a record that lost part of its history (a flight record cut short, damaged records
     * dropped) cannot be judged clean: nothing live in what was read is no verdict on what was
     * lost (a cut copy read 'nothing is still live' and passed).  Records torn by the death alone
     * are said but do not fail: a kill mid-write or between calls must read the same. */
    int lost = CMH_HISTORY_LOST_BEYOND_DEATH(&s->history_lost), lost_any = CMH_HISTORY_LOST(&s->history_lost);
    out->unjudged += !p.judged || lost;
    uint32_t nheld = p.nvmm_sites;
    char line[512];
    int64_t t0 = rep_trace_start(s, dev);
    if (sec->w) {
        cmh_jw *w = sec->w;
        cmh_jw_obj(w);
        rep_json_base(w, sec, &p.base);
        cmh_jw_nl(w);
        cmh_jw_kuint(w, "live_bytes", p.live_bytes);
        cmh_jw_kuint(w, "live_blocks", p.live_blocks);
        cmh_jw_kuint(w, "live_sites", p.live_sites);
        cmh_jw_kuint(w, "live_before_trace_bytes", p.base.history ? p.live_bytes - p.grew_bytes : 0); /* made before the first entry */
        cmh_jw_kuint(w, "live_before_trace_blocks", p.base.history ? p.live_blocks - p.grew_blocks : 0);
        rep_json_gap(w, &p.base);
        cmh_jw_kuint(w, "leaking_sites", p.leaking);
        cmh_jw_kuint(w, "stopped_sites", p.stopped);
        cmh_jw_kuint(w, "stopped_bytes", p.stopped_bytes);
        cmh_jw_kuint(w, "hidden_sites", p.hidden_sites);
        cmh_jw_kuint(w, "hidden_bytes", p.hidden_bytes);
        cmh_jw_kbool(w, "judged", p.judged);
        /* why not (CMH_UNJUDGED_*): the outcome's words, for a script */
        if (p.judged) cmh_jw_knull(w, "unjudged_reason");
        else cmh_jw_kstr(w, "unjudged_reason", !p.steps.count ? "steps_unknown" : cmh_leak_unjudged_name(p.unjudged_why));
        cmh_jw_key(w, "steps");
        cmh_jw_obj(w);
        if (p.steps.count) cmh_jw_kuint(w, "count", p.steps.count);
        else {
            cmh_jw_key(w, "count");
            cmh_jw_null(w);
        }
        cmh_jw_kstr(w, "source", cmh_leak_steps_source(p.steps.source));
        cmh_jw_kstr(w, "label", p.steps.label);
        if (p.steps.borrowed) { /* placed by time: all of them (this device has none), or the first ones (it was used after them) */
            cmh_jw_kbool(w, "marks_of_other_devices", 1);
            cmh_jw_kuint(w, "marks_placed_by_time", p.steps.borrowed);
        }
        if (p.steps.few_count) { /* marks (annotations) too few to judge by, the pattern used instead */
            cmh_jw_key(w, "set_aside");
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "count", p.steps.few_count);
            cmh_jw_kstr(w, "source", cmh_leak_steps_source(p.steps.few_source));
            cmh_jw_kstr(w, "label", p.steps.few_label);
            cmh_jw_end(w);
        }
        cmh_jw_kuint(w, "period_entries", p.steps.period);
        cmh_jw_kuint(w, "min_steps", CMH_LEAK_MIN_STEPS);
        cmh_jw_kuint(w, "threads", p.threads);
        cmh_jw_kuint(w, "threads_judged", p.threads_judged);
        /* threads racing: the record's pattern is the scheduler's; the threads' own steps */
        cmh_jw_kbool(w, "threads_race", p.steps_raced);
        if (p.steps_raced) {
            cmh_jw_key(w, "thread_steps");
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "threads", p.race_threads);
            cmh_jw_kuint(w, "min", p.race_steps_min);
            cmh_jw_kuint(w, "max", p.race_steps_max);
            cmh_jw_kuint(w, "period_entries_min", p.race_period_min);
            cmh_jw_kuint(w, "period_entries_max", p.race_period_max);
            cmh_jw_end(w);
        }
        cmh_jw_kstr(w, "text", cmh_leak_steps_text(&p, line, sizeof line));
        cmh_jw_end(w);
        cmh_jw_kstr(w, "outcome", cmh_leak_outcome_text(&p, line, sizeof line));
        cmh_jw_key(w, "steps_hint"); /* how to give the steps where none were found (null: none needed) */
        if (cmh_leak_steps_hint(&p, line, sizeof line)) cmh_jw_str(w, line);
        else cmh_jw_null(w);
        cmh_jw_nl(w);
        cmh_jw_key(w, "sites");
        json_arg ja = {s, &bs};
        rep_json_site_hook = bs.gs ? json_row_sites : NULL;
        rep_json_site_hook_arg = &ja;
        rep_json_sites(w, s, g, p.sites, p.nsites, g_top, p.live_bytes, 1);
        rep_json_site_hook = NULL;
        rep_json_sites_left_out(w, "sites", p.nsites, g_top);
        cmh_jw_nl(w);
        held_json(w, s, &p);
        rep_json_driver_errors(w, s); /* (the process's, in every device's object) */
        cmh_jw_end(w);
    } else {
        if (sec->index) putchar('\n');
        if (!p.base.entries && !s->nsegments && !nheld) {
            printf("%s: no allocations recorded%s\n", sec->path, lost_any ? " in what was read (this record lost part of its history: the note under its ending)" : "");
        } else {
            /* a snapshot taken while the process ran (snapshot PID, SIGUSR1): no end to speak of */
            int running = cmh_snapshot_running(s);
            printf("%s, %s: %s in %s still live %s, from %s\n", sec->path, rep_device_name(dev),
                   rep_size((double)p.live_bytes), rep_count(p.live_blocks, "block", "blocks"),
                   running ? "at the snapshot, the process still running" : "at the end", rep_count(p.live_sites, "site", "sites"));
            printf("%s\n%s", cmh_leak_steps_text(&p, line, sizeof line), p.nsites ? "\n" : ""); /* (no table: one blank line) */
            if (p.nsites) {
                printf("  %12s %7s %10s %10s  %-8s %s\n", "bytes", "blocks", "first", "last", "verdict", "site  [owner]");
                for (uint32_t i = 0; i < p.nsites && (int)i < g_top; i++) {
                    const cmh_site *x = &p.sites[i];
                    char tag[80];
                    const char *fw = rep_when(x->first_ns, t0), *lw = rep_when(x->last_ns, t0);
                    printf("  %12s %7" PRIu64 " %*s %*s  %-8s %s%s\n", rep_size((double)x->bytes), x->count, 10 + rep_wide(fw), fw,
                           10 + rep_wide(lw), lw, cmh_leak_site_word(x), rep_site_name(s, g, x),
                           rep_owner_tag(g, x->group, tag, sizeof tag));
                    if (x->verdict == CMH_LEAK_GROWING || x->verdict == CMH_LEAK_RISING || x->verdict == CMH_LEAK_AFTER ||
                        x->verdict == CMH_LEAK_UNJUDGED || cmh_leak_site_stopped(x) || x->threads >= 2)
                        printf("        %s\n", cmh_leak_site_text(x, line, sizeof line));
                    if (cmh_site_made_by_text(s, x, line, sizeof line)) printf("        %s\n", line);
                    rep_print_callers(s, x, "        ");
                    print_row_sites(s, &bs, x, "        ");
                    rep_print_frames(s, g, x->stack, g_frames, "        ");
                }
            }
            if (p.nsites > (uint32_t)g_top) printf("  ... %s (--top)\n", rep_count(p.nsites - (uint32_t)g_top, "more site", "more sites"));
            if (p.hidden_sites)
                printf("  ... %s holding %s hidden (--min-bytes %s)\n", rep_count(p.hidden_sites, "site", "sites"),
                       rep_size((double)p.hidden_bytes), rep_size((double)g_min_bytes));
            if (nheld) held_text(s, g, &p);
            printf("\n%s\n", cmh_leak_outcome_text(&p, line, sizeof line));
            if (lost) printf("note: that is of the history read alone; this record lost part of it (the note under its ending), so it does not pass as clean\n");
            if (cmh_leak_steps_hint(&p, line, sizeof line)) printf("note: %s\n", line);
            rep_gap_notes(&p.base, 0); /* blocks the trace never freed, gone from the snapshot: why no leak */
            rep_notes(&p.base);
            /* a trace that began mid-run (PyTorch's ring, ours dropping its oldest): a site's
             * 'first' may be the first block the trace made, not the site's first */
            if (p.base.history && p.base.entries && p.live_blocks > p.grew_blocks)
                printf("note: %s still live (%s) was already live at the trace's first entry, made before it; a site's "
                       "'first' is its earliest block whose time is known (a PyTorch ring knows none before it)\n",
                       rep_size((double)(p.live_bytes - p.grew_bytes)), rep_count(p.live_blocks - p.grew_blocks, "block", "blocks"));
        }
    }
    /* a double free or a free of a pointer never allocated: once, after the last device */
    if (!sec->w && sec->index + 1 == sec->ndevices) rep_driver_errors_note(s);
    by_site_free(&bs);
    cmh_leak_report_free(&p);
    return CMH_OK;
}

int cmd_leaks(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_leaks, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    outcome out = {0, 0, 0};
    rc = rep_run(&path, 1, g_device, g_json, REP_SITES, section, &out);
    /* a gate that cannot judge does not pass: a growing site fails it (3), else a site that grew
     * over several steps, stopped and still holds its memory (6: it passed, 80 MiB a leak kept
     * over 10 steps of 20 read 'state'), else a device whose growth cannot be judged (too few
     * steps, unknown steps, no history) does (5) */
    return rc ? rc : !g_fail ? 0 : out.leaking ? CLI_ECHECK : out.stopped ? CLI_ESTOPPED : out.unjudged ? CLI_EUNJUDGED : 0;
}
