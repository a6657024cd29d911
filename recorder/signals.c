/*
 * signals.c - the recorder's signal handlers, invisible to the program.
 *
 * The recorder takes the signals that end a process (SIGTERM, SIGINT, SIGHUP, SIGQUIT and the
 * faults, process.c) at start-up, before the program's own code runs.  A program that asks what
 * its disposition is must still see its own: CPython installs its SIGINT handler (the one that
 * raises KeyboardInterrupt) only when SIGINT reads SIG_DFL at start-up, and reported None for
 * SIGINT and SIGTERM, so Ctrl-C killed a Python program under `record` without running its
 * `except KeyboardInterrupt` or `finally`.
 *
 * So for each signal the recorder took, this file keeps the program's disposition (g_prog, what
 * it was before the recorder, then whatever the program sets) and interposes the entry points
 * that read or set one: sigaction (and __sigaction), signal (bsd_signal, ssignal), sysv_signal
 * (__sysv_signal), sigset, sigignore and siginterrupt (glibc's reach its internal __sigaction,
 * not the exported symbol).  The program reads and sets its own disposition, as without the
 * recorder; the kernel's stays the recorder's handler, which hands the signal on to the
 * program's current disposition (process.c): its handler at once (its sa_mask, SA_RESTART and
 * SA_ONSTACK are the kernel's flags for the signal; SA_NODEFER and SA_RESETHAND are applied when
 * it is called), or the default action after the recorder's own work.  A disposition of SIG_IGN
 * is set in the kernel as it is (an ignored signal interrupts nothing, and stays ignored across
 * exec, as nohup needs).  SIGUSR1 and SIGUSR2, taken only when the program has not set them, are
 * the program's for good from its first setting of either (kernel and all: the recorder's
 * on-request dump and mark give way, as before).
 *
 * A child of vfork() (or of a raw clone) shares its parent's memory: a disposition it sets goes
 * to its own kernel table directly (the recorder's handler then gone there), never to the
 * parent's table.  Not covered: a raw syscall(SYS_rt_sigaction) goes past all of this (it replaces the
 * recorder's handler, as any handler installed that way did before; the flight record still
 * holds the history).  Each table entry is read and written under a spin lock taken with every
 * signal blocked, so that a handler never waits for a lock its own thread holds.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define NSIG_TAB 65

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static sigaction_fn g_real;                    /* libc's sigaction */
static struct sigaction g_prog[NSIG_TAB];      /* the program's disposition, as it set it */
static void (*g_ours[NSIG_TAB])(int, siginfo_t *, void *);
static int g_managed[NSIG_TAB];                /* 0 not taken, CMH_SIG_DEATH, CMH_SIG_REQUEST */
static sigset_t g_intr;                        /* siginterrupt(sig, 1): signal() without SA_RESTART */
static int g_lock;
static pid_t g_owner; /* the process the table is of: a vfork child shares its parent's memory */

static void *next_sym(const char *name)
{
    void *(*sym)(void *, const char *) = (void *(*)(void *, const char *))cmh_dlsym_resolve();
    return sym ? sym(RTLD_NEXT, name) : NULL;
}

static sigaction_fn real_sigaction(void)
{
    sigaction_fn f = __atomic_load_n(&g_real, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (sigaction_fn)next_sym("sigaction");
        if (f) __atomic_store_n(&g_real, f, __ATOMIC_RELEASE);
    }
    return f;
}

static int call_real(int sig, const struct sigaction *act, struct sigaction *oact)
{
    sigaction_fn f = real_sigaction();
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    return f(sig, act, oact);
}

static void lock(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, old);
    while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
}

static void unlock(const sigset_t *old)
{
    __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

static int taken(int sig) { return sig > 0 && sig < NSIG_TAB && __atomic_load_n(&g_managed[sig], __ATOMIC_ACQUIRE); }

/* The kernel's disposition for a death signal, from the program's (under the lock) */
static int install(int sig)
{
    const struct sigaction *p = &g_prog[sig];
    if (p->sa_handler == SIG_IGN) return call_real(sig, p, NULL);
    struct sigaction k;
    memset(&k, 0, sizeof k);
    k.sa_sigaction = g_ours[sig];
    if (p->sa_handler == SIG_DFL) {
        k.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigemptyset(&k.sa_mask);
    } else { /* the program's handler is called from ours: the kernel treats the signal as for it */
        k.sa_flags = SA_SIGINFO | (p->sa_flags & (SA_RESTART | SA_ONSTACK));
        k.sa_mask = p->sa_mask;
    }
    return call_real(sig, &k, NULL);
}

int cmh_sig_take(int sig, void (*fn)(int, siginfo_t *, void *), int kind)
{
    if (sig <= 0 || sig >= NSIG_TAB || taken(sig)) return -1;
    sigset_t old;
    struct sigaction now;
    lock(&old);
    __atomic_store_n(&g_owner, getpid(), __ATOMIC_RELAXED);
    int rc = -1;
    if (call_real(sig, NULL, &now) == 0 && now.sa_handler != SIG_IGN && /* nohup stays nohup */
        (kind == CMH_SIG_DEATH || (now.sa_handler == SIG_DFL && !(now.sa_flags & SA_SIGINFO)))) {
        g_prog[sig] = now;
        g_ours[sig] = fn;
        if (kind == CMH_SIG_REQUEST) { /* the recorder's while the program leaves it at SIG_DFL */
            struct sigaction k;
            memset(&k, 0, sizeof k);
            k.sa_sigaction = fn;
            k.sa_flags = SA_SIGINFO | SA_RESTART;
            sigemptyset(&k.sa_mask);
            rc = call_real(sig, &k, NULL);
        } else {
            rc = install(sig);
        }
        if (rc == 0) __atomic_store_n(&g_managed[sig], kind, __ATOMIC_RELEASE);
    }
    unlock(&old);
    return rc;
}

void cmh_sig_program(int sig, struct sigaction *out)
{
    sigset_t old;
    lock(&old);
    *out = g_prog[sig];
    /* SA_RESETHAND: the handler is the program's for this one delivery, SIG_DFL after */
    if (taken(sig) && out->sa_handler != SIG_DFL && out->sa_handler != SIG_IGN && (out->sa_flags & SA_RESETHAND)) {
        memset(&g_prog[sig], 0, sizeof g_prog[sig]);
        g_prog[sig].sa_handler = SIG_DFL;
        sigemptyset(&g_prog[sig].sa_mask);
        install(sig);
    }
    unlock(&old);
}

void cmh_sig_run_program(int sig, const struct sigaction *a, siginfo_t *si, void *uc)
{
    if (a->sa_flags & SA_NODEFER) { /* (blocked while ours runs: the kernel's flags are ours) */
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    }
    if (a->sa_flags & SA_SIGINFO) a->sa_sigaction(sig, si, uc);
    else a->sa_handler(sig);
}

void cmh_sig_die(int sig)
{
    sigset_t old;
    struct sigaction d;
    memset(&d, 0, sizeof d);
    d.sa_handler = SIG_DFL;
    sigemptyset(&d.sa_mask);
    lock(&old);
    g_prog[sig] = d;
    call_real(sig, &d, NULL);
    unlock(&old);
    raise(sig); /* blocked while the handler runs: delivered as it returns */
}

void cmh_sig_reset_after_fork(void)
{
    __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&g_owner, getpid(), __ATOMIC_RELAXED);
}

/* ---- what the program calls ---- */

CMH_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
    /* (a vfork child setting a disposition before exec sets its own, never its parent's table) */
    if (!taken(sig) || (act && getpid() != __atomic_load_n(&g_owner, __ATOMIC_RELAXED))) return call_real(sig, act, oact);
    struct sigaction a, prev;
    if (act) a = *act;
    sigset_t old;
    lock(&old);
    int rc = 0, kind = __atomic_load_n(&g_managed[sig], __ATOMIC_ACQUIRE);
    if (!kind) {
        unlock(&old);
        return call_real(sig, act, oact);
    }
    prev = g_prog[sig];
    if (act && kind == CMH_SIG_REQUEST) { /* SIGUSR1 / SIGUSR2: the program's from now on */
        rc = call_real(sig, &a, NULL);
        if (rc == 0) __atomic_store_n(&g_managed[sig], 0, __ATOMIC_RELEASE);
    } else if (act) {
        g_prog[sig] = a;
        rc = install(sig);
        if (rc != 0) {
            int e = errno;
            g_prog[sig] = prev;
            install(sig);
            errno = e;
        }
    }
    unlock(&old);
    if (rc == 0 && oact) *oact = prev;
    return rc;
}

CMH_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact);
CMH_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact) { return sigaction(sig, act, oact); }

/* a disposition set the way glibc's functions set it, through ours; the previous handler */
static sighandler_t set_simple(int sig, sighandler_t h, int flags, int mask_sig)
{
    struct sigaction a, prev;
    memset(&a, 0, sizeof a);
    a.sa_handler = h;
    sigemptyset(&a.sa_mask);
    if (mask_sig) sigaddset(&a.sa_mask, sig);
    a.sa_flags = flags;
    if (h == SIG_ERR || sigaction(sig, &a, &prev) != 0) {
        if (h == SIG_ERR) errno = EINVAL;
        return SIG_ERR;
    }
    return prev.sa_handler;
}

static sighandler_t forward_signal(const char *name, signal_fn *cache, int sig, sighandler_t h)
{
    signal_fn f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (signal_fn)next_sym(name);
        if (!f) {
            errno = ENOSYS;
            return SIG_ERR;
        }
        __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    }
    return f(sig, h);
}

/* BSD semantics (glibc's signal): the signal blocked in its handler, calls restarted unless
 * siginterrupt said otherwise */
static sighandler_t bsd(int sig, sighandler_t h)
{
    return set_simple(sig, h, sigismember(&g_intr, sig) == 1 ? 0 : SA_RESTART, 1);
}

static signal_fn g_next_signal, g_next_bsd, g_next_ssignal, g_next_sysv, g_next_sysv2, g_next_sigset;

CMH_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
    return taken(sig) ? bsd(sig, h) : forward_signal("signal", &g_next_signal, sig, h);
}

CMH_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
    return taken(sig) ? bsd(sig, h) : forward_signal("bsd_signal", &g_next_bsd, sig, h);
}

CMH_EXPORT sighandler_t ssignal(int sig, sighandler_t h)
{
    return taken(sig) ? bsd(sig, h) : forward_signal("ssignal", &g_next_ssignal, sig, h);
}

/* System V semantics: reset to SIG_DFL on delivery, not blocked in the handler, no restart */
CMH_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
    return taken(sig) ? set_simple(sig, h, SA_RESETHAND | SA_NODEFER, 0) : forward_signal("sysv_signal", &g_next_sysv, sig, h);
}

CMH_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
    return taken(sig) ? set_simple(sig, h, SA_RESETHAND | SA_NODEFER, 0) : forward_signal("__sysv_signal", &g_next_sysv2, sig, h);
}

CMH_EXPORT sighandler_t sigset(int sig, sighandler_t h)
{
    if (!taken(sig)) return forward_signal("sigset", &g_next_sigset, sig, h);
    sigset_t s, was;
    sigemptyset(&s);
    sigaddset(&s, sig);
    if (h == SIG_HOLD) { /* as glibc's: blocked; SIG_HOLD if it was, else the disposition */
        struct sigaction now;
        if (sigprocmask(SIG_BLOCK, &s, &was) != 0) return SIG_ERR;
        if (sigismember(&was, sig) == 1) return SIG_HOLD;
        return sigaction(sig, NULL, &now) == 0 ? now.sa_handler : SIG_ERR;
    }
    /* as glibc's: the disposition set, then the signal unblocked; SIG_HOLD if it was blocked */
    sighandler_t prev = set_simple(sig, h, 0, 0);
    if (prev == SIG_ERR) return SIG_ERR;
    if (sigprocmask(SIG_UNBLOCK, &s, &was) != 0) return SIG_ERR;
    return sigismember(&was, sig) == 1 ? SIG_HOLD : prev;
}

CMH_EXPORT int sigignore(int sig)
{
    if (!taken(sig)) {
        static int (*next)(int);
        int (*f)(int) = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
        if (!f && (f = (int (*)(int))next_sym("sigignore"))) __atomic_store_n(&next, f, __ATOMIC_RELEASE);
        if (!f) return errno = ENOSYS, -1;
        return f(sig);
    }
    return set_simple(sig, SIG_IGN, 0, 0) == SIG_ERR ? -1 : 0;
}

CMH_EXPORT int siginterrupt(int sig, int flag)
{
    if (!taken(sig)) {
        static int (*next)(int, int);
        int (*f)(int, int) = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
        if (!f && (f = (int (*)(int, int))next_sym("siginterrupt"))) __atomic_store_n(&next, f, __ATOMIC_RELEASE);
        if (!f) return errno = ENOSYS, -1;
        return f(sig, flag);
    }
    struct sigaction a;
    if (sigaction(sig, NULL, &a) != 0) return -1;
    sigset_t old;
    lock(&old);
    if (flag) sigaddset(&g_intr, sig), a.sa_flags &= ~SA_RESTART;
    else sigdelset(&g_intr, sig), a.sa_flags |= SA_RESTART;
    unlock(&old);
    return sigaction(sig, &a, NULL);
}
