/*
 * test_live_rate.c - the CHANGE column's rate (analyzer/live_figures.c, cmh_live_rate) on rate
 * points made as the live reader makes them (one a second, each holding the latest value of its
 * second, a point of the value before the first entry), from synthetic entry streams whose true
 * rate is known; no wall clock: "now" is an argument.
 */
#include <stdio.h>
#include <string.h>

#include "live_reader.h"
#include "testutil.h"

#define S 1000000000ll
#define MiB (1024ll * 1024)
#define GiB (1024 * MiB)
#define T0 (1000 * S) /* the first entry's time */

typedef struct pts {
    rate_pt r[RATE_POINTS];
    uint32_t n;
    uint64_t allocated;
} pts;

/* live_records.c's note_rate, on an entry at t that leaves allocated at v */
static void note(pts *p, int64_t t, uint64_t v)
{
    uint64_t before = p->allocated;
    p->allocated = v;
    if (p->n && t < p->r[p->n - 1].ns + S) {
        p->r[p->n - 1].allocated = v;
        return;
    }
    if (p->n == RATE_POINTS) {
        memmove(p->r, p->r + 1, (RATE_POINTS - 1) * sizeof *p->r);
        p->n--;
    }
    if (!p->n) p->r[p->n++] = (rate_pt){t - 1, before};
    p->r[p->n++] = (rate_pt){t, v};
}

/* weights at the first entry, then +step bytes every 100 ms, up to age (ns, after the entry then) */
static int64_t rate_at(uint64_t weights, uint64_t step, int64_t age, int *known)
{
    pts p = {0};
    note(&p, T0, weights);
    for (int64_t m = 1; m * (S / 10) <= age; m++) note(&p, T0 + m * (S / 10), weights + (uint64_t)m * step);
    return cmh_live_rate(p.r, p.n, T0 + age, p.allocated, known);
}

static void near(int64_t got, int64_t want)
{
    if (!(got > want - want / 10 && got < want + want / 10)) fprintf(stderr, "\n    %lld B/min, want %lld\n", (long long)got, (long long)want);
    CU_ASSERT(got > want - want / 10 && got < want + want / 10);
}

/* slowbig: 4 GiB of weights, then 8 MiB a step at 10 steps a second: 4.69 GiB a minute, from
 * its third second on (it read +84 GiB/min at 3 s, +20 GiB/min at 15 s: the weights as growth) */
static void test_startup_is_no_growth(void)
{
    const int64_t truth = 8 * MiB * 10 * 60;
    int known;
    int64_t ages[] = {3 * S, 5 * S, 15 * S, 30 * S, 59 * S, 62 * S, 90 * S};
    for (size_t k = 0; k < sizeof ages / sizeof *ages; k++) {
        int64_t v = rate_at(4 * GiB, 8 * MiB, ages[k], &known);
        CU_ASSERT_EQUAL(known, 1);
        near(v, truth);
    }
    rate_at(4 * GiB, 8 * MiB, S + S / 2, &known); /* not a second past its first one yet */
    CU_ASSERT_EQUAL(known, 0);
}

/* a leak from the first entry on, no start-up: the same rate as before */
static void test_steady_leak(void)
{
    int known;
    for (int64_t a = 3; a <= 70; a += 7) {
        int64_t v = rate_at(8 * MiB, 8 * MiB, a * S, &known);
        CU_ASSERT_EQUAL(known, 1);
        near(v, 8 * MiB * 600);
    }
}

/* a model loaded and then nothing: a burst, no rate (as before: '-' until its minute is up) */
static void test_load_then_idle(void)
{
    pts p = {0};
    note(&p, T0, 2 * GiB);
    note(&p, T0 + S / 2, 4 * GiB);
    int known;
    int64_t v = cmh_live_rate(p.r, p.n, T0 + 10 * S, p.allocated, &known);
    CU_ASSERT_EQUAL(known, 0);
    CU_ASSERT_EQUAL(v, 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("live_rate", NULL, NULL);
    CMH_ADD_TEST(s, test_startup_is_no_growth);
    CMH_ADD_TEST(s, test_steady_leak);
    CMH_ADD_TEST(s, test_load_then_idle);
    return cmh_test_main();
}
