/*
 * fleet.c - file arguments for the commands over many records (fleet.h): a directory's
 * snapshots, and one record per process however many files hold it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "fleet.h"
#include "cumemhist/snapshot.h"

static int add(cmh_pathlist *l, const char *p)
{
    if (l->n == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = strdup(p))) return -1;
    l->n++;
    return 0;
}

int cmh_pathlist_add(cmh_pathlist *l, const char *p) { return add(l, p); }

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

static int cmp_natural(const void *a, const void *b) { return strverscmp(*(char *const *)a, *(char *const *)b); }

int cmh_expand_paths(char **args, int nargs, cmh_pathlist *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        if (stat(args[i], &st) != 0 || !S_ISDIR(st.st_mode)) { /* a file (or nothing: its load says so) */
            if (add(out, args[i])) goto nomem;
            continue;
        }
        DIR *d = opendir(args[i]);
        if (!d) {
            cli_error("%s: %s", args[i], strerror(errno));
            cmh_pathlist_free(out);
            return CLI_EFILE;
        }
        uint32_t first = out->n;
        out->ndirs++;
        for (struct dirent *e; (e = readdir(d));) {
            const char *n = e->d_name;
            if (n[0] == '.' || strstr(n, ".tmp.") || strstr(n, ".ckpt") || !(ends_with(n, ".cmh") || ends_with(n, ".pickle")))
                continue;
            size_t len = strlen(args[i]) + strlen(n) + 2;
            char *p = malloc(len);
            if (!p) {
                closedir(d);
                goto nomem;
            }
            snprintf(p, len, "%s%s%s", args[i], ends_with(args[i], "/") ? "" : "/", n);
            int r = add(out, p);
            free(p);
            if (r) {
                closedir(d);
                goto nomem;
            }
        }
        closedir(d);
        if (out->n > first) /* (an empty directory: no list to sort, and qsort takes no null base) */
            qsort(out->v + first, out->n - first, sizeof *out->v, cmp_natural);
    }
    return 0;
nomem:
    cli_error("out of memory");
    cmh_pathlist_free(out);
    return CLI_ENOMEM;
}

void cmh_pathlist_free(cmh_pathlist *l)
{
    for (uint32_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Whether a file holds the word "cumemhist" anywhere: a pickle without it has no cumemhist dict,
 * PyTorch's own, which says no process (read whole for nothing: ranks over a thousand of them). */
static int mentions_cumemhist(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        if (fd >= 0) close(fd);
        return 1; /* (not known: read it) */
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return 1;
    int found = memmem(m, (size_t)st.st_size, "cumemhist", 9) != NULL;
    munmap(m, (size_t)st.st_size);
    return found;
}

/* A file's record as the rule weighs it: read without its traces (a .cmh skips them), whole
 * where that says no process (a pickle keeps its cumemhist dict after the trace). */
static int record_id(const char *path, cmh_record_id *id, int *cmh)
{
    cmh_snapshot s;
    char err[512];
    memset(id, 0, sizeof *id);
    *cmh = 0;
    if (!strcmp(path, "-")) return -1; /* (standard input is read once, by the command) */
    if (cmh_snapshot_load_ex(path, &s, CMH_LOAD_SEGMENTS, err, sizeof err) != CMH_OK) return -1; /* (its own load says why) */
    if (!s.pid && mentions_cumemhist(path)) {
        cmh_snapshot_free(&s);
        if (cmh_snapshot_load(path, &s, err, sizeof err) != CMH_OK) return -1;
    }
    cmh_record_id_of(&s, id);
    /* read alike: the entries of one but not the other would weigh one by count, one by time */
    id->kept = 0, id->reach = 0;
    const char *kind = cmh_recording_kind(path);
    *cmh = kind && !strcmp(kind, "a cumemhist snapshot (.cmh)");
    cmh_snapshot_free(&s);
    return 0;
}

int cmh_pathlist_one_per_process(cmh_pathlist *l, const char *cmd)
{
    if (l->n < 2) return 0;
    cmh_record_id *ids = calloc(l->n, sizeof *ids);
    int *cmh = calloc(l->n, sizeof *cmh), *ok = calloc(l->n, sizeof *ok);
    if (!ids || !cmh || !ok) {
        free(ids), free(cmh), free(ok);
        cli_error("out of memory");
        return CLI_ENOMEM;
    }
    for (uint32_t i = 0; i < l->n; i++) ok[i] = record_id(l->v[i], &ids[i], &cmh[i]) == 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        /* the one kept of this process so far, if any */
        uint32_t k = UINT32_MAX;
        for (uint32_t j = 0; j < n && k == UINT32_MAX && ok[i]; j++)
            if (ok[j] && cmh_same_process(&ids[j], &ids[i])) k = j;
        if (k == UINT32_MAX) {
            l->v[n] = l->v[i], ids[n] = ids[i], cmh[n] = cmh[i], ok[n] = ok[i];
            n++;
            continue;
        }
        int h = cmh_record_holds(&ids[i], &ids[k]);
        int take = h == CMH_HOLDS_MORE || (h == CMH_HOLDS_SAME && cmh[i] && !cmh[k]) ||
                   (h == CMH_HOLDS_APART && ids[i].dump_time_ns > ids[k].dump_time_ns);
        const char *why = h == CMH_HOLDS_SAME ? "copies of one record"
                          : h == CMH_HOLDS_APART ? "snapshots of it at two moments, each holding something the other lacks (read the other alone)"
                                                 : "snapshots of it at two moments, the one taken holding all of the other";
        char *in = take ? l->v[i] : l->v[k], *out = take ? l->v[k] : l->v[i];
        fprintf(stderr, "cumemhist: %s: %s and %s are records of one process (pid %lld on %s; %s): %s taken, %s left out\n", cmd, l->v[k],
                l->v[i], (long long)ids[i].pid, ids[i].host[0] ? ids[i].host : "this host", why, in, out);
        if (take) l->v[k] = l->v[i], ids[k] = ids[i], cmh[k] = cmh[i];
        free(out);
    }
    l->n = n;
    free(ids), free(cmh), free(ok);
    return 0;
}
