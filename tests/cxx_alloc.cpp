// cxx_alloc.cpp - a C++ library that allocates through the driver, dlopen'ed RTLD_LOCAL by a C
// program the way Python loads extension modules: the recorder must still demangle its frames.
#include <cuda.h>

namespace cumemhist_test {
struct Pool {
    __attribute__((noinline)) CUdeviceptr grow(size_t bytes)
    {
        CUdeviceptr p = 0;
        return cuMemAlloc(&p, bytes) == CUDA_SUCCESS ? p : 0;
    }
};
} // namespace cumemhist_test

extern "C" CUdeviceptr cxx_alloc(size_t bytes)
{
    cumemhist_test::Pool pool;
    return pool.grow(bytes);
}
