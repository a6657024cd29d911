/*
 * fuzz_cli.c - libFuzzer target for the CLI's option parsing: every command's own table (its
 * options of every kind, positional limits, "--", record's stop at the program), and the size
 * parser.  The input is the argument vector, NUL-separated; its first byte picks the command.
 * Build and run with scripts/fuzz.sh cli (its -close_fd_mask=3 keeps the parser's messages out
 * of the fuzzer's log, not the sanitizers' reports).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const cli_command *const g_tables[] = {&cli_cmd_record, &cli_cmd_summary, &cli_cmd_export, &cli_cmd_stats,
                                              &cli_cmd_trace,  &cli_cmd_peak,    &cli_cmd_leaks,  &cli_cmd_frag,
                                              &cli_cmd_oom,    &cli_cmd_diff,    &cli_cmd_kernels, &cli_cmd_symbolize,
                                              &cli_cmd_recover, &cli_cmd_owners, &cli_cmd_merge, &cli_cmd_plot, &cli_cmd_flamegraph, &cli_cmd_report,
                                              &cli_cmd_ranks, &cli_cmd_whatif, &cli_cmd_snapshot, &cli_cmd_top, &cli_cmd_exporter};
#define NT (sizeof g_tables / sizeof g_tables[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size || size > 4096) return 0;
    const cli_command *c = g_tables[data[0] % NT];
    char *buf = malloc(size); /* the arguments, each NUL-terminated (the last one by us) */
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char *argv[258];
    int argc = 0;
    argv[argc++] = (char *)c->name;
    for (size_t i = 0; i < size - 1 && argc < 257; i += strlen(buf + i) + 1) argv[argc++] = buf + i;
    argv[argc] = NULL;
    /* as the commands do: room for max_args exactly (on the heap, so a write past it is caught),
     * or for the whole program with stop_at_arg */
    char **args = malloc((size_t)(c->stop_at_arg ? argc + 1 : c->max_args) * sizeof *args);
    int nargs = -1;
    int rc = cli_parse(c, argc, argv, args, &nargs);
    if (rc == 0) {
        if (nargs < c->min_args || (!c->stop_at_arg && nargs > c->max_args)) abort();
        for (int i = 0; i < nargs; i++)
            if (!args[i]) abort();
    }
    uint64_t v;
    if (cli_parse_u64(buf, &v) == 0 && !*buf) abort(); /* an empty size is an error */
    free(args);
    free(buf);
    return 0;
}
