/*
 * cmd_symbolize.c - `cumemhist symbolize SNAP -o OUT`: bake the native frames' readable names and
 * file:line into a snapshot before it moves to a machine without the binaries.
 */
#include <stdio.h>

#include "cli.h"
#include "cumemhist/symbolize.h"

static const char *g_out;

static const cli_option g_opts[] = {
    {"--output", "-o", CLI_STR, &g_out, "PATH", "where to write the symbolized .cmh (written atomically)", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
};

const cli_command cli_cmd_symbolize = {
    "symbolize", "SNAPSHOT -o OUT",
    "Give a recorded snapshot's native frames their demangled names and file:line, from the DWARF\n"
    "of the binaries its module map names (separate debug files are found by build id), an inlined\n"
    "call becoming a frame of its own; a binary whose build id differs from the recorded one is\n"
    "not used.  Every report does this as it loads a snapshot; this writes it down, so that the\n"
    "snapshot reads the same where the binaries are not.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist symbolize train.cmh -o train.sym.cmh"};

int cmd_symbolize(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_symbolize, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    if (!g_out) {
        cli_error("symbolize: -o OUT is needed (see cumemhist symbolize --help)");
        return CLI_EUSAGE;
    }
    cmh_snapshot s;
    if ((rc = cli_load(path, &s))) return rc;
    if (s.source == CMH_SRC_PYTORCH)
        fprintf(stderr, "cumemhist: note: %s is a PyTorch snapshot: its frames came symbolized, there is no module map\n", path);
    cmh_symbolize_result r;
    int crc = cmh_symbolize_offline(&s, CMH_SYM_ALL, &r);
    if (crc != CMH_OK) {
        cmh_snapshot_free(&s);
        return cli_fail(path, crc);
    }
    for (uint32_t i = 0; i < r.modules_mismatched && i < CMH_SYM_MAX_NAMED; i++)
        fprintf(stderr, "cumemhist: note: %s is not the binary recorded (its build id differs): its lines are not used\n",
                r.mismatched[i]);
    char err[4400];
    crc = cmh_cmh_write_file(&s, g_out, err, sizeof err);
    cmh_snapshot_free(&s);
    if (crc != CMH_OK) {
        cli_error("%s", err);
        return crc == CMH_ENOMEM ? CLI_ENOMEM : CLI_EFILE;
    }
    printf("%s: %u frames given a line (%u inlined calls as frames), %u names demangled; %u of %u binaries used"
           "%s%u missing, %u not the ones recorded\n",
           g_out, r.lines, r.inlined, r.demangled, r.modules_used, r.modules_used + r.modules_missing + r.modules_mismatched,
           ", ", r.modules_missing, r.modules_mismatched);
    return cli_finish_stdout(0);
}
