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

#include "cumemhist/owners.h"
#include "cumemhist/sites.h"
#include "grow.h"
#include "oatab.h"
#include "strmatch.h"
#include "torch_layout.h"

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
    R_LIBC,
    R_TORCH_BIND,
    R_PACKAGE, /* not machinery: the site when a stack has no user frame */
    R_COUNT,
    SKIP_USER = 0xff
};

const char *const cmh_site_rule_names[] = {
    "", "cumemhist", "cuda-driver", "cuda-runtime", "nvidia-libraries", "pytorch-cpp", "pytorch-python",
    "cxx-stdlib", "cpython", "placeholder", "libc", "pytorch-bindings", "package", NULL,
};

typedef struct gslot {
    uint64_t hash; /* key */
    uint64_t group;
} gslot;

typedef struct sgroup {
    uint32_t stack, site_frame; /* site_frame UINT32_MAX: no frame */
    const char *owner;
    char *package; /* --group-by package only (owned) */
    int owner_package; /* the owner is a third-party package (a Python library under site-packages) */
} sgroup;

struct cmh_sites {
    const cmh_snapshot *s;
    int by;
    uint8_t *rule;     /* per frame */
    uint32_t *site;    /* per stack: its site frame, UINT32_MAX for the empty stack */
    uint32_t *site_at; /* per stack: the site's position in it (frames inner to it: machinery) */
    uint32_t *gid;     /* per stack: its group */
    uint32_t *caller;  /* per stack: the user's or package's frame that called its site, UINT32_MAX: none */
    sgroup *groups;
    uint32_t ngroups, cap;
    cmh_oatab index; /* group key hash -> group */
    char **names;    /* owners made from a path (a package's directory), owned */
    uint32_t nnames, capnames;
    char prog[160];  /* --group-by package: the program's own row, "program (train.py)" */
    int python;      /* the snapshot has Python frames (or is PyTorch's): a site without one says so */
};

/* ---- the rules ---- */

/* The module's file name: what follows its path's last '/' or '\' (a module map written on
 * Windows, C:\env\Lib\site-packages\torch\lib\c10_cuda.dll; cmh_sites_normpath reads paths so). */
const char *cmh_frame_module(const cmh_snapshot *s, const cmh_frame *f)
{
    if (f->module < 0 || (uint32_t)f->module >= s->nmodules) return "";
    const char *p = cmh_str(s, s->modules[f->module].path), *base = p;
    for (; *p; p++)
        if (*p == '/' || *p == '\\') base = p + 1;
    return base;
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

/* A path as the rules read it, whatever the platform wrote: '\' is '/', a drive letter and "."
 * go, ".." takes its parent away ("C:\env\Lib\site-packages\..\torch\nn\linear.py" reads
 * "/env/Lib/torch/nn/linear.py").  Reports keep the path as recorded. */
void cmh_sites_normpath(const char *in, char *out, size_t cap)
{
    size_t k = 0;
    if (!cap) return;
    if (((in[0] | 0x20) >= 'a' && (in[0] | 0x20) <= 'z') && in[1] == ':' && (in[2] == '\\' || in[2] == '/')) in += 2;
    int absolute = *in == '/' || *in == '\\';
    if (absolute && k + 1 < cap) out[k++] = '/';
    const char *p = in;
    while (*p) {
        while (*p == '/' || *p == '\\') p++;
        const char *e = p;
        while (*e && *e != '/' && *e != '\\') e++;
        size_t n = (size_t)(e - p);
        if (!n) break;
        int up = n == 2 && p[0] == '.' && p[1] == '.';
        if ((n == 1 && p[0] == '.') || (up && absolute && k == 1)) { /* "/.." is "/" */
        } else if (up && k > (size_t)absolute &&
                   !(k >= 2 && out[k - 1] == '.' && out[k - 2] == '.' && (k == 2 || out[k - 3] == '/'))) {
            while (k > (size_t)absolute && out[k - 1] != '/') k--; /* drop the parent */
            if (k > (size_t)absolute) k--;
        } else {
            if (k > (size_t)absolute && k + 1 < cap) out[k++] = '/';
            for (size_t i = 0; i < n && k + 1 < cap; i++) out[k++] = p[i];
        }
        p = e;
    }
    out[k] = 0;
}

/* A directory third-party code is installed in: site-packages, dist-packages, or the
 * interpreter's own library (lib/python3.11/, Windows' Lib/). */
static int package_dir(const char *path)
{
    if (strstr(path, "site-packages/") || strstr(path, "dist-packages/")) return 1;
    const char *p = strstr(path, "/lib/python");
    if (p && p[11] >= '0' && p[11] <= '9') return 1;
    return ends(path, ".py") && (starts(path, "Lib/") || strstr(path, "/Lib/"));
}

/* The launcher pip (or conda) writes for a package's console script: `fairseq-train`, `accelerate`,
 * `deepspeed` in an environment's bin/ (a Python file with no suffix), or on Windows the
 * __main__.py inside Scripts\NAME.exe (older setuptools: Scripts\NAME-script.py).  It only
 * imports the package's main and calls it: as a site it would take every allocation of a run
 * launched that way (all to "<module> (/opt/conda/bin/fairseq-train:8)"), where the package's
 * own frames say which line asked.  *name and *len: the script's name. */
static int entry_point_script(const char *path, const char **name, size_t *len)
{
    const char *base = strrchr(path, '/'), *dir = base;
    if (!base) return 0;
    while (dir > path && dir[-1] != '/') dir--; /* the directory holding it: dir .. base */
    size_t dl = (size_t)(base - dir);
    if (!strcmp(base, "/__main__.py")) { /* Windows' launcher: the .exe is a zip holding it */
        if (dl <= 4 || strncmp(base - 4, ".exe", 4)) return 0;
        *name = dir, *len = dl - 4;
        return 1;
    }
    int scripts = dl == 7 && !strncmp(dir, "Scripts", 7), bin = dl == 3 && !strncmp(dir, "bin", 3);
    if (scripts && (ends(base, "-script.py") || ends(base, "-script.pyw"))) {
        *name = base + 1, *len = (size_t)(strrchr(base, '-') - base - 1);
        return 1;
    }
    if (strchr(base + 1, '.') || !(scripts || bin)) return 0; /* train.py, or not where launchers go */
    *name = base + 1, *len = strlen(base + 1);
    return 1;
}

/* A native module installed by the system or a package manager rather than built with the
 * program: its path is under a library directory of the system, a conda/pip prefix or /opt. */
static int system_module(const char *path)
{
    static const char *const dirs[] = {"/lib/", "/lib64/", "/usr/", "/opt/", "/nix/store/", NULL};
    return starts_any(path, dirs) || package_dir(path) || strstr(path, "/envs/") || strstr(path, "conda");
}

/* The rules, in order: a frame is the first thing one of them says it is.  Module first (it is
 * what the frame is), then source path, then name (what a stripped frame still has). */
static int classify(const cmh_snapshot *s, const cmh_frame *f, const cmh_torch_roots *roots)
{
    const char *name = cmh_str(s, f->name), *mod = cmh_frame_module(s, f);
    const char *modpath = f->module >= 0 && (uint32_t)f->module < s->nmodules ? cmh_str(s, s->modules[f->module].path) : "";
    char q[512], file[1024], mpath[1024], nb[512];
    /* the name without a compiler's clone suffix: an LTO build's "run_mod.llvm.9196888086361497952",
     * GCC's "f.isra.0", " [clone .constprop.0]" are f to every rule below, exact names included */
    size_t nbl = cmh_name_base_len(name);
    if (nbl >= sizeof nb) nbl = sizeof nb - 1;
    memcpy(nb, name, nbl);
    nb[nbl] = 0;
    qualified(nb, q, sizeof q);
    cmh_sites_normpath(cmh_str(s, f->filename), file, sizeof file);
    cmh_sites_normpath(modpath, mpath, sizeof mpath);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    /* the bare name, out of any anonymous namespace ("(anonymous namespace)::THPFunction_apply") */
    const char *bare = q;
    while (starts(bare, "(anonymous namespace)::")) bare += strlen("(anonymous namespace)::");
    if (starts(mod, "libcumemhist")) return R_CUMEMHIST;
    /* ctypes' glue, how a Python caller reaches the driver: libffi and _ctypes (its module, or the
     * names a recorder without modules keeps).  CPython's machinery, never a package or an owner:
     * as a system library libffi.so.8 was the "package" of every ctypes allocation. */
    static const char *const ffi_mods[] = {"libffi.so", "libffi-", "_ctypes.", "_ctypes_", NULL};
    static const char *const ffi_funcs[] = {"ffi_call", "ffi_closure", "_ctypes_callproc", "_call_function_pointer", NULL};
    if (starts_any(mod, ffi_mods) || (f->module < 0 && !ends(file, ".py") && starts_any(nb, ffi_funcs))) return R_CPYTHON;
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
    /* Where PyTorch's plumbing can be: its own binaries, its source tree, or a frame that names
     * neither a binary nor a directory (a PyTorch snapshot's C++ frames: "??", a base name such
     * as RegisterCUDA.cpp).  The rules that know its plumbing by a word of a name or a file
     * (THP*, python_*.cpp, Register*, CapturedTraceback, dynamo_*) look there alone: in any other
     * binary, the user's own, they took a user's MyRegisterPool::alloc (src/RegisterPool.cpp)
     * for PyTorch's. */
    int torch_mod = *mpath && cmh_sites_torch_module(mpath), torch_src_tree = cmh_torch_cpp_source(file);
    int torch_place = torch_mod || torch_src_tree || (f->module < 0 && !strchr(file, '/'));
    /* PyTorch's binding layer: the THP* glue between CPython and ATen, its python_*.cpp files
     * (a recorder often keeps only the base name), pybind11 */
    if (torch_place && ((starts(bare, "THP") && bare[3] >= 'A' && bare[3] <= 'Z') || (starts(bare, "THCP") && bare[4] >= 'A' && bare[4] <= 'Z') ||
                        (starts(base, "python_") && (ends(base, ".cpp") || ends(base, ".h")))))
        return R_TORCH_BIND;
    if (starts(q, "pybind11::") || strstr(file, "pybind11/") || strstr(file, "torch/csrc/autograd/python") ||
        strstr(file, "torch/csrc/utils/python"))
        return R_TORCH_BIND;
    static const char *const torch_ns[] = {"c10::", "at::", "torch::", "caffe2::", NULL};
    /* generated and boxing sources a recorder keeps under their repository directory */
    static const char *const torch_src[] = {"core/boxing", "/Register", "/Redispatch", NULL};
    static const char *const torch_names[] = {"CapturedTraceback", "unwind::unwind", "gather_with_cpp", NULL};
    /* TorchDynamo's frame evaluation hook is C, its files known by base name */
    static const char *const dynamo_files[] = {"eval_frame.c", "eval_frame_cpp.cpp", "cpython_defs.c", "cache_entry.cpp",
                                               "PythonFallbackKernel.cpp", NULL};
    if (torch_place && (starts(bare, "dynamo_") || equals_any(base, dynamo_files))) return R_TORCH_CPP;
    if (starts_any(q, torch_ns) || torch_mod || torch_src_tree ||
        (torch_place && ((contains_any(file, torch_src) && !ends(file, ".py")) || contains_any(name, torch_names))))
        return R_TORCH_CPP;
    /* PyTorch's own Python: its package directory, installed or a checkout's (cmh_torch_roots) */
    if ((ends(file, ".py") || ends(file, ".pyc")) && cmh_torch_python(file, roots)) return R_TORCH_PY;
    /* TorchInductor's generated code, in its cache directory (/tmp/torchinductor_USER/) */
    if (strstr(file, "torchinductor_") && ends(file, ".py")) return R_TORCH_PY;
    /* a package's console script (the launcher's <module> frame, with or without a .py) */
    const char *ep;
    size_t epl;
    if (f->module < 0 && !strcmp(name, "<module>") && entry_point_script(file, &ep, &epl)) return R_PACKAGE;
    /* Any other Python frame (the recorder's, PyTorch's, py-spy's: a .py file, no module) is the
     * user's unless it is installed (a package, the standard library) or frozen importlib; its
     * function name says nothing (a user may well call one binary_op or Py_alloc). */
    /* the recorder's mark of a Python stack's middle cut by --max-frames: never a site or caller */
    if (f->module < 0 && !strcmp(file, "<cumemhist>")) return R_CUMEMHIST;
    /* the recorder's Python start-up hook (python/cumemhist/_startup/sitecustomize.py), which
     * wraps threading.Thread._bootstrap_inner to name each thread: outward of every Python
     * thread's frames, it was printed as the user's line under a worker thread's stack, and it
     * was the site and owner of a thread with no frame of the user's */
    if (f->module < 0 && ends(file, "/cumemhist/_startup/sitecustomize.py")) return R_CUMEMHIST;
    if (f->module < 0 && (ends(file, ".py") || starts(file, "<frozen ") || !strcmp(file, "<string>") || !strcmp(file, "<stdin>"))) {
        if (starts(file, "<frozen ")) return R_CPYTHON;
        return package_dir(file) ? R_PACKAGE : R_NONE;
    }
    /* C++'s runtime: libstdc++, libgcc's unwinder, libc++ */
    static const char *const std_ns[] = {"std::", "__gnu_cxx::", "__cxxabiv1::", "__cxa_", "__gxx_", "_Unwind_", NULL};
    static const char *const std_mods[] = {"libstdc++", "libgcc_s", "libc++", NULL};
    static const char *const std_src[] = {"libstdc++-v3/", "libgcc/", "/c++/", NULL};
    if (starts_any(mod, std_mods) || starts_any(q, std_ns) || contains_any(file, std_src) ||
        !strcmp(q, "execute_native_thread_routine"))
        return R_STDLIB;
    /* CPython: its binary, its sources, its C API (Py_*, _Py*, Py + a capital) and the static
     * helpers of Objects/ and Python/ a stripped interpreter still names (slot_nb_multiply) */
    static const char *const py_mods[] = {"libpython", "python", NULL};
    static const char *const py_funcs[] = {"cfunction_", "slot_tp_", "slot_nb_", "slot_sq_", "slot_mp_", "slot_am_",
                                           "method_vectorcall", "vectorcall_", "object_vacall", "call_function",
                                           "builtin_", "pymain_", "run_mod", "run_eval_code", "run_pyc", "binary_op",
                                           "ternary_op", "type_call", "wrapper_call", "wrapperdescr_call", "wrap_binaryfunc",
                                           "method_call", "methoddescr_", "property_descr", "func_descr", "partial_call",
                                           "_PyRun", "PyRun_", NULL};
    /* more of its static helpers, common enough words that a user's function may be called so:
     * taken for CPython's only where the frame has neither a module nor a source file (a stripped
     * interpreter's frame in a PyTorch snapshot, "pyrun_file @ ??") */
    static const char *const py_statics[] = {"pyrun_", "list_dealloc", "list_clear", "tuple_dealloc", "dict_dealloc",
                                             "subtype_dealloc", "subtype_clear", "delitem_knownhash", "delitem_common",
                                             "dict_ass_sub", "gen_send_ex", "context_run", "do_call_core", "task_step",
                                             "infinite_lru_cache_wrapper", "bounded_lru_cache_wrapper", "lru_cache_call",
                                             "thread_run", "t_bootstrap", "exec_code_in_module", "odict_", "deque_",
                                             "functools_", "partial_", "meth_dealloc", "func_dealloc", "frame_dealloc",
                                             "cell_dealloc", "module_dealloc", "gc_collect", "gen_iternext",
                                             NULL};
    int stripped = f->module < 0 && (!*file || !strcmp(file, "??"));
    static const char *const py_files[] = {"Objects/", "Python/", "pycore_", "pythonrun.c", "Modules/main.c",
                                           "cpython/abstract.h", "Include/", "<frozen ", NULL};
    /* CPython's own extension modules (Modules/_functoolsmodule.c, Modules/_asynciomodule.c) */
    int py_module_src = strstr(file, "Modules/") && (ends(base, "module.c") || strstr(file, "/python") || strstr(file, "/Python-"));
    int pyapi = q[0] == '_' ? q[1] == 'P' && q[2] == 'y' && ((q[3] >= 'A' && q[3] <= 'Z') || q[3] == '_')
                            : q[0] == 'P' && q[1] == 'y' && ((q[2] >= 'A' && q[2] <= 'Z') || q[2] == '_');
    if (starts_any(mod, py_mods) || starts_any(q, py_funcs) || (stripped && starts_any(q, py_statics)) || strstr(q, "vectorcall") ||
        (!ends(file, ".py") && (contains_any(file, py_files) || py_module_src)) || starts(file, "<frozen ") || pyapi)
        return R_CPYTHON;
    if (placeholder(name)) return R_PLACEHOLDER;
    /* libc, libpthread and the loader: start-up, threads, and anything else of theirs */
    /* by soname: "libdl" alone would take dlib's libdlib.so, or a user's libdlclose.so, for libc */
    static const char *const libc_mods[] = {"ld-linux", "ld-musl", "libc.so", "libc-", "libpthread.so", "libpthread-",
                                            "libdl.so", "libdl-", "libm.so", "libm-", "librt.so", "librt-", NULL};
    static const char *const libc_exact[] = {"_start", "start_thread", "clone", "clone3", "main_thread", NULL};
    static const char *const libc_pref[] = {"__libc_", "__GI_", "_dl_", "__clone", "pthread_", "__pthread", "__nptl",
                                            "__xmknod", "__xstat", "__fxstat", "__lxstat", "_IO_", NULL};
    static const char *const libc_src[] = {"sysdeps/", "nptl/", "csu/", "glibc", NULL};
    if (starts_any(mod, libc_mods) || starts_any(q, libc_pref) || contains_any(file, libc_src)) return R_LIBC;
    for (const char *const *p = libc_exact; *p; p++)
        if (!strcmp(q, *p)) return R_LIBC;
    /* a third-party package: installed Python, or a native library the program did not build */
    if (package_dir(file) || (*mpath && (strstr(mod, ".so") || ends(mod, ".pyd") || ends(mod, ".dll")) && system_module(mpath)))
        return R_PACKAGE;
    return R_NONE;
}

/* How good a site a frame of this rule makes: 0 the user's, 1 a package's, 2 a framework's or
 * library's, 3 C++'s or CPython's runtime, 4 never (cumemhist, the driver, the runtime, libc,
 * an unnamed frame). */
static int tier(uint8_t r)
{
    switch (r) {
    case R_NONE: return 0;
    case R_PACKAGE: return 1;
    case R_NVIDIA:
    case R_TORCH_CPP:
    case R_TORCH_PY:
    case R_TORCH_BIND:
    case SKIP_USER: return 2;
    case R_STDLIB:
    case R_CPYTHON: return 3;
    default: return 4;
    }
}

/* A stack of PyTorch's machinery alone (an autograd engine thread's backward, an op called from
 * C++) would take its innermost PyTorch frame as its site: PyTorch's own stack walker
 * (torch::unwind::unwind, with C++ frames recorded) or the caching allocator, which say nothing
 * of what ran.  The operator does: the outermost at::_ops:: frame of the run of PyTorch frames
 * around the allocation (nll_loss_backward, not the resize or empty it called); without one, the
 * innermost PyTorch frame of that run that is neither the walker nor the allocator.  The run
 * ends at CPython, libc or anything not PyTorch's (C++'s runtime and unnamed frames are passed
 * over).  Returns the stack position of the frame, or `at` where nothing better is there. */
static uint32_t torch_op_site(const cmh_sites *g, const cmh_stack *st, uint32_t at)
{
    static const char *const capture[] = {"torch::unwind::", "torch::CapturedTraceback::", "c10::cuda::CUDACachingAllocator::",
                                          "c10::CachingDeviceAllocator::", NULL};
    const cmh_snapshot *s = g->s;
    uint32_t op = UINT32_MAX, plain = UINT32_MAX;
    for (uint32_t i = at; i < st->count; i++) {
        uint32_t fid = s->stack_frames[st->first + i];
        uint8_t r = g->rule[fid];
        if (r != R_TORCH_CPP && r != R_TORCH_BIND && r != R_STDLIB && r != R_PLACEHOLDER) break;
        if (r != R_TORCH_CPP) continue;
        char q[512];
        qualified(cmh_str(s, s->frames[fid].name), q, sizeof q);
        const char *bare = q;
        while (starts(bare, "(anonymous namespace)::")) bare += strlen("(anonymous namespace)::");
        if (starts(q, "at::_ops::")) op = i;
        else if (plain == UINT32_MAX && !starts_any(q, capture) && !strstr(bare, "gather_with_cpp")) plain = i;
    }
    return op != UINT32_MAX ? op : plain != UINT32_MAX ? plain : at;
}

/* The package an installed file is of: the directory under site-packages or dist-packages (an
 * egg's inner one; a one-file module without .py), into out.  0: the path is in neither. */
static int package_in(const char *path, char *out, size_t cap)
{
    const char *p = strstr(path, "site-packages/");
    if (!p) p = strstr(path, "dist-packages/");
    if (!p) return 0;
    p = strchr(p, '/') + 1;
    size_t n = strcspn(p, "/");
    if (n > 4 && p[n] == '/' && !strncmp(p + n - 4, ".egg", 4)) p += n + 1, n = strcspn(p, "/"); /* NAME-1.0-py3.11.egg/NAME/ */
    if (n > 3 && !p[n] && ends(p, ".py")) n -= 3; /* a one-file module */
    snprintf(out, cap, "%.*s", (int)n, p);
    return 1;
}

/* The package a frame belongs to, for --group-by package: the directory under site-packages,
 * the framework's name, a native library's base name, or the program's own code. */
static void package_of(const cmh_snapshot *s, const cmh_frame *f, uint8_t r, const char *prog, char *out, size_t cap)
{
    char file[1024];
    cmh_sites_normpath(cmh_str(s, f->filename), file, sizeof file);
    const char *mod = cmh_frame_module(s, f), *name = NULL, *ep;
    size_t epl;
    switch (r) {
    case R_NONE: case SKIP_USER: name = prog; break;
    case R_TORCH_CPP: case R_TORCH_PY: case R_TORCH_BIND: name = "torch"; break;
    case R_CPYTHON: name = "python"; break;
    case R_STDLIB: name = "libstdc++"; break;
    case R_LIBC: name = "libc"; break;
    case R_NVIDIA: /* by the name owners gives the library: "cuBLAS (libcublas.so.13)" */
        if (*mod && cmh_library_name(mod)) {
            snprintf(out, cap, "%s (%s)", cmh_library_name(mod), mod);
            return;
        }
        name = *mod ? mod : "NVIDIA libraries";
        break;
    case R_CUMEMHIST: case R_DRIVER: case R_RUNTIME: name = "CUDA"; break;
    case R_PLACEHOLDER: name = *mod ? mod : "?"; break;
    default: break;
    }
    if (name) {
        snprintf(out, cap, "%s", name);
        return;
    }
    if (package_in(file, out, cap)) return;
    if (*file && package_dir(file)) {
        snprintf(out, cap, "python standard library");
        return;
    }
    char mpath[1024] = "";
    if (f->module >= 0 && (uint32_t)f->module < s->nmodules) cmh_sites_normpath(cmh_str(s, s->modules[f->module].path), mpath, sizeof mpath);
    if (package_in(mpath, out, cap)) return; /* a native frame of an installed package's module */
    if (entry_point_script(file, &ep, &epl)) snprintf(out, cap, "%.*s", (int)epl, ep); /* the console script */
    else snprintf(out, cap, "%.200s", *mod ? mod : file);
}

/* The name the program's own row goes by grouped by package, in the owner tag's words
 * ("program (train.py)", "program (leaky)"): what the user ran.  Its command line says it: the
 * script a Python interpreter ran (its first word that is no option; -m's module), else the
 * command's first word, each without its directory.  A record without one (a PyTorch snapshot)
 * takes its stacks' outermost frame of the user's: a Python file's base name, else its module;
 * failing all, "the program". */
static void program_name(const cmh_snapshot *s, const uint8_t *rule, char *out, size_t cap)
{
    const char *cmd = s->cmdline ? cmh_str(s, s->cmdline) : "";
    char w[8][256];
    int n = 0;
    for (const char *p = cmd; *p && n < 8;) {
        while (*p == ' ') p++;
        size_t l = strcspn(p, " ");
        if (!l) break;
        snprintf(w[n++], sizeof w[0], "%.*s", (int)(l < sizeof w[0] ? l : sizeof w[0] - 1), p);
        p += l;
    }
    if (n) {
        const char *word = w[0], *b = strrchr(word, '/');
        b = b ? b + 1 : word;
        int python = starts(b, "python") || starts(b, "pypy");
        for (int i = 1; python && i < n; i++) {
            if (!strcmp(w[i], "-m") && i + 1 < n) { /* python -m pkg.train: the module */
                word = w[i + 1];
                break;
            }
            if (!strcmp(w[i], "-c")) break; /* python -c '...': the interpreter it is */
            if (!strcmp(w[i], "-W") || !strcmp(w[i], "-X")) { /* options with a word of their own */
                i++;
                continue;
            }
            if (w[i][0] != '-') {
                word = w[i];
                break;
            }
        }
        b = strrchr(word, '/');
        snprintf(out, cap, "program (%.120s)", b && b[1] ? b + 1 : word);
        return;
    }
    const char *py = NULL, *mod = NULL;
    for (uint32_t k = 0; k < s->nstacks && !py; k++) {
        const cmh_stack *st = &s->stacks[k];
        for (uint32_t i = st->count; i-- > 0;) {
            uint32_t fid = s->stack_frames[st->first + i];
            if (rule[fid] != R_NONE || placeholder(cmh_str(s, s->frames[fid].name))) continue;
            const cmh_frame *f = &s->frames[fid];
            const char *file = cmh_str(s, f->filename), *m = cmh_frame_module(s, f);
            if (ends(file, ".py")) py = file;
            else if (!mod && *m) mod = m;
            break;
        }
    }
    const char *name = py ? py : mod;
    if (!name) {
        snprintf(out, cap, "the program");
        return;
    }
    char norm[1024];
    cmh_sites_normpath(name, norm, sizeof norm);
    const char *b = strrchr(norm, '/');
    snprintf(out, cap, "program (%.120s)", b ? b + 1 : norm);
}

/* ---- groups ---- */

static uint64_t hmix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) h = hmix(h, (unsigned char)*s);
    return hmix(h, 0xff);
}

/* What two allocations must share to be one group, as a hash (and compared in full below). */
static uint64_t key_of(const cmh_sites *g, uint32_t stack, uint32_t site, const char *owner, const char *pkg)
{
    const cmh_snapshot *s = g->s;
    uint64_t h = 1469598103934665603ull;
    const cmh_frame *f = site != UINT32_MAX ? &s->frames[site] : NULL;
    switch (g->by) {
    case CMH_GROUP_STACK: h = hmix(h, stack); break;
    case CMH_GROUP_MODULE: h = hash_str(h, owner); break;
    case CMH_GROUP_PACKAGE: h = hash_str(h, pkg); break;
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

static int same_group(const cmh_sites *g, const sgroup *a, uint32_t stack, uint32_t site, const char *owner,
                      const char *pkg)
{
    const cmh_snapshot *s = g->s;
    const cmh_frame *x = a->site_frame != UINT32_MAX ? &s->frames[a->site_frame] : NULL;
    const cmh_frame *y = site != UINT32_MAX ? &s->frames[site] : NULL;
    switch (g->by) {
    case CMH_GROUP_STACK: return a->stack == stack;
    case CMH_GROUP_MODULE: return !strcmp(a->owner, owner);
    case CMH_GROUP_PACKAGE: return !strcmp(a->package, pkg);
    case CMH_GROUP_FILE: return x && y ? x->filename == y->filename : x == y;
    default:
        if (!x || !y) return x == y;
        return x->name == y->name && x->filename == y->filename && x->line == y->line &&
               !strcmp(cmh_frame_module(s, x), cmh_frame_module(s, y));
    }
}

/* A name made for an owner, kept for the life of g (NULL: no memory). */
static const char *intern(cmh_sites *g, const char *name)
{
    for (uint32_t i = 0; i < g->nnames; i++)
        if (!strcmp(g->names[i], name)) return g->names[i];
    char *c = strdup(name);
    if (!c || CMH_GROW(g->names, g->capnames, (uint64_t)g->nnames + 1, 8)) {
        free(c);
        return NULL;
    }
    return g->names[g->nnames++] = c;
}

/* The owner a Python frame reached through ctypes names: an installed package by its name (the
 * directory under site-packages, dist-packages, a venv's or conda's lib/pythonX.Y/site-packages,
 * Windows' Lib\site-packages: "gpulib", never its __init__.py), the user's own file by its base
 * name, a package's __init__.py of the user's own by its directory.  *package: an installed one. */
static const char *python_owner(cmh_sites *g, const cmh_frame *f, int *package)
{
    const cmh_snapshot *s = g->s;
    char file[1024], name[256];
    cmh_sites_normpath(cmh_str(s, f->filename), file, sizeof file);
    if (package_dir(file)) {
        package_of(s, f, R_PACKAGE, g->prog, name, sizeof name);
        *package = 1;
        return intern(g, name);
    }
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (!strcmp(base, "__init__.py") && base > file + 1) { /* a package of the user's: its directory */
        const char *dir = base - 1;
        while (dir > file && dir[-1] != '/') dir--;
        snprintf(name, sizeof name, "%.*s", (int)(base - 1 - dir), dir);
        return intern(g, name);
    }
    return intern(g, base);
}

/* The owner a native module names: a library of NVIDIA's or PyTorch's by its file
 * ("libcublas.so.13", PyTorch's torch/_C...so), an installed package's own module by the package
 * as its Python files are ("torchvision" for site-packages/torchvision/_C.so), else the module.
 * Another _C extension was PyTorch's (the owner tag read its base name), and an installed
 * package's module was "program (core.cpython-311-x86_64-linux-gnu.so)". */
static const char *native_owner(cmh_sites *g, const cmh_frame *f, const char *mod, int *package)
{
    const cmh_snapshot *s = g->s;
    const char *lib = cmh_library_name(mod);
    char path[1024], name[256];
    cmh_sites_normpath(cmh_str(s, s->modules[f->module].path), path, sizeof path);
    int torch = lib && !strcmp(lib, "PyTorch");
    if (lib && (!torch || cmh_sites_torch_module(path))) return mod;
    if (strstr(path, "site-packages/") || strstr(path, "dist-packages/")) {
        package_in(path, name, sizeof name);
        *package = 1;
        const char *o = intern(g, name);
        return o ? o : "?";
    }
    if (!torch) return mod;
    /* a _C extension of no install (the user's build): with its directory, so no reader takes
     * its base name for PyTorch's */
    const char *sl = strrchr(path, '/'), *dir = sl;
    if (!sl) return mod;
    while (dir > path && dir[-1] != '/') dir--;
    snprintf(name, sizeof name, "%.*s/%s", (int)(sl - dir), dir, mod);
    const char *o = intern(g, name);
    return o ? o : "?";
}

/* The owner: the module of the innermost frame that is not the driver, the shared runtime or
 * cumemhist (a static runtime is part of the program that links it). */
static const char *owner_of(cmh_sites *g, const cmh_stack *st, int *package)
{
    *package = 0;
    const cmh_snapshot *s = g->s;
    if (s->source == CMH_SRC_PYTORCH) return "PyTorch";
    for (uint32_t i = 0; i < st->count; i++) {
        uint32_t fid = s->stack_frames[st->first + i];
        const cmh_frame *f = &s->frames[fid];
        const char *mod = cmh_frame_module(s, f);
        if (!*mod) {
            /* a Python frame reached through ctypes' glue: the program's script owns it */
            const char *file = f->module < 0 ? cmh_str(s, f->filename) : "";
            if (ends(file, ".py")) {
                const char *o = python_owner(g, f, package);
                return o ? o : "?";
            }
            continue;
        }
        if (starts(mod, "libcumemhist") || starts(mod, "libcuda.so") || starts(mod, "libcuda-") || starts(mod, "libcudart"))
            continue;
        /* ctypes (libffi, _ctypes) calls the driver for a Python caller, who owns it */
        if (starts(mod, "libffi.so") || starts(mod, "_ctypes.") || starts(mod, "_ctypes_")) continue;
        return native_owner(g, f, mod, package);
    }
    return st->count ? "?" : "";
}

/* a Python frame: a .py file with no module (the recorder's, a PyTorch snapshot's) */
static int py_frame(const cmh_snapshot *s, const cmh_frame *f)
{
    const char *file = cmh_str(s, f->filename);
    size_t n = strlen(file);
    return f->module < 0 && n > 3 && !strcmp(file + n - 3, ".py");
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
    g->caller = malloc((s->nstacks ? s->nstacks : 1) * sizeof *g->caller);
    g->site_at = malloc((s->nstacks ? s->nstacks : 1) * sizeof *g->site_at);
    if (!g->rule || !g->site || !g->gid || !g->caller || !g->site_at) goto oom;
    cmh_torch_roots *roots = calloc(1, sizeof *roots);
    if (!roots) goto oom;
    cmh_torch_roots_find(s, roots);
    for (uint32_t i = 0; i < s->nframes; i++) {
        const cmh_frame *f = &s->frames[i];
        g->rule[i] = o && o->no_default_rules ? R_NONE : (uint8_t)classify(s, f, roots);
        if (!g->python) g->python = py_frame(s, f);
        /* a Windows path is matched as recorded and as the rules read it, with '/': the same
         * --skip 'mylib/' serves a snapshot from either platform (it matched none of
         * C:\proj\mylib\layers.py's frames, silently) */
        const char *file = cmh_str(s, f->filename);
        char norm[1024] = "";
        if (nre && strchr(file, '\\')) cmh_sites_normpath(file, norm, sizeof norm);
        for (int k = 0; k < nre && (!g->rule[i] || g->rule[i] == R_PACKAGE); k++)
            if (!regexec(&re[k], cmh_str(s, f->name), 0, NULL, 0) || !regexec(&re[k], file, 0, NULL, 0) ||
                (*norm && !regexec(&re[k], norm, 0, NULL, 0)) ||
                (f->module >= 0 && (uint32_t)f->module < s->nmodules &&
                 !regexec(&re[k], cmh_str(s, s->modules[f->module].path), 0, NULL, 0)))
                g->rule[i] = SKIP_USER;
    }
    free(roots);
    /* CPython's own main() (Programs/python.c) is a plain "main" to a recorder with no modules
     * (PyTorch's stacks="all": "main" in "??"), so the user's by every rule above; it is the one
     * that calls the interpreter's entry point (Py_BytesMain, Py_Main, pymain_main).  Left the
     * user's, it was the site of every stack whose Python frames were all a package's (a run
     * started by an installed package's command: "main" for all of a vllm run's memory). */
    static const char *const py_entries[] = {"Py_BytesMain", "Py_Main", "pymain_", NULL};
    for (uint32_t k = 0; !(o && o->no_default_rules) && k < s->nstacks; k++) {
        const cmh_stack *st = &s->stacks[k];
        for (uint32_t i = 1; i < st->count; i++) {
            uint32_t fid = s->stack_frames[st->first + i], in = s->stack_frames[st->first + i - 1];
            const char *fn = cmh_str(s, s->frames[fid].name); /* (an LTO build's "main.llvm.N" too) */
            if (g->rule[fid] == R_NONE && g->rule[in] == R_CPYTHON && cmh_name_base_len(fn) == 4 && !strncmp(fn, "main", 4) &&
                starts_any(cmh_str(s, s->frames[in].name), py_entries))
                g->rule[fid] = R_CPYTHON;
        }
    }
    if (g->by == CMH_GROUP_PACKAGE) program_name(s, g->rule, g->prog, sizeof g->prog);
    for (uint32_t k = 0; k < s->nstacks; k++) {
        const cmh_stack *st = &s->stacks[k];
        /* the innermost user frame, else package, else framework (PyTorch's allocator, cuBLAS:
         * they say more than the runtime's or an unnamed frame), else the innermost of all */
        uint32_t site = UINT32_MAX, at = 0;
        int best = 4;
        for (uint32_t i = 0; i < st->count && best; i++) {
            uint32_t fid = s->stack_frames[st->first + i];
            int t = tier(g->rule[fid]);
            if (t >= 1 && placeholder(cmh_str(s, s->frames[fid].name))) t = 4; /* a name says more */
            if (t < best) best = t, site = fid, at = i;
        }
        if (site == UINT32_MAX && st->count) site = s->stack_frames[st->first], at = 0;
        if (best == 2 && g->rule[site] == R_TORCH_CPP) site = s->stack_frames[st->first + (at = torch_op_site(g, st, at))];
        /* the caller: the next frame outward that is the user's or a package's */
        uint32_t caller = UINT32_MAX;
        for (uint32_t i = at + 1; site != UINT32_MAX && best <= 1 && i < st->count && caller == UINT32_MAX; i++) {
            uint32_t fid = s->stack_frames[st->first + i];
            if (tier(g->rule[fid]) <= 1) caller = fid;
        }
        g->caller[k] = caller;
        g->site[k] = site;
        g->site_at[k] = site != UINT32_MAX ? at : 0;
        int owner_package;
        const char *owner = owner_of(g, st, &owner_package);
        /* its package: the innermost third-party package it went through on the way from its
         * site to the allocation, else its site's (the standard library's threading.py outward of
         * a user's thread function is not where its memory went: the program's row) */
        char pkg[256] = "";
        if (g->by == CMH_GROUP_PACKAGE) {
            for (uint32_t i = 0; site != UINT32_MAX && i < g->site_at[k] && !*pkg; i++) {
                uint32_t fid = s->stack_frames[st->first + i];
                if (g->rule[fid] == R_PACKAGE) package_of(s, &s->frames[fid], R_PACKAGE, g->prog, pkg, sizeof pkg);
            }
            if (!*pkg && site != UINT32_MAX) package_of(s, &s->frames[site], g->rule[site], g->prog, pkg, sizeof pkg);
            if (!*pkg) snprintf(pkg, sizeof pkg, "<no stack>");
        }
        uint64_t h = key_of(g, k, site, owner, pkg);
        uint32_t pos = UINT32_MAX, found = UINT32_MAX;
        for (gslot *sl; found == UINT32_MAX && (sl = cmh_oa_next(&g->index, h, &pos));)
            if (same_group(g, &g->groups[sl->group], k, site, owner, pkg)) found = (uint32_t)sl->group;
        if (found == UINT32_MAX) {
            if (CMH_GROW(g->groups, g->cap, (uint64_t)g->ngroups + 1, 64)) goto oom;
            gslot *sl = cmh_oa_add(&g->index, h);
            if (!sl) goto oom;
            sl->group = found = g->ngroups;
            char *pcopy = NULL;
            if (g->by == CMH_GROUP_PACKAGE && !(pcopy = strdup(pkg))) goto oom;
            g->groups[g->ngroups++] = (sgroup){k, site, owner, pcopy, owner_package};
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
    free(g->caller);
    free(g->site_at);
    for (uint32_t i = 0; g->groups && i < g->ngroups; i++) free(g->groups[i].package);
    free(g->groups);
    for (uint32_t i = 0; i < g->nnames; i++) free(g->names[i]);
    free(g->names);
    cmh_oa_free(&g->index);
    free(g);
}

uint32_t cmh_sites_group(const cmh_sites *g, uint32_t stack) { return stack < g->s->nstacks ? g->gid[stack] : 0; }
uint32_t cmh_sites_count(const cmh_sites *g) { return g->ngroups; }
const cmh_snapshot *cmh_sites_snapshot(const cmh_sites *g) { return g->s; }

/* A PyTorch trace whose allocations have frames but for some (an empty stack on an 'alloc'):
 * those came from a thread with no Python frame, PyTorch's autograd engine's own threads running
 * backward under stacks='python' (gradients, their cuBLAS workspace).  In a record merged with
 * PyTorch's part (cmh_merged_view) only that part's entries are looked at: the recorder's
 * own have their stacks by its context.  Stops at the first of each. */
static int stackless_allocs(const cmh_snapshot *s, int only_pytorch)
{
    int with = 0, without = 0;
    for (uint32_t i = 0; i < s->nentries && !(with && without); i++)
        if (s->entries[i].action == CMH_ACT_ALLOC && (!only_pytorch || (s->entries[i].flags & CMH_EF_PYTORCH))) {
            if (s->entries[i].stack) with = 1;
            else without = 1;
        }
    return with && without;
}

const char *cmh_no_stack_reason(const cmh_snapshot *s)
{
    /* (PyTorch's backward allocates on the engine's threads: said "recorded without stacks, or
     * allocated before recording" of the gradients of a run recorded with stacks all along) */
    if (s && s->source == CMH_SRC_PYTORCH && stackless_allocs(s, 0))
        return "allocated by a thread with no Python frame (autograd's backward: stacks='all' keeps its C++ frames), "
               "or before recording";
    /* the same blocks in a co-recorded record's merged view (the H200's torch_plain.cmh said
     * "allocated before the first kept entry" of its 112.2 MiB of gradients) */
    if (s && s->source == CMH_SRC_RECORDER && stackless_allocs(s, 1))
        return "allocated by a thread with no Python frame (autograd's backward, with PyTorch's history under "
               "stacks='python'), before the first kept entry, or its stack could not be read";
    if (s && s->source == CMH_SRC_RECORDER && s->opt_context == CMH_CONTEXT_NONE) return "recorded with context none";
    if (s && s->source == CMH_SRC_RECORDER && s->opt_context == CMH_CONTEXT_STATE)
        return "context state keeps the stacks of blocks live at the end only";
    if (s && s->source == CMH_SRC_RECORDER && s->opt_context == CMH_CONTEXT_ALL)
        return "allocated before the first kept entry, or its stack could not be read";
    return "recorded without stacks, or allocated before recording";
}

int cmh_frees_carry_own_stacks(const cmh_snapshot *s)
{
    return s && s->source == CMH_SRC_RECORDER && s->opt_context == CMH_CONTEXT_ALL;
}

int cmh_sites_group_by(const cmh_sites *g) { return g->by; }

const cmh_frame *cmh_sites_frame(const cmh_sites *g, uint32_t group)
{
    if (group >= g->ngroups || g->groups[group].site_frame == UINT32_MAX) return NULL;
    return &g->s->frames[g->groups[group].site_frame];
}

uint32_t cmh_sites_stack(const cmh_sites *g, uint32_t group) { return group < g->ngroups ? g->groups[group].stack : 0; }
const char *cmh_sites_owner(const cmh_sites *g, uint32_t group) { return group < g->ngroups ? g->groups[group].owner : ""; }
int cmh_sites_owner_package(const cmh_sites *g, uint32_t group) { return group < g->ngroups && g->groups[group].owner_package; }
const char *cmh_sites_package_name(const cmh_sites *g, uint32_t group)
{
    return group < g->ngroups && g->groups[group].package ? g->groups[group].package : "";
}

const cmh_frame *cmh_sites_site_of(const cmh_sites *g, uint32_t stack)
{
    if (stack >= g->s->nstacks || g->site[stack] == UINT32_MAX) return NULL;
    return &g->s->frames[g->site[stack]];
}

typedef struct site_bytes {
    uint32_t site, stack;
    uint64_t bytes;
} site_bytes;

static int cmp_site_bytes(const void *a, const void *b)
{
    const site_bytes *x = a, *y = b;
    if (x->site != y->site) return x->site < y->site ? -1 : 1;
    return (x->stack > y->stack) - (x->stack < y->stack); /* a site's first stack stands for it */
}

uint32_t cmh_sites_segment_stack(const cmh_sites *g, uint32_t seg, int *from_blocks, uint32_t *nsites)
{
    const cmh_snapshot *s = g->s;
    *from_blocks = 0;
    *nsites = 0;
    if (seg >= s->nsegments) return 0;
    const cmh_segment *sg = &s->segments[seg];
    if (cmh_sites_site_of(g, sg->stack)) return sg->stack;
    site_bytes *v = sg->nblocks ? malloc(sg->nblocks * sizeof *v) : NULL;
    if (!v) return 0; /* (no memory: said as no stack, as before) */
    uint32_t n = 0;
    for (int any = 0; any < 2 && !n; any++) /* the live blocks; when none is live, any block */
        for (uint32_t k = 0; k < sg->nblocks; k++) {
            const cmh_block *b = &s->blocks[sg->first_block + k];
            if ((!any && b->state == CMH_BLOCK_INACTIVE) || !cmh_sites_site_of(g, b->stack)) continue;
            v[n++] = (site_bytes){g->site[b->stack], b->stack, b->size};
        }
    uint32_t best = 0;
    if (n) {
        qsort(v, n, sizeof *v, cmp_site_bytes);
        uint64_t most = 0;
        for (uint32_t i = 0; i < n;) {
            uint32_t j = i;
            uint64_t sum = 0;
            for (; j < n && v[j].site == v[i].site; j++) sum += v[j].bytes;
            if (sum > most || !best) most = sum, best = v[i].stack; /* (ties: the lower site, in frame order) */
            ++*nsites;
            i = j;
        }
        *from_blocks = 1;
    }
    free(v);
    return best;
}

int cmh_sites_machinery(const cmh_sites *g, uint32_t frame_id)
{
    return frame_id < g->s->nframes && g->rule[frame_id] && g->rule[frame_id] != R_PACKAGE;
}

int cmh_sites_stdlib_plumbing(const cmh_sites *g, uint32_t frame_id)
{
    if (frame_id >= g->s->nframes || g->rule[frame_id] != R_PACKAGE) return 0;
    const char *file = cmh_str(g->s, g->s->frames[frame_id].filename);
    if (!package_dir(file) || strstr(file, "site-packages/") || strstr(file, "dist-packages/")) return 0;
    static const char *const plumbing[] = {"/threading.py", "/asyncio/", "/multiprocessing/", "/concurrent/futures/",
                                           "/runpy.py", "/selectors.py", NULL};
    return contains_any(file, plumbing);
}

const char *cmh_sites_no_user_frame(const cmh_sites *g, uint32_t stack)
{
    const cmh_snapshot *s = g->s;
    if (stack >= s->nstacks || g->site[stack] == UINT32_MAX) return NULL;
    if (g->rule[g->site[stack]] == R_NONE || g->rule[g->site[stack]] == R_PACKAGE) return NULL;
    if (!g->python && s->source != CMH_SRC_PYTORCH) return "no user frame";
    const cmh_stack *st = &s->stacks[stack];
    for (uint32_t i = 0; i < st->count; i++)
        if (py_frame(s, &s->frames[s->stack_frames[st->first + i]])) return "no user frame";
    return "no Python frame";
}

int cmh_sites_cut_marker(const cmh_sites *g, uint32_t frame_id)
{
    if (frame_id >= g->s->nframes || g->rule[frame_id] != R_CUMEMHIST) return 0;
    const cmh_frame *f = &g->s->frames[frame_id];
    return f->module < 0 && !strcmp(cmh_str(g->s, f->filename), "<cumemhist>");
}

int cmh_sites_package(const cmh_sites *g, uint32_t frame_id) { return frame_id < g->s->nframes && g->rule[frame_id] == R_PACKAGE; }

const cmh_frame *cmh_sites_caller_of(const cmh_sites *g, uint32_t stack)
{
    if (stack >= g->s->nstacks || g->caller[stack] == UINT32_MAX) return NULL;
    return &g->s->frames[g->caller[stack]];
}

uint32_t cmh_sites_leaf_machinery(const cmh_sites *g, uint32_t stack)
{
    return stack < g->s->nstacks ? g->site_at[stack] : 0;
}

int cmh_sites_drawn(const cmh_sites *g, uint32_t stack, uint32_t k)
{
    if (stack >= g->s->nstacks || k >= g->s->stacks[stack].count) return 0;
    const uint32_t *fr = g->s->stack_frames + g->s->stacks[stack].first;
    uint32_t at = g->site_at[stack];
    if (k == at) return 1;
    if (k < at) return g->rule[fr[k]] == R_PACKAGE;
    /* outward of a user's (or package's) site, its callers as rep_print_frames shows them: the
     * interpreter's start (_start, Py_BytesMain, PyRun_*), CPython's frames between two Python
     * frames and libc's left out; outward of a fallback site (all machinery), every frame */
    return cmh_sites_machinery(g, fr[at]) || !cmh_sites_machinery(g, fr[k]) || cmh_sites_cut_marker(g, fr[k]);
}

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
    if (g->by == CMH_GROUP_PACKAGE) return put(buf, cap, 0, gr->package);
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
