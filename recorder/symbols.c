/*
 * symbols.c - turning PCs into frames, once per distinct PC, at dump time only.
 *
 * The module map comes from dl_iterate_phdr (path, load base, extent, GNU build-id), plus the
 * objects dlclose() unloaded meanwhile (noted as they go), and goes into
 * the snapshot so that it can be symbolized again offline.  A PC's name comes from the module's
 * own ELF symbol table (.symtab, read from the file on disk, which also names static functions),
 * then .dynsym, then dladdr().  C++ names are demangled when libstdc++ is in the process.
 * Return addresses are looked up at pc - 1 so a call at the end of a function is not credited
 * to the next one.  Frames carry the module's basename as filename and line 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "oatab.h"

typedef struct sym {
    uint64_t value, size;
    const char *name; /* points into the mapped file */
} sym;

typedef struct module {
    char path[1024];
    uintptr_t base, lo, hi; /* base = load bias; [lo, hi) = the PT_LOAD extent */
    char build_id[80];
    int loaded;
    void *map;
    size_t map_len;
    sym *syms;
    size_t nsyms;
    int32_t index; /* in the snapshot, -1 until first used */
    unsigned until; /* unloaded: the last module generation (cmh_mod_gen) it was mapped in */
} module;

typedef struct pc_slot {
    uint64_t pc; /* the key (oatab.h) */
    uint64_t frame;
} pc_slot;

struct cmh_symbolizer {
    cmh_snapshot *s;
    module *mods;
    size_t nmods, capmods;
    size_t gone_first; /* mods[gone_first..nmods): unloaded by dlclose, in the order unloaded */
    cmh_oatab cache;   /* pc (with the unloaded module it is in, if any) -> frame id */
    char *(*demangle)(const char *, char *, size_t *, int *);
};

/* A loaded object's path, load bias, PT_LOAD extent and build-id; 0 where it has no extent. */
static int fill_module(module *m, const struct dl_phdr_info *info)
{
    memset(m, 0, sizeof *m);
    m->index = -1;
    m->base = info->dlpi_addr;
    m->lo = UINTPTR_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uintptr_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < m->lo) m->lo = a;
            if (a + ph->p_memsz > m->hi) m->hi = a + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE) {
            const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *name = p + sizeof *nh;
                const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                    size_t k = 0;
                    for (size_t b = 0; b < nh->n_descsz && k + 3 < sizeof m->build_id; b++)
                        k += (size_t)snprintf(m->build_id + k, sizeof m->build_id - k, "%02x", desc[b]);
                }
                p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    if (m->lo == UINTPTR_MAX) return 0;
    const char *name = info->dlpi_name;
    if (!name || !*name) {
        ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
        m->path[n > 0 ? n : 0] = 0;
    } else {
        snprintf(m->path, sizeof m->path, "%s", name);
    }
    return 1;
}

static module *new_module(cmh_symbolizer *z)
{
    if (z->nmods == z->capmods) {
        size_t nc = z->capmods ? z->capmods * 2 : 64;
        module *nm = realloc(z->mods, nc * sizeof *nm);
        if (!nm) return NULL;
        z->mods = nm;
        z->capmods = nc;
    }
    return &z->mods[z->nmods];
}

static int collect_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    cmh_symbolizer *z = arg;
    module *m = new_module(z);
    if (!m) return 1;
    z->nmods += fill_module(m, info);
    return 0;
}

/* Objects unloaded by dlclose() while recording: the stacks recorded before name PCs in them,
 * and the exit dump, which takes its module map from what is loaded then, would not find them
 * (frames "0x7f…", owned by the program).  dlclose() notes the object first, with the module
 * generation it is mapped in (until: the generation moves on when it is unloaded, stacks.c);
 * its file is read from disk at the dump like any module's.  Appended without a lock (a slot
 * claimed by an atomic add, published by its ready word), never removed; an object unloaded
 * and loaded again at the same address, with nothing else there between, is one slot whose
 * until moves on.  Other objects loaded at its address later are slots (or loaded modules) of
 * their own: a stack's PC is named in the one mapped there at the stack's generation
 * (cmh_symbolize).  A slot still loaded at the dump (dlclose only dropped a reference) is left
 * to dl_iterate_phdr. */
#define GONE_MAX 64
static struct gone {
    int ready;
    module m;
} g_gone[GONE_MAX];
static unsigned g_ngone;

typedef struct gone_find {
    uintptr_t addr;
    const char *name;
    module m;
    int found;
} gone_find;

static int find_closing(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    gone_find *f = arg;
    if (info->dlpi_addr != f->addr || !info->dlpi_name || strcmp(info->dlpi_name, f->name)) return 0;
    f->found = fill_module(&f->m, info);
    return 1;
}

static void note_unloading(void *handle)
{
    struct link_map *lm = NULL;
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name || !*lm->l_name) return;
    gone_find f = {.addr = (uintptr_t)lm->l_addr, .name = lm->l_name};
    cmh_dl_iterate(find_closing, &f);
    if (!f.found) return;
    unsigned gen = __atomic_load_n(&cmh_mod_gen, __ATOMIC_ACQUIRE);
    unsigned n = __atomic_load_n(&g_ngone, __ATOMIC_ACQUIRE);
    for (unsigned i = n < GONE_MAX ? n : GONE_MAX; i-- > 0;) { /* the last one noted where it lies */
        if (!__atomic_load_n(&g_gone[i].ready, __ATOMIC_ACQUIRE)) continue;
        module *g = &g_gone[i].m;
        if (!(g->lo < f.m.hi && f.m.lo < g->hi)) continue;
        if (g->lo == f.m.lo && !strcmp(g->path, f.m.path)) {
            __atomic_store_n(&g->until, gen, __ATOMIC_RELEASE);
            return;
        }
        break; /* another object was there since: a slot of its own */
    }
    f.m.until = gen;
    unsigned k = __atomic_fetch_add(&g_ngone, 1, __ATOMIC_ACQ_REL);
    if (k >= GONE_MAX) return;
    g_gone[k].m = f.m;
    __atomic_store_n(&g_gone[k].ready, 1, __ATOMIC_RELEASE);
}

CMH_EXPORT int dlclose(void *handle)
{
    static int (*real)(void *);
    int (*f)(void *) = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!f) {
        void *(*sym)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
        f = sym ? (int (*)(void *))sym(RTLD_NEXT, "dlclose") : NULL;
        if (!f) return -1;
        __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    }
    unsigned long long subs = cmh_modules_subs();
    note_unloading(handle);
    int rc = f(handle);
    /* something was unmapped: the walk caches of every thread start over before this thread's
     * next capture, and before any other thread's that learns of it (a relaxed load suffices:
     * code loaded later at the same address is reached only through what this thread does next) */
    int err = errno; /* the real dlclose's, not ours */
    unsigned long long after = cmh_modules_subs();
    if (after != subs) cmh_modules_unloaded(after);
    errno = err;
    return rc;
}

/* the unloaded objects, after the loaded ones, less those loaded again where they were */
static void add_gone_modules(cmh_symbolizer *z)
{
    unsigned n = __atomic_load_n(&g_ngone, __ATOMIC_ACQUIRE);
    size_t loaded = z->nmods;
    z->gone_first = loaded;
    for (unsigned i = 0; i < n && i < GONE_MAX; i++) {
        if (!__atomic_load_n(&g_gone[i].ready, __ATOMIC_ACQUIRE)) continue;
        const module *g = &g_gone[i].m;
        int same = 0;
        for (size_t k = 0; k < loaded && !same; k++) same = g->lo == z->mods[k].lo && !strcmp(g->path, z->mods[k].path);
        module *m = same ? NULL : new_module(z);
        if (!m) continue;
        *m = *g;
        m->until = __atomic_load_n(&g_gone[i].m.until, __ATOMIC_ACQUIRE);
        m->index = -1;
        z->nmods++;
    }
}

static module *loaded_at(cmh_symbolizer *z, uintptr_t look)
{
    for (size_t i = 0; i < z->gone_first; i++)
        if (look >= z->mods[i].lo && look < z->mods[i].hi) return &z->mods[i];
    return NULL;
}

/* The module a PC of a stack captured at generation gen lies in, where an unloaded one lies: of
 * those there, the first unloaded after the capture (gen <= until); else the loaded one there;
 * else the last unloaded there (a stack from after its dlclose, which only dropped a reference).
 * *gone: the module is an unloaded one.  NULL, *gone 0, where no unloaded module lies. */
static module *module_at(cmh_symbolizer *z, uintptr_t look, unsigned gen, int *gone)
{
    module *best = NULL, *last = NULL;
    *gone = 0;
    for (size_t i = z->gone_first; i < z->nmods; i++) {
        module *g = &z->mods[i];
        if (look < g->lo || look >= g->hi) continue;
        if ((int)(g->until - gen) >= 0 && (!best || (int)(g->until - best->until) < 0)) best = g;
        if (!last || (int)(g->until - last->until) > 0) last = g;
    }
    if (best) {
        *gone = 1;
        return best;
    }
    module *m = last ? loaded_at(z, look) : NULL;
    if (m) return m;
    *gone = last != NULL;
    return last;
}

cmh_symbolizer *cmh_symbolizer_new(cmh_snapshot *s)
{
    cmh_symbolizer *z = calloc(1, sizeof *z);
    if (!z) return NULL;
    z->s = s;
    cmh_oa_init(&z->cache, sizeof(pc_slot));
    cmh_dl_iterate(collect_module, z);
    add_gone_modules(z);
    /* C++ names are demangled with libstdc++'s own demangler.  Python loads extension modules
     * RTLD_LOCAL, so libstdc++ may be in the process without being in the global scope: look it
     * up by name too, and load it (locally) only if some module's names need it. */
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
    if (real) {
        z->demangle = (char *(*)(const char *, char *, size_t *, int *))real(RTLD_DEFAULT, "__cxa_demangle");
        void *h = z->demangle ? NULL : dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        if (!z->demangle && !h) h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h) z->demangle = (char *(*)(const char *, char *, size_t *, int *))real(h, "__cxa_demangle");
    }
    return z;
}

static int cmp_sym(const void *a, const void *b)
{
    const sym *x = a, *y = b;
    return x->value < y->value ? -1 : x->value > y->value;
}

/* Read the FUNC symbols of a module's file: .symtab if present, else .dynsym. */
static void load_symbols(module *m)
{
    m->loaded = 1;
    if (!m->path[0]) return;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
        close(fd);
        return;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return;
    size_t len = (size_t)st.st_size;
    const ElfW(Ehdr) *eh = map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_shoff == 0 || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > len) {
        munmap(map, len);
        return;
    }
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)((const char *)map + eh->e_shoff);
    const ElfW(Shdr) *tab = NULL;
    for (int pass = 0; pass < 2 && !tab; pass++)
        for (int i = 0; i < eh->e_shnum; i++)
            if (sh[i].sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM)) {
                tab = &sh[i];
                break;
            }
    if (!tab || tab->sh_link >= eh->e_shnum || tab->sh_offset + tab->sh_size > len ||
        sh[tab->sh_link].sh_offset + sh[tab->sh_link].sh_size > len) {
        munmap(map, len);
        return;
    }
    const ElfW(Sym) *syms = (const ElfW(Sym) *)((const char *)map + tab->sh_offset);
    size_t n = tab->sh_size / sizeof(ElfW(Sym));
    const char *strtab = (const char *)map + sh[tab->sh_link].sh_offset;
    size_t strsz = sh[tab->sh_link].sh_size;
    m->syms = malloc((n ? n : 1) * sizeof *m->syms);
    if (!m->syms) {
        munmap(map, len);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ELF64_ST_TYPE(syms[i].st_info) != STT_FUNC || syms[i].st_shndx == SHN_UNDEF || !syms[i].st_value) continue;
        if (syms[i].st_name >= strsz) continue;
        m->syms[m->nsyms++] = (sym){syms[i].st_value, syms[i].st_size, strtab + syms[i].st_name};
    }
    qsort(m->syms, m->nsyms, sizeof *m->syms, cmp_sym);
    m->map = map;
    m->map_len = len;
}

static const char *lookup(module *m, uintptr_t addr)
{
    if (!m->loaded) load_symbols(m);
    if (!m->nsyms) return NULL;
    uint64_t rel = addr - m->base;
    size_t lo = 0, hi = m->nsyms;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (m->syms[mid].value <= rel) lo = mid;
        else hi = mid;
    }
    const sym *s = &m->syms[lo];
    if (s->value > rel || (s->size && rel >= s->value + s->size)) return NULL;
    return s->name;
}

static int intern(cmh_snapshot *s, const char *str, uint32_t *id) { return cmh_strtab_intern(&s->strings, str, strlen(str), id); }

static int32_t module_index(cmh_symbolizer *z, module *m)
{
    if (m->index >= 0) return m->index;
    cmh_module out = {0, 0, m->lo, m->hi - m->lo};
    if (intern(z->s, m->path, &out.path) != CMH_OK || intern(z->s, m->build_id, &out.build_id) != CMH_OK) return -1;
    if (cmh_snapshot_add_module(z->s, &out) != CMH_OK) return -1;
    m->index = (int32_t)z->s->nmodules - 1;
    return m->index;
}

/* A Python frame (pystack.c): its file, function and line; no PC, no module. */
static int python_frame(cmh_symbolizer *z, uintptr_t token, uint32_t *frame_id)
{
    const char *file = "??", *name = "??";
    int32_t line = 0;
    cmh_pystack_frame(token, &file, &name, &line);
    cmh_frame f = {0, 0, 0, line, -1};
    int rc = intern(z->s, name, &f.name);
    if (rc == CMH_OK) rc = intern(z->s, file, &f.filename);
    return rc == CMH_OK ? cmh_snapshot_add_frame(z->s, &f, frame_id) : rc;
}

int cmh_symbolize(cmh_symbolizer *z, uintptr_t pc, int is_ret, unsigned gen, uint32_t *frame_id)
{
    uintptr_t look = is_ret && pc ? pc - 1 : pc;
    module *m = NULL;
    int gone = 0;
    uint64_t key = pc;
    if (z->gone_first < z->nmods && pc && !cmh_is_pytoken(pc)) {
        /* where objects were unloaded, one PC may be code of several: keyed with the module's
         * slot in the bits above any user address (below the Python frames' 0xC0DE tag) */
        m = module_at(z, look, gen, &gone);
        if (gone) key = pc ^ ((uint64_t)(m - z->mods - z->gone_first + 1) << 48);
    }
    const pc_slot *hit = key ? cmh_oa_find(&z->cache, key) : NULL;
    if (hit) {
        *frame_id = (uint32_t)hit->frame;
        return CMH_OK;
    }
    if (cmh_is_pytoken(pc)) {
        int rc = python_frame(z, pc, frame_id);
        pc_slot *sl = rc == CMH_OK ? cmh_oa_add(&z->cache, pc) : NULL;
        if (sl) sl->frame = *frame_id;
        return rc != CMH_OK ? rc : sl ? CMH_OK : CMH_ENOMEM;
    }

    if (!m) m = loaded_at(z, look);
    const char *name = m ? lookup(m, look) : NULL;
    Dl_info di; /* what is mapped there now: not for an unloaded module's PC */
    if (!name && !gone && dladdr((void *)look, &di) && di.dli_sname) name = di.dli_sname;
    char fallback[64];
    if (!name) {
        snprintf(fallback, sizeof fallback, "0x%lx", (unsigned long)(m ? look - m->base : look));
        name = fallback;
    }
    char *dem = NULL;
    if (z->demangle && name[0] == '_' && name[1] == 'Z') {
        int status = -1;
        dem = z->demangle(name, NULL, NULL, &status);
        if (status != 0) {
            free(dem);
            dem = NULL;
        }
    }
    cmh_frame f = {pc, 0, 0, 0, -1};
    const char *base = "??";
    if (m) {
        const char *sl = strrchr(m->path, '/');
        base = sl ? sl + 1 : m->path;
        f.module = module_index(z, m);
    }
    const char *shown = dem ? dem : name; /* a compiler's clone of f is f to the reader */
    int rc = cmh_strtab_intern(&z->s->strings, shown, cmh_name_base_len(shown), &f.name);
    free(dem);
    if (rc == CMH_OK) rc = intern(z->s, base, &f.filename);
    if (rc == CMH_OK) rc = cmh_snapshot_add_frame(z->s, &f, frame_id);
    if (rc != CMH_OK) return rc;
    pc_slot *sl = key ? cmh_oa_add(&z->cache, key) : NULL;
    if (key && !sl) return CMH_ENOMEM;
    if (sl) sl->frame = *frame_id;
    return CMH_OK;
}

void cmh_symbolizer_free(cmh_symbolizer *z)
{
    if (!z) return;
    for (size_t i = 0; i < z->nmods; i++) {
        free(z->mods[i].syms);
        if (z->mods[i].map) munmap(z->mods[i].map, z->mods[i].map_len);
    }
    free(z->mods);
    cmh_oa_free(&z->cache);
    free(z);
}

char *cmh_symbolizer_demangle(cmh_symbolizer *z, const char *name)
{
    if (!z || !z->demangle || !name || name[0] != '_' || name[1] != 'Z') return NULL;
    int status = -1;
    char *d = z->demangle(name, NULL, NULL, &status);
    if (status != 0) {
        free(d);
        return NULL;
    }
    return d;
}
