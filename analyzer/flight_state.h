/*
 * flight_state.h - the final state a flight record's entries build: live segments and their
 * blocks, as the recorder's export would show them (analyzer/flight_state.c).  Private to the
 * two readers of flight records: `recover` (analyzer/recover.c), which applies every entry once,
 * and the live reader (analyzer/live.c), which keeps one across refreshes and applies what was
 * appended since.
 *
 * Besides the segments and blocks it keeps, per device slot (0..63, 64 = pinned host memory),
 * allocated bytes (blocks in active_allocated) and reserved bytes (live segments), and their
 * maxima over every entry applied: the live reader's figures without a replay.
 *
 * Also the dictionary both readers keep of the record's stacks and names (fdict).
 */
#ifndef CMH_FLIGHT_STATE_H
#define CMH_FLIGHT_STATE_H

#include "cumemhist/snapshot.h"
#include "flight_format.h"

typedef struct fseg {
    uint64_t addr, size, stream;
    uint64_t pool_id[2];
    int64_t time_ns;
    uint32_t stack;
    int32_t device;
    uint8_t kind, flags, pool, alive;
} fseg;

typedef struct fblk {
    uint64_t addr; /* the key (oatab.h) */
    uint64_t size, requested;
    int64_t time_ns;
    uint32_t stack;
    int32_t device;
    uint8_t state;
} fblk;

typedef struct cmh_fstate {
    fseg *segs; /* live ones and dead ones (alive 0) until cmh_fstate_compact */
    uint32_t nsegs, capsegs, dead;
    cmh_oatab by_addr; /* segment start -> index, live ones */
    cmh_oatab blocks;  /* of fblk */
    int nomem;
    uint64_t allocated[CMH_FLIGHT_SLOTS], reserved[CMH_FLIGHT_SLOTS];
    uint64_t peak_allocated[CMH_FLIGHT_SLOTS], peak_reserved[CMH_FLIGHT_SLOTS];
} cmh_fstate;

void cmh_fstate_init(cmh_fstate *st);
void cmh_fstate_free(cmh_fstate *st);
/* A segment as a base snapshot holds it; a block inside one (its state as given). */
fseg *cmh_fstate_seg_add(cmh_fstate *st, const fseg *g);
void cmh_fstate_block_put(cmh_fstate *st, const cmh_entry_full *e, int32_t dev, uint64_t size, uint8_t state_);
/* The size of device dev's live segment that starts at addr, 0 where none does: a short free's
 * (CMH_FR_FREE_SHORT), taken before the free is applied. */
uint64_t cmh_fstate_seg_size(cmh_fstate *st, uint64_t addr, int32_t dev);
/* What one entry (its stack a model stack id) does to the state. */
void cmh_fstate_apply(cmh_fstate *st, const cmh_entry_full *e, int32_t dev);
/* Drop the dead segments (the live reader's, now and then: a long run frees many). */
int cmh_fstate_compact(cmh_fstate *st);
/* The live segments with their blocks into s (sorted by device and address), each stack id
 * through stack_of when given; blocks outside any segment are counted in *orphans.  CMH_OK or
 * CMH_ENOMEM. */
int cmh_fstate_emit(const cmh_fstate *st, cmh_snapshot *s, uint32_t (*stack_of)(void *, uint32_t), void *arg, uint64_t *orphans);
/* Copy what a base snapshot (a checkpoint) holds besides its traces and final state into s, ids
 * unchanged: strings, modules, frames, stacks, annotations, settings, kernels, cuMemGetInfo samples. */
int cmh_fstate_copy_dict(cmh_snapshot *s, const cmh_snapshot *b);

/* The frame of a native pc of a flight record in s: its module (of s->modules) and its offset
 * there as the name ("0x..."), to be symbolized later; the pc itself where no module holds it. */
int cmh_fstate_pc_frame(cmh_snapshot *s, uint64_t pc, uint32_t *id);
/* The slot of a device (-1: pinned host memory), or -1 when it has none. */
static inline int cmh_fstate_slot(int32_t dev) { return dev == -1 ? CMH_FLIGHT_SLOTS - 1 : dev >= 0 && dev < CMH_FLIGHT_SLOTS - 1 ? dev : -1; }

/* The dictionary both readers keep of a record's CMH_FR_STACK, CMH_FR_NAME and CMH_FR_PYFRAME
 * records, each by its recorder id + 1 (the key: oatab.h). */
typedef struct fstack {
    uint64_t id;
    uint64_t first;        /* into pcs[] */
    uint32_t depth, model; /* model: recover's stack id in the snapshot + 1, once made (the live
                              reader makes its snapshots' stacks anew each time: 0) */
} fstack;

typedef struct fname {
    uint64_t id;
    uint64_t off; /* where its text is: in the file (recover), in the reader's namebuf (live) */
    uint32_t len, pad;
} fname;

typedef struct fdict {
    cmh_oatab stacks; /* of fstack */
    uint64_t *pcs;    /* the stacks' PCs, one stack after another */
    uint32_t npcs, cappcs;
    cmh_oatab names;    /* of fname */
    cmh_oatab pyframes; /* each reader's own kind (recover.c: a frame made; live_reader.h: its text) */
} fdict;

/* The children a process forked without exec, as its CMH_FR_CHILD records name them (written at
 * each fork and again at each checkpoint): both readers put them into the snapshot, so that a
 * live one (`cumemhist snapshot PID`, top) names a running parent's children as recover and the
 * exit dump do.  off: where the path's bytes are in the file. */
typedef struct cmh_fchild {
    uint32_t index, path_len;
    int64_t pid;
    uint64_t off;
} cmh_fchild;
typedef struct cmh_fchildren {
    cmh_fchild *v;
    uint32_t n, cap;
} cmh_fchildren;
/* One record (its body at body_off in the file): CMH_OK; CMH_EFORMAT, a record longer than its
 * length; CMH_ENOMEM. */
int cmh_fchildren_add(cmh_fchildren *k, const void *body, uint32_t len, uint64_t body_off);
/* Into s->children (each fork once, in fork order; the path from the file map of len bytes) and
 * s->children_more. */
int cmh_fchildren_emit(cmh_fchildren *k, cmh_snapshot *s, const unsigned char *map, uint64_t len);

#endif
