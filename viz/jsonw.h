/*
 * jsonw.h - the one JSON writer of the tree: every report's --json (cli/) and every JSON export
 * (viz/) go through it, so strings are escaped in one place.
 *
 * A writer streams to a FILE* and knows where it is (inside an object or an array, first member
 * or not), so callers never write a separator or a quote themselves.  Strings are RFC 8259
 * strings: '"', '\\' and control characters escaped, valid UTF-8 kept as is, and any byte that is
 * not part of valid UTF-8 written as U+FFFD, so the output is always valid JSON whatever a symbol
 * table or a path holds.  Integers are exact.  Separators are ", " and ": "; cmh_jw_nl() puts a
 * newline before the next member, for people reading the output.
 *
 * Errors: a write that fails sets the stream's error flag; cmh_jw_finish() flushes and says
 * whether everything reached the stream.
 */
#ifndef CMH_JSONW_H
#define CMH_JSONW_H

#include <stdint.h>
#include <stdio.h>

#define CMH_JW_MAX_DEPTH 64

typedef struct cmh_jw {
    FILE *fp;
    int depth;
    uint8_t first[CMH_JW_MAX_DEPTH]; /* no member written yet at this depth */
    uint8_t in_obj[CMH_JW_MAX_DEPTH];
    int after_key; /* a key was written: the value follows without a separator */
    int nl;        /* a newline before the next member */
    char *buf;     /* cmh_jw_init_buffered: bytes not yet given to fp */
    size_t n;
} cmh_jw;

void cmh_jw_init(cmh_jw *w, FILE *fp);
/* The same, through a buffer of the writer's own: nothing else may write to fp until
 * cmh_jw_finish() (which must be called: it hands over the rest and frees the buffer). */
void cmh_jw_init_buffered(cmh_jw *w, FILE *fp);
void cmh_jw_obj(cmh_jw *w); /* { */
void cmh_jw_arr(cmh_jw *w); /* [ */
void cmh_jw_end(cmh_jw *w); /* } or ] */
void cmh_jw_key(cmh_jw *w, const char *key);
void cmh_jw_str(cmh_jw *w, const char *s);
void cmh_jw_strn(cmh_jw *w, const char *s, size_t n);
void cmh_jw_int(cmh_jw *w, int64_t v);
void cmh_jw_uint(cmh_jw *w, uint64_t v);
void cmh_jw_double(cmh_jw *w, double v, int decimals); /* fixed point; NaN and infinities as null */
void cmh_jw_bool(cmh_jw *w, int v);
void cmh_jw_null(cmh_jw *w);
/* A value already in JSON form, written as it is: the caller vouches for it. */
void cmh_jw_raw(cmh_jw *w, const char *json);
/* Microseconds from integer nanoseconds, exactly, with 3 decimals ("12.345"). */
void cmh_jw_us(cmh_jw *w, int64_t ns);
void cmh_jw_nl(cmh_jw *w);
/* Flush; 0 when every byte was written, else -1 (errno says why). */
int cmh_jw_finish(cmh_jw *w);

/* key + value in one call */
static inline void cmh_jw_kstr(cmh_jw *w, const char *k, const char *v)
{
    cmh_jw_key(w, k);
    cmh_jw_str(w, v);
}
static inline void cmh_jw_kint(cmh_jw *w, const char *k, int64_t v)
{
    cmh_jw_key(w, k);
    cmh_jw_int(w, v);
}
static inline void cmh_jw_kuint(cmh_jw *w, const char *k, uint64_t v)
{
    cmh_jw_key(w, k);
    cmh_jw_uint(w, v);
}
static inline void cmh_jw_kbool(cmh_jw *w, const char *k, int v)
{
    cmh_jw_key(w, k);
    cmh_jw_bool(w, v);
}
static inline void cmh_jw_knull(cmh_jw *w, const char *k)
{
    cmh_jw_key(w, k);
    cmh_jw_null(w);
}
static inline void cmh_jw_kdouble(cmh_jw *w, const char *k, double v, int decimals)
{
    cmh_jw_key(w, k);
    cmh_jw_double(w, v, decimals);
}

#endif
