/*
 * kernels.c - the recorder's side of kernel timing: load the CUPTI sidecar when asked
 * (CUMEMHIST_KERNELS=1, `cumemhist record --kernels`), and put its records into each snapshot.
 *
 * The sidecar lives beside libcumemhist.so (or at CUMEMHIST_CUPTI_LIB) and is loaded at the
 * first use of the driver, never before, so programs that do not touch CUDA, or do not ask,
 * never load CUPTI.  If it cannot be loaded or CUPTI refuses (no CUPTI, another profiler holds
 * the subscriber), one line says why, the snapshot records "kernel timing unavailable: <why>",
 * and memory recording goes on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti/sidecar.h"
#include "internal.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cmh_sidecar_collect_fn g_collect;
static char g_status[512]; /* "" = not asked for */

static void start(void)
{
    char path[PATH_MAX];
    const char *env = getenv("CUMEMHIST_CUPTI_LIB");
    Dl_info di;
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else if (dladdr((void *)start, &di) && di.dli_fname) {
        snprintf(path, sizeof path, "%s", di.dli_fname);
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "libcumemhist_cupti.so");
    } else snprintf(path, sizeof path, "libcumemhist_cupti.so");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    char why[400] = "";
    if (!h) snprintf(why, sizeof why, "%s", dlerror());
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
    cmh_sidecar_start_fn st = h && real ? (cmh_sidecar_start_fn)real(h, CMH_SIDECAR_START) : NULL;
    cmh_sidecar_collect_fn co = h && real ? (cmh_sidecar_collect_fn)real(h, CMH_SIDECAR_COLLECT) : NULL;
    if (h && (!st || !co)) snprintf(why, sizeof why, "%.300s is not a cumemhist CUPTI sidecar", path);
    if (st && co && st(1000, why, sizeof why) == 0) {
        g_collect = co;
        snprintf(g_status, sizeof g_status, "ok");
        return;
    }
    snprintf(g_status, sizeof g_status, "kernel timing unavailable: %s", why);
    cmh_log("%s; recording memory only", g_status);
}

void cmh_kernels_start(void)
{
    if (cmh_cfg.kernels) pthread_once(&g_once, start);
}

typedef struct export_ctx {
    cmh_snapshot *s;
    cmh_symbolizer *z;
    int failed;
} export_ctx;

static void add_one(void *arg, const cmh_kernel_rec *k)
{
    export_ctx *c = arg;
    cmh_kernel out;
    memset(&out, 0, sizeof out);
    char *dem = cmh_symbolizer_demangle(c->z, k->name);
    const char *name = dem ? dem : k->name ? k->name : "<unknown>";
    if (cmh_strtab_intern(&c->s->strings, name, strlen(name), &out.name) != CMH_OK) c->failed = 1;
    free(dem);
    out.device = k->device;
    out.stream = k->stream;
    out.start_ns = (int64_t)k->start_ns;
    out.end_ns = (int64_t)k->end_ns;
    memcpy(out.grid, k->grid, sizeof out.grid);
    memcpy(out.block, k->block, sizeof out.block);
    out.registers = k->registers;
    out.shared_bytes = k->shared_bytes;
    out.correlation = k->correlation;
    if (cmh_snapshot_add_kernel(c->s, &out) != CMH_OK) c->failed = 1;
}

int cmh_kernels_export(cmh_snapshot *s, cmh_symbolizer *z)
{
    if (!g_status[0]) return CMH_OK; /* not asked for */
    export_ctx c = {s, z, 0};
    char why[256] = "";
    uint64_t dropped = 0;
    if (g_collect && g_collect(add_one, &c, &dropped, why, sizeof why) != 0)
        snprintf(g_status, sizeof g_status, "kernel timing unavailable: %s", why);
    s->kernels_dropped = dropped;
    if (cmh_strtab_intern(&s->strings, g_status, strlen(g_status), &s->kernels_status) != CMH_OK) return CMH_ENOMEM;
    return c.failed ? CMH_ENOMEM : CMH_OK;
}
