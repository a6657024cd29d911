/*
 * fuzz_flight.c - libFuzzer target for the flight-record reader (cumemhist recover): the
 * header, the extents, torn and foreign records, and the state it rebuilds from them.  The
 * reader maps a file, so each input is written to a memory file first.  Seeds are real flight
 * records of a killed sample, compacted by flight_seed.c.  Build and run with scripts/fuzz.sh
 * flight.
 */
#include "fuzz_util.h"

#include <stdint.h>
#include <unistd.h>

#include "cumemhist/recover.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path;
    int fd = fuzz_memfd("flight", &path);
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    cmh_snapshot s;
    cmh_recover_info info;
    char err[512];
    if (cmh_flight_recover(path, &s, &info, err, sizeof err) != CMH_OK) return 0;
    fuzz_summarize_devices(&s);
    cmh_snapshot_free(&s);
    return 0;
}
