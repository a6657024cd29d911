/*
 * cumemhist/reports.h - peak, leaks, fragmentation, OOM and diff, computed over a replay.
 *
 * A report groups live blocks by site (cumemhist/sites.h: by default the user's frame of the
 * allocation stack; or the whole stack, the owner module, the source file), each with the live
 * blocks it holds (bytes, count, first and last allocation time).  Given no cmh_sites, every
 * stack is its own group.  Sites come sorted by bytes, largest first.  Every report says how
 * many trace entries it covers and how many the ring dropped before them.
 *
 * Contracts, for every cmh_*_compute here:
 *  - it reads the snapshot and never changes it; calls on different reports may run at once in
 *    different threads, also over one snapshot;
 *  - it returns CMH_OK, or CMH_ENOMEM with the report left empty (nothing to free);
 *  - a report it filled owns its arrays: free them with the report's own cmh_*_report_free,
 *    which leaves the report empty and may be called on an empty one.
 */
#ifndef CUMEMHIST_REPORTS_H
#define CUMEMHIST_REPORTS_H

#include "analyzer.h"
#include "sites.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One caller of a site: the user's (or package's) frame that called it (cmh_sites_caller_of)
 * and the bytes that came through it.  frame UINT32_MAX: the bytes of callers past the kept
 * ones, or of stacks with no caller. */
#define CMH_SITE_CALLERS 6
typedef struct cmh_site_caller {
    uint32_t frame;
    uint32_t stack; /* the caller's stack that holds the most bytes (lowest id among equals) */
    uint64_t bytes, count;
    /* leaks, a growing site called from several lines (callers_judged): this caller's own blocks
     * judged over the same steps grow too, at rate bytes per step; a stopped site: this caller's
     * own blocks stopped too (rate: while they grew) */
    int growing, stopped;
    int64_t rate;
} cmh_site_caller;

typedef struct cmh_site {
    uint32_t group; /* in the cmh_sites the report was computed with; its stack id without one */
    uint32_t stack; /* one stack of the group: the one holding the most bytes (lowest id among equals) */
    uint64_t bytes, count;
    int64_t first_ns, last_ns;
    /* leaks only: the site's verdict over the steps of the record (docs/DEFINITIONS.md) */
    int verdict;           /* CMH_LEAK_* */
    int growing;           /* verdict == CMH_LEAK_GROWING */
    uint32_t steps;        /* the steps its verdict was judged over (its thread's, with thread) */
    uint32_t rises;        /* of them, after the first, the steps across which its held bytes rose
                            * (in a record of more steps than points: the strides that rose, times stride) */
    uint32_t stride;       /* the steps between the points it was judged at (1 up to 512 steps) */
    uint32_t flat_steps;   /* the steps since its held bytes last rose (0: they rose in the last) */
    int warm_rise;         /* its held bytes rose across its first step (the warm-up) too, which
                            * rises leaves out: "grew in 9 steps after its first" */
    uint32_t growth_steps; /* growing, rising or stopped: the steps of the stretch it grew over */
    uint32_t growth_first; /* stopped: the first step of that stretch (1 is the record's first; 0 otherwise) */
    int64_t rate;          /* growing: bytes per step over growth_steps; stopped: what it grew by over
                            * them, per step (0 otherwise) */
    uint64_t top;          /* stopped: the bytes it held when it stopped growing (held is at most this) */
    uint64_t warm_growth;  /* stopped: what its first step (the warm-up) added where the stretch
                            * leaves that step out (a first step unlike the rest: state made in it) */
    int64_t rise;          /* rising: the bytes its held bytes rose over growth_steps (too few for a rate) */
    double trend;          /* Kendall's tau of its held bytes over that stretch, -1 .. 1 */
    uint64_t held;         /* bytes it held across the last step boundary and still holds */
    /* growing: of its requests, those the driver refused (oom entries not retried with success),
     * counted in its growth as bytes it asked to keep (it stopped growing only as they failed);
     * 0 otherwise */
    uint64_t refused, refused_bytes;
    uint32_t thread;       /* judged over one recording thread's own steps (0: the record's) */
    int64_t thread_tid;       /* that thread's OS thread id (0: unknown) */
    const char *thread_name;  /* and its name ("" unknown; in the snapshot's strings) */
    /* judged thread by thread (cmh_leak_combine_threads): its still-live blocks were made by
     * several recording threads, each of which has steps of its own; the record's steps, cut
     * from their allocations interleaved as they raced, are not trusted for it.  threads: the
     * threads holding its blocks (0: not judged so); thread_mask: the threads its verdict
     * names (the growing ones when it grows, else every holder; bit t for thread t < 64); rate
     * is then their rates summed (a step of each), rate_min and rate_max each one's own, and
     * growth_steps .. growth_steps_max the stretches they grew over. */
    uint32_t threads;
    uint64_t thread_mask;
    int threads_apart; /* judged so where the threads did not race (leaks_raced): none now, since
                        * two threads with loops of their own race whether or not their runs
                        * overlapped; kept for --json's readers */
    int64_t rate_min, rate_max;
    uint32_t growth_steps_max;
    /* leaks only: the recording threads that made its still-live blocks, whatever judged it
     * (bit t for thread t < 64); made_by_other: CMH_MADE_BEFORE_HISTORY where one of them was
     * allocated before the kept history (no thread in the record, in a record of several
     * threads), CMH_MADE_PAST63 where one was made by a thread past 63.  (thread and threads say how the verdict was judged: 0 for a site of one
     * worker thread judged over the record's steps, which hid the thread its blocks came from.) */
    uint64_t made_by;
#define CMH_MADE_PAST63 1
#define CMH_MADE_BEFORE_HISTORY 2
    int made_by_other;
    /* by caller, largest first: callers[0 .. ncallers) are distinct callers (same function, file
     * and line), then, when callers_other.bytes, what the rest and caller-less stacks hold.
     * Filled when the report is grouped by site (cmh_sites given). */
    cmh_site_caller callers[CMH_SITE_CALLERS];
    uint32_t ncallers, callers_seen; /* kept; distinct callers seen */
    cmh_site_caller callers_other;
    /* leaks: the site grows (or stopped) over the record's steps and has two callers or more,
     * each judged alone (callers[].growing, .stopped): a helper or a ctypes wrapper called for a
     * one-off buffer and for the leak is one site, its bytes mostly not the leaking caller's */
    int callers_judged;
    /* leaks, a site its steps could not judge (UNJUDGED: steps not found): judged over the
     * record's time instead (cmh_leak_judge_time, docs/DEFINITIONS.md "Growth without steps").
     * time_verdict CMH_TIME_* (CMH_TIME_NONE: not tried, the steps judged it); its bytes held
     * through each of the time_slices equal slices (counted from 1): time_from through slice
     * time_low (the last at its lowest), time_to through the last, time_top (its most) first
     * through slice time_top_at; time_rises the slices since time_low through which it held
     * more than through the one before; time_allocs its allocations (freed or not), in
     * time_busy slices holding CMH_TIME_SLICE_ALLOCS of them at least; time_span_ns the
     * record's span.  GROWING sets verdict CMH_LEAK_GROWING too (rate and steps stay 0). */
    int time_verdict;
    uint32_t time_slices, time_low, time_rises, time_busy, time_top_at;
    uint64_t time_allocs;
    int64_t time_from, time_to, time_top, time_span_ns;
    int64_t time_held[10]; /* held through each slice (CMH_TIME_SLICES of them) */
    int64_t time_drop;     /* the most it held less through one slice than through the one before */
    /* leaks, where the device's growth cannot be judged (cmh_leak_report.unjudged_why, the
     * threads race) and unjudged_blocks of its still-live blocks (unjudged_bytes) are among those
     * that made it so: why (CMH_UNJUDGED_*, 0: none of them), and with THREAD_STEPS the thread
     * and its steps.  Its verdict is then UNJUDGED, unless it grows or stopped over what was
     * judged (a finding those blocks cannot undo): a row read 'state' under 'growth cannot be
     * judged: 20.0 MiB still live (20 blocks) was made before the first entry the record kept' */
    int unjudged_why;
    uint32_t unjudged_thread, unjudged_thread_steps;
    uint64_t unjudged_bytes, unjudged_blocks;
} cmh_site;

typedef struct cmh_report_base {
    int device;
    uint64_t entries, dropped;
    uint64_t dropped_ooms; /* of dropped, the OOM entries (cmh_trace.dropped_ooms): still in every OOM count */
    int pytorch; /* byte figures of a PyTorch trace are the allocator's rounded sizes */
    int history; /* the trace says how memory changed; 0: only the end state is known (enabled=state) */
    const char *nohist_cause; /* when !history: cmh_no_history_cause's words */
    /* where the trace's end and the snapshot disagree (analyzer.h): filled by the reports that
     * show the end or what is still live (peak, leaks, summary's), zeros in the others and
     * without history (only the end is known: no trace to disagree with it) */
    cmh_trace_gap gap;
} cmh_report_base;
/* Whether device's trace says how memory changed (cmh_report_base's history); 0: only the end
 * state is known (enabled=state, PyTorch's history off), so no peak can be told. */
int cmh_trace_has_history(const cmh_snapshot *s, int device);
/* Whether device's OOM count is known: 1 with a history; without one, when the record counted
 * its OOMs all the same (the trace's dropped_ooms; the recorder's setting "ooms_counted"). */
int cmh_trace_ooms_known(const cmh_snapshot *s, int device);
/* A device without history: its OOMs, counted without entries (the trace's dropped_ooms, 0 for
 * none) into *n and 1 where the count is known (cmh_trace_ooms_known), 0 where it is not.  A
 * device with history: 0 (its entries count them: cmh_summary_compute).  Every writer that says
 * a no-history device's OOMs (oom, flamegraph, the json, sqlite and chrome exports) asks it. */
int cmh_nohist_ooms(const cmh_snapshot *s, int device, uint64_t *n);
/* What the record says of why device has no history, without guessing: "recorded with
 * enabled=state" when the recorder's setting says so; "the snapshot has no trace for this device"
 * when its device_traces stop short of the device (a PyTorch snapshot lists one per device);
 * a trace whose entries are only markers (a PyTorch 2.0 trace of one `snapshot` entry: its ring of
 * one entry) says so; else (an empty trace) "recorded with enabled=state, or history off", the two
 * ways to get one. */
const char *cmh_no_history_cause(const cmh_snapshot *s, int device);

typedef struct cmh_peak_report {
    cmh_report_base base;
    int64_t alloc_peak, alloc_index, alloc_time_ns; /* index -1: before the first entry */
    int64_t reserved_peak, reserved_index, reserved_time_ns;
    int64_t requested_peak, requested_index, requested_time_ns; /* the bytes asked for, before rounding */
    /* of alloc_peak, what whole blocks the allocator did not split hold beyond their rounded
     * requests (cmh_replay_unsplit_bytes at the allocated peak; cmh_unsplit_text says it) */
    int64_t alloc_unsplit;
    int64_t alloc_end, reserved_end, requested_end;
    /* before the first entry: the state the replay inferred from the end (not 0: the trace began
     * mid-run, or a ring dropped its oldest entries; a record with no history: the end state) */
    int64_t alloc_start, reserved_start;
    int64_t allocs_start; /* the blocks live then, which memory_stats' allocation totals count as allocated */
    int64_t active_end; /* every active block's bytes at the end (allocated and pending free) */
    int64_t reserved_last, active_last; /* after the last entry, before the reconciliation */
    cmh_site *sites; /* live at the allocated peak */
    uint32_t nsites;
} cmh_peak_report;

int cmh_peak_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *out);
/* What p's peaks are, one rule for every writer (peak, summary, report, plot, the exports):
 * CMH_PEAK_UNKNOWN without a history (only the end is known: the peak was at least it);
 * CMH_PEAK_AT_LEAST where the trace does not reach back to the start of the run, so the true
 * peak may be higher than its figure: the ring dropped its oldest entries (base.dropped), or
 * memory was live before its first entry (history turned on late, or a ring that says nothing of
 * what it dropped, as PyTorch 2.0's of one entry: a first entry that frees a block never seen
 * allocated); CMH_PEAK_EXACT where the trace covers the run. */
enum { CMH_PEAK_UNKNOWN = 0, CMH_PEAK_EXACT = 1, CMH_PEAK_AT_LEAST = 2 };
int cmh_peak_extent(const cmh_peak_report *p);
/* The same without the sites at the peak (sites NULL): one replay instead of two. */
int cmh_peak_totals(const cmh_snapshot *s, int device, cmh_peak_report *out);
void cmh_peak_report_free(cmh_peak_report *r);

/* Whole-trace results kept while s stays unchanged.  A report page asks for the same peak and
 * end state from its header, its plot, its tasks and its viewer (20 replays of the trace where
 * 10 do); between begin and end, cmh_summary_compute, cmh_peak_totals and cmh_peak_compute on s
 * replay each device (and each device and grouping's sites at the peak) once and give back
 * copies of what they found.  The caller promises that s is not changed or freed in between.
 * Thread-safe; nested pairs on the same s count; a begin on another snapshot while one is kept
 * memoizes nothing.  end returns how many results were computed for the memo (for tests). */
void cmh_replay_memo_begin(const cmh_snapshot *s);
uint32_t cmh_replay_memo_end(const cmh_snapshot *s);
/* The active blocks at the end of device's replay (after its reconciliation), as
 * cmh_replay_blocks gives them: the memo's copy when it keeps one. */
int cmh_end_blocks(const cmh_snapshot *s, int device, void (*fn)(void *, const cmh_live_block *), void *arg);
/* The most reserved bytes before or after any entry of device's trace and the first entry after
 * which the trace holds that many (-1: before the first entry, as `peak` names it; the
 * reconciliation at the end not counted): owners' peak moment, through the memo. */
int cmh_reserved_first_peak(const cmh_snapshot *s, int device, int64_t *peak, int64_t *index);
/* The same, and the reserved bytes at the end after that reconciliation: above the peak when the
 * final segments hold memory no entry made (the record lacks those entries); `peak` then names
 * the final state its reserved peak, and owners too (cmh_owners_report's reconciled). */
int cmh_reserved_peaks(const cmh_snapshot *s, int device, int64_t *peak, int64_t *index, int64_t *end_reserved);
/* The same with that replay's peak totals (cmh_peak_totals' p: the allocated peak, for owners to
 * say which peak its own is), from one replay. */
int cmh_reserved_peaks_totals(const cmh_snapshot *s, int device, int64_t *peak, int64_t *index, int64_t *end_reserved,
                              cmh_peak_report *p);
/* Where device's trace and the snapshot's final segments disagree about the end (analyzer.h's
 * cmh_trace_gap): the whole trace's replay, through the memo (every report's figure is this one). */
int cmh_trace_gap_compute(const cmh_snapshot *s, int device, cmh_trace_gap *out);
/* What device's stream-ordered pools keep at the end (their latest samples, less what the end
 * takes as given back: cmh_trace_gap.pools_given_back, set in gap when not NULL). */
uint64_t cmh_end_pool_cache(const cmh_snapshot *s, int device, cmh_trace_gap *gap);
/* device's stream-ordered frees (cuMemFreeAsync: a whole-block segment_free on a stream, the
 * bytes given back to its pool, not to the driver): how many, their bytes into *bytes when not
 * NULL.  memory_viz's trace prints each as a cudaFree line (trace's note says which). */
uint64_t cmh_stream_ordered_frees(const cmh_snapshot *s, int device, uint64_t *bytes);
/* cmh_summary_compute's replay, through the memo (the peak's totals come from the same one). */
int cmh_whole_replay(const cmh_snapshot *s, int device, cmh_mem_stats *end);
/* Both from that one replay: the end's stats and the peak's totals (no sites), as summary
 * needs them to say what its table cannot (the state before the first entry). */
int cmh_whole_replay_peak(const cmh_snapshot *s, int device, cmh_mem_stats *end, cmh_peak_report *p);
/* cmh_summary_compute, and from the same replay the peak's totals (p: no sites; the state the
 * replay inferred before the first entry, which summary's table has no row for). */
/* memory_summary's "cudaMalloc retries" of s, given the OOMs the program saw and the retries its
 * trace shows: a PyTorch snapshot's OOMs each had one (its malloc retries once before it gives
 * up), so never fewer than its OOMs there. */
uint64_t cmh_alloc_retries(const cmh_snapshot *s, uint64_t ooms, uint64_t retries);
int cmh_summary_compute_peak(const cmh_snapshot *s, int device, cmh_mem_stats *out, cmh_peak_report *p);

/* What the memo's replay of a device saw, kept when asked for (cmh_replay_memo_history): the
 * allocated and reserved bytes after each entry, and each active block appearing and going in
 * the order a cmh_replay_observer is told of them.  A report page's plot, leaks and viewer read
 * it instead of replaying the trace once each. */
typedef struct cmh_block_event {
    uint64_t addr;
    int64_t delta;  /* +size: the block appears; -size: it is freed */
    uint32_t pos1;  /* the replay's entry + 1: 0 before the first entry, n + 1 at the reconciliation */
    uint32_t stack;
} cmh_block_event;

typedef struct cmh_replay_history {
    int64_t n;                    /* the device's trace entries */
    const int64_t *allocated;     /* n: allocated bytes (every pool) after entry i */
    const int64_t *reserved;      /* n: reserved bytes after entry i */
    int64_t allocated0, reserved0; /* before the first entry */
    int64_t allocated_end, reserved_end; /* after the reconciliation with the final segments */
    const cmh_block_event *ev;
    uint64_t nev;
} cmh_replay_history;

/* While the memo is kept for s: keep each device's history too (the memory: 16 bytes an entry
 * and 24 a block's event; only a report page asks). */
void cmh_replay_memo_history(const cmh_snapshot *s);
/* Device's history, from the memo's one replay (made now if not yet): valid until the memo
 * ends; NULL when no history is kept (no memo, not asked for, out of memory: replay instead). */
const cmh_replay_history *cmh_memo_history(const cmh_snapshot *s, int device);

/* ---- steps: where each iteration of a training loop begins (analyzer/steps.c) ---- */

/* How the steps were found: the program's marks (cmh_mark, cumemhist.mark(), a range's start,
 * SIGUSR2), PyTorch's annotations that name a step (ProfilerStep#N, Optimizer.step#...,
 * a record_function range named like a step), the allocation pattern of the trace itself (the
 * loop's period), or not at all. */
enum { CMH_STEPS_UNKNOWN = 0, CMH_STEPS_MARKS, CMH_STEPS_ANNOTATIONS, CMH_STEPS_PATTERN };
#define CMH_STEPS_MAX_POINTS 513

/* Step i runs from points[i] to points[i + 1] (entry positions of the device's trace, each the
 * state before that entry; the trace's length is its end).  With more steps than points hold,
 * the points are every stride-th boundary and count is a multiple of stride. */
typedef struct cmh_steps {
    int source;        /* CMH_STEPS_* */
    uint32_t count;    /* steps (0: unknown) */
    uint32_t stride, npoints;
    int64_t *points;   /* owned; free with cmh_steps_free */
    uint64_t period;   /* entries per step (the median; of the latest shape, with shapes > 1) */
    uint32_t shapes;   /* PATTERN: the loop's shapes, one after another (a schedule's phases) */
    uint32_t thread;   /* 0: the record's entries; else those of one recording thread */
    int thread_lives;  /* PATTERN: each step is one recording thread's whole life */
    char label[64];    /* the family of marks or annotations ("step", "ProfilerStep") */
    /* MARKS, ANNOTATIONS: of the marks (annotations) that begin steps, those of other devices,
     * placed among this device's entries by time: all of them when this device has none of the
     * family (a PyTorch snapshot's annotations are the device current when they were made; a
     * record made before a mark was the process's), else the first ones, made before this device
     * was first used (recorder/marks.c writes a mark into the devices used so far) */
    uint32_t borrowed;
    uint32_t marks;    /* MARKS, ANNOTATIONS: the marks (annotations) that begin steps */
    /* PATTERN, where the record's marks (annotations) gave steps too few to judge growth by
     * (CMH_LEAK_MIN_STEPS) and the pattern enough: those steps' count, source and family (a
     * user's one 'step 0' mark before the loop read 'steady' for a leak growing every iteration) */
    uint32_t few_count;
    int few_source;
    char few_label[64];
} cmh_steps;

/* Was the snapshot taken while the process ran (`snapshot PID`, top and the exporter's reads of
 * its flight record, a SIGUSR1 or cmh_dump_snapshot dump)?  Its ending says so.  Then the record
 * ends mid-step as a rule: the step in flight is cut where the snapshot was taken. */
int cmh_snapshot_running(const cmh_snapshot *s);
/* Is the stretch after the last step boundary, `tail` of the record's entries (or events), a
 * whole step where a step holds `step`?  At the end of a run, when it holds half a step: the
 * last iteration may stop short of the others' (a buffer kept to the end).  In a snapshot of a
 * running process, only when it holds a whole step: what is less is the step in flight, partial,
 * and no step of the record's (a buffer made and freed every iteration, cut between the two,
 * read 'state' at one cut and 'steady' at the next). */
int cmh_steps_tail_whole(const cmh_snapshot *s, uint64_t tail, uint64_t step);
/* The steps of device's trace as the replay r has it (every entry, or thread's own); sites group
 * the allocations for the pattern (NULL: by stack).  CMH_OK or CMH_ENOMEM; count 0 when none
 * were found.  Reads the replay's entries only (the replay need not have been stepped). */
int cmh_steps_find(const cmh_snapshot *s, int device, const cmh_replay *r, const cmh_sites *sites, uint32_t thread, cmh_steps *out);
/* The record's steps (thread 0) without a replay of the caller's: the memo's when it has them. */
int cmh_steps_of(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_steps *out);
void cmh_steps_free(cmh_steps *st);
/* The points before the series' first entry: steps begun by other devices' marks before this
 * device was first used, which hold none of its entries (0: none; the last step always counts). */
uint32_t cmh_steps_lead(const cmh_steps *st);
/* The steps from the one holding the series' first entry on: those its growth is judged over. */
uint32_t cmh_steps_active(const cmh_steps *st);

/* The leak verdict (docs/DEFINITIONS.md).  A leak is memory that grows from one step of the
 * loop to the next.  A site's held bytes at a step boundary are those of its blocks live there
 * and still live at the next boundary (or, for the last, at the end): a step's temporaries,
 * another thread's, never count.  A site is
 *  - GROWING when, over at least CMH_LEAK_MIN_STEPS steps, its held bytes rose across at least
 *    half of a recent stretch of steps after the first (and at least 3 of them), ending at the
 *    last, trending up (Kendall's tau at least CMH_LEAK_MIN_TREND);
 *  - STOPPED when it is not growing now, but its held bytes rose across CMH_LEAK_MIN_RISES steps
 *    or more after the first (as a leak's must), then rose no more, and it still holds bytes: a
 *    leak that stopped, or a cache filled over many steps (8 MiB a step for 10 steps of 20, then
 *    none, 80 MiB never freed: it read 'state', and --fail-on-leak passed it);
 *  - STATE when it holds bytes across steps, is not growing and did not grow over several steps
 *    (weights, optimizer state made in the first step, a cache filled in the first two or three);
 *  - STEADY when what it holds at the end came in the last step and the like went in each one
 *    before (activations, gradients: back to the same level every step);
 *  - AFTER when it would be STEADY but its first allocation came once the last step had begun:
 *    no step before made the like (an evaluation buffer, a checkpoint made after the loop);
 *  - RISING when there are too few steps to judge but it rose across each of them (2 or more);
 *  - UNJUDGED when the steps are unknown.
 * When the record knows its threads (a recorder snapshot), each thread's own entries are cut
 * into steps too, and a site that one thread kept growing is growing, however short that
 * thread's life was next to the record's. */
enum { CMH_LEAK_UNJUDGED = 0, CMH_LEAK_STATE, CMH_LEAK_STEADY, CMH_LEAK_RISING, CMH_LEAK_GROWING, CMH_LEAK_AFTER, CMH_LEAK_STOPPED };
#define CMH_LEAK_MIN_STEPS 4 /* one to warm up, three to rise across */
/* A growth rate is a trend, and a trend needs as many observations as a leak verdict does: a
 * rate per step only over CMH_LEAK_MIN_STEPS steps (a RISING site says its rise, not a rate), a
 * rate per second only over a run of CMH_LEAK_RATE_MIN_NS at least (the rate's own unit: a
 * shorter run extrapolates) whose still-live memory was made in CMH_LEAK_MIN_STEPS of its
 * CMH_LEAK_RATE_SLICES equal stretches at least (else it came in bursts, not at a rate). */
#define CMH_LEAK_RATE_MIN_NS 1000000000ll
#define CMH_LEAK_RATE_SLICES 10
#define CMH_LEAK_MIN_RISES 3
/* steps that are whole threads' lives: a pool of a few workers, each keeping a warm-up cache,
 * is no leak; a thread per task that keeps memory as each appears, over this many, is */
#define CMH_LEAK_MIN_THREAD_RISES 5
#define CMH_LEAK_MIN_TREND 0.5
/* Growth without steps (docs/DEFINITIONS.md "Growth without steps"): a site the steps could not
 * judge is judged over the record cut in CMH_TIME_SLICES equal slices of time, from its first
 * entry to its last, by its bytes held through each slice (made by its start, still live at its
 * end: a request's or a step's temporaries never count).  Judged only where the record spans
 * CMH_TIME_MIN_NS at least, the site made CMH_TIME_MIN_ALLOCS allocations at least (freed or
 * not), and CMH_TIME_MIN_BUSY slices each hold CMH_TIME_SLICE_ALLOCS of them at least (else
 * they came in bursts).  Then
 *  - LEVEL: through the last slice it held no more than its most through any slice before,
 *    give or take the most it held less through one slice than through the one before (its
 *    churn): a cache that fills then plateaus, a level it returns to;
 *  - GROWING: it held the most through the last slice, more than through its lowest slice, which
 *    is CMH_TIME_MIN_GREW slices before the last or earlier; more through 3 in 5 of the slices
 *    since, 3 of the last 5 and each of the last 3, and over those 3 by more than
 *    CMH_TIME_DROPS times its churn;
 *  - UNSTEADY: neither (above its level, not steadily): not judged;
 *  - UNTIMED, SHORT, FEW, BURSTS: not judged, and why. */
enum { CMH_TIME_NONE = 0, CMH_TIME_UNTIMED, CMH_TIME_SHORT, CMH_TIME_FEW, CMH_TIME_BURSTS, CMH_TIME_UNSTEADY, CMH_TIME_GROWING, CMH_TIME_LEVEL };
#define CMH_TIME_SLICES 10 /* (cmh_site's time_held has room for 10) */
#define CMH_TIME_MIN_NS 1000000000ll
#define CMH_TIME_MIN_ALLOCS 40
#define CMH_TIME_SLICE_ALLOCS 2
#define CMH_TIME_MIN_BUSY 6
#define CMH_TIME_MIN_GREW 5
#define CMH_TIME_DROPS 3
/* What a growing site grew by: its rate times the steps it grew over, or, judged over the
 * record's time, its live bytes at the end less its lowest (0: none) */
uint64_t cmh_leak_grown_by(const cmh_site *x);
/* "growing", "level", "too short", ... (--json's over_time "verdict") */
const char *cmh_leak_time_name(int time_verdict);
/* Whether a site is a growth that stopped (CMH_LEAK_STOPPED): its held bytes rose across
 * CMH_LEAK_MIN_RISES steps or more after the first (points, where they are every stride-th step),
 * then no more (rises, flat_steps, growth_first, growth_steps, rate, top, warm_growth).  Its words
 * say so ("stopped: grew +8.0 MiB per step over steps 1-10, then flat for the last 10 steps; 80.0
 * MiB still held at the end, never freed": leakwords.h). */
int cmh_leak_site_stopped(const cmh_site *x);
/* "growing", "stopped", "state", "steady", "rising", "after", "unjudged" */
const char *cmh_leak_verdict_name(int verdict);

/* Physical memory made with cuMemCreate, held and mapped nowhere at the end, of one site. */
typedef struct cmh_vmm_site {
    const cmh_frame *site; /* the cuMemCreate call's site, in the snapshot's frames (NULL: no stack) */
    uint32_t stack;        /* the stack of its first handle, for its frames (0: none) */
    uint64_t bytes;
    uint32_t handles;
    /* its verdict over the record's steps, as a block site's (verdict, growing, rate, steps,
     * growth_steps, held, ...: cmh_leak_judge), each handle held from its cuMemCreate to the
     * end: a handle made each step and never released (cuMemRelease) grows like a block
     * allocated each step and never freed.  Growing ones count in leaking, stopped ones in
     * stopped. */
    cmh_site judged;
} cmh_vmm_site;

typedef struct cmh_leak_report {
    cmh_report_base base;
    cmh_site *sites; /* still live at the end, at least min_bytes */
    uint32_t nsites;
    /* every still-live block, whatever min_bytes hides */
    uint64_t live_bytes, live_blocks;
    uint32_t live_sites;
    /* physical memory made with cuMemCreate, held and mapped nowhere at the end (no block: the
     * .cmh vmm_unmapped table), its bytes and handles; judged for growth by site (vmm_sites) */
    uint64_t vmm_unmapped_bytes;
    uint32_t vmm_unmapped_handles;
    /* the same handles by the site of their cuMemCreate call (the site rules of `sites`, else
     * the call's innermost frame), largest first, then by stack: every writer lists these */
    cmh_vmm_site *vmm_sites;
    uint32_t nvmm_sites;
    uint32_t leaking;      /* sites growing (min_bytes hides none of them from the count) */
    uint32_t stopped;      /* sites stopped (grew over several steps, then no more, still held), */
    uint64_t stopped_bytes; /* and what they hold (min_bytes hides none) */
    uint32_t hidden_sites; /* left out of sites by min_bytes, and their bytes */
    uint64_t hidden_bytes;
    cmh_steps steps;       /* the record's steps (owned by the report) */
    /* recording threads holding still-live blocks, and those of them with CMH_LEAK_MIN_STEPS
     * steps of their own (the verdict is judged per thread too) */
    uint32_t threads, threads_judged;
    /* the record's steps are the scheduler's: no marks or annotations, and two recording threads
     * or more that repeat steps of their own interleave their entries as they race, so a pattern
     * across them (steps, when one is found at all) changes from run to run ('steps: 39 ...
     * (period 65 entries)', then 'steps: 160 ... (period 16 entries)').  The words then give the
     * threads' own steps, which do not: race_threads threads with CMH_LEAK_MIN_STEPS steps of
     * their own or more, race_steps_min..max of them, race_period_min..max entries a step.  And
     * judged is then the threads': each thread holding still-live blocks repeats steps of its
     * own, or made all of them before the first of the other threads' steps (set-up) */
    int steps_raced;
    uint32_t race_threads, race_steps_min, race_steps_max;
    uint64_t race_period_min, race_period_max;
    /* growth could be judged: the record has CMH_LEAK_MIN_STEPS steps, or every thread holding
     * still-live blocks has, or nothing is still live; a gate that cannot judge must not pass */
    int judged;
    /* why not, where judged is 0 and the steps are not too few (CMH_UNJUDGED_*): the threads race
     * and still-live memory lies outside every thread's steps; unjudged_thread: the thread (with
     * CMH_UNJUDGED_THREAD_STEPS) whose steps are too few, unjudged_thread_steps of them */
    int unjudged_why;
    uint32_t unjudged_thread, unjudged_thread_steps;
    /* the record's still-live blocks made during it (not before its first entry): their bytes
     * and count, in how many of the run's CMH_LEAK_RATE_SLICES stretches they were made, and the
     * time its entries span: what `leaks` says of growth when no step can be found.  run_rate:
     * grew_bytes per second over run_ns, where such a rate means something (CMH_LEAK_RATE_MIN_NS
     * and CMH_LEAK_MIN_STEPS stretches), else 0 */
    uint64_t grew_bytes, grew_blocks;
    uint32_t grew_slices;
    int64_t run_ns;
    double run_rate;
    /* the process's own run as the record says it (its start to the snapshot: meta start_time_ns
     * to dump_time_ns), 0 when not known: longer than run_ns when it held still before or after */
    int64_t process_ns;
    /* sites judged over the record's time (steps not found): growing (also in leaking), level;
     * time_unjudged: still-live sites neither the steps nor the time could judge */
    uint32_t time_growing, time_level, time_unjudged;
} cmh_leak_report;

int cmh_leaks_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, uint64_t min_bytes, cmh_leak_report *out);
/* The steps cmh_leaks_compute judges by, without judging anything (a timeline's step marks): out's
 * steps (the record's, as leaks has them), steps_raced and race_* only, the rest zero.  Where the
 * recording threads race (steps_raced), leaks judges by each thread's own steps: *threads then
 * holds those of each thread with CMH_LEAK_MIN_STEPS or more (st.thread says which), *nthreads of
 * them; free each with cmh_steps_free, then free(*threads), and out with cmh_leak_report_free.
 * CMH_OK or CMH_ENOMEM. */
int cmh_leak_steps_judged(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_leak_report *out, cmh_steps **threads, uint32_t *nthreads);
/* Why growth could not be judged (cmh_leak_report.unjudged_why).  The threads race, so each
 * still-live block counts over the steps of the thread that made it, and:
 *  - BEFORE_HISTORY: some were made before the record's first entry (a ring dropped their
 *    allocations, --max-entries), by no thread the record knows, in no step of any;
 *  - NO_THREAD: some were made by entries that name no recording thread;
 *  - THREAD_STEPS: some were made during the others' steps by a thread with too few of its own.
 * (STEPS, 0: the steps are unknown or too few.)  A ring-limited record of racing threads read
 * 'growth cannot be judged: too few steps (6 of the 4 needed)'. */
enum { CMH_UNJUDGED_STEPS = 0, CMH_UNJUDGED_BEFORE_HISTORY, CMH_UNJUDGED_NO_THREAD, CMH_UNJUDGED_THREAD_STEPS };
/* "too_few_steps", "made_before_history", "no_thread", "thread_too_few_steps" (--json's unjudged_reason) */
const char *cmh_leak_unjudged_name(int why);
/* A site's verdict from its judgments over each of the n recording threads that hold its
 * blocks (one[i]: judged over thread[i]'s own steps and its share of the blocks): growing when
 * one of them grows (the growing threads named, their rates summed), else state when one holds
 * bytes across its steps, else steady.  Deterministic: each thread's own entries come in the
 * order it made them, however the threads interleaved. */
void cmh_leak_combine_threads(cmh_site *x, const cmh_site *one, const uint32_t *thread, uint32_t n);
/* A site's verdict over steps st, from its held bytes L[0 .. st->npoints) at their points (end:
 * the record's entries, where a last point at it closes the last step): every member of x that
 * the verdict sets (verdict, growing, steps, rises, stride, flat_steps, growth_steps,
 * growth_first, rate, top, warm_growth, trend, held).  Then _late, for a site whose first still-live block came at entry first: AFTER
 * when it is STEADY and that came once the last step had begun. */
void cmh_leak_judge(const cmh_steps *st, const int64_t *L, int64_t end, cmh_site *x);
void cmh_leak_judge_late(const cmh_steps *st, int64_t first, int64_t end, cmh_site *x);
void cmh_leak_report_free(cmh_leak_report *r);

/* free = reserved - allocated = releasable + trapped + pending_free (cmh_free_split):
 * pending_free is what the program freed whose stream work has not completed (not yet in a free
 * gap); fragmentation = trapped / reserved, the share of reserved memory that is free and yet
 * neither given back by empty_cache() nor usable by a request larger than its gaps. */
typedef struct cmh_frag_seg {
    uint32_t index;
    uint64_t addr, reserved, allocated, free, pending_free, largest_gap, releasable, trapped;
    double fragmentation; /* trapped / reserved */
    /* expandable: one of PyTorch's expandable segments (PyTorch's own snapshot says it, or the
     * caching allocator's stack mapped it); vmm: a range another caller mapped with cuMemMap
     * (NCCL's buffers, a library's own VMM allocator), which PyTorch never sees, its owner vmm_owner
     * (an index into the report's vmm_owners) */
    int expandable, vmm;
    uint32_t vmm_owner;
    /* a private pool's segment (segment_pool_id not (0, 0): a CUDA graph's, a MemPool's): its free
     * bytes are private_free, neither releasable nor trapped (cmh_free_split) */
    int private_pool;
    uint64_t pool_id[2], private_free;
} cmh_frag_seg;

/* A stream-ordered pool's cache at the end (frag's pool_cache, pool by pool): what it keeps
 * beyond what it hands out, which no segment of the list holds.  kind: CMH_POOL_DEFAULT,
 * CMH_POOL_PRIVATE, 0 not said.  The segments' reserved and the pools' caches sum to reserved. */
#define CMH_FRAG_POOLS 64
typedef struct cmh_frag_pool {
    uint64_t pool, cache;
    uint32_t kind;
} cmh_frag_pool;

typedef struct cmh_oom_event cmh_oom_event;
typedef struct cmh_frag_report {
    cmh_report_base base;
    cmh_frag_seg *segs; /* at the end of the record */
    uint32_t nsegs;
    uint64_t reserved, allocated, free, pending_free, largest_gap, releasable, trapped, pool_cache;
    /* of trapped, what expandable segments hold: the parts of their free runs short of a whole
     * page (empty_cache() unmaps whole pages only: page_small, page_large bytes, the record's
     * cmh_expandable_page), and whether the small or the large pool has any */
    uint64_t trapped_expandable, page_small, page_large;
    int trapped_expandable_small, trapped_expandable_large;
    /* the expandable segments at the end (contiguous mapped ranges) and their free bytes:
     * PyTorch's memory_summary() counts them in neither GPU reserved segments nor Non-releasable
     * memory (its inactive_split leaves them out), so summary's 0 there and frag's figures are
     * two definitions, each report saying the other's (trapped_expandable: of their free, what
     * no empty_cache() unmaps) */
    uint32_t expandable_segs;
    uint64_t expandable_free;
    /* the other callers' cuMemMap ranges at the end (cmh_frag_seg.vmm), by owner as owners names
     * them ("NCCL (libnccl.so.2)"; "unknown (recorded without a stack)"): PyTorch's words
     * (expandable segments, empty_cache(), memory_summary()) are not theirs.  The first
     * CMH_FRAG_VMM_OWNERS owners by name; the rest summed in the last (nvmm_owners says) */
    uint32_t vmm_segs;
    uint64_t vmm_reserved, vmm_free;
    struct cmh_frag_vmm_owner {
        char name[96];
        uint32_t segs;
        uint64_t reserved;
    } vmm_owners[8];
    uint32_t nvmm_owners;
    cmh_frag_pool pools[CMH_FRAG_POOLS]; /* pool_cache pool by pool (npools of them, each with a cache) */
    uint32_t npools;
    uint64_t private_free; /* free inside private pools' segments; largest_gap is the default pool's */
    uint32_t private_segs;
    double fragmentation;
    int has_oom;
    uint32_t nooms;
    /* the last OOM, as cmh_oom_compute states it at that moment (its sites left out) */
    struct cmh_oom_event_state {
        int64_t index, time_ns;
        uint64_t request, device_free, allocated, reserved, free_inside, pending_free, largest_gap;
        uint64_t releasable, trapped, private_free, own_pool, usable, unusable;
        uint64_t request_pool[2];
        int verdict;
        /* as cmh_oom_compute's event: number (1, 2, ...) among the OOMs the program saw, 0 for
         * one the allocator retried (retried, retry_index the entry asking again: the last OOM's
         * retry met no OOM after it, so it succeeded) */
        uint32_t number;
        int retried;
        int64_t retry_index;
        uint64_t gap_unknown_in; /* as the event's: largest_gap is outside a pool's cache this big */
        uint32_t trap_stack, trap_group, trap_segs, trap_sites; /* as the event's trap_* */
        uint64_t trap_free;
    } last_oom;
} cmh_frag_report;

int cmh_frag_compute(const cmh_snapshot *s, int device, cmh_frag_report *out);
/* The same, its last OOM judged with sites' grouping (its trapping site then the one `oom`, given
 * the same grouping, names: cmh_oom_event.trap_*); NULL: by stack, as cmh_frag_compute. */
int cmh_frag_compute_sites(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_frag_report *out);
/* What keeps a segment from being given back: its live blocks (allocated, or freed with stream
 * work pending).  Of them, by group (sites' grouping; NULL: by stack), the group holding the most
 * bytes there (the lowest group among equals): group, its largest block's stack (stack 0 with no
 * live block), its bytes; nsites the groups among them.  Not the segment's creator: the site
 * whose 48 MiB made a segment and was freed has nothing left in it to free, a 1 MiB block
 * another site keeps in it holds its free bytes.  Every report names it by this rule. */
typedef struct cmh_holder {
    uint32_t group, stack, nsites;
    uint64_t bytes;
} cmh_holder;
/* The holder of one segment's live blocks v[0 .. n) (blocks of any state; inactive ones are not
 * live).  CMH_OK, or CMH_ENOMEM. */
int cmh_holder_pick(const cmh_sites *sites, const cmh_live_block *v, uint32_t n, cmh_holder *out);
/* The holder of segment seg (an index into s->segments), from its blocks in the snapshot. */
int cmh_segment_holder(const cmh_snapshot *s, const cmh_sites *sites, uint32_t seg, cmh_holder *out);
void cmh_frag_report_free(cmh_frag_report *r);
/* The order every segment table lists them in (frag, the report), said in its header: the most
 * free bytes first (where memory can be had back or is trapped), then the largest segment (a
 * fully used one by its size, not its address), then the address. */
void cmh_frag_sort(cmh_frag_report *r);
#define CMH_FRAG_ORDER "trapped_desc,free_desc,reserved_desc,address"
/* the same order in words, as frag and the report say it above their segment tables */
#define CMH_FRAG_ORDER_WORDS "trapped bytes (free that empty_cache() cannot give back), most first, then by free bytes, then by size, largest first"
/* How segs[from..to) are used: fully (no free byte; their reserved bytes), not at all (nothing
 * allocated), partly; and their reserved and free bytes. */
typedef struct cmh_frag_use {
    uint32_t full, empty, part;
    uint64_t full_bytes, reserved, free;
} cmh_frag_use;
cmh_frag_use cmh_frag_count_use(const cmh_frag_report *r, uint32_t from, uint32_t to);

/* Why a request failed: DEMAND when the bytes were in use, FRAGMENTATION when enough were free
 * (inside the segments, plus what the device had left) but no free gap was large enough,
 * FIT_IGNORED when a free gap was large enough (another stream's or pool's, which the allocator
 * may not use for this request), DRIVER when the device alone said it had enough free and the
 * allocation failed all the same (a limit on the process, another process at that instant, the
 * driver's own fragmentation): nothing inside the recorded segments was needed. */
enum { CMH_OOM_DEMAND = 0, CMH_OOM_FRAGMENTATION = 1, CMH_OOM_FIT_IGNORED = 2, CMH_OOM_DRIVER = 3, CMH_OOM_PRIVATE_POOL = 4,
       CMH_OOM_TOO_LARGE = 5, CMH_OOM_POOL_CACHE = 6,
       CMH_OOM_POOL_PIECES = 7,
       /* DEMAND where most of the device's used memory (owners' figure at the error, from the
        * cuMemGetInfo samples) was held outside the program: not recorded (the CUDA context,
        * other processes); cmh_oom_event.outside */
       CMH_OOM_OUTSIDE = 8,
       /* what the record lacks decides it: the device's free bytes at the error are not known (an
        * OOM entry without device_free, a failed cuMemGetInfo) and what was free inside the
        * segments was less than the request, so the rest may have been free on the device
        * (fragmentation, a refusal with room) or in use (demand): not said to be either */
       CMH_OOM_UNKNOWN = 9 };
int cmh_oom_verdict(uint64_t request, uint64_t free_inside, uint64_t largest_gap, uint64_t device_free);
/* The same, where private_free of free_inside is what the request's pool could not use (other
 * pools' segments: a CUDA graph's, a MemPool's, and for a private pool's request the default
 * pool's gaps; cmh_free_split.unusable) and largest_gap is the request's pool's: PRIVATE_POOL
 * when the request would have been met only with that memory (what its pool could use and the
 * device's free were too few). */
int cmh_oom_verdict_pools(uint64_t request, uint64_t free_inside, uint64_t private_free, uint64_t largest_gap,
                          uint64_t device_free);
/* POOL_CACHE: a request from outside a stream-ordered pool (a plain cuMemAlloc, PyTorch's
 * allocator; not cuMemAllocAsync) that would have been met only with what such pools keep after
 * their frees (cmh_free_split.pool_cache, their release threshold): none of it is the request's
 * to use, empty_cache() does not give it back, cuMemPoolTrimTo does.  The same as
 * cmh_oom_verdict_pools, where pool_cache of private_free is that cache. */
int cmh_oom_verdict_cache(uint64_t request, uint64_t free_inside, uint64_t private_free, uint64_t pool_cache, uint64_t largest_gap,
                          uint64_t device_free);
/* TOO_LARGE, a demand that nothing the process held explains: the request is more than the
 * device's free bytes and all the process had reserved on it together (a tensor of the wrong
 * shape, a batch too large for the device), so freeing or settings cannot help.  Never with
 * device free not known (CMH_DEVICE_FREE_UNKNOWN: the verdict is UNKNOWN there).  An event's verdict is DEMAND
 * turned TOO_LARGE where this says so. */
int cmh_oom_too_large(uint64_t request, uint64_t reserved, uint64_t device_free);
/* The verdict in one word ("demand"), and as every report says it in a sentence.  The sentence
 * of a PyTorch record (cmh_record_pytorch) names PyTorch's remedies; cmh_oom_verdict_advice()
 * with pytorch 0 gives a plain driver-API program's (a limit from the environment, MPS's
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, rather than set_per_process_memory_fraction; no empty_cache()). */
const char *cmh_oom_verdict_name(int verdict);
const char *cmh_oom_verdict_text(int verdict);
const char *cmh_oom_verdict_advice(int verdict, int pytorch);
/* PyTorch's own record, one merged with it, or one whose modules include PyTorch's libraries:
 * where advice may name PyTorch's settings and calls. */
int cmh_record_pytorch(const cmh_snapshot *s);

/* free_inside = reserved - allocated (pending_free of it awaits stream work); largest_gap is the
 * largest free run inside one segment. */
struct cmh_oom_event {
    int64_t index, time_ns;
    /* the allocator's retry: its thread freed retry_freed bytes of cached segments (maybe none)
     * and asked for the same size again (the next OOM, or a success): memory_summary's
     * "cudaMalloc retries" */
    int retried;
    uint64_t retry_freed;
    /* where, and what came of it: retry_index the entry asking again, retry_failed when that
     * is the next OOM (-1, 0 when not retried); retry_of: this one asks again after the OOM at
     * that entry (-1: a request of its own).  number: 1, 2, ... among the OOMs the program saw
     * (not retried: memory_summary's "CUDA OOMs"), 0 for a retried one.  Every writer numbers
     * and counts the OOMs by these, as summary counts them. */
    int64_t retry_index, retry_of;
    int retry_failed;
    uint32_t number;
    uint64_t request, device_free, allocated, reserved, free_inside, pending_free, largest_gap;
    int fits_in_gap, verdict;
    /* the pool the request was of (its entry's pool_id, newer PyTorch; (0, 0) the default pool or
     * not said): split, largest_gap and the verdict are as that pool's request sees them */
    uint64_t request_pool[2];
    cmh_free_split split; /* free_inside - pending_free, split into releasable and trapped */
    /* usable + split.unusable = free_inside: what the request's pool could have used of it (its
     * own free, what empty_cache() gives back, frees pending on stream work) and not */
    uint64_t usable;
    /* a request from outside stream-ordered pools (not cuMemAllocAsync's, by the entry's kind;
     * an older record's: on no stream) cannot use what those pools keep: pool_cache_unusable of
     * split.pool_cache is in split.unusable; cache_pool the pool keeping most of it (its handle),
     * cache_pool_bytes how much */
    uint64_t pool_cache_unusable, cache_pool, cache_pool_bytes;
    /* a stream-ordered request's pool (its handle, as the recorder says it: 0 not said); only its
     * cache is the request's to use, the other pools' is in pool_cache_unusable */
    uint64_t request_driver_pool;
    /* a stream-ordered pool's request (cuMemAllocAsync's) can be served from what the pools keep,
     * but a record holds only their byte totals, not the pieces (the driver lays them out): the
     * largest gap inside that cache is not known.  gap_unknown_in: the pools' cache a pooled
     * request could use, whose pieces are not known (largest_gap is then the largest gap outside
     * it); 0 when the gap is fully known */
    uint64_t gap_unknown_in;
    uint32_t request_stack, request_group; /* who asked (the OOM entry's stack, 0 when none) */
    /* owners' split of the device at the error (a recorder's record with a cuMemGetInfo sample;
     * used_known 0 otherwise): the device's used and total bytes, and of used what is not
     * recorded (the CUDA context, other processes: owners' unexplained row) */
    int used_known;
    uint64_t device_used, device_total, outside;
    cmh_site *sites; /* holding memory at that moment */
    uint32_t nsites;
    /* A DEMAND driven by a leak (cmh_oom_growth): of the sites `leaks` calls growing (its
     * verdicts, cmh_leaks_compute's, over the same grouping), those holding memory at the error.
     * grew: the one that grew the most (rate x growth_steps; the lowest group among equals), as
     * leaks judged it; grew_held what it held at the error; ngrowing how many such sites (0: none,
     * or not asked). */
    uint32_t ngrowing;
    uint64_t grew_held;
    cmh_site grew;
    /* FRAGMENTATION: what kept the free bytes inside segments apart at the error.  Each segment
     * holding live blocks and free bytes has a holder (cmh_holder_pick, the rule frag names each
     * segment's by); trap_group the holder of the most of those free bytes (the lowest group
     * among equals), trap_stack its stack, trap_free the free bytes of the segments it holds,
     * trap_segs how many; trap_sites the holders in all.  trap_stack 0: none (or not judged). */
    uint32_t trap_stack, trap_group, trap_segs, trap_sites;
    uint64_t trap_free;
};

typedef struct cmh_oom_report {
    cmh_report_base base;
    cmh_oom_event *events; /* every OOM entry, retried or not, in trace order */
    uint32_t nevents;
    uint32_t failures, retries; /* of them: seen by the program (numbered), retried (memory_summary's two counts) */
    /* of failures, the OOMs the ring dropped (cmh_trace.dropped_ooms): the events are numbered
     * after them, the first kept one #dropped + 1 */
    uint32_t dropped;
} cmh_oom_report;

int cmh_oom_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_oom_report *out);
/* The growing sites behind p's DEMAND errors (cmh_oom_event.grew, ngrowing): leaks' verdicts,
 * computed over the same grouping as p (sites), so that oom and leaks name the same site.
 * CMH_OK or CMH_ENOMEM (p is then as it was). */
int cmh_oom_growth(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_oom_report *p);
void cmh_oom_report_free(cmh_oom_report *r);

/* The snapshot's first out-of-memory error the program saw (the one `oom` numbers #1 on its
 * device: retries that succeeded are passed over, cmh_oom_retried) by time, the lowest device's
 * first without times; when every OOM of the record was such a retry, the first of those: its
 * device, its index in that device's trace and its time.  0 when there is none; 1 when it is
 * the record's first; 2 when OOMs of several devices lack times, so which came first is not
 * known: it is then the lowest device's, a pick, to be said as one (not "the record's first"). */
int cmh_first_oom(const cmh_snapshot *s, int *device, int64_t *index, int64_t *time_ns);
/* One OOM the program saw, in the record's order (cmh_record_ooms). */
typedef struct cmh_record_oom {
    int32_t device;
    uint32_t number;  /* oom's number on its device (#1, #2, ...: after the ones the ring dropped) */
    int64_t index;    /* in the device's trace */
    int64_t time_ns;  /* 0: not known */
    uint32_t rank;    /* 1, 2, ...: its place among every device's (1: the record's first); 0 for
                       * all when that order is not known (cmh_record_ooms_ordered) */
} cmh_record_oom;
/* Every OOM the program saw that the record keeps (retries left out, as oom numbers them), on
 * every device, in the record's order: by time (those without one last), then device, then
 * index.  The first is cmh_first_oom's, the one whatif and --at oom look at, and the one oom
 * calls the record's first.  *out malloc'd (free it; NULL with none).  CMH_OK or CMH_ENOMEM. */
int cmh_record_ooms(const cmh_snapshot *s, cmh_record_oom **out, uint32_t *n);
/* Whether the order of v (cmh_record_ooms) across devices is known: the OOMs are on one device,
 * or every one has a time.  Where it is not, the list is by device then index, and its ranks 0. */
int cmh_record_ooms_ordered(const cmh_record_oom *v, uint32_t n);
/* The same within trace t: the index of its OOM #1 (else of its first retried OOM), -1 if none;
 * *asked, the entry where that request first failed (#1 itself, or the first OOM of the request
 * whose failed retries ended in it). */
int64_t cmh_oom_first(const cmh_snapshot *s, const cmh_trace *t, int64_t *asked);
/* The number (1, 2, ... as cmh_oom_compute numbers them) of the OOM that the request failing at
 * OOM entry i of trace t ended in: i's own when it was not retried, else its failed retry's, and
 * so on; *seen_at that OOM's index.  0 (and *seen_at -1) when a retry of it succeeded.  One pass
 * over the trace (every OOM's retry decided as the entries come), however many OOMs it has. */
uint32_t cmh_oom_number(const cmh_snapshot *s, const cmh_trace *t, uint32_t i, int64_t *seen_at);
/* Every OOM's cmh_oom_retry of t's entries [0, end) in one pass (at, end slots): at[i] the index of
 * OOM i's retry, 0 where it was not retried (and for every other entry).  CMH_OK or CMH_ENOMEM. */
int cmh_oom_retry_table(const cmh_snapshot *s, const cmh_trace *t, uint32_t end, uint32_t *at);
/* Whether OOM entry i of trace t was an allocator's retry rather than a failure the program
 * saw: in a record of our recorder (driver calls), its thread then freed segments or trimmed a
 * pool (*freed: their bytes, 0 when nothing was), and asked the driver for the same size, on the
 * same stream, again before anything else (PyTorch counts its retries so, whether or not
 * anything was freed) -- and the record shows an allocator above the driver that caught the
 * error: CMH_RETRY_ALLOCATOR, one reports blocks (cmh_oom_above); CMH_RETRY_SAME_STACK, the same
 * call stack asked again (a caching layer that retries where it failed).  Otherwise the error
 * went back to the program (it freed something of its own and asked again from elsewhere, or the
 * record kept no stacks to tell): 0, an OOM it saw.  PyTorch's own snapshots record an OOM only
 * once the allocator gave up: 0 there. */
enum { CMH_RETRY_ALLOCATOR = 1, CMH_RETRY_SAME_STACK = 2, CMH_RETRY_ASK = 3 };
int cmh_oom_retried(const cmh_snapshot *s, const cmh_trace *t, uint32_t i, uint64_t *freed);
/* The same, and where: *at, the entry of t asking again (an OOM entry when that failed too). */
int cmh_oom_retry(const cmh_snapshot *s, const cmh_trace *t, uint32_t i, uint64_t *freed, uint32_t *at);
/* Whether an allocator above the driver stands between OOM entry i of trace t and the program:
 * PyTorch's (a pickle, a record co-recorded or merged with PyTorch's part, or one of a process
 * that loaded PyTorch's CUDA allocator, cmh_torch_allocator_module: its retries come from
 * another line of its malloc, so no stack tells them), or one that reported blocks
 * (cmh_block_alloc) on t within CMH_OOM_RETRY_WINDOW entries before the OOM. */
int cmh_oom_above(const cmh_snapshot *s, const cmh_trace *t, uint32_t i);
/* Whether a module's path is PyTorch's CUDA allocator's library (libc10_cuda*). */
int cmh_torch_allocator_module(const char *path);
/* The rule itself, one entry at a time, for a reader that sees a trace grow (the live reader):
 * entry e, at most CMH_OOM_RETRY_WINDOW entries after the OOM of request q, says CMH_RETRY_*:
 * the OOM was retried (CMH_RETRY_ASK: the same request from another stack, and q->above not
 * known: retried when cmh_oom_above says so); 0: it was not; -1: not yet (*freed adds a segment
 * given back, and `released`, what a pool_sample entry's pool gave back).  An OOM still
 * undecided at a trace's end, or past the window, was not retried. */
#define CMH_OOM_RETRY_WINDOW 100000u
typedef struct cmh_oom_request {
    uint32_t thread, stack; /* the OOM entry's thread and stack (0: none recorded) */
    uint64_t size, stream;
    int above; /* cmh_oom_above: 1, 0, or -1 not known */
    const cmh_snapshot *s; /* the snapshot whose stacks these are (cmh_oom_same_call); NULL: the same stack only */
} cmh_oom_request;
/* Whether stacks a and b of s are the same call asking: the same stack, or the same function (its
 * name and module; any line of it) called from the same stack, that caller a function of the
 * program's (not a thread's start in the C library: main or a thread's function that frees a buffer
 * of its own and asks again from another line got the error back itself). */
int cmh_oom_same_call(const cmh_snapshot *s, uint32_t a, uint32_t b);
int cmh_oom_retry_step(const cmh_oom_request *q, const cmh_entry_full *e, uint64_t released, uint64_t *freed);
/* The OOMs of trace t that were retries (as cmh_oom_retried says) */
uint64_t cmh_oom_retries(const cmh_snapshot *s, const cmh_trace *t);

/* Each device's peaks (pinned host memory left out): device first, then the rest by what they
 * held, largest first.  peak_held: what the device held at its peak, as `peak` and owners say
 * it: the physical peak where cuMemCreate handles make it differ from the peak reserved
 * (physical 1), else the peak reserved.  Fills up to cap, *n says how many. */
typedef struct cmh_device_load {
    int device;
    uint64_t peak_reserved, peak_allocated, peak_held;
    int physical;
} cmh_device_load;
int cmh_device_balance(const cmh_snapshot *s, int device, cmh_device_load *loads, int cap, int *n);
/* Uneven load: device (first in loads) held at least CMH_UNEVEN_RATIO times the next device's
 * peak_held. */
#define CMH_UNEVEN_RATIO 2
int cmh_device_uneven(const cmh_device_load *loads, int n, int device);
/* Where to look first at an OOM, one answer: the leak that drove its demand (e->ngrowing, from
 * cmh_oom_growth) outranks an uneven load, which is the advice only where no leak grew. */
enum { CMH_LOOK_NONE, CMH_LOOK_LEAK, CMH_LOOK_UNEVEN };
int cmh_oom_look_first(const cmh_oom_event *e, int uneven);
/* A snapshot that holds nothing on any device yet lists several (PyTorch's of a process that
 * allocated nothing on its 4 GPUs): "4 devices listed (0, 1, 2, 3), each empty: nothing
 * allocated, no trace" in buf, else NULL (it holds something, or lists one device or none).  The
 * reports then show one device for all (cmh_snapshot_devices names none) and say this beside it. */
const char *cmh_devices_empty_text(const cmh_snapshot *s, char *buf, size_t cap);

/* ---- diff: what a change did, between two snapshots ---- */
/* How a site of one snapshot was found in the other: its frames say the same (function, file,
 * line, module); the same function and file name at another line or in another directory (an
 * edit above it moved it, another checkout); the same function where one side has no lines (its
 * binary was rebuilt before it was symbolized).  Sites are matched by function first (the site's
 * frame; grouped by stack, every frame's; grouped by file, the file's name), then file name, the
 * line only telling apart a function's several sites (cmh_diff_compute). */
enum { CMH_DIFF_ONE_SIDE = 0, CMH_DIFF_SAME, CMH_DIFF_MOVED, CMH_DIFF_BY_FUNCTION };

typedef struct cmh_diff_site {
    char *key; /* what the site's frames say, as text (the before side's where it has one) */
    const cmh_snapshot *snap; /* the snapshot it was first seen in (before, else after), and its group and stack there */
    uint32_t group, stack;
    int64_t before_end, after_end, before_peak, after_peak; /* live bytes at the end / at the peak */
    int match;                      /* CMH_DIFF_*: how the two sides' sites were matched */
    const cmh_snapshot *snap_after; /* match != CMH_DIFF_ONE_SIDE: the after side's site */
    uint32_t group_after, stack_after;
    char *key_after;
    uint32_t merged_after; /* CMH_DIFF_BY_FUNCTION: more sites of the after side in this row (the before side could not tell them apart) */
} cmh_diff_site;

typedef struct cmh_diff_report {
    cmh_peak_report peak[2]; /* before, after */
    uint32_t segments[2];    /* at the end */
    uint64_t ooms[2];        /* out-of-memory errors the program saw, as summary's CUDA OOMs counts them */
    double peak_growth_pct;  /* of peak allocated */
    /* device memory as the driver charges it (cmh_physical_peak: each cuMemCreate handle from
     * its making to its release, mapped or not), its peak and end; a side whose handles never
     * make it differ from reserved (known 0) has reserved's figures.  physical: either side's
     * known, the record has handles that count beyond reserved (held mapped nowhere, aliased):
     * rows of their own, and --fail-if-peak-grows judges phys_growth_pct too (a handle leak held
     * 80 MiB against 240 MiB and read 0 B / +0.0% on every row) */
    cmh_physical_peak phys[2];
    int physical;
    double phys_growth_pct;
    cmh_diff_site *sites;    /* by the size of the change, largest first */
    uint32_t nsites;
} cmh_diff_report;

/* sites_before / sites_after group each snapshot (both by the same cmh_group_by); NULL: by stack */
int cmh_diff_compute(const cmh_snapshot *before, int dev_before, const cmh_sites *sites_before, const cmh_snapshot *after,
                     int dev_after, const cmh_sites *sites_after, cmh_diff_report *out);
void cmh_diff_report_free(cmh_diff_report *r);

/* ---- kernels (CUPTI sidecar) ---- */
enum { CMH_KSORT_TOTAL = 0, CMH_KSORT_AVG, CMH_KSORT_CALLS, CMH_KSORT_MAX };

typedef struct cmh_kernel_row {
    uint32_t name; /* string id */
    uint64_t calls;
    int64_t total_ns, min_ns, max_ns;
    double avg_ns, pct; /* pct: share of all kernel time */
} cmh_kernel_row;

/* One row per kernel name, of one device or CMH_ALL_DEVICES, sorted (CMH_KSORT_*); *rows is
 * malloc'ed (the caller frees it) and left NULL on failure.  Thread-safe. */
int cmh_kernel_table(const cmh_snapshot *s, int device, int sort, cmh_kernel_row **rows, uint32_t *n, int64_t *gpu_total_ns);
/* On device at time t: the kernel running (latest started), and the last one completed. */
void cmh_kernels_at(const cmh_snapshot *s, int device, int64_t t, const cmh_kernel **running, const cmh_kernel **last_done);


#ifdef __cplusplus
}
#endif
#endif
