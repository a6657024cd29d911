/*
 * registry.c - the per-user registry of recorded processes (registry.h): written by the
 * recorder at its flight record's start, read by the live commands.  Plain files in a private
 * directory: no daemon, no socket, nothing to go stale but a file, which every reader checks
 * against /proc before it trusts it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumemhist/snapshot.h"
#include "registry.h"

int cmh_runtime_dir(char *out, size_t outlen)
{
    const char *x = getenv("XDG_RUNTIME_DIR"), *t = getenv("TMPDIR");
    if (x && *x == '/') snprintf(out, outlen, "%s/cumemhist", x);
    else snprintf(out, outlen, "%s/cumemhist-%ld", t && *t == '/' ? t : "/tmp", (long)getuid());
    if (mkdir(out, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (lstat(out, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* A private directory of ours at path (made 0700 if make and it is not there): 0, or -1 with
 * errno (EPERM: there, but not a real directory of ours that no one else can write). */
static int private_dir(const char *path, int make)
{
    if (make && mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (lstat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

int cmh_registry_dir(int which, char *out, size_t outlen)
{
    const char *own = getenv("CUMEMHIST_REGISTRY");
    if (own && *own == '/') { /* said outright, the same for the recorder and the readers */
        if (which) return errno = ENOENT, -1;
        snprintf(out, outlen, "%s", own);
        if (private_dir(out, 1) != 0) return -1;
        struct stat st;
        return lstat(out, &st) == 0 && (st.st_mode & 077) ? (errno = EPERM, -1) : 0;
    }
    /* Fixed places, whatever TMPDIR or XDG_RUNTIME_DIR say: a scheduler's job (its own TMPDIR, no
     * XDG_RUNTIME_DIR) and the shell or service that watches it find the same registry.  The
     * second, the login session's runtime directory (made by the system, gone when the user's last
     * session ends), only where the first cannot be had (another user made it first). */
    if (which == 0) snprintf(out, outlen, "/tmp/cumemhist-%ld", (long)getuid());
    else if (which == 1) {
        char run[64];
        snprintf(run, sizeof run, "/run/user/%ld", (long)getuid());
        if (private_dir(run, 0) != 0) return -1;
        snprintf(out, outlen, "%s/cumemhist", run);
    } else return errno = ENOENT, -1;
    if (private_dir(out, 1) != 0) return -1;
    struct stat st;
    return lstat(out, &st) == 0 && (st.st_mode & 077) ? (errno = EPERM, -1) : 0;
}

static char g_entry[4300]; /* this process's entry, "" when none */
static long g_entry_pid;

int cmh_registry_add(const char *flight)
{
    char dir[4096], tmp[4400], abs[4200];
    if (cmh_registry_dir(0, dir, sizeof dir) != 0 && cmh_registry_dir(1, dir, sizeof dir) != 0) return -1;
    if (flight[0] != '/') { /* readers run elsewhere: the path must stand on its own */
        if (!getcwd(abs, sizeof abs - 1)) return -1;
        size_t l = strlen(abs);
        snprintf(abs + l, sizeof abs - l, "/%s", flight);
    } else snprintf(abs, sizeof abs, "%s", flight);
    uint64_t start = 0;
    char boot[40];
    cmh_proc_stat(0, NULL, &start);
    cmh_boot_id(boot, sizeof boot);
    long pid = (long)getpid();
    snprintf(g_entry, sizeof g_entry, "%s/%ld.proc", dir, pid);
    snprintf(tmp, sizeof tmp, "%s/.%ld.proc.tmp", dir, pid);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return g_entry[0] = 0, -1;
    char buf[4600];
    struct stat xs; /* the program it runs: an exec into another leaves the pid and start time as they were */
    unsigned long long xdev = 0, xino = 0;
    if (stat("/proc/self/exe", &xs) == 0) xdev = (unsigned long long)xs.st_dev, xino = (unsigned long long)xs.st_ino;
    int n = snprintf(buf, sizeof buf, "cumemhist-proc 1\npid %ld\nstart %llu\nboot %s\nexe %llu %llu\nflight %s\n", pid,
                     (unsigned long long)start, boot, xdev, xino, abs);
    int ok = n > 0 && n < (int)sizeof buf && write(fd, buf, (size_t)n) == n;
    close(fd);
    if (!ok || rename(tmp, g_entry) != 0) {
        unlink(tmp);
        g_entry[0] = 0;
        return -1;
    }
    g_entry_pid = pid;
    return 0;
}

void cmh_registry_remove(void)
{
    if (g_entry[0] && g_entry_pid == (long)getpid()) unlink(g_entry); /* a forked child's is not its parent's */
    g_entry[0] = 0;
}

int cmh_registry_alive(int64_t pid, uint64_t start_ticks, const char *boot_id)
{
    if (boot_id && boot_id[0]) {
        char boot[40];
        cmh_boot_id(boot, sizeof boot);
        if (boot[0] && strcmp(boot, boot_id)) return 0;
    }
    char state;
    uint64_t start;
    if (pid <= 0 || !cmh_proc_stat(pid, &state, &start) || state == 'Z' || state == 'X') return 0;
    return !start_ticks || start == start_ticks;
}

int cmh_registry_execed(const cmh_registry_entry *e)
{
    if (!e->exe_ino) return 0; /* not known (an older recorder's entry) */
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%lld/exe", (long long)e->pid);
    if (stat(path, &st) != 0) return 0; /* not ours to look at (or gone: the other checks say) */
    return (unsigned long long)st.st_dev != e->exe_dev || (unsigned long long)st.st_ino != e->exe_ino;
}

/* One entry file; 0, or -1 when it is not one (then skipped, left alone). */
static int read_entry(int dfd, const char *name, cmh_registry_entry *e)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    char buf[8192];
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && st.st_size < (off_t)sizeof buf)
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    memset(e, 0, sizeof *e);
    if (strncmp(buf, "cumemhist-proc 1\n", 17)) return -1;
    for (char *line = buf + 17, *next; *line; line = next) {
        next = strchr(line, '\n');
        if (!next) break; /* a line without its end: not written whole */
        *next++ = 0;
        if (!strncmp(line, "pid ", 4)) e->pid = strtoll(line + 4, NULL, 10);
        else if (!strncmp(line, "start ", 6)) e->start_ticks = strtoull(line + 6, NULL, 10);
        else if (!strncmp(line, "boot ", 5)) snprintf(e->boot_id, sizeof e->boot_id, "%s", line + 5);
        else if (!strncmp(line, "exe ", 4)) {
            char *end;
            e->exe_dev = strtoull(line + 4, &end, 10);
            e->exe_ino = strtoull(end, NULL, 10);
        } else if (!strncmp(line, "flight ", 7)) snprintf(e->flight, sizeof e->flight, "%s", line + 7);
    }
    return e->pid > 0 && e->flight[0] == '/' ? 0 : -1;
}

static int by_pid(const void *a, const void *b)
{
    const cmh_registry_entry *x = a, *y = b;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* The flight record is still there, a regular file of ours: something for `recover`. */
static int flight_here(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid();
}

/* PID.proc (gone 0) or PID.gone (gone 1) entries.  remove_stale: a stale .proc is renamed
 * PID.gone where its flight record is still there, else removed; a .gone whose flight record is
 * no longer there is removed and not listed. */
static int list_of(cmh_registry_entry **out, size_t *n, int remove_stale, int gone)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    cmh_registry_entry *v = NULL;
    const char *ext = gone ? ".gone" : ".proc";
    int read_one = 0, why = ENOENT;
    dev_t seen_dev = 0;
    ino_t seen_ino = 0;
    for (int which = 0; which < 2; which++) { /* each place a recorder may have registered in */
        char dir[4096];
        struct stat ds;
        if (cmh_registry_dir(which, dir, sizeof dir) != 0) {
            if (errno != ENOENT) why = errno;
            continue;
        }
        DIR *d = opendir(dir);
        if (!d) {
            why = errno;
            continue;
        }
        if (fstat(dirfd(d), &ds) == 0 && read_one && ds.st_dev == seen_dev && ds.st_ino == seen_ino) { /* (the same directory) */
            closedir(d);
            continue;
        }
        read_one = 1, seen_dev = ds.st_dev, seen_ino = ds.st_ino;
        for (struct dirent *de; (de = readdir(d));) {
            size_t l = strlen(de->d_name);
            if (l < 6 || strcmp(de->d_name + l - 5, ext) || de->d_name[0] == '.') continue;
            if (*n == cap) {
                size_t nc = cap ? cap * 2 : 16;
                cmh_registry_entry *nv = realloc(v, nc * sizeof *nv);
                if (!nv) {
                    free(v);
                    closedir(d);
                    errno = ENOMEM;
                    return -1;
                }
                v = nv, cap = nc;
            }
            cmh_registry_entry *e = &v[*n];
            if (read_entry(dirfd(d), de->d_name, e) != 0) continue;
            if (gone) {
                e->stale = 1;
                if (!(e->recoverable = flight_here(e->flight))) {
                    unlinkat(dirfd(d), de->d_name, 0);
                    continue;
                }
                (*n)++;
                continue;
            }
            e->stale = !cmh_registry_alive(e->pid, e->start_ticks, e->boot_id) || cmh_registry_execed(e);
            e->recoverable = e->stale && flight_here(e->flight);
            if (e->stale && remove_stale) {
                char to[300];
                snprintf(to, sizeof to, "%.*s.gone", (int)(l - 5), de->d_name);
                if (!e->recoverable || renameat(dirfd(d), de->d_name, dirfd(d), to) != 0) unlinkat(dirfd(d), de->d_name, 0);
            }
            (*n)++;
        }
        closedir(d);
    }
    if (!read_one) {
        free(v);
        errno = why;
        return -1;
    }
    if (*n) qsort(v, *n, sizeof *v, by_pid);
    *out = v;
    return 0;
}

int cmh_registry_list(cmh_registry_entry **out, size_t *n, int remove_stale) { return list_of(out, n, remove_stale, 0); }

void cmh_registry_forget(int64_t pid, const char *flight)
{
    struct stat mine, theirs;
    if (pid <= 0 || stat(flight, &mine) != 0) return;
    for (int which = 0; which < 2; which++) {
        char dir[4096];
        if (cmh_registry_dir(which, dir, sizeof dir) != 0) continue;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) continue;
        static const char *const exts[] = {"proc", "gone"};
        for (int i = 0; i < 2; i++) {
            char name[64];
            cmh_registry_entry e;
            snprintf(name, sizeof name, "%lld.%s", (long long)pid, exts[i]);
            if (read_entry(dfd, name, &e) == 0 && e.pid == pid && stat(e.flight, &theirs) == 0 && theirs.st_dev == mine.st_dev &&
                theirs.st_ino == mine.st_ino)
                unlinkat(dfd, name, 0);
    }
    close(dfd);
    }
}

int cmh_registry_gone(cmh_registry_entry **out, size_t *n) { return list_of(out, n, 0, 1); }

int cmh_registry_find_proc(int64_t pid, char *flight, size_t cap, char *where, size_t wcap)
{
    char path[96];
    struct stat st;
    if (where && wcap) where[0] = 0;
    snprintf(path, sizeof path, "/proc/%lld", (long long)pid);
    if (pid <= 0 || stat(path, &st) != 0) return errno = ESRCH, -1;
    if (st.st_uid != getuid()) return errno = EPERM, -1; /* (even for root: another user's is not ours) */
    snprintf(path, sizeof path, "/proc/%lld/maps", (long long)pid);
    FILE *f = fopen(path, "re");
    if (!f) return errno = EPERM, -1;
    char line[4600];
    int recorder = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        /* address perms offset dev inode path */
        unsigned long long ino = 0;
        int at = 0;
        if (sscanf(line, "%*s %*s %*s %*s %llu %n", &ino, &at) < 1 || !at) continue;
        char *file = line + at;
        size_t l = strlen(file);
        while (l && (file[l - 1] == '\n' || file[l - 1] == ' ')) file[--l] = 0;
        if (*file != '/') continue;
        const char *base = strrchr(file, '/') + 1;
        if (!strncmp(base, "libcumemhist.so", 15)) recorder = 1;
        if (found || l < 8 || strcmp(file + l - 7, ".flight")) continue; /* (" (deleted)": not there any more) */
        struct stat fs;
        if (stat(file, &fs) == 0 && (unsigned long long)fs.st_ino == ino && S_ISREG(fs.st_mode)) found = 1, snprintf(flight, cap, "%s", file);
        else { /* another /tmp (a job's private one): the process's own view of the file system */
            char in[4700];
            snprintf(in, sizeof in, "/proc/%lld/root%s", (long long)pid, file);
            if (stat(in, &fs) == 0 && (unsigned long long)fs.st_ino == ino && S_ISREG(fs.st_mode)) found = 1, snprintf(flight, cap, "%s", in);
        }
    }
    fclose(f);
    if (where && wcap) { /* where it registered, when it was told another place */
        snprintf(path, sizeof path, "/proc/%lld/environ", (long long)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char env[65536];
        ssize_t n = fd >= 0 ? read(fd, env, sizeof env - 1) : -1;
        if (fd >= 0) close(fd);
        for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(env + i) + 1) {
            env[n] = 0;
            if (!strncmp(env + i, "CUMEMHIST_REGISTRY=", 19)) snprintf(where, wcap, "%s", env + i + 19);
        }
    }
    if (found) return 1;
    if (recorder) return 0;
    return errno = ENOEXEC, -1;
}
