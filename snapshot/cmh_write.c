/*
 * cmh_write.c - the .cmh writer: a snapshot model to msgpack (docs/FORMAT.md).
 *
 * Positional arrays everywhere below the top-level map; trace entries delta-encode their address
 * and time against the previous entry of the same trace, which is what keeps an entry near
 * 16 bytes.  cmh_cmh_write_file makes the file atomic (snapshot/atomic.c).
 *
 * The bytes go through a 64 KiB buffer of our own on their way to the FILE*: the checksum
 * (CRC-32C, crc32c.h) is taken over each full buffer rather than over the few bytes of each
 * msgpack call, and the file ends with it, as the top-level map's last entry, "crc32c", after
 * "checksum": "crc32c" near the start says that it will (docs/FORMAT.md, "Checksum").
 */
#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "cumemhist/snapshot.h"

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void pack_key(msgpack_packer *pk, const char *k) { pack_str(pk, k); }

/* The sink between the packer and the FILE*: whole buffers are checksummed and written. */
typedef struct sink {
    FILE *fp;
    uint32_t crc;
    size_t n;
    unsigned char buf[1 << 16];
} sink;

static void sink_flush(sink *k)
{
    k->crc = cmh_crc32c(k->crc, k->buf, k->n);
    if (k->n) fwrite(k->buf, 1, k->n, k->fp); /* a failure shows as ferror(fp) */
    k->n = 0;
}

static int sink_write(void *data, const char *p, size_t len)
{
    sink *k = data;
    if (len > sizeof k->buf - k->n) {
        sink_flush(k);
        if (len > sizeof k->buf) { /* a long string: straight through */
            k->crc = cmh_crc32c(k->crc, p, len);
            fwrite(p, 1, len, k->fp);
            return 0;
        }
    }
    memcpy(k->buf + k->n, p, len);
    k->n += len;
    return 0;
}

/* The same packers as msgpack's own (its pack_template.h, included again with our names), writing
 * into a plain buffer through a cursor instead of a callback a field: the trace entries, millions
 * of them in a dump, are packed this way straight into the sink's buffer (pack_entry_fast), a
 * byte for byte the same encoding as msgpack_pack_*. */
#undef msgpack_pack_inline_func_cint
#undef msgpack_pack_inline_func_fixint
#define msgpack_pack_inline_func(name) static inline int cmh_fastpk##name
#define msgpack_pack_inline_func_cint(name) static inline int cmh_fastpk##name
#define msgpack_pack_inline_func_fixint(name) static inline int cmh_fastpk_fix##name
#define msgpack_pack_user unsigned char **
#define msgpack_pack_append_buffer(user, buf, len) \
    do { \
        memcpy(*(user), (buf), (len)); \
        *(user) += (len); \
        return 0; \
    } while (0)
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <msgpack/pack_template.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#undef msgpack_pack_inline_func_cint
#undef msgpack_pack_inline_func_fixint

/* An entry's first field packs its action (4 bits), whole-block flag (1 bit) and kind (3 bits). */
_Static_assert(CMH_ACT_COUNT <= 16, "the action takes the low 4 bits of an entry's code byte");
_Static_assert(CMH_KIND_COUNT <= 8, "the kind takes the top 3 bits of an entry's code byte");
_Static_assert(CMH_EF_WHOLE_BLOCK == 1, "the whole-block flag is bit 4 of the code byte");

/* the most bytes one entry packs into: an array head, 13 fields of 9 bytes at most */
#define ENTRY_MAX_BYTES (1 + 13 * 9)

/* Into the sink's buffer (room made first), with msgpack's own encoding (cmh_fastpk_*). */
static void pack_entry(sink *k, const cmh_entry_full *e, uint64_t *prev_addr, int64_t *prev_time)
{
    if (sizeof k->buf - k->n < ENTRY_MAX_BYTES) sink_flush(k);
    unsigned char *p = k->buf + k->n, *p0 = p;
    /* fields are positional: a later one brings those before it (most entries need the 6) */
    /* the 13th, the entry's flags beyond the code byte's (CMH_CMH_XF_*), only on an entry that
     * has one: a PyTorch action this version does not know, kept as a mark (a reader that
     * predates it reads the mark, as it read the pickle, with nothing else lost) */
    unsigned xf = CMH_ENTRY_UNKNOWN_ACTION(e) ? CMH_CMH_XF_UNKNOWN_ACTION : 0;
    int has_pool = xf || e->pool_id[0] || e->pool_id[1];
    int has_names = has_pool || e->name || e->compile_context || e->user_metadata;
    int has_req = has_names || e->requested != e->size;
    cmh_fastpk_array(&p, xf ? 13 : has_pool ? 12 : has_names ? 10 : has_req ? 7 : 6);
    cmh_fastpk_uint8(&p, (uint8_t)(e->action | (e->flags & 1) << 4 | (e->kind & 7) << 5));
    cmh_fastpk_int64(&p, (int64_t)(e->addr - *prev_addr));
    cmh_fastpk_uint64(&p, e->size);
    cmh_fastpk_uint64(&p, e->stream);
    cmh_fastpk_int64(&p, (int64_t)((uint64_t)e->time_ns - (uint64_t)*prev_time));
    cmh_fastpk_uint32(&p, e->stack);
    if (has_req) cmh_fastpk_uint64(&p, e->requested);
    if (has_names) {
        cmh_fastpk_uint32(&p, e->name);
        cmh_fastpk_uint32(&p, e->compile_context);
        cmh_fastpk_uint32(&p, e->user_metadata);
    }
    if (has_pool) {
        cmh_fastpk_uint64(&p, e->pool_id[0]);
        cmh_fastpk_uint64(&p, e->pool_id[1]);
    }
    if (xf) cmh_fastpk_uint8(&p, (uint8_t)xf);
    k->n += (size_t)(p - p0);
    *prev_addr = e->addr;
    *prev_time = e->time_ns;
}

/* A trace's thread runs [count, thread, ...] as its entries go by, up to RUNS_KEPT of them; past
 * that the writer asks the threads again in a second pass. */
#define RUNS_KEPT 4096
typedef struct runs_kept {
    uint32_t n, more, prev; /* n runs kept; more: a run past RUNS_KEPT began */
    uint32_t count[RUNS_KEPT], thread[RUNS_KEPT];
} runs_kept;

/* One snapshot as a map; PyTorch's part, if any, as a map of the same form inside it. */
static int write_map(msgpack_packer *pk_, const cmh_snapshot *s, const cmh_entry_source *src, int nested)
{
    msgpack_packer pk = *pk_;
    sink *k = pk.data; /* every packer here writes into a sink (write_source) */
    runs_kept *rk = s->ntraces ? malloc(sizeof *rk) : NULL;
    if (s->ntraces && !rk) return CMH_ENOMEM;
    int rc = CMH_OK;
    int with_torch = !nested && s->torch;
    int nproc = (s->producer[0] != 0) + (s->rank >= 0) + (s->local_rank >= 0) + (s->world_size >= 0) + (s->forked_from > 0) +
                (s->nchildren || s->children_more) + (s->children_more != 0);
    /* the top level also holds "checksum" and the final "crc32c" (cmh_cmh_write) */
    /* entries carry a pool id only when not (0, 0): whether the source said it of every entry is
     * said once, so that a pickle written back says 'pool_id' as the one read did */
    int pool_ids = (s->pt_fields & CMH_PT_POOL_ID) != 0;
    int lost = CMH_HISTORY_LOST(&s->history_lost) ? 1 : 0; /* what a recovery could not read */
    /* a PyTorch entry's keys the model has no field for (cmh_extra): kept, so that a merged
     * record exported back to a pickle says them as the pickle did (a streamed source has none) */
    uint64_t nx = 0;
    for (uint32_t i = 0; !src && i < s->nentries; i++) nx += cmh_entry_extra(s, &s->entries[i]) != 0;
    msgpack_pack_map(&pk, 11 + (nproc ? 1 : 0) + (s->kernels_status ? 1 : 0) + (s->nmeminfo ? 1 : 0) + (s->nvmm_unmapped ? 1 : 0) + (s->nvmm_maps ? 1 : 0) + (s->nvmm_released ? 1 : 0) + (s->nthreads ? 1 : 0) + (s->nidents ? 1 : 0) + (s->ndrv_errors ? 1 : 0) + lost + (with_torch ? 2 : 0) +
                              (nested ? 0 : 2) + pool_ids + (nx ? 1 : 0));

    pack_key(&pk, "format");
    pack_str(&pk, "cumemhist");
    pack_key(&pk, "version");
    msgpack_pack_uint32(&pk, with_torch ? 2 : 1); /* a version-1 reader reads what has no PyTorch part */
    if (!nested) { /* at the start, far from the end: a file whose end is cut or damaged still says it had a sum */
        pack_key(&pk, "checksum");
        pack_str(&pk, "crc32c");
    }

    pack_key(&pk, "meta");
    msgpack_pack_array(&pk, s->ending ? 12 : 11);
    msgpack_pack_uint8(&pk, s->source);
    msgpack_pack_int64(&pk, s->pid);
    msgpack_pack_uint32(&pk, s->hostname);
    msgpack_pack_uint32(&pk, s->cmdline);
    msgpack_pack_int64(&pk, s->start_time_ns);
    msgpack_pack_int64(&pk, s->dump_time_ns);
    msgpack_pack_uint8(&pk, s->opt_enabled);
    msgpack_pack_uint8(&pk, s->opt_context);
    msgpack_pack_uint64(&pk, s->opt_max_entries);
    msgpack_pack_int32(&pk, s->opt_max_frames);
    msgpack_pack_uint64(&pk, s->lost_events);
    if (s->ending) msgpack_pack_uint32(&pk, s->ending);

    if (nproc) { /* plain values, no string ids: a reader needs no table to know whose record it is */
        pack_key(&pk, "process");
        msgpack_pack_map(&pk, (size_t)nproc);
        if (s->producer[0]) {
            pack_key(&pk, "producer");
            pack_str(&pk, s->producer);
        }
        if (s->rank >= 0) pack_key(&pk, "rank"), msgpack_pack_int32(&pk, s->rank);
        if (s->local_rank >= 0) pack_key(&pk, "local_rank"), msgpack_pack_int32(&pk, s->local_rank);
        if (s->world_size >= 0) pack_key(&pk, "world_size"), msgpack_pack_int32(&pk, s->world_size);
        if (s->forked_from > 0) pack_key(&pk, "forked_from"), msgpack_pack_int64(&pk, s->forked_from);
        if (s->nchildren || s->children_more) { /* [[pid, path or nil], ...] */
            pack_key(&pk, "children");
            msgpack_pack_array(&pk, s->nchildren);
            for (uint32_t i = 0; i < s->nchildren; i++) {
                msgpack_pack_array(&pk, 2);
                msgpack_pack_int64(&pk, s->children[i].pid);
                if (s->children[i].path) pack_str(&pk, s->children[i].path);
                else msgpack_pack_nil(&pk);
            }
        }
        if (s->children_more) pack_key(&pk, "children_more"), msgpack_pack_uint32(&pk, s->children_more);
    }

    pack_key(&pk, "strings");
    msgpack_pack_array(&pk, s->strings.n);
    for (uint32_t i = 0; i < s->strings.n; i++) pack_str(&pk, s->strings.str[i]);

    pack_key(&pk, "modules");
    msgpack_pack_array(&pk, s->nmodules);
    for (uint32_t i = 0; i < s->nmodules; i++) {
        const cmh_module *m = &s->modules[i];
        msgpack_pack_array(&pk, 4);
        msgpack_pack_uint32(&pk, m->path);
        msgpack_pack_uint32(&pk, m->build_id);
        msgpack_pack_uint64(&pk, m->base);
        msgpack_pack_uint64(&pk, m->size);
    }

    pack_key(&pk, "frames");
    msgpack_pack_array(&pk, s->nframes);
    for (uint32_t i = 0; i < s->nframes; i++) {
        const cmh_frame *f = &s->frames[i];
        msgpack_pack_array(&pk, 5);
        msgpack_pack_uint64(&pk, f->pc);
        msgpack_pack_uint32(&pk, f->name);
        msgpack_pack_uint32(&pk, f->filename);
        msgpack_pack_int64(&pk, f->line);
        msgpack_pack_int32(&pk, f->module);
    }

    pack_key(&pk, "stacks");
    msgpack_pack_array(&pk, s->nstacks);
    for (uint32_t i = 0; i < s->nstacks; i++) {
        const cmh_stack *st = &s->stacks[i];
        msgpack_pack_array(&pk, st->count);
        for (uint32_t j = 0; j < st->count; j++) msgpack_pack_uint32(&pk, s->stack_frames[st->first + j]);
    }

    pack_key(&pk, "segments");
    msgpack_pack_array(&pk, s->nsegments);
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        msgpack_pack_array(&pk, 12);
        msgpack_pack_int32(&pk, g->device);
        msgpack_pack_uint8(&pk, g->kind);
        msgpack_pack_uint8(&pk, g->flags);
        msgpack_pack_uint8(&pk, g->pool);
        msgpack_pack_uint64(&pk, g->addr);
        msgpack_pack_uint64(&pk, g->size);
        msgpack_pack_uint64(&pk, g->stream);
        msgpack_pack_uint64(&pk, g->pool_id[0]);
        msgpack_pack_uint64(&pk, g->pool_id[1]);
        msgpack_pack_uint32(&pk, g->stack);
        msgpack_pack_int64(&pk, g->time_ns);
        msgpack_pack_array(&pk, g->nblocks);
        for (uint32_t j = 0; j < g->nblocks; j++) {
            const cmh_block *b = &s->blocks[g->first_block + j];
            msgpack_pack_array(&pk, 6);
            msgpack_pack_uint64(&pk, b->addr - g->addr);
            msgpack_pack_uint64(&pk, b->size);
            msgpack_pack_uint64(&pk, b->requested);
            msgpack_pack_uint8(&pk, b->state);
            msgpack_pack_uint32(&pk, b->stack);
            msgpack_pack_int64(&pk, b->time_ns);
        }
    }

    pack_key(&pk, "traces");
    msgpack_pack_array(&pk, s->ntraces);
    for (uint32_t i = 0; i < s->ntraces; i++) {
        const cmh_trace *t = &s->traces[i];
        const cmh_entry *te = src ? NULL : s->entries + t->first_entry;
#define THREAD_OF(j) (src ? src->thread(src->arg, i, (j)) : cmh_entry_thread(s, &te[j]))
        /* the threads, as runs [count, thread, count, thread, ...]: one pair per change of thread,
         * and only when some entry has a thread (the first one found says so) */
        int threads = 0;
        for (uint32_t j = 0; j < t->nentries && !threads; j++) threads = THREAD_OF(j) != 0;
        msgpack_pack_array(&pk, t->dropped_ooms ? 5 : threads ? 4 : 3);
        msgpack_pack_int32(&pk, t->device);
        msgpack_pack_uint64(&pk, t->dropped);
        msgpack_pack_array(&pk, t->nentries);
        uint64_t prev_addr = 0;
        int64_t prev_time = 0;
        rk->n = rk->more = rk->prev = 0;
        for (uint32_t j = 0; j < t->nentries; j++) {
            cmh_entry_full e;
            if (src) src->entry(src->arg, i, j, &e);
            else cmh_entry_get(s, &te[j], &e);
            pack_entry(k, &e, &prev_addr, &prev_time);
            if (j && e.thread == rk->prev && !rk->more) rk->count[rk->n - 1]++;
            else if (rk->n < RUNS_KEPT && !rk->more) rk->count[rk->n] = 1, rk->thread[rk->n++] = e.thread;
            else rk->more = 1;
            rk->prev = e.thread;
        }
        if (!threads && t->dropped_ooms) msgpack_pack_array(&pk, 0); /* (no runs: the place of the fifth) */
        if (threads && !rk->more) {
            msgpack_pack_array(&pk, 2 * rk->n);
            for (uint32_t r = 0; r < rk->n; r++) {
                msgpack_pack_uint32(&pk, rk->count[r]);
                msgpack_pack_uint32(&pk, rk->thread[r]);
            }
        } else if (threads) { /* more runs than kept: counted, then written, asking again */
            uint32_t runs = 0;
            for (uint32_t j = 0, prev = 0; j < t->nentries; j++) {
                uint32_t th = THREAD_OF(j);
                runs += !j || th != prev;
                prev = th;
            }
            msgpack_pack_array(&pk, 2 * runs);
            for (uint32_t j = 0, run = 0, th = t->nentries ? THREAD_OF(0) : 0; j < t->nentries; j++) {
                uint32_t next = j + 1 < t->nentries ? THREAD_OF(j + 1) : 0;
                run++;
                if (j + 1 == t->nentries || next != th) {
                    msgpack_pack_uint32(&pk, run);
                    msgpack_pack_uint32(&pk, th);
                    run = 0;
                }
                th = next;
            }
        }
        if (t->dropped_ooms) msgpack_pack_uint64(&pk, t->dropped_ooms);
#undef THREAD_OF
    }
    if (nx) { /* [[trace, entry in it, string id], ...]; an older reader skips it */
        pack_key(&pk, "entry_extras");
        msgpack_pack_array(&pk, (uint32_t)nx);
        for (uint32_t i = 0; i < s->ntraces; i++)
            for (uint32_t j = 0; j < s->traces[i].nentries; j++) {
                uint32_t x = cmh_entry_extra(s, &s->entries[s->traces[i].first_entry + j]);
                if (!x) continue;
                msgpack_pack_array(&pk, 3);
                msgpack_pack_uint32(&pk, i);
                msgpack_pack_uint32(&pk, j);
                msgpack_pack_uint32(&pk, x);
            }
    }
    if (pool_ids) {
        pack_key(&pk, "entry_pool_ids");
        msgpack_pack_uint8(&pk, 1);
    }

    pack_key(&pk, "annotations");
    msgpack_pack_array(&pk, s->nannotations);
    for (uint32_t i = 0; i < s->nannotations; i++) {
        const cmh_annotation *a = &s->annotations[i];
        msgpack_pack_array(&pk, 4);
        msgpack_pack_uint32(&pk, a->name);
        msgpack_pack_uint8(&pk, a->stage);
        msgpack_pack_int32(&pk, a->device);
        msgpack_pack_int64(&pk, a->time_ns);
    }

    pack_key(&pk, "settings");
    msgpack_pack_array(&pk, s->nsettings);
    for (uint32_t i = 0; i < s->nsettings; i++) {
        msgpack_pack_array(&pk, 3);
        msgpack_pack_uint32(&pk, s->settings[i].key);
        msgpack_pack_uint32(&pk, s->settings[i].value);
        msgpack_pack_uint8(&pk, s->settings[i].type);
    }
    if (s->kernels_status) { /* [status, dropped, [[name, device, stream, start_delta, duration, gx, gy, gz,
                                 bx, by, bz, registers, shared, correlation], ...]] */
        pack_key(&pk, "kernels");
        msgpack_pack_array(&pk, 3);
        msgpack_pack_uint32(&pk, s->kernels_status);
        msgpack_pack_uint64(&pk, s->kernels_dropped);
        msgpack_pack_array(&pk, s->nkernels);
        int64_t prev = 0;
        for (uint32_t i = 0; i < s->nkernels; i++) {
            const cmh_kernel *k = &s->kernels[i];
            msgpack_pack_array(&pk, 14);
            msgpack_pack_uint32(&pk, k->name);
            msgpack_pack_int32(&pk, k->device);
            msgpack_pack_uint32(&pk, k->stream);
            msgpack_pack_int64(&pk, (int64_t)((uint64_t)k->start_ns - (uint64_t)prev)); /* deltas wrap, as they are read */
            msgpack_pack_int64(&pk, (int64_t)((uint64_t)k->end_ns - (uint64_t)k->start_ns));
            for (int j = 0; j < 3; j++) msgpack_pack_int32(&pk, k->grid[j]);
            for (int j = 0; j < 3; j++) msgpack_pack_int32(&pk, k->block[j]);
            msgpack_pack_uint32(&pk, k->registers);
            msgpack_pack_uint32(&pk, k->shared_bytes);
            msgpack_pack_uint32(&pk, k->correlation);
            prev = k->start_ns;
        }
    }
    if (s->nmeminfo) { /* [[device, time_ns, free, total(, thread)], ...] */
        pack_key(&pk, "meminfo");
        msgpack_pack_array(&pk, s->nmeminfo);
        for (uint32_t i = 0; i < s->nmeminfo; i++) {
            const cmh_meminfo *m = &s->meminfo[i];
            msgpack_pack_array(&pk, m->thread ? 5 : 4); /* (a reader before the thread skips a 5th field) */
            msgpack_pack_int32(&pk, m->device);
            msgpack_pack_int64(&pk, m->time_ns);
            msgpack_pack_uint64(&pk, m->free);
            msgpack_pack_uint64(&pk, m->total);
            if (m->thread) msgpack_pack_uint32(&pk, m->thread);
        }
    }
    if (s->nvmm_unmapped) { /* [[device, size, stack, time_ns], ...] */
        pack_key(&pk, "vmm_unmapped");
        msgpack_pack_array(&pk, s->nvmm_unmapped);
        for (uint32_t i = 0; i < s->nvmm_unmapped; i++) {
            const cmh_vmm_handle *h = &s->vmm_unmapped[i];
            msgpack_pack_array(&pk, 4);
            msgpack_pack_int32(&pk, h->device);
            msgpack_pack_uint64(&pk, h->size);
            msgpack_pack_uint32(&pk, h->stack);
            msgpack_pack_int64(&pk, h->time_ns);
        }
    }
    if (s->nvmm_maps) { /* [[device, addr, size, time_ns, handle, handle_size, handle_stack, handle_time_ns], ...] */
        pack_key(&pk, "vmm_maps");
        msgpack_pack_array(&pk, s->nvmm_maps);
        for (uint32_t i = 0; i < s->nvmm_maps; i++) {
            const cmh_vmm_map *m = &s->vmm_maps[i];
            msgpack_pack_array(&pk, 8);
            msgpack_pack_int32(&pk, m->device);
            msgpack_pack_uint64(&pk, m->addr);
            msgpack_pack_uint64(&pk, m->size);
            msgpack_pack_int64(&pk, m->time_ns);
            msgpack_pack_uint64(&pk, m->handle);
            msgpack_pack_uint64(&pk, m->handle_size);
            msgpack_pack_uint32(&pk, m->handle_stack);
            msgpack_pack_int64(&pk, m->handle_time_ns);
        }
    }
    if (s->nvmm_released) { /* [[device, handle, size, stack, time_ns, release_ns], ...] */
        pack_key(&pk, "vmm_released");
        msgpack_pack_array(&pk, s->nvmm_released);
        for (uint32_t i = 0; i < s->nvmm_released; i++) {
            const cmh_vmm_release *r = &s->vmm_released[i];
            msgpack_pack_array(&pk, 6);
            msgpack_pack_int32(&pk, r->device);
            msgpack_pack_uint64(&pk, r->handle);
            msgpack_pack_uint64(&pk, r->size);
            msgpack_pack_uint32(&pk, r->stack);
            msgpack_pack_int64(&pk, r->time_ns);
            msgpack_pack_int64(&pk, r->release_ns);
        }
    }
    if (s->ndrv_errors) { /* [[call, result, count, [[addr, size, thread, time_ns, stack], ...]], ...] */
        pack_key(&pk, "driver_errors");
        msgpack_pack_array(&pk, s->ndrv_errors);
        for (uint32_t i = 0; i < s->ndrv_errors; i++) {
            const cmh_drv_error *e = &s->drv_errors[i];
            msgpack_pack_array(&pk, 4);
            pack_str(&pk, e->call);
            msgpack_pack_int32(&pk, e->result);
            msgpack_pack_uint64(&pk, e->count);
            msgpack_pack_array(&pk, e->nsites);
            for (uint32_t j = 0; j < e->nsites; j++) {
                const cmh_drv_error_site *w = &e->sites[j];
                msgpack_pack_array(&pk, 5);
                msgpack_pack_uint64(&pk, w->addr);
                msgpack_pack_uint64(&pk, w->size);
                msgpack_pack_uint32(&pk, w->thread);
                msgpack_pack_int64(&pk, w->time_ns);
                msgpack_pack_uint32(&pk, w->stack);
            }
        }
    }
    if (lost) { /* [cut_bytes, file_bytes, read_to, torn, damaged, refused] */
        const cmh_history_lost *h = &s->history_lost;
        pack_key(&pk, "history_lost");
        msgpack_pack_array(&pk, 6);
        msgpack_pack_uint64(&pk, h->cut_bytes);
        msgpack_pack_uint64(&pk, h->file_bytes);
        msgpack_pack_uint64(&pk, h->read_to);
        msgpack_pack_uint64(&pk, h->torn);
        msgpack_pack_uint64(&pk, h->damaged);
        msgpack_pack_uint64(&pk, h->refused);
    }
    if (s->nidents) { /* [[device, uuid, name, pci_bus], ...], plain strings */
        pack_key(&pk, "device_ids");
        msgpack_pack_array(&pk, s->nidents);
        for (uint32_t i = 0; i < s->nidents; i++) {
            const cmh_device_ident *d = &s->idents[i];
            msgpack_pack_array(&pk, 4);
            msgpack_pack_int32(&pk, d->device);
            pack_str(&pk, d->uuid);
            pack_str(&pk, d->name);
            pack_str(&pk, d->pci_bus);
        }
    }
    if (s->nthreads) { /* [[thread, tid, name], ...] */
        pack_key(&pk, "thread_ids");
        msgpack_pack_array(&pk, s->nthreads);
        for (uint32_t i = 0; i < s->nthreads; i++) {
            const cmh_thread_info *t = &s->threads[i];
            msgpack_pack_array(&pk, 3);
            msgpack_pack_uint32(&pk, t->thread);
            msgpack_pack_int64(&pk, t->tid);
            msgpack_pack_uint32(&pk, t->name);
        }
    }
    if (with_torch) { /* last: the reader has everything of ours by then */
        pack_key(&pk, "torch_clock_ns");
        msgpack_pack_int64(&pk, s->torch_clock_ns);
        pack_key(&pk, "torch");
        if (write_map(&pk, s->torch, NULL, 1) != CMH_OK) rc = CMH_ENOMEM;
    }
    free(rk);
    return rc;
}

static int write_source(const cmh_snapshot *s, const cmh_entry_source *src, FILE *fp)
{
    sink *k = malloc(sizeof *k);
    if (!k) return CMH_ENOMEM;
    k->fp = fp;
    k->crc = 0;
    k->n = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, k, sink_write);
    if (write_map(&pk, s, src, 0) != CMH_OK) {
        free(k);
        return CMH_ENOMEM;
    }
    /* the last entry: "crc32c" and the sum of every byte before its own four, in the fixed
     * 5-byte form (0xce, big-endian) so that a reader finds it at the end without parsing */
    static const unsigned char key[] = {0xa6, 'c', 'r', 'c', '3', '2', 'c', 0xce};
    sink_write(k, (const char *)key, sizeof key);
    sink_flush(k);
    unsigned char v[4] = {(unsigned char)(k->crc >> 24), (unsigned char)(k->crc >> 16), (unsigned char)(k->crc >> 8),
                          (unsigned char)k->crc};
    fwrite(v, 1, 4, fp);
    free(k);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}

int cmh_cmh_write(const cmh_snapshot *s, FILE *fp) { return write_source(s, NULL, fp); }

int cmh_cmh_write_file_source(const cmh_snapshot *s, const cmh_entry_source *src, const char *path, char *err, size_t errlen)
{
    cmh_atomic a;
    FILE *fp = cmh_output_open(&a, path, CMH_OUT_AS(CMH_KIND_CMH), err, errlen); /* (replaces only a .cmh) */
    if (!fp) return CMH_EIO;
    if (write_source(s, src, fp) != CMH_OK && !ferror(fp)) { /* the writer failed, not the stream */
        cmh_atomic_abort(&a);
        snprintf(err, errlen, "%s: out of memory", path);
        return CMH_ENOMEM;
    }
    return cmh_atomic_commit(&a, err, errlen);
}

int cmh_cmh_write_file(const cmh_snapshot *s, const char *path, char *err, size_t errlen)
{
    return cmh_cmh_write_file_source(s, NULL, path, err, errlen);
}
