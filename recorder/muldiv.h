/*
 * muldiv.h - x * n / d for a tick-to-time mapping (history.c, cmh_ticks_to_ns), exact.
 */
#ifndef CMH_MULDIV_H
#define CMH_MULDIV_H
#include <stdint.h>

#if defined(__x86_64__) && defined(__SIZEOF_INT128__)
/* x * n / d, truncated toward zero, for d > 0: the figure of the 128-bit division, with one
 * 64-bit divide where the quotient fits it (always, for the times of a record: |x| is about d
 * and n), where the 128-bit division is a library call (__divti3) that a dump made for each of
 * its millions of entries.  tests/test_muldiv.c holds it to the 128-bit division. */
static inline int64_t cmh_muldiv(int64_t x, int64_t n, int64_t d)
{
    if (n >= 0 && x != INT64_MIN) {
        uint64_t ax = x < 0 ? -(uint64_t)x : (uint64_t)x;
        unsigned __int128 p = (unsigned __int128)ax * (uint64_t)n;
        uint64_t hi = (uint64_t)(p >> 64), lo = (uint64_t)p, q, r;
        if (hi < (uint64_t)d) { /* the quotient fits 64 bits: divq cannot fault */
            __asm__("divq %4" : "=a"(q), "=d"(r) : "a"(lo), "d"(hi), "rm"((uint64_t)d) : "cc");
            (void)r;
            if (q <= (uint64_t)INT64_MAX) return x < 0 ? -(int64_t)q : (int64_t)q;
        }
    }
    return (int64_t)((__int128)x * n / d);
}
#endif
#endif
