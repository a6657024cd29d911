/*
 * flight.c - the flight record: the history kept in a file from the first allocation on, so
 * that a process that dies by any signal, SIGKILL included, leaves it on disk (the format and
 * its rules: snapshot/flight_format.h; the reader: analyzer/recover.c).
 *
 * The file is SNAPSHOT.flight beside the snapshot the process would write, created with mode
 * 0600 (O_EXCL | O_NOFOLLOW).  Extents are added to it ahead of the records (by the helper
 * thread, once the active one is half full; by the appender only when the helper is late), each with its
 * space reserved by posix_fallocate (a write through a mapping into a full disk would be SIGBUS)
 * and mapped MAP_SHARED: what is stored there belongs to the page cache, not to the process, and
 * survives its death.  Each trace entry is appended where the ring takes it, between its claim
 * and its commit (history.c); stacks, names and range annotations where they are made
 * (flight_records.c, which also writes the module map).  The helper thread keeps the
 * clock line and the module map current and, with a bounded ring, starts a new generation with
 * a checkpoint once the current one holds several rings' worth.  A clean exit whose snapshot
 * was written removes the files.  Without a writable place, or with CUMEMHIST_FLIGHT=0, nothing
 * is kept and nothing else changes; CUMEMHIST_FLIGHT=N makes the first extent N MiB.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "flight_internal.h"

#define DEFAULT_MB 4       /* the first extent; each next one twice the last */
#define MAX_EXTENT_MB ((long)(CMH_FLIGHT_MAX_EXTENT >> 20))

cmh_flight_header *cmh_fl_h; /* NULL: no flight record */
static int g_fd = -1;
/* the file's identity: the descriptor's number is the program's to close (a daemon closes every
 * descriptor it did not open) and to reuse for a file of its own, which the recorder must then
 * never extend, map, punch or close */
static dev_t g_dev;
static ino_t g_ino;
static pthread_mutex_t g_fdlock = PTHREAD_MUTEX_INITIALIZER;
static char g_path[4300];

static int is_ours(int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino;
}

/* The flight record's descriptor, opened again at its path when the program closed it (its
 * number, if the program reuses it, is left to the program); -1 when the file is gone. */
static int flight_fd(void)
{
    pthread_mutex_lock(&g_fdlock);
    if (!is_ours(g_fd)) {
        int fd = open(g_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (is_ours(fd)) g_fd = fd;
        else {
            if (fd >= 0) close(fd);
            g_fd = -1;
        }
    }
    int fd = g_fd;
    pthread_mutex_unlock(&g_fdlock);
    return fd;
}
static char *g_map[CMH_FLIGHT_EXTENTS]; /* each extent's mapping */
static pthread_mutex_t g_grow = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_tick = PTHREAD_MUTEX_INITIALIZER; /* the helper's work: the clock, modules, checkpoints */
/* the pages made ahead and given back (g_pop, g_rel), and no extent unmapped meanwhile; taken
 * after g_tick when both are */
static pthread_mutex_t g_window = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_first_size;

const char *cmh_flight_path(void) { return cmh_fl_h ? g_path : NULL; }

/* ---- extents ---- */

/* Pages are made writable a window ahead of the appends, a piece at a time, by the appender
 * whose record crosses into the next piece (populate_piece says why not the helper thread): a
 * first write to a page of a shared file mapping is a fault (the file system's page_mkwrite),
 * and so is the first write after writeback cleaned it, about one per 50 entries otherwise.
 * All at once would not do: writeback cleans what waits too long, and every page made ahead is
 * resident.  The same appender wakes the helper (once), which gives back what was written
 * (below) and makes ahead whatever the pieces left (the helper is also woken, as before, when
 * the appends come within half a window of the populated end): so both follow the rate of
 * writing, every piece written (at a benchmark's rate, every 1 ms or so), rather than the
 * helper's 100 ms tick (tens of MB at that rate). */
#define POP_WINDOW (512ull << 10)
static uint64_t g_pop[CMH_FLIGHT_EXTENTS]; /* bytes of each extent populated (past holes a late piece may leave) */
/* Bytes of each extent given back from the process's RSS (MADV_DONTNEED) once written: the
 * records are the file's, in the page cache, so the mapping need not keep them resident (a
 * record written late into such a page faults it back from the cache; nothing is lost).
 * This keeps the flight record's pages out of the recorder's footprint: the 128 KiB kept
 * behind, the piece or so written since the helper last woke, up to a window and a piece made
 * ahead, and the first window of the extent made ahead (about 1.5 MiB in all, when the helper
 * keeps up; when it does not, the appender does its work: populate_here). */
#define KEEP_RESIDENT (128ull << 10) /* behind the cursor: writers that reserved there finish */
static uint64_t g_rel[CMH_FLIGHT_EXTENTS];
#define REMAPPED (8ull << 20) /* given back again behind the last call's end (release_written) */
static int g_pop_asked;

static void populate(uint32_t i, uint64_t from, uint64_t to)
{
#ifdef MADV_POPULATE_WRITE
    uint64_t a = from & ~(uint64_t)4095; /* madvise wants a page-aligned start */
    if (to > a) madvise(g_map[i] + a, to - a, MADV_POPULATE_WRITE);
#endif
    uint64_t cur = __atomic_load_n(&g_pop[i], __ATOMIC_RELAXED); /* an appender's piece may be further on */
    while (cur < to && !__atomic_compare_exchange_n(&g_pop[i], &cur, to, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
}

/* Pages made present by the kernel (MADV_POPULATE_WRITE, above, or an appender's piece) still
 * cost their first access through the process's mapping where the hypervisor keeps page tables
 * of its own (a PVM guest: "The calling thread's own CPU", docs/RECORDER.md), and that access
 * was the appender's store of its record.  So whoever makes the window ahead (the helper, or an
 * appender doing its work: populate_here) also writes each of its pages once, from user space,
 * up to `to`, as prefault() does for a ring's new chunk (history.c).  Unlike a chunk, these
 * pages are in use: the write is a locked add of 0 to the page's first word (a record's, if an
 * appender got there first: its value is left as it was, whatever the order), and only pages at
 * least TOUCH_GAP past the cursor, read again every 16 pages, are written, so an appender is
 * almost never there at once.  (Under ThreadSanitizer, which would report that rare overlap of
 * a locked add and a plain store as a race, the writes are left out: the pages are the same.)
 * g_touch: bytes of each extent so written (under g_window).  CUMEMHIST_FLIGHT_TOUCH=0 leaves
 * the writes out (to measure them); =behind writes, each time, the pages of the 64 KiB behind
 * the cursor too, where records are being written and were (for tests/hot_flight_test.sh: not a
 * record may change). */
#define TOUCH_GAP (64ull << 10)
static uint64_t g_touch[CMH_FLIGHT_EXTENTS];
#if defined(__SANITIZE_THREAD__)
#define CMH_FLIGHT_TOUCH 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CMH_FLIGHT_TOUCH 0
#endif
#endif
#ifndef CMH_FLIGHT_TOUCH
#define CMH_FLIGHT_TOUCH 1
#endif
static int g_touch_mode = 1; /* 0 none, 1 ahead, 2 behind too */
static void touch(uint32_t i, uint64_t to, const uint64_t *cursor /* NULL: an extent not yet in use */)
{
    if (!g_touch_mode) return;
    uint64_t p = (__atomic_load_n(&g_touch[i], __ATOMIC_RELAXED) + 4095) & ~(uint64_t)4095;
    if (g_touch_mode == 2 && cursor) {
        uint64_t c = __atomic_load_n(cursor, __ATOMIC_RELAXED);
        p = (c > TOUCH_GAP ? c - TOUCH_GAP : 0) & ~(uint64_t)4095;
        cursor = NULL;
    }
    for (unsigned k = 0; p < to; p += 4096, k++) {
        if (cursor && !(k & 15)) {
            uint64_t c = __atomic_load_n(cursor, __ATOMIC_RELAXED) + TOUCH_GAP;
            if (p < c) p = (c + 4095) & ~(uint64_t)4095;
            if (p >= to) break;
        }
#if CMH_FLIGHT_TOUCH
        __atomic_fetch_add((uint64_t *)(void *)(g_map[i] + p), 0, __ATOMIC_RELAXED);
#endif
    }
    if (to > __atomic_load_n(&g_touch[i], __ATOMIC_RELAXED)) __atomic_store_n(&g_touch[i], to, __ATOMIC_RELAXED);
}

int cmh_flight_populate_wanted(void) { return __atomic_load_n(&g_pop_asked, __ATOMIC_ACQUIRE); }

static void release_written(void);

/* The next window made and what was written given back, under g_window. */
static void populate_and_release(void)
{
    uint32_t a = cmh_fl_h ? __atomic_load_n(&cmh_fl_h->active, __ATOMIC_ACQUIRE) : CMH_FLIGHT_EXTENTS;
    if (a < CMH_FLIGHT_EXTENTS && g_map[a]) {
        uint64_t size = __atomic_load_n(&cmh_fl_h->area[a].size, __ATOMIC_ACQUIRE);
        uint64_t to = __atomic_load_n(&cmh_fl_h->area[a].cursor, __ATOMIC_RELAXED) + POP_WINDOW;
        if (to > size) to = size;
        uint64_t from = __atomic_load_n(&g_pop[a], __ATOMIC_RELAXED);
        if (to > from) populate(a, from, to);
        touch(a, to, &cmh_fl_h->area[a].cursor);
    }
    if (cmh_fl_h) release_written();
}

/* The helper, woken by the appends half a window before the populated end. */
void cmh_flight_populate(void)
{
    pthread_mutex_lock(&g_window);
    __atomic_store_n(&g_pop_asked, 0, __ATOMIC_RELEASE);
    populate_and_release();
    pthread_mutex_unlock(&g_window);
}

/* An append past the populated end: the helper is late (a loaded machine, or busy with a
 * checkpoint).  The appender does the helper's work itself, when no one else is at it, rather
 * than fault the pages in one by one (each fault costs more than its page made in a batch) and
 * leave the written ones resident until the helper comes. */
static void populate_here(void)
{
    if (pthread_mutex_trylock(&g_window) != 0) return; /* someone is at it */
    int saved = errno;
    populate_and_release();
    errno = saved;
    pthread_mutex_unlock(&g_window);
}

/* The making ahead follows the appends, a PIECE at a time: the appender whose record crosses a
 * PIECE boundary of the extent wakes the helper (once), which makes the window ahead (up to a
 * window past the cursor), touches its pages and gives back what was written.  When the helper
 * has not kept up (less than a piece is made past the boundary just crossed: it did not run
 * since the last crossing), that appender makes the rest itself, at once, up to a window and a
 * piece past the boundary.  With many appending threads on few cores the helper is one
 * runnable thread among them and falls behind: 38% of the records of 8 threads on 2 cores
 * landed past the populated end, against 3% with 1 thread, and the appenders' own faults there
 * (each zeroing a read-around of fresh page-cache pages) took the kernel's zeroing from 10% of
 * the samples to 25% (perf); with the appenders taking over when it is late, the work follows
 * the appends whoever runs (0.7% past the end at 8 threads): no lock, no wait (a piece whose
 * appender is preempted first is faulted in by the others: slower, never wrong).  When the
 * helper keeps up (one calling thread, a core for the helper), the caller no longer pays for
 * the page cache's zeroing: the appenders used to make every piece themselves, a fifth of a
 * recorded pair's own CPU (perf of bench_hot none: the kernel's __pi_memset under
 * madvise(MADV_POPULATE_WRITE) in cmh_fl_reserve). */
#define PIECE (256ull << 10)
#define RELEASE_LAG (2ull << 20) /* written and not given back: past it an appender gives back */
static void populate_piece(uint32_t a, uint64_t end, uint64_t size)
{
    uint64_t from = __atomic_load_n(&g_pop[a], __ATOMIC_RELAXED) & ~(uint64_t)4095, to = (end & ~(PIECE - 1)) + POP_WINDOW + PIECE;
    if (to > size) to = size;
    if (from >= to) return; /* made already */
#ifdef MADV_POPULATE_WRITE
    int saved = errno; /* the program's errno is not ours to change */
    madvise(g_map[a] + from, to - from, MADV_POPULATE_WRITE);
    errno = saved;
#endif
    uint64_t cur = __atomic_load_n(&g_pop[a], __ATOMIC_RELAXED);
    while (cur < to && !__atomic_compare_exchange_n(&g_pop[a], &cur, to, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
}

/* What this appender's extent a has written up to `at`, less KEEP_RESIDENT, given back from
 * RSS by the appender itself, with no lock: the range is claimed by a compare-and-swap on g_rel,
 * so two appenders never give back the same pages, and the extent cannot be unmapped under it
 * (an appender is inside an entry's claim, which a checkpoint waits for before it drops any
 * extent).  Where the appenders took the helper's g_window for this (a trylock), a helper
 * preempted while holding it on a loaded machine left every written page resident: 34.7 B per
 * entry at 5 M entries once at load 13, against 25.2 in the runs around it. */
static void release_mine(uint32_t a, uint64_t at)
{
    uint64_t upto = (at > KEEP_RESIDENT ? at - KEEP_RESIDENT : 0) & ~(uint64_t)4095;
    uint64_t old = __atomic_load_n(&g_rel[a], __ATOMIC_RELAXED);
    if (upto <= old || !__atomic_compare_exchange_n(&g_rel[a], &old, upto, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
    int saved = errno;
    madvise(g_map[a] + old, upto - old, MADV_DONTNEED);
    errno = saved;
}

/* The file's space: extents are placed in space a dropped extent left (given back to the file
 * system by a hole, so it reads as zeros: a record reserved and never written there reads as
 * nothing, never as an old record), best fit, else at the end of the file.  So a bounded ring's
 * record, whose generations come and go, stays the size of a few generations however long it
 * runs.  Under g_grow. */
#define MAX_HOLES (2 * CMH_FLIGHT_EXTENTS)
static struct { uint64_t off, size; } g_hole[MAX_HOLES];
static uint32_t g_nholes;
static uint64_t g_file_end = CMH_FLIGHT_HEADER;
static uint64_t g_serial; /* the last extent's area_serial */
static int g_ahead = -1;  /* the slot of the extent made ahead of the active one (-1: none) */

static void hole_add(uint64_t off, uint64_t size)
{
    for (uint32_t k = 0; k < g_nholes; k++) { /* joined to a neighbour (and that to the next) */
        if (g_hole[k].off + g_hole[k].size == off) off = g_hole[k].off, size += g_hole[k].size;
        else if (off + size == g_hole[k].off) size += g_hole[k].size;
        else continue;
        g_hole[k] = g_hole[--g_nholes];
        k = (uint32_t)-1;
    }
    if (off + size == g_file_end) { /* at the end: the end moves back instead */
        g_file_end = off;
        return;
    }
    if (g_nholes < MAX_HOLES) g_hole[g_nholes].off = off, g_hole[g_nholes++].size = size;
}

static uint64_t place(uint64_t size)
{
    int best = -1;
    for (uint32_t k = 0; k < g_nholes; k++)
        if (g_hole[k].size >= size && (best < 0 || g_hole[k].size < g_hole[best].size)) best = (int)k;
    if (best < 0) {
        uint64_t off = g_file_end;
        g_file_end += size;
        return off;
    }
    uint64_t off = g_hole[best].off;
    g_hole[best].off += size;
    g_hole[best].size -= size;
    if (!g_hole[best].size) g_hole[best] = g_hole[--g_nholes];
    return off;
}

/* A slot for the next extent: one never used, or one whose extent was dropped (given back after
 * a checkpoint, no writers, unmapped); -1 when all 48 hold extents still read.  Under g_grow. */
static int free_slot(void)
{
    uint32_t n = __atomic_load_n(&cmh_fl_h->nareas, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++)
        if (__atomic_load_n(&cmh_fl_h->area[i].dropped, __ATOMIC_ACQUIRE) && !__atomic_load_n(&g_map[i], __ATOMIC_RELAXED) &&
            !__atomic_load_n(&cmh_fl_h->area[i].writers, __ATOMIC_ACQUIRE))
            return (int)i;
    return n < CMH_FLIGHT_EXTENTS ? (int)n : -1;
}

/* Add extent i to the file and map it; 0, or the error number (then appends are counted as
 * lost).  A slot reused is rewritten as under a sequence lock (flight_format.h): its serial 0
 * and its size 0 first, then its fields, then the new serial and size. */
/* ahead: bytes of its start made writable now (the helper's first wake makes the rest) */
static int make_extent(cmh_flight_header *h, uint32_t i, uint64_t size, uint64_t ahead)
{
    uint64_t off = place(size);
    int fd = flight_fd();
    int e = fd < 0 ? EBADF : posix_fallocate(fd, (off_t)off, (off_t)size);
    if (e != 0) {
        hole_add(off, size);
        return e;
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
    if (m == MAP_FAILED) {
        e = errno ? errno : ENOMEM;
        hole_add(off, size);
        return e;
    }
    pthread_mutex_lock(&g_window); /* release_written sees the slot whole */
    cmh_flight_area *a = &h->area[i];
    __atomic_store_n(&h->area_serial[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&a->size, 0, __ATOMIC_RELEASE); /* (each field's store below is a release: after these) */
    __atomic_store_n(&g_map[i], m, __ATOMIC_RELAXED);
    __atomic_store_n(&g_rel[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_pop[i], 0, __ATOMIC_RELAXED); /* a fresh extent (after fork, the index may have been the parent's) */
    if (ahead > size) ahead = size;
    /* exactly those pages: the fault's read-around (page_cache_ra_unbounded) zero-filled far
     * more of the fallocated extent, most of the 1.6 ms of CPU a process's first allocation
     * took (perf); the later windows, made by the helper, read around as before */
    madvise(m, size, MADV_RANDOM);
    populate(i, 0, ahead);
    madvise(m, size, MADV_NORMAL);
    __atomic_store_n(&g_touch[i], 0, __ATOMIC_RELAXED);
    touch(i, ahead, NULL); /* no appender here yet: not published */
    __atomic_store_n(&a->offset, off, __ATOMIC_RELEASE);
    __atomic_store_n(&a->cursor, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&a->gen, __atomic_load_n(&h->gen, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
    __atomic_store_n(&a->writers, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&a->sealed, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&a->dropped, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&h->area_t0[i], cmh_now_ticks(), __ATOMIC_RELEASE); /* tiny entries' time base */
    __atomic_store_n(&h->area_serial[i], ++g_serial, __ATOMIC_RELEASE);
    __atomic_store_n(&a->size, size, __ATOMIC_RELEASE);
    if (i >= __atomic_load_n(&h->nareas, __ATOMIC_RELAXED)) __atomic_store_n(&h->nareas, i + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_window);
    return 0;
}

/* The next extent is made ahead of the appends, by the helper thread, once the active one is
 * half full (posix_fallocate and mmap are ~100 us: not for the hot path).  g_prep_at is the
 * cursor past which an append asks for it (once, through g_prep_asked); UINT64_MAX once it is
 * made.  A made-ahead extent is an ordinary one with nothing in it yet (cursor 0), so readers
 * need no change; when appends reach it, switching is a store. */
static uint64_t g_prep_at = UINT64_MAX;
static int g_prep_asked;

static void arm_prepare(uint32_t active)
{
    __atomic_store_n(&g_prep_at, active < CMH_FLIGHT_EXTENTS ? cmh_fl_h->area[active].size / 2 : UINT64_MAX, __ATOMIC_RELAXED);
}

/* The extent made ahead of the active one a, if any (under g_grow). */
static int prepared_after(uint32_t a)
{
    int p = g_ahead;
    return p >= 0 && (uint32_t)p != a && !cmh_fl_h->area[p].dropped && __atomic_load_n(&cmh_fl_h->area[p].cursor, __ATOMIC_RELAXED) == 0 ? p : -1;
}

int cmh_flight_prepare_wanted(void) { return __atomic_load_n(&g_prep_asked, __ATOMIC_ACQUIRE); }

void cmh_flight_prepare(void)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_grow);
    uint32_t a = __atomic_load_n(&cmh_fl_h->active, __ATOMIC_ACQUIRE);
    int slot = a < CMH_FLIGHT_EXTENTS && prepared_after(a) < 0 ? free_slot() : -1;
    if (slot >= 0 && __atomic_load_n(&cmh_fl_h->area[a].cursor, __ATOMIC_RELAXED) >= cmh_fl_h->area[a].size / 2) {
        uint64_t size = cmh_fl_h->area[a].size * 2;
        if (size > (uint64_t)MAX_EXTENT_MB << 20) size = (uint64_t)MAX_EXTENT_MB << 20;
        if (make_extent(cmh_fl_h, (uint32_t)slot, size, POP_WINDOW) == 0) g_ahead = slot;
        else cmh_log("%s: no room for the next %llu MiB of the flight record yet", g_path, (unsigned long long)(size >> 20));
    }
    /* (no slot free: asked again at the next append past the mark, once a checkpoint dropped one) */
    if (prepared_after(a) >= 0) __atomic_store_n(&g_prep_at, UINT64_MAX, __ATOMIC_RELAXED);
    __atomic_store_n(&g_prep_asked, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_grow);
}

/* Move appends on past the full extent `full`: to the next one, made if need be (the helper
 * has usually made it already).  Returns the active extent, or -1 when none can take more. */
static int next_extent(uint32_t full, int new_generation)
{
    pthread_mutex_lock(&g_grow);
    int rc = (int)__atomic_load_n(&cmh_fl_h->active, __ATOMIC_ACQUIRE);
    if ((uint32_t)rc == full || new_generation) {
        int ahead = prepared_after((uint32_t)rc);
        if (new_generation) __atomic_add_fetch(&cmh_fl_h->gen, 1, __ATOMIC_RELEASE);
        if (ahead >= 0) {
            /* empty so far: it may start the new generation (atomic: the helper reads gens unlocked) */
            __atomic_store_n(&cmh_fl_h->area[ahead].gen, __atomic_load_n(&cmh_fl_h->gen, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
            __atomic_store_n(&cmh_fl_h->active, (uint32_t)ahead, __ATOMIC_RELEASE);
            g_ahead = -1;
            arm_prepare((uint32_t)ahead);
            rc = ahead;
        } else {
            int n = free_slot();
            uint64_t size = new_generation || rc >= CMH_FLIGHT_EXTENTS ? g_first_size : cmh_fl_h->area[rc].size * 2;
            if (size > (uint64_t)MAX_EXTENT_MB << 20) size = (uint64_t)MAX_EXTENT_MB << 20;
            if (n >= 0 && make_extent(cmh_fl_h, (uint32_t)n, size, POP_WINDOW) == 0) {
                __atomic_store_n(&cmh_fl_h->active, (uint32_t)n, __ATOMIC_RELEASE);
                arm_prepare((uint32_t)n);
                rc = n;
            } else {
                rc = -1;
                /* full for good, unbounded; bounded, a checkpoint drops a generation's extents, and
                 * their slots take the next (meanwhile the records are counted lost) */
                if (!new_generation && !__atomic_load_n(&cmh_fl_h->max_entries, __ATOMIC_RELAXED))
                    __atomic_store_n(&cmh_fl_h->active, CMH_FLIGHT_EXTENTS, __ATOMIC_RELEASE);
            }
        }
    }
    pthread_mutex_unlock(&g_grow);
    return rc;
}

/* What a reservation [at, at + len) of extent a (of size bytes) asks besides its bytes: the
 * next extent made ahead once the active one passes g_prep_at, the pieces ahead of a record
 * that crosses into a new piece, the populated end kept a window ahead.  Called only when one
 * of those is due (reserved() tests all three at once), so the common append pays for none. */
static __attribute__((noinline)) void reserved_ahead(uint32_t a, uint64_t at, uint32_t len, uint64_t size)
{
    if (at > __atomic_load_n(&g_prep_at, __ATOMIC_RELAXED) && !__atomic_load_n(&g_prep_asked, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&g_prep_asked, 1, __ATOMIC_ACQ_REL))
        cmh_helper_wake();
    if (((at ^ (at + len)) & ~(PIECE - 1)) != 0) {
        /* the helper late by a piece: this appender makes the pieces ahead itself */
        if (__atomic_load_n(&g_pop[a], __ATOMIC_RELAXED) < ((at + len) & ~(PIECE - 1)) + PIECE) populate_piece(a, at + len, size);
        /* the helper makes the window ahead and gives back what was written; when it has
         * not given back for RELEASE_LAG, this appender does, as appenders past the
         * populated end did before the pieces (seen: 40 MB left resident otherwise) */
        if (at > __atomic_load_n(&g_rel[a], __ATOMIC_RELAXED) + RELEASE_LAG) release_mine(a, at);
        if (!__atomic_load_n(&g_pop_asked, __ATOMIC_RELAXED) && !__atomic_exchange_n(&g_pop_asked, 1, __ATOMIC_ACQ_REL))
            cmh_helper_wake();
    }
    uint64_t pop = __atomic_load_n(&g_pop[a], __ATOMIC_RELAXED);
    if (at + len + POP_WINDOW / 2 > pop && pop < size) {
        if (at + len > pop) populate_here();
        else if (!__atomic_load_n(&g_pop_asked, __ATOMIC_RELAXED) && !__atomic_exchange_n(&g_pop_asked, 1, __ATOMIC_ACQ_REL))
            cmh_helper_wake();
    }
}

/* Reserve a record of len bytes, head included (a multiple of 8), in the active extent; NULL
 * when no extent can take it (then counted).  counted: raise the extent's writer count (cmh_fl_commit() lowers it), so that the
 * extent is not given back under the writer.  Trace entries need not (the hot path's one atomic
 * here is the cursor's): the checkpoint waits for every entry claimed so far to be complete
 * (cmh_hist_quiesce) before any extent is given back.  Inline in the tiny entry's path
 * (cmh_flight_tiny); cmh_fl_reserve for the others. */
static inline cmh_flight_rec *reserve(uint32_t len, uint32_t *area, int counted, uint32_t first)
{
    if (CMH_UNLIKELY(len > 0xffffffu)) { /* a whole head's length keeps bits 24-31 clear (version 4) */
        __atomic_add_fetch(&cmh_fl_h->lost_records, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    for (int tries = 0; tries < 4; tries++) {
        uint32_t a = __atomic_load_n(&cmh_fl_h->active, __ATOMIC_ACQUIRE);
        if (a >= CMH_FLIGHT_EXTENTS) break;
        cmh_flight_area *ar = &cmh_fl_h->area[a];
        if (counted) __atomic_add_fetch(&ar->writers, 1, __ATOMIC_ACQUIRE);
        uint64_t at = __atomic_fetch_add(&ar->cursor, len, __ATOMIC_RELAXED), size = ar->size;
        if (CMH_LIKELY(at + len <= size)) {
            if (CMH_UNLIKELY(at > __atomic_load_n(&g_prep_at, __ATOMIC_RELAXED) || ((at ^ (at + len)) & ~(PIECE - 1)) != 0 ||
                             at + len + POP_WINDOW / 2 > __atomic_load_n(&g_pop[a], __ATOMIC_RELAXED)))
                reserved_ahead(a, at, len, size);
            cmh_flight_rec *r = (cmh_flight_rec *)(g_map[a] + at);
            CMH_PREFETCH_W(r);
            r->len = first ? first : len;
            *area = counted ? a : CMH_FLIGHT_EXTENTS + a;
            return r;
        }
        uint64_t old = __atomic_load_n(&ar->sealed, __ATOMIC_RELAXED); /* the records end where the first misfit began */
        while ((old == 0 || at < old) && !__atomic_compare_exchange_n(&ar->sealed, &old, at ? at : 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
        if (counted) __atomic_sub_fetch(&ar->writers, 1, __ATOMIC_RELEASE);
        if (next_extent(a, 0) < 0) break;
    }
    __atomic_add_fetch(&cmh_fl_h->lost_records, 1, __ATOMIC_RELAXED);
    return NULL;
}

cmh_flight_rec *cmh_fl_reserve(uint32_t len, uint32_t *area, int counted, uint32_t first) { return reserve(len, area, counted, first); }

/* The body's sum, then the commit word that makes the record visible (release: a reader that
 * sees the commit sees the sum and the body).  The sum is the record's one cost beyond its
 * stores: 9 crc32 instructions for an entry (bench_hooks). */
void cmh_fl_commit(cmh_flight_rec *r, int type, uint32_t area)
{
    r->zero = 0;
    r->sum = cmh_crc32c(0, r + 1, r->len - sizeof *r);
    __atomic_store_n(&r->commit, CMH_FLIGHT_COMMIT | (uint32_t)type, __ATOMIC_RELEASE);
    if (area < CMH_FLIGHT_EXTENTS) __atomic_sub_fetch(&cmh_fl_h->area[area].writers, 1, __ATOMIC_RELEASE);
}


_Static_assert(CMH_FR_ACT_SEGMENT_FREE == CMH_ACT_SEGMENT_FREE, "a short free's action");

static int g_crc_hw; /* cmh_crc32c_words may use the instruction (set before the first append) */

/* f as a tiny record (flight_format.h, version 6): 1 written (or counted lost), 0 when it does
 * not fit one (then the longer way).  f is the caller's local, never in memory: inline in both
 * callers, so the fields the caller's packing bounds already (cmh_flight_tiny's) cost no test. */
static inline int write_tiny(cmh_flight_header *fh, const cmh_fr_entry *f)
{
    /* a tiny record when the entry fits one and its time fits the active extent's time base
     * (that of the extent the reservation lands in, checked again after it: the active one
     * may have changed meanwhile) */
    if (CMH_UNLIKELY(!cmh_fr_tiny_fits(f))) return 0;
    uint32_t act = __atomic_load_n(&fh->active, __ATOMIC_ACQUIRE);
    if (CMH_UNLIKELY(act >= CMH_FLIGHT_EXTENTS || !cmh_fr_tiny_time_fits(f->ticks, __atomic_load_n(&fh->area_t0[act], __ATOMIC_RELAXED))))
        return 0;
    int fr = f->action == CMH_ACT_SEGMENT_FREE && !f->stack;
    uint32_t len = fr ? CMH_FR_FREE_TINY_LEN : CMH_FR_ENTRY_TINY_LEN, first = cmh_fr_tiny_first(f, fr), a;
    cmh_flight_rec *h = reserve(len, &a, 0, first);
    if (!h) return 1; /* counted lost */
    int64_t t0 = __atomic_load_n(&fh->area_t0[a - CMH_FLIGHT_EXTENTS], __ATOMIC_RELAXED);
    uint64_t w[3];
    int fits = cmh_fr_tiny_time_fits(f->ticks, t0);
    if (CMH_LIKELY(fits)) cmh_fr_tiny_body(f, t0, w);
    else w[0] = 0, w[1] = 1, w[2] = 0; /* no entry (seq 0): written again the longer way */
    uint32_t nw = fr ? 2 : 3, word = cmh_crc32c_words(g_crc_hw, w, nw) ^ first ^ CMH_FR_COMPACT_KEY;
    if (CMH_UNLIKELY(!word)) { /* (1 in 2^32) the commit word may not be 0: no entry here either */
        fits = 0, w[0] = 0, w[1] = 2, w[2] = 0;
        word = cmh_crc32c_words(g_crc_hw, w, nw) ^ first ^ CMH_FR_COMPACT_KEY;
    }
    /* the body a word at a time (a copy of a length known only here was a call, or a loop) */
    uint64_t *body = (uint64_t *)(void *)((char *)h + CMH_FR_COMPACT_HEAD);
    body[0] = w[0];
    body[1] = w[1];
    if (!fr) body[2] = w[2];
    __atomic_store_n(&h->commit, word, __ATOMIC_RELEASE);
    return fits;
}

int cmh_flight_tiny(int slot, uint64_t seq, int64_t ticks, uint64_t w1, uint64_t word)
{
    cmh_flight_header *fh = __atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE);
    if (!fh) return 1;
    cmh_ring_slot sl = {ticks, w1, word};
    cmh_rec_entry e;
    cmh_ring_expand(&sl, NULL, word, &e);
    cmh_fr_entry f = {(uint32_t)slot, 0, seq, ticks, e.addr, e.size, e.size, 0, e.stack, e.thread, (uint8_t)e.action, (uint8_t)e.kind,
                      (uint8_t)e.flags, {0}};
    return write_tiny(fh, &f);
}

/* A trace entry: tiny when it fits, as nearly all do (32 bytes; a segment's free that repeats
 * nothing of its allocation, 24), else short with a compact head (40; 32), else whole (88).  The compact head's commit word
 * is the body's sum folded with its first word (flight_format.h), computed here before anything
 * is stored: one word to store last, and a record whose word would be 0 takes a whole head. */
void cmh_flight_entry(int slot, uint64_t seq, const cmh_rec_entry *e)
{
    cmh_flight_header *fh = __atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE);
    if (!fh) return;
    uint32_t a;
    /* The caller has just stored e a field at a time: read it so.  The compiler read two fields
     * with one 16-byte load, which the store buffer cannot serve from two 8-byte stores: each
     * waited for both to reach the cache (perf: the first instruction past those loads held a
     * third of this function's samples). */
    uint64_t addr = e->addr, size = e->size, requested = e->requested, stream = e->stream;
    __asm__("" : "+r"(addr), "+r"(size), "+r"(requested), "+r"(stream));
    cmh_fr_entry f = {(uint32_t)slot, 0, seq, e->ticks, addr, size, requested, stream, e->stack, e->thread,
                      (uint8_t)e->action, (uint8_t)e->kind, (uint8_t)e->flags, {0}};
    if (write_tiny(fh, &f)) return;
    cmh_fr_entry_short p;
    if (CMH_LIKELY(cmh_fr_entry_pack(&f, &p))) {
        /* a free without a stack: its size is the segment's (hooks.c's frees name the segment
         * the live table held, whose allocation's record is ahead of this one) */
        int fr = e->action == CMH_ACT_SEGMENT_FREE && !e->stack;
        uint32_t n = fr ? CMH_FR_FREE_SHORT_BODY : (uint32_t)sizeof p, len = CMH_FR_COMPACT_HEAD + n;
        uint32_t first = CMH_FR_COMPACT | (uint32_t)(fr ? CMH_FR_FREE_SHORT : CMH_FR_ENTRY_SHORT) << 24 | len;
        uint32_t word = cmh_crc32c(0, &p, n) ^ first ^ CMH_FR_COMPACT_KEY;
        if (CMH_LIKELY(word != 0)) {
            cmh_flight_rec *h = cmh_fl_reserve(len, &a, 0, first);
            if (!h) return;
            __builtin_memcpy((char *)h + CMH_FR_COMPACT_HEAD, &p, n);
            __atomic_store_n(&h->commit, word, __ATOMIC_RELEASE);
            return;
        }
        cmh_flight_rec *h = cmh_fl_reserve(sizeof *h + sizeof p, &a, 0, 0);
        if (!h) return;
        *CMH_FL_BODY(h, cmh_fr_entry_short) = p;
        cmh_fl_commit(h, CMH_FR_ENTRY_SHORT, a);
        return;
    }
    cmh_flight_rec *h = cmh_fl_reserve(sizeof *h + sizeof f, &a, 0, 0);
    if (!h) return;
    *CMH_FL_BODY(h, cmh_fr_entry) = f;
    cmh_fl_commit(h, CMH_FR_ENTRY, a);
}

void cmh_flight_clear(int slot, uint64_t seq)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    uint32_t a;
    cmh_flight_rec *h = cmh_fl_reserve(sizeof *h + sizeof(cmh_fr_entry), &a, 0, 0);
    if (!h) return;
    cmh_fr_entry *r = CMH_FL_BODY(h, cmh_fr_entry);
    r->slot = (uint32_t)slot;
    r->seq = seq;
    cmh_fl_commit(h, CMH_FR_CLEAR, a);
}

void cmh_flight_set_capacity(uint64_t max_entries)
{
    if (__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) __atomic_store_n(&cmh_fl_h->max_entries, max_entries, __ATOMIC_RELAXED);
}


/* ---- the life of the file ---- */

static void copy_cmdline(char *out, size_t cap)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, cap - 1) : 0;
    if (fd >= 0) close(fd);
    if (n < 0) n = 0;
    while (n > 0 && out[n - 1] == 0) n--;
    for (ssize_t i = 0; i < n; i++)
        if (!out[i]) out[i] = ' ';
    out[n] = 0;
}


/* This very process before its exec() (same pid, same start time) left the record at the path:
 * the only record of what the old program did.  Marked as ended by exec and kept beside, as
 * SNAPSHOT-without-extension.PID.execN.cmh.flight (N: 1, 2, ... for a chain of execs), named in
 * the manifest so that `record` makes its snapshot.  0 when kept. */
static int keep_before_exec(int fd, const char *snap)
{
    uint64_t ticks = 0, mine = 0;
    if (pread(fd, &ticks, sizeof ticks, offsetof(cmh_flight_header, proc_start_ticks)) != (ssize_t)sizeof ticks ||
        !cmh_proc_stat(0, NULL, &mine) || !ticks || ticks != mine)
        return -1; /* a pid that wrapped around: an earlier process's file this one made */
    uint32_t st = 0, execed = CMH_FLIGHT_EXECED;
    if (pread(fd, &st, sizeof st, offsetof(cmh_flight_header, state)) != (ssize_t)sizeof st || st != CMH_FLIGHT_RUNNING ||
        pwrite(fd, &execed, sizeof execed, offsetof(cmh_flight_header, state)) != (ssize_t)sizeof execed)
        return -1;
    char aside[4300], away[4300] = "";
    /* a record in the runtime directory (a device, a full directory) is kept there: its name
     * there has the pid already (NAME.PID.cmh.flight) */
    size_t sl = strlen(snap), gl = strlen(g_path);
    if (!(gl == sl + 7 && !strncmp(g_path, snap, sl))) snprintf(away, sizeof away, "%.*s", (int)(gl > 7 ? gl - 7 : gl), g_path);
    const char *base = away[0] ? away : snap;
    const char *slash = strrchr(base, '/'), *dot = strrchr(base, '.');
    size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - base) : strlen(base);
    char pid_part[32] = "";
    if (!away[0]) snprintf(pid_part, sizeof pid_part, ".%lld", (long long)getpid());
    for (int n = 1; n < 1000; n++) {
        snprintf(aside, sizeof aside, "%.*s%s.exec%d%s.flight", (int)stem, base, pid_part, n, base + stem);
        if (link(g_path, aside) == 0) { /* never over another file */
            unlink(g_path);
            cmh_dump_note_manifest("exec", aside);
            return 0;
        }
        if (errno != EEXIST) break;
    }
    return -1;
}

/* A flight record already at the path: an earlier process that died before it could write its
 * snapshot (the path is ours now, so that process has no use for it).  It is kept beside, as
 * SNAPSHOT-without-extension.PID.cmh.flight, never removed: it is the only record of that run.
 * So is this process's own record from before an exec() (keep_before_exec).  Only a file of a
 * pid that wrapped around is replaced.  A link planted at the path is removed, never followed. */
static int keep_leftover(const char *snap)
{
    int fd = open(g_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) fd = open(g_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP) unlink(g_path);
        return 0;
    }
    int64_t pid = 0;
    char magic[8];
    if (pread(fd, magic, 8, 0) != 8 || memcmp(magic, CMH_FLIGHT_MAGIC, 8) ||
        pread(fd, &pid, sizeof pid, offsetof(cmh_flight_header, pid)) != (ssize_t)sizeof pid)
        pid = 0;
    int kept = pid == getpid() && keep_before_exec(fd, snap) == 0;
    uint64_t ticks = 0, now = 0;
    char st = 0;
    /* a process that still runs (the same pid, started at the same time): its record is its
     * own, written this very moment, never moved or replaced; this process keeps none there */
    int alive = !kept && pid > 0 && pid != getpid() &&
                pread(fd, &ticks, sizeof ticks, offsetof(cmh_flight_header, proc_start_ticks)) == (ssize_t)sizeof ticks &&
                (kill((pid_t)pid, 0) == 0 || errno == EPERM) &&
                (!cmh_proc_stat(pid, &st, &now) || (st != 'Z' && st != 'X' && (!ticks || ticks == now)));
    close(fd);
    if (kept) return 0;
    if (alive) {
        cmh_log("no flight record (%s is pid %lld's, which is still running, and is left to it): a crash would lose the history",
                g_path, (long long)pid);
        char why[4400]; /* for `record`'s closing lines: the reason, not a guess */
        snprintf(why, sizeof why, "%s was pid %lld's, still running", g_path, (long long)pid);
        cmh_dump_note_manifest_word("noflight", why);
        return -1;
    }
    if (pid > 0 && pid != getpid()) {
        char aside[4300];
        const char *slash = strrchr(snap, '/'), *dot = strrchr(snap, '.');
        size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - snap) : strlen(snap);
        snprintf(aside, sizeof aside, "%.*s.%lld%s.flight", (int)stem, snap, (long long)pid, snap + stem);
        if (rename(g_path, aside) == 0) {
            /* where `record` looks for it now (its manifest named the old path: a forked child
             * that touched CUDA first and died, and its parent's first allocation after) */
            cmh_dump_note_manifest_of("flight", (long)pid, aside);
            cmh_log("%s: the flight record of pid %lld, which died before writing its snapshot, is now %s "
                    "('cumemhist recover %s' writes that snapshot)", g_path, (long long)pid, aside, aside);
            return 0;
        }
    }
    unlink(g_path);
    return 0;
}

/* The clock's first point (cmh_flight_start): taken when the library is loaded */
static int64_t g_load_ticks, g_load_ns;
__attribute__((constructor(103))) static void clock_at_load(void)
{
    g_load_ns = cmh_now_ns();
    g_load_ticks = cmh_now_ticks();
}

void cmh_flight_start(void)
{
    const char *env = getenv("CUMEMHIST_FLIGHT");
    if (cmh_fl_h || (env && !strcmp(env, "0"))) return;
    char snap[4200];
    if (cmh_config_output_path(cmh_cfg.output, snap, sizeof snap) != 0) return;
    if (cmh_config_flight_path(snap, g_path, sizeof g_path) != 0) {
        cmh_log("no flight record for %s (no private directory for it: %s): a crash would lose the history", snap, strerror(errno));
        return;
    }
    long mb = env && atol(env) > 0 ? atol(env) : DEFAULT_MB;
    const char *tm = getenv("CUMEMHIST_FLIGHT_TOUCH");
    g_touch_mode = tm && !strcmp(tm, "0") ? 0 : tm && !strcmp(tm, "behind") ? 2 : 1;
    if (mb > MAX_EXTENT_MB) mb = MAX_EXTENT_MB;
    g_first_size = (uint64_t)mb << 20;
    if (keep_leftover(snap) != 0) return;
    /* A directory with no room for it (a full disk, a quota) would leave the process without
     * one, and a snapshot that then cannot be written there either is lost: the record goes to
     * the runtime directory instead, as it does for a snapshot streamed through a device, and
     * `record` recovers the snapshot there and names it.  (RLIMIT_FSIZE's EFBIG is the
     * process's limit, the same in every directory: no use looking elsewhere.) */
    char beside[sizeof g_path] = "";
    int fd, e, first_e = 0;
    for (;;) {
        fd = open(g_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        /* the header and the first extent: room for both is known before anything is kept */
        e = fd < 0 ? errno : posix_fallocate(fd, 0, CMH_FLIGHT_HEADER + g_first_size);
        if (!e || beside[0] || (e != ENOSPC && e != EDQUOT)) break;
        if (fd >= 0) close(fd), unlink(g_path);
        snprintf(beside, sizeof beside, "%s", g_path);
        first_e = e;
        if (cmh_config_flight_path_runtime(snap, g_path, sizeof g_path) != 0) {
            cmh_log("no flight record (%s: %s; no runtime directory for it): a crash would lose the history", beside, strerror(e));
            return;
        }
        if (keep_leftover(snap) != 0) return;
    }
    if (e) {
        if (beside[0]) cmh_log("no flight record (%s: %s; %s: %s): a crash would lose the history", beside, strerror(first_e), g_path, strerror(e));
        else cmh_log("no flight record (%s: %s): a crash would lose the history", g_path, strerror(e));
        if (fd >= 0) close(fd), unlink(g_path);
        return;
    }
    if (beside[0]) cmh_log("%s: %s; the flight record is %s instead", beside, strerror(first_e), g_path);
    void *m = mmap(NULL, CMH_FLIGHT_HEADER, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        cmh_log("no flight record (%s: %s): a crash would lose the history", g_path, strerror(errno));
        close(fd), unlink(g_path);
        return;
    }
    /* No read-around for the header's first write: on ext4 that fault zero-filled the
     * fallocated (unwritten) pages around it, 1.6 ms of a process's first allocation (perf: a
     * page fault in cmh_flight_start, under page_cache_ra_order and ext4_mpage_readpages) */
    madvise(m, CMH_FLIGHT_HEADER, MADV_RANDOM);
    struct stat own;
    fstat(fd, &own);
    g_dev = own.st_dev, g_ino = own.st_ino;
    g_fd = fd;
    cmh_flight_header *h = m;
    memcpy(h->magic, CMH_FLIGHT_MAGIC, 8);
    h->version = CMH_FLIGHT_VERSION;
    h->header_size = CMH_FLIGHT_HEADER;
    h->pid = getpid();
    h->start_ns = cmh_process_start_ns();
    /* A first slope for the clock at once, so that a process that dies before the helper's
     * first tick (2 ms after this) still gets its times right: from the point taken when the
     * library was loaded to now.  (This was a 2 ms sleep between two points here, most of the
     * 4-5 ms a process's first allocation took.)  The helper's ticks move t1 on. */
    int64_t now_ns = cmh_now_ns(), now_ticks = cmh_now_ticks();
    if (g_load_ticks && now_ticks > g_load_ticks && now_ns > g_load_ns) h->t0_ns = g_load_ns, h->t0_ticks = g_load_ticks;
    else h->t0_ns = now_ns, h->t0_ticks = now_ticks; /* (the identity until the first tick) */
    h->t1_ns = now_ns;
    h->t1_ticks = now_ticks;
    h->max_entries = cmh_cfg.max_entries;
    h->max_frames = cmh_cfg.max_frames;
    h->enabled = (uint8_t)cmh_cfg.enabled;
    h->context = (uint8_t)cmh_cfg.context;
    h->marks = CMH_FLIGHT_MARKS_EXIT;
    h->gen = 1;
    snprintf(h->snapshot_path, sizeof h->snapshot_path, "%s", snap);
    gethostname(h->hostname, sizeof h->hostname - 1);
    copy_cmdline(h->cmdline, sizeof h->cmdline);
    int32_t rank, local, world;
    cmh_job_identity(&rank, &local, &world);
    h->rank1 = rank + 1, h->local_rank1 = local + 1, h->world_size1 = world + 1;
    snprintf(h->producer, sizeof h->producer, "cumemhist %s", CMH_VERSION);
    /* who this process is beyond its pid, so a reader can tell it from a later one given it */
    uint64_t ticks = 0;
    cmh_proc_stat(0, NULL, &ticks);
    h->proc_start_ticks = ticks;
    cmh_boot_id(h->boot_id, sizeof h->boot_id);
    h->forked_from = cmh_process_forked_from();
    /* the first extent's first 64 KiB only, on the calling thread: its first allocation was
     * 0.8 ms longer for the whole window (perf: the kernel's read-around zeroing the fallocated
     * pages under MADV_POPULATE_WRITE); the first appends wake the helper for the rest */
    if (make_extent(h, 0, g_first_size, 64ull << 10) != 0) {
        cmh_log("no flight record (%s: no room for %ld MiB): a crash would lose the history", g_path, mb);
        munmap(m, CMH_FLIGHT_HEADER);
        close(fd);
        unlink(g_path);
        g_fd = -1;
        return;
    }
    h->active = 0;
    g_prep_at = g_first_size / 2;
    g_crc_hw = cmh_crc32c_hw();
    __atomic_store_n(&cmh_fl_h, h, __ATOMIC_RELEASE); /* only now may appends come: the first extent is there */
    cmh_pystack_each(cmh_flight_pyframe); /* before the stacks that name them */
    cmh_stacks_each(cmh_flight_stack); /* those made before (a forked child's inherited ones) */
    cmh_marks_each(cmh_flight_name);
    cmh_hist_threads_each(cmh_flight_thread, NULL);
    cmh_process_flight_children(); /* forked before (a parent that forks before its first allocation) */
    cmh_vmm_flight_handles(); /* handles made before (none but where the record starts late) */
    /* entries made before (a mark before the first allocation): the reader drops the copies of
     * any appended twice, by their numbers */
    for (int slot = 0; slot <= CMH_MAX_DEVICES; slot++) {
        cmh_rec_entry *copy;
        uint64_t n, dropped, seq;
        int rc;
        if (!cmh_hist_copy_ring(slot, &copy, &n, &dropped, &seq, &rc)) continue;
        for (uint64_t k = 0; k < n && rc == CMH_OK; k++) cmh_flight_entry(slot, seq - n + k + 1, &copy[k]);
        free(copy);
    }
    cmh_fl_scan_modules();
    cmh_dump_note_manifest("flight", g_path);
}

/* Bytes in the current generation past which a bounded ring's history is checkpointed: 4 rings'
 * worth of entry records, counted at 28 bytes, the mean of a tiny allocation's (32) and its
 * free's (24), which nearly every entry takes (before version 6, 36: 40 and 32) (at the whole record's 88, a generation of short
 * records held 7 rings' worth); at least 16 first extents (64 MiB; CUMEMHIST_FLIGHT=1, 16). */
#define ENTRY_RECORD_MEAN ((CMH_FR_ENTRY_TINY_LEN + CMH_FR_FREE_TINY_LEN) / 2)
static uint64_t generation_limit(void)
{
    uint64_t ring = __atomic_load_n(&cmh_fl_h->max_entries, __ATOMIC_RELAXED) * ENTRY_RECORD_MEAN * 4;
    return ring > g_first_size * 16 ? ring : g_first_size * 16;
}

static uint64_t generation_bytes(void)
{
    uint64_t b = 0, gen = __atomic_load_n(&cmh_fl_h->gen, __ATOMIC_ACQUIRE);
    uint32_t n = __atomic_load_n(&cmh_fl_h->nareas, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t c = __atomic_load_n(&cmh_fl_h->area[i].cursor, __ATOMIC_RELAXED), sz = __atomic_load_n(&cmh_fl_h->area[i].size, __ATOMIC_RELAXED);
        if (__atomic_load_n(&cmh_fl_h->area[i].gen, __ATOMIC_ACQUIRE) == gen) b += c < sz ? c : sz;
    }
    return b;
}

int cmh_flight_checkpoint_wanted(void)
{
    return __atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE) && __atomic_load_n(&cmh_fl_h->max_entries, __ATOMIC_RELAXED) &&
           __atomic_load_n(&cmh_fl_h->active, __ATOMIC_RELAXED) < CMH_FLIGHT_EXTENTS &&
           generation_bytes() > generation_limit();
}

/* The helper thread, every 100 ms or so: the clock line, the recorder's loss count, the
 * modules of new stacks, a new generation when a bounded ring's history outgrew the current. */
static void checkpoint(void);

/* Under g_window (no extent is unmapped meanwhile): what is written, out of RSS. */
static void release_written(void)
{
    uint32_t n = __atomic_load_n(&cmh_fl_h->nareas, __ATOMIC_ACQUIRE), act = __atomic_load_n(&cmh_fl_h->active, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        if (!g_map[i] || cmh_fl_h->area[i].dropped || (i != act && !__atomic_load_n(&cmh_fl_h->area[i].cursor, __ATOMIC_RELAXED))) continue; /* made ahead: empty */
        uint64_t size = __atomic_load_n(&cmh_fl_h->area[i].size, __ATOMIC_ACQUIRE);
        uint64_t c = __atomic_load_n(&cmh_fl_h->area[i].cursor, __ATOMIC_RELAXED);
        /* an extent other than the one `act` names is given back whole only once sealed (a
         * record did not fit: the appends went on past it); else up to what was written: it
         * may be the extent made ahead that became active since `act` was read, and giving it
         * back whole set its g_rel to its end, so nothing written there was given back again
         * (seen: 1 run in 6 kept a whole 64 MiB extent resident, 38.6 B per entry) */
        uint64_t done = __atomic_load_n(&cmh_fl_h->area[i].sealed, __ATOMIC_RELAXED) ? size : c < size ? c : size;
        uint64_t upto = i == act ? (c > KEEP_RESIDENT ? c - KEEP_RESIDENT : 0) : done;
        if (upto > size) upto = size;
        upto &= ~(uint64_t)4095;
        /* from 8 MiB before where the last call stopped: pages given back were seen mapped
         * again there (on ext4, up to 2 MiB of them at a 2 MiB boundary of the file, 2 to 5 MiB
         * behind the cursor: a large folio of the page cache mapped by a later fault, it seems),
         * and left so they made up most of the flight record's resident pages */
        uint64_t rel = __atomic_load_n(&g_rel[i], __ATOMIC_RELAXED); /* an appender's release_mine moves it too */
        uint64_t from = rel > REMAPPED ? rel - REMAPPED : 0;
        if (upto > rel && madvise(g_map[i] + from, upto - from, MADV_DONTNEED) == 0)
            while (rel < upto && !__atomic_compare_exchange_n(&g_rel[i], &rel, upto, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            }
    }
}

void cmh_flight_tick(void)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_tick);
    int64_t ns = cmh_now_ns(), t = cmh_now_ticks();
    __atomic_add_fetch(&cmh_fl_h->t1_seq, 1, __ATOMIC_ACQ_REL);
    cmh_fl_h->t1_ns = ns;
    cmh_fl_h->t1_ticks = t;
    __atomic_add_fetch(&cmh_fl_h->t1_seq, 1, __ATOMIC_ACQ_REL);
    cmh_fl_h->lost_events = __atomic_load_n(&cmh_lost, __ATOMIC_RELAXED);
    if (cmh_fl_stacks_unscanned()) cmh_fl_scan_modules();
    if (cmh_flight_checkpoint_wanted()) checkpoint();
    pthread_mutex_lock(&g_window);
    release_written();
    pthread_mutex_unlock(&g_window);
    pthread_mutex_unlock(&g_tick);
}

static void drop_generations_before(uint64_t gen)
{
    uint32_t n = __atomic_load_n(&cmh_fl_h->nareas, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        cmh_flight_area *a = &cmh_fl_h->area[i];
        pthread_mutex_lock(&g_window); /* a slot is made (make_extent) under it: seen whole */
        int old = __atomic_load_n(&a->gen, __ATOMIC_ACQUIRE) < gen && !__atomic_load_n(&a->dropped, __ATOMIC_ACQUIRE) && g_map[i];
        pthread_mutex_unlock(&g_window);
        if (!old) continue;
        struct timespec pause = {0, 100000};
        while (__atomic_load_n(&a->writers, __ATOMIC_ACQUIRE)) nanosleep(&pause, NULL);
        uint64_t off = a->offset, size = a->size; /* once dropped, the slot may take another extent at once */
        pthread_mutex_lock(&g_window);
        munmap(g_map[i], size);
        __atomic_store_n(&g_map[i], NULL, __ATOMIC_RELAXED);
        __atomic_store_n(&a->dropped, 1, __ATOMIC_RELEASE); /* (free_slot: unmapped before) */
        pthread_mutex_unlock(&g_window);
        /* the disk space back; the space taken again by a later extent only where it is a hole
         * (reads as zeros: nothing of this extent's is read there as that one's) */
        int fd = flight_fd();
        if (fd >= 0 && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)size) == 0) {
            pthread_mutex_lock(&g_grow);
            hole_add(off, size);
            pthread_mutex_unlock(&g_grow);
        }
    }
}

void cmh_flight_checkpoint(void)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_tick);
    checkpoint();
    pthread_mutex_unlock(&g_tick);
}

static void checkpoint(void)
{
    /* a new generation: what entries refer to is written there again, then the state */
    if (next_extent(0, 1) < 0) return;
    uint64_t gen = cmh_fl_h->gen;
    cmh_pystack_each(cmh_flight_pyframe); /* before the stacks that name them */
    cmh_stacks_each(cmh_flight_stack);
    cmh_marks_each(cmh_flight_name);
    cmh_process_flight_children(); /* the children, whose records the dropped extents hold */
    cmh_vmm_flight_handles(); /* the handles held, whose records the dropped extents hold */
    cmh_fl_modules_reset(0); /* the modules too */
    cmh_fl_scan_modules();
    uint32_t which = cmh_fl_h->ckpt_which == 1 ? 2 : 1; /* the other file: the valid one stays intact */
    char path[4400];
    snprintf(path, sizeof path, "%s.ckpt%u.cmh", g_path, which);
    uint64_t cut[CMH_FLIGHT_SLOTS];
    if (cmh_dump_checkpoint(path, cut, CMH_FLIGHT_SLOTS) != CMH_OK) return; /* the older extents still hold it all */
    memcpy(cmh_fl_h->ckpt_cut[which - 1], cut, sizeof cut);
    cmh_fl_h->ckpt_gen[which - 1] = gen;
    __atomic_store_n(&cmh_fl_h->ckpt_which, which, __ATOMIC_RELEASE);
    cmh_hist_quiesce(); /* every trace entry claimed before the new generation began is written */
    drop_generations_before(gen);
}

void cmh_flight_ended_by_signal(int sig) /* async-signal-safe: two stores into the mapping */
{
    cmh_flight_header *h = __atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE);
    if (!h) return;
    h->end_signal = sig;
    __atomic_store_n(&h->state, CMH_FLIGHT_SIGNALED, __ATOMIC_RELEASE);
}

void cmh_flight_ended_by_exit(int status) /* two stores, and only into this process's own record */
{
    cmh_flight_header *h = __atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE);
    /* (a vfork child shares its parent's memory: the record it sees is the parent's) */
    if (!h || h->pid != (int64_t)getpid() || __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != CMH_FLIGHT_RUNNING) return;
    h->end_signal = status;
    __atomic_store_n(&h->state, CMH_FLIGHT_QUIT, __ATOMIC_RELEASE);
}

void cmh_flight_finish(int snapshot_written)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    cmh_flight_tick();
    if (snapshot_written) { /* the snapshot has it all: nothing to recover */
        char p[4400];
        for (int i = 1; i <= 2; i++) {
            snprintf(p, sizeof p, "%s.ckpt%d.cmh", g_path, i);
            unlink(p);
        }
        /* the file at the path, if still this one's (never another's); known by its identity,
         * not by its descriptor, which the program may have closed */
        struct stat at;
        if (stat(g_path, &at) == 0 && at.st_dev == g_dev && at.st_ino == g_ino) unlink(g_path);
    } else {
        __atomic_store_n(&cmh_fl_h->state, CMH_FLIGHT_EXITED, __ATOMIC_RELEASE);
    }
}

void cmh_flight_reset_after_fork(void)
{
    /* the child must not write into its parent's record: it starts its own at its first touch */
    if (cmh_fl_h) {
        for (uint32_t i = 0; i < CMH_FLIGHT_EXTENTS; i++)
            if (g_map[i]) munmap(g_map[i], cmh_fl_h->area[i].size), g_map[i] = NULL;
        munmap(cmh_fl_h, CMH_FLIGHT_HEADER);
        if (is_ours(g_fd)) close(g_fd); /* (a number the program reused is its own) */
    }
    cmh_fl_h = NULL;
    g_fd = -1;
    g_prep_at = UINT64_MAX;
    g_prep_asked = 0;
    memset(g_rel, 0, sizeof g_rel);
    memset(g_touch, 0, sizeof g_touch);
    g_nholes = 0;
    g_file_end = CMH_FLIGHT_HEADER;
    g_serial = 0;
    g_ahead = -1;
    pthread_mutex_init(&g_grow, NULL);
    pthread_mutex_init(&g_tick, NULL);
    pthread_mutex_init(&g_window, NULL);
    pthread_mutex_init(&g_fdlock, NULL);
    cmh_fl_modules_reset(1);
}
