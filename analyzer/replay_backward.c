/*
 * replay_backward.c - a replay's backward pass (replay.c says what each pass does): the state
 * before the trace's first entry, from which the forward pass starts, and on the way, per entry,
 * the true size of a block that survives to the end and the stack of a block whose entry carries
 * none.  The state found is kept while a memo is, for the next replays of the same device.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "memo.h"
#include "cumemhist/recorder.h"
#include "cumemhist/sites.h"
#include "replay_state.h"

/* ---- backward pass: the state before the first entry ---- */

static void hseg_put(cmh_replay *t, uint64_t addr, uint64_t size, uint8_t pool, int whole)
{
    int created;
    hslot *h = addr ? cmh_oa_get(&t->hseg, addr, &created) : NULL;
    if (addr && !h) t->nomem = 1;
    if (!h || !created) return;
    rseg *g = seg_new(t);
    if (!g) {
        cmh_oa_remove(&t->hseg, h);
        t->nomem = 1;
        return;
    }
    g->addr = addr;
    g->size = size;
    g->pool = pool;
    g->whole = (uint8_t)whole;
    g->gaps = size ? 1 : 0;
    h->g = g;
}

static void hseg_del(cmh_replay *t, uint64_t addr)
{
    hslot *h = addr ? cmh_oa_find(&t->hseg, addr) : NULL;
    if (!h) return;
    seg_release(t, h->g);
    cmh_oa_remove(&t->hseg, h);
}

static int cmp_rseg(const void *a, const void *b)
{
    const rseg *x = *(rseg *const *)a, *y = *(rseg *const *)b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The stack of a block the backward pass finds by its free (its allocation before the trace's
 * first entry): the free entry's, which is the allocation's where frees carry it (context
 * "alloc"), but the free's own line where the recorder captured frees' stacks (context "all"):
 * none then (the reports' "<no stack: ... allocated before recording>"), not the line that freed
 * it named as its allocation site (a --max-entries record named main's cuMemFree line). */
static uint32_t found_by_free_stack(const cmh_replay *t, const cmh_entry *e)
{
    return cmh_frees_carry_own_stacks(t->s) ? 0 : e->stack;
}

/* ---- the pieces of whole-block maps ----
 * A map unmapped in parts (the recorder keeps each remainder mapped, as the driver does) is, when
 * undone, as many blocks as parts, each at its part's address: undoing the map must take them
 * all, where the block at its own address was taken alone and the others were left as blocks
 * made before the trace (a 4 MiB map unmapped in two halves replayed 2 MiB live at the start). */

static uint32_t mapped_lower(const cmh_replay *t, uint64_t addr)
{
    uint32_t lo = 0, hi = t->nmapped;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (t->mapped[mid].a < addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void mapped_add(cmh_replay *t, uint64_t a, uint64_t b)
{
    uint32_t i = mapped_lower(t, a);
    if (i < t->nmapped && t->mapped[i].a == a) {
        t->mapped[i].b = b;
        return;
    }
    if (t->nmapped == t->capmapped) {
        uint32_t nc = t->capmapped ? t->capmapped * 2 : 16;
        range *nm = realloc(t->mapped, nc * sizeof *nm);
        if (!nm) {
            t->nomem = 1;
            return;
        }
        t->mapped = nm;
        t->capmapped = nc;
    }
    memmove(&t->mapped[i + 1], &t->mapped[i], (t->nmapped - i) * sizeof *t->mapped);
    t->mapped[i] = (range){a, b};
    t->nmapped++;
}

/* Undo a whole-block map [a, b): its blocks go (a surviving one gives the entry its stack). */
static void mapped_undo(cmh_replay *t, uint64_t a, uint64_t b, uint32_t *stack, int has_stack)
{
    uint32_t i = mapped_lower(t, a), k = i;
    for (; k < t->nmapped && t->mapped[k].a < b; k++) {
        rblock *x = block_find(t, t->mapped[k].a);
        if (!x) continue;
        if (x->final && stack && !has_stack && !*stack) *stack = x->stack;
        block_del(t, x);
    }
    if (k == i) return; /* (none: mapped may still be NULL, which memmove may not take) */
    memmove(&t->mapped[i], &t->mapped[k], (t->nmapped - k) * sizeof *t->mapped);
    t->nmapped -= k - i;
}

/* stack: where an entry that carries no stack of its own learns the one its block has at the end
 * (PyTorch's context "state", ours: only the live blocks keep their stacks) */
static void undo(cmh_replay *t, const cmh_entry *e, uint64_t *exact, uint32_t *stack)
{
    if (t->hashmode && (e->action == CMH_ACT_SEGMENT_ALLOC || e->action == CMH_ACT_SEGMENT_FREE)) {
        int whole = (e->flags & CMH_EF_WHOLE_BLOCK) != 0;
        rblock *b;
        if (e->action == CMH_ACT_SEGMENT_ALLOC) {
            if (whole && (b = block_find(t, cmh_entry_addr(t->s, e)))) {
                if (b->final && stack && !e->stack) *stack = b->stack;
                block_del(t, b);
            }
            hseg_del(t, cmh_entry_addr(t->s, e));
        } else {
            hseg_put(t, cmh_entry_addr(t->s, e), cmh_entry_size(t->s, e), pool_rule(cmh_entry_size(t->s, e), whole), whole);
            if (whole && !block_find(t, cmh_entry_addr(t->s, e)) && (b = block_put(t, cmh_entry_addr(t->s, e)))) {
                b->size = cmh_entry_size(t->s, e);
                b->requested = cmh_entry_requested(t->s, e);
                b->state = CMH_BLOCK_ACTIVE_ALLOCATED;
                b->stack = found_by_free_stack(t, e);
            }
        }
        return;
    }
    int whole = (e->flags & CMH_EF_WHOLE_BLOCK) != 0;
    rblock *b;
    switch (e->action) {
    case CMH_ACT_ALLOC:
        if ((b = block_find(t, cmh_entry_addr(t->s, e)))) {
            if (b->final && exact) *exact = b->size; /* a block that survives: its true size */
            if (b->final && stack && !e->stack) *stack = b->stack;
            block_del(t, b);
        }
        break;
    case CMH_ACT_FREE_REQUESTED:
        if ((b = block_find(t, cmh_entry_addr(t->s, e)))) b->state = CMH_BLOCK_ACTIVE_ALLOCATED;
        else if ((b = block_put(t, cmh_entry_addr(t->s, e)))) {
            b->size = t->pytorch || (e->flags & CMH_EF_PYTORCH) ? cmh_pt_round(&t->rules, cmh_entry_size(t->s, e)) : cmh_entry_size(t->s, e);
            b->requested = cmh_entry_requested(t->s, e);
            b->state = CMH_BLOCK_ACTIVE_ALLOCATED;
            b->stack = found_by_free_stack(t, e);
        }
        break;
    case CMH_ACT_FREE_COMPLETED:
        if (!block_find(t, cmh_entry_addr(t->s, e)) && (b = block_put(t, cmh_entry_addr(t->s, e)))) {
            b->size = t->pytorch || (e->flags & CMH_EF_PYTORCH) ? cmh_pt_round(&t->rules, cmh_entry_size(t->s, e)) : cmh_entry_size(t->s, e);
            b->requested = cmh_entry_requested(t->s, e);
            b->state = CMH_BLOCK_ACTIVE_ALLOCATED;
            b->stack = found_by_free_stack(t, e);
        }
        break;
    case CMH_ACT_SEGMENT_ALLOC:
    case CMH_ACT_SEGMENT_MAP: {
        if (whole && (b = block_find(t, cmh_entry_addr(t->s, e)))) {
            if (b->final && stack && !e->stack) *stack = b->stack;
            block_del(t, b);
        }
        if (whole && e->action == CMH_ACT_SEGMENT_MAP)
            mapped_undo(t, cmh_entry_addr(t->s, e), cmh_entry_addr(t->s, e) + cmh_entry_size(t->s, e), stack, e->stack != 0);
        cmh_rp_segment_free_at(t, cmh_entry_addr(t->s, e), cmh_entry_size(t->s, e), 0); /* cut the range out of whatever segment holds it */
        break;
    }
    case CMH_ACT_SEGMENT_FREE:
    case CMH_ACT_SEGMENT_UNMAP:
        if (seg_containing(t, cmh_entry_addr(t->s, e))) {
        } else if (e->action == CMH_ACT_SEGMENT_UNMAP) cmh_rp_seg_map(t, cmh_entry_addr(t->s, e), cmh_entry_size(t->s, e), pool_rule(cmh_entry_size(t->s, e), 0));
        else cmh_rp_seg_insert(t, cmh_entry_addr(t->s, e), cmh_entry_size(t->s, e), pool_rule(cmh_entry_size(t->s, e), whole), 0, whole);
        if (whole && !block_find(t, cmh_entry_addr(t->s, e)) && (b = block_put(t, cmh_entry_addr(t->s, e)))) {
            b->size = cmh_entry_size(t->s, e);
            b->requested = cmh_entry_requested(t->s, e);
            b->state = CMH_BLOCK_ACTIVE_ALLOCATED;
            b->stack = found_by_free_stack(t, e);
            if (e->action == CMH_ACT_SEGMENT_UNMAP)
                mapped_add(t, cmh_entry_addr(t->s, e), cmh_entry_addr(t->s, e) + cmh_entry_size(t->s, e));
        }
        break;
    default: break;
    }
}

/* ---- the state before the first entry, kept while a memo is (reports.h) ----
 * Every replay of one device's trace starts from the same state, which the backward pass
 * finds: as much work as the forward pass.  While the memo is kept for s, the first replay of
 * each device keeps that state, and the next ones start from a copy of it. */
static pthread_mutex_t g_pre_lock = PTHREAD_MUTEX_INITIALIZER;
static const cmh_snapshot *g_pre_s;
static pre_state *g_pre;
static uint32_t g_npre;

/* Its arrays freed, and emptied (so it can be freed again, or filled by cmh_rp_backward()). */
void cmh_rp_pre_free(pre_state *p)
{
    free(p->exact);
    free(p->final_stack);
    free(p->segs);
    free(p->blocks);
    memset(p, 0, sizeof *p);
}

void cmh_replay_memo_keep(const cmh_snapshot *s)
{
    pthread_mutex_lock(&g_pre_lock);
    for (uint32_t i = 0; i < g_npre; i++) cmh_rp_pre_free(&g_pre[i]);
    free(g_pre);
    g_pre = NULL;
    g_npre = 0;
    g_pre_s = s;
    pthread_mutex_unlock(&g_pre_lock);
}

static void *dup_mem(const void *p, size_t n)
{
    if (!p || !n) return NULL;
    void *q = malloc(n);
    if (q) memcpy(q, p, n);
    return q;
}

/* A copy of the kept state of (s, device) into *out (1), else 0 (none kept, or out of memory). */
int cmh_rp_pre_get(const cmh_snapshot *s, int device, pre_state *out)
{
    int got = 0;
    pthread_mutex_lock(&g_pre_lock);
    for (uint32_t i = 0; g_pre_s == s && i < g_npre && !got; i++) {
        const pre_state *p = &g_pre[i];
        if (p->device != device) continue;
        *out = *p;
        out->exact = dup_mem(p->exact, p->n * sizeof *p->exact);
        out->final_stack = dup_mem(p->final_stack, p->n * sizeof *p->final_stack);
        out->segs = dup_mem(p->segs, p->nsegs * sizeof *p->segs);
        out->blocks = dup_mem(p->blocks, p->nblocks * sizeof *p->blocks);
        got = (!p->exact || out->exact) && (!p->final_stack || out->final_stack) && (!p->nsegs || out->segs) &&
              (!p->nblocks || out->blocks);
        if (!got) cmh_rp_pre_free(out);
    }
    pthread_mutex_unlock(&g_pre_lock);
    return got;
}

void cmh_rp_pre_put(const cmh_snapshot *s, const pre_state *p)
{
    pthread_mutex_lock(&g_pre_lock);
    int have = g_pre_s != s;
    for (uint32_t i = 0; !have && i < g_npre; i++) have = g_pre[i].device == p->device;
    pre_state *np = have ? NULL : realloc(g_pre, (g_npre + 1) * sizeof *np);
    if (np) {
        g_pre = np;
        pre_state c = *p;
        c.exact = dup_mem(p->exact, p->n * sizeof *p->exact);
        c.final_stack = dup_mem(p->final_stack, p->n * sizeof *p->final_stack);
        c.segs = dup_mem(p->segs, p->nsegs * sizeof *p->segs);
        c.blocks = dup_mem(p->blocks, p->nblocks * sizeof *p->blocks);
        if ((!p->exact || c.exact) && (!p->final_stack || c.final_stack) && (!p->nsegs || c.segs) && (!p->nblocks || c.blocks))
            g_pre[g_npre++] = c;
        else cmh_rp_pre_free(&c);
    }
    pthread_mutex_unlock(&g_pre_lock);
}

/* The backward pass: the state before the trace's first entry, into pre (its arrays owned). */
int cmh_rp_backward(cmh_replay *r, const cmh_snapshot *s, int device, pre_state *pre)
{
    /* final state */
    cmh_replay b;
    memset(&b, 0, sizeof b);
    cmh_oa_init(&b.blocks, sizeof(rblock));
    cmh_oa_init(&b.hseg, sizeof(hslot));
    b.s = s; /* the entries' rarer fields are read against it */
    b.pytorch = r->pytorch;
    b.rules = r->rules;
    /* Without maps and unmaps every segment is undone at its exact address: a hash does it, and
     * the survivors are sorted once at the end. */
    int hashmode = 1;
    for (uint32_t i = 0; i < r->n && hashmode; i++)
        hashmode = r->e[i].action != CMH_ACT_SEGMENT_MAP && r->e[i].action != CMH_ACT_SEGMENT_UNMAP;
    for (uint32_t i = 0; i < s->nsegments && hashmode; i++)
        hashmode = s->segments[i].device != device || !(s->segments[i].flags & CMH_SEG_EXPANDABLE);
    b.hashmode = hashmode;
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->device != device) continue;
        uint8_t pool = (uint8_t)cmh_segment_pool(g);
        if (hashmode) hseg_put(&b, g->addr, g->size, pool, (g->flags & CMH_SEG_WHOLE_BLOCK) != 0);
        else if (!cmh_rp_seg_insert(&b, g->addr, g->size, pool, (g->flags & CMH_SEG_EXPANDABLE) != 0,
                             (g->flags & CMH_SEG_WHOLE_BLOCK) != 0))
            goto oom;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *bl = &s->blocks[g->first_block + k];
            if (bl->state == CMH_BLOCK_INACTIVE) continue;
            rblock *x = block_put(&b, bl->addr);
            if (!x) goto oom;
            x->size = bl->size;
            x->requested = bl->requested;
            x->state = bl->state;
            x->stack = bl->stack ? bl->stack : g->stack;
            x->time_ns = bl->time_ns;
            x->final = 1;
            if (!hashmode && (g->flags & CMH_SEG_EXPANDABLE) && (g->flags & CMH_SEG_WHOLE_BLOCK)) mapped_add(&b, bl->addr, bl->addr + bl->size);
        }
    }
    int some_pytorch = r->pytorch;
    for (uint32_t i = 0; i < r->n && !some_pytorch; i++) some_pytorch = (r->e[i].flags & CMH_EF_PYTORCH) != 0;
    if (some_pytorch && r->n && !(r->exact = calloc(r->n, sizeof *r->exact))) goto oom;
    /* entries without stacks whose blocks have one at the end (context "state") */
    int stackless = 0, final_stacks = 0;
    for (uint32_t i = 0; i < r->n && !stackless; i++)
        stackless = !r->e[i].stack && (r->e[i].action == CMH_ACT_ALLOC || r->e[i].action == CMH_ACT_SEGMENT_ALLOC ||
                                       r->e[i].action == CMH_ACT_SEGMENT_MAP);
    for (uint32_t i = 0; i < s->nsegments && stackless && !final_stacks; i++)
        for (uint32_t k = 0; k < s->segments[i].nblocks && !final_stacks; k++)
            final_stacks = s->segments[i].device == device && s->blocks[s->segments[i].first_block + k].stack;
    if (stackless && final_stacks && !(r->final_stack = calloc(r->n, sizeof *r->final_stack))) goto oom;
    for (int64_t i = (int64_t)r->n - 1; i >= 0; i--) {
        undo(&b, &r->e[i], r->exact ? &r->exact[i] : NULL, r->final_stack ? &r->final_stack[i] : NULL);
        maybe_compact(&b);
    }
    if (b.nomem) goto oom;
    if (hashmode) { /* the survivors, in address order */
        rseg **all = malloc((b.hseg.n ? b.hseg.n : 1) * sizeof *all);
        if (!all) goto oom;
        uint32_t k = 0;
        for (uint32_t i = 0; i < b.hseg.cap; i++)
            if (cmh_oa_keyat(&b.hseg, i)) all[k++] = ((hslot *)cmh_oa_at(&b.hseg, i))->g;
        qsort(all, k, sizeof *all, cmp_rseg);
        free(b.segs);
        free(b.saddr);
        b.segs = all;
        b.saddr = NULL;
        b.nsegs = b.capsegs = k;
        cmh_oa_free(&b.hseg);
        b.hashmode = 0;
    }
    /* the state, as lists */
    pre->device = device;
    pre->n = r->n;
    pre->exact = r->exact;
    pre->final_stack = r->final_stack;
    r->exact = NULL;
    r->final_stack = NULL;
    if (b.nsegs && !(pre->segs = malloc(b.nsegs * sizeof *pre->segs))) goto oom;
    for (uint32_t i = 0; i < b.nsegs; i++) {
        rseg *g = b.segs[i];
        if (g) pre->segs[pre->nsegs++] = (pre_seg){g->addr, g->size, g->pool, g->expandable, g->whole};
    }
    if (b.blocks.n && !(pre->blocks = malloc(b.blocks.n * sizeof *pre->blocks))) goto oom;
    for (uint32_t i = 0; i < b.blocks.cap; i++)
        if (cmh_oa_keyat(&b.blocks, i)) pre->blocks[pre->nblocks++] = *(const rblock *)cmh_oa_at(&b.blocks, i);
    cmh_rp_free_tables(&b);
    return CMH_OK;
oom:
    cmh_rp_free_tables(&b);
    return CMH_ENOMEM;
}
