/*
 * unwind_mid.c - the library in between for tests/unwind_test.sh, built WITHOUT frame pointers
 * (-O2 -fomit-frame-pointer): it calls back into the program, so a stack goes program (frame
 * pointers) -> this library (none) -> program -> cuMemAlloc.  A walk that followed %rbp blindly
 * would skip the program frame that called in here; mid_clobber uses %rbp as a plain register
 * around the call, so a blind walk would read garbage there.
 */
#include <stdint.h>

typedef int (*mid_cb)(int);

__attribute__((noinline)) int mid_call(mid_cb cb, int d)
{
    volatile int pad = d; /* a frame of its own, no frame pointer */
    int r = cb(d) + pad;
    __asm__ volatile("" ::: "memory");
    return r;
}

/* Seven values live across the call: GCC keeps them in every callee-saved register, %rbp among
 * them, so %rbp holds a number of ours, not a frame address, while the callback runs. */
__attribute__((noinline)) int mid_clobber(mid_cb cb, int d)
{
    static volatile int src[7] = {3, 5, 7, 11, 13, 17, 19};
    int a = src[0] * d, b = src[1] + d, c = src[2] ^ d, e = src[3] - d, f = src[4] * 3 + d, g = src[5] << 2, h = src[6] + 2 * d;
    int r = cb(d);
    return r + (a * b) + (c ^ e) + (f * g) + h;
}
