/*
 * util.c - what every subcommand shares: the one option parser (over each command's table),
 * the help it prints from that table, snapshot loading, and the exit statuses of cli.h.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/analyzer.h"
#include "cumemhist/merge.h"
#include "cumemhist/symbolize.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cumemhist: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_fail(const char *what, int rc)
{
    cli_error("%s: %s", what, cmh_strerror(rc));
    return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
}

int cli_finish_stdout(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("standard output: %s", strerror(errno ? errno : EIO));
        return rc ? rc : CLI_EFILE;
    }
    return rc;
}

int cli_load(const char *path, cmh_snapshot *s) { return cli_load_ex(path, s, 0); }

/* "-": the snapshot piped in (cat x.cmh | cumemhist summary -), copied into an anonymous
 * in-memory file the readers map as they map any file; its messages name "-", not that file. */
static int load_stdin(cmh_snapshot *s, unsigned flags, char *err, size_t errlen)
{
    static int read_once;
    if (read_once) {
        snprintf(err, errlen, "-: standard input was read already: one snapshot comes from it, name the others' files");
        return CMH_EINVAL;
    }
    read_once = 1;
    if (isatty(STDIN_FILENO)) {
        snprintf(err, errlen, "-: standard input is a terminal: pipe a snapshot into it (cat x.cmh | cumemhist summary -)");
        return CMH_EINVAL;
    }
    int fd = memfd_create("cumemhist-stdin", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "-: cannot hold standard input: %s", strerror(errno));
        return CMH_EIO;
    }
    char buf[1 << 16];
    size_t total = 0;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(err, errlen, "-: reading standard input: %s", strerror(errno));
            close(fd);
            return CMH_EIO;
        }
        if (!n) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                snprintf(err, errlen, "-: cannot hold standard input: %s", strerror(errno));
                close(fd);
                return errno == ENOMEM || errno == ENOSPC ? CMH_ENOMEM : CMH_EIO;
            }
            off += w;
        }
        total += (size_t)n;
    }
    if (!total) {
        snprintf(err, errlen, "-: standard input is empty (no snapshot was piped in)");
        close(fd);
        return CMH_EFORMAT;
    }
    char fdpath[64], msg[1024];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    int rc = cmh_snapshot_load_ex(fdpath, s, flags, msg, sizeof msg);
    close(fd); /* a mapping outlives its descriptor */
    size_t fl = strlen(fdpath);
    if (rc != CMH_OK) snprintf(err, errlen, "-%s", !strncmp(msg, fdpath, fl) ? msg + fl : msg);
    return rc;
}

int cli_load_ex(const char *path, cmh_snapshot *s, unsigned flags)
{
    char err[1100];
    int rc = !strcmp(path, "-") ? load_stdin(s, flags, err, sizeof err) : cmh_snapshot_load_ex(path, s, flags, err, sizeof err);
    if (rc != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    /* the recording threads numbered as the OS made them: the same numbers run after run */
    if (cmh_snapshot_number_threads(s) != CMH_OK) {
        cli_error("%s: out of memory", path);
        cmh_snapshot_free(s);
        return CLI_ENOMEM;
    }
    /* a running snapshot's "(N entries so far)" as the record's one timeline counts them, each
     * device's (cmh_ending_recount): every command then says the same count, whether it reads
     * the parts (owners), the merged view (peak, report) or PyTorch's part (summary).  A load of
     * the segments alone may lack the entries: its ending is left as written. */
    if (!(flags & CMH_LOAD_SEGMENTS) && (rc = cmh_ending_recount(s)) != CMH_OK) {
        cli_error("%s: out of memory", path);
        cmh_snapshot_free(s);
        return CLI_ENOMEM;
    }
    if (s->pt_fields & CMH_PT_LEGACY_HISTORY)
        fprintf(stderr, "cumemhist: note: %s has PyTorch <= 2.0's layout (per-block history); block stacks come from it\n",
                path);
    if (s->pt_fields & CMH_PT_NO_REQUESTED)
        fprintf(stderr,
                "cumemhist: note: %s: some live blocks carry no requested_size; their requested bytes are taken as "
                "their size, as PyTorch's viewer does (an upper bound)\n",
                path);
    if (s->unverified) /* once per file: every command loads each of its files here, once */
        fprintf(stderr, "cumemhist: note: %s: written before checksums; not verified\n", path);
    if (s->pt_fields & CMH_PT_UNKNOWN_ACTIONS) { /* kept, each in its place: how many, and which */
        uint64_t n = 0;
        uint32_t names[4];
        int nn = 0, more = 0;
        for (uint32_t i = 0; i < s->nentries; i++) {
            const cmh_entry *e = &s->entries[i];
            if (!CMH_ENTRY_UNKNOWN_ACTION(e)) continue;
            n++;
            uint32_t nm = cmh_entry_name(s, e);
            int k = 0;
            while (k < nn && strcmp(cmh_str(s, names[k]), cmh_str(s, nm))) k++;
            if (k < nn) continue;
            if (nn < 4) names[nn++] = nm;
            else more = 1;
        }
        fprintf(stderr, "cumemhist: note: %s: %llu trace %s of actions this version does not know (", path, (unsigned long long)n,
                n == 1 ? "entry is" : "entries are");
        for (int k = 0; k < nn; k++) fprintf(stderr, "%s'%s'", k ? ", " : "", cmh_str(s, names[k]));
        fprintf(stderr, "%s): kept in place (trace prints them, exports write them back); they change no figure\n",
                more ? ", ..." : "");
    }
    int assumed;
    /* (where its blocks show the NPU's rounding it is modelled without a word: the figures are
     * the allocator's; assumed, every block-size figure rests on it) */
    if (cmh_allocator_pad(s, &assumed) && assumed)
        fprintf(stderr,
                "cumemhist: note: %s: torch_npu (an Ascend NPU) in its stacks and no live block to show how requests were "
                "rounded: each is taken as padded by %u bytes first, as NPUCachingAllocator does on chips before the 910_95 "
                "(the 910_95 and later add none: there, a request that is a multiple of 512 bytes is a block 512 bytes smaller)\n",
                path, (unsigned)CMH_ALLOCATOR_NPU_PAD);
    if (s->skipped_entries)
        fprintf(stderr, "cumemhist: note: %s: %llu trace %s skipped (a size out of range)\n",
                path, (unsigned long long)s->skipped_entries, s->skipped_entries == 1 ? "entry was" : "entries were");
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

unsigned cli_symbolize_mismatched;

int cli_symbolize(const char *path, cmh_snapshot *s)
{
    cmh_symbolize_result r;
    int rc = cmh_symbolize_offline(s, CMH_SYM_ALL, &r);
    /* frames left without a line because their binary is not the one recorded: of a mismatched
     * binary none of whose frames has a line (one symbolized before the rebuild has its lines) */
    cli_symbolize_mismatched = 0;
    for (uint32_t k = 0; k < r.modules_mismatched && k < CMH_SYM_MAX_NAMED; k++) {
        uint32_t none = 0, some = 0;
        for (uint32_t i = 0; i < s->nframes && !some; i++) {
            const cmh_frame *f = &s->frames[i];
            if (f->module < 0 || (uint32_t)f->module >= s->nmodules || strcmp(cmh_str(s, s->modules[f->module].path), r.mismatched[k]))
                continue;
            if (f->line > 0) some = 1;
            else none++;
        }
        if (!some) cli_symbolize_mismatched += none;
    }
    for (uint32_t i = 0; i < r.modules_mismatched && i < CMH_SYM_MAX_NAMED; i++)
        fprintf(stderr, "cumemhist: note: %s: %s is not the binary recorded (its build id differs): its lines are not used\n",
                path, r.mismatched[i]);
    if (r.modules_mismatched > CMH_SYM_MAX_NAMED)
        fprintf(stderr, "cumemhist: note: %s: %u more binaries are not the ones recorded\n", path,
                r.modules_mismatched - CMH_SYM_MAX_NAMED);
    if (rc != CMH_OK) return cli_fail(path, rc);
    return 0;
}

/* ---- the option parser ---- */

static int bad_value(const cli_command *c, const cli_option *o, const char *v, const char *want)
{
    cli_error("%s %s: '%s' is not %s (see cumemhist %s --help)", c->name, o->name, v, want, c->name);
    return CLI_EUSAGE;
}

static int take_value(const cli_command *c, const cli_option *o, const char *v)
{
    char *end;
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->dest = 1; return 0;
    case CLI_STR: *(const char **)o->dest = v; return 0;
    case CLI_LIST: {
        cli_list *l = o->dest;
        if (l->n == CLI_LIST_MAX) return bad_value(c, o, v, "accepted: the option is given too many times");
        l->v[l->n++] = v;
        return 0;
    }
    case CLI_INT: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < o->min || x > o->max) {
            char want[96];
            snprintf(want, sizeof want, "a number from %ld to %ld", o->min, o->max);
            return bad_value(c, o, v, want);
        }
        *(int *)o->dest = (int)x;
        return 0;
    }
    case CLI_SIZE:
        if (cli_parse_u64(v, (uint64_t *)o->dest)) return bad_value(c, o, v, "a size (e.g. 1048576 or 1M)");
        return 0;
    case CLI_DEVICE: {
        long d = strtol(v, &end, 10);
        if (!*v || *end || d < -1 || d > 1023) return bad_value(c, o, v, "a device number (-1 = pinned host memory)");
        *(int *)o->dest = (int)d;
        return 0;
    }
    case CLI_PCT: {
        double x = strtod(v, &end);
        if (end != v && *end == '%') end++;
        if (end == v || *end || x < 0) return bad_value(c, o, v, "a percentage");
        *(double *)o->dest = x;
        return 0;
    }
    case CLI_CHOICE:
        for (int k = 0; o->choices[k]; k++)
            if (!strcmp(v, o->choices[k])) {
                *(int *)o->dest = k;
                return 0;
            }
        {
            char want[256] = "one of";
            for (int k = 0; o->choices[k]; k++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s %s", k ? "," : "", o->choices[k]);
            return bad_value(c, o, v, want);
        }
    }
    return CLI_EUSAGE;
}

int cli_force;

int cli_parse(const cli_command *c, int argc, char **argv, char **args, int *nargs)
{
    *nargs = 0;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_usage(c, stdout);
            return -1;
        }
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1]) { /* a positional argument ("-" alone is one: standard input) */
            if (c->stop_at_arg) break;
            if (*nargs == c->max_args) {
                cli_error("%s: too many arguments at '%s' (at most %d; see cumemhist %s --help)", c->name, a, c->max_args,
                          c->name);
                return CLI_EUSAGE;
            }
            args[(*nargs)++] = argv[i];
            continue;
        }
        const cli_option *o = NULL;
        const char *v = NULL;
        for (int k = 0; k < c->nopts && !o; k++) {
            const cli_option *t = &c->opts[k];
            const char *names[2] = {t->name, t->alias};
            for (int n = 0; n < 2 && !o; n++) {
                size_t l = names[n] ? strlen(names[n]) : 0;
                if (!l || strncmp(a, names[n], l)) continue;
                if (!a[l]) o = t;
                else if (a[l] == '=' && t->kind != CLI_FLAG) o = t, v = a + l + 1;
            }
        }
        if (!o) {
            cli_error("%s: unknown option '%s' (see cumemhist %s --help)", c->name, a, c->name);
            return CLI_EUSAGE;
        }
        if (o->kind != CLI_FLAG && !v) {
            if (i + 1 >= argc) {
                cli_error("%s: %s needs a value (%s)", c->name, o->name, o->arg ? o->arg : "see --help");
                return CLI_EUSAGE;
            }
            v = argv[++i];
        }
        int rc = take_value(c, o, v);
        if (rc) return rc;
        if (o->given) *o->given = 1;
    }
    if (c->stop_at_arg)
        for (; i < argc; i++) args[(*nargs)++] = argv[i];
    else
        for (; i < argc; i++) { /* after "--": positional only */
            if (*nargs == c->max_args) {
                cli_error("%s: too many arguments (at most %d)", c->name, c->max_args);
                return CLI_EUSAGE;
            }
            args[(*nargs)++] = argv[i];
        }
    if (*nargs < c->min_args) { /* one line that says what is missing, as every other usage error */
        cli_error("%s: %s (usage: cumemhist %s %s; 'cumemhist %s --help' says more)", c->name,
                  c->stop_at_arg ? "no program to run" : *nargs ? "too few arguments" : "no argument given", c->name, c->synopsis,
                  c->name);
        return CLI_EUSAGE;
    }
    cmh_outputs_force(cli_force);
    return 0;
}

void cli_usage(const cli_command *c, FILE *fp)
{
    fprintf(fp, "usage: cumemhist %s %s\n\n%s\n", c->name, c->synopsis, c->about);
    if (c->nopts) fputs("\noptions:\n", fp);
    for (int k = 0; k < c->nopts; k++) {
        const cli_option *o = &c->opts[k];
        char left[64];
        snprintf(left, sizeof left, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
        const char *h = o->help, *nl;
        int first = 1;
        do { /* a help text may run over several lines */
            nl = strchr(h, '\n');
            int n = nl ? (int)(nl - h) : (int)strlen(h);
            if (first && strlen(left) <= 22) fprintf(fp, "  %-22s %.*s\n", left, n, h);
            else if (first) fprintf(fp, "  %s\n  %-22s %.*s\n", left, "", n, h);
            else fprintf(fp, "  %-22s %.*s\n", "", n, h);
            first = 0;
            h = nl ? nl + 1 : h;
        } while (nl);
    }
    if (c->example) fprintf(fp, "\nexample: %s\n", c->example);
}
