/*
 * test_trace_format.c - `trace`'s sizes and integers written as the reference script's printf
 * writes them, byte for byte, over many values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/reports.h"
#include "testutil.h"

/* The script's sizes, f"{num:3.1f}{unit}B", as printf writes them: the oracle `trace` must agree
 * with byte for byte now that it rounds from the integer itself (ties to even on the binary
 * value, 1023.95 KiB and up becoming "1024.0KiB", beyond 2^53 the double's own rounding). */
static void py_size(char *buf, size_t n, double num)
{
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
    for (int i = 0; i < 8; i++, num /= 1024.0)
        if (num < 1024.0 && num > -1024.0) {
            snprintf(buf, n, "%3.1f%sB", num, units[i]);
            return;
        }
    snprintf(buf, n, "%.1fYiB", num);
}

/* An empty snapshot with device 0's trace, for the entries a test adds. */
static void one_trace(cmh_snapshot *s)
{
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_init(s), CMH_OK);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_trace(s, 0, 0, NULL), CMH_OK);
}

/* `trace`'s text of s (the caller frees it). */
/* (into the caller's *text: a memstream's buffer pointer kept in a local of this function read,
 * inlined, as dangling to GCC's -Wdangling-pointer in a Release build) */
static void trace_text(const cmh_snapshot *s, char **text)
{
    size_t len = 0;
    *text = NULL;
    FILE *fp = open_memstream(text, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    CU_ASSERT_EQUAL_FATAL(cmh_print_trace(s, CMH_ALL_DEVICES, fp), CMH_OK);
    fclose(fp);
}

/* The next of a xorshift sequence: values of every magnitude */
static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x >> (*x % 64);
}

static void test_trace_sizes_as_printf(void)
{
    cmh_snapshot s;
    one_trace(&s);
    enum { N = 6000 };
    static uint64_t sizes[N];
    uint64_t x = 88172645463325252ull;
    int n = 0;
    for (uint64_t v = 0; v < 2100; v++) sizes[n++] = v; /* every byte count and the first KiB */
    for (int k = 1; k <= 6; k++) /* around each tie and each unit's edge */
        for (int d = -40; d <= 40; d++) {
            uint64_t unit = 1ull << (10 * k), tie = unit / 20; /* x.05 of the unit */
            sizes[n++] = 3 * unit + tie + (uint64_t)(int64_t)d;
            sizes[n++] = 1024 * unit - unit / 20 + (uint64_t)(int64_t)d;
        }
    while (n < N - 4) sizes[n++] = xorshift(&x); /* and random sizes of every magnitude */
    sizes[n++] = (1ull << 53) + 1;
    sizes[n++] = UINT64_MAX;
    sizes[n++] = 1ull << 60;
    sizes[n++] = 12345678901234567890ull;
    for (int i = 0; i < n; i++) {
        cmh_entry_full e = {0};
        e.action = CMH_ACT_ALLOC;
        e.addr = (uint64_t)i + 1;
        e.size = e.requested = sizes[i];
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
    }
    char *text;
    trace_text(&s, &text);
    char *line = strchr(strchr(text, '\n') + 1, '\n') + 1; /* after "Device 0" and "N entries" */
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char want[96], *end = strchr(line, '\n');
        CU_ASSERT_PTR_NOT_NULL_FATAL(end);
        py_size(want, sizeof want, (double)sizes[i]);
        char *colon = strchr(line, ':');
        size_t got = (size_t)(end - 1 - (colon + 1)); /* between ':' and ']' */
        if (!colon || got != strlen(want) || memcmp(colon + 1, want, got)) {
            if (bad++ < 5) fprintf(stderr, "size %llu: '%.*s', printf says '%s'\n", (unsigned long long)sizes[i], (int)(end - line), line, want);
        }
        line = end + 1;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(!strncmp(line, "TOTAL MEM: ", 11));
    free(text);
    cmh_snapshot_free(&s);
}

/* The integers of `trace` (offsets, unnamed addresses, the script's names a..z, a1.., the device
 * and the count), written without printf, against printf's own text: every number of digits and
 * the edge of each, up to 2^64 - 1. */
static void test_trace_numbers_as_printf(void)
{
    cmh_snapshot s;
    one_trace(&s);
    enum { N = 3000 };
    static uint64_t addrs[N];
    int n = 0;
    uint64_t p = 1, x = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k <= 19; k++, p *= 10) /* 10^k - 1, 10^k, 10^k + 1 */
        for (int d = -1; d <= 1; d++) addrs[n++] = p + (uint64_t)(int64_t)d;
    addrs[n++] = UINT64_MAX;
    addrs[n++] = UINT64_MAX - 1;
    for (uint64_t v = 0; v < 200; v++) addrs[n++] = v;
    while (n < N) addrs[n++] = xorshift(&x);
    for (int i = 0; i < n; i++) { /* alloc A at no segment (MEM[A:...]), then a free of an unknown address */
        cmh_entry_full e = {0};
        e.action = i % 2 ? CMH_ACT_FREE_REQUESTED : CMH_ACT_ALLOC;
        e.addr = i % 2 ? ~addrs[i] : addrs[i];
        e.size = e.requested = 512;
        CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_entry(&s, &e), CMH_OK);
    }
    char *text;
    trace_text(&s, &text);
    char want[128];
    snprintf(want, sizeof want, "Device 0 ----------------\n%d entries\n", n);
    CU_ASSERT_FATAL(!strncmp(text, want, strlen(want)));
    char *line = text + strlen(want);
    int bad = 0, names = 0;
    for (int i = 0; i < n; i++) {
        char *end = strchr(line, '\n');
        CU_ASSERT_PTR_NOT_NULL_FATAL(end);
        if (i % 2) {
            /* an address never allocated keeps its number; one allocated before has its name */
            int known = 0;
            for (int j = 0; j < i && !known; j += 2) known = addrs[j] == ~addrs[i];
            if (known) {
                line = end + 1;
                continue;
            }
            snprintf(want, sizeof want, "del %llu # 512.0B", (unsigned long long)~addrs[i]);
        } else {
            int k = names++;
            char nm[32];
            if (k / 26) snprintf(nm, sizeof nm, "%c%d", 'a' + k % 26, k / 26);
            else snprintf(nm, sizeof nm, "%c", 'a' + k % 26);
            snprintf(want, sizeof want, "%s = MEM[%llu:512.0B]", nm, (unsigned long long)addrs[i]);
        }
        if ((size_t)(end - line) != strlen(want) || memcmp(line, want, strlen(want))) {
            if (bad++ < 5) fprintf(stderr, "'%.*s', printf says '%s'\n", (int)(end - line), line, want);
        }
        line = end + 1;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(!strncmp(line, "TOTAL MEM: ", 11));
    free(text);
    cmh_snapshot_free(&s);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("trace_format", NULL, NULL);
    CMH_ADD_TEST(s, test_trace_sizes_as_printf);
    CMH_ADD_TEST(s, test_trace_numbers_as_printf);
    return cmh_test_main();
}
