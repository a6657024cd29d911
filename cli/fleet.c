/*
 * fleet.c - file arguments for the commands over many records (fleet.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "fleet.h"

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
