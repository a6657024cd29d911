/*
 * strmatch.h - the few string tests the attribution rules are written in (a prefix, one of a
 * list, a suffix), shared by sites.c and torch_layout.c.  Private to analyzer/.
 */
#ifndef CMH_STRMATCH_H
#define CMH_STRMATCH_H

#include <string.h>

static inline int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static inline int starts_any(const char *s, const char *const *ps)
{
    for (; *ps; ps++)
        if (starts(s, *ps)) return 1;
    return 0;
}

static inline int equals_any(const char *s, const char *const *ps)
{
    for (; *ps; ps++)
        if (!strcmp(s, *ps)) return 1;
    return 0;
}

static inline int contains_any(const char *s, const char *const *ps)
{
    for (; *ps; ps++)
        if (strstr(s, *ps)) return 1;
    return 0;
}

static inline int ends(const char *s, const char *t)
{
    size_t a = strlen(s), b = strlen(t);
    return a >= b && !strcmp(s + a - b, t);
}

#endif
