/*
 * flight_format.h - the flight record: the file a recording process keeps its history in from
 * its first allocation on, so that a process that dies by any signal (SIGKILL too) leaves it on
 * disk.  Written through a shared file mapping by recorder/flight.c, read by analyzer/recover.c
 * (`cumemhist recover`, and `cumemhist record` when its program died).  docs/FORMAT.md.
 *
 * Layout: a header page, then extents of records, appended as they fill (each twice the size of
 * the one before, up to a limit).  Records are trace entries and what they refer to (stacks,
 * names, modules, range annotations).  Extents belong to generations: with a bounded ring
 * (max_entries), once a generation holds much more than the ring can, the helper thread starts
 * a new one, writes there again what entries refer to, and writes a checkpoint (a normal .cmh
 * of the whole state, to one of two files, alternately); the older extents are then given back
 * to the file system, and entries the checkpoint holds are skipped by their per-device
 * sequence numbers.  A record is a 16-byte head {length, commit, sum, 0} and a body; the
 * writer reserves its bytes with one atomic add on the extent's cursor, writes the length, the
 * body, the body's CRC-32C (crc32c.h) and, last, the commit word (release).  A reader trusts
 * only records whose commit word is right (a record torn by the death of its writer is skipped
 * and counted torn) and whose body matches its sum (one damaged on disk, or by a stray write of
 * the program's, is skipped and counted damaged).
 *
 * Version 1 (before sums) had an 8-byte head {length, commit} and the same bodies; the reader
 * still reads it, unverified.
 *
 * Version 4 adds the compact head (8 bytes) for trace entries, the flight record's bulk: its
 * first word is {length (bits 0-23), type (24-30), 1 (bit 31)}, written at the reservation as a
 * whole head's length is; its second, written last (release), is the commit and the sum at once:
 * CRC-32C(body) ^ first word ^ CMH_FR_COMPACT_KEY, never 0 (a writer whose value would be 0
 * writes the record with a whole head instead).  A reader that finds it 0 counts the record torn;
 * nonzero but not that value, damaged.  Whole heads in a version-4 file have bit 31 of their
 * length clear (and bits 24-30: no record is 16 MiB).  With it, an allocation's entry is 40 bytes
 * (was 48), and a segment's free 32 (CMH_FR_FREE_SHORT: it names the segment by its address and
 * leaves out what the segment's allocation said already).  Readers of version 4 read 1 to 3 too.
 *
 * Version 5 reuses the extents' slots: with a bounded ring, a slot whose extent was given back
 * after a checkpoint (dropped) takes a later extent, so that the record runs for ever in its 48
 * slots (before, a long run filled them after some 7 to 9 generations and lost every record
 * after).  An extent may also take the file's space a dropped one left.  So the slots' order is
 * no longer the order the extents were made: area_serial[i] (1, 2, ... in the order made; 0
 * while slot i changes) says it, and readers take the extents by generation, then serial.  A
 * reader that reads a slot while the file is written loads its serial before the slot's fields
 * and again after them (and after its records): a serial that changed (or 0) means the slot
 * took another extent meanwhile.  Older readers refuse version 5 (they would read a reused
 * slot on from where they left the extent before it); version 5 readers read 1 to 4 (their
 * serials are 0: slots in index order, never reused).
 *
 * Version 6 adds tiny entry records (CMH_FR_ENTRY_TINY, 32 bytes; CMH_FR_FREE_TINY, 24 bytes;
 * below): a compact head whose first word carries fields instead of the length (the type says
 * it), the time as 40 bits after the extent's area_t0, the address without its low 8 bits.  A
 * pair of plain cuMemAlloc/cuMemFree writes 56 bytes of record where version 4 wrote 72 (the
 * bytes are the cost: the kernel's first touch of the page cache's new pages).  Older readers
 * refuse version 6 (they would take a tiny head's fields for its length); version 6 readers
 * read 1 to 5.
 */
#ifndef CMH_FLIGHT_FORMAT_H
#define CMH_FLIGHT_FORMAT_H

#include <stdint.h>
#include <string.h>

#define CMH_FLIGHT_MAGIC "CMHFLT01"
#define CMH_FLIGHT_VERSION 6 /* 6: tiny entries (CMH_FR_ENTRY_TINY, CMH_FR_FREE_TINY; area_t0); 5: slots reused (area_serial); 4: compact heads, short frees; 3: entries may be short (CMH_FR_ENTRY_SHORT); 2: heads carry the body's sum; 1 (no sum); all read */
#define CMH_FLIGHT_HEADER 12288 /* bytes before the first extent */
#define CMH_FLIGHT_MAX_EXTENT (512ull << 20) /* no writer makes a larger extent (every version) */
#define CMH_FLIGHT_SLOTS 65    /* device slots: 0..63, then pinned host memory */
#define CMH_FLIGHT_COMMIT 0x464c5400u /* commit word: this | record type */

/* CMH_FR_CLEAR: the history was cleared: a device slot's entries up to seq are gone (the
 * cmh_flight_entry layout, slot and seq only) */
/* CMH_FR_MEMINFO: a cuMemGetInfo sample (added without a version change: older readers skip a
 * record type they do not know) */
/* CMH_FR_ENTRY_SHORT: a trace entry packed in 32 bytes (version 3, which exists for it: a reader
 * of version 2 would skip the type it does not know, and with it the entries, so it refuses the
 * file instead) */
/* CMH_FR_FREE_SHORT: a segment's free in three words (version 4; below) */
/* CMH_FR_VMM_HANDLE: a cuMemCreate handle's state now (added without a version change: older
 * readers skip it, and recover no unmapped handle; below) */
/* CMH_FR_DEVICE: which GPU a device number is (added without a version change: older readers
 * skip it; below) */
/* CMH_FR_VMM_MAP: a cuMemMap and the handle it mapped, the .cmh vmm_maps row (added without a
 * version change: older readers skip it, and count every map by its range; below) */
enum { CMH_FR_ENTRY = 1, CMH_FR_STACK = 2, CMH_FR_NAME = 3, CMH_FR_MODULE = 4, CMH_FR_ANNOTATION = 5, CMH_FR_CLEAR = 6, CMH_FR_MEMINFO = 7,
       CMH_FR_PYFRAME = 8, CMH_FR_ENTRY_SHORT = 9, CMH_FR_THREAD = 10, CMH_FR_FREE_SHORT = 11, CMH_FR_VMM_HANDLE = 12,
       CMH_FR_ENTRY_TINY = 13, CMH_FR_FREE_TINY = 14, CMH_FR_DEVICE = 15, CMH_FR_CHILD = 16,
       CMH_FR_VMM_MAP = 17, CMH_FR_VMM_RELEASE = 18 };
/* how the process ended, as far as it could say */
/* (EXECED: the process replaced its program by exec(); the new image, recorded too, marks the
 * record of the old one so and keeps it beside its own.  QUIT: it called _exit() or _Exit(), no
 * exit handler running, end_signal holding the status; marked by a recorder whose header has
 * CMH_FLIGHT_MARKS_EXIT in `marks`, and then an end with no mark at all was a death no code of
 * the process saw: SIGKILL, the OOM killer, a signal it did not catch) */
enum { CMH_FLIGHT_RUNNING = 0, CMH_FLIGHT_EXITED = 1, CMH_FLIGHT_SIGNALED = 2, CMH_FLIGHT_EXECED = 3, CMH_FLIGHT_QUIT = 4 };
#define CMH_FLIGHT_MARKS_EXIT 1 /* `marks`: _exit() marks the record (QUIT); before, an unmarked end might be one */

#define CMH_FLIGHT_EXTENTS 48

typedef struct cmh_flight_area {
    uint64_t offset, size; /* in the file; size 0: not made yet */
    uint64_t cursor;       /* bytes reserved so far (may pass size: those records went on to the next) */
    uint64_t gen;          /* the generation it belongs to (1, 2, ...) */
    uint32_t writers;      /* appends in progress */
    uint32_t dropped;      /* given back to the file system after a checkpoint */
    uint64_t sealed;       /* where the first reservation that did not fit began (0: none): the end */
} cmh_flight_area;

typedef struct cmh_flight_header {
    char magic[8];
    uint32_t version, header_size;
    int64_t pid;
    int64_t start_ns;
    /* the clock: ticks to Unix ns by the line through these two points (the second is moved
     * forward by the helper thread; t1_seq is odd while it changes) */
    int64_t t0_ticks, t0_ns, t1_ticks, t1_ns;
    uint64_t t1_seq;
    /* options in force */
    uint64_t max_entries;
    int32_t max_frames;
    uint8_t enabled, context, marks, pad0; /* marks: CMH_FLIGHT_MARKS_* (0 in records of older recorders) */
    /* the end: state (CMH_FLIGHT_*) and the signal (QUIT: the _exit status); records no extent could take */
    uint32_t state;
    int32_t end_signal;
    uint64_t lost_records;
    uint64_t lost_events; /* the recorder's own count (cmh_lost), as of the helper's last look */
    /* the extents, in the order they were made; the one appends go to; the generation */
    cmh_flight_area area[CMH_FLIGHT_EXTENTS];
    uint32_t nareas, active;
    uint64_t gen;
    /* checkpoints: ckpt_which (0 none yet, 1 or 2) names the valid file <flight>.ckptN.cmh, the
     * generation it begins and, per device slot, the last entry sequence it holds */
    uint32_t ckpt_which, pad1;
    uint64_t ckpt_gen[2];
    uint64_t ckpt_cut[2][CMH_FLIGHT_SLOTS];
    char snapshot_path[4200]; /* where the process would have written its snapshot */
    char hostname[256];
    char cmdline[2048];
    /* added later, so zero means unknown: the job's rank, local rank and world size, each + 1 */
    int32_t rank1, local_rank1, world_size1, pad2;
    char producer[48]; /* "cumemhist 0.1.0" */
    /* added later, zero (empty) in older records: which process wrote the record, so that a reader
     * can tell it from a later one given the same pid: its start time (/proc/PID/stat field 22,
     * clock ticks after boot) and the boot it belongs to (/proc/sys/kernel/random/boot_id); and the
     * pid it was forked from when it began as a fork without exec (0: it did not) */
    uint64_t proc_start_ticks;
    char boot_id[40];
    int64_t forked_from;
    /* version 5: the order each slot's extent was made in (1, 2, ...; 0: changing, or an older
     * file, whose slots are in order), written around the slot's fields as a sequence lock */
    uint64_t area_serial[CMH_FLIGHT_EXTENTS];
    /* version 6: each slot's time base, the ticks its extent was made at (written with the
     * slot's other fields, under its serial): a tiny entry's time is its ticks after this */
    int64_t area_t0[CMH_FLIGHT_EXTENTS];
} cmh_flight_header;

_Static_assert(sizeof(cmh_flight_header) <= CMH_FLIGHT_HEADER, "the flight header fits its page");

typedef struct cmh_flight_rec {
    uint32_t len;    /* the whole record, head included, a multiple of 8 */
    uint32_t commit; /* CMH_FLIGHT_COMMIT | type, written last */
    uint32_t sum;    /* CRC-32C of the body: the record's bytes from 16 to len */
    uint32_t zero;   /* 0; keeps the body on 8 bytes */
} cmh_flight_rec;
#define CMH_FLIGHT_HEAD_V1 8 /* version 1's head: len and commit only */
#define CMH_FR_COMPACT 0x80000000u    /* version 4: bit 31 of the first word, a compact head */
#define CMH_FR_COMPACT_KEY 0x464c5434u /* "FLT4": folded into a compact head's commit word */
#define CMH_FR_COMPACT_HEAD 8

/* What a record's head says (cmh_fr_head_read): nothing there yet (first word 0), a length no
 * writer writes (what follows cannot be found), reserved but not committed, or committed (then
 * its body is to be checked against sum, where has_sum). */
enum { CMH_FRH_EMPTY, CMH_FRH_BADLEN, CMH_FRH_OPEN, CMH_FRH_DONE };
#define CMH_FR_ENTRY_TINY_LEN 32 /* version 6: a tiny entry record's bytes, head included (below) */
#define CMH_FR_FREE_TINY_LEN 24
typedef struct cmh_fr_head {
    uint32_t len, head, type, sum; /* the whole record, its head's bytes, its type, the body's expected CRC-32C */
    uint32_t first; /* the head's first word (a tiny entry's fields are there) */
    int has_sum;
} cmh_fr_head;

/* The head at p of a record of a file of `version`, avail bytes left in its extent (at least 8). */
static inline int cmh_fr_head_read(const void *p, uint32_t version, uint64_t avail, cmh_fr_head *o)
{
    const cmh_flight_rec *rec = (const cmh_flight_rec *)p;
    uint32_t w = __atomic_load_n(&rec->len, __ATOMIC_ACQUIRE);
    if (!w) return CMH_FRH_EMPTY;
    int compact = version >= 4 && (w & CMH_FR_COMPACT);
    uint32_t t = (w >> 24) & 0x7f;
    o->first = w;
    o->head = compact ? CMH_FR_COMPACT_HEAD : version >= 2 ? (uint32_t)sizeof *rec : CMH_FLIGHT_HEAD_V1;
    o->len = compact ? w & 0xffffffu : w;
    if (compact && version >= 6 && (t == CMH_FR_ENTRY_TINY || t == CMH_FR_FREE_TINY)) /* the type says the length */
        o->len = t == CMH_FR_ENTRY_TINY ? CMH_FR_ENTRY_TINY_LEN : CMH_FR_FREE_TINY_LEN;
    if (o->len % 8 || o->len < o->head || o->len > avail) return CMH_FRH_BADLEN;
    uint32_t c = __atomic_load_n(&rec->commit, __ATOMIC_ACQUIRE);
    if (compact) {
        if (!c) return CMH_FRH_OPEN;
        o->type = t;
        o->sum = c ^ w ^ CMH_FR_COMPACT_KEY;
        o->has_sum = 1;
        return CMH_FRH_DONE;
    }
    if ((c & ~0xffu) != CMH_FLIGHT_COMMIT) return CMH_FRH_OPEN;
    o->type = c & 0xff;
    o->has_sum = version >= 2;
    o->sum = o->has_sum ? rec->sum : 0;
    return CMH_FRH_DONE;
}

/* The order slots 0..n-1 of h hold their extents in, the order they were made (version 5:
 * slots are reused): by generation, then serial, then slot (older versions: slot order, which
 * is the order made; a slot read while it changes sorts anywhere: its reader skips it). */
static inline void cmh_flight_order(const cmh_flight_header *h, uint32_t n, uint32_t *order)
{
    uint64_t gen[CMH_FLIGHT_EXTENTS], ser[CMH_FLIGHT_EXTENTS];
    if (n > CMH_FLIGHT_EXTENTS) n = CMH_FLIGHT_EXTENTS;
    for (uint32_t i = 0; i < n; i++) {
        gen[i] = __atomic_load_n(&h->area[i].gen, __ATOMIC_RELAXED);
        ser[i] = h->version >= 5 ? __atomic_load_n(&h->area_serial[i], __ATOMIC_RELAXED) : 0;
    }
    for (uint32_t i = 0; i < n; i++) { /* insertion: 48 at most */
        uint32_t j = i;
        for (; j > 0; j--) {
            uint32_t p = order[j - 1];
            if (h->version < 5 || gen[p] < gen[i] || (gen[p] == gen[i] && ser[p] <= ser[i])) break;
            order[j] = p;
        }
        order[j] = i;
    }
}

/* The bodies, after the head. */

/* CMH_FR_ENTRY: one trace entry, as the recorder's ring holds it */
typedef struct cmh_fr_entry {
    uint32_t slot, pad;
    uint64_t seq; /* the device's entry count after this entry (1, 2, ...) */
    int64_t ticks;
    uint64_t addr, size, requested, stream;
    uint32_t stack, thread;
    uint8_t action, kind, flags, pad2[5];
} cmh_fr_entry;

/* CMH_FR_STACK: {id, depth} then depth PCs, innermost first */
typedef struct cmh_fr_stack {
    uint32_t id, depth;
} cmh_fr_stack;

/* CMH_FR_NAME: a mark or range name: {id, length} then the bytes */
typedef struct cmh_fr_name {
    uint32_t id, length;
} cmh_fr_name;

/* CMH_FR_PYFRAME: a Python frame (recorder/pystack.c), which a stack names by the pseudo PC
 * 0xC0DE000000000000 | id: {id, line, file length, name length} then both.  Written before any
 * stack that names it; a reader that does not know the type skips it. */
typedef struct cmh_fr_pyframe {
    uint32_t id;
    int32_t line;
    uint32_t file_len, name_len;
} cmh_fr_pyframe;

/* CMH_FR_MODULE: a loaded object: {base, size, path length, build-id length} then both */
typedef struct cmh_fr_module {
    uint64_t base, size;
    uint32_t path_len, build_id_len;
} cmh_fr_module;

/* CMH_FR_ANNOTATION: a range's start or end (stage 0 / 1) */
typedef struct cmh_fr_annotation {
    int64_t ticks;
    uint32_t name;
    int32_t device;
    uint32_t stage, pad;
} cmh_fr_annotation;

/* CMH_FR_THREAD: a recording thread's number, OS thread id and name (added without a version
 * change: older readers skip it) */
typedef struct cmh_fr_thread {
    uint32_t thread, pad;
    int64_t tid;
    char name[16]; /* not NUL-terminated when 16 long */
} cmh_fr_thread;

/* CMH_FR_DEVICE: the driver's UUID, name and PCI bus id of a device number, once, at its first
 * allocation (cmh_device_ident; strings NUL-terminated within their fields) */
typedef struct cmh_fr_device {
    int32_t device;
    uint32_t pad;
    char uuid[48], name[64], pci_bus[24];
} cmh_fr_device;

/* CMH_FR_CHILD: a child the process forked without exec (added without a version change: older
 * readers skip it), at its fork and again at the record's start and at each checkpoint (the
 * extents before one are given back): index its number among the process's forks (0 the
 * first), pid its pid (0: a fork past the first CMH_FR_CHILDREN_KEPT, which only says how many
 * there were), then path_len bytes of the path its own record takes (0: not known).  The same
 * index written twice says the same child. */
typedef struct cmh_fr_child {
    uint32_t index, path_len;
    int64_t pid;
} cmh_fr_child;
#define CMH_FR_CHILDREN_KEPT 1024 /* as the snapshot's process.children keeps them */

/* CMH_FR_VMM_MAP: one row of the map log (.cmh vmm_maps), written as the map is logged: the range
 * a cuMemMap mapped (its segment_map entry's), when, and the handle it mapped: the record's
 * number of it (the recorder's serial: a value the driver hands out again is a new number), the
 * bytes made, cuMemCreate's stack (0: none) and when it was made.  A recovered record has the
 * rows, so it counts each handle once as the exit dump does (without them a handle held mapped
 * nowhere at the end counted from its making, its map's range too while mapped: twice). */
typedef struct cmh_fr_vmm_map {
    int32_t device;
    uint32_t handle_stack;
    uint64_t addr, size, handle, handle_size;
    int64_t ticks, handle_ticks;
} cmh_fr_vmm_map;

/* CMH_FR_VMM_RELEASE: one row of the release log (.cmh vmm_released), written at the cuMemRelease:
 * the handle's serial (the maps' number of it), bytes, cuMemCreate's stack and time, and the
 * release's time.  A recovered record counts a handle until its release as the exit dump does. */
typedef struct cmh_fr_vmm_release {
    int32_t device;
    uint32_t stack;
    uint64_t handle, size;
    int64_t ticks, release_ticks;
} cmh_fr_vmm_release;

#ifdef CUMEMHIST_SNAPSHOT_H /* (for the readers, which know the model) */
/* What a device record says, as the model keeps it (each string cut at its field's end). */
static inline cmh_device_ident cmh_fr_device_ident(const cmh_fr_device *x)
{
    cmh_device_ident d = {.device = x->device};
    memcpy(d.uuid, x->uuid, sizeof d.uuid - 1);
    memcpy(d.name, x->name, sizeof d.name - 1);
    memcpy(d.pci_bus, x->pci_bus, sizeof d.pci_bus - 1);
    return d;
}
#endif

/* CMH_FR_MEMINFO: what the driver said of a device's memory: at its first allocation, at each
 * out-of-memory error, at each dump, and once a second from the helper thread */
typedef struct cmh_fr_meminfo {
    int32_t device;
    uint32_t thread; /* cmh_meminfo's (0 in a journal written before it: not known) */
    int64_t ticks;
    uint64_t free, total; /* bytes */
} cmh_fr_meminfo;

/* CMH_FR_VMM_HANDLE: what a cuMemCreate handle is now; the last record of a handle value in the
 * file's order is its state at the end.  Written when a handle is made (UNMAPPED), when the
 * bytes of it mapped somewhere go from none to some (MAPPED) or back (UNMAPPED), when it is
 * released (GONE), and again for every handle held at each new generation (a checkpoint's
 * extents drop the older records) and when a flight record starts after the handles were made.
 * Written under the recorder's handle lock, so the file's order is the order of the changes (and
 * seq counts them: a reader that reads out of the file's order keeps the later state).  A
 * handle UNMAPPED at the end is the .cmh vmm_unmapped table's: physical memory held, mapped
 * nowhere. */
enum { CMH_FR_VMM_GONE = 0, CMH_FR_VMM_UNMAPPED = 1, CMH_FR_VMM_MAPPED = 2 };
/* Whether a handle's record of sequence number a is later than one of b (serial arithmetic). */
static inline int cmh_fr_vmm_later(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }
typedef struct cmh_fr_vmm_handle {
    uint64_t handle, size;
    int64_t ticks; /* when it was made */
    int32_t device;
    uint32_t stack; /* cuMemCreate's (0: none) */
    uint32_t state;
    uint32_t seq; /* 1, 2, ... per record of this type (wrapping): a reader that meets a record after a later one (a live reader reads an extent on past one it waits in) keeps the later */
} cmh_fr_vmm_handle;

_Static_assert(sizeof(cmh_flight_rec) == 16 && sizeof(cmh_fr_entry) == 72, "an entry record is 88 bytes, its body 9 words");

/* CMH_FR_ENTRY_SHORT: the common entry (requested == size, no stream, and every field within the
 * bits below) in four words instead of nine, so a record is 48 bytes instead of 88: the flight
 * record's cost is mostly the page cache's pages it fills (each one a fault and a zeroing, in
 * the kernel), so it is paid by the byte.  An entry that does not fit is written as CMH_FR_ENTRY.
 *   w[0]  seq (bits 0-43) | slot << 44 (7 bits) | action << 51 (4) | kind << 55 (3) | flags << 58 (4), bits 62-63 zero
 *   w[1]  ticks
 *   w[2]  addr (bits 0-47) | thread << 48 (16 bits)
 *   w[3]  size (bits 0-35) | stack << 36 (28 bits) */
typedef struct cmh_fr_entry_short {
    uint64_t w[4];
} cmh_fr_entry_short;
_Static_assert(sizeof(cmh_fr_entry_short) == 32, "a short entry record is 48 bytes, its body 4 words");

/* Pack e into *o; 0 when it does not fit (then it is written as CMH_FR_ENTRY). */
static inline int cmh_fr_entry_pack(const cmh_fr_entry *e, cmh_fr_entry_short *o)
{
    if (e->requested != e->size || e->stream || e->seq >> 44 || e->slot >> 7 || e->action >> 4 || e->kind >> 3 || e->flags >> 4 ||
        e->addr >> 48 || e->thread >> 16 || e->size >> 36 || e->stack >> 28)
        return 0;
    o->w[0] = e->seq | (uint64_t)e->slot << 44 | (uint64_t)e->action << 51 | (uint64_t)e->kind << 55 | (uint64_t)e->flags << 58;
    o->w[1] = (uint64_t)e->ticks;
    o->w[2] = e->addr | (uint64_t)e->thread << 48;
    o->w[3] = e->size | (uint64_t)e->stack << 36;
    return 1;
}

/* CMH_FR_FREE_SHORT (version 4): the free of a segment (CMH_ACT_SEGMENT_FREE) whose entry would
 * repeat what its allocation's said: no stack, no stream, requested == size, and size the
 * segment's.  The first three words of a short entry; the fourth, {size, stack}, is left out.  A
 * reader takes the size from the live segment at addr on the entry's device, as the entries
 * before it in the device's order left it (0 where it has none: its allocation was lost).
 * Written only where the allocation's record is ahead of it in the file: the free of a segment
 * is claimed after its allocation returned, whose record was reserved before that. */
#define CMH_FR_FREE_SHORT_BODY 24
#define CMH_FR_ACT_SEGMENT_FREE 4 /* CMH_ACT_SEGMENT_FREE (cumemhist/snapshot.h; the writer asserts it) */

/* The entry of a CMH_FR_ENTRY, CMH_FR_ENTRY_SHORT or CMH_FR_FREE_SHORT body of len bytes into *e;
 * 0 when the body is too short for its type (or its spare bits are set).  A short free's size
 * (and requested) is 0 here: the reader fills it in from the segment. */
static inline int cmh_fr_entry_read(uint32_t type, const void *body, uint32_t len, cmh_fr_entry *e)
{
    if (type != CMH_FR_ENTRY_SHORT && type != CMH_FR_FREE_SHORT) {
        if (len < sizeof *e) return 0;
        __builtin_memcpy(e, body, sizeof *e);
        return 1;
    }
    cmh_fr_entry_short p;
    if (len < (type == CMH_FR_FREE_SHORT ? CMH_FR_FREE_SHORT_BODY : sizeof p)) return 0;
    p.w[3] = 0;
    __builtin_memcpy(&p, body, type == CMH_FR_FREE_SHORT ? CMH_FR_FREE_SHORT_BODY : sizeof p);
    if (p.w[0] >> 62 || (type == CMH_FR_FREE_SHORT && ((p.w[0] >> 51) & 15) != CMH_FR_ACT_SEGMENT_FREE)) return 0;
    __builtin_memset(e, 0, sizeof *e);
    e->seq = p.w[0] & ((1ull << 44) - 1);
    e->slot = (uint32_t)(p.w[0] >> 44) & 0x7f;
    e->action = (uint8_t)((p.w[0] >> 51) & 15);
    e->kind = (uint8_t)((p.w[0] >> 55) & 7);
    e->flags = (uint8_t)((p.w[0] >> 58) & 15);
    e->ticks = (int64_t)p.w[1];
    e->addr = p.w[2] & ((1ull << 48) - 1);
    e->thread = (uint32_t)(p.w[2] >> 48);
    e->size = e->requested = p.w[3] & ((1ull << 36) - 1);
    e->stack = (uint32_t)(p.w[3] >> 36);
    return 1;
}

/* CMH_FR_ENTRY_TINY and CMH_FR_FREE_TINY (version 6): the common entry in 32 bytes (a segment's
 * free, as CMH_FR_FREE_SHORT, in 24), head included.  The head's first word is
 *   slot (bits 0-6) | kind << 7 (3) | flags << 10 (4) | action << 14 (4) | thread & 63 << 18 (6)
 *   | type << 24 | 1 << 31 (compact)
 * and its second the commit word, as any compact head's: CRC-32C(body) ^ first ^
 * CMH_FR_COMPACT_KEY, never 0.  The body:
 *   w[0]  seq (bits 0-41) | thread >> 6 << 42 (6 bits) | d << 48 (d's bits 0-15)
 *   w[1]  d >> 16 (bits 0-23) | addr >> 8 << 24 (40 bits: addr's low 8 bits are 0)
 *   w[2]  size (bits 0-35) | stack << 36 (28 bits)    (CMH_FR_ENTRY_TINY only)
 * where d (40 bits) is the entry's ticks less area_t0 of the slot its extent is in.  A free's
 * size is its segment's, as for CMH_FR_FREE_SHORT; its action is CMH_FR_ACT_SEGMENT_FREE.  What
 * does not fit (a thread past 4095, a sequence past 2^42, an address not on 256 bytes, ticks
 * before the extent's t0 or 2^40 after it) is written as version 4 writes it.  A tiny record
 * whose seq is 0 holds no entry (a writer that found its reservation in an extent whose t0 did
 * not fit its ticks wrote it so, then the entry again the long way): readers skip it. */
#define CMH_FR_TINY_D_BITS 40

/* The head word and body of e as a tiny record, whose extent's t0 is t0: 0 when it does not
 * fit.  free: a segment's free (CMH_FR_FREE_TINY, two words). */
static inline uint32_t cmh_fr_tiny_first(const cmh_fr_entry *e, int free)
{
    return CMH_FR_COMPACT | (uint32_t)(free ? CMH_FR_FREE_TINY : CMH_FR_ENTRY_TINY) << 24 | e->slot | (uint32_t)e->kind << 7 |
           (uint32_t)e->flags << 10 | (uint32_t)e->action << 14 | (e->thread & 63) << 18;
}
/* Whether e fits a tiny record but for its time (which depends on the extent). */
static inline int cmh_fr_tiny_fits(const cmh_fr_entry *e)
{
    return !(e->requested != e->size || e->stream || !e->seq || e->seq >> 42 || e->slot >> 7 || e->action >> 4 || e->kind >> 3 ||
             e->flags >> 4 || (e->addr & 255) || e->addr >> 48 || e->thread >> 12 || e->size >> 36 || e->stack >> 28);
}
static inline int cmh_fr_tiny_time_fits(int64_t ticks, int64_t t0)
{
    return t0 > 0 && ticks >= t0 && ((uint64_t)ticks - (uint64_t)t0) >> CMH_FR_TINY_D_BITS == 0;
}
static inline void cmh_fr_tiny_body(const cmh_fr_entry *e, int64_t t0, uint64_t w[3])
{
    uint64_t d = (uint64_t)e->ticks - (uint64_t)t0;
    w[0] = e->seq | (uint64_t)(e->thread >> 6) << 42 | (d & 0xffff) << 48;
    w[1] = d >> 16 | (e->addr >> 8) << 24;
    w[2] = e->size | (uint64_t)e->stack << 36;
}

/* A tiny record (type, first word, body of len bytes, its extent's t0) as the short record it
 * stands for: *type and *o become CMH_FR_ENTRY_SHORT or CMH_FR_FREE_SHORT and their body (the
 * reader's paths for those read it).  1; -1 a record that holds no entry (seq 0); 0 one that
 * cannot be (its length, or a free's action). */
static inline int cmh_fr_tiny_read(uint32_t *type, uint32_t first, const void *body, uint32_t len, int64_t t0, cmh_fr_entry_short *o)
{
    int free = *type == CMH_FR_FREE_TINY;
    uint64_t w[3] = {0, 0, 0};
    if (len != (free ? CMH_FR_FREE_TINY_LEN : CMH_FR_ENTRY_TINY_LEN) - CMH_FR_COMPACT_HEAD) return 0;
    __builtin_memcpy(w, body, len);
    uint64_t seq = w[0] & ((1ull << 42) - 1);
    if (!seq) return -1;
    uint64_t slot = first & 0x7f, kind = (first >> 7) & 7, flags = (first >> 10) & 15, action = (first >> 14) & 15;
    uint64_t thread = ((first >> 18) & 63) | ((w[0] >> 42) & 63) << 6;
    if (free && action != CMH_FR_ACT_SEGMENT_FREE) return 0;
    uint64_t d = w[0] >> 48 | (w[1] & 0xffffff) << 16;
    o->w[0] = seq | slot << 44 | action << 51 | kind << 55 | flags << 58;
    o->w[1] = (uint64_t)t0 + d;
    o->w[2] = (w[1] >> 24) << 8 | thread << 48;
    o->w[3] = free ? 0 : w[2];
    *type = free ? CMH_FR_FREE_SHORT : CMH_FR_ENTRY_SHORT;
    return 1;
}

#endif
