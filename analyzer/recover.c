/*
 * recover.c - a snapshot from a flight record (cumemhist/recover.h; the format:
 * snapshot/flight_format.h).
 *
 * The base is the latest checkpoint the process wrote (a normal .cmh), or nothing.  On it go the
 * journal entries the checkpoint does not hold (by their per-device sequence numbers), in the
 * order of the journals' turns: appended to each device's trace (the oldest dropped past the
 * recording's max_entries, as its ring would have), and applied to the final segments and
 * blocks as the recorder's export spells them: a driver allocation a segment holding one block,
 * blocks an allocator reported inside its segments, the VMM maps of a reservation one growing
 * segment with a block per map.  Stacks come from the dictionary as PCs with their module.
 *
 * Everything the file says is checked before use: the header's areas against the file's size,
 * every record's length against its area, every count against its record.  A record whose
 * commit word is wrong was torn by its writer's death: it is skipped and counted.  A length of 0
 * ends an area (the space was never reserved, or the writer died between reserving and writing
 * it: the records after it are then lost too, and counted as torn).  A committed record whose
 * body does not match its sum (version 2) was damaged after it was written: skipped and counted
 * apart, never read.  A version-1 record has no sum and is read as it is (info->unverified).
 * A fuzzing build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION) computes sums and ignores them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crc32c.h"
#include "cumemhist/recover.h"
#include "flight_format.h"
#include "grow.h"
#include "oatab.h"
#include "flight_state.h"

/* ---- reading ---- */

typedef struct rd {
    const char *path;
    const unsigned char *map;
    size_t len;
    const cmh_flight_header *h;
    uint32_t head; /* bytes before a record's body: 16, or 8 in version 1 */
    char *err;
    size_t errlen;
    cmh_recover_info *info;
} rd;

static int fail(rd *r, const char *fmt, uint64_t at)
{
    char what[256];
    snprintf(what, sizeof what, fmt, (unsigned long long)at);
    snprintf(r->err, r->errlen, "%s: %s", r->path, what);
    return CMH_EFORMAT;
}

/* Call fn on the body of each committed, intact record of area a (checked against the file);
 * torn and damaged ones counted.  at: the record's byte in the file. */
typedef int (*rec_fn)(void *arg, const void *body, uint32_t len, uint32_t type, uint64_t at);

/* The body matches the sum in its head (version 2 on; a version-1 record has none to match). */
static int intact(const cmh_fr_head *hd, const unsigned char *body)
{
    if (!hd->has_sum) return 1;
    uint32_t sum = cmh_crc32c(0, body, hd->len - hd->head);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    (void)sum;
    return 1;
#else
    return sum == hd->sum;
#endif
}

static int walk(rd *r, uint32_t a, rec_fn fn, void *arg)
{
    const cmh_flight_area *ar = &r->h->area[a];
    uint64_t end = ar->cursor < ar->size ? ar->cursor : ar->size;
    if (ar->sealed && ar->sealed < end) end = ar->sealed; /* past it: reservations that went to the next extent */
    uint64_t room = ar->offset < r->len ? r->len - ar->offset : 0; /* a cut copy: what is left of the extent */
    int cut = end > room;
    if (cut) {
        r->info->truncated += end - room;
        end = room;
    }
    uint64_t at = 0;
    for (; at + CMH_FLIGHT_HEAD_V1 <= end;) {
        cmh_fr_head hd;
        int st = cmh_fr_head_read(r->map + ar->offset + at, r->h->version, end - at, &hd);
        if (st == CMH_FRH_EMPTY) { /* reserved and never written (its writer died at once), or nothing more */
            if (at < end) r->info->torn++;
            break;
        }
        if (st == CMH_FRH_BADLEN) {
            r->info->torn++;
            break; /* its length cannot be trusted, so neither can what follows */
        }
        const unsigned char *body = r->map + ar->offset + at + hd.head;
        if (st == CMH_FRH_OPEN) r->info->torn++;
        else if (!intact(&hd, body))
            r->info->damaged++; /* its length was sane: what follows may still be whole */
        else {
            uint32_t type = hd.type, blen = hd.len - hd.head;
            cmh_fr_entry_short tiny;
            int t = 1;
            if (r->h->version >= 6 && hd.head == CMH_FR_COMPACT_HEAD && (type == CMH_FR_ENTRY_TINY || type == CMH_FR_FREE_TINY)) {
                /* read as the short record it stands for (flight_format.h) */
                t = cmh_fr_tiny_read(&type, hd.first, body, blen, r->h->area_t0[a], &tiny);
                if (!t) r->info->damaged++; /* its sum matched, yet it cannot be */
                body = (const unsigned char *)&tiny, blen = type == CMH_FR_FREE_SHORT ? CMH_FR_FREE_SHORT_BODY : sizeof tiny;
            }
            int rc = t > 0 ? fn(arg, body, blen, type, ar->offset + at) : CMH_OK;
            if (rc) return rc;
        }
        at += hd.len;
    }
    /* where what was read of a cut extent ends: the byte after its last record read (or skipped)
     * before the cut; of several, the furthest into the file */
    if (cut && ar->offset <= r->len && ar->offset + at > r->info->read_to) r->info->read_to = ar->offset + at;
    return CMH_OK;
}

typedef struct pyframe_rec {
    uint64_t id; /* the key: recorder Python frame id + 1 */
    uint32_t frame, pad; /* its frame in the snapshot */
} pyframe_rec;

typedef struct jentry {
    cmh_entry_full e;
    uint32_t slot, short_free;
    uint64_t seq;
} jentry;

typedef struct ctx {
    rd *r;
    cmh_snapshot *s;
    fdict dict; /* its pyframes: of pyframe_rec */
    jentry *ents;
    uint32_t nents, capents;
    cmh_annotation *anns;
    uint32_t nanns, capanns;
    uint64_t cut[CMH_FLIGHT_SLOTS];
    uint64_t cleared[CMH_FLIGHT_SLOTS]; /* entries up to this sequence are gone (a cleared history) */
    int64_t base_dump_ns;
    cmh_oatab handles; /* cuMemCreate handles: the last CMH_FR_VMM_HANDLE of each value (of vmm_rec) */
    cmh_fchildren kids; /* the children it forked, as often as they were written */
    cmh_fr_vmm_map *maps; /* the map log's rows (CMH_FR_VMM_MAP), in the journal's order */
    uint32_t nmaps, capmaps;
    cmh_fr_vmm_release *rels; /* the release log's rows (CMH_FR_VMM_RELEASE), in the journal's order */
    uint32_t nrels, caprels;
} ctx;

typedef struct vmm_rec {
    uint64_t handle; /* key */
    cmh_fr_vmm_handle last;
} vmm_rec;

static int64_t to_ns(const cmh_flight_header *h, int64_t ticks)
{
    if (!ticks) return 0;
    /* in 128 bits: a damaged header's values must not overflow */
    __int128 dt = (__int128)h->t1_ticks - h->t0_ticks, d = (__int128)ticks - h->t0_ticks, ns;
    if (dt <= 0) ns = h->t0_ns + d;
    else {
        __int128 span = (__int128)h->t1_ns - h->t0_ns;
        /* |d| and |span| < 2^64: their product fits */
        ns = h->t0_ns + d * span / dt;
    }
    return ns > INT64_MAX ? INT64_MAX : ns < INT64_MIN ? INT64_MIN : (int64_t)ns;
}

static int on_dict(void *arg, const void *body, uint32_t len, uint32_t type, uint64_t at)
{
    ctx *c = arg;
    cmh_snapshot *s = c->s;
    switch (type) {
    case CMH_FR_STACK: {
        const cmh_fr_stack *x = body;
        if (len < sizeof *x || x->depth > (len - sizeof *x) / 8 || x->depth > 4096)
            return fail(c->r, "a stack record that does not fit its length at byte %llu", at);
        fstack *p = cmh_oa_get(&c->dict.stacks, (uint64_t)x->id + 1, NULL);
        if (!p || CMH_GROW(c->dict.pcs, c->dict.cappcs, (uint64_t)c->dict.npcs + x->depth, 4096)) return CMH_ENOMEM;
        if (x->depth) memcpy(c->dict.pcs + c->dict.npcs, x + 1, (size_t)x->depth * 8);
        p->first = c->dict.npcs;
        p->depth = x->depth;
        p->model = 0;
        c->dict.npcs += x->depth;
        return CMH_OK;
    }
    case CMH_FR_NAME: {
        const cmh_fr_name *x = body;
        if (len < sizeof *x || x->length > len - sizeof *x) return fail(c->r, "a name longer than its record at byte %llu", at);
        fname *n = cmh_oa_get(&c->dict.names, (uint64_t)x->id + 1, NULL);
        if (!n) return CMH_ENOMEM;
        n->off = at + c->r->head + sizeof *x;
        n->len = x->length;
        return CMH_OK;
    }
    case CMH_FR_PYFRAME: {
        const cmh_fr_pyframe *x = body;
        if (len < sizeof *x || x->file_len > len - sizeof *x || x->name_len > len - sizeof *x - x->file_len)
            return fail(c->r, "a Python frame record longer than its length at byte %llu", at);
        const char *file = (const char *)(x + 1);
        cmh_frame f = {0, 0, 0, x->line, -1};
        pyframe_rec *p = cmh_oa_get(&c->dict.pyframes, (uint64_t)x->id + 1, NULL);
        if (!p || cmh_strtab_intern(&s->strings, file, x->file_len, &f.filename) ||
            cmh_strtab_intern(&s->strings, file + x->file_len, x->name_len, &f.name) ||
            cmh_snapshot_add_frame(s, &f, &p->frame))
            return CMH_ENOMEM;
        return CMH_OK;
    }
    case CMH_FR_MODULE: {
        const cmh_fr_module *x = body;
        if (len < sizeof *x || x->path_len > len - sizeof *x || x->build_id_len > len - sizeof *x - x->path_len)
            return fail(c->r, "a module record longer than its length at byte %llu", at);
        const char *path = (const char *)(x + 1);
        cmh_module m = {0, 0, x->base, x->size};
        if (cmh_strtab_intern(&s->strings, path, x->path_len, &m.path) ||
            cmh_strtab_intern(&s->strings, path + x->path_len, x->build_id_len, &m.build_id))
            return CMH_ENOMEM;
        for (uint32_t i = 0; i < s->nmodules; i++) /* the checkpoint may know it already */
            if (s->modules[i].base == m.base && s->modules[i].path == m.path) return CMH_OK;
        return cmh_snapshot_add_module(s, &m) == CMH_OK ? CMH_OK : CMH_ENOMEM;
    }
    case CMH_FR_ANNOTATION: {
        const cmh_fr_annotation *x = body;
        if (len < sizeof *x) return fail(c->r, "a short annotation record at byte %llu", at);
        if (CMH_GROW(c->anns, c->capanns, (uint64_t)c->nanns + 1, 64)) return CMH_ENOMEM;
        cmh_annotation a = {x->name, (uint8_t)(x->stage ? 1 : 0), x->device, to_ns(c->r->h, x->ticks)};
        c->anns[c->nanns++] = a; /* name: the recorder's id, turned into a string once names are known */
        return CMH_OK;
    }
    case CMH_FR_MEMINFO: {
        const cmh_fr_meminfo *x = body;
        if (len < sizeof *x) return fail(c->r, "a short cuMemGetInfo record at byte %llu", at);
        if (x->device < 0 || x->device >= CMH_FLIGHT_SLOTS - 1) return CMH_OK; /* not a device: not ours to keep */
        cmh_meminfo m = {x->device, to_ns(c->r->h, x->ticks), x->free, x->total, x->thread};
        return cmh_snapshot_add_meminfo(s, &m) == CMH_OK ? CMH_OK : CMH_ENOMEM;
    }
    case CMH_FR_DEVICE: {
        const cmh_fr_device *x = body;
        if (len < sizeof *x) return fail(c->r, "a short device record at byte %llu", at);
        if (x->device < 0 || x->device >= CMH_FLIGHT_SLOTS - 1) return CMH_OK;
        cmh_device_ident d = cmh_fr_device_ident(x);
        return cmh_snapshot_add_ident(s, &d) == CMH_OK ? CMH_OK : CMH_ENOMEM;
    }
    case CMH_FR_THREAD: {
        const cmh_fr_thread *x = body;
        if (len < sizeof *x) return fail(c->r, "a short thread record at byte %llu", at);
        cmh_thread_info t = {x->thread, x->tid, 0};
        if (!x->thread) return CMH_OK;
        if (cmh_strtab_intern(&s->strings, x->name, strnlen(x->name, sizeof x->name), &t.name) || cmh_snapshot_add_thread(s, &t))
            return CMH_ENOMEM;
        return CMH_OK;
    }
    case CMH_FR_CHILD: {
        int rc = cmh_fchildren_add(&c->kids, body, len, at + c->r->head);
        return rc == CMH_EFORMAT ? fail(c->r, "a forked child record longer than its length at byte %llu", at) : rc;
    }
    case CMH_FR_VMM_HANDLE: {
        const cmh_fr_vmm_handle *x = body;
        if (len < sizeof *x) return fail(c->r, "a short cuMemCreate handle record at byte %llu", at);
        if (!x->handle) return CMH_OK;
        int fresh = 0;
        vmm_rec *v = cmh_oa_get(&c->handles, x->handle, &fresh); /* the later record says it now */
        if (!v) return CMH_ENOMEM;
        if (fresh || cmh_fr_vmm_later(x->seq, v->last.seq)) v->last = *x;
        return CMH_OK;
    }
    case CMH_FR_VMM_MAP: {
        if (len < sizeof(cmh_fr_vmm_map)) return fail(c->r, "a short cuMemMap record at byte %llu", at);
        if (CMH_GROW(c->maps, c->capmaps, (uint64_t)c->nmaps + 1, 64)) return CMH_ENOMEM;
        memcpy(&c->maps[c->nmaps++], body, sizeof(cmh_fr_vmm_map));
        return CMH_OK;
    }
    case CMH_FR_VMM_RELEASE: {
        if (len < sizeof(cmh_fr_vmm_release)) return fail(c->r, "a short cuMemRelease record at byte %llu", at);
        if (CMH_GROW(c->rels, c->caprels, (uint64_t)c->nrels + 1, 64)) return CMH_ENOMEM;
        memcpy(&c->rels[c->nrels++], body, sizeof(cmh_fr_vmm_release));
        return CMH_OK;
    }
    default: return CMH_OK; /* a record of a newer writer: not ours to read */
    }
}

static int model_stack(ctx *c, uint32_t rec, uint32_t *out);

/* The handles held and mapped nowhere at the end, as the exit dump lists them (the .cmh
 * vmm_unmapped table): the last state each handle's records say. */
static int vmm_unmapped(ctx *c)
{
    for (uint32_t i = 0; i < c->handles.cap; i++) {
        const vmm_rec *v = cmh_oa_at(&c->handles, i);
        if (!v->handle || v->last.state != CMH_FR_VMM_UNMAPPED) continue;
        if (v->last.device < -1 || v->last.device > 1023) continue; /* not a device's: not ours to keep */
        cmh_vmm_handle h = {v->last.device, v->last.size, 0, to_ns(c->r->h, v->last.ticks)};
        if (model_stack(c, v->last.stack, &h.stack) != CMH_OK || cmh_snapshot_add_vmm_unmapped(c->s, &h) != CMH_OK) return CMH_ENOMEM;
    }
    return CMH_OK;
}

/* The map log (the .cmh vmm_maps table), as the exit dump writes it: which handle each cuMemMap
 * mapped.  Without it a handle held and mapped nowhere at the end counted from its making, and
 * its map's range too while it was mapped: twice.  (Maps journaled in extents a checkpoint
 * replaced are not here: those maps count by their ranges.) */
static int vmm_maps(ctx *c)
{
    for (uint32_t i = 0; i < c->nmaps; i++) {
        const cmh_fr_vmm_map *x = &c->maps[i];
        if (x->device < -1 || x->device > 1023 || !x->handle || !x->size) continue; /* not a device's: not ours to keep */
        cmh_vmm_map m = {x->device, x->addr, x->size, to_ns(c->r->h, x->ticks), x->handle, x->handle_size, 0, to_ns(c->r->h, x->handle_ticks)};
        if (model_stack(c, x->handle_stack, &m.handle_stack) != CMH_OK || cmh_snapshot_add_vmm_map(c->s, &m) != CMH_OK) return CMH_ENOMEM;
    }
    for (uint32_t i = 0; i < c->nrels; i++) { /* the release log (.cmh vmm_released), as the exit dump writes it */
        const cmh_fr_vmm_release *x = &c->rels[i];
        if (x->device < 0 || x->device > 1023 || !x->handle) continue; /* not a device's: not ours to keep */
        cmh_vmm_release r = {x->device, x->handle, x->size, 0, to_ns(c->r->h, x->ticks), to_ns(c->r->h, x->release_ticks)};
        if (model_stack(c, x->stack, &r.stack) != CMH_OK || cmh_snapshot_add_vmm_release(c->s, &r) != CMH_OK) return CMH_ENOMEM;
    }
    return CMH_OK;
}

static int on_record(void *arg, const void *body, uint32_t len, uint32_t type, uint64_t at)
{
    ctx *c = arg;
    if (type != CMH_FR_ENTRY && type != CMH_FR_ENTRY_SHORT && type != CMH_FR_FREE_SHORT && type != CMH_FR_CLEAR)
        return on_dict(arg, body, len, type, at);
    cmh_fr_entry xe, *x = &xe;
    if (!cmh_fr_entry_read(type, body, len, x)) return fail(c->r, "a short entry record at byte %llu", at);
    if (x->slot >= CMH_FLIGHT_SLOTS) return fail(c->r, "an entry of an impossible device at byte %llu", at);
    if (type == CMH_FR_CLEAR) {
        if (x->seq > c->cleared[x->slot]) c->cleared[x->slot] = x->seq;
        /* the maps logged before go with the entries they name (cmh_vmm_clear_maps) */
        int32_t dev = x->slot == CMH_FLIGHT_SLOTS - 1 ? -1 : (int32_t)x->slot;
        uint32_t n = 0;
        for (uint32_t i = 0; i < c->nmaps; i++)
            if (c->maps[i].device != dev) c->maps[n++] = c->maps[i];
        c->nmaps = n;
        n = 0;
        for (uint32_t i = 0; i < c->nrels; i++)
            if (c->rels[i].device != dev) c->rels[n++] = c->rels[i];
        c->nrels = n;
        return CMH_OK;
    }
    if (x->seq <= c->cut[x->slot]) return CMH_OK; /* the checkpoint holds it */
    if (x->action >= CMH_ACT_COUNT || x->kind >= CMH_KIND_COUNT) return fail(c->r, "an entry of an unknown action at byte %llu", at);
    if (CMH_GROW(c->ents, c->capents, (uint64_t)c->nents + 1, 4096)) return CMH_ENOMEM;
    jentry *j = &c->ents[c->nents++];
    memset(j, 0, sizeof *j);
    j->slot = x->slot;
    j->seq = x->seq;
    j->e.time_ns = to_ns(c->r->h, x->ticks);
    j->e.addr = x->addr;
    j->e.size = x->size;
    j->e.requested = x->requested;
    j->e.stream = x->stream;
    j->e.stack = x->stack; /* the recorder's: made a model stack later */
    j->e.thread = x->thread;
    j->e.action = x->action;
    j->e.kind = x->kind;
    j->e.flags = x->flags;
    j->short_free = type == CMH_FR_FREE_SHORT; /* its size: the segment's, when it is applied */
    return CMH_OK;
}

/* The model stack of a recorder stack: frames are PCs with their module (names come later). */
static int model_stack(ctx *c, uint32_t rec, uint32_t *out)
{
    *out = 0;
    fstack *p = rec ? cmh_oa_find(&c->dict.stacks, (uint64_t)rec + 1) : NULL;
    if (!p) return CMH_OK; /* its definition was lost: no stack */
    if (p->model) {
        *out = p->model - 1;
        return CMH_OK;
    }
    cmh_snapshot *s = c->s;
    uint32_t ids[4096];
    for (uint32_t i = 0; i < p->depth; i++) {
        uint64_t pc = c->dict.pcs[p->first + i];
        if ((pc >> 48) == 0xC0DE) { /* a Python frame: CMH_FR_PYFRAME made it */
            const pyframe_rec *py = cmh_oa_find(&c->dict.pyframes, (pc & 0xFFFFFFFFull) + 1);
            cmh_frame q = {0, 0, 0, 0, -1};
            if (py) ids[i] = py->frame;
            else if (cmh_strtab_intern(&s->strings, "??", 2, &q.name) || cmh_strtab_intern(&s->strings, "??", 2, &q.filename) ||
                     cmh_snapshot_add_frame(s, &q, &ids[i]))
                return CMH_ENOMEM;
            continue;
        }
        if (cmh_fstate_pc_frame(s, pc, &ids[i]) != CMH_OK) return CMH_ENOMEM;
    }
    uint32_t id;
    if (cmh_snapshot_add_stack(s, ids, p->depth, &id) != CMH_OK) return CMH_ENOMEM;
    p->model = id + 1;
    *out = id;
    return CMH_OK;
}

static int name_string(ctx *c, uint32_t rec, uint32_t *out)
{
    const fname *n = rec ? cmh_oa_find(&c->dict.names, (uint64_t)rec + 1) : NULL;
    const char *t = n ? (const char *)c->r->map + n->off : "";
    return cmh_strtab_intern(&c->s->strings, t, n ? n->len : 0, out) == CMH_OK ? CMH_OK : CMH_ENOMEM;
}

static int cmp_jentry(const void *a, const void *b)
{
    const jentry *x = a, *y = b;
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int32_t slot_device(uint32_t slot) { return slot == CMH_FLIGHT_SLOTS - 1 ? -1 : (int32_t)slot; }

/* Build out from the base (may be empty), the journal entries and the state. */
static int build(ctx *c, const cmh_snapshot *base, cmh_fstate *st)
{
    cmh_snapshot *s = c->s;
    const cmh_flight_header *h = c->r->h;
    /* traces: per slot, the base's entries (less what a clear removed) then the journal's */
    uint64_t max = h->max_entries;
    for (uint32_t slot = 0; slot < CMH_FLIGHT_SLOTS; slot++) {
        int32_t dev = slot_device(slot);
        const cmh_trace *bt = base ? cmh_snapshot_trace(base, dev) : NULL;
        /* a clear after the checkpoint was cut removes all it held of this device */
        uint64_t nb = bt && c->cleared[slot] <= c->cut[slot] ? bt->nentries : 0, nj = 0;
        for (uint32_t i = 0; i < c->nents; i++) nj += c->ents[i].slot == slot && c->ents[i].seq > c->cleared[slot];
        if (!nb && !nj && !bt) continue;
        uint64_t total = nb + nj, skip = max && total > max ? total - max : 0;
        if (cmh_snapshot_add_trace(s, dev, (bt ? bt->dropped : 0) + skip, NULL) != CMH_OK) return CMH_ENOMEM;
        s->traces[s->ntraces - 1].dropped_ooms = bt ? bt->dropped_ooms : 0; /* the OOMs skipped count as the ring's drops (cmh_trace) */
        uint64_t k = 0;
        for (uint64_t i = 0; i < nb; i++, k++) {
            cmh_entry_full e; /* the base's ids: copied in the same order */
            if (k < skip) {
                s->traces[s->ntraces - 1].dropped_ooms += base->entries[bt->first_entry + i].action == CMH_ACT_OOM;
                continue;
            }
            cmh_entry_get(base, &base->entries[bt->first_entry + i], &e);
            if (cmh_snapshot_add_entry(s, &e) != CMH_OK) return CMH_ENOMEM;
        }
        int64_t last = INT64_MIN;
        for (uint32_t i = 0; i < c->nents; i++) {
            jentry *j = &c->ents[i];
            if (j->slot != slot || j->seq <= c->cleared[slot]) continue;
            if (k++ < skip) {
                s->traces[s->ntraces - 1].dropped_ooms += j->e.action == CMH_ACT_OOM;
                continue;
            }
            cmh_entry_full e = j->e;
            /* the recorder stamps after claiming the number: an overtaken entry gets the time before it */
            if (e.time_ns < last) e.time_ns = last;
            last = e.time_ns;
            if (model_stack(c, j->e.stack, &e.stack) != CMH_OK) return CMH_ENOMEM;
            if (e.action == CMH_ACT_MARK) { /* addr holds the mark's name id */
                if (name_string(c, (uint32_t)e.addr, &e.name) != CMH_OK) return CMH_ENOMEM;
                e.addr = 0;
            }
            if (cmh_snapshot_add_entry(s, &e) != CMH_OK) return CMH_ENOMEM;
            c->r->info->journal_entries++;
        }
    }
    /* the final state */
    return cmh_fstate_emit(st, s, NULL, NULL, &c->r->info->orphans);
}

const char *cmh_signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"},
                 {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
                 {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
                 {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) return names[i].name;
    static __thread char other[24];
    snprintf(other, sizeof other, "signal %d", sig);
    return other;
}

/* One wording of a process's end, whoever asks: recover, record, top, a parent's reports of its
 * children before any recover, and a recovery read through the library (describe) said it two
 * ways ("left no mark of its end ..." beside "was killed, with no chance to mark its end ..."). */
void cmh_flight_ending(const cmh_flight_identity *id, int state, int end_signal, int have_status, int status, char *how, size_t cap)
{
    /* the parent's wait status says it best; else what the process marked (a fatal signal, a
     * failed exit dump, _exit()); a process that marked nothing ended by a way that runs no code
     * of ours (SIGKILL, the OOM killer; before records marked _exit(), that too), and its status
     * went to its own parent */
    char parent[64] = "is not known here";
    if (id->forked_from > 0) snprintf(parent, sizeof parent, "went to its parent, pid %lld", (long long)id->forked_from);
    int ex = have_status && WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    if (state == CMH_ENDED_EXECED) snprintf(how, cap, "replaced its program by exec() (the new program's record is its own)");
    else if (have_status && WIFSIGNALED(status)) snprintf(how, cap, "was killed by %s", cmh_signal_name(WTERMSIG(status)));
    else if (have_status && WIFEXITED(status) && state == CMH_ENDED_EXITED) snprintf(how, cap, "exited with status %d; its exit dump failed", ex);
    else if (have_status && WIFEXITED(status))
        snprintf(how, cap, "exited with status %d without its exit dump (no exit handler ran: _exit())", ex);
    else if (state == CMH_ENDED_SIGNALED) snprintf(how, cap, "was killed by %s", cmh_signal_name(end_signal));
    else if (state == CMH_ENDED_EXITED) snprintf(how, cap, "exited; its exit dump failed");
    else if (state == CMH_ENDED_QUIT && id->forked_from > 0) /* a worker forked without exec: how those end, not an alarm */
        snprintf(how, cap, "ended by _exit(%d), the usual end of a forked worker (as multiprocessing and DataLoader workers end: no exit "
                 "handler runs, so no exit dump; its exit status %s)", end_signal, parent);
    else if (state == CMH_ENDED_QUIT)
        snprintf(how, cap, "ended by _exit(%d), without its exit dump (no exit handler runs)", end_signal);
    else if (id->marks_exit) /* _exit() would have marked it: no code of the process ran at its end */
        snprintf(how, cap, "was killed, with no chance to mark its end (SIGKILL, the OOM killer, or a signal left to its default action; "
                 "its exit status %s)", parent);
    else if (id->forked_from > 0) /* (a record of an older recorder, which did not mark _exit) */
        snprintf(how, cap, "ended without its exit dump, the usual end of a forked worker (_exit(), as multiprocessing and "
                 "DataLoader workers end; a SIGKILL would look the same; its exit status %s)", parent);
    else
        snprintf(how, cap, "ended without its exit dump and left no mark (SIGKILL, the OOM killer or _exit(); its exit status %s)", parent);
}

static void describe(cmh_snapshot *s, const cmh_recover_info *info, const cmh_flight_identity *id)
{
    char how[400], t[520];
    cmh_flight_ending(id, info->state, info->end_signal, 0, 0, how, sizeof how);
    snprintf(t, sizeof t, "%s after %" PRIu64 " %s (recovered from its flight record)", how, info->entries, info->entries == 1 ? "entry" : "entries");
    cmh_strtab_intern(&s->strings, t, strlen(t), &s->ending);
}

/* Who wrote the record and how it marked its end, from its header */
static void identity_of(const cmh_flight_header *h, cmh_flight_identity *id)
{
    id->pid = h->pid;
    id->start_ticks = h->proc_start_ticks;
    snprintf(id->boot_id, sizeof id->boot_id, "%.*s", (int)strnlen(h->boot_id, sizeof h->boot_id), h->boot_id);
    snprintf(id->hostname, sizeof id->hostname, "%.*s", (int)strnlen(h->hostname, sizeof h->hostname), h->hostname);
    id->forked_from = h->forked_from > 0 && h->forked_from <= INT32_MAX ? h->forked_from : 0;
    id->state = (int)h->state;
    id->end_signal = h->end_signal;
    id->marks_exit = !!(h->marks & CMH_FLIGHT_MARKS_EXIT);
    snprintf(id->snapshot_path, sizeof id->snapshot_path, "%.*s", (int)strnlen(h->snapshot_path, sizeof h->snapshot_path),
             h->snapshot_path);
}

int cmh_flight_identify(const char *path, cmh_flight_identity *id, char *err, size_t errlen)
{
    memset(id, 0, sizeof *id);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return CMH_EIO;
    }
    cmh_flight_header *h = malloc(sizeof *h);
    ssize_t n = h ? pread(fd, h, sizeof *h, 0) : -1;
    int e = errno;
    close(fd);
    int rc = CMH_OK;
    if (!h) rc = CMH_ENOMEM, snprintf(err, errlen, "%s: out of memory", path);
    else if (n < 0) rc = CMH_EIO, snprintf(err, errlen, "%s: %s", path, strerror(e));
    else if ((size_t)n >= 8 && !memcmp(h->magic, CMH_FLIGHT_MAGIC, 8) && (size_t)n < sizeof *h)
        rc = CMH_EFORMAT, snprintf(err, errlen, "%s: a truncated flight record (%lld bytes, shorter than its %d-byte header): nothing can be read",
                                   path, (long long)n, CMH_FLIGHT_HEADER);
    else if ((size_t)n < sizeof *h || memcmp(h->magic, CMH_FLIGHT_MAGIC, 8))
        rc = CMH_EFORMAT, snprintf(err, errlen, "%s: not a flight record (no magic at byte 0)", path);
    else {
        identity_of(h, id);
    }
    free(h);
    return rc;
}

int cmh_flight_recover(const char *path, cmh_snapshot *out, cmh_recover_info *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    int rc = cmh_snapshot_init(out);
    if (rc) return rc;
    rd r = {path, NULL, 0, NULL, sizeof(cmh_flight_rec), err, errlen, info};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        cmh_snapshot_free(out);
        return CMH_EIO;
    }
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < CMH_FLIGHT_HEADER) {
        char magic[8];
        int ours = S_ISREG(sb.st_mode) && sb.st_size >= 8 && pread(fd, magic, 8, 0) == 8 && !memcmp(magic, CMH_FLIGHT_MAGIC, 8);
        close(fd);
        if (ours) /* its header, which says where the records are, is cut: nothing can be read */
            snprintf(err, errlen, "%s: a truncated flight record (%lld bytes, shorter than its %d-byte header): nothing can be read",
                     path, (long long)sb.st_size, CMH_FLIGHT_HEADER);
        else snprintf(err, errlen, S_ISDIR(sb.st_mode) ? "%s: a directory, not a flight record" : "%s: not a flight record (%lld bytes)", path, (long long)sb.st_size);
        cmh_snapshot_free(out);
        return CMH_EFORMAT;
    }
    r.len = (size_t)sb.st_size;
    void *m = mmap(NULL, r.len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        cmh_snapshot_free(out);
        return CMH_EIO;
    }
    r.map = m;
    const cmh_flight_header *h = r.h = m;
    ctx c;
    memset(&c, 0, sizeof c);
    c.r = &r;
    c.s = out;
    cmh_oa_init(&c.dict.stacks, sizeof(fstack));
    cmh_oa_init(&c.dict.names, sizeof(fname));
    cmh_fstate st;
    cmh_fstate_init(&st);
    cmh_oa_init(&c.dict.pyframes, sizeof(pyframe_rec));
    cmh_oa_init(&c.handles, sizeof(vmm_rec));
    cmh_snapshot base;
    int have_base = 0;

    if (memcmp(h->magic, CMH_FLIGHT_MAGIC, 8)) {
        rc = fail(&r, "not a flight record (no magic at byte %llu)", 0);
        goto out;
    }
    if (h->version < 1 || h->version > CMH_FLIGHT_VERSION) {
        char what[128];
        snprintf(what, sizeof what, "a flight record of version %u (byte %%llu), not this reader's (%d)", h->version, CMH_FLIGHT_VERSION);
        rc = fail(&r, what, offsetof(cmh_flight_header, version));
        goto out;
    }
    if (h->header_size != CMH_FLIGHT_HEADER) {
        char what[128];
        snprintf(what, sizeof what, "a header of %u bytes (byte %%llu), not %d", h->header_size, CMH_FLIGHT_HEADER);
        rc = fail(&r, what, offsetof(cmh_flight_header, header_size));
        goto out;
    }
    if (h->nareas > CMH_FLIGHT_EXTENTS) {
        char what[128];
        snprintf(what, sizeof what, "a header naming %u extents (byte %%llu; at most %d)", h->nareas, CMH_FLIGHT_EXTENTS);
        rc = fail(&r, what, offsetof(cmh_flight_header, nareas));
        goto out;
    }
    for (uint32_t a = 0; a < h->nareas; a++) {
        const cmh_flight_area *ar = &h->area[a];
        if (ar->dropped) continue;
        /* an extent that runs past the file's end is read as far as the file goes (a copy cut short:
         * walk() counts what is missing); one no writer could have made (in the header, larger
         * than any extent, further than 48 of them go) is a damaged header */
        if (ar->offset < CMH_FLIGHT_HEADER || ar->offset % 8 || ar->size > CMH_FLIGHT_MAX_EXTENT ||
            ar->offset > CMH_FLIGHT_HEADER + (uint64_t)CMH_FLIGHT_EXTENTS * CMH_FLIGHT_MAX_EXTENT) {
            rc = fail(&r, "an extent at a wrong place (header byte %llu)", (uint64_t)((const char *)ar - (const char *)h));
            goto out;
        }
    }
    r.head = h->version >= 2 ? sizeof(cmh_flight_rec) : CMH_FLIGHT_HEAD_V1; /* a whole head's (a compact one's is never a name's) */
    info->unverified = h->version < 2;
    info->pid = h->pid;
    info->state = (int)h->state;
    info->end_signal = h->end_signal;
    info->marks_exit = !!(h->marks & CMH_FLIGHT_MARKS_EXIT);
    info->lost = h->lost_records;
    snprintf(info->snapshot_path, sizeof info->snapshot_path, "%.*s", (int)strnlen(h->snapshot_path, sizeof h->snapshot_path),
             h->snapshot_path);

    /* the base: the valid checkpoint, if the process wrote one */
    uint32_t which = h->ckpt_which;
    uint64_t base_gen = 0;
    if (which == 1 || which == 2) {
        char cp[4400], e2[512];
        snprintf(cp, sizeof cp, "%s.ckpt%u.cmh", path, which);
        if (cmh_snapshot_load(cp, &base, e2, sizeof e2) == CMH_OK) {
            have_base = info->checkpoint = 1;
            memcpy(c.cut, h->ckpt_cut[which - 1], sizeof c.cut);
            base_gen = h->ckpt_gen[which - 1];
            c.base_dump_ns = base.dump_time_ns;
            if ((rc = cmh_fstate_copy_dict(out, &base)) != CMH_OK) goto out;
            for (uint32_t i = 0; i < base.nsegments && !st.nomem; i++) {
                const cmh_segment *g = &base.segments[i];
                fseg f = {g->addr, g->size, g->stream, {g->pool_id[0], g->pool_id[1]}, g->time_ns, g->stack, g->device, g->kind, g->flags, g->pool, 1};
                cmh_fstate_seg_add(&st, &f);
                for (uint32_t k = 0; k < g->nblocks; k++) {
                    const cmh_block *bl = &base.blocks[g->first_block + k];
                    if (bl->state == CMH_BLOCK_INACTIVE) continue;
                    cmh_entry_full e = {.addr = bl->addr, .requested = bl->requested, .stack = bl->stack, .time_ns = bl->time_ns};
                    cmh_fstate_block_put(&st, &e, g->device, bl->size, bl->state);
                }
            }
        } else {
            fprintf(stderr, "cumemhist: note: %s: its checkpoint is unreadable (%s); the journal alone may lack the oldest entries\n",
                    path, e2);
        }
    }
    /* the extents in the order they were made: those of the checkpoint's generation on */
    uint32_t order[CMH_FLIGHT_EXTENTS];
    cmh_flight_order(h, h->nareas, order);
    for (uint32_t k = 0; k < h->nareas; k++) {
        uint32_t a = order[k];
        const cmh_flight_area *ar = &h->area[a];
        if (ar->dropped || (have_base && ar->gen < base_gen)) continue; /* all in the checkpoint */
        if ((rc = walk(&r, a, on_record, &c)) != CMH_OK) goto out;
    }
    /* per device, in their order, each once (a flight record's start may append an entry twice) */
    if (c.nents) {
        qsort(c.ents, c.nents, sizeof *c.ents, cmp_jentry);
        uint32_t k = 0;
        for (uint32_t i = 0; i < c.nents; i++) {
            if (k && c.ents[k - 1].slot == c.ents[i].slot && c.ents[k - 1].seq == c.ents[i].seq) continue;
            c.ents[k++] = c.ents[i];
        }
        c.nents = k;
    }
    /* the final state: the base's, then what every journal entry did.  The state holds model
     * stack ids, as the base's segments and blocks do: an entry's is the recorder's, and the two
     * numberings agree only by luck (they part as soon as a stack the recorder interned is never
     * used by a kept entry: a forked child's inherited ones, entries dropped by max_entries or a
     * clear), so each is made a model stack before it is kept. */
    for (uint32_t i = 0; i < c.nents && !st.nomem; i++) {
        if (c.ents[i].seq <= c.cleared[c.ents[i].slot]) continue;
        if (c.ents[i].short_free) /* the trace keeps the size its entry left out */
            c.ents[i].e.size = c.ents[i].e.requested = cmh_fstate_seg_size(&st, c.ents[i].e.addr, slot_device(c.ents[i].slot));
        cmh_entry_full e = c.ents[i].e;
        if (e.action == CMH_ACT_SEGMENT_ALLOC || e.action == CMH_ACT_SEGMENT_MAP || e.action == CMH_ACT_ALLOC)
            if ((rc = model_stack(&c, e.stack, &e.stack)) != CMH_OK) goto out;
        cmh_fstate_apply(&st, &e, slot_device(c.ents[i].slot));
    }
    if (st.nomem) {
        rc = CMH_ENOMEM;
        goto out;
    }
    /* meta */
    out->source = CMH_SRC_RECORDER;
    out->pid = h->pid;
    /* who it was (zero in a record made before these fields: unknown) */
    out->rank = h->rank1 > 0 ? h->rank1 - 1 : -1;
    out->local_rank = h->local_rank1 > 0 ? h->local_rank1 - 1 : -1;
    out->world_size = h->world_size1 > 0 ? h->world_size1 - 1 : -1;
    out->forked_from = h->forked_from > 0 && h->forked_from <= INT32_MAX ? h->forked_from : 0;
    snprintf(out->producer, sizeof out->producer, "%.*s", (int)strnlen(h->producer, sizeof h->producer), h->producer);
    for (char *p = out->producer; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    char host[sizeof h->hostname + 1], cmd[sizeof h->cmdline + 1];
    snprintf(host, sizeof host, "%.*s", (int)strnlen(h->hostname, sizeof h->hostname), h->hostname);
    snprintf(cmd, sizeof cmd, "%.*s", (int)strnlen(h->cmdline, sizeof h->cmdline), h->cmdline);
    if (cmh_strtab_intern(&out->strings, host, strlen(host), &out->hostname) ||
        cmh_strtab_intern(&out->strings, cmd, strlen(cmd), &out->cmdline)) {
        rc = CMH_ENOMEM;
        goto out;
    }
    out->start_time_ns = h->start_ns;
    out->opt_enabled = h->enabled;
    out->opt_context = h->context;
    out->opt_max_entries = h->max_entries;
    out->opt_max_frames = h->max_frames;
    out->lost_events = h->lost_events + h->lost_records + (have_base ? base.lost_events : 0);
    if ((rc = build(&c, have_base ? &base : NULL, &st)) != CMH_OK) goto out;
    if ((rc = vmm_unmapped(&c)) != CMH_OK || (rc = vmm_maps(&c)) != CMH_OK) goto out;
    if ((rc = cmh_fchildren_emit(&c.kids, out, r.map, r.len)) != CMH_OK) goto out;
    for (uint32_t i = 0; i < c.nanns; i++) { /* the ranges, but those the checkpoint has */
        cmh_annotation a = c.anns[i];
        if (have_base && a.time_ns <= c.base_dump_ns) continue;
        if ((rc = name_string(&c, a.name, &a.name)) != CMH_OK || (rc = cmh_snapshot_add_annotation(out, &a)) != CMH_OK) goto out;
    }
    int64_t last = h->t1_ns;
    for (uint32_t i = 0; i < out->nentries; i++)
        if (cmh_entry_time(out, &out->entries[i]) > last) last = cmh_entry_time(out, &out->entries[i]);
    out->dump_time_ns = last;
    info->entries = out->nentries;
    /* what could not be read goes with the snapshot: every report over it says its history is
     * incomplete (a cut copy read as a clean one: "killed after 1 entry", nothing live) */
    out->history_lost.cut_bytes = info->truncated;
    out->history_lost.file_bytes = info->truncated ? (uint64_t)r.len : 0;
    out->history_lost.read_to = info->truncated ? info->read_to : 0;
    out->history_lost.torn = info->torn;
    out->history_lost.damaged = info->damaged;
    out->history_lost.refused = info->lost;
    cmh_flight_identity id;
    memset(&id, 0, sizeof id);
    identity_of(h, &id);
    describe(out, info, &id);
out:
    if (have_base) cmh_snapshot_free(&base);
    cmh_oa_free(&c.dict.stacks);
    cmh_oa_free(&c.dict.names);
    cmh_oa_free(&c.dict.pyframes);
    cmh_oa_free(&c.handles);
    free(c.maps);
    free(c.rels);
    free(c.dict.pcs);
    free(c.ents);
    free(c.anns);
    free(c.kids.v);
    cmh_fstate_free(&st);
    munmap(m, r.len);
    if (rc != CMH_OK) {
        if (rc == CMH_ENOMEM) snprintf(err, errlen, "%s: out of memory", path);
        cmh_snapshot_free(out);
    }
    return rc;
}
