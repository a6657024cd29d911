/*
 * names_lib.c - a stand-in for NVIDIA's cuBLASLt, by name only (built as libcublasLt.so.12 for
 * tests/names_test.sh): its create call takes a workspace from the driver, as cublasLtCreate
 * does, so that the workspace's owner is the library.
 */
#include <cuda.h>

__attribute__((noinline)) int cublasLtCreate(CUdeviceptr *workspace, size_t bytes)
{
    return cuMemAlloc(workspace, bytes) == CUDA_SUCCESS ? 0 : 1;
}
