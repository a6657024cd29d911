/*
 * lazylib.c - loading a library on the first call of one of its functions (lazylib.h).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "lazylib.h"

void *cmh_lazy_sym(cmh_lazylib *lib, const char *name)
{
    void *h = __atomic_load_n(&lib->handle, __ATOMIC_ACQUIRE);
    if (!h) {
        /* two threads may both get here: dlopen counts references, either handle is the one */
        if (!(h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL))) {
            const char *why = dlerror();
            fprintf(stderr, "cumemhist: this needs %s (Debian package %s), which cannot be loaded: %s\n", lib->soname,
                    lib->package, why ? why : "not found");
            exit(1);
        }
        __atomic_store_n(&lib->handle, h, __ATOMIC_RELEASE);
    }
    dlerror();
    void *p = dlsym(h, name);
    if (!p) {
        const char *why = dlerror();
        fprintf(stderr, "cumemhist: %s has no %s (a version too old?): %s\n", lib->soname, name, why ? why : "not found");
        exit(1);
    }
    return p;
}
