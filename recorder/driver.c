/*
 * driver.c - reaching the real driver and the real dlsym without ever reaching ourselves.
 *
 * The real dlsym comes from dlvsym(RTLD_NEXT, "dlsym", <glibc version>), which is not interposed.
 * The driver is the libcuda.so.1 already in the process (RTLD_NOLOAD), else one we dlopen.  Every
 * real entry point is looked up on that handle with the real dlsym, so a handle lookup never
 * returns one of our exports.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

void *(*cmh_real_dlsym)(void *, const char *);

/* The sanitizer runtimes look symbols up with dlsym while they initialize, before their shadow
 * memory exists: the path they reach (here, for names not starting with "cu") must not be
 * instrumented. */
#define CMH_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

CMH_NO_SANITIZE void *cmh_dlsym_resolve(void)
{
    void *(*f)(void *, const char *) = __atomic_load_n(&cmh_real_dlsym, __ATOMIC_ACQUIRE);
    if (f) return (void *)f;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0] && !f; i++)
        f = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (!f) {
        void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        if (libc) f = (void *(*)(void *, const char *))dlvsym(libc, "dlsym", "GLIBC_2.34");
    }
    __atomic_store_n(&cmh_real_dlsym, f, __ATOMIC_RELEASE);
    return (void *)f;
}

__attribute__((constructor(101))) static void resolve_early(void) { cmh_dlsym_resolve(); }

static void *g_driver;
static pthread_once_t g_driver_once = PTHREAD_ONCE_INIT;

static void open_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h && cmh_cfg.debug) cmh_log("cannot load libcuda.so.1: %s", dlerror());
    g_driver = h;
}

void *cmh_driver_handle(void)
{
    pthread_once(&g_driver_once, open_driver);
    return g_driver;
}

void *cmh_driver_sym(const char *name)
{
    void *h = cmh_driver_handle();
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
    if (!h || !real) return NULL;
    void *p = real(h, name);
    return cmh_in_own_module(p) ? NULL : p;
}

static uintptr_t g_self_lo, g_self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t me = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (me >= lo && me < hi) {
            /* the whole object: lowest to highest PT_LOAD */
            uintptr_t a = UINTPTR_MAX, b = 0;
            for (int j = 0; j < info->dlpi_phnum; j++) {
                const ElfW(Phdr) *q = &info->dlpi_phdr[j];
                if (q->p_type != PT_LOAD) continue;
                uintptr_t l = info->dlpi_addr + q->p_vaddr;
                if (l < a) a = l;
                if (l + q->p_memsz > b) b = l + q->p_memsz;
            }
            g_self_lo = a;
            g_self_hi = b;
            return 1;
        }
    }
    return 0;
}

int cmh_in_own_module(const void *p)
{
    if (!g_self_hi) cmh_dl_iterate(find_self, (void *)(uintptr_t)&cmh_in_own_module);
    return (uintptr_t)p >= g_self_lo && (uintptr_t)p < g_self_hi;
}

#if defined(__x86_64__)
/* Reached from dlsym_x86_64.S for "cu*" names on a real handle or RTLD_DEFAULT. */
CMH_HIDDEN void *cmh_dlsym_cu(void *handle, const char *name);
void *cmh_dlsym_cu(void *handle, const char *name)
{
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
    void *p = real(handle, name);
    if (!p || cmh_in_own_module(p)) return p;
    return cmh_hook_for_symbol(name, p);
}
#endif
