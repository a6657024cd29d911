/*
 * dump.c - one snapshot of the recorder's state, written to a file.
 *
 * A dump copies the rings and live tables under their locks (export.c), then symbolizes each
 * distinct PC once and writes the .cmh atomically: .PATH.tmp.PID.N renamed over PATH, so a reader
 * never sees a partial file and an earlier snapshot is never lost to a failed write.  Dumps are
 * serialized.  When CUMEMHIST_MANIFEST names a file, each written path is appended to it so that
 * `cumemhist record` can say which files appeared.  What asks for a dump (the API, exit, SIGUSR1,
 * the first OOM) is process.c's and api.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemhist/merge.h"
#include "internal.h"

static cmh_mutex g_dump_lock = CMH_MUTEX_INITIALIZER;

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
    unsigned gen = 0;
    uint32_t n = cmh_stack_get(rec, &pcs, &gen);
    uint32_t ids[CMH_MAX_STACK];
    if (n > CMH_MAX_STACK) n = CMH_MAX_STACK;
    for (uint32_t i = 0; i < n; i++)
        if (cmh_symbolize(c->z, pcs[i], 1, gen, &ids[i]) != CMH_OK) {
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
    s->start_time_ns = cmh_process_start_ns();
    s->forked_from = cmh_process_forked_from();
    /* the children it forked, each with the path its own record takes: the parent's reports
     * name them (a child killed with its GPU memory was said on `record`'s stderr only) */
    int64_t kids[CMH_MAX_CHILDREN];
    uint32_t more = 0, nk = cmh_process_children(kids, CMH_MAX_CHILDREN, &more);
    for (uint32_t i = 0; i < nk; i++) {
        char path[4096];
        if (cmh_snapshot_add_child(s, kids[i], cmh_process_child_path(kids[i], path, sizeof path) ? path : NULL) != CMH_OK) more++;
    }
    s->children_more = more;
    s->dump_time_ns = cmh_now_ns();
    s->opt_enabled = (uint8_t)cmh_cfg.enabled;
    s->opt_context = (uint8_t)cmh_cfg.context;
    s->opt_max_entries = cmh_cfg.max_entries;
    s->opt_max_frames = cmh_cfg.max_frames;
    s->lost_events = __atomic_load_n(&cmh_lost, __ATOMIC_RELAXED);
    /* every OOM is counted in its trace's dropped_ooms when the ring did not take it, history
     * or not (enabled=state): a reader may say "0 OOMs" of a record without history */
    cmh_snapshot_add_setting(s, "ooms_counted", "1", 1);
    snprintf(s->producer, sizeof s->producer, "cumemhist %s", CMH_VERSION);
    cmh_job_identity(&s->rank, &s->local_rank, &s->world_size);
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
    /* how often the Python stack was read, and refused (pystack.c), when there was any Python */
    uint64_t pyc = __atomic_load_n(&cmh_py_captured, __ATOMIC_RELAXED);
    uint64_t nogil = __atomic_load_n(&cmh_py_refused[CMH_PYREFUSE_NOGIL], __ATOMIC_RELAXED);
    uint64_t fin = __atomic_load_n(&cmh_py_refused[CMH_PYREFUSE_FINALIZING], __ATOMIC_RELAXED);
    uint64_t layout = __atomic_load_n(&cmh_py_refused[CMH_PYREFUSE_LAYOUT], __ATOMIC_RELAXED);
    uint64_t free_reads = __atomic_load_n(&cmh_py_nogil_reads, __ATOMIC_RELAXED);
    if (pyc || nogil || fin || layout) {
        char v[32];
        snprintf(v, sizeof v, "%llu", (unsigned long long)pyc);
        cmh_snapshot_add_setting(s, "python_stacks", v, 1);
        snprintf(v, sizeof v, "%llu", (unsigned long long)nogil);
        cmh_snapshot_add_setting(s, "python_stacks_refused_nogil", v, 1);
        snprintf(v, sizeof v, "%llu", (unsigned long long)fin);
        cmh_snapshot_add_setting(s, "python_stacks_refused_finalizing", v, 1);
        snprintf(v, sizeof v, "%llu", (unsigned long long)free_reads);
        cmh_snapshot_add_setting(s, "python_stacks_read_without_gil", v, 1);
        snprintf(v, sizeof v, "%llu", (unsigned long long)layout);
        cmh_snapshot_add_setting(s, "python_stacks_refused_layout", v, 1);
    }
}

void cmh_dump_note_manifest(const char *kind, const char *path) { cmh_dump_note_manifest_of(kind, (long)getpid(), path); }

/* A line whose last field is a word, not a path ("claimed PID OWNER") */
void cmh_dump_note_manifest_word(const char *kind, const char *word)
{
    const char *m = getenv("CUMEMHIST_MANIFEST");
    if (!m || !*m) return;
    char line[4600];
    int l = snprintf(line, sizeof line, "%s %ld %s\n", kind, (long)getpid(), word);
    if (l <= 0 || (size_t)l >= sizeof line) return;
    /* never made here: one gone is a run `record` has finished with (a background child that
     * outlived it would otherwise leave a manifest behind in /tmp, no one's) */
    int fd = open(m, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t w = write(fd, line, (size_t)l);
    (void)w;
    close(fd);
}

/* The manifest's path, read at start-up (a signal handler reads no environment the program may
 * be changing) */
static char g_manifest_path[PATH_MAX];

void cmh_dump_manifest_init(void)
{
    const char *m = getenv("CUMEMHIST_MANIFEST");
    if (m && strlen(m) < sizeof g_manifest_path) memcpy(g_manifest_path, m, strlen(m) + 1);
    else g_manifest_path[0] = 0;
}

/* "signal PID SIG SENDER": this process was sent sig by kill() from SENDER (its handler runs
 * now).  `record`, sent the same signal by the same process (a kill of the whole process group),
 * does not pass it on to a process that has it already.  Async-signal-safe: no stdio, no
 * environment, one O_APPEND write. */
void cmh_dump_note_signal(int sig, long sender)
{
    if (!g_manifest_path[0]) return;
    char line[96], num[24];
    size_t l = 0;
    const char *head = "signal ";
    for (const char *c = head; *c; c++) line[l++] = *c;
    long vals[3] = {(long)getpid(), (long)sig, sender};
    for (int v = 0; v < 3; v++) {
        unsigned long x = (unsigned long)(vals[v] < 0 ? 0 : vals[v]);
        int k = 0;
        do num[k++] = (char)('0' + x % 10), x /= 10; while (x && k < (int)sizeof num);
        while (k) line[l++] = num[--k];
        line[l++] = v < 2 ? ' ' : '\n';
    }
    int fd = open(g_manifest_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t w = write(fd, line, l);
    (void)w;
    close(fd);
}

void cmh_dump_note_manifest_of(const char *kind, long pid, const char *path)
{
    const char *m = getenv("CUMEMHIST_MANIFEST");
    if (!m || !*m) return;
    char abs[PATH_MAX + 4200];
    int k = snprintf(abs, sizeof abs, "%s %ld ", kind, pid);
    /* a line without a path ("loaded", "touched") names the parent: `record` finds the CUDA
     * process nearest the one it launched when that one never used CUDA */
    if (!path) snprintf(abs + k, sizeof abs - (size_t)k, "%ld", (long)getppid());
    else if (!realpath(path, abs + k)) snprintf(abs + k, sizeof abs - (size_t)k, "%s", path);
    size_t l = strlen(abs);
    abs[l++] = '\n';
    /* never made here: one gone is a run `record` has finished with (a background child that
     * outlived it would otherwise leave a manifest behind in /tmp, no one's) */
    int fd = open(m, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t w = write(fd, abs, l); /* one short O_APPEND write: lines from many processes never interleave */
    (void)w;
    close(fd);
}

static int dump(const char *path, const char *why, uint64_t *cut, int nslots);

/* ---- PyTorch's part (co-recording: python/cumemhist/_startup) ----
 * A hook (the Python start-up hook, through the C API) is asked, before the dumps it can serve,
 * to write PyTorch's own snapshot to SNAPSHOT.torch.pickle.PID.SEQ, a name this dump alone holds
 * (two dumps may take PyTorch's part at once: it is taken before the dump lock); what it wrote is
 * merged into this dump's snapshot and removed.  The dumps where the program's threads may hold
 * what the hook needs (the interpreter's lock) do without: the first out-of-memory error (its
 * thread waits for the dump) and a graceful signal (its handler does).  At exit the interpreter is gone: the hook
 * leaves its last snapshot as a file (cmh_torch_snapshot_file), merged into the exit dump. */
static int (*g_torch_hook)(const char *path, void *arg);
static void *g_torch_arg;
static char g_torch_file[4300];
static pthread_mutex_t g_torch_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_torch_seq; /* the dumps' PyTorch files in this process, for their names */

int cmh_dump_set_torch_hook(int (*fn)(const char *path, void *arg), void *arg)
{
    pthread_mutex_lock(&g_torch_lock);
    g_torch_hook = fn;
    g_torch_arg = arg;
    pthread_mutex_unlock(&g_torch_lock);
    return CMH_OK;
}

int cmh_dump_set_torch_file(const char *path)
{
    if (path && strlen(path) >= sizeof g_torch_file) return CMH_EINVAL;
    pthread_mutex_lock(&g_torch_lock);
    snprintf(g_torch_file, sizeof g_torch_file, "%s", path ? path : "");
    pthread_mutex_unlock(&g_torch_lock);
    return CMH_OK;
}

/* The file of PyTorch's snapshot for this dump, into file (empty: none): the hook asked to write
 * it now, or at exit the one it left.  Called before the dump lock is taken: the hook runs the
 * program's Python, which may fork (PyTorch symbolizes its C++ frames with addr2line children),
 * and fork's prepare handler takes the dump lock (cmh_dump_atfork_prepare): under the lock, a
 * dump on request (cmh_dump_snapshot, cumemhist.dump()) of a job recorded with C++ stacks waited
 * for itself for ever (the H200, PyTorch 2.11).  1: the file is the hook's, this dump's to remove. */
static int torch_fetch(const char *out, const char *why, char *file, size_t n)
{
    int hook_ok = strcmp(why, "first out-of-memory") && strncmp(why, "signal ", 7) && strcmp(why, "exit") &&
                  strcmp(why, "flight checkpoint");
    file[0] = 0;
    pthread_mutex_lock(&g_torch_lock);
    int (*fn)(const char *, void *) = hook_ok ? g_torch_hook : NULL;
    void *arg = g_torch_arg;
    if (!fn && g_torch_file[0] && !strcmp(why, "exit")) snprintf(file, n, "%s", g_torch_file);
    pthread_mutex_unlock(&g_torch_lock);
    if (!fn) return 0;
    /* the file is this dump's: another dump (a thread's, SIGUSR1's, the OOM observer's) may be
     * taking PyTorch's part for the same snapshot path now, outside the dump lock; one name for
     * both, the second's write was refused (its part lost) or the first merged the second's and
     * removed it.  Made here (O_EXCL: nothing of anyone else's taken over), replaced by the hook. */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        unsigned seq = __atomic_fetch_add(&g_torch_seq, 1, __ATOMIC_RELAXED);
        if (snprintf(file, n, "%s.torch.pickle.%ld.%u", out, (long)getpid(), seq) >= (int)n) {
            errno = ENAMETOOLONG;
            break;
        }
        fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        cmh_log("PyTorch's snapshot left out: no file for it beside %s (%s)", out, strerror(errno));
        file[0] = 0;
        return 0;
    }
    close(fd);
    if (fn(file, arg) != 1) {
        unlink(file);
        file[0] = 0;
    }
    return 1;
}

/* PyTorch's snapshot in file (torch_fetch), merged into s; the file is removed once merged. */
static void torch_part(cmh_snapshot *s, const char *file)
{
    if (!file[0]) return;
    cmh_snapshot t;
    char err[4600];
    if (cmh_snapshot_load(file, &t, err, sizeof err) != CMH_OK) {
        cmh_log("PyTorch's snapshot left out: %s", err);
        return;
    }
    cmh_merge_info info;
    if (cmh_merge_torch(s, &t, &info, err, sizeof err) != CMH_OK) cmh_log("PyTorch's snapshot left out: %s", err);
    cmh_snapshot_free(&t);
    unlink(file);
}

/* Whether PyTorch's history is co-recorded (the start-up hook is set): a dump that cannot ask
 * for its part then says so (dump_once). */
static int torch_hooked(void)
{
    pthread_mutex_lock(&g_torch_lock);
    int r = g_torch_hook != NULL;
    pthread_mutex_unlock(&g_torch_lock);
    return r;
}

/* Whether this dump may get PyTorch's part (torch_fetch asks for it). */
static int torch_possible(const char *why)
{
    int hook_ok = strcmp(why, "first out-of-memory") && strncmp(why, "signal ", 7) && strcmp(why, "exit") &&
                  strcmp(why, "flight checkpoint");
    pthread_mutex_lock(&g_torch_lock);
    int r = (hook_ok && g_torch_hook) || (g_torch_file[0] && !strcmp(why, "exit"));
    pthread_mutex_unlock(&g_torch_lock);
    return r;
}

/* A dump streams the rings' entries into the file (export.c, cmh_cmh_write_file_source) unless
 * it has PyTorch's part to merge (torch_file, what torch_fetch got: the merge works on the
 * model), or CUMEMHIST_DUMP_MODEL=1 (or CUMEMHIST_DUMP_COPY=1) asks for the way before: every
 * entry copied into the model first, then written (to compare the two).  Decided by the file in
 * hand, not by asking torch_possible again: a hook taken away meanwhile (the program's exit
 * handler does, hook(None, None), while another thread's dump is taking PyTorch's part) made the
 * dump stream, and the part it had taken was removed unmerged. */
static int want_stream(const char *torch_file)
{
    const char *m = getenv("CUMEMHIST_DUMP_MODEL"), *c = getenv("CUMEMHIST_DUMP_COPY");
    if ((m && !strcmp(m, "1")) || (c && !strcmp(c, "1"))) return 0;
    return !torch_file[0];
}

static int dump_once(const char *path, const char *why, uint64_t *cut, int nslots, int stream, const char *torch_file);
static int out_path(const char *path, char *out, size_t n, int quiet);

int cmh_dump(const char *path, const char *why) { return dump(path, why, NULL, 0); }

/* the status the program passed to exit() (or returned from main), for the exit dump's ending;
 * -1: not known (a dump at exit through a path that did not say it) */
static int g_exit_status = -1;
int cmh_dump_at_exit(int status)
{
    g_exit_status = status;
    return dump(NULL, "exit", NULL, 0);
}

int cmh_dump_checkpoint(const char *path, uint64_t *cut, int nslots) { return dump(path, "flight checkpoint", cut, nslots); }

static int dump(const char *path, const char *why, uint64_t *cut, int nslots)
{
    if (!cut) {
        /* what the pools keep now (the synchronize hooks read a pool again only while it may
         * hold more than its release threshold; a trim by other means, cuMemPoolTrimTo from a
         * path we do not follow or a lowered threshold, shows here), then what the driver says
         * now, beside what we recorded */
        cmh_pools_at_dump();
        cmh_meminfo_sample_all();
    }
    char torch_file[4400] = "", out[4200];
    int hooked = !cut && torch_possible(why) && out_path(path, out, sizeof out, 1) == 0 &&
                 torch_fetch(out, why, torch_file, sizeof torch_file);
    cmh_lock(&g_dump_lock);
    int rc = dump_once(path, why, cut, nslots, want_stream(torch_file), torch_file);
    if (rc == 1) rc = dump_once(path, why, cut, nslots, 0, torch_file); /* a ring lost entries: the model leaves them out */
    cmh_unlock(&g_dump_lock);
    /* the hook's file, not merged (the dump failed, or it could not be read): not left behind */
    if (hooked && torch_file[0]) unlink(torch_file);
    return rc;
}

/* The snapshot's path: path, or the output pattern's (cmh_cfg.output); -1 when too long (said
 * unless quiet). */
static int out_path(const char *path, char *out, size_t n, int quiet)
{
    if (path) {
        snprintf(out, n, "%s", path);
        return 0;
    }
    if (cmh_config_output_path(cmh_cfg.output, out, n) != 0) {
        if (!quiet) cmh_log("output path pattern too long: %s", cmh_cfg.output);
        return -1;
    }
    return 0;
}

/* One attempt, under the dump lock; 1: streaming could not be, try the model. */
static int dump_once(const char *path, const char *why, uint64_t *cut, int nslots, int stream, const char *torch_file)
{
    char out[4200];
    int rc;
    if (out_path(path, out, sizeof out, 0) != 0) return CMH_EINVAL;
    cmh_snapshot s;
    if (cmh_snapshot_init(&s) != CMH_OK) return CMH_ENOMEM;
    fill_meta(&s);
    /* every pool was read again just now (dump()): its figures are the driver's, so the end needs
     * no guess at a cache given back unseen (the analyzer's rule for older and recovered records) */
    if (!cut) cmh_snapshot_add_setting(&s, "pools_read_at_dump", "1", 1);
    if (cmh_meminfo_export(&s) != CMH_OK) __atomic_add_fetch(&cmh_lost, 1, __ATOMIC_RELAXED);
    /* co-recorded, but a dump that cannot ask the interpreter for PyTorch's part (torch_fetch):
     * said in the snapshot's ending and on stderr, where it read as a record of the driver alone */
    int torch_lacking = !cut && torch_hooked() && (!strncmp(why, "signal ", 7) || !strcmp(why, "first out-of-memory"));
    if (torch_lacking)
        cmh_log("snapshot %s (%s): PyTorch's part is not in it (PyTorch's snapshot needs the interpreter, which the %s thread "
                "may hold); %s", out, why, why[0] == 's' ? "signalled" : "failing",
                why[0] == 's' ? "a dump on request before the end (cumemhist.dump(), SIGUSR1) takes it with ours"
                              : "a dump after it (PyTorch's out-of-memory observer's, cumemhist.dump(), the exit's) has it");
    if (!strncmp(why, "signal ", 7)) { /* a graceful death: the handler's snapshot says so */
        char t[200];
        snprintf(t, sizeof t, "was ended by %s; this snapshot was written on the way%s", why + 7,
                 torch_lacking ? ", without PyTorch's part (its snapshot needs the interpreter, which the signalled thread may hold)" : "");
        cmh_strtab_intern(&s.strings, t, strlen(t), &s.ending);
    } else if (!strcmp(why, "exit") && g_exit_status >= 0) { /* a clean end: its exit status, as recover says a death's */
        char t[128];
        snprintf(t, sizeof t, "exited with status %d; this snapshot was written at its exit", g_exit_status);
        cmh_strtab_intern(&s.strings, t, strlen(t), &s.ending);
    }
    stack_ctx c = {&s, cmh_symbolizer_new(&s), NULL, 0, 0};
    cmh_export_stream *x = NULL;
    uint64_t nentries = 0;
    if (!c.z) rc = CMH_ENOMEM;
    else if (stream) rc = cmh_export_state_stream(&s, map_stack, &c, &x);
    else rc = cmh_export_state(&s, map_stack, &c);
    if (rc == CMH_OK) rc = cmh_kernels_export(&s, c.z);
    if (rc == CMH_OK) rc = cmh_vmm_export_unmapped(&s, map_stack, &c);
    if (rc == CMH_OK) rc = cmh_vmm_export_maps(&s, map_stack, &c);
    if (rc == CMH_OK) rc = cmh_vmm_export_released(&s, map_stack, &c);
    if (rc == CMH_OK && c.failed) rc = CMH_ENOMEM;
    /* the ending's count: the traces' entries once everything is in (streamed: the views' counts),
     * every device's and pinned host memory's, as a reader totals them (merged with PyTorch's
     * part, the reader counts again: cmh_ending_recount) */
    for (uint32_t i = 0; rc == CMH_OK && i < s.ntraces; i++) nentries += s.traces[i].nentries;
    if (rc == CMH_OK && !cut && (!strcmp(why, "SIGUSR1") || !strcmp(why, "cmh_dump_snapshot"))) {
        /* taken on request while the process runs: said, as `cumemhist snapshot PID` says it (its
         * blocks are held at the snapshot, not left at an end) */
        char t[200];
        snprintf(t, sizeof t, "was still running when this snapshot was written on %s (%llu %s so far)",
                 why[0] == 'S' ? "SIGUSR1" : "request (cmh_dump_snapshot)", (unsigned long long)nentries, nentries == 1 ? "entry" : "entries");
        if (cmh_strtab_intern(&s.strings, t, strlen(t), &s.ending) != CMH_OK) rc = CMH_ENOMEM;
    }
    if (rc == CMH_OK && !cut && !x) torch_part(&s, torch_file);
    if (rc == CMH_OK) {
        char err[512];
        cmh_entry_source src;
        if (x) cmh_export_stream_source(x, &src);
        rc = cmh_cmh_write_file_source(&s, x ? &src : NULL, out, err, sizeof err);
        if (x && c.failed) rc = CMH_ENOMEM; /* a stack the first pass could not map */
        if (rc != CMH_OK) cmh_log("snapshot not written (%s): %s", why, err);
        else if (cut) {
            for (int i = 0; i < nslots; i++) cut[i] = i <= CMH_MAX_DEVICES ? cmh_export_seq[i] : 0;
        } else {
            cmh_dump_note_manifest("snapshot", out);
            if (cmh_cfg.debug) cmh_log("wrote %s (%s, %llu entries%s)", out, why, (unsigned long long)nentries, x ? ", streamed" : "");
        }
    } else if (rc != 1) {
        cmh_log("snapshot not written (%s): out of memory", why);
    }
    cmh_export_stream_end(x);
    cmh_symbolizer_free(c.z);
    free(c.map);
    cmh_snapshot_free(&s);
    return rc;
}

void cmh_dump_atfork_prepare(void) { cmh_lock(&g_dump_lock); }
void cmh_dump_atfork_parent(void) { cmh_unlock(&g_dump_lock); }
void cmh_dump_reset_after_fork(void) { cmh_mutex_init(&g_dump_lock); }
