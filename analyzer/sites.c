/*
 * sites.c - attribution (cumemhist/sites.h): the rules that tell machinery from the user's own
 * code, written once here, and the grouping of stacks the reports use.
 *
 * Every frame of the snapshot is classified once (a byte per frame: which rule, if any, made it
 * machinery) and every stack mapped once to its group, so a report's inner loop only indexes an
 * array.  Rules look at what a frame says: its function name (for C++, the qualified name alone:
 * a user's function that takes an at::Tensor is not PyTorch's), its file, and its module.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/sites.h"
#include "grow.h"
#include "oatab.h"

/* rule numbers: 0 = not machinery, 1..N the defaults below, SKIP_USER a --skip */
enum {
    R_NONE = 0,
    R_CUMEMHIST,
    R_DRIVER,
    R_RUNTIME,
    R_NVIDIA,
    R_TORCH_CPP,
    R_TORCH_PY,
    R_STDLIB,
    R_CPYTHON,
    R_PLACEHOLDER,
    R_STARTUP,
    R_COUNT,
    SKIP_USER = 0xff
};

const char *const cmh_site_rule_names[] = {
    "", "cumemhist", "cuda-driver", "cuda-runtime", "nvidia-libraries", "pytorch-cpp", "pytorch-python",
    "cxx-stdlib", "cpython", "placeholder", "libc-startup", NULL,
};

typedef struct gslot {
    uint64_t hash; /* key */
    uint64_t group;
} gslot;

typedef struct sgroup {
    uint32_t stack, site_frame; /* site_frame UINT32_MAX: no frame */
    const char *owner;
} sgroup;

struct cmh_sites {
    const cmh_snapshot *s;
    int by;
    uint8_t *rule;     /* per frame */
    uint32_t *site;    /* per stack: its site frame, UINT32_MAX for the empty stack */
    uint32_t *gid;     /* per stack: its group */
    sgroup *groups;
    uint32_t ngroups, cap;
    cmh_oatab index; /* group key hash -> group */
};

/* ---- the rules ---- */

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static int starts_any(const char *s, const char *const *ps)
{
    for (; *ps; ps++)
        if (starts(s, *ps)) return 1;
    return 0;
}

static int contains_any(const char *s, const char *const *ps)
{
    for (; *ps; ps++)
        if (strstr(s, *ps)) return 1;
    return 0;
}

const char *cmh_frame_module(const cmh_snapshot *s, const cmh_frame *f)
{
    if (f->module < 0 || (uint32_t)f->module >= s->nmodules) return "";
    const char *p = cmh_str(s, s->modules[f->module].path);
    const char *sl = strrchr(p, '/');
    return sl ? sl + 1 : p;
}

/* The qualified name of a demangled C++ function: "at::Tensor c10::impl::f<A<B>>::call(X)" gives
 * "c10::impl::f::call" (template arguments, parameters and return type left out), written to
 * out.  A plain C name comes back as it is. */
static void qualified(const char *n, char *out, size_t cap)
{
    size_t k = 0, start = 0;
    int angle = 0;
    for (const char *p = n; *p && k + 1 < cap; p++) {
        if (*p == '<') {
            angle++;
            continue;
        }
        if (*p == '>') {
            if (angle) angle--;
            continue;
        }
        if (angle) continue;
        if (*p == '(') {
            if (starts(p, "(anonymous namespace)")) { /* part of the name */
                size_t l = strlen("(anonymous namespace)");
                if (k + l + 1 >= cap) break;
                memcpy(out + k, p, l);
                k += l;
                p += l - 1;
                continue;
            }
            break; /* the parameter list */
        }
        if (*p == ' ') { /* what came before was the return type */
            k = start = 0;
            continue;
        }
        out[k++] = *p;
    }
    (void)start;
    out[k] = 0;
}

static int placeholder(const char *name) { return !*name || !strcmp(name, "??") || starts(name, "0x") || !strcmp(name, "<unknown>"); }

static int classify(const cmh_snapshot *s, const cmh_frame *f)
{
    const char *name = cmh_str(s, f->name), *file = cmh_str(s, f->filename), *mod = cmh_frame_module(s, f);
    char q[512];
    qualified(name, q, sizeof q);
    if (starts(mod, "libcumemhist")) return R_CUMEMHIST;
    if (starts(mod, "libcuda.so") || starts(mod, "libcuda-")) return R_DRIVER;
    static const char *const runtime_mods[] = {"libcudart", NULL};
    /* cudaMalloc & co. of a statically linked runtime live in the program itself */
    if (starts_any(mod, runtime_mods) || (starts(q, "cuda") && q[4] >= 'A' && q[4] <= 'Z') || starts(q, "__cudart") ||
        strstr(q, "libcudart_static") || starts(q, "cudart::"))
        return R_RUNTIME;
    static const char *const nv_mods[] = {"libcublas", "libcudnn", "libnccl", "libcufft", "libcurand", "libcusparse",
                                          "libcusolver", "libnvrtc", "libnvJitLink", "libnvToolsExt", "libcupti",
                                          "libnvperf", "libcufile", "libnvshmem", NULL};
    static const char *const nv_funcs[] = {"cublas", "cudnn", "nccl", "cufft", "curand", "cusparse", "cusolver", NULL};
    if (starts_any(mod, nv_mods)) return R_NVIDIA;
    for (const char *const *p = nv_funcs; *p; p++) {
        size_t l = strlen(*p);
        if (starts(q, *p) && ((q[l] >= 'A' && q[l] <= 'Z') || q[l] == '_')) return R_NVIDIA;
    }
    static const char *const torch_ns[] = {"c10::", "at::", "torch::", "caffe2::", "pybind11::", NULL};
    static const char *const torch_mods[] = {"libc10", "libtorch", "libshm", "libcaffe2", "_C.cpython", "_C.so", NULL};
    static const char *const torch_src[] = {"aten/src/", "c10/", "torch/csrc/", "core/boxing", "/Register", "/Redispatch",
                                            NULL};
    static const char *const torch_names[] = {"CapturedTraceback", "unwind::unwind", "gather_with_cpp", NULL};
    if (starts_any(q, torch_ns) || starts_any(mod, torch_mods) || contains_any(file, torch_src) ||
        contains_any(name, torch_names))
        return R_TORCH_CPP;
    /* PyTorch's own Python: .../torch/... under site-packages, dist-packages or a checkout */
    size_t fl = strlen(file);
    if (fl > 3 && !strcmp(file + fl - 3, ".py") && (starts(file, "torch/") || strstr(file, "/torch/"))) return R_TORCH_PY;
    static const char *const std_ns[] = {"std::", "__gnu_cxx::", "__cxxabiv1::", NULL};
    if (starts_any(q, std_ns)) return R_STDLIB;
    static const char *const py_mods[] = {"libpython", "python", NULL};
    static const char *const py_funcs[] = {"cfunction_", "slot_tp_", "method_vectorcall", "vectorcall_", "object_vacall",
                                           "call_function", "builtin_", NULL};
    static const char *const py_files[] = {"Objects/", "Python/ceval", "pycore_", "pythonrun.c", "Modules/main.c",
                                           "cpython/abstract.h", NULL};
    if (starts_any(mod, py_mods) || starts_any(q, py_funcs) || strstr(q, "vectorcall") || contains_any(file, py_files) ||
        ((q[0] == '_' ? q[1] == 'P' && q[2] == 'y' : q[0] == 'P' && q[1] == 'y') && q[q[0] == '_' ? 3 : 2] >= 'A' &&
         q[q[0] == '_' ? 3 : 2] <= 'Z'))
        return R_CPYTHON;
    if (placeholder(name)) return R_PLACEHOLDER;
    static const char *const startup[] = {"__libc_start_main", "__libc_start_call_main", "_start", "start_thread",
                                          "clone", "clone3", "__clone", "__clone3", "_dl_start", NULL};
    for (const char *const *p = startup; *p; p++)
        if (!strcmp(q, *p)) return R_STARTUP;
    if (starts(mod, "ld-linux") || starts(mod, "libc.so") || starts(mod, "libpthread")) return R_STARTUP;
    return R_NONE;
}

/* ---- groups ---- */

static uint64_t hmix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) h = hmix(h, (unsigned char)*s);
    return hmix(h, 0xff);
}

/* What two allocations must share to be one group, as a hash (and compared in full below). */
static uint64_t key_of(const cmh_sites *g, uint32_t stack, uint32_t site, const char *owner)
{
    const cmh_snapshot *s = g->s;
    uint64_t h = 1469598103934665603ull;
    const cmh_frame *f = site != UINT32_MAX ? &s->frames[site] : NULL;
    switch (g->by) {
    case CMH_GROUP_STACK: h = hmix(h, stack); break;
    case CMH_GROUP_MODULE: h = hash_str(h, owner); break;
    case CMH_GROUP_FILE: h = f ? hash_str(h, cmh_str(s, f->filename)) : hmix(h, 1); break;
    default:
        if (!f) h = hmix(h, 1);
        else {
            h = hash_str(h, cmh_str(s, f->name));
            h = hash_str(h, cmh_str(s, f->filename));
            h = hmix(h, (uint64_t)f->line);
            h = hash_str(h, cmh_frame_module(s, f));
        }
    }
    return cmh_oa_hashkey(h);
}

static int same_group(const cmh_sites *g, const sgroup *a, uint32_t stack, uint32_t site, const char *owner)
{
    const cmh_snapshot *s = g->s;
    const cmh_frame *x = a->site_frame != UINT32_MAX ? &s->frames[a->site_frame] : NULL;
    const cmh_frame *y = site != UINT32_MAX ? &s->frames[site] : NULL;
    switch (g->by) {
    case CMH_GROUP_STACK: return a->stack == stack;
    case CMH_GROUP_MODULE: return !strcmp(a->owner, owner);
    case CMH_GROUP_FILE: return x && y ? x->filename == y->filename : x == y;
    default:
        if (!x || !y) return x == y;
        return x->name == y->name && x->filename == y->filename && x->line == y->line &&
               !strcmp(cmh_frame_module(s, x), cmh_frame_module(s, y));
    }
}

/* The owner: the module of the innermost frame that is not the driver, the shared runtime or
 * cumemhist (a static runtime is part of the program that links it). */
static const char *owner_of(const cmh_sites *g, const cmh_stack *st)
{
    const cmh_snapshot *s = g->s;
    if (s->source == CMH_SRC_PYTORCH) return "PyTorch";
    for (uint32_t i = 0; i < st->count; i++) {
        uint32_t fid = s->stack_frames[st->first + i];
        const cmh_frame *f = &s->frames[fid];
        const char *mod = cmh_frame_module(s, f);
        if (!*mod) continue;
        if (starts(mod, "libcumemhist") || starts(mod, "libcuda.so") || starts(mod, "libcuda-") || starts(mod, "libcudart"))
            continue;
        return mod;
    }
    return st->count ? "?" : "";
}

cmh_sites *cmh_sites_new(const cmh_snapshot *s, const cmh_site_opts *o, int *rc, char *err, size_t errlen)
{
    *rc = CMH_ENOMEM;
    cmh_sites *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->s = s;
    g->by = o ? o->group_by : CMH_GROUP_SITE;
    cmh_oa_init(&g->index, sizeof(gslot));
    regex_t *re = NULL;
    int nre = 0;
    if (o && o->nskips) {
        re = calloc((size_t)o->nskips, sizeof *re);
        if (!re) goto oom;
        for (; nre < o->nskips; nre++) {
            int e = regcomp(&re[nre], o->skips[nre], REG_EXTENDED | REG_NOSUB);
            if (e) {
                char why[200];
                regerror(e, &re[nre], why, sizeof why);
                snprintf(err, errlen, "--skip '%s': %s", o->skips[nre], why);
                *rc = CMH_EINVAL;
                goto fail;
            }
        }
    }
    g->rule = malloc((s->nframes ? s->nframes : 1) * sizeof *g->rule);
    g->site = malloc((s->nstacks ? s->nstacks : 1) * sizeof *g->site);
    g->gid = malloc((s->nstacks ? s->nstacks : 1) * sizeof *g->gid);
    if (!g->rule || !g->site || !g->gid) goto oom;
    for (uint32_t i = 0; i < s->nframes; i++) {
        const cmh_frame *f = &s->frames[i];
        g->rule[i] = o && o->no_default_rules ? R_NONE : (uint8_t)classify(s, f);
        for (int k = 0; k < nre && !g->rule[i]; k++)
            if (!regexec(&re[k], cmh_str(s, f->name), 0, NULL, 0) || !regexec(&re[k], cmh_str(s, f->filename), 0, NULL, 0) ||
                (f->module >= 0 && (uint32_t)f->module < s->nmodules &&
                 !regexec(&re[k], cmh_str(s, s->modules[f->module].path), 0, NULL, 0)))
                g->rule[i] = SKIP_USER;
    }
    for (uint32_t k = 0; k < s->nstacks; k++) {
        const cmh_stack *st = &s->stacks[k];
        uint32_t site = UINT32_MAX;
        for (uint32_t i = 0; i < st->count && site == UINT32_MAX; i++)
            if (!g->rule[s->stack_frames[st->first + i]]) site = s->stack_frames[st->first + i];
        /* all machinery: the innermost frame of a framework or library, which says more than the
         * runtime's or an unnamed one; else the innermost of all */
        for (uint32_t i = 0; i < st->count && site == UINT32_MAX; i++) {
            uint32_t fid = s->stack_frames[st->first + i];
            uint8_t r = g->rule[fid];
            if (r != R_CUMEMHIST && r != R_DRIVER && r != R_RUNTIME && r != R_PLACEHOLDER && r != R_STARTUP &&
                !placeholder(cmh_str(s, s->frames[fid].name)))
                site = fid;
        }
        if (site == UINT32_MAX && st->count) site = s->stack_frames[st->first];
        g->site[k] = site;
        const char *owner = owner_of(g, st);
        uint64_t h = key_of(g, k, site, owner);
        uint32_t pos = UINT32_MAX, found = UINT32_MAX;
        for (gslot *sl; found == UINT32_MAX && (sl = cmh_oa_next(&g->index, h, &pos));)
            if (same_group(g, &g->groups[sl->group], k, site, owner)) found = (uint32_t)sl->group;
        if (found == UINT32_MAX) {
            if (CMH_GROW(g->groups, g->cap, (uint64_t)g->ngroups + 1, 64)) goto oom;
            gslot *sl = cmh_oa_add(&g->index, h);
            if (!sl) goto oom;
            sl->group = found = g->ngroups;
            g->groups[g->ngroups++] = (sgroup){k, site, owner};
        }
        g->gid[k] = found;
    }
    for (int k = 0; k < nre; k++) regfree(&re[k]);
    free(re);
    *rc = CMH_OK;
    return g;
oom:
    snprintf(err, errlen, "out of memory");
    *rc = CMH_ENOMEM;
fail:
    for (int k = 0; k < nre; k++) regfree(&re[k]);
    free(re);
    cmh_sites_free(g);
    return NULL;
}

void cmh_sites_free(cmh_sites *g)
{
    if (!g) return;
    free(g->rule);
    free(g->site);
    free(g->gid);
    free(g->groups);
    cmh_oa_free(&g->index);
    free(g);
}

uint32_t cmh_sites_group(const cmh_sites *g, uint32_t stack) { return stack < g->s->nstacks ? g->gid[stack] : 0; }
uint32_t cmh_sites_count(const cmh_sites *g) { return g->ngroups; }

int cmh_sites_group_by(const cmh_sites *g) { return g->by; }

const cmh_frame *cmh_sites_frame(const cmh_sites *g, uint32_t group)
{
    if (group >= g->ngroups || g->groups[group].site_frame == UINT32_MAX) return NULL;
    return &g->s->frames[g->groups[group].site_frame];
}

uint32_t cmh_sites_stack(const cmh_sites *g, uint32_t group) { return group < g->ngroups ? g->groups[group].stack : 0; }
const char *cmh_sites_owner(const cmh_sites *g, uint32_t group) { return group < g->ngroups ? g->groups[group].owner : ""; }

const cmh_frame *cmh_sites_site_of(const cmh_sites *g, uint32_t stack)
{
    if (stack >= g->s->nstacks || g->site[stack] == UINT32_MAX) return NULL;
    return &g->s->frames[g->site[stack]];
}

int cmh_sites_machinery(const cmh_sites *g, uint32_t frame_id) { return frame_id < g->s->nframes && g->rule[frame_id]; }

const char *cmh_sites_rule(const cmh_sites *g, uint32_t frame_id)
{
    if (frame_id >= g->s->nframes || !g->rule[frame_id]) return NULL;
    return g->rule[frame_id] == SKIP_USER ? "skip" : cmh_site_rule_names[g->rule[frame_id]];
}

/* append to buf (what fits), returning the length the whole text needs */
static size_t put(char *buf, size_t cap, size_t at, const char *text)
{
    size_t n = strlen(text);
    if (at < cap) {
        size_t k = n < cap - at - 1 ? n : cap - at - 1;
        memcpy(buf + at, text, k);
        buf[at + k] = 0;
    }
    return at + n;
}

static size_t put_frame(const cmh_snapshot *s, const cmh_frame *f, char *buf, size_t cap, size_t at)
{
    char line[32];
    snprintf(line, sizeof line, ":%lld", (long long)f->line);
    at = put(buf, cap, at, cmh_str(s, f->name));
    at = put(buf, cap, at, "@");
    at = put(buf, cap, at, cmh_str(s, f->filename));
    return put(buf, cap, at, line);
}

size_t cmh_sites_key(const cmh_sites *g, uint32_t group, char *buf, size_t cap)
{
    const cmh_snapshot *s = g->s;
    if (cap) buf[0] = 0;
    if (group >= g->ngroups) return 0;
    const sgroup *gr = &g->groups[group];
    const cmh_frame *f = gr->site_frame != UINT32_MAX ? &s->frames[gr->site_frame] : NULL;
    if (g->by == CMH_GROUP_MODULE) return put(buf, cap, 0, gr->owner);
    if (!f) return put(buf, cap, 0, "<no stack>");
    if (g->by == CMH_GROUP_FILE) return put(buf, cap, 0, cmh_str(s, f->filename));
    if (g->by == CMH_GROUP_STACK) {
        const cmh_stack *st = &s->stacks[gr->stack];
        size_t at = 0;
        for (uint32_t i = 0; i < st->count; i++) {
            at = put_frame(s, &s->frames[s->stack_frames[st->first + i]], buf, cap, at);
            at = put(buf, cap, at, ";");
        }
        return at;
    }
    size_t at = put_frame(s, f, buf, cap, 0);
    at = put(buf, cap, at, "@");
    return put(buf, cap, at, cmh_frame_module(s, f));
}
