/*
 * cmd_recover.c - `cumemhist recover FLIGHT [-o OUT]`: the snapshot of a process that died
 * before writing it, from the flight record it kept (analyzer/recover.c).  `cumemhist record`
 * does the same for each of its processes that left one (cli_recover_flight).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/recover.h"
#include "cumemhist/symbolize.h"

static const char *g_out;
static int g_keep;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write the snapshot (default: FLIGHT without .flight)", NULL, 0, 0, NULL},
    {"--keep", NULL, CLI_FLAG, &g_keep, NULL, "keep the flight record (and its checkpoints) afterwards", NULL, 0, 0, NULL},
};

const cli_command cli_cmd_recover = {
    "recover", "[options] FLIGHT",
    "Write the snapshot of a process that died before writing it (a crash, SIGKILL, a scheduler's\n"
    "hard limit) from the flight record it kept beside its snapshot path (NAME.cmh.flight): every\n"
    "entry it recorded, its stacks symbolized here from its module map.  `cumemhist record` does\n"
    "this by itself; this is for a program run with a plain LD_PRELOAD.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist recover cumemhist.4242.cmh.flight"};

static const char *thousands(uint64_t v)
{
    static char ring[4][32];
    static int k;
    char *b = ring[k++ & 3], tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) b[o++] = ',';
        b[o++] = tmp[i];
    }
    b[o] = 0;
    return b;
}

/* The claim on the snapshot path a killed process left (PATH.claim: "SESSION PID"): without
 * it, the next run in the same session would write elsewhere. */
static void drop_claim(const char *snapshot, long long pid)
{
    char claim[4400];
    snprintf(claim, sizeof claim, "%s.claim", snapshot);
    FILE *f = *snapshot ? fopen(claim, "r") : NULL;
    long long sess, owner;
    int mine = f && fscanf(f, "%lld %lld", &sess, &owner) == 2 && owner == pid;
    if (f) fclose(f);
    if (mine) unlink(claim);
}

int cli_recover_flight(const char *flight, const char *out, int have_status, int status, int keep, int quiet)
{
    cmh_snapshot s;
    cmh_recover_info info;
    char err[4600];
    int rc = cmh_flight_recover(flight, &s, &info, err, sizeof err);
    if (rc != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    /* how it ended: the parent's wait status says it best; else what the process marked */
    char how[160];
    if (have_status && WIFSIGNALED(status)) snprintf(how, sizeof how, "was killed by %s", cmh_signal_name(WTERMSIG(status)));
    else if (have_status && WIFEXITED(status)) snprintf(how, sizeof how, "exited with status %d without writing its snapshot", WEXITSTATUS(status));
    else if (info.state == CMH_ENDED_SIGNALED) snprintf(how, sizeof how, "was killed by %s", cmh_signal_name(info.end_signal));
    else if (info.state == CMH_ENDED_EXITED) snprintf(how, sizeof how, "exited without writing its snapshot");
    else snprintf(how, sizeof how, "ended without a word (SIGKILL?)");
    char ending[400];
    snprintf(ending, sizeof ending, "%s after %s entries (recovered from its flight record)", how, thousands(info.entries));
    cmh_strtab_intern(&s.strings, ending, strlen(ending), &s.ending);
    cmh_symbolize_result r;
    cmh_symbolize_offline(&s, CMH_SYM_ALL, &r); /* names and lines from the binaries still here */
    /* by default the record's own name without ".flight": where the process would have written
     * it, unless the record was moved (a later run keeps a dead one's as NAME.PID.cmh.flight) */
    char own[4400];
    size_t fl = strlen(flight);
    snprintf(own, sizeof own, "%.*s", fl > 7 && !strcmp(flight + fl - 7, ".flight") ? (int)(fl - 7) : 0, flight);
    const char *dest = out ? out : *own ? own : info.snapshot_path;
    if (!*dest) {
        cmh_snapshot_free(&s);
        cli_error("%s: the record does not say where its snapshot goes: name it with -o", flight);
        return CLI_EUSAGE;
    }
    rc = cmh_cmh_write_file(&s, dest, err, sizeof err);
    cmh_snapshot_free(&s);
    if (rc != CMH_OK) {
        cli_error("%s", err);
        return rc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    if (!quiet && info.unverified)
        fprintf(stderr, "cumemhist: note: %s: written before checksums; not verified\n", flight);
    if (!quiet) {
        fprintf(stderr, "cumemhist: pid %lld %s after %s entries; snapshot %s", (long long)info.pid, how + (strncmp(how, "was ", 4) ? 0 : 4),
                thousands(info.entries), dest);
        if (info.torn) fprintf(stderr, " (%s torn record%s dropped)", thousands(info.torn), info.torn == 1 ? "" : "s");
        if (info.damaged)
            fprintf(stderr, " (%s damaged record%s dropped: %s not match%s checksum)", thousands(info.damaged),
                    info.damaged == 1 ? "" : "s", info.damaged == 1 ? "it does" : "they do", info.damaged == 1 ? " its" : " their");
        if (info.lost) fprintf(stderr, " (%s entr%s the full journal refused)", thousands(info.lost), info.lost == 1 ? "y" : "ies");
        fputc('\n', stderr);
    }
    if (!keep) {
        char p[4400];
        for (int i = 1; i <= 2; i++) {
            snprintf(p, sizeof p, "%s.ckpt%d.cmh", flight, i);
            unlink(p);
        }
        unlink(flight);
    }
    drop_claim(info.snapshot_path, info.pid);
    return 0;
}

int cmd_recover(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_recover, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    return cli_recover_flight(path, g_out, 0, 0, g_keep, 0);
}
