/*
 * livetab.c - what is alive now, keyed by address: the recorder's segments (history.c) and the
 * blocks an allocator reports (blocks.c) each keep one of these.
 *
 * 64 shards chosen by the address's hash, each an open-addressing table (snapshot/oatab.h)
 * under its own lock, so threads allocating at once rarely meet.  A lock is held only for the
 * table operation itself: never across a driver call, a stack capture or a callback.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oatab.h"

#define NSHARD 64

typedef struct shard {
    cmh_mutex lock;
    cmh_oatab t; /* of cmh_live */
} shard;

struct cmh_livetab {
    shard sh[NSHARD];
};

_Static_assert(offsetof(cmh_live, addr) == 0, "oatab.h keys a record by its first 8 bytes");

/* one multiply picks the shard (the table mixes the key again inside it) */
static inline shard *shard_of(cmh_livetab *t, uint64_t addr) { return &t->sh[((addr >> 8) * 0x9E3779B97F4A7C15ull) >> 58]; }

cmh_livetab *cmh_live_new(void)
{
    cmh_livetab *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    for (int i = 0; i < NSHARD; i++) {
        cmh_mutex_init(&t->sh[i].lock);
        cmh_oa_init(&t->sh[i].t, sizeof(cmh_live));
    }
    return t;
}

int cmh_live_insert(cmh_livetab *t, const cmh_live *l)
{
    shard *s = shard_of(t, l->addr);
    cmh_lock(&s->lock);
    void *slot = cmh_oa_put(&s->t, l);
    cmh_unlock(&s->lock);
    return slot ? 0 : -1;
}

int cmh_live_remove(cmh_livetab *t, uint64_t addr, cmh_live *out)
{
    if (!addr) return 0;
    shard *s = shard_of(t, addr);
    cmh_lock(&s->lock);
    uint32_t j = cmh_oa_index(&s->t, addr);
    if (j != UINT32_MAX) {
        *out = *(const cmh_live *)cmh_oa_at(&s->t, j);
        cmh_oa_remove_at(&s->t, j);
    }
    cmh_unlock(&s->lock);
    return j != UINT32_MAX;
}

int cmh_live_update(cmh_livetab *t, uint64_t addr, int (*fn)(cmh_live *, void *), void *arg, cmh_live *copy)
{
    if (!addr) return 0;
    shard *s = shard_of(t, addr);
    int found = 0;
    cmh_lock(&s->lock);
    cmh_live *slot = cmh_oa_find(&s->t, addr);
    if (slot) {
        found = fn(slot, arg) ? 1 : 2;
        if (copy) *copy = *slot;
    }
    cmh_unlock(&s->lock);
    return found;
}

uint64_t cmh_live_remove_if(cmh_livetab *t, int (*pred)(const cmh_live *, void *), void (*gone)(const cmh_live *),
                            void *arg)
{
    uint64_t total = 0;
    cmh_live hit[64];
    for (int si = 0; si < NSHARD; si++) {
        shard *s = &t->sh[si];
        for (;;) {
            int n = 0;
            cmh_lock(&s->lock);
            for (uint32_t j = 0; j < s->t.cap && n < 64;) {
                cmh_live *l = cmh_oa_at(&s->t, j);
                if (l->addr && pred(l, arg)) {
                    hit[n++] = *l;
                    cmh_oa_remove_at(&s->t, j); /* may pull a later record into j: look at j again */
                    continue;
                }
                j++;
            }
            cmh_unlock(&s->lock);
            for (int i = 0; i < n; i++) gone(&hit[i]);
            total += (uint64_t)n;
            if (n < 64) break;
        }
    }
    return total;
}

static int cmp_live(const void *a, const void *b)
{
    const cmh_live *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int cmh_live_collect(cmh_livetab *t, cmh_live **out, size_t *count)
{
    size_t n = 0, cap = 0;
    cmh_live *all = NULL;
    for (int si = 0; si < NSHARD; si++) {
        shard *s = &t->sh[si];
        cmh_lock(&s->lock);
        if (n + s->t.n > cap) {
            size_t nc = (n + s->t.n) * 2 + 16;
            cmh_live *na = realloc(all, nc * sizeof *na);
            if (!na) {
                cmh_unlock(&s->lock);
                free(all);
                return CMH_ENOMEM;
            }
            all = na;
            cap = nc;
        }
        for (uint32_t j = 0; j < s->t.cap; j++) {
            const cmh_live *l = cmh_oa_at(&s->t, j);
            if (l->addr) all[n++] = *l;
        }
        cmh_unlock(&s->lock);
    }
    if (n) qsort(all, n, sizeof *all, cmp_live);
    *out = all;
    *count = n;
    return CMH_OK;
}

void cmh_live_lock_all(cmh_livetab *t)
{
    for (int i = 0; i < NSHARD; i++) cmh_lock(&t->sh[i].lock);
}

void cmh_live_unlock_all(cmh_livetab *t)
{
    for (int i = NSHARD - 1; i >= 0; i--) cmh_unlock(&t->sh[i].lock);
}

void cmh_live_reset(cmh_livetab *t)
{
    for (int i = 0; i < NSHARD; i++) {
        cmh_mutex_init(&t->sh[i].lock);
        cmh_oa_free(&t->sh[i].t);
    }
}
