/*
 * devices.c - which device a question is about.  A command that answers about one event (an
 * out-of-memory error, "would a setting have avoided it") looks at the device where that event
 * happened, not at the lowest one: a multi-GPU job usually fails on one device, and that one is
 * rarely device 0.  And at such a failure the other devices say whether the load was even.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "oatab.h"

/* The first OOM of trace t by the retry rule: the first the program saw (*numbered 1), else,
 * when every one was a retry that succeeded, the first of those (*numbered 0); -1 when none.
 * *asked: where that request first failed (before its failed retries). */
static int64_t first_of(const cmh_snapshot *s, const cmh_trace *t, int *numbered, int64_t *asked)
{
    int64_t any = -1, chain = -1, again = -1;
    uint64_t freed;
    uint32_t at;
    *numbered = 0;
    *asked = -1;
    for (uint32_t i = 0; i < t->nentries; i++) {
        if (s->entries[t->first_entry + i].action != CMH_ACT_OOM) continue;
        if ((int64_t)i != again) chain = i; /* a request of its own, not the retry of the one before */
        if (!cmh_oom_retry(s, t, i, &freed, &at)) {
            *numbered = 1;
            *asked = chain;
            return i;
        }
        again = s->entries[t->first_entry + at].action == CMH_ACT_OOM ? (int64_t)at : -1;
        if (any < 0) any = *asked = i;
    }
    return any;
}

/* The record's order of two OOMs: by time, one without a time after those with one; then by
 * device, then by index (a total order: the same list sorts the same every time). */
static int record_cmp(const void *pa, const void *pb)
{
    const cmh_record_oom *a = pa, *b = pb;
    int ka = a->time_ns != 0, kb = b->time_ns != 0;
    if (ka != kb) return ka ? -1 : 1;
    if (a->time_ns != b->time_ns) return a->time_ns < b->time_ns ? -1 : 1;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

int cmh_record_ooms(const cmh_snapshot *s, cmh_record_oom **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0, len = 0;
    cmh_record_oom *v = NULL;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        uint32_t k = 0;
        for (uint32_t i = 0; i < tr->nentries; i++) k += s->entries[tr->first_entry + i].action == CMH_ACT_OOM;
        if (!k) continue;
        uint32_t *at = malloc((size_t)tr->nentries * sizeof *at);
        if (!at || cmh_oom_retry_table(s, tr, tr->nentries, at) != CMH_OK) {
            free(at);
            free(v);
            return CMH_ENOMEM;
        }
        /* numbered as cmh_oom_number numbers them: after the ring's dropped ones, each OOM that
         * no retry followed (a request whose retries failed too is numbered at its last) */
        uint32_t number = tr->dropped_ooms < UINT32_MAX ? (uint32_t)tr->dropped_ooms : UINT32_MAX;
        for (uint32_t i = 0; i < tr->nentries; i++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            if (e->action != CMH_ACT_OOM || at[i]) continue;
            if (len == cap) {
                size_t nc = cap ? cap * 2 : 16;
                cmh_record_oom *g = realloc(v, nc * sizeof *v);
                if (!g) {
                    free(at);
                    free(v);
                    return CMH_ENOMEM;
                }
                v = g, cap = nc;
            }
            v[len++] = (cmh_record_oom){tr->device, ++number, i, cmh_entry_time(s, e), 0};
        }
        free(at);
    }
    if (len > 1) qsort(v, len, sizeof *v, record_cmp);
    /* a place across devices is a fact only where times say it: without them the device order
     * above only makes the list the same every time, and no OOM is the record's first (rank 0) */
    int ordered = cmh_record_ooms_ordered(v, (uint32_t)len);
    for (size_t i = 0; i < len; i++) v[i].rank = ordered ? (uint32_t)i + 1 : 0;
    *out = v;
    *n = (uint32_t)len;
    return CMH_OK;
}

int cmh_record_ooms_ordered(const cmh_record_oom *v, uint32_t n)
{
    int several = 0, untimed = 0;
    for (uint32_t i = 0; i < n; i++) several |= v[i].device != v[0].device, untimed |= !v[i].time_ns;
    return !(several && untimed);
}

int cmh_first_oom(const cmh_snapshot *s, int *device, int64_t *index, int64_t *time_ns)
{
    /* the first of the record's order (cmh_record_ooms), so that oom's "the record's first" and
     * the OOM whatif and --at oom look at are one */
    cmh_record_oom *v;
    uint32_t nv;
    if (cmh_record_ooms(s, &v, &nv) == CMH_OK && nv) {
        *device = v[0].device;
        *index = v[0].index;
        *time_ns = v[0].time_ns;
        int known = v[0].rank == 1;
        free(v);
        return known ? 1 : 2;
    }
    free(v); /* (NULL: none, or no room) */
    /* none the program saw (every one a retry that succeeded), or no room for the list: */
    int found = 0, found_numbered = 0, untimed = 0, ndev = 0;
    for (uint32_t t = 0; t < s->ntraces; t++) {
        const cmh_trace *tr = &s->traces[t];
        int numbered;
        int64_t asked, i = first_of(s, tr, &numbered, &asked);
        if (i < 0) continue;
        const cmh_entry *e = &s->entries[tr->first_entry + i];
        int64_t at = cmh_entry_time(s, e);
        untimed |= !at;
        ndev++;
        /* one the program saw before any retry that succeeded; then the earliest by time;
         * without times, the lowest device's first */
        if (!found || numbered > found_numbered ||
            (numbered == found_numbered && ((at && at < *time_ns) || (at == *time_ns && tr->device < *device)))) {
            *device = tr->device;
            *index = i;
            *time_ns = at;
            found = 1;
            found_numbered = numbered;
        }
    }
    return found && untimed && ndev > 1 ? 2 : found;
}

int64_t cmh_oom_first(const cmh_snapshot *s, const cmh_trace *t, int64_t *asked)
{
    int numbered;
    *asked = -1;
    return t ? first_of(s, t, &numbered, asked) : -1;
}

/* One thread's OOM waiting for the entry that decides whether it was retried (the thread's next
 * driver allocation, OOM or block: cmh_oom_retry_step's answer other than -1). */
typedef struct pending_oom {
    uint64_t key; /* thread + 1 (oatab.h) */
    uint32_t at;  /* the OOM's index in the trace */
    uint64_t freed; /* what the thread gave back since (cmh_oom_retry_step's *freed) */
    cmh_oom_request q;
} pending_oom;

static uint64_t pool_released(const cmh_snapshot *s, const cmh_trace *t, uint32_t j);

/* cmh_oom_above's evidence that holds for the whole record (no entry of it): PyTorch's allocator */
static int above_in_record(const cmh_snapshot *s)
{
    if (s->source != CMH_SRC_RECORDER || s->torch) return 1;
    for (uint32_t m = 0; m < s->nmodules; m++)
        if (cmh_torch_allocator_module(cmh_str(s, s->modules[m].path))) return 1;
    return 0;
}

/* Which OOMs of t[0..end) were retried, as cmh_oom_retry says, in one pass: a thread's OOM is
 * decided by the next entry of the same thread that is a driver allocation, an OOM or a block,
 * and an OOM is one such, so each thread has one OOM waiting at most (reports.h).  Whether an
 * allocator above reported blocks before an OOM (cmh_oom_above's backward scan) is the latest
 * block's index, kept as the pass goes. */
int cmh_oom_retry_table(const cmh_snapshot *s, const cmh_trace *t, uint32_t end, uint32_t *at)
{
    memset(at, 0, (size_t)end * sizeof *at);
    if (s->source != CMH_SRC_RECORDER) return CMH_OK; /* PyTorch records an OOM once it gave up */
    int record_above = above_in_record(s);
    int64_t last_block = -1;
    cmh_oatab wait;
    cmh_oa_init(&wait, sizeof(pending_oom));
    for (uint32_t j = 0; j < end; j++) {
        const cmh_entry *e = &s->entries[t->first_entry + j];
        uint32_t th = cmh_entry_thread(s, e);
        pending_oom *p = cmh_oa_find(&wait, (uint64_t)th + 1);
        if (p) {
            cmh_entry_full f = {.size = cmh_entry_size(s, e), .stream = cmh_entry_stream(s, e), .thread = th,
                                .stack = e->stack, .action = e->action};
            uint64_t rel = e->action == CMH_ACT_POOL_SAMPLE && th == p->q.thread ? pool_released(s, t, j) : 0;
            int r = j - p->at > CMH_OOM_RETRY_WINDOW ? 0 : cmh_oom_retry_step(&p->q, &f, rel, &p->freed);
            if (r >= 0) {
                if (r) at[p->at] = j;
                cmh_oa_remove(&wait, p);
                p = NULL;
            }
        }
        if (e->action == CMH_ACT_ALLOC) last_block = j;
        if (e->action != CMH_ACT_OOM) continue;
        if (!p && !(p = cmh_oa_get(&wait, (uint64_t)th + 1, NULL))) {
            cmh_oa_free(&wait);
            return CMH_ENOMEM;
        }
        p->at = j;
        p->freed = 0;
        int above = record_above || (e->flags & CMH_EF_PYTORCH) || (last_block >= 0 && j - last_block <= CMH_OOM_RETRY_WINDOW);
        p->q = (cmh_oom_request){th, e->stack, cmh_entry_size(s, e), cmh_entry_stream(s, e), above, s};
    }
    cmh_oa_free(&wait);
    return CMH_OK;
}

uint32_t cmh_oom_number(const cmh_snapshot *s, const cmh_trace *t, uint32_t i, int64_t *seen_at)
{
    *seen_at = -1;
    if (!t || i >= t->nentries || s->entries[t->first_entry + i].action != CMH_ACT_OOM) return 0;
    /* Linear in the trace: the retries of every OOM up to where the request's retries end, found
     * in one pass; each OOM's own cmh_oom_retry (a scan of up to CMH_OOM_RETRY_WINDOW entries)
     * for every OOM before it made 20000 OOMs a few hundred million entry reads. */
    uint32_t *at = malloc((size_t)t->nentries * sizeof *at);
    if (!at) { /* no room: the same answer, an OOM at a time */
        uint64_t freed;
        uint32_t next;
        while (cmh_oom_retry(s, t, i, &freed, &next)) {
            if (s->entries[t->first_entry + next].action != CMH_ACT_OOM) return 0; /* met at last */
            i = next;
        }
        uint32_t n = t->dropped_ooms < UINT32_MAX ? (uint32_t)t->dropped_ooms : UINT32_MAX;
        for (uint32_t j = 0; j <= i; j++)
            if (s->entries[t->first_entry + j].action == CMH_ACT_OOM && !cmh_oom_retried(s, t, j, &freed)) n++;
        *seen_at = i;
        return n;
    }
    if (cmh_oom_retry_table(s, t, t->nentries, at) != CMH_OK) {
        free(at);
        return 0;
    }
    /* follow the request through its failed retries to the one the allocator gave up on */
    while (at[i]) {
        if (s->entries[t->first_entry + at[i]].action != CMH_ACT_OOM) { /* met at last */
            free(at);
            return 0;
        }
        i = at[i];
    }
    uint32_t n = t->dropped_ooms < UINT32_MAX ? (uint32_t)t->dropped_ooms : UINT32_MAX; /* the ring's: before the kept ones */
    for (uint32_t j = 0; j <= i; j++) n += s->entries[t->first_entry + j].action == CMH_ACT_OOM && !at[j];
    free(at);
    *seen_at = i;
    return n;
}

/* A retry is decided within CMH_OOM_RETRY_WINDOW entries after the OOM: an allocator frees its
 * cache (or finds nothing to free) and asks again at once, from the same thread, for the same
 * size, on the same stream.  But a driver call's error goes back to its caller: only evidence
 * that an allocator above the driver caught it and asked again makes it a retry.  q->above (one
 * reports blocks, or PyTorch's is in the process): whether anything was freed does not matter,
 * as PyTorch counts num_alloc_retries (release_cached_blocks(), then alloc_block(isRetry), even
 * with an empty cache).  Else the same call stack asking again is a caching layer's retry only
 * when segments were given back (or a pool trimmed) in between: asking again from one line
 * after freeing nothing is a program's own wait-and-retry loop, each failure an OOM it saw.  A
 * program that handles the error itself (frees a buffer, trims a pool, asks again from another
 * line) saw the OOM too. */
int cmh_oom_retry_step(const cmh_oom_request *q, const cmh_entry_full *e, uint64_t released, uint64_t *freed)
{
    if (e->thread != q->thread) return -1; /* another thread's: no part of this request */
    switch (e->action) {
    case CMH_ACT_SEGMENT_FREE:
    case CMH_ACT_SEGMENT_UNMAP: *freed += e->size; return -1;
    case CMH_ACT_POOL_SAMPLE: *freed += released; return -1; /* a pool trimmed: memory given back */
    case CMH_ACT_SEGMENT_ALLOC:
    case CMH_ACT_SEGMENT_MAP:
    case CMH_ACT_OOM:
        /* the thread asked for something else, or on another stream (a stream-ordered
         * allocation's OOM then a plain cuMemAlloc of the same size: another request) */
        if (e->size != q->size || e->stream != q->stream) return 0;
        if (q->above > 0) return CMH_RETRY_ALLOCATOR;
        /* the same call stack asking again is a caching layer's retry only when it gave memory
         * back first (a program's own loop that waits and asks again from one line, freeing
         * nothing, saw each failure: retry.c, 3 x 600 MiB, read "1 OOM, 2 retries") */
        if (q->stack && (e->stack == q->stack || (q->s && cmh_oom_same_call(q->s, q->stack, e->stack))) && *freed)
            return CMH_RETRY_SAME_STACK;
        return q->above < 0 ? CMH_RETRY_ASK : 0; /* asked again from elsewhere: the program's own handling */
    case CMH_ACT_ALLOC: return 0; /* the thread went on (a block of another allocator) */
    default: return -1;           /* marks, block frees */
    }
}

/* The frame of stack `stack` at depth k (innermost 0), NULL past its end or out of range. */
static const cmh_frame *frame_at(const cmh_snapshot *s, uint32_t stack, uint32_t k)
{
    if (stack >= s->nstacks) return NULL;
    const cmh_stack *st = &s->stacks[stack];
    if (k >= st->count || (uint64_t)st->first + k >= s->nstack_frames) return NULL;
    uint32_t f = s->stack_frames[st->first + k];
    return f < s->nframes ? &s->frames[f] : NULL;
}

/* The C library's start of a thread or of the program (main's caller, a thread function's):
 * by the module's name, else (no module known) by the function's */
static int thread_start(const cmh_snapshot *s, const cmh_frame *f)
{
    if (f->module >= 0 && (uint32_t)f->module < s->nmodules) {
        const char *b = cmh_frame_module(s, f);
        return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5) || !strncmp(b, "libpthread", 10) || !strncmp(b, "ld-linux", 8);
    }
    static const char *const starts[] = {"__libc_start_call_main", "__libc_start_main", "start_thread", "_start", "clone", "clone3", "__clone", NULL};
    const char *n = cmh_str(s, f->name);
    for (const char *const *p = starts; *p; p++)
        if (!strcmp(n, *p)) return 1;
    return 0;
}

int cmh_oom_same_call(const cmh_snapshot *s, uint32_t a, uint32_t b)
{
    if (a == b) return 1;
    if (!s || a >= s->nstacks || b >= s->nstacks || s->stacks[a].count != s->stacks[b].count || s->stacks[a].count < 2) return 0;
    /* below the innermost frame, the same frames: the same call of the function (its caller
     * at the same line, and so on out) */
    for (uint32_t k = 1; k < s->stacks[a].count; k++) {
        const cmh_frame *x = frame_at(s, a, k), *y = frame_at(s, b, k);
        if (!x || !y) return 0;
        if (x != y && (x->pc != y->pc || x->module != y->module || x->name != y->name || x->line != y->line || x->filename != y->filename))
            return 0;
    }
    /* the innermost: one function (named: without symbols no line tells whose it is), any line */
    const cmh_frame *x = frame_at(s, a, 0), *y = frame_at(s, b, 0), *caller = frame_at(s, a, 1);
    if (!x || !y || !caller || x->module != y->module) return 0;
    const char *nx = cmh_str(s, x->name), *ny = cmh_str(s, y->name);
    /* (a Python script's top level is no helper: it got the error back itself, as main does) */
    if (!*nx || strcmp(nx, ny) || !strcmp(nx, "<module>")) return 0;
    return !thread_start(s, caller);
}

int cmh_torch_allocator_module(const char *path)
{
    const char *b = strrchr(path, '/');
    return !strncmp(b ? b + 1 : path, "libc10_cuda", 11);
}

int cmh_oom_above(const cmh_snapshot *s, const cmh_trace *t, uint32_t i)
{
    /* PyTorch's caching allocator: its own part co-recorded, or its library in the process */
    if (above_in_record(s)) return 1;
    if (!t || i >= t->nentries) return 0;
    if (s->entries[t->first_entry + i].flags & CMH_EF_PYTORCH) return 1; /* (a merged view's) */
    uint32_t lo = i > CMH_OOM_RETRY_WINDOW ? i - CMH_OOM_RETRY_WINDOW : 0;
    for (uint32_t j = i; j-- > lo;)
        if (s->entries[t->first_entry + j].action == CMH_ACT_ALLOC) return 1;
    return 0;
}

int cmh_oom_retried(const cmh_snapshot *s, const cmh_trace *t, uint32_t i, uint64_t *freed)
{
    uint32_t at;
    return cmh_oom_retry(s, t, i, freed, &at);
}

/* What pool_sample entry j of trace t says its pool gave back since the pool's sample before
 * (its reserved bytes fell: a trim, or frees past the release threshold); 0 when it did not. */
static uint64_t pool_released(const cmh_snapshot *s, const cmh_trace *t, uint32_t j)
{
    const cmh_entry *e = &s->entries[t->first_entry + j];
    uint64_t pool = cmh_entry_addr(s, e), now = cmh_entry_size(s, e);
    uint32_t lo = j > CMH_OOM_RETRY_WINDOW ? j - CMH_OOM_RETRY_WINDOW : 0;
    for (uint32_t k = j; k-- > lo;) {
        const cmh_entry *p = &s->entries[t->first_entry + k];
        if (p->action != CMH_ACT_POOL_SAMPLE || cmh_entry_addr(s, p) != pool) continue;
        uint64_t was = cmh_entry_size(s, p);
        return was > now ? was - now : 0;
    }
    return 0;
}

int cmh_oom_retry(const cmh_snapshot *s, const cmh_trace *t, uint32_t i, uint64_t *freed, uint32_t *at)
{
    *freed = 0;
    *at = 0;
    if (s->source != CMH_SRC_RECORDER || !t || i >= t->nentries) return 0;
    const cmh_entry *o = &s->entries[t->first_entry + i];
    if (o->action != CMH_ACT_OOM) return 0;
    /* whether an allocator reports blocks is looked for only when it decides (a backward scan) */
    cmh_oom_request q = {cmh_entry_thread(s, o), o->stack, cmh_entry_size(s, o), cmh_entry_stream(s, o), -1, s};
    uint64_t got = 0;
    for (uint32_t j = i + 1; j < t->nentries && j - i <= CMH_OOM_RETRY_WINDOW; j++) {
        const cmh_entry *e = &s->entries[t->first_entry + j];
        if (cmh_entry_thread(s, e) != q.thread) continue; /* (read no more of another thread's entry) */
        cmh_entry_full f = {.size = cmh_entry_size(s, e), .stream = cmh_entry_stream(s, e), .thread = q.thread,
                            .stack = e->stack, .action = e->action};
        int r = cmh_oom_retry_step(&q, &f, e->action == CMH_ACT_POOL_SAMPLE ? pool_released(s, t, j) : 0, &got);
        if (r < 0) continue;
        if (r == CMH_RETRY_ASK) r = cmh_oom_above(s, t, i) ? CMH_RETRY_ALLOCATOR : 0;
        if (r) *freed = got, *at = j;
        return r;
    }
    return 0;
}

uint64_t cmh_oom_retries(const cmh_snapshot *s, const cmh_trace *t)
{
    uint64_t n = 0, freed;
    /* in one pass (each OOM's own cmh_oom_retry looks back up to CMH_OOM_RETRY_WINDOW entries
     * for an allocator above: 72k OOMs read billions of entries); an OOM at a time without room */
    uint32_t *at = t && t->nentries ? malloc((size_t)t->nentries * sizeof *at) : NULL;
    if (at && cmh_oom_retry_table(s, t, t->nentries, at) == CMH_OK) {
        for (uint32_t i = 0; i < t->nentries; i++) n += s->entries[t->first_entry + i].action == CMH_ACT_OOM && at[i];
        free(at);
        return n;
    }
    free(at);
    for (uint32_t i = 0; t && i < t->nentries; i++)
        if (s->entries[t->first_entry + i].action == CMH_ACT_OOM) n += cmh_oom_retried(s, t, i, &freed) != 0;
    return n;
}

int cmh_device_balance(const cmh_snapshot *s, int device, cmh_device_load *loads, int cap, int *n)
{
    int32_t devs[256];
    int nd = cmh_snapshot_devices(s, devs, 256);
    if (nd > 256) nd = 256;
    *n = 0;
    for (int k = 0; k < nd && *n < cap; k++) {
        if (devs[k] < 0) continue; /* pinned host memory is no device's load */
        cmh_peak_report p;
        int rc = cmh_peak_compute(s, devs[k], NULL, &p);
        if (rc != CMH_OK) return rc;
        loads[*n] = (cmh_device_load){devs[k], (uint64_t)p.reserved_peak, (uint64_t)p.alloc_peak, (uint64_t)p.reserved_peak, 0};
        cmh_peak_report_free(&p);
        /* what the device held is peak's own figure: its physical peak where cuMemCreate handles
         * make it differ from the ranges (a handle held unmapped: device 0 of 24 MiB of ranges
         * held 32, and a 64 MiB device 1 read '2.7x the next device' where it was 2.0x) */
        cmh_physical_peak ph;
        if ((rc = cmh_physical_peak_compute(s, devs[k], &ph)) != CMH_OK) return rc;
        if (ph.known && ph.peak >= 0 && (uint64_t)ph.peak != loads[*n].peak_reserved)
            loads[*n].peak_held = (uint64_t)ph.peak, loads[*n].physical = 1;
        (*n)++;
    }
    /* the device asked about first, then the others by what they held, largest first */
    for (int i = 0; i < *n; i++)
        for (int j = i + 1; j < *n; j++) {
            int ji = loads[j].device == device, ii = loads[i].device == device;
            if (ji > ii || (ji == ii && loads[j].peak_held > loads[i].peak_held)) {
                cmh_device_load x = loads[i];
                loads[i] = loads[j];
                loads[j] = x;
            }
        }
    return CMH_OK;
}

int cmh_device_uneven(const cmh_device_load *loads, int n, int device)
{
    /* loads as cmh_device_balance orders them: device first, the next largest second */
    return n >= 2 && loads[0].device == device && loads[1].peak_held && loads[0].peak_held >= CMH_UNEVEN_RATIO * loads[1].peak_held;
}

int cmh_oom_look_first(const cmh_oom_event *e, int uneven)
{
    /* one place to look first: a leak's growth fills any device however the work is spread, so
     * spreading it is no advice for it (the two read as competing firsts) */
    if (e && e->ngrowing) return CMH_LOOK_LEAK;
    return uneven ? CMH_LOOK_UNEVEN : CMH_LOOK_NONE;
}

const char *cmh_devices_empty_text(const cmh_snapshot *s, char *buf, size_t cap)
{
    int32_t any, listed[256];
    if (!cap || cmh_snapshot_devices(s, &any, 1) > 0) return NULL;
    int n = cmh_snapshot_listed_devices(s, listed, 256);
    if (n < 2) return NULL;
    size_t len = (size_t)snprintf(buf, cap, "%d devices listed (", n);
    for (int k = 0; k < n && k < 256 && len + 24 < cap; k++)
        len += listed[k] == -1 ? (size_t)snprintf(buf + len, cap - len, "%s-1 (pinned host)", k ? ", " : "")
                               : (size_t)snprintf(buf + len, cap - len, "%s%d", k ? ", " : "", listed[k]);
    if (len < cap) snprintf(buf + len, cap - len, "), each empty: nothing allocated, no trace");
    return buf;
}
