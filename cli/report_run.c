/*
 * report_run.c - how every report command reads its record and runs over its devices
 * (report.h): the loads (the record whole, in memory_viz's shape, with its sites), the choice
 * of devices and its words when a --device is not there, and rep_run, which loads each file,
 * prints the lines every report opens with (the process, how it ended, what a recovery lost,
 * its children) and calls the command's section once per device, as text or as one JSON list.
 * It lives apart from report.c, which holds what the sections print with (sizes, times, frames,
 * sites, notes), so that either reads as one idea.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cumemhist/recover.h"
#include "cumemhist/symbolize.h"
#include "cumemhist/viz.h"
#include "cumemhist/leakwords.h"
#include "report.h"
#include "cumemhist/merge.h"

/* A merged record as one model (cmh_merged_view): PyTorch's blocks and the other allocations. */
int rep_load_view(const char *path, cmh_snapshot *s) { return rep_load_view_ex(path, s, 0); }

int rep_load_view_ex(const char *path, cmh_snapshot *s, unsigned flags)
{
    int rc = cli_load_ex(path, s, flags);
    if (rc) return rc;
    if (!s->torch) return 0; /* (its ending's count already the record's: cli_load_ex) */
    if ((rc = cmh_merged_view(s)) != CMH_OK) {
        cmh_snapshot_free(s);
        return cli_fail(path, rc);
    }
    return 0;
}

int rep_load(const char *path, cmh_snapshot *s, cmh_sites **sites)
{
    int rc = rep_load_view(path, s);
    return rc ? rc : rep_load_sites(path, s, sites);
}

int rep_load_sites(const char *path, cmh_snapshot *s, cmh_sites **sites)
{
    int rc;
    if ((rc = cli_symbolize(path, s))) {
        cmh_snapshot_free(s);
        return rc;
    }
    cmh_site_opts o = {rep_attribution.group_by, rep_attribution.no_default, rep_attribution.skips.v,
                       rep_attribution.skips.n};
    char err[512];
    int src;
    if (!(*sites = cmh_sites_new(s, &o, &src, err, sizeof err))) {
        cli_error("%s", err);
        cmh_snapshot_free(s);
        return src == CMH_EINVAL ? CLI_EUSAGE : CLI_ENOMEM;
    }
    return 0;
}

int rep_name_failed_calls(const char *path, cmh_snapshot *s)
{
    /* summary, owners and stats read no sites and loaded no libdw: their note named a failed
     * call's site "main (badfree)" where frag, oom and leaks said badfree.c:67.  Only a record
     * with failed calls pays for it, and only where a frame has something to gain */
    int rc;
    if (!s->ndrv_errors || rep_raw_frames || !cmh_symbolize_wanted(s, CMH_SYM_ALL)) return 0;
    if ((rc = cli_symbolize(path, s))) cmh_snapshot_free(s);
    return rc;
}

int rep_load_shaped(const char *path, cmh_snapshot *s) { return rep_load_shaped_ex(path, s, 0); }

int rep_load_shaped_ex(const char *path, cmh_snapshot *s, unsigned flags)
{
    int rc = rep_load_view_ex(path, s, flags);
    if (rc || s->source == CMH_SRC_PYTORCH) return rc;
    cmh_snapshot shaped;
    int crc = cmh_memviz_shape(s, &shaped, NULL);
    cmh_snapshot_free(s);
    if (crc != CMH_OK) return cli_fail(path, crc);
    *s = shaped;
    return 0;
}

void rep_say_memviz_numbering(const cmh_snapshot *s, const char *cmd, int device, const char *what)
{
    if (s->source == CMH_SRC_PYTORCH) return; /* written as it was read: the same entries */
    /* export: the page's own rows, which fold a free's two entries into one, and the text ctrl-f
     * finds the peak by (a row number was no help: the page shows none, and it was the pickle's) */
    int page = what == NULL;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        int64_t total = 0;
        if (tr->device < 0 || !tr->nentries || (device != -2 && tr->device != device)) continue;
        cmh_memviz_index(s, tr->device, 0, &total);
        int64_t rows = total;
        if (page && cmh_memviz_page_event(s, tr->device, -1, &rows, NULL, 0) == -2) continue;
        if (total == (int64_t)tr->nentries && rows == total) continue;
        cmh_peak_report p;
        if (cmh_peak_totals(s, tr->device, &p) != CMH_OK) continue;
        char peak[256] = "";
        if (page) {
            int64_t at = -1;
            char label[96] = "";
            if (p.alloc_index >= 0)
                at = cmh_memviz_page_event(s, tr->device, p.alloc_index, NULL, label, sizeof label);
            if (at >= 0 && *label)
                snprintf(peak, sizeof peak, "; the allocated peak, entry %lld, is the row `%s` (ctrl-f)",
                         (long long)p.alloc_index, label);
            cmh_peak_report_free(&p);
            fprintf(stderr,
                    "cumemhist: %s: device %d: %u entr%s the pickle's %lld, memory_viz's %lld row%s%s; "
                    "docs/CLI.md \"Entry numbers\"\n",
                    cmd, tr->device, tr->nentries, tr->nentries == 1 ? "y is" : "ies are", (long long)total, (long long)rows,
                    rows == 1 ? "" : "s", peak);
            continue;
        }
        if (p.alloc_index >= 0)
            snprintf(peak, sizeof peak, " (the allocated peak, entry %lld, is its %lld)", (long long)p.alloc_index,
                     (long long)cmh_memviz_index(s, tr->device, p.alloc_index, NULL));
        cmh_peak_report_free(&p);
        /* one short line, every run of a recorder record: why the counts differ is docs/CLI.md's
         * (an ~400-character paragraph here on every export was noise); -q leaves it out */
        fprintf(stderr, "cumemhist: %s: device %d: %s %lld entries for the record's %u%s; docs/CLI.md \"Entry numbers\"\n", cmd,
                tr->device, what, (long long)total, tr->nentries, peak);
    }
}

int rep_load_shaped_own(const char *path, cmh_snapshot *s) { return rep_load_shaped_own_said(path, s, NULL, -2, NULL); }

int rep_load_shaped_own_said(const char *path, cmh_snapshot *s, const char *cmd, int device, const char *what)
{
    return rep_load_shaped_own_with(path, s, cmd, device, what, NULL, NULL);
}

int rep_load_shaped_own_with(const char *path, cmh_snapshot *s, const char *cmd, int device, const char *what,
                             void (*before)(const cmh_snapshot *, void *), void *arg)
{
    int rc = rep_load_view_ex(path, s, 0);
    if (!rc && before) before(s, arg);
    if (rc || s->source == CMH_SRC_PYTORCH) return rc;
    if (cmd) rep_say_memviz_numbering(s, cmd, device, what);
    /* its frames as the export writes them (file and line from the binaries' DWARF, C++ names
     * demangled), where trace of a recorder's record printed them as recorded ('filename': 'vmm',
     * 'line': 0) and trace of its export said vmm.c:9; only where there is something to do, so a
     * record whose frames need nothing (all have lines, or their binaries are gone) loads no libdw */
    if (!rep_raw_frames && cmh_symbolize_wanted(s, CMH_SYM_LINES) && (rc = cli_symbolize(path, s))) {
        cmh_snapshot_free(s);
        return rc;
    }
    cmh_symbolize_result sr; /* no line to give: the names alone, as the export demangles them (no libdw) */
    if (!rep_raw_frames && cmh_symbolize_wanted(s, CMH_SYM_DEMANGLE) && (rc = cmh_symbolize_offline(s, CMH_SYM_DEMANGLE, &sr))) {
        cmh_snapshot_free(s);
        return cli_fail(path, rc);
    }
    const char *g = getenv("CUMEMHIST_GENERIC_LOAD"); /* the copy, for loadpaths_test to hold against */
    if (!(g && *g && strcmp(g, "0"))) {
        cmh_snapshot shaped;
        int moved = 0, crc = cmh_memviz_shape_move(s, &shaped, &moved);
        if (crc != CMH_OK) {
            if (!moved) cmh_snapshot_free(s);
            return cli_fail(path, crc);
        }
        if (moved) {
            *s = shaped;
            return 0;
        }
    }
    cmh_snapshot shaped;
    int crc = cmh_memviz_shape(s, &shaped, NULL);
    cmh_snapshot_free(s);
    if (crc != CMH_OK) return cli_fail(path, crc);
    *s = shaped;
    return 0;
}

int rep_devices(const char *path, const cmh_snapshot *s, int want, int no_host, int32_t *devs, int cap)
{
    int32_t all[256];
    int n = cmh_snapshot_devices(s, all, 256);
    if (n > 256) n = 256;
    if (!n) { /* an empty snapshot: any device it lists is as empty as another */
        char have[512];
        size_t len = 0;
        int32_t listed[256];
        int nl = cmh_snapshot_listed_devices(s, listed, 256); /* PyTorch lists every device it saw, empty or not */
        int found = want < -1 || !nl; /* (a snapshot listing no device: any) */
        have[0] = 0;
        for (int k = 0; k < nl && k < 256; k++) {
            found |= listed[k] == want;
            if (len + 16 < sizeof have) len += (size_t)snprintf(have + len, sizeof have - len, "%s%d", k ? ", " : "", listed[k]);
        }
        if (!found) { /* ('summary --device 7' of a 4-device pickle printed device 7's empty table, exit 0) */
            cli_error("%s: no device %d in this snapshot (it has device%s %s, each empty)", path, want, nl == 1 ? "" : "s", have);
            return -1;
        }
        devs[0] = want >= -1 ? want : 0;
        return 1;
    }
    if (want >= -1) {
        for (int k = 0; k < n; k++)
            if (all[k] == want) {
                devs[0] = want;
                return 1;
            }
        char have[512];
        size_t len = 0;
        have[0] = 0;
        for (int k = 0; k < n && len + 16 < sizeof have; k++)
            len += all[k] == -1 ? (size_t)snprintf(have + len, sizeof have - len, "%s-1 (pinned host)", k ? ", " : "")
                                : (size_t)snprintf(have + len, sizeof have - len, "%s%d", k ? ", " : "", all[k]);
        /* "(it has 0)" read as "it has no device": the numbers named as such */
        cli_error("%s: no device %d in this snapshot (it has device%s %s)", path, want, n == 1 ? "" : "s", have);
        return -1;
    }
    int k = 0;
    if (cap == 1) /* one device asked for: the lowest that holds memory, not one PyTorch merely lists */
        for (int i = 0; i < n && !k; i++)
            if (!(no_host && all[i] == -1) && rep_device_used(s, all[i])) devs[k++] = all[i];
    for (int i = 0; i < n && k < cap; i++)
        if (!(no_host && all[i] == -1)) devs[k++] = all[i];
    if (!k) devs[k++] = all[0]; /* only host memory: that, rather than nothing */
    return k;
}

void rep_say_empty_devices(const char *cmd, const char *path, const cmh_snapshot *s, int want, int shown)
{
    char buf[600];
    if (want != -2 || !cmh_devices_empty_text(s, buf, sizeof buf)) return;
    char tail[80] = "";
    if (shown >= -1) snprintf(tail, sizeof tail, " (device %d's %s; the others read the same)", shown, cmd ? "shown" : "report below");
    if (!cmd) printf("%s: %s%s\n", path, buf, tail);
    else fprintf(stderr, "cumemhist: %s%s%s: %s%s\n", cmd, *cmd ? ": " : "", path, buf, tail);
}

int rep_device_used(const cmh_snapshot *s, int device)
{
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].device == device) return 1;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        if (s->traces[t].device != device) continue;
        for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
            uint8_t a = s->entries[s->traces[t].first_entry + i].action;
            if (a != CMH_ACT_SNAPSHOT && a != CMH_ACT_MARK) return 1;
        }
    }
    return 0;
}

int rep_oom_device(const cmh_snapshot *s, const char *cmd, int *device)
{
    int64_t index, time_ns;
    int got = cmh_first_oom(s, device, &index, &time_ns);
    if (!got) return 0;
    int32_t devs[8];
    if (cmh_snapshot_devices(s, devs, 8) > 1) {
        /* which OOM: oom's number for it on its device, and where (each device numbers its own
         * from #1, and oom calls this one the record's first) */
        cmh_record_oom *v;
        uint32_t nv, number = 0;
        if (cmh_record_ooms(s, &v, &nv) == CMH_OK) {
            for (uint32_t i = 0; i < nv && !number; i++)
                if (v[i].device == *device && v[i].index == index) number = v[i].number;
            free(v);
        }
        char which[96] = "";
        if (number) snprintf(which, sizeof which, ": its #%u at %s", number, rep_at(index, time_ns, rep_trace_start(s, *device)));
        if (got == 2) /* a pick, said as one: without times no OOM is the record's first */
            fprintf(stderr, "cumemhist: %s: device %d, the lowest with an out-of-memory error (no times: which device's OOM came first is not known)%s (--device N for another)\n",
                    cmd, *device, which);
        else
            fprintf(stderr, "cumemhist: %s: device %d, where the record's first out-of-memory error happened%s (--device N for another)\n",
                    cmd, *device, which);
    }
    return 1;
}

int rep_check_device(const char *path, const cmh_snapshot *s, int want)
{
    int32_t dev;
    return want == -2 || rep_devices(path, s, want, 0, &dev, 1) >= 0 ? 0 : CLI_EUSAGE;
}

int rep_has_device(const cmh_snapshot *s, int device)
{
    int32_t all[256];
    int n = cmh_snapshot_devices(s, all, 256);
    if (!n) return 1; /* an empty snapshot: any device is as empty as another (rep_devices) */
    for (int k = 0; k < n && k < 256; k++)
        if (all[k] == device) return 1;
    return 0;
}

int rep_no_pinned(const char *cmd, const char *why)
{
    cli_error("%s: --device -1 (pinned host memory): %s", cmd, why);
    return CLI_EUSAGE;
}

const char *rep_device_name(int device)
{
    static char ring[4][32];
    static int k;
    char *b = ring[k++ & 3];
    if (device == -1) snprintf(b, 32, "pinned host memory");
    else snprintf(b, 32, "device %d", device);
    return b;
}

const char *rep_count(uint64_t n, const char *one, const char *many)
{
    static char ring[8][64];
    static int k;
    char *b = ring[k++ & 7];
    snprintf(b, 64, "%llu %s", (unsigned long long)n, n == 1 ? one : many);
    return b;
}

/* Is the record at path child c's (its pid)?  Its ending into ending ("" when it says none). */
static int child_at(const char *path, const cmh_forked_child *c, char *ending, size_t ecap)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    cmh_snapshot k;
    char err[512];
    if (cmh_snapshot_load_ex(path, &k, CMH_LOAD_SEGMENTS, err, sizeof err) != CMH_OK) return 0;
    int mine = k.pid == c->pid;
    if (mine) snprintf(ending, ecap, "%s", k.ending ? cmh_str(&k, k.ending) : "");
    cmh_snapshot_free(&k);
    return mine;
}

/* Is the flight record at path child c's?  How it ended into ending, as `recover` says it
 * (cmh_flight_ending), or that it still runs. */
static int child_flight_at(const char *path, const cmh_forked_child *c, char *ending, size_t ecap)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    cmh_flight_identity id;
    char err[512];
    if (cmh_flight_identify(path, &id, err, sizeof err) != CMH_OK || id.pid != c->pid) return 0;
    int run = cli_flight_process(&id);
    if (run == CLI_PROC_ALIVE || run == CLI_PROC_ALIVE_UNSURE) snprintf(ending, ecap, "still runs");
    else cmh_flight_ending(&id, id.state, id.end_signal, 0, 0, ending, ecap);
    return 1;
}

/* Child c's file ending in suffix ("" its snapshot, ".flight" its flight record), in the order
 * rep_child_record says; at: whether a file is c's. */
static int child_find(const char *parent, const cmh_forked_child *c, const char *suffix,
                      int (*at)(const char *, const cmh_forked_child *, char *, size_t), char *found, size_t cap, char *ending, size_t ecap)
{
    found[0] = ending[0] = 0;
    char cand[4400];
    if (!parent || !strcmp(parent, "-")) {
        if (!c->path) return 0;
        snprintf(cand, sizeof cand, "%s%s", c->path, suffix);
        return at(cand, c, ending, ecap) ? snprintf(found, cap, "%s", cand), 1 : 0;
    }
    /* beside the parent's record first (the two moved together), then where it was written */
    const char *slash = strrchr(parent, '/');
    int dir = slash ? (int)(slash - parent + 1) : 0;
    if (c->path) {
        const char *base = strrchr(c->path, '/');
        snprintf(cand, sizeof cand, "%.*s%s%s", dir, parent, base ? base + 1 : c->path, suffix);
        if (at(cand, c, ending, ecap)) return snprintf(found, cap, "%s", cand), 1;
        snprintf(cand, sizeof cand, "%s%s", c->path, suffix);
        if (at(cand, c, ending, ecap)) return snprintf(found, cap, "%s", cand), 1;
    }
    /* NAME.PID.cmh beside NAME.cmh: a fixed -o path's (a record of no path, or one moved and renamed together) */
    const char *ext = cmh_path_ext(parent);
    snprintf(cand, sizeof cand, "%.*s.%lld%s%s", (int)(ext - parent), parent, (long long)c->pid, ext, suffix);
    if (at(cand, c, ending, ecap)) return snprintf(found, cap, "%s", cand), 1;
    return 0;
}

int rep_child_record(const char *parent, const cmh_forked_child *c, char *found, size_t cap, char *ending, size_t ecap)
{
    return child_find(parent, c, "", child_at, found, cap, ending, ecap);
}

int rep_child_flight(const char *parent, const cmh_forked_child *c, char *found, size_t cap, char *ending, size_t ecap)
{
    return child_find(parent, c, ".flight", child_flight_at, found, cap, ending, ecap);
}

int rep_child_text(const char *parent, const cmh_forked_child *c, char *text, size_t cap)
{
    char found[4400], ending[1024];
    if (rep_child_record(parent, c, found, sizeof found, ending, sizeof ending)) {
        snprintf(text, cap, "forked child %lld: its record %s%s%s", (long long)c->pid, found, *ending ? "; it " : "", ending);
        return 1;
    }
    /* a child killed under a plain LD_PRELOAD left its flight record, which no report reads
     * (it said "left no record here" beside it) */
    if (rep_child_flight(parent, c, found, sizeof found, ending, sizeof ending)) {
        if (!strcmp(ending, "still runs"))
            snprintf(text, cap, "forked child %lld: still runs, its flight record %s (`cumemhist snapshot %lld` takes its snapshot now, "
                     "`cumemhist top %lld` watches it)", (long long)c->pid, found, (long long)c->pid, (long long)c->pid);
        else
            snprintf(text, cap, "forked child %lld: no snapshot, its flight record %s (`cumemhist recover %s` writes it); it %s", (long long)c->pid,
                     found, found, ending);
        return 1;
    }
    snprintf(text, cap, "forked child %lld: left no record here (no CUDA use, or moved elsewhere)", (long long)c->pid);
    return 0;
}

/* The children a record names, each said where its record is (it was said on `record`'s
 * stderr only): "forked child 803: its record app.803.cmh; it was killed, ...", the
 * first REP_CHILDREN_SHOWN of them, then those with no record found in one line. */
#define REP_CHILDREN_SHOWN 8
static void print_children(const char *path, const cmh_snapshot *s)
{
    uint32_t shown = 0, lost = 0, more = 0;
    char text[10000], pids[160] = "";
    size_t pl = 0;
    for (uint32_t i = 0; i < s->nchildren; i++) {
        const cmh_forked_child *c = &s->children[i];
        if (shown >= REP_CHILDREN_SHOWN) {
            more++;
            continue;
        }
        if (rep_child_text(path, c, text, sizeof text)) {
            printf("%s: %s\n", path, text);
            shown++;
        } else {
            if (lost++ < 8 && pl < sizeof pids) pl += (size_t)snprintf(pids + pl, sizeof pids - pl, "%s%lld", lost > 1 ? ", " : "", (long long)c->pid);
        }
    }
    if (lost)
        printf("%s: %s no record here (no CUDA use, or moved elsewhere): pid%s %s%s\n", path,
               rep_count(lost, "forked child left", "forked children left"), lost > 1 ? "s" : "", pids, lost > 8 ? ", ..." : "");
    if (more || s->children_more)
        printf("%s: %s not looked up here (--json lists those it names)\n", path,
               rep_count((uint64_t)more + s->children_more, "more forked child", "more forked children"));
}

void rep_json_children(cmh_jw *w, const char *path, const cmh_snapshot *s)
{
    cmh_jw_key(w, "forked_children");
    cmh_jw_arr(w);
    char found[4400], ending[1024];
    for (uint32_t i = 0; i < s->nchildren; i++) {
        const cmh_forked_child *c = &s->children[i];
        int got = i < 64 && rep_child_record(path, c, found, sizeof found, ending, sizeof ending); /* (the first 64 looked up) */
        cmh_jw_obj(w);
        cmh_jw_kint(w, "pid", c->pid);
        if (c->path) cmh_jw_kstr(w, "written_to", c->path);
        else cmh_jw_knull(w, "written_to");
        if (got) cmh_jw_kstr(w, "record", found);
        else cmh_jw_knull(w, "record");
        /* no snapshot: the flight record it left, which `recover` turns into one */
        int flight = !got && i < 64 && rep_child_flight(path, c, found, sizeof found, ending, sizeof ending);
        if (flight) cmh_jw_kstr(w, "flight_record", found);
        else cmh_jw_knull(w, "flight_record");
        if ((got || flight) && *ending) cmh_jw_kstr(w, "ending", ending);
        else cmh_jw_knull(w, "ending");
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_kuint(w, "forked_children_more", s->children_more); /* forked past those the record keeps */
}

/* what a recovery could not read of the record: under its ending, before any figure */
static void print_history_lost(const char *path, const cmh_snapshot *s)
{
    if (!CMH_HISTORY_LOST(&s->history_lost)) return;
    printf("%s: ", path);
    cmh_history_lost_write(stdout, s);
}

void rep_print_process(const char *path, const cmh_snapshot *s)
{
    if (!s->pid && !s->cmdline) {
        print_history_lost(path, s);
        return;
    }
    printf("%s: ", path);
    if (s->pid) printf("pid %lld", (long long)s->pid);
    if (s->forked_from > 0) printf(" (forked from pid %lld)", (long long)s->forked_from);
    if (s->rank >= 0 && s->world_size >= 0) printf(" (rank %d of %d)", (int)s->rank, (int)s->world_size);
    else if (s->rank >= 0) printf(" (rank %d)", (int)s->rank);
    if (s->hostname && *cmh_str(s, s->hostname)) printf(" on %s", cmh_str(s, s->hostname));
    if (s->cmdline && *cmh_str(s, s->cmdline)) printf("%s%.300s", s->pid ? ", " : "", cmh_str(s, s->cmdline));
    printf("\n");
    if (s->ending) printf("%s: the process %s\n", path, cmh_str(s, s->ending));
    print_history_lost(path, s);
    print_children(path, s);
}

void rep_json_history_lost(cmh_jw *w, const cmh_snapshot *s)
{
    const cmh_history_lost *h = &s->history_lost;
    char text[1024];
    cmh_jw_key(w, "history_lost");
    if (!cmh_history_lost_text(s, text, sizeof text)) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kuint(w, "cut_bytes", h->cut_bytes);
    if (h->cut_bytes) cmh_jw_kuint(w, "file_bytes", h->file_bytes);
    else cmh_jw_knull(w, "file_bytes");
    if (h->cut_bytes && h->read_to) cmh_jw_kuint(w, "read_to", h->read_to);
    else cmh_jw_knull(w, "read_to");
    cmh_jw_kuint(w, "torn_records", h->torn);
    cmh_jw_kuint(w, "damaged_records", h->damaged);
    cmh_jw_kuint(w, "refused_records", h->refused);
    cmh_jw_kstr(w, "text", text);
    cmh_jw_end(w);
}

void rep_json_process(cmh_jw *w, const cmh_snapshot *s)
{
    rep_json_history_lost(w, s); /* (beside the process, in every device's object) */
    cmh_jw_key(w, "process");
    if (!s->pid && !s->cmdline) {
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kint(w, "pid", s->pid);
    cmh_jw_kstr(w, "host", cmh_str(s, s->hostname));
    cmh_jw_kstr(w, "cmdline", cmh_str(s, s->cmdline));
    if (s->ending) cmh_jw_kstr(w, "ending", cmh_str(s, s->ending));
    if (s->rank >= 0) cmh_jw_kint(w, "rank", s->rank);
    if (s->local_rank >= 0) cmh_jw_kint(w, "local_rank", s->local_rank);
    if (s->world_size >= 0) cmh_jw_kint(w, "world_size", s->world_size);
    if (s->forked_from > 0) cmh_jw_kint(w, "forked_from", s->forked_from);
    if (s->producer[0]) cmh_jw_kstr(w, "producer", s->producer);
    cmh_jw_end(w);
}

/* The record's process, each of its facts the part does not say itself: t's strings are its
 * own, so each string interned there. */
static int give_process(cmh_snapshot *t, const cmh_snapshot *s)
{
    const uint32_t from[] = {s->hostname, s->cmdline, s->ending};
    uint32_t *to[] = {&t->hostname, &t->cmdline, &t->ending};
    for (int i = 0; i < 3; i++) {
        if (!from[i] || *to[i]) continue;
        const char *v = cmh_str(s, from[i]);
        if (cmh_strtab_intern(&t->strings, v, strlen(v), to[i])) return CMH_ENOMEM;
    }
    if (!t->pid) t->pid = s->pid;
    if (!t->forked_from) t->forked_from = s->forked_from;
    if (t->rank < 0) t->rank = s->rank;
    if (t->local_rank < 0) t->local_rank = s->local_rank;
    if (t->world_size < 0) t->world_size = s->world_size;
    return CMH_OK;
}

/* A merged record's PyTorch part, for the reports that are PyTorch's own (REP_TORCH_PART), into
 * s, and the rest of the record into rest (*has_rest 1; its torch pointer left NULL: the caller
 * points it at s while the sections run); any other snapshot into s as the flags say. */
static int load_torch_part(const char *path, cmh_snapshot *s, int flags, cmh_snapshot *rest, int *has_rest)
{
    *has_rest = 0;
    int rc = cli_load(path, s);
    if (rc) return rc;
    if (s->torch) {
        cmh_snapshot *t = s->torch;
        s->torch = NULL;
        /* the part is the record's process's: PyTorch's snapshot says no pid or command line,
         * so without the record's the command's JSON said "process": null where every other
         * command's says it.  A snapshot of a running process: its PyTorch part is of that moment
         * too (summary's figures are as of it, cmh_snapshot_running); the count stays the
         * record's, as every command says it (cli_load_ex), the part's own said apart by the
         * command (rep_section) */
        int crc = give_process(t, s);
        *rest = *s;
        *s = *t;
        free(t);
        if (crc != CMH_OK) {
            cmh_snapshot_free(s);
            cmh_snapshot_free(rest);
            return cli_fail(path, crc);
        }
        *has_rest = 1;
        return 0;
    }
    if (!(flags & REP_SHAPED) || s->source == CMH_SRC_PYTORCH) return 0;
    cmh_snapshot shaped;
    int crc = cmh_memviz_shape(s, &shaped, NULL);
    cmh_snapshot_free(s);
    if (crc != CMH_OK) return cli_fail(path, crc);
    *s = shaped;
    return 0;
}

/* REP_OOM_ORDER: devs[0..n) reordered, stably, by where each device's first OOM comes in the
 * record's order (cmh_record_ooms); a device without one keeps its place after them.  As they
 * were when there is no room for the list. */
static void oom_order(const cmh_snapshot *s, int32_t *devs, int n)
{
    cmh_record_oom *v;
    uint32_t nv;
    if (cmh_record_ooms(s, &v, &nv) != CMH_OK) return;
    int32_t out[256];
    int k = 0;
    for (uint32_t i = 0; i < nv; i++) { /* each device at its first OOM's place */
        int seen = 0, listed = 0;
        for (int j = 0; j < k && !seen; j++) seen = out[j] == v[i].device;
        for (int j = 0; j < n && !listed; j++) listed = devs[j] == v[i].device;
        if (!seen && listed) out[k++] = v[i].device;
    }
    for (int j = 0; j < n; j++) { /* then the others, in order */
        int seen = 0;
        for (int i = 0; i < k && !seen; i++) seen = out[i] == devs[j];
        if (!seen) out[k++] = devs[j];
    }
    memcpy(devs, out, (size_t)n * sizeof *devs);
    free(v);
}

int rep_run(char **paths, int npaths, int want, int json, int flags, rep_section_fn fn, void *arg)
{
    cmh_jw w;
    cmh_jw_init(&w, stdout);
    int index = 0, opened = 0; /* the JSON list opens once a snapshot loads: a bad file prints no half document */
    for (int f = 0; f < npaths; f++) {
        cmh_snapshot s, rest;
        cmh_sites *g = NULL;
        int has_rest = 0;
        int rc = (flags & REP_SITES)    ? rep_load(paths[f], &s, &g)
                 : (flags & REP_TORCH_PART) ? load_torch_part(paths[f], &s, flags, &rest, &has_rest)
                 : (flags & REP_SHAPED) ? rep_load_shaped(paths[f], &s)
                                        : cli_load(paths[f], &s);
        if (!rc && !(flags & REP_SITES)) rc = rep_name_failed_calls(paths[f], &s); /* (rep_load symbolized it) */
        if (rc && has_rest) cmh_snapshot_free(&rest); /* (s freed on the error) */
        if (rc) return rc;
        if (has_rest) rest.torch = &s; /* (the whole record again, for as long as the sections run) */
        int32_t devs[256];
        int nd = rep_devices(paths[f], &s, want, (flags & REP_NO_HOST) != 0, devs, 256);
        if (nd < 0) { /* before the list opens: a refused --device leaves no '[' on stdout */
            cmh_sites_free(g);
            if (has_rest) rest.torch = NULL, cmh_snapshot_free(&rest);
            cmh_snapshot_free(&s);
            return CLI_EUSAGE;
        }
        if ((flags & REP_OOM_ORDER) && !json && want == -2 && nd > 1) oom_order(&s, devs, nd < 256 ? nd : 256);
        if (json && !opened++) cmh_jw_arr(&w);
        if (!json && !(flags & REP_PYTORCH_TEXT)) rep_print_process(paths[f], &s);
        /* the one device shown for a snapshot listing several, each empty, said so (it read as a
         * 1-device snapshot); PyTorch's layouts have no line for it: stderr */
        if (!json) rep_say_empty_devices((flags & REP_PYTORCH_TEXT) ? "" : NULL, paths[f], &s, want, devs[0]);
        int crc = CMH_OK;
        for (int k = 0; k < nd && crc == CMH_OK; k++) {
            rep_section sec = {paths[f], &s, g, devs[k], index++, nd, json ? &w : NULL, has_rest ? &rest : NULL, has_rest};
            if (json) cmh_jw_nl(&w);
            crc = fn(&sec, arg);
        }
        cmh_sites_free(g);
        if (has_rest) rest.torch = NULL, cmh_snapshot_free(&rest);
        cmh_snapshot_free(&s);
        if (crc != CMH_OK) return crc == CMH_EIO ? cli_finish_stdout(CLI_EFILE) : cli_fail(paths[f], crc);
    }
    if (json) {
        if (!opened) cmh_jw_arr(&w);
        cmh_jw_end(&w);
        putchar('\n');
    }
    return cli_finish_stdout(0);
}
