/*
 * cmd_report.c - `cumemhist report SNAP -o report.html`: the one-file HTML report (viz/report.c).
 */
#include <stdio.h>
#include <string.h>

#include "cumemhist/pictures.h"
#include "report.h"

static const char *g_out;
static int g_device = -2;
static int g_static;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write the page (default: standard output; written atomically)", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
    CLI_OPT_DEVICE_ALL(&g_device),
    {"--static", NULL, CLI_FLAG, &g_static, NULL, "leave the interactive timeline out: a page with no script at all", NULL, 0, 0, NULL},
    CLI_OPTS_ATTRIBUTION,
};

const cli_command cli_cmd_report = {
    "report", "[options] SNAPSHOT",
    "Write one self-contained HTML page (inline SVG, CSS and script; no external request: it\n"
    "opens from disk anywhere): for every device the timeline, the key figures, who held the\n"
    "memory at the peak and at the end, the sites live at the peak, the leak candidates with\n"
    "their growth over the record, the segments' fragmentation, each OOM with its verdict,\n"
    "kernels when recorded, and at the end the interactive timeline of `cumemhist view`\n"
    "(--static leaves it out, and with it the only script).  Reads cumemhist snapshots and\n"
    "PyTorch pickles.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist report train.cmh -o report.html"};

typedef struct job {
    const cmh_snapshot *s, *raw;
    const cmh_sites *g;
    const int32_t *devs;
    int nd;
    const char *title;
    cmh_report_child kids[8];
    uint32_t nkids;
} job;

static int write_page(void *arg, FILE *fp)
{
    job *j = arg;
    return cmh_report_html_ex(j->s, j->raw, j->g, j->devs, j->nd, j->title, j->kids, j->nkids, !g_static, fp);
}

int cmd_report(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_report, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    cmh_snapshot s, raw;
    cmh_sites *g;
    /* a merged record is read twice: as one model for the reports, and as recorded (PyTorch's
     * part apart) for owners; any other once (rep_load_view would load it just as cli_load did) */
    if ((rc = cli_load(path, &raw))) return rc;
    int have_raw = raw.torch != NULL;
    if (!have_raw) {
        s = raw;
        memset(&raw, 0, sizeof raw);
        rc = rep_load_sites(path, &s, &g);
    } else rc = rep_load(path, &s, &g);
    if (rc) {
        if (have_raw) cmh_snapshot_free(&raw);
        return rc;
    }
    int32_t devs[256];
    int nd = rep_devices(path, &s, g_device, 0, devs, 256);
    if (nd < 0) rc = CLI_EUSAGE;
    else {
        job j = {&s, have_raw ? &raw : NULL, g, devs, nd, path, {{0, NULL}}, 0};
        /* the children the page names (its first 8), said as summary and leaks say them: where
         * each one's record is now and how it ended (the page named the recorder's path only) */
        static char texts[8][10000];
        for (uint32_t i = 0; i < s.nchildren && i < 8; i++, j.nkids++) {
            rep_child_text(path, &s.children[i], texts[i], sizeof texts[i]);
            j.kids[i] = (cmh_report_child){s.children[i].pid, texts[i]};
        }
        rc = rep_write(g_out, 0, write_page, &j);
    }
    if (have_raw) cmh_snapshot_free(&raw);
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    return rc;
}
