/*
 * report.h - what the report commands (peak, leaks, frag, oom, diff) share: the attribution
 * options and the sites they make, sizes and times as people read them, a site and its frames
 * in text and JSON, and the notes every report ends with.
 */
#ifndef CMH_CLI_REPORT_H
#define CMH_CLI_REPORT_H

#include "cli.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "jsonw.h"

/* The attribution options (--group-by, --skip, --no-default-skip), one set per process. */
typedef struct rep_attr {
    int group_by;
    int no_default;
    cli_list skips;
} rep_attr;
extern rep_attr rep_attribution;
extern const char *const rep_group_names[];

/* The options every report shares, in the order of their help. */
#define CLI_OPT_DEVICE(d) {"--device", NULL, CLI_DEVICE, (d), "N", "device to report (default: the lowest in each snapshot)", NULL, 0, 0, NULL}
#define CLI_OPT_TOP(t, what) {"--top", NULL, CLI_INT, (t), "N", what, NULL, 1, 1000000, NULL}
#define CLI_OPT_FRAMES(f) {"--frames", NULL, CLI_INT, (f), "N", "frames shown per site, from the site outward (default 6)", NULL, 0, 64, NULL}
#define CLI_OPT_JSON(j) {"--json", NULL, CLI_FLAG, (j), NULL, "machine-readable output (exact integers)", NULL, 0, 0, NULL}
#define CLI_OPTS_ATTRIBUTION                                                                                     \
    {"--group-by", NULL, CLI_CHOICE, &rep_attribution.group_by, "site|stack|module|file",                        \
     "site (default): the user's frame, however the framework got there;\nstack: the whole stack; module: who called the driver; file: the site's file", \
     rep_group_names, 0, 0, NULL},                                                                               \
    {"--skip", NULL, CLI_LIST, &rep_attribution.skips, "REGEX",                                                  \
     "frames whose function, file or module match are machinery too\n(repeatable; docs/ATTRIBUTION.md has the defaults)", NULL, 0, 0, NULL}, \
    {"--no-default-skip", NULL, CLI_FLAG, &rep_attribution.no_default, NULL,                                     \
     "only --skip decides what is machinery", NULL, 0, 0, NULL}

/* Load, choose the device, make frames readable; then the sites by the attribution options.
 * Returns the exit status (0 on success, the snapshot and *sites set). */
int rep_load(const char *path, int want, cmh_snapshot *s, int *device, cmh_sites **sites);

/* "12.5 MiB" (a ring of 8 buffers: up to 8 in one printf) */
const char *rep_size(double bytes);
/* "+1.234s" from the start of the trace, or "-" when a time is unknown */
const char *rep_when(int64_t t, int64_t t0);
/* The first time of a device's trace (0 if none). */
int64_t rep_trace_start(const cmh_snapshot *s, int device);
/* A frame as people read it: "function (file:line)", "function (module)", "function". */
const char *rep_frame(const cmh_snapshot *s, const cmh_frame *f);
/* A site's one-line name: its frame (by site or stack), its owner (by module), its file. */
const char *rep_site_name(const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x);
/* The frames of a stack from its site outward, machinery left out, at most max. */
void rep_print_frames(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, int max, const char *indent);
/* What the GPU was doing at time t (kernel timing, when recorded). */
void rep_gpu_at(const cmh_snapshot *s, int device, int64_t t, const char *indent);
/* The closing notes: ring drops, and what sizes of a PyTorch trace mean. */
void rep_notes(const cmh_report_base *b);
/* The members every report's JSON object starts with. */
void rep_json_base(cmh_jw *w, const char *path, const cmh_report_base *b);
void rep_json_frame(cmh_jw *w, const cmh_snapshot *s, const cmh_frame *f);
/* A site object: "site" {function, file, line, module}, "owner", "bytes", "blocks", "share",
 * times, growth (leaks), and "frames", the whole stack innermost first. */
void rep_json_site(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x, uint64_t total, int leaks);
/* A list of sites (the first top). */
void rep_json_sites(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, const cmh_site *sites, uint32_t n, int top,
                    uint64_t total, int leaks);

#endif
