/*
 * atomic.c - writing a file so that readers see either the old one or the new one whole, never a
 * part: the data goes to a temporary file beside the target, which is renamed over it once it
 * is complete.  Every file cumemhist writes (snapshots, exports, pictures) goes through here.
 *
 * The temporary file is created inside the target's directory, opened once by descriptor
 * (openat), with O_CREAT | O_EXCL | O_NOFOLLOW and mode 0600: a symlink or file planted at that
 * name in a shared directory makes the write fail instead of being followed, and what is
 * written (stacks, paths, command lines) is readable by its owner only.  The rename happens
 * within the same directory descriptor; rename never follows a symlink at the target, it
 * replaces the link itself.  A failed write removes the temporary file and leaves the target as
 * it was.
 *
 * A target that exists and is not a regular file (a terminal, a pipe, a device such as
 * /dev/null or /dev/full) is written straight through: renaming over it would replace a device
 * node, and it has no old content to keep.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumemhist/snapshot.h"

FILE *cmh_atomic_open(cmh_atomic *a, const char *path, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->dirfd = -1;
    size_t len = strlen(path);
    if (!len || len >= sizeof a->path) {
        snprintf(err, errlen, "%s: %s", len ? path : "(empty path)", len ? "path too long" : "no file name");
        errno = ENAMETOOLONG;
        return NULL;
    }
    memcpy(a->path, path, len + 1);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[sizeof a->path];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!*base) {
        snprintf(err, errlen, "%s: is a directory name, not a file name", path);
        errno = EISDIR;
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory", path);
        errno = EISDIR;
        return NULL;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* a device, a pipe: write through it */
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || !(a->fp = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0) close(fd);
            snprintf(err, errlen, "%s: %s", path, strerror(e));
            errno = e;
            return NULL;
        }
        a->direct = 1;
        setvbuf(a->fp, NULL, _IOFBF, 1 << 16);
        return a->fp;
    }
    a->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a->dirfd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot open directory %s: %s", path, dir, strerror(e));
        errno = e;
        return NULL;
    }
    snprintf(a->base, sizeof a->base, "%s", base);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        /* pid and a counter: two threads of one process, or a crashed earlier write, never collide */
        static unsigned counter;
        snprintf(a->tmp, sizeof a->tmp, ".%s.tmp.%ld.%u", base, (long)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        fd = openat(a->dirfd, a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot create a file in %s: %s", path, dir, strerror(e));
        close(a->dirfd);
        a->dirfd = -1;
        errno = e;
        return NULL;
    }
    a->fp = fdopen(fd, "wb");
    if (!a->fp) {
        int e = errno;
        close(fd);
        unlinkat(a->dirfd, a->tmp, 0);
        close(a->dirfd);
        a->dirfd = -1;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        errno = e;
        return NULL;
    }
    setvbuf(a->fp, NULL, _IOFBF, 1 << 16);
    return a->fp;
}

int cmh_atomic_commit(cmh_atomic *a, char *err, size_t errlen)
{
    if (!a->fp) return CMH_EINVAL;
    errno = 0;
    int failed = fflush(a->fp) != 0 || ferror(a->fp);
    int e = errno;
    if (fclose(a->fp) != 0 && !failed) failed = 1, e = errno;
    a->fp = NULL;
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
    }
    close(a->dirfd);
    a->dirfd = -1;
    return failed ? CMH_EIO : CMH_OK;
}

void cmh_atomic_abort(cmh_atomic *a)
{
    if (a->fp) fclose(a->fp);
    a->fp = NULL;
    if (!a->direct && a->dirfd >= 0) {
        unlinkat(a->dirfd, a->tmp, 0);
        close(a->dirfd);
    }
    a->dirfd = -1;
}
