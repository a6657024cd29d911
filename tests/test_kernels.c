/*
 * test_kernels.c MODE SNAPSHOT - the recorder with the CUPTI sidecar over the fake driver and
 * the fake libcupti (tests/fakecupti).  MODE says what the environment set up:
 *   ok        three synthetic kernels, 3 dropped records: every field decoded, clocks aligned
 *   offset    the same with the timestamp callback refused: the measured offset aligns them
 *   refused   CUPTI refuses the subscriber: "kernel timing unavailable", memory still recorded
 *   absent    the sidecar cannot be loaded: the same
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/recorder.h"
#include "cumemhist/snapshot.h"

#define CHECK(c)                                                                                                 \
    do {                                                                                                         \
        if (!(c)) {                                                                                              \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                              \
            return 1;                                                                                            \
        }                                                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    const char *mode = argv[1];
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&d, 0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&c, d) == CUDA_SUCCESS && cuCtxSetCurrent(c) == CUDA_SUCCESS);
    CHECK(cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS); /* first use of the driver: the sidecar starts */
    CHECK(cmh_dump_snapshot(argv[2]) == CMH_OK);
    cmh_snapshot s;
    char err[256];
    CHECK(cmh_snapshot_load(argv[2], &s, err, sizeof err) == CMH_OK);
    CHECK(s.nentries == 1 && s.entries[0].action == CMH_ACT_SEGMENT_ALLOC); /* memory is recorded in every mode */
    const char *status = cmh_str(&s, s.kernels_status);
    printf("%s: status '%s', %u kernels, %llu dropped\n", mode, status, s.nkernels, (unsigned long long)s.kernels_dropped);
    if (!strcmp(mode, "ok") || !strcmp(mode, "offset")) {
        CHECK(!strcmp(status, "ok"));
        CHECK(s.nkernels == 3);
        CHECK(s.kernels_dropped == 3);
        const cmh_kernel *k = &s.kernels[0];
        CHECK(!strcmp(cmh_str(&s, k->name), "gemm(float*, int)")); /* demangled from _Z4gemmPfi */
        CHECK(k->end_ns - k->start_ns == 1000);
        CHECK(k->stream == 7 && k->device == 0);
        CHECK(k->grid[0] == 128 && k->grid[1] == 1 && k->grid[2] == 1);
        CHECK(k->block[0] == 256 && k->block[1] == 1 && k->block[2] == 1);
        CHECK(k->registers == 32 && k->shared_bytes == 3072 && k->correlation == 1);
        CHECK(!strcmp(cmh_str(&s, s.kernels[2].name), "relu"));
        CHECK(s.kernels[2].stream == 8 && s.kernels[2].correlation == 3);
        CHECK(s.kernels[1].start_ns == s.kernels[0].end_ns + 500);
        /* on the recorder's clock: the kernels start within a second of the allocation */
        int64_t dt = s.kernels[0].start_ns - cmh_entry_time(&s, &s.entries[0]);
        printf("%s: first kernel starts %.3f ms after the first allocation\n", mode, dt / 1e6);
        CHECK(dt > -1000000000ll && dt < 1000000000ll);
    } else if (!strcmp(mode, "refused")) {
        CHECK(strstr(status, "kernel timing unavailable: cuptiActivityEnable(CONCURRENT_KERNEL): "
                             "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
        CHECK(s.nkernels == 0);
    } else {
        CHECK(strstr(status, "kernel timing unavailable: "));
        CHECK(s.nkernels == 0);
    }
    cmh_snapshot_free(&s);
    cuMemFree(p);
    return 0;
}
