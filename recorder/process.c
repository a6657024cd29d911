/*
 * process.c - the recorder across the life of its process: start-up, the helper thread,
 * signals, the first out-of-memory error, fork and exit.
 *
 * Start-up (a constructor) reads the CUMEMHIST_* options and takes SIGUSR1 / SIGUSR2 if the
 * program has not (the program's again from its first setting of either, signals.c).  A process that never touches a hooked entry point does nothing more and
 * writes nothing.  At the first touch a helper thread starts, with every signal blocked; all
 * slow work asked for asynchronously happens there, never in a signal handler or a hook:
 *  - SIGUSR1: dump a snapshot (the handler only posts a semaphore);
 *  - SIGUSR2: drop a mark ("SIGUSR2 #n") into every device's trace, a step boundary for a
 *    program that cannot call cmh_mark;
 *  - the first out-of-memory error: the failing thread asks for the dump and waits until it is
 *    written (the program may die of that error next), at most CMH_OOM_WAIT_S seconds.
 * At exit (on_exit) a last snapshot is written.  After fork() the child starts a fresh history.
 * Once its flight record exists, the process is in the per-user registry (snapshot/registry.h)
 * for the live readers (`top`, `snapshot`, the exporter), and the helper writes a cuMemGetInfo
 * sample of each device there once a second; the entry goes at a clean end.
 *
 * Deaths (docs/RECORDER.md): from the first touch the history is also in the flight record
 * (flight.c), which survives any death, SIGKILL included.  SIGTERM, SIGINT, SIGHUP and SIGQUIT,
 * unless ignored at start-up, and SEGV, BUS, FPE, ILL and ABRT are taken, invisibly to the program
 * (signals.c: it reads and sets its own disposition of each, as without the recorder).  At each
 * delivery the handler looks at the program's disposition as it is then:
 *  - a handler of the program's: it runs at once, and that is all.  The signal ends nothing yet
 *    (a Python program's KeyboardInterrupt, a trainer saving a checkpoint on SIGTERM may go on),
 *    so the record is not marked and no snapshot is taken then: whatever end comes after (exit
 *    and its dump, _exit, the signal re-raised with SIG_DFL, SIGKILL) is recorded as that end;
 *  - SIG_DFL: the signal ends the process.  For the four graceful ones the handler marks the
 *    record, asks the helper for a snapshot and waits for it (at most CMH_TERM_WAIT_S), then sets
 *    the default action and raises the signal again; a fault only marks the record (a fault
 *    leaves no state a dump could trust) and dies the same way.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "registry.h"

#define CMH_OOM_WAIT_S 60
#define CMH_TERM_WAIT_S 10

static int64_t g_start_ns;
static sem_t g_sem;
static int g_term_pending;       /* the signal whose snapshot the helper is to write */
/* the helper counts it up (and wakes the handler's futex wait) when that snapshot is written;
 * a word, no pipe: a program that closes the descriptors it did not open (a daemon) would close
 * a pipe's, and reuse their numbers for its own files, which a byte written there would spoil */
static unsigned g_term_done;
static int g_term_ok;            /* that snapshot was written */
static int g_helper_started;
static int g_oom_dumped;
static int g_live_samples = 1; /* CUMEMHIST_MEMINFO=0: no sample a second for the live readers */
static int g_usr1_pending, g_usr2_pending, g_oom_pending, g_usr2_count;
/* the OOM dump's hand-over: the failing thread waits for g_oom_done to change */
static pthread_mutex_t g_oom_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_oom_cond = PTHREAD_COND_INITIALIZER;
static unsigned g_oom_done;

int64_t cmh_process_start_ns(void) { return g_start_ns; }

/* A child of fork() without exec keeps its parent's pid here: its record begins at the fork,
 * and says so (the parent's live allocations, segments and ranges are the parent's record). */
static int64_t g_forked_from, g_pid_at_prepare;
int64_t cmh_process_forked_from(void) { return g_forked_from; }

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)si, (void)uc;
    int saved = errno;
    __atomic_add_fetch(sig == SIGUSR2 ? &g_usr2_pending : &g_usr1_pending, 1, __ATOMIC_RELAXED);
    sem_post(&g_sem); /* async-signal-safe; the work happens in the helper thread */
    errno = saved;
}

static void signal_mark(void)
{
    char name[48];
    snprintf(name, sizeof name, "SIGUSR2 #%d", ++g_usr2_count);
    /* on every device the process has used (marks.c); device 0 where it has used none yet */
    cmh_device_stats st[CMH_MAX_DEVICES + 1];
    int n = cmh_hist_stats(st, CMH_MAX_DEVICES + 1), dev = 0;
    for (int i = 0; i < n && i <= CMH_MAX_DEVICES; i++)
        if (st[i].device >= 0) {
            dev = st[i].device;
            break;
        }
    cmh_marks_record(dev, cmh_marks_name_id(name), 0);
}

void cmh_helper_wake(void)
{
    if (__atomic_load_n(&g_helper_started, __ATOMIC_ACQUIRE)) sem_post(&g_sem);
}

/* The state letter of task tid of this process ('R', 'S', 'Z', ...), or 0 when unreadable. */
static char task_state(const char *tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *par = strrchr(buf, ')'); /* "TID (COMM) S ...": the name may hold anything */
    return par && par[1] == ' ' ? par[2] : 0;
}

/* 1 when the helper is the only thread of the process still running.  glibc ends a process
 * whose threads all ended (the main thread by pthread_exit(), the others by returning) from the
 * last of them, with exit(0); the helper is a thread too, never the last to end, so the process
 * stayed alive for good, its exited main thread a zombie and every signal blocked (F21).  Only
 * looked for once the main thread has ended (one read of its state a tick until then). */
static int only_helper_left(void)
{
    char me[24];
    snprintf(me, sizeof me, "%ld", (long)getpid());
    char st = task_state(me);
    if (st != 'Z' && st != 'X') return 0; /* the main thread runs (or no /proc: nothing known) */
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    long self = (long)syscall(SYS_gettid);
    int others = 0;
    struct dirent *e;
    while (!others && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || atol(e->d_name) == self) continue;
        char s = task_state(e->d_name);
        others = s && s != 'Z' && s != 'X'; /* (one gone meanwhile reads as nothing) */
    }
    closedir(d);
    return !others;
}

/* the helper's 100 ms tick: the flight record's clock line and lost count, and once a second a
 * cuMemGetInfo sample for live readers; the end of the process when every thread of the
 * program's has ended */
static void helper_tick(int64_t *last, unsigned *ticks)
{
    /* as glibc's last thread does: exit handlers (the exit dump) run, the status is 0 */
    if (only_helper_left()) exit(0);
    cmh_flight_tick();
    cmh_modules_poll(); /* an object unloaded by other means than our dlclose (glibc's own) */
    *last = cmh_now_ns();
    if (++*ticks % 10 == 0 && g_live_samples) cmh_meminfo_sample_live();
}

__thread int cmh_on_helper __attribute__((tls_model("initial-exec")));

static void *helper(void *arg)
{
    (void)arg;
    /* the first tick 2 ms after the start, 100 ms apart after that: the flight record's first
     * clock slope (cmh_flight_start) is made from a short span at worst */
    int64_t last_tick = cmh_now_ns() - 98000000;
    unsigned ticks = 0;
    cmh_on_helper = 1; /* pystack.c: never reads Python frames here (dumps call into Python) */
    for (int first = 1;; first = 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += first ? 2000000 : 100000000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        if (sem_timedwait(&g_sem, &until) != 0) {
            if (errno == ETIMEDOUT) helper_tick(&last_tick, &ticks);
            else if (errno != EINTR) return NULL;
            continue;
        }
        /* woken often (appends asking for pages, chunks, extents): the tick still comes */
        if (cmh_now_ns() - last_tick >= 100000000) helper_tick(&last_tick, &ticks);
        int term = __atomic_exchange_n(&g_term_pending, 0, __ATOMIC_ACQ_REL);
        if (term) {
            char why[48];
            snprintf(why, sizeof why, "signal %s", term == SIGTERM ? "SIGTERM" : term == SIGINT ? "SIGINT" : term == SIGHUP ? "SIGHUP" : "SIGQUIT");
            __atomic_store_n(&g_term_ok, cmh_dump(NULL, why) == CMH_OK, __ATOMIC_RELEASE);
            __atomic_add_fetch(&g_term_done, 1, __ATOMIC_RELEASE);
            syscall(SYS_futex, &g_term_done, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
        }
        if (cmh_hist_spare_wanted()) cmh_hist_make_spares();
        if (cmh_flight_prepare_wanted()) cmh_flight_prepare();
        if (cmh_flight_populate_wanted()) cmh_flight_populate();
        if (cmh_flight_checkpoint_wanted()) cmh_flight_tick();
        if (__atomic_exchange_n(&g_oom_pending, 0, __ATOMIC_ACQ_REL)) {
            cmh_dump(NULL, "first out-of-memory");
            pthread_mutex_lock(&g_oom_lock);
            g_oom_done++;
            pthread_cond_broadcast(&g_oom_cond);
            pthread_mutex_unlock(&g_oom_lock);
        }
        if (__atomic_exchange_n(&g_usr2_pending, 0, __ATOMIC_ACQ_REL)) signal_mark();
        if (__atomic_exchange_n(&g_usr1_pending, 0, __ATOMIC_ACQ_REL)) cmh_dump(NULL, "SIGUSR1");
    }
}

static void start_helper(void)
{
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;
    const char *ms = getenv("CUMEMHIST_MEMINFO");
    g_live_samples = !(ms && !strcmp(ms, "0"));
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the helper inherits a full mask */
    if (pthread_create(&t, &a, helper, NULL) != 0) __atomic_store_n(&g_helper_started, 0, __ATOMIC_RELEASE);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
}

void cmh_first_touch(void)
{
    /* 0 untouched, 1 starting, 2 started: the first toucher starts the flight record while any
     * other waits for it, so that no entry is made before the record can take it */
    if (CMH_LIKELY(__atomic_load_n(&cmh_touched, __ATOMIC_ACQUIRE) == 2)) return;
    int expect = 0;
    if (!__atomic_compare_exchange_n(&cmh_touched, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        struct timespec pause = {0, 200000};
        while (__atomic_load_n(&cmh_touched, __ATOMIC_ACQUIRE) == 1) nanosleep(&pause, NULL);
        return;
    }
    cmh_dump_note_manifest("touched", NULL);
    cmh_flight_start();
    if (cmh_flight_path()) cmh_registry_add(cmh_flight_path()); /* now `top` and the exporter can find it */
    cmh_kernels_start();
    if (!__atomic_exchange_n(&g_helper_started, 1, __ATOMIC_ACQ_REL)) start_helper();
    __atomic_store_n(&cmh_touched, 2, __ATOMIC_RELEASE);
}

void cmh_process_oom(void)
{
    if (__atomic_exchange_n(&g_oom_dumped, 1, __ATOMIC_ACQ_REL)) return;
    if (!__atomic_load_n(&g_helper_started, __ATOMIC_ACQUIRE)) {
        cmh_dump(NULL, "first out-of-memory");
        return;
    }
    pthread_mutex_lock(&g_oom_lock);
    unsigned seen = g_oom_done;
    __atomic_store_n(&g_oom_pending, 1, __ATOMIC_RELEASE);
    sem_post(&g_sem);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CMH_OOM_WAIT_S;
    int rc = 0;
    while (g_oom_done == seen && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_oom_cond, &g_oom_lock, &until);
    pthread_mutex_unlock(&g_oom_lock);
    if (rc == ETIMEDOUT) cmh_log("the out-of-memory snapshot is taking over %d s; the program goes on", CMH_OOM_WAIT_S);
}

/* ---- fork and exit ---- */

/* The children forked without exec (DataLoader workers, multiprocessing): the parent's record
 * names them, so that its reports can point at each child's record (a child killed with its
 * GPU memory was said only on `record`'s stderr).  fork() itself is wrapped: pthread_atfork's
 * parent handler is not told the child's pid.  Kept lock-free: a slot taken by an atomic add. */
static int64_t g_children[CMH_MAX_CHILDREN];
static uint32_t g_nchildren;

uint32_t cmh_process_children(int64_t *out, uint32_t cap, uint32_t *more)
{
    uint32_t n = __atomic_load_n(&g_nchildren, __ATOMIC_ACQUIRE), kept = n < CMH_MAX_CHILDREN ? n : CMH_MAX_CHILDREN, k = 0;
    for (uint32_t i = 0; i < kept && k < cap; i++) {
        int64_t p = __atomic_load_n(&g_children[i], __ATOMIC_ACQUIRE);
        if (p > 0) out[k++] = p; /* (0: its fork() has not stored it yet) */
    }
    if (more) *more = n - kept;
    return k;
}

int cmh_process_child_path(int64_t pid, char *out, size_t cap)
{
    return cmh_cfg.output[0] && cmh_config_child_output_path(cmh_cfg.output, (long)pid, out, cap) == 0;
}

/* child i's record in the flight record: a parent killed before its exit dump names its
 * children too, once recovered (it named none) */
static void flight_child(uint32_t i, int64_t pid)
{
    char path[4096];
    if (i >= CMH_MAX_CHILDREN) cmh_flight_child(i, 0, NULL); /* (counted, as the snapshot counts it) */
    else cmh_flight_child(i, pid, cmh_process_child_path(pid, path, sizeof path) ? path : NULL);
}

void cmh_process_flight_children(void)
{
    uint32_t n = __atomic_load_n(&g_nchildren, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n && i < CMH_MAX_CHILDREN; i++) {
        int64_t p = __atomic_load_n(&g_children[i], __ATOMIC_ACQUIRE);
        if (p > 0) flight_child(i, p); /* (0: its fork() has not stored it yet, and writes it itself) */
    }
    if (n > CMH_MAX_CHILDREN) flight_child(n - 1, 0);
}

CMH_EXPORT pid_t fork(void)
{
    static pid_t (*next)(void);
    pid_t (*f)(void) = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
    if (!f) {
        void *(*sym)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
        f = sym ? (pid_t(*)(void))sym(RTLD_NEXT, "fork") : NULL;
        if (!f) {
            errno = ENOSYS;
            return -1;
        }
        __atomic_store_n(&next, f, __ATOMIC_RELEASE);
    }
    pid_t p = f();
    if (p > 0) {
        uint32_t i = __atomic_fetch_add(&g_nchildren, 1, __ATOMIC_ACQ_REL);
        if (i < CMH_MAX_CHILDREN) __atomic_store_n(&g_children[i], (int64_t)p, __ATOMIC_RELEASE);
        flight_child(i, p);
    } else if (p == 0)
        __atomic_store_n(&g_nchildren, 0, __ATOMIC_RELEASE); /* the child's children are its own */
    return p;
}

/* (on_exit, not atexit: the handler is given the status exit() was called with, or main's
 * return value, which the exit dump's ending says) */
static void at_exit(int status, void *arg)
{
    (void)arg;
    if (__atomic_load_n(&cmh_touched, __ATOMIC_ACQUIRE)) {
        int ok = cmh_dump_at_exit(status & 0xff) == CMH_OK;
        /* `record` never replaces this snapshot by one recovered from a flight record that the
         * next line could not remove */
        if (ok) cmh_dump_note_manifest_word("exitdump", "written");
        cmh_flight_finish(ok);
    }
    cmh_registry_remove();
}

/* ---- deaths ---- */

/* _exit() and _Exit() run no exit handler, so no exit dump: the record says the process ended
 * so, with its status.  Forked workers end this way (multiprocessing, DataLoader: os._exit),
 * and an end that marked nothing at all was then a death no code of the process saw (SIGKILL,
 * the OOM killer), which a reader can now say instead of "SIGKILL or _exit()".  exit() reaches
 * _exit inside libc, not through here (its exit dump has run by then). */
static void (*g_next_exit)(int);

/* The next _exit, looked up once at the recorder's start: a vfork child calling _exit after a
 * failed exec shares its parent's memory, and a dlsym there could wait for a loader lock that
 * one of the parent's threads holds. */
static void (*next_exit(void))(int)
{
    void (*f)(int) = __atomic_load_n(&g_next_exit, __ATOMIC_ACQUIRE);
    if (!f) {
        void *(*sym)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
        f = sym ? (void (*)(int))sym(RTLD_NEXT, "_exit") : NULL;
        if (f) __atomic_store_n(&g_next_exit, f, __ATOMIC_RELEASE);
    }
    return f;
}

__attribute__((noreturn)) static void quit_next(int status)
{
    void (*f)(int) = next_exit();
    if (f) f(status);
    for (;;) syscall(SYS_exit_group, status);
}

CMH_EXPORT void _exit(int status)
{
    cmh_flight_ended_by_exit(status);
    quit_next(status);
}

CMH_EXPORT void _Exit(int status)
{
    cmh_flight_ended_by_exit(status);
    quit_next(status);
}

static void on_term(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    /* sent by kill() (to this process or to its whole group): noted for `record`, which then
     * passes on no second one when it was sent the same (cmd_record.c, held_for) */
    if (si && si->si_code == SI_USER && si->si_pid > 0) cmh_dump_note_signal(sig, (long)si->si_pid);
    struct sigaction prog;
    cmh_sig_program(sig, &prog);
    errno = saved;
    if (prog.sa_handler == SIG_IGN) return; /* (set so an instant ago: the kernel ignores it now) */
    if (prog.sa_handler != SIG_DFL) { /* the program's: nothing ends yet */
        cmh_sig_run_program(sig, &prog, si, uc);
        return;
    }
    cmh_flight_ended_by_signal(sig);
    if (__atomic_load_n(&g_helper_started, __ATOMIC_ACQUIRE)) {
        unsigned seen = __atomic_load_n(&g_term_done, __ATOMIC_ACQUIRE);
        __atomic_store_n(&g_term_pending, sig, __ATOMIC_RELEASE);
        sem_post(&g_sem);
        /* until the helper counts it written, at most CMH_TERM_WAIT_S (futex and clock_gettime
         * are async-signal-safe system calls) */
        struct timespec now, until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += CMH_TERM_WAIT_S;
        while (__atomic_load_n(&g_term_done, __ATOMIC_ACQUIRE) == seen) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            struct timespec left = {until.tv_sec - now.tv_sec, until.tv_nsec - now.tv_nsec};
            if (left.tv_nsec < 0) left.tv_sec--, left.tv_nsec += 1000000000;
            if (left.tv_sec < 0) break;
            syscall(SYS_futex, &g_term_done, FUTEX_WAIT_PRIVATE, seen, &left, NULL, 0);
        }
        /* the snapshot has it all and the process is about to die: the flight record can go */
        if (__atomic_load_n(&g_term_ok, __ATOMIC_ACQUIRE)) cmh_flight_finish(1), cmh_registry_remove();
    }
    errno = saved;
    cmh_sig_die(sig);
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    struct sigaction prog;
    cmh_sig_program(sig, &prog);
    errno = saved;
    if (prog.sa_handler == SIG_IGN) return;
    if (prog.sa_handler != SIG_DFL) { /* a runtime's own fault handler may go on: nothing ends yet */
        cmh_sig_run_program(sig, &prog, si, uc);
        return;
    }
    cmh_flight_ended_by_signal(sig); /* two stores into the mapping: all that is safe here */
    cmh_sig_die(sig);
}

/* The loader's module list, walked by the recorder only through here.  glibc's fork does not
 * reset the lock dl_iterate_phdr holds while it calls back (it resets dl_open's), so a fork
 * while another thread of the recorder walked the list (the helper scanning modules for the
 * flight record, a dump symbolizing, a dlclose being noted) left the child a lock nobody would
 * release: its first allocation, which scans the modules for its own flight record, hung for
 * good.  A walk holds this gate to read; fork_prepare takes it to write, last (a walker holds
 * none of the locks taken before it, or fork_prepare waits for that lock first), so no walk of
 * ours is under way when the process is copied.
 *
 * The gate is a word, not a pthread_rwlock_t: the child must find it open, and a rwlock held to
 * write can only be made so there by a new init (glibc's unlock knows its writer by a thread id
 * the child's thread no longer has), which ThreadSanitizer does not take for an unlock: a child
 * forked before the helper started read "read lock of a write locked mutex" at its first
 * allocation.  An annotation telling it so is wrong where the runtime's interceptors are not
 * first (the recorder preloaded into sh, which does not link the runtime).  Atomics it follows
 * everywhere.  The word: the walks under way, CMH_GATE_WAIT added while a fork waits for them
 * to end (the last one out wakes it), or CMH_GATE_SHUT while a fork copies the process.  Walkers
 * never wait for a fork that has not shut it: a walk may come inside a walk, as glibc's own lock
 * allows (dlopen's constructors, under that lock, can allocate). */
#define CMH_GATE_WAIT 0x80000000u
#define CMH_GATE_SHUT 0xffffffffu
static uint32_t g_dl_gate;

static void gate_wait(uint32_t seen)
{
    int saved = errno;
    syscall(SYS_futex, &g_dl_gate, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    errno = saved;
}

static void gate_wake(void)
{
    int saved = errno;
    syscall(SYS_futex, &g_dl_gate, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    errno = saved;
}

int cmh_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    uint32_t v = __atomic_load_n(&g_dl_gate, __ATOMIC_RELAXED);
    for (;;) {
        if (v == CMH_GATE_SHUT) {
            gate_wait(v);
            v = __atomic_load_n(&g_dl_gate, __ATOMIC_RELAXED);
        } else if (__atomic_compare_exchange_n(&g_dl_gate, &v, v + 1, 1, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            break;
    }
    int rc = dl_iterate_phdr(cb, arg);
    if (__atomic_sub_fetch(&g_dl_gate, 1, __ATOMIC_RELEASE) == CMH_GATE_WAIT) gate_wake();
    return rc;
}

/* shut once no walk is under way; a second fork waits until the first opens it */
static void gate_shut(void)
{
    uint32_t v = __atomic_load_n(&g_dl_gate, __ATOMIC_RELAXED);
    for (;;) {
        if (v == 0 || v == CMH_GATE_WAIT) {
            if (__atomic_compare_exchange_n(&g_dl_gate, &v, CMH_GATE_SHUT, 1, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        } else if (v == CMH_GATE_SHUT || (v & CMH_GATE_WAIT) ||
                   __atomic_compare_exchange_n(&g_dl_gate, &v, v | CMH_GATE_WAIT, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            gate_wait(v == CMH_GATE_SHUT || (v & CMH_GATE_WAIT) ? v : v | CMH_GATE_WAIT);
            v = __atomic_load_n(&g_dl_gate, __ATOMIC_RELAXED);
        }
    }
}

static void gate_open(void)
{
    __atomic_store_n(&g_dl_gate, 0u, __ATOMIC_RELEASE);
    gate_wake(); /* the walks and a second fork that came meanwhile */
}

/* Every lock, taken in the order the recorder nests them (a dump takes all the others; a pool
 * sample is recorded under the pools lock), so the child inherits consistent tables. */
static void fork_prepare(void)
{
    g_pid_at_prepare = getpid();
    cmh_dump_atfork_prepare();
    cmh_pools_atfork_prepare();
    cmh_hist_atfork_prepare();
    cmh_blocks_atfork_prepare();
    cmh_vmm_atfork_prepare();
    cmh_marks_atfork_prepare();
    cmh_stacks_atfork_prepare();
    cmh_pystack_atfork_prepare();
    gate_shut();
}

static void fork_parent(void)
{
    gate_open();
    cmh_pystack_atfork_parent();
    cmh_stacks_atfork_parent();
    cmh_marks_atfork_parent();
    cmh_vmm_atfork_parent();
    cmh_blocks_atfork_parent();
    cmh_hist_atfork_parent();
    cmh_pools_atfork_parent();
    cmh_dump_atfork_parent();
}

static void fork_child(void)
{
    __atomic_store_n(&g_dl_gate, 0u, __ATOMIC_RELAXED); /* this thread shut it; no other is left */
    cmh_sig_reset_after_fork();
    cmh_pystack_atfork_child();
    cmh_stacks_atfork_child();
    cmh_marks_reset_after_fork();
    cmh_vmm_reset_after_fork();
    cmh_blocks_reset_after_fork();
    cmh_hist_reset_after_fork();
    cmh_pools_reset_after_fork();
    cmh_dump_reset_after_fork();
    cmh_meminfo_reset_after_fork();
    cmh_drverr_reset_after_fork();
    pthread_mutex_init(&g_oom_lock, NULL);
    pthread_cond_init(&g_oom_cond, NULL);
    g_helper_started = 0; /* threads do not survive fork: a new helper at the child's first touch */
    cmh_flight_reset_after_fork();
    g_oom_dumped = 0;
    g_start_ns = cmh_now_ns();
    g_forked_from = g_pid_at_prepare;
}

__attribute__((constructor(102))) static void recorder_init(void)
{
    g_start_ns = cmh_now_ns();
    cmh_config_from_env();
    cmh_dump_manifest_init();
    cmh_dump_note_manifest("loaded", NULL); /* `record` learns that the preload took */
    sem_init(&g_sem, 0, 0);
    const char *sig = getenv("CUMEMHIST_SIGNAL");
    /* Never take SIGUSR1 / SIGUSR2 from a program that already handles it. */
    static const int sigs[] = {SIGUSR1, SIGUSR2};
    for (int i = 0; i < 2 && !(sig && strcmp(sig, "0") == 0); i++) cmh_sig_take(sigs[i], on_signal, CMH_SIG_REQUEST);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    on_exit(at_exit, NULL);
    next_exit();
    const char *deaths = getenv("CUMEMHIST_SIGNALS");
    if (!(deaths && !strcmp(deaths, "0"))) {
        static const int graceful[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT}, fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
        for (size_t i = 0; i < sizeof graceful / sizeof *graceful; i++) cmh_sig_take(graceful[i], on_term, CMH_SIG_DEATH);
        for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) cmh_sig_take(fatal[i], on_fatal, CMH_SIG_DEATH);
    }
}
