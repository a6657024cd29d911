/*
 * test_muldiv.c - cmh_muldiv (recorder/muldiv.h), the tick-to-time mapping's x * n / d, gives the
 * 128-bit division's figure: at the edges of its fast path (a quotient that just fits 64 bits,
 * one that does not, negative x, x = INT64_MIN, negative n) and for a million random triples
 * of every magnitude.
 */
#include <stdint.h>
#include <stdio.h>

#include "../recorder/muldiv.h"

#if defined(__x86_64__) && defined(__SIZEOF_INT128__)
static uint64_t g_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return g_state;
}

static long g_bad;
static void check(int64_t x, int64_t n, int64_t d)
{
    if (d <= 0) return;
    __int128 want = (__int128)x * n / d;
    if (want > INT64_MAX || want < INT64_MIN) return; /* the mapping's result must fit; so must ours */
    int64_t got = cmh_muldiv(x, n, d);
    if (got != (int64_t)want && g_bad++ < 10)
        fprintf(stderr, "muldiv(%lld, %lld, %lld) = %lld, want %lld\n", (long long)x, (long long)n, (long long)d,
                (long long)got, (long long)(int64_t)want);
}

int main(void)
{
    const int64_t edges[] = {0, 1, -1, 2, -2, 3, 1000, -1000, INT32_MAX, INT32_MIN, (int64_t)1 << 32, -((int64_t)1 << 32),
                             INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, (int64_t)1 << 62, -((int64_t)1 << 62)};
    const int ne = (int)(sizeof edges / sizeof edges[0]);
    for (int a = 0; a < ne; a++)
        for (int b = 0; b < ne; b++)
            for (int c = 0; c < ne; c++) check(edges[a], edges[b], edges[c]);
    for (long i = 0; i < 1000000; i++) {
        int sx = (int)(rnd() % 64), sn = (int)(rnd() % 64), sd = (int)(rnd() % 64);
        int64_t x = (int64_t)(rnd() >> sx), n = (int64_t)(rnd() >> sn), d = (int64_t)(rnd() >> (sd ? sd : 1));
        if (rnd() & 1) x = (int64_t)(0 - (uint64_t)x);
        if ((rnd() & 7) == 0) n = (int64_t)(0 - (uint64_t)n);
        check(x, n, d);
        /* the tick mapping's own shape: x about d, n about d */
        int64_t dd = (int64_t)(rnd() >> 2) | 1;
        check((int64_t)(rnd() % (uint64_t)dd) - dd / 8, dd + (int64_t)(rnd() % 1000), dd);
    }
    if (g_bad) fprintf(stderr, "%ld wrong\n", g_bad);
    return g_bad ? 1 : 0;
}
#else
int main(void) { return 77; }
#endif
