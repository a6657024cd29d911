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
 * (CPython 3.11 and 3.12; see "The GIL-free read" below), in both modes; where no layout is known,
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
 * Thread safety: one mutex over the tables; capture runs under the GIL, so it is uncontended
 * except against a dump reading a frame.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "oatab.h"

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
    uintptr_t code_type, unicode_type, bytes_type; /* &PyCode_Type ...: what the GIL-free read checks */
    const struct pylayout *layout; /* this Python's, for the GIL-free read; NULL: none known */
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
#define PY_KEEP_OUTER 8  /* a stack deeper than max_frames keeps its outermost this many (walk) */
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

/* The GIL-free read.  A thread that released the GIL around the driver call still owns its
 * Python frames: only this thread pushes and pops them, and it is inside our hook, so they cannot
 * change under us, and the code objects they name are kept alive by them.  What cannot be done
 * without the GIL is to touch a reference count or allocate through Python, so the C API is out
 * and the frames are read by the interpreter's own layout, per minor version: byte offsets in
 * CPython's structs (PyThreadState.cframe->current_frame, _PyInterpreterFrame, PyCodeObject, the
 * compact str and bytes objects) as its headers define them for a 64-bit build without
 * Py_TRACE_REFS.  3.11's were taken with offsetof() from the headers of CPython 3.11.7 (pyenv);
 * 3.12's were added up by hand from 3.12's Include/cpython/pystate.h, Include/cpython/code.h and
 * Include/internal/pycore_frame.h.  Every read goes through process_vm_readv on this process, which
 * fails (EFAULT) instead of faulting, and every object is checked for its type (&PyCode_Type,
 * &PyUnicode_Type, &PyBytes_Type, from dlsym) before it is trusted: a wrong offset or an unknown
 * build gives a refusal, counted (CMH_PYREFUSE_LAYOUT), never a crash of the program. */
typedef struct pylayout {
    int minor;
    uint16_t ts_cframe, cf_current;                   /* tstate->cframe->current_frame */
    uint16_t fr_code, fr_previous, fr_instr, fr_owner; /* _PyInterpreterFrame */
    int8_t owner_generator, owner_cstack;              /* FRAME_OWNED_BY_*; -1: no such owner */
    uint16_t co_filename, co_name, co_linetable, co_firstlineno, co_firsttraceable, co_code;
    uint16_t str_ascii, str_compact; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
} pylayout;

static const pylayout k_layouts[] = {
    /* 3.11: _PyCFrame {int use_tracing; current_frame}; the frame {f_func, f_globals, f_builtins,
     * f_locals, f_code, frame_obj, previous, prev_instr, stacktop, is_entry, owner}; the code
     * object's co_warmup and _co_linearray_entry_size put co_firstlineno at 72; PyASCIIObject
     * still has wstr (48 bytes), the compact object wstr_length (72) */
    {11, 56, 8, 32, 48, 56, 69, 1, -1, 112, 120, 136, 72, 168, 184, 48, 72},
    /* 3.12: _PyCFrame {current_frame, previous}; the frame {f_code, previous, f_funcobj, f_globals,
     * f_builtins, f_locals, frame_obj, prev_instr, stacktop, return_offset (uint16), owner};
     * PyThreadState's _status bits, py_recursion_remaining/limit, c_recursion_remaining,
     * recursion_headroom, tracing, what_event keep cframe at 56; co_firstlineno 68 (no warmup
     * shorts), _co_cached, _co_instrumentation_version, _co_monitoring before _co_firsttraceable
     * (176) and co_extra (184), bytecode at 192; no wstr: PyASCIIObject 40, compact 56 */
    {12, 56, 0, 0, 8, 56, 70, 1, 3, 112, 120, 136, 68, 176, 192, 40, 56},
};
#define PY_STR_MAX 4096      /* a file or function name longer than this is cut */
#define PY_LINETABLE_MAX (1 << 22) /* a location table larger than this is taken for garbage */
#define PY_NOGIL_DEPTH 4096  /* frames walked at most (a cycle from a wrong offset ends here) */
#define OB_TYPE 8            /* PyObject.ob_type; PyVarObject.ob_size is at 16 */

static pid_t g_pid; /* process_vm_readv's target: this process (set again in a forked child) */

/* Proving the layout.  A system call a read costs (about 9 a frame: 38 us a stack 10 frames deep
 * on the 2-core test machine), so once PY_PROVE stacks have been read whole through
 * process_vm_readv, each pointer checked for its object's type before it was followed, the layout
 * is taken as this interpreter's and reads become plain loads (still checked: a check failing then
 * goes back to system calls for good).  Only a wrong offset could send a read astray: with the
 * right ones, every pointer followed is one of this thread's own live frames or what they hold. */
#define PY_PROVE 64
static int g_direct;    /* 1: plain loads; 0: system calls; -1: system calls for good */
static uint32_t g_proven; /* stacks read whole by system calls so far */

/* n bytes at src into dst, or -1 where any of them is not mapped readable */
static int rd(void *dst, uintptr_t src, size_t n)
{
    if (!src) return -1;
    if (__atomic_load_n(&g_direct, __ATOMIC_RELAXED) == 1) {
        memcpy(dst, (const void *)src, n);
        return 0;
    }
    struct iovec l = {dst, n}, r = {(void *)src, n};
    return process_vm_readv(g_pid, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

static uintptr_t word(const unsigned char *b, unsigned at)
{
    uintptr_t v;
    memcpy(&v, b + at, sizeof v);
    return v;
}

static int32_t int32(const unsigned char *b, unsigned at)
{
    int32_t v;
    memcpy(&v, b + at, sizeof v);
    return v;
}

/* n code points of `kind` bytes each (PEP 393: 1, 2 or 4) at src, encoded as UTF-8 into buf, cut
 * at cap - 1 bytes; -1 when unreadable */
static int rd_encode(uintptr_t src, int64_t n, unsigned kind, char *buf, size_t cap)
{
    unsigned char chunk[256];
    size_t out = 0;
    for (int64_t i = 0; i < n && out + 4 < cap;) {
        int64_t k = n - i < (int64_t)(sizeof chunk / kind) ? n - i : (int64_t)(sizeof chunk / kind);
        if (rd(chunk, src + (uintptr_t)(i * kind), (size_t)(k * kind))) return -1;
        for (int64_t j = 0; j < k && out + 4 < cap; j++) {
            uint32_t c = chunk[j * kind];
            if (kind == 2) {
                uint16_t c2;
                memcpy(&c2, chunk + j * 2, 2);
                c = c2;
            } else if (kind == 4)
                memcpy(&c, chunk + j * 4, 4);
            if (c == 0 || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) c = '?'; /* as no name has */
            if (c < 0x80) buf[out++] = (char)c;
            else if (c < 0x800) buf[out++] = (char)(0xC0 | c >> 6), buf[out++] = (char)(0x80 | (c & 63));
            else if (c < 0x10000)
                buf[out++] = (char)(0xE0 | c >> 12), buf[out++] = (char)(0x80 | (c >> 6 & 63)), buf[out++] = (char)(0x80 | (c & 63));
            else
                buf[out++] = (char)(0xF0 | c >> 18), buf[out++] = (char)(0x80 | (c >> 12 & 63)),
                buf[out++] = (char)(0x80 | (c >> 6 & 63)), buf[out++] = (char)(0x80 | (c & 63));
        }
        i += k;
    }
    buf[out] = 0;
    return 0;
}

/* A str object's text (UTF-8) into buf, cut at cap - 1 bytes; -1 when it is not one */
static int rd_str(const pylayout *L, uintptr_t o, char *buf, size_t cap)
{
    unsigned char h[48];
    if (rd(h, o, L->str_ascii) || word(h, OB_TYPE) != py.unicode_type) return -1;
    uint32_t state;
    memcpy(&state, h + 32, sizeof state); /* interned:2 kind:3 compact:1 ascii:1, in 3.11 and 3.12 */
    int64_t len = (int64_t)word(h, 16);
    unsigned kind = (state >> 2) & 7;
    if (!(state & 0x20) || len < 0) return -1; /* not compact: a legacy string, never a code's */
    if (state & 0x40) { /* ASCII: the bytes as they are */
        size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
        if (rd(buf, o + L->str_ascii, n)) return -1;
        buf[n] = 0;
        return strlen(buf) == n ? 0 : -1;
    }
    if (kind != 1 && kind != 2 && kind != 4) return -1;
    /* Non-ASCII: its code points, after the compact header (its UTF-8 form, when one was made, is
     * written by whichever thread asked for it first: not to be read without the GIL) */
    return rd_encode(o + L->str_compact, len, kind, buf, cap);
}

/* The location table (CPython's Objects/locations.md, 3.11+), read in pieces */
typedef struct ltab {
    uintptr_t at;
    int64_t n, base, have;
    int bad;
    const unsigned char *p; /* b, or the table itself once reads are plain loads */
    unsigned char b[256];
} ltab;

static inline unsigned lt_byte(ltab *t, int64_t i)
{
    if (CMH_LIKELY(i >= t->base && i < t->base + t->have)) return t->p[i - t->base];
    if (i >= t->n) {
        t->bad = 1;
        return 0;
    }
    {
        int64_t k = t->n - i < (int64_t)sizeof t->b ? t->n - i : (int64_t)sizeof t->b;
        if (rd(t->b, t->at + (uintptr_t)i, (size_t)k)) {
            t->bad = 1;
            return 0;
        }
        t->base = i;
        t->have = k;
        t->p = t->b;
    }
    return t->p[i - t->base];
}

static int lt_svarint(ltab *t, int64_t i)
{
    unsigned b = lt_byte(t, i), v = b & 63, shift = 0;
    while ((b & 64) && !t->bad && shift < 30) {
        b = lt_byte(t, ++i);
        shift += 6;
        v |= (b & 63) << shift;
    }
    return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

/* The line of the instruction at byte offset addrq, as PyCode_Addr2Line gives it (-1: none);
 * -2 when the table is not a bytes object or cannot be read.  *used: how many of the table's bytes
 * gave it (0: no entry holds addrq) */
static int table_line(uintptr_t table, int first, int64_t addrq, int64_t *used)
{
    *used = 0;
    unsigned char h[32];
    if (rd(h, table, sizeof h) || word(h, OB_TYPE) != py.bytes_type) return -2;
    ltab t = {.at = table + 32, .n = (int64_t)word(h, 16)}; /* ob_sval, ob_size */
    if (t.n < 0 || t.n > PY_LINETABLE_MAX) return -2;
    if (__atomic_load_n(&g_direct, __ATOMIC_RELAXED) == 1) t.p = (const unsigned char *)t.at, t.have = t.n;
    int line = first;
    int64_t addr = 0;
    for (int64_t i = 0; i < t.n && !t.bad;) {
        unsigned b = lt_byte(&t, i);
        if (!(b & 0x80)) return -2; /* an entry starts with its high bit set */
        unsigned code = (b >> 3) & 15;
        if (code == 13 || code == 14) line += lt_svarint(&t, i + 1); /* no columns; long form */
        else if (code >= 10 && code <= 12) line += (int)code - 10; /* one-line forms */
        int64_t end = addr + 2 * (int64_t)((b & 7) + 1);      /* code units of 2 bytes */
        if (addrq >= addr && addrq < end) { /* the line depends on the table up to this entry's end */
            int64_t j = i + 1;
            while (j < t.n && !t.bad && !(lt_byte(&t, j) & 0x80)) j++;
            *used = j;
            return t.bad ? -2 : code == 15 ? -1 : line;
        }
        addr = end;
        do i++;
        while (i < t.n && !t.bad && !(lt_byte(&t, i) & 0x80));
    }
    return t.bad ? -2 : -1;
}

static void set_layout(void *(*real)(void *, const char *))
{
    py.code_type = (uintptr_t)real(RTLD_DEFAULT, "PyCode_Type");
    py.unicode_type = (uintptr_t)real(RTLD_DEFAULT, "PyUnicode_Type");
    py.bytes_type = (uintptr_t)real(RTLD_DEFAULT, "PyBytes_Type");
    const unsigned long *ver = real(RTLD_DEFAULT, "Py_Version"); /* 3.11+ */
    g_pid = getpid();
    if (sizeof(void *) != 8 || !ver || !py.code_type || !py.unicode_type || !py.bytes_type || (*ver >> 24) != 3) return;
    for (size_t i = 0; i < sizeof k_layouts / sizeof k_layouts[0]; i++)
        if (k_layouts[i].minor == (int)((*ver >> 16) & 0xff)) py.layout = &k_layouts[i];
    /* for tests only: a Python with no known layout, or a layout with a wrong offset */
    const char *t = getenv("CUMEMHIST_TEST_PYLAYOUT");
    static pylayout wrong;
    if (t && !strcmp(t, "none")) py.layout = NULL;
    if (t && !strcmp(t, "wrong") && py.layout) {
        wrong = *py.layout;
        wrong.fr_code += 8;
        py.layout = &wrong;
    }
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
    set_layout(real);
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

static uint64_t key_of(PyObj *code, int at) { return cmh_oa_hashkey(cmh_oa_mix((uint64_t)(uintptr_t)code * 31 + (uint64_t)(uint32_t)at)); }

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

/* A stack's frames as walked, innermost first: a stack deeper than max keeps both ends, the
 * innermost frames (the site and its callers) and the outermost PY_KEEP_OUTER (the entry point, the
 * training loop), with a marker frame between them saying how many were cut; the outer ones are
 * kept in a ring while walking.  A frame is its code object's address and where it is in it. */
typedef struct pywalk {
    int inner, outer, n;
    uint32_t past; /* frames seen past the inner ones */
    void *code[CMH_MAX_FRAMES], *ring[PY_KEEP_OUTER];
    int at[CMH_MAX_FRAMES], ring_at[PY_KEEP_OUTER];
} pywalk;

static void pw_init(pywalk *w, int max)
{
    if (max > CMH_MAX_FRAMES) max = CMH_MAX_FRAMES;
    w->outer = max >= 2 * PY_KEEP_OUTER ? PY_KEEP_OUTER : 0;
    w->inner = w->outer ? max - w->outer - 1 : max;
    w->n = 0;
    w->past = 0;
}

static int pw_more(const pywalk *w) { return w->n < w->inner || w->outer; }

static void pw_add(pywalk *w, void *code, int at)
{
    if (w->n < w->inner) {
        w->at[w->n] = at;
        w->code[w->n++] = code;
    } else { /* the ring holds the last (outermost) seen */
        w->ring[w->past % (uint32_t)w->outer] = code;
        w->ring_at[w->past % (uint32_t)w->outer] = at;
        w->past++;
    }
}

/* The marker, then the ring's frames, innermost first; the marker's index (-1: none) */
static int pw_finish(pywalk *w, uint32_t *cut)
{
    uint32_t outer = (uint32_t)w->outer;
    *cut = w->past > outer ? w->past - outer : 0;
    int marker = -1;
    if (*cut) {
        marker = w->n;
        w->code[w->n] = NULL;
        w->at[w->n++] = 0;
    }
    for (uint32_t i = 0; i < w->past && i < outer; i++) {
        uint32_t slot = *cut ? (w->past + i) % outer : i;
        w->at[w->n] = w->ring_at[slot];
        w->code[w->n++] = w->ring[slot];
    }
    return marker;
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

/* The id of the frame at byte offset lasti (-1: none) of the code object at `code` (an address
 * good for this capture only: the thread's frame holds the object), read without the GIL, made on
 * first sight of its (file, name, line); -1 when the object is not what the layout says */
/* Whether the live ASCII str at o (plain loads) is the n bytes s */
static int same_str(const pylayout *L, uintptr_t o, const char *s, size_t n)
{
    const unsigned char *h = (const unsigned char *)o;
    uint32_t state;
    memcpy(&state, h + 32, sizeof state);
    return word(h, OB_TYPE) == py.unicode_type && (state & 0x60) == 0x60 && (int64_t)word(h, 16) == (int64_t)n &&
           !memcmp(h + L->str_ascii, s, n);
}

/* A call site's id, found by the code object's address and offset, but trusted only where what
 * gave it is still there, byte for byte: the same file and function names, first line, and the
 * location table up to the site's entry (an address can have been reused by another code object,
 * so an entry only saves the decoding and the hashing).  Plain loads only; under g_lock. */
typedef struct nsite {
    uint64_t key; /* key_of(code, lasti) */
    uintptr_t code, file, name, table;
    int32_t lasti, first;
    uint32_t id, flen, nlen, tlen;
    unsigned char *tab; /* the table's first tlen bytes */
} nsite;
static cmh_oatab g_nsites = {NULL, 0, 0, sizeof(nsite)};
#define NSITES_MAX 65536

static uint32_t nsite_id(const pylayout *L, uintptr_t code, int lasti, const unsigned char *co)
{
    uintptr_t file = word(co, L->co_filename), name = word(co, L->co_name), table = word(co, L->co_linetable);
    int32_t first = int32(co, L->co_firstlineno);
    nsite e = {0};
    const char *fs = NULL, *ns = NULL;
    pthread_mutex_lock(&g_lock);
    uint32_t pos = UINT32_MAX;
    for (nsite *x; (x = cmh_oa_next(&g_nsites, key_of((PyObj *)code, lasti), &pos));)
        if (x->code == code && x->lasti == lasti) {
            e = *x;
            fs = g_ids[e.id - 1].file;
            ns = g_ids[e.id - 1].name;
            break;
        }
    pthread_mutex_unlock(&g_lock); /* (an entry's strings and table copy are never freed) */
    if (!e.id || e.file != file || e.name != name || e.table != table || e.first != first) return 0;
    const unsigned char *t = (const unsigned char *)table;
    if (word(t, OB_TYPE) != py.bytes_type || (int64_t)word(t, 16) < (int64_t)e.tlen || memcmp(t + 32, e.tab, e.tlen))
        return 0;
    return same_str(L, file, fs, e.flen) && same_str(L, name, ns, e.nlen) ? e.id : 0;
}

static void nsite_add(const pylayout *L, uintptr_t code, int lasti, const unsigned char *co, uint32_t id, int64_t used)
{
    if (used <= 0) return;
    unsigned char *tab = malloc((size_t)used);
    if (!tab) return;
    memcpy(tab, (const unsigned char *)word(co, L->co_linetable) + 32, (size_t)used);
    pthread_mutex_lock(&g_lock);
    nsite *x = NULL; /* (the table's count read under the lock: another thread may be adding) */
    if (g_nsites.n < NSITES_MAX && cmh_oa_reserve(&g_nsites, g_nsites.n + 1) == 0) {
        x = cmh_oa_add(&g_nsites, key_of((PyObj *)code, lasti));
        *x = (nsite){x->key, code, word(co, L->co_filename), word(co, L->co_name), word(co, L->co_linetable), lasti,
                     int32(co, L->co_firstlineno), id, (uint32_t)strlen(g_ids[id - 1].file),
                     (uint32_t)strlen(g_ids[id - 1].name), (uint32_t)used, tab};
    }
    pthread_mutex_unlock(&g_lock);
    if (!x) free(tab);
}

static int nogil_frame(const pylayout *L, uintptr_t code, int lasti, uint32_t *id)
{
    unsigned char co[256];
    char file[PY_STR_MAX], name[512];
    if (rd(co, code, L->co_code) || word(co, OB_TYPE) != py.code_type) return -1;
    int direct = __atomic_load_n(&g_direct, __ATOMIC_RELAXED) == 1;
    if (direct && lasti >= 0 && (*id = nsite_id(L, code, lasti, co))) return 0;
    if (rd_str(L, word(co, L->co_filename), file, sizeof file) || rd_str(L, word(co, L->co_name), name, sizeof name))
        return -1;
    int64_t used = 0;
    int line = lasti < 0 ? -1 : table_line(word(co, L->co_linetable), int32(co, L->co_firstlineno), lasti, &used);
    if (line == -2) return -1;
    uint64_t h = content_key(file, name, line);
    pthread_mutex_lock(&g_lock);
    if (!(*id = find_content(file, name, line, h))) {
        char *f = strdup(file), *n = strdup(name);
        if (f && n && (*id = new_id(f, n, line, h))) f = n = NULL;
        free(f);
        free(n);
    }
    pthread_mutex_unlock(&g_lock);
    if (*id && direct && lasti >= 0) nsite_add(L, code, lasti, co, *id, used);
    if (!*id) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    return 0;
}

/* This thread's Python stack without the GIL (py.layout known): its frames from
 * tstate->cframe->current_frame along `previous`, skipping those CPython skips (the C stack's shim
 * frames, frames not yet past their first traceable instruction), kept as walk() keeps them.
 * The frames written, or -1 when something read was not as the layout says. */
static int walk_nogil(uintptr_t *out, int max)
{
    const pylayout *L = py.layout;
    uintptr_t ts = (uintptr_t)py.this_tstate(), cf, f;
    unsigned char fr[80], co[256];
    if (rd(&cf, ts + L->ts_cframe, sizeof cf) || rd(&f, cf + L->cf_current, sizeof f)) return -1;
    pywalk w;
    pw_init(&w, max);
    for (int depth = 0; f && pw_more(&w); depth++) {
        if (depth == PY_NOGIL_DEPTH || rd(fr, f, L->fr_owner + 1u)) return -1;
        uintptr_t code = word(fr, L->fr_code), instr = word(fr, L->fr_instr);
        int owner = (signed char)fr[L->fr_owner];
        f = word(fr, L->fr_previous);
        if (owner == L->owner_cstack) continue;
        if (rd(co, code, L->co_code) || word(co, OB_TYPE) != py.code_type) return -1;
        int64_t lasti = ((int64_t)instr - (int64_t)(code + L->co_code)) / 2; /* in code units */
        if (owner != L->owner_generator && lasti < int32(co, L->co_firsttraceable)) continue; /* incomplete */
        if (lasti >= INT32_MAX / 2) return -1;
        pw_add(&w, (void *)code, lasti < 0 ? -1 : (int)lasti * 2);
    }
    uint32_t cut;
    int marker = pw_finish(&w, &cut), k = 0;
    for (int i = 0; i < w.n; i++) {
        uint32_t id = 0;
        if (i == marker) {
            pthread_mutex_lock(&g_lock);
            id = cut_id(cut);
            pthread_mutex_unlock(&g_lock);
        } else if (nogil_frame(L, (uintptr_t)w.code[i], w.at[i], &id) != 0)
            return -1;
        if (id) out[k++] = CMH_PYTOKEN | id;
    }
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
    else if (py.layout && (n = walk_nogil(out, max)) >= 0) {
        if (__atomic_load_n(&g_direct, __ATOMIC_RELAXED) == 0 && __atomic_add_fetch(&g_proven, 1, __ATOMIC_RELAXED) >= PY_PROVE &&
            !getenv("CUMEMHIST_TEST_PYSYSCALLS")) /* tests: every read a system call */
            __atomic_store_n(&g_direct, 1, __ATOMIC_RELAXED);
        /* The thread released the GIL around the call: its frames read as they lie, first in both
         * modes, as nothing is waited for (a GIL held elsewhere can take a switch interval, 5 ms,
         * to come back, and a GIL holder waiting on a lock this thread holds would deadlock) */
        if (n) __atomic_add_fetch(&cmh_py_nogil_reads, 1, __ATOMIC_RELAXED);
    } else {
        if (py.layout) {
            __atomic_add_fetch(&cmh_py_refused[CMH_PYREFUSE_LAYOUT], 1, __ATOMIC_RELAXED);
            __atomic_store_n(&g_direct, -1, __ATOMIC_RELAXED); /* not proven, and never plain loads again */
        }
        if (mode == CMH_PYTHON_WAIT && torch_cuda_loaded()) {
            __atomic_store_n(&g_mode, CMH_PYTHON_HELD, __ATOMIC_RELAXED);
            mode = CMH_PYTHON_HELD;
        }
        if (mode != CMH_PYTHON_WAIT) {
            if (!py.layout) __atomic_add_fetch(&cmh_py_refused[CMH_PYREFUSE_NOGIL], 1, __ATOMIC_RELAXED);
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

void cmh_pystack_atfork_prepare(void) { pthread_mutex_lock(&g_lock); }
void cmh_pystack_atfork_parent(void) { pthread_mutex_unlock(&g_lock); }
void cmh_pystack_atfork_child(void)
{
    pthread_mutex_init(&g_lock, NULL);
    g_pid = getpid(); /* the GIL-free read reads this process, not the parent */
}
