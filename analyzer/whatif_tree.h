/*
 * whatif_tree.h - the what-if model's blocks and segments, and the index it finds free blocks
 * in (private to analyzer/: whatif.c is the allocator, whatif_tree.c the index).  Split from
 * whatif.c along the one seam the model has: the treap knows blocks only by their keys, the
 * allocator never touches a tree's links.
 */
#ifndef CMH_WHATIF_TREE_H
#define CMH_WHATIF_TREE_H

#include <stdint.h>

typedef struct wseg wseg;
typedef struct wblk {
    uint64_t addr, size;
    int64_t stream;
    wseg *seg;
    struct wblk *prev, *next; /* address order in the segment */
    struct wblk *tl, *tr, *tp; /* in the free or the unmapped index (a treap): left, right, parent */
    const struct btree *in;    /* ... which of them, NULL: neither */
    uint32_t prio;             /* the treap's heap key */
    uint8_t allocated, mapped, pool;
    uint64_t freed_at; /* the request count when it became free (its age, for the GC) */
} wblk;

struct wseg {
    uint64_t addr, size; /* size: the virtual range for an expandable one */
    int64_t stream;
    uint8_t pool, expandable;
    uint32_t owner;     /* 0: the default pool; else the private pool (a CUDA graph's, a MemPool's) it serves, from 1 */
    struct wblk *first; /* its lowest block */
};

typedef int (*bcmp_fn)(const wblk *, int64_t, uint64_t, uint64_t);

/* Blocks in key order (bcmp_fn), each operation O(log n) expected: a treap whose nodes are the
 * blocks themselves.  It was a sorted array, whose insert and delete move O(free blocks) each:
 * whatif was superlinear over long traces with many free blocks (issue 29). */
typedef struct btree {
    wblk *root;
    uint32_t n;
    bcmp_fn f;
} btree;

/* the keys: (stream, size, address) for free blocks, (stream, address) for unmapped ranges */
int wt_cmp_size(const wblk *a, int64_t stream, uint64_t size, uint64_t addr);
int wt_cmp_addr(const wblk *a, int64_t stream, uint64_t size, uint64_t addr);
/* the first block not below the key, NULL if none */
wblk *wt_lower(const btree *t, int64_t stream, uint64_t size, uint64_t addr);
wblk *wt_first(const btree *t);
wblk *wt_last(const btree *t);
wblk *wt_next(const wblk *x);
wblk *wt_prev(const wblk *x);
/* b into t (never twice: a block in an index stays where it is); *rng: the priorities' xorshift
 * state (the shape never changes a result) */
void wt_put(uint32_t *rng, btree *t, wblk *b);
/* b out of t (nothing when it is not in t) */
void wt_take(btree *t, wblk *b);

#endif
