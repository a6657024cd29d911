/*
 * cli.h - what the subcommands of the cumemhist command share: one entry point per subcommand
 * (cmd_*.c, one file each), the option tables and their one parser (util.c), and the helpers
 * every report prints with (report.c).
 *
 * Exit statuses, the same for every command (docs/CLI.md):
 *   0 done; 1 a file could not be read or written (the message says which and why);
 *   2 wrong usage; 3 a check the user asked for failed (--fail-on-leak, --fail-if-peak-grows);
 *   4 out of memory; 5 a check the user asked for could not be made (--fail-on-leak where growth
 *   cannot be judged); 6 --fail-on-leak found no site growing now, but one that grew over several
 *   steps, stopped, and still holds its memory (a leak that stopped).
 */
#ifndef CMH_CLI_H
#define CMH_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"

enum { CLI_OK = 0, CLI_EFILE = 1, CLI_EUSAGE = 2, CLI_ECHECK = 3, CLI_ENOMEM = 4, CLI_EUNJUDGED = 5, CLI_ESTOPPED = 6, CLI_EOOM = 7 };

int cmd_record(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_peak(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_frag(int argc, char **argv);
int cmd_oom(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_owners(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_ranks(int argc, char **argv);
int cmd_whatif(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_view(int argc, char **argv);
/* The snapshot of a flight record's process, written to out (NULL: the record's own name),
 * saying how the process ended; the record is removed unless keep.  have_status: status is the
 * process's wait status (record's own child).  live: the process runs; write a copy and leave
 * the record untouched.  A record whose process still runs is refused (CLI_EUSAGE) unless live.
 * fallback: when the path cannot take the snapshot (a full directory, a quota, a file-size
 * limit), it goes to the runtime directory instead (`record`: nothing lost).  Returns the exit
 * status; res (when not NULL) says where the snapshot went. */
typedef struct cli_recovered {
    int elsewhere; /* in the runtime directory, not where the process asked (a device, a full directory) */
    int fell_back; /* ... because the write where it asked failed (why: the error) */
    char path[4400], why[4600];
} cli_recovered;
int cli_recover_flight(const char *flight, const char *out, int have_status, int status, int keep, int quiet, int live, int fallback,
                       cli_recovered *res);
/* Remove the manifests (cmd_record.c) that a `record` killed outright left in /tmp: those of
 * this user whose `record` (by the pid and start time in the name) no longer runs.  `record`
 * and `recover` call it; a live run's is never touched. */
void cli_clear_dead_manifests(void);
/* A directory or a snapshot given where a flight record goes: said as what it is ("PATH: a
 * snapshot, not a flight record: READS; read a snapshot with cumemhist summary, peak or view")
 * and 1; else 0 (a flight record, or something the reader names) */
int cli_not_flight_record(const char *path, const char *reads);
/* Whether the process that wrote a flight record still runs, as this host can tell. */
enum {
    CLI_PROC_GONE,        /* no such pid, a zombie, or a boot since */
    CLI_PROC_REUSED,      /* the pid runs, started at another time: another process */
    CLI_PROC_ALIVE,       /* the pid runs with the record's start time */
    CLI_PROC_ALIVE_UNSURE,/* the pid runs; the record is older than start times */
    CLI_PROC_ELSEWHERE    /* recorded on another host */
};
struct cmh_flight_identity;
int cli_flight_process(const struct cmh_flight_identity *id);

/* ---- options: each command declares a table, one parser reads them all ---- */

typedef enum cli_kind {
    CLI_FLAG,   /* int *: set to 1 */
    CLI_INT,    /* int *: an integer in [min, max] */
    CLI_SIZE,   /* uint64_t *: bytes, with an optional K/M/G suffix */
    CLI_STR,    /* const char **: any text */
    CLI_CHOICE, /* int *: the index of the value in choices (NULL-terminated) */
    CLI_DEVICE, /* int *: a device number, -1 = pinned host memory */
    CLI_PCT,    /* double *: a percentage ("5" or "5%") */
    CLI_LIST,   /* cli_list *: a value each time the option is given */
} cli_kind;

#define CLI_LIST_MAX 32
typedef struct cli_list {
    const char *v[CLI_LIST_MAX];
    int n;
} cli_list;

typedef struct cli_option {
    const char *name;  /* "--top" */
    const char *alias; /* "-o", or NULL */
    cli_kind kind;
    void *dest;
    const char *arg;  /* what the help shows as the value ("N"), NULL for a flag */
    const char *help; /* one line; a second line may follow after '\n' */
    const char *const *choices;
    long min, max; /* CLI_INT */
    int *given;    /* if not NULL: set to 1 when the option appears */
} cli_option;

typedef struct cli_command {
    const char *name;     /* "peak" */
    const char *synopsis; /* "[options] SNAPSHOT..." */
    const char *about;    /* what it does, a paragraph */
    const cli_option *opts;
    int nopts;
    int min_args, max_args; /* positional arguments */
    int stop_at_arg;        /* record: options end at the first positional argument */
    const char *example;
} cli_command;

/* Each command's table (its options, arguments and help), for the fuzz target of the parser. */
extern const cli_command cli_cmd_record, cli_cmd_summary, cli_cmd_export, cli_cmd_stats, cli_cmd_trace, cli_cmd_peak,
    cli_cmd_leaks, cli_cmd_frag, cli_cmd_oom, cli_cmd_diff, cli_cmd_kernels, cli_cmd_symbolize, cli_cmd_recover, cli_cmd_owners, cli_cmd_merge, cli_cmd_plot, cli_cmd_flamegraph, cli_cmd_report, cli_cmd_ranks, cli_cmd_whatif, cli_cmd_snapshot, cli_cmd_top,
    cli_cmd_exporter;
extern const cli_command cli_cmd_view;

#define CLI_NOPTS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The commands, as main.c dispatches them. */
typedef struct cli_entry {
    const char *name;
    int (*fn)(int, char **);
    const char *what; /* one line, for `cumemhist --help` */
    const cli_command *cmd;
} cli_entry;
/* man.c: the manual page (roff) and the bash completion script, from the tables. */
void cli_man_page(const cli_entry *cmds, size_t n, FILE *fp);
void cli_bash_completion(const cli_entry *cmds, size_t n, FILE *fp);

/* Parse argv (argv[0] = the command's name).  Positional arguments go to args (at most
 * c->max_args; with stop_at_arg, the rest of argv from the first one on).  Returns 0, or
 * CLI_EUSAGE after printing why, or -1 after printing --help (the caller exits 0). */
int cli_parse(const cli_command *c, int argc, char **argv, char **args, int *nargs);
/* --force of a command that writes -o: what is at -o is replaced even when it is not this
 * command's own earlier output (snapshot/atomic.c: CMH_OUT_AS); cli_parse passes it on. */
extern int cli_force;
#define CLI_FORCE_OPTION                                                                                          \
    {"--force", NULL, CLI_FLAG, &cli_force, NULL,                                                                 \
     "replace what is at -o even when it is not this command's own earlier output\n(without it such a file is kept: exit 1)", \
     NULL, 0, 0, NULL}
/* The command's help: synopsis, about, its options from the table, the example. */
void cli_usage(const cli_command *c, FILE *fp);

/* Print "cumemhist: <message>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Load any snapshot; on failure print the one-line error and return the exit status
 * (CLI_EFILE or CLI_ENOMEM), else 0. */
int cli_load(const char *path, cmh_snapshot *s);
/* The same for a command that needs only part of the file (CMH_LOAD_*, cmh_snapshot_load_ex). */
int cli_load_ex(const char *path, cmh_snapshot *s, unsigned flags);
/* Make its native frames readable (demangled, file:line from DWARF: cumemhist/symbolize.h),
 * saying once on stderr which binaries did not match their recorded build id. */
int cli_symbolize(const char *path, cmh_snapshot *s);
/* frames the last cli_symbolize left without a line: their binary was rebuilt since the record (its build id differs) */
extern unsigned cli_symbolize_mismatched;
/* Parse a non-negative integer with an optional K/M/G suffix (binary); -1 on error. */
int cli_parse_u64(const char *s, uint64_t *out);
/* The exit status for a CMH_* code from a computation, with the message printed. */
int cli_fail(const char *what, int rc);
/* After writing a report to stdout: flush it and turn a failed write into an error message and
 * CLI_EFILE ("cumemhist: standard output: No space left on device"). */
int cli_finish_stdout(int rc);

/* The directory of the cumemhist Python package (cmd_record.c): 0, or -1 when none is found. */
int cli_python_dir(const char *argv0, char *out, size_t n);

#endif
