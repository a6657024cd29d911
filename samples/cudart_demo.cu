// cudart_demo.cu - a CUDA runtime program: cudaMalloc, cudaMallocAsync, cudaFree, a kernel.
//
// cudart reaches the driver through dlopen("libcuda.so.1") + cuGetProcAddress, not through
// linked symbols, so this is the program that shows the recorder's cuGetProcAddress and dlsym
// routes work.  It prints every pointer it gets ("alloc <hex> <bytes>") so a check can compare
// them with the snapshot, and with "bench N" times N cudaMalloc+cudaFree pairs.
//   nvcc -O2 -g -Xlinker -export-dynamic -o cudart_demo cudart_demo.cu
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                          \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                   \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

__global__ void scale(float *x, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 1.0f;
}

__attribute__((noinline)) void *make_buffer(size_t n)
{
    void *p;
    CK(cudaMalloc(&p, n));
    printf("alloc %p %zu\n", p, n);
    return p;
}

__attribute__((noinline)) void *make_async(size_t n, cudaStream_t s)
{
    void *p;
    CK(cudaMallocAsync(&p, n, s));
    printf("alloc %p %zu\n", p, n);
    return p;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "bench")) {
        long n = atol(argv[2]);
        void *p;
        CK(cudaFree(0));
        for (int i = 0; i < 100; i++) { CK(cudaMalloc(&p, 1 << 20)); CK(cudaFree(p)); }
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CK(cudaMalloc(&p, 1 << 20));
            CK(cudaFree(p));
        }
        printf("bench: %.1f ns per cudaMalloc+cudaFree pair (%ld pairs)\n", (now_ns() - t0) / n, n);
        return 0;
    }
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    const int n = 1 << 22;
    float *a = (float *)make_buffer(n * sizeof(float));
    float *b = (float *)make_buffer(3 << 20);
    float *c = (float *)make_async(5 << 20, s);
    float *d = (float *)make_async(1 << 16, s);
    CK(cudaMemset(a, 0, n * sizeof(float)));
    for (int i = 0; i < 10; i++) scale<<<(n + 255) / 256, 256, 0, s>>>(a, n, 1.5f);
    CK(cudaFreeAsync(c, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(b));
    CK(cudaFreeAsync(d, s));
    CK(cudaStreamSynchronize(s));
    printf("live %p\n", (void *)a); // a is deliberately never freed
    return 0;
}
