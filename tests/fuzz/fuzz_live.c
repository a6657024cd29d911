/*
 * fuzz_live.c - libFuzzer target for the live reader (cumemhist/live.h: top, snapshot and the
 * exporter): the input is a flight record that grows while it is read.  Its first part (the
 * first byte says how much) is read, then the rest is appended and read by a refresh, as a
 * running writer's records would be, then the state becomes a snapshot and is summarized.
 * Seeds are the flight target's (real records of a killed sample).  scripts/fuzz.sh live.
 */
#include "fuzz_util.h"

#include <stdint.h>
#include <unistd.h>

#include "cumemhist/live.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path;
    int fd = fuzz_memfd("live", &path);
    if (!size) return 0;
    size_t first = 12288 + (size_t)data[0] * 512;
    if (first > size - 1) first = size - 1;
    if (ftruncate(fd, 0) || pwrite(fd, data + 1, first, 0) != (ssize_t)first) abort();
    cmh_live *l;
    char err[512];
    if (cmh_live_open(path, 4096, &l, err, sizeof err) == CMH_OK) {
        if (pwrite(fd, data + 1 + first, size - 1 - first, (off_t)first) != (ssize_t)(size - 1 - first)) abort();
        cmh_live_refresh(l, err, sizeof err);
        cmh_live_device d[8];
        cmh_live_devices(l, d, 8);
        cmh_snapshot s;
        if (cmh_live_snapshot(l, &s) == CMH_OK) {
            fuzz_summarize_devices(&s);
            cmh_snapshot_free(&s);
        }
        cmh_live_close(l);
    }
    return 0;
}
