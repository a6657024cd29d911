/*
 * main.c - the cumemhist command: dispatch to one subcommand per file.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} g_cmds[] = {
    {"record", cmd_record, "run a program and record its CUDA memory history"},
    {"summary", cmd_summary, "torch.cuda.memory_summary()-style table of a snapshot"},
    {"peak", cmd_peak, "peak allocated/reserved, when, and who owned memory then"},
    {"leaks", cmd_leaks, "blocks still live at the end by allocation site, and which keep growing"},
    {"frag", cmd_frag, "fragmentation of the reserved segments; fragmentation vs demand"},
    {"oom", cmd_oom, "each out-of-memory error: request, free memory, verdict, culprits"},
    {"owners", cmd_owners, "who holds every byte of each device: PyTorch, each library, the program, the rest"},
    {"merge", cmd_merge, "join a recording and PyTorch's _dump_snapshot() of the same process into one record"},
    {"diff", cmd_diff, "what a change did: peaks, end figures and sites, before vs after"},
    {"kernels", cmd_kernels, "kernel timing table (record --kernels): calls, total, avg, min, max"},
    {"stats", cmd_stats, "_memory_viz.py stats: how the allocator filled its segments"},
    {"trace", cmd_trace, "_memory_viz.py trace: the trace as pseudo-code"},
    {"recover", cmd_recover, "the snapshot of a process that died before writing it, from its flight record"},
    {"symbolize", cmd_symbolize, "bake demangled names and file:line into a snapshot before it moves"},
    {"plot", cmd_plot, "allocated and reserved memory over time, as an SVG (peak, OOMs, marks)"},
    {"flamegraph", cmd_flamegraph, "live memory by stack at a moment: SVG flamegraph or folded stacks"},
    {"report", cmd_report, "one self-contained HTML page: timeline, owners, leaks, fragmentation, OOMs, kernels"},
    {"export", cmd_export, "write a snapshot for memory_viz (PyTorch pickle), as JSON, a chrome (Perfetto) trace or pprof"},
};

static void usage(FILE *fp)
{
    fputs("usage: cumemhist <command> [options]\n\n"
          "Records the CUDA memory history of any process and explains it afterwards.\n"
          "Snapshots are cumemhist .cmh files or PyTorch _dump_snapshot() pickles.\n\ncommands:\n",
          fp);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) fprintf(fp, "  %-10s %s\n", g_cmds[i].name, g_cmds[i].what);
    fputs("\n'cumemhist <command> --help' describes a command.\n", fp);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") && argc > 2) { /* `cumemhist help summary` = `cumemhist summary --help` */
        char *args[] = {argv[2], "--help", NULL};
        for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
            if (!strcmp(argv[2], g_cmds[i].name)) return g_cmds[i].fn(2, args);
        cli_error("unknown command '%s' (try 'cumemhist --help')", argv[2]);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return cli_finish_stdout(0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cumemhist %s\n", CMH_VERSION);
        return cli_finish_stdout(0);
    }
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(argv[1], g_cmds[i].name)) return g_cmds[i].fn(argc - 1, argv + 1);
    cli_error("unknown command '%s' (try 'cumemhist --help')", argv[1]);
    return 2;
}
