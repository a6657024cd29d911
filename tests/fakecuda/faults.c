/*
 * faults.c - fault injection for the fake driver (fakecuda.h; the FAKECUDA_FAIL syntax is in
 * fakecuda.c's opening comment): the faults armed from the environment or by fakecuda_inject(),
 * the per-name call counts that decide when one fires, and the fakecuda_on_unmap() hook.  The
 * recorder's "forward every result unchanged" tests stand on it.
 */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FAULTS 32
static struct fault {
    char name[48];
    long nth; /* 0 = every call */
    long calls;
    int code;
} g_faults[MAX_FAULTS];
static int g_nfaults = -1; /* -1: FAKECUDA_FAIL not read yet */
int g_armed = -1; /* -1 too: FAKECUDA_FAIL not read yet */
static pthread_mutex_t g_fault_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_fault_locked(const char *name, size_t len, long nth, int code)
{
    if (g_nfaults >= MAX_FAULTS || len >= sizeof g_faults[0].name) return;
    __atomic_store_n(&g_armed, 1, __ATOMIC_RELEASE);
    struct fault *f = &g_faults[g_nfaults++];
    memcpy(f->name, name, len);
    f->name[len] = 0;
    f->nth = nth;
    f->calls = 0;
    f->code = code;
}

static void read_faults_locked(void)
{
    g_nfaults = 0;
    __atomic_store_n(&g_armed, 0, __ATOMIC_RELEASE);
    const char *e = getenv("FAKECUDA_FAIL");
    for (const char *p = e; p && *p;) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *at = memchr(p, '@', (size_t)(end - p));
        const char *eq = memchr(p, '=', (size_t)(end - p));
        size_t nl = (size_t)((at ? at : eq ? eq : end) - p);
        long nth = at && at[1] != '*' ? strtol(at + 1, NULL, 10) : 0;
        int code = eq ? atoi(eq + 1) : CUDA_ERROR_INVALID_VALUE;
        add_fault_locked(p, nl, nth, code);
        p = *end ? end + 1 : end;
    }
}

/* Arm a fault: the nth next call of name (0 = every call) returns code. */
__attribute__((visibility("default"))) void fakecuda_inject(const char *name, long nth, int code)
{
    pthread_mutex_lock(&g_fault_lock);
    if (g_nfaults < 0) read_faults_locked();
    add_fault_locked(name, strlen(name), nth, code);
    pthread_mutex_unlock(&g_fault_lock);
}

__attribute__((visibility("default"))) void fakecuda_clear_faults(void)
{
    pthread_mutex_lock(&g_fault_lock);
    g_nfaults = 0;
    __atomic_store_n(&g_armed, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_fault_lock);
}

/* The code this call of name must fail with, or CUDA_SUCCESS. */
CUresult injected(const char *name)
{
    if (!__atomic_load_n(&g_armed, __ATOMIC_ACQUIRE)) return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_fault_lock);
    if (g_nfaults < 0) read_faults_locked();
    for (int i = 0; i < g_nfaults && r == CUDA_SUCCESS; i++) {
        struct fault *f = &g_faults[i];
        if (strcmp(f->name, name)) continue;
        f->calls++;
        if (!f->nth || f->calls == f->nth) r = (CUresult)f->code;
    }
    pthread_mutex_unlock(&g_fault_lock);
    return r;
}

void (*g_on_unmap)(CUdeviceptr, size_t);

__attribute__((visibility("default"))) void fakecuda_on_unmap(void (*fn)(CUdeviceptr, size_t)) { g_on_unmap = fn; }

void (*g_on_alloc)(CUdeviceptr, size_t);

/* fn runs inside each linear allocation that succeeds, after the memory is taken (cuMemGetInfo
 * counts it) and before the call returns: a test holds a thread there to have its allocation
 * "in flight", made by the driver and not yet seen by a hook (tests/inflight.c). */
__attribute__((visibility("default"))) void fakecuda_on_alloc(void (*fn)(CUdeviceptr, size_t))
{
    __atomic_store_n(&g_on_alloc, fn, __ATOMIC_RELEASE);
}
