/*
 * test_sites.c - attribution (analyzer/sites.c): every default rule on a frame it must catch and
 * on one it must not, the fallback of an all-machinery stack, --skip and --no-default-skip, the
 * four groupings, and owners.
 */
#include <string.h>

#include "cumemhist/sites.h"
#include "testutil.h"

typedef struct frame_case {
    const char *name, *file, *module; /* module: a path, "" for none */
    const char *rule;                 /* expected rule, NULL = the user's code */
} frame_case;

static const frame_case g_cases[] = {
    {"cmh_hist_segment_alloc", "libcumemhist.so", "/opt/lib/libcumemhist.so", "cumemhist"},
    {"0x1f2e3", "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuda-driver"},
    {"cudaMalloc", "app", "/home/u/app", "cuda-runtime"},      /* a static runtime in the program */
    {"cudaMallocAsync", "app", "/home/u/app", "cuda-runtime"},
    {"__cudart1234", "app", "/home/u/app", "cuda-runtime"},
    {"foo", "libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.13", "cuda-runtime"},
    {"cudaify_tensor", "app", "/home/u/app", NULL},            /* "cuda" then a lower-case letter: the user's */
    {"cublasCreate_v2", "libcublas.so.13", "/x/libcublas.so.13", "nvidia-libraries"},
    {"f", "libcublasLt.so.13", "/x/libcublasLt.so.13", "nvidia-libraries"},
    {"ncclAllReduce", "app", "/home/u/app", "nvidia-libraries"},
    {"cudnnConvolutionForward", "app", "/home/u/app", "nvidia-libraries"},
    {"c10::cuda::CUDACachingAllocator::malloc(void**, int, unsigned long)", "??", "", "pytorch-cpp"},
    {"at::Tensor c10::impl::wrap_kernel_functor_unboxed_<at::Tensor (c10::ArrayRef<long>)>::call(c10::OperatorKernel*)",
     "??", "", "pytorch-cpp"},
    {"torch::autograd::VariableType::mm(c10::DispatchKeySet, at::Tensor const&)", "??", "", "pytorch-cpp"},
    {"myext::forward(at::Tensor const&)", "ext.cpp", "/home/u/ext.so", NULL}, /* takes an at::Tensor: still the user's */
    {"helper", "libtorch_cuda.so", "/site-packages/torch/lib/libtorch_cuda.so", "pytorch-cpp"},
    {"run", "aten/src/ATen/native/TensorFactories.cpp", "", "pytorch-cpp"},
    {"CapturedTraceback::gather()", "??", "", "pytorch-cpp"},
    {"_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "", "pytorch-python"},
    {"<lambda>", "torch/nn/modules/module.py", "", "pytorch-python"},
    {"forward", "/home/u/torchvision_models/torch_net.py", "", NULL}, /* a directory named torch_net, not torch/ */
    {"update_nodes", "models.py", "", NULL},
    {"std::_Function_handler<void (), foo>::_M_invoke(std::_Any_data const&)", "libx.so", "/x/libx.so", "cxx-stdlib"},
    {"_PyEval_EvalFrameDefault", "python3.11", "/usr/bin/python3.11", "cpython"},
    {"PyObject_Call", "??", "", "cpython"},
    {"method_vectorcall_VARARGS", "??", "", "cpython"},
    {"slot_tp_call", "Objects/typeobject.c", "", "cpython"},
    {"Pygmalion", "app.c", "/home/u/app", NULL}, /* "Py" then a lower-case letter */
    {"??", "??", "", "placeholder"},
    {"0xdeadbeef", "libfoo.so", "/x/libfoo.so", "placeholder"},
    {"__libc_start_main", "libc.so.6", "/lib/libc.so.6", "libc"},
    {"_start", "app", "/home/u/app", "libc"},
    {"start_thread", "??", "", "libc"},
    {"__libc_init_first", "??", "", "libc"},
    {"pthread_once", "??", "", "libc"},
    {"memcpy", "", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc"},
    {"slot_nb_multiply", "??", "", "cpython"},
    {"Py_RunMain", "??", "", "cpython"},
    {"Py_BytesMain", "??", "", "cpython"},
    {"execute_native_thread_routine", "thread.cc", "", "cxx-stdlib"},
    {"f", "??", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "cxx-stdlib"},
    {"(anonymous namespace)::THPFunction_apply(_object*, _object*)", "python_function.cpp", "", "pytorch-bindings"},
    {"THPVariable_clear", "??", "", "pytorch-bindings"},
    {"THPython", "thp.c", "/home/u/app", NULL}, /* "THP" then a lower-case letter */
    {"dynamo_custom_eval_frame_shim", "eval_frame.c", "", "pytorch-cpp"},
    {"forward", "C:\\Users\\u\\env\\Lib\\site-packages\\torch\\nn\\modules\\linear.py", "", "pytorch-python"},
    {"f", "C:\\env\\Lib\\site-packages\\einops\\..\\torch\\nn\\functional.py", "", "pytorch-python"},
    {"apply_for_scalar", "/env/lib/python3.11/site-packages/einops/_backends.py", "", "package"},
    {"contextmanager", "/usr/lib/python3.11/contextlib.py", "", "package"},
    {"decorate", "C:\\Python311\\Lib\\functools.py", "", "package"},
    {"png_read", "png.c", "/usr/lib/x86_64-linux-gnu/libpng16.so.16", "package"},
    {"myext_run", "ext.c", "/home/u/build/libmyext.so", NULL}, /* a library the user built: the user's */
    {"forward", "D:\\proj\\model.py", "", NULL},
    {"main", "app.c", "/home/u/app", NULL},
    {"make_buffer(unsigned long)", "cudart_demo.cu", "/home/u/cudart_demo", NULL},
};
#define NCASES (sizeof g_cases / sizeof g_cases[0])

static uint32_t intern(cmh_snapshot *s, const char *t)
{
    uint32_t id;
    CU_ASSERT_EQUAL_FATAL(cmh_strtab_intern(&s->strings, t, strlen(t), &id), CMH_OK);
    return id;
}

static uint32_t frame(cmh_snapshot *s, const char *name, const char *file, int64_t line, const char *module)
{
    cmh_frame f = {0x1000, intern(s, name), intern(s, file), line, -1};
    if (module && *module) {
        for (uint32_t i = 0; i < s->nmodules && f.module < 0; i++)
            if (!strcmp(cmh_str(s, s->modules[i].path), module)) f.module = (int32_t)i;
        if (f.module < 0) {
            cmh_module m = {intern(s, module), 0, 0x10000, 0x1000};
            CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_module(s, &m), CMH_OK);
            f.module = (int32_t)s->nmodules - 1;
        }
    }
    uint32_t id;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_frame(s, &f, &id), CMH_OK);
    return id;
}

static uint32_t stack(cmh_snapshot *s, const uint32_t *ids, uint32_t n)
{
    uint32_t id;
    CU_ASSERT_EQUAL_FATAL(cmh_snapshot_add_stack(s, ids, n, &id), CMH_OK);
    return id;
}

static cmh_sites *sites(const cmh_snapshot *s, int by, int nodefault, const char *const *skips, int nskips)
{
    cmh_site_opts o = {by, nodefault, skips, nskips};
    int rc;
    char err[256];
    cmh_sites *g = cmh_sites_new(s, &o, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(g);
    return g;
}

static void test_every_rule(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    uint32_t ids[NCASES];
    for (size_t i = 0; i < NCASES; i++) ids[i] = frame(&s, g_cases[i].name, g_cases[i].file, 0, g_cases[i].module);
    cmh_sites *g = sites(&s, CMH_GROUP_SITE, 0, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    int seen[16] = {0};
    for (size_t i = 0; i < NCASES; i++) {
        const char *r = cmh_sites_rule(g, ids[i]);
        if (!g_cases[i].rule) {
            if (r) fprintf(stderr, "  '%s' taken for machinery (%s)\n", g_cases[i].name, r);
            CU_ASSERT_PTR_NULL(r);
        } else {
            if (!r || strcmp(r, g_cases[i].rule)) fprintf(stderr, "  '%s': %s, not %s\n", g_cases[i].name, r ? r : "user", g_cases[i].rule);
            CU_ASSERT(r && !strcmp(r, g_cases[i].rule));
            for (int k = 1; cmh_site_rule_names[k]; k++)
                if (r && !strcmp(r, cmh_site_rule_names[k])) seen[k] = 1;
        }
    }
    for (int k = 1; cmh_site_rule_names[k]; k++) {
        if (!seen[k]) fprintf(stderr, "  rule %s has no case\n", cmh_site_rule_names[k]);
        CU_ASSERT(seen[k]);
    }
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
}

/* the site is the first user frame out from the allocation; all machinery falls back */
static void test_site_and_fallback(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    uint32_t rt = frame(&s, "0x41b5d", "libcudart.so.13", 0, "/x/libcudart.so.13");
    uint32_t alloc = frame(&s, "c10::cuda::CUDACachingAllocator::malloc()", "libc10_cuda.so", 0, "/x/libc10_cuda.so");
    uint32_t py = frame(&s, "_call_impl", "/site-packages/torch/nn/modules/module.py", 1775, "");
    uint32_t user = frame(&s, "build", "samples/torch_train.py", 28, "");
    uint32_t top = frame(&s, "<module>", "samples/torch_train.py", 91, "");
    uint32_t a[] = {rt, alloc, py, user, top}, b[] = {rt, alloc, py};
    uint32_t sa = stack(&s, a, 5), sb = stack(&s, b, 3);
    cmh_sites *g = sites(&s, CMH_GROUP_SITE, 0, NULL, 0);
    CU_ASSERT_PTR_EQUAL(cmh_sites_site_of(g, sa), &s.frames[user]);
    CU_ASSERT_PTR_EQUAL(cmh_sites_site_of(g, sb), &s.frames[alloc]); /* not the runtime's unnamed frame */
    CU_ASSERT_STRING_EQUAL(cmh_sites_owner(g, cmh_sites_group(g, sa)), "libc10_cuda.so");
    cmh_sites_free(g);
    /* --no-default-skip: the innermost frame is the site */
    g = sites(&s, CMH_GROUP_SITE, 1, NULL, 0);
    CU_ASSERT_PTR_EQUAL(cmh_sites_site_of(g, sa), &s.frames[rt]);
    cmh_sites_free(g);
    /* --skip takes the user's build() too: the next frame out */
    const char *skip[] = {"^build$"};
    g = sites(&s, CMH_GROUP_SITE, 0, skip, 1);
    CU_ASSERT_PTR_EQUAL(cmh_sites_site_of(g, sa), &s.frames[top]);
    CU_ASSERT_STRING_EQUAL(cmh_sites_rule(g, user), "skip");
    cmh_sites_free(g);
    /* a --skip that does not compile is refused, with the reason */
    const char *bad[] = {"(unclosed"};
    cmh_site_opts o = {CMH_GROUP_SITE, 0, bad, 1};
    int rc;
    char err[256];
    CU_ASSERT_PTR_NULL(cmh_sites_new(&s, &o, &rc, err, sizeof err));
    CU_ASSERT_EQUAL(rc, CMH_EINVAL);
    CU_ASSERT(strstr(err, "(unclosed") != NULL);
    cmh_snapshot_free(&s);
}

/* one allocating function called from two lines: one site, two stacks */
static void test_groupings(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    uint32_t drv = frame(&s, "cuMemAlloc_v2", "libcuda.so.1", 0, "/x/libcuda.so.1");
    uint32_t buf = frame(&s, "buffer", "two_sites.c", 12, "/x/two_sites");
    uint32_t m1 = frame(&s, "main", "two_sites.c", 20, "/x/two_sites");
    uint32_t m2 = frame(&s, "main", "two_sites.c", 21, "/x/two_sites");
    uint32_t other = frame(&s, "other", "lib.c", 5, "/x/libother.so");
    uint32_t a[] = {drv, buf, m1}, b[] = {drv, buf, m2}, c[] = {other, m1};
    uint32_t sa = stack(&s, a, 3), sb = stack(&s, b, 3), sc = stack(&s, c, 2);
    cmh_sites *g = sites(&s, CMH_GROUP_SITE, 0, NULL, 0);
    CU_ASSERT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sb));
    CU_ASSERT_NOT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sc));
    char k1[256];
    cmh_sites_key(g, cmh_sites_group(g, sa), k1, sizeof k1);
    CU_ASSERT_STRING_EQUAL(k1, "buffer@two_sites.c:12@two_sites");
    cmh_sites_free(g);
    g = sites(&s, CMH_GROUP_STACK, 0, NULL, 0);
    CU_ASSERT_NOT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sb));
    cmh_sites_free(g);
    g = sites(&s, CMH_GROUP_MODULE, 0, NULL, 0);
    CU_ASSERT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sb));
    CU_ASSERT_NOT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sc));
    CU_ASSERT_STRING_EQUAL(cmh_sites_owner(g, cmh_sites_group(g, sa)), "two_sites");
    CU_ASSERT_STRING_EQUAL(cmh_sites_owner(g, cmh_sites_group(g, sc)), "libother.so");
    cmh_sites_free(g);
    g = sites(&s, CMH_GROUP_FILE, 0, NULL, 0);
    CU_ASSERT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sb));
    CU_ASSERT_NOT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sc));
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
}

/* ---- the corpus: whole stacks as real recordings shape them (synthetic), each with the line a
 * user would name.  Frames innermost first; module "" when the recording has none. ---- */

typedef struct cframe {
    const char *name, *file;
    int line;
    const char *module;
} cframe;

typedef struct corpus_case {
    const char *what;
    cframe f[16];
    int site; /* index of the frame that must be the site */
} corpus_case;

#define ALLOC {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long)", "CUDACachingAllocator.cpp", 0, ""}
#define EVAL {"_PyEval_EvalFrameDefault", "??", 0, ""}

static const corpus_case g_corpus[] = {
    {"CPython's C between Python frames (stacks=all)",
     {ALLOC, {"at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)", "??", 0, ""},
      {"torch::autograd::THPVariable_mul(_object*, _object*, _object*)", "python_variable_methods.cpp", 0, ""},
      {"binary_op1", "??", 0, ""}, {"slot_nb_multiply", "??", 0, ""}, {"PyNumber_Multiply", "??", 0, ""}, EVAL,
      {"update_nodes", "/home/u/proj/models.py", 178, ""}, {"Py_RunMain", "??", 0, ""}, {"Py_BytesMain", "??", 0, ""},
      {"__libc_init_first", "??", 0, ""}, {"train", "/home/u/proj/train.py", 40, ""}},
     7},
    {"PyTorch's binding layer without torch/csrc/ in its file names",
     {ALLOC, {"(anonymous namespace)::THPFunction_apply(_object*, _object*)", "python_function.cpp", 0, ""},
      {"THPVariable_clear", "??", 0, ""}, {"cfunction_call", "??", 0, ""},
      {"apply", "/opt/conda/lib/python3.10/site-packages/torch/autograd/function.py", 553, ""},
      {"attention", "/home/u/proj/layers.py", 61, ""}},
     5},
    {"a C++ thread of libstdc++",
     {{"cuMemAlloc_v2", "??", 0, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
      {"loader_worker(int)", "/home/u/app/loader.cpp", 33, "/home/u/app/build/app"},
      {"std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)(int), int> > >::_M_run()", "thread", 211, "/home/u/app/build/app"},
      {"execute_native_thread_routine", "../../../../../libstdc++-v3/src/c++11/thread.cc", 82, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"},
      {"start_thread", "./nptl/pthread_create.c", 447, "/usr/lib/x86_64-linux-gnu/libc.so.6"},
      {"clone3", "../sysdeps/unix/sysv/linux/x86_64/clone3.S", 78, "/usr/lib/x86_64-linux-gnu/libc.so.6"}},
     1},
    {"the same thread in a recording without modules: only names",
     {ALLOC, {"execute_native_thread_routine", "thread.cc", 82, ""}, {"start_thread", "??", 0, ""}, {"clone", "??", 0, ""}},
     0},
    {"libc's pthread_once around the user's initialiser",
     {{"cuMemAlloc_v2", "??", 0, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
      {"__pthread_once_slow", "./nptl/pthread_once.c", 116, "/usr/lib/x86_64-linux-gnu/libc.so.6"},
      {"pthread_once", "??", 0, ""},
      {"init_gradients", "/home/u/app/grads.c", 12, "/home/u/app/app"},
      {"main", "/home/u/app/main.c", 9, "/home/u/app/app"}},
     3},
    {"Windows paths: torch's modules in a Windows site-packages",
     {ALLOC, {"linear", "C:\\Users\\u\\miniconda3\\envs\\a2\\Lib\\site-packages\\torch\\nn\\functional.py", 0, ""},
      {"forward", "C:\\Users\\u\\miniconda3\\envs\\a2\\Lib\\site-packages\\torch\\nn\\modules\\linear.py", 116, ""},
      {"_call_impl", "C:\\Users\\u\\miniconda3\\envs\\a2\\lib\\site-packages\\torch\\nn\\modules\\module.py", 1150, ""},
      {"forward", "C:\\Users\\u\\a2\\cs336_basics\\model.py", 39, ""}},
     4},
    {"a relative Windows path climbing back into torch",
     {ALLOC, {"einsum", "..\\..\\env\\Lib\\site-packages\\einops\\..\\torch\\functional.py", 373, ""},
      {"attn", "src\\model.py", 88, ""}},
     2},
    {"a third-party package between the allocation and the user",
     {ALLOC, {"einsum", "/env/lib/python3.11/site-packages/torch/functional.py", 380, ""},
      {"einsum", "/env/lib/python3.11/site-packages/einops/_backends.py", 233, ""},
      {"rearrange", "/env/lib/python3.11/site-packages/einops/einops.py", 591, ""}, EVAL,
      {"forward", "/home/u/proj/model.py", 39, ""}},
     5},
    {"a package's frame when the stack has no user frame",
     {ALLOC, {"einsum", "/env/lib/python3.11/site-packages/torch/functional.py", 380, ""},
      {"do_bench", "/env/lib/python3.11/site-packages/triton/testing.py", 128, ""},
      {"bench", "/env/lib/python3.11/site-packages/triton/runtime/autotuner.py", 160, ""}},
     2},
    {"a native library of the system is a package, not the user",
     {{"cuMemAlloc_v2", "??", 0, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
      {"codec_alloc", "codec.c", 50, "/usr/lib/x86_64-linux-gnu/libavcodec.so.60"},
      {"decode_frames", "/home/u/app/video.c", 71, "/home/u/app/player"}},
     2},
};
#define NCORPUS (sizeof g_corpus / sizeof g_corpus[0])

static void test_corpus(void)
{
    for (size_t c = 0; c < NCORPUS; c++) {
        cmh_snapshot s;
        cmh_snapshot_init(&s);
        uint32_t ids[16], n = 0;
        for (; n < 16 && g_corpus[c].f[n].name; n++)
            ids[n] = frame(&s, g_corpus[c].f[n].name, g_corpus[c].f[n].file, g_corpus[c].f[n].line, g_corpus[c].f[n].module);
        uint32_t st = stack(&s, ids, n);
        cmh_sites *g = sites(&s, CMH_GROUP_SITE, 0, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        const cmh_frame *got = cmh_sites_site_of(g, st), *want = &s.frames[ids[g_corpus[c].site]];
        if (got != want)
            fprintf(stderr, "  %s: site %s:%lld, not %s:%lld\n", g_corpus[c].what, got ? cmh_str(&s, got->name) : "none",
                    got ? (long long)got->line : 0, cmh_str(&s, want->name), (long long)want->line);
        CU_ASSERT_PTR_EQUAL(got, want);
        cmh_sites_free(g);
        cmh_snapshot_free(&s);
    }
}

/* one helper reached from two lines of step(): one site, and each stack knows its caller */
static void test_helper_callers(void)
{
    cmh_snapshot s;
    cmh_snapshot_init(&s);
    uint32_t alloc = frame(&s, "c10::cuda::CUDACachingAllocator::malloc()", "??", 0, "");
    uint32_t eval = frame(&s, "_PyEval_EvalFrameDefault", "??", 0, "");
    uint32_t helper = frame(&s, "make_buffer", "/home/u/proj/util.py", 5, "");
    uint32_t l20 = frame(&s, "step", "/home/u/proj/train.py", 20, "");
    uint32_t l21 = frame(&s, "step", "/home/u/proj/train.py", 21, "");
    uint32_t a[] = {alloc, helper, eval, l20}, b[] = {alloc, helper, eval, l21}, c[] = {alloc, eval, l21};
    uint32_t sa = stack(&s, a, 4), sb = stack(&s, b, 4), sc = stack(&s, c, 3);
    cmh_sites *g = sites(&s, CMH_GROUP_SITE, 0, NULL, 0);
    CU_ASSERT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sb));
    CU_ASSERT_PTR_EQUAL(cmh_sites_site_of(g, sa), &s.frames[helper]);
    CU_ASSERT_PTR_EQUAL(cmh_sites_caller_of(g, sa), &s.frames[l20]);
    CU_ASSERT_PTR_EQUAL(cmh_sites_caller_of(g, sb), &s.frames[l21]);
    CU_ASSERT_PTR_NULL(cmh_sites_caller_of(g, sc)); /* step() itself is the site: nothing above it */
    cmh_sites_free(g);
    /* --group-by package: the program's own code, einops, torch */
    uint32_t ein = frame(&s, "rearrange", "/env/lib/python3.11/site-packages/einops/einops.py", 591, "");
    uint32_t tp = frame(&s, "linear", "/env/lib/python3.11/site-packages/torch/nn/functional.py", 9, "");
    uint32_t d[] = {alloc, ein, l20}, e[] = {alloc, tp};
    uint32_t sd = stack(&s, d, 3), se = stack(&s, e, 2);
    g = sites(&s, CMH_GROUP_PACKAGE, 0, NULL, 0);
    CU_ASSERT_STRING_EQUAL(cmh_sites_package_name(g, cmh_sites_group(g, sa)), "the program");
    CU_ASSERT_STRING_EQUAL(cmh_sites_package_name(g, cmh_sites_group(g, sd)), "einops");
    CU_ASSERT_STRING_EQUAL(cmh_sites_package_name(g, cmh_sites_group(g, se)), "torch");
    CU_ASSERT_EQUAL(cmh_sites_group(g, sa), cmh_sites_group(g, sb));
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
}

static void test_normpath(void)
{
    char out[256];
    cmh_sites_normpath("C:\\env\\Lib\\site-packages\\..\\torch\\nn\\linear.py", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "/env/Lib/torch/nn/linear.py");
    cmh_sites_normpath("torch\\nn\\modules\\module.py", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "torch/nn/modules/module.py");
    cmh_sites_normpath("../../a/./b//c.py", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "../../a/b/c.py");
    cmh_sites_normpath("/x/../../y", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "/y");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("sites", NULL, NULL);
    CMH_ADD_TEST(s, test_every_rule);
    CMH_ADD_TEST(s, test_site_and_fallback);
    CMH_ADD_TEST(s, test_groupings);
    CMH_ADD_TEST(s, test_corpus);
    CMH_ADD_TEST(s, test_helper_callers);
    CMH_ADD_TEST(s, test_normpath);
    return cmh_test_main();
}
