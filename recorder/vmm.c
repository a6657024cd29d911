/*
 * vmm.c - the virtual memory management API as the recorder sees it: physical allocations
 * (cuMemCreate handles, and the device each belongs to), address reservations, and the ranges
 * mapped into them.
 *
 * A mapped range is the segment: cuMemMap makes one (segment_map), cuMemUnmap removes whatever
 * part of one or several it covers (segment_unmap, one entry per range hit).  The mapped ranges
 * are kept in an address-ordered array, so an unmap finds the ranges it covers by binary
 * search, under one lock, whatever else is alive.  An unmap is recorded *before* the driver
 * unmaps (history.c's rule for every free): another thread mapping the same address right
 * after the driver's unmap is then always recorded after it.  If the driver refuses, the
 * ranges come back as they were.
 *
 * Reservations cost no memory but make maps one segment: contiguous maps inside one reservation
 * are exported as one growing segment, the way PyTorch's expandable segments appear
 * (export.c).  At most CMH_MAX_RESERVATIONS are kept; past that, maps stay separate segments
 * and each reservation left out is counted as lost.
 */
#include <stdlib.h>
#include <string.h>

#include "flight_format.h"
#include "internal.h"
#include "oatab.h"

/* ---- handles: cuMemCreate -> device, size, stack, and how much of it is mapped now ----
 * A handle held and mapped nowhere (never mapped, or unmapped and never released) is memory the
 * driver charges to the process that no segment shows: every snapshot lists those
 * (cmh_vmm_export_unmapped), and the flight record keeps each handle's state as it changes
 * (cmh_flight_vmm_handle), so a recovered record lists them too.  What is mapped is counted in
 * bytes, as a partial unmap splits a range.  A mapped range remembers its handle in
 * cmh_live.aux by the handle's serial, a number no other handle ever gets: the driver may hand
 * a released handle's value out again while ranges of the old one are still mapped (a handle
 * may be released while mapped: its memory goes at the last unmap), and their unmap must not
 * take bytes from the new handle.  So a release forgets the serial (g_serials) and leaves the
 * ranges alone, whatever their number.  Lock order: g_mlock, then g_hlock. */

typedef struct hrec {
    uint64_t handle; /* key (a handle of 0 is never kept: its maps take the current device) */
    uint64_t serial; /* this handle's, for its mapped ranges' aux (never 0) */
    int64_t device;
    uint64_t size, mapped; /* bytes made, bytes mapped now */
    int64_t ticks;
    uint32_t stack;
    uint8_t inherited; /* made before a fork: the parent's record, not this process's */
} hrec;

typedef struct serial_rec {
    uint64_t serial; /* key */
    uint64_t handle;
} serial_rec;

static cmh_mutex g_hlock = CMH_MUTEX_INITIALIZER;
static cmh_mutex g_mlock = CMH_MUTEX_INITIALIZER;
static cmh_live *g_maps; /* the mapped ranges: sorted by addr, disjoint; aux = the handle's serial */
static uint32_t g_nmaps, g_capmaps;
static cmh_oatab g_handles = {NULL, 0, 0, sizeof(hrec)};
static cmh_oatab g_serials = {NULL, 0, 0, sizeof(serial_rec)}; /* serial -> handle, for the handles held */
static uint64_t g_next_serial; /* under g_hlock */

static void flight_state(const hrec *r) /* under g_hlock: the file's order is the changes' */
{
    assert(cmh_held(&g_hlock));
    if (r->inherited) return;
    cmh_flight_vmm_handle(r->handle, (int)r->device, r->size, r->ticks, r->stack, r->mapped ? CMH_FR_VMM_MAPPED : CMH_FR_VMM_UNMAPPED);
}

void cmh_vmm_handle_created(uint64_t h, int device, uint64_t size)
{
    if (!h || !cmh_rec_enabled()) return; /* paused or off: made unseen, as every allocation then */
    cmh_hist_ensure_init();
    cmh_first_touch(); /* physical memory is an allocation: a process that only made handles is recorded */
    int ctx = cmh_rec_context();
    uint32_t stack = ctx >= CMH_CONTEXT_STATE ? cmh_stack_capture() : 0;
    int64_t ticks = cmh_now_ticks();
    cmh_lock(&g_hlock);
    hrec *old = cmh_oa_find(&g_handles, h);
    if (old) { /* a value we never saw released: the old one is gone */
        serial_rec *sr = cmh_oa_find(&g_serials, old->serial);
        if (sr) cmh_oa_remove(&g_serials, sr);
    }
    uint64_t serial = ++g_next_serial;
    serial_rec *sr = cmh_oa_put(&g_serials, &(serial_rec){serial, h});
    hrec *r = sr ? cmh_oa_get(&g_handles, h, NULL) : NULL;
    if (r) {
        r->serial = serial;
        r->device = device;
        r->size = size;
        r->mapped = 0;
        r->ticks = ticks;
        r->stack = stack;
        r->inherited = 0;
        flight_state(r);
    } else if (sr) {
        cmh_oa_remove(&g_serials, cmh_oa_find(&g_serials, serial));
    }
    cmh_unlock(&g_hlock);
    if (!r) cmh_count_lost(1);
}

static void log_release(const hrec *r, int64_t ticks);

void cmh_vmm_handle_released(uint64_t h)
{
    if (!h) return;
    int64_t now = cmh_now_ticks();
    hrec gone = {0};
    /* its ranges keep a serial that no longer names anything (above) */
    cmh_lock(&g_hlock);
    hrec *r = cmh_oa_find(&g_handles, h);
    if (r) {
        serial_rec *sr = cmh_oa_find(&g_serials, r->serial);
        if (!r->inherited) cmh_flight_vmm_handle(h, (int)r->device, r->size, r->ticks, r->stack, CMH_FR_VMM_GONE);
        if (!r->inherited) gone = *r;
        if (sr) cmh_oa_remove(&g_serials, sr);
        cmh_oa_remove(&g_handles, r);
    }
    cmh_unlock(&g_hlock);
    if (gone.handle) log_release(&gone, now);
}

int cmh_vmm_handle_device(uint64_t h)
{
    cmh_lock(&g_hlock);
    hrec *r = h ? cmh_oa_find(&g_handles, h) : NULL;
    int dev = r ? (int)r->device : -1;
    cmh_unlock(&g_hlock);
    return dev;
}

/* The serial a map of handle h remembers (0: a handle not held). */
static uint64_t handle_serial(uint64_t h)
{
    cmh_lock(&g_hlock);
    hrec *r = h ? cmh_oa_find(&g_handles, h) : NULL;
    uint64_t serial = r ? r->serial : 0;
    cmh_unlock(&g_hlock);
    return serial;
}

/* bytes of the handle of this serial mapped (delta > 0) or unmapped (delta < 0); under g_mlock */
static void handle_mapped(uint64_t serial, int64_t delta)
{
    assert(cmh_held(&g_mlock));
    if (!serial || !delta) return;
    cmh_lock(&g_hlock);
    const serial_rec *sr = cmh_oa_find(&g_serials, serial);
    hrec *r = sr ? cmh_oa_find(&g_handles, sr->handle) : NULL;
    if (r && r->serial == serial) {
        int was = r->mapped != 0;
        if (delta < 0 && (uint64_t)-delta > r->mapped) r->mapped = 0;
        else r->mapped += (uint64_t)delta;
        if (was != (r->mapped != 0)) flight_state(r);
    }
    cmh_unlock(&g_hlock);
}

void cmh_vmm_flight_handles(void)
{
    cmh_lock(&g_hlock);
    for (uint32_t i = 0; i < g_handles.cap; i++) {
        const hrec *r = cmh_oa_at(&g_handles, i);
        if (r->handle) flight_state(r);
    }
    cmh_unlock(&g_hlock);
}

typedef struct held {
    int64_t device, ticks;
    uint64_t size;
    uint32_t stack;
} held;

int cmh_vmm_export_unmapped(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg)
{
    int64_t now_ticks = cmh_now_ticks(), now_ns = cmh_now_ns();
    held *v = NULL;
    size_t n = 0, cap = 0;
    int rc = CMH_OK;
    cmh_lock(&g_hlock);
    for (uint32_t i = 0; i < g_handles.cap && rc == CMH_OK; i++) {
        const hrec *r = cmh_oa_at(&g_handles, i);
        if (!r->handle || r->mapped || r->inherited) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            held *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = CMH_ENOMEM;
                break;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = (held){r->device, r->ticks, r->size, r->stack};
    }
    cmh_unlock(&g_hlock);
    for (size_t i = 0; i < n && rc == CMH_OK; i++) {
        cmh_vmm_handle h = {(int32_t)v[i].device, v[i].size, v[i].stack ? stack_map(v[i].stack, arg) : 0,
                            cmh_ticks_to_ns(v[i].ticks, now_ticks, now_ns)};
        rc = cmh_snapshot_add_vmm_unmapped(s, &h);
    }
    free(v);
    return rc;
}

/* ---- the map log: every cuMemMap and the handle it mapped (.cmh vmm_maps) ----
 * The trace's segment_map entry says the range; the driver charges the handle's whole size,
 * once, however many ranges map it and however little of it they map.  So each map is logged
 * with its handle's serial, size and creation stack, kept past the handle's release (a range
 * of a released handle stays mapped, its memory charged, until its last unmap).  At most
 * CMH_MAX_MAP_LOG rows: past that, maps are counted lost (the analyzer counts a map it has no
 * row for by its range, as records before the table). */

#define CMH_MAX_MAP_LOG (1u << 20)

typedef struct maplog {
    int64_t device, ticks, hticks;
    uint64_t addr, size, serial, hsize;
    uint32_t hstack;
} maplog;

static cmh_mutex g_llock = CMH_MUTEX_INITIALIZER; /* after g_hlock where both are held: never */
/* One row appended to a log under g_llock, doubling it up to CMH_MAX_MAP_LOG rows; returns the
 * log (moved where it grew); *lost 1 where there was no room (the caller counts it), the maps'
 * and the releases' logs alike. */
static void *log_push(void *rows, uint32_t *n, uint32_t *cap, const void *row, size_t size, int *lost)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 64;
        void *nl = nc <= CMH_MAX_MAP_LOG ? realloc(rows, (size_t)nc * size) : NULL;
        if (nl) {
            rows = nl;
            *cap = nc;
        }
    }
    *lost = *n >= *cap;
    if (!*lost) memcpy((char *)rows + (size_t)(*n)++ * size, row, size);
    return rows;
}

static maplog *g_log;
static uint32_t g_nlog, g_caplog;

static void log_map(int device, uint64_t addr, uint64_t size, int64_t ticks, uint64_t handle, uint64_t serial)
{
    maplog m = {device, ticks, 0, addr, size, serial, 0, 0};
    cmh_lock(&g_hlock);
    const serial_rec *sr = serial ? cmh_oa_find(&g_serials, serial) : NULL;
    const hrec *r = sr ? cmh_oa_find(&g_handles, sr->handle) : NULL;
    int known = r && r->serial == serial && r->handle == handle && !r->inherited;
    if (known) {
        m.hsize = r->size;
        m.hstack = r->stack;
        m.hticks = r->ticks;
    }
    cmh_unlock(&g_hlock);
    if (!known) return; /* a handle made unseen: its map is counted by its range */
    cmh_lock(&g_llock);
    int lost;
    g_log = log_push(g_log, &g_nlog, &g_caplog, &m, sizeof m, &lost);
    cmh_unlock(&g_llock);
    if (lost) cmh_count_lost(1);
    else cmh_flight_vmm_map(device, addr, size, ticks, serial, m.hsize, m.hstack, m.hticks); /* (a recovered record's rows) */
}

/* ---- the release log: every cuMemRelease (.cmh vmm_released) ----
 * The driver charges a handle until its release (its last unmap, if later): a handle unmapped and
 * released later, or made and released without a map, holds memory no range and no held handle at
 * the end shows.  Each release is logged with the handle's serial (the maps' number of it), size,
 * creation stack and time; at most CMH_MAX_MAP_LOG rows, past that counted lost. */
typedef struct rellog {
    int64_t device, ticks, rticks;
    uint64_t serial, size;
    uint32_t stack;
} rellog;

static rellog *g_rel; /* under g_llock */
static uint32_t g_nrel, g_caprel;

static void log_release(const hrec *r, int64_t ticks)
{
    rellog m = {r->device, r->ticks, ticks, r->serial, r->size, r->stack};
    cmh_lock(&g_llock);
    int lost;
    g_rel = log_push(g_rel, &g_nrel, &g_caprel, &m, sizeof m, &lost);
    cmh_unlock(&g_llock);
    if (lost) cmh_count_lost(1);
    else cmh_flight_vmm_release((int)m.device, m.serial, m.size, m.stack, m.ticks, m.rticks); /* (a recovered record's rows) */
}

int cmh_vmm_export_released(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg)
{
    int64_t now_ticks = cmh_now_ticks(), now_ns = cmh_now_ns();
    cmh_lock(&g_llock);
    uint32_t n = g_nrel;
    rellog *v = n ? malloc(n * sizeof *v) : NULL;
    if (v) memcpy(v, g_rel, n * sizeof *v);
    cmh_unlock(&g_llock);
    if (n && !v) return CMH_ENOMEM;
    int rc = CMH_OK;
    for (uint32_t i = 0; i < n && rc == CMH_OK; i++) {
        if (v[i].device < 0) continue; /* (not a device's) */
        cmh_vmm_release r = {(int32_t)v[i].device, v[i].serial, v[i].size, v[i].stack ? stack_map(v[i].stack, arg) : 0,
                             cmh_ticks_to_ns(v[i].ticks, now_ticks, now_ns), cmh_ticks_to_ns(v[i].rticks, now_ticks, now_ns)};
        rc = cmh_snapshot_add_vmm_release(s, &r);
    }
    free(v);
    return rc;
}

/* History cleared: the maps logged go with the entries they name (a map before the clear is
 * counted by its range, as a map whose entry the ring dropped), and the releases with them. */
void cmh_vmm_clear_maps(void)
{
    cmh_lock(&g_llock);
    g_nlog = 0;
    g_nrel = 0;
    cmh_unlock(&g_llock);
}

int cmh_vmm_export_maps(cmh_snapshot *s, uint32_t (*stack_map)(uint32_t, void *), void *arg)
{
    int64_t now_ticks = cmh_now_ticks(), now_ns = cmh_now_ns();
    cmh_lock(&g_llock);
    uint32_t n = g_nlog;
    maplog *v = n ? malloc(n * sizeof *v) : NULL;
    if (v) memcpy(v, g_log, n * sizeof *v);
    cmh_unlock(&g_llock);
    if (n && !v) return CMH_ENOMEM;
    int rc = CMH_OK;
    for (uint32_t i = 0; i < n && rc == CMH_OK; i++) {
        cmh_vmm_map m = {(int32_t)v[i].device, v[i].addr, v[i].size, cmh_ticks_to_ns(v[i].ticks, now_ticks, now_ns), v[i].serial,
                         v[i].hsize, v[i].hstack ? stack_map(v[i].hstack, arg) : 0, cmh_ticks_to_ns(v[i].hticks, now_ticks, now_ns)};
        rc = cmh_snapshot_add_vmm_map(s, &m);
    }
    free(v);
    return rc;
}

/* ---- reservations ---- */

#define CMH_MAX_RESERVATIONS 4096

typedef struct resv {
    uint64_t lo, hi;
} resv;

static cmh_mutex g_rlock = CMH_MUTEX_INITIALIZER;
static resv g_res[CMH_MAX_RESERVATIONS]; /* sorted by lo, disjoint */
static uint32_t g_nres;

static uint32_t res_lower(uint64_t addr) /* first index whose hi > addr */
{
    assert(cmh_held(&g_rlock));
    uint32_t lo = 0, hi = g_nres;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (g_res[mid].hi <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void cmh_vmm_reserved(uint64_t addr, uint64_t size)
{
    if (!size) return;
    cmh_lock(&g_rlock);
    uint32_t i = res_lower(addr);
    int full = g_nres == CMH_MAX_RESERVATIONS;
    if (!full) {
        memmove(&g_res[i + 1], &g_res[i], (g_nres - i) * sizeof *g_res);
        g_res[i] = (resv){addr, addr + size};
        g_nres++;
    }
    cmh_unlock(&g_rlock);
    if (full) cmh_count_lost(1);
}

void cmh_vmm_reservation_freed(uint64_t addr)
{
    cmh_lock(&g_rlock);
    uint32_t i = res_lower(addr);
    if (i < g_nres && g_res[i].lo == addr) {
        memmove(&g_res[i], &g_res[i + 1], (g_nres - i - 1) * sizeof *g_res);
        g_nres--;
    }
    cmh_unlock(&g_rlock);
}

int cmh_vmm_reservation(uint64_t addr, uint64_t *lo, uint64_t *hi)
{
    cmh_lock(&g_rlock);
    uint32_t i = res_lower(addr);
    int found = i < g_nres && g_res[i].lo <= addr;
    if (found) {
        *lo = g_res[i].lo;
        *hi = g_res[i].hi;
    }
    cmh_unlock(&g_rlock);
    return found;
}

/* ---- mapped ranges ---- */


static uint32_t map_lower(uint64_t addr) /* first index whose end > addr */
{
    assert(cmh_held(&g_mlock));
    uint32_t lo = 0, hi = g_nmaps;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (g_maps[mid].addr + g_maps[mid].size <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Put l in its place; -1 when out of memory.  A range overlapping l (a map we never saw
 * unmapped) gives way to it. */
static int map_insert(const cmh_live *l)
{
    assert(cmh_held(&g_mlock));
    uint32_t i = map_lower(l->addr);
    uint32_t k = i;
    while (k < g_nmaps && g_maps[k].addr < l->addr + l->size) k++;
    if (k > i) { /* overlapped: drop them, l takes their place */
        for (uint32_t j = i; j < k; j++) handle_mapped(g_maps[j].aux, -(int64_t)g_maps[j].size);
        memmove(&g_maps[i], &g_maps[k], (g_nmaps - k) * sizeof *g_maps);
        g_nmaps -= k - i;
    }
    if (g_nmaps == g_capmaps) {
        uint32_t nc = g_capmaps ? g_capmaps * 2 : 64;
        cmh_live *nm = realloc(g_maps, nc * sizeof *nm);
        if (!nm) return -1;
        g_maps = nm;
        g_capmaps = nc;
    }
    memmove(&g_maps[i + 1], &g_maps[i], (g_nmaps - i) * sizeof *g_maps);
    g_maps[i] = *l;
    g_nmaps++;
    handle_mapped(l->aux, (int64_t)l->size);
    return 0;
}

void cmh_vmm_mapped(int device, uint64_t addr, uint64_t size, uint64_t handle)
{
    if (!cmh_rec_enabled() || !size) return;
    cmh_hist_ensure_init();
    cmh_first_touch();
    int ctx = cmh_rec_context();
    uint32_t stack = ctx >= CMH_CONTEXT_STATE ? cmh_stack_capture() : 0;
    cmh_live l = {addr, size, size, 0, cmh_now_ticks(), handle_serial(handle), stack, (int16_t)device, CMH_KIND_VMM, CMH_EF_WHOLE_BLOCK};
    cmh_lock(&g_mlock);
    int rc = map_insert(&l);
    cmh_unlock(&g_mlock);
    if (rc) cmh_count_lost(1);
    log_map(device, addr, size, l.ticks, handle, l.aux);
    cmh_hist_record(device, CMH_ACT_SEGMENT_MAP, CMH_KIND_VMM, CMH_EF_WHOLE_BLOCK, addr, size, size, 0,
                    ctx >= CMH_CONTEXT_ALLOC ? stack : 0, (int64_t)size, (int64_t)size, CMH_COUNT_ALLOC, l.ticks);
}

static int unmap_keep(cmh_unmap *u, const cmh_live *orig)
{
    if (u->n == u->cap) {
        uint32_t nc = u->cap * 2;
        cmh_live *no = malloc(nc * sizeof *no);
        if (!no) return -1;
        memcpy(no, u->orig, u->n * sizeof *no);
        if (u->orig != u->inline_orig) free(u->orig);
        u->orig = no;
        u->cap = nc;
    }
    u->orig[u->n++] = *orig;
    return 0;
}

void cmh_vmm_unmap(uint64_t lo, uint64_t size, cmh_unmap *u)
{
    u->n = 0;
    u->cap = sizeof u->inline_orig / sizeof u->inline_orig[0];
    u->orig = u->inline_orig;
    u->lo = lo;
    u->hi = lo + size;
    if (!cmh_rec_enabled() || !size) return;
    uint64_t hi = lo + size;
    cmh_lock(&g_mlock);
    uint32_t i = map_lower(lo);
    while (i < g_nmaps && g_maps[i].addr < hi) {
        cmh_live m = g_maps[i];
        if (unmap_keep(u, &m)) { /* cannot remember it for an undo: still recorded, the loss counted */
            cmh_count_lost(1);
        }
        uint64_t a = m.addr > lo ? m.addr : lo, b = m.addr + m.size < hi ? m.addr + m.size : hi;
        memmove(&g_maps[i], &g_maps[i + 1], (g_nmaps - i - 1) * sizeof *g_maps);
        g_nmaps--;
        handle_mapped(m.aux, -(int64_t)m.size); /* its remainders, if any, count again below */
        if (m.addr < a) { /* the left part stays mapped */
            cmh_live left = m;
            left.size = left.requested = a - m.addr;
            if (map_insert(&left)) cmh_count_lost(1);
            i++;
        }
        if (m.addr + m.size > b) {
            cmh_live right = m;
            right.addr = b;
            right.size = right.requested = m.addr + m.size - b;
            if (map_insert(&right)) cmh_count_lost(1);
            i++;
        }
    }
    cmh_unlock(&g_mlock);
    /* recorded now, before the driver unmaps */
    for (uint32_t k = 0; k < u->n; k++) {
        const cmh_live *m = &u->orig[k];
        uint64_t a = m->addr > lo ? m->addr : lo, b = m->addr + m->size < hi ? m->addr + m->size : hi;
        int whole = (m->flags & CMH_EF_WHOLE_BLOCK) != 0;
        if (!whole) cmh_blocks_segment_gone(a, b);
        cmh_hist_record(m->device, CMH_ACT_SEGMENT_UNMAP, CMH_KIND_VMM, m->flags, a, b - a, b - a, m->stream,
                        cmh_hist_free_stack(m->stack), whole ? -(int64_t)(b - a) : 0, -(int64_t)(b - a), CMH_COUNT_FREE, 0);
    }
}

void cmh_vmm_unmap_undo(cmh_unmap *u)
{
    /* The driver refused: every range comes back whole, its remainders folded into it again. */
    cmh_lock(&g_mlock);
    for (uint32_t k = 0; k < u->n; k++)
        if (map_insert(&u->orig[k])) cmh_count_lost(1);
    cmh_unlock(&g_mlock);
    for (uint32_t k = 0; k < u->n; k++) {
        const cmh_live *m = &u->orig[k];
        uint64_t a = m->addr > u->lo ? m->addr : u->lo, b = m->addr + m->size < u->hi ? m->addr + m->size : u->hi;
        int whole = (m->flags & CMH_EF_WHOLE_BLOCK) != 0;
        cmh_hist_record(m->device, CMH_ACT_SEGMENT_MAP, CMH_KIND_VMM, m->flags, a, b - a, b - a, m->stream, 0,
                        whole ? (int64_t)(b - a) : 0, (int64_t)(b - a), CMH_COUNT_NONE, 0);
    }
    cmh_vmm_unmap_done(u);
}

void cmh_vmm_unmap_done(cmh_unmap *u)
{
    if (u->orig != u->inline_orig) free(u->orig);
    u->orig = u->inline_orig;
    u->n = 0;
}

int cmh_vmm_update(uint64_t addr, int (*fn)(cmh_live *, void *), void *arg, cmh_live *copy)
{
    int found = 0;
    cmh_lock(&g_mlock);
    uint32_t i = map_lower(addr);
    if (i < g_nmaps && g_maps[i].addr == addr) {
        found = fn(&g_maps[i], arg) ? 1 : 2;
        if (copy) *copy = g_maps[i];
    }
    cmh_unlock(&g_mlock);
    return found;
}

int cmh_vmm_collect(cmh_live **out, size_t *n)
{
    cmh_lock(&g_mlock);
    *n = g_nmaps;
    *out = g_nmaps ? malloc(g_nmaps * sizeof **out) : NULL;
    if (*out) memcpy(*out, g_maps, g_nmaps * sizeof **out);
    int ok = !g_nmaps || *out;
    cmh_unlock(&g_mlock);
    return ok ? CMH_OK : CMH_ENOMEM;
}

void cmh_vmm_atfork_prepare(void)
{
    cmh_lock(&g_rlock);
    cmh_lock(&g_mlock);
    cmh_lock(&g_hlock); /* after g_mlock, as everywhere */
    cmh_lock(&g_llock);
}

void cmh_vmm_atfork_parent(void)
{
    cmh_unlock(&g_llock);
    cmh_unlock(&g_hlock);
    cmh_unlock(&g_mlock);
    cmh_unlock(&g_rlock);
}

/* fork(): the child has the parent's address space, so its reservations and maps are real
 * there too; only the locks are new.  Its history starts empty, as do its counters: maps it
 * inherited are forgotten (they were the parent's record), and so are the handles it inherited. */
void cmh_vmm_reset_after_fork(void)
{
    cmh_mutex_init(&g_hlock);
    cmh_mutex_init(&g_rlock);
    cmh_mutex_init(&g_mlock);
    cmh_mutex_init(&g_llock);
    g_nmaps = 0;
    g_nlog = 0; /* the parent's maps are the parent's record */
    g_nrel = 0;
    for (uint32_t i = 0; i < g_handles.cap; i++) { /* the parent's handles stay out of the child's record */
        hrec *r = cmh_oa_at(&g_handles, i);
        if (r->handle) r->inherited = 1;
    }
}
