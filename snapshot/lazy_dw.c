/*
 * lazy_dw.c - libdw (with libelf, liblzma, libbz2, libzstd behind it) and libstdc++'s demangler,
 * loaded when symbolize.c first needs them (lazylib.h): only commands that resolve native
 * frames pay for them.
 */
#include <stddef.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "lazylib.h"

static cmh_lazylib g_dw = CMH_LAZYLIB("libdw.so.1", "libdw1");
static cmh_lazylib g_cxx = CMH_LAZYLIB("libstdc++.so.6", "libstdc++6");

/* symbolize.c declares it so: the Itanium C++ ABI's demangler */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);
CMH_LAZY(g_cxx, char *, __cxa_demangle, (const char *mangled, char *buf, size_t *len, int *status), (mangled, buf, len, status))

CMH_LAZY(g_dw, Dwarf_Attribute *, dwarf_attr, (Dwarf_Die *die, unsigned int search_name, Dwarf_Attribute *result), (die, search_name, result))
CMH_LAZY(g_dw, Dwarf_Attribute *, dwarf_attr_integrate, (Dwarf_Die *die, unsigned int search_name, Dwarf_Attribute *result),
         (die, search_name, result))
CMH_LAZY(g_dw, int, dwarf_child, (Dwarf_Die *die, Dwarf_Die *result), (die, result))
CMH_LAZY(g_dw, const char *, dwarf_diename, (Dwarf_Die *die), (die))
CMH_LAZY(g_dw, Dwarf_Off, dwarf_dieoffset, (Dwarf_Die *die), (die))
CMH_LAZY(g_dw, const char *, dwarf_filesrc, (Dwarf_Files *file, size_t idx, Dwarf_Word *mtime, Dwarf_Word *length),
         (file, idx, mtime, length))
CMH_LAZY(g_dw, Dwarf_Die *, dwarf_formref_die, (Dwarf_Attribute *attr, Dwarf_Die *die_mem), (attr, die_mem))
CMH_LAZY(g_dw, const char *, dwarf_formstring, (Dwarf_Attribute *attrp), (attrp))
CMH_LAZY(g_dw, int, dwarf_formudata, (Dwarf_Attribute *attr, Dwarf_Word *return_uval), (attr, return_uval))
CMH_LAZY(g_dw, int, dwarf_getsrcfiles, (Dwarf_Die *cudie, Dwarf_Files **files, size_t *nfiles), (cudie, files, nfiles))
CMH_LAZY(g_dw, int, dwarf_haschildren, (Dwarf_Die *die), (die))
CMH_LAZY(g_dw, int, dwarf_haspc, (Dwarf_Die *die, Dwarf_Addr pc), (die, pc))
CMH_LAZY(g_dw, Dwarf_Die *, dwarf_offdie, (Dwarf *dbg, Dwarf_Off offset, Dwarf_Die *result), (dbg, offset, result))
CMH_LAZY(g_dw, ptrdiff_t, dwarf_ranges, (Dwarf_Die *die, ptrdiff_t offset, Dwarf_Addr *basep, Dwarf_Addr *startp, Dwarf_Addr *endp),
         (die, offset, basep, startp, endp))
CMH_LAZY(g_dw, int, dwarf_siblingof, (Dwarf_Die *die, Dwarf_Die *result), (die, result))
CMH_LAZY(g_dw, int, dwarf_tag, (Dwarf_Die *die), (die))

CMH_LAZY(g_dw, Dwfl_Module *, dwfl_addrmodule, (Dwfl *dwfl, Dwarf_Addr address), (dwfl, address))
CMH_LAZY(g_dw, Dwfl *, dwfl_begin, (const Dwfl_Callbacks *callbacks), (callbacks))
CMH_LAZY(g_dw, int, dwfl_build_id_find_elf, (Dwfl_Module *m, void **u, const char *n, Dwarf_Addr a, char **f, Elf **e), (m, u, n, a, f, e))
CMH_LAZY_VOID(g_dw, dwfl_end, (Dwfl *d), (d))
CMH_LAZY(g_dw, const char *, dwfl_lineinfo, (Dwfl_Line *line, Dwarf_Addr *addr, int *linep, int *colp, Dwarf_Word *mtime, Dwarf_Word *length),
         (line, addr, linep, colp, mtime, length))
CMH_LAZY(g_dw, Dwarf_Die *, dwfl_module_addrdie, (Dwfl_Module *mod, Dwarf_Addr addr, Dwarf_Addr *bias), (mod, addr, bias))
CMH_LAZY(g_dw, const char *, dwfl_module_addrname, (Dwfl_Module *mod, GElf_Addr address), (mod, address))
CMH_LAZY(g_dw, int, dwfl_module_build_id, (Dwfl_Module *mod, const unsigned char **bits, GElf_Addr *vaddr), (mod, bits, vaddr))
CMH_LAZY(g_dw, Dwarf *, dwfl_module_getdwarf, (Dwfl_Module *m, Dwarf_Addr *bias), (m, bias))
CMH_LAZY(g_dw, Dwfl_Line *, dwfl_module_getsrc, (Dwfl_Module *mod, Dwarf_Addr addr), (mod, addr))
CMH_LAZY_VOID(g_dw, dwfl_report_begin, (Dwfl *dwfl), (dwfl))
CMH_LAZY(g_dw, Dwfl_Module *, dwfl_report_elf, (Dwfl *dwfl, const char *name, const char *file_name, int fd, GElf_Addr base, bool add_p_vaddr),
         (dwfl, name, file_name, fd, base, add_p_vaddr))
CMH_LAZY(g_dw, int, dwfl_report_end, (Dwfl *dwfl, int (*removed)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *arg), void *arg),
         (dwfl, removed, arg))
CMH_LAZY(g_dw, int, dwfl_standard_find_debuginfo,
         (Dwfl_Module *m, void **u, const char *n, Dwarf_Addr a, const char *f, const char *d, GElf_Word c, char **o), (m, u, n, a, f, d, c, o))
