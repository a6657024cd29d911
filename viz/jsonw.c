/*
 * jsonw.c - the JSON writer (jsonw.h).  Written for speed as much as for correctness: an export
 * of a long trace writes tens of millions of values, so integers are formatted by hand and
 * strings copied in runs between the bytes that need escaping.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "jsonw.h"

void cmh_jw_init(cmh_jw *w, FILE *fp)
{
    memset(w, 0, sizeof *w);
    w->fp = fp;
    w->first[0] = 1;
}

/* what comes before a value or a key at the current depth */
static void before(cmh_jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (!w->first[w->depth]) fputs(", ", w->fp);
    w->first[w->depth] = 0;
    if (w->nl) {
        fputc('\n', w->fp);
        w->nl = 0;
    }
}

static void open_(cmh_jw *w, char c, int obj)
{
    before(w);
    fputc(c, w->fp);
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
    fputc(c, w->fp);
}

static void put_string(cmh_jw *w, const unsigned char *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    FILE *fp = w->fp;
    fputc('"', fp);
    size_t run = 0; /* bytes from p - run that go out unchanged */
    for (size_t i = 0; i < n;) {
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
        if (ok && c != '"' && c != '\\' && c >= 0x20) {
            run += len;
            i += len;
            continue;
        }
        if (run) fwrite(p + i - run, 1, run, fp);
        run = 0;
        if (!ok) fputs("\\ufffd", fp);
        else if (c == '"') fputs("\\\"", fp);
        else if (c == '\\') fputs("\\\\", fp);
        else if (c == '\n') fputs("\\n", fp);
        else if (c == '\r') fputs("\\r", fp);
        else if (c == '\t') fputs("\\t", fp);
        else {
            char u[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            fputs(u, fp);
        }
        i += len;
    }
    if (run) fwrite(p + n - run, 1, run, fp);
    fputc('"', fp);
}

void cmh_jw_key(cmh_jw *w, const char *key)
{
    before(w);
    put_string(w, (const unsigned char *)key, strlen(key));
    fputs(": ", w->fp);
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

static void put_u64(FILE *fp, uint64_t v, int neg)
{
    char buf[24];
    int i = sizeof buf;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (neg) buf[--i] = '-';
    fwrite(buf + i, 1, sizeof buf - (size_t)i, fp);
}

void cmh_jw_int(cmh_jw *w, int64_t v)
{
    before(w);
    put_u64(w->fp, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void cmh_jw_uint(cmh_jw *w, uint64_t v)
{
    before(w);
    put_u64(w->fp, v, 0);
}

void cmh_jw_double(cmh_jw *w, double v, int decimals)
{
    before(w);
    if (!isfinite(v)) fputs("null", w->fp);
    else fprintf(w->fp, "%.*f", decimals, v);
}

void cmh_jw_us(cmh_jw *w, int64_t ns)
{
    before(w);
    uint64_t a = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
    put_u64(w->fp, a / 1000, ns < 0);
    char frac[5] = {'.', (char)('0' + a % 1000 / 100), (char)('0' + a % 100 / 10), (char)('0' + a % 10), 0};
    fputs(frac, w->fp);
}

void cmh_jw_bool(cmh_jw *w, int v)
{
    before(w);
    fputs(v ? "true" : "false", w->fp);
}

void cmh_jw_null(cmh_jw *w)
{
    before(w);
    fputs("null", w->fp);
}

void cmh_jw_raw(cmh_jw *w, const char *json)
{
    before(w);
    fputs(json, w->fp);
}

void cmh_jw_nl(cmh_jw *w) { w->nl = 1; }

int cmh_jw_finish(cmh_jw *w)
{
    if (fflush(w->fp) != 0 || ferror(w->fp)) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}
