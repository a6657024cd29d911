/*
 * torch_layout.c - where PyTorch lies on disk and in a snapshot (torch_layout.h): its package
 * directories, installed or a checkout's, its C++ source tree, and its own binaries.  Apart from
 * sites.c's rules because they are facts of one framework's layout, which the rules, the owners
 * and the record's "is this PyTorch's" ask alike.
 */
#include <string.h>

#include "cumemhist/sites.h"
#include "strmatch.h"
#include "torch_layout.h"

/* The "torch/" PyTorch's file or binary at path says its package is, as path's prefix length
 * (0: none). */
static size_t torch_root_of(const char *path)
{
    /* (the Python files: ones every stack through PyTorch's Python passes, in no user's tree by
     * chance; a checkout's Python-only stacks, context=python, show no binary or csrc/ frame) */
    static const char *const marks[] = {"torch/_C.", "torch/_C_", "torch/lib/libtorch", "torch/lib/libc10",
                                        "torch/lib/torch_", "torch/lib/c10", "torch/csrc/", /* Windows: torch_cpu.dll */
                                        "torch/nn/modules/module.py", "torch/_tensor.py", "torch/_ops.py",
                                        "torch/autograd/__init__.py", "torch/autograd/graph.py", "torch/optim/optimizer.py",
                                        "torch/utils/_contextlib.py", NULL};
    for (const char *const *m = marks; *m; m++)
        for (const char *p = strstr(path, *m); p; p = strstr(p + 1, *m))
            if (p == path || p[-1] == '/') return (size_t)(p - path) + 6;
    return 0;
}

static void roots_add(cmh_torch_roots *r, const char *path, size_t n)
{
    if (!n || n >= sizeof r->dir[0] || r->n == CMH_TORCH_ROOTS) return;
    for (int i = 0; i < r->n; i++)
        if (strlen(r->dir[i]) == n && !strncmp(r->dir[i], path, n)) return;
    memcpy(r->dir[r->n], path, n);
    r->dir[r->n++][n] = 0;
}

void cmh_torch_roots_find(const cmh_snapshot *s, cmh_torch_roots *r)
{
    char norm[1024];
    r->n = 0;
    for (uint32_t i = 0; i < s->nmodules; i++) {
        cmh_sites_normpath(cmh_str(s, s->modules[i].path), norm, sizeof norm);
        roots_add(r, norm, torch_root_of(norm));
    }
    for (uint32_t i = 0; i < s->nframes; i++) {
        const char *file = cmh_str(s, s->frames[i].filename);
        if (!strstr(file, "torch")) continue; /* the cheap test first: most frames are not torch's */
        cmh_sites_normpath(file, norm, sizeof norm);
        roots_add(r, norm, torch_root_of(norm));
    }
}

int cmh_torch_python(const char *file, const cmh_torch_roots *r)
{
    static const char *const installs[] = {"site-packages/torch/", "dist-packages/torch/", NULL};
    if (contains_any(file, installs)) return 1;
    for (int i = 0; i < r->n; i++)
        if (starts(file, r->dir[i])) return 1;
    return 0;
}

int cmh_torch_cpp_source(const char *file)
{
    static const char *const dirs[] = {"aten/src/", "c10/core/", "c10/cuda/", "c10/util/", "c10/macros/", "c10/hip/",
                                       "c10/xpu/", "c10/mobile/", "c10/metal/", "c10/mps/", "c10/test/", "torch/csrc/",
                                       NULL};
    if (ends(file, ".py") || ends(file, ".pyc") || ends(file, ".pyw") || *file == '<') return 0;
    for (const char *const *d = dirs; *d; d++)
        for (const char *p = strstr(file, *d); p; p = strstr(p + 1, *d))
            if (p == file || p[-1] == '/') return 1;
    return 0;
}

int cmh_sites_torch_module(const char *path)
{
    char norm[1024];
    cmh_sites_normpath(path, norm, sizeof norm);
    const char *sl = strrchr(norm, '/'), *base = sl ? sl + 1 : norm;
    static const char *const libs[] = {"libc10", "libtorch", "libshm", "libcaffe2", NULL};
    if (starts_any(base, libs)) return 1;
    if (!starts(base, "_C.") && !starts(base, "_C_")) return 0;
    /* _C is every extension's usual name (torchvision/_C.so, apex, a user's mypkg/_C.so): only
     * the one in a directory named torch is PyTorch's; a bare name (no directory recorded) has
     * nothing to say otherwise */
    if (!sl) return 1;
    size_t d = (size_t)(sl - norm);
    return d >= 5 && !strncmp(sl - 5, "torch", 5) && (d == 5 || sl[-6] == '/');
}
