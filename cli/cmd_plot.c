/*
 * cmd_plot.c - `cumemhist plot SNAP -o timeline.svg`: allocated and reserved bytes over time,
 * one panel per device (viz/plot.c).
 */
#include <stdio.h>

#include "cumemhist/pictures.h"
#include "report.h"

static const char *g_out;
static int g_device = -2, g_width = 1200, g_height = 300, g_axis = 0;
static const char *const g_axes[] = {"auto", "time", "entries", NULL}; /* CMH_AXIS_* order */

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write the SVG (default: standard output; written atomically)", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
    CLI_OPT_DEVICE_ALL(&g_device),
    {"--width", NULL, CLI_INT, &g_width, "PX", "picture width (default 1200)", NULL, 200, 20000, NULL},
    {"--height", NULL, CLI_INT, &g_height, "PX", "height of each device's panel (default 300)", NULL, 120, 5000, NULL},
    {"--axis", NULL, CLI_CHOICE, &g_axis, "auto|time|entries",
     "what the x axis counts: time since the record's first event, or trace entries (default auto:\n"
     "entries when the busy part of the record is under a quarter of its time span)",
     g_axes, 0, 0, NULL},
};

const cli_command cli_cmd_plot = {
    "plot", "[options] SNAPSHOT",
    "Draw allocated and reserved memory over time as an SVG, one panel per device: the peak\n"
    "marked with its figure, out-of-memory errors, marks and annotations as labelled lines.  The\n"
    "trace is down-sampled to the picture's width keeping each column's minimum and maximum, so\n"
    "a peak is never smoothed away.  Opens in any browser, offline.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist plot train.cmh -o timeline.svg"};

typedef struct job {
    const cmh_snapshot *s;
    cmh_plot_opts o;
} job;

static int draw(void *arg, FILE *fp)
{
    job *j = arg;
    return cmh_plot_timeline(j->s, &j->o, fp);
}

int cmd_plot(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_plot, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    cmh_snapshot s;
    if ((rc = rep_load_view(path, &s))) return rc;
    int32_t devs[256];
    int nd = rep_devices(path, &s, g_device, 0, devs, 256);
    if (nd < 0) {
        cmh_snapshot_free(&s);
        return CLI_EUSAGE;
    }
    rep_say_empty_devices("plot", path, &s, g_device, devs[0]);
    job j = {&s, {g_width, g_height, devs, nd, path, 0, g_axis}};
    rc = rep_write(g_out, 0, draw, &j);
    cmh_snapshot_free(&s);
    return rc;
}
