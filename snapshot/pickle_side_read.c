/*
 * pickle_side_read.c - the `cumemhist` dict of a pickle cumemhist exported, back into the model.
 *
 * PyTorch's schema has no place for much of what a record holds (pool samples, retried OOMs,
 * marks, threads, the module map, VMM handles, failed driver calls, what a cut flight record
 * lost, which GPU a device was, ...), so pickle_side_write.c puts it in one top-level dict that
 * PyTorch's readers ignore, and this file reads it back so that a round trip through the pickle
 * loses nothing.  It lives apart from pickle_model.c, which reads PyTorch's own schema, because
 * it grows with every fact the recorder learns to keep, and PyTorch's schema does not.  Each
 * reader names the writer's tuple it expects and refuses any other shape with a message that
 * says which item is wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/recorder.h"
#include "pickle_internal.h"
#include "pickle_side.h"

static int cmp_pool_at(const void *a, const void *b)
{
    const pool_at *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* cumemhist.marks (pickle_side_write.c): (device, position, name, time_us, thread), position counting
 * the device's entries before it, pool samples included; sorted by device and position. */
static int read_marks(pm *m, const pcont *ml, pool_at **out)
{
    pool_at *mk = calloc(ml->n ? ml->n : 1, sizeof *mk);
    if (!mk) return pk_nomem(m);
    for (uint32_t i = 0; i < ml->n; i++) {
        const pcont *t = pk_obj(m, &ml->items[i], C_TUPLE);
        int64_t v[5];
        int ok = t && t->n == 5 && t->items[2].tag == PV_STR;
        for (int k = 0; ok && k < 5; k++) ok = k == 2 || pk_to_i64(&t->items[k], &v[k]);
        if (!ok || v[1] < 0 || v[4] < 0 || v[4] > UINT32_MAX) {
            free(mk);
            return pk_fail(m, "cumemhist.marks[%u] is not (device, position, name, time_us, thread)", i);
        }
        mk[i].device = (int32_t)v[0];
        mk[i].pos = (uint64_t)v[1];
        mk[i].seq = i;
        mk[i].e.action = CMH_ACT_MARK;
        mk[i].e.name = t->items[2].u.id;
        mk[i].e.time_ns = pk_us_to_ns(v[3]);
        mk[i].e.thread = (uint32_t)v[4];
    }
    qsort(mk, ml->n, sizeof *mk, cmp_pool_at);
    *out = mk;
    return 0;
}

/* cumemhist.pool_sample_tags (pickle_side_write.c; absent from older exports): each pool sample's
 * (stream: CMH_POOL_* bits, flags, thread, frames), in pool_samples' order */
static int read_pool_sample_tags(pm *m, const pcont *tl, pool_at *ps, uint32_t n)
{
    for (uint32_t i = 0; i < tl->n && i < n; i++) {
        pcont *t = (pcont *)pk_obj(m, &tl->items[i], C_TUPLE);
        int64_t v[3];
        int ok = t && t->n == 4;
        for (int k = 0; ok && k < 3; k++) ok = pk_to_i64(&t->items[k], &v[k]);
        if (ok && t->items[3].tag == PV_CONT && pk_convert_stack(m, &t->items[3])) return -1;
        if (!ok || t->items[3].tag != PV_STACK || v[1] < 0 || v[1] > 15 || v[2] < 0 || v[2] > UINT32_MAX)
            return pk_fail(m, "cumemhist.pool_sample_tags[%u] is not (stream, flags, thread, frames)", i);
        ps[i].e.stream = (uint64_t)v[0];
        ps[i].e.flags = (uint8_t)v[1];
        ps[i].e.thread = (uint32_t)v[2];
        ps[i].e.stack = t->items[3].u.id;
    }
    return 0;
}

static int read_pool_samples(pm *m, const pcont *pl, const pcont *tags, pool_at **out)
{
    pool_at *ps = calloc(pl->n, sizeof *ps);
    if (!ps) return pk_nomem(m);
    for (uint32_t i = 0; i < pl->n; i++) {
        const pcont *t = pk_obj(m, &pl->items[i], C_TUPLE);
        int64_t v[6];
        int ok = t && t->n == 6;
        for (int k = 0; ok && k < 6; k++) ok = pk_to_i64(&t->items[k], &v[k]);
        if (!ok || v[1] < 0) {
            free(ps);
            return pk_fail(m, "cumemhist.pool_samples[%u] is not (device, position, pool, reserved, used, time_us)", i);
        }
        ps[i].device = (int32_t)v[0];
        ps[i].pos = (uint64_t)v[1];
        ps[i].e.action = CMH_ACT_POOL_SAMPLE;
        ps[i].e.kind = CMH_KIND_ASYNC;
        ps[i].e.addr = (uint64_t)v[2];
        ps[i].e.size = (uint64_t)v[3];
        ps[i].e.requested = (uint64_t)v[4];
        ps[i].e.time_ns = pk_us_to_ns(v[5]);
    }
    if (tags && read_pool_sample_tags(m, tags, ps, pl->n)) {
        free(ps);
        return -1;
    }
    for (uint32_t i = 0, j = 0; i < pl->n; i++, j++) { /* j: its index among its device's (the list goes device by device) */
        if (i && ps[i].device != ps[i - 1].device) j = 0;
        ps[i].seq = (uint64_t)(2 * j + 1) << 20;
    }
    qsort(ps, pl->n, sizeof *ps, cmp_pool_at);
    *out = ps;
    return 0;
}

/* cumemhist.retried_ooms (pickle_side_write.c): OOMs the allocator retried with success, which the
 * pickle's trace has no 'oom' for (CMH_EF_RETRIED), back among ps (*nps of them) where they
 * were: (device, position, order among the device's pool samples and these, size, device_free
 * or None, stream, time_us, kind, frames). */
static int read_retried_ooms(pm *m, const pcont *rl, pool_at **ps, uint32_t *nps)
{
    pool_at *all = realloc(*ps, ((size_t)*nps + rl->n) * sizeof *all);
    if (!all) return pk_nomem(m);
    *ps = all;
    int32_t dev = INT32_MIN;
    uint64_t k = 0; /* retried OOMs of the device before this one */
    for (uint32_t i = 0; i < rl->n; i++) {
        pcont *t = (pcont *)pk_obj(m, &rl->items[i], C_TUPLE);
        int64_t v[8];
        int ok = t && t->n == 9;
        for (int j = 0; ok && j < 8; j++) ok = j == 4 ? (t->items[4].tag == PV_NONE || pk_to_i64(&t->items[4], &v[4])) : pk_to_i64(&t->items[j], &v[j]);
        if (ok && t->items[8].tag == PV_CONT && pk_convert_stack(m, &t->items[8])) return -1;
        if (!ok || v[1] < 0 || v[2] < 0 || v[0] < -1 || v[0] > 1023 || t->items[8].tag != PV_STACK)
            return pk_fail(m, "cumemhist.retried_ooms[%u] is not (device, position, order, size, device_free, stream, time_us, kind, frames)", i);
        if ((int32_t)v[0] != dev) dev = (int32_t)v[0], k = 0;
        pool_at *a = &all[(*nps)++];
        memset(a, 0, sizeof *a);
        a->device = dev;
        a->pos = (uint64_t)v[1];
        /* after the device's first order - k pool samples (pool sample j: 2j + 1), in order among themselves */
        a->seq = ((uint64_t)(2 * ((uint64_t)v[2] - k)) << 20) + k;
        k++;
        a->e.action = CMH_ACT_OOM;
        a->e.size = a->e.requested = (uint64_t)v[3];
        a->e.addr = t->items[4].tag == PV_NONE ? CMH_DEVICE_FREE_UNKNOWN : (uint64_t)v[4];
        a->e.stream = (uint64_t)v[5];
        a->e.time_ns = pk_us_to_ns(v[6]);
        a->e.kind = v[7] >= 0 && v[7] < CMH_KIND_COUNT ? (uint8_t)v[7] : CMH_KIND_DEVICE;
        a->e.stack = t->items[8].u.id;
    }
    qsort(all, *nps, sizeof *all, cmp_pool_at);
    return 0;
}

/* cumemhist.vmm_unmapped (pickle_side_write.c): the cuMemCreate handles held and mapped nowhere at
 * the end, (device, size, time_ns, frames), as the .cmh's vmm_unmapped */
static int read_vmm_unmapped(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        pcont *t = (pcont *)pk_obj(m, &l->items[i], C_TUPLE);
        int64_t v[3];
        int ok = t && t->n == 4;
        for (int k = 0; ok && k < 3; k++) ok = pk_to_i64(&t->items[k], &v[k]);
        if (ok && t->items[3].tag == PV_CONT && pk_convert_stack(m, &t->items[3])) return -1;
        if (!ok || t->items[3].tag != PV_STACK || v[0] < -1 || v[0] > 1023 || v[1] < 0)
            return pk_fail(m, "cumemhist.vmm_unmapped[%u] is not (device, size, time_ns, frames)", i);
        cmh_vmm_handle h = {(int32_t)v[0], (uint64_t)v[1], t->items[3].u.id, v[2]};
        if (cmh_snapshot_add_vmm_unmapped(m->s, &h) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.vmm_maps (pickle_side_write.c): every cuMemMap and the handle it mapped, (device, addr,
 * size, time_ns, handle, handle_size, handle_time_ns, frames of cuMemCreate), as the .cmh's
 * vmm_maps (physmap.c charges each handle once, whole, by them) */
static int read_vmm_maps(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        pcont *t = (pcont *)pk_obj(m, &l->items[i], C_TUPLE);
        int64_t v[7];
        int ok = t && t->n == 8;
        for (int k = 0; ok && k < 7; k++) ok = pk_to_i64(&t->items[k], &v[k]);
        if (ok && t->items[7].tag == PV_CONT && pk_convert_stack(m, &t->items[7])) return -1;
        if (!ok || t->items[7].tag != PV_STACK || v[0] < 0 || v[0] > 1023)
            return pk_fail(m, "cumemhist.vmm_maps[%u] is not (device, addr, size, time_ns, handle, handle_size, handle_time_ns, frames)", i);
        cmh_vmm_map r = {(int32_t)v[0], (uint64_t)v[1], (uint64_t)v[2], v[3], (uint64_t)v[4], (uint64_t)v[5], t->items[7].u.id, v[6]};
        if (cmh_snapshot_add_vmm_map(m->s, &r) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.vmm_released (pickle_side_write.c): every cuMemRelease, (device, handle, size, time_ns,
 * release_ns, frames of cuMemCreate), as the .cmh's vmm_released */
static int read_vmm_released(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        pcont *t = (pcont *)pk_obj(m, &l->items[i], C_TUPLE);
        int64_t v[5];
        int ok = t && t->n == 6;
        for (int k = 0; ok && k < 5; k++) ok = pk_to_i64(&t->items[k], &v[k]);
        if (ok && t->items[5].tag == PV_CONT && pk_convert_stack(m, &t->items[5])) return -1;
        if (!ok || t->items[5].tag != PV_STACK || v[0] < 0 || v[0] > 1023)
            return pk_fail(m, "cumemhist.vmm_released[%u] is not (device, handle, size, time_ns, release_ns, frames)", i);
        cmh_vmm_release r = {(int32_t)v[0], (uint64_t)v[1], (uint64_t)v[2], t->items[5].u.id, v[3], v[4]};
        if (cmh_snapshot_add_vmm_release(m->s, &r) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.free_frames (cmh_entry_free_stack_aside): the frees' stacks of whole blocks
 * the trace never saw allocated, written frameless in device_traces so that memory_viz does not
 * take the free's line for the segment's origin: (device, which of the device's segment_free
 * and segment_unmap entries, frames), put back on that entry. */
static int read_free_frames(pm *m, const pcont *l)
{
    /* where the last item was found: the writer lists them by device and by entry, so each item
     * goes on from there and the list costs one walk of the trace, not one per item (which grew
     * as the square: a --context all record whose ring dropped every allocation, 80,000 frees,
     * took 2.5 s to read); an item behind it (another writer's order) starts again at the first
     * trace, as every item did */
    int64_t cur_dev = INT64_MIN, cur_nth = 0; /* the cursor: nth is that of entry (tr, k) */
    uint32_t cur_tr = 0, cur_k = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        pcont *t = (pcont *)pk_obj(m, &l->items[i], C_TUPLE);
        int64_t v[2];
        int ok = t && t->n == 3;
        for (int k = 0; ok && k < 2; k++) ok = pk_to_i64(&t->items[k], &v[k]);
        if (ok && t->items[2].tag == PV_CONT && pk_convert_stack(m, &t->items[2])) return -1;
        ok = ok && t->items[2].tag == PV_STACK && v[1] >= 0;
        if (ok && (v[0] != cur_dev || v[1] < cur_nth)) cur_dev = v[0], cur_nth = 0, cur_tr = 0, cur_k = 0;
        cmh_entry *at = NULL;
        uint32_t from_tr = cur_tr;
        for (uint32_t tr = from_tr; ok && tr < m->s->ntraces && !at; tr++) {
            const cmh_trace *c = &m->s->traces[tr];
            if (c->device != v[0]) continue;
            int64_t nth = tr == from_tr ? cur_nth : 0;
            for (uint32_t k = tr == from_tr ? cur_k : 0; k < c->nentries && !at; k++) {
                cmh_entry *e = &m->s->entries[c->first_entry + k];
                if (e->action != CMH_ACT_SEGMENT_FREE && e->action != CMH_ACT_SEGMENT_UNMAP) continue;
                if (nth++ == v[1]) at = e, cur_tr = tr, cur_k = k, cur_nth = v[1];
            }
        }
        if (!at) return pk_fail(m, "cumemhist.free_frames[%u] is not (device, one of its segment_free entries, frames)", i);
        if (!at->stack) at->stack = t->items[2].u.id; /* (frames the entry has itself stay) */
    }
    return 0;
}

/* cumemhist.history_lost (pickle_side_write.c): what a recovery from a cut flight record could not
 * read, (cut_bytes, file_bytes, read_to, torn, damaged, refused), as the .cmh's history_lost;
 * a later writer's fields past them ignored */
static int read_history_lost(pm *m, const pcont *t)
{
    int64_t v[6];
    int ok = t->n >= 6;
    for (int k = 0; ok && k < 6; k++) ok = pk_to_i64(&t->items[k], &v[k]) && v[k] >= 0;
    if (!ok) return pk_fail(m, "cumemhist.history_lost is not (cut_bytes, file_bytes, read_to, torn, damaged, refused)");
    cmh_history_lost h = {(uint64_t)v[0], (uint64_t)v[1], (uint64_t)v[2], (uint64_t)v[3], (uint64_t)v[4], (uint64_t)v[5]};
    m->s->history_lost = h;
    return 0;
}

/* cumemhist.driver_errors (pickle_side_write.c): the driver calls that failed other than OOM,
 * (call, result, count, [(addr, size, thread, time_ns, frames), ...]), as the .cmh's driver_errors */
static int read_driver_errors(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        const pcont *t = pk_obj(m, &l->items[i], C_TUPLE);
        int64_t res = 0, count = 0;
        const pcont *sl = t && t->n == 4 ? pk_obj(m, &t->items[3], C_LIST) : NULL;
        if (!sl || t->items[0].tag != PV_STR || !pk_to_i64(&t->items[1], &res) || !pk_to_i64(&t->items[2], &count) || res < INT32_MIN ||
            res > INT32_MAX || count < 0)
            return pk_fail(m, "cumemhist.driver_errors[%u] is not (call, result, count, sites)", i);
        cmh_drv_error e;
        memset(&e, 0, sizeof e);
        snprintf(e.call, sizeof e.call, "%s", cmh_str(m->s, t->items[0].u.id));
        e.result = (int32_t)res;
        e.count = (uint64_t)count;
        for (uint32_t j = 0; j < sl->n; j++) {
            pcont *st = (pcont *)pk_obj(m, &sl->items[j], C_TUPLE);
            int64_t v[4];
            int ok = st && st->n == 5;
            for (int k = 0; ok && k < 4; k++) ok = pk_to_i64(&st->items[k], &v[k]);
            if (ok && st->items[4].tag == PV_CONT && pk_convert_stack(m, &st->items[4])) return -1;
            if (!ok || st->items[4].tag != PV_STACK || v[2] < 0 || v[2] > UINT32_MAX)
                return pk_fail(m, "cumemhist.driver_errors[%u] site %u is not (addr, size, thread, time_ns, frames)", i, j);
            if (e.nsites >= CMH_DRV_ERROR_SITES) continue; /* (a later writer's more: kept counted) */
            cmh_drv_error_site w = {(uint64_t)v[0], (uint64_t)v[1], (uint32_t)v[2], st->items[4].u.id, v[3]};
            e.sites[e.nsites++] = w;
        }
        if (cmh_snapshot_add_drv_error(m->s, &e) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.device_ids (pickle_side_write.c): which GPU each device number was, (device, uuid, name,
 * pci_bus), as the .cmh's device_ids */
static int read_device_ids(pm *m, const pcont *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        const pcont *t = pk_obj(m, &l->items[i], C_TUPLE);
        int64_t dev = -1;
        if (!t || t->n != 4 || !pk_to_i64(&t->items[0], &dev) || dev < 0 || dev > 1023 || t->items[1].tag != PV_STR ||
            t->items[2].tag != PV_STR || t->items[3].tag != PV_STR)
            return pk_fail(m, "cumemhist.device_ids[%u] is not (device, uuid, name, pci_bus)", i);
        cmh_device_ident d;
        memset(&d, 0, sizeof d);
        d.device = (int32_t)dev;
        snprintf(d.uuid, sizeof d.uuid, "%s", cmh_str(m->s, t->items[1].u.id));
        snprintf(d.name, sizeof d.name, "%s", cmh_str(m->s, t->items[2].u.id));
        snprintf(d.pci_bus, sizeof d.pci_bus, "%s", cmh_str(m->s, t->items[3].u.id));
        if (cmh_snapshot_add_ident(m->s, &d) != CMH_OK) return pk_nomem(m);
    }
    return 0;
}

/* cumemhist.threads (pickle_side_write.c): each device's entries' recording threads, run-length
 * over the entries kept (marks and pool samples, which it does not count, are passed over). */
static int read_threads(pm *m, const pcont *tl)
{
    for (uint32_t d = 0; d < tl->n; d++) {
        const pcont *rl = pk_obj(m, &tl->items[d], C_LIST);
        if (!rl) return pk_fail(m, "cumemhist.threads[%u] is not a list", d);
        cmh_trace *tr = NULL;
        for (uint32_t t = 0; t < m->s->ntraces && !tr; t++)
            if (m->s->traces[t].device == (int32_t)d) tr = &m->s->traces[t];
        uint32_t i = 0;
        for (uint32_t k = 0; tr && k + 1 < rl->n; k += 2) {
            int64_t count, thread;
            if (!pk_to_i64(&rl->items[k], &count) || !pk_to_i64(&rl->items[k + 1], &thread) || count < 0 || thread < 0 ||
                thread > UINT32_MAX)
                return pk_fail(m, "cumemhist.threads[%u] is not [count, thread, ...]", d);
            for (; count > 0 && i < tr->nentries; i++) {
                uint32_t at = tr->first_entry + i;
                cmh_entry_full e;
                cmh_entry_get(m->s, &m->s->entries[at], &e);
                if (e.action >= CMH_ACT_MARK) continue; /* marks and pool samples: not counted (their own say) */
                count--;
                if (e.thread == (uint32_t)thread) continue;
                e.thread = (uint32_t)thread;
                if (cmh_entry_set(m->s, at, &e) != CMH_OK) return pk_nomem(m);
            }
        }
    }
    return 0;
}

/* cumemhist.modules and cumemhist.frame_modules (pickle_side_write.c): the module map, and each
 * frame's module (a reference to the frame's own dict, then the module's index). */
static int read_modules(pm *m, const pcont *ml, const pcont *fl)
{
    uint32_t base = m->s->nmodules;
    for (uint32_t i = 0; i < ml->n; i++) {
        const pcont *t = pk_obj(m, &ml->items[i], C_TUPLE);
        int64_t b, n;
        if (!t || t->n != 4 || t->items[0].tag != PV_STR || t->items[1].tag != PV_STR || !pk_to_i64(&t->items[2], &b) ||
            !pk_to_i64(&t->items[3], &n))
            return pk_fail(m, "cumemhist.modules[%u] is not (path, build_id, base, size)", i);
        cmh_module md = {t->items[0].u.id, t->items[1].u.id, (uint64_t)b, (uint64_t)n};
        if (cmh_snapshot_add_module(m->s, &md) != CMH_OK) return pk_nomem(m);
    }
    for (uint32_t i = 0; fl && i < fl->n; i++) {
        const pcont *t = pk_obj(m, &fl->items[i], C_TUPLE);
        int64_t mod;
        pv f = t && t->n == 2 ? t->items[0] : (pv){0};
        if (f.tag == PV_CONT && pk_convert_frame(m, &f)) return -1;
        if (!t || t->n != 2 || f.tag != PV_FRAME || f.u.id >= m->s->nframes || !pk_to_i64(&t->items[1], &mod) || mod < 0 ||
            (uint64_t)mod >= ml->n)
            return pk_fail(m, "cumemhist.frame_modules[%u] is not (frame, module)", i);
        m->s->frames[f.u.id].module = (int32_t)(base + (uint64_t)mod);
    }
    return 0;
}

/* The export wrote each mark it carries aside as a START and an END of zero length for
 * memory_viz (viz/memviz.c); with the mark back in the trace, that pair goes. */
typedef struct mark_key {
    int64_t t;
    uint32_t name;
    int32_t device;
} mark_key;

static int cmp_mark_key(const void *a, const void *b)
{
    const mark_key *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->name != y->name) return x->name < y->name ? -1 : 1;
    return (x->device > y->device) - (x->device < y->device);
}

int pk_side_drop_mark_annotations(pm *m)
{
    cmh_snapshot *s = m->s;
    if (!m->nmarks_aside) return 0;
    mark_key *keys = malloc(m->nmarks_aside * sizeof *keys);
    if (!keys) return pk_nomem(m);
    for (uint32_t j = 0; j < m->nmarks_aside; j++)
        keys[j] = (mark_key){m->marks_aside[j].e.time_ns, m->marks_aside[j].e.name, m->marks_aside[j].device};
    qsort(keys, m->nmarks_aside, sizeof *keys, cmp_mark_key);
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->nannotations; i++) {
        const cmh_annotation *a = &s->annotations[i], *b = i + 1 < s->nannotations ? a + 1 : NULL;
        int pair = b && a->stage == 0 && b->stage == 1 && a->name == b->name && a->device == b->device && a->time_ns == b->time_ns;
        mark_key key = {a->time_ns, a->name, a->device};
        if (pair && bsearch(&key, keys, m->nmarks_aside, sizeof *keys, cmp_mark_key)) {
            i++; /* and its END */
            continue;
        }
        s->annotations[k++] = *a;
    }
    s->nannotations = k;
    free(keys);
    return 0;
}

int pk_side_read_aside(pm *m, const pcont *od, pool_at **out, uint32_t *nout)
{
    const pv *psv = pk_dict_get(m, od, m->key[K_POOL_SAMPLES]);
    const pcont *pl = psv ? pk_obj(m, psv, C_LIST) : NULL;
    pool_at *ps = NULL;
    const pv *ptv = pk_dict_get(m, od, m->key[K_POOL_SAMPLE_TAGS]);
    const pcont *ptl = ptv ? pk_obj(m, ptv, C_LIST) : NULL;
    if (pl && pl->n && read_pool_samples(m, pl, ptl, &ps)) return -1;
    uint32_t nps = ps ? pl->n : 0;
    const pv *rov = pk_dict_get(m, od, m->key[K_RETRIED_OOMS]);
    const pcont *rol = rov ? pk_obj(m, rov, C_LIST) : NULL;
    if (rol && rol->n && read_retried_ooms(m, rol, &ps, &nps)) {
        free(ps);
        return -1;
    }
    const pv *mkv = pk_dict_get(m, od, m->key[K_MARKS]);
    const pcont *mkl = mkv ? pk_obj(m, mkv, C_LIST) : NULL;
    if (mkl && mkl->n && read_marks(m, mkl, &m->marks_aside)) {
        free(ps);
        return -1;
    }
    m->nmarks_aside = m->marks_aside ? mkl->n : 0;
    *out = ps;
    *nout = nps;
    return 0;
}

int pk_side_read(pm *m, const pcont *od)
{
    const pv *src = pk_dict_get(m, od, m->key[K_SOURCE]);
    if (src && src->tag == PV_STR && src->u.id == m->key[K_RECORDER]) {
        m->s->source = CMH_SRC_RECORDER;
        m->s->pt_fields |= CMH_PT_FROM_RECORDER;
    }
    int64_t x = 0;
    if (!pk_want_int(m, od, K_PID, &x, 0, "cumemhist")) m->s->pid = x;
    x = -1;
    if (!pk_want_int(m, od, K_CONTEXT, &x, 0, "cumemhist") && x >= CMH_CONTEXT_NONE && x <= CMH_CONTEXT_ALL)
        m->s->opt_context = (uint8_t)x; /* the recorder's: whose stacks its frees carry */
    const pv *hv = pk_dict_get(m, od, m->key[K_HOST]), *cv = pk_dict_get(m, od, m->key[K_CMDLINE]);
    if (hv && hv->tag == PV_STR) m->s->hostname = hv->u.id;
    if (cv && cv->tag == PV_STR) m->s->cmdline = cv->u.id;
    const pv *dr = pk_dict_get(m, od, m->key[K_DROPPED]);
    const pcont *dl = dr ? pk_obj(m, dr, C_LIST) : NULL;
    for (uint32_t i = 0; dl && i < dl->n; i++)
        for (uint32_t t = 0; t < m->s->ntraces; t++)
            if (m->s->traces[t].device == (int32_t)i && pk_to_i64(&dl->items[i], &x)) m->s->traces[t].dropped = (uint64_t)x;
    const pv *dov = pk_dict_get(m, od, m->key[K_DROPPED_OOMS]); /* of them, the OOM entries (cmh_trace) */
    const pcont *dol = dov ? pk_obj(m, dov, C_LIST) : NULL;
    for (uint32_t i = 0; dol && i < dol->n; i++)
        for (uint32_t t = 0; t < m->s->ntraces; t++)
            if (m->s->traces[t].device == (int32_t)i && pk_to_i64(&dol->items[i], &x) && x > 0) m->s->traces[t].dropped_ooms = (uint64_t)x;
    x = 0;
    if (!pk_want_int(m, od, K_POOLS_READ_AT_DUMP, &x, 0, "cumemhist") && x == 1 && !(m->s->pt_fields & CMH_PT_ALLOCATOR_SETTINGS) &&
        cmh_snapshot_add_setting(m->s, "pools_read_at_dump", "1", 1) != CMH_OK)
        return pk_nomem(m);
    const pv *th = pk_dict_get(m, od, m->key[K_THREADS]);
    const pcont *tl = th ? pk_obj(m, th, C_LIST) : NULL;
    if (tl && read_threads(m, tl)) return -1;
    const pv *tiv = pk_dict_get(m, od, m->key[K_THREAD_IDS]);
    const pcont *til = tiv ? pk_obj(m, tiv, C_LIST) : NULL;
    for (uint32_t i = 0; til && i < til->n; i++) {
        const pcont *t = pk_obj(m, &til->items[i], C_TUPLE);
        int64_t th, tid;
        if (!t || t->n != 3 || !pk_to_i64(&t->items[0], &th) || !pk_to_i64(&t->items[1], &tid) || t->items[2].tag != PV_STR || th < 1 ||
            th > UINT32_MAX)
            return pk_fail(m, "cumemhist.thread_ids is not a list of (thread, tid, name)");
        cmh_thread_info ti = {(uint32_t)th, tid, t->items[2].u.id};
        if (cmh_snapshot_add_thread(m->s, &ti) != CMH_OK)
            return pk_nomem(m);
    }
    if (pk_want_int(m, od, K_START_NS, &m->s->start_time_ns, 0, "cumemhist") ||
        pk_want_int(m, od, K_DUMP_NS, &m->s->dump_time_ns, 0, "cumemhist") ||
        pk_want_int(m, od, K_CLOCK_ORIGIN_NS, &m->s->clock_origin_ns, 0, "cumemhist"))
        return -1;
    const pv *prv = pk_dict_get(m, od, m->key[K_PROCESS]), *env = pk_dict_get(m, od, m->key[K_ENDING]);
    const pcont *prt = prv ? pk_obj(m, prv, C_TUPLE) : NULL;
    if (prt) { /* (rank, local_rank, world_size, forked_from): pickle_side_write.c */
        int64_t v[4];
        int ok = prt->n == 4;
        for (int k = 0; ok && k < 4; k++) ok = pk_to_i64(&prt->items[k], &v[k]);
        for (int k = 0; ok && k < 3; k++) ok = v[k] >= -1 && v[k] <= INT32_MAX;
        if (!ok)
            return pk_fail(m, "cumemhist.process is not (rank, local_rank, world_size, forked_from)");
        m->s->rank = (int32_t)v[0];
        m->s->local_rank = (int32_t)v[1];
        m->s->world_size = (int32_t)v[2];
        m->s->forked_from = v[3];
    }
    if (env && env->tag == PV_STR) m->s->ending = env->u.id;
    const pv *miv = pk_dict_get(m, od, m->key[K_MEMINFO]);
    const pcont *mil = miv ? pk_obj(m, miv, C_LIST) : NULL;
    for (uint32_t i = 0; mil && i < mil->n; i++) { /* (device, time_ns, free, total, thread): pickle_side_write.c */
        const pcont *t = pk_obj(m, &mil->items[i], C_TUPLE);
        int64_t v[5];
        int ok = t && t->n == 5;
        for (int k = 0; ok && k < 5; k++) ok = pk_to_i64(&t->items[k], &v[k]);
        if (!ok || v[0] < -1 || v[0] > 1023 || v[4] < 0 || v[4] > UINT32_MAX)
            return pk_fail(m, "cumemhist.meminfo[%u] is not (device, time_ns, free, total, thread)", i);
        cmh_meminfo mi = {(int32_t)v[0], v[1], (uint64_t)v[2], (uint64_t)v[3], (uint32_t)v[4]};
        if (cmh_snapshot_add_meminfo(m->s, &mi) != CMH_OK)
            return pk_nomem(m);
    }
    const pv *vuv = pk_dict_get(m, od, m->key[K_VMM_UNMAPPED]), *vmv = pk_dict_get(m, od, m->key[K_VMM_MAPS]);
    const pcont *vul = vuv ? pk_obj(m, vuv, C_LIST) : NULL, *vml = vmv ? pk_obj(m, vmv, C_LIST) : NULL;
    if ((vul && read_vmm_unmapped(m, vul)) || (vml && read_vmm_maps(m, vml))) return -1;
    const pv *vrv = pk_dict_get(m, od, m->key[K_VMM_RELEASED]);
    const pcont *vrl = vrv ? pk_obj(m, vrv, C_LIST) : NULL;
    if (vrl && read_vmm_released(m, vrl)) return -1;
    const pv *ffv = pk_dict_get(m, od, m->key[K_FREE_FRAMES]);
    const pcont *ffl = ffv ? pk_obj(m, ffv, C_LIST) : NULL;
    if (ffl && read_free_frames(m, ffl)) return -1;
    const pv *hlv = pk_dict_get(m, od, m->key[K_HISTORY_LOST]), *dev = pk_dict_get(m, od, m->key[K_DRIVER_ERRORS]),
             *div = pk_dict_get(m, od, m->key[K_DEVICE_IDS]);
    const pcont *hlt = hlv ? pk_obj(m, hlv, C_TUPLE) : NULL, *del = dev ? pk_obj(m, dev, C_LIST) : NULL, *dil = div ? pk_obj(m, div, C_LIST) : NULL;
    if ((hlt && read_history_lost(m, hlt)) || (del && read_driver_errors(m, del)) || (dil && read_device_ids(m, dil))) return -1;
    const pv *mv = pk_dict_get(m, od, m->key[K_MODULES]), *fv = pk_dict_get(m, od, m->key[K_FRAME_MODULES]);
    const pcont *ml = mv ? pk_obj(m, mv, C_LIST) : NULL, *fl = fv ? pk_obj(m, fv, C_LIST) : NULL;
    if (ml && read_modules(m, ml, fl)) return -1;
    return 0;
}
