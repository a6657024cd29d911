/*
 * test_enomem.c - every allocation the readers, the analyzer and the exporters make may fail,
 * and each failure must come back as CMH_ENOMEM (never CMH_EFORMAT, never a crash, never a leak:
 * the sanitizer build checks that last one), with the reader's output left empty.
 *
 * The binary is linked with -Wl,--wrap for malloc, calloc, realloc and strdup, so every call
 * our static libraries make goes through the wrappers below (libc's own are untouched).  For
 * each input, the whole chain (read, every report, every export) first runs counting its
 * allocations, N; then it runs N more times, the k-th allocation failing in run k.  So every
 * allocation site on the chain's path fails once.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/view.h"
#include "cumemhist/reports.h"
#include "cumemhist/viz.h"
#include "testutil.h"

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
char *__real_strdup(const char *);

static long g_countdown = -1; /* allocations left before the one that fails; -1: none fails */
static long g_count;          /* allocations made since the last reset */

static int fail_now(void)
{
    g_count++;
    if (g_countdown < 0) return 0;
    return g_countdown-- == 0;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return fail_now() ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }

static FILE *g_null;

static int empty(const cmh_snapshot *s)
{
    return !s->strings.str && !s->entries && !s->segments && !s->nentries && !s->nsegments && !s->nstacks;
}

/* The chain on one input: CMH_OK, or the first error. */
static int chain(const void *buf, size_t len, int pickle)
{
    cmh_snapshot s;
    char err[512];
    int rc = pickle ? cmh_pickle_read(buf, len, &s, err, sizeof err) : cmh_cmh_read(buf, len, &s, err, sizeof err);
    if (rc != CMH_OK) {
        if (!empty(&s)) return -100; /* a failed read leaves nothing behind */
        return rc;
    }
    int32_t devs[8];
    int nd = cmh_snapshot_devices(&s, devs, 8);
    char err2[256];
    int src;
    cmh_site_opts so = {CMH_GROUP_SITE, 0, NULL, 0};
    cmh_sites *g = cmh_sites_new(&s, &so, &src, err2, sizeof err2);
    if (!g) rc = src;
    for (int d = 0; d < nd && d < 8 && rc == CMH_OK; d++) {
        cmh_mem_stats st;
        cmh_peak_report pk;
        cmh_leak_report lk;
        cmh_frag_report fr;
        cmh_oom_report om;
        cmh_diff_report df;
        if ((rc = cmh_summary_compute(&s, devs[d], &st)) != CMH_OK) break;
        if ((rc = cmh_peak_compute(&s, devs[d], g, &pk)) != CMH_OK) break;
        cmh_peak_report_free(&pk);
        if ((rc = cmh_leaks_compute(&s, devs[d], g, 0, &lk)) != CMH_OK) break;
        cmh_leak_report_free(&lk);
        if ((rc = cmh_frag_compute(&s, devs[d], &fr)) != CMH_OK) break;
        cmh_frag_report_free(&fr);
        if ((rc = cmh_oom_compute(&s, devs[d], g, &om)) != CMH_OK) break;
        cmh_oom_report_free(&om);
        if ((rc = cmh_diff_compute(&s, devs[d], g, &s, devs[d], g, &df)) != CMH_OK) break;
        cmh_diff_report_free(&df);
    }
    if (rc == CMH_OK) rc = cmh_view_html(&s, g, devs, nd < 8 ? nd : 8, "enomem", g_null);
    cmh_sites_free(g);
    if (rc == CMH_OK) rc = cmh_print_segsum(&s, CMH_ALL_DEVICES, g_null);
    if (rc == CMH_OK) rc = cmh_print_trace(&s, CMH_ALL_DEVICES, g_null);
    uint64_t host;
    if (rc == CMH_OK) rc = cmh_export_memviz(&s, g_null, &host);
    if (rc == CMH_OK) rc = cmh_export_json(&s, 0, g_null);
    if (rc == CMH_OK) rc = cmh_export_chrome(&s, g_null);
    cmh_snapshot_free(&s);
    return rc;
}

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = __real_malloc(n > 0 ? (size_t)n : 1);
    *len = b && fread(b, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
    fclose(f);
    return b;
}

static void fail_each_on(const char *name, void *buf, size_t len)
{
    int pickle = len > 1 && ((const unsigned char *)buf)[0] == 0x80 && ((const unsigned char *)buf)[1] <= 5;
    g_countdown = -1;
    g_count = 0;
    CU_ASSERT_EQUAL_FATAL(chain(buf, len, pickle), CMH_OK);
    long n = g_count, oom = 0, ok = 0, wrong = 0;
    for (long k = 0; k < n; k++) {
        g_countdown = k;
        int rc = chain(buf, len, pickle);
        g_countdown = -1;
        if (rc == CMH_ENOMEM) oom++;
        else if (rc == CMH_OK) ok++; /* a failure the code may absorb (a cache that does not grow) */
        else {
            wrong++;
            if (wrong <= 3) fprintf(stderr, "%s: allocation %ld of %ld failing gave %d, not CMH_ENOMEM\n", name, k, n, rc);
        }
    }
    fprintf(stderr, "%s: %ld allocations, each failed once: %ld CMH_ENOMEM, %ld absorbed\n", name, n, oom, ok);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT(oom > 0);
}

static void each_allocation_fails(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", CMH_FIXTURES, name);
    size_t len = 0;
    void *buf = slurp(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    fail_each_on(name, buf, len);
    free(buf);
}

/* our own memory_viz pickle (implied entries, pool samples and cumemhist keys to read back) */
static void test_pickle_exported(void)
{
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/h200/leaky.cmh", CMH_FIXTURES);
    cmh_snapshot s;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_load(path, &s, err, sizeof err), CMH_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    uint64_t host;
    CU_ASSERT_EQUAL_FATAL(cmh_export_memviz(&s, m, &host), CMH_OK);
    fclose(m);
    cmh_snapshot_free(&s);
    fail_each_on("memviz export of h200/leaky.cmh", buf, len);
    free(buf);
}

static void test_cmh_recording(void) { each_allocation_fails("h200/leaky.cmh"); }
static void test_cmh_cudart(void) { each_allocation_fails("h200/cudart.cmh"); }
static void test_cmh_kernels(void) { each_allocation_fails("h200b/kernels.cmh"); }
static void test_pickle_pytorch(void) { each_allocation_fails("h200/torch_exp.pickle"); }

int main(void)
{
    g_null = fopen("/dev/null", "w");
    if (!g_null || CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("enomem", NULL, NULL);
    CMH_ADD_TEST(s, test_cmh_recording);
    CMH_ADD_TEST(s, test_cmh_cudart);
    CMH_ADD_TEST(s, test_cmh_kernels);
    CMH_ADD_TEST(s, test_pickle_exported);
    CMH_ADD_TEST(s, test_pickle_pytorch);
    int rc = cmh_test_main();
    fclose(g_null);
    return rc;
}
