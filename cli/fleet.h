/*
 * fleet.h - what the commands over many records (ranks, export of several files) share: the
 * file arguments, where a directory stands for the snapshots in it.
 */
#ifndef CMH_CLI_FLEET_H
#define CMH_CLI_FLEET_H

#include <stdint.h>

typedef struct cmh_pathlist {
    char **v; /* each malloc'ed */
    uint32_t n, cap;
    uint32_t ndirs; /* arguments that were directories */
} cmh_pathlist;

/* The arguments as files: a directory becomes its *.cmh and *.pickle files (not temporaries,
 * checkpoints or flight records), in natural order (run.2 before run.10).  Returns the exit
 * status, the error said. */
int cmh_expand_paths(char **args, int nargs, cmh_pathlist *out);
void cmh_pathlist_free(cmh_pathlist *l);
/* p appended (copied); -1: out of memory */
int cmh_pathlist_add(cmh_pathlist *l, const char *p);
/* Two records of one process among the files (cmh_same_process: a .cmh and its export as a
 * pickle, a process's SIGUSR1 snapshot and its exit dump) are one process, not two: one is kept,
 * the one that holds the other's (cmh_record_holds; of two copies, a .cmh before a pickle, else
 * the first named; of two that each hold something the other lacks, the one that reaches
 * further), and each one left out is said on stderr, naming both ("cumemhist: CMD: A and B are
 * records of one process ..."), whatever the command: every command over many records counts a
 * process once.  Returns the exit status, the error said. */
int cmh_pathlist_one_per_process(cmh_pathlist *l, const char *cmd);

#endif
