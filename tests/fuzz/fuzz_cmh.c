/*
 * fuzz_cmh.c - libFuzzer target for the .cmh reader (and the replay over what it accepts).
 * Build and run with scripts/fuzz.sh.
 */
#include <stdint.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmh_snapshot s;
    char err[256];
    if (cmh_cmh_read(data, size, &s, err, sizeof err) != CMH_OK) return 0;
    int32_t devs[8];
    int nd = cmh_snapshot_devices(&s, devs, 8);
    for (int i = 0; i < nd && i < 8; i++) {
        cmh_mem_stats st;
        cmh_summary_compute(&s, devs[i], &st);
    }
    cmh_snapshot_free(&s);
    return 0;
}
