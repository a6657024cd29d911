/*
 * lock.h - the recorder's mutex: a futex lock that knows its holder in builds with
 * assertions, so that a helper which must be called with a lock held can say so with
 * assert(cmh_held(&lock)), as SQLite's sqlite3_mutex_held() does.  Without assertions
 * (release builds) it is the bare lock word and cmh_held() is not compiled in.
 *
 * The holder is an atomic word, written only by the thread that holds the lock; any thread
 * may read it.  A thread asking whether it holds a lock it does not hold reads either 0 or
 * another thread's id, never its own, so the answer is exact.
 */
#ifndef CMH_RECORDER_LOCK_H
#define CMH_RECORDER_LOCK_H

#include <assert.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h> /* ThreadSanitizer sees the lock through these */
#define CMH_TSAN_ACQUIRE(p) __tsan_acquire(p)
#define CMH_TSAN_RELEASE(p) __tsan_release(p)
#else
#define CMH_TSAN_ACQUIRE(p) ((void)0)
#define CMH_TSAN_RELEASE(p) ((void)0)
#endif

/* A futex lock (Drepper, "Futexes Are Tricky", mutex 3): 0 free, 1 held, 2 held with sleepers.
 * Uncontended, a lock is one compare-and-swap and an unlock one exchange, no call: the hooks
 * take two per event, and pthread_mutex_lock/unlock were a fifth of a recorded allocation.
 * Contended, a waiter sleeps in the kernel until the holder lets go. */
typedef struct cmh_mutex {
    uint32_t state;
#ifndef NDEBUG
    unsigned long holder; /* pthread_self() of the holder, 0 when free */
#endif
} cmh_mutex;

#ifndef NDEBUG
#define CMH_MUTEX_INITIALIZER {0, 0}
#else
#define CMH_MUTEX_INITIALIZER {0}
#endif

static inline void cmh_mutex_init(cmh_mutex *l)
{
    __atomic_store_n(&l->state, 0u, __ATOMIC_RELAXED);
#ifndef NDEBUG
    __atomic_store_n(&l->holder, 0ul, __ATOMIC_RELAXED);
#endif
}

/* Contended: sleep at once.  Spinning first was measured slower with 8 threads on 2 cores (a
 * holder preempted mid-section makes every spinner burn its slice). */
static __attribute__((noinline, unused)) void cmh_lock_slow(cmh_mutex *l)
{
    int saved = errno; /* the program's errno is not ours to change */
    while (__atomic_exchange_n(&l->state, 2u, __ATOMIC_ACQUIRE) != 0)
        syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2u, NULL, NULL, 0);
    errno = saved;
}

static __attribute__((noinline, unused)) void cmh_unlock_wake(cmh_mutex *l)
{
    int saved = errno;
    syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

static inline void cmh_lock(cmh_mutex *l)
{
    uint32_t c = 0;
    if (!__atomic_compare_exchange_n(&l->state, &c, 1u, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) cmh_lock_slow(l);
    CMH_TSAN_ACQUIRE(l);
#ifndef NDEBUG
    __atomic_store_n(&l->holder, (unsigned long)pthread_self(), __ATOMIC_RELAXED);
#endif
}

static inline void cmh_unlock(cmh_mutex *l)
{
#ifndef NDEBUG
    __atomic_store_n(&l->holder, 0ul, __ATOMIC_RELAXED);
#endif
    CMH_TSAN_RELEASE(l);
    if (__atomic_exchange_n(&l->state, 0u, __ATOMIC_RELEASE) == 2u) cmh_unlock_wake(l);
}

#ifndef NDEBUG
static inline int cmh_held(cmh_mutex *l)
{
    return __atomic_load_n(&l->holder, __ATOMIC_RELAXED) == (unsigned long)pthread_self();
}
#endif

#endif
