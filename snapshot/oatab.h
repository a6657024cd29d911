/*
 * oatab.h - the one open-addressing hash table of the tree.
 *
 * The recorder's live tables, the replay's blocks, the symbolizer's PC cache, the reports' site
 * maps and the interning of strings and stacks all need the same thing: records looked up by a
 * 64-bit key, inserted and removed at random, fast.  This is it, written once.
 *
 * A table holds records of `esize` bytes whose first 8 bytes are the key.  Key 0 marks an empty
 * slot: a caller whose keys may be 0 stores key + 1, and a table keyed by a content hash forces
 * the hash non-zero (cmh_oa_hashkey).  Linear probing over a power-of-two capacity kept at most
 * half full; removal shifts the later records of the chain back (Knuth's algorithm R), so there
 * are no tombstones and lookups never slow down with churn.
 *
 * Several records may share a key when the key is a hash of their content (strings, stacks):
 * cmh_oa_next walks the records with one key, and cmh_oa_add adds one more.  Every pointer to a
 * record is invalidated by the next insertion (the table may grow) and by any removal (records
 * move back).  No locking: the caller owns the table.
 */
#ifndef CMH_OATAB_H
#define CMH_OATAB_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/snapshot.h" /* the cmh_oatab type, which the public model embeds */

/* A table for records of esize bytes (at least 8); no memory until the first insertion. */
static inline void cmh_oa_init(cmh_oatab *t, uint32_t esize)
{
    t->slots = NULL;
    t->cap = t->n = 0;
    t->esize = esize;
}

static inline void cmh_oa_free(cmh_oatab *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
}

/* murmur3's finalizer: every key bit reaches the low bits the index is taken from */
static inline uint64_t cmh_oa_mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

/* A content hash usable as a key: never 0. */
static inline uint64_t cmh_oa_hashkey(uint64_t h) { return h ? h : 1; }

static inline void *cmh_oa_at(const cmh_oatab *t, uint32_t i) { return t->slots + (size_t)i * t->esize; }

static inline uint64_t cmh_oa_keyat(const cmh_oatab *t, uint32_t i)
{
    uint64_t k;
    memcpy(&k, cmh_oa_at(t, i), sizeof k);
    return k;
}

/* Fibonacci hashing: the top bits of key * 2^64/phi, as many as the capacity needs (one multiply,
 * and every key bit reaches them) */
static inline uint32_t cmh_oa_home(const cmh_oatab *t, uint64_t key)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctz(t->cap)));
}

/* Room for at least `want` records without growing; 0, or -1 out of memory (table unchanged). */
static inline int cmh_oa_reserve(cmh_oatab *t, uint32_t want)
{
    if ((uint64_t)want * 2 <= t->cap) return 0;
    uint64_t nc = t->cap ? t->cap : 16;
    while (nc < (uint64_t)want * 2) nc *= 2;
    if (nc > (1u << 31)) return -1;
    unsigned char *ns = calloc((size_t)nc, t->esize);
    if (!ns) return -1;
    cmh_oatab old = *t;
    t->slots = ns;
    t->cap = (uint32_t)nc;
    for (uint32_t i = 0; i < old.cap; i++) {
        uint64_t k = cmh_oa_keyat(&old, i);
        if (!k) continue;
        uint32_t j = cmh_oa_home(t, k);
        while (cmh_oa_keyat(t, j)) j = (j + 1) & (t->cap - 1);
        memcpy(cmh_oa_at(t, j), cmh_oa_at(&old, i), t->esize);
    }
    free(old.slots);
    return 0;
}

/* The first record with this key (or, with *pos from an earlier call, the next one); NULL when
 * there is none.  Start with *pos = UINT32_MAX. */
static inline void *cmh_oa_next(const cmh_oatab *t, uint64_t key, uint32_t *pos)
{
    if (!t->cap) return NULL;
    uint32_t j = *pos == UINT32_MAX ? cmh_oa_home(t, key) : (*pos + 1) & (t->cap - 1);
    for (uint64_t k; (k = cmh_oa_keyat(t, j)); j = (j + 1) & (t->cap - 1))
        if (k == key) {
            *pos = j;
            return cmh_oa_at(t, j);
        }
    return NULL;
}

static inline void *cmh_oa_find(const cmh_oatab *t, uint64_t key)
{
    uint32_t pos = UINT32_MAX;
    return cmh_oa_next(t, key, &pos);
}

/* A new record with this key (even if others have it), zeroed but for the key; NULL when out of
 * memory. */
static inline void *cmh_oa_add(cmh_oatab *t, uint64_t key)
{
    if (cmh_oa_reserve(t, t->n + 1) != 0) return NULL;
    uint32_t j = cmh_oa_home(t, key);
    while (cmh_oa_keyat(t, j)) j = (j + 1) & (t->cap - 1);
    void *r = cmh_oa_at(t, j);
    memset(r, 0, t->esize);
    memcpy(r, &key, sizeof key);
    t->n++;
    return r;
}

/* The record with this key, created (zeroed but for the key) if absent; *created says which.
 * NULL when out of memory.  One probe: the chain is walked once, to the key or to the hole that
 * takes it. */
static inline void *cmh_oa_get(cmh_oatab *t, uint64_t key, int *created)
{
    if ((uint64_t)(t->n + 1) * 2 > t->cap && cmh_oa_reserve(t, t->n + 1) != 0) return NULL;
    uint32_t m = t->cap - 1, j = cmh_oa_home(t, key);
    for (uint64_t k; (k = cmh_oa_keyat(t, j)); j = (j + 1) & m)
        if (k == key) {
            if (created) *created = 0;
            return cmh_oa_at(t, j);
        }
    void *r = cmh_oa_at(t, j);
    memset(r, 0, t->esize);
    memcpy(r, &key, sizeof key);
    t->n++;
    if (created) *created = 1;
    return r;
}

/* Store rec (esize bytes, its key first) in place of the record with its key, or as a new one;
 * NULL when out of memory. */
static inline void *cmh_oa_put(cmh_oatab *t, const void *rec)
{
    uint64_t key;
    memcpy(&key, rec, sizeof key);
    if ((uint64_t)(t->n + 1) * 2 > t->cap && cmh_oa_reserve(t, t->n + 1) != 0) return NULL;
    uint32_t m = t->cap - 1, j = cmh_oa_home(t, key);
    uint64_t k;
    while ((k = cmh_oa_keyat(t, j)) && k != key) j = (j + 1) & m;
    if (!k) t->n++;
    void *r = cmh_oa_at(t, j);
    memcpy(r, rec, t->esize);
    return r;
}

/* The index of the record with this key, UINT32_MAX when absent (for cmh_oa_remove_at). */
static inline uint32_t cmh_oa_index(const cmh_oatab *t, uint64_t key)
{
    if (!t->cap) return UINT32_MAX;
    uint32_t m = t->cap - 1;
    for (uint32_t j = cmh_oa_home(t, key);; j = (j + 1) & m) {
        uint64_t k = cmh_oa_keyat(t, j);
        if (k == key) return j;
        if (!k) return UINT32_MAX;
    }
}

/* Remove the record at index j. */
static inline void cmh_oa_remove_at(cmh_oatab *t, uint32_t j)
{
    uint32_t m = t->cap - 1;
    memset(cmh_oa_at(t, j), 0, 8);
    t->n--;
    for (uint32_t k = (j + 1) & m;; k = (k + 1) & m) {
        uint64_t key = cmh_oa_keyat(t, k);
        if (!key) break;
        uint32_t home = cmh_oa_home(t, key);
        if (((k - home) & m) >= ((k - j) & m)) { /* the record at k may move back to the hole */
            memcpy(cmh_oa_at(t, j), cmh_oa_at(t, k), t->esize);
            memset(cmh_oa_at(t, k), 0, 8);
            j = k;
        }
    }
}

/* Remove the record at r (from cmh_oa_find / _next / _get). */
static inline void cmh_oa_remove(cmh_oatab *t, void *r)
{
    cmh_oa_remove_at(t, (uint32_t)(((unsigned char *)r - t->slots) / t->esize));
}

/* Iterate: for (uint32_t i = 0; i < t->cap; i++) if (cmh_oa_keyat(t, i)) ... cmh_oa_at(t, i) */

#endif
