/*
 * cmd_diff.c - `cumemhist diff BEFORE AFTER`: what a change did to memory (analyzer/diff.c), and
 * a gate for CI (--fail-if-peak-grows).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

static int g_device = -2, g_top = 10, g_json, g_have_pct;
static double g_fail_pct;
static int g_checked[512], g_nchecked, g_skipped[512], g_nskipped; /* --fail-if-peak-grows: the devices it could check, and not */

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "only device N (default: every device of either snapshot)", NULL, 0, 0, NULL},
    CLI_OPT_TOP(&g_top, "sites to list (default 10)"),
    CLI_OPTS_ATTRIBUTION,
    {"--fail-if-peak-grows", NULL, CLI_PCT, &g_fail_pct, "PCT",
     "exit with status 3 if peak allocated (or peak physical, where cuMemCreate handles make it differ from reserved) grew by more than PCT% on a device; else 5 if a device's peak is not known (no history)",
     NULL, 0, 0, &g_have_pct},
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_diff = {
    "diff", "[options] BEFORE AFTER",
    "What a change did to memory, device by device: peak and end figures (allocated, reserved,\n"
    "requested; physical where cuMemCreate handles make it differ from reserved) of two snapshots\n"
    "side by side, and the allocation sites whose live bytes (at the\n"
    "end, and at the allocated peak) changed most.  --fail-if-peak-grows checks every device: exit\n"
    "status 3 if a peak grew more, else 5 if a device could not be checked (a record with no history:\n"
    "its peak is not known; stderr names the devices checked and not), else 0.\n"
    "Sites are matched by function (the user's frame), then file name, the line only telling apart a\n"
    "function's several sites, paired across lines only by the shift that pairs the most of them\n"
    "(two lines of one binary, the same build id, stay two sites): an edit that moves lines\n"
    "('adam_init (train.c:10 -> 11)'), another checkout directory or OS (/builds/1/p/model.py,\n"
    "C:\\p\\model.py), or a binary rebuilt before `symbolize` (no lines: matched by function name,\n"
    "said on stderr) still match.",
    g_opts, CLI_NOPTS(g_opts), 2, 2, 0, "cumemhist diff main.cmh branch.cmh --fail-if-peak-grows 5"};

typedef struct side {
    const char *path;
    cmh_snapshot s;
    cmh_sites *g;
} side;

/* Whether a side has dev at all: a device absent from one record is not one that held 0 B there
 * (diff said 'after 0 B ... -100.0%' of a device the other record never saw). A record with no
 * allocations at all has every device, empty, as `peak` says ('no allocations recorded'). */
static int has_device(const cmh_snapshot *s, int dev)
{
    int32_t all[256];
    int n = cmh_snapshot_devices(s, all, 256);
    if (!n) return 1;
    for (int i = 0; i < n && i < 256; i++)
        if (all[i] == dev) return 1;
    return 0;
}

/* A site's name in the list: the after side's where both have it (the code as it is now); a
 * site whose line moved (an edit above it) as 'adam_init (train.c:10 -> 11)', or with its file
 * too where that differs ('forward (C:\\proj\\model.py:40 -> /home/u/proj/model.py:41)'). */
static const char *diff_site_name(const side *sd, const cmh_diff_site *x, char *buf, size_t cap)
{
    cmh_site one = {.group = x->group, .stack = x->stack};
    const cmh_sites *g = x->snap == &sd[0].s ? sd[0].g : sd[1].g;
    if (x->match != CMH_DIFF_MOVED && x->match != CMH_DIFF_BY_FUNCTION) return rep_site_name(x->snap, g, &one);
    cmh_site two = {.group = x->group_after, .stack = x->stack_after};
    const char *after = rep_site_name(x->snap_after, sd[1].g, &two);
    if (x->merged_after) { /* the before side, without lines, could not tell them apart */
        snprintf(buf, cap, "%s and %u more site%s of it", after, x->merged_after, x->merged_after == 1 ? "" : "s");
        return buf;
    }
    int by = rep_attribution.group_by;
    const cmh_frame *fb = by == CMH_GROUP_SITE || by == CMH_GROUP_STACK ? cmh_sites_frame(sd[0].g, x->group) : NULL,
                    *fa = fb ? cmh_sites_frame(sd[1].g, x->group_after) : NULL;
    const char *open = strrchr(after, '(');
    if (!fa || fb->line <= 0 || fa->line <= 0 || fb->line == fa->line || !open || open == after || open[-1] != ' ') return after;
    const char *file_b = cmh_str(x->snap, fb->filename), *file_a = cmh_str(x->snap_after, fa->filename);
    int same = !strcmp(file_b, file_a);
    snprintf(buf, cap, "%.*s(%s:%" PRId64 " -> %s%s%" PRId64 ")", (int)(open - after), after, file_b, fb->line, same ? "" : file_a,
             same ? "" : ":", fa->line);
    return buf;
}

static const char *match_word(int m, int in_before)
{
    return m == CMH_DIFF_SAME ? "same" : m == CMH_DIFF_MOVED ? "moved" : m == CMH_DIFF_BY_FUNCTION ? "function"
           : in_before                                                                              ? "before_only"
                                                                                                    : "after_only";
}

/* One device: its figures before and after, the sites that changed most; returns a CMH_* code.
 * *unknown is set when --fail-if-peak-grows cannot be checked (a side's peak is not known). */
static int device_diff(side *sd, int dev, int index, cmh_jw *w, int *grew, int *unknown)
{
    cmh_diff_report d;
    int crc = cmh_diff_compute(&sd[0].s, dev, sd[0].g, &sd[1].s, dev, sd[1].g, &d);
    if (crc != CMH_OK) return crc;
    const cmh_peak_report *pk = d.peak;
    /* a side with no history has no peak: its end state is not one (diff said 'peak allocated
     * 86.7 MiB, -77.4%' of PyTorch's history-off snapshot, where `peak` says the peak is not known,
     * and 'before 0 B ... new' of a device PyTorch listed with no history, holding nothing) */
    int present[2] = {has_device(&sd[0].s, dev), has_device(&sd[1].s, dev)};
    int known[2];
    for (int f = 0; f < 2; f++) known[f] = !present[f] || pk[f].base.history || (!sd[f].s.nentries && !sd[f].s.nsegments);
    int both = known[0] && known[1], in_both = present[0] && present[1];
    /* each row: bytes or a count; history: not known without a history (the peaks, and the
     * errors); physical: shown where the record's cuMemCreate handles count beyond reserved */
    struct {
        const char *what, *key;
        int64_t a, b;
        int bytes, history, physical;
    } all[] = {
        {"peak allocated", "peak_allocated", pk[0].alloc_peak, pk[1].alloc_peak, 1, 1, 0},
        {"peak reserved", "peak_reserved", pk[0].reserved_peak, pk[1].reserved_peak, 1, 1, 0},
        {"peak requested", "peak_requested", pk[0].requested_peak, pk[1].requested_peak, 1, 1, 0},
        {"peak physical", "peak_physical", d.phys[0].peak, d.phys[1].peak, 1, 1, 1},
        {"allocated at the end", "allocated_end", pk[0].alloc_end, pk[1].alloc_end, 1, 0, 0},
        {"reserved at the end", "reserved_end", pk[0].reserved_end, pk[1].reserved_end, 1, 0, 0},
        {"requested at the end", "requested_end", pk[0].requested_end, pk[1].requested_end, 1, 0, 0},
        {"physical at the end", "physical_end", d.phys[0].at_end, d.phys[1].at_end, 1, 0, 1},
        {"segments at the end", "segments_end", d.segments[0], d.segments[1], 0, 0, 0},
        {"out-of-memory errors", "ooms", (int64_t)d.ooms[0], (int64_t)d.ooms[1], 0, 1, 0},
    }, rows[sizeof all / sizeof all[0]];
    int nrows = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!all[i].physical || d.physical) rows[nrows++] = all[i];
#define ROW_NEEDS_HISTORY(i) (rows[i].history)
    /* the gate: peak allocated, and where handles count beyond reserved, the physical peak (a
     * handle leak's memory is in no block: allocated stayed 8 MiB while the device held 80, then 240) */
    if (g_have_pct && both && (d.peak_growth_pct > g_fail_pct || (d.physical && d.phys_growth_pct > g_fail_pct))) *grew = 1;
    if (g_have_pct && !both) *unknown = 1;
    if (g_have_pct && both && g_nchecked < 512) g_checked[g_nchecked++] = dev;
    if (g_have_pct && !both && g_nskipped < 512) g_skipped[g_nskipped++] = dev;
    if (w) {
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "before", sd[0].path);
        cmh_jw_kstr(w, "after", sd[1].path);
        cmh_jw_kint(w, "device", dev);
        cmh_jw_kbool(w, "in_before", present[0]);
        cmh_jw_kbool(w, "in_after", present[1]);
        if (both) cmh_jw_kdouble(w, "peak_growth_pct", d.peak_growth_pct, 3);
        else cmh_jw_key(w, "peak_growth_pct"), cmh_jw_null(w);
        if (both && d.physical) cmh_jw_kdouble(w, "physical_peak_growth_pct", d.phys_growth_pct, 3);
        else cmh_jw_key(w, "physical_peak_growth_pct"), cmh_jw_null(w);
        for (int i = 0; i < nrows; i++) {
            int peak_row = ROW_NEEDS_HISTORY(i); /* the three peaks, and the errors */
            cmh_jw_key(w, rows[i].key);
            cmh_jw_obj(w);
            cmh_jw_key(w, "before");
            if (peak_row && !known[0]) cmh_jw_null(w);
            else cmh_jw_int(w, rows[i].a);
            cmh_jw_key(w, "after");
            if (peak_row && !known[1]) cmh_jw_null(w);
            else cmh_jw_int(w, rows[i].b);
            cmh_jw_key(w, "delta");
            if (peak_row && !both) cmh_jw_null(w);
            else cmh_jw_int(w, rows[i].b - rows[i].a);
            cmh_jw_end(w);
        }
        cmh_jw_nl(w);
        cmh_jw_key(w, "sites");
        cmh_jw_arr(w);
        for (uint32_t i = 0; i < d.nsites && (int)i < g_top; i++) {
            const cmh_diff_site *x = &d.sites[i];
            cmh_jw_nl(w);
            const cmh_sites *sg = x->snap == &sd[0].s ? sd[0].g : sd[1].g;
            cmh_jw_obj(w);
            cmh_jw_kstr(w, "key", x->key);
            const cmh_frame *f = cmh_sites_frame(sg, x->group);
            cmh_jw_key(w, "site");
            if (f) rep_json_frame(w, x->snap, f);
            else cmh_jw_null(w);
            /* how the after side's site was found: its own key and frame where they differ */
            cmh_jw_kstr(w, "match", match_word(x->match, x->snap == &sd[0].s));
            if (x->match == CMH_DIFF_MOVED || x->match == CMH_DIFF_BY_FUNCTION) {
                cmh_jw_kstr(w, "key_after", x->key_after);
                cmh_jw_kint(w, "more_sites_after", x->merged_after);
                const cmh_frame *fa = cmh_sites_frame(sd[1].g, x->group_after);
                cmh_jw_key(w, "site_after");
                if (fa) rep_json_frame(w, x->snap_after, fa);
                else cmh_jw_null(w);
            }
            cmh_jw_kstr(w, "owner", cmh_sites_owner(sg, x->group));
            char oname[256];
            cmh_jw_kstr(w, "owner_name", rep_owner_name(sg, x->group, oname, sizeof oname));
            cmh_jw_key(w, "frames");
            cmh_jw_arr(w);
            const cmh_stack *st = &x->snap->stacks[x->stack];
            for (uint32_t k = 0; k < st->count; k++) rep_json_frame(w, x->snap, &x->snap->frames[x->snap->stack_frames[st->first + k]]);
            cmh_jw_end(w);
            cmh_jw_kint(w, "end_before", x->before_end);
            cmh_jw_kint(w, "end_after", x->after_end);
            cmh_jw_key(w, "peak_before");
            if (known[0]) cmh_jw_int(w, x->before_peak);
            else cmh_jw_null(w);
            cmh_jw_key(w, "peak_after");
            if (known[1]) cmh_jw_int(w, x->after_peak);
            else cmh_jw_null(w);
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        cmh_jw_end(w);
    } else {
        printf("%s%-22s %14s %14s %14s %9s\n", index ? "\n" : "", rep_device_name(dev), "before", "after", "change", "");
        for (int i = 0; i < nrows; i++) {
            if (!in_both || (ROW_NEEDS_HISTORY(i) && !both)) { /* a device one side lacks, or a figure a side does not know */
                const char *col[2];
                for (int f = 0; f < 2; f++)
                    col[f] = !present[f]                          ? "absent"
                             : !known[f] && ROW_NEEDS_HISTORY(i) ? "not known"
                             : rows[i].bytes                     ? rep_size((double)(f ? rows[i].b : rows[i].a))
                                                                  : NULL;
                char num[2][24];
                for (int f = 0; f < 2; f++)
                    if (!col[f]) snprintf(num[f], sizeof num[f], "%" PRId64, f ? rows[i].b : rows[i].a), col[f] = num[f];
                printf("%-22s %14s %14s %14s\n", rows[i].what, col[0], col[1], "-");
                continue;
            }
            /* a figure that was 0 before has no percentage: it is new */
            char pct[16];
            if (rows[i].a) snprintf(pct, sizeof pct, "%+8.1f%%", 100.0 * (double)(rows[i].b - rows[i].a) / (double)rows[i].a);
            else snprintf(pct, sizeof pct, "%9s", rows[i].b ? "new" : "");
            if (rows[i].bytes) { /* signed like the counts and percentages: '+19.0 MiB', not '19.0 MiB' */
                char delta[32];
                int64_t dv = rows[i].b - rows[i].a;
                snprintf(delta, sizeof delta, "%s%s", dv > 0 ? "+" : "", rep_size((double)dv));
                printf("%-22s %14s %14s %14s %s\n", rows[i].what, rep_size((double)rows[i].a), rep_size((double)rows[i].b), delta, pct);
            } else
                printf("%-22s %14" PRId64 " %14" PRId64 " %+14" PRId64 " %s\n", rows[i].what, rows[i].a, rows[i].b,
                       rows[i].b - rows[i].a, pct);
        }
        int shown = 0;
        for (uint32_t i = 0; i < d.nsites && shown < g_top; i++) { /* (by the size of the change: end, then peak) */
            const cmh_diff_site *x = &d.sites[i];
            if (x->after_end == x->before_end && (!both || x->after_peak == x->before_peak)) continue;
            if (!shown++) printf("\nsites that changed most (live bytes at the end / at the allocated peak):\n");
            char name[1600];
            printf("  end %12s -> %-12s  peak %12s -> %-12s  %s\n", rep_size((double)x->before_end), rep_size((double)x->after_end),
                   known[0] ? rep_size((double)x->before_peak) : "-", known[1] ? rep_size((double)x->after_peak) : "-",
                   diff_site_name(sd, x, name, sizeof name));
        }
        if (!shown) printf("\nno site's live bytes changed\n");
        for (int f = 0; f < 2; f++)
            if (!present[f])
                printf("%s%s: no %s in this record\n", f && !present[0] ? "" : "\n", sd[f].path, rep_device_name(dev));
        for (int f = 0; f < 2; f++)
            if (!known[f])
                printf("%s%s: no history on %s (%s): its peak is not known, only the state at the end\n",
                       f && !known[0] ? "" : "\n", sd[f].path, rep_device_name(dev), pk[f].base.nohist_cause);
        if (g_have_pct && both)
            printf("\npeak allocated %s by %.1f%% (limit %.1f%%)\n", d.peak_growth_pct >= 0 ? "grew" : "shrank",
                   d.peak_growth_pct < 0 ? -d.peak_growth_pct : d.peak_growth_pct, g_fail_pct);
        if (g_have_pct && both && d.physical)
            printf("peak physical %s by %.1f%% (limit %.1f%%; cuMemCreate handles, each from its making to its release)\n",
                   d.phys_growth_pct >= 0 ? "grew" : "shrank", d.phys_growth_pct < 0 ? -d.phys_growth_pct : d.phys_growth_pct, g_fail_pct);
    }
    cmh_diff_report_free(&d);
    return CMH_OK;
}

int cmd_diff(int argc, char **argv)
{
    char *paths[2];
    int n, rc = cli_parse(&cli_cmd_diff, argc, argv, paths, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    side sd[2];
    g_nchecked = g_nskipped = 0;
    for (int f = 0; f < 2; f++) {
        sd[f].path = paths[f];
        if ((rc = rep_load(paths[f], &sd[f].s, &sd[f].g))) {
            if (f) cmh_sites_free(sd[0].g), cmh_snapshot_free(&sd[0].s);
            return rc;
        }
        /* the usual edit, rebuild, record again, without `symbolize` first: the before record's
         * frames lost their lines (its binary is not the one recorded), every site read as gone */
        if (cli_symbolize_mismatched)
            fprintf(stderr,
                    "cumemhist: diff: %s: its sites have no lines (the binary was rebuilt after it was recorded): they are matched "
                    "to %s's by function name; to keep the lines, run `cumemhist symbolize %s` before rebuilding\n",
                    paths[f], paths[!f], paths[f]);
    }
    /* a device neither has is an error, as for every command (it printed 'no device 5 in this
     * record' twice and exit 0); one only one has compares against nothing */
    if (g_device >= -1 && !rep_has_device(&sd[0].s, g_device) && !rep_has_device(&sd[1].s, g_device)) {
        for (int f = 0; f < 2; f++) {
            rep_check_device(paths[f], &sd[f].s, g_device);
            cmh_sites_free(sd[f].g);
            cmh_snapshot_free(&sd[f].s);
        }
        return CLI_EUSAGE;
    }
    /* the devices of either (a device only one has compares against nothing) */
    int32_t devs[512], one[256];
    int nd = 0;
    for (int f = 0; f < 2 && rc == 0; f++) {
        int k = g_device >= -1 ? 1 : rep_devices(paths[f], &sd[f].s, -2, 0, one, 256);
        if (g_device >= -1) one[0] = g_device;
        for (int i = 0; i < k; i++) {
            int dup = 0;
            for (int j = 0; j < nd; j++) dup |= devs[j] == one[i];
            if (!dup) devs[nd++] = one[i];
        }
    }
    for (int i = 1; i < nd; i++) /* in order, host (-1) last */
        for (int j = i; j > 0 && (uint32_t)devs[j] < (uint32_t)devs[j - 1]; j--) {
            int32_t t = devs[j];
            devs[j] = devs[j - 1];
            devs[j - 1] = t;
        }
    cmh_jw w;
    cmh_jw_init(&w, stdout);
    if (g_json) cmh_jw_arr(&w);
    int grew = 0, unknown = 0, crc = CMH_OK;
    if (!g_json)
        for (int f = 0; f < 2; f++) rep_print_process(paths[f], &sd[f].s);
    for (int i = 0; i < nd && crc == CMH_OK; i++) crc = device_diff(sd, devs[i], i, g_json ? &w : NULL, &grew, &unknown);
    if (g_json && crc == CMH_OK) {
        cmh_jw_end(&w);
        putchar('\n');
    }
    for (int f = 0; f < 2; f++) cmh_sites_free(sd[f].g), cmh_snapshot_free(&sd[f].s);
    if (crc != CMH_OK) return cli_fail(paths[1], crc);
    rc = cli_finish_stdout(0);
    /* a gate that cannot look fails, rather than pass on the end state taken for a peak; but
     * not as a growth (status 3 read as a regression where device 0's peak fell 37.5%, device 1
     * having no history): a growth on a device it checked is 3, else a device it could not is 5 */
    if (unknown) {
        char list[2][256];
        for (int k = 0; k < 2; k++) {
            int *v = k ? g_checked : g_skipped, n = k ? g_nchecked : g_nskipped;
            size_t at = 0;
            list[k][0] = 0;
            for (int i = 0; i < n && at < sizeof list[k]; i++)
                at += (size_t)snprintf(list[k] + at, sizeof list[k] - at, "%s%s", i ? ", " : "", rep_device_name(v[i]));
        }
        fprintf(stderr, "cumemhist: diff: --fail-if-peak-grows cannot be checked on %s: a peak is not known (a record with no history)",
                list[0]);
        if (g_nchecked)
            fprintf(stderr, "; checked on %s: %s (--device N checks one device)\n", list[1], grew ? "the peak grew" : "no growth over the limit");
        else fputc('\n', stderr);
    }
    return rc ? rc : grew ? CLI_ECHECK : unknown ? CLI_EUNJUDGED : 0;
}
