/*
 * reports.c - what the reports share: live bytes grouped by their allocation stack ("sites"),
 * the base every report begins with (entries, history, dropped), and the peak: what owned memory
 * at the allocated peak.  The other questions users record for have files of their own: leaks.c
 * (what is leaking), frag.c (how fragmented the segments are), oom.c (why an allocation ran out of
 * memory).
 *
 * Everything is computed from a replay (replay.c), so it works the same on recorder snapshots
 * and on PyTorch pickles; byte figures of a PyTorch trace are in the allocator's rounded sizes
 * (replay.c sizes blocks the way the caching allocator does).
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "grow.h"
#include "memo.h"
#include "oatab.h"
#include "report_sites.h"

/* ---- sites: live bytes grouped by stack ---- */

typedef struct site_slot {
    uint64_t key; /* group + 1 */
    uint64_t i;
} site_slot;

typedef struct stack_slot {
    uint64_t key; /* stack + 1 */
    uint64_t bytes;
} stack_slot;

void cmh_site_map_init(cmh_site_map *m, const cmh_sites *sites)
{
    memset(m, 0, sizeof *m);
    m->sites = sites;
    cmh_oa_init(&m->index, sizeof(site_slot));
    cmh_oa_init(&m->stacks, sizeof(stack_slot));
}

/* The stack a site shows is the one of its stacks that holds the most bytes (the lowest stack id
 * among equals), not the first seen: blocks are visited in hash order, and under a shared wrapper
 * (one ctypes helper for every allocation) the first seen is any caller's, different run to run. */
static uint64_t stack_bytes(const cmh_site_map *m, uint32_t stack)
{
    const stack_slot *sl = cmh_oa_find(&m->stacks, (uint64_t)stack + 1);
    return sl ? sl->bytes : 0;
}

/* Whether STACK (holding MINE bytes) should show for a row or caller now showing CUR. */
static int stack_wins(const cmh_site_map *m, uint32_t stack, uint64_t mine, uint32_t cur)
{
    if (stack == cur) return 0;
    uint64_t theirs = stack_bytes(m, cur);
    return mine > theirs || (mine == theirs && stack < cur);
}

static void site_pick_stack(cmh_site_map *m, cmh_site *x, uint32_t stack, uint64_t size)
{
    int created;
    stack_slot *sl = cmh_oa_get(&m->stacks, (uint64_t)stack + 1, &created);
    if (!sl) {
        m->failed = 1;
        return;
    }
    sl->bytes += size;
    if (stack_wins(m, stack, sl->bytes, x->stack)) x->stack = stack;
}

static uint32_t group_of(const cmh_site_map *m, uint32_t stack) { return m->sites ? cmh_sites_group(m->sites, stack) : stack; }

static cmh_site *site_get(cmh_site_map *m, uint32_t stack)
{
    int created;
    uint32_t group = group_of(m, stack);
    site_slot *sl = cmh_oa_get(&m->index, (uint64_t)group + 1, &created);
    if (!sl) goto oom;
    if (!created) return &m->v[sl->i];
    if (CMH_GROW(m->v, m->cap, (uint64_t)m->n + 1, 64)) {
        cmh_oa_remove(&m->index, sl);
        goto oom;
    }
    sl->i = m->n;
    cmh_site *s = &m->v[m->n++];
    memset(s, 0, sizeof *s);
    s->group = group;
    s->stack = stack;
    s->callers_other.frame = UINT32_MAX;
    s->first_ns = INT64_MAX;
    s->last_ns = INT64_MIN;
    return s;
oom:
    m->failed = 1;
    return NULL;
}

void cmh_site_map_free(cmh_site_map *m)
{
    free(m->v);
    cmh_oa_free(&m->index);
    cmh_oa_free(&m->stacks);
    memset(m, 0, sizeof *m);
}

static int cmp_site(const void *a, const void *b)
{
    const cmh_site *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->group < y->group ? -1 : x->group > y->group;
}

/* Count a block's bytes under the caller of its site.  Callers are told apart by what they say
 * (function, file, line), not by frame id: two return addresses on one line are one caller. */
static void add_caller(const cmh_site_map *m, cmh_site *x, uint32_t stack, uint64_t size)
{
    if (!m->sites || cmh_sites_group_by(m->sites) != CMH_GROUP_SITE) return;
    const cmh_snapshot *sn = cmh_sites_snapshot(m->sites);
    const cmh_frame *f = cmh_sites_caller_of(m->sites, stack);
    cmh_site_caller *c = NULL;
    for (uint32_t i = 0; f && i < x->ncallers && !c; i++) {
        const cmh_frame *o = &sn->frames[x->callers[i].frame];
        if (o->name == f->name && o->filename == f->filename && o->line == f->line) c = &x->callers[i];
    }
    if (!c && f) {
        x->callers_seen++;
        if (x->ncallers < CMH_SITE_CALLERS) {
            c = &x->callers[x->ncallers++];
            c->frame = (uint32_t)(f - sn->frames);
        }
    }
    if (!c) c = &x->callers_other;
    /* (after site_pick_stack: the stack's bytes counted) */
    if (!c->count || stack_wins(m, stack, stack_bytes(m, stack), c->stack)) c->stack = stack;
    c->bytes += size;
    c->count++;
}

static int cmp_caller(const void *a, const void *b)
{
    const cmh_site_caller *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->frame < y->frame ? -1 : x->frame > y->frame;
}

/* Any active block, pending ones too: what held the memory (an OOM's holders). */
static void add_active_block(void *arg, const cmh_live_block *b)
{
    cmh_site_map *m = arg;
    cmh_site *s = site_get(m, b->stack);
    if (!s) return;
    site_pick_stack(m, s, b->stack, b->size);
    add_caller(m, s, b->stack, b->size);
    s->bytes += b->size;
    s->count += !b->more;
    if (b->time_ns && b->time_ns < s->first_ns) s->first_ns = b->time_ns;
    if (b->time_ns && b->time_ns > s->last_ns) s->last_ns = b->time_ns;
}

/* A block the program still holds (report_sites.h). */
void cmh_site_map_add_block(void *arg, const cmh_live_block *b)
{
    if (b->state == CMH_BLOCK_ACTIVE_PENDING_FREE) return;
    add_active_block(arg, b);
}

/* The sites, sorted, handed over to *out (the map is emptied); CMH_ENOMEM if it was incomplete. */
int cmh_site_map_finish(cmh_site_map *m, cmh_site **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    if (m->failed) {
        cmh_site_map_free(m);
        return CMH_ENOMEM;
    }
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->v[i].ncallers > 1) qsort(m->v[i].callers, m->v[i].ncallers, sizeof m->v[i].callers[0], cmp_caller);
        if (m->v[i].first_ns == INT64_MAX) m->v[i].first_ns = 0;
        if (m->v[i].last_ns == INT64_MIN) m->v[i].last_ns = 0;
    }
    if (m->n) qsort(m->v, m->n, sizeof *m->v, cmp_site);
    cmh_oa_free(&m->index);
    cmh_oa_free(&m->stacks);
    *out = m->v;
    *n = m->n;
    m->v = NULL;
    return CMH_OK;
}

int cmh_live_sites(const cmh_replay *r, const cmh_sites *sites, int with_pending, cmh_site **out, uint32_t *n)
{
    cmh_site_map m;
    cmh_site_map_init(&m, sites);
    cmh_replay_blocks(r, with_pending ? add_active_block : cmh_site_map_add_block, &m);
    return cmh_site_map_finish(&m, out, n);
}

void cmh_report_base_fill(const cmh_snapshot *s, int device, cmh_report_base *b)
{
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    b->device = device;
    b->entries = t ? t->nentries : 0;
    b->dropped = t ? t->dropped : 0;
    b->dropped_ooms = t ? t->dropped_ooms : 0;
    b->pytorch = s->source == CMH_SRC_PYTORCH;
    b->history = cmh_trace_has_history(s, device);
    b->nohist_cause = cmh_no_history_cause(s, device);
    memset(&b->gap, 0, sizeof b->gap); /* (the reports that replay to the end fill it) */
}

const char *cmh_no_history_cause(const cmh_snapshot *s, int device)
{
    if (s->opt_enabled == CMH_ENABLED_STATE) return "recorded with enabled=state";
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    if (!t && (s->pt_fields & CMH_PT_BARE_SEGMENTS) && !s->ntraces)
        return "the snapshot is memory_snapshot()'s bare segment list, which holds no trace";
    if (!t && (s->pt_fields & CMH_PT_LEGACY_HISTORY) && !s->ntraces)
        return "the snapshot has no trace: PyTorch 1.13's layout, segments with per-block history only";
    if (!t) return "the snapshot has no trace for this device";
    /* entries, none of them a change of memory: said as what they are (it read '1 trace entry'
     * then 'no history ... history off', which contradicted itself) */
    int snap = 0;
    for (uint32_t i = 0; i < t->nentries; i++) snap |= s->entries[t->first_entry + i].action == CMH_ACT_SNAPSHOT;
    if (t->nentries && snap && s->source == CMH_SRC_PYTORCH)
        return "its trace holds only `snapshot` markers (_snapshot() appends one), no allocation or free: its ring "
               "kept only its latest entries (PyTorch 2.0's trace_alloc_max_entries defaults to 1)";
    if (t->nentries) return "its trace holds only markers (snapshot, mark), no allocation or free";
    int held = 0;
    for (uint32_t i = 0; i < s->nsegments && !held; i++) held = s->segments[i].device == device;
    if (!held) /* nothing at all: history on while nothing was allocated reads the same */
        return "an empty trace and no segment: history off, or on while nothing was allocated, which the snapshot does not tell";
    return "recorded with enabled=state, or history off";
}

int cmh_trace_has_history(const cmh_snapshot *s, int device)
{
    /* a history: entries that say how memory changed (enabled=state leaves none, at most a
     * snapshot marker per device) */
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        int a = s->entries[t->first_entry + i].action;
        if (a != CMH_ACT_SNAPSHOT && a != CMH_ACT_MARK && a != CMH_ACT_POOL_SAMPLE) return 1;
    }
    return 0;
}

/* Whether device's OOM count is known: from its history, or counted without one (the
 * recorder's enabled=state counts every OOM in its trace's dropped_ooms, as PyTorch's num_ooms
 * is counted regardless of history, and says so by its setting "ooms_counted"). */
int cmh_trace_ooms_known(const cmh_snapshot *s, int device)
{
    if (cmh_trace_has_history(s, device)) return 1;
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    if (t && t->dropped_ooms) return 1;
    for (uint32_t i = 0; i < s->nsettings; i++)
        if (!strcmp(cmh_str(s, s->settings[i].key), "ooms_counted") && !strcmp(cmh_str(s, s->settings[i].value), "1")) return 1;
    return 0;
}

int cmh_nohist_ooms(const cmh_snapshot *s, int device, uint64_t *n)
{
    const cmh_trace *t = cmh_snapshot_trace(s, device);
    *n = 0;
    if (cmh_trace_has_history(s, device) || !cmh_trace_ooms_known(s, device)) return 0;
    *n = t ? t->dropped_ooms : 0;
    return 1;
}

/* ---- peak ---- */

int cmh_peak_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *p)
{
    return cmh_peak_compute_end(s, device, sites, p, NULL, NULL);
}

int cmh_peak_compute_end(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_peak_report *p, cmh_site **endv, uint32_t *nend)
{
    const cmh_replay *at; /* the totals' replay left one standing at the allocated peak */
    cmh_replay *own, *r = NULL;
    cmh_site_map end;
    if (endv) cmh_site_map_init(&end, sites), *endv = NULL, *nend = 0;
    int rc = cmh_peak_replay_end(s, device, p, &at, &own, endv ? cmh_site_map_add_block : NULL, endv ? &end : NULL);
    if (endv) {
        int erc = cmh_site_map_finish(&end, endv, nend); /* (frees the map on failure) */
        if (rc == CMH_OK) rc = erc;
        if (rc != CMH_OK) free(*endv), *endv = NULL, *nend = 0;
    }
    if (rc != CMH_OK) {
        cmh_replay_free(own);
        return rc;
    }
    if (cmh_memo_sites_get(s, device, sites, p)) {
        cmh_replay_free(own);
        return CMH_OK;
    }
    if (!at) { /* (none kept) again, up to the allocated peak, to see who owned memory then */
        if (!(r = cmh_replay_new(s, device))) return CMH_ENOMEM;
        while (cmh_replay_position(r) < p->alloc_index && cmh_replay_step(r)) {}
        at = r;
    }
    rc = cmh_live_sites(at, sites, 0, &p->sites, &p->nsites);
    if (rc == CMH_OK) rc = cmh_replay_status(at);
    cmh_replay_free(r);
    cmh_replay_free(own);
    if (rc != CMH_OK) cmh_peak_report_free(p);
    else cmh_memo_sites_put(s, device, sites, p);
    return rc;
}

int cmh_peak_extent(const cmh_peak_report *p)
{
    if (!p->base.history) return CMH_PEAK_UNKNOWN;
    /* live before the first entry: inferred by the replay from the end, so what was allocated and
     * freed before it, and any higher moment then, is not in the trace */
    if (p->base.dropped || p->alloc_start || p->reserved_start) return CMH_PEAK_AT_LEAST;
    return CMH_PEAK_EXACT;
}

void cmh_peak_report_free(cmh_peak_report *p)
{
    free(p->sites);
    memset(p, 0, sizeof *p);
}
