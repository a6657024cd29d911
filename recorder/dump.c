/*
 * dump.c - snapshots of the recorder's state, and everything that asks for one.
 *
 * Triggers: cmh_dump_snapshot() (the API), process exit (atexit), SIGUSR1 (the handler only posts
 * a semaphore; a helper thread started on first use of the driver does the dump, never the
 * handler), and the first out-of-memory result (dumped in the failing thread, which holds no
 * recorder lock there).  SIGUSR2 drops a mark ("SIGUSR2 #n") into every device's trace, from the
 * same helper thread: step boundaries for a program that cannot call cmh_mark.
 * A process that never touched a hooked entry point writes nothing.
 *
 * A dump copies the rings and live segments under their locks, then symbolizes each distinct
 * PC once and writes PATH.tmp.PID, renamed over PATH: a reader never sees a partial file and an
 * earlier snapshot is never lost to a failed write.  When CUMEMHIST_MANIFEST names a file, each
 * written path is appended to it so `cumemhist record` can say which files appeared.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define CMH_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t g_dump_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_start_ns;
static sem_t g_sig_sem;
static int g_sig_installed;
static volatile int g_helper_started;
static volatile int g_oom_dumped;

typedef struct stack_ctx {
    cmh_snapshot *s;
    cmh_symbolizer *z;
    uint32_t *map; /* recorder stack id -> model stack id + 1 */
    uint32_t cap;
    int failed;
} stack_ctx;

static uint32_t map_stack(uint32_t rec, void *arg)
{
    stack_ctx *c = arg;
    if (rec >= c->cap) {
        uint32_t nc = c->cap ? c->cap : 1024;
        while (nc <= rec) nc *= 2;
        uint32_t *nm = realloc(c->map, (size_t)nc * sizeof *nm);
        if (!nm) {
            c->failed = 1;
            return 0;
        }
        memset(nm + c->cap, 0, (size_t)(nc - c->cap) * sizeof *nm);
        c->map = nm;
        c->cap = nc;
    }
    if (c->map[rec]) return c->map[rec] - 1;
    const uintptr_t *pcs;
    uint32_t n = cmh_stack_get(rec, &pcs);
    uint32_t ids[CMH_MAX_FRAMES];
    if (n > CMH_MAX_FRAMES) n = CMH_MAX_FRAMES;
    for (uint32_t i = 0; i < n; i++)
        if (cmh_symbolize(c->z, pcs[i], 1, &ids[i]) != CMH_OK) {
            c->failed = 1;
            return 0;
        }
    uint32_t id = 0;
    if (cmh_snapshot_add_stack(c->s, ids, n, &id) != CMH_OK) c->failed = 1;
    c->map[rec] = id + 1;
    return id;
}

static void fill_meta(cmh_snapshot *s)
{
    s->source = CMH_SRC_RECORDER;
    s->pid = getpid();
    s->start_time_ns = g_start_ns;
    s->dump_time_ns = cmh_now_ns();
    s->opt_enabled = (uint8_t)cmh_cfg.enabled;
    s->opt_context = (uint8_t)cmh_cfg.context;
    s->opt_max_entries = cmh_cfg.max_entries;
    s->opt_max_frames = cmh_cfg.max_frames;
    s->lost_events = __atomic_load_n(&cmh_lost, __ATOMIC_RELAXED);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    cmh_strtab_intern(&s->strings, host, strlen(host), &s->hostname);
    char cmd[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, cmd, sizeof cmd - 1) : 0;
    if (fd >= 0) close(fd);
    if (n < 0) n = 0;
    while (n > 0 && cmd[n - 1] == 0) n--;
    for (ssize_t i = 0; i < n; i++)
        if (cmd[i] == 0) cmd[i] = ' ';
    cmh_strtab_intern(&s->strings, cmd, (size_t)n, &s->cmdline);
}

static void note_in_manifest(const char *path)
{
    const char *m = getenv("CUMEMHIST_MANIFEST");
    if (!m || !*m) return;
    char abs[PATH_MAX + 4200];
    if (!realpath(path, abs)) snprintf(abs, sizeof abs, "%s", path);
    size_t l = strlen(abs);
    abs[l++] = '\n';
    int fd = open(m, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, abs, l); /* one short O_APPEND write: lines from many processes never interleave */
    (void)w;
    close(fd);
}

static int do_dump(const char *path, const char *why)
{
    pthread_mutex_lock(&g_dump_lock);
    char out[4200];
    int rc;
    if (path) snprintf(out, sizeof out, "%s", path);
    else if (cmh_config_output_path(cmh_cfg.output, out, sizeof out) != 0) {
        cmh_log("output path pattern too long: %s", cmh_cfg.output);
        pthread_mutex_unlock(&g_dump_lock);
        return CMH_EINVAL;
    }
    cmh_snapshot s;
    if (cmh_snapshot_init(&s) != CMH_OK) {
        pthread_mutex_unlock(&g_dump_lock);
        return CMH_ENOMEM;
    }
    fill_meta(&s);
    stack_ctx c = {&s, cmh_symbolizer_new(&s), NULL, 0, 0};
    rc = c.z ? cmh_hist_export(&s, map_stack, &c) : CMH_ENOMEM;
    if (rc == CMH_OK) rc = cmh_kernels_export(&s, c.z);
    if (rc == CMH_OK && c.failed) rc = CMH_ENOMEM;
    if (rc == CMH_OK) {
        char err[512];
        rc = cmh_cmh_write_file(&s, out, err, sizeof err);
        if (rc != CMH_OK) cmh_log("snapshot not written (%s): %s", why, err);
        else {
            note_in_manifest(out);
            if (cmh_cfg.debug) cmh_log("wrote %s (%s, %u entries)", out, why, s.nentries);
        }
    } else {
        cmh_log("snapshot not written (%s): out of memory", why);
    }
    cmh_symbolizer_free(c.z);
    free(c.map);
    cmh_snapshot_free(&s);
    pthread_mutex_unlock(&g_dump_lock);
    return rc;
}

/* ---- SIGUSR1 (dump now), SIGUSR2 (a mark: "SIGUSR2 #n" in every device's trace) ---- */

static int g_usr1_pending, g_usr2_pending, g_usr2_count;

static void on_signal(int sig)
{
    int saved = errno;
    __atomic_add_fetch(sig == SIGUSR2 ? &g_usr2_pending : &g_usr1_pending, 1, __ATOMIC_RELAXED);
    sem_post(&g_sig_sem); /* async-signal-safe; the work happens in the helper thread */
    errno = saved;
}

static void signal_mark(void)
{
    char name[48];
    snprintf(name, sizeof name, "SIGUSR2 #%d", ++g_usr2_count);
    cmh_device_stats st[CMH_MAX_DEVICES + 1];
    int n = cmh_hist_stats(st, CMH_MAX_DEVICES + 1), marked = 0;
    for (int i = 0; i < n && i <= CMH_MAX_DEVICES; i++)
        if (st[i].device >= 0) marked += cmh_hist_mark(st[i].device, name, 0) == CMH_OK;
    if (!marked) cmh_hist_mark(0, name, 0);
}

static void *helper(void *arg)
{
    (void)arg;
    for (;;) {
        if (sem_wait(&g_sig_sem) != 0) {
            if (errno == EINTR) continue;
            return NULL;
        }
        if (__atomic_exchange_n(&g_usr2_pending, 0, __ATOMIC_ACQ_REL)) signal_mark();
        if (__atomic_exchange_n(&g_usr1_pending, 0, __ATOMIC_ACQ_REL)) do_dump(NULL, "SIGUSR1");
    }
}

void cmh_first_touch(void)
{
    if (CMH_LIKELY(cmh_touched)) return;
    if (__atomic_exchange_n(&cmh_touched, 1, __ATOMIC_ACQ_REL)) return;
    cmh_kernels_start();
    if (g_sig_installed && !__atomic_exchange_n(&g_helper_started, 1, __ATOMIC_ACQ_REL)) {
        pthread_t t;
        pthread_attr_t a;
        sigset_t all, old;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the helper inherits a full mask */
        if (pthread_create(&t, &a, helper, NULL) != 0) g_helper_started = 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&a);
    }
}

void cmh_dump_on_oom(void)
{
    if (__atomic_exchange_n(&g_oom_dumped, 1, __ATOMIC_ACQ_REL)) return;
    do_dump(NULL, "first out-of-memory");
}

/* ---- process lifetime ---- */

static void at_exit(void)
{
    if (cmh_touched) do_dump(NULL, "exit");
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&g_dump_lock);
    cmh_hist_atfork_prepare();
    cmh_stacks_atfork_prepare();
}

static void fork_parent(void)
{
    cmh_stacks_atfork_parent();
    cmh_hist_atfork_parent();
    pthread_mutex_unlock(&g_dump_lock);
}

static void fork_child(void)
{
    cmh_stacks_atfork_child();
    cmh_hist_reset_after_fork();
    cmh_pools_reset_after_fork();
    pthread_mutex_init(&g_dump_lock, NULL);
    g_helper_started = 0;
    g_oom_dumped = 0;
    g_start_ns = cmh_now_ns();
}

__attribute__((constructor(102))) static void recorder_init(void)
{
    g_start_ns = cmh_now_ns();
    cmh_config_from_env();
    sem_init(&g_sig_sem, 0, 0);
    const char *sig = getenv("CUMEMHIST_SIGNAL");
    struct sigaction old;
    /* Never take SIGUSR1 / SIGUSR2 from a program that already handles it. */
    static const int sigs[] = {SIGUSR1, SIGUSR2};
    for (int i = 0; i < 2 && !(sig && strcmp(sig, "0") == 0); i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            sa.sa_flags = SA_RESTART;
            sigemptyset(&sa.sa_mask);
            if (sigaction(sigs[i], &sa, NULL) == 0) g_sig_installed = 1;
        }
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(at_exit);
}

/* ---- public API ---- */

CMH_EXPORT int cmh_record_memory_history(const cmh_options *o)
{
    if (!o || o->enabled < CMH_ENABLED_OFF || o->enabled > CMH_ENABLED_ALL || o->context < CMH_CONTEXT_NONE ||
        o->context > CMH_CONTEXT_ALL || o->max_frames < 0 || o->max_frames > CMH_MAX_FRAMES)
        return CMH_EINVAL;
    cmh_cfg.enabled = o->enabled;
    cmh_cfg.context = o->context;
    if (o->max_frames) cmh_cfg.max_frames = o->max_frames;
    cmh_cfg.max_entries = o->max_entries;
    cmh_hist_set_capacity(o->max_entries);
    if (o->clear_history || o->enabled == CMH_ENABLED_OFF) cmh_hist_clear();
    cmh_context_now = o->context;
    cmh_enabled_now = o->enabled;
    if (o->clear_history && o->enabled != CMH_ENABLED_OFF) cmh_pools_resample();
    return CMH_OK;
}

CMH_EXPORT int cmh_dump_snapshot(const char *path) { return do_dump(path, "cmh_dump_snapshot"); }

CMH_EXPORT int cmh_memory_stats(cmh_device_stats *out, int cap)
{
    if (cap < 0 || (cap && !out)) return CMH_EINVAL;
    return cmh_hist_stats(out, cap);
}

CMH_EXPORT uint64_t cmh_lost_events(void) { return __atomic_load_n(&cmh_lost, __ATOMIC_RELAXED); }

/* ---- the block API: allocators above the driver, and annotations ---- */

CMH_EXPORT int cmh_segment_managed(uint64_t ptr) { return cmh_hist_segment_managed(ptr); }

CMH_EXPORT int cmh_block_alloc(uint64_t ptr, uint64_t size, uint64_t requested, uint64_t stream)
{
    if (!ptr || !size) return CMH_EINVAL;
    return cmh_hist_block_alloc(cmh_current_device(), ptr, size, requested ? requested : size, stream);
}

CMH_EXPORT int cmh_block_free_requested(uint64_t ptr) { return cmh_hist_block_free_requested(ptr); }

CMH_EXPORT int cmh_block_free_completed(uint64_t ptr) { return cmh_hist_block_free_completed(ptr); }

CMH_EXPORT int cmh_mark(const char *name) { return cmh_hist_mark(cmh_current_device(), name, 0); }

static __thread const char *t_ranges[64];
static __thread int t_depth;

CMH_EXPORT int cmh_range_push(const char *name)
{
    if (t_depth < 64) t_ranges[t_depth] = name;
    t_depth++;
    return cmh_hist_mark(cmh_current_device(), name, 1);
}

CMH_EXPORT int cmh_range_pop(void)
{
    if (t_depth <= 0) return CMH_EINVAL;
    t_depth--;
    return cmh_hist_mark(cmh_current_device(), t_depth < 64 ? t_ranges[t_depth] : "", 2);
}
