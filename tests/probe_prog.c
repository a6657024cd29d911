/* probe_prog.c - see probe_lib.c */
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
    char (*next)(void) = (char (*)(void))dlsym(RTLD_DEFAULT, "cmh_probe_next");
    if (!next) {
        fprintf(stderr, "probe library A is not preloaded\n");
        return 2;
    }
    char got = next();
    printf("dlsym(RTLD_NEXT) from A found %c's symbol\n", got);
    return got == 'B' ? 0 : 1;
}
