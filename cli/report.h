/*
 * report.h - what the report commands (peak, leaks, frag, oom, diff, kernels) print with: sizes
 * and times as people read them, stacks, the sites of a report in text and JSON, and the notes
 * every report ends with.
 */
#ifndef CMH_CLI_REPORT_H
#define CMH_CLI_REPORT_H

#include "cli.h"
#include "cumemhist/reports.h"
#include "jsonw.h"

/* The options every report shares, in the order of their help. */
#define CLI_OPT_DEVICE(d) {"--device", NULL, CLI_DEVICE, (d), "N", "device to report (default: the lowest in each snapshot)", NULL, 0, 0, NULL}
#define CLI_OPT_TOP(t, what) {"--top", NULL, CLI_INT, (t), "N", what, NULL, 1, 1000000, NULL}
#define CLI_OPT_FRAMES(f) {"--frames", NULL, CLI_INT, (f), "N", "frames per site (default 6)", NULL, 0, 64, NULL}
#define CLI_OPT_JSON(j) {"--json", NULL, CLI_FLAG, (j), NULL, "machine-readable output (exact integers)", NULL, 0, 0, NULL}

/* "12.5 MiB" (a ring of 8 buffers: up to 8 in one printf) */
const char *rep_size(double bytes);
/* "+1.234s" from the start of the trace, or "-" when a time is unknown */
const char *rep_when(int64_t t, int64_t t0);
/* The first time of a device's trace (0 if none). */
int64_t rep_trace_start(const cmh_snapshot *s, int device);
void rep_print_stack(const cmh_snapshot *s, uint32_t stack, int max, const char *indent);
/* What the GPU was doing at time t (kernel timing, when recorded). */
void rep_gpu_at(const cmh_snapshot *s, int device, int64_t t, const char *indent);
/* The closing notes: ring drops, and what sizes of a PyTorch trace mean. */
void rep_notes(const cmh_report_base *b);
/* The members every report's JSON object starts with. */
void rep_json_base(cmh_jw *w, const char *path, const cmh_report_base *b);
void rep_json_stack(cmh_jw *w, const cmh_snapshot *s, uint32_t stack, int max);
/* A list of sites (the first top), each with its share of total; leaks adds growth. */
void rep_json_sites(cmh_jw *w, const cmh_snapshot *s, const cmh_site *sites, uint32_t n, int top, int frames,
                    uint64_t total, int leaks);

#endif
