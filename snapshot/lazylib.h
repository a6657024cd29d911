/*
 * lazylib.h - a library the cumemhist command links only by name, loaded the first time one of
 * its functions is called, so that a command that never needs it never pays for loading it.
 *
 * Start-up was mostly the dynamic loader mapping and relocating libraries few commands use
 * (SQLite for one export, libdw/libelf/liblzma/libbz2 for symbolize, libstdc++ for demangling,
 * zlib for pprof): about 2 of the 2.5 ms of a command that reads a small file.  So the few
 * functions of such a library the code calls are defined here as stubs with the library's own
 * names and prototypes (its header is included, so the compiler checks them); the first call of
 * any stub dlopen()s the library by its soname and every stub then forwards to the real
 * function.  Callers do not change.  A library that cannot be loaded ends the command with a
 * message naming it and the package to install (exit status 1).
 *
 * Use (one .c file per library, beside the code that uses it):
 *     static cmh_lazylib g_lib = CMH_LAZYLIB("libsqlite3.so.0", "libsqlite3-0");
 *     CMH_LAZY(g_lib, int, sqlite3_close, (sqlite3 *db), (db))
 *     CMH_LAZY_VOID(g_lib, dwfl_end, (Dwfl *d), (d))
 * and the target that links those files must not also link the library itself.
 * Thread-safe: the handle and each function pointer are set once, atomically.
 */
#ifndef CMH_LAZYLIB_H
#define CMH_LAZYLIB_H

typedef struct cmh_lazylib {
    const char *soname, *package;
    void *handle; /* set once, atomically */
} cmh_lazylib;

#define CMH_LAZYLIB(soname, package) {soname, package, 0}

/* The address of `name` in the library, loading it first if need be; never NULL (a library or
 * symbol that is not there ends the process with a message). */
void *cmh_lazy_sym(cmh_lazylib *lib, const char *name);

#define CMH_LAZY_PTR_(lib, name, type)                                                                                 \
    static type fn_;                                                                                                   \
    type f_ = __atomic_load_n(&fn_, __ATOMIC_ACQUIRE);                                                                 \
    if (__builtin_expect(!f_, 0)) {                                                                                    \
        void *p_ = cmh_lazy_sym(&(lib), #name);                                                                        \
        __builtin_memcpy(&f_, &p_, sizeof f_);                                                                         \
        __atomic_store_n(&fn_, f_, __ATOMIC_RELEASE);                                                                  \
    }

#define CMH_LAZY(lib, ret, name, params, args)                                                                         \
    ret name params                                                                                                    \
    {                                                                                                                  \
        typedef ret(*name##_fn) params;                                                                                \
        CMH_LAZY_PTR_(lib, name, name##_fn)                                                                            \
        return f_ args;                                                                                                \
    }

#define CMH_LAZY_VOID(lib, name, params, args)                                                                         \
    void name params                                                                                                   \
    {                                                                                                                  \
        typedef void(*name##_fn) params;                                                                               \
        CMH_LAZY_PTR_(lib, name, name##_fn)                                                                            \
        f_ args;                                                                                                       \
    }

#endif
