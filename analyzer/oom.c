/*
 * oom.c - why an allocation ran out of memory: each OOM the trace recorded, replayed to its
 * moment, with what held the memory then, and the one verdict rule every command uses
 * (cmh_oom_verdict_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/owners.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "grow.h"
#include "memo.h"

/* ---- OOM ---- */

/* Owners' split of the device at each OOM the program saw: a demand where most of the device's
 * used memory was not this program's (a 700 MiB context of a 1 GiB device, the program's 320 MiB)
 * is the OUTSIDE verdict (it said 'demand: the memory was genuinely in use', listing the
 * program's 320 MiB and nothing of the rest).  Owners' moments are named as these are numbered. */
static int oom_outside(const cmh_snapshot *s, int device, cmh_oom_report *p)
{
    if (s->source == CMH_SRC_PYTORCH || !s->nmeminfo || !p->nevents) return CMH_OK;
    cmh_owners_report o;
    int rc = cmh_owners_compute(s, device, &o);
    if (rc != CMH_OK) return rc;
    /* each number's first moment, found once (a search of every moment for every error cost
     * errors x moments: 72k OOMs made 5e9 string compares) */
    uint32_t maxn = 0, *first = NULL;
    for (uint32_t i = 0; i < p->nevents; i++)
        if (p->events[i].number > maxn) maxn = p->events[i].number;
    if (maxn && !(first = malloc(((size_t)maxn + 1) * sizeof *first))) {
        cmh_owners_report_free(&o);
        return CMH_ENOMEM;
    }
    for (uint32_t n = 0; first && n <= maxn; n++) first[n] = UINT32_MAX;
    for (uint32_t k = o.nmoments; k-- > 0;) {
        unsigned n;
        char tail;
        if (o.moments[k].used_known && sscanf(o.moments[k].what, "out of memory #%u%c", &n, &tail) == 1 && n && n <= maxn) first[n] = k;
    }
    for (uint32_t i = 0; i < p->nevents; i++) {
        cmh_oom_event *e = &p->events[i];
        if (!e->number || first[e->number] == UINT32_MAX) continue; /* (a retried one: owners has no moment of it) */
        const cmh_owners_moment *m = &o.moments[first[e->number]];
        e->used_known = 1;
        e->device_used = m->used;
        e->device_total = m->total;
        for (uint32_t j = 0; j < m->nrows; j++)
            if (m->rows[j].kind == CMH_OWN_UNEXPLAINED) e->outside += m->rows[j].bytes;
        if (e->verdict == CMH_OOM_DEMAND && e->outside * 2 > e->device_used) e->verdict = CMH_OOM_OUTSIDE;
    }
    free(first);
    cmh_owners_report_free(&o);
    return CMH_OK;
}

/* ---- what kept the free bytes apart at a fragmentation OOM ---- */

typedef struct live_now {
    cmh_live_segment *seg;
    cmh_live_block *blk;
    uint32_t nseg, capseg, nblk, capblk;
    int nomem;
} live_now;

static void take_segment(void *arg, const cmh_live_segment *g)
{
    live_now *l = arg;
    if (CMH_GROW(l->seg, l->capseg, (uint64_t)l->nseg + 1, 64)) l->nomem = 1;
    else l->seg[l->nseg++] = *g;
}

static void take_block(void *arg, const cmh_live_block *b)
{
    live_now *l = arg;
    if (CMH_GROW(l->blk, l->capblk, (uint64_t)l->nblk + 1, 256)) l->nomem = 1;
    else l->blk[l->nblk++] = *b;
}

static int cmp_block_addr(const void *a, const void *b)
{
    const cmh_live_block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

typedef struct trap_row {
    uint32_t group, stack;
    uint64_t free;
} trap_row;

static int cmp_trap_row(const void *a, const void *b)
{
    const trap_row *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    if (x->free != y->free) return x->free > y->free ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* o's trap_*: each segment now with live blocks and free bytes, its holder (cmh_holder_pick, as
 * frag names a segment's), and the holder of the most of those free bytes. */
static int oom_trap(const cmh_replay *r, const cmh_sites *sites, cmh_oom_event *o)
{
    live_now l;
    memset(&l, 0, sizeof l);
    cmh_replay_segments(r, take_segment, &l); /* (by address) */
    cmh_replay_blocks(r, take_block, &l);
    trap_row *rows = l.nseg ? malloc(l.nseg * sizeof *rows) : NULL;
    int rc = l.nomem || (l.nseg && !rows) ? CMH_ENOMEM : CMH_OK;
    uint32_t n = 0;
    if (rc == CMH_OK && l.nblk > 1) qsort(l.blk, l.nblk, sizeof *l.blk, cmp_block_addr);
    for (uint32_t i = 0, k = 0; rc == CMH_OK && i < l.nseg; i++) {
        const cmh_live_segment *g = &l.seg[i];
        while (k < l.nblk && l.blk[k].addr < g->addr) k++;
        uint32_t first = k;
        uint64_t live = 0;
        for (; k < l.nblk && l.blk[k].addr - g->addr < g->size; k++) live += l.blk[k].size;
        if (k == first || live >= g->size) continue;
        cmh_holder h;
        rc = cmh_holder_pick(sites, &l.blk[first], k - first, &h);
        if (rc == CMH_OK && h.nsites) rows[n++] = (trap_row){h.group, h.stack, g->size - live};
    }
    if (rc == CMH_OK && n > 1) qsort(rows, n, sizeof *rows, cmp_trap_row);
    uint64_t most = 0;
    for (uint32_t i = 0; rc == CMH_OK && i < n;) {
        uint32_t j = i;
        uint64_t sum = 0;
        for (; j < n && rows[j].group == rows[i].group; j++) sum += rows[j].free;
        /* (groups ascending: the lowest of equals kept; its stack: the one of its segment with the most free) */
        if (!o->trap_sites++ || sum > most) o->trap_group = rows[i].group, o->trap_stack = rows[i].stack, o->trap_segs = j - i, most = sum;
        i = j;
    }
    o->trap_free = most;
    free(rows);
    free(l.seg);
    free(l.blk);
    return rc;
}

int cmh_oom_compute(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_oom_report *p)
{
    memset(p, 0, sizeof *p);
    cmh_report_base_fill(s, device, &p->base);
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    int64_t n = cmh_replay_length(r);
    uint32_t count = 0;
    for (int64_t i = 0; i < n; i++) count += cmh_replay_entry(r, i)->action == CMH_ACT_OOM;
    p->events = calloc(count ? count : 1, sizeof *p->events);
    if (!p->events) {
        cmh_replay_free(r);
        return CMH_ENOMEM;
    }
    const cmh_trace *rt = cmh_snapshot_trace(s, device);
    uint32_t *retry_at = count && rt && rt->nentries ? malloc((size_t)rt->nentries * sizeof *retry_at) : NULL;
    if (retry_at && cmh_oom_retry_table(s, rt, rt->nentries, retry_at) != CMH_OK) {
        free(retry_at);
        retry_at = NULL; /* (each OOM looked at on its own) */
    }
    const cmh_mem_stats *st = cmh_replay_stats(r);
    int64_t changes = 0, held_at = -1; /* entries so far that changed memory; at the holders of event held_from */
    uint32_t held_from = UINT32_MAX;
    /* the OOMs the ring dropped come first: the ones kept are numbered after them */
    const cmh_trace *dt = cmh_snapshot_trace(s, device);
    p->dropped = dt && dt->dropped_ooms < UINT32_MAX ? (uint32_t)dt->dropped_ooms : dt ? UINT32_MAX : 0;
    p->failures = p->dropped;
    /* up to the last OOM: the entries after it change no figure here (a trace without one is not
     * replayed at all) */
    for (int64_t i = 0; i < n && p->nevents < count; i++) {
        const cmh_entry *e = cmh_replay_entry(r, i);
        if (e->action == CMH_ACT_OOM) {
            cmh_oom_event *o = &p->events[p->nevents++];
            o->index = i;
            const cmh_trace *tr = cmh_snapshot_trace(s, device);
            uint32_t at = 0;
            /* (the table says which were retried in one pass; each one's own look costs up to
             * CMH_OOM_RETRY_WINDOW entries, paid here only for the retried, for what they freed) */
            if (!retry_at || retry_at[i]) o->retried = cmh_oom_retry(s, tr, (uint32_t)i, &o->retry_freed, &at);
            o->retry_index = o->retried ? (int64_t)at : -1;
            o->retry_failed = o->retried && s->entries[tr->first_entry + at].action == CMH_ACT_OOM;
            o->retry_of = -1;
            if (o->retried) p->retries++;
            else o->number = ++p->failures;
            o->time_ns = cmh_entry_time(s, e);
            o->request = cmh_entry_size(s, e);
            o->device_free = cmh_entry_addr(s, e);
            o->allocated = (uint64_t)st->allocated_bytes[0].current;
            o->reserved = (uint64_t)st->reserved_bytes[0].current;
            cmh_pool_id rp = cmh_entry_pool_id(s, e); /* the request's pool decides what of the free it could use */
            o->request_pool[0] = rp.id[0], o->request_pool[1] = rp.id[1];
            cmh_replay_free_split_for(r, rp.id, &o->split);
            o->largest_gap = o->split.largest_gap;
            /* free inside = reserved - allocated, by definition; what the gaps do not hold of it is
             * freed memory whose stream work is pending (a trace that contradicts itself may leave
             * the two apart: the figures then say what the counters say) */
            o->free_inside = o->reserved > o->allocated ? o->reserved - o->allocated : 0;
            uint64_t active = (uint64_t)st->active_bytes[0].current;
            o->pending_free = active > o->allocated ? active - o->allocated : 0;
            int pooled = e->kind == CMH_KIND_ASYNC || (e->kind == CMH_KIND_DEVICE && cmh_entry_stream(s, e)); /* (older records: kind unsaid) */
            if (!pooled && o->split.pool_cache) {
                o->pool_cache_unusable = o->split.pool_cache;
                o->split.unusable += o->split.pool_cache;
                cmh_replay_pool_cache_top(r, &o->cache_pool, &o->cache_pool_bytes);
            }
            /* a pooled request uses its own pool's cache only: the others' is not its (the recorder
             * says which pool it asked; older records do not) */
            o->request_driver_pool = pooled ? cmh_replay_request_pool(r, i) : 0;
            if (o->request_driver_pool && o->split.pool_cache) {
                uint64_t other = cmh_replay_pool_cache_except(r, o->request_driver_pool, &o->cache_pool, &o->cache_pool_bytes);
                o->pool_cache_unusable = other < o->split.pool_cache ? other : o->split.pool_cache;
                o->split.unusable += o->pool_cache_unusable;
            }
            o->usable = o->free_inside > o->split.unusable ? o->free_inside - o->split.unusable : 0;
            o->fits_in_gap = o->largest_gap >= o->request;
            o->verdict = cmh_oom_verdict_cache(o->request, o->free_inside, o->split.unusable, o->pool_cache_unusable, o->largest_gap,
                                               o->device_free);
            if (pooled && o->split.pool_cache > o->pool_cache_unusable && !o->fits_in_gap) {
                /* the pieces of a pool's cache are not in the record: a piece as large as the
                 * request may have been there, or none (docs/DEFINITIONS.md, the OOM verdict) */
                o->gap_unknown_in = o->split.pool_cache - o->pool_cache_unusable;
                if (o->verdict == CMH_OOM_FRAGMENTATION) o->verdict = CMH_OOM_POOL_PIECES;
            }
            if (o->verdict == CMH_OOM_DEMAND && cmh_oom_too_large(o->request, o->reserved, o->device_free)) o->verdict = CMH_OOM_TOO_LARGE;
            if (o->verdict == CMH_OOM_FRAGMENTATION && oom_trap(r, sites, o) != CMH_OK) {
                free(retry_at);
                cmh_replay_free(r);
                cmh_oom_report_free(p);
                return CMH_ENOMEM;
            }
            o->request_stack = e->stack;
            o->request_group = sites ? cmh_sites_group(sites, e->stack) : e->stack;
            /* the holders: the last error's where no entry since changed memory (a program
             * retrying after OOM: 72k errors at 80 instants, the live blocks gathered again
             * for each) */
            const cmh_oom_event *same = held_at == changes && held_from < p->nevents - 1 ? &p->events[held_from] : NULL;
            if (same) {
                o->nsites = same->nsites;
                o->sites = same->nsites ? malloc(same->nsites * sizeof *o->sites) : NULL;
                if (o->sites) memcpy(o->sites, same->sites, same->nsites * sizeof *o->sites);
            } else {
                held_at = changes;
                held_from = p->nevents - 1;
            }
            if (same ? same->nsites && !o->sites : cmh_live_sites(r, sites, 1, &o->sites, &o->nsites) != CMH_OK) {
                free(retry_at);
                cmh_replay_free(r);
                cmh_oom_report_free(p);
                return CMH_ENOMEM;
            }
        }
        if (e->action != CMH_ACT_OOM && e->action != CMH_ACT_SNAPSHOT && e->action != CMH_ACT_MARK) changes++;
        cmh_replay_step(r);
    }
    /* a retry that failed is an event too: it names the OOM it retried (events are in trace
     * order, so found by bisection) */
    for (uint32_t k = 0; k < p->nevents; k++) {
        if (!p->events[k].retry_failed) continue;
        uint32_t lo = k + 1, hi = p->nevents;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (p->events[mid].index < p->events[k].retry_index) lo = mid + 1;
            else hi = mid;
        }
        if (lo < p->nevents && p->events[lo].index == p->events[k].retry_index) p->events[lo].retry_of = p->events[k].index;
    }
    int rc = cmh_replay_status(r);
    free(retry_at);
    cmh_replay_free(r);
    if (rc == CMH_OK) rc = oom_outside(s, device, p);
    if (rc != CMH_OK) cmh_oom_report_free(p);
    return rc;
}

/* What a leak grew by over its stretch (rate x growth_steps), 0 for none. */
uint64_t cmh_leak_grown_by(const cmh_site *x)
{
    if (x->time_verdict == CMH_TIME_GROWING) /* judged over the record's time: what it grew by, observed */
        return x->time_to > x->time_from ? (uint64_t)(x->time_to - x->time_from) : 0;
    /* (less its requests the driver refused: counted in its growth, never allocated) */
    uint64_t grown = x->rate > 0 ? (uint64_t)x->rate * x->growth_steps : 0;
    return grown > x->refused_bytes ? grown - x->refused_bytes : 0;
}

int cmh_oom_growth(const cmh_snapshot *s, int device, const cmh_sites *sites, cmh_oom_report *p)
{
    int demand = 0;
    for (uint32_t i = 0; i < p->nevents; i++) demand |= p->events[i].verdict == CMH_OOM_DEMAND;
    if (!demand) return CMH_OK;
    /* the leaks report itself, not a judgement of its own: the two commands name the same site */
    cmh_leak_report lr;
    int rc = cmh_leaks_compute(s, device, sites, 0, &lr);
    if (rc != CMH_OK) return rc;
    for (uint32_t i = 0; i < p->nevents; i++) {
        cmh_oom_event *e = &p->events[i];
        if (e->verdict != CMH_OOM_DEMAND) continue;
        const cmh_site *best = NULL;
        uint64_t best_held = 0;
        uint32_t n = 0;
        for (uint32_t k = 0; k < lr.nsites; k++) {
            const cmh_site *x = &lr.sites[k];
            if (x->verdict != CMH_LEAK_GROWING) continue;
            uint64_t held = 0; /* what it held at the error: a site that held nothing then did not drive it */
            for (uint32_t j = 0; j < e->nsites && !held; j++)
                if (e->sites[j].group == x->group) held = e->sites[j].bytes;
            if (!held) continue;
            n++;
            if (!best || cmh_leak_grown_by(x) > cmh_leak_grown_by(best) || (cmh_leak_grown_by(x) == cmh_leak_grown_by(best) && x->group < best->group))
                best = x, best_held = held;
        }
        e->ngrowing = n;
        if (best) e->grew = *best, e->grew_held = best_held;
    }
    cmh_leak_report_free(&lr);
    return CMH_OK;
}

/* device free not known (CMH_DEVICE_FREE_UNKNOWN): the verdict rests on what the segments held,
 * adding nothing for the device, and never says the driver refused with room; where the segments'
 * free bytes alone were too few, nothing tells demand from the rest having been free on the device:
 * UNKNOWN, not DEMAND (a guess the record cannot back) */
static uint64_t known_free(uint64_t device_free) { return device_free == CMH_DEVICE_FREE_UNKNOWN ? 0 : device_free; }

int cmh_oom_verdict(uint64_t request, uint64_t free_inside, uint64_t largest_gap, uint64_t device_free)
{
    if (largest_gap >= request) return CMH_OOM_FIT_IGNORED;
    if (device_free != CMH_DEVICE_FREE_UNKNOWN && device_free >= request) return CMH_OOM_DRIVER;
    if (free_inside + known_free(device_free) >= request) return CMH_OOM_FRAGMENTATION;
    return device_free == CMH_DEVICE_FREE_UNKNOWN ? CMH_OOM_UNKNOWN : CMH_OOM_DEMAND;
}

int cmh_oom_verdict_pools(uint64_t request, uint64_t free_inside, uint64_t private_free, uint64_t largest_gap,
                          uint64_t device_free)
{
    uint64_t shared = free_inside > private_free ? free_inside - private_free : 0;
    int v = cmh_oom_verdict(request, shared, largest_gap, device_free);
    device_free = known_free(device_free);
    /* (enough free in private pools: said so, whatever the device had) */
    if ((v == CMH_OOM_DEMAND || v == CMH_OOM_UNKNOWN) && private_free && shared + private_free + device_free >= request)
        return CMH_OOM_PRIVATE_POOL;
    return v;
}

int cmh_oom_verdict_cache(uint64_t request, uint64_t free_inside, uint64_t private_free, uint64_t pool_cache, uint64_t largest_gap,
                          uint64_t device_free)
{
    int v = cmh_oom_verdict_pools(request, free_inside, private_free, largest_gap, device_free);
    uint64_t shared = free_inside > private_free ? free_inside - private_free : 0;
    device_free = known_free(device_free);
    /* the pools' cache is what would have made it fit: named, rather than private pools at large */
    if (v == CMH_OOM_PRIVATE_POOL && pool_cache && shared + pool_cache + device_free >= request) return CMH_OOM_POOL_CACHE;
    return v;
}

int cmh_oom_too_large(uint64_t request, uint64_t reserved, uint64_t device_free)
{
    /* device free not known (a PyTorch OOM entry without device_free, a failed cuMemGetInfo):
     * nothing says the device could not have had room */
    return device_free != CMH_DEVICE_FREE_UNKNOWN && reserved + device_free >= reserved && request > reserved + device_free;
}

const char *cmh_oom_verdict_name(int verdict)
{
    static const char *const names[] = {"demand", "fragmentation", "fit in a free gap", "refused with room", "private pool", "too large",
                                        "a pool's cache", "a pool's cache, pieces not known", "held outside the program",
                                        "not known"};
    return names[verdict >= 0 && verdict <= CMH_OOM_UNKNOWN ? verdict : 0];
}

int cmh_record_pytorch(const cmh_snapshot *s)
{
    if (s->source == CMH_SRC_PYTORCH || s->torch) return 1;
    /* (by the file: another package's _C extension is no PyTorch in the program) */
    for (uint32_t i = 0; i < s->nmodules; i++)
        if (cmh_sites_torch_module(cmh_str(s, s->modules[i].path))) return 1;
    return 0;
}

const char *cmh_oom_verdict_advice(int verdict, int pytorch)
{
    /* a program with no PyTorch in it has no set_per_process_memory_fraction nor empty_cache()
     * (a C program's OOM advice named PyTorch's); its limits come from the environment */
    if (!pytorch && verdict == CMH_OOM_DRIVER)
        return "refused with room: the device said it had enough free for the request, and the allocation failed all the "
               "same: a limit set on the process from outside it (an MPS server's CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), "
               "another process taking memory at that instant, or the driver's own fragmentation of the device's memory "
               "(free memory in pieces each smaller than the request); not this program's live memory";
    if (!pytorch && verdict == CMH_OOM_POOL_CACHE)
        return "held in a stream-ordered pool's cache: enough bytes were free only in what a memory pool (cuMemAllocAsync's) "
               "keeps after its frees, up to its release threshold, which an allocation from outside the pool cannot use: "
               "trim the pool (cuMemPoolTrimTo), lower its release threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), or "
               "allocate from the pool";
    return cmh_oom_verdict_text(verdict);
}

const char *cmh_oom_verdict_text(int verdict)
{
    static const char *const text[] = {
        "demand: the memory was genuinely in use",
        "fragmentation, not demand: enough bytes were free, but no free gap was large enough",
        "a free gap inside the reserved segments was large enough (another stream or memory pool?)",
        "refused with room: the device said it had enough free for the request, and the allocation failed all the same: "
        "a limit on the process (PyTorch's set_per_process_memory_fraction), another process taking memory at that "
        "instant, or the driver's own fragmentation; not this program's live memory",
        "held by a private pool: enough bytes were free only where the request's pool cannot use them: inside private "
        "pools' segments (a CUDA graph's or a MemPool's), which a request outside the pool cannot use and empty_cache() "
        "does not give back while the pool lives, or, for a private pool's request, in the default pool's gaps; free the "
        "graph or pool (del the graph, torch.cuda.empty_cache()) or capture with less memory",
        "too large: the request alone is more than the device had free and all the memory the record shows this "
        "process holding, together; nothing the process frees and no allocator setting makes it fit: check the size "
        "asked for (a shape, a batch or sequence length), or what other processes hold on the device",
        "held in a stream-ordered pool's cache: enough bytes were free only in what a memory pool (cuMemAllocAsync's) "
        "keeps after its frees, up to its release threshold, which an allocation from outside the pool cannot use and "
        "empty_cache() does not give back: trim the pool (cuMemPoolTrimTo), lower its release threshold "
        "(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), or allocate from the pool",
        "enough bytes were free, some in the request's stream-ordered pool's cache (what cuMemAllocAsync's pool keeps "
        "after its frees), whose pieces the record does not show: whether one was large enough is not known (the "
        "pool serves a request from one contiguous piece of its cache, or grows from the device's free memory); "
        "trim the pool (cuMemPoolTrimTo) so that it can grow by one piece of the request's size, or lower its "
        "release threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)",
        "held outside the program: most of the device's memory in use was not this program's (not recorded: the CUDA "
        "context, other processes on the GPU; the driver's cuMemGetInfo says it): see who holds it (nvidia-smi), run "
        "where the device is free, or fit the program in what is left",
        "not known: the record does not say how much the device had free at the error (no device_free in the OOM "
        "entry, or cuMemGetInfo failed), and the free bytes inside the segments alone were fewer than the request: "
        "whether the rest was in use (demand) or free on the device (fragmentation, or a refusal with room) cannot "
        "be told; a record of cumemhist's own (cumemhist record) samples the device's free bytes at each OOM"};
    return text[verdict >= 0 && verdict <= CMH_OOM_UNKNOWN ? verdict : 0];
}

void cmh_oom_report_free(cmh_oom_report *p)
{
    for (uint32_t i = 0; i < p->nevents; i++) free(p->events[i].sites);
    free(p->events);
    memset(p, 0, sizeof *p);
}
