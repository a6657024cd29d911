/*
 * flight_records.c - the flight record's records other than trace entries: stacks, names, Python
 * frames, range annotations, threads, forked children, cuMemGetInfo samples, and the module map that lets a
 * reader symbolize the stacks of a process that is gone (the file and its append path:
 * flight.c; the format: snapshot/flight_format.h).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flight_internal.h"

static uint32_t g_stacks_seen, g_stacks_scanned; /* new stacks since the last module scan */

static uint32_t padded(size_t n) { return (uint32_t)((n + 7) & ~(size_t)7); }

/* One record: its fixed part (flen bytes), then the tails' bytes, padded to 8 (none written when
 * there is no flight record, or no room: counted lost by cmh_fl_reserve).  The fixed parts have
 * no hidden padding (flight_format.h), so a compound literal gives the bytes that field by field writes gave. */
static void put(int type, const void *fixed, size_t flen, const void *t1, size_t n1, const void *t2, size_t n2)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    uint32_t a;
    cmh_flight_rec *h = cmh_fl_reserve(padded(sizeof *h + flen + n1 + n2), &a, 1, 0);
    if (!h) return;
    char *r = (char *)(h + 1);
    memcpy(r, fixed, flen);
    if (n1) memcpy(r + flen, t1, n1);
    if (n2) memcpy(r + flen + n1, t2, n2);
    cmh_fl_commit(h, type, a);
}

void cmh_flight_stack(uint32_t id, const uintptr_t *pcs, uint32_t depth)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    uint32_t a;
    cmh_flight_rec *h = cmh_fl_reserve(padded(sizeof *h + sizeof(cmh_fr_stack) + (size_t)depth * 8), &a, 1, 0);
    if (!h) return;
    cmh_fr_stack *r = CMH_FL_BODY(h, cmh_fr_stack);
    r->id = id;
    r->depth = depth;
    uint64_t *out = (uint64_t *)(r + 1);
    for (uint32_t i = 0; i < depth; i++) out[i] = pcs[i];
    cmh_fl_commit(h, CMH_FR_STACK, a);
    __atomic_add_fetch(&g_stacks_seen, 1, __ATOMIC_RELAXED);
}

void cmh_flight_name(uint32_t id, const char *name)
{
    size_t n = strlen(name);
    if (n > 65535) n = 65535;
    put(CMH_FR_NAME, &(cmh_fr_name){id, (uint32_t)n}, sizeof(cmh_fr_name), name, n, NULL, 0);
}

void cmh_flight_pyframe(uint32_t id, const char *file, const char *name, int32_t line)
{
    size_t fl = strlen(file), nl = strlen(name);
    if (fl > 4096) fl = 4096;
    if (nl > 4096) nl = 4096;
    put(CMH_FR_PYFRAME, &(cmh_fr_pyframe){id, line, (uint32_t)fl, (uint32_t)nl}, sizeof(cmh_fr_pyframe), file, fl, name, nl);
}

void cmh_flight_annotation(int64_t ticks, uint32_t name, int device, int stage)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    uint32_t a;
    cmh_flight_rec *h = cmh_fl_reserve(sizeof *h + sizeof(cmh_fr_annotation), &a, 1, 0);
    if (!h) return;
    cmh_fr_annotation *r = CMH_FL_BODY(h, cmh_fr_annotation);
    r->ticks = ticks;
    r->name = name;
    r->device = device;
    r->stage = (uint32_t)stage;
    cmh_fl_commit(h, CMH_FR_ANNOTATION, a);
}

void cmh_flight_thread(void *arg, uint32_t thread, int64_t tid, const char *name)
{
    (void)arg; /* (written with the others at the start) */
    cmh_fr_thread r = {thread, 0, tid, {0}};
    size_t n = strlen(name);
    memcpy(r.name, name, n < sizeof r.name ? n : sizeof r.name);
    put(CMH_FR_THREAD, &r, sizeof r, NULL, 0, NULL, 0);
}

void cmh_flight_child(uint32_t index, int64_t pid, const char *path)
{
    size_t n = path ? strlen(path) : 0; /* (written with the others at the start) */
    if (n > 4095) n = 4095;
    put(CMH_FR_CHILD, &(cmh_fr_child){index, (uint32_t)n, pid}, sizeof(cmh_fr_child), path, n, NULL, 0);
}

void cmh_flight_meminfo(int device, int64_t ticks, uint64_t free_b, uint64_t total, uint32_t thread)
{
    put(CMH_FR_MEMINFO, &(cmh_fr_meminfo){device, thread, ticks, free_b, total}, sizeof(cmh_fr_meminfo), NULL, 0, NULL, 0);
}

void cmh_flight_device(const cmh_device_ident *d)
{
    cmh_fr_device r;
    memset(&r, 0, sizeof r);
    r.device = d->device;
    memcpy(r.uuid, d->uuid, sizeof r.uuid);
    memcpy(r.name, d->name, sizeof r.name);
    memcpy(r.pci_bus, d->pci_bus, sizeof r.pci_bus);
    put(CMH_FR_DEVICE, &r, sizeof r, NULL, 0, NULL, 0);
}

static uint32_t g_vmm_seq;

void cmh_flight_vmm_handle(uint64_t handle, int device, uint64_t size, int64_t ticks, uint32_t stack, int state)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    uint32_t a;
    cmh_flight_rec *h = cmh_fl_reserve(sizeof *h + sizeof(cmh_fr_vmm_handle), &a, 1, 0);
    if (!h) return;
    cmh_fr_vmm_handle *r = CMH_FL_BODY(h, cmh_fr_vmm_handle);
    r->handle = handle;
    r->size = size;
    r->ticks = ticks;
    r->device = device;
    r->stack = stack;
    r->state = (uint32_t)state;
    r->seq = ++g_vmm_seq; /* (under vmm.c's handle lock) */
    cmh_fl_commit(h, CMH_FR_VMM_HANDLE, a);
}

void cmh_flight_vmm_map(int device, uint64_t addr, uint64_t size, int64_t ticks, uint64_t serial, uint64_t hsize, uint32_t hstack,
                        int64_t hticks)
{
    put(CMH_FR_VMM_MAP, &(cmh_fr_vmm_map){device, hstack, addr, size, serial, hsize, ticks, hticks}, sizeof(cmh_fr_vmm_map),
        NULL, 0, NULL, 0);
}

/* ---- the module map ---- */

typedef struct known {
    uint64_t base;
    char path[512];
} known;
static known *g_known;
static size_t g_nknown, g_cknown;

static int build_id_hex(struct dl_phdr_info *info, char *hex, size_t cap)
{
    hex[0] = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh, *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t k = 0;
                for (uint32_t j = 0; j < nh->n_descsz && k + 3 < cap; j++) k += (size_t)snprintf(hex + k, cap - k, "%02x", (unsigned char)desc[j]);
                return 0;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return -1;
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    char path[512];
    const char *name = info->dlpi_name;
    if (!name || !*name) { /* the executable */
        ssize_t l = readlink("/proc/self/exe", path, sizeof path - 1);
        path[l > 0 ? l : 0] = 0;
    } else snprintf(path, sizeof path, "%s", name);
    if (!path[0]) return 0;
    for (size_t i = 0; i < g_nknown; i++)
        if (g_known[i].base == info->dlpi_addr && !strcmp(g_known[i].path, path)) return 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            uint64_t a = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            if (a < lo) lo = a;
            if (a + info->dlpi_phdr[i].p_memsz > hi) hi = a + info->dlpi_phdr[i].p_memsz;
        }
    if (lo >= hi) return 0;
    if (g_nknown == g_cknown) {
        size_t nc = g_cknown ? g_cknown * 2 : 64;
        known *nk = realloc(g_known, nc * sizeof *nk);
        if (!nk) return 0;
        g_known = nk;
        g_cknown = nc;
    }
    g_known[g_nknown].base = info->dlpi_addr;
    snprintf(g_known[g_nknown].path, sizeof g_known[g_nknown].path, "%s", path);
    g_nknown++;
    char bid[130];
    build_id_hex(info, bid, sizeof bid);
    size_t pl = strlen(path), bl = strlen(bid);
    /* base: the lowest loaded address, as the snapshot's module map has it */
    put(CMH_FR_MODULE, &(cmh_fr_module){lo, hi - lo, (uint32_t)pl, (uint32_t)bl}, sizeof(cmh_fr_module), path, pl, bid, bl);
    return 0;
}

void cmh_fl_scan_modules(void)
{
    g_stacks_scanned = __atomic_load_n(&g_stacks_seen, __ATOMIC_RELAXED);
    cmh_dl_iterate(scan_one, NULL);
}

int cmh_fl_stacks_unscanned(void) { return __atomic_load_n(&g_stacks_seen, __ATOMIC_RELAXED) != g_stacks_scanned; }

void cmh_fl_modules_reset(int stacks_too)
{
    g_nknown = 0;
    if (stacks_too) g_stacks_seen = g_stacks_scanned = 0;
}

void cmh_flight_vmm_release(int device, uint64_t serial, uint64_t size, uint32_t stack, int64_t ticks, int64_t release_ticks)
{
    if (!__atomic_load_n(&cmh_fl_h, __ATOMIC_ACQUIRE)) return;
    uint32_t a;
    cmh_flight_rec *h = cmh_fl_reserve(sizeof *h + sizeof(cmh_fr_vmm_release), &a, 1, 0);
    if (!h) return;
    *CMH_FL_BODY(h, cmh_fr_vmm_release) = (cmh_fr_vmm_release){device, stack, serial, size, ticks, release_ticks};
    cmh_fl_commit(h, CMH_FR_VMM_RELEASE, a);
}
