/*
 * cmd_oom.c - `cumemhist oom`: every out-of-memory error in the record, on every device, with
 * what the device and the segments still had free, a verdict (demand, fragmentation, fit in a gap, refused with room, a private pool's, too large), who
 * asked and who held memory.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "cumemhist/leakwords.h"
#include "cumemhist/owners.h"
#include "cumemhist/whatif.h"

static int g_device = -2, g_top = 10, g_frames = 6, g_json, g_all, g_fail;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPT_TOP(&g_top, "sites to list per error (default 10)"),
    CLI_OPT_FRAMES(&g_frames),
    CLI_OPTS_ATTRIBUTION,
    {"--all", NULL, CLI_FLAG, &g_all, NULL, "every out-of-memory error in full (by default, errors alike are one section with a count)", NULL, 0, 0, NULL},
    {"--fail-on-oom", NULL, CLI_FLAG, &g_fail, NULL, "exit 7 when the record holds an out-of-memory error the program saw (a retried one is none)", NULL, 0, 0, NULL},
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_oom = {
    "oom", "[options] SNAPSHOT",
    "Every out-of-memory error in the record, on every device: the request and who made it, what\n"
    "the device still had free, what was allocated and reserved, the free bytes inside the\n"
    "segments (reserved - allocated) and the largest free gap, a verdict (demand, fragmentation,\n"
    "a gap that fit, refused with room, a private pool's, a stream-ordered pool's cache, a pool's\n"
    "cache whose pieces are not known (the gap inside it is then not known either), or too\n"
    "large: more than the device had\n"
    "free and the process held together), and the allocation sites holding memory at that moment.\n"
    "A demand driven by a leak names the site leaks calls growing (what it grew by, over how many\n"
    "steps, and the line that called it where the site is a helper); a fragmentation verdict names the site whose live blocks kept the free bytes apart.\n"
    "An error that an allocator above the driver caught and asked again for (one reporting its\n"
    "blocks, PyTorch's, or the same call asking again after memory was given back: the same call\n"
    "stack, or the same function from another line, called from the same stack by the program's\n"
    "code, not by a thread's start) is its retry, not counted as an OOM\n"
    "(memory_summary's cudaMalloc retries); any other went back to the program: an OOM it saw.\n"
    "Each device numbers its own OOMs from #1; where they are on several devices, the devices come\n"
    "in the order of their first OOM in the record (by time), a line above them names the record's\n"
    "first, the one whatif and flamegraph --at oom look at, and each OOM says its place in the record\n"
    "(--json keeps the devices in device order; its record_rank, 1 for the record's first, gives\n"
    "the record's order).  Without times on several devices' OOMs, which came first is not known:\n"
    "the line says so, none is called the record's first, record_rank is null, and whatif and\n"
    "flamegraph --at oom take the lowest device's.\n"
    "Errors alike (on one device: the same call stack, the same request size, the same verdict,\n"
    "both counted or both retried) are one section, the first of them in full, with how many more\n"
    "there were, their numbers and the last one's moment (a program that catches the error and\n"
    "tries again makes thousands); --all prints each in full.  --json lists every error, each with\n"
    "its group (the index in the list of the first error alike, itself for the first).\n"
    "--fail-on-oom: exit 7 when the record holds an out-of-memory error the program saw, 5 when\n"
    "that is not known (no history, none counted: a state-only snapshot); status 4 is cumemhist\n"
    "itself running out of memory, never the record's errors.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist oom cumemhist.1234.cmh"};

/* At an OOM of a multi-device record: is the failing device carrying several times the others? */
static int balance(const cmh_snapshot *sp, int dev, cmh_device_load *loads, int *n)
{
    return cmh_device_balance(sp, dev, loads, 64, n) == CMH_OK && cmh_device_uneven(loads, *n, dev);
}

/* PyTorch's own record, one merged with it, or one whose stacks pass through PyTorch's libraries:
 * only there is advice about PyTorch's DataParallel for the program (not for a driver-API one) */
static int pytorch_record(const cmh_snapshot *sp) { return cmh_record_pytorch(sp); }

/* The devices' peaks, and where the OOM's device held several times the next: the advice to
 * spread the work only where that is where to look first (cmh_oom_look_first: not beside a leak,
 * which fills any device however the work is spread) */
static void print_balance(const cmh_snapshot *sp, int dev, const cmh_oom_event *e)
{
    cmh_device_load loads[64];
    int n = 0, uneven = balance(sp, dev, loads, &n);
    if (n < 2 || loads[0].device != dev) return;
    int phys = 0;
    for (int i = 0; i < n && i < 6; i++) phys |= loads[i].physical;
    printf("  devices (peak %s) ", phys ? "held: reserved, or physical where cuMemCreate handles make it differ" : "reserved");
    for (int i = 0; i < n && i < 6; i++)
        printf("%s%s %s%s", i ? ", " : "", rep_device_name(loads[i].device), rep_size((double)loads[i].peak_held),
               loads[i].physical ? " physical" : "");
    if (n > 6) printf(", ...");
    putchar('\n');
    if (!uneven) return;
    double x = (double)loads[0].peak_held / (double)loads[1].peak_held;
    int look = cmh_oom_look_first(e, uneven);
    if (look == CMH_LOOK_LEAK)
        printf("  uneven load: %s held %.1fx the next device, which the leak above accounts for: spreading the work\n"
               "  would not stop it growing\n", rep_device_name(dev), x);
    else if (pytorch_record(sp))
        printf("  uneven load: %s held %.1fx the next device; spreading the work (DistributedDataParallel rather than\n"
               "  DataParallel, which gathers onto one device; a smaller batch there) is where to look first\n",
               rep_device_name(dev), x);
    else
        printf("  uneven load: %s held %.1fx the next device; spreading the work across the devices (or a smaller\n"
               "  share of it on this one) is where to look first\n",
               rep_device_name(dev), x);
}

/* One line from the what-if model: would any setting it tries have avoided this device's first OOM? */
static void print_whatif(const rep_section *sec, const cmh_whatif_panel_result *w, int rc, int pytorch)
{
    if (rc == CMH_EINVAL) return; /* no block events: nothing for the model to replay */
    if (rc != CMH_OK) return;
    if (w->cap.model_over) /* the model's own replay differs from the record: said, not hidden in the capacity */
        printf("  allocator settings: the what-if model of the recorded settings reserves %s by this OOM where the record\n"
               "  had %s: more than the device's %s, so the model runs out before the program did (a mismatch of the\n"
               "  model)%s\n",
               rep_size((double)w->cap.model), rep_size((double)w->cap.reserved), rep_size((double)w->cap.capacity),
               w->reproduced ? "; what follows is the model's" : "");
    if (!w->reproduced) { /* where the model ran out instead, if it did: the recorded OOM is the only one it may judge */
        printf("  allocator settings: the what-if model does not reproduce this OOM at the recorded settings, so it cannot\n"
               "  say whether another would avoid it (cumemhist whatif --device %d %s)\n", sec->device, sec->path);
        if (w->match == CMH_WHATIF_OOM_EARLIER || w->match == CMH_WHATIF_OOM_LATER)
            printf("  (the model runs out %s, at entry %" PRId64 ": %s requested%s; this OOM is entry %" PRId64 ")\n",
                   w->match == CMH_WHATIF_OOM_EARLIER ? "earlier" : "later", w->model_oom_index, rep_size((double)w->model_oom_request),
                   w->model_oom_number ? "" : ", which the program was given", w->oom_index);
        else if (w->match == CMH_WHATIF_OOM_NONE) printf("  (the model never runs out there)\n");
        return;
    }
    if (!w->avoided) {
        int tried = 0;
        for (int i = 0; i < CMH_WHATIF_NPANEL; i++) tried += (w->tried >> i) & 1;
        printf("  allocator settings: none of the %d the what-if model tries avoids it (cumemhist whatif --device %d)\n", tried,
               sec->device);
        return;
    }
    /* a program with its own allocator (no PyTorch in it) has no PYTORCH_CUDA_ALLOC_CONF to set:
     * the model's finding is about how an allocator could serve the same requests */
    printf(pytorch ? "  allocator settings: avoided with" : "  allocator settings: PyTorch's allocator, serving these requests, avoids it with");
    for (int i = 0, k = 0; i < CMH_WHATIF_NPANEL; i++)
        if ((w->avoided >> i) & 1) printf("%s %s", k++ ? "," : "", cmh_whatif_panel[i]);
    if (pytorch) printf(" (PYTORCH_CUDA_ALLOC_CONF; cumemhist whatif --device %d)\n", sec->device);
    else
        printf("\n  (this program's own allocator has no such setting; an allocator that served them that way would not run\n"
               "  out: cumemhist whatif --device %d)\n", sec->device);
}

/* The event of OOM #1, as whatif names it (the first kept after those the ring dropped) */
static uint32_t first_event(const cmh_oom_report *p)
{
    uint32_t first = 0;
    while (first < p->nevents && p->events[first].number != p->dropped + 1) first++;
    return first == p->nevents ? 0 : first;
}

/* The event of the OOM at trace entry index (events are in trace order), NULL if none */
static const cmh_oom_event *event_at(const cmh_oom_report *p, int64_t index)
{
    uint32_t lo = 0, hi = p->nevents;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->events[mid].index < index) lo = mid + 1;
        else hi = mid;
    }
    return lo < p->nevents && p->events[lo].index == index ? &p->events[lo] : NULL;
}

/* how the OOM at entry index was retried (CMH_RETRY_*), 0 when not */
static int retry_by(const cmh_oom_report *p, int64_t index)
{
    const cmh_oom_event *e = event_at(p, index);
    return e ? e->retried : 0;
}

/* Under a row grouped by module, file or package: its sites at the same OOM (ps: the report by
 * site, its events the same as the grouped one's) */
static void row_sites_at(rep_row_sites *rs, const cmh_oom_report *ps, int have, const cmh_oom_event *e, const cmh_site *x, const char *indent)
{
    const cmh_oom_event *o = have ? event_at(ps, e->index) : NULL;
    rs->sites = o ? o->sites : NULL;
    rs->nsites = o ? o->nsites : 0;
    if (x) rep_row_sites_print(rs, x, indent);
}

/* The record's OOMs in its order (cmh_record_ooms), and over how many devices they are */
typedef struct record_order {
    cmh_record_oom *v;
    uint32_t n;
    int ndevices;
} record_order;

static int record_order_get(const cmh_snapshot *sp, record_order *o)
{
    int rc = cmh_record_ooms(sp, &o->v, &o->n);
    o->ndevices = 0;
    if (rc != CMH_OK) return rc;
    for (uint32_t i = 0; i < o->n; i++) {
        int seen = 0;
        for (uint32_t j = 0; j < i && !seen; j++) seen = o->v[j].device == o->v[i].device;
        o->ndevices += !seen;
    }
    return CMH_OK;
}

/* the place in the record's order of device dev's OOM at entry index, 0 for none (a retried one) */
static uint32_t record_rank(const record_order *o, int dev, int64_t index)
{
    for (uint32_t i = 0; i < o->n; i++)
        if (o->v[i].device == dev && o->v[i].index == index) return o->v[i].rank;
    return 0;
}

/* Once, above the devices, where the record's OOMs are on several: which came first in the
 * record (by time), the one whatif and flamegraph --at oom look at, and the order of the rest (each
 * device numbers its own from #1, as summary counts them: two '#1's read as two firsts) */
static void print_record_order(const rep_section *sec, const record_order *o)
{
    if (o->ndevices < 2) return;
    const cmh_record_oom *f = &o->v[0];
    int64_t t0 = rep_trace_start(sec->s, f->device);
    if (!f->rank) /* no times on some: which came first is not known, and none is called first */
        printf("%s: %s on %d devices; no times: which device's OOM came first is not known (whatif and flamegraph --at oom "
               "look at the lowest device's, %s's #%u at %s: --device N for another)\n",
               sec->path, rep_count(o->n, "out-of-memory error", "out-of-memory errors"), o->ndevices, rep_device_name(f->device),
               f->number, rep_at(f->index, f->time_ns, t0));
    else
        printf("%s: %s on %d devices; the record's first: %s's #%u at %s (the one whatif and flamegraph --at oom look at)\n",
               sec->path, rep_count(o->n, "out-of-memory error", "out-of-memory errors"), o->ndevices, rep_device_name(f->device),
               f->number, rep_at(f->index, f->time_ns, t0));
    printf(f->rank ? "  in the record's order (by time; each device numbers its own):" : "  by device (order not known; each device numbers its own):");
    for (uint32_t i = 0; i < o->n && i < 8; i++)
        printf("%s %s #%u", i ? "," : "", rep_device_name(o->v[i].device), o->v[i].number);
    if (o->n > 8) printf(", ... %u more", o->n - 8);
    printf("\n\n");
}

/* Errors alike, one section each (a program that catches the error and tries again made 1001
 * full sections of one failing line): the same call stack, request size and verdict, both
 * counted or both retried.  like[i]: the first error alike (i itself for the first). */
typedef struct alike_key {
    const cmh_oom_event *e;
    uint32_t i;
} alike_key;

static int cmp_alike(const void *x, const void *y)
{
    const alike_key *a = x, *b = y;
    const cmh_oom_event *p = a->e, *q = b->e;
    if (p->request_stack != q->request_stack) return p->request_stack < q->request_stack ? -1 : 1;
    if (p->request != q->request) return p->request < q->request ? -1 : 1;
    if (p->verdict != q->verdict) return p->verdict < q->verdict ? -1 : 1;
    if (!p->number != !q->number) return !p->number ? -1 : 1;
    if (p->retried != q->retried) return p->retried < q->retried ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static uint32_t *alike_groups(const cmh_oom_report *p)
{
    uint32_t *like = malloc((size_t)(p->nevents ? p->nevents : 1) * sizeof *like);
    alike_key *k = malloc((size_t)(p->nevents ? p->nevents : 1) * sizeof *k);
    if (!like || !k) {
        free(like);
        free(k);
        return NULL;
    }
    for (uint32_t i = 0; i < p->nevents; i++) k[i] = (alike_key){&p->events[i], i};
    qsort(k, p->nevents, sizeof *k, cmp_alike);
    for (uint32_t i = 0, first = 0; i < p->nevents; i++) {
        alike_key a = k[first], b = k[i];
        a.i = b.i = 0;
        if (cmp_alike(&a, &b)) first = i;
        like[k[i].i] = k[first].i; /* (sorted by place last: the group's first) */
    }
    free(k);
    return like;
}

/* After the first of a group printed in full: the others alike, counted, with the numbers and
 * the last one's moment */
static void print_alike(const cmh_oom_report *p, const uint32_t *like, uint32_t i, int64_t t0)
{
    uint32_t more = 0, lo = 0, hi = 0, last = i;
    for (uint32_t j = i + 1; j < p->nevents; j++)
        if (like[j] == i) {
            more++;
            last = j;
            if (p->events[j].number && (!lo || p->events[j].number < lo)) lo = p->events[j].number;
            if (p->events[j].number > hi) hi = p->events[j].number;
        }
    if (!more) return;
    const cmh_oom_event *l = &p->events[last];
    char nums[64] = "";
    if (lo && lo == hi) snprintf(nums, sizeof nums, ": #%u", lo);
    else if (lo) snprintf(nums, sizeof nums, ": #%u to #%u", lo, hi);
    printf("  alike: %s (the same call stack, request size and verdict%s)%s, the last at %s (--all shows each)\n",
           rep_count(more, "more", "more"), l->number ? "" : ", retried too", nums, rep_at(l->index, l->time_ns, t0));
}

static int section(const rep_section *sec, void *arg)
{
    const cmh_snapshot *sp = sec->s;
    const cmh_sites *g = sec->g;
    int dev = sec->device;
    uint64_t nooms; /* the OOMs counted without history (cmh_nohist_ooms) */
    record_order ro;
    int rc = record_order_get(sp, &ro);
    if (rc != CMH_OK) return rc;
    if (!sec->w && sec->index == 0) print_record_order(sec, &ro);
    cmh_oom_report p;
    rc = cmh_oom_compute(sp, dev, g, &p);
    if (rc != CMH_OK) {
        free(ro.v);
        return rc;
    }
    if ((rc = cmh_oom_growth(sp, dev, g, &p)) != CMH_OK) { /* a demand driven by a leak: the site leaks calls growing */
        cmh_oom_report_free(&p);
        free(ro.v);
        return rc;
    }
    /* --fail-on-oom: 1, one the program saw (kept or dropped with the ring, or counted without
     * history); 2, not known (no history, none counted): the check cannot be made, as leaks'
     * unjudged (a state-only PyTorch snapshot passed the gate as a record without an OOM) */
    int counted = !p.base.history && cmh_nohist_ooms(sp, dev, &nooms);
    if (p.failures || (counted && nooms)) *(int *)arg |= 1;
    else if (!p.base.history && !counted) *(int *)arg |= 2;
    uint32_t *like = alike_groups(&p);
    if (!like) {
        cmh_oom_report_free(&p);
        free(ro.v);
        return CMH_ENOMEM;
    }
    int64_t t0 = rep_trace_start(sp, dev);
    cmh_whatif_panel_result wi;
    int wrc = p.nevents ? cmh_whatif_avoids(sp, dev, &wi) : CMH_EINVAL;
    if (wrc == CMH_ENOMEM) {
        cmh_oom_report_free(&p);
        free(ro.v);
        free(like);
        return wrc;
    }
    /* a row grouped by module, file or package: its sites at each OOM (a failure to group again
     * only leaves the split out) */
    rep_row_sites rs;
    cmh_oom_report ps;
    int have_ps = rep_row_sites_begin(&rs, sp, g) && cmh_oom_compute(sp, dev, rs.gs, &ps) == CMH_OK;
    if (sec->w) {
        cmh_jw *w = sec->w;
        cmh_jw_obj(w);
        rep_json_base(w, sec, &p.base);
        cmh_jw_nl(w);
        cmh_jw_key(w, "ooms");
        if (!p.base.history) cmh_jw_null(w); /* not known: the errors are in the history (not "none") */
        else cmh_jw_arr(w);
        for (uint32_t i = 0; i < p.nevents; i++) {
            const cmh_oom_event *e = &p.events[i];
            cmh_jw_nl(w);
            cmh_jw_obj(w);
            cmh_jw_kint(w, "index", e->index);
            /* errors alike (the text's one section): the place in this list of the first of them */
            cmh_jw_kuint(w, "group", like[i]);
            rep_json_time(w, "time_ns", e->time_ns);
            cmh_jw_kuint(w, "request", e->request);
            /* its place among every device's OOMs, by time (1: the record's first, the one whatif
             * and flamegraph --at oom look at); null for a retried one (no number) */
            uint32_t rr = e->number ? record_rank(&ro, dev, e->index) : 0;
            cmh_jw_key(w, "record_rank");
            if (rr) cmh_jw_uint(w, rr);
            else cmh_jw_null(w);
            /* numbered as summary counts: the OOMs the program saw; a retried one has no number */
            cmh_jw_key(w, "number");
            if (e->number) cmh_jw_uint(w, e->number);
            else cmh_jw_null(w);
            cmh_jw_kbool(w, "retried", e->retried);
            if (e->retried) {
                /* the evidence that an allocator asked again: one that reports blocks, or the same stack */
                cmh_jw_kstr(w, "retry_by", e->retried == CMH_RETRY_SAME_STACK ? "same stack" : "allocator");
                cmh_jw_kuint(w, "retry_freed", e->retry_freed);
                cmh_jw_kint(w, "retry_index", e->retry_index);
                cmh_jw_kbool(w, "retry_succeeded", !e->retry_failed);
            }
            cmh_jw_key(w, "retry_of");
            if (e->retry_of >= 0) cmh_jw_int(w, e->retry_of);
            else cmh_jw_null(w);
            rep_json_device_free(w, "device_free", e->device_free);
            cmh_jw_kuint(w, "allocated", e->allocated);
            cmh_jw_kuint(w, "reserved", e->reserved);
            cmh_jw_kuint(w, "free_in_segments", e->free_inside);
            cmh_jw_kuint(w, "pending_free", e->pending_free);
            cmh_jw_kuint(w, "largest_gap", e->largest_gap);
            cmh_jw_kuint(w, "largest_gap_unknown_in", e->gap_unknown_in); /* largest_gap is then outside this pool cache */
            cmh_jw_kuint(w, "releasable", e->split.releasable);
            cmh_jw_kuint(w, "trapped", e->split.trapped);
            cmh_jw_kuint(w, "pool_cache", e->split.pool_cache); /* of releasable */
            cmh_jw_kuint(w, "pool_cache_unusable", e->pool_cache_unusable); /* of it, what the request could not use */
            cmh_jw_key(w, "cache_pool"); /* the pool keeping the most of it: its handle, its bytes */
            if (e->pool_cache_unusable) {
                cmh_jw_obj(w);
                char pname[320];
                cmh_jw_kuint(w, "handle", e->cache_pool);
                cmh_jw_kstr(w, "name", rep_pool_name(sp, g, e->cache_pool, e->time_ns, pname, sizeof pname));
                cmh_jw_kuint(w, "bytes", e->cache_pool_bytes);
                cmh_jw_end(w);
            } else cmh_jw_null(w);
            cmh_jw_kuint(w, "private_pools", e->split.private_free);
            cmh_jw_key(w, "private_pool_most"); /* the other private pool holding the most of it */
            if (e->split.top_pool_free) {
                cmh_jw_obj(w);
                cmh_jw_key(w, "pool_id");
                cmh_jw_arr(w);
                cmh_jw_uint(w, e->split.top_pool[0]);
                cmh_jw_uint(w, e->split.top_pool[1]);
                cmh_jw_end(w);
                cmh_jw_kuint(w, "bytes", e->split.top_pool_free);
                cmh_jw_end(w);
            } else cmh_jw_null(w);
            cmh_jw_key(w, "request_stream_pool"); /* the stream-ordered pool the request asked: null not said */
            if (e->request_driver_pool) {
                char rname[320];
                cmh_jw_obj(w);
                cmh_jw_kuint(w, "handle", e->request_driver_pool);
                cmh_jw_kstr(w, "name", rep_pool_name(sp, g, e->request_driver_pool, e->time_ns, rname, sizeof rname));
                cmh_jw_kuint(w, "cache", e->split.pool_cache - e->pool_cache_unusable);
                cmh_jw_end(w);
            } else cmh_jw_null(w);
            cmh_jw_key(w, "request_pool"); /* [0, 0]: the default pool (or not said) */
            cmh_jw_arr(w);
            cmh_jw_uint(w, e->request_pool[0]);
            cmh_jw_uint(w, e->request_pool[1]);
            cmh_jw_end(w);
            cmh_jw_kuint(w, "own_pool", e->split.own_pool);
            cmh_jw_kuint(w, "usable", e->usable);
            cmh_jw_kuint(w, "unusable", e->split.unusable);
            cmh_jw_kbool(w, "fits_in_gap", e->fits_in_gap);
            cmh_jw_kstr(w, "verdict", cmh_oom_verdict_name(e->verdict));
            /* owners' split of the device then (null: no cuMemGetInfo sample says it) */
            cmh_jw_key(w, "device_used");
            if (e->used_known) cmh_jw_uint(w, e->device_used);
            else cmh_jw_null(w);
            cmh_jw_key(w, "device_total");
            if (e->used_known) cmh_jw_uint(w, e->device_total);
            else cmh_jw_null(w);
            cmh_jw_key(w, "not_recorded");
            if (e->used_known) cmh_jw_uint(w, e->outside);
            else cmh_jw_null(w);
            rep_json_trap(w, sp, g, e->trap_stack, e->trap_group, e->trap_free, e->trap_segs, e->trap_sites);
            cmh_jw_key(w, "driven_by_leak"); /* a demand: the growing site (leaks' verdict) that held the most then */
            if (e->ngrowing) {
                cmh_jw_obj(w);
                cmh_jw_kuint(w, "growing_sites", e->ngrowing);
                cmh_jw_kuint(w, "grown_bytes", cmh_leak_grown_by(&e->grew));
                /* over the record's steps, or over its time where no steps were found (leaks' judgment) */
                cmh_jw_kstr(w, "judged_over", e->grew.time_verdict == CMH_TIME_GROWING ? "time" : "steps");
                cmh_jw_kuint(w, "held_at_error", e->grew_held);
                cmh_jw_key(w, "leak"); /* as leaks --json writes the site */
                rep_json_site(w, sp, g, &e->grew, e->grew.bytes, 1);
                cmh_jw_end(w);
            } else cmh_jw_null(w);
            cmh_jw_key(w, "requested_by");
            if (e->request_stack) {
                cmh_site who = {.group = e->request_group, .stack = e->request_stack, .bytes = e->request, .count = 1,
                                .first_ns = e->time_ns, .last_ns = e->time_ns};
                rep_json_site(w, sp, g, &who, e->request, 0);
            } else cmh_jw_null(w);
            cmh_jw_key(w, "sites");
            row_sites_at(&rs, &ps, have_ps, e, NULL, NULL);
            rep_json_site_hook = rs.gs ? rep_row_sites_json : NULL; /* a grouped row: "by_site" */
            rep_json_site_hook_arg = &rs;
            rep_json_sites(w, sp, g, e->sites, e->nsites, g_top, e->allocated, 0);
            rep_json_site_hook = NULL;
            rep_json_sites_left_out(w, "sites", e->nsites, g_top);
            cmh_jw_end(w);
        }
        if (p.base.history) cmh_jw_end(w);
        if (p.base.history) { /* memory_summary's two counts, from the same events */
            cmh_jw_kuint(w, "dropped_ooms", p.dropped); /* of num_ooms: the ring dropped them, #1 to #dropped */
            cmh_jw_kuint(w, "num_ooms", p.failures);
            cmh_jw_kuint(w, "num_alloc_retries", cmh_alloc_retries(sp, p.failures, p.retries)); /* summary's */
        } else if (cmh_nohist_ooms(sp, dev, &nooms)) /* counted without history (enabled=state) */
            cmh_jw_kuint(w, "num_ooms", nooms);
        if (p.nevents) {
            cmh_device_load loads[64];
            int nl = 0, uneven = balance(sp, dev, loads, &nl);
            cmh_jw_nl(w);
            cmh_jw_key(w, "devices"); /* peaks of every device, this one first */
            cmh_jw_arr(w);
            for (int i = 0; i < nl; i++) {
                cmh_jw_obj(w);
                cmh_jw_kint(w, "device", loads[i].device);
                cmh_jw_kuint(w, "peak_reserved", loads[i].peak_reserved);
                cmh_jw_kuint(w, "peak_allocated", loads[i].peak_allocated);
                cmh_jw_kuint(w, "peak_held", loads[i].peak_held); /* what uneven_load compares */
                cmh_jw_kstr(w, "held_is", loads[i].physical ? "physical" : "reserved");
                cmh_jw_end(w);
            }
            cmh_jw_end(w);
            cmh_jw_kbool(w, "uneven_load", uneven);
            static const char *const looks[] = {NULL, "leak", "uneven_load"};
            const char *look = looks[cmh_oom_look_first(&p.events[first_event(&p)], uneven)];
            cmh_jw_key(w, "look_first"); /* the one advice first: a leak outranks an uneven load */
            if (look) cmh_jw_str(w, look);
            else cmh_jw_null(w);
            cmh_jw_key(w, "whatif");
            if (wrc != CMH_OK) cmh_jw_null(w);
            else {
                cmh_jw_obj(w);
                cmh_jw_kbool(w, "reproduced", wi.reproduced);
                /* where the model of the recorded settings ran out against this OOM (reproduced: "same") */
                cmh_jw_kstr(w, "model_oom", cmh_whatif_oom_match_name(wi.match));
                cmh_jw_key(w, "model_oom_index");
                if (wi.model_oom_index >= 0) cmh_jw_int(w, wi.model_oom_index);
                else cmh_jw_null(w);
                cmh_jw_key(w, "avoided_by");
                cmh_jw_arr(w);
                for (int i = 0; i < CMH_WHATIF_NPANEL; i++)
                    if ((wi.avoided >> i) & 1) cmh_jw_str(w, cmh_whatif_panel[i]);
                cmh_jw_end(w);
                cmh_jw_end(w);
            }
        }
        rep_json_driver_errors(w, sp); /* (the process's, in every device's object) */
        cmh_jw_end(w);
    } else if (!p.base.history && cmh_nohist_ooms(sp, dev, &nooms)) {
        /* enabled=state keeps no trace, but counts the OOMs (as PyTorch's num_ooms): how many,
         * with nothing to explain them */
        if (nooms)
            printf("%s, %s: %s; no history to explain %s (%s): a record with history (enabled=all) has them\n", sec->path,
                   rep_device_name(dev), rep_count(nooms, "out-of-memory error", "out-of-memory errors"), nooms == 1 ? "it" : "them",
                   p.base.nohist_cause);
        else
            printf("%s, %s: no out-of-memory error (counted without history: %s)\n", sec->path, rep_device_name(dev),
                   p.base.nohist_cause);
    } else if (!p.base.history) { /* enabled=state keeps no trace: an OOM the program hit left nothing to read */
        printf("%s, %s: out-of-memory errors: not known: no history (%s);\n"
               "  only the state at the end is known; a record with history (enabled=all) has them\n",
               sec->path, rep_device_name(dev), p.base.nohist_cause);
    } else if (!p.nevents && p.dropped) {
        printf("%s, %s: %s, none of them left in the record (%s): the ring dropped them with its oldest entries\n",
               sec->path, rep_device_name(dev), rep_count(p.dropped, "out-of-memory error", "out-of-memory errors"),
               rep_count(p.base.entries, "trace entry", "trace entries"));
        rep_notes(&p.base);
    } else if (!p.nevents) {
        printf("%s, %s: no out-of-memory error in the record (%s)\n", sec->path, rep_device_name(dev),
               rep_count(p.base.entries, "trace entry", "trace entries"));
        if (p.base.dropped) rep_notes(&p.base);
    } else {
        if (p.retries) /* the count summary gives, before the events it comes from */
            printf("%s%s, %s: %s the program saw, and %s that the allocator retried (memory_summary: CUDA OOMs %u, "
                   "cudaMalloc retries %u)\n",
                   sec->index ? "\n" : "", sec->path, rep_device_name(dev), rep_count(p.failures, "out-of-memory error", "out-of-memory errors"),
                   rep_count(p.retries, "more", "more"), p.failures, p.retries);
        /* with no stack at an OOM and no allocator reporting blocks, nothing can show a retry:
         * said, so that "#2" after a failure is not read as proof no allocator asked again */
        const cmh_trace *tr = cmh_snapshot_trace(sp, dev);
        for (uint32_t i = 0; sp->source == CMH_SRC_RECORDER && i < p.nevents; i++)
            if (!p.events[i].request_stack && !cmh_oom_above(sp, tr, (uint32_t)p.events[i].index)) {
                printf("%s%s, %s: note: no call stack at its out-of-memory errors (--context none or state) and no allocator\n"
                       "  above the driver reporting blocks: each counts as an error the program saw, since an allocator's\n"
                       "  retry of the same request cannot be told apart (docs/PYTORCH.md, memory_summary)\n%s",
                       sec->index || p.retries ? "\n" : "", sec->path, rep_device_name(dev), sec->index || p.retries ? "" : "\n");
                break;
            }
        uint32_t first = first_event(&p); /* the balance and the what-if line go with it */
        for (uint32_t i = 0; i < p.nevents; i++) {
            const cmh_oom_event *e = &p.events[i];
            if (!g_all && like[i] != i) continue; /* (counted under the first alike) */
            /* where the record's OOMs are on several devices, each "#1" says its place in the
             * record (they read as two firsts, device 0's listed first though device 1's came first) */
            char place[160] = "", nth[24];
            uint32_t rr = e->number && ro.ndevices > 1 ? record_rank(&ro, dev, e->index) : 0;
            if (rr == 1) snprintf(place, sizeof place, ": the record's first out-of-memory error (of %u)", ro.n);
            else if (rr)
                snprintf(place, sizeof place, ": the record's %s (of %u; the first: %s's #%u)", cmh_ordinal(rr, nth, sizeof nth), ro.n,
                         rep_device_name(ro.v[0].device), ro.v[0].number);
            if (e->number && p.dropped && e->number == p.dropped + 1) { /* the first kept: say where the others went */
                char gone[48];
                if (p.dropped == 1) snprintf(gone, sizeof gone, "#1 fell");
                else snprintf(gone, sizeof gone, "#1 to #%u fell", p.dropped);
                printf("%s%s: out of memory #%u on %s at %s (%s out of the %" PRIu64 "-entry history)%s\n",
                       sec->index || i || p.retries ? "\n" : "", sec->path, e->number, rep_device_name(dev),
                       rep_at(e->index, e->time_ns, t0), gone, p.base.entries, place);
            } else if (e->number)
                printf("%s%s: out of memory #%u on %s at %s%s\n", sec->index || i || p.retries ? "\n" : "", sec->path, e->number,
                       rep_device_name(dev), rep_at(e->index, e->time_ns, t0), place);
            else
                printf("%s%s: out of memory on %s at %s, retried: not counted as an OOM (a cudaMalloc retry)\n",
                       sec->index || i || p.retries ? "\n" : "", sec->path, rep_device_name(dev), rep_at(e->index, e->time_ns, t0));
            if (e->retried) {
                char what[96] = "it succeeded: not a failure the program saw";
                const cmh_oom_event *next = e->retry_failed ? event_at(&p, e->retry_index) : NULL;
                if (next && next->number) snprintf(what, sizeof what, "it failed too: out of memory #%u", next->number);
                else if (next) snprintf(what, sizeof what, "it failed too, and was retried again");
                /* the retry's stack: the same, or the same function's other line (cmh_oom_same_call) */
                uint32_t again = tr && e->retry_index >= 0 && (uint64_t)e->retry_index < tr->nentries
                                     ? sp->entries[tr->first_entry + e->retry_index].stack
                                     : e->request_stack;
                if (e->retried == CMH_RETRY_SAME_STACK) /* no blocks reported: no cache to speak of, only what was freed */
                    printf("  retried                 the same %s asked for as much again after %s was freed\n"
                           "                          (entry %" PRId64 "): %s\n",
                           again == e->request_stack ? "call stack" : "function (another line of it, from the same call)",
                           e->retry_freed ? rep_size((double)e->retry_freed) : "nothing", e->retry_index, what);
                else
                    printf("  retried                 the allocator then freed %s of its cached segments and asked for as much again\n"
                           "                          (entry %" PRId64 "): %s\n",
                           e->retry_freed ? rep_size((double)e->retry_freed) : "none", e->retry_index, what);
            }
            if (e->retry_of >= 0)
                printf("  retry of                the request that failed at entry %" PRId64 ", asked again %s\n", e->retry_of,
                       retry_by(&p, e->retry_of) == CMH_RETRY_SAME_STACK ? "from the same call stack" : "after the allocator freed its cache");
            printf("  requested               %12s (%" PRIu64 " bytes)\n", rep_size((double)e->request), e->request);
            if (e->request_stack) {
                cmh_site who = {.group = e->request_group, .stack = e->request_stack, .bytes = e->request, .count = 1};
                char tag[80];
                printf("  requested by            %s%s\n", rep_site_name(sp, g, &who), rep_owner_tag(g, e->request_group, tag, sizeof tag));
                rep_print_frames(sp, g, e->request_stack, g_frames, "                            ");
            } else {
                printf("  requested by            <no stack: recorded with context none or state>\n");
            }
            if (e->device_free == CMH_DEVICE_FREE_UNKNOWN) /* a PyTorch OOM entry without device_free, a failed cuMemGetInfo */
                printf("  device free (driver)       not known   (the record does not say)\n");
            else
                printf("  device free (driver)    %12s\n", rep_size((double)e->device_free));
            printf("  allocated               %12s\n", rep_size((double)e->allocated));
            printf("  reserved                %12s\n", rep_size((double)e->reserved));
            printf("  free inside segments    %12s   (reserved - allocated)", rep_size((double)e->free_inside));
            if (e->pending_free) printf(", of it %s freed with stream work pending", rep_size((double)e->pending_free));
            int mine = e->request_pool[0] || e->request_pool[1]; /* the request was a private pool's */
            int split = e->split.releasable || e->split.trapped;
            if (split)
                printf("\n    releasable            %12s   (%s)", rep_size((double)e->split.releasable),
                       rep_releasable_how(e->split.releasable, e->split.pool_cache, e->split.expandable_pages));
            /* a pool's cache is of the releasable bytes: under its line, as frag prints it (they
             * hung under 'trapped 0 B', 384 MiB 'of it') */
            if (e->split.pool_cache) /* the actionable part of a stream-ordered pool's OOM: trim the pool */
                printf("\n      of it a pool's cache%12s   (freed to a stream-ordered pool, kept: cuMemPoolTrimTo gives it back)",
                       rep_size((double)e->split.pool_cache));
            char pname[320], rname[320];
            if (e->request_driver_pool && e->split.pool_cache) /* the pool the request asked, where a cache was there */
                printf("\n      the request's pool  %s, keeping %s of it", rep_pool_name(sp, g, e->request_driver_pool, e->time_ns, rname, sizeof rname),
                       rep_size((double)(e->split.pool_cache - e->pool_cache_unusable)));
            if (e->pool_cache_unusable) /* which pool, and that this request could not have it */
                printf("\n      kept by %s %s%s: not for this request (%s)", rep_pool_name(sp, g, e->cache_pool, e->time_ns, pname, sizeof pname),
                       rep_size((double)e->cache_pool_bytes),
                       e->cache_pool_bytes < e->pool_cache_unusable ? " (the most; other pools keep the rest)" : "",
                       e->request_driver_pool ? "another pool's cache" : "not the pool's own cuMemAllocAsync");
            if (split)
                printf("\n    trapped               %12s   (gaps between live blocks%s)", rep_size((double)e->split.trapped),
                       mine && e->split.trapped ? "; the default pool's: not for a private pool's request" : "");
            if (mine)
                printf("\n    in its own pool       %12s   (private pool (%" PRIu64 ", %" PRIu64 ")'s segments: the request's where a run fits)",
                       rep_size((double)e->split.own_pool), e->request_pool[0], e->request_pool[1]);
            if (e->split.private_free) {
                printf("\n    in %sprivate pools%s%12s   (a CUDA graph's or MemPool's segments: only the pool's own requests use it)",
                       mine ? "other " : "", mine ? "" : "      ", rep_size((double)e->split.private_free));
                if (e->split.top_pool_free) /* which pool: the one to free (del the graph or MemPool) */
                    printf("\n      of it pool (%" PRIu64 ", %" PRIu64 ")%s %s", e->split.top_pool[0], e->split.top_pool[1],
                           e->split.top_pool_free < e->split.private_free ? ", the most," : "", rep_size((double)e->split.top_pool_free));
            }
            if (e->split.unusable)
                printf("\n    the request could use %12s   of it; %s not (other pools' memory)", rep_size((double)e->usable),
                       rep_size((double)e->split.unusable));
            if (e->gap_unknown_in) /* a pool's cache in pieces the record does not show */
                printf("\n  largest free gap: not known inside a pool's cache of %s; outside it %s, the request does not fit in that\n",
                       rep_size((double)e->gap_unknown_in), rep_size((double)e->largest_gap));
            else
                printf("\n  largest free gap        %12s   %sthe request %s in it\n", rep_size((double)e->largest_gap),
                       mine ? "(in its own pool) " : e->split.private_free ? "(outside private pools) " : "",
                       e->fits_in_gap ? "fits" : "does not fit");
            printf("  verdict: %s\n", cmh_oom_verdict_advice(e->verdict, pytorch_record(sp)));
            rep_trap_print(sp, g, e->trap_stack, e->trap_group, e->trap_free, e->trap_segs, e->trap_sites);
            if (e->ngrowing) { /* the demand a leak made: the site to fix, in leaks' own words */
                char says[512], from[600] = "";
                uint64_t grown = cmh_leak_grown_by(&e->grew);
                char over[160];
                if (e->grew.time_verdict == CMH_TIME_GROWING) { /* no steps: the slices of time leaks judged it over */
                    char part[32];
                    uint32_t M = e->grew.time_slices ? e->grew.time_slices : CMH_TIME_SLICES, ns = M - e->grew.time_low + 1;
                    cmh_span_text((int64_t)((double)e->grew.time_span_ns * ns / M), part, sizeof part);
                    snprintf(over, sizeof over, "the last %u of the %u equal slices of the record (%s)", ns, M, part);
                } else snprintf(over, sizeof over, "%s", rep_count(e->grew.growth_steps, "step", "steps"));
                char via[400] = "", rvia[400] = "";
                if (e->request_stack) {
                    cmh_site who = {.group = e->request_group, .stack = e->request_stack, .bytes = e->request, .count = 1};
                    /* a helper's site: the line that called it for this request, which is not
                     * the leaking caller's (it read as if the leak's own line had failed) */
                    const cmh_frame *rc = g ? cmh_sites_caller_of(g, e->request_stack) : NULL;
                    if (rc) snprintf(rvia, sizeof rvia, ", called from %.380s", rep_frame(sp, rc));
                    snprintf(from, sizeof from, ", from %.300s%.280s", rep_site_name(sp, g, &who), rvia);
                }
                /* a helper's growth that is one caller's: that caller, as leaks names it */
                const cmh_site_caller *gc = NULL;
                for (uint32_t k = 0; e->grew.callers_judged && k < e->grew.ncallers; k++)
                    if (e->grew.callers[k].growing) gc = gc ? &e->grew.callers_other : &e->grew.callers[k];
                if (gc && gc != &e->grew.callers_other) snprintf(via, sizeof via, ", called from %.380s", rep_frame(sp, &sp->frames[gc->frame]));
                printf("  driven by a leak: allocated grew by %s over %s at %s%s, which held %s at the error\n"
                       "    (cumemhist leaks: %s)",
                       rep_size((double)grown), over, rep_site_name(sp, g, &e->grew), via,
                       rep_size((double)e->grew_held), cmh_leak_site_text(&e->grew, says, sizeof says));
                if (e->ngrowing > 1) printf(";\n    %s growing too (cumemhist leaks)", rep_count(e->ngrowing - 1, "more site", "more sites"));
                printf(";\n    the failing request of %s came at %s%s\n", rep_size((double)e->request), rep_at(e->index, e->time_ns, t0), from);
            }
            if (e->used_known && e->outside) /* owners' split at the error: the device's memory, not the program's alone */
                printf("  the device then         %12s in use of %s: not recorded (CUDA context, other processes) %s (%.1f%%),\n"
                       "                          this program's record %s (owners)\n",
                       rep_size((double)e->device_used), rep_size((double)e->device_total), rep_size((double)e->outside),
                       e->device_used ? 100.0 * (double)e->outside / (double)e->device_used : 0.0,
                       rep_size((double)(e->device_used - e->outside)));
            if (i == first) {
                print_balance(sp, dev, e);
                print_whatif(sec, &wi, wrc, pytorch_record(sp));
            }
            rep_gpu_at(sp, dev, e->time_ns, "  ");
            printf("  holding memory then:%s\n", e->nsites ? "" : " nothing (no block was live on the device)");
            for (uint32_t k = 0; k < e->nsites && (int)k < g_top; k++) {
                const cmh_site *x = &e->sites[k];
                char tag[80];
                printf("    %12s %13s  %s%s\n", rep_size((double)x->bytes), rep_count(x->count, "block", "blocks"),
                       rep_site_name(sp, g, x), rep_owner_tag(g, x->group, tag, sizeof tag));
                /* the leak's site: its callers marked as leaks marks them (the same words) */
                cmh_site marked = *x;
                if (e->ngrowing && x->group == e->grew.group && e->grew.callers_judged) {
                    marked.callers_judged = 1;
                    marked.verdict = e->grew.verdict;
                    for (uint32_t c = 0; c < marked.ncallers; c++)
                        for (uint32_t d = 0; d < e->grew.ncallers; d++) {
                            const cmh_frame *a = &sp->frames[marked.callers[c].frame], *b = &sp->frames[e->grew.callers[d].frame];
                            if (a->name != b->name || a->filename != b->filename || a->line != b->line) continue;
                            marked.callers[c].growing = e->grew.callers[d].growing;
                            marked.callers[c].stopped = e->grew.callers[d].stopped;
                        }
                    marked.stack = e->grew.stack; /* (one caller's growth: its stack, as leaks shows it) */
                }
                rep_print_callers(sp, &marked, "          ");
                row_sites_at(&rs, &ps, have_ps, e, x, "          ");
                rep_print_frames(sp, g, marked.stack, g_frames, "          ");
            }
            if (e->nsites > (uint32_t)g_top) printf("    ... %s (--top)\n", rep_count(e->nsites - (uint32_t)g_top, "more site", "more sites"));
            if (!g_all) print_alike(&p, like, i, t0);
        }
        rep_notes(&p.base);
    }
    /* not OOMs, but what a user hunting a failure needs beside them: once, after the last device */
    if (!sec->w && sec->index + 1 == sec->ndevices) rep_driver_errors_note(sp);
    if (have_ps) cmh_oom_report_free(&ps);
    rep_row_sites_end(&rs);
    cmh_oom_report_free(&p);
    free(ro.v);
    free(like);
    return CMH_OK;
}

int cmd_oom(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_oom, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    int found = 0;
    rc = rep_run(&path, 1, g_device, g_json, REP_SITES | REP_OOM_ORDER, section, &found);
    return rc ? rc : !g_fail ? 0 : found & 1 ? CLI_EOOM : found & 2 ? CLI_EUNJUDGED : 0;
}
