/*
 * probe_lib.c - built twice (PROBE_NAME 'A' and 'B') and preloaded after libcumemhist: A asks
 * dlsym(RTLD_NEXT, "cmh_probe_name") and must get B's, which holds only if our dlsym interposer
 * reached glibc's with A's return address (a true tail jump).  Works under sanitizers, where a
 * preloaded malloc wrapper cannot.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

char cmh_probe_name(void) { return PROBE_NAME; }

#if PROBE_NAME == 'A'
char cmh_probe_next(void)
{
    char (*next)(void) = (char (*)(void))dlsym(RTLD_NEXT, "cmh_probe_name");
    return next ? next() : '?';
}
#endif
