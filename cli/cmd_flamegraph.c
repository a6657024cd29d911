/*
 * cmd_flamegraph.c - `cumemhist flamegraph SNAP -o live.svg [--at peak|end|oom[:N]|ENTRY]`:
 * live bytes by stack at one moment, as an SVG flamegraph or folded stacks (viz/flame.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/gapwords.h"
#include "cumemhist/pictures.h"
#include "report.h"
#include "cumemhist/reports.h"

static const char *g_out, *g_at, *g_memviz;
static int g_device = -2, g_folded;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write (default: standard output; written atomically)", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
    {"--at", NULL, CLI_STR, &g_at, "WHEN", "peak (default: the allocated peak), end, oom (#1 as `oom` numbers it: a retry that\nsucceeded is none), oom:N (`oom`'s #N), or an entry number", NULL, 0, 0, NULL},
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "device to draw (default: the lowest in the snapshot that holds memory, said on\nstderr when others do; with --at oom or oom:N, the device of the record's first\nout-of-memory error, by time across the devices, as `oom` says it; without\ntimes, the lowest device's, said as a pick: said on stderr)", NULL, 0, 0, NULL},
    {"--folded", NULL, CLI_FLAG, &g_folded, NULL, "folded stacks (\"outer;...;inner bytes\" per line) for flamegraph.pl,\nspeedscope and the like, instead of the SVG: live bytes by stack at --at, machinery left out", NULL, 0, 0, NULL},
    {"--memviz", NULL, CLI_STR, &g_memviz, "memory|segments",
     "instead: the folded lines `python _memory_viz.py memory|segments` feeds flamegraph.pl,\nbyte for byte: every block of the snapshot (the end), its state and frames; all devices\nbut with --device", NULL, 0, 0, NULL},
    /* --skip and --no-default-skip (what is machinery: where each stack starts); not --group-by,
     * which groups report rows: a flamegraph is by stack whatever it said (five values, one picture) */
    {"--skip", NULL, CLI_LIST, &rep_attribution.skips, "REGEX",
     "frames whose function, file or module match are machinery too\n(repeatable; docs/ATTRIBUTION.md has the defaults)", NULL, 0, 0, NULL},
    {"--no-default-skip", NULL, CLI_FLAG, &rep_attribution.no_default, NULL, "only --skip decides what is machinery", NULL, 0, 0,
     NULL},
};

const cli_command cli_cmd_flamegraph = {
    "flamegraph", "[options] SNAPSHOT",
    "Live memory by allocating stack at one moment, as a static SVG flamegraph (a tooltip per\n"
    "frame; your own code's allocation site outlined, machinery grey) or as folded stacks\n"
    "(--folded).  The byte sum is the live bytes at that moment.  --memviz writes instead\n"
    "_memory_viz.py memory|segments's own folded text, byte for byte.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist flamegraph train.cmh --at peak -o peak.svg"};

typedef struct job {
    const cmh_snapshot *s;
    const cmh_sites *g;
    const cmh_live_at *l;
    const char *title;
} job;

static int draw(void *arg, FILE *fp)
{
    job *j = arg;
    if (g_memviz) return cmh_memviz_folded(j->s, g_device == -2 ? CMH_ALL_DEVICES : g_device, !strcmp(g_memviz, "segments"), fp);
    return g_folded ? cmh_flame_folded(j->s, j->g, j->l, fp) : cmh_flame_svg(j->s, j->g, j->l, j->title, fp);
}

/* The OOMs of device dev as --at oom:N numbers them (cmh_live_compute's, `oom`'s: retries that
 * succeeded passed over; a trace whose OOM #1 is only a retried one has that one). */
static uint64_t device_ooms(const cmh_snapshot *s, int dev)
{
    const cmh_trace *tr = cmh_snapshot_trace(s, dev);
    uint32_t nent = tr ? tr->nentries : 0;
    uint64_t freed, k = 0;
    int64_t asked;
    for (uint32_t i = 0; i < nent; i++)
        if (s->entries[tr->first_entry + i].action == CMH_ACT_OOM && !cmh_oom_retried(s, tr, i, &freed)) k++;
    if (!k && tr && cmh_oom_first(s, tr, &asked) >= 0) k = 1;
    return k;
}

static void oom_range(char *buf, size_t cap, uint64_t k)
{
    if (k == 1) snprintf(buf, cap, "oom:1");
    else snprintf(buf, cap, "oom:1 to oom:%" PRIu64, k);
}

/* What the record has where --at oom:N named none: the device's OOMs, and the other devices'
 * with the options that reach them ('device 0 has no out-of-memory error' of a record whose one
 * OOM was on device 1 sent the user looking on device 0). */
static void oom_have(const cmh_snapshot *s, int dev, char *buf, size_t cap)
{
    int32_t all[256];
    int n = cmh_snapshot_devices(s, all, 256);
    if (n > 256) n = 256;
    uint64_t mine = device_ooms(s, dev), total = mine;
    int others = 0;
    for (int i = 0; i < n; i++)
        if (all[i] != dev && device_ooms(s, all[i])) total += device_ooms(s, all[i]), others++;
    char r[48];
    oom_range(r, sizeof r, mine);
    size_t len;
    uint64_t nooms;
    if (!mine && cmh_nohist_ooms(s, dev, &nooms) && nooms) {
        /* enabled=state counted them, with no entry to draw at (it read 'no out-of-memory error') */
        snprintf(buf, cap, "no history (%s): %" PRIu64 " out-of-memory error%s, counted without entries, none to draw at",
                 cmh_no_history_cause(s, dev), nooms, nooms == 1 ? "" : "s");
        return;
    }
    if (!mine) len = (size_t)snprintf(buf, cap, "no out-of-memory error");
    else len = (size_t)snprintf(buf, cap, "%" PRIu64 " out-of-memory error%s (%s)", mine, mine == 1 ? "" : "s", r);
    if (!others || len >= cap) return;
    /* "; the record has 1 out-of-memory error, on device 1 (--device 1 --at oom:1)", or with several
     * places "; the record has 3 out-of-memory errors: 1 on device 0, 2 on device 1 (--device 1 --at
     * oom:1 to oom:2)" */
    int one_place = !mine && others == 1;
    len += (size_t)snprintf(buf + len, cap - len, "; the record has %" PRIu64 " out-of-memory error%s%s", total, total == 1 ? "" : "s",
                            one_place ? ", " : ": ");
    int said = 0;
    for (int i = 0; i < n && len < cap; i++) {
        uint64_t k = device_ooms(s, all[i]);
        if (!k) continue;
        char num[32] = "";
        if (!one_place) snprintf(num, sizeof num, "%" PRIu64 " ", k);
        if (all[i] == dev) len += (size_t)snprintf(buf + len, cap - len, "%s%son %s", said ? ", " : "", num, rep_device_name(dev));
        else {
            oom_range(r, sizeof r, k);
            len += (size_t)snprintf(buf + len, cap - len, "%s%son %s (--device %d --at %s)", said ? ", " : "", num, rep_device_name(all[i]),
                                    (int)all[i], r);
        }
        said++;
    }
}

int cmd_flamegraph(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_flamegraph, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    int at;
    int64_t num = 0;
    char *end;
    if (g_memviz) {
        if (strcmp(g_memviz, "memory") && strcmp(g_memviz, "segments")) {
            cli_error("flamegraph: --memviz %s: want memory or segments", g_memviz);
            return CLI_EUSAGE;
        }
        if ((g_at && strcmp(g_at, "end")) || g_folded) { /* (--at end: what it writes, said or not) */
            cli_error("flamegraph: --memviz writes the snapshot's end as _memory_viz.py does: no --at but end, no --folded");
            return CLI_EUSAGE;
        }
        /* a pickle's frames as the file has them (the script reads them so: no demangling, no
         * clone suffix cut); a recording's resolved as `export` writes them */
        cmh_snapshot s;
        if ((rc = rep_load_view(path, &s))) return rc;
        if (s.source != CMH_SRC_PYTORCH && (rc = cli_symbolize(path, &s))) return rc;
        job j = {&s, NULL, NULL, NULL};
        rc = rep_write(g_out, 0, draw, &j);
        cmh_snapshot_free(&s);
        return rc;
    }
    if (!g_at) g_at = "peak";
    if (!strcmp(g_at, "peak")) at = CMH_AT_PEAK;
    else if (!strcmp(g_at, "end")) at = CMH_AT_END;
    else if (!strcmp(g_at, "oom")) at = CMH_AT_OOM, num = 1;
    else if (!strncmp(g_at, "oom:", 4) && (num = strtoll(g_at + 4, &end, 10)) > 0 && !*end) at = CMH_AT_OOM;
    else if ((num = strtoll(g_at, &end, 10)) >= 0 && *g_at && !*end) at = CMH_AT_ENTRY;
    else {
        cli_error("flamegraph: --at %s: want peak, end, oom, oom:N or an entry number", g_at);
        return CLI_EUSAGE;
    }
    cmh_snapshot s;
    cmh_sites *g;
    if ((rc = rep_load(path, &s, &g))) return rc;
    int32_t dev;
    int oom_dev = -2;
    /* --at oom: the device where the first OOM happened, unless one is named */
    /* (oom:N too: `oom` numbers each device's own, and the first one's device is where to look) */
    if (g_device == -2 && at == CMH_AT_OOM && rep_oom_device(&s, "flamegraph", &oom_dev)) {
        dev = oom_dev;
    } else if (rep_devices(path, &s, g_device == -2 ? -2 : g_device, 1, &dev, 1) < 0) {
        cmh_sites_free(g);
        cmh_snapshot_free(&s);
        return CLI_EUSAGE;
    }
    rep_say_empty_devices("flamegraph", path, &s, g_device, dev);
    /* one device drawn of several holding memory: said, as export -f pprof says which it holds (it
     * draws every device, each sample labelled; this drew the lowest with no word) */
    if (g_device == -2 && oom_dev == -2) {
        int32_t all[256], used[256];
        int na = rep_devices(path, &s, -2, 1, all, 256), nu = 0;
        for (int k = 0; k < na; k++)
            if (rep_device_used(&s, all[k])) used[nu++] = all[k];
        if (nu > 1) {
            char list[512];
            size_t ll = 0;
            list[0] = 0;
            for (int k = 0; k < nu && ll + 16 < sizeof list; k++) ll += (size_t)snprintf(list + ll, sizeof list - ll, "%s%d", k ? ", " : "", (int)used[k]);
            fprintf(stderr,
                    "cumemhist: flamegraph: %s: drew %s, the lowest of the devices the record used (%s); --device N for another "
                    "(export -f pprof holds them all, each sample labelled: -tagfocus=device=N)\n",
                    path, rep_device_name(dev), list);
        }
    }
    cmh_live_at l;
    int crc = cmh_live_compute(&s, dev, at, num, &l);
    if (crc == CMH_EINVAL) { /* a bad value, refused as every other one (exit 2) with the range it has */
        const cmh_trace *tr = cmh_snapshot_trace(&s, dev);
        uint32_t nent = tr ? tr->nentries : 0;
        char have[1024];
        if (at == CMH_AT_OOM) {
            oom_have(&s, dev, have, sizeof have);
        } else if (!nent) snprintf(have, sizeof have, "no trace entries");
        else snprintf(have, sizeof have, "entries 0 to %" PRIu32, nent - 1);
        cli_error("flamegraph: --at %s: %s, %s has %s", g_at, path, rep_device_name(dev), have);
        rc = CLI_EUSAGE;
    } else if (crc != CMH_OK) rc = cli_fail(path, crc);
    else {
        /* the moment as `peak` names it: a record with no history has no peak (drawn: the end), and
         * no moment is 'entry -1' (before the first entry, or a record without entries) */
        int nohist = at == CMH_AT_PEAK && !cmh_trace_has_history(&s, dev);
        char title[600], when[64];
        /* a trace that stops before its snapshot: its end (the snapshot's) and its last entry (the
         * trace's own state) differ by what it never freed; say so on both (the end read 0 B, the
         * last entry 384.1 MiB, with no word) */
        cmh_trace_gap gap;
        char gapw[1024];
        const cmh_trace *gtr = cmh_snapshot_trace(&s, dev);
        int gapped = !nohist && (at == CMH_AT_END || (at == CMH_AT_ENTRY && gtr && l.index == (int64_t)gtr->nentries - 1)) &&
                     cmh_trace_gap_compute(&s, dev, &gap) == CMH_OK &&
                     cmh_gap_stops_text(&gap, s.source == CMH_SRC_PYTORCH, "\n      ", gapw, sizeof gapw);
        if (gapped) fprintf(stderr, "cumemhist: flamegraph: %s, %s: note: %s\n", path, rep_device_name(dev), gapw);
        if (nohist) snprintf(when, sizeof when, "no history: the peak is not known");
        else if (gapped && at == CMH_AT_END) snprintf(when, sizeof when, "the snapshot, after entry %lld", (long long)l.index);
        else if (l.index >= 0) snprintf(when, sizeof when, "entry %lld", (long long)l.index);
        else snprintf(when, sizeof when, "%s", at == CMH_AT_PEAK ? "before the first entry" : "no trace entries");
        snprintf(title, sizeof title, "%s, %s: live memory at %s (%s)", path, rep_device_name(dev),
                 at == CMH_AT_PEAK && !nohist ? "the allocated peak"
                 : at == CMH_AT_END || nohist ? "the end"
                 : at == CMH_AT_OOM           ? "an out-of-memory error"
                                              : "an entry",
                 when);
        if (nohist)
            fprintf(stderr, "cumemhist: flamegraph: %s has no history on %s (%s): the peak is not known; drew the end\n", path,
                    rep_device_name(dev), cmh_no_history_cause(&s, dev));
        /* nothing live there: an empty folded file or a bare picture, said (it exited 0 with no word) */
        if (!l.bytes) fprintf(stderr, "cumemhist: flamegraph: %s, %s: nothing was live at %s (%s): the %s is empty\n", path, rep_device_name(dev),
                              at == CMH_AT_OOM ? "that out-of-memory error" : at == CMH_AT_PEAK && !nohist ? "the allocated peak"
                                                                           : at == CMH_AT_ENTRY        ? "that entry"
                                                                                                       : "the end",
                              when, g_folded ? "folded output" : "flamegraph");
        job j = {&s, g, &l, title};
        rc = rep_write(g_out, 0, draw, &j);
        cmh_live_free(&l);
    }
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    return rc;
}
