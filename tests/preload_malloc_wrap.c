/*
 * preload_malloc_wrap.c - a second preloaded library that wraps malloc/free through
 * dlsym(RTLD_NEXT, ...), as heaptrack-like tools do.  If libcumemhist's dlsym interposer
 * changed the caller glibc sees, RTLD_NEXT would resolve from the wrong object and, in one of the
 * two preload orders, hand this library its own malloc: it detects that and aborts (rather than
 * recursing forever).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static char boot[65536];
static size_t boot_used;
static __thread int in_lookup;
unsigned long wrap_calls;

static void die(const char *m)
{
    ssize_t w = write(2, m, strlen(m));
    (void)w;
    abort();
}

static void lookup(void)
{
    in_lookup = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    in_lookup = 0;
    if (!real_malloc || !real_free) die("preload_malloc_wrap: RTLD_NEXT found no malloc\n");
    if ((void *)real_malloc == (void *)malloc) die("preload_malloc_wrap: RTLD_NEXT returned our own malloc\n");
}

void *malloc(size_t n)
{
    if (!real_malloc) {
        if (in_lookup) { /* dlsym may allocate while we look up the real malloc */
            void *p = boot + boot_used;
            boot_used += (n + 15) & ~(size_t)15;
            if (boot_used > sizeof boot) die("preload_malloc_wrap: bootstrap heap exhausted\n");
            return p;
        }
        lookup();
    }
    __atomic_add_fetch(&wrap_calls, 1, __ATOMIC_RELAXED);
    return real_malloc(n);
}

void free(void *p)
{
    if ((char *)p >= boot && (char *)p < boot + sizeof boot) return;
    if (!real_free) lookup();
    real_free(p);
}
