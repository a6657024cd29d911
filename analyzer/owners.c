/*
 * owners.c - who holds every byte of a device (cumemhist/owners.h).
 *
 * The driver-level record is replayed to each moment (the end, the peak of recorded device
 * memory, each out-of-memory error); every live allocation there is classified: inside a
 * segment PyTorch's part of the record knows (by address: its final segments and every range
 * its trace mapped) it is PyTorch's, and PyTorch's own replay, taken to the same instant on its
 * aligned clock, splits that into allocated and cached; else the module that called the driver
 * names it (a library by name, or the program).  A cuMemGetInfo sample gives the device's used
 * bytes: what the recorded rows leave of it is the unexplained row, computed at the sample's
 * own instant (the record replayed to it) and assumed steady to the moments without one.
 *
 * A sample and the trace can disagree by the calls then in flight: a hook logs an allocation
 * after the driver returns it, a free before the driver takes it back, so another thread's
 * allocation can be in cuMemGetInfo's used bytes and not yet in the trace (3 threads allocating
 * at once made 8 MiB 'not recorded' of nothing).  Each other thread has at most one call in the
 * driver: its first entry after the sample, if an allocation, or its last before, if a free
 * logged since the sampler's own last call.
 * What those may explain of a sample's excess makes a range, [excess - them, excess]; a sample
 * with nothing in flight is exact, and the steady assumption, taken from the nearest exact
 * sample, picks the figure in the range (its low end where no sample is exact).
 *
 * Physical memory made with cuMemCreate and mapped nowhere is in no segment: the record lists the
 * handles so held when it was written (.cmh vmm_unmapped), and the physmap says which of them
 * were in use and mapped nowhere at each moment (cmh_physmap_held: from their unmap, or their
 * making), so every moment, each sample's instant among them, has a row of them.  (Counted at
 * the end alone, a handle unmapped before the peak and kept was the peak's 'not recorded'.)  A
 * handle made and not mapped yet (its vmm_maps rows say when it was made) is in that row too, as
 * it is in the physical peak: one figure.
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/merge.h"
#include "cumemhist/owners.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "memo.h"
#include "strmatch.h"

const char *cmh_library_name(const char *m)
{
    static const struct {
        const char *prefix, *name;
    } libs[] = {
        {"libcublasLt", "cuBLASLt"}, {"libcublas", "cuBLAS"},   {"libcudnn", "cuDNN"},        {"libnccl", "NCCL"},
        {"libcufft", "cuFFT"},       {"libcusparse", "cuSPARSE"}, {"libcurand", "cuRAND"},    {"libcusolver", "cuSOLVER"},
        {"libcutensor", "cuTENSOR"}, {"libnvrtc", "NVRTC"},     {"libnvJitLink", "nvJitLink"}, {"libcupti", "CUPTI"},
        {"libnvshmem", "NVSHMEM"},   {"libnpp", "NPP"},         {"libnvjpeg", "nvJPEG"},       {"libcudart", "CUDA runtime"},
        {"libc10", "PyTorch"},       {"libtorch", "PyTorch"},   {"_C.cpython", "PyTorch"},
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (starts(m, libs[i].prefix)) return libs[i].name;
    return NULL;
}

const char *cmh_owner_name(const char *owner, int package, char *buf, size_t n)
{
    if (!owner || !*owner) return "";
    const char *lib = cmh_library_name(owner);
    if (!strcmp(owner, "PyTorch") || !strcmp(owner, "?") || package) snprintf(buf, n, "%s", owner);
    else if (lib) snprintf(buf, n, "%s (%s)", lib, owner); /* "cuBLAS (libcublas.so.13)" */
    else snprintf(buf, n, "program (%s)", owner);
    return buf;
}

/* ---- the rows of one moment ---- */

typedef struct acc {
    cmh_owner_row *rows;
    uint32_t n, cap;
    uint64_t torch_seen; /* bytes inside PyTorch's ranges */
    uint64_t blocks;     /* every live block */
    uint64_t managed;    /* managed memory's blocks (no row until the sample says what is on the device) */
    int nomem;
} acc;

static cmh_owner_row *add_row(acc *a, int kind, const char *name, uint64_t bytes, uint32_t count)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (a->rows[i].kind == kind && !strcmp(a->rows[i].name, name)) {
            a->rows[i].bytes += bytes;
            a->rows[i].allocations += count;
            return &a->rows[i];
        }
    if (a->n == a->cap) {
        uint32_t nc = a->cap ? a->cap * 2 : 16;
        cmh_owner_row *nr = realloc(a->rows, nc * sizeof *nr);
        if (!nr) {
            a->nomem = 1;
            return NULL;
        }
        a->rows = nr;
        a->cap = nc;
    }
    cmh_owner_row *r = &a->rows[a->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->kind = kind;
    r->bytes = bytes;
    r->allocations = count;
    return r;
}

/* One of PyTorch's own rows: what its memory_summary() counts as reserved */
static void add_torch_row(acc *a, int kind, const char *name, uint64_t bytes)
{
    cmh_owner_row *r = add_row(a, kind, name, bytes, 0);
    if (r) r->torch_pool = 1;
}

/* The row a stack's bytes go to: named once per stack, not once per block and moment (a record
 * of 72k OOMs, each moment with thousands of live blocks, spent its time naming them); the row
 * it went to in the moment last seen (moment), tried first. */
#define OWN_CACHE 4096
typedef struct own_cache {
    uint32_t stack, row, moment;
    int known, kind;
    char name[sizeof(((cmh_owner_row *)0)->name)];
} own_cache;

/* to = from, rows copied (to's own freed) */
static int acc_copy(acc *to, const acc *from)
{
    cmh_owner_row *rows = from->n ? malloc(from->n * sizeof *rows) : NULL;
    if (from->n && !rows) return CMH_ENOMEM;
    if (from->n) memcpy(rows, from->rows, from->n * sizeof *rows);
    free(to->rows);
    *to = *from;
    to->rows = rows;
    to->cap = from->n;
    return CMH_OK;
}

typedef struct ctx {
    own_cache *cache; /* OWN_CACHE entries, by stack (NULL: none, each block named) */
    uint32_t moment;  /* which moment's rows a is, for the cache's row hint */
    const cmh_snapshot *s; /* the driver-level record (NULL for a PyTorch snapshot alone) */
    const cmh_snapshot *t; /* PyTorch's part (or the PyTorch snapshot itself) */
    const cmh_sites *g;    /* of s, grouped by stack */
    cmh_range *tr;
    uint32_t ntr;
    acc *a;
    cmh_physmap *pm; /* which handle each VMM map holds, at the moment (NULL: none) */
} ctx;

static void name_owned(ctx *c, uint32_t stack, int *kind, char *name, size_t n);

/* A row for bytes a stack's module owns. */
static void add_owned(ctx *c, uint32_t stack, uint64_t bytes, uint32_t count)
{
    acc *a = c->a;
    if (!c->cache) {
        own_cache one;
        name_owned(c, stack, &one.kind, one.name, sizeof one.name);
        add_row(a, one.kind, one.name, bytes, count);
        return;
    }
    own_cache *e = &c->cache[stack % OWN_CACHE];
    if (!e->known || e->stack != stack) {
        e->known = 1;
        e->stack = stack;
        e->moment = UINT32_MAX;
        name_owned(c, stack, &e->kind, e->name, sizeof e->name);
    }
    if (e->moment == c->moment && e->row < a->n) { /* (rows are only appended while a moment is filled) */
        a->rows[e->row].bytes += bytes;
        a->rows[e->row].allocations += count;
        return;
    }
    add_row(a, e->kind, e->name, bytes, count);
    if (a->nomem) return;
    for (uint32_t i = 0; i < a->n; i++)
        if (a->rows[i].kind == e->kind && !strcmp(a->rows[i].name, e->name)) {
            e->row = i;
            e->moment = c->moment;
            break;
        }
}

/* The row (kind and name) for bytes a stack's module owns. */
static void name_owned(ctx *c, uint32_t stack, int *kind, char *out, size_t n)
{
    const char *owner = stack ? cmh_sites_owner(c->g, cmh_sites_group(c->g, stack)) : "";
    const char *lib = *owner ? cmh_library_name(owner) : NULL;
    int package = *owner && cmh_sites_owner_package(c->g, cmh_sites_group(c->g, stack));
    if (!*owner && !stack) { /* the words peak, leaks and the flamegraph give it (cmh_no_stack_reason) */
        snprintf(out, n, "unknown (no stack: %s)", cmh_no_stack_reason(c->s ? c->s : c->t));
        *kind = CMH_OWN_UNKNOWN;
    } else if (!*owner) {
        snprintf(out, n, "unknown (recorded without a stack)");
        *kind = CMH_OWN_UNKNOWN;
    } else if (lib && !strcmp(lib, "PyTorch")) {
        snprintf(out, n, "%s", c->t ? "PyTorch, outside its caching allocator" : "PyTorch (caching allocator, reserved)");
        *kind = CMH_OWN_TORCH_RESERVED;
    }
    /* by the name every report's owner tag gives it (cmh_owner_name): "cuBLAS (libcublas.so.13)",
     * a Python library by its name, the program's code "program (train.py)" */
    else if (lib || package) {
        char name[sizeof c->a->rows[0].name];
        snprintf(out, n, "%s", cmh_owner_name(owner, package, name, sizeof name));
        *kind = CMH_OWN_LIBRARY;
    } else {
        char name[sizeof c->a->rows[0].name];
        snprintf(out, n, "%s", cmh_owner_name(owner, 0, name, sizeof name));
        *kind = CMH_OWN_PROGRAM;
    }
}

/* A mapped handle's part mapped nowhere: memory cuMemCreate made, the creation site's. */
static void on_remainder(void *arg, const cmh_vmm_map *row, uint64_t bytes) { add_owned(arg, row->handle_stack, bytes, 0); }

/* A handle made and not mapped yet: held, in the driver's used bytes, in no segment; the row the
 * end gives the handles held and mapped nowhere (vmm_unmapped).  Left out, it was in a sample's
 * 'not recorded' taken before its first map, and counted again once mapped, at every moment that
 * took its figure from that sample (vmm_phys spare's peak: 156 MiB for the driver's 140). */
static void on_block(void *arg, const cmh_live_block *b)
{
    ctx *c = arg;
    acc *a = c->a;
    a->blocks += b->size;
    if (c->t && cmh_ranges_overlap(c->tr, c->ntr, b->addr, b->addr + b->size)) {
        a->torch_seen += b->size;
        const cmh_vmm_map *row = cmh_physmap_find(c->pm, b->addr);
        if (row) cmh_physmap_take(c->pm, row, b->size); /* (its handle's bytes are PyTorch's rows') */
        return;
    }
    if (b->state == CMH_BLOCK_ACTIVE_PENDING_FREE) { /* freed: no longer its caller's, as peak and leaks say */
        add_row(a, CMH_OWN_PENDING_FREE, "freed, stream work pending (an allocator above the driver)", b->size, 0);
        return;
    }
    uint64_t bytes = b->size;
    const cmh_vmm_map *row = cmh_physmap_find(c->pm, b->addr);
    if (row) { /* a handle's memory counts once: a second mapping of bytes counted already adds none */
        bytes = cmh_physmap_take(c->pm, row, b->size);
        if (!bytes) return;
    } else if (c->pm && cmh_physmap_managed(c->pm, b->addr)) { /* on the device or not: the sample says (compute) */
        a->managed += b->size;
        return;
    }
    add_owned(c, b->stack, bytes, !b->more);
}

/* PyTorch's part taken up to torch time t_ns (INT64_MAX: to its end, reconciled). */
typedef struct tstate {
    cmh_replay *r;
    int done;
} tstate;

static void torch_to(tstate *ts, int64_t t_ns)
{
    while (!ts->done) {
        const cmh_entry *e = cmh_replay_entry(ts->r, cmh_replay_position(ts->r) + 1);
        if (e && t_ns != INT64_MAX && cmh_entry_time(cmh_replay_snapshot(ts->r), e) > t_ns) break;
        if (!cmh_replay_step(ts->r)) ts->done = 1;
    }
}

static int cmp_row(const void *x, const void *y)
{
    const cmh_owner_row *p = x, *q = y;
    if (p->bytes != q->bytes) return p->bytes > q->bytes ? -1 : 1;
    return strcmp(p->name, q->name);
}

/* ---- moments ---- */

typedef struct want {
    int64_t index; /* in s's device trace (or t's, for a PyTorch snapshot); INT64_MAX = the end */
    int64_t time_ns;
    char what[32];
    int hidden; /* a cuMemGetInfo sample's instant: only its recorded bytes are wanted */
    uint32_t sample;
    int bad;              /* a sample that cannot be (free > total): left out */
    int ranged;           /* lo and hi known (sample_range) */
    uint64_t lo, hi;      /* a sample's: the unexplained bytes, at least and at most (calls in flight) */
    uint32_t others[2];   /* a sample's: the threads not its sampler with entries after it, before it */
    uint64_t recorded; /* filled */
    acc rows;
    uint64_t torch_alloc, torch_reserved;
} want;

static int cmp_want(const void *x, const void *y)
{
    const want *p = x, *q = y;
    if (p->index != q->index) return p->index < q->index ? -1 : 1;
    /* at one instant (a peak that is the final state): the samples, then the peak, the end last */
    int a = p->hidden ? 0 : strcmp(p->what, "end") ? 1 : 2, b = q->hidden ? 0 : strcmp(q->what, "end") ? 1 : 2;
    return (a > b) - (a < b);
}

/* PyTorch's rows.  held: the bytes it holds as the driver saw them (its ranges' live
 * allocations), or as it says itself (held_own) for a PyTorch snapshot alone.  Its trace logs
 * a segment a moment after the driver made it, so at an instant the driver's view is the one
 * that sums with the others: cached = held - active, and the blocks freed with stream work
 * pending (active - allocated) a row of their own, as peak and leaks count them: not in use,
 * and not free to serve a request or to give back either. */
static void torch_rows(want *w, const cmh_mem_stats *st, int held_own)
{
    w->torch_alloc = (uint64_t)st->allocated_bytes[CMH_POOL_ALL].current;
    w->torch_reserved = (uint64_t)st->reserved_bytes[CMH_POOL_ALL].current;
    uint64_t active = (uint64_t)st->active_bytes[CMH_POOL_ALL].current;
    uint64_t held = held_own ? w->torch_reserved : w->rows.torch_seen;
    uint64_t alloc = w->torch_alloc < held ? w->torch_alloc : held;
    uint64_t pending = active > w->torch_alloc ? active - w->torch_alloc : 0;
    if (pending > held - alloc) pending = held - alloc;
    add_torch_row(&w->rows, CMH_OWN_TORCH_ALLOCATED, "PyTorch allocated", alloc);
    if (pending) add_torch_row(&w->rows, CMH_OWN_PENDING_FREE, "PyTorch freed, stream work pending", pending);
    add_torch_row(&w->rows, CMH_OWN_TORCH_CACHED, "PyTorch reserved but free (cached)", held - alloc - pending);
}

static const cmh_trace *trace_of(const cmh_snapshot *s, int dev)
{
    for (uint32_t i = 0; i < s->ntraces; i++)
        if (s->traces[i].device == dev) return &s->traces[i];
    return NULL;
}

/* A sample of device taken before the first entry its ring kept, where the ring dropped entries:
 * those dropped entries may have come before it or after it, so what the record held at its
 * instant is not known (replayed to 'before the first entry' it is the kept window's start, not
 * the sample's moment: a truncated ring called 200 MiB the program had since freed 'not
 * recorded').  Such a sample is valid at no moment owners shows: left out. */
static int sample_outside(const cmh_snapshot *s, int device, const cmh_meminfo *m)
{
    const cmh_trace *t = trace_of(s, device);
    if (!t || !t->dropped) return 0;
    if (s->dump_time_ns && m->time_ns >= s->dump_time_ns) return 0; /* the dump's: the end */
    return !t->nentries || m->time_ns < cmh_entry_time(s, &s->entries[t->first_entry]);
}

/* How early a sample's stamp can be against the entry it follows (two clocks, kept records) */
#define FLIGHT_NS_EARLY 50000000ll

/* Where sample m of device sits in trace t: after the last entry up to its time (-1: before
 * the first).  A sample that names its sampler was taken after that thread's own call returned
 * and was logged, so it follows at least one entry of that thread: placed by time before every
 * entry of it (a record whose samples were stamped on another clock than its entries, a few
 * microseconds early), it is moved after the sampler's first entry, the call it follows (it
 * already counts that call's bytes: taken before it, they were counted twice, once recorded and
 * once as not recorded, 'assumed steady' for the whole run). */
static int64_t place_sample(const cmh_snapshot *s, const cmh_trace *t, const cmh_meminfo *m, const int64_t *tmax)
{
    int64_t n = t ? t->nentries : 0, at = -1, mine = -1, i = 0;
    if (tmax) { /* tmax[i]: the latest time of entries [0, i]: the scan's first stop found by halving */
        int64_t lo = 0, hi = n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (tmax[mid] <= m->time_ns) lo = mid + 1;
            else hi = mid;
        }
        i = lo;
        at = i - 1;
        for (int64_t j = i - 1; m->thread && j >= 0 && mine < 0; j--)
            if (cmh_entry_thread(s, &s->entries[t->first_entry + j]) == m->thread) mine = j;
    }
    for (; i < n; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        if (cmh_entry_time(s, e) > m->time_ns) {
            if (!m->thread || mine >= 0) break;
            if (cmh_entry_thread(s, e) == m->thread) return i; /* the sampler's first: the call it follows */
            if (cmh_entry_time(s, e) - m->time_ns > FLIGHT_NS_EARLY) break;
            continue;
        }
        at = i;
        if (m->thread && cmh_entry_thread(s, e) == m->thread) mine = i;
    }
    return at;
}

/* ---- calls in flight at a sample ---- */

/* How far from a sample a thread's call can still have been in the driver at it: a hook logs
 * within microseconds of the driver's return, but a loaded machine can hold a thread between
 * the two for many milliseconds.  The scan is bounded in entries too (a busy trace). */
#define FLIGHT_NS 250000000ll
#define FLIGHT_ENTRIES 65536
#define FLIGHT_THREADS 256

static int is_alloc(int a) { return a == CMH_ACT_SEGMENT_ALLOC || a == CMH_ACT_SEGMENT_MAP; }
static int is_free(int a) { return a == CMH_ACT_SEGMENT_FREE || a == CMH_ACT_SEGMENT_UNMAP; }

/* The bytes of the calls other threads may have had in the driver at sample w (entries
 * [0, first) the record up to it): per thread (not the sampler, whose calls are all logged by
 * then), its first entry from first on if that is an allocation; and, where the sampler is
 * known, its last entry since the sampler's own last one if that is a free (a free logged
 * longer before is taken as done: else every thread's last free before a dump at exit would
 * make a context's figure uncertain).  Each no larger than excess (a call that big was not in
 * the sample's excess), their sum at most excess. */
static uint64_t in_flight(const cmh_snapshot *s, const cmh_trace *tr, int64_t first, const cmh_meminfo *m, uint64_t excess, const uint32_t others[2])
{
    uint32_t seen[FLIGHT_THREADS];
    uint64_t sum = 0;
    for (int dir = 1; dir >= (m->thread ? -1 : 1) && sum < excess; dir -= 2) {
        uint32_t nseen = 0;
        int64_t i = dir > 0 ? first : first - 1;
        /* (once every other thread with an entry that way is seen, no entry further out adds: a
         * short trace of a few threads scanned its whole window for each sample) */
        for (int64_t n = 0; i >= 0 && i < (int64_t)tr->nentries && n < FLIGHT_ENTRIES && sum < excess && nseen < others[dir < 0]; i += dir, n++) {
            const cmh_entry *e = &s->entries[tr->first_entry + i];
            int64_t t = cmh_entry_time(s, e);
            if (t && m->time_ns && (dir > 0 ? t - m->time_ns : m->time_ns - t) > FLIGHT_NS) break;
            uint32_t th = cmh_entry_thread(s, e), k = 0;
            if (m->thread && th == m->thread && dir < 0) break;
            if (m->thread && th == m->thread) continue;
            while (k < nseen && seen[k] != th) k++;
            if (k < nseen) continue; /* not this thread's nearest entry to the sample */
            if (nseen == FLIGHT_THREADS) break;
            seen[nseen++] = th;
            uint64_t size = cmh_entry_size(s, e);
            if ((dir > 0 ? is_alloc(e->action) : is_free(e->action)) && size <= excess) sum += size;
        }
    }
    return sum < excess ? sum : excess;
}

/* Sample w's range of unexplained bytes: [excess - in flight, excess]. */
static void sample_range(const cmh_snapshot *s, const cmh_trace *tr, want *w)
{
    if (w->ranged) return;
    const cmh_meminfo *m = &s->meminfo[w->sample];
    uint64_t used = m->total - m->free; /* (a bad one, free > total, is never asked) */
    w->hi = used > w->recorded ? used - w->recorded : 0;
    int64_t first = w->index == INT64_MAX ? (tr ? (int64_t)tr->nentries : 0) : w->index + 1;
    w->lo = w->hi - (w->hi && tr ? in_flight(s, tr, first, m, w->hi, w->others) : 0);
    w->ranged = 1;
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* Whether pos[lo, hi) (a thread's entries, ascending) holds one in [a, b] */
static int thread_in(const int64_t *pos, int64_t lo, int64_t hi, int64_t a, int64_t b)
{
    int64_t end = hi;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pos[mid] < a) lo = mid + 1;
        else hi = mid;
    }
    return lo < end && pos[lo] <= b;
}

static int64_t dist(int64_t a, int64_t b) { return a > b ? a - b : b - a; }

/* The unexplained bytes taken from sample b: exact, or, where calls were in flight, the nearest
 * exact sample's figure (the steady assumption) as far as b's own range allows; its low end
 * where no sample nearby is exact.  Samples are looked at outward from b, a few each side.
 * *src: the sample the figure is taken from (b itself where exact, or where none nearby is). */
static uint64_t sample_unexplained(const cmh_snapshot *s, const cmh_trace *tr, want *w, uint32_t nw, want *b, want **src)
{
    sample_range(s, tr, b);
    *src = b;
    if (b->lo == b->hi) return b->hi;
    /* w is in trace order: step out from b to the nearer of the next samples either side */
    int64_t l = b - w - 1, r = b - w + 1;
    for (int tried = 0; tried < 16; tried++) {
        while (l >= 0 && (!w[l].hidden || w[l].bad)) l--;
        while (r < (int64_t)nw && (!w[r].hidden || w[r].bad)) r++;
        if (l < 0 && r >= (int64_t)nw) break;
        int64_t j = l < 0 ? r : r >= (int64_t)nw ? l : dist(w[l].time_ns, b->time_ns) <= dist(w[r].time_ns, b->time_ns) ? l : r;
        if (j == l) l--;
        else r++;
        sample_range(s, tr, &w[j]);
        if (w[j].lo == w[j].hi) {
            *src = &w[j];
            return w[j].hi < b->lo ? b->lo : w[j].hi > b->hi ? b->hi : w[j].hi;
        }
    }
    return b->lo;
}

/* A sample placed at position a and a moment at b (entry indices of tr; INT64_MAX: the end, after
 * every entry) are one instant when no entry between them changed memory (a sample at an
 * out-of-memory error is taken just before the error's own entry).  Only then do the calls in
 * flight at the sample bear on the moment: at a later moment they are logged, the memory they
 * held recorded; at an earlier one they may not have begun.
 * Counted once: chg[i] is how many of entries [0, i] changed memory, so a and b are one instant
 * when their counts match (scanning the entries between each moment and each sample made a
 * record of N errors, each with its sample, cost N^3: 66 s for 4000 retried OOMs). */
typedef struct instants {
    int64_t *chg;
    int64_t n;
} instants;

static int instants_fill(instants *in, const cmh_snapshot *s, const cmh_trace *tr)
{
    in->n = tr ? (int64_t)tr->nentries : 0;
    in->chg = malloc((size_t)(in->n ? in->n : 1) * sizeof *in->chg);
    if (!in->chg) return CMH_ENOMEM;
    for (int64_t i = 0, c = 0; i < in->n; i++) {
        int act = s->entries[tr->first_entry + i].action;
        if (act != CMH_ACT_OOM && act != CMH_ACT_SNAPSHOT && act != CMH_ACT_MARK) c++;
        in->chg[i] = c;
    }
    return CMH_OK;
}

static int64_t instant_of(const instants *in, int64_t a)
{
    if (a < 0 || !in->n) return 0;
    return in->chg[a >= in->n ? in->n - 1 : a];
}

/* A usable sample (hidden, not bad) of w: its instant, time and place in w. */
typedef struct sref {
    int64_t inst, time_ns;
    uint32_t j;
} sref;

static int cmp_sref_time(const void *x, const void *y)
{
    const sref *p = x, *q = y;
    if (p->time_ns != q->time_ns) return p->time_ns < q->time_ns ? -1 : 1;
    return (p->j > q->j) - (p->j < q->j);
}

static int cmp_sref_inst(const void *x, const void *y)
{
    const sref *p = x, *q = y;
    if (p->inst != q->inst) return p->inst < q->inst ? -1 : 1;
    return cmp_sref_time(x, y);
}

/* The first of a[lo, hi) (sorted by time, then place) whose time is at least t */
static int64_t sref_lower(const sref *a, int64_t lo, int64_t hi, int64_t t)
{
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid].time_ns < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The first of a[0, n) (sorted by instant) whose instant is at least inst */
static int64_t sref_inst_lower(const sref *a, int64_t n, int64_t inst)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid].inst < inst) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Of a[lo, hi), the sample nearest in time to t, the first of those as near (-1: none).  Near is
 * judged in whole microseconds, the resolution every record of it keeps (a pickle's entry times
 * are microseconds, its samples nanoseconds), so that the nearest sample, and so the 'not
 * recorded' row, is the same from a .cmh and from its pickle: a moment 500.9 us after one sample
 * and 500.1 us before another took the later from the .cmh, the earlier from its pickle (asyncdev
 * under load: "cuMemGetInfo at +973 us" against "+939 us"). */
static int64_t sref_nearest(const sref *a, int64_t lo, int64_t hi, int64_t t)
{
    if (lo >= hi) return -1;
    int64_t us = t / 1000;
    int64_t r = sref_lower(a, lo, hi, us * 1000), l = r - 1; /* r: the first at or after t's microsecond */
    if (l >= lo) l = sref_lower(a, lo, hi, a[l].time_ns / 1000 * 1000); /* the first of its microsecond */
    if (l < lo) return r;
    if (r >= hi) return l;
    int64_t dl = us - a[l].time_ns / 1000, dr = a[r].time_ns / 1000 - us;
    if (dl != dr) return dl < dr ? l : r;
    return a[l].j < a[r].j ? l : r;
}

uint64_t cmh_owners_vmm_unmapped(const cmh_snapshot *s, int device, uint32_t *count)
{
    uint64_t b = 0;
    *count = 0;
    for (uint32_t i = 0; s && i < s->nvmm_unmapped; i++)
        if (s->vmm_unmapped[i].device == device) {
            b += s->vmm_unmapped[i].size;
            ++*count;
        }
    return b;
}

static int compute(const cmh_snapshot *s0, int device, cmh_owners_report *out, int end_only)
{
    memset(out, 0, sizeof *out);
    out->device = device;
    ctx c = {0};
    c.s = s0->source == CMH_SRC_PYTORCH ? NULL : s0;
    c.t = s0->source == CMH_SRC_PYTORCH ? s0 : s0->torch;
    int64_t clock = s0->source == CMH_SRC_PYTORCH ? 0 : s0->torch_clock_ns;
    out->torch = c.t != NULL;
    const cmh_snapshot *base = c.s ? c.s : c.t; /* whose trace the moments index */
    int rc = CMH_ENOMEM;
    want *w = NULL;
    uint32_t nw = 0;
    cmh_sites *g = NULL;
    cmh_replay *r = NULL;
    tstate ts = {NULL, 0};
    instants in = {NULL, 0};
    sref *by_inst = NULL, *by_time = NULL;
    int64_t nsr = 0, *tmax = NULL;
    uint32_t *thr = NULL, nthr = 0, *retry_at = NULL;
    int64_t *thr_pos = NULL, *thr_off = NULL, blk_inst = -1;
    acc blk_rows = {0}; /* the live blocks' rows at instant blk_inst */
    if (c.s) {
        cmh_site_opts o = {CMH_GROUP_STACK, 0, NULL, 0};
        char err[128];
        g = cmh_sites_new(c.s, &o, &rc, err, sizeof err);
        if (!g) return rc;
        c.g = g;
    }
    if (c.t && c.s && cmh_torch_ranges(c.t, device, &c.tr, &c.ntr) != CMH_OK) goto out;
    if (c.s && !(c.cache = calloc(OWN_CACHE, sizeof *c.cache))) goto out;

    /* pass 1: the peak of recorded device memory and the OOMs (not for the end alone) */
    int64_t peak_i = -1, peak = -1;
    uint32_t nooms = 0, cap = 8;
    w = calloc(cap, sizeof *w);
    if (!w) goto out;
    /* (the peak from the replay of the whole trace, which a report page has made already) */
    int64_t end_reserved = -1;
    cmh_peak_report pk;
    if (!end_only && cmh_reserved_peaks_totals(base, device, &peak, &peak_i, &end_reserved, &pk) != CMH_OK) goto out;
    /* the allocated peak, for the peak moment to say which peak it is (the reserved one): `peak`'s
     * own where base is the record `peak` replays (a merged record's is its one model, which
     * the caller has: cmh_owners_set_alloc_peak) */
    if (!end_only && !(c.s && c.t)) {
        out->alloc_peak_known = 1;
        out->alloc_peak = pk.alloc_peak;
        out->alloc_peak_index = pk.alloc_index;
        out->alloc_peak_time_ns = pk.alloc_time_ns;
    }
    /* reserved at the end above every entry's (the final segments hold memory no entry made):
     * `peak` names the final state its reserved peak, and so does the peak moment here (it was
     * the trace's highest entry, below this report's own end) */
    if (end_reserved > peak && peak >= 0) {
        out->reconciled = 1;
        out->trace_peak = peak;
        out->end_reserved = end_reserved;
        peak = end_reserved;
    }
    /* the physical peak, where cuMemCreate handles put it elsewhere: the moment the device held
     * the most for the process (a handle made and not mapped yet is in no range, and counted in
     * reserved's peak nowhere) */
    cmh_physical_peak pp = {0};
    int64_t phys_at_peak = -1; /* physical at reserved's peak: a physical peak too, where as high */
    if (!end_only && c.s && !out->reconciled && peak >= 0 && cmh_physical_peak_at(base, device, peak_i, &pp, &phys_at_peak) != CMH_OK) goto out;
    const cmh_trace *pbt = trace_of(base, device);
    if (pp.known && pp.index != peak_i && phys_at_peak < pp.peak && pbt && pp.index < (int64_t)pbt->nentries) {
        out->peak_physical = 1;
        out->reserved_peak = peak;
        out->reserved_peak_time_ns = peak_i >= 0 ? cmh_entry_time(base, &base->entries[pbt->first_entry + peak_i]) : 0;
        out->reserved_peak_index = peak_i;
        if (peak_i >= 0 && cmh_merged_position(s0, device, peak_i, &out->reserved_peak_index, &(int64_t){0}) != CMH_OK) goto out;
        peak_i = pp.index;
        peak = pp.peak;
    }
    const cmh_trace *ptr = end_only ? NULL : trace_of(base, device);
    if (ptr && ptr->dropped_ooms) nooms = ptr->dropped_ooms < UINT32_MAX ? (uint32_t)ptr->dropped_ooms : UINT32_MAX; /* numbered after the ring's dropped ones */
    /* which OOMs were retried, in one pass (cmh_oom_retried for each looked back up to
     * CMH_OOM_RETRY_WINDOW entries apiece); an OOM at a time without room */
    if (ptr && ptr->nentries && (retry_at = malloc((size_t)ptr->nentries * sizeof *retry_at)) &&
        cmh_oom_retry_table(base, ptr, ptr->nentries, retry_at) != CMH_OK) {
        free(retry_at);
        retry_at = NULL;
    }
    for (int64_t i = 0; ptr && i < ptr->nentries; i++) {
        const cmh_entry *e = &base->entries[ptr->first_entry + i];
        if (e->action == CMH_ACT_OOM) {
            if (nw + 2 >= cap) {
                want *nwp = realloc(w, (cap *= 2) * sizeof *w);
                if (!nwp) goto out;
                w = nwp;
            }
            memset(&w[nw], 0, sizeof *w);
            w[nw].index = i;
            w[nw].time_ns = cmh_entry_time(base, e);
            /* numbered as oom and summary count them: a retried one is no OOM the program saw */
            uint64_t freed;
            if (retry_at ? retry_at[i] != 0 : cmh_oom_retried(base, ptr, (uint32_t)i, &freed)) snprintf(w[nw].what, sizeof w[nw].what, "out of memory, retried");
            else snprintf(w[nw].what, sizeof w[nw].what, "out of memory #%u", ++nooms);
            nw++;
        }
    }
    /* cuMemGetInfo samples of this device: their instants join the moments, unseen */
    uint32_t nsamples = 0;
    for (uint32_t k = 0; c.s && k < c.s->nmeminfo; k++)
        if (c.s->meminfo[k].device == device) nsamples++;
    want *nwp = realloc(w, (nw + 2 + nsamples) * sizeof *w);
    if (!nwp) goto out;
    w = nwp;
    const cmh_trace *btr = trace_of(base, device);
    int64_t nent = btr ? btr->nentries : 0, merged_len = nent;
    if (nsamples) { /* (each sample placed by a scan from the first entry: samples x entries) */
        tmax = malloc((size_t)(nent ? nent : 1) * sizeof *tmax);
        if (!tmax) goto out;
        for (int64_t i = 0; i < nent; i++) {
            int64_t t = cmh_entry_time(base, &base->entries[btr->first_entry + i]);
            tmax[i] = i && tmax[i - 1] > t ? tmax[i - 1] : t;
        }
    }
    if (nsamples) { /* the trace's threads, each once, with their entries (thr_pos[thr_off[t] ..]) */
        thr = malloc((size_t)(nent ? nent : 1) * sizeof *thr);
        thr_pos = malloc((size_t)(nent ? nent : 1) * sizeof *thr_pos);
        if (!thr || !thr_pos) goto out;
        for (int64_t i = 0; i < nent; i++) thr[i] = cmh_entry_thread(base, &base->entries[btr->first_entry + i]);
        qsort(thr, (size_t)nent, sizeof *thr, cmp_u32);
        for (int64_t i = 0; i < nent; i++)
            if (!nthr || thr[nthr - 1] != thr[i]) thr[nthr++] = thr[i];
        if (!(thr_off = calloc((size_t)nthr + 1, sizeof *thr_off))) goto out;
        for (int64_t i = 0; i < nent; i++) {
            uint32_t id = cmh_entry_thread(base, &base->entries[btr->first_entry + i]);
            thr_off[(uint32_t *)bsearch(&id, thr, nthr, sizeof *thr, cmp_u32) - thr + 1]++;
        }
        for (uint32_t t = 0; t < nthr; t++) thr_off[t + 1] += thr_off[t];
        for (int64_t i = 0; i < nent; i++) {
            uint32_t id = cmh_entry_thread(base, &base->entries[btr->first_entry + i]);
            thr_pos[thr_off[(uint32_t *)bsearch(&id, thr, nthr, sizeof *thr, cmp_u32) - thr]++] = i;
        }
        for (uint32_t t = nthr; t > 0; t--) thr_off[t] = thr_off[t - 1]; /* (back to each one's start) */
        thr_off[0] = 0;
    }
    for (uint32_t k = 0; c.s && k < c.s->nmeminfo; k++) {
        const cmh_meminfo *m = &c.s->meminfo[k];
        if (m->device != device) continue;
        int64_t idx = place_sample(base, btr, m, tmax); /* the last entry at or before the sample */
        memset(&w[nw], 0, sizeof *w);
        w[nw].index = m->time_ns >= base->dump_time_ns && base->dump_time_ns ? INT64_MAX : idx;
        w[nw].time_ns = m->time_ns;
        w[nw].hidden = 1;
        w[nw].sample = k;
        /* the other threads with an entry in the scans' reach, forward and back (as sample_range scans) */
        int64_t first = w[nw].index == INT64_MAX ? nent : w[nw].index + 1;
        for (uint32_t t = 0; t < nthr; t++)
            if (!m->thread || thr[t] != m->thread) {
                w[nw].others[0] += thread_in(thr_pos, thr_off[t], thr_off[t + 1], first, first + FLIGHT_ENTRIES - 1);
                w[nw].others[1] += thread_in(thr_pos, thr_off[t], thr_off[t + 1], first - FLIGHT_ENTRIES, first - 1);
            }
        w[nw].bad = m->free > m->total;
        if (w[nw].bad && !out->bad_samples++) out->bad_sample = *m;
        else if (!w[nw].bad && sample_outside(c.s, device, m)) { /* (left out as a bad one is, said apart) */
            w[nw].bad = 1;
            if (!out->outside_samples++) out->outside_sample = *m;
        }
        nw++;
    }
    /* a device that never held a byte has no peak to show, nor one with no history (enabled=state:
     * `peak` says the peak is not known; this said 'peak (entry 0)', the state at the end again) */
    cmh_report_base hist = {0};
    cmh_report_base_fill(base, device, &hist);
    if (peak > 0 && hist.history && nent) { /* (peak_i -1: before the first entry, as `peak` says; it said 'entry 0') */
        memset(&w[nw], 0, sizeof *w);
        w[nw].index = out->reconciled ? INT64_MAX : peak_i;
        w[nw].time_ns = out->reconciled && base->dump_time_ns ? base->dump_time_ns
                                                            : cmh_entry_time(base, &base->entries[btr->first_entry + (out->reconciled ? nent - 1 : peak_i > 0 ? peak_i : 0)]);
        snprintf(w[nw].what, sizeof w[nw].what, "peak");
        nw++;
    }
    memset(&w[nw], 0, sizeof *w);
    w[nw].index = INT64_MAX;
    w[nw].time_ns = base->dump_time_ns ? base->dump_time_ns : nent ? cmh_entry_time(base, &base->entries[btr->first_entry + nent - 1]) : 0;
    snprintf(w[nw].what, sizeof w[nw].what, "end");
    nw++;
    qsort(w, nw, sizeof *w, cmp_want);

    /* pass 2: each moment's rows */
    if (instants_fill(&in, base, btr) != CMH_OK) goto out;
    r = cmh_replay_new(base, device);
    if (!r) goto out;
    if (c.t && c.s) {
        ts.r = cmh_replay_new(c.t, device);
        if (!ts.r) goto out;
    }
    int64_t pm_pos = -1; /* the last entry the physmap took */
    if (c.s && !(c.pm = cmh_physmap_new(c.s, device))) goto out;
    int ended = 0;
    /* the end (the last moments): a report page's memo has its blocks and figures from its own
     * replay of the whole trace, the same as this one's would be */
    int memo_end = 0;
    cmh_mem_stats end_st;
    for (uint32_t k = 0; k < nw; k++) {
        if (!ended && !memo_end && w[k].index == INT64_MAX && cmh_memo_history(base, device) &&
            cmh_whole_replay(base, device, &end_st) == CMH_OK)
            memo_end = 1;
        while (!ended && !memo_end && (w[k].index == INT64_MAX || cmh_replay_position(r) < w[k].index))
            if (!cmh_replay_step(r)) ended = 1;
        c.a = &w[k].rows;
        c.moment = k;
        const cmh_mem_stats *now = memo_end ? &end_st : cmh_replay_stats(r);
        if (c.s) {
            /* the handles each mapped range holds, at the same entry */
            for (int64_t to = w[k].index == INT64_MAX ? nent - 1 : w[k].index; pm_pos < to && pm_pos + 1 < nent; pm_pos++)
                cmh_physmap_step(c.pm, &base->entries[btr->first_entry + pm_pos + 1]);
            if (cmh_physmap_status(c.pm) != CMH_OK) goto out;
            /* the live blocks' rows: those of the last moment taken where no entry since changed
             * memory (a program retrying after OOM: 72k errors at 80 instants, each moment
             * naming every live block again) */
            int64_t inst = memo_end || w[k].index == INT64_MAX ? -1 : instant_of(&in, w[k].index);
            if (inst >= 0 && inst == blk_inst) {
                if (acc_copy(&w[k].rows, &blk_rows) != CMH_OK) goto out;
            } else {
                cmh_physmap_reset(c.pm);
                if (!memo_end) cmh_replay_blocks(r, on_block, &c);
                else if (cmh_end_blocks(base, device, on_block, &c) != CMH_OK) goto out;
                cmh_physmap_remainders(c.pm, on_remainder, &c); /* a mapped handle's part mapped nowhere */
                blk_inst = -1;
                if (inst >= 0 && !w[k].rows.nomem) {
                    if (acc_copy(&blk_rows, &w[k].rows) != CMH_OK) goto out;
                    blk_inst = inst;
                }
            }
            uint32_t nheld;
            uint64_t held = cmh_physmap_held(c.pm, w[k].index == INT64_MAX ? INT64_MAX : w[k].time_ns, &nheld);
            if (held) add_row(&w[k].rows, CMH_OWN_VMM_UNMAPPED, CMH_OWN_VMM_UNMAPPED_NAME, held, nheld);
            /* what stream-ordered pools keep (frag's "a pool's cache"), and what allocators above
             * the driver reserved and hold free (the block API) */
            const cmh_mem_stats *st = now;
            uint64_t reserved = (uint64_t)st->reserved_bytes[CMH_POOL_ALL].current;
            uint64_t above = reserved > w[k].rows.blocks ? reserved - w[k].rows.blocks : 0;
            uint64_t cache = memo_end ? cmh_end_pool_cache(base, device, NULL) : cmh_replay_pools_cache(r);
            if (cache > above) cache = above;
            if (cache) add_row(&w[k].rows, CMH_OWN_POOL_CACHE, CMH_OWN_POOL_CACHE_NAME, cache, 0);
            if (above > cache)
                add_row(&w[k].rows, CMH_OWN_PROGRAM, "allocators above the driver: reserved, free", above - cache, 0);
            if (ts.r) {
                torch_to(&ts, w[k].index == INT64_MAX ? INT64_MAX : w[k].time_ns - clock);
                if (cmh_replay_status(ts.r) != CMH_OK) goto out;
                torch_rows(&w[k], cmh_replay_stats(ts.r), 0);
                if (w[k].index == INT64_MAX && !w[k].hidden)
                    out->torch_mismatch = w[k].torch_reserved > w[k].rows.torch_seen ? w[k].torch_reserved - w[k].rows.torch_seen
                                                                                       : w[k].rows.torch_seen - w[k].torch_reserved;
            }
        } else torch_rows(&w[k], now, 1);
        if (w[k].rows.nomem) goto out;
        for (uint32_t i = 0; i < w[k].rows.n; i++) w[k].recorded += w[k].rows.rows[i].bytes;
    }
    if (cmh_replay_status(r) != CMH_OK) goto out;
    int64_t latest = c.s ? cmh_owners_latest_sample(c.s, device, &(int64_t){0}) : -1;
    for (uint32_t k = 0; k < nw; k++) /* the latest sample, for the line that tells owners' total from peak's */
        if (w[k].hidden && (int64_t)w[k].sample == latest) {
            const cmh_meminfo *mi = &c.s->meminfo[w[k].sample];
            out->sample_known = 1;
            out->sample_time_ns = mi->time_ns;
            out->sample_used = mi->total - mi->free; /* (never a bad one: cmh_owners_latest_sample) */
            out->sample_total = mi->total;
            /* what the record held then, the calls then in flight counted (their bytes are in used) */
            want *src;
            out->sample_recorded = out->sample_used - sample_unexplained(c.s, btr, w, nw, &w[k], &src);
        }
    if (out->sample_known && cmh_owners_baseline_compute(c.s, device, &out->baseline) != CMH_OK) goto out;

    /* Managed memory is in a sample's used bytes only where its pages are on the device, and
     * cuMemAllocManaged populates none: the device's first sample (at its first allocation) has
     * none of it, so what it leaves unexplained past the rest of the record is the CUDA context
     * and other processes (the record's managed bytes left out of it).  A later sample's excess
     * beyond that is managed memory's pages first, as far as the live managed bytes go. */
    uint64_t managed_floor = 0;
    want *first_s = NULL;
    for (uint32_t k = 0; k < nw; k++)
        if (w[k].hidden && !w[k].bad && (!first_s || w[k].time_ns < first_s->time_ns)) first_s = &w[k];
    if (first_s) {
        want *src;
        managed_floor = sample_unexplained(c.s, btr, w, nw, first_s, &src);
    }

    /* the usable samples, by instant and by time: each moment's nearest found without a scan */
    for (uint32_t k = 0; k < nw; k++) nsr += w[k].hidden && !w[k].bad;
    by_inst = malloc((size_t)(nsr ? nsr : 1) * sizeof *by_inst);
    by_time = malloc((size_t)(nsr ? nsr : 1) * sizeof *by_time);
    if (!by_inst || !by_time) goto out;
    nsr = 0;
    for (uint32_t k = 0; k < nw; k++)
        if (w[k].hidden && !w[k].bad) by_inst[nsr++] = (sref){instant_of(&in, w[k].index), w[k].time_ns, k};
    memcpy(by_time, by_inst, (size_t)nsr * sizeof *by_time);
    qsort(by_inst, (size_t)nsr, sizeof *by_inst, cmp_sref_inst);
    qsort(by_time, (size_t)nsr, sizeof *by_time, cmp_sref_time);

    /* the visible moments, in time order; each with the unexplained row of its nearest sample */
    out->moments = calloc(nw, sizeof *out->moments);
    if (!out->moments) goto out;
    for (uint32_t k = 0; k < nw; k++) {
        if (w[k].hidden) continue;
        cmh_owners_moment *m = &out->moments[out->nmoments++];
        snprintf(m->what, sizeof m->what, "%s", w[k].what);
        m->index = w[k].index == INT64_MAX ? nent - 1 : w[k].index;
        /* named in the record's one numbering: the merged timeline of a record with PyTorch's part */
        if (c.s && cmh_merged_position(s0, device, m->index, &m->index, &merged_len) != CMH_OK) goto out;
        if (w[k].index == INT64_MAX) m->index = merged_len - 1;
        m->time_ns = w[k].time_ns;
        /* the entry the moment is named by: at the dump, the last one (it said the dump's time
         * beside the last entry's number) */
        m->entry_time_ns = w[k].index != INT64_MAX ? w[k].time_ns
                           : nent                  ? cmh_entry_time(base, &base->entries[btr->first_entry + nent - 1])
                                                   : 0;
        m->recorded = w[k].recorded;
        m->peak_physical = out->peak_physical && !strcmp(w[k].what, "peak");
        /* the moment's sample: one taken at its instant (no entry that changes memory between
         * them), the nearest in time of those; else the nearest, its figure assumed steady (a
         * sample after the allocation that follows an out-of-memory error can be nearer in
         * time to the error than the error's own) */
        want *best = NULL;
        int at = 0;
        if (nsr) {
            int64_t inst = instant_of(&in, w[k].index);
            int64_t lo = sref_inst_lower(by_inst, nsr, inst), hi = sref_inst_lower(by_inst, nsr, inst + 1);
            int64_t b = sref_nearest(by_inst, lo, hi, m->time_ns);
            if (b >= 0) {
                best = &w[by_inst[b].j];
                at = 1;
            } else best = &w[by_time[sref_nearest(by_time, 0, nsr, m->time_ns)].j];
        }
        if (best) {
            want *src;
            uint64_t unexplained = sample_unexplained(c.s, btr, w, nw, best, &src);
            const cmh_meminfo *mi = &c.s->meminfo[src->sample];
            /* exact: taken at this moment with nothing in flight (DEFINITIONS.md).  The calls in
             * flight at the sample are this moment's only when the sample is (at a later moment
             * they are logged, and in its recorded rows: it said '8.0 MiB more in use then' at a
             * single-threaded peak of a sample taken 38 entries before, sample_exact true) */
            m->sample_exact = at && src == best && best->lo == best->hi;
            m->in_flight = at ? best->hi - unexplained : 0;
            m->sample_low_end = src == best && best->lo != best->hi;
            /* managed memory is in the driver's used figure only where its pages are on the
             * device: of what the recorded rows leave of the sample past the first sample's
             * excess (managed_floor), at most */
            uint64_t room = unexplained > managed_floor ? unexplained - managed_floor : 0;
            uint64_t managed = w[k].rows.managed < room ? w[k].rows.managed : room;
            if (w[k].rows.managed)
                add_row(&w[k].rows, CMH_OWN_MANAGED, "managed memory (cuMemAllocManaged; may be off the device: as far as the used figure shows)", managed, 0);
            unexplained -= managed;
            m->recorded += managed;
            add_row(&w[k].rows, CMH_OWN_UNEXPLAINED, "not recorded (CUDA context, other processes)", unexplained, 0);
            if (w[k].rows.nomem) goto out;
            m->used_known = 1;
            m->used = m->recorded + unexplained;
            m->total = mi->total;
            m->sample_time_ns = mi->time_ns;
        } else if (w[k].rows.managed) { /* no sample: all of it, said to be on the device or not */
            add_row(&w[k].rows, CMH_OWN_MANAGED, "managed memory (cuMemAllocManaged; may be off the device)", w[k].rows.managed, 0);
            if (w[k].rows.nomem) goto out;
            m->recorded += w[k].rows.managed;
        }
        m->managed_made = w[k].rows.managed;
        /* largest first, the unexplained row last */
        uint32_t nr = w[k].rows.n, nsort = nr && w[k].rows.rows[nr - 1].kind == CMH_OWN_UNEXPLAINED ? nr - 1 : nr;
        if (nsort > 1) qsort(w[k].rows.rows, nsort, sizeof *w[k].rows.rows, cmp_row); /* (no rows: no array to hand qsort) */
        m->rows = w[k].rows.rows;
        m->nrows = nr;
        w[k].rows.rows = NULL;
    }
    if (c.s && !nw && cmh_merged_position(s0, device, 0, &(int64_t){0}, &merged_len) != CMH_OK) goto out;
    out->entries = (uint64_t)(merged_len > 0 ? merged_len : 0);
    /* pinned host memory at the end, on its own line */
    for (uint32_t i = 0; c.s && i < c.s->nsegments; i++)
        if (c.s->segments[i].device == -1) out->pinned_host += c.s->segments[i].size;
    rc = CMH_OK;
out:
    for (uint32_t k = 0; w && k < nw; k++) free(w[k].rows.rows);
    free(w);
    free(in.chg);
    free(tmax);
    free(thr);
    free(thr_pos);
    free(thr_off);
    free(retry_at);
    free(by_inst);
    free(by_time);
    free(blk_rows.rows);
    free(c.tr);
    free(c.cache);
    if (r) cmh_replay_free(r);
    if (ts.r) cmh_replay_free(ts.r);
    cmh_physmap_free(c.pm);
    cmh_sites_free(g);
    if (rc != CMH_OK) cmh_owners_report_free(out);
    return rc;
}

void cmh_owners_report_free(cmh_owners_report *r)
{
    for (uint32_t i = 0; i < r->nmoments; i++) free(r->moments[i].rows);
    free(r->moments);
    r->moments = NULL;
    r->nmoments = 0;
}

int cmh_owners_compute(const cmh_snapshot *s, int device, cmh_owners_report *out) { return compute(s, device, out, 0); }

void cmh_owners_set_alloc_peak(cmh_owners_report *r, int64_t bytes, int64_t index, int64_t time_ns)
{
    if (r->alloc_peak_known) return;
    r->alloc_peak_known = 1;
    r->alloc_peak = bytes;
    r->alloc_peak_index = index;
    r->alloc_peak_time_ns = time_ns;
}

/* Where sample k of device sits, as compute places it: at the dump, the end (INT64_MAX); else
 * as place_sample does (-1: before the first). */
static int64_t sample_at(const cmh_snapshot *s, int device, int64_t k)
{
    const cmh_meminfo *m = &s->meminfo[k];
    const cmh_trace *t = trace_of(s, device);
    int64_t at = place_sample(s, t, m, NULL);
    if (s->dump_time_ns && m->time_ns >= s->dump_time_ns) at = INT64_MAX;
    return at;
}

int64_t cmh_owners_latest_sample(const cmh_snapshot *s, int device, int64_t *at)
{
    int64_t k = -1;
    for (uint32_t i = 0; i < s->nmeminfo; i++) /* (of samples at one instant, the last taken) */
        if (s->meminfo[i].device == device && s->meminfo[i].free <= s->meminfo[i].total && /* (one that cannot be: left out) */
            !sample_outside(s, device, &s->meminfo[i]) &&                                    /* (nor one the ring's window misses) */
            (k < 0 || s->meminfo[i].time_ns >= s->meminfo[k].time_ns))
            k = i;
    *at = k < 0 ? -1 : sample_at(s, device, k);
    return k;
}

int cmh_owners_baseline_compute(const cmh_snapshot *s, int device, cmh_owners_baseline *out)
{
    memset(out, 0, sizeof *out);
    if (s->source == CMH_SRC_PYTORCH) return CMH_OK; /* (PyTorch's own snapshots hold no cuMemGetInfo) */
    int64_t latest_at, latest = cmh_owners_latest_sample(s, device, &latest_at), k = -1;
    for (uint32_t i = 0; i < s->nmeminfo; i++) /* (of samples at one instant, the first taken) */
        if (s->meminfo[i].device == device && s->meminfo[i].free <= s->meminfo[i].total && !sample_outside(s, device, &s->meminfo[i]) &&
            (k < 0 || s->meminfo[i].time_ns < s->meminfo[k].time_ns))
            k = i;
    if (k < 0 || k == latest) return CMH_OK; /* one sample: nothing to tell it from */
    int64_t at = sample_at(s, device, k);
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    while (at == INT64_MAX || cmh_replay_position(r) < at)
        if (!cmh_replay_step(r)) break;
    int rc = cmh_replay_status(r);
    if (rc == CMH_OK) {
        const cmh_mem_stats *st = cmh_replay_stats(r);
        int64_t act = st->active_bytes[CMH_POOL_ALL].current, res = st->reserved_bytes[CMH_POOL_ALL].current;
        uint64_t rec = (uint64_t)(act > res ? act : res), used = s->meminfo[k].total - s->meminfo[k].free;
        out->known = 1;
        out->time_ns = s->meminfo[k].time_ns;
        out->unrecorded = used > rec ? used - rec : 0;
    }
    cmh_replay_free(r);
    return rc;
}

/* The same report with the end moment only: the peak and OOM moments, and the replay that finds
 * them, left out (the samples stay: the end's "not recorded" row comes from the nearest). */
int cmh_owners_compute_end(const cmh_snapshot *s, int device, cmh_owners_report *out) { return compute(s, device, out, 1); }

int cmh_beyond_torch_compute(const cmh_snapshot *s, int device, cmh_beyond_torch *out)
{
    memset(out, 0, sizeof *out);
    if (s->source == CMH_SRC_PYTORCH || !s->torch) return CMH_OK; /* (PyTorch's alone: it saw nothing else) */
    cmh_owners_report o;
    int rc = cmh_owners_compute_end(s, device, &o);
    if (rc != CMH_OK) return rc;
    const cmh_owners_moment *m = NULL;
    for (uint32_t i = 0; i < o.nmoments; i++)
        if (!strcmp(o.moments[i].what, "end")) m = &o.moments[i];
    out->known = 1;
    out->rows = m && m->nrows ? malloc(m->nrows * sizeof *out->rows) : NULL;
    if (m && m->nrows && !out->rows) rc = CMH_ENOMEM;
    for (uint32_t i = 0; rc == CMH_OK && m && i < m->nrows; i++) { /* (largest first, as owners has them) */
        const cmh_owner_row *r = &m->rows[i];
        if (r->torch_pool) out->torch_pool += r->bytes;
        else if (r->kind == CMH_OWN_UNEXPLAINED) out->unexplained = r->bytes;
        else if (r->bytes) {
            out->rows[out->nrows++] = *r;
            out->bytes += r->bytes;
            out->allocations += r->allocations;
        }
    }
    if (m && m->used_known) out->used_known = 1, out->used = m->used, out->total = m->total;
    cmh_owners_report_free(&o);
    if (rc != CMH_OK) cmh_beyond_torch_free(out);
    return rc;
}

void cmh_beyond_torch_free(cmh_beyond_torch *b)
{
    free(b->rows);
    memset(b, 0, sizeof *b);
}
