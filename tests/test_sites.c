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
    {"__libc_start_main", "libc.so.6", "/lib/libc.so.6", "libc-startup"},
    {"_start", "app", "/home/u/app", "libc-startup"},
    {"start_thread", "??", "", "libc-startup"},
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

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite("sites", NULL, NULL);
    CMH_ADD_TEST(s, test_every_rule);
    CMH_ADD_TEST(s, test_site_and_fallback);
    CMH_ADD_TEST(s, test_groupings);
    return cmh_test_main();
}
