/*
 * lazy_curses.c - ncurses, loaded when `top` starts its full screen (snapshot/lazylib.h): every
 * other command, and top --once/--json, never map it.  cmd_top.c calls these as functions
 * (NCURSES_NOMACROS) and none of ncurses' variables (stdscr, LINES, COLS), which a stub could not
 * forward.
 */
#define NCURSES_NOMACROS
#include <curses.h>

#include "lazylib.h"

static cmh_lazylib g_nc = CMH_LAZYLIB("libncurses.so.6", "libncurses6");

CMH_LAZY(g_nc, WINDOW *, initscr, (void), ())
CMH_LAZY(g_nc, int, endwin, (void), ())
CMH_LAZY(g_nc, int, cbreak, (void), ())
CMH_LAZY(g_nc, int, noecho, (void), ())
CMH_LAZY(g_nc, int, curs_set, (int v), (v))
CMH_LAZY(g_nc, int, keypad, (WINDOW *w, bool on), (w, on))
CMH_LAZY_VOID(g_nc, timeout, (int ms), (ms))
CMH_LAZY(g_nc, int, getch, (void), ())
CMH_LAZY(g_nc, int, erase, (void), ())
CMH_LAZY(g_nc, int, refresh, (void), ())
CMH_LAZY(g_nc, int, attron, (NCURSES_ATTR_T a), (a))
CMH_LAZY(g_nc, int, attroff, (NCURSES_ATTR_T a), (a))
CMH_LAZY(g_nc, int, mvaddnstr, (int y, int x, const char *s, int n), (y, x, s, n))
CMH_LAZY(g_nc, int, getmaxx, (const WINDOW *w), (w))
CMH_LAZY(g_nc, int, getmaxy, (const WINDOW *w), (w))
