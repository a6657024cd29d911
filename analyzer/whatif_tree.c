/*
 * whatif_tree.c - the what-if model's index of blocks (whatif_tree.h): a treap whose nodes are
 * the blocks themselves, ordered by a key function, each operation O(log n) expected.
 */
#include <stddef.h>

#include "whatif_tree.h"

int wt_cmp_size(const wblk *a, int64_t stream, uint64_t size, uint64_t addr)
{
    if (a->stream != stream) return a->stream < stream ? -1 : 1;
    if (a->size != size) return a->size < size ? -1 : 1;
    return (a->addr > addr) - (a->addr < addr);
}

int wt_cmp_addr(const wblk *a, int64_t stream, uint64_t size, uint64_t addr)
{
    (void)size;
    if (a->stream != stream) return a->stream < stream ? -1 : 1;
    return (a->addr > addr) - (a->addr < addr);
}

wblk *wt_lower(const btree *t, int64_t stream, uint64_t size, uint64_t addr)
{
    wblk *x = t->root, *r = NULL;
    while (x) {
        if (t->f(x, stream, size, addr) < 0) x = x->tr;
        else r = x, x = x->tl;
    }
    return r;
}

wblk *wt_first(const btree *t)
{
    wblk *x = t->root;
    while (x && x->tl) x = x->tl;
    return x;
}

wblk *wt_last(const btree *t)
{
    wblk *x = t->root;
    while (x && x->tr) x = x->tr;
    return x;
}

wblk *wt_next(const wblk *x)
{
    if (x->tr) {
        x = x->tr;
        while (x->tl) x = x->tl;
        return (wblk *)x;
    }
    while (x->tp && x->tp->tr == x) x = x->tp;
    return x->tp;
}

wblk *wt_prev(const wblk *x)
{
    if (x->tl) {
        x = x->tl;
        while (x->tr) x = x->tr;
        return (wblk *)x;
    }
    while (x->tp && x->tp->tl == x) x = x->tp;
    return x->tp;
}

/* x one level up, over its parent, keeping the order */
static void rot_up(btree *t, wblk *x)
{
    wblk *p = x->tp, *g = p->tp;
    if (p->tl == x) {
        p->tl = x->tr;
        if (x->tr) x->tr->tp = p;
        x->tr = p;
    } else {
        p->tr = x->tl;
        if (x->tl) x->tl->tp = p;
        x->tl = p;
    }
    p->tp = x;
    x->tp = g;
    if (!g) t->root = x;
    else if (g->tl == p) g->tl = x;
    else g->tr = x;
}

void wt_put(uint32_t *rng, btree *t, wblk *b)
{
    if (b->in) return; /* in an index already: never twice */
    *rng ^= *rng << 13, *rng ^= *rng >> 17, *rng ^= *rng << 5;
    b->prio = *rng;
    b->tl = b->tr = NULL;
    wblk *x = t->root, *p = NULL;
    int right = 0;
    while (x) {
        p = x;
        right = t->f(x, b->stream, b->size, b->addr) < 0;
        x = right ? x->tr : x->tl;
    }
    b->tp = p;
    if (!p) t->root = b;
    else if (right) p->tr = b;
    else p->tl = b;
    while (b->tp && b->tp->prio < b->prio) rot_up(t, b);
    b->in = t;
    t->n++;
}

void wt_take(btree *t, wblk *b)
{
    if (b->in != t) return; /* not in it: nothing to take */
    while (b->tl || b->tr) /* down to a leaf, the children keeping the heap order */
        rot_up(t, !b->tl ? b->tr : !b->tr ? b->tl : b->tl->prio > b->tr->prio ? b->tl : b->tr);
    if (!b->tp) t->root = NULL;
    else if (b->tp->tl == b) b->tp->tl = NULL;
    else b->tp->tr = NULL;
    b->tp = NULL;
    b->in = NULL;
    t->n--;
}
