/*
 * pickle_side_write.c - the `cumemhist` dict of an exported pickle: all the model holds that
 * PyTorch's snapshot schema has no place for.
 *
 * PyTorch's readers (memory_viz, torch.cuda._memory_viz) ignore a top-level key they do not
 * know, so pool samples, retried OOMs, marks, threads, the module map, VMM handles, failed
 * driver calls, what a cut flight record lost, which GPU a device was, ... travel there, and
 * pickle_side_read.c puts them back: a .cmh read, exported and read again is the same record.
 * It lives apart from pickle_write.c, which writes PyTorch's own schema with PyTorch's keys and
 * order, because it grows with every fact the recorder learns to keep.  Items are tuples of
 * fixed shape, each named next to its key; a key is written only when it says something, so a
 * reader of an older export reads its absence as "nothing of that kind".
 */
#include <stdlib.h>
#include <string.h>

#include "pickle_writer.h"

/* The recording thread of each device's entries, for a leak judged per thread: one list per
 * device, [count, thread, count, thread, ...] run-length over the entries a reader keeps (not
 * the implied ones, nor marks), as the .cmh's `threads`.  Nothing when no thread is known. */
static void w_ours_threads(pw *w, const cmh_snapshot *s, int ndev)
{
    int any = 0;
    for (uint32_t i = 0; i < s->nxsets && !any; i++) any = s->xsets[i].thread != 0; /* entries carry it in their set */
    if (!any) return;
    uint32_t *rl = malloc(2 * ((size_t)s->nentries + 1) * sizeof *rl); /* count, thread, ... */
    if (!rl) {
        w->failed = w->nomem = 1;
        return;
    }
    w_key(w, W_THREADS);
    op(w, ']');
    for (int d = 0; d < ndev; d++) {
        uint32_t n = 0;
        for (uint32_t t = 0; t < s->ntraces; t++) {
            if (s->traces[t].device != d) continue;
            for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                if (e->action >= CMH_ACT_MARK || (e->flags & CMH_EF_IMPLIED)) continue;
                uint32_t th = cmh_entry_thread(s, e);
                if (n && rl[n - 1] == th) rl[n - 2]++;
                else rl[n++] = 1, rl[n++] = th;
            }
        }
        batch_begin(w, (uint32_t)d, (uint32_t)ndev);
        op(w, ']');
        for (uint32_t k = 0; k < n; k++) {
            batch_begin(w, k, n);
            w_int(w, rl[k]);
            batch_end(w, k, n, 0);
        }
        batch_end(w, (uint32_t)d, (uint32_t)ndev, 0);
    }
    free(rl);
}

/* The module map and each written frame's module, by reference to its frame dict: who called
 * the driver (a block's owner) is read from it.  Nothing without a module map. */
static void w_ours_modules(pw *w, const cmh_snapshot *s)
{
    if (!s->nmodules) return;
    w_key(w, W_MODULES);
    op(w, ']');
    for (uint32_t i = 0; i < s->nmodules; i++) {
        const cmh_module *md = &s->modules[i];
        batch_begin(w, i, s->nmodules);
        op(w, '(');
        w_sid(w, s, md->path);
        w_sid(w, s, md->build_id);
        w_int(w, (int64_t)md->base);
        w_int(w, (int64_t)md->size);
        op(w, 't');
        batch_end(w, i, s->nmodules, 0);
    }
    uint32_t n = 0, k = 0;
    for (uint32_t i = 0; i < s->nframes; i++)
        n += w->frame_memo[i] && s->frames[i].module >= 0 && (uint32_t)s->frames[i].module < s->nmodules;
    w_key(w, W_FRAME_MODULES);
    op(w, ']');
    for (uint32_t i = 0; i < s->nframes; i++) {
        if (!w->frame_memo[i] || s->frames[i].module < 0 || (uint32_t)s->frames[i].module >= s->nmodules) continue;
        batch_begin(w, k, n);
        op(w, '(');
        get(w, w->frame_memo[i]);
        w_int(w, s->frames[i].module);
        op(w, 't');
        batch_end(w, k, n, 0);
        k++;
    }
}

void pkw_side(pw *w, const cmh_snapshot *s, int ndev, int has_settings, const cmh_pickle_mark *marks, uint32_t nmarks)
{
    w_key(w, W_CUMEMHIST);
    op(w, '}');
    op(w, '(');
    w_key(w, W_SOURCE);
    str_body(w, (s->pt_fields & CMH_PT_FROM_RECORDER) ? "recorder" : "pytorch");
    boundary(w);
    w_key(w, W_PID);
    w_int(w, s->pid);
    /* the recorder's --context (recorder.h): with "all" a free entry's frames are the free's own
     * line, never its block's allocation site (cmh_frees_carry_own_stacks) */
    if (s->pt_fields & CMH_PT_FROM_RECORDER) {
        w_key(w, W_CONTEXT);
        w_int(w, s->opt_context);
    }
    w_key(w, W_HOST);
    str_body(w, cmh_str(s, s->hostname));
    boundary(w);
    w_key(w, W_CMDLINE);
    str_body(w, cmh_str(s, s->cmdline));
    boundary(w);
    w_key(w, W_DROPPED);
    op(w, ']');
    for (int d = 0; d < ndev; d++) {
        uint64_t dr = 0;
        for (uint32_t t = 0; t < s->ntraces; t++)
            if (s->traces[t].device == d) dr += s->traces[t].dropped;
        batch_begin(w, (uint32_t)d, (uint32_t)ndev);
        w_int(w, (int64_t)dr);
        batch_end(w, (uint32_t)d, (uint32_t)ndev, 0);
    }
    /* stream-ordered pool samples, which no PyTorch action carries: (device, position in
     * that device's written trace, pool, reserved, used, time_us) */
    uint32_t nps = 0;
    for (uint32_t i = 0; i < s->nentries; i++) nps += s->entries[i].action == CMH_ACT_POOL_SAMPLE;
    if (nps) {
        w_key(w, W_POOL_SAMPLES);
        op(w, ']');
        uint32_t k = 0;
        for (int d = 0; d < ndev; d++) {
            int64_t pos = 0;
            for (uint32_t t = 0; t < s->ntraces; t++) {
                if (s->traces[t].device != d) continue;
                for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                    const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                    if (pkw_kept_entry(e)) pos++; /* what a reader keeps */
                    if (e->action != CMH_ACT_POOL_SAMPLE) continue;
                    batch_begin(w, k, nps);
                    op(w, '(');
                    w_int(w, d);
                    w_int(w, pos);
                    w_int(w, (int64_t)cmh_entry_addr(s, e));
                    w_int(w, (int64_t)cmh_entry_size(s, e));
                    w_int(w, (int64_t)cmh_entry_requested(s, e));
                    w_int(w, cmh_entry_time(s, e) / 1000);
                    op(w, 't');
                    batch_end(w, k, nps, 0);
                    k++;
                }
            }
        }
        /* what else the model holds of each sample, in the same order (a separate list, so a
         * reader that knows only pool_samples still reads them): (stream: the CMH_POOL_* bits,
         * flags: CMH_EF_AT_DUMP, thread, frames: cuMemPoolCreate's stack) */
        w_key(w, W_POOL_SAMPLE_TAGS);
        op(w, ']');
        k = 0;
        for (int d = 0; d < ndev; d++)
            for (uint32_t t = 0; t < s->ntraces; t++) {
                if (s->traces[t].device != d) continue;
                for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                    const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                    if (e->action != CMH_ACT_POOL_SAMPLE) continue;
                    batch_begin(w, k, nps);
                    op(w, '(');
                    w_int(w, (int64_t)cmh_entry_stream(s, e));
                    w_int(w, e->flags);
                    w_int(w, cmh_entry_thread(s, e));
                    pkw_frames(w, s, e->stack);
                    op(w, 't');
                    batch_end(w, k, nps, 0);
                    k++;
                }
            }
    }
    /* OOMs the allocator retried with success (CMH_EF_RETRIED), which PyTorch's trace has no
     * 'oom' for: (device, position as a pool sample's, order among the device's pool samples
     * and these, size, device_free (None: not known), stream, time_us, kind, frames) */
    uint32_t nro = 0;
    for (uint32_t i = 0; i < s->nentries; i++) nro += cmh_entry_retried_oom(&s->entries[i]);
    if (nro) {
        w_key(w, W_RETRIED_OOMS);
        op(w, ']');
        uint32_t k = 0;
        for (int d = 0; d < ndev; d++) {
            int64_t pos = 0, order = 0;
            for (uint32_t t = 0; t < s->ntraces; t++) {
                if (s->traces[t].device != d) continue;
                for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                    const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                    if (pkw_kept_entry(e)) pos++;
                    if (e->action == CMH_ACT_POOL_SAMPLE) order++;
                    if (!cmh_entry_retried_oom(e)) continue;
                    batch_begin(w, k, nro);
                    op(w, '(');
                    w_int(w, d);
                    w_int(w, pos);
                    w_int(w, order++);
                    w_int(w, (int64_t)cmh_entry_size(s, e));
                    if (cmh_entry_addr(s, e) == CMH_DEVICE_FREE_UNKNOWN) op(w, 'N');
                    else w_int(w, (int64_t)cmh_entry_addr(s, e));
                    w_int(w, (int64_t)cmh_entry_stream(s, e));
                    w_int(w, cmh_entry_time(s, e) / 1000);
                    w_int(w, e->kind);
                    pkw_frames(w, s, e->stack);
                    op(w, 't');
                    batch_end(w, k, nro, 0);
                    k++;
                }
            }
        }
    }
    /* the frees' frames written empty in device_traces (cmh_entry_free_stack_aside): (device, which of
     * the device's segment_free and segment_unmap entries, counted from 0, frames) */
    uint32_t nff = 0;
    for (uint32_t t = 0; t < s->ntraces; t++)
        for (uint32_t i = 0; s->traces[t].device >= 0 && i < s->traces[t].nentries; i++) nff += cmh_entry_free_stack_aside(s, &s->traces[t], i);
    if (nff) {
        w_key(w, W_FREE_FRAMES);
        op(w, ']');
        uint32_t k = 0;
        for (int d = 0; d < ndev; d++) {
            int64_t nth = 0;
            for (uint32_t t = 0; t < s->ntraces; t++) {
                if (s->traces[t].device != d) continue;
                for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                    const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                    if (e->action != CMH_ACT_SEGMENT_FREE && e->action != CMH_ACT_SEGMENT_UNMAP) continue;
                    if (cmh_entry_free_stack_aside(s, &s->traces[t], i)) {
                        batch_begin(w, k, nff);
                        op(w, '(');
                        w_int(w, d);
                        w_int(w, nth);
                        pkw_frames(w, s, e->stack);
                        op(w, 't');
                        batch_end(w, k, nff, 0);
                        k++;
                    }
                    nth++;
                }
            }
        }
    }
    /* what the driver said of each device's memory (cuMemGetInfo: owners' "not recorded" row),
     * (device, time_ns, free, total, thread), and the record's start and dump, which owners
     * and the reports place those samples and the end by: in nanoseconds, as the .cmh has them */
    if (s->nmeminfo) {
        w_key(w, W_MEMINFO);
        op(w, ']');
        for (uint32_t i = 0; i < s->nmeminfo; i++) {
            const cmh_meminfo *m = &s->meminfo[i];
            batch_begin(w, i, s->nmeminfo);
            op(w, '(');
            w_int(w, m->device);
            w_int(w, m->time_ns);
            w_int(w, (int64_t)m->free);
            w_int(w, (int64_t)m->total);
            w_int(w, m->thread);
            op(w, 't');
            batch_end(w, i, s->nmeminfo, 0);
        }
    }
    /* the physical memory of cuMemCreate handles (the .cmh's vmm_unmapped and vmm_maps), which
     * the trace's segment_map entries do not say: owners and peak charge a handle's whole size
     * once however many ranges map it, and a handle held but mapped nowhere at the end.
     * vmm_unmapped: (device, size, time_ns, frames); vmm_maps, in the order made: (device,
     * addr, size, time_ns, handle, handle_size, handle_time_ns, frames of cuMemCreate) */
    if (s->nvmm_unmapped) {
        w_key(w, W_VMM_UNMAPPED);
        op(w, ']');
        for (uint32_t i = 0; i < s->nvmm_unmapped; i++) {
            const cmh_vmm_handle *h = &s->vmm_unmapped[i];
            batch_begin(w, i, s->nvmm_unmapped);
            op(w, '(');
            w_int(w, h->device);
            w_int(w, (int64_t)h->size);
            w_int(w, h->time_ns);
            pkw_frames(w, s, h->stack < s->nstacks ? h->stack : 0);
            op(w, 't');
            batch_end(w, i, s->nvmm_unmapped, 0);
        }
    }
    if (s->nvmm_maps) {
        w_key(w, W_VMM_MAPS);
        op(w, ']');
        for (uint32_t i = 0; i < s->nvmm_maps; i++) {
            const cmh_vmm_map *v = &s->vmm_maps[i];
            batch_begin(w, i, s->nvmm_maps);
            op(w, '(');
            w_int(w, v->device);
            w_int(w, (int64_t)v->addr);
            w_int(w, (int64_t)v->size);
            w_int(w, v->time_ns);
            w_int(w, (int64_t)v->handle);
            w_int(w, (int64_t)v->handle_size);
            w_int(w, v->handle_time_ns);
            pkw_frames(w, s, v->handle_stack < s->nstacks ? v->handle_stack : 0);
            op(w, 't');
            batch_end(w, i, s->nvmm_maps, 0);
        }
    }
    /* every cuMemRelease (the .cmh's vmm_released): a handle counts until its release, unmapped
     * or never mapped in between.  (device, handle, size, time_ns, release_ns, frames of cuMemCreate) */
    if (s->nvmm_released) {
        w_key(w, W_VMM_RELEASED);
        op(w, ']');
        for (uint32_t i = 0; i < s->nvmm_released; i++) {
            const cmh_vmm_release *v = &s->vmm_released[i];
            batch_begin(w, i, s->nvmm_released);
            op(w, '(');
            w_int(w, v->device);
            w_int(w, (int64_t)v->handle);
            w_int(w, (int64_t)v->size);
            w_int(w, v->time_ns);
            w_int(w, v->release_ns);
            pkw_frames(w, s, v->stack < s->nstacks ? v->stack : 0);
            op(w, 't');
            batch_end(w, i, s->nvmm_released, 0);
        }
    }
    /* what a recovery from a cut flight record could not read (the .cmh's history_lost): the
     * reports over the pickle say it, and `leaks --fail-on-leak` fails on it, as over the .cmh.
     * (cut_bytes, file_bytes, read_to, torn, damaged, refused) */
    if (CMH_HISTORY_LOST(&s->history_lost)) {
        const cmh_history_lost *h = &s->history_lost;
        w_key(w, W_HISTORY_LOST);
        op(w, '(');
        w_int(w, (int64_t)h->cut_bytes);
        w_int(w, (int64_t)h->file_bytes);
        w_int(w, (int64_t)h->read_to);
        w_int(w, (int64_t)h->torn);
        w_int(w, (int64_t)h->damaged);
        w_int(w, (int64_t)h->refused);
        op(w, 't');
    }
    /* driver calls that failed other than OOM (the .cmh's driver_errors, which no trace entry
     * says): (call, result, count, [(addr, size, thread, time_ns, frames), ...]) */
    if (s->ndrv_errors) {
        w_key(w, W_DRIVER_ERRORS);
        op(w, ']');
        for (uint32_t i = 0; i < s->ndrv_errors; i++) {
            const cmh_drv_error *e = &s->drv_errors[i];
            uint32_t ns = e->nsites < CMH_DRV_ERROR_SITES ? e->nsites : CMH_DRV_ERROR_SITES;
            batch_begin(w, i, s->ndrv_errors);
            op(w, '(');
            char call[sizeof e->call + 1];
            snprintf(call, sizeof call, "%.*s", (int)sizeof e->call, e->call);
            str_body(w, call);
            boundary(w);
            w_int(w, e->result);
            w_int(w, (int64_t)e->count);
            op(w, ']');
            for (uint32_t j = 0; j < ns; j++) {
                const cmh_drv_error_site *st = &e->sites[j];
                batch_begin(w, j, ns);
                op(w, '(');
                w_int(w, (int64_t)st->addr);
                w_int(w, (int64_t)st->size);
                w_int(w, st->thread);
                w_int(w, st->time_ns);
                pkw_frames(w, s, st->stack < s->nstacks ? st->stack : 0);
                op(w, 't');
                batch_end(w, j, ns, 0);
            }
            op(w, 't');
            batch_end(w, i, s->ndrv_errors, 0);
        }
    }
    /* which GPU each device number was (the .cmh's device_ids: `ranks`, sqlite's devices):
     * (device, uuid, name, pci_bus), "" where not known */
    if (s->nidents) {
        w_key(w, W_DEVICE_IDS);
        op(w, ']');
        for (uint32_t i = 0; i < s->nidents; i++) {
            const cmh_device_ident *d = &s->idents[i];
            char buf[sizeof d->name + 1];
            batch_begin(w, i, s->nidents);
            op(w, '(');
            w_int(w, d->device);
            snprintf(buf, sizeof buf, "%.*s", (int)sizeof d->uuid, d->uuid);
            str_body(w, buf);
            boundary(w);
            snprintf(buf, sizeof buf, "%.*s", (int)sizeof d->name, d->name);
            str_body(w, buf);
            boundary(w);
            snprintf(buf, sizeof buf, "%.*s", (int)sizeof d->pci_bus, d->pci_bus);
            str_body(w, buf);
            boundary(w);
            op(w, 't');
            batch_end(w, i, s->nidents, 0);
        }
    }
    /* which process of a job it was, and how it ended (every report's first lines) */
    if (s->rank >= 0 || s->local_rank >= 0 || s->world_size >= 0 || s->forked_from > 0) {
        w_key(w, W_PROCESS); /* (rank, local_rank, world_size, forked_from): -1, 0 unknown */
        op(w, '(');
        w_int(w, s->rank);
        w_int(w, s->local_rank);
        w_int(w, s->world_size);
        w_int(w, s->forked_from);
        op(w, 't');
    }
    uint64_t any_dooms = 0;
    for (uint32_t t = 0; t < s->ntraces; t++) any_dooms |= s->traces[t].dropped_ooms;
    if (any_dooms) { /* per device, as dropped: the OOM entries among the dropped ones */
        w_key(w, W_DROPPED_OOMS);
        op(w, ']');
        for (int d = 0; d < ndev; d++) {
            uint64_t n = 0;
            for (uint32_t t = 0; t < s->ntraces; t++)
                if (s->traces[t].device == d) n += s->traces[t].dropped_ooms;
            batch_begin(w, (uint32_t)d, (uint32_t)ndev);
            w_int(w, (int64_t)n);
            batch_end(w, (uint32_t)d, (uint32_t)ndev, 0);
        }
    }
    if (s->ending) {
        w_key(w, W_ENDING);
        w_sid(w, s, s->ending);
    }
    if (s->start_time_ns) {
        w_key(w, W_START_NS);
        w_int(w, s->start_time_ns);
    }
    if (s->dump_time_ns) {
        w_key(w, W_DUMP_NS);
        w_int(w, s->dump_time_ns);
    }
    /* the record's clock origin, in ns as the .cmh has it: its earliest event may be one the
     * pickle leaves out (pinned host memory), and every "+N" time counts from it (a device's
     * peak read +571 us from the .cmh, +418 us from its pickle) */
    int64_t origin = cmh_snapshot_clock_origin(s);
    if (origin) {
        w_key(w, W_CLOCK_ORIGIN_NS);
        w_int(w, origin);
    }
    /* the recorder's word that its dump read every pool (replay.c, pools_stale_end), a setting
     * that allocator_settings carries only where the record has PyTorch's */
    for (uint32_t i = 0; !has_settings && i < s->nsettings; i++)
        if (!strcmp(cmh_str(s, s->settings[i].key), "pools_read_at_dump") && !strcmp(cmh_str(s, s->settings[i].value), "1")) {
            w_key(w, W_POOLS_READ_AT_DUMP);
            w_int(w, 1);
            break;
        }
    w_ours_threads(w, s, ndev);
    if (s->nthreads) { /* (thread, tid, name): which thread a number is */
        w_key(w, W_THREAD_IDS);
        op(w, ']');
        for (uint32_t i = 0; i < s->nthreads; i++) {
            batch_begin(w, i, s->nthreads);
            op(w, '(');
            w_int(w, s->threads[i].thread);
            w_int(w, s->threads[i].tid);
            w_sid(w, s, s->threads[i].name);
            op(w, 't');
            batch_end(w, i, s->nthreads, 0);
        }
    }
    if (nmarks) { /* (device, position, name, time_us, thread), in trace order */
        w_key(w, W_MARKS);
        op(w, ']');
        for (uint32_t i = 0; i < nmarks; i++) {
            batch_begin(w, i, nmarks);
            op(w, '(');
            w_int(w, marks[i].device);
            w_int(w, (int64_t)marks[i].pos);
            w_sid(w, s, marks[i].name);
            w_int(w, marks[i].time_ns / 1000);
            w_int(w, marks[i].thread);
            op(w, 't');
            batch_end(w, i, nmarks, 0);
        }
    }
    w_ours_modules(w, s);
    op(w, 'u');
}
