/*
 * slow_walk.c - a preloaded dl_iterate_phdr that holds the loader's lock a while: a walk made by
 * any thread but the process's first stays inside the real one (whose lock it holds) for
 * SLOW_WALK_MS milliseconds (default 300), and slow_walk_inside says how many such walks are
 * under way.  tests/fork_walk.c forks during one: the window a recorder thread's walk leaves
 * open by chance, made wide enough to hit every time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int slow_walk_inside;

typedef int (*walk_cb)(struct dl_phdr_info *, size_t, void *);
typedef struct {
    walk_cb cb;
    void *arg;
    int slept;
} walk_arg;

static int slow_cb(struct dl_phdr_info *info, size_t size, void *a)
{
    walk_arg *w = a;
    if (!w->slept) {
        w->slept = 1;
        const char *e = getenv("SLOW_WALK_MS");
        long ms = e ? atol(e) : 300;
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        __atomic_add_fetch(&slow_walk_inside, 1, __ATOMIC_SEQ_CST);
        nanosleep(&ts, NULL);
        __atomic_sub_fetch(&slow_walk_inside, 1, __ATOMIC_SEQ_CST);
    }
    return w->cb(info, size, w->arg);
}

int dl_iterate_phdr(walk_cb cb, void *arg)
{
    static int (*real)(walk_cb, void *);
    if (!real) real = (int (*)(walk_cb, void *))dlsym(RTLD_NEXT, "dl_iterate_phdr");
    if (syscall(SYS_gettid) == getpid()) return real(cb, arg);
    walk_arg w = {cb, arg, 0};
    return real(slow_cb, &w);
}
