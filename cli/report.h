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
/* trace --raw-frames: a recorder's frames as recorded, not symbolized as the export writes them */
extern int rep_raw_frames;
extern const char *const rep_group_names[];

/* The options every report shares, in the order of their help. */
#define CLI_OPT_DEVICE(d) {"--device", NULL, CLI_DEVICE, (d), "N", "device to report (default: the lowest in each snapshot)", NULL, 0, 0, NULL}
#define CLI_OPT_TOP(t, what) {"--top", NULL, CLI_INT, (t), "N", what, NULL, 1, 1000000, NULL}
#define CLI_OPT_FRAMES(f) {"--frames", NULL, CLI_INT, (f), "N", "frames shown per site, from the site outward (default 6)", NULL, 0, 64, NULL}
#define CLI_OPT_JSON(j) {"--json", NULL, CLI_FLAG, (j), NULL, "machine-readable output (exact integers)", NULL, 0, 0, NULL}
#define CLI_OPTS_ATTRIBUTION                                                                                     \
    {"--group-by", NULL, CLI_CHOICE, &rep_attribution.group_by, "site|stack|module|file|package",                        \
     "site (default): the user's frame, however the framework got there;\nstack: the whole stack (printed from the site outward);\nmodule: who called the driver; file: the site's file;\npackage: the third-party package it went through, else the site's", \
     rep_group_names, 0, 0, NULL},                                                                               \
    {"--skip", NULL, CLI_LIST, &rep_attribution.skips, "REGEX",                                                  \
     "frames whose function, file or module match are machinery too\n(repeatable; docs/ATTRIBUTION.md has the defaults)", NULL, 0, 0, NULL}, \
    {"--no-default-skip", NULL, CLI_FLAG, &rep_attribution.no_default, NULL,                                     \
     "only --skip decides what is machinery", NULL, 0, 0, NULL}

#define CLI_OPT_DEVICE_ALL(d) {"--device", NULL, CLI_DEVICE, (d), "N", "only device N (-1: pinned host memory); default: every device in the snapshot", NULL, 0, 0, NULL}

/* Load a snapshot; a merged record as one model (cmh_merged_view).  Returns the exit status. */
int rep_load_view(const char *path, cmh_snapshot *s);
int rep_load_view_ex(const char *path, cmh_snapshot *s, unsigned flags); /* flags: CMH_LOAD_* */
/* Write through fn to path atomically (NULL or "-": standard output, refused for binary output
 * on a terminal); the exit status, the error said. */
int rep_write(const char *path, int binary, int (*fn)(void *arg, FILE *fp), void *arg);
/* Load and make frames readable; then the sites by the attribution options.  Returns the exit
 * status (0 on success, the snapshot and *sites set). */
int rep_load(const char *path, cmh_snapshot *s, cmh_sites **sites);
/* The same from a snapshot rep_load_view made (or cli_load, for one with no PyTorch part); on
 * failure s is freed. */
int rep_load_sites(const char *path, cmh_snapshot *s, cmh_sites **sites);
/* A loaded record with failed driver calls symbolized (cli_symbolize), so that every report names
 * their sites alike (cmh_driver_error_site); nothing for one without.  Frees it on an error. */
int rep_name_failed_calls(const char *path, cmh_snapshot *s);

/* A snapshot listing several devices, each empty, shows one for all (rep_devices): say so once,
 * when no --device was given (want -2), naming the device shown (shown below -1: none, every
 * device is shown, as trace's text does).  cmd NULL: a line on stdout (a
 * report's text); else on stderr, "cumemhist: CMD: ..." ("" for no command name: PyTorch's text,
 * SVG, HTML and the like leave stdout to what they are). */
void rep_say_empty_devices(const char *cmd, const char *path, const cmh_snapshot *s, int want, int shown);
/* The devices a report covers: `want` alone (>= -1), or with want == -2 every device the
 * snapshot has anything on, in order (pinned host memory last; left out with no_host).  An
 * empty snapshot covers one empty device (want, or 0).  Returns the count, or -1 after saying
 * that the snapshot has no device `want`. */
int rep_devices(const char *path, const cmh_snapshot *s, int want, int no_host, int32_t *devs, int cap);
/* 0 when want is -2 (none asked) or a device of s, else CLI_EUSAGE after rep_devices' "no device
 * N in this snapshot (it has ...)" (docs/CLI.md: every command alike). */
int rep_check_device(const char *path, const cmh_snapshot *s, int want);
/* Whether s has anything on device (-1: pinned host memory). */
int rep_has_device(const cmh_snapshot *s, int device);
/* A command with no report of pinned host memory, asked for one: why, and CLI_EUSAGE. */
int rep_no_pinned(const char *cmd, const char *why);
/* Whether the device holds or ever held memory in the snapshot: a segment, or a trace entry other
 * than a mark or PyTorch's 'snapshot' (a ring of only that lists a device that was never used). */
int rep_device_used(const cmh_snapshot *s, int device);
/* The device a one-device command looks at when none is named: where the record's first
 * out-of-memory error happened (cmh_first_oom), said on stderr as "cumemhist: CMD: device N, ..."
 * when the record has several devices.  Returns 1 with *device set, or 0 for a record without an
 * OOM (the command's own default then). */
int rep_oom_device(const cmh_snapshot *s, const char *cmd, int *device);
/* "device 1", or "pinned host memory" for -1 */
const char *rep_device_name(int device);

/* One section of a report: a device of a snapshot. */
typedef struct rep_section {
    const char *path;
    const cmh_snapshot *s;
    const cmh_sites *g; /* NULL without attribution */
    int device;
    int index;          /* 0 for the first section printed, across files */
    int ndevices;       /* sections of this snapshot */
    cmh_jw *w;          /* NULL in text */
    /* REP_TORCH_PART: the whole record s is PyTorch's part of (its ->torch is s), for what the
     * driver saw beside it (cmh_beyond_torch_compute); NULL where s is a record of its own */
    const cmh_snapshot *whole;
    int torch_part;     /* s is PyTorch's part of a co-recorded record (REP_TORCH_PART): its entries
                         * are part of the ending's count, which is the whole record's */
} rep_section;
/* Print (or write as one JSON object) a section; returns a CMH_* code. */
typedef int (*rep_section_fn)(const rep_section *sec, void *arg);

/* REP_SHAPED: a recorder snapshot in the shape of its memory_viz export (rep_load_shaped) */
/* REP_PYTORCH_TEXT: text in one of PyTorch's layouts, which has no line for the process (JSON keeps it) */
/* REP_TORCH_PART: a merged record's PyTorch part alone (summary, stats, trace: PyTorch's own views) */
/* REP_OOM_ORDER: without --device, the text lists the devices in the order of their first OOM in
 * the record (cmh_record_ooms: the device of the record's first OOM first), those without one
 * after, as rep_devices lists them; --json keeps every command's device order (record_rank says
 * the record's) */
enum { REP_SITES = 1, REP_NO_HOST = 2, REP_SHAPED = 4, REP_PYTORCH_TEXT = 8, REP_TORCH_PART = 16, REP_OOM_ORDER = 32 };
/* Load a snapshot in PyTorch's shape: a recorder snapshot as its memory_viz export spells it
 * (cmh_memviz_shape: a driver allocation a segment holding one block, pinned host memory left
 * out), a PyTorch pickle as it is.  Returns the exit status. */
int rep_load_shaped(const char *path, cmh_snapshot *s);
int rep_load_shaped_ex(const char *path, cmh_snapshot *s, unsigned flags); /* flags: CMH_LOAD_* */
/* The same for a command that reads only the shaped model: the loaded one becomes it where the
 * shaping changes no entry (cmh_memviz_shape_move), rather than a second copy of it. */
int rep_load_shaped_own(const char *path, cmh_snapshot *s);
/* The same, first saying on stderr how the shaped entries map to the record's (as
 * rep_say_memviz_numbering, for cmd about device, -2 every device). */
int rep_load_shaped_own_said(const char *path, cmh_snapshot *s, const char *cmd, int device, const char *what);
/* The same, calling before(record, arg) on the record as read, before it is shaped (the figures
 * every other command gives: trace's note on where its end and the snapshot's disagree). */
int rep_load_shaped_own_with(const char *path, cmh_snapshot *s, const char *cmd, int device, const char *what,
                             void (*before)(const cmh_snapshot *, void *), void *arg);
/* memory_viz (and the shaped model) counts a recorder record's entries its own way: for each
 * device (or only device; -2 every one) where the counts differ, say on stderr in one line how
 * they map, with the allocated peak as the example a user goes looking for; what names who
 * counts them ("memory_viz counts"); the why is docs/CLI.md's ("Entry numbers").  Nothing for a
 * PyTorch pickle (the same entries).  what NULL: export's form, which also names the rows of
 * memory_viz's page (Allocator State History) and the allocated peak's row by the text ctrl-f finds. */
void rep_say_memviz_numbering(const cmh_snapshot *s, const char *cmd, int device, const char *what);
/* Every report command: each snapshot loaded (with its sites under REP_SITES), its process said
 * once in text, then fn for each device it covers; with json, one JSON array of the sections'
 * objects.  Returns the exit status (output errors included). */
int rep_run(char **paths, int npaths, int want, int json, int flags, rep_section_fn fn, void *arg);

/* "FILE: pid 4242 on host, python train.py --steps 3" (text; nothing when the snapshot does not
 * say), and the JSON "process" member ({pid, host, cmdline} or null). */
void rep_print_process(const char *path, const cmh_snapshot *s);
void rep_json_process(cmh_jw *w, const cmh_snapshot *s);
/* The children a record at path forked (s->children): "forked_children", each its pid,
 * "written_to" (the path the recorder gave it), "record" (where it was found: beside path
 * first, then written_to; null: not found), "flight_record" (with no record, the flight record it
 * left: `cumemhist recover` reads it; else null) and its "ending"; then "forked_children_more". */
void rep_json_children(cmh_jw *w, const char *path, const cmh_snapshot *s);
/* Child c's record, looked for beside the parent's record at parent first, then where it was
 * written, then as NAME.PID.ext beside NAME.ext; a file is c's when it holds c's pid.  1 and its
 * path in found, its ending in ending ("" when it says none); 0 when none is. */
int rep_child_record(const char *parent, const cmh_forked_child *c, char *found, size_t cap, char *ending, size_t ecap);
/* Child c's flight record (NAME.cmh.flight), looked for as rep_child_record looks: a child that
 * died under a plain LD_PRELOAD left it and no snapshot.  1 and its path in found, how the child
 * ended in ending as `recover` says it ("was killed by SIGABRT"; "still runs"); 0 when none is. */
int rep_child_flight(const char *parent, const cmh_forked_child *c, char *found, size_t cap, char *ending, size_t ecap);
/* What every output says of child c of the record at parent, in one line after "PATH: ":
 * "forked child 803: its record app.803.cmh; it was killed by SIGABRT", or its flight record and
 * the `recover` that reads it.  1 when a record of it was found; 0: text says it left none. */
int rep_child_text(const char *parent, const cmh_forked_child *c, char *text, size_t cap);
/* "1 block", "2 blocks" */
const char *rep_count(uint64_t n, const char *one, const char *many);

/* A group's site as the reports name it: its frame, said to be no code of the user's where the
 * site fell back to machinery (cmh_sites_no_user_frame): "(no Python frame: at::_ops::mm::call
 * (??))".  "<no stack recorded>" without one. */
const char *rep_group_site(const cmh_snapshot *s, const cmh_sites *g, uint32_t group);
/* The lines a report prints under a row (rep_print_frames), as frames: from the site outward,
 * the machinery (ctypes' glue, CPython's call frames, the standard library's plumbing) left out
 * when the site is the user's; a run of one frame repeated (recursion) one line with its count.
 * At most min(max, cap) lines; *left the frames left out, *more those past max. */
typedef struct rep_line {
    const cmh_frame *f;
    uint32_t repeat;
} rep_line;
uint32_t rep_stack_lines(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, int max, rep_line *out, uint32_t cap,
                         uint32_t *left, uint32_t *more);
/* "f (train.py:3)", "f (train.py:3) (x12 recursive)" */
const char *rep_line_text(const cmh_snapshot *s, const rep_line *l);

/* "12.5 MiB" (a ring of 8 buffers: up to 8 in one printf) */
const char *rep_size(double bytes);
/* An OOM's device free as rep_size says it, or "not known" (CMH_DEVICE_FREE_UNKNOWN); and in
 * JSON, null when not known. */
const char *rep_device_free(uint64_t device_free);
void rep_json_device_free(cmh_jw *w, const char *key, uint64_t device_free);
/* "+1.234s" from the record's first event (cmh_clock_origin), "+176.4 ms" or "+176 µs" under a
 * second (cmh_when_text: one format for every text report), or "-" when a time is unknown (a
 * table's cell; in a sentence use rep_at; a column pads it by rep_wide) */
const char *rep_when(int64_t t, int64_t t0);
/* Bytes of s beyond its columns on a terminal (UTF-8's continuation bytes: 1 for "µs"): what a
 * printf width ("%10s", counted in bytes) must add to line it up. */
int rep_wide(const char *s);
/* An entry in a sentence: "entry 3697, +1.234s", or "entry 3697" alone in an untimed record
 * (PyTorch 2.0's snapshots have no time_us): never a dash for the time. */
const char *rep_at(int64_t index, int64_t t, int64_t t0);
/* "key": a time in ns, or null when the record does not know it (time 0: no time recorded) */
void rep_json_time(cmh_jw *w, const char *key, int64_t t);
struct cmh_owners_report;
/* Why `owners` totals more than `peak`'s reserved: the device's latest cuMemGetInfo sample showed
 * more in use than the record held at that instant (owners.h).  The one line both commands print
 * (NULL: nothing to say: no sample, or no more in use than recorded). */
const char *rep_not_recorded_line(const struct cmh_owners_report *o, int64_t t0, char *buf, size_t cap);
/* Whether the not-recorded memory grew since the first allocation (or that is not known), and
 * by how much (*since: all of it when not known) */
int rep_not_recorded_grew(const struct cmh_owners_report *o, uint64_t *since);
/* "not_recorded": that line's figures and words, or null */
void rep_json_not_recorded(cmh_jw *w, const struct cmh_owners_report *o, int64_t t0);
/* Why `peak`'s reserved peak is the final state and above every entry's: the reconciliation with
 * the final segments raised reserved from trace_peak (the most after any entry) to end_reserved.
 * The one line `peak` and `owners` both print. */
const char *rep_reconciled_line(int64_t trace_peak, int64_t end_reserved, char *buf, size_t cap);
/* "reconciled": those figures and that line, or null (trace_peak < 0: nothing to say) */
void rep_json_reconciled(cmh_jw *w, int64_t trace_peak, int64_t end_reserved);
/* Where the trace's end and the snapshot disagree (b->gap, cumemhist/gapwords.h): a "note: " for
 * a trace that stops before the snapshot, and with starts one for a trace that starts late too
 * (for the reports with no note of their own on it: peak, trace). */
void rep_gap_notes(const cmh_report_base *b, int starts);
/* The same on fp, each note after lead (trace's on stderr: "cumemhist: trace: FILE, device N: ") */
void rep_gap_notes_to(FILE *fp, const char *lead, const cmh_report_base *b, int starts);
/* Physical memory made with cuMemCreate and mapped nowhere at the end (.cmh vmm_unmapped): in no
 * segment, so outside allocated, reserved and the segments, though the device holds it for the
 * process.  A "note: " line beside those figures (nothing when there is none), and --json's
 * "vmm_unmapped" {bytes, handles}, the same in peak, frag and summary (owners has its row, leaks
 * its sites). */
void rep_vmm_unmapped_note(const cmh_snapshot *s, int device);
void rep_json_vmm_unmapped(cmh_jw *w, const cmh_snapshot *s, int device);
/* Driver calls that failed with an error other than out-of-memory (.cmh driver_errors: a double
 * free, a free of a pointer never allocated or of an address inside an allocation...): the trace
 * has no entry for them (the driver did nothing).  One note, each (call, result) a line, each
 * kept call a line under it saying what its address was at that moment as the trace shows it
 * (freed already, inside a live allocation, never allocated); nothing when there were none.
 * The process's, whatever the device: summary, oom and leaks print it once per file. */
void rep_driver_errors_note(const cmh_snapshot *s);
/* "driver_errors": [{call, result, error, count, calls: [{address, size, thread, time_ns, what, site}]}] */
void rep_json_driver_errors(cmh_jw *w, const cmh_snapshot *s);
/* "history_lost": null for a record read whole; else what a recovery from a flight record could
 * not read of it (.cmh history_lost): {cut_bytes, file_bytes, read_to, torn_records,
 * damaged_records, refused_records, text} (text: cmh_history_lost_text).  rep_json_process
 * writes it, before "process"; the text reports print the note under the process's ending. */
void rep_json_history_lost(cmh_jw *w, const cmh_snapshot *s);
/* Where cuMemCreate handles are mapped at two addresses, or in part (the record's vmm_maps), or
 * held and mapped nowhere (vmm_unmapped): the device's memory as the driver charges it, each
 * handle once and whole, at the end and at its peak (cmh_physical_peak_compute).  A "note: " line (nothing where the handles change no
 * figure), and --json's "physical" {end, peak}, null then; in frag and summary. */
void rep_vmm_physical_note(const cmh_snapshot *s, int device);
void rep_json_vmm_physical(cmh_jw *w, const cmh_snapshot *s, int device);
/* "trace_gap": its figures (stops_early, unfreed_*, starts_late, untraced_*) and "says": the notes' words */
void rep_json_gap(cmh_jw *w, const cmh_report_base *b);
/* Whole blocks the allocator did not split, at the allocated peak (cmh_unsplit_text): the line,
 * after lead, when there are any; and "alloc_unsplit_at_peak" (bytes; null without history). */
void rep_unsplit_note(const cmh_peak_report *p, const char *lead);
/* Expandable segments at the end (cmh_frag_report.expandable_*), which PyTorch's memory_summary()
 * counts in GPU reserved memory only, not in GPU reserved segments nor in Non-releasable memory:
 * summary's note, on stderr (its table keeps PyTorch's figures and its standard output PyTorch's
 * text; in_summary 1), and frag's (its segments and
 * trapped bytes are not those rows'), the same facts in each; nothing without any.  And
 * summary --json's "expandable_at_end" {segments, free, trapped} (null without any). */
void rep_expandable_note(const cmh_frag_report *p, int in_summary);
/* What the driver held for the process beyond PyTorch's pool at the end of a record with
 * PyTorch's part (cmh_beyond_torch_compute), by owner as `owners` names them: summary's line
 * after its table, on stderr (its standard output stays memory_summary()'s text); nothing for a
 * record without PyTorch's part or nothing beside it.  And --json's "beyond_pytorch" {bytes,
 * allocations, owners: [{owner, kind, bytes, allocations}], used, total, not_recorded} (null:
 * not known, a record that is PyTorch's alone). */
struct cmh_beyond_torch;
void rep_beyond_torch_note(const struct cmh_beyond_torch *b, int device);
void rep_json_beyond_torch(cmh_jw *w, const struct cmh_beyond_torch *b);
void rep_json_expandable(cmh_jw *w, const cmh_frag_report *p);
/* Other callers' cuMemMap ranges at the end (cmh_frag_report.vmm_*: NCCL's buffers, a library's
 * own VMM allocator), which are no expandable segments of PyTorch's: frag's note, by owner
 * (nothing without any), a segment's tag ("  (cuMemMap: NCCL (libnccl.so.2))"), and --json's
 * "vmm_ranges" {segments, reserved, free, owners: [{owner, segments, reserved}]} (null: none). */
void rep_vmm_ranges_note(const cmh_frag_report *p);
const char *rep_vmm_range_tag(const cmh_frag_report *p, const cmh_frag_seg *g, char *buf, size_t n);
void rep_json_vmm_ranges(cmh_jw *w, const cmh_frag_report *p);
void rep_json_unsplit(cmh_jw *w, const cmh_peak_report *p);
/* The record's clock origin, the same for every device (cmh_clock_origin; 0 if none). */
int64_t rep_trace_start(const cmh_snapshot *s, int device);
/* A frame as people read it: "function (file:line)", "function (module)", "function". */
const char *rep_frame(const cmh_snapshot *s, const cmh_frame *f);
/* A site's one-line name: its frame (by site or stack), its owner (by module), its file. */
const char *rep_site_name(const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x);
/* A stream-ordered pool by what the record says of it: "the default pool of device N", "private
 * pool #k (cuMemPoolCreate at file:line)", or "pool 0x..." where the record does not say (older
 * records); the pool with that handle at at_ns.  buf holds it. */
const char *rep_pool_name(const cmh_snapshot *s, const cmh_sites *g, uint64_t handle, int64_t at_ns, char *buf, size_t n);
/* "  [owner]" after a site's name, or "" for a site no owner is known of (no stack: --context
 * none or state), rather than empty brackets; buf holds it. */
const char *rep_owner_tag(const cmh_sites *g, uint32_t group, char *buf, size_t n);
/* A group's owner by the name owners' rows give it (cmh_owner_name), into buf; "" for none. */
const char *rep_owner_name(const cmh_sites *g, uint32_t group, char *buf, size_t n);
/* The frames of a stack from its site outward, machinery left out, at most max. */
void rep_print_frames(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, int max, const char *indent);
/* A site's bytes by the lines that called it ("by caller: 36.0 MiB step (train.py:20), ..."),
 * when it has two callers or more, and which of them grow (cmh_site_callers_text and
 * cmh_site_callers_growth_text, the HTML report's words too). */
void rep_print_callers(const cmh_snapshot *s, const cmh_site *x, const char *indent);
/* What the GPU was doing at time t (kernel timing, when recorded). */
void rep_gpu_at(const cmh_snapshot *s, int device, int64_t t, const char *indent);
/* The closing notes: ring drops, and what sizes of a PyTorch trace mean. */
/* What gives back the releasable bytes, of which pool_cache a stream-ordered pool keeps: empty
 * segments go back with empty_cache(), a pool's cache with cuMemPoolTrimTo (not empty_cache()). */
const char *rep_releasable_how(uint64_t releasable, uint64_t pool_cache, uint64_t expandable_pages);
void rep_notes(const cmh_report_base *b);
/* The members every report's JSON object starts with: file, device, process, trace figures. */
void rep_json_base(cmh_jw *w, const rep_section *sec, const cmh_report_base *b);
void rep_json_frame(cmh_jw *w, const cmh_snapshot *s, const cmh_frame *f);
/* A site object: "site" {function, file, line, module}, "owner", "bytes", "blocks", "share",
 * times, growth (leaks), and "frames", the whole stack innermost first. */
void rep_json_site(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, const cmh_site *x, uint64_t total, int leaks);
/* When set, rep_json_site calls it before closing each site's object (leaks: a grouped row's
 * sites, each judged alone); arg is rep_json_site_hook_arg. */
extern void (*rep_json_site_hook)(cmh_jw *w, const cmh_site *x, void *arg);
extern void *rep_json_site_hook_arg;
/* A list of sites (the first top). */
/* After the list, its sibling "<key>_left_out": the sites --top left out (a script summing the
 * list must know it is not the whole) */
void rep_json_sites_left_out(cmh_jw *w, const char *key, uint32_t n, int top);
void rep_json_sites(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, const cmh_site *sites, uint32_t n, int top,
                    uint64_t total, int leaks);


/* A row grouped by module, file or package is a union of sites: under it peak and oom list its
 * sites (each as --group-by site has it), as leaks does: "of it, by site: 64.0 MiB f (a.c:3),
 * 16.0 MiB g (b.c:5)" (the three largest, then what more sites hold); a row that is one site
 * carries that site's split by caller instead.  begin: the snapshot grouped by site again (0:
 * nothing to split, a grouping by site or stack); the caller then computes its report with b->gs
 * and sets sites/nsites to that report's sites at the same moment.  --json: "by_site" (each
 * site's frame, bytes, blocks), through rep_json_site_hook with b as its argument. */
typedef struct rep_row_sites {
    const cmh_snapshot *s;
    cmh_sites *gs;       /* grouped by site (NULL: no split) */
    uint32_t *row;       /* per site group: its row's group in the grouping shown */
    const cmh_site *sites; /* the report's sites, by site, at the same moment (largest first) */
    uint32_t nsites;
} rep_row_sites;
/* The same snapshot's sites grouped by site, for the rows of a grouping by module, file or
 * package (g) to be split by site ("of it, by site"); NULL: g groups otherwise (nothing to split),
 * or no memory (said by no line). */
cmh_sites *rep_sites_by_site_under(const cmh_snapshot *s, const cmh_sites *g);
int rep_row_sites_begin(rep_row_sites *b, const cmh_snapshot *s, const cmh_sites *g);
void rep_row_sites_print(const rep_row_sites *b, const cmh_site *x, const char *indent);
void rep_row_sites_json(cmh_jw *w, const cmh_site *x, void *arg);
void rep_row_sites_end(rep_row_sites *b);

/* Under a fragmentation OOM's verdict (oom, and frag's last OOM: the same line from the same
 * event): the site whose live blocks kept the free bytes apart (cmh_oom_event.trap_*), nothing
 * when none; and its --json object "trapped_by" (null when none). */
void rep_trap_print(const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, uint32_t group, uint64_t free, uint32_t segs,
                    uint32_t sites);
void rep_json_trap(cmh_jw *w, const cmh_snapshot *s, const cmh_sites *g, uint32_t stack, uint32_t group, uint64_t free, uint32_t segs,
                   uint32_t sites);

#endif
