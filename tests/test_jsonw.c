/*
 * test_jsonw.c - the JSON writer (viz/jsonw.c): escaping and integers against hand-written text,
 * and the buffered writer (exports) byte for byte against the write-through one, past its buffer.
 */
#define _GNU_SOURCE /* open_memstream */
#include <stdint.h>
#include <string.h>

#include "../viz/jsonw.h"
#include "testutil.h"

typedef void (*doc_fn)(cmh_jw *w, void *arg);

/* The text doc writes, through the buffered writer (buffered) or straight to the stream. */
static char *write_doc(doc_fn doc, void *arg, int buffered, size_t *len)
{
    char *text = NULL;
    FILE *m = open_memstream(&text, len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    cmh_jw w;
    if (buffered) cmh_jw_init_buffered(&w, m);
    else cmh_jw_init(&w, m);
    doc(&w, arg);
    CU_ASSERT_EQUAL(cmh_jw_finish(&w), 0);
    fclose(m);
    return text;
}

static void small_doc(cmh_jw *w, void *arg)
{
    (void)arg;
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "plain", "abc XYZ ~");
    cmh_jw_kstr(w, "esc", "q\"b\\n\nr\rt\t\x01\x1f\x7f");
    cmh_jw_kstr(w, "utf8", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    cmh_jw_kstr(w, "bad", "\xff\xc3(\xe0\x80\x80\xed\xa0\x80");
    cmh_jw_kint(w, "min", INT64_MIN);
    cmh_jw_kint(w, "neg", -7);
    cmh_jw_kuint(w, "max", UINT64_MAX);
    cmh_jw_kuint(w, "ten", 10);
    cmh_jw_kuint(w, "zero", 0);
    cmh_jw_kuint(w, "n99", 99);
    cmh_jw_kuint(w, "n100", 100);
    cmh_jw_kuint(w, "n1234567", 1234567);
    cmh_jw_key(w, "us");
    cmh_jw_us(w, -1234567);
    cmh_jw_kdouble(w, "d", 2.5, 3);
    cmh_jw_kdouble(w, "big", 1e300, 2);
    cmh_jw_kdouble(w, "nan", 0.0 / 0.0, 2);
    cmh_jw_nl(w);
    cmh_jw_key(w, "a");
    cmh_jw_arr(w);
    cmh_jw_bool(w, 1);
    cmh_jw_null(w);
    cmh_jw_raw(w, "{\"r\": 1}");
    cmh_jw_end(w);
    cmh_jw_end(w);
}

static void test_escapes_and_numbers(void)
{
    const char *want = "{\"plain\": \"abc XYZ ~\", \"esc\": \"q\\\"b\\\\n\\nr\\rt\\t\\u0001\\u001f\x7f\", "
                       "\"utf8\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", "
                       "\"bad\": \"\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\", "
                       "\"min\": -9223372036854775808, \"neg\": -7, \"max\": 18446744073709551615, \"ten\": 10, "
                       "\"zero\": 0, \"n99\": 99, \"n100\": 100, \"n1234567\": 1234567, \"us\": -1234.567, \"d\": 2.500, ";
    for (int buffered = 0; buffered < 2; buffered++) {
        size_t len;
        char *text = write_doc(small_doc, NULL, buffered, &len);
        CU_ASSERT_EQUAL(strncmp(text, want, strlen(want)), 0);
        if (strncmp(text, want, strlen(want))) fprintf(stderr, "got  %s\nwant %s\n", text, want);
        const char *tail = strstr(text, "\"nan\": null, \n\"a\": [true, null, {\"r\": 1}]}");
        CU_ASSERT_PTR_NOT_NULL(tail);
        char big[400];
        snprintf(big, sizeof big, "\"big\": %.2f, ", 1e300);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, big));
        free(text);
    }
}

/* Enough values to fill the buffer many times over, and strings longer than half of it. */
static void big_doc(cmh_jw *w, void *arg)
{
    const char *longstr = arg;
    cmh_jw_arr(w);
    for (uint64_t i = 0; i < 60000; i++) {
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kuint(w, "i", i * 2654435761u);
        cmh_jw_kint(w, "n", -(int64_t)i);
        cmh_jw_kstr(w, "s", i % 7 ? "frame \"x\"\n" : "\xc3\xa9t\xff");
        if (i % 9000 == 0) cmh_jw_kstr(w, "long", longstr + (i / 9000) * 1000);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}

static void test_buffered_as_write_through(void)
{
    char *longstr = malloc(100001);
    CU_ASSERT_PTR_NOT_NULL_FATAL(longstr);
    for (int i = 0; i < 100000; i++) longstr[i] = (char)(i % 61 || i > 50000 ? 'a' + i % 26 : '"');  /* a run of 50000 plain bytes at the end */
    longstr[100000] = 0;
    size_t n0, n1;
    char *a = write_doc(big_doc, longstr, 0, &n0), *b = write_doc(big_doc, longstr, 1, &n1);
    CU_ASSERT(n0 > 4 * 64 * 1024);
    CU_ASSERT_EQUAL(n0, n1);
    CU_ASSERT(n0 == n1 && !memcmp(a, b, n0));
    free(a);
    free(b);
    free(longstr);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("jsonw", NULL, NULL);
    CMH_ADD_TEST(s, test_escapes_and_numbers);
    CMH_ADD_TEST(s, test_buffered_as_write_through);
    return cmh_test_main();
}
