/*
 * json.c - a snapshot as JSON, in the shape of PyTorch's snapshot dict (the same one the
 * memory_viz export writes), plus a "cumemhist" object with what that schema has no place for.
 * Every integer is written exactly (viz/jsonw.c).
 *
 * Stacks are interned as in the .cmh (schema 2, the default): each segment, block and trace
 * entry carries "stack", an index into the top-level "stacks" (lists of indexes into "frames",
 * innermost first); stack 0 is the empty one.  With CMH_JSON_INLINE_FRAMES each carries its
 * own "frames" list instead, as PyTorch's dict does (schema 1): several times larger.
 */
#include <inttypes.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/owners.h"
#include "cumemhist/reports.h"
#include "cumemhist/sites.h"
#include "cumemhist/viz.h"
#include "jsonw.h"

static void jframe(cmh_jw *w, const cmh_snapshot *s, const cmh_frame *f)
{
    cmh_jw_obj(w);
    cmh_jw_kstr(w, "name", cmh_str(s, f->name));
    cmh_jw_kstr(w, "filename", cmh_str(s, f->filename));
    cmh_jw_kint(w, "line", f->line);
    cmh_jw_end(w);
}

/* an object's stack under key (schema 2, "stack": its index) or key_inline (schema 1, "frames": its frames) */
static void jstack_as(cmh_jw *w, const cmh_snapshot *s, uint32_t stack, int inline_frames, const char *key, const char *key_inline)
{
    if (!inline_frames) {
        cmh_jw_kuint(w, key, stack);
        return;
    }
    cmh_jw_key(w, key_inline);
    const cmh_stack *st = &s->stacks[stack];
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < st->count; i++) jframe(w, s, &s->frames[s->stack_frames[st->first + i]]);
    cmh_jw_end(w);
}

static void jstack(cmh_jw *w, const cmh_snapshot *s, uint32_t stack, int inline_frames)
{
    jstack_as(w, s, stack, inline_frames, "stack", "frames");
}

static void stack_tables(cmh_jw *w, const cmh_snapshot *s)
{
    cmh_jw_nl(w);
    cmh_jw_key(w, "stacks");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < s->nstacks; i++) {
        const cmh_stack *st = &s->stacks[i];
        cmh_jw_nl(w);
        cmh_jw_arr(w);
        for (uint32_t k = 0; k < st->count; k++) cmh_jw_uint(w, s->stack_frames[st->first + k]);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
    cmh_jw_nl(w);
    cmh_jw_key(w, "frames");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < s->nframes; i++) {
        cmh_jw_nl(w);
        jframe(w, s, &s->frames[i]);
    }
    cmh_jw_end(w);
}

/* "stack_owners": beside "stacks", each stack's owner, who called the driver, by the name owners
 * and the reports' [owner] tags give it ("cuBLAS (libcublas.so.13)", "program (train.py)"; ""
 * for the empty stack).  Left out where the stacks cannot be grouped (no memory). */
static void stack_owners(cmh_jw *w, cmh_snapshot *s, uint8_t source)
{
    cmh_site_opts by_stack = {CMH_GROUP_STACK, 0, NULL, 0};
    int rc;
    char err[256];
    uint8_t shaped = s->source; /* (the shape memory_viz reads says PyTorch; the owners are the record's) */
    s->source = source;
    cmh_sites *g = cmh_sites_new(s, &by_stack, &rc, err, sizeof err);
    s->source = shaped;
    if (!g) return;
    cmh_jw_key(w, "stack_owners");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < s->nstacks; i++) {
        char name[256];
        uint32_t gr = cmh_sites_group(g, i);
        cmh_jw_str(w, i ? cmh_owner_name(cmh_sites_owner(g, gr), cmh_sites_owner_package(g, gr), name, sizeof name) : "");
    }
    cmh_jw_end(w);
    cmh_sites_free(g);
}

/* Is t a flat JSON object of integers ({"k": 1, "j": -2}), keys free of escapes?  (The form
 * pickle_model.c gives map settings; a .cmh may carry anything.) */
static int flat_int_object(const char *t)
{
    const char *p = t;
#define WS() while (*p == ' ') p++
    WS();
    if (*p++ != '{') return 0;
    WS();
    if (*p == '}') return !p[1];
    for (;;) {
        if (*p++ != '"') return 0;
        while (*p && *p != '"') {
            if (*p == '\\' || (unsigned char)*p < 0x20) return 0;
            p++;
        }
        if (*p++ != '"') return 0;
        WS();
        if (*p++ != ':') return 0;
        WS();
        if (*p == '-') p++;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
        WS();
        if (*p == '}') return !p[1];
        if (*p++ != ',') return 0;
        WS();
    }
#undef WS
}

/* A number kept as text, as a JSON number when it is one. */
static int json_number(const char *v)
{
    const char *p = v;
    if (*p == '-') p++;
    if (*p < '0' || *p > '9') return 0;
    if (*p == '0' && p[1] >= '0' && p[1] <= '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
        if (*++p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return !*p;
}

static const char *state_name(int st)
{
    return st == CMH_BLOCK_ACTIVE_ALLOCATED ? "active_allocated" : st == CMH_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free" : "inactive";
}

static void segments(cmh_jw *w, const cmh_snapshot *s, int inl)
{
    cmh_jw_key(w, "segments");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        uint64_t alloc = 0, active = 0, req = 0;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s->blocks[g->first_block + k];
            if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) alloc += b->size;
            if (b->state != CMH_BLOCK_INACTIVE) active += b->size, req += b->requested;
        }
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kint(w, "device", g->device);
        cmh_jw_kuint(w, "address", g->addr);
        cmh_jw_kuint(w, "total_size", g->size);
        cmh_jw_kuint(w, "allocated_size", alloc);
        cmh_jw_kuint(w, "active_size", active);
        cmh_jw_kuint(w, "requested_size", req);
        cmh_jw_kuint(w, "stream", g->stream);
        cmh_jw_kstr(w, "segment_type", cmh_segment_pool(g) == CMH_POOL_SMALL ? "small" : "large");
        cmh_jw_key(w, "segment_pool_id");
        cmh_jw_arr(w);
        cmh_jw_uint(w, g->pool_id[0]);
        cmh_jw_uint(w, g->pool_id[1]);
        cmh_jw_end(w);
        cmh_jw_kbool(w, "is_expandable", (g->flags & CMH_SEG_EXPANDABLE) != 0);
        jstack(w, s, g->stack, inl);
        cmh_jw_key(w, "blocks");
        cmh_jw_arr(w);
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s->blocks[g->first_block + k];
            cmh_jw_nl(w);
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "address", b->addr);
            cmh_jw_kuint(w, "size", b->size);
            cmh_jw_kuint(w, "requested_size", b->requested);
            cmh_jw_kstr(w, "state", state_name(b->state));
            jstack(w, s, b->state == CMH_BLOCK_INACTIVE ? 0 : b->stack, inl);
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}

static void traces(cmh_jw *w, const cmh_snapshot *s, int inl)
{
    int ndev = 0;
    for (uint32_t t = 0; t < s->ntraces; t++)
        if (s->traces[t].device >= ndev) ndev = s->traces[t].device + 1;
    for (uint32_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].device >= ndev) ndev = s->segments[i].device + 1;
    cmh_jw_nl(w);
    cmh_jw_key(w, "device_traces");
    cmh_jw_arr(w);
    int timed = s->source != CMH_SRC_PYTORCH || (s->pt_fields & CMH_PT_TIME_US); /* PyTorch 2.0: no time_us */
    int pooled = cmh_snapshot_entry_pools(s); /* on every entry or none, as the pickle */
    for (int d = 0; d < (ndev ? ndev : 1); d++) {
        cmh_jw_arr(w);
        for (uint32_t t = 0; t < s->ntraces; t++) {
            if (s->traces[t].device != d) continue;
            for (uint32_t i = 0; i < s->traces[t].nentries; i++) {
                const cmh_entry *e = &s->entries[s->traces[t].first_entry + i];
                cmh_jw_nl(w);
                cmh_jw_obj(w);
                int unknown = CMH_ENTRY_UNKNOWN_ACTION(e); /* a newer PyTorch's action: as read */
                int mark = e->action == CMH_ACT_MARK && CMH_PT_MARKS_INLINE(s) && !unknown; /* as the pickle writes it */
                cmh_jw_kstr(w, "action", unknown ? cmh_str(s, cmh_entry_name(s, e)) : mark ? cmh_pt_mark_action(e->flags) : cmh_action_name(e->action));
                if (e->action != CMH_ACT_OOM || cmh_entry_addr(s, e) != CMH_DEVICE_FREE_UNKNOWN) /* not known: no key, as read */
                    cmh_jw_kuint(w, e->action == CMH_ACT_OOM ? "device_free" : "addr", mark ? 0 : cmh_entry_addr(s, e));
                cmh_jw_kuint(w, "size", mark ? 0 : cmh_entry_size(s, e));
                if (mark) cmh_jw_kstr(w, "name", cmh_str(s, cmh_entry_name(s, e)));
                cmh_jw_kuint(w, "stream", cmh_entry_stream(s, e));
                if (timed) cmh_jw_kint(w, "time_us", cmh_entry_time(s, e) / 1000); /* absent where the source had none, as the pickle */
                if (e->action == CMH_ACT_POOL_SAMPLE) cmh_jw_kuint(w, "used", cmh_entry_requested(s, e));
                if (s->pt_fields & CMH_PT_COMPILE_CONTEXT) cmh_jw_kstr(w, "compile_context", cmh_str(s, cmh_entry_compile_context(s, e)));
                if (s->pt_fields & CMH_PT_USER_METADATA) cmh_jw_kstr(w, "user_metadata", cmh_str(s, cmh_entry_user_metadata(s, e)));
                if (pooled) {
                    cmh_pool_id p = cmh_entry_pool_id(s, e);
                    cmh_jw_key(w, "pool_id");
                    cmh_jw_arr(w);
                    cmh_jw_uint(w, p.id[0]);
                    cmh_jw_uint(w, p.id[1]);
                    cmh_jw_end(w);
                }
                if (cmh_entry_free_stack_aside(s, &s->traces[t], i)) { /* no origin: the free's stack beside it, as the pickle's free_frames */
                    jstack(w, s, 0, inl);
                    jstack_as(w, s, e->stack, inl, "free_stack", "free_frames");
                } else {
                    jstack(w, s, e->stack, inl);
                }
                cmh_jw_end(w);
            }
        }
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}

int cmh_export_json(const cmh_snapshot *in, int flags, FILE *fp)
{
    int inl = (flags & CMH_JSON_INLINE_FRAMES) != 0;
    cmh_snapshot s;
    uint64_t host = 0;
    int rc = cmh_memviz_shape(in, &s, &host);
    if (rc != CMH_OK) return rc;
    cmh_jw w;
    cmh_jw_init_buffered(&w, fp);
    cmh_jw_obj(&w);
    segments(&w, &s, inl);
    traces(&w, &s, inl);
    if (!inl) stack_tables(&w, &s);
    cmh_jw_nl(&w);
    cmh_jw_key(&w, "external_annotations");
    cmh_jw_arr(&w);
    for (uint32_t i = 0; i < s.nannotations; i++) {
        const cmh_annotation *a = &s.annotations[i];
        cmh_jw_nl(&w);
        cmh_jw_obj(&w);
        cmh_jw_kstr(&w, "name", cmh_str(&s, a->name));
        cmh_jw_kstr(&w, "stage", a->stage ? "END" : "START");
        cmh_jw_kint(&w, "device", a->device);
        cmh_jw_kint(&w, "time_us", a->time_ns / 1000);
        cmh_jw_end(&w);
    }
    cmh_jw_end(&w);
    cmh_jw_nl(&w);
    cmh_jw_key(&w, "allocator_settings");
    cmh_jw_obj(&w);
    for (uint32_t i = 0; i < s.nsettings; i++) {
        const char *v = cmh_str(&s, s.settings[i].value);
        cmh_jw_key(&w, cmh_str(&s, s.settings[i].key));
        int t = s.settings[i].type;
        if ((t == 1 || t == 2) && json_number(v)) cmh_jw_raw(&w, v);
        else if (t == 3) cmh_jw_bool(&w, !strcmp(v, "True"));
        else if (t == 4 && flat_int_object(v)) cmh_jw_raw(&w, v);
        else cmh_jw_str(&w, v);
    }
    cmh_jw_end(&w);
    cmh_jw_nl(&w);
    cmh_jw_key(&w, "cumemhist");
    cmh_jw_obj(&w);
    cmh_jw_kint(&w, "json_schema", inl ? 1 : 2);
    cmh_jw_kstr(&w, "source", in->source == CMH_SRC_PYTORCH ? "pytorch" : "recorder");
    cmh_jw_kint(&w, "pid", in->pid);
    /* how the process ended, as the pickle's meta, the reports and SQLite's processes.ending say */
    if (in->ending) cmh_jw_kstr(&w, "ending", cmh_str(in, in->ending));
    if (in->producer[0]) cmh_jw_kstr(&w, "producer", in->producer);
    if (in->rank >= 0) cmh_jw_kint(&w, "rank", in->rank);
    if (in->local_rank >= 0) cmh_jw_kint(&w, "local_rank", in->local_rank);
    if (in->world_size >= 0) cmh_jw_kint(&w, "world_size", in->world_size);
    uint64_t host_live = 0;
    cmh_host_allocations(in, &host_live, NULL);
    cmh_jw_kuint(&w, "host_allocations_left_out", host); /* (pinned host memory: memory_viz has devices only) */
    cmh_jw_kuint(&w, "host_segments_left_out", host_live);
    cmh_jw_kuint(&w, "skipped_entries", in->skipped_entries);
    cmh_jw_key(&w, "dropped");
    cmh_jw_obj(&w);
    for (uint32_t t = 0; t < in->ntraces; t++) {
        char dev[16];
        snprintf(dev, sizeof dev, "%d", in->traces[t].device);
        cmh_jw_kuint(&w, dev, in->traces[t].dropped);
    }
    cmh_jw_end(&w);
    /* per device, the OOMs the program saw (summary's CUDA OOMs: retries that succeeded left out,
     * the ones the ring dropped counted; counted without entries where there is no history,
     * enabled=state; null where not known), and why a device has no history ("recorded with
     * enabled=state": the reports' words): device_traces of a record with none are empty, which
     * read as "nothing happened" */
    int32_t devs[256];
    int nd = cmh_snapshot_devices(in, devs, 256), orc = CMH_OK;
    if (nd > 256) nd = 256;
    cmh_jw_key(&w, "ooms");
    cmh_jw_obj(&w);
    for (int k = 0; k < nd; k++) {
        char dev[16];
        snprintf(dev, sizeof dev, "%d", devs[k]);
        cmh_jw_key(&w, dev);
        cmh_mem_stats st;
        uint64_t nooms;
        if (cmh_trace_has_history(in, devs[k])) {
            int src = cmh_summary_compute(in, devs[k], &st);
            if (src != CMH_OK) orc = src, cmh_jw_null(&w);
            else cmh_jw_uint(&w, st.num_ooms);
        } else if (cmh_nohist_ooms(in, devs[k], &nooms)) cmh_jw_uint(&w, nooms);
        else cmh_jw_null(&w);
    }
    cmh_jw_end(&w);
    int nohist = 0;
    for (int k = 0; k < nd; k++) nohist |= !cmh_trace_has_history(in, devs[k]);
    if (nohist) {
        cmh_jw_key(&w, "no_history_cause");
        cmh_jw_obj(&w);
        for (int k = 0; k < nd; k++) {
            if (cmh_trace_has_history(in, devs[k])) continue;
            char dev[16];
            snprintf(dev, sizeof dev, "%d", devs[k]);
            cmh_jw_kstr(&w, dev, cmh_no_history_cause(in, devs[k]));
        }
        cmh_jw_end(&w);
    }
    /* the physical memory of cuMemCreate handles, which no segment says (as the pickle's
     * cumemhist dict has it): the handles held and mapped nowhere at the end, and every map with
     * the handle it mapped (owners and peak charge a handle once, whole) */
    if (s.nvmm_unmapped) {
        cmh_jw_key(&w, "vmm_unmapped");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < s.nvmm_unmapped; i++) {
            const cmh_vmm_handle *h = &s.vmm_unmapped[i];
            cmh_jw_nl(&w);
            cmh_jw_obj(&w);
            cmh_jw_kint(&w, "device", h->device);
            cmh_jw_kuint(&w, "size", h->size);
            cmh_jw_kint(&w, "time_ns", h->time_ns);
            jstack(&w, &s, h->stack < s.nstacks ? h->stack : 0, inl);
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
    }
    if (s.nvmm_maps) {
        cmh_jw_key(&w, "vmm_maps");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < s.nvmm_maps; i++) {
            const cmh_vmm_map *m = &s.vmm_maps[i];
            cmh_jw_nl(&w);
            cmh_jw_obj(&w);
            cmh_jw_kint(&w, "device", m->device);
            cmh_jw_kuint(&w, "addr", m->addr);
            cmh_jw_kuint(&w, "size", m->size);
            cmh_jw_kint(&w, "time_ns", m->time_ns);
            cmh_jw_kuint(&w, "handle", m->handle);
            cmh_jw_kuint(&w, "handle_size", m->handle_size);
            cmh_jw_kint(&w, "handle_time_ns", m->handle_time_ns);
            jstack(&w, &s, m->handle_stack < s.nstacks ? m->handle_stack : 0, inl); /* cuMemCreate's */
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
    }
    if (s.nvmm_released) { /* every cuMemRelease: a handle made and released with no map is only here */
        cmh_jw_key(&w, "vmm_released");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < s.nvmm_released; i++) {
            const cmh_vmm_release *v = &s.vmm_released[i];
            cmh_jw_nl(&w);
            cmh_jw_obj(&w);
            cmh_jw_kint(&w, "device", v->device);
            cmh_jw_kuint(&w, "handle", v->handle);
            cmh_jw_kuint(&w, "size", v->size);
            cmh_jw_kint(&w, "time_ns", v->time_ns);
            cmh_jw_kint(&w, "release_ns", v->release_ns);
            jstack(&w, &s, v->stack < s.nstacks ? v->stack : 0, inl); /* cuMemCreate's */
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
    }
    if (!inl) stack_owners(&w, &s, in->source);
    cmh_jw_end(&w);
    cmh_jw_end(&w);
    cmh_jw_finish(&w); /* the stream's error flag says whether it all went out */
    fputc('\n', fp);
    cmh_snapshot_free(&s);
    if (orc != CMH_OK) return orc;
    return ferror(fp) ? CMH_EIO : CMH_OK;
}
