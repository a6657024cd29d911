/*
 * cmd_record.c - `cumemhist record [options] -- prog args...`
 *
 * Runs the program with libcumemhist.so preloaded (after any LD_PRELOAD the user already had,
 * which is kept) and the CUMEMHIST_* variables that carry the options.  Every
 * child process inherits both.  Each process that dumps appends its file to a manifest, which is
 * read back to say which snapshots were written.  The program's exit status is forwarded, and a
 * program killed by a signal makes `record` die of the same signal.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/recover.h"
#include "flight_format.h"

static const char *g_output, *g_lib;
static int g_enabled = -1, g_context = -1, g_quiet, g_kernels, g_have_entries, g_have_frames, g_max_frames, g_no_torch;
static uint64_t g_max_entries;
static int g_pystacks = -1;
static const char *const g_pystacks_names[] = {"off", "held", "wait", NULL};
static const char *const g_enabled_names[] = {"state", "all", NULL};
static const char *const g_context_names[] = {"none", "state", "alloc", "all", NULL};

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_output, "PATH",
     "snapshot path; %p = pid, %r = rank (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK,\nelse the local rank) (default cumemhist.%p.cmh; a fixed path is the launched\n"
     "program's (or, if it uses no CUDA, its nearest CUDA process's) and gets .PID\n"
     "inserted for every other process; a file already there is replaced, and said to be;\n"
     "a path another run's process still holds is left to it: this run writes PATH.PID)",
     NULL, 0, 0, NULL},
    {"--enabled", NULL, CLI_CHOICE, &g_enabled, "state|all",
     "all: live blocks and the trace history (default);\nstate: live blocks only", g_enabled_names, 0, 0, NULL},
    {"--context", NULL, CLI_CHOICE, &g_context, "none|state|alloc|all", "which events keep a stack (default all)",
     g_context_names, 0, 0, NULL},
    {"--max-entries", NULL, CLI_SIZE, &g_max_entries, "N",
     "trace entries kept per device, oldest dropped first\n(default 0 = unlimited)", NULL, 0, 0, &g_have_entries},
    {"--max-frames", NULL, CLI_INT, &g_max_frames, "N", "deepest stack kept, native and Python each (default 32, at most 128)", NULL, 1, 128,
     &g_have_frames},
    {"--kernels", NULL, CLI_FLAG, &g_kernels, NULL, "also record kernel timing through CUPTI (CONCURRENT_KERNEL)", NULL, 0, 0,
     NULL},
    {"--no-torch", NULL, CLI_FLAG, &g_no_torch, NULL,
     "do not co-record PyTorch (by default a Python program that imports torch\nhas PyTorch's own history recorded too, in the same snapshot)", NULL, 0, 0, NULL},
    {"--python-stacks", NULL, CLI_CHOICE, &g_pystacks, "off|held|wait",
     "Python frames with each stack; a thread that released the GIL around the driver\n"
     "call (ctypes, PyTorch, most bindings) has them read without it (CPython 3.11, 3.12);\n"
     "elsewhere wait (default) takes the GIL back for them, held never waits; off: none", g_pystacks_names, 0, 0, NULL},
    {"--lib", NULL, CLI_STR, &g_lib, "PATH", "libcumemhist.so to preload (default: beside this command)", NULL, 0, 0, NULL},
    {"--quiet", "-q", CLI_FLAG, &g_quiet, NULL, "do not list the snapshots written", NULL, 0, 0, NULL},
};

const cli_command cli_cmd_record = {
    "record", "[options] -- program [args...]",
    "Run a program with the recorder preloaded and write a snapshot of its CUDA memory\n"
    "history at exit (also on SIGUSR1, SIGTERM, SIGINT, and at the first out-of-memory error).\n"
    "SIGUSR2 drops a mark (\"SIGUSR2 #n\") into the trace.  A signal the program handles itself\n"
    "is its own (Python's KeyboardInterrupt): its handler runs, no snapshot is taken then, and\n"
    "the record goes on.  The history is kept in a flight record from the start: when a\n"
    "process dies without writing its snapshot (a crash, SIGKILL), the snapshot is made from\n"
    "that record.  The exit status is the program's, but\n"
    "1 when it exited 0 and a snapshot was lost or could not be written where -o said.\n"
    "-o /dev/null (a character device) discards every process's snapshot, a killed one's\n"
    "recovery too, and says so; -o /dev/full, which takes none, keeps them in the runtime\n"
    "directory, status 1.",
    g_opts, CLI_NOPTS(g_opts), 1, 1 << 20, 1, "cumemhist record -o train.cmh -- python train.py"};

static pid_t g_child;
static volatile sig_atomic_t g_child_waited; /* reaped: its pid is no longer ours to signal */
static volatile sig_atomic_t g_ending;       /* SIGINT, SIGTERM, SIGHUP or SIGQUIT sent to us, to pass on */
static volatile sig_atomic_t g_ending_from;  /* the process that sent it by kill(), else 0 */
#define NSIG_HELD 32
static volatile sig_atomic_t g_held[NSIG_HELD]; /* sent by kill() from g_held_from[sig]: passed on out of the handler */
static volatile sig_atomic_t g_held_from[NSIG_HELD];

/* A signal sent to us (kill, a scheduler) goes on to the child; one that ends a run goes on to
 * every other process of the run too (pass_on, out of the handler): a shell wrapper passes
 * nothing on to the program it waits for.  One the kernel sent to the whole process group (the
 * terminal's ^C, ^\) reached them all already.  One sent by kill() may have been sent to the
 * whole group too (a scheduler's `kill -TERM -PGID`, timeout(1)): it is held, and passed on out
 * of the handler only to the processes that did not get it themselves (held_for). */
static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (si && si->si_code == SI_KERNEL) return;
    int from = si && si->si_code == SI_USER && si->si_pid > 0 ? (int)si->si_pid : 0;
    if (from && sig < NSIG_HELD) g_held_from[sig] = from, g_held[sig] = 1;
    else if (g_child > 0 && !g_child_waited) kill(g_child, sig);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) g_ending = sig, g_ending_from = from;
}

/* Whether process pid has signal sig in its pending set (a second one sent now would merge with
 * it: the process gets it once either way). */
static int pending_in(long pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int yes = 0;
    while (!yes && fgets(line, sizeof line, f)) {
        unsigned long long m;
        if ((sscanf(line, "ShdPnd: %llx", &m) == 1 || sscanf(line, "SigPnd: %llx", &m) == 1) && (m >> (sig - 1) & 1)) yes = 1;
    }
    fclose(f);
    return yes;
}

/* The signals the run's processes noted (recorder/process.c, "signal PID SIG SENDER"), each used
 * once: a note stands for one delivery. */
typedef struct {
    long pid, from;
    int sig, used;
    struct timespec at; /* when a note was last used */
} sig_note;
static sig_note g_used[64];
static int g_nused;

static sig_note *used_of(long pid, int sig, long from)
{
    for (int i = 0; i < g_nused; i++)
        if (g_used[i].pid == pid && g_used[i].sig == sig && g_used[i].from == from) return &g_used[i];
    if (g_nused == (int)(sizeof g_used / sizeof *g_used)) g_nused = 0; /* (the oldest are long done with) */
    g_used[g_nused] = (sig_note){pid, from, sig, 0, {0, 0}};
    return &g_used[g_nused++];
}

static long ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static int noted(const char *manifest, long pid, int sig, long from)
{
    FILE *mf = fopen(manifest, "r");
    if (!mf) return 0;
    char line[PATH_MAX + 64];
    int n = 0;
    while (fgets(line, sizeof line, mf)) {
        long p, f;
        int s;
        if (sscanf(line, "signal %ld %d %ld", &p, &s, &f) == 3 && p == pid && s == sig && f == from) n++;
    }
    fclose(mf);
    return n;
}

/* How long, at most, `record` waits for a process of the run to note a signal that a sender
 * sent it too (its handler runs at once, or the signal is pending there). */
#define HELD_WAIT_MS 300
/* A second signal from the same sender this soon after one the process got itself is taken as
 * the same (timeout(1) sends its signal to the command, `record`, then to the whole group: the
 * program, as without `record`, gets the two as one) */
#define SAME_BURST_MS 1000

/* Whether process pid got signal sig from process from itself (the same kill() of the whole
 * process group that reached us), so that it is not passed on a second time: the recorder there
 * noted it in the manifest, or it is pending there (passing it on would add nothing).  A kill()
 * of a group is made pending in every process of the group before it returns, so a short wait
 * covers the moment between its delivery and the note.  A process without the recorder (a
 * shell wrapper) notes nothing: it gets the signal passed on, as before. */
static int held_for(const char *manifest, long pid, int sig, long from, const struct timespec *start)
{
    sig_note *u = used_of(pid, sig, from);
    for (;;) {
        if (noted(manifest, pid, sig, from) > u->used) {
            u->used++;
            clock_gettime(CLOCK_MONOTONIC, &u->at);
            return 1;
        }
        if (u->used && ms_since(&u->at) < SAME_BURST_MS) return 1;
        long ms = ms_since(start);
        int pend = pending_in(pid, sig);
        if (ms >= HELD_WAIT_MS) {
            if (pend) u->used++, clock_gettime(CLOCK_MONOTONIC, &u->at); /* its note comes when it takes it */
            return pend;
        }
        struct timespec pause = {0, 5000000};
        nanosleep(&pause, NULL);
    }
}

/* The held signals (forward) passed on to the child, unless it got them itself. */
static void pass_held(const char *manifest)
{
    for (int sig = 1; sig < NSIG_HELD; sig++) {
        if (!g_held[sig]) continue;
        sigset_t all, was;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, &was);
        long from = g_held_from[sig];
        g_held[sig] = 0;
        sigprocmask(SIG_SETMASK, &was, NULL);
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        if (g_child > 0 && !g_child_waited && !held_for(manifest, (long)g_child, sig, from, &start)) kill(g_child, sig);
    }
}

static void woken(int sig) { (void)sig; } /* SIGCHLD: the wait below wakes */

/* The process pid is this run's: alive (not a zombie) and started with this session in its
 * environment (a pid the manifest named may belong to someone else by now). */
static int of_this_run(long pid, const char *session)
{
    char st = 0, path[64];
    uint64_t ticks;
    if (pid <= 1 || pid == (long)getpid() || !cmh_proc_stat(pid, &st, &ticks) || st == 'Z' || st == 'X') return 0;
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char want[64], *var = NULL;
    size_t cap = 0;
    int n = snprintf(want, sizeof want, "CUMEMHIST_SESSION=%s", session), found = 0;
    while (!found && getdelim(&var, &cap, 0, f) > 0) found = !strncmp(var, want, (size_t)n) && var[n] == 0;
    free(var);
    fclose(f);
    return found;
}

/* The processes of the run the manifest names with kind ("loaded PID PPID": the library was
 * loaded into it; "touched PID PPID": it used CUDA) that still run, but the child; each sent sig
 * when sig is not 0.  Their count. */
static int run_processes(const char *manifest, const char *session, const char *kind, int sig, long from)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    FILE *mf = fopen(manifest, "r");
    if (!mf) return 0;
    char line[PATH_MAX + 64], fmt[32];
    snprintf(fmt, sizeof fmt, "%s %%ld %%ld", kind);
    int n = 0;
    while (fgets(line, sizeof line, mf)) {
        long pid, ppid;
        if (sscanf(line, fmt, &pid, &ppid) != 2 || !of_this_run(pid, session)) continue;
        n++;
        if (sig && pid != (long)g_child && !(from && held_for(manifest, pid, sig, from, &start))) kill((pid_t)pid, sig);
    }
    fclose(mf);
    return n;
}

/* The ending signal sig, sent to us by process from (0: not by kill()), to every process of the
 * run that did not get it itself (the child has it from pass_held). */
static void pass_on(const char *manifest, const char *session, int sig, long from)
{
    run_processes(manifest, session, "loaded", sig, from);
}

/* Processes of the run that used CUDA and still run. */
static int cuda_running(const char *manifest, const char *session) { return run_processes(manifest, session, "touched", 0, 0); }

/* How long, at most, `record` waits for the processes it passed an ending signal on to (their
 * snapshots are written on the way out); past it, each still running is named with its path. */
#define ENDING_WAIT_S 30

/* The directory this command runs from (where an install's relative paths start). */
static void exe_dir(const char *argv0, char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l <= 0) {
        snprintf(exe, sizeof exe, "%s", argv0);
        l = (ssize_t)strlen(exe);
    }
    exe[l] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    else snprintf(exe, sizeof exe, ".");
    snprintf(out, n, "%s", exe);
}

/* libcumemhist.so: CUMEMHIST_LIB, beside this command (the build tree), or where the install put
 * it relative to this command (bindir to libdir, so a moved prefix keeps working). */
static int find_lib(const char *argv0, char *out, size_t n)
{
    const char *env = getenv("CUMEMHIST_LIB");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char dir[PATH_MAX];
    exe_dir(argv0, dir, sizeof dir);
    static const char *const rel[] = {"/libcumemhist.so", "/" CMH_REL_LIBDIR "/libcumemhist.so",
                                      "/" CMH_REL_LIBDIR "/libcumemhist.so." CMH_SOVERSION};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(out, n, "%s%s", dir, rel[i]);
        if (access(out, R_OK) == 0) return 0;
    }
    return -1;
}

static int record(char **prog, const char *argv0);

/* The library to preload is a shared object for this machine: ld.so would otherwise skip it
 * with a line on stderr, and the program would run unrecorded. */
static int check_lib(const char *path)
{
    unsigned char h[20], me[20];
    FILE *f = fopen(path, "rb"), *self = fopen("/proc/self/exe", "rb");
    int got = f && fread(h, 1, sizeof h, f) == sizeof h, known = self && fread(me, 1, sizeof me, self) == sizeof me;
    if (f) fclose(f);
    if (self) fclose(self);
    if (!f) {
        cli_error("%s: %s", path, strerror(errno));
        return -1;
    }
    if (!got || memcmp(h, "\177ELF", 4) != 0) {
        cli_error("%s: not a shared library (no ELF header): name libcumemhist.so with --lib", path);
        return -1;
    }
    /* e_type (ET_DYN = 3) at 16, little- or big-endian as EI_DATA says; the class and machine
     * as this command's own */
    int type = h[5] == 2 ? h[16] << 8 | h[17] : h[17] << 8 | h[16];
    if (type != 3) {
        cli_error("%s: an ELF file but not a shared library: name libcumemhist.so with --lib", path);
        return -1;
    }
    if (known && (h[4] != me[4] || h[5] != me[5] || h[18] != me[18] || h[19] != me[19])) {
        cli_error("%s: a shared library for another machine or word size than this one", path);
        return -1;
    }
    return 0;
}

/* ---- the manifest the processes append to ---- */

/* /tmp/cumemhist-manifest-PID-TICKS-XXXXXX: the pid and start time (clock ticks after boot) of
 * the `record` whose run it is, so that one a `record` killed outright left (SIGKILL, the OOM
 * killer: it is removed at every other end) is known for dead. */
#define MANIFEST_DIR "/tmp"
#define MANIFEST_PREFIX "cumemhist-manifest-"

void cli_clear_dead_manifests(void)
{
    DIR *d = opendir(MANIFEST_DIR);
    if (!d) return;
    size_t pl = strlen(MANIFEST_PREFIX);
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid;
        unsigned long long ticks;
        int n = 0;
        /* (one without a pid in its name, an older version's, cannot be told dead: left) */
        if (strncmp(e->d_name, MANIFEST_PREFIX, pl) || sscanf(e->d_name + pl, "%ld-%llu-%n", &pid, &ticks, &n) != 2 || !n ||
            strlen(e->d_name + pl + n) != 6 || pid <= 0)
            continue;
        struct stat st; /* our own regular file only: never another user's, never a link */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
        char state = 0;
        uint64_t now = 0;
        int alive = (kill((pid_t)pid, 0) == 0 || errno == EPERM) &&
                    (!cmh_proc_stat(pid, &state, &now) || (state != 'Z' && state != 'X' && now == ticks));
        if (!alive) unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

typedef struct rec_pid {
    long pid;
    int execed; /* the program it ran before an exec(): the wait status is the last program's */
    long refused_by; /* the fixed path was another run's, held by this pid ("claimed PID OWNER") */
    char noflight[PATH_MAX]; /* why it kept no flight record, as it said ("noflight PID WHY") */
    int exit_dumped; /* its exit dump was written ("exitdump PID written"): complete, never replaced */
    char flight[PATH_MAX], snapshot[PATH_MAX];
    int where;        /* what became of its snapshot (record's closing lines say only that) */
    char got[4400]; /* where it is (WHERE_PATH after a recovery, WHERE_ELSEWHERE) */
} rec_pid;

enum {
    WHERE_UNKNOWN,   /* nothing said of it (a process that used no CUDA) */
    WHERE_PATH,      /* written (or recovered) at its own path */
    WHERE_ELSEWHERE, /* recovered into the runtime directory: its path could not take it */
    WHERE_LOST,
    WHERE_RUNNING,   /* still running: it writes its path when it ends */
};

typedef struct rec_file {
    char path[PATH_MAX];
} rec_file;

typedef struct rec_run {
    rec_pid *pids;
    int npids, cpids;
    rec_file *files; /* snapshots, each once, in the order first written */
    int nfiles, cfiles;
    long (*parents)[2]; /* pid, parent pid: from "loaded" and "touched" lines */
    int nparents, cparents;
    int nloaded; /* processes the library was loaded into */
    int noexec;  /* the program could not be started */
} rec_run;

/* The pid's latest entry (each program a pid ran, exec() after exec(), has its own), else a new one. */
static rec_pid *pid_of(rec_run *r, long pid, int fresh)
{
    for (int i = r->npids - 1; i >= 0 && !fresh; i--)
        if (r->pids[i].pid == pid) return &r->pids[i];
    if (r->npids == r->cpids) {
        int nc = r->cpids ? r->cpids * 2 : 8;
        rec_pid *np = realloc(r->pids, (size_t)nc * sizeof *np);
        if (!np) return NULL;
        r->pids = np;
        r->cpids = nc;
    }
    rec_pid *p = &r->pids[r->npids++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    return p;
}

static void read_manifest(const char *path, rec_run *r)
{
    FILE *mf = fopen(path, "r");
    if (!mf) return;
    char line[PATH_MAX + 64], kind[16];
    while (fgets(line, sizeof line, mf)) {
        line[strcspn(line, "\n")] = 0;
        long pid;
        int at = 0;
        if (sscanf(line, "%15s %ld %n", kind, &pid, &at) < 2) continue;
        long ppid;
        if ((!strcmp(kind, "loaded") || !strcmp(kind, "touched")) && at && sscanf(line + at, "%ld", &ppid) == 1) {
            if (r->nparents == r->cparents) {
                int nc = r->cparents ? r->cparents * 2 : 8;
                long(*np)[2] = realloc(r->parents, (size_t)nc * sizeof *np);
                if (!np) break;
                r->parents = np;
                r->cparents = nc;
            }
            r->parents[r->nparents][0] = pid;
            r->parents[r->nparents++][1] = ppid;
        }
        if (!strcmp(kind, "signal")) continue; /* (for held_for) */
        if (!strcmp(kind, "loaded") || !strcmp(kind, "noexec")) {
            *(kind[0] == 'l' ? &r->nloaded : &r->noexec) += 1;
            continue;
        }
        rec_pid *p = pid_of(r, pid, 0);
        if (!p) break;
        const char *file = at ? line + at : "";
        if (!strcmp(kind, "exec")) { /* its record before exec() was moved aside: that program's own */
            snprintf(p->flight, sizeof p->flight, "%s", file);
            p->execed = 1;
            if (!pid_of(r, pid, 1)) break; /* the new program's */
        } else if (!strcmp(kind, "claimed")) {
            p->refused_by = atol(file);
        } else if (!strcmp(kind, "exitdump")) {
            p->exit_dumped = 1;
        } else if (!strcmp(kind, "noflight")) {
            snprintf(p->noflight, sizeof p->noflight, "%s", file);
        } else if (!strcmp(kind, "flight")) {
            snprintf(p->flight, sizeof p->flight, "%s", file);
        } else if (!strcmp(kind, "snapshot")) {
            snprintf(p->snapshot, sizeof p->snapshot, "%s", file);
            int dup = 0;
            for (int i = 0; i < r->nfiles; i++) dup |= !strcmp(r->files[i].path, file);
            if (dup) continue;
            if (r->nfiles == r->cfiles) {
                int nc = r->cfiles ? r->cfiles * 2 : 8;
                rec_file *nf = realloc(r->files, (size_t)nc * sizeof *nf);
                if (!nf) break;
                r->files = nf;
                r->cfiles = nc;
            }
            snprintf(r->files[r->nfiles++].path, PATH_MAX, "%s", file);
        }
    }
    fclose(mf);
}

/* How many parents up from pid the launched process is, by the manifest's "loaded" and
 * "touched" lines; -1 when the chain breaks (a process between that never loaded the library,
 * or one reparented when its parent died). */
static int depth_below(const rec_run *r, long pid, long launched)
{
    for (int d = 0; d < 64; d++) {
        if (pid == launched) return d;
        long up = -1;
        for (int i = 0; i < r->nparents && up < 0; i++)
            if (r->parents[i][0] == pid) up = r->parents[i][1];
        if (up <= 1) return -1;
        pid = up;
    }
    return -1;
}

/* A fixed -o path is the launched process's (recorder/config.c); every other process wrote
 * PATH with its pid inserted.  When the launched process never used CUDA (a shell wrapper,
 * `sh -c`, a launcher), the path goes to the CUDA process nearest it, the first of them to
 * use CUDA on a tie: one that has ended and left a snapshot or a flight record.  NULL: none. */
static rec_pid *heir_of(rec_run *r, long launched)
{
    struct stat st;
    for (int i = 0; i < r->npids; i++)
        if (r->pids[i].pid == launched) return NULL;
    rec_pid *best = NULL;
    int best_depth = INT_MAX;
    for (int i = 0; i < r->npids; i++) {
        rec_pid *p = &r->pids[i];
        char state = 0;
        uint64_t ticks;
        /* a program before exec(); one still running (a zombie has ended: its parent, a shell
         * that a signal ended, left it to init to reap) */
        if (p->execed || (kill((pid_t)p->pid, 0) == 0 && !(cmh_proc_stat(p->pid, &state, &ticks) && (state == 'Z' || state == 'X')))) continue;
        int left = (p->snapshot[0] && stat(p->snapshot, &st) == 0 && S_ISREG(st.st_mode)) || (p->flight[0] && stat(p->flight, &st) == 0);
        int d = depth_below(r, p->pid, launched);
        if (d < 0) d = INT_MAX - 1;
        if (left && d < best_depth) best = p, best_depth = d;
    }
    return best;
}

/* The path a process's snapshot (or flight record) would have had without its pid: PATH.PID.cmh
 * (.flight) -> PATH.cmh, in the directory the process wrote in (relative to its own working
 * directory, not ours).  -1 when there is no ".PID" in its name. */
static int without_pid(const rec_pid *p, char *out, size_t cap)
{
    snprintf(out, cap, "%s", p->snapshot[0] ? p->snapshot : p->flight);
    size_t l = strlen(out);
    if (!p->snapshot[0] && l > 7 && !strcmp(out + l - 7, ".flight")) out[l -= 7] = 0;
    char num[32];
    int n = snprintf(num, sizeof num, ".%ld", p->pid);
    char *base = strrchr(out, '/'), *at = NULL;
    for (char *q = base ? base : out; (q = strstr(q, num)); q++)
        if (q[n] == '.' || !q[n]) at = q;
    if (!at) return -1;
    memmove(at, at + n, strlen(at + n) + 1);
    return 0;
}

/* PATH.claim (recorder/config.c): "SESSION PID [START_TICKS]"; 0 when there is none to read. */
static int read_claim(const char *claim, long *sess, long *owner, unsigned long long *ticks)
{
    FILE *f = fopen(claim, "r");
    char line[128] = "";
    *sess = *owner = -1;
    *ticks = 0;
    if (!f) return 0;
    int n = fgets(line, sizeof line, f) ? sscanf(line, "%ld %ld %llu", sess, owner, ticks) : 0;
    fclose(f);
    return n >= 2;
}

/* The claim's owner still runs: that pid, started then (a zombie has ended; a pid reused is not it). */
static int claim_owner_alive(long owner, unsigned long long ticks)
{
    if (owner <= 0 || (kill((pid_t)owner, 0) != 0 && errno != EPERM)) return 0;
    char st = 0;
    uint64_t now = 0;
    if (!cmh_proc_stat(owner, &st, &now)) return 1;
    return st != 'Z' && st != 'X' && (!ticks || ticks == now);
}

/* PATH with ".PID" before its extension, as the recorder names a process's own file. */
static void with_pid(const char *path, long pid, char *out, size_t cap)
{
    const char *dot = cmh_path_ext(path);
    snprintf(out, cap, "%.*s.%ld%s", (int)(dot - path), path, pid, dot);
}

/* The latest program pid ran (each exec() has its own entry), or NULL. */
static const rec_pid *last_of(const rec_run *r, long pid)
{
    for (int i = r->npids - 1; i >= 0; i--)
        if (r->pids[i].pid == pid) return &r->pids[i];
    return NULL;
}

/* The rest of record's closing line about a fixed path: what became of the snapshots of the
 * run's processes other than except (each once, by the last program it ran).  Only a file that
 * is there is said to be written; one the path could not take is named where it is, and a lost
 * one said to be lost. */
static void say_others(const rec_run *r, long except, const char *output)
{
    long wrote = 0, away = 0, lost = 0, running = 0;
    const rec_pid *first_away = NULL;
    for (int i = 0; i < r->npids; i++) {
        const rec_pid *p = &r->pids[i];
        if (p->pid == except || last_of(r, p->pid) != p) continue;
        if (p->where == WHERE_PATH) wrote++;
        else if (p->where == WHERE_ELSEWHERE && !away++) first_away = p;
        else if (p->where == WHERE_LOST) lost++;
        else if (p->where == WHERE_RUNNING) running++;
    }
    const char *dot = cmh_path_ext(output);
    struct stat st; /* a device (-o /dev/null): each process's snapshot went through it, no NAME.PID file is there */
    if (wrote && stat(output, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        fprintf(stderr, "; %ld other process%s went through it too (nothing kept)", wrote, wrote == 1 ? "'s snapshot" : "es' snapshots");
    else if (wrote) fprintf(stderr, "; %ld other process%s wrote %.*s.PID%s", wrote, wrote == 1 ? "" : "es", (int)(dot - output), output, dot);
    if (away == 1) fprintf(stderr, "; pid %ld's snapshot could not be written there and is in %s", first_away->pid, first_away->got);
    else if (away) {
        const char *slash = strrchr(first_away->got, '/');
        fprintf(stderr, "; %ld other processes' snapshots could not be written there and are in %.*s (NAME.PID.cmh)", away,
                slash ? (int)(slash - first_away->got) : 1, slash ? first_away->got : ".");
    }
    if (lost) fprintf(stderr, "; %ld other process%s snapshot%s lost", lost, lost == 1 ? "'s" : "es'", lost == 1 ? " was" : "s were");
    if (running) fprintf(stderr, "; %ld other process%s still running (named above)", running, running == 1 ? " is" : "es are");
}

/* Before the program runs: the snapshot's directory exists and takes new files, and the path
 * (its pattern, as far as it is fixed) is not a directory. */
static int check_output(const char *pattern)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(pattern, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == pattern) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - pattern), pattern);
    if (strchr(dir, '%')) return 0; /* a directory per process or rank: made by the program, perhaps */
    struct stat st;
    if (stat(dir, &st) != 0) {
        cli_error("-o %s: %s: %s", pattern, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        cli_error("-o %s: %s is not a directory", pattern, dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cli_error("-o %s: cannot write in %s: %s", pattern, dir, strerror(errno));
        return -1;
    }
    if (!strchr(pattern, '%') && stat(pattern, &st) == 0 && S_ISDIR(st.st_mode)) {
        cli_error("-o %s: is a directory (name the snapshot file inside it)", pattern);
        return -1;
    }
    if (!strchr(pattern, '%') && lstat(pattern, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
        !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
        cli_error("-o %s: is %s (name a file)", pattern, S_ISBLK(st.st_mode) ? "a block device" : "a socket");
        return -1;
    }
    /* a file of the user's that is not a .cmh snapshot (`-o train.c`, a typo), or a recording of
     * another kind (a flight record not yet recovered, a PyTorch pickle: maybe the only copy of a
     * run): kept, before the run; an earlier .cmh there is replaced */
    const char *kind = !strchr(pattern, '%') && lstat(pattern, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 ? cmh_recording_kind(pattern) : "";
    if (!kind) {
        cli_error("-o %s: holds something other than a recording (not a .cmh snapshot, a pickle or a flight record): not "
                  "replaced (name another file, or remove it first)", pattern);
        return -1;
    }
    if (*kind && strcmp(kind, "a cumemhist snapshot (.cmh)")) {
        cli_error("-o %s: holds %s, which record would replace with a .cmh snapshot: not replaced (name another file; %s)", pattern, kind,
                  strstr(kind, "flight") ? "`cumemhist recover` reads it" : "cumemhist reads it as it is");
        return -1;
    }
    return 0;
}

int cmd_record(int argc, char **argv)
{
    char **prog = malloc((size_t)(argc + 1) * sizeof *prog);
    int nprog;
    if (!prog) return CLI_ENOMEM;
    int rc = cli_parse(&cli_cmd_record, argc, argv, prog, &nprog);
    if (!rc) {
        prog[nprog] = NULL;
        rc = record(prog, argv[0]);
    }
    free(prog);
    return rc < 0 ? cli_finish_stdout(0) : rc;
}

/* The directory holding the cumemhist Python package (and its start-up hook): CUMEMHIST_PYTHON,
 * where the install put it relative to this command (datadir/cumemhist/python), or the source
 * tree this was built from; its real path in out, 0, or -1 when none is there. */
int cli_python_dir(const char *argv0, char *out, size_t n)
{
    char dir[PATH_MAX], hook[PATH_MAX + 64], installed[PATH_MAX + 64];
    const char *env = getenv("CUMEMHIST_PYTHON");
    exe_dir(argv0, dir, sizeof dir);
    snprintf(installed, sizeof installed, "%s/%s", dir, CMH_REL_PYDIR);
    const char *cands[3] = {env && *env ? env : NULL, installed, CMH_PYTHON_DIR};
    for (int i = 0; i < 3; i++) {
        if (!cands[i]) continue;
        snprintf(hook, sizeof hook, "%s/cumemhist/_startup/sitecustomize.py", cands[i]);
        if (access(hook, R_OK) != 0 || !realpath(cands[i], dir)) continue;
        snprintf(out, n, "%s", dir);
        return 0;
    }
    return -1;
}

/* PyTorch co-recording: the start-up hook (python/cumemhist/_startup/sitecustomize.py) first on
 * PYTHONPATH, and the cumemhist package after it. */
static void python_hook(const char *argv0)
{
    if (g_no_torch) setenv("CUMEMHIST_TORCH", "0", 1);
    char dir[PATH_MAX];
    if (cli_python_dir(argv0, dir, sizeof dir) == 0) {
        const char *old = getenv("PYTHONPATH");
        size_t n = 2 * strlen(dir) + 64 + (old ? strlen(old) : 0);
        char *pp = malloc(n);
        if (!pp) return;
        snprintf(pp, n, "%s/cumemhist/_startup:%s%s%s", dir, dir, old && *old ? ":" : "", old && *old ? old : "");
        setenv("PYTHONPATH", pp, 1);
        free(pp);
        return;
    }
    if (!g_quiet && !g_no_torch)
        fprintf(stderr, "cumemhist: the Python start-up hook was not found (set CUMEMHIST_PYTHON): PyTorch is not co-recorded\n");
}

static int record(char **prog, const char *argv0)
{
    const char *lib = g_lib, *output = g_output;
    int quiet = g_quiet;
    char libpath[PATH_MAX];
    if (lib) snprintf(libpath, sizeof libpath, "%s", lib);
    if (lib && access(libpath, R_OK) != 0) {
        cli_error("--lib %s: %s", lib, strerror(errno));
        return CLI_EFILE;
    }
    const char *env = getenv("CUMEMHIST_LIB");
    if (!lib && env && *env && access(env, R_OK) != 0) {
        cli_error("CUMEMHIST_LIB=%s: %s", env, strerror(errno));
        return CLI_EFILE;
    }
    if (!lib && find_lib(argv0, libpath, sizeof libpath) != 0) {
        cli_error("cannot find libcumemhist.so beside this command or in ../lib (name it with --lib or CUMEMHIST_LIB)");
        return CLI_EFILE;
    }
    char abslib[PATH_MAX];
    if (realpath(libpath, abslib)) snprintf(libpath, sizeof libpath, "%s", abslib);
    if (check_lib(libpath)) return CLI_EFILE;
    if (check_output(output ? output : "cumemhist.%p.cmh")) return CLI_EFILE;
    /* a fixed path with a file there: the first process's snapshot replaces it, which is said */
    struct stat before;
    int existed = output && !strchr(output, '%') && lstat(output, &before) == 0, replacing = existed && S_ISREG(before.st_mode);

    /* LD_PRELOAD: whatever the user already preloads keeps its place (a sanitizer runtime must
     * stay first), then ours. */
    const char *old = getenv("LD_PRELOAD");
    size_t pl = strlen(libpath) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(pl);
    if (!preload) return 1;
    snprintf(preload, pl, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", libpath);
    setenv("LD_PRELOAD", preload, 1);
    free(preload);
    char num[32];
    /* The path is resolved here, once, against this command's directory: the program may run
     * elsewhere (`sh -c 'cd DIR && ...'`, a program that chdir()s), and its snapshot, claim and
     * flight record still go where -o said.  A '%' of the directory's name is not a pattern's. */
    const char *pattern = output ? output : "cumemhist.%p.cmh";
    char abspat[2 * PATH_MAX + 8];
    if (pattern[0] == '/') snprintf(abspat, sizeof abspat, "%s", pattern);
    else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            cli_error("-o %s: cannot tell this directory's path: %s", pattern, strerror(errno));
            return CLI_EFILE;
        }
        size_t k = 0;
        for (const char *c = cwd; *c && k + 3 < sizeof abspat; c++) {
            if (*c == '%') abspat[k++] = '%';
            abspat[k++] = *c;
        }
        snprintf(abspat + k, sizeof abspat - k, "%s%s", k == 1 ? "" : "/", pattern);
    }
    setenv("CUMEMHIST_OUTPUT", abspat, 1);
    /* settings the environment gives where no option does (a CUMEMHIST_MAX_ENTRIES left in the
     * shell): obeyed, as the recorder obeys them, and said, so that a cut history is not a mystery */
    if (!quiet) {
        static const char *const vars[] = {"CUMEMHIST_ENABLED", "CUMEMHIST_CONTEXT", "CUMEMHIST_MAX_ENTRIES", "CUMEMHIST_MAX_FRAMES"};
        int given[4] = {g_enabled >= 0, g_context >= 0, g_have_entries, g_have_frames};
        for (int i = 0; i < 4; i++) {
            const char *v = getenv(vars[i]);
            if (v && *v && !given[i])
                fprintf(stderr, "cumemhist: note: %s=%s from the environment is in force (an option of record overrides it)\n", vars[i], v);
        }
    }
    if (g_enabled >= 0) setenv("CUMEMHIST_ENABLED", g_enabled_names[g_enabled], 1);
    if (g_context >= 0) setenv("CUMEMHIST_CONTEXT", g_context_names[g_context], 1);
    snprintf(num, sizeof num, "%llu", (unsigned long long)g_max_entries);
    if (g_have_entries) setenv("CUMEMHIST_MAX_ENTRIES", num, 1);
    snprintf(num, sizeof num, "%d", g_max_frames);
    if (g_have_frames) setenv("CUMEMHIST_MAX_FRAMES", num, 1);
    if (g_kernels) setenv("CUMEMHIST_KERNELS", "1", 1);
    if (g_pystacks >= 0) setenv("CUMEMHIST_PYSTACKS", g_pystacks_names[g_pystacks], 1);
    python_hook(argv0);

    /* A fixed output path goes to the launched process (recorder/config.c, by a PATH.claim
     * file): clear a claim an earlier run left, whose process is gone, and remove this run's at
     * the end (each process decided once, for good: a background child that outlives us needs
     * it no more).  A claim whose process still runs is another run's, at the same path: left
     * to it; this run's processes write PATH.PID, which is said at the end. */
    char claim[PATH_MAX + 8] = "";
    long claim_sess, claim_owner;
    unsigned long long claim_ticks;
    if (output && !strstr(output, "%p") && !strstr(output, "%r")) {
        snprintf(claim, sizeof claim, "%s.claim", output);
        /* (one with nothing to read is no process's) */
        if (!read_claim(claim, &claim_sess, &claim_owner, &claim_ticks) || !claim_owner_alive(claim_owner, claim_ticks)) unlink(claim);
    }
    cli_clear_dead_manifests();
    char manifest[128];
    uint64_t my_ticks = 0;
    cmh_proc_stat(0, NULL, &my_ticks);
    snprintf(manifest, sizeof manifest, MANIFEST_DIR "/" MANIFEST_PREFIX "%ld-%llu-XXXXXX", (long)getpid(), (unsigned long long)my_ticks);
    int mfd = mkstemp(manifest);
    if (mfd < 0) {
        cli_error("cannot create a temporary file: %s", strerror(errno));
        return 1;
    }
    close(mfd);
    setenv("CUMEMHIST_MANIFEST", manifest, 1);
    char session[32];
    snprintf(session, sizeof session, "%ld", (long)getpid());
    setenv("CUMEMHIST_SESSION", session, 1);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO; /* (no SA_RESTART: the waits below wake to pass a signal on) */
    sigemptyset(&sa.sa_mask);

    /* Signals sent to us are passed on; the terminal's (sent to the whole group, the child
     * included) are not sent twice (forward).  The handlers are in place before the child
     * exists, and the signals held until we know its pid: a loaded machine may run the
     * child well into its work before this process is scheduled again. */
    static const int passed[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
    enum { NPASSED = sizeof passed / sizeof *passed };
    struct sigaction given[NPASSED];
    sigset_t hold, was;
    sigemptyset(&hold);
    for (size_t i = 0; i < NPASSED; i++) sigaddset(&hold, passed[i]);
    sigaddset(&hold, SIGCHLD);
    sigprocmask(SIG_BLOCK, &hold, &was);
    for (size_t i = 0; i < NPASSED; i++) sigaction(passed[i], &sa, &given[i]);
    struct sigaction chld, given_chld;
    memset(&chld, 0, sizeof chld);
    chld.sa_handler = woken;
    sigemptyset(&chld.sa_mask);
    sigaction(SIGCHLD, &chld, &given_chld);
    g_child = fork();
    if (g_child < 0) {
        int e = errno;
        for (size_t i = 0; i < NPASSED; i++) sigaction(passed[i], &given[i], NULL);
        sigaction(SIGCHLD, &given_chld, NULL);
        sigprocmask(SIG_SETMASK, &was, NULL);
        cli_error("fork: %s", strerror(e));
        unlink(manifest);
        return 1;
    }
    if (g_child == 0) {
        /* the program starts with the dispositions (nohup's ignored SIGHUP) and mask we were given */
        for (size_t i = 0; i < NPASSED; i++) sigaction(passed[i], &given[i], NULL);
        sigaction(SIGCHLD, &given_chld, NULL);
        sigprocmask(SIG_SETMASK, &was, NULL);
        char me[32]; /* the snapshot path is this process's, whichever touches CUDA first */
        snprintf(me, sizeof me, "%ld", (long)getpid());
        setenv("CUMEMHIST_LAUNCHED", me, 1);
        execvp(prog[0], prog);
        int e = errno;
        FILE *mf = fopen(manifest, "a");
        if (mf) fprintf(mf, "noexec %ld\n", (long)getpid()), fclose(mf);
        cli_error("cannot run %s: %s", prog[0], strerror(e));
        _exit(127);
    }
    /* The signals stay held but while waiting (sigsuspend), so an ending one is passed on to
     * the whole run however it falls against the wait; one held meanwhile is forwarded now. */
    sigset_t wake = was;
    for (size_t i = 0; i < NPASSED; i++) sigdelset(&wake, passed[i]);
    sigdelset(&wake, SIGCHLD);
    int status = 0, ended_by = 0;
    for (;;) {
        pass_held(manifest);
        if (g_ending) {
            ended_by = g_ending, g_ending = 0;
            pass_on(manifest, session, ended_by, g_ending_from);
        }
        pid_t w = waitpid(g_child, &status, WNOHANG);
        if (w == g_child || (w < 0 && errno != EINTR)) break;
        if (w == 0) sigsuspend(&wake);
    }
    g_child_waited = 1;
    /* An ending signal reached the run: its processes write their snapshots on the way out,
     * which is waited for (bounded), so that what is said below is where they are. */
    sigprocmask(SIG_SETMASK, &wake, NULL);
    pass_held(manifest);
    if (g_ending) ended_by = g_ending, g_ending = 0, pass_on(manifest, session, ended_by, g_ending_from);
    if (ended_by && cuda_running(manifest, session)) {
        if (!quiet)
            fprintf(stderr, "cumemhist: %s passed on to the run's processes; waiting for their snapshots (at most %d s)\n",
                    ended_by == SIGTERM ? "SIGTERM" : ended_by == SIGINT ? "SIGINT" : ended_by == SIGHUP ? "SIGHUP" : "SIGQUIT", ENDING_WAIT_S);
        for (int tick = 0; tick < ENDING_WAIT_S * 20 && cuda_running(manifest, session); tick++) {
            struct timespec pause = {0, 50000000};
            nanosleep(&pause, NULL);
            pass_held(manifest);
            if (g_ending) ended_by = g_ending, g_ending = 0, pass_on(manifest, session, ended_by, g_ending_from);
        }
    }
    sigprocmask(SIG_SETMASK, &was, NULL);
    sigaction(SIGCHLD, &given_chld, NULL);
    /* from now on our own signals are ours again: the finalizing is short */
    for (size_t i = 0; i < sizeof passed / sizeof *passed; i++) signal(passed[i], SIG_DFL);

    /* What the processes did (the manifest: "touched PID PPID", "flight PID PATH", "snapshot PID
     * PATH", in order): the snapshots written, each once; for each process that touched CUDA
     * and wrote none, its flight record made into one; a process still running is named. */
    rec_run run;
    memset(&run, 0, sizeof run);
    read_manifest(manifest, &run);
    unlink(manifest);
    /* this run's claim, never another's (a run at the same path still going); one with nothing
     * to read was made during this run (an unreadable one was cleared at the start): a process
     * that could not write its content (a full disk) */
    long foreign = 0; /* the pid of another run that holds the path now */
    if (claim[0] && !read_claim(claim, &claim_sess, &claim_owner, &claim_ticks)) unlink(claim);
    else if (claim[0]) {
        if (claim_sess == (long)getpid()) unlink(claim);
        else if (claim_owner_alive(claim_owner, claim_ticks)) foreign = claim_owner;
    }
    /* the path was written by another run meanwhile (one that took it and ended during ours):
     * its file, not ours to replace */
    struct stat after;
    int changed = output && lstat(output, &after) == 0 &&
                  !(existed && after.st_dev == before.st_dev && after.st_ino == before.st_ino);
    int nfiles = 0, lost = 0, misplaced = 0, misplaced_dumps = 0;
    long misplaced_pid = 0;
    char misplaced_at[4400] = "";
    /* the launched process never used CUDA: its nearest CUDA process gets the path */
    struct stat hst; /* (a device or a pipe at -o: every process wrote through it, none has NAME.PID) */
    rec_pid *heir = claim[0] && !(lstat(output, &hst) == 0 && !S_ISREG(hst.st_mode)) ? heir_of(&run, (long)g_child) : NULL;
    char heir_path[PATH_MAX];
    if (heir && (without_pid(heir, heir_path, sizeof heir_path) != 0 || (lstat(heir_path, &hst) == 0 && !S_ISREG(hst.st_mode))))
        heir = NULL; /* a link, a device or a pipe at the path is left as it is */
    rec_pid *kept_out = NULL; /* the process that would have had the path, another run's now */
    if (heir && (foreign || changed)) kept_out = heir, heir = NULL;
    for (int i = 0; i < run.npids && !kept_out; i++)
        if (run.pids[i].pid == g_child && run.pids[i].refused_by > 0) {
            kept_out = &run.pids[i];
            if (!foreign) foreign = -run.pids[i].refused_by; /* (negative: it has ended since) */
        }
    int heir_recovers = heir && heir->flight[0] && access(heir->flight, F_OK) == 0;
    if (heir && !heir_recovers) {
        if (rename(heir->snapshot, heir_path) == 0) {
            for (int i = 0; i < run.nfiles; i++)
                if (!strcmp(run.files[i].path, heir->snapshot)) snprintf(run.files[i].path, PATH_MAX, "%s", heir_path);
            snprintf(heir->snapshot, sizeof heir->snapshot, "%s", heir_path);
        } else {
            cli_error("%s: cannot rename it to %s: %s", heir->snapshot, heir_path, strerror(errno));
            heir = NULL;
        }
    }
    for (int i = 0; i < run.npids; i++) {
        struct stat st;
        if (run.pids[i].snapshot[0] && stat(run.pids[i].snapshot, &st) == 0) run.pids[i].where = WHERE_PATH;
    }
    for (int i = 0; i < run.nfiles; i++) {
        struct stat st;
        if (stat(run.files[i].path, &st) != 0) continue;
        nfiles++;
        if (quiet) continue;
        struct stat now;
        if (S_ISREG(st.st_mode))
            fprintf(stderr, "cumemhist: wrote %s (%lld bytes)%s\n", run.files[i].path, (long long)st.st_size,
                    replacing && stat(output, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino
                        ? ", replacing the file that was there before this run"
                        : "");
        else /* a node's size is not what went through it ('wrote /dev/null (0 bytes)') */
            fprintf(stderr, "cumemhist: wrote the snapshot through %s (%s: nothing of it is kept there)\n", run.files[i].path,
                    S_ISCHR(st.st_mode) ? "a character device" : S_ISFIFO(st.st_mode) ? "a pipe" : "not a regular file");
    }
    for (int i = 0; i < run.npids; i++) {
        rec_pid *p = &run.pids[i];
        struct stat st; /* a flight record still there: its process did not finish its snapshot */
        if (p->flight[0] && stat(p->flight, &st) == 0 && p->exit_dumped && p->snapshot[0] && stat(p->snapshot, &st) == 0 &&
            p->where == WHERE_PATH) {
            /* it did (its exit dump is complete), and could not remove the flight record after:
             * the record is stale, never recovered over the snapshot */
            if (!quiet)
                fprintf(stderr, "cumemhist: pid %ld wrote its exit dump %s but could not remove its flight record %s (removed now: the snapshot has it all)\n",
                        p->pid, p->snapshot, p->flight);
            unlink(p->flight);
            continue;
        }
        if (p->flight[0] && stat(p->flight, &st) == 0) {
            /* not our child: still running, unless its pid is gone, a zombie, or another's now */
            cmh_flight_identity id;
            char err[4600];
            int proc = p->pid != g_child && cmh_flight_identify(p->flight, &id, err, sizeof err) == CMH_OK ? cli_flight_process(&id) : CLI_PROC_GONE;
            if (proc == CLI_PROC_ALIVE || proc == CLI_PROC_ALIVE_UNSURE) {
                /* the path it will write: the one its record names (a record in the runtime
                 * directory, beside a snapshot streamed through a device or a directory with no
                 * room for it, is not beside the snapshot: its name there is no path the process
                 * writes); a record without one, its own path less ".flight" */
                char will[sizeof id.snapshot_path];
                size_t fl = strlen(p->flight);
                if (id.snapshot_path[0]) snprintf(will, sizeof will, "%s", id.snapshot_path);
                else snprintf(will, sizeof will, "%.*s", (int)(fl > 7 && !strcmp(p->flight + fl - 7, ".flight") ? fl - 7 : fl), p->flight);
                const char *path = p->snapshot[0] ? p->snapshot : will;
                struct stat wst; /* a device or a pipe is written through, nothing kept (as 'wrote ... through' says) */
                int node = lstat(path, &wst) == 0 && !S_ISREG(wst.st_mode) && !S_ISDIR(wst.st_mode);
                if (!quiet && node)
                    fprintf(stderr, "cumemhist: pid %ld is still running; it writes its snapshot through %s when it ends (%s: nothing of it is "
                                    "kept there; a copy now: cumemhist recover --live %s)\n",
                            p->pid, path, S_ISCHR(wst.st_mode) ? "a character device" : S_ISFIFO(wst.st_mode) ? "a pipe" : "not a regular file",
                            p->flight);
                else if (!quiet)
                    fprintf(stderr, "cumemhist: pid %ld is still running; it writes %s when it ends (a copy now: cumemhist recover --live %s)\n",
                            p->pid, path, p->flight);
                p->where = WHERE_RUNNING;
                continue;
            }
            /* its exit dump failed (a full disk, -o /dev/full) and the path asked for could not take
             * the recovered one (a device, a full directory): the snapshot is in the runtime
             * directory, which the status says; so is one that only the recovery could not
             * write where it asked */
            int dump_failed = cmh_flight_identify(p->flight, &id, err, sizeof err) == CMH_OK && id.state == CMH_ENDED_EXITED;
            cli_recovered res;
            if (cli_recover_flight(p->flight, p == heir ? heir_path : NULL, p->pid == g_child && !p->execed, status, 0, quiet, 0, 1, &res) == 0) {
                nfiles++;
                p->where = res.elsewhere ? WHERE_ELSEWHERE : WHERE_PATH;
                snprintf(p->got, sizeof p->got, "%s", res.path);
                if (res.elsewhere && (dump_failed || res.fell_back)) {
                    misplaced_dumps += dump_failed;
                    if (!misplaced++) {
                        misplaced_pid = p->pid;
                        snprintf(misplaced_at, sizeof misplaced_at, "%s", res.path);
                    }
                }
            } else {
                p->where = WHERE_LOST;
                lost++;
            }
        } else if (!p->snapshot[0]) {
            if (p->pid != g_child && kill((pid_t)p->pid, 0) == 0) {
                if (!quiet) fprintf(stderr, "cumemhist: pid %ld is still running (no flight record to recover)\n", p->pid);
                p->where = WHERE_RUNNING;
                continue;
            }
            p->where = WHERE_LOST;
            lost++;
            const char *fl = getenv("CUMEMHIST_FLIGHT");
            char why[PATH_MAX + 64] = "";
            if (p->noflight[0]) snprintf(why, sizeof why, " (it kept none: %s)", p->noflight);
            else if (!p->flight[0] && fl && !strcmp(fl, "0")) snprintf(why, sizeof why, " (CUMEMHIST_FLIGHT=0)");
            else if (!p->flight[0]) snprintf(why, sizeof why, " (its directory refused one: see its message above)");
            cli_error("pid %ld used CUDA but left no snapshot and no flight record%s", p->pid, why);
        }
    }
    /* who has the path, when more than one process used CUDA or the launched one did not */
    long holder = heir ? heir->pid : -1, others = 0;
    for (int i = 0; i < run.npids && claim[0]; i++) {
        if (run.pids[i].pid == g_child && !heir) holder = g_child;
        int seen = run.pids[i].pid == (heir ? heir->pid : g_child);
        for (int j = 0; j < i && !seen; j++) seen = run.pids[j].pid == run.pids[i].pid;
        others += !seen;
    }
    if (!quiet && kept_out) {
        /* the path is another run's: this run's file is PATH.PID, said with whose the path is */
        char mine[PATH_MAX + 32];
        with_pid(output, kept_out->pid, mine, sizeof mine);
        const rec_pid *k = last_of(&run, kept_out->pid);
        char is[PATH_MAX + 4500]; /* only a file that is there is named as this run's */
        if (k && k->where == WHERE_ELSEWHERE) snprintf(is, sizeof is, "could not be written to %s and is in %s", mine, k->got);
        else if (k && k->where == WHERE_LOST) snprintf(is, sizeof is, "(%s) was lost", mine);
        else snprintf(is, sizeof is, "is %s", mine);
        if (foreign > 0)
            fprintf(stderr, "cumemhist: %s is being written by pid %ld (another run, still running); this run's snapshot %s", output,
                    foreign, is);
        else if (foreign < 0)
            fprintf(stderr, "cumemhist: %s was held by pid %ld (another run) when this run's program wanted it; this run's snapshot %s",
                    output, -foreign, is);
        else
            fprintf(stderr, "cumemhist: %s was written by another run while this one ran; this run's snapshot %s", output, is);
        if (kept_out->pid == g_child) fprintf(stderr, " (pid %ld, the program started)", kept_out->pid);
        else fprintf(stderr, " (pid %ld, the CUDA process nearest pid %ld, the program started, which used no CUDA)", kept_out->pid, (long)g_child);
        say_others(&run, kept_out->pid, output);
        fputc('\n', stderr);
    } else if (!quiet && holder > 0 && (heir || others)) {
        /* only a file that is there is said to hold anything (a full directory took none) */
        const rec_pid *h = last_of(&run, holder);
        char role[128];
        struct stat ost;
        int w = h ? h->where : WHERE_UNKNOWN;
        if (w == WHERE_ELSEWHERE || w == WHERE_LOST) {
            if (heir) snprintf(role, sizeof role, "the CUDA process nearest pid %ld, the program started, which used no CUDA", (long)g_child);
            else snprintf(role, sizeof role, "the program started");
            if (w == WHERE_ELSEWHERE) fprintf(stderr, "cumemhist: %s was not written: pid %ld's snapshot (%s) is in %s", output, holder, role, h->got);
            else fprintf(stderr, "cumemhist: %s was not written: pid %ld's snapshot (%s) was lost", output, holder, role);
        } else if (heir)
            fprintf(stderr, "cumemhist: %s holds pid %ld, the CUDA process nearest pid %ld (the program started, which used no CUDA)", output,
                    holder, (long)g_child);
        else if (stat(output, &ost) == 0 && !S_ISREG(ost.st_mode) && !S_ISDIR(ost.st_mode))
            fprintf(stderr, "cumemhist: the snapshot of pid %ld (the program started) went through %s", holder, output);
        else
            fprintf(stderr, "cumemhist: %s holds pid %ld, the program started", output, holder);
        say_others(&run, holder, output);
        fputc('\n', stderr);
    }
    free(run.files);
    free(run.pids);
    free(run.parents);
    int unrecorded = !run.nloaded && !nfiles && !run.noexec && !(WIFEXITED(status) && WEXITSTATUS(status) == 127);
    if (unrecorded) /* not even the first process: ld.so refused it, or the program ignores LD_PRELOAD */
        cli_error("%s did not record %s (ld.so could not preload it, it is not libcumemhist.so, or the program is static or set-user-ID): nothing "
                  "was recorded", libpath, prog[0]);
    else if (!run.npids && !nfiles && !quiet && !run.noexec) { /* (a program that could not be run: its line said all) */
        fprintf(stderr, "cumemhist: no snapshot written: no process called a CUDA allocation entry point\n");
        /* 127 is ld.so's status for a program it could not load; on a machine with no CUDA
         * driver that is the missing libcuda.so.1: said, with the build tree's host-backed one */
        void *driver = !run.noexec && WIFEXITED(status) && WEXITSTATUS(status) == 127 ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) : NULL;
        if (driver) dlclose(driver);
        else if (!run.noexec && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
            char dir[PATH_MAX], fake[PATH_MAX + 32];
            exe_dir(argv0, dir, sizeof dir);
            snprintf(fake, sizeof fake, "%s/fakecuda/libcuda.so.1", dir);
            fprintf(stderr, "cumemhist: %s exited 127 (ld.so's status for a program it could not load) and this machine "
                            "has no CUDA driver: no libcuda.so.1 to load\n", prog[0]);
            if (access(fake, R_OK) == 0)
                fprintf(stderr, "cumemhist: without a GPU, this build's fake driver runs it: LD_LIBRARY_PATH=%s/fakecuda %s/cumemhist record ...\n",
                        dir, dir);
        }
    }
    if (unrecorded && WIFEXITED(status) && WEXITSTATUS(status) == 0) return CLI_EFILE;
    if (lost && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        cli_error("exit status 1: %d snapshot%s lost (the program itself exited 0)", lost, lost == 1 ? "" : "s");
        return CLI_EFILE;
    }
    if (misplaced && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (misplaced == 1)
            cli_error("exit status 1: pid %ld could not write its snapshot to %s (%s); it is in %s (the program itself exited 0)",
                      misplaced_pid, output ? output : "its path",
                      misplaced_dumps ? "its exit dump failed" : "its directory could not take the snapshot recovered", misplaced_at);
        else
            cli_error("exit status 1: %d processes could not write their snapshots to %s (%s); pid %ld's is in %s, the "
                      "others' beside it (the program itself exited 0)", misplaced, output ? output : "their path",
                      misplaced_dumps == misplaced ? "their exit dumps failed" : "the directory could not take them", misplaced_pid, misplaced_at);
        return CLI_EFILE;
    }

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        /* the program's death passed on as ours, for the shell's status, but never a core of
         * cumemhist: its own would replace the program's core in the same directory */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
