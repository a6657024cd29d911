/*
 * procid.c - who a process is beyond its pid, from /proc: its start time (field 22 of
 * /proc/PID/stat, clock ticks after boot) and the boot's id.  The recorder writes both into a
 * flight record; `recover` compares them with the live system to tell a running writer from a
 * later process that was given the same pid.  The same identity tells two records of one
 * process apart from two processes' (cmh_same_process), for every command that reads many.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemhist/snapshot.h"

int cmh_proc_stat(long long pid, char *state, uint64_t *start_ticks)
{
    char path[64], buf[1024];
    if (pid > 0) snprintf(path, sizeof path, "/proc/%lld/stat", pid);
    else snprintf(path, sizeof path, "/proc/self/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* past the command name, which may hold spaces and parentheses */
    if (!p || p[1] != ' ' || !p[2]) return 0;
    if (state) *state = p[2];
    for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' '); /* p: the space before field 22 */
    *start_ticks = p ? strtoull(p + 1, NULL, 10) : 0;
    return 1;
}

void cmh_boot_id(char *out, size_t cap)
{
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, cap - 1) : 0;
    if (fd >= 0) close(fd);
    if (n < 0) n = 0;
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == 0)) n--;
    out[n] = 0;
}

void cmh_record_id_of(const cmh_snapshot *s, cmh_record_id *id)
{
    memset(id, 0, sizeof *id);
    id->pid = s->pid, id->start_time_ns = s->start_time_ns, id->dump_time_ns = s->dump_time_ns;
    snprintf(id->host, sizeof id->host, "%s", cmh_str(s, s->hostname));
    /* how far its history reaches: the entries the process had recorded by then (one process's
     * history only grows).  Not a time: a recovery's dump time is its last entry's, a SIGUSR1
     * dump after a quiet spell is later and holds no more, and the flight record and the ring
     * stamp one entry a few ns apart. */
    id->kept = s->nentries;
    id->reach = s->nentries;
    for (uint32_t i = 0; i < s->ntraces; i++) id->reach += s->traces[i].dropped;
    id->torch = s->torch != NULL;
    id->lost = CMH_HISTORY_LOST_BEYOND_DEATH(&s->history_lost) != 0;
}

int cmh_same_process(const cmh_record_id *a, const cmh_record_id *b)
{
    return a->pid > 0 && a->pid == b->pid && a->start_time_ns && a->start_time_ns == b->start_time_ns && !strcmp(a->host, b->host);
}

/* Whether a's record holds all that b's does (cmh_record_holds); read without their entries,
 * the later dump holds more. */
static int holds_all(const cmh_record_id *a, const cmh_record_id *b)
{
    if (b->torch && !a->torch) return 0;
    if (a->kept || b->kept ? a->reach < b->reach || a->kept < b->kept : a->dump_time_ns < b->dump_time_ns) return 0;
    /* a history lost in part (cut, damaged records) is not known to hold what b has whole */
    return !a->lost || b->lost;
}

int cmh_record_holds(const cmh_record_id *a, const cmh_record_id *b)
{
    int ab = holds_all(a, b), ba = holds_all(b, a);
    return ab && ba ? CMH_HOLDS_SAME : ab ? CMH_HOLDS_MORE : ba ? CMH_HOLDS_LESS : CMH_HOLDS_APART;
}
