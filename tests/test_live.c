/*
 * test_live.c - the live reader's contract (cumemhist/live.h) on flight records written here
 * by hand, as a running writer leaves them: only what was appended since is read; a record
 * reserved but not yet committed (its length there, its commit word not) is "not yet there" and
 * is read once committed; a damaged record is skipped and counted; allocated, reserved and the
 * peak follow every entry; a cuMemGetInfo record gives the device's latest sample; a new extent
 * is found; the snapshot has the state.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crc32c.h"
#include "cumemhist/live.h"
#include "flight_format.h"
#include "live_reader.h"
#include "testutil.h"

#define EXT (1 << 16)

static char g_path[256];
static int g_fd;
static unsigned char *g_map;
static cmh_flight_header *g_h;
static uint64_t g_seq;
static int64_t g_ticks = 2;

static void make_record(void)
{
    snprintf(g_path, sizeof g_path, "/tmp/cmh-test-live-%d.flight", (int)getpid());
    unlink(g_path);
    g_fd = open(g_path, O_RDWR | O_CREAT | O_EXCL, 0600);
    CU_ASSERT_FATAL(g_fd >= 0);
    CU_ASSERT_FATAL(ftruncate(g_fd, CMH_FLIGHT_HEADER + 2 * EXT) == 0);
    g_map = mmap(NULL, CMH_FLIGHT_HEADER + 2 * EXT, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
    CU_ASSERT_FATAL(g_map != MAP_FAILED);
    g_h = (cmh_flight_header *)g_map;
    memcpy(g_h->magic, CMH_FLIGHT_MAGIC, 8);
    g_h->version = CMH_FLIGHT_VERSION;
    g_h->header_size = CMH_FLIGHT_HEADER;
    g_h->pid = getpid();
    g_h->t0_ticks = 1, g_h->t0_ns = 1000, g_h->t1_ticks = 2, g_h->t1_ns = 2000;
    g_h->gen = 1;
    g_h->area[0] = (cmh_flight_area){CMH_FLIGHT_HEADER, EXT, 0, 1, 0, 0, 0};
    g_h->area_serial[0] = 1; /* version 5: the order made */
    g_h->nareas = 1;
    g_seq = 0;
}

/* Reserve a record in extent a; commit it unless told not to.  Returns its head. */
static cmh_flight_rec *append(uint32_t a, uint32_t type, const void *body, uint32_t blen, int commit)
{
    cmh_flight_area *ar = &g_h->area[a];
    uint32_t len = (uint32_t)((sizeof(cmh_flight_rec) + blen + 7) & ~7u);
    cmh_flight_rec *r = (cmh_flight_rec *)(g_map + ar->offset + ar->cursor);
    ar->cursor += len;
    r->len = len;
    memcpy(r + 1, body, blen);
    r->zero = 0;
    r->sum = cmh_crc32c(0, r + 1, len - sizeof *r);
    if (commit) r->commit = CMH_FLIGHT_COMMIT | type;
    return r;
}

static cmh_flight_rec *entry(uint32_t a, int action, uint64_t addr, uint64_t size, int commit)
{
    cmh_fr_entry e;
    memset(&e, 0, sizeof e);
    e.slot = 0;
    e.seq = ++g_seq;
    e.ticks = g_ticks;
    e.addr = addr;
    e.size = size;
    e.action = (uint8_t)action;
    e.flags = CMH_EF_WHOLE_BLOCK;
    return append(a, CMH_FR_ENTRY, &e, sizeof e, commit);
}

static cmh_live_device dev0(cmh_live *l)
{
    cmh_live_device d[4];
    memset(d, 0, sizeof d);
    uint32_t n = cmh_live_devices(l, d, 4);
    CU_ASSERT(n >= 1);
    return d[0];
}

static void test_incremental(void)
{
    make_record();
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x1000, 4096, 1);
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x10000, 8192, 1);
    cmh_flight_rec *late = entry(0, CMH_ACT_SEGMENT_ALLOC, 0x20000, 1 << 20, 0); /* reserved, not yet committed */
    entry(0, CMH_ACT_SEGMENT_FREE, 0x1000, 4096, 1);                           /* after it: must wait for it */
    cmh_live *l;
    char err[512];
    CU_ASSERT_FATAL(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_OK);
    cmh_live_device d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 2);
    CU_ASSERT_EQUAL(d.allocated, 4096 + 8192);
    CU_ASSERT_EQUAL(d.reserved, 4096 + 8192);
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->torn, 0); /* the process runs: not torn, not yet there */
    uint64_t read = cmh_live_get_info(l)->bytes;

    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK); /* nothing new */
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->last_bytes, 0);
    CU_ASSERT_EQUAL(dev0(l).entries, 2);

    late->commit = CMH_FLIGHT_COMMIT | CMH_FR_ENTRY; /* now it is there, and what followed it */
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 4);
    CU_ASSERT_EQUAL(d.allocated, 8192 + (1 << 20));
    CU_ASSERT_EQUAL(d.peak_allocated, 4096 + 8192 + (1 << 20));
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->last_bytes, 2 * 88); /* only the two appended since */
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->bytes, read + 2 * 88);

    /* a damaged record (its body does not match its sum) is skipped and counted */
    cmh_flight_rec *bad = entry(0, CMH_ACT_SEGMENT_FREE, 0x10000, 8192, 1);
    ((unsigned char *)(bad + 1))[20] ^= 0xff;
    cmh_fr_meminfo m = {0, 0, 2, 1000, 5000};
    append(0, CMH_FR_MEMINFO, &m, sizeof m, 1);
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    d = dev0(l);
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->damaged, 1);
    CU_ASSERT_EQUAL(d.allocated, 8192 + (1 << 20));
    CU_ASSERT(d.meminfo_known);
    CU_ASSERT_EQUAL(d.mem_total - d.mem_free, 4000);

    /* a second extent: the writer moves on; the reader follows */
    g_h->area[1] = (cmh_flight_area){CMH_FLIGHT_HEADER + EXT, EXT, 0, 1, 0, 0, 0};
    g_h->area_serial[1] = 2;
    __atomic_store_n(&g_h->nareas, 2, __ATOMIC_RELEASE);
    g_h->active = 1;
    entry(1, CMH_ACT_SEGMENT_FREE, 0x20000, 1 << 20, 1);
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    d = dev0(l);
    CU_ASSERT_EQUAL(d.allocated, 8192);
    CU_ASSERT_EQUAL(d.entries, 5); /* the damaged one is not an entry */

    cmh_snapshot s;
    CU_ASSERT_FATAL(cmh_live_snapshot(l, &s) == CMH_OK);
    CU_ASSERT_EQUAL(s.nsegments, 1);
    CU_ASSERT_EQUAL(s.nsegments ? s.segments[0].addr : 0, 0x10000);
    CU_ASSERT_EQUAL(s.nentries, 5);
    CU_ASSERT_EQUAL(s.nmeminfo, 1);
    cmh_snapshot_free(&s);
    cmh_live_close(l);
    munmap(g_map, CMH_FLIGHT_HEADER + 2 * EXT);
    close(g_fd);
    unlink(g_path);
}

/* Records read in batches (their checksums four at a time): a damaged record anywhere in a
 * batch is skipped alone.  A window smaller than the history keeps the latest entries, oldest
 * first.  A record growing past the reader's mapping (its room to grow) is followed. */
static void test_batches_window_growth(void)
{
    make_record();
    for (int i = 0; i < 10; i++) {
        cmh_flight_rec *r = entry(0, CMH_ACT_SEGMENT_ALLOC, 0x100000 * (uint64_t)(i + 1), 4096 * (uint64_t)(i + 1), 1);
        if (i == 2 || i == 7) ((unsigned char *)(r + 1))[40] ^= 0x5a; /* its requested bytes: damaged */
    }
    cmh_live *l;
    char err[512];
    CU_ASSERT_FATAL(cmh_live_open(g_path, 4, &l, err, sizeof err) == CMH_OK);
    cmh_live_device d = dev0(l);
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->damaged, 2);
    CU_ASSERT_EQUAL(d.entries, 8);
    uint64_t want = 0;
    for (int i = 0; i < 10; i++)
        if (i != 2 && i != 7) want += 4096 * (uint64_t)(i + 1);
    CU_ASSERT_EQUAL(d.allocated, want);
    cmh_snapshot s;
    CU_ASSERT_FATAL(cmh_live_snapshot(l, &s) == CMH_OK);
    CU_ASSERT_EQUAL(s.nentries, 4); /* the window: entries 5, 6, 8, 9 (0-based), in order */
    CU_ASSERT_EQUAL(s.ntraces ? s.traces[0].dropped : 0, 4);
    static const uint64_t kept[4] = {6, 7, 9, 10};
    for (uint32_t i = 0; i < 4 && i < s.nentries; i++) CU_ASSERT_EQUAL(cmh_entry_addr(&s, &s.entries[i]), 0x100000 * kept[i]);
    cmh_snapshot_free(&s);

    /* the file grows by 96 MiB (sparse), an extent at its end: past the reader's mapping */
    size_t big = CMH_FLIGHT_HEADER + 2 * EXT + ((size_t)96 << 20);
    munmap(g_map, CMH_FLIGHT_HEADER + 2 * EXT);
    CU_ASSERT_FATAL(ftruncate(g_fd, (off_t)big) == 0);
    g_map = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
    CU_ASSERT_FATAL(g_map != MAP_FAILED);
    g_h = (cmh_flight_header *)g_map;
    g_h->area[1] = (cmh_flight_area){big - EXT, EXT, 0, 1, 0, 0, 0};
    g_h->area_serial[1] = 2;
    __atomic_store_n(&g_h->nareas, 2, __ATOMIC_RELEASE);
    g_h->active = 1;
    entry(1, CMH_ACT_SEGMENT_FREE, 0x100000 * 10, 4096 * 10, 1);
    entry(1, CMH_ACT_SEGMENT_FREE, 0x100000 * 9, 4096 * 9, 1);
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 10);
    CU_ASSERT_EQUAL(d.allocated, want - 4096 * 19);
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->last_bytes, 2 * 88);
    CU_ASSERT_FATAL(cmh_live_snapshot(l, &s) == CMH_OK);
    CU_ASSERT_EQUAL(s.nentries, 4);
    CU_ASSERT_EQUAL(s.nentries == 4 ? cmh_entry_addr(&s, &s.entries[3]) : 0, 0x100000 * 9);
    CU_ASSERT_EQUAL(s.nentries == 4 ? s.entries[3].action : 0, CMH_ACT_SEGMENT_FREE);
    cmh_snapshot_free(&s);
    cmh_live_close(l);
    munmap(g_map, big);
    close(g_fd);
    unlink(g_path);
}

/* Two writers claim numbers 2 and 3 and append 3 first: 2 is read, not taken for a copy; a
 * real copy (the record's start appends the ring again) is skipped. */
static void test_overtaken(void)
{
    make_record();
    g_ticks = 10;
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x1000, 4096, 1); /* 1 */
    g_seq = 2, g_ticks = 30;
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x3000, 4096 * 3, 1); /* 3, ahead of 2 (and stamped later) */
    g_seq = 1, g_ticks = 20;
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x2000, 4096 * 2, 1); /* 2 */
    g_seq = 0, g_ticks = 10;
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x1000, 4096, 1); /* 1 again: a copy */
    g_seq = 3, g_ticks = 40;
    cmh_live *l;
    char err[512];
    CU_ASSERT_FATAL(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_OK);
    cmh_live_device d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 3);
    CU_ASSERT_EQUAL(d.allocated, 4096 * 6);
    g_seq = 1;
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x2000, 4096 * 2, 1); /* 2 again, in a later refresh */
    g_seq = 3;
    entry(0, CMH_ACT_SEGMENT_FREE, 0x3000, 4096 * 3, 1); /* 4 */
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 4);
    CU_ASSERT_EQUAL(d.allocated, 4096 * 3);
    cmh_snapshot s;
    CU_ASSERT_FATAL(cmh_live_snapshot(l, &s) == CMH_OK);
    CU_ASSERT_EQUAL(s.nentries, 4);
    for (uint32_t i = 1; i < s.nentries; i++) CU_ASSERT(cmh_entry_time(&s, &s.entries[i]) >= cmh_entry_time(&s, &s.entries[i - 1]));
    cmh_snapshot_free(&s);
    cmh_live_close(l);
    munmap(g_map, CMH_FLIGHT_HEADER + 2 * EXT);
    close(g_fd);
    unlink(g_path);
    g_ticks = 2;
}

/* A later extent waits for the earlier one to be read to its end.  One thread's free is
 * reserved in extent 0 but not yet committed when another's record does not fit (extent 0 is
 * sealed there) and goes on to extent 1 with an allocation.  Read past the free, the state held
 * both allocations at once: 3 MiB allocated, a peak of 3 MiB kept for good, beside 2 entries
 * (an exporter's scrape once read 596321 entries beside the allocation of pair 307990). */
static void test_prefix_across_extents(void)
{
    make_record();
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x100000, 1 << 20, 1);
    cmh_live *l;
    char err[512];
    CU_ASSERT_FATAL(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_OK);
    cmh_flight_rec *late = entry(0, CMH_ACT_SEGMENT_FREE, 0x100000, 1 << 20, 0); /* reserved, not committed yet */
    g_h->area[0].sealed = g_h->area[0].cursor; /* the next record did not fit */
    g_h->area[1] = (cmh_flight_area){CMH_FLIGHT_HEADER + EXT, EXT, 0, 1, 0, 0, 0};
    g_h->area_serial[1] = 2;
    __atomic_store_n(&g_h->nareas, 2, __ATOMIC_RELEASE);
    g_h->active = 1;
    entry(1, CMH_ACT_SEGMENT_ALLOC, 0x400000, 2 << 20, 1);
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    cmh_live_device d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 1); /* the state as it was: extent 1 follows the free being written */
    CU_ASSERT_EQUAL(d.allocated, 1 << 20);
    CU_ASSERT_EQUAL(d.peak_allocated, 1 << 20);
    late->commit = CMH_FLIGHT_COMMIT | CMH_FR_ENTRY;
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 3);
    CU_ASSERT_EQUAL(d.allocated, 2 << 20);
    CU_ASSERT_EQUAL(d.peak_allocated, 2 << 20); /* never both at once */
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->torn, 0);
    cmh_live_close(l);
    munmap(g_map, CMH_FLIGHT_HEADER + 2 * EXT);
    close(g_fd);
    unlink(g_path);
}

/* A checkpoint gives extent 0's generation back while a refresh is under way: after the refresh
 * found nothing lost, before its walk.  The free in extent 0 (not read yet) is the checkpoint's
 * now; extent 1, of the new generation, holds a later allocation.  Read past the dropped extent,
 * the state held both allocations beside 2 entries (the exporter once published 3192829 entries,
 * odd, beside 0 bytes allocated: a later free without the allocation before it); it stays the
 * prefix read so far, and the next refresh starts again. */
static void drop_extent0(cmh_live *l)
{
    (void)l;
    memset(g_map + CMH_FLIGHT_HEADER, 0, EXT); /* given back: a hole */
    __atomic_store_n(&g_h->area[0].dropped, 1, __ATOMIC_RELEASE);
}

static void reuse_slot0(uint64_t serial);
static void drop_reuse_extent0(cmh_live *l)
{
    drop_extent0(l);
    reuse_slot0(3);
}

static void dropped_mid_refresh(void (*between)(cmh_live *))
{
    make_record();
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x100000, 1 << 20, 1);
    cmh_live *l;
    char err[512];
    CU_ASSERT_FATAL(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_OK);
    CU_ASSERT_EQUAL(dev0(l).entries, 1);
    entry(0, CMH_ACT_SEGMENT_FREE, 0x100000, 1 << 20, 1);
    g_h->area[0].sealed = g_h->area[0].cursor;
    g_h->gen = 2;
    g_h->area[1] = (cmh_flight_area){CMH_FLIGHT_HEADER + EXT, EXT, 0, 2, 0, 0, 0};
    g_h->area_serial[1] = 2;
    __atomic_store_n(&g_h->nareas, 2, __ATOMIC_RELEASE);
    g_h->active = 1;
    entry(1, CMH_ACT_SEGMENT_ALLOC, 0x400000, 2 << 20, 1);
    cmh_live_between_passes = between;
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    cmh_live_between_passes = NULL;
    cmh_live_device d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 1); /* the prefix read before the drop */
    CU_ASSERT_EQUAL(d.allocated, 1 << 20);
    CU_ASSERT_EQUAL(d.peak_allocated, 1 << 20);
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK); /* the drop seen: from the start again */
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->resets, 1);
    d = dev0(l);
    CU_ASSERT_EQUAL(d.allocated, 2 << 20); /* (no checkpoint here: extent 1 alone) */
    CU_ASSERT_EQUAL(d.peak_allocated, 2 << 20);
    cmh_live_close(l);
    munmap(g_map, CMH_FLIGHT_HEADER + 2 * EXT);
    close(g_fd);
    unlink(g_path);
}

/* the same, the slot taken by a later extent too (once read past, the next refresh saw nothing
 * lost: the state stayed wrong) */
static void test_dropped_mid_refresh(void)
{
    dropped_mid_refresh(drop_extent0);
    dropped_mid_refresh(drop_reuse_extent0);
}

/* Version 5: slot 0's extent dropped and the slot (and its space) taken by a later extent, as
 * the recorder does once a checkpoint gave a generation back.  A reader that saw the drop after
 * reading the extent to its end reads the new one from its start; one that did not see it
 * (the extent was dropped and the slot reused between two refreshes) starts again; a reader
 * takes the extents in the order made (serial), not the slots'. */
static void reuse_slot0(uint64_t serial)
{
    __atomic_store_n(&g_h->area_serial[0], 0, __ATOMIC_RELEASE);
    memset(g_map + CMH_FLIGHT_HEADER, 0, EXT); /* given back: a hole */
    g_h->area[0] = (cmh_flight_area){CMH_FLIGHT_HEADER, EXT, 0, 1, 0, 0, 0};
    __atomic_store_n(&g_h->area_serial[0], serial, __ATOMIC_RELEASE);
}

static void test_reuse(void)
{
    make_record();
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x1000, 4096, 1);
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x2000, 8192, 1);
    cmh_live *l;
    char err[512];
    CU_ASSERT_FATAL(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_OK);
    CU_ASSERT_EQUAL(dev0(l).entries, 2);
    g_h->area[1] = (cmh_flight_area){CMH_FLIGHT_HEADER + EXT, EXT, 0, 1, 0, 0, 0};
    g_h->area_serial[1] = 2;
    __atomic_store_n(&g_h->nareas, 2, __ATOMIC_RELEASE);
    g_h->active = 1;
    entry(1, CMH_ACT_SEGMENT_FREE, 0x1000, 4096, 1);
    g_h->area[0].dropped = 1; /* read to its end: nothing lost */
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    CU_ASSERT_EQUAL(dev0(l).entries, 3);
    CU_ASSERT_EQUAL(dev0(l).allocated, 8192);
    /* slot 0 takes the next extent: read from its start */
    reuse_slot0(3);
    g_h->active = 0;
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x1000, 1 << 20, 1);
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    cmh_live_device d = dev0(l);
    CU_ASSERT_EQUAL(d.entries, 4);
    CU_ASSERT_EQUAL(d.allocated, 8192 + (1 << 20));
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->resets, 0);
    /* a reader opened now takes slot 1 (serial 2: the free of 0x1000) before slot 0 (serial 3: its
     * new allocation), so the allocation is live (in slot order, it would be freed) */
    cmh_live *l2;
    CU_ASSERT_FATAL(cmh_live_open(g_path, 0, &l2, err, sizeof err) == CMH_OK);
    CU_ASSERT_EQUAL(dev0(l2).allocated, 1 << 20);
    cmh_live_close(l2);
    /* more in slot 0, then it goes and is reused before the reader looks: it starts again */
    entry(0, CMH_ACT_SEGMENT_FREE, 0x2000, 8192, 1);
    reuse_slot0(4);
    entry(0, CMH_ACT_SEGMENT_ALLOC, 0x5000, 4096, 1);
    CU_ASSERT(cmh_live_refresh(l, err, sizeof err) == CMH_OK);
    CU_ASSERT_EQUAL(cmh_live_get_info(l)->resets, 1);
    CU_ASSERT_EQUAL(dev0(l).allocated, 4096); /* the journal alone (no checkpoint here): what it holds */
    cmh_live_close(l);
    munmap(g_map, CMH_FLIGHT_HEADER + 2 * EXT);
    close(g_fd);
    unlink(g_path);
}

static void test_refuses(void)
{
    make_record();
    g_h->nareas = 99;
    cmh_live *l;
    char err[512];
    CU_ASSERT(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_EFORMAT);
    CU_ASSERT(strstr(err, "extents") != NULL);
    g_h->nareas = 1;
    g_h->area[0].offset = 7;
    CU_ASSERT(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_EFORMAT);
    munmap(g_map, CMH_FLIGHT_HEADER + 2 * EXT);
    close(g_fd);
    unlink(g_path);
    CU_ASSERT(cmh_live_open(g_path, 0, &l, err, sizeof err) == CMH_EIO);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("live", NULL, NULL);
    CMH_ADD_TEST(s, test_incremental);
    CMH_ADD_TEST(s, test_batches_window_growth);
    CMH_ADD_TEST(s, test_overtaken);
    CMH_ADD_TEST(s, test_reuse);
    CMH_ADD_TEST(s, test_prefix_across_extents);
    CMH_ADD_TEST(s, test_dropped_mid_refresh);
    CMH_ADD_TEST(s, test_refuses);
    return cmh_test_main();
}
