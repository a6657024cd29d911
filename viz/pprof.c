/*
 * pprof.c - pprof's profile.proto (github.com/google/pprof, proto/profile.proto), gzipped, as
 * `go tool pprof` and Speedscope read it: live bytes and blocks at the end and at the allocated
 * peak, four sample types, one sample per stack.  pprof gives a leaf frame the "flat" bytes, so
 * each stack starts at its site (cmh_sites_drawn): the machinery inside it
 * (torch::unwind::unwind(), the caching allocator, the dispatcher, CPython, ctypes, the driver)
 * is left out, as every report leaves it out, and "flat" is what `peak` and `leaks` give the
 * site; a third-party package's frames inside the site (a library's allocating function under
 * site-packages, called from the user's line) are not machinery and stay, the flat bytes theirs.
 *
 * The protobuf is written by a small wire-format writer of our own rather than protobuf-c: the
 * profile needs only varints and length-delimited fields of six message types, and protobuf-c
 * would add protoc-c and generated code to the build for that.  Messages are built inside-out
 * into byte buffers (a nested message is its length, then its bytes).  gzip is zlib's.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cumemhist/owners.h"
#include "cumemhist/pictures.h"
#include "cumemhist/reports.h"
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
    uint32_t stack;
    int64_t v[4]; /* end bytes, end blocks, peak bytes, peak blocks */
} merged;

static int cmp_stack(const void *a, const void *b)
{
    const merged *x = a, *y = b;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static uint32_t str_id(cmh_strtab *t, const char *s, int *nomem)
{
    uint32_t id = 0;
    if (cmh_strtab_intern(t, s, strlen(s), &id)) *nomem = 1;
    return id;
}

int cmh_export_pprof(const cmh_snapshot *s, int device, FILE *fp)
{
    cmh_live_at end, peak;
    char why[256];
    int rc;
    /* which leaf frames are the allocator's own, and each stack's owner (grouped by stack: its own) */
    cmh_site_opts by_stack = {CMH_GROUP_STACK, 0, NULL, 0};
    cmh_sites *g = cmh_sites_new(s, &by_stack, &rc, why, sizeof why);
    if (!g) return rc;
    if ((rc = cmh_live_compute(s, device, CMH_AT_END, 0, &end))) {
        cmh_sites_free(g);
        return rc;
    }
    if ((rc = cmh_live_compute(s, device, CMH_AT_PEAK, 0, &peak))) {
        cmh_live_free(&end);
        cmh_sites_free(g);
        return rc;
    }
    /* one sample per stack, with both moments' figures */
    uint32_t nm = 0;
    merged *m = malloc((end.nstacks + peak.nstacks + 1) * sizeof *m);
    cmh_snapshot st; /* only for its string table: pprof's, with "" first */
    cmh_snapshot_init(&st);
    buf out = {0}, msg = {0}, sub = {0}, packed = {0};
    cmh_oatab funcs;
    cmh_oa_init(&funcs, sizeof(fslot));
    uint64_t *loc_of = calloc(s->nframes + 1, sizeof *loc_of); /* frame -> location id (frame + 1) once written */
    unsigned char *used = calloc(s->nmodules + 1, 1);           /* modules a location names */
    int nomem = !m || !loc_of || !used;
    for (uint32_t i = 0; !nomem && i < end.nstacks; i++)
        m[nm++] = (merged){end.stacks[i].stack, {(int64_t)end.stacks[i].bytes, (int64_t)end.stacks[i].blocks, 0, 0}};
    for (uint32_t i = 0; !nomem && i < peak.nstacks; i++)
        m[nm++] = (merged){peak.stacks[i].stack, {0, 0, (int64_t)peak.stacks[i].bytes, (int64_t)peak.stacks[i].blocks}};
    if (!nomem && nm) {
        qsort(m, nm, sizeof *m, cmp_stack);
        uint32_t k = 0;
        for (uint32_t i = 0; i < nm; i++) {
            if (k && m[k - 1].stack == m[i].stack) {
                for (int j = 0; j < 4; j++) m[k - 1].v[j] += m[i].v[j];
            } else m[k++] = m[i];
        }
        nm = k;
    }
    /* sample types */
    static const char *const types[4][2] = {{"live_space", "bytes"}, {"live_objects", "count"}, {"peak_space", "bytes"}, {"peak_objects", "count"}};
    for (int j = 0; j < 4 && !nomem; j++) {
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
            uint32_t f = nf ? s->stack_frames[sk->first + k] : s->nframes; /* a stackless sample: one "<no stack>" frame */
            if (nf && !cmh_sites_drawn(g, m[i].stack, k)) continue; /* machinery inside the site */
            if (!loc_of[f]) {
                const cmh_frame *fr = nf ? &s->frames[f] : NULL;
                const char *name = fr ? cmh_str(s, fr->name) : "<no stack>", *file = fr ? cmh_str(s, fr->filename) : "";
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
        for (int j = 0; j < 4; j++) varint(&packed, (uint64_t)m[i].v[j]);
        field_len(&msg, 2, packed.p, packed.n); /* value (packed) */
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
    /* one mapping per module the stacks use, already symbolized: pprof has nothing to look up */
    for (uint32_t i = 0; i < s->nmodules && !nomem; i++) {
        if (!used[i]) continue;
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
    int64_t tns = s->dump_time_ns ? s->dump_time_ns : end.time_ns;
    uint64_t deflt = str_id(&st.strings, "live_space", &nomem);
    /* the moments, as `peak` names them: no entry -1 (a record with no entries), and no peak
     * where there is no history (enabled=state: the peak values are the end's) */
    char comment[256], at_end[48], at_peak[96];
    if (end.index >= 0) snprintf(at_end, sizeof at_end, "entry %lld", (long long)end.index);
    else snprintf(at_end, sizeof at_end, "no trace entries");
    if (!cmh_trace_has_history(s, device))
        snprintf(at_peak, sizeof at_peak, "no history: the peak is not known, peak_space is the end's");
    else if (peak.index >= 0) snprintf(at_peak, sizeof at_peak, "at the allocated peak (entry %lld)", (long long)peak.index);
    else snprintf(at_peak, sizeof at_peak, "at the allocated peak (before the first entry)");
    snprintf(comment, sizeof comment, "cumemhist: device %d, live at the end (%s) and %s", device, at_end, at_peak);
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
        if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) rc = CMH_ENOMEM;
        else {
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
    cmh_live_free(&end);
    cmh_live_free(&peak);
    cmh_sites_free(g);
    if (rc == CMH_OK && ferror(fp)) rc = CMH_EIO;
    return rc;
}
