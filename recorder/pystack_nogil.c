/*
 * pystack_nogil.c - the Python stack of a thread that released the GIL around the driver call
 * (recorder/pystack.c walks it through the C API when the GIL is held, and owns the frame ids).
 *
 * A thread that released the GIL around the driver call still owns its Python frames: only this thread pushes and pops them, and it is inside our hook, so they cannot
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
 * build gives a refusal, counted (CMH_PYREFUSE_LAYOUT), never a crash of the program.
 *
 * Thread safety: a thread reads only its own frames; the call-site cache has a lock of its own,
 * the frame ids are pystack.c's (pystack_internal.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pystack_internal.h"

typedef struct pylayout {
    int minor;
    uint16_t ts_cframe, cf_current;                   /* tstate->cframe->current_frame */
    uint16_t fr_code, fr_previous, fr_instr, fr_owner; /* _PyInterpreterFrame */
    int8_t owner_generator, owner_cstack;              /* FRAME_OWNED_BY_*; -1: no such owner */
    uint16_t co_filename, co_name, co_linetable, co_firstlineno, co_firsttraceable, co_code;
    uint16_t str_ascii, str_compact; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
} pylayout;

/* what the read checks objects against (from dlsym), and this Python's layout (NULL: none known) */
static struct {
    uintptr_t code_type, unicode_type, bytes_type; /* &PyCode_Type ... */
    const struct pylayout *layout;
} py;

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

int cmh_pynogil_init(void *(*real)(void *, const char *))
{
    py.code_type = (uintptr_t)real(RTLD_DEFAULT, "PyCode_Type");
    py.unicode_type = (uintptr_t)real(RTLD_DEFAULT, "PyUnicode_Type");
    py.bytes_type = (uintptr_t)real(RTLD_DEFAULT, "PyBytes_Type");
    const unsigned long *ver = real(RTLD_DEFAULT, "Py_Version"); /* 3.11+ */
    g_pid = getpid();
    if (sizeof(void *) != 8 || !ver || !py.code_type || !py.unicode_type || !py.bytes_type || (*ver >> 24) != 3) return 0;
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
    return py.layout != NULL;
}
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
 * so an entry only saves the decoding and the hashing).  Plain loads only. */
typedef struct nsite {
    uint64_t key; /* py_site_key(code, lasti) */
    uintptr_t code, file, name, table;
    int32_t lasti, first;
    uint32_t id, flen, nlen, tlen;
    const char *fs, *ns; /* the id's file and function (pystack.c's: never freed) */
    unsigned char *tab; /* the table's first tlen bytes */
} nsite;
static cmh_oatab g_nsites = {NULL, 0, 0, sizeof(nsite)};
static pthread_mutex_t g_nlock = PTHREAD_MUTEX_INITIALIZER; /* over g_nsites */
#define NSITES_MAX 65536

static uint32_t nsite_id(const pylayout *L, uintptr_t code, int lasti, const unsigned char *co)
{
    uintptr_t file = word(co, L->co_filename), name = word(co, L->co_name), table = word(co, L->co_linetable);
    int32_t first = int32(co, L->co_firstlineno);
    nsite e = {0};
    pthread_mutex_lock(&g_nlock);
    uint32_t pos = UINT32_MAX;
    for (nsite *x; (x = cmh_oa_next(&g_nsites, py_site_key(code, lasti), &pos));)
        if (x->code == code && x->lasti == lasti) {
            e = *x;
            break;
        }
    pthread_mutex_unlock(&g_nlock); /* (an entry's strings and table copy are never freed) */
    if (!e.id || e.file != file || e.name != name || e.table != table || e.first != first) return 0;
    const unsigned char *t = (const unsigned char *)table;
    if (word(t, OB_TYPE) != py.bytes_type || (int64_t)word(t, 16) < (int64_t)e.tlen || memcmp(t + 32, e.tab, e.tlen))
        return 0;
    return same_str(L, file, e.fs, e.flen) && same_str(L, name, e.ns, e.nlen) ? e.id : 0;
}

static void nsite_add(const pylayout *L, uintptr_t code, int lasti, const unsigned char *co, uint32_t id, int64_t used)
{
    const char *fs, *ns;
    int32_t line;
    if (used <= 0 || !cmh_pystack_frame(CMH_PYTOKEN | id, &fs, &ns, &line)) return;
    unsigned char *tab = malloc((size_t)used);
    if (!tab) return;
    memcpy(tab, (const unsigned char *)word(co, L->co_linetable) + 32, (size_t)used);
    pthread_mutex_lock(&g_nlock);
    nsite *x = NULL; /* (the table's count read under the lock: another thread may be adding) */
    if (g_nsites.n < NSITES_MAX && cmh_oa_reserve(&g_nsites, g_nsites.n + 1) == 0) {
        x = cmh_oa_add(&g_nsites, py_site_key(code, lasti));
        *x = (nsite){x->key, code, word(co, L->co_filename), word(co, L->co_name), word(co, L->co_linetable), lasti,
                     int32(co, L->co_firstlineno), id, (uint32_t)strlen(fs), (uint32_t)strlen(ns), (uint32_t)used,
                     fs, ns, tab};
    }
    pthread_mutex_unlock(&g_nlock);
    if (!x) free(tab);
}

/* The id of the frame at byte offset lasti (-1: none) of the code object at `code` (an address
 * good for this capture only: the thread's frame holds the object), read without the GIL, made on
 * first sight of its (file, name, line); -1 when the object is not what the layout says */
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
    *id = cmh_py_content_id(file, name, line);
    if (*id && direct && lasti >= 0) nsite_add(L, code, lasti, co, *id, used);
    if (!*id) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    return 0;
}

/* The Python stack of the thread whose state is ts, without the GIL (py.layout known): its frames from
 * tstate->cframe->current_frame along `previous`, skipping those CPython skips (the C stack's shim
 * frames, frames not yet past their first traceable instruction), kept as pystack.c's walk keeps them.
 * The frames written, or -1 when something read was not as the layout says. */
static int walk_nogil(uintptr_t ts, uintptr_t *out, int max)
{
    const pylayout *L = py.layout;
    uintptr_t cf, f;
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
        if (i == marker)
            id = cmh_py_cut_id(cut);
        else if (nogil_frame(L, (uintptr_t)w.code[i], w.at[i], &id) != 0)
            return -1;
        if (id) out[k++] = CMH_PYTOKEN | id;
    }
    return k;
}

int cmh_pynogil_walk(uintptr_t tstate, uintptr_t *out, int max)
{
    int n = walk_nogil(tstate, out, max);
    if (n < 0)
        __atomic_store_n(&g_direct, -1, __ATOMIC_RELAXED); /* not proven, and never plain loads again */
    else if (__atomic_load_n(&g_direct, __ATOMIC_RELAXED) == 0 && __atomic_add_fetch(&g_proven, 1, __ATOMIC_RELAXED) >= PY_PROVE &&
             !getenv("CUMEMHIST_TEST_PYSYSCALLS")) /* tests: every read a system call */
        __atomic_store_n(&g_direct, 1, __ATOMIC_RELAXED);
    return n;
}

void cmh_pynogil_atfork_prepare(void) { pthread_mutex_lock(&g_nlock); }
void cmh_pynogil_atfork_parent(void) { pthread_mutex_unlock(&g_nlock); }
void cmh_pynogil_atfork_child(void)
{
    pthread_mutex_init(&g_nlock, NULL);
    g_pid = getpid(); /* the read reads this process, not the parent */
}
