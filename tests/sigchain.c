/*
 * sigchain.c - a driver-API program that takes SIGTERM itself after its first allocations, the
 * way a library does it: it keeps the disposition it replaces and chains to it when that was a
 * handler; it then raises SIGTERM, goes on, and makes more allocations (tests/signals_test.sh).
 *   sigchain continue   10 allocations (5 freed: 15 entries), SIGTERM handled, 10 more, exit 0
 *   sigchain sleep      the same, then "ready" and 30 s of sleep (for a signal from outside)
 *   sigchain resethand  the handler set with SA_RESETHAND: after the first SIGTERM the disposition
 *                       reads SIG_DFL, and a second SIGTERM ends the process
 *   sigchain vfork      as continue, but first a vfork child sets SIGTERM to SIG_DFL and execs
 *                       /bin/true: the parent's handler is still its own
 *   sigchain count      the handler installed, "ready", then it waits for a SIGTERM from outside,
 *                       1 s more (a second delivery is counted too), 2 more allocations, and
 *                       exits with the number of SIGTERMs its handler ran for
 *   sigchain api        signal, sysv_signal, sigset, sigignore, siginterrupt and sigaction on the
 *                       signals the recorder takes: what each returns and reads, one line each
 *                       (the same with and without the recorder), then SIGINT raised to its
 *                       handler set by signal(), exit 0
 * It prints what it replaced ("replaced SIG_DFL" / "replaced a handler") and what it reads back.
 * Without the recorder the replaced disposition is SIG_DFL: the program must read the same.
 */
#define _GNU_SOURCE /* sysv_signal, sigset, sigignore, siginterrupt */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sigaction g_prev;
static volatile sig_atomic_t g_got;

static void on_term(int sig, siginfo_t *si, void *uc)
{
    g_got++;
    if (g_prev.sa_flags & SA_SIGINFO) {
        if (g_prev.sa_sigaction) g_prev.sa_sigaction(sig, si, uc);
    } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
        g_prev.sa_handler(sig);
    }
}

__attribute__((noinline)) static void work(int n)
{
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) exit(2);
        if (i % 2) cuMemFree(p);
    }
}

static volatile sig_atomic_t g_plain;
static void on_plain(int sig) { g_plain = sig; }

static const char *name(sighandler_t h)
{
    return h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" : h == SIG_HOLD ? "SIG_HOLD" : h == SIG_ERR ? "SIG_ERR" : h == on_plain ? "on_plain" : "other";
}

static void show(const char *what, int sig)
{
    struct sigaction a;
    sigaction(sig, NULL, &a);
    printf("%s: %s flags %#x restart %d resethand %d nodefer %d masks-itself %d\n", what, name(a.sa_handler),
           (unsigned)(a.sa_flags & (SA_RESTART | SA_RESETHAND | SA_NODEFER | SA_SIGINFO | SA_ONSTACK)), !!(a.sa_flags & SA_RESTART),
           !!(a.sa_flags & SA_RESETHAND), !!(a.sa_flags & SA_NODEFER), sigismember(&a.sa_mask, sig));
}

/* (deprecated, and still what old programs call: each is interposed) */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int api(void)
{
    printf("signal(SIGINT, on_plain) was %s\n", name(signal(SIGINT, on_plain)));
    show("SIGINT", SIGINT);
    printf("sysv_signal(SIGQUIT, on_plain) was %s\n", name(sysv_signal(SIGQUIT, on_plain)));
    show("SIGQUIT", SIGQUIT);
    printf("sigset(SIGHUP, SIG_HOLD) was %s\n", name(sigset(SIGHUP, SIG_HOLD)));
    printf("sigset(SIGHUP, on_plain) was %s\n", name(sigset(SIGHUP, on_plain)));
    show("SIGHUP", SIGHUP);
    printf("sigignore(SIGTERM) %d\n", sigignore(SIGTERM));
    show("SIGTERM", SIGTERM);
    printf("siginterrupt(SIGINT, 1) %d\n", siginterrupt(SIGINT, 1));
    show("SIGINT", SIGINT);
    printf("signal(SIGINT, on_plain) was %s\n", name(signal(SIGINT, on_plain)));
    show("SIGINT after siginterrupt", SIGINT);
    printf("signal(SIGTERM, SIG_DFL) was %s\n", name(signal(SIGTERM, SIG_DFL)));
    show("SIGSEGV", SIGSEGV);
    show("SIGUSR1", SIGUSR1);
    raise(SIGINT);
    printf("SIGINT handled: %d\n", g_plain == SIGINT);
    return g_plain == SIGINT ? 0 : 8;
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "continue";
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    work(10);
    if (!strcmp(how, "api")) return api();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_term;
    sa.sa_flags = SA_SIGINFO | (strcmp(how, "resethand") ? 0 : SA_RESETHAND);
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, &g_prev) != 0) return 5;
    printf("replaced %s\n", g_prev.sa_handler == SIG_DFL ? "SIG_DFL" : "a handler");
    fflush(stdout);
    if (!strcmp(how, "vfork")) {
        pid_t child = vfork();
        if (child == 0) {
            signal(SIGTERM, SIG_DFL);
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        if (child < 0 || waitpid(child, NULL, 0) != child) return 7;
    }
    if (!strcmp(how, "count")) {
        printf("ready\n");
        fflush(stdout);
        for (int i = 0; i < 300 && !g_got; i++) usleep(100000);
        for (int i = 0; i < 10; i++) usleep(100000);
        work(2);
        printf("SIGTERM handled %d times\n", (int)g_got);
        return (int)g_got;
    }
    raise(SIGTERM);
    if (g_got != 1) return 4;
    struct sigaction now;
    sigaction(SIGTERM, NULL, &now);
    printf("reads %s\n", now.sa_handler == SIG_DFL ? "SIG_DFL" : now.sa_sigaction == on_term ? "its handler" : "another handler");
    fflush(stdout);
    work(10);
    if (!strcmp(how, "resethand")) {
        raise(SIGTERM);
        return 6; /* not reached: SIG_DFL again */
    }
    if (!strcmp(how, "sleep")) {
        printf("ready\n");
        fflush(stdout);
        for (int i = 0; i < 300; i++) usleep(100000); /* (a handled signal cuts one short, not all) */
    }
    return 0;
}
