/*
 * stacks.c - native stacks at allocation time, interned so each distinct stack is stored once.
 *
 * Capture is the recorder's own walk (unwind.c: frame pointers and the modules' .eh_frame rules,
 * cached per PC, every step checked), with libunwind's unw_backtrace (~7 ns a frame) for every
 * stack the walk cannot answer for.  CUMEMHIST_UNWINDER chooses (docs/RECORDER.md):
 *   fast (default)  the walk, libunwind where it gives up (glibc's backtrace() without libunwind)
 *   fast-glibc      the walk, glibc's backtrace() where it gives up (libunwind never loaded)
 *   libunwind       libunwind only;  glibc  glibc's backtrace() only
 *   check           both the walk and libunwind for every stack; libunwind's is kept, every
 *                   difference is logged and counted (a summary line at exit)
 * A walk already made is replayed while the stack words it read still hold (unwind.c), with the
 * stack id it was interned as.
 *
 * libunwind is dlopen'ed RTLD_LOCAL and never linked: linking it would put its unversioned
 * _Unwind_* exports in the global scope, where they capture the host's C++ exception handling
 * (PyTorch's among them).  Without libunwind, glibc's backtrace() is the fallback.
 *
 * A Python thread's frames (pystack.c) are spliced in as pseudo PCs.
 *
 * Interning: 16 shards keyed by the stack's hash, each under its own lock, each with an arena of
 * PCs that is only ever appended to, so a stack id stays valid (and its PCs readable) for the
 * life of the process.  Ids are dense from 1; 0 means "no stack".  In front of it each thread
 * keeps a direct-mapped cache from the hash of the raw PCs to (id, the interned PCs): a stack the
 * thread has seen is compared against its interned copy, PC for PC, and costs no lock
 * (CUMEMHIST_STACK_CACHE=0 turns it off, for measurements).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <libunwind.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oatab.h"

typedef int (*unw_backtrace_fn)(void **, int);

static unw_backtrace_fn g_unw;
static int g_unw_tried;
enum { W_FAST, W_FAST_GLIBC, W_LIBUNWIND, W_GLIBC, W_CHECK };
static int g_walk = W_FAST;   /* set once, before g_unw_tried is published */
static int g_id_cache = 1, g_memo = 1;
static uint64_t g_chk[5];     /* check: compared, walked, fell back, differed, of the walked: remembered */
static pthread_once_t g_unw_once = PTHREAD_ONCE_INIT;

static void *g_bt_base; /* the module that interposes backtrace(), when it is not libc */

/* ---- the module generation (internal.h) ---- */
unsigned cmh_mod_gen;
static unsigned long long g_subs_seen = ~0ull; /* dlpi_subs at the helper's last look; ~0: none yet */
static int g_unloaded;                           /* an object was unloaded: see slow_walk */

static int first_subs(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_subs;
    return 1;
}

unsigned long long cmh_modules_subs(void)
{
    unsigned long long subs = 0;
    cmh_dl_iterate(first_subs, &subs);
    return subs;
}

void cmh_modules_unloaded(unsigned long long subs)
{
    __atomic_store_n(&g_subs_seen, subs, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&g_unloaded, __ATOMIC_ACQUIRE)) {
        void *one[2];
        (void)backtrace(one, 2); /* loads libgcc_s now, not in a signal handler's capture */
        __atomic_store_n(&g_unloaded, 1, __ATOMIC_RELEASE);
    }
    __atomic_add_fetch(&cmh_mod_gen, 1, __ATOMIC_RELEASE);
}

void cmh_modules_poll(void)
{
    unsigned long long subs = cmh_modules_subs(), was = __atomic_exchange_n(&g_subs_seen, subs, __ATOMIC_ACQ_REL);
    if (was != subs && was != ~0ull) cmh_modules_unloaded(subs);
}

static int in_base(void *pc, void *base)
{
    Dl_info d;
    return dladdr(pc, &d) && d.dli_fbase == base;
}

static void load_unwinder(void)
{
    /* CUMEMHIST_UNWINDER=glibc or fast-glibc keeps libunwind out (ThreadSanitizer's runtime and
     * libunwind's per-thread caches do not get along at thread exit) */
    const char *u = getenv("CUMEMHIST_UNWINDER");
    if (u && *u) {
        if (!strcmp(u, "glibc")) g_walk = W_GLIBC;
        else if (!strcmp(u, "fast-glibc")) g_walk = W_FAST_GLIBC;
        else if (!strcmp(u, "libunwind")) g_walk = W_LIBUNWIND;
        else if (!strcmp(u, "check")) g_walk = W_CHECK;
        else if (strcmp(u, "fast") && strcmp(u, "auto")) cmh_log("CUMEMHIST_UNWINDER=%s: not one of fast, fast-glibc, libunwind, glibc, check; fast", u);
    }
    const char *sc = getenv("CUMEMHIST_STACK_CACHE");
    if (sc && !strcmp(sc, "0")) g_id_cache = 0;
    const char *sm = getenv("CUMEMHIST_WALK_MEMO");
    if (sm && !strcmp(sm, "0")) g_memo = 0;
    int no_unw = g_walk == W_GLIBC || g_walk == W_FAST_GLIBC;
    void *h = no_unw ? NULL : dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        void *(*real)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
        g_unw = (unw_backtrace_fn)(real ? real(h, "unw_backtrace") : NULL);
    }
    /* The typedef must agree with the header we build against. */
    __typeof__(&unw_backtrace) check = g_unw;
    (void)check;
    if (!g_unw && !no_unw) cmh_log("libunwind.so.8 not found; stacks use glibc backtrace() (slower)");
    if (!g_unw && g_walk == W_CHECK) g_walk = W_FAST;
    {
        /* A sanitizer runtime interposes backtrace(): its frames lead the stack and are not the
         * program's, so they are dropped with ours (libc's own backtrace adds none).  Looked up
         * with libunwind too: backtrace() walks for it once an object was unloaded (slow_walk). */
        Dl_info bt, lc;
        if (dladdr((void *)(uintptr_t)&backtrace, &bt) && dladdr((void *)(uintptr_t)&gnu_get_libc_version, &lc) &&
            bt.dli_fbase != lc.dli_fbase)
            g_bt_base = bt.dli_fbase;
    }
    if (__atomic_load_n(&g_subs_seen, __ATOMIC_RELAXED) == ~0ull) {
        unsigned long long was = ~0ull;
        __atomic_compare_exchange_n(&g_subs_seen, &was, cmh_modules_subs(), 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
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
    unsigned gen; /* cmh_mod_gen at its capture: the same PCs under another module map are another stack */
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
    unsigned gen;
} idref;

static sshard g_sh[NSH] = {
    [0 ... NSH - 1] = {PTHREAD_MUTEX_INITIALIZER, {NULL, 0, 0, sizeof(stk)}, NULL, 0},
};
static idref *g_ids[ID_CHUNKS];
static pthread_mutex_t g_id_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_next_id = 1;

/* Four independent lanes, folded at the end: a stack's PCs are hashed at the speed of the loads,
 * not of a chain of multiplies. */
static uint64_t hash_pcs(void *const *pcs, int n)
{
    uint64_t h[4] = {0x9E3779B97F4A7C15ull ^ (uint64_t)n, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x27D4EB2F165667C5ull};
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) h[k] = (h[k] ^ (uint64_t)(uintptr_t)pcs[i + k]) * 0xff51afd7ed558ccdull;
    for (int k = 0; i < n; i++, k++) h[k] = (h[k] ^ (uint64_t)(uintptr_t)pcs[i]) * 0xff51afd7ed558ccdull;
    uint64_t r = h[0];
    for (int k = 1; k < 4; k++) {
        r ^= h[k] ^ (h[k] >> 29);
        r *= 0xc4ceb9fe1a85ec53ull;
    }
    r ^= r >> 32;
    return r ? r : 1;
}

static uint32_t new_id(const uintptr_t *pcs, uint32_t depth, unsigned gen)
{
    pthread_mutex_lock(&g_id_lock);
    uint32_t id = g_next_id;
    uint32_t chunk = id >> ID_CHUNK_BITS;
    if (chunk >= ID_CHUNKS) id = 0;
    else if (!g_ids[chunk] && !(g_ids[chunk] = calloc(1u << ID_CHUNK_BITS, sizeof(idref)))) id = 0;
    if (id) {
        g_ids[chunk][id & ((1u << ID_CHUNK_BITS) - 1)] = (idref){pcs, depth, gen};
        g_next_id++;
    }
    pthread_mutex_unlock(&g_id_lock);
    return id;
}

static uint32_t intern(void *const *pcs, int n, uint64_t h, unsigned gen, const uintptr_t **stored)
{
    sshard *s = &g_sh[h >> 60];
    pthread_mutex_lock(&s->lock);
    uint32_t id = 0, pos = UINT32_MAX;
    for (stk *e; (e = cmh_oa_next(&s->t, h, &pos));)
        if (e->depth == (uint32_t)n && e->gen == gen && memcmp(e->pcs, pcs, (size_t)n * sizeof(void *)) == 0) {
            id = e->id;
            *stored = e->pcs;
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
    id = new_id(dst, (uint32_t)n, gen);
    if (!id) goto out;
    s->arena_used += (uint32_t)n;
    stk *e = cmh_oa_add(&s->t, h);
    e->pcs = dst;
    e->depth = (uint32_t)n;
    e->id = id;
    e->gen = gen;
    *stored = dst;
    cmh_flight_stack(id, dst, (uint32_t)n);
out:
    pthread_mutex_unlock(&s->lock);
    if (!id) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    return id;
}

/* Python frames (pystack.c) go in where the interpreter's own frames begin, counting out from
 * the allocation, as py-spy --native shows them; after the native ones when none is seen.  buf
 * has room for CMH_MAX_STACK frames. */
static int with_python(void **buf, int n, const uintptr_t *py, int np)
{
    if (np <= 0) return n;
    int at = 0;
    while (at < n && !cmh_pystack_in_interp((uintptr_t)buf[at])) at++;
    memmove(buf + at + np, buf + at, (size_t)(n - at) * sizeof *buf);
    for (int i = 0; i < np; i++) buf[at + i] = (void *)py[i];
    return n + np;
}

/* ---- per thread: the walk's rule cache and the stack-id cache ---- */
#define IDC_BITS 8
typedef struct idc {
    uint64_t h;
    const uintptr_t *pcs; /* the interned copy: never moves, never changes */
    uint32_t n, id;
} idc;

typedef struct tstate {
    struct tstate *next, **pprev; /* on g_threads: reachable (LeakSanitizer) after a fork */
    volatile int busy;            /* a capture is under way: a signal handler's must not touch this */
    idc ids[1u << IDC_BITS];
    cmh_unw_cache unw;
} tstate;

static __thread tstate *t_state __attribute__((tls_model("initial-exec")));
static __thread int t_state_failed __attribute__((tls_model("initial-exec")));
static tstate *g_threads;
static pthread_mutex_t g_threads_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_state_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void state_gone(void *p)
{
    tstate *t = p;
    pthread_mutex_lock(&g_threads_lock);
    *t->pprev = t->next;
    if (t->next) t->next->pprev = t->pprev;
    pthread_mutex_unlock(&g_threads_lock);
    if (t_state == t) t_state = NULL;
    free(t);
}

static void make_key(void) { (void)pthread_key_create(&g_state_key, state_gone); }

static tstate *state_new(void)
{
    if (t_state_failed) return NULL;
    pthread_once(&g_key_once, make_key);
    tstate *t = calloc(1, sizeof *t);
    if (!t || cmh_unwind_stack_bounds(&t->unw.stack_lo, &t->unw.stack_hi) != 0) {
        free(t);
        t_state_failed = 1;
        return NULL;
    }
    pthread_mutex_lock(&g_threads_lock);
    t->next = g_threads;
    t->pprev = &g_threads;
    if (g_threads) g_threads->pprev = &t->next;
    g_threads = t;
    pthread_mutex_unlock(&g_threads_lock);
    (void)pthread_setspecific(g_state_key, t);
    t_state = t;
    return t;
}

/* The stack walked by libunwind, or glibc's backtrace(), as chosen at start-up.  libunwind's
 * unw_backtrace keeps each PC's rule in a per-thread cache that nothing empties (not even
 * unw_flush_cache), so once an object was unloaded, code mapped at its address would be walked
 * by the old code's rules (tests/reload_test.sh saw it): from then on glibc's backtrace()
 * (libgcc's unwinder, which finds each PC's table afresh) walks instead. */
static int slow_walk(void **buf, int max)
{
    return g_unw && g_walk != W_FAST_GLIBC && !__atomic_load_n(&g_unloaded, __ATOMIC_RELAXED) ? g_unw(buf, max)
                                                                                              : backtrace(buf, max);
}

/* This thread's rules, remembered walks and stack ids, from before an object was unloaded:
 * forgotten.  The ids go too: a stack is its PCs under one module map (its generation), and the
 * same PCs after the unload may be other code at the same address (the dump names each stack
 * by the modules mapped when it was captured: symbols.c). */
static __attribute__((noinline)) void caches_reset(tstate *t, unsigned gen)
{
    memset(t->unw.slot, 0, sizeof t->unw.slot);
    memset(t->ids, 0, sizeof t->ids);
    for (int s = 0; s < CMH_UNW_MEMO_SETS; s++)
        for (int w = 0; w < CMH_UNW_MEMO_WAYS; w++) t->unw.memo[s][w].rsp0 = 0;
    t->unw.gen = gen;
}

static int own_frames(void *const *buf, int n)
{
    int skip = 0;
    while (skip < n && (cmh_in_own_module(buf[skip]) || (g_bt_base && in_base(buf[skip], g_bt_base)))) skip++;
    return skip;
}

static void check_walk(void **slow, int ns, tstate *t, int max)
{
    void *fast[CMH_MAX_STACK + 8];
    cmh_unw_memo *m = NULL;
    int nf = t ? cmh_unwind_walk(fast, max, &t->unw, g_memo ? &m : NULL) : -1;
    __atomic_add_fetch(&g_chk[0], 1, __ATOMIC_RELAXED);
    if (nf < 0) {
        __atomic_add_fetch(&g_chk[2], 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&g_chk[1], 1, __ATOMIC_RELAXED);
    if (m && m->skip != UINT32_MAX) { /* a remembered walk, as the default mode would take it */
        memcpy(fast, m->pcs, (size_t)nf * sizeof *fast);
        __atomic_add_fetch(&g_chk[4], 1, __ATOMIC_RELAXED);
    }
    if (m) m->skip = 0;
    int sf = own_frames(fast, nf), ss = own_frames(slow, ns);
    /* the two walks start at different depths inside the recorder, so where one stopped at max
     * the other may have fewer or more of the program's frames: compare what both have */
    int both = nf - sf < ns - ss ? nf - sf : ns - ss;
    int differ = nf - sf != ns - ss && (nf < max && ns < max);
    for (int i = 0; i < both && !differ; i++) differ = fast[sf + i] != slow[ss + i];
    if (differ) {
        uint64_t k = __atomic_add_fetch(&g_chk[3], 1, __ATOMIC_RELAXED);
        if (k <= 5) {
            char line[900];
            size_t o = (size_t)snprintf(line, sizeof line, "unwind check: stacks differ (fast %d, libunwind %d frames):", nf - sf, ns - ss);
            for (int i = 0; i < (nf - sf > ns - ss ? nf - sf : ns - ss) && o < sizeof line - 40; i++)
                o += (size_t)snprintf(line + o, sizeof line - o, " %p/%p", i < nf - sf ? fast[sf + i] : NULL,
                                      i < ns - ss ? slow[ss + i] : NULL);
            cmh_log("%s", line);
        }
    }
}

__attribute__((destructor)) static void check_summary(void)
{
    if (g_walk == W_CHECK && __atomic_load_n(&g_chk[0], __ATOMIC_RELAXED))
        cmh_log("unwind check: %llu stacks, %llu walked, %llu fell back, %llu differed; %llu walks remembered",
                (unsigned long long)g_chk[0], (unsigned long long)g_chk[1], (unsigned long long)g_chk[2],
                (unsigned long long)g_chk[3], (unsigned long long)g_chk[4]);
}

static uint32_t capture(tstate *t, void **buf, int frames, int max, unsigned gen);

uint32_t cmh_stack_capture(void)
{
    if (CMH_UNLIKELY(!__atomic_load_n(&g_unw_tried, __ATOMIC_ACQUIRE))) cmh_stacks_init();
    void *buf[CMH_MAX_STACK + 8];
    int frames = __atomic_load_n(&cmh_cfg.max_frames, __ATOMIC_RELAXED);
    int max = frames + 4; /* room for our own frames, dropped below */
    if (max > CMH_MAX_FRAMES + 8) max = CMH_MAX_FRAMES + 8;
    tstate *t = t_state;
    if (CMH_UNLIKELY(!t)) t = state_new();
    if (t && CMH_UNLIKELY(t->busy)) t = NULL; /* in a signal handler that interrupted a capture */
    unsigned gen = __atomic_load_n(&cmh_mod_gen, __ATOMIC_RELAXED); /* the one load the generation costs */
    if (t) {
        t->busy = 1;
        if (CMH_UNLIKELY(t->unw.gen != gen)) caches_reset(t, gen);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint32_t id = capture(t, buf, frames, max, gen);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (t) t->busy = 0;
    return id;
}

/* The stack, walked, cut and interned; t (this thread's caches) may be NULL. */
static uint32_t capture(tstate *t, void **buf, int frames, int max, unsigned gen)
{
    int n = -1;
    cmh_unw_memo *m = NULL;
    if (t && (g_walk == W_FAST || g_walk == W_FAST_GLIBC)) n = cmh_unwind_walk(buf, max, &t->unw, g_memo ? &m : NULL);
    int replayed = m && m->skip != UINT32_MAX; /* a remembered walk: its PCs are m->pcs */
    if (n < 0) {
        n = slow_walk(buf, max);
        if (g_walk == W_CHECK) check_walk(buf, n, t, max);
    }
    uintptr_t py[CMH_MAX_FRAMES];
    int np = cmh_pystack_capture(py, frames < CMH_MAX_FRAMES ? frames : CMH_MAX_FRAMES);
    if (np < 0) np = 0;
    if (replayed && m->id && np == m->npy && memcmp(py, m->py, (size_t)np * sizeof *py) == 0) return m->id;
    if (replayed) memcpy(buf, m->pcs, (size_t)n * sizeof *buf);
    int skip = replayed ? (int)m->skip : own_frames(buf, n);
    if (m) m->skip = (uint32_t)skip;
    n -= skip;
    if (n > frames) n = frames;
    if (n < 0) n = 0;
    n = with_python(buf + skip, n, py, np);
    if (n <= 0) return 0;
    void **pcs = buf + skip;
    uint64_t h = hash_pcs(pcs, n);
    idc *c = t && g_id_cache ? &t->ids[h >> (64 - IDC_BITS)] : NULL;
    uint32_t id = 0;
    if (c && c->h == h && c->n == (uint32_t)n && memcmp(c->pcs, pcs, (size_t)n * sizeof *pcs) == 0) id = c->id;
    else {
        const uintptr_t *stored = NULL;
        id = intern(pcs, n, h, gen, &stored);
        if (c && id) *c = (idc){h, stored, (uint32_t)n, id};
    }
    if (m && np <= CMH_UNW_MEMO_PY) {
        memcpy(m->py, py, (size_t)np * sizeof *py);
        m->npy = np;
        m->id = id;
    } else if (m) m->id = 0;
    return id;
}

uint32_t cmh_stack_get(uint32_t id, const uintptr_t **pcs, unsigned *gen)
{
    uint32_t chunk = id >> ID_CHUNK_BITS;
    if (!id || chunk >= ID_CHUNKS) return 0;
    pthread_mutex_lock(&g_id_lock);
    idref r = g_ids[chunk] && id < g_next_id ? g_ids[chunk][id & ((1u << ID_CHUNK_BITS) - 1)] : (idref){NULL, 0, 0};
    pthread_mutex_unlock(&g_id_lock);
    *pcs = r.pcs;
    if (gen) *gen = r.gen;
    return r.depth;
}

void cmh_stacks_each(void (*fn)(uint32_t id, const uintptr_t *pcs, uint32_t depth))
{
    pthread_mutex_lock(&g_id_lock);
    uint32_t n = g_next_id;
    pthread_mutex_unlock(&g_id_lock);
    for (uint32_t id = 1; id < n; id++) {
        const uintptr_t *pcs;
        uint32_t d = cmh_stack_get(id, &pcs, NULL);
        if (d) fn(id, pcs, d);
    }
}

/* fork(): hold every lock across it so the child inherits consistent tables, then let the
 * child re-create the locks (the stacks themselves stay valid there). */
void cmh_stacks_atfork_prepare(void)
{
    for (int i = 0; i < NSH; i++) pthread_mutex_lock(&g_sh[i].lock);
    pthread_mutex_lock(&g_id_lock);
    pthread_mutex_lock(&g_threads_lock);
}

void cmh_stacks_atfork_parent(void)
{
    pthread_mutex_unlock(&g_threads_lock);
    pthread_mutex_unlock(&g_id_lock);
    for (int i = NSH - 1; i >= 0; i--) pthread_mutex_unlock(&g_sh[i].lock);
}

void cmh_stacks_atfork_child(void)
{
    pthread_mutex_init(&g_id_lock, NULL);
    pthread_mutex_init(&g_threads_lock, NULL);
    for (int i = 0; i < NSH; i++) pthread_mutex_init(&g_sh[i].lock, NULL);
}
