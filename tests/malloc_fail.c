/*
 * malloc_fail.c - a preloaded malloc that fails, on request, for the recorder's own calls: once
 * malloc_fail_set(1) is called, every malloc/calloc/realloc whose caller is libcumemhist.so
 * returns NULL (ENOMEM); the program's and the driver's go on.  test_faults then checks that the
 * recorder degrades to counting (tests/CMakeLists.txt: the faults_nomem test).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static int g_on;
static uintptr_t g_lo, g_hi; /* libcumemhist.so's text, found when failing starts */
unsigned long malloc_fail_refused;

static int refuse(const void *caller)
{
    if (!__atomic_load_n(&g_on, __ATOMIC_RELAXED)) return 0;
    if ((uintptr_t)caller < g_lo || (uintptr_t)caller >= g_hi) return 0;
    __atomic_add_fetch(&malloc_fail_refused, 1, __ATOMIC_RELAXED);
    errno = ENOMEM;
    return 1;
}

static int find(struct dl_phdr_info *info, size_t size, void *base)
{
    (void)size;
    if ((void *)info->dlpi_addr != base && !(info->dlpi_phnum && (void *)(info->dlpi_addr + info->dlpi_phdr[0].p_vaddr) == base))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        if (!g_lo || a < g_lo) g_lo = a;
        if (b > g_hi) g_hi = b;
    }
    return 1;
}

/* Start (1) or stop (0) refusing; returns 0, or -1 if the recorder is not loaded. */
int malloc_fail_set(int on)
{
    if (on && !g_hi) {
        void *sym = dlsym(RTLD_DEFAULT, "cmh_dump_snapshot");
        Dl_info d;
        if (!sym || !dladdr(sym, &d)) return -1;
        dl_iterate_phdr(find, d.dli_fbase); /* its PT_LOAD segments, exactly */
        if (!g_hi) return -1;
    }
    __atomic_store_n(&g_on, on, __ATOMIC_RELAXED);
    return 0;
}

void *malloc(size_t n) { return refuse(__builtin_return_address(0)) ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t m) { return refuse(__builtin_return_address(0)) ? NULL : __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { return refuse(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n); }
