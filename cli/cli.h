/*
 * cli.h - what the subcommands of the cumemhist command share: one entry point per
 * subcommand (cmd_*.c) and the parsing helpers in util.c.
 */
#ifndef CMH_CLI_H
#define CMH_CLI_H

#include <stdint.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"

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

/* Print "cumemhist: <message>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Load any snapshot; on failure print the one-line error and return non-zero. */
int cli_load(const char *path, cmh_snapshot *s);
/* Load a snapshot and choose its device: want, or with want == -2 the lowest it has.  On failure
 * print why, free what was loaded and return non-zero. */
int cli_load_device(const char *path, int want, cmh_snapshot *s, int *device);
/* Parse a non-negative integer with an optional K/M/G suffix (binary); -1 on error. */
int cli_parse_u64(const char *s, uint64_t *out);
/* --device's value: a number from -1 (pinned host memory) to 1023; -1 return after an error message */
int cli_parse_device(const char *v, int *out);
/* Is argv[i] the option name (exact), consuming its value into *val (from "--x=v" or the next arg). */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);

#endif
