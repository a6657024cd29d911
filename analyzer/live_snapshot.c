/*
 * live_snapshot.c - a snapshot of now from a live reader (live_reader.h): the checkpoint's
 * dictionary, the modules seen, each device's window (the recorder's stack ids made model
 * stacks, with their PCs' frames and Python frames, marks' name ids made strings), the final
 * state, the cuMemCreate handles held and mapped nowhere, the samples and annotations, and the
 * process's identity and options.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "live_reader.h"

typedef struct mk {
    cmh_live *l;
    cmh_snapshot *s;
    cmh_oatab made; /* recorder stack id + 1 -> model id */
    int nomem;
} mk;

typedef struct made_stack {
    uint64_t id;
    uint32_t model, pad;
} made_stack;

static uint32_t model_stack(void *arg, uint32_t rec)
{
    mk *m = arg;
    if (rec & BASE_STACK) return rec & ~BASE_STACK; /* the checkpoint's, copied with its ids */
    fstack *p = rec ? cmh_oa_find(&m->l->dict.stacks, (uint64_t)rec + 1) : NULL;
    if (!p) return 0;
    made_stack *d = cmh_oa_find(&m->made, (uint64_t)rec + 1);
    if (d) return d->model;
    cmh_snapshot *s = m->s;
    uint32_t ids[4096];
    for (uint32_t i = 0; i < p->depth; i++) {
        uint64_t pc = m->l->dict.pcs[p->first + i];
        if ((pc >> 48) == 0xC0DE) { /* a Python frame (CMH_FR_PYFRAME), as recover makes it */
            const lpyframe *py = cmh_oa_find(&m->l->dict.pyframes, (pc & 0xFFFFFFFFull) + 1);
            const char *file = py ? m->l->namebuf + py->off : "??";
            cmh_frame q = {0, 0, 0, py ? py->line : 0, -1};
            if (cmh_strtab_intern(&s->strings, file, py ? py->file_len : 2, &q.filename) ||
                cmh_strtab_intern(&s->strings, py ? file + py->file_len : "??", py ? py->name_len : 2, &q.name) ||
                cmh_snapshot_add_frame(s, &q, &ids[i])) {
                m->nomem = 1;
                return 0;
            }
            continue;
        }
        if (cmh_fstate_pc_frame(s, pc, &ids[i]) != CMH_OK) {
            m->nomem = 1;
            return 0;
        }
    }
    uint32_t id;
    if (cmh_snapshot_add_stack(s, ids, p->depth, &id) != CMH_OK || !(d = cmh_oa_get(&m->made, (uint64_t)rec + 1, NULL))) {
        m->nomem = 1;
        return 0;
    }
    d->model = id;
    return id;
}

static int name_string(cmh_live *l, cmh_snapshot *s, uint32_t rec, uint32_t *out)
{
    const fname *n = rec ? cmh_oa_find(&l->dict.names, (uint64_t)rec + 1) : NULL;
    return cmh_strtab_intern(&s->strings, n ? l->namebuf + n->off : "", n ? n->len : 0, out) == CMH_OK ? CMH_OK : CMH_ENOMEM;
}

int cmh_live_snapshot(cmh_live *l, cmh_snapshot *s)
{
    int rc = cmh_snapshot_init(s);
    if (rc) return rc;
    const cmh_flight_header *h = hdr(l);
    mk m = {l, s, {0}, 0};
    cmh_oa_init(&m.made, sizeof(made_stack));
    if (l->have_base && (rc = cmh_fstate_copy_dict(s, &l->base)) != CMH_OK) goto out;
    for (uint32_t i = 0; i < l->nmods; i++) {
        cmh_module md = {0, 0, l->mods[i].base, l->mods[i].size};
        if (cmh_strtab_intern(&s->strings, l->mods[i].path, strlen(l->mods[i].path), &md.path) ||
            cmh_strtab_intern(&s->strings, l->mods[i].build_id, strlen(l->mods[i].build_id), &md.build_id))
            goto nomem;
        int known = 0;
        for (uint32_t k = 0; k < s->nmodules && !known; k++) known = s->modules[k].base == md.base && s->modules[k].path == md.path;
        if (!known && cmh_snapshot_add_module(s, &md) != CMH_OK) goto nomem;
    }
    for (int k = 0; k < CMH_FLIGHT_SLOTS; k++) {
        ltrace *t = &l->tr[k];
        if (!t->present) continue;
        int32_t dev = k == CMH_FLIGHT_SLOTS - 1 ? -1 : k;
        if (cmh_snapshot_add_trace(s, dev, t->dropped_out, NULL) != CMH_OK) goto nomem;
        s->traces[s->ntraces - 1].dropped_ooms = t->ooms_out; /* counted as top counts them (live_records.c) */
        int64_t last = INT64_MIN;
        for (uint64_t i = 0; i < t->n; i++) {
            uint64_t at = t->head + i;
            cmh_entry_full e = t->ring[at >= t->alloc ? at - t->alloc : at];
            if (i >= t->nbase) {
                /* an entry overtaken in the file (seen_once) gets the time of the one before it, as recover gives */
                if (e.time_ns < last) e.time_ns = last;
                last = e.time_ns;
                e.stack = model_stack(&m, e.stack);
                if (e.action == CMH_ACT_MARK) {
                    if (name_string(l, s, (uint32_t)e.addr, &e.name) != CMH_OK) goto nomem;
                    e.addr = 0;
                }
            }
            if (m.nomem || cmh_snapshot_add_entry(s, &e) != CMH_OK) goto nomem;
        }
    }
    uint64_t orphans = 0;
    if ((rc = cmh_fstate_emit(&l->st, s, model_stack, &m, &orphans)) != CMH_OK || m.nomem) goto nomem;
    for (uint32_t i = 0; i < l->handles.cap; i++) { /* held and mapped nowhere now, as a dump lists them */
        const lvmm *v = cmh_oa_at(&l->handles, i);
        if (!v->handle || v->state != CMH_FR_VMM_UNMAPPED || v->device < -1 || v->device > 1023) continue;
        cmh_vmm_handle hv = {v->device, v->size, model_stack(&m, v->stack), v->time_ns};
        if (m.nomem || cmh_snapshot_add_vmm_unmapped(s, &hv) != CMH_OK) goto nomem;
    }
    for (uint32_t i = 0; i < l->nmaps; i++) { /* which handle each map mapped, as a dump has it */
        cmh_vmm_map mv = l->maps[i];
        mv.handle_stack = model_stack(&m, mv.handle_stack);
        if (m.nomem || cmh_snapshot_add_vmm_map(s, &mv) != CMH_OK) goto nomem;
    }
    for (uint32_t i = 0; i < l->nrels; i++) { /* every cuMemRelease, as a dump has them */
        cmh_vmm_release rv = l->rels[i];
        rv.stack = model_stack(&m, rv.stack);
        if (m.nomem || cmh_snapshot_add_vmm_release(s, &rv) != CMH_OK) goto nomem;
    }
    for (uint32_t i = 0; i < l->nsamples; i++) {
        uint32_t j = l->nsamples < MAX_SAMPLES ? i : (l->sample_head + i) % MAX_SAMPLES;
        if (cmh_snapshot_add_meminfo(s, &l->samples[j]) != CMH_OK) goto nomem;
    }
    for (uint32_t i = 0; l->have_base && i < l->base.nidents; i++) /* which GPU each device is: the checkpoint's, then the records' */
        if (cmh_snapshot_add_ident(s, &l->base.idents[i]) != CMH_OK) goto nomem;
    for (int d = 0; d < CMH_FLIGHT_SLOTS - 1; d++)
        if (l->idents[d].uuid[0] && cmh_snapshot_add_ident(s, &l->idents[d]) != CMH_OK) goto nomem;
    /* the recording threads' tids and names (a dump's and recover's thread_ids): the
     * checkpoint's, then the records' after it (the later says) */
    for (uint32_t i = 0; l->have_base && i < l->base.nthreads; i++)
        if (cmh_snapshot_add_thread(s, &l->base.threads[i]) != CMH_OK) goto nomem;
    for (uint32_t i = 0; i < l->nthreads; i++) {
        const lthread *x = &l->threads[i];
        cmh_thread_info ti = {x->thread, x->tid, 0};
        if (cmh_strtab_intern(&s->strings, x->name, strnlen(x->name, sizeof x->name), &ti.name) || cmh_snapshot_add_thread(s, &ti))
            goto nomem;
    }
    if (cmh_fchildren_emit(&l->kids, s, l->map, l->len < l->maplen ? l->len : l->maplen) != CMH_OK) goto nomem;
    for (uint32_t i = 0; i < l->nanns; i++) {
        cmh_annotation a = l->anns[i];
        if (l->have_base && a.time_ns <= l->base.dump_time_ns) continue;
        if (name_string(l, s, a.name, &a.name) != CMH_OK || cmh_snapshot_add_annotation(s, &a) != CMH_OK) goto nomem;
    }
    s->source = CMH_SRC_RECORDER;
    s->pid = h->pid;
    s->rank = l->info.rank;
    s->local_rank = l->info.local_rank;
    s->world_size = l->info.world_size;
    s->forked_from = h->forked_from > 0 && h->forked_from <= INT32_MAX ? h->forked_from : 0;
    snprintf(s->producer, sizeof s->producer, "%s", l->info.producer);
    if (cmh_strtab_intern(&s->strings, l->info.host, strlen(l->info.host), &s->hostname) ||
        cmh_strtab_intern(&s->strings, l->info.cmdline, strlen(l->info.cmdline), &s->cmdline))
        goto nomem;
    s->start_time_ns = h->start_ns;
    s->opt_enabled = h->enabled;
    s->opt_context = h->context;
    s->opt_max_entries = h->max_entries;
    s->opt_max_frames = h->max_frames;
    s->lost_events = l->info.lost + (l->have_base ? l->base.lost_events : 0);
    int64_t last = h->t1_ns;
    if (l->info.last_ns > last) last = l->info.last_ns;
    s->dump_time_ns = last;
    if (l->alive) {
        /* taken while it runs, as `snapshot PID` says (cmh_snapshot_running): top and the exporter
         * judge its steps as leaks judges that snapshot's, the step in flight partial */
        char t[160];
        snprintf(t, sizeof t, "was still running when this snapshot was taken from its flight record (%" PRIu64 " %s so far)", (uint64_t)s->nentries,
                 s->nentries == 1 ? "entry" : "entries");
        if (cmh_strtab_intern(&s->strings, t, strlen(t), &s->ending)) goto nomem;
    }
    rc = CMH_OK;
    goto out;
nomem:
    rc = CMH_ENOMEM;
out:
    cmh_oa_free(&m.made);
    if (rc != CMH_OK) cmh_snapshot_free(s);
    return rc;
}
