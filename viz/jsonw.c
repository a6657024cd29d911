/*
 * jsonw.c - the JSON writer (jsonw.h).  Written for speed as much as for correctness: an export
 * of a long trace writes tens of millions of values, so integers are formatted by hand and
 * strings copied in runs between the bytes that need escaping.  Bytes go out through the writer's
 * own buffer when it has one (cmh_jw_init_buffered: a whole export, whose stream nobody else
 * writes until cmh_jw_finish), else straight to the stream with stdio's unlocked calls (the
 * caller may write to the stream between values).  stdio's per-call locking and copying were
 * half of `export -f json` (a million entries: some 30 million calls).
 */
#define _GNU_SOURCE /* fwrite_unlocked, fputs_unlocked */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"

#define JW_BUF (64 * 1024)

static void spill(cmh_jw *w)
{
    if (w->n) fwrite_unlocked(w->buf, 1, w->n, w->fp);
    w->n = 0;
}

static inline void out_n(cmh_jw *w, const void *p, size_t n)
{
    if (!w->buf) {
        fwrite_unlocked(p, 1, n, w->fp);
        return;
    }
    if (w->n + n > JW_BUF) {
        spill(w);
        if (n > JW_BUF / 2) {
            fwrite_unlocked(p, 1, n, w->fp);
            return;
        }
    }
    memcpy(w->buf + w->n, p, n);
    w->n += n;
}

static inline void out_c(cmh_jw *w, char c)
{
    if (!w->buf) {
        putc_unlocked(c, w->fp);
        return;
    }
    if (w->n == JW_BUF) spill(w);
    w->buf[w->n++] = c;
}

static inline void out_s(cmh_jw *w, const char *s) { out_n(w, s, strlen(s)); }

void cmh_jw_init(cmh_jw *w, FILE *fp)
{
    memset(w, 0, sizeof *w);
    w->fp = fp;
    w->first[0] = 1;
}

void cmh_jw_init_buffered(cmh_jw *w, FILE *fp)
{
    cmh_jw_init(w, fp);
    w->buf = malloc(JW_BUF); /* without one, the writer writes through */
}

/* what comes before a value or a key at the current depth */
static void before(cmh_jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (!w->first[w->depth]) out_s(w, ", ");
    w->first[w->depth] = 0;
    if (w->nl) {
        out_c(w, '\n');
        w->nl = 0;
    }
}

static void open_(cmh_jw *w, char c, int obj)
{
    before(w);
    out_c(w, c);
    if (w->depth + 1 < CMH_JW_MAX_DEPTH) w->depth++;
    w->first[w->depth] = 1;
    w->in_obj[w->depth] = (uint8_t)obj;
}

void cmh_jw_obj(cmh_jw *w) { open_(w, '{', 1); }
void cmh_jw_arr(cmh_jw *w) { open_(w, '[', 0); }

void cmh_jw_end(cmh_jw *w)
{
    char c = w->in_obj[w->depth] ? '}' : ']';
    if (w->depth > 0) w->depth--;
    w->nl = 0;
    out_c(w, c);
}

/* 1: an ASCII byte that goes out as it is (printable, not '"' nor '\\') */
static const uint8_t g_plain[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(0), R16(0),                                              /* 0x00-0x1f: control */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,              /* 0x20-0x2f: '"' */
    R16(1), R16(1),                                              /* 0x30-0x4f */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,              /* 0x50-0x5f: '\\' */
    R16(1), R16(1),                                              /* 0x60-0x7f */
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0) /* 0x80-0xff: UTF-8, checked */
#undef R16
};

static void put_string(cmh_jw *w, const unsigned char *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    out_c(w, '"');
    size_t run = 0; /* bytes from p - run that go out unchanged */
    for (size_t i = 0; i < n;) {
        if (g_plain[p[i]]) { /* the common case, one test a byte */
            run++;
            i++;
            continue;
        }
        unsigned char c = p[i];
        size_t len = 1;
        int ok = 1;
        if (c >= 0x80) { /* a UTF-8 sequence: its length, and whether it is well formed */
            if (c >= 0xc2 && c <= 0xdf) len = 2;
            else if (c >= 0xe0 && c <= 0xef) len = 3;
            else if (c >= 0xf0 && c <= 0xf4) len = 4;
            else ok = 0;
            if (ok && i + len > n) ok = 0;
            for (size_t k = 1; ok && k < len; k++) ok = (p[i + k] & 0xc0) == 0x80;
            if (ok && len == 3) ok = !(c == 0xe0 && p[i + 1] < 0xa0) && !(c == 0xed && p[i + 1] >= 0xa0);
            if (ok && len == 4) ok = !(c == 0xf0 && p[i + 1] < 0x90) && !(c == 0xf4 && p[i + 1] >= 0x90);
            if (!ok) len = 1;
        }
        if (ok && c >= 0x80) {
            run += len;
            i += len;
            continue;
        }
        if (run) out_n(w, p + i - run, run);
        run = 0;
        if (!ok && c == 0xc0 && i + 1 < n && p[i + 1] == 0x80) { /* a NUL the model holds as C0 80 (cmh_strtab_intern_bytes) */
            out_s(w, "\\u0000");
            i += 2;
            continue;
        }
        if (!ok) out_s(w, "\\ufffd");
        else if (c == '"') out_s(w, "\\\"");
        else if (c == '\\') out_s(w, "\\\\");
        else if (c == '\n') out_s(w, "\\n");
        else if (c == '\r') out_s(w, "\\r");
        else if (c == '\t') out_s(w, "\\t");
        else {
            char u[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            out_s(w, u);
        }
        i += len;
    }
    if (run) out_n(w, p + n - run, run);
    out_c(w, '"');
}

void cmh_jw_key(cmh_jw *w, const char *key)
{
    before(w);
    put_string(w, (const unsigned char *)key, strlen(key));
    out_s(w, ": ");
    w->after_key = 1;
}

void cmh_jw_str(cmh_jw *w, const char *s)
{
    before(w);
    put_string(w, (const unsigned char *)(s ? s : ""), s ? strlen(s) : 0);
}

void cmh_jw_strn(cmh_jw *w, const char *s, size_t n)
{
    before(w);
    put_string(w, (const unsigned char *)s, n);
}

static void put_u64(cmh_jw *w, uint64_t v, int neg)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                   "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    char buf[24];
    int i = sizeof buf;
    while (v >= 100) { /* two digits a division */
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        buf[--i] = pairs[d + 1];
        buf[--i] = pairs[d];
    }
    if (v >= 10) {
        buf[--i] = pairs[v * 2 + 1];
        buf[--i] = pairs[v * 2];
    } else buf[--i] = (char)('0' + v);
    if (neg) buf[--i] = '-';
    out_n(w, buf + i, sizeof buf - (size_t)i);
}

void cmh_jw_int(cmh_jw *w, int64_t v)
{
    before(w);
    put_u64(w, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void cmh_jw_uint(cmh_jw *w, uint64_t v)
{
    before(w);
    put_u64(w, v, 0);
}

void cmh_jw_double(cmh_jw *w, double v, int decimals)
{
    before(w);
    if (!isfinite(v)) out_s(w, "null");
    else {
        char d[64]; /* most numbers; a longer one goes to the stream itself */
        int k = snprintf(d, sizeof d, "%.*f", decimals, v);
        if (k > 0 && (size_t)k < sizeof d) out_n(w, d, (size_t)k);
        else {
            spill(w);
            fprintf(w->fp, "%.*f", decimals, v);
        }
    }
}

void cmh_jw_us(cmh_jw *w, int64_t ns)
{
    before(w);
    uint64_t a = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
    put_u64(w, a / 1000, ns < 0);
    char frac[5] = {'.', (char)('0' + a % 1000 / 100), (char)('0' + a % 100 / 10), (char)('0' + a % 10), 0};
    out_s(w, frac);
}

void cmh_jw_bool(cmh_jw *w, int v)
{
    before(w);
    out_s(w, v ? "true" : "false");
}

void cmh_jw_null(cmh_jw *w)
{
    before(w);
    out_s(w, "null");
}

void cmh_jw_raw(cmh_jw *w, const char *json)
{
    before(w);
    out_s(w, json);
}

void cmh_jw_nl(cmh_jw *w) { w->nl = 1; }

int cmh_jw_finish(cmh_jw *w)
{
    if (w->buf) {
        spill(w);
        free(w->buf);
        w->buf = NULL;
    }
    if (fflush(w->fp) != 0 || ferror(w->fp)) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}
