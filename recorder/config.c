/*
 * config.c - the recorder's options: CUMEMHIST_* variables at load, the values that
 * cmh_record_memory_history() (api.c) brings at run time, and the output path pattern.
 *
 * Defaults mirror torch.cuda.memory._record_memory_history(): enabled=all, context=all,
 * max_entries unlimited; max_frames 32 (a native stack deeper than that is rarely informative
 * and each frame costs ~10 ns to unwind).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flight_format.h"
#include "internal.h"
#include "registry.h"

cmh_config cmh_cfg = {CMH_ENABLED_ALL, CMH_CONTEXT_ALL, 0, 32, "cumemhist.%p.cmh", 0, 0};
int cmh_enabled_now = CMH_ENABLED_ALL;
int cmh_context_now = CMH_CONTEXT_ALL;
static cmh_mutex g_cfg_lock = CMH_MUTEX_INITIALIZER; /* one change of options at a time */

void cmh_log(const char *fmt, ...)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "cumemhist[%ld]: ", (long)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) return;
    size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
    buf[len++] = '\n';
    ssize_t w = write(2, buf, len);
    (void)w;
}

static int parse_choice(const char *var, const char *v, const char *const *names, int n, int dflt)
{
    if (!v || !*v) return dflt;
    for (int i = 0; i < n; i++)
        if (strcasecmp(v, names[i]) == 0) return i;
    if (strcasecmp(v, "none") == 0 || strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0) return 0;
    cmh_log("ignoring %s=%s (expected one of %s%s%s%s%s%s%s)", var, v, names[0], n > 1 ? ", " : "",
            n > 1 ? names[1] : "", n > 2 ? ", " : "", n > 2 ? names[2] : "", n > 3 ? ", " : "", n > 3 ? names[3] : "");
    return dflt;
}

static int parse_u64(const char *var, const char *v, uint64_t *out)
{
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || v[0] == '-') {
        cmh_log("ignoring %s=%s (expected a non-negative integer)", var, v);
        return 0;
    }
    *out = x;
    return 1;
}

/* A relative output pattern is made absolute once, here, at the start, against the directory
 * the process started in: a program that chdir()s later (Hydra does) still writes its snapshot
 * where its claim and flight record are, and where it was asked to.  A '%' of the directory's
 * name is doubled (not a pattern's).  Without a working directory to name, it stays relative. */
static void absolute_output(void)
{
    if (cmh_cfg.output[0] == '/') return;
    char cwd[4096], out[sizeof cmh_cfg.output];
    if (!getcwd(cwd, sizeof cwd)) return;
    size_t k = 0;
    for (const char *c = cwd; *c; c++) {
        if (k + 3 >= sizeof out) return;
        if (*c == '%') out[k++] = '%';
        out[k++] = *c;
    }
    if (snprintf(out + k, sizeof out - k, "%s%s", k == 1 ? "" : "/", cmh_cfg.output) >= (int)(sizeof out - k)) {
        cmh_log("CUMEMHIST_OUTPUT=%s: the path in %s is too long; it stays relative", cmh_cfg.output, cwd);
        return;
    }
    memcpy(cmh_cfg.output, out, sizeof out);
}

void cmh_config_from_env(void)
{
    static const char *const enabled_names[] = {"off", "state", "all"};
    static const char *const context_names[] = {"none", "state", "alloc", "all"};
    cmh_cfg.enabled = parse_choice("CUMEMHIST_ENABLED", getenv("CUMEMHIST_ENABLED"), enabled_names, 3, CMH_ENABLED_ALL);
    cmh_cfg.context = parse_choice("CUMEMHIST_CONTEXT", getenv("CUMEMHIST_CONTEXT"), context_names, 4, CMH_CONTEXT_ALL);
    uint64_t v;
    if (parse_u64("CUMEMHIST_MAX_ENTRIES", getenv("CUMEMHIST_MAX_ENTRIES"), &v)) cmh_cfg.max_entries = v;
    if (parse_u64("CUMEMHIST_MAX_FRAMES", getenv("CUMEMHIST_MAX_FRAMES"), &v))
        cmh_cfg.max_frames = v < 1 ? 1 : v > CMH_MAX_FRAMES ? CMH_MAX_FRAMES : (int)v;
    const char *o = getenv("CUMEMHIST_OUTPUT");
    if (o && *o) {
        if (strlen(o) >= sizeof cmh_cfg.output) cmh_log("ignoring CUMEMHIST_OUTPUT: path too long");
        else strcpy(cmh_cfg.output, o);
    }
    absolute_output();
    const char *d = getenv("CUMEMHIST_DEBUG");
    cmh_cfg.debug = d && *d && strcmp(d, "0") != 0;
    const char *k = getenv("CUMEMHIST_KERNELS");
    cmh_cfg.kernels = k && *k && strcmp(k, "0") != 0;
    __atomic_store_n(&cmh_enabled_now, cmh_cfg.enabled, __ATOMIC_RELEASE);
    __atomic_store_n(&cmh_context_now, cmh_cfg.context, __ATOMIC_RELEASE);
}

int cmh_config_apply(const cmh_options *o)
{
    if (!o || o->enabled < CMH_ENABLED_OFF || o->enabled > CMH_ENABLED_ALL || o->context < CMH_CONTEXT_NONE ||
        o->context > CMH_CONTEXT_ALL || o->max_frames < 0 || o->max_frames > CMH_MAX_FRAMES)
        return CMH_EINVAL;
    cmh_lock(&g_cfg_lock);
    cmh_cfg.enabled = o->enabled;
    cmh_cfg.context = o->context;
    if (o->max_frames) __atomic_store_n(&cmh_cfg.max_frames, o->max_frames, __ATOMIC_RELAXED);
    cmh_cfg.max_entries = o->max_entries;
    cmh_hist_set_capacity(o->max_entries);
    if (o->clear_history || o->enabled == CMH_ENABLED_OFF) cmh_hist_clear(); /* PyTorch: off clears too */
    __atomic_store_n(&cmh_context_now, o->context, __ATOMIC_RELEASE);
    __atomic_store_n(&cmh_enabled_now, o->enabled, __ATOMIC_RELEASE);
    cmh_unlock(&g_cfg_lock);
    return CMH_OK;
}

static int append(char *out, size_t outlen, size_t *pos, const char *s, size_t n)
{
    if (*pos + n >= outlen) return -1;
    memcpy(out + *pos, s, n);
    *pos += n;
    out[*pos] = 0;
    return 0;
}

/* A fixed path (no %p / %r) belongs to the first process that dumps to it: it claims the path
 * by creating PATH.claim holding "SESSION PID".  Every other process gets ".PID" inserted before
 * the extension, so no process ever overwrites another's snapshot, even one that has exited.
 * Under `cumemhist record` the path is the launched process's (CUMEMHIST_LAUNCHED, its pid), not
 * whichever touched CUDA first: a child forked before the program's own first allocation took it
 * otherwise (and `summary NAME` read the child).  Every other process gets ".PID" at once; when
 * the launched process never uses CUDA (a shell wrapper), `record` gives the path afterwards to
 * the CUDA process nearest it (cli/cmd_record.c).
 * A claim from another session (an earlier run) is stale and taken over once its process is gone
 * (its pid ended, or runs another process now: the claim holds the owner's start time); while
 * that process runs, the path is its own (two runs given the same path at once), and this one
 * writes PATH.PID, noted in the manifest ("claimed PID OWNER") for `record` to say.  A claim of
 * this session whose process was killed before it could write there is taken over too.  The
 * session is CUMEMHIST_SESSION (set by `cumemhist record`) or else the process's session id. */
static long session_id(void)
{
    const char *s = getenv("CUMEMHIST_SESSION");
    return s && *s ? atol(s) : (long)getsid(0);
}

static int died_without_snapshot(const char *path, long owner)
{
    if (owner <= 0 || kill((pid_t)owner, 0) == 0 || errno != ESRCH) return 0;
    char flight[4200];
    snprintf(flight, sizeof flight, "%s.flight", path);
    int fd = open(flight, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int64_t pid = 0;
    if (fd >= 0) {
        if (pread(fd, &pid, sizeof pid, offsetof(cmh_flight_header, pid)) != (ssize_t)sizeof pid) pid = 0;
        close(fd);
    }
    return pid == owner;
}

/* A snapshot path that names a FIFO or a character device (/dev/null, a pipe a collector reads):
 * every process writes its snapshot through it, and nothing is made beside it (no claim, no
 * PATH.PID, no flight record in /dev). */
int cmh_config_output_streams(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode));
}

/* The per-user runtime directory: $XDG_RUNTIME_DIR/cumemhist, else ${TMPDIR:-/tmp}/cumemhist-UID;
 * made 0700, and used only when it is a real directory of ours that no one else can write. */
int cmh_config_runtime_dir(char *out, size_t outlen) { return cmh_runtime_dir(out, outlen); }

/* Where the flight record of snapshot path snap lives: beside it, or for a snapshot streamed
 * through a FIFO or device, in the runtime directory under the snapshot's name and the pid
 * (cmh_config_flight_path_runtime: also where it goes when the snapshot's directory has no room
 * for it, flight.c). */
int cmh_config_flight_path(const char *snap, char *out, size_t outlen)
{
    if (!cmh_config_output_streams(snap)) return snprintf(out, outlen, "%s.flight", snap) < (int)outlen ? 0 : -1;
    return cmh_config_flight_path_runtime(snap, out, outlen);
}

int cmh_config_flight_path_runtime(const char *snap, char *out, size_t outlen)
{
    char dir[4096];
    if (cmh_config_runtime_dir(dir, sizeof dir) != 0) return -1;
    const char *base = strrchr(snap, '/');
    base = base ? base + 1 : snap;
    size_t stem = strlen(base);
    if (stem > 4 && !strcmp(base + stem - 4, ".cmh")) stem -= 4;
    /* NAME.PID.cmh.flight: `recover` writes NAME.PID.cmh beside it (a name with the pid in it
     * already, a fixed path's PATH.PID, gets it once) */
    char pid[32];
    int np = snprintf(pid, sizeof pid, ".%ld", (long)getpid());
    int has = stem > (size_t)np && !strncmp(base + stem - (size_t)np, pid, (size_t)np);
    return snprintf(out, outlen, "%s/%.*s%s.cmh.flight", dir, (int)stem, base, has ? "" : pid) < (int)outlen ? 0 : -1;
}

/* The owner of a claim, by its pid and (when the claim has it) its start time: 1 while that very
 * process runs (a zombie has ended; a pid given to another process since is not it). */
static int claim_owner_alive(long owner, uint64_t ticks)
{
    if (owner <= 0 || (kill((pid_t)owner, 0) != 0 && errno != EPERM)) return 0;
    char st = 0;
    uint64_t now = 0;
    if (!cmh_proc_stat(owner, &st, &now)) return 1; /* no /proc: the pid answers */
    return st != 'Z' && st != 'X' && (!ticks || ticks == now);
}

static int fixed_path_is_mine(const char *path)
{
    static int decided = -1;
    static pid_t decided_for;
    if (decided >= 0 && decided_for == getpid()) return decided;
    decided_for = getpid();
    const char *launched = getenv("CUMEMHIST_LAUNCHED");
    if (launched && *launched && atol(launched) > 0 && atol(launched) != (long)getpid()) return decided = 0;
    long sess = session_id();
    char claim[4200], mine[4300];
    snprintf(claim, sizeof claim, "%s.claim", path);
    /* The claim appears with its content in one step: write PATH.claim.PID, then link() it
     * into place, which fails if another process got there first. */
    snprintf(mine, sizeof mine, "%s.%ld", claim, (long)getpid());
    int fd = open(mine, O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return decided = 0;
    char buf[96];
    uint64_t my_ticks = 0;
    cmh_proc_stat(0, NULL, &my_ticks);
    int n = snprintf(buf, sizeof buf, "%ld %ld %llu\n", sess, (long)getpid(), (unsigned long long)my_ticks);
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
    close(fd);
    decided = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (link(mine, claim) == 0) {
            decided = 1;
            break;
        }
        FILE *f = fopen(claim, "r");
        long owner_sess = -1, owner = -1;
        unsigned long long owner_ticks = 0;
        if (f) {
            char line[128] = "";
            if (!fgets(line, sizeof line, f) || sscanf(line, "%ld %ld %llu", &owner_sess, &owner, &owner_ticks) < 2) owner_sess = owner = -1;
            fclose(f);
        }
        if (owner == (long)getpid()) {
            decided = 1;
            break;
        }
        /* this run's: not ours, unless its owner died without writing a snapshot there (its
         * flight record is still at the path; the new owner keeps it aside) */
        if (owner_sess == sess && !died_without_snapshot(path, owner)) break;
        /* another run's whose process still runs (two runs given the same path): its path, its
         * flight record beside it; this process writes PATH.PID, and `record` says whose PATH is */
        if (owner_sess != sess && claim_owner_alive(owner, owner_ticks)) {
            char who[64];
            snprintf(who, sizeof who, "%ld", owner);
            cmh_dump_note_manifest_word("claimed", who);
            break;
        }
        unlink(claim); /* an earlier run's */
    }
    unlink(mine);
    return decided;
}

/* The first of these variables that holds a non-negative integer, or -1. */
static int32_t env_int(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        char *end;
        if (!v || !*v) continue;
        long x = strtol(v, &end, 10);
        if (*end == 0 && x >= 0 && x <= INT32_MAX) return (int32_t)x;
    }
    return -1;
}

/* Which process of a job this is: torchrun's variables, else Slurm's, Open MPI's, MPICH's. */
void cmh_job_identity(int32_t *rank, int32_t *local_rank, int32_t *world_size)
{
    static const char *const r[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
    static const char *const l[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", NULL};
    static const char *const w[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    *rank = env_int(r);
    *local_rank = env_int(l);
    *world_size = env_int(w);
}

/* PATTERN with %p as PID, %r as the job's rank (else its local rank, else "p" PID) and %% as
 * %.  *HAS_ID: a %p or a pid-made %r, which already tells processes apart; *HAS_RANK: a %r. */
static int expand_output_pattern(const char *pattern, long pid, char *out, size_t outlen, int *has_id, int *has_rank)
{
    size_t pos = 0;
    char num[64];
    *has_id = *has_rank = 0;
    out[0] = 0;
    for (const char *p = pattern; *p; p++) {
        if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r' || p[1] == '%')) {
            p++;
            if (*p == '%') {
                if (append(out, outlen, &pos, "%", 1)) return -1;
                continue;
            }
            if (*p == 'p') snprintf(num, sizeof num, "%ld", pid), *has_id = 1;
            else {
                int32_t rank, local, world;
                cmh_job_identity(&rank, &local, &world); /* (a forked child inherits them) */
                /* No rank: the local rank; none either: the pid, so that processes never collide. */
                if (rank >= 0 || local >= 0) snprintf(num, sizeof num, "%d", (int)(rank >= 0 ? rank : local));
                else snprintf(num, sizeof num, "p%ld", pid), *has_id = 1;
                *has_rank = 1;
            }
            if (append(out, outlen, &pos, num, strlen(num))) return -1;
            continue;
        }
        if (append(out, outlen, &pos, p, 1)) return -1;
    }
    return 0;
}

/* OUT with ".PID" before the extension of its last path component. */
static int insert_pid(char *out, size_t outlen, long pid)
{
    char *dot = out + (cmh_path_ext(out) - out);
    char tail[4096];
    snprintf(tail, sizeof tail, "%s", dot);
    int n = snprintf(dot, outlen - (size_t)(dot - out), ".%ld%s", pid, tail);
    return n < 0 || (size_t)n >= outlen - (size_t)(dot - out) ? -1 : 0;
}

int cmh_config_child_output_path(const char *pattern, long pid, char *out, size_t outlen)
{
    int has_id, has_rank;
    if (expand_output_pattern(pattern, pid, out, outlen, &has_id, &has_rank) != 0) return -1;
    if (cmh_config_output_streams(out)) return -1;
    return has_id ? 0 : insert_pid(out, outlen, pid);
}

int cmh_config_output_path(const char *pattern, char *out, size_t outlen)
{
    int has_id, has_rank;
    if (expand_output_pattern(pattern, (long)getpid(), out, outlen, &has_id, &has_rank) != 0) return -1;
    /* %r names the rank's own process; a child it forks without exec (a DataLoader worker, a
     * compile worker) inherits its RANK, and took the rank's name: its flight record was refused
     * (the rank's, still running) and its snapshot lost or written over the rank's.  It gets
     * NAME.PID, as under a fixed path. */
    if (has_id || cmh_config_output_streams(out)) return 0;
    if (has_rank ? !cmh_process_forked_from() : fixed_path_is_mine(out)) return 0;
    return insert_pid(out, outlen, (long)getpid());
}
