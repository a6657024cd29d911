/*
 * lock.h - the recorder's mutex: a pthread mutex that knows its holder in builds with
 * assertions, so that a helper which must be called with a lock held can say so with
 * assert(cmh_held(&lock)), as SQLite's sqlite3_mutex_held() does.  Without assertions
 * (release builds) it is a bare pthread mutex and cmh_held() is not compiled in.
 *
 * The holder is an atomic word, written only by the thread that holds the lock; any thread
 * may read it.  A thread asking whether it holds a lock it does not hold reads either 0 or
 * another thread's id, never its own, so the answer is exact.
 */
#ifndef CMH_RECORDER_LOCK_H
#define CMH_RECORDER_LOCK_H

#include <assert.h>
#include <pthread.h>

typedef struct cmh_mutex {
    pthread_mutex_t m;
#ifndef NDEBUG
    unsigned long holder; /* pthread_self() of the holder, 0 when free */
#endif
} cmh_mutex;

#ifndef NDEBUG
#define CMH_MUTEX_INITIALIZER {PTHREAD_MUTEX_INITIALIZER, 0}
#else
#define CMH_MUTEX_INITIALIZER {PTHREAD_MUTEX_INITIALIZER}
#endif

static inline void cmh_mutex_init(cmh_mutex *l)
{
    pthread_mutex_init(&l->m, NULL);
#ifndef NDEBUG
    __atomic_store_n(&l->holder, 0ul, __ATOMIC_RELAXED);
#endif
}

static inline void cmh_lock(cmh_mutex *l)
{
    pthread_mutex_lock(&l->m);
#ifndef NDEBUG
    __atomic_store_n(&l->holder, (unsigned long)pthread_self(), __ATOMIC_RELAXED);
#endif
}

static inline void cmh_unlock(cmh_mutex *l)
{
#ifndef NDEBUG
    __atomic_store_n(&l->holder, 0ul, __ATOMIC_RELAXED);
#endif
    pthread_mutex_unlock(&l->m);
}

#ifndef NDEBUG
static inline int cmh_held(cmh_mutex *l)
{
    return __atomic_load_n(&l->holder, __ATOMIC_RELAXED) == (unsigned long)pthread_self();
}
#endif

#endif
