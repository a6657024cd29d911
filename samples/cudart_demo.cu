// cudart_demo.cu - a CUDA runtime program: cudaMalloc, cudaMallocAsync, cudaFree, a kernel.
//
// cudart reaches the driver through dlopen("libcuda.so.1") + cuGetProcAddress, not through
// linked symbols, so this is the program that shows the recorder's cuGetProcAddress and dlsym
// routes work.  It prints every pointer it gets ("alloc <hex> <bytes>") so a check can compare
// them with the snapshot; "bench N" times N cudaMalloc+cudaFree pairs; "kernels N" times each of
// three kernels N times with CUDA events.
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

__global__ void add(float *x, const float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

__global__ void fill(float *x, int n, float v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

/* "kernels N": each kernel timed with CUDA events, one line per launch, for comparison with
 * what CUPTI records under `cumemhist record --kernels` */
static int kernels_mode(int reps)
{
    const int n = 1 << 24;
    float *a, *b;
    CK(cudaMalloc(&a, n * sizeof(float)));
    CK(cudaMalloc(&b, n * sizeof(float)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int r = 0; r < reps; r++) {
        for (int which = 0; which < 3; which++) {
            CK(cudaEventRecord(e0));
            if (which == 0) fill<<<(n + 255) / 256, 256>>>(a, n, 1.0f);
            else if (which == 1) scale<<<(n + 255) / 256, 256>>>(a, n, 1.5f);
            else add<<<(n + 255) / 256, 256>>>(a, b, n);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            printf("event %s %.6f\n", which == 0 ? "fill" : which == 1 ? "scale" : "add", ms);
        }
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 0;
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
    if (argc > 2 && !strcmp(argv[1], "kernels")) return kernels_mode(atoi(argv[2]));
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
