/*
 * atomic.c - the one rule for every file cumemhist writes (snapshots, exports, pictures,
 * databases), whichever command or the recorder writes it.  What is at the path decides:
 *
 *   missing, or a regular file   replaced atomically: the data goes to a temporary file beside
 *                                the target (same directory, mode 0600, O_EXCL | O_NOFOLLOW),
 *                                is fsync'ed, and renamed over the target; then the directory
 *                                is fsync'ed.  Readers see the old file or the new one whole.
 *   a symbolic link              never followed: the link itself is replaced, as a regular
 *                                file would be; its target is untouched, and stderr says so,
 *                                naming what the link pointed to.  The names of this
 *                                process's own streams (/dev/stdout, /dev/stderr, /dev/fd/N,
 *                                /proc/self/fd/N) are the exception: they are written through.
 *   a FIFO, a character device,  written through when the format can be streamed; refused with
 *   "-" (standard output)        the reason when it needs a seekable file (SQLite).
 *   a directory, a block device, refused.  Nothing that is not a regular file this process
 *   a socket                     made is ever unlinked or renamed over.
 *
 * The temporary file is created within the target's directory by descriptor (openat), so a
 * symlink or file planted at that name in a shared directory makes the write fail instead of
 * being followed, and what is written (stacks, paths, command lines) is readable by its owner
 * only.  Permissions: a new file is 0600.  A regular file of the user's own that is replaced
 * keeps what its owner chose for it: an output meant for sharing (CMH_OUT_SHARED: HTML, SVG,
 * JSON, pprof, SQLite, folded stacks, Chrome traces, metrics) keeps its permission bits (0644
 * stays 0644); a snapshot (.cmh, pickle) stays 0600 unless the file it replaces was already
 * readable by the group or others, and then only that read access is kept (0600 | old & 0044).
 * A file someone else owns, or a link, gives nothing: the new file is 0600 (CMH_OUT_PUBLIC: 0666
 * less the umask, for a file another user's program reads).  A failed write (a full disk, a
 * quota) removes the temporary file and leaves the target as it was.
 *
 * What the user has is never replaced by mistake: an output that says what it is (CMH_OUT_AS)
 * replaces only its own earlier output of that kind, known by its mark (output_kind), unless the
 * user said --force (cmh_outputs_force); an output that is not a recording
 * (CMH_OUT_SHARED) refuses a file that holds one (a .cmh, a flight record, a pickle, by their
 * first bytes), and, under cmh_inputs_guard, no output replaces a file this process has read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include "cumemhist/snapshot.h"

/* ---- what this process reads, which no output may replace (cmh_inputs_guard) ---- */
/* A file read, as it was then: its inode, and its size and time of change, so that an inode
 * reused since by another file (a long-running exporter reads checkpoints that are then removed,
 * and its own textfile may take a freed inode) is not taken for it. */
typedef struct input_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} input_id;

static int same_file(const input_id *x, const struct stat *st)
{
    return x->dev == st->st_dev && x->ino == st->st_ino && x->size == st->st_size && x->mtime.tv_sec == st->st_mtim.tv_sec &&
           x->mtime.tv_nsec == st->st_mtim.tv_nsec;
}
static int g_guard;
static input_id *g_inputs;
static size_t g_ninputs, g_capinputs;
static pthread_mutex_t g_inputs_lock = PTHREAD_MUTEX_INITIALIZER;

int cmh_inputs_guard(int on) { return __atomic_exchange_n(&g_guard, on, __ATOMIC_ACQ_REL); }

void cmh_input_opened(int fd)
{
    struct stat st;
    if (!__atomic_load_n(&g_guard, __ATOMIC_ACQUIRE) || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    pthread_mutex_lock(&g_inputs_lock);
    int known = 0;
    for (size_t i = 0; i < g_ninputs && !known; i++) known = same_file(&g_inputs[i], &st);
    if (!known && g_ninputs == g_capinputs) {
        size_t cap = g_capinputs ? g_capinputs * 2 : 16;
        input_id *n = realloc(g_inputs, cap * sizeof *n);
        if (n) g_inputs = n, g_capinputs = cap;
    }
    if (!known && g_ninputs < g_capinputs) g_inputs[g_ninputs++] = (input_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    pthread_mutex_unlock(&g_inputs_lock);
}

static int is_input(const struct stat *st)
{
    pthread_mutex_lock(&g_inputs_lock);
    int found = 0;
    for (size_t i = 0; i < g_ninputs && !found; i++) found = same_file(&g_inputs[i], st);
    pthread_mutex_unlock(&g_inputs_lock);
    return found;
}

/* What kind of recording the regular file base in dirfd holds, by its first bytes: "a cumemhist
 * snapshot (.cmh)", "a flight record", "a pickle (a PyTorch snapshot, or an export of one)", or
 * NULL (something else, or unreadable: not ours to judge). */
static const char *recording_kind(int dirfd, const char *base)
{
    int fd = openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    unsigned char b[32];
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    if (n >= 8 && !memcmp(b, "CMHFLT01", 8)) return "a flight record";
    if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return "a pickle (a PyTorch snapshot, or an export of one)";
    if (n >= 20 && memmem(b, (size_t)n, "\xa6" "format" "\xa9" "cumemhist", 17)) return "a cumemhist snapshot (.cmh)";
    return NULL;
}

const char *cmh_recording_kind(const char *path) { return recording_kind(AT_FDCWD, path); }

/* ---- our own earlier outputs (CMH_OUT_AS): replaced; anything else kept unless --force ---- */
static int g_force;
int cmh_outputs_force(int on) { return __atomic_exchange_n(&g_force, on, __ATOMIC_ACQ_REL); }

static const char *const kind_name[] = {"", "a cumemhist snapshot (.cmh)", "a pickle export", "a JSON export", "a Chrome trace export",
                                        "a pprof profile export", "a SQLite export", "a page, picture or folded stacks",
                                        "the exporter's metrics textfile"};

/* Whether fd's file holds mark anywhere (a pickle's `cumemhist` dict and a JSON export's object
 * come after the segments and the trace: read through, in pieces that overlap by the mark). */
static int holds_mark(int fd, const char *mark, size_t len)
{
    char buf[8192]; /* (on the stack: thread-local storage in the preloaded recorder costs every thread of the program) */
    size_t keep = 0;
    ssize_t n;
    if (lseek(fd, 0, SEEK_SET) != 0) return 0;
    while ((n = read(fd, buf + keep, sizeof buf - keep)) > 0) {
        size_t have = keep + (size_t)n;
        if (memmem(buf, have, mark, len)) return 1;
        keep = have < len - 1 ? have : len - 1;
        memmove(buf, buf + have - keep, keep);
    }
    return 0;
}

/* Folded stacks as flamegraph --folded writes them: every whole line "frame;frame;... BYTES",
 * each stack once (lines of one stack are merged), by bytes from the most down.  A folded file
 * carries no mark a reader of the format would skip (flamegraph.pl warns of a line that is not a
 * stack, Speedscope takes a file for folded stacks only when every line ends in a count), so the
 * order and the uniqueness are the mark: perf's stackcollapse and inferno write theirs by stack
 * name, a file of lines summed by hand repeats stacks; and a line's stack has frames (';') or is
 * one frame as the reports name it ("f (file:line)", "<no stack: ...>"), which a metric's line
 * ("name 1") is not.  (A one-line file of that form still passes: nothing more to tell by; one of
 * our own files whose one frame is a bare name does not, and is replaced with --force only.)  The
 * head's lines only: up to 1024 of them, compared pairwise. */
static int folded_lines(const char *b, size_t n)
{
    uint16_t start[1024], len[1024];
    size_t lines = 0, at = 0;
    uint64_t prev = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        if (b[i] == 0) return 0;
        if (b[i] != '\n') continue;
        size_t e = i;
        while (e > at && b[e - 1] >= '0' && b[e - 1] <= '9') e--;
        if (e == i || e <= at + 1 || b[e - 1] != ' ' || i - e > 19) return 0;
        uint64_t count = 0;
        for (size_t k = e; k < i; k++) count = count * 10 + (uint64_t)(b[k] - '0');
        /* a stack of frames (';'), or one frame as cmh_svg_frame names it: "f (file:line)", "<no stack: ...>" */
        if (!memchr(b + at, ';', e - 1 - at) && b[e - 2] != ')' && b[e - 2] != '>') return 0;
        if (count > prev || lines == sizeof start / sizeof start[0]) return 0;
        prev = count;
        start[lines] = (uint16_t)at, len[lines] = (uint16_t)(e - 1 - at);
        for (size_t j = 0; j < lines; j++)
            if (len[j] == len[lines] && !memcmp(b + start[j], b + at, len[j])) return 0;
        lines++;
        at = i + 1;
    }
    return lines > 0;
}

/* Which of our outputs the regular file base in dirfd is (CMH_KIND_*), or 0 with what it seems
 * to hold in holds. */
static int output_kind(int dirfd, const char *base, char *holds, size_t cap)
{
    snprintf(holds, cap, "something cumemhist did not write (not one of its outputs)");
    int fd = openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(holds, cap, "a file that cannot be read to tell (%s)", strerror(errno));
        return 0;
    }
    char head[4096];
    ssize_t n = read(fd, head, sizeof head - 1);
    size_t h = n > 0 ? (size_t)n : 0;
    head[h] = 0;
    int kind = 0;
    const unsigned char *u = (const unsigned char *)head;
    if (h >= 8 && !memcmp(head, "CMHFLT01", 8)) snprintf(holds, cap, "a flight record (`cumemhist recover` reads it)");
    else if (h >= 20 && memmem(head, h, "\xa6" "format" "\xa9" "cumemhist", 17)) kind = CMH_KIND_CMH;
    else if (h >= 2 && u[0] == 0x80 && u[1] >= 2 && u[1] <= 5) {
        static const char mark[] = "\x8c\x09" "cumemhist" "\x94}(\x8c\x06" "source";
        if (holds_mark(fd, mark, sizeof mark - 1)) kind = CMH_KIND_PICKLE;
        else snprintf(holds, cap, "a pickle cumemhist did not export (a PyTorch snapshot, perhaps its only copy)");
    } else if (h >= 100 && !memcmp(head, "SQLite format 3", 16)) {
        uint32_t app = (uint32_t)u[68] << 24 | (uint32_t)u[69] << 16 | (uint32_t)u[70] << 8 | u[71];
        static const char schema[] = "CREATE TABLE processes (process_id INTEGER PRIMARY KEY, file TEXT, rank INTEGER";
        if (app == CMH_SQLITE_APPLICATION_ID || memmem(head, h, schema, sizeof schema - 1) || holds_mark(fd, schema, sizeof schema - 1))
            kind = CMH_KIND_SQLITE;
        else snprintf(holds, cap, "a SQLite database cumemhist did not export");
    } else if (!strncmp(head, "{\"segments\": [", 14)) {
        static const char mark[] = "\"cumemhist\": {\"json_schema\": ";
        if (holds_mark(fd, mark, sizeof mark - 1)) kind = CMH_KIND_JSON;
        else snprintf(holds, cap, "JSON cumemhist did not export");
    } else if (!strncmp(head, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n", 43)) kind = CMH_KIND_CHROME;
    else if (h >= 10 + sizeof CMH_PPROF_GZIP_MARK && !memcmp(head, "\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\x03", 10) &&
             !memcmp(head + 10, CMH_PPROF_GZIP_MARK, sizeof CMH_PPROF_GZIP_MARK))
        kind = CMH_KIND_PPROF; /* gzip's header with our comment (pprof.c), not any gzip header: `gzip -n` writes pprof's old one */
    else if (h >= 2 && u[0] == 0x1f && u[1] == 0x8b) snprintf(holds, cap, "gzip-compressed data cumemhist did not write");
    else if (!strncmp(head, CMH_METRICS_MARK, sizeof CMH_METRICS_MARK - 1)) kind = CMH_KIND_METRICS;
    else if (!strncmp(head, "<!DOCTYPE html>", 15) && (strstr(head, "<title>cumemhist: ") || strstr(head, "<title>cumemhist view: ")))
        kind = CMH_KIND_PAGE;
    else if (!strncmp(head, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", 85) &&
             strstr(head, "<style>"))
        kind = CMH_KIND_PAGE;
    else if (folded_lines(head, h)) kind = CMH_KIND_PAGE;
    else if (!strncmp(head, "<!DOCTYPE html>", 15) || !strncasecmp(head, "<html", 5)) snprintf(holds, cap, "a web page cumemhist did not write");
    else if (head[0] == '{' || head[0] == '[') snprintf(holds, cap, "JSON cumemhist did not export");
    close(fd);
    if (kind) snprintf(holds, cap, "%s", kind_name[kind]);
    return kind;
}

static int replaceable(int dirfd, const char *base, const struct stat *st, unsigned kind, char *holds, size_t cap)
{
    if (!kind || !S_ISREG(st->st_mode) || st->st_size == 0 || __atomic_load_n(&g_force, __ATOMIC_ACQUIRE)) return 1;
    int k = output_kind(dirfd, base, holds, cap);
    if (k == (int)kind) return 1;
    if (k) snprintf(holds + strlen(holds), cap - strlen(holds), " (this writes %s)", kind_name[kind]);
    return 0;
}

/* A name a program's source has (`flamegraph x.cmh -o train.c`, a slip of the shell's history):
 * its extension, or NULL. */
static const char *source_name(const char *base)
{
    static const char *const ext[] = {".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".cu", ".cuh", ".py", ".pyx", ".rs",
                                      ".go", ".java", ".sh", ".cmake"};
    size_t n = strlen(base);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (n > e && !strcmp(base + n - e, ext[i])) return ext[i];
    }
    return !strcmp(base, "CMakeLists.txt") || !strcmp(base, "Makefile") ? base : NULL;
}

/* The umask, read without changing it (umask() would, for every thread, for an instant). */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    unsigned m = 022;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &m) == 1) break;
    if (f) fclose(f);
    return (mode_t)(m & 0777);
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m) ? "a character device" : "not a regular file";
}

/* The name of one of this process's own descriptors, and which. */
static int own_stream(const char *path)
{
    if (!strcmp(path, "-") || !strcmp(path, "/dev/stdout")) return STDOUT_FILENO;
    if (!strcmp(path, "/dev/stderr")) return STDERR_FILENO;
    const char *n = !strncmp(path, "/dev/fd/", 8) ? path + 8 : !strncmp(path, "/proc/self/fd/", 14) ? path + 14 : NULL;
    if (!n || !*n || strspn(n, "0123456789") != strlen(n) || strlen(n) > 6) return -1;
    return atoi(n);
}

static int fail(char *err, size_t errlen, int e, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    errno = e;
    return -1;
}

/* Write through fd (a stream of ours, a FIFO, a character device), or refuse when the format
 * needs a seekable file. */
static int through(cmh_atomic *a, int fd, int owned, unsigned flags, mode_t mode, char *err, size_t errlen)
{
    if (flags & CMH_OUT_SEEKABLE) {
        if (owned) close(fd);
        return fail(err, errlen, ESPIPE, "%s: is %s; this format needs a regular file it can seek in (name a file)", a->path,
                    kind_of(mode));
    }
    if (owned) a->fd = fd;
    else if ((a->fd = dup(fd)) < 0) return fail(err, errlen, errno, "%s: %s", a->path, strerror(errno));
    fcntl(a->fd, F_SETFD, FD_CLOEXEC);
    a->direct = 1;
    return 0;
}

int cmh_output_begin(cmh_atomic *a, const char *path, unsigned flags, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->dirfd = a->fd = -1;
    size_t len = path ? strlen(path) : 0;
    if (!len || len >= sizeof a->path)
        return fail(err, errlen, ENAMETOOLONG, "%s: %s", len ? path : "(empty path)", len ? "path too long" : "no file name");
    memcpy(a->path, path, len + 1);
    if (!strcmp(path, "-")) snprintf(a->path, sizeof a->path, "standard output");

    struct stat st;
    int own = own_stream(path);
    if (own >= 0) { /* "-", /dev/stdout, /dev/fd/N: our own descriptor, whatever it is */
        if (fstat(own, &st) != 0) return fail(err, errlen, errno, "%s: %s", path, strerror(errno));
        if (S_ISREG(st.st_mode) && !(flags & CMH_OUT_SEEKABLE)) return through(a, own, 0, flags, st.st_mode, err, errlen);
        if (S_ISREG(st.st_mode)) return fail(err, errlen, ESPIPE, "%s: %s", path, "this format is written to a named file (-o FILE)");
        if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)) return through(a, own, 0, flags, st.st_mode, err, errlen);
        return fail(err, errlen, EINVAL, "%s: is %s", path, kind_of(st.st_mode));
    }

    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[sizeof a->path];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return fail(err, errlen, EISDIR, "%s: %s", path, "is a directory name, not a file name");

    a->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a->dirfd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot open directory %s: %s", path, dir, strerror(e));
        errno = e;
        return -1;
    }
    snprintf(a->base, sizeof a->base, "%s", base);
    /* what the file replaced leaves to the new one: its owner's permission choice, or the name a
     * link pointed to (said at the commit, when the link is gone) */
    if (fstatat(a->dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        const char *rec = S_ISREG(st.st_mode) && (flags & CMH_OUT_SHARED) ? recording_kind(a->dirfd, base) : NULL;
        const char *src = S_ISREG(st.st_mode) && st.st_size > 0 ? source_name(base) : NULL;
        char holds[200];
        if (S_ISREG(st.st_mode) && !is_input(&st) && !replaceable(a->dirfd, base, &st, (flags >> 8) & 0xff, holds, sizeof holds)) {
            close(a->dirfd);
            a->dirfd = -1;
            return fail(err, errlen, EEXIST, "%s: holds %s: not replaced (name another file, or --force to replace it)", path, holds);
        }
        if ((flags >> 8) & 0xff) rec = src = NULL; /* (the rule above decided: our own earlier output) */
        if (S_ISREG(st.st_mode) && (is_input(&st) || rec || src)) {
            close(a->dirfd);
            a->dirfd = -1;
            if (is_input(&st))
                return fail(err, errlen, EEXIST, "%s: %s", path, "is what this command reads: writing there would replace it (name another file)");
            if (rec) return fail(err, errlen, EEXIST, "%s: holds %s: not replaced by this output (name another file, or remove it first)", path, rec);
            return fail(err, errlen, EEXIST, "%s: has a source file's name (%s): not replaced (name another file, or remove it first)", path, src);
        }
        if (S_ISREG(st.st_mode) && st.st_uid == geteuid())
            a->mode = (flags & CMH_OUT_SHARED) ? (unsigned)(st.st_mode & 0777) : 0600u | (unsigned)(st.st_mode & 0044);
        else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(a->dirfd, base, a->link, sizeof a->link - 1);
            if (n <= 0) snprintf(a->link, sizeof a->link, "?");
            else a->link[n] = 0;
        }
    }
    /* a symbolic link is replaced, never written through; one to a directory names the
     * directory, as the directory itself would (refused, not replaced) */
    struct stat target;
    if (fstatat(a->dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) && fstatat(a->dirfd, base, &target, 0) == 0 &&
        S_ISDIR(target.st_mode)) {
        close(a->dirfd);
        a->dirfd = -1;
        return fail(err, errlen, EISDIR, "%s: %s", path, "is a link to a directory (name a file)");
    }
    if (fstatat(a->dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
            close(a->dirfd);
            a->dirfd = -1;
            return fail(err, errlen, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "%s: is %s (name a file)", path, kind_of(st.st_mode));
        }
        /* A FIFO or a device (/dev/null, /dev/full, a terminal): through it, or refused.  Opened
         * without following a link that may have replaced it meanwhile, and checked again. */
        int fd = -1;
        if (!(flags & CMH_OUT_SEEKABLE)) {
            fd = openat(a->dirfd, base, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
            if (fd < 0) {
                int e = errno;
                close(a->dirfd);
                a->dirfd = -1;
                return fail(err, errlen, e, "%s: %s", path, strerror(e));
            }
            if (fstat(fd, &st) != 0 || S_ISREG(st.st_mode)) { /* replaced by a file: treat it as one */
                close(fd);
                fd = -1;
            }
        }
        if (fd >= 0 || (flags & CMH_OUT_SEEKABLE)) {
            close(a->dirfd);
            a->dirfd = -1;
            return through(a, fd, 1, flags, st.st_mode, err, errlen);
        }
    }

    if ((flags & CMH_OUT_PUBLIC) && !a->mode && !a->link[0] && fstatat(a->dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0)
        a->mode = 0666u & ~(unsigned)current_umask(); /* a new file another user's program reads */
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        /* pid and a counter: two threads of one process, or a crashed earlier write, never collide */
        static unsigned counter;
        snprintf(a->tmp, sizeof a->tmp, ".%s.tmp.%ld.%u", base, (long)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        fd = openat(a->dirfd, a->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot create a file in %s: %s", path, dir, strerror(e));
        close(a->dirfd);
        a->dirfd = -1;
        errno = e;
        return -1;
    }
    a->fd = fd;
    snprintf(a->tmppath, sizeof a->tmppath, "%s%s%s", slash ? dir : "", slash && strcmp(dir, "/") ? "/" : "", a->tmp);
    return 0;
}

FILE *cmh_output_open(cmh_atomic *a, const char *path, unsigned flags, char *err, size_t errlen)
{
    if (cmh_output_begin(a, path, flags & ~CMH_OUT_SEEKABLE, err, errlen) != 0) return NULL;
    a->fp = fdopen(a->fd, "wb");
    if (!a->fp) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        cmh_atomic_abort(a);
        errno = e;
        return NULL;
    }
    setvbuf(a->fp, NULL, _IOFBF, 1 << 16);
    return a->fp;
}

FILE *cmh_atomic_open(cmh_atomic *a, const char *path, char *err, size_t errlen)
{
    return cmh_output_open(a, path, 0, err, errlen);
}

int cmh_atomic_commit(cmh_atomic *a, char *err, size_t errlen)
{
    if (!a->fp && a->fd < 0) return CMH_EINVAL;
    errno = 0;
    int failed = 0, e = 0;
    if (a->fp) {
        failed = fflush(a->fp) != 0 || ferror(a->fp);
        e = errno;
    }
    int fd = a->fp ? fileno(a->fp) : a->fd;
    /* the replaced file's permissions (cmh_output_begin decided them), before the name is seen;
     * best effort: a filesystem without modes (vfat) keeps the data, which matters more */
    if (!failed && !a->direct && a->mode && a->mode != 0600 && fchmod(fd, (mode_t)a->mode) != 0) {
    }
    /* the data on disk before the name points at it: a crash after the rename must not leave an
     * empty file where the old one was */
    if (!failed && !a->direct && fsync(fd) != 0) failed = 1, e = errno;
    if (a->fp) {
        if (fclose(a->fp) != 0 && !failed) failed = 1, e = errno;
    } else if (close(a->fd) != 0 && !failed && !a->direct) {
        failed = 1, e = errno;
    }
    a->fp = NULL;
    a->fd = -1;
    if (a->direct) {
        if (failed) snprintf(err, errlen, "%s: write failed: %s", a->path, strerror(e ? e : EIO));
        return failed ? CMH_EIO : CMH_OK;
    }
    if (!failed && renameat(a->dirfd, a->tmp, a->dirfd, a->base) != 0) {
        e = errno;
        snprintf(err, errlen, "%s: cannot rename into place: %s", a->path, strerror(e));
        unlinkat(a->dirfd, a->tmp, 0);
        close(a->dirfd);
        a->dirfd = -1;
        return CMH_EIO;
    }
    if (failed) {
        snprintf(err, errlen, "%s: write failed: %s", a->path, strerror(e ? e : EIO));
        unlinkat(a->dirfd, a->tmp, 0);
    } else {
        fsync(a->dirfd); /* the rename itself; some filesystems refuse: the data is safe either way */
        if (a->link[0]) /* never silent: the user may have meant the link's target */
            fprintf(stderr, "cumemhist: note: %s was a symbolic link to %s; it is now the file itself (outputs are never written "
                            "through a link; %s is untouched)\n",
                    a->path, a->link, a->link);
    }
    close(a->dirfd);
    a->dirfd = -1;
    return failed ? CMH_EIO : CMH_OK;
}

void cmh_atomic_abort(cmh_atomic *a)
{
    if (a->fp) fclose(a->fp);
    else if (a->fd >= 0) close(a->fd);
    a->fp = NULL;
    a->fd = -1;
    if (!a->direct && a->dirfd >= 0) unlinkat(a->dirfd, a->tmp, 0);
    if (a->dirfd >= 0) close(a->dirfd);
    a->dirfd = -1;
}

const char *cmh_path_ext(const char *path)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path, *dot = strrchr(base, '.');
    return dot && dot != base ? dot : path + strlen(path);
}
