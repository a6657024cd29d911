/*
 * whatif_tree.h - the what-if model's blocks and segments, the index it finds free blocks in,
 * and its private pools (private to analyzer/: whatif.c is the allocator, whatif_tree.c the
 * index, whatif_pools.c which pool a request is of).  Split from whatif.c along the seams the
 * model has: the treap knows blocks only by their keys, the allocator never touches a tree's
 * links, and a pool is a pair of trees the allocator asks for by number.
 */
#ifndef CMH_WHATIF_TREE_H
#define CMH_WHATIF_TREE_H

#include <stdint.h>

#include "cumemhist/snapshot.h"

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

/* A private pool's cached blocks, apart: the allocator serves a request of a private pool only
 * from that pool's own segments, and a request of the default pool never from them
 * (CUDACachingAllocator's BlockPools of a PrivatePool). */
typedef struct wpriv {
    uint64_t id[2];
    btree freeb[2];
} wpriv;

typedef struct wfinal { /* a final segment of a private pool */
    uint64_t addr, size;
    uint32_t owner;
} wfinal;

/* The private pools of one replay, numbered from 1 (owner 0: the default pool) as first seen. */
typedef struct wpools {
    wpriv **privs; /* owner n at privs[n - 1] (pointers: the trees stay put) */
    uint32_t n, cap;
    cmh_oatab index;  /* a pool id's hash -> owner */
    uint32_t *by_num; /* the snapshot's pool number (cmh_snapshot_pool_number) -> owner, 0: not yet */
    wfinal *finals;   /* the device's final segments of private pools, by address */
    uint32_t nfinals;
    int nomem;
} wpools;

/* The device's final private segments, each pool numbered; 0, or -1 out of memory. */
int wp_init(wpools *p, const cmh_snapshot *s, int device);
void wp_free(wpools *p);
/* The owner of pool id (0 for (0, 0)), numbered on first sight (0 and p->nomem: out of memory). */
uint32_t wp_owner(wpools *p, const uint64_t id[2]);
/* The owner of the final private segment holding addr, 0 if none does. */
uint32_t wp_final(const wpools *p, uint64_t addr);
/* A request's pool: its entry's own pool_id (newer PyTorch says it of every entry, (0, 0) too),
 * else, from a source whose entries do not say, the final segment's at its address. */
uint32_t wp_request(wpools *p, const cmh_snapshot *s, const cmh_entry *e, uint64_t addr);

#endif
