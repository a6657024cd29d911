/*
 * symbolize.c - making a recorded snapshot's native frames readable after the fact: C++ names
 * demangled, and file:line (inlined calls as frames of their own) from the binaries' DWARF.
 *
 * The recorder names each PC at dump time (its ELF symbol) and keeps the module map: each
 * module's path, load address and GNU build id.  Here the binaries on disk are opened again with
 * elfutils' libdwfl, each reported at the address it had in the recorded process, and every
 * frame not yet given a line gets one.  A binary whose build id differs from the recorded one
 * is a different binary: it is not used, and the result says which.  debuginfod is never asked
 * (no network); separate debug files are found the standard way (build-id links, .debug dirs).
 *
 * Names are demangled with libstdc++'s own demangler, whatever mode the module was loaded in
 * when it was recorded.  Nothing is changed for a frame that already has a line, so running it
 * twice, or on `cumemhist symbolize`'s output, does nothing more.
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <elf.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemhist/snapshot.h"
#include "cumemhist/symbolize.h"
#include "grow.h"
#include "oatab.h"

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

typedef struct dslot {
    uint64_t key; /* string id + 1 */
    uint64_t id;  /* its demangled string's id */
} dslot;

static int demangled_id(cmh_snapshot *s, cmh_oatab *cache, uint32_t id, uint32_t *out, int *changed)
{
    *out = id;
    *changed = 0;
    const char *n = cmh_str(s, id);
    size_t base = cmh_name_base_len(n);
    if ((n[0] != '_' || n[1] != 'Z') && !n[base]) return CMH_OK;
    int created;
    dslot *d = cmh_oa_get(cache, (uint64_t)id + 1, &created);
    if (!d) return CMH_ENOMEM;
    if (!created) {
        *out = (uint32_t)d->id;
        *changed = *out != id;
        return CMH_OK;
    }
    int status = -1;
    char *dem = n[0] == '_' && n[1] == 'Z' ? __cxa_demangle(n, NULL, NULL, &status) : NULL;
    uint32_t nid = id;
    int rc = CMH_OK;
    if (status == 0 && dem) rc = cmh_strtab_intern(&s->strings, dem, cmh_name_base_len(dem), &nid);
    else if (n[base]) rc = cmh_strtab_intern(&s->strings, n, base, &nid); /* "f.isra.0": f */
    free(dem);
    d = cmh_oa_find(cache, (uint64_t)id + 1); /* the intern may not move the cache, but be plain */
    if (d) d->id = nid;
    *out = nid;
    *changed = nid != id;
    return rc;
}

static int demangle_all(cmh_snapshot *s, cmh_symbolize_result *r)
{
    cmh_oatab cache;
    cmh_oa_init(&cache, sizeof(dslot));
    int rc = CMH_OK;
    for (uint32_t i = 0; i < s->nframes && rc == CMH_OK; i++) {
        int changed;
        const char *file = cmh_str(s, s->frames[i].filename);
        size_t fl = strlen(file);
        if (fl > 3 && !strcmp(file + fl - 3, ".py")) continue; /* Python's names are what they say ("Model.part") */
        rc = demangled_id(s, &cache, s->frames[i].name, &s->frames[i].name, &changed);
        r->demangled += (uint32_t)changed;
    }
    for (uint32_t i = 0; i < s->nkernels && rc == CMH_OK; i++) {
        int changed;
        rc = demangled_id(s, &cache, s->kernels[i].name, &s->kernels[i].name, &changed);
    }
    cmh_oa_free(&cache);
    return rc;
}

/* ---- lines ---- */

typedef struct expansion {
    uint32_t first, count; /* into the new frames: innermost first */
} expansion;

static void hex(const unsigned char *b, int n, char *out, size_t cap)
{
    size_t k = 0;
    for (int i = 0; i < n && k + 3 <= cap; i++) k += (size_t)snprintf(out + k, cap - k, "%02x", b[i]);
    out[k] = 0;
}

/* The name of an inlined subroutine (or a subprogram): its linkage name demangled, else DW_AT_name. */
static const char *die_name(Dwarf_Die *die, char **to_free)
{
    Dwarf_Attribute a;
    Dwarf_Die origin;
    *to_free = NULL;
    Dwarf_Die *d = die;
    if (dwarf_attr_integrate(die, DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &origin)) d = &origin;
    const char *link = NULL;
    if (dwarf_attr_integrate(d, DW_AT_linkage_name, &a) || dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &a))
        link = dwarf_formstring(&a);
    if (link && link[0] == '_' && link[1] == 'Z') {
        int status = -1;
        char *dem = __cxa_demangle(link, NULL, NULL, &status);
        if (status == 0 && dem) return *to_free = dem;
        free(dem);
    }
    const char *n = dwarf_diename(d);
    return n ? n : link;
}

static int add_frame(cmh_snapshot *s, const cmh_frame *like, const char *name, const char *file, int64_t line, uint32_t *id)
{
    cmh_frame f = *like;
    if (name && cmh_strtab_intern(&s->strings, name, strlen(name), &f.name) != CMH_OK) return CMH_ENOMEM;
    if (file && cmh_strtab_intern(&s->strings, file, strlen(file), &f.filename) != CMH_OK) return CMH_ENOMEM;
    f.line = line;
    return cmh_snapshot_add_frame(s, &f, id);
}

/* ---- inlined calls: per compilation unit, an index of its inlined subroutines' address ranges ----
 * dwarf_getscopes walks a CU's whole DIE tree for every address (90% of the time, measured); this
 * walks it once per CU and answers each address by binary search.  Ranges of inlined
 * subroutines nest (a DIE's ranges lie within its parent's), so sorted by start (outer first on a
 * tie), the innermost range holding pc is an ancestor of the last range starting at or before pc. */

typedef struct iscope {
    uint64_t lo, hi; /* DWARF addresses (bias removed) */
    uint32_t parent; /* the enclosing inlined range, UINT32_MAX when none */
    Dwarf_Off off;   /* the DIE */
} iscope;

typedef struct cu_index {
    uint64_t key; /* hash of (module, CU offset): oatab.h */
    Dwfl_Module *mod;
    Dwarf_Off cu_off;
    iscope *e;
    uint32_t *order; /* e sorted by (lo, -hi) */
    uint32_t n, cap;
    Dwarf *dbg;
    Dwarf_Files *files;
    size_t nfiles;
} cu_index;

static int push_scope(cu_index *x, uint64_t lo, uint64_t hi, uint32_t parent, Dwarf_Off off)
{
    if (CMH_GROW(x->e, x->cap, (uint64_t)x->n + 1, 64)) return -1;
    x->e[x->n++] = (iscope){lo, hi, parent, off};
    return 0;
}

/* the tags under which code scopes can sit (types hold declarations only) */
static int may_hold_code(int tag)
{
    return tag == DW_TAG_subprogram || tag == DW_TAG_lexical_block || tag == DW_TAG_inlined_subroutine ||
           tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_try_block || tag == DW_TAG_catch_block ||
           tag == DW_TAG_compile_unit || tag == DW_TAG_partial_unit;
}

static int walk(cu_index *x, Dwarf_Die *die, uint32_t anc_first, uint32_t anc_n, int depth)
{
    Dwarf_Die child;
    if (depth > 200 || dwarf_child(die, &child) != 0) return 0;
    do {
        int tag = dwarf_tag(&child);
        uint32_t first = anc_first, n = anc_n;
        if (tag == DW_TAG_inlined_subroutine) {
            first = x->n;
            n = 0;
            ptrdiff_t off = 0;
            Dwarf_Addr base, lo, hi;
            while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                uint32_t parent = UINT32_MAX;
                for (uint32_t k = anc_first; k < anc_first + anc_n; k++)
                    if (x->e[k].lo <= lo && hi <= x->e[k].hi) parent = k;
                if (push_scope(x, lo, hi, parent, dwarf_dieoffset(&child))) return -1;
                n++;
            }
        }
        if (may_hold_code(tag) && dwarf_haschildren(&child) && walk(x, &child, first, n, depth + 1)) return -1;
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

static const iscope *g_sort_e; /* qsort has no context; one index is built at a time */

static int cmp_scope(const void *a, const void *b)
{
    const iscope *x = &g_sort_e[*(const uint32_t *)a], *y = &g_sort_e[*(const uint32_t *)b];
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->hi > y->hi ? -1 : x->hi < y->hi;
}

static cu_index *index_of(cmh_oatab *cache, Dwfl_Module *m, Dwarf_Die *cu)
{
    Dwarf_Off off = dwarf_dieoffset(cu);
    uint64_t h = cmh_oa_hashkey(cmh_oa_mix((uint64_t)(uintptr_t)m) ^ off);
    uint32_t pos = UINT32_MAX;
    for (cu_index *x; (x = cmh_oa_next(cache, h, &pos));)
        if (x->mod == m && x->cu_off == off) return x;
    cu_index *x = cmh_oa_add(cache, h);
    if (!x) return NULL;
    x->mod = m;
    x->cu_off = off;
    Dwarf_Addr bias;
    x->dbg = dwfl_module_getdwarf(m, &bias);
    dwarf_getsrcfiles(cu, &x->files, &x->nfiles);
    if (walk(x, cu, 0, 0, 0) || (x->n && !(x->order = malloc(x->n * sizeof *x->order)))) {
        free(x->e);
        free(x->order);
        x->e = NULL;
        x->order = NULL;
        x->n = 0;
        return NULL;
    }
    for (uint32_t i = 0; i < x->n; i++) x->order[i] = i;
    g_sort_e = x->e;
    if (x->n) qsort(x->order, x->n, sizeof *x->order, cmp_scope);
    return x;
}

static void free_indexes(cmh_oatab *cache)
{
    for (uint32_t i = 0; i < cache->cap; i++)
        if (cmh_oa_keyat(cache, i)) {
            cu_index *x = cmh_oa_at(cache, i);
            free(x->e);
            free(x->order);
        }
    cmh_oa_free(cache);
}

/* The inlined ranges holding pc, innermost first, into out (at most max); how many. */
static int inlined_at(const cu_index *x, uint64_t pc, uint32_t *out, int max)
{
    uint32_t lo = 0, hi = x->n;
    while (lo < hi) { /* the first in order starting after pc */
        uint32_t mid = (lo + hi) / 2;
        if (x->e[x->order[mid]].lo <= pc) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return 0;
    uint32_t j = x->order[lo - 1];
    while (j != UINT32_MAX && !(x->e[j].lo <= pc && pc < x->e[j].hi)) j = x->e[j].parent;
    int n = 0;
    for (; j != UINT32_MAX && n < max; j = x->e[j].parent) out[n++] = j;
    return n;
}

/* Frame i's expansion: itself given a file:line, preceded by one frame per inlined call. */
static int expand(cmh_snapshot *s, Dwfl *dwfl, cmh_oatab *cus, uint32_t i, uint32_t **list, uint32_t *n, uint32_t *cap,
                  expansion *ex, cmh_symbolize_result *r)
{
    ex->first = *n;
    ex->count = 1;
    cmh_frame self = s->frames[i];
    uint32_t ids[64];
    int nids = 0;
    Dwarf_Addr pc = self.pc ? self.pc - 1 : 0; /* a return address: the call is just before it */
    Dwfl_Module *m = dwfl_addrmodule(dwfl, pc);
    const char *nm0 = cmh_str(s, self.name);
    if (m && (!*nm0 || (nm0[0] == '0' && nm0[1] == 'x'))) { /* the recorder had no name: the file may (debug info) */
        const char *sym = dwfl_module_addrname(m, pc);
        if (sym && cmh_strtab_intern(&s->strings, sym, strlen(sym), &s->frames[i].name) != CMH_OK) return CMH_ENOMEM;
        self = s->frames[i];
    }
    Dwfl_Line *ln = m ? dwfl_module_getsrc(m, pc) : NULL;
    int lineno = 0;
    const char *file = ln ? dwfl_lineinfo(ln, NULL, &lineno, NULL, NULL, NULL) : NULL;
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = file && lineno > 0 ? dwfl_module_addrdie(m, pc, &bias) : NULL;
    /* libdw answers a PC past the end of a CU's code (crt1's _start just after an -O2 main in
     * .text.startup) with the nearest CU and its last line: a PC outside the CU has no line */
    if (cu && dwarf_haspc(cu, pc - bias) == 0) file = NULL;
    if (file && lineno > 0) {
        cu_index *x = cu ? index_of(cus, m, cu) : NULL;
        uint32_t chain[63];
        int nc = x ? inlined_at(x, pc - bias, chain, 63) : 0;
        const char *cur_file = file;
        int64_t cur_line = lineno;
        for (int k = 0; k < nc; k++) {
            Dwarf_Die die;
            if (!dwarf_offdie(x->dbg, x->e[chain[k]].off, &die)) continue;
            char *freeme;
            const char *nm = die_name(&die, &freeme);
            int rc = add_frame(s, &self, nm ? nm : cmh_str(s, self.name), cur_file, cur_line, &ids[nids]);
            free(freeme);
            if (rc != CMH_OK) return CMH_ENOMEM;
            nids++;
            r->inlined++;
            Dwarf_Attribute a;
            Dwarf_Word cf = 0, cl = 0;
            if (dwarf_attr(&die, DW_AT_call_file, &a)) dwarf_formudata(&a, &cf);
            if (dwarf_attr(&die, DW_AT_call_line, &a)) dwarf_formudata(&a, &cl);
            const char *callf = x->files && cf < x->nfiles ? dwarf_filesrc(x->files, cf, NULL, NULL) : NULL;
            cur_file = callf ? callf : cur_file;
            cur_line = (int64_t)cl;
        }
        /* the physical function: the frame itself, at the line of its innermost call */
        if (cmh_strtab_intern(&s->strings, cur_file, strlen(cur_file), &s->frames[i].filename) != CMH_OK) return CMH_ENOMEM;
        s->frames[i].line = cur_line;
        r->lines++;
    }
    ids[nids++] = i;
    if (CMH_GROW(*list, *cap, (uint64_t)*n + (uint64_t)nids, 1024)) return CMH_ENOMEM;
    memcpy(*list + *n, ids, (size_t)nids * sizeof *ids);
    *n += (uint32_t)nids;
    ex->count = (uint32_t)nids;
    return CMH_OK;
}

/* Every stack again, each frame replaced by its expansion. */
static int rebuild_stacks(cmh_snapshot *s, const expansion *ex, uint32_t nex, const uint32_t *list)
{
    uint64_t total = 0;
    for (uint32_t k = 0; k < s->nstacks; k++)
        for (uint32_t i = 0; i < s->stacks[k].count; i++) {
            uint32_t f = s->stack_frames[s->stacks[k].first + i];
            total += f < nex ? ex[f].count : 1;
        }
    if (total > UINT32_MAX) return CMH_ENOMEM;
    uint32_t *nf = malloc((total ? total : 1) * sizeof *nf);
    if (!nf) return CMH_ENOMEM;
    uint32_t at = 0;
    for (uint32_t k = 0; k < s->nstacks; k++) {
        cmh_stack *st = &s->stacks[k];
        uint32_t first = at;
        for (uint32_t i = 0; i < st->count; i++) {
            uint32_t f = s->stack_frames[st->first + i];
            if (f < nex) {
                memcpy(nf + at, list + ex[f].first, ex[f].count * sizeof *nf);
                at += ex[f].count;
            } else nf[at++] = f;
        }
        st->first = first;
        st->count = at - first;
    }
    free(s->stack_frames);
    s->stack_frames = nf;
    s->nstack_frames = s->cap_stack_frames = at;
    cmh_oa_free(&s->stack_index); /* stacks changed: interning starts again from them when asked */
    return cmh_snapshot_reindex_stacks(s);
}

/*
 * An opened module set: the binaries reported to libdwfl, which of them are usable, what the
 * report said, and the CU indexes built so far.  Made for one call, or kept between calls
 * (CMH_SYM_KEEP: the live commands symbolize a new snapshot of the same process every few
 * seconds, and opening the binaries again, decompressing their debug sections and indexing
 * their CUs each time cost far more than the lookups).  The kept one is used again while the
 * module map (paths, load addresses, build ids) is the same.
 */
/* Modules that overlap (a library unloaded and another loaded at its address while recording:
 * the recorder names each stack in the one mapped when it was captured, and each frame carries
 * its module) go in Dwfl layers of their own: a frame is looked up in its module's layer. */
#define LAYERS 8
typedef struct dsession {
    Dwfl *dwfl, *layer[LAYERS]; /* dwfl == layer[0] */
    int nlayers;
    int *usable;  /* per module */
    int *layerof; /* per module: -1 where it was not reported */
    uint32_t nmodules;
    uint32_t used, missing, mismatched;
    char mism[CMH_SYM_MAX_NAMED][512];
    cmh_oatab cus;
    char *sig; /* the module map it was made for */
    size_t nsig;
    uint64_t last; /* when last used (a count of uses): the oldest goes first */
} dsession;

/* one a module map: each process has its own (its libraries' load addresses differ), and the
 * exporter symbolizes every process it watches in turn */
#define KEPT 32
static pthread_mutex_t g_kept_lock = PTHREAD_MUTEX_INITIALIZER;
static dsession *g_kept[KEPT];
static uint64_t g_uses;

static void session_free(dsession *d)
{
    if (!d) return;
    free_indexes(&d->cus);
    for (int k = 0; k < d->nlayers; k++) dwfl_end(d->layer[k]);
    free(d->usable);
    free(d->layerof);
    free(d->sig);
    free(d);
}

static char *module_sig(const cmh_snapshot *s, size_t *len)
{
    size_t n = 1;
    for (uint32_t i = 0; i < s->nmodules; i++)
        n += strlen(cmh_str(s, s->modules[i].path)) + strlen(cmh_str(s, s->modules[i].build_id)) + 40;
    char *b = malloc(n);
    if (!b) return NULL;
    size_t at = 0;
    for (uint32_t i = 0; i < s->nmodules; i++)
        at += (size_t)snprintf(b + at, n - at, "%s|%s|%llx|%llx\n", cmh_str(s, s->modules[i].path), cmh_str(s, s->modules[i].build_id),
                               (unsigned long long)s->modules[i].base, (unsigned long long)s->modules[i].size);
    *len = at;
    return b;
}

static dsession *session_open(const cmh_snapshot *s)
{
    unsetenv("DEBUGINFOD_URLS"); /* no network, and no waiting on one */
    static char *debuginfo_path = NULL;
    static const Dwfl_Callbacks cb = {.find_elf = dwfl_build_id_find_elf, .find_debuginfo = dwfl_standard_find_debuginfo,
                                      .debuginfo_path = &debuginfo_path};
    dsession *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    cmh_oa_init(&d->cus, sizeof(cu_index));
    d->nmodules = s->nmodules;
    if (!(d->dwfl = d->layer[0] = dwfl_begin(&cb)) || !(d->usable = calloc(s->nmodules ? s->nmodules : 1, sizeof *d->usable)) ||
        !(d->layerof = calloc(s->nmodules ? s->nmodules : 1, sizeof *d->layerof))) {
        if (d->layer[0]) d->nlayers = 1;
        session_free(d);
        return NULL;
    }
    d->nlayers = 1;
    for (uint32_t i = 0; i < s->nmodules; i++) d->layerof[i] = -1;
    int *usable = d->usable;
    dwfl_report_begin(d->dwfl);
    for (uint32_t i = 0; i < s->nmodules; i++) {
        const cmh_module *mo = &s->modules[i];
        const char *path = cmh_str(s, mo->path);
        if (!*path || access(path, R_OK) != 0) {
            d->missing++;
            continue;
        }
        /* the same file at the same place (a merged record's ranks): the one reported */
        uint32_t same = UINT32_MAX;
        for (uint32_t j = 0; j < i && same == UINT32_MAX; j++)
            if (d->layerof[j] >= 0 && s->modules[j].path == mo->path && s->modules[j].build_id == mo->build_id &&
                s->modules[j].base == mo->base && s->modules[j].size == mo->size)
                same = j;
        if (same != UINT32_MAX) {
            d->layerof[i] = d->layerof[same];
            usable[i] = usable[same];
            d->used += (uint32_t)usable[i];
            continue;
        }
        /* the first layer where no module reported before overlaps it */
        int k = 0;
        for (uint32_t j = 0; j < i; j++)
            if (d->layerof[j] == k && mo->base < s->modules[j].base + s->modules[j].size &&
                s->modules[j].base < mo->base + mo->size) {
                k++;
                j = UINT32_MAX; /* again from the first, in the next layer */
            }
        if (k >= LAYERS) {
            d->missing++;
            continue;
        }
        if (k == d->nlayers) {
            if (!(d->layer[k] = dwfl_begin(&cb))) {
                d->missing++;
                continue;
            }
            dwfl_report_begin(d->layer[k]);
            d->nlayers++;
        }
        Dwfl_Module *m = dwfl_report_elf(d->layer[k], path, path, -1, mo->base, false);
        if (m) d->layerof[i] = k;
        if (!m) {
            d->missing++;
            continue;
        }
        const unsigned char *bits;
        GElf_Addr vaddr;
        int nb = dwfl_module_build_id(m, &bits, &vaddr);
        char have[160] = "";
        if (nb > 0) hex(bits, nb, have, sizeof have);
        const char *want = cmh_str(s, mo->build_id);
        if (*want && strcmp(have, want) != 0) {
            /* the recorder's own library is not counted: every rebuild changes it, and its frames
             * are machinery the reports hide (each report on an older record named it) */
            const char *base = strrchr(path, '/');
            if (strncmp(base ? base + 1 : path, "libcumemhist", 12) != 0) {
                if (d->mismatched < CMH_SYM_MAX_NAMED) snprintf(d->mism[d->mismatched], sizeof d->mism[0], "%s", path);
                d->mismatched++;
            }
            continue;
        }
        usable[i] = 1;
        d->used++;
    }
    for (int k = 0; k < d->nlayers; k++) dwfl_report_end(d->layer[k], NULL, NULL);
    return d;
}

static int lines_all(cmh_snapshot *s, cmh_symbolize_result *r, int keep)
{
    if (!s->nmodules) return CMH_OK;
    dsession *d = NULL;
    size_t nsig = 0;
    char *sig = NULL;
    if (keep) {
        pthread_mutex_lock(&g_kept_lock);
        if (!(sig = module_sig(s, &nsig))) {
            pthread_mutex_unlock(&g_kept_lock);
            return CMH_ENOMEM;
        }
        for (int i = 0; i < KEPT && !d; i++)
            if (g_kept[i] && g_kept[i]->nsig == nsig && !memcmp(g_kept[i]->sig, sig, nsig)) d = g_kept[i], free(sig), sig = NULL;
    }
    if (!d && !(d = session_open(s))) {
        free(sig);
        if (keep) pthread_mutex_unlock(&g_kept_lock);
        return CMH_ENOMEM;
    }
    if (sig) { /* a new one kept, in place of the least recently used when all are taken */
        d->sig = sig, d->nsig = nsig;
        int at = 0;
        for (int i = 0; i < KEPT; i++) {
            if (!g_kept[i]) {
                at = i;
                break;
            }
            if (g_kept[i]->last < g_kept[at]->last) at = i;
        }
        session_free(g_kept[at]);
        g_kept[at] = d;
    }
    if (keep) d->last = ++g_uses;
    r->modules_used = d->used, r->modules_missing = d->missing, r->modules_mismatched = d->mismatched;
    memcpy(r->mismatched, d->mism, sizeof r->mismatched);
    const int *usable = d->usable;
    uint32_t nex = s->nframes, n = 0, cap = 0, *list = NULL;
    expansion *ex = malloc((nex ? nex : 1) * sizeof *ex);
    int rc = ex ? CMH_OK : CMH_ENOMEM, any_inline = 0;
    for (uint32_t i = 0; i < nex && rc == CMH_OK; i++) {
        const cmh_frame *f = &s->frames[i];
        if (!f->pc || f->line > 0 || f->module < 0 || (uint32_t)f->module >= s->nmodules || !usable[f->module]) {
            ex[i] = (expansion){0, 0};
            continue;
        }
        uint32_t before = r->inlined;
        rc = expand(s, d->layer[d->layerof[f->module]], &d->cus, i, &list, &n, &cap, &ex[i], r);
        any_inline |= r->inlined != before;
    }
    /* frames nothing happened to keep a count of 0: they stand for themselves */
    for (uint32_t i = 0; ex && i < nex; i++)
        if (!ex[i].count) {
            if (CMH_GROW(list, cap, (uint64_t)n + 1, 1024)) {
                rc = CMH_ENOMEM;
                break;
            }
            ex[i] = (expansion){n, 1};
            list[n++] = i;
        }
    if (rc == CMH_OK && any_inline) rc = rebuild_stacks(s, ex, nex, list);
    free(list);
    free(ex);
    if (keep) pthread_mutex_unlock(&g_kept_lock);
    else session_free(d);
    return rc;
}

/* The GNU build id of the ELF file at path, in hex as hex() writes it, read from its program
 * headers' notes without libelf (an ELF64 file of this machine's byte order; anything else, or
 * a file that cannot be read: 0, not known).  1 when read. */
static int elf_build_id(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    Elf64_Ehdr eh;
    int ok = 0;
    if (fread(&eh, sizeof eh, 1, f) == 1 && !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_ident[EI_DATA] == (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB) &&
        eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 4096)
        for (unsigned i = 0; i < eh.e_phnum && !ok; i++) {
            Elf64_Phdr ph;
            if (fseeko(f, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph), SEEK_SET) || fread(&ph, sizeof ph, 1, f) != 1) break;
            if (ph.p_type != PT_NOTE || ph.p_filesz > (1u << 20)) continue;
            unsigned char *b = malloc(ph.p_filesz ? ph.p_filesz : 1);
            if (!b) break;
            if (!fseeko(f, (off_t)ph.p_offset, SEEK_SET) && fread(b, 1, ph.p_filesz, f) == ph.p_filesz) {
                uint64_t at = 0, align = ph.p_align >= 8 ? 8 : 4;
                while (at + sizeof(Elf64_Nhdr) <= ph.p_filesz) {
                    Elf64_Nhdr nh;
                    memcpy(&nh, b + at, sizeof nh);
                    uint64_t name = at + sizeof nh, desc = name + ((nh.n_namesz + align - 1) & ~(align - 1));
                    if (desc + nh.n_descsz > ph.p_filesz) break;
                    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(b + name, "GNU", 4) && nh.n_descsz < cap / 2) {
                        hex(b + desc, (int)nh.n_descsz, out, cap);
                        ok = 1;
                        break;
                    }
                    at = desc + ((nh.n_descsz + align - 1) & ~(align - 1));
                }
            }
            free(b);
        }
    fclose(f);
    return ok;
}

int cmh_symbolize_wanted(const cmh_snapshot *s, unsigned what)
{
    if (what & CMH_SYM_DEMANGLE)
        for (uint32_t i = 0; i < s->nframes; i++) { /* (demangle_all's test, without the demangler) */
            const char *file = cmh_str(s, s->frames[i].filename), *n = cmh_str(s, s->frames[i].name);
            size_t fl = strlen(file);
            if (fl > 3 && !strcmp(file + fl - 3, ".py")) continue;
            if ((n[0] == '_' && n[1] == 'Z') || n[cmh_name_base_len(n)]) return 1;
        }
    if (!(what & CMH_SYM_LINES) || !s->nmodules) return 0;
    /* per module: 1 some frame of it has a line (its DWARF was read: symbolized before, every frame
     * it could give a line has one), 2 a frame of it without one; then 3 its binary is not here,
     * or not the one recorded (session_open would not use it), 4 it is */
    unsigned char *m = calloc(s->nmodules, 1);
    if (!m) return 1; /* (no memory to tell: as if there were) */
    for (uint32_t i = 0; i < s->nframes; i++) {
        const cmh_frame *f = &s->frames[i];
        if (f->module < 0 || (uint32_t)f->module >= s->nmodules) continue;
        if (f->line > 0) m[f->module] = 1;
        else if (f->pc && !m[f->module]) m[f->module] = 2;
    }
    int want = 0;
    for (uint32_t k = 0; k < s->nmodules && !want; k++) {
        if (m[k] != 2) continue;
        const cmh_module *mo = &s->modules[k];
        const char *path = cmh_str(s, mo->path), *rec = cmh_str(s, mo->build_id);
        char have[160] = "";
        if (!*path || access(path, R_OK) != 0) continue;
        /* a binary whose build id is not the one recorded is not used (a library updated since,
         * the recording machine's libc); one whose id cannot be read here, libdw decides */
        want = !*rec || !elf_build_id(path, have, sizeof have) || !strcmp(have, rec);
    }
    free(m);
    return want;
}

int cmh_symbolize_offline(cmh_snapshot *s, unsigned what, cmh_symbolize_result *r)
{
    memset(r, 0, sizeof *r);
    int rc = CMH_OK;
    if (what & CMH_SYM_LINES) rc = lines_all(s, r, (what & CMH_SYM_KEEP) != 0);
    if (rc == CMH_OK && (what & CMH_SYM_DEMANGLE)) rc = demangle_all(s, r);
    return rc;
}
