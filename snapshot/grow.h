/*
 * grow.h - the one way an array of ours grows: doubling, capacities in uint32_t, and a refusal
 * (never a wrapped size) when the count would not fit.  Internal to the library.
 */
#ifndef CMH_GROW_H
#define CMH_GROW_H

#include <stdint.h>
#include <stdlib.h>

/* Make room for `need` elements of `elem` bytes in *arr (capacity *cap, first growth to
 * `first`).  0 when there is room; -1, with *arr and *cap untouched, when memory ran out. */
static inline int cmh_grow(void **arr, uint32_t *cap, uint64_t need, size_t elem, uint32_t first)
{
    if (need <= *cap) return 0;
    uint64_t nc = *cap ? *cap : first;
    while (nc < need) nc *= 2;
    if (nc > UINT32_MAX || nc > SIZE_MAX / elem) return -1;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = (uint32_t)nc;
    return 0;
}

/* CMH_GROW(v, cap, need): the same for a typed pointer `v`. */
#define CMH_GROW(v, cap, need, first) cmh_grow((void **)&(v), &(cap), (need), sizeof *(v), (first))

#endif
