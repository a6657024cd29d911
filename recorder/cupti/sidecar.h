/*
 * sidecar.h - the contract between the recorder and its CUPTI sidecar (libcumemhist_cupti.so).
 *
 * The recorder dlopen()s the sidecar only when kernel timing is asked for, so programs that do
 * not want CUPTI never load it.  Every function returns 0 on success; on failure it writes a
 * short reason ("libcupti: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", ...) into why.
 * Times are CLOCK_REALTIME nanoseconds, the recorder's clock.
 */
#ifndef CMH_SIDECAR_H
#define CMH_SIDECAR_H

#include <stddef.h>
#include <stdint.h>

typedef struct cmh_kernel_rec {
    const char *name; /* as CUPTI reports it (mangled); valid until the process exits */
    int32_t device;
    uint32_t stream;
    uint64_t start_ns, end_ns;
    int32_t grid[3], block[3];
    uint16_t registers;
    uint32_t shared_bytes; /* static + dynamic */
    uint32_t correlation;
} cmh_kernel_rec;

/* Subscribe to CONCURRENT_KERNEL activity, flushing every flush_ms. */
typedef int (*cmh_sidecar_start_fn)(int flush_ms, char *why, size_t whylen);
/* Force a flush, then hand every kernel recorded so far to fn, in completion order. */
typedef int (*cmh_sidecar_collect_fn)(void (*fn)(void *arg, const cmh_kernel_rec *k), void *arg, uint64_t *dropped,
                                      char *why, size_t whylen);

#define CMH_SIDECAR_START "cmh_sidecar_start"
#define CMH_SIDECAR_COLLECT "cmh_sidecar_collect"

#endif
