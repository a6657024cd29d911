/*
 * pprof.c - pprof's profile.proto (github.com/google/pprof, proto/profile.proto), gzipped, as
 * `go tool pprof` and Speedscope read it: live bytes and blocks at the end and at the allocated
 * peak, four sample types (six where the record has an out-of-memory error: oom_space and
 * oom_objects, what was live at the record's first, on its device, as `oom` shows it), one sample per stack and device, each labelled with its device
 * (`-tagfocus=device=1`, `-tags`), as every report covers every device.  pprof names the
 * profile by its first mapping ("File:"): that is the program the user ran, the module or the
 * Python script of the stacks' outermost frames.  pprof gives a leaf frame the "flat" bytes, so
 * each stack starts at its site (cmh_sites_drawn): the machinery inside it
 * (torch::unwind::unwind(), the caching allocator, the dispatcher, CPython, ctypes, the driver)
 * is left out, as every report leaves it out, and "flat" is what `peak` and `leaks` give the
 * site; a third-party package's frames inside the site (a library's allocating function under
 * site-packages, called from the user's line) are not machinery and stay, the flat bytes theirs.
 * Outward of the site the stack is what the reports print: the user's and packages' callers,
 * without the interpreter's start (_start, Py_BytesMain, PyRun_*) or CPython between them.
 *
 * The protobuf is written by a small wire-format writer of our own rather than protobuf-c: the
 * profile needs only varints and length-delimited fields of six message types, and protobuf-c
 * would add protoc-c and generated code to the build for that.  Messages are built inside-out
 * into byte buffers (a nested message is its length, then its bytes).  gzip is zlib's.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cumemhist/leakwords.h"
#include "cumemhist/owners.h"
#include "cumemhist/gapwords.h"
#include "cumemhist/pictures.h"
#include "cumemhist/reports.h"
#include "cumemhist/viz.h"
#include "oatab.h"

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
    int nomem;
} buf;

static void put_bytes(buf *b, const void *d, size_t n)
{
    if (b->nomem) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n) nc *= 2;
        unsigned char *np = realloc(b->p, nc);
        if (!np) {
            b->nomem = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v)
{
    unsigned char t[10];
    int k = 0;
    do {
        t[k] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    put_bytes(b, t, (size_t)k);
}

static void field_int(buf *b, int field, uint64_t v) /* wire type 0; 0 is the default: left out */
{
    if (!v) return;
    varint(b, (uint64_t)field << 3);
    varint(b, v);
}

static void field_len(buf *b, int field, const void *d, size_t n) /* wire type 2 */
{
    varint(b, (uint64_t)field << 3 | 2);
    varint(b, n);
    put_bytes(b, d, n);
}

static void field_msg(buf *b, int field, buf *m)
{
    field_len(b, field, m->p ? m->p : (unsigned char *)"", m->n);
    if (m->nomem) b->nomem = 1;
    m->n = 0;
}

typedef struct fslot {
    uint64_t key; /* name << 32 | file, + 1 */
    uint64_t id;
} fslot;

typedef struct merged {
    int32_t device;
    uint32_t stack;
    int64_t v[6]; /* end bytes, end blocks, peak bytes, peak blocks, OOM bytes, OOM blocks */
} merged;

static int cmp_stack(const void *a, const void *b)
{
    const merged *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* the program a profile is of: the module, or else the file (a Python script), of the stacks'
 * outermost drawn frames, the one holding the most bytes at the end and the peak */
typedef struct prog {
    int32_t module; /* -1: by file */
    uint32_t file;  /* string id in s */
    uint32_t frame; /* one of its frames */
    uint64_t bytes;
} prog;

/* The script a Python command line runs ("python3 -u train.py --lr 3", the first word after the
 * interpreter ending in .py), for a record whose stacks hold no Python frame: every stack ends in
 * the interpreter's own frames, and the profile is still of train.py.  NULL: none. */
static const char *script_of(const char *cmdline, char *out, size_t cap)
{
    const char *p = cmdline;
    p += strcspn(p, " "); /* the interpreter */
    while (*p) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n > 3 && n < cap && !memcmp(p + n - 3, ".py", 3)) {
            memcpy(out, p, n);
            out[n] = 0;
            return out;
        }
        p += n;
    }
    return NULL;
}

static uint32_t str_id(cmh_strtab *t, const char *s, int *nomem)
{
    uint32_t id = 0;
    if (cmh_strtab_intern(t, s, strlen(s), &id)) *nomem = 1;
    return id;
}

int cmh_export_pprof(const cmh_snapshot *s, const cmh_sites *gs, const int32_t *devices, int ndevices, FILE *fp)
{
    char why[256];
    int rc = CMH_OK;
    cmh_sites *own = NULL;
    if (!gs && !(own = cmh_sites_new(s, NULL, &rc, why, sizeof why))) return rc; /* which frames are machinery */
    const cmh_sites *g = gs ? gs : own;
    size_t nd1 = (size_t)(ndevices > 0 ? ndevices : 1);
    cmh_live_at *end = calloc(nd1, sizeof *end), *peak = calloc(nd1, sizeof *peak);
    /* what was live at the record's first out-of-memory error (cmh_first_oom: by time across the
     * devices, the one oom calls the record's first, whatif and `flamegraph --at oom` look at), on
     * its device, as `oom` shows it ("holding memory then"): oom_space, where the record has an
     * OOM.  One moment, as the reports have one (it took each device's own first: device 0's
     * #1, the record's 2nd, beside device 1's #1, with nothing to say which came first).  A
     * profile without that device (--device N) holds the first of the record's order that is
     * on a device it holds, as flamegraph --device N --at oom draws that device's #1. */
    cmh_live_at *oom = calloc(nd1, sizeof *oom);
    int *has_oom = calloc(nd1, sizeof *has_oom), any_oom = 0;
    cmh_record_oom *ro = NULL;
    uint32_t nro = 0;
    int oom_dev = INT32_MIN; /* the device whose OOM oom_space holds */
    uint64_t cap = 1;
    int nlive = 0;
    if (!end || !peak || !oom || !has_oom) rc = CMH_ENOMEM;
    else rc = cmh_record_ooms(s, &ro, &nro);
    if (rc == CMH_OK) {
        int fd;
        int64_t fi, ft;
        if (cmh_first_oom(s, &fd, &fi, &ft)) {
            for (int d = 0; d < ndevices && oom_dev == INT32_MIN; d++)
                if (devices[d] == fd) oom_dev = fd;
        }
        for (uint32_t k = 0; k < nro && oom_dev == INT32_MIN; k++)
            for (int d = 0; d < ndevices && oom_dev == INT32_MIN; d++)
                if (devices[d] == ro[k].device) oom_dev = ro[k].device;
        /* (none of the program's: a device whose only OOMs were retries that succeeded, its first) */
        for (int d = 0; d < ndevices && oom_dev == INT32_MIN; d++) {
            const cmh_trace *tr = cmh_snapshot_trace(s, devices[d]);
            for (uint32_t i = 0; tr && i < tr->nentries && oom_dev == INT32_MIN; i++)
                if (s->entries[tr->first_entry + i].action == CMH_ACT_OOM) oom_dev = devices[d];
        }
    }
    for (; rc == CMH_OK && nlive < ndevices; nlive++) {
        if ((rc = cmh_live_compute(s, devices[nlive], CMH_AT_END, 0, &end[nlive]))) break;
        if ((rc = cmh_live_compute(s, devices[nlive], CMH_AT_PEAK, 0, &peak[nlive]))) {
            cmh_live_free(&end[nlive]);
            break;
        }
        int orc = devices[nlive] == oom_dev && cmh_trace_has_history(s, devices[nlive])
                      ? cmh_live_compute(s, devices[nlive], CMH_AT_OOM, 1, &oom[nlive])
                      : CMH_EINVAL;
        if (orc == CMH_OK) has_oom[nlive] = any_oom = 1;
        else if (orc != CMH_EINVAL) { /* (EINVAL: no OOM on that device) */
            rc = orc;
            cmh_live_free(&end[nlive]), cmh_live_free(&peak[nlive]);
            break;
        }
        cap += end[nlive].nstacks + peak[nlive].nstacks + oom[nlive].nstacks;
    }
    if (rc != CMH_OK) {
        for (int d = 0; d < nlive; d++) cmh_live_free(&end[d]), cmh_live_free(&peak[d]), cmh_live_free(&oom[d]);
        free(end), free(peak), free(oom), free(has_oom), free(ro);
        cmh_sites_free(own);
        return rc;
    }
    /* one sample per stack and device, with both moments' figures */
    uint32_t nm = 0;
    merged *m = malloc(cap * sizeof *m);
    cmh_snapshot st; /* only for its string table: pprof's, with "" first */
    cmh_snapshot_init(&st);
    buf out = {0}, msg = {0}, sub = {0}, packed = {0};
    cmh_oatab funcs;
    cmh_oa_init(&funcs, sizeof(fslot));
    uint64_t *loc_of = calloc(s->nframes + 1, sizeof *loc_of); /* frame -> location id (frame + 1) once written */
    unsigned char *used = calloc(s->nmodules + 1, 1);           /* modules a location names */
    prog *progs = malloc(cap * sizeof *progs);
    uint32_t nprogs = 0;
    int nomem = !m || !loc_of || !used || !progs;
    for (int d = 0; d < ndevices && !nomem; d++) {
        for (uint32_t i = 0; i < end[d].nstacks; i++)
            m[nm++] = (merged){devices[d], end[d].stacks[i].stack, {(int64_t)end[d].stacks[i].bytes, (int64_t)end[d].stacks[i].blocks, 0, 0, 0, 0}};
        for (uint32_t i = 0; i < peak[d].nstacks; i++)
            m[nm++] = (merged){devices[d], peak[d].stacks[i].stack, {0, 0, (int64_t)peak[d].stacks[i].bytes, (int64_t)peak[d].stacks[i].blocks, 0, 0}};
        for (uint32_t i = 0; has_oom[d] && i < oom[d].nstacks; i++)
            m[nm++] = (merged){devices[d], oom[d].stacks[i].stack, {0, 0, 0, 0, (int64_t)oom[d].stacks[i].bytes, (int64_t)oom[d].stacks[i].blocks}};
    }
    if (!nomem && nm) {
        qsort(m, nm, sizeof *m, cmp_stack);
        uint32_t k = 0;
        for (uint32_t i = 0; i < nm; i++) {
            if (k && m[k - 1].stack == m[i].stack && m[k - 1].device == m[i].device) {
                for (int j = 0; j < 6; j++) m[k - 1].v[j] += m[i].v[j];
            } else m[k++] = m[i];
        }
        nm = k;
    }
    /* the program: what the stacks' outermost drawn frames are in, by bytes */
    for (uint32_t i = 0; i < nm && !nomem; i++) {
        const cmh_stack *sk = m[i].stack && m[i].stack < s->nstacks ? &s->stacks[m[i].stack] : NULL;
        uint32_t k = sk ? sk->count : 0;
        while (k-- > 0 && !cmh_sites_drawn(g, m[i].stack, k)) {}
        if (!sk || k >= sk->count) continue;
        const cmh_frame *fr = &s->frames[s->stack_frames[sk->first + k]];
        int32_t mod = fr->module >= 0 && (uint32_t)fr->module < s->nmodules ? fr->module : -1;
        if (mod < 0 && !*cmh_str(s, fr->filename)) continue;
        uint32_t p = 0;
        while (p < nprogs && !(progs[p].module == mod && (mod >= 0 || !strcmp(cmh_str(s, progs[p].file), cmh_str(s, fr->filename))))) p++;
        if (p == nprogs) progs[nprogs++] = (prog){mod, fr->filename, s->stack_frames[sk->first + k], 0};
        progs[p].bytes += (uint64_t)(m[i].v[0] + m[i].v[2]); /* (not the OOM's: the program is the same with or without one) */
    }
    const prog *main_prog = NULL;
    for (uint32_t p = 0; p < nprogs; p++)
        if (!main_prog || progs[p].bytes > main_prog->bytes) main_prog = &progs[p];
    /* sample types */
    static const char *const types[6][2] = {{"live_space", "bytes"}, {"live_objects", "count"}, {"peak_space", "bytes"},
                                            {"peak_objects", "count"}, {"oom_space", "bytes"}, {"oom_objects", "count"}};
    int ntypes = any_oom ? 6 : 4; /* the OOM's only where the record has one */
    for (int j = 0; j < ntypes && !nomem; j++) {
        field_int(&msg, 1, str_id(&st.strings, types[j][0], &nomem));
        field_int(&msg, 2, str_id(&st.strings, types[j][1], &nomem));
        field_msg(&out, 1, &msg);
    }
    /* samples, and each frame's location and function the first time it is seen */
    buf locs = {0}, fns = {0};
    uint64_t nfuncs = 0;
    for (uint32_t i = 0; i < nm && !nomem; i++) {
        const cmh_stack *sk = m[i].stack && m[i].stack < s->nstacks ? &s->stacks[m[i].stack] : NULL;
        packed.n = 0;
        uint32_t nf = sk ? sk->count : 0;
        for (uint32_t k = 0; k < nf || (!nf && k == 0); k++) {
            uint32_t f = nf ? s->stack_frames[sk->first + k] : s->nframes; /* a stackless sample: one "<no stack: ...>" frame */
            if (nf && !cmh_sites_drawn(g, m[i].stack, k)) continue; /* machinery inside the site */
            if (!loc_of[f]) {
                const cmh_frame *fr = nf ? &s->frames[f] : NULL;
                char nostack[160]; /* a stackless sample's one frame: every report's words for it */
                snprintf(nostack, sizeof nostack, "<no stack: %s>", cmh_no_stack_reason(s));
                const char *name = fr ? cmh_str(s, fr->name) : nostack, *file = fr ? cmh_str(s, fr->filename) : "";
                if (fr && !*file && fr->module >= 0 && (uint32_t)fr->module < s->nmodules) file = cmh_str(s, s->modules[fr->module].path);
                uint32_t ni = str_id(&st.strings, *name ? name : "??", &nomem), fi = str_id(&st.strings, file, &nomem);
                int created = 0;
                fslot *fs = cmh_oa_get(&funcs, ((uint64_t)ni << 32 | fi) + 1, &created);
                if (!fs) {
                    nomem = 1;
                    break;
                }
                if (created) {
                    /* no system_name: the name is already demangled, and pprof would demangle it
                     * again (into "<unknown>" for "<module>", without "(anonymous namespace)") */
                    fs->id = ++nfuncs;
                    field_int(&msg, 1, fs->id);
                    field_int(&msg, 2, ni);
                    field_int(&msg, 4, fi);
                    field_msg(&fns, 5, &msg);
                }
                loc_of[f] = (uint64_t)f + 1;
                field_int(&sub, 1, fs->id); /* Line */
                if (fr && fr->line > 0) field_int(&sub, 2, (uint64_t)fr->line);
                field_int(&msg, 1, loc_of[f]); /* Location */
                if (fr && fr->module >= 0 && (uint32_t)fr->module < s->nmodules) {
                    field_int(&msg, 2, (uint64_t)fr->module + 1);
                    used[fr->module] = 1;
                }
                if (fr) field_int(&msg, 3, fr->pc);
                field_msg(&msg, 4, &sub);
                field_msg(&locs, 4, &msg);
            }
            varint(&packed, loc_of[f]);
        }
        field_len(&msg, 1, packed.p, packed.n); /* location_id, leaf first (packed) */
        packed.n = 0;
        for (int j = 0; j < ntypes; j++) varint(&packed, (uint64_t)m[i].v[j]);
        field_len(&msg, 2, packed.p, packed.n); /* value (packed) */
        /* Label{key, num, num_unit}: a number, as `-tagfocus=device=1` reads a number as one (a
         * string "1" matched nothing); pprof drops a numeric label of 0 without a unit, prints
         * the value bare where it does not know the unit (-tags, -traces), and with the unit
         * after it in -raw: "index" reads there as the device's number, "device:[1 index]"
         * (it read "device:[0 count]", a count of none); -1 is pinned host memory */
        field_int(&sub, 1, str_id(&st.strings, "device", &nomem));
        field_int(&sub, 3, (uint64_t)(int64_t)m[i].device);
        field_int(&sub, 4, str_id(&st.strings, "index", &nomem));
        field_msg(&msg, 3, &sub);
        if (sk) { /* label owner: who called the driver, by the name owners and the reports give it */
            char oname[256];
            uint32_t gr = cmh_sites_group(g, m[i].stack);
            const char *o = cmh_owner_name(cmh_sites_owner(g, gr), cmh_sites_owner_package(g, gr), oname, sizeof oname);
            if (*o) {
                buf lab = {0};
                field_int(&lab, 1, str_id(&st.strings, "owner", &nomem));
                field_int(&lab, 2, str_id(&st.strings, o, &nomem));
                field_msg(&msg, 3, &lab);
                free(lab.p);
            }
        }
        field_msg(&out, 2, &msg);
    }
    /* the program first: pprof's "File:" is the first mapping (or the first not named like a
     * shared library); a Python script has no module of its own, so it gets a mapping by its
     * path (it said "File: libpython3.11.so.1.0" of a Python program) */
    char script[1024];
    const char *rule = main_prog && main_prog->module >= 0 ? cmh_sites_rule(g, main_prog->frame) : NULL;
    const char *main_file = !main_prog                         ? NULL
                            : main_prog->module < 0            ? cmh_str(s, main_prog->file)
                            : rule && !strcmp(rule, "cpython") ? script_of(cmh_str(s, s->cmdline), script, sizeof script)
                                                               : NULL;
    if (main_file && !nomem) {
        field_int(&msg, 1, (uint64_t)s->nmodules + 1);
        field_int(&msg, 5, str_id(&st.strings, main_file, &nomem));
        for (int k = 7; k <= 9; k++) field_int(&msg, k, 1); /* has functions, files, lines */
        field_msg(&out, 3, &msg);
    }
    int32_t first = main_prog && !main_file ? main_prog->module : -1;
    /* one mapping per module the stacks use, already symbolized: pprof has nothing to look up */
    for (int64_t j = first >= 0 ? -1 : 0; j < (int64_t)s->nmodules && !nomem; j++) {
        uint32_t i = j < 0 ? (uint32_t)first : (uint32_t)j;
        if (!used[i] || (j >= 0 && (int32_t)i == first)) continue;
        const cmh_module *md = &s->modules[i];
        field_int(&msg, 1, (uint64_t)i + 1);
        field_int(&msg, 2, md->base);
        field_int(&msg, 3, md->base + md->size);
        field_int(&msg, 5, str_id(&st.strings, cmh_str(s, md->path), &nomem));
        const char *bid = cmh_str(s, md->build_id);
        if (*bid) field_int(&msg, 6, str_id(&st.strings, bid, &nomem));
        for (int k = 7; k <= 10; k++) field_int(&msg, k, 1); /* has functions, files, lines, inlines */
        field_msg(&out, 3, &msg);
    }
    put_bytes(&out, locs.p ? locs.p : (unsigned char *)"", locs.n);
    put_bytes(&out, fns.p ? fns.p : (unsigned char *)"", fns.n);
    /* what is written once every string is known: the table, the time, the default type */
    int64_t tns = s->dump_time_ns ? s->dump_time_ns : (ndevices > 0 ? end[0].time_ns : 0);
    uint64_t deflt = str_id(&st.strings, "live_space", &nomem);
    /* the moments, as `peak` names them, device by device: no entry -1 (a record with no
     * entries), and no peak where there is no history (enabled=state: the peak values are the
     * end's); which devices, and how to see one */
    char comment[2048];
    /* several devices: each one's peak_space is at its own moment (devices peak apart), so the
     * profile's total adds peaks that were never held at once; said, not summed into a moment
     * that never was (a moment's total across devices is no device's limit: each GPU runs out
     * of its own memory, at its own peak, as `peak` gives it) */
    size_t cl = (size_t)snprintf(comment, sizeof comment, "cumemhist: %s",
                                 ndevices > 1 ? "every device, each sample labelled (-tagfocus=device=N for one); peak_space is each device's "
                                                "own allocated peak, each at its own moment: unfiltered, it adds them, what the devices "
                                                "held at their peaks together, not one moment's total; "
                                              : "");
    int several = 0; /* OOMs on more than one device: which one oom_space is, before the devices' words */
    for (uint32_t k = 1; k < nro; k++) several |= ro[k].device != ro[0].device;
    for (int d = 0; d < ndevices && ndevices > 1 && several; d++)
        if (has_oom[d] && cl < sizeof comment)
            cl += (size_t)snprintf(comment + cl, sizeof comment - cl, "oom_space is device %d's (-tagfocus=device=%d), what was live at %s; ",
                                   (int)devices[d], (int)devices[d],
                                   !(nro && ro[0].device == devices[d]) ? "its first out-of-memory error"
                                   : ro[0].rank ? "the record's first out-of-memory error, as oom, whatif and flamegraph --at oom take it"
                                                : "its first out-of-memory error (no times: which device's came first is not known; the lowest device's, as oom, whatif and flamegraph --at oom take it)");
    for (int d = 0; d < ndevices && cl < sizeof comment; d++) {
        char at_end[48], at_peak[200], name[32];
        if (end[d].index >= 0) snprintf(at_end, sizeof at_end, "entry %lld", (long long)end[d].index);
        else snprintf(at_end, sizeof at_end, "no trace entries");
        if (!cmh_trace_has_history(s, devices[d]))
            snprintf(at_peak, sizeof at_peak, "no history: the peak is not known, peak_space is the end's");
        else {
            /* a trace that does not reach back to the run's start: its peak a lower bound (peak's rule) */
            cmh_peak_report tot;
            const char *least = "";
            if (cmh_peak_totals(s, devices[d], &tot) == CMH_OK) {
                if (cmh_peak_extent(&tot) == CMH_PEAK_AT_LEAST) least = "; the trace begins mid-run or its ring dropped entries: the true peak may be higher";
                cmh_peak_report_free(&tot);
            }
            if (peak[d].index >= 0) snprintf(at_peak, sizeof at_peak, "at the allocated peak (entry %lld%s)", (long long)peak[d].index, least);
            else snprintf(at_peak, sizeof at_peak, "at the allocated peak (before the first entry%s)", least);
        }
        char unsplit[160] = "", why[150];
        cmh_peak_report said = {.alloc_unsplit = peak[d].unsplit};
        if (cmh_trace_has_history(s, devices[d]) && cmh_unsplit_text(&said, why, sizeof why)) snprintf(unsplit, sizeof unsplit, " (%s)", why);
        if (devices[d] < 0) snprintf(name, sizeof name, "device -1 (pinned host)");
        else snprintf(name, sizeof name, "device %d", (int)devices[d]);
        char at_oom[320] = "";
        /* this device's place in the record's order of OOMs (cmh_record_ooms), the first of its own */
        const cmh_record_oom *mine = NULL;
        for (uint32_t k = 0; k < nro && !mine; k++)
            if (ro[k].device == devices[d]) mine = &ro[k];
        char place[200] = "", nth[24]; /* where the record has OOMs on more than one device: which came first */
        if (several && mine && mine->rank == 1) snprintf(place, sizeof place, ": the record's first out-of-memory error (of %u, by time)", nro);
        else if (several && mine && !mine->rank)
            snprintf(place, sizeof place, ": no times: which device's OOM came first is not known");
        else if (several && mine)
            snprintf(place, sizeof place, ": the record's %s (of %u; the first: device %d's #%u%s)", cmh_ordinal(mine->rank, nth, sizeof nth),
                     nro, (int)ro[0].device, ro[0].number, has_oom[d] ? ", a device this profile does not hold" : "");
        if (has_oom[d]) { /* `oom`'s number: the OOMs the ring dropped come first */
            const cmh_trace *tr = cmh_snapshot_trace(s, devices[d]);
            const cmh_entry *e = tr && oom[d].index >= 0 && oom[d].index < (int64_t)tr->nentries ? &s->entries[tr->first_entry + oom[d].index] : NULL;
            uint64_t freed;
            uint64_t nooms = tr ? tr->dropped_ooms : 0;
            for (uint32_t i = 0; tr && i < tr->nentries; i++)
                if (s->entries[tr->first_entry + i].action == CMH_ACT_OOM && !cmh_oom_retried(s, tr, i, &freed)) nooms++;
            char of[48] = "";
            if (nooms > 1) snprintf(of, sizeof of, ", the first %sof %llu", tr->dropped_ooms ? "kept " : "", (unsigned long long)nooms);
            if (e && e->action == CMH_ACT_OOM && !cmh_oom_retried(s, tr, (uint32_t)oom[d].index, &freed))
                snprintf(at_oom, sizeof at_oom, ", oom_space at out of memory #%llu (entry %lld%s, as `cumemhist oom` shows it)%s",
                         (unsigned long long)(tr->dropped_ooms + 1), (long long)oom[d].index, of, place);
            else snprintf(at_oom, sizeof at_oom, ", oom_space at its out-of-memory error (entry %lld)", (long long)oom[d].index);
        } else if (mine) { /* an OOM of its own, not the one oom_space holds */
            snprintf(at_oom, sizeof at_oom, ", out of memory #%u at entry %lld%s: oom_space 0 here, it holds device %d's", mine->number,
                     (long long)mine->index, place, oom_dev);
        } else {
            const cmh_trace *tr = cmh_snapshot_trace(s, devices[d]);
            if (tr && tr->dropped_ooms) /* (oom: "none of them left in the record") */
                snprintf(at_oom, sizeof at_oom, ", %llu out-of-memory error%s the ring dropped (what was live then is not known%s)",
                         (unsigned long long)tr->dropped_ooms, tr->dropped_ooms == 1 ? "" : "s", any_oom ? ": oom_space 0" : ": no oom_space");
            else if (any_oom) snprintf(at_oom, sizeof at_oom, ", no out-of-memory error (oom_space 0)");
        }
        cl += (size_t)snprintf(comment + cl, sizeof comment - cl, "%s%s, live at the end (%s) and %s%s%s", d ? "; " : "", name, at_end, at_peak,
                               unsplit, at_oom);
    }
    /* pinned host memory the profile does not hold, said where pprof shows the profile's words
     * (-comments), as on stderr: its total is the devices' (it read 158 MB live of a record whose
     * leaks and owners also had a 4 MiB pinned block, with nothing in the file to say so) */
    int host_in = 0;
    for (int d = 0; d < ndevices; d++) host_in |= devices[d] < 0;
    uint64_t host_live = 0, host_entries = 0, host = host_in ? 0 : cmh_host_allocations(s, &host_live, &host_entries);
    if (host && cl < sizeof comment)
        cl += (size_t)snprintf(comment + cl, sizeof comment - cl,
                               "; pinned host memory left out (%llu allocation%s, %llu live at the end): export --device -1 for it",
                               (unsigned long long)host, host == 1 ? "" : "s", (unsigned long long)host_live);
    uint64_t cid = str_id(&st.strings, comment, &nomem);
    for (uint32_t i = 0; i < st.strings.n && !nomem; i++) field_len(&out, 6, st.strings.str[i], strlen(st.strings.str[i]));
    field_int(&out, 9, (uint64_t)tns);
    field_int(&out, 13, cid);
    field_int(&out, 14, deflt);
    nomem |= out.nomem || msg.nomem || sub.nomem || packed.nomem || locs.nomem || fns.nomem;
    rc = nomem ? CMH_ENOMEM : CMH_OK;
    if (rc == CMH_OK) { /* gzip */
        z_stream z;
        memset(&z, 0, sizeof z);
        /* the gzip header's comment says whose it is (CMH_PPROF_GZIP_MARK): the one overwrite rule
         * knows our earlier profile by it, not by a gzip header any `gzip -n` file has; gzip
         * readers (Go's compress/gzip for go tool pprof, pako for Speedscope) skip it */
        gz_header gh;
        memset(&gh, 0, sizeof gh);
        gh.os = 3; /* Unix, as zlib writes without a header of ours */
        gh.comment = (Bytef *)CMH_PPROF_GZIP_MARK;
        if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) rc = CMH_ENOMEM;
        else if (deflateSetHeader(&z, &gh) != Z_OK) {
            deflateEnd(&z);
            rc = CMH_ENOMEM;
        } else {
            unsigned char chunk[65536];
            z.next_in = out.p ? out.p : (unsigned char *)"";
            z.avail_in = (uInt)out.n;
            int zr;
            do {
                z.next_out = chunk;
                z.avail_out = sizeof chunk;
                zr = deflate(&z, Z_FINISH);
                if (fwrite(chunk, 1, sizeof chunk - z.avail_out, fp) != sizeof chunk - z.avail_out) rc = CMH_EIO;
            } while (zr == Z_OK && rc == CMH_OK);
            if (zr != Z_STREAM_END && rc == CMH_OK) rc = CMH_EIO;
            deflateEnd(&z);
        }
    }
    free(out.p), free(msg.p), free(sub.p), free(packed.p), free(locs.p), free(fns.p);
    free(loc_of);
    free(used);
    free(m);
    cmh_oa_free(&funcs);
    cmh_snapshot_free(&st);
    free(progs);
    for (int d = 0; d < ndevices; d++) cmh_live_free(&end[d]), cmh_live_free(&peak[d]), cmh_live_free(&oom[d]);
    free(end), free(peak), free(oom), free(has_oom), free(ro);
    cmh_sites_free(own);
    if (rc == CMH_OK && ferror(fp)) rc = CMH_EIO;
    return rc;
}
