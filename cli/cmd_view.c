/*
 * cmd_view.c - `cumemhist view SNAP -o view.html`: the interactive Active Memory Timeline
 * (viz/view.c; docs/VIEW.md).
 */
#include <stdio.h>

#include "cumemhist/view.h"
#include "report.h"

static const char *g_out;
static int g_device = -2;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write the page (default: standard output; written atomically)", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPTS_ATTRIBUTION,
};

const cli_command cli_cmd_view = {
    "view", "[options] SNAPSHOT",
    "Write one self-contained, interactive HTML page (its script and style inline, no request to\n"
    "anything: it opens from disk in any current browser): the Active Memory Timeline of every\n"
    "device, each allocation a band stacked in allocation order as PyTorch's memory_viz draws it,\n"
    "coloured by site, with the allocated and reserved lines, steps, marks and OOMs.  Zoom and pan\n"
    "(wheel, drag, + - arrow keys), hover for size and site, click for the stack and the\n"
    "allocation's life, search a site or file, a cursor with what is live at that instant, a\n"
    "device switcher; all of it by keyboard too.  Stays smooth on millions of entries: the page\n"
    "carries level-of-detail columns computed here.  Reads cumemhist snapshots and PyTorch pickles.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist view train.cmh -o view.html"};

typedef struct job {
    const cmh_snapshot *s;
    const cmh_sites *g;
    const int32_t *devs;
    int nd;
    const char *title;
} job;

static int write_page(void *arg, FILE *fp)
{
    job *j = arg;
    return cmh_view_html(j->s, j->g, j->devs, j->nd, j->title, fp);
}

int cmd_view(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_view, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    cmh_snapshot s;
    cmh_sites *g;
    if ((rc = rep_load(path, &s, &g))) return rc;
    int32_t devs[256];
    int nd = rep_devices(path, &s, g_device, 0, devs, 256);
    if (nd < 0) rc = CLI_EUSAGE;
    else {
        rep_say_empty_devices("view", path, &s, g_device, devs[0]);
        job j = {&s, g, devs, nd, path};
        rc = rep_write(g_out, 0, write_page, &j);
    }
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
    return rc;
}
