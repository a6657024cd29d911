/*
 * pickle_internal.h - what the pickle machine (pickle_read.c) and the conversion of PyTorch's
 * schema into the model (pickle_model.c) share.  Private to snapshot/.
 */
#ifndef CMH_PICKLE_INTERNAL_H
#define CMH_PICKLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cumemhist/snapshot.h"

enum {
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_FLOAT,
    PV_STR,   /* id: string id */
    PV_CONT,  /* id: container index */
    PV_FRAME, /* id: frame id (a converted frame dict) */
    PV_STACK, /* id: stack id (a converted frame list) */
    PV_ENTRY, /* id: index into entries (a converted trace entry dict) */
    PV_POOL,  /* id: a pool id's number in the model (cmh_snapshot_pool_number): a converted (a, b) */
};

#define PV_SKIP 0xf0 /* conv_tag of an entry of an action this version skips */

typedef struct pv {
    uint8_t tag;
    union {
        int64_t i;
        double f;
        uint32_t id;
    } u;
} pv;

enum { C_LIST, C_DICT, C_TUPLE };

typedef struct pcont {
    uint8_t kind;
    uint8_t memoized; /* the memo holds it: others may refer to it, so it is never recycled */
    uint8_t conv_tag; /* 0, or PV_FRAME / PV_STACK / PV_ENTRY once converted */
    uint32_t conv_id;
    uint32_t n, cap;
    pv *items; /* dicts: key, value, key, value... */
    uint64_t at; /* the byte of the opcode that made it: where an error in it points */
} pcont;

/* Keys and values the conversion looks for, interned once. */
enum {
    K_SEGMENTS, K_DEVICE_TRACES, K_ALLOCATOR_SETTINGS, K_EXTERNAL_ANNOTATIONS, K_DEVICE, K_ADDRESS,
    K_TOTAL_SIZE, K_STREAM, K_SEGMENT_TYPE, K_SEGMENT_POOL_ID, K_IS_EXPANDABLE, K_FRAMES, K_BLOCKS, K_SIZE,
    K_REQUESTED_SIZE, K_STATE, K_HISTORY, K_ADDR, K_REAL_SIZE, K_ACTION, K_TIME_US, K_COMPILE_CONTEXT,
    K_USER_METADATA, K_DEVICE_FREE, K_NAME, K_FILENAME, K_LINE, K_STAGE, K_LARGE, K_SMALL,
    K_ACTIVE_ALLOCATED, K_ACTIVE_PENDING_FREE, K_ACTIVE_AWAITING_FREE, K_INACTIVE, K_START, K_END, K_CMH_CODE,
    K_CMH_REQUESTED, K_CMH_IMPLIED, K_CMH_KIND, K_CMH_WHOLE, K_CUMEMHIST, K_SOURCE, K_PID, K_DROPPED, K_RECORDER,
    K_POOL_SAMPLES, K_HOST, K_CMDLINE, K_MODULES, K_FRAME_MODULES, K_THREADS, K_MARKS, K_THREAD_IDS, K_POOL_ID,
    K_MEMINFO, K_START_NS, K_DUMP_NS, K_PROCESS, K_ENDING, K_DROPPED_OOMS, K_ALLOCATED_SIZE, K_ACTIVE_SIZE, K_RETRIED_OOMS, K_CLOCK_ORIGIN_NS, K_POOL_SAMPLE_TAGS, K_POOLS_READ_AT_DUMP, K_CONTEXT,
    K_VMM_UNMAPPED, K_VMM_MAPS, K_FREE_FRAMES, K_HISTORY_LOST, K_DRIVER_ERRORS, K_DEVICE_IDS, K_VMM_RELEASED, NKEYS
};
extern const char *const pk_key_names[NKEYS];

typedef struct frame_slot { /* a frame by what it says (oatab.h: keyed by their hash) */
    uint64_t hash;
    uint32_t name, filename, id;
    int64_t line;
    uint32_t extra; /* cmh_frame's */
} frame_slot;

typedef struct pm {
    const uint8_t *p;
    size_t len, pos, op_at;
    int mapped;     /* p maps the file (mapped.h): pages behind pos go back as it advances */
    size_t dropped; /* bytes given back so far */
    size_t obj_at; /* the model's conversion: 1 + the byte of the object at hand (0: parsing) */
    cmh_snapshot *s;
    char *err;
    size_t errlen;
    int failed;
    uint32_t key[NKEYS];
    struct { /* a direct-mapped cache: an action name's string id -> action + 1 (0 = empty) */
        uint32_t str, action;
    } action_of[64];
    pv *stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    pv *memo;
    size_t memo_len, memo_cap;
    pcont *conts;
    uint32_t nconts, cconts;
    /* converted containers no one else can refer to (never memoized): their slots and item
     * arrays are reused by the next containers made, so a trace of millions of entry dicts
     * costs the memory of the few alive at once */
    uint32_t *free_conts;
    uint32_t nfree_conts, cfree_conts;
    cmh_entry *entries; /* converted trace entries, in pickle order (their sets interned in s) */
    uint32_t nentries, centries;
    cmh_entry_xref *xmap; /* those with xs == CMH_XS_FAR, by index into entries */
    uint32_t nxmap, cxmap;
    cmh_oatab frames; /* of frame_slot */
    /* trace entries are dicts of a few shapes: the last ones' keys in order, and where each key
     * the conversion wants sits among them (pickle_model.c, entry_fields) */
    struct pk_shape {
        uint32_t n; /* keys; UINT32_MAX = unused */
        uint32_t keys[16];
        int8_t pos[16];
    } shapes[4];
    uint32_t next_shape;
    uint64_t budget; /* cells the conversion may still create: bounds shared-container blowups */
    int protocol;
    int nomem; /* the failure was memory, not the file */
    int segments_only; /* CMH_LOAD_SEGMENTS: stop at the root's 'device_traces' key (read_str) */
    int generic;       /* CMH_LOAD_GENERIC: none of the shortcuts (the entries copied one by one) */
    int seen_segments; /* ... once the root's 'segments' key came (some writers put it after the trace) */
    int stop;          /* ... and it was reached after them: the root is complete with the keys before it */
    uint64_t fast_dicts, generic_dicts; /* trace entry dicts read by pickle_fast.c, by the machine */
    struct { /* pickle_fast.c's buffers, kept from one run of entries to the next */
        void *undo, *conv, *items;
        size_t cundo, cconv, citems;
        uint32_t *frames;
        void *pend;
    } fast;
    uint32_t entry_extra; /* the extras (cmh_extra) of the entry pk_entry_from_fields converts, 0 none */
    /* pk_fast_entries is reading a run: an entry with extras is left to the machine (pk_entry_from_items
     * returns 0), which converts a run's entries at its APPENDS, after every string the run's bytes
     * intern; the string of an entry's extras interned amid them would number the strings otherwise */
    int fast_run;
    struct pool_at *marks_aside; /* cumemhist.marks, while the model is made (pickle_model.c) */
    uint32_t nmarks_aside;
} pm;

/* pickle_read.c: the machine's error, and container lookups */
int pk_fail(pm *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Out of memory: the same failure, but the reader returns CMH_ENOMEM rather than CMH_EFORMAT. */
int pk_nomem(pm *m);
pcont *pk_as_cont(pm *m, const pv *v, uint8_t kind);
/* Container `id` is converted (to tag, conv): its items go, and its slot too unless memoized. */
void pk_done_with(pm *m, uint32_t id, uint8_t tag, uint32_t conv);
const pv *pk_dict_get(pm *m, const pcont *d, uint32_t key);

/* pickle_model.c: the model's reading of the finished root, shared with pickle_side_read.c: a
 * container of the kind wanted, remembered as the one an error points at (NULL: not one); an
 * integer field, pk_fail when it is there and not an integer or when required and absent. */
const pcont *pk_obj(pm *m, const pv *v, uint8_t kind);
int pk_want_int(pm *m, const pcont *d, int key, int64_t *out, int required, const char *what);

static inline int pk_to_i64(const pv *v, int64_t *out)
{
    if (v->tag == PV_INT || v->tag == PV_BOOL) {
        *out = v->u.i;
        return 1;
    }
    return 0;
}

/* PyTorch's microseconds in the model's nanoseconds, saturating rather than wrapping. */
static inline int64_t pk_us_to_ns(int64_t us)
{
    if (us > INT64_MAX / 1000) return INT64_MAX;
    if (us < INT64_MIN / 1000) return INT64_MIN;
    return us * 1000;
}

/* pickle_model.c: a completed frame dict, frame list or trace entry dict becomes model data
 * at once (each returns 0 and leaves v alone when it is not one); the finished root, into the
 * model */
int pk_convert_frame(pm *m, pv *v);
int pk_convert_stack(pm *m, pv *v);
int pk_convert_entry(pm *m, pv *v);
int pk_convert_top(pm *m, const pv *root);
/* The same conversions from a dict's items (key, value, ...) wherever they are: a trace entry
 * (-1 error, 0 not an entry: no 'action', 1 entry *id, 2 an entry this version skips) and a
 * frame (its 'name' and 'filename' must be strings: pk_fail otherwise). */
int pk_entry_from_items(pm *m, const pv *items, uint32_t n, uint32_t *id);
/* The keys of a trace entry the conversion reads, and the same conversion from each one's value
 * (its first occurrence in the dict; NULL when absent), as pickle_fast.c finds them. */
enum { EK_ACTION, EK_CMH_IMPLIED, EK_CMH_CODE, EK_DEVICE_FREE, EK_ADDR, EK_SIZE, EK_STREAM, EK_TIME_US,
       EK_COMPILE_CONTEXT, EK_USER_METADATA, EK_FRAMES, EK_CMH_REQUESTED, EK_POOL_ID, EK_NAME, NEK };
extern const uint8_t pk_entry_keys[NEK]; /* K_* of each EK_* */
int pk_entry_from_fields(pm *m, const pv *const *fld, uint32_t *id);
/* A pool id ('pool_id' of an entry, 'segment_pool_id' of a segment) into id[2]: a tuple or list
 * of two integers, or one converted before (PV_POOL, or a tuple whose conv_tag says so).  With
 * convert, a tuple read becomes PV_POOL (its items go: an entry's tuple is read once).  1 read,
 * 0 not a pool id (id left (0, 0)), -1 out of memory. */
int pk_pool_of(pm *m, const pv *v, int convert, uint64_t id[2]);
/* The pages of [from, end) up to a MiB made present at once (MADV_POPULATE_WRITE), every
 * PK_PREFAULT_ENTRIES entries after the first (a small file never pays for a MiB it does not use). */
#define PK_PREFAULT_ENTRIES 16384u
void pk_prefault(void *from, void *end);
int pk_frame_of(pm *m, const pv *items, uint32_t n, uint32_t *frame_id);

/* pickle_read.c: the machine's own steps the fast path (pickle_fast.c) shares */
int pk_new_cont(pm *m, uint8_t kind, pv *out);
int pk_cont_add(pm *m, pcont *c, const pv *items, size_t n);
void pk_drop_behind(pm *m);

/* pickle_fast.c: at a MARK whose list is the stack's top, a run of trace entry dicts up to their
 * APPENDS, read straight from the opcodes into the model.  1: done (m->pos past the APPENDS);
 * 0: the bytes are not that shape, nothing changed, the machine reads them; -1: out of memory. */
int pk_fast_entries(pm *m);
/* Forget the converted entries from n on (pickle_fast.c's undo). */
void pk_entries_truncate(pm *m, uint32_t n);

#endif
