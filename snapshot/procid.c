/*
 * procid.c - who a process is beyond its pid, from /proc: its start time (field 22 of
 * /proc/PID/stat, clock ticks after boot) and the boot's id.  The recorder writes both into a
 * flight record; `recover` compares them with the live system to tell a running writer from a
 * later process that was given the same pid.
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
