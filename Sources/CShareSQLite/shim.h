// SQLite for the shared folders' indexes (libsqlite3, Debian's): a file per device in its state folder, written in
// transactions, intact after a kill.
#ifndef CSHARE_SQLITE_SHIM_H
#define CSHARE_SQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro Swift cannot see: bound text and blobs are copied by SQLite.
static inline void (*cshare_sqlite_transient(void))(void *) { return SQLITE_TRANSIENT; }

#endif
