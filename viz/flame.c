/*
 * flame.c - live bytes by stack at one moment: folded stacks and a static SVG flamegraph.
 *
 * The moment is replayed to (the end: the final state; the allocated peak: the `peak` report's
 * entry; the n-th OOM; any entry); its allocated blocks are summed by stack.  The flamegraph is
 * an icicle, the process at the top and the allocating frame at the bottom of each column; a
 * frame's width is its bytes; its tooltip (<title>) says its bytes, share and blocks.  The
 * user's own site frame of each stack (cumemhist/sites.h) is outlined; machinery is grey.  Both
 * forms start each stack at its site (cmh_sites_drawn): the machinery inside it (the allocator,
 * PyTorch's stack walker, its dispatcher, CPython's calls, ctypes) is left out, as the reports
 * leave it out, so the bottom of a column is the line the reports name, or below it the
 * third-party package that line called (not machinery: a library's allocating function).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/pictures.h"
#include "cumemhist/reports.h"
#include "oatab.h"
#include "svg.h"

typedef struct sslot {
    uint64_t key; /* stack + 1 */
    uint64_t bytes, blocks;
} sslot;

static void on_block(void *arg, const cmh_live_block *b)
{
    cmh_oatab *t = arg;
    if (b->state != CMH_BLOCK_ACTIVE_ALLOCATED) return;
    int fresh;
    sslot *s = cmh_oa_get(t, (uint64_t)b->stack + 1, &fresh);
    if (!s) return; /* counted below: the sums would not match, and the caller says so */
    s->bytes += b->size;
    s->blocks += !b->more;
}

static int cmp_ls(const void *a, const void *b)
{
    const cmh_live_stack *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

int cmh_live_compute(const cmh_snapshot *s, int device, int at, int64_t n, cmh_live_at *out)
{
    memset(out, 0, sizeof *out);
    int64_t want = INT64_MAX; /* the end */
    const cmh_trace *tr = cmh_snapshot_trace(s, device);
    uint32_t nent = tr ? tr->nentries : 0;
    if (at == CMH_AT_PEAK) {
        cmh_peak_report p;
        int rc = cmh_peak_compute(s, device, NULL, &p);
        if (rc != CMH_OK) return rc;
        want = p.alloc_index;
        out->unsplit = p.alloc_unsplit;
        cmh_peak_report_free(&p);
    } else if (at == CMH_AT_OOM) {
        /* oom's #n: the OOMs the program saw (a retry that succeeded is none); #1 of a record whose
         * every OOM was such a retry is its first (as cmh_oom_first says) */
        int64_t k = 0, asked;
        uint64_t freed;
        want = -2;
        for (uint32_t i = 0; i < nent && want == -2; i++)
            if (s->entries[tr->first_entry + i].action == CMH_ACT_OOM && !cmh_oom_retried(s, tr, i, &freed) && ++k == n) want = i;
        if (want == -2 && n == 1 && (want = cmh_oom_first(s, tr, &asked)) < 0) want = -2;
        if (want == -2) return CMH_EINVAL;
    } else if (at == CMH_AT_ENTRY) {
        if (n < -1 || n >= (int64_t)nent) return CMH_EINVAL;
        want = n;
    }
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    while (want == INT64_MAX || cmh_replay_position(r) < want)
        if (!cmh_replay_step(r)) break;
    int rc = cmh_replay_status(r);
    cmh_oatab t;
    cmh_oa_init(&t, sizeof(sslot));
    if (rc == CMH_OK) cmh_replay_blocks(r, on_block, &t);
    out->index = want == INT64_MAX ? (int64_t)nent - 1 : want;
    const cmh_entry *e = out->index >= 0 ? cmh_replay_entry(r, out->index) : NULL;
    out->time_ns = want == INT64_MAX && s->dump_time_ns ? s->dump_time_ns : e ? cmh_entry_time(s, e) : 0;
    out->stacks = rc == CMH_OK ? malloc((t.n ? t.n : 1) * sizeof *out->stacks) : NULL;
    if (rc == CMH_OK && !out->stacks) rc = CMH_ENOMEM;
    for (uint32_t i = 0; rc == CMH_OK && i < t.cap; i++) {
        if (!cmh_oa_keyat(&t, i)) continue;
        const sslot *sl = cmh_oa_at(&t, i);
        out->stacks[out->nstacks++] = (cmh_live_stack){(uint32_t)(sl->key - 1), sl->bytes, sl->blocks};
        out->bytes += sl->bytes;
        out->blocks += sl->blocks;
    }
    if (rc == CMH_OK && out->nstacks) qsort(out->stacks, out->nstacks, sizeof *out->stacks, cmp_ls);
    cmh_oa_free(&t);
    cmh_replay_free(r);
    if (rc != CMH_OK) cmh_live_free(out);
    return rc;
}

void cmh_live_free(cmh_live_at *l)
{
    free(l->stacks);
    l->stacks = NULL;
    l->nstacks = 0;
}

/* Each frame's stand-in: the first frame that reads the same (function, file and line): two
 * return addresses on one line (an unrolled loop, a call made twice) are one frame to a reader,
 * and the folded lines and the SVG's boxes merge them, as flamegraph.pl and the view do.
 * NULL: out of memory. */
typedef struct lslot {
    uint64_t key; /* the label's hash (0 never: | 1) */
    uint32_t frame;
} lslot;

static uint32_t *canon_frames(const cmh_snapshot *s)
{
    uint32_t *c = malloc((s->nframes ? s->nframes : 1) * sizeof *c);
    if (!c) return NULL;
    cmh_oatab t;
    cmh_oa_init(&t, sizeof(lslot));
    char lab[1024], other[1024];
    for (uint32_t i = 0; i < s->nframes; i++) {
        cmh_svg_frame(s, &s->frames[i], lab, sizeof lab);
        uint64_t h = 1469598103934665603ull;
        for (const char *p = lab; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
        int fresh = 0;
        lslot *sl = cmh_oa_get(&t, h | 1, &fresh);
        c[i] = i;
        if (!sl) continue; /* (no memory for the table: this frame stands for itself) */
        if (fresh) sl->frame = i;
        else if (cmh_svg_frame(s, &s->frames[sl->frame], other, sizeof other), !strcmp(lab, other)) c[i] = sl->frame;
    }
    cmh_oa_free(&t);
    return c;
}

typedef struct fline {
    uint32_t at, len; /* its canonical frames in seq[at, at + len), outermost first */
    uint32_t first;   /* its first stack's place in the list (the order among equals) */
    uint64_t bytes;
} fline;

static const uint32_t *g_seq; /* (qsort's comparator has no argument) */

static int cmp_fline_seq(const void *a, const void *b)
{
    const fline *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    int d = x->len ? memcmp(g_seq + x->at, g_seq + y->at, x->len * sizeof *g_seq) : 0;
    if (d) return d;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int cmp_fline_bytes(const void *a, const void *b)
{
    const fline *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

int cmh_flame_folded(const cmh_snapshot *s, const cmh_sites *g, const cmh_live_at *l, FILE *fp)
{
    /* one line per stack as the reader sees it: stacks whose drawn frames read the same are
     * one line, their bytes summed (a folded file's lines are keys: cs336's 1152 lines were 34
     * stacks, one repeated 128 times) */
    uint32_t *canon = canon_frames(s), *seq = NULL, nseq = 0, cap = 0;
    fline *ln = malloc((l->nstacks ? l->nstacks : 1) * sizeof *ln);
    int rc = canon && ln ? CMH_OK : CMH_ENOMEM;
    for (uint32_t i = 0; rc == CMH_OK && i < l->nstacks; i++) {
        const cmh_live_stack *x = &l->stacks[i];
        const cmh_stack *st = x->stack && x->stack < s->nstacks ? &s->stacks[x->stack] : NULL;
        ln[i] = (fline){nseq, 0, i, x->bytes};
        for (uint32_t k = st ? st->count : 0; k-- > 0;) { /* outermost first */
            if (g && !cmh_sites_drawn(g, x->stack, k)) continue; /* the machinery inside the site, left out */
            if (nseq == cap) {
                uint32_t nc = cap ? cap * 2 : 1024, *ns = realloc(seq, nc * sizeof *ns);
                if (!ns) {
                    rc = CMH_ENOMEM;
                    break;
                }
                seq = ns, cap = nc;
            }
            seq[nseq++] = canon[s->stack_frames[st->first + k]];
            ln[i].len++;
        }
    }
    uint32_t n = 0;
    if (rc == CMH_OK && l->nstacks) {
        g_seq = seq;
        qsort(ln, l->nstacks, sizeof *ln, cmp_fline_seq);
        for (uint32_t i = 0; i < l->nstacks; i++) {
            if (n && cmp_fline_seq(&(fline){ln[i].at, ln[i].len, ln[n - 1].first, 0}, &ln[n - 1]) == 0) ln[n - 1].bytes += ln[i].bytes;
            else ln[n++] = ln[i];
        }
        qsort(ln, n, sizeof *ln, cmp_fline_bytes);
    }
    char lab[1024];
    for (uint32_t i = 0; rc == CMH_OK && i < n; i++) {
        if (!ln[i].len) fprintf(fp, "<no stack: %s>", cmh_no_stack_reason(s)); /* peak's and owners' words */
        for (uint32_t k = 0; k < ln[i].len; k++) {
            cmh_svg_frame(s, &s->frames[seq[ln[i].at + k]], lab, sizeof lab);
            for (char *c = lab; *c; c++)
                if (*c == ';' || *c == '\n') *c = ':';
            if (k) fputc(';', fp);
            fputs(lab, fp);
        }
        fprintf(fp, " %" PRIu64 "\n", ln[i].bytes);
    }
    free(canon);
    free(seq);
    free(ln);
    if (rc != CMH_OK) return rc;
    return ferror(fp) ? CMH_EIO : CMH_OK;
}

/* ---- the SVG ---- */

typedef struct node {
    uint32_t frame; /* UINT32_MAX: the root; UINT32_MAX - 1: "no stack" */
    uint32_t child, next; /* indices, 0 = none (node 0 is the root) */
    uint64_t bytes, blocks;
    uint8_t site;
    const char *nouser; /* a site that is no code of the user's: "no Python frame" (cmh_sites_no_user_frame) */
} node;

typedef struct tree {
    node *n;
    uint32_t count, cap;
    int depth;
} tree;

static int64_t add_child(tree *t, uint32_t parent, uint32_t frame)
{
    for (uint32_t c = t->n[parent].child; c; c = t->n[c].next)
        if (t->n[c].frame == frame) return c;
    if (t->count == t->cap) {
        uint32_t nc = t->cap * 2;
        node *nn = realloc(t->n, nc * sizeof *nn);
        if (!nn) return -1;
        t->n = nn;
        t->cap = nc;
    }
    uint32_t i = t->count++;
    t->n[i] = (node){frame, 0, t->n[parent].child, 0, 0, 0, NULL};
    t->n[parent].child = i;
    return i;
}

static int cmp_child_bytes(const void *a, const void *b, void *arg)
{
    const tree *t = arg;
    const node *x = &t->n[*(const uint32_t *)a], *y = &t->n[*(const uint32_t *)b];
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->frame < y->frame ? -1 : x->frame > y->frame;
}

typedef struct drawc {
    const cmh_snapshot *s;
    const cmh_sites *g;
    tree *t;
    FILE *fp;
    double scale; /* px per byte */
    int x0, y0, rowh;
    uint64_t total;
} drawc;

static unsigned hash_str(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* One node's box; 0 when it is too narrow to draw (nor are its children). */
static int draw_node(drawc *d, uint32_t i, double x, int depth)
{
    const node *nd = &d->t->n[i];
    double w = (double)nd->bytes * d->scale;
    if (w < 0.4) return 0;
    char lab[1024];
    int machinery = 0;
    if (nd->frame == UINT32_MAX) snprintf(lab, sizeof lab, "all live memory");
    else if (nd->frame == UINT32_MAX - 1) snprintf(lab, sizeof lab, "<no stack: %s>", cmh_no_stack_reason(d->s));
    else {
        char fr[900];
        cmh_svg_frame(d->s, &d->s->frames[nd->frame], fr, sizeof fr);
        if (nd->nouser) snprintf(lab, sizeof lab, "(%s: %s)", nd->nouser, fr);
        else snprintf(lab, sizeof lab, "%s", fr);
        machinery = d->g && cmh_sites_machinery(d->g, nd->frame);
    }
    double y = d->y0 + depth * d->rowh;
    unsigned h = hash_str(lab);
    char fill[32];
    if (nd->frame >= UINT32_MAX - 1) snprintf(fill, sizeof fill, "#c9ced8");
    else if (machinery) snprintf(fill, sizeof fill, "hsl(220,8%%,%u%%)", 78 + h % 12);
    else snprintf(fill, sizeof fill, "hsl(%u,75%%,%u%%)", 12 + h % 34, 58 + (h >> 8) % 14);
    fprintf(d->fp, "<g><title>");
    cmh_svg_text(d->fp, lab);
    fprintf(d->fp, " \xe2\x80\x94 %s (%.1f%%), %" PRIu64 " block%s%s</title>", cmh_svg_size((double)nd->bytes),
            d->total ? 100.0 * (double)nd->bytes / (double)d->total : 0.0, nd->blocks, nd->blocks == 1 ? "" : "s",
            nd->site ? "; the allocation site" : machinery ? "; machinery" : "");
    fprintf(d->fp, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"%s data-bytes=\"%" PRIu64 "\"/>", x, y, w,
            d->rowh - 1, fill, nd->site ? " class=\"site\"" : "", nd->bytes);
    int chars = (int)((w - 6) / 6.6);
    if (chars >= 3) {
        fprintf(d->fp, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + d->rowh - 5);
        size_t len = strlen(lab);
        if ((int)len > chars) {
            lab[chars > 2 ? chars - 2 : 0] = 0;
            cmh_svg_text(d->fp, lab);
            fputs("..", d->fp);
        } else cmh_svg_text(d->fp, lab);
        fputs("</text>", d->fp);
    }
    fputs("</g>\n", d->fp);
    return 1;
}

/* Every node, parents before children and the biggest child first, as a depth-first walk with a
 * stack of its own: a recursive walk overflowed the thread's stack on a 20,000-frame stack (deep
 * recursion in the program, PyTorch's C++ frames), some 7,000 levels down. */
typedef struct dpend {
    uint32_t i;
    int depth;
    double x;
} dpend;

static int draw(drawc *d)
{
    uint32_t cap = 256, n = 0, *kids = NULL, capk = 0;
    dpend *st = malloc(cap * sizeof *st);
    if (!st) return CMH_ENOMEM;
    st[n++] = (dpend){0, 0, d->x0};
    int rc = CMH_OK;
    while (n) {
        dpend f = st[--n];
        if (!draw_node(d, f.i, f.x, f.depth)) continue;
        uint32_t nc = 0;
        for (uint32_t c = d->t->n[f.i].child; c; c = d->t->n[c].next) nc++;
        if (!nc) continue;
        if (nc > capk) {
            uint32_t *nk = realloc(kids, nc * sizeof *nk);
            if (!nk) goto nomem;
            kids = nk;
            capk = nc;
        }
        if (n + nc > cap) {
            uint32_t ncap = cap;
            while (ncap < n + nc) ncap *= 2;
            dpend *ns = realloc(st, ncap * sizeof *ns);
            if (!ns) goto nomem;
            st = ns;
            cap = ncap;
        }
        uint32_t k = 0;
        for (uint32_t c = d->t->n[f.i].child; c; c = d->t->n[c].next) kids[k++] = c;
        qsort_r(kids, nc, sizeof *kids, cmp_child_bytes, d->t); /* children, biggest first */
        double cx = f.x;
        for (uint32_t j = 0; j < nc; j++) { /* pushed in reverse: the biggest is drawn next */
            st[n + nc - 1 - j] = (dpend){kids[j], f.depth + 1, cx};
            cx += (double)d->t->n[kids[j]].bytes * d->scale;
        }
        n += nc;
    }
    goto done;
nomem:
    rc = CMH_ENOMEM;
done:
    free(kids);
    free(st);
    return rc;
}

int cmh_flame_svg(const cmh_snapshot *s, const cmh_sites *g, const cmh_live_at *l, const char *title, FILE *fp)
{
    tree t = {malloc(1024 * sizeof(node)), 1, 1024, 0};
    uint32_t *canon = canon_frames(s); /* a line's boxes are one box, as its folded lines are one line */
    if (!t.n || !canon) {
        free(t.n);
        free(canon);
        return CMH_ENOMEM;
    }
    t.n[0] = (node){UINT32_MAX, 0, 0, 0, 0, 0, NULL};
    for (uint32_t i = 0; i < l->nstacks; i++) {
        const cmh_live_stack *x = &l->stacks[i];
        const cmh_stack *st = x->stack && x->stack < s->nstacks ? &s->stacks[x->stack] : NULL;
        const cmh_frame *site = g && st ? cmh_sites_site_of(g, x->stack) : NULL;
        t.n[0].bytes += x->bytes;
        t.n[0].blocks += x->blocks;
        uint32_t at = 0;
        int depth = 0;
        if (!st || !st->count) {
            int64_t c = add_child(&t, 0, UINT32_MAX - 1);
            if (c < 0) goto nomem;
            t.n[c].bytes += x->bytes, t.n[c].blocks += x->blocks;
            depth = 1;
        }
        for (uint32_t k = st ? st->count : 0; k-- > 0;) {
            if (g && !cmh_sites_drawn(g, x->stack, k)) continue;
            uint32_t f = s->stack_frames[st->first + k];
            int64_t c = add_child(&t, at, canon[f]);
            if (c < 0) goto nomem;
            at = (uint32_t)c;
            t.n[at].bytes += x->bytes;
            t.n[at].blocks += x->blocks;
            if (site && &s->frames[f] == site) {
                t.n[at].site = 1;
                /* a site of PyTorch's C++ alone (an autograd engine thread, NCCL): said, as the reports say it */
                const char *why = cmh_sites_no_user_frame(g, x->stack);
                if (why) t.n[at].nouser = why;
            }
            depth++;
        }
        if (depth > t.depth) t.depth = depth;
    }
    const int W = 1200, rowh = 17, head = 46;
    int H = head + (t.depth + 1) * rowh + 24;
    fprintf(fp, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" font-size=\"11\" "
                "data-bytes=\"%" PRIu64 "\" data-blocks=\"%" PRIu64 "\" data-entry=\"%" PRId64 "\">\n",
            W, H, W, H, l->bytes, l->blocks, l->index);
    fputs("<style>rect{stroke:#fff;stroke-width:0.5}rect.site{stroke:#222;stroke-width:1.2}text{fill:#222;pointer-events:none}"
          "g:hover rect{stroke:#000;stroke-width:1}.t{font:bold 15px sans-serif}.sub{font:12px sans-serif;fill:#555}</style>\n",
          fp);
    fprintf(fp, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\" stroke=\"none\"/>\n<text class=\"t\" x=\"10\" y=\"20\">", W, H);
    cmh_svg_text(fp, title ? title : "live memory");
    fprintf(fp, "</text><text class=\"sub\" x=\"10\" y=\"37\">%s in %" PRIu64 " block%s by allocating stack; outlined: the "
                "allocation site (the first frame of your own code); grey: machinery. Hover for figures.</text>\n",
            cmh_svg_size((double)l->bytes), l->blocks, l->blocks == 1 ? "" : "s");
    drawc d = {s, g, &t, fp, l->bytes ? (double)(W - 20) / (double)l->bytes : 0, 10, head, rowh, l->bytes};
    if (l->bytes) {
        if (draw(&d) != CMH_OK) goto nomem;
    } else fprintf(fp, "<text class=\"sub\" x=\"10\" y=\"%d\">nothing live at this moment</text>\n", head + 14);
    fputs("</svg>\n", fp);
    free(t.n);
    free(canon);
    return ferror(fp) ? CMH_EIO : CMH_OK;
nomem:
    free(t.n);
    free(canon);
    return CMH_ENOMEM;
}

/* ---- _memory_viz.py's folded lines ---- */

/* _memory_viz.py's _frame_filter: the frames its flamegraphs leave out (substrings of the
 * function's or the file's name) */
static int memviz_frame_shown(const char *name, const char *file)
{
    static const char *const omit_functions[] = {"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                                                 "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"};
    static const char *const omit_files[] = {"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                                             "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                                             "cpython/abstract.h"};
    for (size_t i = 0; i < sizeof omit_functions / sizeof *omit_functions; i++)
        if (strstr(name, omit_functions[i])) return 0;
    for (size_t i = 0; i < sizeof omit_files / sizeof *omit_files; i++)
        if (strstr(file, omit_files[i])) return 0;
    return 1;
}

/* a string as the script writes it: raw, but a NUL the model holds as C0 80 (cmh_str_nul) is
 * the NUL byte it was in the pickle */
static void put_raw(const char *s, FILE *fp)
{
    for (const char *p = s; *p; p++) {
        if ((unsigned char)p[0] == 0xC0 && (unsigned char)p[1] == 0x80) fputc(0, fp), p++;
        else fputc(*p, fp);
    }
}

int cmh_memviz_folded(const cmh_snapshot *s, int device, int segs, FILE *fp)
{
    static const char *const states[] = {"inactive", "active_allocated", "active_pending_free"};
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (device != CMH_ALL_DEVICES && g->device != device) continue;
        char prefix[96];
        if (segs) snprintf(prefix, sizeof prefix, "stream_%" PRIu64 ";seg_%" PRIu64, g->stream, g->addr);
        else snprintf(prefix, sizeof prefix, "stream_%" PRIu64, g->stream);
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s->blocks[g->first_block + k];
            const char *state = b->state < 3 ? states[b->state] : "inactive";
            fprintf(fp, "%s;%s;", prefix, state);
            const cmh_stack *st = b->stack && b->stack < s->nstacks ? &s->stacks[b->stack] : NULL;
            if (!st || !st->count) fputs("<non-python>", fp);
            int shown = 0;
            for (uint32_t j = st ? st->count : 0; j-- > 0;) { /* outermost first */
                const cmh_frame *f = &s->frames[s->stack_frames[st->first + j]];
                const char *name = cmh_str(s, f->name), *file = cmh_str(s, f->filename);
                if (!memviz_frame_shown(name, file)) continue;
                const char *slash = strrchr(file, '/');
                if (shown++) fputc(';', fp);
                put_raw(slash ? slash + 1 : file, fp);
                fprintf(fp, ":%" PRId64 ":", f->line);
                put_raw(name, fp);
            }
            fprintf(fp, " %" PRIu64 "\n", b->requested);
            if (b->size != b->requested) fprintf(fp, "%s;%s;<gaps> %" PRId64 "\n", prefix, state, (int64_t)(b->size - b->requested));
        }
    }
    return ferror(fp) ? CMH_EIO : CMH_OK;
}
