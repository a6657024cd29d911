/*
 * man.c - the manual page and the bash completion, made from the commands' own tables (the
 * same ones --help prints and the parser reads), so neither can fall behind a new option.
 * The build writes both (`cumemhist --man`, `cumemhist --bash-completion`) and the install puts
 * them in share/man/man1/cumemhist.1 and share/bash-completion/completions/cumemhist.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Text as roff: backslashes and hyphens escaped, a line that would start with a control
 * character guarded. */
static void roff(FILE *fp, const char *s, size_t n)
{
    int bol = 1;
    for (size_t i = 0; i < n && s[i]; i++) {
        char c = s[i];
        if (bol && (c == '.' || c == '\'')) fputs("\\&", fp);
        if (c == '\\') fputs("\\e", fp);
        else if (c == '-') fputs("\\-", fp);
        else fputc(c, fp);
        bol = c == '\n';
    }
}

static void roffs(FILE *fp, const char *s) { roff(fp, s, strlen(s)); }

/* A paragraph of --help text (lines broken for a terminal) as one filled roff paragraph. */
static void para(FILE *fp, const char *s)
{
    for (const char *p = s; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        roff(fp, p, n);
        fputc(nl && nl[1] ? ' ' : '\n', fp);
        if (!nl) break;
        p = nl + 1;
    }
}

/* The environment the recorder and the command read (docs/RECORDER.md says more). */
static const char *const g_env[][2] = {
    {"CUMEMHIST_ENABLED", "state or all (default): what is recorded, as _record_memory_history(enabled=)."},
    {"CUMEMHIST_CONTEXT", "none, state, alloc or all (default): which events carry a stack."},
    {"CUMEMHIST_MAX_ENTRIES", "entries kept per device (a ring; 0 = all, the default); the oldest are dropped and counted."},
    {"CUMEMHIST_MAX_FRAMES", "frames per stack (default 32)."},
    {"CUMEMHIST_OUTPUT", "where a preloaded recorder writes its snapshot; %p is the pid, %r the rank (default cumemhist.%p.cmh)."},
    {"CUMEMHIST_FLIGHT", "megabytes of the flight record's first extent (default 4); 0 keeps no flight record."},
    {"CUMEMHIST_MEMINFO", "0: no cuMemGetInfo sample a second into the flight record (the live commands' driver-used figure)."},
    {"CUMEMHIST_SIGNAL", "0 leaves SIGUSR1 (dump now) and SIGUSR2 (drop a mark) to the program."},
    {"CUMEMHIST_KERNELS", "1 records kernel timing through the CUPTI sidecar (record --kernels)."},
    {"CUMEMHIST_UNWINDER", "fast (default): the recorder's own walk (frame pointers and .eh_frame rules), libunwind where it gives up; "
                           "fast-glibc: the same, backtrace(3) where it gives up; libunwind or glibc: only that; check: both walks, differences logged."},
    {"CUMEMHIST_LIB", "the libcumemhist.so record preloads (default: the one installed beside the command)."},
    {"CUMEMHIST_PYTHON", "the directory holding the cumemhist Python package record puts on PYTHONPATH for PyTorch co-recording."},
    {"CUMEMHIST_TORCH", "0 turns PyTorch co-recording off (record --no-torch)."},
    {"CUMEMHIST_PYSTACKS", "off, held or wait (default): when a Python thread's frames are read with its stack (record --python-stacks)."},
    {"CUMEMHIST_DEBUG", "1 makes the recorder say what it does on standard error."},
    {"CUMEMHIST_REGISTRY", "the directory of the registry of recorded processes, for the recorder and top, snapshot and exporter alike (default /tmp/cumemhist-UID: the same whatever TMPDIR or XDG_RUNTIME_DIR say)."},
};

void cli_man_page(const cli_entry *cmds, size_t n, FILE *fp)
{
    fprintf(fp, ".TH CUMEMHIST 1 \"\" \"cumemhist %s\" \"User Commands\"\n", CMH_VERSION);
    fputs(".SH NAME\ncumemhist \\- record the CUDA memory history of any process and explain it\n", fp);
    fputs(".SH SYNOPSIS\n.B cumemhist\n.I command\n[\\fIoptions\\fR] [\\fIargs\\fR]\n.br\n"
          ".B cumemhist record\n[\\fIoptions\\fR] \\fB\\-\\-\\fR \\fIprogram\\fR [\\fIargs\\fR]\n.br\n"
          ".B cumemhist\n\\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR\n",
          fp);
    fputs(".SH DESCRIPTION\n"
          "cumemhist records every CUDA driver allocation of a program, with the native stack that made it, "
          "through a preloaded library (libcumemhist.so), and explains the record afterwards: what was live at "
          "the peak, what leaked, why an allocation ran out of memory, who holds each byte.  It reads its own "
          "\\fB.cmh\\fR snapshots and PyTorch's \\fB_dump_snapshot()\\fR pickles alike, and writes PyTorch's "
          "memory_viz pickle, JSON, Chrome/Perfetto traces and pprof profiles.\n"
          ".PP\nEvery report covers every device of a snapshot (\\fB\\-\\-device\\fR \\fIN\\fR for one) and "
          "takes \\fB\\-\\-json\\fR.  A program is built and linked as usual; nothing in it changes.\n",
          fp);
    fputs(".SH COMMANDS\n", fp);
    for (size_t i = 0; i < n; i++) {
        const cli_command *c = cmds[i].cmd;
        fputs(".SS \"", fp);
        roffs(fp, c->name);
        fputs(" ", fp);
        roffs(fp, c->synopsis);
        fputs("\"\n", fp);
        para(fp, c->about);
        for (int k = 0; k < c->nopts; k++) {
            const cli_option *o = &c->opts[k];
            fputs(".TP\n", fp);
            if (o->alias) {
                fputs("\\fB", fp);
                roffs(fp, o->alias);
                fputs("\\fR, ", fp);
            }
            fputs("\\fB", fp);
            roffs(fp, o->name);
            fputs("\\fR", fp);
            if (o->arg) {
                fputs(" \\fI", fp);
                roffs(fp, o->arg);
                fputs("\\fR", fp);
            }
            fputc('\n', fp);
            para(fp, o->help);
        }
        if (c->example) {
            fputs(".PP\nExample:\n.RS\n.nf\n", fp);
            roffs(fp, c->example);
            fputs("\n.fi\n.RE\n", fp);
        }
    }
    fputs(".SH ENVIRONMENT\n", fp);
    for (size_t i = 0; i < sizeof g_env / sizeof g_env[0]; i++) {
        fprintf(fp, ".TP\n.B %s\n", g_env[i][0]);
        roffs(fp, g_env[i][1]);
        fputc('\n', fp);
    }
    fputs(".SH FILES\n.TP\n.I NAME.cmh\n"
          "a snapshot (msgpack; its format is docs/FORMAT.md of the source).\n"
          ".TP\n.I NAME.cmh.flight\n"
          "the flight record kept from the first allocation: what \\fBrecord\\fR or \\fBrecover\\fR turn into the "
          "snapshot of a process killed before it wrote one.\n"
          ".TP\n.I /tmp/cumemhist-UID/PID.proc\n"
          "a running recorded process's entry in the per-user registry \\fBtop\\fR, \\fBsnapshot\\fR and \\fBexporter\\fR read, "
          "whatever TMPDIR or XDG_RUNTIME_DIR say (else under \\fI/run/user/UID/cumemhist\\fR; \\fBCUMEMHIST_REGISTRY\\fR outright).\n",
          fp);
    fputs(".SH EXIT STATUS\n"
          "0 done; 1 a file could not be read or written (the message says which and why); 2 wrong usage; "
          "3 a check asked for failed (\\fB\\-\\-fail\\-on\\-leak\\fR, \\fB\\-\\-fail\\-if\\-peak\\-grows\\fR); "
          "4 cumemhist itself ran out of memory (never an out-of-memory error in the record); 5 a check asked for could not be made (\\fB\\-\\-fail\\-on\\-leak\\fR where growth cannot be "
          "judged, or on a record that lost part of its history: recovered from a flight record cut short, or with records dropped); 6 \\fB\\-\\-fail\\-on\\-leak\\fR found a leak that stopped: no site growing now, one that grew over "
          "several steps and still holds its memory; 7 \\fBoom \\-\\-fail\\-on\\-oom\\fR found an out-of-memory error the program saw "
          "in the record.  \\fBrecord\\fR exits with the program's own status.\n",
          fp);
    fputs(".SH EXAMPLES\n.nf\n"
          "cumemhist record \\-o train.cmh \\-\\- python train.py\n"
          "cumemhist summary train.cmh\n"
          "cumemhist leaks train.cmh \\-\\-fail\\-on\\-leak\n"
          "cumemhist export train.cmh \\-o train.pickle\n"
          "cumemhist report train.cmh \\-o train.html\n"
          "cumemhist view train.cmh \\-o view.html\n"
          ".fi\n",
          fp);
    fputs(".SH SEE ALSO\n"
          "PyTorch's torch.cuda.memory._record_memory_history, _dump_snapshot and memory_summary; "
          "https://pytorch.org/memory_viz.  The C API for allocators: <cumemhist/blocks.h> "
          "(pkg\\-config cumemhist, or find_package(cumemhist) in CMake).\n",
          fp);
}

void cli_bash_completion(const cli_entry *cmds, size_t n, FILE *fp)
{
    fprintf(fp, "# bash completion for cumemhist %s (made by 'cumemhist --bash-completion')\n", CMH_VERSION);
    fputs("_cumemhist() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]} i\n"
          "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "        COMPREPLY=($(compgen -W \"",
          fp);
    for (size_t i = 0; i < n; i++) fprintf(fp, "%s ", cmds[i].name);
    fputs("--help --version\" -- \"$cur\"))\n"
          "        return\n"
          "    fi\n"
          "    # record: after '--' the program's own words\n"
          "    for ((i = 2; i < COMP_CWORD; i++)); do\n"
          "        if [ \"$cmd\" = record ] && [ \"${COMP_WORDS[i]}\" = -- ]; then\n"
          "            COMPREPLY=($(compgen -c -- \"$cur\")); [ $((i + 1)) -lt \"$COMP_CWORD\" ] && COMPREPLY=($(compgen -f -- \"$cur\"))\n"
          "            return\n"
          "        fi\n"
          "    done\n"
          "    local opts=\"\"\n"
          "    case $cmd in\n",
          fp);
    for (size_t i = 0; i < n; i++) {
        const cli_command *c = cmds[i].cmd;
        fprintf(fp, "    %s)\n        opts=\"--help", c->name);
        for (int k = 0; k < c->nopts; k++) {
            fprintf(fp, " %s", c->opts[k].name);
            if (c->opts[k].alias) fprintf(fp, " %s", c->opts[k].alias);
        }
        fputs("\"\n        case $prev in\n", fp);
        for (int k = 0; k < c->nopts; k++) {
            const cli_option *o = &c->opts[k];
            if (o->kind == CLI_CHOICE && o->choices) {
                fprintf(fp, "        %s%s%s)\n            COMPREPLY=($(compgen -W \"", o->name, o->alias ? "|" : "", o->alias ? o->alias : "");
                for (const char *const *ch = o->choices; *ch; ch++) fprintf(fp, "%s%s", ch == o->choices ? "" : " ", *ch);
                fputs("\" -- \"$cur\"))\n            return ;;\n", fp);
            } else if (o->arg) { /* a value: a file name when it is a path, else nothing to offer */
                int path = o->kind == CLI_STR;
                fprintf(fp, "        %s%s%s)\n            %s\n            return ;;\n", o->name, o->alias ? "|" : "", o->alias ? o->alias : "",
                        path ? "COMPREPLY=($(compgen -f -- \"$cur\"))" : "COMPREPLY=()");
            }
        }
        fputs("        esac\n        ;;\n", fp);
    }
    fputs("    esac\n"
          "    if [[ $cur == -* ]]; then\n"
          "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
          "    else\n"
          "        COMPREPLY=($(compgen -f -- \"$cur\"))\n"
          "    fi\n"
          "}\n"
          "complete -o filenames -F _cumemhist cumemhist\n",
          fp);
}
