/*
 * reload_clib.c - two C libraries with line tables for tests/reload_test.sh: loaded in turn at
 * one address, the lines a stack is given must come from the library it was captured in
 * (the offline symbolizer looks each frame up in its own module, not in whichever module lies
 * at the address).  Built with -g -O0; the test reads the lines of the two calls below.
 */
#ifdef RELOAD_B
volatile int g_b_calls;

void b_call(void (*f)(void))
{
    g_b_calls++;
    f(); /* B's call */
    g_b_calls++;
}
#else
volatile int g_a_calls;

void a_call(void (*f)(void))
{
    f(); /* A's call */
    g_a_calls++;
}
#endif
