/*
 * stacks.c - native stacks at allocation time, interned so each distinct stack is stored once.
 *
 * Capture is libunwind's unw_backtrace (a per-thread cached unwinder, ~10 ns a frame, and it
 * walks through NVIDIA's frame-pointer-less code).  libunwind is dlopen'ed RTLD_LOCAL and never
 * linked: linking it would put its unversioned _Unwind_* exports in the global scope, where they
 * capture the host's C++ exception handling (PyTorch's among them).  Without libunwind, glibc's
 * backtrace() is the fallback.
 *
 * A Python thread's frames (pystack.c) are spliced in as pseudo PCs.
 *
 * Interning: 16 shards keyed by the stack's hash, each under its own lock, each with an arena of
 * PCs that is only ever appended to, so a stack id stays valid (and its PCs readable) for the
 * life of the process.  Ids are dense from 1; 0 means "no stack".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <gnu/libc-version.h>
#include <libunwind.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oatab.h"

typedef int (*unw_backtrace_fn)(void **, int);

static unw_backtrace_fn g_unw;
static int g_unw_tried;
static pthread_once_t g_unw_once = PTHREAD_ONCE_INIT;

static void *g_bt_base; /* the module that interposes backtrace(), when it is not libc */

static int in_base(void *pc, void *base)
{
    Dl_info d;
    return dladdr(pc, &d) && d.dli_fbase == base;
}

static void load_unwinder(void)
{
    /* CUMEMHIST_UNWINDER=glibc keeps libunwind out (ThreadSanitizer's runtime and libunwind's
     * per-thread caches do not get along at thread exit) */
    const char *u = getenv("CUMEMHIST_UNWINDER");
    void *h = u && !strcmp(u, "glibc") ? NULL : dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        void *(*real)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
        g_unw = (unw_backtrace_fn)(real ? real(h, "unw_backtrace") : NULL);
    }
    /* The typedef must agree with the header we build against. */
    __typeof__(&unw_backtrace) check = g_unw;
    (void)check;
    if (!g_unw && !(u && !strcmp(u, "glibc"))) cmh_log("libunwind.so.8 not found; stacks use glibc backtrace() (slower)");
    if (!g_unw) {
        /* A sanitizer runtime interposes backtrace(): its frames lead the stack and are not the
         * program's, so they are dropped with ours (libc's own backtrace adds none). */
        Dl_info bt, lc;
        if (dladdr((void *)(uintptr_t)&backtrace, &bt) && dladdr((void *)(uintptr_t)&gnu_get_libc_version, &lc) &&
            bt.dli_fbase != lc.dli_fbase)
            g_bt_base = bt.dli_fbase;
    }
    __atomic_store_n(&g_unw_tried, 1, __ATOMIC_RELEASE);
}

void cmh_stacks_init(void) { pthread_once(&g_unw_once, load_unwinder); }

#define NSH 16
#define ARENA_PCS (1u << 16)
#define ID_CHUNK_BITS 16
#define ID_CHUNKS 4096

typedef struct stk {
    uint64_t hash; /* the key (oatab.h): never 0 */
    const uintptr_t *pcs;
    uint32_t depth, id;
} stk;

typedef struct sshard {
    pthread_mutex_t lock;
    cmh_oatab t; /* of stk */
    uintptr_t *arena;
    uint32_t arena_used;
} sshard;

typedef struct idref {
    const uintptr_t *pcs;
    uint32_t depth;
} idref;

static sshard g_sh[NSH] = {
    [0 ... NSH - 1] = {PTHREAD_MUTEX_INITIALIZER, {NULL, 0, 0, sizeof(stk)}, NULL, 0},
};
static idref *g_ids[ID_CHUNKS];
static pthread_mutex_t g_id_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_next_id = 1;

static uint64_t hash_pcs(void *const *pcs, int n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uintptr_t)pcs[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

static uint32_t new_id(const uintptr_t *pcs, uint32_t depth)
{
    pthread_mutex_lock(&g_id_lock);
    uint32_t id = g_next_id;
    uint32_t chunk = id >> ID_CHUNK_BITS;
    if (chunk >= ID_CHUNKS) id = 0;
    else if (!g_ids[chunk] && !(g_ids[chunk] = calloc(1u << ID_CHUNK_BITS, sizeof(idref)))) id = 0;
    if (id) {
        g_ids[chunk][id & ((1u << ID_CHUNK_BITS) - 1)] = (idref){pcs, depth};
        g_next_id++;
    }
    pthread_mutex_unlock(&g_id_lock);
    return id;
}

static uint32_t intern(void *const *pcs, int n)
{
    uint64_t h = hash_pcs(pcs, n);
    sshard *s = &g_sh[h >> 60];
    pthread_mutex_lock(&s->lock);
    uint32_t id = 0, pos = UINT32_MAX;
    for (stk *e; (e = cmh_oa_next(&s->t, h, &pos));)
        if (e->depth == (uint32_t)n && memcmp(e->pcs, pcs, (size_t)n * sizeof(void *)) == 0) {
            id = e->id;
            goto out;
        }
    if (cmh_oa_reserve(&s->t, s->t.n + 1) != 0) goto out; /* the add below cannot fail then */
    if (!s->arena || s->arena_used + (uint32_t)n > ARENA_PCS) {
        uintptr_t *a = malloc(ARENA_PCS * sizeof *a); /* the old arena stays: ids point into it */
        if (!a) goto out;
        s->arena = a;
        s->arena_used = 0;
    }
    uintptr_t *dst = s->arena + s->arena_used;
    memcpy(dst, pcs, (size_t)n * sizeof(void *));
    id = new_id(dst, (uint32_t)n);
    if (!id) goto out;
    s->arena_used += (uint32_t)n;
    stk *e = cmh_oa_add(&s->t, h);
    e->pcs = dst;
    e->depth = (uint32_t)n;
    e->id = id;
    cmh_flight_stack(id, dst, (uint32_t)n);
out:
    pthread_mutex_unlock(&s->lock);
    if (!id) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    return id;
}

/* Python frames (pystack.c) go in where the interpreter's own frames begin, counting out from
 * the allocation, as py-spy --native shows them; after the native ones when none is seen.  buf
 * has room for CMH_MAX_STACK frames. */
static int with_python(void **buf, int n, int frames)
{
    uintptr_t py[CMH_MAX_FRAMES];
    int np = cmh_pystack_capture(py, frames < CMH_MAX_FRAMES ? frames : CMH_MAX_FRAMES);
    if (np <= 0) return n;
    int at = 0;
    while (at < n && !cmh_pystack_in_interp((uintptr_t)buf[at])) at++;
    memmove(buf + at + np, buf + at, (size_t)(n - at) * sizeof *buf);
    for (int i = 0; i < np; i++) buf[at + i] = (void *)py[i];
    return n + np;
}

uint32_t cmh_stack_capture(void)
{
    if (CMH_UNLIKELY(!__atomic_load_n(&g_unw_tried, __ATOMIC_ACQUIRE))) cmh_stacks_init();
    void *buf[CMH_MAX_STACK + 8];
    int frames = __atomic_load_n(&cmh_cfg.max_frames, __ATOMIC_RELAXED);
    int max = frames + 4; /* room for our own frames, dropped below */
    if (max > CMH_MAX_FRAMES + 8) max = CMH_MAX_FRAMES + 8;
    int n = g_unw ? g_unw(buf, max) : backtrace(buf, max);
    int skip = 0;
    while (skip < n && (cmh_in_own_module(buf[skip]) || (g_bt_base && in_base(buf[skip], g_bt_base)))) skip++;
    n -= skip;
    if (n > frames) n = frames;
    if (n < 0) n = 0;
    n = with_python(buf + skip, n, frames);
    if (n <= 0) return 0;
    return intern(buf + skip, n);
}

uint32_t cmh_stack_get(uint32_t id, const uintptr_t **pcs)
{
    uint32_t chunk = id >> ID_CHUNK_BITS;
    if (!id || chunk >= ID_CHUNKS) return 0;
    pthread_mutex_lock(&g_id_lock);
    idref r = g_ids[chunk] && id < g_next_id ? g_ids[chunk][id & ((1u << ID_CHUNK_BITS) - 1)] : (idref){NULL, 0};
    pthread_mutex_unlock(&g_id_lock);
    *pcs = r.pcs;
    return r.depth;
}

void cmh_stacks_each(void (*fn)(uint32_t id, const uintptr_t *pcs, uint32_t depth))
{
    pthread_mutex_lock(&g_id_lock);
    uint32_t n = g_next_id;
    pthread_mutex_unlock(&g_id_lock);
    for (uint32_t id = 1; id < n; id++) {
        const uintptr_t *pcs;
        uint32_t d = cmh_stack_get(id, &pcs);
        if (d) fn(id, pcs, d);
    }
}

/* fork(): hold every lock across it so the child inherits consistent tables, then let the
 * child re-create the locks (the stacks themselves stay valid there). */
void cmh_stacks_atfork_prepare(void)
{
    for (int i = 0; i < NSH; i++) pthread_mutex_lock(&g_sh[i].lock);
    pthread_mutex_lock(&g_id_lock);
}

void cmh_stacks_atfork_parent(void)
{
    pthread_mutex_unlock(&g_id_lock);
    for (int i = NSH - 1; i >= 0; i--) pthread_mutex_unlock(&g_sh[i].lock);
}

void cmh_stacks_atfork_child(void)
{
    pthread_mutex_init(&g_id_lock, NULL);
    for (int i = 0; i < NSH; i++) pthread_mutex_init(&g_sh[i].lock, NULL);
}
