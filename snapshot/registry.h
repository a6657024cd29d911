/*
 * registry.h - the per-user registry of recorded processes: how `top`, `snapshot` and the
 * exporter find what runs without being told a pid (snapshot/registry.c).
 *
 * The registry is a fixed per-user directory, whatever the environment says (a scheduler's job
 * has its own TMPDIR and no XDG_RUNTIME_DIR; the shell or service watching it has others):
 * /tmp/cumemhist-UID, else (another user made that first) /run/user/UID/cumemhist; 0700 and
 * owned by the user, or not used at all.  Readers read both.  CUMEMHIST_REGISTRY=DIR puts it
 * elsewhere outright (a test's, a container's), for the recorder and readers alike.  A process
 * whose entry is not found (another CUMEMHIST_REGISTRY, a private /tmp) is still found by its
 * pid: its flight record is mapped in it (cmh_registry_find_proc).  A recorded
 * process, once its flight record exists, puts one file there, PID.proc, written whole
 * (temporary file, then rename) and removed at its clean end:
 *
 *     cumemhist-proc 1
 *     pid 4242
 *     start 123456            (/proc/PID/stat field 22: tells a reused pid)
 *     boot 0c1d...            (/proc/sys/kernel/random/boot_id)
 *     exe 2049 1234567        (/proc/self/exe's device and inode: tells an exec into another program)
 *     flight /path/to/x.cmh.flight
 *
 * Everything else a reader shows (rank, command line, host) comes from the flight record's
 * header, which the reader checks anyway.  An entry whose pid is gone, or runs with another
 * start time or in another boot, or that runs another program now (an exec: the recorder, and its
 * exit path, are gone with the old image), is stale: readers skip it, say so once (one line for
 * them all) and move it aside as PID.gone, or remove it where its flight record is no longer
 * there (the flight record stays: it is the process's history, for `cumemhist recover`;
 * `cumemhist top --gone` lists the .gone entries).  Only regular files owned
 * by the user are read; the directory's own checks keep other users out.
 */
#ifndef CMH_REGISTRY_H
#define CMH_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

/* The runtime directory (made if need be); 0, or -1 with errno (EPERM: not a private directory
 * of ours). */
int cmh_runtime_dir(char *out, size_t outlen);

/* Registry directory which (0, 1: the places in order; CUMEMHIST_REGISTRY: 0 only), made if
 * need be: 0, or -1 with errno (ENOENT: no such place here; EPERM: not a private directory of
 * ours). */
int cmh_registry_dir(int which, char *out, size_t outlen);

/* Pid's flight record, found in the process itself (/proc/PID/maps: the recorder keeps it
 * mapped), as a path this process can open (through /proc/PID/root where the process sees
 * another /tmp); where: its CUMEMHIST_REGISTRY when it has one ("" if not).  1 found; 0 the pid
 * runs the recorder but maps no flight record; -1 not a process of ours that runs the recorder
 * (errno: ESRCH no such process, EPERM another user's, ENOEXEC no recorder loaded). */
int cmh_registry_find_proc(int64_t pid, char *flight, size_t cap, char *where, size_t wcap);

/* The recorder: register this process (its flight record at flight); remove its entry. */
int cmh_registry_add(const char *flight);
void cmh_registry_remove(void);

typedef struct cmh_registry_entry {
    int64_t pid;
    uint64_t start_ticks;
    char boot_id[40];
    unsigned long long exe_dev, exe_ino; /* 0: not said */
    char flight[4200];
    int stale;       /* the process is gone (or its pid belongs to a later one) */
    int recoverable; /* stale, and its flight record is still there (for `cumemhist recover`) */
} cmh_registry_entry;

/* Every entry of the registry, sorted by pid; *out malloc'ed (free it).  Stale ones are
 * included, marked; with remove_stale their entries leave the registry: kept aside as PID.gone
 * where the flight record is still there (cmh_registry_gone lists them), else removed.  0, or -1
 * with errno. */
int cmh_registry_list(cmh_registry_entry **out, size_t *n, int remove_stale);

/* `recover` is about to remove the flight record at flight, of the ended process pid: its
 * entry (PID.proc or PID.gone) goes too, when it names that same file (a later process given
 * the pid has a record of its own). */
void cmh_registry_forget(int64_t pid, const char *flight);

/* The processes that left the registry stale with their flight record still there, sorted by
 * pid (those whose flight record has since gone are removed, not listed).  0, or -1 with errno. */
int cmh_registry_gone(cmh_registry_entry **out, size_t *n);

/* Whether the process pid with start time start_ticks in boot boot_id runs now (start 0 or
 * boot "": not checked). */
int cmh_registry_alive(int64_t pid, uint64_t start_ticks, const char *boot_id);

/* The entry's process runs another program than the one that registered (it exec'd). */
int cmh_registry_execed(const cmh_registry_entry *e);

#endif
