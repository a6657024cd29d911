/*
 * pystack.c - the Python stack of the allocating thread, captured with the native one.
 *
 * Most GPU code is driven from Python through some binding (ctypes, CuPy, JAX, Numba, PyTorch):
 * the native stack then ends in the interpreter (`_PyEval_EvalFrameDefault`, `ffi_call`) and
 * names no line of the user's.  When the process has a Python interpreter, this file walks the
 * calling thread's Python frames through the interpreter's public C API, found at run time with
 * dlsym (no build-time dependency on any Python version): PyThreadState_GetFrame, PyFrame_GetBack,
 * PyFrame_GetCode, PyFrame_GetLineNumber and the code object's co_filename / co_name.
 *
 * Safety.  Through the C API, frames are walked only with the GIL held by this thread, an
 * interpreter initialised and not finalising.  A thread that released the GIL around the driver
 * call (ctypes.CDLL, Cython's `with nogil`, PyTorch's bindings, NCCL's init) but still has its
 * Python thread state has its own frames read without the GIL, by the interpreter's layout
 * (CPython 3.11 and 3.12; recorder/pystack_nogil.c), in both modes; where no layout is known,
 * or the read finds memory not as expected, it takes the GIL back for the C API walk with
 * PyGILState_Ensure, as a ctypes callback does, unless CUMEMHIST_PYSTACKS=held.  Every refusal is
 * counted by reason and lands in the snapshot's settings.  The recorder's helper thread (which
 * calls into Python for PyTorch's snapshot) is never walked, and a thread that has never run
 * Python has no thread state: both are passed over before anything is touched.
 *
 * Interning.  A Python frame is a (file, function, line) triple and becomes a pseudo PC:
 * CMH_PYTOKEN | id, an address no user-space PC can have, so that a mixed stack is interned, cached
 * and written to the flight record like any other stack (stacks.c) and turned into a frame with a
 * .py filename, a function name and a line at dump time (symbols.c) or by `recover` (the flight
 * record's CMH_FR_PYFRAME records).  Through the C API, each code object met is kept alive with a
 * reference (its address is the cache's key, so it must not be reused) and its strings are copied
 * once; a repeated stack costs a lookup per frame, no new strings.  The GIL-free read can take no
 * reference, so its ids are keyed by content (file, name, line), and its call-site cache, keyed by
 * the code object's address and offset, is trusted only where the names and the location table are
 * still, byte for byte, those that gave the entry; both reads give the same id to the same triple.
 * Ids are dense from 1 and stay valid for the process's life.
 *
 * Thread safety: one mutex over the tables (the GIL-free read's call-site cache has its own);
 * capture runs under the GIL, so it is uncontended except against a dump reading a frame.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pystack_internal.h"

typedef void PyObj;
typedef int (*int_fn)(void);
typedef PyObj *(*obj_fn)(PyObj *);
typedef void (*void_obj_fn)(PyObj *);

static struct {
    int_fn is_initialized, is_finalizing, gil_check;
    void *(*this_tstate)(void);
    int (*gil_ensure)(void);
    void (*gil_release)(int);
    void *(*tstate_get)(void);
    void *(*tstate_attached)(void); /* this thread's attached state or NULL, never fatal */
    obj_fn tstate_frame, frame_back, frame_code;
    int (*frame_line)(PyObj *);
    int (*frame_lasti)(PyObj *);           /* 3.11+; without it frames are keyed by line */
    int (*addr2line)(PyObj *, int);
    PyObj *(*getattr)(PyObj *, const char *);
    const char *(*utf8)(PyObj *);
    void_obj_fn decref, incref;
    void (*err_fetch)(PyObj **, PyObj **, PyObj **);
    void (*err_restore)(PyObj *, PyObj *, PyObj *);
    uintptr_t interp_lo, interp_hi; /* the module whose code runs the eval loop */
    int nogil; /* the GIL-free read knows this Python's layout (pystack_nogil.c) */
} py;

/* 0 not looked yet, 1 present, -1 absent (looked again now and then: Python may be dlopen'ed) */
static int g_state;
static __thread uint32_t t_absent_calls __attribute__((tls_model("initial-exec"))); /* per thread: no shared counter on a C program's hot path */
static int g_mode = CMH_PYTHON_WAIT; /* CUMEMHIST_PYSTACKS, cmh_set_python_stacks */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t cmh_py_refused[CMH_PYREFUSE_N];
uint64_t cmh_py_captured;
uint64_t cmh_py_nogil_reads;

typedef struct code_info {
    uint64_t key; /* the code object's address */
    char *file, *name;
} code_info;

typedef struct pyframe_slot {
    uint64_t key; /* hash of code and line (oatab.h: never 0) */
    uintptr_t code;
    int32_t line;
    uint32_t id;
} pyframe_slot;

typedef struct pyframe {
    const char *file, *name;
    int32_t line;
} pyframe;

static cmh_oatab g_codes = {NULL, 0, 0, sizeof(code_info)};
#define CODES_MAX 65536 /* code objects kept alive at most; past it, their frames are lost (counted) */
#define PY_CUT_FILE "<cumemhist>" /* the file of the frame that marks a stack's cut middle */
static cmh_oatab g_frames = {NULL, 0, 0, sizeof(pyframe_slot)};
/* (code, instruction offset) -> id: the line is computed once per call site, not per stack
 * (PyCode_Addr2Line scans the code's line table) */
static cmh_oatab g_sites = {NULL, 0, 0, sizeof(pyframe_slot)};
/* (file, name, line) -> id: a frame read without the GIL has no code object to key it by (no
 * reference can be taken to keep its address from being reused), so it is keyed by its content;
 * frames read through the C API are entered here too, so that both reads give one id */
static cmh_oatab g_content = {NULL, 0, 0, sizeof(pyframe_slot)};
static pyframe *g_ids; /* g_ids[id - 1] */
static uint32_t g_nids, g_capids;

static int find_interp(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t base = *(uintptr_t *)arg;
    if (info->dlpi_addr != base && !(base == 0 && info->dlpi_addr == 0)) return 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo) lo = a;
        if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
    if (lo < hi && (uintptr_t)py.frame_line >= lo && (uintptr_t)py.frame_line < hi) {
        py.interp_lo = lo;
        py.interp_hi = hi;
        return 1;
    }
    return 0;
}


static void resolve(void)
{
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
    if (!real || !real(RTLD_DEFAULT, "Py_IsInitialized")) {
        __atomic_store_n(&g_state, -1, __ATOMIC_RELEASE); /* read unlocked by ready() */
        return;
    }
#define SYM(field, name) (*(void **)&py.field = real(RTLD_DEFAULT, name))
    SYM(is_initialized, "Py_IsInitialized");
    if (!SYM(is_finalizing, "Py_IsFinalizing")) SYM(is_finalizing, "_Py_IsFinalizing"); /* before 3.13 */
    SYM(gil_check, "PyGILState_Check");
    SYM(this_tstate, "PyGILState_GetThisThreadState");
    SYM(gil_ensure, "PyGILState_Ensure");
    SYM(gil_release, "PyGILState_Release");
    SYM(tstate_get, "PyThreadState_Get");
    if (!SYM(tstate_attached, "PyThreadState_GetUnchecked")) SYM(tstate_attached, "_PyThreadState_UncheckedGet"); /* 3.13 / before */
    SYM(tstate_frame, "PyThreadState_GetFrame"); /* 3.9+ */
    SYM(frame_back, "PyFrame_GetBack");          /* 3.9+ */
    SYM(frame_code, "PyFrame_GetCode");          /* 3.9+ */
    SYM(frame_line, "PyFrame_GetLineNumber");
    SYM(frame_lasti, "PyFrame_GetLasti");
    SYM(addr2line, "PyCode_Addr2Line");
    if (!py.addr2line) py.frame_lasti = NULL;
    SYM(getattr, "PyObject_GetAttrString");
    SYM(utf8, "PyUnicode_AsUTF8");
    SYM(decref, "Py_DecRef");
    SYM(incref, "Py_IncRef");
    SYM(err_fetch, "PyErr_Fetch");
    SYM(err_restore, "PyErr_Restore");
#undef SYM
    if (!py.is_initialized || !py.is_finalizing || !py.gil_check || !py.this_tstate || !py.gil_ensure ||
        !py.gil_release || !py.tstate_get || !py.tstate_frame || !py.frame_back || !py.frame_code || !py.frame_line ||
        !py.getattr || !py.utf8 || !py.decref || !py.incref || !py.err_fetch || !py.err_restore) {
        cmh_log("this Python lacks part of the C API used to read its stacks (3.9 or later is needed); native frames only");
        __atomic_store_n(&g_state, -2, __ATOMIC_RELEASE); /* never looked at again */
        return;
    }
    Dl_info d;
    if (dladdr((void *)(uintptr_t)py.frame_line, &d)) {
        uintptr_t base = (uintptr_t)d.dli_fbase;
        /* dladdr gives the mapping's start, dl_iterate_phdr the load bias: they agree for a
         * shared object and for a PIE (both start at 0 in the file) */
        cmh_dl_iterate(find_interp, &base);
        if (!py.interp_hi) {
            base = 0; /* a non-PIE executable: its bias is 0 */
            cmh_dl_iterate(find_interp, &base);
        }
    }
    py.nogil = cmh_pynogil_init(real);
    __atomic_store_n(&g_state, 1, __ATOMIC_RELEASE);
}

static int ready(void)
{
    int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    if (CMH_LIKELY(st == 1)) return 1;
    if (st == -2) return 0;
    /* no interpreter (yet): look again every 4096 stacks, in case one is dlopen'ed */
    if (st == -1 && (++t_absent_calls & 4095) != 0) return 0;
    pthread_mutex_lock(&g_lock);
    int now = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    if (now <= 0 && now != -2) {
        const char *m = getenv("CUMEMHIST_PYSTACKS");
        if (m && !strcmp(m, "held")) __atomic_store_n(&g_mode, CMH_PYTHON_HELD, __ATOMIC_RELAXED);
        if (m && !strcmp(m, "off")) __atomic_store_n(&g_mode, CMH_PYTHON_OFF, __ATOMIC_RELAXED);
        resolve();
    }
    pthread_mutex_unlock(&g_lock);
    return __atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == 1;
}

int cmh_pystack_in_interp(uintptr_t pc) { return pc - 1 >= py.interp_lo && pc - 1 < py.interp_hi; }

static char *str_attr(PyObj *code, const char *attr)
{
    PyObj *o = py.getattr(code, attr);
    const char *u = o ? py.utf8(o) : NULL;
    char *r = strdup(u ? u : "??");
    if (o) py.decref(o);
    return r;
}

static uint64_t key_of(PyObj *code, int at) { return py_site_key((uintptr_t)code, at); }

/* The id of (code, line) when already made; 0 if not.  Under g_lock. */
static uint32_t find_id(PyObj *code, int line, uint64_t h)
{
    uint32_t pos = UINT32_MAX;
    for (pyframe_slot *e; (e = cmh_oa_next(&g_frames, h, &pos));)
        if (e->code == (uintptr_t)code && e->line == line) return e->id;
    return 0;
}

/* Room for one more id; 0 when out of memory.  Under g_lock. */
static int grow_ids(void)
{
    uint32_t nc = g_capids ? g_capids * 2 : 1024;
    pyframe *n = realloc(g_ids, (size_t)nc * sizeof *n);
    if (!n) return 0;
    g_ids = n;
    g_capids = nc;
    return 1;
}

/* Eight bytes a step: a path is hashed for every frame the GIL-free read names */
static uint64_t hash_str(uint64_t h, const char *s)
{
    size_t n = strlen(s), i = 0;
    for (uint64_t w; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = cmh_oa_mix(h ^ w);
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    return cmh_oa_mix(h ^ w ^ ((uint64_t)n << 56));
}

static uint64_t content_key(const char *file, const char *name, int line)
{
    return cmh_oa_hashkey(cmh_oa_mix(hash_str(hash_str(0x9E3779B97F4A7C15ull, file), name) * 31 + (uint64_t)(uint32_t)line));
}

/* The id of (file, name, line) when already made; 0 if not.  Under g_lock. */
static uint32_t find_content(const char *file, const char *name, int line, uint64_t h)
{
    uint32_t pos = UINT32_MAX;
    for (pyframe_slot *e; (e = cmh_oa_next(&g_content, h, &pos));) {
        const pyframe *f = &g_ids[e->id - 1];
        if (f->line == line && !strcmp(f->file, file) && !strcmp(f->name, name)) return e->id;
    }
    return 0;
}

/* A new id for (file, name, line), whose strings must live as long as the process; 0 when out of
 * memory.  Under g_lock. */
static uint32_t new_id(const char *file, const char *name, int line, uint64_t h)
{
    if ((g_nids == g_capids && !grow_ids()) || cmh_oa_reserve(&g_content, g_content.n + 1) != 0) return 0;
    uint32_t id = ++g_nids;
    g_ids[id - 1] = (pyframe){file, name, line};
    pyframe_slot *e = cmh_oa_add(&g_content, h);
    e->code = 0;
    e->line = line;
    e->id = id;
    cmh_flight_pyframe(id, file, name, line); /* before any stack that names it */
    return id;
}

/* The id of (code, line), made on first sight; 0 when out of memory.  The GIL held, g_lock not:
 * reading co_filename may allocate, an allocation may run the garbage collector, and a finaliser
 * may free device memory and come back here. */
static uint32_t frame_id(PyObj *code, int line)
{
    uint64_t h = key_of(code, line);
    pthread_mutex_lock(&g_lock);
    uint32_t id = find_id(code, line, h);
    int known_code = id || cmh_oa_find(&g_codes, (uint64_t)(uintptr_t)code);
    pthread_mutex_unlock(&g_lock);
    if (id) return id;
    char *file = NULL, *name = NULL;
    if (!known_code) {
        file = str_attr(code, "co_filename");
        name = str_attr(code, "co_name");
        if (!file || !name) goto fail;
    }
    pthread_mutex_lock(&g_lock);
    if ((id = find_id(code, line, h))) goto out; /* made meanwhile, by a re-entered capture */
    code_info *ci = cmh_oa_find(&g_codes, (uint64_t)(uintptr_t)code);
    if (!ci) {
        /* a program that compiles code in a loop must not have us keep all of it */
        if (!file || g_codes.n >= CODES_MAX || cmh_oa_reserve(&g_codes, g_codes.n + 1) != 0) goto out;
        py.incref(code); /* kept: its address is our key and must not be reused */
        ci = cmh_oa_add(&g_codes, (uint64_t)(uintptr_t)code);
        ci->file = file;
        ci->name = name;
        file = name = NULL;
    }
    if (cmh_oa_reserve(&g_frames, g_frames.n + 1) != 0) goto out;
    uint64_t ch = content_key(ci->file, ci->name, line); /* one id with the GIL-free read's */
    if (!(id = find_content(ci->file, ci->name, line, ch)) && !(id = new_id(ci->file, ci->name, line, ch))) goto out;
    pyframe_slot *e = cmh_oa_add(&g_frames, h);
    e->code = (uintptr_t)code;
    e->line = line;
    e->id = id;
out:
    pthread_mutex_unlock(&g_lock);
fail:
    free(file);
    free(name);
    if (!id) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    return id;
}

static uint32_t find_site(PyObj *code, int lasti)
{
    uint32_t pos = UINT32_MAX;
    for (pyframe_slot *e; (e = cmh_oa_next(&g_sites, key_of(code, lasti), &pos));)
        if (e->code == (uintptr_t)code && e->line == lasti) return e->id;
    return 0;
}

/* The id of the frame that stands for `cut` frames left out of a stack's middle, made on first
 * sight; 0 when out of memory.  Under g_lock. */
static uint32_t cut_id(uint32_t cut)
{
    static struct {
        uint32_t cut, id;
    } seen[64];
    static unsigned nseen;
    for (unsigned i = 0; i < nseen; i++)
        if (seen[i].cut == cut) return seen[i].id;
    char buf[96];
    snprintf(buf, sizeof buf, "... %u frame%s cut by --max-frames ...", cut, cut == 1 ? "" : "s");
    char *name = strdup(buf), *file = strdup(PY_CUT_FILE);
    if (!name || !file || (g_nids == g_capids && !grow_ids())) {
        free(name);
        free(file);
        return 0;
    }
    uint32_t id = ++g_nids;
    g_ids[id - 1] = (pyframe){file, name, 0};
    cmh_flight_pyframe(id, file, name, 0);
    if (nseen < sizeof seen / sizeof seen[0]) seen[nseen].cut = cut, seen[nseen++].id = id;
    return id; /* (past 64 depths, one more id per stack: a program recursing without end) */
}

uint32_t cmh_py_cut_id(uint32_t cut)
{
    pthread_mutex_lock(&g_lock);
    uint32_t id = cut_id(cut);
    pthread_mutex_unlock(&g_lock);
    return id;
}

uint32_t cmh_py_content_id(const char *file, const char *name, int line)
{
    uint64_t h = content_key(file, name, line);
    pthread_mutex_lock(&g_lock);
    uint32_t id = find_content(file, name, line, h);
    if (!id) {
        char *f = strdup(file), *n = strdup(name);
        if (f && n && (id = new_id(f, n, line, h))) f = n = NULL;
        free(f);
        free(n);
    }
    pthread_mutex_unlock(&g_lock);
    return id;
}

/* Collect each frame's code (borrowed once the frame reference is dropped: the running frame
 * holds it) and where it is, then look them all up under one lock; only a call site not seen
 * before costs more (its line, and on first sight of its code, the strings). */
static int walk(uintptr_t *out, int max)
{
    PyObj *et, *ev, *tb;
    py.err_fetch(&et, &ev, &tb); /* getattr must not disturb an exception in flight */
    pywalk w;
    pw_init(&w, max);
    PyObj *f = py.tstate_frame(py.tstate_get());
    while (f && pw_more(&w)) {
        PyObj *code = py.frame_code(f);
        if (code) {
            pw_add(&w, code, py.frame_lasti ? py.frame_lasti(f) : py.frame_line(f));
            py.decref(code);
        }
        PyObj *back = py.frame_back(f);
        py.decref(f);
        f = back;
    }
    if (f) py.decref(f);
    uint32_t cut;
    int marker = pw_finish(&w, &cut), n = w.n;
    PyObj **codes = w.code;
    int *at = w.at;
    uint32_t ids[CMH_MAX_FRAMES];
    int missing = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < n; i++) {
        if (i == marker) ids[i] = cut_id(cut);
        else ids[i] = py.frame_lasti ? find_site(codes[i], at[i]) : find_id(codes[i], at[i], key_of(codes[i], at[i]));
        missing += !ids[i] && i != marker;
    }
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; missing && i < n; i++) {
        if (ids[i] || i == marker) continue;
        if (!py.frame_lasti) {
            ids[i] = frame_id(codes[i], at[i]);
            continue;
        }
        int line = at[i] >= 0 ? py.addr2line(codes[i], at[i]) : -1;
        ids[i] = frame_id(codes[i], line);
        pthread_mutex_lock(&g_lock);
        if (ids[i] && !find_site(codes[i], at[i]) && cmh_oa_reserve(&g_sites, g_sites.n + 1) == 0) {
            pyframe_slot *e = cmh_oa_add(&g_sites, key_of(codes[i], at[i]));
            e->code = (uintptr_t)codes[i];
            e->line = at[i];
            e->id = ids[i];
        }
        pthread_mutex_unlock(&g_lock);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ids[i]) out[k++] = CMH_PYTOKEN | ids[i];
    py.err_restore(et, ev, tb);
    return k;
}

/* PyTorch's CUDA allocator in the process (libc10_cuda), looked for again only when the loader's
 * count of loaded objects moved: its frees run under the GIL while holding the lock its
 * cudaMalloc runs under, so waiting for the GIL there could deadlock (a plain LD_PRELOAD has no
 * start-up hook to say so). */
static unsigned long long g_adds_seen;
static int g_torch;

static int first_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1;
}

static int find_c10(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *n = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    return n && !strncmp(n + 1, "libc10_cuda", 11);
}

static int torch_cuda_loaded(void)
{
    unsigned long long adds = 0;
    cmh_dl_iterate(first_adds, &adds);
    if (adds != __atomic_load_n(&g_adds_seen, __ATOMIC_RELAXED)) {
        int t = cmh_dl_iterate(find_c10, NULL);
        __atomic_store_n(&g_torch, t, __ATOMIC_RELAXED);
        __atomic_store_n(&g_adds_seen, adds, __ATOMIC_RELAXED);
        if (t) cmh_log("PyTorch's CUDA allocator is loaded: Python frames only from threads holding the GIL (--python-stacks held)");
    }
    return __atomic_load_n(&g_torch, __ATOMIC_RELAXED);
}

int cmh_pystack_capture(uintptr_t *out, int max)
{
    if (max <= 0 || cmh_on_helper || __atomic_load_n(&g_mode, __ATOMIC_RELAXED) == CMH_PYTHON_OFF || !ready()) return 0;
    int mode = __atomic_load_n(&g_mode, __ATOMIC_RELAXED); /* the environment's, once ready() read it */
    if (mode == CMH_PYTHON_OFF) return 0;
    if (!py.is_initialized()) return 0; /* no interpreter running: not a refusal */
    if (py.is_finalizing()) {
        __atomic_add_fetch(&cmh_py_refused[CMH_PYREFUSE_FINALIZING], 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (!py.this_tstate()) return 0; /* a thread that never ran Python (the helper among them) */
    int n;
    /* PyGILState_Check says 1 whatever the truth once sub-interpreters exist: an attached
     * thread state is the GIL held, when the interpreter can say so */
    if ((!py.tstate_attached || py.tstate_attached()) && py.gil_check()) n = walk(out, max);
    else if (py.nogil && (n = cmh_pynogil_walk((uintptr_t)py.this_tstate(), out, max)) >= 0) {
        /* The thread released the GIL around the call: its frames read as they lie, first in both
         * modes, as nothing is waited for (a GIL held elsewhere can take a switch interval, 5 ms,
         * to come back, and a GIL holder waiting on a lock this thread holds would deadlock) */
        if (n) __atomic_add_fetch(&cmh_py_nogil_reads, 1, __ATOMIC_RELAXED);
    } else {
        if (py.nogil) __atomic_add_fetch(&cmh_py_refused[CMH_PYREFUSE_LAYOUT], 1, __ATOMIC_RELAXED);
        if (mode == CMH_PYTHON_WAIT && torch_cuda_loaded()) {
            __atomic_store_n(&g_mode, CMH_PYTHON_HELD, __ATOMIC_RELAXED);
            mode = CMH_PYTHON_HELD;
        }
        if (mode != CMH_PYTHON_WAIT) {
            if (!py.nogil) __atomic_add_fetch(&cmh_py_refused[CMH_PYREFUSE_NOGIL], 1, __ATOMIC_RELAXED);
            return 0;
        }
        /* No GIL-free read: take the GIL back for the walk, as a ctypes callback would.  (A
         * program whose GIL holder waits on a lock this thread holds would deadlock here:
         * PyTorch's caching allocator is one, so the start-up hook asks for `held` when torch is
         * imported, and without it torch_cuda_loaded() does.) */
        int g = py.gil_ensure();
        n = py.is_finalizing() ? 0 : walk(out, max);
        py.gil_release(g);
    }
    if (n) __atomic_add_fetch(&cmh_py_captured, 1, __ATOMIC_RELAXED);
    return n;
}

int cmh_pystack_set_mode(int mode)
{
    if (mode < CMH_PYTHON_OFF || mode > CMH_PYTHON_WAIT) return CMH_EINVAL;
    if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == 0) ready(); /* the environment first, then this */
    __atomic_store_n(&g_mode, mode, __ATOMIC_RELAXED);
    return CMH_OK;
}

int cmh_pystack_frame(uintptr_t token, const char **file, const char **name, int32_t *line)
{
    uint32_t id = (uint32_t)(token & ~CMH_PYTOKEN);
    pthread_mutex_lock(&g_lock);
    int ok = id && id <= g_nids;
    if (ok) {
        *file = g_ids[id - 1].file;
        *name = g_ids[id - 1].name;
        *line = g_ids[id - 1].line;
    }
    pthread_mutex_unlock(&g_lock);
    return ok;
}

void cmh_pystack_each(void (*fn)(uint32_t id, const char *file, const char *name, int32_t line))
{
    pthread_mutex_lock(&g_lock);
    uint32_t n = g_nids;
    pthread_mutex_unlock(&g_lock);
    for (uint32_t id = 1; id <= n; id++) {
        const char *file, *name;
        int32_t line;
        if (cmh_pystack_frame(CMH_PYTOKEN | id, &file, &name, &line)) fn(id, file, name, line);
    }
}

void cmh_pystack_atfork_prepare(void)
{
    pthread_mutex_lock(&g_lock);
    cmh_pynogil_atfork_prepare();
}

void cmh_pystack_atfork_parent(void)
{
    cmh_pynogil_atfork_parent();
    pthread_mutex_unlock(&g_lock);
}

void cmh_pystack_atfork_child(void)
{
    pthread_mutex_init(&g_lock, NULL);
    cmh_pynogil_atfork_child();
}
