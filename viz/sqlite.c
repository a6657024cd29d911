/*
 * sqlite.c - snapshots into one SQLite database, for queries across a fleet (docs/FLEET.md has
 * the schema and example queries).  Each snapshot goes in with one transaction of its own, as it
 * is read; the indexes are made once at the end, when every row is in.
 *
 * Besides the record's own tables (processes, segments, blocks, events, stacks, frames,
 * kernels, marks, threads, driver_errors, vmm_handles, vmm_maps), what the replay knows is stored with the rows, so that SQL needs no model of
 * the allocator: each event's change of allocated and reserved bytes (their running sum from
 * devices.allocated_at_start is the device's allocated memory at any time), the time the memory
 * an allocation made was given back (end_time_ns), each device's peaks, and each stack's site as
 * the reports name it.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/leakwords.h"
#include "cumemhist/owners.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "cumemhist/viz.h"
#include "oatab.h"

static const char *const g_schema =
    "CREATE TABLE processes (process_id INTEGER PRIMARY KEY, file TEXT, rank INTEGER, local_rank INTEGER,"
    " world_size INTEGER, host TEXT, pid INTEGER, cmdline TEXT, producer TEXT, source TEXT, start_time_ns INTEGER,"
    " dump_time_ns INTEGER, ending TEXT, parent_pid INTEGER, clock_origin_ns INTEGER, history_lost TEXT,"
    " lost_cut_bytes INTEGER, lost_torn INTEGER, lost_damaged INTEGER, lost_refused INTEGER);"
    "CREATE TABLE devices (process_id INTEGER, device INTEGER, trace_entries INTEGER, dropped_entries INTEGER,"
    " allocated_at_start INTEGER, reserved_at_start INTEGER, peak_allocated INTEGER, peak_allocated_seq INTEGER,"
    " peak_allocated_time_ns INTEGER, peak_reserved INTEGER, peak_reserved_seq INTEGER, peak_reserved_time_ns INTEGER,"
    " allocated_at_end INTEGER, reserved_at_end INTEGER, ooms INTEGER, oom_retries INTEGER, dropped_ooms INTEGER,"
    " gpu_uuid TEXT, gpu_name TEXT, gpu_pci_bus TEXT, no_history_cause TEXT, peak_allocated_unsplit INTEGER,"
    " peak_at_least INTEGER, PRIMARY KEY (process_id, device));"
    "CREATE TABLE frames (process_id INTEGER, frame_id INTEGER, name TEXT, filename TEXT, line INTEGER, module TEXT,"
    " pc INTEGER, PRIMARY KEY (process_id, frame_id));"
    "CREATE TABLE stacks (process_id INTEGER, stack_id INTEGER, depth INTEGER, frame_id INTEGER,"
    " PRIMARY KEY (process_id, stack_id, depth));"
    "CREATE TABLE sites (process_id INTEGER, stack_id INTEGER, site TEXT, owner TEXT, PRIMARY KEY (process_id, stack_id));"
    "CREATE TABLE segments (process_id INTEGER, segment_id INTEGER, device INTEGER, kind TEXT, address INTEGER,"
    " size INTEGER, stream INTEGER, pool TEXT, expandable INTEGER, stack_id INTEGER, time_ns INTEGER, pool_id TEXT);"
    "CREATE TABLE blocks (process_id INTEGER, segment_id INTEGER, address INTEGER, size INTEGER, requested INTEGER,"
    " state TEXT, stack_id INTEGER, time_ns INTEGER, pool_id TEXT);"
    "CREATE TABLE events (process_id INTEGER, device INTEGER, seq INTEGER, time_ns INTEGER, action TEXT,"
    " address INTEGER, size INTEGER, requested INTEGER, stream INTEGER, stack_id INTEGER, thread INTEGER,"
    " allocated_delta INTEGER, reserved_delta INTEGER, end_seq INTEGER, end_time_ns INTEGER, pool_id TEXT,"
    " driver_pool INTEGER);"
    "CREATE TABLE pools (process_id INTEGER, pool_id INTEGER, handle INTEGER, device INTEGER, kind TEXT, number INTEGER,"
    " stack_id INTEGER, time_ns INTEGER, PRIMARY KEY (process_id, pool_id));"
    "CREATE TABLE kernels (process_id INTEGER, device INTEGER, stream INTEGER, correlation INTEGER, name TEXT,"
    " start_ns INTEGER, end_ns INTEGER, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER,"
    " block_y INTEGER, block_z INTEGER, registers INTEGER, shared_bytes INTEGER);"
    "CREATE TABLE marks (process_id INTEGER, device INTEGER, seq INTEGER, time_ns INTEGER, name TEXT, stage TEXT);"
    "CREATE TABLE threads (process_id INTEGER, thread INTEGER, pid INTEGER, tid INTEGER, name TEXT,"
    " PRIMARY KEY (process_id, thread));"
    "CREATE TABLE driver_errors (process_id INTEGER, call TEXT, result INTEGER, error TEXT, count INTEGER, seq INTEGER,"
    " address INTEGER, size INTEGER, thread INTEGER, time_ns INTEGER, stack_id INTEGER, what TEXT);"
    "CREATE TABLE vmm_handles (process_id INTEGER, device INTEGER, handle INTEGER, size INTEGER, stack_id INTEGER,"
    " time_ns INTEGER, maps INTEGER, end_state TEXT, release_ns INTEGER);"
    "CREATE TABLE vmm_maps (process_id INTEGER, device INTEGER, address INTEGER, size INTEGER, time_ns INTEGER,"
    " handle INTEGER);";

static const char *const g_indexes =
    "CREATE INDEX events_time ON events (process_id, device, time_ns);"
    "CREATE INDEX events_oom ON events (time_ns) WHERE action = 'oom';"
    "CREATE INDEX segments_process ON segments (process_id, device);"
    "CREATE INDEX blocks_segment ON blocks (process_id, segment_id);"
    "CREATE INDEX kernels_time ON kernels (process_id, device, start_ns);"
    "CREATE INDEX marks_time ON marks (process_id, device, time_ns);"

    "CREATE INDEX processes_rank ON processes (rank);";

enum { Q_PROC, Q_DEV, Q_FRAME, Q_STACK, Q_SITE, Q_SEG, Q_BLOCK, Q_EVENT, Q_KERNEL, Q_MARK, Q_THREAD, Q_POOL, Q_DRVERR, Q_VMMH, Q_VMMM, NQ };
static const char *const g_insert[NQ] = {
    "INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO devices VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO frames VALUES (?,?,?,?,?,?,?)",
    "INSERT INTO stacks VALUES (?,?,?,?)",
    "INSERT INTO sites VALUES (?,?,?,?)",
    "INSERT INTO segments VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO blocks VALUES (?,?,?,?,?,?,?,?,?)",
    "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO kernels VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO marks VALUES (?,?,?,?,?,?)",
    "INSERT INTO threads VALUES (?,?,?,?,?)",
    "INSERT INTO pools VALUES (?,?,?,?,?,?,?,?)",
    "INSERT INTO driver_errors VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO vmm_handles VALUES (?,?,?,?,?,?,?,?,?)",
    "INSERT INTO vmm_maps VALUES (?,?,?,?,?,?)",
};

struct cmh_sqlite {
    sqlite3 *db;
    sqlite3_stmt *q[NQ];
    int64_t next_process;
    char *err;
    size_t errlen;
};

static int fail(cmh_sqlite *x, const char *what)
{
    int e = sqlite3_system_errno(x->db); /* a full disk, a quota: the reason under "disk I/O error" */
    if (!e && (errno == ENOSPC || errno == EFBIG || errno == EDQUOT)) e = errno;
    snprintf(x->err, x->errlen, "%s: %s%s%s%s", what, sqlite3_errmsg(x->db), e ? " (" : "", e ? strerror(e) : "", e ? ")" : "");
    return sqlite3_errcode(x->db) == SQLITE_NOMEM ? CMH_ENOMEM : CMH_EIO;
}

cmh_sqlite *cmh_sqlite_open(const char *path, char *err, size_t errlen)
{
    cmh_sqlite *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    x->err = err, x->errlen = errlen;
    x->next_process = 1;
    /* one connection, one thread: no mutexes */
    if (sqlite3_open_v2(path, &x->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, x->db ? sqlite3_errmsg(x->db) : "cannot open");
        sqlite3_close(x->db);
        free(x);
        return NULL;
    }
    /* a new file that is renamed into place when done: no journal to keep, no one else to lock
     * out */
    /* (application_id: a later export knows this file for its own, snapshot/atomic.c) */
    char pragmas[200];
    snprintf(pragmas, sizeof pragmas, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; PRAGMA application_id=%d;",
             (int)CMH_SQLITE_APPLICATION_ID);
    if (sqlite3_exec(x->db, pragmas, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(x->db, g_schema, NULL, NULL, NULL) != SQLITE_OK) {
        fail(x, path);
        cmh_sqlite_abort(x);
        return NULL;
    }
    for (int i = 0; i < NQ; i++)
        if (sqlite3_prepare_v2(x->db, g_insert[i], -1, &x->q[i], NULL) != SQLITE_OK) {
            fail(x, g_insert[i]);
            cmh_sqlite_abort(x);
            return NULL;
        }
    return x;
}

/* bind helpers: a statement's parameters in order; NULL for an unknown (negative) identity */
typedef struct binder {
    sqlite3_stmt *st;
    int i;
} binder;
static void b_int(binder *b, int64_t v) { sqlite3_bind_int64(b->st, ++b->i, v); }
static void b_opt(binder *b, int64_t v) /* -1: not known */
{
    if (v < 0) sqlite3_bind_null(b->st, ++b->i);
    else sqlite3_bind_int64(b->st, ++b->i, v);
}
static void b_text(binder *b, const char *s) /* NULL: not known */
{
    if (!s) sqlite3_bind_null(b->st, ++b->i);
    else sqlite3_bind_text(b->st, ++b->i, s, -1, SQLITE_STATIC);
}
static void b_null(binder *b) { sqlite3_bind_null(b->st, ++b->i); }
/* A memory pool's id as PyTorch prints it ("(1, 0)": a CUDA graph's pool, "(0, 2)": a MemPool's,
 * "(0, 0)": the default pool); NULL where the record does not say (known: 0) */
static void b_pool(binder *b, const uint64_t id[2], int known)
{
    char t[48];
    if (!known && !id[0] && !id[1]) {
        sqlite3_bind_null(b->st, ++b->i);
        return;
    }
    snprintf(t, sizeof t, "(%" PRIu64 ", %" PRIu64 ")", id[0], id[1]);
    sqlite3_bind_text(b->st, ++b->i, t, -1, SQLITE_TRANSIENT);
}

static int run(cmh_sqlite *x, binder *b, const char *what)
{
    int rc = sqlite3_step(b->st);
    sqlite3_reset(b->st);
    sqlite3_clear_bindings(b->st);
    return rc == SQLITE_DONE ? CMH_OK : fail(x, what);
}

#define BIND(qi) binder b = {x->q[qi], 0}

/* The replay's view of one device: per entry the change of allocated and reserved bytes and
 * the time its memory went back; the peaks. */
typedef struct dev_view {
    int64_t *dalloc, *dres, *end, *end_seq; /* end_seq: + 1, 0 = still live at the end */
    int64_t alloc_start, res_start, alloc_end, res_end;
    cmh_replay *r;
    cmh_oatab open; /* address -> entry index + 1 of the allocation that made the live block */
    int nomem;
    /* the reconciliation after the last entry (a trace that stops before its snapshot, docs/
     * DEFINITIONS.md "trace gap"): what it changed, written as one 'trace_gap' row after the
     * entries, so that the deltas add up to the end (they summed to the trace's own end, 20 MiB
     * where devices.allocated_at_end and leaks said 0 B) */
    int reconciling;
    int64_t n, gap_alloc, gap_res;
} dev_view;

typedef struct open_slot {
    uint64_t addr;
    int64_t index1;
} open_slot;

static void observe(void *arg, int64_t delta, uint32_t stack, uint64_t addr)
{
    (void)stack;
    dev_view *v = arg;
    int64_t pos = cmh_replay_position(v->r);
    if (pos < 0 || !addr) return;
    if (delta > 0) {
        open_slot *o = cmh_oa_get(&v->open, addr, NULL);
        if (!o) v->nomem = 1;
        else o->index1 = v->reconciling ? 0 : pos + 1; /* (added by the reconciliation: no entry made it) */
    } else {
        open_slot *o = cmh_oa_find(&v->open, addr);
        if (!o) return;
        const cmh_entry *e = cmh_replay_entry(v->r, pos);
        const cmh_snapshot *s = cmh_replay_snapshot(v->r);
        if (o->index1 > 0 && v->reconciling) /* freed after the last entry: by the trace_gap row, at the snapshot's time */
            v->end[o->index1 - 1] = s->dump_time_ns > 0 ? s->dump_time_ns : 0, v->end_seq[o->index1 - 1] = v->n + 1;
        else if (o->index1 > 0) v->end[o->index1 - 1] = e ? cmh_entry_time(s, e) : 0, v->end_seq[o->index1 - 1] = pos + 1;
        cmh_oa_remove(&v->open, o);
    }
}

static int view_device(const cmh_snapshot *s, int dev, dev_view *v)
{
    memset(v, 0, sizeof *v);
    cmh_oa_init(&v->open, sizeof(open_slot));
    if (!(v->r = cmh_replay_new(s, dev))) return CMH_ENOMEM;
    int64_t n = cmh_replay_length(v->r);
    size_t m = (size_t)(n > 0 ? n : 1);
    v->dalloc = calloc(m, sizeof *v->dalloc);
    v->dres = calloc(m, sizeof *v->dres);
    v->end = calloc(m, sizeof *v->end);
    v->end_seq = calloc(m, sizeof *v->end_seq);
    if (!v->dalloc || !v->dres || !v->end || !v->end_seq) return CMH_ENOMEM;
    const cmh_mem_stats *st = cmh_replay_stats(v->r);
    int64_t a = v->alloc_start = st->allocated_bytes[CMH_POOL_ALL].current;
    int64_t r = v->res_start = st->reserved_bytes[CMH_POOL_ALL].current;
    v->n = n;
    cmh_replay_observe(v->r, observe, v);
    for (;;) {
        if (cmh_replay_position(v->r) + 1 >= n) v->reconciling = 1; /* the next step is the reconciliation */
        if (!cmh_replay_step(v->r)) break;
        int64_t i = cmh_replay_position(v->r);
        int64_t na = st->allocated_bytes[CMH_POOL_ALL].current, nr = st->reserved_bytes[CMH_POOL_ALL].current;
        if (i >= 0 && i < n) v->dalloc[i] = na - a, v->dres[i] = nr - r;
        a = na, r = nr;
    }
    v->gap_alloc = st->allocated_bytes[CMH_POOL_ALL].current - a, v->gap_res = st->reserved_bytes[CMH_POOL_ALL].current - r;
    v->alloc_end = a + v->gap_alloc, v->res_end = r + v->gap_res;
    int rc = cmh_replay_status(v->r);
    return rc != CMH_OK ? rc : v->nomem ? CMH_ENOMEM : CMH_OK;
}

static void view_free(dev_view *v)
{
    cmh_replay_free(v->r);
    free(v->dalloc);
    free(v->dres);
    free(v->end);
    free(v->end_seq);
    cmh_oa_free(&v->open);
}

static const char *pool_name(int p) { return p == CMH_POOL_SMALL ? "small" : "large"; }

static const char *state_name(int st)
{
    return st == CMH_BLOCK_ACTIVE_ALLOCATED ? "active_allocated" : st == CMH_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free" : "inactive";
}

static int add_tables(cmh_sqlite *x, const cmh_snapshot *s, int64_t pid, const cmh_sites *g,
                      const char *(*site_name)(void *, const cmh_snapshot *, const cmh_sites *, uint32_t), void *site_arg,
                      const cmh_pool_tags *tags)
{
    int rc = CMH_OK;
    for (uint32_t i = 0; i < s->nframes && rc == CMH_OK; i++) {
        const cmh_frame *f = &s->frames[i];
        BIND(Q_FRAME);
        b_int(&b, pid), b_int(&b, i), b_text(&b, cmh_str(s, f->name)), b_text(&b, cmh_str(s, f->filename)), b_int(&b, f->line);
        b_text(&b, cmh_frame_module(s, f)), b_int(&b, (int64_t)f->pc);
        rc = run(x, &b, "frames");
    }
    cmh_site_opts by_stack = {CMH_GROUP_STACK, 0, NULL, 0};
    int brc = CMH_OK;
    char berr[256];
    cmh_sites *byst = site_name && s->nstacks > 1 ? cmh_sites_new(s, &by_stack, &brc, berr, sizeof berr) : NULL;
    if (rc == CMH_OK && site_name && s->nstacks > 1 && !byst) rc = brc;
    for (uint32_t i = 1; i < s->nstacks && rc == CMH_OK; i++) {
        const cmh_stack *st = &s->stacks[i];
        for (uint32_t k = 0; k < st->count && rc == CMH_OK; k++) {
            BIND(Q_STACK);
            b_int(&b, pid), b_int(&b, i), b_int(&b, k), b_int(&b, s->stack_frames[st->first + k]);
            rc = run(x, &b, "stacks");
        }
        if (rc == CMH_OK && site_name) {
            BIND(Q_SITE);
            /* its owner by the name every report gives it ("cuBLAS (libcublas.so.13)", "program (train.py)"),
             * the stack's own (as owners counts it), not its site's first stack's */
            char oname[256] = "";
            uint32_t gr = byst ? cmh_sites_group(byst, i) : 0;
            if (byst) cmh_owner_name(cmh_sites_owner(byst, gr), cmh_sites_owner_package(byst, gr), oname, sizeof oname);
            b_int(&b, pid), b_int(&b, i), b_text(&b, site_name(site_arg, s, g, i)), b_text(&b, *oname ? oname : NULL);
            rc = run(x, &b, "sites");
        }
    }
    cmh_sites_free(byst);
    /* a PyTorch snapshot says every segment's pool ((0, 0): the default one); a recorder's own
     * driver allocations are in no allocator's pool: NULL, but a private pool's (cmh_pool_tags,
     * the pickle's segment_pool_id: it wrote NULL where the pickle said (0, 1)) */
    int seg_pools = s->source == CMH_SRC_PYTORCH;
    for (uint32_t i = 0; i < s->nsegments && rc == CMH_OK; i++) {
        const cmh_segment *sg = &s->segments[i];
        uint64_t pool[2];
        cmh_pool_tags_segment(tags, sg, pool);
        BIND(Q_SEG);
        b_int(&b, pid), b_int(&b, i), b_int(&b, sg->device), b_text(&b, cmh_kind_name(sg->kind)), b_int(&b, (int64_t)sg->addr);
        b_int(&b, (int64_t)sg->size), b_int(&b, (int64_t)sg->stream), b_text(&b, pool_name(cmh_segment_pool(sg)));
        b_int(&b, (sg->flags & CMH_SEG_EXPANDABLE) != 0), b_int(&b, sg->stack), b_int(&b, sg->time_ns);
        b_pool(&b, pool, seg_pools);
        rc = run(x, &b, "segments");
        for (uint32_t k = 0; k < sg->nblocks && rc == CMH_OK; k++) {
            const cmh_block *bl = &s->blocks[sg->first_block + k];
            BIND(Q_BLOCK);
            b_int(&b, pid), b_int(&b, i), b_int(&b, (int64_t)bl->addr), b_int(&b, (int64_t)bl->size), b_int(&b, (int64_t)bl->requested);
            b_text(&b, state_name(bl->state)), b_int(&b, bl->stack), b_int(&b, bl->time_ns);
            b_pool(&b, pool, seg_pools); /* (its segment's) */
            rc = run(x, &b, "blocks");
        }
    }
    for (uint32_t i = 0; i < s->nkernels && rc == CMH_OK; i++) {
        const cmh_kernel *k = &s->kernels[i];
        BIND(Q_KERNEL);
        b_int(&b, pid), b_int(&b, k->device), b_int(&b, k->stream), b_int(&b, k->correlation), b_text(&b, cmh_str(s, k->name));
        b_int(&b, k->start_ns), b_int(&b, k->end_ns);
        for (int d = 0; d < 3; d++) b_int(&b, k->grid[d]);
        for (int d = 0; d < 3; d++) b_int(&b, k->block[d]);
        b_int(&b, k->registers), b_int(&b, k->shared_bytes);
        rc = run(x, &b, "kernels");
    }
    for (uint32_t i = 0; i < s->nannotations && rc == CMH_OK; i++) {
        const cmh_annotation *a = &s->annotations[i];
        BIND(Q_MARK);
        b_int(&b, pid), b_int(&b, a->device), b_null(&b), b_int(&b, a->time_ns), b_text(&b, cmh_str(s, a->name));
        b_text(&b, a->stage ? "end" : "start");
        rc = run(x, &b, "marks");
    }
    return rc;
}

/* ---- physical memory made with cuMemCreate (the record's vmm_maps and vmm_unmapped) ---- */

/* vmm_maps: a row per cuMemMap the record names the handle of; vmm_handles: a row per handle,
 * the ones the maps name (how many maps, and whether it is mapped at the end, held and mapped
 * nowhere, or released), the ones released and never mapped, and the ones held and never mapped
 * (handle NULL: the record numbers only the handles it saw mapped or released); each with its
 * release's time (NULL: not released while recorded) */
static int add_vmm(cmh_sqlite *x, const cmh_snapshot *s, int64_t pid)
{
    int rc = CMH_OK;
    for (uint32_t i = 0; i < s->nvmm_maps && rc == CMH_OK; i++) {
        const cmh_vmm_map *m = &s->vmm_maps[i];
        BIND(Q_VMMM);
        b_int(&b, pid), b_int(&b, m->device), b_int(&b, (int64_t)m->addr), b_int(&b, (int64_t)m->size);
        b_opt(&b, m->time_ns ? m->time_ns : -1), b_int(&b, (int64_t)m->handle);
        rc = run(x, &b, "vmm_maps");
    }
    cmh_vmm_handle_row *hv = NULL;
    uint32_t nh = 0;
    if (rc == CMH_OK) rc = cmh_vmm_handle_rows(s, &hv, &nh);
    for (uint32_t i = 0; rc == CMH_OK && i < nh; i++) {
        const cmh_vmm_handle_row *h = &hv[i];
        BIND(Q_VMMH);
        b_int(&b, pid), b_int(&b, h->device);
        if (h->numbered) b_int(&b, (int64_t)h->handle);
        else b_null(&b);
        b_int(&b, (int64_t)h->size);
        if (h->stack) b_int(&b, h->stack);
        else b_null(&b);
        b_opt(&b, h->time_ns ? h->time_ns : -1), b_int(&b, h->maps), b_text(&b, cmh_vmm_handle_state_name(h->state));
        b_opt(&b, h->release_ns ? h->release_ns : -1);
        rc = run(x, &b, "vmm_handles");
    }
    free(hv);
    return rc;
}

/* the record's stream-ordered pools (cmh_pool_descs), numbered 1, 2, ... as pools.pool_id; the
 * PyTorch pool ids of its allocations (cmh_pool_tags, NULL: none to add) */
typedef struct pool_list {
    cmh_pool_desc *d;
    uint32_t n;
    cmh_pool_tags *tags;
} pool_list;

static int add_device(cmh_sqlite *x, const cmh_snapshot *s, int64_t pid, const cmh_trace *t, const pool_list *pl)
{
    dev_view v;
    int rc = view_device(s, t->device, &v);
    /* PyTorch's entries say their pool ((0, 0) the default one) where it wrote pool_id; a
     * recorder's are in none but a private pool's: its memviz pickle's (0, 0) on every other
     * entry is the schema's filler (the pickle read back said "(0, 0)" where its record said NULL) */
    int entry_pools = (s->pt_fields & CMH_PT_POOL_ID) && !(s->pt_fields & CMH_PT_FROM_RECORDER);
    for (uint32_t i = 0; i < t->nentries && rc == CMH_OK; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        BIND(Q_EVENT);
        b_int(&b, pid), b_int(&b, t->device), b_int(&b, i), b_opt(&b, cmh_entry_time(s, e) ? cmh_entry_time(s, e) : -1), b_text(&b, cmh_action_name(e->action));
        if (e->action == CMH_ACT_OOM && cmh_entry_addr(s, e) == CMH_DEVICE_FREE_UNKNOWN) b_null(&b); /* device free not known */
        else b_int(&b, (int64_t)cmh_entry_addr(s, e));
        b_int(&b, (int64_t)cmh_entry_size(s, e)), b_int(&b, (int64_t)cmh_entry_requested(s, e)), b_int(&b, (int64_t)cmh_entry_stream(s, e));
        b_int(&b, e->stack), b_int(&b, cmh_entry_thread(s, e)), b_int(&b, v.dalloc[i]), b_int(&b, v.dres[i]);
        if (v.end_seq[i]) b_int(&b, v.end_seq[i] - 1), b_opt(&b, v.end[i] ? v.end[i] : -1); /* (a trace with no times: NULL, not 0) */
        else b_null(&b), b_null(&b);
        uint64_t pool[2]; /* said by newer PyTorch on every entry, else on a private pool's */
        if (rc == CMH_OK) rc = cmh_pool_tags_entry(pl->tags, s, t, i, pool);
        b_pool(&b, pool, entry_pools);
        /* a pool sample's stream-ordered pool: its pools.pool_id */
        const cmh_pool_desc *pd =
            e->action == CMH_ACT_POOL_SAMPLE ? cmh_pool_desc_find(pl->d, pl->n, cmh_entry_addr(s, e), cmh_entry_time(s, e)) : NULL;
        if (pd) b_int(&b, (int64_t)(pd - pl->d) + 1);
        else b_null(&b);
        rc = run(x, &b, "events");
        if (rc == CMH_OK && e->action == CMH_ACT_MARK) {
            BIND(Q_MARK);
            b_int(&b, pid), b_int(&b, t->device), b_int(&b, i), b_opt(&b, cmh_entry_time(s, e) ? cmh_entry_time(s, e) : -1), b_text(&b, cmh_str(s, cmh_entry_name(s, e)));
            b_text(&b, "point");
            rc = run(x, &b, "marks");
        }
    }
    /* the trace stops before its snapshot: what the reconciliation freed (or added) after the last
     * entry, one row at seq trace_entries, so that allocated_at_start + SUM(allocated_delta) is
     * allocated_at_end, as leaks and peak's end say it */
    cmh_trace_gap gap;
    memset(&gap, 0, sizeof gap);
    if (rc == CMH_OK) cmh_replay_gap(v.r, &gap);
    if (rc == CMH_OK && t->nentries && (v.gap_alloc || v.gap_res || gap.unfreed_blocks || gap.unfreed_segments)) {
        BIND(Q_EVENT);
        b_int(&b, pid), b_int(&b, t->device), b_int(&b, t->nentries), b_opt(&b, s->dump_time_ns > 0 ? s->dump_time_ns : -1), b_text(&b, "trace_gap");
        b_null(&b), b_null(&b), b_null(&b), b_null(&b), b_int(&b, 0), b_null(&b), b_int(&b, v.gap_alloc), b_int(&b, v.gap_res);
        b_null(&b), b_null(&b), b_null(&b), b_null(&b);
        rc = run(x, &b, "events");
    }
    /* the peaks and the end state are peak's own (cmh_peak_compute), not summed again here */
    cmh_peak_report pk;
    if (rc == CMH_OK && (rc = cmh_peak_compute(s, t->device, NULL, &pk)) == CMH_OK) {
        BIND(Q_DEV);
        b_int(&b, pid), b_int(&b, t->device), b_int(&b, t->nentries), b_int(&b, (int64_t)t->dropped), b_int(&b, v.alloc_start);
        b_int(&b, v.res_start);
        if (!pk.base.history) { /* no history (enabled=state): no peak is known, only the end */
            for (int k = 0; k < 6; k++) b_null(&b);
        } else {
            b_int(&b, pk.alloc_peak);
            if (pk.alloc_index >= 0) b_int(&b, pk.alloc_index), b_opt(&b, pk.alloc_time_ns ? pk.alloc_time_ns : -1);
            else b_null(&b), b_null(&b); /* the peak was the state before the first entry */
            b_int(&b, pk.reserved_peak);
            if (pk.reserved_index >= 0) b_int(&b, pk.reserved_index), b_opt(&b, pk.reserved_time_ns ? pk.reserved_time_ns : -1);
            else b_null(&b), b_null(&b);
        }
        b_int(&b, pk.alloc_end), b_int(&b, pk.reserved_end);
        /* the OOMs the program saw and the retries, summary's CUDA OOMs and cudaMalloc retries:
         * the ring's dropped OOMs counted too (no events row is left of them: a fleet query for
         * the ranks that ran out of memory missed a rank whose ring wrapped after its OOM) */
        cmh_mem_stats st;
        uint64_t nooms;
        if (!pk.base.history && cmh_nohist_ooms(s, t->device, &nooms)) /* counted without entries (enabled=state): */
            b_int(&b, (int64_t)nooms), b_null(&b), b_null(&b); /* summary's CUDA OOMs, retries '-' */
        else if (!pk.base.history) b_null(&b), b_null(&b), b_null(&b); /* (summary: '-', not known) */
        else if ((rc = cmh_summary_compute(s, t->device, &st)) == CMH_OK)
            b_int(&b, (int64_t)st.num_ooms), b_int(&b, (int64_t)st.num_alloc_retries), b_int(&b, (int64_t)t->dropped_ooms);
        /* which GPU the device number was (a process's own: CUDA_VISIBLE_DEVICES renumbers) */
        const cmh_device_ident *id = cmh_snapshot_ident(s, t->device);
        if (id) b_text(&b, id->uuid), b_text(&b, id->name), b_text(&b, id->pci_bus);
        else b_null(&b), b_null(&b), b_null(&b);
        /* why no entry says how memory changed (cmh_no_history_cause: "recorded with enabled=state"):
         * the reports' words, NULL with a history */
        b_text(&b, pk.base.history ? NULL : pk.base.nohist_cause);
        /* of peak_allocated, whole blocks the allocator did not split beyond their requests (peak's
         * "allocated counts whole blocks ..."): events.allocated_delta counts those blocks whole */
        if (pk.base.history) b_int(&b, pk.alloc_unsplit);
        else b_null(&b);
        /* the peaks a lower bound (cmh_peak_extent: the trace does not reach back to the run's start,
         * the true peaks may be higher; peak's "at least"), as --json's peak_at_least; NULL with no history */
        if (pk.base.history) b_int(&b, cmh_peak_extent(&pk) == CMH_PEAK_AT_LEAST);
        else b_null(&b);
        if (rc == CMH_OK) rc = run(x, &b, "devices");
        cmh_peak_report_free(&pk);
    }
    view_free(&v);
    return rc;
}

int cmh_sqlite_add(cmh_sqlite *x, const cmh_snapshot *s, const char *file, const cmh_sites *g,
                   const char *(*site_name)(void *, const cmh_snapshot *, const cmh_sites *, uint32_t), void *site_arg)
{
    if (sqlite3_exec(x->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) return fail(x, "BEGIN");
    int64_t pid = x->next_process;
    int rc;
    {
        BIND(Q_PROC);
        b_int(&b, pid), b_text(&b, file), b_opt(&b, s->rank), b_opt(&b, s->local_rank), b_opt(&b, s->world_size);
        b_text(&b, *cmh_str(s, s->hostname) ? cmh_str(s, s->hostname) : NULL), b_opt(&b, s->pid > 0 ? s->pid : -1), b_text(&b, cmh_str(s, s->cmdline)), b_text(&b, s->producer[0] ? s->producer : NULL);
        b_text(&b, s->source == CMH_SRC_PYTORCH ? "pytorch" : "recorder"), b_opt(&b, s->start_time_ns > 0 ? s->start_time_ns : -1), b_opt(&b, s->dump_time_ns > 0 ? s->dump_time_ns : -1);
        b_text(&b, s->ending ? cmh_str(s, s->ending) : NULL);
        b_opt(&b, s->forked_from > 0 ? s->forked_from : -1); /* parent_pid: forked without exec from it */
        /* the origin every "+N" time of the reports counts from (docs/DEFINITIONS.md "The record's
         * clock"): time_ns - clock_origin_ns is the time they print, the same from a .cmh or its pickle */
        int64_t origin = cmh_clock_origin(s);
        b_opt(&b, origin > 0 ? origin : -1);
        /* what a recovery from a cut flight record could not read (snapshot.h cmh_history_lost):
         * the reports' note (NULL: nothing lost, the record read whole), and its counts */
        char lost[1024];
        const cmh_history_lost *h = &s->history_lost;
        b_text(&b, cmh_history_lost_text(s, lost, sizeof lost));
        b_int(&b, (int64_t)h->cut_bytes), b_int(&b, (int64_t)h->torn), b_int(&b, (int64_t)h->damaged), b_int(&b, (int64_t)h->refused);
        rc = run(x, &b, "processes");
    }
    /* which recording thread events.thread and marks' numbers are: the tid and the name the
     * reports give it ("recording thread 3 (tid 4242, 'worker2')"); pid: the process's (a forked
     * child's record is a process of its own) */
    for (uint32_t i = 0; i < s->nthreads && rc == CMH_OK; i++) {
        const cmh_thread_info *th = &s->threads[i];
        BIND(Q_THREAD);
        b_int(&b, pid), b_int(&b, th->thread), b_opt(&b, s->pid > 0 ? s->pid : -1), b_opt(&b, th->tid > 0 ? th->tid : -1);
        b_text(&b, th->name && *cmh_str(s, th->name) ? cmh_str(s, th->name) : NULL);
        rc = run(x, &b, "threads");
    }
    pool_list pl = {NULL, 0, NULL};
    if (rc == CMH_OK) rc = cmh_pool_tags_new(s, &pl.tags);
    if (rc == CMH_OK) rc = add_tables(x, s, pid, g, site_name, site_arg, pl.tags);
    /* driver calls that failed other than OOMs (a double free, a free of a pointer never
     * allocated): no events row shows them (the driver did nothing).  A row per call kept (seq 1,
     * 2, ...; count the (call, result)'s total, on each row), or one with seq NULL where none was */
    for (uint32_t i = 0; i < s->ndrv_errors && rc == CMH_OK; i++) {
        const cmh_drv_error *e = &s->drv_errors[i];
        char nb[32], what[256];
        for (uint32_t j = 0; j < (e->nsites ? e->nsites : 1) && rc == CMH_OK; j++) {
            const cmh_drv_error_site *w = e->nsites ? &e->sites[j] : NULL;
            BIND(Q_DRVERR);
            b_int(&b, pid), b_text(&b, e->call), b_int(&b, e->result), b_text(&b, cmh_cuda_error_name(e->result, nb, sizeof nb));
            b_int(&b, (int64_t)e->count);
            if (w) {
                int is_free = cmh_driver_error_judged(e->call);
                b_int(&b, (int64_t)j + 1), b_int(&b, (int64_t)w->addr), b_int(&b, (int64_t)w->size);
                b_opt(&b, w->thread ? (int64_t)w->thread : -1), b_opt(&b, w->time_ns ? w->time_ns : -1);
                if (w->stack) b_int(&b, w->stack);
                else b_null(&b);
                b_text(&b, is_free ? cmh_driver_error_what(s, w->addr, w->time_ns, what, sizeof what) : NULL);
            } else
                for (int k = 0; k < 7; k++) b_null(&b);
            rc = run(x, &b, "driver_errors");
        }
    }
    if (rc == CMH_OK) rc = add_vmm(x, s, pid);
    if (rc == CMH_OK) rc = cmh_pool_descs(s, &pl.d, &pl.n);
    for (uint32_t i = 0; i < pl.n && rc == CMH_OK; i++) { /* the record's stream-ordered pools, by kind */
        const cmh_pool_desc *d = &pl.d[i];
        BIND(Q_POOL);
        b_int(&b, pid), b_int(&b, (int64_t)i + 1), b_int(&b, (int64_t)d->handle), b_int(&b, d->device);
        b_text(&b, d->kind == CMH_POOL_DEFAULT ? "default" : d->kind == CMH_POOL_PRIVATE ? "private" : NULL);
        if (d->number) b_int(&b, d->number);
        else b_null(&b);
        if (d->stack) b_int(&b, d->stack);
        else b_null(&b);
        b_opt(&b, d->time_ns ? d->time_ns : -1);
        rc = run(x, &b, "pools");
    }
    for (uint32_t t = 0; t < s->ntraces && rc == CMH_OK; t++) /* FLEET.md: a row per device with a trace */
        if (s->traces[t].nentries || s->traces[t].dropped) rc = add_device(x, s, pid, &s->traces[t], &pl);
    /* ... and per device that holds memory at the end without one (enabled=state, PyTorch's history
     * off): its end state, its peaks NULL; such a device had no row, so a query of the job's
     * memory at the end missed it.  So does a device whose OOMs were counted without entries
     * (enabled=state): it ran out of memory, and had no row when it held nothing at the end */
    int32_t devs[256];
    int nd = cmh_snapshot_devices(s, devs, 256);
    for (int i = 0; i < nd && i < 256 && rc == CMH_OK; i++) {
        const cmh_trace *t = cmh_snapshot_trace(s, devs[i]);
        if (t && (t->nentries || t->dropped)) continue;
        int held = 0;
        for (uint32_t k = 0; k < s->nsegments && !held; k++) held = s->segments[k].device == devs[i];
        cmh_trace none = {.device = devs[i]};
        if (held || (t && t->dropped_ooms)) rc = add_device(x, s, pid, t ? t : &none, &pl);
    }
    free(pl.d);
    cmh_pool_tags_free(pl.tags);
    if (rc == CMH_OK && sqlite3_exec(x->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) rc = fail(x, "COMMIT");
    if (rc != CMH_OK) sqlite3_exec(x->db, "ROLLBACK", NULL, NULL, NULL);
    else x->next_process++;
    return rc;
}

int cmh_sqlite_close(cmh_sqlite *x)
{
    int rc = CMH_OK;
    if (sqlite3_exec(x->db, g_indexes, NULL, NULL, NULL) != SQLITE_OK)
        rc = fail(x, "indexes");
    for (int i = 0; i < NQ; i++) sqlite3_finalize(x->q[i]);
    if (sqlite3_close(x->db) != SQLITE_OK && rc == CMH_OK) rc = fail(x, "close");
    free(x);
    return rc;
}

void cmh_sqlite_abort(cmh_sqlite *x)
{
    for (int i = 0; i < NQ; i++) sqlite3_finalize(x->q[i]);
    sqlite3_close(x->db);
    free(x);
}
