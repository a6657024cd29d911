/*
 * pickle_writer.h - the pickle writer's state and its opcode-level steps, shared by the writing
 * of PyTorch's schema (pickle_write.c) and of cumemhist's own `cumemhist` dict
 * (pickle_side_write.c).  Private to snapshot/.
 *
 * The steps are inline here, as they were inline in pickle_write.c: most of them write an opcode
 * and a byte or two, once per field of every entry, where a call each would cost more than the
 * write.  pickle_write.c says which shapes they give (the ones CPython's pickler gives).
 */
#ifndef CMH_PICKLE_WRITER_H
#define CMH_PICKLE_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/snapshot.h"

#define FRAME_TARGET (64 * 1024)
#define BATCH 1000

enum {
    W_SEGMENTS, W_DEVICE_TRACES, W_ALLOCATOR_SETTINGS, W_EXTERNAL_ANNOTATIONS, W_DEVICE, W_ADDRESS,
    W_TOTAL_SIZE, W_ALLOCATED_SIZE, W_ACTIVE_SIZE, W_REQUESTED_SIZE, W_STREAM, W_SEGMENT_TYPE,
    W_SEGMENT_POOL_ID, W_IS_EXPANDABLE, W_FRAMES, W_BLOCKS, W_SIZE, W_STATE, W_ACTION, W_ADDR, W_DEVICE_FREE,
    W_TIME_US, W_COMPILE_CONTEXT, W_USER_METADATA, W_NAME, W_FILENAME, W_LINE, W_STAGE, W_START, W_END,
    W_SMALL, W_LARGE, W_INACTIVE, W_ACTIVE_ALLOCATED, W_ACTIVE_PENDING_FREE, W_CMH_CODE, W_CMH_REQUESTED,
    W_CMH_IMPLIED, W_CMH_KIND, W_CMH_WHOLE, W_CUMEMHIST, W_SOURCE, W_PID, W_DROPPED, W_POOL_SAMPLES, W_HOST, W_CMDLINE,
    W_MODULES, W_FRAME_MODULES, W_THREADS, W_MARKS, W_THREAD_IDS, W_POOL_ID, W_MEMINFO, W_START_NS, W_DUMP_NS, W_PROCESS, W_ENDING, W_DROPPED_OOMS, W_RETRIED_OOMS, W_CLOCK_ORIGIN_NS, W_POOL_SAMPLE_TAGS, W_POOLS_READ_AT_DUMP, W_CONTEXT, W_VMM_UNMAPPED, W_VMM_MAPS, W_FREE_FRAMES,
    W_HISTORY_LOST, W_DRIVER_ERRORS, W_DEVICE_IDS, W_VMM_RELEASED, W_NKEYS
};
extern const char *const pkw_keys[W_NKEYS];

typedef struct pw {
    FILE *fp;
    unsigned char *buf; /* the current frame */
    size_t n, cap;
    int failed;
    int nomem; /* failed for memory, not for the stream */
    uint32_t next_memo;
    uint32_t *str_memo;   /* model string id -> memo index + 1 */
    uint32_t key_memo[W_NKEYS];
    uint32_t *frame_memo; /* frame id -> memo index + 1 */
    uint32_t *stack_memo; /* stack id -> memo index + 1 */
    uint32_t *action_memo;
    int pooled; /* entries say their pool_id (cmh_snapshot_entry_pools) */
} pw;

/* pickle_write.c: the buffer grown for n more bytes (-1: out of memory, w->nomem set); the
 * current frame out to the stream. */
int pkw_grow(pw *w, size_t n);
void pkw_flush_frame(pw *w);

/* Most writes are an opcode and a few bytes: copied inline, not through a call to memcpy. */
static inline void raw_small(pw *w, const unsigned char *p, size_t n) /* n <= 16 */
{
    if (w->n + n > w->cap && pkw_grow(w, n)) return;
    unsigned char *d = w->buf + w->n;
    for (size_t i = 0; i < n; i++) d[i] = p[i];
    w->n += n;
}

/* Out of line: inlined into a caller whose string is a known short literal, GCC 12's -O3
 * -Warray-bounds reads this unreachable copy as one past the literal's end (a Release build
 * failed on it under -Werror). */
static __attribute__((noinline, unused)) void raw_big(pw *w, const void *p, size_t n)
{
    if (w->n + n > w->cap && pkw_grow(w, n)) return;
    memcpy(w->buf + w->n, p, n);
    w->n += n;
}

static inline void raw(pw *w, const void *p, size_t n)
{
    if (n <= 16) raw_small(w, p, n);
    else raw_big(w, p, n);
}

/* Called between opcodes: a frame closes once it holds FRAME_TARGET bytes. */
static inline void boundary(pw *w)
{
    if (w->n >= FRAME_TARGET) pkw_flush_frame(w);
}

static inline void op(pw *w, unsigned char c)
{
    raw(w, &c, 1);
    boundary(w);
}

static inline void w_int(pw *w, int64_t v)
{
    unsigned char b[10];
    if (v >= 0 && v <= 0xff) {
        b[0] = 'K';
        b[1] = (unsigned char)v;
        raw(w, b, 2);
    } else if (v >= 0 && v <= 0xffff) {
        b[0] = 'M';
        b[1] = (unsigned char)v;
        b[2] = (unsigned char)(v >> 8);
        raw(w, b, 3);
    } else if (v >= -2147483648ll && v <= 2147483647ll) {
        b[0] = 'J';
        for (int i = 0; i < 4; i++) b[1 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        raw(w, b, 5);
    } else {
        /* LONG1: little-endian two's complement in the fewest bytes that keep the sign */
        int n = 8;
        while (n > 1) {
            int64_t top_ = v >> (8 * (n - 1) - 1);
            if (top_ == 0 || top_ == -1) n--;
            else break;
        }
        b[0] = 0x8a;
        b[1] = (unsigned char)n;
        for (int i = 0; i < n; i++) b[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        raw_small(w, b, (size_t)n + 2); /* (raw: GCC at -O1 under ASan took its memcpy, for n > 16, for reachable) */
    }
    boundary(w);
}

static inline void memoize(pw *w, uint32_t *slot)
{
    op(w, 0x94);
    *slot = ++w->next_memo; /* memo index + 1 */
}

static inline void get(pw *w, uint32_t slot)
{
    uint32_t i = slot - 1;
    unsigned char b[5];
    if (i < 256) {
        b[0] = 'h';
        b[1] = (unsigned char)i;
        raw(w, b, 2);
    } else {
        b[0] = 'j';
        for (int k = 0; k < 4; k++) b[1 + k] = (unsigned char)(i >> (8 * k));
        raw(w, b, 5);
    }
    boundary(w);
}

/* A string's opcode and length, n bytes of UTF-8 to follow: SHORT_BINUNICODE below 256 bytes,
 * BINUNICODE above, as CPython's pickler writes them. */
static inline void str_head(pw *w, size_t n)
{
    unsigned char h[5];
    if (n < 256) {
        h[0] = 0x8c;
        h[1] = (unsigned char)n;
        raw(w, h, 2);
    } else {
        h[0] = 'X';
        for (int i = 0; i < 4; i++) h[1 + i] = (unsigned char)(n >> (8 * i));
        raw(w, h, 5);
    }
}

/* A float as BINFLOAT: 'G' and the double's 8 bytes, big-endian. */
static inline void w_float(pw *w, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, 8);
    unsigned char b[9] = {'G'};
    for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(bits >> (56 - 8 * i));
    raw(w, b, 9);
    boundary(w);
}

static inline void str_body(pw *w, const char *s)
{
    size_t n = strlen(s), nul = 0;
    for (const char *p = s; *p; p++) nul += CMH_IS_NUL_PAIR(p);
    if (nul) n -= nul; /* a NUL the reader held as C0 80 (cmh_strtab_intern_bytes): the NUL again */
    str_head(w, n);
    if (!nul) {
        raw(w, s, n);
        return;
    }
    for (const char *p = s, *run = s;; p++) {
        if (!*p || CMH_IS_NUL_PAIR(p)) {
            raw(w, run, (size_t)(p - run));
            if (!*p) break;
            raw(w, "", 1);
            run = ++p + 1;
        }
    }
}

/* A string, memoized the first time, a memo reference after. */
static inline void w_str_memo(pw *w, const char *s, uint32_t *slot)
{
    if (*slot) {
        get(w, *slot);
        return;
    }
    str_body(w, s);
    memoize(w, slot);
}

static inline void w_key(pw *w, int k) { w_str_memo(w, pkw_keys[k], &w->key_memo[k]); }
static inline void w_sid(pw *w, const cmh_snapshot *s, uint32_t id) { w_str_memo(w, cmh_str(s, id), &w->str_memo[id]); }

static inline void w_bool(pw *w, int b) { op(w, b ? 0x88 : 0x89); }

/* Batches: call begin for item i of n, then write the item, then end for item i. */
static inline void batch_begin(pw *w, uint32_t i, uint32_t n)
{
    if (i % BATCH == 0 && n - i > 1) op(w, '(');
}

static inline void batch_end(pw *w, uint32_t i, uint32_t n, int dict)
{
    uint32_t start = i - i % BATCH;
    int last_of_batch = (i + 1) % BATCH == 0 || i + 1 == n;
    if (!last_of_batch) return;
    if (i == start && n - start == 1) op(w, dict ? 's' : 'a'); /* a lone item */
    else op(w, dict ? 'u' : 'e');
}

/* pickle_write.c: a frame list, memoized by stack (0: the empty list); whether a reader of the
 * pickle finds the entry in device_traces (what an aside item's position counts). */
void pkw_frames(pw *w, const cmh_snapshot *s, uint32_t stack);
int pkw_kept_entry(const cmh_entry *e);

/* pickle_side_write.c: the `cumemhist` dict, key and value: where the snapshot came from and
 * all the model holds that PyTorch's schema has no place for.  ndev: the device lists written
 * (one per device where a key has one), has_settings: whether allocator_settings was written,
 * marks (nmarks): the marks the export keeps aside. */
void pkw_side(pw *w, const cmh_snapshot *s, int ndev, int has_settings, const cmh_pickle_mark *marks, uint32_t nmarks);

#endif
