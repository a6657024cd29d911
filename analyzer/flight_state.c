/*
 * flight_state.c - the final state of a flight record's entries (flight_state.h): segments
 * and blocks as the recorder's export spells them: a driver allocation a segment holding one
 * block, blocks an allocator reported inside its segments, the VMM maps of a reservation one
 * growing segment with a block per map.  Every change goes through the few functions below, so
 * the per-device allocated and reserved sums stay exact.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight_state.h"
#include "grow.h"
#include "oatab.h"

typedef struct seg_slot {
    uint64_t addr;
    uint64_t i;
} seg_slot;

void cmh_fstate_init(cmh_fstate *st)
{
    memset(st, 0, sizeof *st);
    cmh_oa_init(&st->by_addr, sizeof(seg_slot));
    cmh_oa_init(&st->blocks, sizeof(fblk));
}

void cmh_fstate_free(cmh_fstate *st)
{
    free(st->segs);
    cmh_oa_free(&st->by_addr);
    cmh_oa_free(&st->blocks);
    memset(st, 0, sizeof *st);
}

static void resv_add(cmh_fstate *st, int32_t dev, uint64_t add, uint64_t sub)
{
    int k = cmh_fstate_slot(dev);
    if (k < 0) return;
    st->reserved[k] = st->reserved[k] + add - (sub > st->reserved[k] + add ? st->reserved[k] + add : sub);
    if (st->reserved[k] > st->peak_reserved[k]) st->peak_reserved[k] = st->reserved[k];
}

static void alloc_add(cmh_fstate *st, int32_t dev, uint64_t add, uint64_t sub)
{
    int k = cmh_fstate_slot(dev);
    if (k < 0) return;
    st->allocated[k] = st->allocated[k] + add - (sub > st->allocated[k] + add ? st->allocated[k] + add : sub);
    if (st->allocated[k] > st->peak_allocated[k]) st->peak_allocated[k] = st->allocated[k];
}

fseg *cmh_fstate_seg_add(cmh_fstate *st, const fseg *g)
{
    if (CMH_GROW(st->segs, st->capsegs, (uint64_t)st->nsegs + 1, 256)) {
        st->nomem = 1;
        return NULL;
    }
    seg_slot *sl = g->addr ? cmh_oa_get(&st->by_addr, g->addr, NULL) : NULL;
    if (g->addr && !sl) {
        st->nomem = 1;
        return NULL;
    }
    if (sl) sl->i = st->nsegs;
    st->segs[st->nsegs] = *g;
    st->segs[st->nsegs].alive = 1;
    resv_add(st, g->device, g->size, 0);
    return &st->segs[st->nsegs++];
}

/* The live segment starting at addr and its slot in by_addr (one probe of the table). */
static fseg *seg_slot_at(cmh_fstate *st, uint64_t addr, seg_slot **slot)
{
    seg_slot *sl = addr ? cmh_oa_find(&st->by_addr, addr) : NULL;
    *slot = sl;
    return sl && st->segs[sl->i].alive && st->segs[sl->i].addr == addr ? &st->segs[sl->i] : NULL;
}

uint64_t cmh_fstate_seg_size(cmh_fstate *st, uint64_t addr, int32_t dev)
{
    seg_slot *sl;
    fseg *g = seg_slot_at(st, addr, &sl);
    return g && g->device == dev ? g->size : 0;
}

/* g, found with its slot sl, is gone (the slot removed: the table is probed no more) */
static void seg_kill_at(cmh_fstate *st, fseg *g, seg_slot *sl)
{
    cmh_oa_remove(&st->by_addr, sl);
    g->alive = 0;
    st->dead++;
    resv_add(st, g->device, 0, g->size);
}

static void seg_kill(cmh_fstate *st, fseg *g)
{
    seg_slot *sl = cmh_oa_find(&st->by_addr, g->addr);
    if (sl && &st->segs[sl->i] == g) cmh_oa_remove(&st->by_addr, sl);
    g->alive = 0;
    st->dead++;
    resv_add(st, g->device, 0, g->size);
}

static void seg_resize(cmh_fstate *st, fseg *g, uint64_t size)
{
    resv_add(st, g->device, size, g->size);
    g->size = size;
}

static void seg_move(cmh_fstate *st, fseg *g, uint64_t addr) /* a new start address */
{
    seg_slot *sl = cmh_oa_find(&st->by_addr, g->addr);
    uint64_t i = (uint64_t)(g - st->segs);
    if (sl && sl->i == i) cmh_oa_remove(&st->by_addr, sl);
    g->addr = addr;
    if (!(sl = cmh_oa_get(&st->by_addr, addr, NULL))) st->nomem = 1;
    else sl->i = i;
}

/* The live expandable segment of device dev touching [a, b): ending at a, starting at b, or
 * holding a. */
static fseg *expandable_near(cmh_fstate *st, int32_t dev, uint64_t a, uint64_t b, int holding)
{
    for (uint32_t i = st->nsegs; i-- > 0;) {
        fseg *g = &st->segs[i];
        if (!g->alive || g->device != dev || !(g->flags & CMH_SEG_EXPANDABLE)) continue;
        if (holding ? a >= g->addr && a < g->addr + g->size : g->addr + g->size == a || g->addr == b) return g;
    }
    return NULL;
}

void cmh_fstate_block_put(cmh_fstate *st, const cmh_entry_full *e, int32_t dev, uint64_t size, uint8_t state_)
{
    int created = 0;
    fblk *b = e->addr ? cmh_oa_get(&st->blocks, e->addr, &created) : NULL;
    if (!b) {
        if (e->addr) st->nomem = 1;
        return;
    }
    uint64_t was = !created && b->state == CMH_BLOCK_ACTIVE_ALLOCATED ? b->size : 0;
    int32_t was_dev = b->device;
    b->size = size;
    b->requested = e->requested;
    b->time_ns = e->time_ns;
    b->stack = e->stack;
    b->device = dev;
    b->state = state_;
    if (was) alloc_add(st, was_dev, 0, was);
    if (state_ == CMH_BLOCK_ACTIVE_ALLOCATED) alloc_add(st, dev, size, 0);
}

static void block_del(cmh_fstate *st, uint64_t addr)
{
    fblk *b = addr ? cmh_oa_find(&st->blocks, addr) : NULL;
    if (!b) return;
    if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) alloc_add(st, b->device, 0, b->size);
    cmh_oa_remove(&st->blocks, b);
}

void cmh_fstate_apply(cmh_fstate *st, const cmh_entry_full *e, int32_t dev)
{
    int whole = (e->flags & CMH_EF_WHOLE_BLOCK) != 0;
    switch (e->action) {
    case CMH_ACT_SEGMENT_ALLOC: {
        fseg g = {e->addr, e->size, e->stream, {0, 0}, e->time_ns, e->stack, dev, e->kind,
                  (uint8_t)(whole ? CMH_SEG_WHOLE_BLOCK : 0), (uint8_t)cmh_pool_rule(e->size, whole), 1};
        seg_slot *sl;
        fseg *old = seg_slot_at(st, e->addr, &sl);
        if (old) seg_kill_at(st, old, sl); /* its free was not seen: the newer one stands */
        cmh_fstate_seg_add(st, &g);
        if (whole) cmh_fstate_block_put(st, e, dev, e->size, CMH_BLOCK_ACTIVE_ALLOCATED);
        break;
    }
    case CMH_ACT_SEGMENT_FREE: {
        seg_slot *sl;
        fseg *g = seg_slot_at(st, e->addr, &sl);
        if (g) seg_kill_at(st, g, sl);
        if (whole) block_del(st, e->addr);
        break;
    }
    case CMH_ACT_SEGMENT_MAP: {
        fseg *g = expandable_near(st, dev, e->addr, e->addr + e->size, 0);
        if (g && g->addr + g->size == e->addr) seg_resize(st, g, g->size + e->size);
        else if (g) {
            seg_move(st, g, e->addr);
            seg_resize(st, g, g->size + e->size);
        } else {
            fseg n = {e->addr, e->size, e->stream, {0, 0}, e->time_ns, e->stack, dev, e->kind,
                      (uint8_t)(CMH_SEG_EXPANDABLE | (whole ? CMH_SEG_WHOLE_BLOCK : 0)), CMH_POOL_LARGE, 1};
            cmh_fstate_seg_add(st, &n);
        }
        if (whole) cmh_fstate_block_put(st, e, dev, e->size, CMH_BLOCK_ACTIVE_ALLOCATED);
        break;
    }
    case CMH_ACT_SEGMENT_UNMAP: {
        if (whole) block_del(st, e->addr);
        fseg *g = expandable_near(st, dev, e->addr, 0, 1);
        if (!g) break;
        uint64_t a = e->addr, b = e->addr + e->size, ga = g->addr, gb = g->addr + g->size;
        if (b > gb) b = gb;
        if (a == ga && b == gb) seg_kill(st, g);
        else if (a == ga) {
            seg_resize(st, g, gb - b);
            seg_move(st, g, b);
        } else if (b == gb) seg_resize(st, g, a - ga);
        else { /* from the middle: two pieces */
            fseg right = *g;
            right.addr = b;
            right.size = gb - b;
            seg_resize(st, g, a - ga);
            cmh_fstate_seg_add(st, &right);
        }
        break;
    }
    case CMH_ACT_ALLOC: cmh_fstate_block_put(st, e, dev, e->size, CMH_BLOCK_ACTIVE_ALLOCATED); break;
    case CMH_ACT_FREE_REQUESTED: {
        fblk *b = e->addr ? cmh_oa_find(&st->blocks, e->addr) : NULL;
        if (b && b->state == CMH_BLOCK_ACTIVE_ALLOCATED) alloc_add(st, b->device, 0, b->size);
        if (b) b->state = CMH_BLOCK_ACTIVE_PENDING_FREE;
        break;
    }
    case CMH_ACT_FREE_COMPLETED: block_del(st, e->addr); break;
    default: break;
    }
}

int cmh_fstate_compact(cmh_fstate *st)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < st->nsegs; i++)
        if (st->segs[i].alive) st->segs[k++] = st->segs[i];
    st->nsegs = k;
    st->dead = 0;
    cmh_oa_free(&st->by_addr);
    cmh_oa_init(&st->by_addr, sizeof(seg_slot));
    for (uint32_t i = 0; i < k; i++) {
        if (!st->segs[i].addr) continue;
        seg_slot *sl = cmh_oa_get(&st->by_addr, st->segs[i].addr, NULL);
        if (!sl) return st->nomem = 1, CMH_ENOMEM;
        sl->i = i;
    }
    return CMH_OK;
}

static int cmp_seg(const void *a, const void *b)
{
    const fseg *x = a, *y = b;
    if (x->device != y->device) return (uint32_t)x->device < (uint32_t)y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_blk(const void *a, const void *b)
{
    const fblk *x = a, *y = b;
    if (x->device != y->device) return (uint32_t)x->device < (uint32_t)y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int cmh_fstate_emit(const cmh_fstate *st, cmh_snapshot *s, uint32_t (*stack_of)(void *, uint32_t), void *arg, uint64_t *orphans)
{
    fseg *segs = malloc((st->nsegs ? st->nsegs : 1) * sizeof *segs);
    fblk *blks = malloc((st->blocks.n ? st->blocks.n : 1) * sizeof *blks);
    if (!segs || !blks) {
        free(segs);
        free(blks);
        return CMH_ENOMEM;
    }
    uint32_t ns = 0, nbk = 0;
    for (uint32_t i = 0; i < st->nsegs; i++)
        if (st->segs[i].alive) segs[ns++] = st->segs[i];
    for (uint32_t i = 0; i < st->blocks.cap; i++)
        if (cmh_oa_keyat(&st->blocks, i)) blks[nbk++] = *(const fblk *)cmh_oa_at(&st->blocks, i);
    qsort(segs, ns, sizeof *segs, cmp_seg);
    qsort(blks, nbk, sizeof *blks, cmp_blk);
    uint32_t b = 0;
    int rc = CMH_OK;
    for (uint32_t i = 0; i < ns && rc == CMH_OK; i++) {
        const fseg *g = &segs[i];
        while (b < nbk && cmp_blk(&blks[b], &(fblk){g->addr, 0, 0, 0, 0, g->device, 0}) < 0) b++, (*orphans)++;
        cmh_segment out = {g->device, g->kind, g->flags, g->pool, g->addr, g->size, g->stream, {g->pool_id[0], g->pool_id[1]},
                           stack_of ? stack_of(arg, g->stack) : g->stack, g->time_ns, 0, 0};
        rc = cmh_snapshot_add_segment(s, &out, NULL);
        for (; rc == CMH_OK && b < nbk && blks[b].device == g->device && blks[b].addr < g->addr + g->size; b++) {
            cmh_block bl = {blks[b].addr, blks[b].size, blks[b].requested, stack_of ? stack_of(arg, blks[b].stack) : blks[b].stack,
                            blks[b].state, blks[b].time_ns};
            rc = cmh_snapshot_add_block(s, &bl);
        }
    }
    *orphans += nbk - b;
    free(segs);
    free(blks);
    return rc;
}

/* Copy what a base snapshot holds besides its traces and final state, ids unchanged. */
int cmh_fstate_copy_dict(cmh_snapshot *s, const cmh_snapshot *b)
{
    for (uint32_t i = 1; i < b->strings.n; i++) {
        uint32_t id;
        if (cmh_strtab_intern(&s->strings, b->strings.str[i], strlen(b->strings.str[i]), &id)) return CMH_ENOMEM;
    }
    for (uint32_t i = 0; i < b->nmodules; i++)
        if (cmh_snapshot_add_module(s, &b->modules[i]) != CMH_OK) return CMH_ENOMEM;
    for (uint32_t i = 0; i < b->nframes; i++) {
        uint32_t id;
        if (cmh_snapshot_add_frame(s, &b->frames[i], &id) != CMH_OK) return CMH_ENOMEM;
    }
    for (uint32_t i = 1; i < b->nstacks; i++) {
        uint32_t id;
        if (cmh_snapshot_add_stack(s, b->stack_frames + b->stacks[i].first, b->stacks[i].count, &id) != CMH_OK) return CMH_ENOMEM;
    }
    for (uint32_t i = 0; i < b->nannotations; i++)
        if (cmh_snapshot_add_annotation(s, &b->annotations[i]) != CMH_OK) return CMH_ENOMEM;
    for (uint32_t i = 0; i < b->nsettings; i++)
        if (cmh_snapshot_add_setting(s, cmh_str(b, b->settings[i].key), cmh_str(b, b->settings[i].value), b->settings[i].type) != CMH_OK)
            return CMH_ENOMEM;
    for (uint32_t i = 0; i < b->nkernels; i++)
        if (cmh_snapshot_add_kernel(s, &b->kernels[i]) != CMH_OK) return CMH_ENOMEM;
    for (uint32_t i = 0; i < b->nmeminfo; i++) /* the journal's own samples follow */
        if (cmh_snapshot_add_meminfo(s, &b->meminfo[i]) != CMH_OK) return CMH_ENOMEM;
    for (uint32_t i = 0; i < b->nidents; i++) /* as the meminfo samples: said once, at the device's first allocation */
        if (cmh_snapshot_add_ident(s, &b->idents[i]) != CMH_OK) return CMH_ENOMEM;
    /* the threads' ids and names: the records that named them may be in the extents the
     * checkpoint let go (a thread named in the first generation is named nowhere else; left out,
     * its entries and blocks read as an anonymous thread's) */
    for (uint32_t i = 0; i < b->nthreads; i++) {
        cmh_thread_info t = b->threads[i];
        const char *name = cmh_str(b, t.name);
        if (cmh_strtab_intern(&s->strings, name, strlen(name), &t.name) || cmh_snapshot_add_thread(s, &t) != CMH_OK) return CMH_ENOMEM;
    }
    s->kernels_dropped = b->kernels_dropped;
    s->kernels_status = b->kernels_status;
    return CMH_OK;
}

int cmh_fstate_pc_frame(cmh_snapshot *s, uint64_t pc, uint32_t *id)
{
    cmh_frame f = {pc, 0, 0, 0, -1};
    for (uint32_t m = 0; m < s->nmodules; m++)
        if (pc - 1 >= s->modules[m].base && pc - 1 < s->modules[m].base + s->modules[m].size) {
            f.module = (int32_t)m;
            /* the module's basename, as the recorder's own dump names a frame (recorder/symbols.c):
             * one site is one name however its snapshot was made (`diff` matches them) */
            const char *p = cmh_str(s, s->modules[m].path), *sl = strrchr(p, '/');
            if (!sl) f.filename = s->modules[m].path;
            else if (cmh_strtab_intern(&s->strings, sl + 1, strlen(sl + 1), &f.filename)) return CMH_ENOMEM;
            break;
        }
    char name[40];
    snprintf(name, sizeof name, "0x%" PRIx64, f.module >= 0 ? pc - s->modules[f.module].base : pc);
    if (cmh_strtab_intern(&s->strings, name, strlen(name), &f.name) || cmh_snapshot_add_frame(s, &f, id)) return CMH_ENOMEM;
    return CMH_OK;
}

int cmh_fchildren_add(cmh_fchildren *k, const void *body, uint32_t len, uint64_t body_off)
{
    const cmh_fr_child *x = body;
    if (len < sizeof *x || x->path_len > len - sizeof *x || x->path_len > 4095) return CMH_EFORMAT;
    /* (one index is one fork: a record written again at a checkpoint says nothing new, and a
     * damaged file cannot make the list grow past what the writer keeps) */
    if (k->n >= 4 * CMH_FR_CHILDREN_KEPT + 64) return CMH_OK;
    if (CMH_GROW(k->v, k->cap, (uint64_t)k->n + 1, 16)) return CMH_ENOMEM;
    k->v[k->n++] = (cmh_fchild){x->index, x->path_len, x->pid, body_off + sizeof *x};
    return CMH_OK;
}

static int cmp_fchild(const void *a, const void *b)
{
    const cmh_fchild *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* in the order they were forked, each once, as the exit dump lists them (process.children, the
 * first CMH_FR_CHILDREN_KEPT; children_more the others) */
int cmh_fchildren_emit(cmh_fchildren *k, cmh_snapshot *s, const unsigned char *map, uint64_t len)
{
    if (!k->n) return CMH_OK;
    qsort(k->v, k->n, sizeof *k->v, cmp_fchild);
    uint64_t forks = (uint64_t)k->v[k->n - 1].index + 1, kept = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        const cmh_fchild *c = &k->v[i];
        if ((i && c->index == k->v[i - 1].index) || c->pid <= 0 || c->index >= CMH_FR_CHILDREN_KEPT) continue;
        char path[4096];
        int known = c->path_len && c->off <= len && c->path_len <= len - c->off;
        if (known) snprintf(path, sizeof path, "%.*s", (int)c->path_len, (const char *)map + c->off);
        if (cmh_snapshot_add_child(s, c->pid, known ? path : NULL) != CMH_OK) return CMH_ENOMEM;
        kept++;
    }
    s->children_more = forks - kept > UINT32_MAX ? UINT32_MAX : (uint32_t)(forks - kept);
    return CMH_OK;
}
