/*
 * main.c - the cumemhist command: dispatch to one subcommand per file.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const cli_entry g_cmds[] = {
    {"record", cmd_record, "run a program and record its CUDA memory history", &cli_cmd_record},
    {"summary", cmd_summary, "torch.cuda.memory_summary()-style table of a snapshot", &cli_cmd_summary},
    {"peak", cmd_peak, "peak allocated/reserved, when, and who owned memory then", &cli_cmd_peak},
    {"leaks", cmd_leaks, "blocks still live at the end by allocation site, and which keep growing", &cli_cmd_leaks},
    {"frag", cmd_frag, "fragmentation of the reserved segments; fragmentation vs demand", &cli_cmd_frag},
    {"oom", cmd_oom, "each out-of-memory error: request, free memory, verdict, culprits", &cli_cmd_oom},
    {"owners", cmd_owners, "who holds every byte of each device: PyTorch, each library, the program, the rest", &cli_cmd_owners},
    {"merge", cmd_merge, "join a recording and PyTorch's _dump_snapshot() of the same process into one record", &cli_cmd_merge},
    {"diff", cmd_diff, "what a change did: peaks, end figures and sites, before vs after", &cli_cmd_diff},
    {"ranks", cmd_ranks, "the records of a multi-process job side by side: peaks, spread, leaking ranks, the first OOM", &cli_cmd_ranks},
    {"whatif", cmd_whatif, "replay a trace through PyTorch's allocator under other settings: would it still OOM?", &cli_cmd_whatif},
    {"kernels", cmd_kernels, "kernel timing table (record --kernels): calls, total, avg, min, max", &cli_cmd_kernels},
    {"stats", cmd_stats, "_memory_viz.py stats: how the allocator filled its segments", &cli_cmd_stats},
    {"trace", cmd_trace, "_memory_viz.py trace: the trace as pseudo-code", &cli_cmd_trace},
    {"snapshot", cmd_snapshot, "a snapshot of a running process from its flight record, without a signal", &cli_cmd_snapshot},
    {"top", cmd_top, "every recorded process's memory, live, full-screen (or one frame: --once)", &cli_cmd_top},
    {"exporter", cmd_exporter, "Prometheus / OpenMetrics metrics of the recorded processes (HTTP or textfile)", &cli_cmd_exporter},
    {"recover", cmd_recover, "the snapshot of a process that died before writing it, from its flight record", &cli_cmd_recover},
    {"symbolize", cmd_symbolize, "bake demangled names and file:line into a snapshot before it moves", &cli_cmd_symbolize},
    {"plot", cmd_plot, "allocated and reserved memory over time, as an SVG (peak, OOMs, marks)", &cli_cmd_plot},
    {"flamegraph", cmd_flamegraph, "live memory by stack at a moment: SVG flamegraph or folded stacks", &cli_cmd_flamegraph},
    {"report", cmd_report, "one self-contained HTML page: timeline, owners, leaks, fragmentation, OOMs, kernels", &cli_cmd_report},
    {"view", cmd_view, "the interactive Active Memory Timeline of every device, as one offline HTML page", &cli_cmd_view},
    {"export", cmd_export, "a snapshot for memory_viz (PyTorch pickle), JSON, a chrome (Perfetto) trace or pprof; a job as one trace or SQLite db", &cli_cmd_export},
};

static void usage(FILE *fp)
{
    fputs("usage: cumemhist <command> [options]\n\n"
          "Records the CUDA memory history of any process and explains it afterwards.\n"
          "Snapshots are cumemhist .cmh files or PyTorch _dump_snapshot() pickles.\n\ncommands:\n",
          fp);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) fprintf(fp, "  %-10s %s\n", g_cmds[i].name, g_cmds[i].what);
    fputs("\n'cumemhist <command> --help' describes a command; 'man cumemhist' all of them.\n"
          "--version prints the version; --man and --bash-completion print the manual page and the\n"
          "completion script the install puts in place; --python-path the directory to put on\n"
          "PYTHONPATH for `import cumemhist` outside `record` (PYTHONPATH=$(cumemhist --python-path)).\n",
          fp);
}

int main(int argc, char **argv)
{
    /* A reader that leaves early (`cumemhist trace x | head`) ends the command quietly, as it
     * ends cat or grep: by SIGPIPE, whatever disposition or mask the caller handed down (a
     * Python parent ignores it).  `record` keeps what it was given for the program it runs. */
    if (argc >= 2 && strcmp(argv[1], "record")) {
        signal(SIGPIPE, SIG_DFL);
        sigset_t pipe;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        sigprocmask(SIG_UNBLOCK, &pipe, NULL);
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* no output replaces a file the command reads (snapshot/atomic.c); not for the long-running
     * watchers, which read checkpoints again and again and take no input an output could name */
    if (strcmp(argv[1], "exporter") && strcmp(argv[1], "top")) cmh_inputs_guard(1);
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
    if (!strcmp(argv[1], "--man")) {
        cli_man_page(g_cmds, sizeof g_cmds / sizeof g_cmds[0], stdout);
        return cli_finish_stdout(0);
    }
    if (!strcmp(argv[1], "--python-path")) { /* PYTHONPATH=$(cumemhist --python-path) python train.py: import cumemhist */
        char dir[4096];
        if (cli_python_dir(argv[0], dir, sizeof dir) != 0) {
            cli_error("the cumemhist Python package was not found (set CUMEMHIST_PYTHON to the directory that holds cumemhist/)");
            return 1;
        }
        printf("%s\n", dir);
        return cli_finish_stdout(0);
    }
    if (!strcmp(argv[1], "--bash-completion")) {
        cli_bash_completion(g_cmds, sizeof g_cmds / sizeof g_cmds[0], stdout);
        return cli_finish_stdout(0);
    }
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(argv[1], g_cmds[i].name)) return g_cmds[i].fn(argc - 1, argv + 1);
    cli_error("unknown command '%s' (try 'cumemhist --help')", argv[1]);
    return 2;
}
