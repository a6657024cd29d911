/*
 * cumemhist/pictures.h - pictures drawn by our own code, opened offline: the timeline of
 * allocated and reserved memory (SVG), live bytes by stack at one moment (a flamegraph SVG, or
 * folded-stack lines for other tools), and pprof's profile.proto.  Each writes to a FILE* and
 * returns CMH_OK, CMH_ENOMEM, or CMH_EIO when the stream failed.
 */
#ifndef CUMEMHIST_PICTURES_H
#define CUMEMHIST_PICTURES_H

#include <stdio.h>

#include "sites.h"
#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmh_plot_opts {
    int width;          /* pixels (default 1200); the trace is down-sampled to it, min and max per column */
    int panel_height;   /* pixels per device (default 300) */
    const int32_t *devices; /* the devices to draw, one panel each, in this order */
    int ndevices;
    const char *title;  /* the file's name, say; NULL: none */
    int inline_svg;     /* for an HTML page: no XML declaration, and it scales to its box */
    int axis;           /* CMH_AXIS_AUTO, _TIME or _ENTRIES: what the x axis counts, one for the figure */
} cmh_plot_opts;

/* The x axis of a timeline.  AUTO is time, unless the record's busy part (the middle 90% of its
 * timed entries) covers less than CMH_AXIS_BUSY_SHARE of its time span, as when a training loop
 * follows a long quiet start-up: then entries, so the loop gets the width. */
enum { CMH_AXIS_AUTO = 0, CMH_AXIS_TIME, CMH_AXIS_ENTRIES };
#define CMH_AXIS_BUSY_SHARE 0.25
/* The axis AUTO picks for the devices of o (TIME or ENTRIES); *busy gets the busy share (may be NULL). */
int cmh_plot_axis(const cmh_snapshot *s, const cmh_plot_opts *o, double *busy);

/* Allocated and reserved bytes over time, per device: the peak marked with its figure (the
 * `peak` report's), OOMs, marks and annotations as labelled vertical lines, axes and a legend. */
int cmh_plot_timeline(const cmh_snapshot *s, const cmh_plot_opts *o, FILE *fp);

/* The moment a flamegraph shows: CMH_AT_END (the final state), CMH_AT_PEAK (the allocated peak),
 * CMH_AT_OOM (the n-th out-of-memory error, from 1), CMH_AT_ENTRY (after trace entry n). */
enum { CMH_AT_END = 0, CMH_AT_PEAK, CMH_AT_OOM, CMH_AT_ENTRY };

typedef struct cmh_live_stack {
    uint32_t stack;
    uint64_t bytes, blocks;
} cmh_live_stack;

typedef struct cmh_live_at {
    int64_t index;          /* the entry applied last (-1: before the first) */
    int64_t time_ns;
    uint64_t bytes, blocks; /* every live block */
    cmh_live_stack *stacks; /* by stack, most bytes first */
    uint32_t nstacks;
    int64_t unsplit; /* at CMH_AT_PEAK: the peak report's alloc_unsplit (cmh_unsplit_text says it) */
} cmh_live_at;

/* Live blocks by stack on device at a moment; CMH_EINVAL when it does not exist (no OOM n, an
 * entry past the trace). */
int cmh_live_compute(const cmh_snapshot *s, int device, int at, int64_t n, cmh_live_at *out);
void cmh_live_free(cmh_live_at *l);

/* Folded stacks ("outer;...;inner bytes" per line, the format flamegraph.pl and speedscope
 * read; frames as people read them, ';' in a name written ':'), and the same as a static SVG
 * flamegraph with a tooltip per frame; the site frame of each stack (cumemhist/sites.h) is
 * marked, machinery drawn paler.  Both start each stack at its site, leaving out the machinery
 * inside it (cmh_sites_leaf_machinery; g NULL: every frame). */
int cmh_flame_folded(const cmh_snapshot *s, const cmh_sites *g, const cmh_live_at *l, FILE *fp);
int cmh_flame_svg(const cmh_snapshot *s, const cmh_sites *g, const cmh_live_at *l, const char *title, FILE *fp);
/* PyTorch's torch/cuda/_memory_viz.py `memory` (segs 0) or `segments` (segs 1) folded lines,
 * byte for byte: every block of the snapshot's segments (the end) in the file's order, its
 * state, its frames outermost first through the script's filter, as `file:line:name` with the
 * file cut after its last '/'.  device: CMH_ALL_DEVICES (the script's: all) or one. */
int cmh_memviz_folded(const cmh_snapshot *s, int device, int segs, FILE *fp);

/* pprof's profile.proto, gzipped: live bytes and blocks at the end and at each device's
 * allocated peak (four sample types), one sample per stack and device of devices[0..ndevices),
 * labelled "device", a number with the unit "index" (0, 1, -1 for pinned host memory; each
 * device's peak at its own moment: the comment says so), locations and functions from the
 * frames the exports draw (cmh_sites_drawn: from the site outward, as the reports print them),
 * so that pprof's "flat" bytes of a function are the bytes the reports give its site.  g: the
 * attribution rules (NULL: the defaults).  The first mapping, which pprof names the profile by,
 * is the program: the module, or the Python script, of the stacks' outermost frames. */
int cmh_export_pprof(const cmh_snapshot *s, const cmh_sites *g, const int32_t *devices, int ndevices, FILE *fp);

/* The one-file HTML report: per device the timeline, memory_summary()'s key figures, who owned
 * the memory at the peak and at the end (cumemhist/owners.h: from raw, the record before
 * cmh_merged_view, or s itself), the leak candidates with their growth over the record, the
 * segments' fragmentation as bars, each OOM with its verdict and culprits, and kernels when
 * recorded.  Inline SVG and CSS, no script, no external request. */
int cmh_report_html(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                    const char *title, FILE *fp);
/* The same page with the interactive Active Memory Timeline (cumemhist/view.h) at its end: its
 * one inline script and its data, still no external request. */
int cmh_report_html_view(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                         const char *title, FILE *fp);
/* What the caller found of each child the record forked (s->children, in order): its pid and
 * one line on it ("forked child 803: its record app.803.cmh; it was killed by SIGABRT"), which
 * the page prints as it is: where the child's record is now and how it ended are known only by
 * looking beside the record's file, which the page does not have. */
typedef struct cmh_report_child {
    int64_t pid;
    const char *text;
} cmh_report_child;
/* cmh_report_html (with_view 0) or cmh_report_html_view (1), the children as children says
 * (NULL: each named by the path the recorder gave its record, nothing more known). */
int cmh_report_html_ex(const cmh_snapshot *s, const cmh_snapshot *raw, const cmh_sites *g, const int32_t *devices, int ndevices,
                       const char *title, const cmh_report_child *children, uint32_t nchildren, int with_view, FILE *fp);

#ifdef __cplusplus
}
#endif
#endif
