/*
 * util.c - argument parsing and snapshot loading shared by every subcommand.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cumemhist: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_load(const char *path, cmh_snapshot *s)
{
    char err[1024];
    if (cmh_snapshot_load(path, s, err, sizeof err) != CMH_OK) {
        cli_error("%s", err);
        return 1;
    }
    if (s->pt_fields & CMH_PT_LEGACY_HISTORY)
        fprintf(stderr, "cumemhist: note: %s has PyTorch <= 2.0's layout (per-block history); block stacks come from it\n",
                path);
    if (s->skipped_entries)
        fprintf(stderr, "cumemhist: note: %s: %llu trace entries of actions this version does not know were skipped\n",
                path, (unsigned long long)s->skipped_entries);
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10;
    else if (*end == 'M' || *end == 'm') shift = 20;
    else if (*end == 'G' || *end == 'g') shift = 30;
    if (shift) end++;
    if (*end) return -1;
    if (shift && v > (~0ull >> shift)) return -1;
    *out = v << shift;
    return 0;
}

int cli_parse_device(const char *v, int *out)
{
    char *end;
    long d = strtol(v, &end, 10);
    if (!*v || *end || d < -1 || d > 1023) {
        cli_error("--device: '%s' is not a device number (-1 = pinned host memory)", v);
        return -1;
    }
    *out = (int)d;
    return 0;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != 0) return 0;
    if (*i + 1 >= argc) {
        cli_error("%s needs a value", name);
        exit(2);
    }
    *val = argv[++*i];
    return 1;
}

int cli_load_device(const char *path, int want, cmh_snapshot *s, int *device)
{
    if (cli_load(path, s)) return 1;
    int32_t devs[64];
    int nd = cmh_snapshot_devices(s, devs, 64);
    if (want == -2) { /* not asked: the lowest device the snapshot has */
        *device = nd ? devs[0] : 0;
        return 0;
    }
    for (int k = 0; k < nd && k < 64; k++)
        if (devs[k] == want) {
            *device = want;
            return 0;
        }
    if (!nd) { /* an empty snapshot: any device is as empty as another */
        *device = want;
        return 0;
    }
    cli_error("%s: no device %d in this snapshot", path, want);
    cmh_snapshot_free(s);
    return 1;
}
