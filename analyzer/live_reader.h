/*
 * live_reader.h - what the live reader's files share (private to analyzer/; the API is
 * cumemhist/live.h): the reader's state, struct cmh_live, and the pieces more than one file
 * needs.  live.c opens, refreshes and closes a reader; live_records.c walks an extent and
 * applies its records to the state; live_figures.c hands out each device's figures;
 * live_snapshot.c makes a snapshot of now.
 *
 * A reader is one thread's: nothing here locks.
 */
#ifndef CMH_LIVE_READER_H
#define CMH_LIVE_READER_H

#include <stddef.h>
#include <stdint.h>

#include "cumemhist/live.h"
#include "cumemhist/recover.h"
#include "cumemhist/reports.h"
#include "flight_format.h"
#include "flight_state.h"
#include "oatab.h"

#define BASE_STACK 0x80000000u /* a stack id of the checkpoint's model, not the recorder's */
#define RATE_POINTS 64
#define SEEN_BITS 65536u /* how far an entry can be overtaken in the file and still be read */

/* A window slot is a whole entry, 80 bytes since entries carry PyTorch's pool id (16 bytes a
 * flight record never fills): a slot per entry the window holds, made as entries come. */
_Static_assert(sizeof(cmh_entry_full) == 80, "a trace entry (every field) is 80 bytes in the window");

/* a cuMemCreate handle's latest state (CMH_FR_VMM_HANDLE), its time in ns */
typedef struct lvmm {
    uint64_t handle; /* the key */
    uint64_t size;
    int64_t time_ns;
    int32_t device;
    uint32_t stack, state, seq;
} lvmm;

typedef struct lpyframe {
    uint64_t id; /* the key: recorder Python frame id + 1 */
    uint64_t off; /* file then function, in namebuf */
    uint32_t file_len, name_len;
    int32_t line, pad;
} lpyframe;

/* a recording thread's number, OS thread id and name (CMH_FR_THREAD), as a snapshot's thread_ids */
typedef struct lthread {
    uint32_t thread, pad;
    int64_t tid;
    char name[16]; /* not NUL-terminated when all 16 are used */
} lthread;

/* One device's window: a ring of entries, 80 bytes each.  A journal entry's stack is the
 * recorder's and a mark's addr its name id; the checkpoint's entries (model ids) were pushed
 * first, so they are the oldest nbase of the window. */
/* An OOM whose retry is not decided yet (cmh_oom_retry_step): its request and its entry's number */
typedef struct loom {
    cmh_oom_request q;
    uint64_t at;
    int64_t ns; /* its entry's time */
    uint64_t ev; /* the block alloc entry that shows an allocator above (q.above), 0: none or a lasting sign (PyTorch's) */
    uint64_t freed; /* what its thread gave back since (cmh_oom_retry_step's *freed) */
} loom;
#define LIVE_OOM_PENDING 16

typedef struct ltrace {
    cmh_entry_full *ring;
    uint64_t cap, alloc, head, n; /* cap: the window; alloc: slots made so far; head: the oldest */
    uint64_t nbase;
    uint64_t dropped_out;  /* entries that left the window (or the checkpoint's dropped) */
    /* ooms: the OOMs the program saw, retries: the allocator's retries, as `oom` counts them
     * (cmh_live_oom_entry); the pending ones count as OOMs until a retry is seen, as they would
     * in a snapshot taken now (the figures show them after CMH_LIVE_OOM_GRACE_MS: live_figures.c) */
    uint64_t entries, ooms, retries, last_seq;
    /* The figures are those of a snapshot taken now, whose trace is the window: an OOM that left
     * the window is counted as the snapshot counts the trace's dropped_ooms (the program's,
     * whatever came after it).  ooms_out: the OOM entries that left it (and the checkpoint's
     * dropped_ooms); retried: the numbers of the OOMs in it taken for retries, in order (from
     * retried_head), given back to ooms as they leave it. */
    uint64_t ooms_out;
    uint64_t *retried;
    uint32_t retried_head, nretried, capretried;
    /* the number (in entries) of the last block alloc entry + 1, 0 when none: an allocator above
     * the driver reports blocks (cmh_oom_above) */
    uint64_t last_block;
    loom pend[LIVE_OOM_PENDING];
    uint32_t npend;
    uint64_t *seen; /* SEEN_BITS bits: the sequence numbers (last_seq - SEEN_BITS, last_seq] read */
    int present;
} ltrace;

typedef struct lmod {
    uint64_t base, size;
    char *path, *build_id;
} lmod;

typedef struct rate_pt {
    int64_t ns;
    uint64_t allocated;
} rate_pt;

struct cmh_live {
    char path[4200];
    int fd;
    const unsigned char *map;
    size_t len, maplen; /* the file's size as last seen; the mapping's */
    uint32_t head, version; /* a whole head's bytes (16, or 8 in version 1); the file's version */
    uint64_t trace_cap_asked;
    /* where each extent was read up to; an uncommitted record waited for since stall_ns */
    uint64_t pos[CMH_FLIGHT_EXTENTS];
    /* (version 5) the extent pos[] refers to: its serial (0: none yet) and generation; a slot
     * whose serial changed holds another extent, read from its start */
    uint64_t sser[CMH_FLIGHT_EXTENTS], sgen[CMH_FLIGHT_EXTENTS];
    int64_t stall_ns[CMH_FLIGHT_EXTENTS];
    uint64_t gen_from; /* extents of older generations are in the checkpoint */
    uint64_t cut[CMH_FLIGHT_SLOTS];
    cmh_fstate st;
    fdict dict; /* its pyframes: of lpyframe */
    char *namebuf;
    uint32_t nnamebuf, capnamebuf;
    lmod *mods;
    uint32_t nmods, capmods;
    int torch; /* a module of mods is PyTorch's CUDA allocator (cmh_oom_above) */
    cmh_meminfo *samples; /* a ring of the latest cuMemGetInfo samples */
    uint32_t nsamples, sample_head;
    cmh_meminfo last_sample[CMH_FLIGHT_SLOTS];
    cmh_annotation *anns;
    uint32_t nanns, capanns;
    lthread *threads; /* the recording threads named so far (the latest record of each) */
    uint32_t nthreads, capthreads;
    cmh_fchildren kids; /* the children it forked so far (cmh_fchildren_emit) */
    cmh_device_ident idents[CMH_FLIGHT_SLOTS - 1]; /* which GPU each device is (uuid "": not said) */
    cmh_oatab handles; /* of lvmm: the handles' latest states, for vmm_unmapped */
    cmh_vmm_map *maps; /* the map log's rows (CMH_FR_VMM_MAP), handle_stack the record's id: vmm_maps */
    uint32_t nmaps, capmaps;
    cmh_vmm_release *rels; /* the release log's rows (CMH_FR_VMM_RELEASE), stack the record's id: vmm_released */
    uint32_t nrels, caprels;
    ltrace tr[CMH_FLIGHT_SLOTS];
    rate_pt rate[CMH_FLIGHT_SLOTS][RATE_POINTS];
    uint32_t nrate[CMH_FLIGHT_SLOTS];
    cmh_snapshot base;
    int have_base;
    int alive; /* the process still runs (as of this refresh) */
    cmh_live_info info;
    int hwcrc; /* the CPU has SSE4.2's crc32 */
};

#define MAX_SAMPLES 4096 /* the ring of the latest cuMemGetInfo samples */

static inline const cmh_flight_header *hdr(const cmh_live *l) { return (const cmh_flight_header *)l->map; }

/* A device's allocated bytes per minute at now off its n rate points (live_figures.c says the
 * rule); *known 0 where there is none yet.  Pure: tests/test_live_rate.c feeds it points. */
int64_t cmh_live_rate(const rate_pt *r, uint32_t n, int64_t now, uint64_t allocated, int *known);
/* "PATH: what at byte AT" in err; returns CMH_EFORMAT. */
int cmh_live_fail(cmh_live *l, char *err, size_t errlen, const char *what, uint64_t at);

/* Read extent a on from where it stopped (live_records.c). */
int cmh_live_walk(cmh_live *l, uint32_t a, char *err, size_t errlen);
int cmh_live_reset(cmh_live *l);
/* Tests only (NULL otherwise): called in a refresh between its check for extents lost and its
 * walk, where a running recorder may drop an extent. */
extern void (*cmh_live_between_passes)(cmh_live *l);
/* Entry e, just counted in t->entries: decide the pending OOMs' retries, and note e if an OOM
 * (torch: PyTorch's CUDA allocator is in the process, cmh_oom_above). */
void cmh_live_oom_entry(ltrace *t, const cmh_entry_full *e, int torch);

/* The window's next slot (the oldest one leaving it when it is full), for the caller to fill;
 * NULL: out of memory.  The entry is written in place, not built aside and copied in. */
cmh_entry_full *cmh_live_trace_slot_grow(cmh_live *l, int k, int from_base);

/* The steady state inline (a full window: the oldest leaves it), the rest out of line. */
static inline cmh_entry_full *trace_slot(cmh_live *l, int k, int from_base)
{
    ltrace *t = &l->tr[k];
    if (__builtin_expect(!t->cap || t->n != t->alloc || t->alloc != t->cap || from_base || t->nbase, 0)) return cmh_live_trace_slot_grow(l, k, from_base);
    cmh_entry_full *e = &t->ring[t->head];
    if (++t->head == t->alloc) t->head = 0;
    t->dropped_out++;
    t->ooms_out += e->action == CMH_ACT_OOM; /* (read before the caller writes the slot) */
    return e;
}

#endif
