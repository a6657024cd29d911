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
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static const char *g_output, *g_lib;
static int g_enabled = -1, g_context = -1, g_quiet, g_kernels, g_have_entries, g_have_frames, g_max_frames;
static uint64_t g_max_entries;
static const char *const g_enabled_names[] = {"state", "all", NULL};
static const char *const g_context_names[] = {"none", "state", "alloc", "all", NULL};

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_output, "PATH",
     "snapshot path; %p = pid, %r = rank (RANK/LOCAL_RANK)\n(default cumemhist.%p.cmh; a fixed path gets .PID inserted\n"
     "for every process but the first)",
     NULL, 0, 0, NULL},
    {"--enabled", NULL, CLI_CHOICE, &g_enabled, "state|all",
     "all: live blocks and the trace history (default);\nstate: live blocks only", g_enabled_names, 0, 0, NULL},
    {"--context", NULL, CLI_CHOICE, &g_context, "none|state|alloc|all", "which events keep a stack (default all)",
     g_context_names, 0, 0, NULL},
    {"--max-entries", NULL, CLI_SIZE, &g_max_entries, "N",
     "trace entries kept per device, oldest dropped first\n(default 0 = unlimited)", NULL, 0, 0, &g_have_entries},
    {"--max-frames", NULL, CLI_INT, &g_max_frames, "N", "deepest stack kept (default 32, at most 128)", NULL, 1, 128,
     &g_have_frames},
    {"--kernels", NULL, CLI_FLAG, &g_kernels, NULL, "also record kernel timing through CUPTI (CONCURRENT_KERNEL)", NULL, 0, 0,
     NULL},
    {"--lib", NULL, CLI_STR, &g_lib, "PATH", "libcumemhist.so to preload (default: beside this command)", NULL, 0, 0, NULL},
    {"--quiet", "-q", CLI_FLAG, &g_quiet, NULL, "do not list the snapshots written", NULL, 0, 0, NULL},
};

static const cli_command g_cmd = {
    "record", "[options] -- program [args...]",
    "Run a program with the recorder preloaded and write a snapshot of its CUDA memory\n"
    "history at exit (also on SIGUSR1 and at the first out-of-memory error).  SIGUSR2\n"
    "drops a mark (\"SIGUSR2 #n\") into the trace.",
    g_opts, CLI_NOPTS(g_opts), 1, 1 << 20, 1, "cumemhist record -o train.cmh -- python train.py"};

static pid_t g_child;

static void forward(int sig)
{
    if (g_child > 0) kill(g_child, sig);
}

static int find_lib(const char *argv0, char *out, size_t n)
{
    const char *env = getenv("CUMEMHIST_LIB");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
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
    static const char *const rel[] = {"/libcumemhist.so", "/../lib/libcumemhist.so", "/../lib/cumemhist/libcumemhist.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(out, n, "%s%s", exe, rel[i]);
        if (access(out, R_OK) == 0) return 0;
    }
    return -1;
}

static int record(char **prog, const char *argv0);

int cmd_record(int argc, char **argv)
{
    char **prog = malloc((size_t)(argc + 1) * sizeof *prog);
    int nprog;
    if (!prog) return CLI_ENOMEM;
    int rc = cli_parse(&g_cmd, argc, argv, prog, &nprog);
    if (!rc) {
        prog[nprog] = NULL;
        rc = record(prog, argv[0]);
    }
    free(prog);
    return rc < 0 ? cli_finish_stdout(0) : rc;
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
    if (output) setenv("CUMEMHIST_OUTPUT", output, 1);
    if (g_enabled >= 0) setenv("CUMEMHIST_ENABLED", g_enabled_names[g_enabled], 1);
    if (g_context >= 0) setenv("CUMEMHIST_CONTEXT", g_context_names[g_context], 1);
    snprintf(num, sizeof num, "%llu", (unsigned long long)g_max_entries);
    if (g_have_entries) setenv("CUMEMHIST_MAX_ENTRIES", num, 1);
    snprintf(num, sizeof num, "%d", g_max_frames);
    if (g_have_frames) setenv("CUMEMHIST_MAX_FRAMES", num, 1);
    if (g_kernels) setenv("CUMEMHIST_KERNELS", "1", 1);

    /* A fixed output path is claimed by the first process that dumps (recorder/config.c):
     * clear a claim left by an earlier run, and remove ours afterwards. */
    char claim[PATH_MAX + 8] = "";
    if (output && !strstr(output, "%p") && !strstr(output, "%r")) {
        snprintf(claim, sizeof claim, "%s.claim", output);
        unlink(claim);
    }

    char manifest[] = "/tmp/cumemhist-manifest-XXXXXX";
    int mfd = mkstemp(manifest);
    if (mfd < 0) {
        cli_error("cannot create a temporary file: %s", strerror(errno));
        return 1;
    }
    close(mfd);
    setenv("CUMEMHIST_MANIFEST", manifest, 1);
    char session[32];
    snprintf(session, sizeof session, "%ld", (long)getpid());
    setenv("CUMEMHIST_SESSION", session, 1); /* one run: fixed-path claims are never stale within it */

    struct sigaction sa, ign;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);

    g_child = fork();
    if (g_child < 0) {
        cli_error("fork: %s", strerror(errno));
        unlink(manifest);
        return 1;
    }
    if (g_child == 0) {
        execvp(prog[0], prog);
        cli_error("cannot run %s: %s", prog[0], strerror(errno));
        _exit(127);
    }
    /* The terminal sends SIGINT/SIGQUIT to the whole group, the child included: just outlive it.
     * Signals sent to us alone are passed on. */
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGQUIT, &ign, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    int status = 0;
    while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {}

    /* Report the files, each once, in the order they were first written. */
    FILE *mf = fopen(manifest, "r");
    int nfiles = 0;
    if (mf) {
        char line[PATH_MAX + 2];
        char **seen = NULL;
        int nseen = 0;
        while (fgets(line, sizeof line, mf)) {
            line[strcspn(line, "\n")] = 0;
            int dup = 0;
            for (int k = 0; k < nseen; k++) dup |= !strcmp(seen[k], line);
            if (dup) continue;
            char **ns = realloc(seen, (size_t)(nseen + 1) * sizeof *ns);
            if (!ns) break;
            seen = ns;
            seen[nseen++] = strdup(line);
            struct stat st;
            if (!quiet && stat(line, &st) == 0) fprintf(stderr, "cumemhist: wrote %s (%lld bytes)\n", line, (long long)st.st_size);
            nfiles += stat(line, &st) == 0;
        }
        for (int k = 0; k < nseen; k++) free(seen[k]);
        free(seen);
        fclose(mf);
    }
    unlink(manifest);
    if (claim[0]) unlink(claim);
    if (!nfiles && !quiet)
        fprintf(stderr, "cumemhist: no snapshot written (no process called a CUDA allocation entry point)\n");

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
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
