/*
 * test_badinput.c - the bad-input matrix for the three readers: a .cmh snapshot, the same
 * snapshot as a PyTorch pickle, and a flight record (a real one, of tests/dies killed after 150
 * entries, compacted).  For each: every truncation, every single-bit flip (a flipped byte at a
 * stride for the flight record), huge declared lengths and wrong versions.  Whatever a reader
 * refuses, it says so in one line naming the file and the byte; whatever it accepts is a model
 * the analyzer can replay (under ASan/UBSan in that build).  Never a crash, a hang or a read
 * past the input.
 *
 * A flight record written today (version 2) has a checksum in each record's head: a record
 * damaged in its body or its sum is dropped alone and counted.
 *
 * A .cmh written today ends with a checksum (docs/FORMAT.md, "Checksum"): of such a file, not
 * one truncation and not one single-bit flip may be accepted; the fixtures, written before
 * checksums, must still load, marked unverified.
 */
#define _GNU_SOURCE
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../snapshot/crc32c.h"
#include "../snapshot/flight_format.h"
#include "cumemhist/analyzer.h"
#include "cumemhist/recover.h"
#include "cumemhist/snapshot.h"
#include "testutil.h"

static char g_dir[] = "/tmp/cmh-badinput-XXXXXX";
static unsigned long g_tried, g_refused;

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*len ? *len : 1);
    CU_ASSERT_FATAL(fread(b, 1, *len, f) == *len);
    fclose(f);
    return b;
}

static void spit(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_FATAL(fwrite(b, 1, len, f) == len);
    fclose(f);
}

/* What a reader accepted must replay: every device's summary computes. */
static void exercise(cmh_snapshot *s)
{
    int32_t devs[8];
    int nd = cmh_snapshot_devices(s, devs, 8);
    for (int i = 0; i < nd && i < 8; i++) {
        cmh_mem_stats st;
        cmh_summary_compute(s, devs[i], &st);
    }
    cmh_snapshot_free(s);
}

/* A refusal is one line, naming the file and a byte ("x.cmh: truncated at byte 12 ..."). */
static int good_error(const char *err, const char *path)
{
    size_t n = strlen(path);
    return !strncmp(err, path, n) && err[n] == ':' && strstr(err, "byte") && !strchr(err, '\n');
}

enum { SNAPSHOT, FLIGHT };

/* Try one input through the file reader; 1 if refused.  must_fail: a truncation. */
static int try_file(int kind, const char *path, const void *b, size_t len, int must_fail, const char *what)
{
    spit(path, b, len);
    cmh_snapshot s;
    cmh_recover_info info;
    char err[4600] = "";
    int rc = kind == FLIGHT ? cmh_flight_recover(path, &s, &info, err, sizeof err) : cmh_snapshot_load(path, &s, err, sizeof err);
    g_tried++;
    if (rc == CMH_OK) {
        if (must_fail) fprintf(stderr, "\n  %s: accepted\n", what);
        CU_ASSERT(!must_fail);
        exercise(&s);
        return 0;
    }
    g_refused++;
    if (!good_error(err, path)) fprintf(stderr, "\n  %s: \"%s\"\n", what, err);
    CU_ASSERT(good_error(err, path));
    CU_ASSERT(rc == CMH_EFORMAT || rc == CMH_ENOMEM);
    return 1;
}

/* In memory (the readers the file loader dispatches to): 1 if refused. */
static int try_mem(int pickle, const void *b, size_t len, const char *what)
{
    cmh_snapshot s;
    char err[512] = "";
    int rc = pickle ? cmh_pickle_read(b, len, &s, err, sizeof err) : cmh_cmh_read(b, len, &s, err, sizeof err);
    g_tried++;
    if (rc == CMH_OK) {
        exercise(&s);
        return 0;
    }
    g_refused++;
    if (!strstr(err, "byte") || strchr(err, '\n')) fprintf(stderr, "\n  %s: \"%s\"\n", what, err);
    CU_ASSERT(strstr(err, "byte") && !strchr(err, '\n'));
    return 1;
}

/* A fixture read and written again by one of today's writers (the pickle's; the .cmh one, which
 * adds the checksum). */
static unsigned char *rewritten(const char *fixture, int (*write)(const cmh_snapshot *, FILE *), size_t *len)
{
    unsigned char *b = slurp(fixture, len);
    cmh_snapshot s;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(cmh_cmh_read(b, *len, &s, err, sizeof err), CMH_OK);
    free(b);
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    CU_ASSERT_EQUAL_FATAL(write(&s, f), CMH_OK);
    fclose(f);
    cmh_snapshot_free(&s);
    return (unsigned char *)out;
}

/* The .cmh fixture as it is (written before checksums), and the same snapshot as a pickle. */
static unsigned char *snapshot_bytes(int pickle, size_t *len)
{
    if (pickle) return rewritten(CMH_FIXTURES "/h200/cudart.cmh", cmh_pickle_write, len);
    return slurp(CMH_FIXTURES "/h200/cudart.cmh", len);
}

static void matrix_snapshot(int pickle)
{
    size_t len;
    unsigned char *b = snapshot_bytes(pickle, &len), *m = malloc(len + 64);
    char path[128], what[128];
    snprintf(path, sizeof path, "%s/x.%s", g_dir, pickle ? "pickle" : "cmh");
    unsigned long t0 = g_tried;
    /* the whole file reads */
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, b, len, 0, "whole"), 0);
    /* every truncation, through the file loader: each refused, naming the file and the byte */
    for (size_t n = 0; n < len; n++) {
        snprintf(what, sizeof what, "%s cut at %zu", pickle ? "pickle" : "cmh", n);
        try_file(SNAPSHOT, path, b, n, 1, what);
    }
    /* every single-bit flip */
    unsigned long flips = 0, refused = 0;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(m, b, len);
            m[i] ^= (unsigned char)(1u << bit);
            snprintf(what, sizeof what, "%s byte %zu bit %d", pickle ? "pickle" : "cmh", i, bit);
            refused += (unsigned long)try_mem(pickle, m, len, what);
            flips++;
        }
    /* a flip through the file loader says the file too */
    memcpy(m, b, len);
    m[0] ^= 0xff;
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, m, len, 1, "first byte"), 1);
    fprintf(stderr, "[%s: %zu bytes, %zu truncations, %lu bit flips (%lu refused)] ", pickle ? "pickle" : "cmh", len, len, flips,
            refused);
    (void)t0;
    free(m);
    free(b);
}

static void test_cmh_matrix(void) { matrix_snapshot(0); }

/* Every truncation and every single-bit flip of a checksummed .cmh is refused: not one read as
 * a different record (before checksums, 1 in 5 flips was, and changed the figures). */
static void test_cmh_checksummed_matrix(void)
{
    size_t len;
    unsigned char *b = rewritten(CMH_FIXTURES "/h200/leaky.cmh", cmh_cmh_write, &len), *m = malloc(len);
    char path[128], what[128], err[512];
    snprintf(path, sizeof path, "%s/sum.cmh", g_dir);
    cmh_snapshot s;
    spit(path, b, len);
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_load(path, &s, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(s.unverified, 0);
    cmh_snapshot_free(&s);
    unsigned long cuts = 0, flips = 0, accepted = 0, said_damaged = 0;
    for (size_t n = 0; n < len; n++, cuts++) {
        snprintf(what, sizeof what, "checksummed cmh cut at %zu", n);
        try_file(SNAPSHOT, path, b, n, 1, what);
    }
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++, flips++) {
            memcpy(m, b, len);
            m[i] ^= (unsigned char)(1u << bit);
            int rc = cmh_cmh_read(m, len, &s, err, sizeof err);
            g_tried++;
            if (rc == CMH_OK) {
                fprintf(stderr, "\n  checksummed cmh byte %zu bit %d: accepted\n", i, bit);
                accepted++;
                cmh_snapshot_free(&s);
                continue;
            }
            g_refused++;
            CU_ASSERT(rc == CMH_EFORMAT);
            CU_ASSERT(strstr(err, "byte") && !strchr(err, '\n'));
            said_damaged += strstr(err, "damaged") != NULL;
        }
    CU_ASSERT_EQUAL(accepted, 0);
    CU_ASSERT_EQUAL(said_damaged, flips); /* and each says so, rather than what the flip made of a byte */
    /* through the file loader: the file, the range, the damage */
    memcpy(m, b, len);
    m[len / 2] ^= 0x10;
    spit(path, m, len);
    CU_ASSERT_EQUAL(cmh_snapshot_load(path, &s, err, sizeof err), CMH_EFORMAT);
    char want[256];
    snprintf(want, sizeof want, "%s: checksum mismatch over bytes 0-%zu (the file is damaged)", path, len - 5);
    if (strcmp(err, want)) fprintf(stderr, "\n  \"%s\"\n", err);
    CU_ASSERT_STRING_EQUAL(err, want);
    fprintf(stderr, "[checksummed cmh: %zu bytes, %lu truncations, %lu bit flips (%lu accepted)] ", len, cuts, flips, accepted);
    free(m);
    free(b);
}

/* The files written before checksums still load, every one that loaded before, marked so. */
static void test_cmh_fixtures_unverified(void)
{
    /* the records made before checksums (h200d's, made with them, are read by the suites that use them) */
    static const char *const pat[] = {CMH_FIXTURES "/h200/*.cmh", CMH_FIXTURES "/h200b/*.cmh", CMH_FIXTURES "/memviz/*.cmh"};
    unsigned n = 0;
    for (size_t k = 0; k < sizeof pat / sizeof *pat; k++) {
        glob_t g;
        if (glob(pat[k], 0, NULL, &g)) continue;
        for (size_t i = 0; i < g.gl_pathc; i++, n++) {
            cmh_snapshot s;
            char err[512];
            int rc = cmh_snapshot_load(g.gl_pathv[i], &s, err, sizeof err);
            if (rc != CMH_OK) fprintf(stderr, "\n  %s\n", err);
            CU_ASSERT_EQUAL(rc, CMH_OK);
            if (rc != CMH_OK) continue;
            CU_ASSERT_EQUAL(s.unverified, 1);
            cmh_snapshot_free(&s);
        }
        globfree(&g);
    }
    CU_ASSERT(n >= 10);
}
static void test_pickle_matrix(void) { matrix_snapshot(1); }

/* Huge declared lengths and wrong versions, hand-made. */
static void test_snapshot_hostile(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/h.cmh", g_dir);
    /* .cmh: the strings array claims 2^32-1 items; a string claims 4 GiB; version 99 */
    const unsigned char arr[] = {0x82, 0xa6, 'f', 'o', 'r', 'm', 'a', 't', 0xa9, 'c', 'u', 'm', 'e', 'm', 'h', 'i', 's', 't',
                                 0xa7, 's', 't', 'r', 'i', 'n', 'g', 's', 0xdd, 0xff, 0xff, 0xff, 0xff};
    const unsigned char str[] = {0x82, 0xa6, 'f', 'o', 'r', 'm', 'a', 't', 0xa9, 'c', 'u', 'm', 'e', 'm', 'h', 'i', 's', 't',
                                 0xa7, 's', 't', 'r', 'i', 'n', 'g', 's', 0x91, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'};
    const unsigned char ver[] = {0x82, 0xa6, 'f', 'o', 'r', 'm', 'a', 't', 0xa9, 'c', 'u', 'm', 'e', 'm', 'h', 'i', 's', 't',
                                 0xa7, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x63};
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, arr, sizeof arr, 1, "cmh array 2^32-1"), 1);
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, str, sizeof str, 1, "cmh str 4 GiB"), 1);
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, ver, sizeof ver, 1, "cmh version 99"), 1);
    /* pickles: protocol 6 and 1, a BINUNICODE8 of 2^62 bytes, a LONG4 of 2 GiB, a frame of 2^60 */
    snprintf(path, sizeof path, "%s/h.pickle", g_dir);
    const unsigned char p6[] = {0x80, 6, '}', '.'};
    const unsigned char p1[] = {0x80, 1, '}', '.'};
    const unsigned char u8[] = {0x80, 4, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0x40, 'a', '.'};
    const unsigned char l4[] = {0x80, 4, 0x8b, 0, 0, 0, 0x80, 1, '.'};
    const unsigned char fr[] = {0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 0x10, '}', '.'};
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, p6, sizeof p6, 1, "pickle protocol 6"), 1);
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, p1, sizeof p1, 1, "pickle protocol 1"), 1);
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, u8, sizeof u8, 1, "pickle BINUNICODE8 2^62"), 1);
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, l4, sizeof l4, 1, "pickle LONG4 2 GiB"), 1);
    CU_ASSERT_EQUAL(try_file(SNAPSHOT, path, fr, sizeof fr, 1, "pickle FRAME 2^60"), 1);
}

/* ---- the flight record ---- */

static void test_flight_matrix(void)
{
    size_t len;
    unsigned char *b = slurp(CMH_FIXTURES "/flight/killed-150.flight", &len), *m = malloc(len);
    char path[128], what[128];
    snprintf(path, sizeof path, "%s/x.cmh.flight", g_dir);
    cmh_snapshot s;
    cmh_recover_info info;
    char err[4600];
    spit(path, b, len);
    CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, &s, &info, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(info.entries, 150);
    CU_ASSERT_EQUAL(info.torn, 0);
    CU_ASSERT_EQUAL(info.unverified, 1); /* version 1, before checksums: still read */
    cmh_snapshot_free(&s);
    /* truncations: inside the header (refused), then through the extents (a copy cut short:
     * what is left is read, never more entries than the whole file's, and the loss counted) */
    unsigned long cuts = 0;
    for (size_t n = 0; n < len; n += n < CMH_FLIGHT_HEADER ? 61 : 8) {
        snprintf(what, sizeof what, "flight cut at %zu", n);
        if (n < CMH_FLIGHT_HEADER) try_file(FLIGHT, path, b, n, 1, what);
        else {
            spit(path, b, n);
            g_tried++;
            int rc = cmh_flight_recover(path, &s, &info, err, sizeof err);
            CU_ASSERT_EQUAL(rc, CMH_OK);
            if (rc == CMH_OK) {
                CU_ASSERT(info.entries <= 150);
                CU_ASSERT(info.truncated > 0 || info.entries == 150);
                exercise(&s);
            }
        }
        cuts++;
    }
    /* a flipped byte every 7 bytes over the header's used part and all the records */
    unsigned long flips = 0, refused = 0, torn = 0;
    const cmh_flight_header *h = (const void *)b;
    size_t hdr_used = offsetof(cmh_flight_header, snapshot_path) + 64;
    for (size_t i = 0; i < len; i += 7) {
        if (i >= hdr_used && i < h->area[0].offset) continue; /* names and padding: any bytes read */
        memcpy(m, b, len);
        m[i] ^= 0xa5;
        snprintf(what, sizeof what, "flight byte %zu", i);
        spit(path, m, len);
        int rc = cmh_flight_recover(path, &s, &info, err, sizeof err);
        g_tried++;
        flips++;
        if (rc == CMH_OK) {
            torn += info.torn;
            exercise(&s);
        } else {
            refused++;
            g_refused++;
            if (!good_error(err, path)) fprintf(stderr, "\n  %s: \"%s\"\n", what, err);
            CU_ASSERT(good_error(err, path));
        }
    }
    /* a torn last record (its writer died mid-append): dropped and counted, the rest read */
    memcpy(m, b, len);
    cmh_flight_header *mh = (void *)m;
    uint64_t end = mh->area[0].offset + (mh->area[0].cursor < mh->area[0].size ? mh->area[0].cursor : mh->area[0].size), at = mh->area[0].offset, last = at;
    while (at < end) {
        const cmh_flight_rec *r = (const void *)(m + at);
        if (!r->len) break;
        last = at;
        at += r->len;
    }
    ((cmh_flight_rec *)(void *)(m + last))->commit = 0; /* (len and commit: where version 1 has them too) */
    spit(path, m, len);
    CU_ASSERT_EQUAL(cmh_flight_recover(path, &s, &info, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(info.torn, 1);
    CU_ASSERT_EQUAL(info.entries, 149);
    cmh_snapshot_free(&s);
    /* hostile headers: a newer version, 1000 extents, an extent of 2^63 bytes, a record of 4 GiB */
    memcpy(m, b, len);
    mh->version = CMH_FLIGHT_VERSION + 1;
    CU_ASSERT_EQUAL(try_file(FLIGHT, path, m, len, 1, "flight version newer"), 1);
    memcpy(m, b, len);
    mh->version = 0;
    CU_ASSERT_EQUAL(try_file(FLIGHT, path, m, len, 1, "flight version 0"), 1);
    memcpy(m, b, len);
    mh->nareas = 1000;
    CU_ASSERT_EQUAL(try_file(FLIGHT, path, m, len, 1, "flight 1000 extents"), 1);
    memcpy(m, b, len);
    mh->area[0].size = 1ull << 63;
    CU_ASSERT_EQUAL(try_file(FLIGHT, path, m, len, 1, "flight extent 2^63"), 1);
    memcpy(m, b, len);
    ((cmh_flight_rec *)(void *)(m + mh->area[0].offset))->len = 0xfffffff8u;
    spit(path, m, len);
    if (cmh_flight_recover(path, &s, &info, err, sizeof err) == CMH_OK) {
        CU_ASSERT(info.torn >= 1); /* a length past the extent: not trusted, nor what follows */
        cmh_snapshot_free(&s);
    } else CU_ASSERT(good_error(err, path));
    fprintf(stderr, "[flight: %zu bytes, %lu truncations, %lu byte flips (%lu refused, %lu torn records dropped)] ", len, cuts, flips,
            refused, torn);
    free(m);
    free(b);
}

/* The fixture as today's recorder writes it (version 2): each record's head grows to 16 bytes
 * and carries the CRC-32C of its body; the extents are packed after the header. */
static unsigned char *flight_v2(const unsigned char *b, size_t len, size_t *out_len)
{
    unsigned char *o = calloc(1, len * 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    memcpy(o, b, CMH_FLIGHT_HEADER);
    cmh_flight_header *h = (void *)o;
    h->version = 2;
    uint64_t out = CMH_FLIGHT_HEADER;
    for (uint32_t a = 0; a < h->nareas; a++) {
        cmh_flight_area *ar = &h->area[a];
        if (ar->dropped || !ar->size) continue;
        uint64_t end = ar->cursor < ar->size ? ar->cursor : ar->size, start = out;
        if (ar->sealed && ar->sealed < end) end = ar->sealed;
        for (uint64_t at = 0; at + 8 <= end;) {
            const cmh_flight_rec *r = (const void *)(b + ar->offset + at); /* len and commit only */
            if (!r->len || r->len % 8 || r->len > end - at) break;
            cmh_flight_rec *n = (void *)(o + out);
            n->len = r->len + 8;
            n->commit = r->commit;
            memcpy(n + 1, (const unsigned char *)r + CMH_FLIGHT_HEAD_V1, r->len - CMH_FLIGHT_HEAD_V1);
            n->sum = cmh_crc32c(0, n + 1, r->len - CMH_FLIGHT_HEAD_V1);
            out += n->len;
            at += r->len;
        }
        ar->offset = start;
        ar->size = ar->cursor = out - start;
        ar->sealed = 0;
    }
    *out_len = out;
    return o;
}

/* Version 2: a record whose body was damaged is dropped and counted, exactly that one; every
 * other record still reads.  A flipped byte in every record's body in turn, then in its sum. */
static void test_flight_checksums(void)
{
    size_t len0, len;
    unsigned char *b0 = slurp(CMH_FIXTURES "/flight/killed-150.flight", &len0);
    unsigned char *b = flight_v2(b0, len0, &len), *m = malloc(len);
    free(b0);
    char path[128], err[4600];
    snprintf(path, sizeof path, "%s/v2.cmh.flight", g_dir);
    cmh_snapshot s;
    cmh_recover_info info;
    spit(path, b, len);
    CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, &s, &info, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(info.entries, 150);
    CU_ASSERT_EQUAL(info.torn, 0);
    CU_ASSERT_EQUAL(info.damaged, 0);
    CU_ASSERT_EQUAL(info.unverified, 0);
    cmh_snapshot_free(&s);
    const cmh_flight_header *h = (const void *)b;
    unsigned long records = 0, exact = 0, entries = 0;
    for (uint32_t a = 0; a < h->nareas; a++) {
        const cmh_flight_area *ar = &h->area[a];
        if (ar->dropped || !ar->size) continue;
        for (uint64_t at = ar->offset; at < ar->offset + ar->cursor;) {
            const cmh_flight_rec *r = (const void *)(b + at);
            uint32_t type = r->commit & 0xff;
            /* an entry that is its only copy (the ring's backfill at start may append one twice) */
            int sole = 0;
            if (type == CMH_FR_ENTRY) {
                const cmh_fr_entry *e = (const void *)(r + 1);
                sole = 1;
                for (uint64_t q = ar->offset; q < ar->offset + ar->cursor;) {
                    const cmh_flight_rec *o = (const void *)(b + q);
                    const cmh_fr_entry *f = (const void *)(o + 1);
                    if (q != at && (o->commit & 0xff) == CMH_FR_ENTRY && f->slot == e->slot && f->seq == e->seq) sole = 0;
                    q += o->len;
                }
            }
            for (int where = 0; where < 2; where++) { /* the body's middle byte; the sum */
                memcpy(m, b, len);
                m[where ? at + offsetof(cmh_flight_rec, sum) + 1 : at + sizeof *r + (r->len - sizeof *r) / 2] ^= 0x20;
                spit(path, m, len);
                int rc = cmh_flight_recover(path, &s, &info, err, sizeof err);
                CU_ASSERT_EQUAL(rc, CMH_OK);
                if (rc != CMH_OK) {
                    fprintf(stderr, "\n  %s\n", err);
                    continue;
                }
                int ok = info.damaged == 1 && info.torn == 0 && info.entries == 150u - (unsigned)sole;
                if (!ok)
                    fprintf(stderr, "\n  record at %llu (type %u, %s): %llu damaged, %llu torn, %llu entries\n", (unsigned long long)at,
                            type, where ? "sum" : "body", (unsigned long long)info.damaged, (unsigned long long)info.torn,
                            (unsigned long long)info.entries);
                CU_ASSERT(ok);
                exact += (unsigned long)ok;
                cmh_snapshot_free(&s);
            }
            records++;
            entries += type == CMH_FR_ENTRY;
            at += r->len;
        }
    }
    CU_ASSERT(entries >= 150);
    CU_ASSERT_EQUAL(exact, 2 * records);
    fprintf(stderr, "[flight v2: %zu bytes, %lu records, each damaged in its body and in its sum: %lu dropped alone and counted] ",
            len, records, exact);
    free(m);
    free(b);
}

/* The fixture as version 2 (*len bytes), with room beside it for a rewrite (*o, zeroed) and
 * for a damaged copy (*m). */
static unsigned char *fixture_v2_with_room(size_t *len, unsigned char **o, unsigned char **m)
{
    size_t len0;
    unsigned char *b0 = slurp(CMH_FIXTURES "/flight/killed-150.flight", &len0);
    unsigned char *b = flight_v2(b0, len0, len);
    free(b0);
    *o = calloc(1, *len);
    *m = malloc(*len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*m);
    return b;
}

/* The v2 file b rewritten into o as version `version`: its header, then each kept area's records
 * one after another, each written at o + out by fn (which returns its length), the areas moved
 * to where their records now stand.  Returns the bytes written. */
typedef uint64_t (*rec_writer)(void *arg, const cmh_flight_rec *r, unsigned char *o, uint64_t out);
static uint64_t flight_rewrite(const unsigned char *b, unsigned char *o, uint32_t version, rec_writer fn, void *arg)
{
    memcpy(o, b, CMH_FLIGHT_HEADER);
    cmh_flight_header *h = (void *)o;
    h->version = version;
    uint64_t out = CMH_FLIGHT_HEADER;
    for (uint32_t a = 0; a < h->nareas; a++) {
        cmh_flight_area *ar = &h->area[a];
        if (ar->dropped || !ar->size) continue;
        uint64_t start = out;
        for (uint64_t at = ar->offset; at < ar->offset + ar->cursor;) {
            const cmh_flight_rec *r = (const void *)(b + at);
            out += fn(arg, r, o, out);
            at += r->len;
        }
        ar->offset = start;
        ar->size = ar->cursor = out - start;
    }
    return out;
}

/* What a rewrite made short: how many records of each kind, and where the first of each is. */
typedef struct packed {
    unsigned long n[2];
    uint64_t first[2];
} packed;

/* Version 3's writer: an entry that fits as CMH_FR_ENTRY_SHORT (kind 0), any other record as it is. */
static uint64_t pack_v3(void *arg, const cmh_flight_rec *r, unsigned char *o, uint64_t out)
{
    packed *pk = arg;
    cmh_flight_rec *n = (void *)(o + out);
    cmh_fr_entry_short p;
    if ((r->commit & 0xff) == CMH_FR_ENTRY && cmh_fr_entry_pack((const cmh_fr_entry *)(const void *)(r + 1), &p)) {
        n->len = sizeof *n + sizeof p;
        n->commit = CMH_FLIGHT_COMMIT | CMH_FR_ENTRY_SHORT;
        memcpy(n + 1, &p, sizeof p);
        n->sum = cmh_crc32c(0, &p, sizeof p);
        if (!pk->n[0]++) pk->first[0] = out;
    } else memcpy(n, r, r->len);
    return n->len;
}

/* Version 4's writer: an entry that fits as a compact record, a short entry (kind 0) or, for a
 * segment's free without a stack, a short free (kind 1); any other record as it is. */
static uint64_t pack_v4(void *arg, const cmh_flight_rec *r, unsigned char *o, uint64_t out)
{
    packed *pk = arg;
    const cmh_fr_entry *e = (const void *)(r + 1);
    cmh_fr_entry_short p;
    uint32_t *n = (void *)(o + out);
    if ((r->commit & 0xff) == CMH_FR_ENTRY && cmh_fr_entry_pack(e, &p)) {
        int fr = e->action == CMH_ACT_SEGMENT_FREE && !e->stack;
        uint32_t body = fr ? CMH_FR_FREE_SHORT_BODY : sizeof p, l = CMH_FR_COMPACT_HEAD + body;
        n[0] = CMH_FR_COMPACT | (uint32_t)(fr ? CMH_FR_FREE_SHORT : CMH_FR_ENTRY_SHORT) << 24 | l;
        n[1] = cmh_crc32c(0, &p, body) ^ n[0] ^ CMH_FR_COMPACT_KEY;
        CU_ASSERT(n[1] != 0);
        memcpy(n + 2, &p, body);
        if (!pk->n[fr]++) pk->first[fr] = out;
        return l;
    }
    memcpy(n, r, r->len);
    return r->len;
}

/* The v2 file b (len bytes) and a rewrite o of it (out bytes), each written to path and
 * recovered, into *s2 and *sn (the caller's to free): the rewrite recovers the fixture's 150
 * entries, none torn or damaged.  1 when its entries are the v2 file's, entry for entry (time,
 * address, sizes, stream, thread, action, kind, flags). */
static int recover_alike(const char *path, const unsigned char *b, size_t len, const unsigned char *o, uint64_t out,
                         cmh_snapshot *s2, cmh_snapshot *sn)
{
    char err[4600];
    cmh_recover_info info;
    spit(path, b, len);
    CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, s2, &info, err, sizeof err), CMH_OK);
    spit(path, o, out);
    CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, sn, &info, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(info.entries, 150);
    CU_ASSERT_EQUAL(info.torn + info.damaged, 0);
    CU_ASSERT_EQUAL(sn->nentries, s2->nentries);
    int same = sn->nentries == s2->nentries;
    for (uint32_t i = 0; same && i < s2->nentries; i++) {
        const cmh_entry *x = &s2->entries[i], *y = &sn->entries[i];
        same = cmh_entry_time(s2, x) == cmh_entry_time(sn, y) && cmh_entry_addr(s2, x) == cmh_entry_addr(sn, y) &&
               cmh_entry_size(s2, x) == cmh_entry_size(sn, y) && cmh_entry_requested(s2, x) == cmh_entry_requested(sn, y) &&
               cmh_entry_stream(s2, x) == cmh_entry_stream(sn, y) && cmh_entry_thread(s2, x) == cmh_entry_thread(sn, y) &&
               x->action == y->action && x->kind == y->kind && x->flags == y->flags;
    }
    return same;
}

/* Version 3: the v2 file with every entry that fits rewritten as CMH_FR_ENTRY_SHORT (as
 * today's recorder writes them) recovers entry for entry the same as the v2 file; a short
 * record damaged in its body is dropped alone and counted; a short body with its spare bits set
 * is refused as an entry. */
static void test_flight_short_entries(void)
{
    size_t len;
    unsigned char *o, *m, *b = fixture_v2_with_room(&len, &o, &m);
    packed pk = {{0}, {0}};
    uint64_t out = flight_rewrite(b, o, 3, pack_v3, &pk), first_short = pk.first[0];
    unsigned long shorts = pk.n[0];
    char path[128], err[4600];
    cmh_snapshot s2, s3;
    cmh_recover_info info;
    snprintf(path, sizeof path, "%s/v3.cmh.flight", g_dir);
    CU_ASSERT(shorts >= 140); /* the fixture's entries are plain allocations and frees */
    CU_ASSERT(recover_alike(path, b, len, o, out, &s2, &s3));
    CU_ASSERT_EQUAL(s3.ntraces, s2.ntraces);
    cmh_snapshot_free(&s2);
    cmh_snapshot_free(&s3);
    /* a flipped byte in a short record's body: that record alone */
    memcpy(m, o, out);
    m[first_short + sizeof(cmh_flight_rec) + 17] ^= 0x20;
    spit(path, m, out);
    CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, &s3, &info, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(info.damaged, 1);
    CU_ASSERT_EQUAL(info.entries, 149);
    cmh_snapshot_free(&s3);
    /* spare bits set (and the sum made to match): not an entry this reader can read */
    memcpy(m, o, out);
    cmh_flight_rec *r = (void *)(m + first_short);
    ((cmh_fr_entry_short *)(void *)(r + 1))->w[0] |= 1ull << 63;
    r->sum = cmh_crc32c(0, r + 1, sizeof(cmh_fr_entry_short));
    spit(path, m, out);
    CU_ASSERT_NOT_EQUAL(cmh_flight_recover(path, &s3, &info, err, sizeof err), CMH_OK);
    CU_ASSERT(good_error(err, path));
    /* what does not fit stays whole: a stream, requested != size, a 64 GiB size, a high address */
    cmh_fr_entry e = {1, 0, 7, 123, 0x7f0000001000ull, 4096, 4096, 0, 5, 3, 0, 0, 0, {0}};
    cmh_fr_entry_short p;
    CU_ASSERT(cmh_fr_entry_pack(&e, &p));
    cmh_fr_entry back;
    CU_ASSERT(cmh_fr_entry_read(CMH_FR_ENTRY_SHORT, &p, sizeof p, &back) && !memcmp(&back, &e, sizeof e));
    cmh_fr_entry e2 = e;
    e2.stream = 1;
    CU_ASSERT(!cmh_fr_entry_pack(&e2, &p));
    e2 = e, e2.requested = 100;
    CU_ASSERT(!cmh_fr_entry_pack(&e2, &p));
    e2 = e, e2.size = e2.requested = 1ull << 36;
    CU_ASSERT(!cmh_fr_entry_pack(&e2, &p));
    e2 = e, e2.addr = 1ull << 48;
    CU_ASSERT(!cmh_fr_entry_pack(&e2, &p));
    e2 = e, e2.seq = 1ull << 44;
    CU_ASSERT(!cmh_fr_entry_pack(&e2, &p));
    fprintf(stderr, "[flight v3: %lu of the entries short, %llu bytes against %zu] ", shorts, (unsigned long long)out, len);
    free(m);
    free(o);
    free(b);
}

/* The matrices above ran: a reader refused inputs, as it must refuse every truncation. */
static void test_totals(void)
{
    fprintf(stderr, "[%lu bad inputs tried, %lu refused] ", g_tried, g_refused);
    CU_ASSERT(g_tried > 0);
    CU_ASSERT(g_refused > 0 && g_refused <= g_tried);
}

/* Version 4: the v2 file with every entry that fits rewritten as the recorder writes them now:
 * a compact head (8 bytes), the body of a short entry, or of a short free (the free of a
 * segment without a stack, its size left out) recovers entry for entry the same as the v2 file,
 * the frees' sizes included.  A compact record damaged in its body or its commit word is dropped
 * alone and counted damaged; one whose commit word is 0 (its writer died before it) is torn; a
 * short free of any other action is refused. */
/* The fixture's frees carry their allocation's stack (context alloc): made stackless, as context
 * none writes them, so that the v2 file and its rewrite say the same.  Returns the earliest time. */
static int64_t frees_stackless(unsigned char *b)
{
    const cmh_flight_header *hb = (const void *)b;
    int64_t t0 = INT64_MAX;
    for (uint32_t a = 0; a < hb->nareas; a++) {
        const cmh_flight_area *ar = &hb->area[a];
        if (ar->dropped || !ar->size) continue;
        for (uint64_t at = ar->offset; at < ar->offset + ar->cursor;) {
            cmh_flight_rec *r = (void *)(b + at);
            cmh_fr_entry *e = (void *)(r + 1);
            if ((r->commit & 0xff) == CMH_FR_ENTRY && e->action == CMH_ACT_SEGMENT_FREE) {
                e->stack = 0;
                r->sum = cmh_crc32c(0, e, sizeof *e);
            }
            if ((r->commit & 0xff) == CMH_FR_ENTRY && e->ticks > 0 && e->ticks < t0) t0 = e->ticks;
            at += r->len;
        }
    }
    return t0;
}

/* Each byte of at[] flipped in turn (one record damaged, the rest read), then the commit word at
 * torn zeroed (that record torn): the 149 entries of the fixture less the one, every time. */
static void damage_each(const char *path, unsigned char *m, const unsigned char *o, uint64_t out, const uint64_t *at,
                        int nat, uint64_t torn)
{
    char err[4600];
    cmh_snapshot x;
    cmh_recover_info info;
    for (int k = 0; k <= nat; k++) {
        memcpy(m, o, out);
        if (k < nat) m[at[k]] ^= 0x20;
        else memset(m + torn, 0, 4);
        spit(path, m, out);
        CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, &x, &info, err, sizeof err), CMH_OK);
        CU_ASSERT_EQUAL(info.damaged, k < nat ? 1u : 0u);
        CU_ASSERT_EQUAL(info.torn, k < nat ? 0u : 1u);
        CU_ASSERT_EQUAL(info.entries, 149);
        cmh_snapshot_free(&x);
    }
}

static void test_flight_compact(void)
{
    size_t len;
    unsigned char *o, *m, *b = fixture_v2_with_room(&len, &o, &m);
    frees_stackless(b);
    packed pk = {{0}, {0}};
    uint64_t out = flight_rewrite(b, o, 4, pack_v4, &pk), first_alloc = pk.first[0], first_free = pk.first[1];
    unsigned long allocs = pk.n[0], frees = pk.n[1];
    char path[128], err[4600];
    cmh_snapshot s2, s4;
    cmh_recover_info info;
    snprintf(path, sizeof path, "%s/v4.cmh.flight", g_dir);
    CU_ASSERT(allocs >= 70 && frees >= 40); /* the fixture's entries are plain allocations and frees */
    CU_ASSERT(recover_alike(path, b, len, o, out, &s2, &s4));
    CU_ASSERT_EQUAL(s4.nsegments, s2.nsegments);
    unsigned long freed_bytes = 0;
    for (uint32_t i = 0; i < s4.nentries; i++)
        if (s4.entries[i].action == CMH_ACT_SEGMENT_FREE) freed_bytes += cmh_entry_size(&s4, &s4.entries[i]);
    CU_ASSERT(freed_bytes > 0); /* the frees' sizes came from their segments */
    cmh_snapshot_free(&s2);
    cmh_snapshot_free(&s4);
    /* damaged: a byte of each kind's body, a commit word's; torn: a commit word of 0 */
    uint64_t at_of[4] = {first_alloc + 8 + 9, first_free + 8 + 9, first_alloc + 4, first_free + 5};
    damage_each(path, m, o, out, at_of, 4, first_alloc + 4);
    /* a short free that is not a segment's free (its sum made to match): refused */
    memcpy(m, o, out);
    uint32_t *n = (void *)(m + first_free);
    cmh_fr_entry_short *p = (void *)(n + 2);
    p->w[0] = (p->w[0] & ~(15ull << 51)) | (uint64_t)CMH_ACT_SEGMENT_ALLOC << 51;
    n[1] = cmh_crc32c(0, p, CMH_FR_FREE_SHORT_BODY) ^ n[0] ^ CMH_FR_COMPACT_KEY;
    spit(path, m, out);
    CU_ASSERT_NOT_EQUAL(cmh_flight_recover(path, &s4, &info, err, sizeof err), CMH_OK);
    CU_ASSERT(good_error(err, path));
    /* a version-3 reader's view: the same file marked version 3 reads no compact record */
    memcpy(m, o, out);
    ((cmh_flight_header *)(void *)m)->version = 3;
    spit(path, m, out);
    if (cmh_flight_recover(path, &s4, &info, err, sizeof err) == CMH_OK) {
        CU_ASSERT(info.entries < 150);
        cmh_snapshot_free(&s4);
    }
    fprintf(stderr, "[flight v4: %lu allocations of 40 bytes, %lu frees of 32, %llu bytes against %zu] ", allocs, frees,
            (unsigned long long)out, len);
    free(m);
    free(o);
    free(b);
}

/* Version 6's writer: an entry that fits as a tiny record (kind 0), or, for a segment's free
 * without a stack, a tiny free (kind 1), its time after the time base pk->t0; any other record as
 * it is. */
typedef struct packed6 {
    packed pk;
    int64_t t0;
} packed6;
static uint64_t pack_v6(void *arg, const cmh_flight_rec *r, unsigned char *o, uint64_t out)
{
    packed6 *pk = arg;
    const cmh_fr_entry *e = (const void *)(r + 1);
    uint32_t *n = (void *)(o + out);
    if ((r->commit & 0xff) == CMH_FR_ENTRY && cmh_fr_tiny_fits(e) && cmh_fr_tiny_time_fits(e->ticks, pk->t0)) {
        int fr = e->action == CMH_ACT_SEGMENT_FREE && !e->stack;
        uint32_t l = fr ? CMH_FR_FREE_TINY_LEN : CMH_FR_ENTRY_TINY_LEN;
        uint64_t w[3];
        cmh_fr_tiny_body(e, pk->t0, w);
        n[0] = cmh_fr_tiny_first(e, fr);
        n[1] = cmh_crc32c(0, w, l - CMH_FR_COMPACT_HEAD) ^ n[0] ^ CMH_FR_COMPACT_KEY;
        CU_ASSERT(n[1] != 0);
        memcpy(n + 2, w, l - CMH_FR_COMPACT_HEAD);
        if (!pk->pk.n[fr]++) pk->pk.first[fr] = out;
        return l;
    }
    memcpy(n, r, r->len);
    return r->len;
}

/* Version 6: the v2 file with every entry that fits rewritten as tiny records (32 bytes, a
 * segment's free 24: the fields in the head's first word, the time after the extent's area_t0,
 * the address without its low 8 bits) recovers entry for entry the same as the v2 file, the
 * frees' sizes included.  A tiny record damaged in its head's first word, its body or its commit
 * word is dropped alone and counted damaged (its length is its type's: what follows is read); one
 * whose commit word is 0 is torn; one that holds no entry (seq 0: its writer wrote the entry
 * again the long way) is skipped, not counted; a tiny free of another action is dropped and
 * counted damaged.  The packing: what does not fit is not packed. */
static void test_flight_tiny(void)
{
    size_t len;
    unsigned char *o, *m, *b = fixture_v2_with_room(&len, &o, &m);
    int64_t t0 = frees_stackless(b);
    packed6 pk = {{{0}, {0}}, t0 - 1000};
    uint64_t out = flight_rewrite(b, o, 6, pack_v6, &pk), first_alloc = pk.pk.first[0], first_free = pk.pk.first[1];
    cmh_flight_header *ho = (void *)o;
    for (uint32_t a = 0; a < CMH_FLIGHT_EXTENTS; a++) ho->area_t0[a] = pk.t0;
    unsigned long allocs = pk.pk.n[0], frees = pk.pk.n[1];
    char path[128], err[4600];
    cmh_snapshot s2, s6;
    cmh_recover_info info;
    snprintf(path, sizeof path, "%s/v6.cmh.flight", g_dir);
    CU_ASSERT(allocs >= 70 && frees >= 40); /* the fixture's entries are plain allocations and frees */
    CU_ASSERT(recover_alike(path, b, len, o, out, &s2, &s6));
    CU_ASSERT_EQUAL(s6.nsegments, s2.nsegments);
    unsigned long freed_bytes = 0;
    for (uint32_t i = 0; i < s6.nentries; i++)
        if (s6.entries[i].action == CMH_ACT_SEGMENT_FREE) freed_bytes += cmh_entry_size(&s6, &s6.entries[i]);
    CU_ASSERT(freed_bytes > 0); /* the frees' sizes came from their segments */
    cmh_snapshot_free(&s2);
    cmh_snapshot_free(&s6);
    /* damaged: a field of each kind's head word, a byte of each kind's body, a commit word's;
     * torn: a commit word of 0 */
    uint64_t at_of[6] = {first_alloc + 1, first_free + 2, first_alloc + 8 + 9, first_free + 8 + 12, first_alloc + 4, first_free + 5};
    damage_each(path, m, o, out, at_of, 6, first_alloc + 4);
    /* no entry (seq 0, its sum made to match): skipped, nothing counted */
    memcpy(m, o, out);
    uint32_t *n = (void *)(m + first_alloc);
    uint64_t *w = (void *)(n + 2);
    w[0] &= ~((1ull << 42) - 1);
    n[1] = cmh_crc32c(0, w, CMH_FR_ENTRY_TINY_LEN - CMH_FR_COMPACT_HEAD) ^ n[0] ^ CMH_FR_COMPACT_KEY;
    spit(path, m, out);
    CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, &s6, &info, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(info.damaged + info.torn, 0);
    CU_ASSERT_EQUAL(info.entries, 149);
    cmh_snapshot_free(&s6);
    /* a tiny free that is not a segment's free (its sum made to match): dropped, counted */
    memcpy(m, o, out);
    n = (void *)(m + first_free);
    n[0] = (n[0] & ~(15u << 14)) | (uint32_t)CMH_ACT_SEGMENT_ALLOC << 14;
    n[1] = cmh_crc32c(0, n + 2, CMH_FR_FREE_TINY_LEN - CMH_FR_COMPACT_HEAD) ^ n[0] ^ CMH_FR_COMPACT_KEY;
    spit(path, m, out);
    CU_ASSERT_EQUAL_FATAL(cmh_flight_recover(path, &s6, &info, err, sizeof err), CMH_OK);
    CU_ASSERT_EQUAL(info.damaged, 1);
    CU_ASSERT_EQUAL(info.entries, 149);
    cmh_snapshot_free(&s6);
    /* a version-5 reader's view: the same file marked version 5 reads a tiny head's fields as its
     * length: no tiny entry is read (so version 5 readers refuse version 6) */
    memcpy(m, o, out);
    ((cmh_flight_header *)(void *)m)->version = 5;
    spit(path, m, out);
    if (cmh_flight_recover(path, &s6, &info, err, sizeof err) == CMH_OK) {
        CU_ASSERT(info.entries < 150);
        cmh_snapshot_free(&s6);
    }
    /* the packing, both ways; what does not fit stays long */
    cmh_fr_entry e = {3, 0, 77, 5000, 0x7f0000001200ull, 4096, 4096, 0, 5, 4095, CMH_ACT_SEGMENT_ALLOC, 2, 9, {0}}, back;
    cmh_fr_entry_short sh;
    uint64_t tw[3];
    CU_ASSERT(cmh_fr_tiny_fits(&e) && cmh_fr_tiny_time_fits(e.ticks, 1000));
    cmh_fr_tiny_body(&e, 1000, tw);
    uint32_t ty = CMH_FR_ENTRY_TINY;
    CU_ASSERT_EQUAL(cmh_fr_tiny_read(&ty, cmh_fr_tiny_first(&e, 0), tw, 24, 1000, &sh), 1);
    CU_ASSERT(ty == CMH_FR_ENTRY_SHORT && cmh_fr_entry_read(ty, &sh, sizeof sh, &back) && !memcmp(&back, &e, sizeof e));
    CU_ASSERT(!cmh_fr_tiny_time_fits(e.ticks, 5001) && !cmh_fr_tiny_time_fits(e.ticks, 0) &&
              !cmh_fr_tiny_time_fits(1000 + (1ll << 40), 1000) && cmh_fr_tiny_time_fits(999 + (1ll << 40), 1000));
    cmh_fr_entry e2 = e;
    e2.thread = 4096;
    CU_ASSERT(!cmh_fr_tiny_fits(&e2));
    e2 = e, e2.addr += 8;
    CU_ASSERT(!cmh_fr_tiny_fits(&e2));
    e2 = e, e2.seq = 1ull << 42;
    CU_ASSERT(!cmh_fr_tiny_fits(&e2));
    e2 = e, e2.seq = 0;
    CU_ASSERT(!cmh_fr_tiny_fits(&e2));
    e2 = e, e2.stream = 1;
    CU_ASSERT(!cmh_fr_tiny_fits(&e2));
    e2 = e, e2.size = e2.requested = 1ull << 36;
    CU_ASSERT(!cmh_fr_tiny_fits(&e2));
    CU_ASSERT_EQUAL(cmh_fr_tiny_read(&ty, cmh_fr_tiny_first(&e, 0), tw, 16, 1000, &sh), 0); /* a length not its type's */
    fprintf(stderr, "[flight v6: %lu allocations of 32 bytes, %lu frees of 24, %llu bytes against %zu] ", allocs, frees,
            (unsigned long long)out, len);
    free(m);
    free(o);
    free(b);
}

int main(void)
{
    if (!mkdtemp(g_dir)) return 1;
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("badinput", NULL, NULL);
    CMH_ADD_TEST(s, test_cmh_matrix);
    CMH_ADD_TEST(s, test_cmh_checksummed_matrix);
    CMH_ADD_TEST(s, test_cmh_fixtures_unverified);
    CMH_ADD_TEST(s, test_pickle_matrix);
    CMH_ADD_TEST(s, test_snapshot_hostile);
    CMH_ADD_TEST(s, test_flight_matrix);
    CMH_ADD_TEST(s, test_flight_checksums);
    CMH_ADD_TEST(s, test_flight_short_entries);
    CMH_ADD_TEST(s, test_flight_compact);
    CMH_ADD_TEST(s, test_flight_tiny);
    CMH_ADD_TEST(s, test_totals);
    int rc = cmh_test_main();
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) rc = 1;
    return rc;
}
