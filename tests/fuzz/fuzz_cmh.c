/*
 * fuzz_cmh.c - libFuzzer target for the .cmh reader (and the replay and the what-if allocator
 * model over what it accepts).
 * Build and run with scripts/fuzz.sh.
 */
#include "fuzz_util.h"

#include <stdint.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"
#include "cumemhist/whatif.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmh_snapshot s;
    char err[256];
    if (cmh_cmh_read(data, size, &s, err, sizeof err) != CMH_OK) return 0;
    fuzz_whatif_devices(&s, 0);
    cmh_snapshot_free(&s);
    return 0;
}
