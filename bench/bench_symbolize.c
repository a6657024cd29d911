/*
 * bench_symbolize.c - what readable native frames cost (snapshot/symbolize.c): milliseconds per
 * 1,000 distinct PCs, cold (a new DWARF session: the binary opened and its line tables read)
 * and warm (more PCs in a binary already read), demangling included.
 *
 * The PCs are spread over the executable segment of libcumemhist.so (built with -g), dlopen'ed
 * here so that its load address and build id are real.  Figures only.
 *
 * usage: bench_symbolize [path/to/libcumemhist.so]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumemhist/symbolize.h"

static const char *g_want;
static uintptr_t g_lo = UINTPTR_MAX, g_xlo, g_xhi;
static char g_build_id[80], g_path[4096];

static int find(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, g_want)) return 0;
    snprintf(g_path, sizeof g_path, "%s", info->dlpi_name);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (a < g_lo) g_lo = a;
            if (ph->p_flags & PF_X) g_xlo = a, g_xhi = a + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE) {
            const char *p = (const char *)a, *end = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *name = p + sizeof *nh;
                const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4))
                    for (size_t b = 0, k = 0; b < nh->n_descsz && k + 3 < sizeof g_build_id; b++)
                        k += (size_t)snprintf(g_build_id + k, sizeof g_build_id - k, "%02x", desc[b]);
                p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    return 1;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A snapshot with n distinct PCs of the module, one frame each, in one stack per 32. */
static double run(uint32_t n, cmh_symbolize_result *r)
{
    cmh_snapshot s;
    if (cmh_snapshot_init(&s) != CMH_OK) exit(1);
    cmh_module m = {0, 0, g_lo, g_xhi - g_lo};
    cmh_strtab_intern(&s.strings, g_path, strlen(g_path), &m.path);
    cmh_strtab_intern(&s.strings, g_build_id, strlen(g_build_id), &m.build_id);
    cmh_snapshot_add_module(&s, &m);
    uint32_t ids[32], k = 0;
    uint64_t span = g_xhi - g_xlo, step = span / n ? span / n : 1;
    for (uint32_t i = 0; i < n; i++) {
        cmh_frame f = {g_xlo + 1 + i * step, 0, 0, 0, 0};
        char name[32];
        snprintf(name, sizeof name, "0x%llx", (unsigned long long)(f.pc - g_lo));
        cmh_strtab_intern(&s.strings, name, strlen(name), &f.name);
        cmh_snapshot_add_frame(&s, &f, &ids[k++]);
        if (k == 32 || i + 1 == n) {
            uint32_t sid;
            cmh_snapshot_add_stack(&s, ids, k, &sid);
            k = 0;
        }
    }
    double t0 = now_ms();
    if (cmh_symbolize_offline(&s, CMH_SYM_ALL, r) != CMH_OK) exit(1);
    double t = now_ms() - t0;
    cmh_snapshot_free(&s);
    return t;
}

int main(int argc, char **argv)
{
    char lib[4096];
    if (argc > 1) snprintf(lib, sizeof lib, "%s", argv[1]);
    else {
        ssize_t l = readlink("/proc/self/exe", lib, sizeof lib - 1);
        lib[l > 0 ? l : 0] = 0;
        char *sl = strrchr(lib, '/');
        snprintf(sl ? sl + 1 : lib, sizeof lib - (size_t)(sl ? sl + 1 - lib : 0), "libcumemhist.so");
    }
    if (!dlopen(lib, RTLD_NOW | RTLD_LOCAL)) {
        fprintf(stderr, "bench_symbolize: %s\n", dlerror());
        return 2;
    }
    g_want = "libcumemhist.so";
    dl_iterate_phdr(find, NULL);
    if (!g_xhi) {
        fprintf(stderr, "bench_symbolize: %s not found in the process\n", lib);
        return 2;
    }
    cmh_symbolize_result r;
    double cold = run(1000, &r), cold2 = run(1000, &r);
    unsigned lines1k = r.lines;
    double big = run(20000, &r);
    printf("bench_symbolize: %s (%llu KiB of code, build id %.12s...)\n", g_path, (unsigned long long)((g_xhi - g_xlo) >> 10),
           g_build_id);
    printf("%-52s %8.2f ms  (%u of 1000 PCs given a line)\n", "1000 distinct PCs, cold (first DWARF session)", cold, lines1k);
    printf("%-52s %8.2f ms\n", "1000 distinct PCs, cold again (files in page cache)", cold2);
    printf("%-52s %8.2f ms per 1000 PCs  (20000 PCs in %.1f ms, %u lines)\n", "warm (DWARF already read, per 1000 more PCs)",
           (big - cold2) / 19.0, big, r.lines);
    return 0;
}
