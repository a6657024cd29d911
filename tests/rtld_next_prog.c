/*
 * rtld_next_prog.c - runs under LD_PRELOAD of libcumemhist and preload_malloc_wrap in either
 * order: mallocs through the wrapper, and looks a driver name up through our dlsym.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    unsigned long *calls = (unsigned long *)dlsym(RTLD_DEFAULT, "wrap_calls");
    if (!calls) {
        fprintf(stderr, "the malloc wrapper is not preloaded\n");
        return 2;
    }
    for (int i = 0; i < 1000; i++) {
        void *volatile p = malloc((size_t)i + 1); /* volatile: gcc elides a bare malloc/free pair */
        free(p);
    }
    if (*calls < 1000) {
        fprintf(stderr, "malloc did not go through the wrapper (%lu calls)\n", *calls);
        return 1;
    }
    /* our own RTLD_NEXT lookups resolve from this program, not from the interposer */
    void *next_malloc = dlsym(RTLD_NEXT, "malloc");
    if (!next_malloc) {
        fprintf(stderr, "dlsym(RTLD_NEXT, malloc) failed\n");
        return 1;
    }
    /* a "cu" name on RTLD_DEFAULT goes through the interposer's slow path and still works */
    void *gpa = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    printf("ok: %lu wrapped mallocs, cuGetProcAddress_v2 %s\n", *calls, gpa ? "found" : "absent");
    return gpa ? 0 : 1;
}
