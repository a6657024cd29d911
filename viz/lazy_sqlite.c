/*
 * lazy_sqlite.c - SQLite, loaded when `export --format sqlite` first calls it (lazylib.h).
 */
#include <sqlite3.h>

#include "lazylib.h"

static cmh_lazylib g_sq = CMH_LAZYLIB("libsqlite3.so.0", "libsqlite3-0");

CMH_LAZY(g_sq, int, sqlite3_bind_int64, (sqlite3_stmt *s, int i, sqlite3_int64 v), (s, i, v))
CMH_LAZY(g_sq, int, sqlite3_bind_null, (sqlite3_stmt *s, int i), (s, i))
CMH_LAZY(g_sq, int, sqlite3_bind_text, (sqlite3_stmt *s, int i, const char *t, int n, void (*d)(void *)), (s, i, t, n, d))
CMH_LAZY(g_sq, int, sqlite3_clear_bindings, (sqlite3_stmt *s), (s))
CMH_LAZY(g_sq, int, sqlite3_close, (sqlite3 *db), (db))
CMH_LAZY(g_sq, int, sqlite3_errcode, (sqlite3 *db), (db))
CMH_LAZY(g_sq, const char *, sqlite3_errmsg, (sqlite3 *db), (db))
CMH_LAZY(g_sq, int, sqlite3_exec, (sqlite3 *db, const char *sql, int (*cb)(void *, int, char **, char **), void *arg, char **errmsg),
         (db, sql, cb, arg, errmsg))
CMH_LAZY(g_sq, int, sqlite3_finalize, (sqlite3_stmt *s), (s))
CMH_LAZY(g_sq, int, sqlite3_open_v2, (const char *filename, sqlite3 **db, int flags, const char *vfs), (filename, db, flags, vfs))
CMH_LAZY(g_sq, int, sqlite3_prepare_v2, (sqlite3 *db, const char *sql, int n, sqlite3_stmt **s, const char **tail), (db, sql, n, s, tail))
CMH_LAZY(g_sq, int, sqlite3_reset, (sqlite3_stmt *s), (s))
CMH_LAZY(g_sq, int, sqlite3_step, (sqlite3_stmt *s), (s))
CMH_LAZY(g_sq, int, sqlite3_system_errno, (sqlite3 *db), (db))
