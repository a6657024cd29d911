/*
 * live.c - the incremental reader of a running process's flight record (cumemhist/live.h; the
 * format: snapshot/flight_format.h; the one-shot reader it mirrors: recover.c).
 *
 * State kept between refreshes: where each extent was read up to, the final state of the
 * entries applied so far (flight_state.c, with its per-device sums), the stacks, names and
 * modules seen, the latest cuMemGetInfo sample of each device and a window of the trace.  A
 * refresh looks at the header (it may have grown extents), remaps the file when it grew, and
 * walks each unfinished extent from where it stopped.  The state's stack ids are the recorder's
 * (a checkpoint's own, model ids, carry BASE_STACK): they become model stacks only when a
 * snapshot is made, when the modules their PCs belong to are known.
 *
 * Why it stops at an uncommitted record instead of skipping it as recover does: the process is
 * still writing, and the record is most likely just not finished.  Its extent waits for it,
 * unless the process has gone or the record has stayed so for CMH_LIVE_STALL_MS (a writer that
 * cannot finish); then it is counted torn and passed.
 *
 * Split by idea, sharing live_reader.h: this file opens, refreshes and closes a reader (the
 * file's mapping, its header, a reset onto a new checkpoint); live_records.c walks an extent and
 * applies its records; live_figures.c hands out each device's figures; live_snapshot.c makes a
 * snapshot of now.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "live_reader.h"
#include "registry.h"

void (*cmh_live_between_passes)(cmh_live *l);

/* ---- the state from scratch (at open, and after a reset) ---- */

static void clear_state(cmh_live *l)
{
    cmh_fstate_free(&l->st);
    cmh_fstate_init(&l->st);
    cmh_oa_free(&l->dict.stacks);
    cmh_oa_free(&l->dict.names);
    cmh_oa_free(&l->dict.pyframes);
    cmh_oa_free(&l->handles);
    cmh_oa_init(&l->handles, sizeof(lvmm));
    l->nmaps = 0;
    l->nrels = 0;
    cmh_oa_init(&l->dict.stacks, sizeof(fstack));
    cmh_oa_init(&l->dict.names, sizeof(fname));
    cmh_oa_init(&l->dict.pyframes, sizeof(lpyframe));
    l->dict.npcs = l->nnamebuf = 0;
    for (uint32_t i = 0; i < l->nmods; i++) free(l->mods[i].path), free(l->mods[i].build_id);
    l->nmods = 0;
    l->torch = 0;
    l->nsamples = l->sample_head = 0;
    memset(l->last_sample, 0, sizeof l->last_sample);
    l->nanns = 0;
    l->nthreads = 0;
    for (int k = 0; k < CMH_FLIGHT_SLOTS; k++) {
        free(l->tr[k].ring);
        free(l->tr[k].seen);
        free(l->tr[k].retried);
        memset(&l->tr[k], 0, sizeof l->tr[k]);
    }
    memset(l->pos, 0, sizeof l->pos);
    memset(l->sser, 0, sizeof l->sser);
    memset(l->sgen, 0, sizeof l->sgen);
    memset(l->stall_ns, 0, sizeof l->stall_ns);
    memset(l->cut, 0, sizeof l->cut);
    l->gen_from = 0;
    if (l->have_base) cmh_snapshot_free(&l->base);
    l->have_base = 0;
    l->info.checkpoint = 0;
}

static int trace_push(cmh_live *l, int k, const cmh_entry_full *e, int from_base)
{
    cmh_entry_full *d = trace_slot(l, k, from_base);
    if (!d) return CMH_ENOMEM;
    *d = *e;
    return CMH_OK;
}

/* The checkpoint as the base: its state, its trace (marked as the base's), its cut. */
static int load_base(cmh_live *l)
{
    const cmh_flight_header *h = hdr(l);
    uint32_t which = __atomic_load_n(&h->ckpt_which, __ATOMIC_ACQUIRE);
    if (which != 1 && which != 2) return CMH_OK;
    char cp[4400], e2[512];
    snprintf(cp, sizeof cp, "%s.ckpt%u.cmh", l->path, which);
    if (cmh_snapshot_load(cp, &l->base, e2, sizeof e2) != CMH_OK) return CMH_OK; /* the journal alone */
    l->have_base = l->info.checkpoint = 1;
    memcpy(l->cut, h->ckpt_cut[which - 1], sizeof l->cut);
    l->gen_from = h->ckpt_gen[which - 1];
    const cmh_snapshot *b = &l->base;
    for (uint32_t i = 0; i < b->nsegments && !l->st.nomem; i++) {
        const cmh_segment *g = &b->segments[i];
        fseg f = {g->addr, g->size, g->stream, {g->pool_id[0], g->pool_id[1]}, g->time_ns, g->stack | BASE_STACK, g->device, g->kind, g->flags, g->pool, 1};
        cmh_fstate_seg_add(&l->st, &f);
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *bl = &b->blocks[g->first_block + k];
            if (bl->state == CMH_BLOCK_INACTIVE) continue;
            cmh_entry_full e = {.addr = bl->addr, .requested = bl->requested, .stack = bl->stack | BASE_STACK, .time_ns = bl->time_ns};
            cmh_fstate_block_put(&l->st, &e, g->device, bl->size, bl->state);
        }
    }
    int torch = l->torch; /* (the checkpoint's modules, as cmh_oom_above reads a snapshot's) */
    for (uint32_t m = 0; m < b->nmodules; m++) torch |= cmh_torch_allocator_module(cmh_str(b, b->modules[m].path));
    for (uint32_t t = 0; t < b->ntraces; t++) {
        const cmh_trace *bt = &b->traces[t];
        int k = cmh_fstate_slot(bt->device);
        if (k < 0) continue;
        l->tr[k].dropped_out += bt->dropped;
        l->tr[k].entries += bt->dropped;
        l->tr[k].ooms += bt->dropped_ooms; /* the program saw them: as the checkpoint counts them */
        l->tr[k].ooms_out += bt->dropped_ooms;
        for (uint64_t i = 0; i < bt->nentries; i++) {
            cmh_entry_full e;
            cmh_entry_get(b, &b->entries[bt->first_entry + i], &e);
            if (trace_push(l, k, &e, 1) != CMH_OK) return CMH_ENOMEM;
            l->tr[k].entries++;
            e.stack = e.stack ? e.stack | BASE_STACK : 0; /* (the checkpoint's stack ids are not the recorder's) */
            cmh_live_oom_entry(&l->tr[k], &e, torch);
        }
    }
    for (uint32_t i = 0; i < b->nmeminfo; i++) {
        int k = cmh_fstate_slot(b->meminfo[i].device);
        if (k >= 0 && b->meminfo[i].time_ns >= l->last_sample[k].time_ns) l->last_sample[k] = b->meminfo[i];
    }
    return l->st.nomem ? CMH_ENOMEM : CMH_OK;
}

/* Map the file anew when it grew (extents are added at its end). */
static int remap(cmh_live *l, char *err, size_t errlen)
{
    struct stat sb;
    if (fstat(l->fd, &sb) != 0) {
        snprintf(err, errlen, "%s: %s", l->path, strerror(errno));
        return CMH_EIO;
    }
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < CMH_FLIGHT_HEADER) {
        snprintf(err, errlen, S_ISDIR(sb.st_mode) ? "%s: a directory, not a flight record" : "%s: not a flight record (%lld bytes)", l->path, (long long)sb.st_size);
        return CMH_EFORMAT;
    }
    if ((size_t)sb.st_size <= l->maplen) { /* the mapping reaches past it already: only what the file holds is read */
        l->len = (size_t)sb.st_size;
        return CMH_OK;
    }
    /* Mapped with room to grow (twice the size, at least 64 MiB more), so that a growing record
     * is not mapped again, and its pages faulted in again, at each new extent.  Nothing past
     * len, the file's size, is ever read. */
    size_t want = (size_t)sb.st_size * 2;
    if (want < (size_t)sb.st_size + ((size_t)64 << 20)) want = (size_t)sb.st_size + ((size_t)64 << 20);
    /* A mapping is grown in place or moved with its page tables (mremap): the pages read
     * already are not unmapped and faulted in again (unmapping them was a twentieth of the
     * exporter's time, with eight growing records). */
    void *m = l->map ? mremap((void *)l->map, l->maplen, want, MREMAP_MAYMOVE) : mmap(NULL, want, PROT_READ, MAP_SHARED, l->fd, 0);
    if (m == MAP_FAILED) {
        want = (size_t)sb.st_size;
        m = l->map ? mremap((void *)l->map, l->maplen, want, MREMAP_MAYMOVE) : mmap(NULL, want, PROT_READ, MAP_SHARED, l->fd, 0);
    }
    if (m == MAP_FAILED) { /* the old mapping, if any, is still there */
        snprintf(err, errlen, "%s: cannot map: %s", l->path, strerror(errno));
        return CMH_EIO;
    }
    l->map = m;
    l->maplen = want;
    l->len = (size_t)sb.st_size;
    return CMH_OK;
}

static int check_header(cmh_live *l, char *err, size_t errlen)
{
    const cmh_flight_header *h = hdr(l);
    if (memcmp(h->magic, CMH_FLIGHT_MAGIC, 8)) return cmh_live_fail(l, err, errlen, "not a flight record (no magic)", 0);
    if (h->version < 1 || h->version > CMH_FLIGHT_VERSION)
        return cmh_live_fail(l, err, errlen, "a flight record of a version this reader does not know", offsetof(cmh_flight_header, version));
    if (h->header_size != CMH_FLIGHT_HEADER) return cmh_live_fail(l, err, errlen, "a header of the wrong size", offsetof(cmh_flight_header, header_size));
    if (__atomic_load_n(&h->nareas, __ATOMIC_ACQUIRE) > CMH_FLIGHT_EXTENTS)
        return cmh_live_fail(l, err, errlen, "a header naming too many extents", offsetof(cmh_flight_header, nareas));
    l->head = h->version >= 2 ? sizeof(cmh_flight_rec) : CMH_FLIGHT_HEAD_V1;
    l->version = h->version;
    return CMH_OK;
}

static void take_identity(cmh_live *l)
{
    const cmh_flight_header *h = hdr(l);
    cmh_live_info *i = &l->info;
    i->pid = h->pid;
    i->rank = h->rank1 > 0 ? h->rank1 - 1 : -1;
    i->local_rank = h->local_rank1 > 0 ? h->local_rank1 - 1 : -1;
    i->world_size = h->world_size1 > 0 ? h->world_size1 - 1 : -1;
    snprintf(i->host, sizeof i->host, "%.*s", (int)strnlen(h->hostname, sizeof h->hostname), h->hostname);
    snprintf(i->cmdline, sizeof i->cmdline, "%.*s", (int)strnlen(h->cmdline, sizeof h->cmdline), h->cmdline);
    snprintf(i->producer, sizeof i->producer, "%.*s", (int)strnlen(h->producer, sizeof h->producer), h->producer);
    snprintf(i->boot_id, sizeof i->boot_id, "%.*s", (int)strnlen(h->boot_id, sizeof h->boot_id), h->boot_id);
    for (char *p = i->cmdline; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    for (char *p = i->host; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    i->start_ticks = h->proc_start_ticks;
}

/* Between a slot's fields (and records) read and its serial read again (flight_format.h's
 * sequence lock); ThreadSanitizer knows no fences (x86 keeps loads in order anyway) */
#ifdef __SANITIZE_THREAD__
#define SERIAL_FENCE() ((void)0)
#else
#define SERIAL_FENCE() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* Whether a dropped extent (serial ser, version 5) held records this reader did not read: its
 * end, where its appends stopped; version 5, one never read from its start. */
static int unread_left(const cmh_live *l, uint32_t a, uint64_t ser)
{
    const cmh_flight_area *ar = &hdr(l)->area[a];
    uint64_t sz = __atomic_load_n(&ar->size, __ATOMIC_RELAXED), c = __atomic_load_n(&ar->cursor, __ATOMIC_RELAXED);
    uint64_t sealed = __atomic_load_n(&ar->sealed, __ATOMIC_RELAXED);
    if (c > sz) c = sz;
    if (sealed && sealed < c) c = sealed;
    uint64_t p = l->version < 5 || l->sser[a] == ser ? l->pos[a] : 0;
    return p + CMH_FLIGHT_HEAD_V1 <= c;
}

/* Start again from the checkpoint: what this reader read is not all there any more. */
int cmh_live_reset(cmh_live *l)
{
    uint64_t resets = l->info.resets + 1, torn = l->info.torn, damaged = l->info.damaged, bytes = l->info.bytes;
    clear_state(l);
    l->info.resets = resets, l->info.torn = torn, l->info.damaged = damaged, l->info.bytes = bytes;
    return load_base(l);
}

int cmh_live_refresh(cmh_live *l, char *err, size_t errlen)
{
    int rc = remap(l, err, errlen);
    if (rc != CMH_OK) return rc;
    if ((rc = check_header(l, err, errlen)) != CMH_OK) return rc;
    const cmh_flight_header *h = hdr(l);
    l->info.last_bytes = 0;
    l->alive = cmh_registry_alive(h->pid, h->proc_start_ticks, l->info.boot_id) &&
               __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == CMH_FLIGHT_RUNNING;
    uint32_t n = __atomic_load_n(&h->nareas, __ATOMIC_ACQUIRE);
    int v5 = l->version >= 5, reset = 0;
    /* an extent given back before it was read to its end: what it held is in a checkpoint now;
     * so too (version 5) one whose slot took another extent before this reader saw it dropped
     * (whether it was read to its end is not known) */
    for (uint32_t a = 0; a < n; a++) {
        const cmh_flight_area *ar = &h->area[a];
        uint64_t ser = v5 ? __atomic_load_n(&h->area_serial[a], __ATOMIC_ACQUIRE) : 0;
        int dropped = __atomic_load_n(&ar->dropped, __ATOMIC_ACQUIRE), lost = 0;
        if (v5 && l->sser[a] && ser != l->sser[a]) { /* another extent there now (or changing) */
            lost = l->sgen[a] && l->sgen[a] >= l->gen_from; /* sgen 0: read to its end, dropped */
            l->sser[a] = 0, l->pos[a] = 0;
        }
        if (!lost && dropped && (!v5 || (ser && l->sser[a] != ser) || l->sgen[a]) && __atomic_load_n(&ar->gen, __ATOMIC_RELAXED) >= l->gen_from) {
            lost = unread_left(l, a, ser);
            if (v5) { /* read to its end before it went (or nothing in it): done with */
                SERIAL_FENCE();
                if (!lost && __atomic_load_n(&h->area_serial[a], __ATOMIC_RELAXED) == ser) l->sser[a] = ser, l->sgen[a] = 0;
            }
        }
        if (!lost) continue;
        if ((rc = cmh_live_reset(l)) != CMH_OK) return rc;
        reset = 1;
        break;
    }
    if (cmh_live_between_passes) cmh_live_between_passes(l);
    uint32_t order[CMH_FLIGHT_EXTENTS];
    cmh_flight_order(h, n, order);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t a = order[k];
        const cmh_flight_area *ar = &h->area[a];
        uint64_t ser = v5 ? __atomic_load_n(&h->area_serial[a], __ATOMIC_ACQUIRE) : 0;
        /* taken by another extent (or being) since the pass above, the one it held being read:
         * as one dropped below, the walk stops; the next refresh finds it lost */
        if (v5 && !reset && l->sser[a] && ser != l->sser[a] && l->sgen[a] && l->sgen[a] >= l->gen_from) break;
        if (v5 && !ser) continue; /* changing: read next time */
        if (__atomic_load_n(&ar->gen, __ATOMIC_ACQUIRE) < l->gen_from || !__atomic_load_n(&ar->size, __ATOMIC_ACQUIRE)) continue;
        if (__atomic_load_n(&ar->dropped, __ATOMIC_ACQUIRE)) { /* (after a reset: what is left, there being no more) */
            /* Dropped since the pass above found nothing of it lost (a checkpoint gave its
             * generation back meanwhile): records of it not read are the checkpoint's now, and
             * the later extents follow them.  Read on past it, the state held later records
             * without those (test_live dropped_mid_refresh: 2 entries beside both allocations);
             * the walk stops here, the state stays a prefix of the record, and the next refresh
             * starts again from the checkpoint. */
            if (!reset && unread_left(l, a, ser)) break;
            continue;
        }
        if (v5) {
            SERIAL_FENCE();
            if (__atomic_load_n(&h->area_serial[a], __ATOMIC_RELAXED) != ser) continue; /* changed meanwhile */
            if (l->sser[a] != ser) { /* a new extent in this slot: from its start */
                l->sser[a] = ser, l->sgen[a] = __atomic_load_n(&ar->gen, __ATOMIC_RELAXED);
                l->pos[a] = 0, l->stall_ns[a] = 0;
            }
        }
        rc = cmh_live_walk(l, a, err, errlen);
        if (v5) { /* the slot took another extent while its records were read: what was read may be that one's */
            SERIAL_FENCE();
            if (__atomic_load_n(&h->area_serial[a], __ATOMIC_RELAXED) != ser) {
                if ((rc = cmh_live_reset(l)) != CMH_OK) return rc;
                break;
            }
        }
        if (rc != CMH_OK) break;
        /* An extent not read to its end: what the later extents hold follows its unread
         * records.  They are read at the next refresh, so that the state is always that of a
         * prefix of the record.  Read on, the state held later records without earlier ones: a
         * scrape read 596321 entries beside the allocation of pair 307990 (the extent's unread
         * tail, 9830 pairs, counted only at the next refresh), and a free among them, unseen
         * while a later allocation was applied, would have raised the peak for good.  Its end:
         * where the first record that did not fit began (`sealed`, set before the appends move
         * on); unsealed, the active extent has none yet, another (left at a new generation) ends
         * at its cursor. */
        uint32_t act = __atomic_load_n(&h->active, __ATOMIC_ACQUIRE);
        uint64_t sealed = __atomic_load_n(&ar->sealed, __ATOMIC_ACQUIRE), xend = sealed;
        if (!sealed && act != a) {
            uint64_t c = __atomic_load_n(&ar->cursor, __ATOMIC_ACQUIRE), sz = __atomic_load_n(&ar->size, __ATOMIC_RELAXED);
            xend = c < sz ? c : sz;
        }
        if ((!sealed && act == a) || l->pos[a] + CMH_FLIGHT_HEAD_V1 <= xend) break;
    }
    l->info.bytes += l->info.last_bytes;
    l->info.state = (int)h->state;
    l->info.end_signal = h->end_signal;
    l->info.lost = h->lost_records + h->lost_events;
    if (l->st.dead > 4096 && l->st.dead > l->st.nsegs / 2 && cmh_fstate_compact(&l->st) != CMH_OK) rc = CMH_ENOMEM;
    if (rc == CMH_ENOMEM) snprintf(err, errlen, "%s: out of memory", l->path);
    return rc;
}

int cmh_live_open(const char *path, uint64_t trace_cap, cmh_live **out, char *err, size_t errlen)
{
    *out = NULL;
    cmh_live *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "%s: out of memory", path);
        return CMH_ENOMEM;
    }
    snprintf(l->path, sizeof l->path, "%s", path);
    l->trace_cap_asked = trace_cap;
#if defined(__x86_64__)
    l->hwcrc = __builtin_cpu_supports("sse4.2");
#endif
    cmh_fstate_init(&l->st);
    cmh_oa_init(&l->dict.stacks, sizeof(fstack));
    cmh_oa_init(&l->dict.names, sizeof(fname));
    cmh_oa_init(&l->dict.pyframes, sizeof(lpyframe));
    cmh_oa_init(&l->handles, sizeof(lvmm));
    l->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (l->fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(l);
        return CMH_EIO;
    }
    int rc = remap(l, err, errlen);
    if (rc == CMH_OK) rc = check_header(l, err, errlen);
    if (rc == CMH_OK) {
        take_identity(l);
        rc = load_base(l);
        if (rc == CMH_ENOMEM) snprintf(err, errlen, "%s: out of memory", path);
    }
    if (rc == CMH_OK) rc = cmh_live_refresh(l, err, errlen);
    if (rc != CMH_OK) {
        cmh_live_close(l);
        return rc;
    }
    *out = l;
    return CMH_OK;
}

void cmh_live_close(cmh_live *l)
{
    if (!l) return;
    clear_state(l);
    cmh_fstate_free(&l->st);
    cmh_oa_free(&l->dict.stacks);
    cmh_oa_free(&l->dict.names);
    cmh_oa_free(&l->dict.pyframes);
    cmh_oa_free(&l->handles);
    free(l->maps);
    free(l->rels);
    free(l->dict.pcs);
    free(l->namebuf);
    free(l->mods);
    free(l->samples);
    free(l->anns);
    free(l->threads);
    free(l->kids.v);
    if (l->map) munmap((void *)l->map, l->maplen);
    if (l->fd >= 0) close(l->fd);
    free(l);
}
