/*
 * procaddr.c - the fake driver's cuGetProcAddress(_v2) (fakecuda.h): a table of every entry
 * point by base name, the cudaVersion its variant appeared in and whether it is the
 * per-thread-default-stream one, answered the way the real driver documents it.
 */
#include "fakecuda.h"

#include <string.h>

typedef struct proc_entry {
    const char *base;
    int version; /* the cudaVersion this variant appeared in */
    int ptsz;    /* 1: the per-thread-default-stream variant */
    void *fn;
} proc_entry;

#define P(b, v, f) {b, v, 0, (void *)(f)}
#define PT(b, v, f) {b, v, 1, (void *)(f)}

/* Newest variant of each base name first. */
static const proc_entry g_procs[] = {
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid),
    P("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease),
    P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset),
    P("cuCtxCreate", 12050, cuCtxCreate),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxDestroy", 4000, cuCtxDestroy),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 4000, cuStreamDestroy),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuStreamGetCtx", 9020, cuStreamGetCtx),
    P("cuStreamGetDevice", 12080, cuStreamGetDevice),
    P("cuEventCreate", 2000, cuEventCreate),
    P("cuEventRecord", 2000, cuEventRecord),
    P("cuEventSynchronize", 2000, cuEventSynchronize),
    P("cuEventDestroy", 4000, cuEventDestroy),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuMemGetInfo", 3020, cuMemGetInfo),
    P("cuMemcpyHtoD", 3020, cuMemcpyHtoD),
    P("cuMemcpyDtoH", 3020, cuMemcpyDtoH),
    P("cuMemsetD8", 3020, cuMemsetD8),
    P("cuMemAlloc", 3020, cuMemAlloc),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemFree", 3020, cuMemFree),
    P("cuMemAllocHost", 3020, cuMemAllocHost),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    P("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    P("cuMemFreeAsync", 11020, cuMemFreeAsync),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    P("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    P("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (cudaVersion > FAKE_DRIVER_VERSION) return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                    !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    int found_name = 0;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
        const proc_entry *e = &g_procs[i];
        if (strcmp(e->base, symbol) != 0) continue;
        found_name = 1;
        if (e->version > cudaVersion) continue;
        if (e->ptsz && !want_ptsz) continue;
        *pfn = e->fn;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (status) *status = found_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return found_name ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
