/*
 * merge.c - a driver-level recording and PyTorch's snapshot of the same process as one record
 * (cumemhist/merge.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/merge.h"
#include "cumemhist/recorder.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int seg_event(const cmh_entry *e) { return e->action == CMH_ACT_SEGMENT_ALLOC || e->action == CMH_ACT_SEGMENT_MAP; }

int cmh_merge_torch(cmh_snapshot *ours, cmh_snapshot *torch, cmh_merge_info *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    if (ours->source != CMH_SRC_RECORDER) {
        snprintf(err, errlen, "the first snapshot is PyTorch's, not a cumemhist recording");
        return CMH_EINVAL;
    }
    if (torch->source != CMH_SRC_PYTORCH) {
        snprintf(err, errlen, "the second snapshot is not PyTorch's (a _dump_snapshot() pickle)");
        return CMH_EINVAL;
    }
    if (ours->torch) {
        snprintf(err, errlen, "the recording already holds PyTorch's part");
        return CMH_EINVAL;
    }
    /* the clock: the same segment events seen from both sides */
    int64_t *d = NULL;
    uint32_t nd = 0, cap = 0;
    for (uint32_t k = 0; k < torch->ntraces; k++) {
        const cmh_trace *tt = &torch->traces[k];
        const cmh_trace *ot = NULL;
        for (uint32_t j = 0; j < ours->ntraces; j++)
            if (ours->traces[j].device == tt->device) ot = &ours->traces[j];
        if (!ot) continue;
        uint32_t from = 0; /* both in time order: a forward scan finds each event's first twin */
        for (uint32_t i = 0; i < tt->nentries; i++) {
            const cmh_entry *te = &torch->entries[tt->first_entry + i];
            if (!seg_event(te) || !cmh_entry_time(torch, te)) continue;
            for (uint32_t j = from; j < ot->nentries; j++) {
                const cmh_entry *oe = &ours->entries[ot->first_entry + j];
                if (!seg_event(oe) || cmh_entry_addr(ours, oe) != cmh_entry_addr(torch, te) || cmh_entry_size(ours, oe) != cmh_entry_size(torch, te) || !cmh_entry_time(ours, oe)) continue;
                if (nd == cap) {
                    cap = cap ? cap * 2 : 64;
                    int64_t *nn = realloc(d, cap * sizeof *nn);
                    if (!nn) {
                        free(d);
                        snprintf(err, errlen, "out of memory");
                        return CMH_ENOMEM;
                    }
                    d = nn;
                }
                d[nd++] = cmh_entry_time(ours, oe) - cmh_entry_time(torch, te);
                from = j + 1;
                break;
            }
        }
    }
    if (nd) {
        qsort(d, nd, sizeof *d, cmp_i64);
        info->clock_ns = d[nd / 2];
        info->spread_ns = d[nd - 1] - d[0];
    }
    info->matched = nd;
    free(d);
    cmh_snapshot *t = malloc(sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return CMH_ENOMEM;
    }
    *t = *torch;
    memset(torch, 0, sizeof *torch);
    ours->torch = t;
    ours->torch_clock_ns = info->clock_ns;
    return CMH_OK;
}

/* ---- the merged view: PyTorch's blocks, and every other allocation as a segment of its own ---- */

static int cmp_rng(const void *x, const void *y)
{
    const cmh_range *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

int cmh_torch_ranges(const cmh_snapshot *t, int device, cmh_range **out, uint32_t *nout)
{
    cmh_range *r = NULL;
    uint32_t nr = 0, cap = 0;
    *out = NULL;
    *nout = 0;
    for (int pass = 0; pass < 2; pass++) { /* the final segments, then every segment event */
        uint32_t n = pass ? t->ntraces : t->nsegments;
        for (uint32_t i = 0; i < n; i++) {
            const cmh_trace *tr = pass ? &t->traces[i] : NULL;
            uint32_t m = pass ? tr->nentries : 1;
            if (pass ? (device != -2 && tr->device != device) : (device != -2 && t->segments[i].device != device)) continue;
            for (uint32_t j = 0; j < m; j++) {
                const cmh_entry *e = pass ? &t->entries[tr->first_entry + j] : NULL;
                if (pass && !seg_event(e)) continue;
                uint64_t a = pass ? cmh_entry_addr(t, e) : t->segments[i].addr, size = pass ? cmh_entry_size(t, e) : t->segments[i].size;
                if (!size || a + size < a) continue;
                if (nr == cap) {
                    cap = cap ? cap * 2 : 64;
                    cmh_range *nn = realloc(r, cap * sizeof *nn);
                    if (!nn) {
                        free(r);
                        return CMH_ENOMEM;
                    }
                    r = nn;
                }
                r[nr++] = (cmh_range){a, a + size};
            }
        }
    }
    if (nr) qsort(r, nr, sizeof *r, cmp_rng);
    uint32_t k = 0;
    for (uint32_t i = 0; i < nr; i++) {
        if (k && r[i].a <= r[k - 1].b) {
            if (r[i].b > r[k - 1].b) r[k - 1].b = r[i].b;
        } else r[k++] = r[i];
    }
    *out = r;
    *nout = k;
    return CMH_OK;
}

int cmh_ranges_overlap(const cmh_range *r, uint32_t n, uint64_t a, uint64_t b)
{
    uint32_t lo = 0, hi = n; /* the first range ending after a */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r[mid].b <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo].a < b;
}

typedef struct imp {
    const cmh_snapshot *t;
    cmh_snapshot *s;
    uint32_t *fmap; /* PyTorch's frame -> ours + 1 */
    int32_t module; /* the module PyTorch's frames are given */
} imp;

static int imp_str(imp *m, uint32_t id, uint32_t *out)
{
    const char *x = cmh_str(m->t, id);
    return cmh_strtab_intern(&m->s->strings, x, strlen(x), out);
}

static int imp_stack(imp *m, uint32_t stack, uint32_t *out)
{
    *out = 0;
    if (!stack || stack >= m->t->nstacks) return CMH_OK;
    const cmh_stack *st = &m->t->stacks[stack];
    uint32_t ids[512], n = st->count < 512 ? st->count : 512;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = m->t->stack_frames[st->first + i];
        if (!m->fmap[f]) {
            cmh_frame fr = m->t->frames[f];
            uint32_t nid;
            fr.module = m->module; /* "PyTorch": whose record the frame comes from, for attribution */
            if (imp_str(m, fr.name, &fr.name) || imp_str(m, fr.filename, &fr.filename) || cmh_snapshot_add_frame(m->s, &fr, &nid))
                return CMH_ENOMEM;
            m->fmap[f] = nid + 1;
        }
        ids[i] = m->fmap[f] - 1;
    }
    return cmh_snapshot_add_stack(m->s, ids, n, out);
}

static int pytorch_frame(const cmh_snapshot *s, uint32_t stack)
{
    if (!stack || stack >= s->nstacks) return 0;
    const cmh_stack *st = &s->stacks[stack];
    for (uint32_t i = 0; i < st->count; i++) {
        const cmh_frame *f = &s->frames[s->stack_frames[st->first + i]];
        if (f->module < 0 || (uint32_t)f->module >= s->nmodules) continue;
        const char *p = cmh_str(s, s->modules[f->module].path), *b = strrchr(p, '/');
        b = b ? b + 1 : p;
        if (!strncmp(b, "libc10", 6) || !strncmp(b, "libtorch", 8)) return 1;
    }
    return 0;
}

/* The merged timeline's order, one rule for cmh_merged_view and cmh_merged_position: ours
 * before PyTorch's at the same instant; ours inside PyTorch's ranges, and our driver-level
 * refusals PyTorch went on to handle, give way to PyTorch's (marks always stay). */
static int ours_first(const cmh_snapshot *s, const cmh_entry *oe, const cmh_entry *te, int64_t clock)
{
    int64_t tt_ns = te && cmh_entry_time(s->torch, te) ? cmh_entry_time(s->torch, te) + clock : 0;
    return oe && (!te || cmh_entry_time(s, oe) <= tt_ns);
}

static int ours_dropped(const cmh_snapshot *s, const cmh_entry *oe, int device, const cmh_range *r, uint32_t nr)
{
    return device >= 0 && oe->action != CMH_ACT_MARK &&
           ((oe->action == CMH_ACT_OOM && pytorch_frame(s, oe->stack)) ||
            (oe->action != CMH_ACT_OOM && cmh_entry_size(s, oe) && cmh_ranges_overlap(r, nr, cmh_entry_addr(s, oe), cmh_entry_addr(s, oe) + cmh_entry_size(s, oe))));
}

int cmh_merged_position(const cmh_snapshot *s, int device, int64_t index, int64_t *pos, int64_t *len)
{
    *pos = index, *len = 0;
    const cmh_trace *ot = cmh_snapshot_trace(s, device);
    if (!s->torch) {
        *len = ot ? ot->nentries : 0;
        return CMH_OK;
    }
    const cmh_snapshot *t = s->torch;
    const cmh_trace *tt = cmh_snapshot_trace(t, device);
    cmh_range *r = NULL;
    uint32_t nr = 0;
    if (cmh_torch_ranges(t, -2, &r, &nr) != CMH_OK) return CMH_ENOMEM;
    uint32_t i = 0, j = 0, ni = ot ? ot->nentries : 0, nj = tt ? tt->nentries : 0;
    int64_t k = 0, at = -1;
    const cmh_entry *twin = NULL;
    int oom_twin = 0;
    while (i < ni || j < nj) {
        const cmh_entry *oe = i < ni ? &s->entries[ot->first_entry + i] : NULL;
        const cmh_entry *te = j < nj ? &t->entries[tt->first_entry + j] : NULL;
        if (ours_first(s, oe, te, s->torch_clock_ns)) {
            int kept = !ours_dropped(s, oe, device, r, nr);
            if ((int64_t)i == index) {
                at = kept ? k : k - 1; /* a dropped entry of ours: the merged entry before it ... */
                if (!kept && seg_event(oe)) twin = oe;
                oom_twin = !kept && oe->action == CMH_ACT_OOM;
            } else if (oe->action == CMH_ACT_OOM && !kept) oom_twin = 0;
            k += kept;
            i++;
        } else {
            /* ... or, for a segment event, PyTorch's own record of it (the clock's evidence); for
             * the last refusal of ours before PyTorch's next entry, when that entry is PyTorch's
             * OOM, that OOM: PyTorch raised it for this refusal, and every other report names the
             * error by it (owners_job.cmh from an H200: owners said 'out of memory #1 (entry 216'
             * of the snapshot entry before it, oom and frag 217).  An earlier refusal it retried
             * keeps the entry before it: nothing of PyTorch's records the retry. */
            if (twin && seg_event(te) && cmh_entry_addr(t, te) <= cmh_entry_addr(s, twin) && cmh_entry_addr(s, twin) - cmh_entry_addr(t, te) < cmh_entry_size(t, te)) at = k, twin = NULL;
            if (oom_twin && te->action == CMH_ACT_OOM) at = k;
            oom_twin = 0;
            j++, k++;
        }
    }
    free(r);
    *len = k;
    *pos = index < 0 ? index : at >= 0 ? at : index >= (int64_t)ni ? k - 1 : 0;
    return CMH_OK;
}

int cmh_merged_view(cmh_snapshot *s)
{
    cmh_snapshot *t = s->torch;
    if (!t) return CMH_OK;
    /* PyTorch's address ranges: its final segments and every range its trace allocated or mapped */
    cmh_range *r = NULL;
    uint32_t nr = 0;
    if (cmh_torch_ranges(t, -2, &r, &nr) != CMH_OK) return CMH_ENOMEM;
    /* the segments and traces are rebuilt: ours outside PyTorch's ranges, then PyTorch's */
    cmh_segment *segs = s->segments;
    cmh_block *blocks = s->blocks;
    cmh_entry *ents = s->entries;
    cmh_entry_xref *xmap = s->xmap; /* ents' far sets (the sets themselves stay s's) */
    uint32_t nxmap = s->nxmap, cxmap = s->cap_xmap;
    cmh_trace *trs = s->traces;
    uint32_t nsegs = s->nsegments, ntrs = s->ntraces, nblk = s->nblocks, nent = s->nentries;
    uint32_t nann = s->nannotations, nset = s->nsettings;
    uint32_t csegs = s->cap_segments, ctrs = s->cap_traces, cblk = s->cap_blocks, cent = s->cap_entries;
    s->segments = NULL, s->nsegments = s->cap_segments = 0;
    s->blocks = NULL, s->nblocks = s->cap_blocks = 0;
    s->entries = NULL, s->nentries = s->cap_entries = 0;
    s->xmap = NULL, s->nxmap = s->cap_xmap = 0;
    s->traces = NULL, s->ntraces = s->cap_traces = 0;
    imp m = {t, s, calloc(t->nframes + 1, sizeof(uint32_t)), -1};
    if (!m.fmap) goto restore_fail;
    cmh_module pm = {0, 0, 0, 0}; /* no file: a name for the owner of PyTorch's blocks */
    if (cmh_strtab_intern(&s->strings, "PyTorch", 7, &pm.path) || cmh_snapshot_add_module(s, &pm)) goto restore_fail;
    m.module = (int32_t)s->nmodules - 1;
    for (uint32_t i = 0; i < nsegs; i++) {
        const cmh_segment *g = &segs[i];
        if (g->device >= 0 && cmh_ranges_overlap(r, nr, g->addr, g->addr + g->size)) continue;
        if (cmh_snapshot_add_segment(s, g, NULL)) goto fail;
        for (uint32_t b = 0; b < g->nblocks; b++)
            if (cmh_snapshot_add_block(s, &blocks[g->first_block + b])) goto fail;
    }
    for (uint32_t i = 0; i < t->nsegments; i++) {
        cmh_segment g = t->segments[i];
        if (imp_stack(&m, g.stack, &g.stack)) goto fail;
        g.time_ns = g.time_ns ? g.time_ns + s->torch_clock_ns : 0;
        if (cmh_snapshot_add_segment(s, &g, NULL)) goto fail;
        for (uint32_t b = 0; b < t->segments[i].nblocks; b++) {
            cmh_block bl = t->blocks[t->segments[i].first_block + b];
            if (imp_stack(&m, bl.stack, &bl.stack)) goto fail;
            bl.time_ns = bl.time_ns ? bl.time_ns + s->torch_clock_ns : 0;
            if (cmh_snapshot_add_block(s, &bl)) goto fail;
        }
    }
    /* each device's trace: ours (outside PyTorch's ranges; its driver-level refusals PyTorch
     * went on to handle left out) merged in time with PyTorch's on our clock */
    int32_t devs[300];
    uint32_t ndev = 0;
    for (uint32_t i = 0; i < ntrs && ndev < 300; i++) devs[ndev++] = trs[i].device;
    for (uint32_t i = 0; i < t->ntraces && ndev < 300; i++) {
        uint32_t j = 0;
        while (j < ndev && devs[j] != t->traces[i].device) j++;
        if (j == ndev) devs[ndev++] = t->traces[i].device;
    }
    for (uint32_t d = 0; d < ndev; d++) {
        const cmh_trace *ot = NULL, *tt = NULL;
        for (uint32_t i = 0; i < ntrs; i++)
            if (trs[i].device == devs[d]) ot = &trs[i];
        for (uint32_t i = 0; i < t->ntraces; i++)
            if (t->traces[i].device == devs[d]) tt = &t->traces[i];
        if (cmh_snapshot_add_trace(s, devs[d], (ot ? ot->dropped : 0) + (tt ? tt->dropped : 0), NULL)) goto fail;
        s->traces[s->ntraces - 1].dropped_ooms = (ot ? ot->dropped_ooms : 0) + (tt ? tt->dropped_ooms : 0);
        uint32_t i = 0, j = 0, ni = ot ? ot->nentries : 0, nj = tt ? tt->nentries : 0;
        while (i < ni || j < nj) {
            const cmh_entry *oe = i < ni ? &ents[ot->first_entry + i] : NULL;
            const cmh_entry *te = j < nj ? &t->entries[tt->first_entry + j] : NULL;
            if (ours_first(s, oe, te, s->torch_clock_ns)) {
                i++;
                cmh_entry_full e;
                cmh_entry_unpack(s, oe, xmap, nxmap, ot->first_entry + i - 1, &e);
                /* (the entry's extra keys are only in its set: the full form has no field for them) */
                uint32_t x = cmh_entry_x_apart(s, oe, xmap, nxmap, ot->first_entry + i - 1)->extra;
                if (!ours_dropped(s, oe, devs[d], r, nr) && cmh_snapshot_add_entry_extra(s, &e, x)) goto fail;
            } else {
                j++;
                cmh_entry_full e;
                cmh_entry_get(t, te, &e);
                e.time_ns = cmh_entry_time(t, te) ? cmh_entry_time(t, te) + s->torch_clock_ns : 0;
                e.flags |= CMH_EF_PYTORCH; /* requested sizes: the replay rounds them */
                if (imp_stack(&m, e.stack, &e.stack)) goto fail;
                if (e.name && imp_str(&m, e.name, &e.name)) goto fail;
                if (e.compile_context && imp_str(&m, e.compile_context, &e.compile_context)) goto fail;
                if (e.user_metadata && imp_str(&m, e.user_metadata, &e.user_metadata)) goto fail;
                /* PyTorch's keys the reader does not know, kept for an export back to a pickle
                 * (the unmerged part's export keeps them) */
                uint32_t x = cmh_entry_extra(t, te);
                if (x && imp_str(&m, x, &x)) goto fail;
                if (cmh_snapshot_add_entry_extra(s, &e, x)) goto fail;
            }
        }
    }
    /* PyTorch's record_function ranges (steps, plot markers, the trace's slices), on our clock */
    for (uint32_t i = 0; i < t->nannotations; i++) {
        cmh_annotation a = t->annotations[i];
        a.time_ns = a.time_ns ? a.time_ns + s->torch_clock_ns : 0;
        if (imp_str(&m, a.name, &a.name) || cmh_snapshot_add_annotation(s, &a)) goto fail_late;
    }
    /* its allocator settings decide how the replay rounds its blocks; ours have none of these keys */
    for (uint32_t i = 0; i < t->nsettings; i++) {
        const char *k = cmh_str(t, t->settings[i].key);
        int have = 0;
        for (uint32_t j = 0; j < s->nsettings && !have; j++) have = !strcmp(cmh_str(s, s->settings[j].key), k);
        if (!have && cmh_snapshot_add_setting(s, k, cmh_str(t, t->settings[i].value), t->settings[i].type)) goto fail_late;
    }
    free(segs);
    free(blocks);
    free(ents);
    free(xmap);
    free(trs);
    free(m.fmap);
    free(r);
    cmh_snapshot_free(t);
    free(t);
    s->torch = NULL;
    /* a running snapshot's "(N entries so far)" counted the recorder's entries alone: the traces
     * now hold PyTorch's too (its ending said 211 where peak said device 0: 216) */
    return cmh_ending_recount(s);
fail_late:
    s->nannotations = nann; /* what was imported goes; strings stay, unused */
    s->nsettings = nset;
fail:
    free(s->segments);
    free(s->blocks);
    free(s->entries);
    free(s->xmap);
    free(s->traces);
restore_fail: /* the record as it was (the frames and strings imported stay: unused) */
    s->segments = segs, s->nsegments = nsegs, s->cap_segments = csegs;
    s->blocks = blocks, s->nblocks = nblk, s->cap_blocks = cblk;
    s->entries = ents, s->nentries = nent, s->cap_entries = cent;
    s->xmap = xmap, s->nxmap = nxmap, s->cap_xmap = cxmap;
    s->traces = trs, s->ntraces = ntrs, s->cap_traces = ctrs;
    free(m.fmap);
    free(r);
    return CMH_ENOMEM;
}

/* A device's place in the ending's list: devices ascending, pinned host memory's last, the same
 * order whether the record is read whole or as its merged view (their traces' orders differ). */
static int dev_rank(int32_t d) { return d < 0 ? INT32_MAX : d; }

int cmh_ending_recount(cmh_snapshot *s)
{
    if (!s->ending) return CMH_OK;
    const char *e = cmh_str(s, s->ending), *open = strrchr(e, '(');
    size_t len = strlen(e);
    unsigned long long said;
    int used = 0;
    /* only an ending that counts them: " (N entr(y|ies) so far...)" at its end */
    if (!open || len < 10 || strcmp(e + len - 1, ")") || !strstr(open, " so far") || sscanf(open, "(%llu entr%n", &said, &used) != 1 || !used)
        return CMH_OK;
    /* the record's one timeline, device by device: with PyTorch's part still apart, the merged
     * view's length (cmh_merged_position: PyTorch's entries in, ours inside its ranges out), so
     * that a command reading the parts (owners) counts what peak, trace and report count on the
     * view (owners.mid.cmh: the recorder's 211, PyTorch's 18, the view's 216 + 4) */
    const cmh_snapshot *t = s->torch;
    uint32_t cap = s->ntraces + (t ? t->ntraces : 0), nd = 0;
    int32_t *dev = cap ? malloc(cap * sizeof *dev) : NULL;
    uint64_t *cnt = cap ? malloc(cap * sizeof *cnt) : NULL;
    if (cap && (!dev || !cnt)) {
        free(dev), free(cnt);
        return CMH_ENOMEM;
    }
    for (uint32_t i = 0; i < cap; i++) { /* each device once, in dev_rank's order */
        int32_t d = i < s->ntraces ? s->traces[i].device : t->traces[i - s->ntraces].device;
        uint32_t k = 0;
        while (k < nd && dev[k] != d) k++;
        if (k < nd) continue;
        for (k = nd++; k > 0 && dev_rank(dev[k - 1]) > dev_rank(d); k--) dev[k] = dev[k - 1];
        dev[k] = d;
    }
    uint64_t n = 0;
    uint32_t with = 0;
    for (uint32_t k = 0; k < nd; k++) {
        int64_t pos, l;
        if (cmh_merged_position(s, dev[k], -1, &pos, &l) != CMH_OK) {
            free(dev), free(cnt);
            return CMH_ENOMEM;
        }
        cnt[k] = (uint64_t)l, n += cnt[k], with += l > 0;
    }
    /* each device's apart where there are several: the reports count per device (peak's 'device 0:
     * 216 trace entries' beside 220 with pinned host memory's 4) */
    char t2[1024], by[512] = "";
    size_t bl = 0;
    for (uint32_t k = 0; k < nd && with > 1 && bl < sizeof by; k++) {
        if (!cnt[k]) continue;
        if (dev[k] < 0) bl += (size_t)snprintf(by + bl, sizeof by - bl, "%s%llu of pinned host memory", bl ? ", " : ": ", (unsigned long long)cnt[k]);
        else bl += (size_t)snprintf(by + bl, sizeof by - bl, "%s%llu on device %d", bl ? ", " : ": ", (unsigned long long)cnt[k], (int)dev[k]);
    }
    free(dev), free(cnt);
    if (bl >= sizeof by) by[0] = 0; /* (hundreds of devices: the total alone) */
    int k = snprintf(t2, sizeof t2, "%.*s(%llu %s so far%s)", (int)(open - e), e, (unsigned long long)n, n == 1 ? "entry" : "entries", by);
    if (k < 0 || (size_t)k >= sizeof t2) return CMH_OK; /* (a hostile file's ending, too long: kept as it is) */
    if (!strcmp(t2, e)) return CMH_OK;
    return cmh_strtab_intern(&s->strings, t2, (size_t)k, &s->ending) ? CMH_ENOMEM : CMH_OK;
}
